"""What a plan that reads an existing cluster imports: no generated provider module (resources and invokes go by type
token, components/wire.py). Every example stack's plan is checked the same way in tests/cli/test_exit.py, by the
process that test starts for it anyway."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT

SDKS = ("pulumi_aws", "pulumi_gcp", "pulumi_azure_native", "pulumi_random")

# The plan, then the list, then the end the console script has (gpupools.cli.main.exit_now: exit handlers and flushed
# output, without the interpreter's teardown, a fifth of such a process's CPU time, which imports nothing of a plan's).
LIST = ("import sys\n"
        "from gpupools.cli.main import app, exit_now\n"
        "try:\n"
        "    app(['plan', '--stack', sys.argv[1], '--json'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "sdks = %r\n"
        "print('imported:', ' '.join(sorted(m for m in sys.modules if m.partition('.')[0] in sdks and m.count('.') < 2 and not m.endswith('._utilities'))),"
        " file=sys.stderr)\n"
        "exit_now(0)\n" % (SDKS,))


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_an_existing_cluster_plan_imports_no_generated_provider_module(cloud, tmp_path):
    from conftest import stack_config, write_stack

    config = stack_config(cloud)
    config["gpupools:cluster"] = {**config["gpupools:cluster"], "create": False}
    path = write_stack(tmp_path, config)
    code = LIST.replace("['plan', '--stack', sys.argv[1], '--json']", "['plan', '--config', sys.argv[1], '--json']")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # The plan's own warnings go to stderr too (dev-gcore: its region is not checked offline); the list is the last line.
    assert proc.stderr.splitlines()[-1].split() == ["imported:"], proc.stderr
