"""GPU node pools: the taint that keeps other pods off them, and sharing settings the hardware can honour."""

from __future__ import annotations

from gpupools.core.catalog import load_catalog
from gpupools.core.sharing import DEPLOY_DEVICE_PLUGIN_LABEL, HAMI_NODE_SELECTOR
from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from gpupools.policies._readback import (
    AKS_AGENT_POOL,
    BOTTLEROCKET_GPU_BY_KEY,
    CONFIG_MAP,
    DEVICE_PLUGIN_CONFIGMAP,
    EC2_NODE_CLASS,
    EKS_NODE_GROUP,
    GENERIC_MIG_CONFIGS,
    KARPENTER_NODE_POOL,
    GKE_COMPUTE_CLASS,
    GKE_NODE_POOL,
    GPU_TAINT_KEY,
    HAMI_DEFAULT_SPLIT_COUNT,
    HELM_RELEASE,
    LAUNCH_TEMPLATE,
    MIG_CONFIG_LABEL,
    _chart_name,
    bottlerocket_settings,
    bottlerocket_sharing,
    device_plugin_entry,
    gke_accelerators,
    gpu_pool,
    is_gpu_pool,
    mig_layouts,
    mig_profile_of_config,
    replicated_resources,
)
from gpupools.core.miglayout import entries_problems
from gpupools.policies._props import as_int, entries, get, is_unknown, items

# --------------------------------------------------------------------------------------------------------------------
# gpu-pool-taint


def _has_gpu_taint(resource_type: str, props) -> bool | None:
    """True/False, or None when the taints are not known yet (preview)."""
    if resource_type == AKS_AGENT_POOL:
        taints = get(props, "nodeTaints")
        if is_unknown(taints):
            return None
        for taint in items(taints):
            if isinstance(taint, str):
                key, _, effect = taint.partition(":")
                if key.split("=", 1)[0] == GPU_TAINT_KEY and effect == "NoSchedule":
                    return True
        return False
    if resource_type in (KARPENTER_NODE_POOL, GKE_COMPUTE_CLASS):
        taints = get(props, "spec", "template", "spec", "taints") if resource_type == KARPENTER_NODE_POOL else get(props, "spec", "nodePoolConfig", "taints")
        if is_unknown(taints):
            return None
        return any(get(t, "key") == GPU_TAINT_KEY and get(t, "effect") == "NoSchedule" for t in items(taints))
    taints = get(props, "taints") if resource_type == EKS_NODE_GROUP else get(props, "nodeConfig", "taints")
    if is_unknown(taints):
        return None
    return any(get(t, "key") == GPU_TAINT_KEY and get(t, "effect") == "NO_SCHEDULE" for t in items(taints))


def validate_gpu_taint(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in (EKS_NODE_GROUP, AKS_AGENT_POOL, GKE_NODE_POOL, KARPENTER_NODE_POOL, GKE_COMPUTE_CLASS) or not is_gpu_pool(args.resource_type, args.props):
        return
    if _has_gpu_taint(args.resource_type, args.props) is False:
        spelled = {EKS_NODE_GROUP: "taints: [{key: nvidia.com/gpu, value: present, effect: NO_SCHEDULE}]",
                   KARPENTER_NODE_POOL: "spec.template.spec.taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]",
                   AKS_AGENT_POOL: "nodeTaints: [nvidia.com/gpu=present:NoSchedule]",
                   GKE_NODE_POOL: "nodeConfig.taints: [{key: nvidia.com/gpu, value: present, effect: NO_SCHEDULE}]",
                   GKE_COMPUTE_CLASS: "spec.nodePoolConfig.taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]"}[args.resource_type]
        report(f"GPU node pool {args.name!r} has no nvidia.com/gpu NoSchedule taint, so any pod may land on (and pay for) "
               f"its GPU nodes; add {spelled}", None)


gpu_pool_taint = ResourceValidationPolicy(
    name="gpu-pool-taint",
    description="GPU node pools carry the nvidia.com/gpu NoSchedule taint, so only pods that ask for GPUs run on them.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_gpu_taint,
)

# --------------------------------------------------------------------------------------------------------------------
# gpu-sharing-sane

DEFAULT_MAX_REPLICAS = 16


def _max_replicas(args: ResourceValidationArgs) -> int:
    return int(args.get_config().get("maxReplicas", DEFAULT_MAX_REPLICAS))


def _check_replicas(where: str, replicas, limit: int, report: ReportViolation) -> None:
    if is_unknown(replicas) or replicas is None:
        return
    count = as_int(replicas)
    if count is None or count < 1:
        report(f"{where}: replicas {replicas!r} is not a positive whole number", None)
    elif count > limit:
        report(f"{where}: {count} workloads per GPU exceeds the maximum of {limit}; each gets about 1/{count} of the GPU's "
               f"time and memory bandwidth (raise maxReplicas in the policy config if this is intended)", None)


def _check_device_plugin_data(where: str, data, limit: int, report: ReportViolation) -> None:
    for key, text in entries(data):
        if is_unknown(text):
            continue
        doc = device_plugin_entry(text)
        if doc is None:
            report(f"{where} entry {key!r} is not an NVIDIA device-plugin config (YAML with version: v1)", None)
            continue
        for strategy, _name, replicas in replicated_resources(doc):
            _check_replicas(f"{where} entry {key!r} ({strategy})", replicas, limit, report)


def _check_mig_labels(args: ResourceValidationArgs, report: ReportViolation, layouts: dict[str, list] | None = None) -> None:
    """`layouts`: the operator's custom MIG config, which replaces its defaults (None: the defaults hold)."""
    pool = gpu_pool(args.resource_type, args.name, args.props)
    if pool is None:
        return
    config = pool.labels.get(MIG_CONFIG_LABEL)
    if config is None or config in GENERIC_MIG_CONFIGS and layouts is None:
        return
    if layouts is not None and config not in layouts:
        report(f"pool {pool.pool!r}: MIG layout {config!r} is not in the GPU Operator's custom MIG config, which replaces the "
               f"operator's defaults; it has {', '.join(layouts) or 'none'}", None)
    elif config in GENERIC_MIG_CONFIGS:
        return
    elif pool.gpu is None:
        report(f"pool {pool.pool!r} asks for MIG layout {config!r} but its GPU is unknown to the gpupools catalog", None)
    elif not pool.gpu.supports_mig:
        report(f"pool {pool.pool!r} asks for MIG layout {config!r} but its {pool.gpu.name} GPU has no MIG support", None)
    elif layouts is not None and config in layouts and mig_profile_of_config(pool.gpu, config) is None:
        entries_ = [e for e in items(layouts[config]) if isinstance(e, dict)]
        for problem in entries_problems(pool.gpu, pool.gpus_per_node or 0, entries_, f"pool {pool.pool!r}: MIG layout {config!r}"):
            report(problem, None)
    elif mig_profile_of_config(pool.gpu, config) is None:
        have = ", ".join(f"all-{p.replace('+', '.')}" for p in pool.gpu.mig_profiles)
        report(f"pool {pool.pool!r}: MIG layout {config!r} does not exist on {pool.gpu.name}; it has {have}", None)


def _check_gke(args: ResourceValidationArgs, limit: int, report: ReportViolation) -> None:
    pool = gpu_pool(args.resource_type, args.name, args.props)
    for i, accelerator in enumerate(gke_accelerators(args.props)):
        where = f"node pool {args.name!r} guestAccelerators[{i}]"
        _check_replicas(f"{where}.gpuSharingConfig.maxSharedClientsPerGpu",
                        get(accelerator, "gpuSharingConfig", "maxSharedClientsPerGpu"), limit, report)
        partition = get(accelerator, "gpuPartitionSize")
        if not isinstance(partition, str) or not partition or pool is None:
            continue
        if pool.gpu is None:
            report(f"{where}.gpuPartitionSize {partition!r}: the GPU {get(accelerator, 'type')!r} is unknown to the gpupools catalog", None)
        elif partition not in pool.gpu.mig_profiles:
            have = ", ".join(pool.gpu.mig_profiles) or "no MIG profiles"
            report(f"{where}.gpuPartitionSize {partition!r} is not a MIG profile of {pool.gpu.name}; it has {have}", None)


def _check_bottlerocket(args: ResourceValidationArgs, limit: int, report: ReportViolation) -> None:
    node_class = args.resource_type == EC2_NODE_CLASS
    nvidia = bottlerocket_settings(get(args.props, "spec", "userData") if node_class else get(args.props, "userData"))
    if nvidia is None:
        return
    mode, replicas, profiles = bottlerocket_sharing(nvidia)
    where = f"{'EC2NodeClass' if node_class else 'launch template'} {args.name!r} Bottlerocket settings"
    if mode in ("time-slicing", "mps"):
        _check_replicas(f"{where} ({mode})", replicas, limit, report)
    for key, profile in profiles.items():
        model = load_catalog().gpus.get(BOTTLEROCKET_GPU_BY_KEY.get(key, ""))
        if model is None:
            report(f"{where}: MIG settings name GPU {key!r}, which gpupools does not know", None)
        elif profile not in model.mig_profiles:
            report(f"{where}: MIG profile {profile!r} does not exist on {model.name}; it has {', '.join(model.mig_profiles)}", None)


def _hami_pool(args: ResourceValidationArgs) -> str | None:
    """The pool name when a GPU node pool is labelled for HAMi's device plugin."""
    pool = gpu_pool(args.resource_type, args.name, args.props)
    if pool is None or any(pool.labels.get(k) != v for k, v in HAMI_NODE_SELECTOR.items()):
        return None
    return pool.pool


def _check_hami_pool(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Two device plugins cannot both serve nvidia.com/gpu on one node: HAMi's pools keep NVIDIA's off."""
    pool = _hami_pool(args)
    if pool is not None and gpu_pool(args.resource_type, args.name, args.props).labels.get(DEPLOY_DEVICE_PLUGIN_LABEL) != "false":
        report(f"pool {pool!r} is labelled for HAMi's device plugin (gpu=on) but not {DEPLOY_DEVICE_PLUGIN_LABEL}=false, so the GPU "
               f"Operator's device plugin would serve nvidia.com/gpu there too; add that label", None)


def _check_hami_release(name: str, props, limit: int, report: ReportViolation) -> None:
    split = get(props, "values", "devicePlugin", "deviceSplitCount")
    _check_replicas(f"release {name!r} values.devicePlugin.deviceSplitCount", HAMI_DEFAULT_SPLIT_COUNT if split is None else split, limit, report)


def validate_sharing(args: ResourceValidationArgs, report: ReportViolation, layouts: dict[str, list] | None = None) -> None:
    limit = _max_replicas(args)
    typ, props = args.resource_type, args.props
    if typ == CONFIG_MAP and get(props, "metadata", "name") == DEVICE_PLUGIN_CONFIGMAP:
        _check_device_plugin_data(f"ConfigMap {DEVICE_PLUGIN_CONFIGMAP}", get(props, "data"), limit, report)
    elif typ == HELM_RELEASE and _chart_name(get(props, "chart")) == "nvidia-device-plugin":
        _check_device_plugin_data(f"release {args.name!r} values.config.map", get(props, "values", "config", "map"), limit, report)
    elif typ == HELM_RELEASE and _chart_name(get(props, "chart")) == "hami":
        _check_hami_release(args.name, props, limit, report)
    elif typ in (EKS_NODE_GROUP, AKS_AGENT_POOL, GKE_NODE_POOL, KARPENTER_NODE_POOL):
        _check_mig_labels(args, report, layouts)
        _check_hami_pool(args, report)
        if typ == GKE_NODE_POOL:
            _check_gke(args, limit, report)
    elif typ in (LAUNCH_TEMPLATE, EC2_NODE_CLASS):
        _check_bottlerocket(args, limit, report)


def validate_sharing_stack(args: StackValidationArgs, report: ReportViolation) -> None:
    """Every resource's own sharing settings, and across resources: a pool labelled for HAMi has HAMi installed."""
    config = args.get_config()
    hami_pools = []
    layouts = mig_layouts([(r.resource_type, r.name, r.props) for r in args.resources])
    for r in args.resources:
        one = ResourceValidationArgs(r.resource_type, r.props, r.urn, r.name, r.opts, r.provider, config)
        validate_sharing(one, lambda message, urn=None, r=r: report(message, urn or r.urn), layouts)
        pool = _hami_pool(one)
        if pool is not None:
            hami_pools.append((pool, r.urn))
    installed = any(r.resource_type == HELM_RELEASE and _chart_name(get(r.props, "chart")) == "hami" for r in args.resources)
    if not installed:
        for pool, urn in hami_pools:
            report(f"pool {pool!r} is labelled for HAMi's vGPUs (gpu=on) but the stack installs no hami release, so nothing advertises "
                   f"its GPUs; install HAMi's chart or remove the label", urn)


gpu_sharing_sane = StackValidationPolicy(
    name="gpu-sharing-sane",
    description="GPU sharing stays within a sane number of workloads per GPU, MIG layouts exist on the pool's GPU, and vGPU pools have HAMi.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "maxReplicas": {"type": "integer", "minimum": 1, "maximum": 48, "default": DEFAULT_MAX_REPLICAS,
                        "description": "Most workloads allowed to share one GPU (time-slicing replicas, MPS clients, GKE "
                                       "maxSharedClientsPerGpu, HAMi deviceSplitCount)."},
    }),
    validate=validate_sharing_stack,
)

POLICIES = [gpu_pool_taint, gpu_sharing_sane]
