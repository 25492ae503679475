"""AKS: the managed cluster (new, or an existing one found by name) and user agent pools for GPUs."""

from __future__ import annotations

import base64
import os

import pulumi
import pulumi_kubernetes as k8s

from gpupools.autoscaling import karpenter
from gpupools.clouds import azure as decide
from gpupools.stack.config import MaintenanceWindow, StackConfig
from gpupools.core.pools import PoolPlan
from gpupools.fabric import software as fabric_software
from gpupools.fabric.plan import plan_fabrics
from gpupools.pools.planning import plan_pools
from gpupools.pools.software import gpu_tolerations, namespace as software_namespace, runs_nfd
from gpupools.upgrades.policy import Window, window_of

from gpupools.deploy import kube
from gpupools.deploy.base import ClusterHandle, Component
from gpupools.deploy.gpu_software import helm_release
from gpupools.clouds.node_settings import merged
from gpupools.deploy.wire import CloudResource, invoke, provider_inputs, python_names

# Registered by type token, as pulumi_azure_native's classes register them: its container service, authorization and
# managed identity modules are a fifth of a second of every plan. The classes' aliases name the API-versioned types
# (containerservice/v20170831:ManagedCluster, ...) that nothing gpupools registers ever had.
MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"
AGENT_POOL = "azure-native:containerservice:AgentPool"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
IDENTITY = "azure-native:managedidentity:UserAssignedIdentity"
MAINTENANCE_CONFIGURATION = "azure-native:containerservice:MaintenanceConfiguration"


class AksCluster(Component):
    """An AKS cluster with a small autoscaled system pool, or an existing cluster in the resource group."""

    TYPE = "AksCluster"

    def __init__(self, name: str, stack: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, opts)
        cluster = stack.cluster
        self.resource_group = cluster.resource_group
        after: list[pulumi.Resource] = []
        self.reservation_access: list[pulumi.Resource] = []
        if cluster.create:
            # The stack's Cloud object: with node auto-provisioning (clouds.azure.node_auto_provisioning), NAP is on.
            args = stack.target.managed_cluster_args(cluster)
            scopes = decide.reservation_group_scopes(stack.pools)
            identity = None
            if scopes:
                # Pools in a capacity reservation group need a user-assigned cluster identity with Contributor on
                # the group's resource group (AKS: use-capacity-reservation-groups; system-assigned does not work).
                identity = CloudResource(IDENTITY, f"{name}-identity", provider_inputs(
                    {"resource_group_name": cluster.resource_group, "resource_name_": f"{cluster.name}-identity"}), ("principalId",), self.child())
                args["identity"] = {"type": "UserAssigned", "user_assigned_identities": [identity.id]}
            inputs = provider_inputs(args)
            system_node = cluster.system_pool.node if cluster.system_pool is not None else None
            if system_node:
                inputs["agentPoolProfiles"][0] = merged(inputs["agentPoolProfiles"][0], system_node, decide.SYSTEM_NODE_API.defaults)
            managed = CloudResource(MANAGED_CLUSTER, name, inputs, ("name",), self.child(
                ignore_changes=["agentPoolProfiles[0].count"]))
            self.cluster_name = managed.name
            # When AKS may upgrade the cluster and its node images: the stack's window and exclusions.
            for config in decide.maintenance_configurations(stack.upgrades, window_of(stack)):
                CloudResource(MAINTENANCE_CONFIGURATION, f"{name}-{config['config_name']}", provider_inputs(
                    {"resource_group_name": cluster.resource_group, "resource_name_": managed.name, **config}), (), self.child(parent=managed))
            me = invoke("azure-native:authorization:getClientConfig", {}, self)
            subscription_id = me.apply(lambda r: r["subscriptionId"])
            for i, scope in enumerate(scopes):
                self.reservation_access.append(CloudResource(ROLE_ASSIGNMENT, f"{name}-reservations-{i}", provider_inputs(
                    {"principal_id": identity.principalId, "principal_type": "ServicePrincipal", "scope": scope,
                     "role_definition_id": subscription_id.apply(decide.contributor_role)}), (), self.child()))
            admin = CloudResource(ROLE_ASSIGNMENT, f"{name}-deployer-admin", provider_inputs(decide.admin_role_assignment_args(
                managed.id, me.apply(lambda r: r["objectId"]), decide.deployer_principal_type(stack.providers, os.environ), subscription_id)),
                (), self.child())
            after = [admin]
        else:
            # An existing cluster is read by token (wire.py), its answer in the SDK's Python names, which the findings read.
            found = invoke("azure-native:containerservice:getManagedCluster",
                           {"resourceGroupName": cluster.resource_group, "resourceName": cluster.name}, self).apply(python_names)
            self.cluster_name = found["name"]
            scopes = decide.reservation_group_scopes(stack.pools)
            if scopes:
                found.apply(lambda c: [pulumi.log.warn(m, resource=self) for m in
                                       decide.reservation_identity_findings(c["name"], c.get("identity"), scopes)])
            # Read, not assumed: what the cluster lacks of a new cluster's controls becomes a warning.
            found.apply(lambda c: [pulumi.log.warn(m, resource=self) for m in decide.existing_cluster_findings(c["name"], c)])
        # Entra ID clusters hand out an exec kubeconfig (kubelogin); without Entra ID, format is ignored.
        credentials = invoke("azure-native:containerservice:listManagedClusterUserCredentials",
                             {"resourceGroupName": cluster.resource_group, "resourceName": self.cluster_name, "format": "exec"}, self, after)
        self.kubeconfig = pulumi.Output.secret(credentials.apply(
            lambda r: decide.exec_kubeconfig(base64.b64decode(r["kubeconfigs"][0]["value"]).decode())))
        self.kubernetes = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, opts=self.child())
        self.location = stack.providers.get("azure-native:location")
        self._fabric(stack)
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})

    def _fabric(self, stack: StackConfig) -> None:
        """InfiniBand pools: the NVIDIA Network Operator and a NicClusterPolicy that loads the IB driver and advertises
        the HCAs as rdma/shared_ib on those pools."""
        plans = plan_pools(stack)
        fabrics = list(plan_fabrics(stack, plans).values())
        release = fabric_software.network_operator_release(fabrics, runs_nfd(stack, plans), gpu_tolerations(stack, plans))
        if release is None:
            return
        tolerations = fabric_software.nic_policy_tolerations(stack.target, plans, fabrics)
        ns = kube.apply(software_namespace(release.chart.namespace, privileged=True), self.child(provider=self.kubernetes))
        chart = helm_release(release, self.child(provider=self.kubernetes, depends_on=[ns]))
        policy = fabric_software.nic_cluster_policy(fabrics, tolerations)
        kube.apply(policy, self.child(provider=self.kubernetes, depends_on=[chart]))

    def handle(self) -> ClusterHandle:
        return ClusterHandle(self.cluster_name, self.kubeconfig, self.kubernetes, {"resource_group": self.resource_group,
                                                                                   "reservation_access": self.reservation_access,
                                                                                   "location": self.location})


class AksGpuNodePool(Component):
    """A User-mode agent pool of GPU VMs: tainted, labelled, autoscaled, optionally Spot."""

    TYPE = "AksGpuNodePool"

    def __init__(self, plan: PoolPlan, cluster: ClusterHandle, installer: str, kubernetes_version: str | None = None,
                 opts: pulumi.ResourceOptions | None = None, autoscaler_resources: dict[str, int] | None = None):
        super().__init__(plan.name, opts)
        self.agent_pool = CloudResource(
            AGENT_POOL, plan.name,
            merged(provider_inputs(decide.agent_pool_args(plan, installer, cluster.details["resource_group"], cluster.name, kubernetes_version,
                                                          autoscaler_resources)), plan.pool.node, decide.NODE_API.defaults), ("name",),
            # The cluster autoscaler owns the node count; only the bounds come from the stack.
            self.child(ignore_changes=["count"], delete_before_replace=True,
                       depends_on=cluster.details.get("reservation_access", []) if decide.reservation_group(plan.pool) else []))
        self.register_outputs({"agentPoolName": self.agent_pool.name})


class AksNapPool(Component):
    """One GPU pool on AKS node auto-provisioning: an AKSNodeClass and a Karpenter NodePool on it, which AKS's own
    Karpenter scales."""

    TYPE = "AksNapPool"

    def __init__(self, plan: PoolPlan, cluster: ClusterHandle, installer: str, mode, opts: pulumi.ResourceOptions | None = None, window=None):
        super().__init__(plan.name, opts)
        node_class = kube.apply(mode.node_class(plan, installer), self.child(provider=cluster.kubernetes))
        # NAP's node lifetime (clouds.azure.node_auto_provisioning, karpenter_disruption).
        lifetime = mode.karpenter_disruption(plan.pool, window or Window.of(MaintenanceWindow()))
        node_pool = karpenter.node_pool(plan, mode.node_class_name(plan.name), window, class_ref=mode.NODE_CLASS_REF,
                                        zones=mode.zone_values(plan.pool, cluster.details["location"]), lifetime=lifetime)
        kube.apply(node_pool, self.child(provider=cluster.kubernetes, depends_on=[node_class]))
        self.register_outputs({"nodeClass": mode.node_class_name(plan.name), "nodePool": karpenter.node_pool_name(plan)})


def build_cluster(stack: StackConfig, opts: pulumi.ResourceOptions | None = None) -> ClusterHandle:
    return AksCluster(stack.cluster.name, stack, opts).handle()


def build_autoscaler(stack: StackConfig, cluster: ClusterHandle, plans: list[PoolPlan], service_monitor: dict | None,
                     after: list[pulumi.Resource], opts: pulumi.ResourceOptions | None = None) -> None:
    """The managed cluster autoscaler is part of the service; every pool turns it on."""
    return None


def build_pool(plan: PoolPlan, cluster: ClusterHandle, stack: StackConfig, installer: str, autoscaler: None = None,
               opts: pulumi.ResourceOptions | None = None) -> Component:
    if stack.cluster.managed_mode == decide.NODE_AUTO_PROVISIONING:
        return AksNapPool(plan, cluster, installer, stack.target, opts, window_of(stack))
    return AksGpuNodePool(plan, cluster, installer, stack.cluster.kubernetes_version, opts,
                          fabric_software.autoscaler_fabric_resources(stack.target, plan))
