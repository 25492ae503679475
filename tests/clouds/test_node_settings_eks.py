"""A pool's `node:` on EKS managed node groups (cluster-autoscaler and the rack-scale pools): the node group's own fields,
its launch template's data and nodeadm's kubelet options (docs/node-settings.md)."""

from __future__ import annotations

import base64
import importlib.util
import json
import sys

import pytest
import yaml
from typer.testing import CliRunner

from conftest import ROOT, config_problems, plan_of, stack_config, write_stack
from gpupools.cli.main import app
from gpupools.cli.nodechanges import node_setting_changes, node_settings_json
from gpupools.clouds import aws
from gpupools.clouds.node_settings import node_lines, node_problems
from gpupools.validation.stack import validate_stack

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ROLLS = ("a change makes a new launch template version: EKS replaces every node of the group, at the pace of the pool's upgrades "
         "(the node group stays)")
# The peer stack "EKS kubelet maxPods": a cluster-autoscaler pool with 110 pods per node, through nodeadm's NodeConfig.
MAX_PODS = {"kubelet": {"config": {"maxPods": 110}}}
SERVE = {"kubelet": {"config": {"maxPods": 110, "kubeReserved": {"cpu": "500m", "memory": "1Gi"}, "evictionHard": {"memory.available": "5%"}}},
         "labels": {"team": "ml"}, "tags": {"cost-center": "ml"},
         "launchTemplate": {"metadataOptions": {"httpPutResponseHopLimit": 1}, "monitoring": {"enabled": True},
                            "blockDeviceMappings": [{"ebs": {"iops": 6000, "kmsKeyId": "alias/nodes"}}]}}


def _ca(pools: list[dict], **keys) -> dict:
    return stack_config("aws", autoscaler="cluster-autoscaler", pools=pools, **keys)


def _pool(name: str, node: dict | None = None, **fields) -> dict:
    return {"name": name, "instanceType": "g5.2xlarge", "maxNodes": 2, **({"node": node} if node is not None else {}), **fields}


@pytest.fixture(scope="module")
def ca_plan():
    return plan_of(_ca([_pool("maxpods", MAX_PODS), _pool("serve", SERVE), _pool("plain")]))


def _node_config(plan, pool: str) -> dict:
    """The NodeConfig part of the pool's launch template user data (a MIME archive)."""
    data = base64.b64decode(plan.get(LAUNCH_TEMPLATE, f"{pool}-nodes").inputs["userData"]).decode()
    (part,) = [p for p in data.split("--GPUPOOLS") if "application/node.eks.aws" in p]
    return yaml.safe_load(part.split("\n\n", 1)[1])


def test_kubelet_max_pods_lands_in_the_node_config_gpupools_writes(ca_plan):
    config = _node_config(ca_plan, "maxpods")
    assert config["kind"] == "NodeConfig" and config["apiVersion"] == "node.eks.aws/v1alpha1"
    assert config["spec"]["kubelet"] == {"config": {"maxPods": 110}}
    # gpupools' own NodeConfig fields stay beside it: fast image pull, the instance store as RAID0
    assert config["spec"]["featureGates"] == {"FastImagePull": True}
    assert config["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}
    assert _node_config(ca_plan, "serve")["spec"]["kubelet"] == SERVE["kubelet"]
    assert "kubelet" not in _node_config(ca_plan, "plain")["spec"]


def test_node_group_and_launch_template_carry_the_fields_under_gpupools_own(ca_plan):
    group = ca_plan.get(NODE_GROUP, "serve").inputs
    assert group["labels"]["team"] == "ml" and group["labels"]["gpupools.io/pool"] == "serve"
    assert group["tags"]["cost-center"] == "ml" and group["tags"]["gpupools.io/pool"] == "serve"
    template = ca_plan.get(LAUNCH_TEMPLATE, "serve-nodes").inputs
    assert template["monitoring"] == {"enabled": True}
    # the hop limit is a default node: replaces; IMDSv2 stays
    assert template["metadataOptions"] == {"httpEndpoint": "enabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}
    (volume,) = template["blockDeviceMappings"]
    assert volume["deviceName"] == "/dev/xvda"
    assert volume["ebs"] == {"volumeSize": 300, "volumeType": "gp3", "iops": 6000, "throughput": 125, "encrypted": "true",
                             "deleteOnTermination": "true", "kmsKeyId": "alias/nodes"}
    plain = ca_plan.get(LAUNCH_TEMPLATE, "plain-nodes").inputs
    assert "monitoring" not in plain and plain["metadataOptions"]["httpPutResponseHopLimit"] == 2
    assert plain["blockDeviceMappings"][0]["ebs"]["iops"] == 3000
    assert "team" not in ca_plan.get(NODE_GROUP, "plain").inputs["labels"]


def _problems(node: dict, **pool) -> list[str]:
    return [str(p) for p in config_problems(_ca([_pool("p", node, **pool)]))]


@pytest.mark.parametrize("node, expected", [
    ({"kubelet": {"config": {"maxPods": "110"}}}, "error: pools[0].node.kubelet.config.maxPods: expected an integer, got a string of 3 characters"),
    ({"kubelet": {"config": {"maxPod": 110}}}, "error: pools[0].node.kubelet.config.maxPod: not a field of EKS's kubelet.config; closest: maxPods"),
    ({"kublet": {}}, "error: pools[0].node.kublet: not a field of EKS's managed node group; closest: kubelet"),
    ({"launchTemplate": {"metadataOptions": {"httpTokens": "maybe"}}},
     "error: pools[0].node.launchTemplate.metadataOptions.httpTokens: not a value EKS takes here; allowed: optional, required"),
    ({"labels": {"gpupools.io/gpu": "x"}}, "error: pools[0].node.labels.gpupools.io/gpu: gpupools or EKS sets keys under gpupools.io/"),
    ({"tags": {"k8s.amazonaws.com/x": "y"}}, "error: pools[0].node.tags.k8s.amazonaws.com/x: gpupools or EKS sets keys under"),
    ({"launchTemplate": {"blockDeviceMappings": [{"ebs": {"iops": 4000}}, {"ebs": {"iops": 4000}}]}},
     "error: pools[0].node.launchTemplate.blockDeviceMappings: one entry: it sets gpupools' own volume"),
    ({"nodeClass": {"kubelet": {"maxPods": 110}}}, "error: pools[0].node.nodeClass: not a field of EKS's managed node group"),
])
def test_a_wrong_node_group_setting_is_one_line(node, expected):
    problems = _problems(node)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_kubelet_settings_need_al2023_and_node_group_fields_need_a_node_group():
    assert _problems(MAX_PODS, os="bottlerocket") == [
        "error: pools[0].node.kubelet: nodeadm's NodeConfig is AL2023's; Bottlerocket takes no kubelet settings here: drop os or kubelet"]
    karpenter = stack_config("aws", autoscaler="karpenter", pools=[_pool("p", MAX_PODS)])
    assert [str(p) for p in config_problems(karpenter)] == [
        "error: pools[0].node.kubelet: not a field of Karpenter's EC2NodeClass and NodePool; fields: nodeClass, nodePool"]
    # a label of the pool's own, under the pool's own domain, is fine
    assert validate_stack(_ca([_pool("p", {"labels": {"example.com/team": "ml"}})])).pools[0].node == {"labels": {"example.com/team": "ml"}}


def test_every_field_gpupools_owns_is_refused_with_where_to_set_it():
    api = aws.NODE_GROUP_API
    for path, where in api.owned.items():
        node: dict = {}
        at = node
        for step in path[:-1]:
            at = at.setdefault(step, {})
        at[path[-1]] = None
        if path[:2] == ("launchTemplate", "blockDeviceMappings"):  # inside the list's one entry
            node = {"launchTemplate": {"blockDeviceMappings": [node["launchTemplate"]["blockDeviceMappings"]]}}
        spelled = ".".join(path).replace("blockDeviceMappings.", "blockDeviceMappings[0].")
        assert [str(p) for p in node_problems(api, node, "node")] == [f"error: node.{spelled}: gpupools sets this itself; {where}"], path
    # through the stack: the taints point at the pool's own key, the disk at diskSizeGb
    assert _problems({"taints": []}) == ["error: pools[0].node.taints: gpupools sets this itself; set the pool's taints"]
    assert _problems({"launchTemplate": {"blockDeviceMappings": [{"ebs": {"volumeSize": 900}}]}}) == [
        "error: pools[0].node.launchTemplate.blockDeviceMappings[0].ebs.volumeSize: gpupools sets this itself; set the pool's diskSizeGb"]
    for key in ("instanceTypes", "scalingConfig", "capacityType", "amiType", "subnetIds", "updateConfig"):
        assert (key,) in api.owned, key


def test_the_plan_warns_that_launch_template_and_kubelet_changes_replace_the_nodes():
    assert node_lines(aws.NODE_GROUP_API, {"kubelet": {"config": {"maxPods": 110}}, "labels": {"team": "ml"}}) == [
        f"kubelet.config.maxPods: 110 (warning: {ROLLS})", "labels: {team: ml}"]


def test_the_json_plan_lists_node_settings_and_against_reports_a_change():
    before = validate_stack(_ca([_pool("p", {**MAX_PODS, "labels": {"team": "ml"}}), _pool("plain")]))
    doc = node_settings_json(before)
    assert set(doc) == {"p"} and doc["p"]["kubelet.config.maxPods"]["value"] == "110"
    assert doc["p"]["kubelet.config.maxPods"]["replaces"] == ROLLS and "replaces" not in doc["p"]["labels"]
    previous = {"nodeSettings": json.loads(json.dumps(doc))}
    assert node_setting_changes(previous, before) == []
    after = validate_stack(_ca([_pool("p", {"kubelet": {"config": {"maxPods": 64}}, "labels": {"team": "ai"}}), _pool("plain")]))
    assert node_setting_changes(previous, after) == [
        {"pool": "p", "field": "kubelet.config.maxPods", "change": "changed", "from": "110", "to": "64", "does": ROLLS},
        {"pool": "p", "field": "labels", "change": "changed", "from": "{team: ml}", "to": "{team: ai}", "does": "changes in place"}]
    removed = validate_stack(_ca([_pool("p", {"labels": {"team": "ml"}}), _pool("plain")]))
    assert node_setting_changes(previous, removed) == [{"pool": "p", "field": "kubelet.config.maxPods", "change": "removed", "does": ROLLS}]
    # no node: anywhere, no nodeSettings key: the JSON of such a stack stays as it was
    assert node_settings_json(validate_stack(_ca([_pool("plain")]))) == {}


def test_cli_json_and_against(tmp_path):
    runner = CliRunner()
    first = write_stack(tmp_path, _ca([_pool("p", MAX_PODS)]))
    result = runner.invoke(app, ["plan", "--config", str(first), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["nodeSettings"]["p"]["kubelet.config.maxPods"]["value"] == "110" and "nodeSettingChanges" not in doc
    previous = tmp_path / "previous.json"
    previous.write_text(result.stdout)
    second = write_stack(tmp_path, _ca([_pool("p", {"kubelet": {"config": {"maxPods": 64}}})]))
    text = runner.invoke(app, ["plan", "--config", str(second), "--against", str(previous)])
    assert text.exit_code == 0, text.output
    assert f"node change kubelet.config.maxPods changed from 110 to 64: {ROLLS}" in " ".join(text.output.split())
    bad = write_stack(tmp_path, _ca([_pool("p", {"kubelet": {"config": {"maxPods": "x"}}})]))
    result = runner.invoke(app, ["plan", "--config", str(bad)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert [line for line in result.output.splitlines() if line.startswith("error:")] == [
        "error: pools[0].node.kubelet.config.maxPods: expected an integer, got a string of 1 character"]


def test_policies_judge_the_launch_template_a_node_setting_opens(ca_plan):
    from test_policies import resource_violations

    opened = plan_of(_ca([_pool("v1", {"launchTemplate": {"metadataOptions": {"httpTokens": "optional"}}}),
                          _pool("hops", {"launchTemplate": {"metadataOptions": {"httpPutResponseHopLimit": 3}}})]))
    v1 = resource_violations("eks-imdsv2", LAUNCH_TEMPLATE, opened.get(LAUNCH_TEMPLATE, "v1-nodes").inputs)
    assert len(v1) == 1 and "allows IMDSv1 (metadataOptions.httpTokens is optional)" in v1[0]
    hops = resource_violations("eks-imdsv2", LAUNCH_TEMPLATE, opened.get(LAUNCH_TEMPLATE, "hops-nodes").inputs)
    assert len(hops) == 1 and "httpPutResponseHopLimit to 3" in hops[0]
    # a hop limit of 1 (the serve pool) and gpupools' own settings pass
    assert resource_violations("eks-imdsv2", LAUNCH_TEMPLATE, ca_plan.get(LAUNCH_TEMPLATE, "serve-nodes").inputs) == []
    assert resource_violations("eks-imdsv2", LAUNCH_TEMPLATE, ca_plan.get(LAUNCH_TEMPLATE, "plain-nodes").inputs) == []


# --------------------------------------------------------------------------------------------------------------------
# The model: pulumi_aws's NodeGroupArgs and LaunchTemplateArgs, every field a member of botocore's shapes


def _tool():
    spec = importlib.util.spec_from_file_location("node_api_models", ROOT / "tools" / "node_api_models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("node_api_models", module)
    spec.loader.exec_module(module)
    return module


def test_the_node_group_model_is_pulumi_aws_with_botocore_enums():
    tool = _tool()
    derived, unmatched = tool.derive_node_group()
    assert json.loads((ROOT / "gpupools" / "clouds" / "aws" / "node_group_api.json").read_text()) == derived
    # every field is a member of botocore's eks CreateNodegroup or ec2 RequestLaunchTemplateData (ignoring case, with the
    # Terraform provider's renames), but for pulumi_aws's own forceUpdateVersion and inside networkInterfaces (the fabric's)
    assert sorted(unmatched) == ["forceUpdateVersion", "launchTemplate.networkInterfaces.ipv4AddressCount",
                                 "launchTemplate.networkInterfaces.ipv4Addresses", "launchTemplate.networkInterfaces.securityGroups"]
    import botocore.session

    session = botocore.session.get_session()
    fields = derived["model"]["fields"]
    metadata = session.get_service_model("ec2").shape_for("InstanceMetadataOptionsRequest")
    assert fields["launchTemplate"]["fields"]["metadataOptions"]["fields"]["httpTokens"]["enum"] == list(metadata.members["HttpTokens"].enum)
    create = session.get_service_model("eks").operation_model("CreateNodegroup").input_shape
    assert fields["capacityType"]["enum"] == list(create.members["capacityType"].enum)
    # kubelet: nodeadm's KubeletOptions as its CRD has them, the config's fields those Karpenter passes to the kubelet
    crd = yaml.safe_load((ROOT / "tests" / "reference" / "amazon-eks-ami" / "node.eks.aws_nodeconfigs.yaml").read_text())
    kubelet = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["kubelet"]["properties"]
    assert set(fields["kubelet"]["fields"]) == set(kubelet)
    assert fields["kubelet"]["fields"]["config"]["fields"]["maxPods"] == {"type": "integer"}


def test_the_rack_scale_pool_takes_kubelet_settings_too():
    raw = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev-aws-gb200.yaml").read_text())["config"]
    raw["gpupools:pools"][0]["node"] = {"kubelet": {"config": {"maxPods": 110}}, "launchTemplate": {"metadataOptions": {"httpPutResponseHopLimit": 1}}}
    plan = plan_of(raw)
    assert _node_config(plan, "gb200")["spec"]["kubelet"] == {"config": {"maxPods": 110}}
    template = plan.get(LAUNCH_TEMPLATE, "gb200-nodes").inputs
    assert template["metadataOptions"]["httpPutResponseHopLimit"] == 1 and template["instanceMarketOptions"]["marketType"] == "capacity-block"


def test_a_previous_plan_whose_node_settings_are_not_an_object_is_refused(tmp_path):
    from gpupools.cli.previousplan import read_previous_plan
    from gpupools.stack.reading import ReadError

    path = tmp_path / "previous.json"
    path.write_text(json.dumps({"stack": "test", "resources": [], "nodeSettings": ["x"]}))
    with pytest.raises(ReadError, match="nodeSettings: expected an object, got "):
        read_previous_plan(path)
    path.write_text(json.dumps({"stack": "test", "resources": [], "nodeSettings": {"p": {"labels": {"digest": "0"}}}}))
    assert read_previous_plan(path)["nodeSettings"] == {"p": {"labels": {"digest": "0"}}}
