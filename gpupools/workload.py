"""A Kubernetes Job that lands on one pool: its GPU request, the pool's tolerations and node selector."""

from __future__ import annotations

from . import clouds
from .autoscaling import KARPENTER, resolve_autoscaler
import re

from .config import GPU_MEMORY, StackConfig
from .errors import Problem
from .pools import POOL_LABEL, PoolPlan, toleration
from .sharing import HAMI_SCHEDULER, VGPU_CORES_RESOURCE, gpu_memory_problem, vgpu_memory_limits


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


def job_manifest(stack: StackConfig, plan: PoolPlan, image: str, units: int = 1, gpu_memory: str | None = None,
                 gpu_cores: int | None = None) -> dict:
    """Requests are whole units of the pool's resource (a time-slice, an MPS share, a MIG slice, a vGPU or a GPU).

    On Karpenter pools the pod asks Karpenter not to disrupt its node (drift, consolidation) while it runs. On
    vgpu pools the pod names HAMi's scheduler itself, so it is placed by GPU memory and compute even where HAMi's
    admission webhook did not see it.
    """
    from .karpenter import DO_NOT_DISRUPT

    tolerations = [toleration(t) for t in plan.taints] + clouds.get(stack.cloud).extra_tolerations(plan)
    pod_metadata: dict = {"labels": {POOL_LABEL: plan.name}}
    if resolve_autoscaler(stack.cloud, stack.cluster.create, stack.autoscaler) == KARPENTER:
        pod_metadata["annotations"] = {DO_NOT_DISRUPT: "true"}
    pod_spec: dict = {
        "restartPolicy": "Never",
        "nodeSelector": {POOL_LABEL: plan.name},
        "tolerations": tolerations,
        "containers": [{
            "name": "cuda",
            "image": image,
            "command": ["nvidia-smi", "-L"],
            "resources": {"limits": gpu_limits(plan, units, gpu_memory, gpu_cores)},
        }],
    }
    if plan.mechanism.mode == "vgpu":
        pod_spec["schedulerName"] = HAMI_SCHEDULER
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"gpu-smoke-{plan.name}", "labels": {POOL_LABEL: plan.name}},
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {"metadata": pod_metadata, "spec": pod_spec},
        },
    }
