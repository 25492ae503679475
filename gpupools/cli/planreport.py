"""Human output: the plan per pool, and the warnings `plan` prints (`plan --json` lists them too)."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING

from gpupools.autoscaling.choice import CLOUD, CLUSTER_AUTOSCALER, KARPENTER, NONE, ScaleUp, resolve_autoscaler
from gpupools.core.catalog import load_catalog
from gpupools.clouds.common import past_standard_support
from gpupools.clouds.node_settings import node_lines, pool_node_api
from gpupools.stack.config import StackConfig
from gpupools.queues.kueue import CHART as KUEUE_CHART, QUEUE_LABEL
from gpupools.cli.planrun import Plan
from gpupools.stack.providers import provider_notes
from gpupools.queues.engine import cohort_line, queue_tree_lines, team_rows, unusable_quota_warnings
from gpupools.queues.teams import toleration_lines
from gpupools.queues import kai
from gpupools.cli.replacement import PoolChange, sharing_change_note
from gpupools.core.pools import PoolPlan
from gpupools.capacity.sources import reserved_nodes
from gpupools.pools.planning import capacity_report, plan_pools
from gpupools.pools.software import driver_plan
from gpupools.fabric.computedomain import compute_domain_line, rack_scale
from gpupools.fabric.computedomain import CHART as DRA_CHART
from gpupools.fabric.dragpu import PREVIEW, dra_lines, dra_pools, preview_mark
from gpupools.autoscaling.scaleup import scale_ups
from gpupools.queues.kueue import topology_aware, topology_enforced, topology_guarantee, topology_level_warnings
from gpupools.autoscaling.templates import eviction_guard
from gpupools.core.sharing import resolve_installer, units_per_pod
from gpupools.fabric.plan import FabricPlan, catalog_fabric, fabric_off_reason, plan_fabrics
from gpupools.fabric.software import gpudirect_rdma_line
from gpupools.health.readiness import readiness_summary
from gpupools.health.repair import pool_repair
from gpupools.upgrades.policy import driver_upgrade_line, operator_installs_driver, upgrade_lines
from gpupools.monitoring.plan import DCGM_EXPORTER, MANAGED_EXPORTER, OPERATOR_EXPORTER, exporter_per_pool, operands_off

if TYPE_CHECKING:  # rich draws the human report only: `plan --json` leaves it unimported (a twentieth of its run)
    from rich.console import Console
    from rich.table import Table

AUTOSCALER_NAMES = {KARPENTER: "Karpenter (installed)", CLUSTER_AUTOSCALER: "cluster-autoscaler (installed)",
                    NONE: "none installed (gpupools:autoscaler: none)", CLOUD: "the service's own cluster autoscaler"}


def version_warnings(stack: StackConfig, today: date) -> list[str]:
    module = stack.target
    minor = stack.cluster.kubernetes_version
    release = past_standard_support(module.KUBERNETES_RELEASES, minor, today) if minor else None
    if release is None:
        return []
    return [f"Kubernetes {minor} left {module.SERVICE} standard support on {release.end_of_standard}"
            + (f"; extended support (billed extra) ends {release.end_of_extended}" if release.end_of_extended else "")]

def plan_warnings(stack: StackConfig, plans: list[PoolPlan] | None = None, today: date | None = None) -> list[str]:
    """What the plan knows will not work as the stack file says, each one line: printed as `warning: ...` lines by
    `gpupools plan`, and the `warnings` list of `plan --json` (on stderr as well). They leave the exit status 0:
    the stack is valid and `pulumi up` would create it, as with `gpupools check`'s warnings."""
    plans = plan_pools(stack) if plans is None else plans
    autoscaler = resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)
    # Clouds whose region the plan cannot always check offline say so (Gcore: its regions come only from its API).
    regions = getattr(stack.target, "region_warnings", None)
    return ((regions(stack.providers) if regions else []) + version_warnings(stack, today or date.today())
            + topology_level_warnings(stack, plans) + unusable_quota_warnings(stack, plans, autoscaler))


# Components that stand for a pool in a cloud's managed mode (a GKE ComputeClass).
MANAGED_POOL_TYPES = ("gpupools:index:GkeComputeClass", "gpupools:index:EksAutoModePool", "gpupools:index:AksNapPool")


def cluster_control_lines(stack: StackConfig) -> list[str]:
    """A new cluster's hardening controls as this stack sets them; for an existing one, which are read and which
    are not checked (gpupools changes nothing there and assumes nothing either)."""
    module = stack.target
    controls = module.cluster_controls(stack.cluster)
    if stack.cluster.create:
        return [f"cluster control: {c.name}: {c.setting}" + (f" (policy {c.policy})" if c.policy != "-" else "") for c in controls]
    read = module.READ_ON_EXISTING
    lines = [f"cluster control: {name}: {how}" for name, how in read.items()]
    unchecked = [c.name for c in controls if c.name not in read]
    lines.append(f"cluster controls not checked (existing cluster, not changed by gpupools): {', '.join(unchecked)}")
    return lines


def money(value: float) -> str:
    return f"${value:,.3f}/h" if value < 10 else f"${value:,.2f}/h"


def fabric_lines(stack: StackConfig, plan: PoolPlan, fabric: FabricPlan | None) -> list[tuple[str, str]]:
    """The pool's fabric, local NVMe and topology levels, as the plan shows them."""
    nvme = min(catalog_fabric(stack.cloud, t).local_nvme_gb for t in plan.pool.instance_types or [plan.pool.instance_type])  # what every node has
    if fabric is None:
        kind = catalog_fabric(stack.cloud, plan.pool.instance_type).kind
        why = fabric_off_reason(stack.target, plan.pool, plan.sharing, stack.cluster)
        rows = [("fabric", f"off: the instance type has {kind}, but {why}" if kind else "none")]
        use = stack.target.local_nvme_use(plan.pool, False)
        rows.append(("local NVMe", (f"{nvme:,} GB {use}" if use else f"{nvme:,} GB, unused") if nvme else "none"))
        return rows
    rows = [("fabric", fabric.summary + (f", {fabric.resource} x {fabric.resource_count} per pod" if fabric.resource else ""))]
    rdma = gpudirect_rdma_line(stack, plan_pools(stack), plan.name)
    if rdma:
        rows.append(("", rdma))
    for gap in fabric.gaps:
        rows.append(("", f"pods cannot use it yet: {gap}" if not fabric.configured else f"needs: {gap}"))
    if fabric.local_nvme_gb:
        use = stack.target.local_nvme_use(plan.pool, True)
        rows.append(("local NVMe", f"{fabric.local_nvme_gb:,} GB {use}" if use else f"{fabric.local_nvme_gb:,} GB, unused"))
    else:
        rows.append(("local NVMe", "none"))
    # A declared topologyLevel nothing enforces is said as such here, and as a warning (topology_level_warnings).
    unenforced = (f"; topologyLevel {plan.pool.topology_level} is not enforced (see the warning)"
                  if fabric.required_level and not topology_enforced(stack, plan, fabric) else "")
    if fabric.levels and topology_aware(stack, plan, fabric):
        levels = " > ".join(label for _, label in fabric.levels)
        how = (f"jobs must fit in one {fabric.required_level}" if fabric.required_level and not unenforced
               else f"jobs packed as close as Kueue can (preferred {fabric.finest_level})")
        rows.append(("topology", f"{levels}; {how}" + ("" if stack.quotas == "kueue" and stack.teams else " (used by Kueue team queues)")
                     + unenforced))
    elif fabric.levels:
        autoscaler = resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)
        rows.append(("topology", (topology_guarantee(stack, plan, fabric, autoscaler) or "") + unenforced))
    else:
        rows.append(("topology", "no topology labels on this cloud's nodes"))
    return rows


def metrics_line(stack: StackConfig, plan: PoolPlan, exporters: list[str]) -> str:
    """What exports the pool's GPU metrics (`exporter_per_pool`); anything but one exporter is said as a fault."""
    scraped = "" if stack.monitoring.enabled else "; not scraped: gpupools:monitoring is off"
    if len(exporters) > 1:
        return f"{len(exporters)} DCGM exporters ({', '.join(exporters)}): every GPU is reported twice"
    if exporters == [MANAGED_EXPORTER]:
        return stack.target.MANAGED_GPU_METRICS + scraped
    if not exporters:
        return "none: no DCGM exporter runs on these nodes, so no utilization, idle cost or GPU fault alerts"
    if exporters[0] == OPERATOR_EXPORTER:
        return "the GPU Operator's dcgm-exporter" + scraped
    line = f"dcgm-exporter chart {DCGM_EXPORTER.default_version} (release {DCGM_EXPORTER.release})"
    if operands_off(plan):
        line += ": the GPU Operator's operands, its exporter included, stay off these nodes"
    return line + scraped


def instance_types_text(stack: StackConfig, plan: PoolPlan) -> str:
    """`g5.2xlarge: 1 x A10G (24 GB)`; for a pool over several instance types, each type with its GPU count."""
    hw = plan.hardware
    if not plan.pool.instance_types:
        return f"{plan.pool.instance_type}: {hw.gpus_per_node} x {hw.gpu.name} ({hw.gpu.memory_gb} GB)"
    catalog = load_catalog()
    by_count: dict[int, list[str]] = {}
    for t in plan.pool.instance_types:
        by_count.setdefault(catalog.instance(stack.cloud, t).gpus, []).append(t)
    return "; ".join(f"{', '.join(types)}: {count} x {hw.gpu.name} ({hw.gpu.memory_gb} GB)" for count, types in by_count.items())


def pool_table(stack: StackConfig, plan: PoolPlan, result: Plan, scale_up: ScaleUp, changes: list[PoolChange] | None = None,
               exporters: list[str] | None = None, node_changes: dict[str, list[str]] | None = None) -> Table:
    """`exporters`: the pool's entry of `exporter_per_pool` for the whole stack (worked out here when not given)."""
    from rich import box
    from rich.table import Table

    pool, hw, m = plan.pool, plan.hardware, plan.mechanism
    mark = preview_mark(m)  # DRA pools: "preview" on every line the mode changes
    table = Table(title=f"pool {pool.name}", title_justify="left", box=box.SIMPLE, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    created = [r for kind in (stack.target.POOL_COMPONENT, *MANAGED_POOL_TYPES) for r in result.children(kind, pool.name)]
    table.add_row("creates", ", ".join(f"{r.type} {r.name}" for r in created) or "-")
    if changes is not None:
        mine = {(r.type, r.name) for r in created}
        for change in changes:
            if (change.type, change.name) in mine:
                table.add_row("change", change.summary)
    for line in (node_changes or {}).get(pool.name, []):  # a node setting changed since the previous plan (cli.nodechanges)
        table.add_row("node change", line)
    autoscaler = resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)
    sources = capacity_report(stack, plan, autoscaler)
    table.add_row("instance", f"{instance_types_text(stack, plan)}, " + ("capacity below" if pool.capacity is not None else sources["order"][0]))
    table.add_row("nodes", f"min {pool.min_nodes}, max {pool.max_nodes}" + (f", zones {', '.join(pool.zones)}" if pool.zones else ""))
    if pool.capacity is not None:
        table.add_row("capacity from", " > ".join(sources["order"]) + f"; {sources['coverage']}")
        for line in sources["details"]:
            table.add_row("", line)
        if "reservedCostPerHour" in sources:
            table.add_row("", f"reserved nodes are billed whether used or not: {money(sources['reservedCostPerHour'])} while idle "
                              f"(on-demand list price; a reservation bought cheaper costs less)")
    table.add_row("scale-up", mark(scale_up.summary))
    for note in scale_up.notes:
        table.add_row("", mark(note))
    table.add_row("taint", ", ".join(f"{t.key}={t.value}:{t.effect}" for t in plan.taints))
    autoscaler = resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)
    table.add_row("ready", mark(readiness_summary(stack, plan, autoscaler)))
    repair = pool_repair(stack, plan, autoscaler)
    table.add_row("broken GPU", repair.detects)
    table.add_row("repair", repair.then)
    for i, line in enumerate(upgrade_lines(stack, pool, autoscaler, fabric=plan.name in plan_fabrics(stack, [plan]))):
        table.add_row("upgrades" if i == 0 else "", line)
    if exporters is None:
        exporters = exporter_per_pool(stack, plan_pools(stack)).get(plan.name, [])
    table.add_row("GPU metrics", mark(metrics_line(stack, plan, exporters)))
    table.add_row("labels", mark(", ".join(f"{k}={v}" for k, v in plan.labels.items())))
    table.add_row("sharing", m.description)
    karpenter = resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler) == KARPENTER
    table.add_row("", mark(sharing_change_note(stack.target, m.installer, pool.os, karpenter, pool.provisioning == "compute-class")))
    for key, value in dra_lines(stack, plan):
        table.add_row(key, value)
    for key, value in kai.fraction_lines(stack, plan, scale_up.from_zero, AUTOSCALER_NAMES.get(scale_up.autoscaler or "", scale_up.autoscaler)):
        table.add_row(key, value)
    table.add_row("driver", driver_plan(stack, plan).words)
    if rack_scale(plan):
        table.add_row("NVLink", compute_domain_line(stack, plan))
    fabric_key = ""
    for key, value in fabric_lines(stack, plan, plan_fabrics(stack, [plan]).get(plan.name)):
        fabric_key = key or fabric_key  # whether a fabric is set up follows the sharing; the node's disks do not
        table.add_row(key, mark(value) if fabric_key == "fabric" else value)
    disk = getattr(stack.target, "node_disk_line", None)  # clouds whose pools' node disks gpupools sizes itself (EKS)
    if disk is not None:
        table.add_row("disk", disk(plan))
    for i, line in enumerate(node_lines(pool_node_api(stack.target, resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)), pool.node)):
        table.add_row(f"{stack.target.SERVICE} node" if i == 0 else "", line)
    unit = "vGPU" if m.mode == "vgpu" else f"{m.resource} unit" if not m.node_resources else "MIG instance or GPU"
    per_node = " + ".join(f"{r} x {n}" for r, n in plan.node_resources.items()) + " per node" + (f" ({plan.units_per_node} vGPUs)" if m.mode == "vgpu" else "")
    assumed = f"; {hw.instance_type}, the most expensive type of the pool" if pool.instance_types else ""
    table.add_row("capacity", mark(f"{per_node} x {pool.max_nodes} nodes = {plan.max_units}" + (f" ({hw.instance_type} nodes)" if assumed else "")))
    cap = units_per_pod(m, hw.gpus_per_node)
    if cap is not None:
        table.add_row("", f"a pod gets at most {cap.units} x {m.resource}: {cap.why}")
    row = load_catalog().instance(stack.target.NAME, hw.instance_type) if plan.price_per_unit is None else None
    if plan.price_per_unit is None and row is not None and row.source not in (None, "gcore-docs"):
        # Sold with a price the catalog's sources do not give (UltraServer Capacity Blocks, A4X reservations, G4).
        table.add_row("price", f"no list price: the catalog's source for {hw.instance_type} ({row.source}) gives none; left out of the "
                               f"cost below")
    elif plan.price_per_unit is None:
        table.add_row("price", f"no list price: {stack.target.SERVICE} prices {hw.instance_type} per region and account "
                               f"(the catalog's snapshot has none); left out of the cost below")
    else:
        table.add_row("price", mark(f"{money(plan.price_per_unit)} per {unit}, {money(hw.price_per_gpu)} per whole GPU "
                      f"(list price {hw.price_read}{assumed})"))
    return table


def print_plan(stack: StackConfig, result: Plan, console: Console | None = None, changes: list[PoolChange] | None = None,
               source=None, node_changes: dict[str, list[str]] | None = None) -> None:
    """The plan per pool; with `changes` (from a previous plan) each pool says whether it is replaced."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console(highlight=False, emoji=False, width=140)
    module = stack.target
    plans = plan_pools(stack)
    installer = resolve_installer(stack.target, stack.gpu_software.installer)
    how = "new" if stack.cluster.create else "existing, looked up by name"
    default = f"{module.DEFAULT_KUBERNETES_VERSION} (default)" if module.DEFAULT_KUBERNETES_VERSION else "the release channel's default"
    version = stack.cluster.kubernetes_version or (default if stack.cluster.create else "as running")
    console.print(f"[bold]gpupools plan[/bold]: stack {result.stack}{f' (read from {source})' if source else ''}, {module.SERVICE} cluster {stack.cluster.name} ({how}, Kubernetes {version}), "
                  f"GPU software: {installer}, autoscaler: "
                  f"{stack.target.AUTOSCALER_NAME if stack.target.AUTOSCALER else AUTOSCALER_NAMES[resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)]}")
    guard = eviction_guard(resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler))
    console.print("eviction guard: Jobs from `gpupools workload` carry " + (", ".join(f"{k}: \"{v}\"" for k, v in guard.items()) if guard else
                  "none (no autoscaler removes nodes)"), markup=False)
    if operator_installs_driver(stack):
        console.print(driver_upgrade_line(stack.pools), markup=False)
    for note in provider_notes(stack.cloud, stack.providers) + module.plan_notes(stack.pools):
        console.print(f"note: {note}", markup=False)
    for line in cluster_control_lines(stack):
        console.print(line, markup=False)
    exporters = exporter_per_pool(stack, plans)
    for plan, verdict in zip(plans, scale_ups(stack, plans)):
        console.print(pool_table(stack, plan, result, verdict, changes, exporters[plan.name], node_changes))
    for change in changes or []:
        if change.action == "delete":
            console.print(f"change: {change.summary} (no longer in the stack)", markup=False)
    counts: dict[str, int] = {}
    for r in result.resources:
        counts[r.type] = counts.get(r.type, 0) + 1
    summary = Table(title="all resources", title_justify="left", box=box.SIMPLE, pad_edge=False)
    summary.add_column("type")
    summary.add_column("count", justify="right")
    for typ, n in sorted(counts.items()):
        summary.add_row(typ, str(n))
    console.print(summary)
    # By name: the engine registers releases in whatever order their inputs resolve, and two plans of one stack
    # should read alike.
    releases = sorted(result.of_type("kubernetes:helm.sh/v3:Release"), key=lambda r: str(r.inputs.get("name")))
    # Pools of sharing mode dra (a preview): "preview" on the lines outside their tables that they change too.
    preview = [p.name for p in dra_pools(plans)]
    for r in releases:
        source = f" from {r.inputs['repositoryOpts']['repo']}" if r.inputs.get("repositoryOpts") else ""
        allocates = f" ({PREVIEW}: allocates the GPUs of {', '.join(preview)})" if preview and r.inputs.get("chart") == DRA_CHART.chart else ""
        console.print(f"helm release {r.inputs.get('name')}: chart {r.inputs.get('chart')} {r.inputs.get('version')}{source} "
                      f"in namespace {r.inputs.get('namespace')}{allocates}")
    # Reserved nodes are billed whether they run or not: they count at minNodes, and beyond maxNodes too.
    priced = [p for p in plans if p.price_per_unit is not None]
    low = sum(p.hourly_cost(max(p.pool.min_nodes, reserved_nodes(p.pool))) or 0 for p in priced)
    high = sum(p.hourly_cost(max(p.pool.max_nodes, reserved_nodes(p.pool))) or 0 for p in priced)
    unpriced = [p.name for p in plans if p.price_per_unit is None]
    gpus = sum(p.max_gpus for p in plans)
    reserved = any(reserved_nodes(p.pool) for p in plans)
    console.print((f"GPU nodes of {', '.join(unpriced)} have no list price in the catalog; " if unpriced else "")
                  + (f"GPU nodes cost {money(low)} at minNodes ... {money(high)} at maxNodes ({gpus} GPUs at most), "
                     f"on-demand list prices; spot pools usually cost less" if priced else f"{gpus} GPUs at most")
                  + ("; reserved nodes count whether used or not, at list price (a reservation bought cheaper costs less)" if reserved else "")
                  + ("; pools over several instance types at their most expensive type." if any(p.pool.instance_types for p in plans) else "."))
    if stack.teams:
        console.print(team_table(stack, plans))
        for line in queue_tree_lines(stack, plans) + toleration_lines(stack, plans):
            console.print(line, markup=False)
        console.print(cohort_line(stack, plans))
        if preview:
            console.print(f"{PREVIEW}: the quotas of {', '.join(preview)} count devices NVIDIA's DRA driver allocates "
                          f"(sharing mode dra), as Kueue's deviceClassMappings name them", markup=False)
    for line in landing_lines(result.outputs.get("landing") or [], set(preview)):
        console.print(line, markup=False)
    # Last, beside the count, where a terminal still shows them after the pools scrolled by; one line each, for grep.
    for warning in plan_warnings(stack, plans):
        console.print(Text.assemble(("warning", "yellow"), f": {warning}"), soft_wrap=True)
    console.print(f"{len(result.resources)} resources.")


def landing_lines(verdicts: list[dict], preview: set[str] = frozenset()) -> list[str]:
    """One line per team (or per pool without teams): which of its jobs land, and why each one that does not; a pool
    of the preview sharing mode dra (`preview`) is marked so."""
    if not verdicts:
        return []
    lines = ["landing: each team's Job (one unit, a whole node, a two-node gang on fabric pools), from its queue to a GPU on a "
             "node started from zero:"]
    by_team: dict[str, list[dict]] = {}
    for v in verdicts:
        by_team.setdefault(v.get("team") or "(no team: each pool's own Job)", []).append(v)
    for team, rows in by_team.items():
        landed = [r for r in rows if r["lands"]]
        pools: dict[str, list[str]] = {}
        for r in rows:
            pools.setdefault(r["pool"], []).append(r["shape"] if r["lands"] else f"{r['shape']} NOT")
        mark = {pool: f" ({PREVIEW})" if pool in preview else "" for pool in pools}
        where = "; ".join(f"{pool}{mark[pool]} {' '.join(shapes)}" for pool, shapes in pools.items())
        lines.append(f"  {team}: {len(landed)} of {len(rows)} land ({where})")
        for r in rows:
            if not r["lands"]:
                lines.append(f"    {r['pool']}{mark[r['pool']]} {r['shape']} stops at {r['step']}: {r['reason']}")
    # Pools that never sit at zero: whether a GPU request beyond the nodes they keep grows them (the unit Job's answer).
    floors = {v["pool"]: v["node"] for v in verdicts if v.get("shape") == "unit" and str(v.get("node", "")).startswith("the pool keeps")}
    lines += [f"  {pool}: {detail}" for pool, detail in floors.items()]
    return lines


def team_table(stack: StackConfig, plans: list[PoolPlan]) -> Table:
    from rich import box
    from rich.table import Table

    rows = team_rows(stack, plans)
    kueue_mode = stack.quotas == "kueue"
    if kueue_mode:
        title = (f"teams: Kueue {KUEUE_CHART.default_version}, one cohort; units per pool are each team's nominal quota, "
                 f"workloads set label {QUEUE_LABEL}=<queue>")
    elif stack.quotas == "kai":
        title = (f"teams: KAI Scheduler {kai.CHART.default_version}, queues departments > teams; GPUs per pool add up to each team's "
                 f"quota, which KAI keeps on any of its pools; workloads set schedulerName: {kai.SCHEDULER_NAME} and label "
                 f"{kai.QUEUE_LABEL}=<queue>")
    else:
        title = "teams: ResourceQuotas, units per pool summed per GPU resource into each namespace's hard limit"
    table = Table(title=title, title_justify="left", box=box.SIMPLE, pad_edge=False)
    columns = ["team", "namespace"] + (["queue", "priority"] if kueue_mode else []) + [p.name for p in plans]
    columns += ["borrow", "lend"] if kueue_mode else []
    for col in columns:
        table.add_column(col, justify="right" if col in {p.name for p in plans} else "left")
    for row in rows:
        units = [str(row["units"][p.name]) if p.name in row["units"] else "-" for p in plans]
        cells = [row["team"], row["namespace"]] + ([row["queue"], row["priority"]] if kueue_mode else []) + units
        table.add_row(*(cells + ([row["borrow"], row["lend"]] if kueue_mode else [])))
    return table
