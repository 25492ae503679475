"""GKE Autopilot: the cluster with Autopilot on and GKE's DCGM metrics, pools as node selectors and a workload-separation
pair, Kueue flavors and Jobs that select them, what Autopilot owns refused in one line, and the landing check from zero."""

from __future__ import annotations

import copy

import pytest
import yaml

from conftest import ROOT, plan_of, stack_config, config_problems as problems_of
from gpupools.clouds import gcp
from gpupools.clouds.gcp import autopilot as gcp_autopilot
from gpupools.clouds.registry import cloud_module
from gpupools.landing.check import cluster_of, land, landing_check
from gpupools.pools.planning import plan_pools
from gpupools.queues import kueue
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


def example() -> dict:
    return yaml.safe_load((ROOT / "stacks" / "Pulumi.dev-gcp-autopilot.yaml").read_text())["config"]


def autopilot_config(pools: list[dict] | None = None, cluster: dict | None = None, **keys) -> dict:
    config = stack_config("gcp", pools=pools, **keys)
    config["gpupools:cluster"] = {**config["gpupools:cluster"], "mode": "autopilot", **(cluster or {})}
    return config


def test_autopilot_is_gke_s_own_cloud_object():
    assert cloud_module("gcp", "autopilot") is gcp_autopilot and cloud_module("gcp") is gcp
    assert validate_stack(example()).target is gcp_autopilot
    assert validate_stack(stack_config("gcp")).target is gcp


def test_the_cluster_has_autopilot_on_and_nothing_autopilot_refuses():
    plan = plan_of(example(), "dev-gcp-autopilot")
    (cluster,) = plan.of_type(CLUSTER)
    inputs = cluster.inputs
    assert inputs["enableAutopilot"] is True
    for refused in ("removeDefaultNodePool", "initialNodeCount", "enableShieldedNodes"):
        assert refused not in inputs, refused
    assert inputs["monitoringConfig"] == {"enableComponents": ["SYSTEM_COMPONENTS", "DCGM"], "managedPrometheus": {"enabled": True}}
    # The nodes' least-privilege account, where Autopilot's nodes take it from; no NAP switch or limits.
    autoscaling = inputs["clusterAutoscaling"]
    assert set(autoscaling) == {"autoProvisioningDefaults"}
    (account,) = plan.of_type("gcp:serviceaccount/account:Account")
    assert autoscaling["autoProvisioningDefaults"]["serviceAccount"] and account.name == "ml-autopilot-nodes"
    # No node pool at all, not even the system pool; the pools are components that create nothing.
    assert plan.of_type(NODE_POOL) == [] and plan.of_type("kubernetes:cloud.google.com/v1:ComputeClass") == []
    assert sorted(r.name for r in plan.of_type("gpupools:index:GkeAutopilotPool")) == ["infer", "train"]
    # The standard cluster keeps its own settings.
    standard = plan_of(stack_config("gcp")).of_type(CLUSTER)[0].inputs
    assert "enableAutopilot" not in standard and standard["removeDefaultNodePool"] is True and "monitoringConfig" not in standard


def test_each_pool_is_what_its_pods_select():
    infer, train = plan_pools(validate_stack(example()))
    assert infer.node_selector == {"gpupools.io/pool": "infer", "cloud.google.com/gke-accelerator": "nvidia-l4",
                                   "cloud.google.com/gke-accelerator-count": "1", "cloud.google.com/gke-gpu-sharing-strategy": "time-sharing",
                                   "cloud.google.com/gke-max-shared-clients-per-gpu": "4", "cloud.google.com/gke-spot": "true"}
    assert train.node_selector == {"gpupools.io/pool": "train", "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
                                   "cloud.google.com/gke-accelerator-count": "8"}
    # The labels are what Autopilot puts on the node: the selectors and the workload-separation pair, nothing else.
    assert train.labels == train.node_selector and infer.labels == infer.node_selector
    assert [(t.key, t.value, t.effect) for t in train.taints] == [("nvidia.com/gpu", "present", "NoSchedule"),
                                                                   ("gpupools.io/pool", "train", "NoSchedule")]
    assert infer.units_per_node == 4 and train.units_per_node == 8
    # A Standard cluster's pool is unchanged: its own labels, no Autopilot selectors.
    (standard,) = plan_pools(validate_stack(stack_config("gcp")))
    assert standard.node_selector == {"gpupools.io/pool": "infer"} and "gpupools.io/gpu" in standard.labels


def test_flavors_and_jobs_select_the_autopilot_node_and_tolerate_its_taints():
    stack = validate_stack(example())
    infer, train = plan_pools(stack)
    (flavor,) = kueue.pool_flavors(stack, train, "cloud")
    assert flavor.node_labels == train.node_selector
    from gpupools.landing.jobs import job_manifest

    spec = job_manifest(stack, infer, "img")["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == infer.node_selector
    assert GPU_TAINT in spec["tolerations"]
    assert {"key": "gpupools.io/pool", "operator": "Equal", "value": "infer", "effect": "NoSchedule"} in spec["tolerations"]


def test_the_resource_flavors_carry_the_selectors_and_tolerations():
    plan = plan_of(example(), "dev-gcp-autopilot")
    flavors = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in plan.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")}
    train = flavors["train"]
    assert train["nodeLabels"]["cloud.google.com/gke-accelerator"] == "nvidia-h100-80gb"
    assert {"key": "gpupools.io/pool", "operator": "Equal", "value": "train", "effect": "NoSchedule"} in train["tolerations"]


def test_every_team_job_lands_on_an_autopilot_node_from_zero():
    verdicts = landing_check(validate_stack(example()))
    assert {(v.team, v.pool, v.shape) for v in verdicts} == {("research", "train", "unit"), ("research", "train", "node"),
                                                             ("research", "infer", "unit"), ("serving", "infer", "unit")}
    assert all(v.lands for v in verdicts), [v.failing for v in verdicts]
    node = next(s for s in verdicts[0].steps if s.name == "node")
    assert "GKE Autopilot starts it from zero (the Accelerator compute class" in node.detail
    device = next(s for s in verdicts[0].steps if s.name == "device")
    assert device.detail == "GKE Autopilot's device plugin advertises nvidia.com/gpu"


@pytest.mark.parametrize("drop", ["cloud.google.com/gke-accelerator", "gpupools.io/pool", "cloud.google.com/gke-gpu-sharing-strategy"])
def test_a_pod_that_does_not_select_everything_gets_no_node(drop):
    cluster = cluster_of(validate_stack(example()))
    plan = next(p for p in cluster.plans if p.name == "infer")
    from gpupools.landing.jobs import job_manifest

    job = job_manifest(cluster.stack, plan, "img")
    del job["spec"]["template"]["spec"]["nodeSelector"][drop]
    verdict = land(cluster, None, plan, "unit", job)
    assert not verdict.lands and verdict.failing.name == "node"
    assert f"GKE Autopilot starts a node only for pods that select {drop}=" in verdict.failing.detail


def test_a_pod_that_does_not_tolerate_the_pool_s_separation_taint_gets_no_node():
    cluster = cluster_of(validate_stack(example()))
    plan = next(p for p in cluster.plans if p.name == "train")
    from gpupools.landing.jobs import job_manifest

    job = job_manifest(cluster.stack, plan, "img")
    spec = job["spec"]["template"]["spec"]
    spec["tolerations"] = [t for t in spec["tolerations"] if t["key"] != "gpupools.io/pool"]
    verdict = land(cluster, None, plan, "unit", job)
    assert not verdict.lands and "gpupools.io/pool" in verdict.failing.detail


@pytest.mark.parametrize("pool, path, words", [
    ({"minNodes": 1}, "pools[0].minNodes", "keeps no GPU nodes waiting"),
    ({"provisioning": "compute-class", "capacity": ["spot"]}, "pools[0].provisioning", "built for Standard clusters"),
    ({"labels": {"team": "search"}}, "pools[0].labels", "workload-separation pair"),
    ({"zones": ["us-central1-a"]}, "pools[0].zones", "does not pin Autopilot GPU pods to zones"),
    ({"diskSizeGb": 200}, "pools[0].diskSizeGb", "sizes no disk"),
    ({"autoRepair": False}, "pools[0].autoRepair", "repairs the nodes it makes"),
    ({"upgrades": {"kind": "inference", "maxSurge": 2}}, "pools[0].upgrades.maxSurge", "takes no surge settings"),
    ({"upgrades": {"kind": "inference", "maxUnavailable": 1}}, "pools[0].upgrades.maxUnavailable", "takes no surge settings"),
    ({"capacity": ["spot", "on-demand"]}, "pools[0].capacity", "takes [on-demand] or [spot]"),
    ({"capacity": [{"flexStart": {}}]}, "pools[0].capacity", "takes [on-demand] or [spot]"),
    ({"sharing": {"mode": "mps", "replicas": 2}}, "pools[0].sharing.mode", "documents MPS for Standard clusters only"),
    ({"instanceType": "a2-highgpu-1g", "sharing": {"mode": "mig", "migProfile": "2g.10gb"}}, "pools[0].sharing.mode",
     "no GPU partitions for Autopilot"),
    ({"instanceType": "a3-highgpu-8g", "fabric": "on"}, "pools[0].fabric", "GKE Autopilot makes its GPU nodes itself"),
])
def test_what_autopilot_owns_is_refused_in_one_line(pool, path, words):
    base = {"name": "infer", "instanceType": "g2-standard-8", "maxNodes": 3}
    problems = problems_of(autopilot_config([{**base, **pool}]))
    assert any(p.path == path and words in p.message for p in problems), problems
    # The same pool on a Standard cluster is refused for none of these reasons.
    try:
        validate_stack(stack_config("gcp", pools=[{**base, **pool}]))
    except ConfigError as error:
        assert not any(p.path == path and words in p.message for p in error.problems), error.problems


@pytest.mark.parametrize("cluster, path, words", [
    ({"location": "us-central1-a"}, "cluster.location", "GKE Autopilot clusters are always regional; give its region (us-central1)"),
    ({"networkPolicy": False}, "cluster.networkPolicy", "always runs Dataplane V2"),
])
def test_what_autopilot_fixes_for_the_cluster_is_refused_in_one_line(cluster, path, words):
    assert any(p.path == path and words in p.message for p in problems_of(autopilot_config(cluster=cluster))), problems_of(autopilot_config(cluster=cluster))
    # A regional Autopilot cluster passes, and a Standard cluster may be zonal and run without network policy.
    assert validate_stack(autopilot_config(cluster={"location": "us-central1"})).cluster.location == "us-central1"
    standard = stack_config("gcp")
    standard["gpupools:cluster"] = {**standard["gpupools:cluster"], **cluster}
    assert validate_stack(standard).target is gcp


@pytest.mark.parametrize("installer", ["gpu-operator", "device-plugin"])
def test_gpu_software_of_gpupools_is_refused_on_autopilot(installer):
    problems = problems_of(autopilot_config(gpuSoftware={"installer": installer}))
    assert any(p.path == "gpuSoftware.installer" and "cannot run on GKE Autopilot" in p.message for p in problems), problems


def test_the_cloud_installer_and_whole_or_time_shared_gpus_pass():
    stack = validate_stack(autopilot_config([{"name": "infer", "instanceType": "g2-standard-8", "maxNodes": 3, "capacity": ["on-demand"],
                                              "sharing": {"mode": "time-slicing", "replicas": 2}}], gpuSoftware={"installer": "cloud"}))
    (plan,) = plan_pools(stack)
    assert plan.mechanism.installer == "cloud" and "cloud.google.com/gke-spot" not in plan.node_selector
    assert plan.node_selector["cloud.google.com/gke-max-shared-clients-per-gpu"] == "2"


@pytest.mark.parametrize("cloud", ["aws", "azure", "gcore"])
def test_autopilot_is_a_gke_mode(cloud):
    config = stack_config(cloud)
    config["gpupools:cluster"] = {**config["gpupools:cluster"], "mode": "autopilot"}
    assert any(p.path == "cluster.mode" and "'autopilot' is not a mode of" in p.message for p in problems_of(config))


def test_no_exporter_of_gpupools_runs_and_the_plan_names_gke_s():
    from gpupools.monitoring.plan import MANAGED_EXPORTER, exporter_per_pool, monitoring_plan

    stack = validate_stack(example())
    plans = plan_pools(stack)
    mplan = monitoring_plan(stack, plans)
    assert not any(r.chart.chart == "dcgm-exporter" for r in mplan.releases)
    assert exporter_per_pool(stack, plans, mplan) == {"infer": [MANAGED_EXPORTER], "train": [MANAGED_EXPORTER]}
    from gpupools.cli.planreport import metrics_line

    line = metrics_line(stack, plans[0], [MANAGED_EXPORTER])
    assert line.startswith("GKE's managed DCGM-Exporter") and "--auth gcp" in line
    # A Standard GKE cluster keeps gpupools' own exporter.
    standard = validate_stack(stack_config("gcp"))
    assert exporter_per_pool(standard, plan_pools(standard)) == {"infer": ["dcgm-exporter"]}


def test_an_existing_cluster_must_run_the_mode_the_stack_names():
    assert gcp_autopilot.existing_cluster_problem("c", ["p.svc.id.goog"], True) is None
    assert "is a Standard cluster, but gpupools:cluster.mode is autopilot" in gcp_autopilot.existing_cluster_problem("c", ["p"], False)
    assert "is a Standard cluster" in gcp_autopilot.existing_cluster_problem("c", [], None)
    assert gcp.existing_cluster_problem("c", ["p.svc.id.goog"], False) is None
    assert "runs Autopilot" in gcp.existing_cluster_problem("c", ["p.svc.id.goog"], True)
    assert "has no Workload Identity" in gcp.existing_cluster_problem("c", [None], False)
    # Offline, an existing cluster reads as the stack says; the plan creates no cluster and no pool.
    assert gcp.mock_cluster_facts(autopilot_config(cluster={"create": False})) == {"enableAutopilot": True}
    assert gcp.mock_cluster_facts(stack_config("gcp")) == {}
    plan = plan_of(autopilot_config(cluster={"create": False}))
    assert plan.of_type(CLUSTER) == [] and plan.of_type(NODE_POOL) == []
    pulumi = pytest.importorskip("pulumi")
    from gpupools.deploy.gcp import _checked

    assert _checked(gcp_autopilot, "c", [{"workload_pool": "p.svc.id.goog"}], True) == "c"
    with pytest.raises(pulumi.RunError, match="is a Standard cluster"):
        _checked(gcp_autopilot, "c", [{"workload_pool": "p.svc.id.goog"}], False)
    with pytest.raises(pulumi.RunError, match="runs Autopilot"):
        _checked(gcp, "c", [{"workload_pool": "p.svc.id.goog"}], True)


def test_the_plan_speaks_of_autopilot():
    stack = validate_stack(example())
    infer, train = plan_pools(stack)
    target = stack.target
    assert target.capacity_lines(infer.pool, "cloud") == ["spot: Autopilot Spot Pods (cloud.google.com/gke-spot=true)"]
    assert target.capacity_lines(train.pool, "cloud") == ["on-demand: Autopilot standard Pods"]
    controls = {c.name: c.setting for c in target.cluster_controls(stack.cluster)}
    assert controls["shielded nodes"] == "Autopilot's own (not settable)" and controls["Workload Identity"] == "on"
    assert target.driver_installer("cloud", None).startswith("GKE Autopilot")
    assert target.repair_facts(train, "cloud")[1].startswith("GKE Autopilot")
    assert target.local_nvme_use(train.pool, False) is None and target.extra_tolerations(infer) == []
    assert target.auto_provisioning_args([], None) == {"auto_provisioning_defaults": {"oauth_scopes": gcp.NAP_SCOPES}}
    assert target.system_node_pool_args("c", "us-central1", None) is None
    from gpupools.upgrades.policy import Window, pool_upgrade
    from gpupools.stack.config import MaintenanceWindow

    lines = target.upgrade_lines(train.pool, pool_upgrade(train.pool), Window.of(MaintenanceWindow()), stack.cluster, "cloud")
    assert lines[0].startswith("training: GKE Autopilot upgrades its nodes (REGULAR channel)")
    existing = copy.deepcopy(stack.cluster).model_copy(update={"create": False})
    assert "existing cluster's own maintenance window" in target.upgrade_lines(train.pool, pool_upgrade(train.pool),
                                                                                Window.of(MaintenanceWindow()), existing, "cloud")[0]
    assert "Autopilot makes new nodes" in target.own_sharing_change()

    from gpupools.autoscaling.choice import autoscaler_problems, resolve_autoscaler

    assert resolve_autoscaler(target, True, "auto") == "cloud" and [p.path for p in autoscaler_problems(target, "karpenter")] == ["autoscaler"]
    from io import StringIO

    from rich.console import Console

    from gpupools.cli.planreport import print_plan
    from gpupools.cli.planrun import run_program

    out = StringIO()
    print_plan(stack, run_program(example(), "dev-gcp-autopilot"), Console(file=out, width=300, highlight=False))
    assert "autoscaler: GKE Autopilot (a node for each pod that asks for one)" in " ".join(out.getvalue().split())


def _host_access(objects: list[dict]) -> list[str]:
    """Workloads whose pods share the host's namespaces or mount its filesystem, by kind/name."""
    found = []
    for o in objects:
        spec = (o.get("spec") or {}).get("template", {}).get("spec") or {}
        if spec.get("hostNetwork") or spec.get("hostPID") or any("hostPath" in v for v in spec.get("volumes") or []):
            found.append(f"{o['kind']}/{o['metadata']['name']}")
    return found


def test_the_monitoring_stack_renders_no_host_agent_on_autopilot():
    """Rendered with the pinned kube-prometheus-stack chart: Autopilot's values leave out the node exporter, the only
    workload of the chart in the host's namespaces; a Standard cluster keeps it."""
    from charts.chartrender import need_helm, stack_releases

    need_helm()
    releases = stack_releases("dev-gcp-autopilot")
    (autopilot,) = [r for r in releases if r.chart == "kube-prometheus-stack"]
    assert autopilot.values["nodeExporter"] == {"enabled": False}
    assert {r.chart: _host_access(r.render()) for r in releases} == {r.chart: [] for r in releases}  # no chart of the stack has one
    (standard,) = [r for r in stack_releases("dev-gcp") if r.chart == "kube-prometheus-stack"]
    assert "nodeExporter" not in standard.values
    assert any("node-exporter" in name for name in _host_access(standard.render()))


def test_the_chart_keeps_out_of_the_namespaces_the_cloud_object_says_are_managed(monkeypatch):
    """kube-prometheus-stack's exporters that live in kube-system are off, and the kubelet's Service moves beside
    Prometheus, wherever the stack's Cloud object names kube-system managed; a cluster whose kube-system is the user's
    keeps the chart's defaults."""
    from gpupools.monitoring.plan import KUBE_SYSTEM_EXPORTERS, NAMESPACE, kube_prometheus_stack_values

    autopilot = kube_prometheus_stack_values(validate_stack(example()))
    assert {e: autopilot[e] for e in KUBE_SYSTEM_EXPORTERS} == {e: {"enabled": False} for e in KUBE_SYSTEM_EXPORTERS}
    assert set(KUBE_SYSTEM_EXPORTERS) == {"coreDns", "kubeControllerManager", "kubeDns", "kubeEtcd", "kubeProxy", "kubeScheduler"}
    assert autopilot["prometheusOperator"] == {"kubeletService": {"namespace": NAMESPACE}} and autopilot["kubelet"] == {"namespace": NAMESPACE}
    standard = kube_prometheus_stack_values(validate_stack(stack_config("gcp")))
    assert not set(standard) & {*KUBE_SYSTEM_EXPORTERS, "prometheusOperator", "kubelet"}
    # The answer is the Cloud object's, not the cloud's name: a Standard GKE object that named kube-system managed
    # would get the same values, and Autopilot's without it the chart's defaults.
    monkeypatch.setattr(gcp, "MANAGED_NAMESPACES", ("kube-system",), raising=False)
    assert kube_prometheus_stack_values(validate_stack(stack_config("gcp")))["kubeScheduler"] == {"enabled": False}
    monkeypatch.setattr(gcp_autopilot, "MANAGED_NAMESPACES", ())
    assert "kubeScheduler" not in kube_prometheus_stack_values(validate_stack(example()))


@pytest.mark.parametrize("engine", ["kai", "resourcequota"])
def test_autopilot_pools_are_bounded_by_kueue_quotas_only(engine):
    problems = problems_of(autopilot_config(quotas=engine))
    assert any(p.path == "quotas" and "bounds teams, not pools" in p.message for p in problems), problems
    validate_stack(stack_config("gcp", quotas=engine))  # a Standard cluster's node pools keep their own node limit
    validate_stack(autopilot_config(quotas="kueue"))


def test_the_node_autopilot_makes_is_pictured_from_the_selectors():
    infer, train = plan_pools(validate_stack(example()))
    template = gcp_autopilot.node_template(infer)
    assert template.source == "the Accelerator compute class (nvidia-l4 x1, GKE time-sharing x4, Spot)"
    assert template.requires == infer.node_selector and template.allocatable == {"nvidia.com/gpu": 4}
    assert gcp_autopilot.node_template(train).source == "the Accelerator compute class (nvidia-h100-80gb x8)"
    # What the pool's component records, for the policy pack: the selectors and both tolerations.
    record = gcp_autopilot.pool_record(train)
    assert record == {"pool": "train", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "nodeSelector": train.node_selector,
                      "tolerations": [GPU_TAINT, {"key": "gpupools.io/pool", "operator": "Equal", "value": "train", "effect": "NoSchedule"}]}
