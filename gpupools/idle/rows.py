"""The report's rows and totals: what the idle report answers (`Report`, one `IdleGpu` per holder listed), how the
counts per holder become rows in physical GPUs and dollars (`build_report`), and the two facts about the cluster that
needs (each node's pool, each vgpu pool's vGPUs per GPU).

Apart from the counting (`idle.counting`), which knows nothing of models, shares or prices, and from the text
(`idle.text`), which only writes these rows out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from gpupools.core.catalog import load_catalog
from gpupools.idle.counting import Holder
from gpupools.idle.promapi import Prometheus
from gpupools.idle.questions import Steps
from gpupools.idle.reserved import ReservedIdle
from gpupools.monitoring.prices import gpu_list_prices
from gpupools.monitoring.promql import VGPU_SHARES, node_pool


@dataclass
class IdleGpu:
    """One holder of a GPU unit (a whole GPU, a MIG instance, a time-slice or a vGPU) that sat idle in the window."""

    namespace: str | None
    pod: str | None
    node: str
    pool: str | None
    gpu: str  # the GPU index on the node, with the MIG profile for a MIG instance
    model: str  # NVML model name as dcgm-exporter reports it
    catalog_gpu: str | None
    unit: str  # gpu, mig, time-slice, vgpu or kai-fraction: what of the GPU this holder holds
    share: float | None  # the fraction of the physical GPU held while idle (averaged over idle steps); None: unknown MIG profile
    hours_idle: float  # wall-clock hours the holder's unit spent below the threshold
    hours_seen: float  # wall-clock hours it reported metrics in the window
    gpu_hours_idle: float | None  # physical GPU-hours: hours idle times the share held at each step
    max_utilization: float  # over every step seen in the window, idle or not
    usd_per_hour: float | None  # list price of what this holder holds (the GPU's price times its share)
    wasted_usd: float | None
    exact_usd: float | None = field(default=None, repr=False)  # unrounded, so totals do not add up rounding

    def as_json(self) -> dict:
        out = asdict(self)
        del out["exact_usd"]
        return out


@dataclass
class Report:
    window_seconds: int
    below: float
    min_idle_seconds: int  # holders idle for less are not listed; the whole window when `whole_window`
    whole_window: bool
    gpus_seen: int  # physical GPUs that reported metrics
    step_seconds: int = 60  # how finely idleness is judged
    counted_from: str = "raw samples"  # or "recorded idle steps", when the stack's rules cover the window
    idle: list[IdleGpu] = field(default_factory=list)
    # namespace -> [(timestamp, average utilization)], for the plot
    by_namespace: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    reserved: list[ReservedIdle] = field(default_factory=list)

    @property
    def reserved_wasted(self) -> float:
        return round(sum(r.wasted_usd for r in self.reserved), 2)

    @property
    def total_wasted(self) -> float:
        return round(sum(g.exact_usd if g.exact_usd is not None else g.wasted_usd or 0 for g in self.idle), 2)

    @property
    def gpu_hours_idle(self) -> float:
        """Physical GPU-hours: a 1g.5gb slice idle for 7 hours is one A100-hour, a GPU time-sliced among 4 pods 1/4 each."""
        return round(sum(g.gpu_hours_idle or 0 for g in self.idle), 2)

    @property
    def gpus_idle(self) -> float:
        """Physical GPUs the listed holders hold, each counted by its share of the GPU it lives on."""
        return round(sum(g.share or 0 for g in self.idle), 2)

    def as_json(self) -> dict:
        return {"window_seconds": self.window_seconds, "below": self.below, "min_idle_seconds": self.min_idle_seconds,
                "whole_window": self.whole_window, "step_seconds": self.step_seconds, "counted_from": self.counted_from,
                "gpus_seen": self.gpus_seen, "gpus_idle": self.gpus_idle,
                "gpu_hours_idle": self.gpu_hours_idle, "wasted_usd": self.total_wasted, "idle": [g.as_json() for g in self.idle],
                "reserved_wasted_usd": self.reserved_wasted, "reserved_unused": [asdict(r) for r in self.reserved]}


UNALLOCATED = "(unallocated)"


def build_report(holders: list[Holder], grid: Steps, window: int, below: float, min_idle: int = 0, whole_window: bool = False,
                 vgpus: dict[str, int] | None = None, pools: dict[str, str] | None = None) -> Report:
    """Rows and physical totals from what Prometheus counted per holder.

    A holder holds a share of a physical GPU: 1 / (instances of its MIG profile per GPU) for a MIG instance,
    1 / (vGPUs per GPU) on a vgpu pool (`vgpus`, from the stack's rules when Prometheus has them), and otherwise
    split among the holders of the same device at each step (time-slicing and MPS give several). Hours idle are
    wall-clock hours of the unit; GPU-hours and dollars weigh each idle step by the share.
    """
    catalog = load_catalog()
    prices = gpu_list_prices(None, catalog)
    vgpus, pools, step = vgpus or {}, pools or {}, grid.step
    report = Report(window_seconds=window, below=below, min_idle_seconds=min_idle, whole_window=whole_window, step_seconds=step,
                    gpus_seen=len({(h.labels.get("Hostname"), h.labels.get("UUID")) for h in holders}))
    for h in holders:
        m = h.labels
        if not h.idle or (whole_window and h.idle < h.seen) or h.idle * step < min_idle or not h.seen:
            continue
        model = catalog.gpu_by_device_name(m.get("modelName", ""))
        profile, pod = m.get("GPU_I_PROFILE"), m.get("pod")
        pool = m.get("pool") or pools.get(m.get("Hostname", ""))
        mig = 1.0
        if profile:
            count = model.mig_profiles.get(profile) if model else None
            mig = 1 / count if count else math.nan
        if pod and pool in vgpus:
            unit, shares = "vgpu", h.idle * mig / vgpus[pool]
        else:  # a time-slice held less than a whole device at some idle step
            alone = h.share is None or h.share >= h.idle - 1e-6
            unit = "mig" if profile else "gpu" if alone else "time-slice"
            shares = (h.idle if h.share is None else h.share) * mig
        gpu_hours = shares * step / 3600
        share = None if math.isnan(gpu_hours) else shares / h.idle
        usd = prices[model.name].usd_per_hour if model is not None and model.name in prices else None
        report.idle.append(IdleGpu(
            namespace=m.get("namespace") or None, pod=pod or None, node=m.get("Hostname", "?"), pool=pool or None,
            gpu=m.get("gpu", "?") + (f" {profile}" if profile else ""), model=m.get("modelName", "?"),
            catalog_gpu=model.name if model else None, unit=unit, share=None if share is None else round(share, 4),
            hours_idle=round(h.idle * step / 3600, 4), hours_seen=round(h.seen * step / 3600, 4),
            gpu_hours_idle=None if share is None else round(gpu_hours, 4),
            max_utilization=round(h.peak, 2) if not math.isnan(h.peak) else math.nan,
            usd_per_hour=None if usd is None or share is None else round(usd * share, 4),
            wasted_usd=None if usd is None or share is None else round(usd * gpu_hours, 2),
            exact_usd=None if usd is None or share is None else usd * gpu_hours))
    report.idle.sort(key=lambda g: (g.wasted_usd is None, -(g.wasted_usd or 0), -g.hours_idle, g.namespace or "", g.pod or ""))
    return report


def vgpus_per_gpu(prom: Prometheus, at: float, window: int) -> dict[str, int]:
    """vGPUs per GPU of each vgpu pool, from the stack's rules if this Prometheus ran them in the window (else empty,
    and vGPU holders are split among the pods holding the GPU like time-slices)."""
    result = prom.query(f"max by (pool) (last_over_time({VGPU_SHARES}[{window}s]))", at)
    return {s["metric"]["pool"]: int(s["value"]) for s in result if s["metric"].get("pool") and math.isfinite(s["value"]) and s["value"] >= 1}


def node_pools(prom: Prometheus, at: float, window: int) -> dict[str, str]:
    """Node name -> pool, from kube-state-metrics' node labels seen in the window (empty without the allowlist)."""
    result = prom.query(node_pool(window), at)
    return {s["metric"]["Hostname"]: s["metric"]["pool"] for s in result if s["metric"].get("Hostname") and s["metric"].get("pool")}
