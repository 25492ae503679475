"""The GPU Operator or the NVIDIA device plugin, with the configs that select each pool's sharing."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpupools.pools.software import Release, SoftwarePlan

from gpupools.deploy import kube
from gpupools.deploy.base import Component


def helm_release(release: Release, opts: pulumi.ResourceOptions) -> kube.HelmRelease:
    """A Helm release pinned to one chart version from its official repository (or OCI registry, where the chart
    reference is the whole `oci://` address)."""
    inputs = {
        "name": release.name,
        "chart": release.chart.chart,
        "version": release.version,
        "namespace": release.chart.namespace,
        "createNamespace": False,
        "values": release.values,
        "atomic": True,
        "cleanupOnFail": True,
    }
    if release.chart.repo:
        inputs["repositoryOpts"] = {"repo": release.chart.repo}
    return kube.HelmRelease(release.name, inputs, opts)


class GpuSoftware(Component):
    """Installs what a `SoftwarePlan` lists. It depends on the cluster only, never on the GPU pools."""

    TYPE = "GpuSoftware"

    def __init__(self, name: str, plan: SoftwarePlan, kubernetes: k8s.Provider, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, opts)
        provider_opts = self.child(provider=kubernetes)
        namespaces = [kube.apply(obj, provider_opts) for obj in plan.objects if obj["kind"] == "Namespace"]
        created = namespaces + [kube.apply(obj, self.child(provider=kubernetes, depends_on=namespaces))
                                for obj in plan.objects if obj["kind"] != "Namespace"]
        self.releases = [helm_release(r, self.child(provider=kubernetes, depends_on=created)) for r in plan.releases]
        self.register_outputs({"releases": [r.name for r in plan.releases]})
