"""Apply plain Kubernetes manifests (dicts from the pure core) as typed pulumi_kubernetes resources."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

_KINDS = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "ResourceQuota"): k8s.core.v1.ResourceQuota,
    ("v1", "LimitRange"): k8s.core.v1.LimitRange,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
}


def logical_name(obj: dict) -> str:
    meta = obj["metadata"]
    return "-".join(p for p in (obj["kind"].lower(), meta.get("namespace"), meta["name"]) if p)


def apply(obj: dict, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Typed resources where the SDK has them; anything else (CRDs such as PrometheusRule) as CustomResource."""
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    cls = _KINDS.get((obj["apiVersion"], obj["kind"]))
    if cls is not None:
        return cls(logical_name(obj), **body, opts=opts)
    return k8s.apiextensions.CustomResource(logical_name(obj), api_version=obj["apiVersion"], kind=obj["kind"], **body, opts=opts)
