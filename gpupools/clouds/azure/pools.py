"""AKS: a GPU pool's nodes: VM sizes, agent pool inputs, zones, Spot taints and the autoscaler's node template tags.
"""

from __future__ import annotations


import re
from pathlib import Path
from typing import Mapping

from gpupools.core.catalog import Catalog, Hardware
from gpupools.core.facts import load_facts
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.core.pools import NodeTemplate, PoolPlan, Taint, spell_taint
from gpupools.capacity import sources as capacity
from gpupools.upgrades.policy import UPGRADES_LABEL, pool_upgrade
from gpupools.clouds.common import reject_fields, resolve_listed
from gpupools.clouds.node_settings import NodeApi
from gpupools.clouds.azure.capacity import reservation_group
from gpupools.clouds.azure.provider import NAME, TAINT_STYLE, ZONES
from gpupools.clouds.azure.software import gpu_driver
from gpupools.clouds.azure.upgrades import upgrade_settings


# AKS: Linux agent pool names are 1-12 lower-case letters and digits, starting with a letter.
AGENT_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
# AKS adds this taint to every spot pool by itself; pods that should run there need its toleration.
SPOT_TOLERATION = {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}


# A pool's `node:`: AgentPool inputs as pulumi-azure-native's AgentPoolArgs takes them (node_api.json, derived by
# tools/node_api_models.py). gpupools owns what makes a GPU pool: these are refused, each with where to set it instead.
NODE_API = NodeApi(
    "AKS", "AgentPool", Path(__file__).with_name("node_api.json"),
    owned={("vmSize",): "set the pool's instanceType",
           ("count",): "set the pool's minNodes and maxNodes", ("minCount",): "set the pool's minNodes",
           ("maxCount",): "set the pool's maxNodes", ("enableAutoScaling",): "the pool is always autoscaled between minNodes and maxNodes",
           ("nodeTaints",): "the GPU taint is gpupools'; a pool's own taints go in the pool's taints",
           ("nodeLabels",): "set the pool's labels",
           ("gpuProfile",): "the GPU driver follows gpuSoftware.installer", ("gpuInstanceProfile",): "set the pool's sharing (mode: mig)",
           ("scaleSetPriority",): "set the pool's spot or capacity",
           ("capacityReservationGroupID",): "set the pool's capacity (a reservation)",
           ("availabilityZones",): "set the pool's zones", ("osDiskSizeGB",): "set the pool's diskSizeGb",
           ("upgradeSettings",): "set the pool's upgrades", ("orchestratorVersion",): "set cluster.kubernetesVersion",
           ("mode",): "GPU pools are User pools", ("type",): "GPU pools run on virtual machine scale sets",
           ("osType",): "GPU pools run Linux", ("osSKU",): "gpupools picks the node image the GPU driver is installed on",
           ("powerState",): "a pool scales to zero with minNodes: 0",
           ("creationData",): "gpupools creates the pool's nodes from the node image"},
    # What AKS refuses to change on a running pool, so a change needs a new pool: Cluster API Provider Azure
    # refuses the same changes for this reason (kubernetes-sigs/cluster-api-provider-azure
    # api/v1beta1/azuremanagedmachinepool_webhook.go, ValidateUpdate, at 0133c475793cd1cdf97fba623b2f9fd9454b1dee).
    replaces={path: "AKS cannot change it on a running pool: a new pool (under a new name) takes the change"
              for path in (("maxPods",), ("osDiskType",), ("enableUltraSSD",), ("enableNodePublicIP",), ("nodePublicIPPrefixID",),
                           ("kubeletConfig",), ("kubeletDiskType",), ("linuxOSConfig",))},
    # gpupools' choices for a Spot pool and its nodes' addresses, which `node:` may replace.
    defaults=frozenset({("scaleSetEvictionPolicy",), ("spotMaxPrice",), ("enableNodePublicIP",)}),
)
# The system pool (the ManagedCluster's first agentPoolProfiles entry, ManagedClusterAgentPoolProfile: the same
# fields as an AgentPool plus its name): gpupools sizes it and keeps it a Linux System pool.
SYSTEM_NODE_API = NodeApi(
    "AKS", "AgentPool", NODE_API.model_file,
    owned={**{path: "gpupools sizes the system pool" for path in (("vmSize",), ("count",), ("minCount",), ("maxCount",), ("enableAutoScaling",))},
           ("nodeLabels",): "gpupools labels the system pool gpupools.io/pool=system",
           ("nodeTaints",): "the system pool runs the cluster's add-ons, untainted",
           ("mode",): "the system pool is a System pool", ("type",): "the system pool runs on a virtual machine scale set",
           ("osType",): "the system pool runs Linux", ("orchestratorVersion",): "set cluster.kubernetesVersion",
           ("powerState",): "the system pool runs the cluster's add-ons",
           ("gpuProfile",): "the system pool has no GPUs", ("gpuInstanceProfile",): "the system pool has no GPUs",
           ("scaleSetPriority",): "the system pool runs on regular (not Spot) VMs"},
    replaces=NODE_API.replaces)
# Spot settings of a scale set apply only with priority Spot (pulumi-azure-native 3.29 AgentPoolArgs docstrings:
# scaleSetEvictionPolicy "cannot be specified unless the scaleSetPriority is 'Spot'"; spotMaxPrice is the price paid
# "for spot instances").
SPOT_ONLY = ("scaleSetEvictionPolicy", "spotMaxPrice")


def node_setting_problems(pool: Pool, path: str, autoscaler: str) -> list[Problem]:
    """What the AgentPool takes only in some pools: Spot settings on Spot pools."""
    given = [key for key in SPOT_ONLY if key in (pool.node or {})]
    if not given or capacity.spot_only(pool):
        return []
    return [Problem(f"{path}.node.{key}", "applies to Spot pools only; set spot: true (or capacity: [spot])") for key in given]


def pool_problems(pool: Pool, path: str) -> list[Problem]:
    problems = reject_fields(pool, path, NAME, {
        "gpu": ("gpu", "gcp n1 machine types"), "gpu_count": ("gpuCount", "gcp n1 machine types"), "os": ("os", "aws"),
        "placement": ("placement", "gcore virtual-machine flavors"), "provisioning": ("provisioning", "gcp")})
    if pool.auto_repair is False:
        problems.append(Problem(f"{path}.autoRepair", "AKS node auto-repair covers every node of the cluster and cannot be turned off per pool; "
                                                      "remove autoRepair"))
    if not AGENT_POOL_NAME.match(pool.name):
        problems.append(Problem(f"{path}.name", f"{pool.name!r} cannot name an AKS agent pool: use 1-12 lower-case letters and digits, starting with a letter"))
    return problems


def resolve(pool: Pool, catalog: Catalog, path: str) -> tuple[Hardware | None, list[Problem]]:
    return resolve_listed(NAME, pool, catalog, path)


# The AKS cluster autoscaler builds an empty scale set's node from its VM size and from tags of this prefix, one per
# extended resource, the resource's `/` spelled `_` (Azure tag names may not hold `/`): kubernetes/autoscaler
# cluster-autoscaler/cloudprovider/azure/README.md, "Resources", and azure_template.go (processVMSSTemplate). Tags of an
# agent pool are set on its scale set (AKS docs, "Use Azure tags in AKS": "Tags set on a node pool apply only to
# resources related to that node pool").
SCALE_SET_RESOURCE_TAG = "k8s.io_cluster-autoscaler_node-template_resources_"


def autoscaler_resource_tags(resources: Mapping[str, int]) -> dict[str, str]:
    """The scale set tags that tell the AKS cluster autoscaler a new node of the pool has `resources`; a name the tags
    cannot spell (an `_` would come back as `/`) is a programming error."""
    tags = {}
    for name, count in resources.items():
        if "_" in name or "~" in name:
            raise ValueError(f"{name!r} cannot be spelled in a scale set tag: the autoscaler reads every _ and ~2 as /")
        tags[SCALE_SET_RESOURCE_TAG + name.replace("/", "_")] = str(count)
    return tags


def agent_pool_args(plan: PoolPlan, installer: str, resource_group, cluster_name, kubernetes_version: str | None,
                    autoscaler_resources: Mapping[str, int] | None = None) -> dict:
    """`autoscaler_resources`: extended resources beside the GPUs a new node will advertise (the InfiniBand pools'
    RDMA device), written as scale set tags for the cluster autoscaler (`autoscaler_resource_tags`)."""
    pool = plan.pool
    args = {
        "agent_pool_name": pool.name,
        "resource_group_name": resource_group,
        "resource_name_": cluster_name,
        "vm_size": pool.instance_type,
        "mode": "User",
        "os_type": "Linux",
        "os_sku": "Ubuntu",
        "type": "VirtualMachineScaleSets",
        "enable_auto_scaling": True,
        "min_count": pool.min_nodes,
        "max_count": pool.max_nodes,
        "count": pool.min_nodes,
        "node_labels": dict(plan.labels),
        "node_taints": [spell_taint(t, TAINT_STYLE) for t in plan.taints],
        "gpu_profile": {"driver": gpu_driver(installer)},
        "enable_node_public_ip": False,
        "scale_set_priority": "Spot" if capacity.spot_only(pool) else "Regular",
        "upgrade_settings": upgrade_settings(pool),
        "tags": {UPGRADES_LABEL: pool_upgrade(pool).kind},
    }
    group = reservation_group(pool)
    if group is not None:
        args["capacity_reservation_group_id"] = group
        args["tags"] = {**args["tags"], **capacity.reserved_marker(pool)}
    if autoscaler_resources:
        args["tags"] = {**args.get("tags", {}), **autoscaler_resource_tags(autoscaler_resources)}
    if capacity.spot_only(pool):
        args.update(scale_set_eviction_policy="Delete", spot_max_price=-1)
    if pool.disk_size_gb:
        args["os_disk_size_gb"] = pool.disk_size_gb
    zones = capacity.placement_zones(pool)
    if zones:
        args["availability_zones"] = zones
    if kubernetes_version:
        args["orchestrator_version"] = kubernetes_version
    return args


def extra_tolerations(plan: PoolPlan) -> list[dict]:
    return [SPOT_TOLERATION] if capacity.spot_only(plan.pool) else []


def spot_taint(plan: PoolPlan) -> tuple[Taint, ...]:
    return (Taint(SPOT_TOLERATION["key"], SPOT_TOLERATION["value"], SPOT_TOLERATION["effect"]),) if capacity.spot_only(plan.pool) else ()


def zone_problems(pool: Pool, path: str, cluster: Cluster | None, providers: dict, hardware: Hardware | None) -> list[Problem]:
    problems = [Problem(f"{path}.zones[{i}]", f"{zone!r} is not an Azure availability zone; use {', '.join(ZONES)}")
                for i, zone in enumerate(pool.zones or []) if zone not in ZONES]
    location = providers.get("azure-native:location")
    if problems or hardware is None or not isinstance(location, str):
        return problems
    return offering_problems(pool, path, location)


def offering_problems(pool: Pool, path: str, location: str) -> list[Problem]:
    """Whether Azure sells the VM size in the location (Karpenter-Azure's table from the Retail Prices API), and in
    the pool's zones where a Resource SKUs snapshot lists them. A price is not a quota: the subscription may still
    need one."""
    facts = load_facts()
    offered = facts.azure_offered_in(pool.instance_type, location)
    if offered is False:
        where = facts.azure_offerings.get(pool.instance_type, ())
        return [Problem(f"{path}.instanceType", f"{pool.instance_type} is not offered in {location}; regions that offer it: "
                                                f"{', '.join(where) or 'none known'} (gpupools catalog --cloud azure)")]
    zones = facts.azure_zones.get(pool.instance_type, {}).get(location)
    if zones is None:
        return []
    return [Problem(f"{path}.zones[{i}]", f"{pool.instance_type} is not offered in zone {zone} of {location}; zones that offer it: {', '.join(zones)}")
            for i, zone in enumerate(pool.zones or []) if zone not in zones]


def node_template(plan: PoolPlan) -> NodeTemplate:
    """The AKS cluster autoscaler builds an empty pool's node from its VM size: `nvidia.com/gpu` is the size's GPU
    count (whatever sharing later makes of it), the labels and taints are the agent pool's, plus AKS's spot taint."""
    labels = {**plan.labels, "kubernetes.azure.com/agentpool": plan.name, "node.kubernetes.io/instance-type": plan.pool.instance_type}
    return NodeTemplate("the AKS cluster autoscaler", f"VM size {plan.pool.instance_type} of agent pool {plan.name}", labels,
                        plan.taints + spot_taint(plan), {"nvidia.com/gpu": plan.hardware.gpus_per_node})


# --------------------------------------------------------------------------------------------------------------------
# Answers to the questions every capability asks a cloud (gpupools/core/cloud.py)

# `installer: auto`: AKS GPU pools skip AKS's own driver (gpuProfile.driver None) and the GPU Operator installs
# driver, toolkit and the rest.
# The service scales GPU pools with its own cluster autoscaler; gpupools installs none (EKS: Karpenter or
# cluster-autoscaler, gpupools' choice).
OWN_AUTOSCALER = True


def plan_notes(pools: list) -> list[str]:
    """What the plan tells the user to check on the cluster itself: nothing here."""
    return []
