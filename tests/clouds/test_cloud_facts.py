"""Cloud facts per region and zone: each wrong place is one problem naming the field and what would work."""

from __future__ import annotations

import pytest

from gpupools.core.catalog import load_catalog
from gpupools.core.facts import load_facts
from gpupools.core.sharing import gke_partition_sizes
from gpupools.pools.planning import plan_pools
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

from conftest import stack_config


def problems(config: dict) -> list[tuple[str, str]]:
    try:
        validate_stack(config, environ={})
    except ConfigError as exc:
        return [(p.path, p.message) for p in exc.problems]
    return []


def aws(region: str = "eu-central-1", **pool) -> dict:
    config = stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3, **pool}])
    config["aws:region"] = region
    return config


def test_every_catalog_instance_type_has_region_data():
    facts, catalog = load_facts(), load_catalog()
    # Rows typed from a cloud's own page (UltraServers, A4X, A4X Max, G4) have no generated offering source: named here.
    typed = {(c, n) for c, types in catalog.instances.items() for n, it in types.items()
             if it.source in ("eks-ultraserver", "gce-accelerator-optimized")}
    assert typed == {("aws", "p6e-gb200.36xlarge"), ("gcp", "a4x-highgpu-4g"), ("gcp", "a4x-maxgpu-4g-metal")} | {
        ("gcp", f"g4-standard-{n}") for n in (48, 96, 192, 384)}
    for name in catalog.instances["aws"]:
        if ("aws", name) in typed:
            continue
        assert facts.aws_offerings.get(name), f"aws {name} has no region data in facts_aws.yaml"
    for name in catalog.instances["azure"]:
        assert facts.azure_offerings.get(name), f"azure {name} has no region data in facts_azure.yaml"
    for name, instance in catalog.instances["gcp"].items():
        if instance.accelerator and ("gcp", name) not in typed:
            assert catalog.gcp_zones.get(instance.accelerator), f"gcp {name} ({instance.accelerator}) has no zone data"
    for name in catalog.gcp_accelerators:
        assert catalog.gcp_zones.get(name) and facts.n1_limits.get(name), f"gcp accelerator {name} lacks zones or N1 limits"


def test_unknown_aws_region_names_the_key_and_a_close_region():
    found = problems(aws("eu-centrl-1"))
    assert len(found) == 1 and found[0][0] == "aws:region"
    assert "eu-central-1" in found[0][1]


def test_unknown_aws_zone_letter():
    assert problems(aws(zones=["eu-central-1z"])) == [
        ("pools[0].zones[0]", problems(aws(zones=["eu-central-1z"]))[0][1])]
    assert "letter a to f" in problems(aws(zones=["eu-central-1z"]))[0][1]
    assert problems(aws(zones=["eu-central-1a", "eu-central-1c"])) == []


def test_instance_type_not_offered_in_the_region_lists_where_it_is():
    found = problems(aws(instanceType="p5.48xlarge", sharing={"mode": "mig", "migProfile": "1g.10gb"}))
    assert [p for p, _ in found] == ["pools[0].instanceType"]
    assert "not offered in eu-central-1" in found[0][1] and "us-east-1" in found[0][1]
    assert problems(aws(instanceType="p4de.24xlarge")) == []


def test_more_zones_than_the_region_offers_the_type_in():
    # p4de.24xlarge: two zone IDs of eu-central-1 (euc1-az1, euc1-az2).
    found = problems(aws(instanceType="p4de.24xlarge", zones=["eu-central-1a", "eu-central-1b", "eu-central-1c"]))
    assert [p for p, _ in found] == ["pools[0].zones"]
    assert "euc1-az1, euc1-az2" in found[0][1]


def test_region_the_source_does_not_cover_is_not_judged():
    assert problems(aws("sa-east-1", instanceType="g4dn.xlarge")) == []


def test_azure_size_not_offered_in_the_location():
    config = stack_config("azure", pools=[{"name": "train", "instanceType": "Standard_ND96asr_v4", "maxNodes": 1}])
    config["azure-native:location"] = "northeurope"
    found = problems(config)
    assert [p for p, _ in found] == ["pools[0].instanceType"]
    assert "westeurope" in found[0][1]
    config["azure-native:location"] = "westeurope"
    assert problems(config) == []


def test_azure_zone_without_the_size():
    config = stack_config("azure", pools=[{"name": "ft", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 1, "zones": ["2"]}])
    config["azure-native:location"] = "southcentralus"
    assert problems(config) == [("pools[0].zones[0]", "Standard_NC24ads_A100_v4 is not offered in zone 2 of southcentralus; zones that offer it: 1, 3")]


@pytest.mark.parametrize("profile", ["1g.5gb+me", "1g.10gb", "4g.20gb"])
def test_gke_mig_accepts_only_gke_partition_sizes(profile):
    config = stack_config("gcp", pools=[{"name": "train", "instanceType": "a2-highgpu-1g", "maxNodes": 1,
                                         "sharing": {"mode": "mig", "migProfile": profile}}])
    found = problems(config)
    assert [p for p, _ in found] == ["pools[0].sharing.migProfile"]
    assert "1g.5gb (x7), 2g.10gb (x3), 3g.20gb (x2), 7g.40gb (x1)" in found[0][1]


def test_gke_mig_units_are_what_the_partitioner_makes():
    config = stack_config("gcp", pools=[{"name": "train", "instanceType": "a3-highgpu-8g", "maxNodes": 1,
                                         "sharing": {"mode": "mig", "migProfile": "1g.20gb"}}])
    stack = validate_stack(config, environ={})
    plan = plan_pools(stack)[0]
    assert plan.mechanism.units_per_gpu == gke_partition_sizes("nvidia-h100-80gb")["1g.20gb"] == 4
    assert plan.units_per_node == 32


def test_gke_mig_sizes_are_in_both_upstream_maps():
    # 4g.* sizes are created by GKE's partitioner but not advertised by its device plugin.
    assert "4g.20gb" not in gke_partition_sizes("nvidia-tesla-a100")
    assert gke_partition_sizes("nvidia-h200-141gb")["4g.71gb"] == 1


def test_n1_machine_too_large_for_the_gpu_count():
    config = stack_config("gcp", pools=[{"name": "dev", "instanceType": "n1-standard-32", "gpu": "nvidia-tesla-v100", "gpuCount": 1, "maxNodes": 1}])
    found = problems(config)
    assert [p for p, _ in found] == ["pools[0].gpuCount"]
    assert "at most 12 vCPUs and 78 GB" in found[0][1] and "gpuCount 4" in found[0][1]
    config["gpupools:pools"][0]["gpuCount"] = 4
    assert problems(config) == []


def test_vgpu_memory_is_the_usable_memory_where_a_source_reports_it():
    from gpupools.core.sharing import gpu_memory_problem

    hardware = plan_pools(validate_stack(aws(instanceType="g6e.xlarge"), environ={}))[0].hardware
    assert hardware.gpu.memory_mib == 45776 and "EC2" in hardware.gpu.memory_source
    assert "47Gi (48128 MiB) is more than one L40S GPU" in gpu_memory_problem("47Gi", hardware, None)
    assert gpu_memory_problem("44Gi", hardware, None) is None
    t4 = load_catalog().gpus["T4"]
    assert t4.usable_memory is None and t4.memory_mib == 16 * 1024  # no citable driver figure: the marketing size


def test_azure_location_typo_gets_the_region_it_resembles():
    config = stack_config("azure")
    config["azure-native:location"] = "westeurop"
    assert problems(config) == [("azure-native:location", "'westeurop' is not an Azure region; did you mean westeurope?")]
    config["azure-native:location"] = "chinanorth3"  # a sovereign-cloud region: not in the public price table, left to Azure
    assert problems(config) == []
