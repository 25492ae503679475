"""node-identity-least-privilege: what the nodes' own cloud identity may do.

Every GPU node runs whatever image a team schedules on it, so a container that breaks out, or any pod that can reach
the node's credentials, acts as the node's identity. That identity needs to write logs and metrics and pull images,
nothing more; workloads get their own identities (Workload Identity, Pod Identity).

- GKE: every node pool names a service account, not the Compute Engine default one (which holds the project's Editor
  role), and the project grants that account only node roles (GKE's "Configure node service accounts":
  roles/container.defaultNodeServiceAccount, or the roles it replaces, plus image pulls; CIS GKE Benchmark 5.2.1).
- EKS: the roles node groups and Karpenter's EC2NodeClasses use carry only the managed policies the EKS node role
  needs (EKS user guide "Amazon EKS node IAM role": AmazonEKSWorkerNodePolicy or its minimal form,
  AmazonEC2ContainerRegistryReadOnly or PullOnly, AmazonEKS_CNI_Policy; AmazonSSMManagedInstanceCore as Karpenter's
  getting-started node role has), and no inline statement allows every action.
- AKS: no managed identity (principal type ServicePrincipal, which the kubelet and cluster identities are) is
  assigned Owner, Contributor or User Access Administrator (Azure built-in role IDs).

`exceptions` lists further policy ARNs, GCP roles or Azure role definition IDs the organisation allows.
"""

from __future__ import annotations

import json
from typing import Any

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ReportViolation, StackValidationArgs, StackValidationPolicy

from gpupools.policies._readback import EC2_NODE_CLASS, EKS_NODE_GROUP, GKE_NODE_POOL
from gpupools.policies._props import get, is_unknown, items, plain

IAM_ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
IAM_ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
IAM_ROLE = "aws:iam/role:Role"
GCP_IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
GCP_IAM_BINDING = "gcp:projects/iAMBinding:IAMBinding"
AZURE_ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"

EKS_NODE_POLICIES = frozenset(f"arn:aws:iam::aws:policy/{name}" for name in (
    "AmazonEKSWorkerNodePolicy", "AmazonEKSWorkerNodeMinimalPolicy", "AmazonEC2ContainerRegistryReadOnly",
    "AmazonEC2ContainerRegistryPullOnly", "AmazonEKS_CNI_Policy", "AmazonSSMManagedInstanceCore"))
GKE_NODE_ROLES = frozenset({
    "roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader",
    # What roles/container.defaultNodeServiceAccount bundles, granted one by one by older guides and blueprints.
    "roles/logging.logWriter", "roles/monitoring.metricWriter", "roles/monitoring.viewer", "roles/stackdriver.resourceMetadata.writer",
    "roles/autoscaling.metricsWriter", "roles/storage.objectViewer"})
# Azure built-in roles that manage resources or access (learn.microsoft.com, "Azure built-in roles").
AZURE_BROAD_ROLES = {"8e3af657-a8ff-443c-a75c-2fe8c4bcb635": "Owner", "b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
                     "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9": "User Access Administrator"}
DEFAULT_COMPUTE_SUFFIX = "-compute@developer.gserviceaccount.com"


def _role_name(value: Any) -> str | None:
    """An IAM role's name from its name or ARN (arn:aws:iam::<account>:role/<path/>name)."""
    if not isinstance(value, str) or is_unknown(value):
        return None
    return value.rsplit("/", 1)[-1] if value.startswith("arn:") else value


def _node_roles(resources: list) -> set[str]:
    roles = set()
    for r in resources:
        if r.resource_type == EKS_NODE_GROUP:
            roles.add(_role_name(get(r.props, "nodeRoleArn")))
        elif r.resource_type == EC2_NODE_CLASS:
            roles.add(_role_name(get(r.props, "spec", "role")))
    return roles - {None}


def _allows_everything(document: Any) -> bool:
    """An inline policy with an Allow statement on every action ("*") or every action of IAM ("iam:*")."""
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError:
            return False
    statements = get(document, "Statement")
    for statement in statements if isinstance(statements, list) else [statements]:
        if get(statement, "Effect") != "Allow":
            continue
        actions = get(statement, "Action")
        actions = [actions] if isinstance(actions, str) else [a for a in items(actions) if isinstance(a, str)]
        if any(a in ("*", "iam:*") for a in actions):
            return True
    return False


def eks_findings(resources: list, allowed: frozenset[str]) -> list[tuple[str, str | None]]:
    nodes = _node_roles(resources)
    found = []
    for r in resources:
        if r.resource_type == IAM_ROLE_POLICY_ATTACHMENT and _role_name(get(r.props, "role")) in nodes:
            arn = get(r.props, "policyArn")
            if isinstance(arn, str) and not is_unknown(arn) and arn not in EKS_NODE_POLICIES | allowed:
                found.append((f"node role {_role_name(get(r.props, 'role'))!r} has {arn.rsplit('/', 1)[-1]} attached; every pod that reaches "
                              f"the node's credentials gets it: give workloads their own role (EKS Pod Identity) and keep the node role to "
                              f"the EKS node policies", r.urn))
        elif r.resource_type == IAM_ROLE_POLICY and _role_name(get(r.props, "role")) in nodes and _allows_everything(plain(get(r.props, "policy"))):
            found.append((f"node role {_role_name(get(r.props, 'role'))!r} has an inline policy that allows every action; remove it, "
                          f"nodes need only the EKS node policies", r.urn))
        elif r.resource_type == IAM_ROLE and _role_name(get(r.props, "name")) in nodes:
            for arn in items(get(r.props, "managedPolicyArns")):
                if isinstance(arn, str) and not is_unknown(arn) and arn not in EKS_NODE_POLICIES | allowed:
                    found.append((f"node role {get(r.props, 'name')!r} lists {arn.rsplit('/', 1)[-1]} in managedPolicyArns; keep the node role "
                                  f"to the EKS node policies", r.urn))
    return found


def gke_findings(resources: list, allowed: frozenset[str]) -> list[tuple[str, str | None]]:
    found, accounts = [], set()
    for r in resources:
        if r.resource_type != GKE_NODE_POOL:
            continue
        account = get(r.props, "nodeConfig", "serviceAccount")
        if is_unknown(account):
            continue
        if account in (None, "", "default") or (isinstance(account, str) and account.endswith(DEFAULT_COMPUTE_SUFFIX)):
            found.append((f"node pool {get(r.props, 'name') or r.name!r} runs as the Compute Engine default service account, which holds the "
                          f"project's Editor role; set nodeConfig.serviceAccount to a dedicated account (gpupools creates one unless "
                          f"cluster.nodeServiceAccount names another)", r.urn))
        elif isinstance(account, str):
            accounts.add(account)
    for r in resources:
        if r.resource_type not in (GCP_IAM_MEMBER, GCP_IAM_BINDING):
            continue
        members = [get(r.props, "member")] if r.resource_type == GCP_IAM_MEMBER else list(items(get(r.props, "members")))
        role = get(r.props, "role")
        node_members = [m for m in members if isinstance(m, str) and m.removeprefix("serviceAccount:") in accounts]
        if node_members and isinstance(role, str) and not is_unknown(role) and role not in GKE_NODE_ROLES | allowed:
            found.append((f"the nodes' service account {node_members[0].removeprefix('serviceAccount:')} is granted {role}; every pod that reaches "
                          f"the node's credentials gets it: grant workloads their own account through Workload Identity", r.urn))
    return found


def aks_findings(resources: list, allowed: frozenset[str]) -> list[tuple[str, str | None]]:
    found = []
    for r in resources:
        if r.resource_type != AZURE_ROLE_ASSIGNMENT or get(r.props, "principalType") != "ServicePrincipal":
            continue
        definition = get(r.props, "roleDefinitionId")
        guid = definition.rsplit("/", 1)[-1].lower() if isinstance(definition, str) and not is_unknown(definition) else None
        if guid in AZURE_BROAD_ROLES and definition not in allowed and guid not in allowed:
            found.append((f"a managed identity is assigned {AZURE_BROAD_ROLES[guid]}; the kubelet and cluster identities act for every node, "
                          f"so they hold only the narrow roles AKS documents (e.g. Network Contributor on the node subnet)", r.urn))
    return found


def validate_node_identity(args: StackValidationArgs, report: ReportViolation) -> None:
    allowed = frozenset(e for e in args.get_config().get("exceptions", []) if isinstance(e, str))
    for findings in (eks_findings, gke_findings, aks_findings):
        for message, urn in findings(args.resources, allowed):
            report(message, urn)


node_identity_least_privilege = StackValidationPolicy(
    name="node-identity-least-privilege",
    description="The nodes' cloud identity can write logs and metrics and pull images, nothing more: no Compute Engine default "
                "account, no broad policies on EKS node roles, no Owner or Contributor for AKS managed identities.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "exceptions": {"type": "array", "items": {"type": "string"}, "default": [],
                       "description": "Further IAM policy ARNs (EKS), roles (GKE) or role definition IDs (AKS) a node identity may hold."},
    }),
    validate=validate_node_identity,
)

POLICIES = [node_identity_least_privilege]
