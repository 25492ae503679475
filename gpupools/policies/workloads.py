"""Kubernetes workloads declared in the stack that use GPUs: whole-number requests, and the GPU taint tolerated.

The device plugin hands out whole units (a GPU, a time-slice, a MIG slice, a vGPU); a fractional request is rejected
by the API server only at deploy time. HAMi's vGPU memory (MiB) and memory and compute shares (percent of one GPU)
are whole numbers too, and a share cannot exceed 100. A GPU pod without the toleration stays Pending forever, because every
GPU pool carries the nvidia.com/gpu NoSchedule taint. Both are cheap to catch before `pulumi up`.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from gpupools.core.sharing import VGPU_CORES_RESOURCE, VGPU_MEMORY_PERCENT_RESOURCE, VGPU_MEMORY_RESOURCE

from gpupools.policies._readback import GPU_TAINT_KEY
from gpupools.policies._props import UNKNOWN, get, is_unknown, plain

# Where each workload kind keeps its pod spec.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "kubernetes:core/v1:Pod": ("spec",),
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
GPU_RESOURCE_PREFIX = "nvidia.com/"
PERCENT_RESOURCES = (VGPU_MEMORY_PERCENT_RESOURCE, VGPU_CORES_RESOURCE)


def _whole(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    if isinstance(value, float):
        return value.is_integer() and value >= 0
    return isinstance(value, str) and value.strip().isdigit()


def gpu_requests(pod_spec: dict) -> list[tuple[str, str, Any]]:
    """(container, resource, amount) for every GPU request or limit of every container."""
    found = []
    for group in ("initContainers", "containers"):
        for container in pod_spec.get(group) or []:
            if not isinstance(container, dict):
                continue
            resources = container.get("resources") if isinstance(container.get("resources"), dict) else {}
            for kind in ("limits", "requests"):
                for resource, amount in (resources.get(kind) or {}).items():
                    if resource.startswith(GPU_RESOURCE_PREFIX):
                        found.append((str(container.get("name")), f"{kind}.{resource}", amount))
    return found


def tolerates_gpu_taint(tolerations: list) -> bool:
    """Kubernetes toleration matching: an empty key with Exists tolerates everything."""
    for t in tolerations or []:
        if not isinstance(t, dict):
            continue
        effect_ok = t.get("effect") in (None, "", "NoSchedule")
        operator = t.get("operator") or "Equal"
        if operator == "Exists" and not t.get("key") and effect_ok:
            return True
        if t.get("key") == GPU_TAINT_KEY and effect_ok and (operator == "Exists" or operator == "Equal"):
            return True
    return False


def validate_workload(args: ResourceValidationArgs, report: ReportViolation) -> None:
    path = POD_SPEC_PATHS.get(args.resource_type)
    if path is None:
        return
    spec = plain(get(args.props, *path))
    if not isinstance(spec, dict):
        return
    requests = gpu_requests(spec)
    if not requests:
        return
    for container, resource, amount in requests:
        if amount is UNKNOWN or is_unknown(amount):
            continue
        name = resource.split(".", 1)[1]
        if not _whole(amount):
            unit = ("MiB, as a plain integer (a quantity such as 8Gi would be read as that many MiB)" if name == VGPU_MEMORY_RESOURCE
                    else "whole units (a GPU, a time-slice, a MIG slice or a vGPU, or percent of one GPU for HAMi's shares)")
            report(f"{args.name!r} container {container!r} asks for {resource}: {amount!r}; GPU resources are counted in {unit}, "
                   f"so use an integer", None)
        elif name in PERCENT_RESOURCES and int(float(amount)) > 100:
            report(f"{args.name!r} container {container!r} asks for {resource}: {amount!r}; it is a share of one GPU in percent, "
                   f"at most 100", None)
    tolerations = spec.get("tolerations")
    if tolerations is UNKNOWN:
        return
    if not tolerates_gpu_taint(tolerations or []):
        report(f"{args.name!r} requests GPUs but does not tolerate the nvidia.com/gpu NoSchedule taint of GPU pools, so its pods "
               f"would stay Pending; add tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]", None)


gpu_workloads = ResourceValidationPolicy(
    name="gpu-workloads",
    description="Workloads that request GPUs request whole units (HAMi shares at most 100 %) and tolerate the nvidia.com/gpu taint of GPU pools.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_workload,
)

# --------------------------------------------------------------------------------------------------------------------
# gpu-workload-privileges


def workload_id(args: ResourceValidationArgs) -> str:
    """How an exception names a workload: namespace/name of its metadata (default namespace when unset)."""
    namespace = get(args.props, "metadata", "namespace")
    name = get(args.props, "metadata", "name")
    return f"{namespace if isinstance(namespace, str) and namespace else 'default'}/{name if isinstance(name, str) else args.name}"


def validate_privileges(args: ResourceValidationArgs, report: ReportViolation) -> None:
    path = POD_SPEC_PATHS.get(args.resource_type)
    if path is None:
        return
    spec = plain(get(args.props, *path))
    if not isinstance(spec, dict) or not gpu_requests(spec):
        return
    who = workload_id(args)
    if who in (args.get_config().get("exceptions") or []):
        args.not_applicable(f"{who} is listed in exceptions")
    problems = []
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field) is True:
            problems.append(f"{field}: true")
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            if not isinstance(container, dict):
                continue
            context = container.get("securityContext") if isinstance(container.get("securityContext"), dict) else {}
            if context.get("privileged") is True:
                problems.append(f"container {container.get('name')!r} privileged: true")
    for problem in problems:
        report(f"GPU workload {who} runs with {problem}: a GPU pod so trusted can read every other tenant's GPU memory and the node; "
               f"drop it, or name {who} in this policy's exceptions", None)


gpu_workload_privileges = ResourceValidationPolicy(
    name="gpu-workload-privileges",
    description="Workloads that request GPUs run neither privileged nor in the host's network, PID or IPC namespace, unless an exception names them.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "exceptions": {"type": "array", "items": {"type": "string"}, "default": [],
                       "description": "Workloads (namespace/name) allowed to run privileged or with host namespaces."},
    }),
    validate=validate_privileges,
)

POLICIES = [gpu_workloads, gpu_workload_privileges]
