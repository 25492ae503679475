"""What a plan imports: no generated provider module (resources and invokes go by type token, components/wire.py),
except where an existing cluster is read with the SDK's typed answer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT

STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
SDKS = ("pulumi_aws", "pulumi_gcp", "pulumi_azure_native", "pulumi_random")
# What reading an existing cluster loads: the SDK's package and the service module of its getCluster.
EXISTING = {"dev-aws-existing": {"pulumi_aws", "pulumi_aws.eks"}}

LIST = ("import sys\n"
        "from gpupools.cli.main import app\n"
        "try:\n"
        "    app(['plan', '--stack', sys.argv[1], '--json'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "sdks = %r\n"
        "print(' '.join(sorted(m for m in sys.modules if m.partition('.')[0] in sdks and m.count('.') < 2 and not m.endswith('._utilities'))),"
        " file=sys.stderr)\n" % (SDKS,))


@pytest.mark.parametrize("stack", STACKS)
def test_a_plan_imports_no_generated_provider_module(stack):
    proc = subprocess.run([sys.executable, "-c", LIST, stack], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    imported = set(proc.stderr.split())
    if stack in EXISTING:  # the package's own lazy module stubs come with it
        assert EXISTING[stack] <= imported and {m.partition(".")[0] for m in imported} == {"pulumi_aws"}
    else:
        assert imported == set()
