"""How many shared units one pod may ask for: the device plugins that fail more than one (NVIDIA's with MPS, Bottlerocket's
time-slicing as gpupools configures it, GKE's time-sharing and its MPS on nodes of several GPUs), and what `gpupools
workload`, the landing check and the plan make of it."""

from __future__ import annotations

import copy

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.core.sharing import BOTTLEROCKET, Mechanism, device_plugin_config_entry, units_per_pod
from gpupools.landing.check import cluster_of, land, landing_check
from gpupools.landing.jobs import job_manifest
from gpupools.landing.shapes import job_for, shapes
from gpupools.stack.config import Sharing
from gpupools.validation.stack import validate_stack

from tests.conftest import stack_config

MPS_POOL = {"name": "mps", "instanceType": "g5.12xlarge", "maxNodes": 2, "sharing": {"mode": "mps", "replicas": 4}}  # 4 A10G
SLICED_POOL = {"name": "sliced", "instanceType": "g5.12xlarge", "maxNodes": 2, "sharing": {"mode": "time-slicing", "replicas": 4}}


def mechanism(installer: str, mode: str) -> Mechanism:
    return Mechanism(installer, mode, "nvidia.com/gpu", 4, "")


@pytest.mark.parametrize("installer, mode, gpus, most", [
    ("gpu-operator", "mps", 4, 1), ("device-plugin", "mps", 1, 1), (BOTTLEROCKET, "mps", 4, 1),  # NVIDIA's plugin: any node
    ("gpu-operator", "time-slicing", 4, None), ("device-plugin", "time-slicing", 1, None),  # failRequestsGreaterThanOne false
    (BOTTLEROCKET, "time-slicing", 1, 1),  # gpupools sets fail-requests-greater-than-one = true
    ("cloud", "time-slicing", 1, 1), ("cloud", "mps", 1, None), ("cloud", "mps", 2, 1),  # GKE: MPS only on nodes of several GPUs
    ("gpu-operator", "none", 8, None), ("cloud", "none", 8, None), ("hami", "vgpu", 8, None), ("gpu-operator", "mig", 8, None),
])
def test_which_device_plugins_serve_a_pod_one_shared_unit_at_most(installer, mode, gpus, most):
    cap = units_per_pod(mechanism(installer, mode), gpus)
    assert (cap.units if cap else None) == most


def test_gpupools_mps_config_leaves_the_refusal_on():
    """The limit holds because gpupools' MPS entry leaves failRequestsGreaterThanOne to the plugin's default (true)."""
    entry = device_plugin_config_entry(Sharing(mode="mps", replicas=4))
    assert entry["sharing"]["mps"] == {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}


def test_workload_refuses_more_than_one_mps_unit_in_one_line(stack_file):
    path = str(stack_file(stack_config("aws", pools=[MPS_POOL, SLICED_POOL])))
    result = CliRunner().invoke(app, ["workload", "--config", path, "--pool", "mps", "--units", "2"])
    assert result.exit_code == 2
    assert result.output == ("error: --units: 2: a pod on pool 'mps' gets at most 1 x nvidia.com/gpu: the NVIDIA device plugin fails a pod "
                             "asking for more than one MPS share (failRequestsGreaterThanOne is on for MPS)\n")
    one = CliRunner().invoke(app, ["workload", "--config", path, "--pool", "mps", "--units", "1"])
    assert one.exit_code == 0 and "nvidia.com/gpu: 1" in one.output
    # Time-slicing on NVIDIA's plugin serves several slices to one pod.
    sliced = CliRunner().invoke(app, ["workload", "--config", path, "--pool", "sliced", "--units", "4"])
    assert sliced.exit_code == 0 and "nvidia.com/gpu: 4" in sliced.output


def test_a_team_job_on_kueue_refuses_more_than_one_mps_unit_with_or_without_a_pool(stack_file):
    config = stack_config("aws", pools=[MPS_POOL, {**SLICED_POOL}], teams=[{"name": "ml", "gpus": 8}])
    path = str(stack_file(config))
    with_pool = CliRunner().invoke(app, ["workload", "--config", path, "--team", "ml", "--pool", "mps", "--units", "2"])
    assert with_pool.exit_code == 2 and with_pool.output.startswith("error: --units: 2: a pod on pool 'mps' gets at most 1")
    # Without --pool Kueue chooses, and may choose the MPS pool.
    any_pool = CliRunner().invoke(app, ["workload", "--config", path, "--team", "ml", "--units", "2"])
    assert any_pool.exit_code == 2 and any_pool.output.startswith("error: --units: 2: Kueue may place the pod on pool 'mps'")
    assert CliRunner().invoke(app, ["workload", "--config", path, "--team", "ml", "--pool", "sliced", "--units", "2"]).exit_code == 0
    assert CliRunner().invoke(app, ["workload", "--config", path, "--team", "ml", "--units", "1"]).exit_code == 0


def test_the_landing_check_has_no_whole_node_job_on_mps_and_refuses_one_asking_for_two_units():
    stack = validate_stack(stack_config("aws", pools=[MPS_POOL, SLICED_POOL]))
    cluster = cluster_of(stack)
    mps, sliced = cluster.plans
    assert shapes(cluster, mps) == ["unit"] and shapes(cluster, sliced) == ["unit", "node"]
    assert all(v.lands for v in landing_check(stack))
    job = job_manifest(stack, mps, "image")
    assert land(cluster, None, mps, "unit", job).lands
    two = copy.deepcopy(job)
    two["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 2
    verdict = land(cluster, None, mps, "unit", two)
    assert not verdict.lands and verdict.failing.name == "device"
    assert verdict.failing.detail == ("the pod asks for 2 x nvidia.com/gpu and gets at most 1: the NVIDIA device plugin fails a pod asking "
                                      "for more than one MPS share (failRequestsGreaterThanOne is on for MPS); the pod fails on the node")
    # A whole node of the time-sliced pool: 4 slices in one pod, served.
    assert land(cluster, None, sliced, "node", job_for(cluster, None, sliced, "node")).lands


def test_gke_time_sharing_serves_one_slice_per_pod():
    stack = validate_stack(stack_config("gcp", pools=[{"name": "infer", "instanceType": "g2-standard-24", "maxNodes": 2,
                                                       "sharing": {"mode": "time-slicing", "replicas": 2}}]))
    cluster = cluster_of(stack)
    (plan,) = cluster.plans
    assert plan.hardware.gpus_per_node == 2 and shapes(cluster, plan) == ["unit"]
    assert land(cluster, None, plan, "unit").lands


def test_the_plan_says_a_pod_gets_one_mps_unit_at_most(stack_file):
    path = str(stack_file(stack_config("aws", pools=[MPS_POOL, SLICED_POOL])))
    result = CliRunner().invoke(app, ["plan", "--config", path], terminal_width=250)
    assert result.exit_code == 0, result.output
    words = " ".join(result.output.split())
    assert ("capacity nvidia.com/gpu x 16 per node x 2 nodes = 32 a pod gets at most 1 x nvidia.com/gpu: the NVIDIA device plugin fails a "
            "pod asking for more than one MPS share (failRequestsGreaterThanOne is on for MPS)") in words
    assert words.count("a pod gets at most") == 1  # not on the time-sliced pool
