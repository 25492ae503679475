"""The gpupools policy pack's contents: every policy, in one list, importable without starting anything.

`__main__.py` hands this list to `PolicyPack`, which starts a gRPC server and never returns; tests and
`gpupools check` import this module instead, so both judge with exactly the policies `pulumi preview
--policy-pack policies` runs.
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, Policy

from gpupools.policies import budget, capacity, clusters, fabric, gpu_pools, helm, lifecycle, monitoring, quotas, security, versions, workloads

PACK_NAME = "gpupools"
PACK_DESCRIPTION = "Guardrails for shared GPU node pools on EKS, AKS and GKE: taints, sharing, budget, monitoring, security, cluster hardening, quotas, versions."

POLICIES: list[Policy] = [
    *gpu_pools.POLICIES,
    *helm.POLICIES,
    *budget.POLICIES,
    *monitoring.POLICIES,
    *security.POLICIES,
    *clusters.POLICIES,
    *workloads.POLICIES,
    *quotas.POLICIES,
    *versions.POLICIES,
    *fabric.POLICIES,
    *capacity.POLICIES,
    *lifecycle.POLICIES,
]


def by_name() -> dict[str, Policy]:
    return {p.name: p for p in POLICIES}


def default_level(policy: Policy) -> EnforcementLevel:
    return policy.enforcement_level or EnforcementLevel.ADVISORY
