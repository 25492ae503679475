"""EKS: GPU software on the nodes: who brings the driver, toolkit and device plugin, Bottlerocket's settings, and
which sharing a pool's image can serve.
"""

from __future__ import annotations




from gpupools.core.catalog import Hardware
from gpupools.stack.config import Pool, Sharing
from gpupools.stack.errors import Problem
from gpupools.core.pools import PoolPlan


# Bottlerocket names GPUs in its MIG settings as <model>.<memory>gb (settings.kubelet-device-plugins.nvidia.mig.profile).
BOTTLEROCKET_MIG_GPU_KEY = {"A100-40GB": "a100.40gb", "A100-80GB": "a100.80gb", "H100-80GB": "h100.80gb", "H200-141GB": "h200.141gb"}


def bottlerocket_settings(plan: PoolPlan) -> str | None:
    """TOML for Bottlerocket's built-in NVIDIA device plugin, which replaces the NVIDIA chart on these nodes.

    Names follow Bottlerocket's `settings.kubelet-device-plugins.nvidia` (time-slicing since 1.25, MIG since
    1.34, MPS in current releases). rename-by-default is turned off so shared GPUs stay `nvidia.com/gpu`, as on
    every other pool.
    """
    if plan.pool.os != "bottlerocket":
        return None
    m = plan.mechanism
    lines = ["[settings.kubelet-device-plugins.nvidia]"]
    if m.mode == "time-slicing":
        lines += ['device-sharing-strategy = "time-slicing"', "",
                  "[settings.kubelet-device-plugins.nvidia.time-slicing]",
                  f"replicas = {m.replicas}", "rename-by-default = false", "fail-requests-greater-than-one = true"]
    elif m.mode == "mps":
        lines += ['device-sharing-strategy = "mps"', "",
                  "[settings.kubelet-device-plugins.nvidia.mps]", f"replicas = {m.replicas}", "rename-by-default = false"]
    elif m.mode == "mig":
        key = BOTTLEROCKET_MIG_GPU_KEY[plan.hardware.gpu.name]
        lines += ['device-partitioning-strategy = "mig"', "",
                  "[settings.kubelet-device-plugins.nvidia.mig.profile]", f'"{key}" = "{m.mig_profile}"']
    else:
        lines += ['device-sharing-strategy = "none"']
    return "\n".join(lines) + "\n"


def pool_sharing_problems(pool: Pool, sharing: Sharing, hw: Hardware | None, path: str) -> list[Problem]:
    """Bottlerocket's device plugin does the sharing on its pools, so its limits are EKS's limits there."""
    mig_profile = sharing.mig_profile
    if pool.os != "bottlerocket" or sharing.mode != "mig" or hw is None or not hw.gpu.supports_mig:
        return []
    if hw.gpu.name not in BOTTLEROCKET_MIG_GPU_KEY:
        return [Problem(f"{path}.mode", f"Bottlerocket's MIG settings do not cover {hw.gpu.name}; use os: al2023 (GPU Operator MIG manager)")]
    if mig_profile and ("+" in mig_profile or "-" in mig_profile.split("gb", 1)[1]):
        return [Problem(f"{path}.migProfile", f"{mig_profile!r}: Bottlerocket's MIG settings take plain profiles such as 1g.10gb, not media-extension variants; use os: al2023 for this profile")]
    return []


# Node metadata: IMDSv2 only; hop limit 2 so containers on the node still reach it.
IMDS_V2_ONLY = {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 2}
AUTO_INSTALLER = "gpu-operator"
# A standard EKS cluster's nodes bring no GPU device plugin of their own (EKS Auto Mode's do: gpupools.clouds.aws.auto_mode).
OWN_GPU_SOFTWARE = False
OWN_SHARING = False
CLOUD_DEVICE_PLUGIN = None
CLOUD_DRIVER_ON_HOST = False
AUTOSCALER = None  # gpupools' choice (`resolve_autoscaler`)
REFUSED_INSTALLERS = {"cloud": "'cloud' is not a mechanism of a standard EKS cluster, whose GPU nodes bring no device plugin: use 'gpu-operator' or "
                               "'device-plugin', or cluster.mode: auto-mode, whose node image brings the NVIDIA driver and device plugin"}
# The EKS GPU AMIs (AL2023 NVIDIA, Bottlerocket NVIDIA) ship the driver and the container toolkit, so the GPU Operator
# leaves both off.
IMAGE_BRINGS_DRIVER = True


def driver_installer(installer: str, os: str | None) -> str | None:
    """Who installs a pool's NVIDIA driver, in the plan's words; None: the GPU Operator. On EKS the GPU AMI does, whatever
    the installer. The AL2023 NVIDIA AMI loads NVIDIA's open kernel modules for every GPU of its
    nvidia-open-supported-devices list (awslabs/amazon-eks-ami @81fec2e8 templates/al2023/runtime/gpu/nvidia-kmod-load.sh),
    B200, B300 and RTX PRO 6000 among them (nvidia-open-supported-devices-580.txt)."""
    if os == "bottlerocket":
        return "Bottlerocket's NVIDIA variant (its own driver build)"
    return "the EKS AL2023 NVIDIA AMI"


# The EKS GPU AMIs bring the NVIDIA container toolkit beside the driver.
IMAGE_BRINGS_TOOLKIT = True
# Pods of the system-*-critical priority classes run outside kube-system without a quota for them.
CRITICAL_PODS_NEED_QUOTA = False
# Admission webhooks' namespaceSelector is the chart's to set.
OWNS_WEBHOOK_NAMESPACE_SELECTOR = False


def image_device_plugin(os: str | None) -> bool:
    """Bottlerocket's NVIDIA variants bring their own device plugin (and no GPU Operator platform)."""
    return os == "bottlerocket"
