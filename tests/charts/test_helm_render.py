"""The pinned charts, rendered by helm with the values each stack's plan gives them.

A stack's Helm values are only right if the real chart accepts them and the DaemonSets it renders land where the GPU
pools need them: every GPU DaemonSet must tolerate its pools' taints and select their nodes' labels, and those meant
for some pools only must stay off the others. The GPU Operator's own operands (driver, toolkit, device plugin, GFD,
dcgm-exporter, validator, MIG manager) are not rendered by helm: the operator creates them from the ClusterPolicy at
run time and selects nodes by labels it writes itself, so for them only the ClusterPolicy's tolerations are checked.
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import pkgutil
from dataclasses import dataclass
from typing import Callable

import pytest
import yaml

from conftest import stack_config as base_config
from charts.chartrender import (
    CHARTS,
    chart_dir,
    chart_name,
    chart_version,
    example_stacks,
    kind_of,
    render,
    stack_config,
    stack_plan,
    stack_releases,
)
from charts.gpunodes import PoolNode, cpu_arch, pool_nodes
from charts.placement import daemon_pod_spec, fits, requirement_matches, selects, tolerates, untolerated

# Stacks beside the examples, so that every pinned chart is rendered by some stack: HAMi, MPS and whole GPUs on
# the GPU Operator; the standalone device plugin beside a Bottlerocket pool; InfiniBand (Network Operator) and HAMi
# on AKS spot nodes.
EXTRA_STACKS = {
    "aws-sharing": base_config("aws", pools=[
        {"name": "vgpu", "instanceType": "g5.2xlarge", "maxNodes": 2, "sharing": {"mode": "vgpu", "replicas": 4}},
        {"name": "mps", "instanceType": "g6.xlarge", "maxNodes": 2, "sharing": {"mode": "mps", "replicas": 2}},
        {"name": "whole", "instanceType": "g6.xlarge", "maxNodes": 2}]),
    "aws-device-plugin": base_config("aws", gpuSoftware={"installer": "device-plugin"}, pools=[
        {"name": "ts", "instanceType": "g5.2xlarge", "maxNodes": 2, "sharing": {"mode": "time-slicing", "replicas": 4}},
        {"name": "mps", "instanceType": "g6.xlarge", "maxNodes": 2, "sharing": {"mode": "mps", "replicas": 2}},
        {"name": "br", "instanceType": "g6.xlarge", "maxNodes": 2, "os": "bottlerocket"}]),
    "azure-infiniband": base_config("azure", pools=[
        {"name": "nd", "instanceType": "Standard_ND96isr_H100_v5", "maxNodes": 2, "spot": True},
        {"name": "vgpu", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 2, "spot": True,
         "sharing": {"mode": "vgpu", "replicas": 4}}]),
    # Without the GPU Operator, the Network Operator brings its own NFD.
    "azure-infiniband-device-plugin": base_config("azure", gpuSoftware={"installer": "device-plugin"}, pools=[
        {"name": "nd", "instanceType": "Standard_ND96isr_H100_v5", "maxNodes": 2},
        {"name": "ndspot", "instanceType": "Standard_ND96isr_H100_v5", "maxNodes": 2, "spot": True}]),
    # A mixed MIG layout (B200: slices of three sizes and whole GPUs on one node) beside a single-profile pool: the GPU
    # Operator's chart makes the custom mig-parted ConfigMap.
    "aws-mig-layout": {**base_config("aws", pools=[
        {"name": "mixed", "instanceType": "p6-b200.48xlarge", "maxNodes": 2, "sharing": {"mode": "mig", "migLayout": [
            {"gpus": 4, "profiles": {"1g.23gb": 7}}, {"gpus": 2, "profiles": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}}, {"gpus": 2}]}},
        {"name": "slices", "instanceType": "p4de.24xlarge", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "3g.40gb"}}]),
        "aws:region": "us-east-1"},
}
STACKS = [*example_stacks(), *EXTRA_STACKS]


def config_of(stack: str) -> dict | None:
    return EXTRA_STACKS.get(stack)


def releases_of(stack: str):
    return stack_releases(stack, include_addons=True, config=config_of(stack))


def typed(stack: str):
    return stack_config(stack, config_of(stack))[1]


def nodes_of(stack: str) -> dict[str, PoolNode]:
    return {n.pool: n for n in pool_nodes(typed(stack))}


def release_of(stack: str, chart: str):
    return next(r for r in releases_of(stack) if r.chart == chart)


# ---------------------------------------------------------------------------------------------------------------
# The vendored charts are the pinned ones


def pinned_charts() -> dict[str, str]:
    """Chart name -> the version gpupools pins: every module-level `Chart` in the package."""
    import gpupools
    from gpupools.pools.software import Chart

    pins: dict[str, str] = {}
    for info in pkgutil.walk_packages(gpupools.__path__, "gpupools."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, Chart):
                pins[chart_name(value.chart)] = value.default_version
    return pins


PINS = pinned_charts()


def test_every_pinned_chart_is_found():
    # The walk must see the charts the stacks install; a rename that hid them would leave nothing to compare.
    assert {"gpu-operator", "nvidia-device-plugin", "hami", "dcgm-exporter", "kube-prometheus-stack", "karpenter",
            "cluster-autoscaler", "kueue", "aws-efa-k8s-device-plugin", "network-operator", "node-readiness-controller"} <= set(PINS)


@pytest.mark.parametrize("chart", sorted(PINS))
def test_vendored_chart_is_the_pinned_version(chart):
    assert chart_version(chart_dir(chart)) == PINS[chart], (
        f"gpupools pins {chart} {PINS[chart]}, tests/charts/{chart} is {chart_version(chart_dir(chart))}: vendor the pinned "
        f"chart (tests/charts/SOURCES.md)")


def chart_folders():
    return sorted(p.parent for p in CHARTS.rglob("Chart.yaml"))


def _version_fits(wanted: str, have: str) -> bool:
    wanted, have = str(wanted).lstrip("v"), str(have).lstrip("v")
    return fnmatch.fnmatchcase(have, wanted.replace("x", "*")) if any(c in wanted for c in "*x") else have == wanted


@pytest.mark.parametrize("folder", chart_folders(), ids=lambda p: str(p.relative_to(CHARTS)))
def test_dependencies_are_vendored_at_their_versions(folder):
    meta = yaml.safe_load((folder / "Chart.yaml").read_text())
    subcharts = {}
    for sub in (folder / "charts").glob("*/Chart.yaml"):
        sub_meta = yaml.safe_load(sub.read_text())
        subcharts[sub_meta["name"]] = str(sub_meta["version"])
    locked = {}
    if (folder / "Chart.lock").is_file():
        locked = {d["name"]: str(d["version"]) for d in yaml.safe_load((folder / "Chart.lock").read_text()).get("dependencies") or []}
    for dep in meta.get("dependencies") or []:
        name = dep["name"]
        assert name in subcharts, f"{folder.name} depends on {name}, which is not in its charts/"
        assert _version_fits(dep.get("version", "*"), subcharts[name]), f"{folder.name}: {name} {subcharts[name]} is not {dep.get('version')}"
        if name in locked:
            assert subcharts[name] == locked[name], f"{folder.name}: {name} {subcharts[name]}, Chart.lock says {locked[name]}"


def test_sources_name_every_vendored_chart():
    rows = {line.split("|")[1].strip(): line for line in (CHARTS / "SOURCES.md").read_text().splitlines() if line.startswith("| ")}
    for folder in chart_folders():
        path = str(folder.relative_to(CHARTS))
        parent = path.split("/charts/")[0]
        # A subchart kept in its parent's repository may be named in the parent's row instead of its own.
        assert path in rows or (parent != path and folder.name in rows.get(parent, "")), f"SOURCES.md has no row for {path}"


# ---------------------------------------------------------------------------------------------------------------
# Every stack's charts render with its values


# The charts each stack installs and the workloads it places name the tests below, and only a plan says which they are.
# Planning every stack while the tests are collected made each pytest-xdist worker pay for all the plans, the workers
# that never run this file too; so the names are read from PLANNED_IDS, and the plans are made when a test first needs
# them. test_the_listed_ids_are_those_of_the_plans keeps the list true: a chart or workload a stack gains or loses
# fails it, with the list to write.
PLANNED_IDS_FILE = CHARTS / "planned_ids.json"
PLANNED_IDS: dict[str, dict[str, list[str]]] = json.loads(PLANNED_IDS_FILE.read_text())


def planned_ids() -> dict[str, dict[str, list[str]]]:
    """What PLANNED_IDS must hold: per stack, the charts of its releases in the plan's order, and the NEEDS it applies."""
    return {"releases": {stack: [r.chart for r in releases_of(stack)] for stack in STACKS},
            "placements": {stack: [need.name for need in NEEDS if applies(stack, need)] for stack in STACKS}}


def planned_ids_text(ids: dict[str, dict[str, list[str]]]) -> str:
    """PLANNED_IDS_FILE's text: one line per stack."""
    parts = [f'  {json.dumps(stack)}: {json.dumps(names)}' for _, by_stack in ids.items() for stack, names in by_stack.items()]
    sections, at = [], 0
    for section, by_stack in ids.items():
        sections.append(f' {json.dumps(section)}: {{\n' + ",\n".join(parts[at:at + len(by_stack)]) + "\n }")
        at += len(by_stack)
    return "{\n" + ",\n".join(sections) + "\n}\n"


def stack_chart_params():
    return [pytest.param(stack, chart, id=f"{stack}/{chart}") for stack in STACKS for chart in PLANNED_IDS["releases"].get(stack, [])]


@pytest.mark.parametrize("stack, chart", stack_chart_params())
def test_stack_release_renders_with_its_values(stack, chart):
    release = release_of(stack, chart)
    if release.version is not None:  # EKS picks an add-on's version; Helm releases name theirs
        assert release.version == chart_version(chart_dir(chart)), f"{stack} installs {chart} {release.version}, the vendored chart is another"
    objects = release.render()
    assert objects, f"{chart} rendered nothing"
    assert all(o.get("apiVersion") and o.get("kind") for o in objects)


def test_extra_stacks_cover_every_pinned_chart_a_stack_installs():
    rendered = {r.chart for stack in STACKS for r in releases_of(stack)}
    assert set(PINS) <= rendered, f"no stack here installs {sorted(set(PINS) - rendered)}"
    # NVIDIA's DRA driver is rendered with the values of the example rack stacks themselves.
    assert {s for s in STACKS for r in releases_of(s) if r.chart == "dra-driver-nvidia-gpu"} == {"dev-aws-gb200", "dev-gcp-a4x"}


# ---------------------------------------------------------------------------------------------------------------
# GPU DaemonSets land on the pools that need them


@dataclass(frozen=True)
class Need:
    """A workload that must run on some GPU pools' nodes.

    `pools(stack, nodes)`: the pools it must run on. `only`: and on no other GPU pool (two device plugins or two
    exporters on one node would double-count GPUs). `before_ready`: it is part of making the node ready, so it must
    also tolerate the startup taints. `by_labels`: its node selection can be checked against join-time labels (False
    when it selects by labels software writes later, see gpunodes)."""

    name: str
    chart: str  # release chart, or "gpupools" for the plan's own manifests
    workload: str  # DaemonSet name (or the custom resource's kind)
    pools: Callable[[object, dict[str, PoolNode]], set[str]]
    only: bool = False
    before_ready: bool = False
    by_labels: bool = True
    enabled: Callable[[dict], bool] = lambda values: True  # whether the release's values deploy it at all


def _all(stack, nodes):
    return set(nodes)


def _mechanism(*installers):
    return lambda stack, nodes: {n.pool for n in nodes.values() if n.plan.mechanism.installer in installers}


def _device_plugin_pools(stack, nodes):
    from gpupools.core.sharing import BOTTLEROCKET, HAMI

    return {n.pool for n in nodes.values() if n.plan.mechanism.installer not in (BOTTLEROCKET, HAMI)}


def _mps_pools(stack, nodes):
    return {p for p in _device_plugin_pools(stack, nodes) if nodes[p].plan.mechanism.mode == "mps"}


def _operands_pools(stack, nodes):
    from gpupools.core.sharing import DEPLOY_OPERANDS_LABEL

    return {n.pool for n in nodes.values() if n.labels.get(DEPLOY_OPERANDS_LABEL) != "false"}


def _fabric_pools(*kinds):
    def pools(stack, nodes):
        from gpupools.fabric.plan import plan_fabrics

        return {f.pool for f in plan_fabrics(stack, [n.plan for n in nodes.values()]).values() if f.kind in kinds}
    return pools


def _rack_pools(stack, nodes):
    from gpupools.fabric.computedomain import rack_pools

    return {p.name for p in rack_pools([n.plan for n in nodes.values()])}


def _arch_pools(arch):
    return lambda stack, nodes: {n.pool for n in nodes.values() if n.labels["kubernetes.io/arch"] == arch}


def _standalone_exporter_pools(stack, nodes):
    from gpupools.monitoring.plan import standalone_exporter_pools

    return {p.name for p in standalone_exporter_pools(stack, [n.plan for n in nodes.values()])}


def _gated_pools(stack, nodes):
    return {n.pool for n in nodes.values() if n.startup_taints}


NEEDS = [
    # NFD labels the node's PCI devices; the GPU Operator deploys its operands only where NFD found an NVIDIA GPU.
    Need("nfd-worker", "gpu-operator", "gpu-operator-node-feature-discovery-worker", _all, before_ready=True),
    Need("operator-operands", "gpu-operator", "ClusterPolicy", _operands_pools, before_ready=True, by_labels=False),
    Need("device-plugin", "nvidia-device-plugin", "nvidia-device-plugin", _device_plugin_pools, only=True, before_ready=True),
    Need("gpu-feature-discovery", "nvidia-device-plugin", "nvidia-device-plugin-gpu-feature-discovery", _device_plugin_pools,
         only=True, before_ready=True),
    # Selects `nvidia.com/mps.capable=true`, which the device plugin writes on MPS nodes.
    Need("mps-control-daemon", "nvidia-device-plugin", "nvidia-device-plugin-mps-control-daemon", _mps_pools, before_ready=True,
         by_labels=False),
    Need("hami-device-plugin", "hami", "hami-device-plugin", _mechanism("hami"), only=True, before_ready=True),
    Need("dcgm-exporter", "dcgm-exporter", "dcgm-exporter", _standalone_exporter_pools, only=True),
    Need("efa-device-plugin", "aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin", _fabric_pools("efa"), only=True, before_ready=True),
    Need("nic-cluster-policy", "gpupools", "NicClusterPolicy", _fabric_pools("infiniband"), only=True, before_ready=True),
    # The DOCA driver container needs NFD's kernel and OS labels on the InfiniBand nodes.
    Need("network-operator-nfd-worker", "network-operator", "network-operator-node-feature-discovery-worker", _fabric_pools("infiniband"),
         before_ready=True, enabled=lambda values: values.get("nfd", {}).get("enabled", True)),
    Need("readiness-reporter", "gpupools", "gpupools-gpu-ready-reporter", _gated_pools, only=True, before_ready=True),
    # GKE GPUDirect: Google's NCCL plugin installers and the NRI device injector, on their fabric pools only.
    Need("nccl-tcpx-installer", "gpupools", "nccl-tcpx-installer", _fabric_pools("gpudirect-tcpx"), only=True),
    Need("nccl-tcpxo-installer", "gpupools", "nccl-tcpxo-installer", _fabric_pools("gpudirect-tcpxo"), only=True),
    Need("nccl-rdma-installer", "gpupools", "nccl-rdma-installer", _fabric_pools("gpudirect-rdma"), only=True),
    Need("nri-device-injector", "gpupools", "device-injector", _fabric_pools("gpudirect-tcpx", "gpudirect-tcpxo"), only=True),
    Need("node-monitoring-agent", "eks-node-monitoring-agent", "eks-node-monitoring-agent", _all),
    # The agent's DCGM host engine runs on amd64 nodes only (the chart's own affinity, values.yaml dcgmAgent.affinity), and
    # the agent watches no NVIDIA GPU on arm64 (aws/eks-node-monitoring-agent v1.7.0 monitors/nvidia/monitor.go, Register).
    Need("node-monitoring-dcgm-server", "eks-node-monitoring-agent", "dcgm-server", _arch_pools("amd64")),
    # NVIDIA's DRA driver: its kubelet plugin serves ComputeDomain channels on the rack-scale pools, and only there.
    Need("dra-kubelet-plugin", "dra-driver-nvidia-gpu", "dra-driver-nvidia-gpu-kubelet-plugin", _rack_pools, only=True),
    Need("node-exporter", "kube-prometheus-stack", "kube-prometheus-stack-prometheus-node-exporter", _all,
         enabled=lambda values: values.get("nodeExporter", {}).get("enabled", True)),  # off where the cluster refuses host agents
]


def _plan_object(stack: str, kind: str, name: str | None = None) -> dict | None:
    for r in stack_plan(stack, config_of(stack)).resources:
        if r.inputs.get("kind") == kind and (name is None or r.inputs.get("metadata", {}).get("name") == name):
            return r.inputs
    return None


def applies(stack: str, need: Need) -> bool:
    if need.chart == "gpupools":
        kind, name = (need.workload, None) if need.workload == "NicClusterPolicy" else ("DaemonSet", need.workload)
        return _plan_object(stack, kind, name) is not None
    return any(r.chart == need.chart and need.enabled(r.values) for r in releases_of(stack))


def pod_spec_of(stack: str, need: Need) -> dict:
    """The pod spec the workload's pods get, as far as placement goes."""
    if need.workload == "NicClusterPolicy":
        spec = _plan_object(stack, "NicClusterPolicy")["spec"]
        return {"affinity": {"nodeAffinity": spec.get("nodeAffinity")}, "tolerations": spec.get("tolerations")}
    if need.workload == "ClusterPolicy":
        policies = kind_of(release_of(stack, need.chart).render(), "ClusterPolicy")
        assert len(policies) == 1, f"{stack}: the gpu-operator chart rendered {len(policies)} ClusterPolicies"
        return {"tolerations": policies[0]["spec"]["daemonsets"].get("tolerations")}
    if need.chart == "gpupools":
        return daemon_pod_spec(_plan_object(stack, "DaemonSet", need.workload))
    rendered = {d["metadata"]["name"]: d for d in kind_of(release_of(stack, need.chart).render(), "DaemonSet")}
    assert need.workload in rendered, f"{stack}: {need.chart} rendered no DaemonSet {need.workload} (it has {sorted(rendered)})"
    return daemon_pod_spec(rendered[need.workload])


def placement_problems(stack: str, need: Need, spec: dict, nodes: dict[str, PoolNode]) -> list[str]:
    problems = []
    wanted = need.pools(typed(stack), nodes)
    for pool, node in sorted(nodes.items()):
        taints = node.joining_taints if need.before_ready else node.taints
        if pool in wanted:
            reasons = fits(spec, node.labels, taints) if need.by_labels else [
                f"taint {k}={v}:{e} not tolerated" for k, v, e in untolerated(spec.get("tolerations"), taints)]
            problems += [f"{need.workload} does not run on pool {pool!r} of {stack}: {reason}" for reason in reasons]
        elif need.only and not fits(spec, node.labels, node.taints):
            problems.append(f"{need.workload} also runs on pool {pool!r} of {stack}, which it must leave alone")
    return problems


# Placements that do not hold yet, each a defect in the values gpupools gives the chart. Strict: once fixed, the
# test passes and the entry must go.
KNOWN_DEFECTS: dict[tuple[str, str], str] = {}


def placement_params():
    needs = {need.name: need for need in NEEDS}
    return [pytest.param(stack, needs[name], id=f"{stack}/{name}",
                         marks=[pytest.mark.xfail(strict=True, reason=KNOWN_DEFECTS[stack, name])] if (stack, name) in KNOWN_DEFECTS else [])
            for stack in STACKS for name in PLANNED_IDS["placements"].get(stack, []) if name in needs]


def test_the_listed_ids_are_those_of_the_plans():
    planned = planned_ids()
    assert PLANNED_IDS == planned, (f"the stacks' plans install other charts or place other workloads than {PLANNED_IDS_FILE.name} "
                                    f"lists; write this to {PLANNED_IDS_FILE}:\n{planned_ids_text(planned)}")


@pytest.mark.parametrize("stack, need", placement_params())
def test_gpu_workload_lands_on_the_pools_that_need_it(stack, need):
    nodes = nodes_of(stack)
    assert need.pools(typed(stack), nodes) or not need.only, f"{need.name} is installed in {stack} but no pool needs it"
    problems = placement_problems(stack, need, pod_spec_of(stack, need), nodes)
    assert not problems, "\n".join(problems)


NFD_WORKER = "node-feature-discovery-worker"
TWO_NFDS: dict[str, str] = {}


@pytest.mark.parametrize("stack", [pytest.param(s, marks=[pytest.mark.xfail(strict=True, reason=TWO_NFDS[s])] if s in TWO_NFDS else [])
                                   for s in STACKS])
def test_one_node_feature_discovery_per_cluster(stack):
    # Two NFD masters would label the same nodes from two sets of workers, each removing what it did not find.
    workers = [f"{r.chart}: {d['metadata']['name']}" for r in releases_of(stack) for d in kind_of(r.render(), "DaemonSet")
               if d["metadata"]["name"].endswith(NFD_WORKER)]
    assert len(workers) <= 1, workers


def test_node_monitoring_dcgm_server_covers_every_catalog_gpu_instance_type():
    # The agent's DCGM host engine selects NVIDIA instance types by name; a GPU instance type gpupools offers on EKS
    # but missing from that list would get no GPU health conditions, hence no node repair.
    from gpupools.clouds.aws import NODE_MONITORING_AGENT_VALUES
    from gpupools.core.catalog import load_catalog

    spec = next(daemon_pod_spec(d) for d in kind_of(render("eks-node-monitoring-agent", NODE_MONITORING_AGENT_VALUES,
                                                           "eks-node-monitoring-agent", "kube-system"), "DaemonSet")
                if d["metadata"]["name"] == "dcgm-server")
    missing, arm = {}, set()
    for instance_type in sorted(load_catalog().instances["aws"]):
        labels = {"kubernetes.io/os": "linux", "kubernetes.io/arch": cpu_arch(instance_type), "node.kubernetes.io/instance-type": instance_type}
        reasons = fits(spec, labels, [])
        if labels["kubernetes.io/arch"] == "arm64":
            # amd64 only (the chart's own affinity): the plan says no GPU health reaches repair there
            # (gpupools.clouds.aws.health.ARM64_GPU_HEALTH); if the chart ever takes arm64, that line must go.
            assert reasons, f"dcgm-server now runs on arm64 {instance_type}"
            arm.add(instance_type)
        elif reasons:
            missing[instance_type] = reasons
    assert not missing, missing
    assert "p6e-gb200.36xlarge" in arm


def test_every_gpu_daemonset_a_stack_renders_is_checked():
    # A new GPU DaemonSet in a chart (or a renamed one) must get a Need above, or its placement goes unchecked.
    known = {n.workload for n in NEEDS}
    # Not GPU pools' concern: NFD's and the device plugin's cluster-wide helpers run wherever they like.
    # (GFD reaches NFD's master through NodeFeature objects; the device plugin's own affinity is replaced by gpupools').
    elsewhere = {"nvidia-device-plugin-node-feature-discovery-worker"}
    for stack in STACKS:
        for release in releases_of(stack):
            for ds in kind_of(release.render(), "DaemonSet"):
                assert ds["metadata"]["name"] in known | elsewhere, f"{stack}: {release.chart} renders DaemonSet {ds['metadata']['name']}"
        for resource in stack_plan(stack, config_of(stack)).resources:
            if resource.inputs.get("kind") == "DaemonSet":
                assert resource.inputs["metadata"]["name"] in known, f"{stack}: gpupools creates DaemonSet {resource.inputs['metadata']['name']}"


# ---------------------------------------------------------------------------------------------------------------
# The checks can fail: values without a toleration or with another selector are caught


def _drop(tolerations: list[dict], key: str) -> list[dict]:
    kept = [t for t in tolerations if t.get("key") != key]
    assert len(kept) < len(tolerations), f"no toleration for {key} to drop"
    return kept


def _render_daemonset(release, values: dict, name: str) -> dict:
    daemonsets = {d["metadata"]["name"]: d for d in kind_of(render(release.chart, values, release.release, release.namespace), "DaemonSet")}
    return daemon_pod_spec(daemonsets[name])


def test_efa_plugin_without_the_gpu_toleration_is_caught():
    release = release_of("dev-aws", "aws-efa-k8s-device-plugin")
    values = {**release.values, "tolerations": _drop(release.values["tolerations"], "nvidia.com/gpu")}
    spec = _render_daemonset(release, values, "aws-efa-k8s-device-plugin")
    node = nodes_of("dev-aws")["pretrain"]
    assert fits(_render_daemonset(release, release.values, "aws-efa-k8s-device-plugin"), node.labels, node.joining_taints) == []
    assert any("taint nvidia.com/gpu=present:NoSchedule not tolerated" in r for r in fits(spec, node.labels, node.joining_taints))


def test_nfd_worker_without_the_readiness_toleration_is_caught():
    release = release_of("dev-aws", "gpu-operator")
    values = yaml.safe_load(yaml.safe_dump(release.values))
    worker = values["node-feature-discovery"]["worker"]
    worker["tolerations"] = _drop(worker["tolerations"], "readiness.k8s.io/gpupools-gpu-ready")
    spec = _render_daemonset(release, values, "gpu-operator-node-feature-discovery-worker")
    node = nodes_of("dev-aws")["infer"]
    assert fits(spec, node.labels, node.taints) == []  # a running node is fine; a joining one is not
    assert [r for r in fits(spec, node.labels, node.joining_taints) if "readiness.k8s.io/gpupools-gpu-ready" in r]


def test_dcgm_exporter_selecting_another_label_is_caught():
    release = release_of("dev-gcp-dws", "dcgm-exporter")
    values = yaml.safe_load(yaml.safe_dump(release.values))
    term = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    term["matchExpressions"] = [{"key": "gpupools.io/no-such-label", "operator": "Exists"}]
    spec = _render_daemonset(release, values, "dcgm-exporter")
    node = nodes_of("dev-gcp-dws")["h100"]
    assert [r for r in fits(spec, node.labels, node.taints) if "no required node affinity term matches" in r]


def test_dcgm_exporter_without_the_queued_toleration_is_caught():
    release = release_of("dev-gcp-dws", "dcgm-exporter")
    values = {**release.values, "tolerations": _drop(release.values["tolerations"], "cloud.google.com/gke-queued")}
    spec = _render_daemonset(release, values, "dcgm-exporter")
    nodes = nodes_of("dev-gcp-dws")
    assert fits(spec, nodes["infer"].labels, nodes["infer"].taints) == []
    assert [r for r in fits(spec, nodes["h100"].labels, nodes["h100"].taints) if "cloud.google.com/gke-queued" in r]


def test_hami_plugin_on_every_gpu_pool_is_caught():
    stack = "aws-sharing"
    release = release_of(stack, "hami")
    values = yaml.safe_load(yaml.safe_dump(release.values))
    values["devicePlugin"]["nvidiaNodeSelector"] = {"gpu": None}  # null takes a key out of the chart's default map
    spec = _render_daemonset(release, values, "hami-device-plugin")
    need = next(n for n in NEEDS if n.name == "hami-device-plugin")
    problems = placement_problems(stack, need, spec, nodes_of(stack))
    assert sorted(problems) == [f"hami-device-plugin also runs on pool {p!r} of {stack}, which it must leave alone" for p in ("mps", "whole")]


# ---------------------------------------------------------------------------------------------------------------
# The matcher follows Kubernetes


@pytest.mark.parametrize("toleration, taint, expected", [
    ({"operator": "Exists"}, "a=b:NoSchedule", True),  # empty key with Exists: every taint
    ({"operator": "Exists"}, "a=b:NoExecute", True),
    ({"key": "a", "operator": "Exists"}, "a=b:NoExecute", True),  # no effect: every effect
    ({"key": "a", "operator": "Exists", "effect": "NoSchedule"}, "a=b:NoExecute", False),
    ({"key": "a", "operator": "Equal", "value": "b"}, "a=b:NoSchedule", True),
    ({"key": "a", "value": "b"}, "a=b:NoSchedule", True),  # no operator is Equal
    ({"key": "a", "operator": "Equal", "value": "c"}, "a=b:NoSchedule", False),
    ({"key": "a", "operator": "Equal"}, "a=:NoSchedule", True),
    ({"key": "x", "operator": "Exists"}, "a=b:NoSchedule", False),
])
def test_tolerations_follow_kubernetes(toleration, taint, expected):
    assert tolerates(toleration, taint) is expected


def test_prefer_no_schedule_keeps_no_pod_off():
    assert untolerated([], ["a=b:PreferNoSchedule", "c=d:NoSchedule", "e=f:NoExecute"]) == [("c", "d", "NoSchedule"), ("e", "f", "NoExecute")]


@pytest.mark.parametrize("expression, labels, expected", [
    ({"key": "k", "operator": "In", "values": ["a", "b"]}, {"k": "b"}, True),
    ({"key": "k", "operator": "In", "values": ["a"]}, {}, False),
    ({"key": "k", "operator": "NotIn", "values": ["a"]}, {}, True),  # NotIn holds without the label
    ({"key": "k", "operator": "NotIn", "values": ["a"]}, {"k": "a"}, False),
    ({"key": "k", "operator": "Exists"}, {"k": ""}, True),
    ({"key": "k", "operator": "DoesNotExist"}, {"k": ""}, False),
    ({"key": "k", "operator": "Gt", "values": ["4"]}, {"k": "8"}, True),
    ({"key": "k", "operator": "Gt", "values": ["8"]}, {"k": "8"}, False),
    ({"key": "k", "operator": "Lt", "values": ["8"]}, {"k": "4"}, True),
    ({"key": "k", "operator": "Lt", "values": ["8"]}, {"k": "four"}, False),  # not an integer: no match
    ({"key": "k", "operator": "Gt", "values": ["4"]}, {}, False),
])
def test_node_selector_requirements_follow_kubernetes(expression, labels, expected):
    assert requirement_matches(expression, labels) is expected


def test_node_affinity_terms_are_ored_and_expressions_anded():
    def spec(*terms):
        return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}}
    a = {"key": "a", "operator": "Exists"}
    b = {"key": "b", "operator": "Exists"}
    assert selects(spec({"matchExpressions": [a, b]}), {"a": "1"})
    assert not selects(spec({"matchExpressions": [a]}, {"matchExpressions": [b]}), {"a": "1"})
    assert selects(spec({}), {"a": "1"})  # an empty term matches nothing
    assert selects({"nodeSelector": {"a": "2"}}, {"a": "1"})
    assert not selects({"nodeSelector": {"a": "1"}, **spec({"matchExpressions": [a]})}, {"a": "1"})
    assert not selects({}, {})  # nothing asked, every node


@pytest.mark.parametrize("instance_type, arch", [
    ("g5.2xlarge", "amd64"), ("g6e.xlarge", "amd64"), ("gr6.4xlarge", "amd64"), ("g5g.xlarge", "arm64"),
    ("p6e-gb200.36xlarge", "arm64"), ("Standard_ND128isr_NDR_GB200_v6", "arm64"), ("Standard_NC24ads_A100_v4", "amd64"),
    ("a4x-highgpu-4g", "arm64"), ("a3-highgpu-8g", "amd64"),
])
def test_cpu_architecture_of_gpu_instance_types(instance_type, arch):
    assert cpu_arch(instance_type) == arch


# ---------------------------------------------------------------------------------------------------------------
# A mixed MIG layout: the chart makes the ConfigMap the MIG manager reads


def mig_parted_spec_problems(doc) -> list[str]:
    """What NVIDIA/mig-parted v0.15.0 api/spec/v1/spec.go (Spec.UnmarshalJSON, MigConfigSpec.UnmarshalJSON) refuses."""
    if not isinstance(doc, dict) or doc.get("version") != "v1":
        return ["version is not v1"]
    if set(doc) - {"version", "mig-configs"}:
        return [f"unexpected fields {sorted(set(doc) - {'version', 'mig-configs'})}"]
    configs = doc.get("mig-configs") or {}
    problems = [] if configs else ["no mig-configs"]
    for name, entries in configs.items():
        if not entries:
            problems.append(f"{name}: no entries")
        for entry in entries or []:
            if set(entry) - {"device-filter", "devices", "mig-enabled", "mig-devices"} or not {"devices", "mig-enabled"} <= set(entry):
                problems.append(f"{name}: fields {sorted(entry)}")
            devices = entry.get("devices")
            if devices != "all" and not (isinstance(devices, list) and all(isinstance(d, int) for d in devices)):
                problems.append(f"{name}: devices {devices!r}")
            if entry.get("mig-enabled") and entry.get("mig-devices") is None:
                problems.append(f"{name}: mig-enabled without mig-devices")
            if not entry.get("mig-enabled") and entry.get("mig-devices"):
                problems.append(f"{name}: MIG devices with mig-enabled false")
    return problems


def test_mig_layout_config_map_is_rendered_by_the_chart():
    release = release_of("aws-mig-layout", "gpu-operator")
    objects = release.render()
    (policy,) = kind_of(objects, "ClusterPolicy")
    config = policy["spec"]["migManager"]["config"]
    (cm,) = [o for o in kind_of(objects, "ConfigMap") if o["metadata"]["name"] == config["name"]]
    assert cm["metadata"]["namespace"] == release.namespace
    assert config["default"] == "all-disabled"
    doc = yaml.safe_load(cm["data"]["config.yaml"])
    assert mig_parted_spec_problems(doc) == []
    nodes = nodes_of("aws-mig-layout")
    assert {n.labels["nvidia.com/mig.config"] for n in nodes.values()} <= set(doc["mig-configs"])
    (layout,) = [entries for name, entries in doc["mig-configs"].items() if name == nodes["mixed"].labels["nvidia.com/mig.config"]]
    assert sorted(d for e in layout for d in e["devices"]) == list(range(8))


def test_mig_parted_spec_check_catches_what_mig_parted_refuses():
    good = {"version": "v1", "mig-configs": {"a": [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
                                                   {"devices": [2], "mig-enabled": False}]}}
    assert mig_parted_spec_problems(good) == []
    assert mig_parted_spec_problems({**good, "version": "v2"})
    assert mig_parted_spec_problems({"version": "v1", "mig-configs": {"a": [{"devices": [2], "mig-enabled": False, "mig-devices": {"1g.10gb": 1}}]}})
    assert mig_parted_spec_problems({"version": "v1", "mig-configs": {"a": [{"devices": "some", "mig-enabled": True, "mig-devices": {}}]}})
    assert mig_parted_spec_problems({"version": "v1", "mig-configs": {"a": [{"devices": [0], "mig-enabled": True}]}})
