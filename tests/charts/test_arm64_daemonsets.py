"""Every DaemonSet gpupools installs that runs on a rack-scale pool's arm64 (Grace) nodes has an arm64 image.

The example rack stacks (dev-aws-gb200, dev-gcp-a4x) are rendered with their own values (`test_helm_render`'s releases, planned
once per session); for each DaemonSet that fits an arm64 node of theirs (its labels, and the taints it joins with, GKE's
kubernetes.io/arch=arm64:NoSchedule among them), and each GPU Operator operand its ClusterPolicy deploys there, the table
below says whether its image runs on arm64 and where that is written: `multi-arch` with the upstream build that makes the
arm64 image, `unverified` where that cannot be checked offline and why, `amd64-only` for what must stay off arm64 nodes.
A new DaemonSet, another image or another tag fails until the table says what it is.

Not in the table, because gpupools installs neither: GKE's own driver installer and device plugin on A4X (GKE-managed), and
the EKS AMI's driver, toolkit and fabric manager (the node image's).
"""

from __future__ import annotations

import pytest

from charts.chartrender import kind_of
from charts.placement import daemon_pod_spec, fits
from test_helm_render import nodes_of, release_of, releases_of

RACK_STACKS = ("dev-aws-gb200", "dev-gcp-a4x")
MULTI, UNVERIFIED, AMD64 = "multi-arch", "unverified", "amd64-only"

# workload -> (its images, status, where it is written). ClusterPolicy operands as "ClusterPolicy/<operand>".
ARM64: dict[str, tuple[tuple[str, ...], str, str]] = {
    "dra-driver-nvidia-gpu-kubelet-plugin": (
        ("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1",) * 2, MULTI,
        "kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 deployments/container/Makefile line 47: --platform=linux/amd64,linux/arm64"),
    "gpu-operator-node-feature-discovery-worker": (
        ("registry.k8s.io/nfd/node-feature-discovery:v0.19.0",), MULTI,
        "kubernetes-sigs/node-feature-discovery v0.19.0 Makefile line 72: IMAGE_ALL_PLATFORMS ?= linux/amd64,linux/arm64,..."),
    "ClusterPolicy/validator": (
        ("nvcr.io/nvidia/gpu-operator:v26.7.0",), MULTI,
        "NVIDIA/gpu-operator v26.7.0 multi-arch.mk line 18: --platform=linux/amd64,linux/arm64"),
    "ClusterPolicy/devicePlugin": (
        ("nvcr.io/nvidia/k8s-device-plugin:v0.20.0",), MULTI,
        "NVIDIA/k8s-device-plugin v0.20.0 deployments/container/multi-arch.mk line 17: --platform=linux/amd64,linux/arm64"),
    "ClusterPolicy/gfd": (
        ("nvcr.io/nvidia/k8s-device-plugin:v0.20.0",), MULTI, "the device plugin's image (same build)"),
    "ClusterPolicy/dcgmExporter": (
        ("nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless",), UNVERIFIED,
        "tag 4.6.0-4.8.3 is not in the stored NVIDIA/dcgm-exporter snapshot (newest 4.5.3-4.8.2, whose Makefile line 31 builds "
        "PLATFORMS := linux/amd64,linux/arm64); the GPU Operator v26.7.0 that pins it lists GB200 NVL72 among its platforms"),
    "dcgm-exporter": (
        ("nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless",), MULTI,
        "NVIDIA/dcgm-exporter 4.5.3-4.8.2 Makefile line 31: PLATFORMS := linux/amd64,linux/arm64"),
    "kube-prometheus-stack-prometheus-node-exporter": (
        ("quay.io/prometheus/node-exporter:v1.12.1-distroless",), MULTI,
        "prometheus/node_exporter v1.12.1 Makefile line 18: DOCKER_ARCHS ?= amd64 arm64 armv7 ppc64le riscv64 s390x"),
    "eks-node-monitoring-agent": (
        ("602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/eks-node-monitoring-agent:v1.7.0-eksbuild.1",), MULTI,
        "aws/eks-node-monitoring-agent v1.7.0 Makefile line 38: DOCKER_PLATFORMS ?= linux/amd64,linux/arm64; its chart's affinity "
        "names amd64 and arm64 (values.yaml lines 71-76)"),
    "dcgm-server": (
        ("602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/eks-node-monitoring-agent:v1.7.0-eksbuild.1",), AMD64,
        "aws/eks-node-monitoring-agent v1.7.0 chart values.yaml lines 148-152 (dcgmAgent.affinity: kubernetes.io/arch In [amd64]); "
        "monitors/nvidia/monitor.go lines 86-90: NVIDIA monitoring is off on arm64"),
    "gpupools-gpu-ready-reporter": (
        ("registry.k8s.io/node-readiness-controller/node-readiness-reporter:v0.5.0",
         "docker.io/library/busybox:1.37.0@sha256:9db7b59979c38555a39def84a31fb98b5296952f9e3afd4f6f11f05b07adfab0"), UNVERIFIED,
        "the reporter: kubernetes-sigs/node-readiness-controller v0.5.0 Makefile lines 225 and 262-265 (docker-buildx-reporter, "
        "PLATFORMS ?= linux/arm64,linux/amd64); busybox 1.37.0 is built for arm64v8 (docker-library/official-images @06e2404 "
        "library/busybox), but that the pinned digest is its multi-platform index (gpupools/health/readiness.py, from "
        "docker-library/repo-info) has no stored copy to check offline"),
}

# The operands a ClusterPolicy deploys on a node whose workload is containers (not VMs): NVIDIA/gpu-operator v26.7.0
# controllers/state_manager.go, gpuStateLabels[container] and getWorkloadConfig (without sandboxWorkloads every node is
# `container`); the VM operands (vfioManager, vgpuDeviceManager, ccManager, sandbox device plugins) go only to VM nodes.
CONTAINER_OPERANDS = ("driver", "toolkit", "devicePlugin", "gfd", "dcgm", "dcgmExporter", "nodeStatusExporter", "validator",
                      "migManager", "gds", "gdrcopy")


def _images(spec: dict) -> tuple[str, ...]:
    return tuple(c["image"] for c in spec.get("initContainers", []) + spec["containers"])


def arm64_workloads(stack: str) -> dict[str, tuple[tuple[str, ...], list[str]]]:
    """workload -> (its images, the arm64 pools it does not run on and why) for every DaemonSet the stack installs and
    every ClusterPolicy operand deployed on container nodes."""
    nodes = {p: n for p, n in nodes_of(stack).items() if n.labels["kubernetes.io/arch"] == "arm64"}
    assert nodes, f"{stack} has no arm64 pool"
    out = {}
    specs = [(d["metadata"]["name"], daemon_pod_spec(d)) for r in releases_of(stack) for d in kind_of(r.render(), "DaemonSet")]
    specs += [(r.inputs["metadata"]["name"], daemon_pod_spec(r.inputs)) for r in _stack_daemonsets(stack)]
    for name, spec in specs:
        out[name] = (_images(spec), [f"{p}: {'; '.join(why)}" for p, n in nodes.items() if (why := fits(spec, n.labels, n.joining_taints))])
    for release in (r for r in releases_of(stack) if r.chart == "gpu-operator"):
        (policy,) = kind_of(release.render(), "ClusterPolicy")
        spec = policy["spec"]
        assert not spec["sandboxWorkloads"]["enabled"]
        away = [f"{p}: {'; '.join(why)}" for p, n in nodes.items() if (why := fits({"tolerations": spec["daemonsets"]["tolerations"]}, {}, n.joining_taints))]
        for operand in CONTAINER_OPERANDS:
            entry = spec[operand]
            if entry.get("enabled", True):
                out[f"ClusterPolicy/{operand}"] = ((f"{entry['repository']}/{entry['image']}:{entry['version']}",), away)
    return out


def _stack_daemonsets(stack: str):
    from charts.chartrender import stack_plan

    return [r for r in stack_plan(stack).resources if r.inputs.get("kind") == "DaemonSet"]


@pytest.mark.parametrize("stack", RACK_STACKS)
def test_every_daemonset_on_arm64_rack_nodes_has_an_arm64_image(stack):
    problems = []
    for name, (images, away) in sorted(arm64_workloads(stack).items()):
        if name not in ARM64:
            problems.append(f"{stack}: {name} ({', '.join(images)}) is not in the arm64 table" + (" (it stays off arm64: " + "; ".join(away) + ")"
                                                                                                   if away else ""))
            continue
        wanted, status, source = ARM64[name]
        assert source, name
        if images != wanted:
            problems.append(f"{stack}: {name} runs {images}, the table checked {wanted}")
        if status == AMD64 and not away:
            problems.append(f"{stack}: {name} has no arm64 image ({source}) but runs on an arm64 pool")
        if status != AMD64 and away:
            problems.append(f"{stack}: {name} does not run on arm64 pools: {'; '.join(away)}")
    assert not problems, "\n".join(problems)


def test_the_table_names_only_what_the_rack_stacks_install():
    installed = {name for stack in RACK_STACKS for name in arm64_workloads(stack)}
    assert set(ARM64) == installed


def test_the_dra_kubelet_plugin_tolerates_gkes_arm64_taint_and_is_caught_without_it():
    from test_helm_render import _drop, _render_daemonset

    release = release_of("dev-gcp-a4x", "dra-driver-nvidia-gpu")
    node = nodes_of("dev-gcp-a4x")["a4x"]
    assert ("kubernetes.io/arch", "arm64", "NoSchedule") in [(t.key, t.value, t.effect) for t in node.taints]
    name = "dra-driver-nvidia-gpu-kubelet-plugin"
    assert fits(_render_daemonset(release, release.values, name), node.labels, node.joining_taints) == []
    plugin = {**release.values["kubeletPlugin"], "tolerations": _drop(release.values["kubeletPlugin"]["tolerations"], "kubernetes.io/arch")}
    spec = _render_daemonset(release, {**release.values, "kubeletPlugin": plugin}, name)
    assert any("kubernetes.io/arch=arm64:NoSchedule not tolerated" in r for r in fits(spec, node.labels, node.joining_taints))


def test_the_rendered_cluster_policy_and_the_dra_driver_agree_on_driver_root_and_cdi():
    from gpupools.fabric.computedomain import operator_problems

    operator, dra = release_of("dev-aws-gb200", "gpu-operator"), release_of("dev-aws-gb200", "dra-driver-nvidia-gpu")
    assert operator.values["cdi"] == {"enabled": True}  # said in so many words beside the DRA driver
    (policy,) = kind_of(operator.render(), "ClusterPolicy")
    assert (policy["spec"]["cdi"]["enabled"], policy["spec"]["driver"]["enabled"]) == (True, False)  # the AMI's driver, on the host
    assert dra.values["nvidiaDriverRoot"] == "/" and operator_problems(operator.values, dra.values) == []
    (plugin,) = [d for d in kind_of(dra.render(), "DaemonSet")]
    (cd_container,) = [c for c in plugin["spec"]["template"]["spec"]["containers"] if c["name"] == "compute-domains"]
    assert {"name": "NVIDIA_DRIVER_ROOT", "value": "/"} in cd_container["env"]
    assert operator_problems({**operator.values, "driver": {"enabled": True}}, dra.values) != []
    assert operator_problems({**operator.values, "cdi": {"enabled": False}}, dra.values) != []
    assert "cdi" not in release_of("dev-aws", "gpu-operator").values  # stacks without rack pools keep the chart's default
