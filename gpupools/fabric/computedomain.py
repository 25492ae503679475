"""ComputeDomains on rack-scale pools (GB200/GB300 NVL72): NVIDIA's DRA driver, its device classes, the ComputeDomain
a multi-node job runs in, and the claims Kueue can count.

The GPUs of an NVL72 rack share one NVLink domain across nodes, and a pod reaches the GPUs of other nodes through an
IMEX channel. NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1) hands those out: a `ComputeDomain`
(resource.nvidia.com/v1beta1) makes its controller start IMEX daemons on the nodes the job's pods land on and write a
ResourceClaimTemplate the pods claim a channel from (docs/install.md, "ComputeDomains"). GPUs themselves stay with the
device plugin the stack already runs (the GPU Operator's, NVIDIA's chart, or the cloud's): the chart refuses GPU
allocation beside a device plugin on the same node until KEP-5004 is GA (deployments/helm/dra-driver-nvidia-gpu/
templates/validation.yaml), and that is how AWS and Google install it for these nodes (EKS user guide
ml-eks-nvidia-ultraserver.adoc "Install the NVIDIA DRA driver": `resources.gpus.enabled=false`; cluster-toolkit v1.95.0
examples/gke-a4x/nvidia-dra-driver.yaml).

Pure: plain data for the software plan (`dra_driver_release`), Kueue (`QUEUE_RESOURCE`, `device_class_mapping`), the
landing check (`served_device_classes`, `claim_problems`) and `gpupools workload` (`compute_domain`, `channel_claim_template`).
"""

from __future__ import annotations

from gpupools.core.catalog import load_catalog
from gpupools.core.pools import POOL_LABEL, PoolPlan
from gpupools.core.sharing import resolve_installer
from gpupools.pools.software import GPU_OPERATOR, Chart, Release, SoftwarePlan, gpu_tolerations, namespace
from gpupools.stack.config import StackConfig
from gpupools.stack.errors import Problem

# The chart at its official OCI home (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 docs/install.md, "Install the chart":
# `helm install dra-driver-nvidia-gpu oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu --namespace
# dra-driver-nvidia-gpu`), pinned; its image is registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v<appVersion>
# (values.yaml image.repository, the tag left to the chart).
CHART = Chart("dra-driver-nvidia-gpu", "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu", "",
              "dra-driver-nvidia-gpu", "0.4.1")
IMAGE = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu"
# The driver's image is built for both architectures (v0.4.1 deployments/container/Makefile line 47:
# DOCKER_BUILD_PLATFORM_OPTIONS = --platform=linux/amd64,linux/arm64), so the same DaemonSet runs on Grace (arm64) hosts.
MULTI_ARCH_IMAGES = {IMAGE: ("linux/amd64", "linux/arm64")}

# What the chart registers with computeDomains on (templates/deviceclass-compute-domain-*.yaml): the IMEX daemons'
# class, which the controller's own claims use, and the channel class a workload claims, both served by the driver
# `compute-domain.nvidia.com`. With GPU allocation on it would add gpu.nvidia.com, mig.nvidia.com and
# vfio.gpu.nvidia.com (templates/deviceclass-{gpu,mig,vfio-gpu}.yaml), served by the driver `gpu.nvidia.com`.
CD_DRIVER = "compute-domain.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
DAEMON_CLASS = "compute-domain-daemon.nvidia.com"
GPU_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com")

CD_API = "resource.nvidia.com/v1beta1"
RESOURCE_API = "resource.k8s.io/v1"
# The ComputeDomain's own channel settings (crds/resource.nvidia.com_computedomains.yaml, spec.channel.allocationMode,
# default Single: one channel, channel 0, per pod).
CHANNEL_REQUEST = "channel"
# The node label GPU Feature Discovery sets to <ClusterUUID>.<CliqueID>, the GPUs of one NVLink partition of a rack
# (v0.4.1 docs/install.md "ComputeDomains": `nvidia.com/gpu.clique`); AWS keeps a job's pods in one clique with pod
# affinity on it (EKS user guide ml-eks-nvidia-ultraserver.adoc, the nvbandwidth test's podAffinity, topologyKey
# nvidia.com/gpu.clique).
CLIQUE_LABEL = "nvidia.com/gpu.clique"

# The queue resource a pod's channel counts as: Kueue maps each DeviceClass a claim names to a resource of the
# ClusterQueue (kueue v0.19.2 apis/config/v1beta2/configuration_types.go, Resources.DeviceClassMappings), and a
# workload whose claim names an unmapped class is inadmissible ("DeviceClass %s is not mapped in DRA configuration",
# pkg/dra/claims.go). One channel per pod.
QUEUE_RESOURCE = "nvidia.com/compute-domain-channel"

# nvidiaDriverRoot: where the kubelet plugin finds the NVIDIA driver (values.yaml line 23; docs/install.md, "Optional:
# Configure Helm values": `/run/nvidia/driver` where the GPU Operator manages the driver, `/home/kubernetes/bin/nvidia`
# on GKE, `/` for a driver installed on the host).
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"
GKE_DRIVER_ROOT = "/home/kubernetes/bin/nvidia"
HOST_DRIVER_ROOT = "/"


def rack_scale(plan: PoolPlan) -> bool:
    """A pool of NVL72 rack nodes (catalog.yaml nvlinkDomain): its multi-node jobs need a ComputeDomain."""
    return plan.hardware.gpu.nvlink_domain is not None


def rack_pools(plans: list[PoolPlan]) -> list[PoolPlan]:
    return [p for p in plans if rack_scale(p)]


def host_arch(stack: StackConfig, plan: PoolPlan) -> str:
    """The pool's host CPU architecture (catalog.yaml arch): arm64 on Grace hosts."""
    row = load_catalog().instance(stack.cloud, plan.pool.instance_type)
    return row.arch if row is not None else "x86_64"


def driver_root(stack: StackConfig, plan: PoolPlan) -> str:
    """Where the pool's NVIDIA driver is, by who installs it: the GPU Operator's driver container, GKE's installer
    (CLOUD_DRIVER_ON_HOST: /home/kubernetes/bin/nvidia, where the DCGM exporter also mounts it), or the node image."""
    installer = resolve_installer(stack.target, stack.gpu_software.installer)
    if stack.target.driver_installer(installer, plan.pool.os) is None:
        return OPERATOR_DRIVER_ROOT
    if stack.target.CLOUD_DRIVER_ON_HOST and installer == "cloud":
        return GKE_DRIVER_ROOT
    return HOST_DRIVER_ROOT


def driver_roots(stack: StackConfig, plans: list[PoolPlan]) -> dict[str, str]:
    return {p.name: driver_root(stack, p) for p in rack_pools(plans)}


def dra_driver_values(stack: StackConfig, plans: list[PoolPlan]) -> dict:
    """ComputeDomains on, GPU allocation off (the device plugin keeps serving nvidia.com/gpu), the kubelet plugin on the
    rack pools only, tolerating what every GPU DaemonSet tolerates there (the GPU taint, readiness, the cloud's)."""
    rack = rack_pools(plans)
    # One root for the release: who installs the driver is decided per stack (installer) and per cloud, so the rack pools
    # of one stack share it.
    roots = sorted(set(driver_roots(stack, plans).values()))
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": sorted(p.name for p in rack)}]}]}}}
    return {
        "nvidiaDriverRoot": roots[0],
        "resources": {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}},
        "kubeletPlugin": {"tolerations": gpu_tolerations(stack, rack), "affinity": affinity},
    }


def dra_driver_release(stack: StackConfig, plans: list[PoolPlan]) -> Release | None:
    """The chart where the stack has a rack-scale pool; None otherwise (nothing changes for other stacks)."""
    if not rack_pools(plans):
        return None
    return Release(CHART, CHART.default_version, dra_driver_values(stack, plans))


def with_dra_driver(software: SoftwarePlan, stack: StackConfig, plans: list[PoolPlan]) -> SoftwarePlan:
    """The GPU software plus the DRA driver, in its own namespace (its kubelet plugin is privileged: values.yaml
    kubeletPlugin.containers.*.securityContext). Beside the GPU Operator, its ClusterPolicy says CDI on in so many words:
    the driver hands its channels to containers through CDI, and the operator is what turns CDI on in the runtime
    (NVIDIA/cloud-native-docs @66160ebc gpu-operator/dra-intro-install.rst, "Installing GPU Operator ... configures ...
    Container Device Interface (CDI) enabled in the underlying container runtime"); its chart's default is on today
    (gpu-operator v26.7.0 values.yaml `cdi.enabled: true`), and `operator_problems` holds the two to each other."""
    release = dra_driver_release(stack, plans)
    if release is not None:
        software.objects.append(namespace(CHART.namespace, privileged=True))
        software.releases.append(release)
        for operator in (r for r in software.releases if r.chart == GPU_OPERATOR):
            operator.values.setdefault("cdi", {})["enabled"] = True
    return software


def operator_driver_root(operator_values: dict) -> str:
    """Where the GPU Operator's ClusterPolicy has the driver: its driver container's root (`hostPaths.driverInstallDir`,
    default /run/nvidia/driver: gpu-operator v26.7.0 values.yaml) when it installs the driver, else the host's `/` (the
    pre-installed driver of the node image: NVIDIA/cloud-native-docs @66160ebc gpu-operator/dra-intro-install.rst, "With
    GPU Operator-managed drivers (default), drivers are installed to /run/nvidia/driver. If you are using pre-installed
    drivers, remove the nvidiaDriverRoot flag or set it to /"), unless hostPaths names another place."""
    install_dir = (operator_values.get("hostPaths") or {}).get("driverInstallDir")
    if (operator_values.get("driver") or {}).get("enabled", True):
        return install_dir or OPERATOR_DRIVER_ROOT
    return install_dir if install_dir and install_dir != OPERATOR_DRIVER_ROOT else HOST_DRIVER_ROOT


def operator_problems(operator_values: dict, dra_values: dict) -> list[str]:
    """Where the GPU Operator's values and the DRA driver's disagree: the driver root the kubelet plugin mounts, and CDI,
    which the DRA driver needs in the container runtime (cloud-native-docs dra-intro-install.rst, "Prerequisites": "An
    underlying container runtime that supports CDI and is configured to use CDI for injecting DRA-allocated devices")."""
    problems = []
    root, dra_root = operator_driver_root(operator_values), dra_values.get("nvidiaDriverRoot", HOST_DRIVER_ROOT)
    if dra_root != root:
        problems.append(f"the DRA driver's nvidiaDriverRoot is {dra_root} but the GPU Operator has the driver at {root}: its kubelet "
                        f"plugin would find no driver")
    if not (operator_values.get("cdi") or {}).get("enabled", True):
        problems.append("the GPU Operator has cdi.enabled false: the DRA driver hands devices to containers through CDI only")
    return problems


def gpu_allocation_problems(wanted: bool) -> list[Problem]:
    """GPU allocation through the DRA driver (`gpuSoftware.draGpuAllocation`): every gpupools pool's GPUs come from a
    device plugin (the GPU Operator's, NVIDIA's chart or the cloud's), and the driver cannot allocate GPUs beside one on
    the same node until KEP-5004 (DRAExtendedResource) is GA: the chart fails to render (templates/validation.yaml,
    `resources.gpus.enabled` without `gpuResourcesEnabledOverride`)."""
    if not wanted:
        return []
    return [Problem("gpuSoftware.draGpuAllocation", "true: NVIDIA's DRA driver cannot allocate GPUs on nodes whose GPUs a device plugin "
                                                    "serves (dra-driver-nvidia-gpu 0.4.1 templates/validation.yaml, until KEP-5004 is GA), "
                                                    "and every gpupools pool's GPUs come from one; leave it false: the DRA driver serves "
                                                    "ComputeDomains only; a pool takes its GPUs from it with sharing: {mode: dra} (a preview)")]


def served_device_classes(values: dict) -> dict[str, str]:
    """The DeviceClasses a release of the chart registers, each with the DRA driver that serves it (the chart's
    templates/deviceclass-*.yaml gate each on its resource's `enabled`)."""
    resources = values.get("resources") or {}
    out: dict[str, str] = {}
    if (resources.get("computeDomains") or {}).get("enabled", True):
        out.update({CHANNEL_CLASS: CD_DRIVER, DAEMON_CLASS: CD_DRIVER})
    if (resources.get("gpus") or {}).get("enabled", True):
        out.update({name: "gpu.nvidia.com" for name in GPU_CLASSES})
    return out


def plugin_pools(values: dict) -> frozenset[str]:
    """The pools the release's kubelet plugin runs on, read from its node affinity (`dra_driver_values`)."""
    terms = (((values.get("kubeletPlugin") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    return frozenset(v for term in terms for e in term.get("matchExpressions", [])
                     if e["key"] == POOL_LABEL and e["operator"] == "In" for v in e["values"])


def imex_line(stack: StackConfig, plan: PoolPlan) -> str:
    """What the plan says about IMEX on a rack pool. The DRA driver runs the IMEX daemons itself, one DaemonSet per
    ComputeDomain; a host's own nvidia-imex.service must be off (v0.4.1 docs/prerequisites.md, "ComputeDomains additional
    prerequisites": `systemctl disable --now nvidia-imex.service && systemctl mask nvidia-imex.service` wherever the
    nvidia-imex packages are installed)."""
    root = driver_root(stack, plan)
    if root == OPERATOR_DRIVER_ROOT:
        host = "the GPU Operator's driver container brings no nvidia-imex.service to the host"
    elif root == GKE_DRIVER_ROOT:
        host = "GKE's driver installer puts the driver under /home/kubernetes/bin/nvidia and starts no nvidia-imex.service"
    else:
        # awslabs/amazon-eks-ami templates/al2023/provisioners/install-nvidia-driver.sh: `dnf install nvidia-imex-<branch>`,
        # then `systemctl enable` of nvidia-fabricmanager and nvidia-persistenced only.
        host = ("the node image's own nvidia-imex.service must stay off: the EKS AL2023 NVIDIA AMI installs nvidia-imex and enables "
                "only nvidia-fabricmanager and nvidia-persistenced")
    return (f"IMEX: the DRA driver starts IMEX daemons per ComputeDomain on the nodes its pods use ({host}); nvidiaDriverRoot "
            f"{root}")


def compute_domain_line(stack: StackConfig, plan: PoolPlan) -> str:
    """What the plan says of a rack-scale pool: its NVLink domain, how a job reaches across it, and IMEX."""
    gpu = plan.hardware.gpu
    together = (f"stay in one clique ({CLIQUE_LABEL}, from GPU Feature Discovery)" if clique_labelled(plan) else
                f"are kept in one NVLink domain by the pool's placement alone (its device plugin runs no GPU Feature Discovery, so no "
                f"node carries {CLIQUE_LABEL})")
    return (f"{gpu.nvlink_domain} GPUs per NVLink domain ({gpu.nvlink_domain // plan.hardware.gpus_per_node} nodes); multi-node jobs "
            f"run in a ComputeDomain of NVIDIA's DRA driver (chart {CHART.chart} {CHART.default_version}: ComputeDomains on, "
            f"GPU allocation off, the device plugin keeps nvidia.com/gpu), their pods claim its IMEX channel "
            f"({CHANNEL_CLASS}) and {together}; {imex_line(stack, plan)}")


# --------------------------------------------------------------------------------------------------------------------
# Claims and the ComputeDomain of a multi-node job


def claim_problems(template: dict, path: str) -> list[Problem]:
    """What Kueue refuses in a ResourceClaimTemplate a queued pod claims: `allocationMode: All` ("AllocationMode 'All'
    is not supported", kueue v0.19.2 pkg/dra/claims.go, the `DeviceAllocationModeAll` case), and `adminAccess`
    ("AdminAccess is not supported", same switch), each making the workload inadmissible."""
    problems = []
    requests = ((((template.get("spec") or {}).get("spec") or {}).get("devices") or {}).get("requests")) or []
    for i, request in enumerate(requests):
        exactly = request.get("exactly") or {}
        where = f"{path}.spec.spec.devices.requests[{i}].exactly"
        if exactly.get("allocationMode") == "All":
            problems.append(Problem(f"{where}.allocationMode", "All: Kueue refuses claims for all matching devices (kueue v0.19.2 "
                                                              "pkg/dra/claims.go: \"AllocationMode 'All' is not supported\"); use "
                                                              "ExactCount with the count the pod needs"))
        if exactly.get("adminAccess"):
            problems.append(Problem(f"{where}.adminAccess", "Kueue refuses claims with admin access (kueue v0.19.2 pkg/dra/claims.go: "
                                                            "\"AdminAccess is not supported\")"))
    return problems


def channel_template_name(domain: str) -> str:
    return f"{domain}-channel"


def compute_domain(name: str, namespace: str | None) -> dict:
    """A ComputeDomain for one job, in the job's namespace (ComputeDomains isolate per namespace, and the controller writes
    the channel template there). numNodes 0: deprecated, and 0 is what the CRD recommends (crds/resource.nvidia.com_
    computedomains.yaml, spec.numNodes); the IMEX domain then follows the pods wherever they land."""
    metadata: dict = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": CD_API, "kind": "ComputeDomain", "metadata": metadata,
            "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": channel_template_name(name)}}}}


def channel_claim_template(domain: dict) -> dict:
    """The ResourceClaimTemplate the ComputeDomain controller writes for `domain` (v0.4.1 templates/compute-domain-workload-
    claim-template.tmpl.yaml, cmd/compute-domain-controller/resourceclaimtemplate.go WorkloadResourceClaimTemplateManager):
    one request `channel` of the default channel class, with the channel config naming the domain. The controller makes it
    itself (and would fail to if it existed), so `gpupools workload` shows it as a comment; the domain's UID is only known
    once the ComputeDomain exists."""
    metadata: dict = {"name": domain["spec"]["channel"]["resourceClaimTemplate"]["name"]}
    if domain["metadata"].get("namespace"):
        metadata["namespace"] = domain["metadata"]["namespace"]
    return {"apiVersion": RESOURCE_API, "kind": "ResourceClaimTemplate", "metadata": metadata,
            "spec": {"spec": {"devices": {
                "requests": [{"name": CHANNEL_REQUEST, "exactly": {"deviceClassName": CHANNEL_CLASS}}],
                "config": [{"requests": [CHANNEL_REQUEST], "opaque": {"driver": CD_DRIVER, "parameters": {
                    "apiVersion": CD_API, "kind": "ComputeDomainChannelConfig",
                    "domainID": f"<uid of ComputeDomain {domain['metadata']['name']}>",
                    "allocationMode": domain["spec"]["channel"].get("allocationMode", "Single")}}}]}}}}


CLAIM_NAME = "imex-channel"
# The label that ties a job's pods together for their clique affinity: the ComputeDomain's (and the job's) name.
CD_LABEL = "gpupools.io/compute-domain"


# The device plugins whose deployment runs GPU Feature Discovery, the source of the clique label: the GPU Operator's (gfd
# enabled by default: NVIDIA/gpu-operator v26.7.0 values.yaml `gfd.enabled: true`) and NVIDIA's chart, where gpupools
# turns GFD on (`pools.software.device_plugin_values`). A cloud's own device plugin (GKE's), Bottlerocket's and HAMi's
# label no clique.
GFD_INSTALLERS = ("gpu-operator", "device-plugin")


def clique_labelled(plan: PoolPlan) -> bool:
    """Whether the pool's nodes carry `nvidia.com/gpu.clique`, which the job's pod affinity needs to be met at all."""
    return plan.mechanism.installer in GFD_INSTALLERS


def with_channel(pod_template: dict, domain: dict, job_label: tuple[str, str], clique: bool = True) -> dict:
    """The pod template claiming the domain's channel in every container, its pods kept in one NVLink clique: pod affinity
    to the job's own pods on `nvidia.com/gpu.clique`, as AWS's example keeps them (EKS user guide ml-eks-nvidia-ultraserver,
    the nvbandwidth test's podAffinity). `clique` False where nothing labels the clique (`clique_labelled`): a required
    affinity on a label no node has would never be met, and the pool's placement alone keeps the nodes in one domain."""
    spec = pod_template["spec"]
    spec["resourceClaims"] = [{"name": CLAIM_NAME, "resourceClaimTemplateName": domain["spec"]["channel"]["resourceClaimTemplate"]["name"]}]
    for container in spec["containers"]:
        container.setdefault("resources", {})["claims"] = [{"name": CLAIM_NAME}]
    key, value = job_label
    pod_template.setdefault("metadata", {}).setdefault("labels", {})[key] = value
    if clique:
        spec.setdefault("affinity", {})["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {key: value}}, "topologyKey": CLIQUE_LABEL}]}
    return pod_template


def pod_claim_templates(pod: dict) -> list[str]:
    """The ResourceClaimTemplates a pod spec claims from (Kueue reads only these: a claim by name makes the workload
    inadmissible, kueue v0.19.2 site/content/en/docs/concepts/dynamic_resource_allocation.md, "Limitations")."""
    return [c["resourceClaimTemplateName"] for c in pod.get("resourceClaims") or [] if c.get("resourceClaimTemplateName")]
