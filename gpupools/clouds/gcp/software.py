"""GKE: GPU software on the nodes: who brings the driver, toolkit and device plugin, and which sharing the cloud's
own mechanism serves.
"""

from __future__ import annotations



from gpupools.core.catalog import Hardware
from gpupools.stack.config import Pool, Sharing
from gpupools.stack.errors import Problem
from gpupools.core.pools import PoolPlan
from gpupools.core.sharing import gke_mechanism


# GKE's documented label that stops its own NVIDIA device plugin, for pools the GPU Operator serves.
NO_DEFAULT_DEVICE_PLUGIN_LABEL = "gke-no-default-nvidia-gpu-device-plugin"
SHARING_STRATEGY = {"time-slicing": "TIME_SHARING", "mps": "MPS"}


def pool_sharing_problems(pool: Pool, sharing: Sharing, hw: Hardware | None, path: str) -> list[Problem]:
    return []


def driver_installer(installer: str, os: str | None) -> str | None:
    """Who installs a pool's NVIDIA driver, in the plan's words; None: the GPU Operator (guest_accelerator below)."""
    return "GKE (gpuDriverInstallationConfig LATEST: the newest driver GKE has for the node version)" if installer == "cloud" else None


def guest_accelerator(plan: PoolPlan, installer: str) -> dict:
    m = plan.mechanism
    accelerator: dict = {"type": plan.hardware.accelerator, "count": plan.hardware.gpus_per_node}
    if installer == "cloud":
        accelerator["gpu_driver_installation_config"] = {"gpu_driver_version": "LATEST"}
        if m.mode in SHARING_STRATEGY:
            accelerator["gpu_sharing_config"] = {"gpu_sharing_strategy": SHARING_STRATEGY[m.mode], "max_shared_clients_per_gpu": m.replicas}
        elif m.mode == "mig":
            accelerator["gpu_partition_size"] = m.mig_profile
    else:
        # The GPU Operator (or the standalone plugin's host) installs the driver itself.
        accelerator["gpu_driver_installation_config"] = {"gpu_driver_version": "INSTALLATION_DISABLED"}
    return accelerator
AUTO_INSTALLER = "cloud"
OWN_GPU_SOFTWARE = True
# GKE shares GPUs itself (time-sharing, MPS, partitions: `own_mechanism`), from a driver on the host outside any NVIDIA
# container runtime (/home/kubernetes/bin/nvidia), which the DCGM exporter mounts.
OWN_SHARING = True
CLOUD_DEVICE_PLUGIN = "GKE device plugin"
CLOUD_DRIVER_ON_HOST = True
AUTOSCALER = None
REFUSED_INSTALLERS = {"device-plugin": "'device-plugin' is not offered on gcp: GKE's own device plugin already does time-sharing and MPS without "
                                       "the operator; use 'cloud' (or 'gpu-operator')"}


def own_mechanism(sharing: Sharing, hardware: Hardware):
    return gke_mechanism(sharing, hardware)


def own_sharing_change() -> str:
    return "a sharing change (mode, replicas, migProfile) REPLACES this node pool: GKE's guestAccelerators cannot change in place"

IMAGE_BRINGS_DRIVER = False
IMAGE_BRINGS_TOOLKIT = False
# GKE admits system-*-critical pods outside kube-system only in namespaces with a quota scoped to those classes
# (NVIDIA/cloud-native-docs gpu-operator/manifests/input/google-gke-gpu-operator-quota.yaml).
CRITICAL_PODS_NEED_QUOTA = True
OWNS_WEBHOOK_NAMESPACE_SELECTOR = False


def image_device_plugin(os: str | None) -> bool:
    return False
