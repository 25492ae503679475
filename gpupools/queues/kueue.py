"""Team quotas on Kueue: workloads queue for their team's share instead of failing, teams in one cohort lend
what they do not use, and a lender takes its share back by preemption.

The objects, all `kueue.x-k8s.io/v1beta2` (the storage version of the pinned CRDs):
- one ResourceFlavor per GPU pool, named after it: the pool label as `nodeLabels` and the GPU taint as
  `tolerations`, which Kueue adds to a workload it admits on that flavor, so the pods land on the pool the
  quota came from without naming it;
- one ClusterQueue per team, named after it, in the cohort `gpupools`: a nominal quota per pool on the pool's
  resource, `borrowingLimit`/`lendingLimit` from the stack file, preemption that reclaims lent quota
  (`reclaimWithinCohort: Any`) and lets a team's own high-priority work preempt its low-priority work;
- a LocalQueue in each team namespace, named after the team: workloads name it in `kueue.x-k8s.io/queue-name`;
- WorkloadPriorityClasses `high`, `normal` and `low`;
- a ValidatingAdmissionPolicy per team namespace that refuses GPU workloads which would bypass the queue or
  ask for a priority above the team's.

Quotas cover only the GPU resources (`quotaCheckStrategy: IgnoreUndeclared`): CPU and memory of a GPU node
come with its GPUs, and a quota on them would only add ways for a workload to wait.
"""

from __future__ import annotations

import yaml

from gpupools.capacity.sources import (PODS_READY_TIMEOUT_MINUTES, REQUEUE_BACKOFF_BASE_SECONDS, REQUEUE_BACKOFF_MAX_SECONDS, Flavor,
                                      flavor_shares, sources)
from gpupools.stack.config import StackConfig
from gpupools.core.pools import PoolPlan, toleration
from gpupools.pools.software import Chart, Release, namespace as software_namespace
from gpupools.fabric.computedomain import CHANNEL_CLASS, QUEUE_RESOURCE, rack_pools, rack_scale
from gpupools.fabric.dragpu import device_class_mappings as dra_gpu_mappings  # DRA pools' GPU classes (a preview)
from gpupools.fabric.plan import HOSTNAME, FabricPlan, plan_fabrics
from gpupools.queues.teams import MANAGED, TeamPlan, admission_binding, cel_string, namespace, requests_gpu_expression, team_admission_policy, team_labels

# The published chart points at registry.k8s.io/kueue/kueue:<appVersion> (the repository's values.yaml names a
# staging image; the release script rewrites it), so the image is left to the chart.
CHART = Chart("kueue", "oci://registry.k8s.io/kueue/charts/kueue", "", "kueue-system", "0.19.2")
API_VERSION = "kueue.x-k8s.io/v1beta2"
COHORT = "gpupools"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PRIORITIES = {"high": 10000, "normal": 1000, "low": 100}
PRIORITY_DESCRIPTIONS = {
    "high": "Production work: preempts lower-priority work of the same team.",
    "normal": "The default for team workloads.",
    "low": "Best effort: the first to be preempted within its team.",
}
# Jobs, plain Pods (notebooks), Deployments and StatefulSets (inference servers), and JobSets (multi-node jobs: the
# framework name is kueue v0.19.2 pkg/controller/jobs/jobset/jobset_controller.go, FrameworkName). Deployments and
# StatefulSets are queued through their pods, so `pod` must be on for them. Without the JobSet CRD in the cluster Kueue
# defers the JobSet controller until it appears (pkg/controller/jobframework/setup.go, WaitForAPI), so the integration
# is on in every stack, whether or not the stack installs JobSet (fabric.software.jobset_release).
INTEGRATIONS = ["batch/job", "pod", "deployment", "statefulset", "jobset.x-k8s.io/jobset"]
METRICS_SERVICE_LABELS = {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/instance": CHART.release,
                          "app.kubernetes.io/component": "metrics-service"}


def allowed_priorities(team_priority: str) -> list[str]:
    """A team may ask for its own priority or anything lower."""
    ranked = sorted(PRIORITIES, key=PRIORITIES.__getitem__, reverse=True)
    return ranked[ranked.index(team_priority):]


def device_class_mappings(plans: list[PoolPlan]) -> list[dict]:
    """Where the stack has rack-scale pools: the ComputeDomain channel's DeviceClass as a queue resource, so that Kueue
    admits a job whose pods claim a channel (a DeviceClass not mapped makes the workload inadmissible: kueue v0.19.2
    pkg/dra/claims.go, "DeviceClass %s is not mapped in DRA configuration"). The field is Resources.DeviceClassMappings
    (apis/config/v1beta2/configuration_types.go), read while the KueueDRAIntegration gate is on: Beta and on by default
    since 0.18 (pkg/features/kube_features.go), so no gate is set. Empty for other stacks."""
    channel = [{"name": QUEUE_RESOURCE, "deviceClassNames": [CHANNEL_CLASS]}] if rack_pools(plans) else []
    return channel + dra_gpu_mappings(plans)


def manager_configuration(mappings: list[dict] | None = None) -> dict:
    """The controller's `Configuration` (config.kueue.x-k8s.io/v1beta2).

    The chart renders `managerConfig.controllerManagerConfigYaml` as is, so this repeats the chart's own
    defaults for health, metrics, webhook and leader election beside what gpupools changes: the integrations,
    namespaces limited to the teams', per-ClusterQueue quota metrics, GPU-only quota checks, and the all-or-nothing
    wait for a workload's pods (`waitForPodsReady`, kueue v0.19.2 apis/config/v1beta2/configuration_types.go lines 302-329
    and 402-440).
    """
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        # Kueue manages workloads that name a queue, and only in team namespaces: nothing elsewhere is held back.
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": "gpupools.io/team", "operator": "Exists"}]},
        "integrations": {"frameworks": list(INTEGRATIONS)},
        "resources": {"quotaCheckStrategy": "IgnoreUndeclared", **({"deviceClassMappings": mappings} if mappings else {})},
        # All or nothing: a workload admitted whose pods are not all ready in time gives its quota back and is requeued,
        # with a backoff and no limit. Quotas know no capacity: a Capacity Block's flavor admits jobs before the block
        # starts and after it ends, and a pool's nodes can fail to come at all (capacity.sources, PODS_READY_TIMEOUT_MINUTES).
        # Kueue 0.19 sets these same values by default; written out, they stay what the plan says.
        "waitForPodsReady": {
            "timeout": f"{PODS_READY_TIMEOUT_MINUTES}m",
            "recoveryTimeout": f"{PODS_READY_TIMEOUT_MINUTES}m",
            "blockAdmission": False,  # True would hold every other admission until the workload's pods are ready
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": REQUEUE_BACKOFF_BASE_SECONDS,
                                  "backoffMaxSeconds": REQUEUE_BACKOFF_MAX_SECONDS},
        },
    }


def helm_values(mappings: list[dict] | None = None) -> dict:
    return {"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager_configuration(mappings), sort_keys=False)},
            "controllerManager": {"replicas": 2, "podDisruptionBudget": {"enabled": True, "minAvailable": 1}}}


def pool_flavors(stack: StackConfig, plan: PoolPlan, autoscaler: str = "") -> list[Flavor]:
    """A pool's flavors in its capacity order: one per kind its nodes can be told apart by (reserved before hourly
    on Karpenter), else one named after the pool."""
    kinds = stack.target.capacity_flavor_labels(plan.pool, autoscaler)
    if len(kinds) == 1:
        return [Flavor(plan.name, "", {**plan.node_selector, **kinds[0][1]})]
    return [Flavor(f"{plan.name}-{kind}", kind, {**plan.node_selector, **labels}) for kind, labels in kinds]



def topology_aware(stack: StackConfig, plan: PoolPlan, fabric: FabricPlan | None) -> bool:
    """Whether the pool's flavors name the cluster's Topology (topology-aware scheduling, TAS).

    TAS fits a workload only into nodes that exist: it counts the allocatable of Ready, schedulable nodes (kueue
    v0.19.2 site/content/en/docs/concepts/topology_aware_scheduling.md, "Capacity calculation"; pkg/cache/scheduler/
    tas_nodes_cache.go). A workload that does not fit stays suspended, creates no pod, and no autoscaler ever sees
    it. So a fabric pool's flavors are topology-aware only where the nodes are there before admission: a pool fixed
    at its size (minNodes = maxNodes), or a flavor behind a ProvisioningRequest admission check, for which Kueue
    assigns the topology only after the nodes are provisioned (pkg/scheduler/flavorassigner/tas_flavorassigner.go,
    podSetTopologyRequest: DelayedTopologyRequest while the check has no quota reservation). Karpenter 1.14 has no
    ProvisioningRequest support (Kueue's provisioning admission check needs a cluster-autoscaler-style provisioner that
    Karpenter does not implement), so a Karpenter fabric pool that scales from
    zero keeps its nodes close by its placement group, not by Kueue."""
    if fabric is None or not fabric.levels:
        return False
    return plan.pool.min_nodes >= plan.pool.max_nodes or stack.target.provisioning_request_class(plan.pool) is not None


def topology_guarantee(stack: StackConfig, plan: PoolPlan, fabric: FabricPlan | None, autoscaler: str = "") -> str | None:
    """What keeps a multi-node job's pods close on a fabric pool, in words; None for pools without a fabric."""
    if fabric is None:
        return None
    if not fabric.levels:
        return f"{fabric.placement} (the cloud's nodes carry no topology labels)"
    if topology_aware(stack, plan, fabric):
        why = ("the pool's nodes exist before admission (minNodes = maxNodes)" if plan.pool.min_nodes >= plan.pool.max_nodes
               else "a ProvisioningRequest admission check brings the nodes before Kueue places the pods")
        return f"topology-aware: Kueue places a job's pods by {fabric.levels[-1][1]}, {why}"
    engine = {"karpenter": "Karpenter"}.get(autoscaler, "the autoscaler")
    close = f"{fabric.placement} keeps the nodes close" if fabric.keeps_close else f"nothing keeps the nodes close: {fabric.placement}"
    return (f"topology best effort: the pool scales from zero on {engine} and Kueue's topology-aware scheduling counts only nodes "
            f"that exist, so its flavor is not topology-aware; {close}")


def topology_enforced(stack: StackConfig, plan: PoolPlan, fabric: FabricPlan | None) -> bool:
    """Whether the pool's `topologyLevel` holds a multi-node job to that level: only Kueue reads it (a team Job's
    `kueue.x-k8s.io/podset-required-topology`), so the stack needs Kueue team queues, and only a topology-aware
    flavor takes the annotation (on any other Kueue refuses it: "does not support TopologyAwareScheduling", kueue
    v0.19.2 pkg/scheduler/flavorassigner/tas_flavorassigner.go, checkPodSetAndFlavorMatchForTAS)."""
    return (fabric is not None and fabric.required_level is not None and stack.quotas == "kueue" and bool(stack.teams)
            and topology_aware(stack, plan, fabric))


def topology_level_warnings(stack: StackConfig, plans: list[PoolPlan]) -> list[str]:
    """One line per pool whose `topologyLevel` nothing enforces (`topology_enforced`): the stack declares a level its
    multi-node jobs must fit in, and they will not be held to it."""
    fabrics = plan_fabrics(stack, plans)
    index = {p.name: i for i, p in enumerate(stack.pools)}
    lines = []
    for plan in plans:
        fabric = fabrics.get(plan.name)
        if fabric is None or fabric.required_level is None or topology_enforced(stack, plan, fabric):
            continue
        field = f"pools[{index[plan.name]}].topologyLevel"
        close = (f"only {fabric.placement} keeps its nodes close" if fabric.keeps_close
                 else f"nothing keeps its nodes close ({fabric.placement})")
        if stack.quotas != "kueue" or not stack.teams:
            lines.append(f"{field}: {plan.pool.topology_level} is not enforced: only Kueue team queues read it (gpupools:quotas: "
                         f"kueue with teams), and this stack has none; {close}")
            continue
        # TAS counts only Ready, schedulable nodes that exist (kueue v0.19.2 site/content/en/docs/concepts/
        # topology_aware_scheduling.md, "Capacity calculation"), so a pool whose nodes start on demand gets a flavor
        # without the Topology (`topology_aware`), and its Jobs carry no required level.
        lines.append(f"{field}: {plan.pool.topology_level} is not enforced: pool {plan.name} starts its nodes on demand (minNodes "
                     f"{plan.pool.min_nodes}, maxNodes {plan.pool.max_nodes}) and Kueue's topology-aware scheduling counts only nodes "
                     f"that exist, so its jobs carry no kueue.x-k8s.io/podset-required-topology; {close}; set minNodes to maxNodes "
                     f"(the nodes then always run), or drop topologyLevel")
    return lines


def resource_flavor(stack: StackConfig, plan: PoolPlan, fabric: FabricPlan | None = None, flavor: Flavor | None = None) -> dict:
    """A fabric pool's flavor names the cluster's Topology where TAS can admit anything (`topology_aware`), so Kueue
    places a multi-node job's pods on nodes close together (beta and on by default since Kueue 0.14). `flavor`: which
    of the pool's capacity flavors (`pool_flavors`); the pool's first by default.

    The tolerations are the pool's and the cloud's (GKE's queued-provisioning taint among them): Kueue adds a flavor's
    tolerations to the pods it admits on it, and nothing else does (its provisioning controller adds none:
    pkg/controller/admissionchecks/provisioning/controller.go)."""
    flavor = flavor or pool_flavors(stack, plan)[0]
    own = plan.pool_taints
    tolerations = [toleration(t) for t in plan.taints if t not in own] + stack.target.extra_tolerations(plan)
    spec: dict = {"nodeLabels": dict(flavor.node_labels), "tolerations": tolerations}
    if own:
        # The pool's own taints are the flavor's nodeTaints, not its tolerations: Kueue assigns the flavor only to a
        # PodSet whose tolerations (with the flavor's) match each NoSchedule and NoExecute one (kueue v0.19.2
        # pkg/scheduler/flavorassigner/flavorassigner.go, checkFlavorForPodSets: FindMatchingUntoleratedTaint over
        # flavor.Spec.NodeTaints), so only a team that declares the tolerations is admitted there; as tolerations
        # Kueue would add them to every pod it admits there (pkg/podset/podset.go, FromAssignment).
        spec["nodeTaints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in own]
    if topology_aware(stack, plan, fabric):
        spec["topologyName"] = TOPOLOGY
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": flavor.name, "labels": dict(MANAGED)}, "spec": spec}


# The one Topology of a stack: the cloud's own topology labels, coarse to fine, then the node itself (the hostname
# level may only come last: CEL rule of the pinned kueue.x-k8s.io_topologies.yaml).
TOPOLOGY = "gpupools"
# Where a Job's pod template says how close its pods must sit (kueue apis/kueue/v1beta1/topology_types.go).
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"


def topology(fabrics: list[FabricPlan]) -> dict | None:
    """The Topology the topology-aware flavors name; `fabrics`: the pools whose flavors are topology-aware."""
    levels = next((f.levels for f in fabrics if f.levels), ())
    if not levels:
        return None
    return {"apiVersion": API_VERSION, "kind": "Topology", "metadata": {"name": TOPOLOGY, "labels": dict(MANAGED)},
            "spec": {"levels": [{"nodeLabel": label} for _, label in levels] + [{"nodeLabel": HOSTNAME}]}}


# A PodSet that asks for no particular placement but may use a topology-aware flavor (kueue v0.19.2
# apis/kueue/v1beta2/topology_types.go, PodSetUnconstrainedTopologyAnnotation).
UNCONSTRAINED_TOPOLOGY = "kueue.x-k8s.io/podset-unconstrained-topology"


def topology_annotation(fabric: FabricPlan) -> dict[str, str]:
    """A multi-node job on a topology-aware pool: within the pool's required level, or as close as Kueue can pack it
    without waiting."""
    if fabric.required_level:
        return {REQUIRED_TOPOLOGY: fabric.required_level}
    return {PREFERRED_TOPOLOGY: fabric.finest_level} if fabric.finest_level else {}


def podset_topology(stack: StackConfig, plan: PoolPlan, fabric: FabricPlan | None, gang: bool) -> dict[str, str]:
    """The pod-template annotations a queued Job for the pool carries.

    On a topology-aware flavor, a PodSet that asks for no topology is refused ("supports only
    TopologyAwareScheduling", pkg/scheduler/flavorassigner/tas_flavorassigner.go, checkPodSetAndFlavorMatchForTAS)
    unless every flavor of its ClusterQueue is topology-aware (pkg/cache/scheduler/clusterqueue.go, isTASOnly). A
    team queue mixes them whenever a team has a fabric pool beside another, so a Job for a topology-aware pool
    always says what it wants: a gang its level, a one-pod Job no constraint. On a flavor that is not
    topology-aware an explicit request is refused the same way ("does not support TopologyAwareScheduling"), so
    such Jobs carry none."""
    if not topology_aware(stack, plan, fabric):
        return {}
    assert fabric is not None
    return topology_annotation(fabric) if gang else {UNCONSTRAINED_TOPOLOGY: "true"}


def resource_groups(plan: TeamPlan, flavors: dict[str, list[Flavor]] | None = None) -> list[dict]:
    """One group per GPU resource, its flavors in pool order and, within a pool, in capacity order (Kueue tries them
    in that order); a team's units on a pool are split over the pool's flavors (`capacity.sources.flavor_shares`).

    A pool of several resources (a mixed MIG layout) puts them in one group, with every pool that shares one of them:
    Kueue's webhook takes each flavor and each resource in one group only (pkg/webhooks/clusterqueue_webhook.go,
    validateResourceGroups), and each flavor of a group names every covered resource (the CRD's rule
    `self.flavors.all(x, size(x.resources) == size(self.coveredResources))`), with 0 for those its pool lacks."""
    groups = []
    for resources in _connected(plan):
        entries = []
        for pool in (p for p in plan.pools if set(queued_resources(p)) & set(resources)):
            pool_flavors_ = (flavors or {}).get(pool.name) or [Flavor(pool.name, "", pool.node_selector)]
            gpu_resources = [r for r in resources if r != QUEUE_RESOURCE]
            shares = {r: flavor_shares(pool, plan.nominal_of(pool, r), pool_flavors_, pool.node_resources.get(r, 0)) for r in gpu_resources}
            if QUEUE_RESOURCE in resources:
                # One channel per pod, and a pod takes one unit at least: as many channels as units, on rack pools only.
                shares[QUEUE_RESOURCE] = {f: sum(s[f] for s in shares.values()) if rack_scale(pool) else 0 for f in shares[gpu_resources[0]]}
            for flavor in shares[gpu_resources[0]]:
                quotas = []
                for resource in resources:
                    units = shares[resource][flavor]
                    quota: dict = {"name": resource, "nominalQuota": units}
                    if plan.borrowing_limit() is not None:
                        quota["borrowingLimit"] = plan.borrowing_limit()
                    if plan.lending_limit(pool.name) is not None:
                        quota["lendingLimit"] = min(plan.lending_limit(pool.name), units)
                    quotas.append(quota)
                entries.append({"name": flavor, "resources": quotas})
        groups.append({"coveredResources": resources, "flavors": entries})
    return groups


def queued_resources(pool: PoolPlan) -> list[str]:
    """What Kueue counts for the pool's pods: its GPU resources, and on a rack-scale pool the ComputeDomain channel its
    multi-node jobs claim (`device_class_mappings`), in the same resource group as the pool's GPUs: each flavor sits in
    one group only (pkg/webhooks/clusterqueue_webhook.go, validateResourceGroups)."""
    return list(pool.node_resources) + ([QUEUE_RESOURCE] if rack_scale(pool) else [])


def _connected(plan: TeamPlan) -> list[list[str]]:
    """The team's resources in groups that pools join: resources alone unless a pool offers several."""
    groups: list[list[str]] = [[r] for r in sorted({r for p in plan.pools for r in queued_resources(p)})]
    for pool in plan.pools:
        joined = [g for g in groups if set(g) & set(queued_resources(pool))]
        if len(joined) > 1:
            groups = [g for g in groups if g not in joined] + [sorted(r for g in joined for r in g)]
    return sorted(groups)


# Kueue's ProvisioningRequest admission check controller (kueue apis/kueue/v1beta2/provisioningrequestconfig_types.go,
# ProvisioningRequestControllerName); GA since Kueue 0.14, no feature gate in 0.19.
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"


def provisioning_check_name(plan: PoolPlan) -> str:
    return f"{plan.name}-provisioning"


def provisioning_objects(stack: StackConfig, plan: PoolPlan) -> list[dict]:
    """For a pool whose nodes come only through ProvisioningRequests: the admission check that makes one per
    workload, and its ProvisioningRequestConfig (the cloud's class, the pool's GPU resource, the run limit)."""
    klass = stack.target.provisioning_request_class(plan.pool)
    if klass is None:
        return []
    name = provisioning_check_name(plan)
    spec: dict = {"provisioningClassName": klass, "managedResources": list(plan.node_resources)}
    limit = next((s.max_run_seconds for s in sources(plan.pool) if s.max_run_seconds is not None), None)
    if limit is not None:
        # GKE's ProvisioningRequest parameter for the nodes' lifetime (GKE provisioningrequest how-to).
        spec["parameters"] = {"maxRunDurationSeconds": str(limit)}
    return [
        {"apiVersion": API_VERSION, "kind": "ProvisioningRequestConfig", "metadata": {"name": name, "labels": dict(MANAGED)}, "spec": spec},
        {"apiVersion": API_VERSION, "kind": "AdmissionCheck", "metadata": {"name": name, "labels": dict(MANAGED)},
         "spec": {"controllerName": PROVISIONING_CONTROLLER,
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": name}}},
    ]


def admission_checks(stack: StackConfig, plan: TeamPlan, flavors: dict[str, list[Flavor]] | None = None) -> list[dict]:
    """The team's checks: a provisioning check on the flavors of each of its pools that needs one."""
    checks = []
    for pool in plan.pools:
        if stack.target.provisioning_request_class(pool.pool) is not None:
            names = [f.name for f in (flavors or {}).get(pool.name) or [Flavor(pool.name, "", {})]]
            checks.append({"name": provisioning_check_name(pool), "onFlavors": names})
    return checks


def cluster_queue(plan: TeamPlan, flavors: dict[str, list[Flavor]] | None = None, checks: list[dict] | None = None) -> dict:
    queue = {
        "apiVersion": API_VERSION, "kind": "ClusterQueue",
        "metadata": {"name": plan.team.name, "labels": team_labels(plan.team)},
        "spec": {
            "cohortName": COHORT,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": plan.team.namespace_name}},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": resource_groups(plan, flavors),
            # Try the team's own quota on the next pool before borrowing or preempting on this one.
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority", "borrowWithinCohort": {"policy": "Never"}},
        },
    }
    if checks:
        # v1beta2 names admission checks per flavor through admissionChecksStrategy only.
        queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": checks}
    return queue


def queue_namespaces(stack: StackConfig) -> dict[str, str]:
    """Each team's ClusterQueue and its namespace, so alerts on a queue reach the team that owns it; none when the
    stack's quotas are not Kueue's."""
    if stack.quotas != "kueue":
        return {}
    return {t.name: t.namespace_name for t in stack.teams}


def local_queue(plan: TeamPlan) -> dict:
    return {"apiVersion": API_VERSION, "kind": "LocalQueue",
            "metadata": {"name": plan.team.name, "namespace": plan.team.namespace_name, "labels": team_labels(plan.team)},
            "spec": {"clusterQueue": plan.team.name}}


def priority_class(name: str) -> dict:
    return {"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass", "metadata": {"name": name, "labels": dict(MANAGED)},
            "value": PRIORITIES[name], "description": PRIORITY_DESCRIPTIONS[name]}


def cohort() -> dict:
    return {"apiVersion": API_VERSION, "kind": "Cohort", "metadata": {"name": COHORT, "labels": dict(MANAGED)}, "spec": {}}


def queue_policy(plan: TeamPlan) -> dict:
    """Refuse, at creation, GPU workloads in the team namespace that do not queue through the team's LocalQueue.

    Jobs, JobSets, Deployments, StatefulSets and bare Pods are checked where Kueue reads the queue name (their own
    labels). Pods a Job creates carry no queue label; their Job was checked, so they pass. The Jobs a JobSet creates
    carry only the labels of their replicated job's template (kubernetes-sigs/jobset v0.12.0 jobset_controller.go,
    constructJob); their JobSet was checked, so they pass too, when the JobSet controller creates them. Only CREATE
    is matched, so workloads that predate the policy keep being updated and scaled.
    """
    from gpupools.fabric.software import JOBSET_CONTROLLER_USER

    team = plan.team
    queue = team.name
    allowed = allowed_priorities(team.priority)

    def label(key: str) -> str:
        return (f"has(object.metadata.labels) && {cel_string(key)} in object.metadata.labels ? "
                f"object.metadata.labels[{cel_string(key)}] : ''")

    return team_admission_policy(
        team, "queue",
        [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]},
         {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments", "statefulsets"]},
         {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
         {"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["v1alpha2"], "operations": ["CREATE"], "resources": ["jobsets"]}],
        [{"name": "podSpec", "expression": ("request.kind.kind == 'Pod' ? object.spec : request.kind.kind == 'JobSet' ? "
                                            "object.spec.replicatedJobs[0].template.spec.template.spec : object.spec.template.spec")},
         {"name": "containers",
          "expression": "variables.podSpec.containers + (has(variables.podSpec.initContainers) ? variables.podSpec.initContainers : [])"},
         # A JobSet asks for GPUs when any of its replicated jobs' pods does.
         {"name": "requestsGpu", "expression": (
             "request.kind.kind == 'JobSet' ? object.spec.replicatedJobs.exists(rj, "
             + requests_gpu_expression("rj.template.spec.template.spec.containers")
             + " || (has(rj.template.spec.template.spec.initContainers) && "
             + requests_gpu_expression("rj.template.spec.template.spec.initContainers") + ")) : "
             + requests_gpu_expression("variables.containers"))},
         {"name": "ownedByWorkload", "expression": (
             "(request.kind.kind == 'Pod' && has(object.metadata.ownerReferences) && "
             "object.metadata.ownerReferences.exists(o, o.kind == 'Job' && o.apiVersion == 'batch/v1')) || "
             "(request.kind.kind == 'Job' && has(object.metadata.ownerReferences) && "
             "object.metadata.ownerReferences.exists(o, o.kind == 'JobSet' && o.apiVersion.startsWith('jobset.x-k8s.io/')) && "
             f"request.userInfo.username == {cel_string(JOBSET_CONTROLLER_USER)})")},
         {"name": "queue", "expression": label(QUEUE_LABEL)},
         {"name": "priority", "expression": label(PRIORITY_LABEL)}],
        [{"expression": f"!variables.requestsGpu || variables.ownedByWorkload || variables.queue == {cel_string(queue)}",
          "message": (f"GPU workloads in namespace {team.namespace_name} queue for team {team.name}'s GPU quota: "
                      f"set label {QUEUE_LABEL}={queue}"),
          "reason": "Forbidden"},
         {"expression": ("!variables.requestsGpu || variables.ownedByWorkload || variables.priority == '' || variables.priority in ["
                         + ", ".join(cel_string(p) for p in allowed) + "]"),
          "message": f"team {team.name} may use the priority classes {', '.join(allowed)}; set label {PRIORITY_LABEL} to one of them",
          "reason": "Forbidden"}],
    )


def service_monitor(labels: dict[str, str]) -> dict:
    """The chart's own ServiceMonitor cannot carry the label our Prometheus selects on, so gpupools brings one.

    Kueue serves metrics over HTTPS behind Kubernetes authorization; Prometheus presents its service account
    token, which kube-prometheus-stack's ClusterRole allows to GET /metrics.
    """
    return {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": "kueue", "namespace": CHART.namespace, "labels": {**MANAGED, **labels}},
        "spec": {
            "selector": {"matchLabels": dict(METRICS_SERVICE_LABELS)},
            "endpoints": [{"port": "https", "scheme": "https", "path": "/metrics",
                           "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                           "tlsConfig": {"insecureSkipVerify": True}}],
        },
    }


def release(mappings: list[dict] | None = None) -> Release:
    return Release(CHART, CHART.default_version, helm_values(mappings))


def team_objects(stack: StackConfig, plans: list[PoolPlan], teams: list[TeamPlan], scrape: dict[str, str] | None,
                 autoscaler: str = "") -> list[dict]:
    """Namespaces first, then cluster-scoped Kueue objects, then what lives in the namespaces.

    `autoscaler`: the resolved autoscaler, which decides whether a pool's capacity kinds can be told apart by node labels."""
    flavors = {p.name: pool_flavors(stack, p, autoscaler) for p in plans}
    objects = [software_namespace(CHART.namespace)] + [namespace(t) for t in teams]
    fabrics = plan_fabrics(stack, plans)
    objects += [priority_class(name) for name in PRIORITIES] + [cohort()]
    by_name = {p.name: p for p in plans}
    topo = topology([f for name, f in fabrics.items() if topology_aware(stack, by_name[name], f)])
    objects += ([topo] if topo else []) + [resource_flavor(stack, p, fabrics.get(p.name), f) for p in plans for f in flavors[p.name]]
    objects += [o for p in plans for o in provisioning_objects(stack, p)]
    objects += [cluster_queue(t, flavors, admission_checks(stack, t, flavors)) for t in teams] + [local_queue(t) for t in teams]
    for t in teams:
        policy = queue_policy(t)
        objects += [policy, admission_binding(policy)]
    if scrape:
        objects.append(service_monitor(scrape))
    return objects
