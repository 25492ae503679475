"""KAI Scheduler's objects and plan lines, field by field (gpupools/queues/kai.py): each test names what it protects, so
that a flipped comparison, a negated condition, a dropped line or a misspelled key there fails here.

Read from the plan (the mock engine's registered resources, one plan for the module) where the plan carries it: the
ServiceMonitors that scrape KAI, and the fraction pools' teams the platform component records for the policy pack."""

from __future__ import annotations

import re

import pytest

from conftest import plan_of, stack_config
from gpupools.pools.planning import plan_pools
from gpupools.landing.jobs import team_job
from gpupools.queues import kai
from gpupools.queues.teams import plan_teams
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

SERVICE_MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
# `share` is split into quarters; only vision names it. `ops` asks for a total, so it may use every pool.
POOLS = [{"name": "share", "instanceType": "g6.xlarge", "maxNodes": 4, "sharing": {"mode": "none", "fraction": 0.25}},
         {"name": "train", "instanceType": "g5.12xlarge", "maxNodes": 3}]
TEAMS = [{"name": "vision", "gpus": {"train": 6, "share": 1}, "overQuotaWeight": 2},
         {"name": "speech", "gpus": {"train": 2}, "borrow": "none", "priority": "low"},
         {"name": "ops", "namespace": "ops-prod", "gpus": 2, "priority": "high", "borrow": 1}]
DEPARTMENTS = [{"name": "research", "teams": ["vision", "speech"], "gpus": 10, "borrow": 4, "overQuotaWeight": 3}]


def config(pools=POOLS, teams=TEAMS, departments=DEPARTMENTS, quotas="kai", **keys) -> dict:
    return stack_config("aws", pools=[dict(p) for p in pools], quotas=quotas, teams=[dict(t) for t in teams],
                        departments=[dict(d) for d in departments], **keys)


@pytest.fixture(scope="module")
def stack():
    return validate_stack(config())


@pytest.fixture(scope="module")
def plans(stack):
    return plan_pools(stack)


@pytest.fixture(scope="module")
def plan():
    return plan_of(config())


def by_name(objects: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


# --------------------------------------------------------------------------------------------------------------------
# Scraping KAI: without the ServiceMonitors, KAI's scheduler and queue controller are never scraped


def test_the_plan_scrapes_kais_queue_controller_and_its_scheduler(plan):
    monitors = {r.inputs["metadata"]["name"]: r.inputs for r in plan.of_type(SERVICE_MONITOR)}
    labels = {"release": "kube-prometheus-stack", "app.kubernetes.io/managed-by": "gpupools"}
    assert monitors["kai-queue-controller"] == {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": "kai-queue-controller", "namespace": "kai-scheduler", "labels": labels},
        "spec": {"selector": {"matchLabels": {"app": "queue-controller"}}, "endpoints": [{"port": "metrics", "path": "/metrics"}]}}
    # Two replicas: the scheduler's Service has no selector, so only the EndpointSlice role finds the leader.
    assert monitors["kai-scheduler"] == {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": "kai-scheduler", "namespace": "kai-scheduler", "labels": labels},
        "spec": {"selector": {"matchLabels": {"app": "kai-scheduler-default"}}, "serviceDiscoveryRole": "EndpointSlice",
                 "endpoints": [{"port": "http-metrics", "path": "/metrics"}]}}


def test_kais_monitors_come_only_with_a_prometheus_to_select_them(stack, plans):
    teams = plan_teams(stack, plans)
    assert [o for o in kai.team_objects(stack, plans, teams) if o["kind"] == "ServiceMonitor"] == []
    scraped = [o for o in kai.team_objects(stack, plans, teams, {"prometheus": "ours"}) if o["kind"] == "ServiceMonitor"]
    assert [o["metadata"]["name"] for o in scraped] == ["kai-queue-controller", "kai-scheduler"]
    assert all(o["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpupools", "prometheus": "ours"} for o in scraped)
    assert [o for o in kai.team_objects(stack, plans, teams, {}) if o["kind"] == "ServiceMonitor"] == []


# --------------------------------------------------------------------------------------------------------------------
# Who shares a fraction pool: the plan must name the teams that use the pool, not those that do not


def test_a_fraction_pool_lists_exactly_the_teams_that_use_it(plan, stack, plans):
    # vision names share; speech names train only; ops asks for a total, so every pool is its.
    expected = [{"pool": "share", "teams": ["vision", "ops"], "isolation": "none"}]
    assert kai.fraction_sharing(stack, plans) == expected
    (platform,) = plan.of_type("gpupools:index:GpuPlatform")
    assert platform.inputs["fractions"] == expected


def test_without_fraction_pools_or_kai_no_pool_is_shared():
    whole = validate_stack(config(pools=[POOLS[1]], teams=[{"name": "speech", "gpus": {"train": 2}}], departments=[]))
    assert kai.fraction_sharing(whole, plan_pools(whole)) == []
    kueue = validate_stack(config(pools=[POOLS[1]], teams=[{"name": "speech", "gpus": 2}], departments=[], quotas="kueue"))
    assert kai.fraction_sharing(kueue, plan_pools(kueue)) == []


# --------------------------------------------------------------------------------------------------------------------
# Queues, namespaces, the chart's values


def test_each_queue_carries_its_quota_limit_weight_priority_and_parent(stack, plans):
    queues = by_name(kai.team_objects(stack, plans, plan_teams(stack, plans)), "Queue")
    assert list(queues) == ["research", "vision", "speech", "ops"]  # the department before its teams, the loose team last
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    assert queues["research"] == {
        "apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
        "metadata": {"name": "research", "labels": {"app.kubernetes.io/managed-by": "gpupools", "gpupools.io/department": "research"}},
        "spec": {"displayName": "research", "priority": 100,
                 "resources": {"gpu": {"quota": 10, "limit": 14, "overQuotaWeight": 3}, "cpu": unlimited, "memory": unlimited}}}
    assert queues["vision"]["spec"] == {"displayName": "vision", "priority": 100, "parentQueue": "research",
                                        "resources": {"gpu": {"quota": 7, "limit": -1, "overQuotaWeight": 2}, "cpu": unlimited, "memory": unlimited}}
    assert queues["vision"]["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpupools", "gpupools.io/team": "vision"}
    assert queues["speech"]["spec"]["resources"]["gpu"] == {"quota": 2, "limit": 2, "overQuotaWeight": 1}  # borrow none
    assert queues["speech"]["spec"]["priority"] == 50
    assert "parentQueue" not in queues["ops"]["spec"] and queues["ops"]["spec"]["priority"] == 200
    assert queues["ops"]["spec"]["resources"]["gpu"] == {"quota": 2, "limit": 3, "overQuotaWeight": 1}  # borrow 1 on top


def test_borrowable_gpus_stop_at_the_limit_the_reach_and_the_departments_limit(stack, plans):
    tree = {n.name: n for n in kai.queue_tree(stack, plan_teams(stack, plans))}
    # vision: no limit of its own, reach 12 on train + 4 on share = 16, quota 7: 9 by itself, but its department's limit
    # (14) leaves it 14 - 7 = 7.
    assert tree["vision"].reach == 16 and tree["vision"].borrowable == 9 and kai.effective_borrowable(tree["vision"], tree) == 7
    assert kai.effective_borrowable(tree["speech"], list(tree.values())) == 0  # borrow none
    assert tree["ops"].borrowable == 1 and kai.effective_borrowable(tree["ops"], tree) == 1  # no department
    assert tree["research"].reach == 16 and tree["research"].parent is None
    # A team whose quota is past its department's limit borrows nothing, never less than nothing.
    squeezed = kai.QueueNode("t", "research", 20, None, 1, "normal", 30)
    assert kai.effective_borrowable(squeezed, tree) == 0
    assert kai.QueueNode("u", None, 5, 3, 1, "normal", 30).borrowable == 0


def test_team_namespaces_carry_the_queue_the_engine_label_and_the_team(stack, plans):
    objects = kai.team_objects(stack, plans, plan_teams(stack, plans))
    namespaces = by_name(objects, "Namespace")
    assert objects[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kai-scheduler", **objects[0]["metadata"]}}
    assert namespaces["ops-prod"]["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpupools", "gpupools.io/team": "ops",
                                                           "gpupools.io/queue-engine": "kai", "kai.scheduler/queue": "ops"}
    # vision and speech name their pools: a policy keeps each on them; ops may use every pool, so it gets none.
    policies = by_name(objects, "ValidatingAdmissionPolicy")
    assert {"gpupools-team-vision-pools", "gpupools-team-speech-pools"} <= set(policies)
    assert "gpupools-team-ops-pools" not in policies and "gpupools-team-ops-kai-queue" in policies
    assert kai.queue_namespaces(stack) == {"vision": "vision", "speech": "speech", "ops": "ops-prod"}
    kueue = validate_stack(config(pools=[POOLS[1]], teams=[{"name": "speech", "gpus": 2}], departments=[], quotas="kueue"))
    assert kai.queue_namespaces(kueue) == {}


@pytest.mark.parametrize("pools, fractions", [(POOLS, True), ([POOLS[1]], False)])
def test_the_charts_values_turn_sharing_on_only_for_fraction_pools(pools, fractions):
    stack = validate_stack(config(pools=pools, teams=[{"name": "speech", "gpus": {"train": 2}}], departments=[]))
    assert kai.helm_values(plan_pools(stack)) == {
        "global": {"registry": "ghcr.io/kai-scheduler/kai-scheduler", "gpuSharing": fractions, "clusterAutoscaling": fractions,
                   "leaderElection": True, "namespaceLabelSelector": {"gpupools.io/queue-engine": "kai"}},
        "operator": {"replicaCount": 2}, "podgrouper": {"queueLabelKey": "kai.scheduler/queue"}, "kaiConfig": {"render": True},
        "kaiConfigDeployer": {"enabled": False}, "topologyMigration": {"enabled": False}, "defaultQueue": {"createDefaultQueue": False}}


def test_the_queue_policy_matches_jobs_workloads_and_pods_and_names_the_team(stack, plans):
    vision = next(t for t in plan_teams(stack, plans) if t.team.name == "vision")
    spec = kai.queue_policy(vision)["spec"]
    assert [r["resources"] for r in spec["matchConstraints"]["resourceRules"]] == [["jobs"], ["deployments", "statefulsets"], ["pods"]]
    assert [v["name"] for v in spec["variables"]] == ["isPod", "podSpec", "podMeta", "asksGpu", "ownedByJob", "queue"]
    assert [(v["reason"], v["message"]) for v in spec["validations"]] == [
        ("Forbidden", "GPU pods in namespace vision are scheduled by KAI Scheduler: set schedulerName: kai-scheduler"),
        ("Forbidden", "GPU workloads in namespace vision queue for team vision's GPU quota: set label kai.scheduler/queue=vision")]
    assert spec["validations"][1]["expression"] == "!variables.asksGpu || variables.ownedByJob || variables.queue == 'vision'"
    asks = kai.asks_gpu_expression("s", "m")
    assert "'gpu-fraction' in m.annotations || 'gpu-memory' in m.annotations" in asks and "s.initContainers" in asks


# --------------------------------------------------------------------------------------------------------------------
# A team's Job, the fraction's text, the plan's lines


def test_a_jobs_labels_annotations_and_pod_fields(stack, plans):
    share = next(p for p in plans if p.name == "share")
    team = stack.teams[0]
    labels, annotations, spec = kai.job_metadata(team, share, 0.25)
    assert labels == {"kai.scheduler/queue": "vision"} and annotations == {"gpu-fraction": "0.25"}
    assert spec == {"schedulerName": "kai-scheduler"}
    # The pool's node selector and tolerations are the Job's own, as on every scheduler.
    pod = team_job(stack, plans, team.name, "share", None, "img")["spec"]["template"]["spec"]
    assert pod["schedulerName"] == "kai-scheduler" and pod["nodeSelector"] == {"gpupools.io/pool": "share"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]
    assert kai.job_metadata(team, share, None)[1] == {}


@pytest.mark.parametrize("fraction, text, problem", [
    (0.25, "0.25", None), (0.5, "0.5", None), (0.000001, "0.000001", None), (0.999999, "0.999999", None),
    (1.0, "1.0", None),  # no rounding: a whole GPU is refused by the stack's own bounds, not here
    (0.0000001, "0.0", "1e-07 is written \"0.0\" in gpu-fraction (six decimals), which KAI refuses"),
    (0.9999999, "1.0", "0.9999999 is written \"1.0\" in gpu-fraction (six decimals), which KAI refuses"),
    (0.1234567, "0.123457", "0.1234567 is written \"0.123457\" in gpu-fraction (six decimals); give it with at most six decimals"),
])
def test_a_fraction_is_written_with_six_decimals_and_refused_if_that_changes_it(fraction, text, problem):
    assert kai.fraction_text(fraction) == text
    found = kai.fraction_format_problem(fraction)
    assert (found is None) == (problem is None) and (problem is None or found.startswith(problem)), found


def test_the_plan_lines_of_a_fraction_pool(stack, plans):
    share, train = plans
    request, isolation, from_zero = kai.fraction_lines(stack, share, True, "Karpenter")
    assert request == ("fractions", 'KAI Scheduler: pods ask for part of one GPU (gpu-fraction: "0.25" by default, or gpu-memory in MiB); '
                                    "a reservation pod in kai-resource-reservation holds the GPU")
    assert isolation[0] == "" and isolation[1].startswith("isolation: none. KAI limits neither GPU memory nor compute")
    assert from_zero == ("", "a pending fractional pod asks for no GPU, so KAI's node-scale-adjuster starts a placeholder pod in "
                             "kai-scale-adjust with nvidia.com/gpu: 1 and the pod's node selector and tolerations, which Karpenter adds a node for")
    assert kai.fraction_lines(stack, share, False, None)[2] == (
        "", "fractional pods wait for a running node: the pool does not add nodes for the node-scale-adjuster's whole-GPU placeholder "
            "pods either (no autoscaler)")
    assert kai.fraction_lines(stack, train, True, "Karpenter") == []
    kueue = validate_stack(config(pools=[{**POOLS[0], "sharing": {"mode": "none"}}], teams=[{"name": "a", "gpus": 1}], departments=[],
                                  quotas="kueue"))
    assert kai.fraction_lines(kueue, plan_pools(kueue)[0], True, "Karpenter") == []


# --------------------------------------------------------------------------------------------------------------------
# What a stack may not ask of KAI: one line naming the field


def problems(cfg: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate_stack(cfg)
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


def test_kai_settings_without_kai_are_refused_each_naming_its_field():
    teams = [{"name": "vision", "gpus": 2, "overQuotaWeight": 2}, {"name": "speech", "gpus": 1}]
    found = problems(config(pools=[POOLS[1]], teams=teams, departments=[{"name": "research", "teams": ["vision"]}], quotas="kueue"))
    assert any(p.startswith("departments: departments are KAI Scheduler's parent queues; set gpupools:quotas: kai") for p in found)
    assert any(p.startswith("teams[0].overQuotaWeight: a KAI Scheduler setting") for p in found)
    assert not any(p.startswith("teams[1]") for p in found)
    # The same stack without departments and weights is valid on Kueue, and departments alone are valid on KAI.
    validate_stack(config(pools=[POOLS[1]], teams=[{"name": "vision", "gpus": 2}, {"name": "speech", "gpus": 1}], departments=[], quotas="kueue"))
    validate_stack(config(pools=[POOLS[1]], teams=teams, departments=[{"name": "research", "teams": ["vision"]}]))


def test_a_fraction_pool_without_kai_is_refused_and_a_whole_pool_is_not():
    cfg = config(teams=[{"name": "vision", "gpus": 2}], departments=[], quotas="kueue")
    assert problems(cfg) == ["pools[0].sharing.fraction: GPU fractions are KAI Scheduler's; set gpupools:quotas: kai"]


def test_a_department_within_its_limit_and_over_it(stack):
    # research: quota 10, borrow 4 -> limit 14; vision's 7 and speech's 2 fit.
    assert stack.departments[0].gpus == 10
    over = [{**TEAMS[0], "gpus": {"train": 14, "share": 1}}, TEAMS[1], TEAMS[2]]
    found = problems(config(teams=over))
    assert found == ["teams[0].gpus: 15 GPUs is above the limit of its department 'research' (14: its quota 10 plus borrow 4); "
                     "a team cannot be guaranteed more than its department may hold"]
    at_limit = [{**TEAMS[0], "gpus": {"train": 7, "share": 1}}, TEAMS[1], TEAMS[2]]  # 8 + 2 = 10: the quota, exactly
    validate_stack(config(teams=at_limit))
    short = problems(config(departments=[{**DEPARTMENTS[0], "gpus": 8}]))
    assert short == ["departments[0].gpus: 8 is less than its teams' quotas add up to (9); a department's quota is what its teams "
                     "are guaranteed together: raise gpus or lower the teams'"]
    validate_stack(config(departments=[{**DEPARTMENTS[0], "gpus": 9}]))  # equal: fine


def test_the_priority_classes_are_kais_own_as_its_chart_creates_them():
    """The --priority refusal names KAI's priority classes: those of the pinned chart's templates/priorityclasses, each
    with its value (below 100 is preemptible)."""
    from conftest import ROOT

    found = {}
    for path in sorted((ROOT / "tests/charts/kai-scheduler/templates/priorityclasses").glob("*.yaml")):
        text = path.read_text()
        found[re.search(r"^  name: (\S+)$", text, re.MULTILINE).group(1)] = int(re.search(r"^value: (\d+)$", text, re.MULTILINE).group(1))
    assert kai.PRIORITY_CLASSES == found
    assert {name for name, value in found.items() if value < kai.PREEMPTIBLE_BELOW} == {"train", "build-preemptible"}
