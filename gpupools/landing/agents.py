"""What runs on a GPU node of a pool and what it gives the node: the device plugins that advertise its GPUs and fabric
devices, the labels discovery adds, the software that lifts the readiness taint.

Each agent is read from what the plan installs: the Helm values gpupools passes (which the charts copy into their
DaemonSets' tolerations, node selectors and affinities) and the DaemonSets gpupools writes itself. `rendered_agents`
reads the same agents from `helm template` output of the pinned charts; tests/charts/test_landing_rendered.py runs
the check on both and requires the same verdict for every team, pool and shape. An agent that comes with the node image or the cloud
(Bottlerocket's device plugin, GKE's) runs wherever the pool says it does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from gpupools.core.pools import PoolPlan, Taint
from gpupools.core.sharing import BOTTLEROCKET, DEPLOY_OPERANDS_LABEL, HAMI
from gpupools.fabric.gpudirect import NETWORK_RESOURCE
from gpupools.fabric.plan import FabricPlan
from gpupools.health import readiness
from gpupools.landing.scheduling import runs_on

# The GPU Operator labels a node once Node Feature Discovery has found an NVIDIA PCI device (NVIDIA/gpu-operator
# v26.7.0 controllers/state_manager.go: gpuNodeLabels `feature.node.kubernetes.io/pci-10de.present`, then
# commonGPULabelKey `nvidia.com/gpu.present=true`), then sets `nvidia.com/gpu.deploy.<operand>=true` unless the node
# already carries a non-empty value, and removes them all on nodes labelled `nvidia.com/gpu.deploy.operands=false`
# (updateGPUStateLabels, addGPUStateLabels). Each operand DaemonSet selects its own label
# (assets/state-device-plugin/0500_daemonset.yaml: nodeSelector nvidia.com/gpu.deploy.device-plugin: "true").
GPU_PRESENT = "nvidia.com/gpu.present"
DEPLOY = "nvidia.com/gpu.deploy."


@dataclass(frozen=True)
class Node:
    """A node of one pool as it registers: labels, taints (the startup taints among them) and the pool it is of."""

    pool: PoolPlan
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    startup_taints: tuple[Taint, ...] = ()


@dataclass(frozen=True)
class Agent:
    """Something on the node that gives it a resource, a label or a lifted taint.

    `pod`: the pod template's scheduling fields (nodeSelector, affinity, tolerations); None for what the image or the
    cloud brings. `applies`: for image or cloud agents, which pools have it. `advertises(node)`: the extended resources
    it registers there."""

    name: str
    source: str
    pod: Mapping | None = None
    applies: Callable[[PoolPlan], bool] | None = None
    advertises: Callable[[Node], frozenset[str]] = lambda node: frozenset()
    labels: Mapping[str, str] = field(default_factory=dict)  # labels it puts on the node
    clears: frozenset[str] = frozenset()  # startup taint keys it lifts (with its partners, see readiness)

    def why_not_on(self, node: Node) -> str | None:
        """None when the agent runs on the node. A DaemonSet's pods must tolerate every taint the node has while they
        start, the startup taints included (the DaemonSet controller adds only node.kubernetes.io/* tolerations:
        kubernetes pkg/controller/daemon/util/daemonset_util.go, AddOrUpdateDaemonPodTolerations)."""
        if self.pod is None:
            return None if self.applies is None or self.applies(node.pool) else "not on this pool"
        return runs_on(self.pod, node.labels, node.taints + node.startup_taints)


def operator_labels(node: Node) -> dict[str, str]:
    """What the GPU Operator adds to a node once discovery has run there (see GPU_PRESENT)."""
    if node.labels.get(DEPLOY_OPERANDS_LABEL) == "false":
        return {GPU_PRESENT: "true"}
    operands = ("device-plugin", "operator-validator", "dcgm-exporter", "gpu-feature-discovery", "container-toolkit", "driver", "dcgm")
    return {GPU_PRESENT: "true", **{DEPLOY + o: "true" for o in operands if not node.labels.get(DEPLOY + o)}}


def _pool_resource(node: Node) -> frozenset[str]:
    return frozenset(node.pool.node_resources)


def gpu_operator_agents(values: Mapping) -> list[Agent]:
    """The GPU Operator: discovery (NFD worker, from the chart), then the operands the operator itself deploys with
    `daemonsets.tolerations`, each on its deploy label."""
    operand_tolerations = list((values.get("daemonsets") or {}).get("tolerations") or [])
    nfd = ((values.get("node-feature-discovery") or {}).get("worker") or {})
    agents = [Agent("node-feature-discovery worker", "gpu-operator chart", pod={"tolerations": list(nfd.get("tolerations") or []),
                                                                            "nodeSelector": dict(nfd.get("nodeSelector") or {})},
                    labels={"feature.node.kubernetes.io/pci-10de.present": "true"})]
    if (values.get("devicePlugin") or {}).get("enabled", True):
        agents.append(Agent("GPU Operator device plugin", "gpu-operator operand",
                            pod={"nodeSelector": {DEPLOY + "device-plugin": "true"}, "tolerations": operand_tolerations},
                            advertises=_pool_resource))
    agents.append(Agent("GPU Operator validator", "gpu-operator operand",
                        pod={"nodeSelector": {DEPLOY + "operator-validator": "true"}, "tolerations": operand_tolerations},
                        clears=frozenset({readiness.READINESS_TAINT.key})))
    return agents


def device_plugin_agents(values: Mapping) -> list[Agent]:
    return [Agent("NVIDIA device plugin", "nvidia-device-plugin chart",
                  pod={"tolerations": list(values.get("tolerations") or []), "affinity": values.get("affinity") or {},
                       "nodeSelector": dict(values.get("nodeSelector") or {})},
                  advertises=_pool_resource)]


def hami_agents(values: Mapping) -> list[Agent]:
    plugin = values.get("devicePlugin") or {}
    return [Agent("HAMi device plugin", "hami chart",
                  pod={"nodeSelector": dict(plugin.get("nvidiaNodeSelector") or {}), "tolerations": list(plugin.get("tolerations") or [])},
                  advertises=_pool_resource)]


def efa_agents(values: Mapping, resource: str) -> list[Agent]:
    """The chart's DaemonSet requires each `supportedInstanceLabels.keys` In `.values` and tolerates CriticalAddonsOnly
    plus `tolerations` (aws/eks-charts stable/aws-efa-k8s-device-plugin templates/daemonset.yaml)."""
    labels = values.get("supportedInstanceLabels") or {}
    terms = [{"matchExpressions": [{"key": k, "operator": "In", "values": list(labels.get("values") or [])} for k in labels.get("keys") or []]}]
    tolerations = [{"key": "CriticalAddonsOnly", "operator": "Exists"}, *(values.get("tolerations") or [])]
    return [Agent("EFA device plugin", "aws-efa-k8s-device-plugin chart",
                  pod={"tolerations": tolerations, "nodeSelector": dict(values.get("nodeSelector") or {}),
                       "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}},
                  advertises=lambda node: frozenset({resource}))]


def daemonset_agent(obj: Mapping, advertises: Callable[[Node], frozenset[str]] | None = None, clears: frozenset[str] = frozenset()) -> Agent:
    """A DaemonSet gpupools writes itself, read from the manifest."""
    spec = obj["spec"]["template"]["spec"]
    return Agent(obj["metadata"]["name"], "DaemonSet", pod={k: spec.get(k) for k in ("nodeSelector", "affinity", "tolerations")},
                 advertises=advertises or (lambda node: frozenset()), clears=clears)


def nic_policy_agent(policy: Mapping, resource: str) -> Agent:
    """The Network Operator's RDMA shared device plugin, placed by the NicClusterPolicy's nodeAffinity and tolerations."""
    spec = policy["spec"]
    return Agent("RDMA shared device plugin", "NicClusterPolicy",
                 pod={"affinity": {"nodeAffinity": spec.get("nodeAffinity") or {}}, "tolerations": list(spec.get("tolerations") or [])},
                 advertises=lambda node: frozenset({resource}))


def image_agents(fabrics: Mapping[str, FabricPlan], hugepages: Callable[[PoolPlan], str | None], cloud_plugin: str | None = None) -> list[Agent]:
    """What the node image or the cloud brings: Bottlerocket's device plugin, the cloud's own (`cloud_plugin`: GKE's, EKS
    Auto Mode's), huge pages allocated at boot."""
    return [
        Agent("Bottlerocket device plugin", "node image", applies=lambda p: p.mechanism.installer == BOTTLEROCKET, advertises=_pool_resource),
        Agent(cloud_plugin or "the cloud's device plugin", "the cloud", applies=lambda p: p.mechanism.installer == "cloud", advertises=_pool_resource),
        Agent("huge pages", "node image and user data", applies=lambda p: hugepages(p) is not None,
              advertises=lambda node: frozenset({"hugepages-2Mi"})),
    ]


def gke_network_agent(objects: list[dict], nics: Mapping[str, frozenset[tuple[str, str]]]) -> Agent:
    """GKE's node IPAM: on a node with a NIC in the VPC and subnet a GKENetworkParamSet names, it registers
    `networking.gke.io.networks/<network>.IP` for the Device Network that refers to that param set (fabric.gpudirect,
    NETWORK_RESOURCE). `objects`: the plan's Network and GKENetworkParamSet objects, read when asked, so an object taken
    out of the list is missed at once; `nics`: each pool's (VPC, subnet) pairs. Names compare by their last path
    segment, as the controller does (resourceName)."""
    def last(name) -> str:
        return str(name or "").rsplit("/", 1)[-1]

    def advertises(node: Node) -> frozenset[str]:
        mine = {(last(vpc), last(subnet)) for vpc, subnet in nics.get(node.pool.name, frozenset())}
        params = {o["metadata"]["name"]: o.get("spec") or {} for o in objects if o.get("kind") == "GKENetworkParamSet"}
        found = set()
        for o in objects:
            spec = o.get("spec") or {}
            ref = spec.get("parametersRef") or {}
            if o.get("kind") != "Network" or spec.get("type") != "Device" or ref.get("kind") != "GKENetworkParamSet":
                continue
            param = params.get(ref.get("name"))
            if param is not None and (last(param.get("vpc")), last(param.get("vpcSubnet"))) in mine:
                found.add(NETWORK_RESOURCE.format(o["metadata"]["name"]))
        return frozenset(found)

    return Agent("GKE multi-networking", "GKE", applies=lambda p: p.name in nics, advertises=advertises)


def node_labels_after_discovery(node: Node, agents: list[Agent]) -> Node:
    """The node once discovery has labelled it: NFD's PCI labels where its worker runs, then the GPU Operator's."""
    labels = dict(node.labels)
    for agent in agents:
        if agent.labels and agent.why_not_on(node) is None:
            labels.update(agent.labels)
            if agent.source == "gpu-operator chart":
                labels.update(operator_labels(Node(node.pool, labels, node.taints, node.startup_taints)))
    return Node(node.pool, labels, node.taints, node.startup_taints)


def is_hami(plan: PoolPlan) -> bool:
    return plan.mechanism.installer == HAMI


# What each chart's rendered DaemonSet does on a node, by chart and DaemonSet name: the scheduling fields are read from
# the manifest helm renders, only the meaning of the DaemonSet is known here.
def rendered_agents(releases: list[tuple[str, list[Mapping]]], fabric_resource: str | None = None) -> list[Agent]:
    """Agents read from `helm template` output, per release: (chart name, rendered objects). The GPU Operator's operands
    are no chart DaemonSets: the operator creates them from the ClusterPolicy the chart renders, on their deploy labels
    with `spec.daemonsets.tolerations`."""
    out: list[Agent] = []
    for chart, objects in releases:
        for obj in objects:
            kind, name = obj.get("kind"), obj.get("metadata", {}).get("name", "")
            if kind == "ClusterPolicy":
                spec = obj.get("spec") or {}
                tolerations = list((spec.get("daemonsets") or {}).get("tolerations") or [])
                if (spec.get("devicePlugin") or {}).get("enabled", True):
                    out.append(Agent("GPU Operator device plugin", "gpu-operator operand (rendered ClusterPolicy)",
                                     pod={"nodeSelector": {DEPLOY + "device-plugin": "true"}, "tolerations": tolerations}, advertises=_pool_resource))
                out.append(Agent("GPU Operator validator", "gpu-operator operand (rendered ClusterPolicy)",
                                 pod={"nodeSelector": {DEPLOY + "operator-validator": "true"}, "tolerations": tolerations},
                                 clears=frozenset({readiness.READINESS_TAINT.key})))
            if kind != "DaemonSet":
                continue
            spec = obj["spec"]["template"]["spec"]
            pod = {k: spec.get(k) for k in ("nodeSelector", "affinity", "tolerations")}
            if name.endswith("node-feature-discovery-worker"):
                # Only the GPU Operator turns NFD's PCI labels into its own (nvidia.com/gpu.present, deploy labels).
                out.append(Agent("node-feature-discovery worker", "gpu-operator chart" if chart == "gpu-operator" else f"{chart} chart",
                                 pod=pod, labels={"feature.node.kubernetes.io/pci-10de.present": "true"}))
            elif chart == "nvidia-device-plugin" and "gpu-feature-discovery" not in name:
                out.append(Agent("NVIDIA device plugin", "nvidia-device-plugin chart (rendered)", pod=pod, advertises=_pool_resource))
            elif chart == "hami" and name.endswith("device-plugin"):
                out.append(Agent("HAMi device plugin", "hami chart (rendered)", pod=pod, advertises=_pool_resource))
            elif chart == "aws-efa-k8s-device-plugin" and fabric_resource:
                out.append(Agent("EFA device plugin", "aws-efa-k8s-device-plugin chart (rendered)", pod=pod,
                                 advertises=lambda node, r=fabric_resource: frozenset({r})))
    return out
