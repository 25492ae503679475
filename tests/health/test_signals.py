"""Healthy while it runs: node-condition and never-ready alerts run by promtool on kube-state-metrics' series, and
GPU faults routed to the platform team rather than to the team whose pod ran there."""

from __future__ import annotations

import re

import pytest

from conftest import stack_config
from gpupools.health import signals
from gpupools.health.readiness import READINESS_TAINT
from gpupools.monitoring.alerting import PLATFORM_ALERTS, PLATFORM_RECEIVER, alertmanager_config, receiver_secrets, team_alert_names
from gpupools.monitoring.rules import rule_groups
from gpupools.stack.config import Idle
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack
from test_rules import PRICES, needs_promtool, node_labels, promtool, run_promtool_test, write_rules


def condition(node: str, name: str, status: str, values: str) -> dict:
    """kube-state-metrics: one series per status, 1 for the node's current one."""
    return {"series": f'kube_node_status_condition{{node="{node}",condition="{name}",status="{status}",job="kube-state-metrics"}}', "values": values}


def taint(node: str, values: str) -> dict:
    return {"series": f'kube_node_spec_taint{{node="{node}",key="{READINESS_TAINT.key}",value="pending",effect="NoSchedule",'
                      f'job="kube-state-metrics"}}', "values": values}


def fired(node: str, pool: str, severity: str, **extra) -> dict:
    return {"exp_labels": {"node": node, "pool": pool, "severity": severity, **extra}}


@needs_promtool
def test_node_health_alerts_fire_on_gpu_nodes_only(tmp_path):
    rules = write_rules(tmp_path, Idle(), strip_annotations=True)
    inputs = [
        *({"series": node_labels(n, p, "A10G"), "values": "1x120"} for n, p in
          (("gpu-a", "infer"), ("gpu-b", "infer"), ("gpu-c", "train"), ("gpu-d", "train"), ("gpu-e", "train"))),
        {"series": 'kube_node_labels{node="sys-1",label_gpupools_io_pool="system",job="kube-state-metrics"}', "values": "1x120"},
        # gpu-a: the EKS agent finds a GPU fault at 10m.
        condition("gpu-a", "AcceleratedHardwareReady", "true", "1x9 0x110"),
        condition("gpu-a", "AcceleratedHardwareReady", "false", "0x9 1x110"),
        # gpu-b: KernelReady false for 3 minutes only (no alert), then NetworkingReady false from 30m on.
        condition("gpu-b", "KernelReady", "false", "0x10 1x3 0x106"),
        condition("gpu-b", "NetworkingReady", "false", "0x29 1x90"),
        # gpu-c: AKS's node problem detector reports a missing GPU from 5m, throttled clocks from 40m.
        condition("gpu-c", "GPUMissing", "true", "0x4 1x115"),
        condition("gpu-c", "GPUClockThrottling", "true", "0x39 1x80"),
        # The system node's conditions are not GPU nodes' business.
        condition("sys-1", "KernelReady", "false", "1x120"),
        # gpu-d keeps the readiness taint for two hours; gpu-e loses it after 20 minutes.
        taint("gpu-d", "1x120"),
        taint("gpu-e", "1x20 _x100"),
    ]
    run_promtool_test(tmp_path, rules, {
        "interval": "1m",
        "input_series": inputs,
        "alert_rule_test": [
            {"eval_time": "9m", "alertname": "GpuNodeHardwareUnhealthy", "exp_alerts": []},
            {"eval_time": "12m", "alertname": "GpuNodeHardwareUnhealthy",
             "exp_alerts": [fired("gpu-a", "infer", "critical", condition="AcceleratedHardwareReady")]},
            {"eval_time": "15m", "alertname": "GpuNodeConditionUnhealthy", "exp_alerts": []},
            {"eval_time": "40m", "alertname": "GpuNodeConditionUnhealthy",
             "exp_alerts": [fired("gpu-b", "infer", "warning", condition="NetworkingReady")]},
            {"eval_time": "10m", "alertname": "GpuNodeGpuProblem", "exp_alerts": [fired("gpu-c", "train", "critical", condition="GPUMissing")]},
            {"eval_time": "41m", "alertname": "GpuNodeGpuDegraded", "exp_alerts": []},
            {"eval_time": "50m", "alertname": "GpuNodeGpuDegraded",
             "exp_alerts": [fired("gpu-c", "train", "warning", condition="GPUClockThrottling")]},
            {"eval_time": "25m", "alertname": "GpuNodeNeverReady", "exp_alerts": []},
            {"eval_time": "45m", "alertname": "GpuNodeNeverReady", "exp_alerts": [fired("gpu-d", "train", "warning")]},
        ],
        # What the fleet dashboard's health panels show.
        "promql_expr_test": [
            {"eval_time": "15m", "expr": signals.UNHEALTHY_NODES,
             "exp_samples": [{"labels": f'{signals.UNHEALTHY_NODES}{{pool="infer"}}', "value": 1},
                             {"labels": f'{signals.UNHEALTHY_NODES}{{pool="train"}}', "value": 1}]},
            {"eval_time": "15m", "expr": signals.UNREADY_NODES, "exp_samples": [{"labels": f'{signals.UNREADY_NODES}{{pool="train"}}', "value": 2}]},
            {"eval_time": "45m", "expr": signals.UNREADY_NODES, "exp_samples": [{"labels": f'{signals.UNREADY_NODES}{{pool="train"}}', "value": 1}]},
        ],
    })


@needs_promtool
def test_the_rules_with_annotations_pass_promtool_check(tmp_path):
    result = promtool("check", "rules", str(write_rules(tmp_path, Idle())))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_critical_gpu_alert_reaches_the_platform_team():
    alerts = [r for g in rule_groups(Idle(), PRICES) for r in g["rules"] if "alert" in r]
    critical = {r["alert"] for r in alerts if r["labels"]["severity"] == "critical"}
    assert critical <= set(PLATFORM_ALERTS)
    assert set(signals.ALERTS) <= {r["alert"] for r in alerts}


PLATFORM = {"slack": {"webhook": {"secure": "v1:abc"}, "channel": "#gpu-platform"}, "email": ["oncall@example.com"]}
TEAM = {"name": "research", "gpus": 2, "alerts": {"email": ["research@example.com"]}}


def matches(route: dict, labels: dict) -> bool:
    """Alertmanager's matchers as gpupools writes them: `name="v"` or `name=~"regex"` (anchored)."""
    for matcher in route["matchers"]:
        name, op, value = re.match(r'^(\w+)(=~|=)"(.*)"$', matcher).groups()
        given = labels.get(name, "")
        if not (re.fullmatch(value, given) if op == "=~" else given == value):
            return False
    return True


def first_receiver(config: dict, labels: dict) -> str:
    return next((r["receiver"] for r in config["route"]["routes"] if matches(r, labels)), config["route"]["receiver"])


def test_gpu_faults_go_to_the_platform_team_and_idle_gpus_to_the_pods_team():
    stack = validate_stack(stack_config("aws", health={"alerts": PLATFORM}, teams=[TEAM],
                                        monitoring={"smtp": {"smarthost": "smtp.example.com:587", "from": "gpu@example.com"}}))
    config = alertmanager_config(stack)
    research = "research"
    for name in PLATFORM_ALERTS:
        # A GPU fault on a GPU the team's pod holds: still the platform's.
        assert first_receiver(config, {"alertname": name, "namespace": research, "pool": "infer"}) == PLATFORM_RECEIVER
    for name in team_alert_names(stack):
        assert first_receiver(config, {"alertname": name, "namespace": research}) == "team-research"
    assert first_receiver(config, {"alertname": "GpuXidApplicationError", "namespace": research}) != PLATFORM_RECEIVER
    platform = next(r for r in config["receivers"] if r["name"] == PLATFORM_RECEIVER)
    assert platform["slack_configs"][0]["channel"] == "#gpu-platform" and platform["email_configs"][0]["to"] == "oncall@example.com"
    assert "platform.slack-webhook" in receiver_secrets(stack)


def test_platform_alerts_alone_make_a_routing_tree():
    stack = validate_stack(stack_config("aws", health={"alerts": {"email": ["oncall@example.com"]}},
                                        monitoring={"smtp": {"smarthost": "smtp.example.com:587", "from": "gpu@example.com"}}))
    config = alertmanager_config(stack)
    assert [r["receiver"] for r in config["route"]["routes"]] == [PLATFORM_RECEIVER]


@pytest.mark.parametrize("keys, expected", [
    ({"health": {"alerts": {"email": ["oncall@example.com"]}}}, "error: monitoring.smtp: required for e-mail alerts (health.alerts.email)"),
    ({"health": {"alerts": {"slack": {"webhook": "https://hooks.slack.com/x"}}}}, "error: health.alerts.slack.webhook: "),
    ({"health": {"readinessGate": "yes"}}, "error: health.readinessGate: input should be a valid boolean"),
])
def test_bad_health_keys_are_one_line(keys, expected):
    with pytest.raises(ConfigError) as exc:
        validate_stack(stack_config("aws", **keys))
    assert any(str(p).startswith(expected) for p in exc.value.problems), exc.value
    assert "hooks.slack.com" not in str(exc.value)


def test_the_fleet_dashboard_has_a_health_row():
    from gpupools.monitoring.dashboards import fleet_dashboard

    panels = {p["title"]: p for p in fleet_dashboard(Idle())["panels"]}
    for title, series in (("GPU nodes unhealthy", signals.UNHEALTHY_NODES), ("GPU nodes waiting for their GPU stack", signals.UNREADY_NODES),
                          ("GPU health alerts firing now, per pool", signals.ALERTS_FIRING)):
        assert series in panels[title]["targets"][0]["expr"]
    recorded = {r["record"] for g in rule_groups(Idle(), PRICES) for r in g["rules"] if "record" in r}
    assert {signals.UNHEALTHY_NODES, signals.UNREADY_NODES, signals.ALERTS_FIRING} <= recorded
