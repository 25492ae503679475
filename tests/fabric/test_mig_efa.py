"""MIG and EFA on one EKS pool: `fabric: on` beside MIG slices where the instance type has EFA, time-slicing and MPS
still refused with the reason, and every job of the pool still lands, on Karpenter and on cluster-autoscaler.

The upstream facts: GPUDirect RDMA is supported from MIG GPU instances and NCCL is not supported with MIG (NVIDIA MIG
user guide, Deployment Considerations, "Application Considerations"); the EFA device plugin advertises a node's
interfaces by count whatever the GPUs are split into (aws/eks-charts stable/aws-efa-k8s-device-plugin).
"""

from __future__ import annotations

import pytest
import yaml

from conftest import crd_rule_failures, needs_reference, plan_of, stack_config
from gpupools.autoscaling.scaleup import scale_ups
from gpupools.clouds import aws
from gpupools.fabric.plan import fabric_off_reason, plan_fabrics
from gpupools.landing.check import landing_check
from gpupools.pools.planning import plan_pools
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_OVERLAY = "kubernetes:karpenter.sh/v1alpha1:NodeOverlay"


def mig_efa(**over) -> dict:
    return {"name": "train", "instanceType": "p4de.24xlarge", "maxNodes": 2, "zones": ["us-east-1a"], "fabric": "on",
            "sharing": {"mode": "mig", "migProfile": "3g.40gb"}, **over}


def config(pool: dict, **keys) -> dict:
    out = stack_config("aws", pools=[pool], teams=[{"name": "research", "gpus": {pool["name"]: 16}}], **keys)
    out["aws:region"] = "us-east-1"
    return out


def errors(raw: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate_stack(raw)
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize("os", ["al2023", "bottlerocket"])
@pytest.mark.parametrize("autoscaler", ["karpenter", "cluster-autoscaler"])
def test_mig_slices_with_efa_scale_from_zero_and_every_job_lands(autoscaler, os):
    stack = validate_stack(config(mig_efa(os=os), autoscaler=autoscaler))
    plans = plan_pools(stack)
    (fabric,) = plan_fabrics(stack, plans).values()
    assert (fabric.kind, fabric.devices, fabric.resource_count) == ("efa", 4, 4)
    (verdict,) = scale_ups(stack, plans)
    assert verdict.from_zero, verdict.detail
    landed = {(v.shape, v.lands, v.failing.detail if v.failing else "") for v in landing_check(stack, plans)}
    assert landed == {("unit", True, ""), ("node", True, ""), ("gang", True, "")}


def test_the_karpenter_objects_carry_both_and_are_valid_against_the_crds():
    jsonschema = pytest.importorskip("jsonschema")
    ref = needs_reference()
    planned = plan_of(config(mig_efa()))
    (node_class,) = [r.inputs for r in planned.of_type(NODE_CLASS)]
    efa_only = [i for i in node_class["spec"]["networkInterfaces"] if i["interfaceType"] == "efa-only"]
    assert len(efa_only) == 4 and node_class["spec"]["placementGroupSelector"] == {"name": "ml-test-train"}
    overlay = planned.get(NODE_OVERLAY, "nodeoverlay-gpupools-train").inputs
    assert overlay["spec"]["capacity"] == {"nvidia.com/mig-3g.40gb": "16", "nvidia.com/gpu": "0", "hugepages-2Mi": "10256Mi"}
    for filename, version, obj in (("karpenter.k8s.aws_ec2nodeclasses.yaml", "v1", node_class), ("karpenter.sh_nodeoverlays.yaml", "v1alpha1", overlay)):
        crd = yaml.safe_load((ref / "karpenter" / filename).read_text())
        schema = next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == version)
        jsonschema.validate({k: obj[k] for k in ("apiVersion", "kind", "metadata", "spec")}, schema)
    spec_schema = next(v["schema"]["openAPIV3Schema"] for v in yaml.safe_load(
        (ref / "karpenter" / "karpenter.k8s.aws_ec2nodeclasses.yaml").read_text())["spec"]["versions"])["properties"]["spec"]["properties"]
    assert crd_rule_failures(node_class["spec"]["networkInterfaces"], spec_schema["networkInterfaces"], "networkInterfaces") == []


def test_the_multi_node_job_on_mig_slices_reaches_efa_without_nccl():
    from gpupools.landing.jobs import multinode_job

    stack = validate_stack(config(mig_efa()))
    (plan,) = plan_pools(stack)
    container = multinode_job(stack, plan, 2)[1]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/mig-3g.40gb": 8, "vpc.amazonaws.com/efa": 4, "memory": "64Gi", "hugepages-2Mi": "5120Mi"}
    assert container["command"][:3] == ["fi_info", "-p", "efa"] and "torchrun" not in container["command"]
    (whole,) = plan_pools(validate_stack(config(mig_efa(sharing={"mode": "none"}))))
    assert multinode_job(validate_stack(config(mig_efa(sharing={"mode": "none"}))), whole, 2)[1]["spec"]["template"]["spec"]["containers"][0]["command"][0] == "torchrun"


def test_auto_still_gives_mig_pools_no_fabric_and_says_how_to_have_one():
    stack = validate_stack(config(mig_efa(fabric="auto")))
    (plan,) = plan_pools(stack)
    assert plan_fabrics(stack, [plan]) == {}
    assert fabric_off_reason(aws, plan.pool, plan.sharing) == "GPUs shared by mig; fabric: on puts EFA beside the MIG slices"


@pytest.mark.parametrize("sharing", [{"mode": "time-slicing", "replicas": 4}, {"mode": "mps", "replicas": 2}])
def test_time_slicing_and_mps_with_a_fabric_are_refused_with_the_reason(sharing):
    (message,) = errors(config(mig_efa(sharing=sharing)))
    assert message.startswith("error: pools[0].fabric: a fabric job needs a whole GPU or a MIG slice of its own, and "
                              f"{sharing['mode']} shares each GPU between pods at the same time; use fabric: none, or sharing mode none or mig")


def test_clouds_that_put_no_fabric_beside_mig_refuse_it():
    raw = stack_config("gcp", pools=[{"name": "train", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "fabric": "on",
                                      "sharing": {"mode": "mig", "migProfile": "1g.10gb"}}])
    assert any(m.startswith("error: pools[0].fabric: gpupools puts no GPUDirect beside MIG slices on GKE") for m in errors(raw))
