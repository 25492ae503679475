"""Which clouds a stack may name, and what the stack layer must know of each before any cloud module is asked.

The stack layer sits below the clouds and names none of them: each cloud module declares its Pulumi provider's config
namespace, the provider settings gpupools reads and the SDK that brings the provider (`PROVIDER`, a `ProviderFacts`),
and `gpupools.clouds.registry` registers every cloud here when it is imported, with the function that turns a cloud's
name and cluster mode into its Cloud object. A new cloud is a module under gpupools/clouds/ and a line in the
registry; `gpupools:cloud`, provider keys and the missing-SDK message follow from what it declares.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# Namespaces of providers gpupools configures itself and a stack must not set (the Kubernetes provider is configured
# from the cluster the stack creates or finds).
OWN_PROVIDER_NAMESPACES = ("kubernetes",)


@dataclass(frozen=True)
class Setting:
    """One provider setting a stack may set beside `gpupools:` (e.g. `aws:region`)."""

    pattern: str | None  # ASCII-only shape; None for credentials and other free strings
    shape: str
    env: tuple[str, ...] = ()  # where the provider looks when the key is missing, in its order
    required: bool = False  # required unless one of `env` is set
    default: str | None = None  # what happens when neither the key nor `env` is set
    # Whether the stack may hold it only encrypted: "always", "json" (a JSON document is a credential, a file's path is
    # not), or "" (never a secret).
    secret: str = ""
    # Whether gpupools' own program takes the value from `env` when the stack leaves the key out (not only the provider
    # does): the environment's value is then checked against `pattern` as the stack's would be.
    env_checked: bool = False


@dataclass(frozen=True)
class ProviderFacts:
    """What a cloud's Pulumi provider reads and where it comes from."""

    namespace: str  # the provider's config namespace: aws, azure-native, gcp
    settings: Mapping[str, Setting]  # every key the program or its default providers read, by full name (aws:region)
    sdk_package: str  # the importable Python package of the provider SDK (pulumi_aws)
    sdk_name: str  # how messages name it ("the AWS provider")
    sdk_distribution: str  # what pip installs (pulumi-aws); the gpupools extra named after the cloud brings it


_PROVIDERS: dict[str, ProviderFacts] = {}
_RESOLVE: Callable[[str, str], Any] | None = None


def register_cloud(name: str, provider: ProviderFacts) -> None:
    _PROVIDERS[name] = provider


def register_cloud_resolver(resolve: Callable[[str, str], Any]) -> None:
    global _RESOLVE
    _RESOLVE = resolve


def _registered() -> dict[str, ProviderFacts]:
    if not _PROVIDERS:
        raise RuntimeError("no cloud is registered: import gpupools.clouds.registry before reading a stack")
    return _PROVIDERS


def cloud_names() -> tuple[str, ...]:
    """The clouds a stack may name, in the registry's order."""
    return tuple(_registered())


def provider_of(cloud: str) -> ProviderFacts:
    return _registered()[cloud]


def provider_namespaces() -> tuple[str, ...]:
    """Config namespaces beside `gpupools:` that belong to a provider: the clouds' and those gpupools configures itself."""
    return (*dict.fromkeys(p.namespace for p in _registered().values()), *OWN_PROVIDER_NAMESPACES)


def cloud_of_namespace(namespace: str) -> str | None:
    return next((name for name, p in _registered().items() if p.namespace == namespace), None)


def resolve_cloud(cloud: str, mode: str) -> Any:
    if _RESOLVE is None:
        raise RuntimeError("no cloud resolver: import gpupools.clouds.registry before asking a stack for its cloud")
    return _RESOLVE(cloud, mode)
