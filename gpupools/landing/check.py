"""The landing check: does each team's job, submitted to its queue, reach a GPU on a node started from zero?

For every team, every pool it has quota on and every job shape the pool supports (one unit of the pool's resource,
a whole node, and on fabric pools a gang of two nodes), the Job `gpupools workload` prints is followed through the
objects the plan creates, step by step:

0. create: shown only when it fails: a name of the Job (or JobSet), or one Kubernetes or the JobSet controller builds
   from it, is over its limit, so the API server or JobSet's webhook refuses it (`landing.names`);
1. queue: the team's Kueue ClusterQueue admits it on one of its flavors (quota and cohort, topology-aware
   scheduling, admission checks), its KAI queue takes it (and a multi-node Job is one gang), or its namespace
   ResourceQuota has room;
2. schedule: the admitted pod's node selector, tolerations and scheduler fit a Ready node of the pool;
3. node: a node exists, or the pool's autoscaler starts one from zero for it;
4. ready: the node's startup taints are lifted, and every resource the pod asks for is registered on the node (a
   Karpenter NodeClaim initializes only then: kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/
   initialization.go, `RequestedResourcesRegistered`);
5. device: exactly one device plugin advertises the pool's GPU resource there, and serves as many units to one pod
   as it asks for (`core.sharing.units_per_pod`).

Pure: the same function serves `gpupools plan`, `gpupools check` (through the platform's recorded verdicts) and
`gpupools workload --explain`.

The check reads the plan into a `landing.cluster.Cluster` (`cluster_of`) and follows each Job (`land`); the Job of
each shape is in `landing.shapes`, step 1 in `landing.admission`, steps 2-5 in `landing.nodes`, and the verdict's
shape in `landing.verdict`.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gpupools.autoscaling.choice import requested_extended, resolve_autoscaler
from gpupools.core.pools import PoolPlan
from gpupools.core.sharing import HAMI_SCHEDULER
import yaml

from gpupools.fabric import computedomain, dragpu, gpudirect
from gpupools.fabric.plan import job_fabrics, plan_fabrics
from gpupools.fabric.software import efa_device_plugin_release, network_operator_release, nic_cluster_policy
from gpupools.health import readiness
from gpupools.landing import agents as node_agents
from gpupools.landing.admission import job_fraction, kai_admission, kueue_admission, resourcequota_admission
from gpupools.landing.agents import Agent
from gpupools.landing.claims import claim_templates, claims_step
from gpupools.landing.cluster import Cluster
from gpupools.landing.names import name_problems
from gpupools.landing.nodes import container_units, device_step, node_step, pool_node, ready_step, scaling_pod, schedule_step
from gpupools.landing.shapes import job_for, job_in_words, requested_resource, shapes
from gpupools.landing.verdict import Landing, Step
from gpupools.pools.planning import plan_pools
from gpupools.pools.software import DEVICE_PLUGIN, GPU_OPERATOR, HAMI_CHART, software_plan
from gpupools.queues import kai, kueue, resourcequota
from gpupools.queues.teams import TeamPlan, plan_teams
from gpupools.stack.config import StackConfig


def hugepages_registered(plan: PoolPlan) -> str | None:
    """The hugepages-2Mi a new node of the pool registers, as the autoscaling module decides it; None where nothing
    allocates them."""
    from gpupools.autoscaling import karpenter

    decide = getattr(karpenter, "hugepages_on_node", None)
    return decide(plan) if decide is not None else None


def cluster_of(stack: StackConfig, plans: list[PoolPlan] | None = None) -> Cluster:
    plans = plans if plans is not None else plan_pools(stack)
    autoscaler = resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)
    teams = plan_teams(stack, plans)
    schedulers: set[str] = set()
    kai_values: dict = {}
    if stack.quotas == "kueue":
        objects = kueue.team_objects(stack, plans, teams, None, autoscaler)
    elif stack.quotas == "kai":
        objects = kai.team_objects(stack, plans, teams) if teams else []
        kai_values = kai.helm_values(plans)
        schedulers.add(kai.SCHEDULER_NAME)
    else:
        objects = resourcequota.team_objects(stack, teams)
    software = software_plan(stack, plans)
    fabrics = plan_fabrics(stack, plans)
    agents: list[Agent] = []
    for release in software.releases:
        if release.chart == GPU_OPERATOR:
            agents += node_agents.gpu_operator_agents(release.values)
        elif release.chart == DEVICE_PLUGIN:
            agents += node_agents.device_plugin_agents(release.values)
        elif release.chart == HAMI_CHART:
            agents += node_agents.hami_agents(release.values)
            schedulers.add(release.values.get("schedulerName") or HAMI_SCHEDULER)
    for obj in software.objects:
        if obj.get("kind") == "DaemonSet" and obj["metadata"]["name"] == readiness.REPORTER:
            agents.append(node_agents.daemonset_agent(obj, clears=frozenset({readiness.READINESS_TAINT.key})))
    module = stack.target
    efa = efa_device_plugin_release(list(fabrics.values()))
    if efa is not None:
        agents += node_agents.efa_agents(efa.values, module.FABRIC_RESOURCE)
    if network_operator_release(list(fabrics.values()), True) is not None:
        from gpupools.fabric.software import nic_policy_tolerations  # the tolerations the component gives the policy

        policy = nic_cluster_policy(list(fabrics.values()), nic_policy_tolerations(stack.target, plans, list(fabrics.values())))
        if policy is not None:
            agents.append(node_agents.nic_policy_agent(policy, module.FABRIC_RESOURCE))
    agents += node_agents.image_agents(fabrics, hugepages_registered, module.CLOUD_DEVICE_PLUGIN)
    networks = gpudirect.gpu_networks(stack, fabrics)
    if networks:
        # GKE GPUDirect: the Network objects join the plan's objects (the agent reads that very list), the installers
        # and the NRI device injector are DaemonSets like any other.
        network_objects, daemonsets = gpudirect.gpudirect_objects(stack, fabrics)
        objects.extend(network_objects)
        agents += [node_agents.daemonset_agent(ds) for ds in daemonsets]
        agents.append(node_agents.gke_network_agent(objects, gpudirect.node_nics(networks)))
    device_classes: dict = {}
    dra = dragpu.dra_release(stack, plans)
    if dra is not None:
        served = computedomain.plugin_pools(dra.values)
        tolerations = dra.values["kubeletPlugin"]["tolerations"]
        device_classes = {name: (driver, served, tolerations) for name, driver in computedomain.served_device_classes(dra.values).items()}
    mappings: list = []
    if stack.quotas == "kueue" and teams:
        # What Kueue's own configuration maps, read from the values its release carries.
        config = yaml.safe_load(kueue.release(kueue.device_class_mappings(plans)).values["managerConfig"]["controllerManagerConfigYaml"])
        mappings = (config.get("resources") or {}).get("deviceClassMappings") or []
    # A rack pool's multi-node jobs run over NVLink (`job_fabrics`): the gang shape is followed there too.
    return Cluster(stack, plans, teams, autoscaler, objects, agents, {**fabrics, **job_fabrics(stack, plans)}, schedulers, kai_values,
                   device_classes, mappings)


def land(cluster: Cluster, team: TeamPlan | None, plan: PoolPlan, shape: str, job: dict | None = None,
         docs: list[dict] | tuple[dict, ...] = ()) -> Landing:
    """`docs`: the documents printed with the job (a ComputeDomain, ResourceClaimTemplates), which its claims name."""
    from gpupools.landing.jobs import rack_docs

    if job is None:
        job = job_for(cluster, team, plan, shape)
        docs = dragpu.dra_docs(plan, rack_docs(plan, [job]) if shape == "gang" else [job])
    templates = claim_templates(docs)
    if job.get("kind") == "JobSet":
        return land_jobset(cluster, team, plan, shape, job, templates)
    return with_names(job, _land(cluster, team, plan, shape, job, templates))


def with_names(workload: dict, verdict: Landing) -> Landing:
    """The verdict, led by a failing `create` step where a name of the workload is over its limit (`landing.names`):
    the API server, or JobSet's webhook, refuses the object before anything else happens to it."""
    problems = name_problems(workload)
    if not problems:
        return verdict
    return replace(verdict, steps=(Step("create", False, f"{workload['kind']} {workload['metadata'].get('name')!r} is refused: "
                                                       + "; ".join(problems)),) + verdict.steps)


def _land(cluster: Cluster, team: TeamPlan | None, plan: PoolPlan, shape: str, job: dict, templates: dict | None = None) -> Landing:
    pod = job["spec"]["template"]["spec"]
    count = int(job["spec"].get("parallelism", 1))
    requests = requested_extended(pod)
    steps: list[Step] = []
    flavor = None
    provisioned = False
    if team is not None and cluster.stack.quotas == "kueue":
        step, pod, flavor = kueue_admission(cluster, team, plan, job)
        provisioned = "ProvisioningRequest" in step.detail
        steps.append(step)
    elif team is not None and cluster.stack.quotas == "kai":
        steps.append(kai_admission(cluster, team, plan, job, multi_node=shape == "gang"))
    elif team is not None:
        steps.append(resourcequota_admission(cluster, team, plan, job))
    if pod.get("resourceClaims"):
        steps.append(claims_step(cluster, team, plan, job, templates or {}, flavor))
    node = pool_node(cluster, plan, pod)
    steps.append(schedule_step(cluster, plan, node, pod))
    fraction = job_fraction(job)
    # A fractional pod's GPU is held by KAI's reservation pod, which asks for nvidia.com/gpu: 1 with the fractional pod's
    # tolerations (resource_reservation.go lines 533-575); the node that pod needs comes from the scaling pod.
    device_pod = pod
    if fraction is not None:
        device_pod, how = scaling_pod(cluster, plan, pod)
        if device_pod is None:
            steps.append(Step("node", False, how))
            device_pod = pod
        else:
            step = node_step(cluster, plan, device_pod, 1, provisioned)
            steps.append(replace(step, detail=f"{how}; {step.detail}"))
    else:
        resource = requested_resource(plan, requests)
        per_node = max(1, plan.node_resources.get(resource, plan.units_per_node) // max(1, requests.get(resource, 1)))
        steps.append(node_step(cluster, plan, pod, math.ceil(count / per_node), provisioned))
    annotations = (job["spec"]["template"].get("metadata") or {}).get("annotations") or {}
    fabric = cluster.fabrics.get(plan.name)
    software = fabric.node_software if fabric is not None and shape == "gang" else ()
    steps.append(ready_step(cluster, node, device_pod, gpudirect.network_resources(annotations), software))
    resource = requested_resource(plan, requests)
    if plan.mechanism.mode != "dra" or resource in requests:  # a DRA pool's GPUs: the claims step follows them to the driver
        steps.append(device_step(cluster, plan, node, resource, container_units(pod, resource)))
    return Landing(team.team.name if team else None, plan.name, shape, job_in_words(shape, plan, count, requests, fraction), tuple(steps), flavor)


def landing_check(stack: StackConfig, plans: list[PoolPlan] | None = None) -> list[Landing]:
    """Every team x every pool it has quota on x every shape; without teams, every pool's own Job."""
    cluster = cluster_of(stack, plans)
    out = []
    if cluster.teams:
        for team in cluster.teams:
            for plan in team.pools:
                if team.nominal.get(plan.name, 0) <= 0 and team.borrowing_limit() == 0:
                    continue
                out += [land(cluster, team, plan, shape) for shape in shapes(cluster, plan)]
    else:
        for plan in cluster.plans:
            out += [land(cluster, None, plan, shape) for shape in shapes(cluster, plan)]
    return out


def land_jobset(cluster: Cluster, team: TeamPlan | None, plan: PoolPlan, shape: str, jobset: dict, templates: dict | None = None) -> Landing:
    """A JobSet, followed PodSet by PodSet (one per replicated job, `landing.jobset.podsets`), each as the Job Kueue and the
    scheduler see of it; the JobSet lands when every PodSet does. Each PodSet's quota and nodes are judged on their own:
    Kueue admits a workload's PodSets together, so a JobSet whose PodSets fit only one at a time passes here and waits
    in the queue (gpupools' own JobSets have one PodSet)."""
    from gpupools.landing.jobset import podsets

    verdicts = [(name, _land(cluster, team, plan, shape, view, templates)) for name, view in podsets(jobset)]
    if len(verdicts) == 1:
        return with_names(jobset, verdicts[0][1])
    steps = []
    for i, step in enumerate(verdicts[0][1].steps):
        parts = [(name, v.steps[i]) for name, v in verdicts]
        steps.append(Step(step.name, all(s.ok for _, s in parts), "; ".join(f"PodSet {name}: {s.detail}" for name, s in parts)))
    flavors = sorted({v.flavor for _, v in verdicts if v.flavor})
    return with_names(jobset, Landing(team.team.name if team else None, plan.name, shape, "; ".join(f"{name}: {v.job}" for name, v in verdicts),
                                      tuple(steps), ", ".join(flavors) or None))
