"""Grafana dashboards built in code, so every panel queries a series the recording rules produce. The same JSON goes
into the ConfigMaps the Grafana sidecar loads and into the files `gpupools render` writes.
"""

from __future__ import annotations

from gpupools.stack.config import Idle
from gpupools.monitoring.promql import (
    KAI_ALLOCATED_BY_TEAM,
    KAI_QUOTA_BY_TEAM,
    KAI_RECLAIM_WINDOW,
    KAI_RECLAIMED_BY_TEAM,
    KAI_TEAM_QUEUE,
    KAI_WAITING_BY_TEAM,
    KUEUE_PENDING_BY_TEAM,
    KUEUE_QUOTA_BORROWED,
    KUEUE_QUOTA_NOMINAL,
    KUEUE_QUOTA_PENDING,
    KUEUE_QUOTA_USED,
    KUEUE_TEAM_QUEUE,
    KUEUE_WAIT_P90,
    KUEUE_WAIT_WINDOW,
    POD_COST,
    PODS_PER_GPU,
    SHARE,
    UTIL,
    percent,
)

from gpupools.health.signals import ALERTS_FIRING, UNHEALTHY_NODES, UNREADY_NODES

_DS = {"type": "prometheus", "uid": "${datasource}"}


def _target(expr: str, legend: str = "", ref: str = "A", instant: bool = False) -> dict:
    target = {"datasource": _DS, "expr": expr, "legendFormat": legend, "refId": ref}
    if instant:
        target.update(instant=True, format="table", range=False)
    return target


def _panel(kind: str, title: str, targets: list[dict], x: int, y: int, w: int, h: int, unit: str = "", description: str = "",
           **options) -> dict:
    panel = {"type": kind, "title": title, "description": description, "datasource": _DS, "targets": targets,
             "gridPos": {"x": x, "y": y, "w": w, "h": h},
             "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}, "options": options}
    return panel


def _dashboard(uid: str, title: str, panels: list[dict], variables: list[dict], description: str) -> dict:
    for i, panel in enumerate(panels, start=1):
        panel["id"] = i
    return {
        "uid": uid, "title": title, "description": description, "tags": ["gpupools", "gpu"], "timezone": "browser",
        "schemaVersion": 39, "version": 1, "editable": True, "refresh": "1m", "time": {"from": "now-24h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
                                 "current": {}, "hide": 0}] + variables},
        "panels": panels, "annotations": {"list": []},
    }


def _query_var(name: str, label: str, query: str) -> dict:
    return {"name": name, "label": label, "type": "query", "datasource": _DS, "query": {"query": query, "refId": name},
            "definition": query, "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "sort": 1}


def fleet_dashboard(idle: Idle) -> dict:
    below = percent(idle.utilization_below_percent)
    idle_now = f'{UTIL}{{pool=~"$pool", pod!=""}} < {below}'
    panels = [
        _panel("stat", "GPUs per pool", [_target('sum by (pool) (gpupools:pool_gpus:count{pool=~"$pool"})', "{{pool}}")], 0, 0, 8, 5,
               description="Physical GPUs reporting DCGM metrics, per pool.", reduceOptions={"calcs": ["lastNotNull"]}),
        _panel("stat", "GPUs held by pods", [_target(f'sum({SHARE}{{pool=~"$pool", pod!=""}}) or vector(0)')], 8, 0, 4, 5,
               description="Physical GPUs: a MIG slice, a vGPU or a time-slice counts as its fraction of the GPU."),
        _panel("stat", f"Held but idle now (< {below}%)", [_target(f"sum({SHARE} and ({idle_now})) or vector(0)")], 12, 0, 4, 5,
               description="Physical GPUs held by a pod and below the idle threshold at this moment, slices and shared GPUs as "
                           "fractions; the alert waits for the configured hours."),
        _panel("stat", "GPU cost at list price", [_target("sum(gpupools:namespace_gpu_cost_usd_per_hour:sum)")], 16, 0, 8, 5,
               unit="currencyUSD", description="What the GPUs held by pods cost per hour at the catalog's lowest per-GPU list price."),
        _panel("timeseries", "Utilization per pool", [_target('gpupools:pool_gpu_utilization:avg{pool=~"$pool"}', "{{pool}}")],
               0, 5, 12, 8, unit="percent"),
        _panel("timeseries", "Utilization per namespace",
               [_target('gpupools:namespace_gpu_utilization:avg{pool=~"$pool", namespace!=""}', "{{namespace}} ({{pool}})")],
               12, 5, 12, 8, unit="percent"),
        _panel("timeseries", "GPU memory used per pool", [_target('gpupools:pool_gpu_memory_used:mib{pool=~"$pool"}', "{{pool}}")],
               0, 13, 12, 8, unit="mbytes"),
        _panel("timeseries", "Sharing: pods per GPU (average over GPUs held)",
               [_target(f'avg by (pool) ({PODS_PER_GPU}{{pool=~"$pool"}})', "{{pool}}")], 12, 13, 12, 8,
               description="Above 1 where time-slicing or MPS lets several pods hold one GPU."),
        _panel("table", f"Idle GPUs: held by a pod, below {below}% now", [_target(idle_now, instant=True)], 0, 21, 24, 9,
               unit="percent", description="Run `gpupools idle --prometheus URL` for hours idle and wasted cost over a window."),
        *health_panels(30),
    ]
    pool_var = _query_var("pool", "Pool", f"label_values({UTIL}, pool)")
    return _dashboard("gpupools-fleet", "GPU fleet overview (gpupools)", panels, [pool_var],
                      "GPUs per pool, utilization per pool and namespace, memory, idle GPUs, sharing and GPU node health.")


def namespace_dashboard(vgpu: bool = False) -> dict:
    sel = 'namespace=~"$namespace"'
    panels = [
        _panel("stat", "Hourly GPU cost at list price", [_target(f"sum(gpupools:namespace_gpu_cost_usd_per_hour:sum{{{sel}}})")],
               0, 0, 8, 5, unit="currencyUSD", description="The catalog's lowest per-GPU list price, shared among the pods holding a GPU."),
        _panel("stat", "GPUs held", [_target(f"sum(gpupools:namespace_gpus_held:sum{{{sel}}})")], 8, 0, 8, 5,
               description="Physical GPUs: a MIG slice, a vGPU or a time-slice counts as its fraction of the GPU."),
        _panel("stat", "Average utilization", [_target(f'avg({UTIL}{{{sel}, pod!=""}})')], 16, 0, 8, 5, unit="percent"),
        _panel("timeseries", "Hourly cost per namespace", [_target(f"gpupools:namespace_gpu_cost_usd_per_hour:sum{{{sel}}}", "{{namespace}}")],
               0, 5, 12, 8, unit="currencyUSD"),
        _panel("timeseries", "Utilization per pod", [_target(f"gpupools:pod_gpu_utilization:avg{{{sel}}}", "{{namespace}}/{{pod}}")],
               12, 5, 12, 8, unit="percent"),
        _panel("timeseries", "GPU memory used per pod", [_target(f"gpupools:pod_gpu_memory_used:mib{{{sel}}}", "{{namespace}}/{{pod}}")],
               0, 13, 12, 8, unit="mbytes"),
        _panel("table", "Cost per pod now", [_target(f"sort_desc({POD_COST}{{{sel}}})", instant=True)], 12, 13, 12, 8, unit="currencyUSD"),
    ]
    if vgpu:
        panels += [
            _panel("timeseries", "vGPU memory per namespace (HAMi): used and limit",
                   [_target(f"gpupools:namespace_vgpu_memory_used:bytes{{{sel}}}", "{{namespace}} used"),
                    _target(f"gpupools:namespace_vgpu_memory_limit:bytes{{{sel}}}", "{{namespace}} limit", ref="B")], 0, 21, 12, 8, unit="bytes",
                   description="GPU memory the namespace's vGPU pods use, against the limits HAMi enforces in their containers."),
            _panel("timeseries", "vGPU compute per namespace (HAMi)", [_target(f"gpupools:namespace_vgpu_utilization:avg{{{sel}}}", "{{namespace}}")],
                   12, 21, 12, 8, unit="percent", description="SM utilization HAMi measures inside each vGPU pod, averaged per namespace."),
        ]
    ns_var = _query_var("namespace", "Namespace", f'label_values({UTIL}{{pod!=""}}, namespace)')
    return _dashboard("gpupools-namespaces", "GPU usage and cost per namespace (gpupools)", panels, [ns_var],
                      "Per-namespace GPU usage and hourly cost at list price.")


def queues_dashboard() -> dict:
    """Per team queue: what waits, the quota it holds against its share, and how long admission takes. Quota is in
    the units of each GPU resource (GPUs, MIG slices, vGPUs), so each resource is its own line, never summed."""
    sel = 'cluster_queue=~"$queue"'
    panels = [
        _panel("stat", "Workloads waiting now", [_target(f"sum({KUEUE_PENDING_BY_TEAM}{{{sel}}}) or vector(0)")], 0, 0, 12, 5,
               description="Pending workloads of the selected teams' queues, active and inadmissible."),
        _panel("stat", "Longest p90 admission wait", [_target(f"max({KUEUE_WAIT_P90}{{{sel}}})")], 12, 0, 12, 5, unit="s",
               description=f"The highest 90th percentile among the selected queues, over the last {KUEUE_WAIT_WINDOW}."),
        _panel("timeseries", "Pending workloads per team: active and inadmissible",
               [_target(f"{KUEUE_PENDING_BY_TEAM}{{{sel}}}", "{{cluster_queue}} {{status}}")], 0, 5, 12, 8,
               description="Active: in the queue, tried in turn. Inadmissible: tried and did not fit, waiting until "
                           "quota frees up in the cohort. A queue that stays inadmissible while its team uses no quota "
                           "holds work that cannot fit (alert GpuTeamQueueBlocked)."),
        _panel("timeseries", "GPU quota per team: used, nominal and borrowed",
               [_target(f"{KUEUE_QUOTA_USED}{{{sel}}}", "{{cluster_queue}} {{resource}} used"),
                _target(f"{KUEUE_QUOTA_NOMINAL}{{{sel}}}", "{{cluster_queue}} {{resource}} nominal", ref="B"),
                _target(f"{KUEUE_QUOTA_BORROWED}{{{sel}}}", "{{cluster_queue}} {{resource}} borrowed", ref="C")], 12, 5, 12, 8,
               description="Quota held by admitted workloads against the team's nominal quota, in units of each GPU "
                           "resource; borrowed is what it holds above nominal on a pool, lent by other teams."),
        _panel("timeseries", "GPUs asked for by waiting work", [_target(f"{KUEUE_QUOTA_PENDING}{{{sel}}}", "{{cluster_queue}} {{resource}}")],
               0, 13, 12, 8, description="The GPU resources pending workloads request, before Kueue picks a pool for them."),
        _panel("timeseries", f"Admission wait, p90 over {KUEUE_WAIT_WINDOW}", [_target(f"{KUEUE_WAIT_P90}{{{sel}}}", "{{cluster_queue}}")],
               12, 13, 12, 8, unit="s",
               description="From creation (or requeue after eviction) to admission, for workloads admitted in the window; "
                           "empty where none were."),
    ]
    queue_var = _query_var("queue", "Team queue", f"label_values({KUEUE_TEAM_QUEUE}, cluster_queue)")
    return _dashboard("gpupools-queues", "GPU queues (gpupools)", panels, [queue_var],
                      "Kueue queues per team: pending workloads, GPU quota used against nominal and borrowed, admission wait.")


def kai_queues_dashboard() -> dict:
    """Per team queue on KAI Scheduler: the GPUs it holds against its quota (above it: borrowed, reclaimable), its pods
    waiting, and its pods reclaimed."""
    sel = 'queue_name=~"$queue"'
    panels = [
        _panel("stat", "GPUs held beyond quota", [_target(f"sum(clamp_min({KAI_ALLOCATED_BY_TEAM}{{{sel}}} - {KAI_QUOTA_BY_TEAM}{{{sel}}}, 0)) "
                                                          "or vector(0)")], 0, 0, 8, 5,
               description="GPUs the selected queues run on beyond their quota, lent by queues that leave theirs idle; "
                           "reclaimable while the work is preemptible."),
        _panel("stat", "Pods waiting now", [_target(f"sum({KAI_WAITING_BY_TEAM}{{{sel}}}) or vector(0)")], 8, 0, 8, 5,
               description="Pods of the selected teams that KAI could not place yet."),
        _panel("stat", f"Pods reclaimed, last {KAI_RECLAIM_WINDOW}", [_target(f"sum({KAI_RECLAIMED_BY_TEAM}{{{sel}}}) or vector(0)")], 16, 0, 8, 5),
        _panel("timeseries", "GPUs per team: held and guaranteed",
               [_target(f"{KAI_ALLOCATED_BY_TEAM}{{{sel}}}", "{{queue_name}} held"),
                _target(f"{KAI_QUOTA_BY_TEAM}{{{sel}}}", "{{queue_name}} quota", ref="B")], 0, 5, 12, 8,
               description="Held below quota while pods wait: the queue is starved (alert GpuTeamQueueStarved)."),
        _panel("timeseries", "Waiting and reclaimed pods per team",
               [_target(f"{KAI_WAITING_BY_TEAM}{{{sel}}}", "{{queue_name}} waiting"),
                _target(f"{KAI_RECLAIMED_BY_TEAM}{{{sel}}}", "{{queue_name}} reclaimed", ref="B")], 12, 5, 12, 8),
    ]
    queue_var = _query_var("queue", "Team queue", f"label_values({KAI_TEAM_QUEUE}, queue_name)")
    return _dashboard("gpupools-kai-queues", "KAI queues (gpupools)", panels, [queue_var],
                      "KAI Scheduler queues per team: GPUs held against quota, waiting pods, reclaimed pods.")


def dashboards(idle: Idle, vgpu: bool = False, queues: bool = False, kai_queues: bool = False) -> dict[str, dict]:
    """File name -> Grafana dashboard JSON model; `vgpu`: the stack has vgpu pools, whose HAMi metrics get panels;
    `queues`: teams queue on Kueue, whose queues get a dashboard; `kai_queues`: the same on KAI Scheduler."""
    boards = {"gpupools-fleet.json": fleet_dashboard(idle), "gpupools-namespaces.json": namespace_dashboard(vgpu)}
    if queues:
        boards["gpupools-queues.json"] = queues_dashboard()
    if kai_queues:
        boards["gpupools-kai-queues.json"] = kai_queues_dashboard()
    return boards


def health_panels(y: int) -> list[dict]:
    """GPU node health: nodes the health agents call unhealthy, nodes still behind the readiness gate, and the GPU
    health alerts firing (those the platform team receives)."""
    return [
        _panel("stat", "GPU nodes unhealthy", [_target(f'sum({UNHEALTHY_NODES}{{pool=~"$pool"}}) or vector(0)')], 0, y, 6, 5,
               description="GPU nodes with a failed health-agent condition: AcceleratedHardwareReady or another EKS node monitoring "
                           "agent condition False, or a GPU fault of AKS's node problem detector."),
        _panel("stat", "GPU nodes waiting for their GPU stack", [_target(f'sum({UNREADY_NODES}{{pool=~"$pool"}}) or vector(0)')], 6, y, 6, 5,
               description="New GPU nodes still carrying the readiness taint: the GPU Operator has not validated them yet."),
        _panel("timeseries", "GPU health alerts firing", [_target(f'sum by (alertname) ({ALERTS_FIRING}{{pool=~"$pool"}})', "{{alertname}}")],
               12, y, 12, 5),
        _panel("table", "GPU health alerts firing now, per pool", [_target(f"{ALERTS_FIRING}", instant=True)], 0, y + 5, 24, 6,
               description="XID and row-remap faults (DCGM), health-agent conditions and never-ready nodes; they go to the platform team."),
    ]
