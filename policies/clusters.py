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

from ._fleet import AKS_CLUSTER, EKS_CLUSTER, GKE_CLUSTER
from ._props import get, is_unknown, items
from .security import WORLD

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


# --------------------------------------------------------------------------------------------------------------------
# cluster-endpoint-restricted


def _aks_endpoint(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = args.props
    name = cluster_name(props, args.name)
    private = get(props, "apiServerAccessProfile", "enablePrivateCluster")
    ranges = get(props, "apiServerAccessProfile", "authorizedIPRanges")
    if private is True or is_unknown(private) or is_unknown(ranges):
        return
    ranges = items(ranges)
    if not ranges or any(r in WORLD for r in ranges):
        excepted(args, name)
        report(f"AKS cluster {name!r} serves its API server to the whole internet (apiServerAccessProfile.authorizedIPRanges "
               f"{'unset' if not ranges else ', '.join(map(str, ranges))}); set gpupools:cluster authorizedCidrs, or endpointAccess: private "
               f"(enablePrivateCluster)", None)


def _gke_endpoint(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = args.props
    name = cluster_name(props, args.name)
    private = get(props, "privateClusterConfig", "enablePrivateEndpoint")
    networks = get(props, "masterAuthorizedNetworksConfig")
    if private is True or is_unknown(private) or is_unknown(networks):
        return
    blocks = [get(b, "cidrBlock") for b in items(get(networks, "cidrBlocks"))]
    if networks is None:
        problem = "has no master authorized networks"
    elif any(b in WORLD for b in blocks):
        problem = "authorizes 0.0.0.0/0 in masterAuthorizedNetworksConfig"
    elif get(networks, "gcpPublicCidrsAccessEnabled") is True:
        problem = "lets every Google Cloud public IP reach it (gcpPublicCidrsAccessEnabled)"
    else:
        return
    excepted(args, name)
    report(f"GKE cluster {name!r} serves its public endpoint to the whole internet: it {problem}; set gpupools:cluster authorizedCidrs, "
           f"or endpointAccess: private", None)


def validate_endpoint(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props = args.resource_type, args.props
    if typ == AKS_CLUSTER:
        _aks_endpoint(args, report)
    if typ == GKE_CLUSTER:
        _gke_endpoint(args, report)
    if typ != EKS_CLUSTER:
        return
    name = cluster_name(props, args.name)
    public = get(props, "vpcConfig", "endpointPublicAccess")
    if is_unknown(public) or public is False:
        return
    cidrs = get(props, "vpcConfig", "publicAccessCidrs")
    if is_unknown(cidrs):
        return
    cidrs = items(cidrs)
    if not cidrs or any(c in WORLD for c in cidrs):
        excepted(args, name)
        report(f"EKS cluster {name!r} serves its API endpoint to the whole internet (publicAccessCidrs "
               f"{'unset' if not cidrs else ', '.join(map(str, cidrs))}); set gpupools:cluster authorizedCidrs to the networks that "
               f"may reach it, or endpointAccess: private", None)


cluster_endpoint_restricted = ResourceValidationPolicy(
    name="cluster-endpoint-restricted",
    description="The Kubernetes API endpoint of a cluster is private or open only to authorized networks, never to the whole internet.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_schema(),
    validate=validate_endpoint,
)

# --------------------------------------------------------------------------------------------------------------------
# eks-secrets-encryption


def _symmetric(props: Any) -> bool:
    """Only symmetric encryption keys can rotate automatically (KMS EnableKeyRotation)."""
    spec = get(props, "customerMasterKeySpec") or get(props, "keySpec")
    usage = get(props, "keyUsage")
    return spec in (None, "SYMMETRIC_DEFAULT") and usage in (None, "ENCRYPT_DECRYPT")


def validate_secrets_encryption(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props = args.resource_type, args.props
    if typ == EKS_CLUSTER:
        name = cluster_name(props, args.name)
        config = get(props, "encryptionConfig")
        if is_unknown(config):
            return
        resources = get(config, "resources")
        key = get(config, "provider", "keyArn")
        if is_unknown(resources):
            return
        if config is None or "secrets" not in items(resources) or (key is None or key == ""):
            excepted(args, name)
            report(f"EKS cluster {name!r} keeps Kubernetes Secrets in etcd without envelope encryption; set encryptionConfig "
                   f"(resources: [secrets], provider.keyArn: a KMS key), which gpupools does unless cluster.secretsEncryption is false", None)
    elif typ == KMS_KEY and _symmetric(props):
        rotation = get(props, "enableKeyRotation")
        if not is_unknown(rotation) and rotation is not True:
            report(f"KMS key {args.name!r} does not rotate its key material; set enableKeyRotation: true", None)


eks_secrets_encryption = ResourceValidationPolicy(
    name="eks-secrets-encryption",
    description="EKS clusters envelope-encrypt Kubernetes Secrets with a KMS key, and the stack's KMS keys rotate.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_schema(),
    validate=validate_secrets_encryption,
)

# --------------------------------------------------------------------------------------------------------------------
# eks-control-plane-logs

REQUIRED_LOG_TYPES = ["api", "audit", "authenticator"]


def validate_logs(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props = args.resource_type, args.props
    if typ == EKS_CLUSTER:
        name = cluster_name(props, args.name)
        enabled = get(props, "enabledClusterLogTypes")
        if is_unknown(enabled):
            return
        missing = [t for t in args.get_config().get("requiredLogTypes") or [] if t not in items(enabled)]
        if missing:
            excepted(args, name)
            report(f"EKS cluster {name!r} does not send its {', '.join(missing)} logs to CloudWatch, so API calls and logins leave "
                   f"no trace; add them to enabledClusterLogTypes (gpupools:cluster controlPlaneLogs)", None)
    elif typ == LOG_GROUP:
        group = get(props, "name")
        if isinstance(group, str) and group.startswith("/aws/eks/") and group.endswith("/cluster"):
            retention = get(props, "retentionInDays")
            if not is_unknown(retention) and not retention:
                report(f"log group {group!r} keeps EKS control-plane logs forever; set retentionInDays (gpupools:cluster logRetentionDays)", None)


eks_control_plane_logs = ResourceValidationPolicy(
    name="eks-control-plane-logs",
    description="EKS clusters send their API server, audit and authenticator logs to CloudWatch, into a log group with a retention.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_schema(requiredLogTypes={
        "type": "array", "items": {"type": "string", "enum": ["api", "audit", "authenticator", "controllerManager", "scheduler"]},
        "default": REQUIRED_LOG_TYPES, "description": "Control-plane log types every EKS cluster must enable."}),
    validate=validate_logs,
)

# --------------------------------------------------------------------------------------------------------------------
# eks-access-entries


def validate_access_entries(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props = args.resource_type, args.props
    if typ != EKS_CLUSTER:
        return
    name = cluster_name(props, args.name)
    mode = get(props, "accessConfig", "authenticationMode")
    if is_unknown(mode) or mode == "API":
        return
    excepted(args, name)
    report(f"EKS cluster {name!r} authenticates through the aws-auth ConfigMap (authenticationMode {mode or 'unset'}), which anyone "
           f"who can edit one ConfigMap can use to grant cluster admin; set accessConfig.authenticationMode: API (access entries)", None)


eks_access_entries = ResourceValidationPolicy(
    name="eks-access-entries",
    description="EKS clusters manage access with access entries only (authenticationMode API), not the aws-auth ConfigMap.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_schema(),
    validate=validate_access_entries,
)

# --------------------------------------------------------------------------------------------------------------------
# eks-managed-addons

REQUIRED_ADDONS = ["vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"]


def validate_addons(args: StackValidationArgs, report: ReportViolation) -> None:
    addons = [r for r in args.resources if r.resource_type == EKS_ADDON]
    skipped = []
    for cluster in (r for r in args.resources if r.resource_type == EKS_CLUSTER):
        name = cluster_name(cluster.props, cluster.name)
        if name in (args.get_config().get("exceptions") or []):
            skipped.append(name)
            continue
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


aks_entra_id_rbac = ResourceValidationPolicy(
    name="aks-entra-id-rbac",
    description="AKS clusters authenticate with Entra ID only (local accounts disabled) and authorize with Azure RBAC.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_schema(),
    validate=validate_entra_id,
)

# --------------------------------------------------------------------------------------------------------------------
# cluster-network-policy

AKS_NETWORK_POLICIES = ("azure", "calico", "cilium")


def validate_network_policy(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props = args.resource_type, args.props
    if typ == AKS_CLUSTER:
        name = cluster_name(props, args.name)
        engine = get(props, "networkProfile", "networkPolicy")
        if is_unknown(engine) or engine in AKS_NETWORK_POLICIES:
            return
        excepted(args, name)
        report(f"AKS cluster {name!r} enforces no NetworkPolicy (networkProfile.networkPolicy is {engine or 'unset'}), so any pod reaches "
               f"any other team's pods; set it to cilium (gpupools: cluster.networkPolicy, on by default)", None)
    elif typ == GKE_CLUSTER:
        name = cluster_name(props, args.name)
        datapath, legacy = get(props, "datapathProvider"), get(props, "networkPolicy", "enabled")
        if is_unknown(datapath) or is_unknown(legacy) or datapath == "ADVANCED_DATAPATH" or legacy is True:
            return
        excepted(args, name)
        report(f"GKE cluster {name!r} enforces no NetworkPolicy (datapathProvider is {datapath or 'unset'}, no networkPolicy addon), so any "
               f"pod reaches any other team's pods; set datapathProvider: ADVANCED_DATAPATH (Dataplane V2; gpupools: cluster.networkPolicy)", None)


cluster_network_policy = ResourceValidationPolicy(
    name="cluster-network-policy",
    description="Clusters enforce Kubernetes NetworkPolicy (AKS: networkProfile.networkPolicy azure, calico or cilium; GKE: Dataplane V2).",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_schema(),
    validate=validate_network_policy,
)

# --------------------------------------------------------------------------------------------------------------------
# cluster-workload-identity


def validate_workload_identity(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props = args.resource_type, args.props
    if typ == AKS_CLUSTER:
        name = cluster_name(props, args.name)
        for path, field in ((("securityProfile", "workloadIdentity", "enabled"), "securityProfile.workloadIdentity.enabled"),
                            (("oidcIssuerProfile", "enabled"), "oidcIssuerProfile.enabled")):
            value = get(props, *path)
            if not is_unknown(value) and value is not True:
                excepted(args, name)
                report(f"AKS cluster {name!r} has no workload identity ({field} is not true), so pods that need Azure access "
                       f"end up with stored secrets; set {field}: true", None)
    elif typ == GKE_CLUSTER:
        name = cluster_name(props, args.name)
        pool = get(props, "workloadIdentityConfig", "workloadPool")
        if not is_unknown(pool) and not pool:
            excepted(args, name)
            report(f"GKE cluster {name!r} has no Workload Identity (workloadIdentityConfig.workloadPool unset): node pools with the GKE "
                   f"metadata server cannot start and pods would need service-account keys; set workloadPool: <project>.svc.id.goog", None)


cluster_workload_identity = ResourceValidationPolicy(
    name="cluster-workload-identity",
    description="Clusters give pods cloud identities without stored secrets (AKS workload identity with the OIDC issuer, GKE Workload Identity).",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_schema(),
    validate=validate_workload_identity,
)

# --------------------------------------------------------------------------------------------------------------------
# gke-private-nodes, gke-release-channel, gke-deletion-protection, gke-binary-authorization

PRODUCTION_LABEL = "gpupools-production"
RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE", "EXTENDED")


def validate_private_nodes(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != GKE_CLUSTER:
        return
    name = cluster_name(args.props, args.name)
    private = get(args.props, "privateClusterConfig", "enablePrivateNodes")
    if not is_unknown(private) and private is not True:
        excepted(args, name)
        report(f"GKE cluster {name!r} gives its nodes public IP addresses (privateClusterConfig.enablePrivateNodes is not true); "
               f"gpupools makes them private unless cluster.privateNodes is false", None)


gke_private_nodes = ResourceValidationPolicy(
    name="gke-private-nodes",
    description="GKE nodes have no public IP addresses (private nodes).",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_schema(),
    validate=validate_private_nodes,
)


def validate_release_channel(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != GKE_CLUSTER:
        return
    name = cluster_name(args.props, args.name)
    channel = get(args.props, "releaseChannel", "channel")
    if not is_unknown(channel) and channel not in RELEASE_CHANNELS:
        excepted(args, name)
        report(f"GKE cluster {name!r} follows no release channel (releaseChannel.channel is {channel or 'unset'}), so nobody patches its "
               f"control plane and nodes on a schedule; set one of {', '.join(RELEASE_CHANNELS)} (gpupools: cluster.releaseChannel)", None)


gke_release_channel = ResourceValidationPolicy(
    name="gke-release-channel",
    description="GKE clusters are enrolled in a release channel, which keeps them patched.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_schema(),
    validate=validate_release_channel,
)


def validate_deletion_protection(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != GKE_CLUSTER:
        return
    name = cluster_name(args.props, args.name)
    production = get(args.props, "resourceLabels", PRODUCTION_LABEL) == "true"
    if not (production or args.get_config().get("allClusters")):
        return
    protected = get(args.props, "deletionProtection")
    if not is_unknown(protected) and protected is not True:
        excepted(args, name)
        report(f"GKE cluster {name!r} is {'labelled production' if production else 'a cluster'} but can be deleted by one `pulumi destroy` "
               f"or replacement (deletionProtection is not true); gpupools sets it for cluster.production: true", None)


gke_deletion_protection = ResourceValidationPolicy(
    name="gke-deletion-protection",
    description=f"GKE clusters labelled {PRODUCTION_LABEL}=true (gpupools: cluster.production) have deletion protection on.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_schema(allClusters={"type": "boolean", "default": False,
                                       "description": "Require deletion protection on every GKE cluster, production or not."}),
    validate=validate_deletion_protection,
)


def validate_binary_authorization(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != GKE_CLUSTER or not args.get_config().get("required"):
        return
    name = cluster_name(args.props, args.name)
    mode = get(args.props, "binaryAuthorization", "evaluationMode")
    if is_unknown(mode) or mode == "PROJECT_SINGLETON_POLICY_ENFORCE":
        return
    excepted(args, name)
    report(f"GKE cluster {name!r} runs any image (binaryAuthorization.evaluationMode is {mode or 'unset'}); set "
           f"PROJECT_SINGLETON_POLICY_ENFORCE (gpupools: cluster.binaryAuthorization: true)", None)


gke_binary_authorization = ResourceValidationPolicy(
    name="gke-binary-authorization",
    description="Optional (config `required`): GKE clusters enforce the project's Binary Authorization policy.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_schema(required={"type": "boolean", "default": False,
                                    "description": "Require Binary Authorization on every GKE cluster; off by default."}),
    validate=validate_binary_authorization,
)

POLICIES = [cluster_endpoint_restricted, eks_secrets_encryption, eks_control_plane_logs, eks_access_entries, eks_managed_addons,
            aks_entra_id_rbac, cluster_network_policy, cluster_workload_identity, gke_private_nodes, gke_release_channel,
            gke_deletion_protection, gke_binary_authorization]
