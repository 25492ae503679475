"""`gpupools check`: the policy pack, run offline on the resources `gpupools plan` records.

No credentials, no Pulumi CLI: every policy of `gpupools.policies.pack` is called through pulumi_policy's own
argument types, built the way its analyzer server builds them for `pulumi preview --policy-pack`
(properties deserialized and wrapped in the unknown-checking proxy, URNs with the parent type chain,
`not_applicable` and unknown values handled alike), so both paths judge with the same code. What the
recorded plan cannot provide: resource dependencies (empty lists) and provider resources of resources.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from datetime import date
from dataclasses import dataclass, field
from inspect import isawaitable
from pathlib import Path
from typing import Any

from gpupools.stack.errors import ConfigError, Problem, describe, kind, name_like
from gpupools.stack.reading import ReadError, load_json, read_document
from gpupools.cli.planrun import PROJECT, Plan, PlannedResource

from gpupools.policies.pack import LEVELS, WEAK_LEVELS, engine_levels, guarded_levels

STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass(frozen=True)
class Violation:
    policy: str
    level: str
    resource: str | None  # URN; None for the stack as a whole
    message: str

    def as_json(self) -> dict:
        return {"policy": self.policy, "level": self.level, "resource": self.resource, "message": self.message}


@dataclass(frozen=True)
class Weakening:
    """One setting of a policy config that makes a mandatory policy weaker than the pack ships it: a lower level, a
    raised limit, an exception, a requirement dropped."""

    policy: str
    setting: str  # "enforcementLevel", or a key of the policy's config
    value: Any
    default: Any
    security: bool  # one of gpupools.policies.pack.SECURITY_POLICIES
    effect: str = "weakens"  # "weakens", or "changes" where gpupools cannot tell the direction

    def as_json(self) -> dict:
        return {"policy": self.policy, "setting": self.setting, "value": self.value, "default": self.default,
                "security": self.security, "effect": self.effect}

    def line(self) -> str:
        kind_ = "a security policy" if self.security else "a mandatory policy"
        if self.setting == "enforcementLevel":
            text = f"policy config: {self.policy} is {self.value} (mandatory by default), which leaves {kind_} unenforced"
        else:
            verb = "weakens" if self.effect == "weakens" else "changes"
            text = (f"policy config: {self.policy}.{self.setting} is {_config_value(self.value)} (default "
                    f"{_config_value(self.default)}), which {verb} {kind_}")
        return ("warning: " if self.security else "") + text


@dataclass
class ConfigReport:
    """What a policy config does to the pack's mandatory policies, printed by every run of `gpupools check`: the
    config usually comes from the pull request under review, so a change that weakens the gate must show."""

    weakened: list[Weakening] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return [w.line() for w in self.weakened if w.security]

    def lines(self) -> list[str]:
        return [*self.notes, *(w.line() for w in self.weakened)]

    @property
    def policies(self) -> list[str]:
        return sorted({w.policy for w in self.weakened})

    def as_json(self) -> dict:
        return {"weakened": [w.as_json() for w in self.weakened], "warnings": self.warnings, "notes": self.notes}


@dataclass
class CheckResult:
    violations: list[Violation] = field(default_factory=list)
    notes: list[Violation] = field(default_factory=list)  # not-applicable reasons and preview limitations
    policies_run: int = 0
    resources: int = 0
    config: ConfigReport = field(default_factory=ConfigReport)

    @property
    def mandatory(self) -> list[Violation]:
        return [v for v in self.violations if v.level == "mandatory"]

    def as_json(self) -> dict:
        return {"violations": [v.as_json() for v in self.violations], "policy_config": self.config.as_json()}


# --------------------------------------------------------------------------------------------------------------------
# Policy config: the JSON `pulumi preview --policy-pack-config` takes


@dataclass(frozen=True)
class PolicySettings:
    level: str
    config: dict[str, Any]


def _schema_problem(name: str, key: str, value: Any, schema: dict) -> str | None:
    """The subset of JSON Schema policy config schemas use: type, enum, numeric bounds, pattern and date format.

    Numbers must be finite whatever the schema says: a NaN cap compares false with everything and so turns
    the policy off, and an infinite one means no cap while looking like one.
    """
    kind = schema.get("type")
    checks = {
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "string": lambda v: isinstance(v, str),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    where = f"{name}.{key}"
    if kind in checks and not checks[kind](value):
        return f"{where}: expected {'an' if kind[0] in 'aeiou' else 'a'} {kind}, got {_config_value(value)}"
    item_kind = (schema.get("items") or {}).get("type")
    if kind == "array" and item_kind in checks:
        for i, item in enumerate(value):
            if not checks[item_kind](item):
                return f"{where}[{i}]: expected {'an' if item_kind[0] in 'aeiou' else 'a'} {item_kind}, got {_config_value(item)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: {_config_value(value)} is not one of {', '.join(json.dumps(v) for v in schema['enum'])}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}: {_config_value(value)} is not a finite number"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where}: {value} is below the minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where}: {value} is above the maximum {schema['maximum']}"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return f"{where}: {value} must be greater than {schema['exclusiveMinimum']}"
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            return f"{where}: {value} must be less than {schema['exclusiveMaximum']}"
    if isinstance(value, str) and value and schema.get("format") == "date":
        try:
            date.fromisoformat(value) if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value) else date.fromisoformat("")
        except ValueError:
            return f"{where}: {_config_value(value)} is not a date such as 2026-01-31"
    return None


def _security_policies() -> frozenset[str]:
    from gpupools.policies.pack import SECURITY_POLICIES

    return SECURITY_POLICIES


def _default_level(policy: Any) -> str:
    return policy.enforcement_level.value if policy.enforcement_level else "advisory"


def policy_settings(raw: dict[str, Any] | None, policies: list) -> dict[str, PolicySettings]:
    """Every policy's enforcement level and config (schema defaults filled in), or ConfigError.

    The levels are the ones the pack itself runs at under `pulumi preview --policy-pack-config` with the same file:
    the engine's reconciliation of the file (`engine_levels`) through the pack's own guard (`guarded_levels`), so
    `all` never lowers a security policy (SECURITY_POLICIES) below its default and `{"all": "disabled"}` in a pull
    request's own policy config cannot switch the gate off. A security policy is lowered only by its own name at a
    level other than `all`'s, which `config_report` turns into a warning in every run."""
    raw = raw or {}
    problems: list[Problem] = []
    known = {p.name: p for p in policies}

    def bad(message: str) -> None:
        problems.append(Problem("--policy-config", message))

    def split(name: str, entry: Any) -> tuple[str | None, dict]:
        if isinstance(entry, str):
            entry = {"enforcementLevel": entry}
        if not isinstance(entry, dict):
            bad(f"{name}: expected an enforcement level ({', '.join(LEVELS)}) or an object, got {_config_value(entry)}")
            return None, {}
        level = entry.get("enforcementLevel")
        if level is not None and level not in LEVELS:
            bad(f"{name}.enforcementLevel: {_config_value(level)} is not one of {', '.join(LEVELS)}")
            level = None
        return level, {k: v for k, v in entry.items() if k != "enforcementLevel"}

    all_level = None
    if "all" in raw:
        all_level, extra = split("all", raw["all"])
        if extra:
            bad(f"all: only enforcementLevel can be set for all policies, not {', '.join(sorted(extra))}")
    for name in raw:
        if name != "all" and name not in known:
            bad(f"{_config_name(name)} is not a policy of this pack; policies: {', '.join(sorted(known))}")
    named: dict[str, str | None] = {"all": all_level}
    configs = {}
    for name, policy in known.items():
        named[name], given = split(name, raw[name]) if name in raw else (None, {})
        schema = policy.config_schema.properties if policy.config_schema else {}
        config = {k: s["default"] for k, s in schema.items() if "default" in s}
        for key, value in given.items():
            if key not in schema:
                allowed = ", ".join(["enforcementLevel", *schema])
                bad(f"{name}: unknown key {_config_name(key)}; allowed keys: {allowed}")
                continue
            problem = _schema_problem(name, key, value, schema[key])
            if problem:
                bad(problem)
            config[key] = value
        for key in (policy.config_schema.required or []) if policy.config_schema else []:
            if key not in config:
                bad(f"{name}.{key}: required, but missing")
        configs[name] = config
    if problems:
        raise ConfigError(problems)
    levels = guarded_levels(engine_levels(named, policies), policies)
    return {name: PolicySettings(levels[name], configs[name]) for name in known}


def _weakens(key: str, default: Any, value: Any) -> bool | None:
    """Whether a config value makes its policy weaker than the default: a higher `max*`, a lower `min*`, more
    `exceptions` (or sizes listed `...Without...`), fewer `required*` items, an `allow*` switched on or another
    requirement switched off. None: a key none of these names fit (reported as a change)."""
    if value == default:
        return False
    if default is None and value is not None and key.startswith(("max", "min")):
        return False  # a limit where the policy has none by default only adds to what it checks
    if isinstance(value, bool) or isinstance(default, bool):
        return bool(value) if key.startswith("allow") else (default is True and value is False)
    if isinstance(value, (int, float)) and isinstance(default, (int, float)):
        if key.startswith("max"):
            return value > default
        if key.startswith("min"):
            return value < default
        return None
    if isinstance(value, list) and isinstance(default, list):
        have, had = {json.dumps(v, sort_keys=True) for v in value}, {json.dumps(v, sort_keys=True) for v in default}
        if key == "exceptions" or "Without" in key or key.startswith("allow"):  # more allowed (allowedUnsafeSysctls) is weaker
            return bool(have - had)
        if key.startswith("required"):
            return bool(had - have)
    return None


def config_report(raw: dict[str, Any] | None, policies: list, settings: dict[str, PolicySettings]) -> ConfigReport:
    """Every setting of `raw` that weakens a policy the pack makes mandatory, and what `all` was not allowed to do."""
    raw = raw or {}
    security = _security_policies()
    report = ConfigReport()
    for policy in policies:
        name, default = policy.name, _default_level(policy)
        if default in WEAK_LEVELS:
            continue
        setting = settings[name]
        protected = name in security
        if setting.level in WEAK_LEVELS:
            report.weakened.append(Weakening(name, "enforcementLevel", setting.level, default, protected))
            continue
        entry = raw.get(name)
        given = entry if isinstance(entry, dict) else {}
        schema = policy.config_schema.properties if policy.config_schema else {}
        for key in given:
            if key == "enforcementLevel" or key not in schema:
                continue
            effect = _weakens(key, schema[key].get("default"), setting.config.get(key))
            if effect is not False:
                report.weakened.append(Weakening(name, key, setting.config.get(key), schema[key].get("default"), protected,
                                                 "weakens" if effect else "changes"))
    all_level = _level_of(raw.get("all"))
    if all_level in WEAK_LEVELS:
        # Kept by the guard: what the engine would hand the pack is `all`'s level, and the pack runs it at its default.
        reconciled = engine_levels({name: _level_of(entry) for name, entry in raw.items()}, policies)
        kept = sorted(p.name for p in policies if p.name in security and reconciled[p.name] == all_level
                      and settings[p.name].level == _default_level(p) != all_level)
        if kept:
            report.notes.append(f"policy config: \"all\": \"{all_level}\" does not lower the security policies, which keep their "
                                f"levels: {', '.join(kept)} (name one with a level other than \"{all_level}\" to change it)")
    return report


def _level_of(entry: Any) -> Any:
    """The enforcement level a policy config entry sets: the string itself, or its `enforcementLevel`."""
    return entry.get("enforcementLevel") if isinstance(entry, dict) else entry


def _config_value(value: Any) -> str:
    """A policy config value as a line shows it: JSON when it holds names and numbers only, else its type and size
    (the config is a pull request's file, and a value of it is not known to be safe to print)."""
    def safe(v: Any) -> bool:
        if isinstance(v, list):
            return all(safe(item) for item in v)
        if isinstance(v, str):
            return name_like(v)
        return v is None or isinstance(v, (bool, int, float))
    return describe(value, limit=120 if isinstance(value, list) else 60, as_json=True) if safe(value) else kind(value)


def _config_name(name: str) -> str:
    """A key of the policy config as a message quotes it: a name as it is, anything else described."""
    return describe(name) if name_like(name) else f"({kind(name)})"


def read_policy_config(path: Path) -> dict[str, Any]:
    """The policy config file, read with the same limits as stack files (`gpupools.stack.reading`)."""
    try:
        doc = read_document(path, load_json)
    except FileNotFoundError:
        raise ConfigError([Problem("--policy-config", f"{path}: file not found")]) from None
    except OSError as exc:
        raise ConfigError([Problem("--policy-config", f"{path}: cannot read: {exc.strerror}")]) from None
    except ReadError as exc:
        raise ConfigError([Problem("--policy-config", f"{path}: {exc}")]) from None
    if not isinstance(doc, dict):
        raise ConfigError([Problem("--policy-config", f"{path}: expected a JSON object of policy name -> settings")])
    return doc


# --------------------------------------------------------------------------------------------------------------------
# Recorded resources as pulumi_policy sees resources


def _type_chain(resource: PlannedResource, index: dict[tuple[str, str], PlannedResource]) -> list[str]:
    chain = [resource.type]
    current = resource
    seen = set()
    while current.parent and current.parent_type and current.parent_type != STACK_TYPE:
        key = (current.parent_type, current.parent)
        parent = index.get(key)
        if parent is None or key in seen:
            break
        seen.add(key)
        chain.insert(0, parent.type)
        current = parent
    return chain


def urns(plan: Plan) -> dict[int, str]:
    """URNs as the engine spells them: urn:pulumi:<stack>::<project>::<parent types $ type>::<name>."""
    index = {(r.type, r.name): r for r in plan.resources}
    return {id(r): f"urn:pulumi:{plan.stack}::{PROJECT}::{'$'.join(_type_chain(r, index))}::{r.name}" for r in plan.resources}


def policy_resources(plan: Plan) -> list[Any]:
    """Each recorded resource as a pulumi_policy `PolicyResource`, parents linked by URN."""
    from pulumi_policy import PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions
    from pulumi_policy.deserialize import deserialize_properties
    from pulumi_policy.proxy import unknown_checking_proxy

    by_resource = urns(plan)
    index = {(r.type, r.name): r for r in plan.resources}
    out, by_urn = [], {}
    for r in plan.resources:
        parent = index.get((r.parent_type, r.parent)) if r.parent_type else None
        parent_urn = by_resource[id(parent)] if parent is not None else None
        opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], parent_urn)
        props = unknown_checking_proxy(deserialize_properties(json.loads(json.dumps(r.inputs))))
        resource = PolicyResource(r.type, props, by_resource[id(r)], r.name, opts, None, None, [], {})
        out.append(resource)
        by_urn[resource.urn] = resource
    for resource in out:
        if resource.opts.parent in by_urn:
            resource.parent = by_urn[resource.opts.parent]
    return out


def _run(result: Any) -> None:
    if isawaitable(result):
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(result)
        finally:
            loop.close()


def run_policies(plan: Plan, settings: dict[str, PolicySettings] | None = None, policies: list | None = None) -> CheckResult:
    """Every policy on every recorded resource, with the given levels and config (defaults when None)."""
    from pulumi_policy import ResourceValidationArgs, ResourceValidationPolicy, StackValidationArgs, StackValidationPolicy
    from pulumi_policy.policy import _NotApplicableError
    from pulumi_policy.proxy import UnknownValueError

    from gpupools.policies.pack import POLICIES
    from gpupools.policies.security import SECRETS_VISIBLE

    policies = POLICIES if policies is None else policies
    settings = settings if settings is not None else policy_settings({}, policies)
    resources = policy_resources(plan)
    result = CheckResult(resources=len(resources))
    token = SECRETS_VISIBLE.set(True)  # the plan records secrets as "[secret]"
    try:
        for policy in policies:
            setting = settings[policy.name]
            level = "mandatory" if setting.level == "remediate" else setting.level
            if level == "disabled":
                continue
            result.policies_run += 1

            def reporter(urn_default: str | None, policy=policy, level=level):
                def report(message: str, urn: str | None = None) -> None:
                    result.violations.append(Violation(policy.name, level, urn or urn_default, message or policy.description))
                return report

            def attempt(call, urn: str | None, policy=policy) -> None:
                try:
                    _run(call())
                except _NotApplicableError as exc:
                    if exc.reason:
                        result.notes.append(Violation(policy.name, "not applicable", urn, exc.reason))
                except UnknownValueError as exc:
                    result.notes.append(Violation(policy.name, "advisory", urn, f"can't run during preview: {exc.message}"))

            if isinstance(policy, ResourceValidationPolicy):
                for r in resources:
                    args = ResourceValidationArgs(r.resource_type, r.props, r.urn, r.name, r.opts, r.provider, dict(setting.config))
                    attempt(lambda args=args, r=r: policy.validate(args, reporter(r.urn)), r.urn)
            elif isinstance(policy, StackValidationPolicy):
                args = StackValidationArgs(resources, dict(setting.config))
                attempt(lambda args=args: policy.validate(args, reporter(None)), None)
    finally:
        SECRETS_VISIBLE.reset(token)
    return result


def display_resource(urn: str | None) -> str:
    """`type name` from a URN, short enough for a table."""
    if not urn:
        return "(stack)"
    parts = urn.split("::")
    return f"{parts[2].split('$')[-1]} {parts[3]}" if len(parts) >= 4 else urn


def print_result(result: CheckResult, stack: str, console: Any = None) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console(highlight=False, emoji=False, width=160)
    if result.violations:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for column in ("policy", "level", "resource", "message"):
            table.add_column(column, overflow="fold")
        for v in sorted(result.violations, key=lambda v: (v.level != "mandatory", v.policy, v.resource or "")):
            # Text, not markup: messages quote values such as [nvidia.com/gpu=present:NoSchedule].
            table.add_row(*(Text(cell) for cell in (v.policy, v.level, display_resource(v.resource), v.message)))
        console.print(table)
    for note in result.notes:
        console.print(f"note: {note.policy} ({display_resource(note.resource)}): {note.message}", markup=False)
    for line in result.config.lines():
        console.print(line, markup=False, soft_wrap=True)  # one line each, for grep in a CI log
    mandatory = len(result.mandatory)
    advisory = len(result.violations) - mandatory
    verdict = "FAILED" if mandatory else "passed"
    weakened = len(result.config.policies)
    tail = f"; the policy config weakens {weakened} mandatory polic{'ies' if weakened != 1 else 'y'} (above)" if weakened else ""
    console.print(f"gpupools check {verdict}: stack {stack}, {result.policies_run} policies on {result.resources} resources, "
                  f"{mandatory} mandatory and {advisory} advisory violation{'s' if advisory != 1 else ''}{tail}.", markup=False, soft_wrap=True)
