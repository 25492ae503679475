"""Mistakes a new user makes first: each ends in one `error:` line and exit 2, and what the plan shows is what deploys."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.pools.planning import plan_pools
from gpupools.queues.engine import quota_plan, team_rows
from gpupools.validation.stack import validate_stack

from conftest import ROOT, stack_config, write_stack

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args))


def one_error(result, field: str) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), result.stderr
    assert "Traceback" not in result.output and "╭" not in result.output
    return lines[0]


def test_a_directory_as_config(tmp_path):
    assert "is a directory" in one_error(invoke("plan", "--config", str(tmp_path)), "--config")


def test_workload_units_zero():
    assert "1 or more" in one_error(invoke("workload", "--stack", "dev-aws", "--pool", "infer", "--units", "0"), "--units")


def test_render_out_onto_a_file(tmp_path):
    target = tmp_path / "values.yaml"
    target.write_text("x")
    assert "is a file" in one_error(invoke("render", "--stack", "dev-aws", "--out", str(target)), "--out")


def test_stack_says_which_file_it_read():
    result = invoke("plan", "--stack", "dev-azure")
    assert result.exit_code == 0, result.output
    assert f"stack dev-azure (read from {ROOT / 'stacks' / 'Pulumi.dev-azure.yaml'})" in " ".join(result.stdout.split())


def test_stack_outside_a_project_does_not_fall_back_to_the_package(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "no Pulumi project" in one_error(invoke("plan", "--stack", "dev-aws"), "--stack")


def test_team_table_lend_is_the_cluster_queues_lending_limit():
    stack = validate_stack(stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 6},
                                                      {"name": "batch", "instanceType": "g6.xlarge", "maxNodes": 8}],
                                        teams=[{"name": "a", "gpus": {"infer": 2, "batch": 8}, "lend": 5}]))
    plans = plan_pools(stack)
    (queue,) = [o for o in quota_plan(stack, plans, scrape={}).objects if o["kind"] == "ClusterQueue"]
    limits = {f["name"]: f["resources"][0]["lendingLimit"] for group in queue["spec"]["resourceGroups"] for f in group["flavors"]}
    assert limits == {"infer": 2, "batch": 5}
    assert team_rows(stack, plans)[0]["lend"] == "infer 2, batch 5"


@pytest.mark.parametrize("text, number", [("1:30", "90"), ("1.30", "1.3")])
def test_unquoted_kubernetes_version_gets_a_hint(tmp_path, text, number):
    path = tmp_path / "Pulumi.v.yaml"
    path.write_text(f"config:\n  aws:region: eu-central-1\n  gpupools:cloud: aws\n  gpupools:cluster: {{name: t, kubernetesVersion: {text}}}\n"
                    f"  gpupools:pools: [{{name: a, instanceType: g5.2xlarge, maxNodes: 1}}]\n")
    if text == "1:30":  # YAML 1.1 and 1.2 disagree on it (90 or a string): refused, naming the field and the line
        line = one_error(invoke("plan", "--config", str(path)), "cluster.kubernetesVersion")
        assert f"the number {number}" in line and "not a Kubernetes minor version" in line and "line 4" in line
        return
    line = one_error(invoke("plan", "--config", str(path)), "cluster.kubernetesVersion")
    assert f"the number {number}" in line and 'kubernetesVersion: "1.30"' in line


def test_bottlerocket_sharing_change_is_the_node_class_user_data():
    out = " ".join(invoke("plan", "--stack", "dev-aws").stdout.split())
    assert "a sharing change updates the EC2NodeClass user data (Bottlerocket settings)" in out
    bottlerocket = [p for p in yaml.safe_load((ROOT / "stacks" / "Pulumi.dev-aws.yaml").read_text())["config"]["gpupools:pools"]
                    if p.get("os") == "bottlerocket"]
    assert out.count("EC2NodeClass user data") == len(bottlerocket) == 1


def test_authorized_everyone_is_not_shown_as_restricted(tmp_path):
    path = write_stack(tmp_path, stack_config("aws", cluster={"name": "t", "authorizedCidrs": ["0.0.0.0/0"]}))
    out = " ".join(invoke("plan", "--config", str(path)).stdout.split())
    assert "API endpoint: open to the whole internet" in out and "restricted to 0.0.0.0/0" not in out
