"""KAI Scheduler policies: the queue tree (kai-queues-sane), top-level quotas against the fleet (team-quota-oversubscription),
and fractions shared between teams without isolation (kai-fractions-isolated), each passing and refused; and the example
stack's own plan through the pack."""

from __future__ import annotations

import copy

from gpupools.policies.quotas import kai_ratio

from test_policies import EKS, eks_node_group, resource_violations, stack_violations

QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
PLATFORM = "gpupools:index:GpuPlatform"
UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}


def queue(name: str, parent: str | None = None, quota: float = 4, limit: float = -1, **resources) -> tuple[str, str, dict]:
    spec: dict = {"resources": {"gpu": {"quota": quota, "limit": limit, "overQuotaWeight": 1}, "cpu": dict(UNLIMITED), "memory": dict(UNLIMITED)}}
    spec["resources"].update(resources)
    if parent:
        spec["parentQueue"] = parent
    return (QUEUE, name, {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec})


def tree(*extra) -> list[tuple[str, str, dict]]:
    """research (8, limit 10) over vision 5 and speech 3; a g5.2xlarge pool of 6 GPUs."""
    return [(EKS, "infer", eks_node_group()), queue("research", quota=8, limit=10), queue("vision", "research", 5),
            queue("speech", "research", 3, 3), *extra]


def test_a_sound_tree_passes():
    assert stack_violations("kai-queues-sane", tree()) == []


def test_a_missing_parent_a_loop_and_a_team_above_its_department_are_refused():
    (missing,) = stack_violations("kai-queues-sane", tree(queue("orphan", "nobody", 1)))
    assert missing == "Queue orphan names parent nobody, which no Queue in the stack defines; KAI's queue webhook refuses it"
    loop = stack_violations("kai-queues-sane", [queue("a", "b", 1), queue("b", "a", 1)])
    assert loop and all("is its own ancestor" in m for m in loop)
    resources = tree()
    resources[2] = queue("vision", "research", 11)
    messages = stack_violations("kai-queues-sane", resources)
    assert "Queue vision is guaranteed 11 GPUs, more than its parent research may hold (10)" in messages
    assert "the teams of Queue research are guaranteed 14 GPUs together, more than its quota of 8" in messages


def test_children_over_the_parents_quota_alone_are_refused():
    resources = tree()
    resources[2] = queue("vision", "research", 6)
    assert stack_violations("kai-queues-sane", resources) == ["the teams of Queue research are guaranteed 9 GPUs together, more than its quota of 8"]


def test_limits_below_quota_unlimited_resources_left_at_zero_and_dead_queues_are_refused():
    assert stack_violations("kai-queues-sane", [queue("a", quota=4, limit=2)]) == ["Queue a is guaranteed 4 GPUs but limited to 2"]
    (cpu,) = stack_violations("kai-queues-sane", [queue("a", cpu={"quota": 0})])
    assert cpu.startswith("Queue a leaves cpu without a limit; KAI reads that as a limit of 0")
    bare = queue("a")
    del bare[2]["spec"]["resources"]["memory"]
    assert "memory" in stack_violations("kai-queues-sane", [bare])[0]
    dead = stack_violations("kai-queues-sane", tree(queue("idle", "research", 0, 0)))
    assert dead == ["Queue idle can never hold a GPU: its quota and its limit are 0"]
    assert stack_violations("kai-queues-sane", tree(queue("burst", "research", 0, -1))) == []


def test_top_level_quotas_count_against_the_whole_gpus_of_the_pools():
    assert kai_ratio(_resources(tree())) == (8, 6)  # departments only: their teams are inside their quota
    assert stack_violations("team-quota-oversubscription", tree()) == []
    over = tree(queue("product", quota=2))
    (message,) = stack_violations("team-quota-oversubscription", over)
    assert message == ("KAI queues guarantee 10 GPUs against 6 the pools offer at maxNodes (1.67x, above the 1.5x maximum); "
                       "raise maxNodes or lower team and department gpus")
    assert stack_violations("team-quota-oversubscription", over, config={"maxRatio": 2}) == []


def _resources(items):
    from types import SimpleNamespace

    return [SimpleNamespace(resource_type=t, name=n, props=copy.deepcopy(p), urn=f"urn:{n}") for t, n, p in items]


def test_fractions_for_several_teams_without_isolation_warn():
    shared = {"landing": [], "fractions": [{"pool": "share", "teams": ["vision", "search"], "isolation": "none"}]}
    (message,) = resource_violations("kai-fractions-isolated", PLATFORM, shared)
    assert message.startswith("pool share lets teams vision, search share GPUs in KAI fractions with nothing isolating")
    alone = {"landing": [], "fractions": [{"pool": "share", "teams": ["vision"], "isolation": "none"}]}
    assert resource_violations("kai-fractions-isolated", PLATFORM, alone) == []
    isolated = {"landing": [], "fractions": [{"pool": "share", "teams": ["vision", "search"], "isolation": "hami-core"}]}
    assert resource_violations("kai-fractions-isolated", PLATFORM, isolated) == []


def test_the_example_stack_passes_every_mandatory_policy_and_warns_on_its_shared_fraction_pool(stack_file):
    import json

    from gpupools.cli.main import app
    from typer.testing import CliRunner

    from charts.chartrender import STACKS

    result = CliRunner().invoke(app, ["check", "--config", str(STACKS / "Pulumi.dev-aws-kai.yaml"), "--json"])
    report = json.loads(result.output)
    mandatory = [v for v in report["violations"] if v["level"] == "mandatory"]
    assert mandatory == [] and result.exit_code == 0, result.output
    advisory = [v["policy"] for v in report["violations"] if v["level"] == "advisory"]
    assert "kai-fractions-isolated" in advisory
