"""Whether a team tolerates a pool's own taint, as Kubernetes matches a toleration to a taint (k8s.io/api core/v1
toleration.go, ToleratesTaint): same key; same value unless the operator is Exists; same effect unless the toleration
names none. The plan's toleration lines and the landing check read this answer; pure, no plan."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpupools.core.pools import Taint
from gpupools.stack.taints import Toleration

TAINT = Taint("example.com/dedicated", "inference", "NoSchedule")


@pytest.mark.parametrize("toleration, tolerates", [
    ({"key": "example.com/dedicated", "value": "inference"}, True),
    ({"key": "example.com/dedicated", "value": "training"}, False),
    ({"key": "example.com/dedicated"}, False),  # Equal without a value matches only an empty value
    ({"key": "example.com/dedicated", "operator": "Exists"}, True),  # Exists ignores the value
    ({"key": "example.com/other", "operator": "Exists"}, False),
    ({"key": "example.com/dedicated", "value": "inference", "effect": "NoSchedule"}, True),
    ({"key": "example.com/dedicated", "value": "inference", "effect": "NoExecute"}, False),
    ({"key": "example.com/dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
])
def test_a_team_tolerates_a_pool_taint_as_kubernetes_matches_it(toleration, tolerates):
    """Protects the plan's promise that a team's job lands on a tainted pool: a wrong match here says a job lands that
    the scheduler keeps off the pool, or the opposite."""
    from gpupools.queues.teams import team_tolerates

    team = SimpleNamespace(tolerations=[Toleration.model_validate(toleration)])
    assert team_tolerates(team, TAINT) is tolerates
    assert team_tolerates(SimpleNamespace(tolerations=[]), TAINT) is False


def test_a_toleration_as_kubernetes_takes_it():
    """The Jobs a team submits carry its tolerations in Kubernetes' own form: Equal with its value ("" when unset),
    Exists without one, the effect only when named."""
    assert Toleration.model_validate({"key": "k"}).as_kubernetes() == {"key": "k", "operator": "Equal", "value": ""}
    assert Toleration.model_validate({"key": "k", "operator": "Exists", "effect": "NoSchedule"}).as_kubernetes() == \
        {"key": "k", "operator": "Exists", "effect": "NoSchedule"}


def test_the_plan_says_a_prefer_no_schedule_taint_keeps_no_team_out():
    """The plan line for a PreferNoSchedule taint says every team may land, even one without the toleration: the
    scheduler only prefers other nodes (it is not among the effects that keep a pod off a node)."""
    from conftest import stack_config
    from gpupools.pools.planning import plan_pools
    from gpupools.queues.teams import toleration_lines
    from gpupools.validation.stack import validate_stack

    pools = [{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3,
              "taints": [{"key": "sku", "value": "gpu", "effect": "PreferNoSchedule"}]}]
    stack = validate_stack(stack_config("aws", pools=pools, teams=[{"name": "research", "gpus": {"infer": 2}}]))
    assert toleration_lines(stack, plan_pools(stack)) == [
        "taint sku=gpu:PreferNoSchedule on pool infer: tolerated by no team; not by research (PreferNoSchedule only steers: every team may land)"]
