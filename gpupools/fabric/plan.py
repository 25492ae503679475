"""Which pools get the fabric between nodes (EFA, GPUDirect, InfiniBand), where they run, and what their pods ask for.

Cloud-neutral decisions on the catalog's fabric facts; the stack's Cloud object (`stack.target`, passed in as `cloud`)
names its fabric resource, its topology levels and how many zones a fabric pool may span (`FABRIC_RESOURCE`,
`TOPOLOGY_LEVELS`, `FABRIC_ZONES`), and whether it refuses the fabric to a pool (`fabric_refusal`: the service, or its managed mode, attaches none).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from gpupools.capacity.sources import placement_zones
from gpupools.core.catalog import Fabric, Hardware, load_catalog
from gpupools.core.cloud import Cloud
from gpupools.core.pools import PoolPlan
from gpupools.core.sharing import whole_gpus
from gpupools.fabric.nccl import node_software
from gpupools.stack.config import Cluster, Pool, Sharing, StackConfig
from gpupools.stack.errors import Problem

# The level every topology ends in, so Kueue can also place a job's pods on single nodes.
HOSTNAME = "kubernetes.io/hostname"


def catalog_fabric(cloud: str, instance_type: str) -> Fabric:
    return load_catalog().fabric_of(cloud, instance_type)


def fabric_on(cloud: Cloud, pool: Pool, sharing: Sharing, cluster: Cluster | None = None) -> bool:
    """`on`: wherever the instance type has a fabric. `auto`: for whole-GPU pools of instance types built for multi-node
    work that already run in one zone (a fabric pool must), so no stack changes meaning; the plan and the policy pack
    say when such a pool goes without."""
    fabric = catalog_fabric(cloud.NAME, pool.instance_type)
    if pool.fabric == "none" or fabric.kind is None or pool.instance_types:  # a fabric pool has one instance type
        return False
    if cloud.fabric_refusal(pool, cluster) is not None:  # the pool's managed mode attaches no fabric
        return False
    if pool.fabric == "on":
        return True
    one_zone = (fabric_zone(cloud, pool, cluster) is not None if cloud.FABRIC_ZONES == "one"
                else len(placement_zones(pool) or []) <= 1)
    return fabric.multi_node and sharing.mode == "none" and one_zone


def fabric_off_reason(cloud: Cloud, pool: Pool, sharing: Sharing, cluster: Cluster | None = None) -> str | None:
    """Why a pool whose instance type has a fabric goes without; None when it has one or its type has none."""
    fabric = catalog_fabric(cloud.NAME, pool.instance_type)
    if fabric.kind is None or fabric_on(cloud, pool, sharing, cluster):
        return None
    if pool.fabric == "none":
        return "fabric: none"
    refusal = cloud.fabric_refusal(pool, cluster)
    if refusal is not None:
        return refusal
    if pool.instance_types:
        return "the pool spans instance types, and a fabric pool has one"
    if sharing.mode == "mig" and fabric_with_mig(cloud):
        return f"GPUs shared by mig; fabric: on puts {cloud.FABRIC_NAME} beside the MIG slices"
    if not whole_gpus(sharing):  # a DRA pool of whole GPUs gets its fabric like mode none
        return f"GPUs shared by {sharing.mode}"
    if not fabric.multi_node:
        return "not built for multi-node jobs; fabric: on turns it on"
    return "the pool may span several zones; give it one zone (zones: [...]) or fabric: on"


def fabric_with_mig(cloud: Cloud) -> bool:
    """Whether the cloud's fabric reaches pods that hold MIG slices (`FABRIC_WITH_MIG` of its module): GPUDirect RDMA is
    supported from MIG GPU instances, NCCL is not (NVIDIA MIG user guide, Deployment Considerations, "Application
    Considerations"), so a pool may carry both where the fabric is a device pods ask for by count."""
    return bool(getattr(cloud, "FABRIC_WITH_MIG", False))


def topology_levels(cloud: Cloud) -> list[tuple[str, str]]:
    """(name, node label) from coarse to fine, as stack files name them in `topologyLevel`."""
    return list(cloud.TOPOLOGY_LEVELS)


def fabric_zone(cloud: Cloud, pool: Pool, cluster: Cluster | None) -> str | None:
    """The one zone a fabric pool runs in: its own, its reservation's (which pins the pool there), a zonal GKE
    cluster's, or the only zone of a regional GKE cluster that offers the pool's GPU."""
    zones = placement_zones(pool)
    if zones:
        return zones[0] if len(zones) == 1 else None
    return cloud.fabric_zone_of_cluster(pool, cluster)


def fabric_problems(cloud: Cloud, cluster: Cluster | None, pool: Pool, sharing: Sharing, hardware: Hardware | None, path: str,
                    example_zone: str | None = None) -> list[Problem]:
    """Fabric on an instance type without one, a fabric pool over several zones, a topology level the cloud lacks."""
    if hardware is None:
        return []
    module = cloud
    fabric = catalog_fabric(cloud.NAME, pool.instance_type)
    problems = []
    if pool.fabric == "on" and fabric.kind is None:
        with_one = sorted(n for n, f in load_catalog().fabric.get(cloud.NAME, {}).items() if f.kind and load_catalog().instance(cloud.NAME, n))
        problems.append(Problem(f"{path}.fabric", f"{pool.instance_type} has no {module.FABRIC_NAME} fabric between nodes; instance types "
                                                  f"with one: {', '.join(with_one) or 'none'}; or drop fabric"))
        return problems
    refusal = module.fabric_refusal(pool, cluster)
    if pool.fabric == "on" and refusal is not None:
        problems.append(Problem(f"{path}.fabric", f"{refusal}; set fabric: none (or auto)"))
    elif pool.fabric == "on" and pool.instance_types:
        # The fabric's interfaces (one per network card) and its placement group are set per instance type.
        problems.append(Problem(f"{path}.fabric", f"{module.FABRIC_NAME} pools have one instance type (its interfaces per network card and its "
                                                  f"placement are the type's); give one instanceType, or set fabric: none"))
    elif pool.fabric == "on" and sharing.mode == "mig" and not fabric_with_mig(cloud):
        problems.append(Problem(f"{path}.fabric", f"gpupools puts no {module.FABRIC_NAME} beside MIG slices on {module.SERVICE}; use "
                                                  f"fabric: none, or sharing mode none"))
    elif pool.fabric == "on" and sharing.mode not in ("none", "mig") and not whole_gpus(sharing):
        # Time-slicing, MPS and vGPUs hand a pod a share of a GPU that other pods use at the same time, with no memory or
        # fault isolation between them (NVIDIA k8s-device-plugin README, "Shared Access to GPUs"); a fabric job needs a GPU
        # of its own, whole or a MIG GPU instance, from which GPUDirect RDMA works (NVIDIA MIG user guide).
        own = "a whole GPU or a MIG slice" if fabric_with_mig(cloud) else "a whole GPU"
        problems.append(Problem(f"{path}.fabric", f"a fabric job needs {own} of its own, and {sharing.mode} shares each GPU between "
                                                  f"pods at the same time; use fabric: none, or sharing mode "
                                                  + ("none or mig" if fabric_with_mig(cloud) else "none")))
    on = fabric_on(cloud, pool, sharing, cluster) and not problems
    if on:
        zones = placement_zones(pool) or []
        one = module.FABRIC_ZONES == "one"
        if len(zones) > 1 or (one and fabric_zone(cloud, pool, cluster) is None):
            why = (f"{module.FABRIC_NAME} pools run in one zone ({', '.join(zones)} is {len(zones)})" if zones
                   else f"{module.FABRIC_NAME} pools run in one zone, and without zones the pool spreads over the region's")
            example = example_zone or module.EXAMPLE_ZONE
            problems.append(Problem(f"{path}.zones", f"{why}: its nodes must sit close on one network; give one zone (e.g. zones: "
                                                     f"[{example}]), or set fabric: none"))
        problems += module.fabric_pool_problems(pool, path)
    if pool.topology_level is not None:
        names = [name for name, _ in topology_levels(cloud)]
        if not on:
            problems.append(Problem(f"{path}.topologyLevel", "applies to pools with a fabric (the pool has none); drop topologyLevel"))
        elif pool.topology_level not in names:
            problems.append(Problem(f"{path}.topologyLevel", f"{pool.topology_level!r} is not a topology level of {module.SERVICE}; "
                                                             + (f"levels, coarse to fine: {', '.join(names)}" if names
                                                                else f"{module.SERVICE} nodes carry no topology labels")))
    return problems


@dataclass(frozen=True)
class FabricPlan:
    """One pool's fabric: what the cloud attaches, where the nodes sit, and what a pod asks for to use it."""

    pool: str
    cloud: str
    name: str  # EFA | GPUDirect | InfiniBand
    kind: str  # efa | gpudirect-tcpx | gpudirect-tcpxo | gpudirect-rdma | infiniband
    devices: int  # EFA interfaces or extra networks; 0 where not counted
    zone: str | None
    placement: str  # in words: "placement group ml-train", "compact placement", ...
    placement_group: str | None  # a placement group the stack creates
    local_nvme_gb: int
    resource: str | None  # the extended resource a pod asks for to reach the fabric
    resource_count: int
    levels: tuple[tuple[str, str], ...]  # Kueue topology levels, coarse to fine (without the hostname level)
    required_level: str | None  # a node label: the level a job must fit in
    configured: bool  # whether gpupools makes the fabric usable by pods on this cloud
    gaps: tuple[str, ...] = ()  # what the pool still lacks, in words
    keeps_close: bool = True  # whether `placement` keeps the nodes close (GKE takes no compact placement with every capacity)
    node_software: tuple[str, ...] = ()  # DaemonSets a multi-node pod relies on running on its node (GKE's NCCL plugin installers)
    target: Any = field(default=None, compare=False, repr=False)  # the cloud (gpupools.core.cloud.Cloud), asked for the pod's needs
    taints: tuple = field(default=(), compare=False)  # the pool's own taints (PoolPlan.pool_taints), which its DaemonSets tolerate

    @property
    def summary(self) -> str:
        count = f" x{self.devices}" if self.devices else ""
        where = f", zone {self.zone}" if self.zone else ""
        return f"{self.name}{count} ({self.kind}), {self.placement}{where}"

    @property
    def finest_level(self) -> str | None:
        return self.levels[-1][1] if self.levels else None


def plan_fabric(stack: StackConfig, plan: PoolPlan) -> FabricPlan | None:
    if not fabric_on(stack.target, plan.pool, plan.sharing, stack.cluster):
        return None
    module = stack.target
    fabric = catalog_fabric(stack.cloud, plan.pool.instance_type)
    levels = tuple(module.TOPOLOGY_LEVELS)
    required = dict(levels).get(plan.pool.topology_level) if plan.pool.topology_level else None
    resource = module.FABRIC_RESOURCE
    count = stack.target.fabric_resource_count(fabric)
    configured, gaps = module.fabric_readiness(stack.cluster, plan)
    placement, group, close = module.fabric_placement(stack.cluster.name, plan.pool)
    return FabricPlan(pool=plan.name, cloud=stack.cloud, name=module.FABRIC_NAME, kind=fabric.kind or "", devices=fabric.efa or fabric.extra_networks,
                      zone=fabric_zone(stack.target, plan.pool, stack.cluster), placement=placement, target=stack.target,
                      placement_group=group,
                      local_nvme_gb=fabric.local_nvme_gb, resource=resource, resource_count=count, levels=levels, required_level=required,
                      configured=configured, gaps=gaps, keeps_close=close, node_software=node_software(fabric.kind or ""),
                      taints=plan.pool_taints)


# A rack-scale pool's fabric for jobs within one NVLink domain: multi-node NVLink, reached through the IMEX channel of the
# job's ComputeDomain (gpupools.fabric.computedomain), not a device or network the cloud attaches.
NVLINK = "nvlink"


def nvlink_fabric(stack: StackConfig, plan: PoolPlan) -> FabricPlan | None:
    """The NVLink fabric of a rack-scale pool (catalog.yaml nvlinkDomain) that has no cloud fabric: what `workload --nodes`,
    `--nccl-test` and the landing check's gang use for jobs of up to one NVLink domain's nodes. Pods ask for no device by
    count (the channel is a DRA claim, `computedomain.with_channel`), and it names no Kueue topology levels: Kueue counts
    no DRA device in topology-aware scheduling (kueue v0.19.2 site/content/en/docs/concepts/dynamic_resource_allocation.md,
    "No DRA + Topology Aware Scheduling (TAS)"), so the pods are kept in one domain by their clique affinity. None for
    any other pool, so their fabric stays `plan_fabric`'s."""
    gpu = plan.hardware.gpu
    if gpu.nvlink_domain is None or plan.sharing.mode != "none" or plan.pool.instance_types:
        return None
    nodes = gpu.nvlink_domain // plan.hardware.gpus_per_node
    return FabricPlan(pool=plan.name, cloud=stack.cloud, name="NVLink", kind=NVLINK, devices=0,
                      zone=fabric_zone(stack.target, plan.pool, stack.cluster),
                      placement=f"one NVLink domain of {nodes} nodes (IMEX channel of a ComputeDomain)", placement_group=None,
                      local_nvme_gb=catalog_fabric(stack.cloud, plan.pool.instance_type).local_nvme_gb, resource=None,
                      resource_count=0, levels=(), required_level=None, configured=True, target=stack.target)


def job_fabric(stack: StackConfig, plan: PoolPlan) -> FabricPlan | None:
    """The fabric a multi-node job of the pool runs over: the cloud's (`plan_fabric`), else a rack pool's NVLink."""
    return plan_fabric(stack, plan) or nvlink_fabric(stack, plan)


def job_fabrics(stack: StackConfig, plans: list[PoolPlan]) -> dict[str, FabricPlan]:
    """`job_fabric` of every pool that has one, by pool name (`plan_fabrics` plus the rack pools' NVLink)."""
    out = {}
    for plan in plans:
        fabric = job_fabric(stack, plan)
        if fabric is not None:
            out[plan.name] = fabric
    return out


def plan_fabrics(stack: StackConfig, plans: list[PoolPlan]) -> dict[str, FabricPlan]:
    """The fabric pools of a stack, by pool name."""
    out = {}
    for plan in plans:
        fabric = plan_fabric(stack, plan)
        if fabric is not None:
            out[plan.name] = fabric
    return out


def fabric_pod(fabric: FabricPlan) -> dict:
    """What a multi-node pod on the pool carries to reach the fabric, as its cloud module says (`fabric_pod`); over NVLink
    nothing but its channel claim, which `computedomain.with_channel` adds."""
    if fabric.kind == NVLINK:
        return {"limits": {}, "env": {}, "capabilities": []}
    return fabric.target.fabric_pod(fabric.resource_count, fabric.pool, fabric.kind, fabric.devices)


def with_fabric_pod(template: dict, pod: dict) -> dict:
    """A Job's pod template with what `fabric_pod` adds beyond limits, env and capabilities: annotations, host
    volumes and their mounts in the first container, sidecars (init containers that run beside it), and a shell
    prelude the first container's command runs after (settings a plugin keeps in a script to be sourced)."""
    spec = template["spec"]
    container = spec["containers"][0]
    if pod.get("annotations"):
        template.setdefault("metadata", {}).setdefault("annotations", {}).update(pod["annotations"])
    if pod.get("volumes"):
        spec["volumes"] = list(spec.get("volumes") or []) + list(pod["volumes"])
    if pod.get("mounts"):
        container["volumeMounts"] = list(container.get("volumeMounts") or []) + list(pod["mounts"])
    if pod.get("sidecars"):
        spec["initContainers"] = list(spec.get("initContainers") or []) + list(pod["sidecars"])
    if pod.get("prelude"):
        container["command"] = ["bash", "-c", f"{pod['prelude']} && exec {shlex.join(container['command'])}"]
    return template


def pod_fabric_limits(fabric: FabricPlan | None) -> dict[str, int]:
    """What a pod asks for to reach the fabric devices of its node: every EFA interface, or the shared IB device."""
    if fabric is None or fabric.resource is None:
        return {}
    return {fabric.resource: fabric.resource_count}


def fabric_row(fabric: FabricPlan | None, local_nvme_gb: int, topology_aware: bool = False, enforced: bool = False) -> dict:
    """The plan's `--json` view of one pool's fabric. `topology_aware`: the pool's Kueue flavors name the Topology;
    `enforced`: its multi-node jobs are held to the stack's `topologyLevel` (gpupools.queues.kueue.topology_enforced),
    so `requiredLevel` is the level they carry, and null where nothing enforces the `declaredLevel`."""
    if fabric is None:
        return {"fabric": None, "localNvmeGb": local_nvme_gb or None}
    return {"fabric": {"kind": fabric.kind, "devices": fabric.devices, "zone": fabric.zone, "placement": fabric.placement,
                       "resource": fabric.resource, "perPod": fabric.resource_count, "configured": fabric.configured,
                       "topologyLevels": [label for _, label in fabric.levels], "topologyAware": topology_aware,
                       "declaredLevel": fabric.required_level, "requiredLevel": fabric.required_level if enforced else None,
                       "gaps": list(fabric.gaps)},
            "localNvmeGb": fabric.local_nvme_gb or None}
