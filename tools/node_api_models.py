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

Usage: tools/node_api_models.py [--gke-discovery container.v1.json] [azure] [gcp]   (no argument: every cloud whose SDK is installed)
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


def derive(cloud: str, gke_discovery: Path = GKE_DISCOVERY) -> dict:
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
    return ROOT / "gpupools" / "clouds" / cloud / "node_api.json"


def main(argv: list[str]) -> int:
    discovery = GKE_DISCOVERY
    if argv[:1] == ["--gke-discovery"]:
        discovery, argv = Path(argv[1]), argv[2:]
    clouds = argv or ["aws", *(c for c, (dist, *_rest) in SOURCES.items() if importlib.util.find_spec(dist)),
                      *(["gcore"] if importlib.util.find_spec("gcore") else [])]
    for cloud in clouds:
        target(cloud).write_text(json.dumps(derive(cloud, discovery), indent=1, sort_keys=True) + "\n")
        print(f"wrote {target(cloud).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
