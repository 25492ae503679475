"""AKS: InfiniBand between nodes (the AKSInfinibandSupport feature, NVIDIA's Network Operator) and the pods' view of it.
"""

from __future__ import annotations



from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.core.pools import PoolPlan
from gpupools.clouds.azure.provider import NODE_AUTO_PROVISIONING


def fabric_refusal(pool: Pool, cluster: Cluster | None) -> str | None:
    """InfiniBand is set up per scale set (an agent pool's VMs share one network); node auto-provisioning makes VMs one by one."""
    if cluster is not None and cluster.managed_mode == NODE_AUTO_PROVISIONING:
        return ("gpupools sets InfiniBand up on AKS agent pools (one scale set per pool), not on node auto-provisioning NodePools; use "
                "cluster.mode: standard for multi-node training")
    return None


# --------------------------------------------------------------------------------------------------------------------
# The fabric: InfiniBand between ND-series nodes

# The resource the NVIDIA Network Operator's RDMA shared device plugin advertises: its prefix `rdma/` and the config's
# resourceName (Mellanox/k8s-rdma-shared-dev-plugin pkg/resources/resources_manager.go: rdmaHcaResourcePrefix, and
# validResourceName `^[a-zA-Z0-9_]+$`). Azure's configuration names it `shared_ib` (Azure/aks-rdma-infiniband
# configs/nicclusterpolicy/rdma-shared-device-plugin/rdma.yaml); gpupools drops the underscore, because the AKS cluster
# autoscaler learns a scale set's extended resources from tags in whose names every `_` (and `~2`) reads as `/`
# (kubernetes/autoscaler cluster-autoscaler/cloudprovider/azure/azure_template.go, extractAllocatableResourcesFromScaleSet):
# `rdma/shared_ib` cannot be spelled there, and without it a pod that asks for the device never starts a node from zero.
FABRIC_RESOURCE = "rdma/sharedib"
FABRIC_NAME = "InfiniBand"
# AKS writes no node labels for the InfiniBand topology, so Kueue has no levels to pack a job by on AKS.
TOPOLOGY_LEVELS: tuple[tuple[str, str], ...] = ()
# One scale set is one InfiniBand network once AKSInfinibandSupport is registered; zones would split it.
FABRIC_ZONES = "at most one"
# AKS puts a pool's VMs on one InfiniBand network only with this subscription feature registered
# (MicrosoftDocs/azure-aks-docs articles/aks/use-amd-gpus.md, "Register the AKSInfinibandSupport feature").
INFINIBAND_FEATURE = "az feature register --namespace Microsoft.ContainerService --name AKSInfinibandSupport"


def fabric_placement(cluster_name: str, pool: Pool) -> tuple[str, str | None, bool]:
    """How a fabric pool's nodes are kept close: one scale set, one InfiniBand network."""
    return f"one scale set (agent pool {pool.name})", None, True


def fabric_readiness(cluster: Cluster, plan: PoolPlan) -> tuple[bool, tuple[str, ...]]:
    """Pods reach the HCAs once the Network Operator runs; the scale set's VMs share one InfiniBand network only with the
    subscription feature, which a stack cannot register."""
    return True, (f"the subscription's AKSInfinibandSupport feature ({INFINIBAND_FEATURE}), so the scale set's VMs share one "
                  "InfiniBand network",)


def fabric_pool_problems(pool: Pool, path: str) -> list[Problem]:
    return []


def local_nvme_use(pool: Pool, fabric_on: bool) -> str | None:
    return "not configured by gpupools" if fabric_on else None


def fabric_pod(count: int, pool: str = "", kind: str = "", networks: int = 0) -> dict:
    """What a pod on an InfiniBand node needs beside its GPUs: the shared IB device, IPC_LOCK to pin memory for RDMA, and
    NCCL told to use InfiniBand with GPUDirect RDMA (Azure/aks-rdma-infiniband tests/scenarios/k8s/values.yaml:
    `rdma/shared_ib: 1` (FABRIC_RESOURCE here), capability IPC_LOCK, NCCL_IB_DISABLE=0, NCCL_NET_GDR_LEVEL=SYS)."""
    return {"limits": {FABRIC_RESOURCE: count},
            "env": {"NCCL_IB_DISABLE": "0", "NCCL_NET_GDR_LEVEL": "SYS", "NCCL_DEBUG": "INFO", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
            "capabilities": ["IPC_LOCK"]}
# Fabric: a scale set's VMs share one InfiniBand network by themselves; pods reach the HCAs through the Network Operator's RDMA device plugin.
FABRIC_IN_WORDS = "InfiniBand"  # as policy messages name it
FABRIC_PLACEMENT_GROUP = False
FABRIC_DEVICE_SOFTWARE = "network-operator"


def fabric_resource_count(fabric) -> int:
    """Every pod on an InfiniBand node shares the HCAs as one rdma/sharedib."""
    return 1


def fabric_zone_of_cluster(pool, cluster) -> str | None:
    return None

# The fabric is offered wherever the catalog records one (None: no reason to leave it off).
FABRIC_OFFERED: str | None = None
# What the policy pack advises for a pool built for multi-node jobs that has no fabric.
MULTI_NODE_ADVICE = "give it one zone and fabric: on"
