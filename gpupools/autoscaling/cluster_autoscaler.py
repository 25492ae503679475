"""cluster-autoscaler on EKS for GPU pools that are managed node groups.

A managed node group that has scaled back to zero is only understood through the tags of its Auto Scaling
group (cluster-autoscaler's aws README): `node-template/label/*` for the labels a pod selects, `node-template/
taint/*` for the taints it must tolerate, and `node-template/resources/*` for extended resources the GPU
software advertises once the node runs. EKS does not copy node-group tags to the group, so the component tags
the group itself. Pure: `asg_tags` is the one place these facts are spelled; `node_template` reads them back.
"""

from __future__ import annotations

import json

from gpupools.clouds import aws as aws_cloud
from gpupools.clouds.aws import fabric_node_resources
from gpupools.clouds.common import minor_key
from gpupools.core.pools import NodeTemplate, PoolPlan, Taint
from gpupools.core.sharing import GPU_RESOURCE
from gpupools.pools.software import Chart

CHART = Chart("cluster-autoscaler", "cluster-autoscaler", "https://kubernetes.github.io/autoscaler", "kube-system", "9.59.0")
SERVICE_ACCOUNT = "cluster-autoscaler"

TAG_PREFIX = "k8s.io/cluster-autoscaler/node-template/"
# The label cluster-autoscaler (1.15+) reads to know a node has GPUs: until the device plugin reports them, such
# a node counts as still starting, instead of as a node whose pods fit nowhere (which would start another).
GPU_LABEL = "k8s.amazonaws.com/accelerator"

# Scale-down waits this long after a GPU node is no longer needed.
SCALE_DOWN_UNNEEDED_TIME = "10m"


def accelerator_label(plan: PoolPlan) -> dict[str, str]:
    return {GPU_LABEL: "nvidia-" + plan.hardware.gpu.name.lower()}


def node_labels(plan: PoolPlan) -> dict[str, str]:
    """The node group's labels under cluster-autoscaler: the pool's, plus the GPU label it reads.

    Not on MIG pools in the mixed strategy: cluster-autoscaler takes a node with that label but only
    `nvidia.com/mig-*` resources for a GPU node that never became ready (kubernetes/autoscaler#8095), and
    would remove it as unready.
    """
    if GPU_RESOURCE not in plan.advertised_resources or plan.advertised_resources[GPU_RESOURCE] == 0:
        return dict(plan.labels)
    return {**plan.labels, **accelerator_label(plan)}


def asg_tags(plan: PoolPlan) -> dict[str, str]:
    """Labels, taints and resources of a new node; on an EFA pool also its EFA interfaces and huge pages
    (`fabric_asg_tags`), so the component and `node_template` read one set of tags."""
    tags = {f"{TAG_PREFIX}label/{k}": v for k, v in node_labels(plan).items()}
    tags.update({f"{TAG_PREFIX}taint/{t.key}": f"{t.value}:{t.effect}" for t in plan.taints})
    tags.update({f"{TAG_PREFIX}resources/{name}": str(count) for name, count in plan.autoscaler_resources.items()})
    efa = pool_efa(plan)
    if efa:
        tags.update(fabric_asg_tags(efa))
    return dict(sorted(tags.items()))


def pool_efa(plan: PoolPlan) -> int:
    """EFA interfaces a new node of the pool has (0 without a fabric), as `fabric.plan.plan_fabric` decides it: on EKS
    that depends on the pool alone."""
    from gpupools.fabric.plan import catalog_fabric, fabric_on

    if not fabric_on(aws_cloud, plan.pool, plan.sharing):
        return 0
    return catalog_fabric("aws", plan.pool.instance_type).efa


def node_template(plan: PoolPlan) -> NodeTemplate:
    """cluster-autoscaler's picture of a new node of the group: the instance type's GPU count, then the tags, then
    the managed node group's own taints, sanitized as the autoscaler does.

    kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/aws_manager.go (buildNodeFromTemplate) reads taints
    from the `node-template/taint/*` tags and appends the node group's taints from EKS DescribeNodegroup; every
    template then goes through utils/taints/taints.go `SanitizeTaints`, which drops startup taints."""
    labels = {"node.kubernetes.io/instance-type": plan.pool.instance_type}
    taints: list[Taint] = []
    allocatable = {GPU_RESOURCE: plan.hardware.gpus_per_node}
    for key, value in asg_tags(plan).items():
        kind, _, name = key[len(TAG_PREFIX):].partition("/")
        if kind == "label":
            labels[name] = value
        elif kind == "taint":
            taint_value, _, effect = value.rpartition(":")
            taints.append(Taint(name, taint_value, effect))
        elif kind == "resources":
            allocatable[name] = int(value.removesuffix("Mi"))  # counts, and huge pages in MiB, as the scale-up checks compare them
    taints += plan.taints + plan.startup_taints  # the node group's taints (aws_manager.go getManagedNodegroupTaints)
    kept, startup = sanitize_taints(taints, startup_taint_keys([plan]))
    # A group over several instance types is pictured as its first (aws_manager.go buildInstanceType, "always use first
    # instance"); clouds.aws refuses such groups whose types differ in GPU count.
    first = f", pictured as {plan.pool.instance_type}, its first instance type" if plan.pool.instance_types else ""
    return NodeTemplate("cluster-autoscaler", f"Auto Scaling group tags of node group {plan.name}{first}", labels, kept, allocatable, startup)


# cluster-autoscaler/utils/taints/taints.go: taints with these prefixes are startup taints without any flag.
STARTUP_TAINT_PREFIXES = ("ignore-taint.cluster-autoscaler.kubernetes.io/", "startup-taint.cluster-autoscaler.kubernetes.io/")
STATUS_TAINT_PREFIX = "status-taint.cluster-autoscaler.kubernetes.io/"


def startup_taint_keys(plans: list[PoolPlan]) -> tuple[str, ...]:
    """Keys passed with `--startup-taint` (config/flags/flags.go): the pools' startup taints the prefixes do not cover."""
    keys = {t.key for p in plans for t in p.startup_taints}
    return tuple(sorted(k for k in keys if not k.startswith(STARTUP_TAINT_PREFIXES)))


def is_startup_taint(key: str, flagged: tuple[str, ...]) -> bool:
    """`TaintConfig.IsStartupTaint`: an exact key given by flag, or either prefix."""
    return key in flagged or key.startswith(STARTUP_TAINT_PREFIXES)


def sanitize_taints(taints: list[Taint], flagged: tuple[str, ...]) -> tuple[tuple[Taint, ...], tuple[Taint, ...]]:
    """`SanitizeTaints` for the taints gpupools sets: (kept, dropped as startup or status taints), de-duplicated."""
    kept: list[Taint] = []
    dropped: list[Taint] = []
    for taint in taints:
        target = dropped if is_startup_taint(taint.key, flagged) or taint.key.startswith(STATUS_TAINT_PREFIX) else kept
        if taint not in target:
            target.append(taint)
    return tuple(kept), tuple(dropped)


def iam_policy(cluster_name: str) -> str:
    """The aws README's recommended policy for auto-discovery, with scaling actions limited to this cluster's groups
    (EKS tags every managed node group's Auto Scaling group `k8s.io/cluster-autoscaler/<cluster>: owned`)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Resource": "*", "Action": [
            "autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances", "autoscaling:DescribeLaunchConfigurations",
            "autoscaling:DescribeScalingActivities", "autoscaling:DescribeTags", "ec2:DescribeImages", "ec2:DescribeInstanceTypes",
            "ec2:DescribeLaunchTemplateVersions", "ec2:GetInstanceTypesFromInstanceRequirements", "eks:DescribeNodegroup"]},
        {"Effect": "Allow", "Resource": "*", "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
         "Condition": {"StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}}},
    ]})


def tag_suffix(key: str) -> str:
    """A readable, unique logical name part for one tag: `label-gpupools.io-pool`, `resources-nvidia.com-gpu`."""
    return key[len(TAG_PREFIX):].replace("/", "-")


# The autoscaler minor must match the cluster's Kubernetes minor; the newest patch of each
# (tags cluster-autoscaler-1.NN.P of github.com/kubernetes/autoscaler, read 2026-08-22).
IMAGE_TAGS = {"1.31": "v1.31.5", "1.32": "v1.32.7", "1.33": "v1.33.6", "1.34": "v1.34.5", "1.35": "v1.35.2", "1.36": "v1.36.1"}


def image_tag(kubernetes_version: str) -> str:
    """The autoscaler release for a cluster version ("1.34" or "1.34.2-eks-..."); past the table, its newest."""
    minor = ".".join(kubernetes_version.lstrip("v").split(".")[:2])
    if minor in IMAGE_TAGS:
        return IMAGE_TAGS[minor]
    try:
        older = [m for m in IMAGE_TAGS if minor_key(m) <= minor_key(minor)]
    except ValueError:
        older = []
    return IMAGE_TAGS[max(older or IMAGE_TAGS, key=minor_key)]


def helm_values(cluster_name: str, region: str | None, image_tag: str, service_monitor: dict | None, on_system_pool: bool = True,
                startup_taints: tuple[str, ...] = ()) -> dict:
    """Auto-discovery by the tags EKS puts on node groups, an autoscaler release matching the cluster's minor."""
    values: dict = {
        "cloudProvider": "aws",
        "autoDiscovery": {"clusterName": cluster_name},
        "rbac": {"serviceAccount": {"name": SERVICE_ACCOUNT}},
        "image": {"tag": image_tag},
        "extraArgs": {
            # Each pool is a group of one GPU count (clouds.aws instance_type_problems): least-waste picks the group that
            # leaves the fewest idle GPUs.
            "expander": "least-waste",
            "balance-similar-node-groups": True,
            "skip-nodes-with-system-pods": False,
            "scale-down-unneeded-time": SCALE_DOWN_UNNEEDED_TIME,
        },
    }
    # The chart turns each extraArgs entry into `--key=value`; text after a `_` in the key is dropped, which is how
    # a flag is given more than once (values.yaml, extraArgs).
    for i, key in enumerate(startup_taints):
        values["extraArgs"]["startup-taint" + (f"_{i}" if i else "")] = key
    if on_system_pool:
        values["nodeSelector"] = {"gpupools.io/pool": "system"}
    if region:
        values["awsRegion"] = region
    if service_monitor is not None:
        values["serviceMonitor"] = {"enabled": True, "selector": dict(service_monitor), "namespace": CHART.namespace}
    return values


# cluster-autoscaler never removes a node while a pod on it carries this annotation set to "false"
# (kubernetes/autoscaler cluster-autoscaler/FAQ.md, "What types of pods can prevent CA from removing a node?"). The
# managed autoscalers of AKS and GKE are cluster-autoscaler and honour it too.
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def fabric_asg_tags(efa: int) -> dict[str, str]:
    """An EFA pool's group also offers its EFA interfaces and the EFA driver's huge pages, which its jobs ask for."""
    return {f"{TAG_PREFIX}resources/{name}": value for name, value in fabric_node_resources(efa).items()}
