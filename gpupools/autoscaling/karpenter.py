"""Karpenter on EKS: the controller's chart values and IAM, the interruption queue, and per GPU pool a NodePool
(and, where the pool's unit is not what EC2 reports, a NodeOverlay) that Karpenter provisions from.

Pinned to Karpenter 1.14.1 (chart `oci://public.ecr.aws/karpenter/karpenter`; APIs `karpenter.sh/v1`,
`karpenter.k8s.aws/v1`, `karpenter.sh/v1alpha1` NodeOverlay behind the `nodeOverlay` feature gate). Pure:
values that exist only after deployment (role names, subnet IDs, the queue ARN) are parameters.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from gpupools.capacity.sources import block_marker, placement_zones, reserved_marker
from gpupools.clouds import aws as aws_cloud
from gpupools.clouds.node_settings import merged
from gpupools.clouds.aws import (DISK_CLASSES, karpenter_disruption, HUGE_PAGE_MI, FABRIC_RESOURCE as EFA_RESOURCE, allocated_hugepages, instance_store_raid0,
                                 karpenter_capacity_types, node_disk, node_hugepages, node_user_data as aws_node_user_data,
                                 pool_instance_types, reservation_selector_terms, type_plans)
from gpupools.fabric.plan import FabricPlan, catalog_fabric, fabric_on
from gpupools.core.catalog import load_catalog
from gpupools.core.pools import NodeTemplate, PoolPlan, Taint
from gpupools.core.sharing import GPU_RESOURCE
from gpupools.pools.software import Chart
from gpupools.stack.config import MaintenanceWindow
from gpupools.upgrades.policy import UPGRADES_LABEL, Window, pool_upgrade

CHART = Chart("karpenter", "oci://public.ecr.aws/karpenter/karpenter", "", "kube-system", "1.14.1")
SERVICE_ACCOUNT = "karpenter"
NAME_PREFIX = "gpupools-"

NODE_POOL_API = "karpenter.sh/v1"
NODE_CLASS_API = "karpenter.k8s.aws/v1"
NODE_OVERLAY_API = "karpenter.sh/v1alpha1"

# EC2 reports one `nvidia.com/gpu` per physical GPU, which is what Karpenter puts in an instance type's capacity.
# Time-slicing, MPS and MIG change what the node really advertises once the GPU software runs; a NodeOverlay
# tells Karpenter's scheduling simulation so.
ROOT_VOLUME_GB = DISK_CLASSES["the instance store"][0]  # the GPU node's volume unless the stack sizes it (clouds.aws, node_disk)
BOTTLEROCKET_ROOT_GB = 4  # Bottlerocket's OS volume; images and containers live on the data volume
# How long nodes live, when drift may replace them and how long pods get to leave are the pool's day-two decisions
# (clouds.aws, karpenter_disruption): training pools' nodes never expire and drift only inside the maintenance window;
# an empty GPU node goes away after 10 minutes, and a node running pods is never consolidated (WhenEmpty).
# Pods carrying this annotation block voluntary disruption (drift, consolidation) of their node.
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"

# The EventBridge events Karpenter handles from its interruption queue: spot interruptions and rebalance
# recommendations, scheduled maintenance, and instances stopping or terminating underneath it.
INTERRUPTION_EVENTS = {
    "scheduled-change": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "instance-state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "capacity-reservation": {"source": ["aws.ec2"], "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"]},
}
# The node role of Karpenter's getting-started template (the managed node groups keep their own role, whose
# access entry EKS manages).
NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
)
QUEUE_RETENTION_SECONDS = 300


def queue_name(cluster_name: str) -> str:
    return f"karpenter-{cluster_name}"


def node_pool_name(plan: PoolPlan) -> str:
    return NAME_PREFIX + plan.name


@dataclass(frozen=True)
class NodeClassSpec:
    """What an EC2NodeClass fixes for the nodes made from it; pools that agree on all of it share one."""

    family: str  # al2023 | bottlerocket
    disk_gb: int
    user_data: str | None  # Bottlerocket settings TOML, or AL2023's MIME archive (NodeConfig; fabric pools: the EFA huge pages)
    efa: int = 0  # EFA-only interfaces, one per network card (fabric pools)
    placement_group: str | None = None  # the pool's cluster placement group (fabric pools)
    raid0: bool = False  # the instance store as one RAID0 array for ephemeral storage and the image store
    reservations: str | None = None  # capacityReservationSelectorTerms as JSON; the pool's own class when set
    disk_iops: int = 3000  # gp3 IOPS and MiB/s of the volume (clouds.aws, node_disk)
    disk_throughput: int = 125
    settings: str | None = None  # the pool's `node.nodeClass` as JSON, merged under gpupools' spec; the pool's own class when set

    @property
    def alias(self) -> str:
        return f"{self.family}@latest"


def node_class_spec(plan: PoolPlan, fabric: FabricPlan | None = None) -> NodeClassSpec:
    """Every pool with an instance store gets it as RAID0 (`instanceStorePolicy`), fabric or not; the volume is the
    pool's `node_disk`."""
    family = plan.pool.os or "al2023"
    terms = reservation_selector_terms(plan.pool)
    reservations = json.dumps(terms, sort_keys=True) if terms else None
    disk = node_disk(plan.pool)
    own = (plan.pool.node or {}).get("nodeClass")
    common = dict(raid0=instance_store_raid0(plan.pool), reservations=reservations, disk_iops=disk.iops, disk_throughput=disk.throughput,
                  settings=json.dumps(own, sort_keys=True) if own else None)
    if fabric is None:
        return NodeClassSpec(family, disk.size_gb, node_user_data(plan, None), **common)
    return NodeClassSpec(family, disk.size_gb, node_user_data(plan, fabric.kind), efa=fabric.devices, placement_group=fabric.placement_group,
                         **common)


def node_user_data(plan: PoolPlan, fabric_kind: str | None) -> str | None:
    """The node class's userData (clouds.aws, node_user_data): Bottlerocket's device plugin and SOCI settings or AL2023's
    NodeConfig with fast image pull and, on an EFA pool, the huge pages set aside at boot. Karpenter builds the RAID0
    array itself (instanceStorePolicy), so no RAID0 part."""
    return aws_node_user_data(plan, raid0=False, hugepages=node_hugepages(fabric_kind))


def pool_fabric_kind(plan: PoolPlan) -> str | None:
    """The fabric EKS gives the pool's nodes ("efa"), None without one, as `plan_fabric` decides it: on EKS that
    depends on the pool alone (its instance type, sharing, fabric key and one zone), and on the node image: EKS Auto
    Mode's, which brings the device plugin (the `cloud` installer), takes no EFA from gpupools (clouds.aws, fabric_refusal)."""
    if plan.mechanism.installer == "cloud" or not fabric_on(aws_cloud, plan.pool, plan.sharing):
        return None
    return catalog_fabric("aws", plan.pool.instance_type).kind


def hugepages_on_node(plan: PoolPlan) -> str | None:
    """The hugepages-2Mi quantity a new node of the pool registers with the kubelet ("10256Mi"), None if it registers
    none: what its userData sets aside at boot, read back from the userData itself (the EC2NodeClass's, which a
    managed node group's launch template repeats: clouds.aws, launch_template_args).

    The node images' sources set none aside by themselves (see clouds.aws, EFA_HUGE_PAGE_COUNT), so this is what a node
    is sure to have; NodeOverlays and Jobs ask this function rather than assume the EFA driver's count."""
    pages = allocated_hugepages(node_user_data(plan, pool_fabric_kind(plan)))
    return f"{pages * HUGE_PAGE_MI}Mi" if pages else None


def node_class_name(spec: NodeClassSpec, plan: PoolPlan) -> str:
    """Readable and stable: the family, the disk when not the default, no instance store when the nodes have none (their
    volume is sized for the image store), and for Bottlerocket the sharing it sets up."""
    parts = [NAME_PREFIX + spec.family]
    if spec.disk_gb != ROOT_VOLUME_GB:
        parts.append(f"{spec.disk_gb}g")
    if not spec.raid0:
        parts.append("ebs")
    if spec.family == "bottlerocket":  # its userData carries the device plugin's sharing settings
        m = plan.mechanism
        parts.append({"none": "whole", "time-slicing": f"ts{m.replicas}", "mps": f"mps{m.replicas}"}.get(m.mode) or f"mig-{m.mig_profile}")
    if spec.placement_group is not None or spec.efa:  # one placement group per pool, so one node class per fabric pool
        parts.append(f"fabric-{plan.name}")
    if spec.reservations is not None:
        parts.append(f"reserved-{plan.name}")  # reservations are the pool's own
    if spec.settings is not None:
        parts.append(f"node-{plan.name}")  # so are its node settings
    return short_name("-".join(parts).replace("+", "."))


# Karpenter labels every node with its EC2NodeClass's name (karpenter.k8s.aws/ec2nodeclass), and a label value is at
# most 63 characters (apimachinery IsValidLabelValue). A node class name is gpupools' own, read by nobody, so one that
# would be longer is shortened rather than refused: its first characters and a hash of the whole name, the same on
# every plan (a changed name would replace the node class and the nodes made from it) and distinct for distinct names.
NAME_MAX = 63


def short_name(name: str) -> str:
    if len(name) <= NAME_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[:NAME_MAX - len(digest) - 1].rstrip('-.')}-{digest}"


def node_classes(plans: list[PoolPlan], fabrics: dict[str, FabricPlan] | None = None) -> dict[str, NodeClassSpec]:
    """Every distinct EC2NodeClass the pools need, by name."""
    out: dict[str, NodeClassSpec] = {}
    for plan in plans:
        spec = node_class_spec(plan, (fabrics or {}).get(plan.name))
        out[node_class_name(spec, plan)] = spec
    return out


def network_interfaces(efa: int) -> list[dict]:
    """The primary interface on card 0 and an EFA-only interface on every network card, one EFA per card
    (karpenter.k8s.aws/v1 EC2NodeClass spec.networkInterfaces, website/content/en/docs/concepts/nodeclasses.md @
    v1.14.1: `interface` at card 0 device 0 beside `efa-only` at card 0 device 1). Karpenter then advertises as many
    vpc.amazonaws.com/efa as there are efa-only entries (pkg/providers/instancetype/types.go efas()), and EFA-only
    interfaces take no IP address from the subnet."""
    interfaces = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}]
    # Device index 1 on every card, as on card 0 and as Karpenter places the EFAs it attaches itself.
    interfaces += [{"networkCardIndex": card, "deviceIndex": 1, "interfaceType": "efa-only"} for card in range(efa)]
    return interfaces


def block_devices(spec: NodeClassSpec) -> list[dict]:
    """Encrypted gp3 volumes. Listing mappings replaces Karpenter's defaults, so Bottlerocket gets both its volumes; the
    one that holds the node's data gets the pool's IOPS and throughput (clouds.aws, node_disk)."""
    def ebs(size: int, iops: int | None = None, throughput: int | None = None) -> dict:
        out = {"volumeSize": f"{size}Gi", "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True}
        if iops is not None:
            out.update({"iops": iops, "throughput": throughput})
        return out

    data = ebs(spec.disk_gb, spec.disk_iops, spec.disk_throughput)
    if spec.family == "bottlerocket":
        return [{"deviceName": "/dev/xvda", "ebs": ebs(BOTTLEROCKET_ROOT_GB)}, {"deviceName": "/dev/xvdb", "ebs": data}]
    return [{"deviceName": "/dev/xvda", "ebs": data}]


def ec2_node_class(name: str, spec: NodeClassSpec, node_role_name: str, subnet_ids: list[str], security_group_ids: list[str]) -> dict:
    """Nodes in the cluster's own subnets and security group, IMDSv2 only (hop limit 2, as on the managed node groups)."""
    body: dict = {
        "role": node_role_name,
        "amiSelectorTerms": [{"alias": spec.alias}],
        "subnetSelectorTerms": [{"id": s} for s in subnet_ids],
        "securityGroupSelectorTerms": [{"id": g} for g in security_group_ids],
        "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 2, "httpTokens": "required"},
        "blockDeviceMappings": block_devices(spec),
        "tags": {"gpupools.io/node-class": name},
    }
    if spec.user_data is not None:
        body["userData"] = spec.user_data
    if spec.efa:
        body["networkInterfaces"] = network_interfaces(spec.efa)
    if spec.placement_group is not None:
        body["placementGroupSelector"] = {"name": spec.placement_group}
    if spec.raid0:
        # Karpenter builds the array and points the kubelet's ephemeral storage and the image store at it (nodeadm
        # localStorage RAID0 on AL2023, `apiclient ephemeral-storage` on Bottlerocket), and counts the instance store as
        # the node's ephemeral storage when it schedules (Karpenter docs, concepts/nodeclasses.md @ v1.14.1,
        # spec.instanceStorePolicy).
        body["instanceStorePolicy"] = "RAID0"
    if spec.reservations is not None:
        # Karpenter uses the selected ODCRs and Capacity Blocks before spot and on-demand (nodeclasses docs,
        # capacityReservationSelectorTerms); the ReservedCapacity feature gate is on by default since 1.6.
        body["capacityReservationSelectorTerms"] = json.loads(spec.reservations)
    if spec.settings is not None:  # the pool's node settings, under gpupools' own (clouds.aws NODE_API)
        body = merged(body, json.loads(spec.settings), frozenset(d[1:] for d in aws_cloud.NODE_API.defaults if d[0] == "nodeClass"))
    return {"apiVersion": NODE_CLASS_API, "kind": "EC2NodeClass", "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpupools"}},
            "spec": body}


def karpenter_nodes(plan: PoolPlan) -> int:
    """Nodes Karpenter may start: the pool's ceiling less the floor a managed node group keeps running."""
    return plan.pool.max_nodes - plan.pool.min_nodes


def requirements(plan: PoolPlan, zones: list[str] | None) -> list[dict]:
    """The pool's instance types (all of `instanceTypes`: Karpenter picks among them per pending pod), capacity types
    and zones."""
    reqs = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": pool_instance_types(plan.pool)},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": karpenter_capacity_types(plan.pool)},
    ]
    if zones:
        reqs.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(zones)})
    return reqs


# The node class a NodePool launches from: Karpenter's EC2NodeClass, or EKS Auto Mode's NodeClass (clouds.aws.auto_mode).
EC2_NODE_CLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass"}


def node_pool(plan: PoolPlan, node_class: str, window: Window | None = None, class_ref: dict[str, str] = EC2_NODE_CLASS_REF,
              zones: list[str] | None = None, lifetime: dict | None = None) -> dict:
    """One NodePool per GPU pool: only its instance type and capacity type, the pool's labels and GPU taint, capped
    at the pool's node count, never consolidating a node that runs pods, and drifting and expiring nodes as the pool's
    kind allows (`window`: the stack's maintenance window; its default when not given). `class_ref`: the node class's
    group and kind; `zones`: the zone label's values where they are not the pool's zone names (AKS nodes carry
    `<location>-<n>`); `lifetime`: expireAfter, terminationGracePeriod and disruption as the cloud's own Karpenter takes
    them (a managed mode's `karpenter_disruption`: EKS Auto Mode caps a node's life), Karpenter on EKS's otherwise."""
    lifetime = lifetime or karpenter_disruption(plan.pool, window or Window.of(MaintenanceWindow()))
    kind = pool_upgrade(plan.pool).kind
    body = {
        "apiVersion": NODE_POOL_API, "kind": "NodePool",
        "metadata": {"name": node_pool_name(plan), "labels": {"app.kubernetes.io/managed-by": "gpupools", "gpupools.io/pool": plan.name,
                                                              UPGRADES_LABEL: kind},
                     **({"annotations": markers} if (markers := {**reserved_marker(plan.pool), **block_marker(plan.pool)}) else {})},
        "spec": {
            "template": {
                "metadata": {"labels": dict(plan.labels)},
                "spec": {
                    "nodeClassRef": {**class_ref, "name": node_class},
                    "requirements": requirements(plan, zones or placement_zones(plan.pool)),
                    "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in plan.taints],
                    **({"startupTaints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in plan.startup_taints]}
                       if plan.startup_taints else {}),
                    "expireAfter": lifetime["expireAfter"],
                    **({"terminationGracePeriod": lifetime["terminationGracePeriod"]} if "terminationGracePeriod" in lifetime else {}),
                },
            },
            "limits": {"nodes": str(karpenter_nodes(plan))},
            "disruption": lifetime["disruption"],
        },
    }
    own = (plan.pool.node or {}).get("nodePool") if class_ref == EC2_NODE_CLASS_REF else None
    if own:  # the pool's node settings (static replicas, weight), under gpupools' own (clouds.aws NODE_API)
        body["spec"] = merged(body["spec"], own)
    return body


def overlay_capacity(plan: PoolPlan) -> dict[str, int]:
    """What the node will advertise where it differs from EC2's count (`gpus_per_node` x nvidia.com/gpu).

    A NodeOverlay's capacity replaces an instance type's value for the same resource (karpenter core
    `InstanceType.ApplyCapacityOverlay`: `lo.Assign`), so time-sliced GPUs are counted as their shares too.

    Only resources the node's device plugin registers with the kubelet: Karpenter copies a pod's requests into the
    NodeClaim and marks it Initialized only once each of them is non-zero in the node's allocatable
    (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/initialization.go, RequestedResourcesRegistered),
    and an uninitialized node is never consolidated (pkg/controllers/state/statenode.go, ValidateNodeDisruptable).
    HAMi's memory and compute resources are accounted by its scheduler and never registered
    (Project-HAMi/HAMi pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go registers `resourceName` only), so
    advertising them would start nodes that run, empty, until they expire.
    """
    ec2 = {GPU_RESOURCE: plan.hardware.gpus_per_node}
    return {name: count for name, count in plan.advertised_resources.items() if ec2.get(name) != count}


def node_overlay(plan: PoolPlan, fabric: FabricPlan | None = None) -> dict | None:
    """With EFA, also the huge pages the node sets aside, which Karpenter's instance types do not list (Karpenter's own
    NodeOverlay example adds `hugepages-2Mi`, docs/concepts/nodeoverlays.md); the EFA count Karpenter takes from the
    node class's efa-only interfaces.

    Only what the node registers (`hugepages_on_node`): an overlay changes Karpenter's simulation, not the node ("actual
    node resources must be configured through other means", nodeoverlays.md, Limitations; huge pages only at boot), and
    a NodeClaim whose pod asks for a resource the node never registers is never initialized (initialization.go,
    RequestedResourcesRegistered).

    `plan` is for one instance type (a pool of one type, or one of `type_plans`); a pool over several types has one
    overlay per type (`node_overlays`), named after the type, since what a node offers depends on its GPU count."""
    capacity: dict = dict(overlay_capacity(plan))
    kind = fabric.kind if fabric is not None else pool_fabric_kind(plan)
    registered = hugepages_on_node(plan) if kind == "efa" else None
    if registered is not None:
        capacity["hugepages-2Mi"] = registered
    if not capacity:
        return None
    overlay_name = node_pool_name(plan) + (f"-{plan.hardware.instance_type.replace('.', '-')}" if plan.pool.instance_types else "")
    return {
        "apiVersion": NODE_OVERLAY_API, "kind": "NodeOverlay",
        "metadata": {"name": overlay_name, "labels": {"app.kubernetes.io/managed-by": "gpupools", "gpupools.io/pool": plan.name}},
        "spec": {
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": [node_pool_name(plan)]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [plan.hardware.instance_type]},
            ],
            "capacity": {name: str(count) for name, count in capacity.items()},
        },
    }


def node_overlays(plan: PoolPlan, fabric: FabricPlan | None = None) -> list[dict]:
    """The pool's NodeOverlays: one for a pool of one type, one per instance type for a pool over several."""
    return [o for o in (node_overlay(p, fabric) for p in type_plans(plan)) if o is not None]


def node_template(plan: PoolPlan) -> NodeTemplate:
    """Karpenter's picture of a new node of the plan's instance type (`plan.hardware`; for a pool over several types,
    see `node_templates`): the NodePool's labels plus the well-known ones it sets from the requirements, its taints,
    EC2's GPU count, and whatever the type's NodeOverlay adds or replaces.

    `startupTaints` stay out of the simulation: "pods are not required to tolerate a StartupTaint in order to have
    nodes provisioned for them" (karpenter.sh_nodepools.yaml, spec.template.spec.startupTaints)."""
    pool_obj = node_pool(plan, "-")
    labels = dict(pool_obj["spec"]["template"]["metadata"]["labels"])
    labels["karpenter.sh/nodepool"] = node_pool_name(plan)
    for req in pool_obj["spec"]["template"]["spec"]["requirements"]:
        if req["operator"] == "In" and len(req["values"]) == 1:
            labels[req["key"]] = req["values"][0]
    # Karpenter sets the instance type the NodeClaim launched as (one of the requirement's values).
    labels["node.kubernetes.io/instance-type"] = plan.hardware.instance_type
    allocatable = {GPU_RESOURCE: plan.hardware.gpus_per_node}
    # EC2's EFA count is in Karpenter's own capacity of an instance type (aws/karpenter-provider-aws
    # pkg/providers/instancetype/types.go, computeCapacity: v1.ResourceEFA: efas(info)).
    efa = load_catalog().fabric_of("aws", plan.hardware.instance_type).efa
    if efa:
        allocatable[EFA_RESOURCE] = efa
    overlay = node_overlay(plan)
    source = f"NodePool {node_pool_name(plan)}" + (f", instance type {plan.hardware.instance_type}" if plan.pool.instance_types else "")
    if overlay is not None:
        # Counts, and huge pages in MiB ("10256Mi"), as the scale-up checks compare them.
        allocatable.update({k: int(v.removesuffix("Mi")) for k, v in overlay["spec"]["capacity"].items()})
        source += f" + NodeOverlay {overlay['metadata']['name']}"
    spec = pool_obj["spec"]["template"]["spec"]
    taints = tuple(Taint(t["key"], t.get("value", ""), t["effect"]) for t in spec["taints"])
    startup = tuple(Taint(t["key"], t.get("value", ""), t["effect"]) for t in spec.get("startupTaints", []))
    return NodeTemplate("Karpenter", source, labels, taints, allocatable, startup)


def node_templates(plan: PoolPlan) -> list[NodeTemplate]:
    """Karpenter's picture of a new node for every instance type of the pool: it launches whichever type the pending
    pods fit, cheapest first (kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling, the NodeClaim's
    instance type options), so a pod that fits any of them starts a node."""
    return [node_template(p) for p in type_plans(plan)]


def helm_values(cluster_name: str, cluster_endpoint, queue: str, node_overlays: bool, service_monitor: dict | None) -> dict:
    """Two controller replicas on the system nodes (the chart keeps them off nodes Karpenter made)."""
    values: dict = {
        "settings": {
            "clusterName": cluster_name,
            "clusterEndpoint": cluster_endpoint,
            "interruptionQueue": queue,
            # NodeRepair (alpha, off by default): replace nodes whose conditions stay bad, with the AWS provider's
            # policies (aws/karpenter-provider-aws pkg/cloudprovider/cloudprovider.go RepairPolicies:
            # AcceleratedHardwareReady=False for 10m, the other node monitoring agent conditions and Ready for 30m).
            "featureGates": {"nodeOverlay": node_overlays, "nodeRepair": True},
        },
        "serviceAccount": {"name": SERVICE_ACCOUNT},
        "controller": {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
    }
    if service_monitor is not None:
        values["serviceMonitor"] = {"enabled": True, "additionalLabels": dict(service_monitor)}
    return values


def queue_policy(queue_arn: str) -> str:
    """EventBridge (and SQS itself) may send to the queue; nothing may reach it without TLS."""
    return json.dumps({"Version": "2012-10-17", "Id": "EC2InterruptionPolicy", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]}, "Action": "sqs:SendMessage", "Resource": queue_arn},
        {"Sid": "DenyHTTP", "Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": queue_arn,
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
    ]})


def controller_policies(partition: str, region: str, account: str, cluster: str, queue_arn: str, node_role_arn: str) -> dict[str, dict]:
    """The controller's permissions, statement for statement those of Karpenter 1.14.1's getting-started
    CloudFormation template (KarpenterController{NodeLifecycle,IAMIntegration,EKSIntegration,Interruption,
    ZonalShift,ResourceDiscovery}Policy): EC2 launches and deletions only for resources tagged as this cluster's
    and a NodePool's, instance profiles only for its EC2NodeClasses, PassRole only for the node role."""
    ec2 = f"arn:{partition}:ec2:{region}"
    owned = f"kubernetes.io/cluster/{cluster}"
    profile = f"arn:{partition}:iam::{account}:instance-profile/*"
    cluster_arn = f"arn:{partition}:eks:{region}:{account}:cluster/{cluster}"
    launched = [f"{ec2}:*:{kind}/*" for kind in ("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")]
    nodepool_tagged = {"StringEquals": {f"aws:ResourceTag/{owned}": "owned"}, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}}
    request_tags = {f"aws:RequestTag/{owned}": "owned", "aws:RequestTag/eks:eks-cluster-name": cluster}

    def doc(*statements: dict) -> dict:
        return {"Version": "2012-10-17", "Statement": list(statements)}

    return {
        "node-lifecycle": doc(
            {"Sid": "AllowScopedEC2InstanceAccessActions", "Effect": "Allow", "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
             "Resource": [f"{ec2}::image/*", f"{ec2}::snapshot/*", f"{ec2}:*:security-group/*", f"{ec2}:*:subnet/*",
                          f"{ec2}:*:capacity-reservation/*", f"{ec2}:*:placement-group/*"]},
            {"Sid": "AllowScopedEC2LaunchTemplateAccessActions", "Effect": "Allow", "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
             "Resource": f"{ec2}:*:launch-template/*", "Condition": nodepool_tagged},
            {"Sid": "AllowScopedEC2InstanceActionsWithTags", "Effect": "Allow", "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
             "Resource": launched, "Condition": {"StringEquals": request_tags, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}}},
            {"Sid": "AllowScopedResourceCreationTagging", "Effect": "Allow", "Action": "ec2:CreateTags", "Resource": launched,
             "Condition": {"StringEquals": {**request_tags, "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
                           "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}}},
            {"Sid": "AllowScopedResourceTagging", "Effect": "Allow", "Action": "ec2:CreateTags", "Resource": f"{ec2}:*:instance/*",
             "Condition": {**nodepool_tagged, "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster},
                           "ForAllValues:StringEquals": {"aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]}}},
            {"Sid": "AllowScopedDeletion", "Effect": "Allow", "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
             "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"], "Condition": nodepool_tagged},
        ),
        "iam-integration": doc(
            {"Sid": "AllowPassingInstanceRole", "Effect": "Allow", "Action": "iam:PassRole", "Resource": node_role_arn,
             "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}}},
            {"Sid": "AllowScopedInstanceProfileCreationActions", "Effect": "Allow", "Action": ["iam:CreateInstanceProfile"], "Resource": profile,
             "Condition": {"StringEquals": {**request_tags, "aws:RequestTag/topology.kubernetes.io/region": region},
                           "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}}},
            {"Sid": "AllowScopedInstanceProfileTagActions", "Effect": "Allow", "Action": ["iam:TagInstanceProfile"], "Resource": profile,
             "Condition": {"StringEquals": {f"aws:ResourceTag/{owned}": "owned", "aws:ResourceTag/topology.kubernetes.io/region": region,
                                            **request_tags, "aws:RequestTag/topology.kubernetes.io/region": region},
                           "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*", "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}}},
            {"Sid": "AllowScopedInstanceProfileActions", "Effect": "Allow", "Resource": profile,
             "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
             "Condition": {"StringEquals": {f"aws:ResourceTag/{owned}": "owned", "aws:ResourceTag/topology.kubernetes.io/region": region},
                           "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"}}},
        ),
        "eks-integration": doc(
            {"Sid": "AllowAPIServerEndpointDiscovery", "Effect": "Allow", "Action": "eks:DescribeCluster", "Resource": cluster_arn}),
        "interruption": doc(
            {"Sid": "AllowInterruptionQueueActions", "Effect": "Allow", "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
             "Resource": queue_arn}),
        "zonal-shift": doc(
            {"Sid": "AllowZonalShiftStatusReadOnly", "Effect": "Allow", "Action": ["arc-zonal-shift:GetManagedResource"], "Resource": "*",
             "Condition": {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": cluster_arn}}}),
        "resource-discovery": doc(
            {"Sid": "AllowRegionalReadActions", "Effect": "Allow", "Resource": "*",
             "Action": ["ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribeInstanceStatus",
                        "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates", "ec2:DescribePlacementGroups",
                        "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets"],
             "Condition": {"StringEquals": {"aws:RequestedRegion": region}}},
            {"Sid": "AllowSSMReadActions", "Effect": "Allow", "Action": "ssm:GetParameter", "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*"},
            {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Action": "pricing:GetProducts", "Resource": "*"},
            {"Sid": "AllowUnscopedInstanceProfileListAction", "Effect": "Allow", "Action": "iam:ListInstanceProfiles", "Resource": "*"},
            {"Sid": "AllowInstanceProfileReadActions", "Effect": "Allow", "Action": "iam:GetInstanceProfile", "Resource": profile},
        ),
    }


def controller_policy(partition: str, region: str, account: str, cluster: str, queue_arn: str, node_role_arn: str) -> str:
    """All of `controller_policies` as one inline policy document (about 6 KB, within IAM's 10 KB per role)."""
    docs = controller_policies(partition, region, account, cluster, queue_arn, node_role_arn)
    return json.dumps({"Version": "2012-10-17", "Statement": [s for d in docs.values() for s in d["Statement"]]}, separators=(",", ":"))
