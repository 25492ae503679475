"""EKS GPU nodes' storage and image pulls: the instance store as one RAID0 array on every pool that has one (not only
fabric pools), the EBS volume per class of node where the stack sets no diskSizeGb, and SOCI parallel pull on AL2023
and Bottlerocket.

Checked against the upstream artefacts: EC2NodeClasses against the pinned Karpenter CRD (schema and CEL rules),
launch templates against botocore's ec2 model, AL2023 NodeConfigs against nodeadm's own CRD and feature gates
(tests/reference/amazon-eks-ami, awslabs/amazon-eks-ami v20260724).
"""

from __future__ import annotations

import base64
import email
import re
import tomllib

import pytest
import yaml

from conftest import crd_rule_failures, needs_reference, plan_of, stack_config
from test_cloud_models import check
from gpupools.clouds import aws
from gpupools.pools.planning import plan_pools
from gpupools.validation.stack import validate_stack

NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


def pools(**over) -> list[dict]:
    """A whole-GPU AL2023 pool and a Bottlerocket pool, neither of them a fabric pool."""
    return [{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3, **over},
            {"name": "br", "instanceType": "g6.xlarge", "maxNodes": 2, "os": "bottlerocket", **over}]


@pytest.fixture(scope="module")
def karpenter_plan():
    return plan_of(stack_config("aws", pools=pools()))


@pytest.fixture(scope="module")
def node_group_plan():
    return plan_of(stack_config("aws", autoscaler="cluster-autoscaler", pools=pools()))


def node_class_schema() -> dict:
    crd = yaml.safe_load((needs_reference() / "karpenter" / "karpenter.k8s.aws_ec2nodeclasses.yaml").read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1")


def node_config_schema() -> dict:
    crd = yaml.safe_load((needs_reference() / "amazon-eks-ami" / "node.eks.aws_nodeconfigs.yaml").read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")


def nodeadm_feature_gates() -> set[str]:
    """The feature gates nodeadm knows: the kubebuilder enum of its `Feature` type."""
    source = (needs_reference() / "amazon-eks-ami" / "nodeconfig_types.go").read_text()
    (names,) = re.findall(r"\+kubebuilder:validation:Enum=\{([^}]*)\}\ntype Feature string", source)
    return {n.strip() for n in names.split(",")}


def node_configs(user_data: str) -> list[dict]:
    """The NodeConfig parts of an AL2023 MIME archive."""
    message = email.message_from_string(user_data)
    return [yaml.safe_load(p.get_payload()) for p in message.get_payload() if p.get_content_type() == "application/node.eks.aws"]


def test_every_karpenter_gpu_pool_with_an_instance_store_gets_it_as_raid0(karpenter_plan):
    """g5.2xlarge's 450 GB and g6.xlarge's 250 GB of NVMe, neither on a fabric pool: instanceStorePolicy RAID0 on both
    node classes (Karpenter docs, concepts/nodeclasses.md, spec.instanceStorePolicy), valid against the pinned CRD."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = node_class_schema()
    classes = {r.inputs["metadata"]["name"]: r.inputs for r in karpenter_plan.of_type(NODE_CLASS)}
    assert sorted(classes) == ["gpupools-al2023", "gpupools-bottlerocket-whole"]
    for name, obj in classes.items():
        assert obj["spec"]["instanceStorePolicy"] == "RAID0", name
        assert "networkInterfaces" not in obj["spec"], name  # still no fabric
        jsonschema.validate(obj, schema)
        spec_schema = schema["properties"]["spec"]["properties"]
        for field in ("instanceStorePolicy", "blockDeviceMappings"):
            assert crd_rule_failures(obj["spec"][field], spec_schema[field], field) == [], name


def test_the_plan_says_what_the_instance_store_is_used_for(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    text = " ".join(CliRunner().invoke(app, ["plan", "--config", str(stack_file(stack_config("aws", pools=pools())))],
                                       terminal_width=200).output.split())
    assert "450 GB, unused" not in text
    assert "local NVMe 450 GB as one RAID0 array: the kubelet's ephemeral storage and the image store (containerd, SOCI parallel pull)" in text
    assert "disk EBS root volume 300 GiB (the class default) gp3, 3,000 IOPS, 125 MiB/s" in text
    assert "disk EBS data volume 300 GiB (the class default) gp3" in text  # Bottlerocket's second volume


def test_node_groups_assemble_the_instance_store_themselves(node_group_plan):
    """Under cluster-autoscaler no Karpenter builds the array: AL2023 gets a NodeConfig with localStorage RAID0,
    Bottlerocket the ephemeral-storage bootstrap command Karpenter would generate, both beside fast image pull."""
    al2023 = base64.b64decode(node_group_plan.get(LAUNCH_TEMPLATE, "infer-nodes").inputs["userData"]).decode()
    (config,) = node_configs(al2023)
    assert config["spec"]["instance"]["localStorage"] == {"strategy": "RAID0"}
    assert config["spec"]["featureGates"] == {"FastImagePull": True}
    bottlerocket = tomllib.loads(base64.b64decode(node_group_plan.get(LAUNCH_TEMPLATE, "br-nodes").inputs["userData"]).decode())["settings"]
    mount = bottlerocket["bootstrap-commands"]["000-mount-instance-storage"]
    assert mount == {"commands": [["apiclient", "ephemeral-storage", "init"], ["apiclient", "ephemeral-storage", "bind"]],
                     "mode": "always", "essential": True}
    assert bottlerocket["container-runtime"] == {"snapshotter": "soci"}


def test_al2023_node_configs_are_valid_for_nodeadm(karpenter_plan, node_group_plan):
    """Every NodeConfig gpupools writes is valid against nodeadm's CRD and names only feature gates nodeadm has."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = node_config_schema()
    gates = nodeadm_feature_gates()
    assert "FastImagePull" in gates
    found = [r.inputs["spec"]["userData"] for r in karpenter_plan.of_type(NODE_CLASS) if r.inputs["spec"]["amiSelectorTerms"][0]["alias"].startswith("al2023")]
    found += [base64.b64decode(r.inputs["userData"]).decode() for r in node_group_plan.of_type(LAUNCH_TEMPLATE)
              if "userData" in r.inputs and r.name == "infer-nodes"]
    assert len(found) == 2
    for user_data in found:
        for config in node_configs(user_data):
            jsonschema.validate(config, schema)
            assert set(config["spec"]["featureGates"]) <= gates
    bad = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": {"instance": {"localStorage": {"strategy": "RAID5"}}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_bottlerocket_pulls_with_soci_in_parallel_beside_its_device_plugin_settings(karpenter_plan):
    (node_class,) = [r.inputs for r in karpenter_plan.of_type(NODE_CLASS) if "bottlerocket" in r.inputs["metadata"]["name"]]
    settings = tomllib.loads(node_class["spec"]["userData"])["settings"]
    assert settings["container-runtime"] == {"snapshotter": "soci"}
    soci = settings["container-runtime-plugins"]["soci-snapshotter"]
    assert soci["pull-mode"] == "parallel-pull-unpack"
    assert soci["parallel-pull-unpack"] == {"max-concurrent-downloads-per-image": 20, "concurrent-download-chunk-size": "16mb",
                                            "max-concurrent-unpacks-per-image": 10, "discard-unpacked-layers": True}
    assert settings["kubelet-device-plugins"]["nvidia"]["device-sharing-strategy"] == "none"
    assert "bootstrap-commands" not in settings  # Karpenter adds the RAID0 command itself (instanceStorePolicy)


def test_volumes_are_valid_ec2_launch_template_and_node_class_inputs(karpenter_plan, node_group_plan):
    for template in node_group_plan.of_type(LAUNCH_TEMPLATE):
        for mapping in template.inputs.get("blockDeviceMappings", []):
            ebs = mapping["ebs"]
            check("ec2", "CreateLaunchTemplate", {"LaunchTemplateName": template.name, "LaunchTemplateData": {"BlockDeviceMappings": [{
                "DeviceName": mapping["deviceName"], "Ebs": {"VolumeSize": ebs["volumeSize"], "VolumeType": ebs["volumeType"], "Iops": ebs["iops"],
                                                              "Throughput": ebs["throughput"], "Encrypted": True, "DeleteOnTermination": True}}]}})
            assert (ebs["volumeSize"], ebs["iops"], ebs["throughput"]) == (300, 3000, 125), template.name
    volumes = [m["ebs"] for r in karpenter_plan.of_type(NODE_CLASS) for m in r.inputs["spec"]["blockDeviceMappings"]]
    assert {"volumeSize": "4Gi", "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True} in volumes  # Bottlerocket's OS volume


def test_the_stack_size_keeps_the_class_performance_as_far_as_gp3_allows(monkeypatch):
    """diskSizeGb replaces the size only. Negative: an instance type without an instance store (none in the catalog
    today) gets no RAID0, its image store on EBS at 16,000 IOPS and 1,000 MiB/s, and a 20 GiB volume only what gp3
    allows on 20 GiB (500 IOPS per GiB)."""
    (plan,) = plan_pools(validate_stack(stack_config("aws", pools=[{"name": "x", "instanceType": "g6.xlarge", "maxNodes": 2, "diskSizeGb": 500}])))
    assert aws.node_disk(plan.pool) == aws.NodeDisk(500, 3000, 125, "the instance store")
    monkeypatch.setattr(aws.pools, "pool_local_nvme_gb", lambda pool: 0)
    assert not aws.instance_store_raid0(plan.pool)
    assert aws.node_disk(plan.pool) == aws.NodeDisk(500, 16000, 1000, "EBS")
    small = plan.pool.model_copy(update={"disk_size_gb": 20})
    assert aws.node_disk(small) == aws.NodeDisk(20, 10000, 1000, "EBS")
    default = plan.pool.model_copy(update={"disk_size_gb": None})
    assert aws.node_disk(default) == aws.NodeDisk(300, 16000, 1000, "EBS")
    from gpupools.autoscaling import karpenter

    spec = karpenter.node_class_spec(plan)
    assert not spec.raid0 and karpenter.node_class_name(spec, plan) == "gpupools-al2023-500g-ebs"
    body = karpenter.ec2_node_class("n", spec, "role", ["subnet-1"], ["sg-1"])["spec"]
    assert "instanceStorePolicy" not in body and body["blockDeviceMappings"][0]["ebs"]["iops"] == 16000
    (config,) = node_configs(aws.node_user_data(plan, raid0=aws.instance_store_raid0(plan.pool)))
    assert "instance" not in config["spec"] and config["spec"]["featureGates"] == {"FastImagePull": True}
    assert aws.local_nvme_use(plan.pool, False) is None
