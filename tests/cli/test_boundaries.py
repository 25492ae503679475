"""Every input boundary holds: hostile or malformed files end in `error:` lines and exit 2, in bounded time."""

from __future__ import annotations

import json
import time

import pytest
import yaml
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.stack.values import read_stack_file
from gpupools.stack.errors import ConfigError, describe
from gpupools.stack.reading import MAX_BYTES, MAX_DEPTH, MAX_INT_DIGITS, MAX_NODES, ReadError, load_json, load_yaml
from gpupools.validation.stack import validate_stack

from conftest import ROOT, stack_config, write_stack

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args))


def errors_of(result) -> list[str]:
    lines = result.stderr.strip().splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    return lines


def problems(config: dict, environ: dict | None = None) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        validate_stack(config, environ if environ is not None else {})
    return [str(p) for p in exc.value.problems]


def alias_bomb(levels: int = 9) -> str:
    lines = ['    - &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        lines.append(f"    - &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "config:\n  gpupools:cloud: aws\n  gpupools:pools:\n" + "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------------------------
# The reader


def test_alias_bomb_is_refused_fast():
    for levels in (9, 12):
        started = time.perf_counter()
        with pytest.raises(ReadError, match=f"more than {MAX_NODES:,} values once its aliases are expanded"):
            load_yaml(alias_bomb(levels))
        assert time.perf_counter() - started < 1.0


def test_a_few_aliases_are_fine():
    assert load_yaml("a: &x {b: 1}\nc: *x\nd: {<<: *x, e: 2}\n") == {"a": {"b": 1}, "c": {"b": 1}, "d": {"b": 1, "e": 2}}


@pytest.mark.parametrize("text, expected", [
    ("x: " + "[" * 1000 + "]" * 1000, f"nested more than {MAX_DEPTH} levels deep"),
    ("x: " + "1" * 5000, "an integer of 5000 digits"),
    ("x: 0x" + "f" * 200, "an integer of 202 digits"),
    ("x: .nan", "'.nan' is not a finite number"),
    ("x: -.inf", "is not a finite number"),
    ("x: 1.0e+999", "is not a finite number"),
    ("a:\n  b: 6\n  b: 600\n", "duplicate key 'b' (first at line 2)"),
    ("x: &a [*a]", "an alias refers to a value that contains it"),
    ("x: !!binary aGk=", "could not determine a constructor"),
    ("x: !!python/object:os.system {}", "could not determine a constructor"),
    ("a: 1\n---\nb: 2\n", "more than one YAML document"),
    ("a: \x00", "character U+0000 at line 1"),
    ("a: [1, 2", "not valid YAML at line 1"),
])
def test_yaml_limits(text, expected):
    with pytest.raises(ReadError) as exc:
        load_yaml(text)
    assert expected in str(exc.value)


def test_dates_stay_strings_like_pulumi_reads_them():
    assert load_yaml("asOf: 2026-01-31") == {"asOf": "2026-01-31"}


@pytest.mark.parametrize("text, expected", [
    ('{"a": NaN}', "NaN is not a finite number"),
    ('{"a": -Infinity}', "-Infinity is not a finite number"),
    ('{"a": 1e999}', "is not a finite number"),
    ('{"a": ' + "9" * 30 + "}", "an integer of 30 digits"),
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ("[" * 5000 + "]" * 5000, f"nested more than {MAX_DEPTH} levels deep"),
    ("[" * 40 + "]" * 40, f"nested more than {MAX_DEPTH} levels deep"),
    ('{"a": ', "not valid JSON at line 1"),
])
def test_json_limits(text, expected):
    with pytest.raises(ReadError) as exc:
        load_json(text)
    assert expected in str(exc.value)


def test_integer_limit_keeps_every_64_bit_integer():
    assert load_yaml(f"x: {2**64}") == {"x": 2**64} and MAX_INT_DIGITS >= len(str(2**64))


def test_describe_shortens_before_serialising():
    shared = [1]
    for _ in range(40):
        shared = [shared] * 9  # 9**40 leaves if expanded
    started = time.perf_counter()
    text = describe({"k": shared})
    assert time.perf_counter() - started < 0.05 and len(text) == 60 and text.endswith("...")
    assert describe("x" * 10_000).startswith("'xxx") and len(describe("x" * 10_000)) == 60
    assert describe(10 ** 5000) == "<an integer of about 5000 digits>"
    assert describe({None: 1, 2: [True, None]}) == '{"null": 1, "2": [true, null]}'


# --------------------------------------------------------------------------------------------------------------------
# Stack files through the CLI: one line naming the file, exit 2


def test_non_utf8_stack_file_names_file_and_byte_from_plan_check_and_render(tmp_path):
    path = tmp_path / "Pulumi.latin.yaml"
    text = yaml.safe_dump({"config": stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3}])})
    data = text.encode() + "# pool für Café\n".encode("latin-1")
    path.write_bytes(data)
    position = data.index(b"\xfc")
    for command in (["plan"], ["check"], ["render", "--out", str(tmp_path / "out")]):
        result = invoke(*command, "--config", str(path))
        assert result.exit_code == 2
        (line,) = errors_of(result)
        assert line.startswith(f"error: {path}: not UTF-8: byte 0xfc at byte position {position}")


@pytest.mark.parametrize("text, expected", [
    (alias_bomb(10), "aliases are expanded"),
    ("config:\n  gpupools:cloud: aws\n  x: " + "[" * 1000 + "]" * 1000 + "\n", "nested more than"),
    ("config:\n  gpupools:cloud: aws\n  gpupools:cluster: {name: " + "9" * 5000 + "}\n", "an integer of 5000 digits"),
])
def test_hostile_stack_files_end_in_one_line(tmp_path, text, expected):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(text)
    started = time.perf_counter()
    result = invoke("check", "--config", str(path))
    assert time.perf_counter() - started < 5
    assert result.exit_code == 2
    (line,) = errors_of(result)
    assert line.startswith(f"error: {path}: ") and expected in line


def test_duplicate_key_is_refused_like_the_pulumi_cli(tmp_path):
    path = tmp_path / "Pulumi.dup.yaml"
    path.write_text("config:\n  aws:region: eu-central-1\n  gpupools:cloud: aws\n  gpupools:cluster: {name: ml}\n  gpupools:pools:\n"
                    "    - name: infer\n      instanceType: g5.2xlarge\n      maxNodes: 6\n      maxNodes: 600\n")
    result = invoke("plan", "--config", str(path))
    assert result.exit_code == 2
    assert errors_of(result) == [f"error: {path}: duplicate key 'maxNodes' (first at line 8); a key may appear once per mapping at line 9, column 7"]


def test_oversized_stack_file(tmp_path):
    path = tmp_path / "Pulumi.big.yaml"
    path.write_bytes(b"config:\n" + b"# padding\n" * (MAX_BYTES // 10 + 1))
    (line,) = errors_of(invoke("plan", "--config", str(path)))
    assert "larger than 1 MiB" in line


# --------------------------------------------------------------------------------------------------------------------
# Provider settings


def test_the_providers_own_settings_pass_and_are_read_from_their_sdks():
    from gpupools.stack.providers import provider_sdk_keys

    assert {"defaultTags", "assumeRoles", "skipCredentialsValidation", "region"} <= provider_sdk_keys("aws")
    assert {"impersonateServiceAccount", "project"} <= provider_sdk_keys("gcp")
    assert {"subscriptionId", "useMsi"} <= provider_sdk_keys("azure-native")
    config = stack_config("aws")
    config["aws:defaultTags"] = {"tags": {"team": "ml"}}
    config["aws:skipCredentialsValidation"] = True
    assert validate_stack(config, {}).providers["aws:skipCredentialsValidation"] is True
    config["aws:defaultTagz"] = {"tags": {}}
    (found,) = problems(config)
    assert found.startswith("error: aws:defaultTagz: unknown aws setting: neither gpupools nor the aws provider reads it; did you mean aws:defaultTags?")


def test_region_typo_and_missing_region_are_named():
    config = stack_config("aws")
    config["aws:regoin"] = config.pop("aws:region")
    assert problems(config) == [
        "error: aws:regoin: unknown aws setting: neither gpupools nor the aws provider reads it; did you mean aws:region? "
        "(gpupools reads aws:region, aws:profile, aws:accessKey, aws:secretKey, aws:token)",
        "error: aws:region: required on aws, but missing: set it (an AWS region such as eu-central-1) with `pulumi config set aws:region ...`; "
        "the provider would otherwise take it from AWS_REGION or AWS_DEFAULT_REGION, none of which is set"]


def test_region_from_the_environment_is_said_in_the_plan(tmp_path, monkeypatch):
    config = stack_config("aws")
    del config["aws:region"]
    validate_stack(config, {"AWS_REGION": "us-west-2"})
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    result = invoke("plan", "--config", str(write_stack(tmp_path, config)))
    assert result.exit_code == 0
    assert "note: aws:region is not set in the stack: us-west-2 comes from $AWS_REGION" in " ".join(result.stdout.split())


@pytest.mark.parametrize("cloud, key, value, expected", [
    ("gcp", "gcp:project", [1, 2], "error: gcp:project: expected a GCP project ID"),
    ("gcp", "gcp:project", "", "error: gcp:project: expected a GCP project ID"),
    ("gcp", "gcp:project", "My Project", "error: gcp:project: 'My Project' is not a GCP project ID"),
    ("gcp", "gcp:region", "us-central１", "error: gcp:region: 'us-central１' is not a GCP region"),
    ("aws", "aws:region", "eu central 1", "error: aws:region: 'eu central 1' is not an AWS region"),
    ("azure", "azure-native:location", "West Europe", "error: azure-native:location: 'West Europe' is not an Azure region name"),
    ("azure", "azure-native:subscriptionId", "abc", "error: azure-native:subscriptionId: a string of 3 characters is not a subscription ID"),
    ("aws", "gcp:project", "ml-platform", "error: gcp:project: not used on aws; gcp: settings apply to gcp stacks only"),
    ("aws", "kubernetes:context", "prod", "error: kubernetes:context: not read by gpupools"),
])
def test_provider_settings_have_shapes(cloud, key, value, expected):
    config = stack_config(cloud)
    config[key] = value
    assert any(p.startswith(expected) for p in problems(config)), problems(config)


def test_gcp_project_is_required_and_azure_location_defaults_to_the_resource_group():
    config = stack_config("gcp")
    del config["gcp:project"]
    assert problems(config)[0].startswith("error: gcp:project: required on gcp, but missing")
    validate_stack(config, {"GOOGLE_CLOUD_PROJECT": "ml-platform-dev"})
    azure = stack_config("azure")
    del azure["azure-native:location"]
    validate_stack(azure, {})


def test_gpupools_providers_key_is_rejected():
    config = stack_config("aws")
    config["gpupools:providers"] = {"aws:region": "us-east-1"}
    (line,) = problems(config)
    assert line.startswith("error: providers: unknown key 'providers'; allowed keys: cloud, cluster")


# --------------------------------------------------------------------------------------------------------------------
# Types, patterns and bounds


@pytest.mark.parametrize("keys, expected", [
    ({"monitoring": {"idle": {"forHours": "4"}}}, "error: monitoring.idle.forHours: input should be a valid number"),
    ({"monitoring": {"idle": {"forHours": True}}}, "error: monitoring.idle.forHours: input should be a valid number"),
    ({"monitoring": {"releaseLabel": "kube prometheus"}}, "error: monitoring.releaseLabel: 'kube prometheus' is not a label value"),
    ({"monitoring": {"releaseLabel": "-x"}}, "error: monitoring.releaseLabel: '-x' is not a label value"),
    ({"cluster": {"name": "ml", "kubernetesVersion": "1.３３"}}, "error: cluster.kubernetesVersion: '1.３３' is not a Kubernetes minor"),
    ({"gpuSoftware": {"version": "v２6.7.0"}}, "error: gpuSoftware.version: 'v２6.7.0' is not a chart version"),
    ({"sharing": {"mode": "mig", "migProfile": "１g.10gb"}}, "error: sharing.migProfile: '１g.10gb' is not a MIG profile name"),
    ({"teams": [{"name": "ml", "gpus": 10**12}]}, "error: teams[0].gpus: input should be less than or equal to 4000000"),
    ({"pools": [{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3, "labels": {"team": "a\n"}}]},
     "error: pools[0].labels.team: 'a\\n' is not a valid label value"),
])
def test_strict_types_ascii_patterns_and_bounds(keys, expected):
    found = problems(stack_config("aws", **keys))
    assert any(p.startswith(expected) for p in found), found


@pytest.mark.parametrize("cloud, max_nodes, ok", [("aws", 1000, True), ("aws", 1001, False), ("azure", 1001, False),
                                                  ("gcp", 3000, True), ("gcp", 3001, False)])
def test_pool_size_is_bounded_by_the_cloud(cloud, max_nodes, ok):
    config = stack_config(cloud)
    config["gpupools:pools"][0]["maxNodes"] = max_nodes
    if ok:
        validate_stack(config, {})
    else:
        assert any("maxNodes" in p and "above the limit" in p for p in problems(config))


def test_pools_per_stack_are_capped():
    pools = [{"name": f"p{i}", "instanceType": "g5.2xlarge", "maxNodes": 1} for i in range(101)]
    assert problems(stack_config("aws", pools=pools)) == [
        "error: pools: 101 pools; a stack has at most 100 (split larger fleets into several stacks)"]


# --------------------------------------------------------------------------------------------------------------------
# Policy config


@pytest.mark.parametrize("content, expected", [
    ('{"fleet-budget": {"maxMonthlyUsd": NaN}}', "NaN is not a finite number"),
    ('{"team-quota-oversubscription": {"maxRatio": Infinity}}', "Infinity is not a finite number"),
    ('{"fleet-budget": {"maxMonthlyUsd": 1e400}}', "is not a finite number"),
    ('{"fleet-budget": {"maxGpus": ' + "9" * 40 + "}}", "an integer of 40 digits"),
    ('{"fleet-budget": ' + "[" * 3000 + "]" * 3000 + "}", "nested more than"),
    ('{"kubernetes-version-supported": {"asOf": "2026-13-01"}}', "kubernetes-version-supported.asOf: \"2026-13-01\" is not a date"),
    ('{"gpu-workload-privileges": {"exceptions": [1]}}', "gpu-workload-privileges.exceptions[0]: expected a string, got 1"),
])
def test_policy_config_values_are_finite_and_well_formed(tmp_path, content, expected):
    path = tmp_path / "policy.json"
    path.write_text(content)
    result = invoke("check", "--stack", "dev-aws", "--policy-config", str(path))
    assert result.exit_code == 2
    (line,) = errors_of(result)
    assert line.startswith("error: --policy-config: ") and expected in line


def test_nan_cap_cannot_reach_the_policy_through_settings():
    from gpupools.policies.pack import POLICIES
    from gpupools.cli.policycheck import policy_settings

    with pytest.raises(ConfigError, match="fleet-budget.maxMonthlyUsd: NaN is not a finite number"):
        policy_settings({"fleet-budget": {"maxMonthlyUsd": float("nan")}}, POLICIES)


# --------------------------------------------------------------------------------------------------------------------
# render never writes a credential it does not have


def test_render_leaves_the_grafana_secret_out_and_says_how_to_create_it(tmp_path):
    result = invoke("render", "--stack", "dev-aws", "--out", str(tmp_path))
    assert result.exit_code == 0
    assert not list(tmp_path.rglob("secret-*grafana-admin*"))
    assert all("[secret]" not in p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    (note,) = [line for line in result.stdout.splitlines() if "not written" in line]
    assert "kubectl create secret generic gpupools-grafana-admin --namespace gpupools-monitoring" in note
    assert '--from-literal=admin-password="$(openssl rand -base64 24)"' in note


# --------------------------------------------------------------------------------------------------------------------
# plan --against: which changes replace a pool


def plan_json(tmp_path, config: dict, name: str) -> tuple:
    path = write_stack(tmp_path, config, name="test")
    result = invoke("plan", "--config", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    out = tmp_path / f"{name}.json"
    out.write_text(result.stdout)
    return path, out


def changes_against(tmp_path, before: dict, after: dict) -> dict:
    _, old = plan_json(tmp_path, before, "old")
    path = write_stack(tmp_path, after, name="test")
    result = invoke("plan", "--config", str(path), "--json", "--against", str(old))
    assert result.exit_code == 0, result.stderr
    return {(c["type"].split(":")[-1], c["name"]): c for c in json.loads(result.stdout)["changes"]}


def test_gke_native_sharing_change_replaces_the_node_pool(tmp_path):
    before = stack_config("gcp", pools=[{"name": "infer", "instanceType": "g2-standard-8", "maxNodes": 3,
                                         "sharing": {"mode": "time-slicing", "replicas": 3}}])
    after = stack_config("gcp", pools=[{"name": "infer", "instanceType": "g2-standard-8", "maxNodes": 5,
                                        "sharing": {"mode": "time-slicing", "replicas": 4}}])
    change = changes_against(tmp_path, before, after)[("NodePool", "infer")]
    assert change["action"] == "replace" and change["fields"] == ["nodeConfig.guestAccelerators"]
    path = write_stack(tmp_path, after, name="test")
    human = " ".join(invoke("plan", "--config", str(path), "--against", str(tmp_path / "old.json")).stdout.split())
    assert "REPLACES gcp:container/nodePool:NodePool infer" in human
    assert "a sharing change (mode, replicas, migProfile) REPLACES this node pool" in human


def test_scaling_changes_update_in_place_and_instance_type_replaces_on_eks_and_aks(tmp_path):
    base = {"aws": ("g5.2xlarge", "g6.2xlarge", "NodeGroup", "instanceTypes"),
            "azure": ("Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3", "AgentPool", "vmSize")}
    for cloud, (first, second, kind, field) in base.items():
        extra = {"autoscaler": "cluster-autoscaler", "cluster": {"name": "ml-test", "create": False}} if cloud == "aws" else {}
        before = stack_config(cloud, pools=[{"name": "infer", "instanceType": first, "maxNodes": 3}], **extra)
        bigger = stack_config(cloud, pools=[{"name": "infer", "instanceType": first, "maxNodes": 6}], **extra)
        other = stack_config(cloud, pools=[{"name": "infer", "instanceType": second, "maxNodes": 3}], **extra)
        if cloud == "azure":
            for config in (before, bigger, other):
                config["gpupools:cluster"] = {"name": "ml-test", "resourceGroup": "rg-ml"}
        assert {c["action"] for c in changes_against(tmp_path, before, bigger).values()} <= {"update", "same"}
        replaced = [c for c in changes_against(tmp_path, before, other).values() if c["action"] == "replace"]
        assert replaced and replaced[0]["type"].endswith(kind) and field in replaced[0]["fields"], (cloud, replaced)


def test_against_needs_a_plan_of_the_same_stack(tmp_path):
    bad = tmp_path / "old.json"
    bad.write_text('{"stack": "prod", "resources": []}')
    (line,) = errors_of(invoke("plan", "--stack", "dev-aws", "--against", str(bad)))
    assert line == f"error: --against: {bad}: is the plan of stack 'prod', not 'dev-aws'"
    bad.write_text("[" * 2000)
    (line,) = errors_of(invoke("plan", "--stack", "dev-aws", "--against", str(bad)))
    assert "nested more than" in line


@pytest.mark.parametrize("stack, expected", [
    ("dev-gcp", "a sharing change (mode, replicas, migProfile) REPLACES this node pool"),
    ("dev-aws", "Karpenter replaces the nodes gracefully (drift), the pool stays"),
    ("dev-aws-existing", "a sharing change updates a ConfigMap and node labels in place; the pool is not replaced"),
    ("dev-azure", "a sharing change updates a ConfigMap and node labels in place; the pool is not replaced"),
])
def test_every_pool_line_says_what_a_sharing_change_does(stack, expected):
    out = " ".join(invoke("plan", "--stack", stack).stdout.split())
    assert out.count(expected) == len(yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]["gpupools:pools"])


@pytest.mark.parametrize("resource, expected", [
    ({"type": ["aws:eks/nodeGroup:NodeGroup"], "name": "infer"}, "resources[0].type: expected a string, got [\"aws:eks/nodeGroup:NodeGroup\"]"),
    ({"type": "aws:eks/nodeGroup:NodeGroup", "name": {"a": 1}}, "resources[0].name: expected a string, got {\"a\": 1}"),
    ({"type": "aws:eks/nodeGroup:NodeGroup", "name": "infer", "inputs": [1]}, "resources[0].inputs: expected an object, got [1]"),
    ("aws:eks/nodeGroup:NodeGroup", "resources[0]: expected a resource object, got 'aws:eks/nodeGroup:NodeGroup'"),
])
def test_against_with_a_malformed_resource_is_one_line(tmp_path, resource, expected):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"stack": "dev-aws", "resources": [resource]}))
    result = invoke("plan", "--stack", "dev-aws", "--against", str(old))
    assert result.exit_code == 2, result.output
    (line,) = errors_of(result)
    assert line == f"error: --against: {old}: {expected}"


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
@pytest.mark.parametrize("sdk_answers", [False, True])
def test_a_plan_leaves_no_event_loop_open(cloud, sdk_answers, monkeypatch):
    """A plan's monitor answers on the loop's own thread: one event loop, closed when the plan ends. Where the SDK's
    MockMonitor answers (worker threads, as tests compare), each worker made an event loop of its own and left it
    open, and at interpreter exit those loops' finalizers printed "Exception ignored in BaseEventLoop.__del__" after a
    successful plan. Every loop a plan makes is closed when it ends."""
    import asyncio

    from conftest import plan_of
    from gpupools.cli import planrun

    monkeypatch.setattr(planrun, "SDK_ANSWERS", sdk_answers)
    made, new_event_loop = [], asyncio.new_event_loop
    monkeypatch.setattr(asyncio, "new_event_loop", lambda: made.append(new_event_loop()) or made[-1])
    plan_of(stack_config(cloud))
    assert len(made) > 1 if sdk_answers else len(made) == 1  # the plan's own loop (and the worker threads')
    assert all(loop.is_closed() for loop in made)


@pytest.mark.parametrize("line, field, words, hint", [
    # The field's own spelling, found by validating both readings: a boolean field is told true/false ...
    ("    create: no", "cluster.create", "'no' is a boolean in YAML 1.1 but the string \"no\" in YAML 1.2", "write false, which this field takes"),
    ("    create: on", "cluster.create", "'on' is a boolean in YAML 1.1", "write true, which this field takes"),
    # ... a field whose words include on is told to quote it (true would be refused there) ...
    ("    fabric: on", "pools[0].fabric", "'on' is a boolean in YAML 1.1", 'write "on", which this field takes'),
    ("    spot: yes", "pools[0].spot", "'yes' is a boolean in YAML 1.1", "write true, which this field takes"),
    # ... and a value neither reading fits gets the field's own refusal of what Pulumi reads.
    ("    kubernetesVersion: 1:30", "cluster.kubernetesVersion", "'1:30' is the number 90 in YAML 1.1 but a string in YAML 1.2",
     "as Pulumi reads it: '1:30' is not a Kubernetes minor version"),
    ("    diskSizeGb: 0o12", "pools[0].diskSizeGb", "'0o12' is a string in YAML 1.1 but a number in YAML 1.2", "as Pulumi reads it: "),
    ("    diskSizeGb: 0200", "pools[0].diskSizeGb", "'0200' is the octal number 128 in YAML 1.1 but 200 in YAML 1.2", "write it without the leading zero"),  # both 128 and 200 fit the field
])
def test_values_yaml_1_1_and_1_2_read_differently_are_one_line(tmp_path, line, field, words, hint):
    """Offline reading and `pulumi up` must judge the same config: a value the two YAML versions disagree on is refused,
    naming its field (not the file) and a spelling that field takes."""
    cluster_line, pool_line = (line, "") if field.startswith("cluster.") else ("", line)
    text = f"config:\n  aws:region: eu-central-1\n  gpupools:cloud: aws\n  gpupools:cluster:\n    name: ml\n{cluster_line}\n" \
           f"  gpupools:pools:\n  - name: infer\n    instanceType: p4d.24xlarge\n    zones: [eu-central-1a]\n    maxNodes: 2\n{pool_line}\n"
    path = tmp_path / "Pulumi.yaml11.yaml"
    path.write_text(text)
    result = invoke("plan", "--config", str(path))
    assert result.exit_code == 2
    (error,) = errors_of(result)
    assert error.startswith(f"error: {field}: unquoted ") and words in error and hint in error, error
    assert f"(line {6 if cluster_line else 12})" in error, error


def test_a_yaml_1_1_word_as_a_key_is_refused_where_it_stands(tmp_path):
    path = tmp_path / "Pulumi.key.yaml"
    path.write_text("config:\n  aws:region: eu-central-1\n  gpupools:cloud: aws\n  gpupools:cluster: {name: ml}\n  gpupools:pools:\n"
                    "  - {name: infer, instanceType: g5.2xlarge, maxNodes: 2, labels: {on: x}}\n")
    (error,) = errors_of(invoke("plan", "--config", str(path)))
    assert error.startswith(f"error: {path}: key 'on' is a boolean in YAML 1.1") and "line 6" in error, error


def test_quoted_and_yaml_1_2_values_still_read(tmp_path):
    path = tmp_path / "Pulumi.ok.yaml"
    path.write_text('config:\n  aws:region: eu-central-1\n  gpupools:cloud: aws\n  gpupools:cluster:\n    name: ml\n    create: false\n'
                    '    kubernetesVersion: "1.30"\n  gpupools:pools:\n  - name: infer\n    instanceType: g5.2xlarge\n    maxNodes: 2\n'
                    '    labels: {answer: "no"}\n')
    assert read_stack_file(path)["gpupools:cluster"]["create"] is False
