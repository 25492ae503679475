"""The Pulumi program behind `pulumi up` and `gpupools plan`: stack config in, GpuPlatform out."""

from __future__ import annotations

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env, get_config_secret_keys_env, is_config_secret

from gpupools.stack.config import NAMESPACE, StackConfig
from gpupools.stack.values import from_pulumi_values, mark_secrets
from gpupools.stack.targets import provider_namespaces
from gpupools.validation.stack import validate_stack
from gpupools.stack.errors import ConfigError
from gpupools.deploy.platform import GpuPlatform


def config_from_pulumi(namespaces: tuple[str, ...] | None = None) -> tuple[dict, set[str]]:
    """The config keys of these namespaces the engine passed (as a stack file spells them), and which of them are
    secret. A component constructed for another language's program reads its provider settings here too: the
    engine passes that program's stack config with every Construct call."""
    namespaces = namespaces or (NAMESPACE, *provider_namespaces())
    values = {**get_config_env(), **CONFIG.get()}
    wanted = {k: v for k, v in values.items() if k.partition(":")[0] in namespaces}
    secret = set(get_config_secret_keys_env()) | {k for k in wanted if is_config_secret(k)}
    return from_pulumi_values(wanted), secret


def stack_config_from_pulumi() -> StackConfig:
    """Read every `gpupools:` and provider key the engine passed, and validate them as one stack file."""
    try:
        values, secret = config_from_pulumi()
        return validate_stack(mark_secrets(values, secret))
    except ConfigError as exc:
        raise pulumi.RunError("invalid stack config:\n" + str(exc)) from None


def main(stack: StackConfig | None = None) -> None:
    """The platform of the stack the engine passed, or of `stack` where it was read and validated already."""
    stack = stack if stack is not None else stack_config_from_pulumi()
    platform = GpuPlatform("gpupools", stack)
    pulumi.export("clusterName", platform.cluster.name)
    pulumi.export("kubeconfig", platform.cluster.kubeconfig)
    pulumi.export("pools", platform.pool_outputs())
    if stack.teams:
        pulumi.export("teams", platform.team_outputs())
    pulumi.export("landing", platform.verdicts)
