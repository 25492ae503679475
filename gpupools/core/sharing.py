"""How a pool's GPUs are shared on each cloud: which software does it, which resource pods request, how many.

Pure decisions only. The mechanism for a pool follows from three things: the cloud, the stack's installer
(resolved from `auto`), and the pool's node OS. Everything that must change when a user edits `replicas` or
`mode` is expressed as node labels and device-plugin config entries, so those edits never replace a pool on
clouds where labels are updated in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from gpupools.core import packaged
from gpupools.core.catalog import Hardware, mig_config_name, mig_resource_name
from gpupools.core.facts import load_facts
from gpupools.core.miglayout import layout_config_name, layout_resources, layout_words, mig_parted_entries
from gpupools.stack.config import Sharing
from gpupools.core.cloud import Cloud
from gpupools.stack.errors import Problem

GPU_RESOURCE = "nvidia.com/gpu"

# Installers after `auto` is resolved (each cloud's AUTO_INSTALLER). `bottlerocket` is not chosen by users:
# Bottlerocket's NVIDIA variants ship their own device plugin, so pools on them are always served by it.
BOTTLEROCKET = "bottlerocket"

# Node labels the NVIDIA software reads.
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
# GPU Operator per-node switches: a pool whose OS already provides a component turns the operator's copy off.
DEPLOY_DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
DEPLOY_MIG_MANAGER_LABEL = "nvidia.com/gpu.deploy.mig-manager"
# The operator's switch for every operand at once (NVIDIA/gpu-operator controllers/state_manager.go,
# commonOperandsLabelKey; "false" removes all nvidia.com/gpu.deploy.* labels, so no operand DaemonSet selects the node).
DEPLOY_OPERANDS_LABEL = "nvidia.com/gpu.deploy.operands"

NO_SHARING_ENTRY = "no-sharing"

# HAMi (chart 2.10.0): its device plugin runs on nodes labelled gpu=on (values devicePlugin.nvidiaNodeSelector) and
# advertises `replicas` x nvidia.com/gpu per GPU; its scheduler places pods by the memory and compute share they
# name in these resources (values resourceMem, resourceMemPercentage, resourceCores), which the in-container
# library then enforces. nvidia.com/gpu counts vGPUs, each on a different physical GPU.
HAMI = "hami"
HAMI_NODE_SELECTOR = {"gpu": "on"}
HAMI_SCHEDULER = "hami-scheduler"
VGPU_MEMORY_RESOURCE = "nvidia.com/gpumem"  # MiB
VGPU_MEMORY_PERCENT_RESOURCE = "nvidia.com/gpumem-percentage"
VGPU_CORES_RESOURCE = "nvidia.com/gpucores"  # percent of one GPU's compute
SHARED_MODES = ("time-slicing", "mps", "vgpu")  # modes whose GPUs serve `replicas` pods each

# The `all-<profile>` layouts that the GPU Operator's default MIG config (v26.7.0,
# assets/state-mig-manager/0400_configmap.yaml) already holds; any other layout needs a custom config.
OPERATOR_DEFAULT_MIG_CONFIGS = frozenset(
    """all-disabled all-enabled all-balanced
    all-1g.5gb all-1g.5gb.me all-2g.10gb all-3g.20gb all-4g.20gb all-7g.40gb
    all-1g.10gb all-1g.10gb.me all-1g.20gb all-2g.20gb all-3g.40gb all-4g.40gb all-7g.80gb
    all-1g.6gb all-1g.6gb.me all-2g.12gb all-2g.12gb.me all-4g.24gb
    all-1g.12gb all-1g.12gb.me all-1g.24gb all-2g.24gb all-3g.47gb all-4g.47gb all-7g.94gb
    all-3g.48gb all-4g.48gb all-7g.96gb
    all-1g.18gb all-1g.18gb.me all-1g.35gb all-2g.35gb all-3g.71gb all-4g.71gb all-7g.141gb
    all-1g.36gb all-2g.36gb all-3g.72gb all-4g.72gb all-7g.144gb
    all-1g.23gb all-1g.23gb.me all-1g.45gb all-1g.47gb all-2g.45gb all-2g.47gb all-3g.90gb all-3g.93gb
    all-4g.90gb all-4g.93gb all-7g.180gb all-7g.186gb
    all-1g.34gb all-1g.34gb.me all-1g.67gb all-2g.67gb all-3g.135gb all-4g.135gb all-7g.269gb
    all-1g.35gb.me all-1g.70gb all-2g.70gb all-3g.139gb all-4g.139gb all-7g.278gb
    all-1g.24gb.me all-1g.24gb-me all-1g.24gb.gfx all-1g.24gb.me.all all-2g.48gb all-2g.48gb-me all-2g.48gb.gfx
    all-2g.48gb.me.all all-4g.96gb all-4g.96gb.gfx""".split()
)


@dataclass(frozen=True)
class Mechanism:
    """What serves one pool's GPUs, and what a pod on it requests."""

    installer: str  # gpu-operator | device-plugin | cloud | bottlerocket | hami (the device plugin that serves the pool)
    mode: str  # none | time-slicing | mps | mig | vgpu
    resource: str  # the extended resource pods request
    units_per_gpu: int  # schedulable units one physical GPU becomes
    description: str
    node_labels: dict[str, str] = field(default_factory=dict)
    device_plugin_entry: str | None = None  # named entry in the NVIDIA device-plugin config
    mig_config: str | None = None  # mig-parted config the MIG manager applies
    replicas: int | None = None
    mig_profile: str | None = None
    # A mixed MIG layout (sharing.migLayout): what one node advertises, and the layout's mig-parted entries.
    node_resources: dict[str, int] = field(default_factory=dict)
    mig_entries: tuple[dict, ...] = ()


@dataclass(frozen=True)
class PodLimit:
    """The most units of a pool's resource one container may ask for where the device plugin refuses more, and why."""

    units: int
    why: str  # short words for a plan line or an error: who refuses, and for which sharing


def units_per_pod(mechanism: Mechanism, gpus_per_node: int) -> PodLimit | None:
    """Where the device plugin fails a request for more than one shared unit (the kubelet's Allocate call fails and the
    pod with it, after it was scheduled); None where only what a node offers bounds a pod.

    - NVIDIA's device plugin with MPS (GPU Operator, the standalone chart, Bottlerocket's built-in copy): it refuses a
      request of more than one replica when `failRequestsGreaterThanOne` is set, and sets it to true for MPS where the
      config leaves it out (NVIDIA/k8s-device-plugin v0.20.0 api/config/v1/config.go, NewConfig; internal/rm/rm.go,
      ValidateRequest: "maximum request size for shared resources is 1"; releases 0.15 to 0.19 refused it for MPS
      whatever the setting). gpupools' MPS entries leave it unset
      (`device_plugin_config_entry`), and so does Bottlerocket's template for MPS (bottlerocket-os/bottlerocket-core-kit
      packages/nvidia-k8s-device-plugin/nvidia-k8s-device-plugin-conf.in).
    - Bottlerocket with time-slicing: gpupools sets `fail-requests-greater-than-one = true` (aws.bottlerocket_settings),
      which Bottlerocket's template writes as `failRequestsGreaterThanOne` (same file); the NVIDIA plugin elsewhere leaves
      it false for time-slicing, so a pod may take several time-slices there.
    - GKE's own device plugin: time-sharing refuses more than one nvidia.com/gpu per request, MPS on nodes of several
      GPUs (GoogleCloudPlatform/container-engine-accelerators pkg/gpu/nvidia/gpusharing/gpusharing.go, ValidateRequest,
      unchanged from v1.0.20 to 992db81 of 2026-06-11)."""
    mode, installer = mechanism.mode, mechanism.installer
    if mode == "mps" and installer in ("gpu-operator", "device-plugin", BOTTLEROCKET):
        return PodLimit(1, "the NVIDIA device plugin fails a pod asking for more than one MPS share (failRequestsGreaterThanOne "
                           "is on for MPS)")
    if mode == "time-slicing" and installer == BOTTLEROCKET:
        return PodLimit(1, "Bottlerocket's device plugin fails a pod asking for more than one time-slice "
                           "(fail-requests-greater-than-one = true)")
    if installer == "cloud" and mode == "time-slicing":
        return PodLimit(1, "GKE's device plugin fails a pod asking for more than one time-shared GPU")
    if installer == "cloud" and mode == "mps" and gpus_per_node > 1:
        return PodLimit(1, "GKE's device plugin fails a pod asking for more than one MPS share on nodes of several GPUs")
    return None


def resolve_installer(cloud: Cloud, installer: str) -> str:
    """`cloud`: the stack's Cloud object (`stack.target`)."""
    return cloud.AUTO_INSTALLER if installer == "auto" else installer


def device_plugin_entry_name(sharing: Sharing) -> str:
    """One entry per distinct setting: pools with equal settings share it, a change just picks another."""
    if sharing.mode in ("time-slicing", "mps"):
        return f"{sharing.mode}-{sharing.replicas}"
    return NO_SHARING_ENTRY


def device_plugin_config_entry(sharing: Sharing) -> dict:
    """A config document in the NVIDIA device plugin's v1 schema (api/config/v1: Config, Sharing, ReplicatedResources)."""
    doc: dict = {"version": "v1"}
    if sharing.mode in ("time-slicing", "mps"):
        key = "timeSlicing" if sharing.mode == "time-slicing" else "mps"
        doc["sharing"] = {key: {"resources": [{"name": GPU_RESOURCE, "replicas": sharing.replicas}]}}
    return doc


def mig_parted_config(configs: dict[str, list[dict]]) -> dict:
    """A mig-parted v1 document (api/spec/v1: version, mig-configs): `all-disabled` and the given configs."""
    return {"version": "v1", "mig-configs": {"all-disabled": [{"devices": "all", "mig-enabled": False}], **configs}}


@lru_cache(maxsize=1)
def _operator_default_configs() -> dict[str, list[dict]]:
    """The GPU Operator's own mig-parted config (`default-mig-parted-config`), as its v26.7.0 release ships it
    (NVIDIA/gpu-operator assets/state-mig-manager/0400_configmap.yaml, the `config.yaml` string unchanged; the same file
    as tests/reference/gpu-operator/default-mig-parted-config.yaml). Read only when a stack needs a config of its own."""
    return packaged.read("mig-parted-default.yaml")["mig-configs"]


def operator_default_entries(name: str) -> list[dict]:
    """The operator's own entries for one of its layouts: per GPU model (`device-filter` by PCI device ID) where a
    profile name means a different count on different GPUs (`all-1g.10gb`: 7 on an A100-80GB or H100, 4 on an A100-40GB)."""
    return _operator_default_configs()[name]


def all_profile_entries(profile: str, count: int) -> list[dict]:
    """The `all-<profile>` layout: every GPU split into `count` instances of one profile."""
    return [{"devices": "all", "mig-enabled": True, "mig-devices": {profile: count}}]


def mechanism(cloud: Cloud, installer: str, os: str | None, sharing: Sharing, hardware: Hardware, mig_strategy: str) -> Mechanism:
    """Decide the mechanism for a pool whose config already passed `sharing_problems`."""
    mode = sharing.mode
    if mode == "vgpu":
        return _hami_mechanism(installer, sharing, hardware)
    if mode == "dra":
        return _dra_mechanism(installer, sharing, hardware)
    if mode == "mig" and sharing.mig_layout:
        return _layout_mechanism(installer, sharing, mig_strategy)
    if cloud.image_device_plugin(os):
        installer = BOTTLEROCKET
    if installer == "cloud":
        return cloud.own_mechanism(sharing, hardware)
    if installer == BOTTLEROCKET:
        # Bottlerocket is no GPU Operator platform: its image brings driver, toolkit and device plugin, and the operator's
        # validator, GFD, DCGM and exporter would not become ready there. The per-operand labels keep the standalone
        # device plugin away (its affinity reads them); the operator drops them with the rest.
        labels = {DEPLOY_DEVICE_PLUGIN_LABEL: "false", DEPLOY_MIG_MANAGER_LABEL: "false", DEPLOY_OPERANDS_LABEL: "false"}
        if mode in ("time-slicing", "mps"):
            what = "time-slicing" if mode == "time-slicing" else "MPS"
            return Mechanism(installer, mode, GPU_RESOURCE, sharing.replicas, f"Bottlerocket device plugin, {what} x{sharing.replicas}",
                             node_labels=labels, replicas=sharing.replicas)
        if mode == "mig":
            count = hardware.gpu.mig_profiles[sharing.mig_profile]
            return Mechanism(installer, mode, GPU_RESOURCE, count, f"Bottlerocket device plugin, MIG {sharing.mig_profile} x{count}",
                             node_labels=labels, mig_profile=sharing.mig_profile)
        return Mechanism(installer, mode, GPU_RESOURCE, 1, "Bottlerocket device plugin, whole GPUs", node_labels=labels)
    software = "GPU Operator" if installer == "gpu-operator" else "NVIDIA device plugin"
    if mode == "mig":
        count = hardware.gpu.mig_profiles[sharing.mig_profile]
        resource = mig_resource_name(sharing.mig_profile) if mig_strategy == "mixed" else GPU_RESOURCE
        config = mig_config_name(sharing.mig_profile)
        return Mechanism(installer, mode, resource, count, f"GPU Operator MIG manager, {config} ({mig_strategy} strategy)",
                         node_labels={MIG_CONFIG_LABEL: config, DEVICE_PLUGIN_CONFIG_LABEL: NO_SHARING_ENTRY},
                         device_plugin_entry=NO_SHARING_ENTRY, mig_config=config, mig_profile=sharing.mig_profile)
    entry = device_plugin_entry_name(sharing)
    labels = {DEVICE_PLUGIN_CONFIG_LABEL: entry}
    if installer == "gpu-operator" and hardware.gpu.supports_mig:
        # Keep MIG off on pools that do not ask for it, so a MIG-capable GPU is never left half-configured.
        labels[MIG_CONFIG_LABEL] = "all-disabled"
    if mode == "none":
        return Mechanism(installer, mode, GPU_RESOURCE, 1, f"{software}, whole GPUs", node_labels=labels, device_plugin_entry=entry)
    what = "time-slicing" if mode == "time-slicing" else "MPS"
    return Mechanism(installer, mode, GPU_RESOURCE, sharing.replicas, f"{software}, {what} x{sharing.replicas} ({DEVICE_PLUGIN_CONFIG_LABEL}={entry})",
                     node_labels=labels, device_plugin_entry=entry, replicas=sharing.replicas)


def _layout_mechanism(installer: str, sharing: Sharing, mig_strategy: str) -> Mechanism:
    """The GPU Operator's MIG manager applies the pool's own mig-parted config; the first resource is the pool's."""
    layout = sharing.mig_layout or []
    config = layout_config_name(layout)
    resources = layout_resources(layout, mig_strategy)
    return Mechanism(installer, "mig", next(iter(resources)), 1, f"GPU Operator MIG manager, {config}: {layout_words(layout)} ({mig_strategy} strategy)",
                     node_labels={MIG_CONFIG_LABEL: config, DEVICE_PLUGIN_CONFIG_LABEL: NO_SHARING_ENTRY}, device_plugin_entry=NO_SHARING_ENTRY,
                     mig_config=config, node_resources=resources, mig_entries=tuple(mig_parted_entries(layout)))


# GPU allocation through NVIDIA's DRA driver (a preview, docs/sharing.md): the queue resources Kueue counts a claim of
# each DeviceClass as (gpupools.queues.kueue.device_class_mappings). A DRA pool's nodes advertise no extended resource;
# these names exist only in Kueue's quota, so they are not nvidia.com/gpu, which device-plugin pools keep.
DRA_GPU_CLASS = "gpu.nvidia.com"
DRA_MIG_CLASS = "mig.nvidia.com"
DRA_GPU_RESOURCE = "nvidia.com/dra-gpu"
DRA_MIG_RESOURCE = "nvidia.com/dra-mig"
# The DRA driver's feature gates behind each `draFeatures` word, all Alpha and off by default (kubernetes-sigs/
# dra-driver-nvidia-gpu v0.4.1 pkg/featuregates/featuregates.go: DynamicMIG, TimeSlicingSettings, MPSSupport).
DRA_FEATURE_GATES = {"dynamic-mig": "DynamicMIG", "time-slicing": "TimeSlicingSettings", "mps": "MPSSupport"}


def whole_gpus(sharing: Sharing) -> bool:
    """Each pod gets whole GPUs: mode none, or a DRA pool without MIG devices or sharing per claim."""
    return sharing.mode == "none" or (sharing.mode == "dra" and sharing.mig_profile is None and not sharing.dra_features)


def _dra_mechanism(installer: str, sharing: Sharing, hardware: Hardware) -> Mechanism:
    """The DRA driver's kubelet plugin serves the pool's GPUs; the device plugin is kept off its nodes by the per-node
    switch both gpupools' device plugins read: the GPU Operator's DaemonSet selects `nvidia.com/gpu.deploy.device-plugin:
    "true"` (NVIDIA/gpu-operator v26.7.0 assets/state-device-plugin/0500_daemonset.yaml), and the standalone chart's
    affinity excludes "false" (`pools.software.device_plugin_values`). With a MIG profile the MIG manager still makes the
    pool's static layout, and the driver hands out those existing MIG devices (mig.nvidia.com)."""
    labels = {DEPLOY_DEVICE_PLUGIN_LABEL: "false"}
    features = "".join(f", {f} per claim" for f in sharing.dra_features or ())
    if sharing.mig_profile is not None:
        count = hardware.gpu.mig_profiles[sharing.mig_profile]
        config = mig_config_name(sharing.mig_profile)
        labels[MIG_CONFIG_LABEL] = config
        return Mechanism(installer, "dra", DRA_MIG_RESOURCE, count,
                         f"preview: NVIDIA DRA driver, existing MIG devices {sharing.mig_profile} x{count} ({DRA_MIG_CLASS}, {config}){features}",
                         node_labels=labels, mig_config=config, mig_profile=sharing.mig_profile)
    if installer == "gpu-operator" and hardware.gpu.supports_mig and "dynamic-mig" not in (sharing.dra_features or ()):
        labels[MIG_CONFIG_LABEL] = "all-disabled"
    return Mechanism(installer, "dra", DRA_GPU_RESOURCE, 1, f"preview: NVIDIA DRA driver, whole GPUs ({DRA_GPU_CLASS}){features}",
                     node_labels=labels)


def _dra_problems(cloud: Cloud, installer: str, os: str | None, sharing: Sharing, hardware: Hardware | None, path: str) -> list[Problem]:
    """Where GPU allocation through DRA cannot run, or what needs the preview flag."""
    problems = []
    if cloud.image_device_plugin(os):
        problems.append(Problem(f"{path}.mode", "'dra' cannot run on os: bottlerocket: its built-in NVIDIA device plugin always serves the GPUs "
                                                "(no setting turns it off), and the DRA driver cannot allocate GPUs beside a device plugin on one node "
                                                "(dra-driver-nvidia-gpu 0.4.1 templates/validation.yaml); use os: al2023"))
    elif installer == "cloud":
        # GKE's documented way off is a node pool without GKE's driver (gpu-driver-version=disabled) and the label
        # gke-no-default-nvidia-gpu-device-plugin=true ("Prepare GKE infrastructure for DRA workloads"); gpupools keeps
        # GKE's driver with installer cloud, so it refuses instead.
        problems.append(Problem(f"{path}.mode", f"'dra' cannot run with installer 'cloud': {cloud.CLOUD_DEVICE_PLUGIN} serves the pool's GPUs and "
                                                "the DRA driver cannot allocate GPUs beside a device plugin on one node (dra-driver-nvidia-gpu 0.4.1 "
                                                "templates/validation.yaml); set gpuSoftware.installer: gpu-operator"))
    if sharing.dra_features and sharing.preview is not True:
        problems.append(Problem(f"{path}.draFeatures", "needs preview: true: DynamicMIG, time-slicing and MPS per claim are Alpha in NVIDIA's DRA "
                                                       "driver (v0.4.1 pkg/featuregates/featuregates.go), off by default"))
    if sharing.mig_profile is not None and sharing.dra_features and "dynamic-mig" in sharing.dra_features:
        problems.append(Problem(f"{path}.migProfile", "not allowed with draFeatures dynamic-mig: the driver makes MIG devices per claim, a static "
                                                      "layout would hold the GPUs"))
    if sharing.mig_profile is not None and installer != "gpu-operator":
        problems.append(Problem(f"{path}.migProfile", "with mode 'dra' needs the GPU Operator's MIG manager to make the static layout (set "
                                                      "gpuSoftware.installer to gpu-operator)"))
    if sharing.mig_profile is not None and hardware is not None and sharing.mig_profile not in hardware.gpu.mig_profiles:
        problems.append(Problem(f"{path}.migProfile", f"{sharing.mig_profile!r} is not a MIG profile of {hardware.gpu.name}; it has "
                                                      f"{', '.join(hardware.gpu.mig_profiles) or 'none'}"))
    return problems


def _hami_mechanism(installer: str, sharing: Sharing, hardware: Hardware) -> Mechanism:
    """HAMi's device plugin replaces NVIDIA's on the pool's nodes: the GPU Operator honours its per-node switch, the
    standalone plugin's affinity avoids nodes that carry it; the operator (where installed) still brings driver,
    toolkit and DCGM exporter."""
    labels = {**HAMI_NODE_SELECTOR, DEPLOY_DEVICE_PLUGIN_LABEL: "false"}
    if installer == "gpu-operator" and hardware.gpu.supports_mig:
        labels[MIG_CONFIG_LABEL] = "all-disabled"
    limits = "memory and compute limits per pod"
    if sharing.memory_scaling is not None and sharing.memory_scaling != 1:
        limits += f", memory x{sharing.memory_scaling:g}"
    if sharing.memory_per_pod is not None:
        limits += f", {sharing.memory_per_pod} memory per pod by default"
    return Mechanism(HAMI, "vgpu", GPU_RESOURCE, sharing.replicas, f"HAMi vGPU x{sharing.replicas} ({limits})", node_labels=labels,
                     replicas=sharing.replicas)


def parse_gpu_memory(text: str) -> tuple[str, int]:
    """("percent", 25) for "25%", ("mib", 8192) for "8Gi" or "8192Mi": the unit HAMi's resource for it counts in."""
    if text.endswith("%"):
        return "percent", int(text[:-1])
    return "mib", int(text[:-2]) * (1024 if text.endswith("Gi") else 1)


def vgpu_memory_limits(text: str) -> dict[str, int]:
    """The container limit HAMi reads for a memory share or amount."""
    unit, amount = parse_gpu_memory(text)
    return {VGPU_MEMORY_PERCENT_RESOURCE if unit == "percent" else VGPU_MEMORY_RESOURCE: amount}


def gpu_memory_mib(hardware: Hardware, scaling: float | None) -> int:
    """Memory one GPU offers HAMi's scheduler: the catalog's usable MiB (the marketing size where no source reports
    it) times deviceMemoryScaling."""
    return int(hardware.gpu.memory_mib * (scaling or 1))


def gpu_memory_problem(text: str, hardware: Hardware | None, scaling: float | None) -> str | None:
    """Why a vGPU cannot get this much memory, or None."""
    unit, amount = parse_gpu_memory(text)
    if unit == "percent":
        return f"{text} is more than a whole GPU; a vGPU's memory share is 1% to 100%" if amount > 100 else None
    if hardware is not None and amount > gpu_memory_mib(hardware, scaling):
        scaled = f" x {scaling:g} memoryScaling" if scaling not in (None, 1) else ""
        return (f"{text} ({amount} MiB) is more than one {hardware.gpu.name} GPU of {hardware.instance_type} offers "
                f"({_memory_words(hardware)}{scaled} = {gpu_memory_mib(hardware, scaling)} MiB)")
    return None


def _memory_words(hardware: Hardware) -> str:
    gpu = hardware.gpu
    return f"{gpu.usable_memory} MiB usable" if gpu.usable_memory else f"{gpu.memory_gb} GB"


def gke_mechanism(sharing: Sharing, hardware: Hardware) -> Mechanism:
    """GKE's own device plugin: sharing is a node-pool setting, and MIG partitions are still `nvidia.com/gpu`."""
    if sharing.mode == "mig":
        # GKE's partitioner makes as many partitions of the one size as fit on each GPU (gke_partition_sizes).
        count = gke_partition_sizes(hardware.accelerator)[sharing.mig_profile]
        return Mechanism("cloud", "mig", GPU_RESOURCE, count, f"GKE GPU partitions {sharing.mig_profile} x{count}", mig_profile=sharing.mig_profile)
    if sharing.mode in ("time-slicing", "mps"):
        what = "time-sharing" if sharing.mode == "time-slicing" else "MPS"
        return Mechanism("cloud", sharing.mode, GPU_RESOURCE, sharing.replicas, f"GKE {what} x{sharing.replicas}", replicas=sharing.replicas)
    return Mechanism("cloud", "none", GPU_RESOURCE, 1, "GKE device plugin, whole GPUs")


def sharing_problems(cloud: Cloud, installer: str, os: str | None, sharing: Sharing, hardware: Hardware | None, path: str) -> list[Problem]:
    """Combinations the hardware, the cloud or the chosen software cannot do, each with the reason."""
    problems = []
    mode = sharing.mode
    if mode in SHARED_MODES and sharing.replicas is None:
        problems.append(Problem(f"{path}.replicas", f"required with mode {mode!r}: how many workloads share one GPU (2 to 48)"))
    if mode in ("none", "mig") and sharing.replicas is not None:
        problems.append(Problem(f"{path}.replicas", f"{sharing.replicas} is not allowed with mode {mode!r}; replicas apply to time-slicing, mps and vgpu only"))
    for alias, value in (("memoryScaling", sharing.memory_scaling), ("memoryPerPod", sharing.memory_per_pod)):
        if mode != "vgpu" and value is not None:
            problems.append(Problem(f"{path}.{alias}", f"{value!r} is not allowed with mode {mode!r}; {alias} applies to mode 'vgpu' only"))
    if mode == "vgpu":
        problems += _vgpu_problems(cloud, installer, os, sharing, hardware, path)
    if mode == "mig" and sharing.mig_profile is None and sharing.mig_layout is None:
        problems.append(Problem(f"{path}.migProfile", "required with mode 'mig': the MIG profile every GPU is split into (or migLayout)"))
    if sharing.mig_layout is not None and (mode != "mig" or sharing.mig_profile is not None):
        problems.append(Problem(f"{path}.migLayout", "applies to mode 'mig' without migProfile: give either one profile for every GPU or a layout"))
    for alias, value in (("preview", sharing.preview), ("draFeatures", sharing.dra_features)):
        if mode != "dra" and value is not None:
            problems.append(Problem(f"{path}.{alias}", f"{value!r} is not allowed with mode {mode!r}; {alias} applies to mode 'dra' only"))
    if mode == "dra":
        problems += _dra_problems(cloud, installer, os, sharing, hardware, path)
    if mode not in ("mig", "dra") and sharing.mig_profile is not None:
        problems.append(Problem(f"{path}.migProfile", f"{sharing.mig_profile!r} is not allowed with mode {mode!r}; migProfile applies to mode 'mig' only"))
    bottlerocket = cloud.image_device_plugin(os)
    if mode == "mig":
        if installer == "device-plugin" and not bottlerocket:
            problems.append(Problem(f"{path}.mode", "'mig' needs the GPU Operator's MIG manager or the cloud's own MIG support; the standalone device plugin cannot partition GPUs (set gpuSoftware.installer to gpu-operator)"))
        if hardware is not None and (sharing.mig_profile is not None or sharing.mig_layout is not None):
            gpu = hardware.gpu
            if not gpu.supports_mig:
                problems.append(Problem(f"{path}.mode", f"'mig' is not possible on {hardware.instance_type}: its {gpu.name} GPU has no MIG support "
                                                        f"(MIG needs A100, H100, H200, B200, B300, RTX PRO 6000 or newer); use time-slicing, mps or vgpu"))
            elif gpu.mig_unavailable:
                problems.append(Problem(f"{path}.mode", f"'mig' is not possible on {hardware.instance_type}: {gpu.mig_unavailable}; use time-slicing, mps or vgpu"))
            elif sharing.mig_profile is None:
                pass  # a layout: gpupools.core.miglayout
            elif installer == "cloud" and cloud.OWN_SHARING:
                sizes = gke_partition_sizes(hardware.accelerator)
                if sharing.mig_profile not in sizes:
                    made = ", ".join(f"{size} (x{n})" for size, n in sizes.items()) or "none"
                    problems.append(Problem(f"{path}.migProfile", f"{sharing.mig_profile!r} is not a partition size GKE makes for {hardware.accelerator}; "
                                                                  f"GKE's own MIG makes {made} per GPU (or set gpuSoftware.installer: gpu-operator)"))
            elif sharing.mig_profile not in gpu.mig_profiles:
                problems.append(Problem(f"{path}.migProfile", f"{sharing.mig_profile!r} is not a MIG profile of {gpu.name}; it has {', '.join(gpu.mig_profiles)}"))
    return problems


def _vgpu_problems(cloud: Cloud, installer: str, os: str | None, sharing: Sharing, hardware: Hardware | None, path: str) -> list[Problem]:
    """Where HAMi cannot run: it needs its own device plugin to own nvidia.com/gpu on the node, and NVIDIA's
    container runtime as the node's default runtime (HAMi's stated prerequisite).

    Not refused on Blackwell (B200, B300, RTX PRO 6000): at v2.10.0 HAMi's device plugin registers every GPU NVML lists,
    whatever its model (pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go, getAPIDevices, lines 92-207; only
    unified-memory GPUs without a memory reading need preConfiguredDeviceMemory, none of the catalog's), and HAMi-core
    is built against CUDA 13.3 (docker/Dockerfile line 2), which knows Blackwell. The model lists in the chart's
    device config (migProfileAllowlist, B200 and RTX PRO 6000 among them) govern HAMi's own MIG mode only."""
    problems = []
    if cloud.image_device_plugin(os):
        problems.append(Problem(f"{path}.mode", "'vgpu' cannot run on os: bottlerocket: its built-in NVIDIA device plugin always serves nvidia.com/gpu "
                                                "(no setting turns it off), and HAMi's device plugin must own that resource; use os: al2023"))
    if cloud.OWN_SHARING and installer == "cloud":
        problems.append(Problem(f"{path}.mode", "'vgpu' cannot run with installer 'cloud' on gcp: GKE's own device plugin serves nvidia.com/gpu on COS "
                                                "nodes, which have no NVIDIA container runtime for HAMi; set gpuSoftware.installer: gpu-operator"))
    if sharing.memory_per_pod is not None:
        problem = gpu_memory_problem(sharing.memory_per_pod, hardware, sharing.memory_scaling)
        if problem:
            problems.append(Problem(f"{path}.memoryPerPod", problem))
    return problems


def installer_problems(cloud: Cloud, installer: str, version: str | None = None) -> list[Problem]:
    problems = []
    if installer in cloud.REFUSED_INSTALLERS:  # each cloud says why, and what to use instead
        problems.append(Problem("gpuSoftware.installer", cloud.REFUSED_INSTALLERS[installer]))
    resolved = resolve_installer(cloud, installer)
    if version is not None:
        if resolved == "gpu-operator" and not version.startswith("v"):
            problems.append(Problem("gpuSoftware.version", f"{version!r} is not a GPU Operator chart version; they are spelled with a leading v, e.g. v26.7.0"))
        elif resolved == "device-plugin" and version.startswith("v"):
            problems.append(Problem("gpuSoftware.version", f"{version!r} is not an nvidia-device-plugin chart version; they have no leading v, e.g. 0.20.0"))
        elif resolved == "cloud":
            problems.append(Problem("gpuSoftware.version", f"{version!r} pins no chart with installer 'cloud': {cloud.SERVICE} manages its own GPU "
                                                           f"software ({cloud.CLOUD_DEVICE_PLUGIN} and the driver); drop version"))
    return problems


def gke_partition_sizes(accelerator: str | None) -> dict[str, int]:
    """The partition sizes GKE's own MIG makes for an accelerator, with how many per GPU: sizes its partitioner
    creates (container-engine-accelerators partition_gpu/partition_gpu.go) that its device plugin also advertises
    (pkg/gpu/nvidia/mig/mig.go); see facts_gcp.yaml."""
    return load_facts().gke_partitions.get(accelerator or "", {})
