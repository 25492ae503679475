"""AKS: the cluster itself: Kubernetes releases, network, identity, controls, the system pool, the kubeconfig and what
a plan reads of an existing cluster.
"""

from __future__ import annotations



from gpupools.stack.config import Cluster
from gpupools.stack.errors import Problem
from gpupools.clouds.common import (Control, SystemPoolSize, endpoint_control, on_off, shared_cluster_problems, system_pool_problems,
                                    system_pool_size, too_open)
from gpupools.core.catalog import load_catalog
from gpupools.stack.providers import provider_value
from gpupools.clouds.azure.provider import DEFAULT_KUBERNETES_VERSION, MAX_NODES_PER_POOL, NAME
from gpupools.clouds.azure.upgrades import NODE_OS_UPGRADE_CHANNEL, UPGRADE_CHANNEL


SYSTEM_POOL = {"vm_size": "Standard_D4ds_v5", "min": 1, "max": 3, "count": 2}
SYSTEM_DEFAULT = SystemPoolSize(SYSTEM_POOL["vm_size"], SYSTEM_POOL["min"], SYSTEM_POOL["max"])
# An Azure VM size as AKS takes it (Standard_D4ds_v5, Standard_E8s_v5).
VM_SIZE_FORM = r"Standard_[A-Za-z0-9_]+"


def cluster_problems(cluster: Cluster) -> list[Problem]:
    problems = shared_cluster_problems(cluster, NAME)
    if cluster.resource_group is None:
        problems.append(Problem("cluster.resourceGroup", "required on azure: the resource group that holds (or will hold) the AKS cluster"))
    # An AKS node pool holds 0 to 1,000 nodes, a System-mode pool at least one (AKS "create node pools"; "system node
    # pools": a cluster's system pools need at least one node between them), which SystemPool's minNodes >= 1 keeps.
    problems += system_pool_problems(cluster, NAME, SYSTEM_DEFAULT, VM_SIZE_FORM, "an Azure VM size such as Standard_D4ds_v5",
                                     MAX_NODES_PER_POOL, "an AKS node pool", load_catalog())
    return problems


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
    system = system_pool_size(cluster, SYSTEM_DEFAULT)
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
            "vm_size": system.machine_type,
            "count": system.nodes_at_start(SYSTEM_POOL["count"]),
            "min_count": system.min_nodes,
            "max_count": system.max_nodes,
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


NEW_NETWORK_MAX_ZONES = None
