"""Cluster hardening: the controls a new cluster gets by default, the config that switches each, the one-line errors for
bad input, the policies that prove each control (a happy cluster passes, one field changed fails), and exceptions."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.clouds import aws as eks
from gpupools.stack.config import LOG_RETENTION_DAYS
from gpupools.cli.policycheck import run_policies

from conftest import plan_of, stack_config, write_stack
from test_policies import resource_violations, stack_violations

runner = CliRunner()

EKS_CLUSTER = "aws:eks/cluster:Cluster"
KMS_KEY = "aws:kms/key:Key"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
ADDON = "aws:eks/addon:Addon"


def problems(config: dict) -> list[str]:
    from gpupools.stack.errors import ConfigError
    from gpupools.validation.stack import validate_stack

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
    # The node monitoring agent comes beside them: the GPU health checks node repair acts on (docs/node-lifecycle.md).
    assert sorted(addons) == sorted(["vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent", "eks-node-monitoring-agent"])
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
    from gpupools.stack.config import Cluster

    return Cluster(name="ml", **fields)


def test_controls_switch_off_and_policies_then_need_exceptions(tmp_path):
    config = cluster("aws", endpointAccess="public", secretsEncryption=False, controlPlaneLogs=[], authenticationMode="API_AND_CONFIG_MAP",
                     managedAddons=False)
    plan = plan_of(config)
    assert not plan.of_type(KMS_KEY) and not plan.of_type(LOG_GROUP)
    assert sorted(a.inputs["addonName"] for a in plan.of_type(ADDON)) == ["eks-node-monitoring-agent", "eks-pod-identity-agent"]
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
    return _change(props, changes)


DROP = object()
EKS_POLICIES = ("cluster-endpoint-restricted", "eks-secrets-encryption", "eks-control-plane-logs", "eks-access-entries")


@pytest.mark.parametrize("policy", EKS_POLICIES)
def test_happy_eks_cluster_passes(policy):
    assert resource_violations(policy, EKS_CLUSTER, eks_cluster()) == []
    assert resource_violations(policy, EKS_CLUSTER, eks_cluster(vpcConfig__endpointPublicAccess=False, vpcConfig__publicAccessCidrs=DROP)) == []


@pytest.mark.parametrize("policy, change, words", [
    ("cluster-endpoint-restricted", {"vpcConfig__publicAccessCidrs": ["0.0.0.0/0"]}, "whole internet"),
    ("cluster-endpoint-restricted", {"vpcConfig__publicAccessCidrs": DROP}, "publicAccessCidrs: unset"),
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


# --------------------------------------------------------------------------------------------------------------------
# AKS: what a new cluster gets

AKS_CLUSTER = "azure-native:containerservice:ManagedCluster"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"


def test_new_aks_cluster_is_hardened_by_default():
    plan = plan_of(stack_config("azure"))
    i = plan.get(AKS_CLUSTER, "ml-test").inputs
    assert i["apiServerAccessProfile"] == {"enablePrivateCluster": True}
    assert i["disableLocalAccounts"] is True and i["aadProfile"] == {"managed": True, "enableAzureRBAC": True}
    assert i["networkProfile"] == {"networkPlugin": "azure", "networkPluginMode": "overlay", "networkDataplane": "cilium", "networkPolicy": "cilium"}
    assert i["securityProfile"] == {"workloadIdentity": {"enabled": True}} and i["oidcIssuerProfile"] == {"enabled": True}
    assert "addonProfiles" not in i
    # The deployer gets cluster admin through Azure RBAC, since no local admin account remains.
    role = plan.get(ROLE_ASSIGNMENT, "ml-test-deployer-admin").inputs
    assert role["roleDefinitionId"].endswith("/providers/Microsoft.Authorization/roleDefinitions/b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b")
    assert role["scope"].endswith("/resourceGroups/rg-ml/providers/Microsoft.ContainerService/managedClusters/ml-test")
    assert role["principalType"] == "User"
    assert plan.outputs["kubeconfig"] == "[secret]"


def test_aks_switches():
    i = plan_of(cluster("azure", authorizedCidrs=["203.0.113.0/24"], localAccounts=True, networkPolicy=False, azurePolicy=True)).get(
        AKS_CLUSTER, "ml-test").inputs
    assert i["apiServerAccessProfile"] == {"authorizedIPRanges": ["203.0.113.0/24"]}
    assert i["disableLocalAccounts"] is False and i["networkProfile"]["networkPolicy"] == "none"
    assert i["addonProfiles"] == {"azurepolicy": {"enabled": True}}
    assert "apiServerAccessProfile" not in plan_of(cluster("azure", endpointAccess="public")).get(AKS_CLUSTER, "ml-test").inputs


WORKSPACE = "/subscriptions/33333333-3333-3333-3333-333333333333/resourceGroups/rg-logs/providers/Microsoft.OperationalInsights/workspaces/ml-logs"


def test_aks_defender_reports_to_the_given_workspace():
    i = plan_of(cluster("azure", defenderWorkspaceId=WORKSPACE)).get(AKS_CLUSTER, "ml-test").inputs
    assert i["securityProfile"] == {"workloadIdentity": {"enabled": True},
                                    "defender": {"logAnalyticsWorkspaceResourceId": WORKSPACE, "securityMonitoring": {"enabled": True}}}
    (problem,) = problems(cluster("azure", defenderWorkspaceId="ml-logs"))
    assert problem.startswith("error: cluster.defenderWorkspaceId: 'ml-logs' is not a Log Analytics workspace resource ID")


def test_aks_defender_and_policy_are_optional_policies():
    plain = aks_cluster()
    assert resource_violations("aks-defender-and-policy", AKS_CLUSTER, plain) == []
    found = resource_violations("aks-defender-and-policy", AKS_CLUSTER, plain, config={"requireDefender": True, "requireAzurePolicy": True})
    assert len(found) == 2 and "Defender for Containers" in found[0] and "Azure Policy add-on" in found[1]
    on = aks_cluster(securityProfile={"workloadIdentity": {"enabled": True}, "defender": {"securityMonitoring": {"enabled": True}}},
                     addonProfiles={"azurepolicy": {"enabled": True}})
    assert resource_violations("aks-defender-and-policy", AKS_CLUSTER, on, config={"requireDefender": True, "requireAzurePolicy": True}) == []


def test_deployer_principal_type_follows_the_provider_login():
    from gpupools.clouds import azure as aks

    assert aks.deployer_principal_type({}, {}) == "User"
    assert aks.deployer_principal_type({"azure-native:clientId": "44444444-4444-4444-4444-444444444444"}, {}) == "ServicePrincipal"
    assert aks.deployer_principal_type({}, {"ARM_CLIENT_ID": "44444444-4444-4444-4444-444444444444"}) == "ServicePrincipal"
    assert aks.deployer_principal_type({}, {"ARM_USE_MSI": "true"}) == "ServicePrincipal"


def test_entra_id_kubeconfig_logs_in_with_the_azure_cli():
    import yaml

    from gpupools.clouds import azure as aks

    raw = yaml.safe_dump({"users": [{"name": "u", "user": {"exec": {"command": "kubelogin", "args": [
        "get-token", "--login", "devicecode", "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630", "--client-id", "c", "--tenant-id", "t"]}}},
        {"name": "other", "user": {"token": "x"}}]})
    users = yaml.safe_load(aks.exec_kubeconfig(raw))["users"]
    assert users[0]["user"]["exec"]["args"] == ["get-token", "--login", "azurecli", "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630"]
    assert users[1] == {"name": "other", "user": {"token": "x"}}


@pytest.mark.parametrize("fields", [{}, {"authorizedCidrs": ["203.0.113.0/24"], "azurePolicy": True, "networkPolicy": False,
                                     "defenderWorkspaceId": WORKSPACE}])
def test_aks_cluster_inputs_are_containerservice_model_properties(fields):
    models = pytest.importorskip("azure.mgmt.containerservice.models")

    def properties(model) -> set[str]:
        return {f._rest_name_input or n for n, f in vars(model).items() if hasattr(f, "_rest_name_input")}

    i = plan_of(cluster("azure", **fields)).get(AKS_CLUSTER, "ml-test").inputs
    top = properties(models.ManagedClusterProperties) | properties(models.ManagedCluster) | {"location", "tags"}
    assert sorted(set(i) - {"resourceGroupName", "resourceName"} - top) == []
    for key, model in (("aadProfile", models.ManagedClusterAADProfile), ("apiServerAccessProfile", models.ManagedClusterAPIServerAccessProfile),
                       ("networkProfile", models.ContainerServiceNetworkProfile), ("securityProfile", models.ManagedClusterSecurityProfile)):
        if key in i:
            assert sorted(set(i[key]) - properties(model)) == [], key
    network = i["networkProfile"]
    assert network["networkPolicy"] in {e.value for e in models.NetworkPolicy}
    assert network["networkDataplane"] in {e.value for e in models.NetworkDataplane}
    assert network["networkPluginMode"] in {e.value for e in models.NetworkPluginMode}
    assert network["networkPlugin"] in {e.value for e in models.NetworkPlugin}
    if "defender" in i["securityProfile"]:
        defender = i["securityProfile"]["defender"]
        assert sorted(set(defender) - properties(models.ManagedClusterSecurityProfileDefender)) == []
        assert set(defender["securityMonitoring"]) <= properties(models.ManagedClusterSecurityProfileDefenderSecurityMonitoring)
    for name, addon in i.get("addonProfiles", {}).items():
        assert sorted(set(addon) - properties(models.ManagedClusterAddonProfile)) == []


# --------------------------------------------------------------------------------------------------------------------
# AKS policies


def aks_cluster(**changes) -> dict:
    props = {"resourceName": "ml", "resourceGroupName": "rg", "apiServerAccessProfile": {"authorizedIPRanges": ["203.0.113.0/24"]},
             "disableLocalAccounts": True, "aadProfile": {"managed": True, "enableAzureRBAC": True},
             "networkProfile": {"networkPlugin": "azure", "networkPluginMode": "overlay", "networkDataplane": "cilium", "networkPolicy": "cilium"},
             "securityProfile": {"workloadIdentity": {"enabled": True}}, "oidcIssuerProfile": {"enabled": True}}
    return _change(props, changes)


def _change(props: dict, changes: dict) -> dict:
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


AKS_POLICIES = ("cluster-endpoint-restricted", "aks-entra-id-rbac", "cluster-network-policy", "cluster-workload-identity")


@pytest.mark.parametrize("policy", AKS_POLICIES)
def test_happy_aks_cluster_passes(policy):
    assert resource_violations(policy, AKS_CLUSTER, aks_cluster()) == []
    assert resource_violations(policy, AKS_CLUSTER, aks_cluster(apiServerAccessProfile={"enablePrivateCluster": True})) == []


@pytest.mark.parametrize("policy, change, words", [
    ("cluster-endpoint-restricted", {"apiServerAccessProfile": DROP}, "authorizedIPRanges: unset"),
    ("cluster-endpoint-restricted", {"apiServerAccessProfile__authorizedIPRanges": ["0.0.0.0/0"]}, "whole internet"),
    ("cluster-endpoint-restricted", {"apiServerAccessProfile": {"enablePrivateCluster": False}}, "whole internet"),
    ("aks-entra-id-rbac", {"disableLocalAccounts": False}, "keeps local accounts"),
    ("aks-entra-id-rbac", {"aadProfile__enableAzureRBAC": False}, "Azure RBAC"),
    ("aks-entra-id-rbac", {"aadProfile": DROP}, "Entra ID integration"),
    ("cluster-network-policy", {"networkProfile__networkPolicy": "none"}, "enforces no NetworkPolicy"),
    ("cluster-network-policy", {"networkProfile": DROP}, "networkPolicy is unset"),
    ("cluster-workload-identity", {"securityProfile": DROP}, "securityProfile.workloadIdentity.enabled"),
    ("cluster-workload-identity", {"oidcIssuerProfile__enabled": False}, "oidcIssuerProfile.enabled"),
])
def test_aks_cluster_with_a_control_off_fails(policy, change, words):
    found = resource_violations(policy, AKS_CLUSTER, aks_cluster(**change))
    assert found and all("'ml'" in m for m in found) and any(words in m for m in found), found
    assert resource_violations(policy, AKS_CLUSTER, aks_cluster(**change), config={"exceptions": ["ml"]}) == []


def test_aks_controls_off_need_exceptions():
    plan = plan_of(cluster("azure", endpointAccess="public", localAccounts=True, networkPolicy=False))
    assert {v.policy for v in run_policies(plan).mandatory} == {"cluster-endpoint-restricted", "aks-entra-id-rbac", "cluster-network-policy"}


# --------------------------------------------------------------------------------------------------------------------
# GKE: what a new cluster gets

GKE_CLUSTER = "gcp:container/cluster:Cluster"


def test_new_gke_cluster_is_hardened_by_default():
    plan = plan_of(stack_config("gcp"))
    i = plan.get(GKE_CLUSTER, "ml-test").inputs
    assert i["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    assert i["masterAuthorizedNetworksConfig"] == {"cidrBlocks": [], "gcpPublicCidrsAccessEnabled": False}
    assert i["workloadIdentityConfig"]["workloadPool"].endswith(".svc.id.goog")
    assert i["enableShieldedNodes"] is True and i["datapathProvider"] == "ADVANCED_DATAPATH"
    assert i["releaseChannel"] == {"channel": "REGULAR"} and i["deletionProtection"] is False
    assert "binaryAuthorization" not in i and "resourceLabels" not in i
    nat = plan.get("gcp:compute/routerNat:RouterNat", "ml-test-nat").inputs
    assert nat["natIpAllocateOption"] == "AUTO_ONLY" and nat["router"] == "ml-test-nat"
    assert plan.get("gcp:container/nodePool:NodePool", "system").depends("gcp:compute/routerNat:RouterNat", "ml-test-nat")


def test_workload_identity_pool_comes_from_the_provider_when_the_stack_names_no_project(monkeypatch):
    monkeypatch.setenv("GOOGLE_PROJECT", "env-project")
    config = stack_config("gcp")
    config.pop("gcp:project", None)
    i = plan_of(config).get(GKE_CLUSTER, "ml-test").inputs
    assert i["workloadIdentityConfig"] == {"workloadPool": "mock-project.svc.id.goog"}


def test_gke_switches():
    i = plan_of(cluster("gcp", authorizedCidrs=["203.0.113.0/24"], privateNodes=False, networkPolicy=False, releaseChannel="STABLE",
                        production=True, binaryAuthorization=True)).get(GKE_CLUSTER, "ml-test").inputs
    assert "privateClusterConfig" not in i
    assert i["masterAuthorizedNetworksConfig"]["cidrBlocks"] == [{"cidrBlock": "203.0.113.0/24", "displayName": "authorized-0"}]
    assert "datapathProvider" not in i and i["releaseChannel"] == {"channel": "STABLE"}
    assert i["deletionProtection"] is True and i["resourceLabels"] == {"gpupools-production": "true"}
    assert i["binaryAuthorization"] == {"evaluationMode": "PROJECT_SINGLETON_POLICY_ENFORCE"}
    public = plan_of(cluster("gcp", endpointAccess="public", privateNodes=False))
    assert "masterAuthorizedNetworksConfig" not in public.get(GKE_CLUSTER, "ml-test").inputs
    assert not public.of_type("gcp:compute/routerNat:RouterNat")


def test_existing_gke_cluster_without_workload_identity_is_a_clear_error():
    from gpupools.clouds import gcp as gke

    assert gke.existing_cluster_problem("ml", ["p.svc.id.goog"]) is None
    problem = gke.existing_cluster_problem("ml", [])
    assert "'ml' has no Workload Identity" in problem and "--workload-pool" in problem
    assert gke.existing_cluster_problem("ml", [None]) == problem
    # The plan reads the existing cluster (the mock answers with Workload Identity on) and creates none of the controls.
    plan = plan_of(cluster("gcp", create=False))
    assert not plan.of_type(GKE_CLUSTER) and not plan.of_type("gcp:compute/router:Router")


def _sdk_params(cls) -> set[str]:
    import inspect

    return set(inspect.signature(cls.__init__).parameters) - {"self", "__self__"}


def _snake(name: str) -> str:
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@pytest.mark.parametrize("fields", [{}, {"authorizedCidrs": ["203.0.113.0/24"], "production": True, "binaryAuthorization": True}])
def test_gke_inputs_are_pulumi_gcp_input_types(fields):
    """The names Pulumi takes: pulumi_gcp's input types. What the API takes, field by field and enum by enum, is
    checked against Google's discovery document in test_gke_api_model.py."""
    import pulumi_gcp as gcp

    c = gcp.container
    plan = plan_of(cluster("gcp", **fields))
    i = plan.get(GKE_CLUSTER, "ml-test").inputs
    assert {_snake(k) for k in i} <= _sdk_params(c.ClusterArgs)
    nested = {"privateClusterConfig": c.ClusterPrivateClusterConfigArgs, "masterAuthorizedNetworksConfig": c.ClusterMasterAuthorizedNetworksConfigArgs,
              "workloadIdentityConfig": c.ClusterWorkloadIdentityConfigArgs, "releaseChannel": c.ClusterReleaseChannelArgs,
              "binaryAuthorization": c.ClusterBinaryAuthorizationArgs}
    for key, cls in nested.items():
        if key in i:
            assert {_snake(k) for k in i[key]} <= _sdk_params(cls), key
    for block in i["masterAuthorizedNetworksConfig"]["cidrBlocks"]:
        assert {_snake(k) for k in block} <= _sdk_params(c.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs)
    # Values the SDK documents for its free-form strings.
    assert "`ADVANCED_DATAPATH`" in c.ClusterArgs.__init__.__doc__
    if "binaryAuthorization" in i:
        assert "PROJECT_SINGLETON_POLICY_ENFORCE" in c.ClusterBinaryAuthorizationArgs.__init__.__doc__
    assert f"* {i['releaseChannel']['channel']}:" in c.ClusterReleaseChannelArgs.__init__.__doc__
    for typ, cls in (("gcp:compute/router:Router", gcp.compute.RouterArgs), ("gcp:compute/routerNat:RouterNat", gcp.compute.RouterNatArgs)):
        for r in plan.of_type(typ):
            assert {_snake(k) for k in r.inputs} <= _sdk_params(cls), typ
    nat_doc = gcp.compute.RouterNatArgs.__init__.__doc__
    assert "AUTO_ONLY" in nat_doc and "ALL_SUBNETWORKS_ALL_IP_RANGES" in nat_doc


# --------------------------------------------------------------------------------------------------------------------
# GKE policies


def gke_cluster(**changes) -> dict:
    props = {"name": "ml", "location": "us-central1", "privateClusterConfig": {"enablePrivateNodes": True, "enablePrivateEndpoint": False},
             "masterAuthorizedNetworksConfig": {"cidrBlocks": [{"cidrBlock": "203.0.113.0/24"}], "gcpPublicCidrsAccessEnabled": False},
             "workloadIdentityConfig": {"workloadPool": "p.svc.id.goog"}, "enableShieldedNodes": True, "datapathProvider": "ADVANCED_DATAPATH",
             "releaseChannel": {"channel": "REGULAR"}, "deletionProtection": True, "resourceLabels": {"gpupools-production": "true"},
             "binaryAuthorization": {"evaluationMode": "PROJECT_SINGLETON_POLICY_ENFORCE"}}
    return _change(props, changes)


GKE_POLICIES = ("cluster-endpoint-restricted", "gke-private-nodes", "cluster-workload-identity", "cluster-network-policy", "gke-shielded-nodes",
                "gke-release-channel", "gke-deletion-protection", "gke-binary-authorization")


@pytest.mark.parametrize("policy", GKE_POLICIES)
def test_happy_gke_cluster_passes(policy):
    assert resource_violations(policy, GKE_CLUSTER, gke_cluster(), config={"required": True} if policy == "gke-binary-authorization" else None) == []


@pytest.mark.parametrize("policy, change, words", [
    ("cluster-endpoint-restricted", {"masterAuthorizedNetworksConfig": DROP}, "masterAuthorizedNetworksConfig: unset"),
    ("cluster-endpoint-restricted", {"masterAuthorizedNetworksConfig__cidrBlocks": [{"cidrBlock": "0.0.0.0/0"}]}, "0.0.0.0/0"),
    ("cluster-endpoint-restricted", {"masterAuthorizedNetworksConfig__gcpPublicCidrsAccessEnabled": True}, "every Google Cloud public IP"),
    ("gke-private-nodes", {"privateClusterConfig": DROP}, "public IP addresses"),
    ("cluster-workload-identity", {"workloadIdentityConfig": DROP}, "no Workload Identity"),
    ("cluster-network-policy", {"datapathProvider": "LEGACY_DATAPATH"}, "enforces no NetworkPolicy"),
    ("gke-shielded-nodes", {"enableShieldedNodes": False}, "shielded nodes off"),
    ("gke-release-channel", {"releaseChannel__channel": "UNSPECIFIED"}, "no release channel"),
    ("gke-release-channel", {"releaseChannel": DROP}, "is unset"),
    ("gke-deletion-protection", {"deletionProtection": False}, "labelled production"),
])
def test_gke_cluster_with_a_control_off_fails(policy, change, words):
    found = resource_violations(policy, GKE_CLUSTER, gke_cluster(**change))
    assert len(found) == 1 and "'ml'" in found[0] and words in found[0], found
    if policy != "gke-shielded-nodes":  # a node-level control the pack has always enforced without exceptions
        assert resource_violations(policy, GKE_CLUSTER, gke_cluster(**change), config={"exceptions": ["ml"]}) == []


def test_private_endpoint_needs_no_authorized_networks():
    assert resource_violations("cluster-endpoint-restricted", GKE_CLUSTER, gke_cluster(
        privateClusterConfig={"enablePrivateNodes": True, "enablePrivateEndpoint": True}, masterAuthorizedNetworksConfig=DROP)) == []


def test_deletion_protection_only_for_production_unless_configured():
    dev = gke_cluster(deletionProtection=False, resourceLabels=DROP)
    assert resource_violations("gke-deletion-protection", GKE_CLUSTER, dev) == []
    (message,) = resource_violations("gke-deletion-protection", GKE_CLUSTER, dev, config={"allClusters": True})
    assert "deletionProtection is False" in message


def test_binary_authorization_is_optional():
    off = gke_cluster(binaryAuthorization=DROP)
    assert resource_violations("gke-binary-authorization", GKE_CLUSTER, off) == []
    (message,) = resource_violations("gke-binary-authorization", GKE_CLUSTER, off, config={"required": True})
    assert "runs any image" in message


def test_gke_controls_off_need_exceptions():
    plan = plan_of(cluster("gcp", endpointAccess="public", privateNodes=False, networkPolicy=False))
    assert {v.policy for v in run_policies(plan).mandatory} == {"cluster-endpoint-restricted", "gke-private-nodes", "cluster-network-policy"}


# --------------------------------------------------------------------------------------------------------------------
# What the plan and the docs say


def _defaults():
    from gpupools.clouds import azure, gcp
    from gpupools.stack.config import Cluster

    return (("EKS", eks, Cluster(name="x")), ("AKS", azure, Cluster(name="x", resource_group="rg")),
            ("GKE", gcp, Cluster(name="x", location="us-central1")))


def test_docs_table_is_what_a_stack_that_says_nothing_gets():
    from conftest import ROOT
    from gpupools.policies.pack import by_name

    readme = (ROOT / "docs" / "pools.md").read_text()
    policies = by_name()
    for cloud, module, default in _defaults():
        for control in module.cluster_controls(default):
            key = ", ".join(f"`{k.strip()}`" for k in control.key.split(",")) if control.key != "-" else "always on"
            policy = f"`{control.policy}`" if control.policy != "-" else "-"
            assert f"| {cloud} | {control.name} | {control.setting} | {key} | {policy} |" in readme
            assert control.policy == "-" or control.policy in policies


def test_plan_lists_controls_and_what_it_does_not_check_on_existing_clusters(tmp_path):
    from gpupools.cli.planreport import cluster_control_lines
    from gpupools.validation.stack import validate_stack

    new = cluster_control_lines(validate_stack(stack_config("aws")))
    assert "cluster control: API endpoint: private (policy cluster-endpoint-restricted)" in new
    existing = cluster_control_lines(validate_stack(cluster("gcp", create=False)))
    assert "cluster control: Workload Identity: read from the cluster; the deploy stops with an error if it is off, since the pools need it" in existing
    assert existing[-1] == ("cluster controls not checked (existing cluster, not changed by gpupools): deletion protection, "
                            "Binary Authorization (optional)")
    result = runner.invoke(app, ["plan", "--config", str(write_stack(tmp_path, cluster("azure", create=False)))])
    assert result.exit_code == 0 and "cluster controls not checked" in result.output



def test_existing_eks_cluster_is_read_and_what_it_lacks_is_warned():
    assert eks.existing_cluster_findings("ml", False, None, list(eks.DEFAULT_LOG_TYPES), "API") == []
    assert eks.existing_cluster_findings("ml", True, ["203.0.113.0/24"], ["api", "audit", "authenticator", "scheduler"], "API") == []
    found = eks.existing_cluster_findings("ml", True, ["0.0.0.0/0"], ["api"], "API_AND_CONFIG_MAP")
    assert [f.split("'ml' ")[1][:20] for f in found] == ["serves its API endpo", "does not send its au", "authenticates with A"]
    assert "audit, authenticator logs" in found[1]
    # Under the mock engine the program reads the mock's cluster (EKS's defaults) and logs the warnings; the plan keeps
    # them out of its report, which says what `pulumi preview` reads instead.
    plan = plan_of(cluster("aws", create=False, subnetIds=["subnet-a", "subnet-b"]))
    assert len(plan.warnings) == 3 and all(w.startswith("existing EKS cluster 'ml-test'") for w in plan.warnings)


def test_existing_aks_and_gke_clusters_are_read_and_what_they_lack_is_warned():
    from gpupools.clouds import azure as aks
    from gpupools.clouds import gcp as gke

    hardened_aks = {"api_server_access_profile": {"authorized_ip_ranges": ["203.0.113.0/24"]}, "disable_local_accounts": True,
                    "aad_profile": {"managed": True, "enable_azure_rbac": True}, "network_profile": {"network_policy": "cilium"}}
    assert aks.existing_cluster_findings("ml", hardened_aks) == []
    assert aks.existing_cluster_findings("ml", {**hardened_aks, "api_server_access_profile": {"enable_private_cluster": True}}) == []
    assert len(aks.existing_cluster_findings("ml", {**hardened_aks, "disable_local_accounts": False})) == 1
    hardened_gke = {"private_cluster_configs": [{"enable_private_nodes": True, "enable_private_endpoint": False}],
                    "master_authorized_networks_configs": [{"cidr_blocks": [{"cidr_block": "203.0.113.0/24"}]}],
                    "enable_shielded_nodes": True, "datapath_provider": "ADVANCED_DATAPATH", "network_policies": [],
                    "release_channels": [{"channel": "STABLE"}]}
    assert gke.existing_cluster_findings("ml", hardened_gke) == []
    (finding,) = gke.existing_cluster_findings("ml", {**hardened_gke, "release_channels": [{"channel": "UNSPECIFIED"}]})
    assert "no release channel" in finding
    (finding,) = gke.existing_cluster_findings("ml", {**hardened_gke, "enable_shielded_nodes": False})
    assert "shielded nodes off" in finding
    # Under the mock engine (a cluster as each service creates it by default) the program reads and warns.
    for cloud, count in (("azure", 3), ("gcp", 3)):
        plan = plan_of(cluster(cloud, create=False))
        assert len(plan.warnings) == count and all(w.startswith("existing ") for w in plan.warnings), plan.warnings


@pytest.mark.parametrize("ranges, words", [
    (["0.0.0.0/1", "128.0.0.0/1"], "the whole internet (every IPv4 address)"),
    (["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/2"], "the whole internet (every IPv4 address)"),
    (["::/1", "8000::/1"], "the whole internet (every IPv4 address and every IPv6 address)"),
    (["0.0.0.0/4"], "6% of all IPv4 addresses"),
    (["::ffff:0.0.0.0/96"], "the whole internet (every IPv4 address)"),
    (["::ffff:0:0/97", "203.0.113.0/24"], "50% of all IPv4 addresses"),
    (["10.0.0.0/8", "11.0.0.0/8"], "0.78% of all IPv4 addresses"),
    (["2000::/3"], "12% of all IPv6 addresses"),
])
def test_endpoint_policy_judges_how_much_the_ranges_open(ranges, words):
    """Not the spelling 0.0.0.0/0: what the ranges let in together, IPv4, IPv6 and IPv4-mapped IPv6 alike."""
    (message,) = resource_violations("cluster-endpoint-restricted", EKS_CLUSTER, eks_cluster(vpcConfig__publicAccessCidrs=ranges))
    assert words in message, message


@pytest.mark.parametrize("ranges", [["203.0.113.0/24"], ["10.0.0.0/8"], ["2001:db8::/32", "198.51.100.7/32"], ["::ffff:203.0.113.0/120"],
                                    ["10.0.0.0/9", "10.128.0.0/9"]])
def test_endpoint_policy_passes_an_organization_sized_range(ranges):
    assert resource_violations("cluster-endpoint-restricted", EKS_CLUSTER, eks_cluster(vpcConfig__publicAccessCidrs=ranges)) == []


@pytest.mark.parametrize("days, fails", [(1, True), (30, True), (60, True), (90, False), (365, False)])
def test_control_plane_log_retention_has_a_minimum(days, fails):
    group = {"name": "/aws/eks/ml/cluster", "retentionInDays": days}
    found = resource_violations("eks-control-plane-logs", LOG_GROUP, group)
    assert bool(found) is fails, found
    if fails:
        assert f"{days} days, fewer than the 90" in found[0]
    assert resource_violations("eks-control-plane-logs", LOG_GROUP, group, config={"minRetentionDays": 1}) == []
