"""Gcore: the API beside `gpupools:` (project, region), the service's names, limits and Kubernetes releases, and what a
plan's mocks answer.
"""

from __future__ import annotations


from datetime import date

from gpupools.clouds.common import KIND, STANDARD_ONLY, KubernetesRelease, newest
from gpupools.core.catalog import Hardware
from gpupools.stack.config import Cluster, Pool
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
MIN_NODES = 1
MAX_NODES_PER_POOL = 200
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


def region_problems(providers: dict) -> list[Problem]:
    return []


# Managed modes: Gcore offers none; its pools are gpupools' own.
CLUSTER_MODES = STANDARD_ONLY


def example_zone(cluster, providers: dict) -> str | None:
    return None


def mock_region(config: dict) -> str | None:
    return None
