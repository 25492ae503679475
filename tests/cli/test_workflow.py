"""The example CI workflow (.github/workflows/gpupools.yml) is safe against the pull request it checks: two real linters
find nothing in it (zizmor also as an auditor), no `${{ }}` expression is pasted into a script, every action is pinned
to a commit, each job holds only the permissions it uses and only the preview job secrets, from a GitHub environment,
the gate (gpupools, the policy pack, the policy config) is the base branch's, so a change that rewrites the policies is
judged by the old ones, every cloud gpupools knows goes through it, and a stack file whose name is a shell command is
refused before its name reaches a script, while the scripts themselves pass any name as one argument."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from gpupools.clouds.registry import NAMES

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


@pytest.mark.parametrize("persona", ["regular", "auditor"])
def test_zizmor_finds_nothing(persona):
    """The auditor persona adds `secrets-outside-env`: a secret read by a job with no GitHub environment."""
    result = subprocess.run([tool("zizmor"), "--offline", "--no-progress", f"--persona={persona}", str(WORKFLOW)],
                            capture_output=True, text=True, timeout=120)
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
    # And only in the preview job, which takes them from its GitHub environment, not from the repository.
    assert {name for name, job in doc["jobs"].items() if "secrets." in str(job)} == {"preview"}
    assert {name: job.get("environment") for name, job in doc["jobs"].items() if job.get("environment")} == {"preview": "gpupools-preview"}
    # No job checks out with a token left in .git/config for later steps.
    for job in doc["jobs"].values():
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


# --------------------------------------------------------------------------------------------------------------------
# A hostile file name


def _stack_files(tmp_path: Path, *names: str) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for name in names:
        (stacks / f"Pulumi.{name}.yaml").write_text("config:\n  gpupools:cloud: aws\n")
    return tmp_path


def _run_matrix_step(repo: Path, output: Path | None = None) -> tuple[subprocess.CompletedProcess, str]:
    step = next(s for s in steps("stacks") if s.get("id") == "list")
    assert step["shell"] == "python"
    output = output or repo / "github_output"
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


CHECK = '"$gate" check "${args[@]}"'
PREVIEW = 'pulumi preview "${args[@]}"'


def step_running(job: str, command: str) -> dict:
    return next(s for s in steps(job) if command in s.get("run", ""))


def _stub(bin_dir: Path, name: str, log: Path) -> None:
    """A command that only records its arguments, one per line, for the test to read."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / name
    script.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "{name}" "$@" "--end--" >> "{log}"\n')
    script.chmod(0o755)


def _calls(log: Path) -> list[list[str]]:
    calls, current = [], []
    for line in (log.read_text().splitlines() if log.exists() else []):
        if line == "--end--":
            calls.append(current)
            current = []
        else:
            current.append(line)
    return calls


def _run_step(step: dict, workspace: Path, env: dict, bin_dir: Path) -> subprocess.CompletedProcess:
    """A `run:` step as GitHub runs it: bash -e -o pipefail, in its working-directory under the workspace, with the
    runner's GITHUB_WORKSPACE and RUNNER_TEMP, and `bin_dir` first on PATH."""
    temp = workspace / "runner-temp"
    temp.mkdir(parents=True, exist_ok=True)
    cwd = workspace / step.get("working-directory", ".")
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", step["run"]], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(workspace), "GITHUB_WORKSPACE": str(workspace),
                                            "RUNNER_TEMP": str(temp), **env})


def _run_script(job: str, command: str, tmp_path: Path, env: dict) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """One script of the workflow with stubs for the commands it calls (the gate's gpupools, pulumi) and for curl, so a
    name that turned into a command would show in the log."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    for name in ("gpupools", "pulumi", "curl"):
        _stub(bin_dir, name, log)
    _stub(tmp_path / "runner-temp" / "gate" / "bin", "gpupools", log)
    return _run_step(step_running(job, command), tmp_path, env, bin_dir), _calls(log)


@pytest.mark.parametrize("job, command, extra", [("check", CHECK, {}), ("preview", PREVIEW, {"PULUMI_ORG": "", "PULUMI_BACKEND_URL": ""})])
def test_a_hostile_stack_name_is_refused_by_the_scripts_too(tmp_path, job, command, extra):
    """Were the matrix step bypassed, the scripts check the name again and run nothing with it."""
    result, calls = _run_script(job, command, tmp_path, {"STACK": HOSTILE, **extra})
    assert result.returncode == 1 and "error: matrix.stack: not a stack name Pulumi accepts" in result.stdout
    assert calls == []


def test_the_check_script_passes_the_stack_name_as_one_argument(tmp_path):
    (tmp_path / "base" / "policies").mkdir(parents=True)
    (tmp_path / "base" / "policies" / "config.json").write_text("{}")
    result, calls = _run_script("check", CHECK, tmp_path, {"STACK": "dev-aws"})
    assert result.returncode == 0, result.stderr
    config = ["--policy-config", f"{tmp_path}/base/policies/config.json"]
    assert calls == [["gpupools", "check", "--stack", "dev-aws", *config, "--json"], ["gpupools", "check", "--stack", "dev-aws", *config]]
    assert (tmp_path / "check-dev-aws.json").exists()  # the report the artifact step uploads, from the workspace


def test_the_preview_script_passes_the_stack_name_as_one_argument(tmp_path):
    env = {"STACK": "dev-aws", "PULUMI_ORG": "acme", "PULUMI_BACKEND_URL": ""}
    result, calls = _run_script("preview", PREVIEW, tmp_path, env)
    assert result.returncode == 0, result.stderr
    assert calls == [["pulumi", "preview", "--stack", "acme/dev-aws", "--policy-pack", f"{tmp_path}/base/policies", "--diff", "--non-interactive"]]


def test_the_scripts_check_names_by_the_matrix_step_s_rule():
    matrix = next(s for s in steps("stacks") if s.get("id") == "list")["run"]
    assert STACK_RULE.strip("^$") in matrix
    for job, command in (("check", CHECK), ("preview", PREVIEW)):
        assert f'[[ "$STACK" =~ {STACK_RULE} ]]' in step_running(job, command)["run"]
    assert shutil.which("bash")


# --------------------------------------------------------------------------------------------------------------------
# Every cloud gpupools knows, Gcore included


def test_every_example_stack_goes_through_the_matrix_step(tmp_path):
    result, output = _run_matrix_step(ROOT, tmp_path / "github_output")
    assert result.returncode == 0, result.stdout + result.stderr
    listed = {e["stack"]: e["cloud"] for e in json.loads(output.removeprefix("matrix="))["include"]}
    assert listed == {p.name[len("Pulumi."):-len(".yaml")]: yaml.safe_load(p.read_text())["config"]["gpupools:cloud"]
                      for p in (ROOT / "stacks").glob("Pulumi.*.yaml")}
    assert listed["dev-gcore"] == "gcore"


@pytest.mark.parametrize("cloud", NAMES)
def test_every_cloud_gpupools_knows_is_listed_installed_and_previewed(tmp_path, cloud):
    assert cloud in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    repo = tmp_path / "repo"
    (repo / "stacks").mkdir(parents=True)
    (repo / "stacks" / "Pulumi.s.yaml").write_text(f"config:\n  gpupools:cloud: {cloud}\n")
    result, output = _run_matrix_step(repo)
    assert result.returncode == 0 and json.loads(output.removeprefix("matrix=")) == {"include": [{"stack": "s", "cloud": cloud}]}
    # Both jobs install gpupools with the stack's cloud.
    bin_dir = _fake_python(tmp_path / "bin")
    for job, step in (("check", "install the gate"), ("preview", "virtualenvs for")):
        install = next(s for s in steps(job) if s.get("name", "").startswith(step))
        (tmp_path / job / "base" / "policies").mkdir(parents=True)
        result = _run_step(install, tmp_path / job, {"CLOUD": cloud}, bin_dir)
        assert result.returncode == 0, result.stdout + result.stderr
        assert any(call["args"][-1].endswith(f"[{cloud}]") for call in _pip_calls(tmp_path / job)), job
    # The preview runs once the cloud's secrets and a backend are there, and not without them.
    creds = next(s for s in steps("preview") if s.get("id") == "creds")
    secrets = {name for name, value in creds["env"].items() if "secrets." in value and name != "PULUMI_ACCESS_TOKEN"}
    for given, configured in ((secrets, "true"), (set(), "false")):
        out = tmp_path / f"output-{configured}"
        env = {"CLOUD": cloud, "PULUMI_ACCESS_TOKEN": "t", "PULUMI_BACKEND_URL": "", **{name: "" for name in secrets},
               **{name: "x" for name in given}, "GITHUB_OUTPUT": str(out)}
        assert _run_step(creds, tmp_path, env, bin_dir).returncode == 0
        assert out.read_text() == f"configured={configured}\n", (cloud, given)


@pytest.mark.parametrize("cloud", ["ibm", ""])
def test_a_cloud_gpupools_does_not_know_is_refused(tmp_path, cloud):
    repo = tmp_path / "repo"
    (repo / "stacks").mkdir(parents=True)
    (repo / "stacks" / "Pulumi.s.yaml").write_text(f"config:\n  gpupools:cloud: {cloud or '[]'}\n")
    result, output = _run_matrix_step(repo)
    assert result.returncode == 1 and output == ""
    assert result.stdout == "error: stacks/Pulumi.s.yaml: gpupools:cloud is not one of aws, azure, gcp, gcore\n"
    install = next(s for s in steps("check") if s.get("name", "").startswith("install the gate"))
    result = _run_step(install, tmp_path, {"CLOUD": cloud}, _fake_python(tmp_path / "bin"))
    assert result.returncode == 1 and _pip_calls(tmp_path) == []


def test_the_gcore_key_reaches_the_preview_of_gcore_stacks_only():
    """The Gcore resources read GCORE_API_KEY when they run (gpupools/deploy/gcore.py, client)."""
    preview = steps("preview")
    step = next(s for s in preview if PREVIEW in s.get("run", ""))
    assert step["env"]["GCORE_API_KEY"] == "${{ matrix.cloud == 'gcore' && secrets.GCORE_API_KEY || '' }}"
    assert [s.get("id") or s.get("name") for s in preview if "GCORE" in str(s)] == ["creds", step["name"]]


# --------------------------------------------------------------------------------------------------------------------
# The gate is the base branch's: a change that rewrites the policies is judged by the old ones


def _fake_python(bin_dir: Path) -> Path:
    """`python` on the runner, as far as the workflow's steps use it: `python -m venv DIR` makes a virtualenv whose pip
    records what it installs and from where, and whose `gpupools` runs the real gpupools of the tree that pip installed,
    as a console script does (the tree first on sys.path, never the working directory)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    pip = f"""#!{sys.executable}
import json, os, pathlib, sys
with open(pathlib.Path(__file__).resolve().parent.parent / "pip.log", "a") as log:
    log.write(json.dumps({{"cwd": os.getcwd(), "args": sys.argv[1:]}}) + "\\n")
"""
    gpupools = f"""#!{sys.executable}
import json, pathlib, re, sys
venv = pathlib.Path(__file__).resolve().parent.parent
(call,) = [json.loads(line) for line in (venv / "pip.log").read_text().splitlines()]
target = [a for a in call["args"] if a not in ("install", "-e")][0]
sys.path.insert(0, str((pathlib.Path(call["cwd"]) / re.sub(r"\\[.*\\]$", "", target)).resolve()))
sys.argv = ["gpupools", *sys.argv[1:]]
from gpupools.cli.main import main
main()
"""
    python = f"""#!{sys.executable}
import pathlib, sys
args = sys.argv[1:]
if args[:2] != ["-m", "venv"] or len(args) != 3:
    sys.exit(f"fake python: unexpected call {{args}}")
venv = pathlib.Path(args[2]).absolute()
(venv / "bin").mkdir(parents=True, exist_ok=True)
for name, text in (("pip", {pip!r}), ("gpupools", {gpupools!r})):
    (venv / "bin" / name).write_text(text)
    (venv / "bin" / name).chmod(0o755)
"""
    (bin_dir / "python").write_text(python)
    (bin_dir / "python").chmod(0o755)
    return bin_dir


def _pip_calls(root: Path) -> list[dict]:
    """What every virtualenv made under `root` installed, and from which directory."""
    return [{**json.loads(line), "venv": str(log.parent)} for log in sorted(root.rglob("pip.log")) for line in log.read_text().splitlines()]


# The pull request: it takes the guard that keeps `all` from lowering the security policies out of the pack, and its own
# policy config turns every policy off.
TAMPERED_PACK = "\nSECURITY_POLICIES = frozenset()\n"
TAMPERED_CONFIG = {"all": "disabled"}
# The stack it brings: a new EKS cluster whose API endpoint is open to the internet and whose Secrets are not
# envelope-encrypted, which two mandatory security policies of the base branch fail.
OPEN_STACK = {"aws:region": "eu-central-1", "gpupools:cloud": "aws",
              "gpupools:cluster": {"name": "ml-open", "endpointAccess": "public", "secretsEncryption": False},
              "gpupools:pools": [{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3}]}


def _tree(to: Path) -> Path:
    """A checkout of this repository's gpupools project (what `pip install` and the pack need of it), with the bytecode
    this tree has compiled: the gate's gpupools runs would otherwise compile every module again, and Python takes a
    module's .pyc only while it names the source's size and time, which the copy keeps (a file the test changes is
    compiled from its new source)."""
    ignore = shutil.ignore_patterns("*.pyc.*")  # only half-written bytecode is left out
    for name in ("gpupools", "policies"):
        shutil.copytree(ROOT / name, to / name, ignore=ignore)
    for name in ("pyproject.toml", "Pulumi.yaml", "__main__.py", "README.md"):
        shutil.copy(ROOT / name, to / name)
    return to


@pytest.fixture
def workspace(tmp_path) -> Path:
    """The runner's workspace once the gate jobs' checkouts ran: change/, the pull request (a rewritten pack and policy
    config, and a stack the base branch's policies fail), and base/, the branch it goes into (this tree)."""
    ws = tmp_path / "ws"
    change, base = _tree(ws / "change"), _tree(ws / "base")
    with open(change / "gpupools" / "policies" / "pack.py", "a") as pack:
        pack.write(TAMPERED_PACK)
    (change / "policies" / "config.json").write_text(json.dumps(TAMPERED_CONFIG))
    (change / "stacks").mkdir()
    (change / "stacks" / "Pulumi.ci-open.yaml").write_text(yaml.safe_dump({"config": OPEN_STACK}))
    assert not (base / "policies" / "config.json").exists()
    return ws


def test_every_gate_step_runs_from_the_base_checkout():
    for job in ("check", "preview"):
        checkouts = [s for s in steps(job) if s.get("uses", "").startswith("actions/checkout@")]
        assert [c["with"].get("path") for c in checkouts] == ["change", "base"], job
        assert "ref" not in checkouts[0]["with"]
        assert checkouts[1]["with"]["ref"] == "${{ github.event.pull_request.base.sha || github.sha }}"
        assert "sparse-checkout" not in checkouts[1]["with"]  # the whole base tree: gpupools, the pack, the config
        for step in steps(job):
            script = step.get("run", "")
            # gpupools itself only from the gate's virtualenv, the pack only from base/.
            assert not re.search(r"(?m)(^|[;&|])\s*gpupools\s", script), (job, script)
            assert set(re.findall(r"--policy-pack[-\w]* \"[^\"]*\"", script)) <= {'--policy-pack "$pack"', '--policy-pack-config "$pack/config.json"'}
            if re.search(r"(?m)(^|[;&|])\s*pulumi\s+preview\s", script):
                assert 'pack="$GITHUB_WORKSPACE/base/policies"' in script and '--policy-pack "$pack"' in script
                assert 'args+=(--policy-pack-config "$pack/config.json")' in script
                assert step["working-directory"] == "change"
    check = step_running("check", CHECK)
    assert 'gate="$RUNNER_TEMP/gate/bin/gpupools"' in check["run"] and check["working-directory"] == "change"
    assert 'config="$GITHUB_WORKSPACE/base/policies/config.json"' in check["run"]


def test_a_change_that_rewrites_the_policies_is_judged_by_the_base_branch(workspace):
    bin_dir = _fake_python(workspace / "bin")
    install = next(s for s in steps("check") if s.get("name", "").startswith("install the gate"))
    result = _run_step(install, workspace, {"CLOUD": "aws"}, bin_dir)
    assert result.returncode == 0, result.stderr
    (call,) = _pip_calls(workspace)
    assert call["venv"] == str(workspace / "runner-temp" / "gate")  # outside the workspace the change is checked out in
    assert (Path(call["cwd"]) / call["args"][-1].removesuffix("[aws]")).resolve() == workspace / "base"

    result = _run_step(step_running("check", CHECK), workspace, {"STACK": "ci-open"}, bin_dir)
    assert result.returncode == 1, result.stdout + result.stderr
    summary = result.stdout.strip().splitlines()[-1]
    assert summary.startswith("gpupools check FAILED: stack ci-open") and "2 mandatory" in summary, summary
    report = json.loads((workspace / "check-ci-open.json").read_text())
    assert {v["policy"] for v in report["violations"] if v["level"] == "mandatory"} == {"cluster-endpoint-restricted", "eks-secrets-encryption"}
    assert report["policy_config"] == {"weakened": [], "warnings": [], "notes": []}  # the change's own config was not read

    # Judged by its own gpupools and policy config, as the workflow judged a change before, it passes.
    (workspace / "runner-temp" / "gate" / "pip.log").write_text(json.dumps({"cwd": str(workspace), "args": ["install", "./change[aws]"]}) + "\n")
    result = subprocess.run([str(workspace / "runner-temp" / "gate" / "bin" / "gpupools"), "check", "--stack", "ci-open", "--policy-config",
                             "policies/config.json"], cwd=workspace / "change", capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "gpupools check passed: stack ci-open, 0 policies" in result.stdout, result.stdout + result.stderr


def test_the_preview_loads_the_base_branch_s_pack(workspace):
    bin_dir = _fake_python(workspace / "bin")
    venvs = next(s for s in steps("preview") if s.get("name", "").startswith("virtualenvs for"))
    result = _run_step(venvs, workspace, {"CLOUD": "aws"}, bin_dir)
    assert result.returncode == 0, result.stderr
    calls = {Path(c["venv"]).relative_to(workspace).as_posix(): c for c in _pip_calls(workspace)}
    assert set(calls) == {"change/.venv", "base/policies/venv"}
    # The program is the change's; the pack's venv installs policies/requirements.txt of base/, whose `..` is base/.
    assert calls["change/.venv"]["args"] == ["install", "-e", "./change[aws]"] and calls["change/.venv"]["cwd"] == str(workspace)
    assert calls["base/policies/venv"] == {"cwd": str(workspace / "base" / "policies"), "args": ["install", "-r", "requirements.txt"],
                                           "venv": str(workspace / "base" / "policies" / "venv")}
    assert (workspace / "base" / "policies" / "requirements.txt").read_text().splitlines()[-1] == ".."

    shutil.copy(workspace / "change" / "policies" / "config.json", workspace / "base" / "policies" / "config.json")
    log = workspace / "calls.log"
    _stub(bin_dir, "pulumi", log)
    result = _run_step(step_running("preview", PREVIEW), workspace, {"STACK": "ci-open", "PULUMI_ORG": "", "PULUMI_BACKEND_URL": ""}, bin_dir)
    assert result.returncode == 0, result.stderr
    pack = str(workspace / "base" / "policies")
    assert _calls(log) == [["pulumi", "preview", "--stack", "ci-open", "--policy-pack", pack, "--diff", "--non-interactive",
                            "--policy-pack-config", f"{pack}/config.json"]]
