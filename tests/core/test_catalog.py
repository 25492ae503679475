"""The catalog: complete for the families we promise, consistent, and true to NVIDIA's MIG tables."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import yaml

from gpupools.core.catalog import load_catalog

from conftest import needs_reference

DATA = Path(__file__).parent / "data"
KARPENTER_SHAPES = DATA / "karpenter-v1.14.1-nvidia-instance-shapes.tsv"
SKYPILOT_GCP = DATA / "skypilot-gcp-vms-extract.csv"

REQUIRED_FAMILIES = {
    "aws": ["g4dn.", "g5.", "g6.", "g6e.", "g7e.", "p4d.", "p4de.", "p5.", "p5e.", "p5en.", "p6-b200.", "p6-b300."],
    "azure": ["_T4_v3", "ads_A100_v4", "Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4", "_H100_v5", "Standard_ND96isr_H100_v5",
              "Standard_ND96isr_H200_v5"],
    "gcp": ["g2-", "a2-highgpu-", "a2-ultragpu-", "a3-highgpu-1g", "a3-highgpu-8g", "a3-edgegpu-", "a3-megagpu-", "a3-ultragpu-", "a4-highgpu-", "n1-"],
}
# Karpenter's GPU names (label karpenter.k8s.aws/instance-gpu-name) for the catalog's models.
KARPENTER_GPU_NAMES = {"T4": "t4", "A10G": "a10g", "L4": "l4", "L40S": "l40s", "A100-40GB": "a100", "A100-80GB": "a100", "H100-80GB": "h100",
                       "H200-141GB": "h200", "B200-180GB": "b200", "B300-269GB": "b300", "RTX-PRO-6000-96GB": "rtx-pro-server-6000"}
# SkyPilot's accelerator names for the GKE accelerator types.
SKYPILOT_GPUS = {"nvidia-l4": "L4", "nvidia-tesla-a100": "A100", "nvidia-a100-80gb": "A100-80GB", "nvidia-h100-80gb": "H100",
                 "nvidia-h100-mega-80gb": "H100-MEGA", "nvidia-h200-141gb": "H200", "nvidia-b200": "B200"}


def karpenter_shapes() -> dict[str, dict]:
    rows = {}
    for line in KARPENTER_SHAPES.read_text().splitlines():
        if line.startswith("#"):
            continue
        name, gpu, gpu_mib, vcpus, mib, arch, price = line.split("\t")
        rows[name] = {"gpu": gpu, "gpu_mib": int(gpu_mib), "vcpus": int(vcpus), "mib": int(mib), "arch": arch,
                      "price": float(price) if price else None}
    return rows


def skypilot_gcp_rows() -> list[dict]:
    lines = [line for line in SKYPILOT_GCP.read_text().splitlines() if not line.startswith("#")]
    return list(csv.DictReader(lines))


@pytest.mark.parametrize("cloud", ["aws", "azure", "gcp"])
def test_promised_families_are_present(cloud):
    names = list(load_catalog().instances[cloud])
    for fragment in REQUIRED_FAMILIES[cloud]:
        assert any(fragment in n for n in names), fragment


def test_n1_accelerators():
    acc = load_catalog().gcp_accelerators
    assert {a.gpu.name for a in acc.values()} == {"T4", "V100-16GB", "P100-16GB"}


def test_entries_are_consistent():
    catalog = load_catalog()
    for cloud, types in catalog.instances.items():
        for it in types.values():
            # Gcore, the rack-scale types (Capacity Blocks, reservations) and G4 (in no generated price source): no list price
            if it.source in ("gcore-docs", "eks-ultraserver", "gce-accelerator-optimized"):
                assert it.price is None and it.price_read == "unpriced", it.name
            else:
                assert it.price > 0 and re.fullmatch(r"20\d\d-\d\d", it.price_read), it.name
            if it.gpu is not None:
                assert it.gpus >= 1
            if cloud == "gcp" and it.gpu is not None:
                assert it.accelerator and it.accelerator.startswith("nvidia-")
    for gpu in catalog.gpus.values():
        assert gpu.device_names, gpu.name
        for profile, count in gpu.mig_profiles.items():
            assert re.fullmatch(r"\d+g\.\d+gb(\+me|-me)?", profile) and 1 <= count <= 7


def test_gpu_counts_follow_the_machine_type_names():
    catalog = load_catalog()
    for name, it in catalog.instances["gcp"].items():
        m = re.fullmatch(r"a[23]-\w+-(\d+)g", name)
        if m:
            assert it.gpus == int(m.group(1)), name


def test_device_name_lookup_for_dcgm_model_names():
    catalog = load_catalog()
    assert catalog.gpu_by_device_name("NVIDIA A100-SXM4-40GB").name == "A100-40GB"
    assert catalog.gpu_by_device_name("Tesla T4").name == "T4"
    assert catalog.gpu_by_device_name("NVIDIA GeForce RTX 4090") is None


def test_mig_profiles_match_nvidias_tables():
    ref = needs_reference()
    table = yaml.safe_load((ref / "mig-parted" / "gpu-mig-profiles.yaml").read_text())["gpus"]
    for gpu in load_catalog().gpus.values():
        if not gpu.mig_profiles:
            continue
        upstream = {p["profile"]: p["max_instances"] for p in table[gpu.name]["profiles"]}
        assert gpu.mig_profiles == {k: v for k, v in upstream.items() if k in gpu.mig_profiles}, gpu.name
        # Every plain and +me profile NVIDIA lists for the model is offered.
        assert set(gpu.mig_profiles) == {p for p in upstream if "+" not in p or p.endswith("+me")}, gpu.name


# --------------------------------------------------------------------------------------------------------------------
# No drift from the generated sources


def test_every_aws_row_is_karpenters_generated_data():
    """GPUs, GPU model, GPU memory, vCPUs, memory, architecture and (where Karpenter prices it) the us-east-1 price of every
    AWS line are those of Karpenter v1.14.1's generated reference; gpus, EFA and NVMe are checked in tests/fabric."""
    rows, catalog = karpenter_shapes(), load_catalog()
    for name, it in catalog.instances["aws"].items():
        if it.source != "karpenter-aws":  # p6e-gb200: UltraServer-only, not in Karpenter's generated reference (rowSources)
            continue
        row = rows[name]
        assert KARPENTER_GPU_NAMES[it.gpu.name] == row["gpu"], name
        assert (it.vcpus, it.memory_gib * 1024) == (row["vcpus"], row["mib"]), name
        assert row["arch"] == "amd64", name
        if it.gpu.usable_memory is not None and "EC2" in it.gpu.memory_source:
            assert it.gpu.usable_memory == row["gpu_mib"], name
        elif it.gpu.usable_memory is not None:  # a driver's figure (nvidia-smi) sits at or below EC2's
            assert it.gpu.usable_memory <= row["gpu_mib"], name
        else:
            assert it.gpu.memory_gb * 1024 == row["gpu_mib"], name
        if row["price"] is not None:
            assert it.price == pytest.approx(row["price"], abs=0.0005), name
            assert it.price_read >= "2025-06", name
        else:
            assert name == "p5e.48xlarge"  # sold as Capacity Blocks only: no on-demand price in Karpenter's table


def test_every_size_karpenter_lists_of_a_catalog_family_is_in_the_catalog():
    """A family the catalog carries is carried whole: every x86 size of it in Karpenter's generated reference has a row
    (a missing size would be refused as unknown although EC2 sells it)."""
    rows, catalog = karpenter_shapes(), load_catalog()
    families = {it.family for it in catalog.instances["aws"].values()}
    missing = [name for name, row in rows.items()
               if row["arch"] == "amd64" and name.split(".")[0] in families and catalog.instance("aws", name) is None]
    assert missing == []
    assert {n for n in catalog.instances["aws"] if n.startswith("g7e.")} == {n for n in rows if n.startswith("g7e.")}


def test_every_gcp_machine_type_is_skypilots_generated_data():
    """Every GCP machine type: vCPUs and memory as SkyPilot's catalog rows list them, and the price (machine row plus the GPU
    row of its count) where that catalog's GPU row is a usable list price; one whose on-demand price sits below its Spot
    price is not (A100-80GB in us-central1), and those rows keep their typed price, named as such."""
    rows, catalog = skypilot_gcp_rows(), load_catalog()
    machines = {(r["InstanceType"], r["AvailabilityZone"]): r for r in rows if r["InstanceType"]}
    gpus = {(r["AcceleratorName"], int(r["AcceleratorCount"]), r["AvailabilityZone"]): r for r in rows if not r["InstanceType"]}
    priced, typed = set(), set()
    for (name, zone), row in machines.items():
        it = catalog.instance("gcp", name)
        assert (it.vcpus, it.memory_gib) == (int(float(row["vCPUs"])), int(float(row["MemoryGiB"]))), name
        if not zone.startswith("us-central1"):
            continue
        gpu = gpus[(SKYPILOT_GPUS[it.accelerator], it.gpus, zone)]
        if float(gpu["Price"]) < float(gpu["SpotPrice"]):
            typed.add(name)
            assert it.source == "price-lists-2025-06", name
            continue
        assert it.price == pytest.approx(float(row["Price"]) + float(gpu["Price"]), abs=0.00001), name
        assert it.source == "skypilot-gcp" and it.price_read == "2026-11", name
        priced.add(name)
    assert typed == {n for n in catalog.instances["gcp"] if n.startswith("a2-ultragpu-")}
    # A4X and A4X Max are not in that catalog revision: their row source is Compute Engine's own page (unpriced).
    assert priced | typed == {n for n, it in catalog.instances["gcp"].items() if it.gpu is not None and it.source != "gce-accelerator-optimized"}
    assert sorted(z for n, z in machines if n == "a4-highgpu-8g") == sorted(catalog.gcp_zones["nvidia-b200"])


def karpenter_azure_prices() -> dict[tuple[str, str], float | None]:
    rows = [line.split("\t") for line in (DATA / "karpenter-azure-prices.tsv").read_text().splitlines() if not line.startswith("#")]
    return {(size, region): float(price) if price else None for size, region, price in rows}


def test_every_azure_row_is_priced_as_karpenter_azures_generated_table():
    prices, catalog = karpenter_azure_prices(), load_catalog()
    home = catalog.price_region["azure"]
    for name, it in catalog.instances["azure"].items():
        assert it.price == prices[(name, it.price_region or home)], name
        assert it.price_read == "2026-06", name  # the table was generated on 2026-06-18
        if it.price_region:  # a row priced elsewhere is one the home region does not sell
            assert prices[(name, home)] is None, name
    for name in catalog.refused["azure"]:  # the table knows the refused sizes too: Azure sells them
        if name == "Standard_ND128isr_GB300_v6":  # named by Azure's compute API examples; no retail price in that table yet
            assert (name, home) not in prices
            continue
        assert (name, home) in prices


NC_RTX_PRO = ["Standard_NC24lds_xl_RTXPRO6000BSE_v6", "Standard_NC36ds_xl_RTXPRO6000BSE_v6", "Standard_NC36lds_xl_RTXPRO6000BSE_v6",
              "Standard_NC72ds_xl_RTXPRO6000BSE_v6", "Standard_NC72lds_xl_RTXPRO6000BSE_v6", "Standard_NC144ds_xl_RTXPRO6000BSE_v6",
              "Standard_NC144lds_xl_RTXPRO6000BSE_v6", "Standard_NC288ds_xl_RTXPRO6000BSE_v6", "Standard_NC288lds_xl_RTXPRO6000BSE_v6"]


@pytest.mark.parametrize("name", NC_RTX_PRO)
def test_aks_rtx_pro_6000_sizes_are_known_and_refused_for_their_grid_guest_driver(name):
    """Azure sells them (Karpenter-Azure's generated price table has each in eastus) and AKS gives them the GRID v20
    guest driver; a pool naming one gets the catalog's line."""
    from gpupools.stack.errors import ConfigError
    from gpupools.validation.stack import validate_stack

    from conftest import stack_config

    catalog = load_catalog()
    why = catalog.refusal("azure", name)
    assert why and "GRID v20" in why and "use Standard_NC40ads_H100_v5" in why and catalog.cloud_of(name) == "azure"
    assert karpenter_azure_prices()[(name, catalog.price_region["azure"])] is not None
    config = stack_config("azure", pools=[{"name": "p", "instanceType": name, "maxNodes": 1}])
    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    (problem,) = exc.value.problems
    assert (problem.path, problem.message) == ("pools[0].instanceType", why)


def test_newer_azure_rows_name_their_vcpus_and_price_region():
    it = load_catalog().instance("azure", "Standard_ND96isr_H200_v5")
    assert it.vcpus == 96 and it.price_region == "eastus2" and it.gpu.name == "H200-141GB"


def test_blackwell_models_need_open_kernel_modules_and_a_new_driver():
    catalog = load_catalog()
    for gpu in catalog.gpus.values():
        assert gpu.open_kernel_modules_only == (gpu.architecture in ("Blackwell", "Blackwell Ultra")), gpu.name
        if gpu.open_kernel_modules_only:
            assert gpu.min_driver is not None and gpu.min_driver >= 570, gpu.name
    assert catalog.gpus["GB200-186GB"].mig_unavailable and not catalog.gpus["B200-180GB"].mig_unavailable


@pytest.mark.parametrize("cloud, name", [("azure", "Standard_ND128isr_NDR_GB200_v6")])
def test_gb200_types_are_known_and_refused_with_what_to_use(cloud, name):
    catalog = load_catalog()
    why = catalog.refusal(cloud, name)
    assert why and "GB200" in why and "use " in why and "\n" not in why
    assert catalog.instance(cloud, name) is None and catalog.cloud_of(name) == cloud


def test_a_type_of_another_cloud_is_found_beside_the_refused_ones():
    catalog = load_catalog()
    assert catalog.cloud_of("a2-highgpu-1g") == "gcp" and catalog.cloud_of("g5.2xlarge") == "aws"
    assert catalog.cloud_of("Standard_ND96isr_H100_v5") == "azure" and catalog.cloud_of("a4x-highgpu-4g") == "gcp"


AKS_REFUSED = ["Standard_NV6ads_A10_v5", "Standard_NV12ads_A10_v5", "Standard_NV18ads_A10_v5", "Standard_NV36ads_A10_v5",
               "Standard_NV36adms_A10_v5", "Standard_NV72ads_A10_v5", "Standard_NCC40ads_H100_v5"]


@pytest.mark.parametrize("name", AKS_REFUSED)
def test_aks_vgpu_and_confidential_sizes_are_known_and_refused_with_what_to_use(name):
    from gpupools.stack.errors import ConfigError
    from gpupools.validation.stack import validate_stack

    from conftest import stack_config

    catalog = load_catalog()
    why = catalog.refusal("azure", name)
    assert why and "use Standard_" in why and catalog.instance("azure", name) is None and catalog.cloud_of(name) == "azure"
    assert ("GRID" in why) == ("_A10_v5" in name) and ("confidential" in why) == name.startswith("Standard_NCC")
    config = stack_config("azure", pools=[{"name": "p", "instanceType": name, "maxNodes": 1}])
    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    (problem,) = exc.value.problems
    assert (problem.path, problem.message) == ("pools[0].instanceType", why)


def test_every_row_names_its_source_and_generated_sources_are_the_rows_the_tests_check():
    catalog = load_catalog()
    for cloud, types in catalog.instances.items():
        for it in types.values():
            assert it.source in catalog.row_sources, (cloud, it.name)
    by_source = lambda key: {(c, n) for c, types in catalog.instances.items() for n, it in types.items() if it.source == key}  # noqa: E731
    assert by_source("karpenter-aws") == {("aws", n) for n in karpenter_shapes() if n in catalog.instances["aws"]}
    assert by_source("skypilot-gcp") == {("gcp", r["InstanceType"]) for r in skypilot_gcp_rows()
                                         if r["InstanceType"] and not r["InstanceType"].startswith("a2-ultragpu-")}
    assert by_source("karpenter-azure") == {("azure", n) for n in catalog.instances["azure"]}
    generated = {k for k, s in catalog.row_sources.items() if s.generated}
    assert generated == {"karpenter-aws", "skypilot-gcp", "karpenter-azure"}
    assert all(not catalog.instances[c][n].price_read.startswith("2025") for k in generated for c, n in by_source(k) if c != "aws")


def test_named_rows_win_over_a_clouds_rest():
    from gpupools.core.catalog import _row_source_keys

    raw = {"a": {"rows": {"gcp": "rest"}}, "b": {"rows": {"gcp": ["x"]}}}
    assert _row_source_keys(raw, {"gcp": {"x": {}, "y": {}}}) == {("gcp", "x"): "b", ("gcp", "y"): "a"}


def test_gpupools_catalog_shows_each_rows_source_and_its_citation():
    import json

    from typer.testing import CliRunner

    from gpupools.cli.main import app

    rows = json.loads(CliRunner().invoke(app, ["catalog", "--json"]).stdout)
    catalog = load_catalog()
    assert all(r["source"] in catalog.row_sources and r["sourceCite"] == catalog.row_sources[r["source"]].cite for r in rows)
    g7e = next(r for r in rows if r["instanceType"] == "g7e.12xlarge")
    assert g7e["source"] == "karpenter-aws" and "v1.14.1" in g7e["sourceCite"]
    text = " ".join(CliRunner().invoke(app, ["catalog", "--cloud", "azure"], terminal_width=250).output.split())
    assert "karpenter-azure: Azure/karpenter-provider-azure @2b431da1" in text
    assert "skypilot-gcp:" not in text and "price-lists-2025-06" not in text  # only the sources of the rows shown


def test_a3_edge_plans_on_gke_without_a_fabric_and_only_where_h100s_are():
    from gpupools.pools.planning import plan_pools
    from gpupools.stack.errors import ConfigError
    from gpupools.validation.stack import validate_stack

    from conftest import stack_config

    stack = validate_stack(stack_config("gcp", pools=[{"name": "edge", "instanceType": "a3-edgegpu-8g", "maxNodes": 1, "zones": ["us-central1-a"]}]))
    (plan,) = plan_pools(stack)
    assert (plan.hardware.gpus_per_node, plan.hardware.accelerator) == (8, "nvidia-h100-80gb")
    assert load_catalog().fabric_of("gcp", "a3-edgegpu-8g").kind is None
    with pytest.raises(ConfigError) as exc:
        validate_stack(stack_config("gcp", pools=[{"name": "edge", "instanceType": "a3-edgegpu-8g", "maxNodes": 1, "zones": ["us-central1-f"]}]))
    assert [p.path for p in exc.value.problems] == ["pools[0].zones[0]"]


def test_gcore_flavor_names_spell_their_gpus():
    """Gcore flavor IDs end in <gpu>-<memory GB>-<count> (bm3-ai-1xlarge-h100-80-8, g3-ai-32-192-1500-l40s-48-1); virtual
    machines carry their vCPUs and memory after g3-ai-."""
    rows = load_catalog().instances["gcore"]
    assert rows
    for name, it in rows.items():
        gpu, memory, count = name.rsplit("-", 3)[1:]
        assert (it.gpu.name.split("-")[0].lower(), int(memory), int(count)) == (gpu, it.gpu.memory_gb, it.gpus), name
        if name.startswith("g3-ai-"):
            vcpus, ram = name.split("-")[2:4]
            assert (it.vcpus, it.memory_gib) == (int(vcpus), int(ram)), name


@pytest.mark.parametrize("cloud, name, family", [("aws", "p5.48xlarge", "p5"), ("aws", "g6e.12xlarge", "g6e"),
                                                 ("gcp", "a3-highgpu-8g", "a3-highgpu"), ("azure", "Standard_NC24ads_A100_v4", "Standard_NC24ads_A100_v4")])
def test_an_instance_type_s_family(cloud, name, family):
    instance = load_catalog().instance(cloud, name)
    assert instance is not None and instance.family == family


def test_a_regions_zones_for_an_accelerator_are_that_regions_only():
    catalog = load_catalog()
    zones = catalog.gcp_zones_in("nvidia-h100-80gb", "us-central1")
    assert zones and all(z.startswith("us-central1-") for z in zones)
    everywhere = catalog.gcp_zones["nvidia-h100-80gb"]
    assert set(zones) < set(everywhere)  # other regions' zones are left out
    assert catalog.gcp_zones_in("nvidia-h100-80gb", "mars-north1") is None  # a region the catalog knows nothing of


def test_a_fabric_s_kind_and_what_an_unsaid_fabric_has():
    from gpupools.core.catalog import Fabric, _fabric

    assert _fabric({}) == Fabric() and Fabric().kind is None and Fabric().local_nvme_gb == 0
    assert (_fabric({"efa": 32}).kind, _fabric({"infiniband": True}).kind, _fabric({"gpudirect": "tcpxo"}).kind) == ("efa", "infiniband", "gpudirect-tcpxo")
    full = _fabric({"efa": 16, "extraNetworks": 8, "multiNode": True, "localNvmeGb": 7600})
    assert (full.efa, full.extra_networks, full.multi_node, full.local_nvme_gb) == (16, 8, True, 7600)
    assert load_catalog().fabric_of("aws", "p5.48xlarge").kind == "efa" and load_catalog().fabric_of("aws", "no-such.type") == Fabric()


def test_an_nccl_image_forwards_what_the_catalog_lists_and_none_without_a_list():
    from gpupools.core.catalog import _load

    images = load_catalog().nccl_images
    assert images["efa"].forward_env == ("PATH", "LD_LIBRARY_PATH", "LD_PRELOAD")
    from importlib import resources

    raw = yaml.safe_load(resources.files("gpupools.core").joinpath("catalog.yaml").read_text())
    del raw["ncclTests"]["images"]["efa"]["forwardEnv"]
    assert _load(yaml.safe_dump(raw)).nccl_images["efa"].forward_env == ()
