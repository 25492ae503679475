"""The GPU rules, run by promtool: every file passes `promtool check rules`, and `promtool test rules` shows each
alert firing and not firing, and the recording rules' values, on series shaped like dcgm-exporter's.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from gpupools.monitoring import plan as monitoring
from gpupools.stack.config import Idle
from gpupools.monitoring.dashboards import fleet_dashboard
from gpupools.monitoring.prices import Price
from gpupools.monitoring.promql import SHARE, duration
from gpupools.monitoring.rules import APPLICATION_XIDS, alert_rules, rule_groups, rules_file_text, xid_alerts

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian/Ubuntu: apt-get install prometheus)")

A10G, A100 = "NVIDIA A10G", "NVIDIA A100-SXM4-80GB"
PRICES = {"A10G": Price("A10G", 1.0, "test"), "A100-80GB": Price("A100-80GB", 4.0, "test")}


def series(metric: str, node: str, gpu: int, model: str, holder: tuple[str, str] | None = None, **extra) -> str:
    labels = {"gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}", "device": f"nvidia{gpu}", "modelName": model, "Hostname": node,
              "DCGM_FI_DRIVER_VERSION": "570.133.20", "instance": "10.0.0.5:9400", "job": "nvidia-dcgm-exporter", **extra}
    if holder:
        labels.update(namespace=holder[0], pod=holder[1], container="main")
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def alert_labels(node: str, gpu: int, model: str, holder=None, pool=None, **extra) -> dict:
    labels = {"Hostname": node, "gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}", "modelName": model, **extra}
    if holder:
        labels.update(namespace=holder[0], pod=holder[1], container="main")
    if pool:
        labels["pool"] = pool
    return labels


def node_labels(node: str, pool: str, gpu: str) -> str:
    return f'kube_node_labels{{node="{node}",label_gpupools_io_pool="{pool}",label_gpupools_io_gpu="{gpu}",job="kube-state-metrics"}}'


def write_rules(tmp_path, idle: Idle, strip_annotations: bool = False, shares: dict[str, int] | None = None,
                queues: dict[str, str] | None = None):
    groups = rule_groups(idle, PRICES, shares, queues)
    if strip_annotations:
        # promtool compares annotations verbatim; the unit tests check expressions, labels and timing, and
        # `promtool check rules` on the unmodified file checks the annotation templates.
        for group in groups:
            for rule in group["rules"]:
                rule.pop("annotations", None)
    path = tmp_path / "gpupools-gpu.rules.yaml"
    path.write_text(rules_file_text(groups))
    return path


def promtool(*args: str) -> subprocess.CompletedProcess:
    """promtool with Go's garbage collector run at 400 % heap growth rather than 100 % (a unit test's storage holds a
    few MB) and one P, so that no second core runs idle-time marking beside the evaluation (Go runtime,
    src/runtime/proc.go, findRunnable: "run idle-time marking rather than give up the P"): less CPU, the same results."""
    env = {**os.environ, "GOGC": "400", "GOMAXPROCS": "1"}
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, env=env)


def run_promtool_test(tmp_path, rules, test: dict) -> None:
    """One `promtool test rules` case against `rules`, evaluated every minute as the rules are in Prometheus."""
    path = tmp_path / "rules.test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": [test]}, sort_keys=False))
    result = promtool("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
@pytest.mark.parametrize("idle", [Idle(), Idle(utilization_below_percent=12.5, for_hours=1.5)])
def test_rules_file_passes_promtool_check(tmp_path, idle):
    result = promtool("check", "rules", str(write_rules(tmp_path, idle, queues={"research": "research", "search": "search-prod"})))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@needs_promtool
def test_rendered_rules_for_each_example_stack_pass_promtool(tmp_path):
    from gpupools.stack.values import read_stack_file
    from gpupools.validation.stack import validate_stack

    from conftest import ROOT

    paths = []
    for name in ("dev-aws", "dev-azure", "dev-gcp"):
        stack = validate_stack(read_stack_file(ROOT / "stacks" / f"Pulumi.{name}.yaml"))
        files = monitoring.rendered_files(stack)
        path = tmp_path / f"{name}.rules.yaml"
        path.write_text(files[monitoring.RULES_FILE])
        paths.append(str(path))
    # One promtool for the three files: it checks each and exits non-zero if any fails (prometheus v2.42.0,
    # cmd/promtool/main.go, CheckRules).
    result = promtool("check", "rules", *paths)
    assert result.returncode == 0, result.stdout + result.stderr


IDLE = ("team-a", "notebook-1")
BUSY = ("team-b", "trainer")
NODE_A, NODE_B, NODE_X = "node-a", "node-b", "node-x"


def unit_tests() -> dict:
    """Three nodes: node-a (pool infer, A10G), node-b (pool train, A100), node-x (a GPU node with no exporter)."""
    inputs = [
        {"series": node_labels(NODE_A, "infer", "A10G"), "values": "1x400"},
        {"series": node_labels(NODE_B, "train", "A100-80GB"), "values": "1x400"},
        {"series": node_labels(NODE_X, "train", "A100-80GB"), "values": "1x400"},
        {"series": 'kube_node_labels{node="cpu-node",job="kube-state-metrics"}', "values": "1x400"},  # not a GPU node
        # node-a GPU 0: held and idle (2 %); GPU 1: held and busy; GPU 2: idle but nobody holds it.
        {"series": series("DCGM_FI_DEV_GPU_UTIL", NODE_A, 0, A10G, IDLE), "values": "2x400"},
        {"series": series("DCGM_FI_DEV_GPU_UTIL", NODE_A, 1, A10G, BUSY), "values": "80x400"},
        {"series": series("DCGM_FI_DEV_GPU_UTIL", NODE_A, 2, A10G), "values": "2x400"},
        # node-b GPU 0: held, idle for 3 h, then one busy minute at 3h, then idle again.
        {"series": series("DCGM_FI_DEV_GPU_UTIL", NODE_B, 0, A100, ("team-c", "bursty")), "values": "1x179 60 1x220"},
        # node-b GPU 1: time-sliced between two pods of team-e, both idle.
        {"series": series("DCGM_FI_DEV_GPU_UTIL", NODE_B, 1, A100, ("team-e", "a")), "values": "0x400"},
        {"series": series("DCGM_FI_DEV_GPU_UTIL", NODE_B, 1, A100, ("team-e", "b")), "values": "0x400"},
        # node-b GPU 2 is in MIG mode: one 3g.40gb instance reports the graphics engine ratio, not GPU_UTIL.
        {"series": series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", NODE_B, 2, A100, ("team-d", "mig"), GPU_I_PROFILE="3g.40gb", GPU_I_ID="1"),
         "values": "0.5x400"},
        # Health: GPU 0 on node-a is hot and has an XID; GPU 1 is fine.
        {"series": series("DCGM_FI_DEV_GPU_TEMP", NODE_A, 0, A10G, IDLE), "values": "91x400"},
        {"series": series("DCGM_FI_DEV_GPU_TEMP", NODE_A, 1, A10G, BUSY), "values": "70x400"},
        {"series": series("DCGM_FI_DEV_GPU_TEMP", NODE_B, 0, A100), "values": "60x400"},
        {"series": series("DCGM_FI_DEV_XID_ERRORS", NODE_A, 0, A10G, IDLE), "values": "0x30 79x370"},
        {"series": series("DCGM_FI_DEV_XID_ERRORS", NODE_A, 1, A10G, BUSY), "values": "0x400"},
        {"series": series("DCGM_FI_DEV_XID_ERRORS", NODE_B, 0, A100, ("team-c", "bursty")), "values": "0x59 31x60 79x280"},
        # node-b GPU 2 (two MIG instances): every instance's series carries the GPU's temperature.
        *[{"series": series("DCGM_FI_DEV_GPU_TEMP", NODE_B, 2, A100, ("team-d", f"mig{i}"), GPU_I_PROFILE="3g.40gb", GPU_I_ID=str(i)),
           "values": "90x400"} for i in (1, 2)],
        {"series": series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", NODE_A, 1, A10G, BUSY), "values": "0x60 1x340"},
        {"series": series("DCGM_FI_DEV_ROW_REMAP_FAILURE", NODE_A, 1, A10G, BUSY), "values": "0x400"},
        {"series": series("DCGM_FI_DEV_ROW_REMAP_FAILURE", NODE_B, 0, A100), "values": "0x120 1x280"},
        # Memory: the busy pod has 23,900 of 24,000 MiB in use; the idle one 1,000.
        {"series": series("DCGM_FI_DEV_FB_USED", NODE_A, 1, A10G, BUSY), "values": "23900x400"},
        {"series": series("DCGM_FI_DEV_FB_FREE", NODE_A, 1, A10G, BUSY), "values": "100x400"},
        {"series": series("DCGM_FI_DEV_FB_USED", NODE_A, 0, A10G, IDLE), "values": "1000x400"},
        {"series": series("DCGM_FI_DEV_FB_FREE", NODE_A, 0, A10G, IDLE), "values": "23000x400"},
    ]
    idle_exp = [{"exp_labels": {**alert_labels(NODE_A, 0, A10G, IDLE, "infer"), "severity": "warning"}}] + [
        {"exp_labels": {**alert_labels(NODE_B, 1, A100, ("team-e", p), "train"), "severity": "warning"}} for p in ("a", "b")]
    return {
        "interval": "1m",
        "input_series": inputs,
        "alert_rule_test": [
            # 3 h 59 m of idleness is not yet 4 h: nothing fires.
            {"eval_time": "3h59m", "alertname": "GpuAllocatedButIdle", "exp_alerts": []},
            # At 4 h the held idle GPUs fire; the unallocated GPU (no pod), the busy one and the one
            # with a burst at 3 h do not. The MIG slice (50 %) does not either.
            {"eval_time": "4h1m", "alertname": "GpuAllocatedButIdle", "exp_alerts": idle_exp},
            {"eval_time": "6h", "alertname": "GpuAllocatedButIdle", "exp_alerts": idle_exp},
            {"eval_time": "20m", "alertname": "GpuXidError", "exp_alerts": []},
            # XID 79 (fallen off the bus, hardware) at 31 m: critical while new, once for the GPU, quiet ten minutes on
            # although the gauge still holds 79.
            {"eval_time": "40m", "alertname": "GpuXidError",
             "exp_alerts": [{"exp_labels": {**alert_labels(NODE_A, 0, A10G, pool="infer"), "severity": "critical"}}]},
            {"eval_time": "45m", "alertname": "GpuXidError", "exp_alerts": []},
            {"eval_time": "40m", "alertname": "GpuXidApplicationError", "exp_alerts": []},
            # XID 31 (an illegal memory access, the application's) on node-b GPU 0 at 1 h, then XID 79 at 2 h.
            {"eval_time": "1h5m", "alertname": "GpuXidApplicationError",
             "exp_alerts": [{"exp_labels": {**alert_labels(NODE_B, 0, A100, pool="train"), "severity": "warning"}}]},
            {"eval_time": "1h5m", "alertname": "GpuXidError", "exp_alerts": []},
            {"eval_time": "1h30m", "alertname": "GpuXidApplicationError", "exp_alerts": []},
            {"eval_time": "2h5m", "alertname": "GpuXidError",
             "exp_alerts": [{"exp_labels": {**alert_labels(NODE_B, 0, A100, pool="train"), "severity": "critical"}}]},
            {"eval_time": "2h5m", "alertname": "GpuXidApplicationError", "exp_alerts": []},
            {"eval_time": "5m", "alertname": "GpuTemperatureHigh", "exp_alerts": []},  # hot, but not for 10 minutes yet
            # Hot GPUs alert once each: node-a GPU 0, and node-b GPU 2 whose two MIG instances both report 90 °C.
            {"eval_time": "15m", "alertname": "GpuTemperatureHigh",
             "exp_alerts": [{"exp_labels": {**alert_labels(NODE_A, 0, A10G, pool="infer"), "severity": "warning"}},
                            {"exp_labels": {**alert_labels(NODE_B, 2, A100, pool="train"), "severity": "warning"}}]},
            {"eval_time": "10m", "alertname": "GpuMemoryNearlyFull", "exp_alerts": []},
            {"eval_time": "20m", "alertname": "GpuMemoryNearlyFull",
             "exp_alerts": [{"exp_labels": {**alert_labels(NODE_A, 1, A10G, pool="infer"), "severity": "warning"}}]},
            # Row remapping: node-a GPU 1 remaps a row for an uncorrectable error at 1 h (pending until a reset),
            # node-b GPU 0 fails to remap at 2 h.
            {"eval_time": "50m", "alertname": "GpuRowRemapPending", "exp_alerts": []},
            {"eval_time": "1h10m", "alertname": "GpuRowRemapPending",
             "exp_alerts": [{"exp_labels": {**alert_labels(NODE_A, 1, A10G, pool="infer"), "severity": "warning"}}]},
            {"eval_time": "2h30m", "alertname": "GpuRowRemapPending", "exp_alerts": []},
            {"eval_time": "1h", "alertname": "GpuRowRemapFailure", "exp_alerts": []},
            {"eval_time": "2h1m", "alertname": "GpuRowRemapFailure",
             "exp_alerts": [{"exp_labels": {**alert_labels(NODE_B, 0, A100, pool="train"), "severity": "critical"}}]},
            {"eval_time": "10m", "alertname": "GpuNodeWithoutDcgmMetrics", "exp_alerts": []},
            {"eval_time": "20m", "alertname": "GpuNodeWithoutDcgmMetrics",
             "exp_alerts": [{"exp_labels": {"Hostname": NODE_X, "label_gpupools_io_pool": "train", "label_gpupools_io_gpu": "A100-80GB",
                                            "severity": "warning"}}]},
        ],
        "promql_expr_test": [
            # Pool attribution via kube_node_labels; the unlabelled case is covered by the idle report test.
            {"eval_time": "1h", "expr": "gpupools:pool_gpu_utilization:avg",
             # Weighted by the share of the GPU held: each time-sliced pod is half a GPU, the 3g.40gb slice half an A100.
             "exp_samples": [{"labels": 'gpupools:pool_gpu_utilization:avg{pool="infer"}', "value": (2 + 80 + 2) / 3},
                             {"labels": 'gpupools:pool_gpu_utilization:avg{pool="train"}',
                              "value": (1 * 1 + 0 * 0.5 + 0 * 0.5 + 50 * 0.5) / (1 + 0.5 + 0.5 + 0.5)}]},
            {"eval_time": "1h", "expr": 'gpupools:namespace_gpu_utilization:avg{namespace="team-d"}',
             "exp_samples": [{"labels": 'gpupools:namespace_gpu_utilization:avg{namespace="team-d",pool="train"}', "value": 50}]},
            {"eval_time": "1h", "expr": "gpupools:pool_gpus:count",
             "exp_samples": [{"labels": f'gpupools:pool_gpus:count{{modelName="{A10G}",pool="infer"}}', "value": 3},
                             {"labels": f'gpupools:pool_gpus:count{{modelName="{A100}",pool="train"}}', "value": 3}]},
            {"eval_time": "1h", "expr": f'gpupools:gpu_pods:count{{UUID="GPU-{NODE_B}-1"}}',
             "exp_samples": [{"labels": f'gpupools:gpu_pods:count{{Hostname="{NODE_B}",UUID="GPU-{NODE_B}-1",pool="train"}}', "value": 2}]},
            {"eval_time": "1h", "expr": 'gpupools:gpu_memory_used:ratio{pod="trainer"} > 0.99',
             "exp_samples": [{"labels": f'gpupools:gpu_memory_used:ratio{{{_labels(alert_labels(NODE_A, 1, A10G, BUSY, "infer"))}}}',
                              "value": 23900 / 24000}]},
            # Cost at list price: a whole A10G (1 $/h) per team-a/b, an A100 (4 $/h) split by two pods of team-e,
            # a 3g.40gb slice (half an A100 80GB) for team-d.
            {"eval_time": "1h", "expr": "gpupools:namespace_gpu_cost_usd_per_hour:sum",
             "exp_samples": [{"labels": f'gpupools:namespace_gpu_cost_usd_per_hour:sum{{namespace="{ns}"}}', "value": v}
                             for ns, v in (("team-a", 1), ("team-b", 1), ("team-c", 4), ("team-e", 4), ("team-d", 2))]},
            {"eval_time": "1h", "expr": 'gpupools:pod_gpu_cost_usd_per_hour{namespace="team-e"}',
             "exp_samples": [{"labels": f'gpupools:pod_gpu_cost_usd_per_hour{{gpupools_gpu="A100-80GB",namespace="team-e",pod="{p}",pool="train"}}',
                              "value": 2} for p in ("a", "b")]},
        ],
    }


def _labels(labels: dict) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))


@needs_promtool
def test_alerts_fire_and_stay_quiet(tmp_path):
    rules = write_rules(tmp_path, Idle(), strip_annotations=True)
    tests = tmp_path / "gpu-rules.test.yaml"
    tests.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": [unit_tests()]}, sort_keys=False))
    result = promtool("test", "rules", str(tests))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@needs_promtool
def test_idle_alert_follows_stack_config(tmp_path):
    """With `idle: {utilizationBelowPercent: 1, forHours: 0.5}` the 2 % GPU is not idle, the 0 % ones are, after 30 minutes."""
    rules = write_rules(tmp_path, Idle(utilization_below_percent=1, for_hours=0.5), strip_annotations=True)
    test = unit_tests()
    team_e = [{"exp_labels": {**alert_labels(NODE_B, 1, A100, ("team-e", p), "train"), "severity": "warning"}} for p in ("a", "b")]
    test["alert_rule_test"] = [
        {"eval_time": "29m", "alertname": "GpuAllocatedButIdle", "exp_alerts": []},
        {"eval_time": "31m", "alertname": "GpuAllocatedButIdle", "exp_alerts": team_e},
    ]
    test["promql_expr_test"] = []
    tests = tmp_path / "t.yaml"
    tests.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": [test]}, sort_keys=False))
    result = promtool("test", "rules", str(tests))
    assert result.returncode == 0, result.stdout + result.stderr


def test_idle_alert_names_the_pod_and_namespace():
    alert = next(r for r in alert_rules(Idle()) if r["alert"] == "GpuAllocatedButIdle")
    assert alert["for"] == "4h" and alert["expr"].endswith("< 5")
    assert "$labels.namespace" in alert["annotations"]["description"] and "$labels.pod" in alert["annotations"]["description"]
    assert duration(1.5) == "90m" and duration(0.01) == "36s"


@needs_promtool
def test_dashboard_stats_count_physical_gpus(tmp_path):
    """The fleet dashboard's held and idle-now stats, and the share rule they use, on an A100 40GB in seven 1g.5gb
    slices (six held, one free), an L4 time-sliced among three pods, two vGPU pods on a pool of four vGPUs per A10G,
    and a whole GPU: pods and units would say 12 held; physical GPUs say 6/7 + 1 + 2/4 + 1."""
    A100_40, L4 = "NVIDIA A100-SXM4-40GB", "NVIDIA L4"
    rules = write_rules(tmp_path, Idle(), strip_annotations=True, shares={"vgpu": 4})
    inputs = [{"series": node_labels("n-mig", "mig", "A100-40GB"), "values": "1x30"},
              {"series": node_labels("n-slice", "slice", "L4"), "values": "1x30"},
              {"series": node_labels("n-vgpu", "vgpu", "A10G"), "values": "1x30"},
              {"series": node_labels("n-whole", "whole", "A10G"), "values": "1x30"}]
    inputs += [{"series": series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "n-mig", 0, A100_40, ("team-m", f"m{i}") if i < 6 else None,
                                 GPU_I_PROFILE="1g.5gb", GPU_I_ID=str(7 + i)), "values": ("0.5" if i == 0 else "0.01") + "x30"}
               for i in range(7)]
    inputs += [{"series": series("DCGM_FI_DEV_GPU_UTIL", "n-slice", 0, L4, ("team-s", f"s{i}")), "values": "1x30"} for i in range(3)]
    inputs += [{"series": series("DCGM_FI_DEV_GPU_UTIL", "n-vgpu", 0, A10G, ("team-v", f"v{i}")), "values": "2x30"} for i in range(2)]
    inputs += [{"series": series("DCGM_FI_DEV_GPU_UTIL", "n-whole", 0, A10G, ("team-w", "w")), "values": "90x30"}]
    stats = {p["title"]: p["targets"][0]["expr"].replace('pool=~"$pool"', 'pool=~".*"')
             for p in fleet_dashboard(Idle())["panels"] if p["type"] == "stat"}
    held, idle_now = stats["GPUs held by pods"], stats["Held but idle now (< 5%)"]
    share = SHARE

    def one(expr: str, value: float) -> dict:
        """promtool compares floats exactly; sums of sevenths differ in the last bit, so both sides are rounded."""
        return {"eval_time": "10m", "expr": f"round({expr}, 0.0001)", "exp_samples": [{"labels": "{}", "value": round(value, 4)}]}

    test = {"interval": "1m", "input_series": inputs, "promql_expr_test": [
        one(held, 6 / 7 + 1 + 2 / 4 + 1),
        one(idle_now, 5 / 7 + 1 + 2 / 4),  # the busy slice (50 %) and the busy whole GPU are not idle
        one(f'sum({share}{{pool="mig"}})', 1), one(f'sum({share}{{pool="slice"}})', 1), one(f'sum({share}{{pool="vgpu"}})', 0.5),
        {"eval_time": "10m", "expr": f'{share}{{pod="s0"}}',
         "exp_samples": [{"labels": f'{share}{{{_labels(alert_labels("n-slice", 0, L4, ("team-s", "s0"), "slice"))}}}', "value": 1 / 3}]},
        one('sum(gpupools:pool_gpu_utilization:avg{pool="mig"})', (50 + 6 * 1) / 7),  # a slice weighs 1/7, not 1/6 of the pool
        one('sum(gpupools:namespace_gpus_held:sum{namespace="team-m"})', 6 / 7),
    ]}
    run_promtool_test(tmp_path, rules, test)


@needs_promtool
def test_idle_alert_survives_an_exporter_restart(tmp_path):
    """An exporter restart ends the series (a stale marker) and leaves a few minutes without samples: the idle alert
    keeps its timer and fires 4 h after the GPU went idle, not 4 h after the restart."""
    rules = write_rules(tmp_path, Idle(), strip_annotations=True)
    holder = ("team-r", "restarted")
    test = {"interval": "1m", "input_series": [
        {"series": node_labels(NODE_A, "infer", "A10G"), "values": "1x400"},
        {"series": series("DCGM_FI_DEV_GPU_UTIL", NODE_A, 0, A10G, holder), "values": "1x120 stale _x8 1x270"},
    ], "alert_rule_test": [
        {"eval_time": "3h59m", "alertname": "GpuAllocatedButIdle", "exp_alerts": []},
        {"eval_time": "4h1m", "alertname": "GpuAllocatedButIdle",
         "exp_alerts": [{"exp_labels": {**alert_labels(NODE_A, 0, A10G, holder, "infer"), "severity": "warning"}}]},
    ]}
    run_promtool_test(tmp_path, rules, test)


def test_xid_classes():
    """Application XIDs are warnings, every other XID (and any unknown one) is critical."""
    hardware, application = xid_alerts("GPU")
    assert (hardware["alert"], hardware["labels"]["severity"]) == ("GpuXidError", "critical")
    assert (application["alert"], application["labels"]["severity"]) == ("GpuXidApplicationError", "warning")
    for code in APPLICATION_XIDS:
        assert f"== {code}" in application["expr"] and f"== {code}" in hardware["expr"]  # kept out of the critical one
    assert "changes(DCGM_FI_DEV_XID_ERRORS[10m])" in hardware["expr"] and "pod" not in hardware["expr"]


@needs_promtool
def test_idle_steps_see_every_sample_once(tmp_path):
    """The group `gpupools idle` reads, evaluated as Prometheus does (every minute, rules in order at one instant):
    a burst between two evaluations counts, a time-sliced GPU is split between its pods, a GPU scraped every 5
    minutes is held between its samples, an exporter that stopped (stale marker) is a gap, and a MIG instance is
    judged by its engine ratio."""
    from gpupools.monitoring.promql import IDLE_BELOW, IDLE_STEP, STEP_UTIL

    rules = write_rules(tmp_path, Idle(), strip_annotations=True)
    util, engine = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    slice_a, slice_b, mig = ("team-e", "a"), ("team-e", "b"), ("team-d", "mig")
    inputs = [  # one value every 15 s
        {"series": series(util, NODE_A, 0, A10G, ("team-g", "bursty")), "values": " ".join(["0 70 0 0"] * 20)},
        {"series": series(util, NODE_A, 1, A10G, slice_a), "values": "1x80"},
        {"series": series(util, NODE_A, 1, A10G, slice_b), "values": "1x80"},
        {"series": series(util, NODE_A, 2, A10G, ("team-s", "slow")), "values": " ".join(["2 _x19"] * 4)},
        {"series": series(util, NODE_A, 3, A10G, ("team-f", "stopped")), "values": "1x8 stale"},
        {"series": series(engine, NODE_B, 2, A100, mig, GPU_I_PROFILE="3g.40gb", GPU_I_ID="1"), "values": "0.01x80"},
    ]

    def labelled(name: str, node: str, gpu: int, model: str, holder, **extra) -> str:
        labels = {**alert_labels(node, gpu, model, holder, **extra), IDLE_BELOW: "5"}
        return name + "{" + _labels(labels) + "}"

    def expect(name: str, at: str, *rows) -> dict:
        return {"expr": name, "eval_time": at, "exp_samples": [{"labels": labelled(name, *row[:4], **row[5]) if len(row) > 5
                                                                          else labelled(name, *row[:4]), "value": row[4]} for row in rows]}

    whole = [(NODE_A, 0, A10G, ("team-g", "bursty"), 70), (NODE_A, 1, A10G, slice_a, 1), (NODE_A, 1, A10G, slice_b, 1),
             (NODE_A, 2, A10G, ("team-s", "slow"), 2)]
    mig_row = (NODE_B, 2, A100, mig, 1, {"GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": "1"})
    checks = [
        expect(STEP_UTIL, "2m", *whole, (NODE_A, 3, A10G, ("team-f", "stopped"), 1), mig_row),
        expect(STEP_UTIL, "4m", *whole, mig_row),  # the stale marker at 2m15s ends "stopped"
        expect(STEP_UTIL, "7m", *whole, mig_row),  # "slow" is held between its samples at 5m and 10m
        expect(IDLE_STEP, "4m", (NODE_A, 1, A10G, slice_a, 0.5), (NODE_A, 1, A10G, slice_b, 0.5), (NODE_A, 2, A10G, ("team-s", "slow"), 1),
               (NODE_B, 2, A100, mig, 1, {"GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": "1"})),
    ]
    test = {"interval": "15s", "input_series": inputs, "promql_expr_test": checks}
    run_promtool_test(tmp_path, rules, test)


# --------------------------------------------------------------------------------------------------------------------
# Kueue queues

# Team ClusterQueue -> namespace, as the stack gives them.
QUEUES = {"research": "research", "search": "search-prod", "quiet": "quiet", "moving": "moving", "bursty": "bursty"}
GPU = "nvidia.com/gpu"


def kueue_series(metric: str, follower: bool = False, **labels) -> str:
    """A Kueue series as Prometheus stores it from the ServiceMonitor: the target's namespace, pod and service are the
    controller's (kueue-system), and each of the two replicas exports with its `replica_role`."""
    replica = 1 if follower else 0
    base = {"namespace": "kueue-system", "pod": f"kueue-controller-manager-{replica}", "service": "kueue-controller-manager-metrics-service",
            "endpoint": "https", "job": "kueue-controller-manager-metrics-service", "instance": f"10.0.0.{9 + replica}:8443",
            "replica_role": "follower" if follower else "leader", **labels}
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in base.items()) + "}"


def queue_inputs() -> list[dict]:
    """research: two workloads that cannot fit, no quota in use, nothing ever admitted. search: one workload behind
    running work that holds its quota (4 of 4 on a10g, 3 of 1 on l4: 2 borrowed), its last admission before the
    window. quiet: nothing waits, though the follower still shows three. moving: waits while admitting every minute.
    bursty: nothing in use at each scrape, but short workloads keep being admitted. other: not a team's queue."""
    def pending(queue: str, active: int, inadmissible: int, follower: bool = False) -> list[dict]:
        return [{"series": kueue_series("kueue_pending_workloads", follower, cluster_queue=queue, status=status), "values": f"{n}x150"}
                for status, n in (("active", active), ("inadmissible", inadmissible))]

    def quota(queue: str, flavor: str, used: int, nominal: int, follower: bool = False) -> list[dict]:
        labels = {"cohort": "gpupools", "cluster_queue": queue, "flavor": flavor, "resource": GPU}
        return [{"series": kueue_series("kueue_cluster_queue_resource_usage", follower, **labels), "values": f"{used}x150"},
                {"series": kueue_series("kueue_cluster_queue_nominal_quota", follower, **labels), "values": f"{nominal}x150"}]

    def admitted(queue: str, values: str) -> dict:
        return {"series": kueue_series("kueue_admitted_workloads_total", cluster_queue=queue, priority_class="normal"), "values": values}

    def wait_buckets(follower: bool) -> list[dict]:
        """The leader admits ten workloads a minute, each after 2.5 to 5 s; the follower's copy, if counted, would
        put them under 1 s."""
        per_minute = {"1": 100 if follower else 0, "2.5": 100 if follower else 0, "5": 10, "10": 10, "+Inf": 10}
        return [{"series": kueue_series("kueue_admission_wait_time_seconds_bucket", follower, cluster_queue="search",
                                        priority_class="normal", le=le), "values": f"0+{n}x150"} for le, n in per_minute.items()]

    return [
        *pending("research", 0, 2), *pending("research", 0, 7, follower=True), *quota("research", "a10g", 0, 4),
        *pending("search", 1, 0), *quota("search", "a10g", 4, 4), *quota("search", "l4", 3, 1), *quota("search", "a10g", 4, 4, follower=True),
        admitted("search", "3x150"),
        {"series": kueue_series("kueue_cluster_queue_resource_pending", cluster_queue="search", resource=GPU), "values": "2x150"},
        *wait_buckets(False), *wait_buckets(True),
        *pending("quiet", 0, 0), *pending("quiet", 0, 3, follower=True), *quota("quiet", "a10g", 0, 2),
        *pending("moving", 1, 0), *quota("moving", "a10g", 2, 2), admitted("moving", "0+1x150"),
        *pending("bursty", 0, 1), *quota("bursty", "a10g", 0, 2), admitted("bursty", "0+1x150"),
        *pending("other", 0, 5), *quota("other", "a10g", 0, 1),
    ]


def queue_alert(queue: str) -> dict:
    return {"exp_labels": {"cluster_queue": queue, "namespace": QUEUES[queue], "severity": "warning"}}


def queue_alert_checks() -> list[dict]:
    from gpupools.monitoring.alerting import QUEUE_BLOCKED_ALERT as BLOCKED, QUEUE_WAITING_ALERT as WAITING

    return [
        {"eval_time": "29m", "alertname": BLOCKED, "exp_alerts": []},
        {"eval_time": "31m", "alertname": BLOCKED, "exp_alerts": [queue_alert("research")]},
        {"eval_time": "2h", "alertname": BLOCKED, "exp_alerts": [queue_alert("research")]},
        {"eval_time": "59m", "alertname": WAITING, "exp_alerts": []},
        {"eval_time": "61m", "alertname": WAITING, "exp_alerts": [queue_alert("search")]},
        {"eval_time": "2h", "alertname": WAITING, "exp_alerts": [queue_alert("search")]},
    ]


def queue_recording_checks() -> list[dict]:
    from gpupools.monitoring.promql import (KUEUE_PENDING_BY_TEAM, KUEUE_QUOTA_BORROWED, KUEUE_QUOTA_NOMINAL, KUEUE_QUOTA_PENDING,
                                 KUEUE_QUOTA_USED, KUEUE_WAIT_P90)

    search = {"cluster_queue": "search", "namespace": "search-prod", "resource": GPU}

    def one(name: str, labels: dict, value: float, at: str = "10m") -> dict:
        return {"eval_time": at, "expr": f'round({name}{{cluster_queue="{labels["cluster_queue"]}"}}, 0.001)',
                "exp_samples": [{"labels": "{" + _labels(labels) + "}", "value": value}]}

    return [
        {"eval_time": "10m", "expr": f'{KUEUE_PENDING_BY_TEAM}{{cluster_queue="research"}}',
         "exp_samples": [{"labels": f'{KUEUE_PENDING_BY_TEAM}{{cluster_queue="research",namespace="research",status="{st}"}}', "value": n}
                         for st, n in (("active", 0), ("inadmissible", 2))]},
        {"eval_time": "10m", "expr": f'{KUEUE_PENDING_BY_TEAM}{{cluster_queue="other"}}', "exp_samples": []},
        one(KUEUE_QUOTA_USED, search, 7), one(KUEUE_QUOTA_NOMINAL, search, 5), one(KUEUE_QUOTA_BORROWED, search, 2),
        one(KUEUE_QUOTA_PENDING, search, 2),
        # All admissions fell between 2.5 and 5 s: the 90th percentile interpolates to 2.5 + 0.9 x 2.5.
        one(KUEUE_WAIT_P90, {"cluster_queue": "search", "namespace": "search-prod"}, 4.75, at="1h"),
    ]


def queue_dashboard_checks() -> list[dict]:
    from gpupools.monitoring.dashboards import queues_dashboard

    stats = {p["title"]: p["targets"][0]["expr"].replace('"$queue"', '".*"') for p in queues_dashboard()["panels"] if p["type"] == "stat"}
    return [
        {"eval_time": "1h", "expr": stats["Workloads waiting now"], "exp_samples": [{"labels": "{}", "value": 2 + 1 + 0 + 1 + 1}]},
        {"eval_time": "1h", "expr": f'round({stats["Longest p90 admission wait"]}, 0.001)', "exp_samples": [{"labels": "{}", "value": 4.75}]},
    ]


@pytest.fixture(scope="module")
def queue_checks_all_pass(tmp_path_factory) -> bool:
    """The three queue tests' checks in one promtool test group: the same rules and input series, evaluated once over
    the longest eval_time (2h) instead of once per test. A check at a time t reads only samples up to t, so each
    check gets the answer its own test's run would. True when every check passed; else each test runs its own
    checks alone, so that the failure is its own."""
    if PROMTOOL is None:
        return False
    tmp_path = tmp_path_factory.mktemp("queues")
    rules = write_rules(tmp_path, Idle(), strip_annotations=True, queues=QUEUES)
    path = tmp_path / "rules.test.yaml"
    test = {"interval": "1m", "input_series": queue_inputs(), "alert_rule_test": queue_alert_checks(),
            "promql_expr_test": queue_recording_checks() + queue_dashboard_checks()}
    path.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": [test]}, sort_keys=False))
    return promtool("test", "rules", str(path)).returncode == 0


def run_queue_test(tmp_path, all_pass: bool, test: dict) -> None:
    if not all_pass:
        run_promtool_test(tmp_path, write_rules(tmp_path, Idle(), strip_annotations=True, queues=QUEUES), test)


@needs_promtool
def test_queue_alerts_fire_for_the_team_and_carry_its_namespace(tmp_path, queue_checks_all_pass):
    """A queue that waits with none of its quota in use and admits nothing is blocked after 30 minutes; one that waits
    behind its own running work and admits nothing waits after an hour. Both carry the team's namespace, not the
    controller's. A queue that admits, or waits on the follower's word only, or is no team's, stays quiet."""
    run_queue_test(tmp_path, queue_checks_all_pass, {"interval": "1m", "input_series": queue_inputs(), "alert_rule_test": queue_alert_checks()})


@needs_promtool
def test_queue_recording_rules_count_the_leader_once(tmp_path, queue_checks_all_pass):
    """Per team and resource: quota used, nominal and borrowed (per flavor: unused a10g quota does not offset l4
    borrowing), what waiting work asks for, and the p90 admission wait, none doubled or skewed by the follower."""
    run_queue_test(tmp_path, queue_checks_all_pass, {"interval": "1m", "input_series": queue_inputs(), "promql_expr_test": queue_recording_checks()})


@needs_promtool
def test_queue_dashboard_queries_on_kueue_series(tmp_path, queue_checks_all_pass):
    """The queue dashboard's stats, with every team selected: the teams' waiting workloads (the other queue's five
    not among them) and the longest p90 wait."""
    run_queue_test(tmp_path, queue_checks_all_pass, {"interval": "1m", "input_series": queue_inputs(), "promql_expr_test": queue_dashboard_checks()})


def test_queue_rules_only_with_kueue_teams():
    """Kueue's groups come with teams on Kueue quotas; ResourceQuota teams, and stacks without teams, have no queues."""
    from gpupools.monitoring.rules import rules_for
    from gpupools.validation.stack import validate_stack

    from conftest import stack_config

    teams = [{"name": "research", "gpus": 1}, {"name": "search", "namespace": "search-prod", "gpus": 1}]

    def groups(**keys) -> dict:
        return {g["name"]: g for g in rules_for(validate_stack(stack_config("aws", **keys)))}

    kueue = groups(teams=teams)["gpupools-kueue"]
    info = [r["labels"] for r in kueue["rules"] if r.get("record") == "gpupools:kueue_team_queue:info"]
    assert info == [{"cluster_queue": "research", "namespace": "research"}, {"cluster_queue": "search", "namespace": "search-prod"}]
    assert "gpupools-kueue" not in groups(teams=teams, quotas="resourcequota")
    assert "gpupools-kueue" not in groups()


# --------------------------------------------------------------------------------------------------------------------
# Reserved capacity left unused


@needs_promtool
def test_unused_reservation_alert_fires_after_hours_and_not_while_nodes_run(tmp_path):
    """Pool h100 holds 2 reserved nodes. For 3h it runs none: the alert fires with the 2 unused. Pool a100 runs its one
    reserved node: quiet. Once h100 runs one node, one reserved node is still unused; with both, quiet."""
    from gpupools.monitoring.promql import RESERVED_NODES
    from gpupools.monitoring.rules import RESERVATION_UNUSED_ALERT

    rules = write_rules_with_reservations(tmp_path, {"h100": (2, 55.04), "a100": (1, 32.77)})
    test = {"interval": "1m", "input_series": [
        {"series": node_labels("ip-10-0-9-1", "a100", "A100-40GB"), "values": "1x600"},
        # h100: no node for 4h, then one node from 4h to 8h, then two.
        {"series": node_labels("ip-10-0-9-2", "h100", "H100-80GB"), "values": "_x240 1x480"},
        {"series": node_labels("ip-10-0-9-3", "h100", "H100-80GB"), "values": "_x480 1x240"},
    ], "promql_expr_test": [
        {"expr": RESERVED_NODES, "eval_time": "1m",
         "exp_samples": [{"labels": f'{RESERVED_NODES}{{pool="a100"}}', "value": 1}, {"labels": f'{RESERVED_NODES}{{pool="h100"}}', "value": 2}]},
    ], "alert_rule_test": [
        {"eval_time": "2h59m", "alertname": RESERVATION_UNUSED_ALERT, "exp_alerts": []},
        {"eval_time": "3h1m", "alertname": RESERVATION_UNUSED_ALERT, "exp_alerts": [{"exp_labels": {"pool": "h100", "severity": "warning"}}]},
        # One node running since 4h: one reserved node unused, but the condition held throughout, so it keeps firing.
        {"eval_time": "7h", "alertname": RESERVATION_UNUSED_ALERT, "exp_alerts": [{"exp_labels": {"pool": "h100", "severity": "warning"}}]},
        {"eval_time": "9h", "alertname": RESERVATION_UNUSED_ALERT, "exp_alerts": []},
    ]}
    run_promtool_test(tmp_path, rules, test)


def write_rules_with_reservations(tmp_path, reserved: dict[str, int]):
    groups = rule_groups(Idle(), PRICES, None, None, reserved)
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    path = tmp_path / "gpupools-gpu.rules.yaml"
    path.write_text(rules_file_text(groups))
    return path


def test_reservation_rules_only_for_stacks_with_reservations():
    from conftest import ROOT
    from gpupools.monitoring.rules import reserved_nodes_by_pool, rules_for
    from gpupools.stack.reading import read_document
    from gpupools.validation.stack import validate_stack

    stack = validate_stack(read_document(ROOT / "stacks" / "Pulumi.dev-aws-reserved.yaml")["config"])
    assert reserved_nodes_by_pool(stack) == {"h100": (1, 55.04)}
    assert "gpupools-reservations" in [g["name"] for g in rules_for(stack)]
    gcp = validate_stack(read_document(ROOT / "stacks" / "Pulumi.dev-gcp.yaml")["config"])
    assert set(reserved_nodes_by_pool(gcp)) == {"pretrain"} and "gpupools-reservations" in [g["name"] for g in rules_for(gcp)]
    azure = validate_stack(read_document(ROOT / "stacks" / "Pulumi.dev-azure.yaml")["config"])
    assert reserved_nodes_by_pool(azure) == {} and "gpupools-reservations" not in [g["name"] for g in rules_for(azure)]


@needs_promtool
def test_idle_report_reads_unused_reserved_nodes_as_averages(tmp_path):
    """The idle report's question, evaluated by promtool on the recorded reservation series: h100 holds 2 reserved
    nodes and runs none for the first hour of two, one in the second: 1.5 unused on average (to the tenth: the
    window's points at both ends count); a100 runs its one node."""
    from gpupools.idle.reserved import reserved_question
    from gpupools.monitoring.promql import RESERVED_NODE_PRICE

    rules = write_rules_with_reservations(tmp_path, {"h100": (2, 55.04), "a100": (1, 32.77)})
    test = {"interval": "1m", "input_series": [
        {"series": node_labels("ip-10-0-9-1", "a100", "A100-40GB"), "values": "1x200"},
        {"series": node_labels("ip-10-0-9-2", "h100", "H100-80GB"), "values": "_x60 1x140"},
    ], "promql_expr_test": [
        {"expr": f"round({reserved_question(7200)} * 10) / 10", "eval_time": "2h",
         "exp_samples": [{"labels": '{pool="h100"}', "value": 1.5}, {"labels": '{pool="a100"}', "value": 0}]},
        # Restricted to the pools the report knows have reservations: the same answer...
        {"expr": f"round({reserved_question(7200, ['a100', 'h100'])} * 10) / 10", "eval_time": "2h",
         "exp_samples": [{"labels": '{pool="h100"}', "value": 1.5}, {"labels": '{pool="a100"}', "value": 0}]},
        # ...and a pool left out has none of its nodes counted.
        {"expr": f"round({reserved_question(7200, ['h100'])} * 10) / 10", "eval_time": "2h",
         "exp_samples": [{"labels": '{pool="h100"}', "value": 1.5}, {"labels": '{pool="a100"}', "value": 1}]},
        {"expr": f"last_over_time({RESERVED_NODE_PRICE}[2h])", "eval_time": "2h",
         # Prometheus 2.x keeps the metric name through last_over_time.
         "exp_samples": [{"labels": f'{RESERVED_NODE_PRICE}{{pool="a100"}}', "value": 32.77},
                         {"labels": f'{RESERVED_NODE_PRICE}{{pool="h100"}}', "value": 55.04}]},
    ]}
    run_promtool_test(tmp_path, rules, test)
