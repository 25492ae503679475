"""Gcore: a GPU pool's nodes: machine types, node pool inputs, zones, taints and labels, the node template the
autoscaler sees, local disks.
"""

from __future__ import annotations


import re
from pathlib import Path

from gpupools.clouds.common import reject_fields, resolve_listed
from gpupools.core.catalog import Catalog, Hardware
from gpupools.core.pools import NodeTemplate, PoolPlan
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.clouds.gcore.health import auto_healing
from gpupools.clouds.gcore.provider import MAX_NODES_PER_POOL, MIN_NODES, NAME, bare_metal
from gpupools.clouds.gcore.software import IMAGE_DEVICE_PLUGIN
from gpupools.clouds.gcore.upgrades import POOL_REPLACE
from gpupools.clouds.node_settings import NodeApi


# SPEC: pool and cluster names `^[a-z][a-z0-9\-]{0,18}[a-z0-9]$` (2-20 characters); min_node_count 1-200 at creation,
# max_node_count 1-200; boot_volume_size 10-2000 GiB.
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9\-]{0,18}[a-z0-9]$")
BOOT_VOLUME_GIB = (10, 2000)
# DOCS create-a-gpu-kubernetes-cluster.mdx: a pool's boot volume "a minimum of 50 GiB"; High IOPS SSD for I/O-heavy work.
DEFAULT_BOOT_VOLUME_GIB = 50
BOOT_VOLUME_TYPE = "ssd_hiiops"
DEFAULT_PLACEMENT = "soft-anti-affinity"


# A pool's `node:`: fields of the pool as the gcore SDK's PoolCreateParams takes it, in Gcore's own snake_case
# (node_api.json, derived by tools/node_api_models.py): the kubelet's and CRI-O's settings above all.
NODE_API = NodeApi(
    "Gcore", "pool", Path(__file__).with_name("node_api.json"),
    owned={("name",): "the pool's name", ("flavor_id",): "set the pool's instanceType", ("min_node_count",): "set the pool's minNodes",
           ("max_node_count",): "set the pool's maxNodes", ("labels",): "set the pool's labels",
           ("taints",): "the GPU taint is gpupools'; a pool's own taints go in the pool's taints",
           ("auto_healing_enabled",): "set the pool's autoRepair", ("boot_volume_size",): "set the pool's diskSizeGb",
           ("servergroup_policy",): "set the pool's placement",
           # The pool's diff compares the fields Gcore's Terraform provider compares (upgrades.POOL_FIELDS), which leave
           # security groups out: a change would never reach Gcore.
           ("security_group_ids",): "gpupools does not manage a pool's security groups"},
    # What Gcore changes only by replacing the pool (upgrades.POOL_REPLACE: not in the SDK's PoolUpdateParams).
    replaces={(field,): "Gcore cannot change it on a running pool: a change replaces the pool" for field in POOL_REPLACE},
    # gpupools' choices, which `node:` may replace (a public IPv4 is judged by the no-public-ssh policy).
    defaults=frozenset({("boot_volume_type",), ("is_public_ipv4",)}),
)


def pool_problems(pool: Pool, path: str) -> list[Problem]:
    problems = reject_fields(pool, path, NAME, {"gpu": ("gpu", "gcp n1 machine types"), "gpu_count": ("gpuCount", "gcp n1 machine types"),
                                                "os": ("os", "aws"), "provisioning": ("provisioning", "gcp")})
    if not NAME_PATTERN.match(pool.name):
        problems.append(Problem(f"{path}.name", f"{pool.name!r} cannot name a Gcore pool: use 2-20 lower-case letters, digits and '-', "
                                                f"starting with a letter and ending with a letter or digit"))
    if pool.min_nodes < MIN_NODES:
        problems.append(Problem(f"{path}.minNodes", f"{pool.min_nodes}: a Gcore pool keeps at least {MIN_NODES} node (the API's min_node_count "
                                                    f"is {MIN_NODES}-{MAX_NODES_PER_POOL}), so it cannot scale to zero; set minNodes: 1 or more"))
    if pool.spot:
        problems.append(Problem(f"{path}.spot", "not a pool setting on gcore: Gcore sells spot bare metal as flavors of their own "
                                                "(names with -spot-); name such a flavor as instanceType, or drop spot"))
    metal = bare_metal(pool.instance_type)
    if metal and pool.placement is not None:
        problems.append(Problem(f"{path}.placement", f"{pool.instance_type} is a bare-metal flavor, which takes no server-group policy; "
                                                     f"placement applies to virtual-machine flavors (g...) only"))
    if metal and pool.disk_size_gb is not None:
        problems.append(Problem(f"{path}.diskSizeGb", f"{pool.instance_type} is a bare-metal flavor, which boots from its own disks and takes "
                                                      f"no boot volume; remove diskSizeGb"))
    elif pool.disk_size_gb is not None and not BOOT_VOLUME_GIB[0] <= pool.disk_size_gb <= BOOT_VOLUME_GIB[1]:
        problems.append(Problem(f"{path}.diskSizeGb", f"{pool.disk_size_gb}: a Gcore boot volume is {BOOT_VOLUME_GIB[0]}-{BOOT_VOLUME_GIB[1]} GiB"))
    return problems


def resolve(pool: Pool, catalog: Catalog, path: str) -> tuple[Hardware | None, list[Problem]]:
    return resolve_listed(NAME, pool, catalog, path)


def zone_problems(pool: Pool, path: str, cluster: Cluster | None, providers: dict, hardware: Hardware | None) -> list[Problem]:
    if pool.zones:
        return [Problem(f"{path}.zones", "not available on gcore: a Gcore region has no availability zones a pool could choose; remove zones")]
    return []


# --------------------------------------------------------------------------------------------------------------------
# What the pools are created with

def taints(plan: PoolPlan) -> dict[str, str]:
    """Gcore's taint form: a map of key to `value:Effect` (SPEC K8sClusterPoolCreateV2Serializer.taints, example
    {"my-taint": "bar:NoSchedule"}), so one taint per key."""
    out: dict[str, str] = {}
    for taint in plan.taints:
        if taint.key in out:
            raise ValueError(f"two taints with key {taint.key!r}: Gcore's taint map holds one value per key")
        out[taint.key] = f"{taint.value}:{taint.effect}"
    return out


def pool_params(plan: PoolPlan) -> dict:
    """The pool as `client.cloud.k8s.clusters.pools.create` takes it (SDK PoolCreateParams)."""
    pool = plan.pool
    params: dict = {
        "name": pool.name,
        "flavor_id": pool.instance_type,
        "min_node_count": pool.min_nodes,
        "max_node_count": pool.max_nodes,
        "labels": dict(plan.labels),
        "taints": taints(plan),
        "auto_healing_enabled": auto_healing(pool),
        "is_public_ipv4": False,
    }
    if not bare_metal(pool.instance_type):
        params.update(servergroup_policy=pool.placement or DEFAULT_PLACEMENT, boot_volume_type=BOOT_VOLUME_TYPE,
                      boot_volume_size=pool.disk_size_gb or DEFAULT_BOOT_VOLUME_GIB)
    return params


def plan_notes(pools: list[Pool]) -> list[str]:
    """What the plan tells the user to check on the cluster itself."""
    metal = [p.name for p in pools if bare_metal(p.instance_type)]
    if not metal:
        return []
    namespace, name = IMAGE_DEVICE_PLUGIN
    return [f"Gcore's pages show its own {namespace}/{name} on GPU bare-metal nodes; if your cluster runs it, it registers nvidia.com/gpu "
            f"beside the GPU Operator's device plugin on {', '.join(metal)}: delete it, or keep it off gpupools' pools (node affinity "
            f"gpupools.io/pool DoesNotExist)"]


# --------------------------------------------------------------------------------------------------------------------
# Autoscaling, readiness, repair

# Gcore runs the cluster autoscaler for every pool between its min and max (DOCS configure-cluster-autoscaling.mdx;
# tuning through the cluster's autoscaler_config).
OWN_AUTOSCALER = True
AUTOSCALER = None


def node_template(plan: PoolPlan) -> NodeTemplate:
    """A Gcore pool never sits at zero nodes (min_node_count is at least 1), so Gcore's cluster autoscaler builds a new
    node of the pool from a running one: the upstream cluster autoscaler takes a ready node of the node group as its
    template and falls back to the cloud's template only for empty groups (kubernetes/autoscaler cluster-autoscaler/
    processors/nodeinfosprovider/mixed_nodeinfos_processor.go, Process). A running node's allocatable holds what its
    device plugin advertises, so a pending pod's GPU request scales the pool up beyond its floor. Gcore's "autoscaling
    based on CPU and memory only" (DOCS configure-gpu-autoscaling-for-kubernetes.mdx) is about scaling pods by metrics;
    the same guide relies on pending GPU pods to add bare-metal nodes."""
    labels = {**plan.labels, "node.kubernetes.io/instance-type": plan.pool.instance_type}
    return NodeTemplate("Gcore's cluster autoscaler", f"a copy of a running node of pool {plan.name}, which keeps at least {MIN_NODES}", labels,
                        plan.taints, dict(plan.advertised_resources))


def extra_tolerations(plan: PoolPlan) -> list[dict]:
    return []
