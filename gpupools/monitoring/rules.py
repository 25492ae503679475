"""GPU use and health judged inside Prometheus: recording rules that put utilization, share and cost on every GPU
holder, and the alerts an on-call keeps. The same groups become the PrometheusRule object and the plain rules file, so
a Prometheus gpupools does not install judges exactly like the one it does.
"""

from __future__ import annotations

import yaml

from gpupools.monitoring.alerting import PLATFORM_ALERTS, QUEUE_BLOCKED_ALERT, QUEUE_STARVED_ALERT, QUEUE_WAITING_ALERT, WORK_RECLAIMED_ALERT
from gpupools.capacity.sources import reserved_nodes
from gpupools.pools.planning import plan_pools
from gpupools.monitoring.promql import RESERVED_NODE_PRICE, RESERVED_NODES, reserved_unused
from gpupools.health.signals import node_health_group
from gpupools.core.catalog import Catalog, load_catalog
from gpupools.stack.config import Idle, StackConfig
from gpupools.queues.kueue import queue_namespaces
from gpupools.queues import kai
from gpupools.monitoring.prices import Price, gpu_list_prices
from gpupools.monitoring.promql import (
    GPU_BY,
    KAI_ALLOCATED_BY_TEAM,
    KAI_EVICTED,
    KAI_QUEUE_ALLOCATED,
    KAI_QUEUE_QUOTA,
    KAI_QUOTA_BY_TEAM,
    KAI_RECLAIM_ACTION,
    KAI_RECLAIM_WINDOW,
    KAI_RECLAIMED_BY_TEAM,
    KAI_TEAM_QUEUE,
    KAI_WAITING_BY_TEAM,
    KSM_UNSCHEDULABLE,
    kai_to_team,
    HAMI_MEMORY_LIMIT,
    HAMI_MEMORY_USED,
    HAMI_UTILIZATION,
    IDLE_BELOW,
    IDLE_STEP,
    IDLE_STEPS_RAN,
    KSM_GPU_LABEL,
    KSM_NODE_LABELS_ALLOWLIST,
    KSM_POOL_LABEL,
    KUEUE_ADMISSION_WAIT,
    KUEUE_LEADER,
    KUEUE_NOMINAL,
    KUEUE_PENDING,
    KUEUE_PENDING_BY_TEAM,
    KUEUE_QUOTA_BORROWED,
    KUEUE_QUOTA_NOMINAL,
    KUEUE_QUOTA_PENDING,
    KUEUE_QUOTA_USED,
    KUEUE_RESOURCE_PENDING,
    KUEUE_TEAM_QUEUE,
    KUEUE_USAGE,
    KUEUE_WAIT_P90,
    KUEUE_WAIT_WINDOW,
    MEM,
    MEM_RATIO,
    MEMORY_FREE,
    MEMORY_USED,
    MIG_INSTANCES,
    NODE_GPU,
    POD_COST,
    PODS_PER_GPU,
    PRICE,
    SHARE,
    STEP_SECONDS,
    STEP_UTIL,
    UTIL,
    UTILIZATION,
    VGPU_SHARES,
    duration,
    idle_step_share,
    kueue,
    kueue_admitted,
    percent,
    step_utilization,
    threshold,
    to_team,
    with_pool,
)

# Alert thresholds that are not stack config: datacenter GPUs start to slow down near 85-90 °C.
TEMPERATURE_CELSIUS = 85
MEMORY_FULL_RATIO = 0.95
NO_METRICS_FOR = "15m"  # a new node's exporter needs a few minutes before its first scrape
# dcgm-exporter's XID gauge holds the last XID until another one comes; an XID is new while the gauge changed within this.
XID_NEW_FOR = "10m"
# XIDs that NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors) attributes to the application (a bad memory access,
# a killed or hung context), whose immediate action is restarting the application, not the GPU: a warning for the
# pod's owner. Every other XID, and any XID not listed, is treated as hardware or driver trouble: critical.
APPLICATION_XIDS = (13, 31, 43, 45)
# A gap in the metrics shorter than this (an exporter restart, a missed scrape) does not restart the idle alert's timer.
IDLE_GAP = "15m"
# A team's queue that admits nothing: with none of its quota in use, work that fits is admitted within seconds (taking
# back lent quota by preemption takes minutes), so half an hour means it cannot fit; with its quota busy, waiting is the
# queue doing its job, worth telling the team only once nothing has moved for an hour.
QUEUE_BLOCKED_FOR = "30m"
QUEUE_WAITING_FOR = "1h"


def price_rules(prices: dict[str, Price], catalog: Catalog | None = None) -> list[dict]:
    """One constant series per NVML model name (and per MIG profile of it), so PromQL can join on modelName.

    A MIG instance costs its share of the GPU: the price divided by how many instances of its profile fit on one
    GPU (the homogeneous layouts gpupools configures).
    """
    catalog = catalog or load_catalog()
    rules = []
    for name in sorted(prices):
        model = catalog.gpus[name]
        usd = prices[name].usd_per_hour
        for device in model.device_names:
            rules.append({"record": PRICE, "expr": f"vector({usd:g})", "labels": {"gpupools_gpu": name, "modelName": device}})
            for profile, count in sorted(model.mig_profiles.items()):
                rules.append({"record": PRICE, "expr": f"vector({usd / count:.6g})",
                              "labels": {"gpupools_gpu": name, "modelName": device, "GPU_I_PROFILE": profile}})
    return rules


def mig_rules(catalog: Catalog | None = None) -> list[dict]:
    """One constant series per NVML model name and MIG profile: how many instances of that profile fit on one GPU."""
    catalog = catalog or load_catalog()
    return [{"record": MIG_INSTANCES, "expr": f"vector({count})", "labels": {"modelName": device, "GPU_I_PROFILE": profile}}
            for name in sorted(catalog.gpus) for device in catalog.gpus[name].device_names
            for profile, count in sorted(catalog.gpus[name].mig_profiles.items())]


def share_rules(shares: dict[str, int]) -> list[dict]:
    """One constant series per vgpu pool: its vGPUs per GPU, from the stack."""
    return [{"record": VGPU_SHARES, "expr": f"vector({count})", "labels": {"pool": pool}} for pool, count in sorted(shares.items())]


def hami_rules() -> list[dict]:
    """vGPU use per namespace and pod as HAMi measures it inside each container (memory against its limit, SM use)."""
    return [
        {"record": "gpupools:namespace_vgpu_memory_used:bytes", "expr": f"sum by (namespace) ({HAMI_MEMORY_USED})"},
        {"record": "gpupools:namespace_vgpu_memory_limit:bytes", "expr": f"sum by (namespace) ({HAMI_MEMORY_LIMIT})"},
        {"record": "gpupools:namespace_vgpu_utilization:avg", "expr": f"avg by (namespace) ({HAMI_UTILIZATION})"},
        {"record": "gpupools:pod_vgpu_memory_used:ratio",
         "expr": f"sum by (namespace, pod) ({HAMI_MEMORY_USED}) / sum by (namespace, pod) ({HAMI_MEMORY_LIMIT} > 0)"},
    ]


def share_expr() -> str:
    """Each holder's fraction of its physical GPU: a vGPU pod 1/(vGPUs per GPU) on a vgpu pool, otherwise split among
    the holders of the device (time-slicing, MPS), and a MIG instance further divided by its profile's instances per GPU
    (a profile the catalog lacks counts as a whole GPU)."""
    device = "Hostname, UUID, GPU_I_ID"
    held = (f'(({UTIL}{{pod!=""}} * 0 + 1) / on (pool) group_left () {VGPU_SHARES}) or '
            f"(({UTIL} * 0 + 1) / on ({device}) group_left () count by ({device}) ({UTIL}))")
    return (f"(({held}) / on (modelName, GPU_I_PROFILE) group_left () {MIG_INSTANCES}) or "
            f"(({held}) unless on (modelName, GPU_I_PROFILE) {MIG_INSTANCES})")


def recording_rules() -> list[dict]:
    def avg(by: str) -> str:
        """Utilization weighted by the share of the GPU each holder holds: a slice counts as the part of a GPU it is."""
        return f"sum by ({by}) ({UTIL} * {SHARE}) / sum by ({by}) ({SHARE})"

    def mem(by: str) -> str:
        return f"sum by ({by}) ({MEM})"

    device = "Hostname, UUID, GPU_I_ID"
    return [
        {"record": UTIL, "expr": with_pool(UTILIZATION)},
        {"record": SHARE, "expr": share_expr()},
        {"record": MEM, "expr": with_pool(MEMORY_USED)},
        {"record": MEM_RATIO, "expr": with_pool(f"{MEMORY_USED} / ({MEMORY_USED} + {MEMORY_FREE})")},
        {"record": "gpupools:pool_gpu_utilization:avg", "expr": avg("pool")},
        {"record": "gpupools:namespace_gpu_utilization:avg", "expr": avg("pool, namespace")},
        {"record": "gpupools:pod_gpu_utilization:avg", "expr": avg("pool, namespace, pod")},
        {"record": "gpupools:pool_gpu_memory_used:mib", "expr": mem("pool")},
        {"record": "gpupools:namespace_gpu_memory_used:mib", "expr": mem("pool, namespace")},
        {"record": "gpupools:pod_gpu_memory_used:mib", "expr": mem("pool, namespace, pod")},
        # Physical GPUs per pool and model, counted once however they are shared or partitioned.
        {"record": "gpupools:pool_gpus:count", "expr": f"count by (pool, modelName) (count by (pool, modelName, Hostname, UUID) ({UTIL}))"},
        # Physical GPUs held by pods, per namespace: slices and shared GPUs as their fraction.
        {"record": "gpupools:namespace_gpus_held:sum", "expr": f'sum by (pool, namespace) ({SHARE}{{pod!=""}})'},
        # GPUs (or MIG instances) held by pods, per namespace.
        {"record": "gpupools:namespace_gpus_allocated:count",
         "expr": f'count by (pool, namespace) (count by (pool, namespace, {device}) ({UTIL}{{pod!=""}}))'},
        # Sharing: how many pods hold each GPU or MIG instance right now (time-slicing and MPS give several).
        {"record": PODS_PER_GPU, "expr": f'count by (pool, {device}) ({UTIL}{{pod!=""}})'},
        # Each pod pays its share of the device it holds, at list price: on vgpu pools 1/vGPUs-per-GPU, elsewhere split
        # among the pods holding the device now.
        {"record": POD_COST,
         "expr": (f'sum by (pool, namespace, pod, gpupools_gpu) ((({UTIL}{{pod!=""}} * 0 + 1) / on ({device}) group_left () '
                  f'(({PODS_PER_GPU} unless on (pool) {VGPU_SHARES}) or ({PODS_PER_GPU} * 0 + on (pool) group_left {VGPU_SHARES})))'
                  f' * on (modelName, GPU_I_PROFILE) group_left (gpupools_gpu) {PRICE})')},
        {"record": "gpupools:namespace_gpu_cost_usd_per_hour:sum", "expr": f"sum by (namespace) ({POD_COST})"},
    ]


def xid_alerts(gpu_where: str) -> list[dict]:
    """XID alerts that fire while an XID is new (the gauge changed within `XID_NEW_FOR`), once per physical GPU, as
    `critical` for hardware and driver XIDs and `warning` for those the application causes."""
    xid = f"max by ({GPU_BY}) (DCGM_FI_DEV_XID_ERRORS)"
    new = f"max by ({GPU_BY}) (changes(DCGM_FI_DEV_XID_ERRORS[{XID_NEW_FOR}])) > 0"
    application = " or ".join(f"{xid} == {code}" for code in APPLICATION_XIDS)
    codes = ", ".join(str(code) for code in APPLICATION_XIDS)
    return [
        {"alert": "GpuXidError",
         "expr": with_pool(f"(({xid} > 0) unless ({application})) and ({new})"),
         "labels": {"severity": "critical"},
         "annotations": {
             "summary": "A GPU reported a hardware or driver XID error",
             "description": gpu_where + " reported XID {{ $value }}; see NVIDIA's Xid catalog: the GPU may need a reset "
                                        "or the node a drain."}},
        {"alert": "GpuXidApplicationError",
         "expr": with_pool(f"({application}) and ({new})"),
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": f"A GPU reported an XID caused by an application ({codes})",
             "description": gpu_where + " reported XID {{ $value }}, which NVIDIA's Xid catalog attributes to the "
                                        "application (an illegal memory access or a killed context): restart or fix the workload."}},
    ]


def alert_rules(idle: Idle) -> list[dict]:
    below, hours = percent(idle.utilization_below_percent), duration(idle.for_hours)
    gpu_where = "GPU {{ $labels.gpu }} ({{ $labels.modelName }}) on node {{ $labels.Hostname }}"
    return [
        {"alert": "GpuAllocatedButIdle",
         # The highest value over IDLE_GAP: a gap shorter than that (an exporter restart) keeps the series, and the timer.
         "expr": f'max_over_time({UTIL}{{pod!=""}}[{IDLE_GAP}]) < {below}',
         "for": hours,
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": f"A GPU held by a pod has been below {below}% utilization for {hours}",
             "description": ("Pod {{ $labels.namespace }}/{{ $labels.pod }} holds " + gpu_where
                             + f" (pool {{{{ $labels.pool }}}}) and used it at {{{{ $value | printf \"%.1f\" }}}}%; "
                             "free it for others, or run `gpupools idle` to see the cost.")}},
        *xid_alerts(gpu_where),
        {"alert": "GpuTemperatureHigh",
         "expr": with_pool(f"max by ({GPU_BY}) (DCGM_FI_DEV_GPU_TEMP) > {TEMPERATURE_CELSIUS}"),
         "for": "10m",
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": f"A GPU has been above {TEMPERATURE_CELSIUS} °C for 10 minutes",
             "description": gpu_where + " is at {{ $value }} °C and will throttle."}},
        {"alert": "GpuMemoryNearlyFull",
         # Per GPU or MIG instance (each has its own memory), not per pod time-slicing the same memory.
         "expr": f"max by (pool, {GPU_BY}, GPU_I_ID, GPU_I_PROFILE) ({MEM_RATIO}) > {MEMORY_FULL_RATIO:g}",
         "for": "15m",
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": f"GPU memory has been more than {MEMORY_FULL_RATIO:.0%} used for 15 minutes",
             "description": gpu_where + " uses {{ $value | humanizePercentage }} of its memory; "
                            "the next allocation may fail with out-of-memory."}},
        {"alert": "GpuRowRemapFailure",
         "expr": with_pool(f"max by ({GPU_BY}) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0"),
         "labels": {"severity": "critical"},
         "annotations": {
             "summary": "A GPU failed to remap a memory row",
             "description": gpu_where + " has memory rows it could not remap: its memory is no longer reliable; drain the node "
                                        "and replace the GPU."}},
        {"alert": "GpuRowRemapPending",
         "expr": with_pool(f"max by ({GPU_BY}) (increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[1h])) > 0"),
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": "A GPU remapped a memory row after an uncorrectable error; the remap waits for a GPU reset",
             "description": gpu_where + " remapped rows for uncorrectable memory errors in the last hour. The remap takes "
                                        "effect at the next GPU reset: drain the node and reset the GPU (or reboot)."}},
        {"alert": "GpuNodeWithoutDcgmMetrics",
         "expr": (f"group by (Hostname, {KSM_POOL_LABEL}, {KSM_GPU_LABEL}) ({NODE_GPU}) "
                  "unless on (Hostname) group by (Hostname) (DCGM_FI_DEV_GPU_TEMP)"),
         "for": NO_METRICS_FOR,
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": "A gpupools GPU node sends no DCGM metrics",
             "description": ("Node {{ $labels.Hostname }} (pool {{ $labels." + KSM_POOL_LABEL + " }}) has had no DCGM metrics for "
                             f"{NO_METRICS_FOR}: its dcgm-exporter is not running, not scraped, or cannot see the GPUs. "
                             "Its GPUs are invisible to utilization, cost and health alerts.")}},
    ]


def kueue_rules(queues: dict[str, str]) -> list[dict]:
    """Per team queue, with the team's namespace: pending workloads, GPU quota held by admitted work against the
    nominal quota and above it (borrowed, per flavor), GPUs that waiting work asks for, and the 90th percentile of
    the wait for admission."""
    used, nominal = kueue(KUEUE_USAGE, "cluster_queue, flavor, resource"), kueue(KUEUE_NOMINAL, "cluster_queue, flavor, resource")
    wait = f"sum by (cluster_queue, le) (rate({KUEUE_ADMISSION_WAIT}_bucket{{{KUEUE_LEADER}}}[{KUEUE_WAIT_WINDOW}]))"
    return [
        *({"record": KUEUE_TEAM_QUEUE, "expr": "vector(1)", "labels": {"cluster_queue": queue, "namespace": namespace}}
          for queue, namespace in sorted(queues.items())),
        {"record": KUEUE_PENDING_BY_TEAM, "expr": to_team(kueue(KUEUE_PENDING, "cluster_queue, status"))},
        {"record": KUEUE_QUOTA_USED, "expr": to_team(f"sum by (cluster_queue, resource) ({used})")},
        {"record": KUEUE_QUOTA_NOMINAL, "expr": to_team(f"sum by (cluster_queue, resource) ({nominal})")},
        # Borrowing is per flavor: quota unused on one pool does not offset borrowing on another.
        {"record": KUEUE_QUOTA_BORROWED, "expr": to_team(f"sum by (cluster_queue, resource) (clamp_min({used} - {nominal}, 0))")},
        {"record": KUEUE_QUOTA_PENDING, "expr": to_team(kueue(KUEUE_RESOURCE_PENDING, "cluster_queue, resource"))},
        {"record": KUEUE_WAIT_P90, "expr": to_team(f"histogram_quantile(0.9, {wait})")},
    ]


def queue_alerts() -> list[dict]:
    """Alerts for a team's own queue, carrying its `namespace` so its owners are told. With BestEffortFIFO a workload
    that did not fit is counted `inadmissible` until something in the cohort changes, whether it waits for quota in
    use or can never fit, so the status cannot tell the two apart; the team's quota in use can."""
    waiting = f"sum by (cluster_queue, namespace) ({KUEUE_PENDING_BY_TEAM}) > 0"
    in_use = f"sum by (cluster_queue) ({KUEUE_QUOTA_USED}) > 0"
    queue = "ClusterQueue {{ $labels.cluster_queue }} (namespace {{ $labels.namespace }})"
    look = "`kubectl -n {{ $labels.namespace }} get workloads` shows each one's reason."
    def alert(name: str, expr: str, wait: str, summary: str, why: str) -> dict:
        return {"alert": name, "expr": expr, "for": wait, "labels": {"severity": "warning"},
                "annotations": {"summary": summary, "description": f"{queue} has {{{{ $value }}}} workload(s) waiting {why} {look}"}}

    return [
        alert(QUEUE_BLOCKED_ALERT,
              f"({waiting}) unless on (cluster_queue) ({in_use}) unless on (cluster_queue) ({kueue_admitted(QUEUE_BLOCKED_FOR)})",
              QUEUE_BLOCKED_FOR, f"A team's GPU workloads have waited {QUEUE_BLOCKED_FOR} while the team uses none of its quota",
              f"and has admitted none for {QUEUE_BLOCKED_FOR} while it runs nothing on its quota: they cannot fit. They ask for "
              "more GPUs than the team's quota and what it may borrow, for a GPU resource or pool the team has no quota on, "
              "or the ClusterQueue is inactive."),
        alert(QUEUE_WAITING_ALERT,
              f"({waiting}) and on (cluster_queue) ({in_use}) unless on (cluster_queue) ({kueue_admitted(QUEUE_WAITING_FOR)})",
              QUEUE_WAITING_FOR, f"A team's GPU workloads have waited {QUEUE_WAITING_FOR} behind its running work",
              f"and has admitted none for {QUEUE_WAITING_FOR}: the team's quota is held by running work and the cohort has "
              "none to lend. They start when running work ends; stop idle work, or ask for more quota."),
    ]


QUEUE_STARVED_FOR = "30m"


def kai_rules(queues: dict[str, str]) -> list[dict]:
    """Per team queue on KAI Scheduler, with the team's namespace: its GPU quota, the GPUs its workloads hold, its pods
    waiting unschedulable, and its pods KAI reclaimed over the last window."""
    def one(metric: str) -> str:
        return f"max by (queue_name) ({metric})"

    reclaimed = (f'label_replace(sum by (exported_namespace) (increase({KAI_EVICTED}{{action="{KAI_RECLAIM_ACTION}"}}[{KAI_RECLAIM_WINDOW}])), '
                 f'"namespace", "$1", "exported_namespace", "(.+)")')
    return [
        *({"record": KAI_TEAM_QUEUE, "expr": "vector(1)", "labels": {"queue_name": queue, "namespace": namespace}}
          for queue, namespace in sorted(queues.items())),
        {"record": KAI_QUOTA_BY_TEAM, "expr": kai_to_team(one(KAI_QUEUE_QUOTA))},
        {"record": KAI_ALLOCATED_BY_TEAM, "expr": kai_to_team(one(KAI_QUEUE_ALLOCATED))},
        {"record": KAI_WAITING_BY_TEAM, "expr": (f"sum by (namespace) ({KSM_UNSCHEDULABLE}) * on (namespace) group_left (queue_name) "
                                                 f"{KAI_TEAM_QUEUE}")},
        {"record": KAI_RECLAIMED_BY_TEAM, "expr": f"sum without (exported_namespace) ({reclaimed}) * on (namespace) group_left (queue_name) {KAI_TEAM_QUEUE}"},
    ]


def kai_alerts() -> list[dict]:
    """A team queue below its quota while its pods wait (what KAI promises it is not reaching it), and a team's pods
    reclaimed (it ran beyond its quota on GPUs their owners now need); both carry the team's namespace."""
    queue = "Queue {{ $labels.queue_name }} (namespace {{ $labels.namespace }})"
    return [
        {"alert": QUEUE_STARVED_ALERT,
         "expr": f"({KAI_ALLOCATED_BY_TEAM} < on (queue_name, namespace) {KAI_QUOTA_BY_TEAM}) and on (queue_name, namespace) ({KAI_WAITING_BY_TEAM} > 0)",
         "for": QUEUE_STARVED_FOR, "labels": {"severity": "warning"},
         "annotations": {"summary": f"A team's pods have waited {QUEUE_STARVED_FOR} while its queue holds less than its GPU quota",
                         "description": f"{queue} holds {{{{ $value }}}} GPUs, below its quota, while its pods wait unschedulable: the "
                                        "GPUs it is guaranteed are held by other queues' non-preemptible work, its pods ask for a pool "
                                        "or GPU shape that cannot start, or nodes do not come. `kubectl -n {{ $labels.namespace }} get "
                                        "events` shows KAI's reason for each pod."}},
        {"alert": WORK_RECLAIMED_ALERT,
         "expr": f"{KAI_RECLAIMED_BY_TEAM} > 0",
         "labels": {"severity": "info"},
         "annotations": {"summary": "KAI Scheduler reclaimed a team's GPUs for their owners",
                         "description": f"KAI evicted {{{{ $value }}}} pod(s) of {queue} in the last {KAI_RECLAIM_WINDOW} to give GPUs back to "
                                        "queues below their quota: the team ran beyond its own quota on GPUs others had left idle. Work "
                                        "within the team's quota, or of a non-preemptible priority class, is never reclaimed."}},
    ]


def idle_step_rules(idle: Idle) -> dict:
    """The group `gpupools idle` reads when it is installed: its interval is the step, so each evaluation's
    `max_over_time(...[step])` sees exactly the samples since the previous one."""
    below = idle.utilization_below_percent
    return {"name": "gpupools-gpu-idle-steps", "interval": f"{STEP_SECONDS}s", "rules": [
        {"record": STEP_UTIL, "expr": step_utilization(), "labels": {IDLE_BELOW: threshold(below)}},
        {"record": IDLE_STEP, "expr": idle_step_share(below)},
        {"record": IDLE_STEPS_RAN, "expr": "vector(1)", "labels": {IDLE_BELOW: threshold(below)}},
    ]}


def rule_groups(idle: Idle, prices: dict[str, Price], shares: dict[str, int] | None = None,
                queues: dict[str, str] | None = None, reserved: dict[str, tuple[int, float]] | None = None,
                kai_queues: dict[str, str] | None = None) -> list[dict]:
    """`shares`: vGPUs per GPU of each vgpu pool; the HAMi rules come with them. `queues`: each team's Kueue
    ClusterQueue and namespace; the queue rules and alerts come with them. `reserved`: nodes each pool's reservations
    hold and one node's price; the unused-reservation alert comes with them."""
    groups = [
        {"name": "gpupools-gpu-prices", "rules": price_rules(prices) + mig_rules() + share_rules(shares or {})},
        {"name": "gpupools-gpu-recording", "rules": recording_rules()},
        {"name": "gpupools-gpu-alerts", "rules": alert_rules(idle)},
        idle_step_rules(idle),
    ]
    groups.append(node_health_group(KSM_POOL_LABEL, PLATFORM_ALERTS))
    if shares:
        groups.append({"name": "gpupools-vgpu-recording", "rules": hami_rules()})
    if queues:
        groups.append({"name": "gpupools-kueue", "rules": kueue_rules(queues) + queue_alerts()})
    if kai_queues:
        groups.append({"name": "gpupools-kai", "rules": kai_rules(kai_queues) + kai_alerts()})
    if reserved:
        groups.append({"name": "gpupools-reservations", "rules": reservation_rules(reserved)})
    return groups


def vgpu_shares(stack: StackConfig) -> dict[str, int]:
    return {pool.name: stack.sharing_of(pool).replicas for pool in stack.pools if stack.sharing_of(pool).mode == "vgpu"}


def rules_for(stack: StackConfig) -> list[dict]:
    return rule_groups(stack.monitoring.idle, gpu_list_prices(stack.cloud), vgpu_shares(stack), queue_namespaces(stack),
                       reserved_nodes_by_pool(stack), kai.queue_namespaces(stack))


def rules_file_text(groups: list[dict]) -> str:
    """A plain Prometheus rules file (`rule_files:`), for a Prometheus that does not read PrometheusRule objects."""
    header = ("# gpupools GPU recording and alert rules (generated by gpupools; do not edit).\n"
              "# Needs dcgm-exporter metrics and, for the pool label, kube-state-metrics with\n"
              f"#   --metric-labels-allowlist={KSM_NODE_LABELS_ALLOWLIST}\n")
    return header + yaml.safe_dump({"groups": groups}, sort_keys=False, allow_unicode=True, width=1000)


# Reserved capacity is billed whether nodes run in it or not; this long without them is money spent on nothing.
RESERVATION_UNUSED_FOR = "3h"
RESERVATION_UNUSED_ALERT = "GpuReservationUnused"


def reserved_nodes_by_pool(stack: StackConfig) -> dict[str, tuple[int, float | None]]:
    """Pool -> (nodes its reservations hold, on-demand list price of one node): reservations are billed whether used or
    not, priced at the list price unless bought cheaper."""
    return {plan.name: (reserved_nodes(plan.pool), plan.hardware.price_per_node) for plan in plan_pools(stack) if reserved_nodes(plan.pool)}


def reservation_rules(reserved: dict[str, tuple[int, float | None]]) -> list[dict]:
    """Per pool with reservations: the nodes they hold and one node's price (from the stack), and an alert while fewer
    of the pool's nodes run than are reserved."""
    return [
        *({"record": RESERVED_NODES, "expr": f"vector({count})", "labels": {"pool": pool}} for pool, (count, _) in sorted(reserved.items())),
        # An unpriced type (an UltraServer's Capacity Block, A4X) has no list price to record.
        *({"record": RESERVED_NODE_PRICE, "expr": f"vector({price:g})", "labels": {"pool": pool}} for pool, (_, price) in sorted(reserved.items())
          if price is not None),
        {"alert": RESERVATION_UNUSED_ALERT, "expr": f"{reserved_unused()} > 0", "for": RESERVATION_UNUSED_FOR, "labels": {"severity": "warning"},
         "annotations": {"summary": f"Reserved GPU capacity has been unused for {RESERVATION_UNUSED_FOR}",
                         "description": ("Pool {{ $labels.pool }} runs {{ $value }} node(s) fewer than its reservations hold, for "
                                         f"{RESERVATION_UNUSED_FOR}. Reserved capacity is billed whether used or not: send work "
                                         "to the pool, lower the reservation, or lend the pool's quota.")}},
    ]
