"""A GKE pool may not be called `default-pool`: it is the name GKE gives the node pool it creates with every Standard
cluster, which the provider deletes right after creating the cluster (terraform-provider-google, which pulumi-gcp
wraps: resource_container_cluster.go, resourceContainerClusterCreate, `remove_default_node_pool` deletes
`<cluster>/nodePools/default-pool`), and which an existing cluster may still run."""

from __future__ import annotations

import pytest

from conftest import config_problems, stack_config
from gpupools.validation.stack import validate_stack


def gke_pool(name: str) -> dict:
    return {"name": name, "instanceType": "g2-standard-8", "maxNodes": 3}


@pytest.mark.parametrize("create", [True, False])
def test_a_gke_pool_named_default_pool_is_one_line_naming_the_field(create):
    cluster = {"name": "ml-test", "location": "us-central1", "create": create}
    problems = config_problems(stack_config("gcp", pools=[gke_pool("default-pool")], cluster=cluster))
    (problem,) = [p for p in problems if p.path == "pools[0].name"]
    assert "default-pool" in problem.message and "remove_default_node_pool" in problem.message
    assert "pick another pool name" in problem.message


@pytest.mark.parametrize("name", ["default-pool2", "default", "my-default-pool", "gpu-pool"])
def test_names_near_default_pool_stay_valid(name):
    validate_stack(stack_config("gcp", pools=[gke_pool(name)]))
