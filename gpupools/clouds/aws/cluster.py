"""EKS: the cluster itself: Kubernetes releases, the VPC and subnets, IAM, controls (endpoint, encryption, logs,
authentication), managed add-ons, the system node group, the kubeconfig and what a plan reads of an existing cluster.
"""

from __future__ import annotations


import json


from gpupools.stack.config import Cluster
from gpupools.stack.errors import Problem
from gpupools.clouds.common import (Control, SystemPoolSize, endpoint_control, on_off, shared_cluster_problems, system_pool_problems,
                                    system_pool_size, too_open)
from gpupools.core.catalog import load_catalog
from gpupools.clouds.aws.health import NODE_MONITORING_AGENT, NODE_MONITORING_AGENT_VALUES
from gpupools.clouds.aws.provider import DEFAULT_KUBERNETES_VERSION, MAX_NODES_PER_POOL, NAME
from gpupools.clouds.aws.software import IMDS_V2_ONLY


SYSTEM_POOL = {"instance_type": "t3.large", "min": 1, "max": 3, "desired": 2, "ami_type": "AL2023_x86_64_STANDARD"}
SYSTEM_DEFAULT = SystemPoolSize(SYSTEM_POOL["instance_type"], SYSTEM_POOL["min"], SYSTEM_POOL["max"])
# An EC2 instance type: family (with its generation and options), a dot, a size (t3.large, m7i-flex.xlarge, u-6tb1.metal).
INSTANCE_TYPE_FORM = r"[a-z][a-z0-9-]*\.[a-z0-9]+"
VPC_CIDR = "10.0.0.0/16"
AVAILABILITY_ZONES = 2

# Managed policies a worker node needs to join the cluster, run the VPC CNI and pull images.
NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)
CLUSTER_POLICIES = ("arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",)


def cluster_problems(cluster: Cluster) -> list[Problem]:
    problems = shared_cluster_problems(cluster, NAME)
    if cluster.subnet_ids is not None and len(cluster.subnet_ids) < 2:
        problems.append(Problem("cluster.subnetIds", f"{len(cluster.subnet_ids)} subnet given; EKS needs subnets in at least two availability zones"))
    # CreateNodegroup's scalingConfig takes minSize >= 0 and maxSize >= 1 (botocore eks model, NodegroupScalingConfig); the
    # nodes of a managed node group are bounded by EKS's quota (450 by default) and gpupools' per-pool cap.
    problems += system_pool_problems(cluster, NAME, SYSTEM_DEFAULT, INSTANCE_TYPE_FORM, "an EC2 instance type such as m6i.large",
                                     MAX_NODES_PER_POOL, "gpupools' cap per EKS node group", load_catalog())
    return problems


# Launch templates, like the other EC2, IAM, SQS, EventBridge and Auto Scaling inputs below, are spelled as the
# provider receives them (camelCase): the components register them by type token (see components/wire.py).


def system_launch_template_args() -> dict:
    return {"metadataOptions": dict(IMDS_V2_ONLY),
            "tagSpecifications": [{"resourceType": "instance", "tags": {"gpupools.io/pool": "system"}}]}


def system_node_group_args(cluster_name, node_role_arn, subnet_ids, launch_template_id, launch_template_version,
                           cluster: Cluster | None = None) -> dict:
    """A small on-demand CPU group so CoreDNS, the GPU Operator and Prometheus run without waking a GPU node; its size the
    stack's `cluster.systemPool` (`SYSTEM_DEFAULT` where unset)."""
    size = system_pool_size(cluster, SYSTEM_DEFAULT) if cluster is not None else SYSTEM_DEFAULT
    return {
        "cluster_name": cluster_name,
        "node_group_name": "system",
        "node_role_arn": node_role_arn,
        "subnet_ids": subnet_ids,
        "ami_type": SYSTEM_POOL["ami_type"],
        "capacity_type": "ON_DEMAND",
        "instance_types": [size.machine_type],
        "labels": {"gpupools.io/pool": "system"},
        "scaling_config": {"min_size": size.min_nodes, "max_size": size.max_nodes, "desired_size": size.nodes_at_start(SYSTEM_POOL["desired"])},
        "launch_template": {"id": launch_template_id, "version": launch_template_version},
    }


def subnet_layout(zone_count: int = AVAILABILITY_ZONES) -> list[dict]:
    """Public and private /20s per zone: nodes live in private subnets, load balancers and the NAT in public ones.

    Zones are indexes into the VPC's zone list (`vpc_zones`), whose names AWS gives only at deploy time.
    """
    layout = []
    for i in range(zone_count):
        layout.append({"name": f"public-{i}", "zone_index": i, "cidr": f"10.0.{i * 16}.0/20", "public": True})
        layout.append({"name": f"private-{i}", "zone_index": i, "cidr": f"10.0.{128 + i * 16}.0/20", "public": False})
    return layout


# Cluster controls a new cluster gets when the stack says nothing (config.Cluster documents each switch).
DEFAULT_LOG_TYPES = ("api", "audit", "authenticator")
DEFAULT_LOG_RETENTION_DAYS = 90
DEFAULT_AUTHENTICATION_MODE = "API"
# The add-ons every EKS cluster runs; as EKS managed add-ons they are versioned, updated and reported by EKS.
CORE_ADDONS = ("vpc-cni", "kube-proxy", "coredns")
# CoreDNS is a Deployment: as a managed add-on it only becomes ACTIVE once nodes can run it.
ADDONS_NEEDING_NODES = ("coredns", "eks-node-monitoring-agent")
WORLD = "0.0.0.0/0"


def secrets_encrypted(cluster: Cluster) -> bool:
    return cluster.secrets_encryption is not False


def log_types(cluster: Cluster) -> list[str]:
    return list(DEFAULT_LOG_TYPES if cluster.control_plane_logs is None else cluster.control_plane_logs)


def log_group_args(cluster: Cluster) -> dict | None:
    """The log group EKS writes control-plane logs to, created first so it has a retention (EKS would create it
    without one: logs kept forever, and left behind by `pulumi destroy`)."""
    if not log_types(cluster):
        return None
    return {"name": f"/aws/eks/{cluster.name}/cluster", "retentionInDays": cluster.log_retention_days or DEFAULT_LOG_RETENTION_DAYS}


def secrets_key_args(cluster: Cluster) -> dict | None:
    """The KMS key that envelope-encrypts Kubernetes Secrets in etcd; rotated yearly by KMS."""
    if not secrets_encrypted(cluster):
        return None
    return {"description": f"EKS Secrets envelope encryption for cluster {cluster.name}", "enableKeyRotation": True, "deletionWindowInDays": 30}


def endpoint_config(cluster: Cluster) -> dict:
    """Private access always (nodes reach the API inside the VPC); public access only as the stack says."""
    mode = cluster.endpoint_mode
    config: dict = {"endpoint_private_access": True, "endpoint_public_access": mode != "private"}
    if mode == "restricted":
        config["public_access_cidrs"] = list(cluster.authorized_cidrs or [])
    elif mode == "public":
        config["public_access_cidrs"] = [WORLD]
    return config


def cluster_args(cluster: Cluster, role_arn, subnet_ids, key_arn=None) -> dict:
    args = {
        "name": cluster.name,
        "role_arn": role_arn,
        "version": cluster.kubernetes_version or DEFAULT_KUBERNETES_VERSION,
        "vpc_config": {"subnet_ids": subnet_ids, **endpoint_config(cluster)},
        # The identity that runs `pulumi up` becomes cluster admin through an access entry EKS creates.
        "access_config": {"authentication_mode": cluster.authentication_mode or DEFAULT_AUTHENTICATION_MODE,
                          "bootstrap_cluster_creator_admin_permissions": True},
        "enabled_cluster_log_types": log_types(cluster),
    }
    if key_arn is not None:
        args["encryption_config"] = {"resources": ["secrets"], "provider": {"key_arn": key_arn}}
    return args


# What `gpupools plan` can say of an existing cluster's controls beyond "not checked": what the program reads.
READ_ON_EXISTING = {
    "API endpoint": "read from the cluster by `pulumi preview`, which warns if it is open to the internet",
    "control-plane logs to CloudWatch": "read by `pulumi preview`, which warns about missing api, audit or authenticator logs",
    "authentication mode": "read by `pulumi preview`, which warns unless it is API",
    "managed add-ons": "the Pod Identity agent is read (and required) when Karpenter or cluster-autoscaler needs it",
}


def existing_cluster_findings(name: str, public: bool | None, cidrs: list[str] | None, logs: list[str] | None, mode: str | None) -> list[str]:
    """What an existing cluster, as `aws.eks.getCluster` reads it, lacks of the controls a new one gets. gpupools
    changes nothing on a cluster it did not create; these become warnings of `pulumi preview`."""
    found = []
    if public and (not cidrs or too_open(cidrs)):
        found.append(f"existing EKS cluster {name!r} serves its API endpoint to the whole internet (publicAccessCidrs "
                     f"{', '.join(cidrs or []) or 'unset'}); restrict it with `aws eks update-cluster-config --resources-vpc-config`")
    missing = [t for t in DEFAULT_LOG_TYPES if t not in (logs or [])]
    if missing:
        found.append(f"existing EKS cluster {name!r} does not send its {', '.join(missing)} logs to CloudWatch")
    if mode != DEFAULT_AUTHENTICATION_MODE:
        found.append(f"existing EKS cluster {name!r} authenticates with {mode or 'the aws-auth ConfigMap'}, not access entries only (API)")
    return found


def cluster_controls(cluster: Cluster) -> list[Control]:
    logs = log_types(cluster)
    return [
        endpoint_control(cluster),
        Control("Secrets envelope encryption (KMS key, rotation on)", on_off(secrets_encrypted(cluster)), "secretsEncryption", "eks-secrets-encryption"),
        Control("control-plane logs to CloudWatch", ", ".join(logs) or "off", "controlPlaneLogs", "eks-control-plane-logs"),
        Control("control-plane log retention", f"{cluster.log_retention_days or DEFAULT_LOG_RETENTION_DAYS} days" if logs else "-",
                "logRetentionDays", "eks-control-plane-logs"),
        Control("authentication mode", cluster.authentication_mode or DEFAULT_AUTHENTICATION_MODE, "authenticationMode", "eks-access-entries"),
        Control("managed add-ons", ", ".join(addons(cluster)), "managedAddons", "eks-managed-addons"),
    ]


def addons(cluster: Cluster) -> list[str]:
    """Managed add-ons of a new cluster: the core ones (unless turned off) and the Pod Identity agent, which the
    autoscalers' roles and any team's Pod Identity association need."""
    core = list(CORE_ADDONS) if cluster.managed_addons is not False else []
    return [*core, POD_IDENTITY_AGENT]


def addon_args(cluster_name, addon: str, version) -> dict:
    """OVERWRITE on create: EKS has already installed vpc-cni, kube-proxy and CoreDNS itself; the managed add-on
    takes them over rather than failing on their fields."""
    args = {"clusterName": cluster_name, "addonName": addon, "addonVersion": version, "resolveConflictsOnCreate": "OVERWRITE"}
    if addon == NODE_MONITORING_AGENT:
        args["configurationValues"] = json.dumps(NODE_MONITORING_AGENT_VALUES, separators=(",", ":"))
    return args


def assume_role_policy(service: str) -> str:
    import json

    return json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]})


def kubeconfig(cluster_name: str, endpoint: str, ca_data: str, region: str | None) -> str:
    """A kubeconfig that authenticates with `aws eks get-token`, so no long-lived credential is stored."""
    import json

    args = ["eks", "get-token", "--cluster-name", cluster_name, "--output", "json"]
    if region:
        args += ["--region", region]
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": cluster_name,
        "clusters": [{"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "users": [{"name": cluster_name, "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws", "args": args}}}],
    }, indent=2)


def pod_identity_trust_policy() -> str:
    """EKS Pod Identity: the agent on each node assumes the role for one service account, with session tags."""
    import json

    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": ["sts:AssumeRole", "sts:TagSession"]}]})


POD_IDENTITY_AGENT = "eks-pod-identity-agent"


def vpc_zones(available: list[str], wanted: list[str], count: int = AVAILABILITY_ZONES) -> list[str]:
    """The zones a new VPC spans: every zone a pool asks for, then the region's first zones up to `count`."""
    zones = list(dict.fromkeys(wanted))
    for zone in available:
        if len(zones) >= count:
            break
        if zone not in zones:
            zones.append(zone)
    return zones


# The VPC gpupools creates for a new cluster has a subnet pair in each of at most this many zones.
NEW_NETWORK_MAX_ZONES = 6
