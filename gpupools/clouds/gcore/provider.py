"""Gcore: the API beside `gpupools:` (project, region), the service's names, limits and Kubernetes releases, and what a
plan's mocks answer.
"""

from __future__ import annotations


import difflib
import re
from datetime import date

from gpupools.clouds.common import KIND, STANDARD_ONLY, KubernetesRelease, newest
from gpupools.core.catalog import Hardware
from gpupools.core.facts import GcoreRegion, GcoreRegions, load_facts
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.stack.targets import ProviderFacts, Setting


NAME = "gcore"  # as `gpupools:cloud` spells it
KIND_WORD = KIND[NAME]  # what a pool's machines are called here, as messages name them
# The provider settings beside `gpupools:`: the SDK's own environment variables (gcore 0.59.0 gcore/_client.py,
# Gcore.__init__). The API key is not a stack setting: the Gcore resources read GCORE_API_KEY when they run, so it
# never enters the stack or its state.
ID_PATTERN = r"^[1-9][0-9]{0,11}$"  # a positive integer: the SDK's `cloud_region_id: int`, the API's path parameter
REGION_KEY = "gcore:regionId"
PROVIDER = ProviderFacts(
    namespace="gcore",
    settings={
        # The program reads both from the environment too (gpupools.deploy.gcore.location), as integers.
        "gcore:projectId": Setting(ID_PATTERN, "a Gcore cloud project ID (a number)", ("GCORE_CLOUD_PROJECT_ID",), required=True,
                                   env_checked=True),
        REGION_KEY: Setting(ID_PATTERN, "a Gcore cloud region ID (a number, such as 76)", ("GCORE_CLOUD_REGION_ID",),
                            required=True, env_checked=True),
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


# --------------------------------------------------------------------------------------------------------------------
# Regions: only Gcore's authenticated API lists them (GET /cloud/v1/regions, gcore 0.59.0 client.cloud.regions.list;
# its pages show region IDs only as examples, such as 76), so gpupools ships no list. `tools/refresh_cloud_facts.py gcore`
# writes facts_gcore.yaml from the API; where it exists the plan checks the region against it, and `pulumi up` always
# checks it against the API's own list before it creates anything (gpupools.deploy.gcore.check_region).

# Region states in which a region is gone or going (the SDK's Region.state values DELETED, DELETING, DELETION_FAILED);
# INACTIVE, MAINTENANCE and NEW may pass, and the API decides.
GONE_STATES = frozenset({"DELETED", "DELETING", "DELETION_FAILED"})
SUGGESTED = 3  # closest region IDs a refusal names
LISTED = 8  # regions with Managed Kubernetes a refusal lists at most


def _named(region: GcoreRegion) -> str:
    return f"{region.id} ({region.name})"


def closest_regions(region_id: int, regions: list[GcoreRegion]) -> list[GcoreRegion]:
    """The regions whose IDs read most like `region_id` (a typo: 767 for 76), then the numerically nearest."""
    by_text = difflib.get_close_matches(str(region_id), [str(r.id) for r in regions], n=SUGGESTED, cutoff=0.6)
    first = [r for text in by_text for r in regions if str(r.id) == text]
    nearest = sorted((r for r in regions if r not in first), key=lambda r: (abs(r.id - region_id), r.id))
    return (first + nearest)[:SUGGESTED]


def region_refusal(region_id: int, listing: GcoreRegions) -> str | None:
    """Why a region ID cannot hold a Managed Kubernetes cluster by a listing of Gcore's regions, in one line's words; None
    when the listing has it with Managed Kubernetes (`has_k8s`), or does not say."""
    usable = sorted((r for r in listing.regions.values() if r.kubernetes is not False and r.state not in GONE_STATES), key=lambda r: r.id)
    region = listing.regions.get(region_id)
    if region is None:
        why = f"{region_id} is not a Gcore region ID"
    elif region.state in GONE_STATES:
        why = f"region {_named(region)} is {region.state.lower().replace('_', ' ')}"
    elif region.kubernetes is False:
        why = f"region {_named(region)} offers no Managed Kubernetes"
    else:
        return None
    if not usable:
        return f"{why} ({listing.source}), and it names no region with Managed Kubernetes"
    close = closest_regions(region_id, usable)
    rest = [r for r in usable if r not in close]
    more = f" and {len(rest) - LISTED} more" if len(rest) > LISTED else ""
    also = f"; other regions with Managed Kubernetes: {', '.join(_named(r) for r in rest[:LISTED])}{more}" if rest else ""
    return f"{why} ({listing.source}); closest with Managed Kubernetes: {', '.join(_named(r) for r in close)}{also}"


def region_problems(providers: dict) -> list[Problem]:
    """`gcore:regionId` against facts_gcore.yaml, where one is installed (its shape is the setting's own check)."""
    value = providers.get(REGION_KEY)
    listing = load_facts().gcore_regions
    if listing is None or not isinstance(value, str) or not re.fullmatch(ID_PATTERN, value):
        return []
    why = region_refusal(int(value), listing)
    return [Problem(REGION_KEY, why)] if why else []


def region_warnings(providers: dict) -> list[str]:
    """What the plan says of a region it could not check offline: no facts_gcore.yaml, or a region the stack leaves to
    the environment (which the plan's checks do not read)."""
    from gpupools.stack.providers import provider_value

    value, source = provider_value(NAME, REGION_KEY, providers)
    if value is None or not re.fullmatch(ID_PATTERN, value):
        return []
    if load_facts().gcore_regions is None:
        why = ("gpupools ships no list of Gcore's regions (only Gcore's authenticated API lists them; "
               "`tools/refresh_cloud_facts.py gcore` writes gpupools/core/facts_gcore.yaml from it)")
    elif source != "stack":
        why = f"it comes from ${source}, which the plan's checks do not read"
    else:
        return []
    return [(f"{REGION_KEY} {value} was not checked offline: {why}; `pulumi up` checks it against Gcore's region list before it "
             f"creates anything")]


# Managed modes: Gcore offers none; its pools are gpupools' own.
CLUSTER_MODES = STANDARD_ONLY


def example_zone(cluster, providers: dict) -> str | None:
    return None


def mock_region(config: dict) -> str | None:
    return None
