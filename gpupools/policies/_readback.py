"""GPU node pools as the cloud APIs will see them, read back from registered resources.

Policies must judge what `pulumi up` would really send, not what gpupools meant to send, so they rebuild
the fleet from resource properties: which node pools carry GPUs, which GPUs and how many per node, how far
each pool can scale, what a node costs at list price (the gpupools catalog), and how its GPUs are shared.
That also makes the pack useful for GPU pools that another program declares.
"""

from __future__ import annotations

import base64
import binascii
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpupools.core.catalog import Catalog, GpuModel, load_catalog, mig_config_name, mig_resource_name
from gpupools.clouds.aws import BOTTLEROCKET_MIG_GPU_KEY
from gpupools.clouds.gcp.autopilot import ACCELERATOR_COUNT_LABEL, ACCELERATOR_LABEL, MAX_SHARED_CLIENTS_LABEL, MODE as AUTOPILOT
from gpupools.clouds.registry import MANAGED, cloud_module
from gpupools.autoscaling.karpenter import EC2_NODE_CLASS_REF
from gpupools.core.miglayout import entries_resources
from gpupools.core.sharing import (DEPLOY_DEVICE_PLUGIN_LABEL, DEPLOY_OPERANDS_LABEL, DRA_GPU_RESOURCE, DRA_MIG_RESOURCE,
                                   HAMI_NODE_SELECTOR)

from gpupools.policies._props import as_int, entries, get, is_unknown, items, plain

EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
AKS_AGENT_POOL = "azure-native:containerservice:AgentPool"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
AKS_CLUSTER = "azure-native:containerservice:ManagedCluster"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
# Karpenter's NodePool is an EKS GPU pool too: Karpenter starts its nodes from its requirements and limits.
KARPENTER_NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
EC2_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
# Gcore pools are Pulumi dynamic resources (gpupools.deploy.gcore): every dynamic resource has this type, and a
# pool is the one whose props hold a pool's flavor and its cluster.
GCORE_POOL = "pulumi-python:dynamic:Resource"
# A GKE ComputeClass is a GKE GPU pool too: node auto-provisioning starts its nodes down its priorities.
GKE_COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
# A GKE Autopilot pool has nothing GKE-side: its component records what its pods select and how far it may grow
# (gpupools.clouds.gcp.autopilot.pool_record), and Autopilot makes a node of that accelerator for each pod.
GKE_AUTOPILOT_POOL = "gpupools:index:GkeAutopilotPool"
NODE_POOL_TYPES = (EKS_NODE_GROUP, AKS_AGENT_POOL, GKE_NODE_POOL, KARPENTER_NODE_POOL, GCORE_POOL, GKE_COMPUTE_CLASS, GKE_AUTOPILOT_POOL)
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
RESOURCE_QUOTA = "kubernetes:core/v1:ResourceQuota"

POOL_LABEL = "gpupools.io/pool"
INSTANCE_TYPE_TAG = "gpupools.io/instance-type"  # on node groups whose launch template holds the instance type
GPU_LABEL = "gpupools.io/gpu"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT_KEY = "nvidia.com/gpu"
DEVICE_PLUGIN_CONFIGMAP = "gpupools-device-plugin-config"
# mig-parted layouts that are valid on every MIG-capable GPU, whatever its profiles.
GENERIC_MIG_CONFIGS = frozenset({"all-disabled", "all-enabled", "all-balanced"})
HOURS_PER_MONTH = 730
# GKE spreads a regional pool over three zones unless nodeLocations says otherwise.
GKE_DEFAULT_REGION_ZONES = 3


@dataclass
class GpuPool:
    """One GPU node pool: enough to price it, count its GPUs and know what its pods request."""

    resource_type: str
    resource_name: str
    urn: str | None
    cloud: str
    pool: str
    labels: dict[str, str]
    gpu: GpuModel | None
    gpus_per_node: int | None
    max_nodes: int | None
    price_per_node: float | None
    instance_type: str | None
    # Filled by `resolve_sharing` from the rest of the stack.
    resource: str = GPU_RESOURCE
    units_per_gpu: int = 1
    node_resources: dict[str, int] = field(default_factory=dict)  # a mixed MIG layout: units of each resource per node
    node_class: str | None = None  # Karpenter: the EC2NodeClass its nodes are made from
    accelerator: str | None = None  # GKE ComputeClass: the accelerator type its priorities name
    notes: list[str] = field(default_factory=list)
    mode: str = "standard"  # the cluster mode its resource type belongs to (GKE Autopilot's pools: autopilot)

    @property
    def target(self) -> Any:
        """The pool's cloud as the one object the policies ask (gpupools.core.cloud.Cloud), resolved from its resource type."""
        return cloud_module(self.cloud, self.mode)

    @property
    def max_gpus(self) -> int | None:
        if self.gpus_per_node is None or self.max_nodes is None:
            return None
        return self.gpus_per_node * self.max_nodes

    @property
    def max_units(self) -> int | None:
        gpus = self.max_gpus
        if self.node_resources and self.max_nodes is not None:
            return sum(self.node_resources.values()) * self.max_nodes
        return None if gpus is None else gpus * self.units_per_gpu

    @property
    def max_hourly_cost(self) -> float | None:
        if self.price_per_node is None or self.max_nodes is None:
            return None
        return self.price_per_node * self.max_nodes


# --------------------------------------------------------------------------------------------------------------------
# Node pools


def _catalog() -> Catalog:
    return load_catalog()


def _str_map(value: Any) -> dict[str, str]:
    return {k: v for k, v in entries(value) if isinstance(v, str)}


def node_labels(resource_type: str, props: Any) -> dict[str, str]:
    if resource_type == EKS_NODE_GROUP:
        return _str_map(get(props, "labels"))
    if resource_type == AKS_AGENT_POOL:
        return _str_map(get(props, "nodeLabels"))
    if resource_type == GKE_NODE_POOL:
        return _str_map(get(props, "nodeConfig", "labels"))
    if resource_type == KARPENTER_NODE_POOL:
        return _str_map(get(props, "spec", "template", "metadata", "labels"))
    if resource_type == GCORE_POOL:
        return _str_map(get(props, "pool", "labels"))
    if resource_type == GKE_COMPUTE_CLASS:
        return _str_map(get(props, "spec", "nodePoolConfig", "nodeLabels"))
    if resource_type == GKE_AUTOPILOT_POOL:
        return _str_map(get(props, "nodeSelector"))
    return {}


def class_priorities(props: Any) -> list[Any]:
    return [p for p in items(get(props, "spec", "priorities")) if not is_unknown(p)]


def class_gpu(props: Any) -> tuple[str | None, str | None, int | None]:
    """(machine type, accelerator type, GPUs per node) a ComputeClass's first GPU priority names."""
    for priority in class_priorities(props):
        accelerator, count, machine = get(priority, "gpu", "type"), as_int(get(priority, "gpu", "count")), get(priority, "machineType")
        if isinstance(accelerator, str) or isinstance(machine, str):
            return (machine if isinstance(machine, str) else None, accelerator if isinstance(accelerator, str) else None, count)
    return None, None, None


def nap_limits(resources: list[tuple[str, str, Any]]) -> dict[str, int] | None:
    """The GKE cluster's node auto-provisioning ceilings by resource type (accelerator types among them); None when the
    stack creates no GKE cluster, whose limits are then not the stack's to read."""
    clusters = [props for typ, _name, props in resources if typ == GKE_CLUSTER]
    if not clusters:
        return None
    limits: dict[str, int] = {}
    for props in clusters:
        for limit in items(get(props, "clusterAutoscaling", "resourceLimits")):
            kind, most = get(limit, "resourceType"), as_int(get(limit, "maximum"))
            if isinstance(kind, str) and most is not None:
                limits[kind] = most
    return limits


def karpenter_instance_types(props: Any) -> list[str]:
    """Instance types a NodePool may launch: its `node.kubernetes.io/instance-type In [...]` requirement."""
    for req in items(get(props, "spec", "template", "spec", "requirements")):
        if get(req, "key") == "node.kubernetes.io/instance-type" and get(req, "operator") == "In":
            return [t for t in items(get(req, "values")) if isinstance(t, str)]
    return []


# The cloud and cluster mode of a Karpenter NodePool, by its node class's API group: Karpenter's EC2NodeClass on a
# standard EKS cluster, and the node class of each managed mode that runs Karpenter itself (EKS Auto Mode's NodeClass,
# the AKSNodeClass of AKS node auto-provisioning), as those modes' Cloud objects name it.
KARPENTER_CLASSES = {EC2_NODE_CLASS_REF["group"]: ("aws", "standard"),
                     **{module.NODE_CLASS_REF["group"]: key for key, module in MANAGED.items() if hasattr(module, "NODE_CLASS_REF")}}


def karpenter_target(props: Any) -> tuple[str, str]:
    """(cloud, cluster mode) of a NodePool; one whose node class is unknown is taken for a standard EKS cluster's."""
    group = get(props, "spec", "template", "spec", "nodeClassRef", "group")
    return KARPENTER_CLASSES.get(group, ("aws", "standard")) if isinstance(group, str) else ("aws", "standard")


def karpenter_cloud(props: Any) -> str:
    return karpenter_target(props)[0]


def eks_is_gpu(props: Any) -> bool:
    """EKS GPU AMIs end in _NVIDIA (AL2023, Bottlerocket) or _GPU (AL2); or the instance type has GPUs."""
    ami = get(props, "amiType")
    if isinstance(ami, str) and ami.upper().endswith(("_NVIDIA", "_GPU")):
        return True
    catalog = _catalog()
    return any(isinstance(t, str) and catalog.instance("aws", t) is not None and catalog.instance("aws", t).gpu is not None
               for t in items(get(props, "instanceTypes")))


def gke_accelerators(props: Any) -> list[Any]:
    return [a for a in items(get(props, "nodeConfig", "guestAccelerators")) if not is_unknown(a)]


def is_gpu_pool(resource_type: str, props: Any) -> bool:
    catalog = _catalog()
    if resource_type == EKS_NODE_GROUP:
        return eks_is_gpu(props)
    if resource_type == KARPENTER_NODE_POOL:
        cloud = karpenter_cloud(props)
        return any(catalog.instance(cloud, t) is not None and catalog.instance(cloud, t).gpu is not None for t in karpenter_instance_types(props))
    if resource_type == AKS_AGENT_POOL:
        size = get(props, "vmSize")
        return isinstance(size, str) and catalog.instance("azure", size) is not None
    if resource_type == GCORE_POOL:
        flavor = get(props, "pool", "flavor_id")
        found = catalog.instance("gcore", flavor) if isinstance(flavor, str) and isinstance(get(props, "cluster_name"), str) else None
        return found is not None and found.gpu is not None
    if resource_type == GKE_COMPUTE_CLASS:
        machine, accelerator, _ = class_gpu(props)
        found = catalog.instance("gcp", machine) if machine else None
        return accelerator is not None or (found is not None and found.gpu is not None)
    if resource_type == GKE_AUTOPILOT_POOL:
        accelerator = get(props, "nodeSelector", ACCELERATOR_LABEL)
        return isinstance(accelerator, str) and _gke_gpu_of(accelerator) is not None
    if resource_type == GKE_NODE_POOL:
        if gke_accelerators(props):
            return True
        machine = get(props, "nodeConfig", "machineType")
        found = catalog.instance("gcp", machine) if isinstance(machine, str) else None
        return found is not None and found.gpu is not None
    return False


def _gke_gpu_of(accelerator_type: str) -> GpuModel | None:
    catalog = _catalog()
    if accelerator_type in catalog.gcp_accelerators:
        return catalog.gcp_accelerators[accelerator_type].gpu
    for instance in catalog.instances.get("gcp", {}).values():
        if instance.accelerator == accelerator_type and instance.gpu is not None:
            return instance.gpu
    return None


def _gke_zones(props: Any) -> int:
    locations = [loc for loc in items(get(props, "nodeLocations")) if isinstance(loc, str)]
    if locations:
        return len(locations)
    location = get(props, "location")
    # A zone is region plus "-<letter>" (us-central1-a); a region has one hyphen (us-central1).
    if isinstance(location, str) and location.count("-") == 1:
        return GKE_DEFAULT_REGION_ZONES
    return 1


def gpu_pool(resource_type: str, name: str, props: Any, urn: str | None = None) -> GpuPool | None:
    """The pool a node-pool resource declares, or None when it carries no GPUs."""
    if resource_type not in NODE_POOL_TYPES or not is_gpu_pool(resource_type, props):
        return None
    catalog = _catalog()
    labels = node_labels(resource_type, props)
    gpu = gpus = max_nodes = price = instance_type = node_class = None
    if resource_type in (EKS_NODE_GROUP, KARPENTER_NODE_POOL):
        karpenter = resource_type == KARPENTER_NODE_POOL
        cloud = karpenter_cloud(props) if karpenter else "aws"
        types = karpenter_instance_types(props) if karpenter else [t for t in items(get(props, "instanceTypes")) if isinstance(t, str)]
        if not karpenter and not types and isinstance(get(props, "tags", INSTANCE_TYPE_TAG), str):
            types = [get(props, "tags", INSTANCE_TYPE_TAG)]  # a Capacity Block group: the type is in its launch template
        known = [i for i in (catalog.instance(cloud, t) for t in types) if i is not None and i.gpu is not None]
        if known:
            # Several instance types: budget for the dearest, count the most GPUs.
            priciest = max(known, key=lambda i: i.price)
            gpu, gpus, price, instance_type = priciest.gpu, max(i.gpus for i in known), priciest.price, priciest.name
        if karpenter:
            max_nodes = as_int(get(props, "spec", "limits", "nodes"))
            pool = get(props, "metadata", "name")
            node_class = get(props, "spec", "template", "spec", "nodeClassRef", "name")
        else:
            max_nodes = as_int(get(props, "scalingConfig", "maxSize"))
            pool = get(props, "nodeGroupName")
    elif resource_type == GCORE_POOL:
        cloud = "gcore"
        instance_type = get(props, "pool", "flavor_id")
        found = catalog.instance("gcore", instance_type)
        gpu, gpus, price = found.gpu, found.gpus, found.price
        max_nodes = as_int(get(props, "pool", "max_node_count"))
        pool = get(props, "pool", "name")
    elif resource_type == GKE_COMPUTE_CLASS:
        # Budgeted at the class's machine type on-demand; its size is the cluster's ceiling for its GPU type (`fleet`).
        cloud = "gcp"
        instance_type, accelerator, gpus = class_gpu(props)
        found = catalog.instance("gcp", instance_type) if instance_type else None
        if found is not None and found.gpu is not None:
            gpu, gpus, price = found.gpu, found.gpus, found.price
        elif accelerator is not None:
            gpu = _gke_gpu_of(accelerator)
            if found is not None and accelerator in catalog.gcp_accelerators and gpus:
                price = round(found.price + catalog.gcp_accelerators[accelerator].price_per_gpu * gpus, 4)
        pool = get(props, "metadata", "name")
    elif resource_type == GKE_AUTOPILOT_POOL:
        # Priced at the pool's machine type on-demand; the GPUs are those its pods ask Autopilot for.
        cloud = "gcp"
        instance_type = get(props, "instanceType")
        found = catalog.instance("gcp", instance_type) if isinstance(instance_type, str) else None
        gpu = _gke_gpu_of(get(props, "nodeSelector", ACCELERATOR_LABEL))
        gpus = as_int(get(props, "nodeSelector", ACCELERATOR_COUNT_LABEL))
        if found is not None and found.gpu is not None and found.gpus == gpus:
            price = found.price
        max_nodes = as_int(get(props, "maxNodes"))
        pool = get(props, "pool")
    elif resource_type == AKS_AGENT_POOL:
        cloud = "azure"
        instance_type = get(props, "vmSize")
        found = catalog.instance("azure", instance_type)
        if found is not None and found.gpu is not None:
            gpu, gpus, price = found.gpu, found.gpus, found.price
        autoscaling = get(props, "enableAutoScaling")
        max_nodes = as_int(get(props, "maxCount")) if autoscaling is True else as_int(get(props, "count"))
        pool = get(props, "agentPoolName")
    else:
        cloud = "gcp"
        machine = get(props, "nodeConfig", "machineType")
        instance_type = machine if isinstance(machine, str) else None
        found = catalog.instance("gcp", instance_type) if instance_type else None
        accelerators = gke_accelerators(props)
        if found is not None and found.gpu is not None:
            gpu, gpus, price = found.gpu, found.gpus, found.price
        elif accelerators:
            counts = [as_int(get(a, "count")) for a in accelerators]
            types = [get(a, "type") for a in accelerators]
            if all(c is not None for c in counts) and all(isinstance(t, str) for t in types):
                gpus = sum(counts)
                gpu = _gke_gpu_of(types[0])
                extra = [catalog.gcp_accelerators[t].price_per_gpu * c for t, c in zip(types, counts) if t in catalog.gcp_accelerators]
                if found is not None and len(extra) == len(types):
                    price = round(found.price + sum(extra), 4)
        autoscaling = get(props, "autoscaling")
        total = as_int(get(autoscaling, "totalMaxNodeCount"))
        per_zone = as_int(get(autoscaling, "maxNodeCount"))
        fixed = as_int(get(props, "nodeCount"))
        if fixed is None:
            fixed = as_int(get(props, "initialNodeCount"))
        max_nodes = total if total is not None else per_zone * _gke_zones(props) if per_zone is not None else fixed
        pool = get(props, "name")
    model = catalog.gpus.get(labels.get(GPU_LABEL, ""))
    if model is not None:
        gpu = model  # the label names the GPU even where the instance type is not in the catalog
    pool_name = labels.get(POOL_LABEL) or (pool if isinstance(pool, str) else name)
    return GpuPool(resource_type, name, urn, cloud, pool_name, labels, gpu, gpus, max_nodes, price,
                   instance_type if isinstance(instance_type, str) else None, node_class=node_class if isinstance(node_class, str) else None,
                   accelerator=class_gpu(props)[1] if resource_type == GKE_COMPUTE_CLASS else None,
                   mode=AUTOPILOT if resource_type == GKE_AUTOPILOT_POOL else karpenter_target(props)[1] if resource_type == KARPENTER_NODE_POOL else "standard")


# --------------------------------------------------------------------------------------------------------------------
# Sharing settings as registered


def device_plugin_entry(text: Any) -> dict | None:
    """One NVIDIA device-plugin v1 config document, or None when the text is not one."""
    if not isinstance(text, str):
        return None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return doc if isinstance(doc, dict) and doc.get("version") == "v1" else None


def replicated_resources(doc: dict) -> list[tuple[str, str, Any]]:
    """(strategy, resource name, replicas) for every replicated resource of a device-plugin config."""
    found = []
    sharing = doc.get("sharing") if isinstance(doc.get("sharing"), dict) else {}
    for strategy in ("timeSlicing", "mps"):
        block = sharing.get(strategy)
        if isinstance(block, dict):
            for res in block.get("resources") or []:
                if isinstance(res, dict):
                    found.append((strategy, str(res.get("name")), res.get("replicas")))
    return found


def device_plugin_configs(resources: list[tuple[str, str, Any]]) -> dict[str, dict]:
    """Named device-plugin config entries from the gpupools ConfigMap and any nvidia-device-plugin release."""
    configs: dict[str, dict] = {}
    for typ, _name, props in resources:
        if typ == CONFIG_MAP and get(props, "metadata", "name") == DEVICE_PLUGIN_CONFIGMAP:
            data = get(props, "data")
        elif typ == HELM_RELEASE and _chart_name(get(props, "chart")) == "nvidia-device-plugin":
            data = get(props, "values", "config", "map")
        else:
            continue
        for key, text in entries(data):
            doc = device_plugin_entry(text)
            if doc is not None:
                configs[key] = doc
    return configs


def _chart_name(chart: Any) -> str | None:
    """`gpu-operator`, `nvidia/gpu-operator` and `oci://host/path/gpu-operator` all name the gpu-operator chart."""
    if not isinstance(chart, str):
        return None
    return chart.rstrip("/").rsplit("/", 1)[-1]


def mig_strategy(resources: list[tuple[str, str, Any]]) -> str:
    """The GPU Operator's MIG strategy (its chart defaults to single)."""
    for typ, _name, props in resources:
        if typ == HELM_RELEASE and _chart_name(get(props, "chart")) == "gpu-operator":
            strategy = get(props, "values", "mig", "strategy")
            if isinstance(strategy, str):
                return strategy
    return "single"


def mig_layouts(resources: list[tuple[str, str, Any]]) -> dict[str, list] | None:
    """The mig-parted configs of the GPU Operator's custom MIG config (values migManager.config.data, config.yaml), which
    replaces the operator's defaults; None when the release names none."""
    for typ, _name, props in resources:
        if typ == HELM_RELEASE and _chart_name(get(props, "chart")) == "gpu-operator":
            text = get(props, "values", "migManager", "config", "data", "config.yaml")
            if not isinstance(text, str):
                return None
            try:
                doc = yaml.safe_load(text)
            except yaml.YAMLError:
                return {}
            configs = doc.get("mig-configs") if isinstance(doc, dict) else None
            return {str(k): v for k, v in configs.items() if isinstance(v, list)} if isinstance(configs, dict) else {}
    return None


def mig_profile_of_config(gpu: GpuModel, config: str) -> str | None:
    """The catalog profile an `all-<profile>` layout names (mig-parted spells `+` as `.`), or None."""
    for profile in gpu.mig_profiles:
        if mig_config_name(profile) == config:
            return profile
    return None


def bottlerocket_settings(user_data: Any) -> dict | None:
    """Bottlerocket user data is TOML, base64-encoded in launch templates and plain in EC2NodeClasses; anything
    else (AL2023 MIME, unknown) is not ours to read."""
    if not isinstance(user_data, str) or not user_data:
        return None
    try:
        text = base64.b64decode(user_data, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = user_data
    try:
        doc = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return None
    nvidia = doc.get("settings", {}).get("kubelet-device-plugins", {}).get("nvidia")
    return nvidia if isinstance(nvidia, dict) else None


BOTTLEROCKET_GPU_BY_KEY = {key: model for model, key in BOTTLEROCKET_MIG_GPU_KEY.items()}


def bottlerocket_sharing(nvidia: dict) -> tuple[str, int | None, dict[str, str]]:
    """(mode, replicas, {gpu key: MIG profile}) from `settings.kubelet-device-plugins.nvidia`."""
    strategy = nvidia.get("device-sharing-strategy")
    if nvidia.get("device-partitioning-strategy") == "mig":
        profiles = nvidia.get("mig", {}).get("profile", {})
        return "mig", None, {str(k): str(v) for k, v in profiles.items()} if isinstance(profiles, dict) else {}
    if strategy in ("time-slicing", "mps"):
        block = nvidia.get(strategy, {})
        replicas = block.get("replicas") if isinstance(block, dict) else None
        return strategy, replicas if isinstance(replicas, int) else None, {}
    return "none", None, {}


def _launch_template_pool(props: Any) -> str | None:
    """gpupools tags the instances of each launch template with their pool, which ties template to node group."""
    for spec in items(get(props, "tagSpecifications")):
        pool = get(spec, "tags", POOL_LABEL)
        if isinstance(pool, str):
            return pool
    return None


def _gke_sharing(pool: GpuPool, props: Any) -> bool:
    """GKE time-sharing, MPS or GPU partitions on the pool's accelerator; True when it set the pool's units."""
    accelerators = gke_accelerators(props)
    first = accelerators[0] if accelerators else {}
    return _gke_units(pool, as_int(get(first, "gpuSharingConfig", "maxSharedClientsPerGpu")), get(first, "gpuPartitionSize"))


def _class_sharing(pool: GpuPool, props: Any) -> bool:
    """A ComputeClass's GKE sharing (its first priority's gpu.gpuSharing); True when it set the pool's units."""
    sharing = next((get(p, "gpu", "gpuSharing") for p in class_priorities(props) if get(p, "gpu", "gpuSharing")), None)
    return _gke_units(pool, as_int(get(sharing, "maxSharedClientsPerGPU")), get(sharing, "gpuPartitionSize"))


def _gke_units(pool: GpuPool, clients: int | None, partition: Any) -> bool:
    """Units per GPU from GKE's sharing settings: a partition size's count, or the clients per GPU."""
    if isinstance(partition, str) and pool.gpu is not None and partition in pool.gpu.mig_profiles:
        pool.units_per_gpu = pool.gpu.mig_profiles[partition]
        return True
    if clients:
        pool.units_per_gpu = clients
        return True
    return False


# HAMi's chart default for devicePlugin.deviceSplitCount (chart 2.10.0 values.yaml).
HAMI_DEFAULT_SPLIT_COUNT = 10


def hami_split_count(resources: list[tuple[str, str, Any]]) -> int | None:
    """vGPUs per GPU on HAMi's pools, from the stack's HAMi release; None without one."""
    for typ, _name, props in resources:
        if typ == HELM_RELEASE and _chart_name(get(props, "chart")) == "hami":
            split = as_int(get(props, "values", "devicePlugin", "deviceSplitCount"))
            return HAMI_DEFAULT_SPLIT_COUNT if split is None else split
    return None


def resolve_sharing(pools: list[GpuPool], resources: list[tuple[str, str, Any]]) -> None:
    """Set each pool's extended resource and units per GPU from labels, configs and node-pool settings."""
    configs = device_plugin_configs(resources)
    hami_split = hami_split_count(resources)
    strategy = mig_strategy(resources)
    layouts = mig_layouts(resources) or {}
    bottlerocket = {}
    for typ, _name, props in resources:
        if typ == LAUNCH_TEMPLATE:
            pool = _launch_template_pool(props)
            nvidia = bottlerocket_settings(get(props, "userData"))
            if pool and nvidia is not None:
                bottlerocket[pool] = nvidia
    node_classes = {get(props, "metadata", "name"): bottlerocket_settings(get(props, "spec", "userData"))
                    for typ, _name, props in resources if typ == EC2_NODE_CLASS}
    for pool in pools:
        if pool.node_class and node_classes.get(pool.node_class) is not None:
            bottlerocket[pool.pool] = node_classes[pool.node_class]
    by_name = {typ_name: props for typ, typ_name, props in resources if typ == GKE_NODE_POOL}
    classes = {typ_name: props for typ, typ_name, props in resources if typ == GKE_COMPUTE_CLASS}
    for pool in pools:
        gpu = pool.gpu
        mig = pool.labels.get(MIG_CONFIG_LABEL)
        if hami_split and all(pool.labels.get(k) == v for k, v in HAMI_NODE_SELECTOR.items()):
            pool.units_per_gpu = hami_split  # HAMi's device plugin advertises each GPU as this many nvidia.com/gpu
            continue
        if pool.resource_type == GKE_NODE_POOL and _gke_sharing(pool, by_name.get(pool.resource_name, {})):
            continue
        if pool.resource_type == GKE_COMPUTE_CLASS and _class_sharing(pool, classes.get(pool.resource_name, {})):
            continue  # GKE's own device plugin shares the GPUs; otherwise labels decide, as on other clouds
        if pool.resource_type == GKE_AUTOPILOT_POOL:
            _gke_units(pool, as_int(pool.labels.get(MAX_SHARED_CLIENTS_LABEL)), None)  # Autopilot's time-sharing selector
            continue
        if (pool.labels.get(DEPLOY_DEVICE_PLUGIN_LABEL) == "false" and DEPLOY_OPERANDS_LABEL not in pool.labels
                and pool.pool not in bottlerocket and not all(pool.labels.get(k) == v for k, v in HAMI_NODE_SELECTOR.items())):
            # No device plugin on the pool's nodes and no other image plugin: its GPUs come from the DRA driver (sharing mode
            # dra, a preview), counted by Kueue as the queue resource of their device class.
            profile = mig_profile_of_config(gpu, mig) if mig and gpu is not None else None
            pool.resource = DRA_MIG_RESOURCE if profile is not None else DRA_GPU_RESOURCE
            if profile is not None:
                pool.units_per_gpu = gpu.mig_profiles[profile]
            continue
        if pool.pool in bottlerocket:
            mode, replicas, profiles = bottlerocket_sharing(bottlerocket[pool.pool])
            if mode == "mig" and gpu is not None:
                profile = profiles.get(BOTTLEROCKET_MIG_GPU_KEY.get(gpu.name, ""))
                if profile in gpu.mig_profiles:
                    pool.units_per_gpu = gpu.mig_profiles[profile]
            elif replicas:
                pool.units_per_gpu = replicas
        elif mig and mig not in GENERIC_MIG_CONFIGS and gpu is not None and mig in layouts and mig_profile_of_config(gpu, mig) is None:
            pool.node_resources = entries_resources([e for e in layouts[mig] if isinstance(e, dict)], pool.gpus_per_node or 0, strategy)
            pool.resource = next(iter(pool.node_resources), GPU_RESOURCE)
        elif mig and mig not in GENERIC_MIG_CONFIGS and gpu is not None:
            profile = mig_profile_of_config(gpu, mig)
            if profile is not None:
                pool.units_per_gpu = gpu.mig_profiles[profile]
                pool.resource = mig_resource_name(profile) if strategy == "mixed" else GPU_RESOURCE
        else:
            entry = configs.get(pool.labels.get(DEVICE_PLUGIN_CONFIG_LABEL, ""))
            for _strategy, name, replicas in replicated_resources(entry or {}):
                if name == GPU_RESOURCE and isinstance(replicas, int) and replicas > 0:
                    pool.units_per_gpu = replicas


def stack_resources(args_resources: list[Any]) -> list[tuple[str, str, Any]]:
    """(type, name, props) of every resource a stack validation sees."""
    return [(r.resource_type, r.name, r.props) for r in args_resources]


def fleet(args_resources: list[Any]) -> list[GpuPool]:
    """Every GPU pool of the stack, with its sharing resolved."""
    resources = stack_resources(args_resources)
    pools = []
    for r in args_resources:
        found = gpu_pool(r.resource_type, r.name, r.props, r.urn)
        if found is not None:
            pools.append(found)
    limits = nap_limits(resources)
    for pool in pools:
        if pool.resource_type == GKE_COMPUTE_CLASS and limits is not None and pool.gpus_per_node:
            accelerator = class_accelerator(pool)
            if accelerator in limits:
                pool.max_nodes = limits[accelerator] // pool.gpus_per_node
    resolve_sharing(pools, resources)
    return pools


def class_accelerator(pool: GpuPool) -> str | None:
    """The accelerator type of a ComputeClass pool's GPUs (kept from its props by `gpu_pool`)."""
    return pool.accelerator


def quota_requests(props: Any) -> dict[str, int]:
    """GPU requests a ResourceQuota allows, per extended resource (`requests.nvidia.com/...`)."""
    out = {}
    for key, value in entries(get(props, "spec", "hard")):
        if key.startswith("requests.nvidia.com/"):
            amount = as_int(value)
            if amount is not None:
                out[key[len("requests."):]] = amount
    return out


_SECRET_NAME = re.compile(r"(?i)(password|passwd|token|apikey|api_key|secretkey|secret_key|clientsecret|privatekey|private_key)$")


def sensitive_key(key: str) -> bool:
    """Keys that hold a credential (adminPassword, apiToken, ...), not ones that name where it lives (passwordKey)."""
    return bool(_SECRET_NAME.search(key))


__all__ = ["GpuPool", "fleet", "gpu_pool", "plain"]
