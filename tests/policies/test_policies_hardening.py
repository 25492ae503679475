"""Hardening policies: a happy-path resource passes, and changing one field makes the policy report it."""

from __future__ import annotations

import pytest

from test_policies import AKS, GKE, LT, aks_agent_pool, gke_node_pool, launch_template, resource_violations

NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def encrypted_template(encrypted="true") -> dict:
    return launch_template(blockDeviceMappings=[{"deviceName": "/dev/xvda", "ebs": {"volumeSize": 200, "volumeType": "gp3",
                                                                                   "encrypted": encrypted}}])


def node_class(**metadata) -> dict:
    return {"spec": {"metadataOptions": {"httpEndpoint": "enabled", "httpPutResponseHopLimit": 2, "httpTokens": "required", **metadata},
                     "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "200Gi", "encrypted": True}}]}}


# --------------------------------------------------------------------------------------------------------------------
# encrypted-node-disks


def test_encrypted_volumes_pass():
    assert resource_violations("encrypted-node-disks", LT, encrypted_template()) == []
    assert resource_violations("encrypted-node-disks", NODE_CLASS, node_class()) == []
    assert resource_violations("encrypted-node-disks", AKS, aks_agent_pool(enableEncryptionAtHost=True), config={"aksEncryptionAtHost": True}) == []
    assert resource_violations("encrypted-node-disks", GKE, gke_node_pool(bootDiskKmsKey="projects/p/locations/l/keyRings/r/cryptoKeys/k"),
                               config={"gkeCustomerManagedKey": True}) == []


@pytest.mark.parametrize("encrypted", ["false", False, None])
def test_launch_template_with_unencrypted_root_volume_fails(encrypted):
    (message,) = resource_violations("encrypted-node-disks", LT, encrypted_template(encrypted), name="lt-infer")
    assert "'lt-infer'" in message and "/dev/xvda" in message and "encrypted: true" in message


def test_karpenter_node_class_with_unencrypted_volume_fails():
    props = node_class()
    props["spec"]["blockDeviceMappings"][0]["ebs"]["encrypted"] = False
    assert resource_violations("encrypted-node-disks", NODE_CLASS, props)


def test_aks_pool_without_encryption_at_host_fails_when_required_unless_its_size_is_exempt():
    pool = aks_agent_pool()
    assert resource_violations("encrypted-node-disks", AKS, pool) == []  # off by default: a subscription feature is needed
    (message,) = resource_violations("encrypted-node-disks", AKS, pool, config={"aksEncryptionAtHost": True})
    assert "enableEncryptionAtHost" in message
    exempt = {"aksEncryptionAtHost": True, "vmSizesWithoutEncryptionAtHost": [pool["vmSize"]]}
    assert resource_violations("encrypted-node-disks", AKS, pool, config=exempt) == []


def test_gke_boot_disk_without_customer_key_fails_when_required():
    assert resource_violations("encrypted-node-disks", GKE, gke_node_pool()) == []
    assert resource_violations("encrypted-node-disks", GKE, gke_node_pool(), config={"gkeCustomerManagedKey": True})


# --------------------------------------------------------------------------------------------------------------------
# eks-imdsv2 hop limit, gke-metadata-server legacy endpoints


def test_imds_hop_limit_above_two_fails():
    assert resource_violations("eks-imdsv2", LT, launch_template()) == []
    props = launch_template(metadataOptions={"httpEndpoint": "enabled", "httpPutResponseHopLimit": 3, "httpTokens": "required"})
    (message,) = resource_violations("eks-imdsv2", LT, props)
    assert "httpPutResponseHopLimit to 3" in message
    assert resource_violations("eks-imdsv2", NODE_CLASS, node_class()) == []
    assert resource_violations("eks-imdsv2", NODE_CLASS, node_class(httpPutResponseHopLimit=64))


@pytest.mark.parametrize("value", ["false", "False", False])
def test_gke_legacy_metadata_endpoints_on_fail(value):
    assert resource_violations("gke-metadata-server", GKE, gke_node_pool(metadata={"disable-legacy-endpoints": "true"})) == []
    (message,) = resource_violations("gke-metadata-server", GKE, gke_node_pool(metadata={"disable-legacy-endpoints": value}))
    assert "disable-legacy-endpoints" in message


# --------------------------------------------------------------------------------------------------------------------
# gpu-workload-privileges


def gpu_deployment(**pod) -> dict:
    spec = {"containers": [{"name": "serve", "image": "nvcr.io/nvidia/tritonserver:25.01-py3", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    spec.update(pod)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "serve", "namespace": "ml"}, "spec": {"template": {"spec": spec}}}


def test_unprivileged_gpu_workload_passes():
    assert resource_violations("gpu-workload-privileges", DEPLOYMENT, gpu_deployment()) == []


def test_privileged_gpu_container_fails():
    props = gpu_deployment()
    props["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    (message,) = resource_violations("gpu-workload-privileges", DEPLOYMENT, props)
    assert "ml/serve" in message and "privileged" in message


@pytest.mark.parametrize("field", ["hostNetwork", "hostPID", "hostIPC"])
def test_gpu_workload_in_host_namespaces_fails(field):
    (message,) = resource_violations("gpu-workload-privileges", DEPLOYMENT, gpu_deployment(**{field: True}))
    assert f"{field}: true" in message


def test_exception_names_the_workload_and_cpu_workloads_are_not_judged():
    props = gpu_deployment(hostNetwork=True)
    assert resource_violations("gpu-workload-privileges", DEPLOYMENT, props, config={"exceptions": ["ml/serve"]}) == []
    assert resource_violations("gpu-workload-privileges", DEPLOYMENT, props, config={"exceptions": ["other/serve"]})
    cpu = gpu_deployment(hostNetwork=True)
    cpu["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    assert resource_violations("gpu-workload-privileges", DEPLOYMENT, cpu) == []
