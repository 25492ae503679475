"""Gcore: GPU software on the nodes: who brings the driver, toolkit and device plugin, and which sharing the cloud's
own mechanism serves.
"""

from __future__ import annotations



from gpupools.core.catalog import Hardware
from gpupools.stack.config import Pool, Sharing
from gpupools.stack.errors import Problem


def pool_sharing_problems(pool: Pool, sharing: Sharing, hw: Hardware | None, path: str) -> list[Problem]:
    return []


# --------------------------------------------------------------------------------------------------------------------
# GPU software

# DOCS configure-gpu-autoscaling-for-kubernetes.mdx installs the GPU Operator with `driver.enabled=false` and
# `operator.defaultRuntime=crio`: the NVIDIA driver is on Gcore's GPU node image and the runtime is CRI-O. The operator
# still installs its container toolkit there (the guide keeps it on). `operator.defaultRuntime` is not set here: the
# pinned operator detects the runtime from the node (its ClusterPolicy CRD, tests/charts/gpu-operator: "Deprecated:
# DefaultRuntime is no longer used by the gpu-operator. This is instead, detected at runtime.").
AUTO_INSTALLER = "gpu-operator"
OWN_GPU_SOFTWARE = False
OWN_SHARING = False
CLOUD_DRIVER_ON_HOST = False
IMAGE_BRINGS_DRIVER = True
IMAGE_BRINGS_TOOLKIT = False
# The standalone device plugin would need the toolkit the operator brings; Gcore's guide installs the operator. Gcore
# has no GPU software of its own to hand a pool (`cloud`).
REFUSED_INSTALLERS = {
    "device-plugin": "'device-plugin' is not offered on gcore: Gcore's GPU guide installs the GPU Operator, whose container toolkit "
                     "configures CRI-O for the GPUs; use 'gpu-operator' (or auto)",
    "cloud": "'cloud' is not a mechanism of Gcore Managed Kubernetes: its GPU node image brings the driver only, and gpupools installs "
             "the GPU Operator beside it; use 'gpu-operator' (or auto)",
}
CRITICAL_PODS_NEED_QUOTA = False
OWNS_WEBHOOK_NAMESPACE_SELECTOR = False
# Gcore's node-pool pages show NVIDIA's static device plugin DaemonSet on GPU bare-metal nodes (DOCS manage-node-pools.mdx:
# "kubectl get daemonset -n kube-system nvidia-device-plugin-daemonset"; upgrade-a-gpu-kubernetes-cluster.mdx: the user
# updates it from NVIDIA/k8s-device-plugin deployments/static), while its GPU guide installs the GPU Operator, whose own
# device plugin then runs beside it. Two plugins on one node both register nvidia.com/gpu, and only the operator's knows
# gpupools' sharing config. Whether Gcore installs that DaemonSet is not documented consistently, so gpupools neither
# assumes it nor patches it (a patch of an object that is not there fails `pulumi up`): the plan says what to check.
IMAGE_DEVICE_PLUGIN = ("kube-system", "nvidia-device-plugin-daemonset")
CLOUD_DEVICE_PLUGIN = None  # no `cloud` installer here


def image_device_plugin(os: str | None) -> bool:
    return False


def driver_installer(installer: str, os: str | None) -> str | None:
    """Who installs a pool's NVIDIA driver, in the plan's words: Gcore's GPU node image, whatever the installer (the
    operator runs with driver.enabled false, as Gcore's GPU guide installs it)."""
    return "Gcore's GPU node image (the GPU Operator's driver is off)"
