"""`gpupools idle` on KAI fractions: the GPU's holder (KAI's reservation pod) is given to the fractional pods of its GPU
group, per namespace and by their fractions; and the stack tells kube-state-metrics to export what that needs."""

from __future__ import annotations

import pytest

from gpupools.idle.kai_fractions import Sharer, attribute_fractions, gpu_groups
from gpupools.idle.rows import IdleGpu, Report
from gpupools.idle.teams import by_team
from gpupools.monitoring.promql import KAI_RESERVATION_NAMESPACE
from gpupools.queues import kai

RES = KAI_RESERVATION_NAMESPACE


def holder(namespace: str, pod: str, usd: float = 4.0) -> IdleGpu:
    return IdleGpu(namespace=namespace, pod=pod, node="n1", pool="share", gpu="0", model="NVIDIA L4", catalog_gpu="L4", unit="gpu",
                   share=1.0, hours_idle=4.0, hours_seen=4.0, gpu_hours_idle=4.0, max_utilization=1.0, usd_per_hour=1.0,
                   wasted_usd=usd, exact_usd=usd)


def report(*rows: IdleGpu) -> Report:
    return Report(window_seconds=4 * 3600, below=5, min_idle_seconds=0, whole_window=False, gpus_seen=1, idle=list(rows))


class Prom:
    def __init__(self, labels, annotations):
        self.answers = {"kube_pod_labels": labels, "kube_pod_annotations": annotations}
        self.asked = []

    def query(self, expr, at):
        self.asked.append(expr)
        return next(v for k, v in self.answers.items() if k in expr)


def row(ns, pod, **labels):
    return {"metric": {"namespace": ns, "pod": pod, **labels}, "value": 1.0}


def test_the_reservation_namespace_is_the_charts():
    assert KAI_RESERVATION_NAMESPACE == kai.RESERVATION_NAMESPACE


def test_gpu_groups_read_labels_and_fractions_from_kube_state_metrics():
    prom = Prom([row(RES, "gpu-reservation-n1-abc", label_runai_gpu_group="g1"), row("vision", "nb-1", label_runai_gpu_group="g1"),
                 row("search-prod", "serve-1", label_runai_gpu_group="g1")],
                [row("vision", "nb-1", annotation_gpu_fraction="0.25"), row("search-prod", "serve-1", annotation_gpu_fraction="1.5")])
    groups = gpu_groups(prom, 0.0, 4 * 3600)
    assert groups == {"g1": [Sharer(RES, "gpu-reservation-n1-abc", None), Sharer("vision", "nb-1", 0.25), Sharer("search-prod", "serve-1", None)]}
    assert "[14400s]" in prom.asked[0]
    empty = Prom([], [])
    assert gpu_groups(empty, 0.0, 3600) == {} and len(empty.asked) == 1  # no GPU groups: one question


def test_a_reservation_pods_idle_gpu_goes_to_its_fractional_pods_by_fraction():
    groups = {"g1": [Sharer(RES, "gpu-reservation-n1-abc", None), Sharer("vision", "nb-1", 0.25), Sharer("vision", "nb-2", 0.25),
                     Sharer("search-prod", "serve-1", None)]}
    r = report(holder(RES, "gpu-reservation-n1-abc"), holder("train", "job-0", usd=9.0))
    attribute_fractions(r, groups)
    rows = {(g.namespace, g.pod): g for g in r.idle}
    assert set(rows) == {("train", "job-0"), ("vision", "nb-1, nb-2"), ("search-prod", "serve-1")}
    vision, search = rows[("vision", "nb-1, nb-2")], rows[("search-prod", "serve-1")]
    # vision's two pods asked for 0.25 each; search's pod has no fraction and takes what they leave: 0.5.
    assert (vision.share, vision.gpu_hours_idle, vision.wasted_usd, vision.unit) == (0.5, 2.0, 2.0, "kai-fraction")
    assert (search.share, search.wasted_usd) == (0.5, 2.0)
    assert rows[("train", "job-0")].wasted_usd == 9.0 and r.idle[0].pod == "job-0"  # untouched, most wasteful first
    totals = {t.team: t.wasted_usd for t in by_team(r, {"vision": "vision", "search": "search-prod"}, ["vision", "search"])}
    assert totals == {"vision": 2.0, "search": 2.0, "(no team)": 9.0}


def test_fractions_summing_past_one_are_scaled_and_a_reservation_without_users_keeps_its_row():
    groups = {"g1": [Sharer(RES, "r1", None), Sharer("vision", "a", 0.75), Sharer("search-prod", "b", 0.75)],
              "g2": [Sharer(RES, "r2", None)]}
    r = report(holder(RES, "r1"), holder(RES, "r2", usd=1.0))
    attribute_fractions(r, groups)
    rows = {(g.namespace, g.pod): g for g in r.idle}
    assert rows[("vision", "a")].wasted_usd == rows[("search-prod", "b")].wasted_usd == 2.0
    assert rows[(RES, "r2")].wasted_usd == 1.0 and rows[(RES, "r2")].unit == "gpu"


def test_a_kai_stack_with_fractions_has_kube_state_metrics_export_gpu_groups_and_fractions():
    from charts.chartrender import stack_releases

    (kps,) = [r for r in stack_releases("dev-aws-kai") if r.chart == "kube-prometheus-stack"]
    ksm = kps.values["kube-state-metrics"]
    assert "pods=[runai-gpu-group]" in ksm["metricLabelsAllowlist"] and ksm["metricAnnotationsAllowList"] == ["pods=[gpu-fraction]"]
    (deployment,) = [o for o in kps.render() if o["kind"] == "Deployment" and "kube-state-metrics" in o["metadata"]["name"]]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--metric-annotations-allowlist=pods=[gpu-fraction]" in args
    assert any(a.startswith("--metric-labels-allowlist=") and "pods=[runai-gpu-group]" in a for a in args)
    (other,) = [r for r in stack_releases("dev-aws") if r.chart == "kube-prometheus-stack"]
    assert "metricAnnotationsAllowList" not in other.values["kube-state-metrics"]
