"""Every name `gpupools workload` prints fits the limits Kubernetes and JobSet's webhook hold it (and the names they build
from it) to: for every example stack as it is and with its pools and teams renamed to the longest names the stack
allows, and for pool names of every length up to 63. The limits are restated here from upstream, apart from
gpupools.landing.names, so that a wrong limit there fails a test:

- kubernetes/kubernetes pkg/registry/batch/job/strategy.go (generateSelector): a Job's pods are labelled
  batch.kubernetes.io/job-name=<job>, and a label value has at most 63 characters (apimachinery IsValidLabelValue);
- pkg/controller/job/job_controller.go (manageJob): pod i of an Indexed Job has the hostname <job>-<i>, a DNS-1123
  label of at most 63; a Service's name is a DNS-1035 label of at most 63;
- kubernetes-sigs/jobset v0.12.0 pkg/webhooks/jobset_webhook.go (ValidateCreate, validateCoordinatorLabelValue): the
  Service name, <jobset>-<replicatedJob>-<replicas-1> and <jobset>-<replicatedJob>-<replicas-1>-<completions-1>-abcde
  are DNS-1035 labels of at most 63, the coordinator label <jobset>-<rjob>-<jobIndex>-<podIndex>.<subdomain> a label value.
"""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from gpupools.landing import names
from gpupools.landing.check import cluster_of, land
from gpupools.landing.jobs import disruption_budget, job_manifest, multinode_job, multinode_problems, team_job
from gpupools.landing.jobs import multinode_jobset
from gpupools.landing.nccltest import nccl_test, test_image as nccl_image
from gpupools.pools.planning import plan_pools
from gpupools.queues.teams import plan_teams
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

from tests.conftest import ROOT, stack_config

STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.dev-*.yaml"))
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def refusals(doc: dict) -> list[str]:
    """What the API server and JobSet v0.12.0's webhook refuse of one printed object (see the module docstring)."""
    out = []

    def check(what: str, value: str, form: re.Pattern) -> None:
        if len(value) > 63 or not form.match(value):
            out.append(f"{what}: {value!r} ({len(value)})")

    meta, spec = doc["metadata"], doc.get("spec") or {}
    for key, value in (meta.get("labels") or {}).items():
        check(f"label {key}", value, LABEL_VALUE)
    if doc["kind"] == "Job":
        check("job-name label", meta["name"], LABEL_VALUE)
        pod = spec["template"]["spec"]
        if spec.get("completionMode") == "Indexed":
            check("last hostname", f"{meta['name']}-{spec['completions'] - 1}", DNS_1123)
        if "subdomain" in pod:
            check("subdomain", pod["subdomain"], DNS_1035)
    elif doc["kind"] == "JobSet":
        service = (spec.get("network") or {}).get("subdomain") or meta["name"]
        check("service", service, DNS_1035)
        check("jobset-name label", meta["name"], LABEL_VALUE)
        for rjob in spec["replicatedJobs"]:
            job = f"{meta['name']}-{rjob['name']}-{rjob.get('replicas', 1) - 1}"
            check("last Job", job, DNS_1035)
            check("last pod", f"{job}-{rjob['template']['spec']['completions'] - 1}-abcde", DNS_1035)
            for key, value in ((rjob["template"].get("metadata") or {}).get("labels") or {}).items():
                check(f"template label {key}", value, LABEL_VALUE)
        c = spec["coordinator"]
        check("coordinator label", f"{meta['name']}-{c['replicatedJob']}-{c.get('jobIndex', 0)}-{c.get('podIndex', 0)}.{service}", LABEL_VALUE)
    elif doc["kind"] == "Service":
        check("service", meta["name"], DNS_1035)
        for key, value in spec["selector"].items():
            check(f"selector {key}", value, LABEL_VALUE)
    elif doc["kind"] == "PodDisruptionBudget":
        for key, value in spec["selector"]["matchLabels"].items():
            check(f"selector {key}", value, LABEL_VALUE)
    return out


def every_workload(stack) -> list[list[dict]]:
    """What `gpupools workload` prints for the stack: each pool's Job, each team's Job per pool (and without a pool where
    the engine chooses one), and on fabric pools the multi-node Job, JobSet and NCCL test (Job and JobSet) on 2 nodes and
    on all the pool's nodes, alone and for each team, each with its disruption budget."""
    plans = plan_pools(stack)
    teams = plan_teams(stack, plans)
    out: list[list[dict]] = []

    def add(make) -> None:
        try:
            docs = make()
        except ConfigError:  # a combination the CLI refuses prints nothing
            return
        docs = docs if isinstance(docs, list) else [docs]
        budget = disruption_budget(next(p for p in plans if p.name == docs[-1]["metadata"]["labels"]["gpupools.io/pool"]), docs[-1]) \
            if docs[-1]["metadata"]["labels"].get("gpupools.io/pool") else None
        out.append(docs + ([budget] if budget else []))

    for plan in plans:
        add(lambda: job_manifest(stack, plan, "image"))
    for t in teams:
        add(lambda: team_job(stack, plans, t.team.name, None, None, "image", team_plans=teams))
        for plan in t.pools:
            add(lambda: team_job(stack, plans, t.team.name, plan.name, None, "image", team_plans=teams))
    for plan in plans:
        if multinode_problems(stack, plan, 2):
            continue
        for nodes in sorted({2, plan.pool.max_nodes}):
            for team in [None] + [t.team.name for t in teams if plan in t.pools]:
                add(lambda: multinode_job(stack, plan, nodes, team=team, team_plans=teams))
                add(lambda: multinode_jobset(stack, plan, nodes, team=team, team_plans=teams))
                if nccl_image(stack, plan)[0] is not None:
                    add(lambda: nccl_test(stack, plan, nodes, team=team, team_plans=teams))
                    add(lambda: nccl_test(stack, plan, nodes, team=team, team_plans=teams, jobset=True))
    return out


def renamed(raw: dict, pool_length: int, team_length: int) -> dict:
    """The stack with every pool's and team's name stretched to the given length (letters only: AKS takes no dash)."""
    config = copy.deepcopy(raw)
    pools = {p["name"]: p["name"] + "a" * (pool_length - len(p["name"])) for p in config["gpupools:pools"]}
    teams = {t["name"]: t["name"] + "b" * (team_length - len(t["name"])) for t in config.get("gpupools:teams") or []}
    for p in config["gpupools:pools"]:
        p["name"] = pools[p["name"]]
    for t in config.get("gpupools:teams") or []:
        t["name"] = teams[t["name"]]
        if isinstance(t["gpus"], dict):
            t["gpus"] = {pools[k]: v for k, v in t["gpus"].items()}
        if t.get("pools"):
            t["pools"] = [pools[p] for p in t["pools"]]
    for d in config.get("gpupools:departments") or []:
        d["teams"] = [teams[name] for name in d["teams"]]
    return config


def longest_names(name: str):
    """The example stack with the longest pool and team names it validates with (63 where the cloud allows it)."""
    raw = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"]
    for pool_length in (63, 54, 40, 20, 12):
        try:
            return validate_stack(renamed(raw, pool_length, 63)), pool_length
        except ConfigError:
            continue
    pytest.fail(f"{name}: no renaming validates")


@pytest.mark.parametrize("name", STACKS)
def test_every_name_printed_for_an_example_stack_fits_with_the_longest_names_it_allows(name):
    stack, pool_length = longest_names(name)
    assert pool_length >= 12 and max(len(p.name) for p in stack.pools) == pool_length
    printed = every_workload(stack)
    assert printed
    for docs in printed:
        assert [r for doc in docs for r in refusals(doc)] == [], yaml.safe_dump_all(docs)[:400]
        assert [p for doc in docs for p in names.name_problems(doc)] == []


@pytest.mark.parametrize("name", STACKS)
def test_every_name_printed_for_an_example_stack_as_it_is_fits_and_is_kept_whole(name):
    stack = validate_stack(yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"])
    for docs in every_workload(stack):
        assert [r for doc in docs for r in refusals(doc)] == []
        workload = docs[-2] if docs[-1]["kind"] == "PodDisruptionBudget" else docs[-1]
        base = workload["metadata"]["name"]
        assert re.fullmatch(r"(gpu-smoke|multinode|nccl-test)-[a-z0-9-]+", base) and not re.search(r"-[0-9a-f]{6}$", base), base


def fabric_stack(pool: str, max_nodes: int = 2, **keys):
    """An existing EKS cluster under cluster-autoscaler, which takes pool names of up to 63 characters."""
    return validate_stack(stack_config("aws", pools=[{"name": pool, "instanceType": "p4d.24xlarge", "maxNodes": max_nodes, "zones": ["eu-central-1a"]}],
                                       cluster={"name": "ml", "create": False}, autoscaler="cluster-autoscaler", **keys))


@pytest.mark.parametrize("length", [1, 14, 15, 16, 25, 26, 40, 53, 63])
@pytest.mark.parametrize("nodes", [2, 11, 100])
def test_multi_node_names_fit_for_pool_names_of_every_length(length, nodes):
    pool = ("p" * length)[:length]
    stack = fabric_stack(pool, max_nodes=100)
    (plan,) = plan_pools(stack)
    service, job = multinode_job(stack, plan, nodes)
    jobset = multinode_jobset(stack, plan, nodes)
    nccl_service, nccl_job = nccl_test(stack, plan, nodes)
    (nccl_jobset,) = nccl_test(stack, plan, nodes, jobset=True)
    for doc in (service, job, jobset, nccl_service, nccl_job, nccl_jobset, job_manifest(stack, plan, "image")):
        assert refusals(doc) == [], doc["metadata"]["name"]
    # The Job, its Service, its pods' subdomain and the rendezvous address agree on one name.
    name = job["metadata"]["name"]
    assert service["metadata"]["name"] == job["spec"]["template"]["spec"]["subdomain"] == service["spec"]["selector"]["batch.kubernetes.io/job-name"] == name
    assert f"--master-addr={name}-0.{name}" in job["spec"]["template"]["spec"]["containers"][0]["command"]
    js = nccl_jobset["metadata"]["name"]
    script = nccl_jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert f"{js}-workers-0-0.{js}" in script
    # Whole while they fit: "multinode-" and a pool of 15 make the coordinator label <25>-workers-0-0.<25>, 63 characters.
    assert (jobset["metadata"]["name"] == f"multinode-{pool}") is (length <= 15)
    assert (name == f"multinode-{pool}") is (len(f"multinode-{pool}-{nodes - 1}") <= 63)


def test_a_long_name_is_cut_with_a_hash_of_the_whole_and_the_same_every_time():
    a, b = "multinode-" + "x" * 40 + "-one", "multinode-" + "x" * 40 + "-two"
    assert names.shorten(a, 25) == names.shorten(a, 25) != names.shorten(b, 25)
    assert len(names.shorten(a, 25)) <= 25 and names.shorten(a, 25).startswith("multinode-xxxxxxx")
    assert names.shorten("multinode-short", 25) == "multinode-short"
    cut = names.shorten("multinode-" + "y" * 8 + "-" + "z" * 20, 20)  # cut just after a dash: no double dash
    assert "--" not in cut and re.fullmatch(r"[a-z][-a-z0-9]*[a-z0-9]", cut)


def test_the_cli_prints_jobs_and_jobsets_that_fit_for_a_63_character_pool(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    pool = "pretrain-" + "x" * 54
    config = stack_config("aws", pools=[{"name": pool, "instanceType": "p4d.24xlarge", "maxNodes": 2, "zones": ["eu-central-1a"]}],
                          cluster={"name": "ml", "create": False}, autoscaler="cluster-autoscaler",
                          teams=[{"name": "t" * 63, "gpus": 16}])
    path = str(stack_file(config))
    for args in (["--nodes", "2", "--jobset"], ["--nccl-test", "--jobset"], ["--nodes", "2"], ["--nccl-test"], [], ["--team", "t" * 63]):
        result = CliRunner().invoke(app, ["workload", "--config", path, "--pool", pool, "--explain", *args])
        assert result.exit_code == 0, result.output
        assert "# landing: lands" in result.output and "create" not in result.output, result.output[:2000]
        docs = list(yaml.safe_load_all(result.output))
        assert [r for doc in docs for r in refusals(doc)] == []


# --------------------------------------------------------------------------------------------------------------------
# The landing check checks the names


def test_the_landing_check_refuses_a_jobset_whose_coordinator_label_is_over_63():
    stack = fabric_stack("p" * 16)
    cluster = cluster_of(stack)
    (plan,) = cluster.plans
    jobset = multinode_jobset(stack, plan, 2)
    assert land(cluster, None, plan, "gang", jobset).lands
    long = copy.deepcopy(jobset)
    long["metadata"]["name"] = "multinode-" + "p" * 16  # as gpupools named it before: 26 characters, the label 65
    verdict = land(cluster, None, plan, "gang", long)
    assert not verdict.lands and verdict.failing.name == "create" and verdict.steps[0] is verdict.failing
    assert "coordinator label jobset.sigs.k8s.io/coordinator" in verdict.failing.detail and "65 characters, over the limit of 63" in verdict.failing.detail
    at_limit = copy.deepcopy(jobset)
    at_limit["metadata"]["name"] = "multinode-" + "p" * 15  # the label is 63: accepted
    assert land(cluster, None, plan, "gang", at_limit).lands


def test_the_landing_check_refuses_an_indexed_job_whose_last_hostname_is_over_63():
    stack = fabric_stack("pool")
    cluster = cluster_of(stack)
    (plan,) = cluster.plans
    _, job = multinode_job(stack, plan, 2)
    for length, lands in ((61, True), (62, False)):  # pod 1's hostname <name>-1: 63, then 64
        named = copy.deepcopy(job)
        named["metadata"]["name"] = named["spec"]["template"]["spec"]["subdomain"] = "j" * length
        verdict = land(cluster, None, plan, "gang", named)
        assert verdict.lands is lands
        if not lands:
            assert verdict.failing.name == "create" and "hostname of the Indexed Job's last pod" in verdict.failing.detail
    single = job_manifest(stack, plan, "image")
    single["metadata"]["name"] = "j" * 64
    verdict = land(cluster, None, plan, "unit", single)
    assert verdict.failing.name == "create" and "batch.kubernetes.io/job-name" in verdict.failing.detail
    single["metadata"]["name"] = "j" * 63
    assert land(cluster, None, plan, "unit", single).lands


def test_jobset_pod_names_count_kubernetes_random_suffix():
    """Without a coordinator the pod name binds: <jobset>-workers-0-99 and "-abcde" within 63 (jobset_webhook.go)."""
    fits = names.jobset_names("j" * 44, [("workers", 1, 100)])
    over = names.jobset_names("j" * 45, [("workers", 1, 100)])
    assert [n.problem() for n in fits if n.problem()] == []
    (problem,) = [n.problem() for n in over if n.problem()]
    assert problem.startswith("name of replicated job workers's last pod (with Kubernetes' 5 random characters)") and "64 characters" in problem
    assert names.fit_jobset("x" * 60, "workers", 100) == names.fit_jobset("x" * 60, "workers", 100)
    assert len(names.fit_jobset("x" * 60, "workers", 100)) == 25  # the coordinator label binds first
