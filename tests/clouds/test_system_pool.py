"""The system pool a new cluster gets for its add-ons, sized by `cluster.systemPool` on every cloud: each cloud's own
resource fields, its defaults unchanged where the stack says nothing, and each refusal."""

from __future__ import annotations

import functools

import pytest

from conftest import config_problems, plan_of, stack_config
from gpupools.clouds.aws import cluster as eks
from gpupools.clouds.azure import cluster as aks
from gpupools.clouds.gcore import cluster as gcore
from gpupools.clouds.gcp import cluster as gke
from gpupools.core.catalog import load_catalog
from gpupools.pools.planning import plan_pools
from gpupools.validation.stack import validate_stack

CLUSTERS = {"aws": {"name": "ml-test"}, "azure": {"name": "ml-test", "resourceGroup": "rg-ml"},
            "gcp": {"name": "ml-test", "location": "us-central1"}, "gcore": {"name": "ml-test", "keypair": "ml-admins"}}


def cluster_of(cloud: str, system: dict | None = None, **keys):
    cluster = {**CLUSTERS[cloud], **keys, **({"systemPool": system} if system is not None else {})}
    return validate_stack(stack_config(cloud, cluster=cluster)).cluster


def eks_group(cluster) -> dict:
    return eks.system_node_group_args("ml-test", "role", ["subnet-a", "subnet-b"], "lt", "1", cluster)


def aks_pool(cluster) -> dict:
    return aks.managed_cluster_args(cluster)["agent_pool_profiles"][0]


def gke_pool(cluster) -> dict:
    return gke.system_node_pool_args("ml-test", "us-central1", "proj-test", None, cluster)


def gcore_pool(cluster) -> dict:
    return gcore.cluster_params(cluster)["pools"][0]


def test_defaults_are_each_clouds_own_as_before():
    group = eks_group(cluster_of("aws"))
    assert (group["instance_types"], group["scaling_config"]) == (["t3.large"], {"min_size": 1, "max_size": 3, "desired_size": 2})
    pool = aks_pool(cluster_of("azure"))
    assert (pool["vm_size"], pool["count"], pool["min_count"], pool["max_count"]) == ("Standard_D4ds_v5", 2, 1, 3)
    pool = gke_pool(cluster_of("gcp"))
    assert (pool["node_config"]["machine_type"], pool["initial_node_count"], pool["autoscaling"]) == (
        "e2-standard-4", 1, {"total_min_node_count": 1, "total_max_node_count": 3})
    pool = gcore_pool(cluster_of("gcore"))
    assert (pool["flavor_id"], pool["min_node_count"], pool["max_node_count"]) == ("g1-standard-4-8", 1, 3)
    # Without systemPool the arguments are those of a stack that could not say it.
    assert eks_group(cluster_of("aws")) == eks.system_node_group_args("ml-test", "role", ["subnet-a", "subnet-b"], "lt", "1")


def test_each_cloud_takes_the_stacks_machine_type_and_bounds():
    group = eks_group(cluster_of("aws", {"machineType": "m6i.xlarge", "minNodes": 2, "maxNodes": 6}))
    assert (group["instance_types"], group["scaling_config"]) == (["m6i.xlarge"], {"min_size": 2, "max_size": 6, "desired_size": 2})
    pool = aks_pool(cluster_of("azure", {"machineType": "Standard_D8ds_v5", "minNodes": 3, "maxNodes": 5}))
    assert (pool["vm_size"], pool["count"], pool["min_count"], pool["max_count"], pool["mode"]) == ("Standard_D8ds_v5", 3, 3, 5, "System")
    pool = gke_pool(cluster_of("gcp", {"machineType": "n2-standard-8", "minNodes": 2, "maxNodes": 9}))
    assert (pool["node_config"]["machine_type"], pool["initial_node_count"], pool["autoscaling"]) == (
        "n2-standard-8", 2, {"total_min_node_count": 2, "total_max_node_count": 9})
    pool = gcore_pool(cluster_of("gcore", {"machineType": "g1-standard-8-16", "minNodes": 2, "maxNodes": 4}))
    assert (pool["flavor_id"], pool["min_node_count"], pool["max_node_count"], pool["name"]) == ("g1-standard-8-16", 2, 4, "system")


def test_nodes_at_creation_stay_within_the_bounds():
    assert eks_group(cluster_of("aws", {"minNodes": 1, "maxNodes": 1}))["scaling_config"]["desired_size"] == 1
    assert eks_group(cluster_of("aws", {"minNodes": 5}))["scaling_config"] == {"min_size": 5, "max_size": 5, "desired_size": 5}
    assert aks_pool(cluster_of("azure", {"maxNodes": 1}))["count"] == 1
    assert aks_pool(cluster_of("azure", {"minNodes": 4, "maxNodes": 8}))["count"] == 4


def test_gke_auto_provisioning_limits_count_the_system_pools_nodes():
    config = stack_config("gcp", pools=[{"name": "cc", "instanceType": "g2-standard-8", "maxNodes": 3, "provisioning": "compute-class",
                                         "capacity": ["spot", "on-demand"]}], gpuSoftware={"installer": "cloud"},
                          cluster={**CLUSTERS["gcp"], "systemPool": {"maxNodes": 10}})
    stack = validate_stack(config)
    vcpus = max(i.vcpus for i in load_catalog().instances["gcp"].values() if i.vcpus)
    cpu = gke.auto_provisioning_args(plan_pools(stack), None, stack.cluster)["resource_limits"][0]
    assert cpu == {"resource_type": "cpu", "minimum": 0, "maximum": (3 + 10) * vcpus}


@functools.cache
def planned(cloud: str):
    system = {"aws": {"machineType": "m6i.large", "minNodes": 2, "maxNodes": 5},
              "gcp": {"machineType": "n2-standard-8", "minNodes": 2, "maxNodes": 7}}[cloud]
    return plan_of(stack_config(cloud, cluster={**CLUSTERS[cloud], "systemPool": system}))


def test_the_program_creates_the_sized_pool():
    group = planned("aws").get("aws:eks/nodeGroup:NodeGroup", "system").inputs
    assert (group["instanceTypes"], group["scalingConfig"]) == (["m6i.large"], {"minSize": 2, "maxSize": 5, "desiredSize": 2})
    pool = planned("gcp").get("gcp:container/nodePool:NodePool", "system").inputs
    assert (pool["nodeConfig"]["machineType"], pool["autoscaling"]) == ("n2-standard-8", {"totalMinNodeCount": 2, "totalMaxNodeCount": 7})


REFUSALS = {
    "a GPU instance type": ("aws", {"machineType": "g5.2xlarge"}, {}, "cluster.systemPool.machineType",
                            "'g5.2xlarge' is a GPU instance type (gpupools catalog); the system pool runs the cluster's add-ons on CPU nodes: "
                            "pick a CPU instance type such as t3.large"),
    "a VM size on EKS": ("aws", {"machineType": "Standard_D4ds_v5"}, {}, "cluster.systemPool.machineType",
                         "'Standard_D4ds_v5' is not an EC2 instance type such as m6i.large"),
    "a GPU VM size": ("azure", {"machineType": "Standard_NC4as_T4_v3"}, {}, "cluster.systemPool.machineType", "is a GPU VM size"),
    "not a VM size": ("azure", {"machineType": "d4ds_v5"}, {}, "cluster.systemPool.machineType",
                      "'d4ds_v5' is not an Azure VM size such as Standard_D4ds_v5"),
    "a GPU machine type": ("gcp", {"machineType": "g2-standard-8"}, {}, "cluster.systemPool.machineType", "is a GPU machine type"),
    "an EC2 type on GKE": ("gcp", {"machineType": "p4d.24xlarge"}, {}, "cluster.systemPool.machineType", "is not a Compute Engine machine type"),
    "a GPU flavor": ("gcore", {"machineType": "g3-ai-32-192-1500-l40s-48-1"}, {}, "cluster.systemPool.machineType", "is a GPU flavor"),
    "min above max": ("aws", {"minNodes": 5, "maxNodes": 2}, {}, "cluster.systemPool.minNodes", "5 is above maxNodes (2); set minNodes <= maxNodes"),
    "min above the default max": ("azure", {"maxNodes": 2, "minNodes": 3}, {}, "cluster.systemPool.minNodes", "3 is above maxNodes (2)"),
    "no nodes": ("gcp", {"minNodes": 0}, {}, "cluster.systemPool.minNodes", "greater than or equal to 1"),
    "over EKS's cap": ("aws", {"maxNodes": 1001}, {}, "cluster.systemPool.maxNodes", "1001 is more than"),
    "over AKS's pool size": ("azure", {"maxNodes": 1001}, {}, "cluster.systemPool.maxNodes", "1001 is more than an AKS node pool allows (1000)"),
    "over a GKE zone": ("gcp", {"maxNodes": 1001}, {}, "cluster.systemPool.maxNodes", "1001 is more than a GKE node pool in one zone allows (1000)"),
    "over a Gcore pool": ("gcore", {"maxNodes": 201}, {}, "cluster.systemPool.maxNodes", "201 is more than a Gcore pool allows (200)"),
    "an existing cluster": ("aws", {"minNodes": 2}, {"create": False}, "cluster.systemPool", "applies to a new cluster (create: true) only"),
    "EKS Auto Mode": ("aws", {"minNodes": 2}, {"mode": "auto-mode"}, "cluster.systemPool", "EKS Auto Mode runs the cluster's add-ons"),
    "GKE Autopilot": ("gcp", {"maxNodes": 5000}, {"mode": "autopilot"}, "cluster.systemPool", "GKE Autopilot runs the cluster's own workloads"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_refusals(case):
    cloud, system, keys, path, words = REFUSALS[case]
    config = stack_config(cloud, cluster={**CLUSTERS[cloud], **keys, "systemPool": system})
    lines = [str(p) for p in config_problems(config)]
    mine = [line for line in lines if line.startswith(f"error: {path}")]
    assert len(mine) == 1 and mine[0].startswith(f"error: {path}: ") and words in mine[0], lines


def test_bounds_inside_each_clouds_limit_pass():
    for cloud, most in (("aws", 1000), ("azure", 1000), ("gcp", 1000), ("gcore", 200)):
        assert cluster_of(cloud, {"minNodes": most, "maxNodes": most}).system_pool.max_nodes == most
