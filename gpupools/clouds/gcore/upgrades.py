"""Gcore: day two: which change of a pool or the cluster updates it in place, resizes it or replaces it, and the plan's
upgrade lines.
"""

from __future__ import annotations



from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.clouds.gcore.provider import SERVER_LABEL_PREFIX


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
