"""The policy pack as Pulumi loads it, plus the happy-path resource factories every policy test changes one field of.

Policies are called exactly as pulumi_policy's analyzer calls them: properties deserialized and wrapped in its
unknown-checking proxy, `ResourceValidationArgs` / `StackValidationArgs`, and a report_violation callback.
"""

from __future__ import annotations

import ast
import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.policy import _NotApplicableError
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from gpupools.policies.pack import POLICIES, by_name

from conftest import ROOT

POLICY_DIR = ROOT / "policies"


# --------------------------------------------------------------------------------------------------------------------
# Calling policies the way the analyzer does


def _opts() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def _config(policy, config: dict | None) -> dict:
    schema = policy.config_schema.properties if policy.config_schema else {}
    return {**{k: s["default"] for k, s in schema.items() if "default" in s}, **(config or {})}


def resource_violations(policy_name: str, resource_type: str, props: dict, config: dict | None = None, name: str = "r") -> list[str]:
    """Messages one resource policy reports for one resource (a stack policy: for a stack of that one resource); a
    not-applicable reason counts as none."""
    policy = by_name()[policy_name]
    if isinstance(policy, StackValidationPolicy):
        return stack_violations(policy_name, [(resource_type, name, props)], config)
    assert isinstance(policy, ResourceValidationPolicy)
    messages: list[str] = []
    proxied = unknown_checking_proxy(deserialize_properties(copy.deepcopy(props)))
    args = ResourceValidationArgs(resource_type, proxied, f"urn:pulumi:test::gpupools::{resource_type}::{name}", name, _opts(), None,
                                  _config(policy, config))
    try:
        policy.validate(args, lambda message, urn=None: messages.append(message))
    except _NotApplicableError:
        pass
    return messages


def stack_violations(policy_name: str, resources: list[tuple[str, str, dict]], config: dict | None = None) -> list[str]:
    policy = by_name()[policy_name]
    assert isinstance(policy, StackValidationPolicy)
    messages: list[str] = []
    built = [PolicyResource(t, unknown_checking_proxy(deserialize_properties(copy.deepcopy(p))), f"urn:pulumi:test::gpupools::{t}::{n}", n,
                            _opts(), None, None, [], {}) for t, n, p in resources]
    policy.validate(StackValidationArgs(built, _config(policy, config)), lambda message, urn=None: messages.append(message))
    return messages


# --------------------------------------------------------------------------------------------------------------------
# Happy-path resources, as gpupools registers them


EKS = "aws:eks/nodeGroup:NodeGroup"
AKS = "azure-native:containerservice:AgentPool"
GKE = "gcp:container/nodePool:NodePool"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
QUOTA = "kubernetes:core/v1:ResourceQuota"


def eks_node_group(**changes) -> dict:
    props = {
        "amiType": "AL2023_x86_64_NVIDIA", "capacityType": "ON_DEMAND", "clusterName": "ml", "instanceTypes": ["g5.2xlarge"],
        "labels": {"gpupools.io/gpu": "A10G", "gpupools.io/pool": "infer", "nvidia.com/device-plugin.config": "time-slicing-4"},
        "launchTemplate": {"id": "lt-0123", "version": "1"}, "nodeGroupName": "infer",
        "scalingConfig": {"desiredSize": 0, "maxSize": 6, "minSize": 0},
        "taints": [{"effect": "NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "present"}],
        "nodeRepairConfig": {"enabled": True},
    }
    props.update(changes)
    return props


def aks_agent_pool(**changes) -> dict:
    props = {
        "agentPoolName": "finetune", "enableAutoScaling": True, "enableNodePublicIP": False, "maxCount": 4, "minCount": 0, "count": 0,
        "mode": "User", "vmSize": "Standard_NC24ads_A100_v4",
        "nodeLabels": {"gpupools.io/gpu": "A100-80GB", "gpupools.io/pool": "finetune", "nvidia.com/mig.config": "all-1g.10gb"},
        "nodeTaints": ["nvidia.com/gpu=present:NoSchedule"],
    }
    props.update(changes)
    return props


def gke_node_pool(accelerator: dict | None = None, **node_config) -> dict:
    props = {
        "name": "infer", "cluster": "ml", "location": "us-central1",
        "autoscaling": {"totalMaxNodeCount": 5, "totalMinNodeCount": 0},
        "nodeConfig": {
            "machineType": "g2-standard-8",
            "guestAccelerators": [accelerator or {"count": 1, "type": "nvidia-l4", "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
                                                  "gpuSharingConfig": {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": 3}}],
            "labels": {"gpupools.io/gpu": "L4", "gpupools.io/pool": "infer"},
            "taints": [{"effect": "NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "present"}],
            "workloadMetadataConfig": {"mode": "GKE_METADATA"},
            "shieldedInstanceConfig": {"enableIntegrityMonitoring": True, "enableSecureBoot": True},
        },
    }
    props["nodeConfig"].update(node_config)
    return props


def launch_template(**changes) -> dict:
    props = {"metadataOptions": {"httpEndpoint": "enabled", "httpPutResponseHopLimit": 2, "httpTokens": "required"},
             "tagSpecifications": [{"resourceType": "instance", "tags": {"gpupools.io/pool": "infer"}}]}
    props.update(changes)
    return props


def helm_release(**changes) -> dict:
    props = {"chart": "gpu-operator", "name": "gpu-operator", "namespace": "gpu-operator", "version": "v26.7.0",
             "repositoryOpts": {"repo": "https://helm.ngc.nvidia.com/nvidia"},
             # As on EKS, whose node image brings the driver (driver upgrades: test_policies_upgrades.py).
             "values": {"driver": {"enabled": False}, "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": True}},
                        "mig": {"strategy": "mixed"}}}
    props.update(changes)
    return props


def device_plugin_configmap(replicas: int = 4) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpupools-device-plugin-config", "namespace": "gpu-operator"},
            "data": {"no-sharing": "version: v1\n",
                     f"time-slicing-{replicas}": ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                                  f"    - name: nvidia.com/gpu\n      replicas: {replicas}\n")}}


# --------------------------------------------------------------------------------------------------------------------
# The pack itself


def test_every_policy_has_name_description_level():
    assert len(POLICIES) >= 10
    names = [p.name for p in POLICIES]
    assert len(names) == len(set(names)), names
    for policy in POLICIES:
        assert policy.name and policy.name == policy.name.lower() and " " not in policy.name
        assert policy.description and policy.description.endswith(".")
        assert isinstance(policy.enforcement_level, EnforcementLevel)
        assert isinstance(policy, (ResourceValidationPolicy, StackValidationPolicy))


def test_config_schemas_are_json_schemas_whose_defaults_validate():
    jsonschema = pytest.importorskip("jsonschema")
    with_schema = [p for p in POLICIES if p.config_schema]
    assert {p.name for p in with_schema} >= {"gpu-sharing-sane", "fleet-budget", "team-quota-oversubscription"}
    for policy in with_schema:
        schema = {"type": "object", "properties": policy.config_schema.properties}
        jsonschema.Draft7Validator.check_schema(schema)
        for key, prop in policy.config_schema.properties.items():
            assert prop.get("description"), (policy.name, key)
            if "default" not in prop:  # only a limit may be absent by default: the policy then has none
                assert key.startswith(("max", "min")) and "no cap unless" in prop["description"], (policy.name, key)
                continue
            jsonschema.validate({key: prop["default"]}, schema)


def test_policy_pack_project_files():
    meta = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    runtime = meta["runtime"]
    assert (runtime if isinstance(runtime, str) else runtime["name"]) == "python"
    assert meta["description"]
    requirements = [line.strip() for line in (POLICY_DIR / "requirements.txt").read_text().splitlines()
                    if line.strip() and not line.startswith("#")]
    assert any(r.startswith("pulumi-policy") for r in requirements)
    assert ".." in requirements  # gpupools itself, installed from the project root


def test_main_only_starts_the_pack_built_from_the_importable_list():
    tree = ast.parse((POLICY_DIR / "__main__.py").read_text())
    assert [getattr(n.func, "id", None) for n in ast.walk(tree) if isinstance(n, ast.Call)] == ["serve"]
    imports = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert [(n.module, [a.name for a in n.names]) for n in imports] == [("gpupools.policies.pack", ["serve"])]
    # Nothing besides imports, the docstring and the one serve() statement.
    assert all(isinstance(n, (ast.Import, ast.ImportFrom, ast.Expr)) for n in tree.body)
    # serve() builds the one PolicyPack, from the list `gpupools check` imports.
    pack = ast.parse((ROOT / "gpupools" / "policies" / "pack.py").read_text())
    serve = next(n for n in pack.body if isinstance(n, ast.FunctionDef) and n.name == "serve")
    calls = [n for n in ast.walk(serve) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "PolicyPack"]
    assert len(calls) == 1 and getattr({k.arg: k.value for k in calls[0].keywords}["policies"], "id", None) == "POLICIES"


def test_check_never_imports_policies_main(tmp_path):
    """Constructing a PolicyPack starts a server and blocks; make it explode, then run `gpupools check`."""
    script = tmp_path / "run.py"
    script.write_text(
        "import sys\n"
        "import pulumi_policy, pulumi_policy.policy\n"
        "def boom(*a, **k):\n"
        "    raise SystemExit('PolicyPack constructed')\n"
        "pulumi_policy.PolicyPack.__init__ = boom\n"
        "from gpupools.cli.main import app\n"
        "try:\n"
        "    app(['check', '--stack', 'dev-aws', '--json'])\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "main = [m for m in sys.modules.values() if (getattr(m, '__file__', '') or '').endswith(('policies/__main__.py', 'policies\\\\__main__.py'))]\n"
        "print('MAIN-IMPORTED' if main else 'MAIN-NOT-IMPORTED', code)\n")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "MAIN-NOT-IMPORTED 0" in result.stdout, result.stdout + result.stderr


def test_unknown_values_skip_instead_of_failing():
    """At preview a property computed from another resource is unknown: no violation, no exception."""
    props = eks_node_group(taints=UNKNOWN_STRING_VALUE)
    assert resource_violations("gpu-pool-taint", EKS, props) == []
    template = launch_template(metadataOptions={"httpTokens": UNKNOWN_STRING_VALUE})
    assert resource_violations("eks-imdsv2", LT, template) == []
    release = helm_release(version=UNKNOWN_STRING_VALUE)
    assert resource_violations("helm-release-pinned", RELEASE, release) == []


def test_pack_serves_as_a_pulumi_analyzer():
    """Start the pack the way the Pulumi CLI does and ask it over gRPC: it lists the policies and judges resources."""
    import grpc
    from google.protobuf import empty_pb2, json_format, struct_pb2
    from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

    # The checkout's own package, wherever .venv's editable install points (a second worktree shares one .venv).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen([sys.executable, "-u", "__main__.py"], cwd=POLICY_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    try:
        port = int(process.stdout.readline().strip())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = analyzer_pb2_grpc.AnalyzerStub(channel)
            info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
            assert info.name == "gpupools"
            assert [p.name for p in info.policies] == [p.name for p in POLICIES]
            budget = next(p for p in info.policies if p.name == "fleet-budget")
            assert "no cap unless" in json_format.MessageToDict(budget.configSchema.properties)["maxGpus"]["description"]

            def analyze(resource_type: str, props: dict) -> analyzer_pb2.AnalyzeResponse:
                struct = struct_pb2.Struct()
                struct.update(props)
                return stub.Analyze(analyzer_pb2.AnalyzeRequest(type=resource_type, properties=struct, urn=f"urn:pulumi:s::p::{resource_type}::r",
                                                                name="r"), timeout=30)

            response = analyze(EKS, eks_node_group(taints=[]))
            assert [d.policyName for d in response.diagnostics] == ["gpu-pool-taint"]
            assert response.diagnostics[0].enforcementLevel == analyzer_pb2.MANDATORY
            assert not analyze(EKS, eks_node_group(taints=UNKNOWN_STRING_VALUE)).diagnostics
            secret = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "decrypted-by-the-sdk"}
            response = analyze(RELEASE, helm_release(values={"driver": {"enabled": False}, "grafana": {"adminPassword": secret}}))
            assert not response.diagnostics
            assert "no-plaintext-secrets" in [n.policy_name for n in response.not_applicable]
    finally:
        process.kill()
        process.wait(timeout=30)
