"""How `gpupools idle` proves who it is to a Prometheus that wants to know: managed services (Amazon, Google, Azure)
and multi-tenant stores (Thanos, Mimir, Cortex) behind a token.

Options are checked here, before any query, so every mistake is one line naming the option (exit 2). A cloud's
credential library is imported only when that cloud's authentication is chosen: a plain install stays small, and a
missing extra is a one-line hint rather than an ImportError.

Secrets never come from the command line, where shell history and `ps` would keep them: a bearer token is read
from a file or from an environment variable, and cloud credentials from wherever the cloud's own library looks.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping
from urllib.parse import SplitResult, urlsplit

from gpupools.stack.errors import Problem
from gpupools.idle.promapi import Prometheus, ReportError, Signer, split_userinfo

KINDS = ("auto", "none", "bearer", "aws", "gcp", "azure")
TOKEN_ENV = "GPUPOOLS_PROMETHEUS_TOKEN"
TENANT_HEADER = "X-Scope-OrgID"
AMP_SERVICE = "aps"  # SigV4 service name of Amazon Managed Service for Prometheus
# Read-only is enough: the report only queries
GCP_SCOPE = "https://www.googleapis.com/auth/monitoring.read"
AZURE_SCOPE = "https://prometheus.monitor.azure.com/.default"

_AMP_HOST = re.compile(r"aps-workspaces\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?")
_AMP_PATH = re.compile(r"/workspaces/ws-[A-Za-z0-9-]+")
_GCP_HOST = "monitoring.googleapis.com"
_GCP_PATH = re.compile(r"/v1/projects/[^/]+/location/global/prometheus")
_AZURE_HOST = re.compile(r".+\.prometheus\.monitor\.azure\.(com|us|cn)")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")
# Mimir's and Cortex's tenant IDs; `|` joins several for a federated query
_TENANT = re.compile(r"[A-Za-z0-9!\-_.*'()]{1,150}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")  # an HTTP token (RFC 9110)
_NOT_TENANT_HEADERS = {"authorization", "host", "content-type", "content-length", "accept", "x-amz-date", "x-amz-security-token"}
_TOKEN = re.compile(r"[\x21-\x7e]+")  # what an HTTP header carries unescaped
_MAX_TOKEN_BYTES = 64 * 1024


@dataclass(frozen=True)
class AuthOptions:
    """The command line's authentication options, as given (None: not given)."""

    kind: str = "auto"
    region: str | None = None
    token_file: Path | None = None
    tenant: str | None = None
    ca_file: Path | None = None
    tenant_header: str | None = None


def missing_extra(kind: str, library: str) -> ReportError:
    return ReportError(Problem("--prometheus-auth", f"{kind} needs {library}, which a plain install leaves out: "
                                                    f"pip install 'gpupools[{kind}]'"), 2)


def connect(url: str, timeout: float, options: AuthOptions, environ: Mapping[str, str] = os.environ) -> Prometheus:
    """A `Prometheus` for `url` that authenticates as `options` say, or ReportError (exit 2) naming the option.

    A user and password in the URL (http://user:password@host, as curl and Grafana take them) become HTTP basic
    authentication; they are taken out of the URL, so no message shows them.
    """
    url, userinfo = split_userinfo(url)
    parts = urlsplit(url)
    kind = resolve_kind(options.kind, parts.hostname or "", options, environ)
    if userinfo is not None and kind != "none":
        raise ReportError(Problem("--prometheus", f"a user and password in the URL are basic authentication, which does not go with "
                                                  f"--prometheus-auth {kind}; give one or the other"), 2)
    service = MANAGED.get(kind)
    if options.region is not None and not (service and service.takes_region):
        raise ReportError(Problem("--aws-region", f"only with --prometheus-auth aws (this is {kind})"), 2)
    if options.token_file is not None and kind != "bearer":
        raise ReportError(Problem("--token-file", f"only with --prometheus-auth bearer (this is {kind})"), 2)
    headers: dict[str, str] = {}
    if options.tenant_header is not None and options.tenant is None:
        raise ReportError(Problem("--tenant-header", "only with --tenant"), 2)
    if options.tenant is not None:
        headers[tenant_header(options.tenant_header)] = parse_tenant(options.tenant)
    context = ca_context(options.ca_file, parts.scheme) if options.ca_file is not None else None
    signer: Signer | None = None
    method = "POST"
    secrets: tuple[str, ...] = ()
    if userinfo is not None:
        import base64

        headers["Authorization"] = "Basic " + base64.b64encode(f"{userinfo[0]}:{userinfo[1]}".encode()).decode()
        secrets = (userinfo[1], headers["Authorization"].split(" ", 1)[1])
    if kind == "bearer":
        token = bearer_token(options.token_file, environ)
        headers["Authorization"] = f"Bearer {token}"
        secrets = (token,)
    elif service is not None:
        signer, method = service.sign(url, parts, options)
    return Prometheus(url, timeout=timeout, headers=headers, signer=signer, method=method, ssl_context=context, secrets=secrets)


def resolve_kind(kind: str, host: str, options: AuthOptions, environ: Mapping[str, str]) -> str:
    """`auto` picks the managed service by its host, else a bearer token when one is given, else none."""
    kind = kind.lower()
    if kind not in KINDS:
        raise ReportError(Problem("--prometheus-auth", f"{kind!r} is not an authentication gpupools knows; allowed: {', '.join(KINDS)}"), 2)
    if kind != "auto":
        return kind
    for service in MANAGED.values():
        if service.serves(host):
            return service.kind
    if options.token_file is not None or environ.get(TOKEN_ENV):
        return "bearer"
    return "none"


def tenant_header(name: str | None) -> str:
    """Mimir's and Cortex's header unless told otherwise; Thanos reads THANOS-TENANT unless configured."""
    if name is None:
        return TENANT_HEADER
    if not _HEADER_NAME.fullmatch(name) or name.lower() in _NOT_TENANT_HEADERS:
        raise ReportError(Problem("--tenant-header", f"{name!r} is not a header name for a tenant, such as {TENANT_HEADER} or THANOS-TENANT"), 2)
    return name


def parse_tenant(text: str) -> str:
    tenants = text.split("|")
    for tenant in tenants:
        if not _TENANT.fullmatch(tenant) or tenant in (".", "..") or tenant == "__mimir_cluster":
            raise ReportError(Problem("--tenant", f"{text!r} is not a tenant ID: up to 150 of A-Z a-z 0-9 ! - _ . * ' ( ), "
                                                  "not '.' or '..'; several joined by '|'"), 2)
    return text


def ca_context(path: Path, scheme: str) -> ssl.SSLContext:
    if scheme != "https":
        raise ReportError(Problem("--ca-file", "only for an https --prometheus URL"), 2)
    try:
        return ssl.create_default_context(cafile=str(path))
    except OSError as exc:
        raise ReportError(Problem("--ca-file", f"{str(path)!r}: cannot read: {exc.strerror or exc}"), 2) from None
    except ssl.SSLError:
        raise ReportError(Problem("--ca-file", f"{str(path)!r} holds no PEM certificate"), 2) from None


def bearer_token(path: Path | None, environ: Mapping[str, str]) -> str:
    """The token from `path`, else from $GPUPOOLS_PROMETHEUS_TOKEN; read once, before the first query."""
    if path is None:
        text = environ.get(TOKEN_ENV, "")
        if not text.strip():
            raise ReportError(Problem("--prometheus-auth", f"bearer needs a token: --token-file FILE or ${TOKEN_ENV}"), 2)
        return _token(text, f"${TOKEN_ENV}", "--prometheus-auth")
    name = str(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_TOKEN_BYTES + 1)
    except FileNotFoundError:
        raise ReportError(Problem("--token-file", f"{name!r} does not exist"), 2) from None
    except IsADirectoryError:
        raise ReportError(Problem("--token-file", f"{name!r} is a directory, not a file holding a token"), 2) from None
    except OSError as exc:
        raise ReportError(Problem("--token-file", f"{name!r}: cannot read: {exc.strerror or exc}"), 2) from None
    if len(raw) > _MAX_TOKEN_BYTES:
        raise ReportError(Problem("--token-file", f"{name!r} is larger than {_MAX_TOKEN_BYTES // 1024} KiB; a token file holds one token"), 2)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReportError(Problem("--token-file", f"{name!r} is not text; a token file holds one token"), 2) from None
    return _token(text, repr(name), "--token-file")


def _token(text: str, where: str, option: str) -> str:
    token = text.strip()
    if not token:
        raise ReportError(Problem(option, f"{where} is empty; it must hold the token"), 2)
    if not _TOKEN.fullmatch(token):
        raise ReportError(Problem(option, f"{where} must hold one token: printable ASCII without spaces or line breaks"), 2)
    return token


def aws_region(url: str, region: str | None) -> str:
    """The workspace's region, from --aws-region or else the AMP host, which names it."""
    parts = urlsplit(url)
    match = _AMP_HOST.fullmatch(parts.hostname or "")
    if match and not _AMP_PATH.fullmatch(parts.path):
        raise ReportError(Problem("--prometheus", f"{url!r}: an AMP workspace's URL is "
                                                  f"https://aps-workspaces.REGION.amazonaws.com/workspaces/ws-ID"), 2)
    if region is None:
        if match is None:
            raise ReportError(Problem("--aws-region", f"{parts.hostname} does not name a region (aps-workspaces.REGION.amazonaws.com); "
                                                      "give the workspace's region, e.g. --aws-region us-east-1"), 2)
        region = match.group(1)
    if not _REGION.fullmatch(region):
        raise ReportError(Problem("--aws-region", f"{region!r} is not an AWS region such as us-east-1"), 2)
    return region


def aws_signer(region: str) -> Signer:
    """SigV4 for AMP, with credentials from botocore's usual chain (environment, profile, SSO, instance or pod role).

    The signature covers the URL actually requested and the body, so a proxy in front of AMP must forward both
    unchanged; credentials are frozen per request, which refreshes a role's before they expire.
    """
    try:
        import botocore.session
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.exceptions import BotoCoreError
    except ImportError:
        raise missing_extra("aws", "botocore") from None
    try:
        credentials = botocore.session.get_session().get_credentials()
    except BotoCoreError as exc:
        raise ReportError(Problem("--prometheus-auth", f"aws: {exc}"), 2) from None
    if credentials is None:
        raise ReportError(Problem("--prometheus-auth", "aws: no AWS credentials found (environment, ~/.aws profile, SSO, "
                                                       "instance or pod role)"), 2)

    def sign(method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        try:
            frozen = credentials.get_frozen_credentials()
        except Exception as exc:  # noqa: BLE001 - a refresh fails in many ways (STS, SSO, the network), all one line
            raise ReportError(Problem("--prometheus-auth", f"aws: cannot get credentials: {_first_line(exc)}"), 1) from None
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        SigV4Auth(frozen, AMP_SERVICE, region).add_auth(request)
        return {name: request.headers[name] for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token")
                if name in request.headers}

    return sign


def gcp_signer() -> Signer:
    """An OAuth2 access token from Application Default Credentials, refreshed through urllib3 (no `requests`)."""
    try:
        import google.auth
        import urllib3
        from google.auth import exceptions
        from google.auth.transport.urllib3 import Request
    except ImportError:
        raise missing_extra("gcp", "google-auth") from None
    try:
        with warnings.catch_warnings():  # e.g. "end user credentials without a quota project": advice, not for this report
            warnings.simplefilter("ignore")
            credentials, _project = google.auth.default(scopes=[GCP_SCOPE])
    except exceptions.DefaultCredentialsError as exc:
        raise ReportError(Problem("--prometheus-auth", f"gcp: no Application Default Credentials: {_first_line(exc)}"), 2) from None
    transport = Request(urllib3.PoolManager(timeout=urllib3.Timeout(total=60)))

    lock = threading.Lock()  # the report asks several queries at once; one token serves them all

    def sign(method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        with lock:
            if not credentials.valid:
                try:
                    credentials.refresh(transport)
                except exceptions.GoogleAuthError as exc:
                    raise ReportError(Problem("--prometheus-auth", f"gcp: cannot get an access token: {_first_line(exc)}"), 1) from None
            return {"Authorization": f"Bearer {credentials.token}"}

    return sign


def azure_signer() -> Signer:
    """An Entra token for Azure Monitor's Prometheus from DefaultAzureCredential (environment, workload identity,
    managed identity, Azure CLI ...), fetched on the first query and again a minute before it expires."""
    try:
        from azure.core.exceptions import ClientAuthenticationError
        from azure.identity import DefaultAzureCredential
    except ImportError:
        raise missing_extra("azure", "azure-identity") from None
    # azure-identity logs each credential it tries; unconfigured, Python would print those warnings on stderr
    logging.getLogger("azure").addHandler(logging.NullHandler())
    logging.getLogger("azure").propagate = False
    credential = DefaultAzureCredential()
    cached: list = []
    lock = threading.Lock()  # the report asks several queries at once; one token serves them all

    def sign(method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        with lock:
            if not cached or cached[0].expires_on - 60 < time.time():
                try:
                    cached[:] = [credential.get_token(AZURE_SCOPE)]
                except ClientAuthenticationError as exc:
                    raise ReportError(Problem("--prometheus-auth", f"azure: cannot get a token for {AZURE_SCOPE}: "
                                                                   f"{_first_line(exc.message or exc)}"), 1) from None
            return {"Authorization": f"Bearer {cached[0].token}"}

    return sign


def _first_line(exc: object) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


# The clouds' managed Prometheus services the report signs its requests for, by `--prometheus-auth` kind: how to know
# one by its host, and how to sign for it (with the HTTP method its API takes).
@dataclass(frozen=True)
class ManagedPrometheus:
    kind: str
    serves: Callable[[str], bool]
    sign: Callable[[str, SplitResult, "AuthOptions"], tuple[Signer, str]]
    takes_region: bool = False


def _sign_amp(url: str, parts: SplitResult, options: "AuthOptions") -> tuple[Signer, str]:
    return aws_signer(aws_region(url, options.region)), "POST"


def _sign_gmp(url: str, parts: SplitResult, options: "AuthOptions") -> tuple[Signer, str]:
    if parts.hostname == _GCP_HOST and not _GCP_PATH.fullmatch(parts.path):
        raise ReportError(Problem("--prometheus", f"{url!r}: Google's Prometheus API is at "
                                                  f"https://{_GCP_HOST}/v1/projects/PROJECT_ID/location/global/prometheus"), 2)
    return gcp_signer(), "GET"


def _sign_azure(url: str, parts: SplitResult, options: "AuthOptions") -> tuple[Signer, str]:
    return azure_signer(), "POST"


MANAGED: dict[str, ManagedPrometheus] = {m.kind: m for m in (
    ManagedPrometheus("aws", lambda host: bool(_AMP_HOST.fullmatch(host)), _sign_amp, takes_region=True),
    ManagedPrometheus("gcp", lambda host: host == _GCP_HOST, _sign_gmp),
    ManagedPrometheus("azure", lambda host: bool(_AZURE_HOST.fullmatch(host)), _sign_azure),
)}
