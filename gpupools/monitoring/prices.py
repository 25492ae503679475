"""List prices per GPU from the catalog, so waste is told in money: the recording rules price each holder with them,
and the idle report prices idle hours.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpupools.core.catalog import Catalog, load_catalog


@dataclass(frozen=True)
class Price:
    """The list price of one GPU, per hour, and the instance type it is taken from."""

    gpu: str  # catalog GPU name
    usd_per_hour: float  # per whole GPU
    source: str  # the instance type (or GCP accelerator) it comes from


def gpu_list_prices(cloud: str | None = None, catalog: Catalog | None = None) -> dict[str, Price]:
    """Per catalog GPU, the lowest per-GPU list price among the instance types that carry it (node price / GPUs).

    The lowest, because waste reported at the cheapest way to rent that GPU is a floor nobody can argue down.
    With a cloud, only that cloud's offers count, unless it sells the GPU only as an attached accelerator (GCP N1),
    whose GPU-only price is then used; without one (the idle report), every cloud's offers count.
    """
    catalog = catalog or load_catalog()
    clouds = [cloud] if cloud else list(catalog.instances)
    prices: dict[str, Price] = {}

    def offer(gpu: str, usd: float, source: str) -> None:
        if gpu not in prices or usd < prices[gpu].usd_per_hour:
            prices[gpu] = Price(gpu, round(usd, 4), source)

    for c in clouds:
        for inst in catalog.instances.get(c, {}).values():
            if inst.gpu is not None and inst.gpus and inst.price is not None:
                offer(inst.gpu.name, inst.price / inst.gpus, f"{c} {inst.name}")
    for c in clouds:
        for acc in catalog.attachable(c).values():
            if acc.gpu.name not in prices or cloud is None:
                offer(acc.gpu.name, acc.price_per_gpu, f"{c} {acc.name} (GPU only)")
    if cloud is not None:  # a GPU this cloud does not sell still gets a price if dcgm reports it
        for gpu, price in gpu_list_prices(None, catalog).items():
            prices.setdefault(gpu, price)
    return prices
