"""`gpupools check`: example stacks pass; stacks built to break a policy fail with its name; bad input exits 2."""

from __future__ import annotations

import copy
import json

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.stack.values import read_stack_file
from gpupools.cli.planrun import run_program
from gpupools.cli.policycheck import policy_settings, run_policies
from gpupools.policies.pack import POLICIES
from gpupools.validation.stack import load_stack

from conftest import ROOT, stack_config

runner = CliRunner()
STACKS = ["dev-aws", "dev-azure", "dev-gcp", "dev-aws-auto", "dev-azure-nap", "dev-gcp-fallback", "dev-aws-gb200", "dev-gcp-a4x"]


def invoke(*args):
    return runner.invoke(app, list(args))


def check_json(*args) -> tuple[int, list[dict]]:
    result = invoke("check", *args, "--json")
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {"violations", "policy_config"}
    for v in doc["violations"]:
        assert set(v) == {"policy", "level", "resource", "message"}
    return result.exit_code, doc["violations"]


@pytest.mark.parametrize("stack", STACKS)
def test_example_stacks_pass_their_own_policies(stack):
    """With the pack's defaults and no policy config: an example that fails or warns about itself teaches users to
    switch policies off."""
    code, violations = check_json("--stack", stack)
    assert code == 0
    assert violations == []


def test_dev_gcp_sets_its_own_budget_and_an_organisation_cap_can_be_tighter(tmp_path):
    """dev-gcp's two A3 Mega nodes cost about $135k a month at maxNodes; the stack's own budget allows that, and a
    policy config with a lower cap fails it, naming the cap."""
    assert load_stack(ROOT / "stacks" / "Pulumi.dev-gcp.yaml").budget.max_monthly_usd >= 135_000
    path = tmp_path / "policy.json"
    path.write_text('{"fleet-budget": {"maxMonthlyUsd": 100000}}')
    code, violations = check_json("--stack", "dev-gcp", "--policy-config", str(path))
    assert code == 1
    (message,) = [v["message"] for v in violations if v["level"] == "mandatory"]
    assert "the policy config's cap maxMonthlyUsd of $100,000" in message


def test_human_output_summary_line():
    result = invoke("check", "--stack", "dev-aws")
    assert result.exit_code == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("gpupools check passed: stack dev-aws,") and f"{len(POLICIES)} policies" in last


# --------------------------------------------------------------------------------------------------------------------
# Stacks that break a policy through their config


def _pool(**fields) -> dict:
    return {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3, **fields}


def test_too_large_fleet_fails_fleet_budget(stack_file):
    path = stack_file({**stack_config("aws", pools=[_pool(name="train", instanceType="p5.48xlarge", maxNodes=10)]), "aws:region": "us-east-1",
                       "gpupools:budget": {"maxGpus": 64}})
    result = invoke("check", "--config", str(path))
    assert result.exit_code == 1
    assert "fleet-budget" in result.stdout and "FAILED" in result.stdout


@pytest.mark.parametrize("cloud, pool", [
    ("aws", _pool(sharing={"mode": "time-slicing", "replicas": 32})),
    ("aws", _pool(instanceType="g6.xlarge", os="bottlerocket", sharing={"mode": "mps", "replicas": 24})),
    ("gcp", {"name": "infer", "instanceType": "g2-standard-8", "maxNodes": 2, "sharing": {"mode": "time-slicing", "replicas": 40}}),
    ("azure", {"name": "infer", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 2, "sharing": {"mode": "mps", "replicas": 20}}),
])
def test_too_many_replicas_fail_gpu_sharing_sane(stack_file, cloud, pool):
    code, violations = check_json("--config", str(stack_file(stack_config(cloud, pools=[pool]))))
    assert code == 1
    assert {v["policy"] for v in violations if v["level"] == "mandatory"} == {"gpu-sharing-sane"}


def test_policy_config_raises_the_replica_limit(stack_file, tmp_path):
    path = stack_file(stack_config("aws", pools=[_pool(sharing={"mode": "time-slicing", "replicas": 32})]))
    config = tmp_path / "policy.json"
    config.write_text(json.dumps({"gpu-sharing-sane": {"maxReplicas": 32}}))
    code, _ = check_json("--config", str(path), "--policy-config", str(config))
    assert code == 0


def test_oversubscribed_teams_warn_without_failing(stack_file):
    path = stack_file(stack_config("aws", teams=[{"name": "research", "gpus": 10}, {"name": "search", "gpus": 10}]))
    code, violations = check_json("--config", str(path))
    assert code == 0
    (warning,) = [v for v in violations if v["policy"] == "team-quota-oversubscription"]
    assert warning["level"] == "advisory" and "promise 20 units of pool infer against 3" in warning["message"]


def test_disabled_monitoring_is_advisory_unless_made_mandatory(stack_file, tmp_path):
    path = stack_file(stack_config("azure", monitoring={"enabled": False}))
    code, violations = check_json("--config", str(path))
    assert code == 0 and [v["level"] for v in violations if v["policy"] == "gpu-monitoring-deployed"] == ["advisory"]
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({"gpu-monitoring-deployed": "mandatory"}))
    code, violations = check_json("--config", str(path), "--policy-config", str(strict))
    assert code == 1 and [v["level"] for v in violations if v["policy"] == "gpu-monitoring-deployed"] == ["mandatory"]


def test_gke_operator_pools_are_exempt_from_secure_boot_only_by_config(stack_file, tmp_path):
    path = stack_file(stack_config("gcp", gpuSoftware={"installer": "gpu-operator"}))
    result = invoke("check", "--config", str(path))
    assert result.exit_code == 0, result.stdout
    assert "note: gke-shielded-nodes" in result.stdout and "unsigned" in result.stdout
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({"gke-shielded-nodes": {"allowOperatorDriverPools": False}}))
    code, violations = check_json("--config", str(path), "--policy-config", str(strict))
    assert code == 1 and {v["policy"] for v in violations} == {"gke-shielded-nodes"}


# --------------------------------------------------------------------------------------------------------------------
# Plans changed after the fact, for policies gpupools itself never breaks: the offline runner must still catch them


def _plan(stack: str):
    return run_program(read_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml"), stack)


def _first(plan, typ: str, name: str | None = None):
    return next(r for r in plan.resources if r.type == typ and (name is None or r.name == name))


def _untaint(plan):
    _first(plan, "kubernetes:karpenter.sh/v1:NodePool", "nodepool-gpupools-infer").inputs["spec"]["template"]["spec"]["taints"] = []


def _untaint_node_group(plan):
    _first(plan, "aws:eks/nodeGroup:NodeGroup", "infer").inputs["taints"] = []


def _imdsv1_node_class(plan):
    _first(plan, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass").inputs["spec"]["metadataOptions"]["httpTokens"] = "optional"


def _imdsv1(plan):
    _first(plan, "aws:ec2/launchTemplate:LaunchTemplate").inputs["metadataOptions"]["httpTokens"] = "optional"


def _ssh(plan):
    _first(plan, "aws:eks/nodeGroup:NodeGroup", "system").inputs["remoteAccess"] = {"ec2SshKey": "ops"}


def _float_chart(plan):
    _first(plan, "kubernetes:helm.sh/v3:Release", "gpu-operator").inputs["version"] = "^26.0.0"


def _plain_password(plan):
    secret = _first(plan, "kubernetes:core/v1:Secret")
    key = next(k for k in secret.inputs["stringData"] if "password" in k)
    secret.inputs["stringData"][key] = "hunter2"


def _gce_metadata(plan):
    _first(plan, "gcp:container/nodePool:NodePool", "infer").inputs["nodeConfig"]["workloadMetadataConfig"]["mode"] = "GCE_METADATA"


def _gpu_job(plan):
    from gpupools.cli.planrun import PlannedResource

    pod = {"containers": [{"name": "train", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1.5"}}}]}
    plan.resources.append(PlannedResource("kubernetes:batch/v1:Job", "train-job", None,
                                          {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": pod}}}, True))


def _mig_typo(plan):
    pool = _first(plan, "azure-native:containerservice:AgentPool", "finetune")
    pool.inputs["nodeLabels"]["nvidia.com/mig.config"] = "all-1g.5gb"


@pytest.mark.parametrize("stack, change, policy", [
    ("dev-aws", _untaint, "gpu-pool-taint"),
    ("dev-aws-existing", _untaint_node_group, "gpu-pool-taint"),
    ("dev-aws", _imdsv1, "eks-imdsv2"),
    ("dev-aws", _imdsv1_node_class, "eks-imdsv2"),
    ("dev-aws", _ssh, "no-public-ssh"),
    ("dev-aws", _float_chart, "helm-release-pinned"),
    ("dev-aws", _plain_password, "no-plaintext-secrets"),
    ("dev-gcp", _gce_metadata, "gke-metadata-server"),
    ("dev-gcp", _gpu_job, "gpu-workloads"),
    ("dev-azure", _mig_typo, "gpu-sharing-sane"),
])
def test_changed_plans_fail_with_the_policy_name(stack, change, policy):
    plan = _plan(stack)
    settings = None
    assert not run_policies(plan, settings).mandatory
    change(plan)
    result = run_policies(plan, settings)
    assert {v.policy for v in result.mandatory} == {policy}
    assert all(v.resource and v.resource.startswith(f"urn:pulumi:{stack}::gpupools::") for v in result.mandatory)


def test_resource_urns_carry_the_parent_type_chain():
    plan = _plan("dev-aws")
    _untaint(plan)
    (violation,) = run_policies(plan).mandatory
    assert violation.resource == ("urn:pulumi:dev-aws::gpupools::gpupools:index:GpuPlatform$gpupools:index:EksGpuNodePool"
                                  "$kubernetes:karpenter.sh/v1:NodePool::nodepool-gpupools-infer")


def test_disabled_policy_does_not_run():
    plan = _plan("dev-aws")
    _untaint(plan)
    settings = policy_settings({"gpu-pool-taint": "disabled"}, POLICIES)
    assert not run_policies(plan, settings).violations


# --------------------------------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize("content, expected", [
    ('{"no-such-policy": "mandatory"}', "'no-such-policy' is not a policy of this pack"),
    ('{"fleet-budget": "strict"}', "fleet-budget.enforcementLevel: \"strict\" is not one of"),
    ('{"fleet-budget": {"maxGpus": "lots"}}', "fleet-budget.maxGpus: expected an integer"),
    ('{"fleet-budget": {"maxGpus": -1}}', "fleet-budget.maxGpus: -1 is below the minimum 0"),
    ('{"gpu-sharing-sane": {"maxReplica": 8}}', "gpu-sharing-sane: unknown key 'maxReplica'"),
    ('{"team-quota-oversubscription": {"maxRatio": 0}}', "maxRatio: 0 must be greater than 0"),
    ('{"all": {"enforcementLevel": "advisory", "maxGpus": 3}}', "all: only enforcementLevel"),
    ('[1, 2]', "expected a JSON object"),
    ('{"fleet-budget": ', "not valid JSON at line 1"),
])
def test_bad_policy_config_exits_2_with_one_line(tmp_path, content, expected):
    path = tmp_path / "policy.json"
    path.write_text(content)
    result = invoke("check", "--stack", "dev-aws", "--policy-config", str(path))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines and all(line.startswith("error: --policy-config: ") for line in lines), result.stderr
    assert any(expected in line for line in lines), result.stderr
    assert "Traceback" not in result.stderr


def test_missing_policy_config_file_exits_2(tmp_path):
    result = invoke("check", "--stack", "dev-aws", "--policy-config", str(tmp_path / "nope.json"))
    assert result.exit_code == 2 and result.stderr.startswith("error: --policy-config: ") and "not found" in result.stderr


def test_all_sets_every_level_but_lowers_no_security_policy():
    from gpupools.policies.pack import SECURITY_POLICIES

    settings = policy_settings({"all": "disabled", "fleet-budget": "advisory"}, POLICIES)
    assert settings["fleet-budget"].level == "advisory"
    assert {s.level for n, s in settings.items() if n != "fleet-budget" and n not in SECURITY_POLICIES} == {"disabled"}
    assert {s.level for n, s in settings.items() if n in SECURITY_POLICIES} == {"mandatory"}
    assert settings["fleet-budget"].config == {}  # no cap unless the stack or the organisation sets one


def test_bad_stack_exits_2(stack_file):
    broken = copy.deepcopy(stack_config("aws"))
    broken["gpupools:pools"][0]["maxNodes"] = 0
    result = invoke("check", "--config", str(stack_file(broken)))
    assert result.exit_code == 2 and result.stderr.startswith("error: pools[0].maxNodes")
    assert invoke("check", "--stack", "no-such-stack").exit_code == 2


def test_ci_workflow_checks_every_stack_and_previews_only_with_credentials():
    import yaml

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "gpupools.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))
    assert "pull_request" in triggers
    jobs = workflow["jobs"]
    assert any("pytest" in step.get("run", "") for step in jobs["tests"]["steps"])
    assert any('"$gate" check' in step.get("run", "") for step in jobs["check"]["steps"])
    # Each stack's jobs install gpupools with that stack's cloud only (the extra named after it, through env): the
    # base branch's as the gate, the change's as the program to preview (tests/cli/test_workflow.py runs them).
    for job, install in (("check", 'pip" install "./base[$CLOUD]"'), ("preview", 'pip install -e "./change[$CLOUD]"')):
        assert any(install in step.get("run", "") and step["env"]["CLOUD"] == "${{ matrix.cloud }}" for step in jobs[job]["steps"]), job
    preview = jobs["preview"]
    assert preview["strategy"]["matrix"] == jobs["check"]["strategy"]["matrix"]
    runs = [s for s in preview["steps"] if s.get("run", "").rstrip().endswith("pulumi preview \"${args[@]}\"")]
    assert runs and '--policy-pack "$pack"' in runs[0]["run"]
    assert all("steps.creds.outputs.configured == 'true'" in s["if"] for s in preview["steps"][1:])


def test_human_output_keeps_bracketed_values(stack_file):
    """Messages quote values like [nvidia.com/gpu=present:NoSchedule]; the table must not eat them as markup."""
    from rich.console import Console

    from gpupools.cli.policycheck import print_result

    plan = run_program(stack_config("azure"), "test")
    next(r for r in plan.resources if r.type == "azure-native:containerservice:AgentPool").inputs["nodeTaints"] = []
    console = Console(record=True, width=400)
    print_result(run_policies(plan), "test", console)
    text = console.export_text()
    assert "nodeTaints: [nvidia.com/gpu=present:NoSchedule]" in text
    assert "gpupools check FAILED: stack test" in text
