"""A stack per newer GPU family on each cloud that sells it (H200, B200, B300, RTX PRO 6000), planned and policy-checked
through the command line as a user runs them, with the fabric, MIG and driver settings each family needs; and the
mistakes a newcomer makes with them, each one line naming the field, exit 2.

GB200 and GB300 have stacks of their own (stacks/Pulumi.dev-aws-gb200.yaml, dev-gcp-a4x; tests/clouds/test_rack_scale.py);
the bad-input cases below hold what a plain pool of them is told: EKS under Karpenter, GKE without a reservation, AKS at all.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.core.catalog import load_catalog

from conftest import POOL_RESOURCE, stack_config, write_stack

runner = CliRunner()


def stack(cloud: str, region: str | None, pools: list[dict], **keys) -> dict:
    config = stack_config(cloud, pools=pools, **keys)
    if cloud == "aws":
        config["aws:region"] = region
    elif cloud == "azure":
        config["azure-native:location"] = region
    return config


# name -> (config, {pool: (GPU model, fabric kind or None, MIG profile or None)})
STACKS = {
    # p5en in us-east-2 (all three zones), EFA on 16 cards; B200 there too, one pool on EFA and one in MIG slices.
    "aws-h200-b200": (stack("aws", "us-east-2", [
        {"name": "h200", "instanceType": "p5en.48xlarge", "maxNodes": 2, "zones": ["us-east-2a"]},
        {"name": "b200", "instanceType": "p6-b200.48xlarge", "maxNodes": 2, "zones": ["us-east-2b"]},
        {"name": "b200mig", "instanceType": "p6-b200.48xlarge", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "3g.90gb"}}]),
        {"h200": ("H200-141GB", "efa", None), "b200": ("B200-180GB", "efa", None), "b200mig": ("B200-180GB", None, "3g.90gb")}),
    # p6-b300 is sold in one zone of us-west-2 only.
    "aws-b300": (stack("aws", "us-west-2", [
        {"name": "b300", "instanceType": "p6-b300.48xlarge", "maxNodes": 2, "zones": ["us-west-2b"]},
        {"name": "b300mig", "instanceType": "p6-b300.48xlarge", "maxNodes": 1, "zones": ["us-west-2b"],
         "sharing": {"mode": "mig", "migProfile": "1g.34gb"}}]),
        {"b300": ("B300-269GB", "efa", None), "b300mig": ("B300-269GB", None, "1g.34gb")}),
    # RTX PRO 6000 Blackwell: its own MIG profiles (four slices at most), and time-slicing on the one-GPU size.
    "aws-rtx-pro-6000": (stack("aws", "us-east-1", [
        {"name": "rtx", "instanceType": "g7e.12xlarge", "maxNodes": 2, "sharing": {"mode": "mig", "migProfile": "2g.48gb"}},
        {"name": "rtxme", "instanceType": "g7e.24xlarge", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "1g.24gb-me"}},
        {"name": "rtxts", "instanceType": "g7e.2xlarge", "maxNodes": 2, "sharing": {"mode": "time-slicing", "replicas": 4}}]),
        {"rtx": ("RTX-PRO-6000-96GB", None, "2g.48gb"), "rtxme": ("RTX-PRO-6000-96GB", None, "1g.24gb-me"),
         "rtxts": ("RTX-PRO-6000-96GB", None, None)}),
    # G4: RTX PRO 6000 in GKE's own partitions (four per GPU) and whole on the 8-GPU size.
    "gcp-rtx-pro-6000": (stack("gcp", None, [
        {"name": "g4mig", "instanceType": "g4-standard-96", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "1g.24gb"}},
        {"name": "g4", "instanceType": "g4-standard-384", "maxNodes": 1}]),
        {"g4mig": ("RTX-PRO-6000-96GB", None, "1g.24gb"), "g4": ("RTX-PRO-6000-96GB", None, None)}),
    # A3 Ultra (H200) and A4 (B200) on GPUDirect RDMA; B200 in the partitions GKE's own MIG makes.
    "gcp-h200-b200": (stack("gcp", None, [
        {"name": "h200", "instanceType": "a3-ultragpu-8g", "maxNodes": 2, "zones": ["us-central1-b"]},
        {"name": "b200", "instanceType": "a4-highgpu-8g", "maxNodes": 2, "zones": ["us-central1-b"]},
        {"name": "b200mig", "instanceType": "a4-highgpu-8g", "maxNodes": 1, "zones": ["us-central1-b"],
         "sharing": {"mode": "mig", "migProfile": "3g.90gb"}}]),
        {"h200": ("H200-141GB", "gpudirect-rdma", None), "b200": ("B200-180GB", "gpudirect-rdma", None),
         "b200mig": ("B200-180GB", None, "3g.90gb")}),
    # ND H200 v5 on InfiniBand (not sold in eastus: eastus2), and in MIG slices through the GPU Operator, advertised as
    # nvidia.com/gpu so that AKS's autoscaler wakes the pool from zero (as dev-azure does).
    "azure-h200": (stack("azure", "eastus2", gpuSoftware={"migStrategy": "single"}, pools=[
        {"name": "h200", "instanceType": "Standard_ND96isr_H200_v5", "maxNodes": 2},
        {"name": "h200mig", "instanceType": "Standard_ND96isr_H200_v5", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "1g.18gb"}}]),
        {"h200": ("H200-141GB", "infiniband", None), "h200mig": ("H200-141GB", None, "1g.18gb")}),
}


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    out = {}
    for name, (config, _) in STACKS.items():
        path = write_stack(tmp_path_factory.mktemp(name), config, name)
        result = runner.invoke(app, ["plan", "--config", str(path), "--json"])
        assert result.exit_code == 0, (name, result.output)
        out[name] = (path, json.loads(result.stdout))
    return out


def test_every_newer_family_has_a_stack_on_every_cloud_that_sells_it():
    catalog = load_catalog()
    covered = {(cloud, gpu) for config, pools in STACKS.values() for cloud in [config["gpupools:cloud"]] for gpu, _, _ in pools.values()}
    newer = {"H200-141GB", "B200-180GB", "B300-269GB", "RTX-PRO-6000-96GB"}
    sold = {(cloud, it.gpu.name) for cloud, types in catalog.instances.items() for it in types.values() if it.gpu and it.gpu.name in newer}
    assert sold <= covered


@pytest.mark.parametrize("name", list(STACKS))
def test_the_stack_plans_with_the_familys_gpu_fabric_and_mig(name, planned):
    _, doc = planned[name]
    expected = STACKS[name][1]
    pools = {p["name"]: p for p in doc["outputs"]["pools"]}
    assert set(pools) == set(expected)
    for pool, (gpu, fabric, profile) in expected.items():
        got = pools[pool]
        assert got["gpu"] == gpu, pool
        assert (got["fabric"] or {}).get("kind") == fabric, pool
        if fabric:
            assert got["fabric"]["configured"], pool  # gaps left are the user's (an Azure subscription feature)
        model = load_catalog().gpus[gpu]
        if profile:
            assert profile in got["sharing"] and got["perNode"] % model.mig_profiles[profile] == 0, pool
    for pool, (_, _, profile) in expected.items():
        found = pool_labels(doc["resources"], pool)
        assert found, pool
        if profile and doc["cloud"] == "gcp":  # GKE's own MIG: the node pool's partition size
            sizes = [a.get("gpuPartitionSize") for r in doc["resources"] if r["type"] == POOL_RESOURCE["gcp"]
                     and (r["inputs"].get("nodeConfig") or {}).get("labels", {}).get("gpupools.io/pool") == pool
                     for a in r["inputs"]["nodeConfig"]["guestAccelerators"]]
            assert sizes == [profile], (pool, sizes)
        elif profile:  # the GPU Operator's MIG manager applies the layout the node label names
            assert {labels.get("nvidia.com/mig.config") for labels in found} - {None} == {f"all-{profile.replace('+', '.')}"}, pool
        else:  # whole GPUs: MIG off where the GPU has it
            assert {labels.get("nvidia.com/mig.config") for labels in found} <= {None, "all-disabled"}, pool


def pool_labels(node, pool: str) -> list[dict]:
    """Every label map of the planned resources that names the pool (node group, NodePool, agent pool, node pool)."""
    found = []
    if isinstance(node, dict):
        if node.get("gpupools.io/pool") == pool:
            found.append(node)
        for value in node.values():
            found += pool_labels(value, pool)
    elif isinstance(node, list):
        for value in node:
            found += pool_labels(value, pool)
    return found


@pytest.mark.parametrize("name", list(STACKS))
def test_the_driver_settings_fit_the_familys_gpus(name, planned):
    """Blackwell runs on NVIDIA's open kernel modules only, from driver 570 (B300: 580). The GPU Operator installs the
    driver on AKS with driver.kernelModuleType left at the chart's "auto" (open modules on Blackwell); on EKS the AL2023
    NVIDIA AMI brings it (the operator's driver off); GKE installs its LATEST driver for the node version."""
    _, doc = planned[name]
    cloud = doc["cloud"]
    for pool in doc["outputs"]["pools"]:  # the plan says what each pool's GPU needs of its driver
        model = load_catalog().gpus[pool["gpu"]]
        assert pool["driver"]["openKernelModulesOnly"] == model.architecture.startswith("Blackwell"), pool["name"]
        assert pool["driver"]["minBranch"] == model.min_driver, pool["name"]
    releases = {r["name"]: r["inputs"] for r in doc["resources"] if r["type"] == "kubernetes:helm.sh/v3:Release"}
    if cloud == "gcp":
        pools = [r["inputs"] for r in doc["resources"] if r["type"] == POOL_RESOURCE["gcp"]]
        gpu_pools = [p for p in pools if (p.get("nodeConfig") or {}).get("guestAccelerators")]
        assert gpu_pools
        for p in gpu_pools:
            (accelerator,) = p["nodeConfig"]["guestAccelerators"]
            assert accelerator["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}
        return
    operator = next(v for n, v in releases.items() if "gpu-operator" in n)
    driver = operator["values"]["driver"]
    if cloud == "aws":
        assert driver["enabled"] is False
        classes = [r["inputs"] for r in doc["resources"] if r["type"] == "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"]
        assert classes and all(c["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}] for c in classes)
    else:
        assert driver["enabled"] is True and "kernelModuleType" not in driver and "version" not in driver


@pytest.mark.parametrize("name", list(STACKS))
def test_the_stack_passes_gpupools_check(name, planned):
    path, _ = planned[name]
    result = runner.invoke(app, ["check", "--config", str(path)])
    assert result.exit_code == 0, result.output


# --------------------------------------------------------------------------------------------------------------------
# Bad input on the newer GPUs: one line naming the field and what is allowed, exit 2


def errors(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("error: ")]


BAD = [
    # A type the region does not sell: the regions that do.
    ("aws", "eu-central-1", {"instanceType": "p6-b200.48xlarge"}, "pools[0].instanceType", "is not offered in eu-central-1"),
    ("aws", "us-east-2", {"instanceType": "p6-b300.48xlarge"}, "pools[0].instanceType", "regions that offer it: us-west-2"),
    ("azure", "eastus", {"instanceType": "Standard_ND96isr_H200_v5"}, "pools[0].instanceType", "is not offered in eastus"),
    ("gcp", None, {"instanceType": "a4-highgpu-8g", "zones": ["us-central1-a"]}, "pools[0].zones[0]", "nvidia-b200"),
    # A MIG profile the GPU lacks: the GPU's own profiles.
    ("aws", "us-east-2", {"instanceType": "p6-b200.48xlarge", "sharing": {"mode": "mig", "migProfile": "3g.40gb"}},
     "pools[0].sharing.migProfile", "is not a MIG profile of B200-180GB; it has 1g.23gb"),
    ("aws", "us-east-1", {"instanceType": "g7e.12xlarge", "sharing": {"mode": "mig", "migProfile": "3g.48gb"}},
     "pools[0].sharing.migProfile", "is not a MIG profile of RTX-PRO-6000-96GB; it has 1g.24gb"),
    ("azure", "eastus2", {"instanceType": "Standard_ND96isr_H200_v5", "sharing": {"mode": "mig", "migProfile": "1g.10gb"}},
     "pools[0].sharing.migProfile", "is not a MIG profile of H200-141GB"),
    ("gcp", None, {"instanceType": "a4-highgpu-8g", "zones": ["us-central1-b"], "sharing": {"mode": "mig", "migProfile": "1g.23gb+me"}},
     "pools[0].sharing.migProfile", "is not a partition size GKE makes for nvidia-b200"),
    # GB200 in a plain node pool: EKS under Karpenter (the default autoscaler), GKE without a reservation, AKS at all.
    ("aws", "us-east-1", {"instanceType": "p6e-gb200.36xlarge"}, "pools[0].instanceType", "use gpupools:autoscaler: cluster-autoscaler"),
    ("azure", "eastus", {"instanceType": "Standard_ND128isr_NDR_GB200_v6"}, "pools[0].instanceType", "use Standard_ND96isr_H200_v5"),
    ("gcp", None, {"instanceType": "a4x-highgpu-4g", "minNodes": 1}, "pools[0].capacity", "sold only against a Compute Engine reservation"),
]


@pytest.mark.parametrize("cloud, region, pool, field, words", BAD, ids=[f"{b[0]}-{b[2]['instanceType']}-{b[3].rsplit('.', 1)[-1]}" for b in BAD])
def test_bad_input_on_the_newer_gpus_is_one_line_naming_the_field_exit_2(cloud, region, pool, field, words, tmp_path):
    path = write_stack(tmp_path, stack(cloud, region, [{"name": "p", "maxNodes": 1, **pool}]))
    for command in ("plan", "check"):
        result = runner.invoke(app, [command, "--config", str(path)])
        assert result.exit_code == 2, result.output
        (line,) = errors(result)
        assert line.startswith(f"error: {field}: ") and words in line, line
        assert "Traceback" not in result.output
