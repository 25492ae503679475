"""A whole gpupools stack as one component: cluster, GPU pools, GPU software, monitoring and team quotas."""

from __future__ import annotations

import importlib
import pulumi

from gpupools import monitoring
from gpupools.config import StackConfig
from gpupools.pools import PoolPlan, plan_pools
from gpupools.sharing import resolve_installer
from gpupools.software import software_plan
from gpupools.teams import team_objects  # team quotas (issue 5)

from . import monitoring as gpu_monitoring  # gpupools monitoring (issue 4)
from .base import Component
from .gpu_software import GpuSoftware
from .teams import TeamQuotas  # team quotas (issue 5)


def cloud_components(cloud: str):
    """Only the chosen cloud's SDK is imported."""
    return importlib.import_module(f"gpupools.components.{cloud}")


class GpuPlatform(Component):
    TYPE = "GpuPlatform"

    def __init__(self, name: str, stack: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, opts)
        module = cloud_components(stack.cloud)
        installer = resolve_installer(stack.cloud, stack.gpu_software.installer)
        self.plans: list[PoolPlan] = plan_pools(stack)
        self.cluster = module.build_cluster(stack, self.child())
        self.pools = [module.build_pool(plan, self.cluster, stack, installer, self.child()) for plan in self.plans]
        # --- monitoring (issue 4): scrape labels for the operator's exporter, then Prometheus, rules and dashboards.
        software = software_plan(stack, self.plans, monitoring.operator_service_monitor(stack))
        self.monitoring = None
        monitoring_plan = monitoring.monitoring_plan(stack, self.plans)
        if monitoring_plan is not None:
            self.monitoring = gpu_monitoring.GpuMonitoring("gpu-monitoring", monitoring_plan, self.cluster.kubernetes, self.child())
        # --- end monitoring
        self.software = GpuSoftware("gpu-software", software, self.cluster.kubernetes, self.child())
        # --- team quotas (issue 5): namespaces, GPU ResourceQuotas and pool admission policies per team.
        self.teams = None
        if stack.teams:
            self.teams = TeamQuotas("team-quotas", team_objects(stack, self.plans), self.cluster.kubernetes, self.child())
        # --- end team quotas
        self.register_outputs({"clusterName": self.cluster.name, "pools": [p.name for p in self.plans]})

    def pool_outputs(self) -> list[dict]:
        return [pool_capacity(plan) for plan in self.plans]


def pool_capacity(plan: PoolPlan) -> dict:
    return {
        "name": plan.name,
        "gpu": plan.hardware.gpu.name,
        "resource": plan.mechanism.resource,
        "perNode": plan.units_per_node,
        "maxNodes": plan.pool.max_nodes,
        "maxSchedulable": plan.max_units,
        "sharing": plan.mechanism.description,
    }
