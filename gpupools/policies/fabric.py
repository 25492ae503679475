"""Multi-node pools: the fabric between nodes is there, in one zone, and reachable by pods.

Judged from the registered resources, so pools another program declares are judged too: an EKS pool has EFA when its
launch template or EC2NodeClass lists EFA interfaces, a GKE pool when it has additional node networks, an AKS pool
when a NicClusterPolicy covers it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy

from gpupools.capacity.sources import CAPACITY_BLOCK_KEY
from gpupools.clouds.aws import BLOCK_PLACEMENT, HUGE_PAGE_MI, allocated_hugepages
from gpupools.core.catalog import load_catalog
from gpupools.fabric import computedomain, gpudirect
from gpupools.policies._readback import (
    AKS_AGENT_POOL,
    EC2_NODE_CLASS,
    EKS_NODE_GROUP,
    GKE_COMPUTE_CLASS,
    GKE_NODE_POOL,
    GPU_RESOURCE,
    GPU_TAINT_KEY,
    HELM_RELEASE,
    KARPENTER_NODE_POOL,
    LAUNCH_TEMPLATE,
    POOL_LABEL,
    GpuPool,
    _chart_name,
    _launch_template_pool,
    fleet,
)
from gpupools.policies._props import get, is_unknown, items, plain

NIC_CLUSTER_POLICY = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"
NODE_OVERLAY = "kubernetes:karpenter.sh/v1alpha1:NodeOverlay"
GKE_NETWORK = "kubernetes:networking.gke.io/v1:Network"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
EFA_PLUGIN_CHART = "aws-efa-k8s-device-plugin"
NETWORK_OPERATOR_CHART = "network-operator"


@dataclass
class PoolFabric:
    pool: GpuPool
    props: Any
    has_fabric: bool | None  # None: not known yet (preview)
    zones: list[str] | None  # where the pool's nodes may start, where the resources say; None: unknown
    placement: bool  # a cluster placement group or compact placement
    capacity_block: bool = False  # EKS: the pool's capacity is a Capacity Block, which EC2 places together itself


def _managed_dra_networking(props: Any) -> bool:
    """A GKE node pool whose RDMA NICs come from GKE's managed DRA networking (networkConfig.acceleratorNetworkProfile and
    no additional node networks): pods claim the NICs through ResourceClaims of the mrdma.google.com device class, not
    through Network objects (GoogleCloudPlatform/cluster-toolkit v1.95.0 modules/compute/gke-node-pool main.tf lines
    290-291 and resource-claim-template.yaml.tftpl)."""
    networks = get(props, "networkConfig", "additionalNodeNetworkConfigs")
    return isinstance(get(props, "networkConfig", "acceleratorNetworkProfile"), str) and not is_unknown(networks) and not items(networks)


def _efa_interfaces(interfaces: Any) -> bool:
    return any(get(i, "interfaceType") in ("efa", "efa-only") for i in items(interfaces))


def _karpenter_zones(props: Any) -> list[str] | None:
    for req in items(get(props, "spec", "template", "spec", "requirements")):
        if get(req, "key") == "topology.kubernetes.io/zone" and get(req, "operator") == "In":
            return [z for z in items(get(req, "values")) if isinstance(z, str)]
    return None


def _nic_policy_pools(props: Any) -> set[str] | None:
    """Pools a NicClusterPolicy's node affinity selects by the pool label; None: every node (no affinity on it)."""
    terms = items(get(props, "spec", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"))
    if not terms:
        return None
    pools: set[str] = set()
    for term in terms:
        for expr in items(get(term, "matchExpressions")):
            if get(expr, "key") == POOL_LABEL and get(expr, "operator") == "In":
                pools |= {v for v in items(get(expr, "values")) if isinstance(v, str)}
    return pools


def pool_fabrics(args_resources: list[Any]) -> list[PoolFabric]:
    """Every GPU pool with whether it has its cloud's fabric, its zones and its placement, as registered."""
    by_urn = {r.urn: r for r in args_resources}
    templates = {_launch_template_pool(r.props): r.props for r in args_resources if r.resource_type == LAUNCH_TEMPLATE}
    classes = {get(r.props, "metadata", "name"): r.props for r in args_resources if r.resource_type == EC2_NODE_CLASS}
    nic_policies = [r.props for r in args_resources if r.resource_type == NIC_CLUSTER_POLICY]
    out = []
    for pool in fleet(args_resources):
        props = by_urn[pool.urn].props if pool.urn in by_urn else None
        if props is None:
            continue
        has: bool | None = False
        zones: list[str] | None = None
        placement = False
        block = False
        if pool.resource_type == EKS_NODE_GROUP:
            template = templates.get(pool.pool)
            interfaces = get(template, "networkInterfaces") if template is not None else None
            has = None if is_unknown(interfaces) else _efa_interfaces(interfaces)
            placement = isinstance(get(template, "placement", "groupName"), str) if template is not None else False
            block = get(props, "capacityType") == "CAPACITY_BLOCK"
        elif pool.resource_type == KARPENTER_NODE_POOL:
            node_class = classes.get(pool.node_class)
            interfaces = get(node_class, "spec", "networkInterfaces") if node_class is not None else None
            has = None if is_unknown(interfaces) else _efa_interfaces(interfaces)
            zones = _karpenter_zones(props)
            placement = node_class is not None and get(node_class, "spec", "placementGroupSelector") not in (None,)
            block = get(props, "metadata", "annotations", CAPACITY_BLOCK_KEY) == "true"
        elif pool.resource_type == GKE_NODE_POOL:
            networks = get(props, "networkConfig", "additionalNodeNetworkConfigs")
            has = None if is_unknown(networks) else bool(items(networks)) or isinstance(get(props, "networkConfig", "acceleratorNetworkProfile"), str)
            locations = get(props, "nodeLocations")
            zones = None if is_unknown(locations) or locations is None else [z for z in items(locations) if isinstance(z, str)]
            placement = get(props, "placementPolicy", "type") == "COMPACT"
        elif pool.resource_type == AKS_AGENT_POOL:
            has = any((selected := _nic_policy_pools(p)) is None or pool.pool in selected for p in nic_policies)
            found = get(props, "availabilityZones")
            zones = None if is_unknown(found) else [z for z in items(found) if isinstance(z, str)]
            placement = True  # one scale set
        out.append(PoolFabric(pool, props, has, zones, placement, block))
    return out


def _built_for_fabric(pool: GpuPool) -> bool:
    return pool.instance_type is not None and load_catalog().fabric_of(pool.cloud, pool.instance_type).multi_node


def validate_multi_node_fabric(args: StackValidationArgs, report: ReportViolation) -> None:
    for f in pool_fabrics(args.resources):
        pool = f.pool
        # A pool that can never hold two nodes runs no job that spans nodes, whatever its machines are built for.
        one_node = pool.max_nodes is not None and pool.max_nodes < 2
        if (f.has_fabric is False and _built_for_fabric(pool) and pool.resource == GPU_RESOURCE and pool.units_per_gpu == 1 and not one_node
                and pool.target.FABRIC_OFFERED is None):
            fix = ("a ComputeClass's node pools get no GPUDirect networks from gpupools: run multi-node jobs on a node pool (provisioning: "
                   "node-pool)" if pool.resource_type == GKE_COMPUTE_CLASS else pool.target.MULTI_NODE_ADVICE)
            report(f"pool {pool.pool!r} ({pool.instance_type}) is built for jobs that span nodes but has no {pool.target.FABRIC_IN_WORDS}: NCCL "
                   f"between its nodes runs over the ordinary network at a fraction of the bandwidth; {fix} "
                   f"(or keep it for single-node work)", pool.urn)


def validate_one_zone(args: StackValidationArgs, report: ReportViolation) -> None:
    for f in pool_fabrics(args.resources):
        if not f.has_fabric:
            continue
        pool = f.pool
        if f.zones is not None and len(f.zones) > 1:
            report(f"pool {pool.pool!r} has {pool.target.FABRIC_IN_WORDS} but spans {len(f.zones)} zones ({', '.join(f.zones)}): fabric traffic stays "
                   f"within one zone, so nodes in different zones cannot reach each other over it; pin the pool to one zone", pool.urn)
        elif pool.target.FABRIC_PLACEMENT_GROUP and not f.placement and not f.capacity_block:
            report(f"pool {pool.pool!r} has EFA but no cluster placement group: its nodes may start in different zones and far apart; "
                   f"give it a cluster placement group in one zone", pool.urn)
        elif pool.resource_type == KARPENTER_NODE_POOL and not f.zones:
            report(f"pool {pool.pool!r} has EFA but its NodePool names no zone: Karpenter may start its nodes in any zone of the subnets; "
                   f"require one topology.kubernetes.io/zone", pool.urn)


def _tolerates_gpu_taint(tolerations: Any) -> bool:
    for t in items(tolerations):
        if get(t, "operator") == "Exists" and get(t, "key") in (None, GPU_TAINT_KEY):
            return True
        if get(t, "key") == GPU_TAINT_KEY and get(t, "effect") in (None, "NoSchedule"):
            return True
    return False


def _efa_plugin_covers(values: Any, pool: GpuPool) -> bool:
    """The chart's DaemonSet runs where every `supportedInstanceLabels.keys` label is In `values` (default: instance
    types with EFA, which include every EFA type of the catalog)."""
    labels = get(values, "supportedInstanceLabels")
    keys = [k for k in items(get(labels, "keys"))] if labels is not None else ["node.kubernetes.io/instance-type"]
    listed = [v for v in items(get(labels, "values"))] if labels is not None and get(labels, "values") is not None else None
    for key in keys:
        wanted = {POOL_LABEL: pool.pool, "node.kubernetes.io/instance-type": pool.instance_type}.get(key)
        if key == "node.kubernetes.io/instance-type" and listed is None:
            continue  # the chart's own list
        if wanted is None or listed is None or wanted not in listed:
            return False
    return _tolerates_gpu_taint(get(values, "tolerations"))


def _installer_covers(daemonset: Any, pool: GpuPool) -> bool:
    """A GPUDirect NCCL plugin installer runs on the pool: it tolerates the GPU taint, and its node affinity, where it
    selects by the pool label, lists the pool (Google's own manifests select by accelerator, which is not judged)."""
    spec = get(daemonset, "spec", "template", "spec")
    if not _tolerates_gpu_taint(get(spec, "tolerations")):
        return False
    terms = items(get(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"))
    for term in terms:
        for expr in items(get(term, "matchExpressions")):
            if get(expr, "key") == POOL_LABEL and get(expr, "operator") == "In" and pool.pool not in items(get(expr, "values")):
                return False
    return True


def validate_reachable(args: StackValidationArgs, report: ReportViolation) -> None:
    releases = {(_chart_name(get(r.props, "chart"))): r.props for r in args.resources if r.resource_type == HELM_RELEASE}
    gke_networks = any(r.resource_type == GKE_NETWORK for r in args.resources)
    daemonsets = {get(r.props, "metadata", "name"): r.props for r in args.resources if r.resource_type == DAEMONSET}
    for f in pool_fabrics(args.resources):
        if not f.has_fabric:
            continue
        pool = f.pool
        software = pool.target.FABRIC_DEVICE_SOFTWARE
        if software == "efa-device-plugin":
            plugin = releases.get(EFA_PLUGIN_CHART)
            if plugin is None:
                report(f"pool {pool.pool!r} has EFA interfaces but the stack installs no EFA device plugin ({EFA_PLUGIN_CHART}), so no pod can "
                       f"ask for vpc.amazonaws.com/efa", pool.urn)
            elif not is_unknown(get(plugin, "values")) and not _efa_plugin_covers(get(plugin, "values"), pool):
                report(f"pool {pool.pool!r} has EFA interfaces but the EFA device plugin does not run on its nodes (its supportedInstanceLabels "
                       f"do not select the pool, or it does not tolerate the {GPU_TAINT_KEY} taint)", pool.urn)
        elif software == "network-operator":
            policies = [r.props for r in args.resources if r.resource_type == NIC_CLUSTER_POLICY]
            plugin = any(get(p, "spec", "rdmaSharedDevicePlugin") is not None or get(p, "spec", "sriovDevicePlugin") is not None for p in policies)
            if NETWORK_OPERATOR_CHART not in releases or not plugin:
                report(f"pool {pool.pool!r} has InfiniBand but no Network Operator with an RDMA device plugin, so no pod can ask for the IB "
                       f"devices", pool.urn)
        elif software == "gke-networks" and not gke_networks and not _managed_dra_networking(f.props):
            report(f"pool {pool.pool!r} has GPUDirect node networks but the stack declares no GKE Network objects: pods reach only the "
                   f"primary NIC, so NCCL does not use the GPUDirect NICs (GKE multi-networking: Network and GKENetworkParamSet per "
                   f"network, and the pods' networking.gke.io/interfaces annotation)", pool.urn)
        installer = gpudirect.installer_for(pool.cloud, pool.instance_type)
        if installer is not None and gke_networks and not (installer in daemonsets and (is_unknown(daemonsets[installer])
                                                                                        or _installer_covers(daemonsets[installer], pool))):
            report(f"pool {pool.pool!r} has GPUDirect node networks but Google's NCCL plugin installer ({installer}) does not run on "
                   f"its nodes (none declared, or it does not select the pool or tolerate the {GPU_TAINT_KEY} taint): NCCL has no "
                   f"plugin for the GPUDirect NICs and falls back to sockets", pool.urn)


def validate_block_placement(args: StackValidationArgs, report: ReportViolation) -> None:
    """EC2 places a Capacity Block's instances together itself; a placement group beside it can refuse launches the block
    has room for (clouds.aws, BLOCK_PLACEMENT: AWS ParallelCluster's PlacementGroupCapacityTypeValidator)."""
    for f in pool_fabrics(args.resources):
        if f.capacity_block and f.placement:
            report(f"pool {f.pool.pool!r} runs on a Capacity Block and selects a cluster placement group: launches can fail for "
                   f"placement outside the block while the block has room; drop the placement group ({BLOCK_PLACEMENT})", f.pool.urn)


_QUANTITY = {"": 1 / 2**20, "Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}


def _mebibytes(quantity: Any) -> float | None:
    """A Kubernetes quantity in MiB, binary suffixes or none (huge pages are always spelled so); None otherwise."""
    import re

    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)?", str(quantity)) if isinstance(quantity, (str, int)) else None
    return int(match.group(1)) * _QUANTITY[match.group(2) or ""] if match else None


def _overlay_node_pools(props: Any) -> list[str]:
    for req in items(get(props, "spec", "requirements")):
        if get(req, "key") == "karpenter.sh/nodepool" and get(req, "operator") == "In":
            return [v for v in items(get(req, "values")) if isinstance(v, str)]
    return []


def validate_hugepages_registered(args: StackValidationArgs, report: ReportViolation) -> None:
    """A NodeOverlay's hugepages-2Mi is what Karpenter believes a new node has; the node has only what its userData sets
    aside at boot. Karpenter initializes a NodeClaim only once every resource its pods ask for is in the node's
    allocatable (kubernetes-sigs/karpenter v1.14.1 pkg/controllers/nodeclaim/lifecycle/initialization.go,
    RequestedResourcesRegistered), so an overlay that advertises more leaves nodes started for nothing. Judged where the
    node class runs an EKS image by alias (amiSelectorTerms alias), whose sources set no huge pages aside themselves."""
    pools = {get(r.props, "metadata", "name"): r.props for r in args.resources if r.resource_type == KARPENTER_NODE_POOL}
    classes = {get(r.props, "metadata", "name"): r.props for r in args.resources if r.resource_type == EC2_NODE_CLASS}
    for overlay in (r for r in args.resources if r.resource_type == NODE_OVERLAY):
        advertised = get(overlay.props, "spec", "capacity", "hugepages-2Mi")
        if advertised is None or is_unknown(advertised) or _mebibytes(advertised) is None:
            continue
        for name in _overlay_node_pools(overlay.props):
            class_name = get(pools.get(name), "spec", "template", "spec", "nodeClassRef", "name")
            node_class = classes.get(class_name) if isinstance(class_name, str) else None
            if node_class is None:
                continue
            terms = items(get(node_class, "spec", "amiSelectorTerms"))
            user_data = get(node_class, "spec", "userData")
            if is_unknown(user_data) or not terms or not all(isinstance(get(t, "alias"), str) for t in terms):
                continue  # a custom AMI may set huge pages aside itself
            registered = allocated_hugepages(user_data if isinstance(user_data, str) else None) * HUGE_PAGE_MI
            if _mebibytes(advertised) > registered:
                report(f"NodeOverlay {get(overlay.props, 'metadata', 'name')!r} advertises hugepages-2Mi {advertised} for NodePool {name!r}, "
                       f"but EC2NodeClass {class_name!r} sets aside {registered}Mi at boot: Karpenter starts nodes for pods that ask for "
                       f"huge pages and never initializes them; set vm.nr_hugepages in the node class's userData, or advertise no more",
                       overlay.urn)


def validate_dra_driver_matches_operator(args: StackValidationArgs, report: ReportViolation) -> None:
    """The DRA driver and the GPU Operator of one stack agree on the driver root and CDI (`computedomain.operator_problems`)."""
    releases = {_chart_name(get(r.props, "chart")): r for r in args.resources if r.resource_type == HELM_RELEASE}
    operator, dra = releases.get("gpu-operator"), releases.get("dra-driver-nvidia-gpu")
    if operator is None or dra is None:
        return
    values, dra_values = plain(get(operator.props, "values")), plain(get(dra.props, "values"))
    if not isinstance(values, dict) or not isinstance(dra_values, dict):  # unknown until applied
        return
    for problem in computedomain.operator_problems(values, dra_values):
        report(problem, dra.urn)


multi_node_pool_fabric = StackValidationPolicy(
    name="multi-node-pool-fabric",
    description="Whole-GPU pools of instance types built for multi-node jobs (p4d, p5, ND-series, A3) have their cloud's fabric.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_multi_node_fabric,
)

fabric_pool_one_zone = StackValidationPolicy(
    name="fabric-pool-one-zone",
    description="Pools with a fabric (EFA, GPUDirect, InfiniBand) run in one zone, EFA pools in a cluster placement group unless "
                "their capacity is a Capacity Block.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_one_zone,
)

fabric_devices_reachable = StackValidationPolicy(
    name="fabric-devices-reachable",
    description="Pods on fabric pools can reach the fabric: the EFA device plugin or the Network Operator's RDMA plugin runs there, "
                "GKE Network objects exist for GPUDirect networks and Google's NCCL plugin installer runs on the pool.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_reachable,
)

capacity_block_placement = StackValidationPolicy(
    name="capacity-block-placement",
    description="EKS EFA pools whose capacity is a Capacity Block select no cluster placement group: EC2 places the block's instances "
                "together itself.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_block_placement,
)

hugepages_registered = StackValidationPolicy(
    name="node-overlay-hugepages-registered",
    description="A Karpenter NodeOverlay advertises no more hugepages-2Mi than its pool's EC2NodeClass sets aside at boot.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_hugepages_registered,
)

dra_driver_matches_gpu_operator = StackValidationPolicy(
    name="dra-driver-matches-gpu-operator",
    description="NVIDIA's DRA driver and the GPU Operator agree: the driver root its kubelet plugin mounts is where the operator has the "
                "driver, and the operator keeps CDI on.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_dra_driver_matches_operator,
)

POLICIES = [multi_node_pool_fabric, fabric_pool_one_zone, fabric_devices_reachable, capacity_block_placement, hugepages_registered,
            dra_driver_matches_gpu_operator]
