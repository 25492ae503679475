"""The fleet stack: a stack file with `gpupools:fleet` that names its workers (other gpupools stacks) and is the
MultiKueue manager, on a cluster of its own without GPU pools (`gpupools:cloud`, `gpupools:cluster`).

A fleet stack takes `gpupools:cloud`, `gpupools:cluster`, the cloud's provider keys and `gpupools:fleet`, nothing
else: GPU pools and teams' quotas live on the workers, the teams once in the fleet. Each worker is named twice: the
Pulumi stack (`org/project/stack`, read by a StackReference on `pulumi up`) and its stack file (read offline, for the
plan and every check across stacks).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Literal

from pydantic import AfterValidator, Field, StringConstraints, ValidationError
from pydantic_core import PydanticCustomError

from gpupools.stack.config import NAMESPACE, Cidr, Cluster, DnsLabel, Model, StackConfig, Units
from gpupools.stack.errors import ConfigError, Problem
from gpupools.stack.values import pydantic_problems, split_namespaces

FLEET_KEY = f"{NAMESPACE}:fleet"
# The keys a fleet stack takes besides the provider's: the manager's cloud and cluster, and the fleet itself.
FLEET_STACK_KEYS = ("cloud", "cluster", "fleet")
# A MultiKueueConfig names 1 to 20 clusters (kueue v0.19.2 apis/kueue/v1beta2/multikueue_types.go,
# MultiKueueConfigSpec.Clusters: MinItems=1, MaxItems=20).
MAX_WORKERS = 20
# Pulumi's stack reference name: organization/project/stack (Pulumi docs, "Stack references"); each part as Pulumi
# names a stack (letters, digits, '-', '_', '.').
STACK_REF = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
STACK_FILE = r"^([A-Za-z0-9_.-]+/)*Pulumi\.[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\.ya?ml$"
# A label value (kueue.x-k8s.io/multikueue-origin is a label on every remote object; kueue v0.19.2
# pkg/controller/admissionchecks/multikueue/multikueuecluster.go, the GC's label selector).
ORIGIN = r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$"
# A metav1.Duration as Kueue's configuration takes it, kept to minutes and hours.
DURATION = r"^[1-9][0-9]{0,3}[mh]$"


class FleetWorker(Model):
    """A worker: a gpupools stack whose Kueue runs what the manager dispatches. Order is dispatch order."""

    # The MultiKueueCluster's name on the manager (and its kubeconfig Secret's, with `-kubeconfig`).
    name: DnsLabel
    # The Pulumi stack (StackReference name) whose `multikueueKubeconfig` secret output the manager reads.
    stack: Annotated[str, StringConstraints(pattern=STACK_REF)]
    # The worker's stack file, relative to the fleet stack file's folder, for the offline plan and checks.
    file: Annotated[str, StringConstraints(pattern=STACK_FILE, max_length=300)]
    # How the manager reaches the worker's API server: over its public endpoint (`public`: the manager's egress CIDRs
    # must be in the worker's authorizedCidrs), or over a private network the platform team connects (`private`:
    # peering, PrivateLink, Private Service Connect); gpupools creates no such link.
    network: Literal["public", "private"] = "public"


class FleetTeam(Model):
    """A team of the fleet: the same namespace and LocalQueue (named after the team) on the manager and every worker."""

    name: DnsLabel
    namespace: DnsLabel | None = None
    # The manager's quota per GPU resource (e.g. {"nvidia.com/gpu": 16}); unset: the sum of the workers' quotas.
    gpus: Annotated[dict[Annotated[str, StringConstraints(pattern=r"^nvidia\.com/[a-z0-9][-a-z0-9.]{0,62}$")], Units],
                    Field(min_length=1, max_length=16)] | None = None
    # A manager quota above the workers' sum admits on the manager what no worker can run yet (Kueue's docs); only on purpose.
    above_workers: Annotated[bool, Field(strict=True)] = False

    @property
    def namespace_name(self) -> str:
        return self.namespace or self.name


def _distinct(field: str):
    def check(values: list) -> list:
        names = [getattr(v, field) for v in values]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise PydanticCustomError("distinct", "lists {names} more than once", {"names": ", ".join(twice)})
        return values
    return check


def _distinct_after(field: str) -> AfterValidator:
    return AfterValidator(_distinct(field))


class Fleet(Model):
    """`gpupools:fleet`: the workers in dispatch order, the teams, and the manager's MultiKueue settings."""

    # The label Kueue puts on every object it creates on a worker; its garbage collector deletes remote objects of this
    # origin that have no local twin, so two managers sharing a worker with one origin delete each other's jobs
    # (kueue v0.19.2 multikueuecluster.go, runGC). Unique per fleet.
    origin: Annotated[str, StringConstraints(pattern=ORIGIN)]
    workers: Annotated[list[FleetWorker], Field(min_length=1, max_length=MAX_WORKERS), _distinct_after("name")]
    teams: Annotated[list[FleetTeam], Field(min_length=1, max_length=1000), _distinct_after("name")]
    # The addresses the manager's Kueue reaches the workers' API servers from (its NAT gateway's, Cloud NAT's).
    manager_egress_cidrs: Annotated[list[Cidr], Field(max_length=100)] = Field(default_factory=list)
    # How long a workload stays admitted while the worker running it is unreachable, then it is dispatched again.
    worker_lost_timeout: Annotated[str, StringConstraints(pattern=DURATION)] = "15m"
    # Workers added to a workload's nomination per round of the incremental dispatcher (Kueue: 3).
    step_size: Annotated[int, Field(ge=1, le=MAX_WORKERS, strict=True)] = 1


@dataclass(frozen=True)
class WorkerStack:
    """A worker as the fleet reads it: its entry in the fleet, and its own stack, validated."""

    worker: FleetWorker
    index: int
    stack: StackConfig
    path: Path


@dataclass(frozen=True)
class FleetStack:
    """A fleet stack, validated, with each worker's stack file read and validated."""

    name: str
    cloud: str
    cluster: Cluster
    fleet: Fleet
    providers: dict[str, Any]
    workers: tuple[WorkerStack, ...]


def is_fleet(config: dict[str, Any]) -> bool:
    return isinstance(config, dict) and FLEET_KEY in config


def _validated(model, raw: Any, loc: tuple, problems: list[Problem]):
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems.extend(pydantic_problems(exc, model, loc))
        return None


def read_fleet(config: dict[str, Any], folder: Path, name: str, read_worker: Callable[[Path], StackConfig]) -> FleetStack:
    """Validate a fleet stack's raw `config:` and read each worker's stack file (relative to `folder`), or raise
    ConfigError with every problem. `read_worker(path) -> StackConfig`: how a worker's file is read and validated."""
    from gpupools.clouds.registry import NAMES as CLOUD_NAMES

    ours, providers, problems = split_namespaces(config)
    for key in sorted(set(ours) - set(FLEET_STACK_KEYS)):
        problems.append(Problem(key, f"a fleet stack (gpupools:fleet) takes only {', '.join(FLEET_STACK_KEYS)} and provider keys: GPU pools "
                                     f"and quotas belong to its workers' stacks, teams to fleet.teams"))
    cloud = ours.get("cloud")
    if cloud not in CLOUD_NAMES:
        problems.append(Problem("cloud", f"the manager's cloud: one of {', '.join(CLOUD_NAMES)}"))
    cluster = _validated(Cluster, ours.get("cluster"), ("cluster",), problems)
    fleet = _validated(Fleet, ours.get("fleet"), ("fleet",), problems)
    workers: list[WorkerStack] = []
    if fleet is not None:
        for i, worker in enumerate(fleet.workers):
            path = (folder / worker.file).resolve()
            try:
                workers.append(WorkerStack(worker, i, read_worker(path), path))
            except ConfigError as exc:
                # Whose stack file is wrong, then its own lines (their paths are the worker file's fields).
                problems += [Problem(f"fleet.workers[{i}].file", f"{worker.file}: {p.path + ': ' if p.path else ''}{p.message}")
                             for p in exc.problems]
    if problems:
        raise ConfigError(problems)
    assert cluster is not None and fleet is not None
    return FleetStack(name, cloud, cluster, fleet, providers, tuple(workers))


def worker_stack_problems(stack: StackConfig) -> list[Problem]:
    """What a stack that says it is a fleet worker (gpupools:fleetWorker) must also be: Kueue team queues, since the
    manager dispatches to the worker's own Kueue (a MultiKueue worker is "a standalone Kueue cluster", Kueue's
    concepts/multikueue.md), and its service account lives in Kueue's namespace."""
    if stack.fleet_worker is None:
        return []
    if stack.quotas != "kueue":
        engine = {"kai": "KAI Scheduler", "resourcequota": "ResourceQuotas"}.get(stack.quotas, stack.quotas)
        return [Problem("fleetWorker", f"a fleet worker runs Kueue, to which the manager dispatches; this stack keeps its quotas with {engine} "
                                       f"(quotas: {stack.quotas}): set quotas: kueue, or drop fleetWorker")]
    if not stack.teams:
        return [Problem("fleetWorker", "a fleet worker needs teams: their Kueue queues are what the manager dispatches to")]
    return []
