"""GKE: where a pool's capacity comes from: on-demand, Spot, reservations, the Dynamic Workload Scheduler (flex-start and
queued provisioning), and pools as a ComputeClass that falls back through them; the plan's capacity lines.
"""

from __future__ import annotations


import re
from typing import Any

from gpupools.core.catalog import Hardware, load_catalog
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.core.pools import PoolPlan
from gpupools.capacity import sources as capacity
from gpupools.clouds.gcp.provider import RESERVED_LABEL_DOMAINS, node_locations
from gpupools.clouds.gcp.software import SHARING_STRATEGY


# --------------------------------------------------------------------------------------------------------------------
# Capacity: reservations and the Dynamic Workload Scheduler (flex-start, queued provisioning)

# capacity.RESERVED_NODES_KEY as a GCE resource label (lower-case letters, digits, '_' and '-').
RESERVED_NODES_LABEL = "gpupools-reserved-nodes"
# A Compute Engine reservation's name, or a shared reservation of another project by its path.
RESERVATION_NAME = re.compile(r"^([a-z]([-a-z0-9]{0,61}[a-z0-9])?|projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/reservations/[a-z]([-a-z0-9]{0,61}[a-z0-9])?)$")
# ReservationAffinity.key for SPECIFIC_RESERVATION (container v1 API, ReservationAffinity).
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
# The ProvisioningRequest class of GKE's queued provisioning (GKE how-to "provisioningrequest").
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
# Flex-start needs GKE 1.33.0-gke.1712000 or later (GKE flex-start how-to, requirements).
FLEX_START_MINOR = "1.33"
# What one GKE node pool can take: a node pool has one reservation affinity and one provisioning model.
GKE_SHAPES = {("on-demand",), ("spot",), ("reserved",), ("any-reservation", "on-demand"), ("flex-start",), ("queued",)}


def provisioning_request_class(pool: Pool) -> str | None:
    """Queued pools get nodes only through ProvisioningRequests of this class, which Kueue's admission check makes."""
    return QUEUED_PROVISIONING_CLASS if capacity.has(pool, capacity.QUEUED) else None


def capacity_flavor_labels(pool: Pool, autoscaler: str) -> list[tuple[str, dict[str, str]]]:
    """One node pool, one provisioning model: one flavor."""
    return [("", {})]


def apply_capacity(pool: Pool, args: dict) -> dict:
    """A specific reservation is consumed by name, any matching reservation before on-demand; flex-start and queued
    pools get the settings Google's recipes give them (flex-start and provisioningrequest how-tos): autoscaling from
    zero with location policy ANY, no reservation, auto-repair off, and for queued pools queuedProvisioning."""
    listed = capacity.sources(pool)
    config = args["node_config"]
    first = listed[0]
    if capacity.reserved_nodes(pool):
        config["resource_labels"] = {**config.get("resource_labels", {}), **capacity.reserved_marker(pool, RESERVED_NODES_LABEL)}
    if first.reservation is not None:
        config["reservation_affinity"] = {"consume_reservation_type": "SPECIFIC_RESERVATION", "key": RESERVATION_KEY,
                                          "values": [first.reservation.id]}
    elif first.kind == capacity.ANY_RESERVATION:
        config["reservation_affinity"] = {"consume_reservation_type": "ANY_RESERVATION"}
    elif first.kind in capacity.DWS:
        config["flex_start"] = True
        config["reservation_affinity"] = {"consume_reservation_type": "NO_RESERVATION"}
        if first.max_run_seconds is not None:
            config["max_run_duration"] = f"{first.max_run_seconds}s"
        args["initial_node_count"] = 0
        args["autoscaling"] = {"total_min_node_count": 0, "total_max_node_count": pool.max_nodes, "location_policy": "ANY"}
        args["management"] = {"auto_repair": False, "auto_upgrade": True}
        if first.kind == capacity.QUEUED:
            args["queued_provisioning"] = {"enabled": True}
    return args


def capacity_problems(pool: Pool, path: str, autoscaler: str, cluster: Cluster | None, hardware: Hardware | None) -> list[Problem]:
    if pool.capacity is None:
        return []
    problems: list[Problem] = []
    listed = capacity.sources(pool)
    shape = tuple(s.kind for s in listed)
    for s in listed:
        r = s.reservation
        if r is None:
            continue
        where = f"{s.path(path)}.reservation"
        for attr, alias in (("tags", "tags"), ("owner_id", "ownerId"), ("kind", "kind")):
            if getattr(r, attr) is not None:
                problems.append(Problem(f"{where}.{alias}", f"not used on gcp; {alias} applies to EKS reservations only"))
        if r.id is None:
            problems.append(Problem(f"{where}.id", "required on gcp: the reservation's name (or projects/<project>/reservations/<name>)"))
        elif not RESERVATION_NAME.match(r.id):
            problems.append(Problem(f"{where}.id", f"{r.id!r} is not a GKE reservation name (lower-case letters, digits and '-', starting "
                                                   f"with a letter) or projects/<project>/reservations/<name>"))
        if not r.zones or len(r.zones) != 1:
            problems.append(Problem(f"{where}.zones", "a Compute Engine reservation is zonal: give its one zone, where the pool's nodes go"))
    classed = uses_compute_class(pool)
    if shape not in GKE_SHAPES and not problems and not classed:
        if shape == (capacity.ANY_RESERVATION,):
            message = "GKE starts on-demand nodes when no reservation matches; write [any-reservation, on-demand]"
        elif shape[:1] == (capacity.RESERVED,):
            message = ("a GKE node pool consumes one named reservation and nothing else (SPECIFIC_RESERVATION fails when it is full); "
                       "for fallback to on-demand use [any-reservation, on-demand], or put the fallback in another pool")
        else:
            message = (f"{', '.join(shape)}: a GKE node pool takes one of [on-demand], [spot], [{{reservation}}], "
                       f"[any-reservation, on-demand], [flex-start], [queued]; for a fallback list in one pool set provisioning: "
                       f"compute-class, or put other capacity in another pool")
        problems.append(Problem(f"{path}.capacity", message))
    problems += flex_start_problems(pool, path)
    dws = [k for k in shape if k in capacity.DWS]
    minor = cluster.kubernetes_version if cluster is not None else None
    if dws and minor is not None and tuple(map(int, minor.split("."))) < tuple(map(int, FLEX_START_MINOR.split("."))):
        problems.append(Problem("cluster.kubernetesVersion", f"{minor}: {dws[0]} needs GKE {FLEX_START_MINOR} or later "
                                                             f"(1.33.0-gke.1712000)"))
    if classed and pool.min_nodes > 0:
        problems.append(Problem(f"{path}.minNodes", f"{pool.min_nodes}, but a ComputeClass keeps no nodes: GKE creates its node pools as "
                                                    f"pods ask for them and removes them when idle (set minNodes: 0, or make the pool a node-pool)"))
    if shape in (("flex-start",), ("queued",)):
        if pool.auto_repair is True:
            # An explicit setting is never overridden silently: GKE's recipes create these pools with auto-repair off
            # (gcloud ... --no-enable-autorepair in the flex-start and provisioningrequest how-tos), which gpupools does.
            problems.append(Problem(f"{path}.autoRepair", f"true, but GKE's {shape[0]} node pools run with auto-repair off: a node "
                                                          f"is not replaced, its work ends with it; remove autoRepair"))
        if pool.min_nodes > 0:
            problems.append(Problem(f"{path}.minNodes", f"{pool.min_nodes}, but {shape[0]} nodes exist only while work asks for them; GKE's "
                                                        f"recipe starts the pool at zero (set minNodes: 0)"))
    return problems


def capacity_lines(pool: Pool, autoscaler: str) -> list[str]:
    if uses_compute_class(pool):
        return compute_class_lines(pool)
    lines = []
    for s in capacity.sources(pool):
        if s.reservation is not None:
            lines.append(f"{s.label}: reservationAffinity SPECIFIC_RESERVATION, pinned to {', '.join(s.reservation.zones or [])}; "
                         f"no node starts once it is full")
        elif s.kind == capacity.ANY_RESERVATION:
            lines.append("any-reservation: reservationAffinity ANY_RESERVATION, any matching reservation of the project first")
        elif s.kind == capacity.ON_DEMAND and capacity.has(pool, capacity.ANY_RESERVATION):
            lines.append("on-demand: when no reservation matches")
        elif s.kind in capacity.DWS:
            lines.append(f"{s.kind}: Dynamic Workload Scheduler (flexStart" + (", queuedProvisioning" if s.kind == capacity.QUEUED else "")
                         + "), from zero, location policy ANY, auto-repair off")
            if s.kind == capacity.QUEUED:
                lines.append("queued: nodes come only through a ProvisioningRequest that Kueue's admission check makes; a workload "
                             "is admitted once all its nodes are there")
            limit = capacity.run_text(s.max_run_seconds) if s.max_run_seconds is not None else "seven days (GKE's default)"
            lines.append(f"when the run ends: GKE removes the nodes after {limit}, whatever runs on them")
        else:
            lines.append(f"{s.kind}: node pool " + ("Spot VMs" if s.kind == capacity.SPOT else "standard VMs"))
    return lines

# Where GKE takes placementPolicy COMPACT, as Google's node pool module allows it (GoogleCloudPlatform/cluster-toolkit
# v1.95.0 modules/compute/gke-node-pool/main.tf): never with queued provisioning (lines 391-394, "placement_policy
# cannot be COMPACT when enable_queued_provisioning is true"), with flex-start only on A3 Ultra, A4 and H4D (lines
# 452-460, "Compact placement with DWS Flex start is only supported for A3 Ultra, A4, and H4D machine types"). A pool
# bound to reservations goes without it, as every A3 and A4 blueprint does (examples/gke-a3-megagpu/gke-a3-megagpu.yaml,
# examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml, examples/gke-a4/gke-a4.yaml: SPECIFIC_RESERVATION and no
# placement_policy): the reservation's dense block is what keeps those VMs close.
FLEX_START_COMPACT = re.compile(r"^(a3-ultragpu-|a4-|h4d-)")


def compact_placement(pool: Pool) -> tuple[bool, str, bool]:
    """(COMPACT or not, the plan's words for it, whether something keeps the nodes close)."""
    kinds = capacity.kinds(pool)
    if capacity.QUEUED in kinds:
        return False, "no compact placement (GKE takes none with queued provisioning)", False
    if capacity.FLEX_START in kinds and not FLEX_START_COMPACT.match(pool.instance_type):
        return False, "no compact placement (GKE takes it with flex-start only on A3 Ultra, A4 and H4D)", False
    if capacity.RESERVED in kinds or capacity.ANY_RESERVATION in kinds:
        return (False, "the reservation's own placement (no compact placement policy: reservation pools take the reservation's "
                       "dense block, as Google's A3 and A4 blueprints do)", True)
    if capacity.FLEX_START in kinds:
        return True, "compact placement (placementPolicy COMPACT, which flex-start takes on A3 Ultra, A4 and H4D)", True
    return True, "compact placement (placementPolicy COMPACT: the pool's VMs close together in its one zone)", True

# Capacity bought ahead (reservations, Capacity Blocks, DWS) is something a pool can name (docs/capacity.md).
RESERVATIONS = True
COMPUTE_CLASS = "compute-class"
# The node label GKE puts on a ComputeClass's nodes, and the node selector by which a pod asks for the class (GKE
# "About custom compute classes", "Request a compute class in a workload").
COMPUTE_CLASS_LABEL = "cloud.google.com/compute-class"
COMPUTE_CLASS_API = "cloud.google.com/v1"
# Capacity kinds a ComputeClass priority can name: a specific reservation, any reservation (AnyBestEffort), flex-start
# (flexStart.enabled), Spot and standard VMs (spot: false). Queued provisioning is a node pool's mode that only a
# ProvisioningRequest fills: no priority takes it.
COMPUTE_CLASS_KINDS = (capacity.RESERVED, capacity.ANY_RESERVATION, capacity.FLEX_START, capacity.SPOT, capacity.ON_DEMAND)
# Flex-start serves every accelerator-optimized machine family except A4X and G4 (Compute Engine, "About Flex-start
# VMs": "Flex-start VMs support all accelerator-optimized machine types (except A4X and G4)"); N1 machines with
# attached GPUs are general-purpose and get no flex-start.
FLEX_START_FAMILIES = re.compile(r"^(a2|a3|a4|g2)-")
SHARING_STRATEGY_NAMES = {"TIME_SHARING": "time-sharing", "MPS": "MPS"}


def managed_pool_problems(pool: Pool, path: str, installer: str, cluster: Cluster | None) -> list[Problem]:
    return compute_class_problems(pool, path, installer, cluster) + rack_scale_problems(pool, path, installer, cluster)


# --------------------------------------------------------------------------------------------------------------------
# Rack-scale pools: A4X (GB200) and A4X Max (GB300), NVL72 racks of 18 nodes
#
# As GoogleCloudPlatform/cluster-toolkit v1.95.0 builds them (examples/gke-a4x/gke-a4x.yaml, examples/gke-a4x-max-bm/
# gke-a4x-max-bm.yaml): one zone, a specific reservation (reservation_affinity SPECIFIC_RESERVATION), a resource policy
# with workload_policy {type HIGH_THROUGHPUT, accelerator_topology "1x72"} that the node pool names in placement_policy
# {type COMPACT, policy_name} (modules/compute/resource-policy outputs.tf, placement_policy), GKE's own driver
# (gpu_driver_version DEFAULT/LATEST on COS), and GKE's managed DRA networking for the RDMA NICs (enable_dranet:
# network_config.accelerator_network_profile "auto" and node label cloud.google.com/gke-networking-dra-driver=true,
# modules/compute/gke-node-pool/main.tf lines 52-77, 290-291). Compute Engine sells both only against reservations
# ("Accelerator-optimized machine family": "you must reserve capacity"), with no Spot and no Flex-start.
RACK_TOPOLOGY = "1x72"
RACK_WORKLOAD_POLICY = {"type": "HIGH_THROUGHPUT", "accelerator_topology": RACK_TOPOLOGY}
DRANET_LABEL = "cloud.google.com/gke-networking-dra-driver"
ACCELERATOR_NETWORK_PROFILE = "auto"


def is_rack_scale(pool: Pool) -> bool:
    found = load_catalog().instance("gcp", pool.instance_type)
    return found is not None and found.rack_scale


def rack_policy_name(pool: str) -> str:
    """The pool's compute resource policy (one per pool, in the cluster's region)."""
    return f"gpupools-{pool}"


def rack_resource_policy_args(pool: Pool, region: str, project: str | None) -> dict:
    """gcp.compute.ResourcePolicy: the workload policy of an NVL72 pool (cluster-toolkit v1.95.0 modules/compute/
    resource-policy/main.tf, google_compute_resource_policy.workload_policy), in the cluster's region."""
    args = {"name": rack_policy_name(pool.name), "region": region, "workload_policy": dict(RACK_WORKLOAD_POLICY)}
    if project:
        args["project"] = project
    return args


# GKE's managed DRA networking: "supported on GKE version >= 1.34.1-gke.1829001 ... and requires Dataplane V2"
# (cluster-toolkit v1.95.0 modules/compute/gke-node-pool/main.tf lines 556-560, check "dranet_requirements"). Every minor
# GKE still creates clusters on is 1.34 or later (clouds/gcp/provider.py KUBERNETES_RELEASES), so only Dataplane V2 is
# checked here.


def rack_scale_problems(pool: Pool, path: str, installer: str, cluster: Cluster | None = None) -> list[Problem]:
    """What an A4X / A4X Max pool needs on GKE, one line per missing piece (empty for any other pool)."""
    if not is_rack_scale(pool):
        return []
    name = pool.instance_type
    problems = []
    listed = capacity.sources(pool)
    if len(listed) != 1 or listed[0].reservation is None:
        problems.append(Problem(f"{path}.capacity", f"{name} is sold only against a Compute Engine reservation (no on-demand, Spot or "
                                                    f"Flex-start): give capacity: [{{reservation: {{id: <reservation>, zones: [<its zone>]}}}}] "
                                                    f"and nothing else"))
    if pool.min_nodes != pool.max_nodes:
        # cluster-toolkit v1.95.0 gives its A4X and A4X Max node pools static_node_count, no autoscaling bounds.
        problems.append(Problem(f"{path}.minNodes", f"{pool.min_nodes}: a {name} pool is a fixed number of nodes of its reservation, as "
                                                    f"cluster-toolkit's A4X examples build it (static_node_count, no autoscaling); set "
                                                    f"minNodes to maxNodes ({pool.max_nodes})"))
    if uses_compute_class(pool):
        problems.append(Problem(f"{path}.provisioning", f"'compute-class': {name} needs a node pool with a compact placement policy of "
                                                        f"topology {RACK_TOPOLOGY}, which a ComputeClass does not set; drop provisioning"))
    if installer != "cloud":
        problems.append(Problem("gpuSoftware.installer", f"{installer!r}: {name} runs GKE's own driver on COS (cluster-toolkit's A4X examples); "
                                                      f"gpupools installs no driver on its arm64 hosts: use installer: auto (or cloud)"))
    if cluster is not None and cluster.network_policy is False:
        problems.append(Problem("cluster.networkPolicy", f"false turns Dataplane V2 off, and GKE's managed DRA networking, which {name}'s "
                                                         f"RDMA NICs come from, needs it; drop networkPolicy: false"))
    return problems


def uses_compute_class(pool: Pool) -> bool:
    return pool.provisioning == COMPUTE_CLASS


def compute_class_name(pool: str) -> str:
    """`gpupools-<pool>`: GKE reserves class names starting with `gke` or `autopilot`."""
    return f"gpupools-{pool}"




def pod_node_selector(pool: Pool) -> dict[str, str]:
    """What a pod of the pool selects beside the pool label: the class, without which node auto-provisioning never
    picks the class's priorities for it."""
    return {COMPUTE_CLASS_LABEL: compute_class_name(pool.name)} if uses_compute_class(pool) else {}


def _gpu_sharing(plan: PoolPlan) -> dict | None:
    """GKE's own sharing on the class's nodes, as the node pool's gpu_sharing_config and gpu_partition_size say it."""
    m = plan.mechanism
    if m.mode in SHARING_STRATEGY:
        return {"sharingStrategy": SHARING_STRATEGY[m.mode], "maxSharedClientsPerGPU": m.replicas}
    if m.mode == "mig":
        return {"gpuPartitionSize": m.mig_profile}
    return None


def _priority(plan: PoolPlan, source, zones: list[str] | None) -> dict:
    """One priority: the machine type and its GPUs (GKE's latest driver, as `installer: cloud` node pools get it), then
    what the capacity kind adds. A reservation pins its priority to the reservation's zone."""
    gpu: dict = {"type": plan.hardware.accelerator, "count": plan.hardware.gpus_per_node, "driverVersion": "latest"}
    sharing = _gpu_sharing(plan)
    if sharing:
        gpu["gpuSharing"] = sharing
    out: dict = {"machineType": plan.pool.instance_type, "gpu": gpu}
    if plan.pool.disk_size_gb:
        out["storage"] = {"bootDiskSize": plan.pool.disk_size_gb}
    where = zones
    if source.reservation is not None:
        name = source.reservation.id
        specific = {"name": name}
        if name.startswith("projects/"):  # a shared reservation of another project
            _, project, _, name = name.split("/")
            specific = {"name": name, "project": project}
        out["reservations"] = {"affinity": "Specific", "specific": [specific]}
        out["spot"] = False
        where = list(source.reservation.zones or []) or zones
    elif source.kind == capacity.ANY_RESERVATION:
        out["reservations"] = {"affinity": "AnyBestEffort"}
        out["spot"] = False
    elif source.kind == capacity.FLEX_START:
        out["flexStart"] = {"enabled": True}
        if source.max_run_seconds is not None:
            out["maxRunDurationSeconds"] = source.max_run_seconds
    else:
        out["spot"] = source.kind == capacity.SPOT
    if where:
        out["location"] = {"zones": list(where)}
    return out


def compute_class(plan: PoolPlan, cluster_location: str | None, service_account: Any = None) -> dict:
    """The pool's ComputeClass: its capacity list as priorities, node pools auto-created from them, and nothing else
    when every priority is out of capacity (`whenUnsatisfiable: DoNotScaleUp`: a GPU job never lands on a node the
    class does not describe). The pool's labels and taint go on every node through nodePoolConfig, and the nodes run as
    the node service account node pools have (`service_account`); GKE's cloud.google.com labels are GKE's to set. `activeMigration` stays off: moving running GPU jobs back up the list would evict them."""
    pool = plan.pool
    # The pool's zones, or a regional cluster's zones that offer the GPU; a reservation pins its own priority only.
    zones = node_locations(pool.model_copy(update={"capacity": None}), plan.hardware.accelerator, cluster_location)
    labels = {k: v for k, v in plan.labels.items() if not k.startswith(RESERVED_LABEL_DOMAINS)}
    return {
        "apiVersion": COMPUTE_CLASS_API,
        "kind": "ComputeClass",
        "metadata": {"name": compute_class_name(pool.name), "labels": {"app.kubernetes.io/managed-by": "gpupools"}},
        "spec": {
            "priorities": [_priority(plan, s, zones) for s in capacity.sources(pool)],
            "nodePoolAutoCreation": {"enabled": True},
            "whenUnsatisfiable": "DoNotScaleUp",
            "nodePoolConfig": {
                "imageType": "cos_containerd",
                "nodeLabels": labels,
                "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in plan.taints],
                "autoRepair": pool.auto_repair is not False,
                "autoUpgrade": True,
                **({"serviceAccount": service_account} if service_account is not None else {}),
            },
        },
    }


def compute_class_problems(pool: Pool, path: str, installer: str, cluster: Cluster | None) -> list[Problem]:
    """What a ComputeClass cannot say: a driver GKE does not install (driverVersion takes `default` or `latest` only, so
    the GPU Operator has no place), queued provisioning, flex-start on a machine family flex-start does not serve, and
    features the cluster's version lacks."""
    if not uses_compute_class(pool):
        return []
    problems = []
    if installer != "cloud":
        problems.append(Problem(f"{path}.provisioning", f"'compute-class' nodes get GKE's own driver and device plugin (ComputeClass "
                                                        f"gpu.driverVersion takes default or latest only), but gpuSoftware.installer is "
                                                        f"{installer!r}; set it to cloud (or auto), or make the pool a node-pool"))
    for s in capacity.sources(pool):
        if s.kind not in COMPUTE_CLASS_KINDS:
            problems.append(Problem(f"{s.path(path)}", f"{s.kind!r} is no ComputeClass priority (queued provisioning needs a node pool and a "
                                                      f"ProvisioningRequest); a ComputeClass takes {', '.join(COMPUTE_CLASS_KINDS)}"))
    return problems


def compute_class_lines(pool: Pool) -> list[str]:
    """The class's priorities in the plan's words: what GKE tries, in order, for each node it creates."""
    lines = [f"ComputeClass {compute_class_name(pool.name)}: GKE creates node pools down this list as pods ask, and starts nothing when "
             f"every priority is out of capacity (whenUnsatisfiable: DoNotScaleUp)"]
    for i, s in enumerate(capacity.sources(pool), 1):
        if s.reservation is not None:
            what = f"reservations Specific {s.reservation.id} in {', '.join(s.reservation.zones or [])}"
        elif s.kind == capacity.ANY_RESERVATION:
            what = "reservations AnyBestEffort (any matching reservation of the project)"
        elif s.kind == capacity.FLEX_START:
            limit = capacity.run_text(s.max_run_seconds) if s.max_run_seconds is not None else "seven days (GKE's default)"
            what = f"flexStart (Dynamic Workload Scheduler; nodes removed after {limit})"
        else:
            what = "Spot VMs" if s.kind == capacity.SPOT else "standard VMs"
        lines.append(f"priority {i}: {s.label}: {what}")
    return lines


def flex_start_problems(pool: Pool, path: str) -> list[Problem]:
    """Flex-start on a machine type it does not serve (FLEX_START_FAMILIES), in a node pool or a ComputeClass."""
    if not capacity.has(pool, capacity.FLEX_START):
        return []
    if FLEX_START_FAMILIES.match(pool.instance_type):
        return []
    where = next(s.path(path) for s in capacity.sources(pool) if s.kind == capacity.FLEX_START)
    return [Problem(where, f"flex-start does not serve {pool.instance_type}: Compute Engine offers flex-start on the accelerator-optimized "
                           f"A2, A3, A4 and G2 machine types (not A4X, G4 or N1 with attached GPUs); remove it or choose such a machine type")]
