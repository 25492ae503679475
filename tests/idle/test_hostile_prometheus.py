"""`gpupools idle` against a hostile Prometheus on 127.0.0.1: answers dripped a byte at a time, endless chunks, huge
answers, too many series, non-finite samples, and messages that repeat a credential. Every case ends in one line
(exit 1) within --timeout and the answer limits, or in a report; no credential is ever printed.

The server is a raw socket server, so it can misbehave below HTTP; every loop it runs is bounded, and it records
whether the client hung up before the loop ran out (which is how the tests see that the deadline held).
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.idle import promapi

runner = CliRunner()
NOW = int(time.time())
LABELS = {"Hostname": "n1", "UUID": "GPU-1", "gpu": "0", "modelName": "NVIDIA L4", "namespace": "ml", "pod": "p"}
TOKEN = "tok-3f9a1c77e2b54d0e9a8b6c5d4e3f2a1b"


def vector(result) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


class Mode:
    kind = "ok"
    value = "2"  # the sample value of every answer in "ok" mode
    hung_up_early: list[bool] = []  # per connection: the client left before the server's bounded loop ended
    open = 0  # connections being handled
    lock = threading.Lock()


def _send(conn: socket.socket, data: bytes) -> bool:
    try:
        conn.sendall(data)
        return True
    except OSError:
        return False


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        with Mode.lock:
            Mode.open += 1
        try:
            self.answer()
        finally:
            with Mode.lock:
                Mode.open -= 1

    def answer(self):
        conn = self.request
        conn.settimeout(30)
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                part = conn.recv(4096)
                if not part:
                    return
                head += part
        except OSError:
            return
        kind = Mode.kind
        if kind == "drip-headers":  # one header line per 0.2 s, at most 100 lines
            lines = [b"HTTP/1.1 200 OK\r\n"] + [b"X-Drip-%d: x\r\n" % i for i in range(100)]
            Mode.hung_up_early.append(not all(_send(conn, line) or False for line in lines if time.sleep(0.2) is None))
        elif kind == "drip-body":  # a Content-Length it honours one byte per 0.1 s, for at most 400 bytes
            body = vector([{"metric": LABELS, "value": [NOW, "2"]}]).ljust(400)
            if not _send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)):
                return
            sent = 0
            for byte in body:
                time.sleep(0.1)
                if not _send(conn, bytes([byte])):
                    break
                sent += 1
            Mode.hung_up_early.append(sent < len(body))
        elif kind == "endless-chunks":  # chunked encoding that never ends, up to 4,000 chunks of 64 KiB
            _send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b'{"status": "success", "data": {"x": "' + b"a" * 65000
            frame = b"%x\r\n%s\r\n" % (len(chunk), chunk)
            for _ in range(4000):
                if not _send(conn, frame):
                    Mode.hung_up_early.append(True)
                    break
            else:
                Mode.hung_up_early.append(False)
        elif kind == "silent":  # reads the query, never answers (at most 30 s)
            for _ in range(300):
                time.sleep(0.1)
                try:
                    conn.settimeout(0.001)
                    if conn.recv(65536) == b"":  # the query's body may come after its head: read it all
                        Mode.hung_up_early.append(True)
                        return
                except socket.timeout:
                    continue
                except OSError:
                    Mode.hung_up_early.append(True)
                    return
            Mode.hung_up_early.append(False)
        elif kind == "many-series":
            body = vector([{"metric": {**LABELS, "UUID": f"GPU-{i}"}, "value": [NOW, "2"]} for i in range(promapi.MAX_SERIES + 1)])
            _reply(conn, 200, body)
        elif kind == "refuse-echoing-token":
            seen = head.decode("latin-1")
            auth = next((line.split(":", 1)[1].strip() for line in seen.split("\r\n") if line.lower().startswith("authorization:")), "")
            _reply(conn, 401, json.dumps({"message": f"invalid credentials: {auth} (session {TOKEN})"}).encode())
        elif kind == "error-echoing-token":
            _reply(conn, 400, json.dumps({"status": "error", "errorType": "bad_data", "error": f"parse error near token={TOKEN} and {TOKEN}"}).encode())
        else:
            query = head.decode("latin-1")
            probe = any(text in query for text in ("kube_node_labels", "gpu_idle_steps_recorded"))
            _reply(conn, 200, vector([] if probe else [{"metric": LABELS, "value": [NOW, Mode.value]}]))


def _reply(conn: socket.socket, status: int, body: bytes) -> None:
    reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized"}[status]
    _send(conn, b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
          % (status, reason.encode(), len(body)) + body)


@pytest.fixture(scope="module")
def hostile():
    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

        def handle_error(self, request, client_address):
            pass

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)  # shutdown waits a poll at most
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def mode():
    Mode.hung_up_early = []
    yield Mode
    Mode.kind, Mode.value = "ok", "2"


def idle(url: str, *args: str):
    return runner.invoke(app, ["idle", "--prometheus", url, *args])


def one_line(result, exit_code: int = 1) -> str:
    assert result.exit_code == exit_code, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def settled(mode, seconds: float = 5.0) -> list[bool]:
    """What the server recorded once every connection it took has ended. It notices a hang-up at its next step
    (0.1-0.2 s); a connection the client left open runs the server's loop for 20 s or more, so one still open after
    `seconds` is a connection the deadline did not end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (not mode.hung_up_early or mode.open):
        time.sleep(0.02)
    assert not mode.open, f"{mode.open} connection(s) still open {seconds:g} s after the command ended"
    return mode.hung_up_early


@pytest.mark.parametrize("kind", ["drip-headers", "drip-body", "silent"])
def test_a_dripping_or_silent_server_ends_at_the_deadline(hostile, mode, kind):
    """The timeout is the whole run's: a server that answers a byte or a header line at a time, or never, is left
    when --timeout has passed (here its least, 1s), in one wave of queries, long before its bounded loop would have
    ended."""
    mode.kind = kind
    line = one_line(idle(hostile, "--timeout", "1s"))
    assert "was too slow: no answer within 1s" in line
    hung_up = settled(mode)
    assert hung_up and all(hung_up), hung_up


def test_endless_chunks_are_refused_at_the_size_limit(hostile, mode, monkeypatch):
    monkeypatch.setattr(promapi, "MAX_ANSWER_BYTES", 2 * 2**20)
    mode.kind = "endless-chunks"
    line = one_line(idle(hostile, "--timeout", "30s"))
    assert "answered with more than 2 MiB" in line
    hung_up = settled(mode)
    assert hung_up and all(hung_up), hung_up


def test_too_many_series_are_refused_while_streaming(hostile, mode, monkeypatch):
    monkeypatch.setattr(promapi, "MAX_SERIES", 500)
    mode.kind = "many-series"
    line = one_line(idle(hostile))
    assert "answered with more than 500 series" in line


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
def test_non_finite_samples_are_not_idle_and_not_a_crash(hostile, mode, value):
    """Every answer, probes included, is NaN or an infinity: the report runs and lists nothing as idle."""
    mode.kind, mode.value = "ok", value
    result = idle(hostile, "--json", "--min-idle", "0")
    assert result.exit_code == 0, (result.output, result.exception)
    doc = json.loads(result.stdout)
    assert doc["idle"] == []


def test_a_finite_answer_from_the_same_server_reports(hostile, mode):
    """The control for the case above: the same answers with a finite value list the GPU."""
    mode.kind, mode.value = "ok", "2"
    result = idle(hostile, "--json", "--min-idle", "0")
    assert result.exit_code == 0 and json.loads(result.stdout)["idle"], result.output


def test_a_password_in_the_url_is_used_and_never_printed(hostile, mode):
    mode.kind = "refuse-echoing-token"
    user_url = hostile.replace("http://", "http://alice:s3cr3t-pass-9f8e7d@")
    line = one_line(idle(user_url, "--prometheus-auth", "none"))
    assert "refused authentication (HTTP 401" in line
    assert "s3cr3t-pass-9f8e7d" not in line and TOKEN not in line and "YWxpY2U6" not in line  # nor its base64 form
    unreachable = one_line(idle("http://alice:s3cr3t-pass-9f8e7d@127.0.0.1:9", "--timeout", "2s"))
    assert "s3cr3t-pass-9f8e7d" not in unreachable and "127.0.0.1:9" in unreachable
    bad = one_line(idle("http://alice:s3cr3t-pass-9f8e7d@127.0.0.1:notaport"), exit_code=2)
    assert "s3cr3t-pass-9f8e7d" not in bad and "alice:***@" in bad


def test_a_bearer_token_echoed_by_the_server_is_not_printed(hostile, mode, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("bearer-" + TOKEN[4:])
    for kind in ("refuse-echoing-token", "error-echoing-token"):
        mode.kind = kind
        line = one_line(idle(hostile, "--prometheus-auth", "bearer", "--token-file", str(token_file)))
        assert TOKEN[4:] not in line and TOKEN not in line, line
        assert "[redacted]" in line
