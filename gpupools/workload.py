"""A Kubernetes Job that lands on one pool, or queues for a team's GPU quota.

Without a team the Job carries what the pool demands itself: the GPU request, the pool's tolerations and node
selector. For a team on Kueue it names the team's LocalQueue and priority and starts suspended, as Kueue
expects; Kueue picks the pool (ResourceFlavor) the quota comes from and adds its node selector and tolerations
on admission, unless the Job names a pool itself.
"""

from __future__ import annotations

from . import clouds
from .autoscaling import KARPENTER, resolve_autoscaler
from .config import StackConfig
from .errors import ConfigError, Problem
from .pools import POOL_LABEL, PoolPlan, toleration
from .teams import TeamPlan, plan_teams


def job_manifest(stack: StackConfig, plan: PoolPlan, image: str, units: int = 1) -> dict:
    """Requests are whole units of the pool's resource (a time-slice, an MPS share, a MIG slice or a GPU).

    On Karpenter pools the pod asks Karpenter not to disrupt its node (drift, consolidation) while it runs.
    """
    return _job(stack, f"gpu-smoke-{plan.name}", plan.mechanism.resource, image, units, plan)


def _job(stack: StackConfig, name: str, resource: str, image: str, units: int, plan: PoolPlan | None) -> dict:
    from .karpenter import DO_NOT_DISRUPT

    pod_spec: dict = {"restartPolicy": "Never"}
    labels: dict = {}
    if plan is not None:
        labels = {POOL_LABEL: plan.name}
        pod_spec["nodeSelector"] = {POOL_LABEL: plan.name}
        pod_spec["tolerations"] = [toleration(t) for t in plan.taints] + clouds.get(stack.cloud).extra_tolerations(plan)
    pod_spec["containers"] = [{"name": "cuda", "image": image, "command": ["nvidia-smi", "-L"], "resources": {"limits": {resource: units}}}]
    pod_metadata: dict = {"labels": dict(labels)} if labels else {}
    if resolve_autoscaler(stack.cloud, stack.cluster.create, stack.autoscaler) == KARPENTER:
        pod_metadata["annotations"] = {DO_NOT_DISRUPT: "true"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 3600, "template": {"metadata": pod_metadata, "spec": pod_spec}},
    }


def team_job(stack: StackConfig, plans: list[PoolPlan], team: str, pool: str | None, priority: str | None,
             image: str, units: int = 1) -> dict:
    """The Job a member of `team` submits; raises ConfigError naming the option that cannot work."""
    from .kueue import PRIORITY_LABEL, QUEUE_LABEL, allowed_priorities

    teams = {t.team.name: t for t in plan_teams(stack, plans)}
    if team not in teams:
        raise ConfigError([Problem("--team", f"{team!r} is not a team of this stack; teams: {', '.join(teams) or 'none'}")])
    t = teams[team]
    target = _team_pool(stack, t, pool)
    resource = target.mechanism.resource if target else t.resources[0]
    per_node = max(p.units_per_node for p in ([target] if target else t.pools) if p.mechanism.resource == resource)
    if units > per_node:
        raise ConfigError([Problem("--units", f"{units} exceeds what one node offers ({per_node} x {resource})")])
    name = f"gpu-smoke-{team}" + (f"-{target.name}" if target else "")
    job = _job(stack, name, resource, image, units, target)
    job["metadata"] = {"name": name, "namespace": t.team.namespace_name, "labels": job["metadata"]["labels"]}
    if stack.quotas != "kueue":
        if priority is not None:
            raise ConfigError([Problem("--priority", "priorities need gpupools:quotas: kueue")])
        return job
    allowed = allowed_priorities(t.team.priority)
    chosen = priority or t.team.priority
    if chosen not in allowed:
        raise ConfigError([Problem("--priority", f"team {team} may use {', '.join(allowed)}; got {chosen!r}")])
    job["metadata"]["labels"].update({QUEUE_LABEL: team, PRIORITY_LABEL: chosen})
    job["spec"] = {"suspend": True, **job["spec"]}
    return job


def _team_pool(stack: StackConfig, team: TeamPlan, pool: str | None) -> PoolPlan | None:
    names = [p.name for p in team.pools]
    if not team.pools:
        raise ConfigError([Problem("--team", f"team {team.team.name} has no GPU pools")])
    if pool is not None:
        if pool not in names:
            raise ConfigError([Problem("--pool", f"{pool!r} is not a pool of team {team.team.name}; its pools: {', '.join(names)}")])
        return next(p for p in team.pools if p.name == pool)
    if stack.quotas != "kueue":
        raise ConfigError([Problem("--pool", f"required with gpupools:quotas: {stack.quotas}: a ResourceQuota does not choose a pool; "
                                             f"team {team.team.name}'s pools: {', '.join(names)}")])
    if len(team.resources) > 1:
        offers = ", ".join(f"{p.name} ({p.mechanism.resource})" for p in team.pools)
        raise ConfigError([Problem("--pool", f"team {team.team.name}'s pools offer different GPU resources: {offers}; choose one with --pool")])
    return None
