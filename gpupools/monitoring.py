"""GPU monitoring that finds waste: what gets scraped, the rules that judge it, and the dashboards that show it.

Pure, like `software.py`: the result is plain data. The `GpuMonitoring` component applies it, `gpupools render`
writes the rules and dashboards to disk for people with their own Prometheus and Grafana, the idle report reuses
the same PromQL, and tests run the rules through promtool and compare the values with the pinned charts.

Every DCGM metric used here is in dcgm-exporter's default-counters.csv, so nothing depends on a custom counter
list. Series are expected with the labels dcgm-exporter itself emits (Hostname, gpu, UUID, modelName, and for
GPUs held by a pod: namespace, pod, container); `SCRAPE_RELABELINGS` makes the scrape keep them that way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import yaml

from .alerting import RECEIVERS_SECRET, alertmanager_config, receivers_secret
from .catalog import Catalog, load_catalog
from .config import Idle, StackConfig
from .pools import GPU_LABEL, POOL_LABEL, PoolPlan
from .sharing import resolve_installer
from .software import HAMI_CHART, Chart, Release, gpu_tolerations, hami_served, namespace

NAMESPACE = "gpupools-monitoring"
KUBE_PROMETHEUS_STACK = Chart("kube-prometheus-stack", "kube-prometheus-stack", "https://prometheus-community.github.io/helm-charts",
                              NAMESPACE, "88.5.3")
DCGM_EXPORTER = Chart("dcgm-exporter", "dcgm-exporter", "https://nvidia.github.io/dcgm-exporter/helm-charts", NAMESPACE, "4.8.2")

GRAFANA_ADMIN_SECRET = "gpupools-grafana-admin"
GRAFANA_USER_KEY = "admin-user"
GRAFANA_PASSWORD_KEY = "admin-password"
DASHBOARD_LABEL = ("grafana_dashboard", "1")  # what the Grafana sidecar of kube-prometheus-stack looks for
RULES_NAME = "gpupools-gpu"
RULES_FILE = f"prometheus/{RULES_NAME}.rules.yaml"
ALERTMANAGER_FILE = "alertmanager/gpupools-routes.yaml"
GKE_QUOTA = "dcgm-exporter-quota"

# kube-state-metrics exposes node labels only when allowed; `gpupools.io/pool` becomes `label_gpupools_io_pool`.
KSM_NODE_LABELS_ALLOWLIST = f"nodes=[{POOL_LABEL},{GPU_LABEL}]"
KSM_POOL_LABEL = "label_" + POOL_LABEL.replace(".", "_").replace("/", "_").replace("-", "_")
KSM_GPU_LABEL = "label_" + GPU_LABEL.replace(".", "_").replace("/", "_").replace("-", "_")

# A ServiceMonitor target carries the *exporter's* namespace, pod and container; with honorLabels false the
# workload's labels that dcgm-exporter sets would become exported_namespace/exported_pod. Dropping the target's
# own three labels keeps the exporter's series as emitted: namespace/pod/container present iff a pod holds the GPU.
SCRAPE_RELABELINGS = [{"action": "labeldrop", "regex": "namespace|pod|container"}]

# GKE installs drivers on the host at /home/kubernetes/bin/nvidia and runs no NVIDIA container runtime, so the
# exporter mounts the driver itself and needs device access (GKE's own dcgm-exporter manifest does the same).
GKE_DRIVER_HOST_PATH = "/home/kubernetes/bin/nvidia"
GKE_DRIVER_MOUNT = "/usr/local/nvidia"
# The chart's default extraVolumeMounts; setting the list replaces it, so it is repeated.
DCGM_METRICS_MOUNT = {"name": "exporter-metrics-volume", "mountPath": "/etc/dcgm-exporter/default-counters.csv", "subPath": "default-counters.csv"}
KUBELET_POD_RESOURCES = "/var/lib/kubelet/pod-resources"  # where dcgm-exporter learns which pod holds which GPU

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

# --------------------------------------------------------------------------------------------------------------------
# PromQL

# Labels that identify who holds which GPU (or MIG instance) on which node; everything else is dropped.
HOLDER_LABELS = ("Hostname", "gpu", "UUID", "modelName", "GPU_I_ID", "GPU_I_PROFILE", "namespace", "pod", "container")
_BY = ", ".join(HOLDER_LABELS)
# Labels of a physical GPU: health alerts fire once per GPU, not once per MIG instance or per pod sharing it.
GPU_LABELS = ("Hostname", "gpu", "UUID", "modelName")
_GPU_BY = ", ".join(GPU_LABELS)

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
MEMORY_USED = f"max by ({_BY}) (DCGM_FI_DEV_FB_USED)"
MEMORY_FREE = f"max by ({_BY}) (DCGM_FI_DEV_FB_FREE)"

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
HAMI_SCRAPE = (("hami-device-plugin", "monitorport"), ("hami-scheduler", "monitor"))  # chart component label, Service port name


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


# --------------------------------------------------------------------------------------------------------------------
# List prices in PromQL


@dataclass(frozen=True)
class Price:
    gpu: str  # catalog GPU name
    usd_per_hour: float  # per whole GPU
    source: str  # the instance type (or GCP accelerator) it comes from


def gpu_list_prices(cloud: str | None = None, catalog: Catalog | None = None) -> dict[str, Price]:
    """Per catalog GPU, the lowest per-GPU list price among the instance types that carry it (node price / GPUs).

    The lowest, because waste reported at the cheapest way to rent that GPU is a floor nobody can argue down.
    With a cloud, only that cloud's offers count, unless it sells the GPU only as an attached accelerator (GCP N1),
    whose GPU-only price is then used; without one (the idle report), every cloud's offers count.
    """
    catalog = catalog or load_catalog()
    clouds = [cloud] if cloud else list(catalog.instances)
    prices: dict[str, Price] = {}

    def offer(gpu: str, usd: float, source: str) -> None:
        if gpu not in prices or usd < prices[gpu].usd_per_hour:
            prices[gpu] = Price(gpu, round(usd, 4), source)

    for c in clouds:
        for inst in catalog.instances.get(c, {}).values():
            if inst.gpu is not None and inst.gpus:
                offer(inst.gpu.name, inst.price / inst.gpus, f"{c} {inst.name}")
    if cloud in (None, "gcp"):
        for acc in catalog.gcp_accelerators.values():
            if acc.gpu.name not in prices or cloud is None:
                offer(acc.gpu.name, acc.price_per_gpu, f"gcp {acc.name} (GPU only)")
    if cloud is not None:  # a GPU this cloud does not sell still gets a price if dcgm reports it
        for gpu, price in gpu_list_prices(None, catalog).items():
            prices.setdefault(gpu, price)
    return prices


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


# --------------------------------------------------------------------------------------------------------------------
# Rules


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
    xid = f"max by ({_GPU_BY}) (DCGM_FI_DEV_XID_ERRORS)"
    new = f"max by ({_GPU_BY}) (changes(DCGM_FI_DEV_XID_ERRORS[{XID_NEW_FOR}])) > 0"
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
         "expr": with_pool(f"max by ({_GPU_BY}) (DCGM_FI_DEV_GPU_TEMP) > {TEMPERATURE_CELSIUS}"),
         "for": "10m",
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": f"A GPU has been above {TEMPERATURE_CELSIUS} °C for 10 minutes",
             "description": gpu_where + " is at {{ $value }} °C and will throttle."}},
        {"alert": "GpuMemoryNearlyFull",
         # Per GPU or MIG instance (each has its own memory), not per pod time-slicing the same memory.
         "expr": f"max by (pool, {_GPU_BY}, GPU_I_ID, GPU_I_PROFILE) ({MEM_RATIO}) > {MEMORY_FULL_RATIO:g}",
         "for": "15m",
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": f"GPU memory has been more than {MEMORY_FULL_RATIO:.0%} used for 15 minutes",
             "description": gpu_where + " uses {{ $value | humanizePercentage }} of its memory; "
                            "the next allocation may fail with out-of-memory."}},
        {"alert": "GpuRowRemapFailure",
         "expr": with_pool(f"max by ({_GPU_BY}) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0"),
         "labels": {"severity": "critical"},
         "annotations": {
             "summary": "A GPU failed to remap a memory row",
             "description": gpu_where + " has memory rows it could not remap: its memory is no longer reliable; drain the node "
                                        "and replace the GPU."}},
        {"alert": "GpuRowRemapPending",
         "expr": with_pool(f"max by ({_GPU_BY}) (increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[1h])) > 0"),
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


def rule_groups(idle: Idle, prices: dict[str, Price], shares: dict[str, int] | None = None) -> list[dict]:
    """`shares`: vGPUs per GPU of each vgpu pool; the HAMi rules come with them."""
    groups = [
        {"name": "gpupools-gpu-prices", "rules": price_rules(prices) + mig_rules() + share_rules(shares or {})},
        {"name": "gpupools-gpu-recording", "rules": recording_rules()},
        {"name": "gpupools-gpu-alerts", "rules": alert_rules(idle)},
    ]
    if shares:
        groups.append({"name": "gpupools-vgpu-recording", "rules": hami_rules()})
    return groups


def vgpu_shares(stack: StackConfig) -> dict[str, int]:
    return {pool.name: stack.sharing_of(pool).replicas for pool in stack.pools if stack.sharing_of(pool).mode == "vgpu"}


def rules_for(stack: StackConfig) -> list[dict]:
    return rule_groups(stack.monitoring.idle, gpu_list_prices(stack.cloud), vgpu_shares(stack))


def rules_file_text(groups: list[dict]) -> str:
    """A plain Prometheus rules file (`rule_files:`), for a Prometheus that does not read PrometheusRule objects."""
    header = ("# gpupools GPU recording and alert rules (generated by gpupools; do not edit).\n"
              "# Needs dcgm-exporter metrics and, for the pool label, kube-state-metrics with\n"
              f"#   --metric-labels-allowlist={KSM_NODE_LABELS_ALLOWLIST}\n")
    return header + yaml.safe_dump({"groups": groups}, sort_keys=False, allow_unicode=True, width=1000)


# --------------------------------------------------------------------------------------------------------------------
# Dashboards (Grafana JSON built here, so every query uses the rules above)

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
    ]
    pool_var = _query_var("pool", "Pool", f"label_values({UTIL}, pool)")
    return _dashboard("gpupools-fleet", "GPU fleet overview (gpupools)", panels, [pool_var],
                      "GPUs per pool, utilization per pool and namespace, memory, idle GPUs and sharing.")


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


def dashboards(idle: Idle, vgpu: bool = False) -> dict[str, dict]:
    """File name -> Grafana dashboard JSON model; `vgpu`: the stack has vgpu pools, whose HAMi metrics get panels."""
    return {"gpupools-fleet.json": fleet_dashboard(idle), "gpupools-namespaces.json": namespace_dashboard(vgpu)}


# --------------------------------------------------------------------------------------------------------------------
# Chart values


def release_label(stack: StackConfig) -> str:
    m = stack.monitoring
    return KUBE_PROMETHEUS_STACK.release if m.prometheus == "install" else m.release_label


def service_monitor_labels(stack: StackConfig) -> dict | None:
    """The label a Prometheus selects ServiceMonitors and PrometheusRules by; None when monitoring is off."""
    if not stack.monitoring.enabled:
        return None
    return {"release": release_label(stack)}


def kube_prometheus_stack_values(stack: StackConfig) -> dict:
    grafana = stack.monitoring.grafana
    values: dict = {
        "kube-state-metrics": {"metricLabelsAllowlist": [KSM_NODE_LABELS_ALLOWLIST]},
        "grafana": {"enabled": grafana},
    }
    routes = alertmanager_config(stack)
    if routes is not None:
        # The chart merges `config` into its default (keeping its inhibit rules) and mounts each listed Secret
        # under /etc/alertmanager/secrets/<name>/, where the receivers read their credentials.
        values["alertmanager"] = {"config": routes, "alertmanagerSpec": {"secrets": [RECEIVERS_SECRET]}}
    if grafana:
        values["grafana"].update({
            # The password is generated and kept as a Pulumi secret; Grafana reads it from this Secret.
            "admin": {"existingSecret": GRAFANA_ADMIN_SECRET, "userKey": GRAFANA_USER_KEY, "passwordKey": GRAFANA_PASSWORD_KEY},
            "sidecar": {"dashboards": {"enabled": True, "label": DASHBOARD_LABEL[0], "labelValue": DASHBOARD_LABEL[1], "searchNamespace": "ALL"}},
        })
    return values


def needs_standalone_exporter(stack: StackConfig) -> bool:
    """The GPU Operator brings its own dcgm-exporter; every other installer needs the standalone chart."""
    return resolve_installer(stack.cloud, stack.gpu_software.installer) != "gpu-operator"


def dcgm_exporter_values(stack: StackConfig, plans: list[PoolPlan]) -> dict:
    installer = resolve_installer(stack.cloud, stack.gpu_software.installer)
    values: dict = {
        "serviceMonitor": {"enabled": True, "additionalLabels": service_monitor_labels(stack) or {}, "relabelings": SCRAPE_RELABELINGS},
        "tolerations": gpu_tolerations(stack, plans),
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": GPU_LABEL, "operator": "Exists"}]}]}}},
        # Per-pod attribution (namespace, pod, container labels) comes from the kubelet's pod-resources socket.
        "kubeletPath": KUBELET_POD_RESOURCES,
    }
    if stack.cloud == "gcp" and installer == "cloud":
        values.update({
            "extraHostVolumes": [{"name": "nvidia-install-dir-host", "hostPath": GKE_DRIVER_HOST_PATH}],
            "extraVolumeMounts": [DCGM_METRICS_MOUNT, {"name": "nvidia-install-dir-host", "mountPath": GKE_DRIVER_MOUNT, "readOnly": True}],
            "extraEnv": [{"name": "LD_LIBRARY_PATH", "value": f"{GKE_DRIVER_MOUNT}/lib64"}],
            # No NVIDIA runtime injects /dev/nvidia*; privileged is how the exporter sees the GPUs on GKE.
            "securityContext": {"privileged": True, "allowPrivilegeEscalation": True},
        })
    return values


def hami_service_monitors(stack: StackConfig) -> list[dict]:
    """HAMi's chart renders ServiceMonitors only without a way to give them the label our Prometheus selects by, so
    gpupools writes its own for the chart's two Services. The device plugin's series name the workload's namespace,
    pod and container, which the relabeling keeps (as for dcgm-exporter)."""
    labels = service_monitor_labels(stack)
    if labels is None:
        return []
    return [{"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
             "metadata": {"name": f"gpupools-{component}", "namespace": NAMESPACE, "labels": {"app.kubernetes.io/managed-by": "gpupools", **labels}},
             "spec": {"namespaceSelector": {"matchNames": [HAMI_CHART.namespace]},
                      "selector": {"matchLabels": {"app.kubernetes.io/component": component, "app.kubernetes.io/instance": HAMI_CHART.release}},
                      "endpoints": [{"port": port, "path": "/metrics", "relabelings": SCRAPE_RELABELINGS}]}}
            for component, port in HAMI_SCRAPE]


def operator_service_monitor(stack: StackConfig) -> dict | None:
    """The GPU Operator exporter's ServiceMonitor: selected by our Prometheus, keeping the workload's pod labels."""
    labels = service_monitor_labels(stack)
    if labels is None:
        return None
    return {"additionalLabels": labels, "relabelings": SCRAPE_RELABELINGS}


# --------------------------------------------------------------------------------------------------------------------
# The plan


@dataclass
class MonitoringPlan:
    releases: list[Release] = field(default_factory=list)  # kube-prometheus-stack first: it brings the CRDs
    objects: list[dict] = field(default_factory=list)  # namespace first
    grafana_secret: str | None = None  # name of the Secret to fill with a generated admin password
    rules: list[dict] = field(default_factory=list)
    dashboards: dict[str, dict] = field(default_factory=dict)


def prometheus_rule(stack: StackConfig, groups: list[dict]) -> dict:
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": RULES_NAME, "namespace": NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "gpupools", **(service_monitor_labels(stack) or {})}},
            "spec": {"groups": groups}}


def dashboard_config_map(filename: str, dashboard: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "gpupools-dashboard-" + filename.removeprefix("gpupools-").removesuffix(".json"), "namespace": NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "gpupools", DASHBOARD_LABEL[0]: DASHBOARD_LABEL[1]}},
            "data": {filename: json.dumps(dashboard, indent=1, sort_keys=True)}}


def monitoring_plan(stack: StackConfig, plans: list[PoolPlan]) -> MonitoringPlan | None:
    m = stack.monitoring
    if not m.enabled:
        return None
    vgpu = bool(hami_served(plans))
    out = MonitoringPlan(rules=rules_for(stack), dashboards=dashboards(m.idle, vgpu) if m.grafana else {})
    standalone = needs_standalone_exporter(stack)
    out.objects.append(namespace(NAMESPACE, privileged=standalone))
    if standalone and stack.cloud == "gcp":
        # GKE admits system-node-critical pods (the exporter chart's priority class) outside kube-system only under a quota.
        out.objects.append({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": GKE_QUOTA, "namespace": NAMESPACE},
                            "spec": {"hard": {"pods": "100"}, "scopeSelector": {"matchExpressions": [
                                {"operator": "In", "scopeName": "PriorityClass", "values": ["system-node-critical", "system-cluster-critical"]}]}}})
    if m.prometheus == "install":
        secret = receivers_secret(stack)
        if secret is not None:
            secret["metadata"]["namespace"] = NAMESPACE
            out.objects.append(secret)
        out.releases.append(Release(KUBE_PROMETHEUS_STACK, KUBE_PROMETHEUS_STACK.default_version, kube_prometheus_stack_values(stack)))
        if m.grafana:
            out.grafana_secret = GRAFANA_ADMIN_SECRET
    if standalone:
        out.releases.append(Release(DCGM_EXPORTER, DCGM_EXPORTER.default_version, dcgm_exporter_values(stack, plans)))
    out.objects.append(prometheus_rule(stack, out.rules))
    if vgpu:
        out.objects += hami_service_monitors(stack)
    for filename, dashboard in out.dashboards.items():
        out.objects.append(dashboard_config_map(filename, dashboard))
    return out


def rendered_files(stack: StackConfig) -> dict[str, str]:
    """Files for people who bring their own Prometheus and Grafana: the rules file and the dashboards' JSON."""
    if not stack.monitoring.enabled:
        return {}
    files = {RULES_FILE: rules_file_text(rules_for(stack))}
    routes = alertmanager_config(stack)
    if routes is not None:  # credentials are files the Alertmanager mounts; the text holds none
        files[ALERTMANAGER_FILE] = yaml.safe_dump(routes, sort_keys=False, allow_unicode=True, width=1000)
    if stack.monitoring.grafana:
        for filename, dashboard in dashboards(stack.monitoring.idle, bool(vgpu_shares(stack))).items():
            files[f"grafana/{filename}"] = json.dumps(dashboard, indent=2, sort_keys=True) + "\n"
    return files
