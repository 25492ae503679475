"""A pool's `node:` settings: fields of the cloud's own node API, passed through to the pool's resource.

Each cloud ships the part of its node API a pool may set as a small JSON model in its package (`node_api.json`,
derived from the Pulumi SDK the resource is created with by tools/node_api_models.py, which names its source), a
table of the fields gpupools owns (each with where to set it instead), and the fields a change of which replaces the
pool or its nodes. This module checks a `node:` mapping against such a model and merges it under gpupools' own
inputs. The model is read only when a stack sets `node:`, so a stack that does not pays nothing for it.

A model node is a mapping: `{"type": "string" | "integer" | "number" | "boolean"}` (with `"enum": [...]` where the
API lists the values), `{"type": "array", "items": node}`, `{"type": "map", "values": node}` (keys are data) or
`{"type": "object", "fields": {name: node}}`.
"""

from __future__ import annotations

import copy
import difflib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from gpupools.stack.errors import Problem, kind, name_like

Path_ = tuple[str, ...]


@dataclass(frozen=True)
class NodeApi:
    """One cloud's node API as a pool's `node:` may set it."""

    service: str  # "AKS", in messages
    resource: str  # "AgentPool", in messages
    model_file: Path
    # Fields gpupools sets itself: a path (a prefix covers everything under it) and where to set it instead.
    owned: Mapping[Path_, str]
    # Fields a change of which replaces the pool or its nodes, with what happens, in the plan's words.
    replaces: Mapping[Path_, str] = field(default_factory=dict)
    # Fields gpupools sets that a `node:` value replaces (defaults, not what makes the pool work).
    defaults: frozenset[Path_] = frozenset()

    @property
    def model(self) -> dict:
        return load_model(self.model_file)


@lru_cache(maxsize=None)
def load_model(path: Path) -> dict:
    return json.loads(path.read_text())["model"]


def _spell(path: str, key: str, known: bool = False) -> str:
    # A key that is not a field of the model and does not look like a name may be a credential pasted in the wrong
    # place: described, not spelled.
    return f"{path}.{key}" if known or name_like(key) else f"{path}.<{kind(key)}>"


def _closest(key: str, names: list[str]) -> str:
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.6) if name_like(key) else []
    if not close:
        lowered = {n.lower(): n for n in names}
        close = [lowered[key.lower()]] if name_like(key) and key.lower() in lowered else []
    return f"closest: {', '.join(close)}" if close else f"fields: {', '.join(sorted(names)[:12])}{', ...' if len(names) > 12 else ''}"


_TYPE_WORDS = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false", "array": "a list", "int-or-string": "a number or a string",
               "map": "a mapping", "object": "a mapping"}


def _type_ok(kind_: str, value: Any) -> bool:
    if kind_ == "string":
        return isinstance(value, str)
    if kind_ == "boolean":
        return isinstance(value, bool)
    if kind_ == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind_ == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind_ == "array":
        return isinstance(value, list)
    if kind_ == "int-or-string":
        return isinstance(value, str) or isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, dict)


def _owner(api: NodeApi, steps: Path_) -> str | None:
    for cut in range(len(steps), 0, -1):
        if steps[:cut] in api.owned:
            return api.owned[steps[:cut]]
    return None


def node_problems(api: NodeApi, node: Any, path: str) -> list[Problem]:
    """Each mistake in a `node:` mapping as one line: an unknown field with the closest names, a field gpupools owns
    with where to set it, a wrong type or a value outside the API's enum with what is allowed. No value is quoted."""
    if node is None:
        return []
    if not isinstance(node, dict):
        return [Problem(path, f"expected a mapping of {api.service} {api.resource} fields, got {kind(node)}")]
    return _walk(api, api.model, node, path, ())


def _walk(api: NodeApi, schema: dict, value: Any, path: str, steps: Path_) -> list[Problem]:
    kind_ = schema["type"]
    if not _type_ok(kind_, value):
        allowed = f"one of {', '.join(schema['enum'])}" if "enum" in schema else _TYPE_WORDS[kind_]
        return [Problem(path, f"expected {allowed}, got {kind(value)}")]
    if "enum" in schema and value not in schema["enum"]:
        return [Problem(path, f"not a value {api.service} takes here; allowed: {', '.join(schema['enum'])}")]
    if kind_ == "array":
        return [p for i, item in enumerate(value) for p in _walk(api, schema["items"], item, f"{path}[{i}]", steps)]
    if kind_ == "map":
        out = []
        for key, item in value.items():
            if not isinstance(key, str):
                out.append(Problem(path, f"keys are strings, got {kind(key)}"))
                continue
            out += _walk(api, schema["values"], item, _spell(path, key), steps)
        return out
    if kind_ != "object":
        return []
    out = []
    fields = schema["fields"]
    for key, item in value.items():
        if not isinstance(key, str):
            out.append(Problem(path, f"keys are field names, got {kind(key)}"))
            continue
        owner = _owner(api, steps + (key,))
        where = _spell(path, key, known=key in fields or owner is not None)
        if owner is not None:
            out.append(Problem(where, f"gpupools sets this itself; {owner}"))
            continue
        if key not in fields:
            what = f"{api.resource}" if not steps else ".".join(steps)
            offered = [name for name in fields if _owner(api, steps + (name,)) is None]
            out.append(Problem(where, f"not a field of {api.service}'s {what}; {_closest(key, offered)}"))
            continue
        out += _walk(api, fields[key], item, where, steps + (key,))
    return out


def paths_set(node: Mapping[str, Any] | None, api: NodeApi) -> list[Path_]:
    """The leaf fields a `node:` mapping sets, maps and lists counted as one field each, in the order written."""
    out: list[Path_] = []

    def walk(schema: dict, value: Any, steps: Path_) -> None:
        if schema["type"] == "object" and isinstance(value, dict):
            for key, item in value.items():
                if key in schema["fields"]:
                    walk(schema["fields"][key], item, steps + (key,))
        else:
            out.append(steps)

    if node:
        walk(api.model, node, ())
    return out


def replacement(api: NodeApi, steps: Path_) -> str | None:
    """What a change of the field does to the pool, where it replaces the pool or its nodes."""
    for cut in range(len(steps), 0, -1):
        if steps[:cut] in api.replaces:
            return api.replaces[steps[:cut]]
    return None


def merged(ours: dict, node: Mapping[str, Any] | None, defaults: frozenset[Path_] = frozenset()) -> dict:
    """gpupools' own inputs (provider spelling, camelCase) with the `node:` fields merged under them: mappings are
    merged key by key and gpupools' value wins wherever both set one, except at `defaults`, gpupools' own choices that
    the node settings may replace. `node` is not changed."""
    if not node:
        return ours
    return _merge(copy.deepcopy(dict(node)), ours, defaults, ())


def _merge(theirs: dict, ours: Mapping[str, Any], defaults: frozenset[Path_], steps: Path_) -> dict:
    out = dict(theirs)
    for key, value in ours.items():
        here = steps + (key,)
        if key not in out:
            out[key] = value
        elif here in defaults:
            continue
        elif isinstance(value, dict) and isinstance(out[key], dict):
            out[key] = _merge(out[key], value, defaults, here)
        else:
            out[key] = value
    return out


def spelled(steps: Path_) -> str:
    return ".".join(steps)


def pool_node_api(module: Any, autoscaler: str) -> NodeApi | None:
    """The node API a pool's `node:` is checked against: the cloud's `NODE_API`, or where the cloud makes pools
    differently per autoscaler (EKS: Karpenter's objects or a managed node group) its `node_api_for(autoscaler)`."""
    api = getattr(module, "NODE_API", None)
    by_autoscaler = getattr(module, "node_api_for", None)
    return by_autoscaler(autoscaler) if api is not None and by_autoscaler is not None else api


def stack_node_problems(module: Any, pool: Any, path: str, autoscaler: str) -> list[Problem]:
    """A pool's `node:` against its cloud's node API (`pool_node_api`), and what the cloud takes only in some pools."""
    if pool.node is None:
        return []
    api = pool_node_api(module, autoscaler)
    if api is None:
        return [Problem(f"{path}.node", f"{module.SERVICE} takes no node settings from gpupools' pools here; remove node "
                                        f"(docs/node-settings.md lists the clouds and modes that do)")]
    problems = node_problems(api, pool.node, f"{path}.node")
    if not problems and hasattr(module, "node_setting_problems"):
        problems = module.node_setting_problems(pool, path, autoscaler)
    return problems


def system_node_problems(module: Any, cluster: Any) -> list[Problem]:
    """`cluster.systemPool.node`: the system pool a new cluster gets, against the same node API."""
    system = cluster.system_pool
    if system is None or system.node is None:
        return []
    api = getattr(module, "SYSTEM_NODE_API", None)
    if api is None or not cluster.create:
        why = "the cluster exists already" if cluster.create is False and api is not None else f"{module.SERVICE} takes none here"
        return [Problem("cluster.systemPool.node", f"gpupools makes no system pool to pass node settings to ({why}); remove it")]
    return node_problems(api, system.node, "cluster.systemPool.node")


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str) and name_like(value):
        return value
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return "{" + ", ".join(f"{k if name_like(k) else '<' + kind(k) + '>'}: {_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    return kind(value)  # text that may be a credential is described, never shown


value_text = _value_text


def node_lines(api: NodeApi | None, node: Mapping[str, Any] | None) -> list[str]:
    """Each field a `node:` sets, as the plan shows it, with what a change of it does where it replaces the pool."""
    if api is None or not node:
        return []
    lines = []
    for steps in paths_set(node, api):
        value: Any = node
        for step in steps:
            value = value[step]
        why = replacement(api, steps)
        lines.append(f"{spelled(steps)}: {_value_text(value)}" + (f" (warning: {why})" if why else ""))
    return lines
