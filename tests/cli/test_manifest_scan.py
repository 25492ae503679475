"""The Kubernetes objects gpupools writes itself pass an independent scanner: checkov's Kubernetes checks, run on what
`gpupools render` writes for every example stack, find nothing, and every check an object does not meet is skipped
in the object itself with its reason (`checkov.io/skipN` annotations).

Not scanned here: the Helm charts (upstream's, rendered by helm; tests/charts) and the GKE GPUDirect DaemonSets, which
are Google's published manifests reproduced as published (gpupools/fabric/gpudirect.py names each file and digest).
Checkov runs from its own virtualenv under .venv/share (./dev test makes it): its pins conflict with this project's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.fabric.gpudirect import INSTALLER, NRI_INJECTOR
from gpupools.health import readiness

from conftest import ROOT

CHECKOV = Path(sys.executable).parent.parent / "share" / "gpupools" / "checkov" / "bin" / "checkov"
STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
UPSTREAM = {("kube-system", NRI_INJECTOR), *(("kube-system", name) for name in INSTALLER.values())}
# The checks the reporter DaemonSet failed before it had a pod security context, a seccomp profile, no token for the
# file server, CPU limits and a NetworkPolicy.
NOW_MET = {"CKV_K8S_29", "CKV_K8S_31", "CKV_K8S_38", "CKV_K8S_11", "CKV2_K8S_6"}


def checkov() -> Path:
    if CHECKOV.exists():
        return CHECKOV
    if os.environ.get("GPUPOOLS_REQUIRE_CHECKOV"):
        pytest.fail(f"{CHECKOV} is missing; ./dev test installs it")
    pytest.skip(f"checkov is not installed at {CHECKOV}: ./dev test installs it")


@pytest.fixture(scope="module")
def scan(tmp_path_factory) -> dict:
    tool = checkov()
    root = tmp_path_factory.mktemp("rendered")
    runner = CliRunner()
    for stack in STACKS:
        result = runner.invoke(app, ["render", "--stack", stack, "--out", str(root / stack)])
        assert result.exit_code == 0, result.stderr
        for path in (root / stack / "manifests").glob("*.yaml"):
            meta = yaml.safe_load(path.read_text()).get("metadata", {})
            if (meta.get("namespace"), meta.get("name")) in UPSTREAM:
                path.unlink()
    done = subprocess.run([str(tool), "--directory", str(root), "--framework", "kubernetes", "--output", "json", "--compact",
                           "--skip-download", "--no-fail-on-crash"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "BC_SKIP_MAPPING": "TRUE"})
    assert done.returncode in (0, 1), done.stderr[-2000:]
    reports = json.loads(done.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    (report,) = [r for r in reports if r.get("check_type") == "kubernetes"]
    return report


def test_checkov_finds_nothing(scan):
    failed = [(c["check_id"], c["resource"], c["file_path"]) for c in scan["results"]["failed_checks"]]
    assert not failed
    assert scan["summary"]["parsing_errors"] == 0 and scan["summary"]["passed"] > 100


def test_every_skipped_check_says_why(scan):
    skipped = scan["results"]["skipped_checks"]
    assert skipped
    for check in skipped:
        assert check["resource"].startswith(f"DaemonSet.{readiness.NAMESPACE}.{readiness.REPORTER}"), check["resource"]
        assert check["check_id"] in readiness.SCANNER_EXCEPTIONS
        assert len(check["check_result"].get("suppress_comment") or "") > 40, check


def test_the_reporter_meets_what_it_failed_before(scan):
    passed = {(c["check_id"]) for c in scan["results"]["passed_checks"] if readiness.REPORTER in c["resource"]}
    assert NOW_MET <= passed, NOW_MET - passed
