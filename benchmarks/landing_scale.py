"""What the landing check costs: its share of the dev-aws plan, and how it grows with teams x pools.

    python benchmarks/landing_scale.py           # 15 interleaved repeats
    python benchmarks/landing_scale.py --json
    python benchmarks/landing_scale.py --quotas kai   # the grid on KAI Scheduler's queues, teams in departments of five

1. The dev-aws plan (the program under the mock engine, in this process) with the landing check and with the check
   replaced by an empty list, interleaved so both see the same machine, fastest run against fastest run; target: at
   most 1.10x.
2. The check alone on stacks of T teams x P pools (every team on every pool, Kueue or `--quotas`), as time per verdict against the
   time per verdict of the smallest grid measured in the same run: a check linear in teams x pools keeps the ratio
   near 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GRID = [(5, 4), (20, 4), (5, 16), (20, 16)]


def grid_stack(teams: int, pools: int, quotas: str = "kueue") -> dict:
    config = {"aws:region": "eu-central-1", "gpupools:cloud": "aws", "gpupools:cluster": {"name": "bench", "create": True},
              "gpupools:pools": [{"name": f"pool-{i}", "instanceType": "g5.12xlarge", "maxNodes": 8} for i in range(pools)]}
    config["gpupools:teams"] = [{"name": f"team-{i}", "gpus": {f"pool-{j}": 2 for j in range(pools)}, "borrow": "all"} for i in range(teams)]
    if quotas == "kai":
        # Fractions on the first pool (a fourth shape there), teams in departments of five.
        config["gpupools:pools"][0]["sharing"] = {"mode": "none", "fraction": 0.5}
        config["gpupools:quotas"] = "kai"
        config["gpupools:departments"] = [{"name": f"dept-{d}", "teams": [f"team-{i}" for i in range(d, min(d + 5, teams))]}
                                          for d in range(0, teams, 5)]
    return config


def plan_once(raw: dict, with_landing: bool) -> float:
    from gpupools.cli.planrun import run_program
    from gpupools.deploy import platform

    real = platform.landing_check
    if not with_landing:
        platform.landing_check = lambda stack, plans=None: []
    try:
        start = time.perf_counter()
        run_program(raw, "dev-aws")
        return time.perf_counter() - start
    finally:
        platform.landing_check = real


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quotas", choices=["kueue", "kai"], default="kueue")
    args = parser.parse_args()
    from gpupools.landing.check import landing_check
    from gpupools.validation.stack import validate_stack

    raw = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev-aws.yaml").read_text())["config"]
    plan_once(raw, True)  # imports and caches out of the way
    with_, without = [], []
    for _ in range(args.repeats):
        with_.append(plan_once(raw, True))
        without.append(plan_once(raw, False))
    # The fastest run of each is the least disturbed by whatever else the machine does; both are shown.
    share = min(with_) / min(without)

    rows = []
    for teams, pools in GRID:
        stack = validate_stack(grid_stack(teams, pools, args.quotas))
        landing_check(stack)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            verdicts = landing_check(stack)
            times.append(time.perf_counter() - start)
        rows.append({"teams": teams, "pools": pools, "verdicts": len(verdicts), "seconds": statistics.median(times),
                     "perVerdict": statistics.median(times) / len(verdicts)})
    floor = rows[0]["perVerdict"]
    for row in rows:
        row["ratio"] = row["perVerdict"] / floor
    result = {"devAwsPlanWithLanding": min(with_), "devAwsPlanWithout": min(without), "ratio": share,
              "medianRatio": statistics.median(with_) / statistics.median(without), "grid": rows}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"dev-aws plan (fastest of {args.repeats}): {result['devAwsPlanWithLanding']:.3f} s with the landing check, "
          f"{result['devAwsPlanWithout']:.3f} s without: {share:.3f}x (target at most 1.10x; medians {result['medianRatio']:.3f}x)")
    print(f"{'teams':>6} {'pools':>6} {'verdicts':>9} {'seconds':>9} {'per verdict':>12} {'ratio':>6}")
    for row in rows:
        print(f"{row['teams']:>6} {row['pools']:>6} {row['verdicts']:>9} {row['seconds']:>9.4f} {row['perVerdict'] * 1e6:>10.1f}us {row['ratio']:>6.2f}")


if __name__ == "__main__":
    main()
