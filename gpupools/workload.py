"""A Kubernetes Job that lands on one pool: its GPU request, the pool's tolerations and node selector."""

from __future__ import annotations

from . import clouds
from .autoscaling import KARPENTER, resolve_autoscaler
from .config import StackConfig
from .pools import POOL_LABEL, PoolPlan, toleration


def job_manifest(stack: StackConfig, plan: PoolPlan, image: str, units: int = 1) -> dict:
    """Requests are whole units of the pool's resource (a time-slice, an MPS share, a MIG slice or a GPU).

    On Karpenter pools the pod asks Karpenter not to disrupt its node (drift, consolidation) while it runs.
    """
    from .karpenter import DO_NOT_DISRUPT

    tolerations = [toleration(t) for t in plan.taints] + clouds.get(stack.cloud).extra_tolerations(plan)
    pod_metadata: dict = {"labels": {POOL_LABEL: plan.name}}
    if resolve_autoscaler(stack.cloud, stack.cluster.create, stack.autoscaler) == KARPENTER:
        pod_metadata["annotations"] = {DO_NOT_DISRUPT: "true"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"gpu-smoke-{plan.name}", "labels": {POOL_LABEL: plan.name}},
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": pod_metadata,
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {POOL_LABEL: plan.name},
                    "tolerations": tolerations,
                    "containers": [{
                        "name": "cuda",
                        "image": image,
                        "command": ["nvidia-smi", "-L"],
                        "resources": {"limits": {plan.mechanism.resource: units}},
                    }],
                },
            },
        },
    }
