"""Cluster hardening: the controls a new cluster gets by default, the config that switches each, the one-line errors for
bad input, the policies that prove each control (a happy cluster passes, one field changed fails), and exceptions."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpupools.cli import app
from gpupools.clouds import aws as eks
from gpupools.config import LOG_RETENTION_DAYS
from gpupools.policy_check import run_policies

from conftest import plan_of, stack_config, write_stack
from test_policies import resource_violations, stack_violations

runner = CliRunner()

EKS_CLUSTER = "aws:eks/cluster:Cluster"
KMS_KEY = "aws:kms/key:Key"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
ADDON = "aws:eks/addon:Addon"


def problems(config: dict) -> list[str]:
    from gpupools.errors import ConfigError
    from gpupools.validate import validate_stack

    try:
        validate_stack(config)
    except ConfigError as exc:
        return [str(p) for p in exc.problems]
    return []


def cluster(cloud: str, **fields) -> dict:
    base = stack_config(cloud)["gpupools:cluster"]
    return stack_config(cloud, cluster={**base, **fields})


# --------------------------------------------------------------------------------------------------------------------
# Config: one-line errors naming the field


@pytest.mark.parametrize("fields, expected", [
    ({"authorizedCidrs": ["10.0.0.300/8"]}, "error: cluster.authorizedCidrs[0]: not a CIDR block such as 203.0.113.0/24"),
    ({"authorizedCidrs": ["10.0.0.1/8"]}, "error: cluster.authorizedCidrs[0]: not a CIDR block such as 203.0.113.0/24 (with no host bits set)"),
    ({"authorizedCidrs": ["10.0.0.1"]}, "error: cluster.authorizedCidrs[0]: not a CIDR block such as 203.0.113.0/24: the prefix length is missing"),
    ({"endpointAccess": "restricted"}, "error: cluster.authorizedCidrs: empty, but endpointAccess is restricted"),
    ({"endpointAccess": "restricted", "authorizedCidrs": []}, "error: cluster.authorizedCidrs: empty, but endpointAccess is restricted"),
    ({"authorizedCidrs": []}, "error: cluster.authorizedCidrs: empty: list the networks"),
    ({"endpointAccess": "private", "authorizedCidrs": ["10.0.0.0/8"]}, "error: cluster.authorizedCidrs: given, but endpointAccess is private"),
    ({"endpointAccess": "open"}, "error: cluster.endpointAccess: input should be 'private', 'restricted' or 'public'"),
    ({"logRetentionDays": 10}, "error: cluster.logRetentionDays: not a CloudWatch Logs retention period; allowed: 1, 3, 5, 7, 14, 30"),
    ({"logRetentionDays": "90"}, "error: cluster.logRetentionDays: input should be a valid integer"),
    ({"controlPlaneLogs": ["api", "kubelet"]}, "error: cluster.controlPlaneLogs[1]: input should be 'api', 'audit', 'authenticator'"),
    ({"authenticationMode": "CONFIG_MAP"}, "error: cluster.authenticationMode: input should be 'API' or 'API_AND_CONFIG_MAP'"),
    ({"secretsEncryption": "yes"}, "error: cluster.secretsEncryption: input should be a valid boolean"),
])
def test_bad_cluster_controls_are_one_line_errors(fields, expected):
    (problem,) = problems(cluster("aws", **fields))
    assert problem.startswith(expected), problem
    assert "\n" not in problem


@pytest.mark.parametrize("field, value", [("secretsEncryption", False), ("controlPlaneLogs", ["api"]), ("logRetentionDays", 30),
                                          ("authenticationMode", "API"), ("managedAddons", False)])
def test_eks_controls_are_refused_on_other_clouds(field, value):
    (problem,) = problems(cluster("gcp", **{field: value}))
    assert problem == f"error: cluster.{field}: {value!r} is not used on gcp; {field} applies to aws only"


def test_bad_cidr_exits_2_with_one_line(tmp_path):
    path = write_stack(tmp_path, cluster("aws", authorizedCidrs=["office"]))
    for command in ("plan", "check", "render"):
        args = [command, "--config", str(path)] + (["--out", str(tmp_path / "out")] if command == "render" else [])
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (command, result.output)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert lines == ["error: cluster.authorizedCidrs[0]: not a CIDR block such as 203.0.113.0/24 (with no host bits set) (got 'office')"]


def test_retention_periods_are_the_ones_cloudwatch_documents():
    """botocore's model has no enum for retentionInDays; its documentation lists the accepted values."""
    import re

    import botocore.session

    shape = botocore.session.get_session().get_service_model("logs").operation_model("PutRetentionPolicy").input_shape
    text = shape.members["retentionInDays"].documentation
    listed = re.search(r"Possible values are: ([0-9, and]+)\.", text).group(1)
    assert tuple(int(n) for n in re.findall(r"[0-9]+", listed)) == LOG_RETENTION_DAYS


# --------------------------------------------------------------------------------------------------------------------
# EKS: what a new cluster gets


@pytest.fixture(scope="module")
def eks_default():
    return plan_of(stack_config("aws"))


def test_new_eks_cluster_is_hardened_by_default(eks_default):
    i = eks_default.get(EKS_CLUSTER, "ml-test").inputs
    assert i["vpcConfig"]["endpointPublicAccess"] is False and i["vpcConfig"]["endpointPrivateAccess"] is True
    assert "publicAccessCidrs" not in i["vpcConfig"]
    assert i["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True}
    assert i["enabledClusterLogTypes"] == ["api", "audit", "authenticator"]
    key = eks_default.get(KMS_KEY, "ml-test-secrets")
    assert key.inputs["enableKeyRotation"] is True
    assert i["encryptionConfig"]["resources"] == ["secrets"]
    assert i["encryptionConfig"]["provider"]["keyArn"].startswith("arn:aws:kms:eu-central-1:123456789012:key/")
    group = eks_default.get(LOG_GROUP, "ml-test-control-plane").inputs
    assert group == {"name": "/aws/eks/ml-test/cluster", "retentionInDays": eks.DEFAULT_LOG_RETENTION_DAYS}
    cluster = eks_default.get(EKS_CLUSTER, "ml-test")
    assert cluster.depends(LOG_GROUP, "ml-test-control-plane") and cluster.depends(KMS_KEY, "ml-test-secrets")


def test_core_addons_are_managed_with_versions_for_the_cluster_version(eks_default):
    addons = {a.inputs["addonName"]: a for a in eks_default.of_type(ADDON)}
    assert sorted(addons) == sorted(["vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"])
    for addon in addons.values():
        assert addon.inputs["clusterName"] == "ml-test" and addon.inputs["resolveConflictsOnCreate"] == "OVERWRITE"
        assert addon.inputs["addonVersion"].startswith("v")
    # The mock answers kube-proxy with the cluster's minor, as EKS versions it.
    assert addons["kube-proxy"].inputs["addonVersion"].startswith(f"v{eks.DEFAULT_KUBERNETES_VERSION}.")
    assert addons["coredns"].depends("aws:eks/nodeGroup:NodeGroup", "system")


def test_restricted_and_public_endpoints():
    restricted = plan_of(cluster("aws", authorizedCidrs=["203.0.113.0/24", "2001:db8::/32"])).get(EKS_CLUSTER, "ml-test").inputs["vpcConfig"]
    assert restricted["endpointPublicAccess"] is True and restricted["publicAccessCidrs"] == ["203.0.113.0/24", "2001:db8::/32"]
    assert eks.endpoint_config(_cluster(endpoint_access="public")) == {"endpoint_private_access": True, "endpoint_public_access": True,
                                                                        "public_access_cidrs": ["0.0.0.0/0"]}


def _cluster(**fields):
    from gpupools.config import Cluster

    return Cluster(name="ml", **fields)


def test_controls_switch_off_and_policies_then_need_exceptions(tmp_path):
    config = cluster("aws", endpointAccess="public", secretsEncryption=False, controlPlaneLogs=[], authenticationMode="API_AND_CONFIG_MAP",
                     managedAddons=False)
    plan = plan_of(config)
    assert not plan.of_type(KMS_KEY) and not plan.of_type(LOG_GROUP)
    assert [a.inputs["addonName"] for a in plan.of_type(ADDON)] == ["eks-pod-identity-agent"]
    i = plan.get(EKS_CLUSTER, "ml-test").inputs
    assert "encryptionConfig" not in i and i["enabledClusterLogTypes"] == []
    failed = {v.policy for v in run_policies(plan).mandatory}
    assert failed == {"cluster-endpoint-restricted", "eks-secrets-encryption", "eks-control-plane-logs", "eks-access-entries", "eks-managed-addons"}
    # The documented way to mean it: name the cluster in each policy's exceptions; `gpupools check` reports them as notes.
    exceptions = {name: {"exceptions": ["ml-test"]} for name in failed}
    (tmp_path / "policy.json").write_text(json.dumps(exceptions))
    path = write_stack(tmp_path, config)
    result = runner.invoke(app, ["check", "--config", str(path), "--policy-config", str(tmp_path / "policy.json")])
    assert result.exit_code == 0, result.output
    for name in failed:
        assert f"note: {name}" in result.output and "'ml-test' is listed in this policy's exceptions" in result.output


def test_existing_eks_cluster_creates_none_of_it():
    plan = plan_of(cluster("aws", create=False, subnetIds=["subnet-a", "subnet-b"]))
    assert not plan.of_type(EKS_CLUSTER) and not plan.of_type(KMS_KEY) and not plan.of_type(LOG_GROUP) and not plan.of_type(ADDON)


# --------------------------------------------------------------------------------------------------------------------
# EKS policies: a happy cluster passes, one field changed fails


def eks_cluster(**changes) -> dict:
    props = {"name": "ml", "roleArn": "arn:aws:iam::123456789012:role/c", "version": "1.36",
             "vpcConfig": {"subnetIds": ["subnet-a", "subnet-b"], "endpointPrivateAccess": True, "endpointPublicAccess": True,
                           "publicAccessCidrs": ["203.0.113.0/24"]},
             "accessConfig": {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True},
             "enabledClusterLogTypes": ["api", "audit", "authenticator"],
             "encryptionConfig": {"resources": ["secrets"], "provider": {"keyArn": "arn:aws:kms:eu-central-1:123456789012:key/k"}}}
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        target = props
        for part in parents:
            target = target[part]
        if value is DROP:
            target.pop(leaf)
        else:
            target[leaf] = value
    return props


DROP = object()
EKS_POLICIES = ("cluster-endpoint-restricted", "eks-secrets-encryption", "eks-control-plane-logs", "eks-access-entries")


@pytest.mark.parametrize("policy", EKS_POLICIES)
def test_happy_eks_cluster_passes(policy):
    assert resource_violations(policy, EKS_CLUSTER, eks_cluster()) == []
    assert resource_violations(policy, EKS_CLUSTER, eks_cluster(vpcConfig__endpointPublicAccess=False, vpcConfig__publicAccessCidrs=DROP)) == []


@pytest.mark.parametrize("policy, change, words", [
    ("cluster-endpoint-restricted", {"vpcConfig__publicAccessCidrs": ["0.0.0.0/0"]}, "whole internet"),
    ("cluster-endpoint-restricted", {"vpcConfig__publicAccessCidrs": DROP}, "publicAccessCidrs unset"),
    ("cluster-endpoint-restricted", {"vpcConfig__publicAccessCidrs": ["10.0.0.0/8", "::/0"]}, "::/0"),
    ("eks-secrets-encryption", {"encryptionConfig": DROP}, "without envelope encryption"),
    ("eks-secrets-encryption", {"encryptionConfig__resources": []}, "without envelope encryption"),
    ("eks-control-plane-logs", {"enabledClusterLogTypes": ["api", "audit"]}, "authenticator"),
    ("eks-control-plane-logs", {"enabledClusterLogTypes": DROP}, "api, audit, authenticator"),
    ("eks-access-entries", {"accessConfig__authenticationMode": "API_AND_CONFIG_MAP"}, "aws-auth ConfigMap"),
    ("eks-access-entries", {"accessConfig": DROP}, "authenticationMode unset"),
])
def test_eks_cluster_with_a_control_off_fails(policy, change, words):
    (message,) = resource_violations(policy, EKS_CLUSTER, eks_cluster(**change))
    assert "'ml'" in message and words in message
    assert resource_violations(policy, EKS_CLUSTER, eks_cluster(**change), config={"exceptions": ["ml"]}) == []


def test_kms_key_rotation():
    assert resource_violations("eks-secrets-encryption", KMS_KEY, {"enableKeyRotation": True}) == []
    (message,) = resource_violations("eks-secrets-encryption", KMS_KEY, {"enableKeyRotation": False}, name="secrets")
    assert "'secrets'" in message and "enableKeyRotation: true" in message
    assert len(resource_violations("eks-secrets-encryption", KMS_KEY, {})) == 1
    # Asymmetric keys cannot rotate automatically.
    assert resource_violations("eks-secrets-encryption", KMS_KEY, {"keySpec": "RSA_2048", "keyUsage": "SIGN_VERIFY"}) == []


def test_control_plane_log_group_needs_retention():
    group = {"name": "/aws/eks/ml/cluster", "retentionInDays": 90}
    assert resource_violations("eks-control-plane-logs", LOG_GROUP, group) == []
    (message,) = resource_violations("eks-control-plane-logs", LOG_GROUP, {"name": "/aws/eks/ml/cluster"})
    assert "forever" in message
    assert resource_violations("eks-control-plane-logs", LOG_GROUP, {"name": "/app/logs"}) == []


def test_required_log_types_are_configurable():
    assert resource_violations("eks-control-plane-logs", EKS_CLUSTER, eks_cluster(), config={"requiredLogTypes": ["api", "scheduler"]}) != []


def _addons(*names: str, cluster: str = "ml") -> list[tuple[str, str, dict]]:
    return [(ADDON, n, {"clusterName": cluster, "addonName": n, "addonVersion": "v1"}) for n in names]


def test_managed_addons():
    full = ("vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent")
    assert stack_violations("eks-managed-addons", [(EKS_CLUSTER, "ml", eks_cluster()), *_addons(*full)]) == []
    (message,) = stack_violations("eks-managed-addons", [(EKS_CLUSTER, "ml", eks_cluster()), *_addons(*full[1:])])
    assert "vpc-cni" in message and "'ml'" in message
    (message,) = stack_violations("eks-managed-addons", [(EKS_CLUSTER, "ml", eks_cluster()), *_addons(*full, cluster="other")])
    assert "vpc-cni, kube-proxy, coredns, eks-pod-identity-agent" in message
