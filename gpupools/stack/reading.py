"""The one reader for files a user or a pull request hands to gpupools: stack files, policy config, API answers.

Whatever the bytes are, reading ends either with plain data (dicts, lists, strings, finite numbers, booleans,
None) or with `ReadError` saying what is wrong and where, in bounded time and memory. The limits are far above
what a real stack file needs (the example stacks are about 40 lines, five levels deep, with no aliases) and far
below what would stall a CI runner:

- size: `MAX_BYTES`, checked before parsing;
- nesting: `MAX_DEPTH` levels of mappings and lists, checked while composing, so no parser recursion runs deep;
- aliases: the document with every alias expanded may hold at most `MAX_NODES` values, so a "billion laughs"
  document is refused after a few thousand steps instead of being expanded (PyYAML shares aliased values,
  but everything that walks the data afterwards, validation and error messages, pays for each expansion);
- numbers: integers of at most `MAX_INT_DIGITS` digits and finite floats only (NaN and infinity would turn a
  cap such as `maxMonthlyUsd` off, since every comparison with NaN is false);
- keys: a key may appear once per mapping; the Pulumi CLI refuses a stack file with a duplicate key, and a
  reviewer reads the first value while PyYAML would keep the last;
- values: only the YAML types a Pulumi stack file carries (null, bool, int, float, string, list, mapping);
  dates stay strings and other tags (`!!binary`, `!!set`, `!!python/...`) are refused;
- one reading: the Pulumi CLI reads stack files as YAML 1.2 (core schema), PyYAML as YAML 1.1. An unquoted value the
  two read differently (`no` and `on` are booleans in 1.1 and strings in 1.2, `1:30` is 90 in 1.1, `012` is 10 in
  1.1 and 12 in 1.2, `0o12` and `1e3` are numbers in 1.2 only) is read as a `Disputed` value, which the stack check
  refuses naming the field and the spelling that field takes (`fabric: on` -> `"on"`, `create: no` -> `false`), so
  `gpupools check` never judges a different value than `pulumi up` deploys. As a key it is refused where it stands.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver
from yaml.events import AliasEvent, ScalarEvent
from yaml.nodes import MappingNode, ScalarNode

from gpupools.stack.errors import kind, name_like

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 32
MAX_NODES = 20_000
MAX_INT_DIGITS = 20  # every 64-bit integer fits


@dataclass(frozen=True)
class Disputed:
    """An unquoted scalar that YAML 1.1 (PyYAML, many editors and linters) and YAML 1.2 (the Pulumi CLI) read
    differently. The reader keeps it instead of refusing it, so the stack check can name the field and say which
    spelling that field takes; nothing may use it as a value."""

    text: str
    pulumi_reads: Any  # the YAML 1.2 core-schema value, what `pulumi up` deploys
    yaml11_reads: Any
    why: str  # "'on' is a boolean in YAML 1.1 but the string "on" in YAML 1.2, which Pulumi reads"
    advice: str  # how to write it whatever the field, when the field's own spelling cannot be told
    line: int

    def spelled(self, value: Any) -> str:
        """How to write `value` so that both YAML versions read it the same."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if value is None:
            return "null"
        if isinstance(value, str):
            return json.dumps(value)
        return repr(value)


DISPUTED_TAG = "tag:gpupools.io,2026:disputed"


class ReadError(Exception):
    """What is wrong with a document and where, as one line without the file name (the caller adds it)."""


def read_bytes(path: str | Path, max_bytes: int = MAX_BYTES) -> bytes:
    """A file's bytes, refusing anything larger than `max_bytes` without reading it all; OSError passes through."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ReadError(f"larger than {_size(max_bytes)}; gpupools reads files of at most {_size(max_bytes)}")
    return data


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n % (1024 * 1024) == 0 else f"{n:,} bytes"


def decode(data: bytes) -> str:
    """UTF-8 text (a leading byte-order mark dropped), or where the first byte that is not UTF-8 sits."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ReadError(f"not UTF-8: byte 0x{data[exc.start]:02x} at byte position {exc.start} (line {line}, column {column}); "
                        f"save the file as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def _where(mark: Any) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


# --------------------------------------------------------------------------------------------------------------------
# YAML

_SAFE_TAGS = ("null", "bool", "int", "float", "str", "seq", "map")


class _Refused(yaml.YAMLError):
    def __init__(self, message: str, mark: Any):
        super().__init__(message)
        self.message, self.mark = message, mark


try:
    # libyaml's scanner and parser, which PyYAML's wheels carry: PyYAML's own, in Python, take 2 to 7 seconds to
    # read a value of a megabyte (up to 7 µs a character, in quoted text with spaces); libyaml takes milliseconds.
    # Composing and constructing, where every limit above is kept, stay in Python either way.
    from yaml._yaml import CParser as _Parser
except ImportError:  # a PyYAML built without libyaml: the same reading, only slower
    class _Parser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):  # type: ignore[no-redef]
        def __init__(self, stream: str):
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)


class _Loader(Composer, _Parser, SafeConstructor, Resolver):
    """yaml.SafeLoader's parts with the limits above; one instance reads one document. Composer comes first, so its
    composing (with the limits) is used rather than libyaml's own."""

    yaml_constructors = {f"tag:yaml.org,2002:{t}": yaml.SafeLoader.yaml_constructors[f"tag:yaml.org,2002:{t}"] for t in _SAFE_TAGS}
    yaml_constructors[None] = yaml.SafeLoader.yaml_constructors[None]
    # Pulumi reads `2026-01-01` as a string; PyYAML's YAML 1.1 resolver would make it a date. It reads a lone `=` as
    # the string "=" too (go-yaml v3, resolve.go `resolve`: no resolver hint for '='), where YAML 1.1 has the "value
    # key" type, for which PyYAML has no constructor at all.
    yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in resolvers if tag not in ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value")]
                               for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def __init__(self, stream: str):
        _Parser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0
        self._nodes = 0
        self._weight: dict[int, int] = {}  # id(node) -> values in it with aliases expanded
        self._aliases = False

    def _spend(self, count: int, mark: Any) -> None:
        self._nodes += count
        if self._nodes > MAX_NODES:
            expanded = " once its aliases are expanded" if self._aliases else ""
            raise _Refused(f"more than {MAX_NODES:,} values{expanded}; gpupools reads at most {MAX_NODES:,}", mark)

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(AliasEvent):
            mark = self.peek_event().start_mark
            node = super().compose_node(parent, index)
            weight = self._weight.get(id(node))
            if weight is None:
                raise _Refused("an alias refers to a value that contains it", mark)
            self._aliases = True
            self._spend(weight, mark)
            return node
        mark = self.peek_event().start_mark
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(f"nested more than {MAX_DEPTH} levels deep; gpupools allows {MAX_DEPTH}", mark)
        before = self._nodes
        node = super().compose_node(parent, index)
        self._depth -= 1
        self._spend(1, mark)
        self._weight[id(node)] = self._nodes - before
        return node

    def compose_scalar_node(self, anchor: Any) -> ScalarNode:
        event = self.peek_event()
        if isinstance(event, ScalarEvent) and event.tag is None and event.implicit[0] and not event.style:  # plain: None, or "" from libyaml
            yaml11_tag = self.resolve(ScalarNode, event.value, (True, False))
            if yaml_versions_disagree(event.value, yaml11_tag):
                node = super().compose_scalar_node(anchor)
                node.tag, node.yaml11_tag = DISPUTED_TAG, yaml11_tag
                return node
        return super().compose_scalar_node(anchor)

    def construct_disputed(self, node: ScalarNode) -> Disputed:
        why, advice = yaml_versions_disagree(node.value, node.yaml11_tag)
        yaml11 = self.yaml_constructors[node.yaml11_tag](self, ScalarNode(node.yaml11_tag, node.value, node.start_mark, node.end_mark))
        return Disputed(node.value, _core_value(node.value), yaml11, why, advice, node.start_mark.line + 1)

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        # A tag written out on a value it cannot hold (`!!int 1.5`, `!!bool maybe`, `!!float` on nothing) makes
        # PyYAML's own constructors raise ValueError, KeyError or IndexError rather than a YAMLError.
        try:
            return super().construct_object(node, deep)
        except (ValueError, KeyError, IndexError, TypeError):
            what = (_short(node.value) if node.value else "an empty value") if isinstance(node, ScalarNode) else "the value"
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")  # one of _SAFE_TAGS: no other tag has a constructor
            raise _Refused(f"{what} cannot be read as {tag}, the tag written on it; drop the tag or fix the value", node.start_mark) from None

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        if not isinstance(node, MappingNode):  # `!!map [1]`: the parent refuses it, saying what it found
            return super().construct_mapping(node, deep)
        for key, _ in node.value:
            if isinstance(key, ScalarNode) and key.tag == DISPUTED_TAG:
                why, advice = yaml_versions_disagree(key.value, key.yaml11_tag)
                raise _Refused(f"key {why}; {advice}", key.start_mark)
        return super().construct_mapping(node, deep)

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        node = super().compose_mapping_node(anchor)
        seen: dict[tuple[str, str], Any] = {}
        for key, _ in node.value:
            if isinstance(key, ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                first = seen.setdefault((key.tag, key.value), key.start_mark)
                if first is not key.start_mark:
                    raise _Refused(f"duplicate key {_short(key.value)} (first at line {first.line + 1}); "
                                   f"a key may appear once per mapping", key.start_mark)
        return node

    def construct_yaml_int(self, node: ScalarNode) -> int:
        digits = sum(c.isalnum() for c in str(node.value))  # hex and octal digits too
        if digits > MAX_INT_DIGITS + 2:
            raise _Refused(f"an integer of {digits} digits; gpupools reads integers of at most {MAX_INT_DIGITS} digits", node.start_mark)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: ScalarNode) -> float:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise _Refused(f"{_short(node.value)} is not a finite number", node.start_mark)
        return value


# YAML 1.2's core schema (yaml.org/spec/1.2.2, section 10.3.2), as the Pulumi CLI resolves plain scalars.
_CORE_NULL = re.compile(r"~|null|Null|NULL|")
_CORE_BOOL = re.compile(r"true|True|TRUE|false|False|FALSE")
_CORE_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_CORE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")
_YAML11_BOOL_WORDS = re.compile(r"y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF")


def _core_tag(value: str) -> str:
    for tag, pattern in (("null", _CORE_NULL), ("bool", _CORE_BOOL), ("int", _CORE_INT), ("float", _CORE_FLOAT)):
        if pattern.fullmatch(value):
            return f"tag:yaml.org,2002:{tag}"
    return "tag:yaml.org,2002:str"


def _core_value(value: str) -> Any:
    """A plain scalar as YAML 1.2's core schema reads it (the Pulumi CLI's reading)."""
    tag = _core_tag(value)
    if tag.endswith(":null"):
        return None
    if tag.endswith(":bool"):
        return value.lower() == "true"
    if tag.endswith(":int"):
        sign, digits = (-1 if value.startswith("-") else 1), value.lstrip("+-")
        base = 8 if digits.startswith("0o") else 16 if digits.startswith("0x") else 10
        return sign * int(digits if base == 10 else digits[2:], base)
    if tag.endswith(":float"):
        lowered = value.lower().lstrip("+")
        return float(lowered.replace(".inf", "inf").replace(".nan", "nan"))
    return value


def yaml_versions_disagree(value: str, yaml11_tag: str) -> tuple[str, str] | None:
    """Why an unquoted scalar means one thing to PyYAML (YAML 1.1) and another to YAML 1.2's core schema, and how to
    write it whatever it is for; None when they agree."""
    if yaml11_tag == "tag:yaml.org,2002:merge":
        return None
    core = _core_tag(value)
    quoted = f"\"{value}\""
    if _YAML11_BOOL_WORDS.fullmatch(value):
        meaning = "false" if value.lower() in ("n", "no", "off") else "true"
        return (f"{_short(value)} is a boolean in YAML 1.1 but the string {quoted} in YAML 1.2, which Pulumi reads",
                f"write {meaning} for the boolean or {quoted} for the string")
    if core == yaml11_tag:
        leading_zero = core == "tag:yaml.org,2002:int" and re.fullmatch(r"[-+]?0[0-9]+", value)
        if not leading_zero:
            return None
        if len(value) > MAX_INT_DIGITS + 1:  # Python refuses to convert 4,300 digits and more; the reader refuses 20 and more anyway
            return (f"{_short(value)} is an octal number in YAML 1.1 but a decimal one in YAML 1.2, which Pulumi reads",
                    "write it without the leading zero, or quote it as a string")
        return (f"{_short(value)} is the octal number {int(value, 8)} in YAML 1.1 but {int(value, 10)} in YAML 1.2, which Pulumi reads",
                "write it without the leading zero, or quote it as a string")
    names = {"tag:yaml.org,2002:int": "a number", "tag:yaml.org,2002:float": "a number", "tag:yaml.org,2002:bool": "a boolean",
             "tag:yaml.org,2002:null": "null", "tag:yaml.org,2002:str": "a string"}
    what = names.get(yaml11_tag, "a string")
    if yaml11_tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and len(value) <= 40:
        what = f"the number {yaml.safe_load(value)!r}"  # 1:30 is 90 (base 60), 1_000 is 1000
    return (f"{_short(value)} is {what} in YAML 1.1 but {names[core]} in YAML 1.2, which Pulumi reads",
            f"write a plain decimal number, or quote it as a string (\"{value}\")")


_Loader.add_constructor(DISPUTED_TAG, _Loader.construct_disputed)
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)


def _short(text: str, limit: int = 40) -> str:
    """A key or scalar as a message quotes it; one that does not read as a name (a credential used as a key) is
    described instead (`gpupools.stack.errors.name_like`)."""
    if not name_like(text):
        return f"<{kind(text)}>"
    return repr(text if len(text) <= limit else text[:limit - 3] + "...")


def _within(text: str, mark: Any) -> Any:
    """`mark`, or the end of the last line where it points past it: libyaml puts the end of a file without a final
    line break at the start of a line after it."""
    if mark is None or mark.line <= text.count("\n"):
        return mark
    return yaml.Mark(mark.name, len(text), text.count("\n"), len(text) - (text.rfind("\n") + 1), None, None)


def load_yaml(text: str) -> Any:
    """One YAML document as plain data, or ReadError."""
    loader = None
    try:
        loader = _Loader(text)
        return loader.get_single_data()
    except _Refused as exc:
        raise ReadError(exc.message + _where(exc.mark)) from None
    except yaml.MarkedYAMLError as exc:
        what = exc.problem or exc.context or "unreadable"
        mark = exc.problem_mark or exc.context_mark
        if isinstance(exc, ComposerError) and "expected a single document" in str(exc.context):
            what = "more than one YAML document (---); a stack file is one document"
        elif "maximum nesting depth" in what:  # libyaml's own limit (1,000 levels), met before ours when it scans ahead
            raise ReadError(f"nested more than {MAX_DEPTH} levels deep; gpupools allows {MAX_DEPTH}") from None
        raise ReadError(f"not valid YAML{_where(_within(text, mark))}: {what}") from None
    except yaml.reader.ReaderError as exc:
        # The first place of the character: the reader stops at the first one it refuses (libyaml counts bytes).
        position = text.find(chr(exc.character)) if isinstance(exc.character, int) and 0 <= exc.character <= 0x10FFFF else -1
        position = exc.position if position < 0 else position
        line = text.count("\n", 0, position) + 1
        raise ReadError(f"not valid YAML: character U+{exc.character:04X} at line {line} (character {position}) is not "
                        f"allowed in YAML") from None
    except UnicodeEncodeError as exc:  # a str that is not Unicode text (a lone surrogate), which libyaml cannot take
        line = text.count("\n", 0, exc.start) + 1
        raise ReadError(f"not valid YAML: character U+{ord(text[exc.start]):04X} at line {line} (character {exc.start}) is not "
                        f"allowed in YAML") from None
    except yaml.YAMLError as exc:
        raise ReadError(f"not valid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    except RecursionError:  # not reachable within MAX_DEPTH; kept so no input can end in a traceback
        raise ReadError(f"nested too deep; gpupools allows {MAX_DEPTH} levels") from None
    finally:
        if loader is not None:
            loader.dispose()


# --------------------------------------------------------------------------------------------------------------------
# JSON


def _json_constant(name: str) -> Any:
    raise ReadError(f"{name} is not a finite number")


def _json_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise ReadError(f"an integer of {digits} digits; gpupools reads integers of at most {MAX_INT_DIGITS} digits")
    return int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ReadError(f"{_short(text)} is not a finite number")
    return value


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ReadError(f"duplicate key {_short(key)}; a key may appear once per object")
        out[key] = value
    return out


def _depth(value: Any) -> int:
    """Levels of lists and objects, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        current, level = stack.pop()
        if isinstance(current, (dict, list)):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                stack.extend((v, level + 1) for v in (current.values() if isinstance(current, dict) else current))
    return deepest


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _bracket_depth(text: str) -> int:
    """How deep a JSON text's lists and objects nest, read from its brackets outside strings. The parser's own
    RecursionError depends on how deep the caller's stack already is, so it cannot be the limit."""
    deepest = level = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub('""', text)):
        level += 1 if bracket in "[{" else -1
        deepest = max(deepest, level)
    return deepest


def load_json(text: str) -> Any:
    """One JSON document as plain data, with the same limits as YAML, or ReadError."""
    if _bracket_depth(text) > MAX_DEPTH:
        raise ReadError(f"nested more than {MAX_DEPTH} levels deep; gpupools allows {MAX_DEPTH}")
    try:
        doc = json.loads(text, parse_constant=_json_constant, parse_int=_json_int, parse_float=_json_float, object_pairs_hook=_json_object)
    except json.JSONDecodeError as exc:
        raise ReadError(f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ReadError(f"nested more than {MAX_DEPTH} levels deep; gpupools allows {MAX_DEPTH}") from None
    if _depth(doc) > MAX_DEPTH:
        raise ReadError(f"nested more than {MAX_DEPTH} levels deep; gpupools allows {MAX_DEPTH}")
    return doc


def load_answer_json(text: str) -> Any:
    """An HTTP API's answer (Prometheus'), which the caller checks field by field: the same errors as `load_json`
    for what is not JSON, too deep, or not a finite number, at the C parser's speed. A large answer has millions
    of numbers, and Python hooks per number and object made parsing most of a report's time."""
    try:
        return json.loads(text, parse_constant=_json_constant)
    except json.JSONDecodeError as exc:
        raise ReadError(f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ReadError(f"nested more than {MAX_DEPTH} levels deep; gpupools allows {MAX_DEPTH}") from None
    except ValueError as exc:  # an integer beyond Python's digit limit
        raise ReadError(f"a number gpupools cannot read: {_short(str(exc))}") from None


def read_document(path: str | Path, parse: Any = load_yaml) -> Any:
    """Read, decode and parse one file with every limit above; ReadError or OSError otherwise."""
    return parse(decode(read_bytes(path)))
