"""GKE: the cluster (new, without its default pool, or an existing one) and GPU node pools."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpupools.clouds import gcp as decide
from gpupools.stack.config import StackConfig
from gpupools.core.pools import PoolPlan

from gpupools.deploy.base import ClusterHandle, Component
from gpupools.deploy import kube
from gpupools.clouds.node_settings import merged
from gpupools.deploy.wire import CloudResource, invoke, provider_inputs, python_names
from gpupools.fabric import gpudirect
from gpupools.fabric.plan import plan_fabrics
from gpupools.pools.planning import plan_pools


CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"


class GkeCluster(Component):
    """A GKE cluster whose default pool is replaced by a small system pool, or an existing cluster."""

    TYPE = "GkeCluster"

    def __init__(self, name: str, stack: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, opts)
        cluster = stack.cluster
        mode = stack.target  # the standard cluster's answers, or GKE Autopilot's (clouds.gcp.autopilot)
        project = stack.providers.get("gcp:project")
        self.location = cluster.location
        self.project = project
        self.node_account, grants = self._node_account(stack)
        if cluster.create:
            # The provider's project when the stack names none (GOOGLE_PROJECT and the like), as the cluster gets it.
            pool = (pulumi.Output.from_input(decide.workload_pool(project)) if project else
                    invoke("gcp:organizations/getClientConfig:getClientConfig", {}, self).apply(lambda r: decide.workload_pool(r["project"])))
            nat = decide.nat_args(cluster, project)
            after: list[pulumi.Resource] = []
            if nat is not None:
                # By type token: pulumi_gcp.compute's classes cost two seconds of every plan to import.
                router_args, nat_args = nat
                router = CloudResource("gcp:compute/router:Router", router_args["name"], router_args, ("name",), self.child())
                after.append(CloudResource("gcp:compute/routerNat:RouterNat", nat_args["name"], {**nat_args, "router": router.name}, (),
                                           self.child(parent=router)))
            cluster_args = mode.cluster_args(cluster, project, pool, stack.upgrades)
            plans = plan_pools(stack)
            if plan_fabrics(stack, plans):
                cluster_args = decide.fabric_cluster_args(cluster_args)
            autoscaling = mode.auto_provisioning_args(plans, self.node_account, cluster)
            if autoscaling is not None:
                cluster_args["cluster_autoscaling"] = autoscaling
            # By type token, as pulumi_gcp.container.Cluster registers it (the labels it marks secret included): the
            # module's generated classes are a quarter of a second of every plan.
            gke = CloudResource(CLUSTER, name, provider_inputs(cluster_args), ("name", "endpoint", "masterAuth"),
                                self.child(additional_secret_outputs=["effectiveLabels", "pulumiLabels"]))
            self.cluster_name = gke.name
            endpoint, ca_data = gke.endpoint, gke.masterAuth.apply(lambda auth: auth["clusterCaCertificate"])
            # The system pool's nodes pull images from outside Google as soon as they start: NAT first. Autopilot has none.
            system = mode.system_node_pool_args(gke.name, cluster.location, project, self.node_account, cluster)
            if system is not None:
                CloudResource(NODE_POOL, "system", _system_inputs(mode, provider_inputs(system), cluster), ("name",),
                              self.child(ignore_changes=["initialNodeCount"], depends_on=[*after, *grants]))
        else:
            # An existing cluster is read by token (wire.py), its answer in the SDK's Python names, which the findings read.
            found = invoke("gcp:container/getCluster:getCluster", {k: v for k, v in {"name": cluster.name, "location": cluster.location,
                                                                                    "project": project}.items() if v is not None},
                           self).apply(python_names)
            endpoint, ca_data = found["endpoint"], found["master_auths"][0]["cluster_ca_certificate"]
            # Read, not assumed: the pools need Workload Identity, which only the cluster's owner can turn on.
            self.cluster_name = found.apply(lambda c: _checked(mode, c["name"], c.get("workload_identity_configs"), c.get("enable_autopilot")))
            found.apply(lambda c: [pulumi.log.warn(m, resource=self) for m in decide.existing_cluster_findings(c["name"], c)])
        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(self.cluster_name, endpoint, ca_data).apply(
            lambda a: decide.kubeconfig(a[0], a[1], a[2])))
        self.kubernetes = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, opts=self.child())
        self.fabric_networks = self._fabric(stack)
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})

    def _node_account(self, stack: StackConfig) -> tuple[pulumi.Input[str] | None, list[pulumi.Resource]]:
        """The IAM service account the nodes run as (the stack's own, or one gpupools creates with the least-privilege
        node roles: clouds/gcp.py says why), and the grants node pools wait for."""
        args = decide.node_account_args(stack.cluster, self.project)
        if args is None:
            return stack.cluster.node_service_account, []
        account = CloudResource("gcp:serviceaccount/account:Account", args["accountId"], args, ("email", "member"), self.child())
        project = (self.project if self.project else
                   invoke("gcp:organizations/getClientConfig:getClientConfig", {}, self).apply(lambda r: r["project"]))
        grants = [CloudResource("gcp:projects/iAMMember:IAMMember", f"{args['accountId']}-{role.rsplit('/', 1)[1]}",
                                decide.node_role_args(role, account.member, project), (), self.child(parent=account))
                  for role in decide.NODE_SERVICE_ACCOUNT_ROLES]
        self.node_grants = grants
        return account.email, grants

    def _fabric(self, stack: StackConfig) -> dict[str, list[dict]]:
        """The VPC networks and subnets each GPUDirect pool's extra NICs attach to, by pool: attachments for the pool.
        Then what pods need to use them (fabric.gpudirect): a GKENetworkParamSet and a Network per subnet, once the
        subnet exists, and Google's NCCL plugin installers and NRI device injector on the pools."""
        out: dict[str, list[dict]] = {}
        project = self.project
        fabrics = plan_fabrics(stack, plan_pools(stack))
        networks = gpudirect.gpu_networks(stack, fabrics)
        subnets: list[pulumi.Resource] = []
        for pool, nets in networks.items():
            fabric = fabrics[pool]
            attachments = []
            for net in nets:
                args: dict = {"name": net["name"], "autoCreateSubnetworks": False, "mtu": net["mtu"]}
                if net["rdma_profile"]:
                    profile = f"{fabric.zone}-vpc-roce"
                    args["networkProfile"] = (f"projects/{project}/global/networkProfiles/{profile}" if project else
                                              invoke("gcp:organizations/getClientConfig:getClientConfig", {}, self).apply(
                                                  lambda r, p=profile: f"projects/{r['project']}/global/networkProfiles/{p}"))
                if project:
                    args["project"] = project
                network = CloudResource("gcp:compute/network:Network", net["name"], args, ("name", "selfLink"), self.child())
                for sub in net["subnets"]:
                    sub_args = {"name": sub["name"], "network": network.id, "ipCidrRange": sub["cidr"], "region": sub["region"]}
                    if project:
                        sub_args["project"] = project
                    subnet = CloudResource("gcp:compute/subnetwork:Subnetwork", sub["name"], sub_args, ("name",), self.child(parent=network))
                    subnets.append(subnet)
                    attachments.append({"network": network.name, "subnetwork": subnet.name})
                if not net["rdma_profile"]:
                    # Traffic between the pool's nodes on this network (RoCE networks allow it implicitly).
                    rule = {"name": f"{net['name']}-internal", "network": network.name, "allows": [{"protocol": "all"}],
                            "sourceRanges": [s["cidr"] for s in net["subnets"]], "direction": "INGRESS"}
                    if project:
                        rule["project"] = project
                    CloudResource("gcp:compute/firewall:Firewall", rule["name"], rule, (), self.child(parent=network))
            out[pool] = attachments
        objects, daemonsets = gpudirect.gpudirect_objects(stack, fabrics)
        for obj in objects:
            # GKE validates a param set's VPC and subnet when it is created.
            kube.apply(obj, self.child(provider=self.kubernetes, depends_on=subnets))
        for obj in daemonsets:
            kube.apply(obj, self.child(provider=self.kubernetes))
        return out

    def handle(self) -> ClusterHandle:
        return ClusterHandle(self.cluster_name, self.kubeconfig, self.kubernetes, {"location": self.location, "project": self.project,
                                                                                  "fabric_networks": self.fabric_networks,
                                                                                  "node_account": self.node_account,
                                                                                  "node_grants": getattr(self, "node_grants", [])})


def _checked(mode, name: str, configs: list, autopilot: bool | None) -> str:
    """The existing cluster as the stack's mode needs it (Workload Identity; Autopilot or Standard as the stack says)."""
    # The SDK's result types are dicts keyed by the Python names.
    problem = mode.existing_cluster_problem(name, [(c or {}).get("workload_pool") for c in configs or []], autopilot)
    if problem:
        raise pulumi.RunError(problem)
    return name


class GkeComputeClass(Component):
    """A pool as a ComputeClass: GKE's node auto-provisioning creates its node pools down the class's priorities."""

    TYPE = "GkeComputeClass"

    def __init__(self, plan: PoolPlan, cluster: ClusterHandle, opts: pulumi.ResourceOptions | None = None):
        super().__init__(plan.name, opts)
        obj = decide.compute_class(plan, cluster.details["location"])
        account = cluster.details.get("node_account")
        if account is not None:  # the nodes' service account, known once created
            obj = {**obj, "spec": pulumi.Output.from_input(account).apply(
                lambda a: decide.compute_class(plan, cluster.details["location"], a)["spec"])}
        self.compute_class = kube.apply(obj, self.child(provider=cluster.kubernetes, depends_on=cluster.details.get("node_grants", [])))
        self.register_outputs({"computeClassName": decide.compute_class_name(plan.name)})


class GkeGpuNodePool(Component):
    """A node pool with guest accelerators: tainted, labelled, autoscaled, optionally Spot."""

    TYPE = "GkeGpuNodePool"

    def __init__(self, plan: PoolPlan, cluster: ClusterHandle, installer: str, kubernetes_version: str | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(plan.name, opts)
        args = decide.node_pool_args(plan, installer, cluster.name, cluster.details["location"], cluster.details["project"], kubernetes_version,
                                     cluster.details.get("node_account"))
        after = list(cluster.details.get("node_grants") or [])
        if decide.is_rack_scale(plan.pool):  # the compact placement the node pool names (placement_policy.policy_name)
            location = cluster.details["location"]
            region = location.rsplit("-", 1)[0] if location.count("-") >= 2 else location
            policy = decide.rack_resource_policy_args(plan.pool, region, cluster.details["project"])
            after.append(CloudResource("gcp:compute/resourcePolicy:ResourcePolicy", policy["name"], provider_inputs(policy), ("name",), self.child()))
        attachments = (cluster.details.get("fabric_networks") or {}).get(plan.name)
        if attachments is not None:
            args = decide.fabric_node_pool_args(plan, args, attachments)
        self.node_pool = CloudResource(
            NODE_POOL, plan.name, merged(provider_inputs(args), plan.pool.node, decide.NODE_API.defaults), ("name",),
            # The cluster autoscaler owns the node count; only the bounds come from the stack.
            self.child(ignore_changes=["initialNodeCount", "nodeCount"], delete_before_replace=True, depends_on=after))
        self.register_outputs({"nodePoolName": self.node_pool.name})


def build_cluster(stack: StackConfig, opts: pulumi.ResourceOptions | None = None) -> ClusterHandle:
    return GkeCluster(stack.cluster.name, stack, opts).handle()


def build_autoscaler(stack: StackConfig, cluster: ClusterHandle, plans: list[PoolPlan], service_monitor: dict | None,
                     after: list[pulumi.Resource], opts: pulumi.ResourceOptions | None = None) -> None:
    """The managed cluster autoscaler is part of the service; every pool turns it on."""
    return None


class GkeAutopilotPool(Component):
    """A pool on GKE Autopilot: nothing to create, since Autopilot makes a node for each pod that selects the pool
    (clouds.gcp.autopilot); the component carries what the pool's pods select."""

    TYPE = "GkeAutopilotPool"

    def __init__(self, plan: PoolPlan, record: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__(plan.name, opts, record)
        self.register_outputs({"nodeSelector": plan.node_selector})


def build_pool(plan: PoolPlan, cluster: ClusterHandle, stack: StackConfig, installer: str, autoscaler: None = None,
               opts: pulumi.ResourceOptions | None = None) -> Component:
    if stack.target.POOL_COMPONENT == f"gpupools:index:{GkeAutopilotPool.TYPE}":
        return GkeAutopilotPool(plan, stack.target.pool_record(plan), opts)
    if decide.uses_compute_class(plan.pool):
        return GkeComputeClass(plan, cluster, opts)
    return GkeGpuNodePool(plan, cluster, installer, stack.cluster.kubernetes_version, opts)


def _system_inputs(mode, inputs: dict, cluster) -> dict:
    """The system pool's inputs with `cluster.systemPool.node` merged under them."""
    node = cluster.system_pool.node if cluster.system_pool is not None else None
    return merged(inputs, node, mode.SYSTEM_NODE_API.defaults) if node else inputs
