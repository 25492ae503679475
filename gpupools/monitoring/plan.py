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
from gpupools.queues import kai
from gpupools.core.pools import GPU_LABEL, PoolPlan, Taint
from gpupools.monitoring.promql import KSM_KAI_POD_ANNOTATIONS_ALLOWLIST, KSM_KAI_POD_LABELS_ALLOWLIST, KSM_NODE_LABELS_ALLOWLIST
from gpupools.monitoring.rules import rules_file_text, rules_for, vgpu_shares
from gpupools.core.sharing import DEPLOY_OPERANDS_LABEL, resolve_installer
from gpupools.pools.software import GPU_OPERATOR, HAMI_CHART, Chart, Release, gpu_tolerations, hami_served, namespace, software_plan

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
# kube-prometheus-stack 88.5.3 puts a Service (and for some an Endpoints) in kube-system for each of these exporters,
# whatever the release's namespace (templates/exporters/{core-dns,kube-controller-manager,kube-dns,kube-etcd,kube-proxy,
# kube-scheduler}/service.yaml: `namespace: kube-system`), and its operator writes the kubelet's Service into
# `prometheusOperator.kubeletService.namespace` (values.yaml: kube-system; templates/prometheus-operator/deployment.yaml,
# `--kubelet-service`), which the kubelet ServiceMonitor selects by `kubelet.namespace`
# (templates/exporters/kubelet/servicemonitor.yaml).
CHART_SYSTEM_NAMESPACE = "kube-system"
KUBE_SYSTEM_EXPORTERS = ("coreDns", "kubeControllerManager", "kubeDns", "kubeEtcd", "kubeProxy", "kubeScheduler")


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


def managed_namespaces(stack: StackConfig) -> tuple[str, ...]:
    """Namespaces the cluster keeps to itself and creates nothing of ours in (the Cloud object's MANAGED_NAMESPACES)."""
    return tuple(getattr(stack.target, "MANAGED_NAMESPACES", ()))


def kube_prometheus_stack_values(stack: StackConfig) -> dict:
    grafana = stack.monitoring.grafana
    values: dict = {
        "kube-state-metrics": {"metricLabelsAllowlist": [KSM_NODE_LABELS_ALLOWLIST]},
        "grafana": {"enabled": grafana},
    }
    if not stack.target.ADMITS_HOST_AGENTS:
        # The chart's node exporter runs in the host's network and PID namespaces with its root filesystem mounted
        # (prometheus-node-exporter values: hostNetwork, hostPID, hostRootFsMount), which the cluster refuses.
        values["nodeExporter"] = {"enabled": False}
    if CHART_SYSTEM_NAMESPACE in managed_namespaces(stack):
        # Where kube-system is the service's, the exporters the chart puts there are off (the control plane and
        # cluster DNS are the service's to watch), and the operator keeps the kubelet's Service beside Prometheus,
        # where the kubelet ServiceMonitor then looks: it scrapes each node's own port 10250, no write in kube-system.
        values.update({exporter: {"enabled": False} for exporter in KUBE_SYSTEM_EXPORTERS})
        values["prometheusOperator"] = {"kubeletService": {"namespace": NAMESPACE}}
        values["kubelet"] = {"namespace": NAMESPACE}
    if kai.fractions_on(stack):
        # Which fractional pods share the GPU a KAI reservation pod holds, and how much of it each: `gpupools idle`
        # gives them the holder's idle time.
        values["kube-state-metrics"]["metricLabelsAllowlist"].append(KSM_KAI_POD_LABELS_ALLOWLIST)
        values["kube-state-metrics"]["metricAnnotationsAllowList"] = [KSM_KAI_POD_ANNOTATIONS_ALLOWLIST]
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


# The GPU Operator's exporter DaemonSet selects nodes labelled `nvidia.com/gpu.deploy.dcgm-exporter: "true"`
# (NVIDIA/gpu-operator v26.7.0 assets/state-dcgm-exporter/0800_daemonset.yaml), a label the operator puts on every GPU
# node unless the node already has a value for it, and takes off all such labels from nodes labelled
# `nvidia.com/gpu.deploy.operands=false` (controllers/state_manager.go: addGPUStateLabels, hasOperandsDisabled).
DEPLOY_DCGM_EXPORTER_LABEL = "nvidia.com/gpu.deploy.dcgm-exporter"
# Names `exporter_per_pool` gives the two exporters: the operator's DaemonSet (its Service is nvidia-dcgm-exporter,
# NVIDIA/gpu-operator assets/state-dcgm-exporter/0400_service.yaml) and the standalone chart's release.
OPERATOR_EXPORTER = f"{GPU_OPERATOR.release}/nvidia-dcgm-exporter"
STANDALONE_EXPORTER = DCGM_EXPORTER.release
# The service's own exporter, where it runs one on every GPU node it makes (GKE Autopilot's managed DCGM-Exporter).
MANAGED_EXPORTER = "the service's DCGM-Exporter"


def operands_off(plan: PoolPlan) -> bool:
    """The pool's nodes tell the GPU Operator to run none of its operands there (Bottlerocket pools)."""
    return plan.labels.get(DEPLOY_OPERANDS_LABEL) == "false"


def standalone_exporter_pools(stack: StackConfig, plans: list[PoolPlan]) -> list[PoolPlan]:
    """The pools no GPU Operator dcgm-exporter covers, which the standalone chart must: every pool when the stack
    installs no operator (GKE's own driver installer, `installer: device-plugin`), else the pools whose nodes turn the
    operator's operands off. HAMi pools keep the operator's exporter: they only turn its device plugin off. None where
    the service exports the GPUs itself (`MANAGED_GPU_METRICS`)."""
    if stack.target.MANAGED_GPU_METRICS is not None:
        return []
    if resolve_installer(stack.target, stack.gpu_software.installer) != "gpu-operator":
        return list(plans)
    return [p for p in plans if operands_off(p)]


def dcgm_exporter_values(stack: StackConfig, plans: list[PoolPlan]) -> dict:
    """The standalone exporter for `plans` (the pools of `standalone_exporter_pools`), and for no other pool."""
    installer = resolve_installer(stack.target, stack.gpu_software.installer)
    match = [{"key": GPU_LABEL, "operator": "Exists"}]
    if installer == "gpu-operator":
        # Beside the operator only where its operands are off: the exact complement of the nodes its own exporter
        # runs on, so no GPU is exported twice (the readiness gate's rule selects the other side, NotIn [false]).
        match.append({"key": DEPLOY_OPERANDS_LABEL, "operator": "In", "values": ["false"]})
    values: dict = {
        "serviceMonitor": {"enabled": True, "additionalLabels": service_monitor_labels(stack) or {}, "relabelings": SCRAPE_RELABELINGS},
        "tolerations": gpu_tolerations(stack, plans),
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": match}]}}},
        # Per-pod attribution (namespace, pod, container labels) comes from the kubelet's pod-resources socket.
        # Bottlerocket's kubelet runs with --root-dir /var/lib/kubelet (bottlerocket-core-kit
        # packages/kubernetes-1.31/kubelet-exec-start-conf), so the chart's default path holds there too; its device
        # plugin is NVIDIA's k8s-device-plugin, which registers GPUs with the kubelet by UUID whatever its
        # device-id-strategy (k8s-device-plugin internal/rm/devices.go: dev.ID = uuid; the strategy only changes the
        # IDs handed to the runtime, internal/plugin/server.go deviceIDsFromAnnotatedDeviceIDs), and UUIDs are what
        # dcgm-exporter matches by default (--kubernetes-gpu-id-type uid, pkg/cmd/app.go).
        "kubeletPath": KUBELET_POD_RESOURCES,
    }
    # The chart's default securityContext (capabilities add SYS_ADMIN) stays: besides DCGM's profiling metrics it is
    # what lets the exporter see the GPUs on Bottlerocket, whose NVIDIA hook ignores the image's
    # NVIDIA_VISIBLE_DEVICES=all in unprivileged containers (accept-nvidia-visible-devices-envvar-when-unprivileged =
    # false, bottlerocket-core-kit packages/nvidia-container-toolkit/nvidia-container-toolkit-config-k8s) and counts a
    # container with CAP_SYS_ADMIN in its bounding set as privileged (nvidia-container-toolkit
    # internal/config/image/privileged.go IsPrivileged; cmd/nvidia-container-runtime-hook/container_config.go getDevices).
    if stack.target.CLOUD_DRIVER_ON_HOST and installer == "cloud":
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
    """What monitoring a stack installs: Helm releases, Kubernetes objects, alert rules and dashboards."""

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
    out = MonitoringPlan(rules=rules_for(stack), dashboards=dashboards(m.idle, vgpu, queues, bool(kai.queue_namespaces(stack))) if m.grafana else {})
    standalone = standalone_exporter_pools(stack, plans)
    # The standalone exporter mounts a host path and adds SYS_ADMIN, which only the privileged Pod Security level admits.
    out.objects.append(namespace(NAMESPACE, privileged=bool(standalone)))
    if standalone and stack.target.CRITICAL_PODS_NEED_QUOTA:
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
        out.releases.append(Release(DCGM_EXPORTER, DCGM_EXPORTER.default_version, dcgm_exporter_values(stack, standalone)))
    out.objects.append(prometheus_rule(stack, out.rules))
    if vgpu:
        out.objects += hami_service_monitors(stack)
    for filename, dashboard in out.dashboards.items():
        out.objects.append(dashboard_config_map(filename, dashboard))
    return out


# --------------------------------------------------------------------------------------------------------------------
# Exporters per pool: one each, or GPUs go unseen (none) or are counted twice (two)


def node_taints(stack: StackConfig, plan: PoolPlan) -> list[Taint]:
    """The taints a running node of the pool keeps: the pool's own and those its cloud adds (AKS spot). Startup
    taints are left out: they only delay DaemonSet pods until the node is ready."""
    extra = [Taint(t["key"], t.get("value", ""), t["effect"]) for t in stack.target.extra_tolerations(plan)]
    return [*plan.taints, *(t for t in extra if t not in plan.taints)]


def tolerates(toleration: dict, taint: Taint) -> bool:
    """Kubernetes' rule (k8s.io/api core/v1 toleration.go, ToleratesTaint): same effect or none, and the same key
    (any key for Exists without one) with the same value unless the operator is Exists."""
    if toleration.get("effect") and toleration["effect"] != taint.effect:
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.key
    return toleration.get("key") == taint.key and toleration.get("value", "") == taint.value


def schedules_on(tolerations: list[dict], taints: list[Taint]) -> bool:
    return all(any(tolerates(t, taint) for t in tolerations) for taint in taints if taint.effect != "PreferNoSchedule")


def _expression_holds(expression: dict, labels: dict[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    raise ValueError(f"node selector operator {operator!r} is not evaluated here")


def selects(values: dict, labels: dict[str, str]) -> bool:
    """Whether a chart's `nodeSelector` and required node affinity (terms ORed, expressions ANDed) pick a node."""
    if any(labels.get(k) != v for k, v in (values.get("nodeSelector") or {}).items()):
        return False
    required = ((values.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    return any(all(_expression_holds(e, labels) for e in term.get("matchExpressions", [])) for term in required["nodeSelectorTerms"])


def operator_exports(labels: dict[str, str]) -> bool:
    """The GPU Operator's exporter runs on a node with these labels (see DEPLOY_DCGM_EXPORTER_LABEL)."""
    return labels.get(DEPLOY_OPERANDS_LABEL) != "false" and labels.get(DEPLOY_DCGM_EXPORTER_LABEL, "true") in ("true", "")


def exporter_per_pool(stack: StackConfig, plans: list[PoolPlan], mplan: MonitoringPlan | None = None) -> dict[str, list[str]]:
    """The DCGM exporters that run on each GPU pool's nodes, read back from the Helm values the stack deploys: the GPU
    Operator's where its release enables dcgmExporter, its operands run on the pool and its DaemonSet tolerations
    cover the pool's taints; the standalone chart's where its node affinity selects the pool's labels and its
    tolerations cover the taints. Every pool should name exactly one. `mplan`: the stack's monitoring plan, if
    already made."""
    out: dict[str, list[str]] = {p.name: [] for p in plans}
    if stack.target.MANAGED_GPU_METRICS is not None:
        return {p.name: [MANAGED_EXPORTER] for p in plans}
    operator = next((r for r in software_plan(stack, plans, operator_service_monitor(stack)).releases if r.chart.chart == GPU_OPERATOR.chart), None)
    if operator is not None and operator.values.get("dcgmExporter", {}).get("enabled"):
        tolerations = operator.values.get("daemonsets", {}).get("tolerations", [])
        for p in plans:
            if operator_exports(p.labels) and schedules_on(tolerations, node_taints(stack, p)):
                out[p.name].append(OPERATOR_EXPORTER)
    mplan = mplan if mplan is not None else monitoring_plan(stack, plans)
    standalone = next((r for r in mplan.releases if r.chart.chart == DCGM_EXPORTER.chart), None) if mplan is not None else None
    if standalone is not None:
        for p in plans:
            if selects(standalone.values, p.labels) and schedules_on(standalone.values.get("tolerations", []), node_taints(stack, p)):
                out[p.name].append(STANDALONE_EXPORTER)
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
        for filename, dashboard in dashboards(stack.monitoring.idle, bool(vgpu_shares(stack)), bool(queue_namespaces(stack)),
                                              bool(kai.queue_namespaces(stack))).items():
            files[f"grafana/{filename}"] = json.dumps(dashboard, indent=2, sort_keys=True) + "\n"
    return files
