"""Teams: the split of a team's units over its pools, and both engines that keep the promise.

ResourceQuota mode: the pure builders, their Kubernetes schema and the admission policy evaluated as CEL.
Kueue mode: every object against the pinned CRDs (schema and CEL rules), the chart values and controller
configuration against the pinned chart, the queue admission policy evaluated on real workloads, and the
component under Pulumi's mocks.
"""

from __future__ import annotations

import json

import pytest
import yaml
from rich.console import Console

from gpupools.queues import kueue
from gpupools.pools.planning import plan_pools
from gpupools.cli.planrun import run_program
from gpupools.queues.engine import quota_plan, team_rows
from gpupools.cli.planreport import print_plan
from gpupools.queues.resourcequota import QUOTA_NAME, admission_policy_supported
from gpupools.queues.teams import plan_teams, pool_totals, quota_ratios, split_units
from gpupools.validation.stack import validate_stack

from conftest import admission_denials, crd_rule_failures, has_path, needs_reference, service_monitor_schema, stack_config, value_paths

POOLS = [
    {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 6, "sharing": {"mode": "time-slicing", "replicas": 4}},
    {"name": "train", "instanceType": "p4de.24xlarge", "maxNodes": 2, "sharing": {"mode": "mig", "migProfile": "3g.40gb"}},
    {"name": "batch", "instanceType": "g6.xlarge", "maxNodes": 4},
]
# Units at maxNodes: infer 6 x 4 = 24 time-slices, train 2 x 8 x 2 = 32 MIG slices, batch 4 GPUs.


def teams_stack(teams: list[dict], **keys):
    return validate_stack(stack_config("aws", pools=POOLS, teams=teams, **keys))


def objects(teams: list[dict], **keys) -> list[dict]:
    stack = teams_stack(teams, **keys)
    return quota_plan(stack, plan_pools(stack), scrape={"release": "kube-prometheus-stack"}).objects


def of_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def gpu_job(labels: dict | None = None, resource: str = "nvidia.com/gpu") -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": labels or {}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "cuda", "resources": {"limits": {resource: 1}}}]}}}}


# --------------------------------------------------------------------------------------------------------------------
# The split


def test_split_is_proportional_and_adds_up_exactly():
    assert split_units(8, {"infer": 24, "train": 32}) == {"infer": 3, "train": 5}
    assert split_units(7, {"a": 1, "b": 1, "c": 1}) == {"a": 3, "b": 2, "c": 2}  # ties go to the earlier pool
    assert split_units(5, {"a": 0, "b": 0}) == {"a": 3, "b": 2}  # no capacity anywhere: equal parts
    assert split_units(0, {"a": 3}) == {"a": 0}
    for total in range(0, 60):
        assert sum(split_units(total, {"x": 24, "y": 32, "z": 4}).values()) == total


def test_units_per_pool_name_the_teams_pools():
    stack = teams_stack([{"name": "research", "gpus": {"train": 6, "batch": 2}}, {"name": "ops", "gpus": 10}])
    research, ops = plan_teams(stack, plan_pools(stack))
    assert [p.name for p in research.pools] == ["train", "batch"] and research.nominal == {"train": 6, "batch": 2}
    assert ops.nominal == {"infer": 4, "train": 5, "batch": 1}  # 10 x 24/60, 32/60, 4/60, largest remainder
    assert pool_totals(stack, plan_pools(stack)) == {"infer": (4, 24), "train": (11, 32), "batch": (3, 4)}
    assert quota_ratios(stack, plan_pools(stack)) == {"nvidia.com/gpu": (7, 28), "nvidia.com/mig-3g.40gb": (11, 32)}


# --------------------------------------------------------------------------------------------------------------------
# ResourceQuota mode


def test_resource_quota_sums_the_teams_units_per_resource():
    objs = objects([{"name": "research", "gpus": 8, "pools": ["infer", "train"]}], quotas="resourcequota")
    (quota,) = of_kind(objs, "ResourceQuota")
    assert quota["metadata"] == {"name": QUOTA_NAME, "namespace": "research",
                                 "labels": {"app.kubernetes.io/managed-by": "gpupools", "gpupools.io/team": "research"}}
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "3", "requests.nvidia.com/mig-3g.40gb": "5"}
    objs = objects([{"name": "search", "namespace": "search-prod", "gpus": {"infer": 4, "batch": 2}}], quotas="resourcequota")
    assert objs[0]["kind"] == "Namespace" and objs[0]["metadata"]["name"] == "search-prod"
    assert of_kind(objs, "ResourceQuota")[0]["spec"]["hard"] == {"requests.nvidia.com/gpu": "6"}
    assert not of_kind(objs, "ClusterQueue")


def test_pool_admission_policy_keeps_gpu_pods_on_the_teams_pools():
    objs = objects([{"name": "research", "gpus": 8, "pools": ["infer", "train"]}], quotas="resourcequota")
    (policy,) = of_kind(objs, "ValidatingAdmissionPolicy")
    (binding,) = of_kind(objs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    assert policy["spec"]["matchConstraints"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "research"}}
    pod = gpu_job()["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod["spec"]}
    (denied,) = admission_denials(policy, pod, "Pod")
    assert "infer, train" in denied
    pod["spec"]["nodeSelector"] = {"gpupools.io/pool": "batch"}
    assert admission_denials(policy, pod, "Pod") == [denied]
    pod["spec"]["nodeSelector"] = {"gpupools.io/pool": "train"}
    assert admission_denials(policy, pod, "Pod") == []
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    pod["spec"].pop("nodeSelector")
    assert admission_denials(policy, pod, "Pod") == []  # no GPU, no rule


def test_team_on_all_pools_gets_no_pool_admission_policy():
    objs = objects([{"name": "platform", "gpus": 4}], quotas="resourcequota")
    assert of_kind(objs, "ResourceQuota") and not of_kind(objs, "ValidatingAdmissionPolicy")


def test_no_admission_policy_before_kubernetes_1_30():
    # No cloud still offers 1.29, so validation refuses it; the models alone still describe such a cluster.
    from gpupools.stack.config import StackConfig
    from gpupools.stack.values import split_namespaces

    raw = stack_config("aws", pools=POOLS, teams=[{"name": "research", "gpus": 8, "pools": ["infer"]}], quotas="resourcequota",
                       cluster={"name": "old", "create": False, "kubernetesVersion": "1.29"})
    ours, providers, _ = split_namespaces(raw)
    stack = StackConfig.model_validate({**ours, "providers": providers})
    assert not admission_policy_supported(stack)
    objs = quota_plan(stack, plan_pools(stack)).objects
    assert not of_kind(objs, "ValidatingAdmissionPolicy") and of_kind(objs, "ResourceQuota")


@pytest.mark.parametrize("quotas", ["resourcequota", "kueue"])
def test_core_manifests_are_schema_valid(quotas):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    objs = objects([{"name": "research", "gpus": 8, "pools": ["infer", "train"]}, {"name": "platform", "gpus": 2}], quotas=quotas)
    core = [o for o in objs if not o["apiVersion"].startswith(("kueue.x-k8s.io/", "monitoring.coreos.com/"))]
    assert {"Namespace", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= {o["kind"] for o in core}
    for version in ("1.31.0", "1.33.0"):
        for obj in core:
            kubernetes_validate.validate(obj, version, strict=True)


# --------------------------------------------------------------------------------------------------------------------
# Kueue: the objects


TEAMS = [{"name": "research", "gpus": {"train": 24, "infer": 8}, "priority": "normal"},
         {"name": "search", "namespace": "search-prod", "gpus": {"infer": 16, "batch": 4}, "lend": 4, "borrow": "none", "priority": "high"},
         {"name": "interns", "gpus": 0, "pools": ["infer"], "borrow": 2, "priority": "low"}]


def test_kueue_objects_in_order():
    objs = objects(TEAMS)
    kinds = [o["kind"] for o in objs]
    assert kinds[:4] == ["Namespace"] * 4 and objs[0]["metadata"]["name"] == "kueue-system"
    assert [o["metadata"]["name"] for o in of_kind(objs, "WorkloadPriorityClass")] == ["high", "normal", "low"]
    assert [o["metadata"]["name"] for o in of_kind(objs, "ResourceFlavor")] == ["infer", "train", "batch"]
    assert [o["metadata"]["name"] for o in of_kind(objs, "ClusterQueue")] == ["research", "search", "interns"]
    assert [(o["metadata"]["namespace"], o["spec"]["clusterQueue"]) for o in of_kind(objs, "LocalQueue")] == [
        ("research", "research"), ("search-prod", "search"), ("interns", "interns")]
    assert of_kind(objs, "Cohort")[0]["metadata"]["name"] == kueue.COHORT
    assert len(of_kind(objs, "ValidatingAdmissionPolicy")) == len(of_kind(objs, "ValidatingAdmissionPolicyBinding")) == 3
    (monitor,) = of_kind(objs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert not of_kind(objs, "ResourceQuota")


def test_flavor_lands_on_its_pool_and_tolerates_its_taints():
    stack = validate_stack(stack_config("azure", pools=[{"name": "t4", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 2, "spot": True}],
                                        teams=[{"name": "ml", "gpus": 2}]))
    (flavor,) = of_kind(quota_plan(stack, plan_pools(stack)).objects, "ResourceFlavor")
    assert flavor["spec"]["nodeLabels"] == {"gpupools.io/pool": "t4"}
    keys = {t["key"] for t in flavor["spec"]["tolerations"]}
    assert keys == {"nvidia.com/gpu", "kubernetes.azure.com/scalesetpriority"}  # AKS taints spot nodes itself


def test_cluster_queues_carry_quota_limits_and_reclaim():
    research, search, interns = of_kind(objects(TEAMS), "ClusterQueue")
    assert research["spec"]["resourceGroups"] == [
        {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "infer", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]},
        {"coveredResources": ["nvidia.com/mig-3g.40gb"],
         "flavors": [{"name": "train", "resources": [{"name": "nvidia.com/mig-3g.40gb", "nominalQuota": 24}]}]},
    ]
    (group,) = search["spec"]["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["infer", "batch"]
    assert group["flavors"][0]["resources"] == [{"name": "nvidia.com/gpu", "nominalQuota": 16, "borrowingLimit": 0, "lendingLimit": 4}]
    assert group["flavors"][1]["resources"] == [{"name": "nvidia.com/gpu", "nominalQuota": 4, "borrowingLimit": 0, "lendingLimit": 4}]
    capped = objects([{"name": "a", "gpus": {"batch": 2}, "lend": 5}])
    assert of_kind(capped, "ClusterQueue")[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] == 2  # never more than it has
    assert interns["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": 0, "borrowingLimit": 2}]  # a team with no quota lives on borrowed units
    for cq in (research, search, interns):
        assert cq["spec"]["cohortName"] == "gpupools"
        assert cq["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
        assert cq["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert search["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "search-prod"}}


def _crd_schema(ref, plural: str) -> dict:
    crd = yaml.safe_load((ref / "kueue" / f"kueue.x-k8s.io_{plural}.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == kueue.API_VERSION.split("/")[1]]
    assert version["served"]
    return version["schema"]["openAPIV3Schema"]


KUEUE_KINDS = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
               "WorkloadPriorityClass": "workloadpriorityclasses", "Cohort": "cohorts"}


@pytest.mark.parametrize("cloud", ["aws", "azure", "gcp"])
def test_kueue_objects_validate_against_the_pinned_crds_schema_and_rules(cloud):
    jsonschema = pytest.importorskip("jsonschema")
    ref = needs_reference()
    schemas = {kind: _crd_schema(ref, plural) for kind, plural in KUEUE_KINDS.items()}
    stacks = {"aws": objects(TEAMS)}
    if cloud != "aws":
        config = stack_config(cloud, teams=[{"name": "ml", "gpus": 3, "borrow": 1, "lend": "none", "priority": "high"}, {"name": "ops", "gpus": 1}])
        stack = validate_stack(config)
        stacks[cloud] = quota_plan(stack, plan_pools(stack)).objects
    checked = set()
    for obj in stacks[cloud]:
        if obj["apiVersion"] == kueue.API_VERSION:
            jsonschema.validate(obj, schemas[obj["kind"]])
            assert crd_rule_failures(obj, schemas[obj["kind"]]) == []
            checked.add(obj["kind"])
    assert checked == set(KUEUE_KINDS)


def test_the_crd_checks_catch_a_wrong_field_and_a_broken_rule():
    jsonschema = pytest.importorskip("jsonschema")
    schema = _crd_schema(needs_reference(), "clusterqueues")
    cq = of_kind(objects(TEAMS), "ClusterQueue")[1]
    bad = json.loads(json.dumps(cq))
    bad["spec"]["preemption"]["reclaimWithinCohort"] = "Always"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    orphan = json.loads(json.dumps(cq))
    del orphan["spec"]["cohortName"]  # borrowing limits without a cohort mean nothing; the CRD says so
    assert crd_rule_failures(orphan, schema) == ["/spec: borrowingLimit must be nil when cohort is empty"]


# --------------------------------------------------------------------------------------------------------------------
# Kueue: the queue admission policy, evaluated


def test_gpu_workloads_must_queue_through_the_team_queue():
    policy = of_kind(objects(TEAMS), "ValidatingAdmissionPolicy")[0]
    assert policy["spec"]["matchConstraints"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "research"}}
    denied = admission_denials(policy, gpu_job(), "Job")
    assert denied == ["GPU workloads in namespace research queue for team research's GPU quota: set label kueue.x-k8s.io/queue-name=research"]
    assert admission_denials(policy, gpu_job({"kueue.x-k8s.io/queue-name": "search"}), "Job") == denied
    assert admission_denials(policy, gpu_job({"kueue.x-k8s.io/queue-name": "research"}), "Job") == []
    assert admission_denials(policy, gpu_job({"kueue.x-k8s.io/queue-name": "research"}, "nvidia.com/mig-3g.40gb"), "Job") == []
    cpu_job = gpu_job()
    cpu_job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    assert admission_denials(policy, cpu_job, "Job") == []


def test_pods_of_a_job_pass_bare_pods_and_deployments_are_checked():
    policy = of_kind(objects(TEAMS), "ValidatingAdmissionPolicy")[0]
    template = gpu_job()["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "1"}]}, "spec": template["spec"]}
    assert admission_denials(policy, pod, "Pod") == []
    del pod["metadata"]["ownerReferences"]
    assert len(admission_denials(policy, pod, "Pod")) == 1
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"kueue.x-k8s.io/queue-name": "research"}},
                  "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": template["spec"]}}}
    assert admission_denials(policy, deployment, "Deployment") == []
    del deployment["metadata"]["labels"]
    assert len(admission_denials(policy, deployment, "Deployment")) == 1


def test_priority_no_higher_than_the_teams():
    research, search, _ = of_kind(objects(TEAMS), "ValidatingAdmissionPolicy")
    labels = {"kueue.x-k8s.io/queue-name": "research", "kueue.x-k8s.io/priority-class": "high"}
    (denied,) = admission_denials(research, gpu_job(labels), "Job")
    assert denied == "team research may use the priority classes normal, low; set label kueue.x-k8s.io/priority-class to one of them"
    assert admission_denials(research, gpu_job({**labels, "kueue.x-k8s.io/priority-class": "low"}), "Job") == []
    assert admission_denials(search, gpu_job({"kueue.x-k8s.io/queue-name": "search", "kueue.x-k8s.io/priority-class": "high"}), "Job") == []


# --------------------------------------------------------------------------------------------------------------------
# Kueue: the chart


def test_helm_values_exist_in_the_pinned_chart():
    ref = needs_reference()
    upstream = yaml.safe_load((ref / "kueue" / "values.yaml").read_text())
    chart = yaml.safe_load((ref / "kueue" / "Chart.yaml").read_text())
    assert chart["version"] == kueue.CHART.default_version and chart["name"] == "kueue"
    for path in value_paths(kueue.helm_values()):
        assert has_path(upstream, path), path


def test_controller_configuration_uses_the_charts_own_option_names():
    """Every option we set is one the chart's default configuration names, live or commented out."""
    import re

    ref = needs_reference()
    upstream = yaml.safe_load((ref / "kueue" / "values.yaml").read_text())
    shipped_text = upstream["managerConfig"]["controllerManagerConfigYaml"]
    shipped = yaml.safe_load(shipped_text)
    ours = yaml.safe_load(kueue.helm_values()["managerConfig"]["controllerManagerConfigYaml"])
    assert ours == kueue.manager_configuration()
    for path in value_paths(ours, free_form=("managedJobsNamespaceSelector",)):
        assert has_path(shipped, path) or re.search(rf"^\s*#\s*{re.escape(path[-1])}:", shipped_text, re.M), path
    assert re.search(r'quotaCheckStrategy: "BlockUndeclared"', shipped_text)  # the commented example names the option
    assert set(ours["integrations"]["frameworks"]) <= set(shipped["integrations"]["frameworks"])
    # What the chart's default keeps running must stay as it was.
    for key in ("health", "webhook", "leaderElection"):
        assert ours[key] == shipped[key]
    assert ours["metrics"] == {**shipped["metrics"], "enableClusterQueueResources": True}


# --------------------------------------------------------------------------------------------------------------------
# Under Pulumi's mocks, and what the plan says


def test_kueue_under_mocks_waits_for_its_release():
    config = stack_config("aws", pools=POOLS, teams=TEAMS)
    plan = run_program(config, "test")
    (component,) = plan.of_type("gpupools:index:TeamQuotas")
    children = plan.children("gpupools:index:TeamQuotas", component.name)
    (release,) = [r for r in children if r.type == "kubernetes:helm.sh/v3:Release"]
    assert release.inputs["chart"] == "oci://registry.k8s.io/kueue/charts/kueue" and release.inputs["version"] == "0.19.2"
    assert release.inputs["namespace"] == "kueue-system" and release.depends("kubernetes:core/v1:Namespace", "namespace-kueue-system")
    for r in children:
        if r.type.startswith("kubernetes:kueue.x-k8s.io/"):
            assert r.depends("kubernetes:helm.sh/v3:Release", "kueue"), r.name  # CRDs and webhooks first
    (monitor,) = [r for r in children if r.type == "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"]
    assert monitor.depends("kubernetes:helm.sh/v3:Release", "kube-prometheus-stack")
    assert plan.outputs["teams"][1] == {"team": "search", "namespace": "search-prod", "units": {"infer": 16, "batch": 4},
                                        "queue": "search", "priority": "high", "borrow": "none", "lend": "4"}


def test_resourcequota_mode_under_mocks():
    config = stack_config("aws", pools=POOLS, quotas="resourcequota", teams=[{"name": "research", "gpus": 8, "pools": ["infer", "train"]},
                                                                            {"name": "search", "namespace": "search-prod", "gpus": 2}])
    plan = run_program(config, "test")
    assert not plan.of_type("kubernetes:helm.sh/v3:Release") or all(r.inputs["name"] != "kueue" for r in plan.of_type("kubernetes:helm.sh/v3:Release"))
    quota = plan.get("kubernetes:core/v1:ResourceQuota", f"resourcequota-search-prod-{QUOTA_NAME}")
    assert quota.inputs["spec"]["hard"] == {"requests.nvidia.com/gpu": "1", "requests.nvidia.com/mig-3g.40gb": "1"}
    assert "queue" not in plan.outputs["teams"][0]


def test_no_teams_no_component():
    plan = run_program(stack_config("aws"), "test")
    assert not plan.of_type("gpupools:index:TeamQuotas") and "teams" not in plan.outputs


def test_plan_output_shows_each_team_and_the_cohort():
    config = stack_config("aws", pools=POOLS, teams=TEAMS)
    stack = validate_stack(config)
    console = Console(record=True, width=200)
    print_plan(stack, run_program(config, "test"), console)
    text = console.export_text()
    assert "teams: Kueue 0.19.2" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("search "))
    assert row.split() == ["search", "search-prod", "search", "high", "16", "-", "4", "none", "4"]
    assert "team quotas (cohort gpupools) vs. units at maxNodes: infer 24 of 24 (1.00x), train 24 of 32 (0.75x), batch 4 of 4 (1.00x)" in text


def test_team_rows_follow_the_engine():
    stack = teams_stack([{"name": "ml", "gpus": 4}], quotas="resourcequota")
    assert team_rows(stack, plan_pools(stack)) == [{"team": "ml", "namespace": "ml", "units": {"infer": 2, "train": 2, "batch": 0}}]


def test_team_jobs_on_vgpu_pools_name_hams_scheduler_and_the_pool():
    from gpupools.stack.errors import ConfigError
    from gpupools.landing.jobs import team_job

    pools = [{"name": "l4", "instanceType": "g6.xlarge", "maxNodes": 4, "sharing": {"mode": "vgpu", "replicas": 4}},
             {"name": "a10", "instanceType": "g5.xlarge", "maxNodes": 2}]
    stack = validate_stack(stack_config("aws", pools=pools, teams=[{"name": "ml", "gpus": 8}]))
    with pytest.raises(ConfigError) as exc:
        team_job(stack, plan_pools(stack), "ml", None, None, "cuda")
    assert str(exc.value.problems[0]).startswith("error: --pool: team ml's pool l4 shares GPUs as vGPUs")
    job = team_job(stack, plan_pools(stack), "ml", "l4", None, "cuda", gpu_memory="8Gi", gpu_cores=30)
    spec = job["spec"]["template"]["spec"]
    assert spec["schedulerName"] == "hami-scheduler" and spec["nodeSelector"] == {"gpupools.io/pool": "l4"}
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 8192, "nvidia.com/gpucores": 30}
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "ml" and job["spec"]["suspend"] is True
    with pytest.raises(ConfigError) as exc:
        team_job(stack, plan_pools(stack), "ml", "a10", None, "cuda", gpu_cores=30)
    assert str(exc.value.problems[0]).startswith("error: --gpu-cores: applies to vgpu pools only")


def test_policy_and_plan_agree_on_vgpu_capacity():
    """HAMi's pools offer split-count vGPUs per GPU; the policy reads that back from the HAMi release."""
    from gpupools.policies.quotas import queue_ratios
    from gpupools.cli.policycheck import policy_resources

    pools = [{"name": "l4", "instanceType": "g6.xlarge", "maxNodes": 4, "sharing": {"mode": "vgpu", "replicas": 4}},
             {"name": "a10", "instanceType": "g5.xlarge", "maxNodes": 2}]
    config = stack_config("aws", pools=pools, teams=[{"name": "ml", "gpus": 9}])
    stack = validate_stack(config)
    expected = pool_totals(stack, plan_pools(stack))
    assert expected == {"l4": (8, 16), "a10": (1, 2)}
    assert queue_ratios(policy_resources(run_program(config, "test"))) == expected


def test_kueue_service_monitor_validates_and_selects_the_charts_metrics_port():
    jsonschema = pytest.importorskip("jsonschema")
    ref = needs_reference()
    (monitor,) = of_kind(objects(TEAMS), "ServiceMonitor")
    jsonschema.validate(monitor, service_monitor_schema(ref))
    upstream = yaml.safe_load((ref / "kueue" / "values.yaml").read_text())
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in upstream["metricsService"]["ports"]}
    assert monitor["metadata"]["namespace"] == kueue.CHART.namespace


@pytest.mark.parametrize("quotas", ["kueue", "resourcequota"])
def test_team_objects_wait_for_their_own_namespace_only(quotas):
    """The dependencies of a team's objects do not grow with the number of teams: each waits for its namespace and
    the engine's release, a binding for its policy. Waiting on every namespace made a plan quadratic in teams."""
    def widest(count: int) -> tuple[int, int]:
        teams = [{"name": f"team-{i}", "gpus": 2} for i in range(count)]
        plan = run_program(stack_config("aws", pools=POOLS, teams=teams, quotas=quotas), "test")
        (component,) = plan.of_type("gpupools:index:TeamQuotas")
        children = [r for r in plan.children("gpupools:index:TeamQuotas", component.name) if r.type != "kubernetes:helm.sh/v3:Release"]
        for r in children:
            namespace = r.inputs["metadata"].get("namespace")
            waits = {n for t, n in r.depends_on if t == "kubernetes:core/v1:Namespace"}
            assert waits <= {f"namespace-{namespace}"}, (r.name, waits)
            if r.type.endswith(":ValidatingAdmissionPolicyBinding"):
                assert r.depends_on == (("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
                                        "validatingadmissionpolicy-" + r.inputs["spec"]["policyName"]),)
        return max(len(r.depends_on) for r in children), sum(len(r.depends_on) for r in children)

    few, many = widest(3), widest(12)
    assert few[0] == many[0]  # no object's dependencies grow with the number of teams
    assert many[1] <= 4 * few[1] + 12  # and all of them together grow with it linearly
