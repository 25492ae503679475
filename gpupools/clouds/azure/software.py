"""AKS: GPU software on the nodes: who brings the driver, toolkit and device plugin, and which sharing the cloud's
own mechanism serves.
"""

from __future__ import annotations



from gpupools.core.catalog import Hardware
from gpupools.stack.config import Pool, Sharing
from gpupools.stack.errors import Problem


def pool_sharing_problems(pool: Pool, sharing: Sharing, hw: Hardware | None, path: str) -> list[Problem]:
    return []


def gpu_driver(installer: str) -> str:
    """The GPU Operator brings its own driver; any other installer relies on the one AKS installs."""
    return "None" if installer == "gpu-operator" else "Install"


def driver_installer(installer: str, os: str | None) -> str | None:
    """Who installs a pool's NVIDIA driver, in the plan's words; None: the GPU Operator (gpu_driver above)."""
    return None if gpu_driver(installer) == "None" else "AKS (gpuProfile.driver Install: the driver of the node image)"
AUTO_INSTALLER = "gpu-operator"
OWN_GPU_SOFTWARE = False
OWN_SHARING = False
CLOUD_DEVICE_PLUGIN = None
CLOUD_DRIVER_ON_HOST = False
AUTOSCALER = None
# AKS installs the driver (gpuProfile.driver: Install, what `installer: device-plugin` uses) and cuts MIG instances at
# pool creation (gpuInstanceProfile), but runs a device plugin of its own only with its managed GPU profile
# (gpuProfile.nvidia.managementMode: Managed, which adds the DCGM exporter): an agent pool field of the ManagedCluster
# API from 2026-01-02-preview and the stable 2026-08-01 (azure-mgmt-containerservice 41.8.0's models), not of the
# 2025-09-01 API azure-native 3.29.0 sends.
REFUSED_INSTALLERS = {"cloud": "'cloud' would be AKS's managed GPU profile (gpuProfile.nvidia.managementMode: Managed: driver, device plugin and "
                               "DCGM exporter by AKS), which the AKS API that azure-native 3.29.0 sends (2025-09-01) does not have yet; use "
                               "'device-plugin' (AKS installs the driver, gpuProfile.driver: Install, and NVIDIA's device plugin serves the "
                               "GPUs) or 'gpu-operator'"}
IMAGE_BRINGS_DRIVER = False
IMAGE_BRINGS_TOOLKIT = False
CRITICAL_PODS_NEED_QUOTA = False
# AKS owns admission webhooks' namespaceSelector (its admissions enforcer); HAMi's chart says to leave it alone there.
OWNS_WEBHOOK_NAMESPACE_SELECTOR = True


def image_device_plugin(os: str | None) -> bool:
    return False
