"""AKS: the Pulumi provider beside `gpupools:` (project, region, environment), the service's names and limits, and
what a plan's mocks answer for the region and an existing cluster.
"""

from __future__ import annotations


from datetime import date

from gpupools.core.catalog import Hardware
from gpupools.core.facts import load_facts
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem, close_matches
from gpupools.clouds.common import KIND, STANDARD_ONLY, KubernetesRelease, newest
from gpupools.stack.targets import ProviderFacts, Setting


NAME = "azure"
KIND_WORD = KIND[NAME]  # what a pool's machines are called here, as messages name them
# The Pulumi provider beside `gpupools:` (pulumi-azure-native; its environment variable for the location: ARM_LOCATION).
AZURE_LOCATION = r"^[a-z][a-z0-9]{2,39}$"
UUID = r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$"
PROVIDER = ProviderFacts(
    namespace="azure-native",
    settings={
        "azure-native:location": Setting(AZURE_LOCATION, "an Azure region name such as westeurope (az account list-locations, column Name)",
                                         ("ARM_LOCATION",), default="the resource group's location"),
        "azure-native:subscriptionId": Setting(UUID, "a subscription ID (a UUID)", ("ARM_SUBSCRIPTION_ID",)),
        "azure-native:tenantId": Setting(UUID, "a tenant ID (a UUID)", ("ARM_TENANT_ID",)),
        "azure-native:clientId": Setting(UUID, "an application (client) ID (a UUID)", ("ARM_CLIENT_ID",)),
        "azure-native:clientSecret": Setting(None, "a client secret", secret="always"),
    },
    sdk_package="pulumi_azure_native", sdk_name="the Azure Native provider", sdk_distribution="pulumi-azure-native")
# The platform component's type for one pool (how `gpupools plan` finds what a pool created).
POOL_COMPONENT = "gpupools:index:AksGpuNodePool"
SERVICE = "AKS"
# An AKS user node pool holds 0 to 1,000 nodes (AKS "create node pools": count, minCount, maxCount).
MAX_NODES_PER_POOL = 1000


def max_nodes(pool: Pool, cluster: Cluster | None, hardware: Hardware | None) -> tuple[int, str]:
    """The most nodes one pool may ask for, and what the limit counts."""
    return MAX_NODES_PER_POOL, "per AKS node pool"
TAINT_STYLE = "string"
PROVIDER_PACKAGE = "pulumi_azure_native"

# AKS Kubernetes release calendar (learn.microsoft.com/azure/aks/supported-kubernetes-versions, dated 2026-08-05):
# about 12 months of community support; AKS creates no cluster past it (long-term support needs the Premium tier,
# which gpupools does not buy), so there is no extended end here.
KUBERNETES_RELEASES = {r.minor: r for r in (
    KubernetesRelease("1.33", date(2025, 6, 1), date(2026, 7, 31)),
    KubernetesRelease("1.34", date(2025, 11, 1), date(2026, 11, 30)),
    KubernetesRelease("1.35", date(2026, 3, 1), date(2027, 3, 31)),
    KubernetesRelease("1.36", date(2026, 6, 1), date(2027, 6, 30)),
)}
DEFAULT_KUBERNETES_VERSION = newest(KUBERNETES_RELEASES)
ZONES = ("1", "2", "3")


# Managed modes: node auto-provisioning beside the standard cluster; its answers are gpupools.clouds.azure.node_auto_provisioning's.
NODE_AUTO_PROVISIONING = "node-auto-provisioning"
CLUSTER_MODES = (*STANDARD_ONLY, NODE_AUTO_PROVISIONING)


def region_problems(providers: dict) -> list[Problem]:
    """A location one letter or two away from a region the Retail Prices API lists (facts_azure.yaml) is a typo; any
    other unknown name is left to Azure (sovereign clouds have regions the table does not list)."""
    location = providers.get("azure-native:location")
    regions = load_facts().azure_regions
    if not isinstance(location, str) or location in regions:
        return []
    close = close_matches(location, regions, n=1, cutoff=0.85)
    return [Problem("azure-native:location", f"{location!r} is not an Azure region; did you mean {close[0]}?")] if close else []


# Namespaces and node-label domains AKS and its add-ons own; a team may not claim them. Namespaces: the Azure Policy
# add-on (gatekeeper-system), Calico network policy (calico-system, tigera-operator), `az aks command invoke`
# (aks-command) and the application routing add-on (app-routing-system). Labels: AKS reserves the
# kubernetes.azure.com domain for the labels it sets on every node (learn.microsoft.com/azure/aks/use-labels).
RESERVED_NAMESPACES = frozenset({"gatekeeper-system", "calico-system", "tigera-operator", "aks-command", "app-routing-system"})
RESERVED_LABEL_DOMAINS = ("kubernetes.azure.com",)
EXAMPLE_ZONE = '"1"'


def example_zone(cluster, providers: dict) -> str | None:
    return None


def mock_region(config: dict) -> str | None:
    return None
