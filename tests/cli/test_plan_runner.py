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


def test_a_plan_keeps_the_programs_warnings_and_nothing_keeps_the_plan_after_it():
    """The program's warnings reach the plan through the mock engine's logger; once the caller lets the plan go and
    another plan runs, it is freed: no logger the logging module keeps for the process holds it (a fleet plans many
    stacks in one process)."""
    import gc
    import logging
    import weakref

    import pulumi

    def program() -> None:
        pulumi.log.warn("first")
        pulumi.log.info("not a warning")
        pulumi.log.warn("second")

    loggers = set(logging.Logger.manager.loggerDict)
    plan = planrun.run_program({}, "warnings", program=program)
    assert plan.warnings == ["first", "second"]
    assert set(logging.Logger.manager.loggerDict) == loggers
    gone = weakref.ref(plan)
    del plan
    planrun.run_program({}, "next", program=lambda: None)  # the SDK's settings hold the last run's engine and monitor until the next run
    gc.collect()
    assert gone() is None


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


def answers_of(config: dict, stack: str, sdk: bool, monkeypatch) -> tuple[dict, dict, str]:
    """Every registration's answer by (type, name) and every invoke's by (token, arguments), and the plan, with the
    monitor answering its own way or as the SDK's MockMonitor does."""
    from google.protobuf import json_format

    registrations: dict = {}
    invokes: dict = {}
    make_monitor = planrun._make_monitor

    def monitor(plan, region, *facts):
        made = make_monitor(plan, region, *facts)
        register, invoke = made.RegisterResource, made.Invoke

        def RegisterResource(request):
            registrations[(request.type, request.name)] = answer = register(request)
            return answer

        def Invoke(request):
            invokes[(request.tok, json_format.MessageToJson(request.args, sort_keys=True))] = answer = invoke(request)
            return answer

        made.RegisterResource, made.Invoke = RegisterResource, Invoke
        return made

    monkeypatch.setattr(planrun, "_make_monitor", monitor)
    monkeypatch.setattr(planrun, "SDK_ANSWERS", sdk)
    plan = planrun.run_program(config, stack)
    return registrations, invokes, plan.to_json()


@pytest.mark.parametrize("stack", ["dev-aws", "dev-aws-existing", "dev-azure", "dev-gcp", "dev-gcore", "dev-aws-kai"])
def test_the_monitor_answers_as_the_sdks_mock_monitor(stack, monkeypatch):
    """The mock monitor's own answers (no round trip through Python values, on the loop's thread) against the SDK's
    MockMonitor's (on worker threads): for every registration the same URN and ID and the same outputs once the SDK
    has read them, secrets included (the Grafana password is one); for every invoke the same answer; the same plan."""
    from gpupools.stack.values import read_stack_file

    config = read_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    sdk_registrations, sdk_invokes, sdk_plan = answers_of(config, stack, True, monkeypatch)
    registrations, invokes, plan = answers_of(config, stack, False, monkeypatch)
    assert plan == sdk_plan
    assert set(registrations) == set(sdk_registrations) and len(registrations) > 20
    secrets = 0
    for key, mine in registrations.items():
        theirs = sdk_registrations[key]
        assert (mine.urn, mine.id) == (theirs.urn, theirs.id), key
        assert _what_the_sdk_reads(mine.object) == _what_the_sdk_reads(theirs.object), key
        secrets += planrun._SECRET_SIG in str(mine.object)
    assert secrets >= 1
    assert set(invokes) == set(sdk_invokes)
    assert invokes or not stack.startswith("dev-aws")  # an EKS plan asks for zones, partition, add-on versions
    for key, mine in invokes.items():
        assert mine == sdk_invokes[key], key


def test_a_resource_asked_for_by_urn_is_its_registration(monkeypatch):
    """`pulumi:pulumi:getResource` answers a registered resource's URN, ID and state, as the SDK's MockMonitor does."""
    import pulumi

    def program():
        bucket = pulumi.CustomResource("aws:s3/bucket:Bucket", "b", {"bucket": "mine"})
        got = pulumi.Output.all(bucket.urn).apply(
            lambda urns: pulumi.runtime.invoke("pulumi:pulumi:getResource", {"urn": urns[0]}).value)
        pulumi.export("got", got)

    for sdk in (True, False):
        monkeypatch.setattr(planrun, "SDK_ANSWERS", sdk)
        plan = planrun.run_program({"aws:region": "eu-central-1"}, "get", program=program)
        got = plan.outputs["got"]
        assert got["urn"].endswith("$aws:s3/bucket:Bucket::b") and got["id"].startswith("b-") and got["state"]["bucket"] == "mine", sdk


def test_a_struct_is_made_as_the_sdk_serializes_plain_values():
    import asyncio

    from pulumi.runtime import rpc

    values = {"left-out": None, "kept": {"null": None, "list": [1, "x", None, {"deep": None}]}, "n": 2, "t": True, "s": "v"}
    sdk = asyncio.run(rpc.serialize_properties(values, {}))
    assert planrun._struct(values) == sdk and "left-out" not in sdk and "null" in sdk["kept"]


def _items(value) -> object:
    """A JSON value with every mapping as its list of items, so that two values compare equal only in the same order."""
    if isinstance(value, dict):
        return [(k, _items(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_items(v) for v in value]
    return (type(value).__name__, value)


def _same_as_message_to_dict(struct) -> None:
    from google.protobuf import json_format

    mine, theirs = planrun._struct_dict(struct), json_format.MessageToDict(struct)
    assert _items(mine) == _items(theirs)


def test_a_struct_reads_as_message_to_dict_reads_it():
    """The monitor reads a Struct as `json_format.MessageToDict` does: whole and signed-zero floats stay floats, null
    and an unset Value are None, order and nesting kept; each kind on its own, so a dropped branch fails here."""
    from google.protobuf import struct_pb2

    values = {"one": 1.0, "big": 1e20, "negzero": -0.0, "beyond": float(2**53 + 1), "half": 0.5, "neg": -3.0,
              "t": True, "f": False, "s": "text", "empty-s": "", "null": None, "empty-struct": {}, "empty-list": [],
              "nested": {"list": [1.0, "x", None, [True, {"deep": [[]]}]], "struct": {"a": {"b": {"c": 2.5}}}}}
    struct = struct_pb2.Struct()
    struct.update(values)
    struct.fields["unset"].Clear()  # a Value with no kind: MessageToDict reads it as null
    _same_as_message_to_dict(struct)
    got = planrun._struct_dict(struct)
    assert list(got) == list(struct.fields) and got["unset"] is None and got["null"] is None
    assert [type(got[k]).__name__ for k in ("one", "beyond", "t", "s", "empty-struct", "empty-list")] == [
        "float", "float", "bool", "str", "dict", "list"]
    assert got["nested"] == values["nested"] and got["beyond"] == 2**53  # a double holds 2**53 + 1 as 2**53
    assert planrun._struct_dict(struct_pb2.Struct()) == {}


@pytest.mark.parametrize("number, word", [(float("inf"), "Infinity"), (float("-inf"), "Infinity"), (float("nan"), "NaN")])
def test_a_struct_holding_infinity_or_nan_is_refused_as_message_to_dict_refuses_it(number, word):
    from google.protobuf import json_format, struct_pb2

    struct = struct_pb2.Struct()
    struct.update({"ok": 1.0, "nested": {"list": [number]}})
    with pytest.raises(ValueError) as theirs:
        json_format.MessageToDict(struct)
    with pytest.raises(ValueError) as mine:
        planrun._struct_dict(struct)
    assert str(mine.value) == str(theirs.value) and word in str(mine.value)


def test_any_struct_reads_as_message_to_dict_reads_it():
    from hypothesis import given, settings, strategies as st
    from google.protobuf import struct_pb2

    leaves = st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8) | st.integers(-2**60, 2**60)
    json_values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                               max_leaves=20)

    @settings(max_examples=40, deadline=None, database=None)
    @given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
    def check(values):
        struct = struct_pb2.Struct()
        struct.update(values)
        _same_as_message_to_dict(struct)

    check()


class _DoneFutures(planrun.ThreadPoolExecutor):
    """An executor answering in place with a done concurrent future: what `run_in_executor` chains to the loop through
    `call_soon_threadsafe`, as with a worker thread that had already finished."""

    def submit(self, fn, /, *args, **kwargs):
        from concurrent.futures import Future

        done = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except Exception as exc:
            done.set_exception(exc)
        return done


def _steps_of_tasks(executor) -> tuple[list, int]:
    """The order in which three tasks, each awaiting the executor several times (one call fails), take their steps;
    and how often the loop's self-pipe was written to."""
    import asyncio

    steps: list = []
    loop = asyncio.new_event_loop()
    loop.set_default_executor(executor)
    writes = [0]
    write = loop._write_to_self

    def counted():
        writes[0] += 1
        write()

    loop._write_to_self = counted

    def call(task: str, n: int) -> str:
        steps.append(("call", task, n))
        if (task, n) == ("b", 1):
            raise KeyError(task)
        return f"{task}{n}"

    async def worker(task: str, calls: int):
        for n in range(calls):
            try:
                steps.append(("got", await asyncio.get_running_loop().run_in_executor(None, call, task, n)))
            except KeyError:
                steps.append(("failed", task, n))
            await asyncio.sleep(0)

    async def main():
        await asyncio.gather(worker("a", 3), worker("b", 2), worker("c", 4))

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return steps, writes[0]


def test_monitor_calls_are_answered_in_the_order_a_done_concurrent_future_gives_without_waking_the_loop():
    """The executor's answers reach the awaiting tasks in the same order as a done concurrent future's (one pass of
    the loop later, failures too), and without a write to the loop's self-pipe per call."""
    theirs, their_writes = _steps_of_tasks(_DoneFutures())
    mine, my_writes = _steps_of_tasks(planrun._InPlace())
    assert mine == theirs and ("failed", "b", 1) in mine and len(mine) == 18
    assert their_writes >= 9 and my_writes == 0


def test_an_answer_is_queued_for_the_loop_and_dropped_where_its_task_was_cancelled():
    import asyncio

    errors: list = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(context["exception"]))
        executor = planrun._InPlace()
        answer = executor.submit(lambda: 5)
        assert isinstance(answer, asyncio.Future) and not answer.done()  # settled by the loop's next pass
        await asyncio.sleep(0)
        assert answer.result() == 5
        cancelled = executor.submit(lambda: 6)
        cancelled_failure = executor.submit(lambda: {}["missing"])
        failed = executor.submit(lambda: {}["missing"])
        cancelled.cancel(), cancelled_failure.cancel()
        await asyncio.sleep(0)  # the queued answers find two futures cancelled, and no error is raised
        assert cancelled.cancelled() and cancelled_failure.cancelled() and isinstance(failed.exception(), KeyError)

    asyncio.run(main())
    assert errors == []
    off_loop = planrun._InPlace().submit(lambda: 7)  # outside a running loop: done when returned
    assert off_loop.done() and off_loop.result() == 7


def test_a_urn_of_strings_is_the_sdks_urn_without_its_outputs(monkeypatch):
    """Registrations get their URN from strings without the SDK's chain of outputs (its `create_urn` is not called for
    them), the same URN as the SDK's for a top-level resource and for a child (whose parent URN may itself hold `$`);
    an output among the parts goes to the SDK's; the SDK's function is back after the plan."""
    import pulumi

    sdk = resource.create_urn
    calls: list = []

    def counted(*args):
        calls.append(args)
        return sdk(*args)

    monkeypatch.setattr(resource, "create_urn", counted)
    parent = "urn:pulumi:s::gpupools::t:a:Parent$t:b:Mid::mid"
    cases = [("n", "t:x:Y", None), ("n", "t:x:Y", parent), ("n", "t:x:Y", "urn:pulumi:s::gpupools::t:a:Parent::p"), ("", "t:x:Y", ""),
             ("n", "t:x:Y", None, None, "other"), ("n", "t:x:Y", None, "proj")]  # an alias's own stack or project

    def program():
        pulumi.CustomResource("aws:s3/bucket:Bucket", "b", {"bucket": "mine"})
        ours = resource.create_urn  # what registrations call while the plan runs
        for n, args in enumerate(cases):
            made = ours(*args)
            assert isinstance(made, pulumi.Output)
            pulumi.export(f"ours{n}", made)
            pulumi.export(f"sdk{n}", sdk(*args))
        pulumi.export("output-name", ours(pulumi.Output.from_input("n"), "t:x:Y", parent))
        pulumi.export("output-name-sdk", sdk(pulumi.Output.from_input("n"), "t:x:Y", parent))

    plan = planrun.run_program({"aws:region": "eu-central-1"}, "urns", program=program)
    assert resource.create_urn is counted
    assert [plan.outputs[f"ours{n}"] for n in range(len(cases))] == [plan.outputs[f"sdk{n}"] for n in range(len(cases))] == [
        "urn:pulumi:urns::gpupools::t:x:Y::n", "urn:pulumi:s::gpupools::t:a:Parent$t:b:Mid$t:x:Y::n",
        "urn:pulumi:s::gpupools::t:a:Parent$t:x:Y::n", "$t:x:Y::", "urn:pulumi:other::gpupools::t:x:Y::n", "urn:pulumi:urns::proj::t:x:Y::n"]
    assert plan.outputs["output-name"] == plan.outputs["output-name-sdk"] == "urn:pulumi:s::gpupools::t:a:Parent$t:b:Mid$t:x:Y::n"
    # The bucket's and the stack's registrations made no call; the alias-like ones and the output name did.
    assert [type(args[0]).__name__ for args in calls] == ["str", "str", "Output"]
