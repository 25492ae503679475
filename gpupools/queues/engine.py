"""Which engine keeps the teams' promises (`gpupools:quotas`), and what the plan says about them.

Each engine is one module with the same shape: `team_objects(...)` returns the manifests, and Kueue also
brings its Helm release. Adding an engine (KAI Scheduler's queues, say) is a module and a line in `ENGINES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpupools.queues import kueue, resourcequota
from gpupools.stack.config import StackConfig
from gpupools.core.pools import PoolPlan
from gpupools.pools.software import Release
from gpupools.queues.teams import plan_teams, pool_totals

ENGINES = {"kueue": "Kueue", "resourcequota": "ResourceQuota"}


@dataclass
class QuotaPlan:
    engine: str
    releases: list[Release] = field(default_factory=list)
    objects: list[dict] = field(default_factory=list)  # namespaces first


def quota_plan(stack: StackConfig, plans: list[PoolPlan], scrape: dict[str, str] | None = None, autoscaler: str = "") -> QuotaPlan | None:
    """None without teams: no engine is installed for nobody. `autoscaler` (resolved) tells Kueue which capacity
    kinds of a pool its nodes' labels tell apart."""
    if not stack.teams:
        return None
    teams = plan_teams(stack, plans)
    if stack.quotas == "kueue":
        return QuotaPlan("kueue", [kueue.release()], kueue.team_objects(stack, plans, teams, scrape, autoscaler))
    return QuotaPlan("resourcequota", [], resourcequota.team_objects(stack, teams))


def team_rows(stack: StackConfig, plans: list[PoolPlan]) -> list[dict]:
    """What `gpupools plan` prints per team, and `plan --json` carries."""
    rows = []
    for t in plan_teams(stack, plans):
        row: dict = {"team": t.team.name, "namespace": t.team.namespace_name,
                     "units": {p.name: t.nominal[p.name] for p in t.pools}}
        if stack.quotas == "kueue":
            row.update({"queue": t.team.name, "priority": t.team.priority, "borrow": str(t.team.borrow), "lend": lend_cell(t)})
        rows.append(row)
    return rows


def lend_cell(team) -> str:
    """The team's lend as its ClusterQueue gets it: a number is capped per pool at the team's quota there."""
    if not isinstance(team.team.lend, int):
        return str(team.team.lend)
    limits = {p.name: team.lending_limit(p.name) for p in team.pools}
    if all(v == team.team.lend for v in limits.values()):
        return str(team.team.lend)
    return ", ".join(f"{pool} {limit}" for pool, limit in limits.items())


def cohort_line(stack: StackConfig, plans: list[PoolPlan]) -> str | None:
    """One line: per pool, units promised to all teams against units at maxNodes."""
    if not stack.teams:
        return None
    totals = pool_totals(stack, plans)
    parts = [f"{pool} {promised} of {offered} ({promised / offered:.2f}x)" for pool, (promised, offered) in totals.items() if promised]
    over = any(promised > offered for promised, offered in totals.values())
    what = f"cohort {kueue.COHORT}" if stack.quotas == "kueue" else "ResourceQuotas"
    note = ""
    if over:
        note = ("; over-subscribed: queued work waits for nodes up to maxNodes" if stack.quotas == "kueue"
                else "; over-subscribed (allowed; gpupools check warns above its maxRatio)")
    return f"team quotas ({what}) vs. units at maxNodes: {', '.join(parts) or 'none'}{note}"
