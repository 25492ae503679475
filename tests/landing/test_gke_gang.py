"""The landing check on GKE fabric pools: a two-node gang lands only where GKE registers the pod's networks on the node
and Google's NCCL plugin installer (and, for TCPX and TCPXO, the NRI device injector) runs there.

Each case takes one thing away from dev-gcp's A3 Mega pool and names the step and the thing that stops the gang.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from gpupools.landing import agents as node_agents
from gpupools.landing.check import cluster_of, land, landing_check
from gpupools.validation.stack import validate_stack

from tests.conftest import ROOT, stack_config

POOL = "pretrain"


def dev_gcp():
    return validate_stack(yaml.safe_load((ROOT / "stacks" / "Pulumi.dev-gcp.yaml").read_text())["config"])


@pytest.fixture
def cluster():
    return cluster_of(dev_gcp())


def gang(cluster):
    plan = next(p for p in cluster.plans if p.name == POOL)
    return land(cluster, None, plan, "gang")


def daemonset(cluster, name: str) -> dict:
    """The manifest the agent was read from, rebuilt from the plan (agents keep only the pod's scheduling fields)."""
    from gpupools.fabric import gpudirect

    _, daemonsets = gpudirect.gpudirect_objects(cluster.stack, cluster.fabrics)
    return copy.deepcopy(next(d for d in daemonsets if d["metadata"]["name"] == name))


def replace_agent(cluster, name: str, obj: dict) -> None:
    cluster.agents = [node_agents.daemonset_agent(obj) if a.name == name else a for a in cluster.agents]


def test_dev_gcp_has_a_gang_that_lands_on_its_a3_mega_pool(cluster):
    verdict = gang(cluster)
    assert verdict.lands, verdict.failing
    ready = next(s for s in verdict.steps if s.name == "ready")
    assert "8 networks registered by GKE multi-networking" in ready.detail and "nccl-tcpxo-installer, device-injector run there" in ready.detail
    shapes = [(v.pool, v.shape) for v in landing_check(cluster.stack) if v.pool == POOL]
    assert shapes == [(POOL, "unit"), (POOL, "node"), (POOL, "gang")]


def test_an_installer_that_does_not_tolerate_the_gpu_taint_stops_the_gang_at_ready(cluster):
    obj = daemonset(cluster, "nccl-tcpxo-installer")
    obj["spec"]["template"]["spec"]["tolerations"] = []
    replace_agent(cluster, "nccl-tcpxo-installer", obj)
    verdict = gang(cluster)
    assert not verdict.lands and verdict.failing.name == "ready"
    assert verdict.failing.detail.startswith("the pod relies on nccl-tcpxo-installer, which does not run on the node:")
    assert "nvidia.com/gpu" in verdict.failing.detail
    # One node's jobs need no GPUDirect, and still land.
    plan = next(p for p in cluster.plans if p.name == POOL)
    assert land(cluster, None, plan, "node").lands


def test_an_injector_that_selects_other_pools_stops_the_gang(cluster):
    obj = daemonset(cluster, "device-injector")
    terms = obj["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    terms[0]["matchExpressions"][0]["values"] = ["infer"]
    replace_agent(cluster, "device-injector", obj)
    verdict = gang(cluster)
    assert not verdict.lands and verdict.failing.name == "ready" and "device-injector" in verdict.failing.detail


def test_a_missing_network_object_stops_the_gang_naming_what_the_node_never_registers(cluster):
    network = next(o for o in cluster.objects if o.get("kind") == "Network" and o["metadata"]["name"] == "pretrain-vpc3")
    cluster.objects.remove(network)
    verdict = gang(cluster)
    assert not verdict.lands and verdict.failing.name == "ready"
    assert verdict.failing.detail.startswith("nothing on the node registers networking.gke.io.networks/pretrain-vpc3.IP, which the pod's "
                                             "networking.gke.io/interfaces needs")


def test_a_param_set_naming_a_subnet_the_nodes_have_no_nic_on_stops_the_gang(cluster):
    param = next(o for o in cluster.objects if o.get("kind") == "GKENetworkParamSet" and o["metadata"]["name"] == "pretrain-vpc1")
    param["spec"]["vpcSubnet"] = "someone-elses-subnet"
    verdict = gang(cluster)
    assert not verdict.lands and "networking.gke.io.networks/pretrain-vpc1.IP" in verdict.failing.detail


def test_pools_whose_driver_the_gpu_operator_installs_get_no_gang_shape():
    """Google's NCCL plugins need GKE's own driver (FabricPlan.configured is False), so there is no gang to follow."""
    stack = validate_stack(stack_config("gcp", pools=[{"name": POOL, "instanceType": "a3-megagpu-8g", "maxNodes": 2,
                                                       "zones": ["us-central1-a"]}], gpuSoftware={"installer": "gpu-operator"}))
    assert {v.shape for v in landing_check(stack)} == {"unit", "node"}


def test_a_team_gang_on_a_gke_fabric_pool_queues_and_lands():
    stack = validate_stack(stack_config("gcp", pools=[{"name": POOL, "instanceType": "a3-megagpu-8g", "maxNodes": 2, "zones": ["us-central1-a"]}],
                                        quotas="kueue", teams=[{"name": "ml", "gpus": 16}]))
    verdicts = {v.shape: v for v in landing_check(stack)}
    assert verdicts["gang"].lands, verdicts["gang"].failing
    assert verdicts["gang"].steps[0].name == "queue"
