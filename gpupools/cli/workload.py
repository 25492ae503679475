"""A Kubernetes Job that lands on one pool, or queues for a team's GPU quota.

Without a team the Job carries what the pool demands itself: the GPU request, the pool's tolerations and node
selector (and HAMi's scheduler on vgpu pools). For a team on Kueue it names the team's LocalQueue and priority
and starts suspended, as Kueue expects; Kueue picks the pool (ResourceFlavor) the quota comes from and adds its
node selector and tolerations on admission, unless the Job names a pool itself.
"""

from __future__ import annotations

import re

from gpupools.autoscaling.choice import resolve_autoscaler
from gpupools.autoscaling.templates import eviction_guard
from gpupools.core.pools import POOL_LABEL, PoolPlan
from gpupools.core.sharing import gpu_memory_problem
from gpupools.pools.pods import gpu_limits, pod_spec
from gpupools.queues.kueue import PRIORITY_LABEL, QUEUE_LABEL, allowed_priorities
from gpupools.queues.teams import TeamPlan, plan_teams
from gpupools.stack.config import GPU_MEMORY, StackConfig
from gpupools.stack.errors import ConfigError, Problem


def workload_problems(plan: PoolPlan, units: int, gpu_memory: str | None, gpu_cores: int | None) -> list[Problem]:
    """What one pod of the pool cannot ask for. A vGPU request of N means N different physical GPUs (HAMi never
    gives one container two slices of the same GPU), so it is bounded by the node's GPUs, not its vGPUs."""
    problems = []
    vgpu = plan.mechanism.mode == "vgpu"
    limit, what = ((plan.hardware.gpus_per_node, f"{plan.hardware.gpus_per_node} physical GPUs, and each vGPU of a pod is on a different one")
                   if vgpu else (plan.units_per_node, f"{plan.units_per_node} x {plan.mechanism.resource}"))
    if units > limit:
        problems.append(Problem("--units", f"{units} exceeds what one node of pool {plan.name!r} offers ({what})"))
    for option, value in (("--gpu-memory", gpu_memory), ("--gpu-cores", gpu_cores)):
        if value is not None and not vgpu:
            problems.append(Problem(option, f"applies to vgpu pools only; pool {plan.name!r} shares its GPUs by {plan.mechanism.mode!r}"))
    if vgpu and gpu_memory is not None:
        problem = (gpu_memory_problem(gpu_memory, plan.hardware, plan.sharing.memory_scaling) if re.match(GPU_MEMORY, gpu_memory)
                   else f"{gpu_memory!r} is not a GPU memory share such as 25% or an amount such as 8Gi or 3000Mi")
        if problem:
            problems.append(Problem("--gpu-memory", problem))
    if vgpu and gpu_cores is not None and not 1 <= gpu_cores <= 100:
        problems.append(Problem("--gpu-cores", f"{gpu_cores} is not a compute share; use 1 to 100 (percent of one GPU)"))
    return problems


def job_manifest(stack: StackConfig, plan: PoolPlan, image: str, units: int = 1, gpu_memory: str | None = None,
                 gpu_cores: int | None = None) -> dict:
    """Requests are whole units of the pool's resource (a time-slice, an MPS share, a MIG slice, a vGPU or a GPU).

    The pod asks the pool's autoscaler not to take its node away while it runs (Karpenter's do-not-disrupt,
    cluster-autoscaler's safe-to-evict "false"; see autoscaling.templates.eviction_guard). On
    vgpu pools the pod names HAMi's scheduler itself, so it is placed by GPU memory and compute even where HAMi's
    admission webhook did not see it.
    """
    return _job(stack, f"gpu-smoke-{plan.name}", gpu_limits(plan, units, gpu_memory, gpu_cores), image, plan)


def _job(stack: StackConfig, name: str, limits: dict[str, int], image: str, plan: PoolPlan | None) -> dict:
    labels = {POOL_LABEL: plan.name} if plan is not None else {}
    spec = pod_spec(stack, plan, limits, image)
    pod_metadata: dict = {"labels": dict(labels)} if labels else {}
    guard = eviction_guard(resolve_autoscaler(stack.cloud, stack.cluster.create, stack.autoscaler))
    if guard:
        pod_metadata["annotations"] = guard
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 3600, "template": {"metadata": pod_metadata, "spec": spec}},
    }


def team_job(stack: StackConfig, plans: list[PoolPlan], team: str, pool: str | None, priority: str | None,
             image: str, units: int = 1, gpu_memory: str | None = None, gpu_cores: int | None = None) -> dict:
    """The Job a member of `team` submits; raises ConfigError naming the option that cannot work."""
    teams = {t.team.name: t for t in plan_teams(stack, plans)}
    if team not in teams:
        raise ConfigError([Problem("--team", f"{team!r} is not a team of this stack; teams: {', '.join(teams) or 'none'}")])
    t = teams[team]
    target = _team_pool(stack, t, pool)
    if target is not None:
        problems = workload_problems(target, units, gpu_memory, gpu_cores)
        if problems:
            raise ConfigError(problems)
        limits = gpu_limits(target, units, gpu_memory, gpu_cores)
    else:
        resource = t.resources[0]
        per_node = max(p.units_per_node for p in t.pools if p.mechanism.resource == resource)
        if units > per_node:
            raise ConfigError([Problem("--units", f"{units} exceeds what one node offers ({per_node} x {resource})")])
        for option, value in (("--gpu-memory", gpu_memory), ("--gpu-cores", gpu_cores)):
            if value is not None:
                raise ConfigError([Problem(option, "applies to vgpu pools only; name the pool with --pool")])
        limits = {resource: units}
    name = f"gpu-smoke-{team}" + (f"-{target.name}" if target else "")
    job = _job(stack, name, limits, image, target)
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
    vgpu = [p.name for p in team.pools if p.mechanism.mode == "vgpu"]
    if vgpu:
        # Kueue sets the node selector, not the scheduler: a pod bound for a vgpu pool must name HAMi's scheduler itself.
        raise ConfigError([Problem("--pool", f"team {team.team.name}'s pool {vgpu[0]} shares GPUs as vGPUs, whose pods name HAMi's scheduler; "
                                             "choose the pool with --pool")])
    return None
