"""The scale-up check for a whole stack: for every pool, does the Job `gpupools workload` prints wake it from zero?

It asks the pool's autoscaler for its picture of a new node (`templates.node_template`) and lets `choice.decide`
compare it with that very Job's pod (`pools.pods.pod_spec`). Validation refuses `minNodes: 0` on a pool that
cannot scale up from zero under the autoscaler the stack installs; `gpupools plan` shows every verdict.
"""

from __future__ import annotations

from gpupools.autoscaling.choice import KARPENTER, NONE, ScaleUp, decide, resolve_autoscaler, why_not
from gpupools.autoscaling.templates import fitting_template, node_templates
from gpupools.core.pools import NodeTemplate, PoolPlan
from gpupools.core.sharing import GPU_RESOURCE
from gpupools.pools.planning import plan_pools
from gpupools.pools.pods import gpu_limits, pod_spec
from gpupools.stack.config import StackConfig
from gpupools.stack.errors import Problem

PROBE_IMAGE = "scale-up-check"

NO_AUTOSCALER = ("gpupools installs no autoscaler (gpupools:autoscaler: none); the node group carries cluster-autoscaler's "
                 "node-template tags for one you run")


def pool_scale_up(stack: StackConfig, plan: PoolPlan) -> ScaleUp:
    autoscaler = resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)
    pool = plan.pool
    if pool.min_nodes == pool.max_nodes:
        return ScaleUp(plan.name, None, False, f"fixed at {pool.min_nodes} nodes (minNodes = maxNodes), nothing to scale")
    pod = pod_spec(stack, plan, gpu_limits(plan, 1), PROBE_IMAGE)
    templates = node_templates(stack.target, plan, autoscaler)
    if len(templates) > 1:
        verdict, template = _over_types(plan, templates, pod)
    else:
        template = templates[0] if templates else None
        verdict = decide(plan.name, template, pod, plan.mechanism.resource, plan.units_per_node, NO_AUTOSCALER)
    if plan.mechanism.mode == "vgpu" and verdict.from_zero:
        # The check's Job names memory only if the pool sets memoryPerPod; most vGPU pods name memory and compute.
        named = pod_spec(stack, plan, gpu_limits(plan, 1, gpu_memory="1%", gpu_cores=1), PROBE_IMAGE)
        reason = why_not(template, named) if template is not None else None
        if reason is not None and autoscaler == KARPENTER:
            # A node started for such a pod would never initialize (HAMi never registers these resources), so Karpenter
            # is not told about them; see karpenter.overlay_capacity.
            verdict = ScaleUp(verdict.pool, verdict.autoscaler, True, verdict.detail, verdict.notes + (
                f"pods that name a vGPU memory or compute share make Karpenter start no node ({reason}); they run on nodes "
                f"started for pods that name vGPUs only, so keep minNodes at 1 or more if such pods must find room",))
        elif reason is not None:
            verdict = ScaleUp(verdict.pool, verdict.autoscaler, True, verdict.detail, verdict.notes + (
                f"pods that name a vGPU memory or compute share do not wake the pool from zero: {reason}; keep minNodes at 1 or more "
                f"if such pods must start it",))
    if autoscaler == KARPENTER and pool.min_nodes > 0:
        floor = (f"managed node group {pool.name}-floor keeps {pool.min_nodes} node(s) running; Karpenter adds up to "
                 f"{pool.max_nodes - pool.min_nodes} more",)
        verdict = ScaleUp(verdict.pool, verdict.autoscaler, verdict.from_zero, verdict.detail, floor + verdict.notes)
    if pool.min_nodes > 0:
        verdict = ScaleUp(verdict.pool, verdict.autoscaler, verdict.from_zero, verdict.detail, verdict.notes, floor=pool.min_nodes)
    return verdict


def _over_types(plan: PoolPlan, templates: list[NodeTemplate], pod: dict) -> tuple[ScaleUp, NodeTemplate | None]:
    """A pool whose nodes may be any of several instance types (Karpenter, `instanceTypes`) wakes from zero when the pod
    fits one of them; the verdict names what each type offers, and the types the pod does not fit."""
    resource = plan.mechanism.resource
    fits, misfits = [], []
    for template in templates:
        kind = template.labels.get("node.kubernetes.io/instance-type", "?")
        reason = why_not(template, pod)
        (fits if reason is None else misfits).append((kind, template, reason))
    if not fits:
        _, reason = fitting_template(templates, pod)
        return ScaleUp(plan.name, templates[0].autoscaler, False, reason or "no instance type fits"), None
    offered = ", ".join(f"{kind} ({t.allocatable.get(resource, 0)} x {resource})" for kind, t, _ in fits)
    overlays = " + NodeOverlays" if any("NodeOverlay" in t.source for _, t, _ in fits) else ""
    detail = f"NodePool {fits[0][1].labels.get('karpenter.sh/nodepool', plan.name)}{overlays}, a node of any of {offered}"
    notes = tuple(f"{kind} does not take this pod: {reason}" for kind, _, reason in misfits)
    return ScaleUp(plan.name, fits[0][1].autoscaler, True, detail, notes), fits[0][1]


def scale_ups(stack: StackConfig, plans: list[PoolPlan] | None = None) -> list[ScaleUp]:
    return [pool_scale_up(stack, plan) for plan in (plans if plans is not None else plan_pools(stack))]


def _hint(plan: PoolPlan) -> str:
    if len(plan.node_resources) > 1:
        return "set minNodes: 1 or more (a layout of several profiles, or with MIG off on some GPUs, needs the mixed strategy)"
    if plan.mechanism.mode == "mig" and plan.mechanism.resource != GPU_RESOURCE:
        return ("set gpuSoftware.migStrategy: single (MIG slices are then advertised as nvidia.com/gpu, which the autoscaler counts), "
                "or minNodes: 1 or more")
    return "set minNodes: 1 or more"


def scale_up_problems(stack: StackConfig) -> list[Problem]:
    """A pool allowed to sit at zero nodes must be wakeable by its own workload, unless the user runs the autoscaler."""
    if resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler) == NONE:
        return []
    problems = []
    for index, plan in enumerate(plan_pools(stack)):
        if plan.pool.min_nodes != 0:  # a pool that keeps a node needs no waking: its verdict is not worked out here
            continue
        verdict = pool_scale_up(stack, plan)
        if not verdict.from_zero:
            problems.append(Problem(f"pools[{index}].minNodes", f"0 would leave pool {plan.name!r} stuck at zero nodes: {verdict.detail}; {_hint(plan)}"))
    return problems
