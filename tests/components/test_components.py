"""The components under Pulumi's mock engine: what each cloud registers, with which inputs."""

from __future__ import annotations

import base64

import pytest

from conftest import POOL_RESOURCE, plan_of, stack_config

RELEASE = "kubernetes:helm.sh/v3:Release"


def test_eks_gpu_node_group_inputs():
    plan = plan_of(stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.12xlarge", "minNodes": 1, "maxNodes": 5,
                                                "spot": True, "labels": {"team": "search"}}], autoscaler="cluster-autoscaler"))
    ng = plan.get(POOL_RESOURCE["aws"], "infer")
    assert ng.parent == "infer" and ng.parent_type == "gpupools:index:EksGpuNodePool"
    i = ng.inputs
    assert i["amiType"] == "AL2023_x86_64_NVIDIA"
    assert i["capacityType"] == "SPOT"
    assert i["instanceTypes"] == ["g5.12xlarge"]
    assert i["scalingConfig"] == {"minSize": 1, "maxSize": 5, "desiredSize": 1}
    # The GPU taint, and the readiness taint the Node Readiness Controller lifts once the GPU Operator validated the node.
    assert i["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"},
                           {"key": "readiness.k8s.io/gpupools-gpu-ready", "value": "pending", "effect": "NO_SCHEDULE"}]
    assert i["labels"]["gpupools.io/pool"] == "infer"
    assert i["labels"]["gpupools.io/gpu"] == "A10G"
    assert i["labels"]["team"] == "search"
    assert i["clusterName"] == "ml-test"
    assert i["nodeRoleArn"].startswith("arn:aws:iam::")
    assert len(i["subnetIds"]) == 2
    assert "diskSize" not in i  # the launch template carries the disk
    lt = plan.get("aws:ec2/launchTemplate:LaunchTemplate", "infer-nodes")
    assert lt.inputs["metadataOptions"]["httpTokens"] == "required"
    assert i["launchTemplate"]["id"].startswith("lt-0")


def test_eks_new_cluster_creates_network_roles_and_system_group():
    plan = plan_of(stack_config("aws", autoscaler="cluster-autoscaler"))
    types = {r.type for r in plan.resources}
    for needed in ("aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:ec2/natGateway:NatGateway", "aws:iam/role:Role", "aws:eks/cluster:Cluster"):
        assert needed in types
    system = plan.get(POOL_RESOURCE["aws"], "system")
    assert system.inputs["amiType"] == "AL2023_x86_64_STANDARD"
    assert "taints" not in system.inputs
    cluster = plan.get("aws:eks/cluster:Cluster", "ml-test")
    assert cluster.inputs["version"] == "1.36"  # the newest EKS minor in standard support


def test_eks_given_subnets_skip_the_vpc():
    plan = plan_of(stack_config("aws", cluster={"name": "ml-test", "subnetIds": ["subnet-a", "subnet-b"]}, autoscaler="cluster-autoscaler"))
    assert not plan.of_type("aws:ec2/vpc:Vpc")
    assert plan.get(POOL_RESOURCE["aws"], "infer").inputs["subnetIds"] == ["subnet-a", "subnet-b"]


def test_eks_existing_cluster_adds_only_pools():
    plan = plan_of(stack_config("aws", cluster={"name": "prod", "create": False}))
    assert not plan.of_type("aws:eks/cluster:Cluster")
    assert not plan.of_type("aws:ec2/vpc:Vpc")
    names = [r.name for r in plan.of_type(POOL_RESOURCE["aws"])]
    assert names == ["infer"]
    ng = plan.get(POOL_RESOURCE["aws"], "infer")
    assert ng.inputs["clusterName"] == "prod"
    assert ng.inputs["subnetIds"] == ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"]  # from the looked-up cluster


def test_eks_bottlerocket_pool_gets_its_own_device_plugin_settings():
    plan = plan_of(stack_config("aws", pools=[{"name": "br", "instanceType": "g6.xlarge", "os": "bottlerocket", "maxNodes": 2,
                                                "sharing": {"mode": "time-slicing", "replicas": 3}}], autoscaler="cluster-autoscaler"))
    ng = plan.get(POOL_RESOURCE["aws"], "br")
    assert ng.inputs["amiType"] == "BOTTLEROCKET_x86_64_NVIDIA"
    assert ng.inputs["labels"]["nvidia.com/gpu.deploy.device-plugin"] == "false"
    user_data = base64.b64decode(plan.get("aws:ec2/launchTemplate:LaunchTemplate", "br-nodes").inputs["userData"]).decode()
    assert 'device-sharing-strategy = "time-slicing"' in user_data
    assert "replicas = 3" in user_data
    values = plan.get(RELEASE, "gpu-operator").inputs["values"]
    assert values["devicePlugin"]["enabled"] is False  # no pool needs the operator's plugin


def test_aks_agent_pool_inputs():
    plan = plan_of(stack_config("azure", pools=[{"name": "gpu", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 4, "spot": True,
                                                  "diskSizeGb": 256}]))
    ap = plan.get(POOL_RESOURCE["azure"], "gpu").inputs
    assert ap["mode"] == "User"
    assert ap["vmSize"] == "Standard_NC24ads_A100_v4"
    assert ap["enableAutoScaling"] is True and (ap["minCount"], ap["maxCount"]) == (0, 4)
    assert ap["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert ap["nodeLabels"]["gpupools.io/gpu"] == "A100-80GB"
    assert (ap["scaleSetPriority"], ap["scaleSetEvictionPolicy"], ap["spotMaxPrice"]) == ("Spot", "Delete", -1)
    assert ap["gpuProfile"] == {"driver": "None"}  # the GPU Operator installs the driver
    assert ap["resourceGroupName"] == "rg-ml" and ap["resourceName"] == "ml-test"
    assert ap["osDiskSizeGB"] == 256
    cluster = plan.get("azure-native:containerservice:ManagedCluster", "ml-test").inputs
    assert cluster["agentPoolProfiles"][0]["mode"] == "System"
    assert plan.outputs["kubeconfig"] == "[secret]"


def test_aks_with_device_plugin_keeps_the_aks_driver():
    plan = plan_of(stack_config("azure", gpuSoftware={"installer": "device-plugin"}))
    assert plan.get(POOL_RESOURCE["azure"], "infer").inputs["gpuProfile"] == {"driver": "Install"}
    release = plan.get(RELEASE, "nvidia-device-plugin").inputs
    assert release["repositoryOpts"]["repo"] == "https://nvidia.github.io/k8s-device-plugin"
    assert release["version"] == "0.20.0"


def test_aks_existing_cluster():
    plan = plan_of(stack_config("azure", cluster={"name": "prod", "resourceGroup": "rg-prod", "create": False}))
    assert not plan.of_type("azure-native:containerservice:ManagedCluster")
    ap = plan.get(POOL_RESOURCE["azure"], "infer").inputs
    assert (ap["resourceGroupName"], ap["resourceName"]) == ("rg-prod", "prod")


def test_gke_node_pool_with_implied_accelerator():
    plan = plan_of(stack_config("gcp", pools=[{"name": "a100", "instanceType": "a2-highgpu-2g", "maxNodes": 3, "spot": True}]))
    np = plan.get(POOL_RESOURCE["gcp"], "a100").inputs
    cfg = np["nodeConfig"]
    assert cfg["guestAccelerators"] == [{"type": "nvidia-tesla-a100", "count": 2, "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}]
    assert cfg["spot"] is True
    assert cfg["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
    assert cfg["labels"]["gpupools.io/gpu"] == "A100-40GB"
    assert cfg["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert np["autoscaling"]["totalMaxNodeCount"] == 3 and np["autoscaling"]["totalMinNodeCount"] == 0
    cluster = plan.get("gcp:container/cluster:Cluster", "ml-test").inputs
    assert cluster["removeDefaultNodePool"] is True
    assert plan.get(POOL_RESOURCE["gcp"], "system").inputs["nodeConfig"]["machineType"] == "e2-standard-4"


def test_gke_n1_pool_takes_gpu_and_count():
    plan = plan_of(stack_config("gcp", pools=[{"name": "t4", "instanceType": "n1-standard-8", "gpu": "nvidia-tesla-t4", "gpuCount": 4, "maxNodes": 2}]))
    acc = plan.get(POOL_RESOURCE["gcp"], "t4").inputs["nodeConfig"]["guestAccelerators"][0]
    assert (acc["type"], acc["count"]) == ("nvidia-tesla-t4", 4)


def test_gke_existing_cluster():
    plan = plan_of(stack_config("gcp", cluster={"name": "prod", "location": "europe-west4", "create": False}))
    assert not plan.of_type("gcp:container/cluster:Cluster")
    np = plan.get(POOL_RESOURCE["gcp"], "infer").inputs
    assert (np["cluster"], np["location"]) == ("prod", "europe-west4")


@pytest.mark.parametrize("cloud", ["aws", "azure", "gcp"])
def test_components_use_the_gpupools_type_tokens_and_parent_children(cloud):
    plan = plan_of(stack_config(cloud, **({"autoscaler": "cluster-autoscaler"} if cloud == "aws" else {})))
    components = [r for r in plan.resources if not r.custom]
    assert components and all(r.type.startswith("gpupools:index:") for r in components)
    pool = plan.get(POOL_RESOURCE[cloud], "infer")
    assert pool.parent_type.startswith("gpupools:index:") and pool.parent_type.endswith("GpuNodePool")
    assert plan.outputs["clusterName"] == "ml-test"
    assert plan.outputs["pools"][0]["name"] == "infer"


@pytest.mark.parametrize("cloud, absent", [("aws", ("pulumi_azure_native", "pulumi_gcp")), ("gcp", ("pulumi_aws", "pulumi_azure_native"))])
def test_only_the_stacks_cloud_sdk_is_imported(cloud, absent):
    import subprocess
    import sys

    code = ("import sys; from conftest import stack_config, plan_of; plan_of(stack_config(%r)); "
            "print(','.join(m for m in %r if m in sys.modules))" % (cloud, absent))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=__import__("pathlib").Path(__file__).parents[1])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
