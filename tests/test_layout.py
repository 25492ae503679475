"""The package layout is a rule, not a hope: `lint-imports` checks the contracts in pyproject.toml."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(package_parent: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"], capture_output=True, text=True,
                          env=env, cwd=package_parent, timeout=300)


def test_the_import_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" in result.stdout and " 0 broken" in result.stdout


@pytest.mark.parametrize("module, wrong", [
    ("core/catalog.py", "from gpupools.cli import main"),  # core reaching up to the CLI
    ("clouds/aws.py", "from gpupools.autoscaling import karpenter"),  # the cloud asking the autoscaler
    ("idle/report.py", "from gpupools.components import base"),  # the idle report knowing the components
])
def test_a_wrong_way_import_breaks_a_contract(tmp_path, module, wrong):
    shutil.copytree(ROOT / "gpupools", tmp_path / "gpupools", ignore=shutil.ignore_patterns("__pycache__"))
    path = tmp_path / "gpupools" / module
    path.write_text(path.read_text() + f"\n{wrong}\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout


def test_package_inits_hold_only_a_docstring():
    for init in (ROOT / "gpupools").rglob("__init__.py"):
        tree = ast.parse(init.read_text())
        assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant), init
        assert "\n" not in tree.body[0].value.value.strip(), f"{init}: one line"


def test_no_module_is_left_beside_the_capability_folders():
    loose = sorted(p.name for p in (ROOT / "gpupools").glob("*.py") if p.name not in ("__init__.py", "program.py"))
    assert loose == []
