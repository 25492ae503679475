"""Which engine keeps the teams' promises (`gpupools:quotas`), and what the plan says about them.

Each engine is one module with the same shape: `team_objects(...)` returns the manifests, and Kueue and KAI
Scheduler also bring their Helm release. Adding an engine is a module and a line in `ENGINES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpupools.queues import kai, kueue, resourcequota
from gpupools.stack.config import StackConfig
from gpupools.core.pools import PoolPlan
from gpupools.pools.software import Release
from gpupools.capacity.sources import RESERVED, coverage, flavor_shares
from gpupools.queues.teams import plan_teams, pool_totals

ENGINES = {"kueue": "Kueue", "resourcequota": "ResourceQuota", "kai": "KAI Scheduler"}


@dataclass
class QuotaPlan:
    """The queueing engine a stack installs (Kueue or KAI Scheduler): its Helm releases and Kubernetes objects."""

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
        return QuotaPlan("kueue", [kueue.release(kueue.device_class_mappings(plans))], kueue.team_objects(stack, plans, teams, scrape, autoscaler))
    if stack.quotas == "kai":
        return QuotaPlan("kai", [kai.release(plans)], kai.team_objects(stack, plans, teams, scrape))
    return QuotaPlan("resourcequota", [], resourcequota.team_objects(stack, teams))


def team_rows(stack: StackConfig, plans: list[PoolPlan]) -> list[dict]:
    """What `gpupools plan` prints per team, and `plan --json` carries."""
    rows = []
    for t in plan_teams(stack, plans):
        row: dict = {"team": t.team.name, "namespace": t.team.namespace_name,
                     "units": {p.name: t.nominal[p.name] for p in t.pools}}
        if t.team.tolerations:
            row["tolerations"] = [tol.as_kubernetes() for tol in t.team.tolerations]
        if stack.quotas == "kueue":
            row.update({"queue": t.team.name, "priority": t.team.priority, "borrow": str(t.team.borrow), "lend": lend_cell(t)})
        rows.append(row)
    if stack.quotas == "kai":
        by_name = {n.name: n for n in kai.queue_tree(stack, plan_teams(stack, plans))}
        for row in rows:
            node = by_name[row["team"]]
            row.update({"queue": node.name, "department": node.parent or "-", "priority": node.priority,
                        "quota": node.quota, "borrowable": kai.effective_borrowable(node, by_name), "weight": node.weight})
    return rows


def queue_tree_lines(stack: StackConfig, plans: list[PoolPlan]) -> list[str]:
    """KAI's queues as a tree: per queue its guaranteed GPUs (and on which pools they count), how many more it may
    borrow while others leave them idle, its over-quota weight and priority."""
    if stack.quotas != "kai" or not stack.teams:
        return []
    tree = kai.queue_tree(stack, plan_teams(stack, plans))
    by_name = {n.name: n for n in tree}
    lines = []
    for node in tree:
        indent = "    " if node.parent else "  "
        kind = "team" if node.team is not None else "department"
        limit = "no limit" if node.limit is None else f"limit {node.limit}"
        where = f" ({', '.join(f'{pool} {units}' for pool, units in node.pools)})" if node.pools else ""
        lines.append(f"{indent}{node.name} ({kind}): {node.quota} GPUs guaranteed{where}, {kai.effective_borrowable(node, by_name)} borrowable "
                     f"({limit}), over-quota weight {node.weight}, priority {node.priority}")
    return lines


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
    what = {"kueue": f"cohort {kueue.COHORT}", "kai": "KAI queues"}.get(stack.quotas, "ResourceQuotas")
    note = ""
    if over:
        note = ("; over-subscribed: queued work waits for nodes up to maxNodes" if stack.quotas in ("kueue", "kai")
                else "; over-subscribed (allowed; gpupools check warns above its maxRatio)")
    return f"team quotas ({what}) vs. units at maxNodes: {', '.join(parts) or 'none'}{note}"


def unusable_quota_warnings(stack: StackConfig, plans: list[PoolPlan], autoscaler: str = "") -> list[str]:
    """One line per team quota larger than every node it can ever be used on: the part above can never be used.

    Teams together may be promised more than the pools hold (the cohort line says so: they rarely peak together);
    one team promised more than exists is a mistake, counted as its engine keeps the promise. Kueue: per
    ResourceFlavor and resource, a flavor's quota admitting only onto its own nodes (`pool_flavors`, split as the
    ClusterQueue splits it, `flavor_shares`): a reserved flavor holds the reserved nodes within maxNodes, any other
    the pool's maxNodes. So a pool with a reservation may be promised its reserved share on top of maxNodes, which
    lets a gang the size of the pool be admitted on the hourly flavor. ResourceQuota: per resource, against the
    team's pools that offer it (the quota is per namespace; the admission policy keeps the team's pods on its pools).
    KAI Scheduler: one GPU quota per queue, against all of the team's pools. A pool its cloud does not bound
    (`BOUNDS_POOL_NODES`, GKE Autopilot) has no ceiling to be above. `autoscaler`: the resolved one, which decides a
    pool's flavors."""
    if not stack.teams or not stack.target.BOUNDS_POOL_NODES:
        return []
    lines = []
    for t in plan_teams(stack, plans):
        who = f"team {t.team.name}"
        if stack.quotas == "kai":
            quota, held = sum(t.nominal.values()), sum(p.max_units for p in t.pools)
            if quota > held:
                lines.append(f"{who}: its quota of {quota} GPUs is more than its pools ({', '.join(p.name for p in t.pools)}) ever hold at "
                             f"maxNodes ({held}); {quota - held} can never be used: lower its gpus or raise maxNodes")
            continue
        for resource in t.resources:
            if stack.quotas == "kueue":
                for pool in (p for p in t.pools if resource in p.node_resources):
                    per_node = pool.node_resources[resource]
                    flavors = kueue.pool_flavors(stack, pool, autoscaler)
                    shares = flavor_shares(pool, t.nominal_of(pool, resource), flavors, per_node)
                    for flavor in flavors:
                        nodes = coverage(pool.pool).usable if flavor.kind == RESERVED else pool.pool.max_nodes
                        units, held = shares[flavor.name], nodes * per_node
                        if units > held:
                            where = f"pool {pool.name}" + (f" (flavor {flavor.name})" if len(flavors) > 1 else "")
                            lines.append(f"{who}: its quota of {units} {resource} on {where} is more than the pool ever holds "
                                         f"({held} at maxNodes {pool.pool.max_nodes}); {units - held} can never be used: lower its gpus "
                                         f"on {pool.name} or raise maxNodes")
            else:
                offering = [p for p in t.pools if resource in p.node_resources]
                units, held = t.units_of(resource), sum(p.node_resources[resource] * p.pool.max_nodes for p in offering)
                if units > held:
                    lines.append(f"{who}: its ResourceQuota of {units} {resource} is more than its pools offering it "
                                 f"({', '.join(p.name for p in offering)}) ever hold at maxNodes ({held}); {units - held} can never be "
                                 f"used: lower its gpus or raise maxNodes")
    return lines
