"""Healthy while it runs: alerts on the node conditions the clouds' health agents set on GPU nodes, and on a GPU node
whose readiness gate never opens. The DCGM fault alerts (XID, row remapping) live with the other GPU rules.

Conditions reach Prometheus through kube-state-metrics' `kube_node_status_condition{node, condition, status}`, one
series per status with value 1 for the current one; `kube_node_spec_taint{node, key, value, effect}` lists taints.
Only gpupools GPU nodes are judged: the series are joined with `kube_node_labels` carrying the pool label.
"""

from __future__ import annotations

from gpupools.health.readiness import READINESS_TAINT

# The EKS node monitoring agent: healthy is True (aws/eks-node-monitoring-agent README; main.go registers them).
EKS_GPU_CONDITION = "AcceleratedHardwareReady"
EKS_NODE_CONDITIONS = ("KernelReady", "NetworkingReady", "StorageReady", "ContainerRuntimeReady")
# The AKS node problem detector's GPU conditions: a problem is True (MicrosoftDocs/azure-aks-docs
# articles/aks/node-problem-detector.md, "GPU only").
AKS_GPU_FAULTS = ("GPUMissing", "XIDErrors", "NVLinkStatusInactive", "UnhealthyNvidiaDevicePlugin")
AKS_GPU_WARNINGS = ("GPUClockThrottling", "IBLinkFlapping")

# A GPU node still gated this long never got a working GPU stack: Karpenter has no timeout for an uninitialized node
# (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/liveness.go times out launch and registration only),
# and cluster-autoscaler stops counting it as starting after --max-node-startup-time (15m) and calls it unready.
NOT_READY_FOR = "30m"
AGENT_CONDITION_FOR = "5m"

ALERTS = ("GpuNodeHardwareUnhealthy", "GpuNodeConditionUnhealthy", "GpuNodeGpuProblem", "GpuNodeGpuDegraded", "GpuNodeNeverReady")


def gpu_nodes(ksm_pool_label: str) -> str:
    """node -> pool for gpupools GPU nodes, from kube-state-metrics' node labels (the system pool is no GPU pool)."""
    return (f'group by (node, pool) (label_replace(kube_node_labels{{{ksm_pool_label}!="",{ksm_pool_label}!="system"}}, '
            f'"pool", "$1", "{ksm_pool_label}", "(.*)"))')


def _conditions(names: tuple[str, ...], status: str) -> str:
    return f'max by (node, condition) (kube_node_status_condition{{condition=~"{"|".join(names)}",status="{status}"}} == 1)'


def node_health_alerts(ksm_pool_label: str) -> list[dict]:
    where = "GPU node {{ $labels.node }} (pool {{ $labels.pool }})"

    def _on_gpu_nodes(expr: str) -> str:
        return f"({expr}) * on (node) group_left (pool) {gpu_nodes(ksm_pool_label)}"

    return [
        {"alert": "GpuNodeHardwareUnhealthy",
         "expr": _on_gpu_nodes(_conditions((EKS_GPU_CONDITION,), "false")),
         "for": "1m",
         "labels": {"severity": "critical"},
         "annotations": {
             "summary": "The EKS node monitoring agent found a GPU fault",
             "description": where + " has AcceleratedHardwareReady=False: a GPU failed DCGM's health checks (an XID, double-bit "
                                    "error, NVLink or device-count fault; `kubectl describe node` names it). Node repair replaces "
                                    "the node after 10 minutes where it is on."}},
        {"alert": "GpuNodeConditionUnhealthy",
         "expr": _on_gpu_nodes(_conditions(EKS_NODE_CONDITIONS, "false")),
         "for": AGENT_CONDITION_FOR,
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": "The EKS node monitoring agent reports a GPU node unhealthy",
             "description": where + " has {{ $labels.condition }}=False; node repair acts after 30 minutes where it is on."}},
        {"alert": "GpuNodeGpuProblem",
         "expr": _on_gpu_nodes(_conditions(AKS_GPU_FAULTS, "true")),
         "for": "1m",
         "labels": {"severity": "critical"},
         "annotations": {
             "summary": "The node problem detector reports a GPU fault",
             "description": where + " has {{ $labels.condition }}=True. AKS does not repair a node that stays Ready: drain it "
                                    "(`kubectl drain`) and delete it so the autoscaler replaces it."}},
        {"alert": "GpuNodeGpuDegraded",
         "expr": _on_gpu_nodes(_conditions(AKS_GPU_WARNINGS, "true")),
         "for": AGENT_CONDITION_FOR,
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": "The node problem detector reports a degraded GPU node",
             "description": where + " has {{ $labels.condition }}=True (throttled clocks or a flapping InfiniBand link)."}},
        {"alert": "GpuNodeNeverReady",
         "expr": _on_gpu_nodes(f'max by (node) (kube_node_spec_taint{{key="{READINESS_TAINT.key}"}})'),
         "for": NOT_READY_FOR,
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": f"A GPU node has waited {NOT_READY_FOR} for its GPU stack",
             "description": where + f" still carries {READINESS_TAINT.key}: the GPU Operator's validator has not passed (see the "
                                    "nvidia-operator-validator pod on the node). The node takes no GPU work and is never "
                                    "consolidated while it waits; delete it if the stack cannot come up."}},
    ]


UNHEALTHY_NODES = "gpupools:pool_gpu_nodes_unhealthy:count"
UNREADY_NODES = "gpupools:pool_gpu_nodes_waiting:count"
ALERTS_FIRING = "gpupools:gpu_health_alerts_firing:count"


def node_health_recording(ksm_pool_label: str, platform_alerts: tuple[str, ...]) -> list[dict]:
    """Per pool: GPU nodes a health agent calls unhealthy, GPU nodes still behind the readiness gate; per alert and
    pool: the GPU health alerts firing now (Prometheus' own ALERTS series)."""
    nodes = gpu_nodes(ksm_pool_label)
    bad = (f'(max by (node) (kube_node_status_condition{{condition=~"{"|".join((EKS_GPU_CONDITION, *EKS_NODE_CONDITIONS))}",status="false"}} == 1)'
           f' or max by (node) (kube_node_status_condition{{condition=~"{"|".join(AKS_GPU_FAULTS)}",status="true"}} == 1))')
    waiting = f'max by (node) (kube_node_spec_taint{{key="{READINESS_TAINT.key}"}})'
    return [
        {"record": UNHEALTHY_NODES, "expr": f"count by (pool) ({bad} * on (node) group_left (pool) {nodes})"},
        {"record": UNREADY_NODES, "expr": f"count by (pool) ({waiting} * on (node) group_left (pool) {nodes})"},
        {"record": ALERTS_FIRING, "expr": f'count by (alertname, pool) (ALERTS{{alertstate="firing",alertname=~"{"|".join(platform_alerts)}"}})'},
    ]


def node_health_group(ksm_pool_label: str, platform_alerts: tuple[str, ...]) -> dict:
    return {"name": "gpupools-gpu-node-health",
            "rules": node_health_recording(ksm_pool_label, platform_alerts) + node_health_alerts(ksm_pool_label)}
