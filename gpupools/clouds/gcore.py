"""Gcore Managed Kubernetes decisions: GPU pools of bare-metal and virtual-machine flavors, Gcore's taint form, its
node-count floor, server-group placement, and who installs what on its GPU images.

Sources, cited below by these names:
- SDK: the `gcore` Python SDK 0.59.0 (Apache-2.0, generated from Gcore's OpenAPI spec): gcore/types/cloud/k8s/
  (ClusterCreateParams, PoolCreateParams, PoolUpdateParams), gcore/resources/cloud/k8s/clusters/pools/pools_custom.py.
- SPEC: Gcore's OpenAPI spec, G-Core/product-documentation @5b666307 api-reference/services_documented/cloud_api.yaml,
  schemas K8sClusterCreateV2Serializer, K8sClusterPoolCreateV2Serializer, K8sClusterPoolUpdateV2Serializer.
- TF2: G-Core/terraform-provider-gcore v2.0.0-alpha.11 (2a75be28) internal/services/cloud_k8s_cluster/resource.go
  (poolNeedsReplace, poolNeedsUpdate, lines 657-716) and schema.go (the flavor validator, ~line 787).
- DOCS: G-Core/product-documentation @5b666307, pages named by path.
"""

from __future__ import annotations

import re
from datetime import date

from gpupools.capacity import sources as capacity
from gpupools.clouds.common import KIND, STANDARD_ONLY, Control, KubernetesRelease, newest, reject_fields, resolve_listed, shared_cluster_problems
from gpupools.clouds.standard import (ADMITS_HOST_AGENTS, BOUNDS_POOL_NODES, MANAGED_GPU_METRICS, REFUSED_QUOTAS,  # noqa: F401
                                      managed_plan, managed_pool_problems, pod_node_selector)  # standard mode's answers
from gpupools.core.catalog import Catalog, Hardware
from gpupools.core.pools import NodeTemplate, PoolPlan
from gpupools.stack.config import Cluster, Pool, Sharing
from gpupools.stack.errors import Problem
from gpupools.stack.targets import ProviderFacts, Setting

NAME = "gcore"  # as `gpupools:cloud` spells it
KIND_WORD = KIND[NAME]  # what a pool's machines are called here, as messages name them
# The provider settings beside `gpupools:`: the SDK's own environment variables (gcore 0.59.0 gcore/_client.py,
# Gcore.__init__). The API key is not a stack setting: the Gcore resources read GCORE_API_KEY when they run, so it
# never enters the stack or its state.
PROVIDER = ProviderFacts(
    namespace="gcore",
    settings={
        "gcore:projectId": Setting(r"^[1-9][0-9]{0,11}$", "a Gcore cloud project ID (a number)", ("GCORE_CLOUD_PROJECT_ID",), required=True),
        "gcore:regionId": Setting(r"^[1-9][0-9]{0,11}$", "a Gcore cloud region ID (a number, such as 76)", ("GCORE_CLOUD_REGION_ID",),
                                  required=True),
    },
    sdk_package="gcore", sdk_name="Gcore's Python SDK", sdk_distribution="gcore")
SERVICE = "Gcore Managed Kubernetes"
PROVIDER_PACKAGE = "gcore"
# The platform component's type for one pool (how `gpupools plan` finds what a pool created).
POOL_COMPONENT = "gpupools:index:GcoreGpuNodePool"

# SPEC: pool and cluster names `^[a-z][a-z0-9\-]{0,18}[a-z0-9]$` (2-20 characters); min_node_count 1-200 at creation,
# max_node_count 1-200; boot_volume_size 10-2000 GiB.
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9\-]{0,18}[a-z0-9]$")
MIN_NODES = 1
MAX_NODES_PER_POOL = 200
BOOT_VOLUME_GIB = (10, 2000)
# DOCS create-a-gpu-kubernetes-cluster.mdx: a pool's boot volume "a minimum of 50 GiB"; High IOPS SSD for I/O-heavy work.
DEFAULT_BOOT_VOLUME_GIB = 50
BOOT_VOLUME_TYPE = "ssd_hiiops"
DEFAULT_PLACEMENT = "soft-anti-affinity"
# The cluster's own CPU pool, for the add-ons gpupools installs (monitoring, Kueue, the GPU Operator's controllers): a
# general-purpose VM flavor of Gcore's g1 family (SPEC's own pool example is g1-standard-1-2).
SYSTEM_POOL = {"name": "system", "flavor_id": "g1-standard-4-8", "min_node_count": 1, "max_node_count": 3}
# Labels Gcore puts on pool nodes itself (TF2 model.go FilterServerManagedLabels: the API returns them among the pool's
# labels); a stack may not set them.
SERVER_LABEL_PREFIX = "gcorecluster.x-k8s.io/"
RESERVED_LABEL_DOMAINS = ("gcorecluster.x-k8s.io",)
RESERVED_NAMESPACES: frozenset[str] = frozenset()
TAINT_STYLE = "map"


def max_nodes(pool: Pool, cluster: Cluster | None, hardware: Hardware | None) -> tuple[int, str]:
    return MAX_NODES_PER_POOL, "per Gcore pool"


def bare_metal(flavor: str) -> bool:
    """TF2 schema.go's flavor validator: flavors starting with `g` or `a` are virtual machines, which need a server-group
    policy and a boot volume; every other flavor is bare metal, which must leave those three unset."""
    return not flavor.startswith(("g", "a"))


# --------------------------------------------------------------------------------------------------------------------
# Kubernetes versions

# DOCS create-a-gpu-kubernetes-cluster.mdx, the `create_versions` answer it shows: v1.33.10, v1.34.6, v1.35.3, v1.36.1
# (the API wants the full version with its `v`; the component asks `k8s.list_versions()` for the newest patch of the
# stack's minor when it creates the cluster). Gcore publishes no end-of-support dates; each minor is held to the
# Kubernetes project's own end of life (kubernetes.io/releases: a minor gets about 14 months of patches).
PATCHES = {"1.33": "v1.33.10", "1.34": "v1.34.6", "1.35": "v1.35.3", "1.36": "v1.36.1"}
KUBERNETES_RELEASES = {r.minor: r for r in (
    KubernetesRelease("1.33", date(2025, 4, 23), date(2026, 6, 28)),
    KubernetesRelease("1.34", date(2025, 8, 27), date(2026, 10, 27)),
    KubernetesRelease("1.35", date(2025, 12, 17), date(2027, 2, 28)),
    KubernetesRelease("1.36", date(2026, 4, 22), date(2027, 6, 28)),
)}
DEFAULT_KUBERNETES_VERSION = newest(KUBERNETES_RELEASES)


def api_version(minor: str | None) -> str:
    """The version string the cluster API takes for a minor (the newest patch the pinned list knows)."""
    return PATCHES[minor or DEFAULT_KUBERNETES_VERSION]


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
    if cluster.endpoint_access is not None or cluster.authorized_cidrs is not None:
        # ClusterCreateParams has no field for the API server's reachability (SDK, SPEC K8sClusterCreateV2Serializer).
        key = "cluster.endpointAccess" if cluster.endpoint_access is not None else "cluster.authorizedCidrs"
        problems.append(Problem(key, "not available on gcore: Gcore Managed Kubernetes serves the API server publicly and its API takes no "
                                     "authorized ranges or private endpoint; remove it (authentication stays: OIDC or the cluster's certificates)"))
    return problems


def pool_problems(pool: Pool, path: str) -> list[Problem]:
    problems = reject_fields(pool, path, NAME, {"gpu": ("gpu", "gcp n1 machine types"), "gpu_count": ("gpuCount", "gcp n1 machine types"),
                                                "os": ("os", "aws"), "provisioning": ("provisioning", "gcp")})
    if not NAME_PATTERN.match(pool.name):
        problems.append(Problem(f"{path}.name", f"{pool.name!r} cannot name a Gcore pool: use 2-20 lower-case letters, digits and '-', "
                                                f"starting with a letter and ending with a letter or digit"))
    if pool.min_nodes < MIN_NODES:
        problems.append(Problem(f"{path}.minNodes", f"{pool.min_nodes}: a Gcore pool keeps at least {MIN_NODES} node (the API's min_node_count "
                                                    f"is {MIN_NODES}-{MAX_NODES_PER_POOL}), so it cannot scale to zero; set minNodes: 1 or more"))
    if pool.spot:
        problems.append(Problem(f"{path}.spot", "not a pool setting on gcore: Gcore sells spot bare metal as flavors of their own "
                                                "(names with -spot-); name such a flavor as instanceType, or drop spot"))
    metal = bare_metal(pool.instance_type)
    if metal and pool.placement is not None:
        problems.append(Problem(f"{path}.placement", f"{pool.instance_type} is a bare-metal flavor, which takes no server-group policy; "
                                                     f"placement applies to virtual-machine flavors (g...) only"))
    if metal and pool.disk_size_gb is not None:
        problems.append(Problem(f"{path}.diskSizeGb", f"{pool.instance_type} is a bare-metal flavor, which boots from its own disks and takes "
                                                      f"no boot volume; remove diskSizeGb"))
    elif pool.disk_size_gb is not None and not BOOT_VOLUME_GIB[0] <= pool.disk_size_gb <= BOOT_VOLUME_GIB[1]:
        problems.append(Problem(f"{path}.diskSizeGb", f"{pool.disk_size_gb}: a Gcore boot volume is {BOOT_VOLUME_GIB[0]}-{BOOT_VOLUME_GIB[1]} GiB"))
    return problems


def pool_sharing_problems(pool: Pool, sharing: Sharing, hw: Hardware | None, path: str) -> list[Problem]:
    return []


def resolve(pool: Pool, catalog: Catalog, path: str) -> tuple[Hardware | None, list[Problem]]:
    return resolve_listed(NAME, pool, catalog, path)


def zone_problems(pool: Pool, path: str, cluster: Cluster | None, providers: dict, hardware: Hardware | None) -> list[Problem]:
    if pool.zones:
        return [Problem(f"{path}.zones", "not available on gcore: a Gcore region has no availability zones a pool could choose; remove zones")]
    return []


def region_problems(providers: dict) -> list[Problem]:
    return []


def capacity_problems(pool: Pool, path: str, autoscaler: str, cluster: Cluster | None, hardware: Hardware | None) -> list[Problem]:
    """A Gcore pool's nodes are its flavor, on demand: no reservations or other kinds a pool could fall back through."""
    if pool.capacity is None:
        return []
    return [Problem(s.path(path), f"{s.kind} is not a capacity kind of Gcore pools; a Gcore pool is on-demand nodes of its flavor "
                                  f"(spot bare metal is a flavor of its own)")
            for s in capacity.sources(pool) if s.kind != capacity.ON_DEMAND]


def capacity_lines(pool: Pool, autoscaler: str) -> list[str]:
    return [f"on-demand: flavor {pool.instance_type}"]


def provisioning_request_class(pool: Pool) -> str | None:
    return None


def capacity_flavor_labels(pool: Pool, autoscaler: str) -> list[tuple[str, dict[str, str]]]:
    return [("", {})]


# --------------------------------------------------------------------------------------------------------------------
# What the pools are created with

def taints(plan: PoolPlan) -> dict[str, str]:
    """Gcore's taint form: a map of key to `value:Effect` (SPEC K8sClusterPoolCreateV2Serializer.taints, example
    {"my-taint": "bar:NoSchedule"}), so one taint per key."""
    out: dict[str, str] = {}
    for taint in plan.taints:
        if taint.key in out:
            raise ValueError(f"two taints with key {taint.key!r}: Gcore's taint map holds one value per key")
        out[taint.key] = f"{taint.value}:{taint.effect}"
    return out


def auto_healing(pool: Pool) -> bool:
    """Unset: on for virtual machines; off for bare metal, as Gcore's GPU guide asks of GPU bare-metal pools (DOCS
    cloud/kubernetes/clusters/autoscaling/configure-gpu-autoscaling-for-kubernetes.mdx, step 1.7: "Disable the
    Autohealing nodes toggle"). The API's own default is off (SPEC: auto_healing_enabled default false)."""
    if pool.auto_repair is not None:
        return pool.auto_repair
    return not bare_metal(pool.instance_type)


def pool_params(plan: PoolPlan) -> dict:
    """The pool as `client.cloud.k8s.clusters.pools.create` takes it (SDK PoolCreateParams)."""
    pool = plan.pool
    params: dict = {
        "name": pool.name,
        "flavor_id": pool.instance_type,
        "min_node_count": pool.min_nodes,
        "max_node_count": pool.max_nodes,
        "labels": dict(plan.labels),
        "taints": taints(plan),
        "auto_healing_enabled": auto_healing(pool),
        "is_public_ipv4": False,
    }
    if not bare_metal(pool.instance_type):
        params.update(servergroup_policy=pool.placement or DEFAULT_PLACEMENT, boot_volume_type=BOOT_VOLUME_TYPE,
                      boot_volume_size=pool.disk_size_gb or DEFAULT_BOOT_VOLUME_GIB)
    return params


def cluster_params(cluster: Cluster) -> dict:
    """The cluster as `client.cloud.k8s.clusters.create` takes it (SDK ClusterCreateParams), with the CPU pool its add-ons
    run on; `version` is the minor, resolved to Gcore's newest patch of it when the cluster is created. Cilium enforces
    NetworkPolicy (SPEC cni.provider: calico or cilium)."""
    return {
        "name": cluster.name,
        "keypair": cluster.keypair,
        "version": cluster.kubernetes_version or DEFAULT_KUBERNETES_VERSION,
        "cni": {"provider": "cilium"},
        "pools": [{**SYSTEM_POOL, "auto_healing_enabled": True, "is_public_ipv4": False, "servergroup_policy": DEFAULT_PLACEMENT,
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


# --------------------------------------------------------------------------------------------------------------------
# GPU software

# DOCS configure-gpu-autoscaling-for-kubernetes.mdx installs the GPU Operator with `driver.enabled=false` and
# `operator.defaultRuntime=crio`: the NVIDIA driver is on Gcore's GPU node image and the runtime is CRI-O. The operator
# still installs its container toolkit there (the guide keeps it on). `operator.defaultRuntime` is not set here: the
# pinned operator detects the runtime from the node (its ClusterPolicy CRD, tests/charts/gpu-operator: "Deprecated:
# DefaultRuntime is no longer used by the gpu-operator. This is instead, detected at runtime.").
AUTO_INSTALLER = "gpu-operator"
OWN_GPU_SOFTWARE = False
OWN_SHARING = False
CLOUD_DRIVER_ON_HOST = False
IMAGE_BRINGS_DRIVER = True
IMAGE_BRINGS_TOOLKIT = False
# The standalone device plugin would need the toolkit the operator brings; Gcore's guide installs the operator. Gcore
# has no GPU software of its own to hand a pool (`cloud`).
REFUSED_INSTALLERS = {
    "device-plugin": "'device-plugin' is not offered on gcore: Gcore's GPU guide installs the GPU Operator, whose container toolkit "
                     "configures CRI-O for the GPUs; use 'gpu-operator' (or auto)",
    "cloud": "'cloud' is not a mechanism of Gcore Managed Kubernetes: its GPU node image brings the driver only, and gpupools installs "
             "the GPU Operator beside it; use 'gpu-operator' (or auto)",
}
CRITICAL_PODS_NEED_QUOTA = False
OWNS_WEBHOOK_NAMESPACE_SELECTOR = False
# Gcore's node-pool pages show NVIDIA's static device plugin DaemonSet on GPU bare-metal nodes (DOCS manage-node-pools.mdx:
# "kubectl get daemonset -n kube-system nvidia-device-plugin-daemonset"; upgrade-a-gpu-kubernetes-cluster.mdx: the user
# updates it from NVIDIA/k8s-device-plugin deployments/static), while its GPU guide installs the GPU Operator, whose own
# device plugin then runs beside it. Two plugins on one node both register nvidia.com/gpu, and only the operator's knows
# gpupools' sharing config. Whether Gcore installs that DaemonSet is not documented consistently, so gpupools neither
# assumes it nor patches it (a patch of an object that is not there fails `pulumi up`): the plan says what to check.
IMAGE_DEVICE_PLUGIN = ("kube-system", "nvidia-device-plugin-daemonset")
CLOUD_DEVICE_PLUGIN = None  # no `cloud` installer here


def image_device_plugin(os: str | None) -> bool:
    return False


def driver_installer(installer: str, os: str | None) -> str | None:
    """Who installs a pool's NVIDIA driver, in the plan's words: Gcore's GPU node image, whatever the installer (the
    operator runs with driver.enabled false, as Gcore's GPU guide installs it)."""
    return "Gcore's GPU node image (the GPU Operator's driver is off)"


def plan_notes(pools: list[Pool]) -> list[str]:
    """What the plan tells the user to check on the cluster itself."""
    metal = [p.name for p in pools if bare_metal(p.instance_type)]
    if not metal:
        return []
    namespace, name = IMAGE_DEVICE_PLUGIN
    return [f"Gcore's pages show its own {namespace}/{name} on GPU bare-metal nodes; if your cluster runs it, it registers nvidia.com/gpu "
            f"beside the GPU Operator's device plugin on {', '.join(metal)}: delete it, or keep it off gpupools' pools (node affinity "
            f"gpupools.io/pool DoesNotExist)"]


# --------------------------------------------------------------------------------------------------------------------
# Autoscaling, readiness, repair

# Gcore runs the cluster autoscaler for every pool between its min and max (DOCS configure-cluster-autoscaling.mdx;
# tuning through the cluster's autoscaler_config).
OWN_AUTOSCALER = True
AUTOSCALER = None
STARTUP_TAINTS = False
READINESS_NOTE = ("GPU pods wait for the device plugin's resource; Gcore's cluster autoscaler takes no startup taint gpupools could "
                  "register, so new nodes start without one")


def node_template(plan: PoolPlan) -> NodeTemplate:
    """A Gcore pool never sits at zero nodes (min_node_count is at least 1), so Gcore's cluster autoscaler builds a new
    node of the pool from a running one: the upstream cluster autoscaler takes a ready node of the node group as its
    template and falls back to the cloud's template only for empty groups (kubernetes/autoscaler cluster-autoscaler/
    processors/nodeinfosprovider/mixed_nodeinfos_processor.go, Process). A running node's allocatable holds what its
    device plugin advertises, so a pending pod's GPU request scales the pool up beyond its floor. Gcore's "autoscaling
    based on CPU and memory only" (DOCS configure-gpu-autoscaling-for-kubernetes.mdx) is about scaling pods by metrics;
    the same guide relies on pending GPU pods to add bare-metal nodes."""
    labels = {**plan.labels, "node.kubernetes.io/instance-type": plan.pool.instance_type}
    return NodeTemplate("Gcore's cluster autoscaler", f"a copy of a running node of pool {plan.name}, which keeps at least {MIN_NODES}", labels,
                        plan.taints, dict(plan.advertised_resources))


def extra_tolerations(plan: PoolPlan) -> list[dict]:
    return []


def repair_facts(plan: PoolPlan, autoscaler: str) -> tuple[str, str]:
    """Gcore's auto-healing drains and replaces a node whose Kubernetes node conditions turn unhealthy (DOCS
    create-a-gpu-kubernetes-cluster.mdx, "Autohealing nodes"); it reads no GPU health of its own."""
    detects = "the GPU alerts (DCGM XID and row-remap faults); Gcore checks node conditions, not GPUs"
    if auto_healing(plan.pool):
        return detects, "Gcore auto-healing drains and replaces a node whose node conditions turn unhealthy"
    return detects, ("nothing: auto-healing is off on this pool (bare metal, as Gcore's GPU guide asks; autoRepair: true turns it on); "
                     "a broken GPU is alerted to the platform team")


# --------------------------------------------------------------------------------------------------------------------
# The fabric: recorded in the catalog, not offered on Managed Kubernetes

FABRIC_NAME = "InfiniBand"
FABRIC_IN_WORDS = "InfiniBand"
FABRIC_RESOURCE: str | None = None
FABRIC_ZONES = "at most one"
TOPOLOGY_LEVELS: tuple[tuple[str, str], ...] = ()
FABRIC_PLACEMENT_GROUP = False
FABRIC_DEVICE_SOFTWARE = "network-operator"
# Why a pool of a flavor with InfiniBand goes without it: Gcore documents InfiniBand for its GPU Cloud clusters
# (DOCS edge-ai/ai-infrastructure/about-gpu-cloud.mdx, manage-a-bare-metal-gpu-cluster.mdx) and says nothing of it for
# Managed Kubernetes pools (edge-ai/managed-kubernetes/*), so gpupools promises no fabric there.
FABRIC_OFFERED = ("Gcore documents InfiniBand for its GPU Cloud clusters, not for Managed Kubernetes pools, so gpupools configures no "
                  "fabric on Gcore")
NEW_NETWORK_MAX_ZONES = None
MULTI_NODE_ADVICE = "run multi-node jobs where the fabric is offered"
EXAMPLE_ZONE = '"-"'


def fabric_refusal(pool: Pool, cluster: Cluster | None) -> str | None:
    return FABRIC_OFFERED


# Managed modes: Gcore offers none; its pools are gpupools' own.
CLUSTER_MODES = STANDARD_ONLY


def fabric_placement(cluster_name: str, pool: Pool) -> tuple[str, str | None, bool]:
    return f"server group of pool {pool.name}", None, False


def fabric_readiness(cluster: Cluster, plan: PoolPlan) -> tuple[bool, tuple[str, ...]]:
    return False, (FABRIC_OFFERED,)


def fabric_pool_problems(pool: Pool, path: str) -> list[Problem]:
    return []


def local_nvme_use(pool: Pool, fabric_on: bool) -> str | None:
    return None


def fabric_pod(count: int, pool: str = "", kind: str = "", networks: int = 0) -> dict:
    return {"limits": {}, "env": {}, "capabilities": []}


def fabric_resource_count(fabric) -> int:
    return 0


def fabric_zone_of_cluster(pool, cluster) -> str | None:
    return None


def example_zone(cluster, providers: dict) -> str | None:
    return None


def mock_region(config: dict) -> str | None:
    return None


# --------------------------------------------------------------------------------------------------------------------
# Which changes the API makes in place, which need a resize, which a new pool or cluster

# TF2 resource.go poolNeedsReplace (lines 657-683): a new flavor, boot volume, public IPv4, server-group policy, CRI-O or
# kubelet config means delete + create; poolNeedsUpdate (lines 697-716): node counts, auto-healing, labels and taints
# change in place (PATCH, SDK PoolUpdateParams). The name is the pool's identity in the API's paths: a new name is a
# new pool. Security groups are in neither list: TF2 schema.go declares the pool's security_group_ids Optional (not
# Computed) and neither function compares it, and TF1 (v0.34.3 gcore/resource_gcore_k8sv2.go, the pool schema) has no
# such field. gpupools sets none, so a pool keeps the groups Gcore or its owner gave it: the API reads them back on
# every pool (SDK K8SClusterPool.security_group_ids), and a diff of them would PATCH them away (PoolUpdateParams:
# an empty list clears them).
POOL_REPLACE = ("name", "flavor_id", "boot_volume_type", "boot_volume_size", "is_public_ipv4", "servergroup_policy", "crio_config",
                "kubelet_config")
POOL_UPDATE = ("min_node_count", "max_node_count", "auto_healing_enabled", "labels", "taints")
POOL_FIELDS = POOL_REPLACE + POOL_UPDATE
# SPEC K8sClusterCreateV2Serializer vs ...UpdateV2Serializer (and TF2 schema.go RequiresReplace): what only a new cluster
# changes; `version` goes through the upgrade call, the rest through the cluster PATCH (SDK ClusterUpdateParams).
# `pools` (the cluster's own CPU pool) is compared pool by pool, as the pool resources are (cluster_pool_changes).
CLUSTER_REPLACE = ("name", "keypair", "fixed_network", "fixed_subnet", "is_ipv6", "pods_ip_pool", "pods_ipv6_pool", "services_ip_pool",
                   "services_ipv6_pool", "csi")
CLUSTER_UPGRADE = ("version",)
CLUSTER_UPDATE = ("add_ons", "authentication", "autoscaler_config", "cni", "ddos_profile", "logging")
# Map fields the API fills in when left out: unset and empty are the same pool (TF2 mapsEqualOrBothEmpty).
EMPTY_AS_UNSET = ("labels", "taints", "crio_config", "kubelet_config")


def _unset(value) -> bool:
    """Unset to Gcore's Terraform provider: TF2 poolNeedsReplace/poolNeedsUpdate compare ValueString(), ValueInt64() and
    ValueBool(), which read an unset attribute as "", 0 and false, and mapsEqualOrBothEmpty takes an empty map for an
    unset one; TF1 (v0.34.3 resource_gcore_k8sv2.go, the pool schema) makes boot_volume_type, boot_volume_size,
    is_public_ipv4 and the maps Optional+Computed, so one left out takes what the API reads. The API reads every pool
    with them all (SDK K8SClusterPool: boot_volume_size int, boot_volume_type str, required): a bare-metal pool, which
    sets no boot volume, reads back 0 and ""."""
    return value is None or value is False or value == 0 or value == "" or value == {} or value == []


def normal_pool(pool: dict) -> dict:
    """A pool in PoolCreateParams form, as the diff compares it: the fields Gcore's Terraform provider compares, the
    unset ones (None, "", 0, false, empty) left out, and the server-managed labels too (TF2 model.go
    FilterServerManagedLabels, TF1 resourceK8sV2FilteredPoolLabels)."""
    out = {}
    for field in POOL_FIELDS:
        value = pool.get(field)
        if field == "labels" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if not k.startswith(SERVER_LABEL_PREFIX)}
        if not _unset(value):
            out[field] = value
    return out


def changed(fields: tuple[str, ...], old: dict, new: dict) -> list[str]:
    return [f for f in fields if old.get(f) != new.get(f)]


def pool_change(old: dict, new: dict) -> tuple[list[str], list[str]]:
    """(fields that replace the pool, fields updated in place) between two pools in PoolCreateParams form."""
    old, new = normal_pool(old), normal_pool(new)
    return changed(POOL_REPLACE, old, new), changed(POOL_UPDATE, old, new)


def unset_value(field: str):
    """What the PATCH sends for a field the new pool leaves unset while the old one had it: an empty map clears a map
    (a map left out of the PATCH means "unchanged"), false turns auto-healing off (the API's default, SPEC
    auto_healing_enabled default false); None for a field the PATCH should not send."""
    if field in EMPTY_AS_UNSET:
        return {}
    if field == "auto_healing_enabled":
        return False
    return None


def resize_target(node_count: int, minimum: int, maximum: int) -> int | None:
    """The node count a pool must be resized to after its bounds changed, or None while its running count is inside them
    (the autoscaler owns the count; the resize call sets it, PoolUpdateParams.node_count being deprecated for it)."""
    if node_count < minimum:
        return minimum
    if node_count > maximum:
        return maximum
    return None


def cluster_change(old: dict, new: dict) -> tuple[list[str], list[str], list[str]]:
    """(fields that replace the cluster, fields the upgrade call changes, fields the cluster PATCH changes)."""
    return changed(CLUSTER_REPLACE, old, new), changed(CLUSTER_UPGRADE, old, new), changed(CLUSTER_UPDATE, old, new)


def cluster_pool_changes(old: list[dict] | None, new: list[dict] | None) -> dict[str, list[str]]:
    """What changes the cluster's own pools (`pools` of ClusterCreateParams, gpupools' CPU pool), by pool name: `create`
    (a name new to the list), `replace` and `update` (pool_change, Gcore's Terraform split), `delete` (a name gone).
    TF2 resource.go Update, "Handle pool changes", applies them in this order: new pools first, then replacements
    and updates, deletions last, so the cluster never runs out of pools."""
    olds = {p["name"]: p for p in old or []}
    news = {p["name"]: p for p in new or []}
    out: dict[str, list[str]] = {"create": [], "replace": [], "update": [], "delete": []}
    for name, pool in news.items():
        if name not in olds:
            out["create"].append(name)
            continue
        replaces, updates = pool_change(olds[name], pool)
        if replaces:
            out["replace"].append(name)
        elif updates:
            out["update"].append(name)
    out["delete"] = [name for name in olds if name not in news]
    return out


def upgrade_problem(old: str, new: str) -> str | None:
    """Gcore upgrades a cluster one minor at a time and never down (DOCS edge-ai/managed-kubernetes/
    upgrade-a-gpu-kubernetes-cluster.mdx): why a version change cannot be made, or None."""
    (o_major, o_minor), (n_major, n_minor) = (tuple(int(x) for x in v.lstrip("v").split(".")[:2]) for v in (old, new))
    if (n_major, n_minor) < (o_major, o_minor):
        return f"Gcore does not downgrade a cluster ({old} to {new})"
    if n_major != o_major or n_minor > o_minor + 1:
        return f"Gcore upgrades a cluster one minor version at a time; go from {old} to {o_major}.{o_minor + 1} first"
    return None


# A Gcore pool takes no reservation or other capacity ahead of time (PoolCreateParams has no such field).
RESERVATIONS = False


def quota_problems(exceeded: dict) -> list[str]:
    """What `pools.check_quota` says a new pool would exceed: the API returns only the exceeded quotas, each as
    `<quota>_limit`, `_usage` and `_requested` (SDK K8SClusterPoolQuota: "Empty response means no quotas exceeded")."""
    out = []
    for key in sorted(k for k in exceeded if k.endswith("_limit")):
        quota = key.removesuffix("_limit")
        out.append(f"{quota}: {exceeded.get(quota + '_requested')} requested, {exceeded.get(quota + '_usage')} in use, "
                   f"limit {exceeded[key]}")
    return out


# --------------------------------------------------------------------------------------------------------------------
# How gpupools calls Gcore's API, and what the user reads when a call fails

# Every call is bounded: the SDK's own client options (gcore 0.59.0 gcore/_client.py Gcore.__init__: `timeout`,
# `max_retries`; its default is 120 s per attempt, DEFAULT_TIMEOUT in _constants.py). The SDK retries a timeout, a
# failed connection and an answer of 408, 409, 429 or 5xx (_base_client.py `_should_retry`), waiting 0.5 s doubled per
# retry up to 8 s, or what the API's Retry-After asks up to 60 s (`_calculate_retry_timeout`). Gcore's Terraform
# provider raises its SDK's retries from 2 to 4 (TF2 internal/provider.go Configure: "The max delay is capped at 8
# secs, so the maximum value for max retries is 4"); gpupools does the same. An API that never answers fails a call
# after 5 attempts of API_TIMEOUT_SECONDS each and the backoff between them, about 2.6 minutes (the SDK alone: 3 of
# 120 s, about 6).
API_TIMEOUT_SECONDS = 30.0
API_CONNECT_TIMEOUT_SECONDS = 10.0
API_RETRIES = 4
# How much of the API's own text an error line keeps.
SERVER_TEXT_CHARS = 300
# ANSI escape sequences (ECMA-48: CSI and OSC, 7- and 8-bit, and the other ESC sequences), then every other control or format
# character (C0, DEL, C1, bidirectional and zero-width marks): a server's text may move the cursor, clear the screen or
# reorder what the terminal shows.
_ANSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[ -/]*[0-~]|\x1b")
_CONTROL_CHAR = "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]"
_CONTROL = re.compile(_CONTROL_CHAR + "+")
# What a server may put between a key's characters (whitespace, control characters) without hiding it.
_GAP = r"(?:\s|" + _CONTROL_CHAR + ")*"
# Gcore's scheme is `Authorization: APIKey <key>` (SDK _client.py auth_headers); a server echoing a header shows it so.
_AUTH_ECHO = re.compile(r"(?i)\b(apikey|bearer)(\s+)(?!\[redacted\])[^\s\"',;}\]]+")
REDACTED = "[redacted]"


def secret_forms(key: str | None) -> list[str]:
    """The forms an API key may come back in: as sent, URL-encoded, JSON-escaped, and a permanent token's secret part
    alone (Gcore's tokens read `<id>$<secret>`, DOCS account-settings/api-tokens.mdx, or `<id>_<secret>` from the V2
    endpoint, DOCS api-reference/iam/api-tokens/create-api-token-1.mdx). Longest first, so a form inside another is
    replaced after it."""
    from urllib.parse import quote, quote_plus

    if not key:
        return []
    forms = {key, quote(key, safe=""), quote_plus(key), key.replace("/", "\\/")}
    token = re.match(r"^[0-9]+[$_](.{8,})$", key)
    if token:
        forms.add(token.group(1))
    return sorted(forms, key=len, reverse=True)


def clean_text(text: str, secrets: list[str], limit: int = SERVER_TEXT_CHARS) -> str:
    """Text from Gcore's API as one bounded line: escape sequences out, the key (in any of `secrets`, also with
    whitespace or control characters put between its characters) and any `APIKey <value>` replaced, the other control
    characters out and whitespace collapsed, then cut to `limit` characters. The order matters: the key is looked for
    before what could split it becomes a space, and it is gone before the cut."""
    text = _ANSI.sub("", text)
    for secret in secrets:
        text = re.sub(_GAP.join(re.escape(c) for c in secret), REDACTED, text)
    text = " ".join(_CONTROL.sub(" ", text).split())
    text = _AUTH_ECHO.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    if len(text) > limit:
        text = text[:limit - 1].rstrip() + "…"
    return text


def error_text(body) -> str:
    """What an error answer says, as text: Gcore's errors are JSON with `exception_class`, `message` and `request_id`
    (DOCS developer-tools/rest-api/error-handling.mdx), kept in that order; any other body as it came."""
    import json

    if isinstance(body, dict) and isinstance(body.get("message"), str):
        head = f"{body['exception_class']}: " if isinstance(body.get("exception_class"), str) else ""
        tail = f" (request {body['request_id']})" if isinstance(body.get("request_id"), str) else ""
        return f"{head}{body['message']}{tail}"
    if isinstance(body, (dict, list)):
        return json.dumps(body, separators=(",", ":"))[:100_000]
    return "" if body is None else str(body)


def retried(status: int, should_retry: str | None = None) -> bool:
    """Whether the SDK retries an answer of this status (gcore 0.59.0 _base_client.py `_should_retry`: the API's
    x-should-retry header first, then 408, 409, 429 and 5xx)."""
    if should_retry in ("true", "false"):
        return should_retry == "true"
    return status in (408, 409, 429) or status >= 500


def api_error_line(operation: str, call: str, secrets: list[str], *, status: int | None = None, text: str = "",
                   location: str | None = None, attempts: int = 1, timeout: float | None = None) -> str:
    """One line for a call to Gcore's API that failed: what gpupools was doing, the call (method and path), the HTTP
    status or why there was none, and the API's own text, bounded and cleaned (clean_text)."""
    call = clean_text(call, secrets, 200)
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    said = clean_text(text, secrets)
    said = f": {said}" if said else ""
    if status is None and timeout is not None:
        return f"{operation}: Gcore's API did not answer {call} within {timeout:g} s{tries}"
    if status is None:
        return f"{operation}: could not reach Gcore's API for {call}{tries}{said}"
    if 300 <= status < 400 and location:
        return (f"{operation}: Gcore's API answered {call} with HTTP {status}, a redirect to {clean_text(location, secrets, 200)}, which "
                f"gpupools does not follow (the API key would go with it); check GCORE_BASE_URL")
    hint = "; check GCORE_API_KEY" if status in (401, 403) else "; check GCORE_BASE_URL" if status < 400 else ""
    return f"{operation}: Gcore's API answered {call} with HTTP {status}{tries}{said}{hint}"


# --------------------------------------------------------------------------------------------------------------------
# Day two: Gcore upgrades a cluster's pools with the cluster, when its version changes

# ClusterUpgradeParams takes the version only, and PoolUpdateParams no surge, drain or schedule (SDK; SPEC
# K8sClusterPoolUpdateV2Serializer): Gcore upgrades when the user asks (the version in the stack, one minor at a time) and
# publishes no maintenance window, exclusions or per-pool upgrade strategy a stack could set.
UPGRADE_KEYS = (("max_unavailable", "maxUnavailable"), ("max_surge", "maxSurge"), ("wait_for_jobs", "waitForJobs"))


def pool_upgrade_problems(pool: Pool, policy, path: str, autoscaler: str) -> list[Problem]:
    from gpupools.upgrades.policy import options

    chosen = options(pool)
    return [Problem(f"{path}.{alias}", "not available on gcore: Gcore's API takes no surge, drain or wait settings for a pool's upgrade "
                                       "(it upgrades the pools with the cluster); keep only the kind")
            for attr, alias in UPGRADE_KEYS if getattr(chosen, attr) is not None]


def maintenance_problems(cluster: Cluster, upgrades, window, autoscaler: str) -> list[Problem]:
    if upgrades.exclusions:
        return [Problem("upgrades.exclusions", "not available on gcore: Gcore upgrades a cluster only when its version changes "
                                               "(cluster.kubernetesVersion), so there is nothing to exclude; remove exclusions")]
    return []


def upgrade_lines(pool: Pool, policy, window, cluster: Cluster, autoscaler: str) -> list[str]:
    return [f"{policy.kind}: Gcore upgrades the pool with the cluster, only when cluster.kubernetesVersion changes (one minor at a "
            f"time, by `pulumi up`); the stack's maintenance window does not apply, so schedule that change yourself"]
