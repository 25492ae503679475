"""A small client for the Prometheus HTTP API (stdlib urllib): instant and range queries, every failure one line.

Everything that reads PromQL answers (`gpupools idle`) goes through `Prometheus`, so one place decides how a
request is sent (timeouts, headers, signing for managed services) and how an answer is checked: Prometheus always
answers in one shape, and anything else (a proxy's page, a truncated or hand-made answer) is server trouble the
user reads as one line, not a traceback from deep inside a report.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlencode, urlsplit

from gpupools.stack.errors import Problem, describe
from gpupools.stack.reading import ReadError, decode, load_answer_json, load_json

DEFAULT_TIMEOUT = 120  # Prometheus' own default query timeout (--query.timeout=2m)
# A day at one-minute steps is about 60 kB per series; 256 MiB is several thousand series and still fits in memory.
MAX_ANSWER_BYTES = 256 * 2**20

# (method, url, headers, body) -> headers to add: how a managed service's request is authenticated (a signature or a
# token), computed per request because signatures cover the body and tokens expire.
Signer = Callable[[str, str, dict[str, str], bytes], dict[str, str]]


class ReportError(Exception):
    """A problem the user should read as one line; `code` is the exit status (2 bad input, 1 server trouble)."""

    def __init__(self, problem: Problem, code: int):
        super().__init__(str(problem))
        self.problem = problem
        self.code = code


def parse_url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ReportError(Problem("--prometheus", f"{text!r} is not an http(s) URL such as http://prometheus:9090"), 2)
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ReportError(Problem("--prometheus", f"{text!r} has an invalid port"), 2) from None
    return text.rstrip("/")


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
        message says the server was slow, not unreachable."""
        from http.client import HTTPException
        from urllib.error import HTTPError, URLError
        from urllib.request import Request

        base, timeout = self.url, self.timeout
        url = f"{base}/api/v1/{endpoint}"
        fields = urlencode({**params, "timeout": f"{timeout:g}s"})
        if self.method == "GET":
            url, body, headers = f"{url}?{fields}", b"", {"Accept": "application/json", **self.headers}
        else:
            body = fields.encode()
            headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json", **self.headers}
        if self.signer is not None:
            headers.update(self.signer(self.method, url, dict(headers), body))
        request = Request(url, data=body if self.method == "POST" else None, headers=headers, method=self.method)
        try:
            with _opener(self.ssl_context).open(request, timeout=timeout + 2) as response:  # Prometheus stops first
                raw = response.read(MAX_ANSWER_BYTES + 1)
                missing = getattr(response, "length", None)  # bytes Content-Length promised that never came
        except HTTPError as exc:
            try:
                raw = exc.read(64 * 1024)
            except (OSError, HTTPException):
                raw = b""
            if 300 <= exc.code < 400:
                where = describe(exc.headers.get("Location") or "elsewhere", 200)
                raise ReportError(Problem("--prometheus", f"{base} redirects to {where}; give the URL it redirects to"), 1) from None
            if exc.code in (401, 403):  # the server is there and answered: only the credentials are wrong
                detail = _refusal(raw)
                raise ReportError(Problem("prometheus", f"{base} refused authentication (HTTP {exc.code} {exc.reason})"
                                                        + (f": {detail}" if detail else "")
                                                        + "; check --prometheus-auth and its credentials"), 1) from None
            message = _api_error(raw) or f"HTTP {exc.code} {exc.reason}"
            if message.startswith("timeout:"):
                raise _slow(base, timeout) from None
            raise ReportError(Problem("prometheus", f"{base} answered: {message}"), 1) from None
        except (socket.timeout, TimeoutError):
            raise _slow(base, timeout) from None
        except (URLError, OSError) as exc:
            if isinstance(getattr(exc, "reason", None), (socket.timeout, TimeoutError)):
                raise _slow(base, timeout) from None
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise ReportError(Problem("--prometheus", f"cannot verify {base}'s certificate ({reason.verify_message}); "
                                                          "a private CA's bundle goes in --ca-file"), 1) from None
            raise ReportError(Problem("--prometheus", f"cannot reach {base}: {getattr(reason, 'strerror', None) or reason}"), 1) from None
        except HTTPException as exc:  # a body cut short (IncompleteRead), a broken status line
            raise ReportError(Problem("prometheus", f"{base} sent a broken answer: {describe(str(exc) or type(exc).__name__)}"), 1) from None
        if missing and len(raw) <= MAX_ANSWER_BYTES:
            raise ReportError(Problem("prometheus", f"{base} sent a broken answer: the body was cut short after {len(raw):,} bytes, "
                                                    f"{missing:,} bytes missing"), 1)
        if len(raw) > MAX_ANSWER_BYTES:
            raise ReportError(Problem("prometheus", f"{base} answered with more than {MAX_ANSWER_BYTES // 2**20} MiB; "
                                                    f"use a shorter --window"), 1)
        try:
            doc = load_answer_json(decode(raw))
        except ReadError as exc:
            raise ReportError(Problem("--prometheus", f"{base} did not answer like a Prometheus API ({exc})"), 1) from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            message = _api_error(raw) or "unexpected answer"
            raise ReportError(Problem("prometheus", f"{base} answered: {message}"), 1)
        data = doc.get("data")
        if not isinstance(data, dict) or data.get("resultType") != kind:
            got = data.get("resultType") if isinstance(data, dict) else None
            raise ReportError(Problem("prometheus", f"{base} answered with {describe(got)}, expected a {kind}"), 1)
        return data


def _opener(context: ssl.SSLContext | None):
    """urllib without redirects: it would resend a token or tenant to wherever the Location points, and turn the
    POSTed query into a GET without it."""
    from urllib.request import HTTPRedirectHandler, HTTPSHandler, build_opener

    class NoRedirect(HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            return None

    return build_opener(HTTPSHandler(context=context), NoRedirect)


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
    out = []
    for i, series in enumerate(_series_list(result, base, "vector")):
        metric = _labels(series, i, base, "vector")
        out.append({"metric": metric, "value": _sample(series.get("value"), f"result[{i}].value", base, "vector")[1]})
    return out


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
