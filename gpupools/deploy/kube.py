"""Apply plain Kubernetes manifests (dicts from the pure core) through the Kubernetes provider.

Objects are registered under the provider's own type tokens (`kubernetes:core/v1:ConfigMap`,
`kubernetes:monitoring.coreos.com/v1:PrometheusRule`, ...) with the manifest as their inputs, which is exactly
what pulumi_kubernetes' generated classes send. Going through one generic class keeps `gpupools plan` fast:
importing the generated `core.v1` module alone costs about 0.4 s.
"""

from __future__ import annotations

from typing import Any

import pulumi


def type_token(api_version: str, kind: str) -> str:
    """The core group is spelled `core/v1` in Pulumi tokens; every other group keeps its name."""
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{kind}"


def logical_name(obj: dict) -> str:
    meta = obj["metadata"]
    return "-".join(p for p in (obj["kind"].lower(), meta.get("namespace"), meta["name"]) if p)


class KubernetesObject(pulumi.CustomResource):
    """One Kubernetes object, any kind; outputs are the object as the API server returns it."""

    def __init__(self, obj: dict[str, Any], opts: pulumi.ResourceOptions):
        props = dict(obj)
        props.setdefault("status", None)
        super().__init__(type_token(obj["apiVersion"], obj["kind"]), logical_name(obj), props, opts)


class HelmRelease(pulumi.CustomResource):
    """A Helm release through the provider's `kubernetes:helm.sh/v3:Release`, with the inputs its SDK class sends.

    Registered directly for the same reason as `KubernetesObject`: the generated `helm.v3` module drags in the
    YAML and HTTP machinery of pulumi_kubernetes, a tenth of a second of every `gpupools plan`.
    """

    TYPE = "kubernetes:helm.sh/v3:Release"

    def __init__(self, resource_name: str, inputs: dict[str, Any], opts: pulumi.ResourceOptions):
        # `compat` and `status` are what pulumi_kubernetes' Release class always adds.
        super().__init__(self.TYPE, resource_name, {**inputs, "compat": "true", "status": None}, opts)


def apply(obj: dict, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    return KubernetesObject(obj, opts)
