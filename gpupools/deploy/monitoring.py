"""kube-prometheus-stack, the standalone dcgm-exporter, GPU rules and dashboards, as one component."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpupools.monitoring.plan import GRAFANA_PASSWORD_KEY, GRAFANA_USER_KEY, NAMESPACE, MonitoringPlan

from gpupools.deploy import kube
from gpupools.deploy.base import Component
from gpupools.deploy.gpu_software import helm_release
from gpupools.deploy.wire import CloudResource


class GpuMonitoring(Component):
    """Installs what a `MonitoringPlan` lists.

    kube-prometheus-stack goes first because it brings the CRDs that the exporter's ServiceMonitor and the
    PrometheusRule need; with an existing Prometheus those CRDs are already there.
    """

    TYPE = "GpuMonitoring"

    def __init__(self, name: str, plan: MonitoringPlan, kubernetes: k8s.Provider, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, opts)
        namespaces = [kube.apply(obj, self.child(provider=kubernetes)) for obj in plan.objects if obj["kind"] == "Namespace"]
        after_namespaces = self.child(provider=kubernetes, depends_on=namespaces)
        prepared = list(namespaces)
        self.grafana_password: pulumi.Output[str] | None = None
        if plan.grafana_secret:
            # pulumi_random's RandomPassword, by type token (wire.py): secret as its class makes it.
            password = CloudResource("random:index/randomPassword:RandomPassword", "grafana-admin", {"length": 32, "special": False},
                                     outputs=("bcryptHash", "result"),
                                     opts=self.child(additional_secret_outputs=["bcryptHash", "result"]))
            self.grafana_password = password.result
            prepared.append(kube.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                        "metadata": {"name": plan.grafana_secret, "namespace": NAMESPACE,
                                                     "labels": {"app.kubernetes.io/managed-by": "gpupools"}},
                                        "stringData": {GRAFANA_USER_KEY: "admin", GRAFANA_PASSWORD_KEY: pulumi.Output.secret(password.result)}},
                                       self.child(provider=kubernetes, depends_on=namespaces,
                                                  additional_secret_outputs=["data", "stringData"])))
        prepared += [kube.apply(obj, after_namespaces) for obj in plan.objects if obj["kind"] == "ResourceQuota"]
        for obj in plan.objects:
            if obj["kind"] == "Secret":
                # Receivers' credentials from the stack's secrets: secret in state, never in outputs.
                secret = {**obj, "stringData": {k: pulumi.Output.secret(v) for k, v in obj["stringData"].items()}}
                prepared.append(kube.apply(secret, self.child(provider=kubernetes, depends_on=namespaces,
                                                              additional_secret_outputs=["data", "stringData"])))
        self.releases: list[kube.HelmRelease] = []
        for release in plan.releases:
            self.releases.append(helm_release(release, self.child(provider=kubernetes, depends_on=prepared + self.releases)))
        # Rules and scrape targets need the prometheus-operator CRDs (from kube-prometheus-stack, or already installed);
        # dashboards only the namespace.
        for obj in plan.objects:
            if obj["kind"] in ("PrometheusRule", "ServiceMonitor"):
                kube.apply(obj, self.child(provider=kubernetes, depends_on=namespaces + self.releases))
            elif obj["kind"] not in ("Namespace", "ResourceQuota", "Secret"):
                kube.apply(obj, after_namespaces)
        self.register_outputs({"releases": [r.name for r in plan.releases], "namespace": NAMESPACE,
                               "grafanaAdminPassword": self.grafana_password})
