"""AKS in its managed modes: node auto-provisioning (an AKSNodeClass and a Karpenter NodePool per pool, checked
against the CRDs AKS's Karpenter serves and the ManagedCluster model), and what `installer: cloud` means on AKS."""

from __future__ import annotations

import copy

import pytest
import yaml

from conftest import ROOT, crd_rule_failures, needs_reference, plan_of, stack_config, config_problems as problems_of
from gpupools.clouds.azure import node_auto_provisioning as azure_nap
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


# --------------------------------------------------------------------------------------------------------------------
# Day two: the NodePool, not agent-pool upgrade settings, decides when NAP nodes go

@pytest.fixture(scope="module")
def day_two():
    return plan_of(nap_config([{"name": "train", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 2},
                               {"name": "serve", "instanceType": "Standard_NC8as_T4_v3", "maxNodes": 4, "upgrades": "inference"}]))


def node_pool_of(plan, name: str) -> dict:
    return manifest(plan.get(NODE_POOL, f"nodepool-gpupools-{name}"))


def nap_sources(window, cluster) -> str:
    """The drift sources azure_nap.upgrade_lines names, taken from its own line for the same window and cluster."""
    from gpupools.stack.config import Pool
    from gpupools.upgrades.policy import pool_upgrade

    pool = Pool.model_validate({"name": "x", "instanceType": "Standard_NC8as_T4_v3", "maxNodes": 1})
    first = azure_nap.upgrade_lines(pool, pool_upgrade(pool), window, cluster, "karpenter")[0]
    return first.removeprefix("training: ").split(" reach the nodes by drift")[0]


def test_nap_node_pools_never_expire_and_keep_training_drift_in_the_window(day_two):
    docs = (needs_reference() / "aks-docs" / "node-auto-provisioning-disruption.md").read_text()
    assert "To confine NAP disruptions to a maintenance window, set `expireAfter: Never`" in docs
    train, serve = node_pool_of(day_two, "train"), node_pool_of(day_two, "serve")
    assert train["spec"]["template"]["spec"]["expireAfter"] == "Never" and "terminationGracePeriod" not in train["spec"]["template"]["spec"]
    assert {"nodes": "0", "reasons": ["Drifted"], "schedule": "0 12 * * 6", "duration": "156h"} in train["spec"]["disruption"]["budgets"]
    # Inference: no expiry at any hour either (NAP refreshes images by drift); its pods get their wait to leave.
    assert serve["spec"]["template"]["spec"]["expireAfter"] == "Never" and serve["spec"]["template"]["spec"]["terminationGracePeriod"] == "30m"
    assert serve["spec"]["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m",
                                           "budgets": [{"nodes": "1", "reasons": ["Drifted"]}]}
    jsonschema = pytest.importorskip("jsonschema")
    for obj in (train, serve):  # the schema (its CEL rules use Kubernetes' own regex functions, which cel-python lacks)
        jsonschema.validate(obj, crd_schema("karpenter.sh_nodepools.yaml", "v1"))


def test_the_upgrade_lines_are_read_from_the_node_pool_and_speak_of_no_agent_pool(day_two, tmp_path):
    from typer.testing import CliRunner

    from conftest import write_stack
    from gpupools.cli.main import app
    from gpupools.upgrades import nodepool
    from gpupools.upgrades.policy import upgrade_lines, window_of

    config = nap_config([{"name": "train", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 2},
                         {"name": "serve", "instanceType": "Standard_NC8as_T4_v3", "maxNodes": 4, "upgrades": "inference"}])
    stack = validate_stack(config)
    window = window_of(stack)
    sources = nap_sources(window, stack.cluster)
    assert sources == ("new node images (NAP picks them up only Sat 00:00-12:00 UTC (12 h): aksManagedNodeOSUpgradeSchedule), Kubernetes "
                       "patch upgrades (aksManagedAutoUpgradeSchedule) and NodePool or AKSNodeClass changes")
    for pool in stack.pools:
        assert upgrade_lines(stack, pool, "karpenter") == nodepool.node_pool_lines(node_pool_of(day_two, pool.name), window, sources), pool.name
    train = node_pool_of(day_two, "train")
    first, expiry, empty = nodepool.node_pool_lines(train, window, sources)
    assert first.endswith("reach the nodes by drift only Sat 00:00-12:00 UTC (12 h), 1 node at a time; a node running a Job "
                          "(karpenter.sh/do-not-disrupt) is not drifted until the Job ends (no terminationGracePeriod)")
    assert expiry == "nodes never expire (expireAfter Never)"
    assert empty == "an empty node goes after 10m (consolidateAfter); a node running pods is never consolidated (WhenEmpty)"
    # Changing the object changes the lines.
    changed = copy.deepcopy(train)
    changed["spec"]["template"]["spec"]["terminationGracePeriod"] = "1h"
    assert "drift may take a node running a Job too: it drains, and pods still running 1h later, the Job's included, are deleted " \
           "(terminationGracePeriod)" in nodepool.node_pool_lines(changed, window, sources)[0]
    changed["spec"]["template"]["spec"]["expireAfter"] = "720h"
    assert nodepool.node_pool_lines(changed, window, sources)[1].startswith("every node expires 720h (30 days) after it starts (expireAfter), "
                                                                           "at any hour")
    changed["spec"]["disruption"]["budgets"] = [b for b in changed["spec"]["disruption"]["budgets"] if "schedule" not in b]
    assert "reach the nodes by drift at any time, 1 node at a time" in nodepool.node_pool_lines(changed, window, sources)[0]
    # The plan says it, and none of an agent pool's drain timeout or Quarantined nodes.
    result = CliRunner().invoke(app, ["plan", "--config", str(write_stack(tmp_path, example(), "dev-azure-nap"))], terminal_width=400)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Quarantined" not in text and "drain timeout" not in text and "surges" not in text
    assert "nodes never expire (expireAfter Never)" in text and "is not drifted until the Job ends (no terminationGracePeriod)" in text


def test_an_existing_cluster_s_schedules_are_its_own():
    from gpupools.stack.config import Cluster, MaintenanceWindow
    from gpupools.upgrades.policy import Window

    window = Window.of(MaintenanceWindow())
    assert nap_sources(window, Cluster.model_validate({**NAP, "create": False})).startswith(
        "new node images and Kubernetes upgrades (in the existing cluster's own schedules, not changed by gpupools)")


def test_a_nap_wait_is_a_grace_period_not_an_agent_pool_drain_timeout():
    from gpupools.stack.errors import ConfigError
    from gpupools.upgrades.policy import window_of

    pools = [{"name": "serve", "instanceType": "Standard_NC8as_T4_v3", "maxNodes": 2, "upgrades": {"kind": "inference", "waitForJobs": "48h"}}]
    stack = validate_stack(nap_config(pools))
    assert azure_nap.karpenter_disruption(stack.pools[0], window_of(stack))["terminationGracePeriod"] == "2880m"
    with pytest.raises(ConfigError) as caught:  # an agent pool's drain timeout stops at 24 hours
        validate_stack(stack_config("azure", pools=pools))
    assert any(p.path == "pools[0].upgrades.waitForJobs" and "drain timeout" in p.message for p in caught.value.problems)


def test_the_repair_line_says_what_deleting_a_node_does_to_a_job_from_the_node_pool(day_two):
    from gpupools.health.repair import pool_repair
    from gpupools.upgrades import nodepool

    stack = validate_stack(nap_config([{"name": "train", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 2},
                                       {"name": "serve", "instanceType": "Standard_NC8as_T4_v3", "maxNodes": 4, "upgrades": "inference"}]))
    train, serve = plan_pools(stack)
    for plan in (train, serve):
        then = pool_repair(stack, plan, "karpenter").then
        assert then.endswith("a node deleted to replace it (kubectl delete node): " + nodepool.deleted_node_line(node_pool_of(day_two, plan.name)))
    assert pool_repair(stack, train, "karpenter").then.endswith("it drains, and waits for a running Job (karpenter.sh/do-not-disrupt) to end "
                                                                "(no terminationGracePeriod)")
    assert pool_repair(stack, serve, "karpenter").then.endswith("it drains, and pods still running 30 min later, a Job's included, are deleted "
                                                                "(terminationGracePeriod)")
