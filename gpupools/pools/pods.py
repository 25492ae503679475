"""The pod spec of a workload on one pool: its GPU limits, node selector and tolerations, and HAMi's scheduler on
vgpu pools. `gpupools workload` wraps it in a Job; the scale-up check tests that very pod against each autoscaler's
picture of a new node, so what the check judges is what users run."""

from __future__ import annotations

from gpupools.core.pools import PoolPlan, toleration
from gpupools.core.sharing import HAMI_SCHEDULER, VGPU_CORES_RESOURCE, vgpu_memory_limits
from gpupools.stack.config import StackConfig, Team


def gpu_limits(plan: PoolPlan, units: int, gpu_memory: str | None = None, gpu_cores: int | None = None) -> dict[str, int]:
    """The container's GPU limits: units of the pool's resource, and on vgpu pools the memory (the pool's
    memoryPerPod unless given) and compute share of each vGPU, in the resources HAMi reads from limits."""
    limits = {plan.mechanism.resource: units}
    if plan.mechanism.mode == "vgpu":
        memory = gpu_memory or plan.sharing.memory_per_pod
        if memory is not None:
            limits.update(vgpu_memory_limits(memory))
        if gpu_cores is not None:
            limits[VGPU_CORES_RESOURCE] = gpu_cores
    return limits


def pod_tolerations(stack: StackConfig, plan: PoolPlan, team: Team | None = None) -> list[dict]:
    """What a pod of the pool tolerates: the taints gpupools and the cloud put on every GPU node, and the pool's own
    taints (`pools[].taints`) as a pool's Job without a team does, or for a team the tolerations it declares
    (`teams[].tolerations`), so a team that tolerates none of a pool's own taints does not land there."""
    own = plan.pool_taints
    out = [toleration(t) for t in plan.taints if team is None or t not in own] + stack.target.extra_tolerations(plan)
    if team is not None:
        out += [t for t in team_tolerations(team) if t not in out]
    return out


def team_tolerations(team: Team) -> list[dict]:
    return [t.as_kubernetes() for t in team.tolerations]


def pod_spec(stack: StackConfig, plan: PoolPlan | None, limits: dict[str, int], image: str, team: Team | None = None) -> dict:
    """One container asking for `limits`; with a pool, the node selector and tolerations that land it there; with a team,
    the team's tolerations (without a pool Kueue adds the chosen flavor's on admission)."""
    spec: dict = {"restartPolicy": "Never"}
    if plan is not None:
        spec["nodeSelector"] = plan.node_selector
        spec["tolerations"] = pod_tolerations(stack, plan, team)
        if plan.mechanism.mode == "vgpu":
            spec["schedulerName"] = HAMI_SCHEDULER
    elif team is not None and team.tolerations:
        spec["tolerations"] = team_tolerations(team)
    spec["containers"] = [{"name": "cuda", "image": image, "command": ["nvidia-smi", "-L"], "resources": {"limits": limits}}]
    return spec
