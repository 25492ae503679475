"""AKS node auto-provisioning (`cluster.mode: node-auto-provisioning`): the AKS cluster's answers, where NAP changes them.

AKS runs Karpenter itself (the Azure provider, Azure/karpenter-provider-azure): a GPU pool is a `karpenter.sh/v1`
NodePool on an `AKSNodeClass` (`karpenter.azure.com/v1beta1`, the CRD's storage version; pinned in
tests/reference/aks). The node class's `gpu.mode` says who installs the driver: `Driver` (its default) AKS, which then
considers only the GPU VM sizes with managed driver installation (pkg/utils/supported-gpus.yaml), `None` nobody, for
the GPU Operator. Either way the device plugin is the stack's: the provider's design for GPU nodes leaves it to the user
(designs/0002-gpu-selection-and-bootstrap.md). The cluster takes NAP with Azure CNI Overlay and Cilium, which is the
network every gpupools AKS cluster has.

Every answer not given here is the standard AKS cluster's (gpupools.clouds.azure).
"""

from __future__ import annotations

from gpupools.clouds.azure import *  # noqa: F401,F403 (the standard cluster's answers; those below replace them)
from gpupools.clouds import azure as standard
from gpupools.capacity import sources as capacity
from gpupools.core.catalog import Hardware
from gpupools.core.pools import PoolPlan
from gpupools.stack.config import Cluster, MaintenanceWindow, Pool, Sharing
from gpupools.stack.errors import Problem
from gpupools.upgrades import nodepool
from gpupools.upgrades.policy import UPGRADES_LABEL, PoolUpgrade, Window, pool_upgrade

MODE = standard.NODE_AUTO_PROVISIONING

# AKS's Karpenter scales the GPU NodePools; gpupools installs no autoscaler.
OWN_AUTOSCALER = False
# GPU pools are Karpenter NodePools or the service's own nodes here, not node pools of the cloud's node API: no `node:`.
NODE_API = None
AUTOSCALER = "karpenter"
AUTOSCALER_NAME = "AKS node auto-provisioning (Karpenter)"
NODE_CLASS_API = "karpenter.azure.com/v1beta1"
NODE_CLASS_REF = {"group": "karpenter.azure.com", "kind": "AKSNodeClass"}
# Karpenter knows a NodePool's startupTaints, so GPU nodes can start tainted until the GPU Operator has validated them
# (gpupools.health.readiness), as Karpenter pools on EKS do.
STARTUP_TAINTS = True
READINESS_NOTE = "GPU nodes start tainted until the GPU Operator has validated driver, toolkit, CUDA and device plugin"
# Kinds one NodePool can hold: Karpenter takes Spot over on-demand when both are allowed (and capacity is there).
NODE_POOL_SHAPES = {(capacity.ON_DEMAND,), (capacity.SPOT,), (capacity.SPOT, capacity.ON_DEMAND)}
# No capacity bought ahead: gpupools attaches capacity reservation groups to agent pools only (`capacity_problems`).
RESERVATIONS = False
# Fabric: InfiniBand is set up per scale set, which a NodePool's one-by-one VMs are not (`fabric_refusal`).
MULTI_NODE_ADVICE = "node auto-provisioning NodePools get no InfiniBand from gpupools: run multi-node jobs on an agent pool (cluster.mode: standard)"


def managed_cluster_args(cluster: Cluster) -> dict:
    """The standard cluster's arguments with node auto-provisioning on (ManagedCluster nodeProvisioningProfile, mode Auto);
    AKS's own default NodePools stay, for the cluster's CPU workloads."""
    return {**standard.managed_cluster_args(cluster), "node_provisioning_profile": {"mode": "Auto", "default_node_pools": "Auto"}}


def gpu_mode(installer: str) -> str:
    """AKSNodeClass gpu.mode: AKS's driver unless the GPU Operator brings its own."""
    return "None" if installer == "gpu-operator" else "Driver"


def node_class_name(pool: str) -> str:
    return f"gpupools-{pool}"


def node_class(plan: PoolPlan, installer: str) -> dict:
    """The pool's AKSNodeClass: Ubuntu (the GPU Operator's platform), the OS disk from `diskSizeGb`, the driver mode."""
    spec: dict = {"imageFamily": "Ubuntu", "gpu": {"mode": gpu_mode(installer)}, "tags": {"gpupools.io/pool": plan.name}}
    if plan.pool.disk_size_gb:
        spec["osDiskSizeGB"] = plan.pool.disk_size_gb
    return {"apiVersion": NODE_CLASS_API, "kind": "AKSNodeClass",
            "metadata": {"name": node_class_name(plan.name), "labels": {"app.kubernetes.io/managed-by": "gpupools"}}, "spec": spec}


def zone_values(pool: Pool, location: str | None) -> list[str] | None:
    """The pool's zones as AKS nodes carry them in topology.kubernetes.io/zone: `<location>-<n>`."""
    zones = capacity.placement_zones(pool)
    return [f"{location}-{z}" for z in zones] if zones and location else None


def pool_sharing_problems(pool: Pool, sharing: Sharing, hw: Hardware | None, path: str) -> list[Problem]:
    """Whole GPUs only: Karpenter counts nvidia.com/gpu from the VM size, and what tells it a node offers shares or MIG slices
    instead (a NodeOverlay) is behind a feature gate AKS's Karpenter does not expose, so pods asking for shares or slices
    would never start a node from zero."""
    if sharing.mode == "none":
        return []
    return [Problem(f"{path}.mode", f"{sharing.mode!r} is not possible on AKS node auto-provisioning: its Karpenter counts whole GPUs of the "
                                    f"VM size and cannot be told of shares or MIG slices; use an agent pool (cluster.mode: standard) or mode: none")]


def managed_pool_problems(pool: Pool, path: str, installer: str, cluster: Cluster | None) -> list[Problem]:
    problems = []
    if pool.min_nodes > 0:
        problems.append(Problem(f"{path}.minNodes", f"{pool.min_nodes}, but a node auto-provisioning NodePool keeps no floor of nodes; set "
                                                    f"minNodes: 0 (or use an agent pool: cluster.mode: standard)"))
    return problems


def capacity_problems(pool: Pool, path: str, autoscaler: str, cluster: Cluster | None, hardware: Hardware | None) -> list[Problem]:
    """A NodePool takes on-demand, Spot, or Spot then on-demand; capacity reservation groups go to agent pools."""
    if pool.capacity is None:
        return []
    shape = tuple(s.kind for s in capacity.sources(pool))
    if shape in NODE_POOL_SHAPES:
        return []
    if capacity.RESERVED in shape:
        return [Problem(f"{path}.capacity", "a capacity reservation group: gpupools attaches groups to AKS agent pools, not to node "
                                            "auto-provisioning NodePools; use cluster.mode: standard for reserved capacity")]
    return [Problem(f"{path}.capacity", f"{', '.join(shape)}: a node auto-provisioning NodePool takes [on-demand], [spot] or [spot, on-demand] "
                                        f"(Karpenter prefers Spot when both are allowed)")]


def capacity_lines(pool: Pool, autoscaler: str) -> list[str]:
    return [f"{s.kind}: NodePool capacity type {s.kind}" for s in capacity.sources(pool)]


def local_nvme_use(pool: Pool, fabric_on: bool) -> str | None:
    return None


def repair_facts(plan: PoolPlan, autoscaler: str) -> tuple[str, str]:
    """AKS documents node auto-repair for agent pools only, and whether its Karpenter runs node repair (an alpha feature
    gate, off in the provider's own chart: Azure/karpenter-provider-azure v1.14.2 charts/karpenter/values.yaml
    `nodeRepair: false`) is not documented. What a node deleted by hand does to a running Job is the NodePool's."""
    detects, _ = standard.repair_facts(plan, autoscaler)
    deleted = nodepool.deleted_node_line(node_pool_lifetime(plan.pool, Window.of(MaintenanceWindow())))
    return detects, ("what repairs a node auto-provisioning node is AKS's to decide (its docs describe repair for agent pools); a GPU fault "
                     f"that leaves the node Ready is alerted to the platform team, not repaired; a node deleted to replace it (kubectl delete node): {deleted}")


def extra_tolerations(plan: PoolPlan) -> list[dict]:
    """AKS's Spot toleration on every pool that may run on Spot VMs: AKS taints its Spot nodes
    (kubernetes.azure.com/scalesetpriority=spot:NoSchedule), and a NodePool of Spot then on-demand has both kinds."""
    return [SPOT_TOLERATION] if capacity.has(plan.pool, capacity.SPOT) else []


def driver_installer(installer: str, os: str | None) -> str | None:
    """AKS's driver under AKSNodeClass gpu.mode Driver; None: the GPU Operator's (gpu.mode None)."""
    return "AKS (AKSNodeClass gpu.mode Driver: the node image's driver)" if gpu_mode(installer) == "Driver" else None


# --------------------------------------------------------------------------------------------------------------------
# Day two: what takes NAP nodes away, and when (docs/managed-modes.md)
#
# No agent pool upgrade settings reach a NAP node: "The upgrade mechanism and decision criteria are specific to
# NAP/Karpenter and are evaluated by NAP's drift logic. NAP respects Karpenter Node Disruption Budgets and Pod
# Disruption Budgets", and the aksManagedNodeOSUpgradeSchedule "determines the window during which NAP picks up a new
# image. This configuration doesn't necessarily determine when existing nodes are disrupted"
# (MicrosoftDocs/azure-aks-docs articles/aks/node-auto-provisioning-upgrade-image.md @fb060abe). Its Karpenter drifts a
# node on a new image, a new Kubernetes version and a changed NodePool or AKSNodeClass (Azure/karpenter-provider-azure
# v1.14.2 pkg/cloudprovider/drift.go: ImageDrift, K8sVersionDrift, NodeClassDrift). Expiry is forceful and ignores the
# budgets; "to confine NAP disruptions to a maintenance window, set expireAfter: Never and rely on
# disruption-budget-gated drift and consolidation" (articles/aks/node-auto-provisioning-disruption.md @fb060abe), which
# NAP's own default NodePool does (node-auto-provisioning-node-pools.md). So every gpupools NAP pool is `expireAfter:
# Never`: nodes get new images by drift, and expiry would only add a drain at any hour that starts no replacement first.
# Training: drift inside the maintenance window, no terminationGracePeriod, so a node running a Job (karpenter.sh/do-
# not-disrupt) waits for it. Inference: drift at any time, pods get `waitForJobs` (terminationGracePeriod, which
# "bypasses PodDisruptionBudgets and the karpenter.sh/do-not-disrupt annotation"). The plan's lines are read from the
# NodePool (`upgrade_lines`).


def karpenter_disruption(pool: Pool, window: Window) -> dict:
    policy = pool_upgrade(pool)
    lifetime: dict = {"expireAfter": "Never", "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": nodepool.CONSOLIDATE_EMPTY_AFTER,
                                                             "budgets": nodepool.drift_budgets(policy, window)}}
    if not policy.training:
        lifetime["terminationGracePeriod"] = f"{policy.wait_minutes}m"
    return lifetime


def node_pool_lifetime(pool: Pool, window: Window) -> dict:
    """The fields of the pool's NodePool that decide when its nodes go, where the NodePool has them (karpenter.node_pool
    writes them from `karpenter_disruption` too): the plan's lines are read from these."""
    lifetime = karpenter_disruption(pool, window)
    template = {k: lifetime[k] for k in ("expireAfter", "terminationGracePeriod") if k in lifetime}
    return {"metadata": {"name": node_class_name(pool.name), "labels": {UPGRADES_LABEL: pool_upgrade(pool).kind}},
            "spec": {"template": {"spec": template}, "limits": {"nodes": str(pool.max_nodes)}, "disruption": lifetime["disruption"]}}


def pool_upgrade_problems(pool: Pool, policy: PoolUpgrade, path: str, autoscaler: str) -> list[Problem]:
    """None of an agent pool's: `waitForJobs` is the NodePool's terminationGracePeriod here, not a drain timeout."""
    return []


def upgrade_lines(pool: Pool, policy: PoolUpgrade, window: Window, cluster: Cluster, autoscaler: str) -> list[str]:
    """Read from the pool's NodePool: what drifts its nodes, when, and what a running Job gets."""
    if cluster.create:
        sources = (f"new node images (NAP picks them up only {window.text}: aksManagedNodeOSUpgradeSchedule), Kubernetes patch upgrades "
                   f"(aksManagedAutoUpgradeSchedule) and NodePool or AKSNodeClass changes")
    else:
        sources = ("new node images and Kubernetes upgrades (in the existing cluster's own schedules, not changed by gpupools) and NodePool or "
                   "AKSNodeClass changes")
    return nodepool.node_pool_lines(node_pool_lifetime(pool, window), window, sources)
