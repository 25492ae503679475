"""`gpupools idle` across a fleet: one Prometheus per worker, within one deadline, and which worker failed."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


class Empty(BaseHTTPRequestHandler):
    """A Prometheus with no series at all, answering after `delay` seconds."""

    delay = 0.0

    def do_POST(self):  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(Empty.delay)
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up at its deadline
            pass

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def prometheus():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Empty)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_each_worker_is_read_and_the_failing_one_is_named(prometheus, monkeypatch):
    monkeypatch.chdir(ROOT)
    Empty.delay = 0.0
    down = closed_port()
    result = runner.invoke(app, ["idle", "--stack", "fleet", "--prometheus", f"gcp-us={down}", "--prometheus", f"aws-eu={prometheus}"])
    assert result.exit_code == 1
    lines = result.stdout.strip().splitlines()
    assert lines[0] == f"worker aws-eu ({prometheus}): no DCGM GPU metrics in the last 24h"  # dispatch order, not the order given
    assert lines[1].startswith(f"worker gcp-us ({down}): error: --prometheus: cannot reach {down}")
    result = runner.invoke(app, ["idle", "--stack", "fleet", "--prometheus", f"aws-eu={prometheus}"])
    assert result.exit_code == 0 and result.stdout.strip().splitlines()[1] == "worker gcp-us: not read (no --prometheus gcp-us=URL)"


def test_one_deadline_bounds_the_whole_fleet(prometheus, monkeypatch):
    monkeypatch.chdir(ROOT)
    Empty.delay = 3.0
    try:
        started = time.monotonic()
        result = runner.invoke(app, ["idle", "--stack", "fleet", "--timeout", "1s", "--prometheus", f"aws-eu={prometheus}",
                                     "--prometheus", f"gcp-us={prometheus}"])
        took = time.monotonic() - started
    finally:
        Empty.delay = 0.0
    assert result.exit_code == 1
    first, second = result.stdout.strip().splitlines()
    assert first.startswith(f"worker aws-eu ({prometheus}): error:")
    assert second == f"worker gcp-us ({prometheus}): not read: the report's --timeout 1s ran out before this worker"
    assert took < 2.9


def test_fleet_idle_refuses_unknown_workers_and_per_team_totals(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = runner.invoke(app, ["idle", "--stack", "fleet", "--prometheus", "nope=http://127.0.0.1:9"])
    assert result.exit_code == 2 and "across a fleet, give WORKER=URL with WORKER one of aws-eu, gcp-us" in result.stderr
    result = runner.invoke(app, ["idle", "--stack", "fleet", "--by", "team", "--prometheus", "aws-eu=http://127.0.0.1:9"])
    assert result.exit_code == 2 and result.stderr.startswith("error: --by: not across a fleet")
    result = runner.invoke(app, ["idle", "--prometheus", "http://127.0.0.1:9", "--prometheus", "http://127.0.0.1:9"])
    assert result.exit_code == 2 and "one per worker (WORKER=URL) only with a fleet stack" in result.stderr
