"""`gpupools idle`: which GPUs sat idle over a window, who held them, and what that cost at list price.

It asks Prometheus (HTTP API, stdlib urllib) for the same per-GPU utilization the recording rules compute, so it
works against any Prometheus that scrapes dcgm-exporter, with or without gpupools' rules installed. One range
query gives every GPU holder's highest utilization per step over every scraped sample; a step is idle when that
stayed below the threshold, and a holder is listed once its idle steps add up to `--min-idle` (or, with
`--whole-window`, only when every step it was seen was idle).

Counting is in physical GPUs: a MIG instance is its profile's fraction of the GPU, a vGPU its pool's fraction, and
a time-sliced GPU is split among the pods holding it at each step, so totals add up to GPUs that exist. Waste is
priced with `monitoring.gpu_list_prices()` (the lowest per-GPU list price in the catalog) times those fractions.
"""

from __future__ import annotations

import math
import re
import time
from bisect import bisect_left
from dataclasses import asdict, dataclass, field
from typing import Any

from .catalog import load_catalog
from .errors import Problem
from .promapi import Prometheus, ReportError, parse_url  # noqa: F401 - parse_url, ReportError: the CLI's
from .prices import gpu_list_prices
from .promql import VGPU_SHARES, node_pool, utilization

MAX_POINTS = 1440  # steps per series: one per minute over a day, coarser beyond
_DURATION = re.compile(r"(?:([0-9]+)w)?(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
_UNITS = (7 * 86400, 86400, 3600, 60, 1)


def _seconds(text: str, option: str) -> int:
    match = _DURATION.fullmatch(text.strip()) if text else None
    if not match or not any(match.groups()):
        raise ReportError(Problem(option, f"{text!r} is not a duration such as 24h, 7d or 90m"), 2)
    return sum(int(g) * unit for g, unit in zip(match.groups(), _UNITS) if g)


def parse_window(text: str) -> int:
    """Seconds in a Prometheus-style duration such as 24h, 7d or 1h30m."""
    seconds = _seconds(text, "--window")
    if seconds < 600:
        raise ReportError(Problem("--window", f"{text!r} is shorter than the 10 minutes an idle judgement needs"), 2)
    return seconds


def parse_min_idle(text: str, window: int) -> int:
    """Seconds a holder must have been idle within the window to be listed (0 lists every idle step)."""
    seconds = _seconds(text, "--min-idle") if text.strip() not in ("0", "") else 0
    if seconds > window:
        raise ReportError(Problem("--min-idle", f"{text!r} is longer than the window ({human_window(window)})"), 2)
    return seconds


def parse_below(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ReportError(Problem("--below", f"{text!r} is not a number"), 2) from None
    if not 0 < value <= 100 or math.isnan(value):
        raise ReportError(Problem("--below", f"{text!r} must be a utilization percentage above 0 and at most 100"), 2)
    return value


# --------------------------------------------------------------------------------------------------------------------
# Options


def parse_timeout(text: str) -> int:
    seconds = _seconds(text, "--timeout")
    if not 1 <= seconds <= 3600:
        raise ReportError(Problem("--timeout", f"{text!r} must be between 1s and 1h"), 2)
    return seconds


# --------------------------------------------------------------------------------------------------------------------
# The report


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
    unit: str  # gpu, mig, time-slice or vgpu: what of the GPU this holder holds
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
    idle: list[IdleGpu] = field(default_factory=list)
    # namespace -> [(timestamp, average utilization)], for the plot
    by_namespace: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

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
                "whole_window": self.whole_window, "gpus_seen": self.gpus_seen, "gpus_idle": self.gpus_idle,
                "gpu_hours_idle": self.gpu_hours_idle, "wasted_usd": self.total_wasted, "idle": [g.as_json() for g in self.idle]}


def step_for(window: int) -> int:
    return max(60, math.ceil(window / MAX_POINTS))


def report_query(step: int) -> str:
    """Per holder and step, the highest utilization any scraped sample showed within that step.

    No pool join here: joining at every step of every series costs most of the query's time on a large fleet; the
    pools come from one instant query instead (`node_pools`).
    """
    return utilization(step)


def node_pools(prom: Prometheus, at: float, window: int) -> dict[str, str]:
    """Node name -> pool, from kube-state-metrics' node labels seen in the window (empty without the allowlist)."""
    result = prom.query(node_pool(window), at)
    return {s["metric"]["Hostname"]: s["metric"]["pool"] for s in result if s["metric"].get("Hostname") and s["metric"].get("pool")}


LOOKBACK = 300  # Prometheus' default lookback: a series scraped at least this often counts as present throughout


def fill_gaps(values: list[tuple[float, float]], step: int) -> list[tuple[float, float]]:
    """Steps between two samples at most `LOOKBACK` apart take the earlier sample's value, as an instant query would
    see them, so a GPU scraped every 2 or 5 minutes is held for every step, not only for the steps with a sample.
    Longer gaps (an exporter down, a node gone) stay gaps: neither idle nor busy. Nothing is extrapolated past
    the first or last sample."""
    if not values or abs(values[-1][0] - values[0][0] - (len(values) - 1) * step) < 1e-6:
        return values  # a sample at every step: nothing to fill (the common case, checked in constant time)
    out: list[tuple[float, float]] = []
    for ts, v in values:
        if out and step < ts - out[-1][0] <= LOOKBACK:
            last_ts, last_v = out[-1]
            out.extend((last_ts + k * step, last_v) for k in range(1, round((ts - last_ts) / step)))
        out.append((ts, v))
    return out


def _device(m: dict) -> tuple[str, str, str]:
    return m.get("Hostname", ""), m.get("UUID", ""), m.get("GPU_I_ID", "")


def build_report(result: list[dict], window: int, step: int, below: float, min_idle: int = 0, whole_window: bool = False,
                 vgpus: dict[str, int] | None = None, pools: dict[str, str] | None = None, since: float | None = None,
                 plot: bool = True) -> Report:
    """Rows and physical totals from the per-step maxima of every holder.

    Each step a holder is seen, it holds a share of a physical GPU: 1 / (instances of its MIG profile per GPU) for a
    MIG instance, 1 / (vGPUs per GPU) on a vgpu pool (`vgpus`, from the stack's rules when Prometheus has them), and
    otherwise split among the holders of the same device at that step (time-slicing and MPS give several). Hours
    idle are wall-clock hours of the unit; GPU-hours and dollars weigh each idle step by the share.
    """
    catalog = load_catalog()
    prices = gpu_list_prices(None, catalog)
    vgpus = vgpus or {}
    # `since`: the window's first step; earlier steps only serve to fill the first ones.
    def within(values: list) -> list:
        if since is None or not values or values[0][0] >= since - 1e-6:
            return values
        return values[bisect_left(values, since - 1e-6, key=lambda sample: sample[0]):]  # samples come in time order

    result = [{"metric": series["metric"], "values": within(fill_gaps(series["values"], step))} for series in result]
    result = [series for series in result if series["values"]]
    devices_at: dict[tuple, dict[float, int]] = {}  # (node, UUID, GPU instance) -> timestamp -> holders
    for series in result:
        counts = devices_at.setdefault(_device(series["metric"]), {})
        for ts, _ in series["values"]:
            counts[ts] = counts.get(ts, 0) + 1
    report = Report(window_seconds=window, below=below, min_idle_seconds=min_idle, whole_window=whole_window,
                    gpus_seen=len({(node, uuid) for node, uuid, _ in devices_at}))
    per_ns: dict[str, dict[float, list[float]]] = {}
    for series in result:
        m = series["metric"]
        values = series["values"]
        if plot:  # utilization per namespace and step: only the plot needs it, and it touches every sample
            points = per_ns.setdefault(m.get("namespace") or "(unallocated)", {})
            for ts, v in values:
                points.setdefault(ts, []).append(v)
        # A NaN sample (no data) proves nothing, so it is not idle.
        idle_at = [ts for ts, v in values if v < below]
        if not idle_at or (whole_window and len(idle_at) < len(values)) or len(idle_at) * step < min_idle:
            continue
        model = catalog.gpu_by_device_name(m.get("modelName", ""))
        profile, pod = m.get("GPU_I_PROFILE"), m.get("pod")
        pool = m.get("pool") or (pools or {}).get(m.get("Hostname", ""))
        holders = devices_at[_device(m)]
        mig = 1.0
        if profile:
            count = model.mig_profiles.get(profile) if model else None
            mig = 1 / count if count else math.nan
        if pod and pool in vgpus:
            unit, shares = "vgpu", [mig / vgpus[pool] for _ in idle_at]
        else:
            unit = "mig" if profile else "time-slice" if any(holders[ts] > 1 for ts in idle_at) else "gpu"
            shares = [mig / holders[ts] for ts in idle_at]
        gpu_hours = sum(shares) * step / 3600
        share = None if math.isnan(gpu_hours) else sum(shares) / len(shares)
        usd = prices[model.name].usd_per_hour if model is not None and model.name in prices else None
        report.idle.append(IdleGpu(
            namespace=m.get("namespace") or None, pod=pod or None, node=m.get("Hostname", "?"), pool=pool or None,
            gpu=m.get("gpu", "?") + (f" {profile}" if profile else ""), model=m.get("modelName", "?"),
            catalog_gpu=model.name if model else None, unit=unit, share=None if share is None else round(share, 4),
            hours_idle=round(len(idle_at) * step / 3600, 4), hours_seen=round(len(values) * step / 3600, 4),
            gpu_hours_idle=None if share is None else round(gpu_hours, 4),
            max_utilization=round(max(v for _, v in values), 2),
            usd_per_hour=None if usd is None or share is None else round(usd * share, 4),
            wasted_usd=None if usd is None or share is None else round(usd * gpu_hours, 2),
            exact_usd=None if usd is None or share is None else usd * gpu_hours))
    report.idle.sort(key=lambda g: (g.wasted_usd is None, -(g.wasted_usd or 0), -g.hours_idle, g.namespace or "", g.pod or ""))
    report.by_namespace = {ns: sorted((ts, sum(vs) / len(vs)) for ts, vs in points.items()) for ns, points in sorted(per_ns.items())}
    return report


def vgpus_per_gpu(prom: Prometheus, at: float, window: int) -> dict[str, int]:
    """vGPUs per GPU of each vgpu pool, from the stack's rules if this Prometheus ran them in the window (else empty,
    and vGPU holders are split among the pods holding the GPU like time-slices)."""
    result = prom.query(f"max by (pool) (last_over_time({VGPU_SHARES}[{window}s]))", at)
    return {s["metric"]["pool"]: int(s["value"]) for s in result if s["metric"].get("pool") and s["value"] >= 1}


SCRAPES_PER_HOUR = "max(count_over_time(DCGM_FI_DEV_GPU_UTIL[1h]) or count_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[1h]))"


def scrape_step(prom: Prometheus, at: float) -> int:
    """The shortest scrape interval of the last hour, rounded up to whole minutes and at most the lookback.

    Steps shorter than the scrape interval hold no sample of their own (they would only repeat the last one), so
    they cost time and tell nothing; the fastest-scraped GPU sets the step, so none of its samples is merged away.
    """
    counts = [s["value"] for s in prom.query(SCRAPES_PER_HOUR, at) if s["value"] >= 1]
    if not counts:
        return 60
    return min(LOOKBACK, max(60, math.ceil(3600 / max(counts) / 60) * 60))


def idle_report(prom: Prometheus | str, window: int, below: float, now: float | None = None, min_idle: int = 0,
                whole_window: bool = False, plot: bool = True) -> Report:
    end = time.time() if now is None else now
    prom = Prometheus(prom) if isinstance(prom, str) else prom
    step = max(step_for(window), scrape_step(prom, end))
    # Each instant covers the step before it, so the first instant is one step into the window: window / step steps.
    # The query starts up to LOOKBACK earlier, so a sample just before the window fills its first steps.
    start = end - window + step
    lead = math.ceil(LOOKBACK / step) * step
    result = prom.query_range(report_query(step), start - lead, end, step)
    return build_report(result, window, step, below, min_idle, whole_window, vgpus_per_gpu(prom, end, window),
                        node_pools(prom, end, window), since=start, plot=plot)


# --------------------------------------------------------------------------------------------------------------------
# Grouping by team

NO_TEAM = "(no team)"
UNALLOCATED = "(unallocated)"


def parse_by(text: str, teams: dict[str, str] | None) -> list[str] | None:
    """`--by team` (every team) or `--by team=a,b` (those teams), against the stack's teams (name -> namespace).

    Returns the teams to show, every one for plain `team`.
    """
    kind, _, names = text.partition("=")
    if kind != "team":
        raise ReportError(Problem("--by", f"{text!r}: group by `team` or `team=NAME[,NAME]`"), 2)
    if teams is None:
        raise ReportError(Problem("--by", "grouping by team needs the stack's teams: add --stack NAME or --config FILE"), 2)
    if not teams:
        raise ReportError(Problem("--by", "the stack defines no gpupools:teams"), 2)
    chosen = [n for n in names.split(",") if n] if names else list(teams)
    unknown = [n for n in chosen if n not in teams]
    if unknown:
        raise ReportError(Problem("--by", f"unknown team {unknown[0]!r}; the stack's teams: {', '.join(sorted(teams))}"), 2)
    return chosen


@dataclass
class TeamTotal:
    team: str
    namespace: str | None
    holders: int
    gpus_idle: float
    gpu_hours_idle: float
    wasted_usd: float


def by_team(report: Report, teams: dict[str, str], chosen: list[str]) -> list[TeamTotal]:
    """Idle GPUs, GPU-hours and waste per team (by the namespace each team owns), most wasteful first; holders in no
    team's namespace and unallocated GPUs get a line of their own when every team is shown."""
    owner = {ns: team for team, ns in teams.items()}
    rows: dict[str, list[IdleGpu]] = {}
    for g in report.idle:
        team = UNALLOCATED if g.namespace is None else owner.get(g.namespace, NO_TEAM)
        rows.setdefault(team, []).append(g)
    names = chosen + ([NO_TEAM, UNALLOCATED] if chosen == list(teams) else [])
    totals = [TeamTotal(team=name, namespace=teams.get(name), holders=len(rows.get(name, [])),
                        gpus_idle=round(sum(g.share or 0 for g in rows.get(name, [])), 2),
                        gpu_hours_idle=round(sum(g.gpu_hours_idle or 0 for g in rows.get(name, [])), 2),
                        wasted_usd=round(sum(g.exact_usd or 0 for g in rows.get(name, [])), 2))
              for name in names if name in teams or rows.get(name)]
    return sorted(totals, key=lambda t: (-t.wasted_usd, -t.gpu_hours_idle, t.team))


def format_teams(report: Report, totals: list[TeamTotal]) -> str:
    header = ("TEAM", "NAMESPACE", "HOLDERS", "GPUS IDLE", "GPU-HOURS", "WASTE (USD)")
    rows = [(t.team, t.namespace or "-", str(t.holders), f"{t.gpus_idle:g}", f"{t.gpu_hours_idle:.1f}", f"{t.wasted_usd:,.2f}") for t in totals]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) if i >= 2 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip() for row in [header, *rows]]
    lines.append(total_line(report))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------------------
# Output


def human_window(seconds: int) -> str:
    for unit, name in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds % unit == 0 and (unit != 86400 or seconds >= 3 * 86400):
            return f"{seconds // unit}{name}"
    return f"{seconds}s"


def fraction(share: float | None) -> str:
    """A share of a GPU as people say it: 1/7 for a 1g.5gb slice, 1/3 for a GPU time-sliced among three pods."""
    if share is None:
        return "?"
    if share >= 0.9999:
        return "1"
    for denominator in range(2, 65):
        if abs(share * denominator - round(share * denominator)) < 0.0005 * denominator:
            return f"{round(share * denominator)}/{denominator}"
    return f"{share:.2f}"


def total_line(report: Report) -> str:
    held = "for the whole window" if report.whole_window else f"for at least {human_window(report.min_idle_seconds)}" \
        if report.min_idle_seconds else "at some point"
    unknown = sum(1 for g in report.idle if g.wasted_usd is None)
    return (f"total: {report.gpus_idle:g} of {report.gpus_seen} GPUs held idle (below {report.below:g}% {held} in the last "
            f"{human_window(report.window_seconds)}), {report.gpu_hours_idle:.1f} GPU-hours idle, ${report.total_wasted:,.2f} wasted at list price"
            + (f" ({unknown} with a GPU model or MIG profile not in the catalog, not counted)" if unknown else ""))


def format_table(report: Report) -> str:
    header = ("NAMESPACE", "POD", "NODE", "POOL", "GPU", "MODEL", "SHARE", "HOURS IDLE", "GPU-HOURS", "MAX UTIL", "WASTE (USD)")
    rows = [(g.namespace or "-", g.pod or "(unallocated)", g.node, g.pool or "-", g.gpu, g.model,
             fraction(g.share) + ("" if g.unit == "gpu" else f" {g.unit}"), f"{g.hours_idle:.1f}",
             "?" if g.gpu_hours_idle is None else f"{g.gpu_hours_idle:.2f}", f"{g.max_utilization:.1f}%",
             "?" if g.wasted_usd is None else f"{g.wasted_usd:,.2f}") for g in report.idle]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    right = {7, 8, 9, 10}
    lines = ["  ".join(str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()
             for row in [header, *rows]]
    lines.append(total_line(report))
    return "\n".join(lines)


PLOT_HINT = "needs matplotlib, which a plain install leaves out: pip install 'gpupools[plot]'"


def plot_available() -> bool:
    """Whether `--plot` can draw; asked before querying, so a missing extra costs no Prometheus round trip."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot(report: Report, path: str) -> None:
    """Utilization per namespace over the window, with the idle threshold, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    from datetime import datetime, timezone

    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.8), dpi=110)
    for ns, points in report.by_namespace.items():
        ax.plot([datetime.fromtimestamp(ts, timezone.utc) for ts, _ in points], [v for _, v in points], label=ns, linewidth=1.4)
    ax.axhline(report.below, color="crimson", linestyle="--", linewidth=1, label=f"idle threshold ({report.below:g}%)")
    ax.set_ylim(0, 100)
    ax.set_ylabel("GPU utilization (%)")
    ax.set_xlabel("time (UTC)")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    ax.set_title(f"GPU utilization per namespace, last {human_window(report.window_seconds)}: "
                 f"{report.gpus_idle:g} GPUs held idle, {report.gpu_hours_idle:.1f} GPU-hours, ${report.total_wasted:,.2f} wasted at list price")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
