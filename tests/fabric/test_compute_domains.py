"""ComputeDomains on rack-scale pools: NVIDIA's DRA driver (its pinned chart rendered with gpupools' values), Kueue's
device class mapping and channel quota, the landing check's claims step, and the ComputeDomain job `gpupools workload`
prints.

Until the catalog sells a rack-scale type, a rack pool here is p4d.24xlarge's catalog row given an NVLink domain of 72 GPUs
and arm64 hosts (the facts `InstanceType.rack_scale` and `arch` read), patched for this module only.

Sources: kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 (tests/charts/dra-driver-nvidia-gpu: the chart, its CRDs and
templates/validation.yaml), kubernetes-sigs/kueue v0.19.2 (pkg/dra/claims.go, apis/config/v1beta2/configuration_types.go),
Kubernetes' resource.k8s.io/v1 schema (kubernetes-validate).
"""

from __future__ import annotations

import dataclasses

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from charts.chartrender import RenderError, chart_dir, chart_version, kind_of, render, stack_releases
from conftest import crd_rule_failures, stack_config, write_stack
from gpupools.cli.main import app
from gpupools.core.catalog import load_catalog
from gpupools.core.pools import GPU_TAINT, POOL_LABEL
from gpupools.fabric import computedomain as cd
from gpupools.landing import check
from gpupools.landing.check import cluster_of, land, landing_check
from gpupools.pools.planning import plan_pools
from gpupools.queues import kueue
from gpupools.queues.engine import quota_plan
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

RACK_TYPE = "p4d.24xlarge"  # 8 GPUs: 9 nodes per NVLink domain of 72
# A rack's nodes come from a Capacity Block (as P6e-GB200's only do), under cluster-autoscaler (Karpenter v1.14 serves no
# DRA claim): what the stack validation asks of a rack-scale EKS pool. One node kept: cluster-autoscaler starts none from
# zero for a pod with claims (gpupools.landing.nodes.claims_from_zero).
POOLS = [{"name": "rack", "instanceType": RACK_TYPE, "minNodes": 1, "maxNodes": 12, "zones": ["eu-central-1a"],
          "capacity": [{"reservation": {"id": "cr-0123456789abcdef0", "kind": "capacity-block", "zones": ["eu-central-1a"], "nodes": 12}}]},
         {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3}]
TEAMS = [{"name": "ml", "gpus": {"rack": 32, "infer": 2}}, {"name": "web", "gpus": {"infer": 4}}]
CONFIG = stack_config("aws", pools=POOLS, teams=TEAMS, autoscaler="cluster-autoscaler")  # Karpenter v1.14 serves no DRA claim


@pytest.fixture(scope="module", autouse=True)
def rack_row():
    catalog = load_catalog()
    row = catalog.instances["aws"][RACK_TYPE]
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(catalog.instances["aws"], RACK_TYPE,
                      dataclasses.replace(row, gpu=dataclasses.replace(row.gpu, nvlink_domain=72), arch="arm64"))
        yield


@pytest.fixture(scope="module")
def rack(rack_row):
    stack = validate_stack(CONFIG)
    return stack, plan_pools(stack)


def _rack_plan(plan):
    """A pool's planned facts as on an NVL72 rack (for clouds the catalog sells no rack type of)."""
    hw = plan.hardware
    return dataclasses.replace(plan, hardware=dataclasses.replace(hw, gpu=dataclasses.replace(hw.gpu, nvlink_domain=72)))


# --------------------------------------------------------------------------------------------------------------------
# The DRA driver: only where a pool is rack-scale, ComputeDomains on, GPUs off, on the rack pools, each cloud's driver root


def test_the_dra_driver_is_installed_for_rack_pools_only(rack):
    stack, plans = rack
    release = cd.dra_driver_release(stack, plans)
    assert release.chart == cd.CHART and release.version == "0.4.1" == chart_version(chart_dir("dra-driver-nvidia-gpu"))
    assert cd.CHART.chart == "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
    values = release.values
    assert values["resources"] == {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}}
    assert values["nvidiaDriverRoot"] == "/"  # the EKS AL2023 NVIDIA AMI's driver, on the host
    assert cd.plugin_pools(values) == {"rack"}
    assert {"key": GPU_TAINT.key, "operator": "Exists", "effect": GPU_TAINT.effect} in values["kubeletPlugin"]["tolerations"]
    plain = [p for p in plans if p.name == "infer"]
    assert cd.dra_driver_release(stack, plain) is None
    software = cd.with_dra_driver(type(check.software_plan(stack, plain))(), stack, plain)
    assert software.releases == [] and software.objects == []


def test_nvidia_driver_root_follows_who_installs_the_driver():
    gke = validate_stack(stack_config("gcp"))
    (plan,) = plan_pools(gke)
    assert cd.driver_root(gke, _rack_plan(plan)) == "/home/kubernetes/bin/nvidia"  # GKE's installer (installer: cloud)
    operator = validate_stack(stack_config("gcp", gpuSoftware={"installer": "gpu-operator"}))
    (plan,) = plan_pools(operator)
    assert cd.driver_root(operator, _rack_plan(plan)) == "/run/nvidia/driver"  # the GPU Operator's driver container
    assert "GKE's driver installer" in cd.imex_line(gke, _rack_plan(plan_pools(gke)[0]))


def test_the_plan_installs_the_chart_and_its_render_serves_channels_on_arm64_rack_nodes(rack):
    (release,) = [r for r in stack_releases("rack-test", config=CONFIG) if r.chart == "dra-driver-nvidia-gpu"]
    assert release.namespace == cd.CHART.namespace and release.version == cd.CHART.default_version
    objects = release.render(api_versions=("resource.k8s.io/v1",))
    classes = {o["metadata"]["name"] for o in kind_of(objects, "DeviceClass")}
    assert classes == set(cd.served_device_classes(release.values)) == {cd.CHANNEL_CLASS, cd.DAEMON_CLASS}
    daemonsets = kind_of(objects, "DaemonSet")
    assert [d["metadata"]["name"] for d in daemonsets] == ["dra-driver-nvidia-gpu-kubelet-plugin"]
    for ds in daemonsets:  # every DaemonSet that goes to GPU nodes
        pod = ds["spec"]["template"]["spec"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            repository = container["image"].rsplit(":", 1)[0]
            assert "linux/arm64" in cd.MULTI_ARCH_IMAGES[repository], container["image"]
        tolerations = pod["tolerations"]
        assert any(t["key"] == GPU_TAINT.key and (t["operator"] == "Exists" or t.get("value") == GPU_TAINT.value) for t in tolerations)
        (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert term["matchExpressions"] == [{"key": POOL_LABEL, "operator": "In", "values": ["rack"]}]
        (plugin,) = [c for c in pod["containers"] if c["name"] == "compute-domains"]
        assert {"name": "NVIDIA_DRIVER_ROOT", "value": "/"} in plugin["env"]
    assert not any(c["name"] == "gpus" for d in daemonsets for c in d["spec"]["template"]["spec"]["containers"])


def test_the_chart_refuses_gpu_allocation_beside_the_device_plugin(rack):
    stack, plans = rack
    values = cd.dra_driver_values(stack, plans)
    values["resources"]["gpus"]["enabled"] = True
    with pytest.raises(RenderError, match="cannot be deployed alongside the standard GPU device plugin"):
        render("dra-driver-nvidia-gpu", values, cd.CHART.release, cd.CHART.namespace, ("resource.k8s.io/v1",))
    forced = render("dra-driver-nvidia-gpu", {**values, "gpuResourcesEnabledOverride": True}, cd.CHART.release, cd.CHART.namespace,
                    ("resource.k8s.io/v1",))
    # What the landing check believes each setting registers is what the chart renders, both ways.
    assert {o["metadata"]["name"] for o in kind_of(forced, "DeviceClass")} == set(cd.served_device_classes(values))
    assert set(cd.GPU_CLASSES) <= set(cd.served_device_classes(values))


def test_gpupools_refuses_gpu_allocation_by_the_dra_driver():
    problems = cd.gpu_allocation_problems(True)
    assert [str(p) for p in problems] == [
        "error: gpuSoftware.draGpuAllocation: true: NVIDIA's DRA driver cannot allocate GPUs on nodes whose GPUs a device plugin serves "
        "(dra-driver-nvidia-gpu 0.4.1 templates/validation.yaml, until KEP-5004 is GA), and every gpupools pool's GPUs come from one; "
        "leave it false: the DRA driver serves ComputeDomains only; a pool takes its GPUs from it with sharing: {mode: dra} (a preview)"]
    assert cd.gpu_allocation_problems(False) == []


def test_a_stack_asking_for_dra_gpu_allocation_is_refused_in_one_line(tmp_path):
    from conftest import config_problems

    config = stack_config("aws", gpuSoftware={"draGpuAllocation": True})
    assert [p.path for p in config_problems(config)] == ["gpuSoftware.draGpuAllocation"]
    result = CliRunner().invoke(app, ["plan", "--config", str(write_stack(tmp_path, config))])
    assert result.exit_code == 2 and result.stderr.splitlines() == [str(cd.gpu_allocation_problems(True)[0])]
    assert validate_stack(stack_config("aws", gpuSoftware={"draGpuAllocation": False})).gpu_software.dra_gpu_allocation is False


# --------------------------------------------------------------------------------------------------------------------
# Kueue: the channel's device class mapped, its quota per team on the rack pool's flavor


def _manager_config(stack, plans) -> dict:
    (release,) = quota_plan(stack, plans).releases
    return yaml.safe_load(release.values["managerConfig"]["controllerManagerConfigYaml"])


def test_kueue_maps_the_channel_device_class_only_with_rack_pools(rack):
    stack, plans = rack
    resources = _manager_config(stack, plans)["resources"]
    assert resources == {"quotaCheckStrategy": "IgnoreUndeclared",
                         "deviceClassMappings": [{"name": cd.QUEUE_RESOURCE, "deviceClassNames": ["compute-domain-default-channel.nvidia.com"]}]}
    plain = [p for p in plans if p.name == "infer"]
    assert _manager_config(stack, plain)["resources"] == {"quotaCheckStrategy": "IgnoreUndeclared"}


def _crd_schema(path, version: str) -> dict:
    crd = yaml.safe_load(path.read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == version)


def test_team_queues_hold_channel_quota_on_the_rack_flavor(rack):
    from conftest import needs_reference

    stack, plans = rack
    objects = quota_plan(stack, plans).objects
    queues = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterQueue"}
    (group,) = queues["ml"]["spec"]["resourceGroups"]
    assert group["coveredResources"] == [cd.QUEUE_RESOURCE, "nvidia.com/gpu"]
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert quotas == {"rack": {cd.QUEUE_RESOURCE: 32, "nvidia.com/gpu": 32}, "infer": {cd.QUEUE_RESOURCE: 0, "nvidia.com/gpu": 2}}
    (web,) = queues["web"]["spec"]["resourceGroups"]
    assert web["coveredResources"] == ["nvidia.com/gpu"]  # no rack pool, no channel
    schema = _crd_schema(needs_reference() / "kueue" / "kueue.x-k8s.io_clusterqueues.yaml", "v1beta2")
    for queue in queues.values():
        jsonschema.validate(queue, schema)
        assert crd_rule_failures(queue, schema) == []


# --------------------------------------------------------------------------------------------------------------------
# The landing check follows the claim to its template, device class, driver and queue resource


def _gang(stack, plans, cluster=None):
    cluster = cluster or cluster_of(stack, plans)
    team = next(t for t in cluster.teams if t.team.name == "ml")
    rack_plan = next(p for p in cluster.plans if p.name == "rack")
    return land(cluster, team, rack_plan, "gang")


def test_a_compute_domain_job_lands_through_its_channel_claim(rack):
    stack, plans = rack
    verdicts = [v for v in landing_check(stack, plans) if v.pool == "rack" and v.shape == "gang"]
    assert [v.lands for v in verdicts] == [True]
    (claims,) = [s for s in verdicts[0].steps if s.name == "claims"]
    assert claims.ok and claims.detail == (f"{cd.CHANNEL_CLASS} counted as 2 x {cd.QUEUE_RESOURCE} on flavor rack (32 nominal)")
    # Jobs without claims have no such step.
    assert not any(s.name == "claims" for v in landing_check(stack, plans) if v.shape != "gang" for s in v.steps)


def test_without_the_mapping_the_job_does_not_land(rack, monkeypatch):
    stack, plans = rack
    monkeypatch.setattr(kueue, "device_class_mappings", lambda plans: [])
    verdict = _gang(stack, plans)
    assert not verdict.lands and verdict.failing.name == "claims"
    assert verdict.failing.detail.startswith(f"DeviceClass {cd.CHANNEL_CLASS} is not mapped in Kueue's deviceClassMappings")


def test_without_the_dra_driver_the_claim_is_never_allocated(rack, monkeypatch):
    stack, plans = rack
    monkeypatch.setattr(cd, "dra_driver_release", lambda stack, plans: None)
    verdict = _gang(stack, plans)
    assert not verdict.lands and verdict.failing.name == "claims"
    assert verdict.failing.detail.startswith(f"DeviceClass {cd.CHANNEL_CLASS} (ResourceClaimTemplate ")
    assert "no DRA driver the stack installs registers it" in verdict.failing.detail


def test_a_plugin_off_the_pool_or_a_quota_too_small_is_caught(rack):
    stack, plans = rack
    cluster = cluster_of(stack, plans)
    driver, _, tolerations = cluster.device_classes[cd.CHANNEL_CLASS]
    cluster.device_classes[cd.CHANNEL_CLASS] = (driver, frozenset({"infer"}), tolerations)
    assert "does not run on pool rack's nodes" in _gang(stack, plans, cluster).failing.detail
    cluster = cluster_of(stack, plans)
    cluster.device_classes[cd.CHANNEL_CLASS] = (driver, frozenset({"rack"}), [])
    assert "does not tolerate pool rack's taint nvidia.com/gpu" in _gang(stack, plans, cluster).failing.detail
    cluster = cluster_of(stack, plans)
    for queue in cluster.objects:
        if queue.get("kind") == "ClusterQueue":
            for group in queue["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    for r in flavor["resources"]:
                        if r["name"] == cd.QUEUE_RESOURCE:
                            r["nominalQuota"] = 1
    failing = _gang(stack, plans, cluster).failing
    assert failing.name == "claims" and failing.detail == (f"DeviceClass {cd.CHANNEL_CLASS} counts as {cd.QUEUE_RESOURCE}: the job asks "
                                                           f"for 2, ClusterQueue ml can reach 1 on flavor rack")


def test_claims_kueue_refuses_are_refused(rack):
    stack, plans = rack
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "rdma"},
                "spec": {"spec": {"devices": {"requests": [{"name": "nics", "exactly": {"deviceClassName": "mrdma.google.com",
                                                                                            "allocationMode": "All"}}]}}}}
    (problem,) = cd.claim_problems(template, "rdma")
    assert problem.path == "rdma.spec.spec.devices.requests[0].exactly.allocationMode" and "AllocationMode 'All' is not supported" in problem.message
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "ExactCount"
    assert cd.claim_problems(template, "rdma") == []
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    (problem,) = cd.claim_problems(template, "rdma")
    assert problem.path == "rdma.spec.spec.devices.requests[0].exactly.adminAccess" and "AdminAccess is not supported" in problem.message


# --------------------------------------------------------------------------------------------------------------------
# `gpupools workload --nodes N` on a rack pool: ComputeDomain, its channel template, the job in one clique


@pytest.fixture(scope="module")
def printed(rack, tmp_path_factory):
    path = write_stack(tmp_path_factory.mktemp("rack"), CONFIG, "rack-test")
    result = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "rack", "--nodes", "2", "--team", "ml", "--explain"])
    assert result.exit_code == 0, result.output
    return path, result.stdout


def test_workload_prints_a_compute_domain_and_a_job_claiming_its_channel_in_one_clique(printed):
    _, out = printed
    docs = [d for d in yaml.safe_load_all(out) if d]
    domain, job = docs[0], docs[-1]
    assert domain == {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
                      "metadata": {"name": job["metadata"]["name"], "namespace": "ml"},
                      "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": f"{job['metadata']['name']}-channel"}}}}
    pod = job["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "imex-channel", "resourceClaimTemplateName": f"{job['metadata']['name']}-channel"}]
    assert all(c["resources"]["claims"] == [{"name": "imex-channel"}] for c in pod["containers"])
    assert pod["affinity"]["podAffinity"] == {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {cd.CD_LABEL: job["metadata"]["name"]}}, "topologyKey": "nvidia.com/gpu.clique"}]}
    assert job["spec"]["template"]["metadata"]["labels"][cd.CD_LABEL] == job["metadata"]["name"]
    assert "#   ok   claims: compute-domain-default-channel.nvidia.com counted as 2 x" in out
    schema = _crd_schema(chart_dir("dra-driver-nvidia-gpu") / "crds" / "resource.nvidia.com_computedomains.yaml", "v1beta1")
    jsonschema.validate(domain, schema)
    assert crd_rule_failures(domain, schema) == []
    bad = {**domain, "spec": {**domain["spec"], "numNodes": -1}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_the_channel_template_shown_is_valid_resource_k8s_io_v1(printed):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    _, out = printed
    comment = [line[4:] for line in out.splitlines() if line.startswith("#   ") and not line.startswith("#   ok") and not line.startswith("#   FAIL")]
    template = yaml.safe_load("\n".join(comment))
    assert template["kind"] == "ResourceClaimTemplate" and template["apiVersion"] == "resource.k8s.io/v1"
    assert template["spec"]["spec"]["devices"]["requests"] == [{"name": "channel", "exactly": {"deviceClassName": cd.CHANNEL_CLASS}}]
    kubernetes_validate.validate(template, "1.34", strict=True)
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["class"] = cd.CHANNEL_CLASS  # strict: no unknown fields
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(template, "1.34", strict=True)


def test_more_nodes_than_one_nvlink_domain_is_refused(printed):
    path, _ = printed
    result = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "rack", "--nodes", "10"])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: --nodes: 10 nodes of 8 GPUs exceed one NVLink domain of pool 'rack' (72 GPUs, 9 nodes)")
    assert CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "rack", "--nodes", "9"]).exit_code == 0


def test_the_nccl_test_measures_the_rack_over_nvlink_with_an_arm64_image(printed):
    path, _ = printed
    result = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "rack", "--nccl-test", "--jobset"])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["kind"] for d in docs] == ["ComputeDomain", "JobSet"]
    pod = docs[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == load_catalog().nccl_images["nvlink"].image == "nvcr.io/nvidia/pytorch:25.06-py3"
    assert {"name": "NCCL_NVLS_ENABLE", "value": "1"} in container["env"] and "-x NCCL_NVLS_ENABLE" in container["command"][-1]
    assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == docs[0]["spec"]["channel"]["resourceClaimTemplate"]["name"]


def test_a_pool_that_is_not_rack_scale_prints_no_compute_domain(printed):
    path, _ = printed
    with pytest.raises(ConfigError):
        from gpupools.landing.jobs import multinode_job

        stack = validate_stack(CONFIG)
        multinode_job(stack, next(p for p in plan_pools(stack) if p.name == "infer"), 2)
    from gpupools.landing.jobs import rack_docs

    job = {"kind": "Job", "metadata": {"name": "x"}}
    infer = next(p for p in plan_pools(validate_stack(CONFIG)) if p.name == "infer")
    assert rack_docs(infer, [job]) == [job]


RDMA = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "rdma"},
        "spec": {"spec": {"devices": {"requests": [{"name": "nics", "exactly": {"deviceClassName": "mrdma.google.com",
                                                                            "allocationMode": "ExactCount", "count": 4}}]}}}}


def test_a_claim_kueue_refuses_is_refused_in_one_line(printed, tmp_path):
    path, _ = printed
    template = tmp_path / "rdma.yaml"
    template.write_text(yaml.safe_dump({**RDMA, "spec": {"spec": {"devices": {"requests": [
        {"name": "nics", "exactly": {"deviceClassName": "mrdma.google.com", "allocationMode": "All"}}]}}}}))
    result = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "rack", "--nodes", "2", "--claim-template", str(template)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "error: --claim-template.spec.spec.devices.requests[0].exactly.allocationMode: All: Kueue refuses claims for all matching "
        "devices (kueue v0.19.2 pkg/dra/claims.go: \"AllocationMode 'All' is not supported\"); use ExactCount with the count the pod needs")
    template.write_text("kind: Pod\n")
    result = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "rack", "--nodes", "2", "--claim-template", str(template)])
    assert result.exit_code == 2 and result.stderr.strip() == f"error: --claim-template: {template} is not a resource.k8s.io/v1 ResourceClaimTemplate"


def test_a_claim_no_installed_driver_serves_does_not_land(printed, tmp_path):
    path, _ = printed
    template = tmp_path / "rdma.yaml"
    template.write_text(yaml.safe_dump(RDMA))
    result = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "rack", "--nodes", "2", "--team", "ml", "--explain",
                                      "--claim-template", str(template)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# landing: DOES NOT LAND")
    assert ("#   FAIL claims: DeviceClass mrdma.google.com (ResourceClaimTemplate rdma): no DRA driver the stack installs registers it"
            in result.stdout)
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["kind"] for d in docs] == ["ComputeDomain", "ResourceClaimTemplate", "Service", "PodDisruptionBudget", "Job"]
    assert docs[1]["metadata"] == {"name": "rdma", "namespace": "ml"}
    pod = docs[-1]["spec"]["template"]["spec"]
    assert [c["resourceClaimTemplateName"] for c in pod["resourceClaims"]] == [f"{docs[-1]['metadata']['name']}-channel", "rdma"]
    assert pod["containers"][0]["resources"]["claims"] == [{"name": "imex-channel"}, {"name": "claim-rdma"}]


def test_pods_keep_to_a_clique_only_where_gpu_feature_discovery_labels_it(rack):
    stack, plans = rack
    plan = next(p for p in plans if p.name == "rack")
    assert plan.mechanism.installer == "gpu-operator" and cd.clique_labelled(plan)
    domain = cd.compute_domain("job", "ml")
    labelled = cd.with_channel({"spec": {"containers": [{"name": "c"}]}}, domain, (cd.CD_LABEL, "job"), cd.clique_labelled(plan))
    assert labelled["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == cd.CLIQUE_LABEL
    gke = validate_stack(stack_config("gcp"))
    (own,) = plan_pools(gke)
    assert own.mechanism.installer == "cloud" and not cd.clique_labelled(own)
    bare = cd.with_channel({"spec": {"containers": [{"name": "c"}]}}, domain, (cd.CD_LABEL, "job"), cd.clique_labelled(own))
    assert "affinity" not in bare["spec"] and bare["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == "job-channel"
    assert "placement alone" in cd.compute_domain_line(gke, _rack_plan(own))
    assert "stay in one clique (nvidia.com/gpu.clique" in cd.compute_domain_line(stack, plan)
