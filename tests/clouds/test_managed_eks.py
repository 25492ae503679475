"""EKS Auto Mode: NodeClass and NodePool against the schemas an Auto Mode cluster serves, the cluster's inputs against
botocore's EKS model, what Auto Mode owns (and gpupools therefore refuses), and each team's job from zero."""

from __future__ import annotations

import copy
import json
import re

import pytest
import yaml

from conftest import ROOT, crd_rule_failures, needs_reference, plan_of, stack_config, config_problems as problems_of
from gpupools.clouds import aws_auto
from gpupools.clouds.registry import cloud_module
from gpupools.landing.check import cluster_of, land, landing_check
from gpupools.pools.planning import plan_pools
from gpupools.pools.software import software_plan
from gpupools.validation.stack import validate_stack

NODE_CLASS = "kubernetes:eks.amazonaws.com/v1:NodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
AUTO = {"name": "ml-test", "mode": "auto-mode"}


def example() -> dict:
    return yaml.safe_load((ROOT / "stacks" / "Pulumi.dev-aws-auto.yaml").read_text())["config"]


def auto_config(pools: list[dict] | None = None, **keys) -> dict:
    return stack_config("aws", pools=pools, cluster={**AUTO, **keys.pop("cluster", {})}, **keys)


def node_class_schema() -> dict:
    """The NodeClass schema an Auto Mode cluster served, with `capacityReservationSelectorTerms` as the newer user guide
    documents it (an id, or tags with an optional owner), which that early schema predates."""
    schema = json.loads((needs_reference() / "eks" / "nodeclass_v1.schema.json").read_text())
    guide = (needs_reference() / "eks" / "create-node-class.adoc").read_text()
    block = guide[guide.index("  capacityReservationSelectorTerms:"):][:400]
    assert re.search(r"- id: cr-", block) and "- tags:" in block and "owner:" in block
    schema["properties"]["spec"]["properties"]["capacityReservationSelectorTerms"] = {"type": "array", "items": {
        "type": "object", "additionalProperties": False,
        "properties": {"id": {"type": "string", "pattern": "^cr-[0-9a-z]+$"}, "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                       "owner": {"type": "string", "pattern": "^[0-9]{12}$"}}}}
    return schema


def node_pool_schema() -> dict:
    crd = yaml.safe_load((needs_reference() / "karpenter" / "karpenter.sh_nodepools.yaml").read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1")


def manifest(resource) -> dict:
    return {k: resource.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}


def test_the_node_classes_and_node_pools_are_what_auto_mode_serves():
    jsonschema = pytest.importorskip("jsonschema")
    plan = plan_of(example(), "dev-aws-auto")
    classes, pools = plan.of_type(NODE_CLASS), plan.of_type(NODE_POOL)
    assert sorted(r.name for r in classes) == ["nodeclass-gpupools-infer", "nodeclass-gpupools-train"] and len(pools) == 2
    for resource in classes:
        obj = manifest(resource)
        jsonschema.validate(obj, node_class_schema())
        assert crd_rule_failures(obj, node_class_schema()) == []
    for resource in pools:  # the schema (its CEL rules use Kubernetes' own regex functions, which cel-python lacks)
        obj = manifest(resource)
        jsonschema.validate(obj, node_pool_schema())
        ref = obj["spec"]["template"]["spec"]["nodeClassRef"]
        assert ref == {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "gpupools-" + obj["metadata"]["labels"]["gpupools.io/pool"]}
        assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in obj["spec"]["template"]["spec"]["taints"]
    train = manifest(plan.get(NODE_CLASS, "nodeclass-gpupools-train"))["spec"]
    assert train["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    assert train["ephemeralStorage"] == {"size": "200Gi"}


def test_the_schema_check_catches_what_auto_mode_refuses():
    jsonschema = pytest.importorskip("jsonschema")
    stack = validate_stack(example())
    obj = aws_auto.node_class(plan_pools(stack)[1], "role", ["subnet-1"], ["sg-1"])
    wrong = copy.deepcopy(obj)
    wrong["spec"]["ephemeralStorage"]["size"] = "200GB"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, node_class_schema())
    wrong = copy.deepcopy(obj)
    wrong["spec"]["instanceStorePolicy"] = "RAID0"  # Karpenter's EC2NodeClass field, no NodeClass field
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, node_class_schema())


def test_the_cluster_is_what_eks_create_cluster_takes_with_auto_mode_on():
    botocore_session = pytest.importorskip("botocore.session")
    from botocore.validate import ParamValidator

    plan = plan_of(example(), "dev-aws-auto")
    (eks,) = plan.of_type("aws:eks/cluster:Cluster")
    i = eks.inputs
    assert i["computeConfig"]["enabled"] and i["storageConfig"]["blockStorage"]["enabled"] and i["kubernetesNetworkConfig"]["elasticLoadBalancing"]["enabled"]
    assert i["bootstrapSelfManagedAddons"] is False
    params = {"name": i["name"], "roleArn": i["roleArn"], "resourcesVpcConfig": {"subnetIds": i["vpcConfig"]["subnetIds"]},
              "computeConfig": i["computeConfig"], "storageConfig": i["storageConfig"], "kubernetesNetworkConfig": i["kubernetesNetworkConfig"],
              "bootstrapSelfManagedAddons": i["bootstrapSelfManagedAddons"], "accessConfig": i["accessConfig"]}
    shape = botocore_session.get_session().get_service_model("eks").operation_model("CreateCluster").input_shape
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), report.generate_report()
    assert ParamValidator().validate({**params, "computeConfig": {**params["computeConfig"], "nodePool": ["system"]}}, shape).has_errors()
    # No add-ons, no system node group, no Karpenter chart: Auto Mode runs them.
    assert not plan.of_type("aws:eks/addon:Addon") and not plan.of_type("aws:eks/nodeGroup:NodeGroup")
    assert "karpenter" not in {r.inputs.get("name") for r in plan.of_type("kubernetes:helm.sh/v3:Release")}
    roles = [a.inputs["policyArn"] for a in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")]
    assert set(aws_auto.CLUSTER_POLICIES) | set(aws_auto.NODE_POLICIES) == set(roles)


def test_no_gpu_software_is_installed_beside_the_image_s_own():
    stack = validate_stack(example())
    releases = {r.name for r in software_plan(stack, plan_pools(stack)).releases}
    assert not releases & {"gpu-operator", "nvidia-device-plugin", "hami"}
    assert all(p.mechanism.installer == "cloud" and p.mechanism.description.startswith("EKS Auto Mode's NVIDIA device plugin") for p in plan_pools(stack))
    assert stack.target is cloud_module("aws", "auto-mode") and validate_stack(stack_config("aws")).target is cloud_module("aws")


@pytest.mark.parametrize("pool, path, words", [
    ({"sharing": {"mode": "time-slicing", "replicas": 4}}, "pools[0].sharing.mode", "'time-slicing' is not possible on EKS Auto Mode"),
    ({"sharing": {"mode": "vgpu", "replicas": 4}}, "pools[0].sharing.mode", "cannot be replaced"),
    ({"os": "bottlerocket"}, "pools[0].os", "chooses its own node image"),
    ({"minNodes": 1}, "pools[0].minNodes", "keeps no floor"),
    ({"autoRepair": False}, "pools[0].autoRepair", "repairs every node"),
    ({"instanceType": "p4d.24xlarge", "fabric": "on", "zones": ["eu-central-1a"]}, "pools[0].fabric", "EKS Auto Mode takes no placement group"),
])
def test_what_auto_mode_owns_is_refused_in_one_line(pool, path, words):
    config = auto_config([{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3, **pool}])
    assert any(p.path == path and words in p.message for p in problems_of(config)), problems_of(config)


@pytest.mark.parametrize("keys, path, words", [
    ({"gpuSoftware": {"installer": "gpu-operator"}}, "gpuSoftware.installer", "a second one would register nvidia.com/gpu"),
    ({"gpuSoftware": {"installer": "device-plugin"}}, "gpuSoftware.installer", "a second one would register nvidia.com/gpu"),
    ({"gpuSoftware": {"version": "v26.7.0"}}, "gpuSoftware.version", "EKS manages its own GPU software"),
    ({"autoscaler": "cluster-autoscaler"}, "autoscaler", "EKS Auto Mode (Karpenter) does"),
    ({"cluster": {"managedAddons": True}}, "cluster.managedAddons", "runs the VPC CNI"),
])
def test_settings_auto_mode_owns_are_refused(keys, path, words):
    assert any(p.path == path and words in p.message for p in problems_of(auto_config(**keys))), problems_of(auto_config(**keys))


@pytest.mark.parametrize("cloud, mode", [("gcp", "auto-mode"), ("azure", "auto-mode")])
def test_auto_mode_is_an_eks_mode(cloud, mode):
    config = stack_config(cloud)
    config["gpupools:cluster"] = {**config["gpupools:cluster"], "mode": mode}
    assert any(p.path == "cluster.mode" and "offers standard" in p.message for p in problems_of(config))


def test_a_standard_cluster_still_refuses_the_cloud_installer_and_says_what_to_do():
    (problem,) = problems_of(stack_config("aws", gpuSoftware={"installer": "cloud"}))
    assert problem.path == "gpuSoftware.installer" and "cluster.mode: auto-mode" in problem.message


def test_every_team_job_lands_on_auto_mode_nodes_from_zero():
    verdicts = landing_check(validate_stack(example()))
    assert {(v.team, v.pool, v.shape) for v in verdicts} == {("research", "train", "unit"), ("research", "train", "node"),
                                                             ("research", "infer", "unit"), ("serving", "infer", "unit")}
    assert all(v.lands for v in verdicts), [v.failing for v in verdicts]
    device = next(s for s in verdicts[0].steps if s.name == "device")
    assert device.detail == "EKS Auto Mode's NVIDIA device plugin (node image) advertises nvidia.com/gpu"
    # Reserved capacity first: the flavor of the reservation asks Karpenter for karpenter.sh/capacity-type=reserved.
    assert any(v.flavor == "train-reserved" for v in verdicts if v.pool == "train")


def test_a_job_asking_for_more_gpus_than_a_node_has_gets_no_node():
    cluster = cluster_of(validate_stack(example()))
    plan = cluster.plans[0]
    from gpupools.landing.jobs import job_manifest

    verdict = land(cluster, None, plan, "unit", job_manifest(cluster.stack, plan, "img", 2))
    assert not verdict.lands and verdict.failing.name == "node" and "expects 1 x nvidia.com/gpu on a new node, the pod asks for 2" in verdict.failing.detail


def test_an_existing_auto_mode_cluster_lends_its_node_role_and_one_without_auto_mode_stops_the_deploy():
    config = auto_config([{"name": "infer", "instanceType": "g6.2xlarge", "maxNodes": 3}], cluster={"create": False})
    plan = plan_of(config)
    (node_class,) = plan.of_type(NODE_CLASS)
    assert node_class.inputs["spec"]["role"] == "ml-test-auto-mode-node"  # the role the cluster's computeConfig names
    assert not plan.of_type("aws:iam/role:Role") and not plan.of_type("aws:eks/cluster:Cluster")
    pulumi = pytest.importorskip("pulumi")
    from gpupools.components.aws import _auto_mode_node_role

    assert _auto_mode_node_role("c", [{"enabled": True, "node_role_arn": "arn:aws:iam::1:role/path/r"}]) == "arn:aws:iam::1:role/path/r"
    with pytest.raises(pulumi.RunError, match="does not run Auto Mode"):
        _auto_mode_node_role("c", [{"enabled": False, "node_role_arn": None}])
    with pytest.raises(pulumi.RunError, match="does not run Auto Mode"):
        _auto_mode_node_role("c", [])


def test_the_plan_speaks_of_auto_mode_s_node_class_disk_and_add_ons():
    stack = validate_stack(example())
    infer, train = plan_pools(stack)
    lines = stack.target.capacity_lines(train.pool, "karpenter")
    assert lines[0].startswith("reservation cr-0123456789abcdef0 (1 node): NodeClass capacityReservationSelectorTerms") and not any("EC2" in l for l in lines)
    controls = {c.name: c.setting for c in stack.target.cluster_controls(stack.cluster)}
    assert controls["managed add-ons"].startswith("built into EKS Auto Mode")
    standard = validate_stack(stack_config("aws"))
    assert {c.name: c.setting for c in standard.target.cluster_controls(standard.cluster)}["managed add-ons"].startswith("vpc-cni")
    assert stack.target.node_disk_line(infer).startswith("NodeClass ephemeralStorage 200Gi") and "unless diskSizeGb" not in stack.target.node_disk_line(infer)
    assert "(200Gi unless diskSizeGb says; Auto Mode's own default is 80Gi)" in stack.target.node_disk_line(train)
    assert stack.target.driver_installer("cloud", None).startswith("EKS Auto Mode's node image")
    from gpupools.cli.replacement import sharing_change_note

    assert sharing_change_note(stack.target, "cloud", None, True).startswith("sharing stays whole GPUs on EKS Auto Mode")


def test_the_plan_s_disk_line_says_the_size_the_node_class_gets():
    sized, default = plan_pools(validate_stack(auto_config([{"name": "big", "instanceType": "g6.2xlarge", "maxNodes": 2, "diskSizeGb": 500},
                                                             {"name": "plain", "instanceType": "g6.2xlarge", "maxNodes": 2}])))
    assert aws_auto.node_disk_line(sized).startswith("NodeClass ephemeralStorage 500Gi") and "unless diskSizeGb" not in aws_auto.node_disk_line(sized)
    assert aws_auto.node_disk_line(default).startswith(f"NodeClass ephemeralStorage {aws_auto.DEFAULT_EPHEMERAL_GB}Gi")
    assert "Auto Mode's own default is 80Gi" in aws_auto.node_disk_line(default)
