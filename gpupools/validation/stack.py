"""The one entry point that turns a raw stack `config:` mapping into a typed, checked `StackConfig`.

Three passes, each on whatever the previous one could read, so a user sees every problem of a stack file in
one run: the shape (pydantic models in `config`), what only the catalog and the chosen cloud can judge
(`checks`), and whether every pool that may sit at zero nodes can be woken by a pending pod (`scaleup`).
Imports flow one way: this module imports those, none of them imports this.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from gpupools.monitoring.alerting import alerting_problems
from gpupools.validation.checks import semantic_problems
from gpupools.stack.config import NAMESPACE, Autoscaler, Cluster, Department, GpuSoftware, Pool, QuotaEngine, Sharing, StackConfig, Team
from gpupools.stack.values import allowed_keys, pydantic_problems, read_stack_file, split_namespaces
from gpupools.stack.errors import ConfigError, Problem, field_path, name_like, redact
from gpupools.stack.reading import Disputed
from gpupools.stack.providers import missing_sdk_problem, provider_problems
from gpupools.autoscaling.scaleup import scale_up_problems
from gpupools.autoscaling.choice import resolve_autoscaler
from gpupools.health.repair import repair_problems
from gpupools.upgrades.policy import upgrade_problems
from gpupools.clouds.registry import NAMES as CLOUD_NAMES, cloud_module
from gpupools.fleet.config import worker_stack_problems


def _try(model: type[BaseModel], raw: Any, loc: tuple, problems: list[Problem] | None = None):
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        if problems is not None:
            problems.extend(pydantic_problems(exc, model, loc))
        return None


def validate_stack(config: dict[str, Any], environ: Mapping[str, str] | None = None) -> StackConfig:
    """Validate a raw `config:` mapping (namespaced keys) and return the typed stack, or raise ConfigError.

    `environ` (default: this process's environment) is where the cloud providers look for settings the stack
    leaves out, such as AWS_REGION. Every problem leaves through `redact`: whichever check wrote it, it quotes no
    value of the stack that `gpupools.stack.errors.quotable` does not allow.
    """
    disputed, printable = _survey(config)
    disputes = list(_disputes(config, ())) if disputed else []
    if disputes:
        raise ConfigError(redact(_dispute_problems(config, disputes, environ), _settle(config, lambda d: d.pulumi_reads))) from None
    try:
        return _validate(config, environ, printable)
    except ConfigError as exc:
        raise ConfigError(redact(exc.problems, config)) from None


# --------------------------------------------------------------------------------------------------------------------
# Values YAML 1.1 and 1.2 read differently (`gpupools.stack.reading.Disputed`)


def _disputes(value: Any, loc: tuple):
    """(field location, value) of every disputed value; the location as problems name it (no `gpupools:` prefix)."""
    if isinstance(value, Disputed):
        yield loc, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if not loc and str(key).startswith(f"{NAMESPACE}:"):
                key = str(key)[len(NAMESPACE) + 1:]
            yield from _disputes(item, (*loc, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _disputes(item, (*loc, i))


def _survey(config: Any) -> tuple[bool, bool]:
    """Whether any value is disputed (what `_disputes` finds, without spelling a location for every value on the way),
    and whether every string and mapping key is printable, so that `invisible_problems` has nothing to report in the
    stack's own values or in any part of them. One walk for both: every command validates first, and nearly no
    stack holds either. A disputed stack is not looked at further (printable: False)."""
    stack, keys = [config], []
    printable = True
    while stack:
        node = stack.pop()
        if isinstance(node, str):  # the most common node first
            printable = printable and node.isprintable()
        elif isinstance(node, dict):
            keys.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, Disputed):
            return True, False
    return False, printable and all(key.isprintable() for key in keys if isinstance(key, str))


def _settle(value: Any, choose) -> Any:
    """`value` with every disputed value replaced by one reading of it."""
    if isinstance(value, Disputed):
        return choose(value)
    if isinstance(value, dict):
        return {k: _settle(v, choose) for k, v in value.items()}
    if isinstance(value, list):
        return [_settle(v, choose) for v in value]
    return value


def _refused(config: dict[str, Any], environ: Mapping[str, str] | None) -> list[Problem]:
    try:
        _validate(config, environ)
    except ConfigError as exc:
        return exc.problems
    return []


def _around(problem: Problem, path: str) -> bool:
    """Whether `problem` is about `path` itself or a field around it (a union reports where it branches)."""
    return problem.path == path or path.startswith((f"{problem.path}.", f"{problem.path}["))


def _at(problems: list[Problem], path: str) -> str | None:
    return next((p.message for p in problems if _around(p, path)), None)


def _dispute_problems(config: dict[str, Any], disputes: list, environ: Mapping[str, str] | None) -> list[Problem]:
    """One problem per disputed value, naming its field and the spelling that field takes, then every other problem
    of the stack as Pulumi would read it. Which reading the field takes is found by validating the stack both ways,
    so the hint is the model's own answer, never a guess: `fabric: on` is told to write "on", `create: no` false."""
    as_pulumi = _refused(_settle(config, lambda d: d.pulumi_reads), environ)
    as_yaml11 = _refused(_settle(config, lambda d: d.yaml11_reads), environ)
    problems, paths = [], []
    for loc, dispute in disputes:
        path = field_path(loc)
        paths.append(path)
        refused_pulumi, refused_yaml11 = _at(as_pulumi, path), _at(as_yaml11, path)
        if refused_pulumi is None and refused_yaml11 is not None:
            hint = f"write {dispute.spelled(dispute.pulumi_reads)}, which this field takes"
        elif refused_yaml11 is None and refused_pulumi is not None:
            hint = f"write {dispute.spelled(dispute.yaml11_reads)}, which this field takes"
        elif refused_pulumi is None:
            hint = dispute.advice
        else:
            hint = f"as Pulumi reads it: {refused_pulumi}"
        problems.append(Problem(path, f"unquoted {dispute.why} (line {dispute.line}); {hint}"))
    # The rest of the stack, as `pulumi up` would read it; what a disputed value caused is said above, once.
    problems.extend(p for p in as_pulumi if not any(_around(p, path) for path in paths))
    return _dedupe(problems)


class _Unredacted(ConfigError):
    """The problems `_validate` found, for `validate_stack` to redact (or `_refused` to compare): never shown itself,
    so its message, one line per problem, is not written."""

    def __init__(self, problems: list[Problem]):
        Exception.__init__(self)
        self.problems = problems


def _validate(config: dict[str, Any], environ: Mapping[str, str] | None, printable: bool = False) -> StackConfig:
    """`printable`: the caller found every string and key of `config` printable (`_survey`), so no invisible character
    is looked for again in the parts of it."""
    ours, providers, problems = split_namespaces(config)
    if "providers" in ours:
        # Provider settings are top-level keys (aws:region); `gpupools:providers` would be silently replaced.
        ours.pop("providers")
        problems.append(Problem("providers", f"unknown key 'providers'; allowed keys: {', '.join(allowed_keys(StackConfig, ()) or [])}; "
                                             f"provider settings are keys of their own, such as aws:region"))
    cloud = ours.get("cloud") if ours.get("cloud") in CLOUD_NAMES else None
    # Without the cloud's provider SDK nothing can be planned or deployed, and its own settings cannot be told from
    # typos: the missing extra is the one thing to say.
    missing_sdk = missing_sdk_problem(cloud) if cloud is not None else None
    if missing_sdk is not None:
        raise ConfigError([missing_sdk])
    if not printable:
        problems.extend(invisible_problems(ours))
        problems.extend(invisible_problems(providers, top=True))
    problems.extend(provider_problems(cloud, providers, environ))
    raw = {**ours, "providers": providers}
    stack = None
    try:
        stack = StackConfig.model_validate(raw)
    except ValidationError as exc:
        problems.extend(pydantic_problems(exc, StackConfig))
    if stack is not None:
        problems.extend(semantic_problems(stack.target, stack.cluster, stack.sharing, list(enumerate(stack.pools)), stack.gpu_software,
                                          stack.teams, stack.autoscaler, stack.providers, quotas=stack.quotas,
                                          departments=stack.departments))
        problems.extend(alerting_problems(stack))
        problems.extend(repair_problems(stack, resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)))
        problems.extend(upgrade_problems(stack, resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)))
        problems.extend(worker_stack_problems(stack))
        if not problems:
            problems.extend(scale_up_problems(stack))
    else:
        # Check what is well-formed anyway, so the user sees every problem in one go.
        cluster = _try(Cluster, ours.get("cluster"), ("cluster",))
        sharing = _try(Sharing, ours.get("sharing", {}), ("sharing",)) or Sharing()
        software = _try(GpuSoftware, ours.get("gpuSoftware", {}), ("gpuSoftware",)) or GpuSoftware()
        raw_pools = ours.get("pools") if isinstance(ours.get("pools"), list) else []
        pools = [(i, p) for i, p in ((i, _try(Pool, r, ("pools", i))) for i, r in enumerate(raw_pools)) if p is not None]
        raw_teams = ours.get("teams") if isinstance(ours.get("teams"), list) else []
        teams = [t for t in (_try(Team, r, ("teams", i)) for i, r in enumerate(raw_teams)) if t is not None]
        raw_departments = ours.get("departments") if isinstance(ours.get("departments"), list) else []
        departments = [d for d in (_try(Department, r, ("departments", i)) for i, r in enumerate(raw_departments)) if d is not None]
        if cloud:
            autoscaler = ours.get("autoscaler") if ours.get("autoscaler") in get_args(Autoscaler) else "auto"
            quotas = ours.get("quotas") if ours.get("quotas") in get_args(QuotaEngine) else "kueue"
            written = frozenset(r["name"] for r in raw_pools if isinstance(r, dict) and isinstance(r.get("name"), str) and name_like(r["name"]))
            target = cloud_module(cloud, cluster.managed_mode if cluster is not None else "standard")
            problems.extend(semantic_problems(target, cluster, sharing, pools, software, teams, autoscaler, providers, quotas=quotas,
                                              written_pool_names=written, departments=departments))
    if problems:
        raise _Unredacted(_dedupe(problems))
    assert stack is not None
    return stack


def _invisible(text: str) -> tuple[int, str] | None:
    """The first character of `text` a reader cannot see or tell from a space: format characters (zero-width
    spaces and joiners, bidirectional controls, byte-order marks), control characters, and separators other than
    the plain space. `eu-central-1\u2060` looks like a region and is a different string to every API."""
    import unicodedata

    if text.isprintable():  # false for each character looked for below: most strings are passed at C speed
        return None
    for found in _BEYOND_ASCII_PRINTABLE.finditer(text):
        char = found.group()
        kind = unicodedata.category(char)
        if kind in ("Cf", "Cc", "Zl", "Zp") or (kind == "Zs" and char != " "):
            return found.start(), char
    return None


_BEYOND_ASCII_PRINTABLE = re.compile(r"[^ -~]")


def invisible_problems(values: Any, top: bool = False) -> list[Problem]:
    """Every string (and mapping key) of the stack holding an invisible character, by its path; the value itself is
    not shown (it may be a credential), only the character's code point and position."""
    import unicodedata

    if _all_printable(values):
        return []
    problems: list[Problem] = []
    stack: list[tuple[Any, tuple]] = [(values, ())]
    while stack and len(problems) < 20:
        node, loc = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                where = (key,) if not loc else (*loc, key)
                found = _invisible(key) if isinstance(key, str) else None
                if found is not None:
                    problems.append(Problem(field_path(where) if not top else str(key).encode("unicode_escape").decode(),
                                            f"the key holds the invisible character U+{ord(found[1]):04X} "
                                            f"({unicodedata.name(found[1], 'unnamed')}) at position {found[0] + 1}; retype it"))
                    continue
                stack.append((child, where))
        elif isinstance(node, list):
            stack.extend((child, (*loc, i)) for i, child in enumerate(node))
        elif isinstance(node, str) and (found := _invisible(node)) is not None:
            path = loc[0] if top and len(loc) == 1 else field_path(loc)
            problems.append(Problem(path, f"holds the invisible character U+{ord(found[1]):04X} ({unicodedata.name(found[1], 'unnamed')}) "
                                          f"at position {found[0] + 1}; retype the value without it"))
    return problems


def _all_printable(values: Any) -> bool:
    """Whether every string and mapping key is printable, so that `invisible_problems` has nothing to report: each
    character it looks for makes `str.isprintable` false. Nearly every stack passes, and this walk, which builds no
    path, is what they cost."""
    stack = [values]
    while stack:
        node = stack.pop()
        if isinstance(node, str):  # the most common node first
            if not node.isprintable():
                return False
        elif isinstance(node, dict):
            stack.extend(node)  # the keys: a mapping key is a string or a scalar, never a mapping or a list
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return True


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if (p.path, p.message) not in seen:
            seen.add((p.path, p.message))
            out.append(p)
    return out


def load_stack(path: str | Path, environ: Mapping[str, str] | None = None) -> StackConfig:
    return validate_stack(read_stack_file(path), environ)
