"""What a Karpenter NodePool's own settings do to its nodes, read back from the NodePool object itself.

On EKS Auto Mode and AKS node auto-provisioning the cloud runs Karpenter, and what takes a pool's nodes away is not a
cloud upgrade setting but the NodePool: drift (a new node image, a Kubernetes version, a changed NodePool or node class)
is a graceful method its `spec.disruption.budgets` rate-limit, expiry (`spec.template.spec.expireAfter`) is forceful and
ignores budgets and `karpenter.sh/do-not-disrupt`, and `spec.template.spec.terminationGracePeriod` is how long a
draining node waits for its pods, PodDisruptionBudgets and do-not-disrupt included; with it set, drift may also take a
node whose pods carry do-not-disrupt (Karpenter docs, website/content/en/docs/concepts/disruption.md @ v1.14.1:
"Expiration", "TerminationGracePeriod", "Pod-Level Controls"; the same rules in AKS's node-auto-provisioning-disruption.md).

So the plan's lines for those pools are read from the NodePool gpupools sends (`node_pool_lines`), not told beside it:
a NodePool that changes changes its lines. The budgets gpupools writes are built here too (`drift_budgets`), so that what
is written and what is read back are one format.

Pure: no cloud, no SDK.
"""

from __future__ import annotations

import math
import re
from gpupools.upgrades.policy import UPGRADES_LABEL, PoolUpgrade, Window, wait_text

# Cron's day of week counts from Sunday (0); the window's from Monday.
_CRON_DAY = (1, 2, 3, 4, 5, 6, 0)
WEEK_MINUTES = 7 * 24 * 60
# Karpenter's defaults where a NodePool leaves a field out (karpenter.sh_nodepools.yaml @ v1.14.1): expireAfter 720h,
# one budget of 10% of the nodes; consolidationPolicy WhenEmptyOrUnderutilized.
DEFAULT_EXPIRE_AFTER = "720h"
DEFAULT_BUDGET = "10%"
# How long an empty GPU node is kept before Karpenter removes it, on every Karpenter pool gpupools writes.
CONSOLIDATE_EMPTY_AFTER = "10m"
# Karpenter's node repair stops while more than 20% (rounded up) of a NodePool's nodes are unhealthy
# (kubernetes-sigs/karpenter v1.14.1 pkg/controllers/node/health/controller.go, allowedUnhealthyPercent, areNodesHealthy).
REPAIR_UNHEALTHY_PERCENT = 20


def cron(week_minute: int) -> str:
    """A budget's schedule for a minute of the week (0 = Monday 00:00 UTC)."""
    day, rest = divmod(week_minute, 24 * 60)
    return f"{rest % 60} {rest // 60} * * {_CRON_DAY[day]}"


def duration(total: int) -> str:
    """A budget's duration: hours and minutes only (the CRD's pattern)."""
    hours, mins = divmod(total, 60)
    return f"{hours}h{mins}m" if hours and mins else (f"{hours}h" if hours else f"{mins}m")


def drift_budgets(policy: PoolUpgrade, window: Window) -> list[dict]:
    """Training: no Drifted node over every closed stretch of the week (`schedule` and `duration` together, the CRD's one
    CEL rule; cron in UTC), `maxUnavailable` otherwise. Inference: drift at any time, as many as it may take at once."""
    if not policy.training:
        return [{"nodes": str(max(1, policy.max_unavailable, policy.max_surge)), "reasons": ["Drifted"]}]
    budgets = [{"nodes": "0", "reasons": ["Drifted"], "schedule": cron(start), "duration": duration(length)} for start, length in window.closed_spans()]
    return budgets + [{"nodes": str(max(1, policy.max_unavailable)), "reasons": ["Drifted"]}]


# --------------------------------------------------------------------------------------------------------------------
# Reading a NodePool back

_DURATION = re.compile(r"(\d+)(h|m|s)")
_CRON = re.compile(r"^(\d+) (\d+) \* \* (\d)$")


def minutes_of(text: str) -> int | None:
    """`480h`, `24h0m0s` or `90m` in whole minutes; None for Never or what is not a duration."""
    if not isinstance(text, str) or not text or _DURATION.sub("", text):
        return None
    seconds = sum(int(n) * {"h": 3600, "m": 60, "s": 1}[unit] for n, unit in _DURATION.findall(text))
    return seconds // 60


def hours_text(total_minutes: int) -> str:
    """`480h (20 days)`, `24h`, `30m` as the plan says a duration."""
    if total_minutes % 60:
        return wait_text(total_minutes)
    hours = total_minutes // 60
    return f"{hours}h ({hours // 24} days)" if hours >= 48 and hours % 24 == 0 else f"{hours}h"


def _spec(node_pool: dict) -> dict:
    return ((node_pool.get("spec") or {}).get("template") or {}).get("spec") or {}


def _disruption(node_pool: dict) -> dict:
    return (node_pool.get("spec") or {}).get("disruption") or {}


def _applies_to_drift(budget: dict) -> bool:
    return "Drifted" in (budget.get("reasons") or ["Drifted"])  # a budget without reasons holds for every reason


def _blocked_spans(budgets: list[dict]) -> list[tuple[int, int]] | None:
    """The week's stretches in which a budget of 0 nodes stops drift, as (start minute of the week, length); None when a
    schedule is not one this module writes (a cron other than `M H * * D`)."""
    spans = []
    for b in budgets:
        if str(b.get("nodes")) != "0" or not _applies_to_drift(b) or "schedule" not in b:
            continue
        match, length = _CRON.match(str(b["schedule"])), minutes_of(str(b.get("duration", "")))
        if match is None or length is None:
            return None
        minute, hour, day = (int(g) for g in match.groups())
        spans.append(((_CRON_DAY.index(day) * 24 * 60 + hour * 60 + minute) % WEEK_MINUTES, length))
    return sorted(spans)


def _at_once(budgets: list[dict]) -> str:
    """What the unscheduled budgets let drift take at once (Karpenter takes the most restrictive one)."""
    always = [str(b["nodes"]) for b in budgets if "schedule" not in b and _applies_to_drift(b)] if budgets else [DEFAULT_BUDGET]
    if not always:
        return "any number of nodes"  # no budget for drift outside the scheduled ones: Karpenter sets no limit
    counts = [int(n) for n in always if not n.endswith("%")]
    if counts:
        n = min(counts)
        return f"{n} node{'s' if n != 1 else ''}"
    return f"{min(always, key=lambda n: int(n[:-1]))} of the nodes"


def drift_when(node_pool: dict, window: Window) -> str:
    """When drift may start on the pool's nodes, from its budgets."""
    budgets = _disruption(node_pool).get("budgets") or []
    at_once = _at_once(budgets)
    blocked = _blocked_spans(budgets)
    if blocked == []:
        return f"at any time, {at_once} at a time"
    if blocked is not None and blocked == sorted(window.closed_spans()):
        return f"only {window.text}, {at_once} at a time"
    if blocked is not None and sum(n for _, n in blocked) >= WEEK_MINUTES:
        return "never (a budget of 0 nodes holds all week)"
    return f"outside the NodePool's scheduled budgets of 0 nodes, {at_once} at a time"


def grace(node_pool: dict, default: str | None = None) -> tuple[str | None, str]:
    """(the terminationGracePeriod that holds, where it comes from): the NodePool's, the cloud's default, or none."""
    own = _spec(node_pool).get("terminationGracePeriod")
    if own:
        return str(own), "terminationGracePeriod"
    if default:
        return default, "no terminationGracePeriod on the NodePool: the cloud's default"
    return None, "no terminationGracePeriod"


def node_pool_lines(node_pool: dict, window: Window, drift_sources: str, default_grace: str | None = None,
                    lifetime_cap: str | None = None) -> list[str]:
    """The plan's upgrade lines for a Karpenter NodePool the cloud's own Karpenter runs: what `drift_sources` (the
    cloud's words for what drifts nodes) do to the nodes under the NodePool's budgets and grace period, how long nodes
    live, and when empty or busy nodes are consolidated. `default_grace`: what the cloud applies when the NodePool sets no
    terminationGracePeriod; `lifetime_cap`: the cloud's own limit on a node's life, said beside expireAfter."""
    spec, disruption = _spec(node_pool), _disruption(node_pool)
    kind = ((node_pool.get("metadata") or {}).get("labels") or {}).get(UPGRADES_LABEL, "pool")
    period, source = grace(node_pool, default_grace)
    if period is None:
        held = "a node running a Job (karpenter.sh/do-not-disrupt) is not drifted until the Job ends (no terminationGracePeriod)"
    else:
        held = (f"drift may take a node running a Job too: it drains, and pods still running {hours_text(minutes_of(period) or 0)} later, the "
                f"Job's included, are deleted ({source})")
    lines = [f"{kind}: {drift_sources} reach the nodes by drift {drift_when(node_pool, window)}; {held}"]
    expire = spec.get("expireAfter", DEFAULT_EXPIRE_AFTER)
    if expire == "Never":
        lines.append("nodes never expire (expireAfter Never)")
    else:
        life = minutes_of(str(expire))
        line = (f"every node expires {hours_text(life) if life is not None else expire} after it starts (expireAfter), at any hour: expiry "
                f"ignores the budgets and karpenter.sh/do-not-disrupt and starts no replacement first")
        if period is not None:
            line += f"; a running Job gets {hours_text(minutes_of(period) or 0)} to finish"
        else:
            line += "; a node running a Job stays draining until the Job ends"
        if lifetime_cap:
            line += f" ({lifetime_cap})"
        lines.append(line)
    lines.append(consolidation_line(disruption))
    return lines


def consolidation_line(disruption: dict) -> str:
    policy = disruption.get("consolidationPolicy", "WhenEmptyOrUnderutilized")
    after = disruption.get("consolidateAfter")
    empty = "empty nodes are kept (consolidateAfter Never)" if after == "Never" else f"an empty node goes after {after or '0s'} (consolidateAfter)"
    if policy == "WhenEmpty":
        return f"{empty}; a node running pods is never consolidated (WhenEmpty)"
    return (f"{empty}; underused nodes are consolidated too ({policy}): their pods are moved, except where karpenter.sh/do-not-disrupt holds "
            f"them")


def repair_threshold(node_pool: dict) -> tuple[int, int] | None:
    """(nodes at the NodePool's limit, unhealthy nodes repair still acts on at that size), from `spec.limits.nodes`."""
    limit = ((node_pool.get("spec") or {}).get("limits") or {}).get("nodes")
    try:
        nodes = int(str(limit))
    except ValueError:
        return None
    return nodes, math.ceil(nodes * REPAIR_UNHEALTHY_PERCENT / 100)


def deleted_node_line(node_pool: dict, default_grace: str | None = None) -> str:
    """What a node deleted by hand (kubectl delete node) does to a running Job: Karpenter's termination controller drains
    it, and a pod carrying karpenter.sh/do-not-disrupt is not evicted until it ends or the grace period runs out
    (disruption.md, "Pod-Level Controls")."""
    period, source = grace(node_pool, default_grace)
    if period is None:
        return "it drains, and waits for a running Job (karpenter.sh/do-not-disrupt) to end (no terminationGracePeriod)"
    return f"it drains, and pods still running {hours_text(minutes_of(period) or 0)} later, a Job's included, are deleted ({source})"


def repair_line(node_pool: dict, who: str) -> str:
    """Karpenter's node repair, as the NodePool bounds it. Once a node's condition has stayed bad past the cloud's wait,
    the health controller stamps the NodeClaim's termination time as now and deletes it: the node goes at once, "bypassing
    the standard drain and grace period procedures" (disruption.md, "Node Auto Repair"; controller.go
    annotateTerminationGracePeriod, deleteNodeClaim). It repairs no node of a NodePool while more of its nodes than 20%,
    rounded up, are unhealthy (`repair_threshold`)."""
    name = (node_pool.get("metadata") or {}).get("name", "?")
    line = f"{who} deletes the node at once, without draining it: a running Job's pods are killed, no terminationGracePeriod applies"
    threshold = repair_threshold(node_pool)
    if threshold is not None:
        nodes, unhealthy = threshold
        line += (f"; it repairs nothing while more than {unhealthy} of NodePool {name}'s nodes are unhealthy at its full {nodes} "
                 f"(limits.nodes; {REPAIR_UNHEALTHY_PERCENT}%, rounded up)")
    return line
