"""What monitoring deploys per cloud and mode (the real program under Pulumi's mock engine), and that every
metric, chart value and dashboard query refers to something that really exists upstream."""

from __future__ import annotations

import csv
import json
import re

import pytest
import yaml

from gpupools.monitoring import plan as monitoring
from gpupools.stack.config import Idle
from gpupools.monitoring.dashboards import dashboards
from gpupools.monitoring.prices import gpu_list_prices
from gpupools.monitoring.rules import price_rules, rule_groups
from gpupools.validation.stack import validate_stack
from gpupools.cli.planrun import run_program
from gpupools.pools.planning import plan_pools
from gpupools.cli.render import rendered_files

from conftest import needs_reference, stack_config

RELEASE = "kubernetes:helm.sh/v3:Release"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
SECRET = "kubernetes:core/v1:Secret"
MONITORING = "gpupools:index:GpuMonitoring"


def plan(config: dict):
    return run_program(config, "test")


def releases(p) -> dict:
    return {r.name: r.inputs for r in p.of_type(RELEASE)}


@pytest.mark.parametrize("cloud", ["aws", "azure"])
def test_install_with_operator(cloud):
    p = plan(stack_config(cloud))
    rel = releases(p)
    kps = rel["kube-prometheus-stack"]
    assert (kps["chart"], kps["version"], kps["repositoryOpts"]["repo"]) == (
        "kube-prometheus-stack", "88.5.3", "https://prometheus-community.github.io/helm-charts")
    assert kps["values"]["kube-state-metrics"]["metricLabelsAllowlist"] == ["nodes=[gpupools.io/pool,gpupools.io/gpu]"]
    # The operator's exporter is scraped: its ServiceMonitor carries the label kube-prometheus-stack selects.
    dcgm = rel["gpu-operator"]["values"]["dcgmExporter"]
    assert dcgm["enabled"] is True and dcgm["serviceMonitor"]["enabled"] is True
    assert dcgm["serviceMonitor"]["additionalLabels"] == {"release": "kube-prometheus-stack"}
    assert dcgm["serviceMonitor"]["relabelings"] == monitoring.SCRAPE_RELABELINGS
    assert "dcgm-exporter" not in rel  # the operator brings its own
    rule = p.get(RULE, "prometheusrule-gpupools-monitoring-gpupools-gpu")
    assert rule.inputs["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert {g["name"] for g in rule.inputs["spec"]["groups"]} == {"gpupools-gpu-prices", "gpupools-gpu-recording", "gpupools-gpu-alerts",
                                                                  "gpupools-gpu-idle-steps", "gpupools-gpu-node-health"}
    assert all(r.parent == "gpu-monitoring" for r in p.resources if r.parent_type == MONITORING.split(":")[-1])
    assert len(p.of_type(MONITORING)) == 1


def test_grafana_password_is_generated_and_secret():
    p = plan(stack_config("aws"))
    values = releases(p)["kube-prometheus-stack"]["values"]["grafana"]
    assert values["admin"] == {"existingSecret": "gpupools-grafana-admin", "userKey": "admin-user", "passwordKey": "admin-password"}
    assert "adminPassword" not in values
    secret = p.get(SECRET, "secret-gpupools-monitoring-gpupools-grafana-admin")
    assert secret.inputs["stringData"]["admin-password"] == "[secret]"  # a Pulumi secret, masked in the plan
    assert secret.parent == "gpu-monitoring"
    password = p.get("random:index/randomPassword:RandomPassword", "grafana-admin")
    assert password.inputs["length"] >= 24
    assert "mock-password" not in p.to_json()  # the generated value appears nowhere in plain text
    boards = [r for r in p.of_type(CONFIGMAP) if r.inputs["metadata"]["labels"].get("grafana_dashboard") == "1"]
    assert {r.inputs["metadata"]["name"] for r in boards} == {"gpupools-dashboard-fleet", "gpupools-dashboard-namespaces"}
    for board in boards:
        (doc,) = board.inputs["data"].values()
        assert json.loads(doc)["uid"].startswith("gpupools-")


def test_teams_on_kueue_get_the_queue_rules_and_dashboard():
    """Kueue quotas bring the queue group and the queue dashboard; ResourceQuota teams have no queues to watch."""
    teams = [{"name": "research", "gpus": 1}]
    for quotas, has_queues in (("kueue", True), ("resourcequota", False)):
        p = plan(stack_config("aws", teams=teams, quotas=quotas))
        boards = {r.inputs["metadata"]["name"] for r in p.of_type(CONFIGMAP) if r.inputs["metadata"]["labels"].get("grafana_dashboard") == "1"}
        assert ("gpupools-dashboard-queues" in boards) is has_queues, quotas
        groups = {g["name"] for g in p.get(RULE, "prometheusrule-gpupools-monitoring-gpupools-gpu").inputs["spec"]["groups"]}
        assert ("gpupools-kueue" in groups) is has_queues, quotas
    files = rendered_files(validate_stack(stack_config("aws", teams=teams)), plan(stack_config("aws", teams=teams)))
    assert json.loads(files["grafana/gpupools-queues.json"])["title"] == "GPU queues (gpupools)"
    assert "gpupools-kueue" in [g["name"] for g in yaml.safe_load(files["prometheus/gpupools-gpu.rules.yaml"])["groups"]]


def test_gke_cloud_installer_gets_standalone_exporter():
    p = plan(stack_config("gcp"))
    rel = releases(p)
    assert "gpu-operator" not in rel
    exporter = rel["dcgm-exporter"]
    assert (exporter["chart"], exporter["version"], exporter["repositoryOpts"]["repo"]) == (
        "dcgm-exporter", "4.8.2", "https://nvidia.github.io/dcgm-exporter/helm-charts")
    v = exporter["values"]
    assert v["serviceMonitor"]["enabled"] is True and v["serviceMonitor"]["additionalLabels"] == {"release": "kube-prometheus-stack"}
    assert {"name": "nvidia-install-dir-host", "hostPath": "/home/kubernetes/bin/nvidia"} in v["extraHostVolumes"]
    mounts = {m["name"]: m for m in v["extraVolumeMounts"]}
    assert mounts["nvidia-install-dir-host"]["mountPath"] == "/usr/local/nvidia"
    assert mounts["exporter-metrics-volume"]["mountPath"] == "/etc/dcgm-exporter/default-counters.csv"  # the chart default kept
    assert {"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"} in v["extraEnv"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in v["tolerations"]
    terms = v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "gpupools.io/gpu", "operator": "Exists"}]}]
    assert v["kubeletPath"] == "/var/lib/kubelet/pod-resources"  # per-pod attribution
    quota = p.get("kubernetes:core/v1:ResourceQuota", "resourcequota-gpupools-monitoring-dcgm-exporter-quota")
    assert "system-node-critical" in quota.inputs["spec"]["scopeSelector"]["matchExpressions"][0]["values"]
    ns = p.get("kubernetes:core/v1:Namespace", "namespace-gpupools-monitoring")
    assert ns.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_device_plugin_installer_also_gets_exporter_without_gke_paths():
    p = plan(stack_config("aws", gpuSoftware={"installer": "device-plugin"}))
    v = releases(p)["dcgm-exporter"]["values"]
    assert "extraHostVolumes" not in v and "securityContext" not in v


def test_existing_prometheus_uses_release_label():
    p = plan(stack_config("gcp", monitoring={"prometheus": "existing", "releaseLabel": "prom"}))
    rel = releases(p)
    assert "kube-prometheus-stack" not in rel
    assert rel["dcgm-exporter"]["values"]["serviceMonitor"]["additionalLabels"] == {"release": "prom"}
    assert p.get(RULE, "prometheusrule-gpupools-monitoring-gpupools-gpu").inputs["metadata"]["labels"]["release"] == "prom"
    assert not p.of_type(SECRET) and not p.of_type("random:index/randomPassword:RandomPassword")
    p = plan(stack_config("azure", monitoring={"prometheus": "existing", "releaseLabel": "prom"}))
    assert releases(p)["gpu-operator"]["values"]["dcgmExporter"]["serviceMonitor"]["additionalLabels"] == {"release": "prom"}


def test_grafana_off_means_no_dashboards_and_no_secret():
    p = plan(stack_config("aws", monitoring={"grafana": False}))
    assert releases(p)["kube-prometheus-stack"]["values"]["grafana"] == {"enabled": False}
    assert not p.of_type(SECRET)
    assert not [r for r in p.of_type(CONFIGMAP) if "grafana_dashboard" in r.inputs["metadata"].get("labels", {})]


def test_monitoring_off_deploys_nothing_and_leaves_operator_monitor_off():
    p = plan(stack_config("aws", monitoring={"enabled": False}))
    assert not p.of_type(MONITORING) and not p.of_type(RULE)
    assert set(releases(p)) == {"gpu-operator", "karpenter", "node-readiness-controller"}
    assert releases(p)["gpu-operator"]["values"]["dcgmExporter"]["serviceMonitor"]["enabled"] is False
    assert "serviceMonitor" not in releases(p)["karpenter"]["values"]  # nothing scrapes it, and no CRD to hold it


def test_idle_config_reaches_the_deployed_alert():
    p = plan(stack_config("aws", monitoring={"idle": {"utilizationBelowPercent": 10, "forHours": 2}}))
    groups = p.get(RULE, "prometheusrule-gpupools-monitoring-gpupools-gpu").inputs["spec"]["groups"]
    alert = next(r for g in groups for r in g["rules"] if r.get("alert") == "GpuAllocatedButIdle")
    assert alert["for"] == "2h" and alert["expr"].endswith("< 10")


@pytest.mark.parametrize("cloud", ["aws", "azure", "gcp"])
def test_prometheus_rule_matches_the_pinned_crd(cloud):
    """The PrometheusRule a stack deploys, per-group intervals and rule labels included, against the pinned CRD."""
    import jsonschema

    from conftest import prometheus_operator_schema

    # Not checked as a schema: one of its patterns is Go's `(?i)` in a place Python's re refuses; it is not ours.
    validator = jsonschema.Draft7Validator(prometheus_operator_schema(needs_reference(), "prometheusrules"))
    p = plan(stack_config(cloud, monitoring={"idle": {"utilizationBelowPercent": 2.5, "forHours": 2}}))
    rule = p.get(RULE, "prometheusrule-gpupools-monitoring-gpupools-gpu").inputs
    assert [e.message for e in validator.iter_errors(rule)] == []
    steps = next(g for g in rule["spec"]["groups"] if g["name"] == "gpupools-gpu-idle-steps")
    assert steps["interval"] == "60s" and {r["labels"]["gpupools_idle_below"] for r in steps["rules"] if "labels" in r} == {"2.5"}
    broken = {**rule, "spec": {"groups": [{**steps, "interval": "1 minute"}]}}
    assert any("does not match" in e.message for e in validator.iter_errors(broken))


def test_render_writes_the_rules_file_and_dashboards():
    config = stack_config("gcp")
    files = rendered_files(validate_stack(config), plan(config))
    doc = yaml.safe_load(files["prometheus/gpupools-gpu.rules.yaml"])
    assert [g["name"] for g in doc["groups"]] == ["gpupools-gpu-prices", "gpupools-gpu-recording", "gpupools-gpu-alerts", "gpupools-gpu-idle-steps",
                                                 "gpupools-gpu-node-health"]
    assert json.loads(files["grafana/gpupools-fleet.json"])["title"].startswith("GPU fleet overview")
    assert "dcgm-exporter.values.yaml" in files


def test_prices_come_from_the_catalog():
    from gpupools.core.catalog import load_catalog

    cat = load_catalog()
    aws = gpu_list_prices("aws")
    a100 = [i.price / i.gpus for i in cat.instances["aws"].values() if i.gpu and i.gpu.name == "A100-80GB"]
    assert aws["A100-80GB"].usd_per_hour == pytest.approx(min(a100), abs=1e-4)
    rules = price_rules(aws)
    whole = [r for r in rules if r["labels"] == {"gpupools_gpu": "A100-80GB", "modelName": "NVIDIA A100-SXM4-80GB"}]
    assert whole and float(whole[0]["expr"][7:-1]) == pytest.approx(min(a100), abs=1e-3)
    mig = [r for r in rules if r["labels"].get("GPU_I_PROFILE") == "3g.40gb" and r["labels"]["modelName"] == "NVIDIA A100-SXM4-80GB"]
    assert float(mig[0]["expr"][7:-1]) == pytest.approx(min(a100) / 2, rel=1e-4)
    # Every NVML name of a GPU some catalog offer carries gets a price, so no dcgm modelName of a GPU gpupools can plan is
    # silently unpriced; a GPU no priced offer carries (GB200, GB300: their types are sold without a list price) has none.
    priced = {r["labels"]["modelName"] for r in rules}
    offered = {i.gpu.name for types in cat.instances.values() for i in types.values() if i.gpu and i.price is not None} | {
        a.gpu.name for c in cat.instances for a in cat.attachable(c).values()}
    assert priced == {d for g in cat.gpus.values() if g.name in offered for d in g.device_names}
    assert "NVIDIA GB200" not in priced and "GB200" not in offered


# --------------------------------------------------------------------------------------------------------------------
# Against the pinned upstream files


def all_exprs() -> list[str]:
    exprs = [r["expr"] for g in rule_groups(Idle(), gpu_list_prices()) for r in g["rules"]]
    for board in dashboards(Idle()).values():
        exprs += [t["expr"] for panel in board["panels"] for t in panel["targets"]]
        exprs += [v["definition"] for v in board["templating"]["list"] if "definition" in v]
    return exprs


def test_every_dcgm_metric_is_a_default_counter():
    ref = needs_reference()
    rows = csv.reader(line for line in (ref / "dcgm-exporter" / "default-counters.csv").read_text().splitlines()
                      if line.strip() and not line.lstrip().startswith("#"))
    counters = {row[0].strip() for row in rows}
    used = {m for e in all_exprs() for m in re.findall(r"\bDCGM_[A-Z0-9_]+", e)}
    assert used >= {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS"}
    assert used <= counters, f"not in default-counters.csv: {sorted(used - counters)}"


def test_dashboards_only_query_recorded_or_known_series():
    groups = rule_groups(Idle(), gpu_list_prices(), {"vgpu": 4}, {"research": "research"})
    recorded = {r["record"] for g in groups for r in g["rules"] if "record" in r}
    boards = dashboards(Idle(), vgpu=True, queues=True)
    assert "gpupools-queues.json" in boards
    for name, board in boards.items():
        for panel in board["panels"]:
            for target in panel["targets"]:
                names = set(re.findall(r"\bgpupools:[a-z0-9_:]+", target["expr"]))
                assert names and names <= recorded, (name, panel["title"], names - recorded)
        assert len({p["id"] for p in board["panels"]}) == len(board["panels"])


# Keys below these are Kubernetes objects or free-form maps that the chart passes through unchanged.
PASS_THROUGH = {"dcgm-exporter": {"securityContext"}}
# kube-state-metrics is a subchart (8.4.0, pinned by kube-prometheus-stack 88.5.3); its values live in its own chart,
# which is not in the reference folder. metricLabelsAllowlist is its documented list of `resource=[label,...]`.
SUBCHART_KEYS = {"kube-prometheus-stack": {("kube-state-metrics", "metricLabelsAllowlist")}}


def unknown_keys(values, defaults, path=(), chart="") -> list[str]:
    missing = []
    for key, value in values.items():
        here = (*path, key)
        if here in SUBCHART_KEYS.get(chart, set()):
            continue
        if not isinstance(defaults, dict) or key not in defaults:
            missing.append(".".join(here))
            continue
        default = defaults[key]
        if key in PASS_THROUGH.get(chart, set()) or not isinstance(value, dict) or not isinstance(default, dict) or not default:
            continue  # a leaf, a list, or a map the chart leaves free-form
        missing += unknown_keys(value, default, here, chart)
    return missing


@pytest.mark.parametrize("config, chart, folder", [
    (stack_config("gcp"), "dcgm-exporter", "dcgm-exporter"),
    (stack_config("gcp"), "kube-prometheus-stack", "helm-charts"),
    (stack_config("aws", gpuSoftware={"installer": "device-plugin"}), "dcgm-exporter", "dcgm-exporter"),
    # Beside the GPU Operator, for the pools whose operands are off (Bottlerocket).
    (stack_config("aws", pools=[{"name": "batch", "instanceType": "g6.xlarge", "os": "bottlerocket", "maxNodes": 2}]), "dcgm-exporter", "dcgm-exporter"),
])
def test_every_values_key_exists_in_the_pinned_chart(config, chart, folder):
    ref = needs_reference()
    pinned = yaml.safe_load((ref / folder / "Chart.yaml").read_text())
    defaults = yaml.safe_load((ref / folder / "values.yaml").read_text())
    stack = validate_stack(config)
    mplan = monitoring.monitoring_plan(stack, plan_pools(stack))
    release = next(r for r in mplan.releases if r.chart.chart == chart)
    assert release.version == str(pinned["version"])
    assert unknown_keys(release.values, defaults, chart=chart) == []


def test_key_check_catches_a_typo():
    assert unknown_keys({"serviceMonitor": {"enabld": True}}, {"serviceMonitor": {"enabled": True}}) == ["serviceMonitor.enabld"]
