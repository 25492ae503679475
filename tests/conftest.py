"""Shared factories: a valid stack per cloud, changed one field at a time by each test."""

from __future__ import annotations

import copy
import functools
import gc
import os
import pickle
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------------------------------
# yaml.safe_load, kept per text for the test run. PyYAML's SafeLoader parses in Python: a pinned CRD takes most of a
# second, a chart's values.yaml tens of milliseconds, and the tests read the same upstream files again and again (a
# fifth of the CPU time of the capability tests went there). Long texts (the upstream files; what gpupools parses while
# it runs is short) are parsed by LibYAML's CSafeLoader where PyYAML has it: the same SafeConstructor and Resolver on
# LibYAML's parser, about ten times faster, and the same data for every YAML file of this checkout
# (tests/test_yaml_loaders.py compares them). The same text parses to the same data, so each call gets an unpickled copy
# of the first parse, its own to change (pickle keeps anchors' shared objects shared, as deepcopy does, at a third of
# deepcopy's cost). Short texts and streams go to PyYAML's safe_load as before, and a text that does not parse raises
# every time (lru_cache keeps no exception).
_SAFE_LOAD = yaml.safe_load
_SAFE_LOAD_ALL = yaml.safe_load_all
_KEPT_FROM = 4096  # characters
LONG_TEXT_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=64)
def _parsed_once(text: str) -> bytes:
    return pickle.dumps(yaml.load(text, Loader=LONG_TEXT_LOADER), protocol=pickle.HIGHEST_PROTOCOL)


def _safe_load(stream):
    if isinstance(stream, str) and len(stream) >= _KEPT_FROM:
        return pickle.loads(_parsed_once(stream))
    return _SAFE_LOAD(stream)


def _safe_load_all(stream):
    if isinstance(stream, str) and len(stream) >= _KEPT_FROM:
        return yaml.load_all(stream, Loader=LONG_TEXT_LOADER)
    return _SAFE_LOAD_ALL(stream)


_safe_load_all.__doc__ = _SAFE_LOAD_ALL.__doc__
yaml.safe_load_all = _safe_load_all
_safe_load.__doc__ = _SAFE_LOAD.__doc__
yaml.safe_load = _safe_load




# Under xdist every worker collects every test file, and pytest rewrites each file's asserts as it imports it unless a
# rewritten copy is cached beside it (`__pycache__/*-pytest-*.pyc`, written where bytecode may be written; ./dev test
# lets it). On a fresh checkout the workers would each rewrite all of them, at the same time: a tenth of a second of CPU
# per file, per worker. The controller rewrites them into that cache first, once, on every core, before the workers
# start (pytest_sessionstart below runs before xdist's own, which is trylast), with pytest's own functions (pytest 9.2,
# _pytest/assertion/rewrite.py, AssertionRewritingHook.exec_module); the workers then read the cache as a second run
# would. Only a cache is written: if pytest's internals differ, nothing is done and each worker rewrites as before.
def _rewrite_test_files_once(config) -> None:
    if hasattr(config, "workerinput") or getattr(config.option, "dist", "no") == "no" or sys.dont_write_bytecode:
        return
    if config.getoption("assertmode", "rewrite") != "rewrite":
        return
    import fnmatch
    import multiprocessing

    patterns = config.getini("python_files")
    files = sorted((str(p) for p in (ROOT / "tests").rglob("*.py") if "__pycache__" not in p.parts
                    and (p.name == "conftest.py" or any(fnmatch.fnmatch(p.name, pat) for pat in patterns))),
                   key=lambda f: -os.path.getsize(f))
    try:
        from _pytest.assertion import rewrite

        missing = [f for f in files if rewrite._read_pyc(Path(f), _rewritten_pyc(rewrite, Path(f))) is None]
        if not missing:
            return
        _REWRITE_CONFIG[0] = config
        with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1) as pool:
            pool.map(_rewrite_into_cache, missing, chunksize=1)
    except Exception:  # noqa: BLE001 - an optimization only: the workers rewrite what is not cached
        return
    finally:
        _REWRITE_CONFIG[0] = None


_REWRITE_CONFIG: list = [None]


# pytest keeps the temporary folders of the last few runs (tmp_path_retention_count) and deletes older ones when the
# session ends (pytest 9.2, _pytest/pathlib.py make_numbered_dir_with_cleanup registers cleanup_numbered_dir). A run
# of this suite leaves about 7,000 files (renders, Prometheus blocks, large plans), and deleting the oldest run's took
# the last 2-3 s of every run, after every test had ended. The controller starts that same deletion when the session
# starts, beside the workers, and waits for it at the end, where pytest then finds nothing left to delete. The folders
# kept are the same: pytest's own function, with its own arguments, on the same root. The same thread imports what
# hypothesis's plugin imports in the controller's end-of-run summary (_hypothesis_pytestplugin.py,
# pytest_terminal_summary: hypothesis.internal.observability, hence hypothesis itself), 0.6 s that also came after the
# last test.
_OLD_RUNS: list = []


def _old_runs_deleted(root: Path, keep: int, dead_before: float) -> None:
    from _pytest.pathlib import cleanup_numbered_dir

    cleanup_numbered_dir(root, "pytest-", keep, dead_before)
    if "_hypothesis_pytestplugin" in sys.modules:
        import hypothesis.internal.observability  # noqa: F401


def _delete_old_runs_early(config) -> None:
    if hasattr(config, "workerinput") or config.option.basetemp or config.getini("tmp_path_retention_policy") == "none":
        return
    import threading

    try:
        from _pytest.pathlib import LOCK_TIMEOUT

        basetemp = config._tmp_path_factory.getbasetemp()
        keep = int(config.getini("tmp_path_retention_count"))
        dead_before = basetemp.stat().st_mtime - LOCK_TIMEOUT
        worker = threading.Thread(target=_old_runs_deleted, args=(basetemp.parent, keep, dead_before), daemon=True)
        worker.start()
        _OLD_RUNS.append(worker)
    except Exception:  # noqa: BLE001 - an optimization only: pytest deletes them at the end as before
        return


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    for worker in _OLD_RUNS:
        worker.join()


def _rewritten_pyc(rewrite, path: Path) -> Path:
    return rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)


def _rewrite_into_cache(file: str) -> None:
    from _pytest.assertion import rewrite

    config, path = _REWRITE_CONFIG[0], Path(file)
    pyc = _rewritten_pyc(rewrite, path)
    if rewrite.try_makedirs(pyc.parent):
        source_hash, code = rewrite._rewrite_test(path, config)
        rewrite._write_pyc(config.stash[rewrite.assertstate_key], code, source_hash, pyc)


# What a test process holds after collection (imported modules, the parametrize tables, the kept parses above) lives to
# its end; the cyclic collector's full passes walked it all again and again. Frozen once collected, it is left out of them
# (gc.freeze, CPython 3.7+). The same holds for what each test file leaves alive when it ends (the kept plans and
# parses, session fixtures, compiled CEL and schemas): once the file's own fixtures are torn down, what it left as
# garbage is collected and what survives is frozen in turn, so the full passes (and pytest's own at the end of the run,
# _pytest/unraisableexception.py) walk only what the current file made.
@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    kept = sys.modules.get("kept")
    if kept is not None:
        kept.UNCACHED[0] = "monkeypatch" in getattr(item, "fixturenames", ())
    try:
        return (yield)
    finally:
        if kept is not None:
            kept.UNCACHED[0] = False
        if nextitem is None or nextitem.path != item.path:
            gc.collect()
            gc.freeze()


# typer's CliRunner builds the click command of the Typer app again at every invoke (typer 0.28.0, typer/testing.py,
# CliRunner.invoke: `cli = _get_command(app)`), reading every command function's signature and type hints: that was
# two fifths of what a refused stack costs through the CLI. A click command is made to be invoked many times (click
# keeps no state of a run in it), so each app's command is built once, and again when commands or groups are added.
try:
    import typer.testing as _typer_testing
except ImportError:  # the test extra brings typer with gpupools
    _typer_testing = None

if _typer_testing is not None and hasattr(_typer_testing, "_get_command") and not hasattr(_typer_testing._get_command, "kept"):
    _GET_COMMAND = _typer_testing._get_command
    _COMMANDS: dict[tuple, tuple] = {}

    def _get_command(app):
        key = (id(app), id(app.registered_callback), id(app.info.callback), tuple(map(id, app.registered_commands)),
               tuple(map(id, app.registered_groups)))
        if key not in _COMMANDS:
            _COMMANDS[key] = (app, _GET_COMMAND(app))  # the app is kept, so its id is not reused
        return _COMMANDS[key][1]

    _get_command.kept = True  # once, also when this file is imported again as `tests.conftest`
    _typer_testing._get_command = _get_command


# --------------------------------------------------------------------------------------------------------------------
# `--dist loadfile` (./dev test) hands each worker a whole file at a time, by default the files with the most tests
# first (pytest-xdist 3.8, xdist/scheduler/loadscope.py, LoadScopeScheduling.schedule). Some of the costliest files
# have few tests (a checkov scan, Prometheus servers, the CLI in new processes, the largest plans), and one of them
# handed out last keeps one core busy while the other idles. The files below go first, costliest first, by the seconds
# each took on its worker in a run of the suite (measured; approximate, waits included); every other file counts a
# tenth of a second per test. A new slow file belongs here; a stale number only moves a file in the queue.
FILE_SECONDS = {
    "tests/monitoring/test_rules.py": 23, "tests/cli/test_exit.py": 23, "tests/idle/test_idle_report.py": 22,
    "tests/stack/test_no_echo.py": 15, "tests/cli/test_manifest_scan.py": 14, "tests/charts/test_helm_render.py": 13,
    "tests/cli/test_against_large.py": 12, "tests/components/test_wire.py": 7, "tests/fabric/test_fabric.py": 7,
    "tests/cli/test_cloud_extras.py": 7, "tests/cli/test_against_size.py": 6, "tests/idle/test_prometheus_auth.py": 6,
    "tests/clouds/test_gcore_api.py": 6, "tests/policies/test_pack_config_guard.py": 5,
    "tests/cli/test_workflow.py": 5, "tests/core/test_vgpu.py": 5, "tests/components/test_component_fuzz.py": 5,
    "tests/components/test_component_package.py": 4, "tests/idle/test_hostile_prometheus.py": 4,
    "tests/fleet/test_fleet.py": 4, "tests/upgrades/test_upgrades.py": 4, "tests/policies/test_check.py": 4,
    "tests/cli/test_plan_runner.py": 3, "tests/cli/test_previous_plan_shapes.py": 3,
    "tests/cli/test_render_output.py": 3, "tests/components/test_components.py": 3, "tests/cli/test_previous_plan_skim.py": 3,
}


def _file_seconds(path: str, tests: int) -> float:
    return FILE_SECONDS.get(path, 0.1 * tests)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class CostliestFileFirst(LoadFileScheduling):
        """LoadFileScheduling with its queue of files ordered by FILE_SECONDS once every worker has collected."""

        ordered = False

        def _assign_work_unit(self, node):
            if not self.ordered:
                self.ordered = True
                units = sorted(self.workqueue.items(), key=lambda unit: -_file_seconds(unit[0], len(unit[1])))
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return CostliestFileFirst(config, log)


REFERENCE = Path(__file__).resolve().parent / "reference"


def reference_dir() -> Path:
    """Upstream files (chart values, CRDs, MIG configs) the tests check against, copied byte-for-byte into
    tests/reference/ with their sources in its SOURCES.md, so that a plain clone runs every check."""
    return REFERENCE


def needs_reference() -> Path:
    """The reference folder; it is part of the repository, so a missing one fails the test instead of skipping it."""
    if not REFERENCE.is_dir():
        pytest.fail(f"{REFERENCE} is missing: the upstream files the tests check against belong to the repository")
    return REFERENCE


BASE = {
    "aws": {
        "aws:region": "eu-central-1",
        "gpupools:cloud": "aws",
        "gpupools:cluster": {"name": "ml-test"},
        "gpupools:pools": [{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3}],
    },
    "azure": {
        "azure-native:location": "westeurope",
        "gpupools:cloud": "azure",
        "gpupools:cluster": {"name": "ml-test", "resourceGroup": "rg-ml"},
        "gpupools:pools": [{"name": "infer", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 3}],
    },
    "gcp": {
        "gcp:project": "proj-test",
        "gcp:region": "us-central1",
        "gpupools:cloud": "gcp",
        "gpupools:cluster": {"name": "ml-test", "location": "us-central1"},
        "gpupools:pools": [{"name": "infer", "instanceType": "g2-standard-8", "maxNodes": 3}],
    },
    "gcore": {
        "gcore:projectId": "1234567",
        "gcore:regionId": "76",
        "gpupools:cloud": "gcore",
        "gpupools:cluster": {"name": "ml-test", "keypair": "ml-admins"},
        "gpupools:pools": [{"name": "infer", "instanceType": "g3-ai-32-192-1500-l40s-48-1", "minNodes": 1, "maxNodes": 3}],
    },
}


class TooSlow(Exception):
    """Raised by `too_slow`, the SIGALRM handler of the tests that bound a step's time."""


def too_slow(*_):
    raise TooSlow


def least_cpu_seconds(paths: list[Path], run, runs: int = 5, seconds: float = 30.0) -> list[float]:
    """The least CPU time (not wall time: other processes on the machine do not count) of `runs` calls of `run` on
    each of `paths`, taken in turn so that each meets the same machine; a call past `seconds` fails the test instead
    of running on (a quadratic step takes minutes or hours at the sizes the linear-time tests use)."""
    import signal
    import time

    best = [float("inf")] * len(paths)
    previous = signal.signal(signal.SIGALRM, too_slow)
    try:
        for _ in range(runs):
            for i, path in enumerate(paths):
                signal.setitimer(signal.ITIMER_REAL, seconds)
                started = time.process_time()
                try:
                    run(path)
                except TooSlow:
                    pytest.fail(f"{path.name}: more than {seconds:.0f} s")
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                best[i] = min(best[i], time.process_time() - started)
    finally:
        signal.signal(signal.SIGALRM, previous)
    return best


def stack_config(cloud: str = "aws", /, pools: list[dict] | None = None, **gpupools_keys) -> dict:
    """A valid raw `config:` mapping; keyword arguments replace `gpupools:<key>` entries."""
    config = copy.deepcopy(BASE[cloud])
    if pools is not None:
        config["gpupools:pools"] = pools
    for key, value in gpupools_keys.items():
        config[f"gpupools:{key}"] = value
    return config


def config_problems(config: dict) -> list:
    """The problems validation reports for an invalid stack, each checked to be one line."""
    from gpupools.stack.errors import ConfigError
    from gpupools.validation.stack import validate_stack

    with pytest.raises(ConfigError) as caught:
        validate_stack(config)
    assert all("\n" not in str(p) for p in caught.value.problems)
    return caught.value.problems


def write_stack(tmp_path: Path, config: dict, name: str = "test") -> Path:
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return path


@pytest.fixture
def stack_file(tmp_path):
    def make(config: dict, name: str = "test") -> Path:
        return write_stack(tmp_path, config, name)
    return make


def plan_of(config: dict, stack: str = "test"):
    """Run the real program under the mock engine, as `gpupools plan` does."""
    from gpupools.validation.stack import validate_stack
    from gpupools.cli.planrun import run_program

    validate_stack(config)  # the CLI validates first; a test stack must be valid too
    return run_program(config, stack)


POOL_RESOURCE = {"aws": "aws:eks/nodeGroup:NodeGroup", "azure": "azure-native:containerservice:AgentPool", "gcp": "gcp:container/nodePool:NodePool"}


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """A process that runs tests keeps what tests/kept.py keeps, from before collection (the charts' tests plan at
    collection). xdist's controller (its `dsession` plugin, registered in xdist's own pytest_configure) runs none."""
    if config.pluginmanager.getplugin("dsession") is None:
        import kept  # noqa: F401


def pytest_sessionstart(session):
    """CI sets GPUPOOLS_REQUIRE_PROMETHEUS so that the promtool and Prometheus tests can never be skipped there; under
    xdist, the test files' asserts are rewritten once, before the workers start."""
    import shutil

    if os.environ.get("GPUPOOLS_REQUIRE_PROMETHEUS") and not (shutil.which("promtool") and shutil.which("prometheus")):
        raise pytest.UsageError("GPUPOOLS_REQUIRE_PROMETHEUS is set, but promtool and prometheus are not installed")
    _rewrite_test_files_once(session.config)
    _delete_old_runs_early(session.config)


def pytest_terminal_summary(terminalreporter):
    """Skipped Prometheus tests get one plain line saying how to run them, not only a place in the skip summary."""
    reasons = [r.longrepr[2] for r in terminalreporter.stats.get("skipped", []) if isinstance(r.longrepr, tuple)]
    skipped = sum(1 for reason in reasons if any(tool in reason for tool in ("prometheus", "promtool", "amtool")) and "not installed" in reason)
    if skipped:
        terminalreporter.write_line(f"{skipped} Prometheus test{'s' if skipped > 1 else ''} skipped: promtool, prometheus or amtool is not installed; to run them: "
                                    f"apt-get install prometheus prometheus-alertmanager, then ./dev test again (CI's bash .ci/run does both)")


def tree_paths(value, prefix=()):
    """Every path into a tree of dicts and lists, the root's empty path first (keys and list indexes as they are)."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from tree_paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from tree_paths(child, (*prefix, index))


def value_paths(values: dict, free_form: tuple[str, ...] = (), prefix: tuple = ()):
    """Every key path we set in Helm values, not descending into maps whose keys are data (`free_form`)."""
    for key, value in values.items():
        path = prefix + (key,)
        yield path
        if isinstance(value, dict) and key not in free_form:
            yield from value_paths(value, free_form, path)


def has_path(upstream: dict, path: tuple) -> bool:
    node = upstream
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


# --------------------------------------------------------------------------------------------------------------------
# CEL, as the API server evaluates it: admission policies and the validation rules of CRDs


def cel_value(expression: str, activation: dict):
    """Evaluate one CEL expression (cel-python) with plain JSON-like data bound to the activation's names. An evaluation
    depends on nothing else, so each (expression, activation) is evaluated once per test run and later calls get a
    copy of its value (cel-python takes seconds on Karpenter's pairwise rules over a node class's interfaces); an
    activation that is not plain JSON is evaluated every time."""
    import json

    celpy = pytest.importorskip("celpy")
    try:
        key = (expression, json.dumps(activation, sort_keys=True, allow_nan=False))
    except (TypeError, ValueError):
        return _cel_program(expression).evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()})
    if key not in _CEL_VALUES:
        _CEL_VALUES[key] = _cel_program(expression).evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()})
    return copy.deepcopy(_CEL_VALUES[key])


_CEL_VALUES: dict = {}


@functools.lru_cache(maxsize=None)
def _cel_program(expression: str):
    """An expression parsed once per test run: parsing takes ten times what an evaluation does, and the tests evaluate
    the same rules on many objects. The interpreted program keeps nothing of an evaluation (cel-python 0.5,
    celpy/__init__.py, InterpretedRunner.evaluate: a new Evaluator over the parsed tree at each call); an expression
    that does not parse raises every time (lru_cache keeps no exception)."""
    import celpy

    env = celpy.Environment()
    return env.program(env.compile(expression))


def admission_denials(policy: dict, obj: dict, kind: str) -> list[str]:
    """The messages a ValidatingAdmissionPolicy answers a CREATE of `obj` (of `kind`) with; empty means admitted."""
    activation: dict = {"object": obj, "request": {"kind": {"kind": kind}, "operation": "CREATE"}, "variables": {}}
    for variable in policy["spec"].get("variables", []):
        value = cel_value(variable["expression"], activation)
        activation["variables"][variable["name"]] = _plain_cel(value)
    return [v["message"] for v in policy["spec"]["validations"] if not bool(cel_value(v["expression"], activation))]


def _plain_cel(value):
    """Back from celpy's types to plain data, so a variable can be bound into the next expression."""
    import json

    celpy = pytest.importorskip("celpy")
    return json.loads(json.dumps(value, cls=celpy.CELJSONEncoder))


def crd_rule_failures(obj, schema: dict, path: str = "") -> list[str]:
    """Every `x-kubernetes-validations` rule of a CRD schema that `obj` breaks (transition rules, which need the
    old object, are skipped)."""
    failures = []
    for rule in schema.get("x-kubernetes-validations", []):
        if "oldSelf" in rule["rule"]:
            continue
        if not bool(cel_value(rule["rule"], {"self": obj})):
            failures.append(f"{path or '/'}: {rule.get('message', rule['rule'])}")
    if isinstance(obj, dict):
        for key, value in obj.items():
            sub = schema.get("properties", {}).get(key) or (schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else None)
            if sub:
                failures += crd_rule_failures(value, sub, f"{path}/{key}")
    elif isinstance(obj, list) and "items" in schema:
        for i, value in enumerate(obj):
            failures += crd_rule_failures(value, schema["items"], f"{path}/{i}")
    return failures


def prometheus_operator_schema(ref: Path, plural: str) -> dict:
    """A pinned Prometheus Operator CRD's v1 schema, e.g. `servicemonitors` (its YAML uses the `=` value tag)."""

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))
    crd = yaml.load((ref / "helm-charts" / "crds" / f"crd-{plural}.yaml").read_text(), Loader=Loader)
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1")


def service_monitor_schema(ref: Path) -> dict:
    return prometheus_operator_schema(ref, "servicemonitors")