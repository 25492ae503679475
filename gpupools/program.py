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


def read_worker_stack(path) -> StackConfig:
    """A fleet worker's stack file, read as `gpupools plan` reads one (with its project's config) and validated."""
    from gpupools.stack.project import project_file_of, read_stack

    return validate_stack(read_stack(path, project_file_of(path)).config)


def fleet_main(fleet, plan=None) -> None:
    """A fleet stack (gpupools:fleet): the MultiKueue manager, on its cloud's cluster, without GPU pools."""
    from gpupools.deploy.fleet import FleetManager, manager_stack
    from gpupools.deploy.platform import cloud_components

    manager = manager_stack(fleet)
    component = FleetManager("gpupools-fleet", fleet, lambda opts: cloud_components(fleet.cloud).build_cluster(manager, opts), plan=plan)
    pulumi.export("clusterName", component.cluster.name)
    pulumi.export("kubeconfig", component.cluster.kubeconfig)
    pulumi.export("workers", [w.name for w in fleet.fleet.workers])
    pulumi.export("fleetLanding", [row.as_json() for row in component.plan.landing])


def fleet_from_pulumi():
    """The fleet stack the engine passed; its workers' stack files are read from the project's stack folder."""
    from pathlib import Path

    from gpupools.fleet.config import read_fleet
    from gpupools.stack.project import project_file_of
    from gpupools.stack.reading import read_document

    try:
        values, secret = config_from_pulumi()
        project = project_file_of(Path.cwd() / "Pulumi.yaml")
        folder = Path.cwd()
        if project is not None:
            meta = read_document(project)
            folder = project.parent / (meta.get("stackConfigDir", ".") if isinstance(meta, dict) else ".")
        return read_fleet(mark_secrets(values, secret), folder, pulumi.get_stack(), read_worker_stack)
    except ConfigError as exc:
        raise pulumi.RunError("invalid fleet stack config:\n" + str(exc)) from None


def main(stack: StackConfig | None = None) -> None:
    """The platform of the stack the engine passed, or of `stack` where it was read and validated already."""
    if stack is None:
        from gpupools.fleet.config import FLEET_KEY

        if FLEET_KEY in config_from_pulumi()[0]:
            fleet_main(fleet_from_pulumi())
            return
    stack = stack if stack is not None else stack_config_from_pulumi()
    platform = GpuPlatform("gpupools", stack)
    pulumi.export("clusterName", platform.cluster.name)
    pulumi.export("kubeconfig", platform.cluster.kubeconfig)
    pulumi.export("pools", platform.pool_outputs())
    if stack.teams:
        pulumi.export("teams", platform.team_outputs())
    pulumi.export("landing", platform.verdicts)
    if platform.fleet_access is not None:
        from gpupools.fleet.credentials import OUTPUT

        pulumi.export(OUTPUT, platform.fleet_access.kubeconfig)
