"""Team GPU quotas against what the pools can offer, for both engines gpupools supports.

- team-quota-oversubscription (advisory): over-subscription is allowed on purpose (teams rarely peak
  together, and pools autoscale), but past some ratio a quota stops meaning anything: a team is promised GPUs
  that cannot exist. ResourceQuotas are summed per extended resource against every pool exposing it; Kueue
  ClusterQueues per ResourceFlavor against the pool the flavor selects.
- kueue-flavors-match-pools (mandatory): a quota on a flavor that selects no pool, on a resource its pool does
  not offer, or without the pool's taint among its tolerations can never admit anything; a ClusterQueue naming
  a flavor the stack does not define stays inactive.
- team-jobs-land (mandatory): every team's job, on every pool it has quota on and in every shape the pool serves
  (one unit, a whole node, a two-node gang on fabric pools), must reach a GPU: admitted by its queue, placed on a node
  the autoscaler starts from zero, that node made ready, the resource advertised. The platform component records
  each verdict of `gpupools.landing.check`; a job that cannot land is a quota nobody can use.
- kueue-borrowing-sane (mandatory): lending needs a cohort and a way back (`reclaimWithinCohort` other than
  Never), a team cannot lend more than it has, and a borrowing limit that could never be reached on the pool
  (nominal plus limit above its units at maxNodes) is a mistake worth naming.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulumi_policy import (EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy,
                           StackValidationArgs, StackValidationPolicy)

from gpupools.policies._fleet import GPU_TAINT_KEY, POOL_LABEL, RESOURCE_QUOTA, fleet, quota_requests
from gpupools.policies._props import as_int, get, items, text

DEFAULT_MAX_RATIO = 1.5
KUEUE = "kubernetes:kueue.x-k8s.io/"
RESOURCE_FLAVOR = "ResourceFlavor"
CLUSTER_QUEUE = "ClusterQueue"


def _kueue(resources, kind: str):
    return [r for r in resources if r.resource_type.startswith(KUEUE) and r.resource_type.endswith(f":{kind}")]


@dataclass(frozen=True)
class Quota:
    queue: str
    flavor: str
    resource: str
    nominal: int | None
    borrowing_limit: int | None
    lending_limit: int | None


def queue_quotas(resources) -> list[Quota]:
    out = []
    for cq in _kueue(resources, CLUSTER_QUEUE):
        name = text(get(cq.props, "metadata", "name")) or cq.name
        for group in items(get(cq.props, "spec", "resourceGroups")):
            for flavor in items(get(group, "flavors")):
                for quota in items(get(flavor, "resources")):
                    out.append(Quota(name, text(get(flavor, "name")) or "", text(get(quota, "name")) or "",
                                     as_int(get(quota, "nominalQuota")), as_int(get(quota, "borrowingLimit")), as_int(get(quota, "lendingLimit"))))
    return out


def flavor_pools(resources) -> dict[str, str | None]:
    """ResourceFlavor name -> the gpupools pool its nodeLabels select (None: no pool label)."""
    return {text(get(f.props, "metadata", "name")) or f.name: text(get(f.props, "spec", "nodeLabels", POOL_LABEL))
            for f in _kueue(resources, RESOURCE_FLAVOR)}


def pool_capacity(resources) -> dict[str, tuple[str, int | None]]:
    """pool name -> (its resource, units at maxNodes)."""
    return {p.pool: (p.resource, p.max_units) for p in fleet(resources)}


def quota_ratios(resources) -> dict[str, tuple[int, int]]:
    """ResourceQuotas: resource -> (sum of team quotas, schedulable units at maxNodes)."""
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


def queue_ratios(resources) -> dict[str, tuple[int, int]]:
    """Kueue: pool -> (sum of nominal quotas on the flavors selecting it, units at maxNodes)."""
    pools = flavor_pools(resources)
    capacity = pool_capacity(resources)
    promised: dict[str, int] = {}
    for q in queue_quotas(resources):
        pool = pools.get(q.flavor)
        if pool in capacity and q.nominal:
            promised[pool] = promised.get(pool, 0) + q.nominal
    return {pool: (amount, capacity[pool][1] or 0) for pool, amount in promised.items()}


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
    for pool, (quota, capacity) in queue_ratios(args.resources).items():
        if capacity and quota / capacity > limit:
            report(f"Kueue queues promise {quota} units of pool {pool} against {capacity} it offers at maxNodes "
                   f"({quota / capacity:.2f}x, above the {limit:g}x maximum); raise maxNodes or lower team gpus", None)


def validate_flavors(args: StackValidationArgs, report: ReportViolation) -> None:
    capacity = pool_capacity(args.resources)
    pools = flavor_pools(args.resources)
    for f in _kueue(args.resources, RESOURCE_FLAVOR):
        name = text(get(f.props, "metadata", "name")) or f.name
        pool = pools[name]
        if pool is None:
            report(f"ResourceFlavor {name} selects no pool: spec.nodeLabels needs {POOL_LABEL}", f.urn)
        elif pool not in capacity:
            report(f"ResourceFlavor {name} selects pool {pool}, which is not a GPU pool of this stack (pools: "
                   f"{', '.join(sorted(capacity)) or 'none'})", f.urn)
        keys = {text(get(t, "key")) for t in items(get(f.props, "spec", "tolerations"))}
        if pool in capacity and GPU_TAINT_KEY not in keys:
            report(f"ResourceFlavor {name} does not tolerate the GPU taint {GPU_TAINT_KEY}; workloads admitted on it never schedule", f.urn)
    for q in queue_quotas(args.resources):
        if q.flavor not in pools:
            report(f"ClusterQueue {q.queue} gives quota on flavor {q.flavor}, which no ResourceFlavor in the stack defines", None)
        elif pools[q.flavor] in capacity and capacity[pools[q.flavor]][0] != q.resource:
            report(f"ClusterQueue {q.queue} gives {q.resource} on flavor {q.flavor}, but pool {pools[q.flavor]} offers "
                   f"{capacity[pools[q.flavor]][0]}; that quota can never be used", None)


def validate_borrowing(args: StackValidationArgs, report: ReportViolation) -> None:
    pools = flavor_pools(args.resources)
    capacity = pool_capacity(args.resources)
    queues = {text(get(cq.props, "metadata", "name")) or cq.name: cq for cq in _kueue(args.resources, CLUSTER_QUEUE)}
    for name, cq in queues.items():
        cohort = text(get(cq.props, "spec", "cohortName"))
        reclaim = text(get(cq.props, "spec", "preemption", "reclaimWithinCohort")) or "Never"
        quotas = [q for q in queue_quotas([cq])]
        lends = any((q.nominal or 0) > 0 and q.lending_limit != 0 for q in quotas)
        if not cohort and any(q.borrowing_limit is not None or q.lending_limit is not None for q in quotas):
            report(f"ClusterQueue {name} sets borrowing or lending limits but belongs to no cohort (spec.cohortName)", cq.urn)
        if cohort and lends and reclaim == "Never":
            report(f"ClusterQueue {name} lends its quota in cohort {cohort} but never reclaims it "
                   f"(spec.preemption.reclaimWithinCohort: Never); set Any or LowerPriority", cq.urn)
        for q in quotas:
            if q.lending_limit is not None and q.nominal is not None and q.lending_limit > q.nominal:
                report(f"ClusterQueue {name} lends {q.lending_limit} {q.resource} on flavor {q.flavor} but has only {q.nominal}", cq.urn)
            units = capacity.get(pools.get(q.flavor) or "", (None, None))[1]
            if units is not None and q.borrowing_limit is not None and (q.nominal or 0) + q.borrowing_limit > units:
                report(f"ClusterQueue {name} may reach {(q.nominal or 0) + q.borrowing_limit} {q.resource} on flavor {q.flavor} "
                       f"(nominal {q.nominal or 0} + borrowingLimit {q.borrowing_limit}), more than pool {pools[q.flavor]} "
                       f"offers at maxNodes ({units})", cq.urn)


team_quota_oversubscription = StackValidationPolicy(
    name="team-quota-oversubscription",
    description="The sum of team GPU quotas stays within a set multiple of what the GPU pools can offer.",
    enforcement_level=EnforcementLevel.ADVISORY,
    config_schema=PolicyConfigSchema(properties={
        "maxRatio": {"type": "number", "exclusiveMinimum": 0, "default": DEFAULT_MAX_RATIO,
                     "description": "Largest allowed ratio of summed team quotas to schedulable units, per GPU resource or Kueue flavor."},
    }),
    validate=validate_quotas,
)

kueue_flavors_match_pools = StackValidationPolicy(
    name="kueue-flavors-match-pools",
    description="Every Kueue ResourceFlavor selects a GPU pool of the stack and tolerates its taint; every quota is on a resource its pool offers.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_flavors,
)

kueue_borrowing_sane = StackValidationPolicy(
    name="kueue-borrowing-sane",
    description="Kueue borrowing and lending limits are consistent: a cohort, a way to reclaim, no lending above quota, no unreachable limits.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_borrowing,
)

PLATFORM = "gpupools:index:GpuPlatform"


def validate_jobs_land(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != PLATFORM:
        return
    for verdict in items(get(args.props, "landing")):
        if get(verdict, "lands") is False:
            team = text(get(verdict, "team"))
            who = f"team {team}'s" if team else "a"
            report(f"{who} {text(get(verdict, 'shape'))} job on pool {text(get(verdict, 'pool'))} ({text(get(verdict, 'job'))}) never runs: "
                   f"it stops at {text(get(verdict, 'step'))}: {text(get(verdict, 'reason'))}", None)


team_jobs_land = ResourceValidationPolicy(
    name="team-jobs-land",
    description="Every team's job, on every pool it has quota on, reaches a GPU: queue, scheduling, a node from zero, readiness, device plugin.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_jobs_land,
)

POLICIES = [team_quota_oversubscription, kueue_flavors_match_pools, kueue_borrowing_sane, team_jobs_land]
