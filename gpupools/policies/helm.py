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

from gpupools.policies._fleet import HELM_RELEASE, _chart_name
from gpupools.policies._props import get, is_unknown

OFFICIAL_REPOSITORIES: dict[str, str] = {
    "gpu-operator": "https://helm.ngc.nvidia.com/nvidia",
    "nvidia-device-plugin": "https://nvidia.github.io/k8s-device-plugin",
    "kube-prometheus-stack": "https://prometheus-community.github.io/helm-charts",
    "dcgm-exporter": "https://nvidia.github.io/dcgm-exporter/helm-charts",
    "hami": "https://project-hami.github.io/HAMi/",
}

# An exact SemVer 2 version, with or without the leading v that some charts use (v26.7.0).
EXACT_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?\Z")


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
