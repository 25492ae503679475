"""Gcore's API as it fails: a fake of it on 127.0.0.1 (a real HTTP server in a thread) that echoes the API key, never
answers, answers 500 with a megabyte of text or with terminal escape codes, or redirects. Every failure reaches the user
as one line naming what gpupools was doing, the call and the status, with the API's text bounded, cleaned and without
the key, in bounded time: the providers run with the SDK's own client and timeouts (short ones here)."""

from __future__ import annotations

import json
import threading
import time
import traceback
import unicodedata
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpupools.clouds import gcore as decide

pytest.importorskip("gcore")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpupools.deploy import gcore as component  # noqa: E402  (needs the SDK)

# A permanent token in Gcore's form, <id>$<secret> (DOCS account-settings/api-tokens.mdx).
KEY = "7711$eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9-s3cr3t"
SECRET = KEY.split("$", 1)[1]
POOL = {"name": "infer", "flavor_id": "g3-ai-32-192-1500-l40s-48-1", "min_node_count": 1, "max_node_count": 3, "labels": {},
        "taints": {"nvidia.com/gpu": "present:NoSchedule"}, "auto_healing_enabled": True, "is_public_ipv4": False,
        "servergroup_policy": "soft-anti-affinity", "boot_volume_type": "ssd_hiiops", "boot_volume_size": 50}
PROPS = {"project_id": 1234567, "region_id": 76, "cluster_name": "ml-test", "pool": POOL}
CHECK_LIMITS = "POST /cloud/v2/k8s/clusters/1234567/76/pools/check_limits"
TIMEOUT = 0.3
REGIONS = (200, {"content-type": "application/json"},
           json.dumps({"count": 1, "results": [{"id": 76, "display_name": "Region-A", "state": "ACTIVE", "has_k8s": True}]}).encode())


class FakeApi:
    """A real HTTP server on 127.0.0.1 whose every answer is `self.answer(handler)`: (status, headers, body bytes), or
    None to never answer (until the test ends)."""

    def __init__(self):
        self.requests: list[tuple[str, str, str]] = []  # method, path, Authorization header
        self.answer = lambda handler: (200, {}, b"{}")
        self.stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def handle_one(self):
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                # The region listing every create asks first answers with the region the cases use, outside
                # `requests`: the cases are about the calls after it (its failures: tests/clouds/test_gcore_region.py).
                answer = REGIONS if self.path.startswith("/cloud/v1/regions") else None
                if answer is None:
                    fake.requests.append((self.command, self.path, self.headers.get("authorization", "")))
                    answer = fake.answer(self)
                if answer is None:
                    fake.stop.wait(30)
                    return
                status, headers, body = answer
                self.send_response(status)
                for name, value in {"content-length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def servers():
    """The fake API, and a second server a redirect could send the key to."""
    api, elsewhere = FakeApi(), FakeApi()
    yield api, elsewhere
    api.close()
    elsewhere.close()


@pytest.fixture
def api(servers, monkeypatch):
    fake, elsewhere = servers
    fake.requests.clear()
    elsewhere.requests.clear()
    monkeypatch.setenv("GCORE_API_KEY", KEY)
    monkeypatch.setenv("GCORE_BASE_URL", fake.url)
    monkeypatch.setenv("GCORE_POLLING_TIMEOUT_SECONDS", "5")
    return fake


def provider(retries: int = 1) -> component.PoolProvider:
    return component.PoolProvider(timeout=TIMEOUT, max_retries=retries)


def failure(call) -> tuple[str, float, BaseException]:
    start = time.monotonic()
    with pytest.raises(component.GcoreApiError) as exc:
        call()
    return str(exc.value), time.monotonic() - start, exc.value


def assert_one_clean_line(line: str, exc: BaseException | None = None):
    assert "\n" not in line and "\r" not in line, line
    assert not [c for c in line if unicodedata.category(c) in ("Cc", "Cf")], ascii(line)
    assert KEY not in line and SECRET not in line and SECRET[:20] not in line, line
    assert len(line) < 300 + 400, len(line)  # the API's text at most 300 characters, the rest gpupools' own words
    if exc is not None:
        # Nothing of the SDK's exception rides along (its response holds the API's whole text).
        assert exc.__cause__ is None and exc.__context__ is None
        assert KEY not in "".join(traceback.format_exception(exc))


def json_answer(status: int, body, headers: dict | None = None):
    return lambda handler: (status, {"content-type": "application/json", **(headers or {})}, json.dumps(body).encode())


# --------------------------------------------------------------------------------------------------------------------
# The cases, one by one


def test_a_401_that_echoes_the_key_shows_the_status_and_not_the_key(api):
    api.answer = json_answer(401, {"exception_class": "Unauthorized", "message": f"invalid token APIKey {KEY}", "request_id": "r-1",
                                   "headers": {"Authorization": f"APIKey {KEY}"}})
    line, _, exc = failure(lambda: provider().create(PROPS))
    assert line.startswith(f"creating Gcore pool ml-test/infer: Gcore's API answered {CHECK_LIMITS} with HTTP 401: Unauthorized: "
                           f"invalid token APIKey [redacted] (request r-1); check GCORE_API_KEY"), line
    assert_one_clean_line(line, exc)
    assert len(api.requests) == 1 and api.requests[0][2] == f"APIKey {KEY}"  # sent once: a 401 is not retried


@pytest.mark.parametrize("echo", [KEY, SECRET, KEY.replace("$", "%24"), "\x1b[1m".join(KEY), "\n".join(KEY[i:i + 8] for i in range(0, len(KEY), 8))])
def test_the_key_is_found_in_any_form_the_api_echoes_it(api, echo):
    api.answer = lambda handler: (403, {"content-type": "text/plain"}, f"forbidden for {echo}.".encode())
    line, _, exc = failure(lambda: provider().read("ml-test/infer", PROPS))
    assert line == ("reading Gcore pool ml-test/infer: Gcore's API answered GET /cloud/v2/k8s/clusters/1234567/76/ml-test/pools/infer "
                    "with HTTP 403: forbidden for [redacted].; check GCORE_API_KEY"), line
    assert_one_clean_line(line, exc)


def test_an_api_that_never_answers_fails_in_bounded_time(api):
    api.answer = lambda handler: None
    line, seconds, exc = failure(lambda: provider(retries=1).create(PROPS))
    assert line == f"creating Gcore pool ml-test/infer: Gcore's API did not answer {CHECK_LIMITS} within {TIMEOUT:g} s after 2 attempts"
    assert_one_clean_line(line, exc)
    assert len(api.requests) == 2
    # Two attempts of TIMEOUT each, and the SDK's first backoff (0.5 s, less up to a quarter of jitter).
    assert 2 * TIMEOUT <= seconds < 2 * TIMEOUT + 0.5 + 1.5, seconds


def test_a_500_with_a_megabyte_of_text_is_one_bounded_line_after_the_retries(api):
    api.answer = lambda handler: (500, {"content-type": "text/html", "retry-after-ms": "10"}, b"<pre>" + b"Traceback (most recent call)\n" * 40000)
    line, seconds, exc = failure(lambda: provider(retries=2).delete("ml-test/infer", PROPS))
    head = ("deleting Gcore pool ml-test/infer: Gcore's API answered DELETE /cloud/v2/k8s/clusters/1234567/76/ml-test/pools/infer with "
            "HTTP 500 after 3 attempts: <pre>Traceback (most recent call) Traceback")
    assert line.startswith(head) and line.endswith("…"), line
    assert len(line.split("after 3 attempts: ", 1)[1]) == 300  # the API's text, cut at 300 characters with its "…"
    assert_one_clean_line(line, exc)
    assert len(api.requests) == 3 and seconds < 5


def test_terminal_escape_codes_and_control_characters_are_taken_out(api):
    text = "\x1b[2J\x1b[H\x1b[31mpool\x1b[0m quota\r\n\x1b]0;owned\x07exceeded\x00\x08\x9b31m \u202eevil\u202c \x1bc!"
    api.answer = json_answer(422, {"exception_class": "QuotaLimitExceed", "message": text, "request_id": "f6393419"})
    line, _, exc = failure(lambda: provider().create(PROPS))
    assert line == (f"creating Gcore pool ml-test/infer: Gcore's API answered {CHECK_LIMITS} with HTTP 422: QuotaLimitExceed: pool quota "
                    f"exceeded evil ! (request f6393419)"), ascii(line)
    assert_one_clean_line(line, exc)


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_reported_and_not_followed(api, servers, status):
    _, elsewhere = servers
    api.answer = lambda handler: (status, {"location": f"{elsewhere.url}/steal?key={KEY}"}, b"")
    line, seconds, exc = failure(lambda: provider().create(PROPS))
    assert line == (f"creating Gcore pool ml-test/infer: Gcore's API answered {CHECK_LIMITS} with HTTP {status}, a redirect to "
                    f"{elsewhere.url}/steal?key=[redacted], which gpupools does not follow (the API key would go with it); check "
                    f"GCORE_BASE_URL"), line
    assert_one_clean_line(line, exc)
    assert elsewhere.requests == [] and len(api.requests) == 1 and seconds < 10


def test_a_failed_task_is_one_clean_line(api):
    def answer(handler):
        if handler.path.endswith("/check_limits"):
            return 200, {"content-type": "application/json"}, b"{}"
        if handler.command == "POST":
            return 200, {"content-type": "application/json"}, json.dumps({"tasks": ["t-1"]}).encode()
        return json_answer(200, {"id": "t-1", "state": "ERROR", "task_type": "create_k8s_pool", "user_id": 1, "created_on": "2026-11-25",
                                 "error": f"\x1b[31mNo capacity\x1b[0m for flavor\nrequested with {KEY}"})(handler)

    api.answer = answer
    line, _, exc = failure(lambda: provider().create(PROPS))
    assert line == "creating Gcore pool ml-test/infer: Gcore's task failed: No capacity for flavor requested with [redacted]", line
    assert_one_clean_line(line, exc)


def test_a_call_is_retried_only_when_the_sdk_says_so_with_its_backoff(api):
    api.answer = json_answer(400, {"message": "bad request"})
    failure(lambda: provider(retries=2).create(PROPS))
    assert len(api.requests) == 1
    api.requests.clear()
    api.answer = json_answer(503, {"message": "try later"})
    line, seconds, _ = failure(lambda: provider(retries=2).create(PROPS))
    assert len(api.requests) == 3 and "HTTP 503 after 3 attempts: try later" in line
    # The SDK waits 0.5 s, then 1 s, each less up to a quarter (gcore 0.59.0 _base_client.py _calculate_retry_timeout).
    assert 0.375 + 0.75 <= seconds < 1.5 + 2, seconds
    # The API may say itself whether to retry (the SDK's x-should-retry header), and the line counts what was made.
    for should, status, tries in (("false", 503, 1), ("true", 400, 3)):
        api.requests.clear()
        api.answer = json_answer(status, {"message": "as told"}, {"x-should-retry": should, "retry-after-ms": "1"})
        line, _, _ = failure(lambda: provider(retries=2).create(PROPS))
        assert len(api.requests) == tries and line.endswith(f"HTTP {status}{f' after {tries} attempts' if tries > 1 else ''}: as told"), line


def test_the_default_client_is_bounded_and_follows_no_redirect(monkeypatch):
    monkeypatch.setenv("GCORE_API_KEY", KEY)
    sdk = component.client(1, 2)
    assert sdk.max_retries == decide.API_RETRIES == 4  # Gcore's Terraform provider's own choice
    assert (sdk.timeout.read, sdk.timeout.connect) == (decide.API_TIMEOUT_SECONDS, decide.API_CONNECT_TIMEOUT_SECONDS) == (30, 10)
    assert sdk._client.follow_redirects is False
    custom = component.client(1, 2, timeout=2.5, max_retries=0)
    assert (custom.max_retries, custom.timeout.read, custom.timeout.connect) == (0, 2.5, 2.5)


def engine():
    """The servicer the engine talks to (pulumi's pulumi/dynamic/__main__.py, run as `python -m pulumi.dynamic`): that
    module starts its server when imported, so its code is run here without that last line."""
    from pathlib import Path

    import pulumi.dynamic

    path = Path(pulumi.dynamic.__file__).with_name("__main__.py")
    code, last = path.read_text().rstrip().rsplit("\n", 1)
    assert last == "main()"
    module: dict = {"__name__": "pulumi_dynamic_servicer"}
    exec(compile(code, str(path), "exec"), module)
    return module["DynamicResourceProviderServicer"]()


class Context:
    details = None

    def abort(self, code, details):
        import grpc

        self.details = details
        raise grpc.RpcError(details)


def through_engine(method: str, props: dict):
    """A provider call as the engine makes it: the inputs serialized as it sends them (every number a float), the
    provider itself serialized with them; (the answer, or None, and what the provider aborted with, or None)."""
    import asyncio

    import grpc
    from pulumi.dynamic.dynamic import serialize_provider
    from pulumi.runtime import proto, rpc

    wire = asyncio.run(rpc.serialize_properties({**props, "__provider": serialize_provider(provider())}, {}))
    request = proto.CreateRequest(properties=wire) if method == "Create" else proto.CheckRequest(olds=wire, news=wire)
    context = Context()
    try:
        return getattr(engine(), method)(request, context), None
    except grpc.RpcError:
        return None, context.details


def test_a_pool_as_the_engine_hands_it_over_passes_the_check_and_is_created_with_integers(api):
    sent = []

    def answer(handler):
        if handler.path.endswith("/check_limits"):
            return 200, {"content-type": "application/json"}, b"{}"
        if handler.command == "POST":
            sent.append(handler.path)
            return 200, {"content-type": "application/json"}, b'{"tasks": ["t-1"]}'
        if "/tasks/" in handler.path:
            return json_answer(200, {"id": "t-1", "state": "FINISHED", "task_type": "x", "user_id": 1, "created_on": "2026-11-25",
                                     "created_resources": {"k8s_pools": ["infer"]}})(handler)
        return json_answer(200, {**POOL, "id": "p", "node_count": 1, "status": "Running", "created_at": "2026-11-25",
                                 "crio_config": {}, "kubelet_config": {}, "security_group_ids": []})(handler)

    api.answer = answer
    checked, aborted = through_engine("Check", PROPS)
    assert aborted is None and list(checked.failures) == []
    created, aborted = through_engine("Create", PROPS)
    assert aborted is None and created.id == "ml-test/infer" and sent == ["/cloud/v2/k8s/clusters/1234567/76/ml-test/pools"]


def test_the_engine_reads_one_line_and_other_errors_keep_their_traceback(api, monkeypatch):
    """In the provider process the engine is told what traceback.format_exc() makes of an error (pulumi's
    pulumi/dynamic/__main__.py _abort_with_traceback): the Gcore line alone, while a failure of gpupools' own code
    keeps its frames."""
    import sys

    monkeypatch.setattr(component, "_in_provider_process", lambda: True)
    monkeypatch.setattr(sys, "tracebacklimit", 1000, raising=False)
    api.answer = json_answer(401, {"exception_class": "Unauthorized", "message": f"bad key {KEY}", "request_id": "r-9"})
    _, details = through_engine("Create", PROPS)
    assert details == (f"gpupools.deploy.gcore.GcoreApiError: creating Gcore pool ml-test/infer: Gcore's API answered "
                       f"{CHECK_LIMITS} with HTTP 401: Unauthorized: bad key [redacted] (request r-9); check GCORE_API_KEY\n"), details
    assert sys.tracebacklimit == 0
    _, broken = through_engine("Create", {k: v for k, v in PROPS.items() if k != "pool"})
    assert broken.startswith("Traceback (most recent call last):") and broken.rstrip().endswith("KeyError: 'pool'"), broken
    assert sys.tracebacklimit == 1000
    # Outside that process (a test, a program) nothing is changed.
    monkeypatch.setattr(component, "_in_provider_process", lambda: False)
    assert through_engine("Create", PROPS)[1].startswith("Traceback (most recent call last):")


# --------------------------------------------------------------------------------------------------------------------
# Fuzz: any error status, any body


ANSI = st.sampled_from(["\x1b[31m", "\x1b[0m", "\x1b[2J", "\x1b]0;title\x07", "\x1b[?25l", "\x9b1m", "\x1bc", "\x1b", "\r", "\n", "\x00",
                        "\u202e", "\u200b"])
TEXT = st.lists(st.one_of(st.text(max_size=40), ANSI, st.just(KEY), st.just(SECRET), st.just(f"APIKey {KEY}")), max_size=25).map("".join)
BODY = st.one_of(
    TEXT.map(lambda t: ("text/plain", t.encode("utf-8", "surrogatepass"))),
    st.binary(max_size=300).map(lambda b: ("application/octet-stream", b)),
    st.fixed_dictionaries({"exception_class": TEXT, "message": TEXT, "request_id": TEXT}).map(
        lambda d: ("application/json", json.dumps(d).encode())),
    st.integers(2_000, 60_000).map(lambda n: ("text/plain", (KEY + "\x1b[1m!") * (n // 60))),
)
OPERATIONS = {
    "create": (lambda p: p.create(PROPS), f"creating Gcore pool ml-test/infer: Gcore's API answered {CHECK_LIMITS} with HTTP "),
    "read": (lambda p: p.read("ml-test/infer", PROPS),
             "reading Gcore pool ml-test/infer: Gcore's API answered GET /cloud/v2/k8s/clusters/1234567/76/ml-test/pools/infer with HTTP "),
    "delete": (lambda p: p.delete("ml-test/infer", PROPS),
               "deleting Gcore pool ml-test/infer: Gcore's API answered DELETE /cloud/v2/k8s/clusters/1234567/76/ml-test/pools/infer with HTTP "),
}


@settings(max_examples=120, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
# 304 is left out: it has no body by definition, and the fake would send one.
@given(status=st.integers(300, 599).filter(lambda s: s != 304), body=BODY, operation=st.sampled_from(sorted(OPERATIONS)))
def test_any_error_answer_is_one_clean_bounded_line(api, status, body, operation):
    kind, content = body
    if isinstance(content, str):
        content = content.encode("utf-8", "surrogatepass")
    # Retries are immediate here (the API's Retry-After, which the SDK follows), so that the fuzz stays fast.
    api.answer = lambda handler: (status, {"content-type": kind, "retry-after-ms": "1"}, content)
    api.requests.clear()
    call, head = OPERATIONS[operation]
    line, seconds, exc = failure(lambda: call(provider(retries=1)))
    assert line.startswith(f"{head}{status}"), line
    assert_one_clean_line(line, exc)
    # The SDK retries 408, 409, 429 and 5xx (gcore 0.59.0 _base_client.py _should_retry), once here.
    assert len(api.requests) == (2 if status in (408, 409, 429) or status >= 500 else 1)
    # Bounded, not fast: the SDK's own defaults would wait minutes (60 s a request, two retries with back-off); the
    # margin is wide because the suite shares its cores.
    assert seconds < 10
