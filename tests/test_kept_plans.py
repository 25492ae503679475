"""What tests/kept.py keeps for the test run hands out what it would have computed: a plan kept per stack config,
stack name and environment (in its own key order) is each caller's own copy, and a test that monkeypatches plans anew."""

from __future__ import annotations

import json
import os

import conftest
import kept
from conftest import plan_of, stack_config


def test_the_same_stack_plans_once_and_each_caller_gets_its_own_copy():
    config = stack_config("aws", pools=[{"name": "kept", "instanceType": "g6.xlarge", "maxNodes": 2}])
    runs = kept.PLAN_RUNS["run"]
    first = plan_of(config)
    second = plan_of(json.loads(json.dumps(config)))  # an equal config, another object
    assert kept.PLAN_RUNS["run"] == runs + 1
    assert second is not first and second.to_json() == first.to_json()
    first.resources.clear()
    first.outputs.clear()
    assert plan_of(config).to_json() == second.to_json() and second.resources


def test_another_stack_name_config_or_environment_is_another_plan():
    config = stack_config("aws", pools=[{"name": "kept", "instanceType": "g6.xlarge", "maxNodes": 2}])
    assert plan_of(config, "one").stack == "one" and plan_of(config, "two").stack == "two"
    bigger = stack_config("aws", pools=[{"name": "kept", "instanceType": "g6.xlarge", "maxNodes": 3}])
    assert plan_of(bigger).to_json() != plan_of(config).to_json()
    runs = kept.PLAN_RUNS["run"]
    os.environ["GPUPOOLS_TEST_KEPT_PLANS"] = "1"  # not monkeypatch: a test that uses it is never served kept plans
    try:
        plan_of(config)
    finally:
        del os.environ["GPUPOOLS_TEST_KEPT_PLANS"]
    plan_of(config)
    assert kept.PLAN_RUNS["run"] == runs + 1


def test_a_test_that_monkeypatches_plans_every_time(monkeypatch):
    config = stack_config("gcp")
    runs = kept.PLAN_RUNS["run"]
    plan_of(config)
    plan_of(config)
    assert kept.PLAN_RUNS["run"] == runs + 2


def test_the_cli_plans_through_the_kept_plans(tmp_path):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    config = stack_config("azure", pools=[{"name": "kept", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 2}])
    path = conftest.write_stack(tmp_path, config)
    runs = kept.PLAN_RUNS["run"]
    outputs = [CliRunner().invoke(app, ["plan", "--config", str(path), "--json"]) for _ in range(2)]
    assert [r.exit_code for r in outputs] == [0, 0] and outputs[0].stdout == outputs[1].stdout
    assert kept.PLAN_RUNS["run"] == runs + 1


def test_a_plan_is_kept_from_one_test_to_the_next():
    """pytest names the running test in PYTEST_CURRENT_TEST, which the program never reads: it is not part of the key."""
    config = stack_config("aws", pools=[{"name": "kept", "instanceType": "g6.xlarge", "maxNodes": 4}])
    plan_of(config)
    runs, name = kept.PLAN_RUNS["run"], os.environ["PYTEST_CURRENT_TEST"]
    os.environ["PYTEST_CURRENT_TEST"] = "tests/another.py::test_next (call)"
    try:
        plan_of(config)
    finally:
        os.environ["PYTEST_CURRENT_TEST"] = name
    assert kept.PLAN_RUNS["run"] == runs


def test_a_config_in_another_key_order_is_planned_for_itself():
    """The program follows the order of its mappings (a team's quotas order its landing rows): two configs that differ
    only in that order are two plans."""
    pools = [{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3}, {"name": "train", "instanceType": "g5.12xlarge", "maxNodes": 2}]
    config = stack_config("aws", teams=[{"name": "research", "gpus": {"infer": 2, "train": 2}}], pools=pools)
    reordered = {**config, "gpupools:teams": [{"name": "research", "gpus": {"train": 2, "infer": 2}}]}
    first = [row["pool"] for row in plan_of(config).outputs["landing"]]
    second = [row["pool"] for row in plan_of(reordered).outputs["landing"]]
    assert first[0] == "infer" and second[0] == "train"
