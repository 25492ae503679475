"""The components' arguments: the stack file's keys, typed for Pulumi's schema.

Pulumi's analyzer (pulumi 3.272, pulumi/provider/experimental/analyzer.py) infers the package schema from these
classes: each annotated key becomes an input named as written here (`analyze_type`, lines 372-428: snake_case becomes
camelCase by util.py `camel_case`, so `from_` becomes `from`; a TypedDict's `NotRequired` keys are optional), a nested
class becomes an object type, `list[...]` and `dict[str, ...]` arrays and maps, `Any` `pulumi.json#/Any`
(`analyze_property`, lines 430-705), and the string literal under a key its description (`get_docstring`, lines
707-780, which parses the class's source). It reads the annotations as objects, so this module must not use `from
__future__ import annotations` (a string annotation is neither a type nor a ForwardRef to it).

What the analyzer leaves out: `Literal`, `Annotated` (a TypeError) and unions other than Optional ("Union types are
not supported", line 626). Enumerated keys are therefore strings whose description lists the allowed words, and the
keys a stack file gives as either a number or a word or a mapping (`teams[].gpus`, `borrow`, `lend`,
`pools[].capacity[]`) are `Any`. Every key is checked by gpupools' own validation (gpupools/stack/config.py and
gpupools/validation), which answers a wrong value with the same one-line error a stack file gets.

Values are plain, not Inputs: gpupools plans pools, quotas and software from them before it creates anything.
"""

from typing import Any, NotRequired, TypedDict


class MigGroup(TypedDict):
    """Some of a node's GPUs and the MIG instances each of them is split into."""

    gpus: int
    """How many of the node's GPUs the group holds, 1-16."""
    profiles: NotRequired[dict[str, int]]
    """MIG profile to instances on each GPU of the group (e.g. 1g.23gb: 7); none: MIG off, whole GPUs."""


class Sharing(TypedDict):
    """How a pool's GPUs are shared: whole GPUs, time-slicing, MPS, MIG slices or HAMi vGPUs."""

    mode: NotRequired[str]
    """none (default), time-slicing, mps, mig, vgpu, or dra (a preview: GPUs from NVIDIA's DRA driver)."""
    replicas: NotRequired[int]
    """Workloads per GPU, 2-48; required for time-slicing, mps and vgpu."""
    mig_profile: NotRequired[str]
    """mig: the profile every GPU is split into, one of the pool's GPU (e.g. 3g.40gb)."""
    mig_layout: NotRequired[list[MigGroup]]
    """mig, instead of migProfile: groups of the node's GPUs in index order, each with its own MIG profiles."""
    memory_scaling: NotRequired[float]
    """vgpu: HAMi's deviceMemoryScaling, above 0 and at most 2 (default 1)."""
    memory_per_pod: NotRequired[str]
    """vgpu: the memory of each vGPU, a share such as 25% or an amount such as 8Gi."""
    fraction: NotRequired[float]
    """KAI Scheduler (quotas kai, mode none): pods may ask for part of one GPU; the share, above 0 and below 1, Jobs from gpupools workload ask for."""
    preview: NotRequired[bool]
    """mode dra: allow the DRA driver's Alpha sharing per claim (draFeatures); the plan marks the pool's lines "preview"."""
    dra_features: NotRequired[list[str]]
    """mode dra with preview: dynamic-mig, time-slicing and/or mps per claim (the DRA driver's Alpha feature gates)."""


class SystemPool(TypedDict):
    """A new cluster's CPU pool for its add-ons; each key left out keeps the cloud's default."""

    machine_type: NotRequired[str]
    """A CPU machine type of the cloud: EKS instance type (t3.large), AKS VM size (Standard_D4ds_v5), GKE machine type (e2-standard-4), Gcore flavor (g1-standard-4-8)."""
    min_nodes: NotRequired[int]
    """Nodes it always keeps, 1 or more (default 1)."""
    max_nodes: NotRequired[int]
    """The most nodes it grows to, at least minNodes (default 3); at most 1,000 (200 on Gcore)."""
    node: NotRequired[dict[str, Any]]
    """azure, gcp: fields of its AKS AgentPool or GKE NodePool, in that API's spelling (docs/node-settings.md)."""


class Cluster(TypedDict):
    """The cluster the pools join: a new one gpupools creates and hardens, or one that exists, found by name."""

    name: str
    """Cluster name: a DNS label of at most 40 characters."""
    create: NotRequired[bool]
    """true (default): create the cluster; false: add to an existing cluster of this name."""
    kubernetes_version: NotRequired[str]
    """Control plane and pool version, "1.NN", one the service offers; default the newest (GKE: the channel's)."""
    resource_group: NotRequired[str]
    """azure (required): the AKS cluster's resource group, which must exist."""
    location: NotRequired[str]
    """gcp (required): the GKE cluster's region or zone."""
    subnet_ids: NotRequired[list[str]]
    """aws: subnets for the cluster and pools (at least 2); default a new VPC."""
    endpoint_access: NotRequired[str]
    """Who reaches the Kubernetes API: private, restricted or public; default restricted with authorizedCidrs, else private."""
    authorized_cidrs: NotRequired[list[str]]
    """Networks (CIDR blocks, at most 100) allowed to reach the API endpoint."""
    secrets_encryption: NotRequired[bool]
    """aws: KMS envelope encryption of Secrets with a key the stack creates (default true)."""
    control_plane_logs: NotRequired[list[str]]
    """aws: control-plane log types sent to CloudWatch (api, audit, authenticator, controllerManager, scheduler)."""
    log_retention_days: NotRequired[int]
    """aws: retention of the control-plane logs, a CloudWatch Logs retention period in days (default 90)."""
    authentication_mode: NotRequired[str]
    """aws: API (default, access entries only) or API_AND_CONFIG_MAP (also the aws-auth ConfigMap)."""
    managed_addons: NotRequired[bool]
    """aws: vpc-cni, kube-proxy and CoreDNS as EKS managed add-ons (default true)."""
    local_accounts: NotRequired[bool]
    """azure: keep AKS local accounts beside Entra ID (default false)."""
    azure_policy: NotRequired[bool]
    """azure: the Azure Policy add-on (default false)."""
    defender_workspace_id: NotRequired[str]
    """azure: the Log Analytics workspace resource ID Defender for Containers reports to."""
    network_policy: NotRequired[bool]
    """azure, gcp: NetworkPolicy enforcement by the cluster's dataplane (default true)."""
    private_nodes: NotRequired[bool]
    """gcp: nodes without public IPs, egress through a Cloud NAT (default true)."""
    release_channel: NotRequired[str]
    """gcp: the GKE release channel, RAPID, REGULAR (default), STABLE or EXTENDED."""
    production: NotRequired[bool]
    """gcp: deletion protection on and the label gpupools-production=true (default false)."""
    binary_authorization: NotRequired[bool]
    """gcp: enforce the project's Binary Authorization policy (default false)."""
    node_service_account: NotRequired[str]
    """gcp: the IAM service account e-mail every node runs as; default one gpupools creates with least-privilege roles."""
    keypair: NotRequired[str]
    """gcore, new cluster (required there): the name of the project's SSH keypair every node gets."""
    mode: NotRequired[str]
    """Who runs the GPU nodes: standard (default, gpupools' own pools), auto-mode (aws: EKS Auto Mode), node-auto-provisioning (azure: AKS node auto-provisioning) or autopilot (gcp: GKE Autopilot)."""
    system_pool: NotRequired[SystemPool]
    """A new cluster's system pool: machine type and size (not on an existing cluster, EKS Auto Mode or GKE Autopilot), and on azure and gcp its node settings."""


class Taint(TypedDict):
    """A taint a pool's nodes carry beside the GPU taint."""

    key: str
    """A Kubernetes qualified name, such as sku or example.com/dedicated; not gpupools', Kubernetes' or the cloud's own."""
    value: NotRequired[str]
    """A label value (default empty)."""
    effect: str
    """NoSchedule, PreferNoSchedule or NoExecute."""


class Pool(TypedDict):
    """One GPU pool: its instance type, size, sharing, zones, capacity and fabric."""

    name: str
    """Pool name: a DNS label, unique in the stack, not system."""
    instance_types: NotRequired[list[str]]
    """EKS only, instead of instanceType: 2-20 instance types of one GPU model the pool's nodes may be."""
    instance_type: NotRequired[str]
    """AWS instance type, Azure VM size, GCP machine type or Gcore flavor from gpupools' catalog; required unless instanceTypes."""
    gpu: NotRequired[str]
    """gcp N1 only (required there): the accelerator, nvidia-tesla-t4, nvidia-tesla-v100 or nvidia-tesla-p100."""
    gpu_count: NotRequired[int]
    """gcp N1 only: GPUs per node, as GCP offers them (default 1)."""
    min_nodes: NotRequired[int]
    """Nodes the pool keeps, 0 or more (default 0: it scales to zero)."""
    max_nodes: int
    """The autoscaling ceiling, at least 1 and at least minNodes."""
    spot: NotRequired[bool]
    """Spot capacity: EKS SPOT, AKS Spot priority, GKE Spot VMs (default false)."""
    disk_size_gb: NotRequired[int]
    """Node disk in GB, 20-16384; default the cloud's (EKS: the instance class's)."""
    os: NotRequired[str]
    """aws only: the EKS AMI family, al2023 (default) or bottlerocket."""
    labels: NotRequired[dict[str, str]]
    """Extra node labels (at most 64, none under gpupools.io/ or nvidia.com/)."""
    taints: NotRequired[list[Taint]]
    """Taints beside the GPU taint (at most 8, one per key); only teams that tolerate them land on the pool."""
    sharing: NotRequired[Sharing]
    """The pool's own sharing; default the stack-wide sharing."""
    zones: NotRequired[list[str]]
    """Zones the nodes may start in (EKS eu-central-1a, AKS "1", GKE us-central1-a); default every zone that can run the pool."""
    capacity: NotRequired[list[Any]]
    """Where nodes come from, in fallback order (1-8): on-demand, spot, any-reservation, flex-start, queued, or an object with one of reservation, flexStart, queued."""
    fabric: NotRequired[str]
    """The multi-node fabric (EFA, GPUDirect, InfiniBand): auto (default), on or none."""
    topology_level: NotRequired[str]
    """Fabric pools: the Kueue topology level a multi-node job must fit in."""
    auto_repair: NotRequired[bool]
    """false turns GPU node repair off for the pool (default on)."""
    upgrades: NotRequired[Any]
    """What the pool runs, which decides how its nodes are upgraded: training (default) or inference, or an object with kind, maxUnavailable, maxSurge and waitForJobs."""
    placement: NotRequired[str]
    """gcore virtual-machine flavors only: the server-group policy, affinity, anti-affinity or soft-anti-affinity (default)."""
    provisioning: NotRequired[str]
    """gcp: node-pool (default, one GKE node pool) or compute-class (a ComputeClass whose priorities are the capacity list in order)."""
    node: NotRequired[dict[str, Any]]
    """azure, gcp: fields of the pool's AKS AgentPool or GKE NodePool in the provider's spelling (maxPods, nodeConfig, ...), merged under gpupools' own."""


class GpuSoftware(TypedDict):
    """Who installs the GPU driver, container toolkit and device plugin, and at which chart version."""

    installer: NotRequired[str]
    """auto (default), gpu-operator, device-plugin or cloud."""
    mig_strategy: NotRequired[str]
    """MIG resource naming through the GPU Operator: mixed (default) or single."""
    version: NotRequired[str]
    """The chart version pin (default v26.7.0 for the operator, 0.20.0 for the device plugin)."""
    driver_version: NotRequired[str]
    """The GPU driver the GPU Operator installs, e.g. 580.95.05 (AKS; GKE with installer gpu-operator)."""
    dra_gpu_allocation: NotRequired[bool]
    """GPU allocation through NVIDIA's DRA driver: refused (a device plugin serves every pool's GPUs); default false."""
    dra_driver: NotRequired[str]
    """Who installs NVIDIA's DRA driver for pools of sharing mode dra: chart (default); gpu-cluster (the GPU Operator's GPUCluster) is refused beside the ClusterPolicy gpupools installs."""


class Idle(TypedDict):
    """When a GPU counts as idle for the GpuAllocatedButIdle alert."""

    utilization_below_percent: NotRequired[float]
    """A GPU below this utilization is idle: above 0, below 100 (default 5)."""
    for_hours: NotRequired[float]
    """... for this long before the alert fires: above 0, at most 720 (default 4)."""


class Smtp(TypedDict):
    """The mail server Alertmanager sends e-mail alerts through."""

    smarthost: str
    """The mail server as host:port."""
    from_: str
    """The sender's e-mail address."""
    username: NotRequired[str]
    """The SMTP login."""
    password: NotRequired[str]
    """The SMTP password; must be a Pulumi secret (plaintext is refused)."""


class MonitoringSettings(TypedDict):
    """DCGM exporter, Prometheus, Grafana, GPU alerts and the idle rule."""

    enabled: NotRequired[bool]
    """false deploys no monitoring (default true)."""
    prometheus: NotRequired[str]
    """install (default: kube-prometheus-stack) or existing (rules, ServiceMonitors and dashboards for a Prometheus you run)."""
    release_label: NotRequired[str]
    """With existing: the release label your Prometheus selects ServiceMonitors and rules by (default kube-prometheus-stack)."""
    grafana: NotRequired[bool]
    """Dashboards, and with install Grafana itself (default true)."""
    idle: NotRequired[Idle]
    """When a GPU counts as idle."""
    smtp: NotRequired[Smtp]
    """The mail server for e-mail alerts."""


class Slack(TypedDict):
    """A Slack incoming webhook."""

    webhook: str
    """The webhook URL (https); must be a Pulumi secret (plaintext is refused)."""
    channel: NotRequired[str]
    """#channel or @user the webhook posts to, where the webhook allows; default the webhook's own."""


class Alerts(TypedDict):
    """Where alerts go: a Slack channel, e-mail addresses, or both."""

    slack: NotRequired[Slack]
    """A Slack incoming webhook."""
    email: NotRequired[list[str]]
    """1-10 e-mail addresses (needs monitoring.smtp)."""


class Toleration(TypedDict):
    """A team's toleration of a pool's own taint, as Kubernetes takes it."""

    key: str
    """The taint's key (required)."""
    operator: NotRequired[str]
    """Equal (default) or Exists (every value of the key)."""
    value: NotRequired[str]
    """The taint's value; none with Exists."""
    effect: NotRequired[str]
    """NoSchedule, PreferNoSchedule or NoExecute; default every effect."""


class Team(TypedDict):
    """A team: a namespace, a share of the GPU pools, and with Kueue how it borrows, lends and ranks."""

    name: str
    """The team: a DNS label, unique; also its ClusterQueue and LocalQueue name."""
    namespace: NotRequired[str]
    """Where its workloads run: a DNS label, not a system or gpupools namespace (default the name)."""
    gpus: Any
    """The nominal quota in units: a number split over the team's pools by what each offers at maxNodes, or an object of pool name to units."""
    pools: NotRequired[list[str]]
    """With a total gpus only: the pools the total is split over (default every pool)."""
    borrow: NotRequired[Any]
    """Kueue: units per pool the team may use beyond its quota: all (default), none or a number."""
    lend: NotRequired[Any]
    """Kueue: units per pool of its quota others may use: all (default), none or a number."""
    priority: NotRequired[str]
    """Kueue: the workloads' default and highest priority, high, normal (default) or low."""
    alerts: NotRequired[Alerts]
    """Where the team's idle and queue alerts go."""
    over_quota_weight: NotRequired[int]
    """KAI: the team's share of idle GPUs against its siblings of the same priority, 0-1000 (default 1)."""
    tolerations: NotRequired[list[Toleration]]
    """The pools' own taints the team's workloads tolerate; gpupools workload puts them in the pod spec."""


class Department(TypedDict):
    """KAI Scheduler: a parent queue over teams, with its own quota, limit, priority and over-quota weight."""

    name: str
    """The department's queue: a DNS label, unique, not a team's name."""
    teams: list[str]
    """The teams under it, each in one department at most."""
    gpus: NotRequired[int]
    """What its teams are guaranteed together, at least their sum (default their sum)."""
    borrow: NotRequired[Any]
    """GPUs beyond its quota the department may hold while others leave them idle: all (default), none or a number."""
    priority: NotRequired[str]
    """Its queue priority against the other departments: high, normal (default) or low."""
    over_quota_weight: NotRequired[int]
    """Its share of idle GPUs against departments of the same priority, 0-1000 (default 1)."""


class Health(TypedDict):
    """GPU node lifecycle: the readiness gate on new GPU nodes, and who hears about broken GPUs."""

    readiness_gate: NotRequired[bool]
    """EKS: new GPU nodes take no pods until the GPU Operator has validated them (default true)."""
    alerts: NotRequired[Alerts]
    """Where the platform team hears about GPU faults and GPU nodes that never become ready."""


class Budget(TypedDict):
    """The stack's own ceiling on its GPU pools at maxNodes, which the fleet-budget policy enforces."""

    max_gpus: NotRequired[int]
    """The most GPUs all GPU pools together may scale to, 0 or more."""
    max_monthly_usd: NotRequired[float]
    """The most the GPU pools may cost a month at maxNodes (on-demand list price, 730 hours), 0 or more."""


class FleetWorker(TypedDict):
    """This stack as a worker of gpupools fleets (docs/fleet.md)."""

    fleets: list[str]
    """The MultiKueue origins of the fleets whose managers may dispatch here, 1-20."""


class MaintenanceWindow(TypedDict):
    """When the cloud may upgrade nodes, in UTC."""

    days: NotRequired[list[str]]
    """The days the window opens: mon ... sun, each once (default [sat])."""
    start: NotRequired[str]
    """When it opens, "HH:MM" UTC (default "00:00")."""
    hours: NotRequired[int]
    """How long it stays open, 1-24 (default 12)."""


class MaintenanceExclusion(TypedDict):
    """Days on which the cloud starts no upgrade (GKE maintenance exclusion, AKS notAllowedDates)."""

    name: str
    """The exclusion's name: a DNS label, unique."""
    start: str
    """First day without upgrades, YYYY-MM-DD (UTC)."""
    end: str
    """Last day without upgrades, YYYY-MM-DD, not before start."""
    scope: NotRequired[str]
    """GKE: no-upgrades, no-minor-upgrades or no-minor-or-node-upgrades (default)."""


class Upgrades(TypedDict):
    """The cluster's maintenance window and exclusions."""

    window: NotRequired[MaintenanceWindow]
    """When upgrades may run (default Saturday 00:00 UTC for 12 hours)."""
    exclusions: NotRequired[list[MaintenanceExclusion]]
    """Dates on which no upgrade starts, at most 20 (GKE and AKS)."""


class GpuPlatformArgs(TypedDict):
    """A whole gpupools stack: the keys of a stack file's gpupools: namespace."""

    cloud: str
    """aws, azure, gcp or gcore."""
    cluster: Cluster
    """The cluster the pools join."""
    sharing: NotRequired[Sharing]
    """The default sharing of pools without their own (default whole GPUs)."""
    pools: list[Pool]
    """The GPU pools, 1-100."""
    gpu_software: NotRequired[GpuSoftware]
    """Who installs GPU software."""
    monitoring: NotRequired[MonitoringSettings]
    """GPU monitoring and alerts (default on)."""
    teams: NotRequired[list[Team]]
    """Team namespaces and GPU quotas."""
    departments: NotRequired[list[Department]]
    """KAI only: parent queues over teams."""
    quotas: NotRequired[str]
    """How team quotas are kept: kueue (default), resourcequota or kai (KAI Scheduler)."""
    autoscaler: NotRequired[str]
    """EKS only: auto (default), karpenter, cluster-autoscaler or none."""
    health: NotRequired[Health]
    """GPU node lifecycle."""
    budget: NotRequired[Budget]
    """The stack's own ceiling on GPUs and monthly cost (default none)."""
    upgrades: NotRequired[Upgrades]
    """When upgrades, node images and GPU driver upgrades may run (docs/upgrades.md)."""
    fleet_worker: NotRequired[FleetWorker]
    """A worker of gpupools fleets: the service account and token kubeconfig a MultiKueue manager reads, and JobSet."""
