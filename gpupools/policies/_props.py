"""Reading resource properties the way every policy in the pack must: unknowns skip a check, never fail it.

During `pulumi preview`, inputs computed from other resources (IDs, ARNs, a new password) are unknown.
pulumi_policy wraps properties in a proxy that raises `UnknownValueError` on access to such a value; left
alone, that aborts the whole policy for the resource with an advisory "can't run during preview"
diagnostic. `get` turns an unknown into the `UNKNOWN` sentinel instead, so a policy skips just the one
judgement that needs it and still checks everything that is known. A missing property is not unknown:
it is `None`, and means the setting is absent (which some policies treat as a violation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import proxy as _proxy
from pulumi_policy.proxy import UnknownValueError

# The engine's placeholders for values computed later; a proxied property raises instead of returning one.
_SENTINELS = frozenset(getattr(_proxy, n) for n in dir(_proxy) if n.startswith("UNKNOWN_") and n.endswith("_VALUE"))


def _is_unknown(value: Any) -> bool:
    return isinstance(value, str) and value in _SENTINELS


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()

# What `gpupools plan` records in place of a secret value; pulumi_policy's own marker is `Secret`.
SECRET_MARKER = "[secret]"


def get(props: Any, *path: str | int, default: Any = None) -> Any:
    """Follow `path` through dicts and lists; `UNKNOWN` if any step is unknown, `default` if absent."""
    current = props
    for step in path:
        try:
            if isinstance(step, int):
                if not isinstance(current, Sequence) or isinstance(current, str) or step >= len(current):
                    return default
                current = current[step]
            else:
                if not isinstance(current, Mapping) or step not in current:
                    return default
                current = current[step]
        except UnknownValueError:
            return UNKNOWN
        if _is_unknown(current):
            return UNKNOWN
    return current


def is_unknown(value: Any) -> bool:
    return value is UNKNOWN or _is_unknown(value)


def items(value: Any) -> list[Any]:
    """The elements of a list property, unknown elements as `UNKNOWN`; nothing for a missing or unknown list."""
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [get(value, i) for i in range(len(value))]


def entries(value: Any) -> list[tuple[str, Any]]:
    """The (key, value) pairs of a map property, unknown values as `UNKNOWN`."""
    if not isinstance(value, Mapping):
        return []
    return [(key, get(value, key)) for key in list(value)]


def plain(value: Any) -> Any:
    """A property tree as plain dicts and lists (unknowns as `UNKNOWN`), for code that walks it freely."""
    if is_unknown(value):
        return UNKNOWN
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in entries(value)}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [plain(v) for v in items(value)]
    return value


def as_int(value: Any) -> int | None:
    """Counts arrive as int, float (protobuf numbers) or, from some providers, digit strings."""
    if isinstance(value, bool) or is_unknown(value) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def text(value: Any) -> str | None:
    """A string property, or None when absent, unknown or not a string."""
    return value if isinstance(value, str) and not is_unknown(value) else None
