"""The plot (`gpupools idle --plot`): average utilization per namespace over the window, asked as one range query,
drawn as a PNG with the idle threshold.

Apart from the text because it needs matplotlib, an extra a plain install leaves out.
"""

from __future__ import annotations

import math

from gpupools.idle.promapi import Prometheus
from gpupools.idle.questions import Steps, per_step
from gpupools.idle.rows import UNALLOCATED, Report
from gpupools.idle.text import human_window
from gpupools.monitoring.promql import IDLE_BELOW, STEP_UTIL, threshold


def namespace_series(prom: Prometheus, grid: Steps, recorded_below: float | None = None) -> dict[str, list[tuple[float, float]]]:
    """Average utilization per namespace and step, for the plot: one range query, a few series; from the recorded
    steps (`recorded_below`: their threshold) where the report counted from them."""
    if recorded_below is None:
        util = per_step(grid, 0)
    else:  # the latest recorded step at each instant (a step's length of lookback, so no step is shown twice)
        util = f'last_over_time({STEP_UTIL}{{{IDLE_BELOW}="{threshold(recorded_below)}"}}[{grid.step}s])'
    result = prom.query_range(f"avg by (namespace) ({util})", grid.end - (grid.count - 1) * grid.step, grid.end, grid.step)
    return {s["metric"].get("namespace") or UNALLOCATED: [(t, v if math.isfinite(v) else math.nan) for t, v in s["values"]] for s in sorted(result, key=lambda s: s["metric"].get("namespace", ""))}


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
