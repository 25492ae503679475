"""`plan --against FILE` over every shape a previous plan may take: each field gpupools reads from it (`stack`,
`resources`, each resource's `type`, `name` and `inputs`) is checked for its type as it is read, so whatever the file
holds the answer is the comparison or one `error: --against:` line with exit status 2, never a traceback.

A list as a resource's `type` once reached a dictionary lookup (unhashable) and ended the plan in a traceback; the
property test below generates JSON documents shaped like plans, with any JSON value in any field, and runs them through
the reader and the comparison, so that no field can lose its check again unnoticed."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

import pytest
import typer
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpupools.cli import main
from gpupools.cli.planrun import Plan, PlannedResource
from gpupools.cli.previousplan import read_previous_plan
from gpupools.cli.replacement import REPLACING, ROLLING, pool_changes, previous_plan_problems
from gpupools.stack.reading import ReadError

STACK = "dev-aws"
POOL_TYPES = sorted({*REPLACING, *ROLLING})
# The first step of every field the comparison reads (`launchTemplate.id` -> launchTemplate), and what lies below it.
FIELDS = sorted({f.split(".")[0] for fields in (*REPLACING.values(), *ROLLING.values()) for f in fields}
                | {"updateConfig", "upgradeSettings"})
STEPS = sorted({step for fields in (*REPLACING.values(), *ROLLING.values()) for f in fields for step in f.split(".")[1:]}
               | {"disruption", "budgets", "maxSurge", "strategy", "nodes", "schedule"})

scalars = st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                      max_leaves=12)
# Inputs shaped like a pool's: the keys the comparison walks, with any value or a level of its steps below.
inputs = st.dictionaries(st.sampled_from(FIELDS), values | st.dictionaries(st.sampled_from(STEPS), values, max_size=3), max_size=5)
resources = values | st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(POOL_TYPES) | st.just("kubernetes:core/v1:Namespace") | values,
    "name": st.sampled_from(["infer", "train"]) | values,
    "inputs": inputs | values,
    "parent": values,
})
documents = values | st.fixed_dictionaries({}, optional={
    "stack": st.just(STACK) | values,
    "resources": st.lists(resources, max_size=4) | values,
    "outputs": values,
    "warnings": values,
})

# The plan each previous one is compared with: one pool of each kind the comparison knows, with typical inputs.
CURRENT = Plan(STACK, "aws", [
    PlannedResource("aws:eks/nodeGroup:NodeGroup", "infer", None, {"instanceTypes": ["g5.2xlarge"], "launchTemplate": {"id": "lt-1", "version": "2"},
                                                                   "updateConfig": {"maxUnavailable": 1}}, True),
    PlannedResource("kubernetes:karpenter.sh/v1:NodePool", "train", None, {"spec": {"template": {"spec": {}}, "disruption": {"budgets": [{"nodes": "1"}]}}}, True),
    PlannedResource("gcp:container/nodePool:NodePool", "infer", None, {"nodeConfig": {"imageType": "COS_CONTAINERD"}, "upgradeSettings": {"maxSurge": 1}}, True),
    PlannedResource("azure-native:containerservice:AgentPool", "infer", None, {"vmSize": "Standard_NC4as_T4_v3", "upgradeSettings": {}}, True),
    PlannedResource("kubernetes:core/v1:Namespace", "ml", None, {}, True),
])


def against(text: str, path: Path | None = None) -> tuple[dict | None, int, str]:
    """What `gpupools plan --against` makes of a file holding `text`: (the previous plan, 0, '') when it is read, or
    (None, exit status, stderr) when the command stops. `path`: where to write it (a temporary file by default)."""
    if path is None:
        handle, name = tempfile.mkstemp(suffix=".json")
        os.close(handle)
        path = Path(name)
    try:
        path.write_text(text, encoding="utf-8")
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                return main.read_previous_plan(path, STACK), 0, ""
        except typer.Exit as stop:
            return None, stop.exit_code, err.getvalue()
    finally:
        path.unlink()


@settings(max_examples=400, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
@example({"stack": STACK, "resources": [{"type": ["aws:eks/nodeGroup:NodeGroup"], "name": "infer", "inputs": {}}]})
@example({"stack": STACK, "resources": [{"type": {"a": 1}, "name": "infer", "inputs": {"x": 1}}]})
@example({"stack": STACK, "resources": [{"type": "aws:eks/nodeGroup:NodeGroup", "name": ["infer"], "inputs": {}}]})
@example({"stack": ["dev-aws"], "resources": []})
@example({"stack": STACK, "resources": {"type": "x"}})
def test_any_previous_plan_is_compared_or_refused_in_one_line(doc):
    previous, status, err = against(json.dumps(doc))
    if previous is None:
        assert status == 2 and err.startswith("error: --against: ") and err.count("\n") == 1, (status, err)
        return
    # Read: every field the comparison uses has its type, and the comparison runs to the end.
    assert isinstance(previous.get("stack", STACK), str) and isinstance(previous["resources"], list)
    for resource in previous["resources"]:
        assert isinstance(resource["type"], str) and isinstance(resource["name"], str)
        assert isinstance(resource.get("inputs", {}), dict)
    changes = pool_changes(previous, CURRENT)
    assert {c.action for c in changes} <= {"create", "replace", "update", "same", "delete"}
    assert all(c.summary for c in changes)


@pytest.mark.parametrize("doc, expected", [
    ({"stack": STACK, "resources": [{"type": ["aws:eks/nodeGroup:NodeGroup"], "name": "infer", "inputs": {"amiType": "AL2023"}}]},
     'resources[0].type: expected a string, got ["aws:eks/nodeGroup:NodeGroup"]'),
    ({"stack": STACK, "resources": [{"name": "infer"}]}, "resources[0].type: expected a string, got nothing (no 'type' key)"),
    ({"stack": STACK, "resources": [{"type": "aws:eks/nodeGroup:NodeGroup", "name": 7, "inputs": {}}]},
     "resources[0].name: expected a string, got 7"),
    ({"stack": STACK, "resources": [{"type": "kubernetes:core/v1:Namespace", "name": "ml", "inputs": "x"}]},
     "resources[0].inputs: expected an object, got \"x\""),
    ({"stack": 3, "resources": []}, "stack: expected a string, got 3"),
    ({"stack": STACK, "resources": {"a": 1}}, 'resources: expected a list, got {"a": 1}'),
])
def test_a_field_of_the_wrong_type_is_one_line_naming_it(tmp_path, doc, expected):
    path = tmp_path / "old.json"
    assert against(json.dumps(doc), path) == (None, 2, f"error: --against: {path}: {expected}\n")


def test_a_well_typed_previous_plan_is_read_and_compared():
    doc = {"stack": STACK, "resources": [
        {"type": "aws:eks/nodeGroup:NodeGroup", "name": "infer", "inputs": {"instanceTypes": ["g6.xlarge"]}},
        {"type": "kubernetes:core/v1:Namespace", "name": "ml", "inputs": None},
        {"type": "gcp:container/nodePool:NodePool", "name": "old", "inputs": {}}]}
    previous, status, err = against(json.dumps(doc))
    assert (status, err) == (0, "") and previous is not None
    assert previous_plan_problems(previous, STACK) == []
    changes = {(c.type.rsplit(":", 1)[-1], c.name): (c.action, c.fields) for c in pool_changes(previous, CURRENT)}
    assert changes[("NodeGroup", "infer")] == ("replace", ("instanceTypes", "launchTemplate.id"))
    assert changes[("NodePool", "old")] == ("delete", ())
    assert changes[("NodePool", "train")] == ("create", ())


def test_the_reader_refuses_with_a_read_error_not_a_type_error(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"resources": [{"type": ["x"], "name": "a", "inputs": {}}]}))
    with pytest.raises(ReadError, match=r"^resources\[0\]\.type: expected a string"):
        read_previous_plan(path)
