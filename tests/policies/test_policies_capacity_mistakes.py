"""Expensive capacity mistakes on the resources the program plans: a Capacity Block with nothing after it, a fabric pool on
spot, Karpenter reservations by tag with no owner account; and one reservation listed by two pools, refused."""

from __future__ import annotations

import pytest

from conftest import plan_of, stack_config
from gpupools.cli.policycheck import run_policies
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

BLOCK = {"reservation": {"id": "cr-0123456789abcdef0", "kind": "capacity-block", "zones": ["eu-central-1a"], "nodes": 2}}
ODCR = {"reservation": {"id": "cr-0fedcba9876543210", "zones": ["eu-central-1b"], "nodes": 2}}


def pool(name: str = "big", **fields) -> dict:
    return {"name": name, "instanceType": "p4d.24xlarge", "maxNodes": 4, **fields}


def messages(config: dict, policy: str) -> list[str]:
    return [v.message for v in run_policies(plan_of(config)).violations if v.policy == policy]


# --------------------------------------------------------------------------------------------------------------------
# capacity-block-fallback


def test_a_block_followed_by_on_demand_passes():
    assert messages(stack_config("aws", pools=[pool(capacity=[BLOCK, "on-demand"])]), "capacity-block-fallback") == []


@pytest.mark.parametrize("autoscaler", ["karpenter", "cluster-autoscaler"])
def test_a_block_alone_is_reported_with_its_consequence(autoscaler):
    (message,) = messages(stack_config("aws", autoscaler=autoscaler, pools=[pool(capacity=[BLOCK])]), "capacity-block-fallback")
    assert "when the block ends every job on it stops" in message and "\n" not in message


def test_a_gb200_block_alone_is_not_reported_it_has_nothing_to_fall_back_to():
    # P6e-GB200 is sold only as UltraServers through Capacity Blocks: no on-demand to list after the block.
    gb200 = {"name": "gb200", "instanceType": "p6e-gb200.36xlarge", "maxNodes": 18,
             "capacity": [{"reservation": {**BLOCK["reservation"], "zones": ["us-east-1a"], "nodes": 18}}]}
    config = stack_config("aws", autoscaler="cluster-autoscaler", pools=[gb200])
    config["aws:region"] = "us-east-1"
    assert messages(config, "capacity-block-fallback") == []


# --------------------------------------------------------------------------------------------------------------------
# karpenter-reservation-owner


def by_tags(**fields) -> dict:
    return {"reservation": {"tags": {"team": "ml"}, "nodes": 2, "zones": ["eu-central-1b"], **fields}}


def test_reservations_by_tag_with_an_owner_pass():
    assert messages(stack_config("aws", pools=[pool(capacity=[by_tags(ownerId="123456789012"), "on-demand"])]), "karpenter-reservation-owner") == []


def test_reservations_by_tag_without_an_owner_are_reported():
    (message,) = messages(stack_config("aws", pools=[pool(capacity=[by_tags(), "on-demand"])]), "karpenter-reservation-owner")
    assert "no ownerID" in message and "shared into the account" in message


# --------------------------------------------------------------------------------------------------------------------
# fabric-pool-not-spot


def test_a_fabric_pool_on_demand_passes():
    assert messages(stack_config("aws", pools=[pool(zones=["eu-central-1a"])]), "fabric-pool-not-spot") == []


@pytest.mark.parametrize("capacity", [["spot"], [ODCR, "spot"]])
def test_a_fabric_pool_on_spot_or_reserved_then_spot_is_reported(capacity):
    zones = ["eu-central-1b"]
    (message,) = messages(stack_config("aws", pools=[pool(zones=zones, capacity=capacity)]), "fabric-pool-not-spot")
    assert "'big'" in message and "one node reclaimed stops every node" in message


def test_a_spot_pool_without_a_fabric_is_not_judged():
    assert messages(stack_config("aws", pools=[pool(capacity=["spot"])]), "fabric-pool-not-spot") == []


# --------------------------------------------------------------------------------------------------------------------
# one reservation, two pools


def test_two_pools_on_two_reservations_are_valid():
    other = {"reservation": {**ODCR["reservation"], "id": "cr-0aaaaaaaaaaaaaaaa"}}
    validate_stack(stack_config("aws", pools=[pool("a", capacity=[ODCR, "on-demand"]), pool("b", capacity=[other, "on-demand"])]))


def test_one_reservation_in_two_pools_is_one_line_naming_the_second():
    with pytest.raises(ConfigError) as caught:
        validate_stack(stack_config("aws", pools=[pool("a", capacity=[ODCR, "on-demand"]), pool("b", capacity=[ODCR, "on-demand"])]))
    (problem,) = [p for p in caught.value.problems if "reservation" in p.path]
    assert problem.path == "pools[1].capacity[0].reservation.id"
    assert "also pools[0].capacity[0]" in problem.message and "\n" not in str(problem)


@pytest.mark.parametrize("cloud, instance, zone, words", [("gcp", "a3-highgpu-8g", "us-central1-a", "Spot VMs"),
                                                          ("azure", "Standard_ND96isr_H100_v5", "1", "scaleSetPriority Spot")])
def test_gke_and_aks_fabric_pools_on_spot_are_reported_and_on_demand_pass(cloud, instance, zone, words):
    def config(capacity):
        return stack_config(cloud, pools=[{"name": "big", "instanceType": instance, "maxNodes": 2, "zones": [zone], "capacity": capacity}])
    assert messages(config(["on-demand"]), "fabric-pool-not-spot") == []
    (message,) = messages(config(["spot"]), "fabric-pool-not-spot")
    assert words in message
