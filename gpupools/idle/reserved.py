"""Reserved nodes a pool paid for and ran nothing on, from the stack's recorded reservation series: billed whether
used or not, so the report counts them as waste of their own, apart from the GPUs held idle.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpupools.idle.counting import MAX_SELECTOR
from gpupools.idle.promapi import Prometheus
from gpupools.idle.questions import gpu_regex
from gpupools.monitoring.promql import RESERVED_NODE_PRICE, STEP_SECONDS, reserved_unused


@dataclass
class ReservedIdle:
    """Reserved nodes of one pool that ran nothing: paid whether used or not."""

    pool: str
    nodes_unused: float  # on average over the window
    usd_per_node_hour: float  # on-demand list price of one node; a reservation bought cheaper costs less
    wasted_usd: float


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
