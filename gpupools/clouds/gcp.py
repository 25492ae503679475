"""Google GKE decisions: accelerators from the machine type (or `gpu`/`gpuCount` on N1), who installs the
driver, and GKE's own GPU sharing (time-sharing, MPS, MIG partitions).

Every field under `guest_accelerators` forces GKE to recreate the pool, while node labels update in place.
That is why, with the GPU Operator installer, sharing is chosen by labels; with GKE's own installer a sharing
change replaces the pool (docs/sharing.md says so).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from datetime import date, datetime, timedelta
from typing import Any

from gpupools.core.catalog import Catalog, Hardware, load_catalog, zone_region
from gpupools.core.facts import load_facts
from gpupools.stack.config import GKE_RELEASE_CHANNELS, Cluster, Pool, Sharing
from gpupools.stack.errors import Problem
from gpupools.stack.targets import ProviderFacts, Setting
from gpupools.core.pools import NodeTemplate, PoolPlan, Taint, spell_taint
from gpupools.core.sharing import GPU_RESOURCE, gke_mechanism
from gpupools.capacity import sources as capacity
from gpupools.upgrades.policy import UPGRADES_LABEL, PoolUpgrade, Window, exclusion_days, options as upgrade_options, pool_upgrade, wait_text
from gpupools.clouds.common import KIND, Control, KubernetesRelease, endpoint_control, on_off, shared_cluster_problems, hardware_of, lookup_instance, reject_fields, zone_letter_problems, too_open
from gpupools.clouds.standard import ADMITS_HOST_AGENTS, BOUNDS_POOL_NODES, MANAGED_GPU_METRICS, REFUSED_QUOTAS, managed_plan  # noqa: F401 (standard mode's answers)

NAME = "gcp"
KIND_WORD = KIND[NAME]  # what a pool's machines are called here, as messages name them
# The Pulumi provider beside `gpupools:` (pulumi-gcp). Project IDs are 6-30 lower-case letters, digits and hyphens,
# starting with a letter, not ending with a hyphen; regions are like us-central1, europe-west4, northamerica-northeast2.
# The environment variables as pulumi-gcp documents them (GOOGLE_PROJECT, GOOGLE_CLOUD_PROJECT, GCLOUD_PROJECT,
# CLOUDSDK_CORE_PROJECT). `gcp:credentials` may be a key's JSON (a secret) or the path of its file (none).
GCP_PROJECT = r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$"
GCP_REGION = r"^[a-z]+-[a-z]+[0-9]{1,2}$"
GCP_ZONE = r"^[a-z]+-[a-z]+[0-9]{1,2}-[a-z]$"
PROVIDER = ProviderFacts(
    namespace="gcp",
    settings={
        "gcp:project": Setting(GCP_PROJECT, "a GCP project ID such as ml-platform-dev (6-30 lower-case letters, digits, '-')",
                               ("GOOGLE_PROJECT", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"), required=True),
        "gcp:region": Setting(GCP_REGION, "a GCP region such as us-central1", ("GOOGLE_REGION", "GCLOUD_REGION", "CLOUDSDK_COMPUTE_REGION")),
        "gcp:zone": Setting(GCP_ZONE, "a GCP zone such as us-central1-a", ("GOOGLE_ZONE", "GCLOUD_ZONE", "CLOUDSDK_COMPUTE_ZONE")),
        "gcp:credentials": Setting(None, "a service account key (its JSON, or the path of its file)", secret="json"),
        "gcp:accessToken": Setting(None, "an OAuth 2.0 access token", secret="always"),
    },
    sdk_package="pulumi_gcp", sdk_name="the Google Cloud provider", sdk_distribution="pulumi-gcp")
# The platform component's type for one pool (how `gpupools plan` finds what a pool created).
POOL_COMPONENT = "gpupools:index:GkeGpuNodePool"
SERVICE = "GKE"
# GKE limits a node pool to 1,000 nodes in each of its zones (GKE quotas and limits, "Nodes per node pool zone");
# the pool's maxNodes is its total over all zones (total_max_node_count).
MAX_NODES_PER_POOL_ZONE = 1000


def max_nodes(pool: Pool, cluster: Cluster | None, hardware: Hardware | None) -> tuple[int, str]:
    """The most nodes one pool may ask for: 1,000 per zone it spans (one zone where gpupools cannot tell)."""
    location = cluster.location if cluster is not None else None
    zones = pool.zones or node_locations(pool, hardware.accelerator if hardware else None, location) or [location]
    return MAX_NODES_PER_POOL_ZONE * len(zones), f"per GKE node pool in {len(zones)} zone{'s' if len(zones) != 1 else ''}"
TAINT_STYLE = "enum"
PROVIDER_PACKAGE = "pulumi_gcp"

# GKE release schedule (cloud.google.com/kubernetes-engine/docs/release-schedule, updated 2026-04-10): about 14
# months of standard support from availability in the Regular channel. gpupools clusters use the Regular channel,
# which offers no version past standard support (those live on in the Extended channel only). 1.36's dates follow
# that rule from its arrival in Regular (mid 2026); the schedule read did not list it yet.
KUBERNETES_RELEASES = {r.minor: r for r in (
    KubernetesRelease("1.32", date(2025, 2, 11), date(2026, 4, 27)),
    KubernetesRelease("1.33", date(2025, 6, 4), date(2026, 8, 3)),
    KubernetesRelease("1.34", date(2025, 11, 26), date(2027, 1, 25)),
    KubernetesRelease("1.35", date(2026, 2, 11), date(2027, 4, 11)),
    KubernetesRelease("1.36", date(2026, 7, 1), date(2027, 9, 1)),
)}
# New clusters follow the Regular channel's default version (always one in standard support) unless the stack
# pins one.
DEFAULT_KUBERNETES_VERSION = None
SYSTEM_POOL = {"machine_type": "e2-standard-4", "min": 1, "max": 3}
# GKE's documented label that stops its own NVIDIA device plugin, for pools the GPU Operator serves.
NO_DEFAULT_DEVICE_PLUGIN_LABEL = "gke-no-default-nvidia-gpu-device-plugin"
SHARING_STRATEGY = {"time-slicing": "TIME_SHARING", "mps": "MPS"}


def cluster_problems(cluster: Cluster) -> list[Problem]:
    problems = shared_cluster_problems(cluster, NAME)
    if cluster.location is None:
        problems.append(Problem("cluster.location", "required on gcp: the region (e.g. us-central1) or zone (e.g. us-central1-a) of the GKE cluster"))
    if cluster.node_service_account is not None and DEFAULT_COMPUTE_ACCOUNT.fullmatch(cluster.node_service_account):
        problems.append(Problem("cluster.nodeServiceAccount", "is the Compute Engine default service account, which holds the project's Editor "
                                                              "role; name a dedicated account, or leave it out and gpupools creates one"))
    return problems


# --------------------------------------------------------------------------------------------------------------------
# The nodes' own identity
#
# GKE nodes act as an IAM service account for their own work: writing logs and metrics, autoscaling metrics, pulling
# images. Unset, that is the Compute Engine default account, which has the project's Editor role. gpupools gives the
# nodes a dedicated account with GKE's least-privilege node role and image pulls from Artifact Registry, as GKE's
# hardening guide ("Configure GKE node service accounts": roles/container.defaultNodeServiceAccount, plus
# roles/artifactregistry.reader for private images) and CIS GKE Benchmark 5.2.1 ask. Workloads get Google identities
# through Workload Identity (GKE_METADATA), never from the node's account.

NODE_SERVICE_ACCOUNT_ROLES = ("roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader")
# PROJECT_NUMBER-compute@developer.gserviceaccount.com (IAM "Default service accounts").
DEFAULT_COMPUTE_ACCOUNT = re.compile(r"[0-9]+-compute@developer\.gserviceaccount\.com")
# IAM CreateServiceAccount: accountId is 6-30 characters, [a-z]([-a-z0-9]*[a-z0-9]).
ACCOUNT_ID = re.compile(r"^[a-z](?:[-a-z0-9]{4,28}[a-z0-9])$")
ACCOUNT_ID_MAX = 30


def node_account_id(cluster_name: str) -> str:
    """`<cluster>-nodes`, or, for a cluster name too long for IAM's 30 characters, its start and a stable hash."""
    plain = f"{cluster_name}-nodes"
    if len(plain) <= ACCOUNT_ID_MAX:
        return plain
    digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:6]
    head = cluster_name[:ACCOUNT_ID_MAX - len(f"-{digest}-nodes")].rstrip("-")
    return f"{head}-{digest}-nodes"


def node_account_args(cluster: Cluster, project: str | None) -> dict | None:
    """The service account gpupools creates for the nodes, as the provider names its inputs; None when the stack names
    its own (`nodeServiceAccount`)."""
    if cluster.node_service_account is not None:
        return None
    args = {"accountId": node_account_id(cluster.name), "displayName": f"GKE nodes of {cluster.name}"[:100],
            "description": "The identity of the cluster's nodes (logs, metrics, image pulls); created by gpupools"}
    if project:
        args["project"] = project
    return args


def node_role_args(role: str, member: Any, project: Any) -> dict:
    """One project-level grant of a node role to the node service account (`member`: serviceAccount:<email>)."""
    return {"project": project, "role": role, "member": member}


# The node pool GKE creates with every new Standard cluster. The provider deletes it right after creating the cluster
# when `remove_default_node_pool` is set (terraform-provider-google, which pulumi-gcp wraps:
# google/services/container/resource_container_cluster.go, resourceContainerClusterCreate, deletes
# `<cluster>/nodePools/default-pool`), and an existing cluster may still run it: a gpupools pool of that name would
# collide with it or be taken for it.
GKE_DEFAULT_POOL = "default-pool"


def pool_problems(pool: Pool, path: str) -> list[Problem]:
    problems = reject_fields(pool, path, NAME, {"os": ("os", "aws"), "placement": ("placement", "gcore virtual-machine flavors")})
    if len(pool.name) > 40 or not pool.name[0].isalpha():
        problems.append(Problem(f"{path}.name", f"{pool.name!r} cannot name a GKE node pool: start with a letter, at most 40 characters"))
    if pool.name == GKE_DEFAULT_POOL:
        problems.append(Problem(f"{path}.name", f"{GKE_DEFAULT_POOL!r} is the node pool GKE creates with every cluster (gpupools deletes it from "
                                                f"a cluster it creates: remove_default_node_pool; an existing cluster may still run it); "
                                                f"pick another pool name"))
    return problems


def region_problems(providers: dict) -> list[Problem]:
    return []


def pool_sharing_problems(pool: Pool, sharing: Sharing, hw: Hardware | None, path: str) -> list[Problem]:
    return []


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


def driver_installer(installer: str, os: str | None) -> str | None:
    """Who installs a pool's NVIDIA driver, in the plan's words; None: the GPU Operator (guest_accelerator below)."""
    return "GKE (gpuDriverInstallationConfig LATEST: the newest driver GKE has for the node version)" if installer == "cloud" else None


def guest_accelerator(plan: PoolPlan, installer: str) -> dict:
    m = plan.mechanism
    accelerator: dict = {"type": plan.hardware.accelerator, "count": plan.hardware.gpus_per_node}
    if installer == "cloud":
        accelerator["gpu_driver_installation_config"] = {"gpu_driver_version": "LATEST"}
        if m.mode in SHARING_STRATEGY:
            accelerator["gpu_sharing_config"] = {"gpu_sharing_strategy": SHARING_STRATEGY[m.mode], "max_shared_clients_per_gpu": m.replicas}
        elif m.mode == "mig":
            accelerator["gpu_partition_size"] = m.mig_profile
    else:
        # The GPU Operator (or the standalone plugin's host) installs the driver itself.
        accelerator["gpu_driver_installation_config"] = {"gpu_driver_version": "INSTALLATION_DISABLED"}
    return accelerator


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


DEFAULT_RELEASE_CHANNEL = "REGULAR"
# The resource label that marks a production cluster; GKE label keys take no dots or slashes.
PRODUCTION_LABEL = "gpupools-production"
# The network gpupools creates GKE clusters in (the project's default VPC).
NETWORK = "default"


def workload_pool(project: str) -> str:
    return f"{project}.svc.id.goog"


def endpoint_args(cluster: Cluster) -> dict:
    """Private: only addresses inside the VPC reach the API (authorized networks on, none listed). Restricted: the
    public endpoint answers the listed networks only. Public: no authorized networks at all."""
    mode = cluster.endpoint_mode
    private_nodes = cluster.private_nodes is not False
    args: dict = {}
    if private_nodes or mode == "private":
        args["private_cluster_config"] = {"enable_private_nodes": private_nodes, "enable_private_endpoint": mode == "private"}
    if mode != "public":
        args["master_authorized_networks_config"] = {
            "cidr_blocks": [{"cidr_block": c, "display_name": f"authorized-{i}"} for i, c in enumerate(cluster.authorized_cidrs or [])],
            "gcp_public_cidrs_access_enabled": False}
    return args


# What `gpupools plan` can say of an existing cluster's controls beyond "not checked": what the program reads.
READ_ON_EXISTING = {
    "API endpoint": "read from the cluster by `pulumi preview`, which warns if it is open to the internet",
    "private nodes (with Cloud NAT)": "read by `pulumi preview`, which warns if nodes have public IPs",
    "Workload Identity": "read from the cluster; the deploy stops with an error if it is off, since the pools need it",
    "shielded nodes": "read by `pulumi preview`, which warns if they are off",
    "Dataplane V2 (network policy)": "read by `pulumi preview`, which warns if no network policy is enforced",
    "release channel": "read by `pulumi preview`, which warns if there is none",
}


def _first(items: list | None) -> dict:
    return (items or [{}])[0] or {}


def existing_cluster_findings(name: str, read: dict) -> list[str]:
    """What an existing cluster, as `container.getCluster` reads it (the SDK's snake_case keys, blocks as lists), lacks of
    the controls a new one gets. gpupools changes nothing on a cluster it did not create; these become preview warnings."""
    found = []
    private = _first(read.get("private_cluster_configs"))
    networks = _first(read.get("master_authorized_networks_configs"))
    blocks = [b.get("cidr_block") for b in networks.get("cidr_blocks") or []]
    if not private.get("enable_private_endpoint") and (not read.get("master_authorized_networks_configs") or too_open(blocks)
                                                       or networks.get("gcp_public_cidrs_access_enabled")):
        found.append(f"existing GKE cluster {name!r} serves its API endpoint to the whole internet (no master authorized networks)")
    if not private.get("enable_private_nodes"):
        found.append(f"existing GKE cluster {name!r} gives its nodes public IP addresses")
    if read.get("enable_shielded_nodes") is False:
        found.append(f"existing GKE cluster {name!r} has shielded nodes off")
    if read.get("datapath_provider") != "ADVANCED_DATAPATH" and not _first(read.get("network_policies")).get("enabled"):
        found.append(f"existing GKE cluster {name!r} enforces no NetworkPolicy (no Dataplane V2, no network policy addon)")
    if _first(read.get("release_channels")).get("channel") not in GKE_RELEASE_CHANNELS:
        found.append(f"existing GKE cluster {name!r} follows no release channel")
    return found


def cluster_controls(cluster: Cluster) -> list[Control]:
    return [
        endpoint_control(cluster),
        Control("private nodes (with Cloud NAT)", on_off(cluster.private_nodes is not False), "privateNodes", "gke-private-nodes"),
        Control("Workload Identity", "on", "-", "cluster-workload-identity"),
        Control("shielded nodes", "on", "-", "gke-shielded-nodes"),
        Control("Dataplane V2 (network policy)", on_off(cluster.network_policy is not False), "networkPolicy", "cluster-network-policy"),
        Control("release channel", cluster.release_channel or DEFAULT_RELEASE_CHANNEL, "releaseChannel", "gke-release-channel"),
        Control("deletion protection", "on" if cluster.production else "off (on for a production cluster)", "production", "gke-deletion-protection"),
        Control("Binary Authorization (optional)", on_off(cluster.binary_authorization is True), "binaryAuthorization", "gke-binary-authorization"),
    ]


def cluster_args(cluster: Cluster, project: str | None, pool, upgrades=None) -> dict:
    """`pool`: the Workload Identity pool (`<project>.svc.id.goog`), known once the provider's project is; `upgrades`:
    the stack's maintenance window and exclusions (`maintenance_policy`)."""
    args = {
        "name": cluster.name,
        "location": cluster.location,
        "remove_default_node_pool": True,
        "initial_node_count": 1,
        "deletion_protection": cluster.production is True,
        "release_channel": {"channel": cluster.release_channel or DEFAULT_RELEASE_CHANNEL},
        "networking_mode": "VPC_NATIVE",
        "ip_allocation_policy": {},
        # GKE_METADATA node pools need it; it is what lets pods act as Google service accounts without keys.
        "workload_identity_config": {"workload_pool": pool},
        "enable_shielded_nodes": True,
        **endpoint_args(cluster),
    }
    if upgrades is not None:
        args["maintenance_policy"] = maintenance_policy(upgrades, Window.of(upgrades.window))
    if cluster.network_policy is not False:
        # Dataplane V2 (Cilium) enforces NetworkPolicy itself; the legacy network_policy addon must stay off with it.
        args["datapath_provider"] = "ADVANCED_DATAPATH"
    if cluster.production:
        args["resource_labels"] = {PRODUCTION_LABEL: "true"}
    if cluster.binary_authorization:
        args["binary_authorization"] = {"evaluation_mode": "PROJECT_SINGLETON_POLICY_ENFORCE"}
    if cluster.kubernetes_version:
        args["min_master_version"] = cluster.kubernetes_version
    if project:
        args["project"] = project
    return args


def nat_args(cluster: Cluster, project: str | None) -> tuple[dict, dict] | None:
    """Router and NAT inputs as the provider names them (registered by type token; see components/wire.py).

    Private nodes have no public IPs: a Cloud Router with NAT in the cluster's region lets them pull images from
    registries outside Google (nvcr.io for the GPU Operator, quay.io, registry.k8s.io)."""
    if cluster.private_nodes is False:
        return None
    region = zone_region(cluster.location or "")
    router = {"name": f"{cluster.name}-nat", "network": NETWORK, "region": region}
    nat = {"name": f"{cluster.name}-nat", "region": region, "natIpAllocateOption": "AUTO_ONLY",
           "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES"}
    if project:
        router["project"] = nat["project"] = project
    return router, nat


def existing_cluster_problem(name: str, workload_pools: list[str | None], autopilot: bool | None = None) -> str | None:
    """GKE_METADATA node pools only start on a cluster with Workload Identity, and on a Standard cluster (`autopilot`: the
    cluster's enableAutopilot, as read); say so before GKE refuses the pools."""
    if autopilot:
        return (f"GKE cluster {name!r} runs Autopilot, which takes no node pools of gpupools'; set gpupools:cluster.mode: autopilot")
    if any(workload_pools):
        return None
    return (f"GKE cluster {name!r} has no Workload Identity, which gpupools' node pools (GKE metadata server) need; enable it with "
            f"`gcloud container clusters update {name} --workload-pool=PROJECT_ID.svc.id.goog`, then run again")


def system_node_pool_args(cluster_name, location: str, project: str | None, service_account: Any = None) -> dict:
    args = {
        "name": "system",
        "cluster": cluster_name,
        "location": location,
        "initial_node_count": SYSTEM_POOL["min"],
        "autoscaling": {"total_min_node_count": SYSTEM_POOL["min"], "total_max_node_count": SYSTEM_POOL["max"]},
        "management": {"auto_repair": True, "auto_upgrade": True},
        "node_config": {
            "machine_type": SYSTEM_POOL["machine_type"],
            "labels": {"gpupools.io/pool": "system"},
            "oauth_scopes": ["https://www.googleapis.com/auth/cloud-platform"],
            "workload_metadata_config": {"mode": "GKE_METADATA"},
            "shielded_instance_config": {"enable_secure_boot": True, "enable_integrity_monitoring": True},
        },
    }
    if service_account is not None:
        args["node_config"]["service_account"] = service_account
    if project:
        args["project"] = project
    return args


def kubeconfig(cluster_name: str, endpoint: str, ca_data: str) -> str:
    """Authenticates through gke-gcloud-auth-plugin, so the kubeconfig holds no token."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": cluster_name,
        "clusters": [{"name": cluster_name, "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_data}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "users": [{"name": cluster_name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin",
            "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin", "provideClusterInfo": True}}}],
    }, indent=2)


# GKE taints the nodes of a queued-provisioning pool (GoogleCloudPlatform/cluster-toolkit, GKE consumption options
# guide, "DWS Flex Start + Queued Provisioning": workloads need a toleration for cloud.google.com/gke-queued:NoSchedule;
# ai-on-gke's DWS examples tolerate it). Kueue's provisioning controller adds no toleration to the pods it admits
# (kueue v0.19.2 pkg/controller/admissionchecks/provisioning/controller.go, podSetUpdates: node selector only), so
# the pool's ResourceFlavor, its Jobs and its DaemonSets carry it.
QUEUED_TAINT = Taint("cloud.google.com/gke-queued", "true", "NoSchedule")


def node_taints(plan: PoolPlan) -> tuple[Taint, ...]:
    """Taints GKE itself puts on the pool's nodes, beside those of the pool config."""
    return (QUEUED_TAINT,) if capacity.has(plan.pool, capacity.QUEUED) else ()


def extra_tolerations(plan: PoolPlan) -> list[dict]:
    return [{"key": t.key, "operator": "Exists", "effect": t.effect} for t in node_taints(plan)]


def node_locations(pool: Pool, accelerator: str | None, cluster_location: str | None) -> list[str] | None:
    """Where the pool's nodes go: the pool's zones, or on a regional cluster every zone of the region that offers the
    pool's GPU (GKE would otherwise try all of the cluster's zones and fail where the GPU does not exist). None:
    GKE's default (the cluster's zones), for zonal clusters and for regions the catalog does not know."""
    zones = capacity.placement_zones(pool)
    if zones:
        return zones
    if cluster_location is None or accelerator is None or zone_region(cluster_location) != cluster_location:
        return None
    return load_catalog().gcp_zones_in(accelerator, cluster_location) or None


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
# The fabric: GPUDirect NICs on extra VPC networks, the Kubernetes networks pods reach them through, placement

FABRIC_RESOURCE = None  # GPUDirect NICs reach pods through GKE multi-networking (pod annotations), not a device plugin resource
FABRIC_NAME = "GPUDirect"
# Coarse to fine: GKE's topology node labels, as Google's own Kueue Topology for A3 lists them
# (docs.cloud.google.com/ai-hypercomputer/docs/nccl/test-gke-custom-a3-mega-high, Topology `gke-default`).
TOPOLOGY_LEVELS = (("block", "cloud.google.com/gce-topology-block"), ("subblock", "cloud.google.com/gce-topology-subblock"),
                   ("host", "cloud.google.com/gce-topology-host"))
# Compact placement packs one zone's VMs; GKE takes it only on a node pool in a single zone.
FABRIC_ZONES = "one"

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


def fabric_placement(cluster_name: str, pool: Pool) -> tuple[str, str | None, bool]:
    """How a fabric pool's nodes are kept close: GKE's compact placement policy where GKE takes it (`compact_placement`)."""
    _, words, close = compact_placement(pool)
    return words, None, close


# Each GPU network's MTU: 8244 on A3 High and Mega (cluster-toolkit v1.95.0 examples/gke-a3-highgpu/gke-a3-highgpu.yaml
# line 112 and examples/gke-a3-megagpu/gke-a3-megagpu.yaml line 106, `mtu: 8244`), 8896 on A3 Ultra's gVNIC and RoCE
# networks (examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml takes the default of modules/network/vpc/variables.tf lines
# 79-83 and modules/network/gpu-rdma-vpc/variables.tf lines 38-42, 8896). The VPC default (1460) splits every GPU
# transfer into more packets.
GPU_NETWORK_MTU = {"tcpx": 8244, "tcpxo": 8244, "rdma": 8896}
# Extra NICs' subnets come from 172.16.0.0/12, a /24 each, apart from the cluster's own network: a VM's NICs must not
# share address ranges. Every node takes one address of each of its pool's GPU subnets (one NIC each; a Device network
# gives the pod the node's NIC and its one address: kubernetes/cloud-provider-gcp @ 4e24531
# pkg/controller/nodeipam/ipam/multinetwork_cloud_cidr_allocator.go lines 97-105, a /32 per node), and Compute Engine
# reserves four addresses of every subnet's primary range (VPC docs, "Reserved IP addresses in IPv4 subnets").
FABRIC_RANGE = ipaddress.ip_network("172.16.0.0/12")
SUBNETS_PER_POOL = 16
SUBNET_PREFIX = 24
SUBNET_NODES = 2 ** (32 - SUBNET_PREFIX) - 4
# Kubernetes device modes of a GKENetworkParamSet (cluster-toolkit v1.95.0 modules/scheduler/gke-cluster/main.tf line
# 663: RDMA NICs "RDMA", gVNIC ones "NetDevice").
NET_DEVICE, RDMA_DEVICE = "NetDevice", "RDMA"


def gpu_network_names(pool: str, gpudirect: str, networks: int) -> list[tuple[str, str, str | None]]:
    """(Kubernetes Network name, device mode, the pod's interface or None) per GPU subnet, in `fabric_networks` order.

    The names are the blueprints' with the pool in front (Network objects are cluster-wide, and every fabric pool has
    networks of its own): A3 High and Mega `vpc1`..`vpc8` (cluster-toolkit v1.95.0 examples/gke-a3-megagpu/
    gke-a3-megagpu.yaml lines 120-122, k8s_network_names gvnic_prefix `vpc`, start 1), A3 Ultra `gvnic-1` and
    `rdma-0`..`rdma-7` (modules/scheduler/gke-cluster/variables.tf lines 552-570, the defaults). Pods attach eth1..ethN
    to TCPX and TCPXO networks (container-engine-accelerators @ 204a57c gpudirect-tcpx/nccl-test-latest.yaml lines
    39-47), and eth2..eth9 to the RDMA networks, leaving the gVNIC network to the node (cluster-toolkit v1.95.0
    examples/gke-a3-ultragpu/nccl-jobset-example.yaml lines 39-49)."""
    if gpudirect == "rdma":
        return [(f"{pool}-gvnic-1", NET_DEVICE, None)] + [(f"{pool}-rdma-{i}", RDMA_DEVICE, f"eth{i + 2}") for i in range(networks - 1)]
    return [(f"{pool}-vpc{i + 1}", NET_DEVICE, f"eth{i + 1}") for i in range(networks)]


def fabric_networks(cluster_name: str, pool: str, pool_index: int, gpudirect: str, networks: int, region: str) -> list[dict]:
    """The VPC networks (each with its subnets) a fabric pool's extra NICs attach to, as Google's blueprints build them.

    TCPX (A3 High, 4 NICs) and TCPXO (A3 Mega, 8 NICs): one VPC with one subnet per NIC (GKE "Maximize GPU network
    bandwidth"; GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpx/nccl-test-latest.yaml names eth1..eth4
    on vpc1..vpc4). RDMA (A3 Ultra): one more gVNIC VPC, and one VPC with the zone's RoCE network profile holding 8
    subnets, one per CX-7 NIC (GoogleCloudPlatform/cluster-toolkit examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml:
    `network_profile: .../networkProfiles/<zone>-vpc-roce`, `subnetworks_template.count: 8`). `rdma_profile` marks
    the network that needs the profile; the component fills in the project. Each subnet carries the Kubernetes Network
    that names it for pods (`k8s`, `device_mode`, `interface`: `gpu_network_names`).
    """
    def cidr(k: int) -> str:
        return f"{FABRIC_RANGE.network_address + (pool_index * SUBNETS_PER_POOL + k) * 256}/{SUBNET_PREFIX}"

    base = f"{cluster_name}-{pool}"
    mtu = GPU_NETWORK_MTU[gpudirect]
    names = iter(gpu_network_names(pool, gpudirect, networks))

    def subnet(name: str, k: int) -> dict:
        k8s, mode, interface = next(names)
        return {"name": name, "cidr": cidr(k), "region": region, "k8s": k8s, "device_mode": mode, "interface": interface}

    if gpudirect == "rdma":
        gvnic = {"name": f"{base}-gvnic", "rdma_profile": False, "mtu": mtu, "subnets": [subnet(f"{base}-gvnic", 0)]}
        roce = {"name": f"{base}-rdma", "rdma_profile": True, "mtu": mtu,
                "subnets": [subnet(f"{base}-rdma-{i}", 1 + i) for i in range(networks - 1)]}
        return [gvnic, roce]
    return [{"name": f"{base}-net-{i + 1}", "rdma_profile": False, "mtu": mtu, "subnets": [subnet(f"{base}-net-{i + 1}", i)]}
            for i in range(networks)]


def fabric_pool_problems(pool: Pool, path: str) -> list[Problem]:
    """A fabric pool's nodes must fit its /24 GPU subnets (see SUBNET_NODES)."""
    if pool.max_nodes <= SUBNET_NODES:
        return []
    return [Problem(f"{path}.maxNodes", f"{pool.max_nodes}: every node of a GPUDirect pool takes an address in each of its /{SUBNET_PREFIX} "
                                        f"GPU subnets, which hold {SUBNET_NODES} (Compute Engine reserves 4 of each range); give it at "
                                        f"most {SUBNET_NODES} nodes, or split it into pools")]


def fabric_node_pool_args(plan: PoolPlan, args: dict, attachments: list[dict]) -> dict:
    """A fabric pool: a NIC on each extra network (NodeNetworkConfig.additionalNodeNetworkConfigs, "Each node network
    corresponds to an additional interface"), gVNIC, and compact placement where GKE takes it (`compact_placement`;
    PlacementPolicy type COMPACT: the pool's VMs close together in its one zone)."""
    node_config = {**args["node_config"], "gvnic": {"enabled": True}}
    out = {**args, "node_config": node_config, "network_config": {"additional_node_network_configs": list(attachments)}}
    if compact_placement(plan.pool)[0]:
        out["placement_policy"] = {"type": "COMPACT"}
        # No blue-green beside compact placement (`compact_upgrades`): the fabric pool's own upgrade settings.
        settings = upgrade_settings(plan.pool, fabric=True)
        if settings is None:
            out.pop("upgrade_settings", None)
        else:
            out["upgrade_settings"] = settings
    return out


def fabric_cluster_args(args: dict) -> dict:
    """Extra node networks need GKE multi-networking, which needs Dataplane V2 (GKE "Maximize GPU network bandwidth")."""
    return {**args, "enable_multi_networking": True, "datapath_provider": "ADVANCED_DATAPATH"}


def fabric_readiness(cluster: Cluster, plan: PoolPlan) -> tuple[bool, tuple[str, ...]]:
    """(whether pods can use the pool's GPUDirect NICs once the stack is up, what the pool still lacks).

    The NCCL plugin installers copy the plugin into /home/kubernetes/bin/nvidia/lib64 and the jobs mount it from there
    (container-engine-accelerators @ 204a57c gpudirect-tcpx/nccl-tcpx-installer.yaml, @ a32cd51
    gpudirect-tcpxo/nccl-tcpxo-installer.yaml, cluster-toolkit v1.95.0 examples/gke-a3-ultragpu/nccl-installer.yaml.tftpl):
    where GKE's own driver installer keeps the driver on Container-Optimized OS. Pools whose driver the GPU Operator
    installs run Ubuntu with the driver elsewhere."""
    gaps: tuple[str, ...] = ()
    configured = plan.mechanism.installer == "cloud"
    if not configured:
        gaps += (f"Google's NCCL plugins and their jobs use GKE's own GPU driver on COS (/home/kubernetes/bin/nvidia); the pool's driver "
                 f"comes from {plan.mechanism.installer} on Ubuntu (set gpuSoftware.installer: cloud)",)
    if not cluster.create:
        gaps += ("the existing cluster must have multi-networking and Dataplane V2, which gpupools does not change",)
    return configured, gaps


# What a multi-node pod on a GPUDirect node carries beside its GPUs, per flavour, after Google's own examples.
GKE_LIBRARIES = "/home/kubernetes/bin/nvidia/lib64"  # the driver's libraries, and the NCCL plugin the installers copy beside them
TCPX_RXDM_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12"  # cluster-toolkit v1.95.0 gpu_direct.tf line 34, for plugin v3.1.9
# The TCPXO daemon goes with the plugin version (gpudirect-tcpxo/README.md @ 992db81 lines 57-66: plugin v1.0.15 with
# tcpgpudmarxd-dev v1.0.21, as nccl-test-latest.yaml there pairs them).
TCPXO_RXDM_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"
# Google's TCPX settings for a3-highgpu-8g (container-engine-accelerators @ 204a57c gpudirect-tcpx/nccl-config.yaml,
# run-nccl.sh lines 18-63), and the receive-datapath daemon's socket directory where the trainer mounts it (/tmp).
TCPX_ENV = {
    "NCCL_SOCKET_IFNAME": "eth0", "NCCL_CROSS_NIC": "0", "NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple",
    "NCCL_NSOCKS_PERTHREAD": "4", "NCCL_SOCKET_NTHREADS": "1", "NCCL_MAX_NCHANNELS": "8", "NCCL_MIN_NCHANNELS": "8",
    "NCCL_DYNAMIC_CHUNK_SIZE": "524288", "NCCL_P2P_NET_CHUNKSIZE": "524288", "NCCL_P2P_PCI_CHUNKSIZE": "524288",
    "NCCL_P2P_NVL_CHUNKSIZE": "1048576", "NCCL_BUFFSIZE": "4194304", "NCCL_NET_GDR_LEVEL": "PIX", "NCCL_P2P_PXN_LEVEL": "0",
    "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": "eth1,eth2,eth3,eth4", "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
    "NCCL_GPUDIRECTTCPX_TX_BINDINGS": "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177",
    "NCCL_GPUDIRECTTCPX_RX_BINDINGS": "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191",
    "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "500000", "NCCL_GPUDIRECTTCPX_FORCE_ACK": "0",
    "NCCL_GPUDIRECTTCPX_TX_COMPLETION_NANOSLEEP": "1000", "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX": "/tmp",
}
GPU_DEVICES = [f"/dev/nvidia{i}" for i in range(8)] + ["/dev/nvidiactl", "/dev/nvidia-uvm"]


def _device_annotation(container: str, paths: list[str]) -> dict[str, str]:
    """The NRI device injector's annotation: these host devices go into that container, which asks for no GPU itself
    (container-engine-accelerators nri_device_injector/README.md, `devices.gke.io/container.$CONTAINER_NAME`)."""
    return {f"devices.gke.io/container.{container}": "".join(f"- path: {p}\n" for p in paths)}


def _host(name: str, path: str) -> dict:
    return {"name": name, "hostPath": {"path": path}}


def fabric_pod(count: int, pool: str = "", kind: str = "", networks: int = 0) -> dict:
    """What a pod of a multi-node job on a GPUDirect node carries beside its GPUs: its NICs through GKE
    multi-networking (`networking.gke.io/default-interface` and `networking.gke.io/interfaces`, naming the pool's
    Network objects, `gpu_network_names`), the NCCL plugin from the host, and for TCPX and TCPXO the receive-datapath
    daemon beside it. `networks`: the pool's GPU subnets (the catalog's extraNetworks).

    The daemon runs as a native sidecar (an init container with restartPolicy Always) so the Job completes when the
    trainer does (container-engine-accelerators @ 992db81 gpudirect-tcpxo/best-practice.md lines 7-59, "Automatic
    Sidecar Termination"); the NRI device injector hands it the GPU devices its annotation lists. TCPX: the
    tcpx-daemon of gpudirect-tcpx/nccl-test-latest.yaml @ 204a57c (lines 61-87; its socket directory shared with the
    trainer as cluster-toolkit v1.95.0 gpu-direct-workload/scripts/enable-tcpx-in-workload.py does), IPC_LOCK (line
    106) and the NCCL settings of TCPX_ENV. TCPXO: the tcpxo-daemon of gpudirect-tcpxo/nccl-test-latest.yaml @ 992db81
    (lines 82-161), with the startup probe of best-practice.md (lines 89-124), and the plugin's own settings sourced
    from nccl-env-profile.sh (gpudirect-tcpxo/README.md lines 24-34). RDMA: gIB from /home/kubernetes/bin/gib, its
    settings sourced from set_nccl_env.sh (gpudirect-rdma/nccl-test.yaml @ 992db81 lines 54-88; NCCL_NET=gIB as
    cluster-toolkit v1.95.0 examples/gke-a3-ultragpu/nccl-jobset-example.yaml line 183 sets it)."""
    gpudirect = kind.removeprefix("gpudirect-")
    env = {"NCCL_DEBUG": "INFO", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}
    out: dict = {"limits": {}, "env": env, "capabilities": [], "annotations": {}, "volumes": [], "mounts": [], "sidecars": [],
                 "prelude": None}
    if gpudirect not in GPU_NETWORK_MTU or not networks:
        return out
    interfaces = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": interface, "network": name} for name, _, interface in gpu_network_names(pool, gpudirect, networks) if interface]
    out["annotations"] = {"networking.gke.io/default-interface": "eth0", "networking.gke.io/interfaces": json.dumps(interfaces)}
    if gpudirect == "tcpx":
        out["annotations"].update(_device_annotation("tcpx-daemon", GPU_DEVICES))
        # The daemon's socket directory, an emptyDir of the pod's own as cluster-toolkit's enable-tcpx-in-workload.py
        # makes it (Google's test pods share the host's /run/tcpx), mounted where Google's trainers see it: /tmp.
        out["volumes"] = [_host("libraries", GKE_LIBRARIES), {"name": "tcpx-socket", "emptyDir": {}}, _host("sys", "/sys"),
                          _host("proc", "/proc/sys")]
        out["mounts"] = [{"name": "tcpx-socket", "mountPath": "/tmp"}, {"name": "libraries", "mountPath": "/usr/local/nvidia/lib64"}]
        out["sidecars"] = [{
            "name": "tcpx-daemon", "image": TCPX_RXDM_IMAGE, "imagePullPolicy": "Always", "restartPolicy": "Always",
            "command": ["/tcpgpudmarxd/build/app/tcpgpudmarxd", "--gpu_nic_preset", "a3vm", "--gpu_shmem_type", "fd", "--uds_path", "/run/tcpx",
                        "--setup_param", r'\"--verbose 128 2 0 \"'],  # as Google's manifests pass it, escaped quotes included
            "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
            "volumeMounts": [{"name": "libraries", "mountPath": "/usr/local/nvidia/lib64"}, {"name": "tcpx-socket", "mountPath": "/run/tcpx"},
                             {"name": "sys", "mountPath": "/hostsysfs"}, {"name": "proc", "mountPath": "/hostprocsysfs"}],
            "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}]}]
        out["capabilities"] = ["IPC_LOCK"]
        env.update(TCPX_ENV)
    elif gpudirect == "tcpxo":
        out["annotations"].update(_device_annotation("tcpxo-daemon", GPU_DEVICES + ["/dev/dmabuf_import_helper"]))
        out["volumes"] = [_host("nvidia", GKE_LIBRARIES), _host("sys", "/sys"), _host("proc-sys", "/proc/sys"),
                          _host("aperture-devices", "/dev/aperture_devices")]
        out["mounts"] = [{"name": "nvidia", "mountPath": "/usr/local/nvidia/lib64"}, {"name": "aperture-devices", "mountPath": "/dev/aperture_devices"}]
        out["sidecars"] = [{
            "name": "tcpxo-daemon", "image": TCPXO_RXDM_IMAGE, "imagePullPolicy": "Always", "restartPolicy": "Always",
            "command": ["/bin/sh", "-c"],
            "args": ["set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n/fts/entrypoint_rxdm_container.sh --num_hops=2\n"],
            "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}},
            "volumeMounts": [{"name": "nvidia", "mountPath": "/usr/local/nvidia/lib64"}, {"name": "sys", "mountPath": "/hostsysfs"},
                             {"name": "proc-sys", "mountPath": "/hostprocsysfs"}],
            "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"},
                    # The daemon writes this file once initialized; the startup probe fails a pod on a node where it never does.
                    {"name": "HEALTH_CHECK_LOG_FILE", "value": "/run/health-check"}],
            "startupProbe": {"initialDelaySeconds": 1, "periodSeconds": 5, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 6,
                             "exec": {"command": ["cat", "/run/health-check"]}}}]
        env.update({"NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": "/dev/aperture_devices", "NCCL_LIB_DIR": "/usr/local/nvidia/lib64"})
        out["prelude"] = "source ${NCCL_LIB_DIR}/nccl-env-profile.sh"
    else:
        out["volumes"] = [_host("library-dir-host", "/home/kubernetes/bin/nvidia"), _host("gib", "/home/kubernetes/bin/gib")]
        out["mounts"] = [{"name": "library-dir-host", "mountPath": "/usr/local/nvidia"}, {"name": "gib", "mountPath": "/usr/local/gib"}]
        env["NCCL_NET"] = "gIB"
        out["prelude"] = "source /usr/local/gib/scripts/set_nccl_env.sh"
    return out


# Namespaces and node-label domains GKE owns; a team may not claim them. Namespaces: Managed Service for Prometheus
# (gmp-system, gmp-public), GKE's own managed components (gke-managed-system and the other gke-managed-*),
# Config Sync (config-management-system). Labels: GKE sets cloud.google.com/* on every node (gke-nodepool,
# gke-accelerator, gke-spot, ...), and a pool label under that domain would contradict what GKE sets.
RESERVED_NAMESPACES = frozenset({"gmp-system", "gmp-public", "gke-managed-system", "config-management-system"})
RESERVED_NAMESPACE_PREFIXES = ("gke-managed-",)
RESERVED_LABEL_DOMAINS = ("cloud.google.com",)


# Readiness: no startup taint, for the reason AKS has none: GKE's cluster autoscaler builds its template from the node
# pool's taints and cannot be given --startup-taint; it counts a node labelled cloud.google.com/gke-accelerator without
# allocatable nvidia.com/gpu as still starting (kubernetes/autoscaler cluster-autoscaler/processors/customresources/
# gpu_processor.go).
STARTUP_TAINTS = False
READINESS_NOTE = ("GPU pods wait for the device plugin's resource; the GKE autoscaler counts a GPU node as starting until nvidia.com/gpu is "
                  "allocatable (no startup taint: it cannot be told to ignore one)")


def repair_facts(plan: PoolPlan, autoscaler: str) -> tuple[str, str]:
    """(what notices a broken GPU, what happens next) for one pool on GKE. GKE auto-repair recreates nodes NotReady
    (or without status) for about 10 minutes or out of boot disk for about 30 (cloud.google.com/kubernetes-engine/docs/
    how-to/node-auto-repair); it has no documented GPU-health criterion."""
    detects = "the GPU alerts (DCGM XID and row-remap faults); GKE auto-repair checks node readiness, not GPU health"
    if uses_compute_class(plan.pool):
        # What the class tells GKE for every node pool it creates for it, flex-start priorities' included.
        if not compute_class(plan, None)["spec"]["nodePoolConfig"].get("autoRepair"):
            return detects, "nothing: the ComputeClass sets nodePoolConfig.autoRepair: false; replace the node by hand"
        return detects, ("GKE auto-repair (the ComputeClass's nodePoolConfig.autoRepair: true, on every node pool GKE creates for it) "
                         "recreates a node NotReady for about 10m; a GPU fault that leaves the node Ready is alerted, not repaired")
    if plan.pool.auto_repair is False:
        return detects, "nothing: GKE auto-repair is off for this pool (autoRepair: false); replace the node by hand"
    if any(capacity.has(plan.pool, kind) for kind in capacity.DWS):
        return detects, ("nothing: GKE runs flex-start and queued-provisioning pools with auto-repair off; a broken node goes "
                         "when its run ends (maxRunDuration) or its workload is deleted")
    return detects, "GKE auto-repair recreates a node NotReady for about 10m; a GPU fault that leaves the node Ready is alerted, not repaired"


# --------------------------------------------------------------------------------------------------------------------
# Answers to the questions every capability asks a cloud (gpupools/core/cloud.py)

# `installer: auto`: GKE installs the driver and its own device plugin (gpuDriverInstallationConfig), which also
# serves GKE's time-sharing, MPS and partitions.
# The service scales GPU pools with its own cluster autoscaler; gpupools installs none (EKS: Karpenter or
# cluster-autoscaler, gpupools' choice).
OWN_AUTOSCALER = True
# Fabric: GKE places fabric pools by compact placement policy; pods reach the GPUDirect NICs through GKE Network objects.
FABRIC_IN_WORDS = "GPUDirect networking"  # as policy messages name it
FABRIC_PLACEMENT_GROUP = False
FABRIC_DEVICE_SOFTWARE = "gke-networks"
AUTO_INSTALLER = "cloud"
OWN_GPU_SOFTWARE = True
# GKE shares GPUs itself (time-sharing, MPS, partitions: `own_mechanism`), from a driver on the host outside any NVIDIA
# container runtime (/home/kubernetes/bin/nvidia), which the DCGM exporter mounts.
OWN_SHARING = True
CLOUD_DEVICE_PLUGIN = "GKE device plugin"
CLOUD_DRIVER_ON_HOST = True
AUTOSCALER = None
REFUSED_INSTALLERS = {"device-plugin": "'device-plugin' is not offered on gcp: GKE's own device plugin already does time-sharing and MPS without "
                                       "the operator; use 'cloud' (or 'gpu-operator')"}


def own_mechanism(sharing: Sharing, hardware: Hardware):
    return gke_mechanism(sharing, hardware)


def own_sharing_change() -> str:
    return "a sharing change (mode, replicas, migProfile) REPLACES this node pool: GKE's guestAccelerators cannot change in place"

IMAGE_BRINGS_DRIVER = False
IMAGE_BRINGS_TOOLKIT = False
# GKE admits system-*-critical pods outside kube-system only in namespaces with a quota scoped to those classes
# (NVIDIA/cloud-native-docs gpu-operator/manifests/input/google-gke-gpu-operator-quota.yaml).
CRITICAL_PODS_NEED_QUOTA = True
OWNS_WEBHOOK_NAMESPACE_SELECTOR = False
EXAMPLE_ZONE = "us-central1-a"


def image_device_plugin(os: str | None) -> bool:
    return False


def fabric_resource_count(fabric) -> int:
    """GPUDirect NICs reach pods through multi-networking annotations, not a device plugin resource."""
    return 1 if FABRIC_RESOURCE else 0


def fabric_zone_of_cluster(pool, cluster) -> str | None:
    """A zonal cluster's zone, or the only zone of a regional cluster's region that offers the pool's GPU."""
    if cluster is None or not cluster.location:
        return None
    if cluster.location.count("-") >= 2:
        return cluster.location
    instance = load_catalog().instance("gcp", pool.instance_type)
    offered = load_catalog().gcp_zones_in(instance.accelerator, cluster.location) if instance and instance.accelerator else None
    return offered[0] if offered and len(offered) == 1 else None


NEW_NETWORK_MAX_ZONES = None


def example_zone(cluster, providers: dict) -> str | None:
    """A zone of the stack's own region, for messages that ask for one."""
    return f"{zone_region(cluster.location)}-a" if cluster is not None and cluster.location else None


def mock_region(config: dict) -> str | None:
    return config.get("gcp:region")


def mock_cluster_facts(config: dict) -> dict:
    """What an existing cluster reads as in an offline plan beyond a default Standard cluster: Autopilot on, where the stack
    says it runs Autopilot (a deploy reads the real cluster, and stops if it does not)."""
    cluster = config.get("gpupools:cluster")
    return {"enableAutopilot": True} if isinstance(cluster, dict) and cluster.get("mode") == AUTOPILOT else {}


# --------------------------------------------------------------------------------------------------------------------
# Day two: maintenance window and exclusions, node pool upgrade strategy (docs/upgrades.md)
#
# On a release channel GKE upgrades the control plane and the nodes by itself, and node auto-upgrade cannot be turned
# off ("Node auto-upgrade defaults to true and cannot be disabled", container v1 discovery document, ReleaseChannel); what
# holds it back is the maintenance window and maintenance exclusions (the GKE container.v1 API, MaintenanceWindow).

UPGRADES_RESOURCE_LABEL = "gpupools-upgrades"
# "You must allow at least 48 hours of maintenance availability in a 32-day rolling window. Only contiguous availability
# windows of at least four hours are considered." (cloud.google.com/kubernetes-engine/docs/how-to/maintenance-windows-and-
# exclusions, "Considerations when configuring a maintenance window").
WINDOW_MIN_HOURS = 4
WINDOW_HOURS_PER_32_DAYS = 48
# A cluster holds at most 20 exclusions (pulumi_gcp ClusterMaintenancePolicyArgs.maintenance_exclusions), which
# `Upgrades.exclusions` bounds; a "no upgrades" exclusion lasts at most 30 days, the others up to the end of the cluster
# version's support (cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions, "Scope of
# upgrades").
NO_UPGRADES_MAX_DAYS = 30
SCOPES = {"no-upgrades": "NO_UPGRADES", "no-minor-upgrades": "NO_MINOR_UPGRADES", "no-minor-or-node-upgrades": "NO_MINOR_OR_NODE_UPGRADES"}
RRULE_DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# A Monday: the recurring window's first occurrence sets only its time of day and length (the RRULE repeats it).
WINDOW_ANCHOR = date(2026, 1, 5)
# Autoscaled blue-green upgrades cordon the old nodes, let new work start on new ones, and drain the old ones after
# waitForDrainDuration: "Defaults to 3 days. The value can be set between 0 and 7 days, inclusive" (discovery document,
# AutoscaledRolloutPolicy). GKE calls the strategy Preview.
BLUE_GREEN_MAX_WAIT_MINUTES = 7 * 24 * 60


def compact_upgrades(pool: Pool, policy: PoolUpgrade) -> bool:
    """The pool's node pool gets placementPolicy COMPACT (a fabric pool where GKE takes it, `fabric_node_pool_args`), and
    with it no blue-green upgrade: "Compact placement is not supported with blue-green upgrades" (GoogleCloudPlatform/
    cluster-toolkit v1.95.0 modules/compute/gke-node-pool/main.tf lines 387-390, a precondition on the node pool, added
    with the module's other compact placement validations in commit 862e19b8). A blue-green upgrade makes a second set
    of nodes beside the first, which one compact placement policy's group would have to hold as well."""
    return policy.fabric and compact_placement(pool)[0]


def _blue_green(pool: Pool, policy: PoolUpgrade) -> bool:
    """Training node pools with room to grow: not bound to a reservation, not flex-start or queued, their surge not
    overridden, and not in compact placement (`compact_upgrades`). A ComputeClass's node pools take the cluster's
    setting instead (`compute_class_upgrade_settings`)."""
    chosen = upgrade_options(pool)
    return (policy.training and policy.spare_reserved is None and not policy.short_lived and chosen.max_surge is None
            and chosen.max_unavailable is None and not compact_upgrades(pool, policy) and not uses_compute_class(pool))


# A ComputeClass says nothing of how its node pools are upgraded: "The following settings aren't supported by
# ComputeClasses: Surge upgrades or blue-green upgrades", and a setting the class does not give comes from the cluster's
# node auto-provisioning defaults ("Cluster-level node auto-provisioning default", the order of preference; GKE "About
# node pool auto-creation", docs.cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning). So one
# setting serves every class's node pools: the cluster's autoProvisioningDefaults.upgradeSettings (pulumi-gcp 10.2.0
# ClusterClusterAutoscalingAutoProvisioningDefaultsUpgradeSettingsArgs: strategy SURGE or BLUE_GREEN, max_surge and
# max_unavailable "Default is 0"; its blue-green takes only the standard rollout policy, not the autoscaled one).
# gpupools sets SURGE one node at a time with no surge: a pace every class can keep, since a surge node of a
# reservation priority needs reserved capacity the reservation may not hold (GKE node-upgrades-quota), and a standard
# blue-green brings up a second set of GPU nodes and drains the old ones on its own schedule, running jobs or not.
COMPUTE_CLASS_UPGRADES = {"strategy": "SURGE", "max_surge": 0, "max_unavailable": 1}


def compute_class_upgrade_settings() -> dict:
    """The cluster's autoProvisioningDefaults.upgradeSettings, which every ComputeClass's node pools take."""
    return dict(COMPUTE_CLASS_UPGRADES)


def _settings_text(settings: dict) -> str:
    """An upgradeSettings block (the provider's snake_case keys) in the plan's words."""
    if settings.get("strategy") == "BLUE_GREEN":
        return ("standard blue-green: a second set of nodes comes up beside the old ones, which are drained in batches "
                "whether jobs run on them or not")
    surge, unavailable = settings.get("max_surge") or 0, settings.get("max_unavailable") or 0
    pace = (f"surges {surge} new node{'s' if surge != 1 else ''} before draining {unavailable or 'one'} old" if surge
            else f"drains {unavailable} node{'s' if unavailable != 1 else ''} at a time, no surge")
    return f"surge strategy: {pace}; GKE respects PodDisruptionBudgets for up to an hour while draining a node, then evicts"


def upgrade_settings(pool: Pool, fabric: bool = False) -> dict | None:
    """The node pool's upgradeSettings; None for flex-start and queued pools, which GKE upgrades with short-lived upgrades
    ("For nodes that use Flex-start VMs, GKE uses short-lived upgrades", GKE node-pool-upgrade-strategies). `fabric`:
    the pool gets GPUDirect networks, and compact placement where GKE takes it, which rules blue-green out."""
    policy = pool_upgrade(pool, fabric)
    if policy.short_lived:
        return None
    if _blue_green(pool, policy):
        wait = min(policy.wait_minutes, BLUE_GREEN_MAX_WAIT_MINUTES)
        return {"strategy": "BLUE_GREEN", "blue_green_settings": {"autoscaled_rollout_policy": {"wait_for_drain_duration": f"{wait * 60}s"}}}
    # Surge into a reservation needs spare reserved nodes: "All nodes that GKE creates, including nodes used for upgrades,
    # are subject to ... reservation capacity" (GKE node-upgrades-quota); pool_upgrade never surges past them.
    return {"strategy": "SURGE", "max_surge": policy.max_surge, "max_unavailable": policy.max_unavailable}


def _day(text: str, offset: int = 0) -> str:
    return (date.fromisoformat(text) + timedelta(days=offset)).isoformat() + "T00:00:00Z"


def maintenance_policy(upgrades, window: Window) -> dict:
    """The cluster's recurring window (UTC, as GKE reports it back: another zone would show as a permanent diff) and its
    exclusions, each from its first day's midnight to the midnight after its last day."""
    first = WINDOW_ANCHOR + timedelta(days=window.days[0])
    start = datetime(first.year, first.month, first.day, window.start // 60, window.start % 60)
    end = start + timedelta(hours=window.hours)
    recurrence = "FREQ=DAILY" if window.daily else "FREQ=WEEKLY;BYDAY=" + ",".join(RRULE_DAYS[d] for d in window.days)
    policy: dict = {"recurring_window": {"start_time": start.strftime("%Y-%m-%dT%H:%M:%SZ"), "end_time": end.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                         "recurrence": recurrence}}
    if upgrades.exclusions:
        policy["maintenance_exclusions"] = [{"exclusion_name": ex.name, "start_time": _day(ex.start), "end_time": _day(ex.end, 1),
                                             "exclusion_options": {"scope": SCOPES[ex.scope]}} for ex in upgrades.exclusions]
    return policy


def pool_upgrade_problems(pool: Pool, policy: PoolUpgrade, path: str, autoscaler: str) -> list[Problem]:
    chosen = upgrade_options(pool)
    if uses_compute_class(pool):
        given = [(alias, value) for alias, value in (("maxSurge", chosen.max_surge), ("maxUnavailable", chosen.max_unavailable)) if value is not None]
        return [Problem(f"{path}.{alias}", f"{value}, but GKE takes no upgrade settings per ComputeClass: every class's node pools take the "
                                           f"cluster's node auto-provisioning default ({_settings_text(compute_class_upgrade_settings()).split(';')[0]}); "
                                           f"drop {alias}, or make the pool a node-pool")
                for alias, value in given]
    if _blue_green(pool, policy) and policy.wait_minutes > BLUE_GREEN_MAX_WAIT_MINUTES and chosen.wait_for_jobs is not None:
        return [Problem(f"{path}.waitForJobs", f"{chosen.wait_for_jobs}: a GKE blue-green upgrade waits at most 7 days (168h) before draining")]
    return []


def maintenance_problems(cluster: Cluster, upgrades, window: Window, autoscaler: str) -> list[Problem]:
    problems = []
    if window.hours < WINDOW_MIN_HOURS:
        problems.append(Problem("upgrades.window.hours", f"{window.hours}: GKE counts only windows of at least {WINDOW_MIN_HOURS} hours"))
    elif window.min_hours_in(32) < WINDOW_HOURS_PER_32_DAYS:
        problems.append(Problem("upgrades.window", f"{window.text} opens {window.min_hours_in(32)} hours in the least open 32 days; GKE needs "
                                                   f"at least {WINDOW_HOURS_PER_32_DAYS} (more days, or more hours)"))
    release = KUBERNETES_RELEASES.get(cluster.kubernetes_version or "")
    for j, ex in enumerate(upgrades.exclusions):
        days = exclusion_days(ex.start, ex.end)
        if ex.scope == "no-upgrades" and days > NO_UPGRADES_MAX_DAYS:
            problems.append(Problem(f"upgrades.exclusions[{j}].end", f"{days} days; a GKE no-upgrades exclusion lasts at most {NO_UPGRADES_MAX_DAYS} "
                                                                     f"days (no-minor-or-node-upgrades lasts up to the version's end of support)"))
        elif release is not None and date.fromisoformat(ex.end) > release.end_of_standard:
            problems.append(Problem(f"upgrades.exclusions[{j}].end", f"{ex.end} is past the end of GKE's standard support for {release.minor} "
                                                                     f"({release.end_of_standard}), where an exclusion ends"))
    return problems


def upgrade_lines(pool: Pool, policy: PoolUpgrade, window: Window, cluster: Cluster, autoscaler: str) -> list[str]:
    when = (f"GKE auto-upgrades nodes ({cluster.release_channel or DEFAULT_RELEASE_CHANNEL} channel; it cannot be turned off) only {window.text}"
            if cluster.create else "GKE auto-upgrades nodes in the existing cluster's own maintenance window (not changed by gpupools)")
    lines = [f"{policy.kind}: {when}, never during its maintenance exclusions"]
    if uses_compute_class(pool):
        return lines + compute_class_upgrade_lines(pool, cluster)
    if policy.short_lived:
        lines.append("flex-start/queued: GKE's short-lived upgrades: running nodes keep their version until their run ends, new nodes start "
                     "on the new one; no node is drained for an upgrade")
    elif _blue_green(pool, policy):
        wait = min(policy.wait_minutes, BLUE_GREEN_MAX_WAIT_MINUTES)
        lines.append(f"autoscaled blue-green (GKE Preview): the old nodes are cordoned and new Jobs start on new nodes; an old node is drained "
                     f"once empty or after {wait_text(wait)} (waitForDrainDuration)")
    else:
        # GKE's node-pool-upgrade-strategies page: a surge upgrade respects PodDisruptionBudgets for up to 60 minutes per
        # node, then drains it anyway; a long run is held back by an exclusion, not by its budget.
        lines.append(f"surge strategy: {policy.surge_text}; GKE respects PodDisruptionBudgets for up to an hour while draining a node, then evicts"
                     + (" (no blue-green: GKE takes none beside compact placement)" if compact_upgrades(pool, policy) else ""))
    if policy.spare_reserved is not None:
        lines.append(f"reserved: never surges past the reservation ({policy.spare_reserved} spare reserved node"
                     f"{'s' if policy.spare_reserved != 1 else ''})")
    return lines

def compute_class_upgrade_lines(pool: Pool, cluster: Cluster) -> list[str]:
    """How GKE upgrades a ComputeClass's node pools: the cluster's node auto-provisioning default, which gpupools sets on a
    cluster it creates (`auto_provisioning_args`), and short-lived upgrades for the nodes of a flex-start priority."""
    if cluster.create:
        lines = [(f"ComputeClass node pools: {_settings_text(compute_class_upgrade_settings())} (the cluster's node auto-provisioning "
                  f"default, autoProvisioningDefaults.upgradeSettings: GKE takes no upgrade strategy per class)")]
    else:
        lines = [("ComputeClass node pools: the existing cluster's node auto-provisioning default upgradeSettings (not changed by "
                  "gpupools; GKE takes no upgrade strategy per class)")]
    if capacity.has(pool, capacity.FLEX_START):
        lines.append("flex-start priority: GKE's short-lived upgrades: running nodes keep their version until their run ends, new nodes "
                     "start on the new one")
    return lines


# The fabric is offered wherever the catalog records one (None: no reason to leave it off).
FABRIC_OFFERED: str | None = None
# What the policy pack advises for a pool built for multi-node jobs that has no fabric.
MULTI_NODE_ADVICE = "give it one zone and fabric: on"

# Capacity bought ahead (reservations, Capacity Blocks, DWS) is something a pool can name (docs/capacity.md).
RESERVATIONS = True


def plan_notes(pools: list) -> list[str]:
    """What the plan tells the user to check on the cluster itself: nothing here."""
    return []

# ComputeClass pools: one class lists the pool's capacity in priority order, and GKE's node auto-provisioning creates
# node pools down that list as work asks (custom compute classes, GKE Standard and Autopilot from 1.30.3-gke.1451000:
# docs.cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes). The object's fields are those
# of the ComputeClass schema GKE serves (`cloud.google.com/v1`, tests/reference/gke/computeclass_v1.schema.json).

# The cluster modes GKE offers gpupools: Standard clusters, whose pools may each be a node pool or a ComputeClass, and
# Autopilot clusters, whose GPU nodes are GKE's own (gpupools.clouds.gcp_autopilot).
AUTOPILOT = "autopilot"
CLUSTER_MODES = ("standard", AUTOPILOT)
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
    return compute_class_problems(pool, path, installer, cluster)


def fabric_refusal(pool: Pool, cluster: Cluster | None) -> str | None:
    """GPUDirect needs the pool's extra NICs and networks (NodeNetworkConfig) and compact placement, which gpupools sets
    on node pools; a ComputeClass's auto-created pools get neither from it, and an Autopilot cluster has no node pool of
    gpupools' own."""
    if cluster is not None and cluster.managed_mode == AUTOPILOT:
        return ("GKE Autopilot makes its GPU nodes itself, and gpupools attaches GPUDirect networks to node pools it creates; use "
                "cluster.mode: standard for multi-node training")
    if uses_compute_class(pool):
        return "a compute-class pool gets no GPUDirect networks: gpupools attaches them to node pools only (make the pool a node-pool)"
    return None


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


# Node auto-provisioning bounds what GKE may start in the whole cluster; the API takes it only with cpu and memory
# limits (container v1 ClusterAutoscaling.resourceLimits; pulumi-gcp's docstring: "cpu and memory resource_limits are
# required"). The GPU limits are what bound the ComputeClass pools; cpu and memory are set so they never bind first:
# every node of every pool at the catalog's largest GCE GPU machine, plus the system pool.
NAP_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def auto_provisioning_args(plans: list[PoolPlan], service_account: Any = None) -> dict | None:
    """The cluster's autoscaling block when some pool is a ComputeClass (None otherwise): node auto-provisioning on,
    each accelerator type limited to the GPUs its ComputeClass pools may hold at maxNodes."""
    classed = [p for p in plans if uses_compute_class(p.pool)]
    if not classed:
        return None
    gcp = load_catalog().instances.get(NAME, {}).values()
    vcpus = max(i.vcpus for i in gcp if i.vcpus)
    memory = max(i.memory_gib for i in gcp if i.memory_gib)
    nodes = sum(p.pool.max_nodes for p in plans) + SYSTEM_POOL["max"]
    gpus: dict[str, int] = {}
    for p in classed:
        gpus[p.hardware.accelerator] = gpus.get(p.hardware.accelerator, 0) + p.max_gpus
    limits = [{"resource_type": "cpu", "minimum": 0, "maximum": nodes * vcpus},
              {"resource_type": "memory", "minimum": 0, "maximum": nodes * memory}]
    limits += [{"resource_type": accelerator, "minimum": 0, "maximum": count} for accelerator, count in sorted(gpus.items())]
    defaults = {"oauth_scopes": NAP_SCOPES, "management": {"auto_repair": True, "auto_upgrade": True},
                "shielded_instance_config": {"enable_secure_boot": True, "enable_integrity_monitoring": True},
                "upgrade_settings": compute_class_upgrade_settings()}
    if service_account is not None:
        defaults["service_account"] = service_account
    return {"enabled": True, "resource_limits": limits, "auto_provisioning_defaults": defaults}


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
