"""Provider settings beside `gpupools:`: which keys each cloud reads, their shapes, and where a missing one comes from.

A typo such as `aws:regoin` or a missing `aws:region` must not plan quietly in a region nobody chose: the
Pulumi providers fall back to the environment (and then to their own defaults), so a stack that says
nothing deploys wherever the shell that ran `pulumi up` points. Every key the program or its default
providers read is listed here once; anything else in these namespaces is reported by name.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import re
from functools import lru_cache
from pathlib import Path
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpupools.stack.config import SecretPlaceholder, SecretText
from gpupools.stack.errors import Problem, shown

NAMESPACES = {"aws": "aws", "azure": "azure-native", "gcp": "gcp", "gcore": "gcore"}


@dataclass(frozen=True)
class Setting:
    pattern: str | None  # ASCII-only shape; None for credentials and other free strings
    shape: str
    env: tuple[str, ...] = ()  # where the provider looks when the key is missing, in its order
    required: bool = False  # required unless one of `env` is set
    default: str | None = None  # what happens when neither the key nor `env` is set


# AWS region names: eu-central-1, us-gov-west-1, ap-southeast-5, cn-north-1.
AWS_REGION = r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$"
# GCP: project IDs are 6-30 lower-case letters, digits and hyphens, starting with a letter, not ending with a hyphen;
# regions are like us-central1, europe-west4, northamerica-northeast2.
GCP_PROJECT = r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$"
GCP_REGION = r"^[a-z]+-[a-z]+[0-9]{1,2}$"
GCP_ZONE = r"^[a-z]+-[a-z]+[0-9]{1,2}-[a-z]$"
AZURE_LOCATION = r"^[a-z][a-z0-9]{2,39}$"
UUID = r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$"
FREE = None

# Environment variables as each provider documents them (pulumi-aws: AWS_REGION, AWS_DEFAULT_REGION; pulumi-gcp:
# GOOGLE_PROJECT, GOOGLE_CLOUD_PROJECT, GCLOUD_PROJECT, CLOUDSDK_CORE_PROJECT; pulumi-azure-native: ARM_LOCATION).
SETTINGS: dict[str, dict[str, Setting]] = {
    "aws": {
        "aws:region": Setting(AWS_REGION, "an AWS region such as eu-central-1", ("AWS_REGION", "AWS_DEFAULT_REGION"), required=True),
        "aws:profile": Setting(r"^[-A-Za-z0-9_.@+=,]{1,128}$", "a profile name of ~/.aws/config"),
        "aws:accessKey": Setting(FREE, "an access key ID"),
        "aws:secretKey": Setting(FREE, "a secret access key"),
        "aws:token": Setting(FREE, "a session token"),
    },
    "gcp": {
        "gcp:project": Setting(GCP_PROJECT, "a GCP project ID such as ml-platform-dev (6-30 lower-case letters, digits, '-')",
                               ("GOOGLE_PROJECT", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"), required=True),
        "gcp:region": Setting(GCP_REGION, "a GCP region such as us-central1", ("GOOGLE_REGION", "GCLOUD_REGION", "CLOUDSDK_COMPUTE_REGION")),
        "gcp:zone": Setting(GCP_ZONE, "a GCP zone such as us-central1-a", ("GOOGLE_ZONE", "GCLOUD_ZONE", "CLOUDSDK_COMPUTE_ZONE")),
        "gcp:credentials": Setting(FREE, "a service account key (its JSON, or the path of its file)"),
        "gcp:accessToken": Setting(FREE, "an OAuth 2.0 access token"),
    },
    "azure": {
        "azure-native:location": Setting(AZURE_LOCATION, "an Azure region name such as westeurope (az account list-locations, column Name)",
                                         ("ARM_LOCATION",), default="the resource group's location"),
        "azure-native:subscriptionId": Setting(UUID, "a subscription ID (a UUID)", ("ARM_SUBSCRIPTION_ID",)),
        "azure-native:tenantId": Setting(UUID, "a tenant ID (a UUID)", ("ARM_TENANT_ID",)),
        "azure-native:clientId": Setting(UUID, "an application (client) ID (a UUID)", ("ARM_CLIENT_ID",)),
        "azure-native:clientSecret": Setting(FREE, "a client secret"),
    },
    # Gcore: the SDK's own environment variables (gcore 0.59.0 gcore/_client.py, Gcore.__init__). The API key is not a
    # stack setting: the Gcore resources read GCORE_API_KEY when they run, so it never enters the stack or its state.
    "gcore": {
        "gcore:projectId": Setting(r"^[1-9][0-9]{0,11}$", "a Gcore cloud project ID (a number)", ("GCORE_CLOUD_PROJECT_ID",), required=True),
        "gcore:regionId": Setting(r"^[1-9][0-9]{0,11}$", "a Gcore cloud region ID (a number, such as 76)", ("GCORE_CLOUD_REGION_ID",),
                                  required=True),
    },
}


# Credentials a stack may hold only encrypted (`pulumi config set --secret KEY ...`): in plaintext they would sit
# in the stack file, in git and in every clone of it, as a Slack webhook would. `gcp:credentials` may also be the
# path of a key file, which is no secret; its JSON contents are.
SECRET_SETTINGS = frozenset({"aws:secretKey", "aws:token", "azure-native:clientSecret", "gcp:accessToken", "gcp:credentials"})


def _plaintext_secret(key: str, value: str) -> bool:
    if key == "gcp:credentials":
        return value.lstrip().startswith("{")
    return key in SECRET_SETTINGS


def _kind(value: Any) -> str:
    """What a value is, without any of its contents: messages about credentials must not quote them."""
    return {dict: "a mapping", list: "a list", bool: "a boolean", int: "a number", float: "a number", type(None): "null",
            str: "an empty string"}.get(type(value), "a value of another type")


SDK_PACKAGES = {"aws": "pulumi_aws", "gcp": "pulumi_gcp", "azure-native": "pulumi_azure_native", "gcore": "gcore"}

# Each cloud's Pulumi provider SDK comes with the extra named after the cloud (pyproject.toml), so an install
# carries only the clouds its stacks use: the three SDKs together are most of a full install's size.
SDK_DISTRIBUTIONS = {"aws": ("the AWS provider", "pulumi-aws"), "azure": ("the Azure Native provider", "pulumi-azure-native"),
                     "gcp": ("the Google Cloud provider", "pulumi-gcp"), "gcore": ("Gcore's Python SDK", "gcore")}


def sdk_installed(cloud: str) -> bool:
    """Whether this environment can import the cloud's Pulumi provider SDK; looked up, not imported (it is large)."""
    try:
        return importlib.util.find_spec(SDK_PACKAGES[NAMESPACES[cloud]]) is not None
    except (ImportError, ValueError):
        return False


def missing_sdk_problem(cloud: str) -> Problem | None:
    """The one line a stack gets when its cloud's provider SDK is not installed, naming the extra that brings it."""
    if sdk_installed(cloud):
        return None
    provider, distribution = SDK_DISTRIBUTIONS[cloud]
    return Problem("cloud", f"{cloud} needs {provider} ({distribution}), which this installation leaves out: pip install 'gpupools[{cloud}]'")


@lru_cache(maxsize=None)
def provider_sdk_keys(namespace: str) -> frozenset[str]:
    """The settings the provider itself reads (`aws:defaultTags`, `gcp:impersonateServiceAccount`, ...), as its
    installed Python SDK lists them in `config/vars.py`. They are the provider's to validate; gpupools only makes
    sure a key is one of them. Read as text, so the SDK is not imported."""
    spec = importlib.util.find_spec(SDK_PACKAGES[namespace]) if namespace in SDK_PACKAGES else None
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
    own = SETTINGS.get(cloud or "", {})
    for key, value in providers.items():
        namespace = key.partition(":")[0]
        setting = own.get(key)
        if setting is None:
            owner = next((c for c, ns in NAMESPACES.items() if ns == namespace), None)
            if cloud is not None and owner is not None and owner != cloud:
                problems.append(Problem(key, f"not used on {cloud}; {namespace}: settings apply to {owner} stacks only"))
            elif owner is None:
                problems.append(Problem(key, f"not read by gpupools: the Kubernetes provider is configured from the cluster the stack "
                                             f"creates or finds, so {namespace}: settings would be ignored"))
            elif cloud is not None and key.partition(":")[2] not in provider_sdk_keys(namespace):
                close = difflib.get_close_matches(key, [*own, *(f"{namespace}:{k}" for k in provider_sdk_keys(namespace))], n=1, cutoff=0.8)
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
        elif _plaintext_secret(key, value):
            problems.append(Problem(key, f"is in plaintext; keep {setting.shape} encrypted: pulumi config set --secret {key} ..."
                                         + (" (or give the path of the key file)" if key == "gcp:credentials" else "")))
        elif setting.pattern is not None and not re.fullmatch(setting.pattern, value):
            problems.append(Problem(key, f"{shown((key,), value)} is not {setting.shape}"))
    for key, setting in own.items():
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
    setting = SETTINGS[cloud][key]
    for variable in setting.env:
        if environ.get(variable):
            return environ[variable], variable
    return None, setting.default or "unset"


def provider_notes(cloud: str, providers: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> list[str]:
    """What the plan must say about provider settings the stack leaves to the environment or a default."""
    notes = []
    for key, setting in SETTINGS[cloud].items():
        if setting.pattern is None or key in providers:
            continue
        value, source = provider_value(cloud, key, providers, environ)
        if value is not None:
            notes.append(f"{key} is not set in the stack: {value} comes from ${source} in this shell; pin it with "
                         f"`pulumi config set {key} {value}` so every deploy uses the same one")
        elif setting.required or setting.default:
            notes.append(f"{key} is not set in the stack: {source} applies")
    return notes
