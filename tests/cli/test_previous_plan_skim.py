"""How `plan --against` skips what it does not read of a previous plan (gpupools.cli.previousplan): one regex match
per list or object when its strings end and it nests within the limit, token by token otherwise; both answer as
reading it one string or bracket at a time does (`reference_end`, the reader's first way), in time linear in the file
whatever its strings, backslashes and brackets, and keys and strings without escapes are read without the parser."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpupools.cli import previousplan
from gpupools.cli.previousplan import _body, _container, _Skim, read_previous_plan
from gpupools.stack.reading import MAX_DEPTH, ReadError

from conftest import least_cpu_seconds

DEEP = f"nested more than {MAX_DEPTH} levels deep; gpupools allows {MAX_DEPTH}"

# A string or a bracket, found at each place in turn: a quote that opens no string that ends is passed by one byte.
_SKIP = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def reference_end(buf: bytes, pos: int, depth: int) -> int:
    """Where the container at `pos` ends, read one string or bracket at a time (quadratic on some inputs: small ones
    only); ReadError as the reader raises it."""
    level = depth + 1
    for match in _SKIP.finditer(buf, pos + 1):
        token = match.group()
        if token in (b"[", b"{"):
            level += 1
            if level > MAX_DEPTH:
                raise ReadError(DEEP)
        elif token in (b"]", b"}"):
            level -= 1
            if level == depth:
                return match.end()
    raise _Skim(buf).error(pos, "a list or object that does not end")


def outcome(skip, *args):
    try:
        return skip(*args)
    except ReadError as error:
        return str(error)


@pytest.fixture
def no_token_loop(monkeypatch):
    """The token-by-token skip refused: what is skipped must be taken by the one match."""
    def refuse(self, start, depth):
        raise AssertionError(f"skipped token by token at byte {start}")
    monkeypatch.setattr(_Skim, "skip_rest", refuse)


# --------------------------------------------------------------------------------------------------------------------
# The one match


@pytest.mark.parametrize("text", [
    b'[]', b'{}', b'[1, "a", {"b": [null, true]}]', b'{"a": "]}[{", "b": "\\"]"}', b'["\\\\", "\\\\\\"]"]',
    b'["\x01\t control characters are skipped as they are"]',
    b'[}',  # any closing bracket closes any opening one
])
def test_a_container_whose_strings_end_is_one_match(no_token_loop, text):
    buf = text + b", 7]"
    assert _Skim(buf).value_end(0, 1) == len(text) == reference_end(buf, 0, 1)


@pytest.mark.parametrize("depth", [0, 1, 2, MAX_DEPTH - 2, MAX_DEPTH - 1])
def test_the_one_match_takes_a_container_nested_to_the_limit(no_token_loop, depth):
    # At `depth`, the container and what it holds may take MAX_DEPTH - depth levels, and no more.
    inner = MAX_DEPTH - depth
    buf = b'[' * inner + b'"x"' + b']' * inner
    assert _Skim(buf).value_end(0, depth) == len(buf)


@pytest.mark.parametrize("depth", [0, 1, MAX_DEPTH - 1])
def test_a_level_more_is_refused(depth):
    inner = MAX_DEPTH - depth + 1
    buf = b'[' * inner + b']' * inner
    assert outcome(_Skim(buf).value_end, 0, depth) == DEEP == outcome(reference_end, buf, 0, depth)


def test_at_the_limit_a_container_holds_no_container():
    assert _container(0).match(b'["a", 1]') is not None
    assert _container(0).match(b'["a", []]') is None
    assert _container(1).match(b'["a", []]') is not None
    assert _container(1).match(b'["a", [{}]]') is None


@pytest.mark.parametrize("text", [
    b'["abc', b'["a\\"]', b'["a\\\n"]', b'["a\\', b'[[[', b'["a"', b'{"a": ["b"}',
])
def test_the_one_match_fails_where_a_string_or_container_does_not_end(text):
    assert _container(MAX_DEPTH - 1).match(text) is None


# --------------------------------------------------------------------------------------------------------------------
# Token by token, and what the two make of any input


@pytest.mark.parametrize("text, expected", [
    (b'["]"]', 5),  # a bracket in a string that ends is not counted
    (b'["\\"]"]', 7),  # nor one after an escaped quote
    (b'["\\\\"]', 6),  # an escaped backslash ends before the quote
    (b'["a]', 4),  # a string that does not end: its brackets count
    (b'["\\"]', 5),  # ... and those after the quotes it escapes
    (b'["\\\n"]', 6),  # a backslash before a newline ends the string there; the quote after it opens another
    (b'["\\\n" ]]', 7),
    (b'["a\\\n]"]', 6),
    (b'[{"a": "\\\\\\\\"}, "}"]', 20),
    (b'["\\"\\"\\"[[]]]', 13),
    (b'["\\\n\\"]"]', 9),  # after the backslash and newline, a backslash and a quote that opens a string
])
def test_token_by_token_counts_the_brackets_the_reference_counts(text, expected):
    buf = text + b" ] } tail"
    assert _Skim(buf).skip_rest(0, 3) == expected == reference_end(buf, 0, 3)
    assert _Skim(buf).value_end(0, 3) == expected


@pytest.mark.parametrize("text", [b'[', b'["a"', b'["\\"]"', b'[[]', b'["a\\'])
def test_a_container_that_does_not_end_names_where_it_starts(text):
    buf = b'{\n  "a": ' + text
    expected = "not valid JSON at line 2, byte 9: a list or object that does not end"
    assert outcome(_Skim(buf).skip_rest, 9, 1) == expected == outcome(reference_end, buf, 9, 1)
    assert outcome(_Skim(buf).value_end, 9, 1) == expected


def test_where_the_one_match_stops_the_body_match_allows_the_levels_left(monkeypatch):
    allowed = []

    def body(inner):
        allowed.append(inner)
        return _body(inner)
    monkeypatch.setattr(previousplan, "_body", body)
    buf = b'[[["a\\\n]]]]'  # three levels, the string in the third does not end
    assert _Skim(buf).skip_rest(0, 5) == len(buf) - 1 == reference_end(buf, 0, 5)
    # At levels 6, 7 and 8, what is left of MAX_DEPTH; at 8 again after the string, then 7 and 6 as they close.
    assert allowed == [MAX_DEPTH - 6, MAX_DEPTH - 7, MAX_DEPTH - 8, MAX_DEPTH - 8, MAX_DEPTH - 7, MAX_DEPTH - 6]


def test_token_by_token_holds_the_limit_in_strings_that_do_not_end():
    buf = b'["' + b'[' * MAX_DEPTH + b']' * MAX_DEPTH
    assert outcome(_Skim(buf).skip_rest, 0, 0) == DEEP == outcome(reference_end, buf, 0, 0)
    shallower = b'["' + b'[' * (MAX_DEPTH - 1) + b']' * (MAX_DEPTH - 1)  # at the limit, and it does not end
    expected = "not valid JSON at line 1, byte 0: a list or object that does not end"
    assert outcome(_Skim(shallower).skip_rest, 0, 0) == expected == outcome(reference_end, shallower, 0, 0)


soup = st.lists(st.sampled_from([b"[", b"]", b"{", b"}", b'"', b"\\", b"\n", b"\\\n", b"a", b",", b'\\"', b"\\\\", b"\x01", b'"x"']),
                max_size=60).map(b"".join)


@settings(max_examples=600, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([b"[", b"{"]), soup, st.integers(0, MAX_DEPTH - 1))
@example(b"[", b'"\\"' + b"[" * 40, 0)
@example(b"[", b'"\\\n"]', 0)
@example(b"[", b"[" * (MAX_DEPTH - 2) + b"]" * (MAX_DEPTH - 1), 0)
@example(b"{", b'"\\\\"]' + b"]", 5)
def test_any_input_is_skimmed_as_the_reference_reads_it(head, body, depth):
    buf = head + body
    expected = outcome(reference_end, buf, 0, depth)
    assert outcome(_Skim(buf).value_end, 0, depth) == expected
    assert outcome(_Skim(buf).skip_rest, 0, depth) == expected


# --------------------------------------------------------------------------------------------------------------------
# Linear time


# Files a reader finding each string from each quote takes quadratic time on: quotes that each open a string that
# does not end (escaped quotes, minutes at 100 kB), runs of backslashes, brackets inside a string that does not end,
# and containers at the limit one after another.
HOSTILE = {
    "escaped quotes": (b'{"a": ["', b'\\"', b"]}"),
    "backslashes": (b'{"a": ["', b"\\", b'"]}'),
    "brackets in a string that does not end": (b'{"a": ["', b"[]", b"]}"),
    "deep containers": (b'{"a": [', b"[" * (MAX_DEPTH - 2) + b'"\\\\"' + b"]" * (MAX_DEPTH - 2) + b",", b"[]]}"),
    "a string stopped by a backslash and a newline in every resource":
        (b'{"resources": [', b'{"type": "t", "name": "n", "inputs": ["\\\n"]},', b"{}]}"),
}


def _costs(paths: list) -> list[float]:
    """The least CPU time of reads of each file (conftest.least_cpu_seconds); a read past 20 s fails the test
    (quadratic, the escaped quotes took minutes at 200 kB)."""
    return least_cpu_seconds(paths, lambda path: outcome(read_previous_plan, path), seconds=20.0)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_file_ten_times_larger_costs_about_ten_times_more(tmp_path, name):
    head, unit, tail = HOSTILE[name]
    paths = []
    for size in (20_000, 200_000):
        path = tmp_path / f"{size}.json"
        path.write_bytes(head + unit * (size // len(unit)) + tail)
        paths.append(path)
    short, long = _costs(paths)
    # Linear is ten times; quadratic a hundred. Twenty leaves room for a busy machine.
    assert long <= 20 * short + 0.002, f"{name}: {short:.4f} s, {long:.4f} s ({long / short:.1f}x)"


# --------------------------------------------------------------------------------------------------------------------
# Keys and strings without escapes


def test_keys_and_names_are_read_with_and_without_escapes(tmp_path):
    path = tmp_path / "old.json"
    path.write_text('{"st\\u0061ck": "dev-aws", "resources": [{"ty\\u0070e": "aws:eks/nodeGroup:NodeGroup", "name": "in\\"fer", '
                    '"inputs": {"diskSize": 200}}, {"type": "kubernetes:core/v1:Namespace", "n\\u0061me": "ml", "inputs": {"x": 1}}]}')
    assert read_previous_plan(path) == {"stack": "dev-aws", "resources": [
        {"type": "aws:eks/nodeGroup:NodeGroup", "name": 'in"fer', "inputs": {"diskSize": 200}},
        {"type": "kubernetes:core/v1:Namespace", "name": "ml", "inputs": {}}]}


def test_an_escaped_spelling_of_a_key_is_the_same_key(tmp_path):
    path = tmp_path / "old.json"
    path.write_text('{"stack": "dev-aws", "st\\u0061ck": "dev-aws", "resources": []}')
    with pytest.raises(ReadError, match="^duplicate key 'stack'"):
        read_previous_plan(path)


def test_a_key_or_string_that_is_not_utf8_is_refused_at_its_byte(tmp_path):
    path = tmp_path / "old.json"
    for text, at in ((b'{"st\xffack": 1}', 4), (b'{"stack": "dev\xff"}', 14)):
        path.write_bytes(text)
        with pytest.raises(ReadError) as error:
            read_previous_plan(path)
        assert str(error.value) == f"not valid JSON at line 1, byte {at}: byte 0xff is not UTF-8; save the file as UTF-8"


def test_a_plain_string_is_its_text_and_an_escaped_one_is_parsed():
    values = [b'"plain \xc3\xa9"', b'"a\\u00e9\\n"', b'"\\\\"', b'{"a": 1}', b'"\\"x"']
    buf = b" ".join(values)
    skim, start = _Skim(buf), 0
    decoded = []
    for value in values[:4]:
        decoded.append(skim.decode(start, start + len(value)))
        start += len(value) + 1
    assert decoded == ["plain \u00e9", "a\u00e9\n", "\\", {"a": 1}] == [json.loads(v) for v in values[:4]]
