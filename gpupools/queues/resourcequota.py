"""Team quotas as hard limits: a ResourceQuota per team namespace and an admission policy on its pools.

A ResourceQuota counts units of an extended resource per namespace, not per pool, so a team's quota on a
resource is the sum of its units on every pool of the team exposing that resource. Kubernetes accepts only
`requests.` quotas for extended resources, and requests equal limits for them, so that is the whole story.
Nothing queues: a pod over quota is rejected, and a team cannot lend what it does not use.

Quotas are per namespace and per resource: a team limited to pool `infer` could otherwise run
`nvidia.com/gpu` pods on any other pool that exposes `nvidia.com/gpu`. The ValidatingAdmissionPolicy (GA in
Kubernetes 1.30) closes that: in the team's namespace, a pod that requests any nvidia.com/ resource must
select one of the team's pools with `nodeSelector: {gpupools.io/pool: <pool>}`.
"""

from __future__ import annotations

from gpupools.stack.config import StackConfig
from gpupools.core.pools import POOL_LABEL
from gpupools.queues.teams import TeamPlan, admission_binding, cel_string, namespace, requests_gpu_expression, team_admission_policy, team_labels

QUOTA_NAME = "gpupools-gpu-quota"
# ValidatingAdmissionPolicy admissionregistration.k8s.io/v1 is served from Kubernetes 1.30.
ADMISSION_POLICY_MIN_VERSION = (1, 30)


def admission_policy_supported(stack: StackConfig) -> bool:
    """Unknown versions (existing clusters, provider defaults) are current ones, which all serve v1."""
    version = stack.cluster.kubernetes_version
    if version is None:
        return True
    major, minor = (int(x) for x in version.split("."))
    return (major, minor) >= ADMISSION_POLICY_MIN_VERSION


def resource_quota(plan: TeamPlan) -> dict:
    hard = {f"requests.{resource}": str(plan.units_of(resource)) for resource in plan.resources}
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {
        "name": QUOTA_NAME, "namespace": plan.team.namespace_name, "labels": team_labels(plan.team)},
        "spec": {"hard": hard}}


def admission_policy(plan: TeamPlan) -> dict:
    team = plan.team
    allowed = [p.name for p in plan.pools]
    allowed_cel = "[" + ", ".join(cel_string(n) for n in allowed) + "]"
    on_team_pool = (f"has(object.spec.nodeSelector) && {cel_string(POOL_LABEL)} in object.spec.nodeSelector && "
                    f"object.spec.nodeSelector[{cel_string(POOL_LABEL)}] in {allowed_cel}")
    return team_admission_policy(
        team, "pools",
        [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
        [{"name": "containers", "expression": "object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])"},
         {"name": "requestsGpu", "expression": requests_gpu_expression("variables.containers")}],
        [{"expression": f"!variables.requestsGpu || ({on_team_pool})",
          "message": (f"pods of team {team.name} that request GPUs must set nodeSelector {POOL_LABEL} to one of the "
                      f"team's pools: {', '.join(allowed) or '(none)'}"),
          "reason": "Forbidden"}],
    )


def team_objects(stack: StackConfig, teams: list[TeamPlan]) -> list[dict]:
    """Every manifest the teams need, namespaces first (the quotas live in them)."""
    objects = [namespace(t) for t in teams] + [resource_quota(t) for t in teams if t.resources]
    if admission_policy_supported(stack):
        for t in teams:
            if t.restricted:
                policy = admission_policy(t)
                objects += [policy, admission_binding(policy)]
    return objects
