"""The PromQL the idle report asks: the report's time grid, and per piece of it the questions that judge each holder's
steps idle or not, from raw samples (`Piece`) or from the stack's recorded idle steps (`RecordedPiece`).

Only text here, no asking: what a question says is one thing to check against Prometheus' semantics, which answers
to ask and how they add up is another (`idle.counting`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpupools.monitoring.promql import DEVICE, HOLDER_LABELS, IDLE_BELOW, IDLE_STEP, STEP_UTIL, threshold

HOLDER = ", ".join(HOLDER_LABELS)
LOOKBACK = 300  # Prometheus' default lookback: a series scraped at least this often counts as present throughout
# Steps per query: a day at one-minute steps is one query; longer windows are cut so that no query holds more than
# this many steps of every holder (Prometheus' 11,000-point limit is for range queries, but its sample limit counts
# a subquery's steps too: 8,192 holders x 1,440 steps is 11.8 million of the default 50 million).
CHUNK_STEPS = 1440


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


def low_question(seconds: int, offset: float, below: float) -> str:
    """The GPUs with a raw sample below the threshold over `seconds` ending `offset` seconds before the query's
    instant (the lookback before the window, where a filled first step takes its sample). Compared in the metric's
    own unit, with the same number the steps are compared with, so both agree at the threshold; a GPU whose samples
    are all NaN has no idle step either, and is left out (NaN is below nothing)."""
    within = f"[{seconds}s]{_offset(offset)}"
    return " or ".join(f"(min by (UUID) (min_over_time({m}{within})) < {below / scale:g})" for m, scale in METRICS)
