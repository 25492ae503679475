"""KAI Scheduler as the queue engine: queues against the pinned Queue CRD and KAI's own queue webhook rules, the chart
values against the pinned values.yaml and the real chart rendered by helm, the admission policy evaluated as CEL, the
hierarchy and fraction checks (one line, exit 2), the plan's queue tree, and the component under Pulumi's mocks.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from gpupools.cli.planrun import run_program
from gpupools.pools.planning import plan_pools
from gpupools.queues import kai
from gpupools.queues.engine import queue_tree_lines, quota_plan, team_rows
from gpupools.queues.teams import plan_teams
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

from conftest import admission_denials, crd_rule_failures, has_path, needs_reference, stack_config, value_paths

POOLS = [
    {"name": "share", "instanceType": "g6.xlarge", "maxNodes": 4, "sharing": {"mode": "none", "fraction": 0.25}},
    {"name": "train", "instanceType": "g5.12xlarge", "maxNodes": 3},
]
# At maxNodes: share 4 x 1 L4, train 3 x 4 A10G = 12.
TEAMS = [
    {"name": "vision", "gpus": {"train": 6, "share": 1}, "overQuotaWeight": 2},
    {"name": "speech", "gpus": {"train": 2, "share": 1}, "borrow": "none"},
    {"name": "search", "namespace": "search-prod", "gpus": {"share": 2, "train": 4}, "priority": "high"},
]
DEPARTMENTS = [
    {"name": "research", "teams": ["vision", "speech"], "gpus": 10, "borrow": 4, "overQuotaWeight": 3},
    {"name": "product", "teams": ["search"], "priority": "high"},
]


def kai_config(pools=None, teams=None, departments=None, cloud: str = "aws", **keys) -> dict:
    return stack_config(cloud, pools=copy.deepcopy(pools if pools is not None else POOLS), quotas="kai",
                        teams=copy.deepcopy(teams if teams is not None else TEAMS),
                        departments=copy.deepcopy(departments if departments is not None else DEPARTMENTS), **keys)


def kai_objects(**kwargs) -> list[dict]:
    stack = validate_stack(kai_config(**kwargs))
    return quota_plan(stack, plan_pools(stack)).objects


def queues_of(objects: list[dict]) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "Queue"}


def problems_of(config: dict) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    return [f"{p.path}: {p.message}" for p in exc.value.problems]


# --------------------------------------------------------------------------------------------------------------------
# Queues


def test_departments_are_parents_and_teams_their_leaves_with_quota_limit_and_weight():
    queues = queues_of(kai_objects())
    assert list(queues) == ["research", "vision", "speech", "product", "search"]  # each parent before its teams
    research, vision, speech, product, search = (queues[n]["spec"] for n in queues)
    assert "parentQueue" not in research and "parentQueue" not in product
    assert research["resources"]["gpu"] == {"quota": 10, "limit": 14, "overQuotaWeight": 3}
    assert product["resources"]["gpu"] == {"quota": 6, "limit": -1, "overQuotaWeight": 1}  # its teams' sum, borrow all
    assert vision["parentQueue"] == "research" and vision["resources"]["gpu"] == {"quota": 7, "limit": -1, "overQuotaWeight": 2}
    assert speech["resources"]["gpu"] == {"quota": 3, "limit": 3, "overQuotaWeight": 1}  # borrow none: the limit is the quota
    assert search["parentQueue"] == "product"
    assert (product["priority"], search["priority"], vision["priority"]) == (200, 200, 100)


def test_every_queue_leaves_cpu_and_memory_unlimited():
    """KAI refuses any request of a resource whose limit is 0, which an unset resource is (max_allowed_check.go)."""
    for q in queues_of(kai_objects()).values():
        for resource in ("cpu", "memory"):
            assert q["spec"]["resources"][resource] == {"quota": -1, "limit": -1, "overQuotaWeight": 1}


def test_a_team_outside_any_department_is_a_top_level_leaf():
    queues = queues_of(kai_objects(departments=[DEPARTMENTS[0]]))
    assert "parentQueue" not in queues["search"]["spec"] and "product" not in queues
    assert list(queues)[-1] == "search"


def _queue_crd_schema() -> dict:
    crd = yaml.safe_load((needs_reference() / "kai-scheduler" / "scheduling.run.ai_queues.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v2"]
    assert kai.API_VERSION == f"{crd['spec']['group']}/{version['name']}" and version["storage"]
    return version["schema"]["openAPIV3Schema"]


def webhook_refusals(queues: list[dict]) -> list[str]:
    """KAI v0.17.0's queue webhook (pkg/admission/webhook/queuehooks/queue_validator.go): resources required, the parent
    must exist when the child is created, and (as warnings, refused here) a child's GPU quota and the children's sum stay
    within the parent's quota. `queues` in the order they are applied."""
    out, created = [], {}
    for q in queues:
        spec = q["spec"]
        if "resources" not in spec:
            out.append(f"{q['metadata']['name']}: resources must be specified")
        parent = spec.get("parentQueue")
        if parent:
            if parent not in created:
                out.append(f"{q['metadata']['name']}: failed to get parent queue {parent}")
            else:
                mine, theirs = spec["resources"]["gpu"]["quota"], created[parent]["resources"]["gpu"]["quota"]
                if mine > theirs:
                    out.append(f"{q['metadata']['name']}: child queue GPU quota exceeds parent")
                siblings = sum(c["resources"]["gpu"]["quota"] for c in created.values() if c.get("parentQueue") == parent)
                if siblings + mine > theirs:
                    out.append(f"{q['metadata']['name']}: total children GPU quota exceeds parent")
        created[q["metadata"]["name"]] = spec
    return out


def test_queues_validate_against_the_pinned_crd_and_kais_queue_webhook():
    jsonschema = pytest.importorskip("jsonschema")
    schema = _queue_crd_schema()
    for departments in (DEPARTMENTS, [], [DEPARTMENTS[1]]):
        queues = list(queues_of(kai_objects(departments=departments)).values())
        for q in queues:
            jsonschema.validate(q, schema)
            assert crd_rule_failures(q, schema) == []
        assert webhook_refusals(queues) == []


def test_the_checks_catch_a_wrong_field_a_missing_parent_and_an_overfull_department():
    jsonschema = pytest.importorskip("jsonschema")
    schema = _queue_crd_schema()
    queues = list(queues_of(kai_objects()).values())
    bad = copy.deepcopy(queues[1])
    bad["spec"]["resources"]["gpu"]["quota"] = "7"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    assert webhook_refusals(queues[1:]) == ["vision: failed to get parent queue research", "speech: failed to get parent queue research"]
    full = copy.deepcopy(queues)
    full[0]["spec"]["resources"]["gpu"]["quota"] = 9
    assert webhook_refusals(full) == ["speech: total children GPU quota exceeds parent"]


# --------------------------------------------------------------------------------------------------------------------
# The chart


def test_helm_values_exist_in_the_pinned_chart():
    ref = needs_reference() / "kai-scheduler"
    upstream = yaml.safe_load((ref / "values.yaml").read_text())
    assert yaml.safe_load((ref / "Chart.yaml").read_text())["name"] == "kai-scheduler"
    stack = validate_stack(kai_config())
    for path in value_paths(kai.helm_values(plan_pools(stack)), free_form=("namespaceLabelSelector",)):
        assert has_path(upstream, path), path


def _rendered(values: dict) -> list[dict]:
    from charts.chartrender import render

    return render("kai-scheduler", values, kai.CHART.release, kai.CHART.namespace)


def test_the_chart_renders_the_config_the_operator_reads():
    stack = validate_stack(kai_config())
    objects = _rendered(kai.helm_values(plan_pools(stack)))
    (config,) = [o for o in objects if o["kind"] == "Config"]
    spec = config["spec"]
    assert spec["global"]["namespaceLabelSelector"] == {kai.ENGINE_LABEL: kai.ENGINE_VALUE}
    assert spec["global"]["queueLabelKey"] == kai.QUEUE_LABEL and spec["global"]["replicaCount"] == 2
    assert spec["admission"]["gpuSharing"] is True and spec["nodeScaleAdjuster"]["service"]["enabled"] is True
    assert spec["scheduler"]["service"]["image"]["repository"] == kai.REGISTRY
    assert spec["binder"]["resourceReservation"]["namespace"] == kai.RESERVATION_NAMESPACE
    assert spec["nodeScaleAdjuster"]["args"]["nodeScaleNamespace"] == kai.SCALE_ADJUST_NAMESPACE
    # No default queue (its unlimited GPU limit would bypass every team's quota), no hook Jobs for the Config or topologies.
    assert not [o for o in objects if o["kind"] == "Queue"]
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "Job"} == {"crd-upgrader", "post-delete-cleanup"}
    # The control plane tolerates no GPU taint, so it stays off the GPU pools.
    (operator,) = [o for o in objects if o["kind"] == "Deployment"]
    assert "tolerations" not in operator["spec"]["template"]["spec"] and "tolerations" not in spec["global"]
    assert operator["spec"]["template"]["spec"]["containers"][0]["image"] == f"{kai.REGISTRY}/operator:{kai.CHART.default_version}"


def test_whole_gpu_pools_alone_turn_gpu_sharing_off():
    pools = [dict(POOLS[1]), {**POOLS[0], "sharing": {"mode": "none"}}]
    stack = validate_stack(kai_config(pools=pools))
    values = kai.helm_values(plan_pools(stack))
    assert values["global"]["gpuSharing"] is False and values["global"]["clusterAutoscaling"] is False
    (config,) = [o for o in _rendered(values) if o["kind"] == "Config"]
    assert config["spec"]["admission"]["gpuSharing"] is False and config["spec"]["nodeScaleAdjuster"]["service"]["enabled"] is False


# --------------------------------------------------------------------------------------------------------------------
# Namespaces and the admission policy


def _policy(objects: list[dict], team: str) -> dict:
    return next(o for o in objects if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == f"gpupools-team-{team}-kai-queue")


def kai_job(labels=None, scheduler=kai.SCHEDULER_NAME, limits=None, annotations=None) -> dict:
    spec: dict = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "cuda", "resources": {"limits": limits if limits is not None else {"nvidia.com/gpu": 1}}}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    template: dict = {"spec": spec}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": labels or {}}, "spec": {"template": template}}


def test_team_namespaces_carry_their_queue_and_kais_selector_label():
    objects = kai_objects()
    ns = next(o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] == "search-prod")
    assert ns["metadata"]["labels"][kai.QUEUE_LABEL] == "search" and ns["metadata"]["labels"][kai.ENGINE_LABEL] == kai.ENGINE_VALUE
    assert objects[0]["metadata"]["name"] == kai.CHART.namespace and kai.ENGINE_LABEL not in objects[0]["metadata"]["labels"]


def test_gpu_workloads_must_name_kais_scheduler_and_the_teams_queue():
    policy = _policy(kai_objects(), "vision")
    queue_msg = "GPU workloads in namespace vision queue for team vision's GPU quota: set label kai.scheduler/queue=vision"
    scheduler_msg = "GPU pods in namespace vision are scheduled by KAI Scheduler: set schedulerName: kai-scheduler"
    assert admission_denials(policy, kai_job({kai.QUEUE_LABEL: "vision"}), "Job") == []
    assert admission_denials(policy, kai_job({kai.QUEUE_LABEL: "speech"}), "Job") == [queue_msg]
    assert admission_denials(policy, kai_job({kai.QUEUE_LABEL: "vision"}, scheduler=None), "Job") == [scheduler_msg]
    # A fractional pod asks for no GPU resource, only KAI's annotation: it is a GPU workload all the same.
    fractional = kai_job({}, scheduler="default-scheduler", limits={}, annotations={kai.FRACTION_ANNOTATION: "0.5"})
    assert admission_denials(policy, fractional, "Job") == [scheduler_msg, queue_msg]
    assert admission_denials(policy, kai_job({}, scheduler=None, limits={"cpu": 1}), "Job") == []  # no GPU: not KAI's business
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "ownerReferences": [{"kind": "Job", "apiVersion": "batch/v1", "name": "j"}]},
           "spec": kai_job()["spec"]["template"]["spec"]}
    assert admission_denials(policy, pod, "Pod") == []  # its Job carried the queue label
    del pod["metadata"]["ownerReferences"]
    assert admission_denials(policy, pod, "Pod") == [queue_msg]


def test_a_team_on_some_pools_only_is_kept_on_them():
    objects = kai_objects(teams=[{**TEAMS[0], "gpus": {"train": 6}}] + TEAMS[1:])
    names = {o["metadata"]["name"] for o in objects if o["kind"] == "ValidatingAdmissionPolicy"}
    assert "gpupools-team-vision-pools" in names and "gpupools-team-speech-pools" in names


# --------------------------------------------------------------------------------------------------------------------
# Bad input: one line naming the field


@pytest.mark.parametrize("change, expected", [
    (lambda c: c["gpupools:teams"][1].update(gpus={"train": 12, "share": 3}),
     "teams[1].gpus: 15 GPUs is above the limit of its department 'research' (14: its quota 10 plus borrow 4)"),
    (lambda c: c["gpupools:departments"][1]["teams"].append("vision"),
     "departments[1].teams[1]: team 'vision' is already in department 'research'; a team's queue has one parent"),
    (lambda c: c["gpupools:departments"][0].update(gpus=9),
     "departments[0].gpus: 9 is less than its teams' quotas add up to (10)"),
    (lambda c: c["gpupools:departments"][1].update(name="search"), "departments[1].name: 'search' is also a team"),
    (lambda c: c["gpupools:departments"][1]["teams"].append("nobody"), "departments[1].teams[1]: 'nobody' is not a team of this stack"),
    (lambda c: c["gpupools:teams"][0].update(lend="none"), "teams[0].lend: KAI lends every team's unused quota"),
    (lambda c: c["gpupools:pools"][0]["sharing"].update(fraction=1.0), "pools[0].sharing.fraction: input should be less than 1"),
    (lambda c: c["gpupools:pools"][0]["sharing"].update(fraction=0), "pools[0].sharing.fraction: input should be greater than 0"),
    (lambda c: c["gpupools:pools"].__setitem__(0, {"name": "share", "instanceType": "p4de.24xlarge", "maxNodes": 1,
                                                   "sharing": {"mode": "mig", "migProfile": "3g.40gb", "fraction": 0.5}}),
     "pools[0].sharing.fraction: fractions are not possible on a MIG pool"),
    (lambda c: c["gpupools:pools"][0]["sharing"].update(mode="time-slicing", replicas=4),
     "pools[0].sharing.fraction: fractions are not possible on a pool whose device plugin does time-slicing"),
    (lambda c: c["gpupools:pools"][0].update(os="bottlerocket"),
     "pools[0].sharing.fraction: fractions need the GPU Operator"),
    (lambda c: c["gpupools:pools"][1].update(sharing={"mode": "time-slicing", "replicas": 4}),
     "pools[1].sharing.mode: 'time-slicing' cannot serve KAI queues"),
    (lambda c: c.update({"gpupools:quotas": "kueue", "gpupools:departments": []}),
     "pools[0].sharing.fraction: GPU fractions are KAI Scheduler's; set gpupools:quotas: kai"),
    (lambda c: c.update({"gpupools:quotas": "kueue"}), "departments: departments are KAI Scheduler's parent queues"),
])
def test_bad_hierarchies_and_fractions_are_refused_with_the_field(change, expected):
    config = kai_config()
    change(config)
    problems = problems_of(config)
    assert any(p.startswith(expected) for p in problems), problems


def test_fractions_on_gke_need_the_gpu_operator():
    pools = [{"name": "share", "instanceType": "g2-standard-8", "maxNodes": 2, "sharing": {"mode": "none", "fraction": 0.5}}]
    teams = [{"name": "vision", "gpus": 1}]
    problems = problems_of(kai_config(pools=pools, teams=teams, departments=[], cloud="gcp"))
    assert problems == [problems[0]] and problems[0].startswith("pools[0].sharing.fraction: fractions need the GPU Operator")
    assert "GKE's own device plugin" in problems[0]
    validate_stack(kai_config(pools=pools, teams=teams, departments=[], cloud="gcp", gpuSoftware={"installer": "gpu-operator"}))


def test_the_cli_prints_one_line_and_exits_2(stack_file, capsys):
    from gpupools.cli.main import app
    from typer.testing import CliRunner

    config = kai_config()
    config["gpupools:teams"][1]["gpus"] = {"train": 12, "share": 3}
    result = CliRunner().invoke(app, ["plan", "--config", str(stack_file(config))])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ["error: teams[1].gpus: 15 GPUs is above the limit of its department 'research' (14: its quota 10 plus borrow 4); "
                     "a team cannot be guaranteed more than its department may hold"]


# --------------------------------------------------------------------------------------------------------------------
# What the plan says, and the component under Pulumi's mocks


def test_the_tree_shows_guaranteed_and_borrowable_gpus():
    stack = validate_stack(kai_config())
    lines = queue_tree_lines(stack, plan_pools(stack))
    assert lines[0] == "  research (department): 10 GPUs guaranteed, 4 borrowable (limit 14), over-quota weight 3, priority normal"
    # vision may reach 16 GPUs on its pools, but research's limit of 14 caps it at 7 beyond its 7.
    assert lines[1] == "    vision (team): 7 GPUs guaranteed (train 6, share 1), 7 borrowable (no limit), over-quota weight 2, priority normal"
    assert lines[2].startswith("    speech (team): 3 GPUs guaranteed (train 2, share 1), 0 borrowable (limit 3)")
    assert lines[4].startswith("    search (team): 6 GPUs guaranteed (share 2, train 4), 10 borrowable (no limit)")
    rows = team_rows(stack, plan_pools(stack))
    assert rows[0]["department"] == "research" and rows[0]["borrowable"] == 7 and rows[1]["borrowable"] == 0


def test_without_kai_there_is_no_tree():
    stack = validate_stack(stack_config("aws", pools=[POOLS[1]], teams=[{"name": "vision", "gpus": 2}]))
    assert queue_tree_lines(stack, plan_pools(stack)) == []


def test_kai_under_mocks_each_team_queue_waits_for_its_department_and_the_release():
    plan = run_program(kai_config(), "test")
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kai-scheduler"]
    assert release.inputs["chart"] == kai.CHART.chart and release.inputs["version"] == "v0.17.0"
    queues = {r.inputs["metadata"]["name"]: r for r in plan.of_type("kubernetes:scheduling.run.ai/v2:Queue")}
    assert set(queues) == {"research", "vision", "speech", "product", "search"}
    assert queues["vision"].depends("kubernetes:scheduling.run.ai/v2:Queue", queues["research"].name)
    assert not queues["vision"].depends("kubernetes:scheduling.run.ai/v2:Queue", queues["product"].name)
    assert queues["research"].depends("kubernetes:helm.sh/v3:Release", "kai-scheduler")
    assert not [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kueue"]


def test_team_split_counts_whole_gpus_on_kai_pools():
    stack = validate_stack(kai_config(teams=[{"name": "vision", "gpus": 8}], departments=[]))
    (team,) = plan_teams(stack, plan_pools(stack))
    assert sum(team.nominal.values()) == 8 and kai.queue_tree(stack, [team])[0].quota == 8


# --------------------------------------------------------------------------------------------------------------------
# The landing check and `gpupools workload` on KAI


def _cluster(**kwargs):
    from gpupools.landing.check import cluster_of

    return cluster_of(validate_stack(kai_config(**kwargs)))


def _team(cluster, name):
    return next(t for t in cluster.teams if t.team.name == name)


def _plan(cluster, name):
    return next(p for p in cluster.plans if p.name == name)


def test_whole_and_fractional_jobs_land_through_kai():
    from gpupools.landing.check import landing_check

    verdicts = landing_check(validate_stack(kai_config(teams=[TEAMS[0], {**TEAMS[1], "borrow": 2}, TEAMS[2]])))
    assert all(v.lands for v in verdicts), [(v.team, v.pool, v.shape, v.steps) for v in verdicts if not v.lands]
    fractions = [v for v in verdicts if v.shape == "fraction"]
    assert {v.team for v in fractions} == {"vision", "speech", "search"} and {v.pool for v in fractions} == {"share"}
    assert not [v for v in verdicts if v.shape == "fraction" and v.pool == "train"]
    (vision,) = [v for v in fractions if v.team == "vision"]
    assert vision.steps[0].detail == "queue vision: 0.25 of its 7 guaranteed GPUs, under limit 14 of research"
    assert "node-scale-adjuster" in vision.steps[2].detail and "Karpenter starts it from zero" in vision.steps[2].detail


def test_a_job_beyond_its_queues_limit_stops_at_the_queue():
    from gpupools.landing.check import land

    cluster = _cluster()
    verdict = land(cluster, _team(cluster, "speech"), _plan(cluster, "train"), "node")
    assert not verdict.lands and verdict.steps[0].detail == "the Job asks for 4 GPUs, and Queue speech may hold at most 3 (its limit)"


def test_a_job_for_a_department_queue_or_without_kais_scheduler_is_refused():
    from gpupools.landing.check import land
    from gpupools.landing.shapes import job_for

    cluster = _cluster()
    team, plan = _team(cluster, "vision"), _plan(cluster, "train")
    job = job_for(cluster, team, plan, "unit")
    job["metadata"]["labels"][kai.QUEUE_LABEL] = "research"
    assert land(cluster, team, plan, "unit", job).steps[0].detail.startswith("Queue research is a department")
    job = job_for(cluster, team, plan, "unit")
    del job["spec"]["template"]["spec"]["schedulerName"]
    assert not land(cluster, team, plan, "unit", job).steps[0].ok
    job = job_for(cluster, team, plan, "unit")
    job["metadata"]["labels"][kai.QUEUE_LABEL] = "nobody"
    assert land(cluster, team, plan, "unit", job).steps[0].detail == "no Queue nobody: KAI keeps the Job's pods pending"


def test_a_fraction_needs_a_fraction_pool_and_the_node_scale_adjuster():
    from gpupools.landing.check import land
    from gpupools.landing.shapes import job_for

    cluster = _cluster()
    team = _team(cluster, "vision")
    job = job_for(cluster, team, _plan(cluster, "share"), "fraction")
    assert land(cluster, team, _plan(cluster, "share"), "fraction", job).lands
    assert land(cluster, team, _plan(cluster, "train"), "fraction", job).steps[0].detail == "pool train takes no fractions (its sharing sets no fraction)"
    cluster.kai_values = {"global": {"clusterAutoscaling": False}}
    verdict = land(cluster, team, _plan(cluster, "share"), "fraction", job)
    (node,) = [s for s in verdict.steps if s.name == "node"]
    assert not node.ok and "node-scale-adjuster is off" in node.detail
    job["spec"]["template"]["metadata"]["annotations"][kai.FRACTION_ANNOTATION] = "1.0"
    assert "KAI's binder refuses the pod" in land(cluster, team, _plan(cluster, "share"), "fraction", job).steps[0].detail


@pytest.mark.parametrize("args, expected", [
    (["--fraction", "1"], "error: --fraction: 1 is not a fraction KAI takes: above 0 and below 1 (a whole GPU is --units 1)"),
    (["--fraction", "0"], "error: --fraction: 0 is not a fraction KAI takes"),
    (["--pool", "train", "--fraction", "0.5"], "error: --fraction: pool 'train' does not take fractions"),
    (["--fraction", "0.5", "--units", "2"], "error: --units: a fractional pod takes part of one GPU; drop --units"),
    (["--priority", "high"], "error: --priority: on KAI Scheduler a workload's priority is its priority class"),
])
def test_workload_refuses_what_kai_cannot_take(stack_file, args, expected):
    from gpupools.cli.main import app
    from typer.testing import CliRunner

    path = stack_file(kai_config())
    base = ["workload", "--config", str(path), "--team", "vision"] + ([] if "--pool" in args else ["--pool", "share"])
    result = CliRunner().invoke(app, base + args)
    assert result.exit_code == 2 and result.output.strip().startswith(expected), result.output


def test_workload_prints_a_fractional_job_for_the_teams_queue(stack_file):
    from gpupools.cli.main import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["workload", "--config", str(stack_file(kai_config())), "--team", "search", "--pool", "share",
                                      "--fraction", "0.5"])
    assert result.exit_code == 0, result.output
    job = yaml.safe_load(result.output)
    assert job["metadata"]["namespace"] == "search-prod" and job["metadata"]["labels"][kai.QUEUE_LABEL] == "search"
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"][kai.FRACTION_ANNOTATION] == "0.5" and "suspend" not in job["spec"]
    assert template["spec"]["schedulerName"] == kai.SCHEDULER_NAME and "resources" not in template["spec"]["containers"][0]
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in template["spec"]["tolerations"]
    # Without --fraction: one whole GPU, same queue and scheduler.
    whole = yaml.safe_load(CliRunner().invoke(app, ["workload", "--config", str(stack_file(kai_config())), "--team", "search",
                                                    "--pool", "train"]).output)
    assert whole["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}


@pytest.mark.parametrize("cloud, pool, keys", [
    ("aws", {"name": "share", "instanceType": "g6.xlarge", "maxNodes": 2}, {"cluster": {"name": "ml", "create": False,
                                                                                       "subnetIds": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"]},
                                                                           "autoscaler": "cluster-autoscaler"}),
    ("azure", {"name": "share", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 2}, {}),
    ("gcp", {"name": "share", "instanceType": "g2-standard-8", "maxNodes": 2}, {"gpuSoftware": {"installer": "gpu-operator"}}),
])
def test_a_fraction_starts_a_node_from_zero_on_every_autoscaler(cloud, pool, keys):
    """cluster-autoscaler on an existing EKS cluster, AKS's and GKE's managed autoscalers: each adds a node for KAI's
    whole-GPU placeholder pod, with the fractional pod's node selector and tolerations."""
    from gpupools.landing.check import landing_check

    pool = {**pool, "sharing": {"mode": "none", "fraction": 0.5}}
    stack = validate_stack(kai_config(pools=[pool], teams=[{"name": "vision", "gpus": 2}], departments=[], cloud=cloud, **keys))
    verdicts = landing_check(stack)
    assert {v.shape for v in verdicts} >= {"fraction", "unit"} and all(v.lands for v in verdicts), [v.steps for v in verdicts if not v.lands]
    (fraction,) = [v for v in verdicts if v.shape == "fraction"]
    (node,) = [s for s in fraction.steps if s.name == "node"]
    assert node.detail.startswith("KAI's node-scale-adjuster stands in a pod asking for nvidia.com/gpu: 1; ") and "from zero" in node.detail


def test_the_plan_says_what_isolates_fractions_and_how_a_node_comes():
    stack = validate_stack(kai_config())
    share, train = plan_pools(stack)
    lines = kai.fraction_lines(stack, share, True, "Karpenter")
    assert lines[0][0] == "fractions" and 'gpu-fraction: "0.25"' in lines[0][1]
    assert lines[1][1].startswith("isolation: none.")
    assert lines[2][1].endswith("which Karpenter adds a node for")
    assert kai.fraction_lines(stack, share, False, None)[2][1].startswith("fractional pods wait for a running node")
    assert kai.fraction_lines(stack, train, True, "Karpenter") == []


@pytest.mark.parametrize("change, expected", [
    (lambda c: c["gpupools:departments"].append({"name": "research", "teams": []}), None),  # teams min 1: pydantic's own message
    (lambda c: c["gpupools:departments"].append({"name": "research", "teams": ["search"]}),
     "departments[2].name: 'research' is used by more than one department"),
    (lambda c: c["gpupools:pools"][0]["sharing"].update(mode="mps", replicas=4),
     "pools[0].sharing.fraction: fractions are not possible on a pool whose device plugin does mps"),
    (lambda c: c["gpupools:pools"][1].update(instanceType="p4de.24xlarge", sharing={"mode": "mig", "migProfile": "3g.40gb"}),
     "pools[1].sharing.mode: 'mig' cannot serve KAI queues: KAI counts a MIG slice by its compute slices"),
    (lambda c: c["gpupools:pools"][1].update(sharing={"mode": "mps", "replicas": 2}),
     "pools[1].sharing.mode: 'mps' cannot serve KAI queues"),
    (lambda c: c.update({"gpupools:quotas": "kueue", "gpupools:departments": [],
                         "gpupools:pools": [POOLS[1]], "gpupools:teams": [{"name": "vision", "gpus": 2, "overQuotaWeight": 2}]}),
     "teams[0].overQuotaWeight: a KAI Scheduler setting; set gpupools:quotas: kai"),
])
def test_more_refusals_name_their_field(change, expected):
    config = kai_config()
    change(config)
    problems = problems_of(config)
    assert expected is None or any(p.startswith(expected) for p in problems), problems


def test_a_shared_pool_no_kai_team_uses_is_left_alone():
    pools = POOLS + [{"name": "slices", "instanceType": "g5.2xlarge", "maxNodes": 2, "sharing": {"mode": "time-slicing", "replicas": 4}}]
    validate_stack(kai_config(pools=pools))  # every team names its pools; none names slices
    teams = [TEAMS[0], TEAMS[1], {"name": "search", "namespace": "search-prod", "gpus": 6}]  # a total: every pool, slices included
    assert any(p.startswith("pools[2].sharing.mode: 'time-slicing' cannot serve KAI queues") for p in problems_of(kai_config(pools=pools, teams=teams)))


def test_a_job_beyond_its_quota_runs_on_idle_gpus_and_may_be_reclaimed():
    from gpupools.landing.check import land

    cluster = _cluster(teams=[TEAMS[0], {"name": "speech", "gpus": {"train": 1}}, TEAMS[2]])
    verdict = land(cluster, _team(cluster, "speech"), _plan(cluster, "train"), "node")
    assert verdict.lands
    assert verdict.steps[0].detail == ("queue speech: 4 GPUs, beyond its 1 guaranteed: runs on GPUs other queues leave idle, reclaimable "
                                       "while preemptible, under limit 14 of research")


def test_the_plan_prints_the_engine_and_the_tree():
    from io import StringIO

    from rich.console import Console

    from gpupools.cli.planreport import print_plan

    config = kai_config()
    out = StringIO()
    print_plan(validate_stack(config), run_program(config, "test"), Console(file=out, width=200, highlight=False))
    text = out.getvalue()
    assert "teams: KAI Scheduler v0.17.0, queues" in " ".join(text.split())
    assert "  research (department): 10 GPUs guaranteed, 4 borrowable (limit 14)" in text
    assert "team quotas (KAI queues) vs. units at maxNodes: share 4 of 4 (1.00x), train 12 of 12 (1.00x)" in text
    assert "vision: 4 of 4 land (train unit node; share fraction unit)" in text


def test_core_manifests_are_schema_valid():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    objects = kai_objects(teams=[{**TEAMS[0], "gpus": {"train": 6}}] + TEAMS[1:])
    core = [o for o in objects if o["apiVersion"] in ("v1", "admissionregistration.k8s.io/v1")]
    assert {"Namespace", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= {o["kind"] for o in core}
    for version in ("1.31.0", "1.33.0"):
        for obj in core:
            kubernetes_validate.validate(obj, version, strict=True)


def test_department_queues_are_labelled_as_departments_and_team_queues_as_teams():
    queues = queues_of(kai_objects())
    assert queues["research"]["metadata"]["labels"]["gpupools.io/department"] == "research"
    assert queues["vision"]["metadata"]["labels"]["gpupools.io/team"] == "vision"


def test_init_containers_asking_for_gpus_are_gpu_workloads_too():
    policy = _policy(kai_objects(), "vision")
    job = kai_job({}, scheduler=None, limits={"cpu": 1})
    job["spec"]["template"]["spec"]["initContainers"] = [{"name": "warm", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
    assert len(admission_denials(policy, job, "Job")) == 2
