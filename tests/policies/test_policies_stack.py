"""Stack policies (budget, monitoring, team quotas) on a small happy-path fleet, one field changed at a time."""

from __future__ import annotations

import pytest

from gpupools.validation.stack import validate_stack
from gpupools.pools.planning import plan_pools
from gpupools.queues.teams import pool_totals, quota_ratios as planned_ratios

from conftest import stack_config
from test_policies import AKS, CONFIGMAP, EKS, GKE, QUOTA, RELEASE, aks_agent_pool, device_plugin_configmap, eks_node_group, gke_node_pool, \
    helm_release, stack_violations


def fleet(**eks_changes) -> list[tuple[str, str, dict]]:
    """infer: 6 x g5.2xlarge (1 A10G, time-slicing x4); finetune: 4 x NC24ads A100 v4 (1g.10gb MIG, 7 per GPU)."""
    return [
        (EKS, "infer", eks_node_group(**eks_changes)),
        (AKS, "finetune", aks_agent_pool()),
        (CONFIGMAP, "configmap", device_plugin_configmap(4)),
        (RELEASE, "gpu-operator", helm_release()),
    ]


def quota(name: str, hard: dict[str, int]) -> tuple[str, str, dict]:
    return (QUOTA, name, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": name},
                          "spec": {"hard": {f"requests.{k}": str(v) for k, v in hard.items()}}})


FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"


def flavor(pool: str = "infer", **spec_changes) -> tuple[str, str, dict]:
    spec = {"nodeLabels": {"gpupools.io/pool": pool},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]}
    spec.update(spec_changes)
    return (FLAVOR, pool, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": pool}, "spec": spec})


def cluster_queue(name: str = "research", quotas: list[dict] | None = None, **spec_changes) -> tuple[str, str, dict]:
    """A team queue as gpupools builds it; `quotas` are (flavor, resource) entries with their limits."""
    quotas = quotas if quotas is not None else [{"flavor": "infer", "name": "nvidia.com/gpu", "nominalQuota": 12},
                                                {"flavor": "finetune", "name": "nvidia.com/mig-1g.10gb", "nominalQuota": 14}]
    groups = [{"coveredResources": [q["name"]], "flavors": [{"name": q["flavor"], "resources": [{k: v for k, v in q.items() if k != "flavor"}]}]}
              for q in quotas]
    spec = {"cohortName": "gpupools", "resourceGroups": groups,
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority", "borrowWithinCohort": {"policy": "Never"}}}
    spec.update(spec_changes)
    return (CLUSTER_QUEUE, name, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})


def queues(*extra) -> list[tuple[str, str, dict]]:
    return fleet() + [flavor("infer"), flavor("finetune"), cluster_queue("research"), cluster_queue("search"), *extra]


# --------------------------------------------------------------------------------------------------------------------
# fleet-budget


def test_budget_happy_path():
    # 6 + 4 GPUs; (6 x 1.212 + 4 x 3.673) $/h x 730 = $16,034/month.
    assert stack_violations("fleet-budget", fleet()) == []


def test_too_many_gpus_fails_and_names_the_pools():
    (message,) = stack_violations("fleet-budget", fleet(), config={"maxGpus": 9})
    assert "10 GPUs" in message and "infer 6" in message and "finetune 4" in message
    assert "the policy config's cap maxGpus of 9" in message


def test_no_cap_by_default():
    """No fixed default: the fleet that passes with no cap at all is any size; only pricing is checked."""
    assert stack_violations("fleet-budget", fleet(scalingConfig={"minSize": 0, "maxSize": 5000, "desiredSize": 0})) == []


def platform(**budget) -> tuple[str, str, dict]:
    return ("gpupools:index:GpuPlatform", "gpupools", {"landing": [], **({"budget": budget} if budget else {})})


def test_the_stacks_own_budget_is_a_cap():
    assert stack_violations("fleet-budget", [*fleet(), platform(maxGpus=10, maxMonthlyUsd=16_100)]) == []
    gpus, cost = stack_violations("fleet-budget", [*fleet(), platform(maxGpus=9, maxMonthlyUsd=16_000)])
    assert "the stack's budget (gpupools:budget.maxGpus) of 9" in gpus
    assert "the stack's budget (gpupools:budget.maxMonthlyUsd) of $16,000" in cost


@pytest.mark.parametrize("config, budget, source", [
    ({"maxGpus": 9}, {"maxGpus": 12}, "the policy config's cap maxGpus of 9"),
    ({"maxGpus": 12}, {"maxGpus": 9}, "the stack's budget (gpupools:budget.maxGpus) of 9"),
])
def test_the_tighter_of_stack_budget_and_policy_config_wins(config, budget, source):
    (message,) = stack_violations("fleet-budget", [*fleet(), platform(**budget)], config=config)
    assert source in message
    # Each alone at 10 or more passes: it is the tighter one that fails the fleet.
    assert stack_violations("fleet-budget", [*fleet(), platform(maxGpus=10)], config={"maxGpus": 12}) == []


def test_monthly_cost_over_cap_fails():
    (message,) = stack_violations("fleet-budget", fleet(), config={"maxMonthlyUsd": 16_000})
    assert "$16,034/month" in message


def test_max_size_drives_the_budget():
    assert stack_violations("fleet-budget", fleet(scalingConfig={"minSize": 0, "maxSize": 70, "desiredSize": 0}), config={"maxGpus": 64})


def test_gke_n1_pools_are_priced_from_their_accelerators():
    n1 = gke_node_pool({"count": 2, "type": "nvidia-tesla-t4"}, machineType="n1-standard-8",
                       labels={"gpupools.io/gpu": "T4", "gpupools.io/pool": "dev"})
    n1["autoscaling"] = {"totalMaxNodeCount": 10}
    # 20 GPUs; (0.38 + 2 x 0.35) x 10 x 730 = $7,884/month
    gpus, cost = stack_violations("fleet-budget", [(GKE, "dev", n1)], config={"maxGpus": 19, "maxMonthlyUsd": 7_000})
    assert "20 GPUs" in gpus and "$7,884/month" in cost
    assert stack_violations("fleet-budget", [(GKE, "dev", n1)], config={"maxGpus": 20, "maxMonthlyUsd": 7_900}) == []


def test_per_zone_max_on_a_regional_pool_counts_three_zones():
    pool = gke_node_pool()
    pool["autoscaling"] = {"maxNodeCount": 5}
    (message,) = stack_violations("fleet-budget", [(GKE, "infer", pool)], config={"maxGpus": 14})
    assert "15 GPUs" in message


def test_gpu_pool_outside_the_catalog_is_reported():
    messages = stack_violations("fleet-budget", [(EKS, "odd", eks_node_group(instanceTypes=["x9.mystery"], labels={}))])
    assert any("not in the gpupools catalog" in m for m in messages)


# --------------------------------------------------------------------------------------------------------------------
# gpu-monitoring-deployed


def test_operator_exporter_with_service_monitor_passes():
    assert stack_violations("gpu-monitoring-deployed", fleet()) == []


def test_no_exporter_fails():
    resources = [r for r in fleet() if r[0] != RELEASE]
    (message,) = stack_violations("gpu-monitoring-deployed", resources)
    assert "finetune" in message and "infer" in message


def test_exporter_without_service_monitor_fails_with_the_reason():
    release = helm_release(values={"dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": False}}})
    resources = [r for r in fleet() if r[0] != RELEASE] + [(RELEASE, "gpu-operator", release)]
    (message,) = stack_violations("gpu-monitoring-deployed", resources)
    assert "serviceMonitor" in message


def test_standalone_dcgm_exporter_counts_and_no_gpu_pools_need_nothing():
    exporter = helm_release(chart="dcgm-exporter", repositoryOpts={"repo": "https://nvidia.github.io/dcgm-exporter/helm-charts"},
                            version="4.8.2", values={})
    resources = [r for r in fleet() if r[0] != RELEASE] + [(RELEASE, "dcgm-exporter", exporter)]
    assert stack_violations("gpu-monitoring-deployed", resources) == []
    cpu_only = [(EKS, "system", eks_node_group(amiType="AL2023_x86_64_STANDARD", instanceTypes=["t3.large"]))]
    assert stack_violations("gpu-monitoring-deployed", cpu_only) == []


# --------------------------------------------------------------------------------------------------------------------
# team-quota-oversubscription


def test_quotas_within_ratio_pass():
    # infer offers 6 x 1 x 4 = 24 nvidia.com/gpu; finetune 4 x 7 = 28 nvidia.com/mig-1g.10gb.
    resources = fleet() + [quota("research", {"nvidia.com/gpu": 20, "nvidia.com/mig-1g.10gb": 20}), quota("search", {"nvidia.com/gpu": 10})]
    assert stack_violations("team-quota-oversubscription", resources) == []


def test_quotas_over_ratio_warn():
    resources = fleet() + [quota("research", {"nvidia.com/gpu": 30}), quota("search", {"nvidia.com/gpu": 10})]
    (message,) = stack_violations("team-quota-oversubscription", resources)
    assert "40 x nvidia.com/gpu" in message and "24" in message and "1.67x" in message
    assert stack_violations("team-quota-oversubscription", resources, config={"maxRatio": 2}) == []


def test_kueue_nominal_quotas_per_pool_within_ratio_pass_and_over_warn():
    # infer: 12 + 12 of 24; finetune: 14 + 14 of 28
    assert stack_violations("team-quota-oversubscription", queues()) == []
    big = cluster_queue("big", [{"flavor": "infer", "name": "nvidia.com/gpu", "nominalQuota": 20}])
    (message,) = stack_violations("team-quota-oversubscription", queues(big))
    assert message.startswith("Kueue queues promise 44 units of pool infer against 24") and "1.83x" in message


# --------------------------------------------------------------------------------------------------------------------
# kueue-flavors-match-pools


def test_flavors_and_queues_happy_path():
    assert stack_violations("kueue-flavors-match-pools", queues()) == []


def test_flavor_without_a_pool_or_on_an_unknown_pool_fails():
    resources = [r for r in queues() if r[1] != "finetune" or r[0] != FLAVOR] + [flavor("finetune", nodeLabels={"team": "x"})]
    assert stack_violations("kueue-flavors-match-pools", resources) == [
        "ResourceFlavor finetune selects no pool: spec.nodeLabels needs gpupools.io/pool"]
    (message,) = stack_violations("kueue-flavors-match-pools", queues(flavor("gone")))
    assert message == "ResourceFlavor gone selects pool gone, which is not a GPU pool of this stack (pools: finetune, infer)"


def test_flavor_without_the_gpu_toleration_fails():
    resources = [r for r in queues() if r[1] != "infer" or r[0] != FLAVOR] + [flavor("infer", tolerations=[])]
    (message,) = stack_violations("kueue-flavors-match-pools", resources)
    assert "does not tolerate the GPU taint" in message


def test_quota_on_an_undefined_flavor_or_the_wrong_resource_fails():
    typo = cluster_queue("typo", [{"flavor": "infr", "name": "nvidia.com/gpu", "nominalQuota": 1}])
    assert stack_violations("kueue-flavors-match-pools", queues(typo)) == [
        "ClusterQueue typo gives quota on flavor infr, which no ResourceFlavor in the stack defines"]
    wrong = cluster_queue("wrong", [{"flavor": "finetune", "name": "nvidia.com/gpu", "nominalQuota": 1}])
    (message,) = stack_violations("kueue-flavors-match-pools", queues(wrong))
    assert "pool finetune offers nvidia.com/mig-1g.10gb; that quota can never be used" in message


# --------------------------------------------------------------------------------------------------------------------
# kueue-borrowing-sane


def test_borrowing_happy_path():
    limited = cluster_queue("ops", [{"flavor": "infer", "name": "nvidia.com/gpu", "nominalQuota": 4, "borrowingLimit": 8, "lendingLimit": 2}])
    assert stack_violations("kueue-borrowing-sane", queues(limited)) == []


def test_lending_without_reclaim_fails():
    greedy = cluster_queue("research", preemption={"reclaimWithinCohort": "Never"})
    resources = [r for r in queues() if r[1] != "research"] + [greedy]
    (message,) = stack_violations("kueue-borrowing-sane", resources)
    assert "lends its quota in cohort gpupools but never reclaims it" in message


def test_limits_without_a_cohort_fail():
    alone = cluster_queue("alone", [{"flavor": "infer", "name": "nvidia.com/gpu", "nominalQuota": 4, "borrowingLimit": 2}])
    del alone[2]["spec"]["cohortName"]
    (message,) = stack_violations("kueue-borrowing-sane", queues(alone))
    assert "belongs to no cohort" in message


def test_lending_more_than_owned_or_unreachable_borrowing_fails():
    over = cluster_queue("over", [{"flavor": "infer", "name": "nvidia.com/gpu", "nominalQuota": 4, "lendingLimit": 6}])
    assert stack_violations("kueue-borrowing-sane", queues(over)) == ["ClusterQueue over lends 6 nvidia.com/gpu on flavor infer but has only 4"]
    far = cluster_queue("far", [{"flavor": "infer", "name": "nvidia.com/gpu", "nominalQuota": 4, "borrowingLimit": 30}])
    (message,) = stack_violations("kueue-borrowing-sane", queues(far))
    assert "may reach 34 nvidia.com/gpu" in message and "(24)" in message


def test_quota_for_a_resource_no_pool_offers_warns():
    resources = fleet() + [quota("research", {"nvidia.com/mig-3g.40gb": 2})]
    (message,) = stack_violations("team-quota-oversubscription", resources)
    assert "nvidia.com/mig-3g.40gb" in message


def test_policy_and_plan_agree_on_capacity():
    """The policy reads capacity back from resources; gpupools computes it from the config. Same numbers."""
    from gpupools.cli.planrun import run_program
    from gpupools.cli.policycheck import policy_resources
    from gpupools.policies.quotas import queue_ratios, quota_ratios

    pools = [
        {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 6, "sharing": {"mode": "time-slicing", "replicas": 4}},
        {"name": "train", "instanceType": "p4de.24xlarge", "maxNodes": 2, "sharing": {"mode": "mig", "migProfile": "3g.40gb"}},
        {"name": "batch", "instanceType": "g6.xlarge", "os": "bottlerocket", "maxNodes": 3, "sharing": {"mode": "mps", "replicas": 2}},
    ]
    teams = [{"name": "research", "gpus": 8}, {"name": "search", "gpus": 30, "pools": ["infer"]}]
    config = stack_config("aws", pools=pools, teams=teams, quotas="resourcequota")
    stack = validate_stack(config)
    expected = planned_ratios(stack, plan_pools(stack))
    # research's 8 split over 24, 32 and 6 units: 3, 4 and 1
    assert expected == {"nvidia.com/gpu": (34, 30), "nvidia.com/mig-3g.40gb": (4, 32)}
    assert quota_ratios(policy_resources(run_program(config, "test"))) == expected
    config = stack_config("aws", pools=pools, teams=teams)
    stack = validate_stack(config)
    assert queue_ratios(policy_resources(run_program(config, "test"))) == pool_totals(stack, plan_pools(stack)) == {
        "infer": (33, 24), "train": (4, 32), "batch": (1, 6)}


def test_policy_and_plan_agree_on_gke_with_the_gpu_operator():
    """On GKE the operator shares by node labels, GKE's own plugin by accelerator settings; both are read back."""
    from gpupools.cli.planrun import run_program
    from gpupools.cli.policycheck import policy_resources
    from gpupools.policies.quotas import queue_ratios

    pools = [{"name": "infer", "instanceType": "g2-standard-8", "maxNodes": 5, "sharing": {"mode": "time-slicing", "replicas": 3}},
             {"name": "train", "instanceType": "a2-highgpu-1g", "maxNodes": 3, "sharing": {"mode": "mig", "migProfile": "2g.10gb"}}]
    for installer in ("cloud", "gpu-operator"):
        # With the operator, MIG slices must be nvidia.com/gpu (single strategy) for GKE's autoscaler to wake the pool.
        config = stack_config("gcp", pools=pools, gpuSoftware={"installer": installer, **({"migStrategy": "single"} if installer == "gpu-operator" else {})},
                              teams=[{"name": "research", "gpus": 4}])
        stack = validate_stack(config)
        expected = pool_totals(stack, plan_pools(stack))
        assert sum(c for _, c in expected.values()) == 5 * 3 + 3 * 3, installer
        assert queue_ratios(policy_resources(run_program(config, "test"))) == expected, installer


def test_channel_quota_belongs_to_rack_pools_and_counts_no_gpu():
    """A rack pool's flavor carries the ComputeDomain channel resource beside its GPUs (Kueue maps the channel's device
    class to it): offered there, never counted as GPUs; on a pool without an NVLink domain it is a quota nobody uses."""
    channel = "nvidia.com/compute-domain-channel"
    rack = (EKS, "rack", eks_node_group(instanceTypes=["p6e-gb200.36xlarge"], nodeGroupName="rack",
                                        labels={"gpupools.io/gpu": "GB200-186GB", "gpupools.io/pool": "rack",
                                                "nvidia.com/device-plugin.config": "no-sharing"},
                                        scalingConfig={"desiredSize": 0, "maxSize": 18, "minSize": 0}))
    team = cluster_queue("team", [{"flavor": "rack", "name": "nvidia.com/gpu", "nominalQuota": 72},
                                  {"flavor": "rack", "name": channel, "nominalQuota": 72}])
    resources = queues(rack, flavor("rack"), team)
    assert stack_violations("kueue-flavors-match-pools", resources) == []
    assert stack_violations("team-quota-oversubscription", resources) == []  # 72 GPUs of 72, not 144
    more = cluster_queue("more", [{"flavor": "rack", "name": "nvidia.com/gpu", "nominalQuota": 72}])
    (message,) = stack_violations("team-quota-oversubscription", queues(rack, flavor("rack"), team, more))
    assert message.startswith("Kueue queues promise 144 units of pool rack against 72")
    stray = cluster_queue("stray", [{"flavor": "infer", "name": channel, "nominalQuota": 4}])
    (message,) = stack_violations("kueue-flavors-match-pools", queues(stray))
    assert message == f"ClusterQueue stray gives {channel} on flavor infer, but pool infer offers nvidia.com/gpu; that quota can never be used"


def test_the_dra_driver_and_the_gpu_operator_agree_on_driver_root_and_cdi():
    """EKS: the node image's driver (operator driver off) is at /, where the DRA driver must look; the operator's own driver
    container puts it at /run/nvidia/driver; CDI off in the operator leaves the DRA driver's devices out of containers."""
    name = "dra-driver-matches-gpu-operator"

    def dra(root: str | None):
        values = {"resources": {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}}}
        if root is not None:
            values["nvidiaDriverRoot"] = root
        return (RELEASE, "dra", {"chart": "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu", "values": values})

    host = helm_release()  # driver.enabled false
    assert stack_violations(name, [(RELEASE, "gpu-operator", host), dra("/")]) == []
    assert stack_violations(name, [(RELEASE, "gpu-operator", host), dra(None)]) == []  # the chart's default root is /
    assert stack_violations(name, [(RELEASE, "gpu-operator", host)]) == []  # no DRA driver, nothing to agree on
    (message,) = stack_violations(name, [(RELEASE, "gpu-operator", host), dra("/run/nvidia/driver")])
    assert message == ("the DRA driver's nvidiaDriverRoot is /run/nvidia/driver but the GPU Operator has the driver at /: its kubelet "
                       "plugin would find no driver")
    operator_driver = helm_release(values={"driver": {"enabled": True}, "cdi": {"enabled": True}})
    assert stack_violations(name, [(RELEASE, "gpu-operator", operator_driver), dra("/run/nvidia/driver")]) == []
    assert len(stack_violations(name, [(RELEASE, "gpu-operator", operator_driver), dra("/")])) == 1
    no_cdi = helm_release(values={"driver": {"enabled": False}, "cdi": {"enabled": False}})
    assert stack_violations(name, [(RELEASE, "gpu-operator", no_cdi), dra("/")]) == [
        "the GPU Operator has cdi.enabled false: the DRA driver hands devices to containers through CDI only"]
