"""Cluster hardening: the CIS-benchmark controls of the clusters a stack creates (API endpoint, Secrets encryption,
control-plane audit logs, access management, managed add-ons).

Each policy judges the cluster resources themselves, so a stack that changes a default is caught whatever
changed it. A stack that turns a control off on purpose names its cluster in the policy's `exceptions`; the
policy then answers "not applicable" with that reason, which `gpupools check` prints as a note.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy, \
    StackValidationArgs, StackValidationPolicy

from gpupools.clouds.aws import CORE_ADDONS, DEFAULT_LOG_RETENTION_DAYS, DEFAULT_LOG_TYPES, POD_IDENTITY_AGENT
from gpupools.clouds.common import too_open
from gpupools.clouds.gcp import PRODUCTION_LABEL
from gpupools.stack.config import EKS_LOG_TYPES, GKE_RELEASE_CHANNELS as RELEASE_CHANNELS

from gpupools.policies._readback import AKS_CLUSTER, EKS_CLUSTER, GKE_CLUSTER
from gpupools.policies._props import get, is_unknown, items

EKS_ADDON = "aws:eks/addon:Addon"
KMS_KEY = "aws:kms/key:Key"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"

EXCEPTIONS = {"exceptions": {"type": "array", "items": {"type": "string"}, "default": [],
                             "description": "Clusters (by cluster name) that turn this control off on purpose."}}


def cluster_name(props: Any, fallback: str) -> str:
    """The cluster's own name as the cloud knows it (what `gpupools:cluster.name` says), else the resource's name."""
    name = get(props, "resourceName") or get(props, "name")
    return name if isinstance(name, str) and name else fallback


def excepted(args: Any, name: str) -> None:
    """Answer "not applicable" for a cluster the policy config lists as a deliberate exception."""
    if name in (args.get_config().get("exceptions") or []):
        args.not_applicable(f"cluster {name!r} is listed in this policy's exceptions: the control is off on purpose")


def _schema(**extra: dict) -> PolicyConfigSchema:
    return PolicyConfigSchema(properties={**EXCEPTIONS, **extra})


def cluster_policy(name: str, description: str, validate, **config: dict) -> ResourceValidationPolicy:
    """A mandatory resource policy with an `exceptions` list (and any further config)."""
    return ResourceValidationPolicy(name=name, description=description, enforcement_level=EnforcementLevel.MANDATORY,
                                    config_schema=_schema(**config), validate=validate)


SERVICES = {EKS_CLUSTER: "EKS", AKS_CLUSTER: "AKS", GKE_CLUSTER: "GKE"}


def judge(args: ResourceValidationArgs, report: ReportViolation, path: tuple[str, ...], ok, problem) -> None:
    """One field of a cluster: unknown or `ok(value)` passes; otherwise the cluster is reported (unless the policy's
    exceptions name it) with `problem`, a text that may quote the value as {value}, or a function of the value."""
    value = get(args.props, *path)
    if is_unknown(value) or ok(value):
        return
    name = cluster_name(args.props, args.name)
    excepted(args, name)
    text = problem(value) if callable(problem) else problem.format(value="unset" if value is None else value)
    report(f"{SERVICES[args.resource_type]} cluster {name!r} {text}", None)


def field_policy(name: str, description: str, typ: str, path: tuple[str, ...], ok, problem: str) -> ResourceValidationPolicy:
    """A policy that judges one field of one cluster type."""
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type == typ:
            judge(args, report, path, ok, problem)
    return cluster_policy(name, description, validate)


# --------------------------------------------------------------------------------------------------------------------
# cluster-endpoint-restricted


# GKE's switch that lets every Google Cloud public address reach the endpoint, counted as a range that is too wide.
GCP_PUBLIC = "every Google Cloud public IP (gcpPublicCidrsAccessEnabled)"


def _gke_ranges(props: Any) -> Any:
    networks = get(props, "masterAuthorizedNetworksConfig")
    if networks is None or is_unknown(networks):
        return networks
    blocks = [get(b, "cidrBlock") for b in items(get(networks, "cidrBlocks"))]
    return blocks + ([GCP_PUBLIC] if get(networks, "gcpPublicCidrsAccessEnabled") is True else [])


# Per cluster type: the service, the flag and the value of it that makes the endpoint private, the authorized ranges
# of a public endpoint, and the field that holds them.
ENDPOINTS = {
    EKS_CLUSTER: ("EKS", ("vpcConfig", "endpointPublicAccess"), False, lambda p: get(p, "vpcConfig", "publicAccessCidrs"),
                  "vpcConfig.publicAccessCidrs"),
    AKS_CLUSTER: ("AKS", ("apiServerAccessProfile", "enablePrivateCluster"), True,
                  lambda p: get(p, "apiServerAccessProfile", "authorizedIPRanges"), "apiServerAccessProfile.authorizedIPRanges"),
    GKE_CLUSTER: ("GKE", ("privateClusterConfig", "enablePrivateEndpoint"), True, _gke_ranges, "masterAuthorizedNetworksConfig"),
}


def validate_endpoint(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in ENDPOINTS:
        return
    service, flag_path, private_when, ranges_of, field = ENDPOINTS[args.resource_type]
    flag, ranges = get(args.props, *flag_path), ranges_of(args.props)
    if is_unknown(flag) or flag is private_when or is_unknown(ranges):
        return
    ranges = items(ranges)
    # Judged by the addresses the ranges open together, not by their spelling: 0.0.0.0/1 with 128.0.0.0/1, a few
    # /2 blocks or ::ffff:0.0.0.0/96 open as much as 0.0.0.0/0.
    share = "the whole internet" if not ranges or GCP_PUBLIC in ranges else too_open(ranges)
    if share is None:
        return
    name = cluster_name(args.props, args.name)
    excepted(args, name)
    shown = ", ".join(map(str, ranges[:8])) + (f", ... ({len(ranges)} ranges)" if len(ranges) > 8 else "")
    report(f"{service} cluster {name!r} serves its API endpoint to {share} ({field}: {shown or 'unset'}); "
           f"set gpupools:cluster authorizedCidrs to the networks that may reach it, or endpointAccess: private", None)


cluster_endpoint_restricted = cluster_policy(
    "cluster-endpoint-restricted",
    "The Kubernetes API endpoint of a cluster is private or open only to authorized networks, never to the whole internet.",
    validate_endpoint,
)

# --------------------------------------------------------------------------------------------------------------------
# eks-secrets-encryption


def _symmetric(props: Any) -> bool:
    """Only symmetric encryption keys can rotate automatically (KMS EnableKeyRotation)."""
    spec = get(props, "customerMasterKeySpec") or get(props, "keySpec")
    usage = get(props, "keyUsage")
    return spec in (None, "SYMMETRIC_DEFAULT") and usage in (None, "ENCRYPT_DECRYPT")


def _envelope_encrypted(config: Any) -> bool:
    resources = get(config, "resources")
    return is_unknown(resources) or (config is not None and "secrets" in items(resources) and bool(get(config, "provider", "keyArn")))


def validate_secrets_encryption(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props = args.resource_type, args.props
    if typ == EKS_CLUSTER:
        judge(args, report, ("encryptionConfig",), _envelope_encrypted,
              lambda _: "keeps Kubernetes Secrets in etcd without envelope encryption; set encryptionConfig (resources: [secrets], "
                        "provider.keyArn: a KMS key), which gpupools does unless cluster.secretsEncryption is false")
    elif typ == KMS_KEY and _symmetric(props):
        rotation = get(props, "enableKeyRotation")
        if not is_unknown(rotation) and rotation is not True:
            report(f"KMS key {args.name!r} does not rotate its key material; set enableKeyRotation: true", None)


eks_secrets_encryption = cluster_policy(
    "eks-secrets-encryption",
    "EKS clusters envelope-encrypt Kubernetes Secrets with a KMS key, and the stack's KMS keys rotate.",
    validate_secrets_encryption,
)

# --------------------------------------------------------------------------------------------------------------------
# eks-control-plane-logs

REQUIRED_LOG_TYPES = list(DEFAULT_LOG_TYPES)


def validate_logs(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props = args.resource_type, args.props
    required = args.get_config().get("requiredLogTypes") or []

    def missing(enabled: Any) -> list[str]:
        return [t for t in required if t not in items(enabled)]

    if typ == EKS_CLUSTER:
        judge(args, report, ("enabledClusterLogTypes",), lambda enabled: not missing(enabled),
              lambda enabled: f"does not send its {', '.join(missing(enabled))} logs to CloudWatch, so API calls and logins leave no "
                              f"trace; add them to enabledClusterLogTypes (gpupools:cluster controlPlaneLogs)")
    elif typ == LOG_GROUP:
        group = get(props, "name")
        if isinstance(group, str) and group.startswith("/aws/eks/") and group.endswith("/cluster"):
            retention = get(props, "retentionInDays")
            least = args.get_config().get("minRetentionDays", DEFAULT_LOG_RETENTION_DAYS)
            if not is_unknown(retention) and not retention:
                report(f"log group {group!r} keeps EKS control-plane logs forever; set retentionInDays (gpupools:cluster logRetentionDays)", None)
            elif isinstance(retention, (int, float)) and not isinstance(retention, bool) and retention < least:
                # A day or a week of audit logs is gone before most incidents are noticed.
                report(f"log group {group!r} keeps EKS control-plane logs {retention:g} days, fewer than the {least} an investigation "
                       f"needs; raise gpupools:cluster logRetentionDays (or this policy's minRetentionDays)", None)


eks_control_plane_logs = cluster_policy(
    "eks-control-plane-logs",
    "EKS clusters send their API server, audit and authenticator logs to CloudWatch, into a log group with a retention.",
    validate_logs,
    requiredLogTypes={
        "type": "array", "items": {"type": "string", "enum": list(EKS_LOG_TYPES)},
        "default": REQUIRED_LOG_TYPES, "description": "Control-plane log types every EKS cluster must enable."},
    minRetentionDays={"type": "integer", "minimum": 1, "default": DEFAULT_LOG_RETENTION_DAYS,
                      "description": "The fewest days the control-plane log group may keep logs (gpupools' default retention)."},
)

# --------------------------------------------------------------------------------------------------------------------
# eks-access-entries


eks_access_entries = field_policy(
    "eks-access-entries",
    "EKS clusters manage access with access entries only (authenticationMode API), not the aws-auth ConfigMap.",
    EKS_CLUSTER, ("accessConfig", "authenticationMode"), lambda mode: mode == "API",
    "authenticates through the aws-auth ConfigMap (authenticationMode {value}), which anyone who can edit one ConfigMap can use to grant "
    "cluster admin; set accessConfig.authenticationMode: API (access entries)")

# --------------------------------------------------------------------------------------------------------------------
# eks-managed-addons

REQUIRED_ADDONS = [*CORE_ADDONS, POD_IDENTITY_AGENT]


def validate_addons(args: StackValidationArgs, report: ReportViolation) -> None:
    addons = [r for r in args.resources if r.resource_type == EKS_ADDON]
    skipped = []
    for cluster in (r for r in args.resources if r.resource_type == EKS_CLUSTER):
        name = cluster_name(cluster.props, cluster.name)
        if name in (args.get_config().get("exceptions") or []):
            skipped.append(name)
            continue
        if get(cluster.props, "computeConfig", "enabled") is True:
            continue  # EKS Auto Mode runs the VPC CNI, kube-proxy, CoreDNS and the Pod Identity agent itself, not as add-ons
        # An add-on of a cluster still being created names it by an unknown value; it belongs to the cluster beside it.
        present = {get(a.props, "addonName") for a in addons if get(a.props, "clusterName") in (name,) or is_unknown(get(a.props, "clusterName"))}
        missing = [a for a in args.get_config().get("requiredAddons") or [] if a not in present]
        if missing:
            report(f"EKS cluster {name!r} does not run {', '.join(missing)} as EKS managed add-ons, so nobody updates them with the cluster; "
                   f"add aws:eks/addon resources (gpupools does unless cluster.managedAddons is false)", cluster.urn)
    if skipped:
        # Last, so that every other cluster of the stack has been judged first.
        args.not_applicable(f"cluster {', '.join(map(repr, skipped))} is listed in this policy's exceptions: the control is off on purpose")


eks_managed_addons = StackValidationPolicy(
    name="eks-managed-addons",
    description="EKS clusters run vpc-cni, kube-proxy, CoreDNS and the Pod Identity agent as EKS managed add-ons.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_schema(requiredAddons={"type": "array", "items": {"type": "string"}, "default": REQUIRED_ADDONS,
                                          "description": "Managed add-ons every EKS cluster of the stack must have."}),
    validate=validate_addons,
)

# --------------------------------------------------------------------------------------------------------------------
# aks-entra-id-rbac


def validate_entra_id(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != AKS_CLUSTER:
        return
    props = args.props
    name = cluster_name(props, args.name)
    problems = []
    local = get(props, "disableLocalAccounts")
    if not is_unknown(local) and local is not True:
        problems.append("keeps local accounts (disableLocalAccounts is not true), whose static admin credential bypasses Entra ID")
    for field, what in (("managed", "Entra ID integration"), ("enableAzureRBAC", "Azure RBAC")):
        value = get(props, "aadProfile", field)
        if not is_unknown(value) and value is not True:
            problems.append(f"has no {what} (aadProfile.{field} is not true)")
    if problems:
        excepted(args, name)
    for problem in problems:
        report(f"AKS cluster {name!r} {problem}; gpupools sets disableLocalAccounts: true and aadProfile managed with enableAzureRBAC "
               f"unless cluster.localAccounts is true", None)


aks_entra_id_rbac = cluster_policy(
    "aks-entra-id-rbac",
    "AKS clusters authenticate with Entra ID only (local accounts disabled) and authorize with Azure RBAC.",
    validate_entra_id,
)

# --------------------------------------------------------------------------------------------------------------------
# aks-defender-and-policy (optional)


def validate_defender_and_policy(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != AKS_CLUSTER:
        return
    config = args.get_config()
    if config.get("requireDefender"):
        judge(args, report, ("securityProfile", "defender", "securityMonitoring", "enabled"), lambda v: v is True,
              "runs without Defender for Containers (securityProfile.defender.securityMonitoring.enabled is {value}); set "
              "gpupools:cluster defenderWorkspaceId to a Log Analytics workspace")
    if config.get("requireAzurePolicy"):
        judge(args, report, ("addonProfiles", "azurepolicy", "enabled"), lambda v: v is True,
              "runs without the Azure Policy add-on (addonProfiles.azurepolicy.enabled is {value}); set gpupools:cluster azurePolicy: true")


aks_defender_and_policy = cluster_policy(
    "aks-defender-and-policy",
    "Optional (config): AKS clusters run Defender for Containers and the Azure Policy add-on.",
    validate_defender_and_policy,
    requireDefender={"type": "boolean", "default": False, "description": "Require Defender for Containers' security monitoring."},
    requireAzurePolicy={"type": "boolean", "default": False, "description": "Require the Azure Policy add-on."},
)

# --------------------------------------------------------------------------------------------------------------------
# cluster-network-policy

AKS_NETWORK_POLICIES = ("azure", "calico", "cilium")


def validate_network_policy(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ = args.resource_type
    if typ == AKS_CLUSTER:
        judge(args, report, ("networkProfile", "networkPolicy"), lambda engine: engine in AKS_NETWORK_POLICIES,
              "enforces no NetworkPolicy (networkProfile.networkPolicy is {value}), so any pod reaches any other team's pods; set it to "
              "cilium (gpupools: cluster.networkPolicy, on by default)")
    elif typ == GKE_CLUSTER:
        legacy = get(args.props, "networkPolicy", "enabled")
        judge(args, report, ("datapathProvider",), lambda datapath: datapath == "ADVANCED_DATAPATH" or legacy is True or is_unknown(legacy),
              "enforces no NetworkPolicy (datapathProvider is {value}, no networkPolicy addon), so any pod reaches any other team's "
              "pods; set datapathProvider: ADVANCED_DATAPATH (Dataplane V2; gpupools: cluster.networkPolicy)")


cluster_network_policy = cluster_policy(
    "cluster-network-policy",
    "Clusters enforce Kubernetes NetworkPolicy (AKS: networkProfile.networkPolicy azure, calico or cilium; GKE: Dataplane V2).",
    validate_network_policy,
)

# --------------------------------------------------------------------------------------------------------------------
# cluster-workload-identity


def validate_workload_identity(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ = args.resource_type
    if typ == AKS_CLUSTER:
        for path in (("securityProfile", "workloadIdentity", "enabled"), ("oidcIssuerProfile", "enabled")):
            field = ".".join(path)
            judge(args, report, path, lambda v: v is True, f"has no workload identity ({field} is {{value}}), so pods that need Azure "
                                                           f"access end up with stored secrets; set {field}: true")
    elif typ == GKE_CLUSTER:
        judge(args, report, ("workloadIdentityConfig", "workloadPool"), bool,
              "has no Workload Identity (workloadIdentityConfig.workloadPool is {value}): node pools with the GKE metadata server "
              "cannot start and pods would need service-account keys; set workloadPool: <project>.svc.id.goog")


cluster_workload_identity = cluster_policy(
    "cluster-workload-identity",
    "Clusters give pods cloud identities without stored secrets (AKS workload identity with the OIDC issuer, GKE Workload Identity).",
    validate_workload_identity,
)

# --------------------------------------------------------------------------------------------------------------------
# gke-private-nodes, gke-release-channel, gke-deletion-protection, gke-binary-authorization


gke_private_nodes = field_policy(
    "gke-private-nodes",
    "GKE nodes have no public IP addresses (private nodes).",
    GKE_CLUSTER, ("privateClusterConfig", "enablePrivateNodes"), lambda v: v is True,
    "gives its nodes public IP addresses (privateClusterConfig.enablePrivateNodes is {value}); gpupools makes them private unless "
    "cluster.privateNodes is false")

gke_release_channel = field_policy(
    "gke-release-channel",
    "GKE clusters are enrolled in a release channel, which keeps them patched.",
    GKE_CLUSTER, ("releaseChannel", "channel"), lambda v: v in RELEASE_CHANNELS,
    "follows no release channel (releaseChannel.channel is {value}), so nobody patches its control plane and nodes on a schedule; set "
    f"one of {', '.join(RELEASE_CHANNELS)} (gpupools: cluster.releaseChannel)")


def validate_deletion_protection(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != GKE_CLUSTER:
        return
    production = get(args.props, "resourceLabels", PRODUCTION_LABEL) == "true"
    if production or args.get_config().get("allClusters"):
        judge(args, report, ("deletionProtection",), lambda v: v is True,
              f"is {'labelled production' if production else 'a cluster'} but can be deleted by one `pulumi destroy` or replacement "
              "(deletionProtection is {value}); gpupools sets it for cluster.production: true")


gke_deletion_protection = cluster_policy(
    "gke-deletion-protection",
    f"GKE clusters labelled {PRODUCTION_LABEL}=true (gpupools: cluster.production) have deletion protection on.",
    validate_deletion_protection,
    allClusters={"type": "boolean", "default": False, "description": "Require deletion protection on every GKE cluster, production or not."},
)


def validate_binary_authorization(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == GKE_CLUSTER and args.get_config().get("required"):
        judge(args, report, ("binaryAuthorization", "evaluationMode"), lambda v: v == "PROJECT_SINGLETON_POLICY_ENFORCE",
              "runs any image (binaryAuthorization.evaluationMode is {value}); set PROJECT_SINGLETON_POLICY_ENFORCE "
              "(gpupools: cluster.binaryAuthorization: true)")


gke_binary_authorization = cluster_policy(
    "gke-binary-authorization",
    "Optional (config `required`): GKE clusters enforce the project's Binary Authorization policy.",
    validate_binary_authorization,
    required={"type": "boolean", "default": False,
                                    "description": "Require Binary Authorization on every GKE cluster; off by default."},
)

POLICIES = [
    cluster_endpoint_restricted, eks_secrets_encryption, eks_control_plane_logs, eks_access_entries, eks_managed_addons,
    aks_entra_id_rbac, aks_defender_and_policy, cluster_network_policy, cluster_workload_identity,
    gke_private_nodes, gke_release_channel, gke_deletion_protection, gke_binary_authorization,
]
