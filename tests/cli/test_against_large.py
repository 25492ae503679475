"""`plan --against` reads back the largest plans: sixty Capacity Block pools past 1 MiB, the largest stack in pools the
reader accepts, and a 40 MB plan in the memory of its pool resources only. Apart from test_against_size.py, whose
bound they use, so that the two halves of these costly plans can run at the same time."""

from __future__ import annotations

import json
import tracemalloc

from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.cli.previousplan import plan_bytes_bound, read_previous_plan
from gpupools.stack.config import MAX_POOL_LABELS, MAX_POOLS
from gpupools.stack.reading import MAX_BYTES

from test_against_size import block_stack, plan_json, stack_yaml

runner = CliRunner()


def test_sixty_capacity_block_pools_read_back(tmp_path):
    """Past 1 MiB, which the stack-file limit refused before."""
    config = block_stack(60, labels=0, autoscaler="cluster-autoscaler")
    path, old, size = plan_json(tmp_path, config)
    assert size > 1024 * 1024
    config["gpupools:pools"][0]["maxNodes"] = 3
    path.write_text(stack_yaml(config))
    result = runner.invoke(app, ["plan", "--config", str(path), "--json", "--against", str(old)])
    assert result.exit_code == 0, result.stderr
    actions = [c["action"] for c in json.loads(result.stdout)["changes"]]
    assert len(actions) == 61 and actions.count("update") == 1 and actions.count("same") == 60  # and the system node group


def largest_stack(teams: int) -> dict:
    """MAX_POOLS of the costliest pools with as many of the longest labels as the stack reader's size limit
    (MAX_BYTES) lets the file hold, and teams on every pool."""
    def size(labels: int) -> int:
        return len(stack_yaml(block_stack(MAX_POOLS, teams, labels)).encode())

    bare, one = size(0), size(1)  # every label costs the same bytes
    labels = min(MAX_POOL_LABELS, (MAX_BYTES - bare) // (one - bare))
    while size(labels) > MAX_BYTES:
        labels -= 1
    return block_stack(MAX_POOLS, teams, labels)


def test_the_largest_stack_in_pools_reads_back(tmp_path):
    """The largest plan a stack the reader accepts makes, short of many teams (each adds what one does, bound
    in test_against_size.py): MAX_POOLS pools, the stack file at the reader's size limit, a team on every pool."""
    config = largest_stack(1)
    path, old, size = plan_json(tmp_path, config)
    assert size <= plan_bytes_bound(MAX_POOLS, 1)
    result = runner.invoke(app, ["plan", "--config", str(path), "--json", "--against", str(old)])
    assert result.exit_code == 0, result.stderr
    # The system node group and every pool's Karpenter NodePool, read back whole and found unchanged.
    assert [c["action"] for c in json.loads(result.stdout)["changes"]] == ["same"] * (1 + MAX_POOLS)


def test_memory_is_what_the_pool_resources_take(tmp_path):
    """A plan whose landing verdicts and outputs are 40 MB is skimmed in a few MB: only a pool resource is decoded."""
    pool = {"type": "aws:eks/nodeGroup:NodeGroup", "name": "infer", "inputs": {"instanceTypes": ["g5.2xlarge"], "diskSize": 200},
            "outputs": {"x": "y" * 1000}}
    verdict = {"team": "t", "pool": "p", "reason": "r" * 2000, "chain": [{"step": "queue", "ok": False, "detail": "d" * 2000}]}
    old = tmp_path / "old.json"
    with open(old, "w") as handle:
        handle.write('{"landing": [')
        handle.write(",".join([json.dumps(verdict)] * 10_000))
        handle.write('], "outputs": {"landing": [' + ",".join([json.dumps(verdict)] * 5_000) + ']}, "resources": [')
        handle.write(",".join([json.dumps({"type": "kubernetes:v1:ConfigMap", "name": f"c{i}", "inputs": {"data": "z" * 500}})
                               for i in range(5_000)] + [json.dumps(pool)]))
        handle.write('], "stack": "dev-aws"}')
    assert old.stat().st_size > 40_000_000
    tracemalloc.start()
    doc = read_previous_plan(old)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert doc["stack"] == "dev-aws" and doc["resources"][-1] == {"type": pool["type"], "name": "infer", "inputs": pool["inputs"]}
    assert peak < 8_000_000, peak
