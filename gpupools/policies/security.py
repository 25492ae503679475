"""Node and secret hygiene: no SSH from the internet, instance metadata locked down, no plaintext secrets."""

from __future__ import annotations

import ipaddress
import re
from contextvars import ContextVar
from typing import Any, Iterable

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy, Secret

from gpupools.policies._readback import AKS_AGENT_POOL, EC2_NODE_CLASS, GCORE_POOL, EKS_NODE_GROUP, GKE_CLUSTER, GKE_NODE_POOL, HELM_RELEASE, LAUNCH_TEMPLATE, eks_is_gpu, gke_accelerators, sensitive_key
from gpupools.clouds.common import MAX_OPEN_IPV4, MAX_OPEN_IPV6
from gpupools.policies._props import SECRET_MARKER, as_int, entries, get, is_unknown, items, plain

SSH_PORT = 22

# --------------------------------------------------------------------------------------------------------------------
# How much of the internet a list of source ranges lets in

# Addresses no one reaches from the internet: the IANA IPv4 Special-Purpose Address Registry (RFC 6890 and its
# updates): "this network", private (RFC 1918), shared (RFC 6598), loopback, link-local, IETF protocol assignments,
# documentation, 6to4 relay anycast, benchmarking, multicast and reserved. Source ranges inside them open nothing
# to the internet, so a rule for all of 10.0.0.0/8, 172.16.0.0/12 and 192.168.0.0/16 is not "the internet".
V4_NOT_PUBLIC = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24",
    "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4"))
# IPv6's global unicast space (IANA IPv6 Address Space registry: 2000::/3), less its documentation prefix (RFC 3849).
V6_PUBLIC = ipaddress.ip_network("2000::/3")
V6_NOT_PUBLIC = (ipaddress.ip_network("2001:db8::/32"),)
# IPv6 prefixes that carry IPv4 addresses: IPv4-mapped (RFC 4291 section 2.5.5.2) and the NAT64 well-known prefix
# (RFC 6052); a rule for ::ffff:0.0.0.0/96 lets in every IPv4 address on a dual-stack listener.
V4_IN_V6 = (ipaddress.ip_network("::ffff:0:0/96"), ipaddress.ip_network("64:ff9b::/96"))
WHOLE_V4 = ipaddress.ip_network("0.0.0.0/0")


def _public(nets: list, space: Any, holes: tuple) -> int:
    """Addresses of `space` the networks cover, less `holes`. CIDR blocks either nest or do not meet, so after
    collapsing, each block's share is the smaller of it and the space, less the holes inside that share."""
    total = 0
    for net in ipaddress.collapse_addresses(nets):
        part = net if net.subnet_of(space) else space if space.subnet_of(net) else None
        if part is None:
            continue
        count = part.num_addresses
        for hole in holes:
            if hole.subnet_of(part):
                count -= hole.num_addresses
            elif part.subnet_of(hole):
                count = 0
                break
        total += count
    return total


PUBLIC_V4 = _public([WHOLE_V4], WHOLE_V4, V4_NOT_PUBLIC)
PUBLIC_V6 = _public([V6_PUBLIC], V6_PUBLIC, V6_NOT_PUBLIC)


def public_addresses(ranges: Iterable[Any]) -> tuple[int, int]:
    """Public IPv4 and IPv6 addresses the source ranges let in together (overlaps counted once, IPv4 carried in IPv6
    counted as IPv4). Entries that are not CIDR blocks or addresses count for nothing (the cloud refuses them)."""
    v4: list = []
    v6: list = []
    for entry in ranges:
        if not isinstance(entry, str):
            continue
        try:
            net = ipaddress.ip_network(entry.strip(), strict=False)
        except ValueError:
            continue
        if isinstance(net, ipaddress.IPv4Network):
            v4.append(net)
            continue
        v6.append(net)
        for carrier in V4_IN_V6:
            if net.subnet_of(carrier):
                v4.append(ipaddress.ip_network((int(net.network_address) - int(carrier.network_address), net.prefixlen - 96)))
            elif carrier.subnet_of(net):
                v4.append(WHOLE_V4)
    return _public(v4, WHOLE_V4, V4_NOT_PUBLIC), _public(v6, V6_PUBLIC, V6_NOT_PUBLIC)


def internet_share(ranges: Iterable[Any]) -> str | None:
    """How much of the internet the source ranges let in, when it is more than one organization holds (more than a
    /8 of public IPv4, as clouds.common.too_open counts for API endpoints, or a /16 of IPv6); else None. Judged by the
    addresses, not the spelling: 0.0.0.0/1 with 128.0.0.0/1, four /2 blocks, ::/1 with 8000::/1 and
    ::ffff:0.0.0.0/96 all say "the whole internet"."""
    v4, v6 = public_addresses(ranges)
    parts = []
    if v4 > MAX_OPEN_IPV4:
        parts.append("every public IPv4 address" if v4 >= PUBLIC_V4 else f"{v4 / PUBLIC_V4:.0%} of public IPv4 addresses")
    if v6 > MAX_OPEN_IPV6:
        parts.append("every public IPv6 address" if v6 >= PUBLIC_V6 else f"{v6 / PUBLIC_V6:.2%} of public IPv6 addresses")
    if not parts:
        return None
    whole = v4 >= PUBLIC_V4 or v6 >= PUBLIC_V6
    return ("the whole internet (" if whole else "") + " and ".join(parts) + (")" if whole else "")

# --------------------------------------------------------------------------------------------------------------------
# no-public-ssh


def _covers_ssh(protocol: Any, from_port: Any, to_port: Any) -> bool:
    if str(protocol) in ("-1", "all"):
        return True
    if str(protocol).lower() not in ("tcp", "6"):
        return False
    low, high = as_int(from_port), as_int(to_port)
    return low is not None and high is not None and low <= SSH_PORT <= high


def _gcp_firewall_opens_ssh(props: Any) -> str | None:
    """How much of the internet an ingress firewall lets reach port 22, or None."""
    if str(get(props, "direction") or "INGRESS").upper() != "INGRESS" or get(props, "disabled") is True:
        return None
    share = internet_share(items(get(props, "sourceRanges")))
    if share is None:
        return None
    for rule in items(get(props, "allows")):
        protocol = str(get(rule, "protocol") or "").lower()
        ports = [str(p) for p in items(get(rule, "ports"))]
        if protocol == "all" or (protocol in ("tcp", "6") and not ports):
            return share
        if protocol in ("tcp", "6"):
            for spec in ports:
                low, _, high = spec.partition("-")
                if low.isdigit() and int(low) <= SSH_PORT <= int(high or low):
                    return share
    return None


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
    elif typ == GCORE_POOL:
        if get(props, "pool", "is_public_ipv4") is True:
            report(f"Gcore pool {args.name!r} gives every node a public IPv4 address (is_public_ipv4), which exposes SSH and the "
                   f"kubelet to the internet; drop is_public_ipv4", None)
    elif typ == EC2_NODE_CLASS:
        # A pool's node settings may set it (docs/node-settings.md); unset, the subnet decides, and gpupools' are private.
        if get(props, "spec", "associatePublicIPAddress") is True:
            report(f"EC2NodeClass {args.name!r} gives every node a public IP (spec.associatePublicIPAddress), which exposes SSH and "
                   f"the kubelet to the internet; drop associatePublicIPAddress", None)
    elif typ == GKE_NODE_POOL:
        # A node pool's own networkConfig.enablePrivateNodes overrides the cluster's private nodes (GKE API NodeNetworkConfig).
        if get(props, "networkConfig", "enablePrivateNodes") is False:
            report(f"node pool {args.name!r} gives its nodes public IPs (networkConfig.enablePrivateNodes is false), which exposes "
                   f"SSH and the kubelet to the internet; drop enablePrivateNodes", None)
    elif typ == "aws:ec2/securityGroup:SecurityGroup":
        # The union of every ingress rule that reaches port 22: two rules of /1 each open as much as one of /0.
        ssh = [rule for rule in items(get(props, "ingress")) if _covers_ssh(get(rule, "protocol"), get(rule, "fromPort"), get(rule, "toPort"))]
        share = internet_share([c for rule in ssh for c in items(get(rule, "cidrBlocks")) + items(get(rule, "ipv6CidrBlocks"))])
        if share:
            report(f"security group {args.name!r} allows SSH (port 22) from {share}; list the networks that need it, or use SSM", None)
    elif typ == "aws:ec2/securityGroupRule:SecurityGroupRule":
        share = internet_share(items(get(props, "cidrBlocks")) + items(get(props, "ipv6CidrBlocks")))
        if get(props, "type") == "ingress" and _covers_ssh(get(props, "protocol"), get(props, "fromPort"), get(props, "toPort")) and share:
            report(f"security group rule {args.name!r} allows SSH (port 22) from {share}", None)
    elif typ == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        share = internet_share([get(props, "cidrIpv4"), get(props, "cidrIpv6")])
        if _covers_ssh(get(props, "ipProtocol"), get(props, "fromPort"), get(props, "toPort")) and share:
            report(f"ingress rule {args.name!r} allows SSH (port 22) from {share}", None)
    elif typ == "gcp:compute/firewall:Firewall":
        share = _gcp_firewall_opens_ssh(props)
        if share:
            report(f"firewall {args.name!r} allows SSH (tcp:22) from {share}", None)


no_public_ssh = ResourceValidationPolicy(
    name="no-public-ssh",
    description="Nodes are not reachable by SSH from the internet (EKS remoteAccess, AKS node public IPs, Karpenter EC2NodeClass and GKE node "
                "pool public IPs, security groups, GCP firewalls).",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_ssh,
)

# --------------------------------------------------------------------------------------------------------------------
# eks-imdsv2


# A hop limit of 2 lets containers on the node reach IMDS through the node's network namespace (what the EKS
# AMIs and Karpenter default to); a larger one lets the token travel further, e.g. through another proxy hop.
MAX_IMDS_HOPS = 2


def _hop_problem(kind: str, name: str, hops: Any, where: str) -> str | None:
    count = as_int(hops)
    if count is not None and count > MAX_IMDS_HOPS:
        return (f"{kind} {name!r} sets {where}.httpPutResponseHopLimit to {count}; IMDSv2 tokens should travel at most "
                f"{MAX_IMDS_HOPS} hops (the node and its containers), so set it to {MAX_IMDS_HOPS} or less")
    return None


def validate_imdsv2(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props = args.resource_type, args.props
    hops = None
    if typ == LAUNCH_TEMPLATE:
        hops = _hop_problem("launch template", args.name, get(props, "metadataOptions", "httpPutResponseHopLimit"), "metadataOptions")
    elif typ == EC2_NODE_CLASS:
        hops = _hop_problem("EC2NodeClass", args.name, get(props, "spec", "metadataOptions", "httpPutResponseHopLimit"), "spec.metadataOptions")
    if hops:
        report(hops, None)
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
    description="EKS nodes require IMDSv2: node groups use a launch template, and launch templates and Karpenter EC2NodeClasses set httpTokens to required and a hop limit of at most 2.",
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
    legacy = get(args.props, "nodeConfig", "metadata", "disable-legacy-endpoints")
    if not is_unknown(legacy) and legacy is not None and str(legacy).strip().lower() == "false":
        report(f"node pool {args.name!r} sets metadata disable-legacy-endpoints to \"false\", which serves the v1beta1 metadata "
               f"endpoints without the Metadata-Flavor header check; remove it or set it to \"true\"", None)


gke_metadata_server = ResourceValidationPolicy(
    name="gke-metadata-server",
    description="GKE node pools use the GKE metadata server, which hides node credentials from pods (Workload Identity), and keep the legacy metadata endpoints off.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_gke_metadata,
)


def _driver_from_operator(props: Any) -> bool:
    """GKE installs no driver on these nodes: the GPU Operator's driver container builds unsigned modules."""
    return any(get(a, "gpuDriverInstallationConfig", "gpuDriverVersion") == "INSTALLATION_DISABLED" for a in gke_accelerators(props))


def validate_gke_shielded(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == GKE_CLUSTER:
        # GKE's default is on; only an explicit false turns shielded nodes off for the whole cluster.
        if get(args.props, "enableShieldedNodes") is False:
            report(f"GKE cluster {get(args.props, 'name') or args.name!r} turns shielded nodes off (enableShieldedNodes: false), so nodes can join without proving "
                   f"their boot integrity; remove it or set it to true", None)
        return
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
    description="GKE clusters keep shielded nodes on, and node pools are shielded VMs with secure boot and integrity monitoring.",
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

# --------------------------------------------------------------------------------------------------------------------
# encrypted-node-disks


def _encrypted(value: Any) -> bool:
    """pulumi-aws spells a launch template's `encrypted` as a string; Karpenter's CRD as a boolean."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def validate_disks(args: ResourceValidationArgs, report: ReportViolation) -> None:
    typ, props, config = args.resource_type, args.props, args.get_config()
    if typ in (LAUNCH_TEMPLATE, EC2_NODE_CLASS):
        base = ("blockDeviceMappings",) if typ == LAUNCH_TEMPLATE else ("spec", "blockDeviceMappings")
        for i, mapping in enumerate(items(get(props, *base))):
            ebs = get(mapping, "ebs")
            if ebs is None or is_unknown(ebs):
                continue
            encrypted = get(ebs, "encrypted")
            if not is_unknown(encrypted) and not _encrypted(encrypted) and get(ebs, "snapshotId") is None:
                device = get(mapping, "deviceName") or f"[{i}]"
                report(f"{'launch template' if typ == LAUNCH_TEMPLATE else 'EC2NodeClass'} {args.name!r} gives {device} an unencrypted EBS "
                       f"volume (encrypted is {encrypted if encrypted is not None else 'unset'}); set {'.'.join(base)}[{i}].ebs.encrypted: true", None)
    elif typ == AKS_AGENT_POOL and config.get("aksEncryptionAtHost", False):
        if get(props, "enableEncryptionAtHost") is not True and not is_unknown(get(props, "enableEncryptionAtHost")):
            size = get(props, "vmSize")
            if size in (config.get("vmSizesWithoutEncryptionAtHost") or []):
                return
            report(f"agent pool {args.name!r} ({size}) does not encrypt its OS disk and temp disk on the host; set enableEncryptionAtHost: "
                   f"true (the subscription needs the Microsoft.Compute EncryptionAtHost feature), or list the VM size in "
                   f"vmSizesWithoutEncryptionAtHost if it does not support it", None)
    elif typ == GKE_NODE_POOL and config.get("gkeCustomerManagedKey", False):
        key = get(props, "nodeConfig", "bootDiskKmsKey")
        if not is_unknown(key) and not key:
            report(f"node pool {args.name!r} boot disks use Google-managed keys; set nodeConfig.bootDiskKmsKey to a Cloud KMS key", None)


encrypted_node_disks = ResourceValidationPolicy(
    name="encrypted-node-disks",
    description="Node root volumes are encrypted: EBS volumes of EKS launch templates and Karpenter EC2NodeClasses; optionally AKS "
                "encryption at host and GKE boot disks with a customer-managed key.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        # Off by default: host encryption needs a subscription feature and a VM size that supports it (AKS "host-based
        # encryption"); AKS encrypts OS disks server-side with platform keys in any case.
        "aksEncryptionAtHost": {"type": "boolean", "default": False,
                                "description": "Require enableEncryptionAtHost on AKS agent pools."},
        "vmSizesWithoutEncryptionAtHost": {"type": "array", "items": {"type": "string"}, "default": [],
                                           "description": "AKS VM sizes exempt from aksEncryptionAtHost because they do not support it."},
        # GKE encrypts every boot disk with Google-managed keys; this asks for the customer's own key on top.
        "gkeCustomerManagedKey": {"type": "boolean", "default": False,
                                  "description": "Require GKE node pool boot disks encrypted with a Cloud KMS key (bootDiskKmsKey)."},
    }),
    validate=validate_disks,
)

# --------------------------------------------------------------------------------------------------------------------
# node-kubelet-closed


def validate_kubelet(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """What a pool's node settings may open in the kubelet: sysctls Kubernetes calls unsafe (they reach beyond the pod:
    kubernetes.io/docs/tasks/administer-cluster/sysctl-cluster, "Safe and Unsafe Sysctls"), which a kubelet lets pods
    set only when listed in allowedUnsafeSysctls, and the kubelet's unauthenticated read-only port (10255)."""
    typ, props = args.resource_type, args.props
    if typ == AKS_AGENT_POOL:
        sysctls, readonly = get(props, "kubeletConfig", "allowedUnsafeSysctls"), None
    elif typ == GKE_NODE_POOL:
        sysctls = get(props, "nodeConfig", "kubeletConfig", "allowedUnsafeSysctls")
        readonly = get(props, "nodeConfig", "kubeletConfig", "insecureKubeletReadonlyPortEnabled")
    else:
        return
    allowed = set(items(args.get_config().get("allowedUnsafeSysctls") or []))
    unsafe = [str(s) for s in items(sysctls) if not is_unknown(s) and str(s) not in allowed]
    if unsafe:
        report(f"node pool {args.name!r} lets pods set unsafe sysctls ({', '.join(unsafe)}), which reach beyond the pod; drop "
               f"allowedUnsafeSysctls, or list them in the policy config's allowedUnsafeSysctls", None)
    # pulumi-gcp spells it as Terraform does, the string "TRUE" or "FALSE" (google_container_node_pool
    # insecure_kubelet_readonly_port_enabled); the API's own field is a boolean.
    if readonly is True or (isinstance(readonly, str) and readonly.upper() == "TRUE"):
        report(f"node pool {args.name!r} opens the kubelet's unauthenticated read-only port (insecureKubeletReadonlyPortEnabled); "
               f"drop it", None)


node_kubelet_closed = ResourceValidationPolicy(
    name="node-kubelet-closed",
    description="Node pools' kubelets let no pod set unsafe sysctls (AKS and GKE allowedUnsafeSysctls) and serve no unauthenticated "
                "read-only port (GKE insecureKubeletReadonlyPortEnabled), unless the policy config allows the sysctls by name.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "allowedUnsafeSysctls": {"type": "array", "items": {"type": "string"}, "default": [],
                                 "description": "Unsafe sysctls node pools may let pods set (e.g. net.core.somaxconn)."},
    }),
    validate=validate_kubelet,
)

POLICIES = [no_public_ssh, eks_imdsv2, gke_metadata_server, gke_shielded_nodes, no_plaintext_secrets, encrypted_node_disks, node_kubelet_closed]
