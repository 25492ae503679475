"""Register provider resources and invokes by type token with the inputs exactly as the provider receives them.

The generated provider classes cost most of a `gpupools plan`: touching `aws.ec2` alone loads every EC2 type the SDK
knows (about half a second), `pulumi_gcp.container` and Azure's container service a quarter of a second each. What goes over the wire is only a type token, a name, camelCase inputs
and the provider version; `CloudResource` sends just that, and a test registers every such resource both ways
under the mock engine and compares the requests.
"""

from __future__ import annotations

import importlib.util
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import pulumi

from gpupools.stack.providers import sdk_package

# The provider's name of an input where it is not the camelCase of the SDK's snake_case keyword: Azure's API spells
# acronyms in capitals. Every such name of the modules registered by token (pulumi-azure-native's containerservice,
# authorization and managedidentity, pulumi-gcp's container, pulumi-aws's eks: `@pulumi.getter(name=...)` in their
# generated classes), which a test reads from the installed SDKs; tenant_id is tenantID in one block and tenantId in
# another, and gpupools sets neither.
PROVIDER_NAMES = {
    "admin_group_object_ids": "adminGroupObjectIDs", "authorized_ip_ranges": "authorizedIPRanges", "azure_portal_fqdn": "azurePortalFQDN",
    "blob_csi_driver": "blobCSIDriver", "capacity_reservation_group_id": "capacityReservationGroupID", "client_app_id": "clientAppID",
    "container_log_max_size_mb": "containerLogMaxSizeMB", "custom_ca_trust_certificates": "customCATrustCertificates",
    "disk_csi_driver": "diskCSIDriver", "disk_encryption_set_id": "diskEncryptionSetID", "dns_service_ip": "dnsServiceIP",
    "enable_azure_rbac": "enableAzureRBAC", "enable_csi_proxy": "enableCSIProxy", "enable_fips": "enableFIPS",
    "enable_node_public_ip": "enableNodePublicIP", "enable_private_cluster_public_fqdn": "enablePrivateClusterPublicFQDN",
    "enable_rbac": "enableRBAC", "enable_ultra_ssd": "enableUltraSSD", "enable_vtpm": "enableVTPM", "file_csi_driver": "fileCSIDriver",
    "host_group_id": "hostGroupID", "kube_dns_overrides": "kubeDNSOverrides", "linux_os_config": "linuxOSConfig",
    "local_dns_profile": "localDNSProfile", "managed_mesh_id": "managedMeshID", "managed_outbound_ip_profile": "managedOutboundIPProfile",
    "managed_outbound_ips": "managedOutboundIPs", "node_os_upgrade_channel": "nodeOSUpgradeChannel",
    "node_public_ip_prefix_id": "nodePublicIPPrefixID", "node_public_ip_tags": "nodePublicIPTags", "os_disk_size_gb": "osDiskSizeGB",
    "os_sku": "osSKU", "outbound_ip_prefixes": "outboundIPPrefixes", "outbound_ips": "outboundIPs",
    "pod_ip_allocation_mode": "podIPAllocationMode", "pod_subnet_id": "podSubnetID", "private_dns_zone": "privateDNSZone",
    "private_fqdn": "privateFQDN", "proximity_placement_group_id": "proximityPlacementGroupID",
    "public_ip_prefix_size": "publicIPPrefixSize", "public_ip_prefixes": "publicIPPrefixes", "public_ips": "publicIPs",
    "resource_uid": "resourceUID", "server_app_id": "serverAppID", "swap_file_size_mb": "swapFileSizeMB",
    "vnet_dns_overrides": "vnetDNSOverrides", "vnet_subnet_id": "vnetSubnetID",
}
# Inputs that are maps keyed by data (labels, tags, add-on names): their keys go over the wire as written.
MAPS = frozenset({"labels", "resource_labels", "metadata", "tags", "node_labels", "addon_profiles", "config"})


# Providers of no cloud that gpupools registers by type token: their Python SDK packages.
OTHER_SDKS = {"random": "pulumi_random"}


@lru_cache(maxsize=None)
def package_version(package: str) -> str:
    """The provider plugin version the package's own classes ask for: the version in the SDK's pulumi-plugin.json,
    read as text so that not even the SDK's package is imported (pulumi_gcp's alone costs a tenth of a second)."""
    name = sdk_package(package) or OTHER_SDKS[package]
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return json.loads((Path(next(iter(spec.submodule_search_locations))) / "pulumi-plugin.json").read_text())["version"]


def provider_inputs(args: dict[str, Any]) -> dict[str, Any]:
    """A generated class's keyword arguments (snake_case, nested blocks as dicts) as the provider receives them."""
    return _camel(args, False)


def _camel(value: Any, in_map: bool) -> Any:
    if isinstance(value, dict):
        return {(k if in_map else _provider_name(k)): _camel(v, not in_map and k in MAPS) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_camel(v, False) for v in value]
    return value


def _provider_name(key: str) -> str:
    if key in PROVIDER_NAMES:
        return PROVIDER_NAMES[key]
    head, *rest = key.rstrip("_").split("_")  # resource_name_: the SDK's spelling beside the resource's own name
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


class CloudResource(pulumi.CustomResource):
    """One provider resource; its outputs are attributes named as the provider names them (camelCase)."""

    def __init__(self, type_token: str, name: str, inputs: dict[str, Any], outputs: tuple[str, ...] = (),
                 opts: pulumi.ResourceOptions | None = None):
        props: dict[str, Any] = {k: v for k, v in inputs.items() if v is not None}
        for key in outputs:
            props.setdefault(key, None)
        package = type_token.split(":", 1)[0]
        opts = pulumi.ResourceOptions.merge(pulumi.ResourceOptions(version=package_version(package)), opts)
        super().__init__(type_token, name, props, opts)


# The provider's names of map-valued results whose own keys are data: they stay as the cloud wrote them.
RESULT_MAPS = frozenset({"tags", "tagsAll", "labels", "resourceLabels", "nodeLabels", "metadata", "addonProfiles",
                         "effectiveLabels", "terraformLabels"})


def python_names(value: Any, in_map: bool = False) -> Any:
    """A provider function's answer with the Python names its SDK's typed result gives each field (`vpcConfig` ->
    `vpc_config`, `masterAuths` -> `master_auths`; the generated classes name each, `@pulumi.getter(name="vpcConfig")
    def vpc_config`, and that is the snake_case of the provider's name, a run of capitals one word, or for Azure's
    acronyms the name PROVIDER_NAMES gives); the keys of a map of data stay as they are. A test reads clusters both ways and compares every field the components read."""
    if isinstance(value, dict):
        return {(k if in_map else _snake(k)): python_names(v, not in_map and k in RESULT_MAPS) for k, v in value.items()}
    if isinstance(value, list):
        return [python_names(v) for v in value]
    return value


def _snake(name: str) -> str:
    return _PYTHON_NAMES.get(name) or _CAPITALS.sub("_", name).lower()


_CAPITALS = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# Azure's acronyms (`managedOutboundIPs`) are not words the rule above finds: their Python names, as spelled above.
_PYTHON_NAMES = {provider: python for python, provider in PROVIDER_NAMES.items()}


def invoke(token: str, args: dict[str, Any], parent: pulumi.Resource, depends_on: list[pulumi.Resource] | None = None) -> pulumi.Output[Any]:
    """A provider function (data source), answered as a plain dict with the provider's camelCase keys."""
    package = token.split(":", 1)[0]
    return pulumi.runtime.invoke_output(token, args, pulumi.InvokeOutputOptions(parent=parent, version=package_version(package),
                                                                                depends_on=depends_on))
