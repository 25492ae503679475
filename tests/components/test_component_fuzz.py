"""The component provider fuzzed over its gRPC interface: Construct calls to the plugin process, as the engine makes
them for a program in another language, with inputs that put the wrong kind of value somewhere the schema
(components/schema.json) types.

What travels is a protobuf Struct (pulumi/runtime/rpc.py `deserialize_properties`): every number a double, a secret
as a mapping with the secret signature, an output value with its own (and without a value when it is not known), a
value not known yet as the engine's UNKNOWN string, a resource as a reference, an asset with its signature. Whatever
arrives where, a wrong value is refused, never dropped: INVALID_ARGUMENT with the stack file's one-line errors,
one of them naming the field, and no credential-like value anywhere in the answer or the engine's log. A right value
wrapped as a secret or an output value is taken as the value itself.

The examples are few, fixed and derandomized, so CI runs the same ones every time in seconds.
"""

# No `from __future__ import annotations`, as in test_component_package.
import base64
import collections
import copy
import hashlib
import json
import math
import re
import time

import grpc
import pytest
from google.protobuf import json_format, struct_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupools.stack.errors import Problem, field_path, name_like
from test_component_package import OUTPUT_SIG, POOL, RESOURCE_SIG, SCHEMA, SECRET_SIG, UNKNOWN, plugin, plugin_and_engine  # noqa: F401 - plugin is the fixture

AWS = {"aws:region": "eu-central-1"}
ASSET_SIG = {"4dabf18193072939515e22adb298388d": "c44067f5952c0a294b673a41bacd8c17"}  # rpc.py _special_asset_sig
DEPENDENCY = "urn:pulumi:test::p::aws:eks/cluster:Cluster::c"
SECONDS = 15  # for the examples of one test, the plugin started: a refusal takes about 20 ms, a GpuPool built 0.3 s

BASES = {
    "GpuPool": {"cloud": "aws", "cluster": {"name": "prod"}, "pool": POOL},
    "TeamQueues": {"cloud": "aws", "cluster": {"name": "prod"}, "pools": [POOL], "teams": [{"name": "research", "gpus": 2}]},
    "Monitoring": {"cloud": "aws", "cluster": {"name": "prod"}, "pools": [POOL]},
    "GpuPlatform": {"cloud": "aws", "cluster": {"name": "ml-dev"}, "pools": [POOL], "teams": [{"name": "research", "gpus": 2}]},
}
SCHEMA_DOC = json.loads(SCHEMA.read_text())
TYPES = SCHEMA_DOC["types"]


def _type(prop: dict) -> str:
    """The kind of value a schema property takes: string, integer, number, boolean, array, map, object or any."""
    ref = prop.get("$ref", "")
    if ref == "pulumi.json#/Any":
        return "any"
    if ref:
        return "object"
    if prop["type"] == "object":
        return "map"
    return prop["type"]


def _positions(properties: dict, required: list, path: tuple):
    """(path, property, required) of every place under an object type, a list's first item and a map's key `team`
    standing for any; not into `Any`, whose shapes the stack file's models decide."""
    for name, prop in sorted(properties.items()):
        at = (*path, name)
        yield at, prop, name in required
        yield from _inner(prop, at)


def _inner(prop: dict, at: tuple):
    kind = _type(prop)
    if kind == "object":
        typ = TYPES[prop["$ref"].rsplit("/", 1)[1]]
        yield from _positions(typ["properties"], typ.get("required", []), at)
    elif kind in ("array", "map"):
        inner = prop["items"] if kind == "array" else prop["additionalProperties"]
        item_at = (*at, 0 if kind == "array" else "team")
        yield item_at, inner, kind == "array"  # a null list item is an item; a null map value is no value at all
        yield from _inner(inner, item_at)


POSITIONS = {c: list(_positions(SCHEMA_DOC["resources"][f"gpupools:index:{c}"]["inputProperties"],
                                SCHEMA_DOC["resources"][f"gpupools:index:{c}"]["requiredInputs"], ())) for c in BASES}

# A credential's form: a prefix, then random text (base64 of a hash: hypothesis shrinks drawn text to "000...", which
# reads as a name and may be shown, `gpupools.stack.errors.name_like`). An answer showing one is caught wherever in
# the inputs it was put.
tokens = st.builds(lambda prefix, seed, size: prefix + base64.b64encode(hashlib.sha256(str(seed).encode()).digest()).decode()[:size],
                   st.sampled_from(["ghp_", "xoxb-", "AKIA", "sk-", ""]), st.integers(0, 2**32), st.integers(24, 40))
texts = st.one_of(tokens, st.text(max_size=8))
fractions = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6).filter(lambda x: not x.is_integer())
numbers = st.one_of(st.integers(-10**6, 10**6).map(float), fractions, st.sampled_from([math.nan, math.inf, -math.inf, 1e300]))
plain_lists = st.lists(st.one_of(st.integers(0, 9).map(float), tokens), min_size=0, max_size=2)
plain_maps = st.dictionaries(st.sampled_from(["a", "name", "mode", "value"]), st.one_of(st.integers(0, 9).map(float), tokens), max_size=2)

WRONG = {  # for each kind of property, the kinds of value that are not it
    "string": [numbers, st.booleans(), plain_lists, plain_maps],
    "integer": [fractions, st.sampled_from([math.nan, math.inf]), texts, st.booleans(), plain_lists, plain_maps],
    "number": [texts, st.booleans(), plain_lists, plain_maps],
    "boolean": [numbers, texts, plain_lists, plain_maps],
    "object": [texts, numbers, st.booleans(), plain_lists],
    "array": [texts, numbers, st.booleans(), plain_maps],
    "map": [texts, numbers, st.booleans(), plain_lists],
    "any": [],
}


def _found_tokens(value) -> list[str]:
    if isinstance(value, str):
        return [value] if len(value) >= 24 and not name_like(value) else []
    if isinstance(value, dict):
        return [t for v in value.values() for t in _found_tokens(v)]
    if isinstance(value, list):
        return [t for v in value for t in _found_tokens(v)]
    return []


@st.composite
def transported(draw, value, seen: list[str] | None = None):
    """`value` as it may travel: as itself, as a secret, as a known output value (secret or not, with a dependency)."""
    how = draw(st.sampled_from(["plain", "secret", "output"]))
    if seen is not None:
        seen.append(f"sent as {how}")
    if how == "secret":
        return {**SECRET_SIG, "value": value}
    if how == "output":
        return {**OUTPUT_SIG, "value": value, "secret": draw(st.booleans()), "dependencies": [DEPENDENCY]}
    return value


@st.composite
def wrong_values(draw, kind: str, required: bool, list_item: bool, seen: list[str]):
    """A value a property of this kind must refuse."""
    choices = ["wrong-kind"] * bool(WRONG[kind]) * 4 + ["unknown", "unknown-output", "asset"]
    if kind not in ("string", "any"):
        choices.append("resource")  # arrives as its id, a string: wrong where no string belongs
    if required or list_item:
        choices.append("null")
    choice = draw(st.sampled_from(choices))
    seen.append(choice)
    if choice == "wrong-kind":
        return draw(transported(draw(st.one_of(*WRONG[kind])), seen))
    if choice == "unknown":
        return UNKNOWN
    if choice == "unknown-output":
        return {**OUTPUT_SIG, "dependencies": [DEPENDENCY], **({"secret": True} if draw(st.booleans()) else {})}
    if choice == "asset":
        return {**ASSET_SIG, "text": draw(tokens)}
    if choice == "resource":
        return {**RESOURCE_SIG, "urn": DEPENDENCY, "id": draw(tokens)}
    return None


def _place(inputs: dict, path: tuple, value) -> None:
    """Put `value` at `path`, making the mappings and one-item lists on the way that the base lacks."""
    node = inputs
    for step, after in zip(path, path[1:]):
        empty = [] if isinstance(after, int) else {}
        if isinstance(step, int):
            if not node:
                node.append(empty)
            node = node[0]
        else:
            node = node.setdefault(step, empty)
    if isinstance(path[-1], int):
        node[:] = [value]
    else:
        node[path[-1]] = value


@st.composite
def refused_cases(draw):
    """(component, inputs, path the refusal must name, tokens it must not show, what was drawn)."""
    component = draw(st.sampled_from(sorted(BASES)))
    seen = [component]
    inputs = copy.deepcopy(BASES[component])
    if draw(st.integers(0, 4)) == 0:  # a key the schema does not have, in a mapping of one of its types
        resource = SCHEMA_DOC["resources"][f"gpupools:index:{component}"]
        objects = [((), resource["inputProperties"])] + [(p, TYPES[prop["$ref"].rsplit("/", 1)[1]]["properties"])
                                                         for p, prop, _ in POSITIONS[component] if _type(prop) == "object"]
        at, properties = draw(st.sampled_from(objects))
        # The stack file's models also take a key by its Python name (pydantic's populate_by_name), and so do nested
        # arguments here; a component's own inputs are its schema's.
        taken = {*properties, *(re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower() for k in properties if at), "from_"}
        key = draw(st.one_of(tokens, st.text(min_size=1, max_size=8)).filter(lambda k: k not in taken))
        value = draw(st.one_of(st.booleans(), tokens))
        _place(inputs, (*at, key), value)
        seen.append("unknown key")
        return component, inputs, (*at, key), _found_tokens(key) + _found_tokens(value), seen
    # The kind of property first, then one of that kind: rare kinds (a number among many strings) are tried as often as
    # common ones, whatever properties the schema gains.
    kind = draw(st.sampled_from(sorted({_type(prop) for _, prop, _ in POSITIONS[component]})))
    path, prop, required = draw(st.sampled_from([p for p in POSITIONS[component] if _type(p[1]) == kind]))
    seen.append(_type(prop))
    value = draw(wrong_values(_type(prop), required, isinstance(path[-1], int), seen))
    _place(inputs, path, value)
    return component, inputs, path, _found_tokens(value), seen


def struct(inputs: dict) -> struct_pb2.Struct:
    """Inputs as the engine sends them: every number a double (NaN and infinities too, which JSON cannot spell)."""
    out = struct_pb2.Struct()
    out.update(inputs)
    return out


def check_refusal(caught: grpc.RpcError, component: str, name: str, path: tuple, hidden: list[str], logs: list[str]) -> None:
    details = caught.details() or ""
    assert caught.code() == grpc.StatusCode.INVALID_ARGUMENT, details
    assert details.splitlines() == details.split("\n"), details  # no other line breaks inside a line
    head, *lines = details.split("\n")
    assert head == f"invalid inputs of gpupools:index:{component} {name}:"
    assert lines and all(line.startswith("error: ") for line in lines), details
    assert "Traceback" not in details and 'File "' not in details
    where = str(Problem(field_path(path), "|"))[:-1]  # "error: <path>: ", with what a line may not hold escaped
    assert any(line.startswith(where) for line in lines), (where, details)
    answer = details + repr(caught.trailing_metadata()) + "\n".join(logs)
    assert [t for t in hidden if t in answer] == []


def test_wrong_inputs_over_grpc_are_refused_in_one_line_each_where_they_are(plugin):
    count, seen = [0], collections.Counter()
    with plugin_and_engine(plugin, AWS) as (_, construct_call, logs):
        started = time.monotonic()

        @settings(max_examples=150, derandomize=True, database=None, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(refused_cases())
        def check(case):
            component, inputs, path, hidden, drawn = case
            count[0] += 1
            seen.update(drawn)
            name = f"c{count[0]}"
            with pytest.raises(grpc.RpcError) as caught:
                construct_call(component, struct(inputs), name)
            check_refusal(caught.value, component, name, path, hidden, logs)

        check()
        assert time.monotonic() - started < SECONDS
    # Every component, kind of property and kind of value was tried (a change to the strategies that leaves one out
    # fails here, not silently).
    assert {*BASES, "string", "integer", "number", "boolean", "array", "map", "object", "any", "unknown key", "wrong-kind", "unknown",
            "unknown-output", "asset", "resource", "null", "sent as plain", "sent as secret", "sent as output"} <= set(seen), seen


def _leaves(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))
    else:
        yield path


@st.composite
def wrapped_cases(draw):
    """A GpuPool's inputs with one of them, or a part of one, sent as a secret or an output value."""
    inputs = copy.deepcopy(BASES["GpuPool"] | {"pool": {**POOL, "labels": {"team": "search"}, "zones": ["eu-central-1a"]}})
    path = draw(st.sampled_from([p for p in _leaves(inputs)] + [("cluster",), ("pool",), ("pool", "labels"), ("pool", "zones")]))
    node = inputs
    for step in path[:-1]:
        node = node[step]
    seen = ["a value" if path in _leaves(inputs) else "a mapping or list"]
    node[path[-1]] = draw(transported(node[path[-1]], seen))
    return inputs, seen


def test_right_inputs_sent_as_secrets_or_output_values_are_taken_as_themselves(plugin):
    """Wrapped anywhere, the inputs build the same pool: the engine makes the whole mapping around a secret one
    secret Output, which Pulumi's mapping took for no mapping at all."""
    with plugin_and_engine(plugin, AWS) as (_, construct_call, _logs):
        inputs = BASES["GpuPool"] | {"pool": {**POOL, "labels": {"team": "search"}, "zones": ["eu-central-1a"]}}
        answer, _plan = construct_call("GpuPool", struct(inputs), "plain")
        expected = json_format.MessageToDict(answer.state)["poolDetails"]
        count, seen, started = [0], collections.Counter(), time.monotonic()

        @settings(max_examples=12, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(wrapped_cases())
        def check(case):
            wrapped, drawn = case
            count[0] += 1
            seen.update(drawn)
            answer, _plan = construct_call("GpuPool", struct(wrapped), f"w{count[0]}")
            assert json_format.MessageToDict(answer.state)["poolDetails"] == expected

        check()
        assert time.monotonic() - started < SECONDS
    assert {"a value", "a mapping or list", "sent as secret", "sent as output"} <= set(seen), seen
