"""`gpupools plan`, `check` and `workload --fleet` on a fleet stack (gpupools:fleet): read it with its workers' stack
files, refuse what cannot work across them, and show both layers of quota and where each team's job lands."""

from __future__ import annotations

from pathlib import Path

from gpupools.fleet.config import FleetStack, read_fleet
from gpupools.fleet.plan import FleetPlan, plan_fleet, shared_origin_problems
from gpupools.queues.kueue import CHART
from gpupools.stack.errors import ConfigError


def load_fleet(raw: dict, path: Path, name: str) -> tuple[FleetStack, FleetPlan]:
    """The fleet and its plan, or ConfigError with every problem (of the fleet file, of a worker's, across them)."""
    from gpupools.program import read_worker_stack

    fleet = read_fleet(raw, path.parent, name, read_worker_stack)
    plan = plan_fleet(fleet)
    plan.problems += shared_origin_problems(fleet, sibling_fleets(path))
    if plan.problems:
        raise ConfigError(plan.problems)
    return fleet, plan


def sibling_fleets(path: Path) -> list[tuple[str, str, list[str]]]:
    """The other fleet stacks beside this one: (name, origin, worker stack references), as far as each reads."""
    from gpupools.stack.values import read_stack_file

    out = []
    for other in sorted(path.parent.glob("Pulumi.*.yaml")):
        if other.resolve() == path.resolve() or "gpupools:fleet:" not in other.read_text(errors="replace"):
            continue
        try:
            fleet = read_stack_file(other).get("gpupools:fleet")
        except ConfigError:
            continue
        if isinstance(fleet, dict) and isinstance(fleet.get("origin"), str) and isinstance(fleet.get("workers"), list):
            refs = [w["stack"] for w in fleet["workers"] if isinstance(w, dict) and isinstance(w.get("stack"), str)]
            out.append((other.name[len("Pulumi."):].rsplit(".", 1)[0], fleet["origin"], refs))
    return out


def run_fleet(raw: dict, name: str, fleet: FleetStack, plan: FleetPlan):
    """The fleet program under the mock engine. A worker's output only known while it runs (its kubeconfig) can stop
    it with pulumi.RunError: that is a ConfigError here, one line, however deep the SDK wrapped it."""
    import pulumi

    from gpupools.cli.planrun import run_program
    from gpupools.program import fleet_main
    from gpupools.stack.errors import Problem

    try:
        return run_program(raw, name, program=lambda: fleet_main(fleet, plan))
    except Exception as exc:  # the SDK wraps an output's error in ValueErrors "While processing resource ..."
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, pulumi.RunError):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        raise ConfigError([Problem("", str(cause))]) from None


def plan_lines(fleet: FleetStack, plan: FleetPlan, resources: int, source: Path | None = None) -> list[str]:
    target = fleet_target(fleet)
    how = "new" if fleet.cluster.create else "existing"
    f = fleet.fleet
    lines = [f"gpupools plan: fleet stack {fleet.name}{f' (read from {source})' if source else ''}, MultiKueue manager on {target.SERVICE} "
             f"cluster {fleet.cluster.name} ({how}, no GPU pools), Kueue {CHART.default_version}",
             f"manager: origin {f.origin}, incremental dispatcher ({f.step_size} worker{'' if f.step_size == 1 else 's'} per round, in the order below), a lost worker's "
             f"jobs dispatched again after {f.worker_lost_timeout}",
             "workers, in dispatch order:"]
    for i, view in enumerate(plan.views, 1):
        ws = view.entry.stack
        ok, why = plan.reach[view.name]
        lines.append(f"  {i}. {view.name}: stack {view.entry.worker.stack} ({view.entry.worker.file}), {ws.target.SERVICE} cluster "
                     f"{ws.cluster.name}, Kueue {view.kueue_version}, JobSet {'installed' if view.jobset else 'MISSING'}, credentials: "
                     f"{'service-account token (multikueueKubeconfig)' if ws.fleet_worker is not None else 'NONE'}")
        lines.append(f"     reach: {'ok' if ok else 'BLOCKED'}: {why}")
    workers = [v.name for v in plan.views]
    lines.append("quota per team and resource: the manager's queue (sum of the workers' unless set), then each worker's")
    header = ["team", "resource", "manager", *workers]
    rows = [[q.team, q.resource, f"{q.manager}{' (set)' if fleet_team(fleet, q.team).gpus is not None else ''}",
             *[str(dict(q.per_worker).get(w, "-")) for w in workers]] for q in plan.quotas]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        lines.append("  " + "   ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip())
    lines.append("landing across the fleet: each team's Job, from the manager to the workers whose own landing check passes (dispatch order)")
    for row in plan.landing:
        where = "; ".join(f"{w} ({', '.join(p)})" for w, p in row.workers) or "NOWHERE"
        lines.append(f"  {row.team} {row.shape}: {where}")
    lines.append(f"{resources} resources.")
    return lines


def fleet_team(fleet: FleetStack, name: str):
    return next(t for t in fleet.fleet.teams if t.name == name)


def fleet_target(fleet: FleetStack):
    from gpupools.stack.targets import resolve_cloud

    return resolve_cloud(fleet.cloud, fleet.cluster.managed_mode)


def plan_json(plan: FleetPlan, result) -> dict:
    return {**result.as_json(), "fleet": {
        "origin": plan.stack.fleet.origin,
        "workers": [{"name": v.name, "stack": v.entry.worker.stack, "reachable": plan.reach[v.name][0], "reach": plan.reach[v.name][1],
                     "jobset": v.jobset, "tokenKubeconfig": v.entry.stack.fleet_worker is not None} for v in plan.views],
        "quotas": [{"team": q.team, "resource": q.resource, "manager": q.manager, "workers": q.workers,
                    "perWorker": dict(q.per_worker)} for q in plan.quotas],
        "landing": [row.as_json() for row in plan.landing]}}


def fleet_workload(fleet: FleetStack, plan: FleetPlan, team: str | None, resource: str | None, units: int, image: str) -> str:
    import yaml

    from gpupools.fleet.plan import fleet_job
    from gpupools.stack.errors import Problem

    names = [t.name for t in fleet.fleet.teams]
    if team not in names:
        raise ConfigError([Problem("--team", f"a fleet's Job is one team's: give --team (one of {', '.join(names)})")])
    covered = [q.resource for q in plan.quotas if q.team == team and q.manager > 0]
    if resource is not None and resource not in covered:
        raise ConfigError([Problem("--resource", f"team {team}'s manager queue has no quota of {resource!r}; it covers "
                                                 f"{', '.join(covered) or 'nothing'}")])
    job = fleet_job(fleet, team, resource, units, image, plan.quotas)
    chosen = resource or (covered[0] if covered else "-")
    lands = [f"{w} ({', '.join(p)})" for row in plan.landing if row.team == team and row.shape == "unit" for w, p in row.workers]
    head = (f"# fleet {fleet.name}: submit to the manager; MultiKueue dispatches a copy to the first worker that admits it, "
            f"in order: {', '.join(lands) or 'none'} ({chosen})\n")
    return head + yaml.safe_dump(job, sort_keys=False)


def fleet_idle(fleet: FleetStack, targets: list[str], window: str, below: str, min_idle: str, whole_window: bool, raw: bool,
               timeout: str, as_json: bool, auth) -> tuple[str, int]:
    """`gpupools idle` across a fleet: one Prometheus per worker (`WORKER=URL`), read one after the other within one
    deadline (--timeout is what the whole fleet's report may take), each worker's answer or the line saying why it
    failed. Status 1 when any worker could not be read, 2 for bad input."""
    import json
    import time

    from gpupools.idle.options import parse_below, parse_min_idle, parse_timeout, parse_window
    from gpupools.idle.promapi import ReportError, parse_url, redact
    from gpupools.idle.promauth import connect
    from gpupools.idle.report import idle_report
    from gpupools.idle.text import format_table
    from gpupools.stack.errors import Problem

    names = [w.name for w in fleet.fleet.workers]
    urls: dict[str, str] = {}
    for target in targets:
        worker, sep, url = target.partition("=")
        if not sep or worker not in names:
            raise ConfigError([Problem("--prometheus", f"across a fleet, give WORKER=URL with WORKER one of {', '.join(names)}")])
        if worker in urls:
            raise ConfigError([Problem("--prometheus", f"worker {worker} is given twice")])
        urls[worker] = url
    try:
        seconds, threshold, budget = parse_window(window), parse_below(below), parse_timeout(timeout)
        least = seconds if whole_window else parse_min_idle(min_idle, seconds)
        parsed = {w: parse_url(u) for w, u in urls.items()}
    except ReportError as exc:
        raise ConfigError([exc.problem]) from None
    deadline = time.monotonic() + budget
    lines, docs, status = [], {}, 0
    for worker in (w for w in names if w in parsed):
        url = parsed[worker]
        head = f"worker {worker} ({redact(url)})"
        if time.monotonic() >= deadline:
            lines.append(f"{head}: not read: the report's --timeout {timeout} ran out before this worker")
            docs[worker], status = {"error": "timeout"}, 1
            continue
        try:
            prom = connect(url, budget, auth).until(deadline)
            report = idle_report(prom, seconds, threshold, min_idle=0 if whole_window else least, whole_window=whole_window, raw=raw)
        except ReportError as exc:
            lines.append(f"{head}: {exc.problem}")
            docs[worker], status = {"error": str(exc.problem)}, max(status, exc.code)
            continue
        docs[worker] = report.as_json()
        if report.gpus_seen == 0:
            lines.append(f"{head}: no DCGM GPU metrics in the last {window}")
        elif not report.idle:
            lines.append(f"{head}: no idle GPUs among {report.gpus_seen}")
        else:
            lines.append(f"{head}:\n{format_table(report)}")
    for worker in (w for w in names if w not in parsed):
        lines.append(f"worker {worker}: not read (no --prometheus {worker}=URL)")
    if as_json:
        return json.dumps({"workers": docs}, indent=2), status
    return "\n".join(lines), status
