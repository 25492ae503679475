"""The example CI workflow (.github/workflows/gpupools.yml) is safe against the pull request it checks: two real linters
find nothing in it, no `${{ }}` expression is pasted into a script, every action is pinned to a commit, each job holds
only the permissions it uses, the policy config comes from the base branch, and a stack file whose name is a shell
command is refused before its name reaches a script, while the scripts themselves pass any name as one argument."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "gpupools.yml"
BIN = Path(sys.executable).parent
HOSTILE = 'x"; curl evil "'  # stacks/Pulumi.x"; curl evil ".yaml
STACK_RULE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def steps(job: str) -> list[dict]:
    return workflow()["jobs"][job]["steps"]


def tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} is missing from {BIN}: it comes with the test extra (pip install -e '.[test]', or ./dev test)")
    return str(path)


def test_zizmor_finds_nothing():
    result = subprocess.run([tool("zizmor"), "--offline", "--no-progress", str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings" in result.stdout + result.stderr


def test_actionlint_finds_nothing_with_shellcheck_on_the_scripts():
    result = subprocess.run([tool("actionlint"), "-shellcheck", tool("shellcheck"), "-no-color", str(WORKFLOW)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_expression_is_pasted_into_a_script():
    for name, job in workflow()["jobs"].items():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), (name, step.get("name"), step["run"])


def test_every_action_is_pinned_to_a_commit_and_names_its_release():
    lines = [line for line in WORKFLOW.read_text().splitlines() if re.match(r"\s*(- )?uses:", line)]
    assert lines
    for line in lines:
        assert re.search(r"uses: [\w.-]+/[\w.-]+@[0-9a-f]{40}  # v[0-9]+\.[0-9]+\.[0-9]+$", line), line


def test_permissions_are_least_privilege():
    doc = workflow()
    assert doc["permissions"] == {}
    for name, job in doc["jobs"].items():
        wanted = {"contents": "read", "id-token": "write"} if name == "preview" else {"contents": "read"}
        assert job["permissions"] == wanted, name
    # Secrets only in the steps that use them, never job-wide.
    assert all("secrets." not in str(job.get("env", {})) for job in doc["jobs"].values())
    # No job checks out with a token left in .git/config for later steps.
    for job in doc["jobs"].values():
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


def test_the_policy_config_comes_from_the_base_branch():
    for job, command in (("check", "gpupools check \"${args[@]}\""), ("preview", "pulumi preview \"${args[@]}\"")):
        base = [s for s in steps(job) if s.get("uses", "").startswith("actions/checkout@") and s.get("with", {}).get("path")]
        assert base and base[0]["with"]["ref"] == "${{ github.event.pull_request.base.sha || github.sha }}", job
        script = next(s["run"] for s in steps(job) if command in s.get("run", ""))
        assert f"{base[0]['with']['path']}/policies/config.json" in script and " policies/config.json" not in script


# --------------------------------------------------------------------------------------------------------------------
# A hostile file name


def _stack_files(tmp_path: Path, *names: str) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for name in names:
        (stacks / f"Pulumi.{name}.yaml").write_text("config:\n  gpupools:cloud: aws\n")
    return tmp_path


def _run_matrix_step(repo: Path) -> tuple[subprocess.CompletedProcess, str]:
    step = next(s for s in steps("stacks") if s.get("id") == "list")
    assert step["shell"] == "python"
    output = repo / "github_output"
    output.write_text("")
    result = subprocess.run([sys.executable, "-c", step["run"]], cwd=repo, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "GITHUB_OUTPUT": str(output)})
    return result, output.read_text()


def test_the_matrix_step_refuses_a_file_name_that_is_no_stack_name(tmp_path):
    repo = _stack_files(tmp_path, "dev-aws", HOSTILE, "a$(touch pwned)", "b\n::add-mask::x")
    result, output = _run_matrix_step(repo)
    assert result.returncode == 1 and output == ""
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("error: stacks/: ") for line in lines), result.stdout
    assert not (repo / "pwned").exists()


def test_the_matrix_step_lists_good_names(tmp_path):
    repo = _stack_files(tmp_path, "dev-aws", "prod_eu.1")
    result, output = _run_matrix_step(repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert output == 'matrix={"include": [{"stack": "dev-aws", "cloud": "aws"}, {"stack": "prod_eu.1", "cloud": "aws"}]}\n'


def _stub(bin_dir: Path, name: str, log: Path) -> None:
    """A command that only records its arguments, one per line, for the test to read."""
    script = bin_dir / name
    script.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "{name}" "$@" "--end--" >> "{log}"\n')
    script.chmod(0o755)


def _run_script(job: str, command: str, tmp_path: Path, env: dict) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """One `run:` script of the workflow as GitHub runs it (bash -e -o pipefail), with stubs for the commands it calls
    and for curl, so a name that turned into a command would show in the log."""
    script = next(s["run"] for s in steps(job) if command in s.get("run", ""))
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir(exist_ok=True)
    for name in ("gpupools", "pulumi", "curl"):
        _stub(bin_dir, name, log)
    result = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", script], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60, env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), **env})
    calls, current = [], []
    for line in (log.read_text().splitlines() if log.exists() else []):
        if line == "--end--":
            calls.append(current)
            current = []
        else:
            current.append(line)
    return result, calls


@pytest.mark.parametrize("job, command, extra", [("check", "gpupools check \"${args[@]}\"", {}),
                                                 ("preview", "pulumi preview \"${args[@]}\"", {"PULUMI_ORG": "", "PULUMI_BACKEND_URL": ""})])
def test_a_hostile_stack_name_is_refused_by_the_scripts_too(tmp_path, job, command, extra):
    """Were the matrix step bypassed, the scripts check the name again and run nothing with it."""
    result, calls = _run_script(job, command, tmp_path, {"STACK": HOSTILE, **extra})
    assert result.returncode == 1 and "error: matrix.stack: not a stack name Pulumi accepts" in result.stdout
    assert calls == []


def test_the_check_script_passes_the_stack_name_as_one_argument(tmp_path):
    (tmp_path / ".gpupools-base" / "policies").mkdir(parents=True)
    (tmp_path / ".gpupools-base" / "policies" / "config.json").write_text("{}")
    result, calls = _run_script("check", "gpupools check \"${args[@]}\"", tmp_path, {"STACK": "dev-aws"})
    assert result.returncode == 0, result.stderr
    config = ["--policy-config", ".gpupools-base/policies/config.json"]
    assert calls == [["gpupools", "check", "--stack", "dev-aws", *config], ["gpupools", "check", "--stack", "dev-aws", *config, "--json"]]


def test_the_preview_script_passes_the_stack_name_as_one_argument(tmp_path):
    env = {"STACK": "dev-aws", "PULUMI_ORG": "acme", "PULUMI_BACKEND_URL": ""}
    result, calls = _run_script("preview", "pulumi preview \"${args[@]}\"", tmp_path, env)
    assert result.returncode == 0, result.stderr
    assert calls == [["pulumi", "preview", "--stack", "acme/dev-aws", "--policy-pack", "policies", "--diff", "--non-interactive"]]


def test_the_scripts_check_names_by_the_matrix_step_s_rule():
    matrix = next(s for s in steps("stacks") if s.get("id") == "list")["run"]
    assert STACK_RULE.strip("^$") in matrix
    for job, command in (("check", "gpupools check \"${args[@]}\""), ("preview", "pulumi preview \"${args[@]}\"")):
        assert f'[[ "$STACK" =~ {STACK_RULE} ]]' in next(s["run"] for s in steps(job) if command in s.get("run", ""))
    assert shutil.which("bash")
