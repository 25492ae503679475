"""EKS: node readiness (startup taints) and repair (the node monitoring agent, managed node group and Karpenter node
repair).
"""

from __future__ import annotations




from gpupools.stack.config import Pool
from gpupools.core.pools import PoolPlan


# Readiness: EKS nodes can register with a startup taint (node-group taints reach the kubelet at boot, Karpenter sets
# NodePool startupTaints), and both autoscalers gpupools installs can be told to treat it as a startup taint.
STARTUP_TAINTS = True
READINESS_NOTE = "GPU nodes start tainted until the GPU Operator has validated driver, toolkit, CUDA and device plugin"


# Repair. The EKS node monitoring agent (add-on of the same name; aws/eks-node-monitoring-agent, chart
# eks-node-monitoring-agent 1.7.0) sets the node conditions AcceleratedHardwareReady, KernelReady, NetworkingReady,
# StorageReady and ContainerRuntimeReady; on NVIDIA nodes it reads GPU health from a DCGM host engine that its chart runs
# as the dcgm-server DaemonSet. That DaemonSet tolerates nothing by default (values.yaml dcgmAgent.tolerations: []),
# so on GPU nodes, which carry the GPU taint (and the readiness taint), it must be told to tolerate them.
NODE_MONITORING_AGENT = "eks-node-monitoring-agent"
NODE_MONITORING_AGENT_VALUES = {"dcgmAgent": {"tolerations": [{"operator": "Exists"}]}}
# Conditions (and the reasons that set them) a managed node group repairs by replacing the node at once rather than
# rebooting it: a GPU that fell off the bus (XID 79) or memory with uncorrectable errors does not recover by a reboot
# (aws/eks-node-monitoring-agent docs/node-health-issues.adoc: NvidiaXID79Error, NvidiaDoubleBitError set
# AcceleratedHardwareReady=False). The wait matches Karpenter's for AcceleratedHardwareReady (10m).
GPU_REPAIR_OVERRIDES = (("AcceleratedHardwareReady", "NvidiaXID79Error"), ("AcceleratedHardwareReady", "NvidiaDoubleBitError"))
GPU_REPAIR_WAIT_MINUTES = 10
# At most a fifth of a group unhealthy before repair stops (Karpenter's own guard is 20% of a NodePool), one node at a
# time: a fault that hits many nodes at once is rarely the nodes' own.
MAX_UNHEALTHY_PERCENT = 20
MAX_PARALLEL_REPAIRS = 1


def repair_enabled(pool: Pool) -> bool:
    return pool.auto_repair is not False


def node_repair_config(plan: PoolPlan) -> dict:
    """EKS node auto repair for the group (CreateNodegroup nodeRepairConfig; off unless enabled)."""
    if not repair_enabled(plan.pool):
        return {"enabled": False}
    return {
        "enabled": True,
        "max_unhealthy_node_threshold_percentage": MAX_UNHEALTHY_PERCENT,
        "max_parallel_nodes_repaired_count": MAX_PARALLEL_REPAIRS,
        "node_repair_config_overrides": [
            {"node_monitoring_condition": condition, "node_unhealthy_reason": reason, "min_repair_wait_time_mins": GPU_REPAIR_WAIT_MINUTES,
             "repair_action": "Replace"} for condition, reason in GPU_REPAIR_OVERRIDES],
    }


def arm64_hosts(plan: PoolPlan) -> bool:
    """Whether the pool's instance type has Arm hosts (catalog.yaml arch: Grace for p6e-gb200)."""
    from gpupools.clouds.aws.provider import NAME
    from gpupools.core.catalog import load_catalog

    row = load_catalog().instance(NAME, plan.pool.instance_type)
    return row is not None and row.arch == "arm64"


# On arm64 hosts the agent watches no NVIDIA GPU: its NVIDIA monitor turns itself off there (aws/eks-node-monitoring-agent
# v1.7.0 monitors/nvidia/monitor.go, Register: "NVIDIA-based monitoring is disabled for the arm64 architecture"), and its
# chart runs the dcgm-server DaemonSet on amd64 nodes only (charts/eks-node-monitoring-agent/values.yaml,
# dcgmAgent.affinity `kubernetes.io/arch In [amd64]`).
ARM64_GPU_HEALTH = (f"nothing sets a GPU condition: {NODE_MONITORING_AGENT} 1.7.0 turns its NVIDIA monitor off on arm64 hosts and runs "
                    f"its DCGM host engine on amd64 only, so no XID or ECC fault reaches AcceleratedHardwareReady; it still reports "
                    f"kernel, network, storage and container runtime conditions")


def repair_facts(plan: PoolPlan, autoscaler: str) -> tuple[str, str]:
    """(what notices a broken GPU, what happens next) for one pool on EKS."""
    detects = (f"{NODE_MONITORING_AGENT} (DCGM health, XID, double-bit ECC, NVLink, device count) sets AcceleratedHardwareReady=False")
    if arm64_hosts(plan):
        detects = ARM64_GPU_HEALTH
        if autoscaler != "karpenter" and repair_enabled(plan.pool):
            return detects, (f"EKS node repair acts on the agent's other conditions and on NotReady nodes (EKS defaults), one node at a "
                             f"time, stopping above {MAX_UNHEALTHY_PERCENT}% unhealthy; a broken GPU waits for someone to replace the node")
    if autoscaler == "karpenter":
        floor = (f"; the {plan.name}-floor node group: EKS node repair, XID 79 and double-bit errors replaced after {GPU_REPAIR_WAIT_MINUTES}m"
                 if plan.pool.min_nodes else "")
        return detects, ("Karpenter node repair replaces the node after 10m (other agent conditions and NotReady after 30m), "
                         "unless more than 20% of the NodePool is unhealthy" + floor)
    if not repair_enabled(plan.pool):
        return detects, "nothing: EKS node repair is off for this node group (autoRepair: false); replace the node by hand"
    return detects, (f"EKS node repair: XID 79 and double-bit errors replace the node after {GPU_REPAIR_WAIT_MINUTES}m, other faults "
                     f"reboot or replace it (EKS defaults), one node at a time, stopping above {MAX_UNHEALTHY_PERCENT}% unhealthy")
