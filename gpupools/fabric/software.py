"""What the fabric installs into the cluster: the EFA device plugin on EKS, from its official chart, pinned."""

from __future__ import annotations

from gpupools.core.pools import POOL_LABEL, GPU_TAINT, toleration
from gpupools.health import readiness
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
        # And the readiness taint: EFA interfaces are advertised while the GPU stack is being validated, not after.
        "tolerations": [toleration(GPU_TAINT), *readiness.tolerations()],
    }


def efa_device_plugin_release(fabrics: list[FabricPlan]) -> Release | None:
    efa = [f for f in fabrics if f.kind == "efa"]
    if not efa:
        return None
    return Release(EFA_DEVICE_PLUGIN, EFA_DEVICE_PLUGIN.default_version, efa_device_plugin_values(efa))


# NVIDIA Network Operator (Mellanox/network-operator deployment/network-operator, chart `nvidia/network-operator`),
# the way Azure's RDMA/InfiniBand guidance for AKS installs it (Azure/aks-rdma-infiniband tests/setup-infra/deploy-aks.sh:
# `helm upgrade -i network-operator nvidia/network-operator`, configs/values/network-operator/values.yaml).
NETWORK_OPERATOR = Chart("network-operator", "network-operator", "https://helm.ngc.nvidia.com/nvidia", "nvidia-network-operator", "26.4.1")
NIC_POLICY_API = "mellanox.com/v1alpha1"
# From Azure/aks-rdma-infiniband @ 700dabb configs/nicclusterpolicy: the DOCA driver (OFED) and the RDMA shared
# device plugin, whose config gives every pod on the node the IB HCAs as one `rdma/shared_ib` (up to 63 pods).
OFED_DRIVER = {"repository": "nvcr.io/nvidia/mellanox", "image": "doca-driver", "version": "doca3.2.0-25.10-1.2.8.0-2"}
RDMA_SHARED_DEVICE_PLUGIN = {"repository": "nvcr.io/nvidia/mellanox", "image": "k8s-rdma-shared-dev-plugin", "version": "network-operator-v25.10.0"}
RDMA_SHARED_CONFIG = {"configList": [{"resourceName": "shared_ib", "rdmaHcaMax": 63,
                                      "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]}}]}


# The chart's own NFD worker tolerations (deployment/network-operator/values.yaml, node-feature-discovery.worker), which
# a values list replaces rather than extends.
NFD_WORKER_DEFAULT_TOLERATIONS = [{"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"},
                                  {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]


def network_operator_values(nfd: bool, tolerations: list[dict] | None = None) -> dict:
    """Azure turns the chart's own NodeFeatureRules off (the policy below selects the pools by their label instead). Node
    Feature Discovery, whose kernel and OS labels the driver container needs, comes from the chart unless the GPU
    software already runs one: one NFD per cluster (aks-rdma-infiniband configs/values/gpu-operator/values.yaml turns the
    other one off for the same reason). Its worker tolerates what the GPU DaemonSets do (the GPU taint, AKS spot), or the
    InfiniBand nodes of a spot pool would never get the labels."""
    values: dict = {"nfd": {"enabled": nfd, "deployNodeFeatureRules": False}}
    if nfd and tolerations:
        values["node-feature-discovery"] = {"worker": {"tolerations": NFD_WORKER_DEFAULT_TOLERATIONS
                                                       + [t for t in tolerations if t not in NFD_WORKER_DEFAULT_TOLERATIONS]}}
    return values


def network_operator_release(fabrics: list[FabricPlan], other_nfd: bool, tolerations: list[dict] | None = None) -> Release | None:
    """`other_nfd`: the GPU software runs Node Feature Discovery already (`pools.software.runs_nfd`)."""
    if not any(f.kind == "infiniband" for f in fabrics):
        return None
    return Release(NETWORK_OPERATOR, NETWORK_OPERATOR.default_version, network_operator_values(not other_nfd, tolerations))


def nic_cluster_policy(fabrics: list[FabricPlan], tolerations: list[dict]) -> dict | None:
    """The one NicClusterPolicy of the cluster: the IB driver and the RDMA shared device plugin on the InfiniBand pools
    only, tolerating their taints."""
    pools = sorted(f.pool for f in fabrics if f.kind == "infiniband")
    if not pools:
        return None
    import json

    affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": pools}]}]}}
    return {"apiVersion": NIC_POLICY_API, "kind": "NicClusterPolicy",
            "metadata": {"name": "nic-cluster-policy", "labels": {"app.kubernetes.io/managed-by": "gpupools"}},
            "spec": {
                "nodeAffinity": affinity,
                "tolerations": tolerations,
                "ofedDriver": {**OFED_DRIVER,
                               # A race in loading the kernel modules (Mellanox/doca-driver-build#52), as Azure's policy sets it.
                               "env": [{"name": "OFED_BLACKLIST_MODULES_FILE", "value": "/host/etc/modprobe.d/blacklist-ofed-modules.conf"}],
                               "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1,
                                                 "drain": {"enable": True, "force": True, "deleteEmptyDir": True, "timeoutSeconds": 300}}},
                "rdmaSharedDevicePlugin": {**RDMA_SHARED_DEVICE_PLUGIN, "config": json.dumps(RDMA_SHARED_CONFIG)},
            }}
