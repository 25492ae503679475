"""GKE: node readiness and repair.
"""

from __future__ import annotations



from gpupools.core.pools import PoolPlan
from gpupools.capacity import sources as capacity
from gpupools.clouds.gcp.capacity import compute_class, uses_compute_class


# Readiness: no startup taint, for the reason AKS has none: GKE's cluster autoscaler builds its template from the node
# pool's taints and cannot be given --startup-taint; it counts a node labelled cloud.google.com/gke-accelerator without
# allocatable nvidia.com/gpu as still starting (kubernetes/autoscaler cluster-autoscaler/processors/customresources/
# gpu_processor.go).
STARTUP_TAINTS = False
READINESS_NOTE = ("GPU pods wait for the device plugin's resource; the GKE autoscaler counts a GPU node as starting until nvidia.com/gpu is "
                  "allocatable (no startup taint: it cannot be told to ignore one)")


def repair_facts(plan: PoolPlan, autoscaler: str) -> tuple[str, str]:
    """(what notices a broken GPU, what happens next) for one pool on GKE. GKE auto-repair recreates nodes NotReady
    (or without status) for about 10 minutes or out of boot disk for about 30 (cloud.google.com/kubernetes-engine/docs/
    how-to/node-auto-repair); it has no documented GPU-health criterion."""
    detects = "the GPU alerts (DCGM XID and row-remap faults); GKE auto-repair checks node readiness, not GPU health"
    if uses_compute_class(plan.pool):
        # What the class tells GKE for every node pool it creates for it, flex-start priorities' included.
        if not compute_class(plan, None)["spec"]["nodePoolConfig"].get("autoRepair"):
            return detects, "nothing: the ComputeClass sets nodePoolConfig.autoRepair: false; replace the node by hand"
        return detects, ("GKE auto-repair (the ComputeClass's nodePoolConfig.autoRepair: true, on every node pool GKE creates for it) "
                         "recreates a node NotReady for about 10m; a GPU fault that leaves the node Ready is alerted, not repaired")
    if plan.pool.auto_repair is False:
        return detects, "nothing: GKE auto-repair is off for this pool (autoRepair: false); replace the node by hand"
    if any(capacity.has(plan.pool, kind) for kind in capacity.DWS):
        return detects, ("nothing: GKE runs flex-start and queued-provisioning pools with auto-repair off; a broken node goes "
                         "when its run ends (maxRunDuration) or its workload is deleted")
    return detects, "GKE auto-repair recreates a node NotReady for about 10m; a GPU fault that leaves the node Ready is alerted, not repaired"
