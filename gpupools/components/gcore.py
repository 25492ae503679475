"""Gcore Managed Kubernetes: the cluster and its GPU pools as Pulumi dynamic resources over Gcore's Python SDK.

No Pulumi provider for Gcore is published for Python, so the cluster and each pool are `pulumi.dynamic` resources whose
provider calls the official `gcore` SDK (client.cloud.k8s.clusters and .pools). Inputs are checked against the SDK's
own parameter types (its TypedDicts, through pydantic) before anything is sent. The API key is read from GCORE_API_KEY
by the provider when it runs: it is never an input, so it never enters the Pulumi state or an output.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from gpupools.clouds import gcore as decide
from gpupools.core.pools import PoolPlan
from gpupools.stack.config import StackConfig
from gpupools.stack.providers import provider_value

from gpupools.components.base import ClusterHandle, Component

# SPEC K8sClusterPoolCreateV2Serializer.taints: "<value>:<Effect>" per key.
TAINT_VALUE = re.compile(r"^[A-Za-z0-9._-]{0,63}:(NoSchedule|PreferNoSchedule|NoExecute)$")


class GcoreInputError(ValueError):
    """Inputs the SDK's parameter types (or the API's documented forms) refuse; the message names the field."""


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


def client(project_id: int, region_id: int, http_client: Any = None):
    """Gcore's SDK client for one project and region; the key comes from GCORE_API_KEY, read here and nowhere else."""
    from gcore import Gcore

    key = os.environ.get("GCORE_API_KEY")
    if not key:
        raise GcoreInputError("GCORE_API_KEY is not set: the Gcore resources read the API key from the environment when they run")
    return Gcore(api_key=key, cloud_project_id=project_id, cloud_region_id=region_id, http_client=http_client)


def newest_patch(api, minor: str) -> str:
    """The newest `create_versions` entry of a minor ("1.36" -> "v1.36.1"), as the API wants it."""
    found = [v.version for v in api.cloud.k8s.list_versions() if v.version.lstrip("v").startswith(f"{minor}.")]
    if not found:
        raise GcoreInputError(f"cluster.version: Gcore offers no Kubernetes {minor} in this region")
    return max(found, key=lambda v: tuple(int(x) for x in v.lstrip("v").split(".")))


def _pool_state(pool) -> dict:
    """A pool as the API reads it, in PoolCreateParams form, with the server-managed labels left out."""
    state = {f: getattr(pool, f, None) for f in decide.POOL_REPLACE + decide.POOL_UPDATE}
    state["labels"] = {k: v for k, v in (pool.labels or {}).items() if not k.startswith(decide.SERVER_LABEL_PREFIX)}
    state["node_count"] = pool.node_count
    return {k: v for k, v in state.items() if v is not None}


# What `pools.check_quota` takes of a pool (SDK PoolCheckQuotaParams).
QUOTA_FIELDS = ("flavor_id", "boot_volume_size", "is_public_ipv4", "max_node_count", "min_node_count", "name", "servergroup_policy")


class PoolProvider(ResourceProvider):
    """A Gcore cluster pool. Its id is `<cluster>/<pool>`. `http_client`: a transport for tests."""

    def __init__(self, http_client: Any = None):
        self.http_client = http_client

    def _api(self, props: dict):
        return client(int(props["project_id"]), int(props["region_id"]), self.http_client)

    def check(self, olds: dict, news: dict) -> CheckResult:
        return _checked(news, "pool", lambda: pool_create_params(dict(news["pool"])))

    def create(self, props: dict) -> CreateResult:
        body = pool_create_params(dict(props["pool"]))
        api = self._api(props)
        # Before anything is created, as Gcore's own Terraform provider does (TF2 resource.go checkPoolQuotaLimits).
        quota = api.cloud.k8s.clusters.pools.check_quota(**{k: body[k] for k in QUOTA_FIELDS if k in body})
        exceeded = decide.quota_problems(quota.model_dump(exclude_none=True))
        if exceeded:
            raise GcoreInputError(f"pool {body['name']}: the project's Gcore quota is too small ({'; '.join(exceeded)}); ask Gcore "
                                  f"for more, or lower maxNodes")
        pool = api.cloud.k8s.clusters.pools.create_and_poll(cluster_name=props["cluster_name"], **body)
        return CreateResult(f"{props['cluster_name']}/{pool.name}", {**props, "node_count": pool.node_count})

    def diff(self, id: str, olds: dict, news: dict) -> DiffResult:
        replaces, updates = decide.pool_change(olds.get("pool") or {}, news.get("pool") or {})
        moved = [k for k in ("cluster_name", "project_id", "region_id") if str(olds.get(k)) != str(news.get(k))]
        replace = [f"pool.{f}" for f in replaces] + moved
        # A pool keeps its name when only its flavor or volumes change, and a cluster holds one pool of a name: the old
        # pool goes before the new one comes.
        return DiffResult(changes=bool(replace or updates), replaces=replace, delete_before_replace=True)

    def update(self, id: str, olds: dict, news: dict) -> UpdateResult:
        _, updates = decide.pool_change(olds.get("pool") or {}, news.get("pool") or {})
        new = news["pool"]
        api = self._api(news)
        pools = api.cloud.k8s.clusters.pools
        # A map left out means "unchanged" to the PATCH: an emptied one is sent empty.
        body = pool_update_params({f: new.get(f) if new.get(f) is not None or f not in decide.EMPTY_AS_UNSET else
                                   ([] if f == "security_group_ids" else {}) for f in updates}, news["cluster_name"])
        pool = pools.update(new["name"], cluster_name=news["cluster_name"], **body)
        target = decide.resize_target(pool.node_count, new["min_node_count"], new.get("max_node_count", new["min_node_count"]))
        if target is not None:
            pool = pools.resize_and_poll(new["name"], cluster_name=news["cluster_name"], node_count=target)
        return UpdateResult({**news, "node_count": pool.node_count})

    def read(self, id: str, props: dict) -> ReadResult:
        api = self._api(props)
        cluster, name = id.split("/", 1)
        pool = api.cloud.k8s.clusters.pools.get(name, cluster_name=cluster)
        state = _pool_state(pool)
        node_count = state.pop("node_count", None)
        return ReadResult(id, {**props, "pool": {**props.get("pool", {}), **state}, "node_count": node_count})

    def delete(self, id: str, props: dict) -> None:
        cluster, name = id.split("/", 1)
        self._api(props).cloud.k8s.clusters.pools.delete_and_poll(name, cluster_name=cluster)


class ClusterProvider(ResourceProvider):
    """A Gcore cluster (with its CPU pool), or an existing one adopted by name (`adopt`: read, never changed or deleted).
    The kubeconfig is an output, kept secret by the component."""

    def __init__(self, http_client: Any = None):
        self.http_client = http_client

    def _api(self, props: dict):
        return client(int(props["project_id"]), int(props["region_id"]), self.http_client)

    def _kubeconfig(self, api, name: str) -> str:
        return api.cloud.k8s.clusters.kubeconfig.get(name).config

    def check(self, olds: dict, news: dict) -> CheckResult:
        if news.get("adopt"):
            return CheckResult(news, [])
        # The minor stands in for the patch version `create` resolves (the SDK's type is a string either way).
        params = dict(news["cluster"])
        return _checked(news, "cluster", lambda: cluster_create_params({**params, "version": decide.api_version(params.get("version"))}))

    def create(self, props: dict) -> CreateResult:
        api = self._api(props)
        wanted = dict(props["cluster"])
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

    def diff(self, id: str, olds: dict, news: dict) -> DiffResult:
        if news.get("adopt") or olds.get("adopt"):
            moved = bool(news.get("adopt")) != bool(olds.get("adopt"))
            return DiffResult(changes=moved, replaces=["adopt"] if moved else [])
        replaces, upgrades, updates = decide.cluster_change(olds.get("cluster") or {}, news.get("cluster") or {})
        moved = [k for k in ("project_id", "region_id") if str(olds.get(k)) != str(news.get(k))]
        replace = [f"cluster.{f}" for f in replaces] + moved
        return DiffResult(changes=bool(replace or upgrades or updates), replaces=replace, delete_before_replace=True)

    def update(self, id: str, olds: dict, news: dict) -> UpdateResult:
        _, upgrades, updates = decide.cluster_change(olds.get("cluster") or {}, news.get("cluster") or {})
        api = self._api(news)
        clusters = api.cloud.k8s.clusters
        new = news["cluster"]
        version = olds.get("version")
        if upgrades:
            why = decide.upgrade_problem(olds["cluster"]["version"], new["version"])
            if why is not None:
                raise GcoreInputError(f"cluster.version: {why}")
            version = newest_patch(api, new["version"])
            version = clusters.upgrade_and_poll(id, version=version).version
        if updates:
            clusters.update_and_poll(id, **cluster_update_params({f: new.get(f) for f in updates}))
        return UpdateResult({**news, "version": version, "kubeconfig": olds.get("kubeconfig")})

    def read(self, id: str, props: dict) -> ReadResult:
        api = self._api(props)
        found = api.cloud.k8s.clusters.get(id)
        return ReadResult(id, {**props, "version": found.version})

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
        params = pool_taints(decide.pool_params(plan))
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
