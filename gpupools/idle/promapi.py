"""A small client for the Prometheus HTTP API (stdlib urllib): instant and range queries, every failure one line.

Everything that reads PromQL answers (`gpupools idle`) goes through `Prometheus`, so one place decides how a
request is sent (timeouts, headers, signing for managed services) and how an answer is checked: Prometheus always
answers in one shape, and anything else (a proxy's page, a truncated or hand-made answer) is server trouble the
user reads as one line, not a traceback from deep inside a report.
"""

from __future__ import annotations

import base64
import math
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable
from urllib.parse import unquote, urlsplit, urlunsplit

from gpupools.stack.errors import Problem, describe
from gpupools.stack.reading import ReadError, decode, load_answer_json, load_json

DEFAULT_TIMEOUT = 120  # Prometheus' own default query timeout (--query.timeout=2m)
# Limits on one answer, checked while it streams in, so a hostile or broken server costs at most this much memory
# per query in flight. The report's answers are counts per holder (a few hundred bytes per GPU); a day at
# one-minute steps is about 60 kB per series of the plot's range query. 64 MiB and 100,000 series are far above
# what a fleet of thousands of GPUs needs; beyond them the answer is refused, not read.
MAX_ANSWER_BYTES = 64 * 2**20
MAX_SERIES = 100_000
READ_CHUNK = 2**20

# (method, url, headers, body) -> headers to add: how a managed service's request is authenticated (a signature or a
# token), computed per request because signatures cover the body and tokens expire.
Signer = Callable[[str, str, dict[str, str], bytes], dict[str, str]]


class ReportError(Exception):
    """A problem the user should read as one line; `code` is the exit status (2 bad input, 1 server trouble)."""

    def __init__(self, problem: Problem, code: int):
        super().__init__(str(problem))
        self.problem = problem
        self.code = code


def redact(url: str) -> str:
    """The URL as it may be shown: a password in it (http://user:password@host) replaced by ***."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unreadable URL>"
    if parts.password is None and "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}" if user else f"***@{host}"))


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL without `user:password@`, and the (user, password) for HTTP basic authentication if it had one."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return bare, (unquote(parts.username or ""), unquote(parts.password or ""))


def parse_url(text: str) -> str:
    try:
        parts = urlsplit(text)
    except ValueError:
        raise ReportError(Problem("--prometheus", f"{describe(redact(text))} is not an http(s) URL such as http://prometheus:9090"), 2) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ReportError(Problem("--prometheus", f"{describe(redact(text))} is not an http(s) URL such as http://prometheus:9090"), 2)
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ReportError(Problem("--prometheus", f"{describe(redact(text))} has an invalid port"), 2) from None
    return text.rstrip("/")


# What a server's message may repeat of a credential: an Authorization value, a JWT, a key=value secret, or any long
# run of token characters (API keys, signatures, session IDs). Shown as [redacted]; the rest of the message stays.
_TOKEN_LIKE = re.compile(
    r"(?i)(?:bearer|basic|token|sigv4|signature|credential)\s*[:=]?\s*[A-Za-z0-9._~+/=-]{8,}"
    r"|eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]*)?"
    r"|(?i:(?:password|passwd|secret|token|key|auth|sig|signature|credential)[A-Za-z_-]*)\s*[=:]\s*\S+"
    r"|[A-Za-z0-9+/_=-]{32,}")


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` with the given secrets and anything token-like replaced, for messages that quote a server."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return _TOKEN_LIKE.sub("[redacted]", text)


class _Watch:
    """Ends one request at the run's deadline, whatever it is doing: waiting for headers, reading a body dripped a
    byte at a time or sent as endless chunks. A socket timeout bounds each read only, not the answer; shutting the
    connection down at the deadline makes the blocked read return, and `expired` says why it did."""

    def __init__(self, seconds: float):
        self.expired = False
        self._fds: list[int] = []
        self._lock = threading.Lock()
        self._done = False
        self._timer = threading.Timer(max(seconds, 0.0), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def attach(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._fds.append(sock.fileno())
            if self.expired:
                self._shutdown(sock.fileno())
        return sock

    def _expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
            for fd in self._fds:
                self._shutdown(fd)

    @staticmethod
    def _shutdown(fd: int) -> None:
        # By file descriptor: an https connection's socket object is replaced when TLS wraps it, the descriptor is not.
        try:
            dup = socket.socket(fileno=__import__("os").dup(fd))
        except OSError:
            return
        try:
            dup.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            dup.close()

    def stop(self) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()


@dataclass(frozen=True)
class Prometheus:
    """Where and how to ask: the API's base URL (the part before /api/v1), a per-query timeout, fixed headers
    (a tenant, a bearer token) and an optional signer for services that sign each request."""

    url: str
    timeout: float = DEFAULT_TIMEOUT
    headers: dict[str, str] = field(default_factory=dict)
    signer: Signer | None = None
    # GET for services whose query API takes its parameters in the URL only (Google's documents an empty body)
    method: str = "POST"
    # A private CA's bundle for https endpoints; None trusts the system's CAs
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False)
    # time.monotonic() by which every query of the run has ended (`until`); None: each query gets `timeout`.
    deadline: float | None = field(default=None, compare=False)
    # Credentials a server's message must never repeat (a bearer token, a basic-auth password).
    secrets: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def until(self, deadline: float) -> "Prometheus":
        """The same server, every query of which ends by `deadline` (time.monotonic())."""
        return replace(self, deadline=deadline)

    def _remaining(self) -> float:
        return self.timeout if self.deadline is None else self.deadline - time.monotonic()

    def query(self, expr: str, at: float) -> list[dict]:
        """An instant query's vector as [{metric: {str: str}, value: float}]."""
        data = self._post("query", {"query": expr, "time": f"{at:.3f}"}, "vector")
        return vector(data.get("result"), self.url)

    def query_range(self, expr: str, start: float, end: float, step: int) -> list[dict]:
        """A range query's matrix as [{metric: {str: str}, values: [(time, value)]}]."""
        data = self._post("query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": str(step)}, "matrix")
        return matrix(data.get("result"), self.url)

    def _post(self, endpoint: str, params: dict[str, str], kind: str) -> dict:
        """Send a query (POST, or GET for a service that takes no body); `timeout` goes to Prometheus too, so a slow
        query ends there with its own timeout error rather than running on after we stopped waiting; either way the
        message says the server was slow, not unreachable. Every query ends by the run's deadline."""
        from urllib.request import Request

        base, timeout = self.url, self.timeout
        remaining = self._remaining()
        if remaining <= 0:
            raise _slow(base, timeout)
        url = f"{base}/api/v1/{endpoint}"
        # Prometheus stops on its own a little before we stop waiting, so a slow query ends with its timeout error.
        fields = form_encode({**params, "timeout": f"{max(1, math.floor(remaining - 1)):d}s"})
        if self.method == "GET":
            url, body, headers = f"{url}?{fields}", b"", {"Accept": "application/json", **self.headers}
        else:
            body = fields.encode()
            headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json", **self.headers}
        if self.signer is not None:
            headers.update(self.signer(self.method, url, dict(headers), body))
        request = Request(url, data=body if self.method == "POST" else None, headers=headers, method=self.method)
        watch = _Watch(remaining)
        try:
            raw = self._exchange(request, watch, remaining)
        except ReportError:
            if watch.expired:
                raise _slow(base, timeout) from None
            raise
        finally:
            watch.stop()
        if watch.expired:
            raise _slow(base, timeout)
        try:
            doc = load_answer_json(decode(raw))
        except ReadError as exc:
            raise ReportError(Problem("--prometheus", f"{base} did not answer like a Prometheus API ({exc})"), 1) from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            message = _api_error(raw) or "unexpected answer"
            raise ReportError(Problem("prometheus", f"{base} answered: {scrub(message, self.secrets)}"), 1)
        data = doc.get("data")
        if not isinstance(data, dict) or data.get("resultType") != kind:
            got = data.get("resultType") if isinstance(data, dict) else None
            raise ReportError(Problem("prometheus", f"{base} answered with {describe(got)}, expected a {kind}"), 1)
        return data

    def _exchange(self, request: Any, watch: _Watch, remaining: float) -> bytes:
        """Send `request` and read the answer within the limits, or ReportError saying what went wrong."""
        from http.client import HTTPException
        from urllib.error import HTTPError, URLError

        base, timeout = self.url, self.timeout
        try:
            with _opener(self.ssl_context, watch).open(request, timeout=remaining) as response:
                raw = _read_limited(response, base)
                missing = getattr(response, "length", None)  # bytes Content-Length promised that never came
        except ReportError:
            raise
        except HTTPError as exc:
            try:
                raw = exc.read(64 * 1024)
            except (OSError, HTTPException):
                raw = b""
            if 300 <= exc.code < 400:
                where = describe(scrub(exc.headers.get("Location") or "elsewhere", self.secrets), 200)
                raise ReportError(Problem("--prometheus", f"{base} redirects to {where}; give the URL it redirects to"), 1) from None
            if exc.code in (401, 403):  # the server is there and answered: only the credentials are wrong
                detail = _refusal(raw)
                detail = scrub(detail, self.secrets) if detail else detail
                raise ReportError(Problem("prometheus", f"{base} refused authentication (HTTP {exc.code} {exc.reason})"
                                                        + (f": {detail}" if detail else "")
                                                        + "; check --prometheus-auth and its credentials"), 1) from None
            message = _api_error(raw) or f"HTTP {exc.code} {exc.reason}"
            if message.startswith("timeout:"):
                raise _slow(base, timeout) from None
            raise ReportError(Problem("prometheus", f"{base} answered: {scrub(message, self.secrets)}"), 1) from None
        except (socket.timeout, TimeoutError):
            raise _slow(base, timeout) from None
        except (URLError, OSError) as exc:
            if watch.expired or isinstance(getattr(exc, "reason", None), (socket.timeout, TimeoutError)):
                raise _slow(base, timeout) from None
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise ReportError(Problem("--prometheus", f"cannot verify {base}'s certificate ({reason.verify_message}); "
                                                          "a private CA's bundle goes in --ca-file"), 1) from None
            raise ReportError(Problem("--prometheus", f"cannot reach {base}: {getattr(reason, 'strerror', None) or reason}"), 1) from None
        except HTTPException as exc:  # a body cut short (IncompleteRead), a broken status line
            if watch.expired:
                raise _slow(base, timeout) from None
            raise ReportError(Problem("prometheus", f"{base} sent a broken answer: {describe(str(exc) or type(exc).__name__)}"), 1) from None
        if watch.expired:
            raise _slow(base, timeout)
        if missing:
            raise ReportError(Problem("prometheus", f"{base} sent a broken answer: the body was cut short after {len(raw):,} bytes, "
                                                    f"{missing:,} bytes missing"), 1)
        return raw


def _read_limited(response: Any, base: str) -> bytes:
    """The body, read a chunk at a time and refused as soon as it passes `MAX_ANSWER_BYTES` or `MAX_SERIES` (every
    series of an answer carries one "metric" key), so what is refused is never held whole."""
    chunks, size, series, tail = [], 0, 0, b""
    while True:
        chunk = response.read(READ_CHUNK)
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ReportError(Problem("prometheus", f"{base} answered with more than {MAX_ANSWER_BYTES // 2**20} MiB; "
                                                    f"use a shorter --window"), 1)
        joined = tail + chunk
        series += joined.count(b'"metric"') - tail.count(b'"metric"')
        if series > MAX_SERIES:
            raise ReportError(Problem("prometheus", f"{base} answered with more than {MAX_SERIES:,} series; gpupools reads at most "
                                                    f"{MAX_SERIES:,} per query"), 1)
        tail = chunk[-8:]
        chunks.append(chunk)
    return b"".join(chunks)


def _opener(context: ssl.SSLContext | None, watch: _Watch | None = None):
    """urllib without redirects: it would resend a token or tenant to wherever the Location points, and turn the
    POSTed query into a GET without it. Each connection's socket is handed to `watch`, which ends it at the deadline."""
    from http.client import HTTPConnection, HTTPSConnection
    from urllib.request import HTTPHandler, HTTPRedirectHandler, HTTPSHandler, build_opener

    class NoRedirect(HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            return None

    def watched(cls: type) -> type:
        class Watched(cls):
            def __init__(self, *args: Any, **kwargs: Any):
                super().__init__(*args, **kwargs)
                if watch is not None:
                    connect = self._create_connection
                    self._create_connection = lambda *a, **k: watch.attach(connect(*a, **k))
        return Watched

    class Http(HTTPHandler):
        def http_open(self, req):
            return self.do_open(watched(HTTPConnection), req)

    class Https(HTTPSHandler):
        def https_open(self, req):
            return self.do_open(watched(HTTPSConnection), req, context=self._context)

    return build_opener(Http(), Https(context=context), NoRedirect)


# Each byte as application/x-www-form-urlencoded writes it (urllib.parse.quote_plus with nothing extra safe): letters,
# digits and `_.-~` as they are, a space as `+`, any other byte as %XX.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.~-]")
_FORM = {chr(b): "+" if b == 0x20 else f"%{b:02X}" for b in range(256)}


def form_encode(params: dict[str, str]) -> str:
    """`urllib.parse.urlencode(params)`, one substitution per byte that needs escaping: a question naming thousands
    of GPUs is a few hundred kilobytes, which urllib encodes with a Python call per byte."""
    return "&".join(f"{_form(k)}={_form(v)}" for k, v in params.items())


def _form(text: str) -> str:
    # Latin-1 maps each UTF-8 byte to the character of the same number, so escaping works byte by byte.
    return _UNSAFE.sub(lambda m: _FORM[m.group()], text.encode().decode("latin-1"))


def _slow(base: str, timeout: float) -> ReportError:
    return ReportError(Problem("prometheus", f"{base} was too slow: no answer within {timeout:g}s (it is reachable; the query takes "
                                             "longer there). Try a shorter --window or a longer --timeout"), 1)


def _malformed(base: str, kind: str, where: str, what: str) -> ReportError:
    return ReportError(Problem("prometheus", f"{base} answered with a malformed {kind}: {where}: {what}"), 1)


def _labels(series: Any, i: int, base: str, kind: str) -> dict:
    if not isinstance(series, dict):
        raise _malformed(base, kind, f"result[{i}]", f"expected a series object, got {describe(series)}")
    metric = series.get("metric")
    if not isinstance(metric, dict) or not all(isinstance(v, str) for v in metric.values()):
        raise _malformed(base, kind, f"result[{i}].metric", f"expected a mapping of label names to strings, got {describe(metric)}")
    return metric


def _sample(sample: Any, where: str, base: str, kind: str) -> tuple[float, float]:
    if not (isinstance(sample, list) and len(sample) == 2 and isinstance(sample[0], (int, float))
            and not isinstance(sample[0], bool) and isinstance(sample[1], str)):
        raise _malformed(base, kind, where, f"expected [time, \"value\"], got {describe(sample)}")
    try:
        return float(sample[0]), float(sample[1])
    except ValueError:
        raise _malformed(base, kind, where, f"{describe(sample[1])} is not a number") from None


def _series_list(result: Any, base: str, kind: str) -> list:
    if result is None:
        return []
    if not isinstance(result, list):
        raise _malformed(base, kind, "result", f"expected a list of series, got {describe(result)}")
    return result


def matrix(result: Any, base: str) -> list[dict]:
    """A matrix result as plain series ({metric: {str: str}, values: [(time, value)]}), or ReportError (exit 1)."""
    series_out = []
    for i, series in enumerate(_series_list(result, base, "matrix")):
        metric, values = _labels(series, i, base, "matrix"), series.get("values")
        if not isinstance(values, list):
            raise _malformed(base, "matrix", f"result[{i}].values", f"expected a list of [time, \"value\"] samples, got {describe(values)}")
        try:  # the shape Prometheus always sends, checked in one pass; anything else gets the exact message below
            if all(type(t) in (int, float) and type(v) is str for t, v in values):
                series_out.append({"metric": metric, "values": [(float(t), float(v)) for t, v in values]})
                continue
        except (TypeError, ValueError):  # not pairs, or a value that is not a number
            pass
        series_out.append({"metric": metric, "values": [_sample(s, f"result[{i}].values[{j}]", base, "matrix") for j, s in enumerate(values)]})
    return series_out


def vector(result: Any, base: str) -> list[dict]:
    """A vector result as plain samples ({metric: {str: str}, value: float}), or ReportError (exit 1)."""
    series_list = _series_list(result, base, "vector")
    try:  # the shape Prometheus always sends, checked in one pass; anything else gets the exact message below
        out = [{"metric": metric, "value": float(value[1])} for series in series_list
               for metric, value in ((series["metric"], series["value"]),)
               if type(metric) is dict and _all_text(metric) and type(value) is list and len(value) == 2
               and type(value[0]) in (int, float) and type(value[1]) is str]
        if len(out) == len(series_list):
            return out
    except (TypeError, KeyError, ValueError):  # not a series object, or a value that is not a number
        pass
    out = []
    for i, series in enumerate(series_list):
        metric = _labels(series, i, base, "vector")
        out.append({"metric": metric, "value": _sample(series.get("value"), f"result[{i}].value", base, "vector")[1]})
    return out


def _all_text(metric: dict) -> bool:
    """Whether every label value is a string: joining raises TypeError at the first that is not, at C speed."""
    "".join(metric.values())
    return True


def _refusal(raw: bytes) -> str | None:
    """What a server said when it refused credentials, in a few words: gateways answer in JSON of their own shape
    ({"message": ...}, {"error": {"message": ...}}) or in plain text, not as the Prometheus API does."""
    try:
        doc = load_json(decode(raw))
    except ReadError:
        doc = None
    if isinstance(doc, dict):
        error = doc.get("error")
        text = doc.get("message") or doc.get("Message") or (error.get("message") if isinstance(error, dict) else error)
    else:
        text = raw.decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()] if isinstance(text, str) else []
    if not lines or lines[0].startswith("<"):  # nothing, or an HTML error page
        return None
    return lines[0] if len(lines[0]) <= 200 else lines[0][:197] + "..."


def _api_error(raw: bytes) -> str | None:
    try:
        doc = load_json(decode(raw))
    except ReadError:
        return None
    if isinstance(doc, dict) and doc.get("error"):
        kind, error = doc.get("errorType", "error"), doc["error"]
        kind = kind if isinstance(kind, str) and len(kind) <= 40 else "error"
        return f"{kind}: {error if isinstance(error, str) and len(error) <= 500 else describe(error, 500)}"
    return None
