"""Policies on the clouds' managed modes, on the resources the program plans: a GKE ComputeClass's ceiling, taint,
reservation and budget; EKS Auto Mode's add-ons and fabric advice. What gpupools plans passes; one wrong field is
reported."""

from __future__ import annotations

import copy

import pytest
import yaml

from conftest import ROOT, plan_of, stack_config
from test_policies import resource_violations, stack_violations

CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def planned(stack: str):
    return plan_of(yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"], stack)


@pytest.fixture(scope="module")
def fallback():
    return planned("dev-gcp-fallback")


@pytest.fixture(scope="module")
def auto():
    return planned("dev-aws-auto")


def resources(plan, *types) -> list[tuple[str, str, dict]]:
    return [(r.type, r.name, copy.deepcopy(r.inputs)) for t in types for r in plan.of_type(t)]


def test_every_class_has_a_ceiling_and_one_without_is_reported(fallback):
    stack = resources(fallback, CLASS, GKE_CLUSTER)
    assert stack_violations("compute-class-ceiling", stack) == []
    cluster = next(p for t, _n, p in stack if t == GKE_CLUSTER)
    cluster["clusterAutoscaling"]["resourceLimits"] = [r for r in cluster["clusterAutoscaling"]["resourceLimits"] if r["resourceType"] != "nvidia-h100-80gb"]
    (message,) = stack_violations("compute-class-ceiling", stack)
    assert "ComputeClass 'h100'" in message and "falls back to on-demand VMs with no ceiling" in message and "nvidia-h100-80gb" in message


def test_the_budget_counts_a_class_at_its_ceiling(fallback):
    stack = resources(fallback, CLASS, GKE_CLUSTER)
    (message,) = stack_violations("fleet-budget", stack, {"maxGpus": 13, "maxMonthlyUsd": 10_000_000})
    assert "can scale to 14 GPUs" in message and "h100 8" in message and "infer 6" in message
    assert stack_violations("fleet-budget", stack, {"maxGpus": 14, "maxMonthlyUsd": 10_000_000}) == []


def test_a_class_without_the_gpu_taint_is_reported(fallback):
    props = copy.deepcopy(fallback.get(CLASS, "computeclass-gpupools-infer").inputs)
    assert resource_violations("gpu-pool-taint", CLASS, props) == []
    props["spec"]["nodePoolConfig"]["taints"] = []
    (message,) = resource_violations("gpu-pool-taint", CLASS, props)
    assert "spec.nodePoolConfig.taints" in message


def test_a_class_with_a_reservation_priority_counts_as_reserved(fallback):
    props = copy.deepcopy(fallback.get(CLASS, "computeclass-gpupools-h100").inputs)
    assert resource_violations("scarce-gpus-reserved", CLASS, props) == []
    props["spec"]["priorities"] = [p for p in props["spec"]["priorities"] if "reservations" not in p and "flexStart" not in p]
    (message,) = resource_violations("scarce-gpus-reserved", CLASS, props)
    assert "H100-80GB" in message


def test_an_auto_mode_cluster_runs_its_add_ons_itself(auto):
    stack = resources(auto, EKS_CLUSTER, "aws:eks/addon:Addon")
    assert stack_violations("eks-managed-addons", stack) == []
    for _t, _n, props in stack:
        props["computeConfig"]["enabled"] = False
    (message,) = stack_violations("eks-managed-addons", stack)
    assert "does not run vpc-cni" in message


def test_the_fabric_advice_fits_auto_mode(auto):
    stack = resources(auto, NODE_POOL, "kubernetes:eks.amazonaws.com/v1:NodeClass")
    assert stack_violations("multi-node-pool-fabric", stack) == []  # the example's H100 pool holds one node
    for _t, _n, props in stack:
        if _t == NODE_POOL:
            props["spec"]["limits"]["nodes"] = "2"
    (message,) = stack_violations("multi-node-pool-fabric", stack)
    assert "EKS Auto Mode gives its nodes no EFA placement" in message and "fabric: on" not in message
    for _t, _n, props in stack:
        if _t == NODE_POOL:
            props["spec"]["template"]["spec"]["nodeClassRef"]["group"] = "karpenter.k8s.aws"
    (message,) = stack_violations("multi-node-pool-fabric", stack)
    assert "give it one zone and fabric: on" in message


def test_nap_node_pools_are_azure_gpu_pools_by_their_node_class():
    plan = planned("dev-azure-nap")
    stack = resources(plan, NODE_POOL, "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")
    assert stack_violations("kueue-flavors-match-pools", stack) == []
    for _t, _n, props in stack:
        if _t == NODE_POOL:
            props["spec"]["template"]["spec"]["nodeClassRef"]["group"] = "karpenter.k8s.aws"  # an AWS class: no such GPU instance type
    assert any("which is not a GPU pool of this stack" in m for m in stack_violations("kueue-flavors-match-pools", stack))


AUTOPILOT_POOL = "gpupools:index:GkeAutopilotPool"


@pytest.fixture(scope="module")
def autopilot():
    return planned("dev-gcp-autopilot")


def test_the_budget_counts_autopilot_pools_from_what_their_pods_select(autopilot):
    stack = resources(autopilot, AUTOPILOT_POOL)
    # infer: 6 nodes of one L4, train: 2 nodes of eight H100s (the plan's "22 GPUs at most").
    (message,) = stack_violations("fleet-budget", stack, {"maxGpus": 21, "maxMonthlyUsd": 10_000_000})
    assert "can scale to 22 GPUs" in message and "train 16" in message and "infer 6" in message
    assert stack_violations("fleet-budget", stack, {"maxGpus": 22, "maxMonthlyUsd": 10_000_000}) == []
    for _t, name, props in stack:
        if name == "train":
            props["nodeSelector"]["cloud.google.com/gke-accelerator"] = "nvidia-unknown"  # no GPU the catalog knows: not a GPU pool
    assert stack_violations("fleet-budget", stack, {"maxGpus": 6, "maxMonthlyUsd": 10_000_000}) == []


def test_an_autopilot_pool_s_time_sharing_counts_its_units():
    from gpupools.policies._readback import gpu_pool, resolve_sharing

    plan = planned("dev-gcp-autopilot")
    infer = plan.get(AUTOPILOT_POOL, "infer").inputs
    pool = gpu_pool(AUTOPILOT_POOL, "infer", infer)
    resolve_sharing([pool], [(AUTOPILOT_POOL, "infer", infer)])
    assert (pool.units_per_gpu, pool.max_units, pool.price_per_node) == (4, 24, 0.85362)
    whole = copy.deepcopy(infer)
    del whole["nodeSelector"]["cloud.google.com/gke-max-shared-clients-per-gpu"]
    pool = gpu_pool(AUTOPILOT_POOL, "infer", whole)
    resolve_sharing([pool], [(AUTOPILOT_POOL, "infer", whole)])
    assert pool.units_per_gpu == 1 and pool.target.MODE == "autopilot"
    # Two L4s per node is another machine than g2-standard-8's one: counted, but not priced at its price.
    whole["nodeSelector"]["cloud.google.com/gke-accelerator-count"] = "2"
    pool = gpu_pool(AUTOPILOT_POOL, "infer", whole)
    assert pool.gpus_per_node == 2 and pool.price_per_node is None


def test_no_fabric_or_reservation_advice_for_what_autopilot_pools_cannot_take(autopilot):
    stack = resources(autopilot, AUTOPILOT_POOL)
    assert stack_violations("multi-node-pool-fabric", stack) == []  # train: two A3 nodes, no GPUDirect on Autopilot
    train = autopilot.get(AUTOPILOT_POOL, "train").inputs
    assert resource_violations("scarce-gpus-reserved", AUTOPILOT_POOL, train) == []
    # The same machine type in a Standard cluster's node pool is advised both.
    standard = plan_of(stack_config("gcp", pools=[{"name": "train", "instanceType": "a3-highgpu-8g", "maxNodes": 2}]))
    pools = resources(standard, "gcp:container/nodePool:NodePool")
    assert any("give it one zone and fabric: on" in m for m in stack_violations("multi-node-pool-fabric", pools))
    train_pool = next(p for _t, n, p in pools if n == "train")
    assert resource_violations("scarce-gpus-reserved", "gcp:container/nodePool:NodePool", train_pool)


def test_autopilot_flavors_match_the_pools_their_pods_select(autopilot):
    stack = resources(autopilot, AUTOPILOT_POOL, "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")
    assert stack_violations("kueue-flavors-match-pools", stack) == []
    for _t, name, props in stack:
        if _t == AUTOPILOT_POOL and name == "infer":
            props["nodeSelector"]["cloud.google.com/gke-accelerator"] = "nvidia-unknown"
    assert any("selects pool infer, which is not a GPU pool of this stack" in m for m in stack_violations("kueue-flavors-match-pools", stack))
    # Without the pool components (a stack of flavors alone), the quotas are promised against nothing the pack can see.
    flavors = [r for r in stack if r[0] != AUTOPILOT_POOL]
    assert len(stack_violations("kueue-flavors-match-pools", flavors)) == 2


def test_an_autopilot_pool_without_a_team_quota_is_reported(autopilot):
    queues = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
    stack = resources(autopilot, AUTOPILOT_POOL, "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", queues)
    assert stack_violations("managed-pool-quota", stack) == []
    for typ, _n, props in stack:
        if typ == queues:  # no team quota on pool train any more (research's is its only one)
            for group in props["spec"]["resourceGroups"]:
                group["flavors"] = [f for f in group["flavors"] if f["name"] != "train"]
    (message,) = stack_violations("managed-pool-quota", stack)
    assert message.startswith("pool 'train' has no team quota") and "GKE makes a GPU node for every pod" in message
    # A Standard cluster's pool without any queue is bounded by its own node limit.
    standard = plan_of(stack_config("gcp"))
    assert stack_violations("managed-pool-quota", resources(standard, "gcp:container/nodePool:NodePool")) == []


def test_nap_pools_get_advice_node_auto_provisioning_can_take():
    """An H100 NodePool on AKS node auto-provisioning is told to run multi-node jobs on an agent pool (fabric: on and
    capacity reservation groups are refused there), while the same VM size in an agent pool is told to take both."""
    nd = {"name": "train", "instanceType": "Standard_ND96isr_H100_v5", "maxNodes": 2, "zones": ["1"]}
    cluster = {"name": "ml-nap", "resourceGroup": "rg-ml-nap", "mode": "node-auto-provisioning"}
    nap = resources(plan_of(stack_config("azure", pools=[nd], cluster=cluster, gpuSoftware={"installer": "device-plugin"})), NODE_POOL)
    (message,) = stack_violations("multi-node-pool-fabric", nap)
    assert "run multi-node jobs on an agent pool (cluster.mode: standard)" in message and "fabric: on" not in message.split(";")[1]
    assert [m for _t, _n, props in nap for m in resource_violations("scarce-gpus-reserved", NODE_POOL, props)] == []
    agent = resources(plan_of(stack_config("azure", pools=[{**nd, "fabric": "none"}])), "azure-native:containerservice:AgentPool")
    assert any("give it one zone and fabric: on" in m for m in stack_violations("multi-node-pool-fabric", agent))
    assert any(resource_violations("scarce-gpus-reserved", "azure-native:containerservice:AgentPool", p) for _t, _n, p in agent)
