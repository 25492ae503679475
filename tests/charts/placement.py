"""Would a pod template land on a node? Kubernetes' own rules for taints and required node affinity, on plain data.

`fits(pod_spec, labels, taints)` gives the reasons a pod of the template cannot run on a node with those labels and
taints (empty: it can), as the DaemonSet controller decides where its pods go (kubernetes/kubernetes
pkg/controller/daemon/daemon_controller.go, `predicates`: the required node affinity and nodeSelector must match,
and every NoSchedule and NoExecute taint must be tolerated).

Node affinity follows k8s.io/component-helpers/scheduling/corev1/nodeaffinity (`GetRequiredNodeAffinity(pod).Match`):
`nodeSelector` matches when every key is a label with that value; the required terms are ORed, a term's expressions
ANDed, and a term with neither expressions nor fields matches nothing. Each expression is a label selector
requirement (k8s.io/apimachinery/pkg/labels, `Requirement.Matches`): In and NotIn, where NotIn also holds without the
label; Exists and DoesNotExist; Gt and Lt compare the label's value as an integer with the single value given, and
fail when either is not one.

Tolerations follow k8s.io/api/core/v1 toleration.go (`ToleratesTaint`) and the scheduler's TaintToleration filter
(k8s.io/component-helpers/scheduling/corev1 helpers.go, `FindMatchingUntoleratedTaint` over NoSchedule and NoExecute):
an empty effect matches every effect, an empty key with Exists matches every taint, Exists ignores the value, Equal
(or no operator) needs the same key and value. PreferNoSchedule taints only lower a node's score.
"""

from __future__ import annotations

from typing import Iterable, Mapping

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def taint_fields(taint) -> tuple[str, str, str]:
    """(key, value, effect) of a taint given as gpupools' Taint, a dict, or `key=value:Effect`."""
    if isinstance(taint, str):
        rest, _, effect = taint.rpartition(":")
        key, _, value = rest.partition("=")
        return key, value, effect
    if isinstance(taint, Mapping):
        return taint["key"], taint.get("value") or "", taint["effect"]
    return taint.key, taint.value or "", taint.effect


def tolerates(toleration: Mapping, taint) -> bool:
    key, value, effect = taint_fields(taint)
    if toleration.get("effect") and toleration["effect"] != effect:
        return False
    if toleration.get("key") and toleration["key"] != key:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == value
    raise ValueError(f"toleration operator {operator!r} is not evaluated here")


def untolerated(tolerations: Iterable[Mapping] | None, taints: Iterable) -> list[tuple[str, str, str]]:
    """The taints that keep a pod with these tolerations off the node."""
    tolerations = list(tolerations or [])
    return [taint_fields(t) for t in taints
            if taint_fields(t)[2] in BLOCKING_EFFECTS and not any(tolerates(tol, t) for tol in tolerations)]


def _integer(text) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def requirement_matches(expression: Mapping, labels: Mapping[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], list(expression.get("values") or [])
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt"):
        if key not in labels or len(values) != 1:
            return False
        have, bound = _integer(labels[key]), _integer(values[0])
        if have is None or bound is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    raise ValueError(f"node selector operator {operator!r} is unknown")


def term_matches(term: Mapping, labels: Mapping[str, str]) -> bool:
    expressions = term.get("matchExpressions") or []
    if term.get("matchFields"):
        # Only metadata.name can be matched by field; a template naming nodes is not what these tests model.
        raise ValueError(f"matchFields {term['matchFields']} are not evaluated here")
    if not expressions:
        return False
    return all(requirement_matches(e, labels) for e in expressions)


def required_terms(pod_spec: Mapping) -> list[Mapping] | None:
    """The required node affinity's terms; None when the pod has no required node affinity."""
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is None:
        return None
    return list(required.get("nodeSelectorTerms") or [])


def selects(pod_spec: Mapping, labels: Mapping[str, str]) -> list[str]:
    """Why the pod's nodeSelector or required node affinity rejects a node with these labels (empty: it does not)."""
    reasons = [f"nodeSelector {key}={value!r}, node has {labels.get(key)!r}"
               for key, value in (pod_spec.get("nodeSelector") or {}).items() if labels.get(key) != value]
    terms = required_terms(pod_spec)
    if terms is not None and not any(term_matches(term, labels) for term in terms):
        reasons.append(f"no required node affinity term matches: {terms}")
    return reasons


def fits(pod_spec: Mapping, labels: Mapping[str, str], taints: Iterable) -> list[str]:
    """Why a pod of this template cannot run on the node (empty: it can)."""
    reasons = selects(pod_spec, labels)
    reasons += [f"taint {key}={value}:{effect} not tolerated (tolerations: {pod_spec.get('tolerations') or []})"
                for key, value, effect in untolerated(pod_spec.get("tolerations"), taints)]
    return reasons


# Tolerations the DaemonSet controller adds to every pod it creates (kubernetes/kubernetes pkg/controller/daemon/util
# daemonset_util.go, AddOrUpdateDaemonPodTolerations): node conditions and cordoning do not keep daemons off a node.
DAEMONSET_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)


def daemon_pod_spec(daemonset: Mapping) -> dict:
    """The pod spec a DaemonSet's pods get: its template's, with the tolerations the controller adds."""
    spec = dict(daemonset["spec"]["template"]["spec"])
    spec["tolerations"] = [*(spec.get("tolerations") or []), *DAEMONSET_TOLERATIONS]
    return spec
