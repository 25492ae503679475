"""KAI Scheduler's fractions: the GPU's holder is a reservation pod; its users are the pods of the same GPU group.

The report gives each idle reservation pod's GPU to the fractional pods that used it, read from kube-state-metrics;
apart from the rows because only stacks with KAI's fractions ever need it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpupools.idle.promapi import Prometheus
from gpupools.idle.rows import Report
from gpupools.monitoring.promql import KAI_RESERVATION_NAMESPACE as KAI_RESERVATIONS, KSM_GPU_FRACTION, KSM_GPU_GROUP


@dataclass(frozen=True)
class Sharer:
    namespace: str
    pod: str
    fraction: float | None  # its gpu-fraction annotation; None for a gpu-memory request or none read


def gpu_groups(prom: Prometheus, at: float, window: int) -> dict[str, list[Sharer]]:
    """GPU group -> every pod that carried it in the window (reservation pods included), from kube-state-metrics."""
    span = f"{max(window, 60)}s"
    labelled = prom.query(f'max by (namespace, pod, {KSM_GPU_GROUP}) (max_over_time(kube_pod_labels{{{KSM_GPU_GROUP}!=""}}[{span}]))', at)
    if not labelled:
        return {}
    annotated = prom.query(f'max by (namespace, pod, {KSM_GPU_FRACTION}) (max_over_time(kube_pod_annotations{{{KSM_GPU_FRACTION}!=""}}[{span}]))', at)
    fractions = {}
    for row in annotated:
        m = row["metric"]
        try:
            value = float(m.get(KSM_GPU_FRACTION, ""))
        except ValueError:
            continue
        if 0 < value < 1:
            fractions[(m.get("namespace"), m.get("pod"))] = value
    groups: dict[str, list[Sharer]] = {}
    for row in labelled:
        m = row["metric"]
        if m.get("namespace") and m.get("pod") and m.get(KSM_GPU_GROUP):
            groups.setdefault(m[KSM_GPU_GROUP], []).append(Sharer(m["namespace"], m["pod"], fractions.get((m["namespace"], m["pod"]))))
    return groups


def attribute_fractions(report: Report, groups: dict[str, list[Sharer]]) -> None:
    """Give each idle KAI reservation pod's GPU to the fractional pods of its group, per namespace, by their fractions
    (pods without one share what the others leave, evenly); a reservation pod with no such pods in the window keeps the
    row (the GPU was held for nobody)."""
    group_of = {(s.namespace, s.pod): name for name, sharers in groups.items() for s in sharers}
    rows = []
    for g in report.idle:
        group = group_of.get((g.namespace, g.pod)) if g.namespace == KAI_RESERVATIONS else None
        users = [s for s in groups.get(group, []) if s.namespace != KAI_RESERVATIONS] if group else []
        if not users:
            rows.append(g)
            continue
        known = sum(s.fraction for s in users if s.fraction is not None)
        unknown = [s for s in users if s.fraction is None]
        rest = max(1.0 - known, 0.0) / len(unknown) if unknown else 0.0
        weights = {s: (s.fraction if s.fraction is not None else rest) for s in users}
        total = sum(weights.values()) or 1.0
        by_namespace: dict[str, tuple[float, list[str]]] = {}
        for s, w in weights.items():
            weight, pods = by_namespace.get(s.namespace, (0.0, []))
            by_namespace[s.namespace] = (weight + w / total, pods + [s.pod])

        def part(value, weight):
            return None if value is None else round(value * weight, 4)

        for namespace, (weight, pods) in sorted(by_namespace.items()):
            rows.append(replace(g, namespace=namespace, pod=", ".join(sorted(pods)), unit="kai-fraction",
                                share=part(g.share, weight), gpu_hours_idle=part(g.gpu_hours_idle, weight),
                                usd_per_hour=part(g.usd_per_hour, weight),
                                wasted_usd=None if g.wasted_usd is None else round((g.exact_usd or 0) * weight, 2),
                                exact_usd=None if g.exact_usd is None else g.exact_usd * weight))
    rows.sort(key=lambda g: (g.wasted_usd is None, -(g.wasted_usd or 0), -g.hours_idle, g.namespace or "", g.pod or ""))
    report.idle = rows
