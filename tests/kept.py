"""What the tests keep for the test run, in a test process: jsonschema's metaschema checks, kubernetes-validate's
schema files and gpupools' plans, each computed once. tests/conftest.py imports this module in every process that
runs tests (an xdist worker, or pytest without xdist) before collection; the xdist controller runs none and does not
import it, nor what it imports (the program, about half a second before the workers could start)."""

from __future__ import annotations

import functools
import os

# jsonschema.validate, with each schema checked against its metaschema once per test run. The function checks the
# schema at every call before it validates the instance (jsonschema 4.26.0, jsonschema/validators.py, validate), and
# the tests validate many objects against the same pinned CRD schemas: that check was a tenth of their CPU time. Below
# is the same function body; a schema that fails the check fails it at every call (only schemas that pass are kept).
try:
    import jsonschema
except ImportError:  # the test extra brings it; without it the tests that need it skip (pytest.importorskip)
    jsonschema = None

if jsonschema is not None:
    _SCHEMAS_CHECKED: set = set()

    def _validate(instance, schema, cls=None, *args, **kwargs):
        import json

        if cls is None:
            cls = jsonschema.validators.validator_for(schema)
        key = (cls, json.dumps(schema, sort_keys=True, default=repr))
        if key not in _SCHEMAS_CHECKED:
            cls.check_schema(schema)
            _SCHEMAS_CHECKED.add(key)
        validator = cls(schema, *args, **kwargs)
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error

    _validate.__doc__ = jsonschema.validate.__doc__
    jsonschema.validate = _validate


# kubernetes-validate reads the JSON schema of the object's kind and all of its `_definitions.json` (megabytes) from
# its package at every validate() (kubernetes-validate 1.37.0, kubernetes_validate/utils.py, validate and
# schema_contents), and only reads them: each file is read once per test run. A file that is missing raises every time.
try:
    import kubernetes_validate.utils as _kubernetes_validate
except ImportError:
    _kubernetes_validate = None

if _kubernetes_validate is not None and hasattr(_kubernetes_validate, "schema_contents"):
    _kubernetes_validate.schema_contents = functools.lru_cache(maxsize=None)(_kubernetes_validate.schema_contents)


# gpupools.cli.planrun.run_program, kept per (stack config, stack name, environment) for the test run. Many tests plan
# the same stacks (the example stacks through the CLI, `plan --json` then `plan --against` of one file, the charts'
# stacks at collection), and a plan is the costliest step of most tests. The program is deterministic in these
# inputs, so each later call gets an unpickled copy of the first plan, its own to change. The config is keyed in its own
# order: the program follows the order of its mappings (a team's quotas order its landing rows). Not kept: a run of another
# program, a config that is not plain JSON, a run that raises (it raises every time), and every run inside a test
# that uses `monkeypatch` (it may have patched what the program reads). Tests that import run_program, and the CLI,
# which imports it when it plans, get this one; `PLAN_RUNS` counts the programs really run.
import gpupools.cli.planrun as _planrun

_RUN_PROGRAM = _planrun.run_program
_PLANS: dict[tuple, bytes] = {}
PLAN_RUNS = {"run": 0, "kept": 0}
UNCACHED = [False]  # set while a test that uses monkeypatch runs (tests/conftest.py)


def _environment() -> tuple:
    """The environment a plan may read, without PYTEST_CURRENT_TEST, which pytest sets to each test's name and phase
    (and the program never reads): with it in the key, no plan was ever kept from one test for the next."""
    return tuple(sorted((k, v) for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"))


@functools.wraps(_RUN_PROGRAM)
def _run_program(config, stack, program=None):
    import json
    import pickle

    key = None
    if program is None and not UNCACHED[0]:
        try:
            key = (json.dumps(config, allow_nan=False), stack, _environment())
        except (TypeError, ValueError):
            key = None
    if key is not None and key in _PLANS:
        PLAN_RUNS["kept"] += 1
        return pickle.loads(_PLANS[key])
    PLAN_RUNS["run"] += 1
    plan = _RUN_PROGRAM(config, stack, program)
    if key is not None:
        try:
            _PLANS[key] = pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # a plan holding something pickle cannot copy is simply not kept
            pass
    return plan


_planrun.run_program = _run_program
