"""A pool's capacity list read as an ordered list of sources, and the rules that hold on every cloud.

Cloud-neutral: which kinds a pool asks for and in which order, the zones a reservation pins the pool to, how much
of maxNodes the reservations cover, and what the order means for queues and cost. Whether a cloud (and its
autoscaler) can do what the list says is each cloud module's `capacity_problems`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpupools.core.pools import PoolPlan
from gpupools.stack.config import CapacityOption, Pool, Reservation
from gpupools.stack.errors import Problem

RESERVED = "reserved"
ON_DEMAND = "on-demand"
SPOT = "spot"
FLEX_START = "flex-start"
QUEUED = "queued"
ANY_RESERVATION = "any-reservation"
# Billed by the hour while a node runs; everything else is paid whether used or not (reservations) or is a
# queuing mode of the cloud.
HOURLY = (ON_DEMAND, SPOT)
# GKE's Dynamic Workload Scheduler modes: nodes obtained on request, for a bounded time.
DWS = (FLEX_START, QUEUED)
# Marks a pool's resources with the nodes its reservations hold, so the policy pack can judge coverage from the
# planned resources alone (GKE label keys take no dots or slashes: clouds.gcp spells it its own way).
RESERVED_NODES_KEY = "gpupools.io/reserved-nodes"
# Seconds per unit of a run duration ("24h").
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# GKE keeps flex-start nodes for at most seven days (flex-start how-to: "up to the default of seven days").
MAX_RUN_SECONDS = 7 * 86400


@dataclass(frozen=True)
class Source:
    """One entry of the list: a kind, the reservation it names, and a run limit for the DWS modes."""

    kind: str
    index: int | None  # position in the stack's list; None when derived from `spot`
    reservation: Reservation | None = None
    max_run_seconds: int | None = None

    @property
    def label(self) -> str:
        if self.reservation is not None:
            r = self.reservation
            what = r.id or ", ".join(f"{k}={v}" for k, v in (r.tags or {}).items())
            kind = {"capacity-block": "Capacity Block ", "odcr": "ODCR "}.get(r.kind or "", "")
            return f"reservation {kind}{what} ({r.nodes} node{'s' if r.nodes != 1 else ''})"
        if self.max_run_seconds is not None:
            return f"{self.kind} (nodes live at most {run_text(self.max_run_seconds)})"
        return self.kind

    def path(self, pool_path: str) -> str:
        return f"{pool_path}.capacity[{self.index}]" if self.index is not None else f"{pool_path}.spot"


def run_seconds(text: str) -> int:
    return int(text[:-1]) * _UNITS[text[-1]]


def run_text(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def sources(pool: Pool) -> tuple[Source, ...]:
    """The pool's sources in order; a pool without `capacity` is spot or on-demand, as `spot` says."""
    if pool.capacity is None:
        return _SPOT_OR_ON_DEMAND[bool(pool.spot)]
    out = []
    for i, entry in enumerate(pool.capacity):
        if isinstance(entry, str):
            out.append(Source(entry, i))
        elif isinstance(entry, CapacityOption) and entry.reservation is not None:
            out.append(Source(RESERVED, i, reservation=entry.reservation))
        else:
            kind, options = (FLEX_START, entry.flex_start) if entry.flex_start is not None else (QUEUED, entry.queued)
            seconds = run_seconds(options.max_run_duration) if options and options.max_run_duration else None
            out.append(Source(kind, i, max_run_seconds=seconds))
    return tuple(out)


# The sources of a pool without `capacity`: every check of every pool asks, so the two answers (frozen) are built once.
_SPOT_OR_ON_DEMAND = {True: (Source(SPOT, None),), False: (Source(ON_DEMAND, None),)}


def kinds(pool: Pool) -> tuple[str, ...]:
    """Distinct kinds in order (several reservations are one kind)."""
    if pool.capacity is None:  # every check of every pool asks: the one kind, without building its Source
        return (SPOT if pool.spot else ON_DEMAND,)
    return tuple(dict.fromkeys(s.kind for s in sources(pool)))


def reservations(pool: Pool) -> list[Reservation]:
    return [s.reservation for s in sources(pool) if s.reservation is not None]


def has(pool: Pool, kind: str) -> bool:
    return kind in kinds(pool)


def spot_only(pool: Pool) -> bool:
    """A pool whose every node is a spot node (what `spot: true` always meant)."""
    return kinds(pool) == (SPOT,)


def reserved_nodes(pool: Pool) -> int:
    return sum(r.nodes for r in reservations(pool))


def reserved_marker(pool: Pool, key: str = RESERVED_NODES_KEY) -> dict[str, str]:
    nodes = reserved_nodes(pool)
    return {key: str(nodes)} if nodes else {}


def placement_zones(pool: Pool) -> list[str] | None:
    """Where the pool's nodes may start: the pool's own zones, else the zones its reservations hold capacity in."""
    if pool.zones:
        return list(pool.zones)
    zones = [z for r in reservations(pool) for z in (r.zones or [])]
    return list(dict.fromkeys(zones)) or None


def blocks(pool: Pool) -> list[Reservation]:
    return [r for r in reservations(pool) if r.kind == "capacity-block"]


# Marks a pool whose capacity is a Capacity Block, so the policy pack can tell from the planned resources alone why its
# EFA nodes have no placement group (a Karpenter node class selects reservations by id, which does not say their kind).
CAPACITY_BLOCK_KEY = "gpupools.io/capacity-block"


def block_marker(pool: Pool, key: str = CAPACITY_BLOCK_KEY) -> dict[str, str]:
    return {key: "true"} if blocks(pool) else {}


# A Capacity Block runs between a start and an end time (EC2 begins terminating its instances 30 minutes before the end,
# EC2 user guide capacity-blocks-using; Karpenter deletes their NodeClaims 40 minutes before it, aws/karpenter-provider-aws
# v1.14.1 pkg/controllers/capacityreservation/expiration/controller.go lines 47-49). Outside that window Karpenter has no
# reserved capacity to offer: it reads only active reservations (pkg/providers/capacityreservation/types.go lines 62-66)
# and offers none from an expiring block (pkg/providers/instancetype/offering/reserved_capacity_resolver.go line 98), so
# a pod bound for the block's nodes waits. Kueue knows neither: a
# ResourceFlavor is node labels and tolerations, a ClusterQueue's quota has no time, and its stopPolicy is a switch
# someone must flip (kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go lines 132-144). What Kueue does offer is its
# all-or-nothing wait: a workload admitted whose pods are not all ready within the timeout is evicted and requeued with
# an exponential backoff, endlessly when no limit is set (kueue v0.19.2 apis/config/v1beta2/configuration_types.go lines
# 302-329 and 402-440; pkg/controller/core/workload_controller.go lines 1229-1294, reconcileNotReadyTimeout). Kueue 0.19
# turns it on by default with these very values (apis/config/v1beta2/defaults.go lines 99-117; the DisableWaitForPodsReady
# gate, pkg/features/kube_features.go lines 49-52, is to go in 0.21); gpupools writes them into Kueue's Configuration
# (queues/kueue.py, manager_configuration) so they stay what the plan says. A job's own bound is the label
# `kueue.x-k8s.io/max-exec-time-seconds`, counted from admission, after which Kueue deactivates the workload
# (pkg/controller/core/workload_controller.go lines 905-944): only whoever knows the block's end can set it.
PODS_READY_TIMEOUT_MINUTES = 30
REQUEUE_BACKOFF_BASE_SECONDS = 60
REQUEUE_BACKOFF_MAX_SECONDS = 3600
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"


def block_queue_lines(pool: Pool) -> list[str]:
    """What Kueue quotas on a Capacity Block pool do and do not guarantee, in words for the plan's capacity row."""
    if not blocks(pool):
        return []
    return [
        "Kueue does not know the block's start and end: team quota on the block admits jobs before the block starts and after it ends",
        f"a job admitted with no node to run on is evicted after {PODS_READY_TIMEOUT_MINUTES}m without all its pods ready and requeued, "
        f"in the same flavor order (Kueue waitForPodsReady; backoff {REQUEUE_BACKOFF_BASE_SECONDS}s doubling to "
        f"{run_text(REQUEUE_BACKOFF_MAX_SECONDS)}, no limit), so it holds the quota at most that long at a time",
        f"not guaranteed: a job still running when the block's nodes are drained stops with them (a long job can carry "
        f"{MAX_EXEC_TIME_LABEL}, counted from admission); after the block ends, its quota keeps admitting and requeuing jobs "
        f"until the reservation is taken out of the stack",
    ]


def capacity_key_problems(pool: Pool, path: str) -> list[Problem]:
    """What no cloud can do: the same kind twice, hourly capacity before a reservation, DWS mixed with anything,
    `spot` beside a capacity list, zones a reservation does not have."""
    if pool.capacity is None:
        return []
    problems: list[Problem] = []
    if pool.spot:
        problems.append(Problem(f"{path}.spot", "set beside capacity; list spot in capacity instead (capacity: [spot] is what spot: true means)"))
    seen: dict[str, int] = {}
    ids: set[str] = set()
    listed = sources(pool)
    for s in listed:
        where = s.path(path)
        if s.kind != RESERVED:
            if s.kind in seen:
                problems.append(Problem(where, f"{s.kind} is listed twice (also capacity[{seen[s.kind]}]); each kind appears once"))
            seen.setdefault(s.kind, s.index or 0)
        else:
            r = s.reservation
            key = r.id or repr(sorted((r.tags or {}).items()))
            if key in ids:
                problems.append(Problem(where, "this reservation is listed twice; each reservation appears once"))
            ids.add(key)
        if s.max_run_seconds is not None and s.max_run_seconds > MAX_RUN_SECONDS:
            problems.append(Problem(f"{where}.{'flexStart' if s.kind == FLEX_START else 'queued'}.maxRunDuration",
                                    f"{run_text(s.max_run_seconds)} is longer than the seven days GKE keeps flex-start nodes; at most 7d"))
    first_hourly = next((s for s in listed if s.kind in HOURLY), None)
    for s in listed:
        if s.kind in (RESERVED, ANY_RESERVATION) and first_hourly is not None and s.index > first_hourly.index:
            problems.append(Problem(s.path(path), f"a reservation after {first_hourly.kind} would never be used: capacity paid for comes "
                                                  f"first; move the reservation before capacity[{first_hourly.index}]"))
    dws = [s for s in listed if s.kind in DWS]
    # A ComputeClass (GKE) lists flex-start as one priority among others; a node pool's DWS mode takes the whole pool.
    if dws and len(listed) > 1 and pool.provisioning != "compute-class":
        problems.append(Problem(dws[0].path(path), f"{dws[0].kind} is a pool of its own: its nodes come only from GKE's Dynamic Workload "
                                                   f"Scheduler, so nothing can be listed beside it; put other capacity in another pool"))
    if pool.zones:
        for s in listed:
            for j, zone in enumerate((s.reservation.zones or []) if s.reservation else []):
                if zone not in pool.zones:
                    problems.append(Problem(f"{s.path(path)}.reservation.zones[{j}]",
                                            f"{zone!r} is not one of the pool's zones ({', '.join(pool.zones)}); the pool's nodes could never "
                                            f"use the reservation: add the zone to zones, or drop zones (the reservation's zones are used)"))
    return problems


def shared_reservation_problems(pools: list[tuple[int, Pool]]) -> list[Problem]:
    """One reservation id listed by two pools is refused. The clouds would let both use it, first come first served (an
    EC2 reservation serves any matching instance of the account, EC2 user guide capacity-reservations-using; a GKE
    specific reservation serves every node pool that names it, GKE how-to consuming-reservations), but gpupools counts a
    reservation's `nodes` in the pool that lists it: coverage, the reserved Kueue flavor's quota and the idle cost would
    count the same nodes twice and promise them to two pools' teams."""
    first: dict[str, str] = {}
    problems: list[Problem] = []
    for index, pool in pools:
        for s in sources(pool):
            r = s.reservation
            if r is None or not r.id:
                continue
            where = s.path(f"pools[{index}]")
            if r.id in first and not first[r.id].startswith(f"pools[{index}]."):
                problems.append(Problem(f"{where}.reservation.id", f"{r.id!r} is also {first[r.id]}; a reservation's nodes are counted "
                                                                   f"in one pool: give it to one pool, or split it into two reservations"))
            first.setdefault(r.id, where)
    return problems


@dataclass(frozen=True)
class Coverage:
    """How much of the pool's maxNodes its reservations cover."""

    reserved: int  # nodes the reservations hold
    usable: int  # of those, nodes the pool may run (capped by maxNodes)
    max_nodes: int

    @property
    def unused(self) -> int:
        """Reserved nodes the pool can never run: paid for, and idle unless something else uses them."""
        return self.reserved - self.usable

    @property
    def text(self) -> str:
        if not self.reserved:
            return "no reservation"
        share = f"{self.usable} of maxNodes {self.max_nodes} reserved ({self.usable / self.max_nodes:.0%})"
        if self.unused:
            share += f"; {self.unused} reserved node{'s' if self.unused != 1 else ''} beyond maxNodes are never used by this pool"
        return share


def coverage(pool: Pool) -> Coverage:
    reserved = reserved_nodes(pool)
    return Coverage(reserved, min(reserved, pool.max_nodes), pool.max_nodes)


def reserved_idle_cost(plan: PoolPlan, running_reserved_nodes: int = 0) -> float | None:
    """Hourly cost of reserved nodes no pod runs on: a reservation is billed whether used or not, at the on-demand
    list price of the instance type unless bought otherwise (AWS, GCP and Azure all bill unused reserved capacity;
    Capacity Blocks are paid up front at their own price, which the catalog does not know)."""
    idle = max(coverage(plan.pool).reserved - running_reserved_nodes, 0)
    if plan.hardware.price_per_node is None:  # a type sold without a list price (UltraServers, A4X): nothing to price it at
        return None
    return plan.hardware.price_per_node * idle


@dataclass(frozen=True)
class Flavor:
    """One Kueue ResourceFlavor of a pool: which nodes it lands on and the share of a team's quota it holds."""

    name: str
    kind: str  # reserved | on-demand | spot | ... | "" for a pool with one kind
    node_labels: dict[str, str]


def flavor_shares(plan: PoolPlan, units: int, flavors: list[Flavor], per_node: int | None = None) -> dict[str, int]:
    """A team's units on the pool split over its flavors: the reserved flavor holds the share the reservations cover
    (in proportion to maxNodes, rounded up, and never more than the reserved nodes offer: quota beyond them would
    admit work no reserved node can take), the hourly flavor the rest, so the team's total stays what it was
    promised and it uses what is paid for first. `per_node`: units of the resource one node offers, where the pool
    has several (the pool's own resource otherwise)."""
    if len(flavors) == 1:
        return {flavors[0].name: units}
    cover = coverage(plan.pool)
    reserved = -(-units * cover.usable // cover.max_nodes) if cover.max_nodes else 0  # rounded up: paid-for capacity first
    reserved = min(reserved, cover.usable * (plan.units_per_node if per_node is None else per_node))
    out: dict[str, int] = {}
    rest = units
    for flavor in flavors:
        if flavor.kind == RESERVED:
            out[flavor.name] = reserved
            rest -= reserved
        elif rest:
            out[flavor.name] = rest
            rest = 0
        else:
            out[flavor.name] = 0
    return out
