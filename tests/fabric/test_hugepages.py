"""EFA huge pages: what a new node of an EFA pool registers, what Karpenter and cluster-autoscaler are told it has, and
what a multi-node Job asks for, all the same thing.

The upstream facts these tests encode:
- a Karpenter NodeClaim is initialized only once every resource its pods ask for is non-zero in the node's allocatable
  (kubernetes-sigs/karpenter v1.14.1 @ 6e7eab7a, pkg/controllers/nodeclaim/lifecycle/initialization.go lines 130-146,
  RequestedResourcesRegistered); a NodeOverlay changes only Karpenter's simulation ("actual node resources must be
  configured through other means", karpenter docs/concepts/nodeoverlays.md, Limitations);
- neither node image sets huge pages aside by itself: the EKS AL2023 NVIDIA AMI's EFA step runs `efa_installer.sh
  --minimal -y` and nothing else (awslabs/amazon-eks-ami v20260724 @ 81fec2e8,
  templates/al2023/provisioners/install-efa.sh lines 52-53), and Bottlerocket's EFA generator for
  settings.kernel.sysctl."vm/nr_hugepages" (bottlerocket-core-kit @ 22cee7be, sources/api/corndog/src/main.rs lines
  127-139, 110 pages per CPU) was dropped from its defaults (bottlerocket PR 4411; sources/shared-defaults/defaults.toml
  @ 1397d7a7 has none);
- the EKS user guide's EFA workers ask for hugepages-2Mi: 5120Mi, and nodes with the EFA driver pre-allocate 5128 pages
  of 2 MiB (awsdocs/amazon-eks-user-guide @ 4d52b4d0, latest/ug/ml/node-efa.adoc lines 55 and 259).
"""

from __future__ import annotations

import base64
import copy
import email
import shutil
import subprocess
import tomllib

import pytest

from conftest import plan_of, stack_config
from gpupools.pools.planning import plan_pools
from gpupools.validation.stack import validate_stack

NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_OVERLAY = "kubernetes:karpenter.sh/v1alpha1:NodeOverlay"


def aws_config(**keys) -> dict:
    config = stack_config("aws", **keys)
    config["aws:region"] = "us-east-1"
    return config


def efa_pool(**over) -> dict:
    return {"name": "train", "instanceType": "p5.48xlarge", "maxNodes": 4, "zones": ["us-east-1a"], **over}


def plan_for(pool: dict, **keys):
    (plan,) = plan_pools(validate_stack(aws_config(pools=[pool], **keys)))
    return plan


def hugepages_violations(plan) -> list[str]:
    from gpupools.cli.policycheck import run_policies
    from gpupools.policies.pack import by_name

    result = run_policies(plan, policies=[by_name()["node-overlay-hugepages-registered"]])
    return [v.message for v in result.violations]


@pytest.fixture(scope="module")
def efa_plans():
    """Karpenter stacks with an EFA pool on AL2023 and on Bottlerocket."""
    return {os: plan_of(aws_config(pools=[efa_pool(os=os)])) for os in ("al2023", "bottlerocket")}


def test_an_efa_node_class_sets_aside_the_huge_pages_its_node_overlay_advertises(efa_plans):
    """The node class's userData allocates the pages, before the kubelet starts; the overlay advertises exactly what it
    allocates, no more, so a NodeClaim whose multi-node pod asks for hugepages-2Mi gets initialized."""
    from gpupools.autoscaling.karpenter import hugepages_on_node
    from gpupools.clouds.aws import allocated_hugepages

    for os, planned in efa_plans.items():
        node_class = next(r.inputs for r in planned.of_type(NODE_CLASS) if "fabric" in r.inputs["metadata"]["name"])
        user_data = node_class["spec"]["userData"]
        assert allocated_hugepages(user_data) == 5128, os
        overlay = planned.get(NODE_OVERLAY, "nodeoverlay-gpupools-train").inputs
        assert overlay["spec"]["capacity"]["hugepages-2Mi"] == "10256Mi" == hugepages_on_node(plan_for(efa_pool(os=os))), os
        if os == "bottlerocket":
            # Bottlerocket: TOML beside the device plugin's settings; Karpenter keeps settings it does not model
            # (aws/karpenter-provider-aws v1.14.1 pkg/providers/amifamily/bootstrap/bottlerocketsettings.go lines 38-41,
            # 177-186: SettingsRaw is marshalled back whole).
            settings = tomllib.loads(user_data)["settings"]
            assert settings["kernel"]["sysctl"] == {"vm/nr_hugepages": "5128"}
            assert settings["kubelet-device-plugins"]["nvidia"]["device-sharing-strategy"] == "none"
        else:
            # AL2023: a MIME archive, which Karpenter merges with its own NodeConfig (concepts/nodeclasses.md, spec.userData,
            # AL2023); the script runs in cloud-init, before nodeadm-run.service starts the kubelet (After=cloud-final.service).
            message = email.message_from_string(user_data)
            assert message.is_multipart()
            # The NodeConfig (fast image pull; Karpenter adds RAID0 itself), then the huge page script.
            config, part = message.get_payload()
            assert config.get_content_type() == "application/node.eks.aws" and "FastImagePull: true" in config.get_payload()
            assert part.get_content_type() == "text/x-shellscript"
            script = part.get_payload()
            assert "sysctl -w vm.nr_hugepages=5128" in script and "/etc/sysctl.d/" in script
            if shutil.which("bash"):
                assert subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True).returncode == 0


def test_the_node_group_path_sets_aside_what_cluster_autoscaler_is_told():
    """Managed node groups (cluster-autoscaler): the launch template allocates what the ASG's node-template tag says."""
    from gpupools.clouds.aws import allocated_hugepages

    planned = plan_of(aws_config(autoscaler="cluster-autoscaler", pools=[efa_pool(instanceType="p4d.24xlarge", os="bottlerocket"),
                                                                        efa_pool(name="p5", zones=["us-east-1b"])]))
    for pool in ("train", "p5"):
        template = planned.get("aws:ec2/launchTemplate:LaunchTemplate", f"{pool}-nodes").inputs
        pages = allocated_hugepages(base64.b64decode(template["userData"]).decode())
        tags = {t.inputs["tag"]["key"]: t.inputs["tag"]["value"] for t in planned.of_type("aws:autoscaling/tag:Tag") if t.name.startswith(f"{pool}-")}
        assert tags["k8s.io/cluster-autoscaler/node-template/resources/hugepages-2Mi"] == f"{pages * 2}Mi" == "10256Mi", pool
    al2023 = base64.b64decode(planned.get("aws:ec2/launchTemplate:LaunchTemplate", "p5-nodes").inputs["userData"]).decode()
    kinds = [p.get_content_type() for p in email.message_from_string(al2023).get_payload()]
    assert kinds == ["application/node.eks.aws", "text/x-shellscript"]  # RAID0 NodeConfig, then the huge pages


def test_the_multi_node_job_asks_for_no_more_than_the_node_registers():
    from gpupools.autoscaling.karpenter import hugepages_on_node
    from gpupools.landing.jobs import multinode_job

    stack = validate_stack(aws_config(pools=[efa_pool()]))
    (plan,) = plan_pools(stack)
    limits = multinode_job(stack, plan, 2)[1]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["hugepages-2Mi"] == "5120Mi" and hugepages_on_node(plan) == "10256Mi"


def test_pools_without_efa_register_no_huge_pages_and_their_overlays_advertise_none():
    from gpupools.autoscaling.karpenter import hugepages_on_node, node_overlay

    for pool in ({"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2},
                 efa_pool(fabric="none"),
                 efa_pool(zones=None)):  # fabric auto needs one zone
        plan = plan_for(pool)
        assert hugepages_on_node(plan) is None, pool
        assert "hugepages-2Mi" not in ((node_overlay(plan) or {}).get("spec", {}).get("capacity", {})), pool


def test_without_the_allocation_nothing_advertises_or_asks_for_huge_pages(monkeypatch):
    """Negative: were the node class to set no pages aside, hugepages_on_node says so, and neither the overlay nor the
    Job claims any."""
    from gpupools.autoscaling import karpenter
    from gpupools.landing.jobs import multinode_job

    monkeypatch.setattr(karpenter, "node_hugepages", lambda kind: 0)
    stack = validate_stack(aws_config(pools=[efa_pool()]))
    (plan,) = plan_pools(stack)
    fabric = __import__("gpupools.fabric.plan", fromlist=["plan_fabric"]).plan_fabric(stack, plan)
    assert karpenter.hugepages_on_node(plan) is None
    assert karpenter.node_overlay(plan, fabric) is None
    limits = multinode_job(stack, plan, 2)[1]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert not any(k.startswith("hugepages-") for k in limits)


def test_the_policy_notices_an_overlay_advertising_pages_the_node_class_does_not_set_aside(efa_plans):
    """Negative, on planned resources: strip the allocation from the EC2NodeClass and node-overlay-hugepages-registered
    reports the overlay; a node class on a custom AMI (no alias) is left alone, it may allocate them itself."""
    for os, planned in efa_plans.items():
        assert hugepages_violations(planned) == [], os
        stripped = copy.deepcopy(planned)
        node_class = next(r for r in stripped.of_type(NODE_CLASS) if "fabric" in r.inputs["metadata"]["name"])
        if os == "bottlerocket":
            node_class.inputs["spec"]["userData"] = node_class.inputs["spec"]["userData"].split("[settings.kernel.sysctl]")[0]
        else:
            del node_class.inputs["spec"]["userData"]
        (message,) = hugepages_violations(stripped)
        assert "advertises hugepages-2Mi 10256Mi" in message and "sets aside 0Mi at boot" in message, os
        custom = copy.deepcopy(stripped)
        next(r for r in custom.of_type(NODE_CLASS) if "fabric" in r.inputs["metadata"]["name"]).inputs["spec"]["amiSelectorTerms"] = [
            {"id": "ami-0123456789abcdef0"}]
        assert hugepages_violations(custom) == [], os
    fewer = copy.deepcopy(efa_plans["al2023"])
    node_class = next(r for r in fewer.of_type(NODE_CLASS) if "fabric" in r.inputs["metadata"]["name"])
    node_class.inputs["spec"]["userData"] = node_class.inputs["spec"]["userData"].replace("5128", "1000")
    assert ["sets aside 2000Mi at boot" in m for m in hugepages_violations(fewer)] == [True]
