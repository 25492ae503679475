"""The fleet's pure decisions, each case both ways: which kubeconfigs MultiKueue refuses (kueue v0.19.2
multikueuecluster.go, validateKubeconfig / validateRestConfig / isValidHostname), which cluster a stack's kubeconfig
names, whether the manager reaches a worker, and the RBAC a worker grants. No plan is built here."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

SERVER = "https://abc.gr7.eu-central-1.eks.amazonaws.com"


def _kubeconfig(cluster: dict | None = None, user: dict | None = None) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                           "clusters": [{"name": "c", "cluster": {"server": SERVER, "certificate-authority-data": "Q0E=", **(cluster or {})}}],
                           "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                           "users": [{"name": "u", "user": user if user is not None else {"token": "t"}}]})


@pytest.mark.parametrize("user, why", [
    ({"tokenFile": "/var/run/token"}, "tokenFile is not allowed"),
    ({"username": "admin"}, "basic auth is not allowed"),
    ({"password": "pw"}, "basic auth is not allowed"),
    ({"exec": {"command": "aws"}}, "exec plugins are not allowed"),
    ({"auth-provider": {"name": "gcp"}}, "auth providers are not allowed"),
])
def test_each_credential_kueue_refuses_is_named_alone(user, why):
    """Protects the manager from storing a worker kubeconfig Kueue would refuse (the MultiKueueCluster stays inactive)."""
    from gpupools.fleet.credentials import kubeconfig_problems

    assert kubeconfig_problems(_kubeconfig(user=user)) == [why]
    assert kubeconfig_problems(_kubeconfig(user={"token": "t"})) == []


def test_a_kubeconfig_without_server_or_not_yaml_is_refused():
    from gpupools.fleet.credentials import kubeconfig_problems

    assert kubeconfig_problems(_kubeconfig(cluster={"server": ""})) == ["server URL is required"]
    assert kubeconfig_problems("a: [") == ["not a kubeconfig (Kueue fails to parse it: BadKubeConfig)"]
    assert kubeconfig_problems(None) == ["not a kubeconfig (Kueue fails to parse it: BadKubeConfig)"]
    assert kubeconfig_problems("- a list") == ["not a kubeconfig (Kueue fails to parse it: BadKubeConfig)"]


@pytest.mark.parametrize("server, ok", [
    ("https://10.0.0.1:443", True), ("https://[fd00::1]:6443", True), ("https://API.Example.com", True),
    ("https://api.example.com/path", True), ("https://bad_host", False), ("api.example.com", False),
    ("https://" + ".".join(["a" * 63] * 3 + ["b" * 61]), True),  # 253 characters: the longest allowed
    ("https://" + ".".join(["a" * 63] * 3 + ["b" * 62]), False),
])
def test_the_server_host_is_an_ip_or_a_dns_subdomain(server, ok):
    """Kueue's isValidHostname: an IP (v4 or v6) or a DNS-1123 subdomain of at most 253 characters."""
    from gpupools.fleet.credentials import _host_ok

    assert _host_ok(server) is ok


def test_token_kubeconfig_takes_the_current_contexts_cluster():
    """The manager's kubeconfig points at the cluster the stack's kubeconfig selects, not the first listed one."""
    from gpupools.fleet.credentials import token_kubeconfig

    doc = {"current-context": "second",
           "clusters": [{"name": "one", "cluster": {"server": "https://one.example.com", "certificate-authority-data": "MQ=="}},
                        {"name": "two", "cluster": {"server": "https://two.example.com", "certificate-authority-data": "Mg=="}}],
           "contexts": [{"name": "first", "context": {"cluster": "one"}}, {"name": "second", "context": {"cluster": "two"}}]}
    made = yaml.safe_load(token_kubeconfig(yaml.safe_dump(doc), "tok", "gcp-us"))
    assert made["clusters"] == [{"name": "gcp-us", "cluster": {"server": "https://two.example.com", "certificate-authority-data": "Mg=="}}]
    assert made["current-context"] == "gcp-us"
    assert made["contexts"] == [{"name": "gcp-us", "context": {"cluster": "gcp-us", "user": "gcp-us-multikueue-sa"}}]
    # No current context: the first context's cluster; no context at all: the first cluster.
    first = yaml.safe_load(token_kubeconfig(yaml.safe_dump({**doc, "current-context": None}), "tok", "w"))
    assert first["clusters"][0]["cluster"]["server"] == "https://one.example.com"
    bare = yaml.safe_load(token_kubeconfig(yaml.safe_dump({"clusters": doc["clusters"][1:]}), "tok", "w"))
    assert bare["clusters"][0]["cluster"]["server"] == "https://two.example.com"


@pytest.mark.parametrize("text, why", [
    ("a: [", "not YAML"), ("- x", "not a mapping"), (yaml.safe_dump({"clusters": []}), "names no cluster"),
    (yaml.safe_dump({"clusters": [{"name": "c", "cluster": {"server": SERVER}}]}), "lacks server or certificate-authority-data"),
    (yaml.safe_dump({"clusters": [{"name": "c", "cluster": {"certificate-authority-data": "Q0E="}}]}), "lacks server"),
])
def test_token_kubeconfig_refuses_what_it_cannot_use(text, why):
    from gpupools.fleet.credentials import KubeconfigError, token_kubeconfig

    with pytest.raises(KubeconfigError, match=why):
        token_kubeconfig(text, "tok", "w")


def test_worker_rules_follow_the_frameworks_dispatched():
    """The worker grants the manager exactly its frameworks' objects and Kueue's, never more (least privilege)."""
    from gpupools.fleet.credentials import KUEUE_RULES, worker_rules

    rules = worker_rules(["pod"])
    assert rules == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "get", "list", "watch"]}, *KUEUE_RULES]
    assert rules[0]["verbs"] is not KUEUE_RULES[0]["verbs"]  # copies: a caller's change leaves the module's rules alone


def test_the_binding_grants_the_role_to_the_account_whose_token_is_exported():
    """Protects the manager's access: the ClusterRoleBinding's subject is the ServiceAccount the token Secret belongs to
    (same name and namespace), and its roleRef the ClusterRole with the rules; a mismatch leaves the token without rights."""
    from gpupools.fleet.credentials import worker_access_objects

    account, role, binding, secret = worker_access_objects()
    assert [o["kind"] for o in (account, role, binding, secret)] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Secret"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": account["metadata"]["namespace"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"] and binding["roleRef"]["kind"] == "ClusterRole"
    assert secret["metadata"]["namespace"] == account["metadata"]["namespace"] == "kueue-system"
    assert secret["metadata"]["annotations"]["kubernetes.io/service-account.name"] == account["metadata"]["name"]


# --------------------------------------------------------------------------------------------------------------------
# Reaching a worker


def _reach(network="public", endpoint_access=None, authorized=(), egress=()):
    from gpupools.fleet.plan import reachability

    cluster = SimpleNamespace(endpoint_access=endpoint_access, authorized_cidrs=list(authorized),
                              endpoint_mode=endpoint_access or ("restricted" if authorized else "private"))
    view = SimpleNamespace(entry=SimpleNamespace(worker=SimpleNamespace(network=network), stack=SimpleNamespace(cluster=cluster)))
    stack = SimpleNamespace(fleet=SimpleNamespace(manager_egress_cidrs=list(egress)))
    return reachability(stack, view)


def test_the_manager_reaches_a_worker_only_through_an_open_door():
    """Protects dispatch: a worker the manager cannot reach would hold admitted jobs until workerLostTimeout."""
    assert _reach(endpoint_access="public")[0] is True
    assert _reach(network="private")[0] is True
    assert _reach()[0] is False  # a private endpoint without private connectivity
    assert _reach(authorized=["198.51.100.0/24"])[0] is False  # manager egress unset
    assert _reach(authorized=["198.51.100.0/24"], egress=["198.51.100.7/32"]) == (
        True, "the manager's egress 198.51.100.7/32 is in the worker's authorizedCidrs")
    ok, why = _reach(authorized=["198.51.100.0/24"], egress=["198.51.100.7/32", "203.0.113.0/24"])
    assert not ok and why.endswith("lacks the manager's egress 203.0.113.0/24")
    # An IPv6 egress is never inside an IPv4 range.
    assert _reach(authorized=["0.0.0.0/0"], egress=["2001:db8::/64"])[0] is False


# --------------------------------------------------------------------------------------------------------------------
# The fleet stack file


FLEET = {"aws:region": "eu-central-1", "gpupools:cloud": "aws", "gpupools:cluster": {"name": "ml-fleet-manager", "create": False},
         "gpupools:fleet": {"origin": "gpupools-fleet-eu",
                            "workers": [{"name": "aws-eu", "stack": "acme/gpupools/fleet-aws", "file": "Pulumi.fleet-aws.yaml"}],
                            "teams": [{"name": "research"}]}}


def _fleet_problems(config: dict, read=None) -> list[str]:
    from pathlib import Path

    from gpupools.fleet.config import read_fleet
    from gpupools.stack.errors import ConfigError

    try:
        read_fleet(config, Path("/nonexistent"), "fleet", read or (lambda path: SimpleNamespace(path=path)))
    except ConfigError as exc:
        return [f"{p.path}: {p.message}" for p in exc.problems]
    return []


def test_a_fleet_names_each_worker_and_team_once():
    """Protects the MultiKueueCluster and ClusterQueue names, which must be unique: the refusal names the duplicate."""
    import copy

    twice = copy.deepcopy(FLEET)
    twice["gpupools:fleet"]["workers"].append({**FLEET["gpupools:fleet"]["workers"][0], "stack": "acme/gpupools/other"})
    twice["gpupools:fleet"]["teams"] += [{"name": "search"}, {"name": "research"}]
    problems = _fleet_problems(twice)
    assert problems == ["fleet.workers: lists aws-eu more than once (got a list of 2 items)",
                        "fleet.teams: lists research more than once (got a list of 3 items)"]
    assert _fleet_problems(FLEET) == []


def test_a_fleet_stack_takes_only_its_own_keys_and_a_known_cloud():
    from gpupools.stack.errors import ConfigError, Problem

    assert _fleet_problems({**FLEET, "gpupools:pools": []})[0].startswith("pools: a fleet stack (gpupools:fleet) takes only cloud, cluster, fleet")
    assert _fleet_problems({**FLEET, "gpupools:cloud": "azure-stack"})[0].startswith("cloud: the manager's cloud: one of ")

    def broken(path):
        raise ConfigError([Problem("pools[0].maxNodes", "too many"), Problem("", "no cloud")])

    # A worker's own problems come back under its file entry, with the worker file's field paths.
    assert _fleet_problems(FLEET, broken) == ["fleet.workers[0].file: Pulumi.fleet-aws.yaml: pools[0].maxNodes: too many",
                                              "fleet.workers[0].file: Pulumi.fleet-aws.yaml: no cloud"]


# --------------------------------------------------------------------------------------------------------------------
# The manager's objects and checks, on a fleet without worker stacks (nothing to plan)


def _bare_fleet(**fleet):
    from gpupools.fleet.config import Fleet, FleetStack
    from gpupools.stack.config import Cluster

    raw = {**FLEET["gpupools:fleet"], **fleet}
    return FleetStack("fleet", "aws", Cluster.model_validate({"name": "ml-fleet-manager", "create": False}), Fleet.model_validate(raw), {}, ())


@pytest.fixture(scope="module")
def bare_plan():
    from gpupools.fleet.plan import plan_fleet

    workers = [{"name": "aws-eu", "stack": "acme/gpupools/fleet-aws", "file": "Pulumi.fleet-aws.yaml"},
               {"name": "gcp-us", "stack": "acme/gpupools/fleet-gcp", "file": "Pulumi.fleet-gcp.yaml"},
               {"name": "again", "stack": "acme/gpupools/fleet-aws", "file": "Pulumi.fleet-aws2.yaml"}]
    return plan_fleet(_bare_fleet(workers=workers, teams=[{"name": "research"}, {"name": "search", "namespace": "search-prod"}],
                                  stepSize=2))


def test_one_worker_stack_named_twice_is_refused(bare_plan):
    """Protects dispatch: two MultiKueueClusters on one worker would dispatch to one cluster under two names."""
    dup = [f"{p.path}: {p.message}" for p in bare_plan.problems if p.path.startswith("fleet.workers")]
    assert dup == ["fleet.workers[2].stack: acme/gpupools/fleet-aws is worker aws-eu already"]


def test_the_manager_objects_connect_workers_queues_and_the_check(bare_plan):
    """What the manager's Kueue needs to dispatch: one MultiKueueCluster per worker (its kubeconfig Secret), the config
    listing them in order, per team a ClusterQueue with the MultiKueue check and a LocalQueue pointing at it."""
    objects = bare_plan.objects
    clusters = [o for o in objects if o["kind"] == "MultiKueueCluster"]
    assert [(c["metadata"]["name"], c["spec"]["clusterSource"]["kubeConfig"]["location"]) for c in clusters] == [
        ("aws-eu", "aws-eu-kubeconfig"), ("gcp-us", "gcp-us-kubeconfig"), ("again", "again-kubeconfig")]
    (config,) = [o for o in objects if o["kind"] == "MultiKueueConfig"]
    assert config["spec"]["clusters"] == ["aws-eu", "gcp-us", "again"]
    queues = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterQueue"}
    assert queues["search"]["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "search-prod"}}
    assert queues["search"]["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "multikueue"}]}
    local = {o["metadata"]["name"]: o for o in objects if o["kind"] == "LocalQueue"}
    assert local["search"]["metadata"]["namespace"] == "search-prod" and local["search"]["spec"] == {"clusterQueue": "search"}
    assert bare_plan.problems and not [p for p in bare_plan.problems if p.path == "fleet"]  # the checks pass on our own objects


def test_the_manager_configuration_carries_the_fleets_dispatch_settings():
    from gpupools.fleet.plan import manager_configuration

    multi = manager_configuration(_bare_fleet(stepSize=2, workerLostTimeout="30m"))["multiKueue"]
    assert multi == {"gcInterval": "1m", "origin": "gpupools-fleet-eu", "workerLostTimeout": "30m",
                     "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental", "incrementalDispatcherConfig": {"stepSize": 2}}


def test_the_default_origin_is_refused_and_an_own_one_is_not():
    from gpupools.fleet.plan import plan_fleet

    assert [p.path for p in plan_fleet(_bare_fleet(origin="multikueue")).problems if p.path == "fleet.origin"] == ["fleet.origin"]
    assert [p.path for p in plan_fleet(_bare_fleet()).problems if p.path == "fleet.origin"] == []


def _queue(checks: list[dict]) -> list[dict]:
    return [{"kind": "AdmissionCheck", "metadata": {"name": "multikueue"}, "spec": {"controllerName": "kueue.x-k8s.io/multikueue"}},
            {"kind": "AdmissionCheck", "metadata": {"name": "mk2"}, "spec": {"controllerName": "kueue.x-k8s.io/multikueue"}},
            {"kind": "AdmissionCheck", "metadata": {"name": "other"}, "spec": {"controllerName": "example.com/check"}},
            {"kind": "ClusterQueue", "metadata": {"name": "research"}, "spec": {"admissionChecksStrategy": {"admissionChecks": checks}}}]


def test_a_manager_queue_kueue_would_leave_inactive_is_refused():
    """kueue v0.19.2 pkg/cache/scheduler/clusterqueue.go: one MultiKueue check per queue, never per flavor."""
    from gpupools.fleet.plan import queue_check_problems

    assert queue_check_problems(_queue([{"name": "multikueue"}, {"name": "other"}])) == []
    assert queue_check_problems(_queue([{"name": "multikueue"}, {"name": "mk2"}])) == [
        "ClusterQueue research: more than one MultiKueue admission check; Kueue leaves the queue inactive"]
    assert queue_check_problems(_queue([{"name": "multikueue", "onFlavors": ["fleet"]}])) == [
        "ClusterQueue research: a MultiKueue admission check may not be given per flavor (onFlavors)"]
    assert queue_check_problems(_queue([{"name": "other", "onFlavors": ["fleet"]}])) == []


def test_a_teams_fleet_job_goes_to_its_own_queue_with_a_resource_its_manager_queue_covers():
    """What `gpupools workload --fleet --team` prints: the team's namespace and LocalQueue, the first GPU resource the
    team's manager queue has quota for (another team's does not count), suspended, managed by MultiKueue, a valid Job."""
    from gpupools.fleet.plan import TeamQuota, fleet_job

    stack = _bare_fleet(teams=[{"name": "research"}, {"name": "search", "namespace": "search-prod"}])
    quotas = [TeamQuota("research", "nvidia.com/mig-1g.10gb", 4, 4, (), False),
              TeamQuota("search", "nvidia.com/gpu", 0, 0, (), False), TeamQuota("search", "nvidia.com/mig-3g.40gb", 2, 2, (), False)]
    job = fleet_job(stack, "search", None, 1, "img", quotas)
    assert job["metadata"]["namespace"] == "search-prod" and job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "search"}
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/mig-3g.40gb": 1}}
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"  # the Job API takes only Never or OnFailure
    assert (job["spec"]["suspend"], job["spec"]["backoffLimit"], job["spec"]["managedBy"]) == (True, 0, "kueue.x-k8s.io/multikueue")
    research = fleet_job(stack, "research", None, 2, "img", quotas)
    assert research["metadata"]["namespace"] == "research"
    assert research["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/mig-1g.10gb": 2}}
    assert fleet_job(stack, "research", "nvidia.com/gpu", 1, "img", [])["spec"]["template"]["spec"]["containers"][0]["resources"] == \
        {"limits": {"nvidia.com/gpu": 1}}
