"""How a fleet's plan scales with its workers: 1, 4 and 16 workers (a MultiKueueConfig takes at most 20).

Each size is the example fleet (stacks/Pulumi.fleet.yaml) with its workers repeated under new names, alternating the
two example worker stacks. Timed: the fleet's decisions (every worker's pools, team queues and landing verdicts,
the checks across stacks, the manager's objects) and the manager's plan under the mock engine, as `gpupools plan
--stack fleet` runs them; reading the stack files is left out. The manager's own cluster is a fixed cost, so the
table shows what each worker beyond the first adds, `(plan(n) - plan(1)) / (n - 1)`, and its ratio to that of the
second size: a plan linear in workers keeps the ratio near 1, a quadratic one makes it grow with the size. Run:

    python benchmarks/fleet_scale.py              # 1, 4 and 16 workers, 3 repeats each
    python benchmarks/fleet_scale.py --json
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def fleet_of(size: int):
    from gpupools.fleet.config import read_fleet
    from gpupools.stack.values import read_stack_file

    raw = read_stack_file(ROOT / "stacks" / "Pulumi.fleet.yaml")
    examples = raw["gpupools:fleet"]["workers"]
    raw = copy.deepcopy(raw)
    raw["gpupools:fleet"]["workers"] = [{**examples[i % len(examples)], "name": f"worker-{i}", "stack": f"acme/gpupools/worker-{i}"}
                                        for i in range(size)]
    from gpupools.validation.stack import validate_stack

    count = iter(range(size))

    def distinct(path: Path):
        """Each worker a cluster of its own name, so that nothing computed for one worker's stack serves another."""
        config = read_stack_file(path)
        config["gpupools:cluster"] = {**config["gpupools:cluster"], "name": f"ml-worker-{next(count)}"}
        return validate_stack(config)

    return raw, read_fleet(raw, ROOT / "stacks", "fleet", distinct)


def time_size(size: int, repeats: int) -> float:
    from gpupools.cli.fleet import run_fleet
    from gpupools.fleet.plan import plan_fleet

    raw, fleet = fleet_of(size)
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        plan = plan_fleet(fleet)
        assert not plan.problems, plan.problems
        run_fleet(raw, "fleet", fleet, plan)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    time_size(1, 1)  # imports and first-use costs out of the timings
    rows = []
    for size in args.sizes:
        seconds = time_size(size, args.repeats)
        rows.append({"workers": size, "seconds": round(seconds, 4)})
    first = rows[0]
    for row in rows[1:]:
        row["addedPerWorker"] = round((row["seconds"] - first["seconds"]) / (row["workers"] - first["workers"]), 4)
    base = rows[1]["addedPerWorker"] if len(rows) > 1 else None
    for row in rows[1:]:
        row["ratio"] = round(row["addedPerWorker"] / base, 2) if base else None
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("workers   plan (s)   added per worker (s)   ratio")
    for row in rows:
        added = f"{row['addedPerWorker']:>20.4f}   {row['ratio']:>5.2f}" if "addedPerWorker" in row else f"{'-':>20}   {'-':>5}"
        print(f"{row['workers']:>7}   {row['seconds']:>8.3f}   {added}")


if __name__ == "__main__":
    main()
