"""Team quotas on KAI Scheduler: hierarchical queues (departments, then teams) with a guaranteed quota, an over-quota
weight and a limit per resource, reclaim between queues, and fractions of one GPU on pools that allow them.

Everything here is read in KAI Scheduler's source at the pinned release (github.com/kai-scheduler/KAI-Scheduler,
tag v0.17.0, commit f218c69bee5e5fc6031273ba555d09916b1ca89a); paths below are in that tree.

- Queues are cluster-scoped `scheduling.run.ai/v2` Queue objects. Only leaf queues take workloads (docs/queues/
  README.md); a department is a parent queue, each team a leaf under it (or a top-level leaf). A queue's `gpu` quota is
  guaranteed, its `overQuotaWeight` splits what is left over among siblings of the same queue priority, its `limit`
  caps it (-1: none). A queue's `priority` orders siblings for the surplus and makes it the last to be reclaimed from
  (docs/scheduling-deep-dive/README.md, "Queue Priority").
- Reclaim moves GPUs between queues: a queue below its quota takes back GPUs from preemptible workloads (priority
  class below 100, such as KAI's `train`) of a queue above its quota; workloads within quota are never reclaimed
  (same document, "Reclaim"). Non-preemptible workloads (`build`, `inference`) only ever use in-quota GPUs.
- KAI reads a queue's unset resource as quota 0 and limit 0, and a limit of 0 refuses every request of that resource
  (pkg/scheduler/plugins/proportion/proportion.go lines 334-347 pass quota and limit through as given;
  pkg/scheduler/plugins/proportion/capacity_policy/max_allowed_check.go lines 51-66 refuse when limit < allocated +
  requested, skipping only -1). So every queue sets cpu and memory to unlimited (-1): like Kueue's, gpupools' queues
  keep GPU promises only.
- The pod grouper takes a workload's queue from the `kai.scheduler/queue` label of its top owner (the Job), else
  of the pod (pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go lines 134-147); nothing reads a
  namespace's labels for it. gpupools labels each team namespace with its queue for people and tools, and a
  ValidatingAdmissionPolicy refuses GPU workloads in it that do not name the team's queue or KAI's scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpupools.core.pools import PoolPlan
from gpupools.pools.software import Chart, Release, namespace as software_namespace
from gpupools.queues.teams import (MANAGED, TeamPlan, admission_binding, cel_string, plan_teams, requests_gpu_expression, team_admission_policy,
                                   team_labels)
from gpupools.stack.config import Department, StackConfig, Team

# The release workflow packages the chart with --version and --app-version set to the tag and points values.yaml's
# registry at ghcr.io (.github/workflows/on-release.yaml lines 63-67); the git values.yaml (kept in tests/charts) names
# a local registry, so gpupools sets the released one.
CHART = Chart("kai-scheduler", "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", "", "kai-scheduler", "v0.17.0")
REGISTRY = "ghcr.io/kai-scheduler/kai-scheduler"
API_VERSION = "scheduling.run.ai/v2"
# pkg/common/constants/constants.go lines 14-27.
SCHEDULER_NAME = "kai-scheduler"
QUEUE_LABEL = "kai.scheduler/queue"
UNLIMITED = -1
RESERVATION_NAMESPACE = "kai-resource-reservation"
SCALE_ADJUST_NAMESPACE = "kai-scale-adjust"
# Pod annotations of a fractional GPU request (constants.go lines 56-58): a share of one GPU's memory, or MiB of it.
FRACTION_ANNOTATION = "gpu-fraction"
MEMORY_ANNOTATION = "gpu-memory"
# How many pods of a Job KAI schedules together (pkg/podgrouper/podgrouper/plugins/constants/constants.go line 32,
# MinMemberOverrideKey): on a Job, its PodGroup's minMember (job/job_grouper.go, calcMinMember, 1 without it); on a
# JobSet replicated job's template, each replica's SubGroup minMember, its parallelism without it (jobset/
# jobset_grouper.go, singleReplicaSubGroupMinMember).
MIN_MEMBER_ANNOTATION = "kai.scheduler/batch-min-member"
# The label KAI's webhooks and pod grouper select namespaces by (values global.namespaceLabelSelector, rendered into
# the Config's global.namespaceLabelSelector; pkg/operator/operands/pod_grouper/resources.go lines 103-104): team
# namespaces only, so KAI leaves every other namespace alone.
ENGINE_LABEL = "gpupools.io/queue-engine"
ENGINE_VALUE = "kai"
# Queue priorities: KAI's default is 100 (constants.go line 16); a team or department ranked high gets the surplus
# first and is reclaimed from last.
QUEUE_PRIORITIES = {"high": 200, "normal": 100, "low": 50}
DEFAULT_WEIGHT = 1
# KAI's own priority classes (deployments/kai-scheduler/templates/priorityclasses): below 100 is preemptible.
PRIORITY_CLASSES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
PREEMPTIBLE_BELOW = 100
PRIORITY_LABEL = "priorityClassName"


@dataclass(frozen=True)
class QueueNode:
    """One Queue: a department (parent) or a team (leaf). `limit` None is no limit; `reach` the GPUs at maxNodes of
    the pools its pods may use."""

    name: str
    parent: str | None
    quota: int
    limit: int | None
    weight: int
    priority: str
    reach: int
    pools: tuple[tuple[str, int], ...] = ()  # (pool, units of the quota counted on it), leaves only
    team: Team | None = None

    @property
    def borrowable(self) -> int:
        """GPUs beyond its quota the queue may run on when others leave them idle: up to its limit, within its reach."""
        cap = self.reach if self.limit is None else min(self.limit, self.reach)
        return max(cap - self.quota, 0)


def team_quota(team: Team) -> int:
    """A team's guaranteed GPUs: its total, or the sum of its units per pool (KAI teams' pools serve whole GPUs)."""
    return sum(team.gpus.values()) if isinstance(team.gpus, dict) else team.gpus


def limit_of(quota: int, borrow) -> int | None:
    """A queue's limit from its `borrow`: all is no limit, none is its quota, a number is that many GPUs on top."""
    return None if borrow == "all" else quota if borrow == "none" else quota + borrow


def department_of(stack: StackConfig) -> dict[str, Department]:
    """team name -> its department (validation has made sure a team is in one at most)."""
    return {team: d for d in stack.departments for team in d.teams}


def queue_tree(stack: StackConfig, teams: list[TeamPlan]) -> list[QueueNode]:
    """Departments first (in stack order), each followed by its teams; teams outside any department last. Linear in
    teams and their pools."""
    parents = department_of(stack)
    leaves, plans = {}, {}
    for t in teams:
        quota = sum(t.nominal.values())
        dept = parents.get(t.team.name)
        leaves[t.team.name] = QueueNode(
            t.team.name, dept.name if dept else None, quota, limit_of(quota, t.team.borrow),
            t.team.over_quota_weight if t.team.over_quota_weight is not None else DEFAULT_WEIGHT, t.team.priority,
            sum(p.max_units for p in t.pools), tuple((p.name, t.nominal[p.name]) for p in t.pools), t.team)
        plans[t.team.name] = t.pools
    nodes = []
    for d in stack.departments:
        children = [leaves[name] for name in d.teams if name in leaves]
        quota = d.gpus if d.gpus is not None else sum(c.quota for c in children)
        reach = sum(p.max_units for p in {p.name: p for name in d.teams for p in plans.get(name, ())}.values())
        nodes.append(QueueNode(d.name, None, quota, limit_of(quota, d.borrow),
                               d.over_quota_weight if d.over_quota_weight is not None else DEFAULT_WEIGHT, d.priority, reach))
        nodes += children
    placed = {n.name for n in nodes}
    return nodes + [leaf for name, leaf in leaves.items() if name not in placed]


def effective_borrowable(node: QueueNode, tree: list[QueueNode] | dict[str, QueueNode]) -> int:
    """A team borrows within its department's limit too: never more than the department may hold beyond the team's
    quota. `tree`: the queues, or the same by name (what callers asking for every team pass)."""
    by_name = tree if isinstance(tree, dict) else {n.name: n for n in tree}
    parent = by_name.get(node.parent or "")
    own = node.borrowable
    if parent is None or parent.limit is None:
        return own
    return max(min(own, parent.limit - node.quota), 0)


def unlimited_resource() -> dict:
    return {"quota": UNLIMITED, "limit": UNLIMITED, "overQuotaWeight": DEFAULT_WEIGHT}


def queue(node: QueueNode) -> dict:
    spec: dict = {
        "displayName": node.name,
        "priority": QUEUE_PRIORITIES[node.priority],
        "resources": {
            "gpu": {"quota": node.quota, "limit": UNLIMITED if node.limit is None else node.limit, "overQuotaWeight": node.weight},
            "cpu": unlimited_resource(),
            "memory": unlimited_resource(),
        },
    }
    if node.parent:
        spec["parentQueue"] = node.parent
    labels = team_labels(node.team) if node.team is not None else {**MANAGED, "gpupools.io/department": node.name}
    return {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": node.name, "labels": labels}, "spec": spec}


def fraction_pools(plans: list[PoolPlan]) -> list[PoolPlan]:
    return [p for p in plans if p.sharing.fraction is not None]


def fractions_on(stack: StackConfig) -> bool:
    """Whether KAI splits some pool's GPUs into fractions."""
    return stack.quotas == "kai" and any(stack.sharing_of(p).fraction is not None for p in stack.pools)


def helm_values(plans: list[PoolPlan]) -> dict:
    """The chart's values: the released images, GPU sharing where a pool allows fractions, the node-scale-adjuster that
    turns unschedulable fractional pods into whole-GPU placeholder pods an autoscaler sees (docs/gpu-sharing/
    autoscaling/README.md), KAI limited to team namespaces, and no default queue (whose unlimited GPU limit would be a
    way around every team's quota).

    The Config the operator reads is rendered as a release resource (`kaiConfig.render`), not applied by a hook Job, so
    it is tracked and replaced like the rest of the release (templates/kai-config.yaml: the two are exclusive). The
    control-plane pods carry no GPU toleration, so they run on the system nodes; KAI's pods on GPU nodes (reservation
    and scaling pods) copy the tolerations of the workload pod they stand for."""
    fractions = bool(fraction_pools(plans))
    return {
        "global": {"registry": REGISTRY, "gpuSharing": fractions, "clusterAutoscaling": fractions, "leaderElection": True,
                   "namespaceLabelSelector": {ENGINE_LABEL: ENGINE_VALUE}},
        "operator": {"replicaCount": 2},
        "podgrouper": {"queueLabelKey": QUEUE_LABEL},
        "kaiConfig": {"render": True},
        "kaiConfigDeployer": {"enabled": False},
        # Copies Kueue Topology objects into KAI's on install: there are none where KAI keeps the quotas.
        "topologyMigration": {"enabled": False},
        "defaultQueue": {"createDefaultQueue": False},
    }


def release(plans: list[PoolPlan]) -> Release:
    return Release(CHART, CHART.default_version, helm_values(plans))


def namespace(plan: TeamPlan) -> dict:
    labels = {**team_labels(plan.team), ENGINE_LABEL: ENGINE_VALUE, QUEUE_LABEL: plan.team.name}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": plan.team.namespace_name, "labels": labels}}


def asks_gpu_expression(pod_spec: str, pod_meta: str) -> str:
    """CEL: does a pod (spec and metadata given) ask for GPUs, as a resource or as a KAI fraction annotation?"""
    fraction = (f"(has({pod_meta}.annotations) && ({cel_string(FRACTION_ANNOTATION)} in {pod_meta}.annotations || "
                f"{cel_string(MEMORY_ANNOTATION)} in {pod_meta}.annotations))")
    containers = f"{pod_spec}.containers + (has({pod_spec}.initContainers) ? {pod_spec}.initContainers : [])"
    return f"({requests_gpu_expression('(' + containers + ')')} || {fraction})"


def queue_policy(plan: TeamPlan) -> dict:
    """Refuse, at creation, GPU workloads in the team namespace that KAI would not schedule from the team's queue: a
    Job, Deployment, StatefulSet or bare Pod must name KAI's scheduler in its pod template and carry the team's queue
    label. The pods a Job creates inherit its template (scheduler name) and are grouped by the Job's label, so they
    pass on their Job's check."""
    team = plan.team
    template_spec = "object.spec.template.spec"
    template_meta = "(has(object.spec.template.metadata) ? object.spec.template.metadata : {})"
    return team_admission_policy(
        team, "kai-queue",
        [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]},
         {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments", "statefulsets"]},
         {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
        [{"name": "isPod", "expression": "request.kind.kind == 'Pod'"},
         {"name": "podSpec", "expression": f"variables.isPod ? object.spec : {template_spec}"},
         {"name": "podMeta", "expression": f"variables.isPod ? object.metadata : {template_meta}"},
         {"name": "asksGpu", "expression": asks_gpu_expression("variables.podSpec", "variables.podMeta")},
         {"name": "ownedByJob", "expression": ("variables.isPod && has(object.metadata.ownerReferences) && "
                                               "object.metadata.ownerReferences.exists(o, o.kind == 'Job' && o.apiVersion == 'batch/v1')")},
         {"name": "queue", "expression": (f"has(object.metadata.labels) && {cel_string(QUEUE_LABEL)} in object.metadata.labels ? "
                                          f"object.metadata.labels[{cel_string(QUEUE_LABEL)}] : ''")}],
        [{"expression": (f"!variables.asksGpu || (has(variables.podSpec.schedulerName) && "
                         f"variables.podSpec.schedulerName == {cel_string(SCHEDULER_NAME)})"),
          "message": f"GPU pods in namespace {team.namespace_name} are scheduled by KAI Scheduler: set schedulerName: {SCHEDULER_NAME}",
          "reason": "Forbidden"},
         {"expression": f"!variables.asksGpu || variables.ownedByJob || variables.queue == {cel_string(team.name)}",
          "message": (f"GPU workloads in namespace {team.namespace_name} queue for team {team.name}'s GPU quota: "
                      f"set label {QUEUE_LABEL}={team.name}"),
          "reason": "Forbidden"}],
    )


# The operator labels every object it makes `app: <name>` (pkg/operator/operands/common/common.go, ObjectForKAIConfig,
# lines 117-136): the queue controller's Service is `queue-controller` with its metrics on port `metrics`
# (operands/queue_controller/resources.go line 28; pkg/apis/kai/v1/queue_controller/queue_controller.go line 118), the
# default shard's scheduler Service `<schedulerName>-default` with port `http-metrics` (operands/scheduler/
# resources_for_shard.go lines 300-345). With two replicas that Service has no selector: the operator keeps an
# EndpointSlice on the leader (lines 425-470), which Prometheus finds only with the EndpointSlice role.
QUEUE_CONTROLLER = "queue-controller"
SCHEDULER_SERVICE = f"{SCHEDULER_NAME}-default"


def service_monitors(labels: dict[str, str]) -> list[dict]:
    """KAI's queue controller (each Queue's GPU quota and the GPUs its workloads hold) and the scheduler (pods it evicts,
    by action: reclaim among them), scraped by the stack's Prometheus (`labels`: what it selects ServiceMonitors by)."""
    def monitor(name: str, service: str, port: str) -> dict:
        return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                "metadata": {"name": name, "namespace": CHART.namespace, "labels": {**MANAGED, **labels}},
                "spec": {"selector": {"matchLabels": {"app": service}}, "endpoints": [{"port": port, "path": "/metrics"}]}}

    scheduler = monitor("kai-scheduler", SCHEDULER_SERVICE, "http-metrics")
    scheduler["spec"]["serviceDiscoveryRole"] = "EndpointSlice"
    return [monitor("kai-queue-controller", QUEUE_CONTROLLER, "metrics"), scheduler]


def queue_namespaces(stack: StackConfig) -> dict[str, str]:
    """Each team's KAI queue and its namespace, so alerts on a queue reach the team that owns it; none unless the
    stack's quotas are KAI's."""
    if stack.quotas != "kai":
        return {}
    return {t.name: t.namespace_name for t in stack.teams}


def team_objects(stack: StackConfig, plans: list[PoolPlan], teams: list[TeamPlan], scrape: dict[str, str] | None = None) -> list[dict]:
    """Namespaces first, then the queues (each parent before its teams, as KAI's queue webhook looks the parent up:
    pkg/admission/webhook/queuehooks/queue_validator.go lines 95-100), then the admission policies."""
    from gpupools.queues.resourcequota import admission_policy as pool_policy

    objects = [software_namespace(CHART.namespace)] + [namespace(t) for t in teams]
    objects += [queue(n) for n in queue_tree(stack, teams)]
    for t in teams:
        policy = queue_policy(t)
        objects += [policy, admission_binding(policy)]
        if t.restricted:
            # KAI's GPU quota is one number per queue, whichever pool the GPUs are on: this keeps the team's pods on
            # its own pools.
            pools = pool_policy(t)
            objects += [pools, admission_binding(pools)]
    if scrape:
        objects += service_monitors(scrape)
    return objects


def job_metadata(team: Team, plan: PoolPlan, fraction: float | None) -> tuple[dict, dict, dict]:
    """(Job labels, pod annotations, pod spec fields) of a team's Job from its KAI queue on `plan`'s pool: the queue
    label, KAI's scheduler, and a fraction annotation or nothing. The pool's node selector and tolerations are the
    Job's own, as on every scheduler (gpupools.landing.jobs team_job); KAI places a pod by them (its
    PodToleratesNodeTaints predicate is the kube-scheduler's TaintToleration filter: kai-scheduler/KAI-Scheduler@30fd2db
    pkg/scheduler/k8s_internal/predicates/predicates.go, NewSessionPredicates), so the pool's own taints
    (`pools[].taints`) are tolerated only as the team declares (`teams[].tolerations`)."""
    annotations = {FRACTION_ANNOTATION: fraction_text(fraction)} if fraction is not None else {}
    return {QUEUE_LABEL: team.name}, annotations, {"schedulerName": SCHEDULER_NAME}


def fraction_text(fraction: float) -> str:
    """KAI parses the annotation as a float written with a decimal point (gpu_request_validator.go lines 84-89)."""
    text = f"{fraction:.6f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def fraction_format_problem(fraction: float) -> str | None:
    """Why `fraction` does not survive `fraction_text`, the one formatter of every gpu-fraction gpupools prints: written
    with six decimals it must read back as itself, so it is still above 0 and below 1 (KAI's binder refuses anything
    else: gpu_request_validator.go lines 75-91) and no rounding changed the share a pod gets."""
    text = fraction_text(fraction)
    if float(text) == fraction:
        return None
    if not 0 < float(text) < 1:
        return (f"{fraction!r} is written \"{text}\" in gpu-fraction (six decimals), which KAI refuses: give a fraction "
                f"from 0.000001 to 0.999999")
    return f"{fraction!r} is written \"{text}\" in gpu-fraction (six decimals); give it with at most six decimals"


# --------------------------------------------------------------------------------------------------------------------
# What a stack may ask of KAI, checked before anything is planned


def _fraction_refusal(mode: str, installer: str) -> str | None:
    """Why KAI's fractions cannot work on a pool of this sharing mode and GPU software, or None.

    A fraction is served by a reservation pod that KAI's binder starts on the node with `nvidia.com/gpu: 1`, runtime
    class `nvidia`, and that reports the UUID of the one GPU it was given (pkg/binder/binding/resourcereservation/
    resource_reservation.go lines 428-446 and 533-575; pkg/resourcereservation/discovery/discovery.go, which refuses
    more or fewer than one device); the fractional pods then get that GPU through NVIDIA_VISIBLE_DEVICES
    (pkg/binder/common/gpu_access.go), which only NVIDIA's container runtime reads."""
    if mode == "mig":
        return ("fractions are not possible on a MIG pool: KAI's reservation pod asks for a whole nvidia.com/gpu, which a MIG "
                "node does not offer, and a MIG slice cannot be split further; use a pool with mode none for fractions")
    if mode in ("time-slicing", "mps"):
        return (f"fractions are not possible on a pool whose device plugin does {mode}: it advertises each GPU as several "
                f"nvidia.com/gpu, so two KAI reservation pods can hold the same GPU and the fractions placed on it add up past "
                f"one GPU; use mode none, where KAI itself splits the GPUs")
    if mode == "vgpu":
        return ("fractions are not possible on a vgpu pool: HAMi's scheduler and device plugin split those GPUs, and KAI "
                "would be a second scheduler for the same GPUs; use mode none for KAI's fractions")
    if installer != "gpu-operator":
        who = {"cloud": "GKE's own device plugin (installer cloud)", "bottlerocket": "Bottlerocket's built-in device plugin",
               "device-plugin": "the standalone NVIDIA device plugin"}.get(installer, installer)
        return (f"fractions need the GPU Operator: KAI's reservation and fractional pods run with RuntimeClass nvidia and get "
                f"their GPU through NVIDIA_VISIBLE_DEVICES, which the operator's container toolkit provides (and its GPU "
                f"feature discovery labels nvidia.com/gpu.memory, which gpu-memory requests need); {who} offers neither; "
                f"set gpuSoftware.installer: gpu-operator (os al2023 on EKS)")
    return None


# Why a pool that KAI teams use must serve whole GPUs, by sharing mode.
_SHARED_POOL_REASONS = {
    "time-slicing": "KAI counts each time-slice the device plugin advertises as a whole GPU in queue quotas; give the pool "
                    "mode none and let KAI split GPUs with sharing.fraction",
    "mps": "KAI counts each MPS share the device plugin advertises as a whole GPU in queue quotas; give the pool mode none "
           "and let KAI split GPUs with sharing.fraction",
    "mig": "KAI counts a MIG slice by its compute slices (pkg/scheduler/api/common_info/resources/mig.go), not as the one "
           "unit a team's quota promises, so quotas on it would not mean GPUs; give KAI teams pools of whole GPUs",
    "vgpu": "HAMi's scheduler places pods on vgpu pools; KAI Scheduler cannot be a second scheduler for the same GPUs",
}


def kai_problems(pools: list[tuple[int, object, object, str, str]], teams: list[Team], departments: list[Department],
                 quotas: str) -> list:
    """`pools`: (index, Pool, its Sharing, the sharing's path, the pool's resolved installer). Every combination KAI
    cannot serve, and every hierarchy its queues cannot express, with the reason."""
    from gpupools.stack.errors import Problem

    problems = []
    used = {name for t in teams for name in (t.pool_names or [])}
    everyone = any(t.pool_names is None for t in teams)
    for index, pool, sharing, path, installer in pools:
        if sharing.fraction is not None:
            if (why := fraction_format_problem(sharing.fraction)) is not None:
                problems.append(Problem(f"{path}.fraction", why))
            elif quotas != "kai":
                problems.append(Problem(f"{path}.fraction", "GPU fractions are KAI Scheduler's; set gpupools:quotas: kai"))
            elif (why := _fraction_refusal(sharing.mode, installer)) is not None:
                problems.append(Problem(f"{path}.fraction", why))
        elif quotas == "kai" and teams and sharing.mode != "none" and (everyone or pool.name in used):
            problems.append(Problem(f"{path}.mode", f"{sharing.mode!r} cannot serve KAI queues: {_SHARED_POOL_REASONS[sharing.mode]}"))
    if quotas != "kai":
        if departments:
            problems.append(Problem("departments", f"departments are KAI Scheduler's parent queues; set gpupools:quotas: kai, or drop "
                                                   f"departments (with {quotas} teams have no parent)"))
        for i, team in enumerate(teams):
            if "over_quota_weight" in team.model_fields_set:
                problems.append(Problem(f"teams[{i}].overQuotaWeight", f"a KAI Scheduler setting; set gpupools:quotas: kai, or drop overQuotaWeight"))
        return problems
    for i, team in enumerate(teams):
        if "lend" in team.model_fields_set:
            problems.append(Problem(f"teams[{i}].lend", "KAI lends every team's unused quota and reclaims it when the team needs it; "
                                                        "drop lend (borrow sets how much a team may take beyond its quota)"))
    problems += _hierarchy_problems(teams, departments)
    return problems


def _hierarchy_problems(teams: list[Team], departments: list[Department]) -> list:
    """A team has one parent; queue names are one namespace (Queues are cluster-scoped); a department's quota covers
    its teams' quotas (KAI's queue webhook warns otherwise: queue_validator.go lines 138-141 and 185-188); a team's
    quota fits under its department's limit."""
    from gpupools.stack.errors import Problem

    problems = []
    by_name = {t.name: (i, t) for i, t in enumerate(teams)}
    parent: dict[str, str] = {}
    seen_departments: set[str] = set()
    for d_index, dept in enumerate(departments):
        path = f"departments[{d_index}]"
        if dept.name in by_name:
            problems.append(Problem(f"{path}.name", f"{dept.name!r} is also a team; departments and teams are KAI queues of one "
                                                    f"cluster-wide namespace, so their names must differ"))
        elif dept.name in seen_departments:
            problems.append(Problem(f"{path}.name", f"{dept.name!r} is used by more than one department"))
        seen_departments.add(dept.name)
        members = []
        for j, name in enumerate(dept.teams):
            if name not in by_name:
                problems.append(Problem(f"{path}.teams[{j}]", f"{name!r} is not a team of this stack; teams: "
                                                              f"{', '.join(sorted(by_name)) or '(none)'}"))
            elif name in parent:
                problems.append(Problem(f"{path}.teams[{j}]", f"team {name!r} is already in department {parent[name]!r}; "
                                                              f"a team's queue has one parent"))
            else:
                parent[name] = dept.name
                members.append(by_name[name])
        total = sum(team_quota(t) for _, t in members)
        quota = dept.gpus if dept.gpus is not None else total
        limit = limit_of(quota, dept.borrow)
        # A team above the department's limit is the mistake to name; the sum is then over the quota as well.
        over = [(i, t) for i, t in members if limit is not None and team_quota(t) > limit]
        for i, team in over:
            problems.append(Problem(f"teams[{i}].gpus", f"{team_quota(team)} GPUs is above the limit of its department "
                                                        f"{dept.name!r} ({limit}: its quota {quota} plus borrow {dept.borrow}); "
                                                        f"a team cannot be guaranteed more than its department may hold"))
        if not over and dept.gpus is not None and total > dept.gpus:
            problems.append(Problem(f"{path}.gpus", f"{dept.gpus} is less than its teams' quotas add up to ({total}); a department's "
                                                    f"quota is what its teams are guaranteed together: raise gpus or lower the teams'"))
    return problems


def fraction_sharing(stack: StackConfig, plans: list[PoolPlan]) -> list[dict]:
    """Per pool KAI splits into fractions: the teams whose pods may share its GPUs, and what isolates them. KAI keeps
    no memory or compute limits by itself (docs/gpu-sharing/README.md); HAMi-core through kai-resource-isolator would,
    and gpupools does not install it, so the isolation is "none"."""
    if stack.quotas != "kai":
        return []
    teams = plan_teams(stack, plans)
    return [{"pool": p.name, "teams": [t.team.name for t in teams if p in t.pools], "isolation": "none"} for p in fraction_pools(plans)]


def fraction_lines(stack: StackConfig, plan: PoolPlan, from_zero: bool, autoscaler: str | None) -> list[tuple[str, str]]:
    """What the plan says of a pool KAI splits: the request, the isolation there is (none), and how a fractional pod
    that finds no node gets one."""
    if stack.quotas != "kai" or plan.sharing.fraction is None:
        return []
    who = autoscaler or "no autoscaler"
    start = (f"a pending fractional pod asks for no GPU, so KAI's node-scale-adjuster starts a placeholder pod in {SCALE_ADJUST_NAMESPACE} "
             f"with nvidia.com/gpu: 1 and the pod's node selector and tolerations, which {who} adds a node for" if from_zero else
             f"fractional pods wait for a running node: the pool does not add nodes for the node-scale-adjuster's whole-GPU "
             f"placeholder pods either ({who})")
    return [("fractions", f"KAI Scheduler: pods ask for part of one GPU ({FRACTION_ANNOTATION}: \"{fraction_text(plan.sharing.fraction)}\" "
                          f"by default, or {MEMORY_ANNOTATION} in MiB); a reservation pod in {RESERVATION_NAMESPACE} holds the GPU"),
            ("", "isolation: none. KAI limits neither GPU memory nor compute: a pod can use the whole GPU and starve the others on "
                 "it (HAMi-core through kai-resource-isolator would enforce memory; gpupools does not install it)"),
            ("", start)]
