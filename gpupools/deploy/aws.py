"""EKS: the cluster (new, or an existing one found by name), GPU pools, and the autoscaler that scales them."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from gpupools.autoscaling import cluster_autoscaler as ca
from gpupools.autoscaling import karpenter
from gpupools.autoscaling.choice import CLUSTER_AUTOSCALER, KARPENTER, resolve_autoscaler
from gpupools.autoscaling.templates import node_group_labels
from gpupools.capacity.sources import placement_zones
from gpupools.clouds import aws as decide
from gpupools.clouds.node_settings import merged
from gpupools.stack.config import MaintenanceWindow, StackConfig
from gpupools.core.pools import PoolPlan
from gpupools.pools.software import Release
from gpupools.pools.planning import plan_pools
from gpupools.fabric.plan import FabricPlan, plan_fabrics
from gpupools.fabric.software import efa_device_plugin_release
from gpupools.upgrades.policy import Window, window_of

from gpupools.deploy import kube
from gpupools.deploy.base import ClusterHandle, Component
from gpupools.deploy.gpu_software import helm_release
from gpupools.deploy.wire import CloudResource, invoke, provider_inputs, python_names


def resource(token: str, name: str, inputs: dict, opts: pulumi.ResourceOptions, outputs: tuple[str, ...] = ()) -> CloudResource:
    """An AWS resource by type token (`ec2/vpc:Vpc`), inputs as the provider names them."""
    return CloudResource(f"aws:{token}", name, inputs, outputs, opts)


class EksCluster(Component):
    """An EKS cluster with its network, IAM roles and a small system node group, or an existing cluster.

    Either way it exposes a node role for GPU node groups, the subnets they join (by zone where known), the
    cluster security group, and a Kubernetes provider.
    """

    TYPE = "EksCluster"

    def __init__(self, name: str, stack: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, opts)
        cluster = stack.cluster
        region = stack.providers.get("aws:region")
        autoscaler = resolve_autoscaler(stack.target, cluster.create, stack.autoscaler)
        # EKS Auto Mode: its own Cloud object (clouds.aws.auto_mode) answers the cluster's arguments, roles and add-ons.
        auto = cluster.managed_mode == decide.AUTO_MODE
        mode = stack.target
        self.node_role = self._role("node-role", "ec2.amazonaws.com", mode.NODE_POLICIES) if cluster.create or not auto else None
        self.subnets_by_zone: dict[str, pulumi.Output] | None = None
        if cluster.create:
            if cluster.subnet_ids:
                subnet_ids = pulumi.Output.from_input(cluster.subnet_ids)
            else:
                subnet_ids = self._network(decide.pool_zones(stack.pools))
            cluster_role = (iam_role(self, "cluster-role", mode.cluster_role_trust_policy(), mode.CLUSTER_POLICIES) if auto else
                            self._role("cluster-role", "eks.amazonaws.com", decide.CLUSTER_POLICIES))
            if auto:  # the pools' NodeClass tags need it (clouds.aws.auto_mode, custom_tag_policy); the cluster waits for it, destroy drops it last
                partition = invoke("aws:index/getPartition:getPartition", {}, self).apply(lambda r: r["partition"])
                cluster_role.attachments.append(resource("iam/rolePolicy:RolePolicy", "cluster-role-custom-tags", {
                    "role": cluster_role.id, "policy": partition.apply(mode.custom_tag_policy)}, self.child(parent=cluster_role.role)))
            before: list[pulumi.Resource] = list(cluster_role.ready)
            logs = decide.log_group_args(cluster)
            if logs is not None:
                # Before the cluster: EKS would otherwise create the group itself, with no retention.
                before.append(resource("cloudwatch/logGroup:LogGroup", f"{name}-control-plane", logs, self.child()))
            key_args = decide.secrets_key_args(cluster)
            key = resource("kms/key:Key", f"{name}-secrets", key_args, self.child(), ("arn",)) if key_args else None
            if auto:
                args = mode.cluster_args(cluster, cluster_role.arn, subnet_ids, key.arn if key else None, self.node_role.arn)
                before += self.node_role.ready
            else:
                args = decide.cluster_args(cluster, cluster_role.arn, subnet_ids, key.arn if key else None)
            eks = resource("eks/cluster:Cluster", name, provider_inputs(args),
                           self.child(depends_on=before), ("name", "endpoint", "certificateAuthority", "vpcConfig", "version"))
            self.cluster_name = eks.name
            endpoint, ca_data = eks.endpoint, eks.certificateAuthority.apply(lambda ca: ca["data"])
            self.security_group_id = eks.vpcConfig.apply(lambda vpc: vpc.get("clusterSecurityGroupId"))
            self.vpc_id = eks.vpcConfig.apply(lambda vpc: vpc.get("vpcId"))
            self.version = eks.version
            self.node_role_arn = self.node_role.arn
            if auto:  # Auto Mode's built-in pools run the cluster's add-ons, and its image the agents
                self._finish(stack, region, endpoint, ca_data, subnet_ids)
                return
            template = resource("ec2/launchTemplate:LaunchTemplate", "system-nodes", decide.system_launch_template_args(), self.child(),
                                ("latestVersion", "arn"))
            system = resource("eks/nodeGroup:NodeGroup", "system", provider_inputs(decide.system_node_group_args(
                eks.name, self.node_role.arn, subnet_ids, template.id, template.latestVersion.apply(str), cluster)),
                self.child(ignore_changes=["scalingConfig.desiredSize"], depends_on=self.node_role.ready))
            # The node monitoring agent too: the GPU health checks node repair acts on.
            for addon in [*decide.addons(cluster), decide.NODE_MONITORING_AGENT]:
                # The newest version EKS offers for the cluster's Kubernetes version.
                version = invoke("aws:eks/getAddonVersion:getAddonVersion", {"addonName": addon, "kubernetesVersion": eks.version,
                                                                             "mostRecent": True}, self).apply(lambda r: r["version"])
                after = [system] if addon in decide.ADDONS_NEEDING_NODES or addon == decide.POD_IDENTITY_AGENT else [eks]
                resource("eks/addon:Addon", addon, decide.addon_args(eks.name, addon, version), self.child(depends_on=after))
        else:
            # An existing cluster is read by token (wire.py), its answer in the SDK's Python names, which the findings read.
            found = invoke("aws:eks/getCluster:getCluster", {"name": cluster.name}, self).apply(python_names)
            self.cluster_name = found["name"]
            subnet_ids = pulumi.Output.from_input(cluster.subnet_ids) if cluster.subnet_ids else found["vpc_config"]["subnet_ids"]
            endpoint, ca_data = found["endpoint"], found["certificate_authorities"][0]["data"]
            self.security_group_id = found["vpc_config"]["cluster_security_group_id"]
            self.vpc_id = found["vpc_config"]["vpc_id"]
            self.version = found["version"]
            # Auto Mode's nodes take the node role the cluster's compute config names (it holds their access entry).
            self.node_role_arn = (found.apply(lambda c: _auto_mode_node_role(cluster.name, c.get("compute_configs"))) if auto
                                  else self.node_role.arn)
            # Read, not assumed: what the cluster lacks of a new cluster's controls becomes a warning.
            found.apply(lambda c: [pulumi.log.warn(m, resource=self) for m in decide.existing_cluster_findings(
                c["name"], c["vpc_config"].get("endpoint_public_access"), c["vpc_config"].get("public_access_cidrs"),
                c.get("enabled_cluster_log_types"), (c.get("access_configs") or [{}])[0].get("authentication_mode"))])
            if autoscaler in (KARPENTER, CLUSTER_AUTOSCALER) and not auto:
                # An existing cluster must already run the Pod Identity agent; reading it fails the preview if not.
                invoke("aws:eks/getAddon:getAddon", {"clusterName": cluster.name, "addonName": decide.POD_IDENTITY_AGENT}, self)
        self._finish(stack, region, endpoint, ca_data, subnet_ids)

    def _finish(self, stack: StackConfig, region, endpoint, ca_data, subnet_ids) -> None:
        name = stack.cluster.name
        self.subnet_ids = subnet_ids
        self.endpoint = endpoint
        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(self.cluster_name, endpoint, ca_data).apply(
            lambda a: decide.kubeconfig(a[0], a[1], a[2], region)))
        self.kubernetes = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, opts=self.child())
        self._fabric(stack)
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})

    def _fabric(self, stack: StackConfig) -> None:
        """For EFA pools: a security group open to itself that their nodes join, a cluster placement group per pool,
        and the EFA device plugin that advertises the interfaces to pods."""
        self.fabrics: dict[str, FabricPlan] = {f.pool: f for f in plan_fabrics(stack, plan_pools(stack)).values() if f.kind == "efa"}
        self.efa_security_group_id = None
        self.placement_groups: dict[str, CloudResource] = {}
        if not self.fabrics:
            return
        group = resource("ec2/securityGroup:SecurityGroup", "efa", decide.efa_security_group_args(stack.cluster.name, self.vpc_id), self.child(), ("id",))
        for direction, rule in decide.efa_security_group_rules(group.id).items():
            token = "vpc/securityGroupIngressRule:SecurityGroupIngressRule" if direction == "ingress" else "vpc/securityGroupEgressRule:SecurityGroupEgressRule"
            resource(token, f"efa-{direction}", rule, self.child(parent=group))
        self.efa_security_group_id = group.id
        for pool, fabric in self.fabrics.items():
            if fabric.placement_group is None:  # a Capacity Block places its instances itself (clouds.aws, BLOCK_PLACEMENT)
                continue
            self.placement_groups[pool] = resource("ec2/placementGroup:PlacementGroup", f"{pool}-placement",
                                                   decide.placement_group_args(stack.cluster.name, pool), self.child())
        release = efa_device_plugin_release(list(self.fabrics.values()))
        assert release is not None
        helm_release(release, self.child(provider=self.kubernetes))

    def handle(self) -> ClusterHandle:
        return ClusterHandle(self.cluster_name, self.kubeconfig, self.kubernetes, {
            "node_role_arn": self.node_role_arn, "node_role_ready": self.node_role.ready if self.node_role else [], "subnet_ids": self.subnet_ids, "subnets_by_zone": self.subnets_by_zone,
            "security_group_id": self.security_group_id, "endpoint": self.endpoint, "version": self.version,
            "fabrics": self.fabrics, "efa_security_group_id": self.efa_security_group_id, "placement_groups": self.placement_groups})

    def _role(self, name: str, service: str, policies: tuple[str, ...]) -> IamRole:
        return iam_role(self, name, decide.assume_role_policy(service), policies)

    def _network(self, wanted_zones: list[str]) -> pulumi.Output:
        """A VPC with public subnets for load balancers and the NAT gateway, private ones for nodes, in every zone a
        pool asks for and at least two."""
        available = invoke("aws:index/getAvailabilityZones:getAvailabilityZones", {"state": "available"}, self)
        count = max(decide.AVAILABILITY_ZONES, len(wanted_zones))
        zone_names = available.apply(lambda r: r["names"]).apply(lambda names: decide.vpc_zones(names, wanted_zones, count))
        vpc = resource("ec2/vpc:Vpc", "vpc", {"cidrBlock": decide.VPC_CIDR, "enableDnsHostnames": True, "enableDnsSupport": True}, self.child())
        in_vpc = self.child(parent=vpc)
        gateway = resource("ec2/internetGateway:InternetGateway", "igw", {"vpcId": vpc.id}, in_vpc)
        public_routes = resource("ec2/routeTable:RouteTable", "public", {"vpcId": vpc.id, "routes": [{"cidrBlock": "0.0.0.0/0", "gatewayId": gateway.id}]}, in_vpc)
        layout = decide.subnet_layout(count)
        subnets: dict[str, CloudResource] = {}
        for spec in layout:
            role_tag = {"kubernetes.io/role/elb": "1"} if spec["public"] else {"kubernetes.io/role/internal-elb": "1"}
            subnets[spec["name"]] = resource("ec2/subnet:Subnet", spec["name"], {
                "vpcId": vpc.id, "cidrBlock": spec["cidr"], "availabilityZone": zone_names[spec["zone_index"]],
                "mapPublicIpOnLaunch": spec["public"], "tags": {"Name": spec["name"], **role_tag}}, in_vpc)
        nat_ip = resource("ec2/eip:Eip", "nat", {"domain": "vpc"}, in_vpc)
        nat = resource("ec2/natGateway:NatGateway", "nat", {"subnetId": subnets["public-0"].id, "allocationId": nat_ip.id}, in_vpc)
        private_routes = resource("ec2/routeTable:RouteTable", "private", {"vpcId": vpc.id, "routes": [{"cidrBlock": "0.0.0.0/0", "natGatewayId": nat.id}]}, in_vpc)
        for spec in layout:
            table = public_routes if spec["public"] else private_routes
            resource("ec2/routeTableAssociation:RouteTableAssociation", spec["name"], {"subnetId": subnets[spec["name"]].id, "routeTableId": table.id}, in_vpc)
        private = [s for s in layout if not s["public"]]
        # Zones a pool asks for come first in `vpc_zones`, so their subnets are known before AWS names the rest.
        self.subnets_by_zone = {zone: subnets[private[i]["name"]].id for i, zone in enumerate(wanted_zones)}
        return pulumi.Output.all(*[subnets[s["name"]].id for s in private])


@dataclass
class IamRole:
    """A role and its managed-policy attachments.

    Whatever acts with the role's permissions depends on `ready`, not only on the ARN: otherwise `pulumi destroy`
    may detach the policies first, and an EKS cluster or node group deleted without them cannot clean up its
    network interfaces and security groups, which leaves the VPC undeletable.
    """

    role: CloudResource
    attachments: list[CloudResource]

    @property
    def arn(self) -> pulumi.Output:
        return self.role.arn

    @property
    def name(self) -> pulumi.Output:
        return self.role.name

    @property
    def id(self) -> pulumi.Output:
        return self.role.id

    @property
    def ready(self) -> list[pulumi.Resource]:
        return [self.role, *self.attachments]


def iam_role(parent: Component, name: str, trust_policy: str, policies: tuple[str, ...] = ()) -> IamRole:
    role = resource("iam/role:Role", name, {"assumeRolePolicy": trust_policy}, parent.child(), ("arn", "name"))
    attachments = [resource("iam/rolePolicyAttachment:RolePolicyAttachment", f"{name}-{arn.rsplit('/', 1)[1]}", {"role": role.name, "policyArn": arn},
                            parent.child(parent=role)) for arn in policies]
    return IamRole(role, attachments)


def pool_subnets(plan: PoolPlan, cluster: ClusterHandle, parent: pulumi.Resource) -> pulumi.Input:
    """All of the cluster's node subnets, or only those in the pool's zones."""
    zones = placement_zones(plan.pool)
    if not zones:
        return cluster.details["subnet_ids"]
    by_zone = cluster.details.get("subnets_by_zone")
    if by_zone:
        return pulumi.Output.all(*[by_zone[z] for z in zones])
    found = invoke("aws:ec2/getSubnets:getSubnets", {"filters": [{"name": "subnet-id", "values": cluster.details["subnet_ids"]},
                                                                  {"name": "availability-zone", "values": list(zones)}]}, parent)
    return found.apply(lambda result: result["ids"])


class Karpenter(Component):
    """Karpenter from its official chart, with everything its getting-started template creates: a node role with an
    access entry, the controller's IAM role through EKS Pod Identity, the interruption queue and its EventBridge
    rules, and the EC2NodeClasses the GPU pools' NodePools refer to."""

    TYPE = "Karpenter"

    def __init__(self, name: str, stack: StackConfig, cluster: ClusterHandle, plans: list[PoolPlan], service_monitor: dict | None,
                 after: list[pulumi.Resource], opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, opts)
        cluster_name = stack.cluster.name
        self.node_role = iam_role(self, "karpenter-node", decide.assume_role_policy("ec2.amazonaws.com"), karpenter.NODE_POLICIES)
        access = resource("eks/accessEntry:AccessEntry", "karpenter-node", {"clusterName": cluster.name, "principalArn": self.node_role.arn,
                                                                            "type": "EC2_LINUX"}, self.child())
        queue = resource("sqs/queue:Queue", "karpenter-interruption", {
            "name": karpenter.queue_name(cluster_name), "messageRetentionSeconds": karpenter.QUEUE_RETENTION_SECONDS, "sqsManagedSseEnabled": True},
            self.child(), ("arn", "url", "name"))
        resource("sqs/queuePolicy:QueuePolicy", "karpenter-interruption", {"queueUrl": queue.url, "policy": queue.arn.apply(karpenter.queue_policy)},
                 self.child(parent=queue))
        for event, pattern in karpenter.INTERRUPTION_EVENTS.items():
            rule = resource("cloudwatch/eventRule:EventRule", f"karpenter-{event}", {"eventPattern": json.dumps(pattern)}, self.child(parent=queue),
                            ("name", "arn"))
            resource("cloudwatch/eventTarget:EventTarget", f"karpenter-{event}", {"rule": rule.name, "arn": queue.arn}, self.child(parent=rule))
        identity = invoke("aws:index/getCallerIdentity:getCallerIdentity", {}, self)
        partition = invoke("aws:index/getPartition:getPartition", {}, self)
        region = invoke("aws:index/getRegion:getRegion", {}, self)
        controller = iam_role(self, "karpenter-controller", decide.pod_identity_trust_policy())
        policy = resource("iam/rolePolicy:RolePolicy", "karpenter-controller", {"role": controller.id, "policy": pulumi.Output.all(
            partition.apply(lambda r: r["partition"]), region.apply(lambda r: r["region"]), identity.apply(lambda r: r["accountId"]), queue.arn,
            self.node_role.arn).apply(
            lambda a: karpenter.controller_policy(a[0], a[1], a[2], cluster_name, a[3], a[4]))}, self.child(parent=controller.role))
        association = resource("eks/podIdentityAssociation:PodIdentityAssociation", "karpenter", {
            "clusterName": cluster.name, "namespace": karpenter.CHART.namespace, "serviceAccount": karpenter.SERVICE_ACCOUNT,
            "roleArn": controller.arn}, self.child())
        overlays = any(karpenter.node_overlays(p, (cluster.details.get("fabrics") or {}).get(p.name)) for p in plans)
        values = karpenter.helm_values(cluster_name, cluster.details["endpoint"], karpenter.queue_name(cluster_name), overlays, service_monitor)
        self.release = helm_release(Release(karpenter.CHART, karpenter.CHART.default_version, values),
                                    self.child(provider=cluster.kubernetes, depends_on=[*self.node_role.ready, access, policy, association, *after]))
        self.node_classes: dict[str, pulumi.Resource] = {}
        fabrics = cluster.details.get("fabrics") or {}
        placement_groups = list((cluster.details.get("placement_groups") or {}).values())
        for class_name, spec in karpenter.node_classes(plans, fabrics).items():
            # EFA nodes also join the group that lets EFA traffic between them.
            groups = [cluster.details["security_group_id"]] + ([cluster.details["efa_security_group_id"]] if spec.efa else [])
            self.node_classes[class_name] = kube.apply(
                {**karpenter.ec2_node_class(class_name, spec, "-", [], []), "spec": pulumi.Output.all(
                    self.node_role.name, cluster.details["subnet_ids"], *groups).apply(
                    lambda a, n=class_name, s=spec: karpenter.ec2_node_class(n, s, a[0], a[1], list(a[2:]))["spec"])},
                self.child(provider=cluster.kubernetes, depends_on=[self.release, *(placement_groups if spec.placement_group else [])]))
        self.register_outputs({"release": karpenter.CHART.release, "nodeRoleArn": self.node_role.arn, "interruptionQueue": queue.name})


class ClusterAutoscaler(Component):
    """cluster-autoscaler from its official chart, with an IAM role (EKS Pod Identity) limited to this cluster's groups."""

    TYPE = "ClusterAutoscaler"

    def __init__(self, name: str, stack: StackConfig, cluster: ClusterHandle, service_monitor: dict | None,
                 after: list[pulumi.Resource], opts: pulumi.ResourceOptions | None = None, plans: list[PoolPlan] | None = None):
        super().__init__(name, opts)
        cluster_name = stack.cluster.name
        role = iam_role(self, "cluster-autoscaler", decide.pod_identity_trust_policy())
        policy = resource("iam/rolePolicy:RolePolicy", "cluster-autoscaler", {"role": role.id, "policy": ca.iam_policy(cluster_name)},
                          self.child(parent=role.role))
        association = resource("eks/podIdentityAssociation:PodIdentityAssociation", "cluster-autoscaler", {
            "clusterName": cluster.name, "namespace": ca.CHART.namespace, "serviceAccount": ca.SERVICE_ACCOUNT, "roleArn": role.arn}, self.child())
        minor = stack.cluster.kubernetes_version
        image_tag = ca.image_tag(minor) if minor else pulumi.Output.from_input(cluster.details["version"]).apply(ca.image_tag)
        values = ca.helm_values(cluster_name, stack.providers.get("aws:region"), image_tag, service_monitor, on_system_pool=stack.cluster.create,
                                startup_taints=ca.startup_taint_keys(plans or []))
        self.release = helm_release(Release(ca.CHART, ca.CHART.default_version, values),
                                    self.child(provider=cluster.kubernetes, depends_on=[policy, association, *after]))
        self.register_outputs({"release": ca.CHART.release, "roleArn": role.arn})


class EksGpuNodePool(Component):
    """One GPU pool: tainted, labelled, IMDSv2-only nodes, scaled by the stack's autoscaler.

    Under cluster-autoscaler (or none) the pool is a managed node group whose Auto Scaling group carries the
    node-template tags. Under Karpenter it is a NodePool (plus a NodeOverlay where sharing changes the unit), and
    a fixed managed node group holds the pool's `minNodes`, since a NodePool has no minimum.
    """

    TYPE = "EksGpuNodePool"

    def __init__(self, plan: PoolPlan, cluster: ClusterHandle, kubernetes_version: str | None = None, autoscaler: str = CLUSTER_AUTOSCALER,
                 karpenter_controller: Karpenter | None = None, opts: pulumi.ResourceOptions | None = None, window: Window | None = None):
        super().__init__(plan.name, opts)
        self.node_group = None
        fabric = (cluster.details.get("fabrics") or {}).get(plan.name)
        if autoscaler != KARPENTER or plan.pool.min_nodes > 0:
            template_args = decide.launch_template_args(plan, decide.node_hugepages(fabric.kind if fabric is not None else None))
            after: list[pulumi.Resource] = []
            if fabric is not None:
                groups = pulumi.Output.all(cluster.details["security_group_id"], cluster.details["efa_security_group_id"]).apply(list)
                template_args = decide.fabric_launch_template_args(template_args, fabric.devices, fabric.placement_group, groups)
                if fabric.placement_group is not None:
                    after.append(cluster.details["placement_groups"][plan.name])
            template = resource("ec2/launchTemplate:LaunchTemplate", f"{plan.name}-nodes", template_args, self.child(depends_on=after),
                                ("latestVersion", "arn"))
            self.node_group = resource(
                "eks/nodeGroup:NodeGroup", plan.name,
                # The pool's node settings (labels, tags, ...) under gpupools' own (clouds.aws NODE_GROUP_API).
                merged(provider_inputs(decide.node_group_args(plan, cluster.name, cluster.details["node_role_arn"], pool_subnets(plan, cluster, self),
                                                              template.id, template.latestVersion.apply(str), kubernetes_version,
                                                              node_group_labels(plan, autoscaler), floor=autoscaler == KARPENTER)),
                       decide.node_group_settings(plan.pool)),
                # The autoscaler owns the node count; only the bounds come from the stack.
                self.child(ignore_changes=["scalingConfig.desiredSize"], delete_before_replace=True, depends_on=cluster.details["node_role_ready"]),
                ("nodeGroupName", "resources"))
            if autoscaler != KARPENTER:
                asg = self.node_group.resources.apply(lambda r: r[0]["autoscalingGroups"][0]["name"])
                tags = ca.asg_tags(plan)  # on an EFA pool with its EFA interfaces and huge pages (ca.fabric_asg_tags)
                for key, value in tags.items():
                    resource("autoscaling/tag:Tag", f"{plan.name}-{ca.tag_suffix(key)}", {
                        "autoscalingGroupName": asg, "tag": {"key": key, "value": value, "propagateAtLaunch": False}}, self.child(parent=self.node_group))
        if autoscaler == KARPENTER and karpenter.karpenter_nodes(plan) > 0:
            assert karpenter_controller is not None
            node_class = karpenter.node_class_name(karpenter.node_class_spec(plan, fabric), plan)
            after = self.child(provider=cluster.kubernetes, depends_on=[karpenter_controller.release, karpenter_controller.node_classes[node_class]])
            kube.apply(karpenter.node_pool(plan, node_class, window), after)
            for overlay in karpenter.node_overlays(plan, fabric):  # one per instance type of a pool over several
                kube.apply(overlay, self.child(provider=cluster.kubernetes, depends_on=[karpenter_controller.release]))
        self.register_outputs({"nodeGroupName": self.node_group.nodeGroupName if self.node_group else None,
                               "nodePool": karpenter.node_pool_name(plan) if autoscaler == KARPENTER else None})


def _auto_mode_node_role(cluster: str, configs: list) -> str:
    """The node role an existing Auto Mode cluster's compute config names; an error when Auto Mode is off there."""
    config = (configs or [{}])[0] or {}
    if not config.get("enabled") or not config.get("node_role_arn"):
        raise pulumi.RunError(f"EKS cluster {cluster!r} does not run Auto Mode (computeConfig.enabled is off), which cluster.mode: auto-mode needs; "
                              f"turn it on (aws eks update-cluster-config --compute-config enabled=true ...) or set cluster.mode: standard")
    return config["node_role_arn"]


class EksAutoModePool(Component):
    """One GPU pool on EKS Auto Mode: a NodeClass (eks.amazonaws.com/v1) with the cluster's node role, subnets and
    security group, and a Karpenter NodePool on it, which Auto Mode's own Karpenter scales."""

    TYPE = "EksAutoModePool"

    def __init__(self, plan: PoolPlan, cluster: ClusterHandle, mode, opts: pulumi.ResourceOptions | None = None, window: Window | None = None,
                 tagged: bool = True):
        super().__init__(plan.name, opts)
        name = mode.node_class_name(plan.name)
        spec = pulumi.Output.all(cluster.details["node_role_arn"], pool_subnets(plan, cluster, self), cluster.details["security_group_id"]).apply(
            lambda a: mode.node_class(plan, a[0].rsplit("/", 1)[-1], list(a[1]), [a[2]], tagged)["spec"])
        node_class = kube.apply({**mode.node_class(plan, "-", [], [], tagged), "spec": spec},
                                self.child(provider=cluster.kubernetes, depends_on=cluster.details["node_role_ready"]))
        # Auto Mode's node lifetime (clouds.aws.auto_mode, karpenter_disruption): its admission refuses Karpenter's own.
        lifetime = mode.karpenter_disruption(plan.pool, window or Window.of(MaintenanceWindow()))
        kube.apply(karpenter.node_pool(plan, name, window, class_ref=mode.NODE_CLASS_REF, lifetime=lifetime),
                   self.child(provider=cluster.kubernetes, depends_on=[node_class]))
        self.register_outputs({"nodeClass": name, "nodePool": karpenter.node_pool_name(plan)})


def build_cluster(stack: StackConfig, opts: pulumi.ResourceOptions | None = None) -> ClusterHandle:
    return EksCluster(stack.cluster.name, stack, opts).handle()


def build_autoscaler(stack: StackConfig, cluster: ClusterHandle, plans: list[PoolPlan], service_monitor: dict | None,
                     after: list[pulumi.Resource], opts: pulumi.ResourceOptions | None = None) -> Component | None:
    autoscaler = resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)
    if stack.cluster.managed_mode == decide.AUTO_MODE:
        return None  # Auto Mode runs Karpenter itself
    if autoscaler == KARPENTER:
        return Karpenter("karpenter", stack, cluster, plans, service_monitor, after, opts)
    if autoscaler == CLUSTER_AUTOSCALER:
        return ClusterAutoscaler("cluster-autoscaler", stack, cluster, service_monitor, after, opts, plans=plans)
    return None


def build_pool(plan: PoolPlan, cluster: ClusterHandle, stack: StackConfig, installer: str, autoscaler: Component | None,
               opts: pulumi.ResourceOptions | None = None) -> Component:
    if stack.cluster.managed_mode == decide.AUTO_MODE:
        # A new cluster's role may tag what Auto Mode launches; an existing cluster's role is not gpupools' to know.
        return EksAutoModePool(plan, cluster, stack.target, opts, window_of(stack), tagged=stack.cluster.create)
    kind = resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler)
    return EksGpuNodePool(plan, cluster, stack.cluster.kubernetes_version, kind, autoscaler if isinstance(autoscaler, Karpenter) else None, opts,
                          window_of(stack))
