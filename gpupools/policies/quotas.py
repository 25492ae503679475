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
- kai-queues-sane (mandatory): KAI Scheduler's queues form a tree whose every parent exists (its queue webhook refuses
  a queue whose parent it cannot find), no queue is guaranteed more than its parent may hold or its siblings and it more
  than the parent's quota, no limit sits below its own quota, no team queue can never hold a GPU, and cpu and memory
  are never left at KAI's limit of 0 (which refuses every pod). KAI's top-level quotas count in
  team-quota-oversubscription against the whole GPUs of the pools.
- managed-pool-quota (mandatory): a pool whose cloud keeps no node limit for it (GKE Autopilot makes a node for every
  pod that selects it) is bounded by Kueue's team quotas only: it must have some.
- kai-fractions-isolated (advisory): a pool whose GPUs KAI splits into fractions for several teams, with nothing
  isolating one pod's GPU memory and compute from another's: any team's pod can take the whole GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulumi_policy import (EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy,
                           StackValidationArgs, StackValidationPolicy)

from gpupools.fabric.computedomain import QUEUE_RESOURCE as CHANNEL_RESOURCE
from gpupools.policies._readback import GPU_TAINT_KEY, POOL_LABEL, RESOURCE_QUOTA, fleet, quota_requests
from gpupools.policies._props import UNKNOWN, as_int, get, items, text

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


def pool_offers(resources) -> dict[str, list[str]]:
    """pool name -> the GPU resources one of its nodes offers (several on a mixed MIG layout); a rack-scale pool (its GPU
    has an NVLink domain) also the queue resource its pods' ComputeDomain channels count as (`computedomain.QUEUE_RESOURCE`,
    which Kueue's deviceClassMappings map the channel class to)."""
    return {p.pool: (list(p.node_resources) or [p.resource]) + ([CHANNEL_RESOURCE] if p.gpu and p.gpu.nvlink_domain else [])
            for p in fleet(resources)}


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
        # Channels are one per pod, not GPUs: they count against no GPU of the pool.
        if pool in capacity and q.nominal and q.resource != CHANNEL_RESOURCE:
            promised[pool] = promised.get(pool, 0) + q.nominal
    return {pool: (amount, capacity[pool][1] or 0) for pool, amount in promised.items()}


KAI_QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
KAI_UNLIMITED = -1
WHOLE_GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class KaiQueue:
    name: str
    parent: str | None
    quota: float | None
    limit: float | None
    unset: tuple[str, ...]  # resources KAI reads as limit 0: left out, or 0
    urn: str


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def kai_queues(resources) -> dict[str, KaiQueue]:
    out = {}
    for r in resources:
        if r.resource_type != KAI_QUEUE:
            continue
        name = text(get(r.props, "metadata", "name")) or r.name
        gpu = get(r.props, "spec", "resources", "gpu") or {}
        unset = tuple(res for res in ("cpu", "memory") if _number(get(r.props, "spec", "resources", res, "limit")) in (None, 0.0)
                      and get(r.props, "spec", "resources", res, "limit") is not UNKNOWN)
        out[name] = KaiQueue(name, text(get(r.props, "spec", "parentQueue")) or None, _number(get(gpu, "quota")), _number(get(gpu, "limit")),
                             unset, r.urn)
    return out


def kai_ratio(resources) -> tuple[float, int] | None:
    """KAI: (GPUs the top-level queues are guaranteed, whole GPUs the pools offer at maxNodes); None without KAI queues."""
    queues = kai_queues(resources)
    if not queues:
        return None
    promised = sum(q.quota for q in queues.values() if q.parent is None and q.quota and q.quota > 0)
    offered = sum(p.max_units or 0 for p in fleet(resources) if p.resource == WHOLE_GPU)
    return promised, offered


def validate_kai_queues(args: StackValidationArgs, report: ReportViolation) -> None:
    queues = kai_queues(args.resources)
    children: dict[str, list[KaiQueue]] = {}
    for q in queues.values():
        if q.parent is not None:
            children.setdefault(q.parent, []).append(q)
    for q in queues.values():
        if q.unset:
            report(f"Queue {q.name} leaves {' and '.join(q.unset)} without a limit; KAI reads that as a limit of 0 and refuses every pod "
                   f"asking for it: set quota and limit -1", q.urn)
        if q.limit is not None and q.limit != KAI_UNLIMITED and q.quota is not None and q.limit < q.quota:
            report(f"Queue {q.name} is guaranteed {q.quota:g} GPUs but limited to {q.limit:g}", q.urn)
        if q.name not in children and q.parent is not None and not q.quota and q.limit == 0:
            report(f"Queue {q.name} can never hold a GPU: its quota and its limit are 0", q.urn)
        if q.parent is None:
            continue
        parent = queues.get(q.parent)
        if parent is None:
            report(f"Queue {q.name} names parent {q.parent}, which no Queue in the stack defines; KAI's queue webhook refuses it", q.urn)
            continue
        seen, up = {q.name}, parent
        while up is not None and up.name not in seen:
            seen.add(up.name)
            up = queues.get(up.parent) if up.parent else None
        if up is not None:
            report(f"Queue {q.name} is its own ancestor (parents: {' > '.join(sorted(seen))}); KAI's queues form a tree", q.urn)
            continue
        if parent.limit is not None and parent.limit != KAI_UNLIMITED and (q.quota or 0) > parent.limit:
            report(f"Queue {q.name} is guaranteed {q.quota:g} GPUs, more than its parent {parent.name} may hold ({parent.limit:g})", q.urn)
    for name, kids in children.items():
        parent = queues.get(name)
        total = sum(k.quota or 0 for k in kids if k.quota and k.quota > 0)
        if parent is not None and parent.quota is not None and parent.quota != KAI_UNLIMITED and total > parent.quota:
            report(f"the teams of Queue {name} are guaranteed {total:g} GPUs together, more than its quota of {parent.quota:g}", parent.urn)


def validate_quotas(args: StackValidationArgs, report: ReportViolation) -> None:
    limit = float(args.get_config().get("maxRatio", DEFAULT_MAX_RATIO))
    ratio = kai_ratio(args.resources)
    if ratio is not None and ratio[0]:
        promised, offered = ratio
        if not offered:
            report(f"KAI queues guarantee {promised:g} GPUs, but no GPU pool in the stack offers whole {WHOLE_GPU}", None)
        elif promised / offered > limit:
            report(f"KAI queues guarantee {promised:g} GPUs against {offered} the pools offer at maxNodes ({promised / offered:.2f}x, "
                   f"above the {limit:g}x maximum); raise maxNodes or lower team and department gpus", None)
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
    if any(r.resource_type == "gpupools:index:FleetManager" for r in args.resources):
        # A fleet's MultiKueue manager runs no GPU pool: its one flavor only counts quota, the workers' flavors place pods.
        return
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
    offers = pool_offers(args.resources)
    for q in queue_quotas(args.resources):
        if q.flavor not in pools:
            report(f"ClusterQueue {q.queue} gives quota on flavor {q.flavor}, which no ResourceFlavor in the stack defines", None)
        elif pools[q.flavor] in capacity and q.resource not in offers[pools[q.flavor]] and q.nominal != 0:
            # A zero quota is what a flavor names for the resources of its group its pool lacks (Kueue: every flavor of
            # a resource group lists every covered resource).
            report(f"ClusterQueue {q.queue} gives {q.resource} on flavor {q.flavor}, but pool {pools[q.flavor]} offers "
                   f"{', '.join(offers[pools[q.flavor]])}; that quota can never be used", None)


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

def validate_managed_pool_quota(args: StackValidationArgs, report: ReportViolation) -> None:
    pools = flavor_pools(args.resources)
    quota: dict[str, int] = {}
    for q in queue_quotas(args.resources):
        pool = pools.get(q.flavor)
        if pool is not None and q.nominal:
            quota[pool] = quota.get(pool, 0) + q.nominal
    for pool in fleet(args.resources):
        if not pool.target.BOUNDS_POOL_NODES and not quota.get(pool.pool):
            report(f"pool {pool.pool!r} has no team quota, and nothing else bounds it: {pool.target.SERVICE} makes a GPU node for every pod "
                   f"that selects it, whatever its maxNodes; give teams gpus on it (gpupools:teams, Kueue) or put it on a cluster that keeps "
                   f"a node limit per pool", pool.urn)


managed_pool_quota = StackValidationPolicy(
    name="managed-pool-quota",
    description="A pool whose cloud keeps no node limit for it (GKE Autopilot) is bounded by Kueue team quotas.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_managed_pool_quota,
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


def validate_fractions_isolated(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != PLATFORM:
        return
    for entry in items(get(args.props, "fractions")):
        teams = [text(t) for t in items(get(entry, "teams"))]
        if len(teams) > 1 and text(get(entry, "isolation")) == "none":
            report(f"pool {text(get(entry, 'pool'))} lets teams {', '.join(teams)} share GPUs in KAI fractions with nothing isolating their "
                   f"memory or compute: one team's pod can take a whole GPU from another's; give each team its own fraction pool, or use "
                   f"a vgpu pool (HAMi) for enforced limits", None)


kai_queues_sane = StackValidationPolicy(
    name="kai-queues-sane",
    description="KAI Scheduler's queues form a tree of existing parents, within their parents' limits and quotas, with cpu and memory not left at a limit of 0.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_kai_queues,
)

kai_fractions_isolated = ResourceValidationPolicy(
    name="kai-fractions-isolated",
    description="A pool whose GPUs KAI splits into fractions for several teams isolates their memory and compute.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_fractions_isolated,
)

team_jobs_land = ResourceValidationPolicy(
    name="team-jobs-land",
    description="Every team's job, on every pool it has quota on, reaches a GPU: queue, scheduling, a node from zero, readiness, device plugin.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_jobs_land,
)

POLICIES = [team_quota_oversubscription, kueue_flavors_match_pools, kueue_borrowing_sane, kai_queues_sane, kai_fractions_isolated, team_jobs_land,
            managed_pool_quota]
