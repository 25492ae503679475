"""Cloud inputs the autoscaling work adds, checked against the clouds' own API models.

AWS: each planned resource's inputs become the parameters of the API call the provider makes, validated by
botocore's `ParamValidator` (names, types, required members) plus the enums of its service model. Azure: every
input of a planned agent pool is a property of the containerservice AgentPool model.
"""

from __future__ import annotations

import json

import pytest

from conftest import plan_of, stack_config

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


def test_node_groups_and_launch_templates(karpenter_plan, asg_plan):
    for plan in (karpenter_plan, asg_plan):
        for group in plan.of_type("aws:eks/nodeGroup:NodeGroup"):
            i = group.inputs
            params = {"clusterName": i["clusterName"], "nodegroupName": i["nodeGroupName"], "nodeRole": i["nodeRoleArn"], "subnets": i["subnetIds"],
                      "scalingConfig": i["scalingConfig"], "instanceTypes": i["instanceTypes"], "amiType": i["amiType"],
                      "capacityType": i["capacityType"], "labels": i["labels"], "launchTemplate": {"id": i["launchTemplate"]["id"],
                                                                                                   "version": str(i["launchTemplate"]["version"])}}
            if "taints" in i:
                params["taints"] = i["taints"]
            check("eks", "CreateNodegroup", params)
        for template in plan.of_type("aws:ec2/launchTemplate:LaunchTemplate"):
            i = template.inputs
            data = {"MetadataOptions": {"HttpEndpoint": i["metadataOptions"]["httpEndpoint"], "HttpTokens": i["metadataOptions"]["httpTokens"],
                                        "HttpPutResponseHopLimit": i["metadataOptions"]["httpPutResponseHopLimit"]},
                    "TagSpecifications": [{"ResourceType": t["resourceType"], "Tags": [{"Key": k, "Value": v} for k, v in t["tags"].items()]}
                                          for t in i["tagSpecifications"]]}
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


def test_aks_agent_pool_inputs_are_agent_pool_properties():
    models = pytest.importorskip("azure.mgmt.containerservice.models")
    properties = {field._rest_name_input or name for name, field in vars(models.ManagedClusterAgentPoolProfileProperties).items()
                  if hasattr(field, "_rest_name_input")}
    assert "availabilityZones" in properties
    plan = plan_of(stack_config("azure", pools=[{"name": "t", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 2, "zones": ["1", "3"],
                                                  "spot": True, "diskSizeGb": 128}]))
    inputs = plan.get("azure-native:containerservice:AgentPool", "t").inputs
    path_parameters = {"agentPoolName", "resourceGroupName", "resourceName"}
    assert sorted(set(inputs) - path_parameters - properties) == []
