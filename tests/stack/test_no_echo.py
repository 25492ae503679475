"""No value of a stack file comes back out in an error unless it is known safe: a marker credential planted at every
position of every example stack and of one stack per cloud that sets every key (`wide_stacks.py`), in every
wrong shape (a string, a number, a list, a mapping, a boolean, null), appears in no output of plan, plan --json,
check, check --json, render and workload, and every refusal is still one `error:` line naming the field, exit 2.

Three tiers, so the run stays short on a shared machine: every planted stack through `validate_stack` (what every
command prints for a refused stack); the positions that hold or surround credentials through all six commands; and
a generated set (fuzz mutations from `test_fuzz_stacks` plus a planted marker) through all six commands.
"""

from __future__ import annotations

import copy
import typing
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.stack.config import StackConfig
from gpupools.stack.errors import QUOTED_FIELDS, SECRET_FIELDS, ConfigError, name_like, quotable, redact, Problem
from gpupools.validation.stack import validate_stack

from conftest import ROOT, tree_paths
from test_fuzz_stacks import odd_values
from wide_stacks import WIDE

runner = CliRunner()
# The shape of an API token (mixed case and digits, 26 characters), and a number no size or count in a stack has.
MARK = "PLANTEDz8Kq3Vw7Lm2Xr9Tb4Nc"
MARK_NUMBER = 7331733173317
SHAPES = {"string": MARK, "number": MARK_NUMBER, "list": [MARK], "mapping": {MARK: MARK}, "bool": True, "null": None}
FRAGMENTS = [MARK[i:i + 6] for i in range(len(MARK) - 5)] + [str(MARK_NUMBER)[i:i + 6] for i in range(len(str(MARK_NUMBER)) - 5)]

EXAMPLES = {p.name: yaml.safe_load(p.read_text())["config"] for p in sorted((ROOT / "stacks").glob("Pulumi.dev-*.yaml"))}
BASES = {**EXAMPLES, **{f"wide-{cloud}": config for cloud, config in WIDE.items()}}

# Positions where the marker, as a string, is a valid value: free text (SMTP user, reservation tags, subnet ids, the Prometheus
# release label, an AKS resource group, a GKE location, an AWS profile, a label), a key file's path or an access key
# ID (no secrets: docs/security.md), and `secure:` ciphertext, which gpupools never decrypts offline
# (test_secrets.py plants a marker there and runs every command). The plan shows a valid value where it belongs.
# A Gcore keypair is named, not given (the key stays in the project).
ACCEPTED = {"cluster.keypair", "pools.*.labels", "pools.*.labels.*", "pools.*.capacity.*.reservation.tags", "cluster.resourceGroup", "cluster.subnetIds.*", "cluster.location", "aws:profile", "aws:accessKey", "gcp:credentials",
            "pools.*.capacity.*.reservation.tags.*", "monitoring.releaseLabel", "monitoring.smtp.username",
            # A taint's and a toleration's key and value are free text, as a label's are.
            "pools.*.taints.*.key", "pools.*.taints.*.value", "teams.*.tolerations.*.key", "teams.*.tolerations.*.value"}


def leaked(text: str) -> list[str]:
    return [f for f in FRAGMENTS if f in text]


def _shape(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "string" if isinstance(value, str) else "list" if isinstance(value, list) else "mapping"


def _at(config, path):
    for step in path:
        config = config[step]
    return config


def planted(base: dict, path: tuple, shape: str) -> dict:
    """`base` with the marker of `shape` at `path`: the mappings and lists on the path are copies, the rest is shared
    with `base` (nothing that reads a stack changes it; the planting tests check `base` is unchanged after them)."""
    config = node = copy.copy(base)
    for step in path[:-1]:
        node[step] = copy.copy(node[step])
        node = node[step]
    node[path[-1]] = copy.deepcopy(SHAPES[shape])
    return config


def variants(base: dict):
    """Every position (leaves and the mappings and lists above them) with every wrong shape; a string, list or
    mapping also where one belongs, since a credential pasted into a name field has the right shape. Only a number,
    boolean or null where one belongs is left out: the marker number is a valid size there, and the others carry
    no marker."""
    for path in list(tree_paths(base))[1:]:
        current = _shape(_at(base, path))
        for shape in SHAPES:
            if shape != current or shape in ("string", "list", "mapping"):
                yield path, shape


def _pattern(path: tuple) -> str:
    steps = [str(path[0]).removeprefix("gpupools:"), *("*" if isinstance(s, int) else str(s) for s in path[1:])]
    return ".".join(steps)


def _accepted(path: tuple) -> bool:
    pattern = _pattern(path)
    if pattern.endswith(".secure"):
        return True
    parts = pattern.split(".")
    return any(len(a.split(".")) == len(parts) and all(x in ("*", y) for x, y in zip(a.split("."), parts)) for a in ACCEPTED)


def _one_line_errors(text: str) -> bool:
    lines = text.strip().splitlines()
    return bool(lines) and all(line.startswith("error: ") for line in lines)


@pytest.mark.parametrize("name", sorted(BASES))
def test_the_bases_are_valid_stacks(name):
    validate_stack(BASES[name], {})


@pytest.mark.parametrize("name", sorted(BASES))
def test_no_error_quotes_a_value_planted_anywhere(name):
    """Tier 1: every position, every shape, through the one validation every command runs first."""
    base, refused, accepted = BASES[name], 0, []
    unchanged = copy.deepcopy(base)
    for path, shape in variants(base):
        try:
            validate_stack(planted(base, path, shape), {})
        except ConfigError as exc:
            refused += 1
            text = "\n".join(str(p) for p in exc.problems)
            assert not leaked(text), (path, shape, [line for line in text.splitlines() if leaked(line)])
            assert _one_line_errors(text) and len(text.splitlines()) == len(exc.problems), (path, shape, text)
            continue
        if shape in ("string", "number", "list", "mapping"):
            accepted.append((path, shape))
    assert refused and base == unchanged
    unexpected = [(p, s) for p, s in accepted if not _accepted(p)]
    assert not unexpected, f"these positions accept the marker as a valid value: {unexpected}"


# --------------------------------------------------------------------------------------------------------------------
# Tier 2: every command, on the positions that hold or sit next to credentials


@pytest.fixture(autouse=True, scope="module")
def _each_stack_text_parsed_once():
    """Six commands read each planted stack file (`outputs`), and the stack reader parses YAML in Python: in this file
    they get a deep copy of the first parse of the same text. The file is still read and decoded at every command,
    with its limits (`read_bytes`, `decode`), and a text that does not parse raises every time (lru_cache keeps no
    exception)."""
    import functools

    from gpupools.stack import project, reading

    parsed = functools.lru_cache(maxsize=8)(reading.load_yaml)

    def read_document(path, parse=reading.load_yaml):
        text = reading.decode(reading.read_bytes(path))
        return copy.deepcopy(parsed(text)) if parse is reading.load_yaml else parse(text)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(project, "read_document", read_document)
        yield


def outputs(tmp_path: Path, config: dict, pool: str) -> list[tuple[str, object]]:
    path = tmp_path / "Pulumi.planted.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False, allow_unicode=True))
    out = tmp_path / "rendered"
    runs = [("plan", ["plan", "--config", str(path)]), ("plan --json", ["plan", "--config", str(path), "--json"]),
            ("check", ["check", "--config", str(path)]), ("check --json", ["check", "--config", str(path), "--json"]),
            ("render", ["render", "--config", str(path), "--out", str(out)]),
            ("workload", ["workload", "--config", str(path), "--pool", pool])]
    return [(name, runner.invoke(app, args)) for name, args in runs]


def assert_refused_without_echo(tmp_path: Path, config: dict, pool: str, what) -> None:
    for command, result in outputs(tmp_path, config, pool):
        text = result.stdout + result.stderr + repr(result.exception or "")
        assert not leaked(text), (what, command, text)
        assert result.exit_code == 2 and _one_line_errors(result.stderr) and not result.stdout, (what, command, result.stderr)
    assert not (tmp_path / "rendered").exists()


def _refused(config: dict) -> bool:
    try:
        validate_stack(config, {})
    except ConfigError:
        return True
    return False


def _credential_positions():
    """Positions under SECRET_FIELDS (gpupools' own on one cloud, they are alike on all; each cloud's provider keys),
    where the planted stack is refused; tier 1 shows which accepted ones carry the marker, and why that is right."""
    for name, base in BASES.items():
        if not name.startswith("wide-"):
            continue
        for path, shape in variants(base):
            pattern = _pattern(path)
            gpupools_key = str(path[0]).startswith("gpupools:")
            if any(pattern == s or pattern.startswith(s + ".") for s in SECRET_FIELDS) and (name == "wide-aws" or not gpupools_key) \
                    and _refused(planted(base, path, shape)):
                yield name, path, shape


CREDENTIAL_POSITIONS = list(_credential_positions())


def test_the_credential_positions_include_those_that_leaked():
    """health.alerts, its slack and webhook, monitoring.smtp, teams[].alerts and a team's slack, and a key pasted
    into an Azure id: each printed the value before."""
    patterns = {(_pattern(path), shape) for _, path, shape in CREDENTIAL_POSITIONS}
    for wanted in (("health.alerts", "string"), ("health.alerts.slack", "string"), ("health.alerts.slack.webhook", "mapping"),
                   ("monitoring.smtp", "string"), ("teams.*.alerts", "string"), ("teams.*.alerts.slack", "string"),
                   ("teams.*.alerts.slack.webhook", "list"), ("azure-native:clientId", "string")):
        assert wanted in patterns, wanted


@pytest.mark.parametrize("name, path, shape", CREDENTIAL_POSITIONS, ids=[f"{n}:{_pattern(p)}:{s}" for n, p, s in CREDENTIAL_POSITIONS])
def test_no_command_prints_a_credential_given_the_wrong_shape(tmp_path, name, path, shape):
    config = planted(BASES[name], path, shape)
    pool = _at(config, ("gpupools:pools", 0, "name"))
    assert_refused_without_echo(tmp_path, config, pool, (path, shape))


# --------------------------------------------------------------------------------------------------------------------
# Tier 3: a generated set, every command


@st.composite
def planted_stacks(draw):
    name = draw(st.sampled_from(sorted(BASES)))
    config = copy.deepcopy(BASES[name])
    for _ in range(draw(st.integers(min_value=0, max_value=2))):  # the fuzz tests' mutations first
        path = draw(st.sampled_from(list(tree_paths(config))[1:]))
        _at(config, path[:-1])[path[-1]] = draw(odd_values)
    path, shape = draw(st.sampled_from(list(variants(config))))
    return planted(config, path, shape), (name, path, shape)


@settings(max_examples=60, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted_stacks())
def test_generated_stacks_with_a_planted_credential(case):
    import tempfile

    config, what = case
    try:
        validate_stack(config, {})
    except ConfigError:
        pool = config.get("gpupools:pools", [{}])[0].get("name", "infer") if isinstance(config.get("gpupools:pools"), list) and \
            config["gpupools:pools"] and isinstance(config["gpupools:pools"][0], dict) else "infer"
        with tempfile.TemporaryDirectory() as tmp:
            assert_refused_without_echo(Path(tmp), config, str(pool), what)
    # Accepted: the marker sat where such a value is valid (ACCEPTED, checked in tier 1) or carried none.


# --------------------------------------------------------------------------------------------------------------------
# The rule itself


def _model_fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every field path of the stack models, list items and mapping keys as `*`."""
    out: set[str] = set()
    for name, field in model.model_fields.items():
        if name == "providers":
            continue
        path = f"{prefix}{field.alias or name}"
        out.add(path)
        out |= _annotation_fields(field.annotation, path)
    return out


def _annotation_fields(annotation, path: str) -> set[str]:
    out: set[str] = set()
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _model_fields(annotation, path + ".")
    if origin in (list, dict):
        out.add(path + ".*")
        out |= _annotation_fields(args[-1], path + ".*")
        return out
    for arg in args:
        if not isinstance(arg, (str, int)):
            out |= _annotation_fields(arg, path)
    return out


def _wide_paths() -> set[str]:
    found = set()
    for config in WIDE.values():
        for path in list(tree_paths(config))[1:]:
            if str(path[0]).startswith("gpupools:"):
                steps = [str(path[0]).removeprefix("gpupools:")]
                for i, step in enumerate(path[1:], 1):
                    parent = _at(config, path[:i])
                    free_keys = isinstance(parent, dict) and _pattern(path[:i]).split(".")[-1] in ("labels", "tags", "gpus", "profiles", "node")
                    steps.append("*" if isinstance(step, int) or free_keys else str(step))
                found.add(".".join(steps))
    return found


def test_the_wide_stacks_set_every_field_of_the_models():
    fields = {f for f in _model_fields(StackConfig) if not f.endswith(".secure")}
    wide = _wide_paths()
    missing = sorted(f for f in fields if f not in wide)
    assert not missing, f"wide_stacks.py sets no value for {missing}: add one, so the planting tests reach the field"


def test_every_quoted_field_is_a_field():
    fields = _model_fields(StackConfig) | {"aws:region", "aws:profile", "gcp:project", "gcp:region", "gcp:zone", "azure-native:location"}
    assert not sorted(QUOTED_FIELDS - fields)


@pytest.mark.parametrize("text, name", [
    ("g5.2xlarge", True), ("Standard_NC24ads_A100_v4", True), ("1g.10gb+me", True), ("subnet-0a1b2c3d4e5f67890", True),
    ("/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/rg-ml/providers/Microsoft.Compute/capacityReservationGroups/crg",
     True), ("example.com/team", True), ("2001:db8::/32", True), ("us-central\uff11", True), ("1.35", True),
    (MARK, False), ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", False), ("https://hooks.slack.com/services/T0/B0/x", False),
    ("pul-c964a1293477846138c6063c67700eebb3fcb694", False), ("ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z", False),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", False), ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", False), ("West Europe", True),
])
def test_what_reads_as_a_name(text, name):
    assert name_like(text) is name


def test_a_field_off_the_list_is_described_whatever_the_value():
    assert quotable(("pools", 0, "instanceType"), "g5.2xlarg")
    assert not quotable(("pools", 0, "instanceType"), MARK)
    assert not quotable(("monitoring", "smtp", "username"), "gpus")
    assert not quotable(("azure-native:clientId",), "not-a-uuid")
    assert quotable(("pools", 0, "maxNodes"), 1000) and not quotable(("pools", 0, "maxNodes"), MARK_NUMBER)


def test_redact_hides_a_value_a_check_quoted_by_itself():
    """The net under every message: a check elsewhere that quotes a value (whole, shortened, escaped) still prints
    its description."""
    config = {"gpupools:pools": [{"name": "a", "instanceType": MARK * 3}], "gpupools:monitoring": {"smtp": {"username": "ops-" + MARK}}}
    problems = [Problem("pools[0].instanceType", f"unknown aws GPU instance type {MARK * 3!r}; closest known: g5.2xlarge"),
                Problem("pools[0].instanceType", f"{(MARK * 3)[:40]}..."), Problem("monitoring.smtp.username", f"user \"ops-{MARK}\" is odd")]
    text = "\n".join(str(p) for p in redact(problems, config))
    assert not leaked(text), text
    assert "unknown aws GPU instance type <a string of 78 characters, not shown>; closest known: g5.2xlarge" in text
    assert 'user <a string of 30 characters, not shown> is odd' in text


# --------------------------------------------------------------------------------------------------------------------
# A value of a type its field does not take

# Shaped like a name (few switches between cases and digits, as `name_like` measures), so only the type rule keeps
# it out: a token of this form pasted into a boolean field was printed back.
NAME_SHAPED = "ghp_abcdefghijklmnop1234567890ABCDEFGH"


def _one_refusal(config: dict, path: str) -> str:
    with pytest.raises(ConfigError) as exc:
        validate_stack(config, {})
    lines = [str(p) for p in exc.value.problems if p.path == path]
    assert len(lines) == 1, [str(p) for p in exc.value.problems]
    return lines[0]


# (kind of field, where in WIDE["aws"], a value of another type that cannot be a credential, how the message shows it)
FIELD_KINDS = [
    ("boolean", ("gpupools:health", "readinessGate"), 7, "input should be a valid boolean (got 7)"),
    ("boolean of a pool", ("gpupools:pools", 0, "spot"), None, "input should be a valid boolean (got null)"),
    ("integer", ("gpupools:pools", 0, "maxNodes"), True, "input should be a valid integer (got true)"),
    ("number", ("gpupools:monitoring", "idle", "forHours"), False, "input should be a valid number (got false)"),
    ("word", ("gpupools:pools", 0, "os"), 2, "input should be 'al2023' or 'bottlerocket' (got 2)"),
    ("word at the top", ("gpupools:quotas",), 3, "input should be 'kueue', 'resourcequota' or 'kai' (got 3)"),
    ("word in a list", ("gpupools:cluster", "controlPlaneLogs", 0), 1.5,
     "input should be 'api', 'audit', 'authenticator', 'controllerManager' or 'scheduler' (got 1.5)"),
    ("word or integer", ("gpupools:teams", 0, "borrow"), None, "input should be a valid integer (got null)"),  # text: the words' error
    ("integer or mapping", ("gpupools:teams", 0, "gpus"), 2.5, "input should be a valid integer (got 2.5)"),
    ("list", ("gpupools:pools", 0, "zones"), 4, "expected a list, got a number of 1 digit"),
    ("mapping", ("gpupools:pools", 0, "sharing"), 5, "expected a mapping, got a number of 1 digit"),
    ("text given a number", ("gpupools:pools", 0, "instanceType"), 6,
     "expected text, got the number 6: YAML read the value as a number; quote it"),
]


@pytest.mark.parametrize("what, path, safe, shown", FIELD_KINDS, ids=[k[0] for k in FIELD_KINDS])
def test_a_value_of_the_wrong_type_is_described_unless_it_cannot_be_a_credential(what, path, safe, shown):
    """A field that takes no free text (a boolean, a number, a word of its own, a list or a mapping) shows a value of
    another type only where it cannot be a credential: null, a boolean, a short number. Text, however much it looks
    like a name, is described by its length, which tells the reader what went wrong without repeating it."""
    from gpupools.stack.errors import field_path

    where = field_path((str(path[0]).removeprefix("gpupools:"), *path[1:]))
    assert name_like(NAME_SHAPED)
    if what != "text given a number":  # where text belongs, a name-shaped value has the right type: QUOTED_FIELDS decide
        config = copy.deepcopy(WIDE["aws"])
        _at(config, path[:-1])[path[-1]] = NAME_SHAPED
        line = _one_refusal(config, where)
        assert NAME_SHAPED[:6] not in line and f"got a string of {len(NAME_SHAPED)} characters" in line, line
    config = copy.deepcopy(WIDE["aws"])
    _at(config, path[:-1])[path[-1]] = safe
    assert _one_refusal(config, where) == f"error: {where}: {shown}"


def test_no_field_that_takes_no_text_echoes_text():
    """Every position of every wide stack, given the name-shaped token: a refusal for the wrong type (pydantic's
    `input should be ...`, `expected a list`, `expected a mapping`) never holds it. Where it is shown, the field takes
    text and QUOTED_FIELDS allow the form."""
    for base in WIDE.values():
        for path in list(tree_paths(base))[1:]:
            config = copy.deepcopy(base)
            _at(config, path[:-1])[path[-1]] = NAME_SHAPED
            try:
                validate_stack(config, {})
            except ConfigError as exc:
                for problem in exc.problems:
                    text = str(problem)
                    if NAME_SHAPED[:6] in text:
                        assert "input should be" not in text and "expected a " not in text, (path, text)
                        assert quoted_field_of(problem.path), (path, text)


def quoted_field_of(path: str) -> bool:
    """Whether a problem's path (`pools[0].labels.team`) names a field on QUOTED_FIELDS."""
    import re

    from gpupools.stack.errors import quoted_field

    return quoted_field(tuple(int(step[1:-1]) if step.startswith("[") else step for step in re.findall(r"\[\d+\]|[^.\[\]]+", path)))


@pytest.mark.parametrize("loc, value, words, expected", [
    (("health", "readinessGate"), NAME_SHAPED, (), f"a string of {len(NAME_SHAPED)} characters"),
    (("health", "readinessGate"), "true", (), "a string of 4 characters"),
    (("health", "readinessGate"), 1, (), "1"),
    (("health", "readinessGate"), None, (), "null"),
    (("pools", 0, "maxNodes"), 1234567890, (), "1234567890"),
    (("pools", 0, "maxNodes"), 12345678901, (), "a number of 11 digits"),  # MAX_QUOTED_NUMBER: no longer a size
    (("pools", 0, "maxNodes"), 1.5, (), "1.5"),
    (("teams", 0, "borrow"), "all", ("all", "none"), "'all'"),
    (("teams", 0, "borrow"), "alll", ("all", "none"), "a string of 4 characters"),
    (("teams", 0, "borrow"), "none", ("all",), "a string of 4 characters"),
    (("monitoring", "smtp", "username"), 5, (), "a number of 1 digit"),  # off QUOTED_FIELDS: nothing is quoted
    (("monitoring", "smtp", "username"), "all", ("all",), "a string of 3 characters"),
])
def test_what_a_value_of_the_wrong_type_shows(loc, value, words, expected):
    from gpupools.stack.errors import shown_wrong_type

    assert shown_wrong_type(loc, value, words) == expected


@pytest.mark.parametrize("loc, words", [
    (("teams", 0, "borrow", "<word>"), {"all", "none"}),
    (("teams", 0, "borrow"), {"all", "none"}),
    (("cluster", "controlPlaneLogs", 0), {"api", "audit", "authenticator", "controllerManager", "scheduler"}),
    (("pools", 0, "capacity", 0, "<word>"), {"on-demand", "spot", "flex-start", "queued", "any-reservation"}),
    (("quotas",), {"kueue", "resourcequota", "kai"}),
    (("health", "readinessGate"), set()),
    (("teams", 0, "gpus", "<per-pool>", "infer"), set()),
    (("pools", 0, "labels", "team"), set()),
    (("nonsense", 3), set()),
])
def test_the_words_of_a_field_are_read_from_its_model(loc, words):
    from gpupools.stack.values import field_words

    assert field_words(StackConfig, loc) == words


@pytest.mark.parametrize("path, value, hint", [
    (("gpupools:health", "readinessGate"), "true", "; true or false in quotes is text: write it without them"),
    (("gpupools:pools", 0, "maxNodes"), "64", "; a number in quotes is text: write it without them"),
    (("gpupools:monitoring", "idle", "forHours"), "4.5", "; a number in quotes is text: write it without them"),
    (("gpupools:monitoring", "idle", "forHours"), "4.5h", ""),
    (("gpupools:health", "readinessGate"), "yes", ""),
    (("gpupools:pools", 0, "maxNodes"), "6 nodes", ""),
])
def test_a_quoted_number_or_boolean_is_told_to_lose_its_quotes(path, value, hint):
    """Described like any text, yet its form is safe to name: the message says what to write instead."""
    from gpupools.stack.errors import field_path

    config = copy.deepcopy(WIDE["aws"])
    _at(config, path[:-1])[path[-1]] = value
    where = field_path((str(path[0]).removeprefix("gpupools:"), *path[1:]))
    line = _one_refusal(config, where)
    assert line.endswith(f"(got a string of {len(value)} characters){hint}"), line
