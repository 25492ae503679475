"""User-facing errors: every mistake becomes one line naming the field, so the CLI can exit 2."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"error: {self.path}: {self.message}" if self.path else f"error: {self.message}"


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
