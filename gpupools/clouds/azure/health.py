"""AKS: node readiness and repair.
"""

from __future__ import annotations



from gpupools.core.pools import PoolPlan


# Readiness: no startup taint. The AKS cluster autoscaler builds its template from the agent pool's taints and takes no
# --startup-taint, so a node that is Ready but still tainted would look full and it would start another. It counts a
# node with the GPU label but no allocatable nvidia.com/gpu as still starting (kubernetes/autoscaler cluster-autoscaler/
# processors/customresources/gpu_processor.go; AKS label kubernetes.azure.com/accelerator), and GPU pods wait for the
# device plugin's resource anyway.
STARTUP_TAINTS = False
READINESS_NOTE = ("GPU pods wait for the device plugin's resource; the AKS autoscaler counts a GPU node as starting until nvidia.com/gpu is "
                  "allocatable (no startup taint: it cannot be told to ignore one)")


def repair_facts(plan: PoolPlan, autoscaler: str) -> tuple[str, str]:
    """(what notices a broken GPU, what happens next) for one pool on AKS. AKS node auto-repair acts on NotReady or
    missing status only (reboot, reimage, redeploy); the node problem detector's GPU conditions (GPUMissing, XIDErrors,
    NVLinkStatusInactive, ...) are reported, not acted on, and are not checked on pools whose driver AKS does not
    install (MicrosoftDocs/azure-aks-docs articles/aks/node-auto-repair.md, node-problem-detector.md)."""
    if plan.mechanism.installer == "gpu-operator":
        detects = "the GPU alerts (DCGM XID and row-remap faults); AKS checks no GPU health on pools whose driver the GPU Operator installs"
    else:
        detects = "AKS node problem detector GPU conditions (GPUMissing, XIDErrors, NVLinkStatusInactive) and the GPU alerts"
    return detects, ("AKS node auto-repair reboots, then reimages, then redeploys a node NotReady for 5m or more; a GPU fault that leaves the "
                     "node Ready is alerted to the platform team, not repaired")
