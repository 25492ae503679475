"""A whole gpupools stack as one component: cluster, GPU pools, GPU software, monitoring and team quotas."""

from __future__ import annotations

import importlib
import pulumi

from gpupools.monitoring import plan as monitoring
from gpupools.stack.config import StackConfig
from gpupools.core.pools import PoolPlan
from gpupools.pools.planning import capacity_report, plan_pools
from gpupools.core.sharing import resolve_installer
from gpupools.pools.software import driver_plan, software_plan
from gpupools.autoscaling.choice import resolve_autoscaler
from gpupools.autoscaling.scaleup import scale_ups
from gpupools.health.readiness import readiness_summary
from gpupools.health.repair import pool_repair
from gpupools.queues.engine import quota_plan, team_rows
from gpupools.queues.kai import fraction_sharing
from gpupools.queues.kueue import topology_aware, topology_enforced, topology_guarantee
from gpupools.landing.check import landing_check
from gpupools.fabric.plan import catalog_fabric, fabric_row, job_fabrics, plan_fabrics
from gpupools.fabric.software import rdma_pools, with_fabric_releases
from gpupools.fabric.dragpu import with_dra

from gpupools.deploy import monitoring as gpu_monitoring
from gpupools.deploy.base import Component
from gpupools.deploy.gpu_software import GpuSoftware
from gpupools.deploy.teams import TeamQuotas


def cloud_components(cloud: str):
    """Only the chosen cloud's SDK is imported."""
    return importlib.import_module(f"gpupools.deploy.{cloud}")


class GpuPlatform(Component):
    TYPE = "GpuPlatform"

    def __init__(self, name: str, stack: StackConfig, opts: pulumi.ResourceOptions | None = None):
        plans = plan_pools(stack)
        # Whether each team's job lands: all of it a stack output, the jobs that cannot land recorded on the component for
        # the policy pack (team-jobs-land), which is all the pack needs.
        landing = [verdict.as_json(chain=False) for verdict in landing_check(stack, plans)]
        # The stack's own budget, for fleet-budget, which judges registered resources only.
        budget = stack.budget.model_dump(by_alias=True, exclude_none=True)
        props: dict = {"landing": [v for v in landing if not v["lands"]], **({"budget": budget} if budget else {})}
        fractions = fraction_sharing(stack, plans)
        if fractions:
            # Who shares the GPUs KAI splits, for the policy pack (kai-fractions-isolated).
            props["fractions"] = fractions
        super().__init__(name, opts, props=props)
        # After registration: the engine sets each recorded prop as an output attribute of the component.
        self.verdicts = landing
        module = cloud_components(stack.cloud)
        installer = resolve_installer(stack.target, stack.gpu_software.installer)
        self.stack = stack
        self.plans: list[PoolPlan] = plans
        self.cluster = module.build_cluster(stack, self.child())
        # Prometheus, rules and dashboards first: the autoscaler's ServiceMonitor needs the CRDs they bring.
        self.monitoring = None
        monitoring_plan = monitoring.monitoring_plan(stack, self.plans)
        if monitoring_plan is not None:
            self.monitoring = gpu_monitoring.GpuMonitoring("gpu-monitoring", monitoring_plan, self.cluster.kubernetes, self.child())
        scrape = monitoring.service_monitor_labels(stack)
        self.autoscaler = module.build_autoscaler(stack, self.cluster, self.plans, scrape,
                                                  self.monitoring.releases if self.monitoring and scrape else [], self.child())
        self.pools = [module.build_pool(plan, self.cluster, stack, installer, self.autoscaler, self.child()) for plan in self.plans]
        software = with_fabric_releases(software_plan(stack, self.plans, monitoring.operator_service_monitor(stack), rdma_pools(stack, self.plans)),
                                        list(job_fabrics(stack, self.plans).values()), stack.fleet_worker is not None)
        software = with_dra(software, stack, self.plans)  # rack-scale pools: ComputeDomains; DRA pools: GPUs
        self.software = GpuSoftware("gpu-software", software, self.cluster.kubernetes, self.child())
        self.teams = None
        quotas = quota_plan(stack, self.plans, scrape, resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler))
        if quotas is not None:
            crds = self.monitoring.releases if self.monitoring and scrape else []
            self.teams = TeamQuotas("team-quotas", quotas, self.cluster.kubernetes, crds, self.child())
        self.fleet_access = None
        if stack.fleet_worker is not None:
            from gpupools.deploy.fleet import FleetWorkerAccess

            # After the team queues: their release makes Kueue's namespace, where the service account lives.
            self.fleet_access = FleetWorkerAccess("fleet-access", self.cluster, [self.teams] if self.teams else [], self.child())
        self.register_outputs({"clusterName": self.cluster.name, "pools": [p.name for p in self.plans]})

    def team_outputs(self) -> list[dict]:
        return team_rows(self.stack, self.plans)

    def pool_outputs(self) -> list[dict]:
        verdicts = scale_ups(self.stack, self.plans)
        autoscaler = resolve_autoscaler(self.stack.target, self.stack.cluster.create, self.stack.autoscaler)
        fabrics = plan_fabrics(self.stack, self.plans)
        return [{**pool_capacity(plan), "scaleUp": verdict.summary, "autoscaler": verdict.autoscaler,
                 **fabric_row(fabrics.get(plan.name), catalog_fabric(self.stack.cloud, plan.pool.instance_type).local_nvme_gb,
                              topology_aware(self.stack, plan, fabrics.get(plan.name)),
                              topology_enforced(self.stack, plan, fabrics.get(plan.name))),
                 "topology": topology_guarantee(self.stack, plan, fabrics.get(plan.name), autoscaler),
                 "capacitySources": capacity_report(self.stack, plan, autoscaler),
                 "ready": readiness_summary(self.stack, plan, autoscaler), "repair": pool_repair(self.stack, plan, autoscaler).as_json(),
                 "driver": driver_plan(self.stack, plan).as_json()}
                for plan, verdict in zip(self.plans, verdicts)]


def pool_capacity(plan: PoolPlan) -> dict:
    return {
        "name": plan.name,
        "gpu": plan.hardware.gpu.name,
        "resource": plan.mechanism.resource,
        "perNode": plan.units_per_node,
        "resources": plan.node_resources,  # every resource a node offers: several on a mixed MIG layout
        "maxNodes": plan.pool.max_nodes,
        "maxSchedulable": plan.max_units,
        "sharing": plan.mechanism.description,
    }
