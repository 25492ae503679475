"""`plan --against` reads back every plan `plan --json` writes for a stack gpupools accepts: its size limit is the
bound of `plan --json` at the stack limits (gpupools.cli.previousplan), the bound holds on the costliest plans, and a
file over it or malformed ends in one line. The largest plans read back in test_against_large.py."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.clouds.aws import KARPENTER_POOL_NAME_MAX
from gpupools.cli.previousplan import MAX_PLAN_BYTES, plan_bytes_bound
from gpupools.stack.config import MAX_POOL_LABELS, MAX_POOLS, MAX_TEAMS

runner = CliRunner()


# The longest label key Kubernetes takes: a 253-character DNS prefix and a 63-character name.
LONG_PREFIX = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])


def block_stack(pools: int, teams: int = 0, labels: int = MAX_POOL_LABELS, autoscaler: str = "karpenter") -> dict:
    """The costliest pools gpupools plans: EKS Capacity Block pools (under Karpenter, or as node groups, which
    `plan --against` compares) with the longest names they take (63 characters, 54 under Karpenter, whose NodePool
    name is a node label value) and every label a pool may have, as long as Kubernetes allows, and teams of
    63-character names that may use every pool."""
    longest = KARPENTER_POOL_NAME_MAX if autoscaler == "karpenter" else 63
    entries = [{"name": f"p{i:03d}" + "x" * (longest - 4), "instanceType": "p5.48xlarge", "maxNodes": 2,
                "labels": {f"{LONG_PREFIX}/{'k' * 60}{j:03d}": "v" * 63 for j in range(labels)},
                "capacity": [{"reservation": {"id": f"cr-{i:017x}", "kind": "capacity-block", "zones": ["us-east-2a"], "nodes": 1}}]}
               for i in range(pools)]
    config = {"aws:region": "us-east-2", "gpupools:cloud": "aws", "gpupools:cluster": {"name": "big"}, "gpupools:pools": entries,
              "gpupools:autoscaler": autoscaler}
    if teams:
        config["gpupools:teams"] = [{"name": f"t{i:03d}" + "y" * 59, "gpus": 2} for i in range(teams)]
    return config


def stack_yaml(config: dict) -> str:
    """The stack file of `config`. libyaml's writer: for these stacks (short plain keys and values) the same text as
    `yaml.safe_dump`, in a tenth of its time, which was seconds per stack of a hundred pools."""
    return yaml.dump({"config": config}, Dumper=yaml.CSafeDumper, sort_keys=False)


def plan_json(tmp_path, config: dict, name: str = "big") -> tuple:
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(stack_yaml(config))
    result = runner.invoke(app, ["plan", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.stderr
    old = tmp_path / "old.json"
    old.write_text(result.stdout)
    return path, old, len(result.stdout.encode())


def test_the_limit_is_the_bound_at_the_stack_limits():
    assert MAX_PLAN_BYTES == plan_bytes_bound(MAX_POOLS, MAX_TEAMS)
    assert MAX_PLAN_BYTES > 1024 * 1024 * 1024  # teams x pools make it gigabytes; the file is mapped, not read


@pytest.mark.parametrize("pools, teams, autoscaler", [(10, 0, "karpenter"), (30, 1, "karpenter"), (10, 3, "karpenter"),
                                                     (20, 0, "cluster-autoscaler"), (10, 1, "cluster-autoscaler")])
def test_the_bound_holds_on_the_costliest_plans(tmp_path, pools, teams, autoscaler):
    _, _, size = plan_json(tmp_path, block_stack(pools, teams, autoscaler=autoscaler))
    assert size <= plan_bytes_bound(pools, teams), (size, plan_bytes_bound(pools, teams))


def test_a_file_over_the_limit_is_refused_without_being_read(tmp_path):
    old = tmp_path / "old.json"
    with open(old, "wb") as handle:  # sparse: no disk is used for the hole
        handle.truncate(MAX_PLAN_BYTES + 1)
    result = runner.invoke(app, ["plan", "--stack", "dev-aws", "--against", str(old)])
    assert result.exit_code == 2
    assert result.stderr == (f"error: --against: {old}: larger than {MAX_PLAN_BYTES:,} bytes, the most `plan --json` writes for a "
                             f"stack of {MAX_POOLS} pools and {MAX_TEAMS:,} teams\n")


@pytest.mark.parametrize("text, expected", [
    ('{"stack": "dev-aws", "resources": [', "a list or object that does not end"),
    ('{"stack": "dev-aws", "resources": []} x', "extra data after the plan"),
    ('{"stack": "dev-aws", "stack": "dev-aws", "resources": []}', "duplicate key 'stack'"),
    ('{"stack": "dev-aws", "resources": [{"type": "aws:eks/nodeGroup:NodeGroup", "name": "a", "inputs": {"x": NaN}}]}',
     "not a finite number"),
    ('{"stack": "dev-aws", "landing": ' + "[" * 40 + "]" * 40 + ', "resources": []}', "nested more than 32 levels"),
    ("", "not valid JSON"),
])
def test_malformed_files_are_one_line(tmp_path, text, expected):
    old = tmp_path / "old.json"
    old.write_text(text)
    result = runner.invoke(app, ["plan", "--stack", "dev-aws", "--against", str(old)])
    assert result.exit_code == 2, result.stdout
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: --against: {old}: ") and expected in line, line
