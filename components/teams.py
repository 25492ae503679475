"""Team namespaces, GPU ResourceQuotas and the admission policy that keeps each team on its pools."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from . import kube
from .base import Component


class TeamQuotas(Component):
    """Applies `gpupools.teams.team_objects`. Quotas wait for their namespace, bindings for their policy.

    Nothing here waits for GPU pools: quotas and admission policies are plain API objects, valid before a
    single GPU node exists.
    """

    TYPE = "TeamQuotas"

    def __init__(self, name: str, objects: list[dict], kubernetes: k8s.Provider, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, opts)
        namespaces = [kube.apply(obj, self.child(provider=kubernetes)) for obj in objects if obj["kind"] == "Namespace"]
        policies = [kube.apply(obj, self.child(provider=kubernetes)) for obj in objects if obj["kind"] == "ValidatingAdmissionPolicy"]
        for obj in objects:
            if obj["kind"] == "ResourceQuota":
                kube.apply(obj, self.child(provider=kubernetes, depends_on=namespaces))
            elif obj["kind"] == "ValidatingAdmissionPolicyBinding":
                kube.apply(obj, self.child(provider=kubernetes, depends_on=policies))
        self.namespaces = [obj["metadata"]["name"] for obj in objects if obj["kind"] == "Namespace"]
        self.register_outputs({"namespaces": self.namespaces})
