"""Capacity policies on the resources the program plans: what it plans passes, and one wrong field is reported."""

from __future__ import annotations

import copy

import pytest
import yaml

from conftest import ROOT, plan_of, stack_config
from test_policies import EKS, GKE, resource_violations

KARPENTER = "kubernetes:karpenter.sh/v1:NodePool"
AKS = "azure-native:containerservice:AgentPool"


def planned(stack: str):
    return plan_of(yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"], stack)


@pytest.fixture(scope="module")
def dws():
    return planned("dev-gcp-dws").get(GKE, "h100").inputs


@pytest.fixture(scope="module")
def block_group():
    return plan_of(stack_config("aws", autoscaler="cluster-autoscaler", pools=[
        {"name": "block", "instanceType": "p4d.24xlarge", "maxNodes": 2,
         "capacity": [{"reservation": {"id": "cr-0123456789abcdef0", "kind": "capacity-block", "zones": ["eu-central-1a"], "nodes": 3}}]}])
    ).get(EKS, "block").inputs


def test_planned_dws_pool_passes(dws):
    assert resource_violations("gke-dws-node-pool", GKE, dws) == []


@pytest.mark.parametrize("path, value, words", [
    (("management", "autoRepair"), True, "management.autoRepair false"),
    (("autoscaling", "locationPolicy"), "BALANCED", "locationPolicy ANY"),
    (("autoscaling", "totalMinNodeCount"), 1, "from 0 nodes"),
    (("nodeConfig", "reservationAffinity", "consumeReservationType"), "ANY_RESERVATION", "NO_RESERVATION"),
    (("nodeConfig", "spot"), True, "no Spot"),
])
def test_dws_pool_with_a_setting_gke_rejects_is_reported(dws, path, value, words):
    props = copy.deepcopy(dws)
    node = props
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    (message,) = resource_violations("gke-dws-node-pool", GKE, props, name="h100")
    assert words in message and "queued provisioning" in message


def test_planned_capacity_block_group_passes_and_a_wrong_one_is_reported(block_group):
    assert resource_violations("eks-capacity-block-node-group", EKS, block_group) == []
    wrong = {**block_group, "instanceTypes": ["p4d.24xlarge"], "scalingConfig": {**block_group["scalingConfig"], "desiredSize": 1}}
    messages = resource_violations("eks-capacity-block-node-group", EKS, wrong)
    assert any("names instanceTypes" in m for m in messages) and any("desiredSize 1" in m for m in messages)


def test_reservation_beyond_max_nodes_is_advised(block_group):
    (message,) = resource_violations("reservation-within-max-nodes", EKS, block_group, name="block")
    assert "can run 2 nodes but its reservations hold 3" in message and "$21.96/h" in message
    assert resource_violations("reservation-within-max-nodes", EKS, {**block_group, "scalingConfig": {"minSize": 0, "maxSize": 3,
                                                                                                       "desiredSize": 0}}) == []


@pytest.mark.parametrize("stack, typ, name", [("dev-aws-reserved", KARPENTER, "nodepool-gpupools-h100"), ("dev-gcp-dws", GKE, "h100")])
def test_reserved_or_queued_h100_pools_pass_the_advice(stack, typ, name):
    plan = planned(stack)
    props = plan.get(typ, name).inputs
    assert resource_violations("scarce-gpus-reserved", typ, props) == []
    assert resource_violations("reservation-within-max-nodes", typ, props) == []


def test_on_demand_h100_pool_is_advised():
    config = stack_config("aws", autoscaler="cluster-autoscaler", pools=[
        {"name": "train", "instanceType": "p5.48xlarge", "maxNodes": 1}, {"name": "infer", "instanceType": "g6.xlarge", "maxNodes": 1}])
    config["aws:region"] = "us-east-1"  # where EC2 offers p5.48xlarge
    plan = plan_of(config)
    (message,) = resource_violations("scarce-gpus-reserved", EKS, plan.get(EKS, "train").inputs)
    assert "H100-80GB" in message and "no reservation" in message
    assert resource_violations("scarce-gpus-reserved", EKS, plan.get(EKS, "infer").inputs) == []


def test_aks_and_gke_markers_are_read():
    crg = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Compute/capacityReservationGroups/g"
    aks = plan_of(stack_config("azure", pools=[{"name": "a100", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 1,
                                                 "capacity": [{"reservation": {"id": crg, "nodes": 2}}, "on-demand"]}])).get(AKS, "a100").inputs
    (message,) = resource_violations("reservation-within-max-nodes", AKS, aks, name="a100")
    assert "reservations hold 2" in message
    gke = plan_of(stack_config("gcp", pools=[{"name": "res", "instanceType": "a3-highgpu-8g", "maxNodes": 1,
                                              "capacity": [{"reservation": {"id": "h100", "zones": ["us-central1-a"], "nodes": 2}}]}])).get(GKE, "res").inputs
    assert resource_violations("reservation-within-max-nodes", GKE, gke, name="res")
    assert resource_violations("scarce-gpus-reserved", GKE, gke) == []


def test_a_rack_scale_capacity_block_group_may_keep_nodes(block_group):
    """GB200 (an NVLink domain): cluster-autoscaler starts no node from zero for its ComputeDomain jobs, so the group keeps one."""
    keeps = {**block_group, "scalingConfig": {**block_group["scalingConfig"], "minSize": 1, "desiredSize": 1}}
    rack = {**keeps, "labels": {**(keeps.get("labels") or {}), "gpupools.io/gpu": "GB200-186GB"}}
    assert resource_violations("eks-capacity-block-node-group", EKS, rack) == []
    assert len(resource_violations("eks-capacity-block-node-group", EKS, keeps)) == 2  # minSize and desiredSize
