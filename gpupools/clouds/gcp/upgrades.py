"""GKE: day two: node upgrades, maintenance windows and exclusions, and the plan's upgrade lines.
"""

from __future__ import annotations


from datetime import date, datetime, timedelta

from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.capacity import sources as capacity
from gpupools.upgrades.policy import PoolUpgrade, Window, exclusion_days, options as upgrade_options, pool_upgrade, wait_text
from gpupools.clouds.gcp.capacity import compact_placement, uses_compute_class
from gpupools.clouds.gcp.provider import KUBERNETES_RELEASES


DEFAULT_RELEASE_CHANNEL = "REGULAR"


# --------------------------------------------------------------------------------------------------------------------
# Day two: maintenance window and exclusions, node pool upgrade strategy (docs/upgrades.md)
#
# On a release channel GKE upgrades the control plane and the nodes by itself, and node auto-upgrade cannot be turned
# off ("Node auto-upgrade defaults to true and cannot be disabled", container v1 discovery document, ReleaseChannel); what
# holds it back is the maintenance window and maintenance exclusions (the GKE container.v1 API, MaintenanceWindow).

UPGRADES_RESOURCE_LABEL = "gpupools-upgrades"
# "You must allow at least 48 hours of maintenance availability in a 32-day rolling window. Only contiguous availability
# windows of at least four hours are considered." (cloud.google.com/kubernetes-engine/docs/how-to/maintenance-windows-and-
# exclusions, "Considerations when configuring a maintenance window").
WINDOW_MIN_HOURS = 4
WINDOW_HOURS_PER_32_DAYS = 48
# A cluster holds at most 20 exclusions (pulumi_gcp ClusterMaintenancePolicyArgs.maintenance_exclusions), which
# `Upgrades.exclusions` bounds; a "no upgrades" exclusion lasts at most 30 days, the others up to the end of the cluster
# version's support (cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions, "Scope of
# upgrades").
NO_UPGRADES_MAX_DAYS = 30
SCOPES = {"no-upgrades": "NO_UPGRADES", "no-minor-upgrades": "NO_MINOR_UPGRADES", "no-minor-or-node-upgrades": "NO_MINOR_OR_NODE_UPGRADES"}
RRULE_DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# A Monday: the recurring window's first occurrence sets only its time of day and length (the RRULE repeats it).
WINDOW_ANCHOR = date(2026, 1, 5)
# Autoscaled blue-green upgrades cordon the old nodes, let new work start on new ones, and drain the old ones after
# waitForDrainDuration: "Defaults to 3 days. The value can be set between 0 and 7 days, inclusive" (discovery document,
# AutoscaledRolloutPolicy). GKE calls the strategy Preview.
BLUE_GREEN_MAX_WAIT_MINUTES = 7 * 24 * 60


def compact_upgrades(pool: Pool, policy: PoolUpgrade) -> bool:
    """The pool's node pool gets placementPolicy COMPACT (a fabric pool where GKE takes it, `fabric_node_pool_args`), and
    with it no blue-green upgrade: "Compact placement is not supported with blue-green upgrades" (GoogleCloudPlatform/
    cluster-toolkit v1.95.0 modules/compute/gke-node-pool/main.tf lines 387-390, a precondition on the node pool, added
    with the module's other compact placement validations in commit 862e19b8). A blue-green upgrade makes a second set
    of nodes beside the first, which one compact placement policy's group would have to hold as well."""
    return policy.fabric and compact_placement(pool)[0]


def _blue_green(pool: Pool, policy: PoolUpgrade) -> bool:
    """Training node pools with room to grow: not bound to a reservation, not flex-start or queued, their surge not
    overridden, and not in compact placement (`compact_upgrades`). A ComputeClass's node pools take the cluster's
    setting instead (`compute_class_upgrade_settings`)."""
    chosen = upgrade_options(pool)
    return (policy.training and policy.spare_reserved is None and not policy.short_lived and chosen.max_surge is None
            and chosen.max_unavailable is None and not compact_upgrades(pool, policy) and not uses_compute_class(pool))


# A ComputeClass says nothing of how its node pools are upgraded: "The following settings aren't supported by
# ComputeClasses: Surge upgrades or blue-green upgrades", and a setting the class does not give comes from the cluster's
# node auto-provisioning defaults ("Cluster-level node auto-provisioning default", the order of preference; GKE "About
# node pool auto-creation", docs.cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning). So one
# setting serves every class's node pools: the cluster's autoProvisioningDefaults.upgradeSettings (pulumi-gcp 10.2.0
# ClusterClusterAutoscalingAutoProvisioningDefaultsUpgradeSettingsArgs: strategy SURGE or BLUE_GREEN, max_surge and
# max_unavailable "Default is 0"; its blue-green takes only the standard rollout policy, not the autoscaled one).
# gpupools sets SURGE one node at a time with no surge: a pace every class can keep, since a surge node of a
# reservation priority needs reserved capacity the reservation may not hold (GKE node-upgrades-quota), and a standard
# blue-green brings up a second set of GPU nodes and drains the old ones on its own schedule, running jobs or not.
COMPUTE_CLASS_UPGRADES = {"strategy": "SURGE", "max_surge": 0, "max_unavailable": 1}


def compute_class_upgrade_settings() -> dict:
    """The cluster's autoProvisioningDefaults.upgradeSettings, which every ComputeClass's node pools take."""
    return dict(COMPUTE_CLASS_UPGRADES)


def _settings_text(settings: dict) -> str:
    """An upgradeSettings block (the provider's snake_case keys) in the plan's words."""
    if settings.get("strategy") == "BLUE_GREEN":
        return ("standard blue-green: a second set of nodes comes up beside the old ones, which are drained in batches "
                "whether jobs run on them or not")
    surge, unavailable = settings.get("max_surge") or 0, settings.get("max_unavailable") or 0
    pace = (f"surges {surge} new node{'s' if surge != 1 else ''} before draining {unavailable or 'one'} old" if surge
            else f"drains {unavailable} node{'s' if unavailable != 1 else ''} at a time, no surge")
    return f"surge strategy: {pace}; GKE respects PodDisruptionBudgets for up to an hour while draining a node, then evicts"


def upgrade_settings(pool: Pool, fabric: bool = False) -> dict | None:
    """The node pool's upgradeSettings; None for flex-start and queued pools, which GKE upgrades with short-lived upgrades
    ("For nodes that use Flex-start VMs, GKE uses short-lived upgrades", GKE node-pool-upgrade-strategies). `fabric`:
    the pool gets GPUDirect networks, and compact placement where GKE takes it, which rules blue-green out."""
    policy = pool_upgrade(pool, fabric)
    if policy.short_lived:
        return None
    if _blue_green(pool, policy):
        wait = min(policy.wait_minutes, BLUE_GREEN_MAX_WAIT_MINUTES)
        return {"strategy": "BLUE_GREEN", "blue_green_settings": {"autoscaled_rollout_policy": {"wait_for_drain_duration": f"{wait * 60}s"}}}
    # Surge into a reservation needs spare reserved nodes: "All nodes that GKE creates, including nodes used for upgrades,
    # are subject to ... reservation capacity" (GKE node-upgrades-quota); pool_upgrade never surges past them.
    return {"strategy": "SURGE", "max_surge": policy.max_surge, "max_unavailable": policy.max_unavailable}


def _day(text: str, offset: int = 0) -> str:
    return (date.fromisoformat(text) + timedelta(days=offset)).isoformat() + "T00:00:00Z"


def maintenance_policy(upgrades, window: Window) -> dict:
    """The cluster's recurring window (UTC, as GKE reports it back: another zone would show as a permanent diff) and its
    exclusions, each from its first day's midnight to the midnight after its last day."""
    first = WINDOW_ANCHOR + timedelta(days=window.days[0])
    start = datetime(first.year, first.month, first.day, window.start // 60, window.start % 60)
    end = start + timedelta(hours=window.hours)
    recurrence = "FREQ=DAILY" if window.daily else "FREQ=WEEKLY;BYDAY=" + ",".join(RRULE_DAYS[d] for d in window.days)
    policy: dict = {"recurring_window": {"start_time": start.strftime("%Y-%m-%dT%H:%M:%SZ"), "end_time": end.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                         "recurrence": recurrence}}
    if upgrades.exclusions:
        policy["maintenance_exclusions"] = [{"exclusion_name": ex.name, "start_time": _day(ex.start), "end_time": _day(ex.end, 1),
                                             "exclusion_options": {"scope": SCOPES[ex.scope]}} for ex in upgrades.exclusions]
    return policy


def pool_upgrade_problems(pool: Pool, policy: PoolUpgrade, path: str, autoscaler: str) -> list[Problem]:
    chosen = upgrade_options(pool)
    if uses_compute_class(pool):
        given = [(alias, value) for alias, value in (("maxSurge", chosen.max_surge), ("maxUnavailable", chosen.max_unavailable)) if value is not None]
        return [Problem(f"{path}.{alias}", f"{value}, but GKE takes no upgrade settings per ComputeClass: every class's node pools take the "
                                           f"cluster's node auto-provisioning default ({_settings_text(compute_class_upgrade_settings()).split(';')[0]}); "
                                           f"drop {alias}, or make the pool a node-pool")
                for alias, value in given]
    if _blue_green(pool, policy) and policy.wait_minutes > BLUE_GREEN_MAX_WAIT_MINUTES and chosen.wait_for_jobs is not None:
        return [Problem(f"{path}.waitForJobs", f"{chosen.wait_for_jobs}: a GKE blue-green upgrade waits at most 7 days (168h) before draining")]
    return []


def maintenance_problems(cluster: Cluster, upgrades, window: Window, autoscaler: str) -> list[Problem]:
    problems = []
    if window.hours < WINDOW_MIN_HOURS:
        problems.append(Problem("upgrades.window.hours", f"{window.hours}: GKE counts only windows of at least {WINDOW_MIN_HOURS} hours"))
    elif window.min_hours_in(32) < WINDOW_HOURS_PER_32_DAYS:
        problems.append(Problem("upgrades.window", f"{window.text} opens {window.min_hours_in(32)} hours in the least open 32 days; GKE needs "
                                                   f"at least {WINDOW_HOURS_PER_32_DAYS} (more days, or more hours)"))
    release = KUBERNETES_RELEASES.get(cluster.kubernetes_version or "")
    for j, ex in enumerate(upgrades.exclusions):
        days = exclusion_days(ex.start, ex.end)
        if ex.scope == "no-upgrades" and days > NO_UPGRADES_MAX_DAYS:
            problems.append(Problem(f"upgrades.exclusions[{j}].end", f"{days} days; a GKE no-upgrades exclusion lasts at most {NO_UPGRADES_MAX_DAYS} "
                                                                     f"days (no-minor-or-node-upgrades lasts up to the version's end of support)"))
        elif release is not None and date.fromisoformat(ex.end) > release.end_of_standard:
            problems.append(Problem(f"upgrades.exclusions[{j}].end", f"{ex.end} is past the end of GKE's standard support for {release.minor} "
                                                                     f"({release.end_of_standard}), where an exclusion ends"))
    return problems


def upgrade_lines(pool: Pool, policy: PoolUpgrade, window: Window, cluster: Cluster, autoscaler: str) -> list[str]:
    when = (f"GKE auto-upgrades nodes ({cluster.release_channel or DEFAULT_RELEASE_CHANNEL} channel; it cannot be turned off) only {window.text}"
            if cluster.create else "GKE auto-upgrades nodes in the existing cluster's own maintenance window (not changed by gpupools)")
    lines = [f"{policy.kind}: {when}, never during its maintenance exclusions"]
    if uses_compute_class(pool):
        return lines + compute_class_upgrade_lines(pool, cluster)
    if policy.short_lived:
        lines.append("flex-start/queued: GKE's short-lived upgrades: running nodes keep their version until their run ends, new nodes start "
                     "on the new one; no node is drained for an upgrade")
    elif _blue_green(pool, policy):
        wait = min(policy.wait_minutes, BLUE_GREEN_MAX_WAIT_MINUTES)
        lines.append(f"autoscaled blue-green (GKE Preview): the old nodes are cordoned and new Jobs start on new nodes; an old node is drained "
                     f"once empty or after {wait_text(wait)} (waitForDrainDuration)")
    else:
        # GKE's node-pool-upgrade-strategies page: a surge upgrade respects PodDisruptionBudgets for up to 60 minutes per
        # node, then drains it anyway; a long run is held back by an exclusion, not by its budget.
        lines.append(f"surge strategy: {policy.surge_text}; GKE respects PodDisruptionBudgets for up to an hour while draining a node, then evicts"
                     + (" (no blue-green: GKE takes none beside compact placement)" if compact_upgrades(pool, policy) else ""))
    if policy.spare_reserved is not None:
        lines.append(f"reserved: never surges past the reservation ({policy.spare_reserved} spare reserved node"
                     f"{'s' if policy.spare_reserved != 1 else ''})")
    return lines

def compute_class_upgrade_lines(pool: Pool, cluster: Cluster) -> list[str]:
    """How GKE upgrades a ComputeClass's node pools: the cluster's node auto-provisioning default, which gpupools sets on a
    cluster it creates (`auto_provisioning_args`), and short-lived upgrades for the nodes of a flex-start priority."""
    if cluster.create:
        lines = [(f"ComputeClass node pools: {_settings_text(compute_class_upgrade_settings())} (the cluster's node auto-provisioning "
                  f"default, autoProvisioningDefaults.upgradeSettings: GKE takes no upgrade strategy per class)")]
    else:
        lines = [("ComputeClass node pools: the existing cluster's node auto-provisioning default upgradeSettings (not changed by "
                  "gpupools; GKE takes no upgrade strategy per class)")]
    if capacity.has(pool, capacity.FLEX_START):
        lines.append("flex-start priority: GKE's short-lived upgrades: running nodes keep their version until their run ends, new nodes "
                     "start on the new one")
    return lines
