"""What Prometheus counts per GPU holder over the window: its idle steps, the steps it was seen, its peak and its
share of the device, asked piece by piece and concurrently and added up per holder. Only numbers travel, not steps.

`collect` reads the stack's recorded idle steps, `collect_raw` judges raw samples. Which questions to ask, about which
GPUs and in what order, is where the report's cost is decided, so it stands apart from the questions' PromQL
(`idle.questions`) and from what the report makes of the counts (`idle.rows`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpupools.idle.promapi import Prometheus
from gpupools.idle.questions import GPU, LOOKBACK, Piece, RecordedPiece, Steps, gpu_regex, low_gpus, low_question, nan_question
from gpupools.monitoring.promql import HOLDER_LABELS

PARALLEL = 4  # queries in flight: Prometheus runs each query on one core, so a few at once use a server's cores
# Pieces each step-judging question is cut into at least, so that its work spreads over a server's cores; each piece
# costs a little of its own (finding the series, sending the answer), which more pieces would add up.
SPLIT = 1
# Longer GPU lists query every GPU instead: the result is the same (holders outside the list are dropped). A query
# repeats the list up to four times; servers that take the query in the URL (Google's) keep it under common URL
# limits (8 KiB), while a form body can hold thousands of GPUs.
MAX_SELECTOR = {"GET": 1000, "POST": 1 << 20}


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
