"""Every name gpupools generates from a pool name fits the API that takes it: Karpenter's NodePool, NodeOverlay and
EC2NodeClass names become node label values (at most 63 characters), managed node groups take at most 63."""

from __future__ import annotations

import pytest

from conftest import plan_of, stack_config
from gpupools.autoscaling import karpenter
from gpupools.stack.config import LABEL_VALUE
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

KARPENTER_KINDS = ("kubernetes:karpenter.sh/v1:NodePool", "kubernetes:karpenter.sh/v1alpha1:NodeOverlay",
                   "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
ODCR = {"reservation": {"id": "cr-0fedcba9876543210", "zones": ["eu-central-1b"], "nodes": 2}}


def long_name(n: int) -> str:
    return ("p" + "0123456789abcdefghij" * 4)[:n - 1] + "z"


def fabric_reserved_pool(name: str, reservation: str = "cr-0fedcba9876543210", **fields) -> dict:
    # a fabric pool on its own reservation: its node class name carries the pool name twice (fabric-, reserved-)
    own = {"reservation": {**ODCR["reservation"], "id": reservation}}
    return {"name": name, "instanceType": "p4d.24xlarge", "maxNodes": 2, "zones": ["eu-central-1b"], "capacity": [own, "on-demand"], **fields}


def test_a_karpenter_pool_name_at_the_limit_gives_names_nodes_can_be_labelled_with():
    name = long_name(54)
    assert len(name) == 54
    plan = plan_of(stack_config("aws", pools=[fabric_reserved_pool(name), fabric_reserved_pool("short", "cr-0aaaaaaaaaaaaaaaa")]))
    names = [r.inputs["metadata"]["name"] for kind in KARPENTER_KINDS for r in plan.of_type(kind)]
    assert any(name in n for n in names)
    for n in names:
        assert len(n) <= 63 and LABEL_VALUE.match(n), n
    # the NodePools still point at node classes that exist
    classes = {r.inputs["metadata"]["name"] for r in plan.of_type(KARPENTER_KINDS[2])}
    refs = {r.inputs["spec"]["template"]["spec"]["nodeClassRef"]["name"] for r in plan.of_type(KARPENTER_KINDS[0])}
    assert refs <= classes and len(classes) >= 2


def test_a_karpenter_pool_name_one_past_the_limit_is_one_line_naming_the_field():
    with pytest.raises(ConfigError) as caught:
        validate_stack(stack_config("aws", pools=[fabric_reserved_pool(long_name(55))]))
    (problem,) = [p for p in caught.value.problems if p.path == "pools[0].name"]
    assert "at most 54" in problem.message and "karpenter.sh/nodepool" in problem.message and "\n" not in str(problem)


def test_managed_node_groups_take_a_pool_name_of_63():
    name = long_name(63)
    plan = plan_of(stack_config("aws", autoscaler="cluster-autoscaler", cluster={"name": "ml", "create": False},
                                pools=[{"name": name, "instanceType": "g5.2xlarge", "maxNodes": 2}]))
    groups = [r.inputs["nodeGroupName"] for r in plan.of_type("aws:eks/nodeGroup:NodeGroup")]
    assert name in groups and all(len(g) <= 63 for g in groups)


def test_long_node_class_names_are_shortened_stably_and_stay_distinct():
    a, b = "gpupools-al2023-fabric-" + "x" * 60 + "-a", "gpupools-al2023-fabric-" + "x" * 60 + "-b"
    assert karpenter.short_name(a) == karpenter.short_name(a)
    assert karpenter.short_name(a) != karpenter.short_name(b)
    for n in (a, b, "y" * 64):
        short = karpenter.short_name(n)
        assert len(short) == 63 and LABEL_VALUE.match(short), short
    exactly = "z" * 63
    assert karpenter.short_name(exactly) == exactly


@pytest.mark.parametrize("cloud, instance, limit", [("gcp", "a3-highgpu-8g", 40), ("azure", "Standard_NC24ads_A100_v4", 12)])
def test_gke_and_aks_pool_names_at_their_limit_pass_and_one_past_is_refused(cloud, instance, limit):
    at = long_name(limit) if cloud == "gcp" else "p" + "1" * (limit - 1)
    validate_stack(stack_config(cloud, pools=[{"name": at, "instanceType": instance, "maxNodes": 1}]))
    with pytest.raises(ConfigError) as caught:
        validate_stack(stack_config(cloud, pools=[{"name": at + "2", "instanceType": instance, "maxNodes": 1}]))
    (problem,) = [p for p in caught.value.problems if p.path == "pools[0].name"]
    assert f"{limit}" in problem.message
