"""A pool's node settings (`node:`) in `plan --json`, and what `plan --against` says of one that changed.

`plan --json` lists each pool's node settings under `nodeSettings` (only when a pool sets some, so a stack without
them writes the same JSON as before): per pool, each field as the text plan shows it, a digest of its value (a value
that may be a credential is described, never written, so changes are found by digest), and what a change of it does
where it replaces the pool or its nodes (the cloud's `replaces` table, gpupools.clouds.node_settings).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gpupools.autoscaling.choice import resolve_autoscaler
from gpupools.clouds.node_settings import paths_set, pool_node_api, replacement, spelled, value_text
from gpupools.stack.config import StackConfig

IN_PLACE = "changes in place"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def node_settings_json(stack: StackConfig) -> dict[str, dict[str, dict]]:
    """Per pool that sets `node:`, each field it sets: {"value", "digest", and "replaces" where a change replaces}."""
    api = pool_node_api(stack.target, resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler))
    out: dict[str, dict[str, dict]] = {}
    for pool in stack.pools:
        if api is None or not pool.node:
            continue
        fields = {}
        for steps in paths_set(pool.node, api):
            value: Any = pool.node
            for step in steps:
                value = value[step]
            why = replacement(api, steps)
            fields[spelled(steps)] = {"value": value_text(value), "digest": _digest(value), **({"replaces": why} if why else {})}
        out[pool.name] = fields
    return out


def node_setting_changes(previous: dict, stack: StackConfig) -> list[dict[str, str]]:
    """Each node setting set, removed or changed since the previous plan, with what the change does to the pool: the
    replacement the cloud's table names, or that it changes in place. A previous plan without `nodeSettings` had none."""
    api = pool_node_api(stack.target, resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler))
    before = previous.get("nodeSettings") if isinstance(previous.get("nodeSettings"), dict) else {}
    now = node_settings_json(stack)
    out = []
    for pool in stack.pools:
        old = before.get(pool.name) if isinstance(before.get(pool.name), dict) else {}
        new = now.get(pool.name, {})
        for field in [*new, *(f for f in old if f not in new)]:
            was, is_ = old.get(field), new.get(field)
            was_digest = was.get("digest") if isinstance(was, dict) else None
            if is_ is not None and was_digest == is_["digest"]:
                continue
            change = "set" if was is None else "removed" if is_ is None else "changed"
            why = replacement(api, tuple(field.split("."))) if api is not None else None
            values = {**({"from": str(was.get("value"))} if isinstance(was, dict) and change == "changed" else {}),
                      **({"to": is_["value"]} if is_ is not None else {})}
            out.append({"pool": pool.name, "field": field, "change": change, **values, "does": why or IN_PLACE})
    return out


def node_change_lines(changes: list[dict[str, str]]) -> dict[str, list[str]]:
    """The text plan's `node change` rows, per pool."""
    lines: dict[str, list[str]] = {}
    for c in changes:
        values = f" from {c['from']} to {c['to']}" if "from" in c else f" to {c['to']}" if "to" in c else ""
        lines.setdefault(c["pool"], []).append(f"{c['field']} {c['change']}{values}: {c['does']}")
    return lines
