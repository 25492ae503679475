"""Azure AKS decisions: user agent pools with autoscaling, spot settings, and who installs the GPU driver.

Design choice for MIG on AKS: the GPU Operator owns driver, toolkit and MIG (pools are created with
`gpuProfile.driver: None`), instead of AKS's `gpuInstanceProfile`. One mechanism on AKS and EKS means the
same labels, resource names and in-place changes everywhere; `gpuInstanceProfile` is fixed at pool creation,
so every MIG change would replace the pool.
"""

from __future__ import annotations

import difflib
import re
from datetime import date
from typing import Mapping

from gpupools.core.catalog import Catalog, Hardware
from gpupools.core.facts import load_facts
from gpupools.stack.config import Cluster, Pool, Sharing
from gpupools.stack.errors import Problem
from gpupools.core.pools import NodeTemplate, PoolPlan, Taint, spell_taint
from gpupools.capacity import sources as capacity
from gpupools.upgrades.policy import UPGRADES_LABEL, PoolUpgrade, Window, options as upgrade_options, pool_upgrade, wait_text
from gpupools.clouds.common import KIND, STANDARD_ONLY, Control, KubernetesRelease, endpoint_control, on_off, shared_cluster_problems, newest, reject_fields, resolve_listed, too_open
from gpupools.clouds.standard import (ADMITS_HOST_AGENTS, BOUNDS_POOL_NODES, MANAGED_GPU_METRICS, REFUSED_QUOTAS,  # noqa: F401
                                      managed_plan, managed_pool_problems, pod_node_selector)  # standard mode's answers
from gpupools.stack.providers import provider_value
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
SYSTEM_POOL = {"vm_size": "Standard_D4ds_v5", "min": 1, "max": 3, "count": 2}
# AKS: Linux agent pool names are 1-12 lower-case letters and digits, starting with a letter.
AGENT_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
# AKS adds this taint to every spot pool by itself; pods that should run there need its toleration.
SPOT_TOLERATION = {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}


def cluster_problems(cluster: Cluster) -> list[Problem]:
    problems = shared_cluster_problems(cluster, NAME)
    if cluster.resource_group is None:
        problems.append(Problem("cluster.resourceGroup", "required on azure: the resource group that holds (or will hold) the AKS cluster"))
    return problems


def pool_problems(pool: Pool, path: str) -> list[Problem]:
    problems = reject_fields(pool, path, NAME, {
        "gpu": ("gpu", "gcp n1 machine types"), "gpu_count": ("gpuCount", "gcp n1 machine types"), "os": ("os", "aws"),
        "placement": ("placement", "gcore virtual-machine flavors"), "provisioning": ("provisioning", "gcp")})
    if pool.auto_repair is False:
        problems.append(Problem(f"{path}.autoRepair", "AKS node auto-repair covers every node of the cluster and cannot be turned off per pool; "
                                                      "remove autoRepair"))
    if not AGENT_POOL_NAME.match(pool.name):
        problems.append(Problem(f"{path}.name", f"{pool.name!r} cannot name an AKS agent pool: use 1-12 lower-case letters and digits, starting with a letter"))
    return problems


def pool_sharing_problems(pool: Pool, sharing: Sharing, hw: Hardware | None, path: str) -> list[Problem]:
    return []


def resolve(pool: Pool, catalog: Catalog, path: str) -> tuple[Hardware | None, list[Problem]]:
    return resolve_listed(NAME, pool, catalog, path)


def gpu_driver(installer: str) -> str:
    """The GPU Operator brings its own driver; any other installer relies on the one AKS installs."""
    return "None" if installer == "gpu-operator" else "Install"


def driver_installer(installer: str, os: str | None) -> str | None:
    """Who installs a pool's NVIDIA driver, in the plan's words; None: the GPU Operator (gpu_driver above)."""
    return None if gpu_driver(installer) == "None" else "AKS (gpuProfile.driver Install: the driver of the node image)"


# The AKS cluster autoscaler builds an empty scale set's node from its VM size and from tags of this prefix, one per
# extended resource, the resource's `/` spelled `_` (Azure tag names may not hold `/`): kubernetes/autoscaler
# cluster-autoscaler/cloudprovider/azure/README.md, "Resources", and azure_template.go (processVMSSTemplate). Tags of an
# agent pool are set on its scale set (AKS docs, "Use Azure tags in AKS": "Tags set on a node pool apply only to
# resources related to that node pool").
SCALE_SET_RESOURCE_TAG = "k8s.io_cluster-autoscaler_node-template_resources_"


def autoscaler_resource_tags(resources: Mapping[str, int]) -> dict[str, str]:
    """The scale set tags that tell the AKS cluster autoscaler a new node of the pool has `resources`; a name the tags
    cannot spell (an `_` would come back as `/`) is a programming error."""
    tags = {}
    for name, count in resources.items():
        if "_" in name or "~" in name:
            raise ValueError(f"{name!r} cannot be spelled in a scale set tag: the autoscaler reads every _ and ~2 as /")
        tags[SCALE_SET_RESOURCE_TAG + name.replace("/", "_")] = str(count)
    return tags


def agent_pool_args(plan: PoolPlan, installer: str, resource_group, cluster_name, kubernetes_version: str | None,
                    autoscaler_resources: Mapping[str, int] | None = None) -> dict:
    """`autoscaler_resources`: extended resources beside the GPUs a new node will advertise (the InfiniBand pools'
    RDMA device), written as scale set tags for the cluster autoscaler (`autoscaler_resource_tags`)."""
    pool = plan.pool
    args = {
        "agent_pool_name": pool.name,
        "resource_group_name": resource_group,
        "resource_name_": cluster_name,
        "vm_size": pool.instance_type,
        "mode": "User",
        "os_type": "Linux",
        "os_sku": "Ubuntu",
        "type": "VirtualMachineScaleSets",
        "enable_auto_scaling": True,
        "min_count": pool.min_nodes,
        "max_count": pool.max_nodes,
        "count": pool.min_nodes,
        "node_labels": dict(plan.labels),
        "node_taints": [spell_taint(t, TAINT_STYLE) for t in plan.taints],
        "gpu_profile": {"driver": gpu_driver(installer)},
        "enable_node_public_ip": False,
        "scale_set_priority": "Spot" if capacity.spot_only(pool) else "Regular",
        "upgrade_settings": upgrade_settings(pool),
        "tags": {UPGRADES_LABEL: pool_upgrade(pool).kind},
    }
    group = reservation_group(pool)
    if group is not None:
        args["capacity_reservation_group_id"] = group
        args["tags"] = {**args["tags"], **capacity.reserved_marker(pool)}
    if autoscaler_resources:
        args["tags"] = {**args.get("tags", {}), **autoscaler_resource_tags(autoscaler_resources)}
    if capacity.spot_only(pool):
        args.update(scale_set_eviction_policy="Delete", spot_max_price=-1)
    if pool.disk_size_gb:
        args["os_disk_size_gb"] = pool.disk_size_gb
    zones = capacity.placement_zones(pool)
    if zones:
        args["availability_zones"] = zones
    if kubernetes_version:
        args["orchestrator_version"] = kubernetes_version
    return args


# Azure CNI Overlay with the Cilium dataplane: pods get overlay addresses (no VNet planning) and Cilium enforces
# NetworkPolicy in eBPF; Cilium network policy requires the Cilium dataplane.
NETWORK_PROFILE = {"network_plugin": "azure", "network_plugin_mode": "overlay", "network_dataplane": "cilium"}
# The built-in role "Azure Kubernetes Service RBAC Cluster Admin": with local accounts off and Azure RBAC on, the
# identity that runs `pulumi up` needs it on the cluster to install the pools' software.
CLUSTER_ADMIN_ROLE = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"


def api_server_access_profile(cluster: Cluster) -> dict | None:
    mode = cluster.endpoint_mode
    if mode == "private":
        return {"enable_private_cluster": True}
    if mode == "restricted":
        return {"authorized_ip_ranges": list(cluster.authorized_cidrs or [])}
    return None


def network_profile(cluster: Cluster) -> dict:
    return {**NETWORK_PROFILE, "network_policy": "none" if cluster.network_policy is False else "cilium"}


def identity_args(cluster: Cluster) -> dict:
    """Entra ID logins authorized by Azure RBAC; the static local admin account off unless the stack keeps it."""
    return {"aad_profile": {"managed": True, "enable_azure_rbac": True}, "disable_local_accounts": cluster.local_accounts is not True}


def deployer_principal_type(providers: dict, environ) -> str:
    """Who runs `pulumi up`, as a role assignment must name it (Azure refuses a mismatched principalType): an
    application or managed identity when the provider is given a client ID or told to use MSI, else a user."""
    client_id, _ = provider_value(NAME, "azure-native:clientId", providers, environ)
    msi = str(providers.get("azure-native:useMsi", environ.get("ARM_USE_MSI", ""))).lower() == "true"
    return "ServicePrincipal" if client_id or msi else "User"


def admin_role_assignment_args(cluster_id, principal_id, principal_type: str, subscription_id) -> dict:
    return {"principal_id": principal_id, "principal_type": principal_type, "scope": cluster_id,
            "role_definition_id": subscription_id.apply(
                lambda sub: f"/subscriptions/{sub}/providers/Microsoft.Authorization/roleDefinitions/{CLUSTER_ADMIN_ROLE}")}


def exec_kubeconfig(text: str) -> str:
    """The Entra ID kubeconfig AKS returns (format exec) logs in with a device code, which no `pulumi up` can answer;
    switch it to the Azure CLI's account, as `kubelogin convert-kubeconfig -l azurecli` does."""
    import yaml

    doc = yaml.safe_load(text)
    for user in doc.get("users") or []:
        exec_ = (user.get("user") or {}).get("exec") or {}
        if exec_.get("command") != "kubelogin":
            continue
        args = [str(a) for a in exec_.get("args") or []]
        server_id = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--server-id"), None)
        exec_["args"] = ["get-token", "--login", "azurecli"] + (["--server-id", server_id] if server_id else [])
    return yaml.safe_dump(doc, sort_keys=False)


# What `gpupools plan` can say of an existing cluster's controls beyond "not checked": what the program reads.
READ_ON_EXISTING = {
    "API endpoint": "read from the cluster by `pulumi preview`, which warns if it is open to the internet",
    "local accounts (Entra ID with Azure RBAC always)": "read by `pulumi preview`, which warns about local accounts or no Entra ID/Azure RBAC",
    "network policy (Cilium)": "read by `pulumi preview`, which warns if no network policy is enforced",
}


def existing_cluster_findings(name: str, read: dict) -> list[str]:
    """What an existing cluster, as `getManagedCluster` reads it (the SDK's snake_case keys), lacks of the controls a
    new one gets. gpupools changes nothing on a cluster it did not create; these become warnings of `pulumi preview`."""
    found = []
    access = read.get("api_server_access_profile") or {}
    ranges = access.get("authorized_ip_ranges") or []
    if not access.get("enable_private_cluster") and (not ranges or too_open(ranges)):
        found.append(f"existing AKS cluster {name!r} serves its API server to the whole internet (no authorized IP ranges, not private); "
                     f"restrict it with `az aks update --api-server-authorized-ip-ranges`")
    aad = read.get("aad_profile") or {}
    if not read.get("disable_local_accounts") or not aad.get("managed") or not aad.get("enable_azure_rbac"):
        found.append(f"existing AKS cluster {name!r} keeps local accounts or lacks Entra ID with Azure RBAC "
                     f"(`az aks update --enable-aad --enable-azure-rbac --disable-local-accounts`)")
    if ((read.get("network_profile") or {}).get("network_policy") or "none") == "none":
        found.append(f"existing AKS cluster {name!r} enforces no NetworkPolicy")
    return found


def cluster_controls(cluster: Cluster) -> list[Control]:
    return [
        endpoint_control(cluster),
        Control("local accounts (Entra ID with Azure RBAC always)", on_off(cluster.local_accounts is True), "localAccounts", "aks-entra-id-rbac"),
        Control("network policy (Cilium)", on_off(cluster.network_policy is not False), "networkPolicy", "cluster-network-policy"),
        Control("workload identity", "on", "-", "cluster-workload-identity"),
        Control("Azure Policy add-on (optional)", on_off(cluster.azure_policy is True), "azurePolicy", "aks-defender-and-policy"),
        Control("Defender for Containers (optional)", on_off(cluster.defender_workspace_id is not None), "defenderWorkspaceId",
                "aks-defender-and-policy"),
    ]


def managed_cluster_args(cluster: Cluster) -> dict:
    args = {
        "resource_name_": cluster.name,
        "resource_group_name": cluster.resource_group,
        "dns_prefix": cluster.name,
        "kubernetes_version": cluster.kubernetes_version or DEFAULT_KUBERNETES_VERSION,
        "identity": {"type": "SystemAssigned"},
        "enable_rbac": True,
        "oidc_issuer_profile": {"enabled": True},
        "security_profile": {"workload_identity": {"enabled": True}},
        "agent_pool_profiles": [{
            "name": "system",
            "mode": "System",
            "vm_size": SYSTEM_POOL["vm_size"],
            "count": SYSTEM_POOL["count"],
            "min_count": SYSTEM_POOL["min"],
            "max_count": SYSTEM_POOL["max"],
            "enable_auto_scaling": True,
            "os_type": "Linux",
            "type": "VirtualMachineScaleSets",
            "node_labels": {"gpupools.io/pool": "system"},
        }],
        "auto_upgrade_profile": {"upgrade_channel": UPGRADE_CHANNEL, "node_os_upgrade_channel": NODE_OS_UPGRADE_CHANNEL},
        "network_profile": network_profile(cluster),
        **identity_args(cluster),
    }
    access = api_server_access_profile(cluster)
    if access is not None:
        args["api_server_access_profile"] = access
    if cluster.azure_policy:
        args["addon_profiles"] = {"azurepolicy": {"enabled": True}}
    if cluster.defender_workspace_id:
        args["security_profile"]["defender"] = {"log_analytics_workspace_resource_id": cluster.defender_workspace_id,
                                                "security_monitoring": {"enabled": True}}
    return args


# Managed modes: node auto-provisioning beside the standard cluster; its answers are gpupools.clouds.azure_nap's.
NODE_AUTO_PROVISIONING = "node-auto-provisioning"
CLUSTER_MODES = (*STANDARD_ONLY, NODE_AUTO_PROVISIONING)


def fabric_refusal(pool: Pool, cluster: Cluster | None) -> str | None:
    """InfiniBand is set up per scale set (an agent pool's VMs share one network); node auto-provisioning makes VMs one by one."""
    if cluster is not None and cluster.managed_mode == NODE_AUTO_PROVISIONING:
        return ("gpupools sets InfiniBand up on AKS agent pools (one scale set per pool), not on node auto-provisioning NodePools; use "
                "cluster.mode: standard for multi-node training")
    return None


def extra_tolerations(plan: PoolPlan) -> list[dict]:
    return [SPOT_TOLERATION] if capacity.spot_only(plan.pool) else []


def spot_taint(plan: PoolPlan) -> tuple[Taint, ...]:
    return (Taint(SPOT_TOLERATION["key"], SPOT_TOLERATION["value"], SPOT_TOLERATION["effect"]),) if capacity.spot_only(plan.pool) else ()


def zone_problems(pool: Pool, path: str, cluster: Cluster | None, providers: dict, hardware: Hardware | None) -> list[Problem]:
    problems = [Problem(f"{path}.zones[{i}]", f"{zone!r} is not an Azure availability zone; use {', '.join(ZONES)}")
                for i, zone in enumerate(pool.zones or []) if zone not in ZONES]
    location = providers.get("azure-native:location")
    if problems or hardware is None or not isinstance(location, str):
        return problems
    return offering_problems(pool, path, location)


def region_problems(providers: dict) -> list[Problem]:
    """A location one letter or two away from a region the Retail Prices API lists (facts_azure.yaml) is a typo; any
    other unknown name is left to Azure (sovereign clouds have regions the table does not list)."""
    location = providers.get("azure-native:location")
    regions = load_facts().azure_regions
    if not isinstance(location, str) or location in regions:
        return []
    close = difflib.get_close_matches(location, regions, n=1, cutoff=0.85)
    return [Problem("azure-native:location", f"{location!r} is not an Azure region; did you mean {close[0]}?")] if close else []


def offering_problems(pool: Pool, path: str, location: str) -> list[Problem]:
    """Whether Azure sells the VM size in the location (Karpenter-Azure's table from the Retail Prices API), and in
    the pool's zones where a Resource SKUs snapshot lists them. A price is not a quota: the subscription may still
    need one."""
    facts = load_facts()
    offered = facts.azure_offered_in(pool.instance_type, location)
    if offered is False:
        where = facts.azure_offerings.get(pool.instance_type, ())
        return [Problem(f"{path}.instanceType", f"{pool.instance_type} is not offered in {location}; regions that offer it: "
                                                f"{', '.join(where) or 'none known'} (gpupools catalog --cloud azure)")]
    zones = facts.azure_zones.get(pool.instance_type, {}).get(location)
    if zones is None:
        return []
    return [Problem(f"{path}.zones[{i}]", f"{pool.instance_type} is not offered in zone {zone} of {location}; zones that offer it: {', '.join(zones)}")
            for i, zone in enumerate(pool.zones or []) if zone not in zones]


def node_template(plan: PoolPlan) -> NodeTemplate:
    """The AKS cluster autoscaler builds an empty pool's node from its VM size: `nvidia.com/gpu` is the size's GPU
    count (whatever sharing later makes of it), the labels and taints are the agent pool's, plus AKS's spot taint."""
    labels = {**plan.labels, "kubernetes.azure.com/agentpool": plan.name, "node.kubernetes.io/instance-type": plan.pool.instance_type}
    return NodeTemplate("the AKS cluster autoscaler", f"VM size {plan.pool.instance_type} of agent pool {plan.name}", labels,
                        plan.taints + spot_taint(plan), {"nvidia.com/gpu": plan.hardware.gpus_per_node})


# --------------------------------------------------------------------------------------------------------------------
# Capacity: capacity reservation groups

# A capacity reservation group's resource ID, as AgentPool.capacityReservationGroupID takes it (its docstring in
# azure-mgmt-containerservice gives /subscriptions/{id}/resourcegroups/{group}/providers/Microsoft.Compute/
# capacityreservationgroups/{name}; Azure resource IDs are case-insensitive).
RESERVATION_GROUP_ID = re.compile(r"^/subscriptions/[0-9a-f-]{36}/resourcegroups/([-\w.()]{1,90})/providers/microsoft\.compute/"
                                  r"capacityreservationgroups/[-\w.]{1,80}$", re.IGNORECASE)
# VM series capacity reservations do not support: MicrosoftDocs/azure-compute-docs @05a44856 (ms.date 02/17/2026)
# articles/virtual-machines/capacity-reservation-overview.md, "Limitations and restrictions": "Support for other VM series
# isn't currently available", GPU-accelerated compute: "ND-series", "NCads H100 v5-series" (the NCads and NCadis sizes
# below), Hb- and Hc-series. ND H200 v5 and ND GB200 v6 are ND-series too.
UNRESERVABLE_SIZES = re.compile(r"^Standard_(ND|NC[0-9]+adi?s_H100_v5$)", re.IGNORECASE)
# Built-in role "Contributor": AKS needs the cluster's user-assigned identity to hold it on the resource group of
# the capacity reservation group (AKS docs, use-capacity-reservation-groups).
CONTRIBUTOR_ROLE = "b24988ac-6180-42a0-ab88-20f7382dd24c"


def reservation_group(pool: Pool) -> str | None:
    found = capacity.reservations(pool)
    return found[0].id if found else None


def reservation_group_scopes(pools: list[Pool]) -> list[str]:
    """The resource groups holding the pools' capacity reservation groups, as role assignment scopes."""
    scopes = []
    for pool in pools:
        group = reservation_group(pool)
        if group is not None:
            scopes.append(group.split("/providers/", 1)[0])
    return list(dict.fromkeys(scopes))


def uses_reservation_groups(pools: list[Pool]) -> bool:
    return bool(reservation_group_scopes(pools))


def contributor_role(subscription_id: str) -> str:
    return f"/subscriptions/{subscription_id}/providers/Microsoft.Authorization/roleDefinitions/{CONTRIBUTOR_ROLE}"


def provisioning_request_class(pool: Pool) -> str | None:
    return None


def capacity_flavor_labels(pool: Pool, autoscaler: str) -> list[tuple[str, dict[str, str]]]:
    return [("", {})]


def capacity_problems(pool: Pool, path: str, autoscaler: str, cluster: Cluster | None, hardware: Hardware | None) -> list[Problem]:
    """A pool in a capacity reservation group: the group by resource ID, no Spot, a VM size reservations support,
    the group's zones; Azure runs VMs beyond the reserved count as ordinary ones (overallocation), so the list
    is the group, then on-demand."""
    if pool.capacity is None:
        return []
    problems: list[Problem] = []
    listed = capacity.sources(pool)
    shape = tuple(s.kind for s in listed)
    for s in listed:
        if s.kind in (capacity.FLEX_START, capacity.QUEUED, capacity.ANY_RESERVATION):
            problems.append(Problem(s.path(path), f"{s.kind} is a GKE capacity kind; on AKS use a capacity reservation group, on-demand or spot"))
        r = s.reservation
        if r is None:
            continue
        where = f"{s.path(path)}.reservation"
        for attr, alias in (("tags", "tags"), ("owner_id", "ownerId"), ("kind", "kind")):
            if getattr(r, attr) is not None:
                problems.append(Problem(f"{where}.{alias}", f"not used on azure; {alias} applies to EKS reservations only"))
        if r.id is None or not RESERVATION_GROUP_ID.match(r.id):
            problems.append(Problem(f"{where}.id", f"{r.id!r} is not a capacity reservation group resource ID (/subscriptions/<id>/"
                                                   f"resourceGroups/<group>/providers/Microsoft.Compute/capacityReservationGroups/<name>)"))
        for j, zone in enumerate(r.zones or []):
            if zone not in ZONES:
                problems.append(Problem(f"{where}.zones[{j}]", f"{zone!r} is not an Azure availability zone; use {', '.join(ZONES)}"))
        if pool.zones and not r.zones:
            problems.append(Problem(f"{path}.zones", "given, but the reservation group lists no zones: VMs of a regional group are deployed "
                                                     "without zones; drop zones, or list the group's zones under reservation.zones"))
    if capacity.RESERVED in shape:
        if capacity.SPOT in shape:
            problems.append(Problem(f"{path}.capacity", "spot with a capacity reservation group: Azure capacity reservations do not take "
                                                        "Spot VMs; put spot capacity in another pool"))
        elif shape != (capacity.RESERVED, capacity.ON_DEMAND):
            problems.append(Problem(f"{path}.capacity", f"{', '.join(shape)}: an AKS pool takes one reservation group, then on-demand (Azure "
                                                        f"runs VMs beyond the reserved count as ordinary on-demand VMs); write "
                                                        f"[{{reservation: ...}}, on-demand]"))
        if UNRESERVABLE_SIZES.match(pool.instance_type):
            problems.append(Problem(f"{path}.instanceType", f"{pool.instance_type}: Azure capacity reservations do not support ND-series "
                                                            f"or NCads H100 v5 VMs; reserve another size or drop the reservation"))
    elif len(shape) > 1:
        problems.append(Problem(f"{path}.capacity", f"{', '.join(shape)}: an AKS agent pool has one priority (Regular or Spot); "
                                                    f"put each kind in its own pool"))
    return problems


def capacity_lines(pool: Pool, autoscaler: str) -> list[str]:
    lines = []
    for s in capacity.sources(pool):
        if s.reservation is not None:
            zones = capacity.placement_zones(pool)
            lines.append(f"{s.label}: agent pool capacityReservationGroupID" + (f", zones {', '.join(zones)}" if zones else ", no zones")
                         + "; the cluster's user-assigned identity holds Contributor on the group's resource group")
        elif s.kind == capacity.ON_DEMAND and capacity.has(pool, capacity.RESERVED):
            lines.append("on-demand: VMs beyond the reserved count (Azure overallocation, without the reservation's capacity SLA)")
        else:
            lines.append(f"{s.kind}: agent pool priority " + ("Spot" if s.kind == capacity.SPOT else "Regular"))
    return lines


def reservation_identity_findings(name: str, identity: dict | None, scopes: list[str]) -> list[str]:
    """An existing cluster gpupools does not change: say what its identity lacks for pools in a reservation group."""
    kind = (identity or {}).get("type")
    if kind == "UserAssigned":
        return [f"existing AKS cluster {name!r}: its user-assigned identity needs Contributor on {', '.join(scopes)} for the pools "
                f"in a capacity reservation group (gpupools does not assign roles on a cluster it did not create)"]
    return [f"existing AKS cluster {name!r} has a {kind or 'missing'} identity; pools in a capacity reservation group need a user-assigned "
            f"identity with Contributor on {', '.join(scopes)} (az aks update --assign-identity)"]


# --------------------------------------------------------------------------------------------------------------------
# The fabric: InfiniBand between ND-series nodes

# The resource the NVIDIA Network Operator's RDMA shared device plugin advertises: its prefix `rdma/` and the config's
# resourceName (Mellanox/k8s-rdma-shared-dev-plugin pkg/resources/resources_manager.go: rdmaHcaResourcePrefix, and
# validResourceName `^[a-zA-Z0-9_]+$`). Azure's configuration names it `shared_ib` (Azure/aks-rdma-infiniband
# configs/nicclusterpolicy/rdma-shared-device-plugin/rdma.yaml); gpupools drops the underscore, because the AKS cluster
# autoscaler learns a scale set's extended resources from tags in whose names every `_` (and `~2`) reads as `/`
# (kubernetes/autoscaler cluster-autoscaler/cloudprovider/azure/azure_template.go, extractAllocatableResourcesFromScaleSet):
# `rdma/shared_ib` cannot be spelled there, and without it a pod that asks for the device never starts a node from zero.
FABRIC_RESOURCE = "rdma/sharedib"
FABRIC_NAME = "InfiniBand"
# AKS writes no node labels for the InfiniBand topology, so Kueue has no levels to pack a job by on AKS.
TOPOLOGY_LEVELS: tuple[tuple[str, str], ...] = ()
# One scale set is one InfiniBand network once AKSInfinibandSupport is registered; zones would split it.
FABRIC_ZONES = "at most one"
# AKS puts a pool's VMs on one InfiniBand network only with this subscription feature registered
# (MicrosoftDocs/azure-aks-docs articles/aks/use-amd-gpus.md, "Register the AKSInfinibandSupport feature").
INFINIBAND_FEATURE = "az feature register --namespace Microsoft.ContainerService --name AKSInfinibandSupport"


def fabric_placement(cluster_name: str, pool: Pool) -> tuple[str, str | None, bool]:
    """How a fabric pool's nodes are kept close: one scale set, one InfiniBand network."""
    return f"one scale set (agent pool {pool.name})", None, True


def fabric_readiness(cluster: Cluster, plan: PoolPlan) -> tuple[bool, tuple[str, ...]]:
    """Pods reach the HCAs once the Network Operator runs; the scale set's VMs share one InfiniBand network only with the
    subscription feature, which a stack cannot register."""
    return True, (f"the subscription's AKSInfinibandSupport feature ({INFINIBAND_FEATURE}), so the scale set's VMs share one "
                  "InfiniBand network",)


def fabric_pool_problems(pool: Pool, path: str) -> list[Problem]:
    return []


def local_nvme_use(pool: Pool, fabric_on: bool) -> str | None:
    return "not configured by gpupools" if fabric_on else None


def fabric_pod(count: int, pool: str = "", kind: str = "", networks: int = 0) -> dict:
    """What a pod on an InfiniBand node needs beside its GPUs: the shared IB device, IPC_LOCK to pin memory for RDMA, and
    NCCL told to use InfiniBand with GPUDirect RDMA (Azure/aks-rdma-infiniband tests/scenarios/k8s/values.yaml:
    `rdma/shared_ib: 1` (FABRIC_RESOURCE here), capability IPC_LOCK, NCCL_IB_DISABLE=0, NCCL_NET_GDR_LEVEL=SYS)."""
    return {"limits": {FABRIC_RESOURCE: count},
            "env": {"NCCL_IB_DISABLE": "0", "NCCL_NET_GDR_LEVEL": "SYS", "NCCL_DEBUG": "INFO", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
            "capabilities": ["IPC_LOCK"]}


# Namespaces and node-label domains AKS and its add-ons own; a team may not claim them. Namespaces: the Azure Policy
# add-on (gatekeeper-system), Calico network policy (calico-system, tigera-operator), `az aks command invoke`
# (aks-command) and the application routing add-on (app-routing-system). Labels: AKS reserves the
# kubernetes.azure.com domain for the labels it sets on every node (learn.microsoft.com/azure/aks/use-labels).
RESERVED_NAMESPACES = frozenset({"gatekeeper-system", "calico-system", "tigera-operator", "aks-command", "app-routing-system"})
RESERVED_LABEL_DOMAINS = ("kubernetes.azure.com",)


# Readiness: no startup taint. The AKS cluster autoscaler builds its template from the agent pool's taints and takes no
# --startup-taint, so a node that is Ready but still tainted would look full and it would start another. It counts a
# node with the GPU label but no allocatable nvidia.com/gpu as still starting (kubernetes/autoscaler cluster-autoscaler/
# processors/customresources/gpu_processor.go; AKS label kubernetes.azure.com/accelerator), and GPU pods wait for the
# device plugin's resource anyway.
STARTUP_TAINTS = False
READINESS_NOTE = ("GPU pods wait for the device plugin's resource; the AKS autoscaler counts a GPU node as starting until nvidia.com/gpu is "
                  "allocatable (no startup taint: it cannot be told to ignore one)")


def repair_facts(plan: PoolPlan, autoscaler: str) -> tuple[str, str]:
    """(what notices a broken GPU, what happens next) for one pool on AKS. AKS node auto-repair acts on NotReady or
    missing status only (reboot, reimage, redeploy); the node problem detector's GPU conditions (GPUMissing, XIDErrors,
    NVLinkStatusInactive, ...) are reported, not acted on, and are not checked on pools whose driver AKS does not
    install (MicrosoftDocs/azure-aks-docs articles/aks/node-auto-repair.md, node-problem-detector.md)."""
    if plan.mechanism.installer == "gpu-operator":
        detects = "the GPU alerts (DCGM XID and row-remap faults); AKS checks no GPU health on pools whose driver the GPU Operator installs"
    else:
        detects = "AKS node problem detector GPU conditions (GPUMissing, XIDErrors, NVLinkStatusInactive) and the GPU alerts"
    return detects, ("AKS node auto-repair reboots, then reimages, then redeploys a node NotReady for 5m or more; a GPU fault that leaves the "
                     "node Ready is alerted to the platform team, not repaired")


# --------------------------------------------------------------------------------------------------------------------
# Answers to the questions every capability asks a cloud (gpupools/core/cloud.py)

# `installer: auto`: AKS GPU pools skip AKS's own driver (gpuProfile.driver None) and the GPU Operator installs
# driver, toolkit and the rest.
# The service scales GPU pools with its own cluster autoscaler; gpupools installs none (EKS: Karpenter or
# cluster-autoscaler, gpupools' choice).
OWN_AUTOSCALER = True
# Fabric: a scale set's VMs share one InfiniBand network by themselves; pods reach the HCAs through the Network Operator's RDMA device plugin.
FABRIC_IN_WORDS = "InfiniBand"  # as policy messages name it
FABRIC_PLACEMENT_GROUP = False
FABRIC_DEVICE_SOFTWARE = "network-operator"
AUTO_INSTALLER = "gpu-operator"
OWN_GPU_SOFTWARE = False
OWN_SHARING = False
CLOUD_DEVICE_PLUGIN = None
CLOUD_DRIVER_ON_HOST = False
AUTOSCALER = None
# AKS installs the driver (gpuProfile.driver: Install, what `installer: device-plugin` uses) and cuts MIG instances at
# pool creation (gpuInstanceProfile), but runs a device plugin of its own only with its managed GPU profile
# (gpuProfile.nvidia.managementMode: Managed, which adds the DCGM exporter): an agent pool field of the ManagedCluster
# API from 2026-01-02-preview and the stable 2026-08-01 (azure-mgmt-containerservice 41.8.0's models), not of the
# 2025-09-01 API azure-native 3.29.0 sends.
REFUSED_INSTALLERS = {"cloud": "'cloud' would be AKS's managed GPU profile (gpuProfile.nvidia.managementMode: Managed: driver, device plugin and "
                               "DCGM exporter by AKS), which the AKS API that azure-native 3.29.0 sends (2025-09-01) does not have yet; use "
                               "'device-plugin' (AKS installs the driver, gpuProfile.driver: Install, and NVIDIA's device plugin serves the "
                               "GPUs) or 'gpu-operator'"}
IMAGE_BRINGS_DRIVER = False
IMAGE_BRINGS_TOOLKIT = False
CRITICAL_PODS_NEED_QUOTA = False
# AKS owns admission webhooks' namespaceSelector (its admissions enforcer); HAMi's chart says to leave it alone there.
OWNS_WEBHOOK_NAMESPACE_SELECTOR = True
EXAMPLE_ZONE = '"1"'


def image_device_plugin(os: str | None) -> bool:
    return False


def fabric_resource_count(fabric) -> int:
    """Every pod on an InfiniBand node shares the HCAs as one rdma/sharedib."""
    return 1


def fabric_zone_of_cluster(pool, cluster) -> str | None:
    return None


NEW_NETWORK_MAX_ZONES = None


def example_zone(cluster, providers: dict) -> str | None:
    return None


def mock_region(config: dict) -> str | None:
    return None


# --------------------------------------------------------------------------------------------------------------------
# Day two: agent pool upgrade settings and planned maintenance (docs/upgrades.md)
#
# Limits from MicrosoftDocs/azure-aks-docs articles/aks/upgrade-aks-node-pools-rolling.md (@32892028): a drain timeout of
# 5 minutes to 24 hours ("If this time is exceeded, the upgrade fails", pulumi_azure_native AgentPoolUpgradeSettingsArgs),
# maxSurge above 0 when maxUnavailable is 0. `undrainableNodeBehavior: Cordon` leaves a node whose drain a
# PodDisruptionBudget blocks cordoned and labelled kubernetes.azure.com/upgrade-status=Quarantined, and the upgrade goes
# on with the other nodes: the Job on it runs to its end.
DRAIN_TIMEOUT_MINUTES = (5, 24 * 60)
# Clusters follow patch releases of their minor, and node images weekly (AKS's default node OS channel, said explicitly).
UPGRADE_CHANNEL = "patch"
NODE_OS_UPGRADE_CHANNEL = "NodeImage"
# The two schedules AKS's auto-upgrade and node OS upgrade follow (MaintenanceConfiguration config names); a window is
# one weekday a week or every day, 4 to 24 hours long (azure-aks-docs articles/aks/planned-maintenance.md @04921f5f;
# MaintenanceWindow.durationHours "range from 4 to 24").
MAINTENANCE_CONFIGS = ("aksManagedAutoUpgradeSchedule", "aksManagedNodeOSUpgradeSchedule")
WINDOW_HOURS = (4, 24)
WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def upgrade_settings(pool: Pool) -> dict:
    """AgentPoolUpgradeSettings, as pulumi_azure_native names them: surge and unavailable nodes as counts, the drain
    timeout the pool's wait for jobs, and a training pool's blocked nodes cordoned rather than forced."""
    policy = pool_upgrade(pool)
    low, high = DRAIN_TIMEOUT_MINUTES
    return {"max_surge": str(policy.max_surge), "max_unavailable": str(policy.max_unavailable),
            "drain_timeout_in_minutes": max(low, min(high, policy.wait_minutes)),
            "undrainable_node_behavior": "Cordon" if policy.training else "Schedule"}


def maintenance_configurations(upgrades, window: Window) -> list[dict]:
    """The cluster's two planned-maintenance schedules, with the exclusions as dates on which nothing starts."""
    schedule = ({"daily": {"interval_days": 1}} if window.daily else
                {"weekly": {"day_of_week": WEEKDAY_NAMES[window.days[0]], "interval_weeks": 1}})
    maintenance_window: dict = {"schedule": schedule, "duration_hours": window.hours,
                                "start_time": f"{window.start // 60:02d}:{window.start % 60:02d}", "utc_offset": "+00:00"}
    if upgrades.exclusions:
        maintenance_window["not_allowed_dates"] = [{"start": ex.start, "end": ex.end} for ex in upgrades.exclusions]
    return [{"config_name": name, "maintenance_window": dict(maintenance_window)} for name in MAINTENANCE_CONFIGS]


def pool_upgrade_problems(pool: Pool, policy: PoolUpgrade, path: str, autoscaler: str) -> list[Problem]:
    chosen = upgrade_options(pool)
    low, high = DRAIN_TIMEOUT_MINUTES
    if chosen.wait_for_jobs is not None and not low <= policy.wait_minutes <= high:
        return [Problem(f"{path}.waitForJobs", f"{chosen.wait_for_jobs}: an AKS drain timeout is {low} minutes to {high // 60} hours")]
    return []


def maintenance_problems(cluster: Cluster, upgrades, window: Window, autoscaler: str) -> list[Problem]:
    problems = []
    if len(window.days) not in (1, 7):
        problems.append(Problem("upgrades.window.days", f"{', '.join(upgrades.window.days)}: an AKS maintenance schedule repeats on one weekday "
                                                        f"or every day; give one day, or all seven"))
    low, high = WINDOW_HOURS
    if not low <= window.hours <= high:
        problems.append(Problem("upgrades.window.hours", f"{window.hours}: an AKS maintenance window lasts {low} to {high} hours"))
    return problems


def upgrade_lines(pool: Pool, policy: PoolUpgrade, window: Window, cluster: Cluster, autoscaler: str) -> list[str]:
    when = (f"cluster patch upgrades and weekly node images (channels {UPGRADE_CHANNEL}, {NODE_OS_UPGRADE_CHANNEL}) only {window.text}, "
            f"never on its exclusion dates" if cluster.create else "upgrades in the existing cluster's own maintenance schedule (not changed by gpupools)")
    low, high = DRAIN_TIMEOUT_MINUTES
    timeout = max(low, min(high, policy.wait_minutes))
    blocked = ("a node whose Job's PodDisruptionBudget blocks its drain is left cordoned (Quarantined) and the upgrade goes on"
               if policy.training else "the upgrade fails and stops there (a later upgrade resumes it)")
    # A capacity reservation group pool always has on-demand behind it (capacity_problems), where a surge node can start.
    return [f"{policy.kind}: {when}", f"{policy.surge_text}; draining waits up to {wait_text(timeout)} (drain timeout), then {blocked}"]

# The fabric is offered wherever the catalog records one (None: no reason to leave it off).
FABRIC_OFFERED: str | None = None
# What the policy pack advises for a pool built for multi-node jobs that has no fabric.
MULTI_NODE_ADVICE = "give it one zone and fabric: on"

# Capacity bought ahead (reservations, Capacity Blocks, DWS) is something a pool can name (docs/capacity.md).
RESERVATIONS = True


def plan_notes(pools: list) -> list[str]:
    """What the plan tells the user to check on the cluster itself: nothing here."""
    return []
