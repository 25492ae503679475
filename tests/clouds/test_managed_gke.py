"""GKE ComputeClass pools: the object against the schema GKE serves, the fallback order from the capacity list, what
the class refuses, Kueue flavors and Jobs that select the class, and the landing check from zero."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from conftest import ROOT, crd_rule_failures, needs_reference, plan_of, stack_config, config_problems as problems_of
from gpupools.clouds import gcp
from gpupools.core.catalog import load_catalog
from gpupools.landing.check import cluster_of, land, landing_check
from gpupools.pools.planning import plan_pools
from gpupools.queues import kueue
from gpupools.validation.stack import validate_stack

COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"


def schema() -> dict:
    return json.loads((needs_reference() / "gke" / "computeclass_v1.schema.json").read_text())


def fallback_config() -> dict:
    return yaml.safe_load((ROOT / "stacks" / "Pulumi.dev-gcp-fallback.yaml").read_text())["config"]


def classed(**fields) -> dict:
    return {"name": "train", "instanceType": "a3-highgpu-8g", "maxNodes": 4, "provisioning": "compute-class", **fields}


def test_every_compute_class_of_the_example_is_valid_for_gke():
    """Schema (types, enums, no unknown field) and every CEL rule of the schema GKE serves."""
    jsonschema = pytest.importorskip("jsonschema")
    plan = plan_of(fallback_config(), "dev-gcp-fallback")
    classes = plan.of_type(COMPUTE_CLASS)
    assert sorted(r.name for r in classes) == ["computeclass-gpupools-h100", "computeclass-gpupools-infer"]
    # The classes' nodes, and every node auto-provisioning makes, run as the node service account the node pools have.
    account = plan.get("gcp:container/nodePool:NodePool", "system").inputs["nodeConfig"]["serviceAccount"]
    (cluster,) = plan.of_type("gcp:container/cluster:Cluster")
    assert account and cluster.inputs["clusterAutoscaling"]["autoProvisioningDefaults"]["serviceAccount"] == account
    for resource in classes:
        obj = {k: resource.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        jsonschema.validate(obj, schema())
        assert crd_rule_failures(obj, schema()) == []
        assert obj["spec"]["nodePoolConfig"]["serviceAccount"] == account


def test_the_schema_check_catches_what_gke_refuses():
    jsonschema = pytest.importorskip("jsonschema")
    stack = validate_stack(fallback_config())
    obj = gcp.compute_class(plan_pools(stack)[0], stack.cluster.location)
    wrong = copy.deepcopy(obj)
    wrong["spec"]["priorities"][1]["spot"] = True  # flex-start and Spot in one priority
    assert any("Flex Start provisioning model is incompatible with Spot" in f for f in crd_rule_failures(wrong, schema()))
    wrong = copy.deepcopy(obj)
    wrong["spec"]["priorities"][0]["reservations"]["affinity"] = "SPECIFIC"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, schema())


def test_the_capacity_list_becomes_the_priorities_in_order():
    stack = validate_stack(fallback_config())
    h100, infer = plan_pools(stack)
    spec = gcp.compute_class(h100, "us-central1")["spec"]
    gpu = {"type": "nvidia-h100-80gb", "count": 8, "driverVersion": "latest"}
    # The reservation pins its own priority to its zone; the others may start in any zone of the region with H100s.
    region = {"zones": load_catalog().gcp_zones_in("nvidia-h100-80gb", "us-central1")}
    assert len(region["zones"]) > 1
    assert spec["priorities"] == [
        {"machineType": "a3-highgpu-8g", "gpu": gpu, "reservations": {"affinity": "Specific", "specific": [{"name": "h100-reserved"}]},
         "spot": False, "location": {"zones": ["us-central1-a"]}},
        {"machineType": "a3-highgpu-8g", "gpu": gpu, "flexStart": {"enabled": True}, "maxRunDurationSeconds": 86400, "location": region},
        {"machineType": "a3-highgpu-8g", "gpu": gpu, "spot": True, "location": region},
        {"machineType": "a3-highgpu-8g", "gpu": gpu, "spot": False, "location": region},
    ]
    assert spec["whenUnsatisfiable"] == "DoNotScaleUp" and spec["nodePoolAutoCreation"] == {"enabled": True}
    assert spec["nodePoolConfig"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert spec["nodePoolConfig"]["nodeLabels"] == {"gpupools.io/pool": "h100", "gpupools.io/gpu": "H100-80GB"}
    assert "activeMigration" not in spec  # running GPU jobs are never moved back up the list
    shared = gcp.compute_class(infer, "us-central1")["spec"]["priorities"]
    assert [p["spot"] for p in shared] == [True, False]
    assert all(p["gpu"]["gpuSharing"] == {"sharingStrategy": "TIME_SHARING", "maxSharedClientsPerGPU": 4} for p in shared)


def test_a_shared_reservation_names_its_project_and_any_reservation_is_best_effort():
    config = stack_config("gcp", pools=[classed(capacity=[
        {"reservation": {"id": "projects/other-proj/reservations/h100", "zones": ["us-central1-b"], "nodes": 1}}, "any-reservation", "on-demand"])])
    plan = plan_pools(validate_stack(config))[0]
    first, second, _ = gcp.compute_class(plan, "us-central1")["spec"]["priorities"]
    assert first["reservations"] == {"affinity": "Specific", "specific": [{"name": "h100", "project": "other-proj"}]}
    assert first["location"] == {"zones": ["us-central1-b"]}
    assert second["reservations"] == {"affinity": "AnyBestEffort"}


def test_a_mig_partition_and_the_boot_disk_go_to_every_priority():
    config = stack_config("gcp", pools=[{"name": "a100", "instanceType": "a2-highgpu-1g", "maxNodes": 2, "provisioning": "compute-class",
                                         "diskSizeGb": 300, "capacity": ["spot", "on-demand"], "sharing": {"mode": "mig", "migProfile": "2g.10gb"}}])
    plan = plan_pools(validate_stack(config))[0]
    for priority in gcp.compute_class(plan, "us-central1")["spec"]["priorities"]:
        assert priority["gpu"]["gpuSharing"] == {"gpuPartitionSize": "2g.10gb"} and priority["storage"] == {"bootDiskSize": 300}


@pytest.mark.parametrize("pool, path, words", [
    (classed(capacity=["spot", {"queued": {}}]), "pools[0].capacity[1]", "no ComputeClass priority"),
    (classed(capacity=["spot"], minNodes=1), "pools[0].minNodes", "a ComputeClass keeps no nodes"),
    (classed(capacity=["spot"], fabric="on", zones=["us-central1-a"]), "pools[0].fabric", "compute-class pool gets no GPUDirect"),
    ({"name": "t4", "instanceType": "n1-standard-8", "gpu": "T4", "maxNodes": 2, "provisioning": "compute-class",
      "capacity": [{"flexStart": {}}, "on-demand"]}, "pools[0].capacity[0]", "flex-start does not serve n1-standard-8"),
    ({"name": "t4", "instanceType": "n1-standard-8", "gpu": "T4", "maxNodes": 2, "capacity": [{"flexStart": {}}]},
     "pools[0].capacity[0]", "flex-start does not serve"),
    ({"name": "l4", "instanceType": "g2-standard-8", "maxNodes": 2, "capacity": ["spot", "on-demand"]}, "pools[0].capacity",
     "set provisioning: compute-class"),
])
def test_what_a_compute_class_cannot_take_is_one_line_naming_the_field(pool, path, words):
    problems = problems_of(stack_config("gcp", pools=[pool]))
    assert any(p.path == path and words in p.message for p in problems), problems


def test_the_gpu_operator_cannot_serve_a_compute_class():
    problems = problems_of(stack_config("gcp", pools=[classed(capacity=["spot"])], gpuSoftware={"installer": "gpu-operator"}))
    assert any(p.path == "pools[0].provisioning" and "driverVersion takes default or latest only" in p.message for p in problems)


def test_flex_start_in_a_class_needs_a_cluster_version_that_has_it():
    cluster = {"name": "ml-test", "location": "us-central1", "create": False}
    config = stack_config("gcp", pools=[classed(capacity=[{"flexStart": {}}, "on-demand"])], cluster={**cluster, "kubernetesVersion": "1.32"})
    assert any(p.path == "cluster.kubernetesVersion" and "flex-start needs GKE 1.33" in p.message for p in problems_of(config))
    validate_stack(stack_config("gcp", pools=[classed(capacity=[{"flexStart": {}}, "on-demand"])], cluster={**cluster, "kubernetesVersion": "1.33"}))


@pytest.mark.parametrize("cloud", ["aws", "azure"])
def test_provisioning_is_a_gke_key(cloud):
    config = stack_config(cloud)
    config["gpupools:pools"][0]["provisioning"] = "compute-class"
    assert any(p.path == "pools[0].provisioning" and "applies to gcp only" in p.message for p in problems_of(config))


def test_a_node_pool_is_still_the_default():
    stack = validate_stack(stack_config("gcp"))
    plan = plan_pools(stack)[0]
    assert plan.selector == {} and plan.node_selector == {"gpupools.io/pool": "infer"}
    assert gcp.auto_provisioning_args([plan]) is None


def test_flavors_and_jobs_select_the_class():
    stack = validate_stack(fallback_config())
    plans = plan_pools(stack)
    flavors = kueue.pool_flavors(stack, plans[0], "cloud")
    assert [f.node_labels for f in flavors] == [{"gpupools.io/pool": "h100", "cloud.google.com/compute-class": "gpupools-h100"}]
    from gpupools.landing.jobs import job_manifest

    job = job_manifest(stack, plans[1], "img")
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"gpupools.io/pool": "infer", "cloud.google.com/compute-class": "gpupools-infer"}


def test_node_auto_provisioning_is_limited_to_the_classes_gpus():
    stack = validate_stack(fallback_config())
    args = gcp.auto_provisioning_args(plan_pools(stack))
    limits = {r["resource_type"]: r["maximum"] for r in args["resource_limits"]}
    assert args["enabled"] is True
    assert limits["nvidia-h100-80gb"] == 8 and limits["nvidia-l4"] == 6
    # cpu and memory never bind before the GPU limits: every node at the largest GPU machine, and the system pool
    assert limits["cpu"] >= (1 + 6 + 3) * 224 and limits["memory"] >= (1 + 6 + 3) * 3968


def test_every_team_job_lands_on_a_class_from_zero():
    verdicts = landing_check(validate_stack(fallback_config()))
    assert {(v.team, v.pool, v.shape) for v in verdicts} == {("research", "h100", "unit"), ("research", "h100", "node"),
                                                             ("research", "infer", "unit"), ("serving", "infer", "unit")}
    assert all(v.lands for v in verdicts), [v.failing for v in verdicts]
    node = next(s for s in verdicts[0].steps if s.name == "node")
    assert "GKE node auto-provisioning starts it from zero (ComputeClass gpupools-h100 (reserved > flex-start > spot > on-demand))" in node.detail


def test_a_pod_that_does_not_name_the_class_gets_no_node():
    cluster = cluster_of(validate_stack(fallback_config()))
    plan = cluster.plans[1]
    from gpupools.landing.jobs import job_manifest

    job = job_manifest(cluster.stack, plan, "img")
    del job["spec"]["template"]["spec"]["nodeSelector"]["cloud.google.com/compute-class"]
    verdict = land(cluster, None, plan, "unit", job)
    assert not verdict.lands and verdict.failing.name == "node"
    assert "starts a node only for pods that select cloud.google.com/compute-class=gpupools-infer" in verdict.failing.detail


def test_the_plan_lists_the_priorities_and_what_a_sharing_change_does():
    stack = validate_stack(fallback_config())
    h100 = plan_pools(stack)[0].pool
    lines = stack.target.capacity_lines(h100, "cloud")
    assert "whenUnsatisfiable: DoNotScaleUp" in lines[0]
    assert lines[1:] == ["priority 1: reservation h100-reserved (1 node): reservations Specific h100-reserved in us-central1-a",
                         "priority 2: flex-start (nodes live at most 1d): flexStart (Dynamic Workload Scheduler; nodes removed after 1d)",
                         "priority 3: spot: Spot VMs", "priority 4: on-demand: standard VMs"]
    from gpupools.cli.replacement import sharing_change_note

    assert sharing_change_note(stack.target, "cloud", None, False, compute_class=True).startswith("a sharing change updates the ComputeClass in place")
    assert "REPLACES this node pool" in sharing_change_note(stack.target, "cloud", None, False, compute_class=False)


# --------------------------------------------------------------------------------------------------------------------
# Upgrades and repair of a class's node pools: each plan line from the object GKE takes it from


def _pool_lines(stack, name: str) -> tuple[list[str], str]:
    """(upgrade lines, repair line) the plan prints for one pool."""
    from gpupools.health.repair import pool_repair
    from gpupools.upgrades.policy import upgrade_lines

    plan = next(p for p in plan_pools(stack) if p.name == name)
    return upgrade_lines(stack, plan.pool, "cloud"), pool_repair(stack, plan, "cloud").then


def test_the_classes_upgrade_by_the_cluster_s_node_auto_provisioning_default():
    # GKE takes no upgrade strategy per ComputeClass: the cluster's autoProvisioningDefaults.upgradeSettings serve them all.
    plan = plan_of(fallback_config(), "dev-gcp-fallback")
    (cluster,) = plan.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["clusterAutoscaling"]["autoProvisioningDefaults"]["upgradeSettings"] == {
        "strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}
    stack = validate_stack(fallback_config())
    infer, _ = _pool_lines(stack, "infer")
    assert infer[1] == ("ComputeClass node pools: surge strategy: drains 1 node at a time, no surge; GKE respects PodDisruptionBudgets for "
                        "up to an hour while draining a node, then evicts (the cluster's node auto-provisioning default, "
                        "autoProvisioningDefaults.upgradeSettings: GKE takes no upgrade strategy per class)")
    assert len(infer) == 2 and not any("blue-green" in line for line in infer)
    # The flex-start priority's nodes are GKE's short-lived kind; the class's other priorities take the default.
    h100, _ = _pool_lines(stack, "h100")
    assert h100[1] == infer[1] and h100[2].startswith("flex-start priority: GKE's short-lived upgrades")
    # A cluster gpupools does not create keeps its own default, and the plan says so.
    existing = fallback_config()
    existing["gpupools:cluster"] = {**existing["gpupools:cluster"], "create": False}
    assert _pool_lines(validate_stack(existing), "infer")[0][1].startswith("ComputeClass node pools: the existing cluster's node "
                                                                            "auto-provisioning default upgradeSettings (not changed")


def test_the_class_upgrade_line_follows_the_cluster_setting(monkeypatch):
    monkeypatch.setattr(gcp.upgrades, "COMPUTE_CLASS_UPGRADES", {"strategy": "SURGE", "max_surge": 2, "max_unavailable": 0})
    stack = validate_stack(fallback_config())
    assert gcp.auto_provisioning_args(plan_pools(stack))["auto_provisioning_defaults"]["upgrade_settings"] == {
        "strategy": "SURGE", "max_surge": 2, "max_unavailable": 0}
    assert _pool_lines(stack, "infer")[0][1].startswith("ComputeClass node pools: surge strategy: surges 2 new nodes before draining one old;")
    monkeypatch.setattr(gcp.upgrades, "COMPUTE_CLASS_UPGRADES", {"strategy": "BLUE_GREEN"})
    assert _pool_lines(stack, "infer")[0][1].startswith("ComputeClass node pools: standard blue-green: a second set of nodes")


def test_a_class_pool_s_own_surge_settings_are_refused():
    problems = problems_of(stack_config("gcp", pools=[classed(capacity=["spot", "on-demand"], upgrades={"kind": "inference", "maxSurge": 1})]))
    assert [str(p) for p in problems] == [(
        "error: pools[0].upgrades.maxSurge: 1, but GKE takes no upgrade settings per ComputeClass: every class's node pools take the "
        "cluster's node auto-provisioning default (surge strategy: drains 1 node at a time, no surge); drop maxSurge, or make the pool "
        "a node-pool")]
    validate_stack(stack_config("gcp", pools=[classed(capacity=["spot", "on-demand"], upgrades="inference")]))
    # A node pool keeps its own.
    validate_stack(stack_config("gcp", pools=[{"name": "p", "instanceType": "g2-standard-8", "maxNodes": 2,
                                               "upgrades": {"kind": "inference", "maxSurge": 1}}]))


def test_the_class_repair_line_is_the_class_s_own_setting(monkeypatch):
    stack = validate_stack(fallback_config())
    # h100 lists flex-start: the class still tells GKE to repair the node pools it creates, and the plan says so.
    (h100,) = [p for p in plan_pools(stack) if p.name == "h100"]
    assert gcp.compute_class(h100, None)["spec"]["nodePoolConfig"]["autoRepair"] is True
    assert _pool_lines(stack, "h100")[1].startswith("GKE auto-repair (the ComputeClass's nodePoolConfig.autoRepair: true")
    off = fallback_config()
    off["gpupools:pools"][0]["autoRepair"] = False
    assert _pool_lines(validate_stack(off), "h100")[1] == "nothing: the ComputeClass sets nodePoolConfig.autoRepair: false; replace the node by hand"
    # The line reads the object: a class that turned repair off would be said to, whatever the pool's setting.
    real = gcp.compute_class

    def without_repair(plan, location, service_account=None):
        obj = real(plan, location, service_account)
        obj["spec"]["nodePoolConfig"]["autoRepair"] = False
        return obj
    monkeypatch.setattr(gcp.health, "compute_class", without_repair)
    assert _pool_lines(stack, "h100")[1].startswith("nothing: the ComputeClass sets nodePoolConfig.autoRepair: false")
