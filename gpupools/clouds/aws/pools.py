"""EKS: a GPU pool's nodes: instance types, AMIs, launch templates and managed node groups, zones, the node template
the autoscalers see, node storage (instance store RAID0, EBS volume, SOCI parallel pull).
"""

from __future__ import annotations


import base64
import re
import textwrap

import yaml
from pathlib import Path

from dataclasses import dataclass, replace

from gpupools.core.catalog import Catalog, Hardware, load_catalog
from gpupools.core.facts import load_facts
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.core.pools import NodeTemplate, PoolPlan, spell_taint
from gpupools.capacity import sources as capacity
from gpupools.upgrades.policy import UPGRADES_LABEL, pool_upgrade
from gpupools.clouds.common import (hardware_of, reject_fields,
                                    resolve_listed, zone_letter_problems)
from gpupools.clouds.aws.capacity import KARPENTER_ORDER, RESERVATION_ID, _is_karpenter, launch_template_capacity, node_group_capacity_type
from gpupools.clouds.aws.fabric import hugepages_bottlerocket, hugepages_script
from gpupools.clouds.aws.health import node_repair_config
from gpupools.clouds.aws.provider import AUTO_MODE, AWS_REGION, NAME, RESERVED_LABEL_DOMAINS, TAINT_STYLE
from gpupools.clouds.aws.software import IMDS_V2_ONLY, bottlerocket_settings
from gpupools.clouds.aws.upgrades import node_group_update_config
from gpupools.clouds.node_settings import NodeApi, merged


AMI_TYPES = {"al2023": "AL2023_x86_64_NVIDIA", "bottlerocket": "BOTTLEROCKET_x86_64_NVIDIA"}


# A pool's `node:` on Karpenter: fields of the pool's EC2NodeClass spec (`nodeClass`) and NodePool spec
# (`nodePool`), as Karpenter's CRDs define them (node_api.json, derived from the CRDs pinned in tests/reference/karpenter
# by tools/node_api_models.py). gpupools owns what makes a GPU pool: these are refused, each with where to set it instead.
_NODE_CLASS, _NODE_POOL = "nodeClass", "nodePool"
NODE_API = NodeApi(
    "Karpenter", "EC2NodeClass and NodePool", Path(__file__).with_name("node_api.json"),
    owned={**{(_NODE_CLASS, key): why for key, why in {
               "role": "gpupools creates the node role", "instanceProfile": "gpupools creates the node role",
               "amiFamily": "set the pool's os", "amiSelectorTerms": "set the pool's os (the EKS GPU image's latest release)",
               "subnetSelectorTerms": "the cluster's subnets (cluster.subnetIds)", "securityGroupSelectorTerms": "the cluster's security group",
               "userData": "gpupools writes the node's NodeConfig (fast image pull, huge pages); kubelet settings go in nodeClass.kubelet",
               "blockDeviceMappings": "set the pool's diskSizeGb", "instanceStorePolicy": "gpupools gives the instance store to the kubelet (RAID0)",
               "capacityReservationSelectorTerms": "set the pool's capacity (a reservation)",
               "networkInterfaces": "the pool's fabric attaches the EFA interfaces (fabric)",
               "placementGroupSelector": "the pool's fabric places its nodes (fabric)"}.items()},
           (_NODE_POOL, "template"): "the pool's instance types, capacity, zones, labels, GPU taint and node lifetime are gpupools' "
                                     "(instanceType, spot, capacity, zones, labels, taints, upgrades)",
           (_NODE_POOL, "limits"): "set the pool's maxNodes", (_NODE_POOL, "disruption"): "set the pool's upgrades"},
    # Karpenter's CEL rule on NodePool spec: has(self.replicas) == has(oldSelf.replicas), "Cannot transition NodePool
    # between static (replicas set) and dynamic (replicas unset) provisioning modes" (karpenter.sh_nodepools.yaml v1.14.1).
    replaces={(_NODE_POOL, "replicas"): "Karpenter refuses to turn a NodePool between static (replicas) and dynamic: setting or "
                                        "removing it needs the NodePool deleted first"},
    # gpupools' IMDSv2-only metadata settings, which `node:` may replace (and the eks-imdsv2 policy then judges).
    defaults=frozenset((_NODE_CLASS, "metadataOptions", key) for key in ("httpEndpoint", "httpProtocolIPv6", "httpPutResponseHopLimit", "httpTokens")),
)


# A pool's `node:` on a managed node group (cluster-autoscaler, and the rack-scale pools): the node group's inputs as
# pulumi_aws's eks.NodeGroup takes them, `launchTemplate` the data of the group's launch template (ec2.LaunchTemplate),
# and `kubelet` nodeadm's NodeConfig spec.kubelet, which gpupools writes into the launch template's user data beside its
# own NodeConfig (node_group_api.json, derived by tools/node_api_models.py, enums from botocore's eks CreateNodegroup
# and ec2 RequestLaunchTemplateData). nodeadm merges every NodeConfig of the user data, `kubelet.config` over its own
# KubeletConfiguration (awslabs/amazon-eks-ami v20260724 nodeadm/api/v1alpha1/nodeconfig_types.go, KubeletOptions).
_LT, _EBS = "launchTemplate", ("launchTemplate", "blockDeviceMappings", "ebs")
_ROLLS = ("a change makes a new launch template version: EKS replaces every node of the group, at the pace of the pool's upgrades "
          "(the node group stays)")
NODE_GROUP_API = NodeApi(
    "EKS", "managed node group", Path(__file__).with_name("node_group_api.json"),
    owned={("amiType",): "set the pool's os", ("capacityType",): "set the pool's spot or capacity",
           ("instanceTypes",): "set the pool's instanceType or instanceTypes", ("scalingConfig",): "set the pool's minNodes and maxNodes",
           ("subnetIds",): "the cluster's subnets in the pool's zones (zones, capacity, fabric)", ("nodeRoleArn",): "gpupools creates the node role",
           ("taints",): "set the pool's taints", ("updateConfig",): "set the pool's upgrades", ("nodeRepairConfig",): "gpupools turns node repair on (health)",
           ("version",): "set cluster.kubernetesVersion", ("releaseVersion",): "gpupools runs the EKS GPU AMI's release for the version",
           ("diskSize",): "set the pool's diskSizeGb",
           ("remoteAccess",): "EKS refuses remoteAccess beside a launch template, which every gpupools node group has; launchTemplate.keyName sets an SSH key",
           **{(_LT, key): why for key, why in {
               "imageId": "set the pool's os (the EKS GPU AMI)", "kernelId": "set the pool's os (the EKS GPU AMI)",
               "ramDiskId": "set the pool's os (the EKS GPU AMI)", "instanceType": "set the pool's instanceType",
               "instanceRequirements": "set the pool's instanceType or instanceTypes",
               "userData": "gpupools writes the node's NodeConfig (fast image pull, RAID0, huge pages); kubelet settings go in kubelet",
               "iamInstanceProfile": "EKS gives the nodes gpupools' node role", "networkInterfaces": "the pool's fabric attaches the EFA interfaces (fabric)",
               "secondaryInterfaces": "the pool's fabric attaches the EFA interfaces (fabric)",
               "placement": "the pool's fabric and capacity place its nodes (fabric, capacity)",
               "capacityReservationSpecification": "set the pool's capacity (a reservation)", "instanceMarketOptions": "set the pool's spot or capacity",
               "vpcSecurityGroupIds": "the cluster's security group (and the fabric's EFA group)",
               "securityGroupNames": "the cluster's security group (and the fabric's EFA group)",
               "tagSpecifications": "gpupools tags the instances with their pool; the node group's tags go in tags"}.items()},
           (*_EBS[:2], "deviceName"): "gpupools' volume is the image's root volume (Bottlerocket: its data volume)",
           (*_EBS[:2], "noDevice"): "gpupools' volume is the image's root volume (Bottlerocket: its data volume)",
           (*_EBS[:2], "virtualName"): "gpupools gives the instance store to the kubelet (RAID0)",
           (*_EBS, "volumeSize"): "set the pool's diskSizeGb", (*_EBS, "volumeType"): "gp3, whose IOPS and throughput gpupools sizes (iops, throughput may be set)",
           (*_EBS, "encrypted"): "gpupools encrypts every node volume", (*_EBS, "deleteOnTermination"): "gpupools deletes a node's volume with the node",
           ("kubelet", "flags"): "gpupools' labels and taints reach the kubelet through EKS; set KubeletConfiguration fields in kubelet.config"},
    replaces={(_LT,): _ROLLS, ("kubelet",): _ROLLS},
    # gpupools' IMDSv2-only metadata settings and the volume's IOPS and throughput, which `node:` may replace (and the
    # eks-imdsv2 policy then judges).
    defaults=frozenset({*((_LT, "metadataOptions", key) for key in ("httpEndpoint", "httpProtocolIpv6", "httpPutResponseHopLimit", "httpTokens")),
                        (*_EBS, "iops"), (*_EBS, "throughput")}),
)


def node_api_for(autoscaler: str) -> NodeApi:
    """The node API a pool's `node:` is checked against: Karpenter's objects, or the managed node group."""
    return NODE_API if _is_karpenter(autoscaler) else NODE_GROUP_API


# Label and tag keys a `node:` may not set on a node group: gpupools' own and the domains EKS and Karpenter reserve.
_OWN_KEYS = ("gpupools.io/", "nvidia.com/", *(f"{d}/" for d in RESERVED_LABEL_DOMAINS))


def node_setting_problems(pool: Pool, path: str, autoscaler: str) -> list[Problem]:
    """A static NodePool stays within maxNodes; a node group's labels and tags keep off gpupools' keys, its one volume is
    gpupools', and its kubelet settings need AL2023's nodeadm."""
    if not _is_karpenter(autoscaler):
        node, problems = pool.node, []
        for field in ("labels", "tags"):
            problems += [Problem(f"{path}.node.{field}.{key}", f"gpupools or EKS sets keys under {', '.join(_OWN_KEYS)}; "
                                                                f"a pool's own labels go in its labels")
                         for key in node.get(field) or {} if key.startswith(_OWN_KEYS)]
        if len((node.get(_LT) or {}).get("blockDeviceMappings") or []) > 1:
            problems.append(Problem(f"{path}.node.launchTemplate.blockDeviceMappings", "one entry: it sets gpupools' own volume (iops, "
                                                                                       "throughput, kmsKeyId, ...); the instance store is the kubelet's"))
        if "kubelet" in node and pool.os == "bottlerocket":
            problems.append(Problem(f"{path}.node.kubelet", "nodeadm's NodeConfig is AL2023's; Bottlerocket takes no kubelet settings here: drop os or kubelet"))
        return problems
    replicas = (pool.node.get(_NODE_POOL) or {}).get("replicas")
    if isinstance(replicas, int) and replicas > pool.max_nodes:
        return [Problem(f"{path}.node.nodePool.replicas", f"above the pool's maxNodes ({pool.max_nodes}), which caps the NodePool "
                                                           f"(limits.nodes); raise maxNodes or lower replicas")]
    return []


def node_group_settings(pool: Pool) -> dict:
    """The node group's own fields of a pool's `node:` (labels, tags, ...), to merge under gpupools' inputs."""
    return {k: v for k, v in (pool.node or {}).items() if k not in (_LT, "kubelet", _NODE_CLASS, _NODE_POOL)}


def _launch_template_settings(args: dict, pool: Pool) -> dict:
    """gpupools' launch template with the pool's `node.launchTemplate` merged under it; its one volume entry, if given,
    into gpupools' volume."""
    node = dict((pool.node or {}).get(_LT) or {})
    volumes = node.pop("blockDeviceMappings", None)
    args = merged(args, node, frozenset(d[1:] for d in NODE_GROUP_API.defaults if d[0] == _LT and len(d) == 3))
    if volumes:
        ours = args["blockDeviceMappings"][0]
        ours["ebs"] = merged(ours["ebs"], volumes[0].get("ebs"), frozenset(d[3:] for d in NODE_GROUP_API.defaults if d[:3] == _EBS))
    return args


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
    """The managed node group's AMI type: the GPU AMI of the pool's image, for the host architecture of its type."""
    if pool_arch(pool) == "arm64":
        return RACK_AMI_TYPE
    return AMI_TYPES[pool.os or "al2023"]


# --------------------------------------------------------------------------------------------------------------------
# Rack-scale pools: P6e-GB200 UltraServers (GB200 NVL72)
#
# EKS user guide, "Use P6e-GB200 UltraServers with Amazon EKS" (ml-eks-nvidia-ultraserver.adoc, awsdocs fork
# sheetaljoshi/amazon-eks-user-guide @883e41ac, Considerations): Kubernetes 1.33 or later; only through EC2 Capacity Blocks
# for ML (UltraServer offerings); managed or self-managed node groups, a custom launch template for a Capacity Block
# managed node group (capacity-blocks-mng.adoc: market type capacity-block, the block's id, the instance type, node group
# capacityType CAPACITY_BLOCK, subnets in the block's zone only); the AL2023 ARM NVIDIA AMI (its driver, fabric manager,
# IMEX driver, EFA driver); "DRA is not supported in Karpenter or EKS Auto Mode".
RACK_AMI_TYPE = "AL2023_ARM_64_NVIDIA"  # botocore eks AMITypes; EKS CreateNodegroup amiType
RACK_MIN_KUBERNETES = "1.33"
# Karpenter v1.14.1 skips every pod with ResourceClaims ("pod has Dynamic Resource Allocation requirements that are not yet
# supported by Karpenter": kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/scheduler.go lines
# 583-586, IGNORE_DRA_REQUESTS default true in pkg/operator/options/options.go), and the AWS provider sets no
# InstanceType.DynamicResources the allocator behind it would need (aws/karpenter-provider-aws v1.14.1; issue #9519).
KARPENTER_NO_DRA = ("Karpenter v1.14.1 starts no node for a pod with ResourceClaims (its scheduler skips them: 'Dynamic Resource "
                    "Allocation requirements that are not yet supported by Karpenter'), and a rack-scale job claims a ComputeDomain channel")


def pool_arch(pool: Pool) -> str:
    """The host architecture of the pool's instance type (catalog.yaml arch); x86_64 for a type the catalog does not know."""
    found = load_catalog().instance(NAME, pool.instance_type)
    return found.arch if found is not None else "x86_64"


def is_rack_scale(pool: Pool) -> bool:
    found = load_catalog().instance(NAME, pool.instance_type)
    return found is not None and found.rack_scale and not pool.instance_types


def rack_scale_problems(pool: Pool, path: str, autoscaler: str, cluster: Cluster | None) -> list[Problem]:
    """What a P6e-GB200 pool needs on EKS, one line per missing piece (empty for any other pool)."""
    if not is_rack_scale(pool):
        return []
    name = pool.instance_type
    if cluster is not None and cluster.managed_mode == AUTO_MODE:
        return [Problem(f"{path}.instanceType", f"{name} needs NVIDIA's DRA driver for IMEX ComputeDomains, which EKS Auto Mode does not run "
                                                f"(EKS user guide, ml-eks-nvidia-ultraserver: 'DRA is not supported in Karpenter or EKS Auto "
                                                f"Mode'); use a standard cluster (cluster.mode: standard) with gpupools:autoscaler: cluster-autoscaler")]
    if _is_karpenter(autoscaler):
        return [Problem(f"{path}.instanceType", f"{name} under Karpenter: {KARPENTER_NO_DRA}; use gpupools:autoscaler: cluster-autoscaler, "
                                                f"whose managed node group runs the UltraServer's Capacity Block")]
    problems = []
    if pool.os == "bottlerocket":
        problems.append(Problem(f"{path}.os", f"'bottlerocket': {name} runs on the AL2023 ARM NVIDIA AMI only (its IMEX driver and fabric "
                                              f"manager); drop os"))
    listed = capacity.sources(pool)
    if not capacity.blocks(pool) or len(listed) != 1:
        problems.append(Problem(f"{path}.capacity", f"{name} comes only inside P6e-GB200 UltraServers through an EC2 Capacity Block: give "
                                                    f"capacity: [{{reservation: {{id: cr-..., kind: capacity-block, zones: [<the block's zone>]}}}}] "
                                                    f"and nothing else"))
    version = cluster.kubernetes_version if cluster is not None else None
    if version is not None and tuple(map(int, version.split("."))) < tuple(map(int, RACK_MIN_KUBERNETES.split("."))):
        problems.append(Problem("cluster.kubernetesVersion", f"{version}: EKS runs {name} on Kubernetes {RACK_MIN_KUBERNETES} or later"))
    return problems


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
    user_data = node_user_data(plan, raid0=instance_store_raid0(plan.pool), hugepages=hugepages, kubelet=(plan.pool.node or {}).get("kubelet"))
    if user_data:
        args["userData"] = base64.b64encode(user_data.encode()).decode()
    args.update(launch_template_capacity(plan.pool))
    return _launch_template_settings(args, plan.pool) if (plan.pool.node or {}).get(_LT) else args


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


def offering_problems(pool: Pool, path: str, region: str) -> list[Problem]:
    """Whether EC2 offers the instance type in the region (SkyPilot's catalog of DescribeInstanceTypeOfferings, by
    zone ID). Zone names map to zone IDs differently in every account, so a zone is judged by count only: a pool
    cannot use more zones than the region has zones offering its type (over several types, its most offered one)."""
    facts = load_facts()
    problems, offered = [], {}
    for i, name in enumerate(pool_instance_types(pool)):
        zone_ids = facts.aws_regions_offering(name, region)
        # A type the offerings source lists nowhere is not judged: p6e-gb200.36xlarge is sold only as UltraServer Capacity
        # Block offerings (DescribeCapacityBlockOfferings), which SkyPilot's catalog of instance-type offerings does not hold.
        if zone_ids is None or name not in facts.aws_offerings:
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


def local_nvme_use(pool: Pool, fabric_on: bool) -> str | None:
    """Every pool's instance store becomes one RAID0 array (`instance_store_raid0`), fabric or not."""
    if not instance_store_raid0(pool):
        return None
    return "as one RAID0 array: the kubelet's ephemeral storage and the image store (containerd, SOCI parallel pull)"
MIME_BOUNDARY = "GPUPOOLS"


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


def node_config(raid0: bool, fast_pull: bool, kubelet: dict | None = None) -> str | None:
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
      (pkg/providers/amifamily/bootstrap/nodeadm.go); Karpenter's node classes leave it to Karpenter.
    - `kubelet`: a pool's `node.kubelet` as written (NODE_GROUP_API), nodeadm's KubeletOptions: `config` merged over
      nodeadm's KubeletConfiguration (nodeadm/api/v1alpha1/nodeconfig_types.go, KubeletOptions.Config)."""
    spec = []
    if fast_pull:
        spec.append("  featureGates:\n    FastImagePull: true\n")
    if raid0:
        spec.append("  instance:\n    localStorage:\n      strategy: RAID0\n")
    if kubelet:
        spec.append(textwrap.indent(yaml.safe_dump({"kubelet": kubelet}, sort_keys=False), "  "))
    if not spec:
        return None
    return "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n" + "".join(spec)


def node_user_data(plan: PoolPlan, raid0: bool, hugepages: int = 0, kubelet: dict | None = None) -> str | None:
    """A GPU node's userData, for a Karpenter node class (`raid0=False`: Karpenter builds the array itself,
    instanceStorePolicy) and a managed node group's launch template alike:

    - Bottlerocket: TOML of the device plugin's settings (`bottlerocket_settings`), SOCI parallel pull
      (`BOTTLEROCKET_FAST_PULL`), the RAID0 bootstrap command, and the huge pages of EFA pools;
    - AL2023: a MIME archive of a NodeConfig (`node_config`: fast image pull, RAID0) and the huge page script."""
    if plan.pool.os == "bottlerocket":
        toml = [bottlerocket_settings(plan), BOTTLEROCKET_FAST_PULL, raid0_bottlerocket() if raid0 else None,
                hugepages_bottlerocket(hugepages) if hugepages else None]
        return "\n".join(t for t in toml if t)
    config = node_config(raid0, fast_pull=True, kubelet=kubelet)
    parts = ([("application/node.eks.aws", config)] if config else []) + \
            ([('text/x-shellscript; charset="us-ascii"', hugepages_script(hugepages))] if hugepages else [])
    return mime_user_data(parts) if parts else None


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
    names = pool_name_problems(pool, path, autoscaler) + rack_scale_problems(pool, path, autoscaler, cluster)
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
        # A rack-scale pool may keep nodes: its jobs claim a ComputeDomain channel, and cluster-autoscaler starts no node from
        # zero for a pod with claims (gpupools.landing.nodes.claims_from_zero). EKS honours a non-zero size on a Capacity
        # Block node group; before the block starts its Auto Scaling group only logs launch errors (EKS user guide
        # capacity-blocks-mng.adoc, "If you specify a non-zero desiredSize ...").
        rack = hardware is not None and hardware.gpu.nvlink_domain is not None and not _is_karpenter(autoscaler)
        if r.kind == "capacity-block" and pool.min_nodes > 0 and not rack:
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


# --------------------------------------------------------------------------------------------------------------------
# Answers to the questions every capability asks a cloud (gpupools/core/cloud.py)

# `installer: auto`: EKS's GPU AMIs bring the driver and toolkit, the GPU Operator the rest (device plugin, GFD, DCGM).
# The service scales GPU pools with its own cluster autoscaler; gpupools installs none (EKS: Karpenter or
# cluster-autoscaler, gpupools' choice).
OWN_AUTOSCALER = False


def plan_notes(pools: list) -> list[str]:
    """What the plan tells the user to check on the cluster itself: nothing here."""
    return []
