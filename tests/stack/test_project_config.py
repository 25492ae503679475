"""Project-level config: `config:` of Pulumi.yaml, which `pulumi preview` and `pulumi up` merge into every stack of the
project (a key the stack file sets wins), is merged by `gpupools plan` and `check` the same way, so what passes
offline is what deploys. ESC environments a stack file imports cannot be opened offline: one warning line each."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.stack.errors import ConfigError
from gpupools.stack.project import environment_warnings, merge_project_config, project_config

from conftest import stack_config

runner = CliRunner()
# A GPU Operator below the oldest release the pack allows (gpupools/policies/helm.py MINIMUM_VERSIONS), and GPU nodes
# that take work before they are validated.
OLD_OPERATOR = "v24.9.0"


def project(tmp_path, config, stack: dict, name: str = "gpupools", environment=None):
    """A project folder as `pulumi new` lays it out, with one stack, `s`."""
    doc = {"name": name, "runtime": "python", "stackConfigDir": "stacks"}
    if config is not None:
        doc["config"] = config
    (tmp_path / "Pulumi.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    (tmp_path / "stacks").mkdir()
    stack_doc = {"config": stack, **({"environment": environment} if environment is not None else {})}
    (tmp_path / "stacks" / "Pulumi.s.yaml").write_text(yaml.safe_dump(stack_doc, sort_keys=False))
    return tmp_path


def run(tmp_path, monkeypatch, *args):
    monkeypatch.chdir(tmp_path)
    return runner.invoke(app, list(args))


LOOSENED = {"gpupools:health": {"value": {"readinessGate": False}}, "gpupools:gpuSoftware": {"default": {"version": OLD_OPERATOR}}}


@pytest.mark.parametrize("how", [("--stack", "s"), ("--config", "stacks/Pulumi.s.yaml")])
def test_project_config_is_judged_as_it_deploys(tmp_path, monkeypatch, how):
    project(tmp_path, LOOSENED, stack_config("aws"))
    result = run(tmp_path, monkeypatch, "check", *how, "--json")
    assert result.exit_code == 1, result.stdout + result.stderr
    violations = json.loads(result.stdout)["violations"]
    pinned = [v for v in violations if v["policy"] == "helm-release-pinned"]
    assert len(pinned) == 1 and pinned[0]["level"] == "mandatory" and f"version '{OLD_OPERATOR}' is older than v25.3.1" in pinned[0]["message"]
    assert any(v["policy"] == "gpu-node-readiness" for v in violations)


def test_a_key_the_stack_file_sets_wins_whole(tmp_path, monkeypatch):
    # The stack file's gpuSoftware has no version: Pulumi keeps the stack's whole value, so the project's version is not used.
    project(tmp_path, LOOSENED, stack_config("aws", gpuSoftware={"installer": "gpu-operator"}, health={"readinessGate": True}))
    result = run(tmp_path, monkeypatch, "check", "--stack", "s", "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    policies = {v["policy"] for v in json.loads(result.stdout)["violations"]}
    assert not policies & {"helm-release-pinned", "gpu-node-readiness"}


@pytest.mark.parametrize("name, config, key, value", [
    # Short forms: a key of the project's namespace, with or without the namespace, takes its `default`.
    ("gpupools", {"quotas": "none"}, "gpupools:quotas", "none"),
    ("gpupools", {"gpupools:quotas": "none"}, "gpupools:quotas", "none"),
    ("gpupools", {"gpupools:quotas": {"default": "none", "type": "string", "description": "who queues"}}, "gpupools:quotas", "none"),
    ("gpupools", {"teams": {"value": [{"name": "research"}]}}, "gpupools:teams", [{"name": "research"}]),
    # Another project's stack repository: gpupools' keys are another namespace, given with `value`.
    ("ml-infra", {"gpupools:quotas": {"value": "none"}}, "gpupools:quotas", "none"),
    ("ml-infra", {"gpupools:quotas": "none"}, "gpupools:quotas", "none"),
    ("ml-infra", {"aws:region": "us-east-1"}, "aws:region", "us-east-1"),
])
def test_the_forms_pulumi_takes(name, config, key, value):
    values, required = project_config({"name": name, "runtime": "python", "config": config})
    assert values == {key: value} and required == []
    merged = merge_project_config({"gpupools:cloud": "aws"}, values, required)
    assert merged.config == {key: value, "gpupools:cloud": "aws"} and merged.from_project == [key]
    assert merge_project_config({key: "kueue"}, values, required).config == {key: "kueue"}


def test_no_config_and_the_old_config_dir_spelling_give_nothing():
    assert project_config({"name": "gpupools", "runtime": "python"}) == ({}, [])
    assert project_config({"name": "gpupools", "runtime": "python", "config": "stacks"}) == ({}, [])


def test_a_declared_key_without_a_value_must_be_set_by_the_stack():
    values, required = project_config({"name": "gpupools", "config": {"budget": {"type": "integer", "description": "monthly cap"}}})
    assert values == {} and required == ["gpupools:budget"]
    assert merge_project_config({"gpupools:budget": 5}, values, required).config == {"gpupools:budget": 5}
    with pytest.raises(ConfigError) as err:
        merge_project_config({}, values, required)
    assert [str(p) for p in err.value.problems] == [
        "error: Pulumi.yaml config.gpupools:budget: declared without a value or default, and the stack file does not set it: Pulumi refuses such a stack"]


@pytest.mark.parametrize("name, config, line", [
    ("gpupools", {"gpupools:health": {"value": {"readinessGate": False}, "default": {}}},
     "error: Pulumi.yaml config.gpupools:health: both `value` and `default`: Pulumi takes one of them"),
    ("ml-infra", {"gpupools:health": {"default": {"readinessGate": False}}},
     "error: Pulumi.yaml config.gpupools:health: not of the project's namespace (ml-infra:), so Pulumi takes only `value` here, not `default` or `type`"),
    ("ml-infra", {"aws:region": {"description": "where"}}, "error: Pulumi.yaml config.aws:region: not of the project's namespace (ml-infra:): give it a `value`"),
    ("gpupools", {"health": {"readinessGate": False}},
     "error: Pulumi.yaml config.health: unknown attribute 'readinessGate'; a project config key takes type, description, items, default, value, secret"),
    ("gpupools", {"gpupools:health.readinessGate": False},
     "error: Pulumi.yaml config.gpupools:health.readinessGate: a property path: Pulumi sets that part of the key's value, which gpupools does not "
     "merge; give the whole value under the key itself"),
    ("gpupools", {"maxRatio": 1.5},
     "error: Pulumi.yaml config.maxRatio: expected a string, integer, boolean, list or a mapping of type, description, items, default, value, "
     "secret; got a number"),
    ("gpupools", {"quotas": None},
     "error: Pulumi.yaml config.quotas: expected a string, integer, boolean, list or a mapping of type, description, items, default, value, "
     "secret; got null"),
    (None, {"quotas": "none"}, "error: Pulumi.yaml name: missing: Pulumi namespaces the project's config keys by the project's name"),
])
def test_what_pulumi_refuses_is_one_line_naming_the_key(tmp_path, monkeypatch, name, config, line):
    project(tmp_path, config, stack_config("aws"), name=name)
    result = run(tmp_path, monkeypatch, "plan", "--stack", "s")
    assert result.exit_code == 2 and result.stderr.splitlines() == [line], result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_a_project_value_that_could_be_a_secret_is_not_echoed(tmp_path, monkeypatch):
    token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
    project(tmp_path, {"gpupools:cluster": {"value": {"name": "ml", "endpointAccess": token}}}, {k: v for k, v in stack_config("aws").items()
                                                                                              if k != "gpupools:cluster"})
    result = run(tmp_path, monkeypatch, "plan", "--stack", "s")
    assert result.exit_code == 2 and token not in result.stdout + result.stderr
    assert "cluster.endpointAccess" in result.stderr


@pytest.mark.parametrize("environment, names", [
    (["acme/ml-dev"], ['"acme/ml-dev"']),
    ({"imports": ["acme/aws-creds", {"acme/ml-dev": {"merge": False}}]}, ['"acme/aws-creds"', '"acme/ml-dev"']),
    (["ghp_16C7e42F292c6912E7710c838347Ae178B4a"], ["(a string of 40 characters)"]),
])
def test_an_esc_environment_is_named_in_one_warning_line_each(tmp_path, monkeypatch, environment, names):
    project(tmp_path, None, stack_config("aws"), environment=environment)
    result = run(tmp_path, monkeypatch, "plan", "--stack", "s", "--json")
    assert result.exit_code == 0, result.stderr
    json.loads(result.stdout)  # the plan itself is untouched on stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [f"warning: {tmp_path}/stacks/Pulumi.s.yaml: environment: imports the ESC environment {n}, which gpupools cannot open "
                        f"offline: config it gives the stack (pulumiConfig) is not in this plan or check; `pulumi preview` reads it"
                        for n in names]
    assert "ghp_" not in result.stderr


def test_a_stack_without_an_environment_warns_of_none(tmp_path, monkeypatch):
    project(tmp_path, None, stack_config("aws"))
    result = run(tmp_path, monkeypatch, "check", "--stack", "s")
    assert result.exit_code == 0 and "warning:" not in result.stderr + result.stdout


def test_inline_environment_values_are_said_too():
    lines = environment_warnings({"values": {"pulumiConfig": {"gpupools:quotas": "none"}}}, "Pulumi.s.yaml")
    assert lines == ["warning: Pulumi.s.yaml: environment: defines values of its own (an ESC environment), which gpupools cannot open offline: "
                     "config it gives the stack (pulumiConfig) is not in this plan or check; `pulumi preview` reads it"]
    assert environment_warnings(None, "x") == []
