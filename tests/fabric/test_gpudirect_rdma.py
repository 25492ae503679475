"""AKS InfiniBand pools: GPUDirect RDMA through the GPU Operator, as Azure's guidance sets it, and the RDMA device known to
the AKS cluster autoscaler, so a multi-node job starts its nodes from zero.

Sources: Azure/aks-rdma-infiniband @ 700dabb configs/values/gpu-operator/values.yaml (`driver.rdma.enabled: true`) and
website/docs/configurations/02-gpu-drivers.md; NVIDIA/gpu-operator v26.7.0 (the pinned chart in tests/charts/gpu-operator,
its NVIDIADriver CRD and templates); kubernetes/autoscaler cluster-autoscaler/cloudprovider/azure/azure_template.go
(extractAllocatableResourcesFromScaleSet).
"""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from charts.chartrender import chart_dir, need_helm, render
from conftest import ROOT, crd_rule_failures, has_path, needs_reference, plan_of, stack_config, value_paths
from gpupools.clouds import azure
from gpupools.pools.planning import plan_pools
from gpupools.stack.values import read_stack_file
from gpupools.validation.stack import validate_stack

ND = {"name": "nd", "instanceType": "Standard_ND96isr_H100_v5", "maxNodes": 2}
T4 = {"name": "nb", "instanceType": "Standard_NC8as_T4_v3", "maxNodes": 2}
NVIDIA_DRIVER_CRD = chart_dir("gpu-operator") / "crds" / "nvidia.com_nvidiadrivers.yaml"


def operator_release(plan) -> dict:
    return plan.get("kubernetes:helm.sh/v3:Release", "gpu-operator").inputs


def rendered(plan) -> list[dict]:
    need_helm()
    release = operator_release(plan)
    return render("gpu-operator", release["values"], release["name"], release["namespace"])


def nvidia_driver_schema() -> dict:
    crd = yaml.safe_load(NVIDIA_DRIVER_CRD.read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")


@pytest.fixture(scope="module")
def only_infiniband():
    return plan_of(stack_config("azure", pools=[ND, {**ND, "name": "nd2"}]))


@pytest.fixture(scope="module")
def mixed():
    return plan_of(stack_config("azure", pools=[ND, T4]))


def test_only_infiniband_pools_get_azures_cluster_wide_setting(only_infiniband):
    values = operator_release(only_infiniband)["values"]
    assert values["driver"]["rdma"] == {"enabled": True, "useHostMofed": False}
    assert "nvidiaDriverCRD" not in values["driver"] and "extraObjects" not in values
    (policy,) = [o for o in rendered(only_infiniband) if o["kind"] == "ClusterPolicy"]
    assert policy["spec"]["driver"]["rdma"] == {"enabled": True, "useHostMofed": False}


def test_beside_other_gpu_pools_rdma_goes_per_pool_through_nvidia_drivers(mixed):
    """A ClusterPolicy-wide driver.rdma would put nvidia-peermem on the T4 nodes too, which have no DOCA driver."""
    values = operator_release(mixed)["values"]
    assert "rdma" not in values["driver"]
    assert values["driver"]["nvidiaDriverCRD"] == {"enabled": True, "deployDefaultCR": True}
    objects = rendered(mixed)
    (policy,) = [o for o in objects if o["kind"] == "ClusterPolicy"]
    assert policy["spec"]["driver"]["useNvidiaDriverCRD"] is True
    drivers = {o["metadata"]["name"]: o for o in objects if o["kind"] == "NVIDIADriver"}
    assert set(drivers) == {"default", "gpupools-rdma-nd"}
    default, ib = drivers["default"]["spec"], drivers["gpupools-rdma-nd"]["spec"]
    assert default["default"] is True and default["rdma"]["enabled"] is False
    assert ib["default"] is False and ib["rdma"] == {"enabled": True, "useHostMofed": False}
    assert ib["nodeSelector"] == {"gpupools.io/pool": "nd"}
    # The same driver as the default one, only the node selector and RDMA differ.
    same = {k: v for k, v in default.items() if k not in ("default", "rdma", "gdrcopy")}
    assert {k: v for k, v in ib.items() if k in same} == same


def test_nvidia_drivers_are_valid_against_the_pinned_crd(mixed):
    schema = nvidia_driver_schema()
    drivers = [o for o in rendered(mixed) if o["kind"] == "NVIDIADriver"]
    assert len(drivers) == 2
    for driver in drivers:
        jsonschema.validate(driver, schema)
        assert crd_rule_failures(driver, schema) == []


def test_the_crd_rules_refuse_a_default_driver_with_a_node_selector(mixed):
    schema = nvidia_driver_schema()
    (driver,) = [o for o in rendered(mixed) if o["kind"] == "NVIDIADriver" and o["metadata"]["name"] != "default"]
    driver["spec"]["default"] = True
    assert crd_rule_failures(driver, schema)


@pytest.mark.parametrize("fixture", ["only_infiniband", "mixed"])
def test_rdma_values_are_keys_of_the_pinned_chart(fixture, request):
    ref = needs_reference()
    upstream = yaml.safe_load((ref / "gpu-operator" / "values.yaml").read_text())
    values = operator_release(request.getfixturevalue(fixture))["values"]
    assert [p for p in value_paths(values, free_form=("extraObjects", "additionalLabels")) if not has_path(upstream, p)] == []
    assert has_path(upstream, ("extraObjects",))


def test_no_rdma_without_infiniband_pools_or_without_the_operators_driver():
    plain = operator_release(plan_of(stack_config("azure", pools=[T4])))["values"]
    assert {k: v for k, v in plain["driver"].items() if k != "upgradePolicy"} == {"enabled": True}  # upgrades: tests/upgrades
    # AKS installs the driver itself with the device plugin installer: nothing here loads nvidia-peermem, and the plan says so.
    stack = validate_stack(stack_config("azure", pools=[ND], gpuSoftware={"installer": "device-plugin"}))
    from gpupools.fabric.software import gpudirect_rdma_line

    assert gpudirect_rdma_line(stack, plan_pools(stack), "nd").startswith("GPUDirect RDMA: off:")
    eks = operator_release(plan_of(stack_config("aws", pools=[{"name": "p4", "instanceType": "p4d.24xlarge", "maxNodes": 2,
                                                                "zones": ["eu-central-1a"]}])))["values"]
    assert "rdma" not in eks["driver"] and "extraObjects" not in eks


def test_the_plan_says_how_each_infiniband_pool_gets_gpudirect_rdma(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    out = CliRunner().invoke(app, ["plan", "--stack", "dev-azure"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    assert "GPUDirect RDMA: the GPU Operator loads nvidia-peermem on the DOCA driver here only (NVIDIADriver gpupools-rdma-pretrain" in flat
    only = CliRunner().invoke(app, ["plan", "--config", str(stack_file(stack_config("azure", pools=[ND])))])
    assert "(driver.rdma.enabled, as Azure's aks-rdma-infiniband values set it)" in " ".join(only.output.split())


# --------------------------------------------------------------------------------------------------------------------
# The AKS autoscaler and the RDMA device


def upstream_resource_name(tag: str) -> str:
    """cluster-autoscaler azure_template.go, extractAllocatableResourcesFromScaleSet: after the prefix, `_` and `~2` are `/`."""
    return tag.split(azure.SCALE_SET_RESOURCE_TAG, 1)[1].replace("_", "/").replace("~2", "/")


def test_infiniband_agent_pools_tell_the_autoscaler_their_rdma_device(mixed):
    pools = {r.name: r.inputs for r in mixed.of_type("azure-native:containerservice:AgentPool")}
    tags = {k: v for k, v in (pools["nd"].get("tags") or {}).items() if k.startswith(azure.SCALE_SET_RESOURCE_TAG)}
    assert {upstream_resource_name(k): v for k, v in tags.items()} == {azure.FABRIC_RESOURCE: "63"}
    assert not any(k.startswith(azure.SCALE_SET_RESOURCE_TAG) for k in (pools["nb"].get("tags") or {}))


def test_the_pods_rdma_resource_is_the_one_the_plugin_and_the_tags_spell():
    from gpupools.fabric.software import rdma_shared_config

    (entry,) = rdma_shared_config(azure.FABRIC_RESOURCE)["configList"]
    assert "rdma/" + entry["resourceName"] == azure.FABRIC_RESOURCE
    # The plugin takes [a-zA-Z0-9_]+ (k8s-rdma-shared-dev-plugin validResourceName); the tags turn `_` into `/`.
    assert entry["resourceName"].isalnum()


def test_a_resource_name_the_tags_cannot_spell_is_refused():
    """Azure's own name, `rdma/shared_ib`, would come back from the tag as `rdma/shared/ib`."""
    with pytest.raises(ValueError, match="cannot be spelled"):
        azure.autoscaler_resource_tags({"rdma/shared_ib": 63})
    assert upstream_resource_name(azure.SCALE_SET_RESOURCE_TAG + "rdma_shared_ib") == "rdma/shared/ib"


def test_dev_azure_has_an_infiniband_pool_whose_two_node_gang_lands():
    from gpupools.landing.check import landing_check

    stack = validate_stack(read_stack_file(ROOT / "stacks" / "Pulumi.dev-azure.yaml"))
    verdicts = {(v.pool, v.shape): v for v in landing_check(stack)}
    gang = verdicts[("pretrain", "gang")]
    assert gang.lands, gang.failing
    node = next(s for s in gang.steps if s.name == "node")
    assert "rdma/sharedib x 63" in node.detail


def test_without_the_scale_set_tag_the_gang_never_starts_a_node(monkeypatch):
    """The AKS autoscaler builds an empty pool's node from its VM size: a pod asking for the RDMA device fits none."""
    from gpupools.autoscaling import templates
    from gpupools.landing.check import landing_check

    monkeypatch.setattr(templates, "autoscaler_fabric_resources", lambda cloud, plan: {})
    stack = validate_stack(read_stack_file(ROOT / "stacks" / "Pulumi.dev-azure.yaml"))
    gang = next(v for v in landing_check(stack) if (v.pool, v.shape) == ("pretrain", "gang"))
    assert not gang.lands and gang.failing.name == "node"
    assert "expects no rdma/sharedib on a new node" in gang.failing.detail


def test_the_landing_check_reads_the_nic_policy_the_component_creates(mixed):
    from gpupools.fabric.plan import plan_fabrics
    from gpupools.fabric.software import nic_cluster_policy, nic_policy_tolerations
    from gpupools.landing.check import cluster_of

    (created,) = mixed.of_type("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")
    stack = validate_stack(stack_config("azure", pools=[ND, T4]))
    plans = plan_pools(stack)
    fabrics = list(plan_fabrics(stack, plans).values())
    assert nic_cluster_policy(fabrics, nic_policy_tolerations(stack.target, plans, fabrics))["spec"] == created.inputs["spec"]
    agent = next(a for a in cluster_of(stack).agents if a.name == "RDMA shared device plugin")
    assert agent.pod["tolerations"] == created.inputs["spec"]["tolerations"]
