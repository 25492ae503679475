"""GKE G4 (RTX PRO 6000 Blackwell): the whole-GPU sizes as Compute Engine lists them, unpriced; the vGPU fractions
refused; MIG through GKE's own partitions and time-sharing, as on the other GKE GPUs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.core.catalog import load_catalog
from gpupools.pools.planning import plan_pools
from gpupools.validation.stack import validate_stack

from conftest import stack_config, write_stack

runner = CliRunner()


def test_g4_rows_are_compute_engines_whole_gpu_sizes_without_a_price():
    catalog = load_catalog()
    # Compute Engine "Accelerator-optimized machine family", G4 machine types: vCPUs, memory (GB), GPUs.
    sizes = {"g4-standard-48": (48, 180, 1), "g4-standard-96": (96, 360, 2), "g4-standard-192": (192, 720, 4), "g4-standard-384": (384, 1440, 8)}
    rows = {n: it for n, it in catalog.instances["gcp"].items() if n.startswith("g4-")}
    assert {n: (it.vcpus, it.memory_gib, it.gpus) for n, it in rows.items()} == sizes
    assert {(it.gpu.name, it.accelerator, it.price, it.source, it.arch) for it in rows.values()} == {
        ("RTX-PRO-6000-96GB", "nvidia-rtx-pro-6000", None, "gce-accelerator-optimized", "x86_64")}
    assert all(catalog.refusal("gcp", f"g4-standard-{n}") for n in (6, 12, 24))


def test_a_fractional_g4_is_refused_in_one_line_exit_2(tmp_path):
    path = write_stack(tmp_path, stack_config("gcp", pools=[{"name": "g4", "instanceType": "g4-standard-12", "maxNodes": 1}]))
    result = runner.invoke(app, ["plan", "--config", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: pools[0].instanceType: g4-standard-6, -12 and -24 get 1/8, 1/4 or 1/2") and "use g4-standard-48" in line


def test_g4_shares_through_gkes_partitions_and_time_sharing():
    stack = validate_stack(stack_config("gcp", pools=[
        {"name": "mig", "instanceType": "g4-standard-96", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "1g.24gb"}},
        {"name": "ts", "instanceType": "g4-standard-48", "maxNodes": 1, "sharing": {"mode": "time-slicing", "replicas": 4}},
        {"name": "whole", "instanceType": "g4-standard-384", "maxNodes": 1}]))
    units = {p.name: p.units_per_node for p in plan_pools(stack)}
    assert units == {"mig": 8, "ts": 4, "whole": 8}  # 2 GPUs x 4 partitions; 1 GPU x 4 shares; 8 whole GPUs


def test_a_mig_profile_the_rtx_pro_6000_lacks_is_refused(tmp_path):
    config = stack_config("gcp", pools=[{"name": "mig", "instanceType": "g4-standard-48", "maxNodes": 1,
                                         "sharing": {"mode": "mig", "migProfile": "3g.48gb"}}])
    result = runner.invoke(app, ["plan", "--config", str(write_stack(tmp_path, config))])
    assert result.exit_code == 2
    (line,) = [x for x in result.output.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: pools[0].sharing.migProfile: '3g.48gb' is not a partition size GKE makes for nvidia-rtx-pro-6000"), line


def test_the_plan_says_which_source_gives_no_g4_price(tmp_path):
    config = stack_config("gcp", pools=[{"name": "g4", "instanceType": "g4-standard-48", "maxNodes": 1}])
    result = runner.invoke(app, ["plan", "--config", str(write_stack(tmp_path, config))], terminal_width=250)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "no list price: the catalog's source for g4-standard-48 (gce-accelerator-optimized) gives none" in text
