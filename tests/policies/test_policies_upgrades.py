"""Day-two policies: the resources gpupools plans pass, and the dangerous combinations are reported."""

from __future__ import annotations

import copy

import pytest

from conftest import plan_of, stack_config
from test_policies import EKS, GKE, resource_violations, stack_violations

KARPENTER = "kubernetes:karpenter.sh/v1:NodePool"
AKS = "azure-native:containerservice:AgentPool"
RELEASE = "kubernetes:helm.sh/v3:Release"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
A3_RES = {"name": "res", "instanceType": "a3-highgpu-8g", "maxNodes": 2,
          "capacity": [{"reservation": {"id": "h100-res", "zones": ["us-central1-a"], "nodes": 2}}]}
BLOCK = {"reservation": {"id": "cr-0123456789abcdef0", "kind": "capacity-block", "zones": ["eu-central-1a"], "nodes": 2}}


@pytest.fixture(scope="module")
def karpenter():
    return plan_of(stack_config("aws", pools=[{"name": "train", "instanceType": "p4d.24xlarge", "maxNodes": 2},
                                              {"name": "serve", "instanceType": "g5.2xlarge", "maxNodes": 2, "upgrades": "inference"}]))


def test_planned_training_node_pools_pass_and_each_danger_is_reported(karpenter):
    train = karpenter.get(KARPENTER, "nodepool-gpupools-train").inputs
    assert resource_violations("training-pool-upgrades", KARPENTER, train) == []
    # Inference pools expire and have a grace period on purpose.
    assert resource_violations("training-pool-upgrades", KARPENTER, karpenter.get(KARPENTER, "nodepool-gpupools-serve").inputs) == []
    expiring = copy.deepcopy(train)
    expiring["spec"]["template"]["spec"]["expireAfter"] = "168h"
    (message,) = resource_violations("training-pool-upgrades", KARPENTER, expiring)
    assert "expires its nodes after 168h" in message and "expireAfter: Never" in message
    graceful = copy.deepcopy(train)
    graceful["spec"]["template"]["spec"]["terminationGracePeriod"] = "1h"
    (message,) = resource_violations("training-pool-upgrades", KARPENTER, graceful)
    assert "terminationGracePeriod 1h" in message
    unscheduled = copy.deepcopy(train)
    unscheduled["spec"]["disruption"]["budgets"] = [{"nodes": "1", "reasons": ["Drifted"]}]
    (message,) = resource_violations("training-pool-upgrades", KARPENTER, unscheduled)
    assert "no budget of 0 Drifted nodes" in message


def test_reserved_gke_pool_set_to_surge_is_reported():
    plan = plan_of(stack_config("gcp", pools=[A3_RES]))
    pool = plan.get(GKE, "res").inputs
    assert pool["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}
    assert resource_violations("reserved-pool-no-surge", GKE, pool) == []
    surging = copy.deepcopy(pool)
    surging["upgradeSettings"]["maxSurge"] = 1
    (message,) = resource_violations("reserved-pool-no-surge", GKE, surging)
    assert "surges 1 node past its 0 spare reserved nodes" in message
    defaulted = copy.deepcopy(pool)
    del defaulted["upgradeSettings"]
    assert len(resource_violations("reserved-pool-no-surge", GKE, defaulted)) == 1  # GKE's own default surges one node
    blue_green = copy.deepcopy(pool)
    blue_green["upgradeSettings"] = {"strategy": "BLUE_GREEN"}
    (message,) = resource_violations("reserved-pool-no-surge", GKE, blue_green)
    assert "blue-green" in message


def test_gke_compact_placement_with_blue_green_is_refused():
    plan = plan_of(stack_config("gcp", pools=[{"name": "train", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "zones": ["us-central1-a"]},
                                              {"name": "free", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "zones": ["us-central1-a"],
                                               "fabric": "none"}]))
    compact, free = plan.get(GKE, "train").inputs, plan.get(GKE, "free").inputs
    assert compact["placementPolicy"] == {"type": "COMPACT"} and compact["upgradeSettings"]["strategy"] == "SURGE"
    assert free["upgradeSettings"]["strategy"] == "BLUE_GREEN" and "placementPolicy" not in free
    assert resource_violations("gke-compact-placement-upgrades", GKE, compact) == []
    assert resource_violations("gke-compact-placement-upgrades", GKE, free) == []  # blue-green alone is fine
    forced = copy.deepcopy(compact)
    forced["upgradeSettings"] = free["upgradeSettings"]
    (message,) = resource_violations("gke-compact-placement-upgrades", GKE, forced)
    assert "has compact placement and blue-green upgrades, which GKE does not take together" in message and "SURGE" in message
    from pulumi_policy import EnforcementLevel

    from gpupools.policies.pack import by_name

    assert by_name()["gke-compact-placement-upgrades"].enforcement_level == EnforcementLevel.MANDATORY


def test_capacity_block_node_group_launching_first_is_reported():
    plan = plan_of(stack_config("aws", autoscaler="cluster-autoscaler", pools=[
        {"name": "block", "instanceType": "p4d.24xlarge", "maxNodes": 2, "capacity": [BLOCK], "upgrades": "inference"}]))
    group = plan.get(EKS, "block").inputs
    assert group["updateConfig"]["updateStrategy"] == "MINIMAL"
    assert resource_violations("reserved-pool-no-surge", EKS, group) == []
    group["updateConfig"]["updateStrategy"] = "DEFAULT"
    (message,) = resource_violations("reserved-pool-no-surge", EKS, group)
    assert "set updateConfig.updateStrategy MINIMAL" in message


def test_reserved_pools_without_a_maintenance_window_are_reported():
    plan = plan_of(stack_config("gcp", pools=[A3_RES]))
    (cluster,) = plan.of_type(GKE_CLUSTER)
    resources = [(GKE_CLUSTER, cluster.name, cluster.inputs), (GKE, "res", plan.get(GKE, "res").inputs)]
    assert stack_violations("reserved-pool-maintenance-window", resources) == []
    bare = copy.deepcopy(cluster.inputs)
    del bare["maintenancePolicy"]
    (message,) = stack_violations("reserved-pool-maintenance-window", [(GKE_CLUSTER, cluster.name, bare), resources[1]])
    assert "no maintenance window" in message and "res" in message
    # No reserved pool, no window needed.
    hourly = plan_of(stack_config("gcp"))
    (plain,) = hourly.of_type(GKE_CLUSTER)
    del plain.inputs["maintenancePolicy"]
    assert stack_violations("reserved-pool-maintenance-window", [(GKE_CLUSTER, plain.name, plain.inputs),
                                                                  (GKE, "infer", hourly.get(GKE, "infer").inputs)]) == []


def test_reserved_aks_and_karpenter_pools_without_schedules_are_reported():
    crg = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Compute/capacityReservationGroups/g"
    plan = plan_of(stack_config("azure", pools=[{"name": "a100", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 1,
                                                  "capacity": [{"reservation": {"id": crg, "nodes": 1}}, "on-demand"]}]))
    everything = [(r.type, r.name, r.inputs) for r in plan.resources]
    assert stack_violations("reserved-pool-maintenance-window", everything) == []
    without = [r for r in everything if r[0] != "azure-native:containerservice:MaintenanceConfiguration"]
    (message,) = stack_violations("reserved-pool-maintenance-window", without)
    assert "aksManagedNodeOSUpgradeSchedule" in message
    block = plan_of(stack_config("aws", pools=[{"name": "h", "instanceType": "p4d.24xlarge", "maxNodes": 2, "capacity": [BLOCK]}]))
    pool = block.get(KARPENTER, "nodepool-gpupools-h").inputs
    assert stack_violations("reserved-pool-maintenance-window", [(KARPENTER, "h", pool)]) == []
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "1", "reasons": ["Drifted"]}]
    (message,) = stack_violations("reserved-pool-maintenance-window", [(KARPENTER, "h", pool)])
    assert "no scheduled disruption budget" in message


def test_driver_upgrades_that_do_not_wait_or_take_every_node_are_reported():
    plan = plan_of(stack_config("azure"))
    release = plan.get(RELEASE, "gpu-operator").inputs
    assert resource_violations("gpu-driver-upgrade-policy", RELEASE, release) == []
    blind = copy.deepcopy(release)
    blind["values"]["driver"]["upgradePolicy"]["waitForCompletion"]["podSelector"] = ""
    (message,) = resource_violations("gpu-driver-upgrade-policy", RELEASE, blind)
    assert "do not wait for running jobs" in message
    # The chart's own defaults: no pod selector.
    defaults = copy.deepcopy(release)
    del defaults["values"]["driver"]["upgradePolicy"]
    assert len(resource_violations("gpu-driver-upgrade-policy", RELEASE, defaults)) == 1
    all_at_once = copy.deepcopy(release)
    all_at_once["values"]["driver"]["upgradePolicy"].update(maxUnavailable="100%", maxParallelUpgrades=0)
    (message,) = resource_violations("gpu-driver-upgrade-policy", RELEASE, all_at_once)
    assert "every GPU node down at once" in message
    one_at_a_time = copy.deepcopy(all_at_once)
    one_at_a_time["values"]["driver"]["upgradePolicy"]["maxParallelUpgrades"] = 1
    assert resource_violations("gpu-driver-upgrade-policy", RELEASE, one_at_a_time) == []
    # EKS: the AMI brings the driver, the operator upgrades none.
    eks = plan_of(stack_config("aws")).get(RELEASE, "gpu-operator").inputs
    assert resource_violations("gpu-driver-upgrade-policy", RELEASE, eks) == []
