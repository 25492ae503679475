"""The gate holds against its own pull request: a policy config (which CI reads from the change under review) that
weakens a mandatory policy says so in every output of `gpupools check`, `all` never lowers a security policy, and a
security policy lowered by name prints a warning in every run."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.cli.policycheck import _weakens, config_report, policy_settings
from gpupools.policies import clusters, security, workloads
from gpupools.policies.pack import POLICIES, SECURITY_POLICIES, default_level

from conftest import stack_config

runner = CliRunner()
# A new EKS cluster whose API endpoint is open to the internet and whose Secrets are not envelope-encrypted.
OPEN_CLUSTER = stack_config("aws", cluster={"name": "ml-open", "endpointAccess": "public", "secretsEncryption": False})


def check(stack_file, tmp_path, config: dict | None, *extra: str):
    args = ["check", "--config", str(stack_file(OPEN_CLUSTER))]
    if config is not None:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        args += ["--policy-config", str(path)]
    return runner.invoke(app, [*args, *extra])


@pytest.mark.parametrize("wildcard", ["disabled", "advisory"])
def test_all_cannot_pass_an_open_endpoint_without_secrets_encryption(stack_file, tmp_path, wildcard):
    result = check(stack_file, tmp_path, {"all": wildcard})
    assert result.exit_code == 1, result.stdout
    assert "cluster-endpoint-restricted" in result.stdout and "eks-secrets-encryption" in result.stdout
    assert f'policy config: "all": "{wildcard}" does not lower the security policies' in result.stdout
    summary = result.stdout.strip().splitlines()[-1]
    assert summary.startswith("gpupools check FAILED") and "0 policies" not in summary
    assert "the policy config weakens" in summary
    doc = json.loads(check(stack_file, tmp_path, {"all": wildcard}, "--json").stdout)
    failed = {v["policy"] for v in doc["violations"] if v["level"] == "mandatory"}
    assert {"cluster-endpoint-restricted", "eks-secrets-encryption"} <= failed
    assert doc["policy_config"]["notes"] and doc["policy_config"]["weakened"]


def test_all_disabled_still_runs_every_security_policy():
    settings = policy_settings({"all": "disabled"}, POLICIES)
    running = {name for name, s in settings.items() if s.level != "disabled"}
    assert running == {p.name for p in POLICIES if p.name in SECURITY_POLICIES and default_level(p).value != "advisory"}


def test_a_security_policy_turned_off_by_name_warns_in_every_output(stack_file, tmp_path):
    config = {"cluster-endpoint-restricted": "disabled", "eks-secrets-encryption": {"exceptions": ["ml-open"]}}
    text = check(stack_file, tmp_path, config)
    assert text.exit_code == 0, text.stdout
    warnings = [line for line in text.stdout.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: policy config: cluster-endpoint-restricted is disabled (mandatory by default), which leaves a security policy unenforced",
        'warning: policy config: eks-secrets-encryption.exceptions is ["ml-open"] (default []), which weakens a security policy']
    as_json = check(stack_file, tmp_path, config, "--json")
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout)["policy_config"]["warnings"] == warnings
    assert [line for line in as_json.stderr.splitlines() if line.startswith("warning: ")] == warnings  # in the CI log too
    weakened = json.loads(as_json.stdout)["policy_config"]["weakened"]
    assert weakened[0] == {"policy": "cluster-endpoint-restricted", "setting": "enforcementLevel", "value": "disabled",
                           "default": "mandatory", "security": True, "effect": "weakens"}


@pytest.mark.parametrize("config, line", [
    ({"eks-control-plane-logs": {"minRetentionDays": 7}},
     "warning: policy config: eks-control-plane-logs.minRetentionDays is 7 (default 90), which weakens a security policy"),
    ({"gpu-sharing-sane": {"maxReplicas": 48}}, "policy config: gpu-sharing-sane.maxReplicas is 48 (default 16), which weakens a mandatory policy"),
    ({"gpu-pool-taint": "advisory"}, "policy config: gpu-pool-taint is advisory (mandatory by default), which leaves a mandatory policy unenforced"),
    ({"eks-managed-addons": {"requiredAddons": ["vpc-cni"]}}, "policy config: eks-managed-addons.requiredAddons is"),
])
def test_weakening_a_mandatory_policy_shows_in_text_and_json(stack_file, tmp_path, config, line):
    text = check(stack_file, tmp_path, config)
    assert any(out.startswith(line) for out in text.stdout.splitlines()), text.stdout
    doc = json.loads(check(stack_file, tmp_path, config, "--json").stdout)
    assert [w["policy"] for w in doc["policy_config"]["weakened"]] == [next(iter(config))]


def test_a_stricter_config_is_no_weakening():
    config = {"fleet-budget": {"maxGpus": 8}, "gpu-monitoring-deployed": "mandatory", "eks-imdsv2": {"allNodeGroups": True},
              "gke-shielded-nodes": {"allowOperatorDriverPools": False}, "encrypted-node-disks": {"aksEncryptionAtHost": True},
              "eks-control-plane-logs": {"minRetentionDays": 365, "requiredLogTypes": ["api", "audit", "authenticator", "scheduler"]}}
    assert not config_report(config, POLICIES, policy_settings(config, POLICIES)).weakened


def test_every_setting_of_a_mandatory_policy_has_a_direction():
    """A new config key must be one `_weakens` can judge (max*, min*, exceptions, ...Without..., required*, allow*, or a
    requirement switched off), so that raising it shows as a weakening, not as a mere change."""
    for policy in POLICIES:
        if default_level(policy).value == "advisory" or not policy.config_schema:
            continue
        for key, schema in policy.config_schema.properties.items():
            default = schema.get("default")
            kind = schema["type"]
            if kind in ("integer", "number") and default is None:
                assert key.startswith(("max", "min")), (policy.name, key)  # a limit the policy has none of by default
                continue
            if kind in ("integer", "number"):
                changed = default + 1
            elif kind == "boolean":
                changed = not default
            else:
                changed = default[:-1] if default else ["x"]
            assert _weakens(key, default, changed) is not None, (policy.name, key)


def test_the_security_policies_are_the_pack_s_access_and_exposure_controls():
    names = {p.name for p in POLICIES}
    assert SECURITY_POLICIES <= names
    # Every policy of security.py and clusters.py is one, but the operational ones (docs/policies.md says why).
    operational = {"eks-managed-addons", "gke-release-channel", "gke-deletion-protection"}
    assert {p.name for p in security.POLICIES + clusters.POLICIES} - operational <= SECURITY_POLICIES
    assert "gpu-workload-privileges" in SECURITY_POLICIES and not ({p.name for p in workloads.POLICIES} - SECURITY_POLICIES) - {"gpu-workloads"}
    assert all(default_level(p).value == "mandatory" for p in POLICIES if p.name in SECURITY_POLICIES)


def test_a_config_value_that_is_no_name_is_described(stack_file, tmp_path):
    secret = "PLANTEDz8Kq3Vw7Lm2Xr9Tb4Nc"
    text = check(stack_file, tmp_path, {"cluster-endpoint-restricted": {"exceptions": [secret]}})
    assert secret not in text.stdout + text.stderr
    assert "cluster-endpoint-restricted.exceptions is a list of 1 item (default [])" in text.stdout


@pytest.mark.parametrize("config, expected", [
    ({"fleet-budget": {"maxGpus": "PLANTEDz8Kq3Vw7Lm2Xr9Tb4Nc"}}, "fleet-budget.maxGpus: expected an integer, got a string of 26 characters"),
    ({"PLANTEDz8Kq3Vw7Lm2Xr9Tb4Nc": "disabled"}, "(a string of 26 characters) is not a policy of this pack"),
    ({"fleet-budget": "PLANTEDz8Kq3Vw7Lm2Xr9Tb4Nc"}, "fleet-budget.enforcementLevel: a string of 26 characters is not one of"),
])
def test_a_bad_policy_config_quotes_no_value_that_is_no_name(tmp_path, config, expected):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = runner.invoke(app, ["check", "--stack", "dev-aws", "--policy-config", str(path)])
    assert result.exit_code == 2 and "PLANTED" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: --policy-config: ") and expected in line, line
