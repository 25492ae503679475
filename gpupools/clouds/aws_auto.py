"""EKS Auto Mode (`cluster.mode: auto-mode`): the EKS cluster's answers, where Auto Mode changes them.

EKS runs Karpenter itself: a GPU pool is a `karpenter.sh/v1` NodePool on an `eks.amazonaws.com/v1` NodeClass (EKS user
guide, automode/create-node-class.adoc and auto-accelerated.adoc, pinned in tests/reference/eks with the NodeClass
schema an Auto Mode cluster serves). The node image brings the NVIDIA driver and the NVIDIA device plugin, which "runs
automatically and isn't visible as a daemon set" (auto-accelerated.adoc line 19): gpupools installs no GPU Operator or
device plugin, and no setting of the NodeClass reaches the built-in plugin, so its GPUs are whole. The node monitoring
agent is part of every Auto Mode cluster (nodes/node-health.adoc line 31) and Auto Mode repairs nodes itself.

Every answer not given here is the standard EKS cluster's (gpupools.clouds.aws).
"""

from __future__ import annotations

import json

from gpupools.clouds.aws import *  # noqa: F401,F403 (the standard cluster's answers; those below replace them)
from gpupools.clouds import aws as standard
from gpupools.clouds.common import Control
from gpupools.core.catalog import Hardware
from gpupools.core.pools import PoolPlan
from gpupools.core.sharing import GPU_RESOURCE, Mechanism
from gpupools.stack.config import Cluster, Pool, Sharing
from gpupools.stack.errors import Problem

MODE = standard.AUTO_MODE
# Fabric: no placement groups or per-device EFA settings on Auto Mode, and the EFA device plugin chart keeps off its
# nodes (`fabric_refusal`).
MULTI_NODE_ADVICE = ("EKS Auto Mode gives its nodes no EFA placement (no placement groups, and the EFA device plugin chart keeps off "
                     "its nodes): run multi-node jobs on a standard cluster's pool")

# GPU software: the node image's. `installer: auto` is the cloud's; the GPU Operator and NVIDIA's chart would put a
# second device plugin beside the built-in one (which no setting turns off), both registering nvidia.com/gpu.
AUTO_INSTALLER = "cloud"
OWN_GPU_SOFTWARE = True
OWN_SHARING = False
CLOUD_DEVICE_PLUGIN = "EKS Auto Mode's NVIDIA device plugin (node image)"
CLOUD_DRIVER_ON_HOST = False
REFUSED_INSTALLERS = {
    installer: (f"{installer!r} cannot serve EKS Auto Mode nodes: their image runs the NVIDIA device plugin itself (not as a DaemonSet, and no "
                f"setting turns it off), so a second one would register nvidia.com/gpu beside it; use 'cloud' (or auto), or a standard cluster")
    for installer in ("gpu-operator", "device-plugin")}
# Auto Mode runs Karpenter itself: gpupools installs none, and no other autoscaler scales its NodePools.
AUTOSCALER = "karpenter"
AUTOSCALER_NAME = "EKS Auto Mode (Karpenter)"
# No GPU Operator validates the nodes, so no readiness taint: a NodeClaim initializes only once every resource its pod
# asks for is registered (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/initialization.go).
STARTUP_TAINTS = False
READINESS_NOTE = ("GPU pods wait for the node image's device plugin to register nvidia.com/gpu; Auto Mode's Karpenter initializes the "
                  "NodeClaim only then")

# The NodeClass: EKS's group and kind, named after the pool (EKS creates `default` itself; a custom one must not take
# that name: create-node-class.adoc).
NODE_CLASS_API = "eks.amazonaws.com/v1"
NODE_CLASS_REF = {"group": "eks.amazonaws.com", "kind": "NodeClass"}
# The data volume Auto Mode nodes keep images and ephemeral storage on; its default is 80Gi (the NodeClass schema's
# ephemeralStorage default), too small for GPU images.
DEFAULT_EPHEMERAL_GB = 200

# Cluster: what an Auto Mode cluster asks of the control plane and node roles (pulumi-aws 7.x eks.Cluster docstring
# and the EKS user guide's "Create an Auto Mode cluster" policies), and the built-in pools it keeps. The built-in
# pools launch no GPU instance (set-builtin-node-pools.adoc: on-demand C, M and R families only), but one must be on
# for EKS to create the NodeClass `default` and to run the cluster's own add-ons.
CLUSTER_POLICIES = (*standard.CLUSTER_POLICIES, "arn:aws:iam::aws:policy/AmazonEKSComputePolicy", "arn:aws:iam::aws:policy/AmazonEKSBlockStoragePolicy",
                    "arn:aws:iam::aws:policy/AmazonEKSLoadBalancingPolicy", "arn:aws:iam::aws:policy/AmazonEKSNetworkingPolicy")
NODE_POLICIES = ("arn:aws:iam::aws:policy/AmazonEKSWorkerNodeMinimalPolicy", "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly")
BUILTIN_NODE_POOLS = ["general-purpose", "system"]


def cluster_role_trust_policy() -> str:
    """Auto Mode's control plane tags the sessions it starts with the cluster role (sts:TagSession)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"},
                                                             "Action": ["sts:AssumeRole", "sts:TagSession"]}]})


def cluster_args(cluster: Cluster, role_arn, subnet_ids, key_arn=None, node_role_arn=None) -> dict:
    """The standard cluster's arguments with Auto Mode on: compute, block storage and load balancing all enabled together,
    and EKS's self-managed add-ons not bootstrapped (the pulumi-aws eks.Cluster docstring: the three must be true
    together, and Auto Mode requires bootstrap_self_managed_addons false)."""
    args = standard.cluster_args(cluster, role_arn, subnet_ids, key_arn)
    args["compute_config"] = {"enabled": True, "node_pools": list(BUILTIN_NODE_POOLS), "node_role_arn": node_role_arn}
    args["storage_config"] = {"block_storage": {"enabled": True}}
    args["kubernetes_network_config"] = {"elastic_load_balancing": {"enabled": True}}
    args["bootstrap_self_managed_addons"] = False
    return args


def addons(cluster: Cluster) -> list[str]:
    """None: Auto Mode runs the VPC CNI, kube-proxy, CoreDNS, the Pod Identity agent and the node monitoring agent as part
    of the service."""
    return []


def cluster_problems(cluster: Cluster) -> list[Problem]:
    problems = standard.cluster_problems(cluster)
    if cluster.managed_addons is not None:
        problems.append(Problem("cluster.managedAddons", "EKS Auto Mode runs the VPC CNI, kube-proxy and CoreDNS itself; drop managedAddons"))
    return problems


def own_mechanism(sharing: Sharing, hardware: Hardware) -> Mechanism:
    """Whole GPUs, from the image's device plugin (sharing is refused: `pool_sharing_problems`)."""
    return Mechanism("cloud", "none", GPU_RESOURCE, 1, f"{CLOUD_DEVICE_PLUGIN}, whole GPUs")


def own_sharing_change() -> str:
    return "sharing stays whole GPUs on EKS Auto Mode (its device plugin takes no sharing settings); the NodePool is not replaced"


def image_device_plugin(os: str | None) -> bool:
    """Every Auto Mode node's image brings the plugin; the `cloud` installer stands for it (`own_mechanism`)."""
    return False


def pool_sharing_problems(pool: Pool, sharing: Sharing, hw: Hardware | None, path: str) -> list[Problem]:
    """No sharing: neither NodeClass view has a device-plugin or MIG setting, and the plugin is no DaemonSet gpupools could
    configure. HAMi would need its own device plugin to own nvidia.com/gpu, which the built-in one already registers."""
    if sharing.mode == "none":
        return []
    return [Problem(f"{path}.mode", f"{sharing.mode!r} is not possible on EKS Auto Mode: its built-in NVIDIA device plugin takes no time-slicing, "
                                    f"MPS, MIG or vGPU settings and cannot be replaced; share GPUs on a standard cluster (cluster.mode: standard, "
                                    f"with the GPU Operator), or use whole GPUs (mode: none)")]


def managed_pool_problems(pool: Pool, path: str, installer: str, cluster: Cluster | None) -> list[Problem]:
    """What an Auto Mode NodePool cannot take: a node image of the stack's choosing and a floor of nodes."""
    problems = []
    if pool.os is not None:
        problems.append(Problem(f"{path}.os", f"{pool.os!r}: EKS Auto Mode chooses its own node image (with the NVIDIA driver and device plugin); "
                                              f"drop os"))
    if pool.min_nodes > 0:
        problems.append(Problem(f"{path}.minNodes", f"{pool.min_nodes}, but an Auto Mode NodePool keeps no floor of nodes (Karpenter starts them as "
                                                    f"pods ask); set minNodes: 0"))
    if pool.auto_repair is False:
        problems.append(Problem(f"{path}.autoRepair", "EKS Auto Mode repairs every node it runs and takes no switch per pool; drop autoRepair"))
    return problems


def node_class(plan: PoolPlan, role: str, subnet_ids: list[str], security_group_ids: list[str]) -> dict:
    """The pool's NodeClass: the node role by name, the cluster's subnets and security group by id, the data volume sized
    by `diskSizeGb`, and the pool's reservations (capacityReservationSelectorTerms, as create-node-class.adoc documents it:
    Capacity Blocks are used only through it, and nodes launched into one are labelled karpenter.sh/capacity-type:
    reserved)."""
    spec: dict = {
        "role": role,
        "subnetSelectorTerms": [{"id": s} for s in subnet_ids],
        "securityGroupSelectorTerms": [{"id": g} for g in security_group_ids],
        "ephemeralStorage": {"size": f"{plan.pool.disk_size_gb or DEFAULT_EPHEMERAL_GB}Gi"},
        "tags": {"gpupools.io/pool": plan.name},
    }
    terms = reservation_selector_terms(plan.pool)
    if terms:
        spec["capacityReservationSelectorTerms"] = terms
    return {"apiVersion": NODE_CLASS_API, "kind": "NodeClass",
            "metadata": {"name": node_class_name(plan.name), "labels": {"app.kubernetes.io/managed-by": "gpupools"}}, "spec": spec}


def node_class_name(pool: str) -> str:
    return f"gpupools-{pool}"


def repair_facts(plan: PoolPlan, autoscaler: str) -> tuple[str, str]:
    """Auto Mode's node monitoring agent and node repair; no knob of either is documented for Auto Mode."""
    detects = f"{NODE_MONITORING_AGENT}, part of every Auto Mode cluster (DCGM health, XID, double-bit ECC), sets AcceleratedHardwareReady=False"
    return detects, "EKS Auto Mode's node repair replaces the node (Auto Mode's own timing; it takes no settings)"


def capacity_lines(pool: Pool, autoscaler: str) -> list[str]:
    """As Karpenter's on a standard cluster, through the NodeClass's capacityReservationSelectorTerms."""
    return [line.replace("EC2NodeClass", "NodeClass") for line in standard.capacity_lines(pool, autoscaler)]


def cluster_controls(cluster: Cluster) -> list[Control]:
    """The standard cluster's controls; the add-ons are Auto Mode's own."""
    return [Control(c.name, "built into EKS Auto Mode (VPC CNI, kube-proxy, CoreDNS, Pod Identity agent)", "-", c.policy)
            if c.key == "managedAddons" else c for c in standard.cluster_controls(cluster)]


def local_nvme_use(pool: Pool, fabric_on: bool) -> str | None:
    """The NodeClass has no instance-store setting: the node image decides (the EKS user guide does not say how)."""
    return "as EKS Auto Mode's node image sets it up (the NodeClass has no instance-store setting)"


def node_disk_line(plan: PoolPlan) -> str:
    size = plan.pool.disk_size_gb or DEFAULT_EPHEMERAL_GB
    return (f"NodeClass ephemeralStorage {size}Gi (EBS, the schema's 3,000 IOPS and 125 MiB/s): images and pods' ephemeral storage"
            + ("" if plan.pool.disk_size_gb else f" ({DEFAULT_EPHEMERAL_GB}Gi unless diskSizeGb says; Auto Mode's own default is 80Gi)"))


def driver_installer(installer: str, os: str | None) -> str | None:
    """The node image's driver (auto-accelerated.adoc: Auto Mode "includes the drivers and device plugins required")."""
    return "EKS Auto Mode's node image (the driver and device plugin it manages)"
