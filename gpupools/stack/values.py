"""The stack file's values as Pulumi holds them, and pydantic's answers in the stack file's words.

Reading a stack file (`read_stack_file`), marking the values Pulumi keeps secret, splitting `gpupools:` keys from the
providers', turning values to and from Pulumi's config strings, and `pydantic_problems`: a validation error of the
models in config.py as one line per field, naming the key as the stack file spells it and never quoting a value
that could be a credential. The models are config.py's; this module reads them and they never read it.
"""

from __future__ import annotations

import functools
import json
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union
from pydantic import BaseModel, ValidationError
from gpupools.stack.errors import ConfigError, Problem, field_path, kind, name_like, quotable, shown, shown_wrong_type
from gpupools.stack.reading import ReadError, load_json, read_document
from gpupools.stack.targets import provider_namespaces
from gpupools.stack.config import MAX_POOLS, MAX_POOL_INSTANCE_TYPES, MAX_POOL_LABELS, MAX_TEAMS, NAMESPACE, PATTERN_NAMES, SecretPlaceholder, SecretText


# --------------------------------------------------------------------------------------------------------------------
# Reading stack files and Pulumi config


def read_stack_file(path: str | Path) -> dict[str, Any]:
    """Parse a Pulumi stack file into the raw `config:` mapping (namespaced keys), or raise ConfigError.

    The file goes through `gpupools.stack.reading`, whose limits bound the time and memory any file can cost.
    """
    path = Path(path)
    try:
        doc = read_document(path)
    except FileNotFoundError:
        raise ConfigError([Problem(str(path), "stack file not found")]) from None
    except OSError as exc:
        raise ConfigError([Problem(str(path), f"cannot read stack file: {exc.strerror}")]) from None
    except ReadError as exc:
        raise ConfigError([Problem(str(path), str(exc))]) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise ConfigError([Problem(str(path), "a stack file needs a top-level `config:` mapping")])
    return doc["config"]


def _decode_secure(value: Any) -> Any:
    """Encrypted values (`{secure: ...}`) cannot be read offline; keep a placeholder that says so, also inside
    structured values (`pulumi config set --secret --path` puts them there)."""
    # Every command decodes every value of the stack: a scalar is kept as it is without a call of its own.
    if isinstance(value, dict):
        if len(value) == 1 and "secure" in value:
            return SecretPlaceholder()
        return {k: _decode_secure(v) if isinstance(v, (dict, list)) else v for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_secure(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


# Fields that hold credentials, by their path under a config key ("*" for every item of a list).
SECRET_PATHS = {"teams": ("*", "alerts", "slack", "webhook"), "monitoring": ("smtp", "password"), "health": ("alerts", "slack", "webhook")}


def mark_secrets(values: dict[str, Any], secret_keys: set[str]) -> dict[str, Any]:
    """Wrap the credential fields of keys Pulumi holds as secrets in `SecretText`, so validation knows they came
    encrypted. Pulumi says only which top-level keys hold a secret; the credential fields are the ones that can."""
    def walk(node: Any, path: tuple) -> Any:
        if not path:
            return SecretText(node) if isinstance(node, str) else node
        head, rest = path[0], path[1:]
        if head == "*" and isinstance(node, list):
            return [walk(item, rest) for item in node]
        if isinstance(node, dict) and head in node:
            return {**node, head: walk(node[head], rest)}
        return node

    out = dict(values)
    for name, path in SECRET_PATHS.items():
        key = f"{NAMESPACE}:{name}"
        if key in secret_keys and key in out:
            out[key] = walk(out[key], path)
    for key in secret_keys:  # provider credentials (aws:secretKey, ...) are whole values
        if key.partition(":")[0] in provider_namespaces() and isinstance(out.get(key), str):
            out[key] = SecretText(out[key])
    return out


def split_namespaces(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[Problem]]:
    """Separate `gpupools:` keys from provider settings; anything else is a mistake worth naming."""
    ours: dict[str, Any] = {}
    providers: dict[str, Any] = {}
    problems: list[Problem] = []
    for key, value in config.items():
        namespace, _, name = str(key).partition(":")
        if namespace == NAMESPACE and name:
            ours[name] = _decode_secure(value)
        elif namespace in provider_namespaces() and name:
            providers[key] = _decode_secure(value)
        else:
            allowed = ", ".join(f"{n}:" for n in (NAMESPACE, *provider_namespaces()))
            named = repr(str(key)) if name_like(str(key)) else f"({kind(str(key))})"
            problems.append(Problem(str(key) if name_like(str(key)) else f"<{kind(str(key))}>",
                                    f"unknown config key {named}; keys start with one of {allowed}"))
    return ours, providers, problems


def from_pulumi_values(values: dict[str, Any]) -> dict[str, Any]:
    """Pulumi hands structured config values to programs as JSON strings; turn them back into data.

    Read with the stack-file limits; a string that is not such JSON stays a string, which validation rejects
    wherever a list or mapping belongs.
    """
    out = {}
    for key, value in values.items():
        # Only gpupools' own keys are structured; a provider's are strings, and one may be JSON text itself (the
        # contents of a gcp:credentials key file), which must stay the string it is.
        if key.partition(":")[0] == NAMESPACE and isinstance(value, str) and value[:1] in "[{":
            try:
                value = load_json(value)
            except ReadError:
                pass
        out[key] = value
    return out


def to_pulumi_values(config: dict[str, Any]) -> dict[str, str]:
    """The inverse of `from_pulumi_values`: how the Pulumi CLI passes stack config to a program."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


# --------------------------------------------------------------------------------------------------------------------
# Validation


def allowed_keys(model: type[BaseModel], loc: tuple) -> list[str] | None:
    """Walk the model tree along `loc` to the model that rejected an extra key, and list its keys."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or (isinstance(part, str) and part.startswith("<")):  # list items, union tags
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = next((f for n, f in current.model_fields.items() if (f.alias or n) == part or n == part), None)
        if field is None:
            return None
        current = _model_in(field.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or n for n, f in current.model_fields.items() if n != "providers"]
    return None


def field_words(model: type[BaseModel], loc: tuple) -> frozenset[str]:
    """The words (Literal values) the field at `loc` of `model` takes, in any branch of its type; pydantic's
    union tags (`<word>`) in `loc` are skipped, list items and mapping values followed."""
    current = [model]
    for part in loc:
        if isinstance(part, str) and part.startswith("<"):
            continue
        found = []
        for annotation in _branches(current):
            origin, args = typing.get_origin(annotation), typing.get_args(annotation)
            if isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(part, str):
                field = _fields_by_name(annotation).get(part)
                found += [field.annotation] if field is not None else []
            elif origin in (list, tuple) and args and isinstance(part, int):
                found.append(args[0])
            elif origin is dict and len(args) == 2 and isinstance(part, str):
                found.append(args[1])
        current = found
    return frozenset(word for annotation in _branches(current) if typing.get_origin(annotation) is Literal
                     for word in typing.get_args(annotation) if isinstance(word, str))


@functools.lru_cache(maxsize=256)
def _fields_by_name(model: type[BaseModel]) -> dict[str, Any]:
    """A model's fields by alias and by name, the first field in order to hold either: a lookup per step of every refused
    value's location (`field_words`), where scanning the fields each time cost more than the rest. Keyed by model class."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        out.setdefault(field.alias or name, field)
        out.setdefault(name, field)
    return out


def _branches(annotations: list) -> list:
    """The types a value of these annotations may take: Annotated unwrapped, unions split."""
    out, todo = [], list(annotations)
    while todo:
        annotation = todo.pop()
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            todo.append(typing.get_args(annotation)[0])
        elif origin in (Union, types.UnionType):
            todo.extend(typing.get_args(annotation))
        else:
            out.append(annotation)
    return out


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


# pydantic's errors for a value of a type the field does not take (pydantic_core's ErrorType: bool_type,
# int_parsing, string_type, literal_error, model_type, ...), as opposed to a value of the right type out of range.
_WRONG_TYPE = re.compile(r"[a-z_]+_(type|parsing)|literal_error|enum|int_from_float|union_tag_(invalid|not_found)|is_instance_of|none_required")


# Text that reads as what the field takes once unquoted (`minNodes: "2"`, `spot: "true"`): the message says so,
# which tells nothing of the value but its form.
_QUOTED_FORMS = {"int_type": (re.compile(r"[-+]?[0-9]{1,20}"), "a number"),
                 "float_type": (re.compile(r"[-+]?([0-9]{1,20}(\.[0-9]{0,20})?|\.[0-9]{1,20})"), "a number"),
                 "bool_type": (re.compile(r"true|false|True|False|TRUE|FALSE"), "true or false")}


def pydantic_problems(exc: ValidationError, model: type[BaseModel], prefix: tuple = ()) -> list[Problem]:
    """One line per pydantic error, naming the field and what it allows. The value given is quoted only where
    `gpupools.stack.errors.quotable` allows it (a name, size or id of the right form), described by type and length
    everywhere else: a credential given the wrong shape must not come back out in the message."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = prefix + tuple(part for part in err["loc"] if not (isinstance(part, str) and part.startswith("<")))
        kind_ = err["type"]
        given = err.get("input")
        if _WRONG_TYPE.fullmatch(kind_):
            got = shown_wrong_type(loc, given, field_words(model, tuple(err["loc"])))
        else:
            got = shown(loc, given)
        if kind_ == "missing":
            message = "required, but missing"
        elif kind_ == "extra_forbidden":
            allowed = allowed_keys(model, tuple(err["loc"])[:-1])
            key = str(loc[-1])
            named = repr(key) if name_like(key) else f"({kind(key)})"
            message = f"unknown key {named}" + (f"; allowed keys: {', '.join(allowed)}" if allowed else "")
        elif kind_ == "string_pattern_mismatch":
            form = PATTERN_NAMES.get(err["ctx"]["pattern"], f"the form {err['ctx']['pattern']}")
            message = f"{got} is not {form}"
        elif kind_ == "too_short" and loc[-1] == "instanceTypes":
            message = "lists one instance type; a pool of one type gives it as instanceType"
        elif kind_ == "too_long" and loc[-1] == "instanceTypes":
            message = f"{len(given)} instance types; a pool lists at most {MAX_POOL_INSTANCE_TYPES} (an EKS node group takes 20)"
        elif kind_ == "too_short" and loc[-1] == "pools":
            message = "at least one pool is required"
        elif kind_ == "too_long" and loc[-1] == "pools":
            message = f"{len(given)} pools; a stack has at most {MAX_POOLS} (split larger fleets into several stacks)"
        elif kind_ == "too_long" and loc[-1] in ("teams", "labels"):
            what, most = ("teams", f"a stack has at most {MAX_TEAMS:,}") if loc[-1] == "teams" else ("labels", f"a pool has at most {MAX_POOL_LABELS}")
            message = f"{len(given):,} {what}; {most}"
        elif kind_ == "secret_url":  # the message is complete, and must not echo a credential
            message = err["msg"].replace("{field}", f"{NAMESPACE}:{field_path(loc)}")
        elif kind_ == "list_type":
            message = f"expected a list, got {got}"
        elif kind_ in ("model_type", "dict_type", "model_attributes_type"):
            message = f"expected a mapping, got {got}"
        elif kind_ == "string_type" and isinstance(given, (int, float)) and not isinstance(given, bool):
            # YAML turns unquoted 1.30 into the number 1.3, and (YAML 1.1) 1:30 into 90 (base 60).
            number = f"the number {given!r}" if quotable(loc, given) else got
            message = (f"expected text, got {number}: YAML read the value as a number (1.30 becomes 1.3, 1:30 becomes 90); "
                       f"quote it, e.g. {loc[-1]}: \"1.30\"" if loc and loc[-1] == "kubernetesVersion" else
                       f"expected text, got {number}: YAML read the value as a number; quote it")
        else:
            text = err["msg"]
            message = f"{text[0].lower()}{text[1:]} (got {got})"
            if isinstance(given, str) and kind_ in _QUOTED_FORMS and _QUOTED_FORMS[kind_][0].fullmatch(given):
                message += f"; {_QUOTED_FORMS[kind_][1]} in quotes is text: write it without them"
        problems.append(Problem(field_path(loc), message))
    return problems
