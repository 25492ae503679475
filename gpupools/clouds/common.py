"""Lookups every cloud module needs in the same way."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any

from gpupools.core.catalog import Catalog, Hardware, InstanceType
from gpupools.stack.config import Pool
from gpupools.stack.errors import Problem

KIND = {"aws": "instance type", "azure": "VM size", "gcp": "machine type", "gcore": "flavor"}


def _a(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def lookup_instance(cloud: str, pool: Pool, catalog: Catalog, path: str) -> tuple[InstanceType | None, list[Problem]]:
    found = catalog.instance(cloud, pool.instance_type)
    if found is not None:
        return found, []
    where = f"{path}.instanceType"
    refusal = catalog.refusal(cloud, pool.instance_type)
    if refusal is not None:
        return None, [Problem(where, refusal)]
    other = catalog.cloud_of(pool.instance_type)
    if other is not None:
        return None, [Problem(where, f"{pool.instance_type!r} is {_a(other)} {other} {KIND[other]}, but this stack's cloud is {cloud}; pick {_a(cloud)} {cloud} {KIND[cloud]} (gpupools catalog --cloud {cloud})")]
    closest = catalog.closest(cloud, pool.instance_type)
    hint = f"closest known: {', '.join(closest)}" if closest else f"see `gpupools catalog --cloud {cloud}`"
    return None, [Problem(where, f"unknown {cloud} GPU {KIND[cloud]} {pool.instance_type!r}; {hint}")]


def hardware_of(instance: InstanceType) -> Hardware:
    assert instance.gpu is not None
    return Hardware(instance.name, instance.gpu, instance.gpus, instance.price, instance.price_read, instance.accelerator)


def resolve_listed(cloud: str, pool: Pool, catalog: Catalog, path: str) -> tuple[Hardware | None, list[Problem]]:
    """Clouds whose instance types carry their GPUs: the catalog line is the whole answer."""
    instance, problems = lookup_instance(cloud, pool, catalog, path)
    return (hardware_of(instance) if instance else None), problems


def reject_fields(obj, path: str, cloud: str, fields: dict[str, tuple[str, str]]) -> list[Problem]:
    """Fields that only another cloud understands are mistakes, not silently ignored settings."""
    problems = []
    for attr, (alias, owner) in fields.items():
        value = getattr(obj, attr)
        if value is not None:
            problems.append(Problem(f"{path}.{alias}", f"{value!r} is not used on {cloud}; {alias} applies to {owner} only"))
    return problems


# Cluster fields that belong to one cloud each.
CLUSTER_FIELDS = {"resource_group": ("resourceGroup", "azure"), "location": ("location", "gcp"), "subnet_ids": ("subnetIds", "aws"),
                  "secrets_encryption": ("secretsEncryption", "aws"), "control_plane_logs": ("controlPlaneLogs", "aws"),
                  "log_retention_days": ("logRetentionDays", "aws"), "authentication_mode": ("authenticationMode", "aws"),
                  "managed_addons": ("managedAddons", "aws"), "local_accounts": ("localAccounts", "azure"),
                  "azure_policy": ("azurePolicy", "azure"),
                  "defender_workspace_id": ("defenderWorkspaceId", "azure"), "network_policy": ("networkPolicy", "azure and gcp"),
                  "private_nodes": ("privateNodes", "gcp"), "release_channel": ("releaseChannel", "gcp"), "production": ("production", "gcp"),
                  "binary_authorization": ("binaryAuthorization", "gcp"), "node_service_account": ("nodeServiceAccount", "gcp"),
                  "keypair": ("keypair", "gcore")}


@dataclass(frozen=True)
class SystemPoolSize:
    """The CPU pool a new cluster gets for its add-ons: machine type and node bounds (`cluster.systemPool`, each cloud's
    default where unset)."""

    machine_type: str
    min_nodes: int
    max_nodes: int

    def nodes_at_start(self, wanted: int) -> int:
        """`wanted` nodes at creation (EKS desiredSize, AKS count), within the pool's bounds."""
        return min(max(wanted, self.min_nodes), self.max_nodes)


def system_pool_size(cluster, default: SystemPoolSize) -> SystemPoolSize:
    """The stack's system pool: each unset key the cloud's default; maxNodes unset follows a minNodes above the default."""
    given = cluster.system_pool
    if given is None:
        return default
    low = given.min_nodes if given.min_nodes is not None else default.min_nodes
    high = given.max_nodes if given.max_nodes is not None else max(default.max_nodes, low)
    return SystemPoolSize(given.machine_type or default.machine_type, low, high)


def system_pool_problems(cluster, cloud: str, default: SystemPoolSize, pattern: str, words: str, most: int, bound: str,
                         catalog: Catalog) -> list[Problem]:
    """`cluster.systemPool` against the cloud: a new cluster only, a machine type of the cloud's form that the catalog does
    not list as a GPU type, and minNodes <= maxNodes <= `most` (`bound`: the cloud's limit, in words)."""
    given = cluster.system_pool
    if given is None:
        return []
    if not cluster.create:
        return [Problem("cluster.systemPool", "applies to a new cluster (create: true) only; gpupools adds no system pool to an existing "
                                              "cluster: drop systemPool")]
    problems = []
    size = system_pool_size(cluster, default)
    kind = KIND[cloud]
    if given.machine_type is not None:
        where = "cluster.systemPool.machineType"
        other = catalog.cloud_of(given.machine_type)
        if not re.fullmatch(pattern, given.machine_type):
            problems.append(Problem(where, f"{given.machine_type!r} is not {words}"))
        elif catalog.instance(cloud, given.machine_type) is not None:
            problems.append(Problem(where, f"{given.machine_type!r} is a GPU {kind} (gpupools catalog); the system pool runs the cluster's "
                                           f"add-ons on CPU nodes: pick a CPU {kind} such as {default.machine_type}"))
        elif other is not None and other != cloud:
            problems.append(Problem(where, f"{given.machine_type!r} is {_a(other)} {other} {KIND[other]}; pick {_a(cloud)} {cloud} {kind} "
                                           f"such as {default.machine_type}"))
    if size.max_nodes > most:
        problems.append(Problem("cluster.systemPool.maxNodes", f"{size.max_nodes} is more than {bound} allows ({most})"))
    if size.min_nodes > size.max_nodes:
        problems.append(Problem("cluster.systemPool.minNodes", f"{size.min_nodes} is above maxNodes ({size.max_nodes}); set minNodes <= maxNodes"))
    return problems


def shared_cluster_problems(cluster, cloud: str) -> list[Problem]:
    """Fields of another cloud, and an API endpoint whose access settings contradict each other."""
    problems = reject_fields(cluster, "cluster", cloud, {k: v for k, v in CLUSTER_FIELDS.items() if cloud not in v[1].split(" and ")})
    cidrs, access = cluster.authorized_cidrs, cluster.endpoint_access
    if access == "restricted" and not cidrs:
        problems.append(Problem("cluster.authorizedCidrs", "empty, but endpointAccess is restricted: list the networks that may reach the "
                                                           "Kubernetes API (such as 203.0.113.0/24), or set endpointAccess: private"))
    elif access in ("private", "public") and cidrs:
        problems.append(Problem("cluster.authorizedCidrs", f"given, but endpointAccess is {access}; authorized ranges apply to a restricted "
                                                           f"endpoint only (drop endpointAccess, or set it to restricted)"))
    elif access is None and cidrs is not None and not cidrs:
        problems.append(Problem("cluster.authorizedCidrs", "empty: list the networks that may reach the Kubernetes API, or leave it out "
                                                           "for a private endpoint"))
    return problems


@dataclass(frozen=True)
class Control:
    """One hardening control of a new cluster: what it is, what this stack gets, the key that switches it, and the
    policy that proves it. `gpupools plan` prints them; docs/pools.md's table is these rows for a stack that says nothing."""

    name: str
    setting: str
    key: str
    policy: str


def endpoint_control(cluster) -> Control:
    mode = cluster.endpoint_mode
    setting = {"private": "private", "public": "public to any address",
               "restricted": f"restricted to {', '.join(cluster.authorized_cidrs or [])}"}[mode]
    share = too_open(cluster.authorized_cidrs or []) if mode == "restricted" else None
    if share:
        # Ranges that together open more than one organization's addresses restrict nothing, however they are spelled
        # (0.0.0.0/1 with 128.0.0.0/1 is 0.0.0.0/0): judged as cluster-endpoint-restricted judges them.
        setting = f"open to {share} (authorizedCidrs: {', '.join(cluster.authorized_cidrs or [])}; `gpupools check` fails it)"
    return Control("API endpoint", setting, "endpointAccess, authorizedCidrs", "cluster-endpoint-restricted")


def on_off(value: bool) -> str:
    return "on" if value else "off"


@dataclass(frozen=True)
class KubernetesRelease:
    """One Kubernetes minor on one managed service: when it came, when standard support ends, and when any paid
    extended (or long-term) support ends; None where the service offers none for everyone."""

    minor: str
    released: date
    end_of_standard: date
    end_of_extended: date | None = None


def minor_key(minor: str) -> tuple[int, int]:
    major, _, rest = minor.partition(".")
    return int(major), int(rest)


def newest(releases: dict[str, KubernetesRelease]) -> str:
    """New clusters get the newest minor of the table: the longest standard support ahead of them."""
    return max(releases, key=minor_key)


def supported_minors(releases: dict[str, KubernetesRelease], today: date) -> list[str]:
    return sorted((m for m, r in releases.items() if r.end_of_standard >= today), key=minor_key)


def past_standard_support(releases: dict[str, KubernetesRelease], minor: str, today: date) -> KubernetesRelease | None:
    release = releases.get(minor)
    return release if release is not None and release.end_of_standard < today else None


def version_problems(cluster, releases: dict[str, KubernetesRelease], service: str, today: date) -> list[Problem]:
    """A version the service does not offer is an error; one past standard support is an error for a new
    cluster unless the service still sells extended support for it (the policy pack then flags it)."""
    minor = cluster.kubernetes_version
    if minor is None:
        return []
    where = "cluster.kubernetesVersion"
    supported = ", ".join(supported_minors(releases, today))
    release = releases.get(minor)
    if release is None:
        return [Problem(where, f"{minor!r} is not a Kubernetes version {service} offers; supported: {supported}")]
    if release.end_of_standard >= today or not cluster.create:
        return []
    if release.end_of_extended is None or release.end_of_extended < today:
        return [Problem(where, f"{minor!r} left {service} support on {release.end_of_extended or release.end_of_standard}; "
                               f"{service} creates no new clusters on it; supported: {supported}")]
    return []


def zone_letter_problems(pool: Pool, path: str, region: str | None, example: str) -> list[Problem]:
    """Zones named <region><letter> (AWS) or <region>-<letter> (GCP) must belong to the cluster's region."""
    if not pool.zones or region is None:
        return []
    problems = []
    for i, zone in enumerate(pool.zones):
        suffix = zone[len(region):] if zone.startswith(region) else ""
        if not suffix or not suffix.lstrip("-").isalpha() or len(suffix.lstrip("-")) != 1:
            problems.append(Problem(f"{path}.zones[{i}]", f"{zone!r} is not a zone of region {region}; zones there are named like {example}"))
    return problems


# --------------------------------------------------------------------------------------------------------------------
# How much of the internet a list of authorized ranges lets in

# Wider than this many addresses is "the internet or most of it", whatever the spelling: more than a /8 of IPv4 (the
# largest block any one organization holds) or a /16 of IPv6 (more than a regional registry hands any one network).
MAX_OPEN_IPV4 = 2 ** (32 - 8)
MAX_OPEN_IPV6 = 2 ** (128 - 16)
# IPv6 forms that carry IPv4 addresses (RFC 4291 section 2.5.5.2): an endpoint reachable over IPv6 that authorizes
# ::ffff:0.0.0.0/96 authorizes every IPv4 address.
IPV4_MAPPED = ipaddress.ip_network("::ffff:0:0/96")


def open_addresses(ranges: Iterable[Any]) -> tuple[int, int]:
    """IPv4 and IPv6 addresses the ranges let in together, overlaps counted once; IPv4-mapped IPv6 ranges count as
    the IPv4 addresses they map. Entries that are not CIDR blocks count for nothing (the cloud refuses them)."""
    v4: list[ipaddress.IPv4Network] = []
    v6: list[ipaddress.IPv6Network] = []
    for entry in ranges:
        try:
            net = ipaddress.ip_network(str(entry).strip(), strict=False)
        except ValueError:
            continue
        if isinstance(net, ipaddress.IPv4Network):
            v4.append(net)
            continue
        v6.append(net)
        if net.subnet_of(IPV4_MAPPED):
            v4.append(ipaddress.ip_network((int(net.network_address) - int(IPV4_MAPPED.network_address), net.prefixlen - 96)))
        elif IPV4_MAPPED.subnet_of(net):
            v4.append(ipaddress.ip_network("0.0.0.0/0"))
    count = lambda nets: sum(n.num_addresses for n in ipaddress.collapse_addresses(nets))  # noqa: E731
    return count(v4), count(v6)


def too_open(ranges: Iterable[Any]) -> str | None:
    """What share of the address space the ranges open, when it is more than one organization's: else None."""
    v4, v6 = open_addresses(ranges)
    parts = []
    if v4 > MAX_OPEN_IPV4:
        parts.append(_share(v4 / 2**32, "IPv4"))
    if v6 > MAX_OPEN_IPV6:
        parts.append(_share(v6 / 2**128, "IPv6"))
    if not parts:
        return None
    whole = v4 >= 2**32 or v6 >= 2**128
    return ("the whole internet (" if whole else "") + " and ".join(parts) + (")" if whole else "")


def _share(fraction: float, family: str) -> str:
    if fraction >= 1:
        return f"every {family} address"
    return f"{fraction:.0%} of all {family} addresses" if fraction >= 0.01 else f"{fraction:.2%} of all {family} addresses"


# --------------------------------------------------------------------------------------------------------------------
# Managed modes: the answers of a cloud whose pools are gpupools' own (standard mode)

STANDARD_ONLY = ("standard",)


def no_managed_pool_problems(pool: Pool, path: str, installer: str, cluster) -> list[Problem]:
    """What the cluster's managed mode refuses of a pool: nothing in standard mode."""
    return []


def no_pod_node_selector(pool: Pool) -> dict[str, str]:
    """Nothing beside the pool label: the pool's nodes exist (or their NodePool does) before any pod asks."""
    return {}


def same_plan(plan):
    """A planned pool as its nodes carry it: unchanged where gpupools makes the nodes (their labels and taints are the
    plan's)."""
    return plan
