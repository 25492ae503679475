"""Jobs for KAI Scheduler teams: a multi-node Job is one gang (KAI v0.17.0's pod grouper gives a Job a PodGroup of
minMember 1 unless `kai.scheduler/batch-min-member` says more: pkg/podgrouper/podgrouper/plugins/job/job_grouper.go,
calcMinMember; docs/batch/README.md), a JobSet is one by itself and its Jobs pass the team's admission policy, and a
fraction is one its own formatting keeps."""

from __future__ import annotations

import copy

import pytest
import yaml
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.landing.check import cluster_of, land, landing_check
from gpupools.landing.jobs import multinode_job
from gpupools.landing.jobs import multinode_jobset
from gpupools.landing.jobset import podsets
from gpupools.landing.nccltest import nccl_test
from gpupools.pools.planning import plan_pools
from gpupools.queues import kai
from gpupools.queues.engine import quota_plan
from gpupools.validation.stack import validate_stack

from conftest import admission_denials, config_problems, stack_config

FABRIC = {"name": "pretrain", "instanceType": "p4d.24xlarge", "maxNodes": 2, "zones": ["eu-central-1a"]}


def kai_fabric_stack():
    return validate_stack(stack_config("aws", pools=[FABRIC], quotas="kai", teams=[{"name": "ml", "gpus": 16}]))


def test_a_multi_node_job_for_a_kai_team_is_one_gang_of_all_its_pods():
    stack = kai_fabric_stack()
    (plan,) = plan_pools(stack)
    _, job = multinode_job(stack, plan, 2, team="ml")
    assert job["metadata"]["annotations"] == {kai.MIN_MEMBER_ANNOTATION: "2"}
    assert job["metadata"]["labels"][kai.QUEUE_LABEL] == "ml" and job["spec"]["parallelism"] == 2
    # The NCCL test is the same Job: one gang too.
    assert nccl_test(stack, plan, 2, team="ml")[1]["metadata"]["annotations"] == {kai.MIN_MEMBER_ANNOTATION: "2"}
    # Not for anyone else: a Job without a team, or a Kueue team's, which Kueue admits whole.
    assert "annotations" not in multinode_job(stack, plan, 2)[1]["metadata"]


def test_a_kai_jobset_is_ganged_per_replica_and_its_jobs_carry_the_teams_queue():
    stack = kai_fabric_stack()
    (plan,) = plan_pools(stack)
    jobset = multinode_jobset(stack, plan, 2, team="ml")
    # On the JobSet the annotation would count replicated jobs (computePodGroupMinSubGroup); on the template, pods.
    assert "annotations" not in jobset["metadata"] and jobset["metadata"]["labels"][kai.QUEUE_LABEL] == "ml"
    template = jobset["spec"]["replicatedJobs"][0]["template"]
    assert template["metadata"] == {"annotations": {kai.MIN_MEMBER_ANNOTATION: "2"}, "labels": {kai.QUEUE_LABEL: "ml"}}
    # The JobSet controller labels each Job with the template's labels (jobset v0.12.0 constructJob): the team's
    # admission policy takes the Job for its queue, and refuses one without the label.
    policy = next(o for o in quota_plan(stack, plan_pools(stack)).objects
                  if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("kai-queue"))
    child = {"apiVersion": "batch/v1", "kind": "Job", "spec": template["spec"],
             "metadata": {"name": "multinode-pretrain-workers-0", "namespace": "ml", "labels": dict(template["metadata"]["labels"]),
                          "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "multinode-pretrain", "uid": "1"}]}}
    assert admission_denials(policy, child, "Job") == []
    child["metadata"]["labels"] = {}
    assert admission_denials(policy, child, "Job") == ["GPU workloads in namespace ml queue for team ml's GPU quota: set label kai.scheduler/queue=ml"]
    # A Kueue team's JobSet stays as it was: its queue is the JobSet's label, and its Jobs are the JobSet controller's.
    kueue = validate_stack(stack_config("aws", pools=[FABRIC], teams=[{"name": "ml", "gpus": 16}]))
    assert "metadata" not in multinode_jobset(kueue, plan_pools(kueue)[0], 2, team="ml")["spec"]["replicatedJobs"][0]["template"]


def test_the_landing_check_lands_kai_gangs_and_refuses_a_multi_node_job_without_one():
    stack = kai_fabric_stack()
    verdicts = landing_check(stack)
    (gang,) = [v for v in verdicts if v.shape == "gang"]
    assert gang.lands and gang.steps[0].detail.endswith(f"; its 2 pods as one gang ({kai.MIN_MEMBER_ANNOTATION}: \"2\")")
    cluster = cluster_of(stack)
    team, (plan,) = cluster.teams[0], cluster.plans
    _, job = multinode_job(stack, plan, 2, team="ml", team_plans=cluster.teams)
    loose = copy.deepcopy(job)
    del loose["metadata"]["annotations"]
    verdict = land(cluster, team, plan, "gang", loose)
    assert not verdict.lands and verdict.failing.name == "queue"
    assert verdict.failing.detail == (f"KAI schedules the Job's 2 pods as a gang of 1: without {kai.MIN_MEMBER_ANNOTATION}: \"2\" on the Job "
                                      f"its first pods may hold their nodes' GPUs while the others wait")
    too_big = copy.deepcopy(job)
    too_big["metadata"]["annotations"][kai.MIN_MEMBER_ANNOTATION] = "3"
    assert land(cluster, team, plan, "gang", too_big).failing.detail == (
        f"{kai.MIN_MEMBER_ANNOTATION} asks for 3 pods together and the Job has 2: KAI never starts the gang")
    # A single-pod Job needs no gang, nor does a Job of pods that run on their own (not a multi-node shape).
    assert land(cluster, team, plan, "node").lands
    loose_unit = copy.deepcopy(loose)
    assert land(cluster, team, plan, "unit", loose_unit).lands
    broken = copy.deepcopy(job)
    broken["metadata"]["annotations"][kai.MIN_MEMBER_ANNOTATION] = "all"
    assert land(cluster, team, plan, "gang", broken).failing.detail == (
        f"{kai.MIN_MEMBER_ANNOTATION}: 'all' is not a number: KAI's pod grouper fails on it and the pods stay pending")


def test_the_landing_check_follows_kais_gang_of_a_jobset():
    stack = kai_fabric_stack()
    cluster = cluster_of(stack)
    team, (plan,) = cluster.teams[0], cluster.plans
    jobset = multinode_jobset(stack, plan, 2, team="ml", team_plans=cluster.teams)
    assert land(cluster, team, plan, "gang", jobset).lands
    # Without the template's annotation KAI gangs the replica's parallelism all the same (singleReplicaSubGroupMinMember).
    default = copy.deepcopy(jobset)
    del default["spec"]["replicatedJobs"][0]["template"]["metadata"]["annotations"]
    ((_, view),) = podsets(default)
    assert view["metadata"]["annotations"][kai.MIN_MEMBER_ANNOTATION] == "2" and land(cluster, team, plan, "gang", default).lands
    one = copy.deepcopy(jobset)
    one["spec"]["replicatedJobs"][0]["template"]["metadata"]["annotations"][kai.MIN_MEMBER_ANNOTATION] = "1"
    verdict = land(cluster, team, plan, "gang", one)
    assert not verdict.lands and verdict.failing.name == "queue" and "as a gang of 1" in verdict.failing.detail


def test_workload_prints_the_gang_for_a_kai_team(stack_file):
    config = stack_config("aws", pools=[FABRIC], quotas="kai", teams=[{"name": "ml", "gpus": 16}])
    path = str(stack_file(config))
    result = CliRunner().invoke(app, ["workload", "--config", path, "--team", "ml", "--pool", "pretrain", "--nodes", "2", "--explain"])
    assert result.exit_code == 0, result.output
    assert f"its 2 pods as one gang ({kai.MIN_MEMBER_ANNOTATION}: \"2\")" in result.output
    job = list(yaml.safe_load_all(result.output))[-1]
    assert job["kind"] == "Job" and job["metadata"]["annotations"] == {kai.MIN_MEMBER_ANNOTATION: "2"}


# --------------------------------------------------------------------------------------------------------------------
# A fraction survives its own formatting


def fraction_stack(fraction: float) -> dict:
    return stack_config("aws", pools=[{"name": "share", "instanceType": "g6.xlarge", "maxNodes": 2, "sharing": {"mode": "none", "fraction": fraction}}],
                        quotas="kai", teams=[{"name": "ml", "gpus": 1}])


@pytest.mark.parametrize("fraction, written", [(4e-7, "0.0"), (0.9999999, "1.0"), (1e-9, "0.0")])
def test_a_fraction_written_as_zero_or_one_is_refused_naming_the_field(fraction, written):
    problems = [str(p) for p in config_problems(fraction_stack(fraction))]
    assert problems == [f"error: pools[0].sharing.fraction: {fraction!r} is written \"{written}\" in gpu-fraction (six decimals), which KAI "
                        f"refuses: give a fraction from 0.000001 to 0.999999"]


def test_a_fraction_rounded_by_its_formatting_is_refused_and_one_it_keeps_is_taken():
    problems = [str(p) for p in config_problems(fraction_stack(0.1234567))]
    assert problems == ["error: pools[0].sharing.fraction: 0.1234567 is written \"0.123457\" in gpu-fraction (six decimals); give it with "
                        "at most six decimals"]
    for fraction, written in ((0.000001, "0.000001"), (0.999999, "0.999999"), (0.25, "0.25"), (0.5, "0.5")):
        stack = validate_stack(fraction_stack(fraction))
        assert kai.fraction_text(stack.pools[0].sharing.fraction) == written


def test_a_default_sharing_fraction_is_refused_once():
    config = fraction_stack(0.25)
    config["gpupools:sharing"] = {"mode": "none", "fraction": 4e-7}
    config["gpupools:pools"] = [{"name": n, "instanceType": "g6.xlarge", "maxNodes": 2} for n in ("a", "b")]
    problems = [str(p) for p in config_problems(config)]
    assert problems == ["error: sharing.fraction: 4e-07 is written \"0.0\" in gpu-fraction (six decimals), which KAI refuses: give a "
                        "fraction from 0.000001 to 0.999999"]


def test_workload_refuses_a_fraction_it_would_print_as_zero(stack_file):
    path = str(stack_file(fraction_stack(0.25)))
    result = CliRunner().invoke(app, ["workload", "--config", path, "--team", "ml", "--pool", "share", "--fraction", "0.0000001"])
    assert result.exit_code == 2
    assert result.output == ("error: --fraction: 1e-07 is written \"0.0\" in gpu-fraction (six decimals), which KAI refuses: give a "
                             "fraction from 0.000001 to 0.999999\n")
    ok = CliRunner().invoke(app, ["workload", "--config", path, "--team", "ml", "--pool", "share", "--fraction", "0.000001"])
    assert ok.exit_code == 0 and "gpu-fraction: '0.000001'" in ok.output
