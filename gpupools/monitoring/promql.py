"""PromQL shared by the recording rules, the dashboards and the idle report, so all of them see the same GPUs,
holders and pools. Names and expression strings only: nothing here knows which rule or panel uses them.
"""

from __future__ import annotations

from gpupools.core.pools import GPU_LABEL, POOL_LABEL

# Every DCGM metric gpupools queries is in dcgm-exporter's default-counters.csv, so nothing depends on a custom
# counter list. Series are expected with the labels dcgm-exporter itself emits (Hostname, gpu, UUID, modelName, and
# for GPUs held by a pod: namespace, pod, container); the monitoring plan's scrape relabeling keeps them that way.

# kube-state-metrics exposes node labels only when allowed; `gpupools.io/pool` becomes `label_gpupools_io_pool`.
KSM_NODE_LABELS_ALLOWLIST = f"nodes=[{POOL_LABEL},{GPU_LABEL}]"
KSM_POOL_LABEL = "label_" + POOL_LABEL.replace(".", "_").replace("/", "_").replace("-", "_")
KSM_GPU_LABEL = "label_" + GPU_LABEL.replace(".", "_").replace("/", "_").replace("-", "_")

# Labels that identify who holds which GPU (or MIG instance) on which node; everything else is dropped.
HOLDER_LABELS = ("Hostname", "gpu", "UUID", "modelName", "GPU_I_ID", "GPU_I_PROFILE", "namespace", "pod", "container")
_BY = ", ".join(HOLDER_LABELS)
# Labels of a physical GPU: health alerts fire once per GPU, not once per MIG instance or per pod sharing it.
GPU_LABELS = ("Hostname", "gpu", "UUID", "modelName")
GPU_BY = ", ".join(GPU_LABELS)

# Pool of each node, from kube-state-metrics, keyed by dcgm-exporter's Hostname (= the node name).
def node_pool(window: int | None = None) -> str:
    """Hostname -> pool series; with `window` (seconds), every node labelled at any time in it (the last label wins)."""
    labels = f'kube_node_labels{{{KSM_POOL_LABEL}!=""}}'
    if window is not None:
        labels = f"last_over_time({labels}[{window}s])"
    return (f'max by (Hostname, pool) (label_replace(label_replace({labels}, '
            f'"Hostname", "$1", "node", "(.*)"), "pool", "$1", "{KSM_POOL_LABEL}", "(.*)"))')


NODE_POOL = node_pool()
NODE_GPU = f'label_replace(kube_node_labels{{{KSM_GPU_LABEL}!=""}}, "Hostname", "$1", "node", "(.*)")'


def with_pool(expr: str) -> str:
    """Add a `pool` label where kube-state-metrics knows the node's pool, and keep the series unchanged where not.

    Without the allowlist (an existing Prometheus not yet configured) alerts and the idle report still work; only
    the pool is missing.
    """
    return f"(({expr}) * on (Hostname) group_left (pool) {NODE_POOL}) or (({expr}) unless on (Hostname) {NODE_POOL})"


def utilization(step: int | None = None) -> str:
    """Utilization in percent per holder; with `step` (seconds), the highest raw sample within each step.

    Whole GPUs report DCGM_FI_DEV_GPU_UTIL; MIG instances do not, but report the graphics engine's active ratio.
    `max_over_time(metric[step])` sees every scraped sample, where a subquery `(...)[step:]` would only see the
    instants of its own resolution and step over bursts between them.
    """
    def sample(metric: str) -> str:
        return metric if step is None else f"max_over_time({metric}[{step}s])"

    return f"(max by ({_BY}) ({sample('DCGM_FI_DEV_GPU_UTIL')})) or (max by ({_BY}) ({sample('DCGM_FI_PROF_GR_ENGINE_ACTIVE')}) * 100)"


UTILIZATION = utilization()

# Idle steps, recorded: a group evaluated every STEP_SECONDS records each holder's highest sample since the previous
# evaluation, so every scraped sample is seen once and `gpupools idle` counts idle minutes with plain range functions
# over these series instead of a subquery over raw samples.
STEP_SECONDS = 60
STEP_UTIL = "gpupools:gpu_utilization_step_max:percent"
IDLE_STEP = "gpupools:gpu_idle_step_share:ratio"  # present at idle steps only, valued at the share of the device held
IDLE_BELOW = "gpupools_idle_below"  # the threshold these series were recorded with, so a report uses only its own
# One series per evaluation of the group: whether (and since when) the steps were recorded, asked of one series
# rather than of every GPU's.
IDLE_STEPS_RAN = "gpupools:gpu_idle_steps_recorded:count"
DEVICE = "Hostname, UUID, GPU_I_ID"  # one physical GPU, or one MIG instance of it: what time-slicing pods share


def step_utilization() -> str:
    """Each holder's highest sample of the last step, or its latest sample when the step had none (a GPU scraped less
    often than the step); the instant selector's lookback stops at a stale marker, so an exporter gone is a gap."""
    def sample(metric: str) -> str:
        return f"max_over_time({metric}[{STEP_SECONDS}s]) or {metric}"

    return f"(max by ({_BY}) ({sample('DCGM_FI_DEV_GPU_UTIL')})) or (max by ({_BY}) ({sample('DCGM_FI_PROF_GR_ENGINE_ACTIVE')}) * 100)"


def threshold(below: float) -> str:
    """How a threshold is written in the IDLE_BELOW label: 5, 2.5."""
    return f"{below:g}"


def idle_step_share(below: float) -> str:
    """Present for a holder at each step it stayed below `below`, valued at the fraction of its device it held then
    (time-slicing and MPS give several holders per device)."""
    recorded = f'{STEP_UTIL}{{{IDLE_BELOW}="{threshold(below)}"}}'
    return f"({recorded} < {below:g}) * 0 + on ({DEVICE}) group_left () (1 / count by ({DEVICE}) ({recorded}))"
MEMORY_USED = f"max by ({_BY}) (DCGM_FI_DEV_FB_USED)"
MEMORY_FREE = f"max by ({_BY}) (DCGM_FI_DEV_FB_FREE)"

# The series the recording rules write, which the dashboards and the idle report read.
UTIL = "gpupools:gpu_utilization:percent"
MEM = "gpupools:gpu_memory_used:mib"
MEM_RATIO = "gpupools:gpu_memory_used:ratio"
PODS_PER_GPU = "gpupools:gpu_pods:count"
PRICE = "gpupools:gpu_price_usd_per_hour"
POD_COST = "gpupools:pod_gpu_cost_usd_per_hour"
# The fraction of its physical GPU each holder holds (a 1g.5gb slice 1/7, one of three time-sliced pods 1/3), so
# counts and averages weigh a slice or a shared GPU as the part of a GPU it is.
SHARE = "gpupools:gpu_share:ratio"
MIG_INSTANCES = "gpupools:mig_instances_per_gpu:count"
# vgpu pools: how many vGPUs HAMi cuts each GPU into. A vGPU pod pays that share of its GPU, whoever else holds it.
VGPU_SHARES = "gpupools:pool_vgpus_per_gpu:count"

# HAMi's own metrics (chart 2.10.0): per container and vGPU from the device plugin's monitor (cmd/vGPUmonitor),
# allocations from the scheduler. Both carry namespace and pod of the workload.
HAMI_MEMORY_USED = "hami_vgpu_memory_used_bytes"
HAMI_MEMORY_LIMIT = "hami_vgpu_memory_limit_bytes"
HAMI_UTILIZATION = "hami_container_device_utilization_ratio"


def duration(hours: float) -> str:
    """Prometheus duration for a (possibly fractional) number of hours, exact to the second."""
    seconds = round(hours * 3600)
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"


def percent(value: float) -> str:
    return f"{value:g}"

# Kueue 0.19.2's own series (pkg/metrics/metrics.go), scraped from its controller. ClusterQueue series name the queue
# in `cluster_queue`; the scrape adds the *controller's* namespace and pod, so a team's namespace comes from the
# stack's own map of queue to namespace (KUEUE_TEAM_QUEUE), never from the series. The quota and usage series exist only
# with `metrics.enableClusterQueueResources`, which gpupools sets.
KUEUE_PENDING = "kueue_pending_workloads"  # gauge, status "active" (in the heap) or "inadmissible" (tried, did not fit)
KUEUE_ADMITTED = "kueue_admitted_workloads_total"  # counter, per priority_class
KUEUE_ADMISSION_WAIT = "kueue_admission_wait_time_seconds"  # histogram: created or requeued until admitted
KUEUE_USAGE = "kueue_cluster_queue_resource_usage"  # per cohort, flavor and resource: what admitted workloads hold
KUEUE_NOMINAL = "kueue_cluster_queue_nominal_quota"
KUEUE_RESOURCE_PENDING = "kueue_cluster_queue_resource_pending"  # per resource, before a flavor is chosen
# Kueue's controllers run on every replica, so with two replicas the follower exports the same gauges again; only
# the leader (or a single replica, "standalone") admits, and only its series are the queue's.
KUEUE_LEADER = 'replica_role!="follower"'

KUEUE_TEAM_QUEUE = "gpupools:kueue_team_queue:info"  # one constant series per team: cluster_queue -> namespace
KUEUE_PENDING_BY_TEAM = "gpupools:kueue_pending_workloads:max"
KUEUE_QUOTA_USED = "gpupools:kueue_quota_used:sum"
KUEUE_QUOTA_NOMINAL = "gpupools:kueue_quota_nominal:sum"
KUEUE_QUOTA_BORROWED = "gpupools:kueue_quota_borrowed:sum"
KUEUE_QUOTA_PENDING = "gpupools:kueue_quota_pending:sum"
KUEUE_WAIT_P90 = "gpupools:kueue_admission_wait_seconds:p90"
KUEUE_WAIT_WINDOW = "30m"  # admissions are sparse; a shorter rate window is mostly empty


def kueue(metric: str, by: str) -> str:
    """One series per `by` from the leader's export, so a second scrape of the same state never counts twice."""
    return f"max by ({by}) ({metric}{{{KUEUE_LEADER}}})"


def to_team(expr: str) -> str:
    """Keep the queues of the stack's teams, with their namespace: what Alertmanager routes a team's alerts on."""
    return f"({expr}) * on (cluster_queue) group_left (namespace) {KUEUE_TEAM_QUEUE}"


def kueue_admitted(window: str) -> str:
    """Queues that admitted a workload within `window`."""
    return f"sum by (cluster_queue) (increase({KUEUE_ADMITTED}{{{KUEUE_LEADER}}}[{window}])) > 0"


# Reservations: the nodes each pool's reservations hold and the list price of one such node, recorded from the
# stack, and how many of them no node of the pool runs in (a pool node counts against the reservation whatever
# capacity it came from).
RESERVED_NODES = "gpupools:pool_reserved_nodes:count"
RESERVED_NODE_PRICE = "gpupools:pool_reserved_node_price:usd_per_hour"


def reserved_unused(pools: str | None = None) -> str:
    """Unused reserved nodes per pool; `pools` (a regex of pool names) restricts the nodes counted to those pools, so
    a question over a long window relabels only their nodes at each step, not the whole fleet's."""
    matcher = f'=~"{pools}"' if pools else '!=""'
    nodes = f'count by (pool) (label_replace(kube_node_labels{{{KSM_POOL_LABEL}{matcher}}}, "pool", "$1", "{KSM_POOL_LABEL}", "(.*)"))'
    # `+ 0` drops the metric name, so both branches carry the same labels (a range over them is one series per pool).
    return f"(({RESERVED_NODES} - on (pool) {nodes}) or ({RESERVED_NODES} + 0))"


# KAI Scheduler v0.17.0's own series. The queue controller exports each Queue's GPU quota (its spec) and the GPUs its
# running workloads hold (its status), under the metrics namespace `kai` (pkg/queuecontroller/metrics/metrics.go lines
# 96-143 and 148-180; constants.go DefaultMetricsNamespace); both its replicas may export them, so one series per queue
# is kept. The scheduler counts the pods it evicts per pod group and action (pkg/scheduler/metrics/metrics.go lines
# 212-217); its own `namespace` label (the pod group's) meets the scrape's and becomes `exported_namespace`.
KAI_QUEUE_QUOTA = "kai_queue_deserved_gpus"
KAI_QUEUE_ALLOCATED = "kai_queue_allocated_gpus"
KAI_EVICTED = "kai_pod_group_evicted_pods_total"
KAI_RECLAIM_ACTION = "reclaim"  # pkg/common/constants/constants.go, ActionReclaim
# kube-state-metrics: a pod the scheduler marked unschedulable (PodScheduled=False, reason Unschedulable).
KSM_UNSCHEDULABLE = "kube_pod_status_unschedulable"

KAI_TEAM_QUEUE = "gpupools:kai_team_queue:info"  # one constant series per team: queue_name -> namespace
KAI_QUOTA_BY_TEAM = "gpupools:kai_queue_quota_gpus:max"
KAI_ALLOCATED_BY_TEAM = "gpupools:kai_queue_allocated_gpus:max"
KAI_WAITING_BY_TEAM = "gpupools:kai_unschedulable_pods:sum"
KAI_RECLAIMED_BY_TEAM = "gpupools:kai_reclaimed_pods:increase15m"
KAI_RECLAIM_WINDOW = "15m"


def kai_to_team(expr: str) -> str:
    """Keep the queues of the stack's teams, with their namespace."""
    return f"({expr}) * on (queue_name) group_left (namespace) {KAI_TEAM_QUEUE}"


# A KAI fraction's GPU is held, as far as the kubelet and dcgm-exporter know, by KAI's reservation pod in
# `kai-resource-reservation`; the fractional pods that use the GPU carry the same `runai-gpu-group` label
# (pkg/common/constants/constants.go GPUGroup; resource_reservation.go lines 533-550 label the reservation pod, the binder
# the fractional ones) and their share in the `gpu-fraction` annotation. kube-state-metrics exports both when allowed to:
KAI_GPU_GROUP_LABEL = "runai-gpu-group"
# The chart's global.resourceReservation.namespace, which gpupools leaves at its default (queues.kai.RESERVATION_NAMESPACE).
KAI_RESERVATION_NAMESPACE = "kai-resource-reservation"
KSM_KAI_POD_LABELS_ALLOWLIST = f"pods=[{KAI_GPU_GROUP_LABEL}]"
KSM_KAI_POD_ANNOTATIONS_ALLOWLIST = "pods=[gpu-fraction]"
KSM_GPU_GROUP = "label_runai_gpu_group"  # kube_pod_labels, the label name as kube-state-metrics spells it
KSM_GPU_FRACTION = "annotation_gpu_fraction"  # kube_pod_annotations
