"""Helm releases: one exact chart version from the chart's official repository.

A floating version (or none) means the next `pulumi up` may install a chart nobody reviewed, and a chart of
the right name from another repository is a supply-chain hole. The expected repository of every chart the
stack may install is listed once, in `OFFICIAL_REPOSITORIES` below: when gpupools learns a new chart (for
example in `gpupools/monitoring.py`), add its name and repository here; tests/test_policies_helm.py fails
when a `Chart` in gpupools disagrees with this table.
"""

from __future__ import annotations

import re

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from gpupools.policies._readback import HELM_RELEASE, _chart_name
from gpupools.policies._props import get, is_unknown

OFFICIAL_REPOSITORIES: dict[str, str] = {
    "gpu-operator": "https://helm.ngc.nvidia.com/nvidia",
    "nvidia-device-plugin": "https://nvidia.github.io/k8s-device-plugin",
    "kube-prometheus-stack": "https://prometheus-community.github.io/helm-charts",
    "dcgm-exporter": "https://nvidia.github.io/dcgm-exporter/helm-charts",
    "hami": "https://project-hami.github.io/HAMi/",
    # An OCI registry: the release names the whole address as its chart (kubernetes-sigs/node-readiness-controller
    # docs/book/src/releases.md, "Helm Chart").
    "node-readiness-controller": "oci://registry.k8s.io/node-readiness-controller/charts",
    # The fabric's charts (gpupools.fabric.software): aws/eks-charts for the EFA device plugin (EKS user guide `node-efa`),
    # NVIDIA's NGC repository for the Network Operator (Azure/aks-rdma-infiniband tests/setup-infra/deploy-aks.sh), and
    # JobSet's OCI registry (kubernetes-sigs/jobset site/content/en/docs/installation/_index.md).
    "aws-efa-k8s-device-plugin": "https://aws.github.io/eks-charts",
    "network-operator": "https://helm.ngc.nvidia.com/nvidia",
    "jobset": "oci://registry.k8s.io/jobset/charts",
    # NVIDIA's DRA driver for rack-scale pools (gpupools.fabric.computedomain), at its OCI home (kubernetes-sigs/
    # dra-driver-nvidia-gpu v0.4.1 docs/install.md, "Install the chart").
    "dra-driver-nvidia-gpu": "oci://registry.k8s.io/dra-driver-nvidia/charts",
}

# The oldest chart release that may be installed, per chart, and why. A chart below it ships a component with a
# known container escape, or cannot run what gpupools configures. Sources:
# - gpu-operator: NVIDIA's GPU Operator CVE table (NVIDIA/cloud-native-docs, gpu-operator/security.rst) sets the
#   floors 24.6.2 (CVE-2024-0132, CVE-2024-0133: Container Toolkit 1.16.2; bulletin a_id 5582), 24.9.0
#   (CVE-2024-0134: toolkit 1.17.0; a_id 5585), 24.9.1 (CVE-2024-0135/0136/0137: toolkit 1.17.3; a_id 5599) and
#   24.9.2 (CVE-2025-23359, the bypass of the 0132 fix: toolkit 1.17.4; a_id 5616); NVIDIA's bulletin of July 2025
#   (nvidia.custhelp.com a_id 5659) raises it to 25.3.1 (CVE-2025-23266 "NVIDIAScape", CVE-2025-23267: toolkit
#   1.17.8; every GPU Operator up to 25.3.0 is affected).
# - nvidia-device-plugin: no advisory; the device plugin ships no container runtime hook. 0.15.0 is the first
#   release that reads the `sharing.mps` section gpupools writes into its config (the project's CHANGELOG,
#   "v0.15.0-rc.1: Add support for MPS sharing"); an older one would fail on the config at start.
MINIMUM_VERSIONS: dict[str, tuple[str, str]] = {
    "gpu-operator": ("v25.3.1", "CVE-2025-23266 and CVE-2025-23267 (NVIDIA Container Toolkit before 1.17.8, GPU Operator up to "
                                "25.3.0; NVIDIA security bulletin 5659), after CVE-2024-0132, CVE-2024-0134 and CVE-2025-23359"),
    "nvidia-device-plugin": ("0.15.0", "releases before 0.15.0 cannot read the sharing config gpupools writes (MPS arrived in 0.15.0)"),
}

# An exact SemVer 2 version, with or without the leading v that some charts use (v26.7.0).
EXACT_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?\Z")


def version_key(version: str) -> tuple:
    """SemVer order of `v?X.Y.Z[-pre]`: a pre-release sorts before its release."""
    core, _, pre = version.lstrip("v").split("+")[0].partition("-")
    return (*(int(p) for p in core.split(".")), 0 if pre else 1)


def below_minimum(chart: str | None, version: str) -> tuple[str, str] | None:
    """The minimum and its reason when `version` of `chart` is older than the table allows."""
    floor = MINIMUM_VERSIONS.get(chart or "")
    if floor is None or not EXACT_VERSION.match(version):
        return None
    return floor if version_key(version) < version_key(floor[0]) else None


def _same_repo(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def validate_release(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != HELM_RELEASE:
        return
    chart = get(args.props, "chart")
    version = get(args.props, "version")
    name = _chart_name(chart)
    if not is_unknown(version):
        if not isinstance(version, str) or not version:
            report(f"release {args.name!r} (chart {chart!r}) pins no chart version; set version to an exact release such as 1.2.3", None)
        elif not EXACT_VERSION.match(version):
            report(f"release {args.name!r} (chart {chart!r}) version {version!r} is a range, not one release; pin an exact version", None)
        elif (floor := below_minimum(name, version)) is not None:
            report(f"release {args.name!r} (chart {chart!r}) version {version!r} is older than {floor[0]}, the oldest allowed: {floor[1]}", None)
    if is_unknown(chart) or name is None:
        return
    repo = get(args.props, "repositoryOpts", "repo")
    if is_unknown(repo):
        return
    if isinstance(chart, str) and chart.startswith("oci://"):
        repo = chart.rsplit("/", 1)[0]
    expected = OFFICIAL_REPOSITORIES.get(name)
    if expected is None:
        if not isinstance(repo, str) or not repo.startswith(("https://", "oci://")):
            report(f"release {args.name!r}: chart {chart!r} comes from {repo!r}; charts must come from an https or oci repository", None)
        return
    if not isinstance(repo, str) or not _same_repo(repo, expected):
        report(f"release {args.name!r}: chart {name!r} must come from its official repository {expected}, not {repo!r}", None)


helm_release_pinned = ResourceValidationPolicy(
    name="helm-release-pinned",
    description="Helm releases pin an exact chart version and install known charts from their official repositories.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_release,
)

POLICIES = [helm_release_pinned]
