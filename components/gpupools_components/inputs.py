"""A component's inputs, as the engine sends them, turned into a stack file and validated as one.

Two steps. `provider_inputs` takes the place of Pulumi's own mapping of inputs to a component's argument class
(pulumi/provider/experimental/component.py, pulumi 3.272: `ComponentProvider.construct` calls `map_inputs`, which
`map_input_properties` implements), which fits typed programs and loses what other languages can send: a nested
input that is not a mapping, or that is an Output (a secret anywhere in a mapping makes the whole mapping one,
pulumi/runtime/rpc.py `deserialize_property`), becomes an empty mapping (line 214, `input_val if isinstance(input_val,
dict) else {}`), and so does a list item that is not one (lines 229-243); a key the schema lacks is dropped (only the
schema's properties are read, lines 156-158); an integer input goes through `int()` (lines 276-285), whose TypeError on a
list or an unknown value leaves the provider as a traceback and whose ValueError message quotes the value (the
result is then overwritten with the value as sent, line 287, so a fraction was never cut to an integer). Here every
value stays as it was sent, with only the argument names mapped, so gpupools' own validation sees the shape another
language sent and refuses it with the stack file's one-line error; what a stack file cannot hold (a value known only
after deployment, a resource, an asset) is refused in the same form, before it.

`stack_inputs` and `validate` then turn the argument names back into the stack file's keys and validate them as the
stack file `gpupools:<key>: <value>` (gpupools.validation.stack), so the answer is the stack file's, paths spelled as
the stack file and the schema spell them.
"""

import asyncio
import math
from typing import Any, Mapping, NotRequired, get_args, get_origin, get_type_hints, is_typeddict

import pulumi
from pulumi.output import Unknown, _OutputData
from pulumi.provider.experimental.util import camel_case

from gpupools.program import config_from_pulumi
from gpupools.stack.config import COMPONENT_SECRETS, NAMESPACE, SECRET_ADVICE, StackConfig
from gpupools.stack.values import mark_secrets
from gpupools.stack.targets import provider_namespaces
from gpupools.stack.errors import ConfigError, Problem, field_path, kind, name_like
from gpupools.validation.stack import validate_stack

UNKNOWN = ("is known only after deployment (an output of a resource not created yet); gpupools plans pools, quotas "
           "and software from its inputs, so give a value known at preview")
NOT_PLAIN = "expected a plain value (text, a number, true or false, a list or a mapping), got"


def _typed_dict(annotation: Any) -> type | None:
    """The argument class an annotation holds (through NotRequired and list), if any."""
    while get_origin(annotation) in (NotRequired, list):
        annotation = get_args(annotation)[0]
    return annotation if is_typeddict(annotation) else None


def _schema_names(args: type) -> dict[str, str]:
    """Schema name to Python name of an argument class's keys: the analyzer names each property with util.py
    `camel_case` of the key (analyzer.py `analyze_type`)."""
    return {camel_case(key): key for key in get_type_hints(args)}


def _unknown_key(key: str, args: type) -> str:
    """The stack file's message for a key its mapping does not have (gpupools.stack.config `pydantic_problems`)."""
    named = repr(key) if name_like(key) else f"({kind(key)})"
    return f"unknown key {named}; allowed keys: {', '.join(_schema_names(args))}"


def _python_keys(value: Any, args: type, loc: tuple, problems: list[Problem]) -> Any:
    """A mapping of an argument class with its keys as the class names them; nested mappings and lists of them
    likewise. Anything else is left as it was sent, the wrong shape included, for validation to refuse; so is a key
    the class does not have (the stack file's models refuse it with the same message), unless it is spelled as
    another key's Python name as well (`max_nodes` beside `maxNodes`), which would leave one of the two unread."""
    if isinstance(value, list):
        return [_python_keys(item, args, (*loc, i), problems) for i, item in enumerate(value)]
    if not isinstance(value, dict):
        return value
    hints, names = get_type_hints(args), _schema_names(args)
    out: dict[str, Any] = {}
    given: dict[str, str] = {}  # Python name to the key it was given as
    for key, item in value.items():
        python = names.get(key, key)
        if python in out:  # the stack file's models take the schema's name and refuse the other (pydantic's populate_by_name)
            other = key if key not in names else given[python]
            problems.append(Problem(field_path((*loc, other)), _unknown_key(other, args)))
            continue
        given[python] = key
        nested = _typed_dict(hints[python]) if python in hints else None
        out[python] = _python_keys(item, nested, (*loc, key), problems) if nested is not None else item
    return out


def _secret(value: Any) -> pulumi.Output:
    """A known secret Output of a plain value, made as the provider makes one of a secret input (pulumi/provider/
    server.py `_select_value`): a component gets a secret input as an Output, and `resolved` reads it back."""
    data: asyncio.Future = asyncio.Future()
    data.set_result(_OutputData(resources=set(), value=value, is_known=True, is_secret=True))
    return pulumi.Output._from_data(data)


def provider_inputs(inputs: Mapping[str, Any], args: type) -> dict[str, Any]:
    """A component's inputs as the provider received them (schema names, Outputs where the engine sent secrets or
    output values) as its argument class names them: plain values, with each top-level input that held a secret a
    known secret Output of its plain value. Raises ConfigError with a line for each value not known yet, each
    resource or asset, each input the component does not have and each required one missing."""
    names = _schema_names(args)
    out: dict[str, Any] = {}
    problems: list[Problem] = []
    for key, value in inputs.items():
        python = names.get(key)
        if python is None:  # not an input of this component (another component's, say)
            problems.append(Problem(field_path((key,)), _unknown_key(key, args)))
            continue
        plain, secret, found = resolved(value, (key,))
        problems += found
        nested = _typed_dict(get_type_hints(args)[python])
        plain = _python_keys(plain, nested, (key,), problems) if nested is not None else plain
        out[python] = _secret(plain) if secret else plain
    problems += [Problem(camel_case(key), "required, but missing") for key in sorted(args.__required_keys__) if key not in out]
    if problems:
        raise ConfigError(problems)
    return out


def stack_keys(value: Any, args: type) -> Any:
    """Python argument names back to the stack file's keys (`max_nodes` to `maxNodes`, `from_` to `from`), through
    nested argument classes and lists of them; maps of user keys (labels, per-pool quotas) and `Any` values stay as
    given. The analyzer names schema properties with the same `camel_case` (analyzer.py `analyze_type`)."""
    if isinstance(value, list):
        return [stack_keys(item, args) for item in value]
    if not isinstance(value, dict):
        return value
    hints = get_type_hints(args, include_extras=True)
    out = {}
    for key, item in value.items():
        nested = _typed_dict(hints[key]) if key in hints else None
        out[camel_case(key) if key in hints else key] = stack_keys(item, nested) if nested is not None else item
    return out


def _what(value: Any) -> str:
    if isinstance(value, pulumi.Resource):
        return "a resource reference"
    if isinstance(value, (pulumi.Asset, pulumi.Archive)):
        return "an asset or archive"
    return kind(value)


def resolved(value: Any, loc: tuple = ()) -> tuple[Any, bool, list[Problem]]:
    """The plain value of an input that may hold Outputs anywhere, whether any of them was secret, and a problem for
    every value not known yet and every one no stack file can hold (a resource, an asset).

    The provider wraps a secret input, or one that depends on other resources, in an Output whose value is already
    there (pulumi/provider/server.py `_select_value`), and the engine's output values become Outputs built from
    their known value (pulumi/runtime/rpc.py `deserialize_output_value`): each is read where it stands, without
    waiting. An Output holding an unknown value somewhere is not known as a whole (output.py `_OutputData`), so its
    value is looked into for the place. Numbers travel as doubles; a whole number becomes an int again, as the stack
    file's YAML would read it.
    """
    if isinstance(value, pulumi.Output):
        data = value._data  # a done future of _OutputData (see above)
        if not data.done() or data.exception() is not None:
            return None, False, [Problem(field_path(loc), UNKNOWN)]
        known = data.result()
        if not known.is_known and (known.value is None or isinstance(known.value, Unknown)):
            return None, False, [Problem(field_path(loc), UNKNOWN)]
        inner, secret, problems = resolved(known.value, loc)
        if not known.is_known and not problems:
            problems = [Problem(field_path(loc), UNKNOWN)]
        return inner, secret or known.is_secret, problems
    if isinstance(value, Unknown):
        return None, False, [Problem(field_path(loc), UNKNOWN)]
    if isinstance(value, dict):
        out, secret, problems = {}, False, []
        for key, item in value.items():
            out[key], item_secret, item_problems = resolved(item, (*loc, key))
            secret, problems = secret or item_secret, problems + item_problems
        return out, secret, problems
    if isinstance(value, list):
        items = [resolved(item, (*loc, i)) for i, item in enumerate(value)]
        return [i[0] for i in items], any(i[1] for i in items), [p for i in items for p in i[2]]
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value), False, []
    if value is not None and not isinstance(value, (str, bool, int, float)):
        return None, False, [Problem(field_path(loc), f"{NOT_PLAIN} {_what(value)}")]
    return value, False, []


def stack_inputs(inputs: Mapping[str, Any], args: type) -> tuple[dict[str, Any], set[str]]:
    """A component's arguments as the keys of a stack file's `gpupools:` namespace (without the prefix), plain, and
    which of them held a secret. Raises ConfigError for values not known yet."""
    config: dict[str, Any] = {}
    secret: set[str] = set()
    problems: list[Problem] = []
    for python, value in inputs.items():
        key = camel_case(python)
        if isinstance(value, pulumi.Output):  # a secret input: its value, still named as the argument class names it
            value, is_secret, found = resolved(value, (key,))
            if found:
                problems += found
                continue
            secret |= {key} if is_secret else set()
        value = stack_keys({python: value}, args)[key]
        config[key], is_secret, found = resolved(value, (key,))
        problems += found
        secret |= {key} if is_secret else set()
    if problems:
        raise ConfigError(problems)
    return config, secret


def validate(config: Mapping[str, Any], secret: set[str], fixed: Mapping[str, Any] = {}) -> StackConfig:
    """Validate the stack file `gpupools:<key>: <value>` of `config` (plus `fixed` keys the component decides itself),
    its `secret` keys held as secrets, with the provider settings (aws:region, ...) of the program that constructs
    the component. Raises ConfigError with one line per problem."""
    values = {f"{NAMESPACE}:{key}": value for key, value in {**config, **fixed}.items()}
    providers, provider_secrets = config_from_pulumi(provider_namespaces())
    # A credential given in plaintext is told to come as a secret Output, not with `pulumi config set`.
    advice = SECRET_ADVICE.set(COMPONENT_SECRETS)
    try:
        return validate_stack(mark_secrets({**values, **providers}, {f"{NAMESPACE}:{key}" for key in secret} | provider_secrets))
    finally:
        SECRET_ADVICE.reset(advice)


def validated(inputs: Mapping[str, Any], args: type, fixed: Mapping[str, Any] = {}) -> StackConfig:
    """`validate` of a component's arguments (`stack_inputs`)."""
    config, secret = stack_inputs(inputs, args)
    return validate(config, secret, fixed)
