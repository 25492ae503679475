"""The Kubernetes objects gpupools writes itself pass an independent scanner: checkov's Kubernetes checks, run on what
`gpupools render` writes for every example stack and for a GKE stack with every GPUDirect flavour, find nothing, and
every check an object does not meet is skipped in the object itself with its reason (`checkov.io/skipN` annotations);
each such exception is needed (the same objects without their annotations fail exactly those checks).

Not scanned here: the Helm charts (upstream's, rendered by helm; tests/charts). The GKE GPUDirect DaemonSets are
Google's manifests with their images pinned and the privileges no step uses dropped (gpupools/fabric/gpudirect.py);
what they still need is in their exceptions.
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
from gpupools.fabric import gpudirect
from gpupools.health import readiness

from conftest import ROOT, stack_config

CHECKOV = Path(sys.executable).parent.parent / "share" / "gpupools" / "checkov" / "bin" / "checkov"
STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.dev-*.yaml"))
# A3 High, Mega and Ultra pools: the TCPX, TCPXO and gIB installers and the NRI device injector (dev-gcp has TCPXO only).
GPUDIRECT_POOLS = [{"name": "high", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "zones": ["us-central1-a"]},
                   {"name": "mega", "instanceType": "a3-megagpu-8g", "maxNodes": 2, "zones": ["us-central1-b"]},
                   {"name": "ultra", "instanceType": "a3-ultragpu-8g", "maxNodes": 2, "zones": ["us-central1-b"]}]
GPUDIRECT = {(gpudirect.NAMESPACE, name) for name in gpudirect.SCANNER_EXCEPTIONS}
# The checks the reporter DaemonSet failed before it had a pod security context, a seccomp profile, no token for the
# file server, CPU limits and a NetworkPolicy.
NOW_MET = {"CKV_K8S_29", "CKV_K8S_31", "CKV_K8S_38", "CKV_K8S_11", "CKV2_K8S_6"}


def checkov() -> Path:
    if CHECKOV.exists():
        return CHECKOV
    if os.environ.get("GPUPOOLS_REQUIRE_CHECKOV"):
        pytest.fail(f"{CHECKOV} is missing; ./dev test installs it")
    pytest.skip(f"checkov is not installed at {CHECKOV}: ./dev test installs it")


def run_checkov(root: Path) -> dict:
    done = subprocess.run([str(checkov()), "--directory", str(root), "--framework", "kubernetes", "--output", "json", "--compact",
                           "--skip-download", "--no-fail-on-crash"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "BC_SKIP_MAPPING": "TRUE"})
    assert done.returncode in (0, 1), done.stderr[-2000:]
    reports = json.loads(done.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    (report,) = [r for r in reports if r.get("check_type") == "kubernetes"]
    return report


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    checkov()
    root = tmp_path_factory.mktemp("rendered")
    runner = CliRunner()
    stack = root / "Pulumi.gpudirect.yaml"
    stack.write_text(yaml.safe_dump({"config": stack_config("gcp", pools=GPUDIRECT_POOLS)}))
    for name, args in [*((s, ["--stack", s]) for s in STACKS), ("gpudirect", ["--config", str(stack)])]:
        result = runner.invoke(app, ["render", *args, "--out", str(root / "out" / name)])
        assert result.exit_code == 0, result.stderr
    return root / "out"


@pytest.fixture(scope="module")
def scan(rendered) -> dict:
    return run_checkov(rendered)


def test_checkov_finds_nothing(scan):
    failed = [(c["check_id"], c["resource"], c["file_path"]) for c in scan["results"]["failed_checks"]]
    assert not failed
    assert scan["summary"]["parsing_errors"] == 0 and scan["summary"]["passed"] > 100


def test_every_skipped_check_says_why(scan):
    skipped = scan["results"]["skipped_checks"]
    assert skipped
    exceptions = {(readiness.NAMESPACE, readiness.REPORTER): readiness.SCANNER_EXCEPTIONS,
                  **{(gpudirect.NAMESPACE, name): why for name, why in gpudirect.SCANNER_EXCEPTIONS.items()}}
    for check in skipped:
        kind, namespace, name = check["resource"].split(".", 2)
        assert kind == "DaemonSet" and check["check_id"] in exceptions[(namespace, name)], check["resource"]
        assert len(check["check_result"].get("suppress_comment") or "") > 40, check
    found = {(c["resource"].split(".", 2)[2], c["check_id"]) for c in skipped if c["resource"].startswith(f"DaemonSet.{gpudirect.NAMESPACE}.")}
    assert {(name, check) for name, why in gpudirect.SCANNER_EXCEPTIONS.items() for check in why} <= found


def test_each_gpudirect_exception_is_needed(rendered, tmp_path):
    """The GPUDirect DaemonSets without their annotations fail exactly the checks they skip: none is skipped that the
    object meets anyway, and none other fails."""
    for path in rendered.glob("*/manifests/*.yaml"):
        obj = yaml.safe_load(path.read_text())
        meta = obj.get("metadata", {})
        if obj.get("kind") == "DaemonSet" and (meta.get("namespace"), meta.get("name")) in GPUDIRECT:
            meta.pop("annotations")
            (tmp_path / f"{path.parent.parent.name}-{path.name}").write_text(yaml.safe_dump(obj))
    report = run_checkov(tmp_path)
    failed = {(c["resource"].split(".", 2)[2], c["check_id"]) for c in report["results"]["failed_checks"] if c["resource"].startswith("DaemonSet.")}
    assert failed == {(name, check) for name, why in gpudirect.SCANNER_EXCEPTIONS.items() for check in why}


def test_the_reporter_meets_what_it_failed_before(scan):
    passed = {(c["check_id"]) for c in scan["results"]["passed_checks"] if readiness.REPORTER in c["resource"]}
    assert NOW_MET <= passed, NOW_MET - passed
