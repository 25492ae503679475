"""The GPU software a stack installs: Helm releases with their values, and the Kubernetes objects beside them.

Pure: the result is plain data that the `GpuSoftware` component applies, `gpupools render` writes to disk, and
tests compare against the pinned charts' values.yaml. Nothing here waits for GPU pools: DaemonSet pods start
as GPU nodes join.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import yaml

from gpupools.health import readiness
from gpupools.upgrades.policy import driver_upgrade_policy
from gpupools.stack.config import DEFAULT_DEVICE_PLUGIN_VERSION, DEFAULT_GPU_OPERATOR_VERSION, Sharing, StackConfig
from gpupools.core.pools import GPU_LABEL, GPU_TAINT, POOL_LABEL, PoolPlan, toleration
from gpupools.core.sharing import (
    BOTTLEROCKET,
    DEPLOY_DEVICE_PLUGIN_LABEL,
    DEPLOY_OPERANDS_LABEL,
    HAMI,
    HAMI_NODE_SELECTOR,
    HAMI_SCHEDULER,
    NO_SHARING_ENTRY,
    OPERATOR_DEFAULT_MIG_CONFIGS,
    all_profile_entries,
    device_plugin_config_entry,
    operator_default_entries,
    mig_parted_config,
    resolve_installer,
)


@dataclass(frozen=True)
class Chart:
    """An official Helm chart: its release name, chart, repository, namespace and pinned version."""

    release: str
    chart: str
    repo: str
    namespace: str
    default_version: str


GPU_OPERATOR = Chart("gpu-operator", "gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "gpu-operator", DEFAULT_GPU_OPERATOR_VERSION)
DEVICE_PLUGIN = Chart("nvidia-device-plugin", "nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "nvidia-device-plugin",
                      DEFAULT_DEVICE_PLUGIN_VERSION)

HAMI_CHART = Chart("hami", "hami", "https://project-hami.github.io/HAMi/", "hami-system", "2.10.0")
# The chart's default kube-scheduler image lives in a registry in mainland China; Kubernetes' own registry has the same
# image under the same tags (the chart picks the cluster's version).
KUBE_SCHEDULER_IMAGE = {"registry": "registry.k8s.io", "repository": "kube-scheduler"}

DEVICE_PLUGIN_CONFIGMAP = "gpupools-device-plugin-config"
MIG_CONFIGMAP = "gpupools-mig-config"
# NVIDIA's documented quota that lets the operator's system-node-critical pods run outside kube-system on GKE.
GKE_OPERATOR_QUOTA = "gpu-operator-quota"


@dataclass(frozen=True)
class Release:
    """A chart at a version with the values gpupools gives it."""

    chart: Chart
    version: str
    values: dict

    @property
    def name(self) -> str:
        return self.chart.release


@dataclass
class SoftwarePlan:
    """The GPU software a stack installs: Helm releases and Kubernetes objects."""

    releases: list[Release] = field(default_factory=list)
    objects: list[dict] = field(default_factory=list)  # Kubernetes manifests, namespaces first


def gpu_tolerations(stack: StackConfig, plans: list[PoolPlan]) -> list[dict]:
    """Every GPU DaemonSet tolerates the pool taint, plus whatever the cloud adds itself (AKS spot)."""
    tolerations = [{"key": GPU_TAINT.key, "operator": "Exists", "effect": GPU_TAINT.effect}]
    if any(p.startup_taints for p in plans):
        # The software that makes a node ready runs before the readiness taint is gone (the GPU Operator's operands
        # tolerate only what daemonsets.tolerations lists).
        tolerations += readiness.tolerations()
    module = stack.target
    for plan in plans:
        # The pools' own taints too (pools[].taints): a node whose driver, toolkit or device plugin cannot run there
        # never offers a GPU, and never passes the readiness gate.
        for extra in [*module.extra_tolerations(plan), *map(toleration, plan.pool_taints)]:
            if extra not in tolerations:
                tolerations.append(extra)
    return tolerations


def namespace(name: str, privileged: bool = False) -> dict:
    labels = {"app.kubernetes.io/managed-by": "gpupools"}
    if privileged:
        # GPU drivers, toolkits and device plugins need host access; Pod Security must admit them.
        labels["pod-security.kubernetes.io/enforce"] = "privileged"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def config_map(name: str, ns: str, data: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns,
            "labels": {"app.kubernetes.io/managed-by": "gpupools"}}, "data": data}


def _yaml(doc: dict) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def device_plugin_config_data(plans: list[PoolPlan]) -> dict[str, str]:
    """One entry per distinct sharing setting among the pools, plus the entry that shares nothing."""
    entries = {NO_SHARING_ENTRY: device_plugin_config_entry_for(None)}
    for plan in plans:
        entry = plan.mechanism.device_plugin_entry
        if entry and entry not in entries:
            entries[entry] = device_plugin_config_entry_for(plan)
    return {name: _yaml(doc) for name, doc in sorted(entries.items())}


def device_plugin_config_entry_for(plan: PoolPlan | None) -> dict:
    return device_plugin_config_entry(plan.sharing if plan is not None else Sharing())


def custom_mig_configs(plans: list[PoolPlan]) -> dict[str, list[dict]]:
    """The mig-parted configs of the operator's MIG pools when one of them is not in the operator's default config;
    empty when the defaults hold every pool's layout. A custom config replaces the defaults: the MIG manager then
    reads only it (NVIDIA/gpu-operator v26.7.0 controllers/object_controls.go lines 597-602, 2069-2092), so it
    holds every layout a pool's label names."""
    mig = [p for p in operator_served(plans) if p.mechanism.mig_config]
    if all(p.mechanism.mig_config in OPERATOR_DEFAULT_MIG_CONFIGS for p in mig):
        return {}
    configs: dict[str, list[dict]] = {}
    for plan in mig:
        m = plan.mechanism
        if m.mig_config == "all-disabled":
            continue  # every config has it (mig_parted_config)
        if m.mig_config in OPERATOR_DEFAULT_MIG_CONFIGS:
            # One of the operator's own layouts keeps the operator's entries, with their device filters: its name may
            # stand for other counts on another GPU model of the stack (all-1g.10gb: 4 on an A100-40GB, 7 on an H100).
            configs[m.mig_config] = operator_default_entries(m.mig_config)
        else:
            configs[m.mig_config] = list(m.mig_entries) or all_profile_entries(m.mig_profile, plan.hardware.gpu.mig_profiles[m.mig_profile])
    return dict(sorted(configs.items()))


def hami_served(plans: list[PoolPlan]) -> list[PoolPlan]:
    return [p for p in plans if p.mechanism.installer == HAMI]


def hami_values(stack: StackConfig, plans: list[PoolPlan]) -> dict:
    """HAMi for the vgpu pools only.

    Its admission webhook sends a pod to HAMi's scheduler only when the pod is labelled for a vgpu pool (as the
    Jobs `gpupools workload` prints are); by default it would take every pod asking for nvidia.com/gpu, including
    those of time-slicing, MPS, MIG and whole-GPU pools, which HAMi's scheduler cannot place. Services stay inside
    the cluster (the chart defaults to NodePorts). Where the GPU Operator installs the container toolkit, the device
    plugin waits for it.
    """
    served = hami_served(plans)
    sharing = served[0].sharing
    device_plugin: dict = {
        "deviceSplitCount": sharing.replicas,
        "deviceMemoryScaling": sharing.memory_scaling or 1,
        "nvidiaNodeSelector": dict(HAMI_NODE_SELECTOR),
        "tolerations": gpu_tolerations(stack, served),
        "service": {"type": "ClusterIP"},
    }
    if resolve_installer(stack.target, stack.gpu_software.installer) == "gpu-operator" and not stack.target.IMAGE_BRINGS_TOOLKIT:
        device_plugin["gpuOperatorToolkitReady"] = {"enabled": True}
    webhook: dict = {"objectSelector": {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": sorted(p.name for p in served)}]}}
    if stack.target.OWNS_WEBHOOK_NAMESPACE_SELECTOR:
        # AKS owns webhooks' namespaceSelector (its admissions enforcer); the chart says to leave it alone there.
        webhook["manageNamespaceSelector"] = False
    return {
        "schedulerName": HAMI_SCHEDULER,
        "devicePlugin": device_plugin,
        "scheduler": {"kubeScheduler": {"image": dict(KUBE_SCHEDULER_IMAGE)}, "admissionWebhook": webhook, "service": {"type": "ClusterIP"}},
    }


# The driver the pinned GPU Operator chart installs: NVIDIA/gpu-operator v26.7.0 deployments/gpu-operator/values.yaml
# driver.version (tests/reference/gpu-operator/values.yaml; test_the_drivers_gpupools_installs_know_every_catalog_gpu).
GPU_OPERATOR_DRIVER = "595.91.07"


@dataclass(frozen=True)
class DriverPlan:
    """A pool's NVIDIA driver: who installs it, which version where gpupools pins it, and what its GPUs need."""

    installed_by: str
    version: str | None  # None: the installer's own choice
    min_branch: int | None  # the oldest branch that knows the pool's GPU (catalog.yaml minDriver)
    open_modules_only: bool  # Blackwell and later: NVIDIA's open kernel modules only

    @property
    def words(self) -> str:
        text = self.installed_by + (f", {self.version}" if self.version else "")
        if self.open_modules_only:
            text += "; NVIDIA's open kernel modules (Blackwell has no proprietary ones)"
        if self.min_branch:
            text += f"; the GPU needs branch {self.min_branch} or later"
        return text

    def as_json(self) -> dict:
        return {"installedBy": self.installed_by, "version": self.version, "minBranch": self.min_branch,
                "openKernelModulesOnly": self.open_modules_only}


def driver_plan(stack: StackConfig, plan: PoolPlan) -> DriverPlan:
    """Who installs the pool's driver (the cloud's answer, or the GPU Operator with kernelModuleType "auto", which picks
    the open modules on Blackwell: NVIDIA/gpu-operator v26.7.0 api/nvidia/v1/clusterpolicy_types.go KernelModuleType)."""
    installer = resolve_installer(stack.target, stack.gpu_software.installer)
    gpu = plan.hardware.gpu
    by = stack.target.driver_installer(installer, plan.pool.os)
    version = None
    if by is None:
        chart = stack.gpu_software.version or GPU_OPERATOR.default_version
        pinned = chart == GPU_OPERATOR.default_version
        by = f"the GPU Operator (chart {chart}, driver.kernelModuleType auto)"
        version = stack.gpu_software.driver_version or (GPU_OPERATOR_DRIVER if pinned else None)
    return DriverPlan(by, version, gpu.min_driver, gpu.open_kernel_modules_only)


def operator_owns_driver(stack: StackConfig) -> bool:
    """EKS GPU AMIs (AL2023 NVIDIA, Bottlerocket NVIDIA) ship driver and toolkit; on AKS (gpuProfile.driver None)
    and GKE (INSTALLATION_DISABLED) the operator installs them."""
    return not stack.target.IMAGE_BRINGS_DRIVER


def operator_served(plans: list[PoolPlan]) -> list[PoolPlan]:
    return [p for p in plans if p.mechanism.installer == "gpu-operator"]


def operator_device_plugin(plans: list[PoolPlan]) -> bool:
    """Whether the GPU Operator runs its device plugin: some pool it serves takes GPUs from it, not from the DRA driver."""
    return any(p.mechanism.mode != "dra" for p in operator_served(plans))


def gpu_operator_values(stack: StackConfig, plans: list[PoolPlan], service_monitor: dict | None, rdma_pools: Sequence[str] = ()) -> dict:
    """`service_monitor`: the exporter ServiceMonitor's settings (labels Prometheus selects by, relabelings); None
    when nothing scrapes it. `rdma_pools`: the InfiniBand pools whose nodes get GPUDirect RDMA (`gpudirect_rdma_values`)."""
    served = operator_served(plans)
    mig_pools = [p for p in served if p.mechanism.mode == "mig" or p.mechanism.mig_config]  # DRA pools: a static layout too
    owns_driver = operator_owns_driver(stack)
    tolerations = gpu_tolerations(stack, plans)
    values: dict = {
        "driver": {"enabled": owns_driver},
        "toolkit": {"enabled": not stack.target.IMAGE_BRINGS_TOOLKIT},
        # DRA pools (a preview) take no device plugin; none at all turns the operator's validator plugin check off too.
        "devicePlugin": {"enabled": operator_device_plugin(plans), "config": {"name": DEVICE_PLUGIN_CONFIGMAP, "default": NO_SHARING_ENTRY}},
        "mig": {"strategy": stack.gpu_software.mig_strategy},
        "migManager": {
            "enabled": bool(mig_pools),
            # Cloud VMs cannot reset a GPU into MIG mode without a reboot (NVIDIA GPU Operator MIG docs).
            "env": [{"name": "WITH_REBOOT", "value": "true"}],
        },
        "daemonsets": {"tolerations": tolerations},
        "node-feature-discovery": {"worker": {"tolerations": tolerations}},
        "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": service_monitor is not None, **(service_monitor or {})}},
    }
    custom = custom_mig_configs(plans)
    if custom:
        # The chart makes the ConfigMap (templates/mig_config.yaml) and names it in the ClusterPolicy.
        values["migManager"]["config"] = {"name": MIG_CONFIGMAP, "create": True, "default": "all-disabled",
                                          "data": {"config.yaml": _yaml(mig_parted_config(custom))}}
    if hami_served(plans):
        # The validator's plugin check runs a pod asking for nvidia.com/gpu on the node, bound by name; HAMi's device
        # plugin only allocates to pods its scheduler placed (Project-HAMi/HAMi pkg/device-plugin/nvidiadevice/
        # nvinternal/plugin/server.go, Allocate: getPendingPod), so on vgpu nodes the check would never pass. Without
        # the workload it still requires the GPUs advertised (NVIDIA/gpu-operator cmd/nvidia-validator/main.go,
        # Plugin.validate: validateGPUResource, then the workload only if WITH_WORKLOAD).
        values["validator"] = {"plugin": {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]}}
    if owns_driver:
        # Driver upgrades wait for running Jobs and take one node at a time (upgrades.policy, driver_upgrade_policy); the
        # version changes only when the stack pins another.
        values["driver"]["upgradePolicy"] = driver_upgrade_policy([p.pool for p in rdma_driver_pools(stack, plans)])
        if stack.gpu_software.driver_version:
            values["driver"]["version"] = stack.gpu_software.driver_version
    rdma = gpudirect_rdma_values(stack, plans, rdma_pools)
    values["driver"].update(rdma.get("driver", {}))
    if "extraObjects" in rdma:
        values["extraObjects"] = rdma["extraObjects"]
    return values


# GPUDirect RDMA: NCCL moves data between a GPU and the InfiniBand HCA without a copy through host memory once the GPU
# driver's nvidia-peermem module is loaded against the OFED stack. Azure's GPU Operator values for ND-series pools turn
# it on with `driver.rdma.enabled: true`, the OFED driver coming from the Network Operator's DOCA driver container
# (Azure/aks-rdma-infiniband @ 700dabb configs/values/gpu-operator/values.yaml; `useHostMofed` stays false: the driver is
# not on the host). The GPU Operator then adds the nvidia-peermem-ctr container to its driver DaemonSet
# (NVIDIA/gpu-operator v26.7.0 controllers/object_controls.go, transformPeerMemoryContainer), which waits for the DOCA
# driver's /run/mellanox/drivers/.driver-ready and loads the module (NVIDIA/gpu-driver-container ubuntu24.04/nvidia-driver,
# reload_nvidia_peermem).
#
# That setting holds for every GPU node. On a node with any Mellanox PCI device and no DOCA driver (the accelerated
# networking NIC of other GPU VM sizes) the driver container's `modprobe nvidia-peermem` then fails and the driver never
# loads (nvidia-driver _load_driver under `set -e`, _gpu_direct_rdma_enabled: GPU_DIRECT_RDMA_ENABLED and vendor 0x15b3
# present). So Azure's setting is used as it is only where every pool whose driver the operator installs is an
# InfiniBand pool; beside other GPU pools, RDMA goes per pool through the operator's NVIDIADriver resources: the chart's
# default one (`spec.default: true`, no RDMA) keeps every other GPU node, and one NVIDIADriver per InfiniBand pool,
# selected by the pool label, turns RDMA on there (NVIDIA/cloud-native-docs gpu-operator/gpu-driver-configuration.rst,
# "About the Default NVIDIA Driver Custom Resource": a user-defined resource takes precedence on the nodes its node
# selector matches).
NVIDIA_DRIVER_API = "nvidia.com/v1alpha1"
RDMA = {"enabled": True, "useHostMofed": False}


def rdma_driver_pools(stack: StackConfig, plans: list[PoolPlan]) -> list[PoolPlan]:
    """The pools whose GPU driver the GPU Operator installs (its driver DaemonSet runs there)."""
    if resolve_installer(stack.target, stack.gpu_software.installer) != "gpu-operator" or not operator_owns_driver(stack):
        return []
    return [p for p in plans if p.labels.get(DEPLOY_OPERANDS_LABEL) != "false"]


def rdma_mode(stack: StackConfig, plans: list[PoolPlan], rdma_pools: Sequence[str]) -> str | None:
    """How GPUDirect RDMA reaches `rdma_pools`: "cluster-policy" (Azure's `driver.rdma`, every driver pool is one of
    them), "nvidia-driver" (per pool, beside other GPU pools), or None (no pool, or the operator installs no driver)."""
    driver_pools = {p.name for p in rdma_driver_pools(stack, plans)}
    wanted = [p for p in rdma_pools if p in driver_pools]
    if not wanted:
        return None
    return "cluster-policy" if driver_pools <= set(wanted) else "nvidia-driver"


def nvidia_driver_name(pool: str) -> str:
    return f"gpupools-rdma-{pool}"


# One NVIDIADriver per InfiniBand pool, rendered by the chart itself through `extraObjects` (its templates/
# extra-objects.yaml passes each string through `tpl`), so it installs with the CRD it needs and takes the driver image,
# version, probes, manager and upgrade policy from the chart's own values exactly as the chart's default NVIDIADriver
# does (NVIDIA/gpu-operator v26.7.0 deployments/gpu-operator/templates/nvidiadriver.yaml); only the node selector and
# `rdma` differ. `@POOL@` and `@NAME@` are filled in per pool.
NVIDIA_DRIVER_TEMPLATE = """\
apiVersion: nvidia.com/v1alpha1
kind: NVIDIADriver
metadata:
  name: @NAME@
  labels:
    app.kubernetes.io/managed-by: gpupools
spec:
  default: false
  driverType: {{ .Values.driver.nvidiaDriverCRD.driverType | default "gpu" }}
  repository: {{ .Values.driver.repository }}
  image: {{ .Values.driver.image }}
  version: {{ .Values.driver.version | quote }}
  kernelModuleType: {{ .Values.driver.kernelModuleType }}
  usePrecompiled: {{ .Values.driver.usePrecompiled }}
  {{- if .Values.driver.manager }}
  manager: {{ toYaml .Values.driver.manager | nindent 4 }}
  {{- end }}
  {{- if .Values.driver.startupProbe }}
  startupProbe: {{ toYaml .Values.driver.startupProbe | nindent 4 }}
  {{- end }}
  {{- if .Values.driver.upgradePolicy }}
  upgradePolicy:
    autoUpgrade: {{ .Values.driver.upgradePolicy.autoUpgrade | default false }}
    maxParallelUpgrades: {{ .Values.driver.upgradePolicy.maxParallelUpgrades | default 0 }}
    maxUnavailable: {{ .Values.driver.upgradePolicy.maxUnavailable | default "25%" }}
    waitForCompletion:
      timeoutSeconds: {{ .Values.driver.upgradePolicy.waitForCompletion.timeoutSeconds }}
      {{- if .Values.driver.upgradePolicy.waitForCompletion.podSelector }}
      podSelector: {{ .Values.driver.upgradePolicy.waitForCompletion.podSelector }}
      {{- end }}
    podDeletion:
      force: {{ .Values.driver.upgradePolicy.gpuPodDeletion.force | default false }}
      timeoutSeconds: {{ .Values.driver.upgradePolicy.gpuPodDeletion.timeoutSeconds }}
      deleteEmptyDir: {{ .Values.driver.upgradePolicy.gpuPodDeletion.deleteEmptyDir | default false }}
    drain:
      enable: {{ .Values.driver.upgradePolicy.drain.enable | default false }}
      force: {{ .Values.driver.upgradePolicy.drain.force | default false }}
      {{- if .Values.driver.upgradePolicy.drain.podSelector }}
      podSelector: {{ .Values.driver.upgradePolicy.drain.podSelector }}
      {{- end }}
      timeoutSeconds: {{ .Values.driver.upgradePolicy.drain.timeoutSeconds }}
      deleteEmptyDir: {{ .Values.driver.upgradePolicy.drain.deleteEmptyDir | default false }}
  {{- end }}
  {{- if .Values.daemonsets.tolerations }}
  tolerations: {{ toYaml .Values.daemonsets.tolerations | nindent 4 }}
  {{- end }}
  nodeSelector:
    gpupools.io/pool: "@POOL@"
  rdma:
    enabled: true
    useHostMofed: false
"""


def gpudirect_rdma_values(stack: StackConfig, plans: list[PoolPlan], rdma_pools: Sequence[str]) -> dict:
    """The GPU Operator values that turn GPUDirect RDMA on for `rdma_pools` (see RDMA above); empty without any."""
    mode = rdma_mode(stack, plans, rdma_pools)
    if mode is None:
        return {}
    if mode == "cluster-policy":
        return {"driver": {"rdma": dict(RDMA)}}
    driver_pools = {p.name for p in rdma_driver_pools(stack, plans)}
    return {"driver": {"nvidiaDriverCRD": {"enabled": True, "deployDefaultCR": True}},
            "extraObjects": [NVIDIA_DRIVER_TEMPLATE.replace("@NAME@", nvidia_driver_name(pool)).replace("@POOL@", pool)
                             for pool in sorted(rdma_pools) if pool in driver_pools]}


def device_plugin_values(stack: StackConfig, plans: list[PoolPlan]) -> dict:
    return {
        "config": {"map": device_plugin_config_data(plans), "default": NO_SHARING_ENTRY},
        "gfd": {"enabled": True},
        "tolerations": gpu_tolerations(stack, plans),
        # Only gpupools GPU pools, and not those served by another device plugin (Bottlerocket's own, HAMi's).
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": GPU_LABEL, "operator": "Exists"},
            {"key": DEPLOY_DEVICE_PLUGIN_LABEL, "operator": "NotIn", "values": ["false"]},
        ]}]}}},
    }


def runs_nfd(stack: StackConfig, plans: list[PoolPlan]) -> bool:
    """Whether the GPU software brings Node Feature Discovery: the GPU Operator always, the device plugin chart with GFD
    on (its dependency condition `nfd.enabled,gfd.enabled` falls through to gfd.enabled, NVIDIA/k8s-device-plugin
    deployments/helm/nvidia-device-plugin/Chart.yaml), which `device_plugin_values` sets."""
    release = next((r for r in software_plan(stack, plans).releases if r.chart in (GPU_OPERATOR, DEVICE_PLUGIN)), None)
    if release is None:
        return False
    return release.chart == GPU_OPERATOR or bool(release.values.get("gfd", {}).get("enabled"))


def software_plan(stack: StackConfig, plans: list[PoolPlan], service_monitor: dict | None = None,
                  rdma_pools: Sequence[str] = ()) -> SoftwarePlan:
    """`rdma_pools`: the InfiniBand pools that get GPUDirect RDMA (`fabric.software.rdma_pools` decides them)."""
    installer = resolve_installer(stack.target, stack.gpu_software.installer)
    out = SoftwarePlan()
    if installer == "gpu-operator":
        chart = GPU_OPERATOR
        ns = chart.namespace
        out.objects.append(namespace(ns, privileged=True))
        out.objects.append(config_map(DEVICE_PLUGIN_CONFIGMAP, ns, device_plugin_config_data(operator_served(plans))))
        if stack.target.CRITICAL_PODS_NEED_QUOTA:
            out.objects.append(gke_critical_pods_quota(GKE_OPERATOR_QUOTA, ns))
        out.releases.append(Release(chart, stack.gpu_software.version or chart.default_version,
                                    gpu_operator_values(stack, plans, service_monitor, rdma_pools)))
    elif installer == "device-plugin":
        chart = DEVICE_PLUGIN
        served = [p for p in plans if p.mechanism.installer not in (BOTTLEROCKET, HAMI)]
        if served:
            out.objects.append(namespace(chart.namespace, privileged=True))
            out.releases.append(Release(chart, stack.gpu_software.version or chart.default_version, device_plugin_values(stack, served)))
    if any(p.startup_taints for p in plans):
        readiness_software(stack, plans, out)
    if hami_served(plans):
        out.objects.append(namespace(HAMI_CHART.namespace, privileged=True))
        if stack.target.CRITICAL_PODS_NEED_QUOTA:
            # HAMi's scheduler Deployment and device-plugin DaemonSet are system-node-critical, hard-coded in the chart
            # (Project-HAMi/HAMi charts/hami/templates/scheduler/deployment.yaml, device-plugin/daemonsetnvidia.yaml).
            out.objects.append(gke_critical_pods_quota(GKE_HAMI_QUOTA, HAMI_CHART.namespace))
        out.releases.append(Release(HAMI_CHART, HAMI_CHART.default_version, hami_values(stack, plans)))
    return out


# GKE admits pods of the system-*-critical priority classes outside kube-system only in namespaces holding a quota
# scoped to them (NVIDIA/cloud-native-docs gpu-operator/manifests/input/google-gke-gpu-operator-quota.yaml, used by
# gpu-operator/google-gke.rst; Kubernetes "limit priority class consumption by default").
GKE_HAMI_QUOTA = "hami-quota"
CRITICAL_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")


def gke_critical_pods_quota(name: str, ns: str) -> dict:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns},
            "spec": {"hard": {"pods": "100"}, "scopeSelector": {"matchExpressions": [
                {"operator": "In", "scopeName": "PriorityClass", "values": list(CRITICAL_PRIORITY_CLASSES)}]}}}


NODE_READINESS_CHART = Chart(readiness.CHART_NAME, readiness.CHART_REF, "", readiness.NAMESPACE, readiness.CHART_VERSION)
GKE_READINESS_QUOTA = "node-readiness-quota"


def readiness_software(stack: StackConfig, plans: list[PoolPlan], out: SoftwarePlan) -> None:
    """The Node Readiness Controller (with the gate's rule) and the reporter DaemonSet on gated GPU nodes. The
    reporter reads a host directory, so its namespace admits privileged pods; both pods are system-*-critical."""
    ns = readiness.NAMESPACE
    out.objects.append(namespace(ns, privileged=True))
    if stack.target.CRITICAL_PODS_NEED_QUOTA:
        out.objects.append(gke_critical_pods_quota(GKE_READINESS_QUOTA, ns))
    extra = [t for t in gpu_tolerations(stack, plans) if t not in readiness.tolerations() and t["key"] != GPU_TAINT.key]
    dra_only = bool(operator_served(plans)) and not operator_device_plugin(plans)  # DRA pools (a preview): no plugin check
    out.objects.extend(readiness.reporter_objects(extra, readiness.NO_PLUGIN_STATUS_FILE if dra_only else readiness.STATUS_FILE))
    out.releases.append(Release(NODE_READINESS_CHART, NODE_READINESS_CHART.default_version, readiness.controller_values(stack.cluster.create)))
