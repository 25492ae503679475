"""vGPU sharing with HAMi: values and names against the pinned chart, where it runs and where it is refused, the Job
it prints, what autoscalers are told, in-place mode changes, monitoring and policies."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml
from typer.testing import CliRunner

from conftest import POOL_RESOURCE, has_path, needs_reference, plan_of, service_monitor_schema, stack_config, value_paths
from gpupools.monitoring import plan as monitoring
from gpupools.cli.main import app
from gpupools.stack.config import Idle
from gpupools.monitoring.dashboards import namespace_dashboard
from gpupools.stack.errors import ConfigError
from gpupools.pools.planning import plan_pools
from gpupools.monitoring.prices import gpu_list_prices
from gpupools.monitoring.rules import rule_groups, rules_file_text
from gpupools.autoscaling.scaleup import scale_ups
from gpupools.core.sharing import (
    DEPLOY_DEVICE_PLUGIN_LABEL,
    DEVICE_PLUGIN_CONFIG_LABEL,
    HAMI_NODE_SELECTOR,
    HAMI_SCHEDULER,
    VGPU_CORES_RESOURCE,
    VGPU_MEMORY_PERCENT_RESOURCE,
    VGPU_MEMORY_RESOURCE,
)
from gpupools.pools.software import HAMI_CHART, software_plan
from gpupools.validation.stack import validate_stack
from gpupools.landing.jobs import job_manifest
from test_inplace import pool_inputs, without_labels
from test_policies import RELEASE, eks_node_group, helm_release, resource_violations, stack_violations

INSTANCE = {"aws": "g5.12xlarge", "azure": "Standard_NC8as_T4_v3", "gcp": "g2-standard-8"}
VGPU = {"mode": "vgpu", "replicas": 4}
# Where HAMi runs: per cloud, the installers (and autoscalers) that plan with a vgpu pool.
SUPPORTED = [
    ("aws", {}),  # GPU Operator (driver and toolkit from the AL2023 NVIDIA AMI), Karpenter
    ("aws", {"autoscaler": "cluster-autoscaler"}),
    ("aws", {"gpuSoftware": {"installer": "device-plugin"}}),
    ("azure", {}),  # GPU Operator installs driver and toolkit
    ("azure", {"gpuSoftware": {"installer": "device-plugin"}}),  # AKS installs the driver and NVIDIA's runtime
    ("gcp", {"gpuSoftware": {"installer": "gpu-operator"}}),  # Ubuntu nodes, operator driver and toolkit
]


def vgpu_stack(cloud: str, sharing: dict | None = None, **keys) -> dict:
    pools = [{"name": "infer", "instanceType": INSTANCE[cloud], "maxNodes": 3, "sharing": sharing or VGPU},
             {"name": "batch", "instanceType": INSTANCE[cloud], "maxNodes": 2, "sharing": {"mode": "time-slicing", "replicas": 2}}]
    return stack_config(cloud, pools=pools, **keys)


def hami_release(config: dict):
    stack = validate_stack(config)
    plans = plan_pools(stack)
    return stack, plans, next(r for r in software_plan(stack, plans).releases if r.chart == HAMI_CHART)


def upstream_values() -> dict:
    return yaml.safe_load((needs_reference() / "hami" / "values.yaml").read_text())


# --------------------------------------------------------------------------------------------------------------------
# The pinned chart


@pytest.mark.parametrize("cloud, keys", SUPPORTED)
def test_every_hami_value_we_set_exists_in_the_pinned_chart(cloud, keys):
    _, _, release = hami_release(vgpu_stack(cloud, **keys))
    missing = [".".join(p) for p in value_paths(release.values) if not has_path(upstream_values(), p)]
    assert missing == []
    assert release.values["devicePlugin"]["deviceSplitCount"] == 4


def test_the_key_check_catches_a_misspelt_key():
    assert not has_path(upstream_values(), ("devicePlugin", "deviceSplitCounts"))


def test_names_and_labels_are_the_charts_own():
    values, ref = upstream_values(), needs_reference()
    assert values["devicePlugin"]["nvidiaNodeSelector"] == HAMI_NODE_SELECTOR
    assert values["schedulerName"] == HAMI_SCHEDULER
    assert (values["resourceName"], values["resourceMem"], values["resourceMemPercentage"], values["resourceCores"]) == (
        "nvidia.com/gpu", VGPU_MEMORY_RESOURCE, VGPU_MEMORY_PERCENT_RESOURCE, VGPU_CORES_RESOURCE)
    assert yaml.safe_load((ref / "hami" / "Chart.yaml").read_text())["version"] == HAMI_CHART.default_version
    # HAMi's own examples ask for memory and compute in container limits, as the Job does.
    example = yaml.safe_load((ref / "hami" / "use_memory_fraction.yaml").read_text())
    assert {VGPU_MEMORY_PERCENT_RESOURCE, VGPU_CORES_RESOURCE} <= set(example["spec"]["containers"][0]["resources"]["limits"])


def test_only_vgpu_pools_get_hamis_labels_and_the_webhook_only_their_pods():
    stack, plans, release = hami_release(vgpu_stack("aws"))
    infer, batch = plans
    assert {k: infer.labels[k] for k in HAMI_NODE_SELECTOR} == HAMI_NODE_SELECTOR
    assert infer.labels[DEPLOY_DEVICE_PLUGIN_LABEL] == "false" and DEVICE_PLUGIN_CONFIG_LABEL not in infer.labels
    assert not set(HAMI_NODE_SELECTOR) & set(batch.labels) and DEPLOY_DEVICE_PLUGIN_LABEL not in batch.labels
    webhook = release.values["scheduler"]["admissionWebhook"]
    assert webhook["objectSelector"]["matchExpressions"] == [{"key": "gpupools.io/pool", "operator": "In", "values": ["infer"]}]
    operator = next(r for r in software_plan(stack, plans).releases if r.name == "gpu-operator")
    assert "vgpu" not in operator.values["devicePlugin"]["config"]["name"]  # the operator's config has no entry for HAMi pools


def test_standalone_device_plugin_stays_off_vgpu_nodes():
    stack, plans, _ = hami_release(vgpu_stack("aws", gpuSoftware={"installer": "device-plugin"}))
    plugin = next(r for r in software_plan(stack, plans).releases if r.name == "nvidia-device-plugin")
    terms = plugin.values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": DEPLOY_DEVICE_PLUGIN_LABEL, "operator": "NotIn", "values": ["false"]} in terms[0]["matchExpressions"]
    assert sorted(plugin.values["config"]["map"]) == ["no-sharing", "time-slicing-2"]


def test_per_cloud_details():
    _, _, aks = hami_release(vgpu_stack("azure"))
    assert aks.values["scheduler"]["admissionWebhook"]["manageNamespaceSelector"] is False
    assert aks.values["devicePlugin"]["gpuOperatorToolkitReady"] == {"enabled": True}
    _, _, eks = hami_release(vgpu_stack("aws"))
    assert "gpuOperatorToolkitReady" not in eks.values["devicePlugin"]  # the AMI brings the toolkit
    from gpupools.clouds import gcp

    stack, plans, _ = hami_release(vgpu_stack("gcp", gpuSoftware={"installer": "gpu-operator"}))
    labels = gcp.node_pool_args(plans[0], "gpu-operator", "c", "us-central1", "p", None)["node_config"]["labels"]
    assert labels[gcp.NO_DEFAULT_DEVICE_PLUGIN_LABEL] == "true" and labels["gpu"] == "on"


# --------------------------------------------------------------------------------------------------------------------
# Plans and rendered objects on every cloud where HAMi runs


@pytest.mark.parametrize("cloud, keys", SUPPORTED)
def test_vgpu_stack_plans_and_renders_valid_objects(tmp_path, stack_file, cloud, keys):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    path = stack_file(vgpu_stack(cloud, **keys))
    runner = CliRunner()
    planned = runner.invoke(app, ["plan", "--config", str(path)])
    assert planned.exit_code == 0, planned.stderr
    per_node = plan_pools(validate_stack(vgpu_stack(cloud, **keys)))[0].units_per_node
    assert "HAMi vGPU x4" in planned.stdout and f"({per_node} vGPUs)" in planned.stdout
    assert "per vGPU" in planned.stdout and "helm release hami: chart hami 2.10.0" in planned.stdout
    rendered = runner.invoke(app, ["render", "--config", str(path), "--out", str(tmp_path / "out")])
    assert rendered.exit_code == 0, rendered.stderr
    assert (tmp_path / "out" / "hami.values.yaml").exists()
    for manifest in (tmp_path / "out" / "manifests").glob("*.yaml"):
        obj = yaml.safe_load(manifest.read_text())
        if not obj["apiVersion"].startswith(("monitoring.coreos.com", "karpenter.")):
            kubernetes_validate.validate(obj, "1.33", strict=True)
    job = runner.invoke(app, ["workload", "--config", str(path), "--pool", "infer", "--gpu-memory", "8Gi", "--gpu-cores", "30"])
    assert job.exit_code == 0, job.stderr
    kubernetes_validate.validate(yaml.safe_load(job.stdout), "1.33", strict=True)


def test_plan_shows_vgpus_per_node_and_price_per_vgpu():
    stack = validate_stack(vgpu_stack("aws"))
    infer = plan_pools(stack)[0]
    assert infer.units_per_node == 4 * 4  # g5.12xlarge: 4 A10G, 4 vGPUs each
    assert infer.price_per_unit == pytest.approx(infer.hardware.price_per_node / 16)


# --------------------------------------------------------------------------------------------------------------------
# The Job


def test_job_requests_one_vgpu_with_memory_and_compute_from_hamis_scheduler():
    stack = validate_stack(vgpu_stack("aws"))
    infer = plan_pools(stack)[0]
    spec = job_manifest(stack, infer, "img", gpu_memory="8Gi", gpu_cores=30)["spec"]["template"]["spec"]
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1, VGPU_MEMORY_RESOURCE: 8192, VGPU_CORES_RESOURCE: 30}
    assert spec["schedulerName"] == HAMI_SCHEDULER
    assert spec["nodeSelector"] == {"gpupools.io/pool": "infer"}
    share = job_manifest(stack, infer, "img", gpu_memory="25%")["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert share == {"nvidia.com/gpu": 1, VGPU_MEMORY_PERCENT_RESOURCE: 25}
    batch = job_manifest(stack, plan_pools(stack)[1], "img")["spec"]["template"]["spec"]
    assert "schedulerName" not in batch and batch["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}


def test_memory_per_pod_is_the_jobs_default():
    stack = validate_stack(vgpu_stack("aws", {**VGPU, "memoryPerPod": "6Gi"}, autoscaler="cluster-autoscaler"))
    limits = job_manifest(stack, plan_pools(stack)[0], "img")["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits[VGPU_MEMORY_RESOURCE] == 6144


# --------------------------------------------------------------------------------------------------------------------
# Bad input: one line naming the field, exit 2


BAD = [
    ("bottlerocket", stack_config("aws", pools=[{"name": "v", "instanceType": "g5.2xlarge", "os": "bottlerocket", "maxNodes": 2, "sharing": VGPU}]),
     "error: pools[0].sharing.mode: 'vgpu' cannot run on os: bottlerocket"),
    ("GKE's own installer", stack_config("gcp", pools=[{"name": "v", "instanceType": "g2-standard-8", "maxNodes": 2, "sharing": VGPU}]),
     "error: pools[0].sharing.mode: 'vgpu' cannot run with installer 'cloud' on gcp"),
    ("replicas out of range", vgpu_stack("aws", {"mode": "vgpu", "replicas": 64}), "error: pools[0].sharing.replicas: input should be less than or equal to 48"),
    ("replicas missing", vgpu_stack("aws", {"mode": "vgpu"}), "error: pools[0].sharing.replicas: required with mode 'vgpu'"),
    ("memory share over 100 %", vgpu_stack("aws", {**VGPU, "memoryPerPod": "150%"}), "error: pools[0].sharing.memoryPerPod: 150% is more than a whole GPU"),
    ("memory over the GPU's", vgpu_stack("azure", {**VGPU, "memoryPerPod": "20Gi"}),
     "error: pools[0].sharing.memoryPerPod: 20Gi (20480 MiB) is more than one T4 GPU of Standard_NC8as_T4_v3 offers (16 GB = 16384 MiB)"),
    ("memory spelt wrong", vgpu_stack("aws", {**VGPU, "memoryPerPod": "8GB"}), "error: pools[0].sharing.memoryPerPod: '8GB' is not a GPU memory share"),
    ("scaling out of range", vgpu_stack("aws", {**VGPU, "memoryScaling": 3}), "error: pools[0].sharing.memoryScaling: input should be less than or equal to 2"),
    ("vgpu setting on another mode", vgpu_stack("aws", {"mode": "time-slicing", "replicas": 2, "memoryPerPod": "4Gi"}),
     "error: pools[0].sharing.memoryPerPod: '4Gi' is not allowed with mode 'time-slicing'"),
    ("split counts differ", stack_config("aws", pools=[{"name": "a", "instanceType": "g5.2xlarge", "maxNodes": 2, "sharing": VGPU},
                                                        {"name": "b", "instanceType": "g5.2xlarge", "maxNodes": 2, "sharing": {"mode": "vgpu", "replicas": 8}}]),
     "error: pools[1].sharing.replicas: 8 differs from pools[0].sharing.replicas (4): HAMi's deviceSplitCount is one setting"),
    ("HAMi's node label", stack_config("aws", pools=[{"name": "a", "instanceType": "g5.2xlarge", "maxNodes": 2, "labels": {"gpu": "on"}}]),
     "error: pools[0].labels.gpu: 'gpu' is the label HAMi's device plugin selects nodes by"),
]


@pytest.mark.parametrize("name, config, expected", BAD, ids=[b[0] for b in BAD])
def test_bad_vgpu_input_is_one_line_naming_the_field(stack_file, name, config, expected):
    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    assert any(str(p).startswith(expected) for p in exc.value.problems), exc.value
    result = CliRunner().invoke(app, ["plan", "--config", str(stack_file(config))])
    assert result.exit_code == 2
    assert all(line.startswith("error: ") for line in result.stderr.splitlines()) and "Traceback" not in result.stderr


@pytest.mark.parametrize("args, expected", [
    (["--gpu-memory", "30Gi"], "error: --gpu-memory: 30Gi (30720 MiB) is more than one A10G GPU of g5.12xlarge offers (22888 MiB usable = 22888 MiB)"),
    (["--gpu-memory", "101%"], "error: --gpu-memory: 101% is more than a whole GPU"),
    (["--gpu-memory", "lots"], "error: --gpu-memory: 'lots' is not a GPU memory share"),
    (["--gpu-cores", "150"], "error: --gpu-cores: 150 is not a compute share; use 1 to 100"),
    (["--units", "5"], "error: --units: 5 exceeds what one node of pool 'infer' offers (4 physical GPUs"),
    (["--pool", "batch", "--gpu-memory", "4Gi"], "error: --gpu-memory: applies to vgpu pools only"),
])
def test_bad_workload_requests_are_one_line(stack_file, args, expected):
    path = stack_file(vgpu_stack("aws"))
    pool = [] if "--pool" in args else ["--pool", "infer"]
    result = CliRunner().invoke(app, ["workload", "--config", str(path), *pool, *args])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [result.stderr.splitlines()[0]] and result.stderr.startswith(expected), result.stderr


def test_memory_scaling_lets_a_request_exceed_the_physical_memory(stack_file):
    path = stack_file(vgpu_stack("aws", {**VGPU, "memoryScaling": 1.5}))
    result = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "infer", "--gpu-memory", "30Gi"])
    assert result.exit_code == 0, result.stderr


# --------------------------------------------------------------------------------------------------------------------
# Autoscalers


def test_karpenter_overlay_offers_vgpus_only():
    """HAMi's memory and compute resources stay out: a node started for them would never initialize (tests/health)."""
    jsonschema = pytest.importorskip("jsonschema")
    from test_autoscaling import NODE_OVERLAY, crd_schema

    plan = plan_of(vgpu_stack("aws"))
    overlay = plan.get(NODE_OVERLAY, "nodeoverlay-gpupools-infer").inputs
    assert overlay["spec"]["capacity"] == {"nvidia.com/gpu": "16"}
    jsonschema.validate({k: overlay[k] for k in ("apiVersion", "kind", "metadata", "spec")},
                        crd_schema(needs_reference(), "karpenter.sh_nodeoverlays.yaml", "v1alpha1"))


@pytest.mark.parametrize("cloud, keys", SUPPORTED)
def test_vgpu_pools_scale_from_zero(cloud, keys):
    told = cloud == "aws" and keys.get("autoscaler") == "cluster-autoscaler"
    stack = validate_stack(vgpu_stack(cloud, {**VGPU, "memoryPerPod": "4Gi"} if told else VGPU, **keys))
    verdict = scale_ups(stack)[0]
    assert verdict.from_zero, verdict.summary
    named = [n for n in verdict.notes if "name a vGPU memory or compute share" in n]
    # cluster-autoscaler is told about HAMi's resources; Karpenter is not (a node started for them would never
    # initialize), AKS and GKE build nodes from the machine only.
    assert bool(named) == (not told), verdict.notes


def test_cluster_autoscaler_tags_carry_hamis_resources():
    from gpupools.autoscaling.cluster_autoscaler import TAG_PREFIX, asg_tags

    stack = validate_stack(vgpu_stack("aws", autoscaler="cluster-autoscaler"))
    tags = asg_tags(plan_pools(stack)[0])
    assert tags[f"{TAG_PREFIX}resources/nvidia.com/gpu"] == "16"
    assert tags[f"{TAG_PREFIX}resources/{VGPU_CORES_RESOURCE}"] == "400"
    assert tags[f"{TAG_PREFIX}label/gpu"] == "on"


def test_aks_pool_at_zero_whose_job_names_memory_is_refused():
    config = vgpu_stack("azure", {**VGPU, "memoryPerPod": "4Gi"})
    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    (problem,) = exc.value.problems
    assert str(problem).startswith("error: pools[0].minNodes: 0 would leave pool 'infer' stuck at zero nodes: the AKS cluster "
                                   "autoscaler expects no nvidia.com/gpumem")


# --------------------------------------------------------------------------------------------------------------------
# In place: time-slicing <-> vgpu on label-driven clouds


@pytest.mark.parametrize("cloud, keys", [("aws", {"autoscaler": "cluster-autoscaler"}), ("azure", {}), ("gcp", {"gpuSoftware": {"installer": "gpu-operator"}})])
@pytest.mark.parametrize("before, after", [({"mode": "time-slicing", "replicas": 4}, VGPU), (VGPU, {"mode": "time-slicing", "replicas": 4})])
def test_moving_between_time_slicing_and_vgpu_touches_only_labels(cloud, keys, before, after):
    old, _ = pool_inputs(cloud, before, **keys)
    new, _ = pool_inputs(cloud, after, **keys)
    assert without_labels(cloud, old) == without_labels(cloud, new)
    assert old != new


def test_karpenter_moves_only_nodepool_labels_and_overlay():
    def nodepool(sharing):
        plan = plan_of(stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3, "sharing": sharing}]))
        return plan.get("kubernetes:karpenter.sh/v1:NodePool", "nodepool-gpupools-infer").inputs

    old, new = nodepool({"mode": "time-slicing", "replicas": 4}), nodepool(VGPU)
    old_labels, new_labels = old["spec"]["template"].pop("metadata"), new["spec"]["template"].pop("metadata")
    assert old == new and old_labels != new_labels


# --------------------------------------------------------------------------------------------------------------------
# Monitoring


def test_hami_metrics_are_scraped_by_service_monitors_matching_the_charts_services():
    jsonschema = pytest.importorskip("jsonschema")
    ref = needs_reference()
    stack = validate_stack(vgpu_stack("aws"))
    mplan = monitoring.monitoring_plan(stack, plan_pools(stack))
    monitors = [o for o in mplan.objects if o["kind"] == "ServiceMonitor"]
    assert {m["spec"]["endpoints"][0]["port"] for m in monitors} == {"monitorport", "monitor"}
    schema = service_monitor_schema(ref)
    for m in monitors:
        jsonschema.validate(m, schema)
        assert m["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert m["spec"]["namespaceSelector"]["matchNames"] == [HAMI_CHART.namespace]
    # The chart's Services carry app.kubernetes.io/component hami-device-plugin / hami-scheduler and name these ports.
    components = {m["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] for m in monitors}
    assert components == {"hami-device-plugin", "hami-scheduler"}
    no_vgpu = validate_stack(stack_config("aws"))
    assert not [o for o in monitoring.monitoring_plan(no_vgpu, plan_pools(no_vgpu)).objects if o["kind"] == "ServiceMonitor"]


def test_namespace_dashboard_gets_vgpu_panels_from_recorded_series():
    board = namespace_dashboard(vgpu=True)
    recorded = {r["record"] for g in rule_groups(Idle(), gpu_list_prices(), {"infer": 4}) for r in g["rules"] if "record" in r}
    vgpu_panels = [p for p in board["panels"] if "HAMi" in p["title"]]
    assert len(vgpu_panels) == 2
    for panel in vgpu_panels:
        for target in panel["targets"]:
            assert set(re.findall(r"\bgpupools:[a-z_:]+", target["expr"])) <= recorded
    assert not [p for p in namespace_dashboard()["panels"] if "HAMi" in p["title"]]


PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian/Ubuntu: apt-get install prometheus)")
def test_a_vgpu_costs_its_share_of_the_gpu_and_hami_use_is_recorded_per_namespace(tmp_path):
    from test_rules import A10G, PRICES, node_labels, series

    groups = rule_groups(Idle(), PRICES, {"infer": 4})
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "r.yaml").write_text(rules_file_text(groups))
    hami = 'hami_vgpu_memory_used_bytes{{namespace="{ns}",pod="{pod}",container="main",vdevice_index="0",device_uuid="GPU-x"}}'
    limit = hami.replace("used", "limit")
    test = {
        "interval": "1m",
        "input_series": [
            {"series": node_labels("node-v", "infer", "A10G"), "values": "1x30"},
            {"series": node_labels("node-t", "batch", "A10G"), "values": "1x30"},
            # Two vGPU pods on one A10G of a vgpu pool (4 per GPU), two time-sliced pods on one of another pool.
            {"series": series("DCGM_FI_DEV_GPU_UTIL", "node-v", 0, A10G, ("team-v", "a")), "values": "10x30"},
            {"series": series("DCGM_FI_DEV_GPU_UTIL", "node-v", 0, A10G, ("team-v", "b")), "values": "10x30"},
            {"series": series("DCGM_FI_DEV_GPU_UTIL", "node-t", 0, A10G, ("team-t", "a")), "values": "10x30"},
            {"series": series("DCGM_FI_DEV_GPU_UTIL", "node-t", 0, A10G, ("team-t", "b")), "values": "10x30"},
            {"series": hami.format(ns="team-v", pod="a"), "values": "1000x30"},
            {"series": hami.format(ns="team-v", pod="b"), "values": "3000x30"},
            {"series": limit.format(ns="team-v", pod="a"), "values": "4000x30"},
            {"series": limit.format(ns="team-v", pod="b"), "values": "4000x30"},
        ],
        "promql_expr_test": [
            # A10G at 1 $/h: a vGPU pays a quarter whoever else holds the GPU; time-sliced pods split it between them.
            {"eval_time": "10m", "expr": "gpupools:namespace_gpu_cost_usd_per_hour:sum",
             "exp_samples": [{"labels": 'gpupools:namespace_gpu_cost_usd_per_hour:sum{namespace="team-t"}', "value": 1},
                             {"labels": 'gpupools:namespace_gpu_cost_usd_per_hour:sum{namespace="team-v"}', "value": 0.5}]},
            {"eval_time": "10m", "expr": "gpupools:namespace_vgpu_memory_used:bytes",
             "exp_samples": [{"labels": 'gpupools:namespace_vgpu_memory_used:bytes{namespace="team-v"}', "value": 4000}]},
            {"eval_time": "10m", "expr": 'gpupools:pod_vgpu_memory_used:ratio{pod="b"}',
             "exp_samples": [{"labels": 'gpupools:pod_vgpu_memory_used:ratio{namespace="team-v",pod="b"}', "value": 0.75}]},
        ],
    }
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"rule_files": ["r.yaml"], "evaluation_interval": "1m", "tests": [test]}, sort_keys=False))
    result = subprocess.run([PROMTOOL, "test", "rules", str(tmp_path / "t.yaml")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------------------------------------------------
# Policies


def test_gpu_sharing_sane_checks_hamis_split_count_and_that_hami_is_installed():
    hami = helm_release(chart="hami", name="hami", version="2.10.0", values={"devicePlugin": {"deviceSplitCount": 4}})
    pool = eks_node_group(labels={"gpupools.io/gpu": "A10G", "gpupools.io/pool": "infer", "gpu": "on", DEPLOY_DEVICE_PLUGIN_LABEL: "false"})
    assert stack_violations("gpu-sharing-sane", [(RELEASE, "hami", hami), ("aws:eks/nodeGroup:NodeGroup", "infer", pool)]) == []
    (missing,) = stack_violations("gpu-sharing-sane", [("aws:eks/nodeGroup:NodeGroup", "infer", pool)])
    assert "installs no hami release" in missing
    (split,) = resource_violations("gpu-sharing-sane", RELEASE, {**hami, "values": {"devicePlugin": {"deviceSplitCount": 32}}})
    assert "deviceSplitCount" in split and "32 workloads per GPU" in split
    unset = {**hami, "values": {}}  # the chart's default of 10 is within the default maximum of 16
    assert resource_violations("gpu-sharing-sane", RELEASE, unset) == []
    both = dict(pool, labels={k: v for k, v in pool["labels"].items() if k != DEPLOY_DEVICE_PLUGIN_LABEL})
    assert any("would serve nvidia.com/gpu there too" in m for m in stack_violations(
        "gpu-sharing-sane", [(RELEASE, "hami", hami), ("aws:eks/nodeGroup:NodeGroup", "infer", both)]))


def test_the_planned_vgpu_stack_passes_the_pack():
    from gpupools.cli.policycheck import run_policies

    result = run_policies(plan_of(vgpu_stack("aws", {**VGPU, "memoryPerPod": "8Gi"}, autoscaler="cluster-autoscaler")))
    assert [v for v in result.violations if v.level == "mandatory"] == []


def job(limits: dict) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "c", "image": "i", "resources": {"limits": limits}}]}}}}


def test_gpu_workloads_accepts_hamis_resources_and_bounds_its_shares():
    typ = "kubernetes:batch/v1:Job"
    ok = {"nvidia.com/gpu": 1, VGPU_MEMORY_RESOURCE: 8192, VGPU_MEMORY_PERCENT_RESOURCE: 50, VGPU_CORES_RESOURCE: 30}
    assert resource_violations("gpu-workloads", typ, job(ok)) == []
    (cores,) = resource_violations("gpu-workloads", typ, job({**ok, VGPU_CORES_RESOURCE: 150}))
    assert "share of one GPU in percent, at most 100" in cores
    (memory,) = resource_violations("gpu-workloads", typ, job({**ok, VGPU_MEMORY_RESOURCE: "8Gi"}))
    assert "MiB, as a plain integer" in memory
