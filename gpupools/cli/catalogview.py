"""`gpupools catalog`: the GPU instance types gpupools knows, as a table or JSON rows.

Its own module, apart from the plan report, so that the command reads the catalog without importing what a plan needs
(the stack models, the plan runner and every capability): a third of the time `gpupools catalog` took.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from gpupools.core.catalog import load_catalog


def catalog_rows(cloud: str | None) -> list[dict]:
    catalog = load_catalog()
    rows = []
    for name_cloud, types in catalog.instances.items():
        if cloud and name_cloud != cloud:
            continue
        for it in types.values():
            if it.gpu is None:
                continue
            rows.append({"cloud": name_cloud, "instanceType": it.name, "gpu": it.gpu.name, "gpus": it.gpus, "gpuMemoryGb": it.gpu.memory_gb,
                         "mig": list(it.gpu.mig_profiles), "pricePerHour": it.price,
                         "pricePerGpuHour": round(it.price / it.gpus, 4) if it.price is not None else None,
                         "priceRead": it.price_read, "accelerator": it.accelerator, **catalog_fabric_row(catalog, name_cloud, it.name),
                         "source": it.source, "sourceCite": catalog.row_sources[it.source].cite if it.source else None})
        # Accelerators attached to general-purpose machines (GCP's N1): one row per accelerator, over those machines.
        n1 = [it.name for it in types.values() if it.gpu is None]
        n1_source = next((it.source for it in types.values() if it.gpu is None), None)
        for acc in catalog.attachable(name_cloud).values():
            rows.append({"cloud": name_cloud, "instanceType": f"n1 ({', '.join(n1)}) + {acc.name}", "gpu": acc.gpu.name,
                         "gpus": "/".join(map(str, acc.counts)), "gpuMemoryGb": acc.gpu.memory_gb, "mig": [],
                         "pricePerHour": None, "pricePerGpuHour": acc.price_per_gpu, "priceRead": acc.price_read, "accelerator": acc.name,
                         "fabric": None, "localNvmeGb": None, "source": n1_source, "sourceCite": catalog.row_sources[n1_source].cite if n1_source else None})
    return rows


def catalog_fabric_row(catalog, cloud: str, name: str) -> dict:
    """The instance type's fabric in words (`efa x32`, `infiniband`, `gpudirect-tcpx x4`) and its local NVMe."""
    fabric = catalog.fabric_of(cloud, name)
    count = fabric.efa or fabric.extra_networks
    return {"fabric": (fabric.kind + (f" x{count}" if count else "")) if fabric.kind else None, "localNvmeGb": fabric.local_nvme_gb or None}


def print_catalog(rows: list[dict], console: Console | None = None, cloud: str | None = None) -> None:
    console = console or Console(highlight=False, emoji=False, width=200)
    table = Table(box=box.SIMPLE_HEAD)
    for col in ("cloud", "instance type", "GPU", "GPUs", "GB/GPU", "MIG profiles", "fabric", "USD/h", "USD/GPU-h", "read", "source"):
        table.add_column(col, justify="right" if col in ("GPUs", "GB/GPU", "USD/h", "USD/GPU-h") else "left")
    for r in rows:
        mig = ", ".join(r["mig"]) if r["mig"] else "-"
        unpriced = r["pricePerGpuHour"] is None
        price = f"{r['pricePerHour']:.3f}" if r["pricePerHour"] is not None else "-" if unpriced else "machine + GPUs"
        table.add_row(r["cloud"], r["instanceType"], r["gpu"], str(r["gpus"]), str(r["gpuMemoryGb"]), mig, r.get("fabric") or "-", price,
                      "-" if unpriced else f"{r['pricePerGpuHour']:.3f}", r["priceRead"], r.get("source") or "-")
    console.print(table)
    catalog = load_catalog()
    console.print("Approximate on-demand Linux list prices in " + ", ".join(f"{c} {r}" for c, r in catalog.price_region.items()) + ".")
    for key in dict.fromkeys(r.get("source") for r in rows if r.get("source")):
        console.print(f"{key}: {catalog.row_sources[key].cite}")
    refused = [(c, name, why) for c, types in catalog.refused.items() if cloud in (None, c) for name, why in types.items()]
    if refused:
        console.print("Known and refused (a pool naming one gets this line as its instanceType error):")
        for c, name, why in refused:
            console.print(f"  {c} {name}: {why}", markup=False)
