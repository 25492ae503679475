"""The public components, for programs in any Pulumi language: each validates its inputs as a stack file and builds
what gpupools' own components build for that stack.

`GpuPlatform` is gpupools' GpuPlatform itself, constructed from a stack file's keys. The others do one part of it on
a cluster that already runs (found by name, as `cluster.create: false` does): `GpuPool` one GPU pool, `TeamQueues`
the team namespaces, queues and quotas, `Monitoring` GPU monitoring and alerts. They build the cluster's handle
and that part's component, the same resources a stack with those keys gets from the Python program.

Outputs are the annotated attributes (Pulumi's analyzer reads them, analyzer.py `analyze_component`); this module
must not use `from __future__ import annotations` either.
"""

import re
from dataclasses import replace
from typing import Any, NotRequired, TypedDict

import pulumi

from gpupools.autoscaling.choice import resolve_autoscaler
from gpupools.deploy import platform
from gpupools.deploy.base import Component
from gpupools.deploy.monitoring import GpuMonitoring
from gpupools.deploy.teams import TeamQuotas
from gpupools.monitoring import plan as monitoring
from gpupools.pools.planning import plan_pools
from gpupools.core.sharing import resolve_installer
from gpupools.queues.engine import quota_plan, team_rows
from gpupools.stack.config import StackConfig
from gpupools.stack.errors import ConfigError, Problem

from gpupools_components.args import (Cluster, GpuPlatformArgs, GpuSoftware, Health, MonitoringSettings, Pool, Sharing,
                                      Team)
from gpupools_components.inputs import stack_inputs, validate, validated

# Who adds nodes is the cluster's business, installed once per cluster (GpuPlatform does it); a pool added on its own
# can name the autoscaler that runs there but not ask for one its NodePool would need installed with it.
KARPENTER = "karpenter"


class GpuPlatform(platform.GpuPlatform):
    """A whole gpupools stack: the cluster (new or existing), GPU pools that scale to zero, GPU software, GPU sharing,
    team queues with quotas, and monitoring with the idle-GPU alerts; its inputs are the keys of a stack file's
    gpupools: namespace."""

    cluster_name: pulumi.Output[str]
    """The Kubernetes cluster's name."""
    kubeconfig: pulumi.Output[str]
    """A kubeconfig for the cluster (a secret)."""
    pool_names: pulumi.Output[list[str]]
    """The GPU pools, in stack order."""
    pool_details: pulumi.Output[list[dict[str, Any]]]
    """Per pool: GPU, resource, units per node and at maxNodes, sharing, scale-up, fabric, capacity, readiness and repair."""
    team_details: pulumi.Output[list[dict[str, Any]]]
    """Per team: namespace, queue, priority, quota per pool, borrowing and lending."""
    landing_verdicts: pulumi.Output[list[dict[str, Any]]]
    """Whether each team's job lands on a GPU from its queue, with the reason where not."""

    def __init__(self, name: str, args: GpuPlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, validated(args, GpuPlatformArgs), opts)
        self.cluster_name = self.cluster.name
        self.kubeconfig = self.cluster.kubeconfig
        self.pool_names = [plan.name for plan in self.plans]
        self.pool_details = self.pool_outputs()
        self.team_details = self.team_outputs()
        self.landing_verdicts = self.verdicts


def on_existing_cluster(config: dict[str, Any], secret: set[str], component: str, fixed: dict[str, Any] | None = None) -> StackConfig:
    """Validate the inputs of a component that joins a running cluster (as `stack_inputs` gives them): `cluster.create`
    is false unless given, and true is refused, since a new cluster comes with everything GpuPlatform builds. Any
    other value of it is left for validation to refuse."""
    cluster = config.get("cluster")
    if isinstance(cluster, dict) and cluster.get("create") is True:
        raise ConfigError([Problem("cluster.create", f"a {component} joins a cluster that runs already (create: false, the default here); "
                                                     f"GpuPlatform creates a cluster with its pools")])
    if isinstance(cluster, dict) and "create" not in cluster:
        config = {**config, "cluster": {**cluster, "create": False}}
    return validate(config, secret, fixed or {})


class GpuPoolArgs(TypedDict):
    """One GPU pool on a cluster that runs already."""

    cloud: str
    """aws, azure or gcp."""
    cluster: Cluster
    """The running cluster the pool joins, found by name (create: false, the default here)."""
    pool: Pool
    """The pool, as an entry of a stack file's pools."""
    sharing: NotRequired[Sharing]
    """The sharing the pool gets unless it names its own (default whole GPUs)."""
    gpu_software: NotRequired[GpuSoftware]
    """Who installs the cluster's GPU software, which decides the pool's labels and sharing config (default auto)."""
    autoscaler: NotRequired[str]
    """EKS only: the autoscaler running on the cluster, cluster-autoscaler (default) or none; Karpenter pools come with GpuPlatform."""
    health: NotRequired[Health]
    """GPU node lifecycle: whether new nodes start behind the readiness gate."""


class GpuPool(Component):
    """One GPU pool on a cluster that runs already: the node group (EKS), agent pool (AKS) or node pool (GKE) with
    gpupools' GPU taint, labels, sharing, zones, capacity and repair. The cluster's GPU software and autoscaler are
    not installed here (GpuPlatform installs them)."""

    TYPE = "GpuPool"

    cluster_name: pulumi.Output[str]
    """The cluster's name."""
    pool_details: pulumi.Output[dict[str, Any]]
    """GPU, resource, units per node and at maxNodes, sharing."""

    def __init__(self, name: str, args: GpuPoolArgs, opts: pulumi.ResourceOptions | None = None):
        config, secret = stack_inputs(args, GpuPoolArgs)
        if config.get("autoscaler") == KARPENTER:
            raise ConfigError([Problem("autoscaler", "a GpuPool joins the cluster's running autoscaler: cluster-autoscaler or none; "
                                                     "Karpenter pools come with GpuPlatform, which installs Karpenter")])
        if "pool" in config:  # the stack's one pool
            config["pools"] = [config.pop("pool")]
            secret = {"pools" if key == "pool" else key for key in secret}
        try:
            stack = on_existing_cluster(config, secret, self.TYPE, {"monitoring": {"enabled": False}})
        except ConfigError as exc:  # the stack's one pool is this component's `pool`
            raise ConfigError([replace(p, path=re.sub(r"^pools(\[0\])?(?=$|[.\[])", "pool", p.path)) for p in exc.problems]) from None
        super().__init__(name, opts)
        module = platform.cloud_components(stack.cloud)
        cluster = module.build_cluster(stack, self.child())
        plan = plan_pools(stack)[0]
        module.build_pool(plan, cluster, stack, resolve_installer(stack.target, stack.gpu_software.installer), None, self.child())
        self.cluster_name = cluster.name
        self.pool_details = platform.pool_capacity(plan)
        self.register_outputs({"clusterName": cluster.name, "poolDetails": self.pool_details})


class TeamQueuesArgs(TypedDict):
    """Team namespaces, queues and GPU quotas on a cluster that runs already."""

    cloud: str
    """aws, azure or gcp."""
    cluster: Cluster
    """The running cluster, found by name (create: false, the default here)."""
    pools: list[Pool]
    """The cluster's GPU pools, as a stack file lists them: each team's quota is in units of these pools."""
    sharing: NotRequired[Sharing]
    """The sharing of pools without their own, which decides their units (default whole GPUs)."""
    teams: list[Team]
    """The teams, their namespaces and quotas."""
    quotas: NotRequired[str]
    """How quotas are kept: kueue (default) or resourcequota."""
    autoscaler: NotRequired[str]
    """EKS only: the autoscaler on the cluster, which decides the capacity kinds Kueue tells apart (default cluster-autoscaler)."""
    monitoring: NotRequired[MonitoringSettings]
    """Whether a Prometheus scrapes Kueue (a ServiceMonitor selected by its release label; default on)."""


class TeamQueues(Component):
    """Team namespaces and GPU quotas on a cluster that runs already: Kueue with a ClusterQueue and LocalQueue per team,
    borrowing, lending and priorities, or hard ResourceQuotas."""

    TYPE = "TeamQueues"

    engine: pulumi.Output[str]
    """What keeps the quotas: kueue or resourcequota."""
    namespaces: pulumi.Output[list[str]]
    """The team namespaces."""
    team_details: pulumi.Output[list[dict[str, Any]]]
    """Per team: namespace, queue, priority, quota per pool, borrowing and lending."""

    def __init__(self, name: str, args: TeamQueuesArgs, opts: pulumi.ResourceOptions | None = None):
        config, secret = stack_inputs(args, TeamQueuesArgs)
        if config.get("teams") in (None, []):  # the provider refuses a missing one; a program in Python may leave it out
            raise ConfigError([Problem("teams", "required, but missing" if config.get("teams") is None else
                                                f"at least one team is required (a {self.TYPE} without teams deploys nothing)")])
        stack = on_existing_cluster(config, secret, self.TYPE)
        super().__init__(name, opts)
        cluster = platform.cloud_components(stack.cloud).build_cluster(stack, self.child())
        plans = plan_pools(stack)
        quotas = quota_plan(stack, plans, monitoring.service_monitor_labels(stack),
                            resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler))
        assert quotas is not None  # teams are required, and there is one
        TeamQuotas("team-quotas", quotas, cluster.kubernetes, [], self.child())
        self.engine = quotas.engine
        self.namespaces = [obj["metadata"]["name"] for obj in quotas.objects if obj["kind"] == "Namespace"]
        self.team_details = team_rows(stack, plans)
        self.register_outputs({"engine": self.engine, "namespaces": self.namespaces})


class MonitoringArgs(TypedDict):
    """GPU monitoring and alerts on a cluster that runs already."""

    cloud: str
    """aws, azure or gcp."""
    cluster: Cluster
    """The running cluster, found by name (create: false, the default here)."""
    pools: list[Pool]
    """The cluster's GPU pools, as a stack file lists them: the dashboards, prices and alerts are per pool."""
    sharing: NotRequired[Sharing]
    """The sharing of pools without their own (default whole GPUs)."""
    monitoring: NotRequired[MonitoringSettings]
    """What to deploy: Prometheus or rules for yours, Grafana, the idle rule, the mail server."""
    teams: NotRequired[list[Team]]
    """The teams whose alerts Alertmanager routes to their Slack channel or e-mail."""
    health: NotRequired[Health]
    """Where the platform team hears about GPU faults."""


class Monitoring(Component):
    """GPU monitoring on a cluster that runs already: DCGM exporter, kube-prometheus-stack (or rules and ServiceMonitors
    for your Prometheus), Grafana dashboards, GPU alerts routed to the owning team, and the idle-GPU rule."""

    TYPE = "Monitoring"

    namespace: pulumi.Output[str]
    """The monitoring namespace."""
    releases: pulumi.Output[list[str]]
    """The Helm releases installed."""
    grafana_admin_password: pulumi.Output[str]
    """Grafana's admin password, where Grafana is installed (a secret)."""

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        stack = on_existing_cluster(*stack_inputs(args, MonitoringArgs), self.TYPE)
        plan = monitoring.monitoring_plan(stack, plan_pools(stack))
        if plan is None:
            raise ConfigError([Problem("monitoring.enabled", "false leaves a Monitoring component nothing to deploy; leave it out or true")])
        super().__init__(name, opts)
        cluster = platform.cloud_components(stack.cloud).build_cluster(stack, self.child())
        deployed = GpuMonitoring("gpu-monitoring", plan, cluster.kubernetes, self.child())
        self.namespace = monitoring.NAMESPACE
        self.releases = [release.name for release in plan.releases]
        self.grafana_admin_password = deployed.grafana_password
        self.register_outputs({"namespace": self.namespace, "releases": self.releases})


COMPONENTS = [GpuPlatform, GpuPool, TeamQueues, Monitoring]
# Pulumi's analyzer takes a component's docstring, stripped, as its description (analyzer.py `analyze_component`): one
# paragraph without the source's line breaks and indentation reads right in every language's SDK docs.
for _component in COMPONENTS:
    _component.__doc__ = " ".join((_component.__doc__ or "").split())
