"""The gpupools policy pack's contents: every policy, in one list, importable without starting anything.

`__main__.py` hands this list to `PolicyPack`, which starts a gRPC server and never returns; tests and
`gpupools check` import this module instead, so both judge with exactly the policies `pulumi preview
--policy-pack policies` runs.
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, Policy

from gpupools.policies import (budget, capacity, clusters, fabric, gpu_pools, helm, identity, lifecycle, monitoring, quotas, security, upgrades,
                               versions, workloads)

PACK_NAME = "gpupools"
PACK_DESCRIPTION = "Guardrails for shared GPU node pools on EKS, AKS and GKE: taints, sharing, budget, monitoring, security, cluster hardening, quotas, versions."

POLICIES: list[Policy] = [
    *gpu_pools.POLICIES,
    *helm.POLICIES,
    *budget.POLICIES,
    *monitoring.POLICIES,
    *security.POLICIES,
    *identity.POLICIES,
    *clusters.POLICIES,
    *workloads.POLICIES,
    *quotas.POLICIES,
    *versions.POLICIES,
    *fabric.POLICIES,
    *capacity.POLICIES,
    *lifecycle.POLICIES,
    *upgrades.POLICIES,
]


# The policies that keep the cluster and its nodes closed to outsiders and to each other's workloads: network
# exposure (public endpoint, SSH, private nodes, NetworkPolicy), credentials (instance metadata, Workload
# Identity, plaintext secrets, Secrets encryption in etcd), who may log in (access entries, Entra ID), what may run
# (shielded nodes, Binary Authorization, privileged GPU pods), disk encryption and the audit trail (control-plane
# logs, Defender). A policy config's `all` cannot lower them (a pull request that edits policies/config.json must not
# turn the gate off with one word), and lowering one by name prints a warning in every run of `gpupools check`.
# Left out on purpose: operations (managed add-ons, release channel, deletion protection), cost, scheduling.
SECURITY_POLICIES = frozenset({
    # gpupools/policies/security.py
    "no-public-ssh", "eks-imdsv2", "gke-metadata-server", "gke-shielded-nodes", "no-plaintext-secrets", "encrypted-node-disks",
    # gpupools/policies/clusters.py
    "cluster-endpoint-restricted", "eks-secrets-encryption", "eks-control-plane-logs", "eks-access-entries", "aks-entra-id-rbac",
    "aks-defender-and-policy", "cluster-network-policy", "cluster-workload-identity", "gke-private-nodes", "gke-binary-authorization",
    # gpupools/policies/workloads.py
    "gpu-workload-privileges",
    # gpupools/policies/identity.py
    "node-identity-least-privilege",
})


def by_name() -> dict[str, Policy]:
    return {p.name: p for p in POLICIES}


def default_level(policy: Policy) -> EnforcementLevel:
    return policy.enforcement_level or EnforcementLevel.ADVISORY
