"""Per-cloud decisions, one module per cloud, all pure Python.

Every cloud module offers the same functions (see `aws.py` for the full set), so callers pick a module by
name and never branch on the cloud themselves. Adding a cloud means adding a module here, a component
module under `gpupools.components`, and its instance types in the catalog.
"""

from __future__ import annotations

import importlib
from types import ModuleType

NAMES = ("aws", "azure", "gcp")


def get(cloud: str) -> ModuleType:
    if cloud not in NAMES:
        raise KeyError(f"unknown cloud {cloud!r}; expected one of {', '.join(NAMES)}")
    return importlib.import_module(f"{__name__}.{cloud}")
