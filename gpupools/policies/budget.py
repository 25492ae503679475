"""Fleet budget: how many GPUs the stack can scale to, and what that costs per month at list price.

Autoscaled GPU pools cost nothing at zero nodes and a lot at their maximum, so the cap that matters is the
maximum. Prices come from the gpupools catalog (on-demand list price, whole node, 730 hours a month); spot
pools are priced on-demand too, because spot capacity can be unavailable and the bill is then on-demand.

Who sets the cap: the stack itself (`gpupools:budget`, the ceiling its platform team chose) and the organisation's
policy config (`maxGpus`, `maxMonthlyUsd`); the tighter of the two applies. Neither has a default: any fixed number
would be wrong for most fleets (one A3 Mega pool of two nodes costs more than a small team's whole year), so a
default cap teaches users to switch the policy off, and then the pricing check below goes with it.
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ReportViolation, StackValidationArgs, StackValidationPolicy

from gpupools.core.catalog import load_catalog
from gpupools.policies._readback import GKE_CLUSTER, GKE_COMPUTE_CLASS, HOURS_PER_MONTH, class_priorities, fleet, stack_resources
from gpupools.policies._props import get, plain

PLATFORM = "gpupools:index:GpuPlatform"


def fleet_totals(pools) -> tuple[int, float, list[str]]:
    """(max GPUs, max USD per month, pools whose instance type the catalog cannot price).

    A maximum size that is unknown at preview is skipped, not reported: it is known at `pulumi up`.
    """
    gpus, monthly, uncounted = 0, 0.0, []
    for pool in pools:
        # A type the catalog knows without a list price (its cloud publishes none) counts its GPUs, not its cost.
        if pool.gpus_per_node is None or (pool.price_per_node is None and load_catalog().instance(pool.cloud, pool.instance_type or "") is None):
            uncounted.append(pool.pool)
        if pool.max_gpus is not None:
            gpus += pool.max_gpus
        if pool.max_hourly_cost is not None:
            monthly += pool.max_hourly_cost * HOURS_PER_MONTH
    return gpus, monthly, uncounted


def stack_budget(resources) -> dict:
    """The stack's own ceiling (`gpupools:budget`) as the platform component recorded it; {} when it sets none."""
    for resource in resources:
        if resource.resource_type == PLATFORM:
            budget = plain(get(resource.props, "budget"))
            return budget if isinstance(budget, dict) else {}
    return {}


def cap(key: str, config: dict, budget: dict) -> tuple[float, str] | None:
    """The tighter of the policy config's cap and the stack's own for `key`, and where it comes from; None if neither
    sets one. A value of the wrong type is skipped: the stack's is validated when it is read, the config's by its schema."""
    caps = []
    if isinstance(config.get(key), (int, float)) and not isinstance(config.get(key), bool):
        caps.append((config[key], f"the policy config's cap {key}"))
    if isinstance(budget.get(key), (int, float)) and not isinstance(budget.get(key), bool):
        caps.append((budget[key], f"the stack's budget (gpupools:budget.{key})"))
    return min(caps, key=lambda c: c[0]) if caps else None


def validate_budget(args: StackValidationArgs, report: ReportViolation) -> None:
    config = args.get_config()
    budget = stack_budget(args.resources)
    pools = fleet(args.resources)
    gpus, monthly, uncounted = fleet_totals(pools)
    detail = ", ".join(f"{p.pool} {p.max_gpus if p.max_gpus is not None else '?'}" for p in pools)
    gpu_cap = cap("maxGpus", config, budget)
    if gpu_cap is not None and gpus > gpu_cap[0]:
        report(f"the GPU pools can scale to {gpus} GPUs ({detail}), more than {gpu_cap[1]} of {gpu_cap[0]:g}; lower "
               f"maxNodes or raise the cap", None)
    usd_cap = cap("maxMonthlyUsd", config, budget)
    if usd_cap is not None and monthly > usd_cap[0]:
        report(f"at maxNodes the GPU pools cost ${monthly:,.0f}/month at on-demand list price, more than {usd_cap[1]} of "
               f"${usd_cap[0]:,.0f}; lower maxNodes or raise the cap", None)
    for pool in pools:
        if pool.pool in uncounted:
            report(f"GPU pool {pool.pool!r} ({pool.instance_type or 'unknown instance type'}) cannot be priced or counted: its instance "
                   f"type is not in the gpupools catalog (gpupools catalog lists what it knows)", pool.urn)


fleet_budget = StackValidationPolicy(
    name="fleet-budget",
    description="The stack's GPU pools stay under its own budget (gpupools:budget) and the policy config's caps on GPUs and "
                "monthly list-price cost at their maximum size, and every GPU pool can be priced.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "maxGpus": {"type": "integer", "minimum": 0,
                    "description": "Most GPUs all GPU pools together may scale to (no cap unless set here or in gpupools:budget)."},
        "maxMonthlyUsd": {"type": "number", "minimum": 0,
                          "description": "Most USD per month (730 h) all GPU pools may cost at maxNodes, on-demand list price "
                                         "(no cap unless set here or in gpupools:budget)."},
    }),
    validate=validate_budget,
)

# --------------------------------------------------------------------------------------------------------------------
# compute-class-ceiling


def _last_priority(props) -> str:
    """The kind of capacity a ComputeClass falls back to last, in the plan's words."""
    found = class_priorities(props)
    if not found:
        return "nothing"
    last = found[-1]
    if get(last, "flexStart", "enabled") is True:
        return "flex-start"
    if get(last, "reservations", "affinity") in ("Specific", "AnyBestEffort"):
        return "a reservation"
    return "Spot VMs" if get(last, "spot") is True else "on-demand VMs"


def validate_class_ceiling(args: StackValidationArgs, report: ReportViolation) -> None:
    """A GKE ComputeClass has no size of its own: node auto-provisioning starts its nodes until the cluster's limit for
    the GPU type. Where the stack's cluster sets none, nothing bounds what the class's last priority can cost."""
    resources = stack_resources(args.resources)
    if not any(typ == GKE_COMPUTE_CLASS for typ, _n, _p in resources):
        return
    if not any(typ == GKE_CLUSTER for typ, _n, _p in resources):
        args.not_applicable("no GKE cluster in the stack: an existing cluster's node auto-provisioning limits are not the stack's to read")
        return
    classes = {name: props for typ, name, props in resources if typ == GKE_COMPUTE_CLASS}
    for pool in fleet(args.resources):
        if pool.resource_type != GKE_COMPUTE_CLASS or pool.max_nodes is not None:
            continue
        report(f"ComputeClass {pool.pool!r} ({pool.instance_type or pool.accelerator}) falls back to "
               f"{_last_priority(classes.get(pool.resource_name, {}))} with no ceiling: the cluster's node auto-provisioning sets no limit "
               f"for {pool.accelerator}, so GKE starts as many nodes as pods ask for; add a resourceLimits entry for it "
               f"(gpupools does for its own clusters from the pool's maxNodes)", pool.urn)


compute_class_ceiling = StackValidationPolicy(
    name="compute-class-ceiling",
    description="Every GPU ComputeClass has a ceiling: the cluster's node auto-provisioning limits its GPU type.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_class_ceiling,
)

POLICIES = [fleet_budget, compute_class_ceiling]
