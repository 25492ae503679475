"""Multi-node training pools: the fabric facts, the stack keys, what each cloud gets, Kueue's topology, the job.

Checked against the upstream artefacts: EFA counts against Karpenter's generated instance-type reference,
EC2NodeClass, Topology and ResourceFlavor against the pinned CRDs and their CEL rules, launch templates, placement
groups and security-group rules against botocore's EC2 model, the EFA device plugin's values against its pinned chart.
"""

from __future__ import annotations

import base64
import functools
import json
from pathlib import Path

import pytest
import yaml

from test_cloud_models import enum_errors
from conftest import ROOT, crd_rule_failures, has_path, needs_reference, plan_of, stack_config, value_paths
from gpupools.core.catalog import load_catalog
from gpupools.fabric.plan import plan_fabrics
from gpupools.pools.planning import plan_pools
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

KARPENTER_REFERENCE = Path(__file__).parents[1] / "core" / "data" / "karpenter-v1.14.1-nvidia-instance-types.tsv"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
TOPOLOGY = "kubernetes:kueue.x-k8s.io/v1beta2:Topology"
FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"


def karpenter_reference() -> dict[str, dict]:
    rows = {}
    for line in KARPENTER_REFERENCE.read_text().splitlines():
        if line.startswith("#"):
            continue
        name, gpus, nvme, efa = line.split("\t")
        rows[name] = {"gpus": int(gpus), "nvme": int(nvme), "efa": int(efa)}
    return rows


def fabric_pool(**over) -> dict:
    return {"name": "train", "instanceType": "p5.48xlarge", "maxNodes": 4, "zones": ["us-east-1a"], **over}


def aws_config(**keys) -> dict:
    """An EKS stack in us-east-1, which offers every AWS instance type these tests use (p5.48xlarge is not offered in the
    default test region)."""
    config = stack_config("aws", **keys)
    config["aws:region"] = "us-east-1"
    return config


def problems_of(config: dict) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    return [str(p) for p in exc.value.problems]


# --------------------------------------------------------------------------------------------------------------------
# The catalog


def test_efa_counts_and_local_nvme_are_karpenters_for_every_aws_instance_type():
    """Every AWS GPU type of the catalog, and every fabric entry: the EFA count and instance store EC2 reports."""
    reference = karpenter_reference()
    catalog = load_catalog()
    # p6e-gb200.36xlarge is in no Karpenter reference (UltraServers only): its row cites the EKS user guide (below).
    names = {n for n in set(catalog.instances["aws"]) | set(catalog.fabric["aws"]) if n != "p6e-gb200.36xlarge"}
    assert len(names) >= 36
    gb200 = catalog.fabric_of("aws", "p6e-gb200.36xlarge")  # 3 x 7.5 TB instance store; EFA not laid out by gpupools
    assert (gb200.local_nvme_gb, gb200.efa, catalog.instance("aws", "p6e-gb200.36xlarge").source) == (22500, 0, "eks-ultraserver")
    for name in sorted(names):
        fabric = catalog.fabric_of("aws", name)
        assert name in reference, name
        assert fabric.efa == reference[name]["efa"], name
        assert fabric.local_nvme_gb == reference[name]["nvme"], name
        if name in catalog.instances["aws"]:
            assert catalog.instance("aws", name).gpus == reference[name]["gpus"], name
    # The counts the fabric is about, spelled out.
    assert {n: catalog.fabric_of("aws", n).efa for n in ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
                                                           "p6-b200.48xlarge", "g6e.24xlarge", "g6e.48xlarge", "p5.4xlarge", "g5.2xlarge")} == {
        "p4d.24xlarge": 4, "p4de.24xlarge": 4, "p5.48xlarge": 32, "p5e.48xlarge": 32, "p5en.48xlarge": 16, "p6-b200.48xlarge": 8,
        "g6e.24xlarge": 2, "g6e.48xlarge": 4, "p5.4xlarge": 1, "g5.2xlarge": 0}


def test_multi_node_types_have_a_fabric_and_eight_gpus():
    catalog = load_catalog()
    for cloud, types in catalog.fabric.items():
        for name, fabric in types.items():
            if fabric.multi_node:
                assert fabric.kind is not None, name
                it = catalog.instance(cloud, name)
                assert it is None or it.gpus == 8, name
    assert catalog.fabric_of("azure", "Standard_ND96isr_H100_v5").kind == "infiniband"
    assert catalog.fabric_of("azure", "Standard_NC24ads_A100_v4").kind is None
    assert [catalog.fabric_of("gcp", n).extra_networks for n in ("a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g")] == [4, 8, 9]


# --------------------------------------------------------------------------------------------------------------------
# The stack keys


def test_auto_turns_the_fabric_on_only_for_whole_gpu_multi_node_pools():
    stack = validate_stack(aws_config(pools=[
        fabric_pool(),
        fabric_pool(name="mig", zones=None, sharing={"mode": "mig", "migProfile": "1g.10gb"}),
        fabric_pool(name="off", zones=None, fabric="none"),
        {"name": "g6e", "instanceType": "g6e.48xlarge", "maxNodes": 2},
        {"name": "g6eon", "instanceType": "g6e.48xlarge", "maxNodes": 2, "fabric": "on", "zones": ["us-east-1b"]},
        fabric_pool(name="spread", zones=["us-east-1a", "us-east-1b"]),
        fabric_pool(name="regional", zones=None),
    ]))
    fabrics = plan_fabrics(stack, plan_pools(stack))
    assert sorted(fabrics) == ["g6eon", "train"]  # auto leaves pools that may span zones as they were
    assert (fabrics["train"].devices, fabrics["train"].resource, fabrics["train"].zone) == (32, "vpc.amazonaws.com/efa", "us-east-1a")
    assert fabrics["g6eon"].devices == 4


@pytest.mark.parametrize("cloud", ["aws", "azure", "gcp"])
def test_example_stacks_keep_their_pools_and_only_the_training_pools_get_a_fabric(cloud):
    from gpupools.stack.reading import read_document

    # dev-aws-reserved's H100 pool sits in its Capacity Block's one zone, which pins it as `zones` would.
    training = {"Pulumi.dev-aws.yaml": ["pretrain"], "Pulumi.dev-aws-reserved.yaml": ["h100"], "Pulumi.dev-aws-h200.yaml": ["h200"],
                "Pulumi.dev-gcp.yaml": ["pretrain"],
                "Pulumi.dev-azure.yaml": ["pretrain"]}
    for path in sorted((ROOT / "stacks").glob("Pulumi.dev-*.yaml")):
        stack = validate_stack(read_document(path)["config"])
        if stack.cloud != cloud:
            continue
        fabrics = plan_fabrics(stack, plan_pools(stack))
        assert sorted(fabrics) == training.get(path.name, []), path.name


def test_a_reservation_zone_places_a_fabric_pool_like_its_own_zones():
    config = stack_config("aws", autoscaler="karpenter", pools=[{"name": "train", "instanceType": "p5.48xlarge", "maxNodes": 2, "capacity": [
        {"reservation": {"id": "cr-0123456789abcdef0", "kind": "capacity-block", "zones": ["us-east-1a"], "nodes": 2}}, "on-demand"]}])
    config["aws:region"] = "us-east-1"
    stack = validate_stack(config)
    (fabric,) = plan_fabrics(stack, plan_pools(stack)).values()
    assert (fabric.devices, fabric.zone) == (32, "us-east-1a")


@pytest.mark.parametrize("cloud, pool, path, words", [
    ("aws", {"name": "i", "instanceType": "g5.2xlarge", "maxNodes": 2, "fabric": "on"}, "pools[0].fabric", "g5.2xlarge has no EFA"),
    ("aws", fabric_pool(zones=None, fabric="on"), "pools[0].zones", "EFA pools run in one zone"),
    ("aws", fabric_pool(zones=["us-east-1a", "us-east-1b"], fabric="on"), "pools[0].zones", "(us-east-1a, us-east-1b is 2)"),
    ("aws", fabric_pool(topologyLevel="rack"), "pools[0].topologyLevel", "'rack' is not a topology level of EKS; levels, coarse to fine: layer-1"),
    ("aws", fabric_pool(fabric="none", topologyLevel="layer-2"), "pools[0].topologyLevel", "applies to pools with a fabric"),
    ("aws", fabric_pool(fabric="on", sharing={"mode": "time-slicing", "replicas": 2}), "pools[0].fabric", "time-slicing shares each GPU between pods"),
    ("aws", fabric_pool(fabric="yes"), "pools[0].fabric", "'auto', 'on' or 'none'"),
    ("gcp", {"name": "a3", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "fabric": "on"}, "pools[0].zones", "GPUDirect pools run in one zone"),
    ("gcp", {"name": "a3", "instanceType": "a3-megagpu-8g", "maxNodes": 2, "zones": ["us-central1-a"], "topologyLevel": "layer-1"},
     "pools[0].topologyLevel", "levels, coarse to fine: block, subblock, host"),
    ("azure", {"name": "nd", "instanceType": "Standard_ND96isr_H100_v5", "maxNodes": 2, "zones": ["1", "2"], "fabric": "on"}, "pools[0].zones",
     "InfiniBand pools run in one zone"),
    ("azure", {"name": "nd", "instanceType": "Standard_ND96isr_H100_v5", "maxNodes": 2, "topologyLevel": "block"}, "pools[0].topologyLevel",
     "AKS nodes carry no topology labels"),
])
def test_bad_fabric_input_is_one_line_naming_the_field(cloud, pool, path, words):
    problems = problems_of(aws_config(pools=[pool]) if cloud == "aws" else stack_config(cloud, pools=[pool]))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"error: {path}: ") and words in problems[0], problems[0]
    assert "\n" not in problems[0]


def test_cli_refuses_bad_fabric_input_with_exit_2(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    path = stack_file(aws_config(pools=[fabric_pool(zones=["us-east-1a", "us-east-1c"], fabric="on")]))
    result = CliRunner().invoke(app, ["plan", "--config", str(path)])
    assert result.exit_code == 2
    assert result.output.startswith("error: pools[0].zones: EFA pools run in one zone") and result.output.count("\n") == 1


def test_a_zonal_gke_cluster_or_a_gpu_in_one_zone_pins_a_fabric_pool_without_zones():
    config = stack_config("gcp", cluster={"name": "ml", "location": "us-central1-a"},
                          pools=[{"name": "a3", "instanceType": "a3-highgpu-8g", "maxNodes": 2}])
    stack = validate_stack(config)
    assert plan_fabrics(stack, plan_pools(stack))["a3"].zone == "us-central1-a"
    # H200s are offered in one zone of us-central1 only (the catalog's gcpZones), so the regional pool is in one zone.
    stack = validate_stack(stack_config("gcp", pools=[{"name": "h", "instanceType": "a3-ultragpu-8g", "maxNodes": 1},
                                                      {"name": "a3", "instanceType": "a3-highgpu-8g", "maxNodes": 2}]))
    assert {name: f.zone for name, f in plan_fabrics(stack, plan_pools(stack)).items()} == {"h": "us-central1-b"}


# --------------------------------------------------------------------------------------------------------------------
# EKS


@pytest.fixture(scope="module")
def karpenter_plan():
    return plan_of(aws_config(pools=[fabric_pool(minNodes=1), {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}],
                                teams=[{"name": "ml", "gpus": {"train": 16, "infer": 1}}]))


@pytest.fixture(scope="module")
def node_group_plan():
    return plan_of(aws_config(autoscaler="cluster-autoscaler",
                                pools=[fabric_pool(instanceType="p4d.24xlarge", os="bottlerocket"), fabric_pool(name="p5", zones=["us-east-1b"])]))


@functools.cache
def _rule_failures(obj_json: str, schema_json: str, path: str) -> tuple[str, ...]:
    return tuple(crd_rule_failures(json.loads(obj_json), json.loads(schema_json), path))


def rule_failures(obj, schema: dict, path: str) -> list[str]:
    """crd_rule_failures, once per (object, schema, path) in this file: cel-python takes seconds on the node class's
    rule that compares every pair of its 33 network interfaces, and two tests check the same interfaces."""
    return list(_rule_failures(json.dumps(obj), json.dumps(schema), path))


def karpenter_schema(ref) -> dict:
    crd = yaml.safe_load((ref / "karpenter" / "karpenter.k8s.aws_ec2nodeclasses.yaml").read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1")


def test_ec2_node_class_has_efa_on_every_card_placement_and_raid0_valid_against_the_crd(karpenter_plan):
    jsonschema = pytest.importorskip("jsonschema")
    schema = karpenter_schema(needs_reference())
    classes = {r.inputs["metadata"]["name"]: r.inputs for r in karpenter_plan.of_type(NODE_CLASS)}
    fabric = classes["gpupools-al2023-fabric-train"]
    spec = fabric["spec"]
    interfaces = spec["networkInterfaces"]
    assert interfaces[0] == {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
    efa_only = [i for i in interfaces if i["interfaceType"] == "efa-only"]
    assert sorted(i["networkCardIndex"] for i in efa_only) == list(range(32))
    assert spec["placementGroupSelector"] == {"name": "ml-test-train"}
    assert spec["instanceStorePolicy"] == "RAID0"
    assert len(spec["securityGroupSelectorTerms"]) == 2
    for obj in classes.values():
        jsonschema.validate(obj, schema)
        # The CEL rules of the fields the fabric sets (the spec-wide and AMI alias rules use Kubernetes' CEL string
        # extension, split, which cel-python lacks).
        spec_schema = schema["properties"]["spec"]["properties"]
        for field in ("networkInterfaces", "placementGroupSelector", "securityGroupSelectorTerms", "instanceStorePolicy"):
            if field in obj["spec"]:
                assert rule_failures(obj["spec"][field], spec_schema[field], field) == []
    assert "networkInterfaces" not in classes["gpupools-al2023"]["spec"]  # the inference pool's class is untouched


def test_the_node_class_rules_catch_two_efa_devices_on_one_card(karpenter_plan):
    schema = karpenter_schema(needs_reference())
    spec = dict(next(r.inputs for r in karpenter_plan.of_type(NODE_CLASS) if "fabric" in r.inputs["metadata"]["name"])["spec"])
    spec["networkInterfaces"] = spec["networkInterfaces"] + [{"networkCardIndex": 3, "deviceIndex": 0, "interfaceType": "efa-only"}]
    rules = schema["properties"]["spec"]["properties"]["networkInterfaces"]
    assert rule_failures(spec["networkInterfaces"][:-1], rules, "networkInterfaces") == []
    assert any("at most one efa device per network card" in f for f in crd_rule_failures(spec["networkInterfaces"], rules))
    without_primary = spec["networkInterfaces"][1:]
    assert any("must include a primary interface" in f for f in crd_rule_failures(without_primary, rules))


def test_node_pool_pins_the_zone_and_the_floor_group_has_efa(karpenter_plan):
    pool = karpenter_plan.get("kubernetes:karpenter.sh/v1:NodePool", "nodepool-gpupools-train").inputs
    zone = [r for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"] == "topology.kubernetes.io/zone"]
    assert zone == [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]
    template = karpenter_plan.get("aws:ec2/launchTemplate:LaunchTemplate", "train-nodes").inputs
    assert template["placement"] == {"groupName": "ml-test-train"} and len(template["networkInterfaces"]) == 32


@functools.cache
def ec2_model():
    """botocore's EC2 service model, read once: a new session reads and decodes its JSON (megabytes) again."""
    botocore_session = pytest.importorskip("botocore.session")
    return botocore_session.get_session().get_service_model("ec2")


def ec2_check(operation: str, params: dict) -> None:
    model = ec2_model()  # skips without botocore
    from botocore.validate import ParamValidator

    shape = model.operation_model(operation).input_shape
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), f"ec2.{operation}: {report.generate_report()}"
    assert enum_errors(shape, params) == [], operation



def _launch_template_data(inputs: dict) -> dict:
    data: dict = {"Placement": {"GroupName": inputs["placement"]["groupName"]}, "UserData": inputs.get("userData", "")}
    data["NetworkInterfaces"] = [{"NetworkCardIndex": i["networkCardIndex"], "DeviceIndex": i["deviceIndex"], "InterfaceType": i["interfaceType"],
                                  "Groups": list(i["securityGroups"]), "DeleteOnTermination": i["deleteOnTermination"] == "true"}
                                 for i in inputs["networkInterfaces"]]
    return data


def test_launch_templates_placement_groups_and_efa_rules_against_the_ec2_model(node_group_plan):
    templates = {r.name: r.inputs for r in node_group_plan.of_type("aws:ec2/launchTemplate:LaunchTemplate") if "networkInterfaces" in r.inputs}
    assert sorted(templates) == ["p5-nodes", "train-nodes"]
    for name, inputs in templates.items():
        ec2_check("CreateLaunchTemplate", {"LaunchTemplateName": name, "LaunchTemplateData": _launch_template_data(inputs)})
        cards = [i["networkCardIndex"] for i in inputs["networkInterfaces"]]
        assert cards == list(range(len(cards))) and {i["interfaceType"] for i in inputs["networkInterfaces"]} == {"efa"}
        assert [i["deviceIndex"] for i in inputs["networkInterfaces"]][:2] == [0, 1]
    assert len(templates["train-nodes"]["networkInterfaces"]) == 4 and len(templates["p5-nodes"]["networkInterfaces"]) == 32
    for group in node_group_plan.of_type("aws:ec2/placementGroup:PlacementGroup"):
        i = group.inputs
        ec2_check("CreatePlacementGroup", {"GroupName": i["name"], "Strategy": i["strategy"],
                                           "TagSpecifications": [{"ResourceType": "placement-group", "Tags": [{"Key": k, "Value": v} for k, v in i["tags"].items()]}]})
    sg = node_group_plan.get("aws:ec2/securityGroup:SecurityGroup", "efa").inputs
    ec2_check("CreateSecurityGroup", {"GroupName": sg["name"], "Description": sg["description"], "VpcId": "vpc-0123456789abcdef0"})
    for kind, operation in (("Ingress", "AuthorizeSecurityGroupIngress"), ("Egress", "AuthorizeSecurityGroupEgress")):
        rule = node_group_plan.get(f"aws:vpc/securityGroup{kind}Rule:SecurityGroup{kind}Rule", f"efa-{kind.lower()}").inputs
        assert rule["referencedSecurityGroupId"] == rule["securityGroupId"] and rule["ipProtocol"] == "-1"
        ec2_check(operation, {"GroupId": rule["securityGroupId"], "IpPermissions": [
            {"IpProtocol": rule["ipProtocol"], "UserIdGroupPairs": [{"GroupId": rule["referencedSecurityGroupId"], "Description": rule["description"]}]}]})


def test_node_group_instance_store_is_raid0_for_al2023_and_bottlerocket(node_group_plan):
    al2023 = base64.b64decode(node_group_plan.get("aws:ec2/launchTemplate:LaunchTemplate", "p5-nodes").inputs["userData"]).decode()
    assert "kind: NodeConfig" in al2023 and "strategy: RAID0" in al2023 and "Content-Type: application/node.eks.aws" in al2023
    bottlerocket = base64.b64decode(node_group_plan.get("aws:ec2/launchTemplate:LaunchTemplate", "train-nodes").inputs["userData"]).decode()
    settings = __import__("tomllib").loads(bottlerocket)
    assert settings["settings"]["kubelet-device-plugins"]["nvidia"]["device-sharing-strategy"] == "none"
    assert settings["settings"]["bootstrap-commands"]["000-mount-instance-storage"]["commands"][0] == ["apiclient", "ephemeral-storage", "init"]


def test_efa_device_plugin_runs_only_on_efa_pools_tolerating_the_gpu_taint(karpenter_plan):
    ref = needs_reference()
    release = karpenter_plan.get("kubernetes:helm.sh/v3:Release", "aws-efa-k8s-device-plugin").inputs
    chart = yaml.safe_load((ref / "aws-efa-k8s-device-plugin" / "Chart.yaml").read_text())
    assert (release["chart"], release["version"], release["repositoryOpts"]["repo"]) == (chart["name"], chart["version"], "https://aws.github.io/eks-charts")
    upstream = yaml.safe_load((ref / "aws-efa-k8s-device-plugin" / "values.yaml").read_text())
    values = release["values"]
    missing = [p for p in value_paths(values) if not has_path(upstream, p)]
    assert missing == []
    assert values["supportedInstanceLabels"] == {"keys": ["gpupools.io/pool"], "values": ["train"]}
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in values["tolerations"]
    # The chart's DaemonSet turns those values into a node affinity on exactly those keys and values.
    daemonset = (ref / "aws-efa-k8s-device-plugin" / "daemonset.yaml").read_text()
    assert "range .Values.supportedInstanceLabels.keys" in daemonset and ".Values.tolerations" in daemonset


def test_no_efa_software_without_efa_pools():
    plan = plan_of(aws_config())
    assert not [r for r in plan.resources if "efa" in r.name or r.type.endswith("PlacementGroup")]


# --------------------------------------------------------------------------------------------------------------------
# Kueue


def kueue_schema(ref, plural: str) -> dict:
    crd = yaml.safe_load((ref / "kueue" / f"kueue.x-k8s.io_{plural}.yaml").read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1beta2")


@pytest.fixture(scope="module")
def fixed_fabric_plan():
    """A fabric pool fixed at its size: its nodes exist before any job is admitted, so its flavor is topology-aware."""
    return plan_of(aws_config(pools=[fabric_pool(minNodes=4), {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}],
                                teams=[{"name": "ml", "gpus": {"train": 16, "infer": 1}}]))


def test_a_fabric_pool_that_scales_from_zero_on_karpenter_gets_no_topology_aware_flavor(karpenter_plan):
    """Kueue's TAS counts only Ready nodes (kueue v0.19.2 topology_aware_scheduling.md, "Capacity calculation"): a
    topology-aware flavor on a pool that Karpenter starts per pending pod would keep every multi-node job suspended."""
    assert karpenter_plan.of_type(TOPOLOGY) == []
    flavors = {r.inputs["metadata"]["name"]: r.inputs for r in karpenter_plan.of_type(FLAVOR)}
    assert "topologyName" not in flavors["train"]["spec"]
    pools = {p["name"]: p for p in karpenter_plan.outputs["pools"]}
    assert pools["train"]["topology"].startswith("topology best effort: the pool scales from zero on Karpenter")
    assert pools["infer"]["topology"] is None


def test_topology_and_flavor_against_the_pinned_crds_and_rules(fixed_fabric_plan):
    jsonschema = pytest.importorskip("jsonschema")
    ref = needs_reference()
    karpenter_plan = fixed_fabric_plan
    topology = karpenter_plan.of_type(TOPOLOGY)
    assert len(topology) == 1
    topo = {k: topology[0].inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
    assert [l["nodeLabel"] for l in topo["spec"]["levels"]] == [
        "topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2", "topology.k8s.aws/network-node-layer-3", "kubernetes.io/hostname"]
    schema = kueue_schema(ref, "topologies")
    jsonschema.validate(topo, schema)
    assert crd_rule_failures(topo, schema) == []
    flavors = {r.inputs["metadata"]["name"]: {k: r.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")} for r in karpenter_plan.of_type(FLAVOR)}
    assert flavors["train"]["spec"]["topologyName"] == topo["metadata"]["name"]
    assert "topologyName" not in flavors["infer"]["spec"]
    flavor_schema = kueue_schema(ref, "resourceflavors")
    for flavor in flavors.values():
        jsonschema.validate(flavor, flavor_schema)
        assert crd_rule_failures(flavor, flavor_schema) == []


def test_the_topology_rules_catch_the_hostname_level_out_of_place():
    schema = kueue_schema(needs_reference(), "topologies")
    levels = [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "cloud.google.com/gce-topology-block"}]
    assert crd_rule_failures({"levels": levels}, schema["properties"]["spec"]) == [
        "/levels: the kubernetes.io/hostname label can only be used at the lowest level of topology"]


def test_gke_topology_uses_googles_labels():
    stack = validate_stack(stack_config("gcp", pools=[{"name": "a3", "instanceType": "a3-megagpu-8g", "maxNodes": 2, "zones": ["us-central1-a"],
                                                       "topologyLevel": "subblock"}], teams=[{"name": "ml", "gpus": 16}]))
    from gpupools.queues.kueue import topology

    fabric = plan_fabrics(stack, plan_pools(stack))["a3"]
    assert [l["nodeLabel"] for l in topology([fabric])["spec"]["levels"]] == [
        "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock", "cloud.google.com/gce-topology-host", "kubernetes.io/hostname"]
    assert fabric.required_level == "cloud.google.com/gce-topology-subblock"


# --------------------------------------------------------------------------------------------------------------------
# gpupools workload --nodes


def test_multinode_job_asks_for_every_gpu_and_efa_device_and_queues_close_together():
    from gpupools.landing.jobs import multinode_job

    stack = validate_stack(aws_config(pools=[fabric_pool(topologyLevel="layer-2", minNodes=4)], teams=[{"name": "ml", "gpus": 16}]))
    (plan,) = plan_pools(stack)
    service, job = multinode_job(stack, plan, 3, team="ml")
    assert service["spec"]["clusterIP"] == "None" and service["metadata"]["namespace"] == job["metadata"]["namespace"] == "ml"
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["suspend"]) == ("Indexed", 3, 3, True)
    pod = spec["template"]
    assert pod["spec"]["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["selector"] == {"batch.kubernetes.io/job-name": job["metadata"]["name"]}
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == "topology.k8s.aws/network-node-layer-2"
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8 and container["resources"]["limits"]["vpc.amazonaws.com/efa"] == 32
    assert container["resources"]["limits"]["hugepages-2Mi"] == "5120Mi"
    assert {e["name"]: e["value"] for e in container["env"]}["FI_PROVIDER"] == "efa"
    assert "--nnodes=3" in container["command"] and "--node-rank=$(JOB_COMPLETION_INDEX)" in container["command"]
    assert f"--master-addr={job['metadata']['name']}-0.{service['metadata']['name']}" in container["command"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "ml"


def test_multinode_job_on_a_pool_without_topology_aware_flavor_asks_for_no_topology():
    """An explicit topology request on a flavor that is not topology-aware is refused ("does not support
    TopologyAwareScheduling", kueue v0.19.2 tas_flavorassigner.go, checkPodSetAndFlavorMatchForTAS)."""
    from gpupools.landing.jobs import multinode_job

    stack = validate_stack(aws_config(pools=[fabric_pool(topologyLevel="layer-2")], teams=[{"name": "ml", "gpus": 16}]))
    (plan,) = plan_pools(stack)
    _, job = multinode_job(stack, plan, 3, team="ml")
    assert not any(k.startswith("kueue.x-k8s.io/podset") for k in job["spec"]["template"]["metadata"].get("annotations", {}))


def test_multinode_job_passes_the_gpu_workload_policy_and_schema():
    """The manifest is a valid Job (the pinned Kubernetes schemas used for the other workloads, when present)."""
    from gpupools.landing.jobs import multinode_job

    stack = validate_stack(stack_config("azure", pools=[{"name": "nd", "instanceType": "Standard_ND96isr_H100_v5", "maxNodes": 2}]))
    (plan,) = plan_pools(stack)
    _, job = multinode_job(stack, plan, 2)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 8, "rdma/sharedib": 1}
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert "annotations" not in job["spec"]["template"]["metadata"] or not any("kueue" in k for k in job["spec"]["template"]["metadata"]["annotations"])


@pytest.mark.parametrize("args, words", [
    (["--pool", "infer", "--nodes", "2"], "--nodes: pool 'infer' has no fabric between nodes"),
    (["--pool", "train", "--nodes", "1"], "--nodes: 1: a multi-node job has 2 nodes or more"),
    (["--pool", "train", "--nodes", "9"], "--nodes: 9 exceeds pool 'train''s maxNodes (4)"),
    (["--pool", "train", "--nodes", "2", "--units", "2"], "--units: a multi-node job takes every GPU"),
])
def test_workload_nodes_errors_are_one_line(stack_file, args, words):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    path = stack_file(aws_config(pools=[fabric_pool(), {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}]))
    result = CliRunner().invoke(app, ["workload", "--config", str(path), *args])
    assert result.exit_code == 2, result.output
    assert result.output == f"error: {words}" + result.output.split(words, 1)[1] and result.output.count("\n") == 1


def test_workload_nodes_prints_service_and_job(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    path = stack_file(aws_config(pools=[fabric_pool()]))
    result = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "train", "--nodes", "2"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.output))
    assert [d["kind"] for d in docs] == ["Service", "PodDisruptionBudget", "Job"]
    # A training pool's job: upgrade drains may not evict its pods (docs/upgrades.md).
    assert docs[1]["spec"] == {"maxUnavailable": 0, "selector": {"matchLabels": {"batch.kubernetes.io/job-name": docs[2]["metadata"]["name"]}}}
    inference = stack_file(aws_config(pools=[{**fabric_pool(), "upgrades": "inference"}]), name="inference")
    result = CliRunner().invoke(app, ["workload", "--config", str(inference), "--pool", "train", "--nodes", "2"])
    assert [d["kind"] for d in yaml.safe_load_all(result.output)] == ["Service", "Job"]


# --------------------------------------------------------------------------------------------------------------------
# The plan


def test_plan_json_and_text_carry_the_fabric(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    path = stack_file(aws_config(pools=[fabric_pool(), {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}],
                                   teams=[{"name": "ml", "gpus": 8}]))
    result = CliRunner().invoke(app, ["plan", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    pools = {p["name"]: p for p in json.loads(result.output)["outputs"]["pools"]}
    fabric = pools["train"]["fabric"]
    assert (fabric["kind"], fabric["devices"], fabric["zone"], fabric["placement"], fabric["perPod"]) == (
        "efa", 32, "us-east-1a", "placement group ml-test-train", 32)
    assert pools["train"]["localNvmeGb"] == 30400 and pools["infer"]["fabric"] is None and pools["infer"]["localNvmeGb"] == 450
    text = CliRunner().invoke(app, ["plan", "--config", str(path)], terminal_width=200).output
    assert "EFA x32 (efa), placement group ml-test-train, zone us-east-1a" in text
    assert "30,400 GB as one RAID0 array" in text
    assert "topology best effort: the pool scales from zero on Karpenter" in " ".join(text.split())
    assert pools["train"]["topology"].endswith("placement group ml-test-train keeps the nodes close")


# --------------------------------------------------------------------------------------------------------------------
# GKE (the node-pool and cluster fields are also checked against container.v1.json in tests/clouds/test_gke_api_model.py)


def test_gke_fabric_pools_get_their_networks_gvnic_and_compact_placement():
    plan = plan_of(stack_config("gcp", pools=[
        {"name": "a3", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "zones": ["us-central1-a"]},
        {"name": "mega", "instanceType": "a3-megagpu-8g", "maxNodes": 2, "zones": ["us-central1-b"]},
        {"name": "ultra", "instanceType": "a3-ultragpu-8g", "maxNodes": 2, "zones": ["us-central1-b"]},
        {"name": "l4", "instanceType": "g2-standard-8", "maxNodes": 2},
    ]))
    pools = {r.name: r.inputs for r in plan.of_type("gcp:container/nodePool:NodePool")}
    counts = {name: len(p.get("networkConfig", {}).get("additionalNodeNetworkConfigs", [])) for name, p in pools.items()}
    assert counts == {"a3": 4, "mega": 8, "ultra": 9, "l4": 0, "system": 0}
    for name in ("a3", "mega", "ultra"):
        assert pools[name]["placementPolicy"] == {"type": "COMPACT"} and pools[name]["nodeConfig"]["gvnic"] == {"enabled": True}
        assert pools[name]["nodeLocations"] == [{"a3": "us-central1-a"}.get(name, "us-central1-b")]
    assert "placementPolicy" not in pools["l4"]
    cluster = plan.of_type("gcp:container/cluster:Cluster")[0].inputs
    assert cluster["enableMultiNetworking"] is True and cluster["datapathProvider"] == "ADVANCED_DATAPATH"
    networks = {r.name: r.inputs for r in plan.of_type("gcp:compute/network:Network")}
    assert networks["ml-test-ultra-rdma"]["networkProfile"] == "projects/proj-test/global/networkProfiles/us-central1-b-vpc-roce"
    assert len(networks) == 4 + 8 + 2
    subnets = [r.inputs["ipCidrRange"] for r in plan.of_type("gcp:compute/subnetwork:Subnetwork")]
    assert len(subnets) == len(set(subnets)) == 4 + 8 + 9
    import ipaddress

    assert all(ipaddress.ip_network(s).subnet_of(ipaddress.ip_network("172.16.0.0/12")) for s in subnets)
    firewalls = plan.of_type("gcp:compute/firewall:Firewall")
    assert len(firewalls) == 4 + 8 + 1  # not on the RoCE network, whose traffic is allowed implicitly


def test_gke_without_fabric_pools_keeps_its_cluster():
    plan = plan_of(stack_config("gcp"))
    cluster = plan.of_type("gcp:container/cluster:Cluster")[0].inputs
    assert "enableMultiNetworking" not in cluster and not plan.of_type("gcp:compute/network:Network")


# --------------------------------------------------------------------------------------------------------------------
# AKS


@pytest.fixture(scope="module")
def aks_plan():
    return plan_of(stack_config("azure", pools=[{"name": "nd", "instanceType": "Standard_ND96isr_H100_v5", "maxNodes": 2, "spot": True},
                                                {"name": "nc", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 2}]))


def test_nic_cluster_policy_against_the_pinned_crd(aks_plan):
    jsonschema = pytest.importorskip("jsonschema")
    ref = needs_reference()
    crd = yaml.safe_load((ref / "network-operator" / "mellanox.com_nicclusterpolicies.yaml").read_text())
    schema = next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    (resource,) = aks_plan.of_type("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")
    policy = {k: resource.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
    jsonschema.validate(policy, schema)
    assert crd_rule_failures(policy, schema) == []
    terms = policy["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "gpupools.io/pool", "operator": "In", "values": ["nd"]}]}]
    tolerated = {(t["key"], t.get("value")) for t in policy["spec"]["tolerations"]}
    assert tolerated == {("nvidia.com/gpu", "present"), ("kubernetes.azure.com/scalesetpriority", "spot")}
    config = json.loads(policy["spec"]["rdmaSharedDevicePlugin"]["config"])
    assert config["configList"][0]["resourceName"] == "sharedib"  # the pods' rdma/sharedib


def test_network_operator_chart_and_values_are_the_pinned_charts(aks_plan):
    ref = needs_reference()
    release = aks_plan.get("kubernetes:helm.sh/v3:Release", "network-operator").inputs
    chart = yaml.safe_load((ref / "network-operator" / "Chart.yaml").read_text())
    assert (release["chart"], release["version"]) == (chart["name"], chart["version"])
    upstream = yaml.safe_load((ref / "network-operator" / "values.yaml").read_text())
    assert [p for p in value_paths(release["values"]) if not has_path(upstream, p)] == []
    # The GPU Operator brings Node Feature Discovery on AKS; one per cluster.
    assert release["values"]["nfd"] == {"enabled": False, "deployNodeFeatureRules": False}
    namespace = aks_plan.get("kubernetes:core/v1:Namespace", "namespace-nvidia-network-operator").inputs
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_no_network_operator_without_infiniband_pools():
    plan = plan_of(stack_config("azure"))
    assert not plan.of_type("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")
    assert all(r.name != "network-operator" for r in plan.of_type("kubernetes:helm.sh/v3:Release"))


# --------------------------------------------------------------------------------------------------------------------
# Policies, run on planned stacks as `gpupools check` runs them


FABRIC_POLICIES = ("multi-node-pool-fabric", "fabric-pool-one-zone", "fabric-devices-reachable")


def fabric_violations(plan) -> list[tuple[str, str]]:
    from gpupools.cli.policycheck import run_policies
    from gpupools.policies.pack import by_name

    result = run_policies(plan, policies=[by_name()[n] for n in FABRIC_POLICIES])
    return [(v.policy, v.message) for v in result.violations]


def test_fabric_pools_as_gpupools_builds_them_pass(karpenter_plan, node_group_plan, aks_plan):
    for plan in (karpenter_plan, node_group_plan, aks_plan):
        assert fabric_violations(plan) == []


def test_a_multi_node_pool_without_fabric_is_flagged():
    plan = plan_of(aws_config(pools=[fabric_pool(fabric="none"), fabric_pool(name="mig", sharing={"mode": "mig", "migProfile": "1g.10gb"})]))
    found = fabric_violations(plan)
    assert [p for p, _ in found] == ["multi-node-pool-fabric"]
    assert "pool 'train' (p5.48xlarge) is built for jobs that span nodes but has no EFA" in found[0][1]
    azure = plan_of(stack_config("azure", pools=[{"name": "nd", "instanceType": "Standard_ND96isr_H100_v5", "maxNodes": 2, "fabric": "none"}]))
    assert [p for p, _ in fabric_violations(azure)] == ["multi-node-pool-fabric"]


def test_a_pool_that_never_holds_two_nodes_needs_no_fabric():
    """maxNodes 1 runs no job that spans nodes; at 2 the same pool is flagged (the line between them is the limit)."""
    one = {"name": "nd", "instanceType": "Standard_ND96isr_H100_v5", "maxNodes": 1, "fabric": "none"}
    assert fabric_violations(plan_of(stack_config("azure", pools=[one]))) == []
    assert [p for p, _ in fabric_violations(plan_of(stack_config("azure", pools=[{**one, "maxNodes": 2}])))] == ["multi-node-pool-fabric"]


def test_an_efa_pool_over_zones_or_without_its_plugin_is_flagged(karpenter_plan):
    plan = copy_plan(karpenter_plan)
    pool = plan.get("kubernetes:karpenter.sh/v1:NodePool", "nodepool-gpupools-train").inputs
    for req in pool["spec"]["template"]["spec"]["requirements"]:
        if req["key"] == "topology.kubernetes.io/zone":
            req["values"] = ["us-east-1a", "us-east-1b"]
    plan.resources = [r for r in plan.resources if r.name != "aws-efa-k8s-device-plugin"]
    found = fabric_violations(plan)
    assert sorted(p for p, _ in found) == ["fabric-devices-reachable", "fabric-devices-reachable", "fabric-pool-one-zone"]
    assert any("spans 2 zones (us-east-1a, us-east-1b)" in m for _, m in found)
    assert any("installs no EFA device plugin" in m for _, m in found)


def test_an_efa_plugin_that_does_not_tolerate_the_gpu_taint_is_flagged(karpenter_plan):
    plan = copy_plan(karpenter_plan)
    plan.get("kubernetes:helm.sh/v3:Release", "aws-efa-k8s-device-plugin").inputs["values"]["tolerations"] = []
    assert any("does not run on its nodes" in m for p, m in fabric_violations(plan) if p == "fabric-devices-reachable")


def test_gke_gpudirect_pools_pass_and_are_flagged_without_network_objects_or_the_nccl_installer():
    plan = plan_of(stack_config("gcp", pools=[{"name": "a3", "instanceType": "a3-megagpu-8g", "maxNodes": 2, "zones": ["us-central1-a"]}]))
    assert fabric_violations(plan) == []
    no_installer = copy_plan(plan)
    no_installer.resources = [r for r in no_installer.resources if r.name != "daemonset-kube-system-nccl-tcpxo-installer"]
    found = fabric_violations(no_installer)
    assert [p for p, _ in found] == ["fabric-devices-reachable"] and "NCCL plugin installer (nccl-tcpxo-installer)" in found[0][1]
    untolerated = copy_plan(plan)
    untolerated.get("kubernetes:apps/v1:DaemonSet", "daemonset-kube-system-nccl-tcpxo-installer").inputs["spec"]["template"]["spec"]["tolerations"] = []
    assert [p for p, _ in fabric_violations(untolerated)] == ["fabric-devices-reachable"]
    no_networks = copy_plan(plan)
    no_networks.resources = [r for r in no_networks.resources if not r.type.startswith("kubernetes:networking.gke.io/")]
    found = fabric_violations(no_networks)
    assert [p for p, _ in found] == ["fabric-devices-reachable"] and "no GKE Network objects" in found[0][1]


def copy_plan(plan):
    import copy

    return copy.deepcopy(plan)


def test_autoscalers_are_told_a_new_efa_node_offers_the_efa_devices_and_huge_pages(karpenter_plan, node_group_plan):
    """A pending multi-node pod asks for vpc.amazonaws.com/efa and hugepages-2Mi; at zero nodes it wakes the pool only if
    the autoscaler's picture of a new node holds them (5128 huge pages of 2 MiB: EKS user guide node-efa)."""
    jsonschema = pytest.importorskip("jsonschema")
    ref = needs_reference()
    overlay = karpenter_plan.get("kubernetes:karpenter.sh/v1alpha1:NodeOverlay", "nodeoverlay-gpupools-train").inputs
    assert overlay["spec"]["capacity"] == {"hugepages-2Mi": "10256Mi"}
    crd = yaml.safe_load((ref / "karpenter" / "karpenter.sh_nodeoverlays.yaml").read_text())
    schema = next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    obj = {k: overlay[k] for k in ("apiVersion", "kind", "metadata", "spec")}
    jsonschema.validate(obj, schema)
    assert crd_rule_failures(obj["spec"]["capacity"], schema["properties"]["spec"]["properties"]["capacity"], "capacity") == []
    values = karpenter_plan.get("kubernetes:helm.sh/v3:Release", "karpenter").inputs["values"]
    assert values["settings"]["featureGates"]["nodeOverlay"] is True
    tags = {t.inputs["tag"]["key"]: t.inputs["tag"]["value"] for t in node_group_plan.of_type("aws:autoscaling/tag:Tag")
            if t.name.startswith("p5-")}
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa"] == "32"
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/hugepages-2Mi"] == "10256Mi"
    from gpupools.landing.jobs import multinode_job

    stack = validate_stack(aws_config(pools=[fabric_pool()]))
    (plan,) = plan_pools(stack)
    limits = multinode_job(stack, plan, 2)[1]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["hugepages-2Mi"] == "5120Mi" and int(limits["vpc.amazonaws.com/efa"]) <= 32


def test_catalog_command_shows_the_fabric():
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    rows = {r["instanceType"]: r for r in json.loads(CliRunner().invoke(app, ["catalog", "--cloud", "aws", "--json"]).output)}
    assert (rows["p5.48xlarge"]["fabric"], rows["p5.48xlarge"]["localNvmeGb"]) == ("efa x32", 30400)
    assert rows["g5.2xlarge"]["fabric"] is None
    human = CliRunner().invoke(app, ["catalog", "--cloud", "gcp"], terminal_width=220).output
    assert "gpudirect-tcpxo x8" in human


def test_one_node_feature_discovery_and_its_worker_tolerates_spot_infiniband_nodes():
    """The Network Operator brings NFD only where the GPU software has none (the device plugin chart has one with GFD on),
    and its worker tolerates the GPU and AKS spot taints of the InfiniBand pools."""
    from gpupools.fabric.software import network_operator_release
    from gpupools.pools.software import gpu_tolerations, runs_nfd

    pools = [{"name": "nd", "instanceType": "Standard_ND96isr_H100_v5", "maxNodes": 2, "spot": True}]
    for installer, nfd_elsewhere in (("gpu-operator", True), ("device-plugin", True)):
        stack = validate_stack(stack_config("azure", pools=pools, gpuSoftware={"installer": installer}))
        plans = plan_pools(stack)
        assert runs_nfd(stack, plans) is nfd_elsewhere
        values = network_operator_release(list(plan_fabrics(stack, plans).values()), runs_nfd(stack, plans), gpu_tolerations(stack, plans)).values
        assert values["nfd"]["enabled"] is not nfd_elsewhere
    values = network_operator_release(list(plan_fabrics(stack, plans).values()), False, gpu_tolerations(stack, plans)).values
    keys = {t["key"] for t in values["node-feature-discovery"]["worker"]["tolerations"]}
    assert {"kubernetes.azure.com/scalesetpriority", "nvidia.com/gpu", "node-role.kubernetes.io/control-plane"} <= keys
