"""EKS Auto Mode: NodeClass and NodePool against the schemas an Auto Mode cluster serves, the cluster's inputs against
botocore's EKS model, what Auto Mode owns (and gpupools therefore refuses), and each team's job from zero."""

from __future__ import annotations

import copy
import json
import re

import pytest
import yaml

from conftest import ROOT, crd_rule_failures, needs_reference, plan_of, stack_config, config_problems as problems_of
from gpupools.clouds.aws import auto_mode as aws_auto
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
    from gpupools.deploy.aws import _auto_mode_node_role

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


# --------------------------------------------------------------------------------------------------------------------
# The cluster role may tag what Auto Mode launches

ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def guide_tag_policy() -> dict[str, dict]:
    """The EKS user guide's custom-tag policy for the cluster role (auto-learn-iam.adoc, "Custom AWS tags for EKS Auto
    resources"), by statement id."""
    guide = (needs_reference() / "eks" / "auto-learn-iam.adoc").read_text()
    assert "the managed policies related to EKS Auto Mode do not permit applying user defined tags" in guide
    block = guide[guide.index("[[auto-tag-policy"):]
    document = json.loads(block[block.index("{"):block.index("\n----\n====")])
    # A single action may be a string in IAM; the comparison takes lists.
    return {s["Sid"]: {**s, "Action": [s["Action"]] if isinstance(s["Action"], str) else s["Action"]} for s in document["Statement"]}


def test_a_new_auto_mode_cluster_role_may_put_the_node_class_tags_on_what_auto_mode_launches():
    plan = plan_of(example(), "dev-aws-auto")
    (policy,) = plan.of_type(ROLE_POLICY)
    assert policy.name == "cluster-role-custom-tags" and policy.inputs["role"].startswith("cluster-role")  # the cluster role's id
    document = json.loads(policy.inputs["policy"])
    statements = {s["Sid"]: s for s in document["Statement"]}
    assert document["Version"] == "2012-10-17" and set(statements) == {"Compute", "Storage", "Networking"}
    # Statement for statement the guide's: the same actions, resources and conditions (this cluster's name, and for
    # launches a NodeClass and a NodePool), in the cluster's partition.
    guide = guide_tag_policy()
    for sid, statement in statements.items():
        assert statement == guide[sid], sid
    assert statements["Compute"]["Action"] == ["ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate"]
    assert statements["Compute"]["Condition"] == {
        "StringEquals": {"aws:RequestTag/eks:eks-cluster-name": "${aws:PrincipalTag/eks:eks-cluster-name}"},
        "StringLike": {"aws:RequestTag/eks:kubernetes-node-class-name": "*", "aws:RequestTag/eks:kubernetes-node-pool-name": "*"}}
    assert statements["Networking"]["Condition"]["StringLike"] == {"aws:RequestTag/eks:kubernetes-cni-node-name": "*"}
    assert all(s["Effect"] == "Allow" and s["Condition"]["StringEquals"]["aws:RequestTag/eks:eks-cluster-name"] ==
               "${aws:PrincipalTag/eks:eks-cluster-name}" for s in statements.values())
    # No load balancer or Shield statement: gpupools tags none.
    assert not {a for s in statements.values() for a in s["Action"]} & {a for s in guide.values() if s["Sid"] not in statements for a in s["Action"]}
    # Other partitions get their own ARNs.
    china = {s["Sid"]: s for s in json.loads(aws_auto.custom_tag_policy("aws-cn"))["Statement"]}
    assert china["Storage"]["Resource"] == ["arn:aws-cn:ec2:*:*:volume/*", "arn:aws-cn:ec2:*:*:snapshot/*"]
    # And every NodeClass the role serves carries the pool's tag.
    assert all(manifest(r)["spec"]["tags"] == {"gpupools.io/pool": manifest(r)["metadata"]["name"].removeprefix("gpupools-")}
               for r in plan.of_type(NODE_CLASS))


def test_an_existing_auto_mode_cluster_gets_untagged_node_classes_and_no_policy_on_a_role_gpupools_does_not_own():
    plan = plan_of(auto_config([{"name": "infer", "instanceType": "g6.2xlarge", "maxNodes": 3}], cluster={"create": False}))
    (node_class,) = plan.of_type(NODE_CLASS)
    assert "tags" not in node_class.inputs["spec"] and not plan.of_type(ROLE_POLICY)
    stack = validate_stack(example())
    assert aws_auto.node_class(plan_pools(stack)[0], "r", ["s"], ["g"], tagged=False)["spec"].get("tags") is None
    assert aws_auto.node_class(plan_pools(stack)[0], "r", ["s"], ["g"])["spec"]["tags"] == {"gpupools.io/pool": "infer"}


def test_a_reservation_selected_by_tags_names_its_account_as_auto_mode_s_node_class_does():
    jsonschema = pytest.importorskip("jsonschema")
    config = auto_config([{"name": "train", "instanceType": "p4d.24xlarge", "maxNodes": 1, "capacity": [
        {"reservation": {"tags": {"team": "ml"}, "ownerId": "123456789012", "zones": ["eu-central-1a"], "nodes": 1}}, "on-demand"]}])
    (plan,) = plan_pools(validate_stack(config))
    obj = aws_auto.node_class(plan, "role", ["subnet-1"], ["sg-1"])
    assert obj["spec"]["capacityReservationSelectorTerms"] == [{"tags": {"team": "ml"}, "owner": "123456789012"}]
    jsonschema.validate(obj, node_class_schema())
    wrong = copy.deepcopy(obj)
    wrong["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"team": "ml"}, "ownerID": "123456789012"}]  # Karpenter's spelling
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, node_class_schema())


# --------------------------------------------------------------------------------------------------------------------
# Node lifetime: within Auto Mode's 21 days, with an explicit grace period

def guide_limits() -> tuple[int, int]:
    """(Auto Mode's longest instance life, the grace period it applies when a NodePool sets none), in minutes, as the
    EKS user guide says them."""
    security = (needs_reference() / "eks" / "auto-security.adoc").read_text()
    pools = (needs_reference() / "eks" / "create-node-pool.adoc").read_text()
    days = int(re.search(r"EKS Auto Mode have maximum lifetime of (\d+) days", security).group(1))
    hours = int(re.search(r"automatically applies a default (\d+)-hour termination grace period", pools).group(1))
    return days * 24 * 60, hours * 60


def node_pool_of(plan, name: str) -> dict:
    return manifest(plan.get(NODE_POOL, f"nodepool-gpupools-{name}"))


@pytest.fixture(scope="module")
def lifetimes():
    return plan_of(auto_config([{"name": "train", "instanceType": "p4d.24xlarge", "maxNodes": 2},
                                {"name": "serve", "instanceType": "g6.2xlarge", "maxNodes": 6, "upgrades": "inference"},
                                {"name": "long", "instanceType": "g6.2xlarge", "maxNodes": 2, "upgrades": {"kind": "training", "waitForJobs": "48h"}}]))


def test_every_node_pool_fits_auto_mode_s_21_days_with_its_own_grace_period(lifetimes):
    from gpupools.upgrades.nodepool import minutes_of

    longest, default_grace = guide_limits()
    assert (aws_auto.MAX_NODE_LIFETIME_MINUTES, aws_auto.DEFAULT_GRACE) == (longest, f"{default_grace // 60}h")
    expected = {"train": ("480h", "24h"), "serve": ("480h", "30m"), "long": ("456h", "48h")}
    for name, (expire, grace) in expected.items():
        spec = node_pool_of(lifetimes, name)["spec"]["template"]["spec"]
        assert (spec["expireAfter"], spec["terminationGracePeriod"]) == (expire, grace), name
        assert minutes_of(spec["expireAfter"]) + minutes_of(spec["terminationGracePeriod"]) <= longest
    # Drift keeps the maintenance window on training pools.
    budgets = node_pool_of(lifetimes, "train")["spec"]["disruption"]["budgets"]
    assert {"nodes": "0", "reasons": ["Drifted"], "schedule": "0 12 * * 6", "duration": "156h"} in budgets


def test_what_karpenter_would_set_on_a_standard_cluster_is_not_what_auto_mode_admits():
    from gpupools.clouds import aws
    from gpupools.upgrades.nodepool import minutes_of
    from gpupools.upgrades.policy import Window

    window = Window.of(validate_stack(example()).upgrades.window)
    stack = validate_stack(example())
    train = stack.pools[1]
    assert aws.karpenter_disruption(train, window)["expireAfter"] == "Never" and "terminationGracePeriod" not in aws.karpenter_disruption(train, window)
    assert minutes_of("Never") is None  # so "Never" never passes as a lifetime that fits
    auto = aws_auto.karpenter_disruption(train, window)
    assert minutes_of(auto["expireAfter"]) + minutes_of(auto["terminationGracePeriod"]) <= aws_auto.MAX_NODE_LIFETIME_MINUTES


@pytest.mark.parametrize("wait, ok", [("168h", True), ("169h", False), ("720h", False)])
def test_a_wait_longer_than_auto_mode_leaves_room_for_is_refused_in_one_line(wait, ok):
    from gpupools.stack.errors import ConfigError

    def wait_problems(config: dict) -> list:
        try:
            validate_stack(config)
        except ConfigError as exc:
            return [p for p in exc.problems if p.path == "pools[0].upgrades.waitForJobs"]
        return []

    pools = [{"name": "train", "instanceType": "g6.2xlarge", "maxNodes": 2, "upgrades": {"kind": "training", "waitForJobs": wait}}]
    found = wait_problems(auto_config(pools))
    assert (found == []) is ok, found
    if not ok:
        assert "at most 168h (7 days)" in found[0].message and "21 days" in found[0].message
    # A standard cluster's Karpenter pool takes it (up to 30 days).
    assert wait_problems(stack_config("aws", pools=pools)) == []


def test_the_node_pools_pass_the_crd_and_the_policy_pack(lifetimes):
    jsonschema = pytest.importorskip("jsonschema")
    from test_policies import resource_violations

    for name in ("train", "serve", "long"):
        obj = node_pool_of(lifetimes, name)
        jsonschema.validate(obj, node_pool_schema())
        assert resource_violations("training-pool-upgrades", NODE_POOL, obj) == []
    train = node_pool_of(lifetimes, "train")
    for expire, grace in (("Never", "24h"), ("720h", None), ("481h", "24h")):
        wrong = copy.deepcopy(train)
        wrong["spec"]["template"]["spec"]["expireAfter"] = expire
        if grace is None:
            del wrong["spec"]["template"]["spec"]["terminationGracePeriod"]
        (message,) = resource_violations("training-pool-upgrades", NODE_POOL, wrong)
        assert "on EKS Auto Mode (Karpenter): expireAfter" in message and "exceeds the 21 days it gives a node" in message, expire


# --------------------------------------------------------------------------------------------------------------------
# The plan's upgrade and repair lines come from the NodePool

def auto_lines(obj: dict, window) -> list[str]:
    from gpupools.upgrades import nodepool

    return nodepool.node_pool_lines(obj, window, aws_auto.DRIFT_SOURCES, aws_auto.DEFAULT_GRACE, aws_auto.LIFETIME_CAP)


def test_the_upgrade_lines_are_read_from_the_node_pool_that_enforces_them(lifetimes):
    from gpupools.upgrades.policy import upgrade_lines, window_of

    config = auto_config([{"name": "train", "instanceType": "p4d.24xlarge", "maxNodes": 2},
                          {"name": "serve", "instanceType": "g6.2xlarge", "maxNodes": 6, "upgrades": "inference"},
                          {"name": "long", "instanceType": "g6.2xlarge", "maxNodes": 2, "upgrades": {"kind": "training", "waitForJobs": "48h"}}])
    stack = validate_stack(config)
    window = window_of(stack)
    for pool in stack.pools:
        obj = node_pool_of(lifetimes, pool.name)
        assert upgrade_lines(stack, pool, "karpenter")[:3] == auto_lines(obj, window), pool.name
    train = node_pool_of(lifetimes, "train")
    first, expiry, empty = auto_lines(train, window)
    assert first.startswith("training: new Auto Mode AMIs (about weekly), Kubernetes version upgrades and NodePool or NodeClass changes reach "
                            "the nodes by drift only Sat 00:00-12:00 UTC (12 h), 1 node at a time; drift may take a node running a Job too: "
                            "it drains, and pods still running 24h later, the Job's included, are deleted (terminationGracePeriod)")
    assert expiry.startswith("every node expires 480h (20 days) after it starts (expireAfter), at any hour: expiry ignores the budgets and "
                             "karpenter.sh/do-not-disrupt") and "a running Job gets 24h to finish" in expiry and "21 days" in expiry
    assert empty == "an empty node goes after 10m (consolidateAfter); a node running pods is never consolidated (WhenEmpty)"
    # Each field of the object changes its line.
    changed = copy.deepcopy(train)
    changed["spec"]["template"]["spec"]["expireAfter"] = "240h"
    assert "every node expires 240h (10 days) after it starts" in auto_lines(changed, window)[1]
    del changed["spec"]["template"]["spec"]["terminationGracePeriod"]
    assert "pods still running 24h later, the Job's included, are deleted (no terminationGracePeriod on the NodePool: the cloud's default)" \
        in auto_lines(changed, window)[0]
    changed["spec"]["template"]["spec"]["terminationGracePeriod"] = "2h"
    assert "pods still running 2h later" in auto_lines(changed, window)[0] and "a running Job gets 2h to finish" in auto_lines(changed, window)[1]
    changed["spec"]["disruption"]["budgets"] = [{"nodes": "2", "reasons": ["Drifted"]}]
    assert "reach the nodes by drift at any time, 2 nodes at a time" in auto_lines(changed, window)[0]
    changed["spec"]["disruption"] = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1h"}
    assert "drift at any time, 10% of the nodes at a time" in auto_lines(changed, window)[0]
    assert auto_lines(changed, window)[2].startswith("an empty node goes after 1h (consolidateAfter); underused nodes are consolidated too")


def test_the_plan_no_longer_promises_nodes_that_never_expire_or_jobs_left_to_end(tmp_path):
    from typer.testing import CliRunner

    from conftest import write_stack
    from gpupools.cli.main import app

    result = CliRunner().invoke(app, ["plan", "--config", str(write_stack(tmp_path, example(), "dev-aws-auto"))], terminal_width=400)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "never expire" not in text and "is left until the Job ends" not in text
    assert "every node expires 480h (20 days) after it starts (expireAfter)" in text
    assert ("note: the NodeClasses of train select capacity reservations (capacityReservationSelectorTerms): from then on EKS Auto Mode "
            "launches no node of this cluster into an open ODCR by itself") in text
    assert "EKS Auto Mode's node repair deletes the node at once, without draining it" in text


def test_the_open_odcr_note_follows_the_guide_and_only_a_reserving_pool_brings_it():
    guide = (needs_reference() / "eks" / "auto-odcr.adoc").read_text()
    assert "EKS Auto Mode will no longer automatically use open ODCRs for _any_ NodeClass in the cluster" in guide
    stack = validate_stack(example())
    (note,) = stack.target.plan_notes(stack.pools)
    assert note.startswith("the NodeClasses of train select capacity reservations")
    assert stack.target.plan_notes([p for p in stack.pools if p.name == "infer"]) == []


def test_the_repair_line_is_read_from_the_node_pool(lifetimes):
    from gpupools.health.repair import pool_repair
    from gpupools.upgrades import nodepool

    stack = validate_stack(auto_config([{"name": "serve", "instanceType": "g6.2xlarge", "maxNodes": 6}]))
    (plan,) = plan_pools(stack)
    repair = pool_repair(stack, plan, "karpenter")
    obj = node_pool_of(lifetimes, "serve")
    assert repair.then == nodepool.repair_line(obj, "EKS Auto Mode's node repair") and repair.repairs
    assert repair.then == ("EKS Auto Mode's node repair deletes the node at once, without draining it: a running Job's pods are killed, no "
                           "terminationGracePeriod applies; it repairs nothing while more than 2 of NodePool gpupools-serve's nodes are "
                           "unhealthy at its full 6 (limits.nodes; 20%, rounded up)")
    bigger = copy.deepcopy(obj)
    bigger["spec"]["limits"]["nodes"] = "11"
    assert "more than 3 of NodePool gpupools-serve's nodes are unhealthy at its full 11" in nodepool.repair_line(bigger, "x")
    bigger["spec"]["limits"]["nodes"] = "10"
    assert "more than 2 of NodePool gpupools-serve's nodes are unhealthy at its full 10" in nodepool.repair_line(bigger, "x")
