"""EKS pools over several instance types (`instanceTypes`): validated at the boundary with one line naming the field,
a Karpenter NodePool over the list with one NodeOverlay per type, a managed node group's instanceTypes (same GPU count
under cluster-autoscaler, which pictures a group from its first type: kubernetes/autoscaler
cluster-autoscaler/cloudprovider/aws/aws_manager.go, buildInstanceType), prices and costs at the most expensive type,
and the scale-up and landing checks worked out per type.

Karpenter objects are checked against the pinned CRDs, node groups against botocore's eks model.
"""

from __future__ import annotations

import pytest
import yaml

from conftest import needs_reference, plan_of, stack_config
from test_cloud_models import check
from gpupools.autoscaling.scaleup import scale_ups
from gpupools.landing.check import cluster_of, land, landing_check
from gpupools.landing.jobs import job_manifest
from gpupools.pools.planning import plan_pools
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_OVERLAY = "kubernetes:karpenter.sh/v1alpha1:NodeOverlay"
L4 = ["g6.xlarge", "g6.2xlarge", "g6.4xlarge", "g6.12xlarge"]


def pool(**over) -> dict:
    return {"name": "l4", "instanceTypes": L4, "maxNodes": 4, **over}


def errors(raw: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate_stack(raw)
    return [str(p) for p in caught.value.problems]


def crd_schema(filename: str, version: str) -> dict:
    crd = yaml.safe_load((needs_reference() / "karpenter" / filename).read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == version)


# --------------------------------------------------------------------------------------------------------------------
# The stack key


@pytest.mark.parametrize("raw, line", [
    (stack_config("aws", pools=[pool(instanceType="g6.xlarge")]),
     "error: pools[0].instanceType: give instanceType or instanceTypes, not both (got 'g6.xlarge')"),
    (stack_config("aws", pools=[pool(instanceTypes=["g6.xlarge"])]),
     "error: pools[0].instanceTypes: lists one instance type; a pool of one type gives it as instanceType"),
    (stack_config("aws", pools=[pool(instanceTypes=["g6.xlarge", "g6.xlarge"])]), "error: pools[0].instanceTypes: lists g6.xlarge more than once"),
    (stack_config("aws", pools=[pool(instanceTypes=["g6.xlarge", "g6.2xlarg"])]),
     "error: pools[0].instanceTypes[1]: unknown aws GPU instance type 'g6.2xlarg'; closest known: g6.2xlarge"),
    (stack_config("aws", pools=[pool(instanceTypes=["g5.xlarge", "g6.xlarge"])]),
     "error: pools[0].instanceTypes: g5.xlarge has A10G, g6.xlarge has L4: a pool's GPU label (gpupools.io/gpu), sharing and GPU metrics "
     "name one GPU model"),
    (stack_config("aws", autoscaler="cluster-autoscaler", pools=[pool()]),
     "error: pools[0].instanceTypes: GPUs per node differ (g6.xlarge 1, g6.2xlarge 1, g6.4xlarge 1, g6.12xlarge 4): cluster-autoscaler "
     "pictures a node group's new nodes from its first instance type"),
    (stack_config("aws", pools=[pool(instanceTypes=["g6.8xlarge", "g6.12xlarge"], fabric="on", zones=["eu-central-1a"])]),
     "error: pools[0].fabric: EFA pools have one instance type"),
    (stack_config("aws", pools=[pool(capacity=[{"reservation": {"id": "cr-0123456789abcdef0", "nodes": 1}}, "on-demand"])]),
     "error: pools[0].capacity: a reservation or Capacity Block holds one instance type"),
    (stack_config("azure", pools=[{"name": "x", "instanceTypes": ["Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3"], "maxNodes": 2}]),
     "error: pools[0].instanceTypes: AKS node pools have one VM size each; give instanceType, or one pool per VM size"),
])
def test_bad_instance_types_are_one_line_naming_the_field(raw, line):
    found = errors(raw)
    assert any(m.startswith(line) for m in found), found


def test_one_model_several_types_is_a_valid_pool_and_its_numbers_assume_the_most_expensive():
    (plan,) = plan_pools(validate_stack(stack_config("aws", pools=[pool()])))
    assert plan.pool.instance_type == "g6.xlarge"  # the first listed, where one name is asked for
    assert plan.hardware.instance_type == "g6.12xlarge" and plan.hardware.gpus_per_node == 4
    assert plan.max_units == 16 and plan.hourly_cost(4) == pytest.approx(4 * 4.602)


# --------------------------------------------------------------------------------------------------------------------
# What Karpenter and the node groups get


@pytest.fixture(scope="module")
def karpenter_plan():
    return plan_of(stack_config("aws", pools=[pool(sharing={"mode": "time-slicing", "replicas": 4})]))


def test_the_node_pool_lists_every_type_and_each_type_gets_its_overlay(karpenter_plan):
    jsonschema = pytest.importorskip("jsonschema")
    node_pool = karpenter_plan.get(NODE_POOL, "nodepool-gpupools-l4").inputs
    reqs = {r["key"]: r["values"] for r in node_pool["spec"]["template"]["spec"]["requirements"]}
    assert reqs["node.kubernetes.io/instance-type"] == L4
    overlays = {r.inputs["metadata"]["name"]: r.inputs for r in karpenter_plan.of_type(NODE_OVERLAY)}
    assert {name: o["spec"]["capacity"]["nvidia.com/gpu"] for name, o in overlays.items()} == {
        "gpupools-l4-g6-xlarge": "4", "gpupools-l4-g6-2xlarge": "4", "gpupools-l4-g6-4xlarge": "4", "gpupools-l4-g6-12xlarge": "16"}
    for overlay in overlays.values():
        req = {r["key"]: r["values"] for r in overlay["spec"]["requirements"]}
        assert req["karpenter.sh/nodepool"] == ["gpupools-l4"] and len(req["node.kubernetes.io/instance-type"]) == 1
        jsonschema.validate({k: overlay[k] for k in ("apiVersion", "kind", "metadata", "spec")}, crd_schema("karpenter.sh_nodeoverlays.yaml", "v1alpha1"))
    jsonschema.validate({k: node_pool[k] for k in ("apiVersion", "kind", "metadata", "spec")}, crd_schema("karpenter.sh_nodepools.yaml", "v1"))


def test_node_groups_list_every_type_for_eks_and_cluster_autoscaler_pictures_the_first():
    same = ["g6.xlarge", "g6.2xlarge", "g6.4xlarge"]
    planned = plan_of(stack_config("aws", autoscaler="cluster-autoscaler", pools=[pool(instanceTypes=same)]))
    i = planned.get("aws:eks/nodeGroup:NodeGroup", "l4").inputs
    assert i["instanceTypes"] == same
    check("eks", "CreateNodegroup", {"clusterName": i["clusterName"], "nodegroupName": i["nodeGroupName"], "nodeRole": i["nodeRoleArn"],
                                     "subnets": i["subnetIds"], "instanceTypes": i["instanceTypes"], "amiType": i["amiType"],
                                     "capacityType": i["capacityType"], "launchTemplate": {"id": i["launchTemplate"]["id"],
                                                                                           "version": str(i["launchTemplate"]["version"])}})
    stack = validate_stack(stack_config("aws", autoscaler="cluster-autoscaler", pools=[pool(instanceTypes=same)]))
    (verdict,) = scale_ups(stack)
    assert verdict.from_zero and "pictured as g6.xlarge, its first instance type" in verdict.detail


def test_the_plan_names_the_type_its_price_and_cost_assume(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    path = stack_file(stack_config("aws", pools=[pool()]))
    text = " ".join(CliRunner().invoke(app, ["plan", "--config", str(path)], terminal_width=200).output.split())
    assert "instance g6.xlarge, g6.2xlarge, g6.4xlarge: 1 x L4 (24 GB); g6.12xlarge: 4 x L4 (24 GB), on-demand" in text
    assert "nvidia.com/gpu x 4 per node x 4 nodes = 16 (g6.12xlarge nodes)" in text
    assert "(list price 2025-06; g6.12xlarge, the most expensive type of the pool)" in text
    assert "$18.41/h at maxNodes (16 GPUs at most)" in text and "pools over several instance types at their most expensive type" in text
    result = CliRunner().invoke(app, ["check", "--config", str(path)])
    assert result.exit_code == 0, result.output


# --------------------------------------------------------------------------------------------------------------------
# Scale from zero and landing, per type


def test_a_pod_that_fits_any_type_starts_a_node_of_that_type():
    stack = validate_stack(stack_config("aws", pools=[pool()], teams=[{"name": "ml", "gpus": {"l4": 8}}]))
    (verdict,) = scale_ups(stack)
    assert verdict.from_zero
    assert verdict.detail == ("NodePool gpupools-l4, a node of any of g6.xlarge (1 x nvidia.com/gpu), g6.2xlarge (1 x nvidia.com/gpu), "
                              "g6.4xlarge (1 x nvidia.com/gpu), g6.12xlarge (4 x nvidia.com/gpu)")
    verdicts = {v.shape: v for v in landing_check(stack)}
    assert verdicts["unit"].lands and verdicts["node"].lands
    node_step = next(s for s in verdicts["node"].steps if s.name == "node")
    assert "instance type g6.12xlarge" in node_step.detail  # the whole-node job asks for 4 GPUs: only g6.12xlarge has them


def test_a_pod_that_fits_no_type_says_why_for_each():
    stack = validate_stack(stack_config("aws", pools=[pool(instanceTypes=["g6.xlarge", "g6.12xlarge"])]))
    cluster = cluster_of(stack)
    (plan,) = cluster.plans
    verdict = land(cluster, None, plan, "node", job_manifest(stack, plan, "probe", units=8))
    assert not verdict.lands and verdict.failing.name == "node"
    assert verdict.failing.detail.startswith("no node starts from zero: Karpenter expects 1 x nvidia.com/gpu on a new node, the pod asks for 8")
    assert "Karpenter expects 4 x nvidia.com/gpu on a new node, the pod asks for 8" in verdict.failing.detail


def test_a_mig_pool_over_types_with_its_slices_per_type_scales_from_zero():
    """Sharing needs one GPU model, which every multi-type pool has: p5.4xlarge (1 H100) and p5.48xlarge (8) in 1g.10gb
    slices, seven per GPU, each type with its own overlay."""
    raw = stack_config("aws", pools=[pool(name="h100", instanceTypes=["p5.4xlarge", "p5.48xlarge"], sharing={"mode": "mig", "migProfile": "1g.10gb"})])
    raw["aws:region"] = "us-east-1"
    stack = validate_stack(raw)
    (verdict,) = scale_ups(stack)
    assert verdict.from_zero and "p5.4xlarge (7 x nvidia.com/mig-1g.10gb)" in verdict.detail and "p5.48xlarge (56 x nvidia.com/mig-1g.10gb)" in verdict.detail
    assert all(v.lands for v in landing_check(stack))
