"""`gpupools workload` says on stderr when the Job it prints would not land, naming the step it stops at; a Job that
lands is printed without a word, and stdout is the same either way."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import stack_config, write_stack
from gpupools.cli.main import app

SKU = {"key": "sku", "value": "gpu", "effect": "NoSchedule"}
SKU_TOLERATION = {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


def tainted_stack(tolerations: list[dict] | None, quotas: str = "kueue") -> dict:
    research = {"name": "research", "gpus": {"infer": 2}, **({"tolerations": tolerations} if tolerations is not None else {})}
    pools = [{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3, "taints": [SKU]}]
    return stack_config("aws", pools=pools, teams=[research], quotas=quotas)


def workload(tmp_path, config: dict, *args: str):
    path = write_stack(tmp_path, config)
    return CliRunner().invoke(app, ["workload", "--config", str(path), *args])


# Kueue keeps it out of the flavor (the flavor's nodeTaints); KAI leaves taints to the scheduler.
@pytest.mark.parametrize("quotas, step", [("kueue", "queue"), ("kai", "schedule")])
def test_a_team_job_that_would_not_land_is_said_on_stderr(tmp_path, quotas, step):
    result = workload(tmp_path, tainted_stack(None, quotas), "--team", "research", "--pool", "infer")
    assert result.exit_code == 0 and "kind: Job" in result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"warning: this Job does not land on pool infer: it stops at {step}: ")
    assert "sku" in lines[0] and lines[0].endswith(" (--explain shows every step)")


@pytest.mark.parametrize("quotas", ["kueue", "kai"])
def test_the_same_job_once_the_team_tolerates_the_taint_is_printed_without_a_word(tmp_path, quotas):
    result = workload(tmp_path, tainted_stack([SKU_TOLERATION], quotas), "--team", "research", "--pool", "infer")
    assert (result.exit_code, result.stderr) == (0, "") and "kind: Job" in result.stdout


def test_stdout_is_the_job_whether_or_not_it_lands(tmp_path):
    refused = workload(tmp_path, tainted_stack(None), "--team", "research", "--pool", "infer").stdout
    landed = workload(tmp_path, tainted_stack([SKU_TOLERATION]), "--team", "research", "--pool", "infer").stdout
    assert refused.startswith("apiVersion: batch/v1") and landed.startswith("apiVersion: batch/v1")
    assert "key: sku" in landed and "key: sku" not in refused and "warning" not in refused


def test_with_explain_the_comment_says_it_and_stderr_names_the_step(tmp_path):
    result = workload(tmp_path, tainted_stack(None), "--team", "research", "--pool", "infer", "--explain")
    assert result.stdout.startswith("# landing: DOES NOT LAND") and "#   FAIL schedule:" in result.stdout
    assert result.stderr.startswith("warning: this Job does not land on pool infer: it stops at queue: ")
    assert "--explain" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_a_pools_own_job_tolerates_its_pool_and_lands_silently(tmp_path):
    result = workload(tmp_path, tainted_stack(None), "--pool", "infer")
    assert (result.exit_code, result.stderr) == (0, "") and "key: sku" in result.stdout


def test_a_team_job_without_pool_is_left_to_its_queue(tmp_path):
    result = workload(tmp_path, tainted_stack(None), "--team", "research")
    assert (result.exit_code, result.stderr) == (0, "")
