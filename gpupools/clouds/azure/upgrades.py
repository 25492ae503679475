"""AKS: day two: node upgrades, maintenance windows and exclusions, and the plan's upgrade lines.
"""

from __future__ import annotations



from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.upgrades.policy import PoolUpgrade, Window, options as upgrade_options, pool_upgrade, wait_text


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
