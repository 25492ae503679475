"""Rack-scale (NVL72) pool decisions that need no plan: the GKE workload policy an A4X pool names, and the A4X node pool itself."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


def test_the_rack_workload_policy_lives_in_the_stacks_project_and_region():
    """Protects the node pool's placement: it names the policy by name, which GKE looks up in the cluster's project and
    region, so the policy must be created there (the provider's default project when the stack sets none)."""
    from gpupools.clouds.gcp.capacity import rack_resource_policy_args

    pool = SimpleNamespace(name="nvl")
    assert rack_resource_policy_args(pool, "us-central1", "ml-prod") == {
        "name": "gpupools-nvl", "region": "us-central1", "project": "ml-prod",
        "workload_policy": {"type": "HIGH_THROUGHPUT", "accelerator_topology": "1x72"}}
    assert "project" not in rack_resource_policy_args(pool, "us-central1", None)


@pytest.mark.parametrize("machine, hugepages", [("a4x-highgpu-4g", None), ("a4x-maxgpu-4g-metal", 4096)])
def test_an_a4x_node_pool_is_fixed_compact_cos_with_dranet(machine, hugepages):
    """Protects the NVL72 pool as cluster-toolkit v1.95.0 builds it (examples/gke-a4x, gke-a4x-max-bm): COS (GKE's own
    driver; gpupools installs none on these arm64 hosts), the compact placement of its workload policy, GKE's DRA
    networking for the RDMA NICs, a fixed node count without autoscaling, and A4X Max's 2 MiB huge pages."""
    from gpupools.clouds.gcp.pools import rack_node_pool_args

    pool = SimpleNamespace(name="nvl", instance_type=machine, max_nodes=18)
    args = rack_node_pool_args(pool, {"initial_node_count": 0, "autoscaling": {"max_node_count": 18},
                                      "node_config": {"labels": {"gpupools.io/pool": "nvl"}, "image_type": "UBUNTU_CONTAINERD"}})
    assert args["node_config"]["image_type"] == "COS_CONTAINERD"
    assert args["node_config"]["labels"] == {"gpupools.io/pool": "nvl", "cloud.google.com/gke-networking-dra-driver": "true"}
    assert args["placement_policy"] == {"type": "COMPACT", "policy_name": "gpupools-nvl"}
    assert args["network_config"] == {"accelerator_network_profile": "auto"}
    assert args["node_count"] == 18 and "autoscaling" not in args and "initial_node_count" not in args
    pages = args["node_config"].get("linux_node_config", {}).get("hugepages_config", {}).get("hugepage_size2m")
    assert pages == hugepages
