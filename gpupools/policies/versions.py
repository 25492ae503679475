"""Kubernetes versions: a cluster or node pool on a minor past its service's standard support.

Past standard support a cluster gets no more patches for free: EKS bills extended support at several times the
standard rate, AKS needs the Premium tier's long-term support, GKE moves it to the Extended channel or upgrades
it. The tables are gpupools' own (`gpupools.clouds.<cloud>.KUBERNETES_RELEASES`, with their sources), so the
policy and `gpupools plan` agree. Advisory: running on extended support can be a decision; the report says until
when it lasts.
"""

from __future__ import annotations

from datetime import date

from gpupools.clouds.registry import cloud_module
from gpupools.clouds.common import minor_key, newest
from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from gpupools.policies._props import get, is_unknown

# type token -> (cloud, property path holding the version)
VERSIONED = {
    "aws:eks/cluster:Cluster": ("aws", ("version",)),
    "aws:eks/nodeGroup:NodeGroup": ("aws", ("version",)),
    "azure-native:containerservice:ManagedCluster": ("azure", ("kubernetesVersion",)),
    "azure-native:containerservice:AgentPool": ("azure", ("orchestratorVersion",)),
    "gcp:container/cluster:Cluster": ("gcp", ("minMasterVersion",)),
    "gcp:container/nodePool:NodePool": ("gcp", ("version",)),
}


def minor_of(version: str) -> str | None:
    """"1.35", "1.35.2" and "1.35.2-eks-..." / "1.35.2-gke.100" are all minor 1.35."""
    parts = version.lstrip("v").split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].split("-")[0].isdigit():
        return None
    return f"{int(parts[0])}.{int(parts[1].split('-')[0])}"


def _today(args: ResourceValidationArgs) -> date:
    as_of = args.get_config().get("asOf")
    return date.fromisoformat(as_of) if as_of else date.today()


def validate_version(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = VERSIONED.get(args.resource_type)
    if found is None:
        return
    cloud, path = found
    version = get(args.props, *path)
    if not isinstance(version, str) or is_unknown(version):
        return  # unset: the service's default, which is always supported
    minor = minor_of(version)
    module = cloud_module(cloud)
    release = module.KUBERNETES_RELEASES.get(minor or "")
    today = _today(args)
    if release is None:
        known = ", ".join(sorted(module.KUBERNETES_RELEASES, key=minor_key))
        report(f"{args.name!r} asks for Kubernetes {version}, which {module.SERVICE} does not list as supported (known: {known})", None)
    elif release.end_of_standard < today:
        extended = (f"; extended support, billed extra, ends {release.end_of_extended}" if release.end_of_extended and release.end_of_extended >= today
                    else "; no support is left")
        report(f"{args.name!r} runs Kubernetes {minor}, past {module.SERVICE} standard support since {release.end_of_standard}{extended}; "
               f"upgrade to {newest(module.KUBERNETES_RELEASES)}", None)


kubernetes_version_supported = ResourceValidationPolicy(
    name="kubernetes-version-supported",
    description="Clusters and node pools run a Kubernetes minor that is still in its service's standard support.",
    enforcement_level=EnforcementLevel.ADVISORY,
    config_schema=PolicyConfigSchema(properties={
        "asOf": {"type": "string", "format": "date", "default": "",
                 "description": "Judge support as of this date (YYYY-MM-DD) instead of today, e.g. to see what expires before a freeze."},
    }),
    validate=validate_version,
)

POLICIES = [kubernetes_version_supported]
