"""User-facing errors: every mistake becomes one line naming the field, so the CLI can exit 2."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


# Characters str.splitlines() breaks at (and other C0 controls): escaped, so every problem stays one line
# whatever a user's value holds.
_ONE_LINE = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in (*range(0x00, 0x09), *range(0x0a, 0x20), 0x7f, 0x85, 0x2028, 0x2029)}


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        text = f"error: {self.path}: {self.message}" if self.path else f"error: {self.message}"
        return text.translate(_ONE_LINE)


class ConfigError(Exception):
    """All problems found in one stack file, reported together rather than one per run."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def field_path(loc: tuple | list) -> str:
    """Spell a location the way users read it: ``pools[1].sharing.migProfile``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def describe(value: Any, limit: int = 60, as_json: bool = False) -> str:
    """A value as a message quotes it, at most `limit` characters: as JSON, but a string alone as Python's repr
    unless `as_json` (messages about JSON files quote JSON).

    Shortened while it is written, never after: a value from a hostile file may be huge, shared many times
    over (YAML aliases) or of a type JSON cannot spell, and the message must cost the same either way.
    """
    out: list[str] = []
    _write(value, out, [limit + 1], top=not as_json)
    text = "".join(out)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _write(value: Any, out: list[str], budget: list[int], top: bool = False) -> None:
    def put(text: str) -> None:
        out.append(text[:max(budget[0], 0)])
        budget[0] -= len(text)

    if budget[0] <= 0:
        return
    if isinstance(value, str):
        head = value[:budget[0] + 2]
        put(repr(head) if top else json.dumps(head))
    elif value is None or isinstance(value, (bool, float)):
        put(json.dumps(value))
    elif isinstance(value, int):
        try:
            put(str(value))
        except ValueError:  # more digits than Python converts
            put(f"<an integer of about {value.bit_length() * 30103 // 100000} digits>")
    elif isinstance(value, (list, tuple, dict)):
        mapping = isinstance(value, dict)
        put("{" if mapping else "[")
        for i, entry in enumerate(value.items() if mapping else value):
            if budget[0] <= 0:
                return
            if i:
                put(", ")
            if mapping:
                key, entry = entry
                _write(key if isinstance(key, str) else describe(key, budget[0] + 2), out, budget)
                put(": ")
            _write(entry, out, budget)
        put("}" if mapping else "]")
    else:
        put(f"<{type(value).__name__}>")
