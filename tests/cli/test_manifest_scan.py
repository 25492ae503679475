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
                          # In one process: checkov forks a parser per core by default (checkov 3.3.30,
                          # common/parallelizer/parallel_runner.py, CHECKOV_PARALLELIZATION_TYPE), and the suite's other
                          # worker has the other core; the findings are the same (only the order of a check's
                          # evaluated_keys differs), for about 1.5 CPU s less.
                          env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_PARALLELIZATION_TYPE": "none"})
    assert done.returncode in (0, 1), done.stderr[-2000:]
    reports = json.loads(done.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    (report,) = [r for r in reports if r.get("check_type") == "kubernetes"]
    return report


def part_of(report: dict, root: Path, folder: str) -> dict:
    """The findings of one top folder of a scan of ROOT (checkov names a file by its path from ROOT, parse errors by
    their full path), with the summary checkov counts from them."""
    def inside(path: str) -> bool:
        path = path[len(str(root)):] if path.startswith(str(root)) else path
        return Path(path.lstrip("/")).parts[:1] == (folder,)

    results = {kind: [c for c in found if inside(c["file_path"])] for kind, found in report["results"].items() if kind != "parsing_errors"}
    results["parsing_errors"] = [p for p in report["results"]["parsing_errors"] if inside(p)]
    summary = {"passed": len(results["passed_checks"]), "failed": len(results["failed_checks"]),
               "skipped": len(results["skipped_checks"]), "parsing_errors": len(results["parsing_errors"])}
    return {"check_type": report["check_type"], "results": results, "summary": summary}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    checkov()
    root = tmp_path_factory.mktemp("scanned")
    runner = CliRunner()
    stack = tmp_path_factory.mktemp("stack") / "Pulumi.gpudirect.yaml"
    stack.write_text(yaml.safe_dump({"config": stack_config("gcp", pools=GPUDIRECT_POOLS)}))
    for name, args in [*((s, ["--stack", s]) for s in STACKS), ("gpudirect", ["--config", str(stack)])]:
        result = runner.invoke(app, ["render", *args, "--out", str(root / "out" / name)])
        assert result.exit_code == 0, result.stderr
    return root / "out"


@pytest.fixture(scope="module")
def scans(rendered) -> dict[str, dict]:
    """One checkov run (its start alone is about 4 CPU seconds) over what `render` wrote, in out/, and beside it, in
    stripped/, the GPUDirect DaemonSets without their annotations; each test reads its folder's findings. A DaemonSet's
    checks (CKV_K8S_*) read the object alone, so its findings are those of a scan of its folder by itself; the graph
    checks (CKV2_K8S_*) join Pods to NetworkPolicies and bindings to roles across files, so a stripped copy's Pod may
    count a NetworkPolicy of out/: test_each_gpudirect_exception_is_needed reads DaemonSets only, as it did, and the
    copies hold no policy, role or binding that could change a finding of out/."""
    root = rendered.parent
    stripped = root / "stripped"
    stripped.mkdir()
    for path in rendered.glob("*/manifests/*.yaml"):
        obj = yaml.safe_load(path.read_text())
        meta = obj.get("metadata", {})
        if obj.get("kind") == "DaemonSet" and (meta.get("namespace"), meta.get("name")) in GPUDIRECT:
            meta.pop("annotations")
            (stripped / f"{path.parent.parent.name}-{path.name}").write_text(yaml.safe_dump(obj))
    assert {p.name for p in root.iterdir()} == {"out", "stripped"}
    report = run_checkov(root)
    return {folder: part_of(report, root, folder) for folder in ("out", "stripped")}


@pytest.fixture(scope="module")
def scan(scans) -> dict:
    return scans["out"]


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


def test_each_gpudirect_exception_is_needed(scans):
    """The GPUDirect DaemonSets without their annotations fail exactly the checks they skip: none is skipped that the
    object meets anyway, and none other fails."""
    report = scans["stripped"]
    assert report["results"]["passed_checks"]  # the copies were scanned
    failed = {(c["resource"].split(".", 2)[2], c["check_id"]) for c in report["results"]["failed_checks"] if c["resource"].startswith("DaemonSet.")}
    assert failed == {(name, check) for name, why in gpudirect.SCANNER_EXCEPTIONS.items() for check in why}


def test_the_reporter_meets_what_it_failed_before(scan):
    passed = {(c["check_id"]) for c in scan["results"]["passed_checks"] if readiness.REPORTER in c["resource"]}
    assert NOW_MET <= passed, NOW_MET - passed
