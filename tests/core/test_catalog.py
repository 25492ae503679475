"""The catalog: complete for the families we promise, consistent, and true to NVIDIA's MIG tables."""

from __future__ import annotations

import re

import pytest
import yaml

from gpupools.core.catalog import load_catalog

from conftest import needs_reference

REQUIRED_FAMILIES = {
    "aws": ["g4dn.", "g5.", "g6.", "g6e.", "p4d.", "p4de.", "p5.", "p5e."],
    "azure": ["_T4_v3", "ads_A100_v4", "Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4", "_H100_v5", "Standard_ND96isr_H100_v5"],
    "gcp": ["g2-", "a2-highgpu-", "a2-ultragpu-", "a3-highgpu-", "a3-megagpu-", "a3-ultragpu-", "n1-"],
}


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
            assert it.price > 0 and re.fullmatch(r"20\d\d-\d\d", it.price_read), it.name
            if it.gpu is not None:
                assert it.gpus >= 1
            if cloud == "gcp" and it.gpu is not None:
                assert it.accelerator and it.accelerator.startswith("nvidia-")
    for gpu in catalog.gpus.values():
        assert gpu.device_names, gpu.name
        for profile, count in gpu.mig_profiles.items():
            assert re.fullmatch(r"\d+g\.\d+gb(\+me)?", profile) and 1 <= count <= 7


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
