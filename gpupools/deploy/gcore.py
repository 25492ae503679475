"""Gcore Managed Kubernetes: the cluster and its GPU pools as Pulumi dynamic resources over Gcore's Python SDK.

No Pulumi provider for Gcore is published for Python, so the cluster and each pool are `pulumi.dynamic` resources whose
provider calls the official `gcore` SDK (client.cloud.k8s.clusters and .pools). Inputs are checked against the SDK's
own parameter types (its TypedDicts, through pydantic) before anything is sent. The API key is read from GCORE_API_KEY
by the provider when it runs: it is never an input, so it never enters the Pulumi state or an output.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from gpupools.clouds.node_settings import merged
from gpupools.clouds import gcore as decide
from gpupools.core.facts import GcoreRegion, GcoreRegions
from gpupools.core.pools import PoolPlan
from gpupools.stack.config import StackConfig
from gpupools.stack.providers import provider_value

from gpupools.deploy.base import ClusterHandle, Component

# SPEC K8sClusterPoolCreateV2Serializer.taints: "<value>:<Effect>" per key.
TAINT_VALUE = re.compile(r"^[A-Za-z0-9._-]{0,63}:(NoSchedule|PreferNoSchedule|NoExecute)$")


class GcoreInputError(ValueError):
    """Inputs the SDK's parameter types (or the API's documented forms) refuse; the message names the field."""


class GcoreApiError(RuntimeError):
    """A call to Gcore's API that failed, in one line: what gpupools was doing, the call, the status, the API's text
    bounded and cleaned, never the key (decide.api_error_line)."""


def _validate(params: dict, typed_dict: Any, what: str) -> dict:
    from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config

    strict = with_config(ConfigDict(extra="forbid", strict=True))(typed_dict)
    try:
        TypeAdapter(strict).validate_python(params)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"])
        raise GcoreInputError(f"{what}.{where}: {err['msg'].lower()} (Gcore SDK {typed_dict.__name__})") from None
    return params


def pool_taints(params: dict) -> dict:
    """The pool request, its taints checked against Gcore's form (what the SDK's types, plain strings, cannot say)."""
    for key, value in (params.get("taints") or {}).items():
        if not isinstance(value, str) or not TAINT_VALUE.match(value):
            raise GcoreInputError(f"pool.taints.{key}: {value!r} is not Gcore's taint form <value>:<Effect> (Effect NoSchedule, "
                                  f"PreferNoSchedule or NoExecute)")
    return params


def pool_create_params(params: dict) -> dict:
    """A pool as `pools.create` takes it, checked against the SDK's PoolCreateParams and the taint form."""
    from gcore.types.cloud.k8s.clusters import PoolCreateParams

    return pool_taints(_validate(params, PoolCreateParams, "pool"))


def _checked(news: dict, field: str, validate) -> CheckResult:
    """A provider's Check: the engine asks it before any diff or change (`pulumi preview` included), so a request the
    SDK's types refuse is a failure on the property, named, before anything reaches Gcore."""
    try:
        validate()
    except GcoreInputError as exc:
        return CheckResult(news, [CheckFailure(field, str(exc))])
    return CheckResult(news, [])


def pool_update_params(params: dict, cluster_name: str) -> dict:
    """A pool PATCH body, checked against the SDK's PoolUpdateParams (which holds the cluster's name, a path parameter)."""
    from gcore.types.cloud.k8s.clusters import PoolUpdateParams

    _validate({**params, "cluster_name": cluster_name}, PoolUpdateParams, "pool")
    return params


def cluster_create_params(params: dict) -> dict:
    from gcore.types.cloud.k8s import ClusterCreateParams

    return _validate(params, ClusterCreateParams, "cluster")


def cluster_update_params(params: dict) -> dict:
    from gcore.types.cloud.k8s import ClusterUpdateParams

    return _validate(params, ClusterUpdateParams, "cluster")


def client(project_id: int, region_id: int, http_client: Any = None, timeout: float | None = None, max_retries: int | None = None):
    """Gcore's SDK client for one project and region; the key comes from GCORE_API_KEY, read here and nowhere else.
    Every call is bounded by the SDK's own options (decide.API_TIMEOUT_SECONDS, decide.API_RETRIES). Redirects are not
    followed: the SDK's default httpx client follows them (gcore 0.59.0 _base_client.py _DefaultHttpxClient,
    follow_redirects=True) with the key in its Authorization header, and Gcore's API has no call that redirects, so
    one is reported instead (a wrong GCORE_BASE_URL: http for https, a proxy, a login page). `http_client`: a
    transport for tests."""
    import httpx
    from gcore import DefaultHttpxClient, Gcore

    key = os.environ.get("GCORE_API_KEY")
    if not key:
        raise GcoreInputError("GCORE_API_KEY is not set: the Gcore resources read the API key from the environment when they run")
    seconds = decide.API_TIMEOUT_SECONDS if timeout is None else timeout
    bounds = httpx.Timeout(seconds, connect=min(seconds, decide.API_CONNECT_TIMEOUT_SECONDS))
    global _http
    with _http_lock:
        # One connection pool for the process: an httpx client costs a TLS context to make (about 0.2 s), and the SDK
        # sets each request's timeout itself.
        if _http is None:
            _http = DefaultHttpxClient(follow_redirects=False)
    return Gcore(api_key=key, cloud_project_id=project_id, cloud_region_id=region_id, timeout=bounds,
                 max_retries=decide.API_RETRIES if max_retries is None else max_retries, http_client=http_client or _http)


_http: Any = None
_http_lock = threading.Lock()


# --------------------------------------------------------------------------------------------------------------------
# Errors: one line each, to the engine too

def _in_provider_process() -> bool:
    """Whether this is the process the Pulumi engine runs dynamic providers in: `python -u -m pulumi.dynamic`
    (pulumi/pulumi sdk/python/dist/pulumi-resource-pulumi-python)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "pulumi.dynamic.__main__"


_NO_LIMIT = object()
_saved_limit: Any = None


def _one_line_traceback() -> None:
    """There, the engine is told of a failed call in what traceback.format_exc() makes of it (pulumi 3.272.0
    pulumi/dynamic/__main__.py _abort_with_traceback), which would print the frames above the line. With
    sys.tracebacklimit at 0 it prints the line alone ("only the exception type and value", Python's sys module
    documentation); the limit is put back when the provider is next called, so other errors keep their traceback."""
    global _saved_limit
    if _in_provider_process() and _saved_limit is None:
        _saved_limit = getattr(sys, "tracebacklimit", _NO_LIMIT)
        sys.tracebacklimit = 0


def _full_traceback() -> None:
    global _saved_limit
    if _saved_limit is not None:
        if _saved_limit is _NO_LIMIT:
            sys.__dict__.pop("tracebacklimit", None)
        else:
            sys.tracebacklimit = _saved_limit
        _saved_limit = None


def _sdk_module(exc: BaseException) -> str | None:
    """The innermost SDK module an exception passed through, or None if it never was in the SDK: a call's own errors,
    and what the SDK raises of an answer it cannot read (a JSONDecodeError of a broken body) or of a task that failed
    (gcore 0.59.0 resources/cloud/tasks.py poll: ValueError with the task's error text, TimeoutError when the task
    outlasts GCORE_POLLING_TIMEOUT_SECONDS)."""
    tb, found = exc.__traceback__, None
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.split(".")[0] == "gcore":
            found = module
        tb = tb.tb_next
    return found


def api_error(operation: str, exc: BaseException, secrets: list[str], timeout: float, attempts: int) -> str:
    """The line for an exception of the SDK (gcore 0.59.0 _exceptions.py: APIStatusError carries the response and its
    body, APITimeoutError and APIConnectionError the request)."""
    import gcore

    request = getattr(exc, "request", None)
    call = f"{request.method} {request.url.path}" if request is not None else "a call"
    if isinstance(exc, gcore.APIStatusError):
        response = exc.response
        tries = attempts if decide.retried(response.status_code, response.headers.get("x-should-retry")) else 1
        return decide.api_error_line(operation, call, secrets, status=response.status_code, text=decide.error_text(exc.body),
                                     location=response.headers.get("location"), attempts=tries)
    if isinstance(exc, gcore.APITimeoutError):
        return decide.api_error_line(operation, call, secrets, timeout=timeout, attempts=attempts)
    if isinstance(exc, gcore.APIConnectionError):
        cause = exc.__cause__
        return decide.api_error_line(operation, call, secrets, text=f"{type(cause).__name__}: {cause}" if cause else str(exc),
                                     attempts=attempts)
    if isinstance(exc, TimeoutError):
        return f"{operation}: {decide.clean_text(str(exc), secrets)} (GCORE_POLLING_TIMEOUT_SECONDS sets how long to wait)"
    if isinstance(exc, ValueError) and _sdk_module(exc) == "gcore.resources.cloud.tasks":
        return f"{operation}: Gcore's task failed: {decide.clean_text(str(exc), secrets) or 'no reason given'}"
    if isinstance(exc, gcore.GcoreError):
        return f"{operation}: {decide.clean_text(str(exc), secrets)}"
    return f"{operation}: Gcore's SDK could not go on with what the API answered ({type(exc).__name__}: {decide.clean_text(str(exc), secrets)})"


def engine_numbers(value):
    """Inputs as the engine hands them to a dynamic provider: every number a float (they travel as protobuf Struct
    number values, pulumi 3.272.0 pulumi/runtime/rpc.py serialize_property: `struct_pb2.Value(number_value=
    float(value))`), which the SDK's types, integers for every count, size and ID, refuse. A whole float is the
    integer it was."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: engine_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [engine_numbers(v) for v in value]
    return value


def _reported(verb: str):
    """A provider method (its inputs' numbers as they were, engine_numbers) whose failures reach the user as one line:
    a refused input as it is, a failed call to Gcore's API as api_error_line says it. The line is raised outside the
    handler, so it carries neither the SDK's exception (whose response holds the API's whole text) nor its frames."""

    def wrap(method):
        @functools.wraps(method)
        def run(self, *args):
            _full_traceback()
            import gcore

            args = tuple(engine_numbers(a) for a in args)
            try:
                return method(self, *args)
            except GcoreInputError as exc:
                error: Exception = GcoreInputError(str(exc))
            except Exception as exc:
                if not isinstance(exc, gcore.GcoreError) and _sdk_module(exc) is None:
                    raise  # gpupools' own failure: its traceback is what to read
                seconds = decide.API_TIMEOUT_SECONDS if self.timeout is None else self.timeout
                retries = decide.API_RETRIES if self.max_retries is None else self.max_retries
                error = GcoreApiError(api_error(f"{verb} {self.subject(*args)}", exc, decide.secret_forms(os.environ.get("GCORE_API_KEY")),
                                                seconds, retries + 1))
            _one_line_traceback()
            raise error

        return run

    return wrap


# Pages of the region listing read at most (the API gives up to 1000 regions a page, gcore 0.59.0
# resources/cloud/regions.py list): an answer whose `count` never ends stops here.
REGION_PAGES = 5
REGION_NAME_CHARS = 40


def _flag(region, field: str) -> bool | None:
    value = getattr(region, field, None)
    return value if isinstance(value, bool) else None


def region_listing(api) -> dict[int, GcoreRegion]:
    """Gcore's regions as its API lists them (GET /cloud/v1/regions; gcore 0.59.0 types/cloud/region.py Region:
    `id`, `display_name`, `state`, `has_k8s`, `has_ai_gpu`), names cleaned of escape codes and bounded."""
    secrets = decide.secret_forms(os.environ.get("GCORE_API_KEY"))
    found: dict[int, GcoreRegion] = {}
    page = api.cloud.regions.list(limit=1000)
    for number in range(1, REGION_PAGES + 1):
        for r in page.results or []:
            name = decide.clean_text(str(getattr(r, "display_name", "") or ""), secrets)[:REGION_NAME_CHARS] or "unnamed"
            found[int(r.id)] = GcoreRegion(int(r.id), name, str(getattr(r, "state", "") or ""), _flag(r, "has_k8s"), _flag(r, "has_ai_gpu"))
        if number == REGION_PAGES or not page.has_next_page():
            break
        page = page.get_next_page()
    return found


def check_region(api, region_id: int) -> None:
    """Refuse a region Gcore's API does not list, or lists without Managed Kubernetes, before anything is created
    (or, for a move to another region, deleted): one line naming `gcore:regionId` and the regions that would work."""
    why = decide.region_refusal(int(region_id), GcoreRegions(region_listing(api), "Gcore's API, GET /cloud/v1/regions"))
    if why is not None:
        raise GcoreInputError(f"{decide.REGION_KEY}: {why}")


def newest_patch(api, minor: str) -> str:
    """The newest `create_versions` entry of a minor ("1.36" -> "v1.36.1"), as the API wants it."""
    found = [v.version for v in api.cloud.k8s.list_versions() if v.version.lstrip("v").startswith(f"{minor}.")]
    if not found:
        raise GcoreInputError(f"cluster.version: Gcore offers no Kubernetes {minor} in this region")
    return max(found, key=lambda v: tuple(int(x) for x in v.lstrip("v").split(".")))


def _pool_state(pool) -> dict:
    """A pool as the API reads it, as the diff compares it (decide.normal_pool): in PoolCreateParams form, what Gcore's
    Terraform provider takes for unset left out, the server-managed labels too, and no security groups."""
    return decide.normal_pool({f: getattr(pool, f, None) for f in decide.POOL_FIELDS})


# What `pools.check_quota` takes of a pool (SDK PoolCheckQuotaParams).
QUOTA_FIELDS = ("flavor_id", "boot_volume_size", "is_public_ipv4", "max_node_count", "min_node_count", "name", "servergroup_policy")


def check_quota(api, body: dict, replacing: bool = False) -> None:
    """Refuse a pool the project's quota cannot hold, before anything is created or deleted, as Gcore's Terraform
    provider does (TF2 resource.go Update, checkPoolQuotaLimits: "Check quota limits before making any changes. This
    avoids deleting pools and then failing to create new ones due to quota limits"; TF1 v0.34.3 resource_gcore_k8sv2.go
    resourceK8sV2CheckLimits). A pool being replaced is checked in full while the old one still runs, as there."""
    quota = api.cloud.k8s.clusters.pools.check_quota(**{k: body[k] for k in QUOTA_FIELDS if k in body})
    exceeded = decide.quota_problems(quota.model_dump(exclude_none=True))
    if exceeded:
        still = " (the pool it replaces still counts: Gcore checks before anything is deleted)" if replacing else ""
        raise GcoreInputError(f"pool {body['name']}: the project's Gcore quota is too small ({'; '.join(exceeded)}){still}; ask Gcore "
                              f"for more, or lower maxNodes")


def update_pool(api, cluster_name: str, old: dict, new: dict):
    """PATCH what changed of a pool in place, then resize it if its running count left the new bounds; the pool as the
    API answers."""
    pools = api.cloud.k8s.clusters.pools
    _, updates = decide.pool_change(old, new)
    body = {}
    for field in updates:
        value = new.get(field)
        # A field left out of the PATCH means "unchanged": one the new pool leaves unset is sent as its unset value.
        value = decide.unset_value(field) if value is None else value
        if value is not None:
            body[field] = value
    pool = pools.update(new["name"], cluster_name=cluster_name, **pool_update_params(body, cluster_name)) if body else \
        pools.get(new["name"], cluster_name=cluster_name)
    target = decide.resize_target(pool.node_count, new["min_node_count"], new.get("max_node_count", new["min_node_count"]))
    if target is not None:
        pool = pools.resize_and_poll(new["name"], cluster_name=cluster_name, node_count=target)
    return pool


class _Provider(ResourceProvider):
    """What both Gcore providers share: the SDK client, the bounds of its calls. `http_client`: a transport for tests;
    `timeout` (seconds per attempt) and `max_retries`: decide.API_TIMEOUT_SECONDS and decide.API_RETRIES when None."""

    KIND = ""

    def __init__(self, http_client: Any = None, timeout: float | None = None, max_retries: int | None = None):
        self.http_client = http_client
        self.timeout = timeout
        self.max_retries = max_retries

    def _api(self, props: dict):
        return client(int(props["project_id"]), int(props["region_id"]), self.http_client, self.timeout, self.max_retries)

    def subject(self, *args) -> str:
        """What a method is about, for its error line: the id of diff, update, read and delete, else the inputs' name."""
        if args and isinstance(args[0], str):
            return f"{self.KIND} {args[0]}"
        return f"{self.KIND} {self.name_of(args[-1] if args else {})}"

    def name_of(self, props: dict) -> str:
        raise NotImplementedError


class PoolProvider(_Provider):
    """A Gcore cluster pool. Its id is `<cluster>/<pool>`."""

    KIND = "Gcore pool"

    def name_of(self, props: dict) -> str:
        return f"{props.get('cluster_name')}/{(props.get('pool') or {}).get('name')}"

    @_reported("checking")
    def check(self, olds: dict, news: dict) -> CheckResult:
        return _checked(news, "pool", lambda: pool_create_params(dict(news["pool"])))

    @_reported("creating")
    def create(self, props: dict) -> CreateResult:
        body = pool_create_params(dict(props["pool"]))
        api = self._api(props)
        check_region(api, props["region_id"])
        check_quota(api, body)
        pool = api.cloud.k8s.clusters.pools.create_and_poll(cluster_name=props["cluster_name"], **body)
        return CreateResult(f"{props['cluster_name']}/{pool.name}", {**props, "node_count": pool.node_count})

    @_reported("planning a change to")
    def diff(self, id: str, olds: dict, news: dict) -> DiffResult:
        replaces, updates = decide.pool_change(olds.get("pool") or {}, news.get("pool") or {})
        moved = [k for k in ("cluster_name", "project_id", "region_id") if str(olds.get(k)) != str(news.get(k))]
        replace = [f"pool.{f}" for f in replaces] + moved
        if replace:
            # The engine deletes the old pool before it creates the new one (below) and asks this Diff before either:
            # the new pool's region and quota are checked here, while the old one still runs.
            api = self._api(news)
            if "region_id" in moved:
                check_region(api, news["region_id"])
            check_quota(api, pool_create_params(dict(news["pool"])), replacing=True)
        # A pool keeps its name when only its flavor or volumes change, and a cluster holds one pool of a name: the old
        # pool goes before the new one comes.
        return DiffResult(changes=bool(replace or updates), replaces=replace, delete_before_replace=True)

    @_reported("updating")
    def update(self, id: str, olds: dict, news: dict) -> UpdateResult:
        pool = update_pool(self._api(news), news["cluster_name"], olds.get("pool") or {}, news["pool"])
        return UpdateResult({**news, "node_count": pool.node_count})

    @_reported("reading")
    def read(self, id: str, props: dict) -> ReadResult:
        api = self._api(props)
        cluster, name = id.split("/", 1)
        pool = api.cloud.k8s.clusters.pools.get(name, cluster_name=cluster)
        # The pool as the API has it (a change made outside shows in the next diff), in the form the diff compares.
        kept = {k: v for k, v in (props.get("pool") or {}).items() if k not in decide.POOL_FIELDS}
        return ReadResult(id, {**props, "pool": {**kept, **_pool_state(pool)}, "node_count": pool.node_count})

    @_reported("deleting")
    def delete(self, id: str, props: dict) -> None:
        cluster, name = id.split("/", 1)
        self._api(props).cloud.k8s.clusters.pools.delete_and_poll(name, cluster_name=cluster)


class ClusterProvider(_Provider):
    """A Gcore cluster (with its CPU pool), or an existing one adopted by name (`adopt`: read, never changed or deleted).
    The kubeconfig is an output, kept secret by the component."""

    KIND = "Gcore cluster"

    def name_of(self, props: dict) -> str:
        return str((props.get("cluster") or {}).get("name"))

    def _kubeconfig(self, api, name: str) -> str:
        return api.cloud.k8s.clusters.kubeconfig.get(name).config

    @_reported("checking")
    def check(self, olds: dict, news: dict) -> CheckResult:
        if news.get("adopt"):
            return CheckResult(news, [])
        # The minor stands in for the patch version `create` resolves (the SDK's type is a string either way).
        params = dict(news["cluster"])
        return _checked(news, "cluster", lambda: cluster_create_params({**params, "version": decide.api_version(params.get("version"))}))

    @_reported("creating")
    def create(self, props: dict) -> CreateResult:
        api = self._api(props)
        wanted = dict(props["cluster"])
        check_region(api, props["region_id"])
        if props.get("adopt"):
            found = api.cloud.k8s.clusters.get(wanted["name"])
            # What the cluster lacks of a new one's controls, read not assumed; the component warns of each.
            findings = decide.existing_cluster_findings(found.name, {"cni": found.cni.model_dump() if found.cni else None})
            return CreateResult(found.name, {**props, "version": found.version, "kubeconfig": self._kubeconfig(api, found.name),
                                             "findings": findings})
        version = newest_patch(api, wanted["version"])
        body = cluster_create_params({**wanted, "version": version})
        cluster = api.cloud.k8s.clusters.create_and_poll(**body)
        return CreateResult(cluster.name, {**props, "version": cluster.version, "kubeconfig": self._kubeconfig(api, cluster.name)})

    @_reported("planning a change to")
    def diff(self, id: str, olds: dict, news: dict) -> DiffResult:
        if news.get("adopt") or olds.get("adopt"):
            moved = bool(news.get("adopt")) != bool(olds.get("adopt"))
            return DiffResult(changes=moved, replaces=["adopt"] if moved else [])
        old, new = olds.get("cluster") or {}, news.get("cluster") or {}
        replaces, upgrades, updates = decide.cluster_change(old, new)
        pools = decide.cluster_pool_changes(old.get("pools"), new.get("pools"))
        moved = [k for k in ("project_id", "region_id") if str(olds.get(k)) != str(news.get(k))]
        if "region_id" in moved:
            # A cluster in another region replaces this one, deleted first: the new region is checked before.
            check_region(self._api(news), news["region_id"])
        replace = [f"cluster.{f}" for f in replaces] + moved
        return DiffResult(changes=bool(replace or upgrades or updates or any(pools.values())), replaces=replace,
                          delete_before_replace=True)

    @_reported("updating")
    def update(self, id: str, olds: dict, news: dict) -> UpdateResult:
        old, new = olds.get("cluster") or {}, news["cluster"]
        _, upgrades, updates = decide.cluster_change(old, new)
        api = self._api(news)
        clusters = api.cloud.k8s.clusters
        version = olds.get("version")
        if upgrades:
            why = decide.upgrade_problem(old["version"], new["version"])
            if why is not None:
                raise GcoreInputError(f"cluster.version: {why}")
            version = newest_patch(api, new["version"])
            version = clusters.upgrade_and_poll(id, version=version).version
        if updates:
            clusters.update_and_poll(id, **cluster_update_params({f: new.get(f) for f in updates}))
        self._pools(api, id, old.get("pools") or [], new.get("pools") or [])
        return UpdateResult({**news, "version": version, "kubeconfig": olds.get("kubeconfig")})

    def _pools(self, api, cluster: str, old: list[dict], new: list[dict]) -> None:
        """The cluster's own pools, changed as Gcore's Terraform provider changes them (TF2 resource.go Update, "Handle
        pool changes"): the quota of every new or replaced pool checked before any change, new pools created first,
        then replacements (delete, then create under the same name) and in-place updates, removed pools deleted last."""
        changes = decide.cluster_pool_changes(old, new)
        if not any(changes.values()):
            return
        olds, news = {p["name"]: p for p in old}, {p["name"]: p for p in new}
        bodies = {name: pool_create_params(dict(news[name])) for name in changes["create"] + changes["replace"]}
        for name, body in bodies.items():
            check_quota(api, body, replacing=name in changes["replace"])
        pools = api.cloud.k8s.clusters.pools
        if changes["replace"]:
            # TF2 refuses to replace the only pool ("Please create a new pool with a different name first"); the GPU
            # pools are pools of the same cluster, so it is the cluster's pools that count here.
            running = api.cloud.k8s.clusters.get(cluster).pools
            if len(running) <= 1:
                name = changes["replace"][0]
                fields = ", ".join(f"cluster.pools[{name}].{f}" for f in decide.pool_change(olds[name], news[name])[0])
                raise GcoreInputError(f"{fields}: Gcore replaces a pool to change this (delete, then create), and {name} is the only pool "
                                      f"of cluster {cluster}; add a GPU pool first, or keep the pool as it is")
        for name in changes["create"]:
            pools.create_and_poll(cluster_name=cluster, **bodies[name])
        for name in changes["replace"]:
            pools.delete_and_poll(name, cluster_name=cluster)
            pools.create_and_poll(cluster_name=cluster, **bodies[name])
        for name in changes["update"]:
            update_pool(api, cluster, olds[name], news[name])
        for name in changes["delete"]:
            pools.delete_and_poll(name, cluster_name=cluster)

    @_reported("reading")
    def read(self, id: str, props: dict) -> ReadResult:
        api = self._api(props)
        found = api.cloud.k8s.clusters.get(id)
        return ReadResult(id, {**props, "version": found.version})

    @_reported("deleting")
    def delete(self, id: str, props: dict) -> None:
        if props.get("adopt"):
            return
        self._api(props).cloud.k8s.clusters.delete_and_poll(id)


class GcoreClusterResource(pulumi.dynamic.Resource):
    kubeconfig: pulumi.Output[str]
    version: pulumi.Output[str]
    findings: pulumi.Output[list]

    def __init__(self, name: str, props: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__(ClusterProvider(), name, {**props, "kubeconfig": None, "version": None, "findings": None}, opts)


class GcorePoolResource(pulumi.dynamic.Resource):
    node_count: pulumi.Output[int]

    def __init__(self, name: str, props: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__(PoolProvider(), name, {**props, "node_count": None}, opts)


def location(stack: StackConfig) -> tuple[int, int]:
    """The project and region every Gcore resource of the stack lives in (gcore:projectId, gcore:regionId or the SDK's
    environment variables; validation made sure one of each is there)."""
    project, _ = provider_value("gcore", "gcore:projectId", stack.providers)
    region, _ = provider_value("gcore", "gcore:regionId", stack.providers)
    return int(project or 0), int(region or 0)


class GcoreCluster(Component):
    """A Gcore Managed Kubernetes cluster with a small CPU pool for the add-ons, or an existing cluster found by name."""

    TYPE = "GcoreCluster"

    def __init__(self, name: str, stack: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, opts)
        cluster = stack.cluster
        project, region = location(stack)
        # Checked against the SDK's own type by the provider's Check (ClusterProvider.check), before anything is created.
        params = decide.cluster_params(cluster)
        self.resource = GcoreClusterResource(name, {"project_id": project, "region_id": region, "cluster": params,
                                                    "adopt": not cluster.create},
                                             self.child(additional_secret_outputs=["kubeconfig"], protect=False))
        if not cluster.create:
            self.resource.findings.apply(lambda found: [pulumi.log.warn(m, resource=self) for m in found or []])
        self.cluster_name = pulumi.Output.from_input(cluster.name)
        self.kubeconfig = pulumi.Output.secret(self.resource.kubeconfig)
        self.kubernetes = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, opts=self.child())
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})

    def handle(self) -> ClusterHandle:
        return ClusterHandle(self.cluster_name, self.kubeconfig, self.kubernetes, {"cluster": self.resource})


class GcoreGpuNodePool(Component):
    """A Gcore pool of a GPU flavor: tainted, labelled, scaled by Gcore's autoscaler between min and max."""

    TYPE = "GcoreGpuNodePool"

    def __init__(self, plan: PoolPlan, cluster: ClusterHandle, stack: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__(plan.name, opts)
        project, region = location(stack)
        # The taint form here; the SDK's own type in the provider's Check (PoolProvider.check), before anything is created.
        params = pool_taints(merged(decide.pool_params(plan), plan.pool.node, decide.NODE_API.defaults))
        self.pool = GcorePoolResource(plan.name, {"project_id": project, "region_id": region, "cluster_name": stack.cluster.name,
                                                  "pool": params},
                                      self.child(depends_on=[cluster.details["cluster"]]))
        self.register_outputs({"poolName": plan.name})


def build_cluster(stack: StackConfig, opts: pulumi.ResourceOptions | None = None) -> ClusterHandle:
    return GcoreCluster(stack.cluster.name, stack, opts).handle()


def build_autoscaler(stack: StackConfig, cluster: ClusterHandle, plans: list[PoolPlan], service_monitor: dict | None,
                     after: list[pulumi.Resource], opts: pulumi.ResourceOptions | None = None) -> None:
    """Gcore runs the cluster autoscaler for every pool; gpupools installs none."""
    return None


def build_pool(plan: PoolPlan, cluster: ClusterHandle, stack: StackConfig, installer: str, autoscaler: None = None,
               opts: pulumi.ResourceOptions | None = None) -> Component:
    return GcoreGpuNodePool(plan, cluster, stack, opts)
