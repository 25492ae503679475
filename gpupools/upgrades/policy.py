"""Per pool, one setting (`upgrades: training | inference`, or a mapping that overrides the kind's defaults) decides how
the cluster's upgrades, node image updates and GPU driver upgrades may take the pool's nodes away; per stack, one
maintenance window and its exclusions decide when. This module resolves both into cloud-neutral facts; each cloud module
turns them into its own mechanisms (EKS node group updateConfig and Karpenter disruption budgets, GKE maintenance policy
and upgradeSettings, AKS upgradeSettings and maintenance configurations) and tells the plan what the next upgrade does.

Pure: no cloud SDK, no cloud name. The cloud's own limits are asked of the stack's Cloud object (`stack.target`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from gpupools.capacity import sources as capacity
from gpupools.core.sharing import resolve_installer
from gpupools.stack.config import WEEKDAYS, MaintenanceWindow, Pool, PoolUpgrades, StackConfig
from gpupools.stack.errors import Problem

TRAINING = "training"
INFERENCE = "inference"


@dataclass(frozen=True)
class KindDefaults:
    """The upgrade pace a kind of pool (training or inference) gets unless the stack says otherwise."""

    max_unavailable: int
    max_surge: int
    wait: str


# Training: one node at a time, no spare node needed (a training pool is usually all its reservation), and a drain waits
# for the node's jobs up to a day, AKS's longest drain timeout. Inference: a new node first, then the old one drained;
# serving pods move within half an hour (AKS's default drain timeout is 30 minutes).
DEFAULTS = {
    TRAINING: KindDefaults(max_unavailable=1, max_surge=0, wait="24h"),
    INFERENCE: KindDefaults(max_unavailable=0, max_surge=1, wait="30m"),
}
MAX_WAIT_MINUTES = 30 * 24 * 60
# The label the Job controller sets on every pod of a Job (Kubernetes 1.27 and later, "batch.kubernetes.io/job-name" in
# the well-known labels): JobSets, Kueue's jobs and `gpupools workload`'s Jobs all carry it, serving Deployments do not.
# The GPU Operator's driver upgrade waits for the pods this selector matches (waitForCompletion.podSelector).
JOB_POD_SELECTOR = "batch.kubernetes.io/job-name"
# Marks each pool's cloud resource (node group tag, NodePool and node pool label) with its kind, so the policy pack can
# judge upgrade settings by what the pool runs.
UPGRADES_LABEL = "gpupools.io/upgrades"


def minutes(text: str) -> int:
    """`30m` or `24h` in minutes."""
    return int(text[:-1]) * (60 if text.endswith("h") else 1)


def wait_text(total: int) -> str:
    return f"{total // 60} h" if total % 60 == 0 else f"{total} min"


@dataclass(frozen=True)
class PoolUpgrade:
    """How one pool's nodes are upgraded, whatever the cloud."""

    kind: str
    max_unavailable: int
    max_surge: int
    wait_minutes: int
    # Reservation-bound pools (every node from reservations, nothing hourly behind them): the reserved nodes beyond
    # maxNodes, which are all a surge may use. None: hourly capacity stands behind the pool.
    spare_reserved: int | None
    # GKE flex-start and queued pools: GKE upgrades them its own way (short-lived nodes), whatever the stack says.
    short_lived: bool
    # The pool gets its cloud's fabric between nodes (gpupools.fabric.plan), and with it whatever placement the cloud
    # keeps such nodes in, which may narrow the upgrade strategies the cloud takes (GKE: no blue-green beside compact
    # placement). Known where the fabric plan is; False where it is not asked.
    fabric: bool = False

    @property
    def training(self) -> bool:
        return self.kind == TRAINING

    @property
    def surge_text(self) -> str:
        if self.max_surge:
            return f"surges {self.max_surge} new node{'s' if self.max_surge != 1 else ''} before draining {self.max_unavailable or 'one'} old"
        return f"drains {self.max_unavailable} node{'s' if self.max_unavailable != 1 else ''} at a time, no surge"


def options(pool: Pool) -> PoolUpgrades:
    entry = pool.upgrades
    if entry is None:
        return PoolUpgrades()
    if isinstance(entry, str):
        return PoolUpgrades(kind=entry)
    return entry


def spare_reserved(pool: Pool) -> int | None:
    """Reserved nodes beyond maxNodes, for a pool whose every node comes from its reservations; None otherwise."""
    if not capacity.reservations(pool) or any(k != capacity.RESERVED for k in capacity.kinds(pool)):
        return None
    return max(0, capacity.reserved_nodes(pool) - pool.max_nodes)


def pool_upgrade(pool: Pool, fabric: bool = False) -> PoolUpgrade:
    """The pool's kind's defaults, what the stack overrides, and never a surge past a reservation: a reservation-bound
    pool surges at most into its spare reserved nodes, and with none it drains a node at a time instead. `fabric`:
    the pool gets its cloud's fabric (PoolUpgrade.fabric)."""
    chosen = options(pool)
    defaults = DEFAULTS[chosen.kind]
    spare = spare_reserved(pool)
    surge = chosen.max_surge if chosen.max_surge is not None else defaults.max_surge
    if spare is not None and chosen.max_surge is None:
        surge = min(surge, spare)
    unavailable = chosen.max_unavailable if chosen.max_unavailable is not None else defaults.max_unavailable
    if surge == 0 and unavailable == 0 and chosen.max_unavailable is None:
        unavailable = 1
    wait = minutes(chosen.wait_for_jobs or defaults.wait)
    return PoolUpgrade(chosen.kind, unavailable, surge, wait, spare, any(k in capacity.DWS for k in capacity.kinds(pool)), fabric)


# --------------------------------------------------------------------------------------------------------------------
# The maintenance window

WEEK_MINUTES = 7 * 24 * 60
DAY_NAMES = {d: d.capitalize() for d in WEEKDAYS}


@dataclass(frozen=True)
class Window:
    """A weekly window in UTC: on `days` (0 = Monday), from `start` (minutes after midnight) for `hours`."""

    days: tuple[int, ...]
    start: int
    hours: int

    @classmethod
    def of(cls, window: MaintenanceWindow) -> "Window":
        hh, mm = window.start.split(":")
        return cls(tuple(sorted(WEEKDAYS.index(d) for d in window.days)), int(hh) * 60 + int(mm), window.hours)

    @property
    def daily(self) -> bool:
        return len(self.days) == 7

    @property
    def clock(self) -> str:
        end = (self.start + self.hours * 60) % (24 * 60)
        return f"{self.start // 60:02d}:{self.start % 60:02d}-{end // 60:02d}:{end % 60:02d}"

    @property
    def text(self) -> str:
        days = "daily" if self.daily else ", ".join(DAY_NAMES[WEEKDAYS[d]] for d in self.days)
        return f"{days} {self.clock} UTC ({self.hours} h)"

    def open_spans(self) -> list[tuple[int, int]]:
        """The open time of a week as (start minute of the week, length in minutes), overlapping windows merged, a
        span that runs past Sunday midnight wrapped to Monday."""
        spans = sorted((d * 1440 + self.start, self.hours * 60) for d in self.days)
        merged: list[list[int]] = []
        for start, length in spans:
            if merged and start <= merged[-1][0] + merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], start + length - merged[-1][0])
            else:
                merged.append([start, length])
        if len(merged) > 1 and merged[-1][0] + merged[-1][1] >= WEEK_MINUTES + merged[0][0]:
            last = merged.pop()
            merged[0] = [last[0], max(last[1], merged[0][0] + WEEK_MINUTES + merged[0][1] - last[0])]
            merged.sort()
        return [(s, min(n, WEEK_MINUTES)) for s, n in merged]

    def closed_spans(self) -> list[tuple[int, int]]:
        """The rest of the week, as (start minute of the week, length in minutes); none when the window is always open."""
        spans = self.open_spans()
        if len(spans) == 1 and spans[0][1] >= WEEK_MINUTES:
            return []
        closed = []
        for i, (start, length) in enumerate(spans):
            end = start + length
            following = spans[(i + 1) % len(spans)][0] + (WEEK_MINUTES if i + 1 == len(spans) else 0)
            if following > end:
                closed.append((end % WEEK_MINUTES, following - end))
        return closed

    def min_hours_in(self, days: int) -> int:
        """Open hours in the least open stretch of `days` consecutive days (a window's day counts where it starts)."""
        return min(sum(self.hours for d in range(first, first + days) if d % 7 in self.days) for first in range(7))


def window_of(stack: StackConfig) -> Window:
    return Window.of(stack.upgrades.window)


# --------------------------------------------------------------------------------------------------------------------
# Exclusions


def exclusion_days(start: str, end: str) -> int:
    """Days an exclusion holds, its first and last day included."""
    return (date.fromisoformat(end) - date.fromisoformat(start)).days + 1


# --------------------------------------------------------------------------------------------------------------------
# Checks of the stack


def upgrade_problems(stack: StackConfig, autoscaler: str) -> list[Problem]:
    """What no cloud accepts (nothing to upgrade with, a wait too long, a surge past a reservation, a date that is not
    one), then what the stack's own cloud does not (its window and exclusion limits, its drain timeout)."""
    cloud = stack.target
    problems: list[Problem] = []
    for i, pool in enumerate(stack.pools):
        path = f"pools[{i}].upgrades"
        chosen = options(pool)
        policy = pool_upgrade(pool)
        if chosen.max_surge == 0 and chosen.max_unavailable == 0:
            problems.append(Problem(f"{path}.maxUnavailable", "0 with maxSurge 0: no node could ever be upgraded; allow one node at a time "
                                                              "(maxUnavailable: 1) or a surge (maxSurge: 1)"))
        if chosen.wait_for_jobs is not None and policy.wait_minutes > MAX_WAIT_MINUTES:
            problems.append(Problem(f"{path}.waitForJobs", f"{chosen.wait_for_jobs}: at most 720h (30 days)"))
        if policy.spare_reserved is not None and chosen.max_surge is not None and chosen.max_surge > policy.spare_reserved:
            problems.append(Problem(f"{path}.maxSurge", f"{chosen.max_surge}, but the pool's reservations hold {capacity.reserved_nodes(pool)} nodes "
                                                        f"for maxNodes {pool.max_nodes}: a surge node has no capacity to start in and the upgrade "
                                                        f"stalls; at most {policy.spare_reserved} (drain instead: maxSurge: 0)"))
        if hasattr(cloud, "pool_upgrade_problems"):  # a cloud that sets no upgrade settings has no limits to check
            problems += cloud.pool_upgrade_problems(pool, policy, path, autoscaler)
    upgrades = stack.upgrades
    for j, ex in enumerate(upgrades.exclusions):
        where = f"upgrades.exclusions[{j}]"
        for key in ("start", "end"):
            try:
                date.fromisoformat(getattr(ex, key))
            except ValueError:
                problems.append(Problem(f"{where}.{key}", f"{getattr(ex, key)!r} is not a calendar date"))
        if any(p.path.startswith(where) for p in problems):
            continue
        if ex.end < ex.start:
            problems.append(Problem(f"{where}.end", f"{ex.end} is before start {ex.start}"))
    names = [ex.name for ex in upgrades.exclusions]
    for j, name in enumerate(names):
        if name in names[:j]:
            problems.append(Problem(f"upgrades.exclusions[{j}].name", f"{name!r} names another exclusion already"))
    if stack.gpu_software.driver_version and not operator_installs_driver(stack):
        who = ("the node image brings it (pin the image release instead)" if cloud.IMAGE_BRINGS_DRIVER
               else "the GPU Operator does not install it here (gpuSoftware.installer)")
        problems.append(Problem("gpuSoftware.driverVersion", f"{stack.gpu_software.driver_version}: pins the driver the GPU Operator installs, but "
                                                             f"on {cloud.SERVICE} {who}"))
    if not problems and hasattr(cloud, "maintenance_problems"):
        problems += cloud.maintenance_problems(stack.cluster, upgrades, window_of(stack), autoscaler)
    return problems


def operator_installs_driver(stack: StackConfig) -> bool:
    """Whether the GPU Operator installs the GPU driver: its installer, on a cloud whose node image brings none."""
    return resolve_installer(stack.target, stack.gpu_software.installer) == "gpu-operator" and not stack.target.IMAGE_BRINGS_DRIVER


def upgrade_lines(stack: StackConfig, pool: Pool, autoscaler: str, fabric: bool = False) -> list[str]:
    """What the next upgrade does to the pool, in the cloud's words, for the plan. A cloud whose module sets no upgrade
    settings (it answers none of the day-two questions of gpupools/core/cloud.py) is said to, not guessed at. `fabric`:
    the pool gets its cloud's fabric (gpupools.fabric.plan), as the pool's own resources are then built."""
    cloud = stack.target
    if not hasattr(cloud, "upgrade_lines"):
        return [f"{cloud.SERVICE}'s own defaults: gpupools sets no upgrade window or strategy for this cloud"]
    return cloud.upgrade_lines(pool, pool_upgrade(pool, fabric), window_of(stack), stack.cluster, autoscaler)


# --------------------------------------------------------------------------------------------------------------------
# GPU driver upgrades by the GPU Operator


def driver_upgrade_policy(pools: list[Pool]) -> dict:
    """The GPU Operator's `driver.upgradePolicy` (chart values; NVIDIA/gpu-operator v26.7.0 deployments/gpu-operator/
    values.yaml, `gpuPodDeletion` the chart maps to the ClusterPolicy's podDeletion) for the pools whose driver it
    installs. Its upgrade controller cordons a node, waits for the pods `waitForCompletion.podSelector` matches, then
    deletes every pod that uses a GPU (k8s-operator-libs as vendored in gpu-operator v26.7.0, pkg/upgrade: the node walks
    upgrade-required, cordon-required, wait-for-jobs-required, pod-deletion-required, ...; an empty podSelector skips the
    wait). So: one node at a time, wait for Jobs' pods as long as the longest-waiting pool asks, and with a training pool
    among them never more than one node's GPUs down at once."""
    policies = [pool_upgrade(p) for p in pools]
    training = any(p.training for p in policies)
    wait = max((p.wait_minutes for p in policies), default=minutes(DEFAULTS[TRAINING].wait))
    return {
        "autoUpgrade": True,
        "maxParallelUpgrades": 1,
        "maxUnavailable": "1" if training else "25%",
        "waitForCompletion": {"timeoutSeconds": wait * 60, "podSelector": JOB_POD_SELECTOR},
        "gpuPodDeletion": {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
        "drain": {"enable": False, "force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
    }


def driver_upgrade_line(pools: list[Pool]) -> str:
    policy = driver_upgrade_policy(pools)
    wait = policy["waitForCompletion"]["timeoutSeconds"] // 60
    nodes = "one node" if policy["maxUnavailable"] == "1" else f"at most {policy['maxUnavailable']} of the nodes"
    return (f"GPU driver upgrades (GPU Operator): {nodes} at a time, one upgrading (maxParallelUpgrades 1); a node is cordoned, then waits "
            f"up to {wait_text(wait)} for its running Jobs' pods ({JOB_POD_SELECTOR}) before its GPU pods are deleted")
