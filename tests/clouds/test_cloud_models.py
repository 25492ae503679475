"""Cloud inputs the autoscaling work adds, checked against the clouds' own API models.

AWS: each planned resource's inputs become the parameters of the API call the provider makes, validated by
botocore's `ParamValidator` (names, types, required members) plus the enums of its service model. Azure: every
input of a planned agent pool is a property of the containerservice AgentPool model.
"""

from __future__ import annotations

import copy
import json

import pytest

from conftest import plan_of, stack_config
from cli.test_new_gpu_stacks import STACKS as NEW_GPU_STACKS

botocore_session = pytest.importorskip("botocore.session")
from botocore.validate import ParamValidator  # noqa: E402

SESSION = botocore_session.get_session()


def enum_errors(shape, value, path: str = "") -> list[str]:
    """ParamValidator checks types, not enums; the service model lists them."""
    errors = []
    if shape.type_name == "structure" and isinstance(value, dict):
        for name, member in shape.members.items():
            if name in value:
                errors += enum_errors(member, value[name], f"{path}.{name}")
    elif shape.type_name == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            errors += enum_errors(shape.member, item, f"{path}[{i}]")
    elif shape.type_name == "string" and getattr(shape, "enum", None) and value not in shape.enum:
        errors.append(f"{path}: {value!r} not in {shape.enum}")
    return errors


def check(service: str, operation: str, params: dict) -> None:
    shape = SESSION.get_service_model(service).operation_model(operation).input_shape
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), f"{service}.{operation}: {report.generate_report()}"
    assert enum_errors(shape, params) == []


@pytest.fixture(scope="module")
def karpenter_plan():
    return plan_of(stack_config("aws", pools=[
        {"name": "a", "instanceType": "g5.2xlarge", "maxNodes": 3, "minNodes": 1, "spot": True, "sharing": {"mode": "time-slicing", "replicas": 2}}]))


@pytest.fixture(scope="module")
def asg_plan():
    return plan_of(stack_config("aws", autoscaler="cluster-autoscaler", pools=[
        {"name": "m", "instanceType": "p4de.24xlarge", "maxNodes": 2, "zones": ["eu-central-1b"], "sharing": {"mode": "mig", "migProfile": "1g.10gb"}}]))


@pytest.fixture(scope="module")
def newer_gpus_asg_plan():
    """H200 on EFA and B200 in MIG slices under cluster-autoscaler: managed node groups of p5en and p6-b200."""
    config = copy.deepcopy(NEW_GPU_STACKS["aws-h200-b200"][0])
    config["gpupools:autoscaler"] = "cluster-autoscaler"
    return plan_of(config)


def test_interruption_queue_and_rules(karpenter_plan):
    queue = karpenter_plan.get("aws:sqs/queue:Queue", "karpenter-interruption").inputs
    check("sqs", "CreateQueue", {"QueueName": queue["name"], "Attributes": {
        "MessageRetentionPeriod": str(queue["messageRetentionSeconds"]), "SqsManagedSseEnabled": str(queue["sqsManagedSseEnabled"]).lower()}})
    policy = karpenter_plan.get("aws:sqs/queuePolicy:QueuePolicy", "karpenter-interruption").inputs
    check("sqs", "SetQueueAttributes", {"QueueUrl": policy["queueUrl"], "Attributes": {"Policy": policy["policy"]}})
    for rule in karpenter_plan.of_type("aws:cloudwatch/eventRule:EventRule"):
        check("events", "PutRule", {"Name": rule.name, "EventPattern": rule.inputs["eventPattern"]})
    for target in karpenter_plan.of_type("aws:cloudwatch/eventTarget:EventTarget"):
        check("events", "PutTargets", {"Rule": target.inputs["rule"], "Targets": [{"Id": "karpenter", "Arn": target.inputs["arn"]}]})


def test_iam_roles_and_policies(karpenter_plan, asg_plan):
    for plan in (karpenter_plan, asg_plan):
        for role in plan.of_type("aws:iam/role:Role"):
            check("iam", "CreateRole", {"RoleName": role.name, "AssumeRolePolicyDocument": role.inputs["assumeRolePolicy"]})
        for policy in plan.of_type("aws:iam/rolePolicy:RolePolicy"):
            check("iam", "PutRolePolicy", {"RoleName": policy.inputs["role"], "PolicyName": policy.name, "PolicyDocument": policy.inputs["policy"]})
            json.loads(policy.inputs["policy"])
        for attachment in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment"):
            check("iam", "AttachRolePolicy", {"RoleName": attachment.inputs["role"], "PolicyArn": attachment.inputs["policyArn"]})


def test_eks_access_pod_identity_and_addon(karpenter_plan, asg_plan):
    access = karpenter_plan.get("aws:eks/accessEntry:AccessEntry", "karpenter-node").inputs
    check("eks", "CreateAccessEntry", {"clusterName": access["clusterName"], "principalArn": access["principalArn"], "type": access["type"]})
    for plan in (karpenter_plan, asg_plan):
        for association in plan.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation"):
            i = association.inputs
            check("eks", "CreatePodIdentityAssociation", {"clusterName": i["clusterName"], "namespace": i["namespace"],
                                                          "serviceAccount": i["serviceAccount"], "roleArn": i["roleArn"]})
    addon = karpenter_plan.get("aws:eks/addon:Addon", "eks-pod-identity-agent").inputs
    check("eks", "CreateAddon", {"clusterName": addon["clusterName"], "addonName": addon["addonName"]})


@pytest.fixture(scope="module")
def gb200_plan():
    """The GB200 example: an UltraServer's Capacity Block in a managed node group of the AL2023 ARM NVIDIA AMI."""
    from gpupools.stack.reading import read_document

    from conftest import ROOT
    return plan_of(read_document(ROOT / "stacks" / "Pulumi.dev-aws-gb200.yaml")["config"])


def test_node_groups_and_launch_templates(karpenter_plan, asg_plan, newer_gpus_asg_plan, gb200_plan):
    types = {t for g in newer_gpus_asg_plan.of_type("aws:eks/nodeGroup:NodeGroup") for t in g.inputs["instanceTypes"]}
    assert {"p5en.48xlarge", "p6-b200.48xlarge"} <= types
    gb200 = {g.inputs["amiType"]: g.inputs.get("capacityType") for g in gb200_plan.of_type("aws:eks/nodeGroup:NodeGroup")}
    assert gb200.get("AL2023_ARM_64_NVIDIA") == "CAPACITY_BLOCK", gb200
    for plan in (karpenter_plan, asg_plan, newer_gpus_asg_plan, gb200_plan):
        for group in plan.of_type("aws:eks/nodeGroup:NodeGroup"):
            i = group.inputs
            params = {"clusterName": i["clusterName"], "nodegroupName": i["nodeGroupName"], "nodeRole": i["nodeRoleArn"], "subnets": i["subnetIds"],
                      "scalingConfig": i["scalingConfig"], "amiType": i["amiType"],
                      "capacityType": i["capacityType"], "labels": i["labels"], "launchTemplate": {"id": i["launchTemplate"]["id"],
                                                                                                   "version": str(i["launchTemplate"]["version"])}}
            if "instanceTypes" in i:  # a Capacity Block's type is the launch template's, not the node group's
                params["instanceTypes"] = i["instanceTypes"]
            if "taints" in i:
                params["taints"] = i["taints"]
            check("eks", "CreateNodegroup", params)
        for template in plan.of_type("aws:ec2/launchTemplate:LaunchTemplate"):
            i = template.inputs
            data = {"MetadataOptions": {"HttpEndpoint": i["metadataOptions"]["httpEndpoint"], "HttpTokens": i["metadataOptions"]["httpTokens"],
                                        "HttpPutResponseHopLimit": i["metadataOptions"]["httpPutResponseHopLimit"]},
                    "TagSpecifications": [{"ResourceType": t["resourceType"], "Tags": [{"Key": k, "Value": v} for k, v in t["tags"].items()]}
                                          for t in i["tagSpecifications"]]}
            if "instanceMarketOptions" in i:
                data["InstanceType"] = i["instanceType"]
                data["InstanceMarketOptions"] = {"MarketType": i["instanceMarketOptions"]["marketType"]}
            if "capacityReservationSpecification" in i:
                spec = i["capacityReservationSpecification"]
                data["CapacityReservationSpecification"] = (
                    {"CapacityReservationTarget": {"CapacityReservationId": spec["capacityReservationTarget"]["capacityReservationId"]}}
                    if "capacityReservationTarget" in spec else {"CapacityReservationPreference": spec["capacityReservationPreference"]})
            for mapping in i.get("blockDeviceMappings", []):
                ebs = mapping["ebs"]
                data.setdefault("BlockDeviceMappings", []).append({"DeviceName": mapping["deviceName"], "Ebs": {
                    "VolumeSize": ebs["volumeSize"], "VolumeType": ebs["volumeType"], "Encrypted": ebs["encrypted"] == "true",
                    "DeleteOnTermination": ebs["deleteOnTermination"] == "true"}})
            check("ec2", "CreateLaunchTemplate", {"LaunchTemplateName": template.name, "LaunchTemplateData": data})


def test_auto_scaling_group_tags(asg_plan):
    tags = [{"ResourceId": t.inputs["autoscalingGroupName"], "ResourceType": "auto-scaling-group", "Key": t.inputs["tag"]["key"],
             "Value": t.inputs["tag"]["value"], "PropagateAtLaunch": t.inputs["tag"]["propagateAtLaunch"]}
            for t in asg_plan.of_type("aws:autoscaling/tag:Tag")]
    assert tags
    check("autoscaling", "CreateOrUpdateTags", {"Tags": tags})


@pytest.mark.parametrize("cluster", [{}, {"authorizedCidrs": ["203.0.113.0/24", "2001:db8::/32"]},
                                     {"endpointAccess": "public", "secretsEncryption": False, "controlPlaneLogs": []}])
def test_eks_cluster_hardening_inputs(cluster):
    """The new cluster controls as CreateCluster, CreateKey/EnableKeyRotation, CreateLogGroup/PutRetentionPolicy and
    CreateAddon take them."""
    plan = plan_of(stack_config("aws", cluster={"name": "ml-test", **cluster}))
    (eks,) = plan.of_type("aws:eks/cluster:Cluster")
    i = eks.inputs
    vpc = i["vpcConfig"]
    params = {"name": i["name"], "roleArn": i["roleArn"], "version": i["version"],
              "resourcesVpcConfig": {"subnetIds": vpc["subnetIds"], "endpointPublicAccess": vpc["endpointPublicAccess"],
                                     "endpointPrivateAccess": vpc["endpointPrivateAccess"]},
              "logging": {"clusterLogging": [{"types": i["enabledClusterLogTypes"], "enabled": True}]},
              "accessConfig": i["accessConfig"]}
    if "publicAccessCidrs" in vpc:
        params["resourcesVpcConfig"]["publicAccessCidrs"] = vpc["publicAccessCidrs"]
    if "encryptionConfig" in i:
        params["encryptionConfig"] = [i["encryptionConfig"]]
    check("eks", "CreateCluster", params)
    for key in plan.of_type("aws:kms/key:Key"):
        check("kms", "CreateKey", {"Description": key.inputs["description"]})
        check("kms", "EnableKeyRotation", {"KeyId": "mock-key-id"})
        check("kms", "ScheduleKeyDeletion", {"KeyId": "mock-key-id", "PendingWindowInDays": key.inputs["deletionWindowInDays"]})
    for group in plan.of_type("aws:cloudwatch/logGroup:LogGroup"):
        check("logs", "CreateLogGroup", {"logGroupName": group.inputs["name"]})
        check("logs", "PutRetentionPolicy", {"logGroupName": group.inputs["name"], "retentionInDays": group.inputs["retentionInDays"]})
    addons = plan.of_type("aws:eks/addon:Addon")
    assert addons
    for addon in addons:
        a = addon.inputs
        check("eks", "CreateAddon", {"clusterName": a["clusterName"], "addonName": a["addonName"], "addonVersion": a["addonVersion"],
                                     "resolveConflicts": a["resolveConflictsOnCreate"]})


def test_eks_log_types_are_the_api_enum():
    from gpupools.stack.config import EKS_LOG_TYPES

    shape = SESSION.get_service_model("eks").operation_model("CreateCluster").input_shape
    assert tuple(shape.members["logging"].members["clusterLogging"].member.members["types"].member.enum) == EKS_LOG_TYPES
    assert "API" in shape.members["accessConfig"].members["authenticationMode"].enum


def test_a_wrong_input_is_caught():
    with pytest.raises(AssertionError):
        check("eks", "CreateNodegroup", {"clusterName": "c", "nodegroupName": "n", "nodeRole": "r", "subnets": ["s"], "capacityType": "CHEAP"})
    with pytest.raises(AssertionError):
        check("eks", "CreateAccessEntry", {"clusterName": "c", "principalArn": 5})
    with pytest.raises(AssertionError):
        check("eks", "CreateCluster", {"name": "c", "roleArn": "r", "resourcesVpcConfig": {}, "logging": {"clusterLogging": [{"types": ["kubelet"]}]}})


@pytest.mark.parametrize("stack", ["nc-t4", "azure-h200"])
def test_aks_agent_pool_inputs_are_agent_pool_properties(stack):
    models = pytest.importorskip("azure.mgmt.containerservice.models")
    properties = {field._rest_name_input or name for name, field in vars(models.ManagedClusterAgentPoolProfileProperties).items()
                  if hasattr(field, "_rest_name_input")}
    assert "availabilityZones" in properties
    if stack == "azure-h200":  # ND H200 v5 on InfiniBand and in MIG slices (tests/cli/test_new_gpu_stacks.py)
        plan, names = plan_of(NEW_GPU_STACKS[stack][0]), ["h200", "h200mig"]
    else:
        plan, names = plan_of(stack_config("azure", pools=[{"name": "t", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 2, "zones": ["1", "3"],
                                                              "spot": True, "diskSizeGb": 128}])), ["t"]
    path_parameters = {"agentPoolName", "resourceGroupName", "resourceName"}
    for name in names:
        inputs = plan.get("azure-native:containerservice:AgentPool", name).inputs
        assert sorted(set(inputs) - path_parameters - properties) == [], name


# --------------------------------------------------------------------------------------------------------------------
# Capacity: launch templates and node groups for ODCRs and Capacity Blocks; AKS reservation groups

BLOCK = {"reservation": {"id": "cr-0123456789abcdef0", "kind": "capacity-block", "zones": ["eu-central-1a"], "nodes": 2}}
ODCR = {"reservation": {"id": "cr-0fedcba9876543210", "zones": ["eu-central-1b"], "nodes": 1}}
OTHER_ODCR = {"reservation": {**ODCR["reservation"], "id": "cr-0aaaaaaaaaaaaaaaa"}}  # one reservation id serves one pool


def launch_template_data(inputs: dict) -> dict:
    """The provider's launch template inputs as EC2 CreateLaunchTemplate's LaunchTemplateData (capacity fields)."""
    data: dict = {}
    if "instanceType" in inputs:
        data["InstanceType"] = inputs["instanceType"]
    if "instanceMarketOptions" in inputs:
        data["InstanceMarketOptions"] = {"MarketType": inputs["instanceMarketOptions"]["marketType"]}
    spec = inputs.get("capacityReservationSpecification")
    if spec:
        data["CapacityReservationSpecification"] = {}
        if "capacityReservationPreference" in spec:
            data["CapacityReservationSpecification"]["CapacityReservationPreference"] = spec["capacityReservationPreference"]
        if "capacityReservationTarget" in spec:
            data["CapacityReservationSpecification"]["CapacityReservationTarget"] = {
                "CapacityReservationId": spec["capacityReservationTarget"]["capacityReservationId"]}
    return data


@pytest.fixture(scope="module")
def reserved_groups_plan():
    return plan_of(stack_config("aws", autoscaler="cluster-autoscaler", pools=[
        {"name": "block", "instanceType": "p4d.24xlarge", "maxNodes": 2, "capacity": [BLOCK]},
        {"name": "odcr", "instanceType": "p4d.24xlarge", "maxNodes": 3, "capacity": [ODCR, "on-demand"]},
        {"name": "only", "instanceType": "p4d.24xlarge", "maxNodes": 1, "capacity": [OTHER_ODCR]}]))


def test_capacity_block_node_group_is_what_eks_requires(reserved_groups_plan):
    i = reserved_groups_plan.get("aws:eks/nodeGroup:NodeGroup", "block").inputs
    assert i["capacityType"] == "CAPACITY_BLOCK" and "instanceTypes" not in i
    params = {"clusterName": i["clusterName"], "nodegroupName": i["nodeGroupName"], "nodeRole": i["nodeRoleArn"], "subnets": i["subnetIds"],
              "scalingConfig": i["scalingConfig"], "amiType": i["amiType"], "capacityType": i["capacityType"],
              "launchTemplate": {"id": i["launchTemplate"]["id"], "version": str(i["launchTemplate"]["version"])}}
    check("eks", "CreateNodegroup", params)
    assert i["scalingConfig"]["desiredSize"] == 0
    # Subnets of the block's zone only: the new VPC's subnet there.
    vpc_subnets = {s.name: s.inputs for s in reserved_groups_plan.of_type("aws:ec2/subnet:Subnet")}
    assert len(i["subnetIds"]) == 1
    template = reserved_groups_plan.get("aws:ec2/launchTemplate:LaunchTemplate", "block-nodes").inputs
    data = launch_template_data(template)
    assert data == {"InstanceType": "p4d.24xlarge", "InstanceMarketOptions": {"MarketType": "capacity-block"},
                    "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}}}
    check("ec2", "CreateLaunchTemplate", {"LaunchTemplateName": "block-nodes", "LaunchTemplateData": data})
    assert any(s["availabilityZone"] == "eu-central-1a" for s in vpc_subnets.values())


def test_odcr_launch_templates(reserved_groups_plan):
    fallback = launch_template_data(reserved_groups_plan.get("aws:ec2/launchTemplate:LaunchTemplate", "odcr-nodes").inputs)
    assert fallback == {"CapacityReservationSpecification": {"CapacityReservationPreference": "open"}}
    only = launch_template_data(reserved_groups_plan.get("aws:ec2/launchTemplate:LaunchTemplate", "only-nodes").inputs)
    assert only == {"CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": "cr-0aaaaaaaaaaaaaaaa"}}}
    for name, data in (("odcr", fallback), ("only", only)):
        check("ec2", "CreateLaunchTemplate", {"LaunchTemplateName": name, "LaunchTemplateData": data})
        assert reserved_groups_plan.get("aws:eks/nodeGroup:NodeGroup", name).inputs["capacityType"] == "ON_DEMAND"


def test_a_wrong_capacity_input_is_caught():
    with pytest.raises(AssertionError):
        check("ec2", "CreateLaunchTemplate", {"LaunchTemplateName": "x", "LaunchTemplateData": {"InstanceMarketOptions": {"MarketType": "block"}}})
    with pytest.raises(AssertionError):
        check("ec2", "CreateLaunchTemplate", {"LaunchTemplateName": "x", "LaunchTemplateData": {
            "CapacityReservationSpecification": {"CapacityReservationPreference": "reservations-first"}}})


CRG = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-capacity/providers/Microsoft.Compute/capacityReservationGroups/crg-a100"


def test_aks_reservation_group_is_an_agent_pool_property_with_its_identity_and_role():
    models = pytest.importorskip("azure.mgmt.containerservice.models")
    properties = {field._rest_name_input or name for name, field in vars(models.ManagedClusterAgentPoolProfileProperties).items()
                  if hasattr(field, "_rest_name_input")}
    assert "capacityReservationGroupID" in properties
    plan = plan_of(stack_config("azure", pools=[{"name": "a100", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 2,
                                                  "capacity": [{"reservation": {"id": CRG, "zones": ["1"], "nodes": 1}}, "on-demand"]}]))
    inputs = plan.get("azure-native:containerservice:AgentPool", "a100").inputs
    assert inputs["capacityReservationGroupID"] == CRG and inputs["availabilityZones"] == ["1"]
    assert sorted(set(inputs) - {"agentPoolName", "resourceGroupName", "resourceName"} - properties) == []
    cluster = plan.of_type("azure-native:containerservice:ManagedCluster")[0].inputs
    assert cluster["identity"]["type"] == "UserAssigned"
    identity_properties = {field._rest_name_input or name for name, field in vars(models.ManagedClusterIdentity).items()
                           if hasattr(field, "_rest_name_input")}
    assert set(cluster["identity"]) <= identity_properties
    (role,) = [r for r in plan.of_type("azure-native:authorization:RoleAssignment") if "reservations" in r.name]
    assert role.inputs["scope"] == CRG.split("/providers/")[0]
    assert role.inputs["roleDefinitionId"].endswith("/roleDefinitions/b24988ac-6180-42a0-ab88-20f7382dd24c")
    assert role.inputs["principalType"] == "ServicePrincipal"
