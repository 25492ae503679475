"""The landing check: each rule in a case that lands and in one that does not, naming the step that stops it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from gpupools.core.pools import Taint
from gpupools.landing import check, nodes
from gpupools.landing.check import cluster_of, land, landing_check
from gpupools.landing.cluster import Cluster
from gpupools.landing.scheduling import runs_on, selects, tolerates, untolerated
from gpupools.pools.planning import plan_pools
from gpupools.queues import kueue
from gpupools.validation.stack import validate_stack

from tests.conftest import ROOT, stack_config

STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.dev-*.yaml"))


def example(name: str):
    return validate_stack(yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"])


def verdict(cluster: Cluster, team: str | None, pool: str, shape: str):
    t = next((x for x in cluster.teams if x.team.name == team), None)
    plan = next(p for p in cluster.plans if p.name == pool)
    return land(cluster, t, plan, shape)


def obj(cluster: Cluster, kind: str, name: str) -> dict:
    return next(o for o in cluster.objects if o["kind"] == kind and o["metadata"]["name"] == name)


# --------------------------------------------------------------------------------------------------------------------
# Kubernetes' own matching rules


@pytest.mark.parametrize("toleration, lands", [
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}, True),  # empty effect: every effect
    ({"operator": "Exists"}, True),  # empty key with Exists: every taint
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent", "effect": "NoSchedule"}, False),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "other", "operator": "Exists"}, False),
    ({"operator": "Equal", "value": "present"}, False),  # Equal needs a key
])
def test_toleration_matching_follows_kubernetes(toleration, lands):
    assert tolerates(toleration, Taint("nvidia.com/gpu", "present", "NoSchedule")) is lands


def test_prefer_no_schedule_taints_never_block():
    assert untolerated([], [Taint("a", "b", "PreferNoSchedule")]) == []
    assert untolerated([], [Taint("a", "b", "NoExecute")]) == [Taint("a", "b", "NoExecute")]


@pytest.mark.parametrize("operator, values, labels, match", [
    ("In", ["a"], {"k": "a"}, True), ("In", ["a"], {"k": "b"}, False), ("In", ["a"], {}, False),
    ("NotIn", ["false"], {}, True), ("NotIn", ["false"], {"k": "false"}, False), ("NotIn", ["false"], {"k": "true"}, True),
    ("Exists", [], {"k": ""}, True), ("Exists", [], {}, False),
    ("DoesNotExist", [], {}, True), ("DoesNotExist", [], {"k": "x"}, False),
    ("Gt", ["3"], {"k": "4"}, True), ("Gt", ["3"], {"k": "3"}, False), ("Lt", ["3"], {"k": "2"}, True), ("Lt", ["3"], {"k": "x"}, False),
])
def test_node_affinity_operators(operator, values, labels, match):
    pod = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "k", "operator": operator, "values": values}]}]}}}}
    assert (selects(pod, labels) is None) is match


def test_terms_are_ored_and_an_empty_term_matches_nothing():
    terms = [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"matchExpressions": [{"key": "b", "operator": "Exists"}]}]
    pod = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}
    assert selects(pod, {"b": "1"}) is None and selects(pod, {"c": "1"}) is not None
    empty = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}}
    assert selects(empty, {"a": "1"}) is not None
    assert runs_on({"nodeSelector": {"a": "1"}}, {"a": "2"}, []) == "nodeSelector a=1 (the node has a=2)"


# --------------------------------------------------------------------------------------------------------------------
# Every example stack: every team's job lands


@pytest.mark.parametrize("name", STACKS)
def test_every_job_of_every_example_stack_lands(name):
    verdicts = landing_check(example(name))
    assert verdicts
    assert [(v.team, v.pool, v.shape, v.failing) for v in verdicts if not v.lands] == []


def test_the_check_covers_every_team_pool_and_shape():
    verdicts = landing_check(example("dev-aws"))
    got = {(v.team, v.pool, v.shape) for v in verdicts}
    assert ("research", "pretrain", "gang") in got and ("research", "train", "node") in got and ("search", "batch", "unit") in got
    assert not any(v.team == "search" and v.pool == "train" for v in verdicts)  # no quota there
    assert not any(v.pool == "infer" and v.shape == "node" for v in verdicts)  # one GPU per node: no whole-node shape


def test_plan_json_carries_the_landing_list(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    result = CliRunner().invoke(app, ["plan", "--stack", "dev-aws", "--json"])
    assert result.exit_code == 0, result.output
    landing = json.loads(result.output)["landing"]
    assert landing and all({"team", "pool", "shape", "lands", "step", "reason", "chain"} <= set(v) for v in landing)
    assert all(v["lands"] for v in landing)
    text = CliRunner().invoke(app, ["plan", "--stack", "dev-aws"], terminal_width=200).output
    assert "landing: each team's Job" in text and "research: 6 of 6 land (train unit node; infer unit; pretrain unit node gang)" in text


# --------------------------------------------------------------------------------------------------------------------
# One toleration, one label, one admission check less: the verdict turns and names the step


@pytest.fixture
def aws_cluster():
    return cluster_of(example("dev-aws"))


def test_a_flavor_without_the_gpu_toleration_stops_at_scheduling(aws_cluster):
    assert verdict(aws_cluster, "research", "train", "unit").lands
    flavor = obj(aws_cluster, "ResourceFlavor", "train")
    flavor["spec"]["tolerations"] = []
    # The Job from `gpupools workload --pool` tolerates the taint itself; a Job that relies on its queue does not.
    job = check.job_for(aws_cluster, aws_cluster.teams[0], next(p for p in aws_cluster.plans if p.name == "train"), "unit")
    job["spec"]["template"]["spec"]["tolerations"] = []
    v = land(aws_cluster, aws_cluster.teams[0], next(p for p in aws_cluster.plans if p.name == "train"), "unit", job)
    assert not v.lands and v.failing.name == "schedule" and "nvidia.com/gpu=present:NoSchedule" in v.failing.detail


def test_a_flavor_whose_node_label_no_node_carries_stops_the_job(aws_cluster):
    flavor = obj(aws_cluster, "ResourceFlavor", "train")
    flavor["spec"]["nodeLabels"] = {**flavor["spec"]["nodeLabels"], "gpupools.io/gpu": "H100"}
    v = verdict(aws_cluster, "research", "train", "unit")
    assert not v.lands and v.failing.name == "schedule" and "gpupools.io/gpu=H100" in v.failing.detail


def test_a_missing_admission_check_keeps_the_job_waiting():
    cluster = cluster_of(example("dev-gcp-dws"))
    assert verdict(cluster, "research", "h100", "unit").lands
    assert "ProvisioningRequest" in verdict(cluster, "research", "h100", "unit").steps[0].detail
    cluster.objects = [o for o in cluster.objects if o["kind"] != "AdmissionCheck"]
    v = verdict(cluster, "research", "h100", "unit")
    assert not v.lands and v.failing.name == "queue" and "AdmissionCheck h100-provisioning" in v.failing.detail


def test_gke_queued_nodes_are_tolerated_by_flavor_and_job():
    """GKE taints queued-provisioning nodes cloud.google.com/gke-queued; without the flavor's toleration (which Kueue
    adds on admission, and nothing else does) the pods never schedule."""
    cluster = cluster_of(example("dev-gcp-dws"))
    flavor = obj(cluster, "ResourceFlavor", "h100")
    assert {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"} in flavor["spec"]["tolerations"]
    flavor["spec"]["tolerations"] = [t for t in flavor["spec"]["tolerations"] if t["key"] != "cloud.google.com/gke-queued"]
    plan = next(p for p in cluster.plans if p.name == "h100")
    job = check.job_for(cluster, cluster.teams[0], plan, "unit")
    pod = job["spec"]["template"]["spec"]
    pod["tolerations"] = [t for t in pod["tolerations"] if t["key"] != "cloud.google.com/gke-queued"]
    v = land(cluster, cluster.teams[0], plan, "unit", job)
    assert not v.lands and v.failing.name == "schedule" and "cloud.google.com/gke-queued" in v.failing.detail


def test_a_readiness_reporter_that_does_not_tolerate_the_startup_taint_leaves_nodes_unready(aws_cluster):
    reporter = next(a for a in aws_cluster.agents if a.name == "gpupools-gpu-ready-reporter")
    tolerations = [t for t in reporter.pod["tolerations"] if not t["key"].startswith("readiness.k8s.io/")]
    aws_cluster.agents[aws_cluster.agents.index(reporter)] = check.node_agents.Agent(
        reporter.name, reporter.source, pod={**reporter.pod, "tolerations": tolerations}, clears=reporter.clears)
    v = verdict(aws_cluster, "research", "train", "unit")
    assert not v.lands and v.failing.name == "ready" and "readiness.k8s.io/gpupools-gpu-ready" in v.failing.detail


def test_discovery_that_does_not_tolerate_the_pool_leaves_no_device_plugin(aws_cluster):
    nfd = next(a for a in aws_cluster.agents if a.name == "node-feature-discovery worker")
    aws_cluster.agents[aws_cluster.agents.index(nfd)] = check.node_agents.Agent(nfd.name, nfd.source, pod={"tolerations": []}, labels=nfd.labels)
    v = verdict(aws_cluster, "research", "train", "unit")
    assert not v.lands and "device" in [s.name for s in v.steps if not s.ok]


def test_two_device_plugins_on_one_pool_are_a_fault(aws_cluster):
    aws_cluster.agents.append(check.node_agents.Agent("another device plugin", "test", pod={"tolerations": [{"operator": "Exists"}]},
                                                      advertises=lambda node: frozenset({node.pool.mechanism.resource})))
    v = verdict(aws_cluster, "search", "infer", "unit")
    assert not v.lands and v.failing.name == "device" and "2 device plugins" in v.failing.detail


def test_a_bottlerocket_pool_is_served_by_the_image_and_not_by_the_operator(aws_cluster):
    v = verdict(aws_cluster, "search", "batch", "unit")
    assert v.lands and v.steps[-1].detail == "Bottlerocket device plugin advertises nvidia.com/gpu"


# --------------------------------------------------------------------------------------------------------------------
# Kueue: topology-aware flavors, quota and borrowing


def fabric_stack(**pool):
    config = stack_config("aws", pools=[{"name": "train", "instanceType": "p5.48xlarge", "maxNodes": 4, "zones": ["us-east-1a"], **pool},
                                        {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}],
                          teams=[{"name": "ml", "gpus": {"train": 32, "infer": 1}}])
    config["aws:region"] = "us-east-1"
    return validate_stack(config)


def test_a_topology_aware_flavor_on_a_pool_that_scales_from_zero_never_admits():
    """Kueue's TAS counts only Ready nodes: forcing the flavor topology-aware on a Karpenter pool at zero nodes stops
    every job at the queue, which is why gpupools gives such pools a plain flavor."""
    stack = fabric_stack()
    cluster = cluster_of(stack)
    assert "topologyName" not in obj(cluster, "ResourceFlavor", "train")["spec"]
    assert verdict(cluster, "ml", "train", "gang").lands
    obj(cluster, "ResourceFlavor", "train")["spec"]["topologyName"] = kueue.TOPOLOGY
    plan = next(p for p in cluster.plans if p.name == "train")
    job = check.job_for(cluster, cluster.teams[0], plan, "gang")
    job["spec"]["template"]["metadata"]["annotations"][kueue.PREFERRED_TOPOLOGY] = "kubernetes.io/hostname"
    v = land(cluster, cluster.teams[0], plan, "gang", job)
    assert not v.lands and v.failing.name == "queue" and "counts only Ready nodes" in v.failing.detail


def test_a_fixed_fabric_pool_is_topology_aware_and_its_jobs_say_what_topology_they_want():
    cluster = cluster_of(fabric_stack(minNodes=4))
    assert obj(cluster, "ResourceFlavor", "train")["spec"]["topologyName"] == kueue.TOPOLOGY
    unit = check.job_for(cluster, cluster.teams[0], next(p for p in cluster.plans if p.name == "train"), "unit")
    assert unit["spec"]["template"]["metadata"]["annotations"][kueue.UNCONSTRAINED_TOPOLOGY] == "true"
    assert all(verdict(cluster, "ml", "train", s).lands for s in ("unit", "node", "gang"))


def test_a_job_without_topology_on_a_mixed_queue_is_refused_by_the_topology_aware_flavor():
    """kueue tas_flavorassigner.go: "supports only TopologyAwareScheduling" unless every flavor of the queue is."""
    cluster = cluster_of(fabric_stack(minNodes=4))
    plan = next(p for p in cluster.plans if p.name == "train")
    job = check.job_for(cluster, cluster.teams[0], plan, "unit")
    del job["spec"]["template"]["metadata"]["annotations"][kueue.UNCONSTRAINED_TOPOLOGY]
    v = land(cluster, cluster.teams[0], plan, "unit", job)
    assert not v.lands and v.failing.name == "queue" and "supports only TopologyAwareScheduling" in v.failing.detail


def test_a_gang_beyond_what_the_queue_can_reach_stays_queued_and_borrowing_lets_it_in():
    config = stack_config("aws", pools=[{"name": "train", "instanceType": "p5.48xlarge", "maxNodes": 4, "zones": ["us-east-1a"]}],
                          teams=[{"name": "a", "gpus": {"train": 8}, "borrow": "none"}, {"name": "b", "gpus": {"train": 24}}])
    config["aws:region"] = "us-east-1"
    cluster = cluster_of(validate_stack(config))
    v = verdict(cluster, "a", "train", "gang")
    assert not v.lands and v.failing.name == "queue" and "the queue can reach 8 there" in v.failing.detail
    config["gpupools:teams"][0]["borrow"] = "all"
    assert verdict(cluster_of(validate_stack(config)), "a", "train", "gang").lands


def test_gpupools_check_fails_when_a_job_cannot_land(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    config = stack_config("aws", pools=[{"name": "train", "instanceType": "p5.48xlarge", "maxNodes": 4, "zones": ["us-east-1a"]}],
                          teams=[{"name": "a", "gpus": {"train": 8}, "borrow": "none"}])
    config["aws:region"] = "us-east-1"
    result = CliRunner().invoke(app, ["check", "--config", str(stack_file(config)), "--json"])
    assert result.exit_code == 1, result.output
    found = [v for v in json.loads(result.output)["violations"] if v["policy"] == "team-jobs-land"]
    assert len(found) == 1 and found[0]["level"] == "mandatory" and "gang job on pool train" in found[0]["message"]


def test_workload_explain_prints_the_chain_as_comments():
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    result = CliRunner().invoke(app, ["workload", "--stack", "dev-aws", "--team", "research", "--pool", "train", "--explain"])
    assert result.exit_code == 0, result.output
    head = [line for line in result.output.splitlines() if line.startswith("#")]
    assert head[0].startswith("# landing: lands on flavor train")
    assert [line.split()[2].rstrip(":") for line in head[1:]] == ["queue", "schedule", "node", "ready", "device"]
    assert yaml.safe_load(result.output)["kind"] == "Job"  # the comments keep it one applicable document


def test_a_gang_asking_for_huge_pages_no_node_allocates_never_initializes(monkeypatch):
    """A Karpenter NodeClaim initializes only once every requested resource is registered (kubernetes-sigs/karpenter
    pkg/controllers/nodeclaim/lifecycle/initialization.go): huge pages the node never sets aside keep it uninitialized."""
    assert verdict(cluster_of(example("dev-aws")), "research", "pretrain", "gang").lands
    monkeypatch.setattr(check, "hugepages_registered", lambda plan: None)
    v = verdict(cluster_of(example("dev-aws")), "research", "pretrain", "gang")
    assert not v.lands and v.failing.name == "ready" and "hugepages-2Mi" in v.failing.detail and "NodeClaim never initializes" in v.failing.detail


def test_karpenter_starts_a_node_for_huge_pages_only_where_its_overlay_lists_them(monkeypatch):
    """Karpenter's instance types list no huge pages; without the NodeOverlay's hugepages-2Mi a pending pod that asks
    for them starts no node (aws/karpenter-provider-aws docs/concepts/nodeoverlays.md)."""
    from gpupools.autoscaling import karpenter

    cluster = cluster_of(example("dev-aws"))
    pretrain = next(p for p in cluster.plans if p.name == "pretrain")
    assert karpenter.node_template(pretrain).allocatable["hugepages-2Mi"] >= 5120
    real = karpenter.node_overlay
    monkeypatch.setattr(karpenter, "node_overlay", lambda plan, fabric=None: None)
    v = verdict(cluster, "research", "pretrain", "gang")
    assert not v.lands and v.failing.name == "node" and "hugepages-2Mi" in v.failing.detail
    monkeypatch.setattr(karpenter, "node_overlay", real)
    assert verdict(cluster, "research", "pretrain", "gang").lands


# --------------------------------------------------------------------------------------------------------------------
# ResourceQuota teams, the other device plugins, node counts


def test_resourcequota_teams_land_within_their_quota_and_stop_beyond_it():
    config = stack_config("aws", pools=[{"name": "train", "instanceType": "g5.12xlarge", "maxNodes": 2}], quotas="resourcequota",
                          teams=[{"name": "ml", "gpus": {"train": 4}}])
    cluster = cluster_of(validate_stack(config))
    v = verdict(cluster, "ml", "train", "node")
    assert v.lands and v.steps[0].detail.startswith("within ResourceQuota ")
    config["gpupools:teams"][0]["gpus"] = {"train": 3}
    v = verdict(cluster_of(validate_stack(config)), "ml", "train", "node")
    assert not v.lands and v.failing.name == "queue" and "allows 3 x nvidia.com/gpu" in v.failing.detail and "asks for 4" in v.failing.detail
    assert verdict(cluster_of(validate_stack(config)), "ml", "train", "unit").lands


def test_the_standalone_device_plugin_serves_the_pools_it_selects():
    config = stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}], gpuSoftware={"installer": "device-plugin"})
    cluster = cluster_of(validate_stack(config))
    v = verdict(cluster, None, "infer", "unit")
    assert v.lands and v.steps[-1].detail == "NVIDIA device plugin advertises nvidia.com/gpu"
    plugin = next(a for a in cluster.agents if a.name == "NVIDIA device plugin")
    cluster.agents[cluster.agents.index(plugin)] = check.node_agents.Agent(plugin.name, plugin.source, pod={**plugin.pod, "tolerations": []},
                                                                           advertises=plugin.advertises)
    v = verdict(cluster, None, "infer", "unit")
    assert not v.lands and v.failing.name == "ready" and "nvidia.com/gpu" in v.failing.detail


def test_vgpu_pools_land_through_hamis_scheduler_and_device_plugin():
    config = stack_config("aws", pools=[{"name": "vgpu", "instanceType": "g5.2xlarge", "maxNodes": 2, "minNodes": 1,
                                         "sharing": {"mode": "vgpu", "replicas": 4}}])
    cluster = cluster_of(validate_stack(config))
    v = verdict(cluster, None, "vgpu", "unit")
    assert v.lands and "through hami-scheduler" in v.steps[0].detail and v.steps[-1].detail == "HAMi device plugin advertises nvidia.com/gpu"
    cluster.schedulers.clear()
    v = verdict(cluster, None, "vgpu", "unit")
    assert not v.lands and v.failing.name == "schedule" and "scheduler hami-scheduler" in v.failing.detail


def test_node_counts_kept_started_and_beyond_max_nodes():
    stack = fabric_stack(minNodes=2)
    cluster = cluster_of(stack)
    grows = ("the pool keeps 2 node(s) running; one more such Job makes Karpenter add a node (NodePool gpupools-train + NodeOverlay "
             "gpupools-train)")
    assert verdict(cluster, "ml", "train", "gang").steps[2].detail == grows
    assert verdict(cluster, "ml", "train", "unit").steps[2].detail == grows
    fixed = cluster_of(fabric_stack(minNodes=4))
    assert verdict(fixed, "ml", "train", "unit").steps[2].detail == ("the pool keeps 4 node(s) running; its node count is fixed "
                                                                      "(minNodes = maxNodes): one more such Job waits for a free node")
    plan = next(p for p in cluster.plans if p.name == "train")
    job = check.job_for(cluster, cluster.teams[0], plan, "gang")
    job["spec"]["parallelism"] = job["spec"]["completions"] = 5
    v = land(cluster, cluster.teams[0], plan, "gang", job)
    assert v.steps[2].detail == "the Job needs 5 nodes, the pool has at most 4"
    # Two pods of half a node each fit one node: a unit request needs one node, a whole-node request one per pod.
    job = check.job_for(cluster, cluster.teams[0], plan, "unit")
    job["spec"]["parallelism"] = 3
    assert land(cluster, cluster.teams[0], plan, "unit", job).steps[2].detail == grows


def test_a_topology_aware_flavor_counts_the_nodes_a_gang_needs_against_the_nodes_kept():
    stack = fabric_stack(minNodes=1)
    cluster = cluster_of(stack)
    obj(cluster, "ResourceFlavor", "train")["spec"]["topologyName"] = kueue.TOPOLOGY
    plan = next(p for p in cluster.plans if p.name == "train")
    job = check.job_for(cluster, cluster.teams[0], plan, "gang")
    job["spec"]["template"]["metadata"]["annotations"][kueue.PREFERRED_TOPOLOGY] = "kubernetes.io/hostname"
    v = land(cluster, cluster.teams[0], plan, "gang", job)
    assert not v.lands and "needs 2 node(s), the pool keeps 1" in v.failing.detail
    unit = check.job_for(cluster, cluster.teams[0], plan, "unit")
    unit["spec"]["template"]["metadata"]["annotations"] = {kueue.UNCONSTRAINED_TOPOLOGY: "true"}
    assert land(cluster, cluster.teams[0], plan, "unit", unit).steps[0].ok  # one pod fits the one node kept


@pytest.mark.parametrize("quantity, mib", [("5120Mi", 5120), ("2Gi", 2048), (str(3 * 1024 * 1024), 3), (1048576, 1)])
def test_huge_page_quantities(quantity, mib):
    assert nodes._mebibytes(quantity) == mib


def test_hamis_own_resources_need_no_device_plugin_only_under_hamis_scheduler():
    config = stack_config("aws", pools=[{"name": "vgpu", "instanceType": "g5.2xlarge", "maxNodes": 2, "minNodes": 1,
                                         "sharing": {"mode": "vgpu", "replicas": 4, "memoryPerPod": "6Gi"}}])
    cluster = cluster_of(validate_stack(config))
    plan = cluster.plans[0]
    job = check.job_for(cluster, None, plan, "unit")
    assert "nvidia.com/gpumem" in job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert land(cluster, None, plan, "unit", job).lands
    del job["spec"]["template"]["spec"]["schedulerName"]  # the default scheduler counts gpumem like any extended resource
    v = land(cluster, None, plan, "unit", job)
    assert not v.lands and v.failing.name == "ready" and "nvidia.com/gpumem" in v.failing.detail


def test_rendered_agents_take_scheduling_from_the_manifests_and_meaning_from_the_chart():
    from gpupools.landing.agents import rendered_agents

    def ds(name, **spec):
        return {"kind": "DaemonSet", "metadata": {"name": name}, "spec": {"template": {"spec": spec}}}

    gpu = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    agents = rendered_agents([
        ("gpu-operator", [ds("gpu-operator-node-feature-discovery-worker", tolerations=gpu),
                          {"kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
                           "spec": {"daemonsets": {"tolerations": gpu}, "devicePlugin": {"enabled": False}}}]),
        ("nvidia-device-plugin", [ds("nvidia-device-plugin", tolerations=gpu), ds("nvidia-device-plugin-gpu-feature-discovery"),
                                  ds("nvidia-device-plugin-node-feature-discovery-worker")]),
        ("hami", [ds("hami-device-plugin", nodeSelector={"gpu": "on"}), ds("hami-scheduler")]),
        ("aws-efa-k8s-device-plugin", [ds("aws-efa-k8s-device-plugin")]),
        ("dcgm-exporter", [ds("dcgm-exporter")]),
    ], "vpc.amazonaws.com/efa")
    names = [(a.name, a.source) for a in agents]
    assert names == [("node-feature-discovery worker", "gpu-operator chart"),
                     ("GPU Operator validator", "gpu-operator operand (rendered ClusterPolicy)"),  # devicePlugin.enabled: false
                     ("NVIDIA device plugin", "nvidia-device-plugin chart (rendered)"),
                     ("node-feature-discovery worker", "nvidia-device-plugin chart"),
                     ("HAMi device plugin", "hami chart (rendered)"),
                     ("EFA device plugin", "aws-efa-k8s-device-plugin chart (rendered)")]
    assert agents[1].pod["tolerations"] == gpu and agents[4].pod["nodeSelector"] == {"gpu": "on"}
    assert rendered_agents([("aws-efa-k8s-device-plugin", [ds("aws-efa-k8s-device-plugin")])]) == []  # no fabric resource on this cloud


def test_a_refused_job_names_only_the_flavors_of_its_own_pool(aws_cluster):
    """Other pools' flavors are no candidates for a Job that names its pool: the reason stays one pool long."""
    plan = next(p for p in aws_cluster.plans if p.name == "pretrain")
    job = check.job_for(aws_cluster, aws_cluster.teams[0], plan, "gang")
    job["spec"]["parallelism"] = job["spec"]["completions"] = 8
    v = land(aws_cluster, aws_cluster.teams[0], plan, "gang", job)
    assert not v.lands and v.failing.detail.startswith("ClusterQueue research admits it on no flavor: pretrain: the Job asks for 64")
    assert "; " not in v.failing.detail.split("no flavor: ", 1)[1] and "infer" not in v.failing.detail  # one flavor named
    job["spec"]["template"]["spec"]["nodeSelector"] = {"gpupools.io/pool": "nowhere"}
    v = land(aws_cluster, aws_cluster.teams[0], plan, "gang", job)
    assert v.failing.detail == "no flavor of ClusterQueue research selects the nodes the Job's node selector names"


# --------------------------------------------------------------------------------------------------------------------
# Which fabric flavors are topology-aware, and what a Job for them says


@pytest.mark.parametrize("min_nodes, aware", [(0, False), (1, False), (3, False), (4, True)])
def test_a_fabric_pool_is_topology_aware_only_with_all_its_nodes_kept(min_nodes, aware):
    from gpupools.fabric.plan import plan_fabric

    stack = fabric_stack(minNodes=min_nodes)
    plan = next(p for p in plan_pools(stack) if p.name == "train")
    fabric = plan_fabric(stack, plan)
    assert kueue.topology_aware(stack, plan, fabric) is aware
    assert kueue.topology_guarantee(stack, plan, fabric, "karpenter").startswith("topology-aware" if aware else "topology best effort")
    gang, one = kueue.podset_topology(stack, plan, fabric, gang=True), kueue.podset_topology(stack, plan, fabric, gang=False)
    assert (gang, one) == (({kueue.PREFERRED_TOPOLOGY: "topology.k8s.aws/network-node-layer-3"}, {kueue.UNCONSTRAINED_TOPOLOGY: "true"}) if aware else ({}, {}))
    infer = next(p for p in plan_pools(stack) if p.name == "infer")
    assert not kueue.topology_aware(stack, infer, None) and kueue.topology_guarantee(stack, infer, None) is None


def test_a_queued_pool_behind_a_provisioning_request_is_topology_aware_from_zero():
    """Kueue assigns the topology after the ProvisioningRequest brings the nodes (tas_flavorassigner.go,
    DelayedTopologyRequest), so the pool may sit at zero."""
    from dataclasses import replace as copy_with

    from gpupools.fabric.plan import FabricPlan

    stack = example("dev-gcp-dws")
    plan = next(p for p in plan_pools(stack) if p.name == "h100")
    fabric = FabricPlan(pool="h100", cloud="gcp", name="GPUDirect", kind="gpudirect-tcpx", devices=4, zone="us-central1-a",
                        placement="", placement_group=None, local_nvme_gb=0, resource=None, resource_count=0,
                        levels=(("block", "cloud.google.com/gce-topology-block"),), required_level=None, configured=True)
    assert plan.pool.min_nodes == 0 and kueue.topology_aware(stack, plan, fabric)
    assert "ProvisioningRequest admission check" in kueue.topology_guarantee(stack, plan, fabric)
    assert not kueue.topology_aware(stack, plan, copy_with(fabric, levels=()))


# --------------------------------------------------------------------------------------------------------------------
# A mixed MIG layout: a job may ask for any of the pool's profiles, and each is followed


def mixed_layout_cluster(**keys) -> Cluster:
    layout = [{"gpus": 4, "profiles": {"1g.23gb": 7}}, {"gpus": 4, "profiles": {"3g.90gb": 1, "4g.90gb": 1}}]
    config = stack_config("aws", pools=[{"name": "b200", "instanceType": "p6-b200.48xlarge", "maxNodes": 2,
                                         "sharing": {"mode": "mig", "migLayout": layout}}], **keys)
    return cluster_of(validate_stack({**config, "aws:region": "us-east-1"}))


def test_every_profile_of_a_mixed_mig_layout_is_followed_to_a_gpu():
    cluster = mixed_layout_cluster(teams=[{"name": "research", "gpus": 16}])
    plan = cluster.plans[0]
    assert set(plan.node_resources) == {"nvidia.com/mig-1g.23gb", "nvidia.com/mig-3g.90gb", "nvidia.com/mig-4g.90gb"}
    verdicts = {v.shape: v for v in landing_check(cluster.stack) if v.pool == "b200"}
    assert {"unit", "unit:mig-3g.90gb", "unit:mig-4g.90gb"} <= set(verdicts)
    assert all(v.lands for v in verdicts.values()), [(v.shape, v.failing) for v in verdicts.values() if not v.lands]
    assert verdicts["unit:mig-4g.90gb"].job == "1 x nvidia.com/mig-4g.90gb"
    assert "nvidia.com/mig-4g.90gb" in verdicts["unit:mig-4g.90gb"].steps[-1].detail  # the device plugin advertises it
    # Without a team the pool's own Jobs ask for each profile too.
    assert {"unit:mig-3g.90gb", "unit:mig-4g.90gb"} <= {v.shape for v in landing_check(mixed_layout_cluster().stack)}


def test_a_profile_the_queue_does_not_cover_stays_queued():
    cluster = mixed_layout_cluster(teams=[{"name": "research", "gpus": 16}])
    queue = obj(cluster, "ClusterQueue", "research")
    for group in queue["spec"]["resourceGroups"]:
        group["coveredResources"] = [r for r in group["coveredResources"] if r != "nvidia.com/mig-4g.90gb"]
        for flavor in group["flavors"]:
            flavor["resources"] = [r for r in flavor["resources"] if r["name"] != "nvidia.com/mig-4g.90gb"]
    assert verdict(cluster, "research", "b200", "unit:mig-3g.90gb").lands
    v = verdict(cluster, "research", "b200", "unit:mig-4g.90gb")
    assert not v.lands and v.failing.name == "queue" and "no quota on nvidia.com/mig-4g.90gb" in v.failing.detail


def test_a_team_whose_split_quota_holds_none_of_a_profile_is_told_its_jobs_for_it_stay_queued():
    """`gpus: 4` over a layout of three profiles: the split gives the last profile no nominal quota, and a Job asking for
    it can never be admitted without borrowing; the plan says so instead of calling every job landed."""
    cluster = mixed_layout_cluster(teams=[{"name": "research", "gpus": 4}])
    quota = {r["name"]: r["nominalQuota"] for g in obj(cluster, "ClusterQueue", "research")["spec"]["resourceGroups"]
             for f in g["flavors"] for r in f["resources"]}
    assert quota["nvidia.com/mig-4g.90gb"] == 0 < quota["nvidia.com/mig-3g.90gb"]
    assert verdict(cluster, "research", "b200", "unit:mig-3g.90gb").lands
    v = verdict(cluster, "research", "b200", "unit:mig-4g.90gb")
    assert not v.lands and v.failing.name == "queue" and "1 x nvidia.com/mig-4g.90gb, the queue can reach 0" in v.failing.detail


def test_workload_asks_for_the_profile_named_and_refuses_one_the_pool_lacks(tmp_path):
    from typer.testing import CliRunner

    from gpupools.cli.main import app
    from tests.conftest import write_stack

    layout = [{"gpus": 4, "profiles": {"1g.23gb": 7}}, {"gpus": 4, "profiles": {"3g.90gb": 1, "4g.90gb": 1}}]
    config = {**stack_config("aws", pools=[{"name": "b200", "instanceType": "p6-b200.48xlarge", "maxNodes": 2,
                                            "sharing": {"mode": "mig", "migLayout": layout}},
                                           {"name": "infer", "instanceType": "g6.xlarge", "maxNodes": 2}],
                             teams=[{"name": "research", "gpus": 16, "pools": ["b200"]}]), "aws:region": "us-east-1"}
    path = str(write_stack(tmp_path, config))
    run = lambda *args: CliRunner().invoke(app, ["workload", "--config", path, *args])  # noqa: E731

    def limits(output: str) -> dict:
        job = yaml.safe_load(output)
        return job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]

    result = run("--pool", "b200", "--profile", "4g.90gb", "--units", "2")
    assert result.exit_code == 0, result.output
    assert {k: v for k, v in limits(result.output).items() if k.startswith("nvidia.com/")} == {"nvidia.com/mig-4g.90gb": 2}
    result = run("--team", "research", "--pool", "b200", "--profile", "3g.90gb", "--explain")
    assert result.exit_code == 0 and result.output.startswith("# landing: lands"), result.output
    assert "nvidia.com/mig-3g.90gb" in limits(result.output) and "nvidia.com/mig-1g.23gb" not in limits(result.output)
    # Without --profile, the layout's first.
    assert "nvidia.com/mig-1g.23gb" in limits(run("--pool", "b200").output)
    for args, words in ((["--pool", "b200", "--profile", "2g.45gb"], "'2g.45gb' is not a MIG profile pool b200 offers; it offers 1g.23gb, 3g.90gb, 4g.90gb"),
                        (["--pool", "infer", "--profile", "1g.23gb"], "its GPUs are not split into MIG slices"),
                        (["--profile", "3g.90gb"], "name the pool with --pool"),
                        (["--pool", "b200", "--profile", "3g.90gb", "--nodes", "2"], "not with --nodes")):
        result = run(*args)
        assert result.exit_code == 2 and words in result.output and len(result.output.strip().splitlines()) == 1, (args, result.output)
