"""GPU allocation through NVIDIA's DRA driver, a preview sharing mode per pool (`sharing: {mode: dra}`, docs/sharing.md).

The pool's GPUs come from the driver's kubelet plugin (`resources.gpus.enabled: true`) instead of a device plugin: whole
GPUs (DeviceClass gpu.nvidia.com) or, with a static MIG profile, the existing MIG devices (mig.nvidia.com); DynamicMIG,
time-slicing and MPS per claim only with `preview: true`. NVIDIA's own rating for the driver the GPU Operator v26.7.0
pins: full-GPU and existing-MIG allocation "Generally Available", the rest Alpha (NVIDIA/cloud-native-docs 52dcb7b8
gpu-operator/dra-intro-install.rst); the driver's README still calls GPU allocation "not yet officially supported"
(kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 README.md). Hence "preview" on every plan line it touches.

The same chart release serves ComputeDomains on rack pools (gpupools.fabric.computedomain); its kubelet plugin runs the
GPU container on every node it selects, so a stack refuses a rack pool served by a device plugin beside a DRA pool
(`stack_problems`). The chart refuses GPU allocation unless `gpuResourcesEnabledOverride` says the device plugin is not
on those nodes (v0.4.1 templates/validation.yaml); gpupools keeps it off them with the per-node label
(`core.sharing._dra_mechanism`).

Pure: values, Kueue mappings, the claim template `gpupools workload` prints, plan words.
"""

from __future__ import annotations

import copy

from gpupools.core.pools import POOL_LABEL, PoolPlan
from gpupools.core.sharing import DRA_FEATURE_GATES, DRA_GPU_CLASS, DRA_GPU_RESOURCE, DRA_MIG_CLASS, DRA_MIG_RESOURCE
from gpupools.fabric import computedomain
from gpupools.pools.software import Release, SoftwarePlan, gpu_tolerations, namespace
from gpupools.stack.config import StackConfig
from gpupools.stack.errors import Problem

PREVIEW = "preview"
RESOURCE_API = computedomain.RESOURCE_API
GPU_REQUEST = "gpu"
CLAIM_NAME = "gpu"


def dra_pools(plans: list[PoolPlan]) -> list[PoolPlan]:
    return [p for p in plans if p.mechanism.mode == "dra"]


def gpu_allocation_values(stack: StackConfig, plans: list[PoolPlan], values: dict | None) -> dict:
    """The chart's values with GPU allocation on for the DRA pools: `resources.gpus.enabled` and the override the chart
    asks for (values.yaml `gpuResourcesEnabledOverride`, templates/validation.yaml), the kubelet plugin on the rack pools
    (ComputeDomains, `values` from computedomain) and the DRA pools, and the Alpha gates the pools' draFeatures name
    (values.yaml `featureGates`)."""
    pools = dra_pools(plans)
    served = computedomain.rack_pools(plans) + [p for p in pools if p not in computedomain.rack_pools(plans)]
    out = copy.deepcopy(values) if values else {
        "nvidiaDriverRoot": sorted({computedomain.driver_root(stack, p) for p in pools})[0],
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "kubeletPlugin": {},
    }
    out["resources"]["gpus"] = {"enabled": True}
    out["gpuResourcesEnabledOverride"] = True
    out["kubeletPlugin"]["tolerations"] = gpu_tolerations(stack, served)
    out["kubeletPlugin"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": sorted(p.name for p in served)}]}]}}}
    gates = sorted({DRA_FEATURE_GATES[f] for p in pools for f in p.sharing.dra_features or ()})
    if gates:
        out["featureGates"] = {g: True for g in gates}
    return out


def dra_release(stack: StackConfig, plans: list[PoolPlan]) -> Release | None:
    """The DRA driver's release: ComputeDomains on rack pools (computedomain), GPU allocation on DRA pools; None when
    the stack has neither."""
    release = computedomain.dra_driver_release(stack, plans)
    if not dra_pools(plans):
        return release
    chart = computedomain.CHART
    return Release(chart, chart.default_version, gpu_allocation_values(stack, plans, release.values if release else None))


def with_dra(software: SoftwarePlan, stack: StackConfig, plans: list[PoolPlan]) -> SoftwarePlan:
    if not dra_pools(plans):
        return computedomain.with_dra_driver(software, stack, plans)
    release = dra_release(stack, plans)
    software.objects.append(namespace(computedomain.CHART.namespace, privileged=True))
    software.releases.append(release)
    return software


def device_class_mappings(plans: list[PoolPlan]) -> list[dict]:
    """Kueue's deviceClassMappings for the DRA pools' classes (kueue v0.19.2 apis/config/v1beta2/configuration_types.go,
    DeviceClassMapping): each claim of gpu.nvidia.com counts `count` units of nvidia.com/dra-gpu, of mig.nvidia.com of
    nvidia.com/dra-mig (site/content/en/docs/tasks/manage/setup_dra.md); an unmapped class keeps a workload inadmissible
    (pkg/dra/claims.go)."""
    resources = {p.mechanism.resource for p in dra_pools(plans)}
    out = []
    if DRA_GPU_RESOURCE in resources:
        out.append({"name": DRA_GPU_RESOURCE, "deviceClassNames": [DRA_GPU_CLASS]})
    if DRA_MIG_RESOURCE in resources:
        out.append({"name": DRA_MIG_RESOURCE, "deviceClassNames": [DRA_MIG_CLASS]})
    return out


def device_class(plan: PoolPlan) -> str:
    return DRA_MIG_CLASS if plan.mechanism.resource == DRA_MIG_RESOURCE else DRA_GPU_CLASS


def claim_template(plan: PoolPlan, name: str, namespace: str | None, count: int) -> dict:
    """A ResourceClaimTemplate (resource.k8s.io/v1, Kubernetes 1.34+) for `count` devices of the pool's class: an
    `exactly` request with allocationMode ExactCount, the one Kueue admits (kueue v0.19.2 pkg/dra/claims.go refuses
    All). On a MIG pool a CEL selector picks the pool's profile (the driver's MIG device attribute `profile`,
    dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/mig.go; the same selector in demo/specs/quickstart/v1/gpu-test4.yaml)."""
    exactly: dict = {"deviceClassName": device_class(plan), "allocationMode": "ExactCount", "count": count}
    if plan.mechanism.mig_profile:
        exactly["selectors"] = [{"cel": {"expression": f"device.attributes['{DRA_GPU_CLASS}'].profile == '{plan.mechanism.mig_profile}'"}}]
    metadata: dict = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": RESOURCE_API, "kind": "ResourceClaimTemplate", "metadata": metadata,
            "spec": {"spec": {"devices": {"requests": [{"name": GPU_REQUEST, "exactly": exactly}]}}}}


def with_gpu_claim(pod_spec: dict, template: dict, resource: str) -> dict:
    """The pod claims the template in each container instead of asking for `resource` in its limits."""
    pod_spec.setdefault("resourceClaims", []).insert(0, {"name": CLAIM_NAME, "resourceClaimTemplateName": template["metadata"]["name"]})
    for container in pod_spec["containers"]:
        resources = container.setdefault("resources", {})
        for kind in ("limits", "requests"):
            amounts = resources.get(kind)
            if amounts is not None:
                amounts.pop(resource, None)
                if not amounts:
                    del resources[kind]
        claims = resources.setdefault("claims", [])
        claims.insert(0, {"name": CLAIM_NAME})
    return pod_spec


def stack_problems(pools: list[tuple[str, str, bool, bool]], quotas: str, teams: bool, autoscaler: str = "") -> list[Problem]:
    """`pools`: each pool's sharing path, mode, whether it is rack-scale, and whether the GPU Operator's device plugin
    would serve it. Refused, one line each:

    - GPU allocation and a device plugin on one node: a rack pool served by a device plugin beside a DRA pool gets the
      release's GPU kubelet plugin too (one kubelet plugin DaemonSet for both, values.yaml kubeletPlugin), which the
      chart refuses beside a device plugin (templates/validation.yaml).
    - A DRA pool beside pools of the GPU Operator's device plugin: the operator then keeps its validator's plugin check
      on every node (NVIDIA/gpu-operator v26.7.0 controllers/object_controls.go, TransformValidator: the plugin init
      container is removed only when devicePlugin is disabled for the cluster), and on a node without the device plugin
      that check fails (cmd/nvidia-validator/main.go, validateGPUResource: no nvidia.com/gpu or MIG resource after 30
      tries), so the node never passes validation. NVIDIA's own path for GPU allocation under a ClusterPolicy turns the
      device plugin off for the cluster (cloud-native-docs 66160ebc gpu-operator/dra-intro-install.rst:
      `devicePlugin.enabled=false`), which gpupools does when every operator pool is a DRA pool.
    - Karpenter, and quotas other than Kueue (below)."""
    if not any(mode == "dra" for _, mode, _, _ in pools):
        return []
    problems = [Problem(f"{path}.mode", f"{mode!r} on a rack-scale pool beside a pool of mode 'dra': the DRA driver's kubelet plugin would "
                                        "allocate GPUs on its nodes, which a device plugin serves (dra-driver-nvidia-gpu 0.4.1 "
                                        "templates/validation.yaml); give every rack-scale pool mode 'dra', or none")
                for path, mode, rack, _ in pools if rack and mode != "dra"]
    problems += [Problem(f"{path}.mode", f"{mode!r} under the GPU Operator beside a pool of mode 'dra': the operator validates its device plugin "
                                         "on every node while it runs one (gpu-operator v26.7.0 TransformValidator), and DRA nodes have none, so "
                                         "they never pass validation; give every GPU Operator pool mode 'dra', or use gpuSoftware.installer: "
                                         "device-plugin")
                 for path, mode, rack, operator in pools if operator and mode != "dra" and not (rack and mode != "dra")]
    if autoscaler == "karpenter":
        # kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/scheduler.go: a pod with ResourceClaims is
        # skipped ("Dynamic Resource Allocation requirements that are not yet supported by Karpenter"), IGNORE_DRA_REQUESTS
        # default true (pkg/operator/options/options.go).
        problems.append(Problem("autoscaler", "karpenter with a pool of sharing mode 'dra': Karpenter v1.14.1 starts no node for a pod with "
                                              "ResourceClaims (IGNORE_DRA_REQUESTS); set gpupools:autoscaler: cluster-autoscaler"))
    if teams and quotas != "kueue":
        problems.append(Problem("quotas", f"{quotas!r} with a pool of sharing mode 'dra': only Kueue counts DRA claims in gpupools "
                                          "(deviceClassMappings); use quotas: kueue"))
    return problems


def dra_driver_problems(wanted: str) -> list[Problem]:
    """`gpuSoftware.draDriver: gpu-cluster`, the GPU Operator's own way to run the DRA driver, refused: a GPUCluster
    (nvidia.com/v1alpha1, a singleton) cannot exist beside a ClusterPolicy, which gpupools installs wherever the operator
    runs (driver, toolkit, MIG manager, DCGM exporter): the chart calls both CRs "invalid configuration" (NVIDIA/gpu-operator
    v26.7.0 deployments/gpu-operator/values.yaml, gpuCluster) and the controller holds a GPUCluster at PrerequisiteNotMet
    while a ClusterPolicy exists (controllers/gpucluster_controller.go)."""
    if wanted != "gpu-cluster":
        return []
    return [Problem("gpuSoftware.draDriver", "gpu-cluster: the GPU Operator's GPUCluster cannot coexist with the ClusterPolicy gpupools "
                                             "installs (gpu-operator v26.7.0: PrerequisiteNotMet while a ClusterPolicy exists); use chart, "
                                             "the dra-driver-nvidia-gpu chart beside it")]


def idle_line() -> str:
    """What the idle report can say of a DRA pool's GPUs. dcgm-exporter labels a GPU with the pod, namespace and container
    that hold it through DRA only with KUBERNETES_ENABLE_DRA and RBAC on resourceslices (NVIDIA/dcgm-exporter 4.5.3-4.8.2
    internal/pkg/transformation/kubernetes.go, toDeviceToPodsDRA; deployment/templates/clusterrole.yaml). The GPU
    Operator's exporter, which gpupools runs, has neither (NVIDIA/gpu-operator v26.7.0 assets/state-dcgm-exporter/
    0210_clusterrole.yaml: "TODO: Add resourceSlices permissions when GPU Operator exposes DRA exporter support"), so a
    GPU allocated by DRA carries no pod or namespace label."""
    return (f"{PREVIEW}: the idle report cannot attribute this pool's GPUs to pods or teams: the GPU Operator's DCGM exporter (v26.7.0) "
            "maps only device-plugin allocations; DRA claims show as GPUs in use by no pod")


def preview_mark(mechanism) -> callable:
    """Prefix a plan line of a DRA pool with "preview: "; other pools' lines unchanged."""
    if mechanism.mode != "dra":
        return lambda line: line
    return lambda line: line if line.startswith(f"{PREVIEW}:") else f"{PREVIEW}: {line}"


def dra_lines(stack: StackConfig, plan: PoolPlan) -> list[tuple[str, str]]:
    """The plan's rows for a DRA pool: who serves its GPUs, what a pod claims, what Kueue counts, what the idle report
    cannot see."""
    if plan.mechanism.mode != "dra":
        return []
    m = plan.mechanism
    gates = sorted(DRA_FEATURE_GATES[f] for f in plan.sharing.dra_features or ())
    chart = computedomain.CHART
    rows = [("DRA", f"{PREVIEW}: chart {chart.chart} {chart.default_version} with resources.gpus.enabled and gpuResourcesEnabledOverride, "
                    f"kubelet plugin on this pool; the device plugin kept off its nodes (nvidia.com/gpu.deploy.device-plugin=false)"
                    + (f"; Alpha feature gates {', '.join(gates)}" if gates else "")),
            ("", f"{PREVIEW}: pods claim {device_class(plan)} through a ResourceClaimTemplate (gpupools workload --pool {plan.name}), "
                 f"not nvidia.com/gpu; Kueue counts each device as {m.resource} (deviceClassMappings)"),
            ("", idle_line())]
    return rows


def _pod_templates(workload: dict) -> list[dict]:
    if workload.get("kind") == "JobSet":
        return [r["template"]["spec"]["template"] for r in workload["spec"]["replicatedJobs"]]
    return [workload["spec"]["template"]]


def dra_docs(plan: PoolPlan, docs: list[dict]) -> list[dict]:
    """A workload's documents on a DRA pool: its pods claim the pool's devices from a ResourceClaimTemplate printed
    before it (same namespace, `<workload>-gpu`), counting what their containers asked of the pool's resource; unchanged
    on other pools."""
    if plan.mechanism.mode != "dra":
        return docs
    workload = docs[-1]
    resource = plan.mechanism.resource
    pods = _pod_templates(workload)
    containers = [c for pod in pods for c in pod["spec"]["containers"]]
    count = max((int(c.get("resources", {}).get("limits", {}).get(resource, 0)) for c in containers), default=0)
    if count < 1:
        return docs
    template = claim_template(plan, f"{workload['metadata']['name']}-gpu", workload["metadata"].get("namespace"), count)
    for pod in pods:
        with_gpu_claim(pod["spec"], template, resource)
    return [template] + docs
