"""`gpupools idle` against a Prometheus that answers badly: every malformed answer is one line and exit 1."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app

runner = CliRunner()


class Answers:
    body: bytes = b""
    declared: int | None = None  # a Content-Length larger than the body makes a truncated answer
    delay: float = 0  # seconds before answering: a slow server
    status: int = 200


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        asked = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())["query"][0]
        time.sleep(Answers.delay)
        # The probes (scrape intervals, node pools, vGPU shares, recorded steps) get no series; the report's own queries the answer.
        probe = any(text in asked for text in ("[1h]", "kube_node_labels", "pool_vgpus", "gpu_idle_steps_recorded"))
        body = vector([]) if probe and Answers.status == 200 else Answers.body(asked) if callable(Answers.body) else Answers.body
        self.send_response(Answers.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(Answers.declared or len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    class Quiet(ThreadingHTTPServer):
        def handle_error(self, request, client_address):  # the slow-server test hangs up before the answer
            pass

    httpd = Quiet(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def vector(result) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


NOW = int(time.time())
LABELS = {"Hostname": "n1", "UUID": "GPU-1", "gpu": "0", "modelName": "NVIDIA L4", "namespace": "ml", "pod": "p"}
GOOD = {"metric": LABELS, "value": [NOW, "2"]}


@pytest.mark.parametrize("body, expected", [
    (vector([{**GOOD, "metric": ["Hostname", "n1"]}]), "result[0].metric: expected a mapping of label names to strings"),
    (vector([{**GOOD, "metric": {"Hostname": 7}}]), "result[0].metric: expected a mapping"),
    (vector([{**GOOD, "value": [1700000000]}]), "result[0].value: expected [time, \"value\"]"),
    (vector([{**GOOD, "value": [1700000000, 0.5]}]), "result[0].value: expected [time, \"value\"]"),
    (vector([{**GOOD, "value": [1700000000, "idle"]}]), "result[0].value: 'idle' is not a number"),
    (vector([{**GOOD, "value": {"a": 1}}]), "result[0].value: expected [time, \"value\"]"),
    (vector(["series"]), "result[0]: expected a series object"),
    (vector({"a": 1}), "result: expected a list of series"),
    (json.dumps({"status": "success", "data": ["vector"]}).encode(), "expected a vector"),
    (json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}).encode(), "answered with 'matrix', expected a vector"),
    (json.dumps({"status": "error", "errorType": "bad_data", "error": ["x"] * 1000}).encode(), "bad_data"),
    (b'{"status": "success", "data": ' + b"[" * 5000, "nested more than"),
    (b"<html>proxy error</html>", "did not answer like a Prometheus API"),
    (b'{"status": "succ\xe9ss"}', "not UTF-8"),
])
def test_malformed_answers_are_one_line_exit_1(server, body, expected):
    Answers.body, Answers.declared = body, None
    result = runner.invoke(app, ["idle", "--prometheus", server])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(("error: prometheus: ", "error: --prometheus: ")), result.stderr
    assert expected in lines[0]


def test_truncated_body_is_one_line_exit_1(server):
    Answers.body, Answers.declared = vector([GOOD])[:40], 4000
    result = runner.invoke(app, ["idle", "--prometheus", server])
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: prometheus: ") and "broken answer" in line


def test_queries_are_form_encoded_as_urllib_does():
    """Questions naming thousands of GPUs are encoded byte by byte as urllib's urlencode would, only faster."""
    from urllib.parse import urlencode

    from gpupools.idle.promapi import form_encode

    for text in ["", "a b+c&d=e", 'up{UUID=~"GPU-1|GPU-2"}[5m] / 100', "é ü 中 \U0001f600 ~._-", "".join(map(chr, range(1, 256)))]:
        params = {"query": text, "time": "1700000000.000", "k y": text[::-1]}
        assert form_encode(params) == urlencode(params)


def test_answers_in_the_usual_shape_are_read_in_one_pass(monkeypatch):
    """Prometheus' own shape is checked once per answer, without the per-series checks that find what is wrong in an
    answer of another shape (which still run, and name the series, when the one pass fails)."""
    from gpupools.idle import promapi

    good = [{"metric": LABELS, "value": [NOW, "2"]}, {"metric": {}, "value": [NOW + 0.5, "NaN"]}]
    monkeypatch.setattr(promapi, "_labels", lambda *args: pytest.fail("checked series by series"))
    out = promapi.vector(good, "http://p")
    assert out[0] == {"metric": LABELS, "value": 2.0} and out[1]["metric"] == {} and out[1]["value"] != out[1]["value"]


def counted(asked: str) -> bytes:
    """What Prometheus would count for one L4 held by `ml/p`: lowest sample 2 %, 90 idle one-minute steps of 100 seen,
    peak 3 %, and a NaN sample among them (so its steps are judged one by one: the NaN step is seen, not idle)."""
    if "< 5" in asked:
        return vector([{**GOOD, "value": [NOW, "90"]}])
    if "min_over_time" in asked:
        return vector([{**GOOD, "value": [NOW, "2"]}])
    if "!= 0" in asked:
        return vector([{**GOOD, "value": [NOW, "1"]}])
    if asked.startswith("(max by"):
        return vector([{**GOOD, "value": [NOW, "3"]}])
    return vector([{**GOOD, "value": [NOW, "100"]}])


def test_a_well_formed_answer_still_reports(server, monkeypatch):
    import gpupools.idle.counting as idle

    monkeypatch.setattr(idle, "SPLIT", 1)  # every piece would get the same answer
    Answers.body, Answers.declared = counted, None
    result = runner.invoke(app, ["idle", "--prometheus", server, "--json", "--min-idle", "0"])
    assert result.exit_code == 0, result.stderr
    (row,) = json.loads(result.stdout)["idle"]
    assert (row["namespace"], row["max_utilization"], row["unit"]) == ("ml", 3, "gpu")
    assert row["hours_idle"] == pytest.approx(1.5) and row["hours_seen"] == pytest.approx(100 / 60, abs=1e-4)
    assert json.loads(runner.invoke(app, ["idle", "--prometheus", server, "--json", "--whole-window"]).stdout)["idle"] == []


def test_a_slow_server_is_called_slow_not_unreachable(server):
    """No answer within --timeout: the message says the server was slow (it is reachable), exit 1."""
    Answers.body, Answers.declared, Answers.delay = vector([GOOD]), None, 5
    try:
        result = runner.invoke(app, ["idle", "--prometheus", server, "--timeout", "1s"])
    finally:
        Answers.delay = 0
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: prometheus: ") and "was too slow: no answer within 1s" in line and "cannot reach" not in line


def test_prometheus_own_timeout_is_called_slow(server):
    """Prometheus gives up itself (errorType timeout, HTTP 503): the same message."""
    Answers.body = json.dumps({"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"}).encode()
    Answers.declared, Answers.status = None, 503
    try:
        result = runner.invoke(app, ["idle", "--prometheus", server, "--timeout", "30s"])
    finally:
        Answers.status = 200
    assert result.exit_code == 1 and "was too slow: no answer within 30s" in result.stderr


def test_bad_timeout_is_exit_2():
    result = runner.invoke(app, ["idle", "--prometheus", "http://127.0.0.1:9", "--timeout", "2d"])
    assert result.exit_code == 2 and result.stderr.startswith("error: --timeout: ")


def test_reserved_nodes_left_unused_are_waste_at_list_price():
    from gpupools.idle.reserved import reserved_idle
    from gpupools.idle.rows import Report
    from gpupools.idle.text import format_table

    class Prom:
        def __init__(self):
            self.asked = []

        def query(self, expr, at):
            self.asked.append(expr)
            if expr.startswith("avg_over_time("):
                return [{"metric": {"pool": "h100"}, "value": 1.5}, {"metric": {"pool": "a100"}, "value": 0.0}]
            return [{"metric": {"pool": "h100"}, "value": 55.04}, {"metric": {"pool": "a100"}, "value": 32.77}]

    prom = Prom()
    (h100,) = reserved_idle(prom, 0.0, 4 * 3600)
    assert (h100.pool, h100.nodes_unused, h100.usd_per_node_hour, h100.wasted_usd) == ("h100", 1.5, 55.04, round(1.5 * 55.04 * 4, 2))
    # The prices first; then the subquery, over the nodes of the pools with reservations only.
    assert "pool_reserved_node_price" in prom.asked[0] and len(prom.asked) == 2
    assert "gpupools:pool_reserved_nodes:count" in prom.asked[1] and "[14400s:60s]" in prom.asked[1]
    assert 'kube_node_labels{label_gpupools_io_pool=~"a100|h100"}' in prom.asked[1]
    report = Report(window_seconds=4 * 3600, below=5, min_idle_seconds=0, whole_window=False, gpus_seen=0, reserved=[h100])
    assert report.as_json()["reserved_wasted_usd"] == 330.24
    assert "reserved: pool h100 left 1.5 reserved node(s) unused on average, $330.24 at list price" in format_table(report)

    class Empty(Prom):
        def query(self, expr, at):
            self.asked.append(expr)
            return []

    empty = Empty()
    assert reserved_idle(empty, 0.0, 3600) == [] and len(empty.asked) == 1  # no reservation rules: one question
