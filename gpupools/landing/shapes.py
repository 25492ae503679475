"""The Job of each shape the landing check follows: which shapes a pool supports (one unit of its resource, a unit of
each other MIG profile, a whole node, a fraction on KAI, a gang of two nodes on fabric pools), the Job
`gpupools workload` prints for each, and what that Job asks for, in words.

Apart from the steps, which judge any Job (`gpupools workload --explain` brings its own) and not only these.
"""

from __future__ import annotations

from typing import Mapping

from gpupools.core.pools import PoolPlan
from gpupools.core.sharing import units_per_pod
from gpupools.landing.cluster import Cluster
from gpupools.queues import kai
from gpupools.queues.teams import TeamPlan

PROBE_IMAGE = "landing-check"
SHAPES = ("unit", "node", "gang")
GANG_NODES = 2


# A shape asking for one unit of a mixed MIG layout's other profiles: `unit:` and the resource's name after nvidia.com/.
PROFILE_UNIT = "unit:"


def shapes(cluster: Cluster, plan: PoolPlan) -> list[str]:
    out = ["fraction"] if cluster.stack.quotas == "kai" and plan.sharing.fraction is not None else []
    out.append("unit")
    # A mixed MIG layout offers several resources (sharing.migLayout): a job may ask for any of them, so each is followed.
    out += [PROFILE_UNIT + r.removeprefix("nvidia.com/") for r in plan.node_resources if r != plan.mechanism.resource]
    # A whole node in one pod, where the device plugin serves one pod that many units (not MPS: `units_per_pod`).
    cap = units_per_pod(plan.mechanism, plan.hardware.gpus_per_node)
    if plan.hardware.gpus_per_node > 1 and (cap is None or cap.units >= plan.hardware.gpus_per_node):
        out.append("node")
    fabric = cluster.fabrics.get(plan.name)
    if fabric is not None and fabric.configured and plan.pool.max_nodes >= GANG_NODES:
        out.append("gang")
    return out


def job_for(cluster: Cluster, team: TeamPlan | None, plan: PoolPlan, shape: str) -> dict:
    from gpupools.landing.jobs import job_manifest, multinode_job, team_job

    stack = cluster.stack
    if shape.startswith(PROFILE_UNIT):
        return asking_for(job_for(cluster, team, plan, "unit"), plan, "nvidia.com/" + shape[len(PROFILE_UNIT):])
    # A whole node: a unit of every GPU (on whole-GPU pools every GPU, on shared pools one share of each).
    units = 1 if shape == "unit" else plan.hardware.gpus_per_node
    if shape == "gang":
        return multinode_job(stack, plan, GANG_NODES, PROBE_IMAGE, team=team.team.name if team else None, team_plans=cluster.teams)[1]
    if team is None:
        return job_manifest(stack, plan, PROBE_IMAGE, units)
    fraction = plan.sharing.fraction if shape == "fraction" else None
    return team_job(stack, cluster.plans, team.team.name, plan.name, None, PROBE_IMAGE, 1 if fraction else units,
                    team_plans=cluster.teams, fraction=fraction)


def asking_for(job: dict, plan: PoolPlan, resource: str) -> dict:
    """The Job, its containers asking for `resource` where they asked for the pool's first one (same amount)."""
    for container in job["spec"]["template"]["spec"]["containers"]:
        for kind in ("limits", "requests"):
            amounts = container.get("resources", {}).get(kind)
            if amounts and plan.mechanism.resource in amounts:
                amounts[resource] = amounts.pop(plan.mechanism.resource)
    return job


def requested_resource(plan: PoolPlan, requests: Mapping[str, int]) -> str:
    """Which of the pool's resources the pod asks for (the first of a mixed MIG layout's it names; else the pool's own)."""
    return next((r for r in plan.node_resources if r in requests), plan.mechanism.resource)


def job_in_words(shape: str, plan: PoolPlan, pods: int, per_pod: Mapping[str, int], fraction: float | None = None) -> str:
    what = ", ".join(f"{v} x {k}" for k, v in per_pod.items() if k.startswith(("nvidia.com/", "vpc.", "rdma/")))
    if fraction is not None:
        what = f"{kai.fraction_text(fraction)} of one GPU ({kai.FRACTION_ANNOTATION})"
    return f"{pods} pods, each {what}" if pods > 1 else what
