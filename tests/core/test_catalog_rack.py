"""Rack-scale facts of the catalog: which GPUs share NVLink across nodes, and which hosts are arm64."""

from gpupools.core.catalog import load_catalog


def test_gb200_shares_nvlink_across_a_rack_and_b200_does_not():
    catalog = load_catalog()
    assert catalog.gpus["GB200-186GB"].nvlink_domain == 72
    assert catalog.gpus["B200-180GB"].nvlink_domain is None
    assert catalog.instance("aws", "p6-b200.48xlarge").rack_scale is False


def test_instance_types_default_to_x86_hosts():
    assert load_catalog().instance("aws", "p5.48xlarge").arch == "x86_64"
