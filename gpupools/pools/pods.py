"""The pod spec of a workload on one pool: its GPU limits, node selector and tolerations, and HAMi's scheduler on
vgpu pools. `gpupools workload` wraps it in a Job; the scale-up check tests that very pod against each autoscaler's
picture of a new node, so what the check judges is what users run."""

from __future__ import annotations

from gpupools.core.pools import PoolPlan, toleration
from gpupools.core.sharing import HAMI_SCHEDULER, VGPU_CORES_RESOURCE, vgpu_memory_limits
from gpupools.stack.config import StackConfig


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


def pod_spec(stack: StackConfig, plan: PoolPlan | None, limits: dict[str, int], image: str) -> dict:
    """One container asking for `limits`; with a pool, the node selector and tolerations that land it there."""
    spec: dict = {"restartPolicy": "Never"}
    if plan is not None:
        spec["nodeSelector"] = plan.node_selector
        spec["tolerations"] = [toleration(t) for t in plan.taints] + stack.target.extra_tolerations(plan)
        if plan.mechanism.mode == "vgpu":
            spec["schedulerName"] = HAMI_SCHEDULER
    spec["containers"] = [{"name": "cuda", "image": image, "command": ["nvidia-smi", "-L"], "resources": {"limits": limits}}]
    return spec
