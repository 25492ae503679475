"""`plan --against FILE`: a previous `plan --json`, read as far as the replacement check needs it.

Every plan `plan --json` writes for a stack gpupools accepts must read back, and such a plan is large: it grows with
the pools, with the teams, and with every team's landing verdicts on every pool, whose reasons name the other pools
(see `MAX_PLAN_BYTES`). The file is therefore not parsed whole: it is mapped and skimmed, and only `stack` and the
`type`, `name` and `inputs` of each resource are decoded, the inputs only of the pool resources the replacement
check compares (`REPLACING`). Memory stays at the size of those resources whatever the file holds; time is linear in
its size. Decoded parts go through `load_json`, with the stack-file limits on depth and numbers; the skimmed parts
are held to the nesting limit and to JSON's strings and brackets.
"""

from __future__ import annotations

import functools
import mmap
import re
from pathlib import Path
from typing import Any

from gpupools.cli.replacement import REPLACING, ROLLING
from gpupools.stack.config import MAX_POOLS, MAX_TEAMS
from gpupools.stack.errors import describe, kind
from gpupools.stack.reading import MAX_DEPTH, ReadError, load_json

# How large `plan --json` gets, per what a stack file may hold (the limits in gpupools.stack.config), measured on the
# costliest plans gpupools makes and rounded up by half: EKS Capacity Block pools as node groups (under
# cluster-autoscaler; Karpenter's are smaller) with names of 63 characters and 64 labels whose keys and values are as
# long as Kubernetes allows, and teams of 63-character names that may use every pool. tests/cli/test_against_size.py
# measures again and fails when a plan outgrows these. A team adds its namespace, queues and policies, and three
# landing verdicts per pool (a unit, a node, a gang); a verdict that does not land says why on every other flavor, so
# what one team adds grows with the square of the pools.
PLAN_BYTES_BASE = 220_000
PLAN_BYTES_PER_POOL = 200_000
PLAN_BYTES_PER_TEAM = 36_000
PLAN_BYTES_PER_TEAM_POOL = 7_300
PLAN_BYTES_PER_TEAM_POOL_PAIR = 2_150


def plan_bytes_bound(pools: int, teams: int) -> int:
    """The most bytes `plan --json` writes for a stack of `pools` pools and `teams` teams."""
    per_team = PLAN_BYTES_PER_TEAM + PLAN_BYTES_PER_TEAM_POOL * pools + PLAN_BYTES_PER_TEAM_POOL_PAIR * pools * pools
    return PLAN_BYTES_BASE + PLAN_BYTES_PER_POOL * pools + teams * per_team


# At the stack limits (100 pools, 1,000 teams) about 22 GB; the file is mapped, not read into memory.
MAX_PLAN_BYTES = plan_bytes_bound(MAX_POOLS, MAX_TEAMS)
# A decoded value larger than this is described instead (a type or name of a resource is a few dozen bytes).
_SMALL = 64 * 1024

_SPACE = re.compile(rb"[ \t\r\n]*")
# Strings as runs of plain characters between escapes ("unrolled"): the same strings as `"(?:[^"\\]|\\.)*"`, but
# the regex engine takes a run in one step instead of one alternation per character, four times faster on the
# megabytes of landing reasons a large plan holds.
_STRING = re.compile(rb'"[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*"')
_SCALAR = re.compile(rb"-?[0-9][0-9eE.+-]*|true|false|null")

# Skipping a container is the bulk of the work: a plan's landing verdicts and the inputs of resources the check
# does not read are megabytes of small strings and objects. It is done by regex, not token by token in Python: a
# container's body is runs of what lies between strings and brackets, strings in one step each, and the containers it
# holds, matched by the same pattern one level shallower, down to the nesting limit. Every repeat is possessive (`*+`),
# so the engine never tries another way to split what it took: a match succeeds or stops in one pass, linear in what
# it read, however the strings, backslashes and brackets are laid out. Any closing bracket closes any opening one.
_PLAIN = rb'[^"\[\]{}]++'
# A string that ends. Unlike `_STRING`, control characters pass (what is skipped is held only to JSON's strings and
# brackets); `.` is not a newline, so a backslash before a newline ends no string, as it ended none before.
_ENDED_STRING = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'


@functools.cache
def _body(inner: int) -> re.Pattern[bytes]:
    """What lies inside a container up to its first string that does not end, container that is not closed or
    nests more than `inner` levels deep, or closing bracket."""
    body = rb"(?:" + _PLAIN + rb"|" + _ENDED_STRING + rb")*+"
    for _ in range(inner):
        body = rb"(?:" + _PLAIN + rb"|" + _ENDED_STRING + rb"|[\[{]" + body + rb"[\]}])*+"
    return re.compile(body)


@functools.cache
def _container(inner: int) -> re.Pattern[bytes]:
    """A whole container whose strings end and whose containers nest at most `inner` levels deep, in one match:
    every container of a plan `plan --json` wrote."""
    return re.compile(rb"[\[{]" + _body(inner).pattern + rb"[\]}]")


# The rest, in `_Skim.skip_rest`: a bracket or quote where the body stopped.
_TOKEN = re.compile(rb'["\[\]{}]')
_BRACKET = re.compile(rb"[\[\]{}]")
# A string from its opening quote up to where it stops without a closing one: a backslash before a newline, or the
# end of the file. Possessive, so such a string is read once, not once per backslash in it.
_UNENDED_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+')


class _Skim:
    def __init__(self, buf: Any):
        self.buf = buf

    def error(self, pos: int, what: str) -> ReadError:
        line = self.buf[:pos].count(b"\n") + 1 if pos < 50_000_000 else None
        where = f"line {line}, byte {pos}" if line is not None else f"byte {pos}"
        return ReadError(f"not valid JSON at {where}: {what}")

    def space(self, pos: int) -> int:
        return _SPACE.match(self.buf, pos).end()

    def expect(self, pos: int, char: bytes) -> int:
        pos = self.space(pos)
        if self.buf[pos:pos + 1] != char:
            raise self.error(pos, f"expected {char.decode()!r}")
        return pos + 1

    def value_end(self, pos: int, depth: int) -> int:
        """Where the value at `pos` ends, without decoding it."""
        pos = self.space(pos)
        head = self.buf[pos:pos + 1]
        if head == b'"':
            match = _STRING.match(self.buf, pos)
            if match is None:
                raise self.error(pos, "a string that does not end")
            return match.end()
        if head in (b"[", b"{"):
            if depth + 1 > MAX_DEPTH:
                raise ReadError(f"nested more than {MAX_DEPTH} levels deep; gpupools allows {MAX_DEPTH}")
            match = _container(MAX_DEPTH - depth - 1).match(self.buf, pos)
            return match.end() if match is not None else self.skip_rest(pos, depth)
        match = _SCALAR.match(self.buf, pos)
        if match is None:
            raise self.error(pos, "expected a value")
        return match.end()

    def skip_rest(self, start: int, depth: int) -> int:
        """Where the container at `start` ends when it is not one `_container` match: it holds a string that does not
        end, or it nests too deep, or it does not end. Its brackets outside strings count, one at a time where the
        body match stops, and the nesting limit holds. A string that does not end counts as where it stops; the
        brackets in it count, as do those of every quote it escapes: each of those strings stops at the same place.
        (No `finditer`: an iterator left in a frame the error passes through keeps the map exported, so it cannot
        close.)"""
        buf, level, pos = self.buf, depth + 1, start + 1
        unended = 0  # where the string that does not end, whose brackets are being counted, stops
        while True:
            if pos < unended:
                token = _BRACKET.search(buf, pos, unended)
                if token is None:
                    pos = unended
                    continue
            else:
                # Every container that closes within the limit and every string that ends, at once; then what
                # stopped the match: a closing bracket, an opening one, a quote, or the end of the file.
                pos = _body(MAX_DEPTH - level).match(buf, pos).end()
                token = _TOKEN.match(buf, pos)
                if token is None:
                    raise self.error(start, "a list or object that does not end")
                if buf[pos] == 0x22:  # a quote: the string it opens does not end (the body took those that do)
                    pos, unended = pos + 1, _UNENDED_STRING.match(buf, pos).end()
                    continue
            pos = token.end()
            if buf[token.start()] in b"[{":
                level += 1
                if level > MAX_DEPTH:
                    raise ReadError(f"nested more than {MAX_DEPTH} levels deep; gpupools allows {MAX_DEPTH}")
            else:
                level -= 1
                if level == depth:
                    return pos

    def members(self, pos: int, depth: int):
        """(key, value start, value end) of the object at `pos`; then the position after it, as the last item."""
        pos = self.expect(pos, b"{")
        pos = self.space(pos)
        if self.buf[pos:pos + 1] == b"}":
            yield pos + 1
            return
        while True:
            key_end = self.value_end(pos, depth + 1)
            if self.buf[pos:pos + 1] != b'"':
                raise self.error(pos, "expected a key")
            key = self.decode(pos, key_end)
            start = self.space(self.expect(key_end, b":"))
            end = self.value_end(start, depth + 1)
            yield key, start, end
            pos = self.space(end)
            if self.buf[pos:pos + 1] == b"}":
                yield pos + 1
                return
            pos = self.space(self.expect(pos, b","))

    def items(self, pos: int, depth: int):
        """(start, end) of each item of the list at `pos`; then the position after it."""
        pos = self.space(self.expect(pos, b"["))
        if self.buf[pos:pos + 1] == b"]":
            yield pos + 1
            return
        while True:
            end = self.value_end(pos, depth + 1)
            yield pos, end
            pos = self.space(end)
            if self.buf[pos:pos + 1] == b"]":
                yield pos + 1
                return
            pos = self.space(self.expect(pos, b","))

    def text(self, start: int, end: int) -> str:
        try:
            return bytes(self.buf[start:end]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(start + exc.start, f"byte 0x{self.buf[start + exc.start]:02x} is not UTF-8; save the file as UTF-8") from None

    def decode(self, start: int, end: int) -> Any:
        """The value from `start` to `end`. A string without escapes is the text between its quotes: `value_end`
        matched it with `_STRING`, which holds it to what JSON allows, so the parser would return that text; every
        key of the file is one, and parsing each was most of the time spent outside skipping."""
        if self.buf[start:start + 1] == b'"' and self.buf.find(b"\\", start, end) < 0:
            return self.text(start, end)[1:-1]
        return load_json(self.text(start, end))

    def small(self, start: int, end: int) -> Any:
        """A value decoded, or, when it is large, a stand-in of the same type that describes it."""
        if end - start <= _SMALL:
            return self.decode(start, end)
        head = self.buf[start:start + 1]
        return {} if head == b"{" else [] if head == b"[" else f"<{kind('x' * (end - start))}>"


_EXPECTED = {str: "a string", list: "a list", dict: "an object"}


def _typed(skim: _Skim, start: int, end: int, expected: type, where: str) -> Any:
    """The value at `start` when it is of the type the replacement check reads it as; a ReadError naming the field
    otherwise. Every field taken from the file goes through here before anything uses it: a list where a string
    belongs is unhashable, and looking a resource type up with it ended the plan in a traceback."""
    value = skim.small(start, end)
    if not isinstance(value, expected):
        got = describe(value, as_json=True) if end - start <= _SMALL else f"a value of {end - start:,} bytes"
        raise ReadError(f"{where}: expected {_EXPECTED[expected]}, got {got}")
    return value


def _resource(skim: _Skim, start: int, end: int, depth: int, index: int) -> dict[str, Any]:
    where = f"resources[{index}]"
    if skim.buf[start:start + 1] != b"{":
        got = describe(skim.small(start, end)) if end - start <= _SMALL else f"a value of {end - start:,} bytes"
        raise ReadError(f"{where}: expected a resource object, got {got}")
    fields: dict[str, tuple[int, int]] = {}
    members = skim.members(start, depth)
    for member in members:
        if isinstance(member, int):
            break
        key, a, b = member
        if key in fields:
            raise ReadError(f"duplicate key {key!r}; a key may appear once per object")
        if key in ("type", "name", "inputs"):
            fields[key] = (a, b)
    out: dict[str, Any] = {}
    for key in ("type", "name"):
        if key not in fields:
            raise ReadError(f"{where}.{key}: expected a string, got nothing (no {key!r} key)")
        out[key] = _typed(skim, *fields[key], str, f"{where}.{key}")
    if "inputs" in fields:
        a, b = fields["inputs"]
        if skim.buf[a:a + 4] == b"null":  # a resource without inputs
            return out
        if skim.buf[a:a + 1] != b"{":
            _typed(skim, a, b, dict, f"{where}.inputs")
        # A pool's inputs are compared field by field (`replacement._at` walks them checking each step's type);
        # the rest are never read.
        out["inputs"] = load_json(skim.text(a, b)) if out["type"] in REPLACING or out["type"] in ROLLING else {}
    return out


def read_previous_plan(path: str | Path) -> dict[str, Any]:
    """The parts of a previous `plan --json` the replacement check reads: `stack` and each resource's `type`,
    `name` and (for pool resources) `inputs`; ReadError or OSError otherwise."""
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        if size > MAX_PLAN_BYTES:
            raise ReadError(f"larger than {MAX_PLAN_BYTES:,} bytes, the most `plan --json` writes for a stack of {MAX_POOLS} pools and "
                            f"{MAX_TEAMS:,} teams")
        if size == 0:
            raise ReadError("not valid JSON at line 1, column 1: Expecting value")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            skim = _Skim(buf)
            start = skim.space(3 if buf[:3] == b"\xef\xbb\xbf" else 0)
            if buf[start:start + 1] != b"{":
                skim.value_end(start, 0)  # the nesting limit first, as for every file gpupools reads
                raise ReadError("expected the JSON of `gpupools plan --json` (an object with a resources list)")
            doc: dict[str, Any] = {}
            end = start
            for member in skim.members(start, 0):
                if isinstance(member, int):
                    end = member
                    break
                key, a, b = member
                if key in doc:
                    raise ReadError(f"duplicate key {key!r}; a key may appear once per object")
                if key == "stack":
                    doc["stack"] = _typed(skim, a, b, str, "stack")
                elif key == "resources":
                    if buf[a:a + 1] != b"[":
                        _typed(skim, a, b, list, "resources")
                    resources = []
                    for item in skim.items(a, 1):
                        if isinstance(item, int):
                            break
                        resources.append(_resource(skim, item[0], item[1], 2, len(resources)))
                    doc["resources"] = resources
                elif key == "nodeSettings":  # each pool's node settings, which `plan --against` compares (cli.nodechanges)
                    doc["nodeSettings"] = _typed(skim, a, b, dict, "nodeSettings")
                else:
                    doc[key] = None  # read past, not kept
            if skim.space(end) != len(buf):
                raise skim.error(skim.space(end), "extra data after the plan")
    return doc
