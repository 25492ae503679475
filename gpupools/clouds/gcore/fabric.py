"""Gcore: the fabric between nodes: InfiniBand bare-metal flavors, where the service offers it.
"""

from __future__ import annotations



from gpupools.core.pools import PoolPlan
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem


# --------------------------------------------------------------------------------------------------------------------
# The fabric: recorded in the catalog, not offered on Managed Kubernetes

FABRIC_NAME = "InfiniBand"
FABRIC_IN_WORDS = "InfiniBand"
FABRIC_RESOURCE: str | None = None
FABRIC_ZONES = "at most one"
TOPOLOGY_LEVELS: tuple[tuple[str, str], ...] = ()
FABRIC_PLACEMENT_GROUP = False
FABRIC_DEVICE_SOFTWARE = "network-operator"
# Why a pool of a flavor with InfiniBand goes without it: Gcore documents InfiniBand for its GPU Cloud clusters
# (DOCS edge-ai/ai-infrastructure/about-gpu-cloud.mdx, manage-a-bare-metal-gpu-cluster.mdx) and says nothing of it for
# Managed Kubernetes pools (edge-ai/managed-kubernetes/*), so gpupools promises no fabric there.
FABRIC_OFFERED = ("Gcore documents InfiniBand for its GPU Cloud clusters, not for Managed Kubernetes pools, so gpupools configures no "
                  "fabric on Gcore")
NEW_NETWORK_MAX_ZONES = None
MULTI_NODE_ADVICE = "run multi-node jobs where the fabric is offered"
EXAMPLE_ZONE = '"-"'


def fabric_refusal(pool: Pool, cluster: Cluster | None) -> str | None:
    return FABRIC_OFFERED


def fabric_placement(cluster_name: str, pool: Pool) -> tuple[str, str | None, bool]:
    return f"server group of pool {pool.name}", None, False


def fabric_readiness(cluster: Cluster, plan: PoolPlan) -> tuple[bool, tuple[str, ...]]:
    return False, (FABRIC_OFFERED,)


def fabric_pool_problems(pool: Pool, path: str) -> list[Problem]:
    return []


def local_nvme_use(pool: Pool, fabric_on: bool) -> str | None:
    return None


def fabric_pod(count: int, pool: str = "", kind: str = "", networks: int = 0) -> dict:
    return {"limits": {}, "env": {}, "capabilities": []}


def fabric_resource_count(fabric) -> int:
    return 0


def fabric_zone_of_cluster(pool, cluster) -> str | None:
    return None
