"""GKE: the cluster itself: Kubernetes releases, network, identity, controls, the system pool, the kubeconfig and what
a plan reads of an existing cluster.
"""

from __future__ import annotations


import hashlib
import json
import re
from typing import Any

from gpupools.core.catalog import load_catalog, zone_region
from gpupools.stack.config import GKE_RELEASE_CHANNELS, Cluster
from gpupools.stack.errors import Problem
from gpupools.core.pools import PoolPlan
from gpupools.upgrades.policy import Window
from gpupools.clouds.common import (Control, SystemPoolSize, endpoint_control, on_off, shared_cluster_problems, system_pool_problems,
                                    system_pool_size, too_open)
from gpupools.clouds.gcp.capacity import uses_compute_class
from gpupools.clouds.gcp.provider import MAX_NODES_PER_POOL_ZONE, NAME
from gpupools.clouds.gcp.upgrades import DEFAULT_RELEASE_CHANNEL, compute_class_upgrade_settings, maintenance_policy


SYSTEM_POOL = {"machine_type": "e2-standard-4", "min": 1, "max": 3}
SYSTEM_DEFAULT = SystemPoolSize(SYSTEM_POOL["machine_type"], SYSTEM_POOL["min"], SYSTEM_POOL["max"])
# A Compute Engine machine type: family, then type and size (e2-standard-4, n2-highmem-8, c3-standard-22-lssd).
MACHINE_TYPE_FORM = r"[a-z][a-z0-9]*(-[a-z0-9]+)+"


def cluster_problems(cluster: Cluster) -> list[Problem]:
    problems = shared_cluster_problems(cluster, NAME)
    if cluster.location is None:
        problems.append(Problem("cluster.location", "required on gcp: the region (e.g. us-central1) or zone (e.g. us-central1-a) of the GKE cluster"))
    if cluster.node_service_account is not None and DEFAULT_COMPUTE_ACCOUNT.fullmatch(cluster.node_service_account):
        problems.append(Problem("cluster.nodeServiceAccount", "is the Compute Engine default service account, which holds the project's Editor "
                                                              "role; name a dedicated account, or leave it out and gpupools creates one"))
    # GKE: at most 1,000 nodes per node pool in each zone (GKE quotas and limits, "Nodes per node pool zone"); the system
    # pool's bounds are total_min/max_node_count, so one zone's limit is the bound that holds wherever the cluster is.
    problems += system_pool_problems(cluster, NAME, SYSTEM_DEFAULT, MACHINE_TYPE_FORM, "a Compute Engine machine type such as e2-standard-4",
                                     MAX_NODES_PER_POOL_ZONE, "a GKE node pool in one zone", load_catalog())
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


def system_node_pool_args(cluster_name, location: str, project: str | None, service_account: Any = None,
                          cluster: Cluster | None = None) -> dict:
    """The CPU pool the cluster's add-ons run on, sized by the stack's `cluster.systemPool` (`SYSTEM_DEFAULT` where unset)."""
    size = system_pool_size(cluster, SYSTEM_DEFAULT) if cluster is not None else SYSTEM_DEFAULT
    args = {
        "name": "system",
        "cluster": cluster_name,
        "location": location,
        "initial_node_count": size.min_nodes,
        "autoscaling": {"total_min_node_count": size.min_nodes, "total_max_node_count": size.max_nodes},
        "management": {"auto_repair": True, "auto_upgrade": True},
        "node_config": {
            "machine_type": size.machine_type,
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


NEW_NETWORK_MAX_ZONES = None


# Node auto-provisioning bounds what GKE may start in the whole cluster; the API takes it only with cpu and memory
# limits (container v1 ClusterAutoscaling.resourceLimits; pulumi-gcp's docstring: "cpu and memory resource_limits are
# required"). The GPU limits are what bound the ComputeClass pools; cpu and memory are set so they never bind first:
# every node of every pool at the catalog's largest GCE GPU machine, plus the system pool.
NAP_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def auto_provisioning_args(plans: list[PoolPlan], service_account: Any = None, cluster: Cluster | None = None) -> dict | None:
    """The cluster's autoscaling block when some pool is a ComputeClass (None otherwise): node auto-provisioning on,
    each accelerator type limited to the GPUs its ComputeClass pools may hold at maxNodes."""
    classed = [p for p in plans if uses_compute_class(p.pool)]
    if not classed:
        return None
    gcp = load_catalog().instances.get(NAME, {}).values()
    vcpus = max(i.vcpus for i in gcp if i.vcpus)
    memory = max(i.memory_gib for i in gcp if i.memory_gib)
    nodes = sum(p.pool.max_nodes for p in plans) + (system_pool_size(cluster, SYSTEM_DEFAULT) if cluster is not None else SYSTEM_DEFAULT).max_nodes
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
