"""Capacity Block pools on EKS: no placement group of their own, and what Kueue quotas on a block do and do not know.

The upstream facts these tests encode:
- EC2 places a block's instances together itself ("there is no need to use a cluster placement group with a Capacity
  Block", EC2 user guide, capacity-blocks-using), and a placement group beside a block makes launches fail the block has
  room for: AWS ParallelCluster warns "When using a capacity block reservation, a placement group constraint should not
  be set as insufficient capacity errors may occur due to placement constraints outside of the reservation even if the
  capacity reservation has remaining capacity" (aws/aws-parallelcluster v3.11.1 @ c8773437,
  cli/src/pcluster/validators/ec2_validators.py lines 588-599) and skips its EFA placement-group check for blocks
  (cluster_validators.py lines 383-385);
- Kueue's all-or-nothing wait evicts and requeues a workload whose pods are not all ready within the timeout, with an
  exponential backoff and, without a limit, endlessly (kueue v0.19.2 @ 8eab6877, apis/config/v1beta2/
  configuration_types.go lines 302-329 and 402-440; pkg/controller/core/workload_controller.go lines 1229-1294), and
  Kueue 0.19 turns it on by default with 30m, 60s and 3600s (apis/config/v1beta2/defaults.go lines 99-117);
- Karpenter deletes a block's NodeClaims 40 minutes before its end, 10 minutes before EC2 starts terminating its
  instances (aws/karpenter-provider-aws v1.14.1, pkg/controllers/capacityreservation/expiration/controller.go lines
  47-49; pkg/apis/v1/ec2nodeclass_status.go line 238).
"""

from __future__ import annotations

import copy

import pytest

from conftest import plan_of, stack_config
from gpupools.capacity import sources as capacity
from gpupools.fabric.plan import fabric_row, plan_fabric
from gpupools.pools.planning import capacity_report, plan_pools
from gpupools.queues import kueue
from gpupools.validation.stack import validate_stack

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
BLOCK = {"reservation": {"id": "cr-0123456789abcdef0", "kind": "capacity-block", "zones": ["eu-central-1a"], "nodes": 1}}
ODCR = {"reservation": {"id": "cr-0fedcba9876543210", "zones": ["eu-central-1a"], "nodes": 1}}
TEAMS = [{"name": "ml", "gpus": {"big": 8}}]


def efa_pool(capacity_list: list, **over) -> dict:
    return {"name": "big", "instanceType": "p4d.24xlarge", "maxNodes": 2, "capacity": capacity_list, **over}


def fabric_violations(planned, names=("fabric-pool-one-zone", "capacity-block-placement")) -> list[tuple[str, str]]:
    from gpupools.cli.policycheck import run_policies
    from gpupools.policies.pack import by_name

    result = run_policies(planned, policies=[by_name()[n] for n in names])
    return [(v.policy, v.message) for v in result.violations]


@pytest.fixture(scope="module")
def block_plan():
    return plan_of(stack_config("aws", pools=[efa_pool([BLOCK, "on-demand"])], teams=TEAMS))


# --------------------------------------------------------------------------------------------------------------------
# No placement group on a Capacity Block


def test_a_capacity_block_pool_selects_no_placement_group_and_the_fabric_row_says_why(block_plan):
    assert block_plan.of_type(PLACEMENT_GROUP) == []
    (node_class,) = [r.inputs for r in block_plan.of_type(NODE_CLASS) if "reserved-big" in r.inputs["metadata"]["name"]]
    assert "placementGroupSelector" not in node_class["spec"]
    assert node_class["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    assert len([i for i in node_class["spec"]["networkInterfaces"] if i["interfaceType"] == "efa-only"]) == 4  # EFA stays
    node_pool = block_plan.get(NODE_POOL, "nodepool-gpupools-big").inputs
    assert node_pool["metadata"]["annotations"][capacity.CAPACITY_BLOCK_KEY] == "true"
    stack = validate_stack(stack_config("aws", pools=[efa_pool([BLOCK, "on-demand"])], teams=TEAMS))
    (plan,) = plan_pools(stack)
    row = fabric_row(plan_fabric(stack, plan), 0)["fabric"]
    assert row["placement"] == ("the Capacity Block's own placement (no placement group: Capacity Block instances are already placed "
                                "together; on-demand nodes start without one)") and row["zone"] == "eu-central-1a"
    assert fabric_violations(block_plan) == []


def test_a_capacity_block_node_group_has_no_placement_in_its_launch_template():
    planned = plan_of(stack_config("aws", autoscaler="cluster-autoscaler", pools=[efa_pool([BLOCK])]))
    assert planned.of_type(PLACEMENT_GROUP) == []
    template = planned.get(LAUNCH_TEMPLATE, "big-nodes").inputs
    assert "placement" not in template and template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert len(template["networkInterfaces"]) == 4
    assert fabric_violations(planned) == []


def test_other_efa_pools_keep_their_placement_group():
    """Negative: an ODCR or hourly EFA pool is placed by its own cluster placement group, as before."""
    for capacity_list in ([ODCR, "on-demand"], ["on-demand"]):
        planned = plan_of(stack_config("aws", pools=[efa_pool(capacity_list, zones=["eu-central-1a"])]))
        (group,) = planned.of_type(PLACEMENT_GROUP)
        assert group.inputs["name"] == "ml-test-big" and group.inputs["strategy"] == "cluster"
        node_class = next(r.inputs for r in planned.of_type(NODE_CLASS) if "fabric-big" in r.inputs["metadata"]["name"])
        assert node_class["spec"]["placementGroupSelector"] == {"name": "ml-test-big"}
        assert capacity.CAPACITY_BLOCK_KEY not in planned.get(NODE_POOL, "nodepool-gpupools-big").inputs["metadata"].get("annotations", {})


def test_the_policies_notice_a_placement_group_on_a_block_and_an_efa_pool_without_either(block_plan):
    """Negative, on planned resources: a block pool's node class given a placement group is reported (advisory, as
    ParallelCluster warns); an EFA pool with neither a placement group nor a block is still refused."""
    with_group = copy.deepcopy(block_plan)
    node_class = next(r for r in with_group.of_type(NODE_CLASS) if "reserved-big" in r.inputs["metadata"]["name"])
    node_class.inputs["spec"]["placementGroupSelector"] = {"name": "ml-test-big"}
    assert [p for p, _ in fabric_violations(with_group)] == ["capacity-block-placement"]
    unmarked = copy.deepcopy(block_plan)
    del unmarked.get(NODE_POOL, "nodepool-gpupools-big").inputs["metadata"]["annotations"][capacity.CAPACITY_BLOCK_KEY]
    found = fabric_violations(unmarked)
    assert [p for p, _ in found] == ["fabric-pool-one-zone"] and "has EFA but no cluster placement group" in found[0][1]


# --------------------------------------------------------------------------------------------------------------------
# Kueue and the block's window


def test_kueue_waits_for_pods_ready_and_requeues_without_limit():
    config = kueue.manager_configuration()
    assert config["waitForPodsReady"] == {
        "timeout": "30m", "recoveryTimeout": "30m", "blockAdmission": False,
        "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600}}
    assert "backoffLimitCount" not in config["waitForPodsReady"]["requeuingStrategy"]  # null: requeued endlessly, never deactivated


def test_a_capacity_block_pools_capacity_row_says_what_kueue_does_not_know():
    stack = validate_stack(stack_config("aws", pools=[efa_pool([BLOCK, "on-demand"])], teams=TEAMS))
    (plan,) = plan_pools(stack)
    details = capacity_report(stack, plan, "karpenter")["details"]
    assert "when the block ends: Karpenter drains its nodes 40 minutes before its end time; EC2 terminates what is left 30 minutes before it" in details
    kueue_lines = [line for line in details if "Kueue" in line or "not guaranteed" in line]
    assert kueue_lines == capacity.block_queue_lines(plan.pool)
    assert kueue_lines[0].startswith("Kueue does not know the block's start and end")
    assert "evicted after 30m without all its pods ready and requeued" in kueue_lines[1] and "60s doubling to 1h, no limit" in kueue_lines[1]
    assert kueue_lines[2].startswith("not guaranteed:") and "kueue.x-k8s.io/max-exec-time-seconds" in kueue_lines[2]


def test_pools_without_a_block_or_without_kueue_get_no_such_lines():
    """Negative: an ODCR is not bounded in time; without Kueue quotas nothing admits ahead of the block."""
    odcr = validate_stack(stack_config("aws", pools=[efa_pool([ODCR, "on-demand"])], teams=TEAMS))
    (plan,) = plan_pools(odcr)
    assert not any("Kueue" in line for line in capacity_report(odcr, plan, "karpenter")["details"])
    quota = validate_stack(stack_config("aws", pools=[efa_pool([BLOCK, "on-demand"])], teams=TEAMS, quotas="resourcequota"))
    (plan,) = plan_pools(quota)
    assert not any("Kueue" in line for line in capacity_report(quota, plan, "karpenter")["details"])


def test_dev_aws_reserved_plans_its_block_without_a_placement_group():
    """The example stack, as `gpupools plan --stack dev-aws-reserved --json` shows it."""
    from typer.testing import CliRunner
    import json

    from gpupools.cli.main import app

    result = CliRunner().invoke(app, ["plan", "--stack", "dev-aws-reserved", "--json"])
    assert result.exit_code == 0, result.output
    pools = {p["name"]: p for p in json.loads(result.output)["outputs"]["pools"]}
    h100 = pools["h100"]
    assert "no placement group: Capacity Block instances are already placed together" in h100["fabric"]["placement"]
    assert any(line.startswith("Kueue does not know the block's start and end") for line in h100["capacitySources"]["details"])
    assert not any(r["type"] == PLACEMENT_GROUP for r in json.loads(result.output)["resources"])
