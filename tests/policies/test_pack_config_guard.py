"""One policy config file, one verdict: the pack as `pulumi preview --policy-pack policies --policy-pack-config FILE`
runs it and `gpupools check --policy-config FILE` judge the same resources alike, `all` included.

The pack runs as Pulumi's Python language host starts a policy pack (pulumi v3.259.0
sdk/python/cmd/pulumi-language-python/main.go, RunPlugin: `python -u -m pulumi.policy <engine> <pack dir>`, in the pack
directory), and is spoken to over gRPC as the engine speaks to it: GetAnalyzerInfo, then Configure with the config the
engine reconciles from the file (`reconcile` below, after pulumi v3.259.0 pkg/resource/analyzer/config.go,
parsePolicyPackConfig, ReconcilePolicyPackConfig and applyConfig), then Analyze per resource and AnalyzeStack."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from gpupools.cli.policycheck import policy_settings, read_policy_config, run_policies, urns
from gpupools.policies.pack import POLICIES, engine_levels, guarded_levels
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy

from conftest import ROOT, plan_of, stack_config

# A new EKS cluster whose API endpoint is open to the internet and whose Secrets are not envelope-encrypted, which two
# security policies fail, and whose GPU nodes take work before they are validated, which an advisory policy reports.
OPEN_CLUSTER = stack_config("aws", cluster={"name": "ml-open", "endpointAccess": "public", "secretsEncryption": False},
                            health={"readinessGate": False})
LEVEL = {"advisory": analyzer_pb2.ADVISORY, "mandatory": analyzer_pb2.MANDATORY, "remediate": analyzer_pb2.REMEDIATE,
         "disabled": analyzer_pb2.DISABLED}
LEVEL_NAME = {v: k for k, v in LEVEL.items()}
# Judged differently by design: pulumi_policy hands a pack secrets decrypted, so the pack cannot tell a secret from a
# literal and says so (not applicable); the offline check reads the plan's secret markers (gpupools/policies/security.py).
ONLINE_ONLY_NOT_APPLICABLE = {"no-plaintext-secrets"}


@pytest.fixture(scope="module")
def plan():
    return plan_of(OPEN_CLUSTER, "ci")


@pytest.fixture(scope="module")
def pack():
    """The policy pack of this tree, started as Pulumi starts it, and a gRPC stub to it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the pack's venv installs this tree's gpupools (policies/requirements.txt)
    proc = subprocess.Popen([sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:0", str(ROOT / "policies")], cwd=ROOT / "policies",
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        port = proc.stdout.readline().strip()
        assert port.isdigit(), f"the pack did not start: {port!r} {proc.stderr.read() if proc.poll() is not None else ''}"
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def reconcile(info, raw: dict) -> analyzer_pb2.ConfigureAnalyzerRequest:
    """The ConfigureAnalyzerRequest the engine sends for a policy config file `raw`: defaults from the pack's own
    policy info, then `all`'s level on every policy, then each entry of the file (`all` included) on its own."""
    result = {}
    for p in info.policies:
        schema = json_format.MessageToDict(p.configSchema.properties)
        result[p.name] = [p.enforcementLevel, {k: s["default"] for k, s in schema.items() if "default" in s}]
    parsed = {}
    for key, value in raw.items():
        props = {} if isinstance(value, str) else {k: v for k, v in value.items() if k != "enforcementLevel"}
        level = value if isinstance(value, str) else value.get("enforcementLevel", "")
        if level or props:
            parsed[key] = (level, props)
    if parsed.get("all", ("",))[0]:
        for entry in result.values():
            entry[0] = LEVEL[parsed["all"][0]]
    for key, (level, props) in parsed.items():
        entry = result.setdefault(key, [analyzer_pb2.ADVISORY, {}])
        if level:
            entry[0] = LEVEL[level]
        entry[1] = {**entry[1], **props}
    request = analyzer_pb2.ConfigureAnalyzerRequest()
    for key, (level, props) in result.items():
        request.policyConfig[key].enforcementLevel = level
        request.policyConfig[key].properties.update(props)
    return request


def _options(parent: str | None) -> analyzer_pb2.AnalyzerResourceOptions:
    return analyzer_pb2.AnalyzerResourceOptions(parent=parent or "")


def pack_verdicts(stub, plan, raw: dict) -> set[tuple[str, str, str | None]]:
    stub.Configure(reconcile(stub.GetAnalyzerInfo(empty_pb2.Empty()), raw))
    by_resource = urns(plan)
    index = {(r.type, r.name): r for r in plan.resources}
    requests = []
    for r in plan.resources:
        parent = index.get((r.parent_type, r.parent)) if r.parent_type else None
        props = struct_pb2.Struct()
        props.update(json.loads(json.dumps(r.inputs)))
        requests.append((r, props, by_resource[id(parent)] if parent is not None else None))
    verdicts = set()
    for r, props, parent in requests:
        urn = by_resource[id(r)]
        response = stub.Analyze(analyzer_pb2.AnalyzeRequest(type=r.type, properties=props, urn=urn, name=r.name, options=_options(parent)))
        # A resource's violation without a URN of its own is the resource's (the engine's step generator says so too).
        verdicts |= {(d.policyName, LEVEL_NAME[d.enforcementLevel], d.urn or urn) for d in response.diagnostics}
    stack = [analyzer_pb2.AnalyzerResource(type=r.type, properties=props, urn=by_resource[id(r)], name=r.name, options=_options(parent),
                                           parent=parent or "") for r, props, parent in requests]
    response = stub.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=stack))
    verdicts |= {(d.policyName, LEVEL_NAME[d.enforcementLevel], d.urn or None) for d in response.diagnostics}
    return {v for v in verdicts if v[0] not in ONLINE_ONLY_NOT_APPLICABLE}


def check_verdicts(plan, path: Path) -> set[tuple[str, str, str | None]]:
    result = run_policies(plan, policy_settings(read_policy_config(path), POLICIES))
    return {(v.policy, v.level, v.resource) for v in result.violations if v.policy not in ONLINE_ONLY_NOT_APPLICABLE}


SECURITY = {"cluster-endpoint-restricted", "eks-secrets-encryption"}


@pytest.mark.parametrize("config, failing, advisory", [
    ({}, SECURITY, {"gpu-node-readiness"}),
    # `all` lowers every policy but the security ones, in either gate.
    ({"all": "disabled"}, SECURITY, set()),
    ({"all": "advisory"}, SECURITY, {"gpu-node-readiness"}),
    ({"all": "mandatory"}, SECURITY | {"gpu-node-readiness"}, set()),
    # Named at `all`'s own level, a security policy looks to the pack exactly as one `all` lowered: kept, in both.
    ({"all": "disabled", "cluster-endpoint-restricted": "disabled"}, SECURITY, set()),
    ({"all": "advisory", "eks-secrets-encryption": {"enforcementLevel": "advisory"}}, SECURITY, {"gpu-node-readiness"}),
    # Named at another level, it is lowered, in both.
    ({"all": "disabled", "cluster-endpoint-restricted": "advisory"}, {"eks-secrets-encryption"}, {"cluster-endpoint-restricted"}),
    ({"cluster-endpoint-restricted": "disabled", "eks-secrets-encryption": {"exceptions": ["ml-open"]}}, set(), {"gpu-node-readiness"}),
    ({"gpu-node-readiness": "mandatory"}, SECURITY | {"gpu-node-readiness"}, set()),
])
def test_the_pack_and_the_offline_check_judge_one_config_file_alike(pack, plan, tmp_path, config, failing, advisory):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    online, offline = pack_verdicts(pack, plan, config), check_verdicts(plan, path)
    assert online == offline
    assert {policy for policy, level, _ in online if level == "mandatory"} == failing
    assert {policy for policy, level, _ in online if level == "advisory"} == advisory


def _policy(name: str, level: EnforcementLevel) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(name=name, description=name, validate=lambda args, report: None, enforcement_level=level)


@pytest.mark.parametrize("named, expected", [
    ({}, {"no-public-ssh": "advisory", "eks-imdsv2": "mandatory", "fleet-budget": "mandatory"}),
    ({"all": "disabled"}, {"no-public-ssh": "advisory", "eks-imdsv2": "mandatory", "fleet-budget": "disabled"}),
    ({"all": "advisory"}, {"no-public-ssh": "advisory", "eks-imdsv2": "mandatory", "fleet-budget": "advisory"}),
    ({"all": "mandatory"}, {"no-public-ssh": "mandatory", "eks-imdsv2": "mandatory", "fleet-budget": "mandatory"}),
    ({"all": "disabled", "eks-imdsv2": "advisory", "no-public-ssh": "disabled"},
     {"no-public-ssh": "advisory", "eks-imdsv2": "advisory", "fleet-budget": "disabled"}),
    ({"eks-imdsv2": "disabled", "fleet-budget": "advisory"}, {"no-public-ssh": "advisory", "eks-imdsv2": "disabled", "fleet-budget": "advisory"}),
    ({"all": "remediate", "fleet-budget": "disabled"}, {"no-public-ssh": "remediate", "eks-imdsv2": "remediate", "fleet-budget": "disabled"}),
])
def test_the_guard_never_lets_all_take_a_security_policy_below_its_default(named, expected):
    """Two security policies (one advisory by default, which `all` may not lower either) and one that is not."""
    policies = [_policy("no-public-ssh", EnforcementLevel.ADVISORY), _policy("eks-imdsv2", EnforcementLevel.MANDATORY),
                _policy("fleet-budget", EnforcementLevel.MANDATORY)]
    assert guarded_levels(engine_levels(named, policies), policies) == expected
