"""A pool's own taints (`pools[].taints`) and the tolerations teams declare for them (`teams[].tolerations`): what each
cloud's node pool, autoscaler and Kueue flavor carries, what `gpupools workload` prints, and the landing verdict both ways."""

from __future__ import annotations

import functools

import pytest
import yaml
from typer.testing import CliRunner

from conftest import config_problems, plan_of, stack_config, write_stack
from gpupools.cli.main import app
from gpupools.landing.check import landing_check
from gpupools.landing.jobs import job_manifest, team_job
from gpupools.pools.planning import plan_pools
from gpupools.pools.software import gpu_tolerations
from gpupools.queues import kueue
from gpupools.queues.teams import plan_teams, toleration_lines
from gpupools.validation.stack import validate_stack

SKU = {"key": "sku", "value": "gpu", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
SKU_TOLERATION = {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


def tainted(cloud: str, instance_type: str, taints=(SKU,), **pool) -> list[dict]:
    return [{"name": "infer", "instanceType": instance_type, "maxNodes": 3, "taints": list(taints), **pool}]


# --------------------------------------------------------------------------------------------------------------------
# On the nodes, as each cloud's API spells them: planned once per cloud and mode


@functools.cache
def planned(case: str):
    configs = {
        "eks": stack_config("aws", pools=tainted("aws", "g5.2xlarge")),
        "eks-cluster-autoscaler": stack_config("aws", pools=tainted("aws", "g5.2xlarge"), cluster={"name": "ml-test", "create": False},
                                               autoscaler="cluster-autoscaler"),
        "eks-auto-mode": stack_config("aws", pools=tainted("aws", "g5.2xlarge"), cluster={"name": "ml-test", "mode": "auto-mode"}),
        "aks": stack_config("azure", pools=tainted("azure", "Standard_NC4as_T4_v3")),
        "aks-nap": stack_config("azure", pools=tainted("azure", "Standard_NC4as_T4_v3"),
                                cluster={"name": "ml-test", "resourceGroup": "rg-ml", "mode": "node-auto-provisioning"}),
        "gke": stack_config("gcp", pools=tainted("gcp", "g2-standard-8") + [
            {"name": "classed", "instanceType": "g2-standard-8", "maxNodes": 3, "taints": [SKU], "provisioning": "compute-class",
             "capacity": ["spot", "on-demand"]}], gpuSoftware={"installer": "cloud"}),
        "gcore": stack_config("gcore", pools=tainted("gcore", "g3-ai-32-192-1500-l40s-48-1", minNodes=1)),
    }
    return plan_of(configs[case])


def test_eks_managed_node_group_spells_the_effect_as_its_enum():
    group = planned("eks-cluster-autoscaler").get("aws:eks/nodeGroup:NodeGroup", "infer").inputs
    assert {"key": "sku", "value": "gpu", "effect": "NO_SCHEDULE"} in group["taints"]
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"} in group["taints"]


def test_cluster_autoscaler_scales_from_zero_knowing_the_taint():
    # aws_manager.go reads k8s.io/cluster-autoscaler/node-template/taint/<key> = <value>:<effect> for a group at zero.
    tag = planned("eks-cluster-autoscaler").get("aws:autoscaling/tag:Tag", "infer-taint-sku").inputs["tag"]
    assert tag == {"key": "k8s.io/cluster-autoscaler/node-template/taint/sku", "value": "gpu:NoSchedule", "propagateAtLaunch": False}


@pytest.mark.parametrize("case", ["eks", "eks-auto-mode", "aks-nap"])
def test_karpenter_node_pools_carry_the_taint_in_their_template(case):
    spec = planned(case).get("kubernetes:karpenter.sh/v1:NodePool", "nodepool-gpupools-infer").inputs["spec"]["template"]["spec"]
    assert spec["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, SKU]
    assert SKU not in spec.get("startupTaints", [])


def test_aks_agent_pool_spells_it_key_value_effect():
    pool = planned("aks").get("azure-native:containerservice:AgentPool", "infer").inputs
    assert pool["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule", "sku=gpu:NoSchedule"]


def test_gke_node_pool_uses_the_enum_and_the_compute_class_kubernetes_spelling():
    plan = planned("gke")
    taints = plan.get("gcp:container/nodePool:NodePool", "infer").inputs["nodeConfig"]["taints"]
    assert {"key": "sku", "value": "gpu", "effect": "NO_SCHEDULE"} in taints
    classed = plan.get("kubernetes:cloud.google.com/v1:ComputeClass", "computeclass-gpupools-classed").inputs["spec"]["nodePoolConfig"]
    assert SKU in classed["taints"]


def test_gcore_pool_taints_are_a_map_of_value_and_effect():
    pool = next(r for r in planned("gcore").resources if r.name == "infer" and "pool" in r.inputs).inputs["pool"]
    assert pool["taints"] == {"nvidia.com/gpu": "present:NoSchedule", "sku": "gpu:NoSchedule"}


def test_the_gpu_software_runs_on_tainted_nodes():
    """The GPU Operator's operands, NFD and dcgm-exporter tolerate the pool's own taints: without them the node would
    never offer a GPU nor pass the readiness gate."""
    values = planned("eks").get("kubernetes:helm.sh/v3:Release", "gpu-operator").inputs["values"]
    assert SKU_TOLERATION in values["daemonsets"]["tolerations"]
    stack = validate_stack(stack_config("aws", pools=tainted("aws", "g5.2xlarge") + [{"name": "other", "instanceType": "g6.xlarge", "maxNodes": 1}]))
    assert gpu_tolerations(stack, plan_pools(stack)).count(SKU_TOLERATION) == 1


# --------------------------------------------------------------------------------------------------------------------
# Teams, Kueue and the landing check


def teams_stack(tolerations: list[dict] | None = None, taints=(SKU,), quotas: str = "kueue") -> dict:
    research = {"name": "research", "gpus": {"infer": 2}}
    if tolerations is not None:
        research["tolerations"] = tolerations
    return stack_config("aws", pools=tainted("aws", "g5.2xlarge", taints), teams=[research], quotas=quotas)


def verdicts(config: dict) -> list:
    stack = validate_stack(config)
    return landing_check(stack)


def test_the_flavor_carries_the_pools_own_taints_as_node_taints_not_tolerations():
    stack = validate_stack(teams_stack([]))
    flavor = kueue.resource_flavor(stack, plan_pools(stack)[0])
    assert flavor["spec"]["nodeTaints"] == [SKU]
    assert flavor["spec"]["tolerations"] == [GPU_TOLERATION]


def test_a_flavor_of_a_pool_without_own_taints_has_no_node_taints():
    stack = validate_stack(teams_stack([], taints=()))
    assert "nodeTaints" not in kueue.resource_flavor(stack, plan_pools(stack)[0])["spec"]


def test_a_team_without_the_toleration_does_not_land_and_the_plan_says_why():
    rows = verdicts(teams_stack())
    assert rows and not any(r.lands for r in rows)
    assert {(r.failing.name, r.failing.detail) for r in rows} == {
        ("queue", "ClusterQueue research admits it on no flavor: infer: untolerated taint sku=gpu:NoSchedule (the flavor's nodeTaints; "
                  "the team's tolerations have none for it: teams[].tolerations)")}


@pytest.mark.parametrize("toleration", [SKU_TOLERATION, {"key": "sku", "operator": "Exists"}, {"key": "sku", "value": "gpu"}])
def test_a_team_that_declares_the_toleration_lands(toleration):
    rows = verdicts(teams_stack([toleration]))
    assert rows and all(r.lands for r in rows), [r.failing for r in rows]


@pytest.mark.parametrize("toleration", [{"key": "sku", "value": "cpu"}, {"key": "sku", "operator": "Exists", "effect": "NoExecute"},
                                        {"key": "dedicated", "operator": "Exists"}])
def test_a_toleration_of_another_value_effect_or_key_does_not_land(toleration):
    assert not any(r.lands for r in verdicts(teams_stack([toleration])))


def test_a_prefer_no_schedule_taint_steers_and_keeps_no_team_out():
    rows = verdicts(teams_stack(taints=({"key": "sku", "value": "gpu", "effect": "PreferNoSchedule"},)))
    assert rows and all(r.lands for r in rows)


@pytest.mark.parametrize("quotas", ["kai", "resourcequota"])
def test_kai_and_resourcequotas_leave_taints_to_the_pods_tolerations(quotas):
    """KAI Scheduler filters nodes by the pod's own tolerations (KAI-Scheduler@30fd2db pkg/scheduler/k8s_internal/
    predicates/predicates.go: PodToleratesNodeTaints is kube-scheduler's TaintToleration filter), as the scheduler does
    under ResourceQuotas: the team's Job lands once the team tolerates the pool's taint."""
    without = verdicts(teams_stack(quotas=quotas))
    assert without and {(r.failing.name, r.failing.detail) for r in without} == {
        ("schedule", "the pod does not fit a Ready node of pool infer: no toleration for the taint sku=gpu:NoSchedule")}
    landed = verdicts(teams_stack([SKU_TOLERATION], quotas=quotas))
    assert landed and all(r.lands for r in landed)


def test_the_workload_prints_the_teams_tolerations_and_no_other_pool_taints():
    stack = validate_stack(teams_stack([{"key": "sku", "operator": "Exists"}, {"key": "dedicated", "value": "research", "effect": "NoExecute"}]))
    plans = plan_pools(stack)
    pod = team_job(stack, plans, "research", "infer", None, "img")["spec"]["template"]["spec"]
    assert pod["tolerations"] == [GPU_TOLERATION, {"key": "sku", "operator": "Exists"},
                                  {"key": "dedicated", "operator": "Equal", "value": "research", "effect": "NoExecute"}]
    # Without --pool Kueue chooses the flavor and adds its tolerations; the team's own are on the pod already.
    assert team_job(stack, plans, "research", None, None, "img")["spec"]["template"]["spec"]["tolerations"] == pod["tolerations"][1:]
    other = validate_stack(teams_stack([]))
    pod = team_job(other, plan_pools(other), "research", "infer", None, "img")["spec"]["template"]["spec"]
    assert pod["tolerations"] == [GPU_TOLERATION]
    # A pool's own Job (no team) tolerates everything its pool carries.
    assert job_manifest(other, plan_pools(other)[0], "img")["spec"]["template"]["spec"]["tolerations"] == [GPU_TOLERATION, SKU_TOLERATION]


def test_kai_workload_prints_them_too():
    stack = validate_stack(teams_stack([SKU_TOLERATION], quotas="kai"))
    pod = team_job(stack, plan_pools(stack), "research", "infer", None, "img")["spec"]["template"]["spec"]
    assert pod["schedulerName"] == "kai-scheduler" and pod["tolerations"] == [GPU_TOLERATION, SKU_TOLERATION]


def test_the_plan_says_which_team_tolerates_which_taint():
    config = teams_stack([SKU_TOLERATION])
    config["gpupools:teams"].append({"name": "search", "gpus": {"infer": 1}})
    stack = validate_stack(config)
    assert toleration_lines(stack, plan_pools(stack)) == ["taint sku=gpu:NoSchedule on pool infer: tolerated by research; not by search"]
    assert [t.team.tolerations for t in plan_teams(stack, plan_pools(stack))][1] == []
    untainted = validate_stack(teams_stack([], taints=()))
    assert toleration_lines(untainted, plan_pools(untainted)) == []


# --------------------------------------------------------------------------------------------------------------------
# Refusals: one line each, exit 2


def with_taint(**taint) -> dict:
    return stack_config("aws", pools=tainted("aws", "g5.2xlarge", [{**SKU, **taint}]))


def with_toleration(**toleration) -> dict:
    return teams_stack([toleration])


REFUSALS = {
    "key not a qualified name": (with_taint(key="bad key"), "pools[0].taints[0].key", "not a Kubernetes qualified name"),
    "value not a label value": (with_taint(value="a b"), "pools[0].taints[0].value", "not a label value"),
    "unknown effect": (with_taint(effect="NoExecut"), "pools[0].taints[0].effect", "'NoSchedule', 'PreferNoSchedule' or 'NoExecute'"),
    "the GPU taint": (with_taint(key="nvidia.com/gpu", value="present"), "pools[0].taints[0].key",
                      "the GPU taint gpupools puts on every pool itself"),
    "gpupools' domain": (with_taint(key="gpupools.io/dedicated"), "pools[0].taints[0].key", "pick a key under your own domain"),
    "Kubernetes' domain": (with_taint(key="node.kubernetes.io/dedicated"), "pools[0].taints[0].key", "under kubernetes.io"),
    "one key twice": (stack_config("aws", pools=tainted("aws", "g5.2xlarge", [SKU, {**SKU, "effect": "NoExecute"}])), "pools[0].taints",
                      "lists the key sku more than once"),
    "more than Kueue's nodeTaints hold": (stack_config("aws", pools=tainted("aws", "g5.2xlarge", [{**SKU, "key": f"k{i}"} for i in range(9)])),
                                          "pools[0].taints", "at most 8"),
    "a label of gpupools'": (stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3,
                                                          "labels": {"gpupools.io/pool": "x"}}]),
                             "pools[0].labels.gpupools.io/pool", "are reserved: pick a key under your own domain, such as example.com/team"),
    "Exists with a value": (with_toleration(key="sku", operator="Exists", value="gpu"), "teams[0].tolerations[0]", "operator Exists takes no value"),
    "no key": (with_toleration(operator="Exists"), "teams[0].tolerations[0].key", "required"),
    "the GPU taint's toleration": (with_toleration(key="nvidia.com/gpu", operator="Exists"), "teams[0].tolerations[0].key",
                                   "gpupools gives every Job itself"),
    "the readiness gate": (with_toleration(key="readiness.k8s.io/gpupools-gpu-ready", operator="Exists"), "teams[0].tolerations[0].key",
                           "no workload tolerates"),
    "Autopilot": (stack_config("gcp", pools=tainted("gcp", "g2-standard-8"), cluster={"name": "ml-test", "location": "us-central1",
                                                                                      "mode": "autopilot"}),
                  "pools[0].taints", "GKE Autopilot taints a node only for a pod that selects and tolerates"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_refusals(case):
    config, path, words = REFUSALS[case]
    assert [str(p) for p in config_problems(config) if str(p).startswith(f"error: {path}: ")], config_problems(config)
    assert any(words in str(p) for p in config_problems(config)), config_problems(config)


@pytest.mark.parametrize("case", ["the GPU taint", "Exists with a value"])
def test_a_refusal_is_one_line_and_exit_2(tmp_path, case):
    config, path, words = REFUSALS[case]
    result = CliRunner().invoke(app, ["plan", "--config", str(write_stack(tmp_path, config))])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and words in lines[0]


def test_an_accepted_stack_round_trips_through_yaml():
    config = yaml.safe_load(yaml.safe_dump(teams_stack([{"key": "sku", "operator": "Exists"}])))
    stack = validate_stack(config)
    assert stack.pools[0].taints[0].effect == "NoSchedule" and stack.teams[0].tolerations[0].operator == "Exists"


def test_the_taint_models_are_as_strict_as_every_stack_model():
    from gpupools.stack import config, taints

    assert taints.Model.model_config == config.Model.model_config
