"""Gcore: where a pool's capacity comes from (on-demand flavors, no reservations) and the project's quotas.
"""

from __future__ import annotations


import re

from gpupools.capacity import sources as capacity
from gpupools.core.catalog import Hardware
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem


def capacity_problems(pool: Pool, path: str, autoscaler: str, cluster: Cluster | None, hardware: Hardware | None) -> list[Problem]:
    """A Gcore pool's nodes are its flavor, on demand: no reservations or other kinds a pool could fall back through."""
    if pool.capacity is None:
        return []
    return [Problem(s.path(path), f"{s.kind} is not a capacity kind of Gcore pools; a Gcore pool is on-demand nodes of its flavor "
                                  f"(spot bare metal is a flavor of its own)")
            for s in capacity.sources(pool) if s.kind != capacity.ON_DEMAND]


def capacity_lines(pool: Pool, autoscaler: str) -> list[str]:
    return [f"on-demand: flavor {pool.instance_type}"]


def provisioning_request_class(pool: Pool) -> str | None:
    return None


def capacity_flavor_labels(pool: Pool, autoscaler: str) -> list[tuple[str, dict[str, str]]]:
    return [("", {})]


# A Gcore pool takes no reservation or other capacity ahead of time (PoolCreateParams has no such field).
RESERVATIONS = False


def quota_problems(exceeded: dict) -> list[str]:
    """What `pools.check_quota` says a new pool would exceed: the API returns only the exceeded quotas, each as
    `<quota>_limit`, `_usage` and `_requested` (SDK K8SClusterPoolQuota: "Empty response means no quotas exceeded")."""
    out = []
    for key in sorted(k for k in exceeded if k.endswith("_limit")):
        quota = key.removesuffix("_limit")
        out.append(f"{quota}: {exceeded.get(quota + '_requested')} requested, {exceeded.get(quota + '_usage')} in use, "
                   f"limit {exceeded[key]}")
    return out


# --------------------------------------------------------------------------------------------------------------------
# How gpupools calls Gcore's API, and what the user reads when a call fails

# Every call is bounded: the SDK's own client options (gcore 0.59.0 gcore/_client.py Gcore.__init__: `timeout`,
# `max_retries`; its default is 120 s per attempt, DEFAULT_TIMEOUT in _constants.py). The SDK retries a timeout, a
# failed connection and an answer of 408, 409, 429 or 5xx (_base_client.py `_should_retry`), waiting 0.5 s doubled per
# retry up to 8 s, or what the API's Retry-After asks up to 60 s (`_calculate_retry_timeout`). Gcore's Terraform
# provider raises its SDK's retries from 2 to 4 (TF2 internal/provider.go Configure: "The max delay is capped at 8
# secs, so the maximum value for max retries is 4"); gpupools does the same. An API that never answers fails a call
# after 5 attempts of API_TIMEOUT_SECONDS each and the backoff between them, about 2.6 minutes (the SDK alone: 3 of
# 120 s, about 6).
API_TIMEOUT_SECONDS = 30.0
API_CONNECT_TIMEOUT_SECONDS = 10.0
API_RETRIES = 4
# How much of the API's own text an error line keeps.
SERVER_TEXT_CHARS = 300
# ANSI escape sequences (ECMA-48: CSI and OSC, 7- and 8-bit, and the other ESC sequences), then every other control or format
# character (C0, DEL, C1, bidirectional and zero-width marks): a server's text may move the cursor, clear the screen or
# reorder what the terminal shows.
_ANSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[ -/]*[0-~]|\x1b")
_CONTROL_CHAR = "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]"
_CONTROL = re.compile(_CONTROL_CHAR + "+")
# What a server may put between a key's characters (whitespace, control characters) without hiding it.
_GAP = r"(?:\s|" + _CONTROL_CHAR + ")*"
# Gcore's scheme is `Authorization: APIKey <key>` (SDK _client.py auth_headers); a server echoing a header shows it so.
_AUTH_ECHO = re.compile(r"(?i)\b(apikey|bearer)(\s+)(?!\[redacted\])[^\s\"',;}\]]+")
REDACTED = "[redacted]"


def secret_forms(key: str | None) -> list[str]:
    """The forms an API key may come back in: as sent, URL-encoded, JSON-escaped, and a permanent token's secret part
    alone (Gcore's tokens read `<id>$<secret>`, DOCS account-settings/api-tokens.mdx, or `<id>_<secret>` from the V2
    endpoint, DOCS api-reference/iam/api-tokens/create-api-token-1.mdx). Longest first, so a form inside another is
    replaced after it."""
    from urllib.parse import quote, quote_plus

    if not key:
        return []
    forms = {key, quote(key, safe=""), quote_plus(key), key.replace("/", "\\/")}
    token = re.match(r"^[0-9]+[$_](.{8,})$", key)
    if token:
        forms.add(token.group(1))
    return sorted(forms, key=len, reverse=True)


def clean_text(text: str, secrets: list[str], limit: int = SERVER_TEXT_CHARS) -> str:
    """Text from Gcore's API as one bounded line: escape sequences out, the key (in any of `secrets`, also with
    whitespace or control characters put between its characters) and any `APIKey <value>` replaced, the other control
    characters out and whitespace collapsed, then cut to `limit` characters. The order matters: the key is looked for
    before what could split it becomes a space, and it is gone before the cut."""
    text = _ANSI.sub("", text)
    for secret in secrets:
        text = re.sub(_GAP.join(re.escape(c) for c in secret), REDACTED, text)
    text = " ".join(_CONTROL.sub(" ", text).split())
    text = _AUTH_ECHO.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    if len(text) > limit:
        text = text[:limit - 1].rstrip() + "…"
    return text


def error_text(body) -> str:
    """What an error answer says, as text: Gcore's errors are JSON with `exception_class`, `message` and `request_id`
    (DOCS developer-tools/rest-api/error-handling.mdx), kept in that order; any other body as it came."""
    import json

    if isinstance(body, dict) and isinstance(body.get("message"), str):
        head = f"{body['exception_class']}: " if isinstance(body.get("exception_class"), str) else ""
        tail = f" (request {body['request_id']})" if isinstance(body.get("request_id"), str) else ""
        return f"{head}{body['message']}{tail}"
    if isinstance(body, (dict, list)):
        return json.dumps(body, separators=(",", ":"))[:100_000]
    return "" if body is None else str(body)


def retried(status: int, should_retry: str | None = None) -> bool:
    """Whether the SDK retries an answer of this status (gcore 0.59.0 _base_client.py `_should_retry`: the API's
    x-should-retry header first, then 408, 409, 429 and 5xx)."""
    if should_retry in ("true", "false"):
        return should_retry == "true"
    return status in (408, 409, 429) or status >= 500


def api_error_line(operation: str, call: str, secrets: list[str], *, status: int | None = None, text: str = "",
                   location: str | None = None, attempts: int = 1, timeout: float | None = None) -> str:
    """One line for a call to Gcore's API that failed: what gpupools was doing, the call (method and path), the HTTP
    status or why there was none, and the API's own text, bounded and cleaned (clean_text)."""
    call = clean_text(call, secrets, 200)
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    said = clean_text(text, secrets)
    said = f": {said}" if said else ""
    if status is None and timeout is not None:
        return f"{operation}: Gcore's API did not answer {call} within {timeout:g} s{tries}"
    if status is None:
        return f"{operation}: could not reach Gcore's API for {call}{tries}{said}"
    if 300 <= status < 400 and location:
        return (f"{operation}: Gcore's API answered {call} with HTTP {status}, a redirect to {clean_text(location, secrets, 200)}, which "
                f"gpupools does not follow (the API key would go with it); check GCORE_BASE_URL")
    hint = "; check GCORE_API_KEY" if status in (401, 403) else "; check GCORE_BASE_URL" if status < 400 else ""
    return f"{operation}: Gcore's API answered {call} with HTTP {status}{tries}{said}{hint}"
