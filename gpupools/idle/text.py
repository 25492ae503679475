"""The report as text: the table of idle holders, the total line and the reserved nodes' lines, and how a window
and a share of a GPU are written. Only formatting: every number comes from the report (`idle.rows`).
"""

from __future__ import annotations

from gpupools.idle.rows import Report


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


def reserved_lines(report: Report) -> list[str]:
    return [f"reserved: pool {r.pool} left {r.nodes_unused:g} reserved node(s) unused on average, ${r.wasted_usd:,.2f} at list price "
            f"(reservations are billed whether used or not; one bought cheaper costs less)" for r in report.reserved]
