"""What a wheel of gpupools holds: every package and every data file the code reads, as pyproject.toml lists them.

An editable install reads the source tree and hides a package or data file left out of pyproject.toml; a wheel built
from it would then fail at import or at the first plan that needs the file."""

from __future__ import annotations

import fnmatch
import tomllib

from conftest import ROOT

SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
SOURCE = ROOT / "gpupools"


def _packages_on_disk() -> set[str]:
    return {".".join(p.parent.relative_to(ROOT).parts) for p in SOURCE.rglob("__init__.py") if "__pycache__" not in p.parts}


def test_every_package_is_listed():
    assert _packages_on_disk() - set(SETUPTOOLS["packages"]) == set()


def test_every_listed_package_exists():
    assert set(SETUPTOOLS["packages"]) - _packages_on_disk() == set()


def test_every_data_file_is_listed_in_package_data():
    data = SETUPTOOLS["package-data"]
    missing = []
    for path in SOURCE.rglob("*"):
        if path.is_dir() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
            continue
        package = ".".join(path.parent.relative_to(ROOT).parts)
        if not any(fnmatch.fnmatch(path.name, pattern) for pattern in data.get(package, [])):
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []
