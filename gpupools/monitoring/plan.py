"""What monitoring deploys: the scrape, kube-prometheus-stack's and dcgm-exporter's values, and the objects that carry
the rules and dashboards into the cluster. Pure, like `software.py`: the `GpuMonitoring` component applies the plan,
and `gpupools render` writes the same rules and dashboards to disk for people with their own Prometheus and Grafana.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import yaml

from gpupools.monitoring.alerting import RECEIVERS_SECRET, alertmanager_config, receivers_secret
from gpupools.stack.config import StackConfig
from gpupools.monitoring.dashboards import dashboards
from gpupools.queues.kueue import queue_namespaces
from gpupools.core.pools import GPU_LABEL, PoolPlan
from gpupools.monitoring.promql import KSM_NODE_LABELS_ALLOWLIST
from gpupools.monitoring.rules import rules_file_text, rules_for, vgpu_shares
from gpupools.core.sharing import resolve_installer
from gpupools.pools.software import HAMI_CHART, Chart, Release, gpu_tolerations, hami_served, namespace

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
# HAMi's metrics (chart 2.10.0) come from the device plugin's monitor and the scheduler, each behind its own Service.
HAMI_SCRAPE = (("hami-device-plugin", "monitorport"), ("hami-scheduler", "monitor"))  # chart component label, Service port name


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
    queues = bool(queue_namespaces(stack))
    out = MonitoringPlan(rules=rules_for(stack), dashboards=dashboards(m.idle, vgpu, queues) if m.grafana else {})
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
        for filename, dashboard in dashboards(stack.monitoring.idle, bool(vgpu_shares(stack)), bool(queue_namespaces(stack))).items():
            files[f"grafana/{filename}"] = json.dumps(dashboard, indent=2, sort_keys=True) + "\n"
    return files
