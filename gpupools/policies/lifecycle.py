"""GPU node lifecycle: GPU pools whose broken nodes nobody repairs, and new GPU nodes that take work before their GPU
stack is validated."""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy, StackValidationArgs, StackValidationPolicy

from gpupools.core.sharing import DEPLOY_OPERANDS_LABEL
from gpupools.health.readiness import CHART_NAME as READINESS_CHART, READINESS_TAINT
from gpupools.policies.capacity import dws_mode
from gpupools.policies._readback import EKS_NODE_GROUP, GKE_NODE_POOL, HELM_RELEASE, KARPENTER_NODE_POOL, _chart_name, is_gpu_pool, node_labels
from gpupools.policies._props import get, is_unknown, items

# --------------------------------------------------------------------------------------------------------------------
# gpu-node-repair


def validate_repair(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props = args.resource_type, args.props
    if typ == EKS_NODE_GROUP and is_gpu_pool(typ, props):
        enabled = get(props, "nodeRepairConfig", "enabled")
        if not is_unknown(enabled) and enabled is not True:
            report(f"GPU node group {args.name!r} has EKS node repair off: a node whose GPU fails (AcceleratedHardwareReady=False) "
                   f"keeps its pods and its cost until someone replaces it; set nodeRepairConfig.enabled (gpupools: drop autoRepair: false)",
                   None)
    elif typ == GKE_NODE_POOL and is_gpu_pool(typ, props) and dws_mode(props) is None:
        # Flex-start and queued-provisioning pools run with auto-repair off by Google's recipes (policy gke-dws-node-pool):
        # their nodes live one run and are not recreated in place.
        enabled = get(props, "management", "autoRepair")
        if not is_unknown(enabled) and enabled is not True:
            report(f"GPU node pool {args.name!r} has GKE auto-repair off: a node that goes NotReady is not recreated; set "
                   f"management.autoRepair (gpupools: drop autoRepair: false)", None)
    elif typ == HELM_RELEASE and _chart_name(get(props, "chart")) == "karpenter":
        gate = get(props, "values", "settings", "featureGates", "nodeRepair")
        if not is_unknown(gate) and gate is not True:
            report(f"release {args.name!r}: Karpenter's node repair is off (settings.featureGates.nodeRepair), so nodes it starts are never "
                   f"replaced when the node monitoring agent reports a GPU fault", None)


gpu_node_repair = ResourceValidationPolicy(
    name="gpu-node-repair",
    description="GPU pools are repaired automatically: EKS node repair, GKE auto-repair, Karpenter's node repair gate.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_repair,
)

# --------------------------------------------------------------------------------------------------------------------
# gpu-node-readiness


def _readiness_taint(typ: str, props) -> bool | None:
    """Whether new nodes of the pool start with the readiness taint; None when not known yet."""
    taints = get(props, "taints") if typ == EKS_NODE_GROUP else get(props, "spec", "template", "spec", "startupTaints")
    if is_unknown(taints):
        return None
    return any(get(t, "key") == READINESS_TAINT.key for t in items(taints))


def validate_readiness(args: StackValidationArgs, report: ReportViolation) -> None:
    """On EKS with the GPU Operator (whose validator is the readiness signal), every GPU pool it serves starts tainted,
    the Node Readiness Controller is installed to lift the taint, and cluster-autoscaler knows the taint."""
    releases = {_chart_name(get(r.props, "chart")): r for r in args.resources if r.resource_type == HELM_RELEASE}
    if "gpu-operator" not in releases:
        return
    gated = []
    for r in args.resources:
        if r.resource_type not in (EKS_NODE_GROUP, KARPENTER_NODE_POOL) or not is_gpu_pool(r.resource_type, r.props):
            continue
        if node_labels(r.resource_type, r.props).get(DEPLOY_OPERANDS_LABEL) == "false":
            continue  # no operand, no validator (Bottlerocket)
        state = _readiness_taint(r.resource_type, r.props)
        if state is False:
            report(f"GPU pool {r.name!r} takes work as soon as its nodes are Ready, before the GPU Operator has validated driver, toolkit and "
                   f"device plugin (an autoscaler may start a second node meanwhile); start its nodes with the startup taint "
                   f"{READINESS_TAINT.key} (gpupools: health.readinessGate)", r.urn)
        elif state:
            gated.append(r)
    if not gated:
        return
    if READINESS_CHART not in releases:
        report(f"GPU pools start with {READINESS_TAINT.key} but no {READINESS_CHART} release lifts it: their nodes would never take GPU work",
               gated[0].urn)
    autoscaler = releases.get("cluster-autoscaler")
    if autoscaler is not None:
        args_ = get(autoscaler.props, "values", "extraArgs")
        if not is_unknown(args_):
            flagged = {v for k, v in (args_ or {}).items() if str(k).split("_")[0] == "startup-taint"}
            if READINESS_TAINT.key not in flagged:
                report(f"cluster-autoscaler is not told that {READINESS_TAINT.key} is a startup taint (extraArgs startup-taint): it would "
                       f"take a new, tainted GPU node for a full one and start another", autoscaler.urn)


gpu_node_readiness = StackValidationPolicy(
    name="gpu-node-readiness",
    description="New GPU nodes take no work until the GPU Operator has validated them, and the autoscaler waits for them meanwhile.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_readiness,
)

POLICIES = [gpu_node_repair, gpu_node_readiness]
