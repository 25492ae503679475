"""Per-cloud pure decisions, without Pulumi."""

from __future__ import annotations

import json

from gpupools.clouds import aws, azure, gcp
from gpupools.validation.stack import validate_stack
from gpupools.core.pools import GPU_TAINT, Taint, spell_taint
from gpupools.pools.planning import plan_pools
from gpupools.autoscaling.choice import CLUSTER_AUTOSCALER
from gpupools.autoscaling.templates import node_group_labels

from conftest import stack_config


def test_one_taint_spelled_per_cloud():
    assert spell_taint(GPU_TAINT, aws.TAINT_STYLE) == {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
    assert spell_taint(GPU_TAINT, gcp.TAINT_STYLE) == {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
    assert spell_taint(GPU_TAINT, azure.TAINT_STYLE) == "nvidia.com/gpu=present:NoSchedule"
    assert spell_taint(Taint("a", "b", "PreferNoSchedule"), "enum")["effect"] == "PREFER_NO_SCHEDULE"


def test_portable_labels():
    (plan,) = plan_pools(validate_stack(stack_config("aws", pools=[{"name": "x", "instanceType": "p4de.24xlarge", "maxNodes": 1, "labels": {"team": "a"}}])))
    assert plan.labels["gpupools.io/pool"] == "x"
    assert plan.labels["gpupools.io/gpu"] == "A100-80GB"
    assert plan.labels["team"] == "a"


def _plan(cloud, **pool):
    (plan,) = plan_pools(validate_stack(stack_config(cloud, pools=[{"name": "x", "maxNodes": 2, **pool}])))
    return plan


def test_eks_ami_and_capacity():
    assert aws.ami_type(_plan("aws", instanceType="g5.xlarge").pool) == "AL2023_x86_64_NVIDIA"
    plan = _plan("aws", instanceType="g5.xlarge", os="bottlerocket", spot=True, diskSizeGb=300)
    args = aws.node_group_args(plan, "c", "arn", ["s1", "s2"], "lt", "1", None, node_group_labels(plan, CLUSTER_AUTOSCALER))
    assert args["ami_type"] == "BOTTLEROCKET_x86_64_NVIDIA" and args["capacity_type"] == "SPOT"
    lt = aws.launch_template_args(plan)
    assert lt["blockDeviceMappings"][0]["deviceName"] == "/dev/xvdb"  # Bottlerocket's data volume
    assert lt["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 300


def test_eks_kubeconfig_uses_get_token():
    config = json.loads(aws.kubeconfig("c", "https://x", "Q0E=", "eu-central-1"))
    assert config["users"][0]["user"]["exec"]["args"][:4] == ["eks", "get-token", "--cluster-name", "c"]
    assert "token" not in config["users"][0]["user"]  # no static credential


def test_eks_subnet_layout_has_private_and_public_per_zone():
    layout = aws.subnet_layout(3)
    assert [(s["zone_index"], s["public"]) for s in layout] == [(0, True), (0, False), (1, True), (1, False), (2, True), (2, False)]
    assert len({s["cidr"] for s in layout}) == 6


def test_new_vpc_spans_the_zones_pools_ask_for_first():
    available = ["eu-central-1a", "eu-central-1b", "eu-central-1c"]
    assert aws.vpc_zones(available, []) == ["eu-central-1a", "eu-central-1b"]
    assert aws.vpc_zones(available, ["eu-central-1c"]) == ["eu-central-1c", "eu-central-1a"]
    assert aws.vpc_zones(available, ["eu-central-1c", "eu-central-1b", "eu-central-1a"], 3) == ["eu-central-1c", "eu-central-1b", "eu-central-1a"]


def test_aks_driver_ownership_and_spot():
    plan = _plan("azure", instanceType="Standard_NC4as_T4_v3", spot=True)
    assert azure.agent_pool_args(plan, "gpu-operator", "rg", "c", None)["gpu_profile"] == {"driver": "None"}
    args = azure.agent_pool_args(plan, "device-plugin", "rg", "c", "1.33")
    assert args["gpu_profile"] == {"driver": "Install"}
    assert args["orchestrator_version"] == "1.33"
    assert azure.extra_tolerations(plan)[0]["key"] == "kubernetes.azure.com/scalesetpriority"


def test_gke_n1_hardware_price_adds_the_gpus():
    plan = _plan("gcp", instanceType="n1-standard-8", gpu="nvidia-tesla-v100", gpuCount=2)
    assert plan.hardware.gpus_per_node == 2
    assert plan.hardware.price_per_node == round(0.38 + 2 * 2.48, 4)
    assert plan.hardware.accelerator == "nvidia-tesla-v100"


def test_gke_autoscaling_bounds_the_whole_pool():
    args = gcp.node_pool_args(_plan("gcp", instanceType="g2-standard-4", minNodes=1), "cloud", "c", "us-central1", "p", None)
    assert args["autoscaling"]["total_min_node_count"] == 1 and args["autoscaling"]["total_max_node_count"] == 2
    assert args["node_config"]["shielded_instance_config"]["enable_secure_boot"] is True
