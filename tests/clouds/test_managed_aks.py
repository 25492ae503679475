"""AKS in its managed modes: node auto-provisioning (an AKSNodeClass and a Karpenter NodePool per pool, checked
against the CRDs AKS's Karpenter serves and the ManagedCluster model), and what `installer: cloud` means on AKS."""

from __future__ import annotations

import copy

import pytest
import yaml

from conftest import ROOT, crd_rule_failures, needs_reference, plan_of, stack_config, config_problems as problems_of
from gpupools.clouds import azure_nap
from gpupools.core.catalog import load_catalog
from gpupools.landing.check import cluster_of, land, landing_check
from gpupools.pools.planning import plan_pools
from gpupools.validation.stack import validate_stack

NODE_CLASS = "kubernetes:karpenter.azure.com/v1beta1:AKSNodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
CLUSTER = "azure-native:containerservice:ManagedCluster"
NAP = {"name": "ml-test", "resourceGroup": "rg-ml", "mode": "node-auto-provisioning"}


def example() -> dict:
    return yaml.safe_load((ROOT / "stacks" / "Pulumi.dev-azure-nap.yaml").read_text())["config"]


def nap_config(pools: list[dict] | None = None, **keys) -> dict:
    return stack_config("azure", pools=pools, cluster=NAP, **keys)


def crd_schema(filename: str, version: str) -> dict:
    crd = yaml.safe_load((needs_reference() / "aks" / filename).read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == version)


def manifest(resource) -> dict:
    return {k: resource.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}


def test_node_classes_and_node_pools_are_what_aks_karpenter_serves():
    jsonschema = pytest.importorskip("jsonschema")
    plan = plan_of(example(), "dev-azure-nap")
    classes, pools = plan.of_type(NODE_CLASS), plan.of_type(NODE_POOL)
    assert len(classes) == 2 and len(pools) == 2
    for resource in classes:
        obj = manifest(resource)
        jsonschema.validate(obj, crd_schema("karpenter.azure.com_aksnodeclasses.yaml", "v1beta1"))
        assert crd_rule_failures(obj, crd_schema("karpenter.azure.com_aksnodeclasses.yaml", "v1beta1")) == []
        assert obj["spec"]["gpu"] == {"mode": "Driver"}  # installer device-plugin: AKS installs the driver
    for resource in pools:
        obj = manifest(resource)
        jsonschema.validate(obj, crd_schema("karpenter.sh_nodepools.yaml", "v1"))
        assert obj["spec"]["template"]["spec"]["nodeClassRef"]["group"] == "karpenter.azure.com"
    train = manifest(plan.get(NODE_POOL, "nodepool-gpupools-train"))["spec"]["template"]["spec"]["requirements"]
    assert {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["westeurope-1"]} in train
    infer = manifest(plan.get(NODE_POOL, "nodepool-gpupools-infer"))["spec"]["template"]["spec"]["requirements"]
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]} in infer
    assert manifest(plan.get(NODE_CLASS, "aksnodeclass-gpupools-train"))["spec"]["osDiskSizeGB"] == 256


def test_the_crd_check_catches_a_wrong_node_class():
    jsonschema = pytest.importorskip("jsonschema")
    stack = validate_stack(example())
    obj = azure_nap.node_class(plan_pools(stack)[0], "gpu-operator")
    assert obj["spec"]["gpu"] == {"mode": "None"}  # the GPU Operator brings the driver
    wrong = copy.deepcopy(obj)
    wrong["spec"]["gpu"]["mode"] = "Managed"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, crd_schema("karpenter.azure.com_aksnodeclasses.yaml", "v1beta1"))


def test_the_cluster_turns_node_auto_provisioning_on_as_the_api_model_has_it():
    models = pytest.importorskip("azure.mgmt.containerservice.models")
    plan = plan_of(example(), "dev-azure-nap")
    (cluster,) = plan.of_type(CLUSTER)
    profile = cluster.inputs["nodeProvisioningProfile"]
    fields = {field._rest_name_input or name for name, field in vars(models.ManagedClusterNodeProvisioningProfile).items()
              if hasattr(field, "_rest_name_input")}
    assert set(profile) <= fields and fields
    assert profile["mode"] in {m.value for m in models.NodeProvisioningMode} and profile["mode"] == "Auto"
    assert profile["defaultNodePools"] in {m.value for m in models.NodeProvisioningDefaultNodePools}
    network = cluster.inputs["networkProfile"]  # NAP's one network: Azure CNI Overlay with Cilium
    assert (network["networkPlugin"], network["networkPluginMode"], network["networkDataplane"]) == ("azure", "overlay", "cilium")
    assert not plan.of_type("azure-native:containerservice:AgentPool")
    standard = plan_of(stack_config("azure")).of_type(CLUSTER)[0].inputs
    assert "nodeProvisioningProfile" not in standard


def test_every_catalog_gpu_size_has_aks_managed_driver_installation():
    """gpu.mode Driver considers only the sizes AKS installs drivers on; every size of the catalog is one."""
    supported = yaml.safe_load((needs_reference() / "aks" / "supported-gpus.yaml").read_text())
    sizes = [name for name, instance in load_catalog().instances["azure"].items() if instance.gpu is not None]
    assert sizes and [s for s in sizes if s.lower() not in supported] == []


@pytest.mark.parametrize("pool, path, words", [
    ({"sharing": {"mode": "time-slicing", "replicas": 4}}, "pools[0].sharing.mode", "counts whole GPUs of the VM size"),
    ({"minNodes": 1}, "pools[0].minNodes", "keeps no floor"),
    ({"capacity": ["on-demand", "spot"]}, "pools[0].capacity", "takes [on-demand], [spot] or [spot, on-demand]"),
    ({"capacity": [{"reservation": {"id": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/"
                                           "Microsoft.Compute/capacityReservationGroups/crg", "nodes": 1}}, "on-demand"]},
     "pools[0].capacity", "attaches groups to AKS agent pools"),
    ({"instanceType": "Standard_ND96isr_H100_v5", "fabric": "on"}, "pools[0].fabric", "not on node auto-provisioning NodePools"),
])
def test_what_a_nap_pool_cannot_take_is_one_line(pool, path, words):
    config = nap_config([{"name": "infer", "instanceType": "Standard_NC8as_T4_v3", "maxNodes": 3, **pool}])
    assert any(p.path == path and words in p.message for p in problems_of(config)), problems_of(config)


def test_spot_then_on_demand_is_one_nap_pool_but_two_agent_pools():
    pool = {"name": "infer", "instanceType": "Standard_NC8as_T4_v3", "maxNodes": 3, "capacity": ["spot", "on-demand"]}
    validate_stack(nap_config([pool]))
    assert any(p.path == "pools[0].capacity" and "one priority" in p.message for p in problems_of(stack_config("azure", pools=[pool])))


@pytest.mark.parametrize("cluster", [{"name": "ml-test", "resourceGroup": "rg-ml"}, NAP])
def test_the_cloud_installer_on_aks_names_the_managed_gpu_profile(cluster):
    (problem,) = problems_of(stack_config("azure", cluster=cluster, gpuSoftware={"installer": "cloud"}))
    assert problem.path == "gpuSoftware.installer"
    assert "gpuProfile.nvidia.managementMode" in problem.message and "no such mechanism" not in problem.message
    assert "'device-plugin' (AKS installs the driver, gpuProfile.driver: Install" in problem.message


def test_the_managed_gpu_profile_is_in_the_aks_api_model_but_not_in_the_sdk_gpupools_sends():
    """The refusal above is the SDK's limit, not AKS's: the ManagedCluster model has the managed GPU profile, azure-native's
    GPUProfile has only the driver switch."""
    models = pytest.importorskip("azure.mgmt.containerservice.models")
    containerservice = pytest.importorskip("pulumi_azure_native.containerservice")
    import inspect

    assert "nvidia" in vars(models.GPUProfile) and "management_mode" in vars(models.NvidiaGPUProfile)
    assert list(inspect.signature(containerservice.GPUProfileArgs.__init__).parameters) == ["__self__", "driver"]


def test_every_team_job_lands_on_nap_nodes_from_zero_and_spot_nodes_are_tolerated():
    stack = validate_stack(example())
    verdicts = landing_check(stack)
    assert {(v.team, v.pool, v.shape) for v in verdicts} == {("research", "train", "unit"), ("research", "infer", "unit"), ("serving", "infer", "unit")}
    assert all(v.lands for v in verdicts), [v.failing for v in verdicts]
    node = next(s for s in verdicts[0].steps if s.name == "node")
    assert "Karpenter starts it from zero (NodePool gpupools-" in node.detail
    infer = plan_pools(stack)[0]
    assert stack.target.extra_tolerations(infer) == [{"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot",
                                                      "effect": "NoSchedule"}]
    assert stack.target.extra_tolerations(plan_pools(stack)[1]) == []


def test_a_pod_without_the_gpu_toleration_gets_no_nap_node():
    cluster = cluster_of(validate_stack(example()))
    plan = cluster.plans[1]
    from gpupools.landing.jobs import job_manifest

    job = job_manifest(cluster.stack, plan, "img")
    job["spec"]["template"]["spec"]["tolerations"] = []
    verdict = land(cluster, None, plan, "unit", job)
    assert not verdict.lands and "nvidia.com/gpu" in verdict.failing.detail


def test_the_plan_names_aks_s_driver_or_the_operator_s():
    stack = validate_stack(example())
    assert stack.target.driver_installer("device-plugin", None).startswith("AKS (AKSNodeClass gpu.mode Driver")
    assert stack.target.driver_installer("gpu-operator", None) is None
    assert stack.target.capacity_lines(plan_pools(stack)[0].pool, "karpenter") == ["spot: NodePool capacity type spot",
                                                                                   "on-demand: NodePool capacity type on-demand"]
