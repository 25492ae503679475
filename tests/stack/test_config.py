"""Every user mistake named in the stack config contract: one line per problem, the field path, the value."""

from __future__ import annotations

import pytest

from gpupools.stack.config import StackConfig
from gpupools.stack.values import read_stack_file
from gpupools.validation.stack import validate_stack
from gpupools.stack.errors import ConfigError

from conftest import ROOT, stack_config


def problems(config: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        validate_stack(config)
    return [str(p) for p in info.value.problems]


def pool(**fields) -> dict:
    return {"name": "p", "instanceType": "g5.2xlarge", "maxNodes": 2, **fields}


@pytest.mark.parametrize("cloud", ["aws", "azure", "gcp"])
def test_base_configs_are_valid(cloud):
    stack = validate_stack(stack_config(cloud))
    assert isinstance(stack, StackConfig)
    assert stack.cloud == cloud
    assert stack.pools[0].min_nodes == 0  # scale to zero by default
    assert stack.cluster.create is True


@pytest.mark.parametrize("name", ["dev-aws", "dev-azure", "dev-gcp"])
def test_example_stacks_are_valid(name):
    stack = validate_stack(read_stack_file(ROOT / "stacks" / f"Pulumi.{name}.yaml"))
    assert stack.pools


def test_camel_case_keys_map_to_typed_fields():
    stack = validate_stack(stack_config(pools=[pool(minNodes=1, maxNodes=4, diskSizeGb=200, spot=True, os="bottlerocket",
                                                    labels={"team": "search"}, sharing={"mode": "time-slicing", "replicas": 4})]))
    p = stack.pools[0]
    assert (p.min_nodes, p.max_nodes, p.disk_size_gb, p.spot, p.os) == (1, 4, 200, True, "bottlerocket")
    assert stack.sharing_of(p).replicas == 4


def test_stack_default_sharing_applies_to_pools_without_their_own():
    stack = validate_stack(stack_config(pools=[pool(name="a"), pool(name="b", sharing={"mode": "none"})],
                                        sharing={"mode": "mps", "replicas": 3}))
    assert stack.sharing_of(stack.pools[0]).mode == "mps"
    assert stack.sharing_of(stack.pools[1]).mode == "none"


CASES = [
    ("unknown cloud", dict(cloud="oracle"), "error: cloud: input should be 'aws', 'azure', 'gcp' or 'gcore' (got a string of 6 characters)"),
    ("missing cluster name", dict(cluster={"create": True}), "error: cluster.name: required, but missing"),
    ("cluster name not a DNS label", dict(cluster={"name": "ML_Dev"}), "error: cluster.name: 'ML_Dev' is not a DNS label"),
    ("no pools", dict(pools=[]), "error: pools: at least one pool is required"),
    ("pools not a list", dict(pools=7), "error: pools: expected a list, got a number of 1 digit"),
    ("pool name not a DNS label", dict(pools=[pool(name="Infer_1")]), "error: pools[0].name: 'Infer_1' is not a DNS label"),
    ("duplicate pool names", dict(pools=[pool(name="a"), pool(name="a")]), "error: pools[1].name: 'a' is used by more than one pool"),
    ("reserved pool name", dict(pools=[pool(name="system")]), "error: pools[0].name: 'system' is reserved"),
    ("unknown instance type", dict(pools=[pool(instanceType="g5.2xlarg")]),
     "error: pools[0].instanceType: unknown aws GPU instance type 'g5.2xlarg'; closest known: g5.2xlarge"),
    ("instance type of another cloud", dict(pools=[pool(instanceType="a2-highgpu-1g")]),
     "error: pools[0].instanceType: 'a2-highgpu-1g' is a gcp machine type, but this stack's cloud is aws"),
    ("zero maxNodes", dict(pools=[pool(maxNodes=0)]), "error: pools[0].maxNodes: input should be greater than or equal to 1 (got 0)"),
    ("negative maxNodes", dict(pools=[pool(maxNodes=-3)]), "error: pools[0].maxNodes: input should be greater than or equal to 1 (got -3)"),
    ("minNodes above maxNodes", dict(pools=[pool(minNodes=5, maxNodes=2)]), "error: pools[0].minNodes: 5 is greater than maxNodes (2)"),
    ("unknown sharing mode", dict(pools=[pool(sharing={"mode": "vGPU"})]),
     "error: pools[0].sharing.mode: input should be 'none', 'time-slicing', 'mps', 'mig', 'vgpu' or 'dra' (got a string of 4 characters)"),
    ("replicas below 2", dict(pools=[pool(sharing={"mode": "time-slicing", "replicas": 1})]),
     "error: pools[0].sharing.replicas: input should be greater than or equal to 2 (got 1)"),
    ("replicas missing", dict(pools=[pool(sharing={"mode": "mps"})]), "error: pools[0].sharing.replicas: required with mode 'mps'"),
    ("replicas with mig", dict(pools=[pool(instanceType="p4d.24xlarge", sharing={"mode": "mig", "migProfile": "1g.5gb", "replicas": 4})]),
     "error: pools[0].sharing.replicas: 4 is not allowed with mode 'mig'"),
    ("mig on a GPU without MIG", dict(pools=[pool(sharing={"mode": "mig", "migProfile": "1g.5gb"})]),
     "error: pools[0].sharing.mode: 'mig' is not possible on g5.2xlarge: its A10G GPU has no MIG support"),
    ("mig profile the GPU lacks", dict(pools=[pool(instanceType="p4d.24xlarge", sharing={"mode": "mig", "migProfile": "1g.10gb+me"})]),
     "error: pools[0].sharing.migProfile: '1g.10gb+me' is not a MIG profile of A100-40GB; it has 1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb"),
    ("unknown key", dict(pools=[pool(maxnodes=3)]), "error: pools[0].maxnodes: unknown key 'maxnodes'; allowed keys: name, instanceType"),
    ("wrong type", dict(pools=[pool(spot="yes")]), "error: pools[0].spot: input should be a valid boolean (got a string of 3 characters)"),
    ("gpu on aws", dict(pools=[pool(gpu="nvidia-tesla-t4")]), "error: pools[0].gpu: 'nvidia-tesla-t4' is not used on aws; gpu applies to gcp n1 machine types only"),
    ("cloud installer on aws", dict(gpuSoftware={"installer": "cloud"}), "error: gpuSoftware.installer: 'cloud' is not a mechanism of a standard EKS cluster"),
    ("mig with the standalone device plugin", dict(gpuSoftware={"installer": "device-plugin"},
                                                    pools=[pool(instanceType="p4d.24xlarge", sharing={"mode": "mig", "migProfile": "1g.5gb"})]),
     "error: pools[0].sharing.mode: 'mig' needs the GPU Operator's MIG manager"),
    ("invalid label key", dict(pools=[pool(labels={"bad key": "x"})]), "error: pools[0].labels.bad key: 'bad key' is not a valid Kubernetes label key"),
    ("reserved label", dict(pools=[pool(labels={"gpupools.io/pool": "x"})]), "error: pools[0].labels.gpupools.io/pool: 'gpupools.io/pool' is set by gpupools itself"),
]


@pytest.mark.parametrize("what, change, expected", CASES, ids=[c[0] for c in CASES])
def test_aws_mistakes_name_the_field(what, change, expected):
    found = problems(stack_config("aws", **change))
    assert any(line.startswith(expected) for line in found), found


def test_azure_requires_resource_group():
    assert problems(stack_config("azure", cluster={"name": "ml"})) == [
        "error: cluster.resourceGroup: required on azure: the resource group that holds (or will hold) the AKS cluster"]


def test_azure_agent_pool_name_rules():
    found = problems(stack_config("azure", pools=[{"name": "gpu-pool", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 1}]))
    assert found[0].startswith("error: pools[0].name: 'gpu-pool' cannot name an AKS agent pool")


def test_gcp_requires_location():
    assert problems(stack_config("gcp", cluster={"name": "ml"}))[0].startswith("error: cluster.location: required on gcp")


def test_gcp_n1_requires_gpu():
    found = problems(stack_config("gcp", pools=[{"name": "n", "instanceType": "n1-standard-8", "maxNodes": 1}]))
    assert found == ["error: pools[0].gpu: required for N1 machine type n1-standard-8: one of nvidia-tesla-t4, nvidia-tesla-v100, nvidia-tesla-p100"]


def test_gcp_n1_gpu_count_must_be_offered():
    found = problems(stack_config("gcp", pools=[{"name": "n", "instanceType": "n1-standard-8", "gpu": "nvidia-tesla-t4", "gpuCount": 3, "maxNodes": 1}]))
    assert found == ["error: pools[0].gpuCount: 3 x nvidia-tesla-t4 is not offered on N1; allowed counts: 1, 2, 4"]


def test_gcp_implied_accelerator_cannot_be_overridden():
    found = problems(stack_config("gcp", pools=[{"name": "a", "instanceType": "a2-highgpu-1g", "gpu": "nvidia-tesla-t4", "maxNodes": 1}]))
    assert found[0].startswith("error: pools[0].gpu: 'nvidia-tesla-t4' does not fit a2-highgpu-1g")


def test_gcp_device_plugin_installer_is_refused():
    assert problems(stack_config("gcp", gpuSoftware={"installer": "device-plugin"}))[0].startswith(
        "error: gpuSoftware.installer: 'device-plugin' is not offered on gcp")


def test_every_problem_is_reported_at_once():
    found = problems(stack_config("aws", cluster={"name": "ok"}, pools=[
        pool(name="a", instanceType="nope.large"),
        pool(name="b", maxNodes=0),
        pool(name="c", minNodes=3, maxNodes=1, sharing={"mode": "mig", "migProfile": "1g.5gb"}),
    ]))
    paths = [line.split(":")[1].strip() for line in found]
    assert paths == ["pools[1].maxNodes", "pools[0].instanceType", "pools[2].minNodes", "pools[2].sharing.mode"]


def test_stack_wide_default_sharing_error_points_at_the_default():
    found = problems(stack_config("aws", sharing={"mode": "mig", "migProfile": "1g.5gb"}))
    assert found[0].startswith("error: sharing.mode: 'mig' is not possible on g5.2xlarge")


def test_unknown_namespace_key():
    found = problems({**stack_config("aws"), "pulumi:foo": 1})
    assert found[0].startswith("error: pulumi:foo: unknown config key 'pulumi:foo'")


def test_broken_yaml_is_one_line(tmp_path):
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text("config:\n  gpupools:cloud: aws\n   bad: [\n")
    with pytest.raises(ConfigError) as info:
        read_stack_file(path)
    (only,) = info.value.problems
    assert str(only).startswith(f"error: {path}: not valid YAML at line")


def test_stack_file_without_config_mapping(tmp_path):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("encryptionsalt: abc\n")
    with pytest.raises(ConfigError, match="needs a top-level `config:` mapping"):
        read_stack_file(path)


def test_secure_values_are_placeholders(tmp_path):
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text("config:\n  gpupools:cloud: aws\n  aws:secretKey:\n    secure: v1:abc\n")
    raw = read_stack_file(path)
    assert raw["aws:secretKey"] == {"secure": "v1:abc"}
    from gpupools.stack.values import split_namespaces

    _, providers, _ = split_namespaces(raw)
    assert providers["aws:secretKey"] == "[secret]"


def test_team_namespace_cannot_be_a_system_or_gpupools_namespace():
    found = problems(stack_config("aws", teams=[{"name": "ml", "namespace": "gpu-operator", "gpus": 2}, {"name": "kube-system", "gpus": 1}]))
    assert found[0].startswith("error: teams[0].namespace: 'gpu-operator' is a namespace Kubernetes or gpupools already uses")
    assert found[1].startswith("error: teams[1].name: 'kube-system' is a namespace")


def test_team_pools_must_exist():
    found = problems(stack_config("aws", teams=[{"name": "ml", "gpus": 2, "pools": ["nope"]}]))
    assert found == ["error: teams[0].pools[0]: 'nope' is not a pool of this stack; pools: infer"]


def test_cluster_fields_of_another_cloud_are_named():
    found = problems(stack_config("aws", cluster={"name": "ml", "resourceGroup": "rg", "location": "us-central1"}))
    assert found == ["error: cluster.resourceGroup: 'rg' is not used on aws; resourceGroup applies to azure only",
                     "error: cluster.location: 'us-central1' is not used on aws; location applies to gcp only"]
    found = problems(stack_config("gcp", cluster={"name": "ml", "location": "us-central1", "subnetIds": ["a", "b"]}))
    assert found == ["error: cluster.subnetIds: ['a', 'b'] is not used on gcp; subnetIds applies to aws only"]


def test_team_units_total_or_per_pool_and_kueue_settings():
    stack = validate_stack(stack_config("aws", teams=[{"name": "a", "gpus": {"infer": 2}, "borrow": 3, "lend": "none", "priority": "low"},
                                                      {"name": "b", "gpus": 1}]))
    assert stack.quotas == "kueue"
    a, b = stack.teams
    assert (a.pool_names, a.borrow, a.lend, a.priority) == (["infer"], 3, "none", "low")
    assert (b.pool_names, b.borrow, b.lend, b.priority) == (None, "all", "all", "normal")


@pytest.mark.parametrize("team, keys, expected", [
    ({"name": "a", "gpus": {"nope": 1}}, {}, "error: teams[0].gpus.nope: 'nope' is not a pool of this stack; pools: infer"),
    ({"name": "a", "gpus": {"infer": 1}, "pools": ["infer"]}, {},
     "error: teams[0].pools: the pools of gpus: {pool: units} are the team's pools; drop pools, or give gpus as one total"),
    ({"name": "a", "gpus": {"infer": -1}}, {}, "error: teams[0].gpus.infer: input should be greater than or equal to 0 (got -1)"),
    ({"name": "a", "gpus": {}}, {}, "error: teams[0].gpus: dictionary should have at least 1 item after validation, not 0 (got an empty mapping)"),
    ({"name": "a", "gpus": 2, "borrow": "some"}, {}, "error: teams[0].borrow: input should be 'all' or 'none' (got a string of 4 characters)"),
    ({"name": "a", "gpus": 2, "lend": 1.5}, {}, "error: teams[0].lend: input should be a valid integer (got 1.5)"),
    ({"name": "a", "gpus": 2, "priority": "urgent"}, {}, "error: teams[0].priority: input should be 'high', 'normal' or 'low' (got a string of 6 characters)"),
    ({"name": "a", "gpus": 2, "borrow": 1}, {"quotas": "resourcequota"},
     "error: teams[0].borrow: a Kueue setting; set gpupools:quotas: kueue, or drop borrow (with resourcequota a team's quota is a fixed limit)"),
    ({"name": "a", "gpus": 2}, {"quotas": "slurm"}, "error: quotas: input should be 'kueue', 'resourcequota' or 'kai' (got a string of 5 characters)"),
    ({"name": "kueue-system", "gpus": 2}, {}, "error: teams[0].name: 'kueue-system' is a namespace Kubernetes or gpupools already uses"),
])
def test_team_mistakes_name_the_field(team, keys, expected):
    (found,) = problems(stack_config("aws", teams=[team], **keys))
    assert found.startswith(expected)


def test_teams_and_labels_have_a_cap():
    """Each team and each label costs plan time and cluster objects; the caps say so in one line each."""
    from gpupools.stack.config import MAX_POOL_LABELS, MAX_TEAMS

    teams = [{"name": f"t{i}", "gpus": 1} for i in range(MAX_TEAMS + 1)]
    assert problems(stack_config(teams=teams)) == [f"error: teams: {MAX_TEAMS + 1:,} teams; a stack has at most {MAX_TEAMS:,}"]
    labels = {f"l{i}": "x" for i in range(6000)}
    assert problems(stack_config(pools=[pool(labels=labels)])) == [f"error: pools[0].labels: 6,000 labels; a pool has at most {MAX_POOL_LABELS}"]
    assert validate_stack(stack_config(pools=[pool(labels={f"l{i}": "x" for i in range(MAX_POOL_LABELS)})]))


@pytest.mark.parametrize("cloud, key", [
    ("aws", "node-role.kubernetes.io/gpu"), ("aws", "kubernetes.io/hostname"), ("gcp", "node.kubernetes.io/instance-type"),
    ("azure", "k8s.io/x"), ("aws", "karpenter.sh/nodepool"), ("aws", "karpenter.k8s.aws/instance-family"),
    ("aws", "k8s.amazonaws.com/accelerator"), ("aws", "eks.amazonaws.com/nodegroup"), ("gcp", "cloud.google.com/gke-nodepool"),
    ("azure", "kubernetes.azure.com/mode"),
])
def test_platform_label_domains_are_refused(cloud, key):
    (line,) = problems(stack_config(cloud, pools=[{**stack_config(cloud)["gpupools:pools"][0], "labels": {key: "x"}}]))
    assert line.startswith(f"error: pools[0].labels.{key}: ") and "a label domain the platform reserves" in line


def test_label_domains_are_matched_as_domains_not_substrings():
    ok = {"example.com/team": "a", "mykubernetes.io/x": "b", "team": "c", "kubernetes.io.example.com/x": "d"}
    assert validate_stack(stack_config("aws", pools=[pool(labels=ok)]))


def test_karpenter_refuses_its_own_label_domains_too():
    """The upstream artefact behind the Karpenter entries: every label domain the pinned NodePool CRD's CEL rules call
    restricted is one gpupools refuses on AWS (the rules use Kubernetes' CEL string library, which the CEL evaluator
    here lacks, so their messages are read)."""
    import re

    import yaml

    from conftest import needs_reference
    from gpupools.clouds.aws import RESERVED_LABEL_DOMAINS

    crd = yaml.safe_load((needs_reference() / "karpenter" / "karpenter.sh_nodepools.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    labels_schema = schema["properties"]["spec"]["properties"]["template"]["properties"]["metadata"]["properties"]["labels"]
    messages = [rule["message"] for rule in labels_schema["x-kubernetes-validations"]]
    domains = {m.group(1) for text in messages if (m := re.fullmatch(r'label domain "([^"]+)" is restricted', text))}
    assert domains == {"karpenter.sh", "karpenter.k8s.aws"} and set(domains) <= set(RESERVED_LABEL_DOMAINS)
    assert 'label "kubernetes.io/hostname" is restricted' in messages  # under kubernetes.io, refused on every cloud


@pytest.mark.parametrize("cloud, namespace", [
    ("aws", "kube-team"), ("gcp", "gmp-system"), ("gcp", "gke-managed-system"), ("gcp", "gke-managed-cim"), ("azure", "gatekeeper-system"),
    ("azure", "calico-system"), ("aws", "amazon-cloudwatch"),
])
def test_platform_namespaces_are_refused(cloud, namespace):
    (line,) = problems(stack_config(cloud, teams=[{"name": "ml", "namespace": namespace, "gpus": 1}]))
    assert line.startswith("error: teams[0].namespace: ") and ("reserves" in line or "already uses" in line), line


@pytest.mark.parametrize("where, change, path", [
    ("location", lambda c: c["gpupools:cluster"].update(location="us-central1\u2060"), "cluster.location"),
    ("zero-width space", lambda c: c["gpupools:cluster"].update(location="us-\u200bcentral1"), "cluster.location"),
    ("no-break space", lambda c: c["gpupools:pools"][0].update(instanceType="g2-standard-8\u00a0"), "pools[0].instanceType"),
    ("bidi control", lambda c: c["gpupools:pools"][0].update(gpu="\u202eL4"), "pools[0].gpu"),
    ("provider", lambda c: c.update({"gcp:region": "us-central1\ufeff"}), "gcp:region"),
    ("label key", lambda c: c["gpupools:pools"][0].update(labels={"team\u200d": "a"}), "pools[0].labels.team\u200d"),
])
def test_invisible_characters_are_refused(where, change, path):
    config = stack_config("gcp")
    change(config)
    found = problems(config)
    assert any(line.startswith(f"error: {path}: ") and "invisible character U+" in line for line in found), found


# --------------------------------------------------------------------------------------------------------------------
# One error per root cause


def _errors(config: dict) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    return [str(p) for p in exc.value.problems]


def test_a_team_naming_a_pool_that_failed_its_own_checks_is_not_a_second_error():
    pools = [{"name": "train", "instanceType": "g5.2xlarge", "maxNodes": 0}, {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 1}]
    errors = _errors(stack_config("aws", pools=pools, teams=[{"name": "a", "gpus": {"train": 2, "infer": 1, "batch": 1}}]))
    assert errors == ["error: pools[0].maxNodes: input should be greater than or equal to 1 (got 0)",
                      "error: teams[0].gpus.batch: 'batch' is not a pool of this stack; pools: infer, train"]


def test_a_reference_to_no_pool_says_so_when_no_pool_passed():
    errors = _errors(stack_config("aws", pools=[{"name": "Train_1", "instanceType": "g5.2xlarge", "maxNodes": 1}],
                                  teams=[{"name": "a", "gpus": {"train": 1}}]))
    assert errors[1] == "error: teams[0].gpus.train: 'train' is not a pool of this stack; pools: Train_1"
    errors = _errors(stack_config("aws", pools=[{"name": 5, "instanceType": "g5.2xlarge", "maxNodes": 1}],
                                  teams=[{"name": "a", "pools": ["train"], "gpus": 1}]))
    assert errors[-1].endswith("'train' is not a pool of this stack; pools: none (the stack has no pool that passed its checks)")
