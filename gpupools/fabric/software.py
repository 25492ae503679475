"""What the fabric installs into the cluster: the EFA device plugin on EKS, from its official chart, pinned."""

from __future__ import annotations

from gpupools.core.cloud import Cloud
from gpupools.core.pools import POOL_LABEL, GPU_TAINT, PoolPlan, toleration
from gpupools.health import readiness
from gpupools.fabric.plan import FabricPlan, catalog_fabric, fabric_on, plan_fabrics
from gpupools.stack.config import StackConfig
from gpupools.pools.software import Chart, Release, SoftwarePlan, namespace as software_namespace, nvidia_driver_name, rdma_mode

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
        # And the pools' own taints (pools[].taints): the plugin must run on every node of those pools.
        "tolerations": [toleration(GPU_TAINT), *readiness.tolerations(),
                        *map(toleration, dict.fromkeys(t for f in fabrics for t in f.taints))],
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
# device plugin, whose config gives every pod on the node the IB HCAs as one shared resource (up to 63 pods). Azure names
# it `shared_ib`; gpupools names it after the cloud's FABRIC_RESOURCE (`rdma/sharedib`: clouds.azure says why).
OFED_DRIVER = {"repository": "nvcr.io/nvidia/mellanox", "image": "doca-driver", "version": "doca3.2.0-25.10-1.2.8.0-2"}
RDMA_SHARED_DEVICE_PLUGIN = {"repository": "nvcr.io/nvidia/mellanox", "image": "k8s-rdma-shared-dev-plugin", "version": "network-operator-v25.10.0"}
RDMA_PODS_PER_NODE = 63
RDMA_RESOURCE_PREFIX = "rdma/"  # the plugin's own prefix (Mellanox/k8s-rdma-shared-dev-plugin resources_manager.go)
RDMA_SHARED_CONFIG = {"configList": [{"resourceName": "sharedib", "rdmaHcaMax": RDMA_PODS_PER_NODE,
                                      "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]}}]}


def rdma_shared_config(resource: str) -> dict:
    """The device plugin's config advertising `resource` (the fabric's, `rdma/<name>`)."""
    assert resource.startswith(RDMA_RESOURCE_PREFIX), resource
    entry = {**RDMA_SHARED_CONFIG["configList"][0], "resourceName": resource[len(RDMA_RESOURCE_PREFIX):]}
    return {"configList": [entry]}


def autoscaler_fabric_resources(cloud: Cloud, plan: PoolPlan) -> dict[str, int]:
    """What a new node of an InfiniBand pool advertises beside its GPUs, which the cloud's autoscaler must be told before
    it starts one for a pod asking for it: the RDMA shared device plugin's pods per node. Empty for other pools (EFA
    pools tell their autoscalers themselves: autoscaling.karpenter, cluster_autoscaler.fabric_asg_tags)."""
    if catalog_fabric(cloud.NAME, plan.pool.instance_type).kind != "infiniband" or not fabric_on(cloud, plan.pool, plan.sharing):
        return {}
    return {cloud.FABRIC_RESOURCE: RDMA_PODS_PER_NODE}


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


def nic_policy_tolerations(cloud: Cloud, plans: list[PoolPlan], fabrics: list[FabricPlan]) -> list[dict]:
    """What the NicClusterPolicy's DaemonSets tolerate: the GPU taint and whatever the cloud adds to the InfiniBand pools'
    nodes (AKS's spot taint). One function for the component that creates the policy and the landing check that reads it."""
    ib = {f.pool for f in fabrics if f.kind == "infiniband"}
    out = [toleration(GPU_TAINT)]
    for plan in plans:
        if plan.name in ib:
            out += [t for t in [*cloud.extra_tolerations(plan), *map(toleration, plan.pool_taints)] if t not in out]
    return out


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
                "rdmaSharedDevicePlugin": {**RDMA_SHARED_DEVICE_PLUGIN, "config": json.dumps(rdma_shared_config(
                    next(f.resource for f in fabrics if f.kind == "infiniband")))},
            }}


def rdma_pools(stack: StackConfig, plans: list[PoolPlan]) -> list[str]:
    """The InfiniBand pools, for which the GPU Operator loads nvidia-peermem (`pools.software.gpudirect_rdma_values`)."""
    return sorted(f.pool for f in plan_fabrics(stack, plans).values() if f.kind == "infiniband")


def gpudirect_rdma_line(stack: StackConfig, plans: list[PoolPlan], pool: str) -> str | None:
    """What the plan says about GPUDirect RDMA on an InfiniBand pool; None for other pools."""
    ib = rdma_pools(stack, plans)
    if pool not in ib:
        return None
    mode = rdma_mode(stack, plans, ib)
    if mode == "cluster-policy":
        return ("GPUDirect RDMA: the GPU Operator loads nvidia-peermem on the DOCA driver (driver.rdma.enabled, as Azure's "
                "aks-rdma-infiniband values set it)")
    if mode == "nvidia-driver":
        return (f"GPUDirect RDMA: the GPU Operator loads nvidia-peermem on the DOCA driver here only (NVIDIADriver "
                f"{nvidia_driver_name(pool)} with rdma.enabled; the chart's default NVIDIADriver keeps the other GPU pools "
                f"without it, as their nodes have no DOCA driver)")
    return ("GPUDirect RDMA: off: the GPU Operator does not install this cluster's GPU driver, and nothing here loads "
            "nvidia-peermem (Azure's aks-rdma-infiniband configs/nvidia-peermem-reloader does, for AKS's own driver)")


# JobSet (kubernetes-sigs/jobset), the multi-node job API `gpupools workload --jobset` prints for. The newest release,
# v0.12.0, is the one Kueue 0.19.2 is built against (kubernetes-sigs/kueue v0.19.2 go.mod: sigs.k8s.io/jobset v0.12.0),
# from its official chart, as the JobSet docs install it (site/content/en/docs/installation/_index.md: `helm install jobset
# oci://registry.k8s.io/jobset/charts/jobset --version ${VERSION#v} --namespace=jobset-system`).
JOBSET = Chart("jobset", "oci://registry.k8s.io/jobset/charts/jobset", "", "jobset-system", "0.12.0")
# The service account the chart's controller runs as (templates/rbac/service_account.yaml: `<release>-controller`), and so
# the user that creates a JobSet's Jobs; the team admission policies exempt only those (queues.kueue.queue_policy).
JOBSET_CONTROLLER_USER = f"system:serviceaccount:{JOBSET.namespace}:{JOBSET.release}-controller"


def jobset_values() -> dict:
    """The chart's image written out as its release packaging sets it: the repository's values.yaml names a staging image
    and tag `main`, which hack/helm-chart-package.sh rewrites to registry.k8s.io/jobset/jobset:<tag> when it packages a
    release. Two controller replicas behind a PodDisruptionBudget: the JobSet's pods pass through its webhooks
    (templates/webhook/manifests.yaml, failurePolicy Fail), so a drained controller would hold up every JobSet pod."""
    return {"image": {"repository": "registry.k8s.io/jobset/jobset", "tag": f"v{JOBSET.default_version}", "pullPolicy": "IfNotPresent"},
            "controller": {"replicas": 2, "podDisruptionBudget": {"enabled": True, "minAvailable": 1}}}


def jobset_release(fabrics: list[FabricPlan], fleet_worker: bool = False) -> Release | None:
    """JobSet where the stack has a fabric pool (a rack pool's NVLink counts, `fabric.plan.job_fabrics`): it runs jobs that
    span nodes, and only fabric pools take those (`workload --nodes` refuses the others), so a stack without one would run its controller and webhooks for nothing. Kueue's
    JobSet integration is on in every stack (queues.kueue.INTEGRATIONS): Kueue sets its JobSet controller up once the CRD
    appears (kueue v0.19.2 pkg/controller/jobframework/setup.go, WaitForAPI), so a JobSet installed later queues too.
    A worker of a fleet gets it whatever its pools: a MultiKueue manager connects to a worker only once every framework
    it enables has its CRD there (kueue v0.19.2 pkg/controller/admissionchecks/multikueue/multikueuecluster.go, the
    remote client's watches), and the fleet's manager enables JobSet (gpupools.fleet.plan)."""
    if not fabrics and not fleet_worker:
        return None
    return Release(JOBSET, JOBSET.default_version, jobset_values())


def with_fabric_releases(software: SoftwarePlan, fabrics: list[FabricPlan], fleet_worker: bool = False) -> SoftwarePlan:
    """The GPU software plus what every cloud's fabric pools share: JobSet, in its own namespace."""
    release = jobset_release(fabrics, fleet_worker)
    if release is not None:
        software.objects.append(software_namespace(JOBSET.namespace))
        software.releases.append(release)
    return software
