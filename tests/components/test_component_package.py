"""The component package in components/: its schema, and its components constructed as another language's program
constructs them, against what the Python program builds for the same stack."""

# No `from __future__ import annotations`: a test below hands an argument class to Pulumi's analyzer, which reads
# annotations as objects.
import concurrent.futures
import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import types
import typing
from pathlib import Path

import grpc
import pulumi
import jsonschema
import pytest
import yaml
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.errors import InputPropertiesError
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.util import camel_case
from pulumi.provider.server import ProviderServicer
from pulumi.runtime.proto import engine_pb2_grpc, provider_pb2, provider_pb2_grpc, resource_pb2, resource_pb2_grpc

from conftest import ROOT, reference_dir, stack_config
from gpupools.cli.planrun import run_program
from gpupools.stack import config as stack_models
from gpupools.stack.values import to_pulumi_values
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack
from gpupools_components import args as component_args
from gpupools_components import resources
from gpupools_components.provider import provider, schema_text

PACKAGE = ROOT / "components"
SCHEMA = PACKAGE / "schema.json"
SECRET_SIG = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270"}
OUTPUT_SIG = {"4dabf18193072939515e22adb298388d": "d0e6a833031e9bbcd3f4e8bde6ca49a4"}
RESOURCE_SIG = {"4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e"}
WEBHOOK = "https://hooks.slack.com/services/T000/B000/XXXX"


# --------------------------------------------------------------------------------------------------------------------
# The schema


def metaschema_validator() -> jsonschema.protocols.Validator:
    """Pulumi's package metaschema (pinned in tests/reference/pulumi). Its patterns name groups as ECMAScript does,
    `(?<major>...)`, which Python's re spells `(?P<major>...)`; the same patterns, respelled."""
    meta = json.loads((reference_dir() / "pulumi" / "pulumi.json").read_text())

    def pattern(validator, patrn, instance, schema):
        if validator.is_type(instance, "string") and not re.search(re.sub(r"\(\?<([A-Za-z]\w*)>", r"(?P<\1>", patrn), instance):
            yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")

    cls = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": pattern})
    return cls(meta)


def undescribed(schema: dict) -> list[str]:
    """Every input property (of a component or of a type it uses) without a description or without a type."""
    missing = []

    def check(where: str, prop: dict) -> None:
        if not prop.get("description"):
            missing.append(f"{where}: no description")
        if "type" not in prop and "$ref" not in prop:
            missing.append(f"{where}: no type")
        for inner in ("items", "additionalProperties"):
            if isinstance(prop.get(inner), dict):
                check(f"{where}.{inner}", prop[inner])

    for token, resource in schema.get("resources", {}).items():
        for name, prop in resource.get("inputProperties", {}).items():
            check(f"{token}.{name}", prop)
    for token, typ in schema.get("types", {}).items():
        for name, prop in typ.get("properties", {}).items():
            check(f"{token}.{name}", prop)
    return missing


def test_the_schema_is_the_committed_one_and_stable_across_processes():
    assert schema_text() == SCHEMA.read_text(), "regenerate: cd components && python -m gpupools_components > schema.json"
    # Another interpreter, with another hash seed: the same text.
    again = subprocess.run([sys.executable, "-m", "gpupools_components"], cwd=PACKAGE, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": f"{ROOT}{os.pathsep}{PACKAGE}"})
    assert again.returncode == 0, again.stderr
    assert again.stdout == SCHEMA.read_text()


def test_the_schema_is_a_valid_pulumi_package_schema():
    schema = json.loads(SCHEMA.read_text())
    metaschema_validator().validate(schema)
    assert sorted(schema["resources"]) == [f"gpupools:index:{c}" for c in ("GpuPlatform", "GpuPool", "Monitoring", "TeamQueues")]
    assert all(r["isComponent"] for r in schema["resources"].values())


@pytest.mark.parametrize("broken", [
    lambda s: s.__setitem__("name", "gpu pools"),  # not a package name
    lambda s: s["resources"]["gpupools:index:GpuPool"].__setitem__("isComponent", "yes"),
    lambda s: s["types"]["gpupools:index:Pool"].__setitem__("type", "record"),
])
def test_the_metaschema_check_refuses_a_broken_schema(broken):
    schema = json.loads(SCHEMA.read_text())
    broken(schema)
    with pytest.raises(jsonschema.ValidationError):
        metaschema_validator().validate(schema)


def test_every_input_has_a_description_and_a_type():
    assert undescribed(json.loads(SCHEMA.read_text())) == []


def descriptions(node) -> list[str]:
    if isinstance(node, dict):
        own = [node["description"]] if isinstance(node.get("description"), str) else []
        return own + [d for value in node.values() for d in descriptions(value)]
    return [d for value in node for d in descriptions(value)] if isinstance(node, list) else []


def test_every_description_is_one_paragraph():
    """SDK docs show a description as written: no line breaks or indentation from the Python source."""
    found = descriptions(json.loads(SCHEMA.read_text()))
    assert len(found) > 100
    assert [d for d in found if "\n" in d or "  " in d or d != d.strip()] == []


class HalfDocumentedArgs(typing.TypedDict):
    documented: int
    """Has one."""
    forgotten: str


class Thing(pulumi.ComponentResource):
    def __init__(self, name: str, args: HalfDocumentedArgs):
        super().__init__("t:index:Thing", name)


def test_an_input_without_a_description_or_type_is_caught():
    """The same check on a schema the analyzer infers from an argument class missing a docstring, and on one whose
    property lost its type."""
    result = Analyzer("t").analyze([Thing])
    inputs = result["component_definitions"]["Thing"].inputs
    schema = {"resources": {"t:index:Thing": {"inputProperties": {
        k: {"description": v.description, **({"type": v.type.value} if v.type else {})} for k, v in inputs.items()}}}}
    assert undescribed(schema) == ["t:index:Thing.forgotten: no description"]
    typeless = json.loads(SCHEMA.read_text())
    del typeless["types"]["gpupools:index:Pool"]["properties"]["maxNodes"]["type"]
    assert undescribed(typeless) == ["gpupools:index:Pool.maxNodes: no type"]


class WordArgs(typing.TypedDict):
    mode: typing.Literal["none", "mig"]
    """An enumeration as pydantic spells it."""


class DescribedArgs(typing.TypedDict):
    replicas: typing.Annotated[int, "workloads per GPU"]
    """A constraint as pydantic spells it."""


class EitherArgs(typing.TypedDict):
    gpus: int | dict[str, int]
    """A total or units per pool."""


def analyze_args(args: type):
    """Pulumi's analyzer on a component whose `args` is of this class."""
    component = type(f"{args.__name__}Thing", (pulumi.ComponentResource,), {})

    def init(self, name: str, args: args):  # the analyzer reads this annotation
        pass

    component.__init__ = init
    return Analyzer("t").analyze([component])


@pytest.mark.parametrize("args", [WordArgs, DescribedArgs, EitherArgs], ids=lambda c: c.__name__)
def test_the_analyzer_takes_no_literal_annotated_or_union(args):
    """Why the argument classes give enumerations as strings and a number-or-mapping as Any."""
    with pytest.raises(Exception) as caught:  # TypeError, AttributeError or the analyzer's own, by type
        analyze_args(args)
    assert "requires an argument named 'args'" not in str(caught.value)
    assert analyze_args(component_args.Sharing)["component_definitions"]["SharingThing"].inputs["mode"].type.value == "string"


# The argument classes against the stack file's models: the same keys, and the same ones required.
MIRRORS = [
    (component_args.Cluster, stack_models.Cluster), (component_args.Sharing, stack_models.Sharing), (component_args.MigGroup, stack_models.MigGroup), (component_args.Pool, stack_models.Pool),
    (component_args.GpuSoftware, stack_models.GpuSoftware), (component_args.Idle, stack_models.Idle), (component_args.Smtp, stack_models.Smtp),
    (component_args.MonitoringSettings, stack_models.Monitoring), (component_args.Slack, stack_models.SlackReceiver),
    (component_args.Alerts, stack_models.TeamAlerts), (component_args.Team, stack_models.Team), (component_args.Health, stack_models.Health),
    (component_args.Budget, stack_models.Budget), (component_args.Department, stack_models.Department),
    (component_args.Upgrades, stack_models.Upgrades), (component_args.MaintenanceWindow, stack_models.MaintenanceWindow),
    (component_args.MaintenanceExclusion, stack_models.MaintenanceExclusion), (component_args.FleetWorker, stack_models.FleetWorker),
    (component_args.GpuPlatformArgs, stack_models.StackConfig),
    (component_args.SystemPool, stack_models.SystemPool), (component_args.Taint, stack_models.PoolTaint),
    (component_args.Toleration, stack_models.Toleration),
]
# instanceType is required in a stack file unless instanceTypes is given, which the model fills it from.
OPTIONAL_HERE = {"instanceType"}


@pytest.mark.parametrize("args, model", MIRRORS, ids=lambda c: c.__name__)
def test_the_arguments_mirror_the_stack_file_keys(args, model):
    """In the same order too: a key neither has is refused with the list of the others, by the provider before the
    component is built or by the stack file's validation, and both lists read the same."""
    keys = [camel_case(k) for k in typing.get_type_hints(args)]
    stack_keys = [f.alias or n for n, f in model.model_fields.items() if n != "providers"]
    assert keys == stack_keys
    required = {camel_case(k) for k in args.__required_keys__}
    assert required == {f.alias or n for n, f in model.model_fields.items() if f.is_required()} - OPTIONAL_HERE


# --------------------------------------------------------------------------------------------------------------------
# Construct: through the provider, as the engine calls it for a TypeScript or YAML program


@functools.cache
def shared_provider():
    """The provider, made once: making one analyses every component's source for the schema (a tenth of a second), and
    a construct changes nothing in it (pulumi/provider/experimental/component.py, ComponentProvider.construct)."""
    return provider()


def construct(component: str, inputs: dict, config: dict, name: str = "gpu"):
    """Construct a component under the mock engine, with `inputs` as the engine sends them (a protobuf Struct: every
    number a double, secrets and output values by their signatures) and the calling program's stack `config`."""
    struct = json_format.ParseDict(inputs, struct_pb2.Struct())
    package = shared_provider()

    async def program():
        given = await ProviderServicer._construct_inputs(struct, {})
        package.construct(name, f"gpupools:index:{component}", given)

    return run_program(config, "test", program)


def split(config: dict) -> tuple[dict, dict]:
    """A stack file's config as a component's inputs (its gpupools: keys) and the calling program's provider settings."""
    return ({k.partition(":")[2]: v for k, v in config.items() if k.startswith("gpupools:")},
            {k: v for k, v in config.items() if not k.startswith("gpupools:")})


def rows(resources) -> list[tuple]:
    return sorted((r.type, r.name, r.parent_type, r.parent, json.dumps(r.inputs, sort_keys=True)) for r in resources)


def subtree(plan, type_token: str, name: str) -> list:
    """Everything under a resource (parents are known by type and name)."""
    found, todo = [], [(type_token, name)]
    while todo:
        children = plan.children(*todo.pop())
        found += children
        todo += [(r.type, r.name) for r in children]
    return found


def example_stack(name: str) -> dict:
    return yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"]


def test_gpu_platform_through_the_provider_registers_what_the_python_program_does():
    config = example_stack("dev-aws")
    inputs, providers = split(config)
    program = run_program(config, "test")
    constructed = construct("GpuPlatform", inputs, providers, name="gpupools")
    assert len(program.resources) > 100
    assert rows(constructed.resources) == rows(program.resources)


@pytest.mark.parametrize("cloud, pool", [
    ("aws", {"name": "infer", "instanceType": "g5.12xlarge", "maxNodes": 4, "spot": True, "labels": {"team": "search"},
             "sharing": {"mode": "time-slicing", "replicas": 4}}),
    ("azure", {"name": "infer", "instanceType": "Standard_NC24ads_A100_v4", "minNodes": 1, "maxNodes": 2, "sharing": {"mode": "mig", "migProfile": "3g.40gb"}}),
    ("gcp", {"name": "infer", "instanceType": "g2-standard-8", "minNodes": 1, "maxNodes": 3, "zones": ["us-central1-a"]}),
])
def test_a_gpu_pool_through_the_provider_is_the_python_programs_pool(cloud, pool):
    config = stack_config(cloud, pools=[pool], monitoring={"enabled": False})
    config["gpupools:cluster"] = {**config["gpupools:cluster"], "create": False}
    program = run_program(config, "test")
    inputs, providers = split(config)
    inputs = {"pool": inputs.pop("pools")[0], **{k: v for k, v in inputs.items() if k != "monitoring"}}
    constructed = construct("GpuPool", inputs, providers)
    pool_type = {"aws": "gpupools:index:EksGpuNodePool", "azure": "gpupools:index:AksGpuNodePool", "gcp": "gpupools:index:GkeGpuNodePool"}[cloud]
    cluster_type = {"aws": "gpupools:index:EksCluster", "azure": "gpupools:index:AksCluster", "gcp": "gpupools:index:GkeCluster"}[cloud]
    assert [(r.type, r.name) for r in constructed.children("gpupools:index:GpuPool", "gpu")] == [(cluster_type, "ml-test"), (pool_type, "infer")]
    ours = subtree(constructed, pool_type, "infer")
    assert ours and rows(ours) == rows(subtree(program, pool_type, "infer"))
    assert rows(subtree(constructed, cluster_type, "ml-test")) == rows(subtree(program, cluster_type, "ml-test"))
    # Nothing else: no GPU software, no autoscaler, no monitoring.
    assert len(constructed.resources) == 3 + len(ours) + len(subtree(constructed, cluster_type, "ml-test"))


def existing_cluster_stack() -> dict:
    config = example_stack("dev-aws")
    config["gpupools:cluster"] = {"name": "ml-dev", "create": False}
    config["gpupools:autoscaler"] = "cluster-autoscaler"
    return config


@pytest.mark.parametrize("component, keys, part, name", [
    ("TeamQueues", ("cloud", "cluster", "pools", "teams", "quotas", "autoscaler"), "TeamQuotas", "team-quotas"),
    ("Monitoring", ("cloud", "cluster", "pools", "teams", "monitoring", "health"), "GpuMonitoring", "gpu-monitoring"),
])
def test_a_part_through_the_provider_is_the_python_programs_part(component, keys, part, name):
    """Team queues and monitoring on a running cluster: what the Python program's platform builds for them."""
    config = existing_cluster_stack()
    program = run_program(config, "test")
    inputs, providers = split(config)
    constructed = construct(component, {k: inputs[k] for k in keys if k in inputs}, providers)
    theirs = subtree(program, f"gpupools:index:{part}", name)
    assert len(theirs) > 5
    assert rows(subtree(constructed, f"gpupools:index:{part}", name)) == rows(theirs)
    assert constructed.get(f"gpupools:index:{part}", name).parent_type == f"gpupools:index:{component}"


# --------------------------------------------------------------------------------------------------------------------
# Bad input: the stack file's one-line errors


def refusal(component: str, inputs: dict, providers: dict) -> list[str]:
    with pytest.raises(InputPropertiesError) as caught:
        construct(component, inputs, providers)
    text = caught.value.message
    assert "Traceback" not in text and 'File "' not in text
    head, *lines = text.splitlines()
    assert head == f"invalid inputs of gpupools:index:{component} gpu:"
    return lines


def stack_errors(config: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate_stack(config)
    return str(caught.value).splitlines()


def test_a_bad_platform_input_gives_the_stack_files_errors():
    config = example_stack("dev-aws")
    config["gpupools:pools"][1]["instanceType"] = "g6.xlarg"
    config["gpupools:teams"][0]["priority"] = "urgent"
    inputs, providers = split(config)
    lines = refusal("GpuPlatform", inputs, providers)
    assert lines == stack_errors(config)
    assert any(line.startswith("error: pools[1].instanceType: unknown aws GPU instance type 'g6.xlarg'") for line in lines)
    assert any(line.startswith("error: teams[0].priority: ") for line in lines)


def test_a_bad_pool_input_names_the_components_pool_argument():
    config = stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.12xlarge", "maxNodes": 0}])
    inputs, providers = split(config)
    inputs = {"cloud": "aws", "cluster": {"name": "prod"}, "pool": inputs["pools"][0]}
    lines = refusal("GpuPool", inputs, providers)
    assert lines == [line.replace("pools[0]", "pool") for line in stack_errors({**config, "gpupools:cluster": {"name": "prod", "create": False}})]
    assert lines == ["error: pool.maxNodes: input should be greater than or equal to 1 (got 0)"]


@pytest.mark.parametrize("component, change, error", [
    ("GpuPool", {"cluster": {"name": "prod", "create": True}}, "error: cluster.create: a GpuPool joins a cluster that runs already"),
    ("GpuPool", {"autoscaler": "karpenter"}, "error: autoscaler: a GpuPool joins the cluster's running autoscaler"),
    ("TeamQueues", {"cluster": {"name": "prod", "create": True}}, "error: cluster.create: a TeamQueues joins a cluster that runs already"),
    ("Monitoring", {"monitoring": {"enabled": False}}, "error: monitoring.enabled: false leaves a Monitoring component nothing to deploy"),
])
def test_what_a_part_of_the_platform_cannot_do_is_refused(component, change, error):
    inputs = {"cloud": "aws", "cluster": {"name": "prod"}, "pools": [{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}],
              "teams": [{"name": "research", "gpus": 2}]}
    if component == "GpuPool":
        inputs = {"cloud": "aws", "cluster": {"name": "prod"}, "pool": inputs["pools"][0]}
    lines = refusal(component, {**inputs, **change}, {"aws:region": "eu-central-1"})
    assert len(lines) == 1 and lines[0].startswith(error)


def test_the_same_parts_without_the_refused_setting_are_built():
    inputs = {"cloud": "aws", "cluster": {"name": "prod"}, "pools": [{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}],
              "teams": [{"name": "research", "gpus": 2}]}
    queues = construct("TeamQueues", {**inputs, "cluster": {"name": "prod", "create": False}}, {"aws:region": "eu-central-1"})
    assert queues.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue") or queues.of_type("kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue")
    monitoring = construct("Monitoring", {**inputs, "monitoring": {"enabled": True}}, {"aws:region": "eu-central-1"})
    assert monitoring.of_type("kubernetes:helm.sh/v3:Release")
    pool = construct("GpuPool", {"cloud": "aws", "cluster": {"name": "prod"}, "pool": inputs["pools"][0], "autoscaler": "cluster-autoscaler"},
                     {"aws:region": "eu-central-1"})
    assert pool.get("aws:eks/nodeGroup:NodeGroup", "infer")


def slack_team(webhook) -> dict:
    return {"cloud": "aws", "cluster": {"name": "prod"}, "pools": [{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}],
            "teams": [{"name": "research", "gpus": 2, "alerts": {"slack": {"webhook": webhook}}}]}


@pytest.mark.parametrize("webhook", [{**SECRET_SIG, "value": WEBHOOK}, {**OUTPUT_SIG, "value": WEBHOOK, "secret": True}],
                         ids=["secret", "secret-output-value"])
def test_a_secret_webhook_is_taken_and_stays_secret(webhook):
    plan = construct("Monitoring", slack_team(webhook), {"aws:region": "eu-central-1"})
    text = json.dumps([r.inputs for r in plan.resources])
    assert WEBHOOK not in text and "[secret]" in text


def test_a_plaintext_webhook_is_refused_without_being_shown():
    """The stack file's refusal, with the component's way to keep it secret: a secret Output, not `pulumi config set`."""
    inputs = slack_team(WEBHOOK)
    lines = refusal("Monitoring", inputs, {"aws:region": "eu-central-1"})
    assert lines == ["error: teams[0].alerts.slack.webhook: is in plaintext; pass it as a secret Output (pulumi.secret(...) in the "
                     "program that constructs the component)"]
    stack = {"aws:region": "eu-central-1", **{f"gpupools:{k}": v for k, v in inputs.items()}}
    stack["gpupools:cluster"] = {"name": "prod", "create": False}
    (from_file,) = stack_errors(stack)
    assert from_file.startswith("error: teams[0].alerts.slack.webhook: is in plaintext; keep it as a secret: pulumi config set --secret")
    assert WEBHOOK not in "\n".join(lines)


def test_a_plaintext_smtp_password_is_told_to_come_as_a_secret_output():
    inputs = {**slack_team(WEBHOOK.replace("https", "http")), "monitoring": {"smtp": {"smarthost": "smtp.example.com:587",
                                                                                     "from": "gpus@example.com", "password": "hunter2"}}}
    inputs["teams"] = [{k: v for k, v in team.items() if k != "alerts"} for team in inputs["teams"]]
    lines = refusal("Monitoring", inputs, {"aws:region": "eu-central-1"})
    assert lines == ["error: monitoring.smtp.password: the password must be kept as a secret (pass it as a secret Output "
                     "(pulumi.secret(...) in the program that constructs the component))"]
    assert "hunter2" not in "\n".join(lines)


# What other languages send that a stack file cannot hold: each refused as the stack file refuses the same shape, in
# one line naming the field, with no value shown that could be a credential.
TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"  # the form of a GitHub token, pasted where it does not belong
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's unknown value (pulumi/runtime/rpc.py UNKNOWN)
POOL = {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}
AWS = {"aws:region": "eu-central-1"}
UNKNOWN_LINE = ("is known only after deployment (an output of a resource not created yet); gpupools plans pools, quotas and "
                "software from its inputs, so give a value known at preview")


def pool_inputs(**change) -> dict:
    return {"cloud": "aws", "cluster": {"name": "prod"}, "pool": {**POOL, **change}}


def as_pool_stack(pool: dict, cluster: dict | None = None) -> dict:
    """The stack file a GpuPool's inputs stand for: its pool as the one pool, on a cluster that runs already."""
    return {**stack_config("aws", pools=[pool]), "gpupools:cluster": cluster or {"name": "prod", "create": False}}


@pytest.mark.parametrize("change, line", [
    ({"sharing": ["x"]}, "error: pool.sharing: expected a mapping, got a list of 1 item"),
    ({"sharing": TOKEN}, "error: pool.sharing: expected a mapping, got a string of 40 characters"),
    ({"labels": ["team"]}, "error: pool.labels: expected a mapping, got a list of 1 item"),
    ({"sharing": {"mode": "mig", "migLayout": "x"}}, "error: pool.sharing.migLayout: expected a list, got a string of 1 character"),
    ({"spott": True}, "error: pool.spott: unknown key 'spott'; allowed keys: name, instanceTypes, instanceType, gpu, gpuCount, minNodes, "
                      "maxNodes, spot, diskSizeGb, os, labels, taints, sharing, zones, capacity, fabric, topologyLevel, autoRepair, upgrades, "
                      "placement, provisioning, node"),
], ids=["list-for-mapping", "token-for-mapping", "list-for-labels", "string-for-list", "unknown-key"])
def test_a_wrong_nested_input_is_refused_as_the_stack_file_refuses_it(change, line):
    """Pulumi's own mapping of inputs (component.py `map_input_properties`) makes a mapping of anything that is not one
    and drops keys the schema lacks: the pool was built with whole GPUs."""
    lines = refusal("GpuPool", pool_inputs(**change), AWS)
    assert lines == [line]
    assert lines == [text.replace("pools[0]", "pool") for text in stack_errors(as_pool_stack({**POOL, **change}))]
    assert TOKEN not in "\n".join(lines)


@pytest.mark.parametrize("inputs, line", [
    ({**pool_inputs(), "cluster": "prod"}, "error: cluster: expected a mapping, got a string of 4 characters"),
    ({**pool_inputs(), "cluster": UNKNOWN}, f"error: cluster: {UNKNOWN_LINE}"),
    ({**pool_inputs(), "cluster": {"name": "prod", "create": "yes"}}, "error: cluster.create: input should be a valid boolean (got a string of 3 characters)"),
    ({"cloud": "aws", "cluster": {"name": "prod"}}, "error: pool: required, but missing"),
    ({**pool_inputs(), "teams": [{"name": "research", "gpus": 2}]},
     "error: teams: unknown key 'teams'; allowed keys: cloud, cluster, pool, sharing, gpuSoftware, autoscaler, health"),
], ids=["string-for-cluster", "unknown-cluster", "string-for-create", "no-pool", "input-of-another-component"])
def test_a_wrong_component_input_is_refused_in_one_line(inputs, line):
    assert refusal("GpuPool", inputs, AWS) == [line]


@pytest.mark.parametrize("value, line", [
    ([1], "error: pool.maxNodes: input should be a valid integer (got a list of 1 item)"),
    (TOKEN, "error: pool.maxNodes: input should be a valid integer (got a string of 40 characters)"),
    (True, "error: pool.maxNodes: input should be a valid integer (got true)"),
    (2.5, "error: pool.maxNodes: input should be a valid integer (got 2.5)"),
    (UNKNOWN, f"error: pool.maxNodes: {UNKNOWN_LINE}"),
    (OUTPUT_SIG, f"error: pool.maxNodes: {UNKNOWN_LINE}"),
    ({**SECRET_SIG, "value": TOKEN}, "error: pool.maxNodes: input should be a valid integer (got a string of 40 characters)"),
], ids=["list", "token", "boolean", "fraction", "unknown", "unknown-output", "secret-token"])
def test_what_is_not_an_integer_is_refused_where_an_integer_belongs(value, line):
    """Pulumi's mapping calls int() on an integer input: a list or an unknown value ended in a TypeError's traceback,
    and a string in its message quoting the string."""
    lines = refusal("GpuPool", pool_inputs(maxNodes=value), AWS)
    assert lines == [line]
    assert TOKEN not in "\n".join(lines)


def test_a_key_given_twice_is_refused_as_the_stack_file_refuses_it():
    """By the schema's name and by its Python name, which the stack file's models also take (pydantic's
    populate_by_name): one of the two would be left unread."""
    alone = {"name": "infer", "instanceType": "g5.2xlarge", "max_nodes": 3}
    plan = construct("GpuPool", {"cloud": "aws", "cluster": {"name": "prod"}, "pool": alone}, AWS)
    assert plan.get("aws:eks/nodeGroup:NodeGroup", "infer").inputs["scalingConfig"]["maxSize"] == 3
    for pool in ({**POOL, "max_nodes": 3}, {"max_nodes": 3, **POOL}):
        inputs = {"cloud": "aws", "cluster": {"name": "prod"}, "pool": pool}
        lines = refusal("GpuPool", inputs, AWS)
        assert lines == [text.replace("pools[0]", "pool") for text in stack_errors(as_pool_stack(pool))]
        assert lines[0].startswith("error: pool.max_nodes: unknown key 'max_nodes'; allowed keys: name, instanceTypes, instanceType, ")


def test_the_same_integer_as_a_number_is_taken():
    plan = construct("GpuPool", pool_inputs(maxNodes=3.0), AWS)
    assert plan.get("aws:eks/nodeGroup:NodeGroup", "infer").inputs["scalingConfig"]["maxSize"] == 3


@pytest.mark.parametrize("cluster", [{"name": {**SECRET_SIG, "value": "prod"}}, {**SECRET_SIG, "value": {"name": "prod"}},
                                     {"name": {**OUTPUT_SIG, "value": "prod", "secret": True}}],
                         ids=["secret-name", "secret-cluster", "secret-output-name"])
def test_a_mapping_holding_a_secret_is_taken(cluster):
    """The engine marks the whole mapping secret when anything in it is (rpc.py `deserialize_property`); Pulumi's
    mapping took that Output for no mapping at all and refused the cluster's name as missing."""
    plan = construct("GpuPool", {**pool_inputs(), "cluster": cluster}, AWS)
    assert plan.get("aws:eks/nodeGroup:NodeGroup", "infer").inputs["clusterName"] == "prod"


def monitoring_inputs(monitoring: dict) -> dict:
    return {"cloud": "aws", "cluster": {"name": "prod"}, "pools": [POOL], "monitoring": monitoring}


def test_monitoring_settings_beside_a_secret_password_are_kept():
    """A secret SMTP password made all of `monitoring` one secret Output, which Pulumi's mapping dropped: Grafana was
    installed although the settings said no."""
    smtp = {"smarthost": "smtp.example.com:587", "from": "gpus@example.com", "password": {**SECRET_SIG, "value": "hunter2hunter2"}}
    releases = {}
    for settings in ({"grafana": False, "smtp": smtp}, {"grafana": True, "smtp": smtp}):
        plan = construct("Monitoring", monitoring_inputs(settings), AWS)
        (stack,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.name == "kube-prometheus-stack"]
        releases[settings["grafana"]] = stack.inputs["values"]["grafana"]["enabled"]
        assert "hunter2hunter2" not in json.dumps([r.inputs for r in plan.resources])
    assert releases == {False: False, True: True}


def test_team_queues_without_teams_is_refused_in_one_line():
    inputs = {"cloud": "aws", "cluster": {"name": "prod"}, "pools": [POOL]}
    assert refusal("TeamQueues", {**inputs, "teams": []}, AWS) == ["error: teams: at least one team is required (a TeamQueues without teams deploys nothing)"]
    assert refusal("TeamQueues", inputs, AWS) == ["error: teams: required, but missing"]


class ExternalModule(pulumi.runtime.ResourceModule):
    """A resource module as another package's SDK registers it, so that a reference to its resources arrives as the
    resource itself (rpc.py `deserialize_resource`), not as its id or URN."""

    def version(self):
        return None

    def construct(self, name, typ, urn):
        return pulumi.resource.DependencyResource(urn)


@pytest.mark.parametrize("value, what", [
    ({**RESOURCE_SIG, "urn": "urn:pulumi:test::p::ext:index:Cluster::c"}, "a resource reference"),
    ({"4dabf18193072939515e22adb298388d": "c44067f5952c0a294b673a41bacd8c17", "text": TOKEN}, "an asset or archive"),
], ids=["resource", "asset"])
def test_a_resource_or_asset_where_a_plain_value_belongs_is_refused(value, what, monkeypatch):
    monkeypatch.setitem(pulumi.runtime.rpc._RESOURCE_MODULES, "ext:index", [ExternalModule()])
    lines = refusal("GpuPool", pool_inputs(labels={"team": value}), AWS)
    assert lines == [f"error: pool.labels.team: expected a plain value (text, a number, true or false, a list or a mapping), got {what}"]


def test_a_reference_to_a_resource_of_no_known_package_is_its_id():
    """What Pulumi's Python SDK makes of a reference it cannot construct: the resource's id (rpc.py
    `deserialize_resource`), here a name the cluster takes. A package nothing imports: once a test in the same process
    has imported pulumi_aws, its classes are registered and an aws:eks reference would be constructed instead."""
    name = {**RESOURCE_SIG, "urn": "urn:pulumi:test::p::unknownpkg:index/cluster:Cluster::c", "id": "prod"}
    plan = construct("GpuPool", {**pool_inputs(), "cluster": {"name": name}}, AWS)
    assert plan.get("aws:eks/nodeGroup:NodeGroup", "infer").inputs["clusterName"] == "prod"


def test_a_value_known_only_after_deployment_is_refused():
    inputs = {"cloud": "aws", "cluster": {"name": {**OUTPUT_SIG, "dependencies": ["urn:pulumi:test::p::aws:eks/cluster:Cluster::c"]}},
              "pool": {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}}
    lines = refusal("GpuPool", inputs, {"aws:region": "eu-central-1"})
    assert lines == ["error: cluster.name: is known only after deployment (an output of a resource not created yet); gpupools plans pools, "
                     "quotas and software from its inputs, so give a value known at preview"]


def test_a_known_output_of_another_resource_is_taken():
    name = {**OUTPUT_SIG, "value": "prod", "dependencies": ["urn:pulumi:test::p::aws:eks/cluster:Cluster::c"]}
    plan = construct("GpuPool", {"cloud": "aws", "cluster": {"name": name}, "pool": {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}},
                     {"aws:region": "eu-central-1"})
    assert plan.get("aws:eks/nodeGroup:NodeGroup", "infer").inputs["clusterName"] == "prod"


def test_the_provider_settings_come_from_the_calling_programs_config():
    inputs = {"cloud": "aws", "cluster": {"name": "prod"}, "pool": {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}}
    environ = {k: os.environ.pop(k) for k in ("AWS_REGION", "AWS_DEFAULT_REGION") if k in os.environ}
    try:
        lines = refusal("GpuPool", inputs, {})
        assert len(lines) == 1 and lines[0].startswith("error: aws:region: ")
        assert construct("GpuPool", inputs, {"aws:region": "eu-west-1"}).get("aws:eks/nodeGroup:NodeGroup", "infer")
    finally:
        os.environ.update(environ)


# --------------------------------------------------------------------------------------------------------------------
# The plugin process


def test_the_plugin_starts_and_serves_the_schema(plugin):
    """`python components/ <engine>` as Pulumi's Python language host runs a plugin: it prints its port and answers
    GetSchema with the committed schema."""
    with plugin_and_engine(plugin, {}) as (stub, _, _):
        answer = stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=60)
        info = stub.GetPluginInfo(empty_pb2.Empty(), timeout=60)
    assert json.loads(answer.schema) == json.loads(SCHEMA.read_text())
    assert info.version == json.loads(SCHEMA.read_text())["version"]


class MonitorService(resource_pb2_grpc.ResourceMonitorServicer):
    """Pulumi's mock monitor (as `gpupools plan` records with it) served over gRPC, where a plugin process reaches it."""

    def __init__(self, monitor=None):
        self.monitor = monitor

    def SupportsFeature(self, request, context):
        return resource_pb2.SupportsFeatureResponse(hasSupport=self.monitor.SupportsFeature(request).hasSupport)


for _method in ("GetDeploymentInfo", "Invoke", "ReadResource", "RegisterResource", "RegisterResourceOutputs", "RegisterPackage",
                "SignalAndWaitForShutdown"):
    setattr(MonitorService, _method, lambda self, request, context, _name=_method: getattr(self.monitor, _name)(request))


class EngineService(engine_pb2_grpc.EngineServicer):
    def __init__(self):
        self.logs: list[str] = []

    def Log(self, request, context):
        self.logs.append(request.message)
        return empty_pb2.Empty()


@pytest.fixture(scope="module")
def plugin():
    """The plugin process, as Pulumi's language host starts it, and the mock engine and monitor server it talks to; one
    for the tests of this file, as one plugin process serves every Construct of a deployment (the provider server sets
    the stack's options and config again at each Construct: pulumi/provider/server.py, ProviderServicer._construct)."""
    engine, monitor = EngineService(), MonitorService()
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
    resource_pb2_grpc.add_ResourceMonitorServicer_to_server(monitor, server)
    engine_pb2_grpc.add_EngineServicer_to_server(engine, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, str(PACKAGE), f"127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        plugin_port = process.stdout.readline().decode().strip()
        assert plugin_port.isdigit(), process.stderr.read().decode() if process.poll() is not None else plugin_port
        with grpc.insecure_channel(f"127.0.0.1:{plugin_port}") as channel:
            yield types.SimpleNamespace(stub=provider_pb2_grpc.ResourceProviderStub(channel), port=port, engine=engine, monitor=monitor)
    finally:
        process.kill()
        process.wait(timeout=30)
        server.stop(None)


@contextlib.contextmanager
def plugin_and_engine(plugin, config: dict):
    """The plugin process and the mock engine, whose log starts empty, and a monitor of a new plan; yields the
    plugin's stub, a Construct call that records into that plan, and the engine's log."""
    from gpupools.cli.planrun import Plan, _make_monitor

    plan = Plan(stack="test", cloud=None)
    monitor = _make_monitor(plan, config.get("aws:region", "eu-central-1"))
    monitor.make_urn = lambda parent, typ, name: "urn:pulumi:test::gpupools::" + (
        f"{parent.split('::')[2].split('$')[-1]}${typ}" if parent else typ) + f"::{name}"
    plugin.monitor.monitor = monitor
    plugin.engine.logs.clear()

    def call(component: str, inputs: dict | struct_pb2.Struct, name: str = "gpu"):
        struct = inputs if isinstance(inputs, struct_pb2.Struct) else json_format.ParseDict(inputs, struct_pb2.Struct())
        request = provider_pb2.ConstructRequest(
            project="gpupools", stack="test", organization="organization", config=to_pulumi_values(config), dryRun=True,
            monitorEndpoint=f"127.0.0.1:{plugin.port}", type=f"gpupools:index:{component}", name=name, inputs=struct)
        return plugin.stub.Construct(request, timeout=120), plan

    try:
        yield plugin.stub, call, plugin.engine.logs
    finally:
        plugin.monitor.monitor = None


def test_the_plugin_answers_construct_for_a_gpu_pool_as_the_python_program_builds_it(plugin):
    """A Construct call over gRPC to the plugin process, which registers with a mock monitor: the pool and the cluster's
    handle the Python program registers for the same stack."""
    pool = {"name": "infer", "instanceType": "g5.12xlarge", "maxNodes": 4, "sharing": {"mode": "time-slicing", "replicas": 4}}
    config = stack_config("aws", pools=[pool], monitoring={"enabled": False})
    config["gpupools:cluster"] = {"name": "ml-test", "create": False}
    program = run_program(config, "test")
    inputs, providers = split(config)
    with plugin_and_engine(plugin, providers) as (_, construct_call, logs):
        answer, plan = construct_call("GpuPool", {"pool": pool, **{k: v for k, v in inputs.items() if k not in ("pools", "monitoring")}})
    assert answer.urn == "urn:pulumi:test::gpupools::gpupools:index:GpuPool::gpu"
    assert json_format.MessageToDict(answer.state)["clusterName"] == "ml-test"
    for part, name in (("EksGpuNodePool", "infer"), ("EksCluster", "ml-test")):
        ours = subtree(plan, f"gpupools:index:{part}", name)
        assert ours and rows(ours) == rows(subtree(program, f"gpupools:index:{part}", name))
    assert any("ml-test" in line for line in logs)  # the existing cluster's findings reach the engine's log


def test_the_plugin_answers_a_bad_input_with_one_line_per_problem(plugin):
    inputs = {"cloud": "aws", "cluster": {"name": "prod"}, "pool": {"name": "infer", "instanceType": "g5.2xlarg", "maxNodes": 2}}
    with plugin_and_engine(plugin, {"aws:region": "eu-central-1"}) as (_, construct_call, _logs):
        with pytest.raises(grpc.RpcError) as caught:
            construct_call("GpuPool", inputs)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().splitlines() == [
        "invalid inputs of gpupools:index:GpuPool gpu:",
        "error: pool.instanceType: unknown aws GPU instance type 'g5.2xlarg'; closest known: g5.2xlarge, g5.24xlarge, g5.12xlarge"]


def test_the_plugin_manifest_runs_python():
    manifest = yaml.safe_load((PACKAGE / "PulumiPlugin.yaml").read_text())
    assert manifest["runtime"]["name"] == "python"
    assert resources.COMPONENTS and all(c.__module__ == "gpupools_components.resources" for c in resources.COMPONENTS)


# --------------------------------------------------------------------------------------------------------------------
# The examples in other languages. Their SDKs come from `pulumi package add`, whose code generator is the Pulumi CLI's
# (pkg/codegen in Go), which the tests do not have: the TypeScript example is run by node with the SDK replaced by a
# recorder, and what it passes each component is constructed through the provider.

EXAMPLES = ROOT / "examples"
NODE = shutil.which("node")
RECORDER = """
const calls = [];
const record = (type) => class { constructor(name, args) { calls.push({type, name, args}); } };
const gpupools = new Proxy({}, {get: (_, type) => record(type)});
"""


def typescript_calls(source: str) -> list[dict]:
    """The components an annotation-free TypeScript program constructs, with their names and arguments."""
    script = re.sub(r'^import \* as gpupools from "@pulumi/gpupools";$', "", source, flags=re.M)
    script = RECORDER + re.sub(r"^export ", "", script, flags=re.M) + "\nprocess.stdout.write(JSON.stringify(calls));\n"
    result = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_typescript_example_constructs_a_valid_platform():
    calls = typescript_calls((EXAMPLES / "typescript" / "index.ts").read_text())
    assert [(c["type"], c["name"]) for c in calls] == [("GpuPlatform", "gpupools")]
    plan = construct("GpuPlatform", calls[0]["args"], {"aws:region": "eu-central-1"}, name="gpupools")
    assert plan.get("aws:eks/cluster:Cluster", "ml-dev")
    assert {r.name for r in plan.of_type("kubernetes:karpenter.sh/v1:NodePool")} == {"nodepool-gpupools-infer", "nodepool-gpupools-train"}


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_typescript_recorder_sees_a_wrong_argument():
    source = (EXAMPLES / "typescript" / "index.ts").read_text().replace('spot: true', 'spot: "yes"')
    args = typescript_calls(source)[0]["args"]
    lines = refusal_of("GpuPlatform", args, "gpupools")
    assert lines[0] == "error: pools[0].spot: input should be a valid boolean (got a string of 3 characters)"
    assert lines == stack_errors({"aws:region": "eu-central-1", **{f"gpupools:{k}": v for k, v in args.items()}})


def refusal_of(component: str, inputs: dict, name: str) -> list[str]:
    with pytest.raises(InputPropertiesError) as caught:
        construct(component, inputs, {"aws:region": "eu-central-1"}, name=name)
    return caught.value.message.splitlines()[1:]


def test_the_docs_show_the_typescript_example():
    docs = (ROOT / "docs" / "components.md").read_text()
    block = re.search(r"```typescript\n(.*?)```", docs, re.S).group(1)
    assert block in (EXAMPLES / "typescript" / "index.ts").read_text()


@pytest.mark.parametrize("example", ["typescript", "yaml"])
def test_each_example_adds_this_package(example):
    project = yaml.safe_load((EXAMPLES / example / "Pulumi.yaml").read_text())
    assert ((EXAMPLES / example) / project["packages"]["gpupools"]).resolve() == PACKAGE


def test_the_yaml_example_constructs_valid_components():
    project = yaml.safe_load((EXAMPLES / "yaml" / "Pulumi.yaml").read_text())
    schema = json.loads(SCHEMA.read_text())
    built = 0
    for name, resource in project["resources"].items():
        token = resource["type"]
        assert token in schema["resources"]
        assert set(resource["properties"]) <= set(schema["resources"][token]["inputProperties"])
        plan = construct(token.rsplit(":", 1)[1], resource["properties"], {"aws:region": "eu-central-1"}, name=name)
        built += len(plan.resources)
    assert built > 20
    for output in project["outputs"].values():
        resource, _, prop = output.strip("${}").partition(".")
        assert prop in schema["resources"][project["resources"][resource]["type"]]["properties"]


def test_numbers_come_back_as_the_stack_file_reads_them():
    """Every number travels as a double: a whole one is an int again (strict validation takes 8, not 8.0), a fraction
    stays a float."""
    from gpupools_components.inputs import resolved

    value, secret, problems = resolved({"gpus": {"infer": 8.0}, "memoryScaling": 1.5, "zones": ["1"], "spot": True})
    assert value == {"gpus": {"infer": 8}, "memoryScaling": 1.5, "zones": ["1"], "spot": True}
    assert type(value["gpus"]["infer"]) is int and type(value["memoryScaling"]) is float and value["spot"] is True
    assert (secret, problems) == (False, [])
