"""JobSet: the chart where the stack has fabric pools, Kueue's JobSet integration, the JobSet `gpupools workload --nodes N
--jobset` prints (checked against the pinned CRD), the team admission policy for JobSets and their Jobs, and the landing
check following a JobSet PodSet by PodSet.

Sources: kubernetes-sigs/jobset v0.12.0 (tests/charts/jobset, tests/reference/jobset), kubernetes-sigs/kueue v0.19.2
(go.mod pins sigs.k8s.io/jobset v0.12.0; pkg/controller/jobs/jobset/jobset_controller.go FrameworkName
"jobset.x-k8s.io/jobset"; the chart's default configuration lists it, tests/reference/kueue/values.yaml).
"""

from __future__ import annotations

import copy

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from charts.chartrender import chart_dir, chart_version, need_helm, render
from conftest import ROOT, _plain_cel, cel_value, crd_rule_failures, has_path, needs_reference, plan_of, stack_config, value_paths
from gpupools.cli.main import app
from gpupools.fabric.software import JOBSET, JOBSET_CONTROLLER_USER, jobset_values
from gpupools.landing.jobs import multinode_jobset
from gpupools.landing.jobset import COORDINATOR_KEY, hostname, podsets
from gpupools.pools.planning import plan_pool, plan_pools
from gpupools.queues import kueue
from gpupools.stack.values import read_stack_file
from gpupools.validation.stack import validate_stack

# A fabric pool that keeps its two nodes, so Kueue's flavor for it is topology-aware.
FIXED = {"name": "train", "instanceType": "p4d.24xlarge", "minNodes": 2, "maxNodes": 2, "zones": ["eu-central-1a"]}
TEAM = [{"name": "ml", "gpus": {"train": 16}}]


def dev_aws():
    return validate_stack(read_stack_file(ROOT / "stacks" / "Pulumi.dev-aws.yaml"))


def jobset_schema() -> dict:
    crd = yaml.safe_load((needs_reference() / "jobset" / "jobset.x-k8s.io_jobsets.yaml").read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1alpha2")


def valid(jobset: dict) -> None:
    schema = jobset_schema()
    jsonschema.validate(jobset, schema)
    assert crd_rule_failures(jobset, schema) == []


# --------------------------------------------------------------------------------------------------------------------
# The chart and Kueue's integration


def test_jobset_is_the_release_kueue_is_built_against_and_vendored():
    assert JOBSET.default_version == "0.12.0" and JOBSET.chart == "oci://registry.k8s.io/jobset/charts/jobset"
    assert chart_version(chart_dir("jobset")) == JOBSET.default_version
    assert yaml.safe_load((needs_reference() / "jobset" / "Chart.yaml").read_text())["version"] == JOBSET.default_version


def test_jobset_is_installed_where_the_stack_has_fabric_pools():
    with_fabric = plan_of(stack_config("aws", pools=[FIXED]))
    release = with_fabric.get("kubernetes:helm.sh/v3:Release", "jobset").inputs
    assert (release["chart"], release["version"], release["namespace"]) == (JOBSET.chart, "0.12.0", "jobset-system")
    assert any(r.inputs.get("metadata", {}).get("name") == "jobset-system" for r in with_fabric.of_type("kubernetes:core/v1:Namespace"))
    without = plan_of(stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}]))
    assert not [r for r in without.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "jobset"]


def test_jobset_values_are_keys_of_the_pinned_chart_and_render():
    upstream = yaml.safe_load((needs_reference() / "jobset" / "values.yaml").read_text())
    assert [p for p in value_paths(jobset_values()) if not has_path(upstream, p)] == []
    need_helm()
    objects = render("jobset", jobset_values(), JOBSET.release, JOBSET.namespace)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == "registry.k8s.io/jobset/jobset:v0.12.0"
    assert deployment["spec"]["replicas"] == 2
    assert [o["spec"]["minAvailable"] for o in objects if o["kind"] == "PodDisruptionBudget"] == [1]
    # The admission policy's exemption names the user the controller runs as.
    assert JOBSET_CONTROLLER_USER == f"system:serviceaccount:{JOBSET.namespace}:{spec['serviceAccountName']}"


def test_kueue_turns_its_jobset_integration_on_with_the_name_kueue_uses():
    frameworks = kueue.manager_configuration()["integrations"]["frameworks"]
    assert "jobset.x-k8s.io/jobset" in frameworks
    shipped = yaml.safe_load(yaml.safe_load((needs_reference() / "kueue" / "values.yaml").read_text())["managerConfig"]["controllerManagerConfigYaml"])
    assert "jobset.x-k8s.io/jobset" in shipped["integrations"]["frameworks"]


# --------------------------------------------------------------------------------------------------------------------
# The JobSet


def test_the_jobset_is_the_multinode_job_as_one_replicated_job_and_valid_against_the_crd():
    from gpupools.landing.jobs import multinode_job

    stack = validate_stack(stack_config("aws", pools=[FIXED], teams=TEAM))
    plan = plan_pool(stack, stack.pool("train"))
    _, job = multinode_job(stack, plan, 2, team="ml")
    jobset = multinode_jobset(stack, plan, 2, team="ml")
    valid(jobset)
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "ml" and jobset["metadata"]["namespace"] == "ml"
    assert jobset["spec"]["suspend"] is True and jobset["spec"]["ttlSecondsAfterFinished"] == 3600
    assert jobset["spec"]["coordinator"] == {"replicatedJob": "workers", "jobIndex": 0, "podIndex": 0}
    assert jobset["spec"]["network"]["enableDNSHostnames"] is True
    (replicated,) = jobset["spec"]["replicatedJobs"]
    assert replicated["replicas"] == 1
    job_spec = replicated["template"]["spec"]
    assert (job_spec["completionMode"], job_spec["completions"], job_spec["parallelism"]) == ("Indexed", 2, 2)
    assert "suspend" not in job_spec and "ttlSecondsAfterFinished" not in job_spec
    template = job_spec["template"]
    # Kueue's topology request where the pool's flavor is topology-aware, as on the Job.
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"] == job["spec"]["template"]["metadata"]["annotations"][
        "kueue.x-k8s.io/podset-preferred-topology"]
    ours, theirs = template["spec"]["containers"][0], job["spec"]["template"]["spec"]["containers"][0]
    assert {k: v for k, v in ours.items() if k not in ("command", "env")} == {k: v for k, v in theirs.items() if k not in ("command", "env")}
    assert ours["command"] == [part.replace("multinode-train-0.multinode-train", "$(COORDINATOR_ADDR)") for part in theirs["command"]]
    assert ours["env"][:-1] == theirs["env"]
    assert ours["env"][-1] == {"name": "COORDINATOR_ADDR", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COORDINATOR_KEY}']"}}}
    assert "subdomain" not in template["spec"]  # JobSet sets it to its own Service


def test_the_coordinator_annotation_names_pod_zero_under_the_jobsets_service():
    """jobset_controller.go CoordinatorEndpoint: <jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>."""
    assert hostname("multinode-train", 0) == "multinode-train-workers-0-0.multinode-train"


def test_the_crd_refuses_what_it_must():
    stack = validate_stack(stack_config("aws", pools=[FIXED]))
    jobset = multinode_jobset(stack, plan_pool(stack, stack.pool("train")), 2)
    broken = copy.deepcopy(jobset)
    del broken["spec"]["coordinator"]["replicatedJob"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, jobset_schema())
    ordered = copy.deepcopy(jobset)
    ordered["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    ordered["spec"]["replicatedJobs"][0]["dependsOn"] = [{"name": "x", "status": "Ready"}]
    assert crd_rule_failures(ordered, jobset_schema()) == ["/spec: StartupPolicy and DependsOn APIs are mutually exclusive"]


def test_cli_prints_one_jobset_and_refuses_it_without_nodes(stack_file):
    path = stack_file(stack_config("aws", pools=[FIXED, {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}], teams=TEAM))
    out = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "train", "--nodes", "2", "--jobset", "--team", "ml", "--explain"])
    assert out.exit_code == 0, out.output
    assert out.output.startswith("# landing: lands on flavor train")
    budget, doc = list(yaml.safe_load_all(out.output))
    assert doc["kind"] == "JobSet"
    assert budget["kind"] == "PodDisruptionBudget" and budget["metadata"]["namespace"] == doc["metadata"]["namespace"]
    assert budget["spec"]["selector"] == {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": doc["metadata"]["name"]}}
    valid(doc)
    bad = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "train", "--jobset"])
    assert bad.exit_code == 2 and bad.output.startswith("error: --jobset: ") and bad.output.count("\n") == 1
    nofabric = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "infer", "--nodes", "2", "--jobset"])
    assert nofabric.exit_code == 2 and nofabric.output.startswith("error: --nodes: pool 'infer' has no fabric") and nofabric.output.count("\n") == 1


# --------------------------------------------------------------------------------------------------------------------
# The team admission policy


def denials(policy: dict, obj: dict, kind: str, user: str = "someone") -> list[str]:
    """As conftest.admission_denials, with the requesting user the policy reads for Jobs a JobSet creates."""
    activation: dict = {"object": obj, "request": {"kind": {"kind": kind}, "operation": "CREATE", "userInfo": {"username": user}}, "variables": {}}
    for variable in policy["spec"]["variables"]:
        activation["variables"][variable["name"]] = _plain_cel(cel_value(variable["expression"], activation))
    return [v["message"] for v in policy["spec"]["validations"] if not bool(cel_value(v["expression"], activation))]


def test_jobsets_queue_and_only_the_jobset_controllers_jobs_skip_the_check():
    stack = validate_stack(stack_config("aws", pools=[FIXED], teams=TEAM))
    from gpupools.queues.teams import plan_teams

    plans = plan_pools(stack)
    (policy,) = [o for o in kueue.team_objects(stack, plans, plan_teams(stack, plans), None) if o["kind"] == "ValidatingAdmissionPolicy"]
    assert {"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["v1alpha2"], "operations": ["CREATE"], "resources": ["jobsets"]} in \
        policy["spec"]["matchConstraints"]["resourceRules"]
    jobset = multinode_jobset(stack, plan_pool(stack, stack.pool("train")), 2, team="ml")
    assert denials(policy, jobset, "JobSet") == []
    unqueued = copy.deepcopy(jobset)
    del unqueued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert len(denials(policy, unqueued, "JobSet")) == 1
    # A GPU in a second replicated job counts too.
    cpu_first = copy.deepcopy(unqueued)
    cpu = copy.deepcopy(cpu_first["spec"]["replicatedJobs"][0])
    cpu["name"] = "driver"
    cpu["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    cpu_first["spec"]["replicatedJobs"].insert(0, cpu)
    assert len(denials(policy, cpu_first, "JobSet")) == 1
    # The Jobs the controller makes carry the replicated job's labels only.
    child = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "multinode-train-workers-0", "labels": {},
             "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "multinode-train", "uid": "1"}]},
             "spec": jobset["spec"]["replicatedJobs"][0]["template"]["spec"]}
    assert denials(policy, child, "Job", JOBSET_CONTROLLER_USER) == []
    assert len(denials(policy, child, "Job", "system:serviceaccount:ml:default")) == 1  # an owner reference alone does not do


# --------------------------------------------------------------------------------------------------------------------
# The landing check


def test_the_landing_check_follows_a_jobset_podset_by_podset():
    from gpupools.landing.check import cluster_of, land

    stack = dev_aws()
    cluster = cluster_of(stack)
    team = next(t for t in cluster.teams if t.team.name == "research")
    plan = next(p for p in cluster.plans if p.name == "pretrain")
    jobset = multinode_jobset(stack, plan, 2, team="research", team_plans=cluster.teams)
    verdict = land(cluster, team, plan, "gang", jobset)
    job_verdict = land(cluster, team, plan, "gang")
    assert verdict.lands and [s.name for s in verdict.steps] == [s.name for s in job_verdict.steps]
    assert verdict.job == job_verdict.job == "2 pods, each 8 x nvidia.com/gpu, 4 x vpc.amazonaws.com/efa"
    (name, view), = podsets(jobset)
    assert name == "workers" and view["spec"]["parallelism"] == 2


def test_a_jobset_that_cannot_land_says_which_podset_stops():
    from gpupools.landing.check import cluster_of, land

    stack = dev_aws()
    cluster = cluster_of(stack)
    team = next(t for t in cluster.teams if t.team.name == "research")
    plan = next(p for p in cluster.plans if p.name == "pretrain")
    jobset = multinode_jobset(stack, plan, 2, team="research", team_plans=cluster.teams)
    second = copy.deepcopy(jobset["spec"]["replicatedJobs"][0])
    second["name"] = "more"
    second["replicas"] = 2  # two more Jobs of two pods: four nodes, the pool has two
    jobset["spec"]["replicatedJobs"].append(second)
    verdict = land(cluster, team, plan, "gang", jobset)
    assert not verdict.lands
    assert verdict.failing.name == "queue" and "PodSet more:" in verdict.failing.detail
    assert "PodSet workers: admitted" in verdict.failing.detail
