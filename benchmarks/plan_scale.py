"""How `gpupools plan` scales with the number of pools, against a floor measured in the same run.

The floor is Pulumi's mock engine registering the same number of bare resources (no inputs, no components),
so the ratio shows what gpupools itself adds per resource. Run:

    python benchmarks/plan_scale.py            # 10, 100 and 500 pools, 3 repeats each
    python benchmarks/plan_scale.py --json     # machine-readable
    python benchmarks/plan_scale.py --teams 10 100 1000 --sizes 10 100   # teams and pools, each against its smallest size

A stack file takes at most 100 pools (`MAX_POOLS`: one stack is one cluster, and AKS takes at most 100 node pools
per cluster), so larger sizes are built without the reader: each hundred pools is validated as a stack of its own
and the pools are put together into one validated stack, which the program plans as it would a stack it read. Every
size is built that way, outside the timing, so all of them time the same thing: the program, its resources and the
mock engine.

Teams are timed on a three-pool stack with Kueue (a namespace, a ClusterQueue, a LocalQueue and an admission
policy with its binding per team). For teams and pools alike the table shows the time per team (per pool) and
its ratio to the time per team at the smallest size: a plan linear in teams keeps that ratio near 1 (the fixed
cost of the cluster and its software is spread over more teams, so it may fall below 1); a quadratic one makes
it grow with the size.

Every example stack (stacks/Pulumi.*.yaml) is planned by `gpupools plan` in a fresh process, imports included, against
the floor of `python -c "import pulumi"`, each plan run right after a floor run so that both see the same load, in
rounds over all stacks; the ratio is the median plan over the median floor of the same stack. Target: at most 2.5x
on every stack. The plans run this checkout's package (not whatever the console script would import), with bytecode
caching on, as a user's installation has it. Against bare resources (no inputs) a plan's pools cost more per
resource: docs/performance.md says where.

    python benchmarks/plan_scale.py --examples-only --rounds 9      # just the example stacks, 9 pairs each
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARING = [None, {"mode": "time-slicing", "replicas": 4}, {"mode": "mps", "replicas": 2}, {"mode": "mig", "migProfile": "1g.10gb"}]


def stack(pools: int) -> dict:
    entries = []
    for i in range(pools):
        sharing = SHARING[i % len(SHARING)]
        entry = {"name": f"pool-{i}", "instanceType": "p4de.24xlarge" if sharing and sharing["mode"] == "mig" else "g5.2xlarge", "maxNodes": 4}
        if sharing:
            entry["sharing"] = sharing
        entries.append(entry)
    return {"aws:region": "eu-central-1", "gpupools:cloud": "aws", "gpupools:cluster": {"name": "bench"}, "gpupools:pools": entries}


def teams_stack(teams: int) -> dict:
    config = stack(3)
    config["gpupools:teams"] = [{"name": f"team-{i}", "gpus": 2 + i % 7, "priority": ("high", "normal", "low")[i % 3]} for i in range(teams)]
    return config


def validated(pools: int):
    """A validated stack of `pools` pools, beyond the reader's cap too (see above), and the config the engine gets."""
    from gpupools.stack.config import MAX_POOLS
    from gpupools.validation.stack import validate_stack

    config, entries = stack(min(pools, MAX_POOLS)), stack(pools)["gpupools:pools"]
    parts = [validate_stack({**config, "gpupools:pools": entries[i:i + MAX_POOLS]}).pools for i in range(0, pools, MAX_POOLS)]
    return validate_stack(config).model_copy(update={"pools": [pool for part in parts for pool in part]}), config


def time_plan(pools: int, config: dict | None = None) -> tuple[float, int]:
    """Seconds to plan: a stack of `pools` pools built beforehand (the program only), or `config` as a stack file."""
    from gpupools.validation.stack import validate_stack
    from gpupools.cli.planrun import run_program
    from gpupools.program import main

    if config is not None:
        start = time.perf_counter()
        validate_stack(config)
        plan = run_program(config, "bench")
        return time.perf_counter() - start, len(plan.resources)
    built, config = validated(pools)
    start = time.perf_counter()
    plan = run_program(config, "bench", program=lambda: main(built))
    return time.perf_counter() - start, len(plan.resources)


def time_floor(resources: int) -> float:
    import pulumi

    from gpupools.cli.planrun import run_program

    def bare() -> None:
        for i in range(resources):
            pulumi.CustomResource("bench:index:Bare", f"r{i}", {})

    start = time.perf_counter()
    run_program({}, "floor", program=bare)
    return time.perf_counter() - start


# What the `gpupools` console script runs, with this checkout first on the path.
CONSOLE_SCRIPT = "import sys; sys.argv[0] = 'gpupools'; from gpupools.cli.main import main; main()"
# Bytecode caching as a user's environment has it (a developer's shell may turn it off), output block-buffered.
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")}


def example_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


def example_wall(stack_name: str = "dev-aws") -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", CONSOLE_SCRIPT, "plan", "--stack", stack_name], cwd=ROOT, check=True, capture_output=True, env=ENV)
    return time.perf_counter() - start


def import_floor() -> float:
    """A fresh interpreter that only imports the Pulumi SDK: no program can plan faster."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import pulumi"], cwd=ROOT, check=True, capture_output=True, env=ENV)
    return time.perf_counter() - start


def example_rows(stacks: list[str], rounds: int) -> list[dict]:
    """Per stack: plan and floor in pairs, the pairs interleaved over the stacks, medians and their ratio."""
    for name in stacks:  # warm up: bytecode written, files in the page cache
        example_wall(name)
    import_floor()
    pairs: dict[str, list[tuple[float, float]]] = {name: [] for name in stacks}
    for _ in range(rounds):
        for name in stacks:
            floor = import_floor()
            pairs[name].append((example_wall(name), floor))
    rows = []
    for name, measured in pairs.items():
        wall, floor = statistics.median(w for w, _ in measured), statistics.median(f for _, f in measured)
        rows.append({"stack": name, "plan_s": round(wall, 3), "floor_s": round(floor, 3), "ratio": round(wall / floor, 2),
                     "ratio_range": [round(min(w / f for w, f in measured), 2), round(max(w / f for w, f in measured), 2)], "pairs": len(measured)})
    return rows


def print_examples(rows: list[dict]) -> None:
    print(f"{'example stack':<18} {'plan s':>7} {'floor s':>8} {'ratio':>6}  pairs' ratios")
    for r in rows:
        print(f"{r['stack']:<18} {r['plan_s']:>7.3f} {r['floor_s']:>8.3f} {r['ratio']:>6.2f}  {r['ratio_range'][0]:.2f}-{r['ratio_range'][1]:.2f}"
              f" ({r['pairs']})")
    print("plan = `gpupools plan --stack NAME` in a fresh process; floor = `python -c \"import pulumi\"` run just before it; "
          "ratio = median plan / median floor; target <= 2.5 on every stack")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--teams", type=int, nargs="*", default=[10, 100, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--examples", nargs="*", default=None, help="example stacks to time (default: all of stacks/)")
    parser.add_argument("--rounds", type=int, default=7, help="plan/floor pairs per example stack")
    parser.add_argument("--examples-only", action="store_true", help="time the example stacks only")
    args = parser.parse_args()
    examples = example_rows(args.examples if args.examples is not None else example_stacks(), args.rounds)
    if args.examples_only:
        print(json.dumps({"examples": examples}, indent=2)) if args.json else print_examples(examples)
        return

    time_plan(2), time_floor(10)  # warm up: imports and first-use caches are not what we measure here
    rows = []
    for size in args.sizes:
        plan_times, floor_times, resources = [], [], 0
        for _ in range(args.repeats):
            t, resources = time_plan(size)
            plan_times.append(t)
            floor_times.append(time_floor(resources))
        plan_t, floor_t = statistics.median(plan_times), statistics.median(floor_times)
        rows.append({"pools": size, "resources": resources, "plan_s": round(plan_t, 3), "floor_s": round(floor_t, 3),
                     "ms_per_pool": round(plan_t * 1000 / size, 2), "ratio": round(plan_t / floor_t, 2)})
    first = rows[0]["ms_per_pool"] if rows else None
    for r in rows:
        r["per_pool_vs_smallest"] = round(r["ms_per_pool"] / first, 2)
    team_rows = []
    for size in args.teams:
        times, resources = [], 0
        for _ in range(args.repeats if size < 1000 else 1):
            t, resources = time_plan(0, teams_stack(size))
            times.append(t)
        plan_t = statistics.median(times)
        team_rows.append({"teams": size, "resources": resources, "plan_s": round(plan_t, 3), "ms_per_team": round(plan_t * 1000 / size, 2)})
    for r in team_rows:
        r["per_team_vs_smallest"] = round(r["ms_per_team"] / team_rows[0]["ms_per_team"], 2)
    result = {"examples": examples, "scale": rows, "teams": team_rows}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print_examples(examples)
    print(f"{'pools':>6} {'resources':>9} {'plan s':>8} {'floor s':>8} {'ms/pool':>8} {'ratio':>6} {'vs smallest':>11}")
    for r in rows:
        print(f"{r['pools']:>6} {r['resources']:>9} {r['plan_s']:>8.3f} {r['floor_s']:>8.3f} {r['ms_per_pool']:>8.2f} {r['ratio']:>6.2f}"
              f" {r['per_pool_vs_smallest']:>11.2f}")
    print("ratio = plan time / floor (same number of bare resources, without inputs, under the same mock engine)")
    if team_rows:
        print(f"{'teams':>6} {'resources':>9} {'plan s':>8} {'ms/team':>8} {'vs smallest':>11}")
        for r in team_rows:
            print(f"{r['teams']:>6} {r['resources']:>9} {r['plan_s']:>8.3f} {r['ms_per_team']:>8.2f} {r['per_team_vs_smallest']:>11.2f}")
        print("vs smallest = time per team / time per team at the smallest size; linear in teams keeps it at or below 1")


if __name__ == "__main__":
    main()
