"""The plan runner's stand-ins for SDK internals send what the SDK's own would."""

from __future__ import annotations

from pathlib import Path

import pytest
from pulumi.runtime import resource

from gpupools.cli import planrun

ROOT = Path(__file__).resolve().parents[2]


def both_traces():
    return resource._get_stack_trace(), planrun._stack_trace()


def constructors(levels: int):
    """`levels` nested constructors, the innermost taking both stack traces."""
    namespace: dict = {"both_traces": both_traces}
    source = "class L0:\n    def __init__(self):\n        self.traces = both_traces()\n"
    for n in range(1, levels):
        source += f"class L{n}(L{n - 1}):\n    def __init__(self):\n        super().__init__()\n"
    exec(compile(source, "<generated>", "exec"), namespace)  # frames of a file with no path: no position
    return namespace[f"L{levels - 1}"]


def make(cls):
    return cls().traces  # the user's line: above the third constructor


def test_the_stack_trace_is_the_sdks():
    sdk, ours = make(constructors(3))
    assert ours == sdk and len(sdk.frames) > 3
    assert sdk.frames[0].pc.uri.endswith("/tests/cli/test_plan_runner.py") and sdk.frames[0].pc.line > 0


def test_above_more_constructors_too():
    sdk, ours = make(constructors(5))
    assert ours == sdk and sdk.frames[0].pc.uri == ""  # the two constructors above the third have no file


def test_without_three_constructors_there_is_no_trace():
    sdk, ours = make(constructors(2))
    assert ours == sdk and len(sdk.frames) == 0


def test_the_collector_rests_while_the_program_runs_and_is_restored_after():
    """The cyclic collector is off while a plan's program runs (what it would walk lives until the plan ends) and as
    it was before afterwards: on, or off where the caller had turned it off; a failing program restores it too."""
    import gc

    seen: list[bool] = []
    assert gc.isenabled()
    planrun.run_program({}, "collector", program=lambda: seen.append(gc.isenabled()))
    assert seen == [False] and gc.isenabled()

    def failing() -> None:
        seen.append(gc.isenabled())
        raise RuntimeError("the program failed")

    with pytest.raises(Exception, match="the program failed"):
        planrun.run_program({}, "collector", program=failing)
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        planrun.run_program({}, "collector", program=lambda: seen.append(gc.isenabled()))
        assert not gc.isenabled()
    finally:
        gc.enable()


def _what_the_sdk_reads(obj) -> object:
    """An answer as the SDK reads it (`rpc.deserialize_properties`: secrets lifted to what holds them), resources by type."""
    import pulumi
    from pulumi.runtime import rpc

    def norm(value):
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items()}
        if isinstance(value, list):
            return [norm(v) for v in value]
        return ("resource", type(value).__name__) if isinstance(value, pulumi.Resource) else value

    return norm(rpc.deserialize_properties(obj))


@pytest.mark.parametrize("stack", ["dev-aws", "dev-azure", "dev-gcp", "dev-gcore", "dev-aws-kai"])
def test_each_registration_is_answered_as_the_sdks_mock_monitor_answers_it(stack, monkeypatch):
    """The mock monitor's own answer (no round trip through Python values) against `MockMonitor.RegisterResource`'s,
    for every registration of the stack: same URN and ID, and the same outputs once the SDK has read them, secrets
    included (the Grafana password is one); and the whole plan is the same either way."""
    from pulumi.runtime import mocks

    from gpupools.stack.config import read_stack_file

    config = read_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    answers = []

    def both(monitor, request, raw, region):
        ours = planrun._answer(monitor, request, raw, region)
        answers.append((ours, mocks.MockMonitor.RegisterResource(monitor, request)))
        return ours

    monkeypatch.setattr(planrun, "ANSWER", both)
    ours = planrun.run_program(config, stack)
    assert len(answers) == len(ours.resources) > 20
    secrets = 0
    for mine, sdk in answers:
        assert (mine.urn, mine.id) == (sdk.urn, sdk.id)
        assert _what_the_sdk_reads(mine.object) == _what_the_sdk_reads(sdk.object)
        secrets += planrun._SECRET_SIG in str(mine.object)
    assert secrets >= 1
    monkeypatch.setattr(planrun, "ANSWER", None)
    assert planrun.run_program(config, stack).to_json() == ours.to_json()
