"""What `gpupools plan` knows will not work as the stack file says: a `warning:` line in the text plan, the `warnings`
list of `plan --json` (and the same lines on stderr), exit status 0. A declared topologyLevel nothing enforces, and a
team quota larger than its pools can ever hold."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.cli.planreport import plan_warnings
from gpupools.fabric.plan import plan_fabrics
from gpupools.pools.planning import plan_pools
from gpupools.queues.engine import unusable_quota_warnings
from gpupools.queues.kueue import topology_enforced, topology_level_warnings
from gpupools.stack.values import read_stack_file
from gpupools.validation.stack import validate_stack

from conftest import ROOT, stack_config, write_stack

LAYER_2 = "topology.k8s.aws/network-node-layer-2"


def fabric_stack(min_nodes: int = 0, teams: bool = True, quotas: str = "kueue", **pool) -> dict:
    """An EKS stack in us-east-1 (which offers p5.48xlarge) with one EFA pool of 4 nodes and a team on it."""
    config = stack_config("aws", pools=[{"name": "small", "instanceType": "g5.2xlarge", "maxNodes": 2},
                                        {"name": "train", "instanceType": "p5.48xlarge", "minNodes": min_nodes, "maxNodes": 4,
                                         "zones": ["us-east-1a"], "topologyLevel": "layer-2", **pool}],
                          quotas=quotas, **({"teams": [{"name": "ml", "gpus": {"train": 16}}]} if teams else {}))
    config["aws:region"] = "us-east-1"
    return config


def topology_warnings(config: dict) -> list[str]:
    stack = validate_stack(config)
    return topology_level_warnings(stack, plan_pools(stack))


UNENFORCED_FROM_ZERO = ("pools[1].topologyLevel: layer-2 is not enforced: pool train starts its nodes on demand (minNodes {min}, "
                        "maxNodes 4) and Kueue's topology-aware scheduling counts only nodes that exist, so its jobs carry no "
                        "kueue.x-k8s.io/podset-required-topology; only placement group ml-test-train keeps its nodes close; set "
                        "minNodes to maxNodes (the nodes then always run), or drop topologyLevel")


@pytest.mark.parametrize("min_nodes", [0, 3])
def test_a_topology_level_on_a_pool_that_starts_nodes_on_demand_is_a_warning(min_nodes):
    assert topology_warnings(fabric_stack(min_nodes)) == [UNENFORCED_FROM_ZERO.format(min=min_nodes)]


def test_a_topology_level_on_a_pool_kept_at_its_size_is_enforced():
    stack = validate_stack(fabric_stack(4))
    (_, train) = plan_pools(stack)
    assert topology_enforced(stack, train, plan_fabrics(stack, [train])["train"])
    assert topology_level_warnings(stack, plan_pools(stack)) == []


@pytest.mark.parametrize("quotas, teams", [("kueue", False), ("resourcequota", True)])
def test_a_topology_level_without_kueue_team_queues_is_a_warning(quotas, teams):
    """Only a Kueue team Job carries the required level: without Kueue team queues nothing reads it."""
    assert topology_warnings(fabric_stack(4, teams=teams, quotas=quotas)) == [
        "pools[1].topologyLevel: layer-2 is not enforced: only Kueue team queues read it (gpupools:quotas: kueue with teams), and "
        "this stack has none; only placement group ml-test-train keeps its nodes close"]


def test_no_topology_level_no_warning():
    config = fabric_stack()
    del config["gpupools:pools"][1]["topologyLevel"]
    assert topology_warnings(config) == []


def plan(*args: str):
    return CliRunner().invoke(app, ["plan", *args])


def test_plan_json_says_required_level_only_where_it_is_enforced_and_warns(tmp_path):
    result = plan("--config", str(write_stack(tmp_path, fabric_stack(0))), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    fabric = next(p for p in doc["outputs"]["pools"] if p["name"] == "train")["fabric"]
    assert (fabric["declaredLevel"], fabric["requiredLevel"], fabric["topologyAware"]) == (LAYER_2, None, False)
    assert doc["warnings"] == [UNENFORCED_FROM_ZERO.format(min=0)]
    assert result.stderr.splitlines() == [f"warning: {UNENFORCED_FROM_ZERO.format(min=0)}"]

    result = plan("--config", str(write_stack(tmp_path, fabric_stack(4), name="fixed")), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    fabric = next(p for p in doc["outputs"]["pools"] if p["name"] == "train")["fabric"]
    assert (fabric["declaredLevel"], fabric["requiredLevel"], fabric["topologyAware"]) == (LAYER_2, LAYER_2, True)
    assert doc["warnings"] == [] and result.stderr == ""


def test_plan_text_says_the_level_is_not_enforced_and_ends_with_the_warning(tmp_path):
    result = plan("--config", str(write_stack(tmp_path, fabric_stack(0))))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # One line, whole, for grep; just before the count of resources.
    assert lines[-2] == f"warning: {UNENFORCED_FROM_ZERO.format(min=0)}" and lines[-1].endswith(" resources.")
    flat = " ".join(result.stdout.split())
    assert "topologyLevel layer-2 is not enforced (see the warning)" in flat
    assert "jobs must fit in one" not in flat

    result = plan("--config", str(write_stack(tmp_path, fabric_stack(4), name="fixed")))
    flat = " ".join(result.stdout.split())
    assert f"jobs must fit in one {LAYER_2}" in flat and "warning" not in flat


# --------------------------------------------------------------------------------------------------------------------
# A team quota above what its pools can ever hold


def quota_warnings(config: dict) -> list[str]:
    """As the plan counts them: with the stack's autoscaler, which decides a pool's Kueue flavors."""
    from gpupools.autoscaling.choice import resolve_autoscaler

    stack = validate_stack(config)
    return unusable_quota_warnings(stack, plan_pools(stack), resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler))


def two_pools(quotas: str, gpus) -> dict:
    """g5.2xlarge (1 GPU) x 3 nodes and g6.xlarge (1 GPU) x 2 nodes, both nvidia.com/gpu."""
    return stack_config("aws", pools=[{"name": "a", "instanceType": "g5.2xlarge", "maxNodes": 3},
                                      {"name": "b", "instanceType": "g6.xlarge", "maxNodes": 2}],
                        quotas=quotas, teams=[{"name": "ml", "gpus": gpus}])


def test_kueue_a_quota_above_the_pool_is_a_warning_and_one_at_the_pool_is_not():
    assert quota_warnings(two_pools("kueue", {"a": 3, "b": 2})) == []
    assert quota_warnings(two_pools("kueue", {"a": 4, "b": 2})) == [
        "team ml: its quota of 4 nvidia.com/gpu on pool a is more than the pool ever holds (3 at maxNodes 3); 1 can never be used: "
        "lower its gpus on a or raise maxNodes"]
    # Kueue keeps each pool's quota on its own flavor: room on b does not make a's excess usable.
    assert len(quota_warnings(two_pools("kueue", {"a": 4, "b": 0}))) == 1


def test_kueue_a_total_above_every_pool_warns_per_pool():
    assert quota_warnings(two_pools("kueue", 5)) == []
    assert [w.split(" is more")[0] for w in quota_warnings(two_pools("kueue", 7))] == [
        "team ml: its quota of 4 nvidia.com/gpu on pool a", "team ml: its quota of 3 nvidia.com/gpu on pool b"]


def test_resourcequota_counts_the_quota_per_resource_over_the_teams_pools():
    """One ResourceQuota per namespace and resource: 4 on a and 0 on b fit in the 5 GPUs a and b hold together."""
    assert quota_warnings(two_pools("resourcequota", {"a": 4, "b": 0})) == []
    assert quota_warnings(two_pools("resourcequota", {"a": 5, "b": 0})) == []
    assert quota_warnings(two_pools("resourcequota", {"a": 5, "b": 1})) == [
        "team ml: its ResourceQuota of 6 nvidia.com/gpu is more than its pools offering it (a, b) ever hold at maxNodes (5); "
        "1 can never be used: lower its gpus or raise maxNodes"]


def test_kai_counts_one_gpu_quota_over_the_teams_pools():
    assert quota_warnings(two_pools("kai", {"a": 2, "b": 3})) == []
    assert quota_warnings(two_pools("kai", {"a": 4, "b": 2})) == [
        "team ml: its quota of 6 GPUs is more than its pools (a, b) ever hold at maxNodes (5); 1 can never be used: lower its gpus "
        "or raise maxNodes"]


def test_kueue_counts_a_reserved_flavor_and_the_hourly_flavor_each_against_its_own_nodes():
    """dev-aws-reserved promises 24 H100s on a pool of 2 nodes: 8 on the Capacity Block's flavor (its one node) and
    16 on the on-demand flavor (both nodes), so a two-node job can be admitted on-demand. Each flavor's quota fits
    its nodes; one unit more on-demand does not."""
    config = read_stack_file(ROOT / "stacks" / "Pulumi.dev-aws-reserved.yaml")
    assert config["gpupools:teams"][0]["gpus"]["h100"] == 24 and quota_warnings(config) == []
    config["gpupools:teams"][0]["gpus"]["h100"] = 25
    assert quota_warnings(config) == [
        "team research: its quota of 17 nvidia.com/gpu on pool h100 (flavor h100-on-demand) is more than the pool ever holds (16 at "
        "maxNodes 2); 1 can never be used: lower its gpus on h100 or raise maxNodes"]


@pytest.mark.parametrize("path", sorted((ROOT / "stacks").glob("Pulumi.dev-*.yaml")), ids=lambda p: p.name)
def test_the_example_stacks_plan_without_warnings(path):
    # But the Gcore example's region: gpupools ships no list of Gcore's regions (docs/cloud-facts.md#gcore-regions).
    warnings = plan_warnings(validate_stack(read_stack_file(path)))
    unchecked = [w for w in warnings if w.startswith("gcore:regionId 76 was not checked offline: ")]
    assert warnings == unchecked
    assert len(unchecked) == (path.name == "Pulumi.dev-gcore.yaml")


def test_teams_together_above_a_pool_are_over_subscription_not_a_warning():
    config = two_pools("kueue", {"a": 3})
    config["gpupools:teams"].append({"name": "other", "gpus": {"a": 3}})
    assert quota_warnings(config) == []


def test_plan_warns_of_an_unusable_quota_in_text_and_json_and_exits_0(tmp_path):
    path = write_stack(tmp_path, two_pools("kueue", {"a": 4, "b": 2}))
    line = ("team ml: its quota of 4 nvidia.com/gpu on pool a is more than the pool ever holds (3 at maxNodes 3); 1 can never be "
            "used: lower its gpus on a or raise maxNodes")
    text = plan("--config", str(path))
    assert text.exit_code == 0, text.output
    assert f"warning: {line}" in text.stdout.splitlines()
    as_json = plan("--config", str(path), "--json")
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["warnings"] == [line]
    assert as_json.stderr.splitlines() == [f"warning: {line}"]


def test_plan_warnings_gathers_every_kind():
    config = fabric_stack(0)
    config["gpupools:teams"] = [{"name": "ml", "gpus": {"train": 40}}]
    stack = validate_stack(config)
    assert [w.split(":")[0] for w in plan_warnings(stack)] == ["pools[1].topologyLevel", "team ml"]
