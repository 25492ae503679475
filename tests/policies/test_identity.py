"""The nodes' own cloud identity: a dedicated least-privilege GKE node service account, and node-identity-least-privilege
on all three clouds, judged on planned stacks changed one grant at a time."""

from __future__ import annotations

import copy
import functools
import json
import re

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.cli.planrun import PlannedResource, run_program
from gpupools.cli.policycheck import policy_settings, run_policies
from gpupools.clouds import gcp
from gpupools.policies.pack import POLICIES, by_name
from gpupools.stack.values import read_stack_file

from conftest import ROOT, stack_config

POLICY = "node-identity-least-privilege"


@functools.cache
def _planned(stack: str):
    return run_program(read_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml"), stack)


def plan_of(stack: str):
    return copy.deepcopy(_planned(stack))


def violations(plan, config: dict | None = None) -> list[str]:
    settings = policy_settings({POLICY: config}, POLICIES) if config else None
    result = run_policies(plan, settings, policies=[by_name()[POLICY]])
    return [v.message for v in result.violations]


def add(plan, typ: str, name: str, inputs: dict) -> None:
    plan.resources.append(PlannedResource(typ, name, None, inputs, True))


def first(plan, typ: str, name: str | None = None):
    return next(r for r in plan.resources if r.type == typ and (name is None or r.name == name))


@pytest.mark.parametrize("stack", ["dev-aws", "dev-aws-existing", "dev-gcp", "dev-azure"])
def test_the_examples_as_planned_pass(stack):
    assert violations(plan_of(stack)) == []


# --------------------------------------------------------------------------------------------------------------------
# GKE


def test_every_gke_pool_runs_as_the_dedicated_account_with_node_roles_only():
    plan = plan_of("dev-gcp")
    (account,) = [r for r in plan.resources if r.type == "gcp:serviceaccount/account:Account"]
    assert gcp.ACCOUNT_ID.fullmatch(account.inputs["accountId"])
    email = f"{account.inputs['accountId']}@ml-platform-dev.iam.gserviceaccount.com"
    pools = [r for r in plan.resources if r.type == "gcp:container/nodePool:NodePool"]
    assert {p.name for p in pools} >= {"system", "infer", "pretrain"}
    assert {p.inputs["nodeConfig"]["serviceAccount"] for p in pools} == {email}
    grants = {r.inputs["role"]: r.inputs["member"] for r in plan.resources if r.type == "gcp:projects/iAMMember:IAMMember"}
    assert grants == {role: f"serviceAccount:{email}" for role in gcp.NODE_SERVICE_ACCOUNT_ROLES}
    # A pool starts only once its account may write logs and pull images.
    assert all(p.depends("gcp:projects/iAMMember:IAMMember") for p in pools)


@pytest.mark.parametrize("account", [None, "default", "123456789012-compute@developer.gserviceaccount.com"])
def test_a_gke_pool_on_the_default_account_fails(account):
    plan = plan_of("dev-gcp")
    config = first(plan, "gcp:container/nodePool:NodePool", "infer").inputs["nodeConfig"]
    config.pop("serviceAccount")
    if account is not None:
        config["serviceAccount"] = account
    (message,) = violations(plan)
    assert message.startswith("node pool 'infer' runs as the Compute Engine default service account")


@pytest.mark.parametrize("role, fails", [("roles/editor", True), ("roles/storage.admin", True), ("roles/logging.logWriter", False),
                                         ("roles/monitoring.viewer", False)])
def test_a_broad_grant_to_the_node_account_fails(role, fails):
    plan = plan_of("dev-gcp")
    member = first(plan, "gcp:projects/iAMMember:IAMMember").inputs["member"]
    add(plan, "gcp:projects/iAMMember:IAMMember", "extra", {"project": "ml-platform-dev", "role": role, "member": member})
    found = violations(plan)
    assert bool(found) is fails
    if fails:
        assert f"is granted {role}" in found[0]
    # The same role for an account the nodes do not use is no concern of this policy.
    plan = plan_of("dev-gcp")
    add(plan, "gcp:projects/iAMMember:IAMMember", "other", {"project": "ml-platform-dev", "role": role,
                                                            "member": "serviceAccount:ci@ml-platform-dev.iam.gserviceaccount.com"})
    assert violations(plan) == []


def test_an_organisation_may_allow_a_further_role():
    plan = plan_of("dev-gcp")
    member = first(plan, "gcp:projects/iAMMember:IAMMember").inputs["member"]
    add(plan, "gcp:projects/iAMMember:IAMMember", "extra", {"project": "p", "role": "roles/secretmanager.secretAccessor", "member": member})
    assert violations(plan) and violations(plan, {"exceptions": ["roles/secretmanager.secretAccessor"]}) == []


@pytest.mark.parametrize("name", ["ml", "a" * 24, "a" * 25, "gpu-" + "x" * 36])
def test_node_account_ids_fit_iam(name):
    account = gcp.node_account_id(name)
    assert gcp.ACCOUNT_ID.fullmatch(account) and len(account) <= 30
    assert account == f"{name}-nodes" if len(name) <= 24 else re.fullmatch(rf"{name[:17].rstrip('-')}-[0-9a-f]{{6}}-nodes", account)
    assert gcp.node_account_id(name) == account  # stable: a rename would replace every node pool


def test_long_cluster_names_do_not_collide():
    assert gcp.node_account_id("a" * 30 + "x") != gcp.node_account_id("a" * 30 + "y")


def test_a_stack_may_bring_its_own_node_account(stack_file):
    own = "gke-nodes@ml-platform-dev.iam.gserviceaccount.com"
    config = stack_config("gcp")
    config["gpupools:cluster"]["nodeServiceAccount"] = own
    plan = run_program(config, "own")
    assert not [r for r in plan.resources if r.type.startswith(("gcp:serviceaccount/", "gcp:projects/iAMMember"))]
    assert {r.inputs["nodeConfig"]["serviceAccount"] for r in plan.resources if r.type == "gcp:container/nodePool:NodePool"} == {own}


@pytest.mark.parametrize("value, says", [
    ("123456789012-compute@developer.gserviceaccount.com", "is the Compute Engine default service account"),
    ("not-an-email", "is not a Google service account e-mail"),
])
def test_a_bad_node_account_is_one_line(stack_file, value, says):
    config = stack_config("gcp")
    config["gpupools:cluster"]["nodeServiceAccount"] = value
    result = CliRunner().invoke(app, ["plan", "--config", str(stack_file(config))])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: cluster.nodeServiceAccount: ") and says in line, line


def test_node_account_is_refused_off_gcp(stack_file):
    config = stack_config("aws")
    config["gpupools:cluster"]["nodeServiceAccount"] = "gke-nodes@p-1234.iam.gserviceaccount.com"
    result = CliRunner().invoke(app, ["plan", "--config", str(stack_file(config))])
    assert result.exit_code == 2 and "cluster.nodeServiceAccount" in result.stderr and "gcp" in result.stderr


# --------------------------------------------------------------------------------------------------------------------
# EKS


@pytest.mark.parametrize("stack, role", [("dev-aws", "karpenter-node"), ("dev-aws-existing", None)])
@pytest.mark.parametrize("policy, fails", [("AdministratorAccess", True), ("AmazonS3FullAccess", True),
                                           ("AmazonEC2ContainerRegistryPullOnly", False), ("AmazonEKSWorkerNodeMinimalPolicy", False)])
def test_a_broad_policy_on_a_node_role_fails(stack, role, policy, fails):
    plan = plan_of(stack)
    attachments = [r for r in plan.resources if r.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
                   and r.inputs["policyArn"].endswith("/AmazonEKSWorkerNodePolicy") and (role is None or r.name.startswith(role))]
    node_role = attachments[0].inputs["role"]
    add(plan, "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "extra", {"role": node_role, "policyArn": f"arn:aws:iam::aws:policy/{policy}"})
    found = violations(plan)
    assert bool(found) is fails
    if fails:
        assert found == [f"node role {node_role!r} has {policy} attached; every pod that reaches the node's credentials gets it: give "
                         f"workloads their own role (EKS Pod Identity) and keep the node role to the EKS node policies"]


def test_the_same_policy_on_a_role_nodes_do_not_use_is_no_concern():
    plan = plan_of("dev-aws")
    controller = first(plan, "aws:iam/rolePolicy:RolePolicy").inputs["role"]
    add(plan, "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "extra", {"role": controller, "policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"})
    assert violations(plan) == []


@pytest.mark.parametrize("action, fails", [("*", True), ("iam:*", True), (["s3:GetObject", "*"], True), ("s3:GetObject", False)])
def test_an_inline_node_policy_that_allows_everything_fails(action, fails):
    plan = plan_of("dev-aws")
    node_role = first(plan, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass").inputs["spec"]["role"]
    document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": action, "Resource": "*"}]}
    add(plan, "aws:iam/rolePolicy:RolePolicy", "inline", {"role": node_role, "policy": json.dumps(document)})
    assert bool(violations(plan)) is fails
    document["Statement"][0]["Effect"] = "Deny"
    plan = plan_of("dev-aws")
    add(plan, "aws:iam/rolePolicy:RolePolicy", "inline", {"role": node_role, "policy": json.dumps(document)})
    assert violations(plan) == []


# --------------------------------------------------------------------------------------------------------------------
# AKS


@pytest.mark.parametrize("guid, principal, fails", [
    ("b24988ac-6180-42a0-ab88-20f7382dd24c", "ServicePrincipal", True),   # Contributor
    ("8e3af657-a8ff-443c-a75c-2fe8c4bcb635", "ServicePrincipal", True),   # Owner
    ("4d97b98b-1d4f-4787-a291-c67834d212e7", "ServicePrincipal", False),  # Network Contributor
    ("b24988ac-6180-42a0-ab88-20f7382dd24c", "User", False),
])
def test_a_managed_identity_with_a_broad_role_fails(guid, principal, fails):
    plan = plan_of("dev-azure")
    add(plan, "azure-native:authorization:RoleAssignment", "kubelet", {
        "principalId": "11111111-1111-1111-1111-111111111111", "principalType": principal, "scope": "/subscriptions/33333333-3333-3333-3333-333333333333",
        "roleDefinitionId": f"/subscriptions/33333333-3333-3333-3333-333333333333/providers/Microsoft.Authorization/roleDefinitions/{guid}"})
    found = violations(plan)
    assert bool(found) is fails
    if fails:
        assert found[0].startswith("a managed identity is assigned ")


@pytest.mark.parametrize("policy, fails", [("AdministratorAccess", True), ("AmazonEKS_CNI_Policy", False)])
def test_a_broad_policy_listed_on_the_node_role_itself_fails(policy, fails):
    plan = plan_of("dev-aws")
    node_role = first(plan, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass").inputs["spec"]["role"]
    add(plan, "aws:iam/role:Role", "listed", {"name": node_role, "managedPolicyArns": [f"arn:aws:iam::aws:policy/{policy}"]})
    found = violations(plan)
    assert bool(found) is fails
    if fails:
        assert found == [f"node role {node_role!r} lists {policy} in managedPolicyArns; keep the node role to the EKS node policies"]
