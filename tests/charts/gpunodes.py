"""A GPU pool's node as the scheduler sees it when it joins: its labels and taints.

Labels, from the plan and what the platform adds:
- the pool's own (`PoolPlan.labels`: pool, GPU, the stack's labels, the sharing mechanism's node labels);
- what its autoscaler gives a node it starts (Karpenter's NodePool labels and single-valued requirements,
  cluster-autoscaler's node-group labels), as `node_template` pictures it;
- what the kubelet sets on every node (kubernetes.io/os, kubernetes.io/arch, node.kubernetes.io/instance-type,
  kubernetes.io/hostname) and what the cloud adds: EKS managed node groups `eks.amazonaws.com/nodegroup` and
  `eks.amazonaws.com/capacityType`, GKE `cloud.google.com/gke-nodepool` and `cloud.google.com/gke-accelerator`,
  AKS `kubernetes.azure.com/agentpool`, `kubernetes.azure.com/accelerator: nvidia` and, on spot pools,
  `kubernetes.azure.com/scalesetpriority: spot`.

Labels written after the node joins by software (NFD's `feature.node.kubernetes.io/*`, GFD's and the GPU Operator's
`nvidia.com/gpu.*`) are not assumed: a DaemonSet that selects by them is checked for the taints only.

Taints: the pool's (`PoolPlan.taints`), those its cloud or autoscaler adds (AKS spot, GKE queued provisioning,
Karpenter's NodePool taints), and apart from them the startup taints a node carries until its GPU stack is validated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpupools.autoscaling.choice import KARPENTER, resolve_autoscaler
from gpupools.autoscaling.templates import node_group_labels, node_template
from gpupools.core.pools import PoolPlan, Taint
from gpupools.pools.planning import plan_pools
from gpupools.stack.config import StackConfig

# Arm CPUs among GPU instance types: AWS Graviton families (a `g` after the generation: g5g), NVIDIA Grace
# (GB200/GB300 superchips), GCP A4X.
_ARM = re.compile(r"^[a-z]+\d+g[a-z]*\.|gb[23]00|^a4x-", re.IGNORECASE)


def cpu_arch(instance_type: str) -> str:
    return "arm64" if _ARM.search(instance_type) else "amd64"


@dataclass(frozen=True)
class PoolNode:
    pool: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]  # kept while the node runs
    startup_taints: tuple[Taint, ...] = ()  # from join until the GPU stack is validated
    plan: PoolPlan | None = field(default=None, compare=False, repr=False)

    @property
    def joining_taints(self) -> tuple[Taint, ...]:
        return self.taints + tuple(t for t in self.startup_taints if t not in self.taints)


def _unique(taints) -> tuple[Taint, ...]:
    out: list[Taint] = []
    for t in taints:
        if t not in out:
            out.append(t)
    return tuple(out)


def pool_node(stack: StackConfig, plan: PoolPlan) -> PoolNode:
    from gpupools.clouds import azure, gcp

    autoscaler = resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)
    instance_type = plan.pool.instance_type
    labels = {"kubernetes.io/os": "linux", "kubernetes.io/arch": cpu_arch(instance_type),
              "node.kubernetes.io/instance-type": instance_type, "kubernetes.io/hostname": f"{plan.name}-node-0"}
    taints = list(plan.taints)
    startup = list(plan.startup_taints)
    template = node_template(stack.target, plan, autoscaler)
    if stack.cloud == "aws":
        if autoscaler != KARPENTER:  # a managed node group
            labels.update({"eks.amazonaws.com/nodegroup": plan.name,
                           "eks.amazonaws.com/capacityType": "SPOT" if plan.pool.spot else "ON_DEMAND"})
            labels.update(node_group_labels(plan, autoscaler))
    elif stack.cloud == "gcp":
        labels.update({"cloud.google.com/gke-nodepool": plan.name})
        if plan.hardware.accelerator:
            labels["cloud.google.com/gke-accelerator"] = plan.hardware.accelerator
        taints += gcp.node_taints(plan)
    elif stack.cloud == "azure":
        labels.update({"kubernetes.azure.com/agentpool": plan.name, "kubernetes.azure.com/accelerator": "nvidia"})
        if azure.spot_taint(plan):
            labels["kubernetes.azure.com/scalesetpriority"] = "spot"
        taints += azure.spot_taint(plan)
    if template is not None:
        labels.update(template.labels)
        taints += template.taints
        startup += template.startup_taints
    labels.update(plan.labels)
    taints_ = _unique(taints)
    return PoolNode(plan.name, labels, taints_, _unique(t for t in startup if t not in taints_), plan)


def pool_nodes(stack: StackConfig) -> list[PoolNode]:
    return [pool_node(stack, plan) for plan in plan_pools(stack)]

