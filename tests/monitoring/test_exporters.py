"""One DCGM exporter per GPU pool: the GPU Operator's where its operands run, the standalone dcgm-exporter chart
everywhere else (Bottlerocket pools, GKE's own driver installer, the standalone device plugin), never both."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpupools.core.pools import GPU_TAINT
from gpupools.core.sharing import DEPLOY_OPERANDS_LABEL
from gpupools.monitoring import plan as monitoring
from gpupools.monitoring.plan import OPERATOR_EXPORTER, STANDALONE_EXPORTER, exporter_per_pool
from gpupools.pools.planning import plan_pools
from gpupools.stack.values import read_stack_file
from gpupools.validation.stack import validate_stack

from conftest import ROOT, needs_reference, plan_of, stack_config

RELEASE = "kubernetes:helm.sh/v3:Release"
EXAMPLE_STACKS = sorted((ROOT / "stacks").glob("Pulumi.dev-*.yaml"))
BOTTLEROCKET = {"name": "batch", "instanceType": "g6.xlarge", "os": "bottlerocket", "maxNodes": 2}
AL2023 = {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}


def exporters_of(config: dict) -> dict[str, list[str]]:
    stack = validate_stack(config)
    return exporter_per_pool(stack, plan_pools(stack))


def test_dev_aws_bottlerocket_pool_gets_the_standalone_exporter():
    """dev-aws's batch pool (Bottlerocket, GPU Operator operands off) is exported by the pinned standalone chart,
    selected onto exactly that pool's nodes and scraped like the operator's exporter on the other pools."""
    config = read_stack_file(ROOT / "stacks" / "Pulumi.dev-aws.yaml")
    p = plan_of(config, "dev-aws")
    releases = {r.name: r.inputs for r in p.of_type(RELEASE)}
    exporter = releases["dcgm-exporter"]
    assert (exporter["chart"], exporter["version"], exporter["repositoryOpts"]["repo"], exporter["namespace"]) == (
        "dcgm-exporter", "4.8.2", "https://nvidia.github.io/dcgm-exporter/helm-charts", "gpupools-monitoring")
    values = exporter["values"]
    stack = validate_stack(config)
    plans = {pl.name: pl for pl in plan_pools(stack)}
    assert plans["batch"].labels[DEPLOY_OPERANDS_LABEL] == "false"
    assert {name for name, pl in plans.items() if monitoring.selects(values, pl.labels)} == {"batch"}
    assert monitoring.schedules_on(values["tolerations"], [GPU_TAINT])
    # Scraped by the stack's Prometheus with the operator exporter's label and relabelling, so the recording rules
    # and the idle report see the same namespace/pod/container labels from both.
    operator_monitor = releases["gpu-operator"]["values"]["dcgmExporter"]["serviceMonitor"]
    assert values["serviceMonitor"]["enabled"] is True
    assert values["serviceMonitor"]["additionalLabels"] == operator_monitor["additionalLabels"] == {"release": "kube-prometheus-stack"}
    assert values["serviceMonitor"]["relabelings"] == operator_monitor["relabelings"] == monitoring.SCRAPE_RELABELINGS
    assert values["kubeletPath"] == "/var/lib/kubelet/pod-resources"
    # The chart's securityContext (SYS_ADMIN) is what makes Bottlerocket's NVIDIA hook pass the GPUs in; no GKE paths.
    assert not {"securityContext", "extraHostVolumes", "extraEnv"} & set(values)
    ns = p.get("kubernetes:core/v1:Namespace", "namespace-gpupools-monitoring")
    assert ns.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def helm_binary() -> str:
    for candidate in (ROOT / ".venv" / "bin" / "helm", shutil.which("helm")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    pytest.skip("helm is not installed (./dev test fetches it into .venv/bin)")


def test_the_rendered_chart_runs_on_bottlerocket_nodes_only_and_is_scraped(tmp_path):
    """The pinned chart (tests/charts/dcgm-exporter, 4.8.2) rendered with dev-aws's values: a DaemonSet on the batch
    pool's nodes only, with the kubelet's pod-resources socket, SYS_ADMIN and the node name the series are keyed by,
    and a ServiceMonitor that kube-prometheus-stack selects and that keeps the workload's pod labels."""
    stack = validate_stack(read_stack_file(ROOT / "stacks" / "Pulumi.dev-aws.yaml"))
    plans = plan_pools(stack)
    release = next(r for r in monitoring.monitoring_plan(stack, plans).releases if r.name == STANDALONE_EXPORTER)
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(release.values))
    chart = ROOT / "tests" / "charts" / "dcgm-exporter"
    assert yaml.safe_load((chart / "Chart.yaml").read_text())["version"] == release.version
    out = subprocess.run([helm_binary(), "template", release.name, str(chart), "--namespace", monitoring.NAMESPACE, "-f", str(values)],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    docs = {d["kind"]: d for d in yaml.safe_load_all(out) if d}
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    assert {p.name for p in plans if monitoring.selects(pod, p.labels)} == {"batch"}
    assert monitoring.schedules_on(pod["tolerations"], [GPU_TAINT])
    (container,) = pod["containers"]
    volume = next(v for v in pod["volumes"] if v.get("hostPath", {}).get("path") == "/var/lib/kubelet/pod-resources")
    assert {"name": volume["name"], "readOnly": True, "mountPath": "/var/lib/kubelet/pod-resources"} in container["volumeMounts"]
    assert "SYS_ADMIN" in container["securityContext"]["capabilities"]["add"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"  # dcgm-exporter's Hostname label
    assert env["DCGM_EXPORTER_KUBERNETES"]["value"] == "true" and "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE" not in env  # UUIDs
    monitor = docs["ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["honorLabels"] is False and endpoint["relabelings"] == monitoring.SCRAPE_RELABELINGS
    service = docs["Service"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_the_chart_defaults_the_exporter_relies_on():
    """kubeletPath, the pod-resources mount and SYS_ADMIN are the chart's defaults, left as they are."""
    defaults = yaml.safe_load((needs_reference() / "dcgm-exporter" / "values.yaml").read_text())
    assert defaults["kubeletPath"] == monitoring.KUBELET_POD_RESOURCES
    assert "SYS_ADMIN" in defaults["securityContext"]["capabilities"]["add"]
    assert defaults["serviceMonitor"]["honorLabels"] is False  # hence the labeldrop relabelling


@pytest.mark.parametrize("path", EXAMPLE_STACKS, ids=lambda p: p.stem.removeprefix("Pulumi."))
def test_every_example_stack_has_one_exporter_per_gpu_pool(path: Path):
    exporters = exporters_of(read_stack_file(path))
    assert exporters and all(len(names) == 1 for names in exporters.values()), exporters


@pytest.mark.parametrize("config, expected", [
    # Operator stack with a Bottlerocket pool: the operator's exporter beside the standalone one, never on one pool.
    (stack_config("aws", pools=[AL2023, BOTTLEROCKET]), {"infer": [OPERATOR_EXPORTER], "batch": [STANDALONE_EXPORTER]}),
    # No operator: the standalone chart on every pool, Bottlerocket or not.
    (stack_config("aws", pools=[AL2023, BOTTLEROCKET], gpuSoftware={"installer": "device-plugin"}),
     {"infer": [STANDALONE_EXPORTER], "batch": [STANDALONE_EXPORTER]}),
    # HAMi turns only the operator's device plugin off; its exporter stays.
    (stack_config("aws", pools=[{**AL2023, "sharing": {"mode": "vgpu", "replicas": 4}}]), {"infer": [OPERATOR_EXPORTER]}),
    # GKE: its own driver installer gets the standalone chart, the GPU Operator brings its own exporter.
    (stack_config("gcp"), {"infer": [STANDALONE_EXPORTER]}),
    (stack_config("gcp", gpuSoftware={"installer": "gpu-operator"}), {"infer": [OPERATOR_EXPORTER]}),
    # AKS spot nodes carry a taint of AKS's own, which the operator's DaemonSets tolerate.
    (stack_config("azure", pools=[{"name": "infer", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 3, "spot": True}]),
     {"infer": [OPERATOR_EXPORTER]}),
    (stack_config("azure", gpuSoftware={"installer": "device-plugin"}), {"infer": [STANDALONE_EXPORTER]}),
], ids=["aws-operator-bottlerocket", "aws-device-plugin", "aws-vgpu", "gke-cloud", "gke-operator", "aks-spot", "aks-device-plugin"])
def test_exporter_per_pool(config, expected):
    assert exporters_of(config) == expected


def test_a_pool_with_operands_off_and_no_standalone_exporter_has_none(monkeypatch):
    """Negative: the check names no exporter for a Bottlerocket pool when nothing but the operator exports."""
    config = stack_config("aws", pools=[AL2023, BOTTLEROCKET])
    # With monitoring off gpupools installs no standalone exporter; the operator's still runs where it can.
    off = exporters_of({**config, "gpupools:monitoring": {"enabled": False}})
    assert off == {"infer": [OPERATOR_EXPORTER], "batch": []}
    # As before the fix: the standalone chart only where no GPU Operator is installed.
    monkeypatch.setattr(monitoring, "standalone_exporter_pools",
                        lambda stack, plans: list(plans) if stack.gpu_software.installer == "device-plugin" else [])
    assert exporters_of(config) == {"infer": [OPERATOR_EXPORTER], "batch": []}


def test_a_standalone_exporter_on_every_gpu_node_counts_twice_on_operator_pools():
    """Negative: the standalone chart selecting every gpupools GPU node would double the operator's pools."""
    stack = validate_stack(stack_config("aws", pools=[AL2023, BOTTLEROCKET]))
    plans = plan_pools(stack)
    mplan = copy.deepcopy(monitoring.monitoring_plan(stack, plans))
    release = next(r for r in mplan.releases if r.name == STANDALONE_EXPORTER)
    terms = release.values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    terms[0]["matchExpressions"] = [e for e in terms[0]["matchExpressions"] if e["key"] != DEPLOY_OPERANDS_LABEL]
    assert exporter_per_pool(stack, plans, mplan) == {"infer": [OPERATOR_EXPORTER, STANDALONE_EXPORTER], "batch": [STANDALONE_EXPORTER]}
    # And one that does not tolerate the GPU taint runs nowhere.
    release.values["tolerations"] = []
    assert exporter_per_pool(stack, plans, mplan)["batch"] == []


def test_node_selection_and_tolerations_follow_kubernetes():
    labels = {"gpupools.io/gpu": "L4", DEPLOY_OPERANDS_LABEL: "false"}
    affinity = lambda *exprs: {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}}}}
    assert monitoring.selects(affinity({"key": DEPLOY_OPERANDS_LABEL, "operator": "In", "values": ["false"]}), labels)
    assert not monitoring.selects(affinity({"key": DEPLOY_OPERANDS_LABEL, "operator": "NotIn", "values": ["false"]}), labels)
    assert not monitoring.selects(affinity({"key": "gpu", "operator": "Exists"}), labels)
    assert monitoring.selects({}, labels) and not monitoring.selects({"nodeSelector": {"gpu": "on"}}, labels)
    assert monitoring.tolerates({"operator": "Exists"}, GPU_TAINT)
    assert monitoring.tolerates({"key": GPU_TAINT.key, "operator": "Equal", "value": "present", "effect": "NoSchedule"}, GPU_TAINT)
    assert not monitoring.tolerates({"key": GPU_TAINT.key, "operator": "Exists", "effect": "NoExecute"}, GPU_TAINT)
    assert not monitoring.tolerates({"key": GPU_TAINT.key, "operator": "Equal", "value": "other"}, GPU_TAINT)
    assert not monitoring.operator_exports(labels) and monitoring.operator_exports({"gpupools.io/gpu": "L4"})
    assert not monitoring.operator_exports({monitoring.DEPLOY_DCGM_EXPORTER_LABEL: "false"})
