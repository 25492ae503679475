"""The command ends without interpreter teardown (gpupools.cli.main.exit_now) and loses nothing by it: every command's
status, stdout, stderr and files are those of the same command run in-process, where the process does not end."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from gpupools.cli.main import app, exit_status

STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.dev-*.yaml"))


# What the console script runs, with this checkout's package first on the path (the script's own may be another's).
CONSOLE_SCRIPT = "import sys; sys.argv[0] = 'gpupools'; from gpupools.cli.main import main; main()"


def process(*args: str, stdout=subprocess.PIPE, code: str = CONSOLE_SCRIPT) -> subprocess.CompletedProcess:
    """`gpupools ARGS` as its console script runs it (or CODE, which calls main itself), output as bytes."""
    command = [sys.executable, "-c", code, *args]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # block-buffered, as in a user's shell
    return subprocess.run(command, cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE, env=env, timeout=300)


def in_process(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False, prog_name="gpupools")


# The provider SDK modules a process imported, listed on stderr by an exit handler registered before the console script
# runs: the console script runs the exit handlers as it ends (gpupools.cli.main.exit_now), so the listing is stderr's
# last line and everything before it is the command's own.
SDKS = ("pulumi_aws", "pulumi_gcp", "pulumi_azure_native", "pulumi_random")
LISTING = ("import atexit, sys\n"
           "def listing(sdks=%r):\n"
           "    print('imported:', ' '.join(sorted(m for m in sys.modules if m.partition('.')[0] in sdks and m.count('.') < 2 "
           "and not m.endswith('._utilities'))), file=sys.stderr)\n"
           "atexit.register(listing)\n" % (SDKS,))


@functools.cache
def example_plan(stack: str) -> tuple[subprocess.CompletedProcess, str, str]:
    """`gpupools plan --stack STACK --json` as the console script runs it, once per stack for the two tests below:
    (the process, its stderr without the listing, the listing)."""
    proc = process("plan", "--stack", stack, "--json", code=LISTING + CONSOLE_SCRIPT)
    *own, listing = proc.stderr.decode().splitlines(keepends=True) or [""]
    return proc, "".join(own), listing


@pytest.mark.parametrize("stack", STACKS)
def test_plan_json_of_every_example_stack_is_what_the_command_computes(stack):
    (proc, stderr, _), same = example_plan(stack), in_process("plan", "--stack", stack, "--json")
    assert proc.stdout == same.stdout_bytes and len(proc.stdout) > 10_000
    # stderr holds the plan's warnings and nothing else (dev-gcore: its region is not checked offline).
    warnings = "".join(f"warning: {w}\n" for w in json.loads(proc.stdout).get("warnings", []))
    assert (proc.returncode, stderr) == (same.exit_code, same.stderr) == (0, warnings)


@pytest.mark.parametrize("stack", STACKS)
def test_a_plan_imports_no_generated_provider_module(stack):
    """What a plan imports: no generated provider module (resources and invokes go by type token, components/wire.py);
    tests/components/test_imports.py checks the same of a plan that reads an existing cluster."""
    proc, stderr, listing = example_plan(stack)
    assert proc.returncode == 0, stderr
    assert listing.split() == ["imported:"], stderr + listing


@pytest.mark.parametrize("args, status", [
    (("plan", "--stack", "dev-azure"), 0),
    (("catalog", "--cloud", "gcp"), 0),
    (("workload", "--stack", "dev-aws", "--pool", "infer"), 0),
    (("check", "--stack", "dev-gcp"), 0),
    (("check", "--stack", "dev-gcp", "--policy-config", "BUDGET"), 1),  # fleet-budget, mandatory, violated
    (("plan", "--stack", "nope"), 2),
    (("workload", "--stack", "dev-aws", "--pool", "infer", "--units", "0"), 2),
    (("catalog", "--cloud", "nope"), 2),
    ((), 2),  # no command: the help, and usage status
])
def test_status_and_output_are_kept(args, status, tmp_path):
    budget = tmp_path / "budget.json"
    budget.write_text('{"fleet-budget": {"maxGpus": 1}}')
    args = tuple(str(budget) if a == "BUDGET" else a for a in args)
    proc, same = process(*args), in_process(*args)
    assert proc.returncode == same.exit_code == status
    assert proc.stdout == same.stdout_bytes
    assert proc.stderr.decode() == same.stderr
    assert proc.stdout if status != 2 or not args else proc.stderr.startswith(b"error: ")


def test_render_writes_every_file(tmp_path):
    proc, same = process("render", "--stack", "dev-aws", "--out", str(tmp_path / "a")), in_process("render", "--stack", "dev-aws", "--out", str(tmp_path / "b"))
    assert proc.returncode == same.exit_code == 0
    assert proc.stdout.decode() == same.stdout.replace(str(tmp_path / "b"), str(tmp_path / "a"))
    written = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert written == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file()) and len(written) > 10
    assert all((tmp_path / "a" / p).read_bytes() == (tmp_path / "b" / p).read_bytes() for p in written)


def test_a_closed_stdout_pipe_ends_with_status_1_and_no_traceback():
    read, write = os.pipe()
    os.close(read)  # nobody reads: the first write fails with EPIPE
    try:
        proc = process("plan", "--stack", "dev-aws", "--json", stdout=write)
    finally:
        os.close(write)
    assert proc.returncode == 1
    assert proc.stderr == b""


def test_a_closed_stdout_ends_as_it_would_without_the_fast_exit():
    proc = subprocess.run([sys.executable, "-c", CONSOLE_SCRIPT, "catalog"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, timeout=300, pass_fds=(), close_fds=True,
                          preexec_fn=lambda: os.close(1))
    assert (proc.returncode, proc.stderr) == (0, b"")


# A global whose finalizer speaks, then the command: teardown clears the globals of __main__, which runs the finalizer.
# argv[1]: "exit" ends with sys.exit instead (teardown, as the witness shows), "thread" leaves a thread running.
TEARDOWN = ("import os, sys, threading, time\n"
            "class Speaks:\n"
            "    def __del__(self, write=os.write): write(2, b'torn down\\n')\n"
            "witness = Speaks()\n"
            "how = sys.argv.pop(1)\n"
            "if how == 'thread':\n"
            "    threading.Thread(target=lambda: (time.sleep(0.5), print('thread finished', file=sys.stderr))).start()\n"
            "sys.argv[0] = 'gpupools'\n"
            "from gpupools.cli.main import main\n"
            "sys.exit(0) if how == 'exit' else main()\n")


def test_the_process_ends_without_teardown():
    assert process("exit", "catalog", code=TEARDOWN).stderr == b"torn down\n"
    proc = process("main", "catalog", "--cloud", "aws", code=TEARDOWN)
    assert proc.returncode == 0 and b"p5.48xlarge" in proc.stdout
    assert proc.stderr == b""


def test_a_thread_still_running_is_waited_for():
    proc = process("thread", "catalog", "--cloud", "aws", code=TEARDOWN)
    assert proc.returncode == 0 and b"p5.48xlarge" in proc.stdout
    assert proc.stderr.startswith(b"thread finished\n")


def test_exit_status_is_what_sys_exit_gives(capsys):
    assert [exit_status(None), exit_status(0), exit_status(2), exit_status(130)] == [0, 0, 2, 130]
    assert exit_status("boom") == 1
    assert capsys.readouterr().err == "boom\n"


def test_a_command_runs_without_the_cyclic_collector_and_idle_turns_it_back_on(monkeypatch):
    """The console script turns the collector off for the command (what it makes lives until it ends); `idle`, which
    may question Prometheus for minutes, runs with it on."""
    import gc

    from gpupools.cli import main as cli

    seen: list[bool] = []
    statuses: list[int] = []
    monkeypatch.setattr(cli, "app", lambda: seen.append(gc.isenabled()))
    monkeypatch.setattr(cli, "exit_now", lambda status: statuses.append(status))
    try:
        assert gc.isenabled()
        cli.main()
        assert seen == [False] and statuses == []
        assert not gc.isenabled()
        result = in_process("idle", "--prometheus", "http://127.0.0.1:9", "--window", "not-a-window")
        assert result.exit_code == 2 and gc.isenabled()
    finally:
        gc.enable()


def test_the_command_line_reaches_a_command_without_building_validators():
    """Reading the command line costs no pydantic: typer 0.29 builds a TypeAdapter for every option of the command at
    each run (about 30 ms of each plan), so pyproject.toml keeps typer below it. The stack's own models come after."""
    code = ("import sys\n"
            "from gpupools.cli import main as cli\n"
            "def load(stack, config, **_):\n"
            "    print(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic'))\n"
            "    raise SystemExit(0)\n"
            "cli.load = load\n"
            "cli.app(['plan', '--stack', 'dev-aws'])\n")
    proc = process(code=code)
    assert proc.returncode == 0 and proc.stdout.strip() == b"[]", proc.stderr


def test_the_catalog_and_the_json_plan_import_only_what_they_print():
    """`catalog` reads the catalog without the plan's machinery (the stack models, the plan runner, Pulumi), and the
    plan report leaves rich, which draws only the human tables, to the commands that print them (`plan --json` uses
    its warnings): each was a fifth to a third of its command's start."""
    code = ("import sys\n"
            "from gpupools.cli import main as cli\n"
            "cli.app(['catalog', '--cloud', 'aws'], standalone_mode=False)\n"
            "plan = ('gpupools.cli.planreport', 'gpupools.cli.planrun', 'gpupools.stack.config', 'pulumi', 'pydantic')\n"
            "print('catalog:', *sorted(m for m in plan if m in sys.modules), 'rich' in sys.modules)\n"
            "for name in [m for m in sys.modules if m.split('.')[0] == 'rich' or m == 'gpupools.cli.planreport']:\n"
            "    del sys.modules[name]\n"
            "import gpupools.cli.planreport\n"
            "print('report:', sorted(m for m in sys.modules if m.split('.')[0] == 'rich'))\n")
    proc = process(code=code)
    *table, catalog, report = proc.stdout.decode().splitlines()
    assert proc.returncode == 0 and any("p5.48xlarge" in line for line in table), proc.stderr
    assert (catalog, report) == ("catalog: True", "report: []")
