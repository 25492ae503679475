"""The command line as users run it: plan (human and JSON), catalog, render, workload, and exit status 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

from gpupools.cli.main import app

from conftest import ROOT, stack_config, write_stack

runner = CliRunner()
STACKS = ["dev-aws", "dev-azure", "dev-gcp"]


def invoke(*args):
    return runner.invoke(app, list(args))


@pytest.mark.parametrize("stack", STACKS)
def test_plan_json_contract(stack):
    result = invoke("plan", "--stack", stack, "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {"project", "stack", "cloud", "resources", "outputs", "landing", "warnings"}
    assert doc["warnings"] == []  # the example stacks are meant as they are written
    # Whether each team's job lands: the stack output without the chain of steps, the top-level list with it.
    assert [{k: v for k, v in row.items() if k != "chain"} for row in doc["landing"]] == doc["outputs"]["landing"]
    assert all(row["lands"] and [s["step"] for s in row["chain"]][-4:] == ["schedule", "node", "ready", "device"] for row in doc["landing"])
    assert doc["project"] == "gpupools" and doc["stack"] == stack and doc["cloud"] == stack.split("-")[1]
    for r in doc["resources"]:
        assert set(r) == {"type", "name", "parent", "inputs"}
    names = {r["name"] for r in doc["resources"]}
    assert all(r["parent"] is None or r["parent"] in names for r in doc["resources"])
    assert doc["outputs"]["kubeconfig"] == "[secret]"
    assert [p["name"] for p in doc["outputs"]["pools"]] == [p["name"] for p in yaml.safe_load(
        (ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]["gpupools:pools"]]


def test_plan_json_is_deterministic():
    first = invoke("plan", "--stack", "dev-aws", "--json").stdout
    second = invoke("plan", "--stack", "dev-aws", "--json").stdout
    assert first == second


def test_plan_json_masks_secrets(tmp_path):
    path = write_stack(tmp_path, {**stack_config("aws")})
    doc = json.loads(invoke("plan", "--config", str(path), "--json").stdout)
    provider = [r for r in doc["resources"] if r["type"] == "pulumi:providers:kubernetes"][0]
    assert provider["inputs"]["kubeconfig"] == "[secret]"


def test_plan_human_output_per_pool():
    result = invoke("plan", "--stack", "dev-aws")
    assert result.exit_code == 0
    out = result.stdout
    for expected in ("pool infer", "pool train", "g5.2xlarge: 1 x A10G (24 GB), spot", "min 0, max 6",
                     "nvidia.com/gpu=present:NoSchedule", "gpupools.io/pool=infer", "time-slicing x4",
                     "nvidia.com/mig-3g.40gb x 16 per node x 2 nodes = 32", "nodepool-gpupools-infer",
                     "autoscaler: Karpenter (installed)",
                     "scales from zero: NodePool gpupools-train + NodeOverlay gpupools-train, 16 x nvidia.com/mig-3g.40gb per node",
                     "helm release gpu-operator: chart gpu-operator v26.7.0", "helm release karpenter: chart oci://public.ecr.aws/karpenter/karpenter 1.14.1",
                     "GPU nodes cost $0.000/h at minNodes"):
        assert expected in out, expected


def test_plan_cost_range_uses_list_prices(tmp_path):
    path = write_stack(tmp_path, stack_config("aws", pools=[{"name": "a", "instanceType": "g5.2xlarge", "minNodes": 1, "maxNodes": 3}]))
    out = invoke("plan", "--config", str(path)).stdout
    assert "$1.212/h at minNodes ... $3.636/h at maxNodes (3 GPUs at most)" in out


def test_catalog_lists_every_cloud_and_filters():
    result = invoke("catalog", "--json")
    rows = json.loads(result.stdout)
    assert {r["cloud"] for r in rows} == {"aws", "azure", "gcp", "gcore"}
    aws = json.loads(invoke("catalog", "--cloud", "aws", "--json").stdout)
    assert {r["cloud"] for r in aws} == {"aws"}
    p4d = [r for r in aws if r["instanceType"] == "p4d.24xlarge"][0]
    assert (p4d["gpu"], p4d["gpus"], "1g.5gb" in p4d["mig"]) == ("A100-40GB", 8, True)
    human = invoke("catalog", "--cloud", "gcp").stdout
    assert "a3-megagpu-8g" in human and "nvidia-tesla-v100" in human


def test_catalog_names_the_types_it_refuses_with_the_reason():
    from gpupools.core.catalog import load_catalog

    refused = load_catalog().refused
    text = " ".join(runner.invoke(app, ["catalog", "--cloud", "azure"], terminal_width=250).stdout.split())
    assert "Known and refused" in text
    assert f"azure Standard_NV36ads_A10_v5: {refused['azure']['Standard_NV36ads_A10_v5']}" in text
    assert not re.search(r"\b(aws|gcp) [a-z0-9.-]+:", text)  # only the cloud asked for: no "<cloud> <type>:" of another
    everything = " ".join(runner.invoke(app, ["catalog"], terminal_width=250).stdout.split())
    assert all(f"{c} {name}:" in everything for c, types in refused.items() for name in types)
    rows = json.loads(invoke("catalog", "--json").stdout)  # the JSON lists what gpupools builds pools of
    assert not {r["instanceType"] for r in rows} & {name for types in refused.values() for name in types}


def test_catalog_bad_cloud_exits_2():
    result = invoke("catalog", "--cloud", "oci")
    assert result.exit_code == 2
    assert result.stderr == "error: --cloud: 'oci' is not a cloud gpupools supports; allowed: aws, azure, gcp, gcore\n"


@pytest.mark.parametrize("command", ["plan", "render", "workload"])
def test_bad_stack_exits_2_with_field_lines(tmp_path, command):
    path = write_stack(tmp_path, {"gpupools:cloud": "aws", "gpupools:pools": 7})
    extra = {"render": ["--out", str(tmp_path / "out")], "workload": ["--pool", "x"]}.get(command, [])
    result = invoke(command, "--config", str(path), *extra)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert "error: cluster: required, but missing" in lines
    assert "error: pools: expected a list, got a number of 1 digit" in lines
    assert all(line.startswith("error: ") for line in lines)


def test_unknown_stack_name_exits_2():
    result = invoke("plan", "--stack", "nope")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --stack: no stack 'nope'")
    assert "dev-aws" in result.stderr


def test_real_process_has_no_traceback(tmp_path):
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text("config:\n  gpupools:cloud: aws\n  gpupools:pools: [\n")
    proc = subprocess.run([sys.executable, "-m", "gpupools.cli.main", "plan", "--config", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {path}: not valid YAML at line")


def test_workload_job_lands_on_the_pool():
    result = invoke("workload", "--stack", "dev-aws", "--pool", "train")
    assert result.exit_code == 0, result.stderr
    job = yaml.safe_load(result.stdout)
    spec = job["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"gpupools.io/pool": "train"}
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-3g.40gb": 1}


def test_workload_on_azure_spot_pool_tolerates_spot():
    job = yaml.safe_load(invoke("workload", "--stack", "dev-azure", "--pool", "finetune").stdout)
    tolerations = job["spec"]["template"]["spec"]["tolerations"]
    assert any(t["key"] == "kubernetes.azure.com/scalesetpriority" for t in tolerations)


def test_workload_unknown_pool_exits_2():
    result = invoke("workload", "--stack", "dev-aws", "--pool", "nope")
    assert result.exit_code == 2
    assert result.stderr == "error: --pool: 'nope' is not a pool of this stack; pools: infer, batch, train, pretrain\n"


def test_team_workload_queues_for_the_team():
    result = invoke("workload", "--stack", "dev-aws", "--team", "search")
    assert result.exit_code == 0, result.stderr
    job = yaml.safe_load(result.stdout)
    assert job["metadata"]["namespace"] == "search-prod"
    assert job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "search", "kueue.x-k8s.io/priority-class": "high"}
    assert job["spec"]["suspend"] is True
    spec = job["spec"]["template"]["spec"]
    assert "nodeSelector" not in spec and "tolerations" not in spec  # Kueue adds the flavor's on admission
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}


@pytest.mark.parametrize("args, message", [
    (["--team", "nobody"], "error: --team: 'nobody' is not a team of this stack; teams: research, search\n"),
    # research's pools in the order its stack file names them: gpus: {train: 24, infer: 8, pretrain: 16}
    (["--team", "research"], "error: --pool: team research's pools offer different GPU resources: train (nvidia.com/mig-3g.40gb), "
                             "infer (nvidia.com/gpu), pretrain (nvidia.com/gpu); choose one with --pool\n"),
    (["--team", "research", "--pool", "batch"], "error: --pool: 'batch' is not a pool of team research; its pools: train, infer, pretrain\n"),
    (["--team", "research", "--pool", "infer", "--priority", "high"], "error: --priority: team research may use normal, low; got 'high'\n"),
    (["--team", "search", "--units", "5"], "error: --units: 5 exceeds what one node offers (4 x nvidia.com/gpu)\n"),
    (["--pool", "infer", "--priority", "low"], "error: --priority: only with --team\n"),
    ([], "error: --pool: give --pool (one of infer, batch, train, pretrain) or --team\n"),
])
def test_team_workload_mistakes_exit_2(args, message):
    result = invoke("workload", "--stack", "dev-aws", *args)
    assert (result.exit_code, result.stderr) == (2, message)


def test_render_writes_values_and_manifests(tmp_path):
    out = tmp_path / "out"
    result = invoke("render", "--stack", "dev-aws", "--out", str(out))
    assert result.exit_code == 0, result.stderr
    values = yaml.safe_load((out / "gpu-operator.values.yaml").read_text())
    assert values["driver"]["enabled"] is False
    assert values["devicePlugin"]["config"]["name"] == "gpupools-device-plugin-config"
    cm = yaml.safe_load((out / "manifests" / "configmap-gpu-operator-gpupools-device-plugin-config.yaml").read_text())
    assert yaml.safe_load(cm["data"]["time-slicing-4"])["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 4


def test_plan_json_carries_each_pools_scale_up_path():
    result = invoke("plan", "--stack", "dev-aws-existing", "--json")
    assert result.exit_code == 0
    pools = {p["name"]: p for p in json.loads(result.stdout)["outputs"]["pools"]}
    assert pools["train"]["autoscaler"] == "cluster-autoscaler"
    assert pools["train"]["scaleUp"] == ("scales from zero: Auto Scaling group tags of node group train, "
                                         "56 x nvidia.com/mig-1g.5gb per node")


def test_the_text_plan_prints_a_colon_word_as_written(capsys):
    """Text such as `:cloud:` is printed as written, never turned into an emoji (rich's default, and a tenth of the time
    the text plan took)."""
    from gpupools.cli.planreport import print_plan
    from gpupools.cli.planrun import run_program
    from gpupools.validation.stack import validate_stack

    config = stack_config("aws")
    result = run_program(config, "the:cloud:said:thumbs_up:")
    print_plan(validate_stack(config), result)
    assert "stack the:cloud:said:thumbs_up:," in capsys.readouterr().out
