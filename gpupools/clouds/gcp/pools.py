"""GKE: a GPU pool's nodes: machine types, node pool inputs, zones, taints and labels, the node template the
autoscaler sees, local disks.
"""

from __future__ import annotations


from pathlib import Path
from typing import Any

from gpupools.core.catalog import Catalog, Hardware, load_catalog, zone_region
from gpupools.core.facts import load_facts
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.core.pools import NodeTemplate, PoolPlan, Taint, spell_taint
from gpupools.core.sharing import GPU_RESOURCE
from gpupools.capacity import sources as capacity
from gpupools.upgrades.policy import pool_upgrade
from gpupools.clouds.common import KIND, hardware_of, lookup_instance, reject_fields, zone_letter_problems
from gpupools.clouds.node_settings import NodeApi
from gpupools.clouds.gcp.capacity import (ACCELERATOR_NETWORK_PROFILE, DRANET_LABEL, apply_capacity, compute_class_name, is_rack_scale,
                                          pod_node_selector, rack_policy_name, uses_compute_class)
from gpupools.clouds.gcp.cluster import GKE_DEFAULT_POOL
from gpupools.clouds.gcp.provider import NAME, TAINT_STYLE, node_locations
from gpupools.clouds.gcp.software import NO_DEFAULT_DEVICE_PLUGIN_LABEL, guest_accelerator
from gpupools.clouds.gcp.upgrades import UPGRADES_RESOURCE_LABEL, upgrade_settings


def _camel(snake: str) -> tuple[str, ...]:
    return tuple(part.split("_")[0] + "".join(w.title() for w in part.split("_")[1:]) for part in snake.split("."))


# Fields of a node pool whose change replaces the pool: the Terraform provider's ForceNew fields, which pulumi-gcp
# bridges (hashicorp/terraform-provider-google v7.20.0, google/services/container/node_config.go schemaNodeConfig and
# resource_container_node_pool.go schemaNodePool, every field with `ForceNew: true`), as the provider names them.
FORCE_NEW = tuple(_camel(p) for p in (
    "max_pods_per_node", "placement_policy", "queued_provisioning", "network_config.create_pod_range", "network_config.pod_range",
    "network_config.pod_ipv4_cidr_block", "network_config.additional_node_network_configs",
    "network_config.additional_pod_network_configs", "network_config.pod_cidr_overprovision_config",
    *(f"node_config.{f}" for f in (
        "guest_accelerator", "local_ssd_count", "ephemeral_storage_local_ssd_config", "local_nvme_ssd_block_config",
        "secondary_boot_disks", "metadata", "min_cpu_platform", "oauth_scopes", "preemptible", "reservation_affinity", "spot",
        "service_account", "shielded_instance_config", "boot_disk_kms_key", "node_group", "advanced_machine_features",
        "sole_tenant_config", "host_maintenance_policy", "confidential_nodes.confidential_instance_type", "enable_confidential_storage",
        "local_ssd_encryption_mode", "max_run_duration", "flex_start"))))
_CAPACITY = "set the pool's capacity (spot, reservations, flex-start, queued)"
# A pool's `node:`: NodePool inputs as pulumi-gcp's NodePoolArgs takes them, with GKE's enums (node_api.json, derived
# by tools/node_api_models.py). gpupools owns what makes a GPU pool: these are refused, each with where to set it instead.
NODE_API = NodeApi(
    "GKE", "NodePool", Path(__file__).with_name("node_api.json"),
    owned={("autoscaling",): "set the pool's minNodes and maxNodes", ("initialNodeCount",): "set the pool's minNodes",
           ("nodeCount",): "set the pool's minNodes and maxNodes", ("ignoreNodeCountChanges",): "the autoscaler owns the node count",
           ("nodeLocations",): "set the pool's zones", ("management",): "set the pool's autoRepair (auto-upgrade is always on)",
           ("upgradeSettings",): "set the pool's upgrades", ("version",): "set cluster.kubernetesVersion",
           ("placementPolicy",): "the pool's fabric places its nodes (fabric)", ("queuedProvisioning",): _CAPACITY,
           ("networkConfig", "additionalNodeNetworkConfigs"): "the pool's fabric adds the GPUDirect networks (fabric)",
           ("networkConfig", "additionalPodNetworkConfigs"): "the pool's fabric adds the GPUDirect networks (fabric)",
           ("nodeConfig", "machineType"): "set the pool's instanceType",
           ("nodeConfig", "guestAccelerators"): "GPU type and count follow the pool's instanceType (gpu and gpuCount on N1), sharing "
                                                 "and driver the pool's sharing and gpuSoftware",
           ("nodeConfig", "labels"): "set the pool's labels",
           ("nodeConfig", "taints"): "the GPU taint is gpupools'; a pool's own taints go in the pool's taints",
           ("nodeConfig", "effectiveTaints"): "the GPU taint is gpupools'; a pool's own taints go in the pool's taints",
           ("nodeConfig", "spot"): _CAPACITY, ("nodeConfig", "preemptible"): _CAPACITY, ("nodeConfig", "flexStart"): _CAPACITY,
           ("nodeConfig", "maxRunDuration"): _CAPACITY, ("nodeConfig", "reservationAffinity"): _CAPACITY,
           ("nodeConfig", "serviceAccount"): "set cluster.nodeServiceAccount",
           ("nodeConfig", "diskSizeGb"): "set the pool's diskSizeGb",
           ("nodeConfig", "imageType"): "gpupools picks the node image the GPU driver is installed on",
           ("nodeConfig", "localSsdCount"): "gpupools gives the machine type's local SSDs to the kubelet's ephemeral storage",
           ("nodeConfig", "ephemeralStorageLocalSsdConfig"): "gpupools gives the machine type's local SSDs to the kubelet's ephemeral storage",
           ("nodeConfig", "localNvmeSsdBlockConfig"): "gpupools gives the machine type's local SSDs to the kubelet's ephemeral storage",
           ("nodeConfig", "gvnic"): "the pool's fabric turns gVNIC on (fabric)",
           ("nodeConfig", "gpudirectStrategy"): "the pool's fabric sets GPUDirect (fabric)",
           ("nodeConfig", "fastSocket"): "the pool's fabric sets NCCL Fast Socket (fabric)"},
    replaces={path: "changing it replaces the node pool (the provider's ForceNew)" for path in FORCE_NEW},
    # gpupools' hardening of the nodes, which `node:` may replace (and the policy pack then judges).
    defaults=frozenset({("nodeConfig", "workloadMetadataConfig"), ("nodeConfig", "shieldedInstanceConfig"), ("nodeConfig", "oauthScopes")}),
)
SYSTEM_NODE_API = NodeApi(
    "GKE", "NodePool", NODE_API.model_file,
    owned={**{path: "gpupools sizes the system pool" for path in (("autoscaling",), ("initialNodeCount",), ("nodeCount",),
                                                                   ("nodeConfig", "machineType"))},
           ("nodeConfig", "labels"): "gpupools labels the system pool gpupools.io/pool=system",
           ("nodeConfig", "taints"): "the system pool runs the cluster's add-ons, untainted",
           ("nodeConfig", "serviceAccount"): "set cluster.nodeServiceAccount", ("version",): "set cluster.kubernetesVersion",
           ("management",): "the system pool is always repaired and upgraded"},
    replaces=NODE_API.replaces, defaults=NODE_API.defaults)


def node_setting_problems(pool: Pool, path: str, autoscaler: str) -> list[Problem]:
    """A ComputeClass pool has no node pool of its own (GKE creates them as work asks): nothing to pass settings to."""
    if uses_compute_class(pool):
        return [Problem(f"{path}.node", "a compute-class pool has no node pool of its own to take node settings; remove node, "
                                        "or set provisioning: node-pool")]
    return []


def pool_problems(pool: Pool, path: str) -> list[Problem]:
    problems = reject_fields(pool, path, NAME, {"os": ("os", "aws"), "placement": ("placement", "gcore virtual-machine flavors")})
    if len(pool.name) > 40 or not pool.name[0].isalpha():
        problems.append(Problem(f"{path}.name", f"{pool.name!r} cannot name a GKE node pool: start with a letter, at most 40 characters"))
    if pool.name == GKE_DEFAULT_POOL:
        problems.append(Problem(f"{path}.name", f"{GKE_DEFAULT_POOL!r} is the node pool GKE creates with every cluster (gpupools deletes it from "
                                                f"a cluster it creates: remove_default_node_pool; an existing cluster may still run it); "
                                                f"pick another pool name"))
    return problems


def resolve(pool: Pool, catalog: Catalog, path: str) -> tuple[Hardware | None, list[Problem]]:
    """A2/A3/G2 machine types imply their GPUs; N1 machine types take them from `gpu` and `gpuCount`."""
    instance, problems = lookup_instance(NAME, pool, catalog, path)
    if instance is None:
        return None, problems
    if instance.gpu is not None:
        problems = []
        if pool.gpu is not None and pool.gpu != instance.accelerator:
            problems.append(Problem(f"{path}.gpu", f"{pool.gpu!r} does not fit {instance.name}, which always carries {instance.gpus} x {instance.accelerator}; remove gpu"))
        if pool.gpu_count is not None and pool.gpu_count != instance.gpus:
            problems.append(Problem(f"{path}.gpuCount", f"{pool.gpu_count} does not fit {instance.name}, which always carries {instance.gpus} GPUs; remove gpuCount"))
        return (hardware_of(instance) if not problems else None), problems
    accelerators = catalog.gcp_accelerators
    if pool.gpu is None:
        return None, [Problem(f"{path}.gpu", f"required for N1 {KIND[NAME]} {instance.name}: one of {', '.join(accelerators)}")]
    accelerator = accelerators.get(pool.gpu)
    if accelerator is None:
        return None, [Problem(f"{path}.gpu", f"unknown GPU {pool.gpu!r} for N1 machine types; allowed: {', '.join(accelerators)}")]
    count = pool.gpu_count or 1
    if count not in accelerator.counts:
        return None, [Problem(f"{path}.gpuCount", f"{count} x {pool.gpu} is not offered on N1; allowed counts: {', '.join(map(str, accelerator.counts))}")]
    shape_problems = n1_shape_problems(instance.name, accelerator.name, count, path)
    if shape_problems:
        return None, shape_problems
    price = instance.price + accelerator.price_per_gpu * count
    return Hardware(instance.name, accelerator.gpu, count, round(price, 4), min(instance.price_read, accelerator.price_read), accelerator.name), []


# A local SSD of Compute Engine holds 375 GiB ("About Local SSD disks"); the catalog's localNvmeGb is the machine type's.
LOCAL_SSD_GB = 375


def local_ssds(instance_type: str) -> int:
    """The local SSDs a machine type comes with, which GKE puts under the kubelet's ephemeral storage
    (NodeConfig.ephemeralStorageLocalSsdConfig.localSsdCount), as Google's node pools do for A3 and A4: 16 on A3 High and
    Mega, 32 on A3 Ultra and A4 (GoogleCloudPlatform/cluster-toolkit v1.95.0 modules/compute/gke-node-pool/disk_definitions.tf
    lines 24-28, main.tf lines 206-211). Unset, ephemeral storage stays on the boot disk and the SSDs go unused."""
    return load_catalog().fabric_of(NAME, instance_type).local_nvme_gb // LOCAL_SSD_GB


def local_nvme_use(pool: Pool, fabric_on: bool) -> str | None:
    """How the pool's nodes use their local SSDs, in the plan's words; None: unused (a ComputeClass's nodes get GKE's
    default for the machine type)."""
    ssds = local_ssds(pool.instance_type) if not uses_compute_class(pool) else 0
    return f"as the kubelet's ephemeral storage ({ssds} local SSDs, ephemeralStorageLocalSsdConfig)" if ssds else None


def node_pool_args(plan: PoolPlan, installer: str, cluster_name, location: str, project: str | None, kubernetes_version: str | None,
                   service_account: Any = None) -> dict:
    pool = plan.pool
    labels = dict(plan.labels)
    operator_owned = installer != "cloud"
    if operator_owned:
        labels[NO_DEFAULT_DEVICE_PLUGIN_LABEL] = "true"
    node_config = {
        # The pool's kind, on the node pool's VMs (GCP label keys take no dots or slashes).
        "resource_labels": {UPGRADES_RESOURCE_LABEL: pool_upgrade(pool).kind},
        "machine_type": pool.instance_type,
        "spot": capacity.spot_only(pool),
        # GKE installs signed drivers only on COS; NVIDIA's driver container needs Ubuntu.
        "image_type": "UBUNTU_CONTAINERD" if operator_owned else "COS_CONTAINERD",
        "labels": labels,
        "taints": [spell_taint(t, TAINT_STYLE) for t in plan.taints],
        "guest_accelerators": [guest_accelerator(plan, installer)],
        # IAM decides what the node can do: the cloud-platform scope with a least-privilege account, as GKE advises.
        "oauth_scopes": ["https://www.googleapis.com/auth/cloud-platform"],
        "workload_metadata_config": {"mode": "GKE_METADATA"},
        # Secure boot admits only signed kernel modules: GKE's drivers are signed, NVIDIA's driver container is not.
        "shielded_instance_config": {"enable_secure_boot": not operator_owned, "enable_integrity_monitoring": True},
        "metadata": {"disable-legacy-endpoints": "true"},
    }
    if service_account is not None:
        node_config["service_account"] = service_account
    if pool.disk_size_gb:
        node_config["disk_size_gb"] = pool.disk_size_gb
    ssds = local_ssds(pool.instance_type)
    if ssds:
        node_config["ephemeral_storage_local_ssd_config"] = {"local_ssd_count": ssds}
    locations = node_locations(pool, plan.hardware.accelerator, location)
    args = {
        "name": pool.name,
        "cluster": cluster_name,
        "location": location,
        "initial_node_count": pool.min_nodes,
        # total_* bound the whole pool, whatever number of zones a regional cluster spans.
        "autoscaling": {"total_min_node_count": pool.min_nodes, "total_max_node_count": pool.max_nodes,
                        "location_policy": "ANY" if capacity.spot_only(pool) else "BALANCED"},
        # Unset: on (GKE's default for Standard pools); a pool may turn it off (autoRepair: false).
        "management": {"auto_repair": pool.auto_repair is not False, "auto_upgrade": True},
        "node_config": node_config,
    }
    args = apply_capacity(pool, args)
    if is_rack_scale(pool):
        args = rack_node_pool_args(pool, args)
    settings = upgrade_settings(pool)
    if settings is not None:
        args["upgrade_settings"] = settings
    if locations:
        args["node_locations"] = locations
    if project:
        args["project"] = project
    if kubernetes_version:
        args["version"] = kubernetes_version
    return args


# A4X Max's nodes set aside 4,096 huge pages of 2 MiB (cluster-toolkit v1.95.0 examples/gke-a4x-max-bm/gke-a4x-max-bm.yaml,
# linux_node_config.hugepages_config.hugepage_size_2m; pulumi_gcp 10.2.0 NodePoolNodeConfigLinuxNodeConfigHugepagesConfigArgs).
RACK_HUGEPAGES_2M = {"a4x-maxgpu-4g-metal": 4096}


def rack_node_pool_args(pool: Pool, args: dict) -> dict:
    """An A4X / A4X Max pool as cluster-toolkit v1.95.0 builds it (clouds/gcp/capacity.py, rack-scale pools): the compact
    placement of its resource policy (topology 1x72), GKE's managed DRA networking (accelerator network profile `auto` and
    the node label that turns the DRA network driver on), a fixed node count (minNodes = maxNodes, the examples'
    static_node_count), COS."""
    args["placement_policy"] = {"type": "COMPACT", "policy_name": rack_policy_name(pool.name)}
    args["network_config"] = {"accelerator_network_profile": ACCELERATOR_NETWORK_PROFILE}
    args["node_config"]["labels"] = {**args["node_config"]["labels"], DRANET_LABEL: "true"}
    args["node_config"]["image_type"] = "COS_CONTAINERD"
    if pool.instance_type in RACK_HUGEPAGES_2M:
        linux = args["node_config"].setdefault("linux_node_config", {})
        linux["hugepages_config"] = {**linux.get("hugepages_config", {}), "hugepage_size2m": RACK_HUGEPAGES_2M[pool.instance_type]}
    args["node_count"] = pool.max_nodes
    del args["initial_node_count"], args["autoscaling"]
    return args


# GKE taints its Arm nodes kubernetes.io/arch=arm64:NoSchedule; cluster-toolkit's A4X jobs tolerate it
# (GoogleCloudPlatform/cluster-toolkit v1.95.0 examples/gke-a4x-max-bm/gke-a4x-max-bm.yaml lines 296-301, and the DRA
# driver's tolerations in modules/management/kubectl-apply/main.tf lines 317-366).
ARM64_TAINT = Taint("kubernetes.io/arch", "arm64", "NoSchedule")


# GKE taints the nodes of a queued-provisioning pool (GoogleCloudPlatform/cluster-toolkit, GKE consumption options
# guide, "DWS Flex Start + Queued Provisioning": workloads need a toleration for cloud.google.com/gke-queued:NoSchedule;
# ai-on-gke's DWS examples tolerate it). Kueue's provisioning controller adds no toleration to the pods it admits
# (kueue v0.19.2 pkg/controller/admissionchecks/provisioning/controller.go, podSetUpdates: node selector only), so
# the pool's ResourceFlavor, its Jobs and its DaemonSets carry it.
QUEUED_TAINT = Taint("cloud.google.com/gke-queued", "true", "NoSchedule")


def node_taints(plan: PoolPlan) -> tuple[Taint, ...]:
    """Taints GKE itself puts on the pool's nodes, beside those of the pool config."""
    found = load_catalog().instance(NAME, plan.pool.instance_type)
    arm = (ARM64_TAINT,) if found is not None and found.arch == "arm64" else ()
    return ((QUEUED_TAINT,) if capacity.has(plan.pool, capacity.QUEUED) else ()) + arm


def extra_tolerations(plan: PoolPlan) -> list[dict]:
    return [{"key": t.key, "operator": "Exists", "effect": t.effect} for t in node_taints(plan)]


def zone_problems(pool: Pool, path: str, cluster: Cluster | None, providers: dict, hardware: Hardware | None) -> list[Problem]:
    problems = []
    for s in capacity.sources(pool):  # a reservation's zone pins the pool there: it must be the region's, with the GPU
        if s.reservation is not None and s.reservation.zones and not pool.zones:
            problems += _zone_problems(pool.model_copy(update={"zones": s.reservation.zones}), f"{s.path(path)}.reservation", cluster, hardware)
    return problems + _zone_problems(pool, path, cluster, hardware)


def _zone_problems(pool: Pool, path: str, cluster: Cluster | None, hardware: Hardware | None) -> list[Problem]:
    if cluster is None or cluster.location is None:
        return []
    region = zone_region(cluster.location)
    problems = zone_letter_problems(pool, path, region, f"{region}-a")
    if problems or hardware is None or hardware.accelerator is None:
        return problems
    if hardware.accelerator not in load_catalog().gcp_zones:  # nvidia-gb200/gb300: sold by reservation, zones not in the catalog
        return problems
    offered = load_catalog().gcp_zones_in(hardware.accelerator, region)
    if offered is None:
        return []
    wanted = pool.zones or ([cluster.location] if cluster.location != region else None)
    if wanted is None:
        if not offered:
            return [Problem(f"{path}.instanceType", f"{hardware.accelerator} ({pool.instance_type}) is offered in no zone of {region}; "
                                                    f"choose another machine type or region (gpupools catalog --cloud gcp)")]
        return []
    where = f"{path}.zones" if pool.zones else "cluster.location"
    return [Problem(f"{where}[{i}]" if pool.zones else where, f"{zone!r} does not offer {hardware.accelerator}; zones of {region} that do: "
                    f"{', '.join(offered) or 'none'}") for i, zone in enumerate(wanted) if zone not in offered]


def node_template(plan: PoolPlan) -> NodeTemplate:
    """GKE's autoscaler builds an empty pool's node from the pool's config: its labels and taints, and
    `nvidia.com/gpu` from the accelerator count. GKE's own sharing and partitions are part of that config
    (GKE documents scale-from-zero for time-sharing, MPS and GPU partitions); what the GPU Operator advertises
    (MIG `nvidia.com/mig-*`, shares) is not."""
    gke_shares = plan.mechanism.installer == "cloud"
    gpus = plan.units_per_node if gke_shares else plan.hardware.gpus_per_node
    sharing = f" ({plan.mechanism.description})" if gke_shares and plan.mechanism.mode != "none" else ""
    if uses_compute_class(plan.pool):
        # Node auto-provisioning builds the node from the class's priority it is trying: the machine type and GPUs, the
        # nodePoolConfig's labels and taints; GKE adds the class label (and names the node pool it creates itself).
        labels = {**plan.labels, "node.kubernetes.io/instance-type": plan.pool.instance_type}
        order = " > ".join(s.kind for s in capacity.sources(plan.pool))
        source = f"ComputeClass {compute_class_name(plan.name)} ({order}){sharing}"
        return NodeTemplate("GKE node auto-provisioning", source, labels, plan.taints + node_taints(plan), {GPU_RESOURCE: gpus},
                            requires=pod_node_selector(plan.pool))
    labels = {**plan.labels, "cloud.google.com/gke-nodepool": plan.name, "node.kubernetes.io/instance-type": plan.pool.instance_type}
    source = f"node pool {plan.name}'s accelerator config" + sharing
    return NodeTemplate("the GKE cluster autoscaler", source, labels, plan.taints + node_taints(plan), {GPU_RESOURCE: gpus})
def n1_shape_problems(machine_type: str, accelerator: str, count: int, path: str) -> list[Problem]:
    """Compute Engine attaches N GPUs of a type only to N1 machines up to a vCPU and memory size (facts_gcp.yaml)."""
    facts = load_facts()
    shape, limits = facts.n1_machines.get(machine_type), facts.n1_limits.get(accelerator, {})
    limit = limits.get(count)
    if shape is None or limit is None or (shape.vcpus <= limit.vcpus and shape.memory_gb <= limit.memory_gb):
        return []
    fits = [n for n, lim in sorted(limits.items()) if shape.vcpus <= lim.vcpus and shape.memory_gb <= lim.memory_gb]
    hint = f"use gpuCount {fits[0]} or more, or a smaller N1 machine type" if fits else "use a smaller N1 machine type"
    return [Problem(f"{path}.gpuCount" if fits else f"{path}.instanceType",
                    f"{machine_type} ({shape.vcpus} vCPUs, {shape.memory_gb:g} GB) is too large for {count} x {accelerator}: Compute Engine "
                    f"allows at most {limit.vcpus} vCPUs and {limit.memory_gb:g} GB with that many; {hint}")]


# --------------------------------------------------------------------------------------------------------------------
# Answers to the questions every capability asks a cloud (gpupools/core/cloud.py)

# `installer: auto`: GKE installs the driver and its own device plugin (gpuDriverInstallationConfig), which also
# serves GKE's time-sharing, MPS and partitions.
# The service scales GPU pools with its own cluster autoscaler; gpupools installs none (EKS: Karpenter or
# cluster-autoscaler, gpupools' choice).
OWN_AUTOSCALER = True


def plan_notes(pools: list) -> list[str]:
    """What the plan tells the user to check on the cluster itself: nothing here."""
    return []
