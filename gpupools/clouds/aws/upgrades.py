"""EKS: day two: managed node group updates, Karpenter drift and expiry, maintenance windows, and the plan's upgrade
lines.
"""

from __future__ import annotations




from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.capacity import sources as capacity
from gpupools.upgrades.policy import PoolUpgrade, Window, pool_upgrade, wait_text
from gpupools.upgrades.nodepool import cron, drift_budgets, duration  # noqa: F401 (cron, duration: the budgets' format)
from gpupools.clouds.aws.capacity import BLOCK_DRAIN_MINUTES, _is_karpenter


# --------------------------------------------------------------------------------------------------------------------
# Day two: node group updates and Karpenter drift (docs/upgrades.md)
#
# A managed node group is updated only when its version, AMI release or launch template changes (EKS never upgrades one
# by itself): `DEFAULT` launches new instances first, `MINIMAL` terminates old ones before launching ("useful ... with
# hardware accelerators such as GPUs", botocore 1.44.8 eks NodegroupUpdateConfig.updateStrategy); maxUnavailable is at
# least 1 (NonZeroInteger). Draining a node respects PodDisruptionBudgets for 15 minutes, then the update fails with
# PodEvictionFailure unless forced (awsdocs/amazon-eks-user-guide latest/ug/nodes/managed-node-update-behavior.adoc);
# gpupools never sets force, so a Job its PodDisruptionBudget protects fails the update instead of dying.
NODE_GROUP_DRAIN_MINUTES = 15


def node_group_update_config(pool: Pool) -> dict:
    """CreateNodegroup updateConfig: a surge launches first (DEFAULT), no surge terminates first (MINIMAL)."""
    policy = pool_upgrade(pool)
    return {"max_unavailable": max(1, policy.max_unavailable), "update_strategy": "DEFAULT" if policy.max_surge else "MINIMAL"}


def pool_upgrade_problems(pool: Pool, policy: PoolUpgrade, path: str, autoscaler: str) -> list[Problem]:
    return []


def maintenance_problems(cluster: Cluster, upgrades, window: Window, autoscaler: str) -> list[Problem]:
    """EKS has no maintenance exclusions: Karpenter's budgets repeat weekly and node groups change only when the stack
    does."""
    if upgrades.exclusions:
        return [Problem("upgrades.exclusions", "EKS has no maintenance exclusions: Karpenter's disruption budgets repeat every week and node "
                                               "groups change only when `pulumi up` changes them; remove exclusions (the window still applies)")]
    return []


def karpenter_disruption(pool: Pool, window: Window) -> dict:
    """The NodePool's disruption and node lifetime (karpenter.sh/v1, the pinned karpenter.sh_nodepools.yaml).

    Training: drift (a new AMI, a changed NodePool or EC2NodeClass) only inside the window, `maxUnavailable` nodes at a
    time: a budget of 0 Drifted nodes over every closed stretch of the week (`schedule` and `duration` together, the
    CRD's one CEL rule; cron in UTC), and `maxUnavailable` otherwise. No terminationGracePeriod, so a node whose pods
    carry karpenter.sh/do-not-disrupt is not drifted until they end, and `expireAfter: Never`, since expiry is forceful
    and ignores budgets and do-not-disrupt (Karpenter docs, concepts/disruption.md @ v1.14.1, "Expiration").
    Inference: Karpenter's 30-day lifetime, any time, and pods get `waitForJobs` to leave (terminationGracePeriod)."""
    policy = pool_upgrade(pool)
    empty = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": KARPENTER_CONSOLIDATE_AFTER}
    if not policy.training:
        return {"expireAfter": KARPENTER_EXPIRE_AFTER, "terminationGracePeriod": f"{policy.wait_minutes}m",
                "disruption": {**empty, "budgets": drift_budgets(policy, window)}}
    return {"expireAfter": "Never", "disruption": {**empty, "budgets": drift_budgets(policy, window)}}


# Karpenter's own node lifetime (the NodePool CRD's default) and how long an empty GPU node is kept.
KARPENTER_EXPIRE_AFTER = "720h"
KARPENTER_CONSOLIDATE_AFTER = "10m"


def upgrade_lines(pool: Pool, policy: PoolUpgrade, window: Window, cluster: Cluster, autoscaler: str) -> list[str]:
    """What the next AMI, Kubernetes version or node class change does to the pool."""
    lines = []
    blocks = capacity.blocks(pool)
    full = policy.spare_reserved == 0
    if _is_karpenter(autoscaler):
        if policy.training:
            lines.append(f"training: new AMIs and NodePool changes reach the nodes by Karpenter drift only {window.text}, "
                         f"{max(1, policy.max_unavailable)} node at a time; a node running a Job (karpenter.sh/do-not-disrupt) is left until "
                         f"the Job ends (no terminationGracePeriod); nodes never expire (expireAfter Never)")
        else:
            lines.append(f"inference: drift at any time, {max(1, policy.max_unavailable, policy.max_surge)} node at a time, a replacement "
                         f"started first; nodes expire after 30 days; pods get {wait_text(policy.wait_minutes)} to leave (terminationGracePeriod)")
        if full:
            lines.append("reserved: drift starts a replacement before draining a node with pods, and a full reservation has no room for one: "
                         "busy nodes are replaced once they are empty, never surged past the reservation")
        if blocks:
            lines.append(f"Capacity Block: its nodes end with the block anyway (Karpenter drains them {BLOCK_DRAIN_MINUTES} minutes before)")
        if pool.min_nodes:
            lines.append(f"the {pool.name}-floor node group: " + _node_group_story(pool, policy, window))
        return lines
    lines.append(_node_group_story(pool, policy, window))
    if blocks:
        lines.append("Capacity Block: EKS asks for the group's desired size at 0 while it is updated; update it between blocks")
    return lines


def _node_group_story(pool: Pool, policy: PoolUpgrade, window: Window) -> str:
    how = ("launches new nodes first (DEFAULT)" if policy.max_surge else "drains before launching, no node beyond the group (MINIMAL)")
    when = f"; run `pulumi up` with a version change inside the window, {window.text}" if policy.training else ""
    return (f"{policy.kind}: EKS updates the node group only when the stack changes its version or launch template{when}; it {how}, "
            f"{max(1, policy.max_unavailable)} node at a time; a Job whose PodDisruptionBudget forbids eviction holds its node "
            f"{NODE_GROUP_DRAIN_MINUTES} min, then the update fails (gpupools never forces it) and the Job runs on")
