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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping

from gpupools.autoscaling.choice import requested_extended, resolve_autoscaler, why_not
from gpupools.autoscaling.templates import fitting_template, node_templates
from gpupools.core.pools import POOL_LABEL, PoolPlan
from gpupools.core.sharing import HAMI_SCHEDULER, VGPU_CORES_RESOURCE, VGPU_MEMORY_PERCENT_RESOURCE, VGPU_MEMORY_RESOURCE, units_per_pod
from gpupools.fabric import gpudirect
from gpupools.fabric.plan import FabricPlan, plan_fabrics
from gpupools.fabric.software import EFA_DEVICE_PLUGIN, efa_device_plugin_release, network_operator_release, nic_cluster_policy
from gpupools.health import readiness
from gpupools.landing import agents as node_agents
from gpupools.landing.agents import Agent, Node
from gpupools.landing.names import name_problems
from gpupools.landing.scheduling import runs_on, untolerated
from gpupools.pools.planning import plan_pools
from gpupools.pools.software import DEVICE_PLUGIN, GPU_OPERATOR, HAMI_CHART, gpu_tolerations, software_plan
from gpupools.queues import kai, kueue, resourcequota
from gpupools.queues.teams import TeamPlan, plan_teams
from gpupools.stack.config import StackConfig

PROBE_IMAGE = "landing-check"
HAMI_RESOURCES = frozenset({VGPU_MEMORY_RESOURCE, VGPU_MEMORY_PERCENT_RESOURCE, VGPU_CORES_RESOURCE})
SHAPES = ("unit", "node", "gang")
GANG_NODES = 2


@dataclass(frozen=True)
class Step:
    """One step of a job's way to a GPU, whether it holds, and why."""

    name: str  # queue | schedule | node | ready | device
    ok: bool
    detail: str

    def as_json(self) -> dict:
        return {"step": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True)
class Landing:
    """Whether a team's job of one shape lands on a pool, step by step."""

    team: str | None
    pool: str
    shape: str
    job: str  # what the Job asks for, in words
    steps: tuple[Step, ...]
    flavor: str | None = None

    @property
    def lands(self) -> bool:
        return all(s.ok for s in self.steps)

    @property
    def failing(self) -> Step | None:
        return next((s for s in self.steps if not s.ok), None)

    def as_json(self, chain: bool = True) -> dict:
        """Every key always present (a stack output drops nulls): "" for no team, no flavor, and no failing step.
        `chain`: with every step; the stack output leaves it out (each value costs the engine a round of serialization)."""
        failing = self.failing
        row = {"team": self.team or "", "pool": self.pool, "shape": self.shape, "job": self.job, "lands": self.lands, "flavor": self.flavor or "",
               "step": failing.name if failing else "", "reason": failing.detail if failing else "",
               # How the node comes: kept running by the pool's floor (and whether one more such Job grows the pool), or started.
               "node": next((s.detail for s in self.steps if s.name == "node"), "")}
        if chain:
            row["chain"] = [s.as_json() for s in self.steps]
        return row


@dataclass
class Cluster:
    """What the plan puts in the cluster, indexed once per stack: Kueue objects, quotas, agents, node pictures."""

    stack: StackConfig
    plans: list[PoolPlan]
    teams: list[TeamPlan]
    autoscaler: str
    objects: list[dict]
    agents: list[Agent]
    fabrics: dict[str, FabricPlan]
    schedulers: set[str] = field(default_factory=set)
    kai_values: dict = field(default_factory=dict)  # the KAI Scheduler release's values, where the stack installs it

    def of_kind(self, kind: str) -> dict[str, dict]:
        """Objects of one kind by name, indexed once: every verdict looks them up."""
        index = self.__dict__.setdefault("_kinds", {})
        if index.get("_of") is not self.objects:  # rebuilt when a caller swaps the object list
            index.clear()
            index["_of"] = self.objects
        if kind not in index:
            index[kind] = {o["metadata"]["name"]: o for o in self.objects if o.get("kind") == kind}
        return index[kind]

    def parent_queues(self) -> set[str]:
        """KAI Queues that other Queues name as their parent, indexed once."""
        index = self.__dict__.setdefault("_parents", {})
        if index.get("_of") is not self.objects:
            index.clear()
            index["_of"] = self.objects
            index["names"] = {q["spec"]["parentQueue"] for q in self.of_kind("Queue").values() if q["spec"].get("parentQueue")}
        return index["names"]

    def lendable(self, flavor: str, resource: str) -> dict[str, int]:
        """Each queue's lendable quota on a flavor (its lendingLimit, else its nominal quota), indexed once."""
        index = self.__dict__.setdefault("_lendable", {})
        if index.get("_of") is not self.objects:
            index.clear()
            index["_of"] = self.objects
            for name, cq in self.of_kind("ClusterQueue").items():
                if cq["spec"].get("cohortName") != kueue.COHORT:
                    continue
                for group in cq["spec"]["resourceGroups"]:
                    for f in group["flavors"]:
                        for r in f["resources"]:
                            index.setdefault((f["name"], r["name"]), {})[name] = int(r.get("lendingLimit", r["nominalQuota"]))
        return index.get((flavor, resource), {})


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
    return Cluster(stack, plans, teams, autoscaler, objects, agents, fabrics, schedulers, kai_values)


# --------------------------------------------------------------------------------------------------------------------
# The Job of each shape


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


def _words(shape: str, plan: PoolPlan, pods: int, per_pod: Mapping[str, int], fraction: float | None = None) -> str:
    what = ", ".join(f"{v} x {k}" for k, v in per_pod.items() if k.startswith(("nvidia.com/", "vpc.", "rdma/")))
    if fraction is not None:
        what = f"{kai.fraction_text(fraction)} of one GPU ({kai.FRACTION_ANNOTATION})"
    return f"{pods} pods, each {what}" if pods > 1 else what


# --------------------------------------------------------------------------------------------------------------------
# 1. queue


def _flavor_pods(pod: dict, flavor: dict) -> dict:
    """Kueue's admission: the flavor's nodeLabels join the pod's node selector and its tolerations the pod's (kueue
    pkg/podset/podset.go, FromAssignment / Merge)."""
    pod = dict(pod)
    pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **(flavor["spec"].get("nodeLabels") or {})}
    pod["tolerations"] = list(pod.get("tolerations") or []) + [t for t in flavor["spec"].get("tolerations") or [] if t not in (pod.get("tolerations") or [])]
    return pod


def _borrowable(cluster: Cluster, queue: str, flavor: str, resource: str) -> int:
    """What the cohort can lend a queue on one flavor: every other queue's lendable quota there (its lendingLimit, or
    its nominal quota without one; kueue pkg/cache/scheduler/resource_node.go, `potentialAvailable`)."""
    lenders = cluster.lendable(flavor, resource)
    cq = cluster.of_kind("ClusterQueue").get(queue) or {}
    if cq.get("spec", {}).get("cohortName") != kueue.COHORT:
        return 0
    return sum(lenders.values()) - lenders.get(queue, 0)


def kueue_admission(cluster: Cluster, team: TeamPlan, plan: PoolPlan, job: dict) -> tuple[Step, dict, str | None]:
    """Kueue v0.19.2's flavor assignment for the Job's one PodSet (pkg/scheduler/flavorassigner/flavorassigner.go):
    flavors of the resource's group in order, the first that fits the PodSet's node selector, its topology request and
    the quota the queue can ever reach; then the flavor's admission checks."""
    pod = job["spec"]["template"]["spec"]
    annotations = (job["spec"]["template"].get("metadata") or {}).get("annotations") or {}
    count = int(job["spec"].get("parallelism", 1))
    requests = requested_extended(pod)
    queue_name = job["metadata"]["labels"].get(kueue.QUEUE_LABEL)
    local = next((q for q in cluster.objects if q.get("kind") == "LocalQueue" and q["metadata"]["name"] == queue_name
                  and q["metadata"].get("namespace") == job["metadata"].get("namespace")), None)
    if local is None:
        return Step("queue", False, f"no LocalQueue {queue_name} in namespace {job['metadata'].get('namespace')}: the Job stays suspended"), pod, None
    cq = cluster.of_kind("ClusterQueue").get(local["spec"]["clusterQueue"])
    if cq is None:
        return Step("queue", False, f"LocalQueue {queue_name} points at ClusterQueue {local['spec']['clusterQueue']}, which the plan does not create"), pod, None
    flavors = cluster.of_kind("ResourceFlavor")
    resource = requested_resource(plan, requests)
    group = next((g for g in cq["spec"]["resourceGroups"] if resource in g["coveredResources"]), None)
    if group is None:
        return Step("queue", False, f"ClusterQueue {cq['metadata']['name']} has no quota on {resource}"), pod, None
    names = [f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]]
    tas_only = all((flavors.get(n) or {}).get("spec", {}).get("topologyName") for n in names)
    explicit = any(k in annotations for k in (kueue.REQUIRED_TOPOLOGY, kueue.PREFERRED_TOPOLOGY, kueue.UNCONSTRAINED_TOPOLOGY))
    label_keys = {k for n in names for k in ((flavors.get(n) or {}).get("spec", {}).get("nodeLabels") or {})}
    checks = {c["name"]: set(c.get("onFlavors") or names) for c in (cq["spec"].get("admissionChecksStrategy") or {}).get("admissionChecks", [])}
    wanted = requests.get(resource, 0) * count
    refused = []
    for entry in group["flavors"]:
        name = entry["name"]
        flavor = flavors.get(name)
        if flavor is None:
            refused.append(f"{name}: no such ResourceFlavor")
            continue
        spec = flavor["spec"]
        selector = pod.get("nodeSelector") or {}
        # Only keys some flavor of the queue sets are compared (flavorassigner.go, flavorSelector).
        clash = [k for k in selector if k in label_keys and k in (spec.get("nodeLabels") or {}) and spec["nodeLabels"][k] != selector[k]]
        if clash or any(k in label_keys and k not in (spec.get("nodeLabels") or {}) for k in selector):
            # Another pool's flavor: not a candidate, and not worth a word (a reason listing every pool would grow with
            # teams x pools squared across the plan).
            continue
        tas = bool(spec.get("topologyName"))
        on_checks = [c for c, on in checks.items() if name in on]
        provisioning = [c for c in on_checks if (cluster.of_kind("AdmissionCheck").get(c) or {}).get("spec", {}).get("controllerName")
                        == kueue.PROVISIONING_CONTROLLER]
        # tas_flavorassigner.go, checkPodSetAndFlavorMatchForTAS.
        if tas and not explicit and not tas_only:
            refused.append(f"{name}: topology-aware, and the Job asks for no topology while its ClusterQueue mixes topology-aware "
                           f"and plain flavors (\"supports only TopologyAwareScheduling\")")
            continue
        if not tas and explicit and wanted:
            refused.append(f"{name}: not topology-aware, and the Job asks for a topology (\"does not support TopologyAwareScheduling\")")
            continue
        if tas and not provisioning:
            per_node = max(1, plan.units_per_node // max(1, requests.get(resource, 1)))
            needed = math.ceil(count / per_node)
            if plan.pool.min_nodes < needed:
                refused.append(f"{name}: topology-aware, and topology-aware scheduling counts only Ready nodes: the Job needs {needed} node(s), "
                               f"the pool keeps {plan.pool.min_nodes}, and a suspended Job makes no autoscaler add one")
                continue
        quota = next((r for r in entry["resources"] if r["name"] == resource), None)
        if quota is None:
            refused.append(f"{name}: no quota on {resource}")
            continue
        nominal = int(quota["nominalQuota"])
        limit = quota.get("borrowingLimit")
        borrowable = _borrowable(cluster, cq["metadata"]["name"], name, resource)
        reachable = nominal + (borrowable if limit is None else min(int(limit), borrowable))
        if wanted > reachable:
            refused.append(f"{name}: the Job asks for {wanted} x {resource}, the queue can reach {reachable} there "
                           f"({nominal} nominal + {reachable - nominal} borrowed from the cohort)")
            continue
        for check in on_checks:
            if check not in cluster.of_kind("AdmissionCheck"):
                return Step("queue", False, f"flavor {name} waits for AdmissionCheck {check}, which the plan does not create"), pod, name
        how = f"admitted on flavor {name} ({nominal} nominal" + (f", up to {reachable} with borrowing" if reachable > nominal else "") + ")"
        if provisioning:
            how += f"; admission check {provisioning[0]} asks the cloud for the nodes first (ProvisioningRequest)"
        if tas:
            how += "; topology-aware"
        return Step("queue", True, how), _flavor_pods(pod, flavor), name
    if not refused:
        return Step("queue", False, f"no flavor of ClusterQueue {cq['metadata']['name']} selects the nodes the Job's node selector names"), pod, None
    return Step("queue", False, f"ClusterQueue {cq['metadata']['name']} admits it on no flavor: " + "; ".join(refused)), pod, None


def job_fraction(job: dict) -> float | None:
    """The Job's pods' KAI fraction annotation as a number; None without one, NaN for a value KAI would refuse."""
    annotations = (job["spec"]["template"].get("metadata") or {}).get("annotations") or {}
    text = annotations.get(kai.FRACTION_ANNOTATION)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return math.nan
    return value if 0 < value < 1 else math.nan


def kai_admission(cluster: Cluster, team: TeamPlan, plan: PoolPlan, job: dict, multi_node: bool = False) -> Step:
    """KAI Scheduler's side: the Job names KAI's scheduler and a leaf Queue (only leaves take workloads, docs/queues/
    README.md), and what it asks for fits the queue's limit and every ancestor's (the proportion plugin refuses a job
    that would take a queue past its limit: pkg/scheduler/plugins/proportion/capacity_policy/max_allowed_check.go lines
    51-66). Within its quota the job is safe from reclaim; beyond it, it runs on GPUs others leave idle and preemptible
    work there is reclaimed when their owners need them. `multi_node`: its pods span nodes, and must be one gang."""
    pod = job["spec"]["template"]["spec"]
    count = int(job["spec"].get("parallelism", 1))
    if pod.get("schedulerName") != kai.SCHEDULER_NAME:
        return Step("queue", False, f"the pod does not name scheduler {kai.SCHEDULER_NAME}: team {team.team.name}'s admission policy refuses GPU "
                                    f"workloads KAI would not schedule")
    name = (job["metadata"].get("labels") or {}).get(kai.QUEUE_LABEL)
    if name is None:
        return Step("queue", False, f"the Job carries no label {kai.QUEUE_LABEL}: team {team.team.name}'s admission policy refuses it")
    queues = cluster.of_kind("Queue")
    if name not in queues:
        return Step("queue", False, f"no Queue {name}: KAI keeps the Job's pods pending")
    if name in cluster.parent_queues():
        return Step("queue", False, f"Queue {name} is a department (a parent queue); only its teams' queues take workloads")
    fraction = job_fraction(job)
    if fraction is not None and math.isnan(fraction):
        return Step("queue", False, f"{kai.FRACTION_ANNOTATION} must be a number above 0 and below 1: KAI's binder refuses the pod")
    if fraction is not None and plan.sharing.fraction is None:
        return Step("queue", False, f"pool {plan.name} takes no fractions (its sharing sets no fraction)")
    requests = requested_extended(pod)
    per_pod = fraction if fraction is not None else requests.get(requested_resource(plan, requests), 0)
    wanted = per_pod * count
    chain, queue = [], queues[name]
    while queue is not None:
        chain.append(queue)
        queue = queues.get(queue["spec"].get("parentQueue") or "")
    limits = [(q["metadata"]["name"], q["spec"]["resources"]["gpu"]["limit"]) for q in chain]
    capped = [(n, lim) for n, lim in limits if lim != kai.UNLIMITED]
    tightest = min(capped, key=lambda c: c[1]) if capped else None
    if tightest is not None and wanted > tightest[1]:
        return Step("queue", False, f"the Job asks for {wanted:g} GPUs, and Queue {tightest[0]} may hold at most {tightest[1]:g} (its limit)")
    quota = chain[0]["spec"]["resources"]["gpu"]["quota"]
    gang, why = kai_gang(job, count, multi_node)
    if why is not None:
        return Step("queue", False, why)
    how = f"queue {name}: {wanted:g} of its {quota:g} guaranteed GPUs" if wanted <= quota else (
        f"queue {name}: {wanted:g} GPUs, beyond its {quota:g} guaranteed: runs on GPUs other queues leave idle, reclaimable while preemptible")
    return Step("queue", True, how + (f", under limit {tightest[1]:g} of {tightest[0]}" if tightest else ", no limit")
                + (f"; its {count} pods as one gang ({kai.MIN_MEMBER_ANNOTATION}: \"{gang}\")" if gang > 1 else ""))


def kai_gang(job: dict, count: int, multi_node: bool) -> tuple[int, str | None]:
    """How many of the Job's pods KAI schedules together, and why that cannot work, or None. KAI's pod grouper makes one
    PodGroup of a Job whose minMember is its kai.scheduler/batch-min-member, 1 without it (v0.17.0 pkg/podgrouper/
    podgrouper/plugins/job/job_grouper.go, calcMinMember): a multi-node Job needs all its pods in it, or KAI binds its
    pods one by one and the first hold their nodes while the rest wait; and a gang larger than the Job never starts."""
    text = ((job.get("metadata") or {}).get("annotations") or {}).get(kai.MIN_MEMBER_ANNOTATION)
    try:
        gang = int(text) if text is not None else 1
    except ValueError:
        return 0, f"{kai.MIN_MEMBER_ANNOTATION}: {text!r} is not a number: KAI's pod grouper fails on it and the pods stay pending"
    if gang > count:
        return gang, (f"{kai.MIN_MEMBER_ANNOTATION} asks for {gang} pods together and the Job has {count}: KAI never starts the gang")
    if multi_node and gang < count:
        return gang, (f"KAI schedules the Job's {count} pods as a gang of {gang}: without {kai.MIN_MEMBER_ANNOTATION}: \"{count}\" on "
                      f"the Job its first pods may hold their nodes' GPUs while the others wait")
    return gang, None


def scaling_pod(cluster: Cluster, plan: PoolPlan, pod: dict) -> tuple[dict | None, str]:
    """What an autoscaler sees of a fractional pod, which asks for no nvidia.com/gpu: KAI's node-scale-adjuster (on with
    global.clusterAutoscaling) starts a placeholder pod asking for whole GPUs with the fractional pod's node selector,
    affinity and tolerations (pkg/nodescaleadjuster/scaler/scaling_pod.go lines 20-55); None without it."""
    if not (cluster.kai_values.get("global") or {}).get("clusterAutoscaling"):
        return None, "KAI's node-scale-adjuster is off (global.clusterAutoscaling), and a fractional pod asks an autoscaler for no GPU"
    placeholder = dict(pod)
    placeholder["containers"] = [{"name": "scaling-pod", "resources": {"limits": {plan.mechanism.resource: 1}}}]
    return placeholder, "KAI's node-scale-adjuster stands in a pod asking for nvidia.com/gpu: 1"


def resourcequota_admission(cluster: Cluster, team: TeamPlan, plan: PoolPlan, job: dict) -> Step:
    """The namespace's ResourceQuota: `requests.<resource>` must leave room for every pod of the Job (extended
    resources can only be quota'd by requests: kubernetes docs, resource quotas, "Resource quota for extended resources")."""
    pod = job["spec"]["template"]["spec"]
    count = int(job["spec"].get("parallelism", 1))
    namespace = job["metadata"].get("namespace")
    quota = next((o for o in cluster.objects if o.get("kind") == "ResourceQuota" and o["metadata"].get("namespace") == namespace), None)
    if quota is None:
        return Step("queue", True, f"no ResourceQuota in namespace {namespace}")
    for name, wanted in requested_extended(pod).items():
        hard = quota["spec"]["hard"].get(f"requests.{name}")
        if hard is not None and wanted * count > int(hard):
            return Step("queue", False, f"ResourceQuota {quota['metadata']['name']} allows {hard} x {name} in namespace {namespace}, "
                                        f"the Job asks for {wanted * count}")
    return Step("queue", True, f"within ResourceQuota {quota['metadata']['name']}")


# --------------------------------------------------------------------------------------------------------------------
# 2-5. the pod and the node


def label_choices(cluster: Cluster, plan: PoolPlan, pod: dict) -> dict[str, str]:
    """Labels a new node takes from the pod it is started for: Karpenter sets each well-known label of a NodePool
    requirement to one of its values, the one the pending pod selects (kubernetes-sigs/karpenter
    pkg/controllers/provisioning/scheduling/nodeclaim.go: the NodeClaim's requirements are the NodePool's
    intersected with the pod's), e.g. karpenter.sh/capacity-type=reserved for a reserved flavor's pods."""
    if cluster.autoscaler != "karpenter":
        return {}
    from gpupools.autoscaling import karpenter

    choices = {r["key"]: set(r["values"]) for r in karpenter.node_pool(plan, "-")["spec"]["template"]["spec"]["requirements"] if r["operator"] == "In"}
    return {k: v for k, v in (pod.get("nodeSelector") or {}).items() if v in choices.get(k, ())}


def pool_node(cluster: Cluster, plan: PoolPlan, pod: dict | None = None) -> Node:
    """A node of the pool as it registers: the labels its autoscaler or node group gives it (for the pod it is started
    for), the pool's and the cloud's taints, and its startup taints."""
    template = _template_for(cluster, plan, pod or {})
    labels = {**(template.labels if template else {}), **plan.labels, POOL_LABEL: plan.name, **label_choices(cluster, plan, pod or {})}
    taints = tuple(dict.fromkeys((template.taints if template else ()) + plan.taints))
    startup = tuple(dict.fromkeys(plan.startup_taints + (template.startup_taints if template else ())))
    return node_agents.node_labels_after_discovery(Node(plan, labels, taints, startup), cluster.agents)


def _template_for(cluster: Cluster, plan: PoolPlan, pod: dict):
    """The autoscaler's picture of the node it starts for the pod: of a pool over several instance types, the first type
    the pod fits (Karpenter launches a type the pending pod fits); else the pool's one picture."""
    templates = [replace(t, labels={**t.labels, **label_choices(cluster, plan, pod)}) for t in node_templates(cluster.stack.target, plan, cluster.autoscaler)]
    fitting, _ = fitting_template(templates, pod)
    return fitting or (templates[0] if templates else None)


def _schedule(cluster: Cluster, plan: PoolPlan, node: Node, pod: dict) -> Step:
    scheduler = pod.get("schedulerName")
    if scheduler and scheduler not in cluster.schedulers:
        return Step("schedule", False, f"the pod names scheduler {scheduler}, which the plan does not install")
    why = runs_on(pod, node.labels, node.taints)
    if why is not None:
        return Step("schedule", False, f"the pod does not fit a Ready node of pool {plan.name}: {why}")
    return Step("schedule", True, f"fits a node of pool {plan.name}" + (f" through {scheduler}" if scheduler else ""))


def _node(cluster: Cluster, plan: PoolPlan, pod: dict, nodes: int, provisioned: bool) -> Step:
    pool = plan.pool
    if nodes > pool.max_nodes:
        return Step("node", False, f"the Job needs {nodes} nodes, the pool has at most {pool.max_nodes}")
    templates = [replace(t, labels={**t.labels, **label_choices(cluster, plan, pod)}) for t in node_templates(cluster.stack.target, plan, cluster.autoscaler)]
    if pool.min_nodes >= nodes:
        return Step("node", True, f"the pool keeps {pool.min_nodes} node(s) running; " + beyond_floor(plan, templates, pod))
    if not templates:
        return Step("node", False, f"the pool keeps {pool.min_nodes} node(s) and no autoscaler gpupools installs starts more")
    # Of a pool over several instance types, the pod needs one type it fits (Karpenter picks among them per pod).
    reasons = []
    for template in templates:
        reason = why_not(template, pod)
        if reason is None:
            # Huge pages are no extended resource; Karpenter counts them only where a NodeOverlay says the node has them.
            for name in _hugepages(pod):
                wanted = max(_mebibytes(c.get("resources", {}).get("limits", {}).get(name, "0")) for c in pod.get("containers", []))
                if template.allocatable.get(name, 0) < wanted:
                    reason = f"{template.autoscaler} expects {template.allocatable.get(name, 0)}Mi of {name} on a new node, the pod asks for {wanted}Mi ({template.source})"
        if reason is None:
            break
        reasons.append(reason)
    if len(reasons) == len(templates):
        return Step("node", False, "no node starts from zero: " + ("; ".join(reasons) if len(reasons) > 1 else reasons[0]))
    how = "the cloud provisions them for the admission check" if provisioned else f"{template.autoscaler} starts it from zero ({template.source})"
    return Step("node", True, how)


def beyond_floor(plan: PoolPlan, templates: list, pod: dict) -> str:
    """Whether one more such Job, with the pool's floor busy, makes its autoscaler add a node: what the plan says of a pool
    that never sits at zero (a Gcore pool keeps at least one node)."""
    if plan.pool.min_nodes >= plan.pool.max_nodes:
        return "its node count is fixed (minNodes = maxNodes): one more such Job waits for a free node"
    if not templates:
        return "no autoscaler gpupools installs adds more: one more such Job waits for a free node"
    _, reason = fitting_template(templates, pod)
    if reason is not None:
        return f"one more such Job adds no node: {reason}"
    return f"one more such Job makes {templates[0].autoscaler} add a node ({templates[0].source})"


def _ready(cluster: Cluster, node: Node, pod: dict, networks: list[str] = (), software: tuple[str, ...] = ()) -> Step:
    """`networks`: what the node must register for the networks the pod attaches (GKE multi-networking); `software`:
    the DaemonSets the fabric's pods rely on running there (FabricPlan.node_software)."""
    running = {a.name: a for a in cluster.agents if a.why_not_on(node) is None}
    for taint in node.startup_taints:
        lifters = [a for a in running.values() if taint.key in a.clears]
        partners = [a for a in cluster.agents if taint.key in a.clears]
        if not partners or len(lifters) < len(partners):
            missing = [f"{a.name} ({a.why_not_on(node)})" for a in partners if a.name not in running] or ["nothing in the plan lifts it"]
            return Step("ready", False, f"the startup taint {taint.key} stays: {', '.join(missing)}")
    advertised = set().union(*(a.advertises(node) for a in running.values())) if running else set()
    # HAMi's scheduler accounts for its vGPU memory and compute itself; no node registers them, and the kubelet drops
    # requests for extended resources the node has no capacity for and no device plugin serves (kubernetes
    # pkg/kubelet/lifecycle/predicate.go, removeMissingExtendedResources).
    own = HAMI_RESOURCES if pod.get("schedulerName") == HAMI_SCHEDULER else frozenset()
    for name in requested_extended(pod):
        if name not in advertised and name not in own:
            why = (" (a Karpenter NodeClaim initializes only once it is registered)" if cluster.autoscaler == "karpenter" else "")
            return Step("ready", False, f"nothing on the node registers {name}, which the pod asks for{why}")
    for name in _hugepages(pod):
        if name not in advertised:
            return Step("ready", False, f"nothing allocates {name} on the node, which the pod asks for (the NodeClaim never initializes)"
                        if cluster.autoscaler == "karpenter" else f"nothing allocates {name} on the node, which the pod asks for")
    for name in networks:
        if name not in advertised:
            return Step("ready", False, f"nothing on the node registers {name}, which the pod's {gpudirect.INTERFACES_ANNOTATION} needs: no "
                                        f"Network of that name whose GKENetworkParamSet names one of the node's NICs")
    for name in software:
        agent = next((a for a in cluster.agents if a.name == name), None)
        if agent is None or name not in running:
            why = agent.why_not_on(node) if agent is not None else "the plan does not install it"
            return Step("ready", False, f"the pod relies on {name}, which does not run on the node: {why}")
    lifted = f"startup taint lifted by {', '.join(sorted(a.name for a in running.values() if a.clears))}; " if node.startup_taints else ""
    fabric = (f"; {len(networks)} networks registered by GKE multi-networking" if networks else "") + (
        f"; {', '.join(software)} run there" if software else "")
    return Step("ready", True, lifted + "every resource the pod asks for is registered" + fabric)


def _mebibytes(quantity) -> int:
    text = str(quantity)
    for suffix, factor in (("Gi", 1024), ("Mi", 1)):
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * factor
    return int(text) // (1024 * 1024)


def _hugepages(pod: dict) -> list[str]:
    return sorted({k for c in pod.get("containers", []) for k in {**c.get("resources", {}).get("limits", {}), **c.get("resources", {}).get("requests", {})}
                   if k.startswith("hugepages-")})


def _device(cluster: Cluster, plan: PoolPlan, node: Node, resource: str, units: int = 1) -> Step:
    """`units`: what one container of the pod asks for of `resource`."""
    plugins = sorted(a.name for a in cluster.agents if a.why_not_on(node) is None and resource in a.advertises(node))
    if not plugins:
        candidates = [f"{a.name}: {a.why_not_on(node)}" for a in cluster.agents if resource in a.advertises(node)]
        return Step("device", False, f"no device plugin advertises {resource} on pool {plan.name}" + (f" ({'; '.join(candidates)})" if candidates else ""))
    if len(plugins) > 1:
        return Step("device", False, f"{len(plugins)} device plugins advertise {resource} on pool {plan.name}: {', '.join(plugins)}")
    cap = units_per_pod(plan.mechanism, plan.hardware.gpus_per_node) if resource == plan.mechanism.resource else None
    if cap is not None and units > cap.units:
        return Step("device", False, f"the pod asks for {units} x {resource} and gets at most {cap.units}: {cap.why}; the pod fails on the node")
    return Step("device", True, f"{plugins[0]} advertises {resource}")


def _container_units(pod: dict, resource: str) -> int:
    """The most of `resource` one container asks for: the device plugin is asked per container (kubelet's Allocate)."""
    amounts = [int((c.get("resources") or {}).get(kind, {}).get(resource, 0)) for c in pod.get("containers") or [] for kind in ("limits", "requests")]
    return max(amounts, default=0)


def land(cluster: Cluster, team: TeamPlan | None, plan: PoolPlan, shape: str, job: dict | None = None) -> Landing:
    if job is not None and job.get("kind") == "JobSet":
        return land_jobset(cluster, team, plan, shape, job)
    job = job or job_for(cluster, team, plan, shape)
    return with_names(job, _land(cluster, team, plan, shape, job))


def with_names(workload: dict, verdict: Landing) -> Landing:
    """The verdict, led by a failing `create` step where a name of the workload is over its limit (`landing.names`):
    the API server, or JobSet's webhook, refuses the object before anything else happens to it."""
    problems = name_problems(workload)
    if not problems:
        return verdict
    return replace(verdict, steps=(Step("create", False, f"{workload['kind']} {workload['metadata'].get('name')!r} is refused: "
                                                       + "; ".join(problems)),) + verdict.steps)


def _land(cluster: Cluster, team: TeamPlan | None, plan: PoolPlan, shape: str, job: dict) -> Landing:
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
    node = pool_node(cluster, plan, pod)
    steps.append(_schedule(cluster, plan, node, pod))
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
            step = _node(cluster, plan, device_pod, 1, provisioned)
            steps.append(replace(step, detail=f"{how}; {step.detail}"))
    else:
        resource = requested_resource(plan, requests)
        per_node = max(1, plan.node_resources.get(resource, plan.units_per_node) // max(1, requests.get(resource, 1)))
        steps.append(_node(cluster, plan, pod, math.ceil(count / per_node), provisioned))
    annotations = (job["spec"]["template"].get("metadata") or {}).get("annotations") or {}
    fabric = cluster.fabrics.get(plan.name)
    software = fabric.node_software if fabric is not None and shape == "gang" else ()
    steps.append(_ready(cluster, node, device_pod, gpudirect.network_resources(annotations), software))
    resource = requested_resource(plan, requests)
    steps.append(_device(cluster, plan, node, resource, _container_units(pod, resource)))
    return Landing(team.team.name if team else None, plan.name, shape, _words(shape, plan, count, requests, fraction), tuple(steps), flavor)


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


def land_jobset(cluster: Cluster, team: TeamPlan | None, plan: PoolPlan, shape: str, jobset: dict) -> Landing:
    """A JobSet, followed PodSet by PodSet (one per replicated job, `landing.jobset.podsets`), each as the Job Kueue and the
    scheduler see of it; the JobSet lands when every PodSet does. Each PodSet's quota and nodes are judged on their own:
    Kueue admits a workload's PodSets together, so a JobSet whose PodSets fit only one at a time passes here and waits
    in the queue (gpupools' own JobSets have one PodSet)."""
    from gpupools.landing.jobset import podsets

    verdicts = [(name, _land(cluster, team, plan, shape, view)) for name, view in podsets(jobset)]
    if len(verdicts) == 1:
        return with_names(jobset, verdicts[0][1])
    steps = []
    for i, step in enumerate(verdicts[0][1].steps):
        parts = [(name, v.steps[i]) for name, v in verdicts]
        steps.append(Step(step.name, all(s.ok for _, s in parts), "; ".join(f"PodSet {name}: {s.detail}" for name, s in parts)))
    flavors = sorted({v.flavor for _, v in verdicts if v.flavor})
    return with_names(jobset, Landing(team.team.name if team else None, plan.name, shape, "; ".join(f"{name}: {v.job}" for name, v in verdicts),
                                      tuple(steps), ", ".join(flavors) or None))
