"""The stack config contract: typed models for everything under `config:` in a stack file, and how to read one.

Shape and range checks are pydantic's job and happen here; `gpupools.validation.stack` is the one entry point that
runs them together with the catalog- and cloud-aware checks.
"""

from __future__ import annotations

import functools
import ipaddress
from contextvars import ContextVar
import re
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, StringConstraints, Tag, model_validator
from pydantic_core import PydanticCustomError
from pydantic.alias_generators import to_camel

from gpupools.stack.errors import kind
from gpupools.stack.taints import (LABEL_VALUE_FORM, MAX_POOL_TAINTS, PATTERNS as TAINT_PATTERNS, QUALIFIED_NAME, PoolTaint, Toleration,
                                   distinct_taint_keys)
from gpupools.stack.targets import cloud_names, resolve_cloud

NAMESPACE = "gpupools"

# Patterns are ASCII on purpose: `\d` would accept full-width and other Unicode digits ("1.３３").
ZONE = r"^[a-z0-9][-a-z0-9]{0,62}$"
MIG_PROFILE = r"^[0-9]+g\.[0-9]+gb([+-][a-z.]+)?$"
CHART_VERSION = r"^v?[0-9]+\.[0-9]+\.[0-9]+$"
RELEASE_LABEL = r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
# A vGPU's memory: a share of the GPU ("25%") or an amount in MiB or GiB ("8Gi", "3000Mi"), as HAMi's
# nvidia.com/gpumem-percentage and nvidia.com/gpumem count it.
GPU_MEMORY = r"^([1-9][0-9]{0,2}%|[1-9][0-9]{0,6}(Mi|Gi))$"
SERVICE_ACCOUNT_EMAIL = r"^[a-z0-9][-a-z0-9]{0,61}[a-z0-9]@[a-z][-a-z0-9.]{0,99}\.gserviceaccount\.com$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
# An Azure Log Analytics workspace's resource ID, as AKS's Defender profile takes it.
LOG_ANALYTICS_WORKSPACE = (r"^/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-A-Za-z0-9_.()]{1,90}/providers/Microsoft\.OperationalInsights/"
                           r"workspaces/[A-Za-z0-9][-A-Za-z0-9]{2,62}$")
# A Gcore keypair's name (Gcore's OpenAPI spec, K8sClusterCreateV2Serializer.keypair).
KEYPAIR = r"^[a-zA-Z0-9][a-zA-Z 0-9._\-]{1,61}[a-zA-Z0-9._]$"
PATTERN_NAMES = {
    KEYPAIR: "a Gcore keypair name (3-63 letters, digits, spaces, '.', '_' or '-')",
    ZONE: "a zone name such as eu-central-1a, us-central1-a or \"1\"",
    DNS_LABEL: "a DNS label (lower-case letters, digits and '-', at most 63, starting and ending alphanumeric)",
    r"^1\.[0-9]{2}$": "a Kubernetes minor version such as \"1.35\"",
    MIG_PROFILE: "a MIG profile name such as 1g.10gb",
    CHART_VERSION: "a chart version such as v26.7.0",
    RELEASE_LABEL: "a label value (1-63 letters, digits, '-', '_' or '.', starting and ending alphanumeric)",
    GPU_MEMORY: "a GPU memory share such as 25% or an amount such as 8Gi or 3000Mi",
    SERVICE_ACCOUNT_EMAIL: "a Google service account e-mail such as gke-nodes@my-project.iam.gserviceaccount.com",
    LOG_ANALYTICS_WORKSPACE: "a Log Analytics workspace resource ID (/subscriptions/<id>/resourceGroups/<group>/providers/"
                             "Microsoft.OperationalInsights/workspaces/<name>)",
    **TAINT_PATTERNS,
}
DnsLabel = Annotated[str, StringConstraints(pattern=DNS_LABEL)]
LABEL_KEY = re.compile(QUALIFIED_NAME)
LABEL_VALUE = re.compile(LABEL_VALUE_FORM)
RESERVED_LABEL_PREFIXES = ("gpupools.io/", "nvidia.com/")

SharingMode = Literal["none", "time-slicing", "mps", "mig", "vgpu", "dra"]
# Who adds nodes to GPU pools. `auto`: Karpenter on a new EKS cluster, cluster-autoscaler on an existing one,
# the managed autoscaler on AKS and GKE (the only choice there).
Autoscaler = Literal["auto", "karpenter", "cluster-autoscaler", "none"]

Installer = Literal["auto", "gpu-operator", "device-plugin", "cloud"]

# How team quotas are enforced. `kueue`: workloads queue for their team's quota, teams lend unused quota to
# each other and take it back by preemption. `resourcequota`: a hard per-namespace limit, nothing queues. `kai`:
# KAI Scheduler schedules the teams' pods from hierarchical queues (departments, then teams) with over-quota
# weights and reclaim, and may give a pod a fraction of one GPU on pools that allow it.
QuotaEngine = Literal["kueue", "resourcequota", "kai"]
Priority = Literal["high", "normal", "low"]
# A team's quota in GPU units: more than any stack can schedule (MAX_POOLS pools of at most 1,000 nodes with at
# most 8 GPUs each, shared by at most 48), so the bound only refuses numbers that are typos.
MAX_TEAM_GPUS = 4_000_000
Units = Annotated[int, Field(ge=0, le=MAX_TEAM_GPUS, strict=True)]


def _branch(*tags: str):
    """Validate a union by the kind of value given, so an error speaks of that kind only, not of every branch.

    Tags are spelled `<...>`, which no key in a stack file can be; `pydantic_problems` leaves them out of paths.
    """
    def pick(value: Any) -> str:
        return tags[0] if isinstance(value, str) else tags[1] if isinstance(value, dict) and len(tags) > 1 else tags[-1]
    return Discriminator(pick)


# A number of units, or a word for "no limit" / "nothing".
UnitsOrWord = Annotated[Union[Annotated[Literal["all", "none"], Tag("<word>")], Annotated[Units, Tag("<units>")]], _branch("<word>", "<units>")]
# A total over the team's pools, or units per pool.
TeamUnits = Annotated[Union[Annotated[Units, Tag("<total>")], Annotated[dict[DnsLabel, Units], Field(min_length=1), Tag("<per-pool>")]],
                      _branch("<total>", "<per-pool>", "<total>")]

# CUDA MPS serves at most 48 clients per GPU (Volta and later) and GKE caps maxSharedClientsPerGpu at 48;
# one bound for every sharing mode keeps a stack portable between clouds.
MAX_REPLICAS = 48
# HAMi's deviceMemoryScaling above 1 lets pods' memory limits add up to more than the GPU has (the excess lives in
# host memory); beyond twice the GPU's memory most of every pod's memory would be host memory.
MAX_MEMORY_SCALING = 2

DEFAULT_GPU_OPERATOR_VERSION = "v26.7.0"
DEFAULT_DEVICE_PLUGIN_VERSION = "0.20.0"


def _zone_number(value: Any) -> Any:
    """AKS zones are numbers; `zones: [1, 2]` in YAML means the zones "1" and "2"."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


# Pools per stack. AKS allows 100 node pools per cluster (one of them the system pool) and EKS 30 managed node
# groups by default (EKS and AKS quota pages); a stack is one cluster, so a larger fleet is several stacks. A plan
# costs about 15 ms per pool, linearly (benchmarks/plan_scale.py plans 500, built past this cap).
# A ceiling above any fleet a stack can plan (100 pools of the costliest nodes), so a typo is caught, not a budget.
MAX_MONTHLY_USD = 1_000_000_000
MAX_POOLS = 100
# Teams per stack: each is a namespace, so Kubernetes' scalability threshold of 10,000 namespaces per cluster
# (kubernetes/community sig-scalability/configs-and-limits/thresholds.md) is the hard ceiling; 1,000 keeps a plan
# under a minute (about 40 ms per team) and leaves the cluster room for everything else.
MAX_TEAMS = 1_000
# Labels per pool. Kubernetes counts none (only the object's size), but every label is repeated in each node's
# object, in the autoscaler's node template and in the cloud's node pool. GCP allows 64 labels per resource
# (cloud.google.com/resource-manager/docs/labels-overview); the same bound on every cloud keeps a stack portable.
MAX_POOL_LABELS = 64


class Model(BaseModel):
    # strict: no coercion from strings ("4" for a number) or numbers (1 for true); no NaN or infinity anywhere.
    # defer_build: a model's validator is built when first used, so reading a stack builds StackConfig's (which
    # holds every model it nests) instead of one per model at import, a fifth of a second of every command.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, strict=True,
                              allow_inf_nan=False, defer_build=True)


class MigGroup(Model):
    """Some of a node's GPUs and the MIG instances each of them is split into; no profiles: MIG off, whole GPUs."""

    gpus: Annotated[int, Field(ge=1, le=16, strict=True)]
    profiles: dict[Annotated[str, StringConstraints(pattern=MIG_PROFILE)], Annotated[int, Field(ge=1, le=7, strict=True)]] = {}


class Sharing(Model):
    """How one pool's GPUs are shared: whole GPUs, time-slicing, MPS, MIG partitions, HAMi vGPUs, or (a preview) GPUs allocated by NVIDIA's DRA driver."""

    mode: SharingMode = "none"
    replicas: Annotated[int, Field(ge=2, le=MAX_REPLICAS, strict=True)] | None = None
    mig_profile: Annotated[str, StringConstraints(pattern=MIG_PROFILE)] | None = None
    # mig only, instead of migProfile: different MIG layouts on different GPUs of one node, in GPU index order.
    mig_layout: Annotated[list[MigGroup], Field(min_length=1, max_length=16)] | None = None
    # vgpu only: HAMi's deviceMemoryScaling, and the memory each vGPU pod gets unless it names its own.
    memory_scaling: Annotated[float, Field(gt=0, le=MAX_MEMORY_SCALING)] | None = None
    memory_per_pod: Annotated[str, StringConstraints(pattern=GPU_MEMORY)] | None = None
    # KAI Scheduler GPU fractions (quotas: kai, mode none): pods on the pool may ask for part of one GPU; the share a
    # Job from `gpupools workload` (and the landing check) asks for. KAI takes 0 < gpu-fraction < 1 (a whole GPU is
    # nvidia.com/gpu: 1): pkg/binder/plugins/gpusharing/gpu-request/gpu_request_validator.go at v0.17.0, lines 75-91.
    fraction: Annotated[float, Field(gt=0, lt=1)] | None = None
    # dra only (a preview, gpupools.fabric.dragpu): the DRA driver's Alpha sharing per claim, allowed with `preview: true`.
    preview: Annotated[bool, Field(strict=True)] | None = None
    dra_features: Annotated[list[Literal["dynamic-mig", "time-slicing", "mps"]], Field(min_length=1, max_length=3)] | None = None


# Where a pool's nodes come from, in the order the pool falls back through (see docs/capacity.md). Words name the
# hourly kinds and GKE's Dynamic Workload Scheduler modes; a mapping names a reservation or DWS options.
CapacityWord = Literal["on-demand", "spot", "flex-start", "queued", "any-reservation"]
# GKE's maxRunDuration is a duration in seconds; flex-start nodes live at most seven days (GKE flex-start docs).
RUN_DURATION = r"^[1-9][0-9]{0,6}[smhd]$"
PATTERN_NAMES[RUN_DURATION] = "a duration such as 3600s, 90m, 24h or 7d"


class Reservation(Model):
    """Capacity bought ahead: an EC2 On-Demand Capacity Reservation or Capacity Block (by id, or by tags with
    Karpenter), a GKE reservation (by name), or an Azure capacity reservation group (by resource ID)."""

    id: Annotated[str, StringConstraints(min_length=1, max_length=400)] | None = None
    tags: Annotated[dict[Annotated[str, StringConstraints(min_length=1, max_length=128)], Annotated[str, StringConstraints(min_length=1, max_length=256)]],
                    Field(min_length=1, max_length=20)] | None = None
    owner_id: Annotated[str, StringConstraints(pattern=r"^[0-9]{12}$")] | None = None
    # EKS: what the id is; a Capacity Block changes the node group and ends at a fixed time.
    kind: Literal["odcr", "capacity-block"] | None = None
    # The zones the reservation holds capacity in; the pool's nodes are pinned there.
    zones: Annotated[list[Annotated[str, BeforeValidator(_zone_number), StringConstraints(pattern=ZONE)]], Field(min_length=1, max_length=3)] | None = None
    # How many nodes of the pool's instance type the reservation holds (for coverage, quotas and the idle cost).
    nodes: Annotated[int, Field(ge=1, le=1000, strict=True)]


class RunOptions(Model):
    """GKE flex-start and queued provisioning: how long a node may live before GKE removes it."""

    max_run_duration: Annotated[str, StringConstraints(pattern=RUN_DURATION)] | None = None


class CapacityOption(Model):
    """One entry of a pool's capacity list given as a mapping: exactly one of its keys."""

    reservation: Reservation | None = None
    flex_start: RunOptions | None = None
    queued: RunOptions | None = None

    @model_validator(mode="after")
    def _one_key(self) -> "CapacityOption":
        given = [alias for attr, alias in (("reservation", "reservation"), ("flex_start", "flexStart"), ("queued", "queued"))
                 if getattr(self, attr) is not None]
        if len(given) != 1:
            raise PydanticCustomError("capacity_option", "an entry names exactly one of reservation, flexStart or queued (got {given})",
                                      {"given": ", ".join(given) or "none"})
        return self


CapacityEntry = Annotated[Union[Annotated[CapacityWord, Tag("<word>")], Annotated[CapacityOption, Tag("<option>")]], _branch("<word>", "<option>")]


# Instance types of one pool: EKS CreateNodegroup takes 0-20 instanceTypes beside a launch template (botocore eks
# model, CreateNodegroupRequest.instanceTypes), which a Karpenter NodePool's requirement then repeats.
MAX_POOL_INSTANCE_TYPES = 20


def _distinct(values: list[str]) -> list[str]:
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise PydanticCustomError("instance_types", "lists {names} more than once", {"names": ", ".join(twice)})
    return values


class _AlsoListed(str):
    """An instanceType given beside instanceTypes: refused by the field's own validator, so the error names the field."""


def _not_beside_a_list(value: Any) -> Any:
    if isinstance(value, _AlsoListed):
        raise PydanticCustomError("instance_types", "give instanceType or instanceTypes, not both")
    return value


# Day two: when and how node upgrades, node image updates and GPU driver upgrades may take a pool's nodes away
# (docs/upgrades.md). Days and times are UTC, the only zone Karpenter's budget schedules take and the one GKE reports.
Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
WEEKDAYS: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
CLOCK = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
DAY = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"
# How long a drain waits for running jobs: minutes or hours, at most 30 days.
WAIT = r"^[1-9][0-9]{0,2}[mh]$"
PATTERN_NAMES[CLOCK] = "a UTC time of day such as \"02:00\""
PATTERN_NAMES[DAY] = "a date such as 2026-12-24"
PATTERN_NAMES[WAIT] = "a duration in minutes or hours such as 30m or 24h"
# What a pool runs decides how its upgrades go: `training` drains one node at a time inside the window and waits for
# running jobs; `inference` surges a new node before draining an old one, at any time the cloud chooses in the window.
PoolKind = Literal["training", "inference"]
ExclusionScope = Literal["no-upgrades", "no-minor-upgrades", "no-minor-or-node-upgrades"]


def _distinct_days(values: list[str]) -> list[str]:
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise PydanticCustomError("days", "lists {names} more than once", {"names": ", ".join(twice)})
    return values


class MaintenanceWindow(Model):
    """When the cloud may upgrade nodes: on these days, from `start` (UTC) for `hours`."""

    days: Annotated[list[Weekday], Field(min_length=1, max_length=7), AfterValidator(_distinct_days)] = Field(default_factory=lambda: ["sat"])
    start: Annotated[str, StringConstraints(pattern=CLOCK)] = "00:00"
    hours: Annotated[int, Field(ge=1, le=24, strict=True)] = 12


class MaintenanceExclusion(Model):
    """Days on which the cloud starts no upgrade (GKE maintenance exclusion, AKS notAllowedDates), first to last, UTC."""

    name: DnsLabel
    start: Annotated[str, StringConstraints(pattern=DAY)]
    end: Annotated[str, StringConstraints(pattern=DAY)]
    # GKE: what the exclusion holds back (AKS holds back everything on those dates).
    scope: ExclusionScope = "no-minor-or-node-upgrades"


class Upgrades(Model):
    """The cluster's maintenance window and exclusions (gpupools:upgrades)."""

    window: MaintenanceWindow = Field(default_factory=MaintenanceWindow)
    exclusions: Annotated[list[MaintenanceExclusion], Field(max_length=20)] = Field(default_factory=list)


class PoolUpgrades(Model):
    """How a pool's nodes are upgraded: its kind's defaults, and what the stack overrides."""

    kind: PoolKind = "training"
    # Nodes drained at once, and new nodes started beside the old ones first.
    max_unavailable: Annotated[int, Field(ge=0, le=100, strict=True)] | None = None
    max_surge: Annotated[int, Field(ge=0, le=100, strict=True)] | None = None
    # How long draining a node waits for its running jobs before the cloud gives up (or evicts them; see docs).
    wait_for_jobs: Annotated[str, StringConstraints(pattern=WAIT)] | None = None


PoolUpgradesEntry = Annotated[Union[Annotated[PoolKind, Tag("<word>")], Annotated[PoolUpgrades, Tag("<options>")]], _branch("<word>", "<options>")]


class Pool(Model):
    name: DnsLabel
    # EKS: a pool whose nodes may be any of several instance types, of one GPU model (docs/stack-config.md); the pool's
    # `instance_type` is then the first listed.
    instance_types: Annotated[list[Annotated[str, StringConstraints(min_length=1)]],
                              Field(min_length=2, max_length=MAX_POOL_INSTANCE_TYPES), AfterValidator(_distinct)] | None = None
    instance_type: Annotated[str, BeforeValidator(_not_beside_a_list), StringConstraints(min_length=1)]
    gpu: str | None = None
    gpu_count: Annotated[int, Field(ge=1, strict=True)] | None = None
    min_nodes: Annotated[int, Field(ge=0, strict=True)] = 0
    max_nodes: Annotated[int, Field(ge=1, strict=True)]
    spot: Annotated[bool, Field(strict=True)] = False
    disk_size_gb: Annotated[int, Field(ge=20, le=16384, strict=True)] | None = None
    os: Literal["al2023", "bottlerocket"] | None = None
    labels: Annotated[dict[str, str], Field(max_length=MAX_POOL_LABELS)] = Field(default_factory=dict)
    # Taints beside the GPU taint (docs/pools.md, "Taints"); teams that use the pool tolerate them (Team.tolerations).
    taints: Annotated[list[PoolTaint], Field(max_length=MAX_POOL_TAINTS), AfterValidator(distinct_taint_keys)] = Field(default_factory=list)
    sharing: Sharing | None = None
    # Availability zones the pool's nodes may start in: EKS zone names (eu-central-1a), AKS zone numbers ("1"),
    # GKE zones (us-central1-a). Unset: every zone of the cluster that can run the pool (see each cloud).
    zones: Annotated[list[Annotated[str, BeforeValidator(_zone_number), StringConstraints(pattern=ZONE)]], Field(min_length=1, max_length=16)] | None = None
    # Where nodes come from, in fallback order; unset: spot or on-demand as `spot` says.
    capacity: Annotated[list[CapacityEntry], Field(min_length=1, max_length=8)] | None = None
    # The network between nodes for jobs that span them (EFA, GPUDirect, InfiniBand): `auto` turns it on for whole-GPU
    # pools of instance types built for multi-node work, `on` for any instance type that has one, `none` never.
    fabric: Literal["auto", "on", "none"] = "auto"
    # The topology level a multi-node job of the pool must fit in (Kueue's required topology); unset: Kueue packs the
    # job as close as it can without waiting for it. Names per cloud: see gpupools.fabric.
    topology_level: Annotated[str, StringConstraints(pattern=DNS_LABEL)] | None = None
    # Replace (or reboot) nodes whose GPU or node health checks fail: EKS node-group repair, GKE auto-repair.
    # Unset: on. AKS repairs every node of a cluster and Karpenter every node it made: one switch each, not per pool.
    auto_repair: Annotated[bool, Field(strict=True)] | None = None
    # Day two: `training` (the default) or `inference`, or a mapping with the kind and what to override (docs/upgrades.md).
    upgrades: PoolUpgradesEntry | None = None
    # Gcore virtual-machine flavors: the pool's server-group policy (how its VMs share hosts). Unset: soft-anti-affinity.
    placement: Literal["affinity", "anti-affinity", "soft-anti-affinity"] | None = None
    # GKE: how the pool's nodes come to be. `node-pool` (unset): one GKE node pool of one capacity kind; `compute-class`:
    # a ComputeClass whose priorities are the capacity list in order, node pools auto-created by GKE as work asks.
    provisioning: Literal["node-pool", "compute-class"] | None = None
    # Fields of the cloud's own node API, in its spelling, passed through to the pool's resource under gpupools' own
    # settings; checked against the cloud's model (gpupools.clouds.node_settings, docs/node-settings.md).
    node: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _first_listed(cls, data: Any) -> Any:
        """With instanceTypes alone, instanceType is the first listed (a placeholder when the list itself is wrong, which
        its own error reports); beside it, instanceType is refused by its validator."""
        if not isinstance(data, dict):
            return data
        many_key = next((k for k in ("instanceTypes", "instance_types") if k in data), None)
        one_key = next((k for k in ("instanceType", "instance_type") if k in data), None)
        if many_key is None:
            return data
        if one_key is not None:
            return {**data, one_key: _AlsoListed(data[one_key])} if isinstance(data[one_key], str) else data
        many = data[many_key]
        first = many[0] if isinstance(many, list) and many and isinstance(many[0], str) and many[0] else "-"
        return {**data, "instanceType": first}


@functools.lru_cache(maxsize=1024)
def _cidr(value: str) -> str:
    """An IPv4 or IPv6 network in CIDR notation with no host bits set, as cloud APIs take it (cached, ipaddress is slow; a refusal raises, never kept)."""
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise PydanticCustomError("cidr", "not a CIDR block such as 203.0.113.0/24 (with no host bits set)") from None
    if "/" not in value:
        raise PydanticCustomError("cidr", "not a CIDR block such as 203.0.113.0/24: the prefix length is missing")
    return str(network)


Cidr = Annotated[str, AfterValidator(_cidr)]

# The retention periods CloudWatch Logs accepts (PutRetentionPolicy retentionInDays); any other number is refused
# by the API, so it is refused here first.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)


def _retention(value: int) -> int:
    if value not in LOG_RETENTION_DAYS:
        raise PydanticCustomError("retention", "not a CloudWatch Logs retention period; allowed: {allowed}",
                                  {"allowed": ", ".join(map(str, LOG_RETENTION_DAYS))})
    return value


# The control-plane log types EKS can send to CloudWatch (CreateCluster logging.clusterLogging.types).
EKS_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
EksLogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
# Who may reach the Kubernetes API: `private` only from inside the network, `restricted` from `authorizedCidrs`
# (and the network), `public` from anywhere (a deliberate opt-out the policy pack flags unless excepted).
EndpointAccess = Literal["private", "restricted", "public"]
# GKE's release channels (UNSPECIFIED, no channel, is what the policy pack refuses).
GKE_RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE", "EXTENDED")


# Who runs the GPU nodes' lifecycle. `standard`: gpupools' own node pools (node groups, Karpenter NodePools, agent pools)
# and GPU software. `auto-mode`: EKS Auto Mode, Karpenter NodePools on an eks.amazonaws.com NodeClass whose node image
# brings driver and device plugin. `node-auto-provisioning`: AKS node auto-provisioning, Karpenter NodePools on an
# AKSNodeClass. `autopilot`: GKE Autopilot, GPU pods served by Autopilot's own GPU nodes through node selectors. Each
# cloud takes the modes it has (its CLUSTER_MODES).
ClusterMode = Literal["standard", "auto-mode", "node-auto-provisioning", "autopilot"]


class SystemPool(Model):
    """The size of the CPU pool a new cluster gets for its add-ons (CoreDNS, the GPU Operator's controllers, Kueue,
    Prometheus): each cloud's default where a key is unset (docs/stack-config.md); each cloud checks its bounds."""

    # EKS instance type, AKS VM size, GKE machine type, Gcore flavor; a CPU type (GPU types are refused).
    machine_type: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None
    # At least one node: the cluster's add-ons have nowhere else to run.
    min_nodes: Annotated[int, Field(ge=1, strict=True)] | None = None
    max_nodes: Annotated[int, Field(ge=1, strict=True)] | None = None
    # AKS, GKE: fields of the cloud's node API passed through, as a GPU pool's `node:` (docs/node-settings.md).
    node: dict[str, Any] | None = None


class Cluster(Model):
    """The cluster the pools join; the hardening fields are what a new cluster gets (see docs/pools.md, "Cluster controls").

    Fields that apply to one cloud only default to None and are refused on the others; each cloud module resolves
    None to its default, so a stack that says nothing gets every control on.
    """

    name: Annotated[str, StringConstraints(pattern=DNS_LABEL, max_length=40)]
    create: Annotated[bool, Field(strict=True)] = True
    kubernetes_version: Annotated[str, StringConstraints(pattern=r"^1\.[0-9]{2}$")] | None = None
    resource_group: Annotated[str, StringConstraints(min_length=1, max_length=90)] | None = None
    location: Annotated[str, StringConstraints(min_length=1)] | None = None
    subnet_ids: list[Annotated[str, StringConstraints(min_length=1)]] | None = None
    # Every cloud: the API endpoint. Unset: `restricted` when authorizedCidrs are given, otherwise `private`.
    endpoint_access: EndpointAccess | None = None
    authorized_cidrs: Annotated[list[Cidr], Field(max_length=100)] | None = None
    # EKS: Secrets envelope-encrypted with a KMS key the stack creates; control-plane logs to CloudWatch.
    secrets_encryption: Annotated[bool, Field(strict=True)] | None = None
    control_plane_logs: Annotated[list[EksLogType], Field(max_length=len(EKS_LOG_TYPES))] | None = None
    log_retention_days: Annotated[int, Field(strict=True), AfterValidator(_retention)] | None = None
    # EKS: `API` (access entries only) or `API_AND_CONFIG_MAP` (also the aws-auth ConfigMap).
    authentication_mode: Literal["API", "API_AND_CONFIG_MAP"] | None = None
    # EKS: vpc-cni, coredns and kube-proxy as EKS managed add-ons, at the versions EKS names for the cluster's.
    managed_addons: Annotated[bool, Field(strict=True)] | None = None
    # AKS: local accounts (the static cluster-admin kubeconfig) besides Entra ID logins with Azure RBAC; off by default.
    local_accounts: Annotated[bool, Field(strict=True)] | None = None
    # AKS: the Azure Policy add-on (Gatekeeper with Azure's policy definitions); optional, off by default.
    azure_policy: Annotated[bool, Field(strict=True)] | None = None
    # AKS: Microsoft Defender for Containers' security monitoring, reporting to this Log Analytics workspace; optional.
    defender_workspace_id: Annotated[str, StringConstraints(pattern=LOG_ANALYTICS_WORKSPACE)] | None = None
    # AKS and GKE: Kubernetes NetworkPolicy enforced by the cluster's dataplane (Cilium on both); on by default.
    network_policy: Annotated[bool, Field(strict=True)] | None = None
    # GKE: nodes without public IPs (egress through a Cloud NAT the stack creates); on by default.
    private_nodes: Annotated[bool, Field(strict=True)] | None = None
    # GKE: the release channel that upgrades the cluster; REGULAR by default.
    release_channel: Literal[GKE_RELEASE_CHANNELS] | None = None  # type: ignore[valid-type]
    # GKE: a production cluster gets deletion protection, and is labelled so the policy pack can tell.
    production: Annotated[bool, Field(strict=True)] | None = None
    # GKE: Binary Authorization enforcing the project's policy; optional, off by default.
    binary_authorization: Annotated[bool, Field(strict=True)] | None = None
    # GKE: the IAM service account the nodes run as, when the platform team keeps its own; otherwise gpupools creates one
    # with the least-privilege node roles. Never the Compute Engine default account (refused by the cloud's checks).
    node_service_account: Annotated[str, StringConstraints(pattern=SERVICE_ACCOUNT_EMAIL, max_length=254)] | None = None
    # Gcore: the SSH keypair (by name, in the project) every node of a new cluster gets; Gcore requires one.
    keypair: Annotated[str, StringConstraints(pattern=KEYPAIR)] | None = None
    # Who runs the GPU nodes (ClusterMode); unset: standard. Each cloud takes its own managed mode only.
    mode: ClusterMode | None = None
    # A new cluster's system pool: machine type and size (each cloud's default where unset) and its node settings.
    system_pool: SystemPool | None = None

    @property
    def managed_mode(self) -> str:
        return self.mode or "standard"

    @property
    def endpoint_mode(self) -> str:
        return self.endpoint_access or ("restricted" if self.authorized_cidrs else "private")


# An NVIDIA data-center driver release, as the GPU Operator's driver image tags it (e.g. 580.95.05).
DRIVER_VERSION = r"^[1-9][0-9]{2}\.[0-9]{1,3}(\.[0-9]{1,3})?$"
PATTERN_NAMES[DRIVER_VERSION] = "an NVIDIA driver version such as 580.95.05"


class GpuSoftware(Model):
    installer: Installer = "auto"
    mig_strategy: Literal["mixed", "single"] = "mixed"
    version: Annotated[str, StringConstraints(pattern=CHART_VERSION)] | None = None
    # The GPU driver the GPU Operator installs, pinned so it changes only when the stack says so.
    driver_version: Annotated[str, StringConstraints(pattern=DRIVER_VERSION)] | None = None
    # GPU allocation through NVIDIA's DRA driver (gpupools.fabric.computedomain.gpu_allocation_problems): refused while a
    # device plugin serves every pool's GPUs; the DRA driver serves ComputeDomains only.
    dra_gpu_allocation: Annotated[bool, Field(strict=True)] = False
    # Who installs NVIDIA's DRA driver for mode dra; `gpu-cluster` is refused (gpupools.fabric.dragpu.dra_driver_problems).
    dra_driver: Literal["chart", "gpu-cluster"] = "chart"


class Smtp(Model):
    """The mail server Alertmanager sends team e-mail through; the password, if any, kept as a secret."""

    smarthost: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9.-]+:[0-9]{1,5}$")]
    from_: Annotated[str, StringConstraints(pattern=EMAIL, max_length=254)] = Field(alias="from")
    username: Annotated[str, StringConstraints(min_length=1, max_length=254)] | None = None
    password: Annotated[Any, AfterValidator(lambda v: _secret_text(v, "password"))] | None = None


# How to keep a credential secret, said where one is given in plaintext. A stack file's values are set with
# `pulumi config set --secret --path KEY`; a program that constructs the components (gpupools_components, any language)
# passes a secret Output instead, and sets this to COMPONENT_SECRETS while its inputs are validated.
STACK_FILE_SECRETS = "stack-file"
COMPONENT_SECRETS = "component"
SECRET_ADVICE: ContextVar[str] = ContextVar("secret_advice", default=STACK_FILE_SECRETS)
_PASS_AS_SECRET = "pass it as a secret Output (pulumi.secret(...) in the program that constructs the component)"


def _secret_text(value: Any, what: str) -> Any:
    if isinstance(value, (SecretPlaceholder, SecretText)):
        return value
    how = _PASS_AS_SECRET if SECRET_ADVICE.get() == COMPONENT_SECRETS else "pulumi config set --secret --path ..."
    raise PydanticCustomError("secret_url", f"the {what} must be kept as a secret ({how})")


class Idle(Model):
    utilization_below_percent: Annotated[float, Field(gt=0, lt=100)] = 5
    for_hours: Annotated[float, Field(gt=0, le=24 * 30)] = 4


class Monitoring(Model):
    enabled: Annotated[bool, Field(strict=True)] = True
    prometheus: Literal["install", "existing"] = "install"
    # The `release` label value the existing Prometheus selects ServiceMonitors and rules by.
    release_label: Annotated[str, StringConstraints(pattern=RELEASE_LABEL)] = "kube-prometheus-stack"
    grafana: Annotated[bool, Field(strict=True)] = True
    idle: Idle = Field(default_factory=Idle)
    # For teams with e-mail alerts.
    smtp: Smtp | None = None


def _secret_url(value: Any) -> Any:
    """A webhook URL kept as a Pulumi secret: `[secret]` offline, a `SecretText` when the engine decrypted it.

    A webhook URL is a credential (anyone holding it can post to the channel), so a plaintext one in the stack file is
    refused, and the value is never echoed in the message.
    """
    if isinstance(value, SecretPlaceholder):
        return value
    if not isinstance(value, str):
        raise PydanticCustomError("secret_url", "expected an https URL kept as a secret, got {kind}", {"kind": kind(value)})
    parts = re.match(r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[^\s]*)?$", value)
    if not parts:
        raise PydanticCustomError("secret_url", "is not an https URL (the value is not shown: it is meant to be a secret)")
    if not isinstance(value, SecretText):
        # `{field}` becomes the value's own key where the error is reported (`pydantic_problems`): the team's, the
        # platform's health alerts', whichever holds it.
        if SECRET_ADVICE.get() == COMPONENT_SECRETS:
            raise PydanticCustomError("secret_url", f"is in plaintext; {_PASS_AS_SECRET}")
        raise PydanticCustomError("secret_url", "is in plaintext; keep it as a secret: pulumi config set --secret --path '{field}' URL")
    return value


SecretUrl = Annotated[Any, AfterValidator(_secret_url)]
EMAIL = r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$"


class SlackReceiver(Model):
    """Slack's incoming webhook, which names its channel; `channel` overrides it where the webhook allows."""

    webhook: SecretUrl
    channel: Annotated[str, StringConstraints(pattern=r"^[#@][a-z0-9][a-z0-9._-]{0,79}$")] | None = None


class TeamAlerts(Model):
    """Where a team hears about its GPUs: a Slack channel, e-mail addresses, or both."""

    slack: SlackReceiver | None = None
    email: Annotated[list[Annotated[str, StringConstraints(pattern=EMAIL, max_length=254)]], Field(min_length=1, max_length=10)] | None = None

    @model_validator(mode="after")
    def _some_channel(self) -> "TeamAlerts":
        if self.slack is None and self.email is None:
            raise PydanticCustomError("secret_url", "names no channel; give slack, email or both")
        return self


# A queue's over-quota weight is relative to its siblings'; beyond 1,000 to 1 the smaller share rounds to nothing.
MAX_OVER_QUOTA_WEIGHT = 1000


class Team(Model):
    """A team: a namespace, a share of the GPU pools, and (with Kueue) how it borrows, lends and ranks.

    `gpus` is either a total number of units, split over the team's pools in proportion to what each offers at
    maxNodes, or a mapping of pool name to units, which also says which pools the team uses.
    """

    name: DnsLabel
    namespace: DnsLabel | None = None
    gpus: TeamUnits
    pools: Annotated[list[DnsLabel], Field(min_length=1)] | None = None
    # Units per pool beyond its own quota the team may take from others' unused quota: all, none or a number.
    borrow: UnitsOrWord = "all"
    # Units per pool of its own quota the team lets others use while it is idle: all, none or a number.
    lend: UnitsOrWord = "all"
    # The priority its workloads get by default, and the highest they may ask for.
    priority: Priority = "normal"
    # Where Alertmanager tells the team about GPUs it holds idle.
    alerts: TeamAlerts | None = None
    # KAI: the team's share of GPUs left over once every queue has its quota, against its siblings' weights.
    over_quota_weight: Annotated[int, Field(ge=0, le=MAX_OVER_QUOTA_WEIGHT, strict=True)] | None = None
    # The pools' own taints the team's workloads tolerate (docs/teams.md, "Tolerations"): a pool with a taint no
    # toleration matches takes none of the team's jobs. At most one per taint of every pool.
    tolerations: Annotated[list[Toleration], Field(max_length=MAX_POOLS * MAX_POOL_TAINTS)] = Field(default_factory=list)

    @property
    def namespace_name(self) -> str:
        return self.namespace or self.name

    @property
    def pool_names(self) -> list[str] | None:
        """The pools the team may use; None means every pool of the stack."""
        if isinstance(self.gpus, dict):
            return list(self.gpus)
        return self.pools


class Department(Model):
    """A parent queue of KAI Scheduler (quotas: kai): teams that share a quota, and how the department as a whole borrows
    and ranks against the others. `gpus` unset: the sum of its teams' quotas."""

    name: DnsLabel
    teams: Annotated[list[DnsLabel], Field(min_length=1, max_length=MAX_TEAMS)]
    gpus: Units | None = None
    borrow: UnitsOrWord = "all"
    priority: Priority = "normal"
    over_quota_weight: Annotated[int, Field(ge=0, le=MAX_OVER_QUOTA_WEIGHT, strict=True)] | None = None


class Health(Model):
    """GPU node lifecycle: the readiness gate on new GPU nodes, and who hears about broken GPUs."""

    readiness_gate: Annotated[bool, Field(strict=True)] = True
    # Where the platform team hears about GPU faults and GPU nodes that never become ready (not the pods' teams).
    alerts: TeamAlerts | None = None


class Budget(Model):
    """The stack's own ceiling on its GPU pools at their maximum size (maxNodes), which the `fleet-budget` policy
    enforces beside any cap the organisation's policy config sets (the tighter one wins). Unset: no ceiling."""

    max_gpus: Annotated[int, Field(ge=0, le=MAX_TEAM_GPUS)] | None = None
    # Per month of 730 hours at on-demand list price (the catalog's), spot pools priced on-demand.
    max_monthly_usd: Annotated[float, Field(ge=0, le=MAX_MONTHLY_USD)] | None = None


class FleetWorker(Model):
    """`gpupools:fleetWorker`: the fleets (by their MultiKueue origin) whose managers may dispatch to this stack."""

    fleets: Annotated[list[Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")]], Field(min_length=1, max_length=20),
                      AfterValidator(_distinct)]


# How a cloud's name becomes its Cloud object (gpupools.core.cloud). The stack layer sits below the clouds and cannot
# import them (imports run one way); gpupools.clouds.registry registers its resolver here when it is imported.
def _known_cloud(value: Any) -> Any:
    """`gpupools:cloud`: one of the registered clouds (gpupools.stack.targets), said as a Literal would say it."""
    names = cloud_names()
    if isinstance(value, str) and value in names:
        return value
    expected = " or ".join([", ".join(repr(n) for n in names[:-1]), repr(names[-1])] if len(names) > 1 else [repr(names[0])])
    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})


class StackConfig(Model):
    """Everything a stack file says under the `gpupools:` namespace, plus the provider settings beside it."""

    cloud: Annotated[str, BeforeValidator(_known_cloud)]  # a registered cloud's name (gpupools.clouds.registry)
    cluster: Cluster
    sharing: Sharing = Field(default_factory=Sharing)
    pools: Annotated[list[Pool], Field(min_length=1, max_length=MAX_POOLS)]
    gpu_software: GpuSoftware = Field(default_factory=GpuSoftware)
    monitoring: Monitoring = Field(default_factory=Monitoring)
    teams: Annotated[list[Team], Field(max_length=MAX_TEAMS)] = Field(default_factory=list)
    departments: Annotated[list[Department], Field(max_length=MAX_TEAMS)] = Field(default_factory=list)
    quotas: QuotaEngine = "kueue"
    autoscaler: Autoscaler = "auto"
    health: Health = Field(default_factory=Health)
    budget: Budget = Field(default_factory=Budget)
    upgrades: Upgrades = Field(default_factory=Upgrades)
    # A worker of gpupools fleets (gpupools.fleet): mints the service-account kubeconfig the fleets' MultiKueue managers
    # read (stack output multikueueKubeconfig, a secret) and installs JobSet.
    fleet_worker: FleetWorker | None = None
    providers: dict[str, Any] = Field(default_factory=dict)  # e.g. {"aws:region": "eu-central-1"}

    @functools.cached_property
    def target(self) -> Any:
        """The cloud the stack runs on, as the one object every capability asks (`gpupools.core.cloud.Cloud`), resolved
        from `cloud` and `cluster.mode` once per stack. Nothing outside gpupools/clouds compares the cloud's name."""
        return resolve_cloud(self.cloud, self.cluster.managed_mode)

    def pool(self, name: str) -> Pool:
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(name)

    def sharing_of(self, pool: Pool) -> Sharing:
        """A pool's own sharing wins; otherwise the stack-wide default applies."""
        return pool.sharing if pool.sharing is not None else self.sharing

    @property
    def gpu_software_version(self) -> str:
        return self.gpu_software.version or DEFAULT_GPU_OPERATOR_VERSION


class SecretPlaceholder(str):
    """Stands in for an encrypted stack value when planning offline."""

    def __new__(cls) -> "SecretPlaceholder":
        return super().__new__(cls, "[secret]")


class SecretText(str):
    """A secret value the Pulumi engine decrypted: the real text, marked so it goes out only as a Pulumi secret."""

    def __repr__(self) -> str:
        return "SecretText('[secret]')"
