"""The landing check on what the real charts render: every verdict is the one the plan computes from the values it
passes, so the plan's picture of each DaemonSet (tolerations, node selectors, affinity) is the charts' own."""

from __future__ import annotations

import copy

import pytest

from charts.chartrender import chart_dir, example_stacks, need_helm, render, stack_plan, stack_releases
from gpupools.clouds.registry import cloud_module
from gpupools.landing.agents import rendered_agents
from gpupools.landing.check import cluster_of, land, landing_check
from gpupools.landing.shapes import shapes

# Agents that no chart renders: gpupools' own DaemonSets and policies, and what the image or the cloud brings.
NOT_FROM_CHARTS = ("DaemonSet", "NicClusterPolicy", "node image", "GKE", "the cloud", "node image and user data")


def rendered_cluster(stack: str, values_edit=None):
    need_helm()
    from charts.chartrender import stack_config

    _, typed = stack_config(stack)
    cluster = cluster_of(typed)
    releases = []
    for release in stack_releases(stack):
        values = copy.deepcopy(release.values)
        if values_edit is not None:
            values_edit(release.chart, values)
        releases.append((release.chart, render(chart_dir(release.chart), values, release.release, release.namespace)))
    kept = [a for a in cluster.agents if a.source in NOT_FROM_CHARTS]
    cluster.agents = rendered_agents(releases, cloud_module(typed.cloud).FABRIC_RESOURCE) + kept
    return typed, cluster


def verdicts(cluster) -> dict:
    out = {}
    for team in cluster.teams or [None]:
        for plan in (team.pools if team else cluster.plans):
            for shape in shapes(cluster, plan):
                v = land(cluster, team, plan, shape)
                out[(team.team.name if team else None, plan.name, shape)] = (v.lands, v.failing.name if v.failing else None)
    return out


@pytest.mark.parametrize("stack", example_stacks())
def test_landing_on_the_rendered_charts_is_the_plans(stack):
    typed, cluster = rendered_cluster(stack)
    planned = {(v.team, v.pool, v.shape): (v.lands, v.failing.name if v.failing else None) for v in landing_check(typed)}
    assert verdicts(cluster) == planned
    assert all(lands for lands, _ in planned.values())


def test_a_rendered_nfd_worker_without_the_gpu_toleration_leaves_gpu_operator_pools_without_a_device_plugin():
    def drop(chart, values):
        if chart == "gpu-operator":
            values["node-feature-discovery"]["worker"]["tolerations"] = []

    _, cluster = rendered_cluster("dev-aws", drop)
    v = verdicts(cluster)
    assert v[("research", "train", "unit")] == (False, "ready")  # neither validator nor device plugin: the readiness taint stays first
    assert v[("search", "batch", "unit")] == (True, None)  # Bottlerocket's own plugin needs no discovery
