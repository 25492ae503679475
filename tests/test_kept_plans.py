"""What tests/conftest.py keeps for the test run hands out what it would have computed: a plan kept per stack config,
stack name and environment is each caller's own copy, and a test that monkeypatches plans anew."""

from __future__ import annotations

import json
import os

import conftest
from conftest import plan_of, stack_config


def test_the_same_stack_plans_once_and_each_caller_gets_its_own_copy():
    config = stack_config("aws", pools=[{"name": "kept", "instanceType": "g6.xlarge", "maxNodes": 2}])
    runs = conftest.PLAN_RUNS["run"]
    first = plan_of(config)
    second = plan_of(json.loads(json.dumps(config)))  # an equal config, another object
    assert conftest.PLAN_RUNS["run"] == runs + 1
    assert second is not first and second.to_json() == first.to_json()
    first.resources.clear()
    first.outputs.clear()
    assert plan_of(config).to_json() == second.to_json() and second.resources


def test_another_stack_name_config_or_environment_is_another_plan():
    config = stack_config("aws", pools=[{"name": "kept", "instanceType": "g6.xlarge", "maxNodes": 2}])
    assert plan_of(config, "one").stack == "one" and plan_of(config, "two").stack == "two"
    bigger = stack_config("aws", pools=[{"name": "kept", "instanceType": "g6.xlarge", "maxNodes": 3}])
    assert plan_of(bigger).to_json() != plan_of(config).to_json()
    runs = conftest.PLAN_RUNS["run"]
    os.environ["GPUPOOLS_TEST_KEPT_PLANS"] = "1"  # not monkeypatch: a test that uses it is never served kept plans
    try:
        plan_of(config)
    finally:
        del os.environ["GPUPOOLS_TEST_KEPT_PLANS"]
    plan_of(config)
    assert conftest.PLAN_RUNS["run"] == runs + 1


def test_a_test_that_monkeypatches_plans_every_time(monkeypatch):
    config = stack_config("gcp")
    runs = conftest.PLAN_RUNS["run"]
    plan_of(config)
    plan_of(config)
    assert conftest.PLAN_RUNS["run"] == runs + 2


def test_the_cli_plans_through_the_kept_plans(tmp_path):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    config = stack_config("azure", pools=[{"name": "kept", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 2}])
    path = conftest.write_stack(tmp_path, config)
    runs = conftest.PLAN_RUNS["run"]
    outputs = [CliRunner().invoke(app, ["plan", "--config", str(path), "--json"]) for _ in range(2)]
    assert [r.exit_code for r in outputs] == [0, 0] and outputs[0].stdout == outputs[1].stdout
    assert conftest.PLAN_RUNS["run"] == runs + 1
