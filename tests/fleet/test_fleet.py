"""A gpupools fleet: the example fleet planned once per module, its manager objects against the pinned MultiKueue CRDs,
the manager's Kueue rendered by the pinned chart, worker credentials against Kueue's documented recipe, and every
refusal across stacks."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from conftest import crd_rule_failures, needs_reference

ROOT = Path(__file__).resolve().parents[2]
STACKS = ROOT / "stacks"
MARKER = "tok-PLANTED-d41d8cd98f00"
runner = CliRunner()


def _raw(name: str) -> dict:
    from gpupools.stack.values import read_stack_file

    return read_stack_file(STACKS / f"Pulumi.{name}.yaml")


def fleet_of(fleet_raw: dict | None = None, workers: dict[str, dict] | None = None):
    """The example fleet, or a variant: `workers` replaces worker stack files by file name."""
    from gpupools.fleet.config import read_fleet
    from gpupools.validation.stack import validate_stack

    workers = workers or {}

    def read(path: Path):
        return validate_stack(workers.get(path.name) or _raw(path.name[len("Pulumi."):-len(".yaml")]))

    return read_fleet(fleet_raw or _raw("fleet"), STACKS, "fleet", read)


@pytest.fixture(scope="module")
def planned():
    from gpupools.cli.fleet import run_fleet
    from gpupools.fleet.plan import plan_fleet

    fleet = fleet_of()
    plan = plan_fleet(fleet)
    return fleet, plan, run_fleet(_raw("fleet"), "fleet", fleet, plan)


def problems_of(fleet_raw=None, workers=None) -> list[str]:
    from gpupools.fleet.plan import plan_fleet

    return [str(p) for p in plan_fleet(fleet_of(fleet_raw, workers)).problems]


def worker(name: str, **changes) -> dict:
    raw = copy.deepcopy(_raw(name))
    for key, value in changes.items():
        if value is None:
            raw.pop(f"gpupools:{key}", None)
        else:
            raw[f"gpupools:{key}"] = value
    return raw


# --------------------------------------------------------------------------------------------------------------------
# The example fleet


def test_the_example_fleet_plans_with_both_quota_layers_and_landing(planned):
    fleet, plan, result = planned
    assert plan.problems == []
    assert [(q.team, q.resource, q.manager, q.workers, q.per_worker) for q in plan.quotas] == [
        ("research", "nvidia.com/gpu", 22, 22, (("aws-eu", 18), ("gcp-us", 4))),
        ("search", "nvidia.com/gpu", 4, 4, (("aws-eu", 2), ("gcp-us", 2)))]
    assert [(r.team, r.shape, r.workers) for r in plan.landing] == [
        ("research", "unit", (("aws-eu", ("l4", "a100")), ("gcp-us", ("l4",)))),
        ("research", "node", (("aws-eu", ("a100",)),)),
        ("search", "unit", (("aws-eu", ("l4",)), ("gcp-us", ("l4",))))]
    from gpupools.cli.fleet import plan_lines

    lines = plan_lines(fleet, plan, len(result.resources))
    assert "  research   nvidia.com/gpu        22       18        4" in lines
    assert "  search unit: aws-eu (l4); gcp-us (l4)" in lines
    assert lines[-1] == f"{len(result.resources)} resources."


def test_the_manager_objects_and_their_order(planned):
    _, plan, result = planned
    kinds = {r.type.rsplit(":", 1)[-1] for r in result.resources}
    assert {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue", "LocalQueue", "Release", "Secret"} <= kinds
    config = next(o for o in plan.objects if o["kind"] == "MultiKueueConfig")
    assert config["spec"]["clusters"] == ["aws-eu", "gcp-us"]  # dispatch order = the fleet's order
    mkc = {o["metadata"]["name"]: o for o in plan.objects if o["kind"] == "MultiKueueCluster"}
    assert mkc["gcp-us"]["spec"]["clusterSource"]["kubeConfig"] == {"locationType": "Secret", "location": "gcp-us-kubeconfig"}
    research = next(o for o in plan.objects if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "research")
    assert research["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "multikueue"}]}
    assert research["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [{"name": "nvidia.com/gpu", "nominalQuota": 22}]
    lq = [o for o in plan.objects if o["kind"] == "LocalQueue"]
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in lq] == [("research", "research"), ("search-prod", "search")]
    secret = result.get("kubernetes:core/v1:Secret", "gcp-us-kubeconfig")
    assert secret.inputs["metadata"]["namespace"] == "kueue-system" and secret.inputs["stringData"] == "[secret]"


def _schema(plural: str) -> dict:
    # RE2 takes a flag group after `^` (the AdmissionCheck CRD's `^(?i)[a-z]...`); Python's re wants it first.
    text = (needs_reference() / "kueue" / f"kueue.x-k8s.io_{plural}.yaml").read_text().replace("^(?i)", "(?i)^")
    crd = yaml.safe_load(text)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    return version["schema"]["openAPIV3Schema"]


PLURALS = {"MultiKueueCluster": "multikueueclusters", "MultiKueueConfig": "multikueueconfigs", "AdmissionCheck": "admissionchecks",
           "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues", "ResourceFlavor": "resourceflavors",
           "WorkloadPriorityClass": "workloadpriorityclasses"}


def test_manager_objects_validate_against_the_pinned_crds(planned):
    jsonschema = pytest.importorskip("jsonschema")
    _, plan, _ = planned
    checked = set()
    for obj in plan.objects:
        if obj["kind"] in PLURALS:
            schema = _schema(PLURALS[obj["kind"]])
            jsonschema.validate(obj, schema)
            assert crd_rule_failures(obj, schema) == []
            checked.add(obj["kind"])
    assert checked == set(PLURALS)
    # The checks catch a MultiKueueCluster naming both sources (the CRD's CEL rule) and a wrong location type.
    bad = copy.deepcopy(next(o for o in plan.objects if o["kind"] == "MultiKueueCluster"))
    bad["spec"]["clusterSource"]["clusterProfileRef"] = {"name": "x"}
    assert crd_rule_failures(bad, _schema("multikueueclusters"))
    bad["spec"]["clusterSource"]["kubeConfig"]["locationType"] = "Vault"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, _schema("multikueueclusters"))


def test_the_manager_kueue_renders_with_multikueue_configured(planned):
    from charts.chartrender import plan_releases

    _, _, result = planned
    (release,) = plan_releases(result)
    assert release.chart == "kueue" and release.version == "0.19.2"
    objects = release.render()
    config_map = next(o for o in objects if o["kind"] == "ConfigMap" and "controller_manager_config.yaml" in (o.get("data") or {}))
    config = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
    assert config["multiKueue"] == {"gcInterval": "1m", "origin": "gpupools-fleet-eu", "workerLostTimeout": "15m",
                                    "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
                                    "incrementalDispatcherConfig": {"stepSize": 1}}
    assert "jobset.x-k8s.io/jobset" in config["integrations"]["frameworks"]
    crds = {o["spec"]["names"]["kind"] for o in objects if o["kind"] == "CustomResourceDefinition"}
    assert {"MultiKueueCluster", "MultiKueueConfig"} <= crds


def test_workers_export_a_token_kubeconfig_and_install_jobset():
    from conftest import plan_of

    plan = plan_of(_raw("fleet-gcp"), "fleet-gcp")
    assert plan.outputs["multikueueKubeconfig"] == "[secret]"
    assert plan.get("kubernetes:helm.sh/v3:Release", "jobset")  # no fabric pool: JobSet only because it is a worker
    token = plan.get("kubernetes:core/v1:Secret", "multikueue-sa")
    assert token.inputs["type"] == "kubernetes.io/service-account-token"
    assert token.inputs["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "multikueue-sa"}


def test_worker_rbac_is_kueues_documented_minimum():
    from gpupools.fleet.credentials import worker_access_objects
    from gpupools.queues.kueue import INTEGRATIONS

    documented = list(yaml.safe_load_all((needs_reference() / "kueue" / "multikueue" / "worker-rbac-derived.yaml").read_text()))
    ours = worker_access_objects()
    enabled = {("batch", "jobs"), ("", "pods"), ("apps", "statefulsets"), ("jobset.x-k8s.io", "jobsets")}
    assert {i.split("/")[-1] for i in INTEGRATIONS} == {"job", "pod", "deployment", "statefulset", "jobset"}

    def key(rule):
        return (tuple(rule["apiGroups"]), tuple(rule["resources"]), tuple(rule["verbs"]))

    wanted = [r for r in documented[1]["rules"]
              if r["apiGroups"][0] == "kueue.x-k8s.io" or (r["apiGroups"][0], r["resources"][0].split("/")[0]) in enabled]
    assert sorted(map(key, ours[1]["rules"])) == sorted(map(key, wanted))
    assert [o["kind"] for o in ours] == [d["kind"] for d in documented]
    assert ours[2]["roleRef"] == {**documented[2]["roleRef"], "name": "multikueue-sa-role"}
    assert ours[3]["type"] == documented[3]["type"]


# --------------------------------------------------------------------------------------------------------------------
# Credentials Kueue accepts

EKS_EXEC = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": "https://ABC.gr7.eu-central-1.eks.amazonaws.com", "certificate-authority-data": "Q0E="}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                                                       "args": ["eks", "get-token", "--cluster-name", MARKER]}}}]}


def test_exec_kubeconfigs_are_refused_and_token_ones_accepted():
    from gpupools.fleet.credentials import kubeconfig_problems, token_kubeconfig

    assert kubeconfig_problems(json.dumps(EKS_EXEC)) == ["exec plugins are not allowed"]
    made = token_kubeconfig(json.dumps(EKS_EXEC), MARKER, "aws-eu")
    assert kubeconfig_problems(made) == []
    doc = yaml.safe_load(made)
    assert doc["users"] == [{"name": "aws-eu-multikueue-sa", "user": {"token": MARKER}}]
    assert doc["clusters"][0]["cluster"] == EKS_EXEC["clusters"][0]["cluster"]
    for change, why in [({"insecure-skip-tls-verify": True}, "insecure TLS verification is not allowed"),
                        ({"certificate-authority": "/ca.crt"}, "certificate-authority file paths are not allowed"),
                        ({"server": "https://bad_host:443"}, "untrusted server endpoint")]:
        bad = yaml.safe_load(made)
        bad["clusters"][0]["cluster"].update(change)
        assert [p for p in kubeconfig_problems(yaml.safe_dump(bad)) if p.startswith(why)], change


def test_the_manager_refuses_an_exec_kubeconfig_without_echoing_it():
    import pulumi

    from gpupools.deploy.fleet import _accepted

    # RunError: Pulumi prints its message alone, without the program's stack trace.
    with pytest.raises(pulumi.RunError) as caught:
        _accepted("aws-eu")(json.dumps(EKS_EXEC))
    assert "exec plugins are not allowed" in str(caught.value) and MARKER not in str(caught.value)
    token = yaml.safe_dump({**EKS_EXEC, "users": [{"name": "u", "user": {"token": MARKER}}]})
    assert _accepted("aws-eu")(token) == token


def test_no_kubeconfig_or_token_in_any_output(monkeypatch, tmp_path):
    """A planted token in every worker's kubeconfig output appears in no plan output, JSON, rendered file or error."""
    from gpupools.cli import planrun
    from gpupools.cli.main import app

    planted = json.dumps({**EKS_EXEC, "users": [{"name": "u", "user": {"token": MARKER}}]})
    monkeypatch.setattr(planrun, "_mock_worker_kubeconfig", lambda stack: planted)
    monkeypatch.chdir(ROOT)
    for args in (["plan", "--stack", "fleet"], ["plan", "--stack", "fleet", "--json"], ["check", "--stack", "fleet"]):
        out = runner.invoke(app, args)
        assert out.exit_code == 0, out.output
        assert MARKER not in out.output
    # An exec kubeconfig from a worker stops the program, naming the worker, never the kubeconfig. In a process of its
    # own: a program that fails leaves the SDK's pending outputs behind, which the next plan in this process would await.
    # Only the first worker's output is refused, so the line names one worker whatever order the outputs resolve in.
    script = ("import json, sys\nfrom gpupools.cli import planrun\nfrom gpupools.cli.main import app\n"
              "token = planrun._mock_worker_kubeconfig\n"
              f"planrun._mock_worker_kubeconfig = lambda stack: {json.dumps(json.dumps(EKS_EXEC))} if 'aws' in stack else token(stack)\n"
              "app(['plan', '--stack', 'fleet'])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "worker aws-eu: its multikueueKubeconfig stack output is a kubeconfig MultiKueue refuses: exec plugins are not allowed" in done.stderr
    assert MARKER not in done.stdout + done.stderr


# --------------------------------------------------------------------------------------------------------------------
# Refusals


def test_a_worker_without_jobset_is_refused():
    plain = worker("fleet-gcp", fleetWorker=None)
    problems = problems_of(workers={"Pulumi.fleet-gcp.yaml": plain})
    assert any("worker gcp-us has no JobSet CRD" in p for p in problems)
    assert any("worker gcp-us mints no service-account kubeconfig" in p for p in problems)
    assert not any("JobSet" in p for p in problems_of())


def test_a_kai_only_worker_is_refused_with_the_reason():
    kai = worker("fleet-gcp", quotas="kai", fleetWorker=None)  # with fleetWorker the stack refuses itself (below)
    problems = problems_of(workers={"Pulumi.fleet-gcp.yaml": kai})
    assert problems == ["error: fleet.workers[1]: worker gcp-us keeps its quotas with KAI Scheduler (gpupools:quotas: kai): MultiKueue "
                        "dispatches to a worker's own Kueue, which such a stack does not run; a worker needs gpupools:quotas: kueue"]


def test_a_private_worker_endpoint_is_refused_unless_private_connectivity_is_named():
    private = copy.deepcopy(_raw("fleet-gcp"))
    private["gpupools:cluster"] = {k: v for k, v in private["gpupools:cluster"].items() if k != "authorizedCidrs"}
    problems = problems_of(workers={"Pulumi.fleet-gcp.yaml": private})
    assert [p for p in problems if "cannot reach worker gcp-us: the worker's API endpoint is private" in p]
    narrow = copy.deepcopy(_raw("fleet-gcp"))
    narrow["gpupools:cluster"]["authorizedCidrs"] = ["203.0.113.0/24"]
    assert any("authorizedCidrs lacks the manager's egress 198.51.100.7/32" in p for p in problems_of(workers={"Pulumi.fleet-gcp.yaml": narrow}))
    linked = copy.deepcopy(_raw("fleet"))
    linked["gpupools:fleet"]["workers"][1]["network"] = "private"
    assert problems_of(linked, {"Pulumi.fleet-gcp.yaml": private}) == []


def test_a_team_missing_from_a_worker_is_refused():
    one_team = worker("fleet-gcp", teams=[{"name": "research", "gpus": {"l4": 4}}])
    problems = problems_of(workers={"Pulumi.fleet-gcp.yaml": one_team})
    assert any("worker gcp-us has no team search" in p for p in problems)
    moved = worker("fleet-gcp", teams=[{"name": "research", "gpus": {"l4": 4}}, {"name": "search", "gpus": {"l4": 2}}])
    assert any("puts team search's LocalQueue in namespace search, the fleet in search-prod" in p
               for p in problems_of(workers={"Pulumi.fleet-gcp.yaml": moved}))


def test_a_manager_clusterqueue_with_a_provisioning_request_check_is_refused(planned):
    from gpupools.fleet.plan import queue_check_problems

    _, plan, _ = planned
    assert queue_check_problems(plan.objects) == []
    objects = copy.deepcopy(plan.objects)
    objects.append({"kind": "AdmissionCheck", "metadata": {"name": "dws"}, "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}})
    cq = next(o for o in objects if o["kind"] == "ClusterQueue")
    cq["spec"]["admissionChecksStrategy"]["admissionChecks"].append({"name": "dws"})
    (problem,) = queue_check_problems(objects)
    assert problem.startswith("ClusterQueue research: a MultiKueue and a ProvisioningRequest admission check together leave the queue inactive")


def test_the_default_origin_and_a_fleet_the_worker_does_not_serve_are_refused():
    shared = copy.deepcopy(_raw("fleet"))
    shared["gpupools:fleet"]["origin"] = "multikueue"
    problems = problems_of(shared)
    assert problems[0].startswith("error: fleet.origin: 'multikueue' is Kueue's default")
    assert any("worker aws-eu does not serve fleet multikueue" in p for p in problems)


def test_manager_quota_above_the_workers_sum_needs_saying_so():
    raw = copy.deepcopy(_raw("fleet"))
    raw["gpupools:fleet"]["teams"][1]["gpus"] = {"nvidia.com/gpu": 5}
    (problem,) = problems_of(raw)
    assert "team search's manager quota of nvidia.com/gpu (5) is above its workers' sum (4)" in problem
    raw["gpupools:fleet"]["teams"][1]["aboveWorkers"] = True
    assert problems_of(raw) == []
    raw["gpupools:fleet"]["teams"][1] = {"name": "search", "namespace": "search-prod", "gpus": {"nvidia.com/gpu": 4}}
    assert problems_of(raw) == []  # at the sum: fine


def test_a_team_without_quota_on_any_worker_lands_nowhere():
    from gpupools.fleet.plan import plan_fleet

    no_quota = {"name": "search", "namespace": "search-prod", "gpus": {"l4": 0}, "borrow": "none"}
    workers = {f"Pulumi.{n}.yaml": worker(n, teams=[t for t in _raw(n)["gpupools:teams"] if t["name"] != "search"] + [no_quota])
               for n in ("fleet-aws", "fleet-gcp")}
    plan = plan_fleet(fleet_of(workers=workers))
    search = [r for r in plan.landing if r.team == "search"]
    assert [(r.shape, r.lands) for r in search] == [("unit", False)]
    assert "error: fleet.teams[1]: team search's unit job lands on no worker: no worker gives the team quota for it" in map(str, plan.problems)


def test_workload_fleet_prints_the_job_a_team_submits_to_the_manager(monkeypatch):
    from gpupools.cli.main import app

    monkeypatch.chdir(ROOT)
    out = runner.invoke(app, ["workload", "--stack", "fleet", "--fleet", "--team", "search"])
    assert out.exit_code == 0, out.output
    head, body = out.output.split("\n", 1)
    assert head.startswith("# fleet fleet: submit to the manager") and "aws-eu (l4), gcp-us (l4)" in head
    job = yaml.safe_load(body)
    assert job["metadata"]["namespace"] == "search-prod" and job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "search"}
    assert job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    out = runner.invoke(app, ["workload", "--stack", "fleet", "--fleet", "--team", "nobody"])
    assert out.exit_code == 2 and "error: --team:" in out.output


def test_a_plain_command_refuses_a_fleet_stack(monkeypatch):
    from gpupools.cli.main import app

    monkeypatch.chdir(ROOT)
    out = runner.invoke(app, ["render", "--stack", "fleet", "--out", "x"])
    assert out.exit_code == 2 and "fleet is a fleet stack" in out.output


def test_fleet_policies_report_each_problem():
    from types import SimpleNamespace

    from gpupools.policies import fleet as policies

    bad = {"fleet": {"origin": "multikueue", "quotas": [{"team": "a", "resource": "nvidia.com/gpu", "manager": 5, "workers": 4, "onPurpose": False}],
                     "workers": [{"name": "w", "tokenKubeconfig": False, "reachable": False, "reach": "private", "missingTeams": ["a"]}],
                     "queueProblems": ["ClusterQueue a: x"]}}
    good = {"fleet": {"origin": "o", "quotas": [{"team": "a", "resource": "nvidia.com/gpu", "manager": 5, "workers": 5, "onPurpose": False}],
                      "workers": [{"name": "w", "tokenKubeconfig": True, "reachable": True, "reach": "", "missingTeams": []}], "queueProblems": []}}
    for policy in policies.POLICIES:
        for props, count in ((bad, 1), (good, 0)):
            found = []
            policy.validate(SimpleNamespace(resource_type=policies.MANAGER, props=props), lambda m, u: found.append(m))
            assert len(found) == count, (policy.name, props)


def test_a_worker_stack_on_kai_or_without_teams_is_refused_on_its_own():
    from conftest import config_problems
    from gpupools.validation.stack import validate_stack

    kai = worker("fleet-gcp", quotas="kai")
    (problem,) = config_problems(kai)
    assert str(problem).startswith("error: fleetWorker: a fleet worker runs Kueue, to which the manager dispatches; this stack keeps its "
                                   "quotas with KAI Scheduler")
    (problem,) = config_problems(worker("fleet-gcp", teams=None))
    assert str(problem) == "error: fleetWorker: a fleet worker needs teams: their Kueue queues are what the manager dispatches to"
    assert validate_stack(_raw("fleet-gcp")).fleet_worker.fleets == ["gpupools-fleet-eu"]


MANAGERS = {
    "aws": ({"aws:region": "eu-central-1"}, {"name": "ml-fleet-manager", "authorizedCidrs": ["203.0.113.0/24"]}, "aws:eks/cluster:Cluster"),
    "gcp": ({"gcp:project": "p1", "gcp:region": "us-central1"},
            {"name": "ml-fleet-manager", "location": "us-central1", "authorizedCidrs": ["203.0.113.0/24"]}, "gcp:container/cluster:Cluster"),
    "azure": ({"azure-native:location": "westeurope"}, {"name": "mlfleet", "resourceGroup": "rg", "authorizedCidrs": ["203.0.113.0/24"]},
              "azure-native:containerservice:ManagedCluster"),
}


@pytest.mark.parametrize("cloud", sorted(MANAGERS))
def test_a_new_manager_cluster_on_each_cloud_has_no_gpu_pool(cloud):
    from gpupools.cli.fleet import load_fleet, run_fleet

    providers, cluster, cluster_type = MANAGERS[cloud]
    raw = {k: v for k, v in _raw("fleet").items() if k != "aws:region"}
    raw.update(providers)
    raw["gpupools:cloud"], raw["gpupools:cluster"] = cloud, cluster
    fleet, plan = load_fleet(raw, STACKS / "Pulumi.fleet.yaml", "fleet")
    result = run_fleet(raw, "fleet", fleet, plan)
    assert len(result.of_type(cluster_type)) == 1
    assert not [r for r in result.resources if r.type.startswith("gpupools:index:") and r.type.endswith(("Pool", "GpuPool"))]
    assert {r.name for r in result.of_type("kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueCluster")} == {"multikueuecluster-aws-eu",
                                                                                                       "multikueuecluster-gcp-us"}


def test_two_fleets_sharing_a_worker_under_one_origin_are_refused(tmp_path):
    from gpupools.cli.fleet import sibling_fleets
    from gpupools.fleet.plan import shared_origin_problems

    fleet = fleet_of()
    other = copy.deepcopy(_raw("fleet"))
    other["gpupools:fleet"]["workers"] = other["gpupools:fleet"]["workers"][1:]
    (tmp_path / "Pulumi.fleet.yaml").write_text(yaml.safe_dump({"config": _raw("fleet")}))
    (tmp_path / "Pulumi.fleet-us.yaml").write_text(yaml.safe_dump({"config": other}))
    siblings = sibling_fleets(tmp_path / "Pulumi.fleet.yaml")
    assert siblings == [("fleet-us", "gpupools-fleet-eu", ["acme/gpupools/fleet-gcp"])]
    (problem,) = shared_origin_problems(fleet, siblings)
    assert str(problem) == ("error: fleet.origin: fleet fleet-us uses origin gpupools-fleet-eu too and shares worker(s) acme/gpupools/fleet-gcp: "
                            "give each fleet its own origin")
    assert shared_origin_problems(fleet, [("fleet-us", "gpupools-fleet-us", ["acme/gpupools/fleet-gcp"])]) == []
    assert shared_origin_problems(fleet, [("fleet-x", "gpupools-fleet-eu", ["acme/gpupools/other"])]) == []


def test_worker_kueue_versions_must_be_compatible(planned):
    from dataclasses import replace

    from gpupools.fleet.plan import worker_problems

    fleet, plan, _ = planned
    view = plan.views[0]
    assert worker_problems(fleet, view) == []
    old = replace(view, kueue_version="0.14.3")
    assert [str(p) for p in worker_problems(fleet, old)] == [
        "error: fleet.workers[0]: worker aws-eu runs Kueue 0.14.3; the manager needs kueue.x-k8s.io/v1beta2 there (Kueue 0.15 or newer)"]
    other_minor = replace(view, kueue_version="0.18.1")
    assert "keep one minor release across the fleet" in str(worker_problems(fleet, other_minor)[0])
    assert worker_problems(fleet, replace(view, kueue_version="0.19.0")) == []


def test_a_shape_that_fails_on_every_worker_offering_it_lands_nowhere(planned):
    from dataclasses import replace

    from gpupools.fleet.plan import fleet_landing
    from gpupools.landing.verdict import Step

    fleet, plan, _ = planned
    broken = [replace(v, steps=v.steps + (Step("device", False, "no device plugin"),)) if v.shape == "node" else v for v in plan.views[0].verdicts]
    rows = {(r.team, r.shape): r for r in fleet_landing(fleet, [replace(plan.views[0], verdicts=broken), plan.views[1]])}
    assert not rows["research", "node"].lands and rows["research", "node"].tried == ("aws-eu",)
    assert rows["research", "unit"].workers == (("aws-eu", ("l4", "a100")), ("gcp-us", ("l4",)))
    # One worker failing the unit job leaves the other: it still lands.
    failing_unit = [replace(v, steps=v.steps + (Step("queue", False, "x"),)) if v.shape == "unit" else v for v in plan.views[0].verdicts]
    rows = {(r.team, r.shape): r for r in fleet_landing(fleet, [replace(plan.views[0], verdicts=failing_unit), plan.views[1]])}
    assert rows["search", "unit"].workers == (("gcp-us", ("l4",)),) and rows["search", "unit"].lands


def test_docs_fleet_shows_the_real_plan(planned):
    from gpupools.cli.fleet import plan_lines

    fleet, plan, result = planned
    text = (ROOT / "docs" / "fleet.md").read_text()
    shown = text.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    assert shown == plan_lines(fleet, plan, len(result.resources), Path("~/gpupools/stacks/Pulumi.fleet.yaml"))
    example = yaml.safe_load(text.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert example["config"] == {k: v for k, v in _raw("fleet").items()}


def test_the_manager_egress_must_lie_inside_an_authorized_range():
    wider = copy.deepcopy(_raw("fleet-gcp"))
    wider["gpupools:cluster"]["authorizedCidrs"] = ["198.51.100.0/24"]
    assert problems_of(workers={"Pulumi.fleet-gcp.yaml": wider}) == []
    broad_manager = copy.deepcopy(_raw("fleet"))
    broad_manager["gpupools:fleet"]["managerEgressCidrs"] = ["198.51.100.0/24"]
    problems = problems_of(broad_manager)
    assert [p for p in problems if "aws-eu's" in p or "worker aws-eu" in p] and \
        any("authorizedCidrs lacks the manager's egress 198.51.100.0/24" in p for p in problems)
    no_egress = copy.deepcopy(_raw("fleet"))
    del no_egress["gpupools:fleet"]["managerEgressCidrs"]
    assert any("fleet.managerEgressCidrs is unset" in p for p in problems_of(no_egress))
