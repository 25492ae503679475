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

The report's entry point is `idle_report`, here with what decides how it counts (the grid, and whether the stack's
recorded steps cover the window). Its parts live beside it: the questions' PromQL (`idle.questions`), the counting
per holder (`idle.counting`), the rows and totals (`idle.rows`), reserved nodes left unused (`idle.reserved`), KAI's
fractions (`idle.kai_fractions`), the options (`idle.options`), the text (`idle.text`), the grouping by team
(`idle.teams`) and the plot (`idle.plotting`).
"""

from __future__ import annotations

import math
import time

from gpupools.idle.counting import PARALLEL, collect, collect_raw, first_questions, peak_questions, pieces_of
from gpupools.idle.kai_fractions import attribute_fractions, gpu_groups
from gpupools.idle.plotting import namespace_series
from gpupools.idle.promapi import Prometheus
from gpupools.idle.questions import LOOKBACK, Steps, min_questions, peak_question
from gpupools.idle.reserved import reserved_idle
from gpupools.idle.rows import Report, build_report, node_pools, vgpus_per_gpu
from gpupools.monitoring.promql import KAI_RESERVATION_NAMESPACE as KAI_RESERVATIONS
from gpupools.monitoring.promql import IDLE_BELOW, IDLE_STEPS_RAN, STEP_SECONDS, threshold

MAX_POINTS = 1440  # steps per series: one per minute over a day, coarser beyond


def step_for(window: int) -> int:
    return max(60, math.ceil(window / MAX_POINTS))


def finite(result: list[dict]) -> list[float]:
    """The finite values of an instant query's samples: Prometheus may answer NaN or an infinity (a division by zero)."""
    return [s["value"] for s in result if math.isfinite(s["value"])]


def recorded_throughout(prom: Prometheus, end: float, window: int, below: float) -> bool:
    """Whether this Prometheus recorded idle steps at this threshold both at the window's start and now, so the
    recorded series cover the window (rules installed an hour ago cannot answer for the last day). One series
    answers: the group's own count of its evaluations."""
    ran = f'{IDLE_STEPS_RAN}{{{IDLE_BELOW}="{threshold(below)}"}}'
    return bool(prom.query(f"count_over_time({ran}[{LOOKBACK}s] offset {window - LOOKBACK}s) and count_over_time({ran}[{LOOKBACK}s])", end))


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
