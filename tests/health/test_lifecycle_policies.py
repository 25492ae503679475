"""The lifecycle policies: repair off on a GPU pool, and GPU pools without the readiness gate, are flagged; the stacks
gpupools plans pass."""

from __future__ import annotations

import pytest

from conftest import plan_of, stack_config
from gpupools.cli.policycheck import run_policies
from gpupools.health.readiness import READINESS_TAINT
from test_policies import RELEASE, eks_node_group, gke_node_pool, helm_release, resource_violations, stack_violations

EKS = "aws:eks/nodeGroup:NodeGroup"
GKE = "gcp:container/nodePool:NodePool"
KARPENTER_POOL = "kubernetes:karpenter.sh/v1:NodePool"
GATE = {"key": READINESS_TAINT.key, "value": READINESS_TAINT.value, "effect": "NO_SCHEDULE"}
GPU_TAINT = {"effect": "NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "present"}


def lifecycle_violations(plan) -> list[str]:
    return [v.message for v in run_policies(plan).violations if v.policy in ("gpu-node-repair", "gpu-node-readiness")]


@pytest.mark.parametrize("config", [
    stack_config("aws"), stack_config("aws", autoscaler="cluster-autoscaler", pools=[
        {"name": "m", "instanceType": "p4de.24xlarge", "maxNodes": 2, "sharing": {"mode": "mig", "migProfile": "1g.10gb"}},
        {"name": "b", "instanceType": "g6.xlarge", "maxNodes": 2, "os": "bottlerocket"}]),
    stack_config("azure"), stack_config("gcp"),
])
def test_planned_stacks_pass(config):
    assert lifecycle_violations(plan_of(config)) == []


def test_repair_off_is_flagged_per_pool():
    plan = plan_of(stack_config("aws", autoscaler="cluster-autoscaler", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2,
                                                                               "autoRepair": False}]))
    (message,) = lifecycle_violations(plan)
    assert message.startswith("GPU node group 'infer' has EKS node repair off")
    gke = plan_of(stack_config("gcp", pools=[{"name": "infer", "instanceType": "g2-standard-8", "maxNodes": 2, "autoRepair": False}]))
    assert [m for m in lifecycle_violations(gke) if m.startswith("GPU node pool 'infer' has GKE auto-repair off")]


def test_repair_policy_on_single_resources():
    assert resource_violations("gpu-node-repair", EKS, eks_node_group(nodeRepairConfig={"enabled": True})) == []
    unset = {k: v for k, v in eks_node_group().items() if k != "nodeRepairConfig"}
    assert resource_violations("gpu-node-repair", EKS, unset)  # no nodeRepairConfig: EKS keeps repair off
    cpu = eks_node_group(amiType="AL2023_x86_64_STANDARD", instanceTypes=["t3.large"], labels={"gpupools.io/pool": "system"})
    assert resource_violations("gpu-node-repair", EKS, cpu) == []
    assert resource_violations("gpu-node-repair", GKE, {**gke_node_pool(), "management": {"autoRepair": True}}) == []
    assert resource_violations("gpu-node-repair", GKE, {**gke_node_pool(), "management": {"autoRepair": False}})
    # GKE's flex-start and queued provisioning want auto-repair off (gke-dws-node-pool): not a repair finding there.
    queued = {**gke_node_pool(), "management": {"autoRepair": False}, "queuedProvisioning": {"enabled": True}}
    assert resource_violations("gpu-node-repair", GKE, queued) == []
    flex = gke_node_pool()
    flex = {**flex, "management": {"autoRepair": False}, "nodeConfig": {**flex.get("nodeConfig", {}), "flexStart": True}}
    assert resource_violations("gpu-node-repair", GKE, flex) == []
    karpenter = helm_release(chart="oci://public.ecr.aws/karpenter/karpenter", name="karpenter",
                             values={"settings": {"featureGates": {"nodeOverlay": True}}})
    assert [m for m in resource_violations("gpu-node-repair", RELEASE, karpenter) if "featureGates.nodeRepair" in m]


def test_missing_readiness_gate_is_flagged():
    operator = (RELEASE, "gpu-operator", helm_release())
    ungated = (EKS, "infer", eks_node_group())
    gated = (EKS, "infer", eks_node_group(taints=[GPU_TAINT, GATE]))
    controller = (RELEASE, "node-readiness-controller", helm_release(chart="oci://registry.k8s.io/node-readiness-controller/charts/node-readiness-controller",
                                                                       name="node-readiness-controller", values={}))
    (message,) = stack_violations("gpu-node-readiness", [operator, ungated, controller])
    assert "takes work as soon as its nodes are Ready" in message
    (message,) = stack_violations("gpu-node-readiness", [operator, gated])
    assert "no node-readiness-controller release lifts it" in message
    assert stack_violations("gpu-node-readiness", [operator, gated, controller]) == []
    autoscaler = (RELEASE, "cluster-autoscaler", helm_release(chart="cluster-autoscaler", name="cluster-autoscaler", values={"extraArgs": {}}))
    (message,) = stack_violations("gpu-node-readiness", [operator, gated, controller, autoscaler])
    assert "cluster-autoscaler is not told" in message
    told = (RELEASE, "cluster-autoscaler", helm_release(chart="cluster-autoscaler", name="cluster-autoscaler",
                                                         values={"extraArgs": {"startup-taint": READINESS_TAINT.key}}))
    assert stack_violations("gpu-node-readiness", [operator, gated, controller, told]) == []
    # Without the GPU Operator there is no validator to wait for; Bottlerocket pools have none either.
    assert stack_violations("gpu-node-readiness", [ungated]) == []
    bottlerocket = eks_node_group(labels={**eks_node_group()["labels"], "nvidia.com/gpu.deploy.operands": "false"})
    assert stack_violations("gpu-node-readiness", [operator, (EKS, "br", bottlerocket)]) == []


def test_gate_turned_off_is_flagged_on_the_planned_stack():
    messages = lifecycle_violations(plan_of(stack_config("aws", health={"readinessGate": False})))
    assert messages and all("takes work as soon as its nodes are Ready" in m for m in messages)
