"""Repaired when a GPU breaks: the clouds' repair settings against their API models and pinned charts, the per-pool
switch where a cloud has one, and what the plan says per pool."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from conftest import has_path, needs_reference, plan_of, stack_config, value_paths
from gpupools.cli.main import app
from gpupools.clouds import aws
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
CA_POOLS = [{"name": "train", "instanceType": "p4de.24xlarge", "maxNodes": 2, "sharing": {"mode": "mig", "migProfile": "1g.10gb"}},
            {"name": "manual", "instanceType": "g5.2xlarge", "maxNodes": 2, "autoRepair": False}]


def eks_check(operation: str, params: dict) -> None:
    botocore = pytest.importorskip("botocore.session")
    from botocore.validate import ParamValidator

    shape = botocore.get_session().get_service_model("eks").operation_model(operation).input_shape
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), report.generate_report()
    repair_shape = shape.members["nodeRepairConfig"]
    for override in params.get("nodeRepairConfig", {}).get("nodeRepairConfigOverrides", []):
        assert override["repairAction"] in repair_shape.members["nodeRepairConfigOverrides"].member.members["repairAction"].enum


def test_node_group_repair_config_is_what_the_eks_api_takes():
    plan = plan_of(stack_config("aws", autoscaler="cluster-autoscaler", pools=CA_POOLS))
    configs = {g.name: g.inputs["nodeRepairConfig"] for g in plan.of_type(NODE_GROUP) if g.name in ("train", "manual")}
    assert configs["manual"] == {"enabled": False}
    train = configs["train"]
    assert train["enabled"] is True
    # "If you use this, you must specify all the values" (botocore eks NodeRepairConfigOverrides).
    assert {(o["nodeMonitoringCondition"], o["nodeUnhealthyReason"]) for o in train["nodeRepairConfigOverrides"]} == set(aws.GPU_REPAIR_OVERRIDES)
    for name, config in configs.items():
        eks_check("CreateNodegroup", {"clusterName": "c", "nodegroupName": name, "nodeRole": "r", "subnets": ["s"], "nodeRepairConfig": config})
        eks_check("UpdateNodegroupConfig", {"clusterName": "c", "nodegroupName": name, "nodeRepairConfig": config})


def test_the_repair_check_catches_a_wrong_action():
    config = json.loads(json.dumps(plan_of(stack_config("aws", autoscaler="cluster-autoscaler")).get(NODE_GROUP, "infer").inputs["nodeRepairConfig"]))
    config["nodeRepairConfigOverrides"][0]["repairAction"] = "Restart"
    with pytest.raises(AssertionError):
        eks_check("CreateNodegroup", {"clusterName": "c", "nodegroupName": "n", "nodeRole": "r", "subnets": ["s"], "nodeRepairConfig": config})
    config = {"enabled": True, "maxUnhealthyNodeThresholdPercentage": 0}
    with pytest.raises(AssertionError):
        eks_check("CreateNodegroup", {"clusterName": "c", "nodegroupName": "n", "nodeRole": "r", "subnets": ["s"], "nodeRepairConfig": config})


def test_node_monitoring_agent_add_on_and_its_values():
    plan = plan_of(stack_config("aws"))
    addon = plan.get("aws:eks/addon:Addon", aws.NODE_MONITORING_AGENT).inputs
    eks_params = {"clusterName": addon["clusterName"], "addonName": addon["addonName"], "configurationValues": addon["configurationValues"]}
    botocore = pytest.importorskip("botocore.session")
    from botocore.validate import ParamValidator

    shape = botocore.get_session().get_service_model("eks").operation_model("CreateAddon").input_shape
    assert not ParamValidator().validate(eks_params, shape).has_errors()
    # The add-on's configuration is the chart's values (aws/eks-node-monitoring-agent charts/eks-node-monitoring-agent,
    # v1.7.0): the DCGM host engine must run on GPU nodes, which are all tainted.
    upstream = yaml.safe_load((needs_reference() / "eks-node-monitoring-agent" / "values.yaml").read_text())
    values = json.loads(addon["configurationValues"])
    assert [".".join(p) for p in value_paths(values) if not has_path(upstream, p)] == []
    assert upstream["dcgmAgent"]["tolerations"] == [] and values["dcgmAgent"]["tolerations"] == [{"operator": "Exists"}]
    # An existing cluster keeps its add-ons: gpupools creates none there.
    assert not [a for a in plan_of(stack_config("aws", cluster={"name": "prod", "create": False})).of_type("aws:eks/addon:Addon")]


def test_karpenter_node_repair_gate_exists_in_the_pinned_chart():
    values = plan_of(stack_config("aws")).get(RELEASE, "karpenter").inputs["values"]
    assert values["settings"]["featureGates"]["nodeRepair"] is True
    upstream = yaml.safe_load((needs_reference() / "karpenter" / "values.yaml").read_text())
    assert upstream["settings"]["featureGates"]["nodeRepair"] is False  # ALPHA, off by default
    assert has_path(upstream, ("settings", "featureGates", "nodeRepair"))


def test_gke_dws_pools_take_auto_repair_unset_or_false():
    for repair in ({}, {"autoRepair": False}):
        validate_stack(stack_config("gcp", pools=[{"name": "h100", "instanceType": "a3-ultragpu-8g", "maxNodes": 1, **repair,
                                                   "capacity": [{"flexStart": {"maxRunDuration": "24h"}}]}]))


def test_gke_auto_repair_follows_the_pool_and_the_api_model():
    from test_gke_api_model import NODE_POOL, api_problems, discovery_document

    plan = plan_of(stack_config("gcp", pools=[{"name": "on", "instanceType": "g2-standard-8", "maxNodes": 2},
                                              {"name": "off", "instanceType": "g2-standard-8", "maxNodes": 2, "autoRepair": False}]))
    pools = {p.name: p.inputs for p in plan.of_type(NODE_POOL)}
    assert pools["on"]["management"]["autoRepair"] is True and pools["off"]["management"]["autoRepair"] is False
    doc = discovery_document()
    for inputs in pools.values():
        assert api_problems(doc, NODE_POOL, inputs) == []


@pytest.mark.parametrize("config, expected", [
    (stack_config("azure", pools=[{"name": "infer", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 2, "autoRepair": False}]),
     "error: pools[0].autoRepair: AKS node auto-repair covers every node of the cluster"),
    (stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2, "autoRepair": False}]),
     "error: pools[0].autoRepair: Karpenter's node repair is one switch"),
    (stack_config("gcp", pools=[{"name": "h100", "instanceType": "a3-highgpu-8g", "maxNodes": 1, "autoRepair": True,
                                 "capacity": [{"queued": {"maxRunDuration": "24h"}}]}], teams=[{"name": "a", "gpus": 8}]),
     "error: pools[0].autoRepair: true, but GKE's queued node pools run with auto-repair off"),
    (stack_config("gcp", pools=[{"name": "h100", "instanceType": "a3-ultragpu-8g", "maxNodes": 1, "autoRepair": True,
                                 "capacity": [{"flexStart": {"maxRunDuration": "24h"}}]}]),
     "error: pools[0].autoRepair: true, but GKE's flex-start node pools run with auto-repair off"),
    (stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2, "autoRepair": "no"}]),
     "error: pools[0].autoRepair: input should be a valid boolean"),
])
def test_repair_that_cannot_be_turned_off_per_pool_is_one_line(stack_file, config, expected):
    """(Also: a setting a cloud overrides is refused, not silently planned otherwise.)"""
    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    assert [str(p) for p in exc.value.problems if str(p).startswith(expected)], exc.value
    result = CliRunner().invoke(app, ["plan", "--config", str(stack_file(config))])
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert all(line.startswith("error: ") for line in result.stderr.splitlines())


@pytest.mark.parametrize("stack, pool, detects, then", [
    ("dev-aws", "infer", "AcceleratedHardwareReady=False", "Karpenter node repair replaces the node after 10m"),
    ("dev-aws-existing", "train", "AcceleratedHardwareReady=False", "EKS node repair: XID 79 and double-bit errors replace the node"),
    ("dev-azure", "finetune", "the GPU alerts", "AKS node auto-repair reboots, then reimages"),
    ("dev-gcp", "infer", "the GPU alerts", "GKE auto-repair recreates a node NotReady"),
    ("dev-gcp-dws", "h100", "the GPU alerts", "nothing: GKE runs flex-start and queued-provisioning pools with auto-repair off"),
])
def test_the_plan_says_per_pool_what_notices_a_broken_gpu_and_what_follows(stack, pool, detects, then):
    result = CliRunner().invoke(app, ["plan", "--stack", stack])
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    table = text.split(f"pool {pool} creates", 1)[1].split(" price ", 1)[0]
    assert detects in table.split(" broken GPU ", 1)[1].split(" repair ", 1)[0]
    assert then in table.split(" repair ", 1)[1]
