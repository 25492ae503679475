"""Day two: one setting per pool (training or inference) and one maintenance window per stack, turned into each cloud's
own upgrade mechanisms, checked against the clouds' API models, the pinned Karpenter CRD and the GPU Operator chart.

Sources the expectations rest on: botocore 1.44.8 eks (NodegroupUpdateConfig), azure-mgmt-containerservice
(AgentPoolUpgradeSettings, MaintenanceWindow), the GKE container v1 discovery document (UpgradeSettings, MaintenancePolicy),
karpenter.sh_nodepools.yaml v1.14.1 (disruption budgets and their CEL rule), the GPU Operator v26.7.0 chart
(clusterpolicy.yaml's upgradePolicy) and its ClusterPolicy CRD.
"""

from __future__ import annotations

import copy

import pytest
import yaml
from typer.testing import CliRunner

from charts.chartrender import chart_dir, need_helm, render
from conftest import crd_rule_failures, needs_reference, plan_of, stack_config
from gpupools.clouds import aws, azure, gcp
from gpupools.stack.config import MaintenanceWindow, Pool
from gpupools.stack.errors import ConfigError
from gpupools.upgrades.policy import JOB_POD_SELECTOR, Window, driver_upgrade_policy, pool_upgrade
from gpupools.validation.stack import validate_stack

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
EKS_GROUP = "aws:eks/nodeGroup:NodeGroup"
GKE_POOL = "gcp:container/nodePool:NodePool"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
AKS_POOL = "azure-native:containerservice:AgentPool"
AKS_MAINTENANCE = "azure-native:containerservice:MaintenanceConfiguration"


def pool(**keys) -> Pool:
    return Pool.model_validate({"name": "p", "instanceType": "p4d.24xlarge", "maxNodes": 2, **keys})


def reservation(nodes: int, **more) -> dict:
    return {"reservation": {"id": "cr-0123456789abcdef0", "zones": ["eu-central-1a"], "nodes": nodes, **more}}


def problems(config: dict) -> list[str]:
    try:
        validate_stack(config)
    except ConfigError as exc:
        return [str(p) for p in exc.problems]
    return []


# --------------------------------------------------------------------------------------------------------------------
# Defaults by kind, and never a surge past a reservation


def test_a_training_pool_drains_one_node_at_a_time_and_waits_a_day_for_its_jobs():
    policy = pool_upgrade(pool())
    assert (policy.kind, policy.max_unavailable, policy.max_surge, policy.wait_minutes) == ("training", 1, 0, 24 * 60)
    assert policy.training and policy.spare_reserved is None and not policy.short_lived


def test_an_inference_pool_surges_one_node_and_gives_pods_half_an_hour():
    policy = pool_upgrade(pool(upgrades="inference"))
    assert (policy.kind, policy.max_unavailable, policy.max_surge, policy.wait_minutes) == ("inference", 0, 1, 30)
    assert not policy.training


def test_a_full_reservation_never_surges_even_for_inference():
    full = pool_upgrade(pool(upgrades="inference", capacity=[reservation(2)]))
    assert (full.spare_reserved, full.max_surge, full.max_unavailable) == (0, 0, 1)
    spare = pool_upgrade(pool(upgrades="inference", capacity=[reservation(3)]))
    assert (spare.spare_reserved, spare.max_surge, spare.max_unavailable) == (1, 1, 0)
    # Hourly capacity behind the reservation: a surge node can start there.
    behind = pool_upgrade(pool(upgrades="inference", capacity=[reservation(2), "on-demand"]))
    assert (behind.spare_reserved, behind.max_surge) == (None, 1)


def test_the_stack_overrides_the_kinds_defaults():
    policy = pool_upgrade(pool(upgrades={"kind": "inference", "maxSurge": 3, "maxUnavailable": 2, "waitForJobs": "2h"}))
    assert (policy.max_surge, policy.max_unavailable, policy.wait_minutes) == (3, 2, 120)


def test_flex_start_pools_are_upgraded_short_lived():
    flex = Pool.model_validate({"name": "f", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "capacity": ["flex-start"]})
    assert pool_upgrade(flex).short_lived
    assert gcp.upgrade_settings(flex) is None


# --------------------------------------------------------------------------------------------------------------------
# The window


def window(**keys) -> Window:
    return Window.of(MaintenanceWindow.model_validate(keys))


def test_the_default_window_is_saturday_twelve_hours_and_karpenter_blocks_the_rest_of_the_week():
    w = window()
    assert w.text == "Sat 00:00-12:00 UTC (12 h)"
    assert w.closed_spans() == [(5 * 1440 + 720, 7 * 1440 - 720)]
    assert aws.cron(5 * 1440 + 720) == "0 12 * * 6" and aws.duration(7 * 1440 - 720) == "156h"


def test_two_windows_leave_two_closed_stretches_and_a_window_may_run_past_sunday():
    w = window(days=["sat", "sun"], start="02:00", hours=6)
    assert w.closed_spans() == [(5 * 1440 + 480, 18 * 60), (6 * 1440 + 480, 7 * 1440 - 6 * 1440 - 480 + 5 * 1440 + 120)]
    assert [aws.cron(s) for s, _ in w.closed_spans()] == ["0 8 * * 6", "0 8 * * 0"]
    assert [aws.duration(n) for _, n in w.closed_spans()] == ["18h", "138h"]
    late = window(days=["sun"], start="20:00", hours=8)
    assert late.closed_spans() == [(4 * 60, 7 * 1440 - 8 * 60)]
    assert aws.cron(4 * 60) == "0 4 * * 1"
    assert window(days=list(("mon", "tue", "wed", "thu", "fri", "sat", "sun")), hours=24).closed_spans() == []
    assert aws.duration(90) == "1h30m" and aws.duration(45) == "45m"


@pytest.mark.parametrize("days, start, hours", [(["sat"], "00:00", 12), (["sat", "sun"], "02:00", 6), (["sun"], "20:00", 8),
                                                  (["mon", "wed", "fri"], "22:30", 5),
                                                  (["mon", "tue", "wed", "thu", "fri", "sat", "sun"], "00:00", 24)])
def test_the_budgets_written_for_a_window_read_back_as_that_window(days, start, hours):
    """What a NodePool's budgets say is read back to the same window (upgrades.nodepool), whatever wraps past midnight or
    Sunday; a budget moved by an hour no longer reads as the window."""
    from gpupools.upgrades import nodepool

    w = window(days=days, start=start, hours=hours)
    budgets = nodepool.drift_budgets(pool_upgrade(pool()), w)
    obj = {"spec": {"disruption": {"budgets": budgets}}}
    assert nodepool.drift_when(obj, w) == (f"only {w.text}, 1 node at a time" if w.closed_spans() else "at any time, 1 node at a time")
    if w.closed_spans():
        start = w.closed_spans()[0][0]
        moved = [{**budgets[0], "schedule": nodepool.cron(start + 60)}, *budgets[1:]]
        assert nodepool.drift_when({"spec": {"disruption": {"budgets": moved}}}, w).startswith("outside the NodePool's scheduled budgets")
    assert [nodepool.cron(s) for s, _ in w.closed_spans()] == [aws.cron(s) for s, _ in w.closed_spans()]


def test_a_node_pool_s_durations_and_budgets_read_as_karpenter_takes_them():
    from gpupools.upgrades import nodepool

    assert [nodepool.minutes_of(t) for t in ("480h", "24h0m0s", "90m", "1h30m", "59s", "Never", "", "12x")] == [28800, 1440, 90, 90, 0, None, None, None]
    assert [nodepool.hours_text(m) for m in (28800, 1440, 30, 90, 2880)] == ["480h (20 days)", "24h", "30 min", "90 min", "48h (2 days)"]
    at_once = lambda budgets: nodepool.drift_when({"spec": {"disruption": {"budgets": budgets}}}, window())
    assert at_once([]) == "at any time, 10% of the nodes at a time"  # Karpenter's default budget
    assert at_once([{"nodes": "3"}, {"nodes": "2", "reasons": ["Drifted"]}, {"nodes": "1", "reasons": ["Empty"]}]) == "at any time, 2 nodes at a time"
    assert at_once([{"nodes": "20%"}, {"nodes": "5%", "reasons": ["Drifted", "Empty"]}]) == "at any time, 5% of the nodes at a time"
    assert at_once([{"nodes": "1", "reasons": ["Empty"]}]) == "at any time, any number of nodes at a time"
    assert at_once([{"nodes": "0", "schedule": "0 0 * * 1", "duration": "168h"}, {"nodes": "1"}]) == "never (a budget of 0 nodes holds all week)"
    assert at_once([{"nodes": "0", "schedule": "@daily", "duration": "1h"}, {"nodes": "1"}]).startswith("outside the NodePool's scheduled budgets")


def test_a_node_pool_s_lifetime_grace_and_consolidation_read_as_karpenter_takes_them():
    from gpupools.upgrades import nodepool

    def lines(template: dict, disruption: dict | None = None, **cloud) -> list[str]:
        obj = {"metadata": {"name": "gpupools-p", "labels": {"gpupools.io/upgrades": "training"}},
               "spec": {"template": {"spec": template}, "disruption": disruption or {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m"}}}
        return nodepool.node_pool_lines(obj, window(), "changes", **cloud)

    # Karpenter's default lifetime, and no grace period: an expiring node with a Job on it drains until the Job ends.
    assert lines({})[1] == ("every node expires 720h (30 days) after it starts (expireAfter), at any hour: expiry ignores the budgets and "
                            "karpenter.sh/do-not-disrupt and starts no replacement first; a node running a Job stays draining until the Job ends")
    # The cloud's default grace period and lifetime cap are said only where the cloud has them.
    capped = lines({"expireAfter": "480h"}, default_grace="24h", lifetime_cap="the cap")
    assert capped[1].endswith("a running Job gets 24h to finish (the cap)") and "the cloud's default" in capped[0]
    assert "(the cap)" not in lines({"expireAfter": "480h"})[1]
    assert lines({"expireAfter": "Never"}, {"consolidateAfter": "Never", "consolidationPolicy": "WhenEmpty"})[2] == \
        "empty nodes are kept (consolidateAfter Never); a node running pods is never consolidated (WhenEmpty)"
    assert lines({"expireAfter": "Never"}, {"consolidateAfter": "30s"})[2].startswith(
        "an empty node goes after 30s (consolidateAfter); underused nodes are consolidated too (WhenEmptyOrUnderutilized)")
    assert nodepool.repair_threshold({"spec": {"limits": {"nodes": "5"}}}) == (5, 1)
    assert nodepool.repair_threshold({"spec": {"limits": {"nodes": "6"}}}) == (6, 2)
    assert nodepool.repair_threshold({"spec": {}}) is None
    assert nodepool.repair_line({"metadata": {"name": "np"}, "spec": {}}, "Repair") == (
        "Repair deletes the node at once, without draining it: a running Job's pods are killed, no terminationGracePeriod applies")


def test_open_hours_in_the_least_open_32_days():
    assert window().min_hours_in(32) == 48
    assert window(hours=6).min_hours_in(32) == 24
    assert window(days=["sat", "sun"], hours=6).min_hours_in(32) == 48


# --------------------------------------------------------------------------------------------------------------------
# EKS: managed node groups and Karpenter


def test_eks_node_groups_launch_first_only_where_they_surge():
    assert aws.node_group_update_config(pool()) == {"max_unavailable": 1, "update_strategy": "MINIMAL"}
    assert aws.node_group_update_config(pool(upgrades="inference")) == {"max_unavailable": 1, "update_strategy": "DEFAULT"}
    block = pool(capacity=[reservation(2, kind="capacity-block")], upgrades="inference")
    assert aws.node_group_update_config(block) == {"max_unavailable": 1, "update_strategy": "MINIMAL"}


def test_eks_node_group_update_config_is_botocores():
    from botocore.session import get_session
    from botocore.validate import ParamValidator

    plan = plan_of(stack_config("aws", autoscaler="cluster-autoscaler", pools=[
        {"name": "t", "instanceType": "g5.2xlarge", "maxNodes": 2},
        {"name": "i", "instanceType": "g5.2xlarge", "maxNodes": 2, "upgrades": "inference"}]))
    shape = get_session().get_service_model("eks").operation_model("UpdateNodegroupConfig").input_shape
    strategies = shape.members["updateConfig"].members["updateStrategy"].enum
    seen = {}
    for name in ("t", "i"):
        inputs = plan.get(EKS_GROUP, name).inputs
        config = {"maxUnavailable": inputs["updateConfig"]["maxUnavailable"], "updateStrategy": inputs["updateConfig"]["updateStrategy"]}
        report = ParamValidator().validate({"clusterName": "c", "nodegroupName": name, "updateConfig": config}, shape)
        assert not report.has_errors(), report.generate_report()
        assert config["updateStrategy"] in strategies
        assert inputs["tags"]["gpupools.io/upgrades"] == ("training" if name == "t" else "inference")
        seen[name] = config["updateStrategy"]
    assert seen == {"t": "MINIMAL", "i": "DEFAULT"}
    bad = ParamValidator().validate({"clusterName": "c", "nodegroupName": "t", "updateConfig": {"maxUnavailable": 0}}, shape)
    assert bad.has_errors()  # what EKS refuses, the check refuses: maxUnavailable is at least 1


def nodepool_schema() -> dict:
    crd = yaml.safe_load((needs_reference() / "karpenter" / "karpenter.sh_nodepools.yaml").read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1")


@pytest.fixture(scope="module")
def karpenter_plan():
    return plan_of(stack_config("aws", pools=[
        {"name": "train", "instanceType": "p4d.24xlarge", "maxNodes": 2},
        {"name": "serve", "instanceType": "g5.2xlarge", "maxNodes": 4, "upgrades": {"kind": "inference", "waitForJobs": "45m"}}],
        upgrades={"window": {"days": ["sat", "sun"], "start": "02:00", "hours": 6}}))


def test_karpenter_training_pools_drift_only_in_the_window_and_never_expire(karpenter_plan):
    spec = karpenter_plan.get(NODE_POOL, "nodepool-gpupools-train").inputs["spec"]
    assert spec["template"]["spec"]["expireAfter"] == "Never"
    assert "terminationGracePeriod" not in spec["template"]["spec"]
    assert spec["disruption"]["budgets"] == [
        {"nodes": "0", "reasons": ["Drifted"], "schedule": "0 8 * * 6", "duration": "18h"},
        {"nodes": "0", "reasons": ["Drifted"], "schedule": "0 8 * * 0", "duration": "138h"},
        {"nodes": "1", "reasons": ["Drifted"]}]
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"


def test_karpenter_inference_pools_expire_and_give_pods_their_wait(karpenter_plan):
    spec = karpenter_plan.get(NODE_POOL, "nodepool-gpupools-serve").inputs["spec"]
    assert spec["template"]["spec"]["expireAfter"] == "720h"
    assert spec["template"]["spec"]["terminationGracePeriod"] == "45m"
    assert spec["disruption"]["budgets"] == [{"nodes": "1", "reasons": ["Drifted"]}]


def test_karpenter_node_pools_pass_the_pinned_crd_and_its_cel_rules(karpenter_plan):
    jsonschema = pytest.importorskip("jsonschema")
    schema = nodepool_schema()
    # The CEL rules of the disruption block (the labels' rules use CEL's regex extension, which cel-python lacks).
    disruption = schema["properties"]["spec"]["properties"]["disruption"]
    for name in ("nodepool-gpupools-train", "nodepool-gpupools-serve"):
        obj = {k: karpenter_plan.get(NODE_POOL, name).inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        jsonschema.validate(obj, schema)
        assert crd_rule_failures(obj["spec"]["disruption"], disruption, "/spec/disruption") == []
    broken = copy.deepcopy(karpenter_plan.get(NODE_POOL, "nodepool-gpupools-train").inputs)
    del broken["spec"]["disruption"]["budgets"][0]["duration"]
    assert crd_rule_failures(broken["spec"]["disruption"], disruption, "/spec/disruption") == [
        "/spec/disruption/budgets: 'schedule' must be set with 'duration'"]
    broken["spec"]["disruption"]["budgets"][0]["duration"] = "1d"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_eks_has_no_maintenance_exclusions():
    config = stack_config("aws", upgrades={"exclusions": [{"name": "launch", "start": "2026-12-01", "end": "2026-12-10"}]})
    (line,) = problems(config)
    assert line.startswith("error: upgrades.exclusions: EKS has no maintenance exclusions")


# --------------------------------------------------------------------------------------------------------------------
# GKE


def gke(pools: list[dict], **keys) -> dict:
    return stack_config("gcp", pools=pools, **keys)


A3 = {"instanceType": "a3-highgpu-8g", "maxNodes": 2, "zones": ["us-central1-a"]}
GKE_RES = {"reservation": {"id": "h100-res", "zones": ["us-central1-a"], "nodes": 2}}


def test_gke_upgrade_settings_by_kind_and_reservation():
    # `train` without its fabric: a fabric pool takes compact placement, and with it no blue-green (below).
    plan = plan_of(gke([{"name": "train", **A3, "fabric": "none"}, {"name": "res", **A3, "capacity": [GKE_RES]},
                        {"name": "serve", "instanceType": "g2-standard-8", "maxNodes": 3, "upgrades": "inference"},
                        {"name": "flex", **A3, "capacity": ["flex-start"]}]))
    settings = {p: plan.get(GKE_POOL, p).inputs.get("upgradeSettings") for p in ("train", "res", "serve", "flex")}
    assert settings["train"] == {"strategy": "BLUE_GREEN", "blueGreenSettings": {"autoscaledRolloutPolicy": {"waitForDrainDuration": "86400s"}}}
    assert "placementPolicy" not in plan.get(GKE_POOL, "train").inputs
    assert settings["res"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}
    assert settings["serve"] == {"strategy": "SURGE", "maxSurge": 1, "maxUnavailable": 0}
    assert settings["flex"] is None
    assert plan.get(GKE_POOL, "res").inputs["nodeConfig"]["resourceLabels"] == {"gpupools-upgrades": "training", "gpupools-reserved-nodes": "2"}


@pytest.mark.parametrize("pool, compact, settings", [
    # One zone, on demand, whole GPUs: GPUDirect and compact placement, so surge (one node at a time, as training pools
    # drain) instead of blue-green.
    ({"name": "train", **A3}, True, {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}),
    ({"name": "train", "instanceType": "a4-highgpu-8g", "maxNodes": 2, "zones": ["us-central1-b"]}, True,
     {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}),
    # Flex-start on A3 Ultra takes compact placement too; GKE upgrades it short-lived, with no settings of gpupools'.
    ({"name": "train", "instanceType": "a3-ultragpu-8g", "maxNodes": 2, "zones": ["us-central1-b"], "capacity": ["flex-start"]}, True, None),
    # No fabric, no compact placement: blue-green stays.
    ({"name": "train", **A3, "fabric": "none"}, False,
     {"strategy": "BLUE_GREEN", "blueGreenSettings": {"autoscaledRolloutPolicy": {"waitForDrainDuration": "86400s"}}}),
    # Two zones: no fabric (it runs in one), no compact placement, blue-green.
    ({"name": "train", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "zones": ["us-central1-a", "us-central1-b"]}, False,
     {"strategy": "BLUE_GREEN", "blueGreenSettings": {"autoscaledRolloutPolicy": {"waitForDrainDuration": "86400s"}}}),
])
def test_gke_compact_placement_never_comes_with_blue_green(pool, compact, settings):
    inputs = plan_of(gke([pool])).get(GKE_POOL, "train").inputs
    assert (inputs.get("placementPolicy") == {"type": "COMPACT"}) is compact
    assert inputs.get("upgradeSettings") == settings


def test_gke_cluster_gets_the_window_and_exclusions():
    plan = plan_of(gke([{"name": "train", **A3}], upgrades={
        "window": {"days": ["sat", "sun"], "start": "02:00", "hours": 6},
        "exclusions": [{"name": "big-run", "start": "2026-12-01", "end": "2026-12-31"},
                       {"name": "freeze", "start": "2026-12-20", "end": "2026-12-24", "scope": "no-upgrades"}]}))
    (cluster,) = plan.of_type(GKE_CLUSTER)
    assert cluster.inputs["maintenancePolicy"] == {
        "recurringWindow": {"startTime": "2026-01-10T02:00:00Z", "endTime": "2026-01-10T08:00:00Z", "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU"},
        "maintenanceExclusions": [
            {"exclusionName": "big-run", "startTime": "2026-12-01T00:00:00Z", "endTime": "2027-01-01T00:00:00Z",
             "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES"}},
            {"exclusionName": "freeze", "startTime": "2026-12-20T00:00:00Z", "endTime": "2026-12-25T00:00:00Z",
             "exclusionOptions": {"scope": "NO_UPGRADES"}}]}
    assert gcp.maintenance_policy(type("U", (), {"exclusions": []})(), window(days=list(("mon", "tue", "wed", "thu", "fri", "sat", "sun")),
                                                                                  hours=4))["recurring_window"]["recurrence"] == "FREQ=DAILY"


def test_gke_refuses_a_window_under_its_minimum():
    assert problems(gke([{"name": "p", **A3}], upgrades={"window": {"hours": 6}})) == [
        "error: upgrades.window: Sat 00:00-06:00 UTC (6 h) opens 24 hours in the least open 32 days; GKE needs at least 48 (more days, or more hours)"]
    assert problems(gke([{"name": "p", **A3}], upgrades={"window": {"days": ["sat", "sun"], "hours": 6}})) == []
    assert problems(gke([{"name": "p", **A3}], upgrades={"window": {"days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"], "hours": 3}})) == [
        "error: upgrades.window.hours: 3: GKE counts only windows of at least 4 hours"]


def test_gke_refuses_an_exclusion_longer_than_it_allows():
    longest = {"name": "freeze", "start": "2026-12-01", "end": "2026-12-30", "scope": "no-upgrades"}
    assert problems(gke([{"name": "p", **A3}], upgrades={"exclusions": [longest]})) == []
    (line,) = problems(gke([{"name": "p", **A3}], upgrades={"exclusions": [{**longest, "end": "2026-12-31"}]}))
    assert line.startswith("error: upgrades.exclusions[0].end: 31 days; a GKE no-upgrades exclusion lasts at most 30 days")
    # Other scopes last up to the end of the version's support, which gpupools knows when the version is pinned.
    pinned = {"name": "ml-test", "location": "us-central1", "kubernetesVersion": "1.35"}
    ok = {"name": "run", "start": "2026-12-01", "end": "2027-04-11"}
    assert problems(gke([{"name": "p", **A3}], cluster=pinned, upgrades={"exclusions": [ok]})) == []
    (line,) = problems(gke([{"name": "p", **A3}], cluster=pinned, upgrades={"exclusions": [{**ok, "end": "2027-04-12"}]}))
    assert line == "error: upgrades.exclusions[0].end: 2027-04-12 is past the end of GKE's standard support for 1.35 (2027-04-11), where an exclusion ends"


def test_gke_blue_green_waits_at_most_a_week():
    assert problems(gke([{"name": "p", **A3, "upgrades": {"waitForJobs": "168h"}}])) == []
    assert problems(gke([{"name": "p", **A3, "upgrades": {"waitForJobs": "169h"}}])) == [
        "error: pools[0].upgrades.waitForJobs: 169h: a GKE blue-green upgrade waits at most 7 days (168h) before draining"]


# --------------------------------------------------------------------------------------------------------------------
# AKS

AKS_POOL_CFG = {"name": "t", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 2}
CRG = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-capacity/providers/Microsoft.Compute/capacityReservationGroups/crg-a100"


def props(model) -> set[str]:
    return {f._rest_name_input or n for n, f in vars(model).items() if hasattr(f, "_rest_name_input")}


def test_aks_upgrade_settings_by_kind_and_reservation():
    models = pytest.importorskip("azure.mgmt.containerservice.models")
    plan = plan_of(stack_config("azure", pools=[
        AKS_POOL_CFG, {**AKS_POOL_CFG, "name": "i", "upgrades": "inference"},
        {**AKS_POOL_CFG, "name": "r", "upgrades": "inference", "capacity": [{"reservation": {"id": CRG, "zones": ["1"], "nodes": 2}}, "on-demand"]}]))
    settings = {p: plan.get(AKS_POOL, p).inputs["upgradeSettings"] for p in ("t", "i", "r")}
    assert settings["t"] == {"maxSurge": "0", "maxUnavailable": "1", "drainTimeoutInMinutes": 1440, "undrainableNodeBehavior": "Cordon"}
    assert settings["i"] == {"maxSurge": "1", "maxUnavailable": "0", "drainTimeoutInMinutes": 30, "undrainableNodeBehavior": "Schedule"}
    # An AKS reservation pool runs on-demand beyond the reserved count, so a surge node has somewhere to start.
    assert settings["r"] == settings["i"]
    for value in settings.values():
        assert set(value) <= props(models.AgentPoolUpgradeSettings)
        assert value["undrainableNodeBehavior"] in {b.value for b in models.UndrainableNodeBehavior}
    assert plan.get(AKS_POOL, "r").inputs["tags"] == {"gpupools.io/upgrades": "inference", "gpupools.io/reserved-nodes": "2"}


def test_aks_maintenance_configurations_are_the_models():
    models = pytest.importorskip("azure.mgmt.containerservice.models")
    plan = plan_of(stack_config("azure", pools=[AKS_POOL_CFG], upgrades={
        "window": {"days": ["sun"], "start": "01:30", "hours": 8}, "exclusions": [{"name": "launch", "start": "2026-12-01", "end": "2026-12-10"}]}))
    configs = {r.inputs["configName"]: r.inputs for r in plan.of_type(AKS_MAINTENANCE)}
    assert set(configs) == {"aksManagedAutoUpgradeSchedule", "aksManagedNodeOSUpgradeSchedule"}
    for inputs in configs.values():
        w = inputs["maintenanceWindow"]
        assert w == {"schedule": {"weekly": {"dayOfWeek": "Sunday", "intervalWeeks": 1}}, "durationHours": 8, "startTime": "01:30",
                     "utcOffset": "+00:00", "notAllowedDates": [{"start": "2026-12-01", "end": "2026-12-10"}]}
        assert set(w) <= props(models.MaintenanceWindow) and set(w["schedule"]) <= props(models.Schedule)
        assert set(w["schedule"]["weekly"]) <= props(models.WeeklySchedule)
        assert w["schedule"]["weekly"]["dayOfWeek"] in {d.value for d in models.WeekDay}
        assert set(w["notAllowedDates"][0]) <= props(models.DateSpan)
    cluster = plan.of_type("azure-native:containerservice:ManagedCluster")[0].inputs
    assert cluster["autoUpgradeProfile"] == {"upgradeChannel": "patch", "nodeOSUpgradeChannel": "NodeImage"}
    assert cluster["autoUpgradeProfile"]["nodeOSUpgradeChannel"] in {c.value for c in models.NodeOSUpgradeChannel}
    daily = azure.maintenance_configurations(type("U", (), {"exclusions": []})(), window(days=list(("mon", "tue", "wed", "thu", "fri", "sat", "sun"))))
    assert daily[0]["maintenance_window"]["schedule"] == {"daily": {"interval_days": 1}}


def test_aks_refuses_windows_and_waits_it_cannot_schedule():
    assert problems(stack_config("azure", upgrades={"window": {"days": ["sat", "sun"]}})) == [
        "error: upgrades.window.days: sat, sun: an AKS maintenance schedule repeats on one weekday or every day; give one day, or all seven"]
    assert problems(stack_config("azure", upgrades={"window": {"hours": 3}})) == [
        "error: upgrades.window.hours: 3: an AKS maintenance window lasts 4 to 24 hours"]
    assert problems(stack_config("azure", pools=[{**AKS_POOL_CFG, "upgrades": {"waitForJobs": "24h"}}])) == []
    for wait in ("25h", "4m"):
        assert problems(stack_config("azure", pools=[{**AKS_POOL_CFG, "upgrades": {"waitForJobs": wait}}])) == [
            f"error: pools[0].upgrades.waitForJobs: {wait}: an AKS drain timeout is 5 minutes to 24 hours"]


# --------------------------------------------------------------------------------------------------------------------
# Every cloud: what no upgrade could do


def test_a_surge_past_the_reservation_is_refused_and_its_spare_nodes_allowed():
    block = reservation(2, kind="capacity-block")
    config = stack_config("aws", pools=[{"name": "p", "instanceType": "p4d.24xlarge", "maxNodes": 2, "capacity": [block],
                                         "upgrades": {"kind": "inference", "maxSurge": 1}}])
    assert problems(config) == [
        "error: pools[0].upgrades.maxSurge: 1, but the pool's reservations hold 2 nodes for maxNodes 2: a surge node has no capacity to start in "
        "and the upgrade stalls; at most 0 (drain instead: maxSurge: 0)"]
    config["gpupools:pools"][0]["capacity"] = [reservation(3, kind="capacity-block")]
    assert problems(config) == []


def test_nothing_to_upgrade_with_and_overlong_waits_are_refused():
    config = stack_config("aws", pools=[{"name": "p", "instanceType": "g5.2xlarge", "maxNodes": 2, "upgrades": {"maxSurge": 0, "maxUnavailable": 0}}])
    assert problems(config) == ["error: pools[0].upgrades.maxUnavailable: 0 with maxSurge 0: no node could ever be upgraded; allow one node at a "
                                "time (maxUnavailable: 1) or a surge (maxSurge: 1)"]
    config["gpupools:pools"][0]["upgrades"] = {"waitForJobs": "721h"}
    assert problems(config) == ["error: pools[0].upgrades.waitForJobs: 721h: at most 720h (30 days)"]
    config["gpupools:pools"][0]["upgrades"] = {"waitForJobs": "720h"}
    assert problems(config) == []


def test_exclusion_dates_are_checked():
    base = {"name": "x", "start": "2026-12-10", "end": "2026-12-01"}
    assert problems(gke([{"name": "p", **A3}], upgrades={"exclusions": [base]})) == [
        "error: upgrades.exclusions[0].end: 2026-12-01 is before start 2026-12-10"]
    assert problems(gke([{"name": "p", **A3}], upgrades={"exclusions": [{**base, "start": "2026-02-30"}]})) == [
        "error: upgrades.exclusions[0].start: '2026-02-30' is not a calendar date"]
    twice = [{"name": "x", "start": "2026-12-01", "end": "2026-12-02"}] * 2
    assert problems(gke([{"name": "p", **A3}], upgrades={"exclusions": twice})) == [
        "error: upgrades.exclusions[1].name: 'x' names another exclusion already"]


def test_bad_input_is_one_line_naming_the_field_with_exit_2(tmp_path):
    from conftest import write_stack
    from gpupools.cli.main import app

    cases = {
        "upgrades.exclusions[0].scope": {"upgrades": {"exclusions": [{"name": "x", "start": "2026-12-01", "end": "2026-12-02", "scope": "no-patches"}]}},
        "upgrades.window.start": {"upgrades": {"window": {"start": "25:00"}}},
        "upgrades.window.days[0]": {"upgrades": {"window": {"days": ["saturday"]}}},
        "pools[0].upgrades": {"pools": [{"name": "p", "instanceType": "g2-standard-8", "maxNodes": 2, "upgrades": "batch"}]},
    }
    for field, keys in cases.items():
        path = write_stack(tmp_path, stack_config("gcp", **keys))
        result = CliRunner().invoke(app, ["plan", "--config", str(path)])
        assert result.exit_code == 2, result.output
        lines = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), result.output
        assert "Traceback" not in result.output


# --------------------------------------------------------------------------------------------------------------------
# GPU driver upgrades: the GPU Operator's upgrade policy, and the pinned driver version


def test_driver_upgrades_wait_for_jobs_and_take_one_node_with_a_training_pool():
    policy = driver_upgrade_policy([pool(), pool(upgrades="inference")])
    assert policy["waitForCompletion"] == {"timeoutSeconds": 86400, "podSelector": JOB_POD_SELECTOR}
    assert (policy["maxUnavailable"], policy["maxParallelUpgrades"], policy["autoUpgrade"]) == ("1", 1, True)
    assert driver_upgrade_policy([pool(upgrades="inference")])["maxUnavailable"] == "25%"
    assert driver_upgrade_policy([pool(upgrades="inference")])["waitForCompletion"]["timeoutSeconds"] == 1800


def clusterpolicy_schema() -> dict:
    crd = yaml.safe_load((chart_dir("gpu-operator") / "crds" / "nvidia.com_clusterpolicies.yaml").read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1")


def test_the_chart_renders_the_driver_upgrade_policy_and_version_into_the_cluster_policy():
    jsonschema = pytest.importorskip("jsonschema")
    need_helm()
    plan = plan_of(stack_config("azure", pools=[AKS_POOL_CFG], gpuSoftware={"driverVersion": "580.95.05"}))
    release = plan.get("kubernetes:helm.sh/v3:Release", "gpu-operator").inputs
    (policy,) = [o for o in render("gpu-operator", release["values"], release["name"], release["namespace"]) if o["kind"] == "ClusterPolicy"]
    driver = policy["spec"]["driver"]
    assert driver["version"] == "580.95.05"
    assert driver["upgradePolicy"] == {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": 1,
                                       "waitForCompletion": {"timeoutSeconds": 86400, "podSelector": JOB_POD_SELECTOR},
                                       "podDeletion": {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
                                       "drain": {"enable": False, "force": False, "timeoutSeconds": 300, "deleteEmptyDir": False}}
    jsonschema.validate(policy, clusterpolicy_schema())


def test_the_driver_version_is_refused_where_the_operator_installs_no_driver():
    assert problems(stack_config("aws", gpuSoftware={"driverVersion": "580.95.05"})) == [
        "error: gpuSoftware.driverVersion: 580.95.05: pins the driver the GPU Operator installs, but on EKS the node image brings it "
        "(pin the image release instead)"]
    assert problems(stack_config("gcp", gpuSoftware={"installer": "cloud", "driverVersion": "580.95.05"})) == [
        "error: gpuSoftware.driverVersion: 580.95.05: pins the driver the GPU Operator installs, but on GKE the GPU Operator does not "
        "install it here (gpuSoftware.installer)"]
    assert problems(stack_config("gcp", gpuSoftware={"installer": "gpu-operator", "driverVersion": "580.95.05"})) == []
    values = plan_of(stack_config("aws")).get("kubernetes:helm.sh/v3:Release", "gpu-operator").inputs["values"]
    assert "upgradePolicy" not in values["driver"] and values["driver"]["enabled"] is False


# --------------------------------------------------------------------------------------------------------------------
# The plan tells each pool's day-two story


@pytest.mark.parametrize("cloud, pools, expected", [
    ("aws", None, ["training: new AMIs and NodePool changes reach the nodes by Karpenter drift only Sat 00:00-12:00 UTC (12 h), 1 node at a time"]),
    ("aws", [{"name": "p", "instanceType": "p4d.24xlarge", "maxNodes": 2, "capacity": [reservation(2)]}],
     ["reserved: drift starts a replacement before draining a node with pods, and a full reservation has no room for one"]),
    ("gcp", [{"name": "p", **A3, "capacity": [GKE_RES]}], ["reserved: never surges past the reservation (0 spare reserved nodes)",
                                                          "surge strategy: drains 1 node at a time, no surge"]),
    ("gcp", [{"name": "p", **A3, "fabric": "none"}], ["autoscaled blue-green (GKE Preview)", "after 24 h (waitForDrainDuration)"]),
    ("gcp", [{"name": "p", **A3}], ["surge strategy: drains 1 node at a time, no surge; GKE respects PodDisruptionBudgets for up to an "
                                    "hour while draining a node, then evicts (no blue-green: GKE takes none beside compact placement)"]),
    ("azure", [{**AKS_POOL_CFG, "upgrades": "inference"}], ["inference: cluster patch upgrades and weekly node images",
                                                            "surges 1 new node before draining one old; draining waits up to 30 min"]),
    ("azure", [AKS_POOL_CFG], ["training: upgrades in the existing cluster's own maintenance schedule (not changed by gpupools)",
                               "drains 1 node at a time, no surge; draining waits up to 24 h (drain timeout), then a node whose Job's "
                               "PodDisruptionBudget blocks its drain is left cordoned"]),
    ("gcp", [{"name": "p", **A3}], ["GKE auto-upgrades nodes in the existing cluster's own maintenance window"]),
])
def test_the_plan_says_what_the_next_upgrade_does(cloud, pools, expected, tmp_path):
    from conftest import write_stack
    from gpupools.cli.main import app

    config = stack_config(cloud, pools=pools) if pools else stack_config(cloud)
    if "existing" in expected[0]:
        config["gpupools:cluster"] = {**config["gpupools:cluster"], "create": False}
    result = CliRunner().invoke(app, ["plan", "--config", str(write_stack(tmp_path, config))], terminal_width=400)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for part in expected:
        assert part in text, part


# --------------------------------------------------------------------------------------------------------------------
# plan --against: which pools the change drains, and how many nodes at once


def _against(tmp_path, config: dict, edit) -> tuple[str, dict]:
    """Plan `config` as JSON, let `edit` age the previous plan's resources, and plan again against it (text and JSON)."""
    import json

    from conftest import write_stack
    from gpupools.cli.main import app

    path = write_stack(tmp_path, config)
    first = CliRunner().invoke(app, ["plan", "--config", str(path), "--json"])
    assert first.exit_code == 0, first.output
    previous = json.loads(first.output)
    for resource in previous["resources"]:
        edit(resource)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(previous))
    text = CliRunner().invoke(app, ["plan", "--config", str(path), "--against", str(old)], terminal_width=400)
    again = CliRunner().invoke(app, ["plan", "--config", str(path), "--json", "--against", str(old)])
    assert text.exit_code == 0 and again.exit_code == 0, text.output + again.output
    return " ".join(text.output.split()), json.loads(again.output)


def test_against_says_a_version_change_drains_a_node_group_one_node_at_a_time(tmp_path):
    def older(resource):
        if resource["type"] == EKS_GROUP and resource["name"] == "t":
            resource["inputs"]["version"] = "1.35"
    config = stack_config("aws", autoscaler="cluster-autoscaler", cluster={"name": "ml-test", "kubernetesVersion": "1.36"},
                          pools=[{"name": "t", "instanceType": "g5.2xlarge", "maxNodes": 2}, {"name": "i", "instanceType": "g5.2xlarge", "maxNodes": 2}])
    text, doc = _against(tmp_path, config, older)
    assert (f"updates {EKS_GROUP} t in place and DRAINS its nodes (version changed): 1 node at a time, drained before new ones launch") in text
    (change,) = [c for c in doc["changes"] if c["name"] == "t"]
    assert change["drains"] == ["version"] and change["action"] == "update"
    assert all("drains" not in c for c in doc["changes"] if c["name"] == "i")


def test_against_says_karpenter_drifts_training_nodes_only_in_the_window(tmp_path):
    def older(resource):
        if resource["type"] == NODE_POOL:
            resource["inputs"]["spec"]["template"]["spec"]["expireAfter"] = "168h"
    config = stack_config("aws", pools=[{"name": "t", "instanceType": "g5.2xlarge", "maxNodes": 2},
                                        {"name": "i", "instanceType": "g5.2xlarge", "maxNodes": 2, "upgrades": "inference"}])
    text, _ = _against(tmp_path, config, older)
    assert f"updates {NODE_POOL} nodepool-gpupools-t in place and DRAINS its nodes (spec.template changed): Karpenter drift, 1 node at a time, " \
           f"only inside the maintenance window" in text
    assert f"nodepool-gpupools-i in place and DRAINS its nodes (spec.template changed): Karpenter drift, 1 node at a time, at any time" in text


def test_against_says_a_gke_upgrade_goes_blue_green_and_a_label_change_drains_nothing(tmp_path):
    def older(resource):
        if resource["type"] == GKE_POOL and resource["name"] == "train":
            resource["inputs"]["version"] = "1.34"
        if resource["type"] == GKE_POOL and resource["name"] == "res":
            resource["inputs"]["nodeConfig"]["labels"]["extra"] = "x"
    text, doc = _against(tmp_path, gke([{"name": "train", **A3, "fabric": "none"}, {"name": "res", **A3, "capacity": [GKE_RES]}],
                                       cluster={"name": "ml-test", "location": "us-central1", "kubernetesVersion": "1.35"}), older)
    assert "DRAINS its nodes (version changed): blue-green: old nodes cordoned, each drained once empty or after 86400s" in text
    (res,) = [c for c in doc["changes"] if c["name"] == "res"]
    assert res["action"] == "update" and "drains" not in res


def test_a_cloud_that_sets_no_upgrade_settings_is_said_to(monkeypatch):
    """A cloud module without the day-two answers: nothing is checked, and the plan says the cloud's defaults apply."""
    import types

    from gpupools.upgrades.policy import upgrade_lines, upgrade_problems

    from gpupools.stack.config import Upgrades

    # A window GKE would refuse (24 hours in 32 days): nobody judges it for a cloud that sets none.
    stack = validate_stack(stack_config("gcp")).model_copy(update={"upgrades": Upgrades(window=MaintenanceWindow(hours=6))})
    bare = types.SimpleNamespace(SERVICE="XKS", IMAGE_BRINGS_DRIVER=False)
    monkeypatch.setitem(stack.__dict__, "target", bare)
    assert upgrade_problems(stack, "cloud") == []
    assert upgrade_lines(stack, stack.pools[0], "cloud") == ["XKS's own defaults: gpupools sets no upgrade window or strategy for this cloud"]


def test_the_plans_driver_row_names_the_pinned_version():
    from gpupools.pools.planning import plan_pools
    from gpupools.pools.software import GPU_OPERATOR_DRIVER, driver_plan

    pinned = validate_stack(stack_config("azure", pools=[AKS_POOL_CFG], gpuSoftware={"driverVersion": "580.95.05"}))
    assert driver_plan(pinned, plan_pools(pinned)[0]).version == "580.95.05"
    chart = validate_stack(stack_config("azure", pools=[AKS_POOL_CFG]))
    assert driver_plan(chart, plan_pools(chart)[0]).version == GPU_OPERATOR_DRIVER
