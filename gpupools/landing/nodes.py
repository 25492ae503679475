"""Steps 2-5 of the landing check, the pod and the node: whether the admitted pod fits a node of the pool (schedule),
whether a node is there or its autoscaler starts one from zero (node), whether that node lifts its startup taints
and registers what the pod asks for (ready), and whether exactly one device plugin serves the pool's GPU resource
(device); with the node as it registers, and the pod an autoscaler sees for a KAI fraction.

Apart from admission (`landing.admission`): these read the node agents and the autoscaler's node pictures, not the
queues.
"""

from __future__ import annotations

from dataclasses import replace

from gpupools.autoscaling.choice import CLUSTER_AUTOSCALER, requested_extended, why_not
from gpupools.autoscaling.templates import fitting_template, node_templates
from gpupools.core.pools import POOL_LABEL, PoolPlan
from gpupools.core.sharing import HAMI_SCHEDULER, VGPU_CORES_RESOURCE, VGPU_MEMORY_PERCENT_RESOURCE, VGPU_MEMORY_RESOURCE, units_per_pod
from gpupools.fabric import gpudirect
from gpupools.landing import agents as node_agents
from gpupools.landing.agents import Node
from gpupools.landing.cluster import Cluster
from gpupools.landing.scheduling import runs_on
from gpupools.landing.verdict import Step

HAMI_RESOURCES = frozenset({VGPU_MEMORY_RESOURCE, VGPU_MEMORY_PERCENT_RESOURCE, VGPU_CORES_RESOURCE})


def scaling_pod(cluster: Cluster, plan: PoolPlan, pod: dict) -> tuple[dict | None, str]:
    """What an autoscaler sees of a fractional pod, which asks for no nvidia.com/gpu: KAI's node-scale-adjuster (on with
    global.clusterAutoscaling) starts a placeholder pod asking for whole GPUs with the fractional pod's node selector,
    affinity and tolerations (pkg/nodescaleadjuster/scaler/scaling_pod.go lines 20-55); None without it."""
    if not (cluster.kai_values.get("global") or {}).get("clusterAutoscaling"):
        return None, "KAI's node-scale-adjuster is off (global.clusterAutoscaling), and a fractional pod asks an autoscaler for no GPU"
    placeholder = dict(pod)
    placeholder["containers"] = [{"name": "scaling-pod", "resources": {"limits": {plan.mechanism.resource: 1}}}]
    return placeholder, "KAI's node-scale-adjuster stands in a pod asking for nvidia.com/gpu: 1"


def label_choices(cluster: Cluster, plan: PoolPlan, pod: dict) -> dict[str, str]:
    """Labels a new node takes from the pod it is started for: Karpenter sets each well-known label of a NodePool
    requirement to one of its values, the one the pending pod selects (kubernetes-sigs/karpenter
    pkg/controllers/provisioning/scheduling/nodeclaim.go: the NodeClaim's requirements are the NodePool's
    intersected with the pod's), e.g. karpenter.sh/capacity-type=reserved for a reserved flavor's pods."""
    if cluster.autoscaler != "karpenter":
        return {}
    from gpupools.autoscaling import karpenter

    choices = {r["key"]: set(r["values"]) for r in karpenter.node_pool(plan, "-")["spec"]["template"]["spec"]["requirements"] if r["operator"] == "In"}
    return {k: v for k, v in (pod.get("nodeSelector") or {}).items() if v in choices.get(k, ())}


def pool_node(cluster: Cluster, plan: PoolPlan, pod: dict | None = None) -> Node:
    """A node of the pool as it registers: the labels its autoscaler or node group gives it (for the pod it is started
    for), the pool's and the cloud's taints, and its startup taints."""
    template = _template_for(cluster, plan, pod or {})
    labels = {**(template.labels if template else {}), **plan.labels, POOL_LABEL: plan.name, **label_choices(cluster, plan, pod or {})}
    taints = tuple(dict.fromkeys((template.taints if template else ()) + plan.taints))
    startup = tuple(dict.fromkeys(plan.startup_taints + (template.startup_taints if template else ())))
    return node_agents.node_labels_after_discovery(Node(plan, labels, taints, startup), cluster.agents)


def _template_for(cluster: Cluster, plan: PoolPlan, pod: dict):
    """The autoscaler's picture of the node it starts for the pod: of a pool over several instance types, the first type
    the pod fits (Karpenter launches a type the pending pod fits); else the pool's one picture."""
    templates = [replace(t, labels={**t.labels, **label_choices(cluster, plan, pod)}) for t in node_templates(cluster.stack.target, plan, cluster.autoscaler)]
    fitting, _ = fitting_template(templates, pod)
    return fitting or (templates[0] if templates else None)


def schedule_step(cluster: Cluster, plan: PoolPlan, node: Node, pod: dict) -> Step:
    scheduler = pod.get("schedulerName")
    if scheduler and scheduler not in cluster.schedulers:
        return Step("schedule", False, f"the pod names scheduler {scheduler}, which the plan does not install")
    why = runs_on(pod, node.labels, node.taints)
    if why is not None:
        return Step("schedule", False, f"the pod does not fit a Ready node of pool {plan.name}: {why}")
    return Step("schedule", True, f"fits a node of pool {plan.name}" + (f" through {scheduler}" if scheduler else ""))


def node_step(cluster: Cluster, plan: PoolPlan, pod: dict, nodes: int, provisioned: bool) -> Step:
    pool = plan.pool
    if nodes > pool.max_nodes:
        return Step("node", False, f"the Job needs {nodes} nodes, the pool has at most {pool.max_nodes}")
    templates = [replace(t, labels={**t.labels, **label_choices(cluster, plan, pod)}) for t in node_templates(cluster.stack.target, plan, cluster.autoscaler)]
    if pool.min_nodes >= nodes:
        return Step("node", True, f"the pool keeps {pool.min_nodes} node(s) running; " + beyond_floor(plan, templates, pod))
    if not templates:
        return Step("node", False, f"the pool keeps {pool.min_nodes} node(s) and no autoscaler gpupools installs starts more")
    # Of a pool over several instance types, the pod needs one type it fits (Karpenter picks among them per pod).
    reasons = []
    for template in templates:
        reason = why_not(template, pod)
        if reason is None:
            # Huge pages are no extended resource; Karpenter counts them only where a NodeOverlay says the node has them.
            for name in _hugepages(pod):
                wanted = max(_mebibytes(c.get("resources", {}).get("limits", {}).get(name, "0")) for c in pod.get("containers", []))
                if template.allocatable.get(name, 0) < wanted:
                    reason = f"{template.autoscaler} expects {template.allocatable.get(name, 0)}Mi of {name} on a new node, the pod asks for {wanted}Mi ({template.source})"
        if reason is None and pod.get("resourceClaims") and template.autoscaler == CLUSTER_AUTOSCALER and not provisioned:
            reason = claims_from_zero(plan)
        if reason is None:
            break
        reasons.append(reason)
    if len(reasons) == len(templates):
        return Step("node", False, "no node starts from zero: " + ("; ".join(reasons) if len(reasons) > 1 else reasons[0]))
    how = "the cloud provisions them for the admission check" if provisioned else f"{template.autoscaler} starts it from zero ({template.source})"
    if not provisioned and pod.get("resourceClaims") and template.autoscaler == CLUSTER_AUTOSCALER:
        how = (f"{template.autoscaler} adds nodes from the picture of the {pool.min_nodes} the pool keeps, their DRA devices included "
               f"({template.source})")
    return Step("node", True, how)


def claims_from_zero(plan: PoolPlan) -> str | None:
    """Why cluster-autoscaler starts no node for a pod with ResourceClaims (a ComputeDomain channel, DRA NICs) from an
    empty node group; None where the group keeps a node. Its DRA handling is always on (kubernetes/autoscaler
    cluster-autoscaler-1.35.0 config/flags/flags.go: --enable-dynamic-resource-allocation "locked to true"), so its
    scale-up simulation allocates the pod's claims against the devices of the node it would add. A group with a ready node
    lends that node's ResourceSlices to the picture (simulator/node_info_utils.go, SanitizedTemplateNodeInfoFromNodeInfo);
    an empty one has only its provider's template, which on AWS carries none (cloudprovider/aws/aws_cloud_provider.go,
    TemplateNodeInfo: framework.NewNodeInfo(node, nil, ...)), so no claim fits and no node starts."""
    if plan.pool.min_nodes >= 1:
        return None
    return ("cluster-autoscaler starts no node from zero for a pod with ResourceClaims: the picture of an empty node group carries no "
            "DRA devices to allocate them from (cluster-autoscaler 1.35, AWS TemplateNodeInfo); keep a node (minNodes: 1) and it "
            "copies that node's devices")


def beyond_floor(plan: PoolPlan, templates: list, pod: dict) -> str:
    """Whether one more such Job, with the pool's floor busy, makes its autoscaler add a node: what the plan says of a pool
    that never sits at zero (a Gcore pool keeps at least one node)."""
    if plan.pool.min_nodes >= plan.pool.max_nodes:
        return "its node count is fixed (minNodes = maxNodes): one more such Job waits for a free node"
    if not templates:
        return "no autoscaler gpupools installs adds more: one more such Job waits for a free node"
    _, reason = fitting_template(templates, pod)
    if reason is not None:
        return f"one more such Job adds no node: {reason}"
    return f"one more such Job makes {templates[0].autoscaler} add a node ({templates[0].source})"


def ready_step(cluster: Cluster, node: Node, pod: dict, networks: list[str] = (), software: tuple[str, ...] = ()) -> Step:
    """`networks`: what the node must register for the networks the pod attaches (GKE multi-networking); `software`:
    the DaemonSets the fabric's pods rely on running there (FabricPlan.node_software)."""
    running = {a.name: a for a in cluster.agents if a.why_not_on(node) is None}
    for taint in node.startup_taints:
        lifters = [a for a in running.values() if taint.key in a.clears]
        partners = [a for a in cluster.agents if taint.key in a.clears]
        if not partners or len(lifters) < len(partners):
            missing = [f"{a.name} ({a.why_not_on(node)})" for a in partners if a.name not in running] or ["nothing in the plan lifts it"]
            return Step("ready", False, f"the startup taint {taint.key} stays: {', '.join(missing)}")
    advertised = set().union(*(a.advertises(node) for a in running.values())) if running else set()
    # HAMi's scheduler accounts for its vGPU memory and compute itself; no node registers them, and the kubelet drops
    # requests for extended resources the node has no capacity for and no device plugin serves (kubernetes
    # pkg/kubelet/lifecycle/predicate.go, removeMissingExtendedResources).
    own = HAMI_RESOURCES if pod.get("schedulerName") == HAMI_SCHEDULER else frozenset()
    for name in requested_extended(pod):
        if name not in advertised and name not in own:
            why = (" (a Karpenter NodeClaim initializes only once it is registered)" if cluster.autoscaler == "karpenter" else "")
            return Step("ready", False, f"nothing on the node registers {name}, which the pod asks for{why}")
    for name in _hugepages(pod):
        if name not in advertised:
            return Step("ready", False, f"nothing allocates {name} on the node, which the pod asks for (the NodeClaim never initializes)"
                        if cluster.autoscaler == "karpenter" else f"nothing allocates {name} on the node, which the pod asks for")
    for name in networks:
        if name not in advertised:
            return Step("ready", False, f"nothing on the node registers {name}, which the pod's {gpudirect.INTERFACES_ANNOTATION} needs: no "
                                        f"Network of that name whose GKENetworkParamSet names one of the node's NICs")
    for name in software:
        agent = next((a for a in cluster.agents if a.name == name), None)
        if agent is None or name not in running:
            why = agent.why_not_on(node) if agent is not None else "the plan does not install it"
            return Step("ready", False, f"the pod relies on {name}, which does not run on the node: {why}")
    lifted = f"startup taint lifted by {', '.join(sorted(a.name for a in running.values() if a.clears))}; " if node.startup_taints else ""
    fabric = (f"; {len(networks)} networks registered by GKE multi-networking" if networks else "") + (
        f"; {', '.join(software)} run there" if software else "")
    return Step("ready", True, lifted + "every resource the pod asks for is registered" + fabric)


def _mebibytes(quantity) -> int:
    text = str(quantity)
    for suffix, factor in (("Gi", 1024), ("Mi", 1)):
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * factor
    return int(text) // (1024 * 1024)


def _hugepages(pod: dict) -> list[str]:
    return sorted({k for c in pod.get("containers", []) for k in {**c.get("resources", {}).get("limits", {}), **c.get("resources", {}).get("requests", {})}
                   if k.startswith("hugepages-")})


def device_step(cluster: Cluster, plan: PoolPlan, node: Node, resource: str, units: int = 1) -> Step:
    """`units`: what one container of the pod asks for of `resource`."""
    plugins = sorted(a.name for a in cluster.agents if a.why_not_on(node) is None and resource in a.advertises(node))
    if not plugins:
        candidates = [f"{a.name}: {a.why_not_on(node)}" for a in cluster.agents if resource in a.advertises(node)]
        return Step("device", False, f"no device plugin advertises {resource} on pool {plan.name}" + (f" ({'; '.join(candidates)})" if candidates else ""))
    if len(plugins) > 1:
        return Step("device", False, f"{len(plugins)} device plugins advertise {resource} on pool {plan.name}: {', '.join(plugins)}")
    cap = units_per_pod(plan.mechanism, plan.hardware.gpus_per_node) if resource == plan.mechanism.resource else None
    if cap is not None and units > cap.units:
        return Step("device", False, f"the pod asks for {units} x {resource} and gets at most {cap.units}: {cap.why}; the pod fails on the node")
    return Step("device", True, f"{plugins[0]} advertises {resource}")


def container_units(pod: dict, resource: str) -> int:
    """The most of `resource` one container asks for: the device plugin is asked per container (kubelet's Allocate)."""
    amounts = [int((c.get("resources") or {}).get(kind, {}).get(resource, 0)) for c in pod.get("containers") or [] for kind in ("limits", "requests")]
    return max(amounts, default=0)
