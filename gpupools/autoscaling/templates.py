"""What each autoscaler believes a new node of a pool offers, and what a managed node group tells it.

The autoscaler side asks the cloud, never the other way round: Karpenter and cluster-autoscaler build their own
picture of a node (NodePool and NodeOverlay, Auto Scaling group tags), the managed autoscalers of AKS and GKE
build theirs from the cloud's pool config (`node_template` of the cloud module).
"""

from __future__ import annotations

from dataclasses import replace

from gpupools.autoscaling import cluster_autoscaler, karpenter
from gpupools.autoscaling.choice import CLOUD, CLUSTER_AUTOSCALER, KARPENTER, why_not
from gpupools.core.cloud import Cloud
from gpupools.core.pools import NodeTemplate, PoolPlan
from gpupools.fabric.software import autoscaler_fabric_resources


def node_template(cloud: Cloud, plan: PoolPlan, autoscaler: str) -> NodeTemplate | None:
    """The picture of a new node the pool's autoscaler scales from; None: nobody scales the pool."""
    if autoscaler == KARPENTER:
        return karpenter.node_template(plan)
    if autoscaler == CLUSTER_AUTOSCALER:
        return cluster_autoscaler.node_template(plan)
    if autoscaler == CLOUD:
        return with_fabric_resources(cloud, plan, cloud.node_template(plan))
    return None


def node_templates(cloud: Cloud, plan: PoolPlan, autoscaler: str) -> list[NodeTemplate]:
    """Every picture of a new node the pool's autoscaler may start: one per instance type under Karpenter, which launches
    whichever type fits the pending pods (`karpenter.node_templates`); one elsewhere (a managed node group is pictured
    from its first instance type, `cluster_autoscaler.node_template`). Empty: nobody scales the pool."""
    if autoscaler == KARPENTER:
        return karpenter.node_templates(plan)
    template = node_template(cloud, plan, autoscaler)
    return [template] if template is not None else []


def fitting_template(templates: list[NodeTemplate], pod_spec: dict) -> tuple[NodeTemplate | None, str | None]:
    """The first picture the pod fits, or None and why it fits none (every type's reason, where there are several)."""
    reasons = []
    for template in templates:
        reason = why_not(template, pod_spec)
        if reason is None:
            return template, None
        reasons.append(reason)
    if len(reasons) > 1:
        types = [t.labels.get("node.kubernetes.io/instance-type", "?") for t in templates]
        return None, "no instance type of the pool fits: " + "; ".join(f"{t}: {r}" for t, r in zip(types, reasons))
    return None, reasons[0] if reasons else None


def with_fabric_resources(cloud: Cloud, plan: PoolPlan, template: NodeTemplate) -> NodeTemplate:
    """A managed autoscaler's picture of a fabric node: what the pool's scale set tags add beside the GPUs (the
    InfiniBand pools' RDMA device, `fabric.software.autoscaler_fabric_resources`, which the AKS component writes as tags)."""
    extra = autoscaler_fabric_resources(cloud, plan)
    if not extra:
        return template
    return replace(template, allocatable={**template.allocatable, **extra},
                   source=f"{template.source} and its scale set's resource tags ({', '.join(f'{k} x {v}' for k, v in extra.items())})")


def node_group_labels(plan: PoolPlan, autoscaler: str) -> dict[str, str]:
    """An EKS managed node group's labels: as Karpenter's fixed floor the pool's own, under cluster-autoscaler also
    the GPU label it reads."""
    return dict(plan.labels) if autoscaler == KARPENTER else cluster_autoscaler.node_labels(plan)


def eviction_guard(autoscaler: str) -> dict[str, str]:
    """The pod annotation that keeps each autoscaler from taking a running Job's node away: Karpenter's own
    do-not-disrupt (aws/karpenter-provider-aws website/content/en/docs/concepts/disruption.md), cluster-autoscaler's
    safe-to-evict "false" (AKS's and GKE's managed autoscalers included). None where no autoscaler removes nodes."""
    if autoscaler == KARPENTER:
        return {karpenter.DO_NOT_DISRUPT: "true"}
    if autoscaler in (CLUSTER_AUTOSCALER, CLOUD):
        return {cluster_autoscaler.SAFE_TO_EVICT: "false"}
    return {}
