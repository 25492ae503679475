"""Team GPU quotas against what the pools can offer.

Over-subscription is allowed on purpose (teams rarely peak together, and pools autoscale), but past some
ratio a quota stops meaning anything: a team is promised GPUs that cannot exist. Per extended resource,
the sum of all ResourceQuota `requests.<resource>` in the stack is compared with the units every pool
exposing that resource offers at maxNodes.
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ReportViolation, StackValidationArgs, StackValidationPolicy

from ._fleet import RESOURCE_QUOTA, fleet, quota_requests

DEFAULT_MAX_RATIO = 1.5


def quota_ratios(resources) -> dict[str, tuple[int, int]]:
    """resource -> (sum of team quotas, schedulable units at maxNodes)."""
    capacity: dict[str, int] = {}
    for pool in fleet(resources):
        if pool.max_units is not None:
            capacity[pool.resource] = capacity.get(pool.resource, 0) + pool.max_units
    quotas: dict[str, int] = {}
    for r in resources:
        if r.resource_type == RESOURCE_QUOTA:
            for resource, amount in quota_requests(r.props).items():
                quotas[resource] = quotas.get(resource, 0) + amount
    return {res: (amount, capacity.get(res, 0)) for res, amount in sorted(quotas.items())}


def validate_quotas(args: StackValidationArgs, report: ReportViolation) -> None:
    limit = float(args.get_config().get("maxRatio", DEFAULT_MAX_RATIO))
    for resource, (quota, capacity) in quota_ratios(args.resources).items():
        if quota == 0:
            continue
        if capacity == 0:
            report(f"team quotas grant {quota} x {resource}, but no GPU pool in the stack offers {resource}", None)
        elif quota / capacity > limit:
            report(f"team quotas grant {quota} x {resource} against {capacity} the pools offer at maxNodes "
                   f"({quota / capacity:.2f}x, above the {limit:g}x maximum); raise maxNodes or lower team gpus", None)


team_quota_oversubscription = StackValidationPolicy(
    name="team-quota-oversubscription",
    description="The sum of team GPU quotas stays within a set multiple of what the GPU pools can offer.",
    enforcement_level=EnforcementLevel.ADVISORY,
    config_schema=PolicyConfigSchema(properties={
        "maxRatio": {"type": "number", "exclusiveMinimum": 0, "default": DEFAULT_MAX_RATIO,
                     "description": "Largest allowed ratio of summed team quotas to schedulable units, per GPU resource."},
    }),
    validate=validate_quotas,
)

POLICIES = [team_quota_oversubscription]
