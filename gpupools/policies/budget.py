"""Fleet budget: how many GPUs the stack can scale to, and what that costs per month at list price.

Autoscaled GPU pools cost nothing at zero nodes and a lot at their maximum, so the cap that matters is the
maximum. Prices come from the gpupools catalog (on-demand list price, whole node, 730 hours a month); spot
pools are priced on-demand too, because spot capacity can be unavailable and the bill is then on-demand.
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ReportViolation, StackValidationArgs, StackValidationPolicy

from gpupools.policies._fleet import HOURS_PER_MONTH, fleet

DEFAULT_MAX_GPUS = 64
DEFAULT_MAX_MONTHLY_USD = 100_000


def fleet_totals(pools) -> tuple[int, float, list[str]]:
    """(max GPUs, max USD per month, pools whose instance type the catalog cannot price).

    A maximum size that is unknown at preview is skipped, not reported: it is known at `pulumi up`.
    """
    gpus, monthly, uncounted = 0, 0.0, []
    for pool in pools:
        if pool.gpus_per_node is None or pool.price_per_node is None:
            uncounted.append(pool.pool)
        if pool.max_gpus is not None:
            gpus += pool.max_gpus
        if pool.max_hourly_cost is not None:
            monthly += pool.max_hourly_cost * HOURS_PER_MONTH
    return gpus, monthly, uncounted


def validate_budget(args: StackValidationArgs, report: ReportViolation) -> None:
    config = args.get_config()
    max_gpus = config.get("maxGpus", DEFAULT_MAX_GPUS)
    max_monthly = config.get("maxMonthlyUsd", DEFAULT_MAX_MONTHLY_USD)
    pools = fleet(args.resources)
    gpus, monthly, uncounted = fleet_totals(pools)
    detail = ", ".join(f"{p.pool} {p.max_gpus if p.max_gpus is not None else '?'}" for p in pools)
    if gpus > max_gpus:
        report(f"the GPU pools can scale to {gpus} GPUs ({detail}), more than the cap of {max_gpus}; lower maxNodes "
               f"or raise maxGpus in the policy config", None)
    if monthly > max_monthly:
        report(f"at maxNodes the GPU pools cost ${monthly:,.0f}/month at on-demand list price, more than the cap of "
               f"${max_monthly:,.0f}; lower maxNodes or raise maxMonthlyUsd in the policy config", None)
    for pool in pools:
        if pool.pool in uncounted:
            report(f"GPU pool {pool.pool!r} ({pool.instance_type or 'unknown instance type'}) cannot be priced or counted: its instance "
                   f"type is not in the gpupools catalog (gpupools catalog lists what it knows)", pool.urn)


fleet_budget = StackValidationPolicy(
    name="fleet-budget",
    description="The stack's GPU pools stay under a cap on GPUs and on monthly list-price cost at their maximum size.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "maxGpus": {"type": "integer", "minimum": 0, "default": DEFAULT_MAX_GPUS,
                    "description": "Most GPUs all GPU pools together may scale to."},
        "maxMonthlyUsd": {"type": "number", "minimum": 0, "default": DEFAULT_MAX_MONTHLY_USD,
                          "description": "Most USD per month (730 h) all GPU pools may cost at maxNodes, on-demand list price."},
    }),
    validate=validate_budget,
)

POLICIES = [fleet_budget]
