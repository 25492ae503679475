"""KAI Scheduler's queue rules and alerts, run by promtool on series shaped as KAI's queue controller, its scheduler and
kube-state-metrics export them; the ServiceMonitors against the pinned CRD; routing to the owning team."""

from __future__ import annotations

import pytest

from gpupools.monitoring.alerting import QUEUE_STARVED_ALERT, WORK_RECLAIMED_ALERT, alertmanager_config, team_alert_names
from gpupools.monitoring.promql import KAI_ALLOCATED_BY_TEAM, KAI_QUOTA_BY_TEAM, KAI_RECLAIMED_BY_TEAM
from gpupools.monitoring.rules import rule_groups, rules_file_text
from gpupools.queues import kai
from gpupools.stack.config import Idle
from gpupools.validation.stack import validate_stack

from conftest import needs_reference, service_monitor_schema, stack_config
from test_rules import PRICES, needs_promtool, promtool, run_promtool_test

QUEUES = {"vision": "vision", "search": "search-prod"}


def _labels(labels: dict) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


def series(metric: str, **labels) -> str:
    """As scraped: the exporter's namespace and pod beside the metric's own labels."""
    return f"{metric}{{{_labels({'namespace': 'kai-scheduler', 'pod': 'queue-controller-0', 'service': 'queue-controller', **labels})}}}"


def write(tmp_path, strip: bool = True):
    groups = rule_groups(Idle(), PRICES, kai_queues=QUEUES)
    if strip:
        for group in groups:
            for rule in group["rules"]:
                rule.pop("annotations", None)
    path = tmp_path / "gpupools-gpu.rules.yaml"
    path.write_text(rules_file_text(groups))
    return path


def inputs() -> list[dict]:
    """vision: quota 7, holds 2, one pod unschedulable the whole time, two pods reclaimed at 20m. search: at its quota of 6
    with a pod waiting (no starvation), one pod preempted (not reclaim). other: no team's queue, starved and reclaimed."""
    return [
        {"series": series("kai_queue_deserved_gpus", queue_name="vision", queue_metadata_name="vision", queue_display_name="vision"), "values": "7x120"},
        {"series": series("kai_queue_allocated_gpus", queue_name="vision", queue_metadata_name="vision", queue_display_name="vision"), "values": "2x120"},
        {"series": series("kai_queue_deserved_gpus", queue_name="search", queue_metadata_name="search", queue_display_name="search"), "values": "6x120"},
        {"series": series("kai_queue_allocated_gpus", queue_name="search", queue_metadata_name="search", queue_display_name="search"), "values": "6x120"},
        {"series": series("kai_queue_deserved_gpus", queue_name="other", queue_metadata_name="other", queue_display_name="other"), "values": "4x120"},
        {"series": series("kai_queue_allocated_gpus", queue_name="other", queue_metadata_name="other", queue_display_name="other"), "values": "0x120"},
        {"series": 'kube_pod_status_unschedulable{namespace="vision",pod="train-0",uid="u1"}', "values": "1x120"},
        {"series": 'kube_pod_status_unschedulable{namespace="search-prod",pod="serve-0",uid="u2"}', "values": "1x120"},
        {"series": 'kube_pod_status_unschedulable{namespace="other",pod="x-0",uid="u3"}', "values": "1x120"},
        {"series": series("kai_pod_group_evicted_pods_total", pod="kai-scheduler-default-0", service="kai-scheduler-default",
                          exported_namespace="vision", podgroup="pg-train", uid="g1", nodepool="default", action="reclaim"),
         "values": "0x20 2x100"},
        {"series": series("kai_pod_group_evicted_pods_total", pod="kai-scheduler-default-0", service="kai-scheduler-default",
                          exported_namespace="search-prod", podgroup="pg-serve", uid="g2", nodepool="default", action="preempt"),
         "values": "0x20 1x100"},
        {"series": series("kai_pod_group_evicted_pods_total", pod="kai-scheduler-default-0", service="kai-scheduler-default",
                          exported_namespace="other", podgroup="pg-x", uid="g3", nodepool="default", action="reclaim"),
         "values": "0x20 1x100"},
    ]


@needs_promtool
def test_the_kai_rules_pass_promtool_check(tmp_path):
    result = promtool("check", "rules", str(write(tmp_path, strip=False)))
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


@needs_promtool
def test_a_starved_queue_and_reclaimed_work_alert_the_team(tmp_path):
    """vision holds 2 of its 7 GPUs while its pod waits: starved after 30 minutes. search waits at its quota: quiet. Its
    preempted pod is no reclaim. Two vision pods reclaimed at 20 minutes alert until the window has passed. A queue of no
    team stays quiet."""
    vision = {"namespace": "vision", "queue_name": "vision"}
    run_promtool_test(tmp_path, write(tmp_path), {"interval": "1m", "input_series": inputs(), "alert_rule_test": [
        {"eval_time": "29m", "alertname": QUEUE_STARVED_ALERT, "exp_alerts": []},
        {"eval_time": "31m", "alertname": QUEUE_STARVED_ALERT, "exp_alerts": [{"exp_labels": {**vision, "severity": "warning"}}]},
        {"eval_time": "19m", "alertname": WORK_RECLAIMED_ALERT, "exp_alerts": []},
        {"eval_time": "25m", "alertname": WORK_RECLAIMED_ALERT, "exp_alerts": [{"exp_labels": {**vision, "severity": "info"}}]},
        {"eval_time": "40m", "alertname": WORK_RECLAIMED_ALERT, "exp_alerts": []},
    ]})


@needs_promtool
def test_the_kai_recording_rules_keep_team_queues_with_their_namespace(tmp_path):
    def sample(name: str, labels: dict, value: float, at: str = "10m") -> dict:
        return {"eval_time": at, "expr": f'{name}{{queue_name="{labels["queue_name"]}"}}',
                "exp_samples": [{"labels": f"{name}{{{_labels(dict(sorted(labels.items())))}}}", "value": value}]}

    search = {"namespace": "search-prod", "queue_name": "search"}
    run_promtool_test(tmp_path, write(tmp_path), {"interval": "1m", "input_series": inputs(), "promql_expr_test": [
        sample(KAI_QUOTA_BY_TEAM, search, 6), sample(KAI_ALLOCATED_BY_TEAM, search, 6),
        sample(KAI_RECLAIMED_BY_TEAM, {"namespace": "vision", "queue_name": "vision"}, 2, at="30m"),
        {"eval_time": "10m", "expr": f'{KAI_QUOTA_BY_TEAM}{{queue_name="other"}}', "exp_samples": []},
    ]})


def test_service_monitors_validate_and_select_kais_services():
    jsonschema = pytest.importorskip("jsonschema")
    schema = service_monitor_schema(needs_reference())
    controller, scheduler = kai.service_monitors({"release": "kube-prometheus-stack"})
    for monitor in (controller, scheduler):
        jsonschema.validate(monitor, schema)
        assert monitor["metadata"]["namespace"] == kai.CHART.namespace and monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert controller["spec"]["selector"]["matchLabels"] == {"app": "queue-controller"} and controller["spec"]["endpoints"][0]["port"] == "metrics"
    assert scheduler["spec"]["selector"]["matchLabels"] == {"app": "kai-scheduler-default"}
    assert scheduler["spec"]["serviceDiscoveryRole"] == "EndpointSlice"  # the leader's EndpointSlice, the Service has no selector


def _kai_stack(**keys):
    pools = [{"name": "train", "instanceType": "g5.12xlarge", "maxNodes": 2}]
    return validate_stack(stack_config("aws", pools=pools, quotas="kai", teams=[{"name": "vision", "gpus": 4}], **keys))


def test_kai_alerts_route_to_the_team_and_only_on_kai():
    assert team_alert_names(_kai_stack())[1:] == [QUEUE_STARVED_ALERT, WORK_RECLAIMED_ALERT]
    kueue = validate_stack(stack_config("aws", pools=[{"name": "train", "instanceType": "g5.12xlarge", "maxNodes": 2}],
                                        teams=[{"name": "vision", "gpus": 4}]))
    assert QUEUE_STARVED_ALERT not in team_alert_names(kueue)
    assert kai.queue_namespaces(kueue) == {} and kai.queue_namespaces(_kai_stack()) == {"vision": "vision"}


def test_the_stack_scrapes_kai_and_carries_its_rules():
    from gpupools.monitoring.rules import rules_for
    from gpupools.pools.planning import plan_pools
    from gpupools.queues.engine import quota_plan

    stack = _kai_stack()
    assert "gpupools-kai" in [g["name"] for g in rules_for(stack)]
    objects = quota_plan(stack, plan_pools(stack), scrape={"release": "kube-prometheus-stack"}).objects
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "ServiceMonitor"] == ["kai-queue-controller", "kai-scheduler"]
    assert not [o for o in quota_plan(stack, plan_pools(stack)).objects if o["kind"] == "ServiceMonitor"]


@needs_promtool
def test_the_kai_dashboard_queries_on_kai_series(tmp_path):
    """The dashboard's stats, with every team selected: GPUs beyond quota (none: vision is below, search at it), waiting
    pods of the teams (the other namespace's not among them) and reclaimed pods."""
    from gpupools.monitoring.dashboards import dashboards

    board = dashboards(Idle(), kai_queues=True)["gpupools-kai-queues.json"]
    assert "gpupools-kai-queues.json" not in dashboards(Idle(), queues=True)
    stats = {p["title"]: p["targets"][0]["expr"].replace("$queue", ".*") for p in board["panels"] if p["type"] == "stat"}
    tests = [{"eval_time": "30m", "expr": expr, "exp_samples": [{"labels": "{}", "value": value}]}
             for expr, value in zip(stats.values(), (0, 2, 2))]
    run_promtool_test(tmp_path, write(tmp_path), {"interval": "1m", "input_series": inputs(), "promql_expr_test": tests})
