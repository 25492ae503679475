"""Where GPU pools get their nodes: settings the clouds reject for GKE's Dynamic Workload Scheduler and EKS Capacity
Blocks, reservations a pool cannot use in full, and H100-class pools that count on on-demand capacity alone."""

from __future__ import annotations

from pulumi_policy import (EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy, StackValidationArgs,
                           StackValidationPolicy)

from gpupools.capacity.sources import CAPACITY_BLOCK_KEY, RESERVED_NODES_KEY
from gpupools.core.catalog import load_catalog
from gpupools.clouds.gcp import RESERVED_NODES_LABEL
from gpupools.policies._readback import (AKS_AGENT_POOL, EC2_NODE_CLASS, EKS_NODE_GROUP, GKE_COMPUTE_CLASS, GKE_NODE_POOL, KARPENTER_NODE_POOL, class_priorities,
                                      gpu_pool)
from gpupools.policies.fabric import pool_fabrics
from gpupools.policies._props import as_int, get, is_unknown, items, text

# GPUs that are rarely available on demand: plan them on reserved or queued capacity.
SCARCE_GPUS = ("H100", "H200", "B200", "GB200")


def dws_mode(props) -> str | None:
    """The GKE Dynamic Workload Scheduler mode a node pool runs in, or None."""
    if get(props, "queuedProvisioning", "enabled") is True:
        return "queued provisioning"
    if get(props, "nodeConfig", "flexStart") is True:
        return "flex-start"
    return None


def validate_dws_node_pool(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """The settings Google's flex-start and queued-provisioning recipes give a node pool (GKE how-tos dws-flex-start-training
    and provisioningrequest): autoscaling from zero with location policy ANY, no reservation, auto-repair off, no Spot."""
    if args.resource_type != GKE_NODE_POOL:
        return
    mode = dws_mode(args.props)
    if mode is None:
        return
    props = args.props
    wrong = []
    if get(props, "autoscaling", "locationPolicy") != "ANY":
        wrong.append("autoscaling.locationPolicy ANY")
    minimum = get(props, "autoscaling", "totalMinNodeCount", default=get(props, "autoscaling", "minNodeCount", default=0))
    if not is_unknown(minimum) and (as_int(minimum) or 0) != 0:
        wrong.append("autoscaling from 0 nodes")
    if get(props, "management", "autoRepair") is not False:
        wrong.append("management.autoRepair false")
    if get(props, "nodeConfig", "reservationAffinity", "consumeReservationType") != "NO_RESERVATION":
        wrong.append("nodeConfig.reservationAffinity NO_RESERVATION")
    if get(props, "nodeConfig", "spot") is True or get(props, "nodeConfig", "preemptible") is True:
        wrong.append("no Spot or preemptible VMs")
    if wrong:
        report(f"GKE node pool {args.name!r} uses {mode} without {', '.join(wrong)}: the settings GKE's recipes require for it", None)


def validate_capacity_block_group(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """EKS user guide, capacity-blocks-mng: the instance type lives in the launch template, and the group stays at zero
    until the block starts (EKS scales it to zero before the block ends)."""
    if args.resource_type != EKS_NODE_GROUP or get(args.props, "capacityType") != "CAPACITY_BLOCK":
        return
    if items(get(args.props, "instanceTypes")):
        report(f"node group {args.name!r} runs on a Capacity Block and names instanceTypes; EKS takes the block's instance "
               f"type from the launch template only", None)
    # A rack-scale group may keep nodes: cluster-autoscaler starts none from zero for its ComputeDomain jobs
    # (gpupools.landing.nodes.claims_from_zero), and EKS honours a non-zero size, its launches failing until the block
    # starts (EKS user guide capacity-blocks-mng.adoc, "If you specify a non-zero desiredSize ...").
    gpu = load_catalog().gpus.get(text(get(args.props, "labels", "gpupools.io/gpu")) or "")
    for key in ("minSize", "desiredSize"):
        value = as_int(get(args.props, "scalingConfig", key))
        if value and not (gpu is not None and gpu.nvlink_domain):
            report(f"node group {args.name!r} runs on a Capacity Block with scalingConfig.{key} {value}; keep it 0, the block "
                   f"exists only between its start and end time", None)


def reserved_nodes(resource_type: str, props) -> int | None:
    """The nodes a pool's reservations hold, as gpupools marks its resources; None where unmarked."""
    where = {EKS_NODE_GROUP: ("tags", RESERVED_NODES_KEY), AKS_AGENT_POOL: ("tags", RESERVED_NODES_KEY),
             GKE_NODE_POOL: ("nodeConfig", "resourceLabels", RESERVED_NODES_LABEL),
             KARPENTER_NODE_POOL: ("metadata", "annotations", RESERVED_NODES_KEY)}.get(resource_type)
    return as_int(get(props, *where)) if where else None


def validate_reservation_coverage(args: ResourceValidationArgs, report: ReportViolation) -> None:
    pool = gpu_pool(args.resource_type, args.name, args.props)
    reserved = reserved_nodes(args.resource_type, args.props)
    if pool is None or not reserved or pool.max_nodes is None:
        return
    if args.resource_type == EKS_NODE_GROUP and get(args.props, "nodeGroupName", default="").endswith("-floor"):
        return  # Karpenter's fixed floor: the NodePool beside it starts the rest
    if pool.max_nodes < reserved:
        cost = f" (${pool.price_per_node * (reserved - pool.max_nodes):,.2f}/h at list price)" if pool.price_per_node else ""
        report(f"GPU pool {pool.pool!r} can run {pool.max_nodes} nodes but its reservations hold {reserved}: "
               f"{reserved - pool.max_nodes} reserved nodes are paid and never used by it{cost}; raise maxNodes", None)


def validate_scarce_gpus_reserved(args: ResourceValidationArgs, report: ReportViolation) -> None:
    pool = gpu_pool(args.resource_type, args.name, args.props)
    if pool is None or pool.gpu is None or not pool.gpu.name.startswith(SCARCE_GPUS) or not pool.target.RESERVATIONS:
        return
    if reserved_nodes(args.resource_type, args.props) or dws_mode(args.props) or get(args.props, "capacityType") == "CAPACITY_BLOCK":
        return
    if args.resource_type == KARPENTER_NODE_POOL:
        types = [r for r in items(get(args.props, "spec", "template", "spec", "requirements")) if get(r, "key") == "karpenter.sh/capacity-type"]
        if any("reserved" in items(get(r, "values")) for r in types):
            return
    if args.resource_type == GKE_COMPUTE_CLASS and any(get(p, "reservations", "affinity") in ("Specific", "AnyBestEffort")
                                                        or get(p, "flexStart", "enabled") is True for p in class_priorities(args.props)):
        return  # a priority on a reservation or on flex-start (the Dynamic Workload Scheduler)
    report(f"GPU pool {pool.pool!r} ({pool.gpu.name}) has no reservation, Capacity Block or queued capacity: {pool.gpu.name} "
           f"nodes are rarely available on demand; add a capacity list (docs/capacity.md)", None)


dws_node_pool = ResourceValidationPolicy(
    name="gke-dws-node-pool",
    description="GKE node pools on flex-start or queued provisioning have the settings GKE requires: from zero, location "
                "policy ANY, no reservation, auto-repair off, no Spot.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_dws_node_pool,
)
capacity_block_group = ResourceValidationPolicy(
    name="eks-capacity-block-node-group",
    description="EKS node groups on a Capacity Block name no instance types and stay at zero nodes until the block starts.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_capacity_block_group,
)
reservation_coverage = ResourceValidationPolicy(
    name="reservation-within-max-nodes",
    description="A pool's maxNodes can use all the nodes its reservations hold: reserved capacity is paid whether used or not.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_reservation_coverage,
)
scarce_gpus_reserved = ResourceValidationPolicy(
    name="scarce-gpus-reserved",
    description="H100-class GPU pools (H100, H200, B200) plan on reserved, Capacity Block or queued capacity.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_scarce_gpus_reserved,
)



def karpenter_capacity_types(props) -> list[str] | None:
    """The values of a NodePool's karpenter.sh/capacity-type requirement; None where it has none (Karpenter: on-demand)."""
    for r in items(get(props, "spec", "template", "spec", "requirements")):
        if get(r, "key") == "karpenter.sh/capacity-type" and get(r, "operator") == "In":
            return [v for v in items(get(r, "values")) if isinstance(v, str)]
    return None


# The tag a Capacity Block node group carries with its instance type (clouds/aws/pools.py node_group_args: the type lives in
# the launch template).
INSTANCE_TYPE_TAG = "gpupools.io/instance-type"


def _blocks_only(instance_type) -> bool:
    """A type EC2 sells only through Capacity Blocks, with no on-demand or spot to list after one: the rack-scale types
    (p6e-gb200.36xlarge comes only inside UltraServers through Capacity Blocks, EKS user guide ml-eks-nvidia-ultraserver)."""
    found = load_catalog().instance("aws", instance_type) if isinstance(instance_type, str) else None
    return found is not None and found.rack_scale


def validate_block_fallback(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """A Capacity Block ends at a fixed time: EC2 terminates its instances 30 minutes before the end, a CAPACITY_BLOCK node
    group is scaled to zero and Karpenter deletes the block's NodeClaims 40 minutes before it (EC2 user guide
    capacity-blocks-using; EKS user guide capacity-blocks-mng; Karpenter v1.14.1 capacityreservation/expiration). A pool
    with nothing after the block then has no node to start."""
    props = args.props
    if args.resource_type == EKS_NODE_GROUP and get(props, "capacityType") == "CAPACITY_BLOCK" and _blocks_only(get(props, "tags", INSTANCE_TYPE_TAG)):
        return  # nothing to fall back to: the type is sold in Capacity Blocks only (P6e-GB200 UltraServers)
    if args.resource_type == EKS_NODE_GROUP and get(props, "capacityType") == "CAPACITY_BLOCK":
        where = f"node group {get(props, 'nodeGroupName', default=args.name)!r}"  # a CAPACITY_BLOCK node group takes no other capacity
    elif args.resource_type == KARPENTER_NODE_POOL and get(props, "metadata", "annotations", CAPACITY_BLOCK_KEY) == "true":
        types = karpenter_capacity_types(props)
        if types is None or set(types) - {"reserved"}:
            return
        where = f"NodePool {get(props, 'metadata', 'name', default=args.name)!r}"
    else:
        return
    report(f"{where} runs on a Capacity Block with no on-demand or spot capacity after it: when the block ends every job on it "
           f"stops and none can start again; list on-demand after the block, or give the work another pool", None)


def validate_reservation_owner(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Karpenter's capacityReservationSelectorTerms match by tags every reservation the account can see, shared ones
    included, unless the term names ownerID (Karpenter v1.14.1 EC2NodeClass API, capacityReservationSelectorTerms:
    "ownerID ... the owner id for the ODCR"; EC2 user guide capacity-reservation-sharing: a shared reservation is usable
    by every account it is shared with)."""
    if args.resource_type != EC2_NODE_CLASS:
        return
    name = get(args.props, "metadata", "name", default=args.name)
    for i, term in enumerate(items(get(args.props, "spec", "capacityReservationSelectorTerms"))):
        if get(term, "tags") is not None and get(term, "id") is None and not get(term, "ownerID"):
            report(f"EC2NodeClass {name!r} selects capacity reservations by tags (capacityReservationSelectorTerms[{i}]) with no "
                   f"ownerID: any reservation shared into the account with those tags matches, and the pool uses up capacity "
                   f"another account bought; set reservation.ownerId", None)


def fabric_spot(f) -> str | None:
    """What makes a fabric pool's nodes reclaimable, in words; None when they are not."""
    props = f.props
    kind = f.pool.resource_type
    if kind == EKS_NODE_GROUP and get(props, "capacityType") == "SPOT":
        return "capacityType SPOT"
    if kind == KARPENTER_NODE_POOL and "spot" in (karpenter_capacity_types(props) or []):
        types = karpenter_capacity_types(props) or []
        return "karpenter.sh/capacity-type " + ", ".join(types)
    if kind == GKE_NODE_POOL and (get(props, "nodeConfig", "spot") is True or get(props, "nodeConfig", "preemptible") is True):
        return "Spot VMs"
    if kind == AKS_AGENT_POOL and get(props, "scaleSetPriority") == "Spot":
        return "scaleSetPriority Spot"
    return None


def validate_fabric_not_spot(args: StackValidationArgs, report: ReportViolation) -> None:
    """A multi-node job runs NCCL collectives in which every rank takes part: one node reclaimed (EC2 spot two-minute
    notice, GCE Spot 30-second preemption, Azure Spot eviction) stops the step on every node, and the job restarts from
    its last checkpoint. Reserved-then-spot is the same once the reservation is full."""
    for f in pool_fabrics(args.resources):
        if f.has_fabric is not True:
            continue
        spot = fabric_spot(f)
        if spot:
            report(f"fabric pool {f.pool.pool!r} can start spot nodes ({spot}): one node reclaimed stops every node of a multi-node "
                   f"job, which restarts from its last checkpoint; use reserved or on-demand capacity for fabric pools", f.pool.urn)


block_fallback = ResourceValidationPolicy(
    name="capacity-block-fallback",
    description="A pool on a Capacity Block has on-demand or spot capacity after it: when the block ends every job on it stops.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_block_fallback,
)
reservation_owner = ResourceValidationPolicy(
    name="karpenter-reservation-owner",
    description="Karpenter EC2NodeClasses that select capacity reservations by tags name their owner account: otherwise any "
                "reservation shared into the account matches.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_reservation_owner,
)
fabric_not_spot = StackValidationPolicy(
    name="fabric-pool-not-spot",
    description="Pools with a fabric (EFA, GPUDirect, InfiniBand) start no spot nodes: one reclaimed node stops a whole multi-node job.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_fabric_not_spot,
)

POLICIES = [dws_node_pool, capacity_block_group, reservation_coverage, scarce_gpus_reserved, block_fallback, reservation_owner,
            fabric_not_spot]
