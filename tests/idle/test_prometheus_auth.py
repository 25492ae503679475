"""`gpupools idle` through a gate on 127.0.0.1 that lets a query reach a real Prometheus only with the right proof:
a SigV4 signature it recomputes itself, a Google or Azure token that the real google-auth and azure-identity
fetched from local token endpoints, or a bearer token with a tenant. Every refusal and every bad option is one line.
"""

from __future__ import annotations

import base64
import datetime
import hmac
import json
import os
import ssl
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.idle.promauth import AuthOptions, aws_region, resolve_kind

from test_idle_report import GPUS_SEEN, end, history_data, prometheus  # noqa: F401 - the real Prometheus fixture and its history

runner = CliRunner()

ACCESS_KEY, SECRET_KEY, SESSION_TOKEN = "AKIDGPUPOOLSTEST", "gpupools/test/secret/key/0123456789abcdef", "session-token-for-tests"
REGION = "eu-west-1"
GOOGLE_TOKEN, AZURE_TOKEN, BEARER = "ya29.gpupools-test-token", "eyJ.azure-test-token", "mimir-test-token"
IDENTITY_HEADER = "identity-header-secret"


class Gate:
    """What the gate demands of the current test: check(handler, body) returns None to forward, else (status, text)."""

    check = None
    tamper = None  # changes the body in transit, as a man in the middle would
    seen: list[dict] = []
    google_token = GOOGLE_TOKEN
    google_asked: list[dict] = []
    azure_asked: list[dict] = []
    upstream = ""


class Handler(BaseHTTPRequestHandler):
    def _answer(self, status: int, body: bytes, content_type: str = "application/json", headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - http.server's naming
        if self.path.startswith("/msi/"):
            return self._azure_token()
        self._gate(b"")

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/google/token":
            return self._google_token(body)
        self._gate(Gate.tamper(body) if Gate.tamper else body)

    def _gate(self, body: bytes) -> None:
        Gate.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body})
        refusal = Gate.check(self, body) if Gate.check else None
        if refusal is not None:
            return self._answer(refusal[0], refusal[1].encode(), "text/plain", *refusal[2:])
        path = self.path[self.path.index("/api/v1/"):]  # the workspace or project prefix is the gate's, not Prometheus'
        forwarded = urllib.request.Request(Gate.upstream + path, data=body if self.command == "POST" else None, method=self.command,
                                           headers={"Content-Type": self.headers.get("Content-Type", "application/x-www-form-urlencoded")})
        with urllib.request.urlopen(forwarded, timeout=60) as r:
            self._answer(r.status, r.read())

    def _google_token(self, body: bytes) -> None:
        """Google's OAuth token endpoint for service accounts: a JWT assertion signed with the account's key."""
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        claims = verify_jwt(form.get("assertion", ""), Gate.google_public_key)
        Gate.google_asked.append({"grant_type": form.get("grant_type"), **(claims or {})})
        if claims is None or form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return self._answer(400, json.dumps({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}).encode())
        self._answer(200, json.dumps({"access_token": Gate.google_token, "expires_in": 3600, "token_type": "Bearer"}).encode())

    def _azure_token(self) -> None:
        """App Service's managed-identity endpoint: a GET with the resource, answered if the identity header matches."""
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        Gate.azure_asked.append({"query": query, "header": self.headers.get("X-IDENTITY-HEADER")})
        if self.headers.get("X-IDENTITY-HEADER") != IDENTITY_HEADER:
            return self._answer(401, b'{"error": "unauthorized"}')
        self._answer(200, json.dumps({"access_token": AZURE_TOKEN, "expires_on": str(int(time.time()) + 3600),
                                      "resource": query.get("resource"), "token_type": "Bearer"}).encode())

    def log_message(self, *args):
        pass


def serve(context: ssl.SSLContext | None = None):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if context is not None:
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


@pytest.fixture(scope="module")
def gate(prometheus):  # noqa: F811 - the fixture imported above
    Gate.upstream = prometheus
    httpd = serve()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def fresh_gate(monkeypatch, tmp_path):
    Gate.check, Gate.tamper, Gate.google_token = None, None, GOOGLE_TOKEN
    Gate.seen, Gate.google_asked, Gate.azure_asked = [], [], []
    # No credentials from this machine: each test gives the ones it means
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "AWS_ROLE_ARN", "AWS_REGION", "AWS_DEFAULT_REGION", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_ID",
                 "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_FEDERATED_TOKEN_FILE",
                 "AZURE_USERNAME", "AZURE_TOKEN_CREDENTIALS", "IDENTITY_ENDPOINT", "IDENTITY_HEADER", "IDENTITY_SERVER_THUMBPRINT",
                 "IMDS_ENDPOINT", "MSI_ENDPOINT", "MSI_SECRET", "GPUPOOLS_PROMETHEUS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))  # no user ADC from gcloud
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # and no metadata server probe


def idle(url: str, *args: str):
    return runner.invoke(app, ["idle", "--prometheus", url, "--window", "1h", "--json", *args])


def assert_reported(result) -> None:
    """The report came back through the gate: every GPU of the real Prometheus' history is there."""
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["gpus_seen"] == GPUS_SEEN
    assert Gate.seen, "no query went through the gate"


def assert_refused(result, *words: str) -> str:
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: prometheus: ") and "refused authentication" in line and "cannot reach" not in line, line
    for word in words:
        assert word in line, line
    return line


def requires_bearer(token: str, refusal: str):
    """A gate that forwards only requests carrying `token`, and answers others 401 as the service would."""
    return lambda handler, body: None if handler.headers.get("Authorization") == f"Bearer {token}" else (401, refusal)


# --- SigV4 (Amazon Managed Service for Prometheus) ---

def sigv4_check(handler, body: bytes):
    """Recompute the signature from what arrived, with the secret the gate knows, as AMP would."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = handler.headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return 401, "missing SigV4 signature"
    fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    key, date, region, service, terminator = fields["Credential"].split("/")
    if (key, region, service, terminator) != (ACCESS_KEY, REGION, "aps", "aws4_request"):
        return 403, f"credential scope {fields['Credential']} is not {ACCESS_KEY}/.../{REGION}/aps/aws4_request"
    stamp = handler.headers.get("X-Amz-Date", "")
    sent = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    if abs(time.time() - sent.timestamp()) > 300 or date != stamp[:8]:
        return 403, "signature expired"
    if handler.headers.get("X-Amz-Security-Token") != SESSION_TOKEN:
        return 403, "security token missing"
    signed = fields["SignedHeaders"].split(";")
    request = AWSRequest(method=handler.command, url=f"http://{handler.headers['Host']}{handler.path}", data=body,
                         headers={name: handler.headers[name] for name in signed})
    request.context["timestamp"] = stamp
    signer = SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN), "aps", REGION)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if not hmac.compare_digest(expected, fields["Signature"]):
        return 403, "The request signature we calculated does not match the signature you provided."
    return None


@pytest.fixture
def aws_env(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    Gate.check = sigv4_check


def test_sigv4_signed_queries_pass(gate, aws_env):
    result = idle(f"{gate}/workspaces/ws-test", "--prometheus-auth", "aws", "--aws-region", REGION)
    assert_reported(result)
    assert all(s["method"] == "POST" and s["path"].startswith("/workspaces/ws-test/api/v1/") for s in Gate.seen)
    assert all(f"/{REGION}/aps/aws4_request" in s["headers"]["Authorization"] for s in Gate.seen)


def test_sigv4_with_a_wrong_secret_is_refused(gate, aws_env, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY[::-1])
    assert_refused(idle(f"{gate}/workspaces/ws-test", "--prometheus-auth", "aws", "--aws-region", REGION),
                   "HTTP 403", "signature we calculated does not match")


def test_sigv4_covers_the_body(gate, aws_env):
    Gate.tamper = lambda body: body.replace(b"DCGM", b"XCGM")
    assert_refused(idle(f"{gate}/workspaces/ws-test", "--prometheus-auth", "aws", "--aws-region", REGION), "does not match")


def test_sigv4_for_another_region_is_refused(gate, aws_env):
    assert_refused(idle(f"{gate}/workspaces/ws-test", "--prometheus-auth", "aws", "--aws-region", "us-east-1"), "credential scope")


def test_amp_region_and_kind_come_from_the_workspace_url():
    url = "https://aps-workspaces.ap-southeast-2.amazonaws.com/workspaces/ws-0a1b2c3d-4e5f"
    assert aws_region(url, None) == "ap-southeast-2"
    assert aws_region(url, "us-east-1") == "us-east-1"  # explicit wins, e.g. behind a proxy
    assert aws_region("https://aps-workspaces.cn-north-1.amazonaws.com.cn/workspaces/ws-1", None) == "cn-north-1"
    assert resolve_kind("auto", "aps-workspaces.us-east-1.amazonaws.com", AuthOptions(), {}) == "aws"
    assert resolve_kind("auto", "monitoring.googleapis.com", AuthOptions(), {}) == "gcp"
    assert resolve_kind("auto", "amw-abc.westeurope.prometheus.monitor.azure.com", AuthOptions(), {}) == "azure"
    assert resolve_kind("auto", "mimir.internal", AuthOptions(), {"GPUPOOLS_PROMETHEUS_TOKEN": "t"}) == "bearer"
    assert resolve_kind("auto", "prometheus.internal", AuthOptions(), {}) == "none"


# --- Google Cloud Managed Service for Prometheus ---

def b64url(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def verify_jwt(assertion: str, public_key) -> dict | None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    try:
        head, payload, signature = assertion.encode().split(b".")
        public_key.verify(base64.urlsafe_b64decode(signature + b"=" * (-len(signature) % 4)), head + b"." + payload,
                          padding.PKCS1v15(), hashes.SHA256())
        return json.loads(base64.urlsafe_b64decode(payload + b"=" * (-len(payload) % 4)))
    except (ValueError, InvalidSignature):
        return None


@pytest.fixture
def google_account(gate, tmp_path, monkeypatch):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    Gate.google_public_key = key.public_key()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    account = {"type": "service_account", "project_id": "gpupools-test", "private_key_id": "k1", "private_key": pem,
               "client_email": "idle-report@gpupools-test.iam.gserviceaccount.com", "client_id": "1",
               "token_uri": f"{gate}/google/token"}
    path = tmp_path / "service-account.json"
    path.write_text(json.dumps(account))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))

    Gate.check = requires_bearer(GOOGLE_TOKEN, "Request had invalid authentication credentials.")
    return f"{gate}/v1/projects/gpupools-test/location/global/prometheus"


def test_google_token_from_application_default_credentials(google_account):
    assert_reported(idle(google_account, "--prometheus-auth", "gcp"))
    (asked,) = Gate.google_asked  # one token for all queries
    assert asked["scope"] == "https://www.googleapis.com/auth/monitoring.read" and asked["iss"] == "idle-report@gpupools-test.iam.gserviceaccount.com"
    # Google's query API takes its parameters in the URL and no body
    assert all(s["method"] == "GET" and s["body"] == b"" and "query=" in s["path"] for s in Gate.seen)


def test_google_token_the_server_does_not_accept(google_account):
    Gate.google_token = "ya29.someone-else"
    assert_refused(idle(google_account, "--prometheus-auth", "gcp"), "HTTP 401", "invalid authentication credentials")


def test_google_token_endpoint_refusing_the_key_is_one_line_exit_1(google_account):
    from cryptography.hazmat.primitives.asymmetric import rsa

    Gate.google_public_key = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    result = idle(google_account, "--prometheus-auth", "gcp")
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: --prometheus-auth: gcp: cannot get an access token: ") and "invalid_grant" in line
    assert not Gate.seen  # no query went out without a token


# --- Azure Monitor managed Prometheus ---

@pytest.fixture
def azure_identity(gate, monkeypatch):
    monkeypatch.setenv("IDENTITY_ENDPOINT", f"{gate}/msi/token")
    monkeypatch.setenv("IDENTITY_HEADER", IDENTITY_HEADER)

    Gate.check = requires_bearer(AZURE_TOKEN, '{"error": {"code": "InvalidAuthenticationToken", "message": "The access token is invalid."}}')
    return f"{gate}/amw"


def test_azure_token_from_managed_identity(azure_identity):
    assert_reported(idle(azure_identity, "--prometheus-auth", "azure"))
    assert Gate.azure_asked and all(a["header"] == IDENTITY_HEADER for a in Gate.azure_asked)
    # App Service's protocol takes the resource, i.e. the scope without /.default
    assert {a["query"]["resource"] for a in Gate.azure_asked} == {"https://prometheus.monitor.azure.com"}


def test_azure_identity_endpoint_refusing_is_one_line_exit_1(azure_identity, monkeypatch):
    monkeypatch.setenv("IDENTITY_HEADER", "wrong-header")
    result = idle(azure_identity, "--prometheus-auth", "azure")
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: --prometheus-auth: azure: cannot get a token for https://prometheus.monitor.azure.com/.default")
    assert not Gate.seen


def test_azure_token_the_server_does_not_accept(azure_identity):
    Gate.check = lambda handler, body: (403, '{"error": {"code": "Forbidden", "message": "Monitoring Data Reader role required"}}')
    assert_refused(idle(azure_identity, "--prometheus-auth", "azure"), "HTTP 403", "Monitoring Data Reader role required")


# --- Bearer token and tenant (Thanos, Mimir, Cortex) ---

def mimir_check(handler, body):
    if not handler.headers.get("X-Scope-OrgID"):
        return 401, "no org id"
    if handler.headers.get("Authorization") != f"Bearer {BEARER}" or handler.headers["X-Scope-OrgID"] != "team-a|team-b":
        return 403, "forbidden"
    return None


def test_bearer_token_from_file_and_tenant(gate, tmp_path):
    Gate.check = mimir_check
    (tmp_path / "token").write_text(BEARER + "\n")
    assert_reported(idle(gate, "--token-file", str(tmp_path / "token"), "--tenant", "team-a|team-b"))  # auto: bearer


def test_bearer_token_from_environment(gate, monkeypatch):
    Gate.check = mimir_check
    monkeypatch.setenv("GPUPOOLS_PROMETHEUS_TOKEN", BEARER)
    assert_reported(idle(gate, "--prometheus-auth", "bearer", "--tenant", "team-a|team-b"))


def test_thanos_tenant_header(gate, monkeypatch):
    def thanos_check(handler, body):
        if handler.headers.get("THANOS-TENANT") != "team-a" or "X-Scope-OrgID" in handler.headers:
            return 403, "tenant header missing"
        return None

    Gate.check = thanos_check
    monkeypatch.setenv("GPUPOOLS_PROMETHEUS_TOKEN", BEARER)
    assert_reported(idle(gate, "--tenant", "team-a", "--tenant-header", "THANOS-TENANT"))
    assert all(s["headers"]["Authorization"] == f"Bearer {BEARER}" for s in Gate.seen)  # auto: the environment's token


def test_missing_tenant_and_wrong_token_are_refused(gate, monkeypatch, tmp_path):
    Gate.check = mimir_check
    monkeypatch.setenv("GPUPOOLS_PROMETHEUS_TOKEN", BEARER)
    assert_refused(idle(gate, "--prometheus-auth", "bearer"), "HTTP 401", "no org id")
    (tmp_path / "token").write_text("not-the-token")
    assert_refused(idle(gate, "--token-file", str(tmp_path / "token"), "--tenant", "team-a|team-b"), "HTTP 403", "forbidden")


def test_redirects_are_not_followed_with_credentials(gate, tmp_path):
    """urllib would resend the token and tenant to wherever Location points; the report stops and names it."""
    (tmp_path / "token").write_text(BEARER)
    Gate.check = lambda handler, body: (302, "moved", {"Location": "http://127.0.0.1:9/stolen/api/v1/query"})
    result = idle(gate, "--token-file", str(tmp_path / "token"), "--tenant", "team-a")
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line == f"error: --prometheus: {gate} redirects to 'http://127.0.0.1:9/stolen/api/v1/query'; give the URL it redirects to"
    assert Gate.seen and all(s["path"].startswith("/api/v1/") for s in Gate.seen)  # every request went to the gate only


# --- A private CA ---

def test_private_ca(gate, tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpupools test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM)
                                          + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                              serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "server.pem")
    httpd = serve(context)
    try:
        url = f"https://127.0.0.1:{httpd.server_address[1]}"
        assert_reported(idle(url, "--ca-file", str(tmp_path / "ca.pem")))
        result = idle(url)
        assert result.exit_code == 1
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("error: --prometheus: cannot verify ") and "--ca-file" in line
    finally:
        httpd.shutdown()
        httpd.server_close()


# --- Bad input: one line, exit 2, before any query ---

def write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("args, option, says", [
    (["--prometheus-auth", "kerberos"], "--prometheus-auth", "allowed: auto, none, bearer, aws, gcp, azure"),
    (["--prometheus-auth", "bearer"], "--prometheus-auth", "bearer needs a token: --token-file FILE or $GPUPOOLS_PROMETHEUS_TOKEN"),
    (["--token-file", "{tmp}/absent"], "--token-file", "does not exist"),
    (["--token-file", "{tmp}"], "--token-file", "is a directory"),
    (["--token-file", "{empty}"], "--token-file", "is empty"),
    (["--token-file", "{two_lines}"], "--token-file", "must hold one token"),
    (["--token-file", "{binary}"], "--token-file", "is not text"),
    (["--prometheus-auth", "bearer", "--token-file", "{token}", "--tenant", "team/a"], "--tenant", "is not a tenant ID"),
    (["--prometheus-auth", "none", "--tenant", ".."], "--tenant", "is not a tenant ID"),
    (["--prometheus-auth", "none", "--tenant", "a b"], "--tenant", "is not a tenant ID"),
    (["--tenant-header", "THANOS-TENANT"], "--tenant-header", "only with --tenant"),
    (["--tenant", "a", "--tenant-header", "Tenant: a"], "--tenant-header", "is not a header name"),
    (["--tenant", "a", "--tenant-header", "Authorization"], "--tenant-header", "is not a header name"),
    (["--prometheus-auth", "aws"], "--aws-region", "does not name a region"),
    (["--prometheus-auth", "aws", "--aws-region", "eu west 1"], "--aws-region", "is not an AWS region"),
    (["--prometheus-auth", "bearer", "--token-file", "{token}", "--aws-region", "us-east-1"], "--aws-region", "only with --prometheus-auth aws"),
    (["--aws-region", "us-east-1"], "--aws-region", "only with --prometheus-auth aws (this is none)"),
    (["--prometheus-auth", "aws", "--aws-region", "us-east-1", "--token-file", "{token}"], "--token-file", "only with --prometheus-auth bearer"),
    (["--ca-file", "{token}"], "--ca-file", "only for an https"),
])
def test_bad_auth_options_are_one_line_exit_2(tmp_path, args, option, says):
    files = {"tmp": str(tmp_path), "empty": write(tmp_path / "empty", b" \n"), "two_lines": write(tmp_path / "two", b"abc\ndef\n"),
             "binary": write(tmp_path / "bin", b"\xff\xfe"), "token": write(tmp_path / "token", b"t0ken\n")}
    result = runner.invoke(app, ["idle", "--prometheus", "http://127.0.0.1:9", *[a.format(**files) for a in args]])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {option}: ") and says in line, line


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text("t0ken")
    path.chmod(0)
    result = runner.invoke(app, ["idle", "--prometheus", "http://127.0.0.1:9", "--token-file", str(path)])
    assert result.exit_code == 2 and result.stderr.startswith("error: --token-file: ") and "cannot read" in result.stderr


@pytest.mark.parametrize("url, option, says", [
    ("https://aps-workspaces.us-east-1.amazonaws.com/", "--prometheus", "/workspaces/ws-ID"),
    ("https://monitoring.googleapis.com/v1/projects/p", "--prometheus", "/location/global/prometheus"),
    ("https://prometheus.internal", "--ca-file", "cannot read"),
])
def test_bad_urls_for_the_service(tmp_path, url, option, says):
    extra = ["--ca-file", str(tmp_path / "absent.pem")] if option == "--ca-file" else []
    result = runner.invoke(app, ["idle", "--prometheus", url, *extra])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {option}: ") and says in line, line


@pytest.mark.parametrize("kind, modules", [
    ("aws", ["botocore", "botocore.session", "botocore.auth", "botocore.awsrequest", "botocore.exceptions"]),
    ("gcp", ["google.auth", "google.auth.transport.urllib3"]),
    ("azure", ["azure.identity"]),
])
def test_missing_extra_is_a_hint_exit_2(monkeypatch, kind, modules):
    for name in modules:
        monkeypatch.setitem(__import__("sys").modules, name, None)
    result = runner.invoke(app, ["idle", "--prometheus", "http://127.0.0.1:9", "--prometheus-auth", kind, "--aws-region", "us-east-1"]
                           if kind == "aws" else ["idle", "--prometheus", "http://127.0.0.1:9", "--prometheus-auth", kind])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: --prometheus-auth: {kind} needs ") and f"pip install 'gpupools[{kind}]'" in line


def test_no_cloud_credentials_is_one_line_exit_2(tmp_path, monkeypatch):
    result = runner.invoke(app, ["idle", "--prometheus", "http://127.0.0.1:9", "--prometheus-auth", "aws", "--aws-region", "us-east-1"])
    assert result.exit_code == 2 and result.stderr.strip() == \
        "error: --prometheus-auth: aws: no AWS credentials found (environment, ~/.aws profile, SSO, instance or pod role)"
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    result = runner.invoke(app, ["idle", "--prometheus", "http://127.0.0.1:9", "--prometheus-auth", "gcp"])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: --prometheus-auth: gcp: no Application Default Credentials: ") and "absent.json" in line
