"""A pool's `node:`: fields of the cloud's own node API, checked against its model and passed through to the pool's
resource under gpupools' own settings (docs/node-settings.md)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import ROOT, config_problems, plan_of, stack_config, write_stack
from gpupools.cli.main import app
from gpupools.clouds import aws, azure, gcore, gcp
from gpupools.clouds.node_settings import merged, node_lines, node_problems

AGENT_POOL = "azure-native:containerservice:AgentPool"
MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"
NODE_POOL = "gcp:container/nodePool:NodePool"

AKS_NODE = {"maxPods": 60, "osDiskType": "Ephemeral", "scaleSetEvictionPolicy": "Deallocate", "spotMaxPrice": 2.5,
            "scaleDownMode": "Deallocate", "kubeletConfig": {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node"},
            "linuxOSConfig": {"transparentHugePageEnabled": "madvise"}, "proximityPlacementGroupID": "/subscriptions/x/ppg",
            "tags": {"cost-center": "ml"}}
# A NUMA-aware A3 pool: the kubelet's static CPU manager and single-NUMA-node topology, 1 GiB hugepages, sysctls, cgroup v2.
GKE_NODE = {"maxPodsPerNode": 32,
            "nodeConfig": {"linuxNodeConfig": {"sysctls": {"net.core.somaxconn": "4096", "net.ipv4.tcp_rmem": "4096 87380 6291456"},
                                               "hugepagesConfig": {"hugepageSize1g": 64}, "cgroupMode": "CGROUP_MODE_V2"},
                           "kubeletConfig": {"cpuManagerPolicy": "static", "topologyManager": {"policy": "single-numa-node", "scope": "pod"}},
                           "gcfsConfig": {"enabled": True}, "metadata": {"team": "ml"}}}


@pytest.fixture(scope="module")
def aks_plan():
    return plan_of(stack_config("azure", pools=[
        {"name": "spot", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 4, "spot": True, "node": AKS_NODE},
        {"name": "plain", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 2}],
        cluster={"name": "ml", "resourceGroup": "rg-ml", "systemPool": {"node": {"maxPods": 110, "osDiskType": "Ephemeral"}}}))


@pytest.fixture(scope="module")
def gke_plan():
    return plan_of(stack_config("gcp", pools=[{"name": "a3", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "node": GKE_NODE}],
                                cluster={"name": "ml", "location": "us-central1", "systemPool": {"node": {"nodeConfig": {"diskType": "pd-ssd"}}}}))


def test_aks_pool_carries_exactly_the_fields_set(aks_plan):
    inputs = aks_plan.get(AGENT_POOL, "spot").inputs
    for key, value in AKS_NODE.items():
        if key != "tags":
            assert inputs[key] == value, key
    # gpupools' own settings stay: the Spot priority, the GPU taint, its tags beside the pool's own
    assert inputs["scaleSetPriority"] == "Spot"
    assert inputs["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert inputs["tags"] == {"cost-center": "ml", "gpupools.io/upgrades": "training"}
    # a pool without node: keeps gpupools' Spot-less defaults and has none of the fields
    plain = aks_plan.get(AGENT_POOL, "plain").inputs
    assert not {"maxPods", "osDiskType", "scaleDownMode", "spotMaxPrice"} & set(plain)


def test_aks_system_pool_takes_node_settings(aks_plan):
    profile = aks_plan.get(MANAGED_CLUSTER, "ml").inputs["agentPoolProfiles"][0]
    assert (profile["maxPods"], profile["osDiskType"], profile["mode"], profile["name"]) == (110, "Ephemeral", "System", "system")


def test_gke_a3_pool_carries_exactly_the_fields_set(gke_plan):
    inputs = gke_plan.get(NODE_POOL, "a3").inputs
    assert inputs["maxPodsPerNode"] == 32
    config = inputs["nodeConfig"]
    for key in ("linuxNodeConfig", "kubeletConfig", "gcfsConfig"):
        assert config[key] == GKE_NODE["nodeConfig"][key], key
    # merged under gpupools' own: the legacy metadata endpoints stay off, the local SSDs stay the kubelet's, the GPUs stay
    assert config["metadata"] == {"team": "ml", "disable-legacy-endpoints": "true"}
    assert config["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 16}
    assert config["machineType"] == "a3-highgpu-8g" and config["guestAccelerators"][0]["count"] == 8
    system = gke_plan.get(NODE_POOL, "system").inputs["nodeConfig"]
    assert system["diskType"] == "pd-ssd" and system["machineType"] != "pd-ssd"


def test_merge_keeps_gpupools_settings_except_its_defaults():
    ours = {"a": 1, "m": {"x": "ours"}, "d": "ours", "t": {"k": "v"}}
    theirs = {"a": 2, "m": {"x": "theirs", "y": 3}, "d": "theirs", "new": True}
    assert merged(ours, theirs, frozenset({("d",)})) == {"a": 1, "m": {"x": "ours", "y": 3}, "d": "theirs", "t": {"k": "v"}, "new": True}
    assert merged(ours, theirs) ["d"] == "ours"
    assert theirs["m"] == {"x": "theirs", "y": 3}  # the stack's own mapping is left alone
    assert merged(ours, None) is ours


def _problems(cloud: str, node, instance: str, **pool) -> list[str]:
    least = {"minNodes": 1} if cloud == "gcore" else {}  # Gcore pools keep a node
    return [str(p) for p in config_problems(stack_config(cloud, pools=[{"name": "gp", "instanceType": instance, "maxNodes": 2, **least, **pool,
                                                                        "node": node}]))]


AKS_SIZE, GKE_TYPE = "Standard_NC24ads_A100_v4", "a3-highgpu-8g"


@pytest.mark.parametrize("cloud, instance, node, expected", [
    ("azure", AKS_SIZE, {"maxPod": 3}, "error: pools[0].node.maxPod: not a field of AKS's AgentPool; closest: maxPods"),
    ("azure", AKS_SIZE, {"maxPods": "60"}, "error: pools[0].node.maxPods: expected an integer, got a string of 2 characters"),
    ("azure", AKS_SIZE, {"osDiskType": "Fast"}, "error: pools[0].node.osDiskType: not a value AKS takes here; allowed: Ephemeral, Managed"),
    ("azure", AKS_SIZE, {"kubeletConfig": {"cpuManagerPolice": "static"}},
     "error: pools[0].node.kubeletConfig.cpuManagerPolice: not a field of AKS's kubeletConfig; closest: cpuManagerPolicy"),
    ("azure", AKS_SIZE, {"spotMaxPrice": 1.0}, "error: pools[0].node.spotMaxPrice: applies to Spot pools only; set spot: true (or capacity: [spot])"),
    ("gcp", GKE_TYPE, {"nodeConfig": {"linuxNodeConfig": {"hugepages": {}}}},
     "error: pools[0].node.nodeConfig.linuxNodeConfig.hugepages: not a field of GKE's nodeConfig.linuxNodeConfig; closest: hugepagesConfig"),
    ("gcp", GKE_TYPE, {"maxPodsPerNode": True}, "error: pools[0].node.maxPodsPerNode: expected an integer, got a boolean"),
    ("gcp", GKE_TYPE, {"nodeConfig": {"linuxNodeConfig": {"cgroupMode": "V3"}}},
     "error: pools[0].node.nodeConfig.linuxNodeConfig.cgroupMode: not a value GKE takes here; allowed: CGROUP_MODE_V1, CGROUP_MODE_V2"),
    ("gcp", GKE_TYPE, {"nodeConfig": "x"}, "error: pools[0].node.nodeConfig: expected a mapping, got a string of 1 character"),
    ("aws", "g5.2xlarge", {"nodeClass": {"kubelet": {"maxPods": "110"}}},
     "error: pools[0].node.nodeClass.kubelet.maxPods: expected an integer, got a string of 3 characters"),
    ("aws", "g5.2xlarge", {"nodeClass": {"kublet": {}}}, "error: pools[0].node.nodeClass.kublet: not a field of Karpenter's nodeClass; closest: kubelet"),
    ("aws", "g5.2xlarge", {"nodeClass": {"metadataOptions": {"httpTokens": "maybe"}}},
     "error: pools[0].node.nodeClass.metadataOptions.httpTokens: not a value Karpenter takes here; allowed: required, optional"),
    ("gcore", "g3-ai-32-192-1500-l40s-48-1", {"kubelet_config": {"maxPods": 110}},
     "error: pools[0].node.kubelet_config.maxPods: expected a string, got a number of 3 digits"),
    ("gcore", "g3-ai-32-192-1500-l40s-48-1", {"kubelet": {}}, "error: pools[0].node.kubelet: not a field of Gcore's pool; closest: kubelet_config"),
    ("gcore", "g3-ai-32-192-1500-l40s-48-1", {"boot_volume_type": "fast"},
     "error: pools[0].node.boot_volume_type: not a value Gcore takes here; allowed: cold, ssd_hiiops, ssd_local, ssd_lowlatency, standard, ultra"),
    ("aws", "g5.2xlarge", {"nodePool": {"replicas": 9}},
     "error: pools[0].node.nodePool.replicas: above the pool's maxNodes (2), which caps the NodePool (limits.nodes)"),
])
def test_a_wrong_node_setting_is_one_line(cloud, instance, node, expected):
    problems = _problems(cloud, node, instance)
    assert problems[0].startswith(expected) and len(problems) == 1, problems


def test_a_key_that_may_be_a_secret_is_not_echoed():
    token = "sk_live_" + "Zq8Hw2Lk9Pz4Xr7Tm3Nc6Vb1"
    problems = _problems("azure", {token: 1, "tags": {"k": 5}}, AKS_SIZE)
    assert all(token not in p for p in problems) and len(problems) == 2, problems


GCORE_FLAVOR = "g3-ai-32-192-1500-l40s-48-1"


@pytest.mark.parametrize("api, cloud, instance", [(azure.NODE_API, "azure", AKS_SIZE), (gcp.NODE_API, "gcp", GKE_TYPE),
                                                  (aws.NODE_API, "aws", "g5.2xlarge"), (gcore.NODE_API, "gcore", GCORE_FLAVOR)])
def test_every_field_gpupools_owns_is_refused_with_where_to_set_it(api, cloud, instance):
    for path, where in api.owned.items():
        node: dict = {}
        at = node
        for step in path[:-1]:
            at = at.setdefault(step, {})
        at[path[-1]] = None
        problems = node_problems(api, node, "node")
        assert [str(p) for p in problems] == [f"error: node.{'.'.join(path)}: gpupools sets this itself; {where}"], path
    # taints inside node: point at the pool's own key, through the stack
    taints = {"azure": {"nodeTaints": ["a=b:NoSchedule"]}, "gcp": {"nodeConfig": {"taints": []}}, "aws": {"nodePool": {"template": {}}},
              "gcore": {"taints": {}}}[cloud]
    assert "taints" in _problems(cloud, taints, instance)[0]


def test_node_is_refused_where_no_node_pool_takes_it():
    nap = stack_config("azure", pools=[{"name": "p", "instanceType": AKS_SIZE, "maxNodes": 2, "node": {"maxPods": 30}}],
                       cluster={"name": "ml", "resourceGroup": "rg", "mode": "node-auto-provisioning"})
    assert any(str(p).startswith("error: pools[0].node: AKS takes no node settings") for p in config_problems(nap))
    managed_node_groups = stack_config("aws", autoscaler="cluster-autoscaler",
                                       pools=[{"name": "p", "instanceType": "g5.2xlarge", "maxNodes": 2, "node": {"nodePool": {"weight": 3}}}])
    # a managed node group takes its own fields (tests/clouds/test_node_settings_eks.py), not Karpenter's
    assert [str(p) for p in config_problems(managed_node_groups)] == [
        "error: pools[0].node.nodePool: not a field of EKS's managed node group; fields: forceUpdateVersion, kubelet, labels, "
        "launchTemplate, tags, warmPoolConfig"]
    auto = stack_config("aws", pools=[{"name": "p", "instanceType": "g5.2xlarge", "maxNodes": 2, "node": {"nodePool": {"weight": 3}}}],
                        cluster={"name": "ml", "mode": "auto-mode"})
    assert any(str(p).startswith("error: pools[0].node: EKS takes no node settings") for p in config_problems(auto))


def test_the_system_pool_takes_node_settings_where_gpupools_makes_one():
    existing = stack_config("azure", cluster={"name": "ml", "resourceGroup": "rg", "create": False, "systemPool": {"node": {"maxPods": 30}}})
    assert "error: cluster.systemPool.node: gpupools makes no system pool to pass node settings to (the cluster exists already); remove it" in [
        str(p) for p in config_problems(existing)]
    eks = stack_config("aws", cluster={"name": "ml", "systemPool": {"node": {"maxPods": 30}}})
    assert [str(p) for p in config_problems(eks)] == [
        "error: cluster.systemPool.node: gpupools makes no system pool to pass node settings to (EKS takes none here); remove it"]
    sized = stack_config("gcp", cluster={"name": "ml", "location": "us-central1", "systemPool": {"node": {"nodeConfig": {"machineType": "e2"}}}})
    assert [str(p) for p in config_problems(sized)] == [
        "error: cluster.systemPool.node.nodeConfig.machineType: gpupools sets this itself; gpupools sizes the system pool"]


def test_the_plan_shows_each_field_and_warns_where_a_change_replaces_the_pool():
    lines = node_lines(azure.NODE_API, {"maxPods": 60, "scaleDownMode": "Deallocate", "tags": {"team": "ml"}})
    assert lines[0] == "maxPods: 60 (warning: AKS cannot change it on a running pool: a new pool (under a new name) takes the change)"
    assert lines[1:] == ["scaleDownMode: Deallocate", "tags: {team: ml}"]
    gke = node_lines(gcp.NODE_API, {"maxPodsPerNode": 32, "nodeConfig": {"linuxNodeConfig": {"cgroupMode": "CGROUP_MODE_V2"}}})
    assert gke == ["maxPodsPerNode: 32 (warning: changing it replaces the node pool (the provider's ForceNew))",
                   "nodeConfig.linuxNodeConfig.cgroupMode: CGROUP_MODE_V2"]


def test_cli_exits_2_with_one_line_and_prints_the_fields(tmp_path):
    runner = CliRunner()
    bad = write_stack(tmp_path, stack_config("azure", pools=[{"name": "p", "instanceType": AKS_SIZE, "maxNodes": 2, "node": {"maxPods": "x"}}]))
    result = runner.invoke(app, ["plan", "--config", str(bad)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert [line for line in result.output.splitlines() if line.startswith("error:")] == [
        "error: pools[0].node.maxPods: expected an integer, got a string of 1 character"]


# --------------------------------------------------------------------------------------------------------------------
# The models: what node_api.json holds is the SDK's, and every field of it is a field of the cloud's own API


def test_models_are_the_installed_sdks():
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import node_api_models
    from clouds.test_gke_api_model import discovery_document

    for cloud in ("aws", "azure", "gcp", "gcore"):
        derived = node_api_models.derive(cloud) if cloud != "gcp" else None
        if cloud == "gcp":
            discovery_document()  # skips where the document is not on this machine
            derived = node_api_models.derive(cloud)
        assert json.loads(node_api_models.target(cloud).read_text()) == json.loads(json.dumps(derived)), cloud


def _walk(model: dict, path: tuple = ()):
    if model["type"] == "object":
        for name, sub in model["fields"].items():
            yield path + (name,), sub
            yield from _walk(sub, path + (name,))
    elif model["type"] == "array":
        yield from _walk(model["items"], path)


def test_every_aks_field_is_an_agent_pool_property():
    """Every field of the model, nested ones too, is a property of azure-mgmt-containerservice's agent pool model."""
    models = pytest.importorskip("azure.mgmt.containerservice.models")
    import re

    def properties(cls) -> dict[str, str]:
        return {field._rest_name_input or name: name for name, field in vars(cls).items() if hasattr(field, "_rest_name_input")}

    def nested(cls, python_name: str):
        ref = re.search(r"_models\.(\w+)", repr(cls.__annotations__.get(python_name, "")))
        return getattr(models, ref.group(1)) if ref else None

    missing, deep = [], 0
    for path, _ in _walk(azure.NODE_API.model):
        cls = models.ManagedClusterAgentPoolProfileProperties
        for step in path[:-1]:
            cls = nested(cls, properties(cls)[step])
        if path[-1] not in properties(cls):
            missing.append(".".join(path))
        deep += len(path) > 1
    assert missing == [] and deep > 30


# The provider's names where GKE's API spells them otherwise, and the provider's own fields (Terraform's).
GKE_RENAMES = {"nodeConfig": "config", "hugepagesConfig": "hugepages", "guestAccelerators": "accelerators", "nodeLocations": "locations",
               "maxPodsPerNode": None, "nodeCount": None, "ignoreNodeCountChanges": None, "deletionPolicy": None,
               "maintenancePolicies": None, "nodeDrainConfigs": None, "effectiveTaints": None}


def test_every_gke_field_is_in_the_discovery_document():
    from clouds.test_gke_api_model import discovery_document

    schemas = discovery_document()["schemas"]

    def api(node):
        return schemas[node["$ref"]] if "$ref" in node else node

    found, provider_only = 0, []
    for path, _ in _walk(gcp.NODE_API.model):
        node = schemas["NodePool"]
        for step in path:
            name = GKE_RENAMES.get(step, step)
            props = api(node).get("properties") or api(api(node).get("items", {})).get("properties", {})
            if name is None or name not in props:
                provider_only.append(".".join(path))
                break
            node = props[name]
        else:
            found += 1
    # Nearly every field is the API's own; the rest are the Terraform provider's spellings of API fields
    # (maxPodsPerNode is maxPodsConstraint.maxPodsPerNode) and its lifecycle switches.
    assert found > 150 and len(provider_only) < found / 3, provider_only
    for field in ("nodeConfig.linuxNodeConfig.sysctls", "nodeConfig.linuxNodeConfig.hugepagesConfig.hugepageSize1g",
                  "nodeConfig.kubeletConfig.topologyManager.policy", "nodeConfig.gcfsConfig.enabled", "nodeConfig.diskType"):
        assert field not in provider_only, field


def test_policies_judge_what_node_settings_open():
    from test_policies import resource_violations

    # the kubelet: unsafe sysctls (unless the config allows them by name) and GKE's read-only port
    aks_sysctls = plan_of(stack_config("azure", pools=[{"name": "p", "instanceType": AKS_SIZE, "maxNodes": 2,
                                                        "node": {"kubeletConfig": {"allowedUnsafeSysctls": ["net.core.somaxconn", "kernel.msgmax"]}}}]))
    props = aks_sysctls.get(AGENT_POOL, "p").inputs
    assert resource_violations("node-kubelet-closed", AGENT_POOL, props) == [
        "node pool 'r' lets pods set unsafe sysctls (net.core.somaxconn, kernel.msgmax), which reach beyond the pod; drop "
        "allowedUnsafeSysctls, or list them in the policy config's allowedUnsafeSysctls"]
    assert resource_violations("node-kubelet-closed", AGENT_POOL, props, {"allowedUnsafeSysctls": ["net.core.somaxconn", "kernel.msgmax"]}) == []
    gke_port = plan_of(stack_config("gcp", pools=[{"name": "p", "instanceType": GKE_TYPE, "maxNodes": 2, "node": {
        "nodeConfig": {"kubeletConfig": {"insecureKubeletReadonlyPortEnabled": "TRUE"}}, "networkConfig": {"enablePrivateNodes": False}}}]))
    props = gke_port.get(NODE_POOL, "p").inputs
    assert [m.split(" (")[0] for m in resource_violations("node-kubelet-closed", NODE_POOL, props)] == ["node pool 'r' opens the kubelet's unauthenticated read-only port"]
    assert resource_violations("no-public-ssh", NODE_POOL, props)
    # the A3 pool of the peer stack opens nothing
    assert resource_violations("node-kubelet-closed", NODE_POOL, plan_of(stack_config("gcp", pools=[
        {"name": "a3", "instanceType": GKE_TYPE, "maxNodes": 2, "node": GKE_NODE}])).get(NODE_POOL, "a3").inputs) == []
    karpenter = plan_of(stack_config("aws", pools=[{"name": "p", "instanceType": "g5.2xlarge", "maxNodes": 2,
                                                    "node": {"nodeClass": {"associatePublicIPAddress": True}}}]))
    (public,) = [o for o in _objects(karpenter, "EC2NodeClass").values() if o["spec"].get("associatePublicIPAddress")]
    assert resource_violations("no-public-ssh", "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", public)

    aks = plan_of(stack_config("azure", pools=[{"name": "p", "instanceType": AKS_SIZE, "maxNodes": 2, "node": {"enableNodePublicIP": True}}]))
    assert resource_violations("no-public-ssh", AGENT_POOL, aks.get(AGENT_POOL, "p").inputs)
    gke = plan_of(stack_config("gcp", pools=[{"name": "p", "instanceType": GKE_TYPE, "maxNodes": 2,
                                              "node": {"nodeConfig": {"workloadMetadataConfig": {"mode": "GCE_METADATA"}}}}]))
    assert resource_violations("gke-metadata-server", NODE_POOL, gke.get(NODE_POOL, "p").inputs)


def test_the_docs_examples_are_valid_stacks():
    import re
    import yaml
    from gpupools.validation.stack import validate_stack

    text = (ROOT / "docs" / "node-settings.md").read_text()
    examples = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]
    assert len(examples) == 4
    gke, aks, eks, node_group = examples
    assert validate_stack(stack_config("aws", pools=eks["gpupools:pools"])).pools[0].node["nodePool"] == {"replicas": 2}
    ca = validate_stack(stack_config("aws", pools=node_group["gpupools:pools"], autoscaler=node_group["gpupools:autoscaler"]))
    assert ca.pools[0].node["kubelet"]["config"]["maxPods"] == 110
    validate_stack(stack_config("gcp", pools=gke["gpupools:pools"]))
    stack = validate_stack(stack_config("azure", pools=aks["gpupools:pools"], cluster=aks["gpupools:cluster"]))
    assert stack.pools[0].node["scaleSetEvictionPolicy"] == "Deallocate" and stack.cluster.system_pool.node == {"maxPods": 110}


# --------------------------------------------------------------------------------------------------------------------
# EKS on Karpenter: the pool's EC2NodeClass and NodePool

KARPENTER_NODE = {"nodeClass": {"kubelet": {"maxPods": 110, "systemReserved": {"cpu": "500m", "memory": "1Gi"},
                                            "evictionHard": {"memory.available": "5%"}},
                                "tags": {"team": "ml"}, "detailedMonitoring": True},
                  "nodePool": {"replicas": 2}}


@pytest.fixture(scope="module")
def karpenter_plan():
    return plan_of(stack_config("aws", pools=[{"name": "static", "instanceType": "g5.2xlarge", "maxNodes": 3, "node": KARPENTER_NODE},
                                              {"name": "plain", "instanceType": "g5.2xlarge", "maxNodes": 3}]))


def _objects(plan, kind: str) -> dict:
    return {r.inputs["metadata"]["name"]: r.inputs for r in plan.resources if r.type.endswith(f":{kind}")}


def test_karpenter_pool_carries_exactly_the_fields_set(karpenter_plan):
    import jsonschema
    import yaml
    from conftest import cel_value, crd_rule_failures

    classes, pools = _objects(karpenter_plan, "EC2NodeClass"), _objects(karpenter_plan, "NodePool")
    static = pools["gpupools-static"]
    own = classes[static["spec"]["template"]["spec"]["nodeClassRef"]["name"]]["spec"]
    assert own["kubelet"] == KARPENTER_NODE["nodeClass"]["kubelet"] and own["detailedMonitoring"] is True
    assert own["tags"]["team"] == "ml" and own["tags"]["gpupools.io/node-class"].startswith("gpupools-al2023")
    assert own["metadataOptions"]["httpTokens"] == "required"  # gpupools' IMDSv2, untouched
    assert static["spec"]["replicas"] == 2 and static["spec"]["limits"] == {"nodes": "3"}
    # the other pool's class and NodePool carry none of it
    plain = pools["gpupools-plain"]
    assert "replicas" not in plain["spec"] and "kubelet" not in classes[plain["spec"]["template"]["spec"]["nodeClassRef"]["name"]]["spec"]
    for kind, crd in (("EC2NodeClass", "karpenter.k8s.aws_ec2nodeclasses.yaml"), ("NodePool", "karpenter.sh_nodepools.yaml")):
        schema = yaml.safe_load((ROOT / "tests" / "reference" / "karpenter" / crd).read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for obj in _objects(karpenter_plan, kind).values():
            jsonschema.validate(obj, schema)
            if kind == "NodePool":  # the spec's own rules: a static NodePool takes only limits.nodes and no weight
                spec_rules = schema["properties"]["spec"]["x-kubernetes-validations"]
                assert [r for r in spec_rules if "oldSelf" not in r["rule"] and not cel_value(r["rule"], {"self": obj["spec"]})] == []
                if "replicas" in obj["spec"]:  # and the rules do see a static NodePool with a weight
                    assert [r["message"] for r in spec_rules if "oldSelf" not in r["rule"]
                            and not cel_value(r["rule"], {"self": {**obj["spec"], "weight": 5}})] == ["'weight' is not supported on static NodePools"]
            elif "kubelet" in obj["spec"]:  # the kubelet's rules (the alias rules use CEL functions cel-python lacks)
                kubelet = schema["properties"]["spec"]["properties"]["kubelet"]
                assert kubelet.get("x-kubernetes-validations") and crd_rule_failures(obj["spec"]["kubelet"], kubelet) == []


def test_karpenter_metadata_options_are_a_default_the_imds_policy_judges():
    from test_policies import resource_violations

    plan = plan_of(stack_config("aws", pools=[{"name": "p", "instanceType": "g5.2xlarge", "maxNodes": 2,
                                               "node": {"nodeClass": {"metadataOptions": {"httpTokens": "optional"}}}}]))
    (spec,) = [o["spec"] for o in _objects(plan, "EC2NodeClass").values() if o["spec"]["metadataOptions"]["httpTokens"] == "optional"]
    assert spec["metadataOptions"]["httpPutResponseHopLimit"] == 2
    obj = next(o for o in _objects(plan, "EC2NodeClass").values() if o["spec"] is spec)
    assert resource_violations("eks-imdsv2", "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", obj)


def test_the_plan_warns_that_static_replicas_cannot_be_turned_off_in_place():
    assert node_lines(aws.NODE_API, {"nodePool": {"replicas": 2}, "nodeClass": {"kubelet": {"maxPods": 110}}}) == [
        "nodePool.replicas: 2 (warning: Karpenter refuses to turn a NodePool between static (replicas) and dynamic: setting or removing "
        "it needs the NodePool deleted first)", "nodeClass.kubelet.maxPods: 110"]


def test_gcore_pool_carries_the_kubelet_and_cri_o_settings():
    from test_policies import resource_violations

    node = {"kubelet_config": {"maxPods": "110"}, "crio_config": {"default-ulimits": "nofile=1048576:1048576"}, "is_public_ipv4": True}
    plan = plan_of(stack_config("gcore", pools=[{"name": "infer", "instanceType": GCORE_FLAVOR, "minNodes": 1, "maxNodes": 3, "node": node}]))
    (resource,) = [r for r in plan.resources if r.type == "pulumi-python:dynamic:Resource" and r.name == "infer"]
    pool = resource.inputs["pool"]
    assert (pool["kubelet_config"], pool["crio_config"], pool["is_public_ipv4"]) == (node["kubelet_config"], node["crio_config"], True)
    assert pool["flavor_id"] == GCORE_FLAVOR and pool["taints"]  # gpupools' own stay
    assert resource_violations("no-public-ssh", "pulumi-python:dynamic:Resource", resource.inputs)
    assert node_lines(gcore.NODE_API, {"kubelet_config": {"maxPods": "110"}}) == [
        "kubelet_config: {maxPods: 110} (warning: Gcore cannot change it on a running pool: a change replaces the pool)"]
