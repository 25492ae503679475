"""Stack policies (budget, monitoring, team quotas) on a small happy-path fleet, one field changed at a time."""

from __future__ import annotations

from gpupools.validate import validate_stack
from gpupools.pools import plan_pools
from gpupools.teams import quota_ratios as planned_ratios

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


# --------------------------------------------------------------------------------------------------------------------
# fleet-budget


def test_budget_happy_path():
    # 6 + 4 GPUs; (6 x 1.212 + 4 x 3.673) $/h x 730 = $16,034/month.
    assert stack_violations("fleet-budget", fleet()) == []


def test_too_many_gpus_fails_and_names_the_pools():
    (message,) = stack_violations("fleet-budget", fleet(), config={"maxGpus": 9})
    assert "10 GPUs" in message and "infer 6" in message and "finetune 4" in message


def test_monthly_cost_over_cap_fails():
    (message,) = stack_violations("fleet-budget", fleet(), config={"maxMonthlyUsd": 16_000})
    assert "$16,034/month" in message


def test_max_size_drives_the_budget():
    assert stack_violations("fleet-budget", fleet(scalingConfig={"minSize": 0, "maxSize": 70, "desiredSize": 0}))


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


def test_quota_for_a_resource_no_pool_offers_warns():
    resources = fleet() + [quota("research", {"nvidia.com/mig-3g.40gb": 2})]
    (message,) = stack_violations("team-quota-oversubscription", resources)
    assert "nvidia.com/mig-3g.40gb" in message


def test_policy_and_plan_agree_on_capacity():
    """The policy reads capacity back from resources; gpupools computes it from the config. Same numbers."""
    from gpupools.plan import run_program
    from gpupools.policy_check import policy_resources
    from gpupools.policies.quotas import quota_ratios

    config = stack_config("aws", pools=[
        {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 6, "sharing": {"mode": "time-slicing", "replicas": 4}},
        {"name": "train", "instanceType": "p4de.24xlarge", "maxNodes": 2, "sharing": {"mode": "mig", "migProfile": "3g.40gb"}},
        {"name": "batch", "instanceType": "g6.xlarge", "os": "bottlerocket", "maxNodes": 3, "sharing": {"mode": "mps", "replicas": 2}},
    ], teams=[{"name": "research", "gpus": 8}, {"name": "search", "gpus": 30, "pools": ["infer"]}])
    stack = validate_stack(config)
    expected = planned_ratios(stack, plan_pools(stack))
    assert expected == {"nvidia.com/gpu": (38, 30), "nvidia.com/mig-3g.40gb": (8, 32)}
    assert quota_ratios(policy_resources(run_program(config, "test"))) == expected


def test_policy_and_plan_agree_on_gke_with_the_gpu_operator():
    """On GKE the operator shares by node labels, GKE's own plugin by accelerator settings; both are read back."""
    from gpupools.plan import run_program
    from gpupools.policy_check import policy_resources
    from gpupools.policies.quotas import quota_ratios

    pools = [{"name": "infer", "instanceType": "g2-standard-8", "maxNodes": 5, "sharing": {"mode": "time-slicing", "replicas": 3}},
             {"name": "train", "instanceType": "a2-highgpu-1g", "maxNodes": 3, "sharing": {"mode": "mig", "migProfile": "2g.10gb"}}]
    for installer in ("cloud", "gpu-operator"):
        # With the operator, MIG slices must be nvidia.com/gpu (single strategy) for GKE's autoscaler to wake the pool.
        config = stack_config("gcp", pools=pools, gpuSoftware={"installer": installer, **({"migStrategy": "single"} if installer == "gpu-operator" else {})},
                              teams=[{"name": "research", "gpus": 4}])
        stack = validate_stack(config)
        expected = planned_ratios(stack, plan_pools(stack))
        assert sum(c for _, c in expected.values()) == 5 * 3 + 3 * 3, installer
        assert quota_ratios(policy_resources(run_program(config, "test"))) == expected, installer
