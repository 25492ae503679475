"""What the fabric installs into the cluster: the EFA device plugin on EKS, from its official chart, pinned."""

from __future__ import annotations

from gpupools.core.pools import POOL_LABEL, GPU_TAINT, toleration
from gpupools.fabric.plan import FabricPlan
from gpupools.pools.software import Chart, Release

# aws/eks-charts stable/aws-efa-k8s-device-plugin (the EKS user guide installs it as eks/aws-efa-k8s-device-plugin into
# kube-system); the chart's version carries a leading `v`, its image tag defaults to the appVersion (v0.5.20).
EFA_DEVICE_PLUGIN = Chart("aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts", "kube-system", "v0.5.30")


def efa_device_plugin_values(fabrics: list[FabricPlan]) -> dict:
    """Only on the EFA pools, tolerating their GPU taint.

    The chart's DaemonSet requires each of `supportedInstanceLabels.keys` to be In `supportedInstanceLabels.values`
    (templates/daemonset.yaml), by default instance types; keyed by the pool label instead, it runs exactly on the
    fabric pools' nodes. Its own tolerations are only CriticalAddonsOnly plus `tolerations`.
    """
    return {
        "supportedInstanceLabels": {"keys": [POOL_LABEL], "values": sorted(f.pool for f in fabrics)},
        "tolerations": [toleration(GPU_TAINT)],
    }


def efa_device_plugin_release(fabrics: list[FabricPlan]) -> Release | None:
    efa = [f for f in fabrics if f.kind == "efa"]
    if not efa:
        return None
    return Release(EFA_DEVICE_PLUGIN, EFA_DEVICE_PLUGIN.default_version, efa_device_plugin_values(efa))
