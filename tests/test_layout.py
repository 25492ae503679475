"""The package layout is a rule, not a hope: `lint-imports` checks the contracts in pyproject.toml."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from conftest import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


# lint-imports once per tree, all in one process: its console script calls lint_imports_command with the arguments
# (import-linter 2.17, importlinter/cli.py), which reads the tree's package from the path afresh at each call (the
# graph is built again, --no-cache), so each result is that of `PYTHONPATH=TREE lint-imports` run in TREE; one start of
# the interpreter and import-linter instead of one per tree.
LINT_EACH = """
import contextlib, importlib, io, json, os, sys
from importlinter.cli import lint_imports_command

config, results = sys.argv[1], {}
for tree in sys.argv[2:]:
    os.chdir(tree)
    sys.path.insert(0, tree)
    importlib.invalidate_caches()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = lint_imports_command(["--config", config, "--no-cache"])
        except SystemExit as exc:
            status = exc.code
    sys.path.remove(tree)
    assert "gpupools" not in sys.modules  # read from the files, never imported, so no tree leaves its modules behind
    results[tree] = [status, out.getvalue(), err.getvalue()]
print(json.dumps(results))
"""

WRONG_WAY = [
    ("core/catalog.py", "from gpupools.cli import main"),  # core reaching up to the CLI
    ("clouds/aws/pools.py", "from gpupools.autoscaling import karpenter"),  # the cloud asking the autoscaler
    ("clouds/aws/fabric.py", "from gpupools.clouds.gcp import fabric"),  # one cloud's package reaching into another's
    ("fabric/plan.py", "from gpupools.fabric import gpudirect"),  # an import cycle inside a capability
    ("clouds/gcp/capacity.py", "from gpupools.clouds.gcp import pools"),  # an import cycle inside a cloud's package
    ("idle/report.py", "from gpupools.deploy import base"),  # the idle report knowing the components
]


@pytest.fixture(scope="module")
def lint_imports(tmp_path_factory):
    """lint-imports' verdict (a CompletedProcess) on this tree and on copies of it with one wrong-way import added."""
    trees = {None: ROOT}
    for module, wrong in WRONG_WAY:
        tree = tmp_path_factory.mktemp("wrong-way")
        shutil.copytree(ROOT / "gpupools", tree / "gpupools", ignore=shutil.ignore_patterns("__pycache__"))
        path = tree / "gpupools" / module
        path.write_text(path.read_text() + f"\n{wrong}\n")
        trees[(module, wrong)] = tree
    done = subprocess.run([sys.executable, "-c", LINT_EACH, str(ROOT / "pyproject.toml"), *map(str, trees.values())], capture_output=True,
                          text=True, env=os.environ, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    return {key: subprocess.CompletedProcess(LINT_IMPORTS, *results[str(tree)]) for key, tree in trees.items()}


def test_the_import_contracts_hold(lint_imports):
    result = lint_imports[None]
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" in result.stdout and " 0 broken" in result.stdout


@pytest.mark.parametrize("module, wrong", WRONG_WAY)
def test_a_wrong_way_import_breaks_a_contract(lint_imports, module, wrong):
    result = lint_imports[(module, wrong)]
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout


CLOUD_PACKAGES = sorted(p.parent for p in (ROOT / "gpupools" / "clouds").glob("*/__init__.py"))


def test_package_inits_hold_only_a_docstring():
    for init in (ROOT / "gpupools").rglob("__init__.py"):
        if init.parent in CLOUD_PACKAGES:
            continue
        tree = ast.parse(init.read_text())
        assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant), init
        assert "\n" not in tree.body[0].value.value.strip(), f"{init}: one line"


# --------------------------------------------------------------------------------------------------------------------
# Each cloud a package of the same shape: one module per question, the managed mode beside them


def cloud_init_strays(source: str, package: str) -> list[int]:
    """Lines of a cloud package's __init__ that are more than its Cloud object: the docstring, imports of its own
    modules and of the standard mode's answers, and __all__."""
    own = (f"{package}.", "gpupools.clouds.standard")
    strays = []
    for node in ast.parse(source).body[1:]:
        if isinstance(node, ast.ImportFrom) and (node.module == "__future__" or node.module.startswith(own)):
            continue
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            continue
        strays.append(node.lineno)
    return strays


def test_a_cloud_packages_init_is_its_cloud_object_and_nothing_else():
    assert [p.name for p in CLOUD_PACKAGES] == ["aws", "azure", "gcore", "gcp"]
    for package in CLOUD_PACKAGES:
        assert cloud_init_strays((package / "__init__.py").read_text(), f"gpupools.clouds.{package.name}") == [], package
    # and the check sees a stray line
    assert cloud_init_strays('"""doc."""\nimport json\nX = 1\n', "gpupools.clouds.aws") == [2, 3]


def managed_mode_files() -> dict[str, set[str]]:
    """Each cloud package's managed-mode modules, as the registry resolves them."""
    from gpupools.clouds import registry

    modes: dict[str, set[str]] = {p.name: set() for p in CLOUD_PACKAGES}
    for (cloud, _mode), module in registry.MANAGED.items():
        package, _, name = module.__name__.rpartition(".")
        assert package == f"gpupools.clouds.{cloud}", f"{module.__name__}: a managed mode lives in its cloud's package"
        modes[cloud].add(f"{name}.py")
    return modes


def test_every_cloud_package_has_the_same_modules():
    """A reader who knows clouds/aws/ finds the same file for the same question in every other cloud's package; a
    managed mode is the one module a package may add."""
    modes = managed_mode_files()
    shapes = {p.name: sorted({f.name for f in p.glob("*.py")} - modes[p.name]) for p in CLOUD_PACKAGES}
    expected = ["__init__.py", "capacity.py", "cluster.py", "fabric.py", "health.py", "pools.py", "provider.py", "software.py", "upgrades.py"]
    assert shapes == {name: expected for name in shapes}
    assert {cloud: sorted(files) for cloud, files in modes.items()} == {
        "aws": ["auto_mode.py"], "azure": ["node_auto_provisioning.py"], "gcore": [], "gcp": ["autopilot.py"]}


def test_no_module_of_gpupools_is_too_long_to_read_in_one_sitting():
    """Data tables aside (the catalog and facts are YAML), a module stays under about 700 lines."""
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "gpupools").rglob("*.py") if (n := len(p.read_text().splitlines())) > 720}
    assert long == {}


def test_there_is_one_independence_contract_over_the_cloud_packages():
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    independent = [set(c["modules"]) for c in contracts if c["type"] == "independence"]
    assert {f"gpupools.clouds.{p.name}" for p in CLOUD_PACKAGES} in independent
    assert any(c["type"] == "acyclic_siblings" and c["ancestors"] == ["gpupools"] for c in contracts)


def test_no_module_is_left_beside_the_capability_folders():
    loose = sorted(p.name for p in (ROOT / "gpupools").glob("*.py") if p.name not in ("__init__.py", "program.py"))
    assert loose == []


# --------------------------------------------------------------------------------------------------------------------
# One Cloud object: capabilities ask it, nobody outside the clouds compares a cloud's name

CLOUD_NAMES = {"aws", "gcp", "azure", "gcore"}
# Where a cloud's name may be spelled out and compared: the clouds themselves and the per-cloud Pulumi components.
OWN_CLOUD = ("gpupools/clouds/", "gpupools/deploy/")


def _names_a_cloud(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in CLOUD_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_cloud(e) for e in node.elts)
    return False


def _is_stack(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "stack") or (isinstance(node, ast.Attribute) and node.attr == "stack")


def cloud_name_branches(source: str) -> list[int]:
    """Lines that compare against a cloud's name (`cloud == "aws"`, `cloud in ("gcp", ...)`), or index a mapping spelled
    out by cloud names (`{"aws": ..., "gcp": ...}[cloud]`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and (_names_a_cloud(node.left) or any(_names_a_cloud(c) for c in node.comparators)):
            found.append(node.lineno)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict) and any(
                k is not None and _names_a_cloud(k) for k in node.value.keys):
            found.append(node.lineno)
        elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id.isupper()
              and ((isinstance(node.slice, ast.Name) and node.slice.id == "cloud")
                   or (isinstance(node.slice, ast.Attribute) and node.slice.attr == "cloud"))):
            found.append(node.lineno)  # a table kept by cloud name (`KIND[cloud]`): the Cloud object should say it
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "cloud_module" and node.args
              and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "cloud" and _is_stack(node.args[0].value)):
            found.append(node.lineno)  # re-resolving a stack's cloud: ask stack.target
    return sorted(found)


def test_no_capability_compares_a_cloud_name():
    offenders = []
    for path in sorted([*(ROOT / "gpupools").rglob("*.py"), *(ROOT / "components").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(OWN_CLOUD):
            offenders += [f"{rel}:{line}" for line in cloud_name_branches(path.read_text())]
    assert offenders == [], "ask the stack's Cloud object (stack.target, gpupools/core/cloud.py) instead: " + ", ".join(offenders)


@pytest.mark.parametrize("source", [
    'if stack.cloud == "gcp": pass',
    'x = cloud != "aws"',
    'ok = cloud in ("aws", "azure")',
    'name = {"aws": "EKS", "gcp": "GKE"}[cloud]',
    'module = cloud_module(stack.cloud)',
    'module = cloud_module(self.stack.cloud)',
    'if "azure" == cloud: pass',
    'word = KIND[cloud]',
    'package = SDK_PACKAGES[stack.cloud]',
])
def test_the_cloud_name_check_sees_each_spelling(source):
    assert cloud_name_branches(source) == [1]


@pytest.mark.parametrize("source", ['if installer == "cloud": pass', 'kinds = ("aws", "gcp")', 'cloud = stack.target.NAME',
                                    'catalog.instance("aws", name)',
                                    'facts = providers[cloud]'])
def test_the_cloud_name_check_leaves_data_alone(source):
    assert cloud_name_branches(source) == []


def test_a_stack_resolves_its_cloud_once():
    from gpupools.clouds.registry import cloud_module
    from gpupools.validation.stack import validate_stack

    from tests.conftest import stack_config

    for cloud in ("aws", "azure", "gcp", "gcore"):
        stack = validate_stack(stack_config(cloud))
        assert stack.target is stack.target is cloud_module(cloud) and stack.target.NAME == cloud


def unanswered(module) -> list[str]:
    """The Cloud protocol's members a cloud module lacks; `own_*` are asked only where the service has GPU software of its
    own (OWN_GPU_SOFTWARE)."""
    from gpupools.core.cloud import Cloud

    members = set(Cloud.__annotations__) | {n for n, v in vars(Cloud).items() if not n.startswith("_") and callable(v)}
    if not getattr(module, "OWN_GPU_SOFTWARE", False):
        members -= {"own_mechanism", "own_sharing_change"}
    return sorted(n for n in members if not hasattr(module, n))


def test_every_cloud_object_answers_every_question():
    from gpupools.clouds import registry

    objects = [*registry.MODULES.values(), *registry.MANAGED.values()]
    assert {m.NAME for m in objects} == set(registry.NAMES)
    assert {m.__name__: unanswered(m) for m in objects} == {m.__name__: [] for m in objects}
    # and the check sees a missing answer
    lacking = types.ModuleType("lacking")
    vars(lacking).update({k: v for k, v in vars(registry.MODULES["gcore"]).items() if k != "fabric_refusal"})
    assert unanswered(lacking) == ["fabric_refusal"]


# --------------------------------------------------------------------------------------------------------------------
# The repository's top level, and the component package in components/


def test_the_top_level_holds_the_program_the_stacks_the_policies_and_the_component_package():
    for folder in ("gpupools", "stacks", "policies", "components", "tests"):
        assert (ROOT / folder).is_dir(), folder
    assert (ROOT / "components" / "PulumiPlugin.yaml").is_file() and (ROOT / "components" / "__main__.py").is_file()


# The component package builds on gpupools from above: the CLI is not its business, a cloud SDK only through
# gpupools' components. gpupools itself never imports it (import-linter sees only gpupools; this sees components/).
COMPONENT_PACKAGE_MAY_NOT_IMPORT = ("gpupools.cli", "pulumi_aws", "pulumi_azure_native", "pulumi_gcp")


def imported_modules(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
    return found


def wrong_imports(source: str, forbidden: tuple[str, ...]) -> list[str]:
    return [m for m in imported_modules(source) if any(m == f or m.startswith(f + ".") for f in forbidden)]


def test_the_component_package_imports_one_way():
    offenders = []
    for path in sorted((ROOT / "components").rglob("*.py")):
        offenders += [f"{path.relative_to(ROOT)}: {m}" for m in wrong_imports(path.read_text(), COMPONENT_PACKAGE_MAY_NOT_IMPORT)]
    for path in sorted((ROOT / "gpupools").rglob("*.py")):
        offenders += [f"{path.relative_to(ROOT)}: {m}" for m in wrong_imports(path.read_text(), ("gpupools_components",))]
    assert offenders == []


@pytest.mark.parametrize("source, forbidden", [
    ("from gpupools.cli.main import app", COMPONENT_PACKAGE_MAY_NOT_IMPORT),
    ("import pulumi_aws as aws", COMPONENT_PACKAGE_MAY_NOT_IMPORT),
    ("from gpupools_components.args import Pool", ("gpupools_components",)),
])
def test_the_component_package_import_check_sees_a_wrong_import(source, forbidden):
    assert wrong_imports(source, forbidden) != []
    assert wrong_imports("from gpupools.deploy import platform\nimport pulumi", forbidden) == []
