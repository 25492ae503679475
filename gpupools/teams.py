"""Team quotas: a namespace per team, a ResourceQuota on every GPU resource its pools expose, and an
admission policy that keeps the team's GPU pods on its own pools.

A quota counts units of an extended resource, and one pool's unit is another pool's whole GPU: a time-slice,
an MPS share and a MIG slice all count as one. `gpus: 8` therefore allows eight units of each resource the
team's pools offer (`requests.nvidia.com/gpu`, `requests.nvidia.com/mig-3g.40gb`, ...). Kubernetes accepts only
`requests.` quotas for extended resources, and requests equal limits for them, so that is the whole story.

Quotas are per namespace and per resource, not per pool: a team limited to pool `infer` could otherwise run
`nvidia.com/gpu` pods on any other pool that exposes `nvidia.com/gpu`. The ValidatingAdmissionPolicy (GA in
Kubernetes 1.30) closes that: in the team's namespace, a pod that requests any nvidia.com/ resource must
select one of the team's pools with `nodeSelector: {gpupools.io/pool: <pool>}`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import StackConfig, Team
from .pools import POOL_LABEL, PoolPlan

TEAM_LABEL = "gpupools.io/team"
QUOTA_NAME = "gpupools-gpu-quota"
MANAGED = {"app.kubernetes.io/managed-by": "gpupools"}
# ValidatingAdmissionPolicy admissionregistration.k8s.io/v1 is served from Kubernetes 1.30.
ADMISSION_POLICY_MIN_VERSION = (1, 30)
GPU_RESOURCE_PREFIX = "nvidia.com/"


@dataclass(frozen=True)
class TeamPlan:
    team: Team
    pools: tuple[PoolPlan, ...]

    @property
    def resources(self) -> list[str]:
        """Extended resources the team's pools expose, each to be quota'd."""
        return sorted({p.mechanism.resource for p in self.pools})

    @property
    def restricted(self) -> bool:
        return self.team.pools is not None


def plan_teams(stack: StackConfig, plans: list[PoolPlan]) -> list[TeamPlan]:
    by_name = {p.name: p for p in plans}
    out = []
    for team in stack.teams:
        names = team.pools if team.pools is not None else [p.name for p in plans]
        out.append(TeamPlan(team, tuple(by_name[n] for n in names if n in by_name)))
    return out


def admission_policy_supported(stack: StackConfig) -> bool:
    """Unknown versions (existing clusters, provider defaults) are current ones, which all serve v1."""
    version = stack.cluster.kubernetes_version
    if version is None:
        return True
    major, minor = (int(x) for x in version.split("."))
    return (major, minor) >= ADMISSION_POLICY_MIN_VERSION


def namespace(plan: TeamPlan) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": plan.team.namespace_name, "labels": {**MANAGED, TEAM_LABEL: plan.team.name}}}


def resource_quota(plan: TeamPlan) -> dict:
    hard = {f"requests.{resource}": str(plan.team.gpus) for resource in plan.resources}
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {
        "name": QUOTA_NAME, "namespace": plan.team.namespace_name, "labels": {**MANAGED, TEAM_LABEL: plan.team.name}},
        "spec": {"hard": hard}}


def admission_policy_name(team: Team) -> str:
    return f"gpupools-team-{team.name}-pools"


def _cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def admission_policy(plan: TeamPlan) -> dict:
    team = plan.team
    allowed = [p.name for p in plan.pools]
    allowed_cel = "[" + ", ".join(_cel_string(n) for n in allowed) + "]"
    requests_gpu = (
        "variables.containers.exists(c, has(c.resources) && ("
        f"(has(c.resources.limits) && c.resources.limits.exists(r, r.startsWith('{GPU_RESOURCE_PREFIX}'))) || "
        f"(has(c.resources.requests) && c.resources.requests.exists(r, r.startsWith('{GPU_RESOURCE_PREFIX}')))))"
    )
    on_team_pool = (f"has(object.spec.nodeSelector) && {_cel_string(POOL_LABEL)} in object.spec.nodeSelector && "
                    f"object.spec.nodeSelector[{_cel_string(POOL_LABEL)}] in {allowed_cel}")
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": admission_policy_name(team), "labels": {**MANAGED, TEAM_LABEL: team.name}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.namespace_name}},
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
            },
            "variables": [
                {"name": "containers",
                 "expression": "object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])"},
                {"name": "requestsGpu", "expression": requests_gpu},
            ],
            "validations": [{
                "expression": f"!variables.requestsGpu || ({on_team_pool})",
                "message": (f"pods of team {team.name} that request GPUs must set nodeSelector {POOL_LABEL} to one of the "
                            f"team's pools: {', '.join(allowed) or '(none)'}"),
                "reason": "Forbidden",
            }],
        },
    }


def admission_binding(plan: TeamPlan) -> dict:
    name = admission_policy_name(plan.team)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": {**MANAGED, TEAM_LABEL: plan.team.name}},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }


def team_objects(stack: StackConfig, plans: list[PoolPlan]) -> list[dict]:
    """Every manifest the teams need, namespaces first (the quotas live in them)."""
    teams = plan_teams(stack, plans)
    objects = [namespace(t) for t in teams] + [resource_quota(t) for t in teams if t.resources]
    if admission_policy_supported(stack):
        for t in teams:
            if t.restricted:
                objects += [admission_policy(t), admission_binding(t)]
    return objects


def quota_ratios(stack: StackConfig, plans: list[PoolPlan]) -> dict[str, tuple[int, int]]:
    """resource -> (sum of team quotas, units all pools exposing it offer at maxNodes); over 1 is over-subscribed."""
    capacity: dict[str, int] = {}
    for p in plans:
        capacity[p.mechanism.resource] = capacity.get(p.mechanism.resource, 0) + p.max_units
    quotas: dict[str, int] = {}
    for t in plan_teams(stack, plans):
        for resource in t.resources:
            quotas[resource] = quotas.get(resource, 0) + t.team.gpus
    return {r: (q, capacity.get(r, 0)) for r, q in sorted(quotas.items())}


def quota_summary(stack: StackConfig, plans: list[PoolPlan]) -> str | None:
    """One line for `gpupools plan`; None without teams."""
    ratios = quota_ratios(stack, plans)
    if not stack.teams:
        return None
    parts = [f"{r} {q} of {c} ({q / c:.2f}x)" if c else f"{r} {q} of 0" for r, (q, c) in ratios.items()]
    over = any(c == 0 or q > c for q, c in ratios.values())
    teams = f"{len(stack.teams)} team{'s' if len(stack.teams) != 1 else ''}"
    return (f"team quotas ({teams}) vs. units at maxNodes: {', '.join(parts) or 'none'}"
            + ("; over-subscribed (allowed; gpupools check warns above its maxRatio)" if over else ""))
