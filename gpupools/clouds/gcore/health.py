"""Gcore: node readiness and repair.
"""

from __future__ import annotations



from gpupools.core.pools import PoolPlan
from gpupools.stack.config import Pool
from gpupools.clouds.gcore.provider import bare_metal


def auto_healing(pool: Pool) -> bool:
    """Unset: on for virtual machines; off for bare metal, as Gcore's GPU guide asks of GPU bare-metal pools (DOCS
    cloud/kubernetes/clusters/autoscaling/configure-gpu-autoscaling-for-kubernetes.mdx, step 1.7: "Disable the
    Autohealing nodes toggle"). The API's own default is off (SPEC: auto_healing_enabled default false)."""
    if pool.auto_repair is not None:
        return pool.auto_repair
    return not bare_metal(pool.instance_type)
STARTUP_TAINTS = False
READINESS_NOTE = ("GPU pods wait for the device plugin's resource; Gcore's cluster autoscaler takes no startup taint gpupools could "
                  "register, so new nodes start without one")


def repair_facts(plan: PoolPlan, autoscaler: str) -> tuple[str, str]:
    """Gcore's auto-healing drains and replaces a node whose Kubernetes node conditions turn unhealthy (DOCS
    create-a-gpu-kubernetes-cluster.mdx, "Autohealing nodes"); it reads no GPU health of its own."""
    detects = "the GPU alerts (DCGM XID and row-remap faults); Gcore checks node conditions, not GPUs"
    if auto_healing(plan.pool):
        return detects, "Gcore auto-healing drains and replaces a node whose node conditions turn unhealthy"
    return detects, ("nothing: auto-healing is off on this pool (bare metal, as Gcore's GPU guide asks; autoRepair: true turns it on); "
                     "a broken GPU is alerted to the platform team")
