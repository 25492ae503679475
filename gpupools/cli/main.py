"""The `gpupools` command line: plan, render, workload, catalog, check, idle.

Every user mistake ends as `error: <field>: <what is wrong>` lines on stderr and exit status 2.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import List, NoReturn, Optional

import typer
import yaml

from gpupools.stack.errors import ConfigError, Problem

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Shared, monitored, policy-checked GPU node pools on EKS, AKS, GKE and Gcore Managed Kubernetes.")

EXIT_USAGE = 2


def fail(problems: list[Problem] | Problem | str, code: int = EXIT_USAGE) -> NoReturn:
    if isinstance(problems, (Problem, str)):
        problems = [problems]
    for p in problems:
        typer.echo(str(p) if isinstance(p, Problem) else f"error: {p}", err=True)
    raise typer.Exit(code)


def project_dir() -> Path | None:
    """The nearest directory with a Pulumi.yaml, so `--stack` works from anywhere inside a project; None outside one
    (never the installed package's own folder: its example stacks are not the user's)."""
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "Pulumi.yaml").exists():
            return d
    return None


def stack_path(stack: str | None, config: Path | None) -> tuple[Path, str]:
    if stack and config:
        fail("give either --stack or --config, not both")
    if config is not None:
        if config.is_dir():
            fail(Problem("--config", f"{str(config)!r} is a directory; give a stack file such as {config / 'Pulumi.dev.yaml'}, or --stack NAME"))
        name = config.name
        name = name[len("Pulumi."):-len(".yaml")] if name.startswith("Pulumi.") and name.endswith((".yaml", ".yml")) else config.stem
        return config, name
    if not stack:
        fail("give --stack NAME (stacks/Pulumi.NAME.yaml) or --config FILE")
    root = project_dir()
    if root is None:
        fail(Problem("--stack", f"no Pulumi project at {Path.cwd()} or above it (no Pulumi.yaml); run inside the project, or give the "
                                f"stack file with --config FILE"))
    stacks_dir = root / "stacks"
    from gpupools.stack.reading import ReadError, read_document

    try:
        meta = read_document(root / "Pulumi.yaml")
        if isinstance(meta, dict) and isinstance(meta.get("stackConfigDir", "."), str):
            stacks_dir = root / meta.get("stackConfigDir", ".")
    except (OSError, ReadError):
        pass
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    if not path.exists():
        known = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))
        fail(Problem("--stack", f"no stack {stack!r} ({path} does not exist); known stacks: {', '.join(known) or 'none'}"))
    return path, stack


def load(stack: str | None, config: Path | None, fleet: bool = False):
    """Read and validate a stack file once, with the project-level config Pulumi merges into it; everything after
    this works on typed objects. `fleet`: the command also reads fleet stacks, returned as (raw, FleetStack, name,
    FleetPlan) once every check across the fleet passed."""
    from gpupools.stack.project import project_file_of, read_stack
    from gpupools.validation.stack import validate_stack
    from gpupools.fleet.config import is_fleet

    path, name = stack_path(stack, config)
    try:
        document = read_stack(path, project_file_of(path))
        for line in document.warnings:
            typer.echo(line, err=True)
        raw = document.config
        if is_fleet(raw):
            if not fleet:
                fail(Problem("--stack", f"{name} is a fleet stack (gpupools:fleet): plan, check and workload --fleet read it"))
            from gpupools.cli.fleet import load_fleet

            return (raw, *load_fleet(raw, path, name), name)
        return raw, validate_stack(raw), name
    except ConfigError as exc:
        fail(exc.problems)


StackOpt = typer.Option(None, "--stack", "-s", help="Stack name: reads stacks/Pulumi.NAME.yaml")
ConfigOpt = typer.Option(None, "--config", "-c", help="Path of any stack file")
JsonOpt = typer.Option(False, "--json", help="Machine-readable JSON on stdout")


def run_plan(raw: dict, name: str):
    from gpupools.cli.planrun import run_program

    return run_program(raw, name)


def read_previous_plan(path: Path, stack: str) -> dict:
    """A previous `plan --json` (as much of it as the replacement check reads, gpupools.cli.previousplan), or exit 2
    naming the file."""
    from gpupools.stack.reading import ReadError
    from gpupools.cli.previousplan import read_previous_plan as skim
    from gpupools.cli.replacement import previous_plan_problems

    try:
        doc = skim(path)
    except OSError as exc:
        fail(Problem("--against", f"{path}: cannot read: {exc.strerror}"))
    except ReadError as exc:
        fail(Problem("--against", f"{path}: {exc}"))
    problems = previous_plan_problems(doc, stack)
    if problems:
        fail([Problem("--against", f"{path}: {p}") for p in problems])
    return doc



def _fleet_run(loaded: tuple):
    """A fleet stack's plan, run with every worker's; a ConfigError ends the command as one line per problem."""
    from gpupools.cli.fleet import run_fleet

    raw, fleet_stack, fleet_plan, name = loaded
    try:
        return run_fleet(raw, name, fleet_stack, fleet_plan)
    except ConfigError as exc:
        fail(exc.problems)

@app.command()
def plan(stack: Optional[str] = StackOpt, config: Optional[Path] = ConfigOpt, as_json: bool = JsonOpt,
         against: Optional[Path] = typer.Option(None, "--against", dir_okay=False,
                                                help="A previous `plan --json`: mark each pool change that replaces the pool or drains its nodes")) -> None:
    """Show what `pulumi up` would create, offline, by running the program under Pulumi's mock engine."""
    loaded = load(stack, config, fleet=True)
    if len(loaded) == 4:
        from gpupools.cli.fleet import plan_json, plan_lines

        raw, fleet_stack, fleet_plan, name = loaded
        result = _fleet_run(loaded)
        typer.echo(json.dumps(plan_json(fleet_plan, result), indent=2, sort_keys=True) if as_json
                   else "\n".join(plan_lines(fleet_stack, fleet_plan, len(result.resources), stack_path(stack, config)[0])))
        return
    raw, typed, name = loaded
    previous = read_previous_plan(against, name) if against is not None else None
    result = run_plan(raw, name)
    from gpupools.cli.replacement import pool_changes

    changes = pool_changes(previous, result) if previous is not None else None
    if as_json:
        from gpupools.landing.check import landing_check

        from gpupools.cli.planreport import plan_warnings

        # The verdicts the program exported, each with its whole chain of steps (the stack output leaves that out).
        warnings = plan_warnings(typed)
        doc = {**result.as_json(), "landing": [v.as_json() for v in landing_check(typed)], "warnings": warnings}
        # The JSON usually goes to a file: the warnings reach the terminal or CI log as well, as `check --json` does.
        for warning in warnings:
            typer.echo(f"warning: {warning}", err=True)
        if changes is not None:
            doc["changes"] = [{"type": c.type, "name": c.name, "action": c.action, "fields": list(c.fields),
                               **({"drains": list(c.rolls), "pace": c.pace} if c.rolls else {})} for c in changes]
        from gpupools.cli.nodechanges import node_setting_changes, node_settings_json

        settings = node_settings_json(typed)  # only where a pool sets node:, so other plans stay as they were
        if settings:
            doc["nodeSettings"] = settings
        node_changes = node_setting_changes(previous, typed) if previous is not None else []
        if node_changes:
            doc["nodeSettingChanges"] = node_changes
        typer.echo(json.dumps(doc, indent=2, sort_keys=True))
        return
    from gpupools.cli.planreport import print_plan

    from gpupools.cli.nodechanges import node_change_lines, node_setting_changes

    node_changes = node_change_lines(node_setting_changes(previous, typed)) if previous is not None else None
    print_plan(typed, result, changes=changes, source=stack_path(stack, config)[0], node_changes=node_changes)


@app.command()
def catalog(cloud: Optional[str] = typer.Option(None, "--cloud", help="aws | azure | gcp | gcore"), as_json: bool = JsonOpt) -> None:
    """List the GPU instance types gpupools knows, with GPUs, MIG profiles and list prices."""
    from gpupools.core.catalog import CLOUDS
    from gpupools.cli.catalogview import catalog_rows, print_catalog

    if cloud is not None and cloud not in CLOUDS:
        fail(Problem("--cloud", f"{cloud!r} is not a cloud gpupools supports; allowed: {', '.join(CLOUDS)}"))
    rows = catalog_rows(cloud)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    print_catalog(rows, cloud=cloud)


@app.command()
def render(stack: Optional[str] = StackOpt, config: Optional[Path] = ConfigOpt,
           out: Path = typer.Option(..., "--out", "-o", help="Directory to write into")) -> None:
    """Write each Helm release's values and every other Kubernetes object as YAML, for review or kubectl."""
    from gpupools.cli.render import UnsafeOutput, write_rendered

    if out.exists() and not out.is_dir():
        fail(Problem("--out", f"{str(out)!r} is a file; give a directory to write into (created if missing)"))
    raw, typed, name = load(stack, config)
    result = run_plan(raw, name)
    try:
        written, withheld = write_rendered(typed, result, out)
    except UnsafeOutput as exc:
        fail(Problem("--out", str(exc)))
    except OSError as exc:
        fail(Problem("--out", f"cannot write to {str(out)!r}: {exc.strerror}"))
    for path in written:
        typer.echo(str(path))
    for note in withheld:
        typer.echo(note)


WORKLOAD_IMAGE = "nvcr.io/nvidia/cuda:12.8.0-base-ubuntu24.04"


@app.command()
def workload(stack: Optional[str] = StackOpt, config: Optional[Path] = ConfigOpt,
             pool: Optional[str] = typer.Option(None, "--pool", "-p", help="Pool the Job should run on (with --team: optional on Kueue)"),
             team: Optional[str] = typer.Option(None, "--team", "-t", help="Queue for this team's GPU quota, in its namespace"),
             priority: Optional[str] = typer.Option(None, "--priority", help="With --team on Kueue: high, normal or low (default: the team's)"),
             image: str = typer.Option(WORKLOAD_IMAGE, "--image", help="Container image (with --nodes: PyTorch with NCCL)"),
             units: int = typer.Option(1, "--units", help="Schedulable GPU units to request (1 or more)"),
             fraction: Optional[float] = typer.Option(None, "--fraction", help="With --team on KAI Scheduler: part of one GPU (above 0, "
                                                                               "below 1) on a pool whose sharing allows fractions"),
             gpu_memory: Optional[str] = typer.Option(None, "--gpu-memory", help="vgpu pools: memory per vGPU, e.g. 8Gi, 3000Mi or 25%"),
             gpu_cores: Optional[int] = typer.Option(None, "--gpu-cores", help="vgpu pools: compute share per vGPU, percent of one GPU"),
             profile: Optional[str] = typer.Option(None, "--profile", help="Pools with a mixed MIG layout: the MIG profile to ask "
                                                                           "for, e.g. 3g.90gb (default: the layout's first)"),
             nodes: Optional[int] = typer.Option(None, "--nodes", help="A multi-node job on a fabric pool: N pods, one per node, each with "
                                                                       "all its GPUs and fabric devices"),
             explain: bool = typer.Option(False, "--explain", help="Before the Job, as YAML comments: whether and where it lands, step by "
                                                                   "step (queue, scheduling, a node from zero, readiness, device plugin)"),
             jobset: bool = typer.Option(False, "--jobset", help="With --nodes or --nccl-test: the multi-node job as a JobSet (one "
                                                                 "replicated job of N pods; JobSet makes the Service and the rendezvous name)"),
             nccl_test: bool = typer.Option(False, "--nccl-test", help="The fabric's NCCL all-reduce test (nccl-tests all_reduce_perf over "
                                                                       "MPI) on --nodes nodes of the pool (default 2), with the bus "
                                                                       "bandwidth the cloud published for the instance type"),
             fleet: bool = typer.Option(False, "--fleet", help="With --team and a fleet stack: the Job the team submits to the "
                                                               "MultiKueue manager, which dispatches it to a worker"),
             resource: Optional[str] = typer.Option(None, "--resource", help="With --fleet: the GPU resource to ask for (default: the "
                                                                             "first the team's manager queue covers)"),
             claim_template: Optional[Path] = typer.Option(None, "--claim-template", help="With --nodes or --nccl-test: a "
                                                           "ResourceClaimTemplate (resource.k8s.io/v1, YAML) every pod also claims, "
                                                           "printed before the job (e.g. a DRA network driver's NICs)")) -> None:
    """Print a ready-to-apply Kubernetes Job: on POOL with the right GPU request and toleration, or queued for TEAM."""
    from gpupools.pools.planning import plan_pool, plan_pools
    from gpupools.landing.jobs import disruption_budget, job_manifest, multinode_job, team_job, workload_problems

    if units < 1:
        fail(Problem("--units", f"{units} is not a number of GPU units to request; ask for 1 or more"))
    if fleet or resource is not None:
        from gpupools.cli.fleet import fleet_workload

        loaded = load(stack, config, fleet=True)
        if len(loaded) != 4:
            fail(Problem("--fleet", "give a fleet stack (one with gpupools:fleet) with --stack or --config"))
        try:
            typer.echo(fleet_workload(loaded[1], loaded[2], team, resource, units, image), nl=False)
        except ConfigError as exc:
            fail(exc.problems)
        return
    _, typed, _ = load(stack, config)
    if explain and (pool is None or pool not in [p.name for p in typed.pools]):
        fail(Problem("--pool", f"--explain follows the Job to one pool; name it with --pool (one of {', '.join(p.name for p in typed.pools)})"))

    def explained(job: dict, docs: list[dict] = ()) -> str:
        """--explain's comment lines. Whatever the flag, a Job that would not land is said on stderr, one line naming the
        step it stops at: printed without a word, it would be applied and wait in its queue or stay Pending."""
        from gpupools.landing.check import cluster_of, land

        target_name = _job_pool(job, pool) if job.get("kind") == "Job" else pool
        cluster = cluster_of(typed)
        target = next((p for p in cluster.plans if p.name == target_name), None)
        if target is None:  # a team's Job on Kueue without --pool: its queue's flavors pick the pool
            return ""
        team_plan = next((t for t in cluster.teams if t.team.name == team), None)
        verdict = land(cluster, team_plan, target, "gang" if nodes or nccl_test else "job", job, docs)
        failing = verdict.failing
        if failing is not None:
            typer.echo(f"warning: this Job does not land on pool {target.name}: it stops at {failing.name}: {failing.detail}"
                       + ("" if explain else " (--explain shows every step)"), err=True)
        if not explain:
            return ""
        head = [f"# landing: {'lands' if verdict.lands else 'DOES NOT LAND'}" + (f" on flavor {verdict.flavor}" if verdict.flavor else "")
                + f" ({verdict.job})"]
        head += [f"#   {'ok  ' if s.ok else 'FAIL'} {s.name}: {s.detail}" for s in verdict.steps]
        return "\n".join(head) + "\n"
    def profiled(job: dict) -> dict:
        """The Job asking for --profile's MIG slice instead of the pool's first (a mixed layout offers several)."""
        if profile is None:
            return job
        from gpupools.core.catalog import mig_resource_name
        from gpupools.landing.shapes import asking_for

        target = plan_pool(typed, typed.pool(pool))
        offered = [r.removeprefix("nvidia.com/mig-") for r in target.node_resources if r.startswith("nvidia.com/mig-")]
        if mig_resource_name(profile) not in target.node_resources:
            fail(Problem("--profile", f"{profile!r} is not a MIG profile pool {pool} offers" + (
                f"; it offers {', '.join(offered)}" if offered else "; its GPUs are not split into MIG slices")))
        return asking_for(job, target, mig_resource_name(profile))

    if profile is not None and (pool is None or pool not in [p.name for p in typed.pools]):
        fail(Problem("--profile", f"a MIG profile is one pool's: name the pool with --pool (one of {', '.join(p.name for p in typed.pools)})"))
    if profile is not None and (nodes is not None or nccl_test or fraction is not None):
        fail(Problem("--profile", "a MIG slice is one unit of one pool: not with --nodes, --nccl-test or --fraction"))
    extra_claim = None
    if claim_template is not None:
        from gpupools.landing.jobs import read_claim_template

        if nodes is None and not nccl_test:
            fail(Problem("--claim-template", "a claim template joins a multi-node job: give --nodes N and its --pool, or --nccl-test"))
        try:
            extra_claim = read_claim_template(claim_template)
        except ConfigError as exc:
            fail(exc.problems)
    if jobset and nodes is None and not nccl_test:
        fail(Problem("--jobset", "a JobSet runs a multi-node job: give --nodes N (2 or more) and its --pool, or --nccl-test"))
    if nccl_test:
        from gpupools.landing.nccltest import DEFAULT_NODES, dump, expected_lines, nccl_test as nccl_test_docs

        if pool is None or pool not in [p.name for p in typed.pools]:
            fail(Problem("--nccl-test", f"the test runs on one fabric pool: name it with --pool; pools: {', '.join(p.name for p in typed.pools)}"))
        if units != 1 or gpu_memory is not None or gpu_cores is not None:
            fail(Problem("--units", "the NCCL test takes every GPU of each node; drop --units, --gpu-memory and --gpu-cores"))
        count = nodes if nodes is not None else DEFAULT_NODES
        target = plan_pool(typed, typed.pool(pool))
        try:
            docs = nccl_test_docs(typed, target, count, image if image != WORKLOAD_IMAGE else None, team, priority, jobset=jobset)
        except ConfigError as exc:
            fail(exc.problems)
        from gpupools.landing.jobs import channel_comment, rack_docs, with_claim_template

        from gpupools.fabric.dragpu import dra_docs

        docs = dra_docs(target, rack_docs(target, with_claim_template(docs, extra_claim)))
        typer.echo("\n".join(expected_lines(typed, target, docs)) + "\n" + explained(docs[-1], docs) + channel_comment(docs) + dump(docs), nl=False)
        return
    if nodes is not None:
        if pool is None or pool not in [p.name for p in typed.pools]:
            fail(Problem("--pool", f"a multi-node job names its pool with --pool; pools: {', '.join(p.name for p in typed.pools)}"))
        if units != 1 or gpu_memory is not None or gpu_cores is not None:
            fail(Problem("--units", "a multi-node job takes every GPU of each node; drop --units, --gpu-memory and --gpu-cores"))
        try:
            if jobset:
                from gpupools.landing.jobs import multinode_jobset

                docs = [multinode_jobset(typed, plan_pool(typed, typed.pool(pool)), nodes, image if image != WORKLOAD_IMAGE else None, team, priority)]
            else:
                docs = multinode_job(typed, plan_pool(typed, typed.pool(pool)), nodes,
                                     image if image != WORKLOAD_IMAGE else None, team, priority)
        except ConfigError as exc:
            fail(exc.problems)
        # A training pool's job is kept from upgrade drains by a PodDisruptionBudget, printed before it.
        budget = disruption_budget(plan_pool(typed, typed.pool(pool)), docs[-1])
        docs = docs[:-1] + ([budget] if budget else []) + docs[-1:]
        from gpupools.landing.jobs import channel_comment, rack_docs, with_claim_template

        from gpupools.fabric.dragpu import dra_docs

        docs = dra_docs(plan_pool(typed, typed.pool(pool)), rack_docs(plan_pool(typed, typed.pool(pool)), with_claim_template(docs, extra_claim)))
        typer.echo(explained(docs[-1], docs) + channel_comment(docs) + yaml.safe_dump_all(docs, sort_keys=False), nl=False)
        return
    if fraction is not None and team is None:
        fail(Problem("--fraction", "a fraction of a GPU is KAI Scheduler's: give --team (with gpupools:quotas: kai)"))
    if team is not None:
        try:
            job = profiled(team_job(typed, plan_pools(typed), team, pool, priority, image=image, units=units, gpu_memory=gpu_memory,
                                    gpu_cores=gpu_cores, fraction=fraction))
        except ConfigError as exc:
            fail(exc.problems)
        _print_job(typed, pool, job, explained)
        return
    names = [p.name for p in typed.pools]
    if pool is None:
        fail(Problem("--pool", f"give --pool (one of {', '.join(names)}) or --team"))
    if priority is not None:
        fail(Problem("--priority", "only with --team"))
    if pool not in names:
        fail(Problem("--pool", f"{pool!r} is not a pool of this stack; pools: {', '.join(names)}"))
    plan_ = plan_pool(typed, typed.pool(pool))
    problems = workload_problems(plan_, units, gpu_memory, gpu_cores)
    if problems:
        fail(problems)
    job = profiled(job_manifest(typed, plan_, image=image, units=units, gpu_memory=gpu_memory, gpu_cores=gpu_cores))
    _print_job(typed, pool, job, explained)


def _job_pool(job: dict, pool: str | None) -> str | None:
    """The pool a Job runs on: the one its nodeSelector names, else --pool (a team's Job on Kueue without --pool names
    none: its queue's flavors pick the pool)."""
    from gpupools.core.pools import POOL_LABEL

    return (job["spec"]["template"]["spec"].get("nodeSelector") or {}).get(POOL_LABEL, pool)


def _print_job(typed, pool: str | None, job: dict, explained) -> None:
    """The Job, led on a DRA pool (a preview) by the ResourceClaimTemplate its pods claim the GPUs from."""
    from gpupools.fabric.dragpu import dra_docs
    from gpupools.pools.planning import plan_pool

    label = _job_pool(job, pool)
    target = next((p for p in typed.pools if p.name == label), None)
    docs = dra_docs(plan_pool(typed, target), [job]) if target is not None and typed.sharing_of(target).mode == "dra" else [job]
    if len(docs) == 1:
        typer.echo(explained(job) + yaml.safe_dump(job, sort_keys=False), nl=False)
    else:
        typer.echo(explained(docs[-1], docs) + yaml.safe_dump_all(docs, sort_keys=False), nl=False)


# --- idle ---
@app.command()
def idle(prometheus: List[str] = typer.Option(..., "--prometheus", help="Prometheus base URL, e.g. http://localhost:9090; with a fleet "
                                                                      "stack, WORKER=URL once per worker"),
         window: str = typer.Option("24h", "--window", help="How far back to look: 24h, 7d, 90m ..."),
         below: str = typer.Option("5", "--below", help="A step is idle when utilization stayed below this percentage"),
         min_idle: str = typer.Option("1h", "--min-idle", help="List holders idle at least this long within the window (0: any idle step)"),
         whole_window: bool = typer.Option(False, "--whole-window", help="List only holders idle at every step they were seen"),
         raw: bool = typer.Option(False, "--raw", help="Count from raw samples even where gpupools' recorded idle steps cover the window"),
         timeout: str = typer.Option("2m", "--timeout", help="The longest the whole report may take, every query included (sent to Prometheus too)"),
         by: Optional[str] = typer.Option(None, "--by", help="team, or team=NAME[,NAME]: totals per team (needs --stack or --config)"),
         stack: Optional[str] = StackOpt, config: Optional[Path] = ConfigOpt,
         as_json: bool = JsonOpt,
         plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw utilization per namespace into this PNG", dir_okay=False),
         auth: str = typer.Option("auto", "--prometheus-auth", metavar="KIND",
                                  help="auto | none | bearer | aws (SigV4, AMP) | gcp (Google ADC) | azure (Entra). "
                                       "auto: by the URL's host, else bearer when a token is given, else none"),
         aws_region: Optional[str] = typer.Option(None, "--aws-region", help="aws: the workspace's region (default: from the AMP URL)"),
         token_file: Optional[Path] = typer.Option(None, "--token-file", help="bearer: file holding the token "
                                                   "(default: $GPUPOOLS_PROMETHEUS_TOKEN; never on the command line)"),
         tenant: Optional[str] = typer.Option(None, "--tenant", help="Mimir/Cortex/Thanos tenant, sent as X-Scope-OrgID (a|b: several)"),
         tenant_header: Optional[str] = typer.Option(None, "--tenant-header", help="Header for --tenant instead of X-Scope-OrgID, "
                                                     "e.g. THANOS-TENANT"),
         ca_file: Optional[Path] = typer.Option(None, "--ca-file", help="PEM bundle of a private CA for an https --prometheus")) -> None:
    """Find GPUs held idle over a window: who holds them, for how long, in physical GPU-hours, and the waste at list price."""
    gc.enable()  # a report may run for minutes over many answers: the collector stays on (see main)
    from gpupools.idle.options import parse_below, parse_min_idle, parse_timeout, parse_window
    from gpupools.idle.plotting import PLOT_HINT, plot_available
    from gpupools.idle.plotting import plot as draw
    from gpupools.idle.promapi import ReportError, parse_url, redact
    from gpupools.idle.report import idle_report
    from gpupools.idle.teams import by_team, format_teams, parse_by
    from gpupools.idle.text import format_table
    from gpupools.idle.promauth import AuthOptions, connect

    teams = None
    if stack is not None or config is not None:
        loaded = load(stack, config, fleet=True)
        if len(loaded) == 4:
            from gpupools.cli.fleet import fleet_idle

            if by is not None or plot is not None:
                fail(Problem("--by" if by is not None else "--plot", "not across a fleet: run it against one worker's Prometheus and stack"))
            try:
                text, status = fleet_idle(loaded[1], prometheus, window, below, min_idle, whole_window, raw, timeout, as_json,
                                          AuthOptions(auth, aws_region, token_file, tenant, ca_file, tenant_header))
            except ConfigError as exc:
                fail(exc.problems)
            typer.echo(text)
            raise typer.Exit(status)
        teams = {t.name: t.namespace_name for t in loaded[1].teams}
    if len(prometheus) != 1:
        fail(Problem("--prometheus", "give one Prometheus URL; one per worker (WORKER=URL) only with a fleet stack (--stack)"))
    prometheus = prometheus[0]
    try:
        chosen = parse_by(by, teams) if by is not None else None
        url, seconds, threshold = parse_url(prometheus), parse_window(window), parse_below(below)
        least = seconds if whole_window else parse_min_idle(min_idle, seconds)
        if plot is not None and plot.suffix.lower() != ".png":
            fail(Problem("--plot", f"{str(plot)!r} must be a .png file"))
        if plot is not None and not plot_available():
            fail(Problem("--plot", PLOT_HINT))
        prom = connect(url, parse_timeout(timeout), AuthOptions(auth, aws_region, token_file, tenant, ca_file, tenant_header))
        report = idle_report(prom, seconds, threshold, min_idle=0 if whole_window else least, whole_window=whole_window,
                             plot=plot is not None, raw=raw)
    except ReportError as exc:
        fail(exc.problem, exc.code)
    totals = by_team(report, teams, chosen) if chosen is not None else None
    if as_json:
        doc = report.as_json()
        if totals is not None:
            doc["by_team"] = [vars(t) for t in totals]
        typer.echo(json.dumps(doc, indent=2))
    elif totals is not None and report.gpus_seen:
        typer.echo(format_teams(report, totals))
    elif report.gpus_seen == 0:
        typer.echo(f"no DCGM GPU metrics at {redact(url)} in the last {window}: is dcgm-exporter scraped by this Prometheus?")
    elif not report.idle:
        typer.echo(f"no idle GPUs: none of the {report.gpus_seen} GPUs was held below {threshold:g}% "
                   + ("for the whole window" if whole_window else f"for {min_idle} or more") + f" in the last {window}")
    else:
        typer.echo(format_table(report))
    if plot is not None:
        if report.gpus_seen == 0:
            typer.echo(f"--plot: nothing to draw, {str(plot)!r} not written", err=True)
            return
        try:
            draw(report, str(plot))
        except OSError as exc:
            fail(Problem("--plot", f"cannot write {str(plot)!r}: {exc.strerror}"))
        typer.echo(f"plot written to {plot}", err=as_json)
# --- end idle ---


# --- gpupools check ---


@app.command()
def check(stack: Optional[str] = StackOpt, config: Optional[Path] = ConfigOpt,
          policy_config: Optional[Path] = typer.Option(None, "--policy-config", help="JSON as for pulumi preview --policy-pack-config",
                                                       dir_okay=False),
          as_json: bool = JsonOpt) -> None:
    """Run the policy pack offline on the planned resources; exit 1 when a mandatory policy is violated."""
    from gpupools.cli.policycheck import config_report, policy_settings, print_result, read_policy_config, run_policies
    from gpupools.policies.pack import POLICIES

    try:
        policy_raw = read_policy_config(policy_config) if policy_config else {}
        settings = policy_settings(policy_raw, POLICIES)
    except ConfigError as exc:
        fail(exc.problems)
    loaded = load(stack, config, fleet=True)
    if len(loaded) == 4:
        raw, fleet_stack, fleet_plan, name = loaded
        planned = _fleet_run(loaded)
    else:
        raw, _typed, name = loaded
        planned = run_plan(raw, name)
    result = run_policies(planned, settings)
    result.config = config_report(policy_raw, POLICIES, settings)
    if as_json:
        # The JSON goes to a file in CI; what weakens the gate goes to the log as well.
        for line in result.config.lines():
            typer.echo(line, err=True)
        typer.echo(json.dumps(result.as_json(), indent=2))
    else:
        print_result(result, name)
    if result.mandatory:
        raise typer.Exit(1)


# --- end gpupools check ---


def exit_status(code: object) -> int:
    """The status `sys.exit(code)` gives the process: None is 0, an int itself, anything else printed to stderr and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def exit_now(status: int) -> NoReturn:
    """End the process once everything it wrote has left it, without interpreter teardown.

    Teardown (a last garbage collection over the SDKs' objects, every module's cleanup) is a quarter to two fifths of a
    plan's wall time and changes nothing the user sees. What exiting normally does that matters is done here: exit
    handlers run (logging's flush among them) and stdout and stderr are flushed. A broken stdout pipe ends with
    status 1 and no message, as the command line answers it while writing. Where a thread that is not a daemon
    still runs, or coverage is measuring, the process exits normally, since both expect to finish at exit."""
    import atexit
    import os
    import threading

    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()) or "coverage" in sys.modules:
        sys.exit(status)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BrokenPipeError:
            status = 1
        except (OSError, ValueError):  # closed or unusable: nothing more can reach it
            pass
    os._exit(status)


def main() -> None:
    """The console script. A command is one short run whose objects (the stack's models, the SDKs' resources and
    outputs, the plan) live until it ends, so the cyclic garbage collector's passes find little to free while each
    walks the young objects again: they were a tenth of a plan's wall time, for about 2% more peak memory without them
    (74.5 MB against 73.2 MB for dev-aws). `idle`, which may question Prometheus for minutes, turns it back on."""
    gc.disable()
    try:
        app()
    except KeyboardInterrupt:
        exit_now(130)
    except SystemExit as exc:
        exit_now(exit_status(exc.code))


if __name__ == "__main__":
    main()
