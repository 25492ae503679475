"""Every pool scales from zero: the scale-up check per cloud x sharing mode x installer x autoscaler, the
Karpenter and cluster-autoscaler objects against their pinned upstream schemas and chart values, and bad input."""

from __future__ import annotations

import json
from datetime import date

import pytest
import yaml

from conftest import has_path, needs_reference, plan_of, stack_config, value_paths
from gpupools.autoscaling.choice import NodeTemplate, decide, tolerates, why_not
from gpupools.stack.errors import ConfigError
from gpupools.core.pools import GPU_TAINT, Taint
from gpupools.pools.planning import plan_pools
from gpupools.autoscaling.scaleup import scale_ups
from gpupools.validation.stack import validate_stack

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_OVERLAY = "kubernetes:karpenter.sh/v1alpha1:NodeOverlay"
RELEASE = "kubernetes:helm.sh/v3:Release"
ASG_TAG = "aws:autoscaling/tag:Tag"

SHARING = {
    "none": None,
    "time-slicing": {"mode": "time-slicing", "replicas": 4},
    "mps": {"mode": "mps", "replicas": 2},
    "mig": {"mode": "mig", "migProfile": "1g.10gb"},
}
# A MIG-capable instance per cloud (A100 80 GB), and one without MIG for the other modes.
MIG_INSTANCE = {"aws": "p4de.24xlarge", "azure": "Standard_NC24ads_A100_v4", "gcp": "a2-ultragpu-1g"}
PLAIN_INSTANCE = {"aws": "g5.2xlarge", "azure": "Standard_NC8as_T4_v3", "gcp": "g2-standard-8"}


def one_pool(cloud: str, mode: str, os: str | None = None, **keys) -> dict:
    pool = {"name": "p", "instanceType": (MIG_INSTANCE if mode == "mig" else PLAIN_INSTANCE)[cloud], "maxNodes": 3}
    if SHARING[mode]:
        pool["sharing"] = SHARING[mode]
    if os:
        pool["os"] = os
    return stack_config(cloud, pools=[pool], **keys)


def verdict(config: dict):
    stack = validate_stack(config)
    (only,) = scale_ups(stack, plan_pools(stack))
    return only


# --------------------------------------------------------------------------------------------------------------------
# The matrix: which combinations wake from zero, and which are refused at validation


SCALES = [
    # cloud, installer, os, autoscaler, strategy
    ("aws", "gpu-operator", None, "karpenter", "mixed"),
    ("aws", "gpu-operator", None, "cluster-autoscaler", "mixed"),
    ("aws", "gpu-operator", None, "karpenter", "single"),
    ("aws", "gpu-operator", "bottlerocket", "karpenter", "mixed"),
    ("aws", "gpu-operator", "bottlerocket", "cluster-autoscaler", "mixed"),
    ("azure", "gpu-operator", None, None, "single"),
    ("gcp", "cloud", None, None, "mixed"),
    ("gcp", "gpu-operator", None, None, "single"),
]


@pytest.mark.parametrize("cloud, installer, os, autoscaler, strategy", SCALES)
@pytest.mark.parametrize("mode", list(SHARING))
def test_every_mode_scales_from_zero(cloud, installer, os, autoscaler, strategy, mode):
    keys = {"gpuSoftware": {"installer": installer, "migStrategy": strategy}}
    if cloud == "gcp" and installer == "cloud":
        keys = {}
    if autoscaler:
        keys["autoscaler"] = autoscaler
    result = verdict(one_pool(cloud, mode, os, **keys))
    assert result.from_zero, result.summary
    assert result.summary.startswith("scales from zero: ")


@pytest.mark.parametrize("cloud, mode", [("aws", "none"), ("aws", "time-slicing"), ("azure", "none"), ("azure", "mps"), ("gcp", "none")])
def test_device_plugin_installer_scales_from_zero(cloud, mode):
    installer = "cloud" if cloud == "gcp" else "device-plugin"
    assert verdict(one_pool(cloud, mode, gpuSoftware={"installer": installer})).from_zero


@pytest.mark.parametrize("cloud, keys", [("azure", {}), ("gcp", {"gpuSoftware": {"installer": "gpu-operator"}})])
def test_mig_mixed_at_zero_is_refused_where_the_managed_autoscaler_counts_only_gpus(cloud, keys):
    with pytest.raises(ConfigError) as caught:
        validate_stack(one_pool(cloud, "mig", **keys))
    (problem,) = caught.value.problems
    assert problem.path == "pools[0].minNodes"
    assert "expects no nvidia.com/mig-1g.10gb" in problem.message and "migStrategy: single" in problem.message


def test_mig_mixed_with_a_floor_needs_no_scale_from_zero():
    config = one_pool("azure", "mig")
    config["gpupools:pools"][0]["minNodes"] = 1
    result = verdict(config)
    assert not result.from_zero  # the floor node is there; the plan says what would not happen at zero


def test_time_sliced_pool_is_counted_by_its_shares_where_the_autoscaler_is_told():
    karpenter = verdict(one_pool("aws", "time-slicing"))
    assert "NodeOverlay" in karpenter.detail and "4 x nvidia.com/gpu per node" in karpenter.detail and not karpenter.notes
    aks = verdict(one_pool("azure", "time-slicing"))
    assert "1 x nvidia.com/gpu per node" in aks.detail
    assert aks.notes and "node offers 4" in aks.notes[0]  # AKS counts the VM's GPU, not its shares


def test_no_autoscaler_says_so():
    result = verdict(one_pool("aws", "none", autoscaler="none"))
    assert not result.from_zero and "gpupools:autoscaler: none" in result.summary


def test_karpenter_floor_is_a_fixed_managed_node_group():
    config = one_pool("aws", "none")
    config["gpupools:pools"][0]["minNodes"] = 1
    plan = plan_of(config)
    floor = plan.get("aws:eks/nodeGroup:NodeGroup", "p")
    assert floor.inputs["nodeGroupName"] == "p-floor"
    assert floor.inputs["scalingConfig"] == {"minSize": 1, "maxSize": 1, "desiredSize": 1}
    node_pool = plan.get(NODE_POOL, "nodepool-gpupools-p").inputs
    assert node_pool["spec"]["limits"] == {"nodes": "2"}  # 3 at most in all
    assert "p-floor keeps 1 node" in verdict(config).notes[0]


def test_fixed_size_pool_has_no_nodepool():
    config = one_pool("aws", "none")
    config["gpupools:pools"][0].update(minNodes=3)
    plan = plan_of(config)
    assert not plan.of_type(NODE_POOL)
    assert "fixed at 3 nodes" in verdict(config).summary


# --------------------------------------------------------------------------------------------------------------------
# The decision itself


def template(**over) -> NodeTemplate:
    base = dict(autoscaler="X", source="tmpl", labels={"gpupools.io/pool": "p"}, taints=(GPU_TAINT,), allocatable={"nvidia.com/gpu": 2})
    base.update(over)
    return NodeTemplate(**base)


POD = {"nodeSelector": {"gpupools.io/pool": "p"}, "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}],
       "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}


def test_pod_that_fits_the_template_scales():
    assert why_not(template(), POD) is None
    assert decide("p", template(), POD, "nvidia.com/gpu", 2).from_zero


@pytest.mark.parametrize("change, reason", [
    (dict(labels={}), "does not know the node label gpupools.io/pool=p"),
    (dict(taints=(GPU_TAINT, Taint("dedicated", "ml", "NoSchedule"))), "does not tolerate the taint dedicated=ml:NoSchedule"),
    (dict(allocatable={}), "expects no nvidia.com/gpu"),
    (dict(allocatable={"nvidia.com/gpu": 0}), "expects no nvidia.com/gpu"),
])
def test_pod_that_does_not_fit_is_explained(change, reason):
    assert reason in why_not(template(**change), POD)


def test_prefer_no_schedule_taints_do_not_block_and_exists_tolerates_any_value():
    assert why_not(template(taints=(Taint("soft", "x", "PreferNoSchedule"),)), {**POD, "tolerations": []}) is None
    assert tolerates([{"key": "nvidia.com/gpu", "operator": "Exists"}], GPU_TAINT)
    assert tolerates([{"operator": "Exists"}], GPU_TAINT)
    assert not tolerates([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "other"}], GPU_TAINT)


def test_bigger_requests_than_the_template_offers_are_reported():
    pod = {**POD, "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 3}}}]}
    assert "expects 2 x nvidia.com/gpu on a new node, the pod asks for 3" in why_not(template(), pod)


# --------------------------------------------------------------------------------------------------------------------
# cluster-autoscaler: the tags on the Auto Scaling group


def test_cluster_autoscaler_tags_describe_labels_taint_and_units():
    plan = plan_of(one_pool("aws", "mig", autoscaler="cluster-autoscaler"))
    tags = {r.inputs["tag"]["key"]: r.inputs["tag"]["value"] for r in plan.of_type(ASG_TAG)}
    prefix = "k8s.io/cluster-autoscaler/node-template/"
    assert tags[prefix + "label/gpupools.io/pool"] == "p"
    assert tags[prefix + "label/nvidia.com/mig.config"] == "all-1g.10gb"
    assert tags[prefix + "taint/nvidia.com/gpu"] == "present:NoSchedule"
    assert tags[prefix + "resources/nvidia.com/mig-1g.10gb"] == "56"  # 8 A100s x 7 slices
    assert tags[prefix + "resources/nvidia.com/gpu"] == "0"
    assert prefix + "label/k8s.amazonaws.com/accelerator" not in tags  # would make MIG nodes look never ready
    assert all(r.inputs["tag"]["propagateAtLaunch"] is False for r in plan.of_type(ASG_TAG))
    asg = {r.inputs["autoscalingGroupName"] for r in plan.of_type(ASG_TAG)}
    assert len(asg) == 1 and asg.pop().startswith("eks-p-")


def test_cluster_autoscaler_gpu_label_on_whole_gpu_pools():
    plan = plan_of(one_pool("aws", "none", autoscaler="cluster-autoscaler"))
    assert plan.get("aws:eks/nodeGroup:NodeGroup", "p").inputs["labels"]["k8s.amazonaws.com/accelerator"] == "nvidia-a10g"


def test_cluster_autoscaler_release_iam_and_version():
    config = one_pool("aws", "none", autoscaler="cluster-autoscaler", cluster={"name": "ml-test", "kubernetesVersion": "1.34"})
    plan = plan_of(config)
    values = plan.get(RELEASE, "cluster-autoscaler").inputs["values"]
    assert values["image"]["tag"] == "v1.34.5" and values["autoDiscovery"]["clusterName"] == "ml-test"
    policy = json.loads(plan.get("aws:iam/rolePolicy:RolePolicy", "cluster-autoscaler").inputs["policy"])
    scoped = next(s for s in policy["Statement"] if "autoscaling:SetDesiredCapacity" in s["Action"])
    assert scoped["Condition"] == {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/ml-test": "owned"}}
    assert "eks:DescribeNodegroup" in policy["Statement"][0]["Action"]
    association = plan.get("aws:eks/podIdentityAssociation:PodIdentityAssociation", "cluster-autoscaler").inputs
    assert (association["namespace"], association["serviceAccount"]) == ("kube-system", "cluster-autoscaler")
    trust = json.loads(plan.get("aws:iam/role:Role", "cluster-autoscaler").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}


def test_existing_cluster_gets_cluster_autoscaler_matching_its_version():
    plan = plan_of(one_pool("aws", "none", cluster={"name": "prod", "create": False}))
    values = plan.get(RELEASE, "cluster-autoscaler").inputs["values"]
    assert values["image"]["tag"] == "v1.35.2"  # the looked-up cluster runs 1.35 (mock)
    assert "nodeSelector" not in values  # an existing cluster has no gpupools system pool
    assert not plan.of_type("aws:eks/addon:Addon")  # the Pod Identity agent must already be there


# --------------------------------------------------------------------------------------------------------------------
# Karpenter: objects against the pinned CRDs, values against the pinned chart


def crd_schema(ref, filename: str, version: str) -> dict:
    crd = yaml.safe_load((ref / "karpenter" / filename).read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == version)


KARPENTER_STACKS = [
    one_pool("aws", "time-slicing"),
    one_pool("aws", "mig"),
    one_pool("aws", "mps", "bottlerocket"),
    stack_config("aws", pools=[{"name": "z", "instanceType": "g6.xlarge", "maxNodes": 4, "minNodes": 1, "spot": True, "diskSizeGb": 300,
                                "zones": ["eu-central-1b"]}]),
]


@pytest.mark.parametrize("config", KARPENTER_STACKS)
def test_karpenter_objects_validate_against_the_pinned_crds(config):
    jsonschema = pytest.importorskip("jsonschema")
    ref = needs_reference()
    schemas = {NODE_POOL: crd_schema(ref, "karpenter.sh_nodepools.yaml", "v1"),
               NODE_CLASS: crd_schema(ref, "karpenter.k8s.aws_ec2nodeclasses.yaml", "v1"),
               NODE_OVERLAY: crd_schema(ref, "karpenter.sh_nodeoverlays.yaml", "v1alpha1")}
    plan = plan_of(config)
    checked = 0
    for typ, schema in schemas.items():
        for resource in plan.of_type(typ):
            obj = {k: resource.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
            jsonschema.validate(obj, schema)
            checked += 1
    assert checked >= 2


def test_the_crd_check_catches_a_wrong_field():
    jsonschema = pytest.importorskip("jsonschema")
    schema = crd_schema(needs_reference(), "karpenter.sh_nodepools.yaml", "v1")
    plan = plan_of(one_pool("aws", "none"))
    obj = plan.get(NODE_POOL, "nodepool-gpupools-p").inputs
    obj["spec"]["disruption"]["consolidationPolicy"] = "WhenIdle"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({k: obj[k] for k in ("apiVersion", "kind", "metadata", "spec")}, schema)


def test_karpenter_node_pool_and_node_class():
    config = KARPENTER_STACKS[3]
    plan = plan_of(config)
    spec = plan.get(NODE_POOL, "nodepool-gpupools-z").inputs["spec"]
    reqs = {r["key"]: r["values"] for r in spec["template"]["spec"]["requirements"]}
    assert reqs == {"node.kubernetes.io/instance-type": ["g6.xlarge"], "karpenter.sh/capacity-type": ["spot"],
                    "topology.kubernetes.io/zone": ["eu-central-1b"]}
    assert spec["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert spec["template"]["metadata"]["labels"]["gpupools.io/pool"] == "z"
    # A training pool (the default): drift only in the window (tests/upgrades), never a node that runs pods consolidated.
    assert {k: spec["disruption"][k] for k in ("consolidationPolicy", "consolidateAfter")} == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m"}
    assert spec["limits"] == {"nodes": "3"}
    node_class = plan.get(NODE_CLASS, f"ec2nodeclass-{spec['template']['spec']['nodeClassRef']['name']}").inputs["spec"]
    assert node_class["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert node_class["metadataOptions"]["httpTokens"] == "required"
    assert node_class["blockDeviceMappings"][0]["ebs"] == {"volumeSize": "300Gi", "volumeType": "gp3", "iops": 3000, "throughput": 125,
                                                          "encrypted": True, "deleteOnTermination": True}
    assert node_class["instanceStorePolicy"] == "RAID0"  # g6.xlarge's 250 GB of NVMe
    assert node_class["securityGroupSelectorTerms"] == [{"id": next(iter(node_class["securityGroupSelectorTerms"]))["id"]}]
    assert all(term["id"].startswith("subnet-") for term in node_class["subnetSelectorTerms"])
    assert node_class["role"].startswith("karpenter-node")


def test_bottlerocket_node_class_carries_the_device_plugin_settings():
    plan = plan_of(one_pool("aws", "mps", "bottlerocket"))
    (node_class,) = plan.of_type(NODE_CLASS)
    spec = node_class.inputs["spec"]
    assert spec["amiSelectorTerms"] == [{"alias": "bottlerocket@latest"}]
    assert 'device-sharing-strategy = "mps"' in spec["userData"]
    assert [d["deviceName"] for d in spec["blockDeviceMappings"]] == ["/dev/xvda", "/dev/xvdb"]


def test_karpenter_controller_iam_and_interruption_queue():
    plan = plan_of(one_pool("aws", "mig"))
    policy = json.loads(plan.get("aws:iam/rolePolicy:RolePolicy", "karpenter-controller").inputs["policy"])
    sids = [s["Sid"] for s in policy["Statement"]]
    assert len(sids) == len(set(sids)) == 18
    pass_role = next(s for s in policy["Statement"] if s["Sid"] == "AllowPassingInstanceRole")
    assert pass_role["Resource"].startswith("arn:aws:iam::123456789012:role/karpenter-node")
    queue = plan.get("aws:sqs/queue:Queue", "karpenter-interruption").inputs
    assert queue == {"name": "karpenter-ml-test", "messageRetentionSeconds": 300, "sqsManagedSseEnabled": True}
    patterns = sorted(json.loads(r.inputs["eventPattern"])["detail-type"][0] for r in plan.of_type("aws:cloudwatch/eventRule:EventRule"))
    assert patterns == ["AWS Health Event", "EC2 Capacity Reservation Instance Interruption Warning", "EC2 Instance Rebalance Recommendation",
                        "EC2 Instance State-change Notification", "EC2 Spot Instance Interruption Warning"]
    assert len(plan.of_type("aws:cloudwatch/eventTarget:EventTarget")) == 5
    access = plan.get("aws:eks/accessEntry:AccessEntry", "karpenter-node").inputs
    assert access["type"] == "EC2_LINUX"
    association = plan.get("aws:eks/podIdentityAssociation:PodIdentityAssociation", "karpenter").inputs
    assert (association["namespace"], association["serviceAccount"]) == ("kube-system", "karpenter")
    assert plan.get("aws:eks/addon:Addon", "eks-pod-identity-agent").inputs["addonName"] == "eks-pod-identity-agent"
    values = plan.get(RELEASE, "karpenter").inputs
    assert values["name"] == "karpenter" and values["chart"] == "oci://public.ecr.aws/karpenter/karpenter" and values["version"] == "1.14.1"
    assert "repositoryOpts" not in values
    assert values["values"]["settings"]["featureGates"]["nodeOverlay"] is True
    assert values["values"]["settings"]["interruptionQueue"] == "karpenter-ml-test"


def test_inline_policy_fits_iam_limits():
    from gpupools.autoscaling.karpenter import controller_policy

    text = controller_policy("aws-us-gov", "us-gov-west-1", "123456789012", "a" * 40, "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:" + "q" * 80,
                             "arn:aws-us-gov:iam::123456789012:role/" + "r" * 64)
    assert len(text) < 10_240  # IAM's limit on a role's inline policies, whitespace excluded


@pytest.mark.parametrize("autoscaler, chart_dir", [("karpenter", "karpenter"), ("cluster-autoscaler", "cluster-autoscaler")])
def test_autoscaler_values_keys_exist_in_the_pinned_chart(autoscaler, chart_dir):
    ref = needs_reference()
    upstream = yaml.safe_load((ref / chart_dir / "values.yaml").read_text())
    plan = plan_of(one_pool("aws", "mig", autoscaler=autoscaler))
    values = plan.get(RELEASE, autoscaler).inputs["values"]
    free_form = ("featureGates", "additionalLabels", "selector", "nodeSelector", "extraArgs", "resources")
    assert [".".join(p) for p in value_paths(values, free_form) if not has_path(upstream, p)] == []
    # Feature gates and extra args are free-form maps upstream; what we set there must still be known names.
    if autoscaler == "karpenter":
        assert set(values["settings"]["featureGates"]) <= set(upstream["settings"]["featureGates"])


def test_chart_pins_are_the_reference_versions():
    ref = needs_reference()
    from gpupools.autoscaling import cluster_autoscaler, karpenter

    assert yaml.safe_load((ref / "cluster-autoscaler" / "Chart.yaml").read_text())["version"] == cluster_autoscaler.CHART.default_version
    # Karpenter's Chart.yaml in git lags its release tag (SOURCES.md); the release is 1.14.1.
    assert "v1.14.1" in (ref / "SOURCES.md").read_text() and karpenter.CHART.default_version == "1.14.1"


def test_workload_job_asks_its_autoscaler_not_to_take_its_node(tmp_path):
    from gpupools.landing.jobs import job_manifest

    def annotations(config):
        stack = validate_stack(config)
        return job_manifest(stack, plan_pools(stack)[0], image="x")["spec"]["template"]["metadata"].get("annotations")

    assert annotations(one_pool("aws", "none")) == {"karpenter.sh/do-not-disrupt": "true"}
    ca = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    assert annotations(one_pool("aws", "none", autoscaler="cluster-autoscaler")) == ca
    assert annotations(stack_config("azure")) == ca
    assert annotations(stack_config("gcp")) == ca
    assert annotations(one_pool("aws", "none", autoscaler="none")) is None


# --------------------------------------------------------------------------------------------------------------------
# Zones and versions


def test_gke_regional_pool_goes_only_to_zones_with_its_gpu():
    plan = plan_of(stack_config("gcp", pools=[{"name": "h", "instanceType": "a3-ultragpu-8g", "maxNodes": 1}]))
    assert plan.get("gcp:container/nodePool:NodePool", "h").inputs["nodeLocations"] == ["us-central1-b"]


def test_pool_zones_reach_every_cloud():
    gke = plan_of(stack_config("gcp", pools=[{"name": "l", "instanceType": "g2-standard-8", "maxNodes": 1, "zones": ["us-central1-a"]}]))
    assert gke.get("gcp:container/nodePool:NodePool", "l").inputs["nodeLocations"] == ["us-central1-a"]
    aks = plan_of(stack_config("azure", pools=[{"name": "t", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 1, "zones": [1, 2]}]))
    assert aks.get("azure-native:containerservice:AgentPool", "t").inputs["availabilityZones"] == ["1", "2"]
    eks = plan_of(stack_config("aws", pools=[{"name": "g", "instanceType": "g5.2xlarge", "maxNodes": 2, "zones": ["eu-central-1c"]}],
                               autoscaler="cluster-autoscaler"))
    subnets = eks.get("aws:eks/nodeGroup:NodeGroup", "g").inputs["subnetIds"]
    private = {r.name: r for r in eks.of_type("aws:ec2/subnet:Subnet")}
    assert len(subnets) == 1 and private["private-0"].inputs["cidrBlock"] == "10.0.128.0/20"
    existing = plan_of(stack_config("aws", pools=[{"name": "g", "instanceType": "g5.2xlarge", "maxNodes": 2, "zones": ["eu-central-1a"]}],
                                    cluster={"name": "prod", "create": False}))
    assert existing.get("aws:eks/nodeGroup:NodeGroup", "g").inputs["subnetIds"] == ["subnet-0a1b2c3d4e5f60001"]


@pytest.mark.parametrize("config, path, words", [
    # A word outside the field's enum is described, not quoted: it could be anything pasted there.
    (stack_config("aws", autoscaler="kapenter"), "autoscaler", "'karpenter', 'cluster-autoscaler' or 'none' (got a string of 8 characters)"),
    (stack_config("azure", autoscaler="karpenter"), "autoscaler", "AKS scales GPU pools with its own cluster autoscaler"),
    (stack_config("gcp", autoscaler="cluster-autoscaler"), "autoscaler", "GKE scales GPU pools"),
    (stack_config("aws", pools=[{"name": "a", "instanceType": "g5.2xlarge", "maxNodes": 1, "zones": ["us-east-1a"]}]), "pools[0].zones[0]",
     "'us-east-1a' is not a zone of region eu-central-1"),
    (stack_config("gcp", pools=[{"name": "a", "instanceType": "g2-standard-8", "maxNodes": 1, "zones": ["europe-west4-a"]}]), "pools[0].zones[0]",
     "not a zone of region us-central1"),
    (stack_config("gcp", pools=[{"name": "a", "instanceType": "a3-ultragpu-8g", "maxNodes": 1, "zones": ["us-central1-a"]}]), "pools[0].zones[0]",
     "does not offer nvidia-h200-141gb; zones of us-central1 that do: us-central1-b"),
    (stack_config("azure", pools=[{"name": "a", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 1, "zones": [4]}]), "pools[0].zones[0]",
     "'4' is not an Azure availability zone"),
    (stack_config("aws", cluster={"name": "c", "kubernetesVersion": "1.29"}), "cluster.kubernetesVersion", "not a Kubernetes version EKS offers"),
    (stack_config("aws", cluster={"name": "c", "kubernetesVersion": "1.３３"}), "cluster.kubernetesVersion", "is not a Kubernetes minor version"),
])
def test_bad_autoscaling_input_is_one_line_naming_the_field(config, path, words):
    with pytest.raises(ConfigError) as caught:
        validate_stack(config)
    assert any(p.path == path and words in p.message for p in caught.value.problems), caught.value.problems


def test_cli_refuses_a_pool_that_cannot_wake(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    result = CliRunner().invoke(app, ["plan", "--config", str(stack_file(one_pool("azure", "mig")))])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: pools[0].minNodes: 0 would leave pool 'p' stuck at zero nodes")
    assert "Traceback" not in result.output


# The version tables were read on this date; on it, no default may be past standard support.
TABLES_READ = date(2026, 11, 23)


def test_new_clusters_default_to_a_version_in_standard_support():
    from gpupools.clouds.registry import MODULES

    for name, module in MODULES.items():
        default = module.DEFAULT_KUBERNETES_VERSION
        if default is None:  # GKE: the release channel's default, by definition supported
            continue
        assert module.KUBERNETES_RELEASES[default].end_of_standard > TABLES_READ, name
        assert default == max(module.KUBERNETES_RELEASES, key=lambda m: tuple(map(int, m.split("."))))


def test_aks_refuses_a_version_out_of_support_but_eks_allows_extended_support():
    from gpupools.clouds.registry import cloud_module
    from gpupools.validation.checks import semantic_problems
    from gpupools.stack.config import Cluster, GpuSoftware, Sharing

    aks = semantic_problems(cloud_module("azure"), Cluster(name="c", resource_group="rg", kubernetes_version="1.33"), Sharing(), [], GpuSoftware(), [], today=TABLES_READ)
    assert [p.path for p in aks] == ["cluster.kubernetesVersion"] and "AKS creates no new clusters on it" in aks[0].message
    eks = semantic_problems(cloud_module("aws"), Cluster(name="c", kubernetes_version="1.33"), Sharing(), [], GpuSoftware(), [], today=TABLES_READ)
    assert eks == []  # in paid extended support: allowed, flagged by the policy pack and the plan
    late = semantic_problems(cloud_module("aws"), Cluster(name="c", kubernetes_version="1.33"), Sharing(), [], GpuSoftware(), [], today=date(2027, 8, 1))
    assert "left EKS support on 2027-07-29" in late[0].message
    existing = semantic_problems(cloud_module("azure"), Cluster(name="c", create=False, resource_group="rg", kubernetes_version="1.33"), Sharing(), [],
                                 GpuSoftware(), [], today=TABLES_READ)
    assert existing == []  # pools join the cluster as it is


# --------------------------------------------------------------------------------------------------------------------
# Teardown: whatever acts with a role's permissions goes before its policy attachments


ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"


def _attachments_of(plan, role: str) -> set[str]:
    return {r.name for r in plan.of_type(ATTACHMENT) if r.parent == role}


@pytest.mark.parametrize("autoscaler", ["karpenter", "cluster-autoscaler"])
def test_eks_resources_depend_on_their_roles_policy_attachments(autoscaler):
    config = stack_config("aws", pools=[{"name": "p", "instanceType": "g5.xlarge", "minNodes": 1, "maxNodes": 3}], autoscaler=autoscaler)
    plan = plan_of(config)
    cluster_policies = _attachments_of(plan, "cluster-role")
    node_policies = _attachments_of(plan, "node-role")
    assert len(cluster_policies) >= 1 and len(node_policies) == 3
    (cluster,) = plan.of_type("aws:eks/cluster:Cluster")
    assert all(cluster.depends(ATTACHMENT, name) for name in cluster_policies)
    for group in plan.of_type("aws:eks/nodeGroup:NodeGroup"):  # the system group and the GPU pool's
        assert all(group.depends(ATTACHMENT, name) for name in node_policies), group.name
    if autoscaler == "karpenter":
        release = plan.get("kubernetes:helm.sh/v3:Release", "karpenter")
        karpenter_node = _attachments_of(plan, "karpenter-node")
        assert karpenter_node and all(release.depends(ATTACHMENT, name) for name in karpenter_node)
        assert release.depends("aws:iam/rolePolicy:RolePolicy", "karpenter-controller")


def test_a_pool_that_keeps_nodes_is_not_said_to_scale_from_zero():
    from gpupools.autoscaling.scaleup import pool_scale_up
    from gpupools.pools.planning import plan_pools
    from gpupools.validation.stack import validate_stack

    from tests.conftest import stack_config

    for cloud in ("aws", "azure", "gcp"):
        base = stack_config(cloud)["gpupools:pools"][0]
        kept = validate_stack(stack_config(cloud, pools=[{**base, "minNodes": 1, "maxNodes": 3}]))
        verdict = pool_scale_up(kept, plan_pools(kept)[0])
        assert verdict.summary.startswith("scales up from 1 node(s) (minNodes): ") and verdict.floor == 1, verdict.summary
        zero = validate_stack(stack_config(cloud, pools=[{**base, "minNodes": 0, "maxNodes": 3}]))
        assert pool_scale_up(zero, plan_pools(zero)[0]).summary.startswith("scales from zero: ")
        fixed = validate_stack(stack_config(cloud, pools=[{**base, "minNodes": 3, "maxNodes": 3}]))
        assert pool_scale_up(fixed, plan_pools(fixed)[0]).summary == "does not scale from zero: fixed at 3 nodes (minNodes = maxNodes), nothing to scale"
