"""The cloud modules by name.

Every cloud module offers the same functions (see `aws.py` for the full set), so callers pick a module by name
and never branch on the cloud themselves. Adding a cloud means adding a module here and to `MODULES`, a component
module under `gpupools.components`, and its instance types in the catalog. The cloud modules are pure Python: no
cloud SDK is imported here.
"""

from __future__ import annotations

from types import ModuleType

from gpupools.clouds import aws, azure, gcp

MODULES: dict[str, ModuleType] = {"aws": aws, "azure": azure, "gcp": gcp}
NAMES = tuple(MODULES)


def cloud_module(cloud: str) -> ModuleType:
    if cloud not in MODULES:
        raise KeyError(f"unknown cloud {cloud!r}; expected one of {', '.join(NAMES)}")
    return MODULES[cloud]
