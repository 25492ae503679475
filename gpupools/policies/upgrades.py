"""Day two: upgrades that may kill a training run, reserved pools set to surge into capacity they do not have, reserved
pools with no maintenance window, and GPU driver upgrades that do not wait for jobs or take every node at once
(docs/upgrades.md)."""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy, StackValidationArgs, StackValidationPolicy

from gpupools.capacity.sources import RESERVED_NODES_KEY
from gpupools.clouds.registry import MANAGED
from gpupools.clouds.gcp import RESERVED_NODES_LABEL, UPGRADES_RESOURCE_LABEL
from gpupools.policies._readback import (AKS_AGENT_POOL, AKS_CLUSTER, EKS_NODE_GROUP, GKE_CLUSTER, GKE_NODE_POOL, HELM_RELEASE, KARPENTER_NODE_POOL,
                                      _chart_name, is_gpu_pool, karpenter_target)
from gpupools.policies._props import as_int, get, is_unknown, items
from gpupools.upgrades.nodepool import DEFAULT_EXPIRE_AFTER, minutes_of
from gpupools.upgrades.policy import UPGRADES_LABEL

AKS_MAINTENANCE = "azure-native:containerservice:MaintenanceConfiguration"
NODE_OS_SCHEDULE = "aksManagedNodeOSUpgradeSchedule"


def pool_kind(resource_type: str, props) -> str | None:
    """`training` or `inference` as gpupools marks a pool's cloud resource (node group tag, NodePool label, GKE resource
    label, agent pool tag); None for a pool it did not mark."""
    if resource_type == KARPENTER_NODE_POOL:
        return get(props, "metadata", "labels", UPGRADES_LABEL)
    if resource_type == GKE_NODE_POOL:
        return get(props, "nodeConfig", "resourceLabels", UPGRADES_RESOURCE_LABEL)
    return get(props, "tags", UPGRADES_LABEL)


def reserved_nodes(resource_type: str, props) -> int:
    if resource_type == GKE_NODE_POOL:
        return as_int(get(props, "nodeConfig", "resourceLabels", RESERVED_NODES_LABEL)) or 0
    if resource_type == KARPENTER_NODE_POOL:
        return as_int(get(props, "metadata", "annotations", RESERVED_NODES_KEY)) or 0
    return as_int(get(props, "tags", RESERVED_NODES_KEY)) or 0


# --------------------------------------------------------------------------------------------------------------------
# training-pool-upgrades


def validate_training_upgrades(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """A Karpenter NodePool of a training pool: expiry is forceful (it ignores budgets and karpenter.sh/do-not-disrupt), a
    terminationGracePeriod lets drift delete a running Job's pods when it runs out, and without a budget of 0 Drifted
    nodes drift may take a node at any hour (Karpenter docs, concepts/disruption.md @ v1.14.1)."""
    typ, props = args.resource_type, args.props
    if typ != KARPENTER_NODE_POOL or pool_kind(typ, props) != "training":
        return
    spec = get(props, "spec", "template", "spec")
    expire = get(spec, "expireAfter")
    grace = get(spec, "terminationGracePeriod")
    # A mode whose Karpenter ends every node after a while and always drains under a grace period (EKS Auto Mode: 21
    # days, 24h by default; clouds.aws.auto_mode, karpenter_disruption): Never and an unset grace period are not to be had
    # there, only a lifetime that fits.
    mode = MANAGED.get(karpenter_target(props))
    capped = getattr(mode, "MAX_NODE_LIFETIME_MINUTES", None)
    if capped is not None:
        if is_unknown(expire) or is_unknown(grace):
            return
        life, wait = minutes_of(str(expire or DEFAULT_EXPIRE_AFTER)), minutes_of(str(grace or mode.DEFAULT_GRACE))
        if life is None or wait is None or life + wait > capped:
            report(f"training NodePool {args.name!r} on {mode.AUTOSCALER_NAME}: expireAfter {expire or '720h (the default)'} plus "
                   f"terminationGracePeriod {grace or mode.DEFAULT_GRACE} exceeds the {capped // 1440} days it gives a node, and it "
                   f"refuses the NodePool", None)
    elif not is_unknown(expire) and expire != "Never":
        report(f"training NodePool {args.name!r} expires its nodes after {expire or '720h (the default)'}: expiry ignores disruption "
               f"budgets and karpenter.sh/do-not-disrupt, so a job longer than that is killed; set expireAfter: Never", None)
    if capped is None and grace is not None and not is_unknown(grace):
        report(f"training NodePool {args.name!r} sets terminationGracePeriod {grace}: a drifted node's running Job is deleted when it runs "
               f"out, karpenter.sh/do-not-disrupt or not; leave it unset", None)
    budgets = get(props, "spec", "disruption", "budgets")
    if is_unknown(budgets):
        return
    closed = [b for b in items(budgets) if get(b, "nodes") == "0" and get(b, "schedule") and "Drifted" in (items(get(b, "reasons")) or ["Drifted"])]
    if not closed:
        report(f"training NodePool {args.name!r} has no budget of 0 Drifted nodes outside a maintenance window: a new AMI replaces its "
               f"nodes at any hour (gpupools: upgrades.window)", None)


training_pool_upgrades = ResourceValidationPolicy(
    name="training-pool-upgrades",
    description="Training pools' nodes are not expired, force-drained or drifted outside the maintenance window while jobs run.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_training_upgrades,
)

# --------------------------------------------------------------------------------------------------------------------
# reserved-pool-no-surge


def validate_reserved_surge(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """A surge node needs capacity beside the pool's nodes: GKE counts upgrade nodes against the reservation (GKE
    node-upgrades-quota), and an EKS node group's DEFAULT update launches new instances before terminating old ones,
    which a Capacity Block has no room for."""
    typ, props = args.resource_type, args.props
    if typ == GKE_NODE_POOL and get(props, "nodeConfig", "reservationAffinity", "consumeReservationType") == "SPECIFIC_RESERVATION":
        settings = get(props, "upgradeSettings")
        if is_unknown(settings):
            return
        strategy = get(settings, "strategy") or "SURGE"
        surge = as_int(get(settings, "maxSurge"))
        surge = 1 if surge is None and strategy == "SURGE" else (surge or 0)  # GKE's default surge is one node
        spare = reserved_nodes(typ, props) - (as_int(get(props, "autoscaling", "totalMaxNodeCount")) or 0)
        if strategy == "BLUE_GREEN":
            report(f"GKE node pool {args.name!r} consumes a specific reservation and upgrades blue-green, which needs a second set of nodes "
                   f"the reservation does not hold; use SURGE with maxSurge 0", None)
        elif surge > max(spare, 0):
            report(f"GKE node pool {args.name!r} consumes a specific reservation but surges {surge} node{'s' if surge != 1 else ''} past "
                   f"its {max(spare, 0)} spare reserved nodes: the upgrade cannot start them and stalls; set upgradeSettings.maxSurge 0 "
                   f"and maxUnavailable 1", None)
    elif typ == EKS_NODE_GROUP and get(props, "capacityType") == "CAPACITY_BLOCK":
        strategy = get(props, "updateConfig", "updateStrategy")
        if not is_unknown(strategy) and strategy != "MINIMAL":
            report(f"node group {args.name!r} runs on a Capacity Block and updates with {strategy or 'DEFAULT'}, which launches new "
                   f"instances before terminating old ones; the block has none to spare: set updateConfig.updateStrategy MINIMAL", None)


reserved_pool_no_surge = ResourceValidationPolicy(
    name="reserved-pool-no-surge",
    description="Pools on a reservation or Capacity Block never plan an upgrade surge into capacity they do not have.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_reserved_surge,
)

# --------------------------------------------------------------------------------------------------------------------
# gke-compact-placement-upgrades


def validate_compact_upgrades(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """GKE takes no blue-green upgrade on a node pool in compact placement: GoogleCloudPlatform/cluster-toolkit v1.95.0
    modules/compute/gke-node-pool/main.tf refuses the pair ("Compact placement is not supported with blue-green
    upgrades", lines 387-390); gpupools' own fabric pools upgrade by surge (clouds.gcp, compact_upgrades)."""
    if args.resource_type != GKE_NODE_POOL:
        return
    placement, strategy = get(args.props, "placementPolicy", "type"), get(args.props, "upgradeSettings", "strategy")
    if is_unknown(placement) or is_unknown(strategy):
        return
    if placement == "COMPACT" and strategy == "BLUE_GREEN":
        report(f"GKE node pool {args.name!r} has compact placement and blue-green upgrades, which GKE does not take together; "
               f"upgrade it with SURGE (maxSurge 0, maxUnavailable 1 drains a node at a time)", None)


gke_compact_placement_upgrades = ResourceValidationPolicy(
    name="gke-compact-placement-upgrades",
    description="A GKE node pool in compact placement upgrades by surge: GKE takes no blue-green upgrade beside compact placement.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_compact_upgrades,
)

# --------------------------------------------------------------------------------------------------------------------
# reserved-pool-maintenance-window


def validate_reserved_window(args: StackValidationArgs, report: ReportViolation) -> None:
    """Reserved capacity is where the long runs are: a cluster with a reserved GPU pool has a maintenance window (GKE
    maintenancePolicy, AKS node OS schedule), and a reserved Karpenter pool drifts only on a schedule."""
    resources = args.resources
    reserved = [r for r in resources if r.resource_type in (GKE_NODE_POOL, AKS_AGENT_POOL, KARPENTER_NODE_POOL)
                and is_gpu_pool(r.resource_type, r.props) and reserved_nodes(r.resource_type, r.props) > 0]
    if not reserved:
        return
    for cluster in (r for r in resources if r.resource_type == GKE_CLUSTER):
        window = get(cluster.props, "maintenancePolicy")
        if not is_unknown(window) and not window:
            names = ", ".join(r.name for r in reserved if r.resource_type == GKE_NODE_POOL)
            report(f"GKE cluster {cluster.name!r} has reserved GPU pools ({names}) but no maintenance window: GKE upgrades their nodes at "
                   f"any hour; set maintenancePolicy (gpupools: upgrades.window)", cluster.urn)
    if any(r.resource_type == AKS_CLUSTER for r in resources) and any(r.resource_type == AKS_AGENT_POOL for r in reserved):
        schedules = [r for r in resources if r.resource_type == AKS_MAINTENANCE and get(r.props, "configName") == NODE_OS_SCHEDULE]
        if not schedules:
            report(f"AKS cluster with reserved GPU pools has no {NODE_OS_SCHEDULE} maintenance configuration: node images are rolled out "
                   f"at any hour", None)
    for pool in (r for r in reserved if r.resource_type == KARPENTER_NODE_POOL):
        budgets = get(pool.props, "spec", "disruption", "budgets")
        if not is_unknown(budgets) and not any(get(b, "schedule") for b in items(budgets)):
            report(f"reserved NodePool {pool.name!r} has no scheduled disruption budget: drift replaces its nodes at any hour", pool.urn)


reserved_pool_maintenance_window = StackValidationPolicy(
    name="reserved-pool-maintenance-window",
    description="A cluster with reserved GPU pools upgrades them only inside a maintenance window.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_reserved_window,
)

# --------------------------------------------------------------------------------------------------------------------
# gpu-driver-upgrade-policy


def _percent_or_count(value) -> tuple[int, bool] | None:
    text = str(value).strip() if value is not None else ""
    if text.endswith("%") and text[:-1].isdigit():
        return int(text[:-1]), True
    return (int(text), False) if text.isdigit() else None


def validate_driver_upgrades(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """The GPU Operator's driver upgrades (chart values `driver.upgradePolicy`, NVIDIA/gpu-operator v26.7.0): with no
    `waitForCompletion.podSelector` the upgrade controller skips waiting and deletes every GPU pod of the node (k8s-operator-libs
    ProcessWaitForJobsRequiredNodes), and a maxUnavailable of 100% takes every GPU node down at once."""
    if args.resource_type != HELM_RELEASE or _chart_name(get(args.props, "chart")) != "gpu-operator":
        return
    driver = get(args.props, "values", "driver")
    if is_unknown(driver) or get(driver, "enabled") is False:
        return
    policy = get(driver, "upgradePolicy")
    if is_unknown(policy):
        return
    policy = policy or {}
    if get(policy, "autoUpgrade") is False:
        return
    if not get(policy, "waitForCompletion", "podSelector"):
        report(f"release {args.name!r}: GPU driver upgrades do not wait for running jobs (driver.upgradePolicy.waitForCompletion.podSelector "
               f"is empty), so the operator deletes every GPU pod of each node it upgrades; select the jobs' pods, e.g. "
               f"batch.kubernetes.io/job-name", None)
    unavailable = _percent_or_count(get(policy, "maxUnavailable", default="25%"))
    # The chart's values.yaml sets maxParallelUpgrades 1; 0 lifts the limit (the CRD's DriverUpgradePolicySpec).
    parallel = as_int(get(policy, "maxParallelUpgrades", default=1))
    if unavailable is not None and unavailable[1] and unavailable[0] >= 100 and parallel == 0:
        report(f"release {args.name!r}: GPU driver upgrades may take every GPU node down at once (maxUnavailable {unavailable[0]}%, "
               f"maxParallelUpgrades 0: no limit); set maxUnavailable 1 or maxParallelUpgrades 1", None)


gpu_driver_upgrade_policy = ResourceValidationPolicy(
    name="gpu-driver-upgrade-policy",
    description="GPU Operator driver upgrades wait for running jobs and never drain every GPU node at once.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_driver_upgrades,
)

POLICIES = [training_pool_upgrades, reserved_pool_no_surge, gke_compact_placement_upgrades, reserved_pool_maintenance_window,
            gpu_driver_upgrade_policy]
