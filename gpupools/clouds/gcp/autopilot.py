"""GKE Autopilot (`cluster.mode: autopilot`): the GKE cluster's answers, where Autopilot changes them.

An Autopilot cluster has no node pool of gpupools' own: GKE makes a node for the pods that ask for one. A GPU pool is
therefore what its pods select, and nothing GKE-side is created for it:

- the accelerator, by node selector `cloud.google.com/gke-accelerator` and the GPUs per node by
  `cloud.google.com/gke-accelerator-count`, with `nvidia.com/gpu` in the pod's limits (GKE "Deploy GPU workloads in
  Autopilot": from 1.29.4-gke.1427000 Autopilot's Accelerator compute class serves a pod that requests GPUs, time-sharing
  included). That Autopilot's GPU nodes carry the count label too is read from an Autopilot node's labels as `kubectl
  describe node` shows them in a public walkthrough, not from a GKE page;
- GPU time-sharing, by node selectors `cloud.google.com/gke-gpu-sharing-strategy: time-sharing` and
  `cloud.google.com/gke-max-shared-clients-per-gpu` (GKE "Share GPUs with multiple workloads using time-sharing":
  Autopilot from 1.29.3-gke.1093000). MPS is documented for Standard clusters only ("Share GPUs with multiple workloads
  using NVIDIA MPS", requirements: "GKE Standard clusters running GKE version 1.27.7-gke.1088000 and later"), and no
  GKE page read documents MIG partitions on Autopilot: both are refused;
- Spot, by `cloud.google.com/gke-spot: "true"` (GKE "Run fault-tolerant workloads at lower costs in Spot Pods": GKE
  taints the Spot nodes and adds the matching toleration to the pods itself);
- the pool itself, by Autopilot's workload separation: a pod that selects `gpupools.io/pool: <pool>` and tolerates the
  taint of the same key and value gets a node GKE makes with that label and taint (GKE "Configure workload separation in
  GKE", "Separate workloads in Autopilot clusters"; "In Autopilot clusters, you can use node taints only for workload
  separation", "About node taints"). That pair is the only label gpupools can put on an Autopilot node.

The cluster (pulumi-gcp 10.2.0 `container.Cluster`, which bridges hashicorp/terraform-provider-google
google/services/container/resource_container_cluster.go): `enable_autopilot`; no `remove_default_node_pool`, no
`cluster_autoscaling.enabled` or `resource_limits` and no `enable_shielded_nodes`, each `ConflictsWith:
["enable_autopilot"]` there; `cluster_autoscaling.auto_provisioning_defaults` names the nodes' service account ("used
by the node VMs created by GKE Autopilot or NAP", the SDK's docstring). GPU metrics are GKE's own: `monitoring_config`
with the `DCGM` component and Managed Service for Prometheus (GKE "Collect and view DCGM metrics": GKE installs
DCGM-Exporter and sends its metrics to Managed Service for Prometheus); gpupools' own exporter would need a host path
and SYS_ADMIN, which Autopilot admits only for allowlisted privileged workloads (the SDK's
`autopilot_privileged_admissions`).

Every answer not given here is the standard GKE cluster's (gpupools.clouds.gcp).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gpupools.clouds.gcp import *  # noqa: F401,F403 (the standard cluster's answers; those below replace them)
from gpupools.clouds import gcp as standard
from gpupools.capacity import sources as capacity
from gpupools.clouds.common import Control
from gpupools.core.catalog import Hardware, zone_region
from gpupools.core.pools import POOL_LABEL, NodeTemplate, PoolPlan, Taint, toleration
from gpupools.core.sharing import GPU_RESOURCE
from gpupools.stack.config import Cluster, Pool, Sharing
from gpupools.stack.errors import Problem
from gpupools.upgrades.policy import PoolUpgrade, Window, options as upgrade_options

MODE = standard.AUTOPILOT
# Autopilot makes a node for each pod that asks for one: GKE's own autoscaler (OWN_AUTOSCALER, so gpupools installs
# none and takes no choice), named as the plan says it.
AUTOSCALER = "cloud"
# GPU pools are Karpenter NodePools or the service's own nodes here, not node pools of the cloud's node API: no `node:`.
NODE_API = None
SYSTEM_NODE_API = None
AUTOSCALER_NAME = "GKE Autopilot (a node for each pod that asks for one)"
POOL_COMPONENT = "gpupools:index:GkeAutopilotPool"

# What a pod selects to get an Autopilot GPU node (see the module's docstring for the sources).
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
ACCELERATOR_COUNT_LABEL = "cloud.google.com/gke-accelerator-count"
SHARING_STRATEGY_LABEL = "cloud.google.com/gke-gpu-sharing-strategy"
MAX_SHARED_CLIENTS_LABEL = "cloud.google.com/gke-max-shared-clients-per-gpu"
SPOT_LABEL = "cloud.google.com/gke-spot"
# Autopilot's sharing by node selector: time-sharing only (MPS is Standard's, MIG is not documented for Autopilot).
SHARING_SELECTORS = {"time-slicing": "time-sharing"}
# One pool, one kind of node: Autopilot's standard Pods or its Spot Pods. Reservations, flex-start and queued
# provisioning on Autopilot are not what gpupools builds.
CAPACITY_SHAPES = {(capacity.ON_DEMAND,), (capacity.SPOT,)}

# GPU software: Autopilot's. It installs the driver and runs its device plugin on the nodes it makes; nothing of
# gpupools' may sit beside them (the GPU Operator and NVIDIA's chart are privileged DaemonSets on the host).
AUTO_INSTALLER = "cloud"
OWN_GPU_SOFTWARE = True
OWN_SHARING = True
CLOUD_DEVICE_PLUGIN = "GKE Autopilot's device plugin"
# No exporter of gpupools' mounts the host's driver: GKE's managed DCGM-Exporter exports the GPUs.
CLOUD_DRIVER_ON_HOST = False
MANAGED_GPU_METRICS = ("GKE's managed DCGM-Exporter (monitoring_config DCGM) into Managed Service for Prometheus, under dcgm-exporter's "
                       "metric names; `gpupools idle --prometheus https://monitoring.googleapis.com/v1/projects/PROJECT/location/global/"
                       "prometheus --auth gcp` reads them there")
REFUSED_INSTALLERS = {
    installer: (f"{installer!r} cannot run on GKE Autopilot: Autopilot installs the driver and runs its own device plugin on the GPU nodes it "
                f"makes, and admits privileged DaemonSets only from an allowlist; use 'cloud' (or auto), or cluster.mode: standard")
    for installer in ("gpu-operator", "device-plugin")}
READINESS_NOTE = "Autopilot makes the node for the pod that asks and schedules it once the node's GPUs are allocatable"
# Autopilot rejects pods that need elevated privileges unless an allowlist admits them (GKE "Run privileged open source
# workloads on GKE Autopilot"; "About privileged workloads in Autopilot mode"), which a host-namespace node agent is.
ADMITS_HOST_AGENTS = False
# Autopilot manages kube-system and refuses to create anything there: "GKE Warden authz [denied by
# managed-namespaces-limitation]: the namespace "kube-system" is managed and the request's verb "create" is denied", as
# kube-prometheus-stack's installs report it (prometheus-community/helm-charts issues 713 and 4833; GKE "Autopilot
# security measures", docs.cloud.google.com/kubernetes-engine/docs/concepts/autopilot-security). Charts that put
# objects there are given values that keep them out (gpupools.monitoring.plan).
MANAGED_NAMESPACES = ("kube-system",)
# Autopilot has no per-pool node limit: it makes a node for every pod that selects the pool, so only what admits those
# pods (Kueue's team quotas) bounds the pool; maxNodes is what the plan, prices and quotas count.
BOUNDS_POOL_NODES = False
# Kueue's quota on each pool's flavor is what bounds an Autopilot pool (policy managed-pool-quota); the other engines
# bound teams, not pools.
REFUSED_QUOTAS = {engine: (f"{engine!r} bounds teams, not pools, and a GKE Autopilot pool grows for every pod that selects it: gpupools bounds "
                           f"each Autopilot pool by Kueue's quota on its flavor; use quotas: kueue")
                  for engine in ("kai", "resourcequota")}
# GKE's own managed components (gke-managed-system, gmp-system) stay the service's, as on Standard; no system pool.
SYSTEM_POOL = None
# Neither a fabric nor capacity bought ahead is something gpupools gives an Autopilot pool (`fabric_refusal`,
# `capacity_problems`), so the policy pack does not advise them.
FABRIC_OFFERED: str | None = "gpupools attaches GPUDirect networks only to node pools it creates, and an Autopilot cluster has none"
RESERVATIONS = False
MULTI_NODE_ADVICE = "run multi-node jobs on a Standard cluster's node pool"


def cluster_args(cluster: Cluster, project: str | None, pool, upgrades=None) -> dict:
    """The standard cluster's arguments with Autopilot on, less what Autopilot refuses (module docstring), and GKE's
    DCGM metrics with Managed Service for Prometheus."""
    args = standard.cluster_args(cluster, project, pool, upgrades)
    for key in ("remove_default_node_pool", "initial_node_count", "enable_shielded_nodes"):
        args.pop(key, None)
    args["enable_autopilot"] = True
    args["monitoring_config"] = {"enable_components": ["SYSTEM_COMPONENTS", "DCGM"], "managed_prometheus": {"enabled": True}}
    return args


def auto_provisioning_args(plans: list[PoolPlan], service_account: Any = None, cluster: Cluster | None = None) -> dict | None:
    """The nodes' service account and scopes, which Autopilot's nodes take from the auto-provisioning defaults; no limits
    and no `enabled` (Autopilot's own)."""
    defaults: dict = {"oauth_scopes": standard.NAP_SCOPES}
    if service_account is not None:
        defaults["service_account"] = service_account
    return {"auto_provisioning_defaults": defaults}


def system_node_pool_args(cluster_name, location: str, project: str | None, service_account: Any = None, cluster: Cluster | None = None) -> None:
    """None: Autopilot runs the cluster's own workloads on nodes it makes."""
    return None


def existing_cluster_problem(name: str, workload_pools: list[str | None], autopilot: bool | None = None) -> str | None:
    """The stack says Autopilot: a Standard cluster would never make GPU nodes for node selectors alone. Workload
    Identity is always on in Autopilot."""
    if not autopilot:
        return (f"GKE cluster {name!r} is a Standard cluster, but gpupools:cluster.mode is autopilot; set cluster.mode: standard (gpupools "
                f"then creates node pools) or name an Autopilot cluster")
    return None


def managed_plan(plan: PoolPlan) -> PoolPlan:
    """The pool as Autopilot's nodes carry it: the selectors of the module's docstring and the workload-separation pair,
    which is also a taint the pool's pods tolerate beside the GPU taint."""
    hw, m = plan.hardware, plan.mechanism
    selector = {ACCELERATOR_LABEL: hw.accelerator, ACCELERATOR_COUNT_LABEL: str(hw.gpus_per_node)}
    if m.mode in SHARING_SELECTORS:
        selector.update({SHARING_STRATEGY_LABEL: SHARING_SELECTORS[m.mode], MAX_SHARED_CLIENTS_LABEL: str(m.replicas)})
    if capacity.spot_only(plan.pool):
        selector[SPOT_LABEL] = "true"
    separation = Taint(POOL_LABEL, plan.name, "NoSchedule")
    return dataclasses.replace(plan, labels={POOL_LABEL: plan.name, **selector}, selector=selector, taints=(*plan.taints, separation))


def pool_record(plan: PoolPlan) -> dict:
    """What the pool's component records of it (its props), since nothing GKE-side stands for an Autopilot pool: the
    policy pack reads its GPUs, node count and price from it (gpupools.policies._readback)."""
    return {"pool": plan.name, "instanceType": plan.pool.instance_type, "maxNodes": plan.pool.max_nodes,
            "nodeSelector": dict(plan.node_selector), "tolerations": [toleration(t) for t in plan.taints]}


def pod_node_selector(pool: Pool) -> dict[str, str]:
    """Nothing from the pool alone: the selectors need its GPUs and sharing (`managed_plan`)."""
    return {}


def node_template(plan: PoolPlan) -> NodeTemplate:
    """The node Autopilot makes for a pending pod of the pool: the labels and taints it was asked for, the GPUs the
    accelerator count gives (times the time-sharing clients), and only for pods that select all of it."""
    words = f"{plan.hardware.accelerator} x{plan.hardware.gpus_per_node}"
    if plan.mechanism.mode != "none":
        words += f", {plan.mechanism.description}"
    if capacity.spot_only(plan.pool):
        words += ", Spot"
    return NodeTemplate("GKE Autopilot", f"the Accelerator compute class ({words})", dict(plan.labels), plan.taints,
                        {GPU_RESOURCE: plan.units_per_node}, requires=plan.node_selector)


def managed_pool_problems(pool: Pool, path: str, installer: str, cluster: Cluster | None) -> list[Problem]:
    """What an Autopilot pool cannot take: whatever would need a node of gpupools' making."""
    problems = []
    if pool.min_nodes > 0:
        problems.append(Problem(f"{path}.minNodes", f"{pool.min_nodes}, but GKE Autopilot keeps no GPU nodes waiting: it makes one when a pod "
                                                    f"asks and removes it when idle; set minNodes: 0"))
    if pool.provisioning == standard.COMPUTE_CLASS:
        problems.append(Problem(f"{path}.provisioning", "'compute-class' is built for Standard clusters; on Autopilot gpupools serves a pool "
                                                        "through Autopilot's Accelerator class by node selectors (drop provisioning, or use "
                                                        "cluster.mode: standard for a capacity fallback list)"))
    if pool.labels:
        problems.append(Problem(f"{path}.labels", "GKE Autopilot puts one label of the pod's choosing on a node, the workload-separation pair "
                                                  "(gpupools.io/pool); drop labels"))
    if pool.taints:
        # GKE "Configure workload separation": Autopilot taints a node only for a pod that both tolerates and selects the
        # same key:value pair, and gpupools spends that pair on the pool itself (gpupools.io/pool=<pool>:NoSchedule).
        problems.append(Problem(f"{path}.taints", "GKE Autopilot taints a node only for a pod that selects and tolerates the same key=value "
                                                  "(workload separation), and gpupools uses that pair for the pool itself (gpupools.io/pool); "
                                                  "drop taints, or use cluster.mode: standard"))
    if pool.zones:
        problems.append(Problem(f"{path}.zones", "gpupools does not pin Autopilot GPU pods to zones: Autopilot picks a zone of the cluster's "
                                                 "region that has the GPU; drop zones"))
    if pool.disk_size_gb is not None:
        problems.append(Problem(f"{path}.diskSizeGb", "gpupools makes no node on Autopilot, so it sizes no disk; ask for ephemeral-storage in "
                                                      "the pod instead, and drop diskSizeGb"))
    if pool.auto_repair is False:
        problems.append(Problem(f"{path}.autoRepair", "GKE Autopilot repairs the nodes it makes and takes no switch per pool; drop autoRepair"))
    return problems


def pool_sharing_problems(pool: Pool, sharing: Sharing, hw: Hardware | None, path: str) -> list[Problem]:
    """Time-sharing by node selector; MPS and MIG are not offered to Autopilot pods (module docstring)."""
    if sharing.mode == "mps":
        return [Problem(f"{path}.mode", "'mps' is not possible on GKE Autopilot: GKE documents MPS for Standard clusters only; use "
                                        "time-slicing (Autopilot's time-sharing) or cluster.mode: standard")]
    if sharing.mode == "mig":
        return [Problem(f"{path}.mode", "'mig' is not offered on GKE Autopilot by gpupools: GKE documents no GPU partitions for Autopilot "
                                        "pods; use time-slicing, whole GPUs, or cluster.mode: standard")]
    return []


def capacity_problems(pool: Pool, path: str, autoscaler: str, cluster: Cluster | None, hardware: Hardware | None) -> list[Problem]:
    """One kind of node per pool: standard Pods or Spot Pods."""
    if pool.capacity is None:
        return []
    shape = tuple(s.kind for s in capacity.sources(pool))
    if shape in CAPACITY_SHAPES:
        return []
    return [Problem(f"{path}.capacity", f"{', '.join(shape)}: an Autopilot pool takes [on-demand] or [spot] (Spot Pods); for reservations, "
                                        f"flex-start or a fallback list use cluster.mode: standard, or one pool per kind")]


def capacity_lines(pool: Pool, autoscaler: str) -> list[str]:
    return [f"{s.kind}: " + ("Autopilot Spot Pods (cloud.google.com/gke-spot=true)" if s.kind == capacity.SPOT else "Autopilot standard Pods")
            for s in capacity.sources(pool)]


def local_nvme_use(pool: Pool, fabric_on: bool) -> str | None:
    return None


def extra_tolerations(plan: PoolPlan) -> list[dict]:
    """None: GKE adds the Spot toleration to Spot Pods itself, and the pool's own taints are the plan's."""
    return []


def driver_installer(installer: str, os: str | None) -> str | None:
    return "GKE Autopilot (the driver of the node it makes for the pod's accelerator)"


def own_sharing_change() -> str:
    return ("a sharing change changes the pods' node selectors: Autopilot makes new nodes for them, running pods keep theirs; nothing is "
            "replaced")


def repair_facts(plan: PoolPlan, autoscaler: str) -> tuple[str, str]:
    detects = ("GKE's managed DCGM metrics (XID, row-remap faults) in Managed Service for Prometheus, where gpupools' GPU alert rules run if "
               "that Prometheus evaluates them")
    return detects, "GKE Autopilot: it manages and repairs the nodes it makes; gpupools sets nothing"


def cluster_controls(cluster: Cluster) -> list[Control]:
    """The standard cluster's controls; shielded nodes are Autopilot's own setting (the SDK refuses enable_shielded_nodes
    beside enable_autopilot)."""
    return [Control(c.name, "Autopilot's own (not settable)", "-", c.policy) if c.name == "shielded nodes" else c
            for c in standard.cluster_controls(cluster)]


def pool_upgrade_problems(pool: Pool, policy: PoolUpgrade, path: str, autoscaler: str) -> list[Problem]:
    """Autopilot upgrades its nodes itself: no surge or blue-green settings per pool."""
    chosen = upgrade_options(pool)
    return [Problem(f"{path}.{alias}", f"{value}: GKE Autopilot upgrades the nodes it makes itself and takes no surge settings per pool; "
                                       f"drop {alias}")
            for alias, value in (("maxSurge", chosen.max_surge), ("maxUnavailable", chosen.max_unavailable)) if value is not None]


def upgrade_lines(pool: Pool, policy: PoolUpgrade, window: Window, cluster: Cluster, autoscaler: str) -> list[str]:
    when = (f"GKE Autopilot upgrades its nodes ({cluster.release_channel or standard.DEFAULT_RELEASE_CHANNEL} channel) only {window.text}"
            if cluster.create else "GKE Autopilot upgrades its nodes in the existing cluster's own maintenance window (not changed by gpupools)")
    return [f"{policy.kind}: {when}, never during its maintenance exclusions; Autopilot chooses how it drains them"]


def cluster_problems(cluster: Cluster) -> list[Problem]:
    """The standard cluster's checks, and what Autopilot fixes itself: "GKE Autopilot clusters are always regional" (GKE
    "Regional clusters", docs.cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters), and Autopilot always
    runs GKE Dataplane V2, which enforces NetworkPolicy, so a stack cannot turn it off."""
    problems = standard.cluster_problems(cluster)
    if cluster.system_pool is not None:
        problems = [p for p in problems if not p.path.startswith("cluster.systemPool")]
        problems.append(Problem("cluster.systemPool", "GKE Autopilot runs the cluster's own workloads on nodes it makes and sizes; "
                                                      "gpupools creates no system pool there: drop systemPool"))
    if cluster.location and zone_region(cluster.location) != cluster.location:
        problems.append(Problem("cluster.location", f"{cluster.location!r} is a zone, and GKE Autopilot clusters are always regional; give its "
                                                    f"region ({zone_region(cluster.location)}), or use cluster.mode: standard for a zonal cluster"))
    if cluster.network_policy is False:
        problems.append(Problem("cluster.networkPolicy", "GKE Autopilot always runs Dataplane V2, which enforces network policy; drop "
                                                         "networkPolicy: false"))
    return problems
