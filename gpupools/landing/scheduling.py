"""Kubernetes' own rules for whether a pod may run on a node: taints and tolerations, node selectors, node affinity.

Pure and small on purpose: each rule is the upstream one, cited, so the landing check and the chart tests judge a
DaemonSet or a Job by the same semantics the scheduler and the DaemonSet controller use.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from gpupools.core.pools import Taint

# Taint effects that keep a pod off a node unless tolerated (PreferNoSchedule only steers).
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(toleration: Mapping, taint: Taint) -> bool:
    """k8s.io/api core/v1 toleration.go, `ToleratesTaint`: an empty effect matches every effect; an empty key with
    `Exists` matches every taint; `Exists` ignores the value; `Equal` (the default) compares it."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.key:
        return False
    if operator == "Exists":
        return True
    if operator == "Equal":
        return bool(key) and (toleration.get("value") or "") == taint.value
    return False


def untolerated(tolerations: Iterable[Mapping], taints: Iterable[Taint]) -> list[Taint]:
    """The blocking taints none of the tolerations matches (k8s.io/component-helpers scheduling/corev1
    `FindMatchingUntoleratedTaint`, filtered to NoSchedule and NoExecute as the TaintToleration plugin does)."""
    tolerations = list(tolerations)
    return [t for t in taints if t.effect in BLOCKING_EFFECTS and not any(tolerates(x, t) for x in tolerations)]


def _requirement(expr: Mapping, labels: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement (k8s.io/apimachinery labels/selector.go, `Requirement.Matches`, as
    component-helpers nodeaffinity builds it: Gt/Lt compare integers)."""
    key, operator, values = expr.get("key"), expr.get("operator"), list(expr.get("values") or [])
    present = key in labels
    value = labels.get(key, "")
    if operator == "In":
        return present and value in values
    if operator == "NotIn":
        return not present or value not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def term_matches(term: Mapping, labels: Mapping[str, str]) -> bool:
    """A NodeSelectorTerm: every matchExpression holds (matchFields name nodes, which gpupools never uses). An empty
    term matches nothing (component-helpers nodeaffinity.go, `newNodeSelectorTerms`: empty terms are dropped)."""
    expressions = list(term.get("matchExpressions") or [])
    if not expressions:
        return False
    return all(_requirement(e, labels) for e in expressions)


def selects(pod_spec: Mapping, labels: Mapping[str, str]) -> str | None:
    """None when the pod's nodeSelector and required node affinity both match the node's labels (component-helpers
    scheduling/corev1/nodeaffinity `GetRequiredNodeAffinity(pod).Match`: nodeSelector AND any of the terms),
    else the first reason it does not."""
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return f"nodeSelector {key}={value} (the node has {key}={labels[key]})" if key in labels else f"nodeSelector {key}={value} (the node has no {key} label)"
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        terms = list(required.get("nodeSelectorTerms") or [])
        if not any(term_matches(t, labels) for t in terms):
            exprs = "; ".join(", ".join(f"{e.get('key')} {e.get('operator')} {e.get('values') or ''}".rstrip() for e in t.get("matchExpressions") or [])
                              for t in terms) or "no terms"
            return f"required node affinity ({exprs})"
    return None


def runs_on(pod_spec: Mapping, labels: Mapping[str, str], taints: Iterable[Taint]) -> str | None:
    """None when a pod (or a DaemonSet's pod template) can be placed on the node, else why not."""
    why = selects(pod_spec, labels)
    if why is not None:
        return why
    missing = untolerated(pod_spec.get("tolerations") or [], taints)
    if missing:
        t = missing[0]
        return f"no toleration for the taint {t.key}={t.value}:{t.effect}"
    return None
