"""Team namespaces and whatever keeps their GPU quotas: Kueue and its queues, KAI Scheduler and its queues, or ResourceQuotas."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpupools.queues.engine import QuotaPlan

from gpupools.deploy import kube
from gpupools.deploy.base import Component
from gpupools.deploy.gpu_software import helm_release

# Objects whose admission needs another object first: bindings their policy, custom resources their CRDs
# (and Kueue's webhooks), which the engine's Helm release brings.
CLUSTER_POLICY = "ValidatingAdmissionPolicy"
MONITORING_GROUP = "monitoring.coreos.com/"
QUEUE = "Queue"


class TeamQuotas(Component):
    """Applies a `QuotaPlan`: namespaces, then the engine's release, then quotas, queues and admission policies.

    Nothing here waits for GPU pools: queues, quotas and admission policies are plain API objects, valid
    before a single GPU node exists.
    """

    TYPE = "TeamQuotas"

    def __init__(self, name: str, plan: QuotaPlan, kubernetes: k8s.Provider, monitoring: list[pulumi.Resource] | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        """`monitoring`: the releases that bring the Prometheus Operator CRDs the ServiceMonitor needs."""
        super().__init__(name, opts)
        # Each object waits for what it needs by name: its own namespace, its own policy. Depending on every
        # namespace would give n teams n x n dependencies, which the engine resolves for each registration.
        namespaces = {obj["metadata"]["name"]: kube.apply(obj, self.child(provider=kubernetes))
                      for obj in plan.objects if obj["kind"] == "Namespace"}
        releases = [helm_release(r, self.child(provider=kubernetes, depends_on=list(namespaces.values()))) for r in plan.releases]
        policies = {obj["metadata"]["name"]: kube.apply(obj, self.child(provider=kubernetes))
                    for obj in plan.objects if obj["kind"] == CLUSTER_POLICY}
        # KAI's queue webhook refuses a queue whose parent does not exist yet (queue_validator.go, validateParentChildQuota):
        # a team's queue waits for its department's.
        queues: dict[str, pulumi.Resource] = {}
        for obj in plan.objects:
            if obj["kind"] in ("Namespace", CLUSTER_POLICY):
                continue
            own = [namespaces[ns]] if (ns := obj["metadata"].get("namespace")) in namespaces else []
            after = own + releases
            if obj["kind"] == "ValidatingAdmissionPolicyBinding":
                after = [policies[obj["spec"]["policyName"]]]
            elif obj["apiVersion"].startswith(MONITORING_GROUP):
                after = own + list(monitoring or [])
            elif obj["kind"] == QUEUE and (parent := obj["spec"].get("parentQueue")) in queues:
                after = after + [queues[parent]]
            resource = kube.apply(obj, self.child(provider=kubernetes, depends_on=after))
            if obj["kind"] == QUEUE:
                queues[obj["metadata"]["name"]] = resource
        self.engine = plan.engine
        self.namespaces = [obj["metadata"]["name"] for obj in plan.objects if obj["kind"] == "Namespace"]
        self.register_outputs({"engine": plan.engine, "namespaces": self.namespaces})
