"""A Kubernetes Job that lands on one pool: its GPU request, the pool's tolerations and node selector."""

from __future__ import annotations

from . import clouds
from .config import StackConfig
from .pools import POOL_LABEL, PoolPlan, toleration


def job_manifest(stack: StackConfig, plan: PoolPlan, image: str, units: int = 1) -> dict:
    """Requests are whole units of the pool's resource (a time-slice, an MPS share, a MIG slice or a GPU)."""
    tolerations = [toleration(t) for t in plan.taints] + clouds.get(stack.cloud).extra_tolerations(plan)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"gpu-smoke-{plan.name}", "labels": {POOL_LABEL: plan.name}},
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": {POOL_LABEL: plan.name}},
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
