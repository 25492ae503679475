"""Who adds nodes to each GPU pool, and whether a pod asking for one unit of the pool makes it add one.

An autoscaler never sees a node that does not exist yet: it decides from a *template* of the node a pool
would start, built from what it knows (a Karpenter NodePool and NodeOverlays, the tags of an Auto Scaling
group, the VM size of an AKS agent pool, a GKE node pool's config). When a pool is at zero nodes, a pending
pod only triggers a scale-up if it fits that template: the pool's labels it selects, the taints it
tolerates, and the extended resource it requests (`nvidia.com/gpu`, `nvidia.com/mig-3g.40gb`, ...) in the
amount the autoscaler believes a new node will offer. The GPU Operator or device plugin that later
advertises that resource runs on the node itself, so only what the autoscaler was told counts.

Pure: each cloud module builds its templates (`node_template`), this module decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from gpupools.core.cloud import Cloud
from gpupools.stack.errors import Problem
from gpupools.core.pools import NodeTemplate, Taint

KARPENTER = "karpenter"
CLUSTER_AUTOSCALER = "cluster-autoscaler"
NONE = "none"
CLOUD = "cloud"  # the managed autoscaler of AKS and GKE

# Node taint effects that keep a pod off a node unless tolerated.
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def resolve_autoscaler(cloud: Cloud, create: bool, choice: str) -> str:
    """`auto`: Karpenter on a new EKS cluster (AWS's recommendation for GPU fleets: it picks capacity per pending
    pod and reads GPU counts from EC2), cluster-autoscaler on an existing one (it drives the managed node groups
    the pools already are and asks nothing of the cluster beyond an IAM role). AKS and GKE bring their own
    (`cloud.OWN_AUTOSCALER`); EKS Auto Mode runs Karpenter itself (`cloud.AUTOSCALER`)."""
    if cloud.OWN_AUTOSCALER:
        return CLOUD
    if cloud.AUTOSCALER is not None:
        return cloud.AUTOSCALER
    if choice == "auto":
        return KARPENTER if create else CLUSTER_AUTOSCALER
    return choice


def autoscaler_problems(cloud: Cloud, choice: str) -> list[Problem]:
    if cloud.OWN_AUTOSCALER and choice != "auto":
        return [Problem("autoscaler", f"{choice!r} is not available on {cloud.NAME}: {cloud.SERVICE} scales GPU pools with its own cluster autoscaler, "
                                      f"which gpupools turns on for every pool; remove gpupools:autoscaler (or set it to auto)")]
    if cloud.AUTOSCALER is not None and choice not in ("auto", cloud.AUTOSCALER):
        return [Problem("autoscaler", f"{choice!r} cannot scale this cluster's GPU pools: {cloud.AUTOSCALER_NAME} does, and gpupools installs no "
                                      f"other; remove gpupools:autoscaler (or set it to auto)")]
    return []


@dataclass(frozen=True)
class ScaleUp:
    """The verdict for one pool: can a pending pod asking for one unit wake it from zero nodes, and how."""

    pool: str
    autoscaler: str | None
    from_zero: bool
    detail: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    floor: int = 0  # minNodes, where the pool never sits at zero but may grow beyond it

    @property
    def summary(self) -> str:
        if self.floor:
            # The pool never sits at zero: what counts is whether a pending pod adds a node beyond its floor.
            return (f"scales up from {self.floor} node(s) (minNodes): " if self.from_zero
                    else f"adds no node beyond its {self.floor} (minNodes): ") + self.detail
        return ("scales from zero: " if self.from_zero else "does not scale from zero: ") + self.detail

    def as_json(self) -> dict:
        return {"pool": self.pool, "autoscaler": self.autoscaler, "fromZero": self.from_zero, "summary": self.summary, "notes": list(self.notes)}


def tolerates(tolerations: list[dict], taint: Taint) -> bool:
    """Kubernetes' toleration matching (an empty key with Exists tolerates everything)."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.effect:
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t["key"] == taint.key:
                return True
        elif t.get("key") == taint.key and t.get("value", "") == taint.value:
            return True
    return False


def requested_extended(pod_spec: dict) -> dict[str, int]:
    """Extended resources (names with a domain) the pod's containers ask for, summed; limits imply requests."""
    total: dict[str, int] = {}
    for container in pod_spec.get("containers", []):
        resources = container.get("resources", {})
        asked = {**resources.get("limits", {}), **resources.get("requests", {})}
        for name, quantity in asked.items():
            if "/" in name:
                total[name] = total.get(name, 0) + int(quantity)
    return total


def why_not(template: NodeTemplate, pod_spec: dict) -> str | None:
    """The first reason the pod would not fit a node made from the template, or None when it fits."""
    for key, value in template.requires.items():
        if pod_spec.get("nodeSelector", {}).get(key) != value:
            return f"{template.autoscaler} starts a node only for pods that select {key}={value} ({template.source})"
    for key, value in pod_spec.get("nodeSelector", {}).items():
        if template.labels.get(key) != value:
            return f"{template.autoscaler} does not know the node label {key}={value} ({template.source})"
    for taint in template.taints:
        if taint.effect in BLOCKING_EFFECTS and not tolerates(pod_spec.get("tolerations", []), taint):
            return f"the pod does not tolerate the taint {taint.key}={taint.value}:{taint.effect}"
    for name, wanted in requested_extended(pod_spec).items():
        offered = template.allocatable.get(name, 0)
        if offered < wanted:
            if offered == 0:
                return f"{template.autoscaler} expects no {name} on a new node ({template.source})"
            return f"{template.autoscaler} expects {offered} x {name} on a new node, the pod asks for {wanted} ({template.source})"
    return None


def decide(pool: str, template: NodeTemplate | None, pod_spec: dict, resource: str, units_per_node: int,
           no_autoscaler_reason: str = "") -> ScaleUp:
    if template is None:
        return ScaleUp(pool, None, False, no_autoscaler_reason or "no autoscaler manages this pool")
    reason = why_not(template, pod_spec)
    if reason is not None:
        return ScaleUp(pool, template.autoscaler, False, reason)
    seen = template.allocatable.get(resource, 0)
    notes = ()
    if seen < units_per_node:
        notes = (f"{template.autoscaler} counts {seen} x {resource} per new node while the node offers {units_per_node}: "
                 f"pods asking for more than {seen} units stay pending at zero nodes, and a burst may start more nodes than needed",)
    return ScaleUp(pool, template.autoscaler, True, f"{template.source}, {seen} x {resource} per node", notes)
