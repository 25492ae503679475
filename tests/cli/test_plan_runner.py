"""The plan runner's stand-ins for SDK internals send what the SDK's own would."""

from __future__ import annotations

from pathlib import Path

import pytest
from pulumi.runtime import resource

from gpupools.cli import planrun

ROOT = Path(__file__).resolve().parents[2]


def constructors(levels: int):
    """`levels` nested constructors, the outermost a component: what the SDK's stack trace would describe."""
    import pulumi

    namespace: dict = {"pulumi": pulumi}
    source = "class L0(pulumi.ComponentResource):\n    def __init__(self):\n        super().__init__('t:x:Y', 'y')\n"
    for n in range(1, levels):
        source += f"class L{n}(L{n - 1}):\n    def __init__(self):\n        super().__init__()\n"
    exec(compile(source, __file__, "exec"), namespace)
    return namespace[f"L{levels - 1}"]


def test_registrations_carry_no_stack_trace_and_the_sdks_is_back_afterwards(monkeypatch):
    """Nothing under the mock engine reads a registration's stack trace or source position, so a plan sends none; the
    SDK's own function is in place again once the plan has run."""
    requests = []
    make_monitor = planrun._make_monitor

    def monitor(plan, region, *facts):
        made = make_monitor(plan, region, *facts)
        register = made.RegisterResource

        def RegisterResource(request):
            requests.append(request)
            return register(request)

        made.RegisterResource = RegisterResource
        return made

    monkeypatch.setattr(planrun, "_make_monitor", monitor)
    sdk = resource._get_stack_trace
    planrun.run_program({"aws:region": "eu-central-1"}, "trace", program=lambda: constructors(3)())
    assert requests and all(not r.stackTrace.frames and not r.HasField("sourcePosition") for r in requests)
    assert resource._get_stack_trace is sdk


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
