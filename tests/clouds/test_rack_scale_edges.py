"""Rack-scale (NVL72) pool decisions that need no plan: the GKE workload policy an A4X pool's compact placement names."""

from __future__ import annotations

from types import SimpleNamespace


def test_the_rack_workload_policy_lives_in_the_stacks_project_and_region():
    """Protects the node pool's placement: it names the policy by name, which GKE looks up in the cluster's project and
    region, so the policy must be created there (the provider's default project when the stack sets none)."""
    from gpupools.clouds.gcp.capacity import rack_resource_policy_args

    pool = SimpleNamespace(name="nvl")
    assert rack_resource_policy_args(pool, "us-central1", "ml-prod") == {
        "name": "gpupools-nvl", "region": "us-central1", "project": "ml-prod",
        "workload_policy": {"type": "HIGH_THROUGHPUT", "accelerator_topology": "1x72"}}
    assert "project" not in rack_resource_policy_args(pool, "us-central1", None)
