"""Every pool planned: its cloud resolves the hardware, the core decides sharing, labels and taints."""

from __future__ import annotations

import dataclasses

from gpupools.capacity import sources as capacity
from gpupools.core.catalog import load_catalog
from gpupools.core.pools import GPU_LABEL, GPU_TAINT, POOL_LABEL, PoolPlan, pool_taints
from gpupools.core.sharing import mechanism, resolve_installer
from gpupools.health.readiness import startup_taints
from gpupools.stack.config import Pool, StackConfig


def plan_pool(stack: StackConfig, pool: Pool) -> PoolPlan:
    cloud = stack.target
    hardware, problems = cloud.resolve(pool, load_catalog(), pool.name)
    if hardware is None:  # validate_stack reports these; a plan is only made for a valid stack
        raise ValueError("; ".join(str(p) for p in problems))
    sharing = stack.sharing_of(pool)
    installer = resolve_installer(stack.target, stack.gpu_software.installer)
    mech = mechanism(stack.target, installer, pool.os, sharing, hardware, stack.gpu_software.mig_strategy)
    selector = cloud.pod_node_selector(pool)
    labels = {POOL_LABEL: pool.name, GPU_LABEL: hardware.gpu.name, **pool.labels, **mech.node_labels, **selector}
    plan = PoolPlan(pool=pool, sharing=sharing, hardware=hardware, mechanism=mech, labels=labels, taints=(GPU_TAINT, *pool_taints(pool)),
                    selector=selector)
    plan = cloud.managed_plan(plan)
    return dataclasses.replace(plan, startup_taints=startup_taints(stack, plan))


def plan_pools(stack: StackConfig) -> list[PoolPlan]:
    return [plan_pool(stack, pool) for pool in stack.pools]


def capacity_report(stack: StackConfig, plan: PoolPlan, autoscaler: str) -> dict:
    """Where the pool's nodes come from, in order, as `gpupools plan` prints it and `plan --json` carries it.

    `autoscaler`: the resolved autoscaler (Karpenter and managed node groups use reservations differently)."""
    pool = plan.pool
    cover = capacity.coverage(pool)
    report = {
        "order": [s.label for s in capacity.sources(pool)],
        "reservedNodes": cover.reserved,
        "maxNodes": pool.max_nodes,
        "coverage": cover.text,
        "details": stack.target.capacity_lines(pool, autoscaler),
    }
    if stack.quotas == "kueue" and stack.teams:
        report["details"] += capacity.block_queue_lines(pool)
    if cover.reserved and (idle := capacity.reserved_idle_cost(plan)) is not None:
        # Reservations are billed whether used or not; priced at the on-demand list price unless bought cheaper.
        report["reservedCostPerHour"] = round(idle, 4)
    return report
