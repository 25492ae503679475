"""Every stack file, however long or strange, is judged in time linear in its size and ends in `error:` lines or a
valid stack, never a traceback.

Three parts: the YAML that ended in a traceback (a lone `=`, a tag on a value it cannot hold, `!!map` on a list);
the cost of one long value against one a tenth as long, through the reader, validation and the CLI's error lines
(a ratio of the same code at two sizes, so the machine's speed cancels out); and a fuzzer over the example stacks
with YAML oddities and values of up to a megabyte.

The fuzzer runs `FUZZ_EXAMPLES` generated files by default, a few seconds. The full run of 1,000:

    GPUPOOLS_FUZZ_EXAMPLES=1000 .venv/bin/python -m pytest tests/stack/test_input_bounds.py -k fuzz -p no:cacheprovider
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import tempfile
import time
from pathlib import Path

import pytest
import typer
import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpupools.cli import main as cli
from gpupools.cli.main import app
from gpupools.stack.errors import ConfigError, Problem, redact
from gpupools.stack.reading import MAX_BYTES, ReadError, load_yaml

from conftest import ROOT, TooSlow, least_cpu_seconds, stack_config, too_slow, write_stack

runner = CliRunner()
SECONDS_PER_FILE = 5


def error_lines(path: Path) -> list[str]:
    """What `gpupools plan --config PATH` prints for a refused stack: the reader, the validation and the CLI's own
    error handler, in process; [] for a valid stack."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            cli.load(None, path)
        except typer.Exit as exc:  # what `fail` raises once it has written the lines
            assert exc.exit_code == 2, exc.exit_code
            lines = stderr.getvalue().splitlines()
            assert lines and all(line.startswith("error: ") for line in lines), stderr.getvalue()[:2000]
            return lines
    assert not stderr.getvalue()
    return []


# --------------------------------------------------------------------------------------------------------------------
# The tracebacks


def test_a_lone_equals_sign_is_the_string_pulumi_reads():
    """YAML 1.1 resolves a plain `=` to its "value key" type, which PyYAML has no constructor for (a KeyError out of
    the reader); the Pulumi CLI (go-yaml v3) reads the string "=", and so does gpupools."""
    assert load_yaml("a: =\nb: [=, x]\n=: 1\nc: '='\n") == {"a": "=", "b": ["=", "x"], "=": 1, "c": "="}


def test_a_lone_equals_sign_where_a_boolean_belongs_is_one_line(tmp_path):
    text = yaml.safe_dump({"config": stack_config("aws")}, sort_keys=False).replace("maxNodes: 3", "maxNodes: 3\n    spot: =")
    path = tmp_path / "Pulumi.eq.yaml"
    path.write_text(text)
    result = runner.invoke(app, ["plan", "--config", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.stdout + result.stderr
    assert result.stderr.splitlines() == ["error: pools[0].spot: input should be a valid boolean (got a string of 1 character)"]


@pytest.mark.parametrize("value, expected", [
    ("!!int 1.5", "'1.5' cannot be read as !!int, the tag written on it; drop the tag or fix the value at line 1, column 4"),
    ("!!int", "an empty value cannot be read as !!int"),
    ("!!int ''", "an empty value cannot be read as !!int"),
    ("!!int 0x", "'0x' cannot be read as !!int"),
    ("!!int _", "'_' cannot be read as !!int"),
    ("!!float abc", "'abc' cannot be read as !!float"),
    ("!!float", "an empty value cannot be read as !!float"),
    ("!!bool maybe", "'maybe' cannot be read as !!bool, the tag written on it"),
    ("!!bool ''", "an empty value cannot be read as !!bool"),
    ("!!bool hunter2-Pa55word-Zx9Q7mK2vL4tR8", "<a string of 31 characters> cannot be read as !!bool"),
    ("!!map [1]", "not valid YAML at line 1, column 4: expected a mapping node, but found sequence"),
    ("!!map 1", "not valid YAML at line 1, column 4: expected a mapping node, but found scalar"),
])
def test_a_tag_on_a_value_it_cannot_hold_is_one_line(value, expected):
    """PyYAML's own constructors raise ValueError, KeyError or IndexError for these (and `!!map` on a list reached
    the duplicate-key check as a TypeError): each is a ReadError naming the line."""
    with pytest.raises(ReadError) as exc:
        load_yaml(f"k: {value}\n")
    assert str(exc.value).startswith(expected), str(exc.value)


@pytest.mark.parametrize("value, expected", [("!!int 12", 12), ("!!float 1.5", 1.5), ("!!bool true", True), ("!!str =", "="),
                                             ("!!map {a: 1}", {"a": 1}), ("!!seq [1]", [1]), ("!!null ''", None)])
def test_a_tag_on_a_value_it_holds_still_reads(value, expected):
    assert load_yaml(f"k: {value}\n") == {"k": expected}


def test_a_tagged_value_in_a_stack_file_names_the_file_and_line(tmp_path):
    path = tmp_path / "Pulumi.tag.yaml"
    path.write_text("config:\n  aws:region: eu-central-1\n  gpupools:cloud: aws\n  gpupools:cluster: {name: ml, create: !!bool maybe}\n")
    assert error_lines(path) == [f"error: {path}: 'maybe' cannot be read as !!bool, the tag written on it; drop the tag or fix the value "
                                 f"at line 4, column 40"]


@pytest.mark.parametrize("digits", [23, 4_300, 10_000])
def test_a_long_number_with_a_leading_zero_is_refused_like_any_long_number(digits):
    """YAML 1.1 reads it as octal, 1.2 as decimal: the message about that converted it both ways, and Python refuses
    to convert 4,300 digits or more (a ValueError out of the reader); the reader's own limit speaks first."""
    with pytest.raises(ReadError, match=f"an integer of {digits} digits; gpupools reads integers of at most 20 digits at line 1"):
        load_yaml("x: 0" + "7" * (digits - 1))


def test_a_short_number_with_a_leading_zero_still_names_both_readings():
    (dispute,) = load_yaml("x: 0" + "7" * 19).values()
    assert dispute.why == f"'0{'7' * 19}' is the octal number {int('7' * 19, 8)} in YAML 1.1 but {'7' * 19} in YAML 1.2, which Pulumi reads"


def test_text_that_is_not_unicode_is_one_line():
    """libyaml takes UTF-8 bytes: a lone surrogate in a str (only a caller can make one; files are decoded
    strictly) is refused like any character YAML does not allow."""
    with pytest.raises(ReadError, match=r"character U\+D800 at line 2 \(character 8\) is not allowed"):
        load_yaml("a: 1\nb: \ud800\n")


def test_the_end_of_a_file_is_where_the_reader_says():
    """libyaml puts the end of a file without a final line break on the line after it: it is reported where the
    text ends."""
    with pytest.raises(ReadError, match="not valid YAML at line 2, column 9: did not find expected ',' or ']'"):
        load_yaml("a: 1\nb: [1, 2")


# --------------------------------------------------------------------------------------------------------------------
# Linear time


def _costs(paths: list[Path]) -> list[float]:
    """The least CPU time of runs of the reader, the validation and the CLI's error lines on each of `paths`
    (conftest.least_cpu_seconds); each run must refuse the value and describe it, not print it."""
    def refused(path: Path) -> None:
        lines = error_lines(path)
        assert lines, "the long value must be refused"
        assert sum(map(len, lines)) < 2000, lines  # described, not printed

    return least_cpu_seconds(paths, refused)


# (where the value goes, the text it repeats): each reaches a step that once cost more than linear time.
LONG_VALUES = {
    # A message that quotes the whole value, redacted by trying every spelling at every position: minutes at 10 kB.
    "label value": ("pools[0].labels", "a"),
    # The catalog's "closest known" instance types: difflib indexes every character first.
    "instance type": ("pools[0].instanceType", "A1b2"),
    # An invisible character in every position: looked at one by one, in Python, by several checks.
    "invisible characters": ("pools[0].name", "x" * 49 + "\u2060"),
    # A key, described in the path, and quoted text with spaces: the pure-Python YAML scanner's slowest text.
    "key": ("pools[0].labels.key", "a b "),
    # A credential field: every spelling of the value hidden wherever a message holds it.
    "alert webhook": ("health.alerts.slack.webhook", "https://hooks.example.com/"),
}


def _stack_with(where: str, unit: str, size: int, tmp_path: Path) -> Path:
    """The dev-aws example with one long value."""
    value = (unit * (size // len(unit) + 1))[:size]
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev-aws.yaml").read_text())["config"]
    if where == "pools[0].labels":
        config["gpupools:pools"][0]["labels"] = {"team": value}
    elif where == "pools[0].labels.key":
        config["gpupools:pools"][0]["labels"] = {value: "x"}
    elif where == "health.alerts.slack.webhook":
        config["gpupools:health"] = {"alerts": {"slack": {"webhook": value}}}
    else:
        config["gpupools:pools"][0][where.split(".")[-1]] = value
    path = tmp_path / f"Pulumi.long{size}.yaml"
    # libyaml's writer: a key longer than YAML's 1,024 characters for a plain key is written as an explicit `? key`.
    path.write_text(yaml.dump({"config": config}, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), allow_unicode=True, width=1 << 30))
    assert path.stat().st_size <= MAX_BYTES
    return path


@pytest.mark.parametrize("name", sorted(LONG_VALUES))
def test_a_value_ten_times_longer_costs_at_most_ten_times_more(name, tmp_path):
    where, unit = LONG_VALUES[name]
    short, long = _costs([_stack_with(where, unit, 100_000, tmp_path), _stack_with(where, unit, 1_000_000, tmp_path)])
    print(f"{name}: {short * 1000:.1f} ms, {long * 1000:.1f} ms, {long / short:.1f}x")
    assert long <= 10 * short, f"{name}: 100,000 characters {short:.3f} s, 1,000,000 characters {long:.3f} s ({long / short:.1f}x)"
    assert long < SECONDS_PER_FILE, f"{name}: {long:.1f} s"


def test_redaction_still_finds_every_spelling_whole_or_shortened():
    """The linear search finds what the old one found: a hidden value whole, escaped as JSON or Python would,
    shortened to its first 16 or more characters, twice in a row, and a short one only as a whole word."""
    token = "ghp_" + "Zx9Q7mK2vL4tR8wY" * 3
    lines = 'first "line"\nsecond\tZx9Q7mK2vL4tR8wY'
    config = {"gpupools:health": {"alerts": {"slack": {"webhook": token, "channel": "#ops-Zx9Q"}, "note": lines}},
              "gpupools:cluster": {"name": "sekrit"}}
    message = (f"a {token!r}, shortened {token[:20]}..., escaped {json.dumps(lines)} and {lines!r}, twice {token}{token}; "
               f"the channel '#ops-Zx9Q' and #ops-Zx9Qa")
    (problem,) = redact([Problem("health.alerts", message)], config)
    assert "Zx9Q7mK2" not in problem.message and "line" not in problem.message, problem.message
    assert problem.message == ("a <a string of 52 characters, not shown>, shortened <a string of 52 characters, not shown>, escaped "
                               "<a string of 36 characters, not shown> and <a string of 36 characters, not shown>, twice "
                               "<a string of 52 characters, not shown><a string of 52 characters, not shown>; the channel "
                               "<a string of 9 characters, not shown> and #ops-Zx9Qa")


def test_a_long_value_that_starts_inside_a_short_one_is_hidden_whole():
    """A short value is found as a whole word; a long one that begins inside it and goes on after it is hidden from
    where it begins, not left to show its rest."""
    short, long = "abc-Zq8", "Zq8.PLANTEDz8Kq3Vw7Lm2Xr9Tb4Nc"
    config = {"gpupools:health": {"alerts": {"a": short, "b": long}}}
    (problem,) = redact([Problem("health.alerts", "x abc-Zq8.PLANTEDz8Kq3Vw7Lm2Xr9Tb4Nc y")], config)
    assert problem.message == "x <a string of 7 characters, not shown><a string of 30 characters, not shown> y", problem.message
    (problem,) = redact([Problem("health.alerts", f"x {short} y")], config)
    assert problem.message == "x <a string of 7 characters, not shown> y"


def test_redaction_picks_the_longest_of_values_that_start_alike():
    """Spellings sharing their first characters are narrowed by bisection: the longest that the message holds wins,
    whichever way they sort."""
    common = "PLANTEDz8Kq3Vw7Lm2Xr9Tb4Nc"
    values = [common + tail for tail in ("", "A", "AB", "ABC" * 50, "B", "Zq", "a" * 300)]
    config = {"gpupools:teams": [{"alerts": {"slack": {"webhook": v}}} for v in values]}
    for value in values:
        (problem,) = redact([Problem("teams[0].alerts", f"x {value}! y")], config)
        assert problem.message == f"x <a string of {len(value)} characters, not shown>! y", (value, problem.message)
    (problem,) = redact([Problem("teams[0].alerts", f"x {common}ABCAB! y")], config)
    assert problem.message == "x <a string of 176 characters, not shown>! y"  # shortened: the longest it starts


def test_close_matches_skip_only_words_too_long_to_come_close():
    """A word may be as long as the longest possibility times (2 - cutoff) / cutoff and still come close: 36
    characters against 12 at a cutoff of 0.5, with all 12 in common, is a ratio of exactly 0.5."""
    import difflib

    from gpupools.stack.errors import close_matches

    types = ["g5.2xlarge", "g5.xlarge", "p4d.24xlarge"]
    for word in ("g5.2xlarg", "p4d.24xlarge" + "-" * 24, "p4d.24xlarge" + "-" * 25, "g5", ""):
        assert close_matches(word, types, n=3, cutoff=0.5) == difflib.get_close_matches(word, types, n=3, cutoff=0.5), word
    assert close_matches("p4d.24xlarge" + "-" * 24, types, n=3, cutoff=0.5) == ["p4d.24xlarge"]
    started = time.process_time()
    assert close_matches("p4d.24xlarge" * 100_000, types, n=3, cutoff=0.5) == []
    assert time.process_time() - started < 0.05


def test_a_name_may_hide_invisible_characters_up_to_a_limit():
    """200 visible characters make a name whatever invisible ones it holds, up to 800 characters in all; beyond,
    a string is no name and is not read character by character."""
    from gpupools.stack.errors import name_like

    assert name_like("a" * 200) and not name_like("a" * 201)
    assert name_like("a" * 200 + "\u2060" * 600) and not name_like("a" * 200 + "\u2060" * 601)


# --------------------------------------------------------------------------------------------------------------------
# The fuzzer

FUZZ_EXAMPLES = int(os.environ.get("GPUPOOLS_FUZZ_EXAMPLES", "30"))
EXAMPLE_TEXTS = {p.name: p.read_text() for p in sorted((ROOT / "stacks").glob("Pulumi.dev-*.yaml"))}

# Plain scalars, tags and flow values the YAML readers disagree on or once turned into a traceback, and their neighbours.
ODD_VALUES = ["=", "<<", "~", "?", "-", "!!int 1.5", "!!int", "!!bool maybe", "!!float abc", "!!float ''", "!!map [1]", "!!seq a",
              "!!str [1]", "!!binary aGk=", "!!set {a}", "!!omap [a: 1]", "!!timestamp 2001-12-14", "!!python/name:os.system", "!foo bar",
              "*nope", "&a x", "[=]", "{=: 1}", "{<<: 1}", "{<<: [1]}", "{<<: {a: 1}}", "{1: 2}", "{[1]: 2}", "{null: 1}", "{true: 1}",
              "{? [a]: b}", "0x1F", "0o17", "017", "0b101", "1_000", "1:30", "190:20:30", ".5", "+.inf", ".NaN", "1e400", "1e3", "yes",
              "off", "y", "2026-01-01", "2026-01-01T00:00:00Z", "'\\x00'", '"\\ud800"', '"\\x85"', '"\\u2028"', '"\\u2060eu"', "|\n    x",
              ">-\n    x", "-9223372036854775809", "9" * 25, "[[[[]]]]", "'it''s'", "`x", "@x", "%x", "\t", "a\u00a0b"]
LONG_UNITS = ["a", "A1b2", "-", ".", "=", ":", "a b", "\u00e9", "\u2060", "x\u2060", "ab/", "0", "'", '"', "\\", "\u2028",
              "ghp_Zx9Q7mK2vL4tR8wY", "https://hooks.example.com/"]
SIZES = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000]


def _scalar(draw, unit: str, size: int) -> str:
    value = (unit * (size // len(unit) + 1))[:size]
    style = draw(st.sampled_from(["plain", "single", "double", "literal"]))
    if style == "plain":
        return value
    if style == "single":
        return "'" + value.replace("'", "''") + "'"
    if style == "double":
        return json.dumps(value, ensure_ascii=False)
    return "|\n" + "\n".join("      " + line for line in value.splitlines() or [""])


@st.composite
def stack_texts(draw) -> bytes:
    """An example stack, as written, with up to three of its lines changed: a value replaced by a YAML oddity or a
    long scalar, a key replaced, a line repeated; a fifth are left valid."""
    lines = EXAMPLE_TEXTS[draw(st.sampled_from(sorted(EXAMPLE_TEXTS)))].splitlines()
    editable = [i for i, line in enumerate(lines) if ":" in line and not line.lstrip().startswith("#")]
    changes = 0 if draw(st.booleans()) and draw(st.booleans()) else draw(st.integers(min_value=1, max_value=3))
    for _ in range(changes):
        i = draw(st.sampled_from(editable))
        line = lines[i]
        key, colon, rest = line.partition(": ") if ": " in line else (line.rstrip(":"), ":", "")
        how = draw(st.sampled_from(["odd", "odd", "long", "long", "long", "key", "repeat", "comment", "requote"]))
        if how == "comment":  # a file that stays valid, however long
            unit = draw(st.sampled_from(LONG_UNITS))
            size = draw(st.sampled_from(SIZES))
            lines.insert(i, "# " + (unit * (size // len(unit) + 1))[:size].replace("\u2028", " ").replace("\n", " "))
        elif how == "requote":  # the same value, quoted: valid where the value is a word
            word = rest.split(" #")[0].strip()
            if re.fullmatch(r"[A-Za-z][-A-Za-z0-9._]*", word) and word.lower() not in ("true", "false", "null", "yes", "no", "on", "off", "y", "n"):
                quote = draw(st.sampled_from(["'", '"']))
                lines[i] = f"{key}: {quote}{word}{quote}"
        elif how == "odd":
            lines[i] = f"{key}: {draw(st.sampled_from(ODD_VALUES))}"
        elif how == "long":
            unit = draw(st.one_of(st.sampled_from(LONG_UNITS), st.text(min_size=1, max_size=4)))
            lines[i] = f"{key}: {_scalar(draw, unit, draw(st.sampled_from(SIZES)))}"
        elif how == "key":
            indent = key[:len(key) - len(key.lstrip())]
            new = draw(st.one_of(st.sampled_from(ODD_VALUES[:20]), st.builds(lambda u, n: (u * n)[:n], st.sampled_from(LONG_UNITS),
                                                                               st.sampled_from(SIZES))))
            lines[i] = f"{indent}{new}: {rest}"
        else:
            lines.insert(i + 1, line)
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


def _example(old: str, new: str) -> bytes:
    text = EXAMPLE_TEXTS["Pulumi.dev-aws.yaml"]
    assert old in text
    return text.replace(old, new, 1).encode()


@settings(max_examples=FUZZ_EXAMPLES, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(stack_texts())
# What the fuzzer found first: the tracebacks, and the values that took minutes.
@example(_example("spot: true", "spot: ="))
@example(_example("spot: true", "spot: !!bool maybe"))
@example(_example("maxNodes: 6", "maxNodes: !!int 6.5"))
@example(_example("diskSizeGb: 200", "diskSizeGb: !!float"))
@example(_example("labels: {team: search}", "labels: !!map [team, search]"))
@example(_example("labels: {team: search}", "labels: {team: " + "a" * 100_000 + "}"))
@example(_example("instanceType: g5.2xlarge", "instanceType: " + "A1b2" * 250_000))
@example(_example("aws:region: eu-central-1", "aws:region: " + "0" * 10_000))
def test_fuzzed_stack_files_end_in_error_lines_in_bounded_time(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Pulumi.fuzz.yaml"
        path.write_bytes(data)
        previous = signal.signal(signal.SIGALRM, too_slow)
        signal.setitimer(signal.ITIMER_REAL, 4 * SECONDS_PER_FILE)  # so a regression fails here rather than hanging the run
        started = time.perf_counter()
        try:
            lines = error_lines(path)
        except TooSlow:
            pytest.fail(f"more than {4 * SECONDS_PER_FILE} s on a file of {len(data):,} bytes")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        elapsed = time.perf_counter() - started
    event("refused" if lines else "valid")
    assert elapsed < SECONDS_PER_FILE, f"{elapsed:.1f} s on a file of {len(data):,} bytes"
    assert sum(map(len, lines)) < 200 * len(lines) + 10_000, "a message printed a value instead of describing it"


def test_the_fuzzer_reaches_the_tracebacks_it_was_written_for():
    """The oddities that ended in a traceback are among the fuzzer's values, and each ends in one error line."""
    for value in ("=", "!!int 1.5", "!!bool maybe", "!!float ''", "!!map [1]"):
        assert value in ODD_VALUES
        config = yaml.safe_dump({"config": stack_config("aws")}, sort_keys=False)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "Pulumi.odd.yaml"
            path.write_text(config.replace("maxNodes: 3", f"maxNodes: 3\n    spot: {value}"))
            (line,) = error_lines(path)
            assert line.startswith(("error: pools[0].spot: ", f"error: {path}: ")), line
