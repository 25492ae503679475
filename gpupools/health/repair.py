"""Repaired when a GPU breaks: per pool, what notices a broken GPU and what happens next, and the settings that cannot be.

The engines are the clouds' own: the EKS node monitoring agent with EKS node repair or Karpenter's node repair, AKS
node auto-repair, GKE auto-repair (each cloud module's `repair_facts`). Per pool, `autoRepair: false` turns repair off
where the cloud has a per-pool switch (EKS node groups, GKE node pools).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpupools.core.pools import PoolPlan
from gpupools.stack.config import StackConfig
from gpupools.stack.errors import Problem

KARPENTER = "karpenter"


@dataclass(frozen=True)
class PoolRepair:
    """How a pool's broken GPU is noticed and what then happens to its node."""

    pool: str
    detects: str
    then: str
    repairs: bool  # something replaces or reboots a node whose GPU is broken

    def as_json(self) -> dict:
        return {"pool": self.pool, "detects": self.detects, "then": self.then, "repairs": self.repairs}


def pool_repair(stack: StackConfig, plan: PoolPlan, autoscaler: str) -> PoolRepair:
    detects, then = stack.target.repair_facts(plan, autoscaler)
    return PoolRepair(plan.name, detects, then, not then.startswith("nothing"))


def repair_problems(stack: StackConfig, autoscaler: str) -> list[Problem]:
    """Karpenter repairs every node it made (one feature gate), so a pool cannot opt out there."""
    if autoscaler != KARPENTER:
        return []
    return [Problem(f"pools[{i}].autoRepair", "Karpenter's node repair is one switch for every node it starts and cannot be turned off per pool; "
                                              "remove autoRepair (or use gpupools:autoscaler: cluster-autoscaler, whose node groups take it)")
            for i, pool in enumerate(stack.pools) if pool.auto_repair is False]
