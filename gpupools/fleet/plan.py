"""The fleet's decisions: the manager's Kueue configuration and objects, its quota per team against its workers',
every reason a worker cannot take what the manager dispatches, and where each team's job lands across the workers.

Pure: `gpupools plan --stack <fleet>`, `gpupools check`, `gpupools workload --fleet` and the FleetManager component
all read these answers.

Facts (kubernetes-sigs/kueue v0.19.2):
- the manager's `multiKueue` configuration: origin, workerLostTimeout, dispatcherName, incrementalDispatcherConfig
  (apis/config/v1beta2/configuration_types.go, MultiKueue); the incremental dispatcher nominates workers in the
  MultiKueueConfig's order (feature gate MultiKueueIncrementalDispatcherRespectConfigOrder, beta and on in 0.19,
  pkg/features/kube_features.go), `stepSize` of them per round;
- a ClusterQueue holding both a MultiKueue and a ProvisioningRequest admission check stays inactive ("Cannot use both
  MultiKueue and ProvisioningRequest AdmissionChecks together", pkg/cache/scheduler/clusterqueue.go,
  updateQueueStatus), and a MultiKueue check may not be given per flavor: ProvisioningRequests belong on workers;
- a workload reserves quota twice, on the manager's ClusterQueue and on a worker's: Kueue's docs ask for a manager
  quota of about the sum of the workers' (site/content/en/docs/concepts/multikueue.md);
- a worker needs the same namespace and LocalQueue name as the manager; its ClusterQueues may differ
  (site/content/en/docs/tasks/manage/setup_multikueue.md);
- the manager talks `kueue.x-k8s.io/v1beta2` to workers, which Kueue serves since 0.15.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import yaml

from gpupools.fleet.config import FleetStack, FleetTeam, WorkerStack
from gpupools.fleet import credentials
from gpupools.fabric.plan import job_fabrics
from gpupools.fabric.software import jobset_release
from gpupools.landing.check import landing_check
from gpupools.landing.verdict import Landing
from gpupools.pools.planning import plan_pools
from gpupools.queues import kueue
from gpupools.queues.teams import MANAGED, TEAM_LABEL, TeamPlan, plan_teams
from gpupools.stack.errors import Problem

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
INCREMENTAL_DISPATCHER = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
# Kueue's default origin: every manager that leaves it unset shares it, and its garbage collector deletes the others'.
DEFAULT_ORIGIN = "multikueue"
ADMISSION_CHECK = "multikueue"
MULTIKUEUE_CONFIG = "gpupools-fleet"
# The manager runs no GPU node: its one flavor only counts quota (manager flavors have no effect on workers, KEP-9988).
FLAVOR = "fleet"
GC_INTERVAL = "1m"
# The first Kueue serving kueue.x-k8s.io/v1beta2, the API the manager uses on workers.
MIN_WORKER_KUEUE = (0, 15)
# Where a workload goes: MultiKueue's own controller name, as Kueue's webhook defaults it (pkg/controller/jobframework/
# defaults.go); a Job without it is rejected by the MultiKueue check (job_multikueue_adapter.go).
MANAGED_BY = MULTIKUEUE_CONTROLLER


def kubeconfig_secret(worker: str) -> str:
    return f"{worker}-kubeconfig"


@dataclass
class WorkerView:
    """A worker as the fleet judges it: its team queues, quotas per resource, and landing verdicts."""

    entry: WorkerStack
    teams: dict[str, TeamPlan]
    quotas: dict[str, dict[str, int]]  # team -> GPU resource -> nominal units on the worker's ClusterQueue
    verdicts: list[Landing]
    jobset: bool
    kueue_version: str

    @property
    def name(self) -> str:
        return self.entry.worker.name


def team_quotas(teams: list[TeamPlan]) -> dict[str, dict[str, int]]:
    """Per team, the nominal quota of each GPU resource its ClusterQueue holds (summed over flavors), as the worker's
    Kueue objects (queues.kueue.resource_groups) give it."""
    out: dict[str, dict[str, int]] = {}
    for team in teams:
        per: dict[str, int] = {}
        for group in kueue.resource_groups(team):
            for flavor in group["flavors"]:
                for quota in flavor["resources"]:
                    per[quota["name"]] = per.get(quota["name"], 0) + int(quota["nominalQuota"])
        out[team.team.name] = per
    return out


def worker_view(entry: WorkerStack) -> WorkerView:
    stack = entry.stack
    plans = plan_pools(stack)
    teams = plan_teams(stack, plans) if stack.quotas == "kueue" else []
    verdicts = landing_check(stack, plans) if stack.quotas == "kueue" else []
    jobset = jobset_release(list(job_fabrics(stack, plans).values()), stack.fleet_worker is not None) is not None
    return WorkerView(entry, {t.team.name: t for t in teams}, team_quotas(teams), verdicts, jobset, kueue.CHART.default_version)


@dataclass(frozen=True)
class TeamQuota:
    team: str
    resource: str
    manager: int
    workers: int
    per_worker: tuple[tuple[str, int], ...]
    on_purpose: bool


def manager_quotas(stack: FleetStack, views: list[WorkerView]) -> list[TeamQuota]:
    """The manager's quota per team and resource: the team's own (`fleet.teams[].gpus`) or the sum of the workers'."""
    rows = []
    for team in stack.fleet.teams:
        summed: dict[str, list[tuple[str, int]]] = {}
        for view in views:
            for resource, units in view.quotas.get(team.name, {}).items():
                summed.setdefault(resource, []).append((view.name, units))
        resources = sorted(set(summed) | set(team.gpus or {}))
        for resource in resources:
            total = sum(u for _, u in summed.get(resource, []))
            own = (team.gpus or {}).get(resource)
            rows.append(TeamQuota(team.name, resource, total if team.gpus is None else (own or 0), total,
                                  tuple(summed.get(resource, [])), team.above_workers))
    return rows


# --------------------------------------------------------------------------------------------------------------------
# The manager's Kueue


def manager_configuration(stack: FleetStack) -> dict:
    """The manager's Kueue Configuration: the workers' own (same integrations, same team-namespace selector), with
    MultiKueue: this fleet's origin, how long a lost worker keeps its workloads, and the incremental dispatcher."""
    config = kueue.manager_configuration()
    config["multiKueue"] = {
        "gcInterval": GC_INTERVAL,
        "origin": stack.fleet.origin,
        "workerLostTimeout": stack.fleet.worker_lost_timeout,
        "dispatcherName": INCREMENTAL_DISPATCHER,
        "incrementalDispatcherConfig": {"stepSize": stack.fleet.step_size},
    }
    return config


def helm_values(stack: FleetStack) -> dict:
    return {"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager_configuration(stack), sort_keys=False)},
            "controllerManager": {"replicas": 2, "podDisruptionBudget": {"enabled": True, "minAvailable": 1}}}


def release(stack: FleetStack) -> kueue.Release:
    return kueue.Release(kueue.CHART, kueue.CHART.default_version, helm_values(stack))


def _team_labels(team: FleetTeam) -> dict[str, str]:
    return {**MANAGED, TEAM_LABEL: team.name}


def multikueue_cluster(worker: str) -> dict:
    return {"apiVersion": kueue.API_VERSION, "kind": "MultiKueueCluster", "metadata": {"name": worker, "labels": dict(MANAGED)},
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": kubeconfig_secret(worker)}}}}


def manager_queue(team: FleetTeam, quotas: list[TeamQuota]) -> dict:
    resources = [q for q in quotas if q.team == team.name]
    spec: dict = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.namespace_name}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": [q.resource for q in resources],
                            "flavors": [{"name": FLAVOR, "resources": [{"name": q.resource, "nominalQuota": q.manager} for q in resources]}]}]
        if resources else [],
        # One MultiKueue check for the whole queue (never per flavor) and no ProvisioningRequest check: those stay on workers.
        "admissionChecksStrategy": {"admissionChecks": [{"name": ADMISSION_CHECK}]},
    }
    return {"apiVersion": kueue.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": team.name, "labels": _team_labels(team)}, "spec": spec}


def manager_objects(stack: FleetStack, quotas: list[TeamQuota]) -> list[dict]:
    """Everything the manager's Kueue holds but the kubeconfig Secrets (made from the workers' stack outputs by the
    component): namespaces, MultiKueueClusters, one MultiKueueConfig in dispatch order, the admission check, the
    flavor, and per team a ClusterQueue and a LocalQueue named as on every worker."""
    fleet = stack.fleet
    objects: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": kueue.CHART.namespace, "labels": dict(MANAGED)}}]
    objects += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": t.namespace_name, "labels": _team_labels(t)}} for t in fleet.teams]
    objects += [kueue.priority_class(name) for name in kueue.PRIORITIES]
    objects += [multikueue_cluster(w.name) for w in fleet.workers]
    objects.append({"apiVersion": kueue.API_VERSION, "kind": "MultiKueueConfig", "metadata": {"name": MULTIKUEUE_CONFIG, "labels": dict(MANAGED)},
                    "spec": {"clusters": [w.name for w in fleet.workers]}})
    objects.append({"apiVersion": kueue.API_VERSION, "kind": "AdmissionCheck", "metadata": {"name": ADMISSION_CHECK, "labels": dict(MANAGED)},
                    "spec": {"controllerName": MULTIKUEUE_CONTROLLER,
                             "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": MULTIKUEUE_CONFIG}}})
    objects.append({"apiVersion": kueue.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR, "labels": dict(MANAGED)}, "spec": {}})
    objects += [manager_queue(t, quotas) for t in fleet.teams]
    objects += [{"apiVersion": kueue.API_VERSION, "kind": "LocalQueue",
                 "metadata": {"name": t.name, "namespace": t.namespace_name, "labels": _team_labels(t)}, "spec": {"clusterQueue": t.name}}
                for t in fleet.teams]
    return objects


def queue_check_problems(objects: list[dict]) -> list[str]:
    """ClusterQueues Kueue would leave inactive on a MultiKueue manager: more than one MultiKueue check, one given per
    flavor, or a MultiKueue check beside a ProvisioningRequest check (kueue v0.19.2 pkg/cache/scheduler/clusterqueue.go)."""
    controllers = {o["metadata"]["name"]: o["spec"].get("controllerName") for o in objects if o.get("kind") == "AdmissionCheck"}
    out = []
    for cq in (o for o in objects if o.get("kind") == "ClusterQueue"):
        checks = ((cq["spec"].get("admissionChecksStrategy") or {}).get("admissionChecks") or []) + \
                 [{"name": n} for n in cq["spec"].get("admissionChecks") or []]
        mk = [c for c in checks if controllers.get(c["name"]) == MULTIKUEUE_CONTROLLER]
        prov = [c for c in checks if controllers.get(c["name"]) == kueue.PROVISIONING_CONTROLLER]
        name = cq["metadata"]["name"]
        if len(mk) > 1:
            out.append(f"ClusterQueue {name}: more than one MultiKueue admission check; Kueue leaves the queue inactive")
        if any(c.get("onFlavors") for c in mk):
            out.append(f"ClusterQueue {name}: a MultiKueue admission check may not be given per flavor (onFlavors)")
        if mk and prov:
            out.append(f"ClusterQueue {name}: a MultiKueue and a ProvisioningRequest admission check together leave the queue inactive "
                       f"(\"Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together\", kueue clusterqueue.go); "
                       f"ProvisioningRequests belong on the workers")
    return out


# --------------------------------------------------------------------------------------------------------------------
# What a worker must be


def _covered(cidr: str, allowed: list[str]) -> bool:
    net = ipaddress.ip_network(cidr)
    return any(net.version == a.version and net.subnet_of(a) for a in (ipaddress.ip_network(x) for x in allowed))


def reachability(stack: FleetStack, view: WorkerView) -> tuple[bool, str]:
    """Whether the manager's Kueue can reach the worker's API server, and what is missing if not."""
    worker, cluster = view.entry.worker, view.entry.stack.cluster
    if worker.network == "private":
        return True, (f"over private connectivity the platform team provides (network: private): the manager's network must be "
                      f"peered or linked to the worker's API endpoint ({cluster.endpoint_mode})")
    mode = cluster.endpoint_mode
    if mode == "public":
        return True, "the worker's API endpoint is public"
    if mode == "private":
        return False, ("the worker's API endpoint is private: set its cluster.authorizedCidrs to the manager's egress CIDRs ("
                       + (", ".join(stack.fleet.manager_egress_cidrs) or "fleet.managerEgressCidrs, unset") + "), or connect the "
                       "manager's network to the worker's (VPC peering, PrivateLink, Private Service Connect) and set network: private")
    if not stack.fleet.manager_egress_cidrs:
        return False, ("fleet.managerEgressCidrs is unset: the worker's API endpoint admits only its authorizedCidrs, and nothing says "
                       "the manager's address is among them")
    missing = [c for c in stack.fleet.manager_egress_cidrs if not _covered(c, list(cluster.authorized_cidrs or []))]
    if missing:
        return False, f"the worker's cluster.authorizedCidrs lacks the manager's egress {', '.join(missing)}"
    return True, f"the manager's egress {', '.join(stack.fleet.manager_egress_cidrs)} is in the worker's authorizedCidrs"


def _minor(version: str) -> tuple[int, int]:
    major, minor, *_ = (version.lstrip("v").split(".") + ["0", "0"])
    return int(major), int(minor)


def worker_problems(stack: FleetStack, view: WorkerView) -> list[Problem]:
    """Why a worker cannot take what the manager dispatches, each with the field to change."""
    w, ws = view.entry.worker, view.entry.stack
    at = f"fleet.workers[{view.entry.index}]"
    out: list[Problem] = []
    if ws.quotas != "kueue":
        engine = {"kai": "KAI Scheduler", "resourcequota": "ResourceQuotas"}[ws.quotas]
        out.append(Problem(at, f"worker {w.name} keeps its quotas with {engine} (gpupools:quotas: {ws.quotas}): MultiKueue dispatches to "
                               f"a worker's own Kueue, which such a stack does not run; a worker needs gpupools:quotas: kueue"))
        return out
    if ws.fleet_worker is None:
        out.append(Problem(at, f"worker {w.name} mints no service-account kubeconfig: set gpupools:fleetWorker: {{fleets: [{stack.fleet.origin}]}} "
                               f"in {w.file} (Kueue refuses the stack's own kubeconfig, whose exec plugin it does not run: \"exec plugins "
                               f"are not allowed\")"))
    elif stack.fleet.origin not in ws.fleet_worker.fleets:
        out.append(Problem(at, f"worker {w.name} does not serve fleet {stack.fleet.origin}: add it to gpupools:fleetWorker.fleets in {w.file}"))
    if not view.jobset:
        out.append(Problem(at, f"worker {w.name} has no JobSet CRD: the manager enables Kueue's JobSet integration and connects to a "
                               f"worker only where every enabled framework's CRD is served; JobSet comes with fabric pools or "
                               f"gpupools:fleetWorker"))
    if _minor(view.kueue_version) < MIN_WORKER_KUEUE:
        out.append(Problem(at, f"worker {w.name} runs Kueue {view.kueue_version}; the manager needs kueue.x-k8s.io/v1beta2 there "
                               f"(Kueue 0.15 or newer)"))
    elif _minor(view.kueue_version) != _minor(kueue.CHART.default_version):
        out.append(Problem(at, f"worker {w.name} runs Kueue {view.kueue_version}, the manager {kueue.CHART.default_version}: keep one "
                               f"minor release across the fleet"))
    ok, why = reachability(stack, view)
    if not ok:
        out.append(Problem(at, f"the manager cannot reach worker {w.name}: {why}"))
    for team in stack.fleet.teams:
        plan = view.teams.get(team.name)
        if plan is None:
            out.append(Problem(at, f"worker {w.name} has no team {team.name}: every worker needs the fleet's namespaces and LocalQueues "
                                   f"(LocalQueue {team.name} in namespace {team.namespace_name}); add the team to {w.file}"))
        elif plan.team.namespace_name != team.namespace_name:
            out.append(Problem(at, f"worker {w.name} puts team {team.name}'s LocalQueue in namespace {plan.team.namespace_name}, the "
                                   f"fleet in {team.namespace_name}: MultiKueue creates the job in the same namespace on the worker"))
    return out


# --------------------------------------------------------------------------------------------------------------------
# Landing across the fleet


@dataclass(frozen=True)
class FleetLanding:
    """Where a team's job of one shape lands: the workers (in dispatch order) and the pools there."""

    team: str
    shape: str
    workers: tuple[tuple[str, tuple[str, ...]], ...]  # (worker, pools it lands on there)
    tried: tuple[str, ...]  # workers that have the shape for the team

    @property
    def lands(self) -> bool:
        return bool(self.workers)

    def as_json(self) -> dict:
        return {"team": self.team, "shape": self.shape, "lands": self.lands,
                "workers": [{"worker": w, "pools": list(p)} for w, p in self.workers], "tried": list(self.tried)}


def fleet_landing(stack: FleetStack, views: list[WorkerView]) -> list[FleetLanding]:
    """Per team and job shape, each worker's own landing verdicts (gpupools.landing) read together; a team with no
    verdict anywhere (no quota on any worker) gets one row that lands nowhere."""
    out = []
    for team in stack.fleet.teams:
        shapes: list[str] = []
        for view in views:
            for v in view.verdicts:
                if v.team == team.name and v.shape not in shapes:
                    shapes.append(v.shape)
        for shape in shapes or ["unit"]:
            where, tried = [], []
            for view in views:
                mine = [v for v in view.verdicts if v.team == team.name and v.shape == shape]
                if mine:
                    tried.append(view.name)
                pools = tuple(v.pool for v in mine if v.lands)
                if pools:
                    where.append((view.name, pools))
            out.append(FleetLanding(team.name, shape, tuple(where), tuple(tried)))
    return out


# --------------------------------------------------------------------------------------------------------------------
# The whole fleet


@dataclass
class FleetPlan:
    stack: FleetStack
    views: list[WorkerView]
    quotas: list[TeamQuota]
    objects: list[dict]
    landing: list[FleetLanding]
    problems: list[Problem] = field(default_factory=list)
    reach: dict[str, tuple[bool, str]] = field(default_factory=dict)


def plan_fleet(stack: FleetStack) -> FleetPlan:
    views = [worker_view(w) for w in stack.workers]
    quotas = manager_quotas(stack, views)
    objects = manager_objects(stack, quotas)
    landing = fleet_landing(stack, views)
    problems: list[Problem] = []
    if stack.fleet.origin == DEFAULT_ORIGIN:
        problems.append(Problem("fleet.origin", f"{DEFAULT_ORIGIN!r} is Kueue's default, which every manager that sets none shares; their "
                                                f"garbage collectors delete each other's jobs on a shared worker: name this fleet's own"))
    refs = [w.stack for w in stack.fleet.workers]
    for i, w in enumerate(stack.fleet.workers):
        if refs.index(w.stack) != i:
            problems.append(Problem(f"fleet.workers[{i}].stack", f"{w.stack} is worker {stack.fleet.workers[refs.index(w.stack)].name} already"))
    for view in views:
        problems += worker_problems(stack, view)
    for q in quotas:
        if q.manager > q.workers and not q.on_purpose:
            i = [t.name for t in stack.fleet.teams].index(q.team)
            problems.append(Problem(f"fleet.teams[{i}].gpus", f"team {q.team}'s manager quota of {q.resource} ({q.manager}) is above its "
                                                              f"workers' sum ({q.workers}): the manager admits jobs no worker can take; "
                                                              f"set aboveWorkers: true if that is meant"))
    for row in landing:
        if not row.lands:
            i = [t.name for t in stack.fleet.teams].index(row.team)
            why = (f"it fails on every worker that offers it ({', '.join(row.tried)}; see each worker's own plan)" if row.tried
                   else "no worker gives the team quota for it")
            problems.append(Problem(f"fleet.teams[{i}]", f"team {row.team}'s {row.shape} job lands on no worker: {why}"))
    problems += [Problem("fleet", p) for p in queue_check_problems(objects)]
    reach = {v.name: reachability(stack, v) for v in views}
    return FleetPlan(stack, views, quotas, objects, landing, problems, reach)


def fleet_job(stack: FleetStack, team: str, resource: str | None, units: int, image: str, quotas: list[TeamQuota]) -> dict:
    """The Job a team submits to the manager: its LocalQueue, one GPU resource its manager queue covers, and
    `managedBy` MultiKueue (Kueue's webhook would set it; written out, the Job says where it runs). No node selector
    or toleration: the worker's Kueue adds its flavor's when it admits the copy."""
    entry = next(t for t in stack.fleet.teams if t.name == team)
    covered = [q.resource for q in quotas if q.team == team and q.manager > 0]
    chosen = resource or (covered[0] if covered else "nvidia.com/gpu")
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"generateName": f"{team}-fleet-", "namespace": entry.namespace_name, "labels": {kueue.QUEUE_LABEL: team}},
        "spec": {
            "managedBy": MANAGED_BY,
            "suspend": True,
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never",
                                  "containers": [{"name": "cuda", "image": image, "command": ["nvidia-smi"],
                                                  "resources": {"limits": {chosen: units}}}]}},
        },
    }


def shared_origin_problems(stack: FleetStack, others: list[tuple[str, str, list[str]]]) -> list[Problem]:
    """Other fleet stacks (name, origin, worker stack references) that share a worker with this one under the same
    origin: each manager's garbage collector would delete the other's jobs there (kueue v0.19.2 multikueuecluster.go,
    runGC deletes remote objects of its origin that have no local twin)."""
    mine = {w.stack for w in stack.fleet.workers}
    out = []
    for name, origin, refs in others:
        shared = sorted(mine & set(refs))
        if origin == stack.fleet.origin and shared:
            out.append(Problem("fleet.origin", f"fleet {name} uses origin {origin} too and shares worker(s) {', '.join(shared)}: give each "
                                               f"fleet its own origin"))
    return out
