"""Provider settings beside `gpupools:`: the keys a stack's cloud reads, their shapes, and where a missing one comes from.

A typo such as `aws:regoin` or a missing `aws:region` must not plan quietly in a region nobody chose: the
Pulumi providers fall back to the environment (and then to their own defaults), so a stack that says
nothing deploys wherever the shell that ran `pulumi up` points. Every key the program or its default
providers read is listed once, by its cloud (`PROVIDER` of each cloud module, registered in
gpupools.stack.targets); anything else in these namespaces is reported by name.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from functools import lru_cache
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from gpupools.stack.config import SecretPlaceholder, SecretText
from gpupools.stack.targets import Setting, cloud_names, cloud_of_namespace, provider_of
from gpupools.stack.errors import Problem, close_matches, shown


def _settings(cloud: str | None) -> Mapping[str, Setting]:
    return provider_of(cloud).settings if cloud in cloud_names() else {}


def _plaintext_secret(setting: Setting, value: str) -> bool:
    """Credentials a stack may hold only encrypted (`pulumi config set --secret KEY ...`): in plaintext they would sit in
    the stack file, in git and in every clone of it, as a Slack webhook would. A "json" setting (a service account key)
    may also be the path of a key file, which is no secret; its JSON contents are."""
    if setting.secret == "json":
        return value.lstrip().startswith("{")
    return setting.secret == "always"


def _kind(value: Any) -> str:
    """What a value is, without any of its contents: messages about credentials must not quote them."""
    return {dict: "a mapping", list: "a list", bool: "a boolean", int: "a number", float: "a number", type(None): "null",
            str: "an empty string"}.get(type(value), "a value of another type")


def sdk_installed(cloud: str) -> bool:
    """Whether this environment can import the cloud's Pulumi provider SDK; looked up, not imported (it is large)."""
    package = provider_of(cloud).sdk_package
    if package in sys.modules:  # imported, or marked as not importable (None): asked of sys.modules, as import does
        return _findable(package)
    return _on_path(package)


def _findable(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


@lru_cache(maxsize=None)
def _on_path(package: str) -> bool:
    """A package not yet imported, looked up on sys.path once per process: what is installed does not change while a
    command runs, and every validation asks (the lookup stats each entry of sys.path)."""
    return _findable(package)


def missing_sdk_problem(cloud: str) -> Problem | None:
    """The one line a stack gets when its cloud's provider SDK is not installed, naming the extra that brings it."""
    if sdk_installed(cloud):
        return None
    provider = provider_of(cloud)
    return Problem("cloud", f"{cloud} needs {provider.sdk_name} ({provider.sdk_distribution}), which this installation leaves out: pip install 'gpupools[{cloud}]'")


def sdk_package(namespace: str) -> str | None:
    """The Python package of the provider SDK whose config namespace this is (pulumi_aws for aws)."""
    cloud = cloud_of_namespace(namespace)
    return provider_of(cloud).sdk_package if cloud is not None else None


@lru_cache(maxsize=None)
def provider_sdk_keys(namespace: str) -> frozenset[str]:
    """The settings the provider itself reads (`aws:defaultTags`, `gcp:impersonateServiceAccount`, ...), as its
    installed Python SDK lists them in `config/vars.py`. They are the provider's to validate; gpupools only makes
    sure a key is one of them. Read as text, so the SDK is not imported."""
    package = sdk_package(namespace)
    spec = importlib.util.find_spec(package) if package else None
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    path = Path(next(iter(spec.submodule_search_locations))) / "config" / "vars.py"
    try:
        return frozenset(re.findall(r"__config__\.get[a-z_]*\('([A-Za-z0-9]+)'\)", path.read_text()))
    except OSError:
        return frozenset()


def _is_secret(value: Any) -> bool:
    """Encrypted in the stack: a placeholder offline, the decrypted text under `pulumi up`."""
    return isinstance(value, (SecretPlaceholder, SecretText))


def provider_problems(cloud: str | None, providers: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> list[Problem]:
    """Every provider key a stack sets, judged for its cloud; required keys missing from stack and environment."""
    environ = os.environ if environ is None else environ
    problems: list[Problem] = []
    own = _settings(cloud)
    for key, value in providers.items():
        namespace = key.partition(":")[0]
        setting = own.get(key)
        if setting is None:
            owner = cloud_of_namespace(namespace)
            if cloud is not None and owner is not None and owner != cloud:
                problems.append(Problem(key, f"not used on {cloud}; {namespace}: settings apply to {owner} stacks only"))
            elif owner is None:
                problems.append(Problem(key, f"not read by gpupools: the Kubernetes provider is configured from the cluster the stack "
                                             f"creates or finds, so {namespace}: settings would be ignored"))
            elif cloud is not None and key.partition(":")[2] not in provider_sdk_keys(namespace):
                close = close_matches(key, [*own, *(f"{namespace}:{k}" for k in provider_sdk_keys(namespace))], n=1, cutoff=0.8)
                hint = f"; did you mean {close[0]}?" if close else ""
                problems.append(Problem(key, f"unknown {namespace} setting: neither gpupools nor the {namespace} provider reads it{hint} "
                                             f"(gpupools reads {', '.join(own)})"))
            continue
        if _is_secret(value):
            if setting.pattern is not None:
                problems.append(Problem(key, f"must be a plain value, not a secret: it is {setting.shape}"))
        elif setting.pattern is None and (not isinstance(value, str) or not value):
            problems.append(Problem(key, f"expected {setting.shape} as a string, got {_kind(value)} (the value is not shown)"))
        elif not isinstance(value, str) or not value:
            problems.append(Problem(key, f"expected {setting.shape}, got {shown((key,), value)}"))
        elif _plaintext_secret(setting, value):
            problems.append(Problem(key, f"is in plaintext; keep {setting.shape} encrypted: pulumi config set --secret {key} ..."
                                         + (" (or give the path of the key file)" if setting.secret == "json" else "")))
        elif setting.pattern is not None and not re.fullmatch(setting.pattern, value):
            problems.append(Problem(key, f"{shown((key,), value)} is not {setting.shape}"))
    for key, setting in own.items():
        variable = next((v for v in setting.env if environ.get(v)), None)
        if setting.env_checked and key not in providers and variable and not re.fullmatch(setting.pattern or ".*", environ[variable]):
            problems.append(Problem(key, f"not set in the stack, and ${variable} ({shown((key,), environ[variable])}) is not {setting.shape}"))
        if setting.required and key not in providers and not any(environ.get(v) for v in setting.env):
            problems.append(Problem(key, f"required on {cloud}, but missing: set it ({setting.shape}) with `pulumi config set {key} ...`"
                                         f"; the provider would otherwise take it from {' or '.join(setting.env)}, none of which is set"))
    return problems


def provider_value(cloud: str, key: str, providers: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """A provider setting's value and where it comes from: the stack file, an environment variable, or a default."""
    environ = os.environ if environ is None else environ
    value = providers.get(key)
    if isinstance(value, str) and value and not _is_secret(value):
        return value, "stack"
    setting = provider_of(cloud).settings[key]
    for variable in setting.env:
        if environ.get(variable):
            return environ[variable], variable
    return None, setting.default or "unset"


def provider_notes(cloud: str, providers: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> list[str]:
    """What the plan must say about provider settings the stack leaves to the environment or a default."""
    notes = []
    for key, setting in provider_of(cloud).settings.items():
        if setting.pattern is None or key in providers:
            continue
        value, source = provider_value(cloud, key, providers, environ)
        if value is not None:
            notes.append(f"{key} is not set in the stack: {value} comes from ${source} in this shell; pin it with "
                         f"`pulumi config set {key} {value}` so every deploy uses the same one")
        elif setting.required or setting.default:
            notes.append(f"{key} is not set in the stack: {source} applies")
    return notes
