"""`gpupools idle`: which GPUs sat idle over a window, who held them, and what that cost at list price.

It works against any Prometheus that scrapes dcgm-exporter, with or without gpupools' rules installed, and counts
inside Prometheus, so only a few numbers per GPU holder travel: its idle steps, the steps it was seen, its peak and
its share of the device. Each step is judged by the highest sample scraped within it; a holder is listed once its
idle steps add up to `--min-idle` (or, with `--whole-window`, only when every step it was seen was idle). Where the
stack's rule group has recorded idle steps over the whole window, those are read with plain range functions;
elsewhere the same judgement runs as a subquery over the raw series.

Counting is in physical GPUs: a MIG instance is its profile's fraction of the GPU, a vGPU its pool's fraction, and
a time-sliced GPU is split among the pods holding it at each step, so totals add up to GPUs that exist. Waste is
priced with `prices.gpu_list_prices()` (the lowest per-GPU list price in the catalog) times those fractions.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import asdict, dataclass, field, replace

from gpupools.core.catalog import load_catalog
from gpupools.stack.errors import Problem
from gpupools.idle.promapi import Prometheus, ReportError
from gpupools.monitoring.prices import gpu_list_prices
from gpupools.monitoring.promql import KAI_RESERVATION_NAMESPACE as KAI_RESERVATIONS, KSM_GPU_FRACTION, KSM_GPU_GROUP, RESERVED_NODE_PRICE, reserved_unused
from gpupools.monitoring.promql import DEVICE, HOLDER_LABELS, IDLE_BELOW, IDLE_STEP, IDLE_STEPS_RAN, STEP_SECONDS, STEP_UTIL, VGPU_SHARES, node_pool, threshold

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
class ReservedIdle:
    """Reserved nodes of one pool that ran nothing: paid whether used or not."""

    pool: str
    nodes_unused: float  # on average over the window
    usd_per_node_hour: float  # on-demand list price of one node; a reservation bought cheaper costs less
    wasted_usd: float


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


def step_for(window: int) -> int:
    return max(60, math.ceil(window / MAX_POINTS))


UNALLOCATED = "(unallocated)"
HOLDER = ", ".join(HOLDER_LABELS)
LOOKBACK = 300  # Prometheus' default lookback: a series scraped at least this often counts as present throughout
# Steps per query: a day at one-minute steps is one query; longer windows are cut so that no query holds more than
# this many steps of every holder (Prometheus' 11,000-point limit is for range queries, but its sample limit counts
# a subquery's steps too: 8,192 holders x 1,440 steps is 11.8 million of the default 50 million).
CHUNK_STEPS = 1440
PARALLEL = 4  # queries in flight: Prometheus runs each query on one core, so a few at once use a server's cores
# Pieces each step-judging question is cut into at least, so that its work spreads over a server's cores; each piece
# costs a little of its own (finding the series, sending the answer), which more pieces would add up.
SPLIT = 1


@dataclass(frozen=True)
class Steps:
    """The report's time grid: `count` steps of `step` seconds, the last ending at `end`.

    Each step is judged by the highest sample scraped within it (`max_over_time(metric[step])`), so a burst between
    two evaluation instants still counts. With `fill`, a step with no sample of its own (a GPU scraped less often
    than the step) takes the last sample before it when samples lie at most `LOOKBACK` before and after it, as an
    instant query would see that GPU; a longer gap (an exporter down, a node gone) stays a gap, neither idle nor busy.
    """

    end: float
    step: int
    count: int
    fill: bool = False

    def chunks(self, parts: int = 1) -> list[Steps]:
        """The grid cut into consecutive pieces of at most CHUNK_STEPS steps, and into at least `parts` pieces where it
        has that many steps, latest first; counts add up."""
        out, done = [], 0
        most = min(CHUNK_STEPS, max(1, math.ceil(self.count / parts)))
        while done < self.count:
            size = min(most, self.count - done)
            out.append(Steps(self.end - done * self.step, self.step, size, self.fill))
            done += size
        return out


def _offset(seconds: float) -> str:
    """A PromQL offset; milliseconds, since older servers accept only whole units in durations."""
    millis = round(seconds * 1000)
    return f" offset {millis}ms" if millis else ""


METRICS = (("DCGM_FI_DEV_GPU_UTIL", 1), ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 100))  # whole GPUs; MIG instances (a ratio)


def step_sample(metric: str, grid: Steps, offset: float) -> str:
    """Each raw series' value per step, for a subquery whose instants sit `offset` seconds after the steps' ends.

    Subquery instants are whole multiples of the step since the epoch; the offset moves each step's samples back so
    that steps end at the report's own end (now), not at the last whole minute. No aggregation happens per step:
    per-step label work is what makes a subquery slow, so series are summed per holder only once, at the end.
    """
    own = f"max_over_time({metric}[{grid.step}s]{_offset(offset)})"
    if not grid.fill:
        return own
    # last_over_time keeps the metric name where max_over_time drops it; `+ 0` drops it too, or the filled steps
    # would form a series of their own next to the sampled ones.
    before = f"last_over_time({metric}[{LOOKBACK}s]{_offset(offset)}) + 0"
    after = f"count_over_time({metric}[{LOOKBACK}s]{_offset(offset - LOOKBACK)})"  # a negative offset looks ahead
    return f"({own} or ({before} and {after}))"


def per_step(grid: Steps, offset: float, gpus: str | None = None) -> str:
    """Utilization in percent per holder and step (the plot's series, and the share query's input)."""
    def one(metric: str, scale: int) -> str:
        return f"max by ({HOLDER}) ({step_sample(_on(metric, gpus), grid, offset)})" + (f" * {scale}" if scale != 1 else "")

    return " or ".join(f"({one(metric, scale)})" for metric, scale in METRICS)


def peak_question(seconds: int, offset: float = 0, gpus: str | None = None) -> str:
    """The highest raw sample per holder (of the given GPUs) over `seconds` ending `offset` seconds before the query's
    instant."""
    within = f"[{seconds}s]{_offset(offset)}"
    return _per_holder("max", lambda m, scale: f"max_over_time({_on(m, gpus)}{within})" + (f" * {scale}" if scale != 1 else ""))


GPU = ("Hostname", "UUID")  # one physical GPU, as the report counts the GPUs seen


def min_questions(seconds: int, offset: float = 0) -> list[tuple[str, str]]:
    """Every GPU's lowest raw sample over `seconds` ending `offset` seconds before the query's instant, one question per
    metric, in the metric's own unit (named `min <scale>`): it names every GPU seen, and which have a sample below the
    threshold. A GPU may report both metrics; each is compared with its own threshold (`low_gpus`)."""
    within = f"[{seconds}s]{_offset(offset)}"
    return [(f"min {scale}", f"min by ({', '.join(GPU)}) (min_over_time({metric}{within}))") for metric, scale in METRICS]


def low_gpus(mins: list[tuple[str, list[dict]]], below: float) -> set[str]:
    """The GPUs (UUIDs) whose lowest sample, answered by `min_questions`, is below the threshold in its metric's unit:
    -Inf is below any threshold, as in the step questions; NaN (all samples NaN) below none."""
    lows = {f"min {scale}": below_in(scale, below) for _, scale in METRICS}
    return {s["metric"].get("UUID", "") for name, result in mins for s in result if s["value"] < lows[name]}


def below_in(scale: int, below: float) -> float:
    """The threshold in a metric's own unit, as the step questions write it (`{below / scale:g}`), so that Python and
    Prometheus compare with the same number."""
    return float(f"{below / scale:g}")


def nan_question(seconds: int, offset: float, gpus: str | None) -> str:
    """The holders of the given GPUs with a NaN (or infinite) sample over `seconds` ending `offset` seconds before the
    query's instant: `0 * sum` is 0 for every other series, which `!= 0` drops."""
    within = f"[{seconds}s]{_offset(offset)}"
    return _per_holder("count", lambda m, scale: f"sum_over_time({_on(m, gpus)}{within}) * 0 != 0")


def _per_holder(fn: str, expr_of) -> str:
    """`fn` by holder of `expr_of(metric, scale)`; utilization where a holder reports it, else the engine ratio."""
    return " or ".join(f"({fn} by ({HOLDER}) ({expr_of(metric, scale)}))" for metric, scale in METRICS)


@dataclass(frozen=True)
class Piece:
    """How one piece of the grid is asked: subquery instants fall on whole multiples of the step since the epoch, so
    the query is asked at the first such instant at or after the piece's end (`at`) and every step's samples are
    moved back by `offset`, which makes steps end at the report's own end (now), not at the last whole minute."""

    grid: Steps

    @property
    def at(self) -> float:
        return math.ceil(self.grid.end / self.grid.step) * self.grid.step

    @property
    def offset(self) -> float:
        return self.at - self.grid.end

    @property
    def span(self) -> str:
        """From at-(count-1)*step to at: `count` instants; the extra second keeps the range off an instant, so servers
        that include a range's first instant and those that exclude it agree."""
        return f"[{(self.grid.count - 1) * self.grid.step + 1}s:{self.grid.step}s]"

    def sample(self, metric: str) -> str:
        return step_sample(metric, self.grid, self.offset)

    def idle(self, below: float, gpus: str | None = None) -> str:
        """Steps below the threshold, per holder of the given GPUs (only holders with at least one)."""
        return _per_holder("sum", lambda m, scale: f"count_over_time(({self.sample(_on(m, gpus))} < {below / scale:g}){self.span})")

    def peak(self, gpus: str | None = None) -> str:
        """The highest raw sample per holder (of the given GPUs; with none, also every holder and GPU seen)."""
        return peak_question(self.grid.count * self.grid.step, self.offset, gpus)

    def mins(self) -> list[tuple[str, str]]:
        return min_questions(self.grid.count * self.grid.step, self.offset)

    def seen(self, gpus: str | None) -> str:
        """Steps with a sample, per holder of the given GPUs."""
        return _per_holder("sum", lambda m, scale: f"count_over_time({self.sample(_on(m, gpus))}{self.span})")

    def share(self, below: float, gpus: str | None) -> str:
        """Per holder of the given GPUs, the sum over its idle steps of 1 / (holders of the same device at that step):
        the fraction of the physical GPU a time-slice held. It aggregates at every step, so it is asked only for
        GPUs that had several holders in the window."""
        util = per_step(self.grid, self.offset, gpus)
        return f"sum_over_time(((({util}) < {below:g}) * 0 + on ({DEVICE}) group_left () (1 / count by ({DEVICE}) ({util}))){self.span})"


# Longer GPU lists query every GPU instead: the result is the same (holders outside the list are dropped). A query
# repeats the list up to four times; servers that take the query in the URL (Google's) keep it under common URL
# limits (8 KiB), while a form body can hold thousands of GPUs.
MAX_SELECTOR = {"GET": 1000, "POST": 1 << 20}


def gpu_regex(uuids: list[str], limit: int) -> str | None:
    """A regex matching exactly these GPUs (literal UUIDs, which Prometheus matches as a set), or None when too long."""
    regex = "|".join(_literal(u) for u in sorted(uuids))
    return regex if regex and len(regex) <= limit else None


def _on(metric: str, gpus: str | None) -> str:
    return f'{metric}{{UUID=~"{gpus}"}}' if gpus else metric


# RE2 metacharacters escaped with a backslash, backslashes doubled for the PromQL string, quotes escaped for it
# (Python's re.escape also escapes characters such as `-` that PromQL strings reject).
_LITERAL = str.maketrans({**{c: "\\\\" + c for c in ".+*?()|[]{}^$"}, "\\": "\\" * 4, '"': '\\"'})


def _literal(text: str) -> str:
    """`text` matched literally by a PromQL regex matcher (one table lookup per character: thousands of GPUs)."""
    return text.translate(_LITERAL)


@dataclass(frozen=True)
class RecordedPiece:
    """The same questions as `Piece`, answered from the stack's recorded idle steps (`rules.idle_step_rules`): plain
    range functions over one sample per holder and step, no subquery, so about as fast as one pass over the data."""

    grid: Steps
    below: float

    @property
    def at(self) -> float:
        return self.grid.end

    def _series(self, name: str, gpus: str | None = None) -> str:
        matchers = f'{IDLE_BELOW}="{threshold(self.below)}"' + (f',UUID=~"{gpus}"' if gpus else "")
        # A millisecond short of the piece: an evaluation exactly at its start belongs to the piece before, whether the
        # server's ranges include their first instant (Prometheus 2) or not (Prometheus 3).
        return f"{name}{{{matchers}}}[{self.grid.count * self.grid.step * 1000 - 1}ms]"

    def idle(self, below: float) -> str:
        return f"sum by ({HOLDER}) (count_over_time({self._series(IDLE_STEP)}))"

    def peak(self) -> str:
        return f"max by ({HOLDER}) (max_over_time({self._series(STEP_UTIL)}))"

    def seen(self, gpus: str | None) -> str:
        return f"sum by ({HOLDER}) (count_over_time({self._series(STEP_UTIL, gpus)}))"

    def share(self, below: float, gpus: str | None) -> str:
        return f"sum by ({HOLDER}) (sum_over_time({self._series(IDLE_STEP, gpus)}))"


def finite(result: list[dict]) -> list[float]:
    """The finite values of an instant query's samples: Prometheus may answer NaN or an infinity (a division by zero)."""
    return [s["value"] for s in result if math.isfinite(s["value"])]


def recorded_throughout(prom: Prometheus, end: float, window: int, below: float) -> bool:
    """Whether this Prometheus recorded idle steps at this threshold both at the window's start and now, so the
    recorded series cover the window (rules installed an hour ago cannot answer for the last day). One series
    answers: the group's own count of its evaluations."""
    ran = f'{IDLE_STEPS_RAN}{{{IDLE_BELOW}="{threshold(below)}"}}'
    return bool(prom.query(f"count_over_time({ran}[{LOOKBACK}s] offset {window - LOOKBACK}s) and count_over_time({ran}[{LOOKBACK}s])", end))


@dataclass
class Holder:
    """What Prometheus counted for one holder over the window (summed over the window's pieces)."""

    labels: dict[str, str]
    seen: int = 0  # counted only for holders idle long enough to be listed
    idle: int = 0
    share: float | None = None  # sum over idle steps of 1 / holders of the device; None: held alone, share = idle
    peak: float = math.nan


_NONE = ("",) * len(HOLDER_LABELS)


def _key(labels: dict[str, str]) -> tuple:
    return tuple(map(labels.get, HOLDER_LABELS, _NONE))


_DEVICE = ("Hostname", "UUID", "GPU_I_ID")


def _device(labels: dict[str, str]) -> tuple:
    return tuple(map(labels.get, _DEVICE, _NONE))


def _ask_all(prom: Prometheus, asks: list[tuple[str, str, float]]) -> list[tuple[str, list[dict]]]:
    from concurrent.futures import ThreadPoolExecutor

    if not asks:
        return []
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(asks))) as pool:
        return list(pool.map(lambda ask: (ask[0], prom.query(ask[1], ask[2])), asks))


def pieces_of(grid: Steps, below: float, recorded: bool) -> list[Piece | RecordedPiece]:
    return [RecordedPiece(g, below) if recorded else Piece(g) for g in grid.chunks()]


def pieces_of_parts(grid: Steps, below: float) -> list[RecordedPiece]:
    """Recorded steps in at least SPLIT pieces, for a question asked of few holders after the first answers."""
    return [RecordedPiece(g, below) for g in grid.chunks(SPLIT)]


def first_questions(pieces: list[RecordedPiece], below: float) -> list[tuple[str, str, float]]:
    """What can be asked of recorded steps before any answer: every holder's idle steps."""
    return [("idle", p.idle(below), p.at) for p in pieces]


def peak_questions(grid: Steps, below: float, raw: bool) -> list[tuple[str, str, float]]:
    """Every holder's peak over the grid, from raw samples or from the recorded steps."""
    return [("peak", p.peak(), p.at) for p in pieces_of(grid, below, not raw)]


class _Tally:
    """Answers added up per holder: counts and shares summed over pieces (counts at most the grid's steps), peaks the
    highest."""

    def __init__(self, grid: Steps):
        self.grid = grid
        self.holders: dict[tuple, Holder] = {}

    def add(self, answers: list[tuple[str, list[dict]]]) -> None:
        holders, isfinite = self.holders, math.isfinite
        for name, result in answers:
            for sample in result:
                metric, value = sample["metric"], sample["value"]
                key = _key(metric)
                holder = holders.get(key)
                if holder is None:
                    holder = holders[key] = Holder({k: v for k, v in metric.items() if v})
                if not isfinite(value):  # NaN or an infinity is no count and no utilization: seen, not idle
                    continue
                if name == "peak":
                    holder.peak = value if math.isnan(holder.peak) else max(holder.peak, value)
                elif name == "share":
                    holder.share = (holder.share or 0.0) + value
                else:
                    setattr(holder, name, min(getattr(holder, name) + round(value), self.grid.count))


def _uuids(holders, keep=lambda h: True) -> list[str]:
    return sorted({h.labels.get("UUID", "") for h in holders if keep(h)})


def collect(prom: Prometheus, grid: Steps, below: float, least: int = 1, recorded: bool = False,
            first: list[tuple[str, list[dict]]] | None = None, raw_peaks: bool = False,
            peaks: list[tuple[str, list[dict]]] | None = None) -> list[Holder]:
    """What Prometheus counts per holder, piece by piece, concurrently; only numbers travel, not steps.

    From recorded steps: first every holder's idle steps (`first`, when already asked) and every holder's peak
    (`raw_peaks`: from raw samples, when those are sparser than the recorded steps; `peaks`, when already asked);
    then, for holders idle at least `least` steps (the ones the report lists), the steps they were seen, which also
    names every holder of their GPUs in the window; and only where one of those GPUs had several holders (time-slices,
    MPS), the shares of it each idle holder held. A holder alone on its device holds all of it at every step
    (the recorded share is 1 / the holders of the device at that step), so its share is its idle steps.
    From raw samples: `collect_raw`.
    """
    if not recorded:
        return collect_raw(prom, grid, below, least)
    tally = _Tally(grid)
    missing = ([] if first is not None else first_questions(pieces_of(grid, below, True), below)) + (
        [] if peaks is not None else peak_questions(grid, below, raw_peaks))
    answers = _ask_all(prom, missing)
    tally.add(first if first is not None else [a for a in answers if a[0] == "idle"])
    tally.add(peaks if peaks is not None else [a for a in answers if a[0] == "peak"])
    limit = MAX_SELECTOR.get(prom.method, MAX_SELECTOR["GET"])
    listed = _uuids(tally.holders.values(), lambda h: h.idle >= least)
    if not listed:
        return list(tally.holders.values())
    seen = _ask_all(prom, [("seen", p.seen(gpu_regex(listed, limit)), p.at) for p in pieces_of_parts(grid, below)])
    tally.add(seen)
    holders_of: dict[tuple, set[tuple]] = {}
    for _, result in seen:
        for sample in result:
            holders_of.setdefault(_device(sample["metric"]), set()).add(_key(sample["metric"]))
    shared = sorted({device[1] for device, keys in holders_of.items() if len(keys) > 1})
    if shared:
        tally.add(_ask_all(prom, [("share", p.share(below, gpu_regex(shared, limit)), p.at) for p in pieces_of_parts(grid, below)]))
    return list(tally.holders.values())


def low_question(seconds: int, offset: float, below: float) -> str:
    """The GPUs with a raw sample below the threshold over `seconds` ending `offset` seconds before the query's
    instant (the lookback before the window, where a filled first step takes its sample). Compared in the metric's
    own unit, with the same number the steps are compared with, so both agree at the threshold; a GPU whose samples
    are all NaN has no idle step either, and is left out (NaN is below nothing)."""
    within = f"[{seconds}s]{_offset(offset)}"
    return " or ".join(f"(min by (UUID) (min_over_time({m}{within})) < {below / scale:g})" for m, scale in METRICS)


# Peaks are compared in percent, scaled from ratios for MIG instances, which may round either way at the threshold:
# within EDGE of it, a holder's steps are judged one by one.
EDGE = 1e-9


def kind_of(holder: Holder, low: set[str], below: float, fill: bool) -> str:
    """How a holder's idle steps are counted: "busy" on a GPU with no sample below the threshold (none), "idle" where
    its every sample is below it (each step seen, unless all its samples were NaN), else "judged" step by step. With
    gap filling a step may take a sample from before the window, which the peak does not cover: judged.

    Both rest on how Prometheus takes the highest and lowest sample of a range: NaN samples are passed over unless
    all of them are NaN (prometheus/prometheus v2.42.0 promql/functions.go lines 499-522, funcMaxOverTime and
    funcMinOverTime; the same in v3.5.0 lines 851-889, compareOverTime), so a step's highest sample is below the
    threshold exactly when some sample in it is and none is at or above it."""
    if holder.labels.get("UUID", "") not in low:
        return "busy"
    if not fill and math.isfinite(holder.peak) and holder.peak < below * (1 - EDGE):
        return "idle"
    return "judged"


def collect_raw(prom: Prometheus, grid: Steps, below: float, least: int = 1, lows: list[tuple[str, list[dict]]] | None = None) -> list[Holder]:
    """What Prometheus counts per holder from raw samples; only numbers travel, not steps.

    Judging steps is the costly part: a subquery over every step of every GPU, and a comparison in it that costs
    Prometheus a labelled sample for each step it keeps, several times what the steps themselves cost (each kept
    sample's labels are hashed twice at every step: prometheus/prometheus v2.42.0 promql/engine.go lines 1165 and
    1194-1206, rangeEval). And every question about every GPU costs about what the floor costs, mostly finding the
    series and reading their samples, whatever it computes. So one plain pass over the samples asks every GPU's
    lowest sample (`lows`, the answers to `min_questions`, when not already asked), which names every GPU seen and
    those with a sample below the threshold (with gap filling, also in the lookback before the window); holders on
    other GPUs have no idle step, and no more is asked about them. The holders of the rest and their peaks come next.
    Holders whose peak is below the threshold are idle at every step they were seen, unless all of a step's samples
    were NaN: their steps are counted without a comparison, and those with a NaN sample are judged after all. The
    rest are judged step by step, and then, for those idle at least `least` steps (the ones the report lists), the
    steps they were seen are counted. Shares of devices several holders shared are asked with the first counts.
    Step-counting questions are cut in time into pieces asked concurrently, and name the GPUs they are about unless
    they are about every GPU.
    Series are counted one by one and summed per holder at the end, since per-step aggregation is what makes a
    subquery slow; that is exact as long as one holder is not reported by two series at the same time (a holder
    whose exporter restarted is two series one after the other, and counts right).
    """
    limit = MAX_SELECTOR.get(prom.method, MAX_SELECTOR["GET"])
    pieces = pieces_of(grid, below, False)
    mins = lows if lows is not None else _ask_all(prom, [(name, expr, p.at) for p in pieces for name, expr in p.mins()])
    gpus_seen = {tuple(map(s["metric"].get, GPU, ("", ""))) for _, result in mins for s in result}
    every = {uuid for _, uuid in gpus_seen}

    def only(uuids: list[str]) -> str | None:  # no selector where every GPU is asked about
        return None if set(uuids) >= every else gpu_regex(uuids, limit)

    low = low_gpus(mins, below)
    # The holders of GPUs with a low sample, and their peaks. With gap filling every such GPU is judged step by step,
    # and one whose only low sample lies in the lookback before the window may be too: every GPU's peaks then.
    asks = [("peak", p.peak(None if grid.fill else only(sorted(low))), p.at) for p in pieces] if low or grid.fill else []
    asks += [("low", low_question(LOOKBACK, grid.count * grid.step, below), grid.end)] if grid.fill else []
    answers = _ask_all(prom, asks)
    tally = _Tally(grid)
    tally.add([a for a in answers if a[0] == "peak"])
    low |= {s["metric"].get("UUID", "") for name, result in answers if name == "low" for s in result}
    kind = {key: kind_of(h, low, below, grid.fill) for key, h in tally.holders.items()}

    def gpus(*kinds: str) -> list[str]:
        return sorted({h.labels.get("UUID", "") for key, h in tally.holders.items() if kind.get(key, "judged") in kinds})

    per_device: dict[tuple, int] = {}
    for h in tally.holders.values():
        per_device[_device(h.labels)] = per_device.get(_device(h.labels), 0) + 1
    shared = sorted({h.labels.get("UUID", "") for key, h in tally.holders.items()
                     if kind.get(key) != "busy" and per_device[_device(h.labels)] > 1})
    for h in tally.holders.values():  # a holder of a shared GPU with no idle step in a piece has no share there
        if h.labels.get("UUID", "") in shared:
            h.share = 0.0
    parts = [Piece(g) for g in grid.chunks(SPLIT)]
    judged, clean = gpus("judged"), gpus("idle")
    asks = [("seen", p.seen(only(clean)), p.at) for p in parts] if clean else []
    asks += [("idle", p.idle(below, only(judged)), p.at) for p in parts] if judged else []
    asks += [("share", p.share(below, only(shared)), p.at) for p in parts] if shared else []
    asks += [("nan", nan_question(grid.count * grid.step, 0, only(clean)), grid.end)] if clean else []
    answers = _ask_all(prom, asks)
    nan = {_key(s["metric"]) for name, result in answers if name == "nan" for s in result}
    tally.add([a for a in answers if a[0] != "nan"])
    for key, h in tally.holders.items():
        if kind.get(key) == "idle":
            if key in nan:  # a step whose samples were all NaN is seen, not idle: judge this holder's steps after all
                kind[key], h.idle = "again", 0
            else:
                h.idle = h.seen
    again = gpus("again")
    if again:
        tally.add(_ask_all(prom, [("idle", p.idle(below, only(again)), p.at) for p in parts]))
    # The steps judged holders were seen, for those the report lists (idle at least `least` steps).
    listed = sorted({h.labels.get("UUID", "") for key, h in tally.holders.items() if kind.get(key, "judged") in ("judged", "again")
                     and h.idle >= least})
    if listed:
        for h in tally.holders.values():
            if h.labels.get("UUID", "") in listed:
                h.seen = 0  # counted again with the GPU's other holders (the same count where it was counted already)
        tally.add(_ask_all(prom, [("seen", p.seen(only(listed)), p.at) for p in parts]))
    # GPUs with no sample below the threshold: seen, with no holder to list.
    held = {(h.labels.get("Hostname", ""), h.labels.get("UUID", "")) for h in tally.holders.values()}
    return list(tally.holders.values()) + [Holder({k: v for k, v in zip(GPU, gpu) if v}) for gpu in sorted(gpus_seen - held)]


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


# --------------------------------------------------------------------------------------------------------------------
# KAI Scheduler's fractions: the GPU's holder is a reservation pod; its users are the pods of the same GPU group


@dataclass(frozen=True)
class Sharer:
    namespace: str
    pod: str
    fraction: float | None  # its gpu-fraction annotation; None for a gpu-memory request or none read


def gpu_groups(prom: Prometheus, at: float, window: int) -> dict[str, list[Sharer]]:
    """GPU group -> every pod that carried it in the window (reservation pods included), from kube-state-metrics."""
    span = f"{max(window, 60)}s"
    labelled = prom.query(f'max by (namespace, pod, {KSM_GPU_GROUP}) (max_over_time(kube_pod_labels{{{KSM_GPU_GROUP}!=""}}[{span}]))', at)
    if not labelled:
        return {}
    annotated = prom.query(f'max by (namespace, pod, {KSM_GPU_FRACTION}) (max_over_time(kube_pod_annotations{{{KSM_GPU_FRACTION}!=""}}[{span}]))', at)
    fractions = {}
    for row in annotated:
        m = row["metric"]
        try:
            value = float(m.get(KSM_GPU_FRACTION, ""))
        except ValueError:
            continue
        if 0 < value < 1:
            fractions[(m.get("namespace"), m.get("pod"))] = value
    groups: dict[str, list[Sharer]] = {}
    for row in labelled:
        m = row["metric"]
        if m.get("namespace") and m.get("pod") and m.get(KSM_GPU_GROUP):
            groups.setdefault(m[KSM_GPU_GROUP], []).append(Sharer(m["namespace"], m["pod"], fractions.get((m["namespace"], m["pod"]))))
    return groups


def attribute_fractions(report: Report, groups: dict[str, list[Sharer]]) -> None:
    """Give each idle KAI reservation pod's GPU to the fractional pods of its group, per namespace, by their fractions
    (pods without one share what the others leave, evenly); a reservation pod with no such pods in the window keeps the
    row (the GPU was held for nobody)."""
    group_of = {(s.namespace, s.pod): name for name, sharers in groups.items() for s in sharers}
    rows = []
    for g in report.idle:
        group = group_of.get((g.namespace, g.pod)) if g.namespace == KAI_RESERVATIONS else None
        users = [s for s in groups.get(group, []) if s.namespace != KAI_RESERVATIONS] if group else []
        if not users:
            rows.append(g)
            continue
        known = sum(s.fraction for s in users if s.fraction is not None)
        unknown = [s for s in users if s.fraction is None]
        rest = max(1.0 - known, 0.0) / len(unknown) if unknown else 0.0
        weights = {s: (s.fraction if s.fraction is not None else rest) for s in users}
        total = sum(weights.values()) or 1.0
        by_namespace: dict[str, tuple[float, list[str]]] = {}
        for s, w in weights.items():
            weight, pods = by_namespace.get(s.namespace, (0.0, []))
            by_namespace[s.namespace] = (weight + w / total, pods + [s.pod])

        def part(value, weight):
            return None if value is None else round(value * weight, 4)

        for namespace, (weight, pods) in sorted(by_namespace.items()):
            rows.append(replace(g, namespace=namespace, pod=", ".join(sorted(pods)), unit="kai-fraction",
                                share=part(g.share, weight), gpu_hours_idle=part(g.gpu_hours_idle, weight),
                                usd_per_hour=part(g.usd_per_hour, weight),
                                wasted_usd=None if g.wasted_usd is None else round((g.exact_usd or 0) * weight, 2),
                                exact_usd=None if g.exact_usd is None else g.exact_usd * weight))
    rows.sort(key=lambda g: (g.wasted_usd is None, -(g.wasted_usd or 0), -g.hours_idle, g.namespace or "", g.pod or ""))
    report.idle = rows


def namespace_series(prom: Prometheus, grid: Steps, recorded_below: float | None = None) -> dict[str, list[tuple[float, float]]]:
    """Average utilization per namespace and step, for the plot: one range query, a few series; from the recorded
    steps (`recorded_below`: their threshold) where the report counted from them."""
    if recorded_below is None:
        util = per_step(grid, 0)
    else:  # the latest recorded step at each instant (a step's length of lookback, so no step is shown twice)
        util = f'last_over_time({STEP_UTIL}{{{IDLE_BELOW}="{threshold(recorded_below)}"}}[{grid.step}s])'
    result = prom.query_range(f"avg by (namespace) ({util})", grid.end - (grid.count - 1) * grid.step, grid.end, grid.step)
    return {s["metric"].get("namespace") or UNALLOCATED: [(t, v if math.isfinite(v) else math.nan) for t, v in s["values"]] for s in sorted(result, key=lambda s: s["metric"].get("namespace", ""))}


def vgpus_per_gpu(prom: Prometheus, at: float, window: int) -> dict[str, int]:
    """vGPUs per GPU of each vgpu pool, from the stack's rules if this Prometheus ran them in the window (else empty,
    and vGPU holders are split among the pods holding the GPU like time-slices)."""
    result = prom.query(f"max by (pool) (last_over_time({VGPU_SHARES}[{window}s]))", at)
    return {s["metric"]["pool"]: int(s["value"]) for s in result if s["metric"].get("pool") and math.isfinite(s["value"]) and s["value"] >= 1}


def reserved_question(window: int, pools: list[str] | None = None) -> str:
    return f"avg_over_time({reserved_unused(gpu_regex(pools or [], MAX_SELECTOR['GET']))}[{window}s:{STEP_SECONDS}s])"


def reserved_idle(prom: Prometheus, at: float, window: int) -> list[ReservedIdle]:
    """Per pool with reservations (the stack's rules record them): reserved nodes no node of the pool ran in, on
    average over the window, and what they cost at the recorded list price. Empty without such rules.

    The recorded prices are asked first: one series per pool with reservations, so a Prometheus without them answers
    at once, and the subquery over the window (every step relabels the pools' nodes) runs only for those pools."""
    prices = {s["metric"].get("pool"): s["value"] for s in prom.query(f"last_over_time({RESERVED_NODE_PRICE}[{window}s])", at)}
    if not prices:
        return []
    unused = prom.query(reserved_question(window, sorted(p for p in prices if p)), at)
    out = []
    for s in unused:
        pool, nodes = s["metric"].get("pool"), s["value"]
        if pool and nodes > 0 and pool in prices:
            out.append(ReservedIdle(pool, round(nodes, 2), prices[pool], round(nodes * prices[pool] * window / 3600, 2)))
    return sorted(out, key=lambda r: -r.wasted_usd)


def node_pools(prom: Prometheus, at: float, window: int) -> dict[str, str]:
    """Node name -> pool, from kube-state-metrics' node labels seen in the window (empty without the allowlist)."""
    result = prom.query(node_pool(window), at)
    return {s["metric"]["Hostname"]: s["metric"]["pool"] for s in result if s["metric"].get("Hostname") and s["metric"].get("pool")}


_PER_HOUR = "count_over_time({m}[1h])"
# Samples per hour of the fastest-scraped GPU, and of the slowest among those scraped throughout the last hour.
FASTEST = f"max({_PER_HOUR.format(m='DCGM_FI_DEV_GPU_UTIL')} or {_PER_HOUR.format(m='DCGM_FI_PROF_GR_ENGINE_ACTIVE')})"
SLOWEST = (f"min(({_PER_HOUR.format(m='DCGM_FI_DEV_GPU_UTIL')} and DCGM_FI_DEV_GPU_UTIL offset 1h) "
           f"or ({_PER_HOUR.format(m='DCGM_FI_PROF_GR_ENGINE_ACTIVE')} and DCGM_FI_PROF_GR_ENGINE_ACTIVE offset 1h))")


def raw_peaks_cheaper(fastest: float | None) -> bool:
    """Whether raw samples are the cheaper source of peaks than recorded steps: GPUs scraped less than once a step."""
    return fastest is not None and fastest < 3600 / STEP_SECONDS


def whole_steps(window: int) -> bool:
    """Whether every grid the report may choose for `window` (recorded steps, or `grid_for`'s whole minutes from the
    shortest step up to the lookback) covers the whole window, so that peaks over the window can be asked before
    the grid is known."""
    shortest = step_for(window)
    return all(window % step == 0 for step in {shortest, STEP_SECONDS, *(s for s in range(60, LOOKBACK + 1, 60) if s > shortest)})


def grid_for(window: int, end: float, fastest: float | None, slowest: float | None) -> Steps:
    """Steps no shorter than the fastest scrape interval (rounded up to whole minutes, at most the lookback), so
    none holds only a repeat of the last sample; gaps are filled only when some GPU is scraped less often than that.
    """
    step = step_for(window)
    if fastest:
        step = max(step, min(LOOKBACK, math.ceil(3600 / fastest / 60) * 60))
    # A GPU scraped every `step` seconds has 3600 / step samples an hour; one fewer is a scrape missed, not a slower
    # interval. Without the probe's answer (a GPU that appeared within the hour), fill rather than lose steps.
    fill = slowest is None or slowest < 3600 / step - 1
    return Steps(end=end, step=step, count=window // step, fill=fill)


def idle_report(prom: Prometheus | str, window: int, below: float, now: float | None = None, min_idle: int = 0,
                whole_window: bool = False, plot: bool = False, raw: bool = False) -> Report:
    """The report as of `now`; from the stack's recorded idle steps where they cover the window (fast), else (or
    with `raw`) from raw samples."""
    from concurrent.futures import ThreadPoolExecutor

    prom = Prometheus(prom) if isinstance(prom, str) else prom
    if prom.deadline is None:  # --timeout is what the whole report may take, however many queries it asks
        prom = prom.until(time.monotonic() + prom.timeout)
    end = time.time() if now is None else now
    recorded_grid = Steps(end, STEP_SECONDS, window // STEP_SECONDS)
    with ThreadPoolExecutor(max_workers=PARALLEL + 4) as pool:
        # Each question is submitted after those it waits for, so none waits for one that cannot start.
        steps_recorded = pool.submit(lambda: not raw and recorded_throughout(prom, end, window, below))
        scraped = pool.submit(lambda: max(finite(prom.query(FASTEST, end)), default=None))

        def raw_ahead(expr: str) -> list[dict] | None:
            """Where the steps were not recorded, every holder's lowest sample is asked with the probes, when every
            grid the report may choose covers the window."""
            return None if not whole_steps(window) or steps_recorded.result() else prom.query(expr, end)

        def peaks_ahead() -> list[tuple[str, list[dict]]] | None:
            """Where they were, every holder's peak from the sparser source: raw samples over the window (when every grid
            covers it), or the recorded steps."""
            if not steps_recorded.result():
                return None
            if not raw_peaks_cheaper(scraped.result()):
                return [(name, prom.query(expr, at)) for name, expr, at in peak_questions(recorded_grid, below, False)]
            return [("peak", prom.query(peak_question(window), end))] if whole_steps(window) else None

        mins = [(name, pool.submit(raw_ahead, expr)) for name, expr in min_questions(window)]
        peaks = pool.submit(peaks_ahead)
        probes = [steps_recorded, scraped] + [pool.submit(ask) for ask in (
            # The slowest scrape decides only how raw samples are cut into steps.
            lambda: None if steps_recorded.result() else min(finite(prom.query(SLOWEST, end)), default=None),
            lambda: vgpus_per_gpu(prom, end, window), lambda: node_pools(prom, end, window),
            lambda: reserved_idle(prom, end, window))]
        # Asked before knowing whether the steps were recorded: where they were not, the answers are empty and quick.
        ahead = [] if raw else [(name, pool.submit(prom.query, expr, at))
                                for name, expr, at in first_questions(pieces_of(recorded_grid, below, True), below)]
        recorded, fastest, slowest, vgpus, pools, reserved = (probe.result() for probe in probes)
        first = [(name, answer.result()) for name, answer in ahead] if recorded else None
        lows = [(name, answer.result()) for name, answer in mins]
    if recorded:
        grid = recorded_grid
        holders = collect(prom, grid, below, max(1, math.ceil(min_idle / grid.step)), True, first,
                          raw_peaks=raw_peaks_cheaper(fastest), peaks=peaks.result())
    else:
        grid = grid_for(window, end, fastest, slowest)
        holders = collect_raw(prom, grid, below, max(1, math.ceil(min_idle / grid.step)),
                              lows if all(result is not None for _, result in lows) else None)
    report = build_report(holders, grid, window, below, min_idle, whole_window, vgpus, pools)
    if any(g.namespace == KAI_RESERVATIONS for g in report.idle):
        attribute_fractions(report, gpu_groups(prom, end, window))
    report.counted_from = "recorded idle steps" if recorded else "raw samples"
    report.reserved = reserved
    if plot and report.gpus_seen:
        report.by_namespace = namespace_series(prom, grid, below if recorded else None)
    return report


# --------------------------------------------------------------------------------------------------------------------
# Grouping by team

NO_TEAM = "(no team)"


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
    lines += reserved_lines(report)
    return "\n".join(lines)


def reserved_lines(report: Report) -> list[str]:
    return [f"reserved: pool {r.pool} left {r.nodes_unused:g} reserved node(s) unused on average, ${r.wasted_usd:,.2f} at list price "
            f"(reservations are billed whether used or not; one bought cheaper costs less)" for r in report.reserved]


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
    lines += reserved_lines(report)
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
