"""GKE: the Pulumi provider beside `gpupools:` (project, region, environment), the service's names and limits, and
what a plan's mocks answer for the region and an existing cluster.
"""

from __future__ import annotations


from datetime import date

from gpupools.core.catalog import Hardware, load_catalog, zone_region
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.stack.targets import ProviderFacts, Setting
from gpupools.capacity import sources as capacity
from gpupools.clouds.common import KIND, KubernetesRelease


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


def region_problems(providers: dict) -> list[Problem]:
    return []


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


# Namespaces and node-label domains GKE owns; a team may not claim them. Namespaces: Managed Service for Prometheus
# (gmp-system, gmp-public), GKE's own managed components (gke-managed-system and the other gke-managed-*),
# Config Sync (config-management-system). Labels: GKE sets cloud.google.com/* on every node (gke-nodepool,
# gke-accelerator, gke-spot, ...), and a pool label under that domain would contradict what GKE sets.
RESERVED_NAMESPACES = frozenset({"gmp-system", "gmp-public", "gke-managed-system", "config-management-system"})
RESERVED_NAMESPACE_PREFIXES = ("gke-managed-",)
RESERVED_LABEL_DOMAINS = ("cloud.google.com",)
EXAMPLE_ZONE = "us-central1-a"


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

# ComputeClass pools: one class lists the pool's capacity in priority order, and GKE's node auto-provisioning creates
# node pools down that list as work asks (custom compute classes, GKE Standard and Autopilot from 1.30.3-gke.1451000:
# docs.cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes). The object's fields are those
# of the ComputeClass schema GKE serves (`cloud.google.com/v1`, tests/reference/gke/computeclass_v1.schema.json).

# The cluster modes GKE offers gpupools: Standard clusters, whose pools may each be a node pool or a ComputeClass, and
# Autopilot clusters, whose GPU nodes are GKE's own (gpupools.clouds.gcp.autopilot).
AUTOPILOT = "autopilot"
CLUSTER_MODES = ("standard", AUTOPILOT)
