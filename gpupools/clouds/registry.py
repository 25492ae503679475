"""The cloud modules by name.

Every cloud module offers the same functions (see `aws.py` for the full set), so callers pick a module by name
and never branch on the cloud themselves. Adding a cloud means adding a module here and to `MODULES`, a component
module under `gpupools.deploy`, and its instance types in the catalog; importing this module registers every
cloud and its Pulumi provider (`PROVIDER`) with the stack layer (gpupools.stack.targets), which names none. The cloud
modules are pure Python: no cloud SDK is imported here.
"""

from __future__ import annotations

from types import ModuleType

from gpupools.clouds import aws, azure, gcore, gcp
from gpupools.clouds.aws import auto_mode as aws_auto
from gpupools.clouds.azure import node_auto_provisioning as azure_nap
from gpupools.clouds.gcp import autopilot as gcp_autopilot
from gpupools.stack.targets import register_cloud, register_cloud_resolver

MODULES: dict[str, ModuleType] = {"aws": aws, "azure": azure, "gcp": gcp, "gcore": gcore}
NAMES = tuple(MODULES)
# A managed mode whose answers differ from the standard cluster's (`cluster.mode`): its own Cloud object, a module that
# takes the cloud's answers and replaces those the mode changes.
MANAGED: dict[tuple[str, str], ModuleType] = {("aws", "auto-mode"): aws_auto, ("azure", "node-auto-provisioning"): azure_nap,
                                              ("gcp", "autopilot"): gcp_autopilot}


def cloud_module(cloud: str, mode: str = "standard") -> ModuleType:
    """The Cloud object (`gpupools.core.cloud.Cloud`) of a cloud's name and cluster mode. Each cloud module is its cloud's
    one instance: it answers every question the capabilities ask (see gpupools/core/cloud.py); after validation a stack
    carries its own as `stack.target`, so capabilities ask that and never compare names."""
    if cloud not in MODULES:
        raise KeyError(f"unknown cloud {cloud!r}; expected one of {', '.join(NAMES)}")
    return MANAGED.get((cloud, mode), MODULES[cloud])


for _name, _module in MODULES.items():
    register_cloud(_name, _module.PROVIDER)
register_cloud_resolver(cloud_module)
