"""Resources registered by type token (components/wire.py) send exactly what pulumi_aws's own classes send."""

from __future__ import annotations

import re

from conftest import plan_of, stack_config
from gpupools.cli.planrun import run_program

# type token -> (pulumi_aws module, class)
SDK_CLASSES = {
    "aws:ec2/vpc:Vpc": ("ec2", "Vpc"),
    "aws:ec2/internetGateway:InternetGateway": ("ec2", "InternetGateway"),
    "aws:ec2/routeTable:RouteTable": ("ec2", "RouteTable"),
    "aws:ec2/subnet:Subnet": ("ec2", "Subnet"),
    "aws:ec2/eip:Eip": ("ec2", "Eip"),
    "aws:ec2/natGateway:NatGateway": ("ec2", "NatGateway"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("ec2", "RouteTableAssociation"),
    "aws:ec2/launchTemplate:LaunchTemplate": ("ec2", "LaunchTemplate"),
    "aws:iam/role:Role": ("iam", "Role"),
    "aws:iam/rolePolicy:RolePolicy": ("iam", "RolePolicy"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("iam", "RolePolicyAttachment"),
    "aws:sqs/queue:Queue": ("sqs", "Queue"),
    "aws:sqs/queuePolicy:QueuePolicy": ("sqs", "QueuePolicy"),
    "aws:cloudwatch/eventRule:EventRule": ("cloudwatch", "EventRule"),
    "aws:cloudwatch/eventTarget:EventTarget": ("cloudwatch", "EventTarget"),
    "aws:autoscaling/tag:Tag": ("autoscaling", "Tag"),
    "aws:eks/addon:Addon": ("eks", "Addon"),
    "aws:kms/key:Key": ("kms", "Key"),
    "aws:cloudwatch/logGroup:LogGroup": ("cloudwatch", "LogGroup"),
    "aws:eks/accessEntry:AccessEntry": ("eks", "AccessEntry"),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": ("eks", "PodIdentityAssociation"),
    "gcp:compute/router:Router": ("compute", "Router"),
    "gcp:compute/routerNat:RouterNat": ("compute", "RouterNat"),
}
MAPS = ("tags",)  # user-keyed maps: their keys are data, not property names


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def to_sdk_args(value, in_map: bool = False):
    if isinstance(value, dict):
        return {(k if in_map else snake(k)): to_sdk_args(v, k in MAPS and not in_map) for k, v in value.items()}
    if isinstance(value, list):
        return [to_sdk_args(v) for v in value]
    return value


def test_every_type_token_registration_matches_the_sdk_class():
    plans = [plan_of(stack_config("aws", pools=[{"name": "a", "instanceType": "g5.2xlarge", "maxNodes": 2, "sharing": {"mode": "mps", "replicas": 2}}])),
             plan_of(stack_config("aws", autoscaler="cluster-autoscaler")), plan_of(stack_config("gcp"))]
    samples = {}
    for plan in plans:
        for resource in plan.resources:
            if resource.type in SDK_CLASSES:
                samples.setdefault(resource.type, resource)
    assert set(samples) == set(SDK_CLASSES)  # every wire-registered type is covered

    def program() -> None:
        import pulumi_aws as aws
        import pulumi_gcp as gcp

        for typ, resource in samples.items():
            module, cls = SDK_CLASSES[typ]
            sdk = {"aws": aws, "gcp": gcp}[typ.split(":", 1)[0]]
            getattr(getattr(sdk, module), cls)(resource.name, **to_sdk_args(resource.inputs))

    typed = run_program({"aws:region": "eu-central-1"}, "typed", program)
    for typ, generic in samples.items():
        sdk = typed.get(typ, generic.name)
        assert sdk.inputs == generic.inputs, typ
        assert sdk.version == generic.version != "", typ
