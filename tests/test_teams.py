"""Team quotas: the pure builders, their Kubernetes schema, and the TeamQuotas component under Pulumi's mocks."""

from __future__ import annotations

import pytest
from rich.console import Console

from gpupools.validate import validate_stack
from gpupools.plan import run_program
from gpupools.pools import plan_pools
from gpupools.report import print_plan
from gpupools.teams import QUOTA_NAME, admission_policy_supported, quota_ratios, quota_summary, team_objects

from conftest import stack_config

POOLS = [
    {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 6, "sharing": {"mode": "time-slicing", "replicas": 4}},
    {"name": "train", "instanceType": "p4de.24xlarge", "maxNodes": 2, "sharing": {"mode": "mig", "migProfile": "3g.40gb"}},
    {"name": "batch", "instanceType": "g6.xlarge", "maxNodes": 4},
]


def teams_stack(teams: list[dict], **keys):
    return validate_stack(stack_config("aws", pools=POOLS, teams=teams, **keys))


def objects(teams: list[dict], **keys) -> list[dict]:
    stack = teams_stack(teams, **keys)
    return team_objects(stack, plan_pools(stack))


def of_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def test_quota_covers_every_resource_of_the_teams_pools_each_counted_as_one():
    objs = objects([{"name": "research", "gpus": 8, "pools": ["infer", "train"]}])
    (quota,) = of_kind(objs, "ResourceQuota")
    assert quota["metadata"] == {"name": QUOTA_NAME, "namespace": "research",
                                 "labels": {"app.kubernetes.io/managed-by": "gpupools", "gpupools.io/team": "research"}}
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "8", "requests.nvidia.com/mig-3g.40gb": "8"}


def test_namespace_first_and_custom_namespace_name():
    objs = objects([{"name": "search", "namespace": "search-prod", "gpus": 2, "pools": ["batch"]}])
    assert objs[0]["kind"] == "Namespace" and objs[0]["metadata"]["name"] == "search-prod"
    assert of_kind(objs, "ResourceQuota")[0]["metadata"]["namespace"] == "search-prod"
    assert of_kind(objs, "ResourceQuota")[0]["spec"]["hard"] == {"requests.nvidia.com/gpu": "2"}


def test_admission_policy_keeps_gpu_pods_on_the_teams_pools():
    objs = objects([{"name": "research", "gpus": 8, "pools": ["infer", "train"]}])
    (policy,) = of_kind(objs, "ValidatingAdmissionPolicy")
    (binding,) = of_kind(objs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    spec = policy["spec"]
    assert spec["matchConstraints"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "research"}}
    assert spec["matchConstraints"]["resourceRules"][0]["resources"] == ["pods"]
    (rule,) = spec["validations"]
    assert rule["expression"].startswith("!variables.requestsGpu || (")
    assert "object.spec.nodeSelector['gpupools.io/pool'] in ['infer', 'train']" in rule["expression"]
    assert "infer, train" in rule["message"]
    assert {v["name"] for v in spec["variables"]} == {"containers", "requestsGpu"}


def test_team_on_all_pools_gets_every_resource_and_no_admission_policy():
    objs = objects([{"name": "platform", "gpus": 4}])
    assert of_kind(objs, "ResourceQuota")[0]["spec"]["hard"] == {"requests.nvidia.com/gpu": "4", "requests.nvidia.com/mig-3g.40gb": "4"}
    assert not of_kind(objs, "ValidatingAdmissionPolicy")


def test_no_admission_policy_before_kubernetes_1_30():
    # No cloud still offers 1.29, so validation refuses it; the models alone still describe such a cluster.
    from gpupools.config import StackConfig, split_namespaces

    raw = stack_config("aws", pools=POOLS, teams=[{"name": "research", "gpus": 8, "pools": ["infer"]}],
                       cluster={"name": "old", "create": False, "kubernetesVersion": "1.29"})
    ours, providers, _ = split_namespaces(raw)
    stack = StackConfig.model_validate({**ours, "providers": providers})
    assert not admission_policy_supported(stack)
    assert not of_kind(team_objects(stack, plan_pools(stack)), "ValidatingAdmissionPolicy")
    assert of_kind(team_objects(stack, plan_pools(stack)), "ResourceQuota")


@pytest.mark.parametrize("version", ["1.30.0", "1.33.0"])
def test_manifests_are_schema_valid(version):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    objs = objects([{"name": "research", "gpus": 8, "pools": ["infer", "train"]}, {"name": "platform", "gpus": 2}])
    assert {o["kind"] for o in objs} == {"Namespace", "ResourceQuota", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    for obj in objs:
        kubernetes_validate.validate(obj, version, strict=True)


def test_ratios_and_the_plan_line():
    # capacity: nvidia.com/gpu = infer 6 x 4 + batch 4 x 1 = 28; mig-3g.40gb = train 2 x 8 x 2 = 32
    stack = teams_stack([{"name": "research", "gpus": 20, "pools": ["infer", "train"]}, {"name": "search", "gpus": 12, "pools": ["batch"]}])
    plans = plan_pools(stack)
    assert quota_ratios(stack, plans) == {"nvidia.com/gpu": (32, 28), "nvidia.com/mig-3g.40gb": (20, 32)}
    line = quota_summary(stack, plans)
    assert "nvidia.com/gpu 32 of 28 (1.14x)" in line and "nvidia.com/mig-3g.40gb 20 of 32 (0.62x)" in line and "over-subscribed" in line
    assert quota_summary(teams_stack([]), plans) is None


def test_team_quotas_under_mocks():
    config = stack_config("aws", pools=POOLS, teams=[{"name": "research", "gpus": 8, "pools": ["infer", "train"]},
                                                     {"name": "search", "namespace": "search-prod", "gpus": 2}])
    plan = run_program(config, "test")
    (component,) = plan.of_type("gpupools:index:TeamQuotas")
    assert component.parent == "gpupools" and component.parent_type == "gpupools:index:GpuPlatform"
    children = plan.children("gpupools:index:TeamQuotas", component.name)
    kinds = sorted(r.type for r in children)
    assert kinds == sorted([
        "kubernetes:core/v1:Namespace", "kubernetes:core/v1:Namespace",
        "kubernetes:core/v1:ResourceQuota", "kubernetes:core/v1:ResourceQuota",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
    ])
    quota = plan.get("kubernetes:core/v1:ResourceQuota", f"resourcequota-search-prod-{QUOTA_NAME}")
    assert quota.inputs["spec"]["hard"] == {"requests.nvidia.com/gpu": "2", "requests.nvidia.com/mig-3g.40gb": "2"}


def test_no_teams_no_component():
    plan = run_program(stack_config("aws"), "test")
    assert not plan.of_type("gpupools:index:TeamQuotas")


def test_plan_output_shows_the_ratio():
    config = stack_config("aws", pools=POOLS, teams=[{"name": "research", "gpus": 8}])
    stack = validate_stack(config)
    console = Console(record=True, width=200)
    print_plan(stack, run_program(config, "test"), console)
    assert "team quotas (1 team) vs. units at maxNodes: nvidia.com/gpu 8 of 28 (0.29x)" in console.export_text()
