"""Rack-scale NVL72 pools: GB200 on EKS (P6e-GB200 UltraServers through a Capacity Block, a managed node group of the
AL2023 ARM NVIDIA AMI) and GB200 / GB300 on GKE (A4X, A4X Max: a reservation, a compact placement of topology 1x72,
GKE's managed DRA networking); the pools' own fields, and each refusal as one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.clouds.gcp import pools as gke_pools
from gpupools.core.catalog import load_catalog

from conftest import plan_of, stack_config, write_stack

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
NODE_GROUP, LAUNCH_TEMPLATE = "aws:eks/nodeGroup:NodeGroup", "aws:ec2/launchTemplate:LaunchTemplate"
NODE_POOL, RESOURCE_POLICY = "gcp:container/nodePool:NodePool", "gcp:compute/resourcePolicy:ResourcePolicy"


def example(name: str) -> dict:
    return yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"]


@pytest.fixture(scope="module")
def eks_plan():
    return plan_of(example("dev-aws-gb200"), "dev-aws-gb200")


@pytest.fixture(scope="module")
def gke_plan():
    return plan_of(example("dev-gcp-a4x"), "dev-gcp-a4x")


def test_the_catalog_knows_gb200_and_gb300_racks_on_arm64_hosts():
    catalog = load_catalog()
    gb300 = catalog.gpus["GB300-279GB"]
    assert (gb300.nvlink_domain, gb300.memory_gb, gb300.min_driver, gb300.mig_unavailable is not None) == (72, 279, 580, True)
    for cloud, name, gpu in (("aws", "p6e-gb200.36xlarge", "GB200-186GB"), ("gcp", "a4x-highgpu-4g", "GB200-186GB"),
                             ("gcp", "a4x-maxgpu-4g-metal", "GB300-279GB")):
        found = catalog.instance(cloud, name)
        assert (found.gpu.name, found.gpus, found.arch, found.rack_scale, found.price) == (gpu, 4, "arm64", True, None), name
    assert catalog.instance("gcp", "a4x-maxgpu-4g-metal").accelerator == "nvidia-gb300"
    assert not catalog.instance("aws", "p6-b300.48xlarge").rack_scale and catalog.instance("aws", "p6-b300.48xlarge").arch == "x86_64"
    # EC2 sells no P6e-GB300 type the catalog could cite, and AKS GB200 stays refused.
    assert not any(n.startswith("p6e-gb300") for n in catalog.instances["aws"]) and catalog.refusal("azure", "Standard_ND128isr_NDR_GB200_v6")


def test_eks_gb200_pool_is_a_capacity_block_node_group_of_the_arm_nvidia_ami(eks_plan):
    group = eks_plan.get(NODE_GROUP, "gb200").inputs
    assert (group["amiType"], group["capacityType"]) == ("AL2023_ARM_64_NVIDIA", "CAPACITY_BLOCK")
    assert "instanceTypes" not in group  # the block's type lives in the launch template
    template = eks_plan.get(LAUNCH_TEMPLATE, "gb200-nodes").inputs
    assert template["instanceType"] == "p6e-gb200.36xlarge"
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"] == {"capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}}
    # No Karpenter in the stack: cluster-autoscaler's group; an x86 node group keeps its x86 AMI.
    assert not eks_plan.of_type("kubernetes:karpenter.sh/v1:NodePool")


def test_an_x86_pool_keeps_the_x86_ami():
    from gpupools.clouds.aws.pools import ami_type
    from gpupools.stack.config import Pool
    assert ami_type(Pool(name="p", instanceType="p6-b300.48xlarge", maxNodes=1)) == "AL2023_x86_64_NVIDIA"
    assert ami_type(Pool(name="p", instanceType="p6e-gb200.36xlarge", maxNodes=1)) == "AL2023_ARM_64_NVIDIA"


def test_gke_a4x_pool_has_its_reservation_compact_1x72_placement_and_managed_dra_networking(gke_plan):
    pool = gke_plan.get(NODE_POOL, "a4x").inputs
    config = pool["nodeConfig"]
    assert pool["placementPolicy"] == {"type": "COMPACT", "policyName": "gpupools-a4x"}
    assert pool["networkConfig"] == {"acceleratorNetworkProfile": "auto"}
    assert config["labels"]["cloud.google.com/gke-networking-dra-driver"] == "true"
    assert config["imageType"] == "COS_CONTAINERD" and config["machineType"] == "a4x-highgpu-4g"
    assert config["reservationAffinity"]["consumeReservationType"] == "SPECIFIC_RESERVATION"
    assert config["reservationAffinity"]["values"] == ["a4x-reservation"]
    assert pool["nodeCount"] == 18 and "autoscaling" not in pool
    policy = gke_plan.get(RESOURCE_POLICY, "gpupools-a4x").inputs
    assert policy["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "1x72"} and policy["region"] == "us-central1"
    # The system pool is no rack: no placement, no DRA networking.
    system = gke_plan.get(NODE_POOL, "system").inputs
    assert "placementPolicy" not in system and "networkConfig" not in system


def test_gpupools_daemonsets_tolerate_gkes_arm64_taint_on_arm_pools_only():
    from gpupools.core.pools import Taint
    plans = {p.pool.instance_type: p for p in _plans("gcp", ["a4x-highgpu-4g", "a4-highgpu-8g"])}
    arm = Taint("kubernetes.io/arch", "arm64", "NoSchedule")
    assert arm in gke_pools.node_taints(plans["a4x-highgpu-4g"]) and arm not in gke_pools.node_taints(plans["a4-highgpu-8g"])
    assert {"key": "kubernetes.io/arch", "operator": "Exists", "effect": "NoSchedule"} in gke_pools.extra_tolerations(plans["a4x-highgpu-4g"])


def _plans(cloud: str, types: list[str]):
    from gpupools.pools.planning import plan_pools
    from gpupools.validation.stack import validate_stack
    pools = [{"name": f"p{i}", "instanceType": t, "maxNodes": 1, "zones": ["us-central1-b"],
              **({"capacity": [{"reservation": {"id": f"res-{i}", "zones": ["us-central1-b"], "nodes": 1}}], "minNodes": 1}
                 if t.startswith("a4x") else {})}
             for i, t in enumerate(types)]
    return plan_pools(validate_stack(stack_config(cloud, pools=pools)))


def _one_line_exit_2(tmp_path, config: dict) -> str:
    path = write_stack(tmp_path, config)
    result = runner.invoke(app, ["plan", "--config", str(path)])
    assert result.exit_code == 2, result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("error: ")]
    assert "Traceback" not in result.output
    return line


BLOCK = {"reservation": {"id": "cr-0123456789abcdef0", "kind": "capacity-block", "zones": ["us-east-1a"], "nodes": 18}}


@pytest.mark.parametrize("keys, pool, field, words", [
    # Karpenter v1.14 cannot serve DRA claims: one line, what to use.
    ({"autoscaler": "karpenter"}, {"capacity": [BLOCK]}, "pools[0].instanceType", "Karpenter v1.14.1 starts no node for a pod with ResourceClaims"),
    # No Capacity Block: UltraServers are sold no other way.
    ({"autoscaler": "cluster-autoscaler"}, {}, "pools[0].capacity", "only inside P6e-GB200 UltraServers through an EC2 Capacity Block"),
    ({"autoscaler": "cluster-autoscaler"}, {"capacity": [BLOCK, "on-demand"]}, "pools[0].capacity", "and nothing else"),
    ({"autoscaler": "cluster-autoscaler"}, {"capacity": [BLOCK], "os": "bottlerocket"}, "pools[0].os", "AL2023 ARM NVIDIA AMI only"),
])
def test_eks_gb200_refusals_are_one_line_exit_2(tmp_path, keys, pool, field, words):
    config = stack_config("aws", pools=[{"name": "gb200", "instanceType": "p6e-gb200.36xlarge", "maxNodes": 18, **pool}], **keys)
    config["aws:region"] = "us-east-1"
    line = _one_line_exit_2(tmp_path, config)
    assert line.startswith(f"error: {field}: ") and words in line, line


def test_eks_gb200_needs_kubernetes_1_33(tmp_path):
    config = stack_config("aws", pools=[{"name": "gb200", "instanceType": "p6e-gb200.36xlarge", "maxNodes": 18, "capacity": [BLOCK]}],
                          autoscaler="cluster-autoscaler")
    config["aws:region"] = "us-east-1"
    config["gpupools:cluster"]["kubernetesVersion"] = "1.32"
    assert "EKS runs p6e-gb200.36xlarge on Kubernetes 1.33 or later" in _one_line_exit_2(tmp_path, config)


@pytest.mark.parametrize("pool, keys, field, words", [
    ({}, {}, "pools[0].capacity", "sold only against a Compute Engine reservation"),
    ({"spot": True}, {}, "pools[0].capacity", "sold only against a Compute Engine reservation"),
    ({"capacity": [{"reservation": {"id": "a4x-res", "zones": ["us-central1-b"], "nodes": 18}}]}, {"gpuSoftware": {"installer": "gpu-operator"}},
     "gpuSoftware.installer", "runs GKE's own driver on COS"),
    ({"minNodes": 0, "capacity": [{"reservation": {"id": "a4x-res", "zones": ["us-central1-b"], "nodes": 18}}]}, {},
     "pools[0].minNodes", "set minNodes to maxNodes (18)"),
])
def test_gke_a4x_refusals_are_one_line_exit_2(tmp_path, pool, keys, field, words):
    config = stack_config("gcp", pools=[{"name": "a4x", "instanceType": "a4x-maxgpu-4g-metal", "minNodes": 18, "maxNodes": 18, **pool}], **keys)
    line = _one_line_exit_2(tmp_path, config)
    assert line.startswith(f"error: {field}: ") and words in line, line


RESERVATION = {"capacity": [{"reservation": {"id": "a4x-res", "zones": ["us-central1-b"], "nodes": 18}}]}


@pytest.mark.parametrize("cluster, field, words", [({"networkPolicy": False}, "cluster.networkPolicy", "turns Dataplane V2 off")])
def test_gke_managed_dra_networking_needs_dataplane_v2(tmp_path, cluster, field, words):
    config = stack_config("gcp", pools=[{"name": "a4x", "instanceType": "a4x-highgpu-4g", "minNodes": 18, "maxNodes": 18, **RESERVATION}])
    config["gpupools:cluster"].update(cluster)
    line = _one_line_exit_2(tmp_path, config)
    assert line.startswith(f"error: {field}: ") and words in line, line
    config["gpupools:cluster"].update({"kubernetesVersion": "1.34", "networkPolicy": True})
    from gpupools.validation.stack import validate_stack
    assert validate_stack(config)  # 1.34 with Dataplane V2 passes


@pytest.mark.parametrize("size", ["Standard_ND128isr_NDR_GB200_v6", "Standard_ND128isr_GB300_v6"])
def test_aks_gb200_is_refused_naming_the_preview_api(tmp_path, size):
    config = stack_config("azure", pools=[{"name": "gb", "instanceType": size, "maxNodes": 1}])
    config["azure-native:location"] = "eastus"
    line = _one_line_exit_2(tmp_path, config)
    assert line.startswith("error: pools[0].instanceType: ") and "preview API 2026-07-02-preview" in line and "use Standard_ND96isr_H200_v5" in line


def test_the_gb200_node_group_and_launch_template_are_valid_eks_and_ec2_requests(eks_plan):
    """Against botocore's service models: the ARM NVIDIA AMI type and CAPACITY_BLOCK are EKS enums, the launch template's
    market type and reservation target EC2 request members."""
    check = pytest.importorskip("clouds.test_cloud_models").check
    group = eks_plan.get(NODE_GROUP, "gb200").inputs
    check("eks", "CreateNodegroup", {"clusterName": "ml-gb200", "nodegroupName": group["nodeGroupName"], "nodeRole": "arn:aws:iam::1:role/n",
                                     "subnets": ["subnet-1"], "amiType": group["amiType"], "capacityType": group["capacityType"],
                                     "scalingConfig": group["scalingConfig"], "launchTemplate": {"id": "lt-1", "version": "1"}})
    template = eks_plan.get(LAUNCH_TEMPLATE, "gb200-nodes").inputs
    target = template["capacityReservationSpecification"]["capacityReservationTarget"]
    check("ec2", "CreateLaunchTemplate", {"LaunchTemplateName": "gb200-nodes", "LaunchTemplateData": {
        "InstanceType": template["instanceType"], "InstanceMarketOptions": {"MarketType": template["instanceMarketOptions"]["marketType"]},
        "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": target["capacityReservationId"]}}}})


def test_eks_auto_mode_refuses_gb200_in_one_line(tmp_path):
    config = stack_config("aws", pools=[{"name": "gb200", "instanceType": "p6e-gb200.36xlarge", "maxNodes": 18, "capacity": [BLOCK]}],
                          cluster={"name": "ml-test", "mode": "auto-mode"})
    config["aws:region"] = "us-east-1"
    line = _one_line_exit_2(tmp_path, config)
    assert line.startswith("error: pools[0].instanceType: p6e-gb200.36xlarge needs NVIDIA's DRA driver") and "EKS Auto Mode" in line, line


def test_a_gke_rack_pool_is_no_compute_class(tmp_path):
    config = stack_config("gcp", pools=[{"name": "a4x", "instanceType": "a4x-highgpu-4g", "maxNodes": 2, "provisioning": "compute-class",
                                         "capacity": [{"reservation": {"id": "a4x-res", "zones": ["us-central1-b"], "nodes": 2}}]}])
    result = runner.invoke(app, ["plan", "--config", str(write_stack(tmp_path, config))])
    assert result.exit_code == 2
    assert any(x.startswith("error: pools[0].provisioning: 'compute-class': a4x-highgpu-4g needs a node pool with a compact placement")
               for x in result.output.splitlines()), result.output


def test_gkes_managed_dra_networking_needs_no_network_objects(gke_plan):
    """The fabric-devices-reachable policy asks for GKE Network objects beside additional node networks, not beside
    GKE's managed DRA networking, whose NICs pods claim through ResourceClaims."""
    from gpupools.cli.policycheck import run_policies
    from gpupools.policies.fabric import _managed_dra_networking
    assert [v for v in run_policies(gke_plan).violations if v.policy == "fabric-devices-reachable"] == []
    assert _managed_dra_networking({"networkConfig": {"acceleratorNetworkProfile": "auto"}})
    assert not _managed_dra_networking({"networkConfig": {"acceleratorNetworkProfile": "auto",
                                                          "additionalNodeNetworkConfigs": [{"network": "n", "subnetwork": "s"}]}})
    assert not _managed_dra_networking({"networkConfig": {"additionalNodeNetworkConfigs": [{"network": "n", "subnetwork": "s"}]}})


def test_a4x_max_sets_aside_cluster_toolkits_huge_pages_and_a4x_none():
    args = {p.pool.instance_type: gke_pools.node_pool_args(p, "cloud", "ml", "us-central1", None, None)
            for p in _plans("gcp", ["a4x-maxgpu-4g-metal", "a4x-highgpu-4g"])}
    assert args["a4x-maxgpu-4g-metal"]["node_config"]["linux_node_config"] == {"hugepages_config": {"hugepage_size2m": 4096}}
    assert "linux_node_config" not in args["a4x-highgpu-4g"]["node_config"]
    assert args["a4x-maxgpu-4g-metal"]["node_config"]["guest_accelerators"][0]["type"] == "nvidia-gb300"
