"""Node and secret hygiene: no SSH from the internet, instance metadata locked down, no plaintext secrets."""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import Any

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy, Secret

from ._fleet import AKS_AGENT_POOL, EC2_NODE_CLASS, EKS_NODE_GROUP, GKE_NODE_POOL, HELM_RELEASE, LAUNCH_TEMPLATE, eks_is_gpu, gke_accelerators, sensitive_key
from ._props import SECRET_MARKER, as_int, entries, get, is_unknown, items, plain

WORLD = ("0.0.0.0/0", "::/0")
SSH_PORT = 22

# --------------------------------------------------------------------------------------------------------------------
# no-public-ssh


def _covers_ssh(protocol: Any, from_port: Any, to_port: Any) -> bool:
    if str(protocol) in ("-1", "all"):
        return True
    if str(protocol).lower() not in ("tcp", "6"):
        return False
    low, high = as_int(from_port), as_int(to_port)
    return low is not None and high is not None and low <= SSH_PORT <= high


def _gcp_firewall_opens_ssh(props: Any) -> bool:
    if str(get(props, "direction") or "INGRESS").upper() != "INGRESS" or get(props, "disabled") is True:
        return False
    if not any(r in WORLD for r in items(get(props, "sourceRanges"))):
        return False
    for rule in items(get(props, "allows")):
        protocol = str(get(rule, "protocol") or "").lower()
        ports = [str(p) for p in items(get(rule, "ports"))]
        if protocol == "all" or (protocol in ("tcp", "6") and not ports):
            return True
        if protocol in ("tcp", "6"):
            for spec in ports:
                low, _, high = spec.partition("-")
                if low.isdigit() and int(low) <= SSH_PORT <= int(high or low):
                    return True
    return False


def validate_ssh(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props = args.resource_type, args.props
    if typ == EKS_NODE_GROUP:
        remote = get(props, "remoteAccess")
        if remote is not None and not is_unknown(remote):
            groups = get(remote, "sourceSecurityGroupIds")
            if not is_unknown(groups) and not items(groups):
                report(f"node group {args.name!r} enables remoteAccess without sourceSecurityGroupIds, which opens SSH "
                       f"(port 22) to 0.0.0.0/0; list the security groups allowed in, or drop remoteAccess and use SSM", None)
    elif typ == AKS_AGENT_POOL:
        if get(props, "enableNodePublicIP") is True:
            report(f"agent pool {args.name!r} gives every node a public IP, which exposes SSH and the kubelet to the "
                   f"internet; set enableNodePublicIP false", None)
    elif typ == "aws:ec2/securityGroup:SecurityGroup":
        for i, rule in enumerate(items(get(props, "ingress"))):
            if _covers_ssh(get(rule, "protocol"), get(rule, "fromPort"), get(rule, "toPort")) and \
                    any(c in WORLD for c in items(get(rule, "cidrBlocks")) + items(get(rule, "ipv6CidrBlocks"))):
                report(f"security group {args.name!r} ingress[{i}] allows SSH from the whole internet", None)
    elif typ == "aws:ec2/securityGroupRule:SecurityGroupRule":
        if get(props, "type") == "ingress" and _covers_ssh(get(props, "protocol"), get(props, "fromPort"), get(props, "toPort")) and \
                any(c in WORLD for c in items(get(props, "cidrBlocks")) + items(get(props, "ipv6CidrBlocks"))):
            report(f"security group rule {args.name!r} allows SSH from the whole internet", None)
    elif typ == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        if _covers_ssh(get(props, "ipProtocol"), get(props, "fromPort"), get(props, "toPort")) and \
                (get(props, "cidrIpv4") in WORLD or get(props, "cidrIpv6") in WORLD):
            report(f"ingress rule {args.name!r} allows SSH from the whole internet", None)
    elif typ == "gcp:compute/firewall:Firewall":
        if _gcp_firewall_opens_ssh(props):
            report(f"firewall {args.name!r} allows SSH (tcp:22) from 0.0.0.0/0", None)


no_public_ssh = ResourceValidationPolicy(
    name="no-public-ssh",
    description="Nodes are not reachable by SSH from the internet (EKS remoteAccess, AKS node public IPs, security groups, GCP firewalls).",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_ssh,
)

# --------------------------------------------------------------------------------------------------------------------
# eks-imdsv2


def validate_imdsv2(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props = args.resource_type, args.props
    if typ == LAUNCH_TEMPLATE:
        tokens = get(props, "metadataOptions", "httpTokens")
        if is_unknown(tokens) or get(props, "metadataOptions", "httpEndpoint") == "disabled":
            return
        if tokens != "required":
            report(f"launch template {args.name!r} allows IMDSv1 (metadataOptions.httpTokens is {tokens or 'unset'}); a pod that "
                   f"can make one HTTP GET could read the node role's credentials; set httpTokens: required", None)
    elif typ == EC2_NODE_CLASS:
        # Karpenter requires IMDSv2 unless told otherwise (EC2NodeClass metadataOptions default httpTokens: required).
        tokens = get(props, "spec", "metadataOptions", "httpTokens")
        if isinstance(tokens, str) and tokens != "required" and get(props, "spec", "metadataOptions", "httpEndpoint") != "disabled":
            report(f"EC2NodeClass {args.name!r} allows IMDSv1 (spec.metadataOptions.httpTokens is {tokens}); a pod that can make one "
                   f"HTTP GET could read the node role's credentials; set httpTokens: required", None)
    elif typ == EKS_NODE_GROUP:
        if not args.get_config().get("allNodeGroups", True) and not eks_is_gpu(props):
            return
        template = get(props, "launchTemplate")
        if template is None:
            report(f"node group {args.name!r} uses no launch template, so its nodes get EKS's default metadata options "
                   f"(IMDSv1 allowed); give it a launch template with metadataOptions.httpTokens: required", None)


eks_imdsv2 = ResourceValidationPolicy(
    name="eks-imdsv2",
    description="EKS nodes require IMDSv2: node groups use a launch template, and launch templates and Karpenter EC2NodeClasses set httpTokens to required.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "allNodeGroups": {"type": "boolean", "default": True,
                          "description": "Also require a launch template on node groups without GPUs (e.g. the system node group); "
                                         "false limits the node-group check to GPU node groups."},
    }),
    validate=validate_imdsv2,
)

# --------------------------------------------------------------------------------------------------------------------
# gke-metadata-server, gke-shielded-nodes


def validate_gke_metadata(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != GKE_NODE_POOL:
        return
    mode = get(args.props, "nodeConfig", "workloadMetadataConfig", "mode")
    if not is_unknown(mode) and mode != "GKE_METADATA":
        report(f"node pool {args.name!r} does not use the GKE metadata server (workloadMetadataConfig.mode is {mode or 'unset'}), "
               f"so pods can read the node's service-account token; set nodeConfig.workloadMetadataConfig.mode: GKE_METADATA", None)


gke_metadata_server = ResourceValidationPolicy(
    name="gke-metadata-server",
    description="GKE node pools use the GKE metadata server, which hides node credentials from pods (Workload Identity).",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_gke_metadata,
)


def _driver_from_operator(props: Any) -> bool:
    """GKE installs no driver on these nodes: the GPU Operator's driver container builds unsigned modules."""
    return any(get(a, "gpuDriverInstallationConfig", "gpuDriverVersion") == "INSTALLATION_DISABLED" for a in gke_accelerators(props))


def validate_gke_shielded(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != GKE_NODE_POOL:
        return
    shielded = get(args.props, "nodeConfig", "shieldedInstanceConfig")
    if is_unknown(shielded):
        return
    if get(shielded, "enableIntegrityMonitoring") is False:
        report(f"node pool {args.name!r} turns integrity monitoring off; set shieldedInstanceConfig.enableIntegrityMonitoring: true", None)
    secure_boot = get(shielded, "enableSecureBoot")
    if secure_boot is True or is_unknown(secure_boot):
        return
    if args.get_config().get("allowOperatorDriverPools", True) and _driver_from_operator(args.props):
        # Secure boot would refuse the NVIDIA driver these nodes need; that is a known, deliberate trade-off.
        args.not_applicable(f"node pool {args.name!r} runs without secure boot because the GPU Operator installs its driver "
                            f"(gpuDriverInstallationConfig INSTALLATION_DISABLED) and NVIDIA's driver container modules are unsigned")
    report(f"node pool {args.name!r} runs without secure boot, so a tampered boot chain or kernel module goes unnoticed; "
           f"set shieldedInstanceConfig.enableSecureBoot: true", None)


gke_shielded_nodes = ResourceValidationPolicy(
    name="gke-shielded-nodes",
    description="GKE node pools are shielded VMs with secure boot and integrity monitoring.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "allowOperatorDriverPools": {"type": "boolean", "default": True,
                                     "description": "Exempt GPU pools whose driver the GPU Operator installs (unsigned modules) from secure boot."},
    }),
    validate=validate_gke_shielded,
)

# --------------------------------------------------------------------------------------------------------------------
# no-plaintext-secrets

# Whether the properties being judged still say which values are secret. `gpupools check` records secrets as
# "[secret]" and sets this; under `pulumi preview`, pulumi_policy hands validators secret values already
# decrypted (Analyze calls deserialize_properties without proxy_secrets), so a secret and a literal look alike.
SECRETS_VISIBLE: ContextVar[bool] = ContextVar("gpupools_secrets_visible", default=False)

K8S_SECRET = "kubernetes:core/v1:Secret"


_IDENTITY = re.compile(r"(?i)(user|username|login|email|account)$")


def identity_key(key: str) -> bool:
    """Secret entries that name who, not the credential (admin-user beside admin-password), may stay plain."""
    return bool(_IDENTITY.search(key.replace("-", "").replace("_", "").replace(".", "")))


def _is_protected(value: Any) -> bool:
    return value is None or value == "" or isinstance(value, Secret) or value == SECRET_MARKER or is_unknown(value)


def _plain_credentials(value: Any, path: str) -> list[str]:
    """Paths of sensitive keys whose value is a literal string."""
    found = []
    if isinstance(value, dict):
        for key, child in value.items():
            where = f"{path}.{key}" if path else str(key)
            if sensitive_key(str(key)) and isinstance(child, (str, int)) and not _is_protected(child):
                found.append(where)
            else:
                found += _plain_credentials(child, where)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found += _plain_credentials(child, f"{path}[{i}]")
    return found


def validate_secrets(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ = args.resource_type
    if typ not in (HELM_RELEASE, K8S_SECRET):
        return
    if not SECRETS_VISIBLE.get():
        args.not_applicable("pulumi_policy passes secret values decrypted under `pulumi preview`, so secrets cannot be told from "
                            "literals here; `gpupools check` enforces this policy on the recorded plan")
    if typ == HELM_RELEASE:
        values = plain(get(args.props, "values"))
        for where in _plain_credentials(values, "values"):
            report(f"release {args.name!r}: {where} is a plain value; pass it as a Pulumi secret (pulumi.Output.secret, "
                   f"`pulumi config set --secret`) or reference an existing Kubernetes Secret", None)
    else:
        for field in ("stringData", "data"):
            for key, value in entries(get(args.props, field)):
                if not _is_protected(value) and not identity_key(key):
                    report(f"Secret {args.name!r}: {field}.{key} is a plain value; wrap it in pulumi.Output.secret", None)


no_plaintext_secrets = ResourceValidationPolicy(
    name="no-plaintext-secrets",
    description="Credentials (Grafana admin password, tokens, Kubernetes Secret data) are Pulumi secrets, never plain values.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_secrets,
)

POLICIES = [no_public_ssh, eks_imdsv2, gke_metadata_server, gke_shielded_nodes, no_plaintext_secrets]
