"""The second validation pass: what only the catalog and the chosen cloud can judge."""

from __future__ import annotations

from collections import Counter
from datetime import date

from gpupools.fabric.computedomain import gpu_allocation_problems
from gpupools.fabric.dragpu import dra_driver_problems, stack_problems as dra_stack_problems
from gpupools.core.cloud import Cloud
from gpupools.autoscaling.choice import autoscaler_problems, resolve_autoscaler
from gpupools.capacity.sources import capacity_key_problems, has as has_capacity, QUEUED, shared_reservation_problems
from gpupools.core.catalog import load_catalog
from gpupools.core.pools import GPU_TAINT
from gpupools.health.readiness import READINESS_TAINT
from gpupools.clouds.common import version_problems
from gpupools.clouds.node_settings import stack_node_problems, system_node_problems
from gpupools.stack.config import LABEL_KEY, LABEL_VALUE, RESERVED_LABEL_PREFIXES, Cluster, Department, GpuSoftware, Pool, Sharing, Team
from gpupools.stack.errors import Problem, describe
from gpupools.core.miglayout import layout_problems, placement_problems
from gpupools.core.sharing import BOTTLEROCKET, HAMI_NODE_SELECTOR, installer_problems, resolve_installer, sharing_problems
from gpupools.queues.kueue import CHART as KUEUE
from gpupools.queues.kai import CHART as KAI, RESERVATION_NAMESPACE as KAI_RESERVATION, SCALE_ADJUST_NAMESPACE as KAI_SCALE_ADJUST, kai_problems
from gpupools.monitoring.plan import NAMESPACE as MONITORING
from gpupools.pools.software import DEVICE_PLUGIN, GPU_OPERATOR, HAMI_CHART
from gpupools.fabric.plan import fabric_problems


# The non-GPU pool gpupools creates for cluster add-ons is called "system" on every cloud.
RESERVED_POOL_NAMES = frozenset({"system"})


# A new VPC gives each zone a public and a private /20 of 10.0.0.0/16 (see clouds.aws.subnet_layout).


def semantic_problems(module: Cloud, cluster: Cluster | None, default_sharing: Sharing, pools: list[tuple[int, Pool]],
                      software: GpuSoftware, teams: list[Team], autoscaler: str = "auto", providers: dict | None = None,
                      today: date | None = None, quotas: str = "kueue", written_pool_names: frozenset[str] = frozenset(),
                      departments: list[Department] | None = None) -> list[Problem]:
    """`module`: the stack's Cloud object, resolved once by the caller from its cloud and cluster mode (`stack.target`);
    every check below asks it. `written_pool_names`: the names of pools the stack file has but that failed their own
    checks (reported there); a team that names one is not reported again, one root cause, one error."""
    catalog = load_catalog()
    installer = resolve_installer(module, software.installer)
    problems = installer_problems(module, software.installer, software.version)
    problems += gpu_allocation_problems(software.dra_gpu_allocation)
    problems += dra_driver_problems(software.dra_driver)
    problems += autoscaler_problems(module, autoscaler)
    problems += module.region_problems(providers or {})
    if cluster is not None:
        problems += module.cluster_problems(cluster)
        problems += system_node_problems(module, cluster)
        if cluster.managed_mode not in module.CLUSTER_MODES:
            problems.append(Problem("cluster.mode", f"{cluster.managed_mode!r} is not a mode of {module.SERVICE}; {module.NAME} offers "
                                                    f"{', '.join(module.CLUSTER_MODES)}"))
        problems += version_problems(cluster, module.KUBERNETES_RELEASES, module.SERVICE, today or date.today())
        zones = sorted({z for _, pool in pools for z in (pool.zones or [])})
        most = module.NEW_NETWORK_MAX_ZONES
        if most is not None and cluster.create and not cluster.subnet_ids and len(zones) > most:
            problems.append(Problem("pools", f"the pools ask for {len(zones)} zones ({', '.join(zones)}); a new VPC spans at most {most}"))
    counts = Counter(pool.name for _, pool in pools)
    example_zone = module.example_zone(cluster, providers or {})  # a zone of the stack's own region, for messages that ask for one
    vgpu: list[tuple[str, Sharing]] = []
    dra_on: list[tuple[str, str, bool, bool]] = []  # each pool's sharing path, mode, rack-scale or not, GPU Operator device plugin or not
    queued_on: list[tuple] = []  # what KAI's checks need per pool
    for index, pool in pools:
        path = f"pools[{index}]"
        if pool.name in RESERVED_POOL_NAMES:
            problems.append(Problem(f"{path}.name", f"{pool.name!r} is reserved for the cluster's own CPU pool; pick another pool name"))
        if counts[pool.name] > 1:
            problems.append(Problem(f"{path}.name", f"{pool.name!r} is used by more than one pool; pool names must be unique in a stack"))
        if pool.min_nodes > pool.max_nodes:
            problems.append(Problem(f"{path}.minNodes", f"{pool.min_nodes} is greater than maxNodes ({pool.max_nodes}); minNodes must be between 0 and maxNodes"))
        problems += _label_problems(pool, path, module)
        problems += _taint_problems(pool, path, module)
        problems += module.pool_problems(pool, path)
        problems += stack_node_problems(module, pool, path, resolve_autoscaler(module, cluster.create if cluster else True, autoscaler))
        if pool.instance_types and not getattr(module, "MULTI_TYPE_POOLS", False):
            problems.append(Problem(f"{path}.instanceTypes", f"{module.SERVICE} node pools have one {module.KIND_WORD} each; give instanceType, "
                                                             f"or one pool per {module.KIND_WORD}"))
        hardware, found = module.resolve(pool, catalog, path)
        problems += found
        limit, scope = module.max_nodes(pool, cluster, hardware)
        if pool.max_nodes > limit:
            problems.append(Problem(f"{path}.maxNodes", f"{pool.max_nodes} is above the limit of {limit:,} nodes {scope}; "
                                                        f"lower maxNodes or split the pool"))
        problems += module.zone_problems(pool, path, cluster, providers or {}, hardware)
        problems += capacity_key_problems(pool, path)
        problems += module.capacity_problems(pool, path, resolve_autoscaler(module, cluster.create if cluster else True, autoscaler), cluster, hardware)
        problems += module.managed_pool_problems(pool, path, installer, cluster)
        sharing = pool.sharing if pool.sharing is not None else default_sharing
        sharing_path = f"{path}.sharing" if pool.sharing is not None else "sharing"
        problems += sharing_problems(module, installer, pool.os, sharing, hardware, sharing_path)
        problems += module.pool_sharing_problems(pool, sharing, hardware, sharing_path)
        reported = any(p.path == f"{sharing_path}.mode" for p in problems)  # no MIG there at all: one root cause, one error
        if sharing.mode == "mig" and sharing.mig_layout is not None and sharing.mig_profile is None and not reported:
            problems += _mig_layout_problems(module, installer, pool, sharing, hardware, software, f"{sharing_path}.migLayout")
        problems += fabric_problems(module, cluster, pool, sharing, hardware, path, example_zone)
        problems += _driver_branch_problems(module, installer, software, pool, hardware)
        if sharing.mode == "vgpu":
            vgpu.append((sharing_path, sharing))
        dra_on.append((sharing_path, sharing.mode, hardware is not None and hardware.gpu.nvlink_domain is not None,
                       installer == "gpu-operator" and not module.image_device_plugin(pool.os) and sharing.mode != "vgpu"))
        queued_on.append((index, pool, sharing, sharing_path, BOTTLEROCKET if module.image_device_plugin(pool.os) else installer))
    problems += shared_reservation_problems(pools)
    problems += _hami_setting_problems(vgpu)
    problems += dra_stack_problems(dra_on, quotas, bool(teams), resolve_autoscaler(module, cluster.create if cluster else True, autoscaler))
    problems += _team_problems(teams, {pool.name for _, pool in pools} | written_pool_names, quotas, module)
    problems += _queued_pool_problems(pools, teams, quotas)
    problems += kai_problems(queued_on, teams, departments or [], quotas)
    if quotas in module.REFUSED_QUOTAS:  # the cluster's mode says why, and what to use instead
        problems.append(Problem("quotas", module.REFUSED_QUOTAS[quotas]))
    return problems


def _driver_branch_problems(module, installer: str, software: GpuSoftware, pool: Pool, hardware) -> list[Problem]:
    """A pinned driver older than the pool's GPU: its branch does not know the device (catalog.yaml minDriver). Where
    the node image brings the driver, a pinned version is refused on its own (gpupools.upgrades.policy)."""
    pinned = software.driver_version
    if not pinned or installer != "gpu-operator" or module.IMAGE_BRINGS_DRIVER or hardware is None or not hardware.gpu.min_driver:
        return []
    branch = int(pinned.split(".")[0])
    if branch >= hardware.gpu.min_driver:
        return []
    return [Problem("gpuSoftware.driverVersion", f"{pinned} is branch {branch}; pool {pool.name!r} ({hardware.instance_type}, "
                                                 f"{hardware.gpu.name}) needs branch {hardware.gpu.min_driver} or later, the oldest that knows the GPU")]


def _mig_layout_problems(module, installer: str, pool: Pool, sharing: Sharing, hardware, software: GpuSoftware, path: str) -> list[Problem]:
    """A layout needs the GPU Operator's MIG manager, a GPU with MIG, and GPUs that can hold it (gpupools.core.miglayout)."""
    found = placement_problems(installer, module.image_device_plugin(pool.os), module.SERVICE, path)
    if found or hardware is None or not hardware.gpu.supports_mig or hardware.gpu.mig_unavailable:
        return found  # a GPU without MIG is reported on the pool's mode
    return layout_problems(hardware.gpu, hardware.instance_type, hardware.gpus_per_node, sharing.mig_layout, software.mig_strategy, path)


def _queued_pool_problems(pools: list[tuple[int, Pool]], teams: list[Team], quotas: str) -> list[Problem]:
    """A queued pool's nodes come only through ProvisioningRequests, which Kueue's admission check makes for the
    workloads of the teams that queue on the pool; without such a team nothing ever starts a node."""
    problems = []
    for index, pool in pools:
        if not has_capacity(pool, QUEUED):
            continue
        users = [t for t in teams if t.pool_names is None or pool.name in t.pool_names]
        if quotas != "kueue" or not users:
            problems.append(Problem(f"pools[{index}].capacity", "queued: nodes come only through Kueue's ProvisioningRequest admission check; "
                                                                "set gpupools:quotas: kueue and give the pool to at least one team"))
    return problems


def _hami_setting_problems(vgpu: list[tuple[str, Sharing]]) -> list[Problem]:
    """One HAMi release serves the cluster, and its device plugin reads the split count and memory scaling from
    chart-wide values (per-node overrides go by node name, which autoscaled nodes do not have yet)."""
    problems = []
    for path, sharing in vgpu[1:]:
        first_path, first = vgpu[0]
        for alias, attr, value_key in (("replicas", "replicas", "deviceSplitCount"), ("memoryScaling", "memory_scaling", "deviceMemoryScaling")):
            mine, theirs = getattr(sharing, attr), getattr(first, attr)
            if mine != theirs:
                problems.append(Problem(f"{path}.{alias}", f"{mine if mine is not None else 'unset'} differs from {first_path}.{alias} "
                                                           f"({theirs if theirs is not None else 'unset'}): HAMi's {value_key} is one setting for the "
                                                           f"whole cluster, so every vgpu pool needs the same {alias}"))
    return problems


# Label domains Kubernetes reserves for its core components, subdomains included (node-role.kubernetes.io,
# topology.kubernetes.io, ...): kubernetes.io/docs/concepts/overview/working-with-objects/labels/ ("The kubernetes.io/
# and k8s.io/ prefixes are reserved for Kubernetes core components"); the kubelet refuses such --node-labels.
KUBERNETES_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")
# Kubernetes reserves the kube- prefix for its system namespaces (kubernetes.io/docs/concepts/overview/
# working-with-objects/namespaces/).
KUBERNETES_NAMESPACE_PREFIXES = ("kube-",)


def reserved_label_domain(key: str, cloud: Cloud | None = None) -> str | None:
    """The platform domain a label key falls under (the domain itself or a subdomain of it), if any."""
    prefix = key.partition("/")[0] if "/" in key else ""
    domains = KUBERNETES_LABEL_DOMAINS + (getattr(cloud, "RESERVED_LABEL_DOMAINS", ()) if cloud else ())
    return next((d for d in domains if prefix == d or prefix.endswith("." + d)), None)


def _label_problems(pool: Pool, path: str, cloud: Cloud | None = None) -> list[Problem]:
    problems = []
    for key, value in pool.labels.items():
        where = f"{path}.labels.{key}"
        if not LABEL_KEY.fullmatch(key):
            problems.append(Problem(where, f"{describe(key)} is not a valid Kubernetes label key ([prefix/]name, name at most 63 characters)"))
        elif (domain := reserved_label_domain(key, cloud)) is not None:
            problems.append(Problem(where, f"{describe(key)} is under {domain}, a label domain the platform reserves for the labels it sets "
                                           f"itself; pick a key under your own domain, such as example.com/team"))
        elif key in HAMI_NODE_SELECTOR:
            problems.append(Problem(where, f"{describe(key)} is the label HAMi's device plugin selects nodes by; gpupools sets it on vgpu pools only"))
        elif key.startswith(RESERVED_LABEL_PREFIXES):
            problems.append(Problem(where, f"{describe(key)} is set by gpupools itself; labels under {', '.join(RESERVED_LABEL_PREFIXES)} are reserved: "
                                           f"pick a key under your own domain, such as example.com/team"))
        if not LABEL_VALUE.fullmatch(value):
            problems.append(Problem(where, f"{describe(value)} is not a valid label value (at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric)"))
    return problems


def _taint_problems(pool: Pool, path: str, cloud: Cloud | None = None) -> list[Problem]:
    """A pool's own taints (their form is the config model's: Kubernetes' rules) may not be gpupools', Kubernetes' or the
    cloud's own: those are put on and tolerated by whoever owns them."""
    problems = []
    for i, taint in enumerate(pool.taints):
        where, key = f"{path}.taints[{i}].key", taint.key
        mine = next((p for p in RESERVED_LABEL_PREFIXES if key.startswith(p)), None)
        if key == GPU_TAINT.key:
            problems.append(Problem(where, f"{key} is the GPU taint gpupools puts on every pool itself ({GPU_TAINT.key}={GPU_TAINT.value}:"
                                           f"{GPU_TAINT.effect}); drop it, and taint the pool with a key of your own such as example.com/dedicated"))
        elif mine is not None:
            problems.append(Problem(where, f"{describe(key)} is under {mine}, which gpupools keeps for its own taints and labels; pick a key under "
                                           f"your own domain, such as example.com/dedicated"))
        elif (domain := reserved_label_domain(key, cloud)) is not None:
            problems.append(Problem(where, f"{describe(key)} is under {domain}, which the platform keeps for the taints it sets itself; pick a "
                                           f"key under your own domain, such as example.com/dedicated"))
    return problems


def _toleration_problems(team: Team, path: str) -> list[Problem]:
    """A team tolerates the pools' own taints; gpupools' taints are tolerated (or, the readiness gate's, never) by gpupools."""
    problems = []
    for i, tol in enumerate(team.tolerations):
        where, key = f"{path}.tolerations[{i}].key", tol.key
        if key == READINESS_TAINT.key:
            problems.append(Problem(where, f"{key} is the taint of gpupools' readiness gate, which no workload tolerates (its pods would start "
                                           f"before the node's GPU stack is validated); drop it"))
        elif key.startswith(RESERVED_LABEL_PREFIXES):
            problems.append(Problem(where, f"{describe(key)} is one of gpupools' own taints, whose tolerations gpupools gives every Job itself; "
                                           f"drop it (tolerate the pools' own taints, pools[].taints)"))
    return problems


def reserved_namespaces(cloud: Cloud | None = None) -> frozenset[str]:
    """Namespaces a team must not claim: Kubernetes' own, the cloud's and those gpupools installs software into."""
    own = getattr(cloud, "RESERVED_NAMESPACES", frozenset()) if cloud else frozenset()
    return frozenset({"default", "kube-system", "kube-public", "kube-node-lease", GPU_OPERATOR.namespace, DEVICE_PLUGIN.namespace,
                      HAMI_CHART.namespace, MONITORING, KUEUE.namespace, KAI.namespace, KAI_RESERVATION, KAI_SCALE_ADJUST}) | own


def reserved_namespace_prefix(name: str, cloud: Cloud | None = None) -> str | None:
    prefixes = KUBERNETES_NAMESPACE_PREFIXES + (getattr(cloud, "RESERVED_NAMESPACE_PREFIXES", ()) if cloud else ())
    return next((p for p in prefixes if name.startswith(p)), None)


# What only Kueue can do; with ResourceQuotas these settings would be silently meaningless.
KUEUE_ONLY_TEAM_KEYS = ("borrow", "lend", "priority")


def _team_problems(teams: list[Team], pool_names: set[str], quotas: str = "kueue", cloud: Cloud | None = None) -> list[Problem]:
    problems = []
    reserved = reserved_namespaces(cloud) if teams else frozenset()
    names = Counter(t.name for t in teams)
    namespaces = Counter(t.namespace_name for t in teams)
    for i, team in enumerate(teams):
        problems += _toleration_problems(team, f"teams[{i}]")
        if names[team.name] > 1:
            problems.append(Problem(f"teams[{i}].name", f"{team.name!r} is used by more than one team"))
        elif team.namespace_name in reserved:
            where = f"teams[{i}].namespace" if team.namespace else f"teams[{i}].name"
            problems.append(Problem(where, f"{team.namespace_name!r} is a namespace Kubernetes or gpupools already uses; give the team "
                                           f"another namespace (reserved: {', '.join(sorted(reserved))})"))
        elif (prefix := reserved_namespace_prefix(team.namespace_name, cloud)) is not None:
            where = f"teams[{i}].namespace" if team.namespace else f"teams[{i}].name"
            problems.append(Problem(where, f"{team.namespace_name!r} starts with {prefix}, which the platform reserves for its own "
                                           f"namespaces; give the team another namespace"))
        elif namespaces[team.namespace_name] > 1:
            problems.append(Problem(f"teams[{i}].namespace", f"{team.namespace_name!r} is the namespace of more than one team"))
        known = ", ".join(sorted(pool_names)) or "none (the stack has no pool that passed its checks)"
        for j, pool in enumerate(team.pools or []):
            if pool not in pool_names:
                problems.append(Problem(f"teams[{i}].pools[{j}]", f"{pool!r} is not a pool of this stack; pools: {known}"))
        if isinstance(team.gpus, dict):
            if team.pools is not None:
                problems.append(Problem(f"teams[{i}].pools", "the pools of gpus: {pool: units} are the team's pools; drop pools, "
                                                             "or give gpus as one total"))
            for pool in team.gpus:
                if pool not in pool_names:
                    problems.append(Problem(f"teams[{i}].gpus.{pool}", f"{pool!r} is not a pool of this stack; pools: {known}"))
        if quotas == "resourcequota":
            for key in KUEUE_ONLY_TEAM_KEYS:
                if key in team.model_fields_set:
                    problems.append(Problem(f"teams[{i}].{key}", f"a Kueue setting; set gpupools:quotas: kueue, or drop {key} "
                                                                 f"(with {quotas} a team's quota is a fixed limit)"))
    return problems
