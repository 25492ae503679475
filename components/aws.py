"""EKS: the cluster (new, or an existing one found by name) and managed GPU node groups."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpupools.clouds import aws as decide
from gpupools.config import StackConfig
from gpupools.pools import PoolPlan

from .base import ClusterHandle, Component


class EksCluster(Component):
    """An EKS cluster with its network, IAM roles and a small system node group, or an existing cluster.

    Either way it exposes a node role for GPU node groups, the subnets they join, and a Kubernetes provider.
    """

    TYPE = "EksCluster"

    def __init__(self, name: str, stack: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, opts)
        cluster = stack.cluster
        region = stack.providers.get("aws:region")
        self.node_role = self._role("node-role", "ec2.amazonaws.com", decide.NODE_POLICIES)
        if cluster.create:
            subnet_ids = pulumi.Output.from_input(cluster.subnet_ids) if cluster.subnet_ids else self._network()
            cluster_role = self._role("cluster-role", "eks.amazonaws.com", decide.CLUSTER_POLICIES)
            eks = aws.eks.Cluster(name, **decide.cluster_args(cluster.name, cluster_role.arn, subnet_ids, cluster.kubernetes_version), opts=self.child())
            self.cluster_name = eks.name
            endpoint, ca_data = eks.endpoint, eks.certificate_authority.data
            template = aws.ec2.LaunchTemplate("system-nodes", **decide.system_launch_template_args(), opts=self.child())
            aws.eks.NodeGroup("system", **decide.system_node_group_args(eks.name, self.node_role.arn, subnet_ids, template.id,
                                                                       template.latest_version.apply(str)),
                              opts=self.child(ignore_changes=["scalingConfig.desiredSize"]))
        else:
            found = aws.eks.get_cluster_output(name=cluster.name, opts=pulumi.InvokeOutputOptions(parent=self))
            self.cluster_name = found.name
            subnet_ids = pulumi.Output.from_input(cluster.subnet_ids) if cluster.subnet_ids else found.vpc_config.subnet_ids
            endpoint, ca_data = found.endpoint, found.certificate_authorities[0].data
        self.subnet_ids = subnet_ids
        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(self.cluster_name, endpoint, ca_data).apply(
            lambda a: decide.kubeconfig(a[0], a[1], a[2], region)))
        self.kubernetes = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, opts=self.child())
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})

    def handle(self) -> ClusterHandle:
        return ClusterHandle(self.cluster_name, self.kubeconfig, self.kubernetes,
                             {"node_role_arn": self.node_role.arn, "subnet_ids": self.subnet_ids})

    def _role(self, name: str, service: str, policies: tuple[str, ...]) -> aws.iam.Role:
        role = aws.iam.Role(name, assume_role_policy=decide.assume_role_policy(service), opts=self.child())
        for arn in policies:
            aws.iam.RolePolicyAttachment(f"{name}-{arn.rsplit('/', 1)[1]}", role=role.name, policy_arn=arn, opts=self.child(parent=role))
        return role

    def _network(self) -> pulumi.Output:
        """A VPC with public subnets for load balancers and the NAT gateway, private ones for nodes."""
        zones = aws.get_availability_zones_output(state="available", opts=pulumi.InvokeOutputOptions(parent=self))
        vpc = aws.ec2.Vpc("vpc", cidr_block=decide.VPC_CIDR, enable_dns_hostnames=True, enable_dns_support=True, opts=self.child())
        gateway = aws.ec2.InternetGateway("igw", vpc_id=vpc.id, opts=self.child(parent=vpc))
        public_routes = aws.ec2.RouteTable("public", vpc_id=vpc.id, routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": gateway.id}], opts=self.child(parent=vpc))
        # Zone names are only known at deploy time, so subnets are laid out over zone indexes.
        layout = decide.subnet_layout([f"zone-{i}" for i in range(decide.AVAILABILITY_ZONES)])
        subnets: dict[str, aws.ec2.Subnet] = {}
        for spec in layout:
            index = int(spec["zone"].rsplit("-", 1)[1])
            role_tag = {"kubernetes.io/role/elb": "1"} if spec["public"] else {"kubernetes.io/role/internal-elb": "1"}
            subnets[spec["name"]] = aws.ec2.Subnet(
                spec["name"], vpc_id=vpc.id, cidr_block=spec["cidr"], availability_zone=zones.names[index],
                map_public_ip_on_launch=spec["public"], tags={"Name": spec["name"], **role_tag}, opts=self.child(parent=vpc))
        nat_ip = aws.ec2.Eip("nat", domain="vpc", opts=self.child(parent=vpc))
        nat = aws.ec2.NatGateway("nat", subnet_id=subnets["public-0"].id, allocation_id=nat_ip.id, opts=self.child(parent=vpc))
        private_routes = aws.ec2.RouteTable("private", vpc_id=vpc.id, routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}], opts=self.child(parent=vpc))
        for spec in layout:
            table = public_routes if spec["public"] else private_routes
            aws.ec2.RouteTableAssociation(spec["name"], subnet_id=subnets[spec["name"]].id, route_table_id=table.id, opts=self.child(parent=vpc))
        return pulumi.Output.all(*[subnets[s["name"]].id for s in layout if not s["public"]])


class EksGpuNodePool(Component):
    """A managed node group of GPU instances: tainted, labelled, autoscaled, IMDSv2-only."""

    TYPE = "EksGpuNodePool"

    def __init__(self, plan: PoolPlan, cluster: ClusterHandle, kubernetes_version: str | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(plan.name, opts)
        template = aws.ec2.LaunchTemplate(f"{plan.name}-nodes", **decide.launch_template_args(plan), opts=self.child())
        self.node_group = aws.eks.NodeGroup(
            plan.name,
            **decide.node_group_args(plan, cluster.name, cluster.details["node_role_arn"], cluster.details["subnet_ids"],
                                     template.id, template.latest_version.apply(str), kubernetes_version),
            # The cluster autoscaler owns the node count; only the bounds come from the stack.
            opts=self.child(ignore_changes=["scalingConfig.desiredSize"], delete_before_replace=True))
        self.register_outputs({"nodeGroupName": self.node_group.node_group_name})


def build_cluster(stack: StackConfig, opts: pulumi.ResourceOptions | None = None) -> ClusterHandle:
    return EksCluster(stack.cluster.name, stack, opts).handle()


def build_pool(plan: PoolPlan, cluster: ClusterHandle, stack: StackConfig, installer: str, opts: pulumi.ResourceOptions | None = None) -> Component:
    return EksGpuNodePool(plan, cluster, stack.cluster.kubernetes_version, opts)
