"""EKS: the fabric between nodes: EFA interfaces, cluster placement groups, huge pages, and the node's userData that
sets them up.
"""

from __future__ import annotations


import re


from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.core.pools import PoolPlan
from gpupools.capacity import sources as capacity
from gpupools.clouds.aws.provider import AUTO_MODE


def fabric_refusal(pool: Pool, cluster: Cluster | None) -> str | None:
    """EKS Auto Mode takes no placement group and no per-device EFA settings (EKS user guide, "Manage EFA devices":
    "per-device EFA configuration and placement groups are not supported" with Auto Mode), and the EFA device plugin
    chart keeps off Auto Mode nodes (aws/eks-charts v0.5.30 stable/aws-efa-k8s-device-plugin/templates/daemonset.yaml
    lines 60-63: eks.amazonaws.com/compute-type NotIn [auto]); a standard cluster's pools take EFA as `fabric` says."""
    if cluster is not None and cluster.managed_mode == AUTO_MODE:
        return ("EKS Auto Mode takes no placement group or per-device EFA settings, and the EFA device plugin chart keeps off Auto "
                "Mode nodes (its affinity: eks.amazonaws.com/compute-type NotIn auto)")
    return None


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
# Fabric: EFA pools need a cluster placement group (a Capacity Block places its instances itself); pods reach EFA through the EFA device plugin.
FABRIC_IN_WORDS = "EFA"  # as policy messages name it
FABRIC_PLACEMENT_GROUP = True
FABRIC_DEVICE_SOFTWARE = "efa-device-plugin"


def fabric_resource_count(fabric) -> int:
    """A pod asks for every EFA interface of its node (vpc.amazonaws.com/efa, one per interface)."""
    return fabric.efa


def fabric_zone_of_cluster(pool, cluster) -> str | None:
    """EKS fabric pools name their zone (or their reservation's); the cluster gives none."""
    return None

# The fabric is offered wherever the catalog records one (None: no reason to leave it off).
FABRIC_OFFERED: str | None = None
# What the policy pack advises for a pool built for multi-node jobs that has no fabric.
MULTI_NODE_ADVICE = "give it one zone and fabric: on"
