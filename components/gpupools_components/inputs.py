"""A component's inputs, as Pulumi's provider hands them over, turned back into a stack file and validated as one.

The provider maps the schema's camelCase names to the argument classes' Python names before a component sees its
inputs (pulumi/provider/experimental/component.py `map_input_properties`, pulumi 3.272); `stack_keys` maps them
back, so gpupools' own validation (gpupools.validation.stack) reads exactly what a stack file would say and answers
with the same one-line errors, paths spelled as the stack file and the schema spell them.
"""

import math
from typing import Any, Mapping, NotRequired, get_args, get_origin, get_type_hints, is_typeddict

import pulumi
from pulumi.output import Unknown
from pulumi.provider.experimental.util import camel_case

from gpupools.program import config_from_pulumi
from gpupools.stack.config import COMPONENT_SECRETS, NAMESPACE, SECRET_ADVICE, StackConfig, mark_secrets
from gpupools.stack.targets import provider_namespaces
from gpupools.stack.errors import ConfigError, Problem, field_path
from gpupools.validation.stack import validate_stack

UNKNOWN = ("is known only after deployment (an output of a resource not created yet); gpupools plans pools, quotas "
           "and software from its inputs, so give a value known at preview")


def _typed_dict(annotation: Any) -> type | None:
    """The argument class an annotation holds (through NotRequired and list), if any."""
    while get_origin(annotation) in (NotRequired, list):
        annotation = get_args(annotation)[0]
    return annotation if is_typeddict(annotation) else None


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


def resolved(value: Any, loc: tuple = ()) -> tuple[Any, bool, list[Problem]]:
    """The plain value of an input that may hold Outputs anywhere, whether any of them was secret, and a problem for
    every value not known yet.

    The provider wraps a secret input, or one that depends on other resources, in an Output whose value is already
    there (pulumi/provider/server.py `_select_value`), and the engine's output values become Outputs built from
    their known value (pulumi/runtime/rpc.py `deserialize_output_value`): each is read where it stands, without
    waiting. Numbers travel as doubles; a whole number becomes an int again, as the stack file's YAML would read it.
    """
    if isinstance(value, pulumi.Output):
        data = value._data  # a done future of _OutputData (see above)
        if not data.done() or data.exception() is not None or not data.result().is_known:
            return None, False, [Problem(field_path(loc), UNKNOWN)]
        inner, secret, problems = resolved(data.result().value, loc)
        return inner, secret or data.result().is_secret, problems
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
    return value, False, []


def validated(inputs: Mapping[str, Any], args: type, fixed: Mapping[str, Any] = {}) -> StackConfig:
    """Validate a component's inputs as the stack file `gpupools:<key>: <value>` (plus `fixed` keys the component
    decides itself), with the provider settings (aws:region, ...) of the program that constructs it. Raises
    ConfigError with one line per problem."""
    config: dict[str, Any] = {}
    secret: set[str] = set()
    problems: list[Problem] = []
    for key, value in stack_keys(dict(inputs), args).items():
        plain, is_secret, unknown = resolved(value, (key,))
        problems += unknown
        config[f"{NAMESPACE}:{key}"] = plain
        if is_secret:
            secret.add(f"{NAMESPACE}:{key}")
    if problems:
        raise ConfigError(problems)
    config.update({f"{NAMESPACE}:{key}": value for key, value in fixed.items()})
    providers, provider_secrets = config_from_pulumi(provider_namespaces())
    # A credential given in plaintext is told to come as a secret Output, not with `pulumi config set`.
    advice = SECRET_ADVICE.set(COMPONENT_SECRETS)
    try:
        return validate_stack(mark_secrets({**config, **providers}, secret | provider_secrets))
    finally:
        SECRET_ADVICE.reset(advice)
