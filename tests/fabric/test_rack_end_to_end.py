"""The example rack-scale stacks end to end: `gpupools workload --nodes 2` on dev-aws-gb200 (EKS, P6e-GB200) and dev-gcp-a4x
(GKE, A4X) prints a ComputeDomain and a job claiming its IMEX channel, objects that validate against the pinned
ComputeDomain CRD (tests/charts/dra-driver-nvidia-gpu/crds, kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1) and Kubernetes'
own schemas (resource.k8s.io/v1 for the channel's template); Kueue admits it through the channel's device class mapping,
and without that mapping the landing check says it never runs.

Each example stack is loaded, planned and landing-checked once for the module (`example`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from charts.chartrender import chart_dir
from conftest import crd_rule_failures, needs_reference
from gpupools.cli.main import app
from gpupools.fabric import computedomain as cd
from gpupools.fabric.plan import NVLINK, job_fabric, nvlink_fabric, plan_fabric
from gpupools.landing.check import cluster_of, land
from gpupools.landing.jobs import multinode_problems
from gpupools.pools.planning import plan_pools
from gpupools.queues import kueue
from gpupools.stack.values import read_stack_file
from gpupools.validation.stack import validate_stack

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
STACKS = {"dev-aws-gb200": "gb200", "dev-gcp-a4x": "a4x"}
TEAM = "research"
K8S = {"dev-aws-gb200": "1.36", "dev-gcp-a4x": "1.35"}  # the stacks' kubernetesVersion


def _docs(out: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(out) if d]


def _schema(path: Path, kind_version: str) -> dict:
    crd = yaml.safe_load(path.read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == kind_version)


@pytest.fixture(scope="module", params=sorted(STACKS))
def example(request):
    """(name, pool, stack, plans, cluster, printed output of `workload --nodes 2 --team research --explain`)."""
    name = request.param
    stack = validate_stack(read_stack_file(ROOT / "stacks" / f"Pulumi.{name}.yaml"))
    plans = plan_pools(stack)
    result = runner.invoke(app, ["workload", "--stack", name, "--pool", STACKS[name], "--nodes", "2", "--team", TEAM, "--explain"])
    assert result.exit_code == 0, result.output
    return name, STACKS[name], stack, plans, cluster_of(stack, plans), result.stdout


def test_workload_prints_a_compute_domain_the_pinned_crd_accepts(example):
    name, pool, *_, out = example
    docs = _docs(out)
    assert [d["kind"] for d in docs] == ["ComputeDomain", "Service", "PodDisruptionBudget", "Job"]
    domain, job = docs[0], docs[-1]
    job_name = f"multinode-{pool}"
    assert domain == {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
                      "metadata": {"name": job_name, "namespace": TEAM},
                      "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": f"{job_name}-channel"}}}}
    schema = _schema(chart_dir("dra-driver-nvidia-gpu") / "crds" / "resource.nvidia.com_computedomains.yaml", "v1beta1")
    jsonschema.validate(domain, schema)
    assert crd_rule_failures(domain, schema) == []
    with pytest.raises(jsonschema.ValidationError):  # the schema is strict enough to catch a wrong field
        jsonschema.validate({**domain, "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {}}}}, schema)


def test_the_job_claims_the_channel_on_every_pod_and_validates(example):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    name, pool, stack, plans, _, out = example
    docs = _docs(out)
    for doc in docs[1:]:
        kubernetes_validate.validate(doc, K8S[name], strict=True)
    job = docs[-1]
    assert job["metadata"]["namespace"] == TEAM and job["spec"]["suspend"] is True
    assert (job["spec"]["completions"], job["spec"]["parallelism"], job["spec"]["completionMode"]) == (2, 2, "Indexed")
    pod = job["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "imex-channel", "resourceClaimTemplateName": f"multinode-{pool}-channel"}]
    (container,) = pod["containers"]
    # Every GPU of the node from the device plugin, the channel from the DRA driver; nothing of a cloud fabric (no EFA, no NICs).
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 4}, "claims": [{"name": "imex-channel"}]}
    plan = next(p for p in plans if p.name == pool)
    affinity = pod.get("affinity", {}).get("podAffinity")
    if cd.clique_labelled(plan):  # EKS: the GPU Operator's GPU Feature Discovery labels the clique
        assert affinity == {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {cd.CD_LABEL: f"multinode-{pool}"}}, "topologyKey": cd.CLIQUE_LABEL}]}
    else:  # GKE's device plugin runs no GFD: no affinity no node could meet
        assert affinity is None
    assert name == "dev-aws-gb200" or {"key": "kubernetes.io/arch", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]


def test_the_channel_template_is_resource_k8s_io_v1(example):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    name, pool, *_, out = example
    shown = [line[4:] for line in out.splitlines() if line.startswith("#   ") and not line.startswith(("#   ok", "#   FAIL"))]
    template = yaml.safe_load("\n".join(shown))
    assert template["metadata"] == {"name": f"multinode-{pool}-channel", "namespace": TEAM}
    kubernetes_validate.validate(template, K8S[name], strict=True)


def test_kueue_admits_it_through_the_pinned_channel_mapping_and_it_lands(example):
    name, pool, _, _, cluster, out = example
    assert out.startswith(f"# landing: lands on flavor {pool} (2 pods, each 4 x nvidia.com/gpu)\n")
    assert (f"#   ok   claims: {cd.CHANNEL_CLASS} counted as 2 x {cd.QUEUE_RESOURCE} on flavor {pool} (72 nominal)") in out
    assert _kueue_config(cluster)["resources"]["deviceClassMappings"] == [
        {"name": cd.QUEUE_RESOURCE, "deviceClassNames": [cd.CHANNEL_CLASS]}]
    assert cluster.class_mappings == _kueue_config(cluster)["resources"]["deviceClassMappings"]
    (queue,) = [o for o in cluster.objects if o.get("kind") == "ClusterQueue" and o["metadata"]["name"] == TEAM]
    schema = _schema(needs_reference() / "kueue" / "kueue.x-k8s.io_clusterqueues.yaml", "v1beta2")
    jsonschema.validate(queue, schema)
    (group,) = queue["spec"]["resourceGroups"]
    assert cd.QUEUE_RESOURCE in group["coveredResources"]
    (flavor,) = group["flavors"]
    assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]} == {cd.QUEUE_RESOURCE: 72, "nvidia.com/gpu": 72}


def _kueue_config(cluster) -> dict:
    """Kueue's own configuration, as the release the stack installs carries it (kueue v0.19.2 chart managerConfig)."""
    release = kueue.release(kueue.device_class_mappings(cluster.plans))
    return yaml.safe_load(release.values["managerConfig"]["controllerManagerConfigYaml"])


def _gang(cluster, pool):
    team = next(t for t in cluster.teams if t.team.name == TEAM)
    return land(cluster, team, next(p for p in cluster.plans if p.name == pool), "gang")


def test_without_the_device_class_mapping_the_verdict_turns_false(example):
    _, pool, _, _, cluster, _ = example
    assert _gang(cluster, pool).lands
    config = _kueue_config(cluster)
    config["resources"]["deviceClassMappings"] = [m for m in config["resources"]["deviceClassMappings"]
                                                  if cd.CHANNEL_CLASS not in m["deviceClassNames"]]
    unmapped = dataclasses.replace(cluster, class_mappings=config["resources"]["deviceClassMappings"])
    verdict = _gang(unmapped, pool)
    assert not verdict.lands and verdict.failing.name == "claims"
    assert verdict.failing.detail.startswith(f"DeviceClass {cd.CHANNEL_CLASS} is not mapped in Kueue's deviceClassMappings")


def test_the_landing_check_follows_a_gang_on_the_rack_pool(example):
    _, pool, _, _, cluster, _ = example
    assert pool in cluster.fabrics and cluster.fabrics[pool].kind == NVLINK


def test_jobset_and_nccl_test_work_up_to_one_nvlink_domain_and_more_is_refused(example):
    name, pool, stack, plans, *_ = example
    jobset = runner.invoke(app, ["workload", "--stack", name, "--pool", pool, "--nodes", "2", "--jobset", "--team", TEAM, "--explain"])
    assert jobset.exit_code == 0, jobset.output
    assert jobset.stdout.startswith(f"# landing: lands on flavor {pool} ")
    assert [d["kind"] for d in _docs(jobset.stdout)] == ["ComputeDomain", "PodDisruptionBudget", "JobSet"]
    nccl = runner.invoke(app, ["workload", "--stack", name, "--pool", pool, "--nccl-test"])
    assert nccl.exit_code == 0, nccl.output
    domain, _, job = _docs(nccl.stdout)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert (domain["kind"], container["image"]) == ("ComputeDomain", "nvcr.io/nvidia/pytorch:25.06-py3")
    assert {"name": "NCCL_NVLS_ENABLE", "value": "1"} in container["env"]
    assert runner.invoke(app, ["workload", "--stack", name, "--pool", pool, "--nodes", "18"]).exit_code == 0
    more = runner.invoke(app, ["workload", "--stack", name, "--pool", pool, "--nodes", "19"])
    assert more.exit_code == 2 and more.stderr == f"error: --nodes: 19 exceeds pool '{pool}''s maxNodes (18)\n"
    # With maxNodes above one domain, the NVLink domain is the limit.
    plan = next(p for p in plans if p.name == pool)
    wide = dataclasses.replace(plan, pool=plan.pool.model_copy(update={"max_nodes": 36}))
    (problem,) = multinode_problems(stack, wide, 19)
    assert problem.message == f"19 nodes of 4 GPUs exceed one NVLink domain of pool '{pool}' (72 GPUs, 18 nodes)"
    assert multinode_problems(stack, wide, 18) == []


def test_nvlink_is_the_fabric_of_rack_pools_only():
    config = read_stack_file(ROOT / "stacks" / "Pulumi.dev-aws-gb200.yaml")
    config["gpupools:pools"] += [{"name": "train", "instanceType": "p5.48xlarge", "maxNodes": 2, "zones": ["us-east-1a"]},
                                 {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}]
    eks = validate_stack(config)
    rack, train, infer = plan_pools(eks)
    fabric = nvlink_fabric(eks, rack)
    assert (fabric.kind, fabric.resource, fabric.levels, fabric.configured, fabric.zone) == (NVLINK, None, (), True, "us-east-1a")
    assert job_fabric(eks, rack) == fabric and plan_fabric(eks, rack) is None
    # Other pools keep the cloud's fabric, or none.
    assert nvlink_fabric(eks, train) is None and job_fabric(eks, train) == plan_fabric(eks, train) and job_fabric(eks, train).kind == "efa"
    assert job_fabric(eks, infer) is None
    (problem,) = multinode_problems(eks, infer, 2)
    assert problem.message.startswith("pool 'infer' has no fabric between nodes")
    shared = dataclasses.replace(rack, sharing=rack.sharing.model_copy(update={"mode": "time-slicing"}))
    assert nvlink_fabric(eks, shared) is None  # a fabric job needs whole GPUs


def test_eks_says_no_gpu_health_reaches_repair_on_arm64_hosts():
    from gpupools.clouds.aws.health import repair_facts

    config = read_stack_file(ROOT / "stacks" / "Pulumi.dev-aws-gb200.yaml")
    config["gpupools:pools"] += [{"name": "train", "instanceType": "p5.48xlarge", "maxNodes": 2, "zones": ["us-east-1a"]}]
    rack, train = plan_pools(validate_stack(config))
    detects, then = repair_facts(rack, "cluster-autoscaler")
    assert detects.startswith("nothing sets a GPU condition: eks-node-monitoring-agent 1.7.0 turns its NVIDIA monitor off on arm64 hosts")
    assert then.endswith("a broken GPU waits for someone to replace the node")
    detects, then = repair_facts(train, "cluster-autoscaler")  # amd64: the agent's DCGM checks and the GPU overrides
    assert detects.startswith("eks-node-monitoring-agent (DCGM health, XID") and then.startswith("EKS node repair: XID 79")


def test_the_rack_scale_page_shows_the_examples_real_output(example):
    """docs/rack-scale.md, "A job end to end": its excerpt is `workload`'s own output on dev-aws-gb200, line for line."""
    name, *_, out = example
    if name != "dev-aws-gb200":
        pytest.skip("the page shows the EKS example")
    page = (ROOT / "docs" / "rack-scale.md").read_text()
    section = page[page.index("## A job end to end"):]
    block = section[section.index("```yaml\n") + len("```yaml\n"):]
    block = block[:block.index("```")]
    printed = out.splitlines()
    missing = [line for line in block.splitlines() if line != "---" and line not in printed]
    assert not missing, missing
    lines = [line for line in block.splitlines() if line.startswith("#")]
    assert lines == printed[:len(lines)]  # the verdict and the template comment, whole and in order
    assert "error: --nodes: 19 exceeds pool 'gb200''s maxNodes (18)" in section


def test_cluster_autoscaler_starts_no_node_from_zero_for_a_compute_domain_job(example):
    """cluster-autoscaler 1.35 allocates a pod's claims against the devices of the node it would add; AWS's picture of an
    empty node group has none, a group with a ready node lends that node's. dev-aws-gb200 keeps one node for it."""
    name, pool, stack, plans, cluster, _ = example
    if name != "dev-aws-gb200":
        pytest.skip("GKE's A4X pool is a fixed node count")
    plan = next(p for p in cluster.plans if p.name == pool)
    assert plan.pool.min_nodes == 1
    (node,) = [s for s in _gang(cluster, pool).steps if s.name == "node"]
    assert node.ok and node.detail.startswith("cluster-autoscaler adds nodes from the picture of the 1 the pool keeps")
    config = read_stack_file(ROOT / "stacks" / f"Pulumi.{name}.yaml")
    config["gpupools:pools"][0]["minNodes"] = 0
    at_zero = cluster_of(validate_stack(config))
    team = next(t for t in at_zero.teams if t.team.name == TEAM)
    empty = next(p for p in at_zero.plans if p.name == pool)
    verdict = land(at_zero, team, empty, "gang")
    assert not verdict.lands and verdict.failing.name == "node"
    assert "cluster-autoscaler starts no node from zero for a pod with ResourceClaims" in verdict.failing.detail
    # A job without claims on the same empty group still starts a node from zero.
    assert land(at_zero, team, empty, "node").lands


def test_a_rack_capacity_block_pool_may_keep_nodes_and_others_may_not():
    from conftest import config_problems

    config = read_stack_file(ROOT / "stacks" / "Pulumi.dev-aws-gb200.yaml")
    assert validate_stack(config).pool("gb200").min_nodes == 1
    config["gpupools:pools"] += [{"name": "train", "instanceType": "p5.48xlarge", "minNodes": 1, "maxNodes": 2,
                                  "capacity": [{"reservation": {"id": "cr-0123456789abcdef1", "kind": "capacity-block",
                                                                "zones": ["us-east-1a"], "nodes": 2}}]}]
    (problem,) = config_problems(config)
    assert problem.path == "pools[1].minNodes" and "Capacity Block runs only between" in problem.message
