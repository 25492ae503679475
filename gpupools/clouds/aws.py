"""AWS EKS decisions: AMI per node OS, node-group and launch-template inputs, Bottlerocket device-plugin settings.

Functions return keyword arguments for the pulumi_aws resources (snake_case, exactly as the SDK names them);
values the cloud creates at deploy time (ARNs, IDs) are passed in and placed untouched.
"""

from __future__ import annotations

import base64
import difflib
import json
import re

from dataclasses import dataclass, replace
from datetime import date

from gpupools.core.catalog import Catalog, Hardware, load_catalog
from gpupools.core.facts import load_facts
from gpupools.stack.config import Cluster, Pool, Sharing
from gpupools.stack.errors import Problem
from gpupools.core.pools import NodeTemplate, PoolPlan, spell_taint
from gpupools.stack.targets import ProviderFacts, Setting
from gpupools.capacity import sources as capacity
from gpupools.upgrades.policy import UPGRADES_LABEL, PoolUpgrade, Window, pool_upgrade, wait_text
from gpupools.upgrades.nodepool import cron, drift_budgets, duration  # noqa: F401 (cron, duration: the budgets' format)
from gpupools.clouds.common import (KIND, STANDARD_ONLY, Control, KubernetesRelease, endpoint_control, hardware_of, on_off, shared_cluster_problems, newest, reject_fields,
                                    resolve_listed, zone_letter_problems, too_open)
from gpupools.clouds.standard import (ADMITS_HOST_AGENTS, BOUNDS_POOL_NODES, MANAGED_GPU_METRICS, REFUSED_QUOTAS,  # noqa: F401
                                      managed_plan, managed_pool_problems, pod_node_selector)  # standard mode's answers

NAME = "aws"
KIND_WORD = KIND[NAME]  # what a pool's machines are called here, as messages name them
# The Pulumi provider beside `gpupools:` (pulumi-aws): AWS region names are like eu-central-1, us-gov-west-1,
# ap-southeast-5, cn-north-1; the environment variables as pulumi-aws documents them (AWS_REGION, AWS_DEFAULT_REGION).
AWS_REGION = r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$"
PROVIDER = ProviderFacts(
    namespace="aws",
    settings={
        "aws:region": Setting(AWS_REGION, "an AWS region such as eu-central-1", ("AWS_REGION", "AWS_DEFAULT_REGION"), required=True),
        "aws:profile": Setting(r"^[-A-Za-z0-9_.@+=,]{1,128}$", "a profile name of ~/.aws/config"),
        "aws:accessKey": Setting(None, "an access key ID"),
        "aws:secretKey": Setting(None, "a secret access key", secret="always"),
        "aws:token": Setting(None, "a session token", secret="always"),
    },
    sdk_package="pulumi_aws", sdk_name="the AWS provider", sdk_distribution="pulumi-aws")
# The platform component's type for one pool (how `gpupools plan` finds what a pool created).
POOL_COMPONENT = "gpupools:index:EksGpuNodePool"
SERVICE = "EKS"
# Nodes per managed node group: EKS's service quota defaults to 450 and can be raised on request (EKS service
# quotas, "Nodes per managed node group"); gpupools refuses more than 1,000, the per-pool cap of AKS and GKE.
MAX_NODES_PER_POOL = 1000


def max_nodes(pool: Pool, cluster: Cluster | None, hardware: Hardware | None) -> tuple[int, str]:
    """The most nodes one pool may ask for, and what the limit counts."""
    return MAX_NODES_PER_POOL, "per EKS node pool"
TAINT_STYLE = "enum"
PROVIDER_PACKAGE = "pulumi_aws"

# Amazon EKS Kubernetes release calendar (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html, read
# 2026-09): 14 months of standard support from the EKS release, then 12 months of paid extended support, during
# which EKS still creates clusters.
KUBERNETES_RELEASES = {r.minor: r for r in (
    KubernetesRelease("1.31", date(2024, 9, 26), date(2025, 11, 26), date(2026, 11, 26)),
    KubernetesRelease("1.32", date(2025, 1, 23), date(2026, 3, 23), date(2027, 3, 23)),
    KubernetesRelease("1.33", date(2025, 5, 29), date(2026, 7, 29), date(2027, 7, 29)),
    KubernetesRelease("1.34", date(2025, 10, 2), date(2026, 12, 2), date(2027, 12, 2)),
    KubernetesRelease("1.35", date(2026, 1, 27), date(2027, 3, 27), date(2028, 3, 27)),
    KubernetesRelease("1.36", date(2026, 6, 2), date(2027, 8, 2), date(2028, 8, 2)),
)}
DEFAULT_KUBERNETES_VERSION = newest(KUBERNETES_RELEASES)
AMI_TYPES = {"al2023": "AL2023_x86_64_NVIDIA", "bottlerocket": "BOTTLEROCKET_x86_64_NVIDIA"}
SYSTEM_POOL = {"instance_type": "t3.large", "min": 1, "max": 3, "desired": 2, "ami_type": "AL2023_x86_64_STANDARD"}
VPC_CIDR = "10.0.0.0/16"
AVAILABILITY_ZONES = 2

# Managed policies a worker node needs to join the cluster, run the VPC CNI and pull images.
NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)
CLUSTER_POLICIES = ("arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",)

# Bottlerocket names GPUs in its MIG settings as <model>.<memory>gb (settings.kubelet-device-plugins.nvidia.mig.profile).
BOTTLEROCKET_MIG_GPU_KEY = {"A100-40GB": "a100.40gb", "A100-80GB": "a100.80gb", "H100-80GB": "h100.80gb", "H200-141GB": "h200.141gb"}


def cluster_problems(cluster: Cluster) -> list[Problem]:
    problems = shared_cluster_problems(cluster, NAME)
    if cluster.subnet_ids is not None and len(cluster.subnet_ids) < 2:
        problems.append(Problem("cluster.subnetIds", f"{len(cluster.subnet_ids)} subnet given; EKS needs subnets in at least two availability zones"))
    return problems


def pool_problems(pool: Pool, path: str) -> list[Problem]:
    return reject_fields(pool, path, NAME, {"gpu": ("gpu", "gcp n1 machine types"), "gpu_count": ("gpuCount", "gcp n1 machine types"),
                                            "placement": ("placement", "gcore virtual-machine flavors"), "provisioning": ("provisioning", "gcp")})


def resolve(pool: Pool, catalog: Catalog, path: str) -> tuple[Hardware | None, list[Problem]]:
    """The pool's hardware; for a pool over `instanceTypes`, every type must be known and carry the same GPU model, and
    the answer is the type the plan's numbers assume (`representative`)."""
    if not pool.instance_types:
        return resolve_listed(NAME, pool, catalog, path)
    found, problems = [], []
    for i, name in enumerate(pool.instance_types):
        hardware, wrong = resolve_listed(NAME, pool.model_copy(update={"instance_type": name}), catalog, path)
        problems += [Problem(f"{path}.instanceTypes[{i}]", p.message) for p in wrong]
        if hardware is not None:
            found.append(hardware)
    if problems:
        return None, problems
    if len({h.gpu.name for h in found}) > 1:
        models = ", ".join(f"{h.instance_type} has {h.gpu.name}" for h in found)
        return None, [Problem(f"{path}.instanceTypes", f"{models}: a pool's GPU label (gpupools.io/gpu), sharing and GPU metrics name one GPU "
                                                       f"model; list types of one model, or make one pool per model")]
    return representative(found), []


# --------------------------------------------------------------------------------------------------------------------
# Pools over several instance types (`instanceTypes`)

# Pools may list several instance types: a Karpenter NodePool's instance-type requirement takes the list (Karpenter
# picks per pending pod, cheapest first), a managed node group's instanceTypes too (EKS CreateNodegroup).
MULTI_TYPE_POOLS = True


def representative(hardware: list[Hardware]) -> Hardware:
    """The type the plan's price, cost at maxNodes, capacity and quotas assume: the most expensive (then the one with
    the most GPUs, then the first listed), so a budget read off the plan is never below what the pool can cost."""
    return max(hardware, key=lambda h: (h.price_per_node, h.gpus_per_node))


def pool_hardware(pool: Pool) -> list[Hardware]:
    """What a node of the pool may be, one entry per instance type in the stack's order (catalog rows)."""
    catalog = load_catalog()
    return [hardware_of(found) for t in pool_instance_types(pool) if (found := catalog.instance(NAME, t)) is not None and found.gpu is not None]


def type_plans(plan: PoolPlan) -> list[PoolPlan]:
    """The pool's plan once per instance type its nodes may be (its hardware replaced), so per-node facts (GPUs, units,
    what an autoscaler is told) are worked out for each; one entry, the plan itself, for a pool of one type."""
    if not plan.pool.instance_types:
        return [plan]
    return [replace(plan, hardware=h) for h in pool_hardware(plan.pool)]


def instance_type_problems(pool: Pool, path: str, autoscaler: str) -> list[Problem]:
    """What a pool over several instance types cannot have on EKS."""
    if not pool.instance_types:
        return []
    problems = []
    hardware = pool_hardware(pool)
    counts = sorted({h.gpus_per_node for h in hardware})
    if len(counts) > 1 and not _is_karpenter(autoscaler):
        # cluster-autoscaler pictures a node group that sits at zero from one instance type, the first of its Auto
        # Scaling group's mixed-instances overrides (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/
        # aws_manager.go, buildInstanceType: "always use first instance"); EKS keeps the node group's instanceTypes in
        # that order. A pod asking for more GPUs than the first type has would never start a node.
        per_type = ", ".join(f"{h.instance_type} {h.gpus_per_node}" for h in hardware)
        problems.append(Problem(f"{path}.instanceTypes", f"GPUs per node differ ({per_type}): cluster-autoscaler pictures a node group's new "
                                                         f"nodes from its first instance type, so every type of a node group needs the same GPU "
                                                         f"count; list types with one count, or use Karpenter (gpupools:autoscaler: karpenter)"))
    if capacity.reservations(pool):
        problems.append(Problem(f"{path}.capacity", "a reservation or Capacity Block holds one instance type; a pool over instanceTypes "
                                                    "takes on-demand and spot only: give the reserved type a pool of its own"))
    return problems


def pool_instance_types(pool: Pool) -> list[str]:
    """Every instance type a pool's nodes may be: its one `instanceType`, or its `instanceTypes`."""
    return list(pool.instance_types or [pool.instance_type])


def ami_type(pool: Pool) -> str:
    return AMI_TYPES[pool.os or "al2023"]


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


# Launch templates, like the other EC2, IAM, SQS, EventBridge and Auto Scaling inputs below, are spelled as the
# provider receives them (camelCase): the components register them by type token (see components/wire.py).


def system_launch_template_args() -> dict:
    return {"metadataOptions": dict(IMDS_V2_ONLY),
            "tagSpecifications": [{"resourceType": "instance", "tags": {"gpupools.io/pool": "system"}}]}


def launch_template_args(plan: PoolPlan, hugepages: int = 0) -> dict:
    """IMDSv2 only, the pool's encrypted gp3 volume (`node_disk`), and the node's userData (`node_user_data`): Bottlerocket
    settings or AL2023's NodeConfig, the instance store as RAID0, SOCI parallel pull, and `hugepages` pages of 2 MiB
    set aside at boot (EFA pools).

    A launch template is how a managed node group gets IMDSv2 and a disk size at the same time (EKS rejects
    `disk_size` beside a launch template).
    """
    bottlerocket = plan.pool.os == "bottlerocket"
    disk = node_disk(plan.pool)
    args: dict = {
        "metadataOptions": dict(IMDS_V2_ONLY),
        "blockDeviceMappings": [{
            # Bottlerocket keeps images and containers on its second (data) volume.
            "deviceName": "/dev/xvdb" if bottlerocket else "/dev/xvda",
            "ebs": {"volumeSize": disk.size_gb, "volumeType": "gp3", "iops": disk.iops, "throughput": disk.throughput, "encrypted": "true",
                    "deleteOnTermination": "true"},
        }],
        "tagSpecifications": [{"resourceType": "instance", "tags": {"gpupools.io/pool": plan.name}}],
    }
    user_data = node_user_data(plan, raid0=instance_store_raid0(plan.pool), hugepages=hugepages)
    if user_data:
        args["userData"] = base64.b64encode(user_data.encode()).decode()
    args.update(launch_template_capacity(plan.pool))
    return args


def node_group_args(plan: PoolPlan, cluster_name, node_role_arn, subnet_ids, launch_template_id, launch_template_version, kubernetes_version: str | None,
                    labels: dict[str, str], floor: bool = False) -> dict:
    """`floor`: the group is the pool's fixed floor of `minNodes` (Karpenter adds the rest); otherwise it scales from
    `minNodes` to `maxNodes`. `labels` are the nodes' labels, as the pool's autoscaler needs them."""
    pool = plan.pool
    scaling = ({"min_size": pool.min_nodes, "max_size": pool.min_nodes, "desired_size": pool.min_nodes} if floor
               else {"min_size": pool.min_nodes, "max_size": pool.max_nodes, "desired_size": pool.min_nodes})
    args = {
        "cluster_name": cluster_name,
        "node_group_name": f"{pool.name}-floor" if floor else pool.name,
        "node_role_arn": node_role_arn,
        "subnet_ids": subnet_ids,
        "ami_type": ami_type(pool),
        "capacity_type": node_group_capacity_type(pool),
        # Every type of the pool; cluster-autoscaler pictures the group from the first (instance_type_problems).
        "instance_types": pool_instance_types(pool),
        "labels": dict(labels),
        # Startup taints too: the kubelet registers with them, so no pod lands before the GPU stack is validated.
        "taints": [spell_taint(t, TAINT_STYLE) for t in plan.taints + plan.startup_taints],
        "scaling_config": scaling,
        "update_config": node_group_update_config(pool),
        "launch_template": {"id": launch_template_id, "version": launch_template_version},
        "tags": {"gpupools.io/pool": pool.name, "gpupools.io/gpu": plan.hardware.gpu.name, UPGRADES_LABEL: pool_upgrade(pool).kind,
                 **capacity.reserved_marker(pool)},
    }
    if kubernetes_version:
        args["version"] = kubernetes_version
    if capacity.blocks(pool):
        # The block's instance type lives in the launch template; EKS fails a node group that names it twice. The tag
        # lets the policy pack price the group from the node group alone.
        del args["instance_types"]
        args["tags"]["gpupools.io/instance-type"] = pool.instance_type
    args["node_repair_config"] = node_repair_config(plan)
    return args


def system_node_group_args(cluster_name, node_role_arn, subnet_ids, launch_template_id, launch_template_version) -> dict:
    """A small on-demand CPU group so CoreDNS, the GPU Operator and Prometheus run without waking a GPU node."""
    return {
        "cluster_name": cluster_name,
        "node_group_name": "system",
        "node_role_arn": node_role_arn,
        "subnet_ids": subnet_ids,
        "ami_type": SYSTEM_POOL["ami_type"],
        "capacity_type": "ON_DEMAND",
        "instance_types": [SYSTEM_POOL["instance_type"]],
        "labels": {"gpupools.io/pool": "system"},
        "scaling_config": {"min_size": SYSTEM_POOL["min"], "max_size": SYSTEM_POOL["max"], "desired_size": SYSTEM_POOL["desired"]},
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


# Managed modes: EKS Auto Mode beside the standard cluster; its answers are gpupools.clouds.aws_auto's, a standard
# cluster's pools need nothing of them.
AUTO_MODE = "auto-mode"
CLUSTER_MODES = (*STANDARD_ONLY, AUTO_MODE)


def fabric_refusal(pool: Pool, cluster: Cluster | None) -> str | None:
    """EKS Auto Mode takes no placement group and no per-device EFA settings (EKS user guide, "Manage EFA devices":
    "per-device EFA configuration and placement groups are not supported" with Auto Mode), and the EFA device plugin
    chart keeps off Auto Mode nodes (aws/eks-charts v0.5.30 stable/aws-efa-k8s-device-plugin/templates/daemonset.yaml
    lines 60-63: eks.amazonaws.com/compute-type NotIn [auto]); a standard cluster's pools take EFA as `fabric` says."""
    if cluster is not None and cluster.managed_mode == AUTO_MODE:
        return ("EKS Auto Mode takes no placement group or per-device EFA settings, and the EFA device plugin chart keeps off Auto "
                "Mode nodes (its affinity: eks.amazonaws.com/compute-type NotIn auto)")
    return None


def extra_tolerations(plan: PoolPlan) -> list[dict]:
    return []


def zone_problems(pool: Pool, path: str, cluster: Cluster | None, providers: dict, hardware: Hardware | None) -> list[Problem]:
    region = providers.get("aws:region")
    region = region if isinstance(region, str) and re.fullmatch(AWS_REGION, region) else None  # a bad one is reported by itself
    if region is not None and region not in load_facts().aws_regions:
        return []  # region_problems names the region itself
    problems = zone_letter_problems(pool, path, region, f"{region or 'eu-central-1'}a")
    problems += [Problem(f"{path}.zones[{i}]", f"{zone!r} is not a zone of region {region}: AWS zone names are the region and one letter a to f "
                                               f"(no region has more than six zones); `aws ec2 describe-availability-zones --region {region}` lists yours")
                 for i, zone in enumerate(pool.zones or []) if not problems and region and zone[len(region):] not in ZONE_LETTERS]
    for s in capacity.sources(pool):  # a reservation's zones pin the pool there: they must be the region's too
        if s.reservation is not None and s.reservation.zones and not pool.zones:
            problems += zone_letter_problems(pool.model_copy(update={"zones": s.reservation.zones}), f"{s.path(path)}.reservation", region,
                                             f"{region or 'eu-central-1'}a")
    if problems or region is None or hardware is None:
        return problems
    return offering_problems(pool, path, region)


# AWS availability-zone names end in one letter; us-east-1, the largest region, runs from a to f.
ZONE_LETTERS = tuple("abcdef")


def region_problems(providers: dict) -> list[Problem]:
    """A region botocore's endpoint data does not know (facts_aws.yaml, refreshed from botocore)."""
    region = providers.get("aws:region")
    if not isinstance(region, str) or not re.fullmatch(AWS_REGION, region) or region in load_facts().aws_regions:
        return []
    close = difflib.get_close_matches(region, load_facts().aws_regions, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else "see `aws ec2 describe-regions`"
    return [Problem("aws:region", f"{region!r} is not an AWS region; {hint} (regions known to botocore's endpoint data)")]


def offering_problems(pool: Pool, path: str, region: str) -> list[Problem]:
    """Whether EC2 offers the instance type in the region (SkyPilot's catalog of DescribeInstanceTypeOfferings, by
    zone ID). Zone names map to zone IDs differently in every account, so a zone is judged by count only: a pool
    cannot use more zones than the region has zones offering its type (over several types, its most offered one)."""
    facts = load_facts()
    problems, offered = [], {}
    for i, name in enumerate(pool_instance_types(pool)):
        zone_ids = facts.aws_regions_offering(name, region)
        if zone_ids is None:
            continue
        if not zone_ids:
            where = sorted(facts.aws_offerings.get(name, {}))
            field = f"{path}.instanceTypes[{i}]" if pool.instance_types else f"{path}.instanceType"
            problems.append(Problem(field, f"{name} is not offered in {region}; regions that offer it: {', '.join(where) or 'none known'} "
                                           f"(gpupools catalog --cloud aws)"))
        offered[name] = zone_ids
    if problems or not offered:
        return problems
    name, zone_ids = max(offered.items(), key=lambda item: len(item[1]))
    wanted = sorted(set(pool.zones or []))
    if len(wanted) > len(zone_ids):
        return [Problem(f"{path}.zones", f"{len(wanted)} zones asked, but {name} is offered in only {len(zone_ids)} zone"
                                         f"{'s' if len(zone_ids) != 1 else ''} of {region} (zone IDs {', '.join(zone_ids)}); list at most "
                                         f"{len(zone_ids)}: `aws ec2 describe-availability-zones --region {region}` maps your zone names to IDs")]
    return []


def node_template(plan: PoolPlan) -> NodeTemplate | None:
    """EKS has no managed autoscaler: Karpenter and cluster-autoscaler picture new nodes themselves."""
    return None


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


def pool_zones(pools: list[Pool]) -> list[str]:
    """Zones pools ask for, their own or their reservations'."""
    return sorted({zone for pool in pools for zone in (capacity.placement_zones(pool) or [])})


# --------------------------------------------------------------------------------------------------------------------
# Node storage and image pulls: the instance store, the EBS volume, SOCI parallel pull
#
# Multi-GB CUDA images dominate how long a GPU node takes from launch to running its pod. Every GPU node gpupools makes
# turns its instance store into one RAID0 array that holds the image store, and pulls images with the SOCI
# snapshotter's parallel pull and unpack mode, as awslabs/ai-on-eks sets up its GPU node classes
# (infra/base/terraform/karpenter-resources/templates/al2023_ec2nodeclass.tpl and bottlerocket_ec2nodeclass.tpl:
# instanceStorePolicy RAID0, NodeConfig featureGates.FastImagePull on AL2023, the soci-snapshotter settings on
# Bottlerocket; as in the fork erezzarum/ai-on-eks @ 1b752b32 and 5e6282cb) and as AWS describes SOCI parallel pull for
# EKS (aws.amazon.com/blogs/containers, "Introducing Seekable OCI Parallel Pull mode for Amazon EKS").


def pool_local_nvme_gb(pool: Pool) -> int:
    """The instance store every node of the pool has for certain (the smallest over its types; 0 if one has none), from
    the catalog (Karpenter v1.14.1's instance-type reference, `localNvmeGb`)."""
    return min(load_catalog().fabric_of(NAME, t).local_nvme_gb for t in pool_instance_types(pool))


def instance_store_raid0(pool: Pool) -> bool:
    """Whether the pool's nodes turn their instance store into one RAID0 array: wherever every type of the pool has
    one. A type without one would get Karpenter's or nodeadm's RAID0 step with nothing to assemble and the image store on
    EBS, which `node_disk` then sizes for."""
    return pool_local_nvme_gb(pool) > 0


# Bottlerocket's SOCI settings (Bottlerocket 1.44.0 and later: "Add soci-snapshotter support to kubernetes variants",
# bottlerocket PR 4593; settings.container-runtime.snapshotter and settings.container-runtime-plugins.soci-snapshotter,
# bottlerocket.dev/en/os/1.53.x/api/settings/container-runtime-plugins), with the parallel pull values of ai-on-eks's
# Bottlerocket node class (bottlerocket_ec2nodeclass.tpl: 20 downloads per image, 16 MB chunks, 10 unpacks, layers
# discarded once unpacked). A change of snapshotter takes effect at boot only, which is when gpupools' nodes get it.
BOTTLEROCKET_FAST_PULL = ('[settings.container-runtime]\nsnapshotter = "soci"\n\n'
                          '[settings.container-runtime-plugins.soci-snapshotter]\npull-mode = "parallel-pull-unpack"\n\n'
                          '[settings.container-runtime-plugins.soci-snapshotter.parallel-pull-unpack]\n'
                          'max-concurrent-downloads-per-image = 20\nconcurrent-download-chunk-size = "16mb"\n'
                          'max-concurrent-unpacks-per-image = 10\ndiscard-unpacked-layers = true\n')


@dataclass(frozen=True)
class NodeDisk:
    """A GPU node's EBS volume (AL2023's root volume /dev/xvda, Bottlerocket's data volume /dev/xvdb): gp3, encrypted."""

    size_gb: int
    iops: int
    throughput: int  # MiB/s
    images_on: str  # where containerd's and SOCI's image store lives: "the instance store" or "EBS"


# The EBS volume per class of GPU node, where the stack sets no diskSizeGb. ai-on-eks gives every GPU node class a 300 GiB
# gp3 volume (al2023_ec2nodeclass.tpl /dev/xvda 300Gi; bottlerocket_ec2nodeclass.tpl data volume /dev/xvdb 300Gi) and
# raises it to 16,000 IOPS and 1,000 MiB/s only where SOCI keeps its store on EBS (`soci_snapshotter_use_instance_store`
# false); with the store on the instance store the volume stays at gp3's baseline. amazon-eks-ami's nodeadm docs ask
# for at least 600 MiB/s, and find up to 1,000 MiB/s and 16,000 IOPS faster, when fast image pull writes to EBS
# (nodeadm/doc/examples.md, "Enabling fast image pull").
DISK_CLASSES = {
    "the instance store": (300, 3000, 125),
    "EBS": (300, 16000, 1000),
}
# gp3: at most 500 IOPS per GiB and 0.25 MiB/s per IOPS (EBS user guide, "General Purpose SSD volumes"), from a
# baseline of 3,000 IOPS and 125 MiB/s at any size (botocore ec2 LaunchTemplateEbsBlockDeviceRequest, Iops and Throughput).
GP3_IOPS_PER_GIB = 500
GP3_MIBS_PER_IOPS = 0.25
GP3_BASELINE = (3000, 125)


def node_disk(pool: Pool) -> NodeDisk:
    """The pool's EBS volume: its class's size, IOPS and throughput (`DISK_CLASSES`), or the stack's diskSizeGb with the
    class's IOPS and throughput as far as gp3 allows them on that size."""
    images_on = "the instance store" if instance_store_raid0(pool) else "EBS"
    size, iops, throughput = DISK_CLASSES[images_on]
    size = pool.disk_size_gb or size
    iops = max(GP3_BASELINE[0], min(iops, size * GP3_IOPS_PER_GIB))
    throughput = max(GP3_BASELINE[1], min(throughput, int(iops * GP3_MIBS_PER_IOPS)))
    return NodeDisk(size, iops, throughput, images_on)


def node_disk_line(plan: PoolPlan) -> str:
    """The plan's `disk` row: the EBS volume and what it holds."""
    disk = node_disk(plan.pool)
    volume = "data volume" if plan.pool.os == "bottlerocket" else "root volume"
    holds = ("the node's own files (images on the instance store)" if disk.images_on == "the instance store"
             else "the node's files and the image store (SOCI parallel pull)")
    size = f"{disk.size_gb} GiB" + ("" if plan.pool.disk_size_gb else " (the class default)")
    return f"EBS {volume} {size} gp3, {disk.iops:,} IOPS, {disk.throughput:,} MiB/s, for {holds}"


# --------------------------------------------------------------------------------------------------------------------
# The fabric: EFA between nodes, a cluster placement group, and the nodes' instance store

# The extended resource the EFA device plugin advertises, one per EFA interface (EKS user guide ml/node-efa.adoc;
# Karpenter pkg/apis/v1/labels.go ResourceEFA).
FABRIC_RESOURCE = "vpc.amazonaws.com/efa"
FABRIC_NAME = "EFA"
# Coarse to fine: the EC2 instance topology (DescribeInstanceTopology) as the AWS cloud controller manager writes it
# onto nodes, `topology.k8s.aws/network-node-layer-<n>` counting from 1 at the top (kubernetes/cloud-provider-aws
# pkg/providers/v1/well_known_labels.go LabelNetworkNodePrefix, instances_v2.go getAdditionalLabels). Layer 3 is
# the bottom for most instance types (EKS user guide "ml-workload-topology"); a fourth exists only on some.
TOPOLOGY_LEVELS = (("layer-1", "topology.k8s.aws/network-node-layer-1"), ("layer-2", "topology.k8s.aws/network-node-layer-2"),
                   ("layer-3", "topology.k8s.aws/network-node-layer-3"))
# EFA traffic stays in one Availability Zone and a cluster placement group is one zone's.
FABRIC_ZONES = "one"
# EFA beside MIG slices (`fabric: on` on a MIG pool): the EFA device plugin advertises the interfaces by count, whatever
# the GPU Operator makes of the GPUs, and GPUDirect RDMA is supported from MIG GPU instances (NVIDIA MIG user guide,
# Deployment Considerations, "Application Considerations"); p4d, the instance type of AWS's MIG on EKS walkthrough,
# carries 400 Gbps EFA beside up to 56 slices (AWS containers blog, "Utilizing NVIDIA Multi-Instance GPU (MIG) in Amazon
# EC2 P4d Instances on Amazon EKS"). NCCL is not supported with MIG (same guide): jobs on the slices reach EFA through
# libfabric (MPI, NIXL), not NCCL.
FABRIC_WITH_MIG = True


# Why a pool whose capacity is a Capacity Block gets no placement group. EC2 places a block's instances together itself:
# "Capacity Blocks deliver low-latency, high-throughput network connectivity between the instances inside the Capacity
# Block, so there is no need to use a cluster placement group with a Capacity Block" (EC2 user guide,
# capacity-blocks-using), and a placement group beside the block can fail launches the block has room for: AWS
# ParallelCluster warns "When using a capacity block reservation, a placement group constraint should not be set as
# insufficient capacity errors may occur due to placement constraints outside of the reservation even if the capacity
# reservation has remaining capacity" (aws/aws-parallelcluster v3.11.1, cli/src/pcluster/validators/ec2_validators.py
# lines 588-599, PlacementGroupCapacityTypeValidator) and asks for no placement group on EFA queues that run on a block
# (cluster_validators.py lines 383-385, EfaPlacementGroupValidator).
BLOCK_PLACEMENT = "no placement group: Capacity Block instances are already placed together"


def fabric_placement(cluster_name: str, pool: Pool) -> tuple[str, str | None, bool]:
    """How a fabric pool's nodes are kept close (description, the cluster placement group to create or None, whether
    something keeps them close): a
    placement group of its own, or, for a pool whose capacity is a Capacity Block, the block's own placement. One
    EC2NodeClass (or launch template) serves the whole pool, so hourly capacity listed after the block starts outside a
    placement group too."""
    if capacity.blocks(pool):
        hourly = [k for k in capacity.kinds(pool) if k != capacity.RESERVED]
        return f"the Capacity Block's own placement ({BLOCK_PLACEMENT}" + (f"; {'/'.join(hourly)} nodes start without one" if hourly else "") + ")", None, True
    name = f"{cluster_name}-{pool.name}"
    return f"placement group {name}", name, True


def fabric_readiness(cluster: Cluster, plan: PoolPlan) -> tuple[bool, tuple[str, ...]]:
    """EFA pods need nothing the stack does not install (the device plugin, huge pages, the node class)."""
    return True, ()


def fabric_pool_problems(pool: Pool, path: str) -> list[Problem]:
    return []


def local_nvme_use(pool: Pool, fabric_on: bool) -> str | None:
    """Every pool's instance store becomes one RAID0 array (`instance_store_raid0`), fabric or not."""
    if not instance_store_raid0(pool):
        return None
    return "as one RAID0 array: the kubelet's ephemeral storage and the image store (containerd, SOCI parallel pull)"


def placement_group_args(cluster_name: str, pool: str) -> dict:
    """A cluster placement group per fabric pool: its instances packed close in one zone's low-latency network
    (EC2 CreatePlacementGroup Strategy=cluster)."""
    return {"name": f"{cluster_name}-{pool}", "strategy": "cluster",
            "tags": {"gpupools.io/pool": pool, f"kubernetes.io/cluster/{cluster_name}": "owned"}}


def efa_security_group_args(cluster_name: str, vpc_id) -> dict:
    return {"name": f"{cluster_name}-efa", "description": "EFA: all traffic between the fabric pools' nodes", "vpcId": vpc_id,
            "tags": {f"kubernetes.io/cluster/{cluster_name}": "owned", "Name": f"{cluster_name}-efa"}}


def efa_security_group_rules(group_id) -> dict[str, dict]:
    """EFA's OS-bypass traffic passes only a security group that allows all traffic to and from itself, both ways
    (EC2 user guide efa-start; AWS PCS working-with_networking_efa_create-sg: `--protocol -1 --source-group SG`
    ingress and egress). ipProtocol -1 is every protocol and port (aws.vpc.SecurityGroupIngressRule)."""
    rule = {"securityGroupId": group_id, "ipProtocol": "-1", "referencedSecurityGroupId": group_id,
            "description": "EFA between the fabric pools' nodes"}
    return {"ingress": dict(rule), "egress": dict(rule)}


def efa_network_interfaces(count: int, security_group_ids) -> list[dict]:
    """A managed node group's launch template: an EFA (EFA with ENA, `efa`) on every network card, one per card, the
    one on card 0 as the primary interface (EKS user guide ml/node-efa.adoc: "You can assign up to one EFA per
    network card"; EC2 InterfaceType efa works on every EFA instance type, where efa-only needs the card to list it).
    Device index 1 on the further cards, as Karpenter lays out the EFAs it attaches itself
    (pkg/providers/launchtemplate/launchtemplate.go generateNetworkInterfaces)."""
    return [{"networkCardIndex": card, "deviceIndex": 0 if card == 0 else 1, "interfaceType": "efa", "securityGroups": security_group_ids,
             "deleteOnTermination": "true"} for card in range(count)]


# Huge pages for EFA. libfabric's EFA provider backs its bounce buffers with huge pages (ofiwg/libfabric
# prov/efa/docs/overview.md), and EFA pods ask for them: the EKS user guide's NCCL test asks for hugepages-2Mi: 5120Mi
# per p5.48xlarge worker, and says "Amazon EC2 instances with the EFA driver installed pre-allocate 5128 2MiB Huge
# Pages" (awsdocs/amazon-eks-user-guide @ 4d52b4d0, latest/ug/ml/node-efa.adoc lines 55 and 259).
#
# The node images gpupools runs do not set them aside at boot themselves, so gpupools does, in the nodes' userData:
# - the EKS AL2023 NVIDIA AMI installs EFA with `efa_installer.sh --minimal -y` and nothing else touches huge pages
#   (awslabs/amazon-eks-ami v20260724 @ 81fec2e8, templates/al2023/provisioners/install-efa.sh lines 52-53; the image's
#   sysctl files, templates/al2023/runtime/rootfs/etc/sysctl.conf and sysctl.d/, set no vm.nr_hugepages); what the
#   closed EFA installer does at boot cannot be read from the image's source;
# - Bottlerocket computed 110 pages per CPU when an EFA device is attached (bottlerocket-os/bottlerocket-core-kit
#   @ 22cee7be, sources/api/corndog/src/main.rs lines 28, 127-139 and 170-173, `generate-hugepages-setting`), wired as
#   the setting generator of settings.kernel.sysctl."vm/nr_hugepages" from Bottlerocket 1.26 (bottlerocket PR 4290)
#   until it was dropped (bottlerocket PR 4411, "defaults: drop setting generator for hugepages"): today's
#   sources/shared-defaults/defaults.toml (@ 1397d7a7) has no generator for it, so a node allocates none by itself.
# A Karpenter NodeClaim whose pods ask for a resource is initialized only once the node's allocatable has it
# (kubernetes-sigs/karpenter v1.14.1 @ 6e7eab7a, pkg/controllers/nodeclaim/lifecycle/initialization.go lines
# 130-146, RequestedResourcesRegistered), and the kubelet reports the huge pages set aside when it starts: pages
# allocated later never register. So the pages are allocated before the kubelet starts, and what NodeOverlays and
# cluster-autoscaler tags advertise is read back from this userData (`allocated_hugepages`).
EFA_HUGE_PAGE_COUNT = 5128
HUGE_PAGE_MI = 2
EFA_HUGE_PAGES = f"{EFA_HUGE_PAGE_COUNT * HUGE_PAGE_MI}Mi"
# What gpupools' userData sets: `vm.nr_hugepages` (AL2023) or `"vm/nr_hugepages"` (Bottlerocket).
_NR_HUGEPAGES = re.compile(r'vm[./]nr_hugepages"?\s*=\s*"?(\d+)')
MIME_BOUNDARY = "GPUPOOLS"


def node_hugepages(fabric_kind: str | None) -> int:
    """2 MiB huge pages gpupools has a new node of a pool set aside at boot: the EFA driver's count on EFA pools."""
    return EFA_HUGE_PAGE_COUNT if fabric_kind == "efa" else 0


def hugepages_bottlerocket(pages: int) -> str:
    """Bottlerocket's kernel settings: corndog writes them before the kubelet starts (bottlerocket-core-kit
    sources/api/corndog). The slash spelling is the key Bottlerocket 1.26-1.33 generated for EFA nodes: set by the user
    it replaces the generated value instead of racing it (bottlerocket PR 4411 shows `vm.nr_hugepages` beside the
    generated `vm/nr_hugepages` overwritten), and Bottlerocket's maintainers give that spelling as the override for
    1.28 and later, where the generated key and a user's dotted key would otherwise both be written."""
    return f'[settings.kernel.sysctl]\n"vm/nr_hugepages" = "{pages}"\n'


def hugepages_script(pages: int) -> str:
    """AL2023: a cloud-init script, which runs before nodeadm starts the kubelet (amazon-eks-ami
    templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-run.service: After=cloud-final.service). It never lowers a
    count the image set aside itself, and a sysctl.d file keeps the pages over a reboot."""
    return ("#!/bin/bash\n# Huge pages for EFA (libfabric's bounce buffers), set aside before the kubelet starts so it registers hugepages-2Mi.\n"
            f"echo 'vm.nr_hugepages = {pages}' > /etc/sysctl.d/90-gpupools-efa-hugepages.conf\n"
            f"[ \"$(cat /proc/sys/vm/nr_hugepages)\" -ge {pages} ] || sysctl -w vm.nr_hugepages={pages}\n")


def mime_user_data(parts: list[tuple[str, str]]) -> str:
    """A MIME multi-part archive, the userData form AL2023 nodes take and EKS and Karpenter merge their own NodeConfig
    into (Karpenter docs, concepts/nodeclasses.md @ v1.14.1, spec.userData, AL2023)."""
    body = "".join(f"--{MIME_BOUNDARY}\nContent-Type: {kind}\n\n{text}\n" for kind, text in parts)
    return f"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{MIME_BOUNDARY}\"\n\n{body}--{MIME_BOUNDARY}--\n"


def raid0_bottlerocket() -> str:
    """Bottlerocket: the instance store as one RAID0 array bound over the runtime's directories, the bootstrap command
    Karpenter's instanceStorePolicy RAID0 generates (aws/karpenter-provider-aws v1.14.1
    pkg/providers/amifamily/bootstrap/bottlerocket.go lines 99-116: `apiclient ephemeral-storage init`, then `bind`). Without
    `--dirs`, as Karpenter binds on Bottlerocket 1.46.0 and later and on `bottlerocket@latest`
    (pkg/providers/version/version.go, SupportsDefaultBind), which an EKS managed node group runs too: Bottlerocket's own
    list, which also moves SOCI's store, /var/lib/soci-snapshotter, onto the array (aws-samples/karpenter-blueprints
    blueprints/soci-snapshotter/README.md, "Configuration")."""
    return ('[settings.bootstrap-commands.000-mount-instance-storage]\n'
            'commands = [["apiclient", "ephemeral-storage", "init"], ["apiclient", "ephemeral-storage", "bind"]]\n'
            'mode = "always"\nessential = true\n')


def node_config(raid0: bool, fast_pull: bool) -> str | None:
    """AL2023: a nodeadm NodeConfig (node.eks.aws/v1alpha1), which nodeadm merges with the one EKS or Karpenter writes
    (Karpenter docs, concepts/nodeclasses.md @ v1.14.1, spec.userData, AL2023).

    - `featureGates.FastImagePull`: nodeadm switches containerd to the SOCI snapshotter in parallel pull and unpack
      mode (awslabs/amazon-eks-ami v20260724 nodeadm/internal/containerd/config.go, UseSOCISnapshotter; the AMI installs
      soci-snapshotter, templates/al2023/provisioners/install-worker.sh lines 217-221; nodeadm/doc/examples.md,
      "Enabling fast image pull"). nodeadm ignores it below 4 vCPUs or 7 GiB of memory; every GPU instance type in
      the catalog has more.
    - `instance.localStorage.strategy: RAID0`: the instance store as one array, with /var/lib/kubelet,
      /var/lib/containerd, /var/log/pods and SOCI's store (/var/lib/soci-snapshotter-grpc) bound onto it
      (templates/al2023/runtime/bin/setup-local-disks lines 95-110), as Karpenter's instanceStorePolicy RAID0 does it
      (pkg/providers/amifamily/bootstrap/nodeadm.go); Karpenter's node classes leave it to Karpenter."""
    spec = []
    if fast_pull:
        spec.append("  featureGates:\n    FastImagePull: true\n")
    if raid0:
        spec.append("  instance:\n    localStorage:\n      strategy: RAID0\n")
    if not spec:
        return None
    return "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n" + "".join(spec)


def node_user_data(plan: PoolPlan, raid0: bool, hugepages: int = 0) -> str | None:
    """A GPU node's userData, for a Karpenter node class (`raid0=False`: Karpenter builds the array itself,
    instanceStorePolicy) and a managed node group's launch template alike:

    - Bottlerocket: TOML of the device plugin's settings (`bottlerocket_settings`), SOCI parallel pull
      (`BOTTLEROCKET_FAST_PULL`), the RAID0 bootstrap command, and the huge pages of EFA pools;
    - AL2023: a MIME archive of a NodeConfig (`node_config`: fast image pull, RAID0) and the huge page script."""
    if plan.pool.os == "bottlerocket":
        toml = [bottlerocket_settings(plan), BOTTLEROCKET_FAST_PULL, raid0_bottlerocket() if raid0 else None,
                hugepages_bottlerocket(hugepages) if hugepages else None]
        return "\n".join(t for t in toml if t)
    config = node_config(raid0, fast_pull=True)
    parts = ([("application/node.eks.aws", config)] if config else []) + \
            ([('text/x-shellscript; charset="us-ascii"', hugepages_script(hugepages))] if hugepages else [])
    return mime_user_data(parts) if parts else None


def allocated_hugepages(user_data: str | None) -> int:
    """2 MiB huge pages a node set aside at boot by this userData (the largest count it sets), 0 when it sets none."""
    return max((int(n) for n in _NR_HUGEPAGES.findall(user_data or "")), default=0)


def fabric_launch_template_args(args: dict, efa: int, placement_group: str | None, security_group_ids) -> dict:
    """A fabric pool's launch template (`launch_template_args`, whose userData already sets aside the EFA driver's huge
    pages): EFA on every card, and the pool's placement group (none on a Capacity Block)."""
    out = {**args, "networkInterfaces": efa_network_interfaces(efa, security_group_ids)}
    if placement_group is not None:
        out["placement"] = {"groupName": placement_group}
    return out


def fabric_pod(count: int, pool: str = "", kind: str = "", networks: int = 0) -> dict:
    """What a pod on an EFA node needs beside its GPUs: every EFA interface, and the huge pages the EFA driver's
    nodes set aside (EKS user guide ml/node-efa.adoc: each p5.48xlarge worker asks for vpc.amazonaws.com/efa: 32 and
    hugepages-2Mi: 5120Mi; the Job builder asks for no more than the node registers). Env after
    aws-samples/awsome-distributed-training (nccl-tests.yaml: FI_PROVIDER=efa; FSDP example: NCCL_SOCKET_IFNAME=^lo,
    TORCH_NCCL_ASYNC_ERROR_HANDLING=1); with current libfabric and aws-ofi-nccl no other FI_* setting is needed
    (1.architectures/efa-cheatsheet.md)."""
    return {"limits": {FABRIC_RESOURCE: count, "hugepages-2Mi": "5120Mi", "memory": "64Gi"},
            "env": {"FI_PROVIDER": "efa", "NCCL_SOCKET_IFNAME": "^lo", "NCCL_DEBUG": "INFO", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
            "capabilities": []}


def fabric_node_resources(efa: int) -> dict[str, str]:
    """What a new EFA node offers beside its GPUs, as an autoscaler must be told: its EFA interfaces and the huge pages
    its launch template sets aside (`launch_template_args`)."""
    return {FABRIC_RESOURCE: str(efa), "hugepages-2Mi": f"{node_hugepages('efa') * HUGE_PAGE_MI}Mi"}


# --------------------------------------------------------------------------------------------------------------------
# Capacity: ODCRs and Capacity Blocks, on Karpenter and on managed node groups

# Karpenter 1.14.1's EC2NodeClass capacityReservationSelectorTerms[].id pattern (karpenter.k8s.aws_ec2nodeclasses.yaml).
RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")
# EC2 starts terminating Capacity Block instances 30 minutes before the block ends; Karpenter deletes their
# NodeClaims 40 minutes before (aws/karpenter-provider-aws pkg/apis/v1/ec2nodeclass_status.go,
# capacityReservationExpirationPeriod), and EKS scales a CAPACITY_BLOCK node group to zero 40 minutes before
# (EKS user guide, capacity-blocks-mng: "Capacity Scaledown Before Reservation End").
BLOCK_DRAIN_MINUTES = 40
BLOCK_TERMINATE_MINUTES = 30
# Karpenter's NodePool capacity types: reserved (ODCRs and Capacity Blocks), spot, on-demand; with several
# allowed it tries reserved, then spot, then on-demand (Karpenter docs, NodePools, "Capacity Type").
KARPENTER_ORDER = (capacity.RESERVED, capacity.SPOT, capacity.ON_DEMAND)
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"


def _is_karpenter(autoscaler: str) -> bool:
    return autoscaler == "karpenter"


def node_group_capacity_type(pool: Pool) -> str:
    """EKS CreateNodegroup capacityType: CAPACITY_BLOCK for a block, SPOT for a spot pool, ON_DEMAND otherwise
    (an ODCR is on-demand capacity the launch template points at)."""
    if capacity.blocks(pool):
        return "CAPACITY_BLOCK"
    return "SPOT" if capacity.spot_only(pool) else "ON_DEMAND"


def launch_template_capacity(pool: Pool) -> dict:
    """What the launch template of a managed node group says about reservations (EC2 CreateLaunchTemplate
    LaunchTemplateData, as the provider names it).

    - a Capacity Block: market type `capacity-block`, the block's id and the instance type in the template (EKS
      user guide, capacity-blocks-mng: all three are required, and the node group sets capacityType CAPACITY_BLOCK);
    - an ODCR alone: the reservation as target, so nodes start in it or not at all;
    - an ODCR, then on-demand: preference `open`, so a node starts in any open reservation matching its instance
      type and zone, else as on-demand (EC2 CapacityReservationPreference).
    """
    found = capacity.reservations(pool)
    if not found:
        return {}
    reservation = found[0]
    if reservation.kind == "capacity-block":
        return {"instanceType": pool.instance_type, "instanceMarketOptions": {"marketType": "capacity-block"},
                "capacityReservationSpecification": {"capacityReservationTarget": {"capacityReservationId": reservation.id}}}
    if capacity.has(pool, capacity.ON_DEMAND):
        return {"capacityReservationSpecification": {"capacityReservationPreference": "open"}}
    return {"capacityReservationSpecification": {"capacityReservationTarget": {"capacityReservationId": reservation.id}}}


def reservation_selector_terms(pool: Pool) -> list[dict]:
    """EC2NodeClass capacityReservationSelectorTerms: an id term alone (the CRD makes id exclusive), or tags with an
    optional owner. Karpenter never matches an open ODCR by itself: every reservation must be selected."""
    terms = []
    for r in capacity.reservations(pool):
        if r.id is not None:
            terms.append({"id": r.id})
        else:
            term: dict = {"tags": dict(r.tags or {})}
            if r.owner_id:
                term["ownerID"] = r.owner_id
            terms.append(term)
    return terms


def karpenter_capacity_types(pool: Pool) -> list[str]:
    """The NodePool's karpenter.sh/capacity-type values, in the stack's order."""
    return [k for k in capacity.kinds(pool) if k in KARPENTER_ORDER]


def capacity_flavor_labels(pool: Pool, autoscaler: str) -> list[tuple[str, dict[str, str]]]:
    """Node labels that tell a pool's capacity kinds apart, for queue flavors: Karpenter labels reserved nodes
    `karpenter.sh/capacity-type=reserved`, so reserved and hourly capacity become two flavors; the hourly flavor
    names the capacity type only when there is one (Karpenter picks between spot and on-demand itself)."""
    types = karpenter_capacity_types(pool)
    if not _is_karpenter(autoscaler) or capacity.RESERVED not in types or len(types) == 1:
        return [("", {})]
    hourly = [t for t in types if t != capacity.RESERVED]
    return [(capacity.RESERVED, {CAPACITY_TYPE_LABEL: capacity.RESERVED}),
            ("hourly" if len(hourly) > 1 else hourly[0], {CAPACITY_TYPE_LABEL: hourly[0]} if len(hourly) == 1 else {})]


def provisioning_request_class(pool: Pool) -> str | None:
    """EKS offers no queued provisioning through ProvisioningRequests."""
    return None


# Karpenter puts a NodePool's name on every node it starts, as the value of the label karpenter.sh/nodepool (and the
# NodeOverlay beside it carries the same name), and a Kubernetes label value is at most 63 characters (apimachinery
# validation IsValidLabelValue). gpupools names both "gpupools-" + the pool, so a pool name over 54 characters gives
# names the cluster accepts as objects but whose nodes can never be labelled. The name is refused rather than shortened:
# it is the name people select the pool by (kubectl get nodepool, Kueue flavors, the plan), so it stays what they wrote.
# Managed node groups are named after the pool itself (or "<pool>-floor"), within EKS's 63-character node group names.
KARPENTER_POOL_NAME_MAX = 63 - len("gpupools-")


def pool_name_problems(pool: Pool, path: str, autoscaler: str) -> list[Problem]:
    if _is_karpenter(autoscaler) and len(pool.name) > KARPENTER_POOL_NAME_MAX:
        return [Problem(f"{path}.name", f"{len(pool.name)} characters; under Karpenter at most {KARPENTER_POOL_NAME_MAX}: its NodePool "
                                        f"gpupools-<name> is the node label karpenter.sh/nodepool, at most 63 characters")]
    return []


def capacity_problems(pool: Pool, path: str, autoscaler: str, cluster: Cluster | None, hardware: Hardware | None) -> list[Problem]:
    """What EKS, and the pool's autoscaler, can do with the capacity list (and with a pool over several instance types)."""
    names = pool_name_problems(pool, path, autoscaler)
    if names:
        return names
    problems: list[Problem] = instance_type_problems(pool, path, autoscaler) if hardware is not None else []
    if pool.capacity is None or problems:
        return problems
    listed = capacity.sources(pool)
    for s in listed:
        where = s.path(path)
        if s.kind in (capacity.FLEX_START, capacity.QUEUED, capacity.ANY_RESERVATION):
            problems.append(Problem(where, f"{s.kind} is a GKE capacity kind; on EKS use a reservation (ODCR or Capacity Block), on-demand or spot"))
        if s.reservation is None:
            continue
        r = s.reservation
        if r.id is None and r.tags is None:
            problems.append(Problem(f"{where}.reservation", "names no reservation; give id (cr-...) or tags"))
        elif r.id is not None and (r.tags is not None or r.owner_id is not None):
            problems.append(Problem(f"{where}.reservation.id", "an id selects one reservation by itself; drop tags and ownerId, or drop id "
                                                               "(Karpenter's capacityReservationSelectorTerms make id exclusive)"))
        elif r.id is not None and not RESERVATION_ID.match(r.id):
            problems.append(Problem(f"{where}.reservation.id", f"{r.id!r} is not an EC2 capacity reservation id such as cr-0123456789abcdef0"))
        if r.zones and len(r.zones) > 1:
            problems.append(Problem(f"{where}.reservation.zones", "an EC2 capacity reservation holds capacity in one availability zone; give that zone"))
        if r.kind == "capacity-block" and pool.min_nodes > 0:
            problems.append(Problem(f"{path}.minNodes", f"{pool.min_nodes}, but a Capacity Block runs only between its start and end time; "
                                                        f"set minNodes: 0 (EKS keeps the group at zero until the block starts)"))
    if _is_karpenter(autoscaler):
        order = [k for k in capacity.kinds(pool) if k in KARPENTER_ORDER]
        if order != sorted(order, key=KARPENTER_ORDER.index):
            problems.append(Problem(f"{path}.capacity", f"{', '.join(order)}: Karpenter always tries reserved, then spot, then on-demand "
                                                        f"when a NodePool allows several; list them in that order, or make separate pools"))
        if pool.min_nodes > 0 and len(listed) > 1:
            problems.append(Problem(f"{path}.minNodes", f"{pool.min_nodes}: under Karpenter the fixed floor of minNodes is a managed node "
                                                        f"group, which has one capacity kind; set minNodes: 0, or list one capacity kind"))
        elif pool.min_nodes > 0:
            problems += _node_group_problems(pool, path, listed)
    else:
        problems += _node_group_problems(pool, path, listed)
    return problems


def _node_group_problems(pool: Pool, path: str, listed) -> list[Problem]:
    """A managed node group has one capacity type and one launch template: one reservation by id, alone or (an ODCR)
    followed by on-demand; a Capacity Block alone, in its zone."""
    words = [s.kind for s in listed]
    reserved = [s for s in listed if s.reservation is not None]
    what = "cluster-autoscaler and managed node groups"
    if not reserved:
        if len(words) > 1:
            return [Problem(f"{path}.capacity", f"{', '.join(words)}: a managed node group has one capacity type; use Karpenter "
                                                f"(gpupools:autoscaler: karpenter), or one pool per kind")]
        return []
    problems = []
    if len(reserved) > 1:
        problems.append(Problem(reserved[1].path(path), f"{what} take one reservation per pool; use Karpenter, or one pool per reservation"))
    first = reserved[0]
    r = first.reservation
    if r.id is None:
        problems.append(Problem(f"{first.path(path)}.reservation.tags", f"{what} need the reservation's id (a launch template targets one id); "
                                                                         f"tags select reservations under Karpenter only"))
    if r.kind == "capacity-block":
        if len(words) > 1:
            problems.append(Problem(f"{path}.capacity", "a Capacity Block node group runs on the block only (EKS capacityType CAPACITY_BLOCK); "
                                                        "put on-demand or spot in another pool, or use Karpenter"))
        zones = capacity.placement_zones(pool) or []
        if len(zones) != 1:
            problems.append(Problem(f"{first.path(path)}.reservation.zones", "a Capacity Block node group needs subnets in the block's zone "
                                                                              "only; give the block's zone (one)"))
    elif words not in (["reserved"], ["reserved", "on-demand"]):
        problems.append(Problem(f"{path}.capacity", f"{', '.join(words)}: a managed node group runs a reservation alone or followed by "
                                                    f"on-demand; spot capacity cannot fall back from a reservation in one group"))
    return problems


def capacity_lines(pool: Pool, autoscaler: str) -> list[str]:
    """What the plan says of each source on EKS: how nodes get there and what happens at the end."""
    lines = []
    karpenter = _is_karpenter(autoscaler)
    for s in capacity.sources(pool):
        r = s.reservation
        if r is None:
            how = (f"Karpenter NodePool capacity type {s.kind}" if karpenter else
                   f"managed node group capacityType {node_group_capacity_type(pool)}")
            lines.append(f"{s.label}: {how}")
            continue
        if karpenter:
            how = "EC2NodeClass capacityReservationSelectorTerms, NodePool capacity type reserved"
        elif r.kind == "capacity-block":
            how = "managed node group capacityType CAPACITY_BLOCK, launch template market type capacity-block"
        elif capacity.has(pool, capacity.ON_DEMAND):
            how = "launch template preference open: the reservation is used only if it accepts open matching (instance eligibility open)"
        else:
            how = "launch template targets the reservation; no node starts once it is full"
        zones = capacity.placement_zones(pool)
        lines.append(f"{s.label}: {how}" + (f", pinned to {', '.join(zones)}" if zones else ""))
        if r.kind == "capacity-block":
            who = "Karpenter drains its nodes" if karpenter else "EKS scales the node group to zero"
            lines.append(f"when the block ends: {who} {BLOCK_DRAIN_MINUTES} minutes before its end time; EC2 terminates what is left "
                         f"{BLOCK_TERMINATE_MINUTES} minutes before it")
    return lines


# Namespaces and node-label domains EKS and its add-ons own; a team may not claim them. Namespaces: the CloudWatch
# Observability add-on (amazon-cloudwatch), the GuardDuty runtime agent (amazon-guardduty) and Fargate logging
# (aws-observability), each as its EKS user guide page names it. Labels: EKS sets eks.amazonaws.com/* on managed
# nodes (nodegroup, capacityType, ...) and k8s.amazonaws.com/accelerator on GPU nodes; Karpenter's NodePool CRD
# refuses the label domains karpenter.sh and karpenter.k8s.aws (CEL rules in the pinned
# karpenter.sh_nodepools.yaml, aws/karpenter-provider-aws pkg/apis/crds).
RESERVED_NAMESPACES = frozenset({"amazon-cloudwatch", "amazon-guardduty", "aws-observability"})
RESERVED_LABEL_DOMAINS = ("eks.amazonaws.com", "k8s.amazonaws.com", "karpenter.sh", "karpenter.k8s.aws")


# Readiness: EKS nodes can register with a startup taint (node-group taints reach the kubelet at boot, Karpenter sets
# NodePool startupTaints), and both autoscalers gpupools installs can be told to treat it as a startup taint.
STARTUP_TAINTS = True
READINESS_NOTE = "GPU nodes start tainted until the GPU Operator has validated driver, toolkit, CUDA and device plugin"


# Repair. The EKS node monitoring agent (add-on of the same name; aws/eks-node-monitoring-agent, chart
# eks-node-monitoring-agent 1.7.0) sets the node conditions AcceleratedHardwareReady, KernelReady, NetworkingReady,
# StorageReady and ContainerRuntimeReady; on NVIDIA nodes it reads GPU health from a DCGM host engine that its chart runs
# as the dcgm-server DaemonSet. That DaemonSet tolerates nothing by default (values.yaml dcgmAgent.tolerations: []),
# so on GPU nodes, which carry the GPU taint (and the readiness taint), it must be told to tolerate them.
NODE_MONITORING_AGENT = "eks-node-monitoring-agent"
NODE_MONITORING_AGENT_VALUES = {"dcgmAgent": {"tolerations": [{"operator": "Exists"}]}}
# Conditions (and the reasons that set them) a managed node group repairs by replacing the node at once rather than
# rebooting it: a GPU that fell off the bus (XID 79) or memory with uncorrectable errors does not recover by a reboot
# (aws/eks-node-monitoring-agent docs/node-health-issues.adoc: NvidiaXID79Error, NvidiaDoubleBitError set
# AcceleratedHardwareReady=False). The wait matches Karpenter's for AcceleratedHardwareReady (10m).
GPU_REPAIR_OVERRIDES = (("AcceleratedHardwareReady", "NvidiaXID79Error"), ("AcceleratedHardwareReady", "NvidiaDoubleBitError"))
GPU_REPAIR_WAIT_MINUTES = 10
# At most a fifth of a group unhealthy before repair stops (Karpenter's own guard is 20% of a NodePool), one node at a
# time: a fault that hits many nodes at once is rarely the nodes' own.
MAX_UNHEALTHY_PERCENT = 20
MAX_PARALLEL_REPAIRS = 1


def repair_enabled(pool: Pool) -> bool:
    return pool.auto_repair is not False


def node_repair_config(plan: PoolPlan) -> dict:
    """EKS node auto repair for the group (CreateNodegroup nodeRepairConfig; off unless enabled)."""
    if not repair_enabled(plan.pool):
        return {"enabled": False}
    return {
        "enabled": True,
        "max_unhealthy_node_threshold_percentage": MAX_UNHEALTHY_PERCENT,
        "max_parallel_nodes_repaired_count": MAX_PARALLEL_REPAIRS,
        "node_repair_config_overrides": [
            {"node_monitoring_condition": condition, "node_unhealthy_reason": reason, "min_repair_wait_time_mins": GPU_REPAIR_WAIT_MINUTES,
             "repair_action": "Replace"} for condition, reason in GPU_REPAIR_OVERRIDES],
    }


def repair_facts(plan: PoolPlan, autoscaler: str) -> tuple[str, str]:
    """(what notices a broken GPU, what happens next) for one pool on EKS."""
    detects = (f"{NODE_MONITORING_AGENT} (DCGM health, XID, double-bit ECC, NVLink, device count) sets AcceleratedHardwareReady=False")
    if autoscaler == "karpenter":
        floor = (f"; the {plan.name}-floor node group: EKS node repair, XID 79 and double-bit errors replaced after {GPU_REPAIR_WAIT_MINUTES}m"
                 if plan.pool.min_nodes else "")
        return detects, ("Karpenter node repair replaces the node after 10m (other agent conditions and NotReady after 30m), "
                         "unless more than 20% of the NodePool is unhealthy" + floor)
    if not repair_enabled(plan.pool):
        return detects, "nothing: EKS node repair is off for this node group (autoRepair: false); replace the node by hand"
    return detects, (f"EKS node repair: XID 79 and double-bit errors replace the node after {GPU_REPAIR_WAIT_MINUTES}m, other faults "
                     f"reboot or replace it (EKS defaults), one node at a time, stopping above {MAX_UNHEALTHY_PERCENT}% unhealthy")


# --------------------------------------------------------------------------------------------------------------------
# Answers to the questions every capability asks a cloud (gpupools/core/cloud.py)

# `installer: auto`: EKS's GPU AMIs bring the driver and toolkit, the GPU Operator the rest (device plugin, GFD, DCGM).
# The service scales GPU pools with its own cluster autoscaler; gpupools installs none (EKS: Karpenter or
# cluster-autoscaler, gpupools' choice).
OWN_AUTOSCALER = False
# Fabric: EFA pools need a cluster placement group (a Capacity Block places its instances itself); pods reach EFA through the EFA device plugin.
FABRIC_IN_WORDS = "EFA"  # as policy messages name it
FABRIC_PLACEMENT_GROUP = True
FABRIC_DEVICE_SOFTWARE = "efa-device-plugin"
AUTO_INSTALLER = "gpu-operator"
# A standard EKS cluster's nodes bring no GPU device plugin of their own (EKS Auto Mode's do: gpupools.clouds.aws_auto).
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
EXAMPLE_ZONE = "eu-central-1a"


def image_device_plugin(os: str | None) -> bool:
    """Bottlerocket's NVIDIA variants bring their own device plugin (and no GPU Operator platform)."""
    return os == "bottlerocket"


def fabric_resource_count(fabric) -> int:
    """A pod asks for every EFA interface of its node (vpc.amazonaws.com/efa, one per interface)."""
    return fabric.efa


def fabric_zone_of_cluster(pool, cluster) -> str | None:
    """EKS fabric pools name their zone (or their reservation's); the cluster gives none."""
    return None


# The VPC gpupools creates for a new cluster has a subnet pair in each of at most this many zones.
NEW_NETWORK_MAX_ZONES = 6


def example_zone(cluster, providers: dict) -> str | None:
    """A zone of the stack's own region, for messages that ask for one."""
    region = providers.get("aws:region")
    return f"{region}a" if isinstance(region, str) else None


def mock_region(config: dict) -> str | None:
    """The region a plan's mocks answer with: the stack's, or the one the AWS provider takes from the environment."""
    from gpupools.stack.providers import provider_value

    return provider_value("aws", "aws:region", config)[0]


# --------------------------------------------------------------------------------------------------------------------
# Day two: node group updates and Karpenter drift (docs/upgrades.md)
#
# A managed node group is updated only when its version, AMI release or launch template changes (EKS never upgrades one
# by itself): `DEFAULT` launches new instances first, `MINIMAL` terminates old ones before launching ("useful ... with
# hardware accelerators such as GPUs", botocore 1.44.8 eks NodegroupUpdateConfig.updateStrategy); maxUnavailable is at
# least 1 (NonZeroInteger). Draining a node respects PodDisruptionBudgets for 15 minutes, then the update fails with
# PodEvictionFailure unless forced (awsdocs/amazon-eks-user-guide latest/ug/nodes/managed-node-update-behavior.adoc);
# gpupools never sets force, so a Job its PodDisruptionBudget protects fails the update instead of dying.
NODE_GROUP_DRAIN_MINUTES = 15


def node_group_update_config(pool: Pool) -> dict:
    """CreateNodegroup updateConfig: a surge launches first (DEFAULT), no surge terminates first (MINIMAL)."""
    policy = pool_upgrade(pool)
    return {"max_unavailable": max(1, policy.max_unavailable), "update_strategy": "DEFAULT" if policy.max_surge else "MINIMAL"}


def pool_upgrade_problems(pool: Pool, policy: PoolUpgrade, path: str, autoscaler: str) -> list[Problem]:
    return []


def maintenance_problems(cluster: Cluster, upgrades, window: Window, autoscaler: str) -> list[Problem]:
    """EKS has no maintenance exclusions: Karpenter's budgets repeat weekly and node groups change only when the stack
    does."""
    if upgrades.exclusions:
        return [Problem("upgrades.exclusions", "EKS has no maintenance exclusions: Karpenter's disruption budgets repeat every week and node "
                                               "groups change only when `pulumi up` changes them; remove exclusions (the window still applies)")]
    return []


def karpenter_disruption(pool: Pool, window: Window) -> dict:
    """The NodePool's disruption and node lifetime (karpenter.sh/v1, the pinned karpenter.sh_nodepools.yaml).

    Training: drift (a new AMI, a changed NodePool or EC2NodeClass) only inside the window, `maxUnavailable` nodes at a
    time: a budget of 0 Drifted nodes over every closed stretch of the week (`schedule` and `duration` together, the
    CRD's one CEL rule; cron in UTC), and `maxUnavailable` otherwise. No terminationGracePeriod, so a node whose pods
    carry karpenter.sh/do-not-disrupt is not drifted until they end, and `expireAfter: Never`, since expiry is forceful
    and ignores budgets and do-not-disrupt (Karpenter docs, concepts/disruption.md @ v1.14.1, "Expiration").
    Inference: Karpenter's 30-day lifetime, any time, and pods get `waitForJobs` to leave (terminationGracePeriod)."""
    policy = pool_upgrade(pool)
    empty = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": KARPENTER_CONSOLIDATE_AFTER}
    if not policy.training:
        return {"expireAfter": KARPENTER_EXPIRE_AFTER, "terminationGracePeriod": f"{policy.wait_minutes}m",
                "disruption": {**empty, "budgets": drift_budgets(policy, window)}}
    return {"expireAfter": "Never", "disruption": {**empty, "budgets": drift_budgets(policy, window)}}


# Karpenter's own node lifetime (the NodePool CRD's default) and how long an empty GPU node is kept.
KARPENTER_EXPIRE_AFTER = "720h"
KARPENTER_CONSOLIDATE_AFTER = "10m"


def upgrade_lines(pool: Pool, policy: PoolUpgrade, window: Window, cluster: Cluster, autoscaler: str) -> list[str]:
    """What the next AMI, Kubernetes version or node class change does to the pool."""
    lines = []
    blocks = capacity.blocks(pool)
    full = policy.spare_reserved == 0
    if _is_karpenter(autoscaler):
        if policy.training:
            lines.append(f"training: new AMIs and NodePool changes reach the nodes by Karpenter drift only {window.text}, "
                         f"{max(1, policy.max_unavailable)} node at a time; a node running a Job (karpenter.sh/do-not-disrupt) is left until "
                         f"the Job ends (no terminationGracePeriod); nodes never expire (expireAfter Never)")
        else:
            lines.append(f"inference: drift at any time, {max(1, policy.max_unavailable, policy.max_surge)} node at a time, a replacement "
                         f"started first; nodes expire after 30 days; pods get {wait_text(policy.wait_minutes)} to leave (terminationGracePeriod)")
        if full:
            lines.append("reserved: drift starts a replacement before draining a node with pods, and a full reservation has no room for one: "
                         "busy nodes are replaced once they are empty, never surged past the reservation")
        if blocks:
            lines.append(f"Capacity Block: its nodes end with the block anyway (Karpenter drains them {BLOCK_DRAIN_MINUTES} minutes before)")
        if pool.min_nodes:
            lines.append(f"the {pool.name}-floor node group: " + _node_group_story(pool, policy, window))
        return lines
    lines.append(_node_group_story(pool, policy, window))
    if blocks:
        lines.append("Capacity Block: EKS asks for the group's desired size at 0 while it is updated; update it between blocks")
    return lines


def _node_group_story(pool: Pool, policy: PoolUpgrade, window: Window) -> str:
    how = ("launches new nodes first (DEFAULT)" if policy.max_surge else "drains before launching, no node beyond the group (MINIMAL)")
    when = f"; run `pulumi up` with a version change inside the window, {window.text}" if policy.training else ""
    return (f"{policy.kind}: EKS updates the node group only when the stack changes its version or launch template{when}; it {how}, "
            f"{max(1, policy.max_unavailable)} node at a time; a Job whose PodDisruptionBudget forbids eviction holds its node "
            f"{NODE_GROUP_DRAIN_MINUTES} min, then the update fails (gpupools never forces it) and the Job runs on")

# The fabric is offered wherever the catalog records one (None: no reason to leave it off).
FABRIC_OFFERED: str | None = None
# What the policy pack advises for a pool built for multi-node jobs that has no fabric.
MULTI_NODE_ADVICE = "give it one zone and fabric: on"

# Capacity bought ahead (reservations, Capacity Blocks, DWS) is something a pool can name (docs/capacity.md).
RESERVATIONS = True


def plan_notes(pools: list) -> list[str]:
    """What the plan tells the user to check on the cluster itself: nothing here."""
    return []
def mock_cluster_facts(config: dict) -> dict:
    """What an existing cluster reads as in an offline plan beyond what EKS gives every cluster: Auto Mode on, with its node
    role, where the stack says the cluster runs it (a deploy reads the real cluster, and stops if Auto Mode is off there)."""
    cluster = config.get("gpupools:cluster")
    if not isinstance(cluster, dict) or cluster.get("mode") != AUTO_MODE:
        return {}
    name = cluster.get("name", "cluster")
    return {"computeConfigs": [{"enabled": True, "nodePools": ["general-purpose", "system"],
                                "nodeRoleArn": f"arn:aws:iam::123456789012:role/{name}-auto-mode-node"}]}
