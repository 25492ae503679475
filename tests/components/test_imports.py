"""What a plan imports: no generated provider module (resources and invokes go by type token, components/wire.py),
reading an existing cluster included."""

from __future__ import annotations

import pytest

from conftest import ROOT
from forkserver import ForkServer

STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.dev-*.yaml"))
SDKS = ("pulumi_aws", "pulumi_gcp", "pulumi_azure_native", "pulumi_random")

# The plan, then the list, then the end the console script has (gpupools.cli.main.exit_now: exit handlers and flushed
# output, without the interpreter's teardown, a fifth of such a process's CPU time, which imports nothing of a plan's).
IMPORTS = ("import sys\n"
           "from gpupools.cli.main import app, exit_now\n")
LIST = ("try:\n"
        "    app(['plan', *sys.argv[1:], '--json'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "sdks = %r\n"
        "print('imported:', ' '.join(sorted(m for m in sys.modules if m.partition('.')[0] in sdks and m.count('.') < 2 and not m.endswith('._utilities'))),"
        " file=sys.stderr)\n"
        "exit_now(0)\n" % (SDKS,))


@pytest.fixture(scope="module")
def plan_process():
    """`python -c IMPORTS+LIST ARGS` in a new process, forked after the imports (tests/forkserver.py): each plan starts
    with what a fresh interpreter has loaded after them, and nothing a plan before it loaded."""
    server = ForkServer(IMPORTS, LIST, ROOT)
    yield lambda *args: server.run(*args, text=True)
    server.close()


@pytest.mark.parametrize("stack", STACKS)
def test_a_plan_imports_no_generated_provider_module(plan_process, stack):
    proc = plan_process("--stack", stack)
    assert proc.returncode == 0, proc.stderr
    # The plan's own warnings go to stderr too (dev-gcore: its region is not checked offline); the list is the last line.
    assert proc.stderr.splitlines()[-1].split() == ["imported:"], proc.stderr


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_an_existing_cluster_plan_imports_no_generated_provider_module(plan_process, cloud, tmp_path):
    from conftest import stack_config, write_stack

    config = stack_config(cloud)
    config["gpupools:cluster"] = {**config["gpupools:cluster"], "create": False}
    path = write_stack(tmp_path, config)
    proc = plan_process("--config", str(path))
    assert proc.returncode == 0, proc.stderr
    # The plan's own warnings go to stderr too (dev-gcore: its region is not checked offline); the list is the last line.
    assert proc.stderr.splitlines()[-1].split() == ["imported:"], proc.stderr
