"""Teams and their share of the GPU pools, whichever engine enforces it.

A team's share is counted in units of each pool's resource: a time-slice, an MPS share, a MIG slice and a
whole GPU each count as one. `gpus: 8` is eight units in total, split over the team's pools in proportion to
what each offers at maxNodes (largest remainder, so the parts add up to exactly eight); `gpus: {train: 6}` names
the units per pool. Both engines (`gpupools.queues.kueue`, `gpupools.queues.resourcequota`) start from the same split, so
switching `gpupools:quotas` never changes how much a team is promised, only how the promise is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpupools.stack.config import StackConfig, Team
from gpupools.core.pools import PoolPlan, Taint

TEAM_LABEL = "gpupools.io/team"
MANAGED = {"app.kubernetes.io/managed-by": "gpupools"}
GPU_RESOURCE_PREFIX = "nvidia.com/"


def split_units(total: int, weights: dict[str, int]) -> dict[str, int]:
    """Largest-remainder apportionment in integers: the parts sum to `total`, ties go to the earlier key."""
    if not weights:
        return {}
    if sum(weights.values()) == 0:
        weights = {k: 1 for k in weights}
    whole = sum(weights.values())
    parts = {k: divmod(total * w, whole) for k, w in weights.items()}
    order = sorted(weights, key=lambda k: (-parts[k][1], list(weights).index(k)))
    left = total - sum(q for q, _ in parts.values())
    return {k: parts[k][0] + (1 if k in order[:left] else 0) for k in weights}


@dataclass(frozen=True)
class TeamPlan:
    """One team's queue: the pools it may use and the GPUs it is promised on each."""

    team: Team
    pools: tuple[PoolPlan, ...]
    nominal: dict[str, int]  # pool name -> units the team is promised on it

    @property
    def resources(self) -> list[str]:
        """Extended resources the team's pools expose."""
        return sorted({r for p in self.pools for r in p.node_resources})

    def units_of(self, resource: str) -> int:
        return sum(self.nominal_of(p, resource) for p in self.pools)

    def nominal_of(self, pool: PoolPlan, resource: str) -> int:
        """The team's units of one resource on the pool: all of them, or on a pool of several resources (a mixed MIG
        layout) its units split in proportion to what one node offers of each."""
        return resource_shares(self.nominal[pool.name], pool).get(resource, 0)

    @property
    def restricted(self) -> bool:
        return self.team.pool_names is not None

    def borrowing_limit(self) -> int | None:
        """Units per pool the team may borrow; None is no limit."""
        borrow = self.team.borrow
        return None if borrow == "all" else 0 if borrow == "none" else borrow

    def lending_limit(self, pool: str) -> int | None:
        """Units of its quota on `pool` the team lends; None is all of it. Never more than it has."""
        lend = self.team.lend
        return None if lend == "all" else 0 if lend == "none" else min(lend, self.nominal[pool])


def resource_shares(units: int, pool: PoolPlan) -> dict[str, int]:
    """`units` of a pool split over its resources in proportion to one node's (largest remainder, in layout order)."""
    return split_units(units, pool.node_resources)


def plan_teams(stack: StackConfig, plans: list[PoolPlan]) -> list[TeamPlan]:
    by_name = {p.name: p for p in plans}
    out = []
    for team in stack.teams:
        names = team.pool_names if team.pool_names is not None else [p.name for p in plans]
        pools = tuple(by_name[n] for n in names if n in by_name)
        if isinstance(team.gpus, dict):
            nominal = {p.name: team.gpus[p.name] for p in pools}
        else:
            nominal = split_units(team.gpus, {p.name: p.max_units for p in pools})
        out.append(TeamPlan(team, pools, nominal))
    return out


def team_labels(team: Team) -> dict[str, str]:
    return {**MANAGED, TEAM_LABEL: team.name}


def namespace(plan: TeamPlan) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": plan.team.namespace_name, "labels": team_labels(plan.team)}}


def cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def requests_gpu_expression(containers: str) -> str:
    """CEL: does any container of `containers` request or limit an nvidia.com/ resource?"""
    return (f"{containers}.exists(c, has(c.resources) && ("
            f"(has(c.resources.limits) && c.resources.limits.exists(r, r.startsWith('{GPU_RESOURCE_PREFIX}'))) || "
            f"(has(c.resources.requests) && c.resources.requests.exists(r, r.startsWith('{GPU_RESOURCE_PREFIX}')))))")


def team_admission_policy(team: Team, suffix: str, resource_rules: list[dict], variables: list[dict],
                          validations: list[dict]) -> dict:
    """A ValidatingAdmissionPolicy that applies in the team's namespace only, failing closed."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": f"gpupools-team-{team.name}-{suffix}", "labels": team_labels(team)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.namespace_name}},
                "resourceRules": resource_rules,
            },
            "variables": variables,
            "validations": validations,
        },
    }


def admission_binding(policy: dict) -> dict:
    name = policy["metadata"]["name"]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": policy["metadata"]["labels"]},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }


def pool_totals(stack: StackConfig, plans: list[PoolPlan]) -> dict[str, tuple[int, int]]:
    """pool -> (units all teams are promised on it, units it offers at maxNodes); over 1 is over-subscribed."""
    promised = {p.name: 0 for p in plans}
    for t in plan_teams(stack, plans):
        for pool, units in t.nominal.items():
            promised[pool] += units
    return {p.name: (promised[p.name], p.max_units) for p in plans}


def quota_ratios(stack: StackConfig, plans: list[PoolPlan]) -> dict[str, tuple[int, int]]:
    """resource -> (units promised to teams, units all pools exposing it offer at maxNodes)."""
    out: dict[str, tuple[int, int]] = {}
    totals = pool_totals(stack, plans)
    for p in plans:
        promised = resource_shares(totals[p.name][0], p)
        for resource, per_node in p.node_resources.items():
            before = out.get(resource, (0, 0))
            out[resource] = (before[0] + promised[resource], before[1] + per_node * p.pool.max_nodes)
    return {r: v for r, v in sorted(out.items()) if v[0]}


def team_tolerates(team: Team, taint: Taint) -> bool:
    """Whether one of the team's tolerations matches the taint (k8s.io/api core/v1 toleration.go, ToleratesTaint: the same
    key, the same value unless the operator is Exists, the same effect unless the toleration names none)."""
    return any(t.key == taint.key and (t.operator == "Exists" or (t.value or "") == taint.value) and t.effect in (None, taint.effect)
               for t in team.tolerations)


def toleration_lines(stack: StackConfig, plans: list[PoolPlan]) -> list[str]:
    """Per pool with taints of its own (`pools[].taints`), which of its teams tolerate them (`teams[].tolerations`) and
    which do not: a team's job lands on the pool only if it tolerates each NoSchedule and NoExecute one."""
    teams = plan_teams(stack, plans)
    lines = []
    for plan in plans:
        users = [t.team for t in teams if plan in t.pools]
        for taint in plan.pool_taints:
            yes = [t.name for t in users if team_tolerates(t, taint)]
            no = [t.name for t in users if not team_tolerates(t, taint)]
            words = f"tolerated by {', '.join(yes) or 'no team'}" + (f"; not by {', '.join(no)}" if no else "")
            if taint.effect == "PreferNoSchedule":
                words += " (PreferNoSchedule only steers: every team may land)"
            lines.append(f"taint {taint.key}={taint.value}:{taint.effect} on pool {plan.name}: {words}")
    return lines
