"""Gcore: the cluster itself: Kubernetes releases, network, identity, controls, the system pool, the kubeconfig and what
a plan reads of an existing cluster.
"""

from __future__ import annotations



from gpupools.clouds.common import Control, SystemPoolSize, shared_cluster_problems, system_pool_problems, system_pool_size
from gpupools.core.catalog import load_catalog
from gpupools.stack.config import Cluster
from gpupools.stack.errors import Problem
from gpupools.clouds.gcore.pools import BOOT_VOLUME_TYPE, DEFAULT_BOOT_VOLUME_GIB, DEFAULT_PLACEMENT, NAME_PATTERN
from gpupools.clouds.gcore.provider import DEFAULT_KUBERNETES_VERSION, MAX_NODES_PER_POOL, NAME


# The cluster's own CPU pool, for the add-ons gpupools installs (monitoring, Kueue, the GPU Operator's controllers): a
# general-purpose VM flavor of Gcore's g1 family (SPEC's own pool example is g1-standard-1-2).
SYSTEM_POOL = {"name": "system", "flavor_id": "g1-standard-4-8", "min_node_count": 1, "max_node_count": 3}
SYSTEM_DEFAULT = SystemPoolSize(SYSTEM_POOL["flavor_id"], SYSTEM_POOL["min_node_count"], SYSTEM_POOL["max_node_count"])
# A Gcore flavor name: lower-case words joined by '-' (g1-standard-4-8, g2-standard-8-32).
FLAVOR_FORM = r"[a-z][a-z0-9]*(-[a-z0-9]+)+"


# --------------------------------------------------------------------------------------------------------------------
# Checks of the stack file

def cluster_problems(cluster: Cluster) -> list[Problem]:
    problems = shared_cluster_problems(cluster, NAME)
    if not NAME_PATTERN.match(cluster.name):
        problems.append(Problem("cluster.name", f"{cluster.name!r} cannot name a Gcore cluster: use 2-20 lower-case letters, digits and '-', "
                                                f"starting with a letter and ending with a letter or digit"))
    if cluster.create and cluster.keypair is None:
        problems.append(Problem("cluster.keypair", "required on gcore for a new cluster: the name of an SSH keypair of the project "
                                                   "(Gcore creates no cluster without one)"))
    # A Gcore pool holds 1 to 200 nodes (SPEC K8sClusterPoolCreateV2Serializer min_node_count, max_node_count).
    problems += system_pool_problems(cluster, NAME, SYSTEM_DEFAULT, FLAVOR_FORM, "a Gcore flavor such as g1-standard-4-8",
                                     MAX_NODES_PER_POOL, "a Gcore pool", load_catalog())
    if cluster.endpoint_access is not None or cluster.authorized_cidrs is not None:
        # ClusterCreateParams has no field for the API server's reachability (SDK, SPEC K8sClusterCreateV2Serializer).
        key = "cluster.endpointAccess" if cluster.endpoint_access is not None else "cluster.authorizedCidrs"
        problems.append(Problem(key, "not available on gcore: Gcore Managed Kubernetes serves the API server publicly and its API takes no "
                                     "authorized ranges or private endpoint; remove it (authentication stays: OIDC or the cluster's certificates)"))
    return problems


def system_pool_params(cluster: Cluster) -> dict:
    """The system pool's flavor and size from the stack's `cluster.systemPool` (`SYSTEM_DEFAULT` where unset)."""
    size = system_pool_size(cluster, SYSTEM_DEFAULT)
    return {"flavor_id": size.machine_type, "min_node_count": size.min_nodes, "max_node_count": size.max_nodes}


def cluster_params(cluster: Cluster) -> dict:
    """The cluster as `client.cloud.k8s.clusters.create` takes it (SDK ClusterCreateParams), with the CPU pool its add-ons
    run on; `version` is the minor, resolved to Gcore's newest patch of it when the cluster is created. Cilium enforces
    NetworkPolicy (SPEC cni.provider: calico or cilium)."""
    return {
        "name": cluster.name,
        "keypair": cluster.keypair,
        "version": cluster.kubernetes_version or DEFAULT_KUBERNETES_VERSION,
        "cni": {"provider": "cilium"},
        "pools": [{**SYSTEM_POOL, **system_pool_params(cluster), "auto_healing_enabled": True, "is_public_ipv4": False,
                   "servergroup_policy": DEFAULT_PLACEMENT,
                   "boot_volume_type": BOOT_VOLUME_TYPE, "boot_volume_size": DEFAULT_BOOT_VOLUME_GIB,
                   "labels": {"gpupools.io/pool": "system"}}],
    }


# --------------------------------------------------------------------------------------------------------------------
# The cluster's controls

READ_ON_EXISTING = {
    "API endpoint": "public on every Gcore cluster (the service offers no private endpoint or authorized ranges)",
    "network policy (Cilium)": "read by the cluster resource when it runs, which warns if the cluster's CNI is not Cilium",
}


def cluster_controls(cluster: Cluster) -> list[Control]:
    return [
        Control("API endpoint", "public (Gcore offers no private endpoint or authorized ranges)", "-", "-"),
        Control("network policy (Cilium)", "on", "-", "-"),
        Control("node public IPv4", "off", "-", "-"),
    ]


def existing_cluster_findings(name: str, read: dict) -> list[str]:
    """What an existing cluster, as `clusters.get` reads it, lacks of what a new one gets."""
    found = []
    if ((read.get("cni") or {}).get("provider") or "") != "cilium":
        found.append(f"existing Gcore cluster {name!r} does not run Cilium: NetworkPolicy may not be enforced")
    return found
