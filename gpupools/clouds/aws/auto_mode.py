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
from gpupools.capacity import sources as capacity
from gpupools.clouds.common import Control
from gpupools.core.catalog import Hardware
from gpupools.core.pools import PoolPlan
from gpupools.core.sharing import GPU_RESOURCE, Mechanism
from gpupools.stack.config import Cluster, MaintenanceWindow, Pool, Sharing
from gpupools.stack.errors import Problem
from gpupools.upgrades import nodepool
from gpupools.upgrades.policy import UPGRADES_LABEL, PoolUpgrade, Window, options as upgrade_options, pool_upgrade

MODE = standard.AUTO_MODE
# GPU pools are Auto Mode's NodeClass and NodePool, not Karpenter's EC2NodeClass: no `node:`.
NODE_API = None
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


# Tags of gpupools' own on every NodeClass (`node_class`): the managed Auto Mode policies "do not permit applying user
# defined tags to Auto Mode provisioned AWS resources"; the cluster role needs more for that (EKS user guide,
# automode/auto-learn-iam.adoc, "Custom AWS tags for EKS Auto resources", awsdocs/amazon-eks-user-guide @4d52b4d0 and the
# fork snapshot @883e41ac), and without it a NodeClass with tags launches nothing ("Error getting launch template
# configs", automode/auto-troubleshoot.adoc). terraform-aws-modules/terraform-aws-eks attaches the guide's policy to the
# cluster role by default (main.tf, data "aws_iam_policy_document" "custom", `enable_auto_mode_custom_tags = true`,
# v21.19.0 @bef29c4d). Here: its three statements for what a NodeClass's tags land on (instances, launch templates and
# fleets; their volumes and snapshots; network interfaces), each scoped as there to requests that tag the resource with
# this cluster's own name (`${aws:PrincipalTag/eks:eks-cluster-name}`, the tag Auto Mode's session carries:
# sts:TagSession below) and, for launches, with a NodeClass and NodePool. The load balancer and Shield statements are
# left out: gpupools tags no load balancer. The interface statement matches the CNI node name with StringLike, as the
# guide does (terraform-aws-eks writes StringEquals "*", which would match only a literal "*").
CUSTOM_TAG_ACTIONS = {
    "Compute": ["ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate"],
    "Storage": ["ec2:CreateVolume", "ec2:CreateSnapshot"],
    "Networking": ["ec2:CreateNetworkInterface"],
}


def custom_tag_policy(partition: str) -> str:
    """The cluster role's inline policy that lets Auto Mode put a NodeClass's `tags` on what it launches."""
    this_cluster = {"aws:RequestTag/eks:eks-cluster-name": "${aws:PrincipalTag/eks:eks-cluster-name}"}
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "Compute", "Effect": "Allow", "Action": CUSTOM_TAG_ACTIONS["Compute"], "Resource": "*",
         "Condition": {"StringEquals": this_cluster, "StringLike": {"aws:RequestTag/eks:kubernetes-node-class-name": "*",
                                                                    "aws:RequestTag/eks:kubernetes-node-pool-name": "*"}}},
        {"Sid": "Storage", "Effect": "Allow", "Action": CUSTOM_TAG_ACTIONS["Storage"],
         "Resource": [f"arn:{partition}:ec2:*:*:volume/*", f"arn:{partition}:ec2:*:*:snapshot/*"], "Condition": {"StringEquals": this_cluster}},
        {"Sid": "Networking", "Effect": "Allow", "Action": CUSTOM_TAG_ACTIONS["Networking"], "Resource": "*",
         "Condition": {"StringEquals": this_cluster, "StringLike": {"aws:RequestTag/eks:kubernetes-cni-node-name": "*"}}},
    ]})


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
    if cluster.system_pool is not None:
        problems = [p for p in problems if not p.path.startswith("cluster.systemPool")]
        problems.append(Problem("cluster.systemPool", "EKS Auto Mode runs the cluster's add-ons on its built-in system NodePool, which it "
                                                      "sizes itself; gpupools creates no system node group: drop systemPool"))
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


def node_class(plan: PoolPlan, role: str, subnet_ids: list[str], security_group_ids: list[str], tagged: bool = True) -> dict:
    """The pool's NodeClass: the node role by name, the cluster's subnets and security group by id, the data volume sized
    by `diskSizeGb`, and the pool's reservations (capacityReservationSelectorTerms, as create-node-class.adoc documents it:
    Capacity Blocks are used only through it, and nodes launched into one are labelled karpenter.sh/capacity-type:
    reserved; a tag term's account is `owner` there, Karpenter's EC2NodeClass says `ownerID`).

    `tagged`: the pool's tag on what Auto Mode launches, which needs the cluster role's `custom_tag_policy`; gpupools
    attaches it to the clusters it creates, and leaves the tag off on an existing cluster, whose role it does not know:
    a tag the role may not apply would stop every launch."""
    spec: dict = {
        "role": role,
        "subnetSelectorTerms": [{"id": s} for s in subnet_ids],
        "securityGroupSelectorTerms": [{"id": g} for g in security_group_ids],
        "ephemeralStorage": {"size": f"{plan.pool.disk_size_gb or DEFAULT_EPHEMERAL_GB}Gi"},
    }
    if tagged:
        spec["tags"] = {"gpupools.io/pool": plan.name}
    terms = [{("owner" if k == "ownerID" else k): v for k, v in term.items()} for term in reservation_selector_terms(plan.pool)]
    if terms:
        spec["capacityReservationSelectorTerms"] = terms
    return {"apiVersion": NODE_CLASS_API, "kind": "NodeClass",
            "metadata": {"name": node_class_name(plan.name), "labels": {"app.kubernetes.io/managed-by": "gpupools"}}, "spec": spec}


def node_class_name(pool: str) -> str:
    return f"gpupools-{pool}"


def repair_facts(plan: PoolPlan, autoscaler: str) -> tuple[str, str]:
    """Auto Mode's node monitoring agent and node repair. No knob of either is documented for Auto Mode; what the repair
    does is Karpenter's, which Auto Mode runs (its troubleshooting page lists Karpenter's NodeRepairBlocked event,
    automode/auto-troubleshoot.adoc), read from the pool's NodePool (`nodepool.repair_line`)."""
    detects = f"{NODE_MONITORING_AGENT}, part of every Auto Mode cluster (DCGM health, XID, double-bit ECC), sets AcceleratedHardwareReady=False"
    return detects, nodepool.repair_line(node_pool_lifetime(plan.pool, Window.of(MaintenanceWindow())), "EKS Auto Mode's node repair")


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


# --------------------------------------------------------------------------------------------------------------------
# Day two: what takes Auto Mode nodes away, and when (docs/managed-modes.md)
#
# "EC2 managed instances operated by EKS Auto Mode have maximum lifetime of 21 days. Amazon EKS Auto Mode automatically
# terminates instances exceeding this lifetime" (EKS user guide security/auto-security.adoc, "Instance lifecycle
# management"; automode/automode.adoc: "a maximum lifetime of 21 days (which you can reduce)"), and "when a
# terminationGracePeriod is not explicitly defined on an EKS Auto NodePool, the system automatically applies a default
# 24-hour termination grace period" (automode/create-node-pool.adoc, "Termination Grace Period"; both at the fork
# snapshot sheetaljoshi/amazon-eks-user-guide @883e41ac). Auto Mode's admission refuses a NodePool whose expireAfter plus
# terminationGracePeriod exceeds the 21 days ("the sum of expireAfter and terminationGracePeriod (defaulted to 24h) may
# not exceed 21 days", quoted in aws-controllers-k8s/test-infra PR #1000 from an Auto Mode cluster), so Karpenter's
# `expireAfter: Never` and its 720h default are both refused there.
#
# So a pool's nodes always expire, and a drifted or expiring node always drains under a grace period. gpupools makes the
# grace period explicit, the pool's `waitForJobs` (24h for training, 30m for inference: what a running Job gets once its
# node drains), and lets nodes live the whole days that remain of the 21 (20 days at 24h). Drift keeps the standard
# cluster's budgets: training nodes drift only inside the maintenance window. What this does to a running Job is said
# per pool by `upgrade_lines`, read from the NodePool.
MAX_NODE_LIFETIME_MINUTES = 21 * 24 * 60
DEFAULT_GRACE = "24h"
# The longest wait a pool may ask for: nodes then still live 14 days (336h, the built-in pools' expireAfter,
# automode/create-node-pool.adoc "Disruption": "Terminates instances after 336 hours").
MAX_WAIT_MINUTES = 7 * 24 * 60
DRIFT_SOURCES = "new Auto Mode AMIs (about weekly), Kubernetes version upgrades and NodePool or NodeClass changes"
LIFETIME_CAP = "EKS Auto Mode ends every instance by 21 days, and expireAfter plus terminationGracePeriod must fit in them"


def grace_text(total: int) -> str:
    return f"{total // 60}h" if total % 60 == 0 else f"{total}m"


def karpenter_disruption(pool: Pool, window: Window) -> dict:
    """The NodePool's lifetime on Auto Mode: terminationGracePeriod the pool's wait for jobs, expireAfter the whole days
    of the 21 that remain, and the standard cluster's drift budgets and consolidation."""
    wait = pool_upgrade(pool).wait_minutes
    days = max(1, (MAX_NODE_LIFETIME_MINUTES - wait) // (24 * 60))
    return {"expireAfter": f"{days * 24}h", "terminationGracePeriod": grace_text(wait),
            "disruption": standard.karpenter_disruption(pool, window)["disruption"]}


def node_pool_lifetime(pool: Pool, window: Window) -> dict:
    """The fields of the pool's NodePool that decide when its nodes go, where the NodePool has them (karpenter.node_pool
    writes them from `karpenter_disruption` too): the plan's lines are read from these."""
    lifetime = karpenter_disruption(pool, window)
    return {"metadata": {"name": node_class_name(pool.name), "labels": {UPGRADES_LABEL: pool_upgrade(pool).kind}},
            "spec": {"template": {"spec": {"expireAfter": lifetime["expireAfter"], "terminationGracePeriod": lifetime["terminationGracePeriod"]}},
                     "limits": {"nodes": str(pool.max_nodes - pool.min_nodes)}, "disruption": lifetime["disruption"]}}


def pool_upgrade_problems(pool: Pool, policy: PoolUpgrade, path: str, autoscaler: str) -> list[Problem]:
    chosen = upgrade_options(pool)
    if chosen.wait_for_jobs is not None and policy.wait_minutes > MAX_WAIT_MINUTES:
        return [Problem(f"{path}.waitForJobs", f"{chosen.wait_for_jobs}: on EKS Auto Mode it is the NodePool's terminationGracePeriod, which with "
                                               f"expireAfter must fit in the 21 days Auto Mode gives a node; at most 168h (7 days), so that "
                                               f"nodes still live 14")]
    return []


def upgrade_lines(pool: Pool, policy: PoolUpgrade, window: Window, cluster: Cluster, autoscaler: str) -> list[str]:
    """Read from the pool's NodePool; then the standard cluster's words on full reservations and Capacity Blocks."""
    lines = nodepool.node_pool_lines(node_pool_lifetime(pool, window), window, DRIFT_SOURCES, DEFAULT_GRACE, LIFETIME_CAP)
    return lines + standard.upgrade_lines(pool, policy, window, cluster, "karpenter")[1:]


def plan_notes(pools: list[Pool]) -> list[str]:
    """A NodeClass that selects capacity reservations changes what every NodeClass of the cluster may launch into: "If
    you configure capacityReservationSelectorTerms on a NodeClass in a cluster, EKS Auto Mode will no longer
    automatically use open ODCRs for any NodeClass in the cluster" (EKS user guide automode/auto-odcr.adoc)."""
    reserving = [p.name for p in pools if capacity.reservations(p)]
    if not reserving:
        return []
    return [f"the NodeClasses of {', '.join(reserving)} select capacity reservations (capacityReservationSelectorTerms): from then on EKS "
            f"Auto Mode launches no node of this cluster into an open ODCR by itself, built-in pools and other NodeClasses included; "
            f"an open reservation others counted on must be selected by their own NodeClass"]
