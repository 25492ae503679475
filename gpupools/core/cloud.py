"""The questions a capability may ask the cloud a stack runs on: one object per cloud, resolved once per stack.

Each cloud is one pure module in gpupools/clouds/ (no SDK imports) that answers all of these; `stack.target` is the
stack's own, resolved from `gpupools:cloud` on first use (gpupools/clouds/registry.py registers the resolver). A
capability asks the object and never compares the cloud's name: tests/test_layout.py refuses such comparisons
outside gpupools/clouds/ and gpupools/deploy/ (an AST check).

The protocol lists what is asked through `stack.target` today; the modules document each answer and its source.
"""

from __future__ import annotations

from typing import Any, Protocol


class Cloud(Protocol):
    # Names
    SERVICE: str  # "EKS", "AKS", "GKE": how the plan and errors name the managed service
    KIND_WORD: str  # what a pool's machines are called: instance type, VM size, machine type, flavor

    # GPU software: who installs drivers and device plugins when the stack says `installer: auto`, and whether the
    # service installs them itself (`installer: cloud`).
    AUTO_INSTALLER: str
    OWN_GPU_SOFTWARE: bool
    # The service's own GPU software, where it has some: whether it shares GPUs itself, the name of its device plugin,
    # whether its driver sits on the host outside any NVIDIA runtime (the DCGM exporter mounts it), and the installers
    # it refuses, each with its reason.
    OWN_SHARING: bool
    CLOUD_DEVICE_PLUGIN: str | None
    CLOUD_DRIVER_ON_HOST: bool
    REFUSED_INSTALLERS: dict[str, str]
    # GPU metrics the service exports itself (GKE Autopilot's managed DCGM), in the plan's words; None: gpupools installs
    # the exporter (or the GPU Operator's runs).
    MANAGED_GPU_METRICS: str | None
    # Whether the cluster admits pods in the host's namespaces or with its filesystem (node agents such as Prometheus's
    # node exporter); GKE Autopilot refuses them. Beside it, a module may name `MANAGED_NAMESPACES`: namespaces the
    # service keeps to itself and where it refuses any object of the user's (GKE Autopilot's kube-system); none
    # where the module does not.
    ADMITS_HOST_AGENTS: bool
    # Whether a pool's own node limit (maxNodes) bounds what its nodes cost; on GKE Autopilot nothing but the team
    # quotas does, since Autopilot makes a node for every pod that asks.
    BOUNDS_POOL_NODES: bool
    # Team-quota engines (`gpupools:quotas`) the mode refuses, each with its reason.
    REFUSED_QUOTAS: dict[str, str]
    # The autoscaler the service runs itself where it fixes one (EKS Auto Mode's Karpenter); None: `OWN_AUTOSCALER` or
    # gpupools' choice.
    AUTOSCALER: str | None

    # Node readiness: whether a new node can start tainted with autoscalers that know the taint, and what the plan
    # says where it cannot.
    STARTUP_TAINTS: bool
    READINESS_NOTE: str

    # Fabric between nodes
    FABRIC_NAME: str
    FABRIC_RESOURCE: str | None
    FABRIC_ZONES: str  # "one": a fabric pool runs in one zone
    MULTI_NODE_ADVICE: str  # what the policy pack advises for a pool built for multi-node jobs that has no fabric
    TOPOLOGY_LEVELS: tuple[tuple[str, str], ...] | list[tuple[str, str]]

    # Managed modes: the cluster modes the service offers (`cluster.mode`), what a pool's pods select beside the pool
    # label, and what the managed mode refuses of a pool.
    CLUSTER_MODES: tuple[str, ...]

    # A pool's `node:` (gpupools.clouds.node_settings.NodeApi): the cloud's node API a pool may set fields of, None where
    # the mode takes none; `SYSTEM_NODE_API` the same for the system pool of a new cluster, where there is one.
    NODE_API: Any

    def pod_node_selector(self, pool: Any) -> dict[str, str]: ...
    # The planned pool as the mode's nodes carry it: the labels and taints the service puts on nodes it makes itself
    # (GKE Autopilot's), and what a pod selects to get one; the plan unchanged where gpupools makes the nodes.
    def managed_plan(self, plan: Any) -> Any: ...
    def managed_pool_problems(self, pool: Any, path: str, installer: str, cluster: Any) -> list: ...
    def fabric_refusal(self, pool: Any, cluster: Any) -> str | None: ...
    def extra_tolerations(self, plan: Any) -> list[dict]: ...
    # Where OWN_GPU_SOFTWARE: what serves a pool's GPUs with `installer: cloud`, and what a sharing change does.
    def own_mechanism(self, sharing: Any, hardware: Any) -> Any: ...
    def own_sharing_change(self) -> str: ...
    def driver_installer(self, installer: str, os: str | None) -> str | None: ...
    def node_template(self, plan: Any) -> Any: ...
    def provisioning_request_class(self, pool: Any) -> str | None: ...
    def capacity_flavor_labels(self, pool: Any, autoscaler: str) -> list[tuple[str, dict[str, str]]]: ...
    def capacity_lines(self, pool: Any, autoscaler: str) -> list[str]: ...
    def repair_facts(self, plan: Any, autoscaler: str) -> tuple[str, str]: ...
    def local_nvme_use(self, pool: Any, fabric: bool) -> Any: ...
    def fabric_pod(self, *args: Any, **kwargs: Any) -> dict: ...

    # Day two (gpupools.upgrades): what the cloud refuses of a pool's upgrade settings and of the stack's maintenance
    # window and exclusions, and what the next upgrade does to a pool, in the plan's words.
    def pool_upgrade_problems(self, pool: Any, policy: Any, path: str, autoscaler: str) -> list: ...
    def maintenance_problems(self, cluster: Any, upgrades: Any, window: Any, autoscaler: str) -> list: ...
    def upgrade_lines(self, pool: Any, policy: Any, window: Any, cluster: Any, autoscaler: str) -> list[str]: ...
