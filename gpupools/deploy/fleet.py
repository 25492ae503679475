"""A gpupools fleet on Pulumi: the MultiKueue manager (FleetManager) and what a worker stack adds for it
(FleetWorkerAccess). Decisions are gpupools.fleet's; this module only applies them."""

from __future__ import annotations

import base64

import pulumi
import pulumi_kubernetes as k8s

from gpupools.fleet import credentials
from gpupools.fleet.config import FleetStack
from gpupools.fleet.plan import FleetPlan, kubeconfig_secret, plan_fleet, queue_check_problems, release
from gpupools.stack.config import StackConfig

from gpupools.deploy import kube
from gpupools.deploy.base import ClusterHandle, Component
from gpupools.deploy.gpu_software import helm_release


class FleetWorkerAccess(Component):
    """On a worker: the service account, its ClusterRole and binding, the token Secret, and the kubeconfig the manager
    reads, built from the cluster's own API server and CA with the token (`kubeconfig`, a secret Output)."""

    TYPE = "FleetWorkerAccess"

    def __init__(self, name: str, cluster: ClusterHandle, after: list[pulumi.Resource], opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, opts)
        made: list[pulumi.Resource] = []
        token_secret = None
        for obj in credentials.worker_access_objects():
            if obj["kind"] == "Secret":
                # A typed Secret, so the engine marks its data secret and waits for the token controller to fill it in.
                token_secret = k8s.core.v1.Secret(obj["metadata"]["name"], metadata=obj["metadata"], type=obj["type"],
                                                  opts=self.child(provider=cluster.kubernetes, depends_on=made + after))
                continue
            made.append(kube.apply(obj, self.child(provider=cluster.kubernetes, depends_on=made + after)))
        assert token_secret is not None

        def build(args: list) -> str:
            kubeconfig, data, cluster_name = args
            token = base64.b64decode((data or {}).get("token", "")).decode() if (data or {}).get("token") else ""
            return credentials.token_kubeconfig(kubeconfig, token, str(cluster_name))

        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(cluster.kubeconfig, token_secret.data, cluster.name).apply(build))
        self.register_outputs({})


class FleetManager(Component):
    """The manager: its cluster (found or created by its cloud's component, with no GPU pool), Kueue with MultiKueue,
    per worker a Secret with the worker's `multikueueKubeconfig` stack output, and the objects of `plan_fleet`."""

    TYPE = "FleetManager"

    def __init__(self, name: str, stack: FleetStack, cluster_builder, opts: pulumi.ResourceOptions | None = None,
                 plan: FleetPlan | None = None):
        plan = plan or plan_fleet(stack)
        props = {
            "fleet": {
                "origin": stack.fleet.origin,
                "quotas": [{"team": q.team, "resource": q.resource, "manager": q.manager, "workers": q.workers, "onPurpose": q.on_purpose}
                           for q in plan.quotas],
                "workers": [{"name": v.name, "stack": v.entry.worker.stack, "tokenKubeconfig": v.entry.stack.fleet_worker is not None,
                             "reachable": plan.reach[v.name][0], "reach": plan.reach[v.name][1],
                             "missingTeams": [t.name for t in stack.fleet.teams if t.name not in v.teams],
                             "jobset": v.jobset, "engine": v.entry.stack.quotas}
                            for v in plan.views],
                "landing": [row.as_json() for row in plan.landing],
                "queueProblems": queue_check_problems(plan.objects),
            },
        }
        super().__init__(name, opts, props=props)
        self.plan = plan
        self.cluster: ClusterHandle = cluster_builder(self.child())
        provider = self.cluster.kubernetes
        namespaces = {o["metadata"]["name"]: kube.apply(o, self.child(provider=provider)) for o in plan.objects if o["kind"] == "Namespace"}
        kueue = helm_release(release(stack), self.child(provider=provider, depends_on=list(namespaces.values())))
        secrets = []
        for worker in stack.fleet.workers:
            ref = pulumi.StackReference(f"{name}-{worker.name}", stack_name=worker.stack, opts=self.child())
            kubeconfig = ref.require_output(credentials.OUTPUT).apply(_accepted(worker.name))
            # The key and namespace MultiKueue reads (kueue v0.19.2 multikueuecluster.go: key `kubeconfig`, in Kueue's namespace).
            secrets.append(k8s.core.v1.Secret(kubeconfig_secret(worker.name),
                                              metadata={"name": kubeconfig_secret(worker.name), "namespace": credentials.NAMESPACE,
                                                        "labels": {"app.kubernetes.io/managed-by": "gpupools"}},
                                              string_data={"kubeconfig": pulumi.Output.secret(kubeconfig)},
                                              opts=self.child(provider=provider, depends_on=[namespaces[credentials.NAMESPACE]],
                                                              additional_secret_outputs=["stringData", "data"])))
        for obj in plan.objects:
            if obj["kind"] == "Namespace":
                continue
            own = [namespaces[ns]] if (ns := obj["metadata"].get("namespace")) in namespaces else []
            after = own + [kueue] + (secrets if obj["kind"] == "MultiKueueCluster" else [])
            kube.apply(obj, self.child(provider=provider, depends_on=after))
        self.register_outputs({"workers": [w.name for w in stack.fleet.workers]})


def _accepted(worker: str):
    """The worker's kubeconfig as it came, once Kueue's own validation would take it; otherwise the deployment stops
    naming what is wrong, never the kubeconfig. pulumi.RunError: the language host prints its message alone, without the
    program's stack trace (pulumi/runtime/stack.py `run_pulumi_func`, the RunError branch of the Python language host)."""
    def check(text):
        problems = credentials.kubeconfig_problems(text)
        if problems:
            raise pulumi.RunError(f"worker {worker}: its {credentials.OUTPUT} stack output is a kubeconfig MultiKueue refuses: {'; '.join(problems)}")
        return text
    return check


def manager_stack(stack: FleetStack) -> StackConfig:
    """The manager's cluster as its cloud's component reads it: the fleet stack's cloud, cluster and provider keys, no pool."""
    return StackConfig.model_construct(cloud=stack.cloud, cluster=stack.cluster, pools=[], teams=[], providers=dict(stack.providers))
