"""Fuzzed stack files, made from the example stacks: whatever the bytes, `gpupools plan` ends with exit 0 or 2 in
bounded time, and an exit 2 prints nothing but `error:` lines.

Mutations: wrong types, nulls, huge and non-finite numbers, removed keys, unknown provider and gpupools keys, deep
nesting, aliases (a few, and a bomb), duplicate keys and bytes that are not UTF-8. The example count is fixed and
the run derandomized, so CI runs the same examples every time in well under a minute.
"""

from __future__ import annotations

import copy
import tempfile
import time
from pathlib import Path

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpupools.cli.main import app

from conftest import ROOT, tree_paths

runner = CliRunner()
EXAMPLES = {p.name: yaml.safe_load(p.read_text()) for p in sorted((ROOT / "stacks").glob("Pulumi.dev-*.yaml"))}
SECONDS_PER_RUN = 15  # a valid example plans in about 2 s; a refused one in milliseconds

odd_values = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30), st.sampled_from([10**300, -(10**25)]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(["1.３３", "٣", "", "[secret]", "x" * 500]),
    st.lists(st.integers(min_value=0, max_value=10), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _parent(doc, path):
    for step in path[:-1]:
        doc = doc[step]
    return doc


def _bomb(levels: int) -> str:
    rows = ['    - &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    rows += [f"    - &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "  gpupools:teams:\n" + "\n".join(rows) + "\n"


@st.composite
def stack_files(draw) -> bytes:
    doc = copy.deepcopy(EXAMPLES[draw(st.sampled_from(sorted(EXAMPLES)))])
    config = doc["config"]
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        kind = draw(st.sampled_from(["replace", "replace", "delete", "unknown-key"]))
        path = draw(st.sampled_from(list(tree_paths(config))[1:]))
        if kind == "replace":
            _parent(config, path)[path[-1]] = draw(odd_values)
        elif kind == "delete":
            parent = _parent(config, path)
            del parent[path[-1]]
            config = doc["config"]
        else:
            namespace = draw(st.sampled_from(["aws", "gcp", "azure-native", "kubernetes", "gpupools", "pulumi"]))
            name = draw(st.sampled_from(["regoin", "region", "project", "location", "providers", "zone", "profile"]))
            config[f"{namespace}:{name}"] = draw(odd_values)
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    extra = draw(st.sampled_from(["none", "deep", "aliases", "bomb", "duplicate", "huge-int", "nan", "latin-1", "bad-byte"]))
    if extra == "deep":
        depth = draw(st.integers(min_value=20, max_value=3000))
        text += "  gpupools:sharing: " + "[" * depth + "]" * depth + "\n"
    elif extra == "aliases":
        text += "  gpupools:monitoring: &m {enabled: true}\n  gpupools:gpuSoftware: {<<: *m}\n"
    elif extra == "bomb":
        text += _bomb(draw(st.integers(min_value=3, max_value=12)))
    elif extra == "duplicate":
        first = next((line for line in text.splitlines() if line.startswith("  ") and not line.startswith("   ")), "  x: 1")
        text += first + "\n"
    elif extra == "huge-int":
        text += "  gpupools:autoscaler: " + "7" * draw(st.integers(min_value=21, max_value=6000)) + "\n"
    elif extra == "nan":
        text += "  gpupools:autoscaler: " + draw(st.sampled_from([".nan", ".inf", "-.inf", "1.0e+999"])) + "\n"
    data = text.encode()
    if extra == "latin-1":
        data += "  # Café für die Pools\n".encode("latin-1")
    elif extra == "bad-byte":
        at = draw(st.integers(min_value=0, max_value=len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"])) + data[at:]
    return data


@settings(max_examples=40, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stack_files())
def test_fuzzed_stack_files_end_in_exit_0_or_2(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Pulumi.fuzz.yaml"
        path.write_bytes(data)
        started = time.perf_counter()
        result = runner.invoke(app, ["plan", "--config", str(path), "--json"])
        elapsed = time.perf_counter() - started
    event(f"exit {result.exit_code}")
    assert elapsed < SECONDS_PER_RUN, f"{elapsed:.1f} s"
    assert result.exit_code in (0, 2), (result.exit_code, repr(result.exception), result.stderr[-2000:])
    assert "Traceback" not in result.stdout + result.stderr
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert lines and all(line.startswith("error: ") for line in lines), result.stderr


# --------------------------------------------------------------------------------------------------------------------
# The other files a user hands over: a previous plan (`plan --against`) and a policy config (`check --policy-config`)

_PREVIOUS: dict = {}


def previous_plan() -> dict:
    """The real `plan --json` of dev-aws, made once: the mutations start from what the command writes."""
    if not _PREVIOUS:
        import json

        result = runner.invoke(app, ["plan", "--stack", "dev-aws", "--json"])
        assert result.exit_code == 0, result.stderr
        _PREVIOUS.update(json.loads(result.stdout))
    return copy.deepcopy(_PREVIOUS)


@st.composite
def against_files(draw) -> bytes:
    import json

    doc = previous_plan()
    pools = [r for r in doc["resources"] if r["type"] in ("aws:eks/nodeGroup:NodeGroup", "kubernetes:karpenter.sh/v1:NodePool")] or doc["resources"]
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        kind = draw(st.sampled_from(["field", "field", "resource", "top", "inputs-path"]))
        if kind == "field":
            resource = draw(st.sampled_from(pools))
            resource[draw(st.sampled_from(["type", "name", "inputs", "parent"]))] = draw(odd_values)
        elif kind == "resource":
            doc["resources"][draw(st.integers(min_value=0, max_value=len(doc["resources"]) - 1))] = draw(odd_values)
        elif kind == "top":
            doc[draw(st.sampled_from(["resources", "stack", "outputs", "project"]))] = draw(odd_values)
        else:
            resource = draw(st.sampled_from(pools))
            paths = list(tree_paths(resource.get("inputs") or {}))[1:]
            if paths:
                path = draw(st.sampled_from(paths))
                _parent(resource["inputs"], path)[path[-1]] = draw(odd_values)
    text = json.dumps(doc, allow_nan=True)
    extra = draw(st.sampled_from(["none", "none", "deep", "duplicate", "not-json"]))
    if extra == "deep":
        text = '{"resources": [' + "[" * draw(st.integers(min_value=30, max_value=3000)) + "]"
    elif extra == "duplicate":
        text = text.replace('"stack":', '"stack": "dev-aws", "stack":', 1)
    elif extra == "not-json":
        text = text[: draw(st.integers(min_value=0, max_value=len(text)))]
    return text.encode()


def _one_run(args: list[str]) -> None:
    started = time.perf_counter()
    result = runner.invoke(app, args)
    elapsed = time.perf_counter() - started
    event(f"exit {result.exit_code}")
    assert elapsed < SECONDS_PER_RUN * 2, f"{elapsed:.1f} s"
    assert result.exit_code in (0, 1, 2), (result.exit_code, repr(result.exception), result.stderr[-2000:])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.stdout + result.stderr
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert lines and all(line.startswith("error: ") for line in lines), result.stderr


@settings(max_examples=12, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(against_files())
def test_fuzzed_against_files_end_in_exit_0_or_2(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "old.json"
        path.write_bytes(data)
        _one_run(["plan", "--stack", "dev-aws", "--against", str(path)])


def _policy_names() -> list[str]:
    from gpupools.policies.pack import POLICIES

    return sorted(p.name for p in POLICIES)


@st.composite
def policy_configs(draw) -> bytes:
    import json

    names = _policy_names()
    doc: dict = {}
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        name = draw(st.sampled_from([*names, "all", "no-such-policy", ""]))
        kind = draw(st.sampled_from(["level", "entry", "odd"]))
        if kind == "level":
            doc[name] = draw(st.sampled_from(["advisory", "mandatory", "disabled", "remediate", "MANDATORY", ""]))
        elif kind == "entry":
            key = draw(st.sampled_from(["enforcementLevel", "exceptions", "maxMonthlyUsd", "asOf", "requiredLogTypes", "minRetentionDays", "x"]))
            doc[name] = {key: draw(odd_values)}
        else:
            doc[name] = draw(odd_values)
    text = json.dumps(doc, allow_nan=True)
    extra = draw(st.sampled_from(["none", "none", "deep", "array", "huge-int"]))
    if extra == "deep":
        text = "[" * draw(st.integers(min_value=30, max_value=3000))
    elif extra == "array":
        text = "[" + text + "]"
    elif extra == "huge-int":
        text = '{"all": ' + "9" * draw(st.integers(min_value=21, max_value=5000)) + "}"
    return text.encode()


@settings(max_examples=12, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy_configs())
def test_fuzzed_policy_configs_end_in_exit_0_1_or_2(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "policy.json"
        path.write_bytes(data)
        _one_run(["check", "--stack", "dev-aws", "--policy-config", str(path)])
