#!/usr/bin/env python3
"""Regenerate each cloud's node API model (gpupools/clouds/<cloud>/node_api.json), which a pool's `node:` is checked against.

The model is the resource's inputs as the installed Pulumi SDK declares them, the SDK gpupools creates the resource
with: every input's provider name (`@pulumi.getter(name=...)` of the generated `...Args` class), its type from the
`__init__` annotation, nested input types followed, and the values of the SDK's enum types. Sources:

  azure  pulumi_azure_native.containerservice.AgentPoolArgs (pulumi-azure-native, its default API version)
  gcp    pulumi_gcp.container.NodePoolArgs (pulumi-gcp), whose string fields carry no enums (the provider is bridged from
         Terraform's): the enums of the same fields in GKE's API, the container v1 discovery document
         (--gke-discovery, default .venv/share/gpupools/container.v1.json), where the provider's name maps to the API's

  gcore  gcore.types.cloud.k8s.clusters.PoolCreateParams (the gcore SDK's TypedDict of a pool, Gcore's own snake_case)
  aws    Karpenter's CRDs as pinned in tests/reference/karpenter (aws/karpenter-provider-aws v1.14.1,
         pkg/apis/crds): the EC2NodeClass's spec and the NodePool's spec, under the keys nodeClass and nodePool
         (the CEL rules are checked on the objects gpupools writes, by tests/autoscaling)
  aws-node-group  (gpupools/clouds/aws/node_group_api.json) a managed node group: pulumi_aws.eks.NodeGroupArgs, its
         launchTemplate the data of pulumi_aws.ec2.LaunchTemplateArgs, with the enums of the same fields in botocore's
         eks CreateNodegroup and ec2 RequestLaunchTemplateData shapes; kubelet: nodeadm's NodeConfig spec.kubelet
         (awslabs/amazon-eks-ami nodeadm/api/v1alpha1, the CRD pinned in tests/reference/amazon-eks-ami), its
         KubeletConfiguration fields typed as Karpenter's EC2NodeClass kubelet types the same fields

Usage: tools/node_api_models.py [--gke-discovery container.v1.json] [aws] [aws-node-group] [azure] [gcp]   (no argument: every cloud whose SDK is installed)
tests/clouds/test_node_settings_models.py derives them again from the installed SDKs and compares.
"""

from __future__ import annotations

import collections.abc
import enum
import importlib
import importlib.util
import importlib.metadata
import inspect
import json
import sys
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# cloud: (SDK distribution, module, Args class, inputs left out: the request's path and the resource's identity)
SOURCES = {
    "azure": ("pulumi_azure_native", "pulumi_azure_native.containerservice", "AgentPoolArgs",
              {"resourceGroupName", "resourceName", "agentPoolName"}),
    "gcp": ("pulumi_gcp", "pulumi_gcp.container", "NodePoolArgs", {"project", "cluster", "location", "name", "namePrefix"}),
}


def _inner(annotation: Any) -> list[Any]:
    """The types an SDK annotation admits once pulumi.Input (T, Awaitable[T], Output[T]) and Optional are taken off."""
    args = typing.get_args(annotation) if typing.get_origin(annotation) is typing.Union else (annotation,)
    out = []
    for arg in args:
        if arg is type(None) or typing.get_origin(arg) is collections.abc.Awaitable:
            continue
        if isinstance(arg, typing.ForwardRef) and arg.__forward_arg__ == "Output[T]":
            continue
        out.append(arg)
    return out


Any = typing.Any


def _schema(module, annotation: Any, seen: tuple[str, ...]) -> dict:
    kinds = _inner(annotation)
    names = [k.__forward_arg__ if isinstance(k, typing.ForwardRef) else k for k in kinds]
    enums = [getattr(module, n) for n in names if isinstance(n, str) and isinstance(getattr(module, n, None), type)
             and issubclass(getattr(module, n), enum.Enum)]
    if enums:
        return {"type": "string", "enum": sorted({m.value for e in enums for m in e})}
    classes = [n for n in names if isinstance(n, str) and n.endswith("Args")]
    if classes:
        return _object(module, getattr(module, classes[0]), seen)
    for k in kinds:
        origin = typing.get_origin(k)
        if origin in (collections.abc.Sequence, list):
            return {"type": "array", "items": _schema(module, typing.get_args(k)[0], seen)}
        if origin in (collections.abc.Mapping, dict):
            return {"type": "map", "values": _schema(module, typing.get_args(k)[1], seen)}
    for k in kinds:
        if k is bool:
            return {"type": "boolean"}
        if k is int:
            return {"type": "integer"}
        if k is float:
            return {"type": "number"}
        if k is str:
            return {"type": "string"}
    if any(n == "Any" or k is typing.Any for n, k in zip(names, kinds)):
        return {"type": "map", "values": {"type": "string"}}
    raise ValueError(f"cannot read {annotation!r}")


def _object(module, cls: type, seen: tuple[str, ...], leave_out: set[str] = frozenset()) -> dict:
    if cls.__name__ in seen:
        return {"type": "map", "values": {"type": "string"}}
    names = {python: prop.fget._pulumi_name for python, prop in vars(cls).items()
             if isinstance(prop, property) and hasattr(prop.fget, "_pulumi_name")}
    parameters = inspect.signature(cls.__init__).parameters
    fields = {}
    for python, provider in sorted(names.items(), key=lambda kv: kv[1]):
        if provider in leave_out or python not in parameters:
            continue
        fields[provider] = _schema(module, parameters[python].annotation, seen + (cls.__name__,))
    return {"type": "object", "fields": fields}


# The provider's field name -> the API's, where the Terraform provider renamed it (NodePool and NodeConfig).
GKE_RENAMES = {"nodeConfig": "config", "hugepagesConfig": "hugepages", "guestAccelerators": "accelerators"}
GKE_DISCOVERY = ROOT / ".venv" / "share" / "gpupools" / "container.v1.json"


def add_api_enums(model: dict, doc: dict, schema_name: str) -> int:
    """Copy the API's enums onto the provider's string fields of the same (or renamed) name; the count added."""
    schemas = doc["schemas"]

    def walk(node: dict, api: dict) -> int:
        api = schemas[api["$ref"]] if "$ref" in api else api
        if node["type"] == "object":
            props = api.get("properties", {})
            return sum(walk(sub, props[GKE_RENAMES.get(name, name)]) for name, sub in node["fields"].items()
                       if GKE_RENAMES.get(name, name) in props)
        if node["type"] == "array" and api.get("type") == "array":
            return walk(node["items"], api["items"])
        if node["type"] == "string" and "enum" in api:
            node["enum"] = [v for v in api["enum"] if not v.endswith("_UNSPECIFIED")]
            return 1
        return 0

    return walk(model, schemas[schema_name])


KARPENTER_CRDS = {"nodeClass": "karpenter.k8s.aws_ec2nodeclasses.yaml", "nodePool": "karpenter.sh_nodepools.yaml"}


def _from_openapi(node: dict) -> dict:
    if node.get("x-kubernetes-int-or-string"):
        return {"type": "int-or-string"}
    kind = node.get("type")
    if kind == "object":
        if "properties" in node:
            return {"type": "object", "fields": {k: _from_openapi(v) for k, v in sorted(node["properties"].items())}}
        extra = node.get("additionalProperties")
        return {"type": "map", "values": _from_openapi(extra) if isinstance(extra, dict) and extra.get("type") else {"type": "string"}}
    if kind == "array":
        return {"type": "array", "items": _from_openapi(node["items"])}
    out = {"type": kind}
    if "enum" in node:
        out["enum"] = [str(v) for v in node["enum"]]
    return out


def derive_karpenter() -> dict:
    import yaml

    model = {"type": "object", "fields": {}}
    for key, name in KARPENTER_CRDS.items():
        crd = yaml.safe_load((ROOT / "tests" / "reference" / "karpenter" / name).read_text())
        version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
        model["fields"][key] = _from_openapi(version["schema"]["openAPIV3Schema"]["properties"]["spec"])
    return {"source": "Karpenter v1.14.1 CRDs (aws/karpenter-provider-aws pkg/apis/crds, pinned in tests/reference/karpenter): "
                      "EC2NodeClass and NodePool spec (generated by tools/node_api_models.py)", "model": model}


def _from_hint(hint: Any) -> dict:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        return _from_hint(next(a for a in args if a is not type(None)))
    if origin is typing.Literal:
        return {"type": "string", "enum": sorted(str(a) for a in args)}
    if origin in (dict, collections.abc.Mapping):
        return {"type": "map", "values": _from_hint(args[1])}
    if origin in (list, collections.abc.Sequence):
        return {"type": "array", "items": _from_hint(args[0])}
    return {bool: {"type": "boolean"}, int: {"type": "integer"}, float: {"type": "number"}, str: {"type": "string"}}[hint]


def derive_gcore() -> dict:
    from gcore.types.cloud.k8s.clusters import pool_create_params

    hints = typing.get_type_hints(pool_create_params.PoolCreateParams)
    fields = {name: _from_hint(hint) for name, hint in sorted(hints.items()) if name not in ("project_id", "region_id")}
    version = importlib.metadata.version("gcore")
    return {"source": f"gcore {version}: gcore.types.cloud.k8s.clusters.PoolCreateParams (generated by tools/node_api_models.py)",
            "model": {"type": "object", "fields": fields}}


# Inputs of the two Pulumi resources a `node:` does not reach: the request's path and the resource's identity, and the
# launch template's own versioning and tags (the instances' tags are tagSpecifications).
NODE_GROUP_LEFT_OUT = {"clusterName", "nodeGroupName", "nodeGroupNamePrefix", "region", "launchTemplate"}
LAUNCH_TEMPLATE_LEFT_OUT = {"name", "namePrefix", "region", "defaultVersion", "updateDefaultVersion", "description", "tags"}
# pulumi_aws's name -> botocore's, where the Terraform provider renamed a field; the rest match ignoring case.
BOTOCORE_RENAMES = {"subnetIds": "subnets", "nodeRoleArn": "nodeRole", "sourceSecurityGroupIds": "sourceSecurityGroups",
                    "vpcSecurityGroupIds": "SecurityGroupIds", "securityGroupNames": "SecurityGroups"}


def add_botocore_enums(model: dict, shape, unmatched: list[str], path: str = "") -> None:
    """Copy botocore's enums onto the provider's string fields of the same (or renamed) name; `unmatched` collects the
    provider's fields botocore's shape does not have."""
    if model["type"] == "object":
        members = {name.lower(): sub for name, sub in getattr(shape, "members", {}).items()}
        for name, sub in model["fields"].items():
            found = members.get(BOTOCORE_RENAMES.get(name, name).lower())
            if found is None:
                unmatched.append(f"{path}{name}")
            else:
                add_botocore_enums(sub, found, unmatched, f"{path}{name}.")
    elif model["type"] == "array" and shape.type_name == "list":
        add_botocore_enums(model["items"], shape.member, unmatched, path)
    elif model["type"] == "string" and getattr(shape, "enum", None):
        model["enum"] = list(shape.enum)


NODEADM_CRD = ROOT / "tests" / "reference" / "amazon-eks-ami" / "node.eks.aws_nodeconfigs.yaml"


def derive_node_group() -> tuple[dict, list[str]]:
    import botocore.session
    import yaml

    session = botocore.session.get_session()
    eks, ec2 = importlib.import_module("pulumi_aws.eks"), importlib.import_module("pulumi_aws.ec2")
    model = _object(eks, eks.NodeGroupArgs, (), NODE_GROUP_LEFT_OUT)
    template = _object(ec2, ec2.LaunchTemplateArgs, (), LAUNCH_TEMPLATE_LEFT_OUT)
    unmatched: list[str] = []
    add_botocore_enums(model, session.get_service_model("eks").operation_model("CreateNodegroup").input_shape, unmatched)
    add_botocore_enums(template, session.get_service_model("ec2").shape_for("RequestLaunchTemplateData"), unmatched, "launchTemplate.")
    model["fields"]["launchTemplate"] = template
    # nodeadm's kubelet options: `config` is a KubeletConfiguration merged over nodeadm's defaults (free-form in the CRD),
    # typed here by the fields Karpenter's EC2NodeClass passes to the same KubeletConfiguration.
    crd = yaml.safe_load(NODEADM_CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    kubelet = _from_openapi(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["kubelet"])
    node_class = yaml.safe_load((ROOT / "tests" / "reference" / "karpenter" / KARPENTER_CRDS["nodeClass"]).read_text())
    node_class = next(v for v in node_class["spec"]["versions"] if v.get("storage"))
    kubelet["fields"]["config"] = _from_openapi(node_class["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["kubelet"])
    model["fields"]["kubelet"] = kubelet
    versions = ", ".join(f"{d} {importlib.metadata.version(d)}" for d in ("pulumi_aws", "botocore"))
    return {"source": f"{versions}: pulumi_aws.eks.NodeGroupArgs, launchTemplate pulumi_aws.ec2.LaunchTemplateArgs, enums of botocore's "
                      f"eks CreateNodegroup and ec2 RequestLaunchTemplateData; kubelet nodeadm NodeConfig spec.kubelet (amazon-eks-ami "
                      f"v20260724), its config typed as Karpenter v1.14.1's EC2NodeClass kubelet (generated by tools/node_api_models.py)",
            "model": model}, unmatched


def derive(cloud: str, gke_discovery: Path = GKE_DISCOVERY) -> dict:
    if cloud == "aws-node-group":
        return derive_node_group()[0]
    if cloud == "aws":
        return derive_karpenter()
    if cloud == "gcore":
        return derive_gcore()
    distribution, module_name, cls_name, leave_out = SOURCES[cloud]
    module = importlib.import_module(module_name)
    model = _object(module, getattr(module, cls_name), (), leave_out)
    version = importlib.metadata.version(distribution.replace("_", "-"))
    source = f"{distribution} {version}: {module_name}.{cls_name} (generated by tools/node_api_models.py)"
    if cloud == "gcp":
        doc = json.loads(gke_discovery.read_text())
        add_api_enums(model, doc, "NodePool")
        source += f"; enums from GKE's container {doc['version']} discovery document, revision {doc['revision']}"
    return {"source": source, "model": model}


def target(cloud: str) -> Path:
    if cloud == "aws-node-group":
        return ROOT / "gpupools" / "clouds" / "aws" / "node_group_api.json"
    return ROOT / "gpupools" / "clouds" / cloud / "node_api.json"


def main(argv: list[str]) -> int:
    discovery = GKE_DISCOVERY
    if argv[:1] == ["--gke-discovery"]:
        discovery, argv = Path(argv[1]), argv[2:]
    clouds = argv or ["aws", "aws-node-group", *(c for c, (dist, *_rest) in SOURCES.items() if importlib.util.find_spec(dist)),
                      *(["gcore"] if importlib.util.find_spec("gcore") else [])]
    for cloud in clouds:
        target(cloud).write_text(json.dumps(derive(cloud, discovery), indent=1, sort_keys=True) + "\n")
        print(f"wrote {target(cloud).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
