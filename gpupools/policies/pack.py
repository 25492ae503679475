"""The gpupools policy pack's contents: every policy, in one list, importable without starting anything.

`__main__.py` hands this list to `PolicyPack`, which starts a gRPC server and never returns; tests and
`gpupools check` import this module instead, so both judge with exactly the policies `pulumi preview
--policy-pack policies` runs.
"""

from __future__ import annotations

from typing import Any, Mapping

from pulumi_policy import EnforcementLevel, Policy, PolicyPack
from pulumi_policy import policy as _sdk

from gpupools.policies import (budget, capacity, clusters, fabric, fleet, gpu_pools, helm, identity, lifecycle, monitoring, quotas, security, upgrades,
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
    *fleet.POLICIES,
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
    "node-kubelet-closed",
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


# --------------------------------------------------------------------------------------------------------------------
# The one guard on a policy config, for both gates
#
# `pulumi preview --policy-pack-config FILE` does not hand the file to the pack. The engine reconciles it first (pulumi
# v3.259.0 pkg/resource/analyzer/config.go, ReconcilePolicyPackConfig and applyConfig): every policy starts at its
# default level, `all` then sets every policy's level, and each entry of the file its own; the entry `all` itself is
# passed on as well (applyConfig copies every key). The pack's Configure receives that map (pulumi_policy 1.21.0
# policy.py, _PolicyAnalyzerServicer.Configure) and judges by it. `gpupools check` builds the same map from the file
# (`engine_levels`), and both call `guarded_levels` on it, so the two gates judge one file alike.

LEVELS = ("advisory", "mandatory", "remediate", "disabled")
# Levels below mandatory: what `all` may not set for a security policy.
WEAK_LEVELS = ("advisory", "disabled")


def engine_levels(named: Mapping[str, str | None], policies: list[Policy] | None = None) -> dict[str, str]:
    """Every policy's level, and `all`'s when set, as the engine reconciles a policy config whose entries set the
    levels in `named` (None: an entry that sets settings only)."""
    policies = POLICIES if policies is None else policies
    levels = {p.name: default_level(p).value for p in policies}
    wildcard = named.get("all")
    if wildcard:
        levels = {name: wildcard for name in levels}
        levels["all"] = wildcard
    levels.update({name: level for name, level in named.items() if level and name != "all"})
    return levels


def guarded_levels(levels: Mapping[str, str], policies: list[Policy] | None = None) -> dict[str, str]:
    """The level each policy runs at, from the engine's reconciled levels: what they say, except that `all` never
    lowers a security policy below its default (`{"all": "disabled"}` in a pull request must not switch the gate
    off). What the pack receives cannot tell a security policy lowered by `all` from one named at the same level,
    so both keep their default: a security policy is lowered only when named at a level other than `all`'s."""
    policies = POLICIES if policies is None else policies
    wildcard = levels.get("all")
    out = {}
    for policy in policies:
        default = default_level(policy).value
        level = levels.get(policy.name, default)
        if policy.name in SECURITY_POLICIES and wildcard in WEAK_LEVELS and level == wildcard:
            level = default
        out[policy.name] = level
    return out


def guarded_analyzer() -> type:
    """pulumi_policy's analyzer server class, with the policy config the engine sends passed through `guarded_levels`
    before pulumi_policy stores it. Built on demand, so that `gpupools check`, which never serves, does not depend on
    the server's private class; serving without it is refused (`serve`).

    pulumi-policy v1.13.0 to v1.21.0 (the range pyproject.toml allows), sdk/python/lib/pulumi_policy/policy.py:
    `PolicyPack.__init__` builds `_PolicyAnalyzerServicer(name, version, policies, ...)`, whose `Configure` stores
    each policy's level from the request through `_convert_enforcement_level`."""
    base = getattr(_sdk, "_PolicyAnalyzerServicer", None)
    if not isinstance(base, type) or not all(hasattr(base, a) for a in ("Configure", "_convert_enforcement_level", "_map_enforcement_level")):
        raise RuntimeError("this pulumi_policy has no _PolicyAnalyzerServicer of the form gpupools knows: the policy config guard "
                           "cannot be installed; install pulumi-policy>=1.13,<2")
    if getattr(base, "guards_policy_config", False):
        return base

    class GuardedAnalyzer(base):  # type: ignore[misc, valid-type]
        guards_policy_config = True

        def __init__(self, name: str, version: str, policies: list[Policy], *args: Any, **kwargs: Any) -> None:
            super().__init__(name, version, policies, *args, **kwargs)
            self.guarded_policies = policies

        def Configure(self, request: Any, context: Any) -> Any:
            config = request.policyConfig
            levels = {name: self._convert_enforcement_level(entry.enforcementLevel).value for name, entry in config.items()}
            for name, level in guarded_levels(levels, self.guarded_policies).items():
                if name in config and level != levels[name]:
                    config[name].enforcementLevel = self._map_enforcement_level(EnforcementLevel(level))
            return super().Configure(request, context)

    return GuardedAnalyzer


def serve() -> None:
    """Start the pack's analyzer server for `pulumi preview --policy-pack` and never return (policies/__main__.py).

    `PolicyPack` builds its server from the name `_PolicyAnalyzerServicer` of pulumi_policy.policy (`guarded_analyzer`);
    binding the guarded class to that name makes it serve the guarded one, with everything else of its start-up (the
    gRPC server, the port on stdout) unchanged."""
    _sdk._PolicyAnalyzerServicer = guarded_analyzer()
    PolicyPack(name=PACK_NAME, policies=POLICIES, description=PACK_DESCRIPTION)
