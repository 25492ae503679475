"""Step 1 of the landing check, queue: whether the team's queue admits the Job, as Kueue (a flavor with quota,
topology-aware scheduling, admission checks), KAI Scheduler (a leaf queue within its limits, a gang for a multi-node
Job) or the namespace's ResourceQuota decides it.

Apart from the node steps (`landing.nodes`): each admitter is its own upstream rule set, cited function by function.
"""

from __future__ import annotations

import math

from gpupools.autoscaling.choice import requested_extended
from gpupools.core.pools import PoolPlan, Taint
from gpupools.landing.cluster import Cluster
from gpupools.landing.scheduling import untolerated
from gpupools.landing.shapes import requested_resource
from gpupools.landing.verdict import Step
from gpupools.queues import kai, kueue
from gpupools.queues.teams import TeamPlan


def _flavor_pods(pod: dict, flavor: dict) -> dict:
    """Kueue's admission: the flavor's nodeLabels join the pod's node selector and its tolerations the pod's (kueue
    pkg/podset/podset.go, FromAssignment / Merge)."""
    pod = dict(pod)
    pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **(flavor["spec"].get("nodeLabels") or {})}
    pod["tolerations"] = list(pod.get("tolerations") or []) + [t for t in flavor["spec"].get("tolerations") or [] if t not in (pod.get("tolerations") or [])]
    return pod


def _borrowable(cluster: Cluster, queue: str, flavor: str, resource: str) -> int:
    """What the cohort can lend a queue on one flavor: every other queue's lendable quota there (its lendingLimit, or
    its nominal quota without one; kueue pkg/cache/scheduler/resource_node.go, `potentialAvailable`)."""
    lenders = cluster.lendable(flavor, resource)
    cq = cluster.of_kind("ClusterQueue").get(queue) or {}
    if cq.get("spec", {}).get("cohortName") != kueue.COHORT:
        return 0
    return sum(lenders.values()) - lenders.get(queue, 0)


def kueue_admission(cluster: Cluster, team: TeamPlan, plan: PoolPlan, job: dict) -> tuple[Step, dict, str | None]:
    """Kueue v0.19.2's flavor assignment for the Job's one PodSet (pkg/scheduler/flavorassigner/flavorassigner.go):
    flavors of the resource's group in order, the first that fits the PodSet's node selector, its topology request and
    the quota the queue can ever reach; then the flavor's admission checks."""
    pod = job["spec"]["template"]["spec"]
    annotations = (job["spec"]["template"].get("metadata") or {}).get("annotations") or {}
    count = int(job["spec"].get("parallelism", 1))
    requests = requested_extended(pod)
    queue_name = job["metadata"]["labels"].get(kueue.QUEUE_LABEL)
    local = next((q for q in cluster.objects if q.get("kind") == "LocalQueue" and q["metadata"]["name"] == queue_name
                  and q["metadata"].get("namespace") == job["metadata"].get("namespace")), None)
    if local is None:
        return Step("queue", False, f"no LocalQueue {queue_name} in namespace {job['metadata'].get('namespace')}: the Job stays suspended"), pod, None
    cq = cluster.of_kind("ClusterQueue").get(local["spec"]["clusterQueue"])
    if cq is None:
        return Step("queue", False, f"LocalQueue {queue_name} points at ClusterQueue {local['spec']['clusterQueue']}, which the plan does not create"), pod, None
    flavors = cluster.of_kind("ResourceFlavor")
    resource = requested_resource(plan, requests)
    group = next((g for g in cq["spec"]["resourceGroups"] if resource in g["coveredResources"]), None)
    if group is None:
        return Step("queue", False, f"ClusterQueue {cq['metadata']['name']} has no quota on {resource}"), pod, None
    names = [f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]]
    tas_only = all((flavors.get(n) or {}).get("spec", {}).get("topologyName") for n in names)
    explicit = any(k in annotations for k in (kueue.REQUIRED_TOPOLOGY, kueue.PREFERRED_TOPOLOGY, kueue.UNCONSTRAINED_TOPOLOGY))
    label_keys = {k for n in names for k in ((flavors.get(n) or {}).get("spec", {}).get("nodeLabels") or {})}
    checks = {c["name"]: set(c.get("onFlavors") or names) for c in (cq["spec"].get("admissionChecksStrategy") or {}).get("admissionChecks", [])}
    wanted = requests.get(resource, 0) * count
    refused = []
    for entry in group["flavors"]:
        name = entry["name"]
        flavor = flavors.get(name)
        if flavor is None:
            refused.append(f"{name}: no such ResourceFlavor")
            continue
        spec = flavor["spec"]
        selector = pod.get("nodeSelector") or {}
        # Only keys some flavor of the queue sets are compared (flavorassigner.go, flavorSelector).
        clash = [k for k in selector if k in label_keys and k in (spec.get("nodeLabels") or {}) and spec["nodeLabels"][k] != selector[k]]
        if clash or any(k in label_keys and k not in (spec.get("nodeLabels") or {}) for k in selector):
            # Another pool's flavor: not a candidate, and not worth a word (a reason listing every pool would grow with
            # teams x pools squared across the plan).
            continue
        tas = bool(spec.get("topologyName"))
        on_checks = [c for c, on in checks.items() if name in on]
        provisioning = [c for c in on_checks if (cluster.of_kind("AdmissionCheck").get(c) or {}).get("spec", {}).get("controllerName")
                        == kueue.PROVISIONING_CONTROLLER]
        # tas_flavorassigner.go, checkPodSetAndFlavorMatchForTAS.
        if tas and not explicit and not tas_only:
            refused.append(f"{name}: topology-aware, and the Job asks for no topology while its ClusterQueue mixes topology-aware "
                           f"and plain flavors (\"supports only TopologyAwareScheduling\")")
            continue
        if not tas and explicit and wanted:
            refused.append(f"{name}: not topology-aware, and the Job asks for a topology (\"does not support TopologyAwareScheduling\")")
            continue
        # flavorassigner.go, checkFlavorForPodSets: the flavor's NoSchedule and NoExecute nodeTaints, each tolerated by
        # the PodSet's tolerations or the flavor's own (corev1helpers.FindMatchingUntoleratedTaint).
        node_taints = [Taint(t["key"], t.get("value", ""), t["effect"]) for t in spec.get("nodeTaints") or []]
        missing = untolerated([*(pod.get("tolerations") or []), *(spec.get("tolerations") or [])], node_taints)
        if missing:
            t = missing[0]
            refused.append(f"{name}: untolerated taint {t.key}={t.value}:{t.effect} (the flavor's nodeTaints; the team's tolerations "
                           f"have none for it: teams[].tolerations)")
            continue
        if tas and not provisioning:
            per_node = max(1, plan.units_per_node // max(1, requests.get(resource, 1)))
            needed = math.ceil(count / per_node)
            if plan.pool.min_nodes < needed:
                refused.append(f"{name}: topology-aware, and topology-aware scheduling counts only Ready nodes: the Job needs {needed} node(s), "
                               f"the pool keeps {plan.pool.min_nodes}, and a suspended Job makes no autoscaler add one")
                continue
        quota = next((r for r in entry["resources"] if r["name"] == resource), None)
        if quota is None:
            refused.append(f"{name}: no quota on {resource}")
            continue
        nominal = int(quota["nominalQuota"])
        limit = quota.get("borrowingLimit")
        borrowable = _borrowable(cluster, cq["metadata"]["name"], name, resource)
        reachable = nominal + (borrowable if limit is None else min(int(limit), borrowable))
        if wanted > reachable:
            refused.append(f"{name}: the Job asks for {wanted} x {resource}, the queue can reach {reachable} there "
                           f"({nominal} nominal + {reachable - nominal} borrowed from the cohort)")
            continue
        for check in on_checks:
            if check not in cluster.of_kind("AdmissionCheck"):
                return Step("queue", False, f"flavor {name} waits for AdmissionCheck {check}, which the plan does not create"), pod, name
        how = f"admitted on flavor {name} ({nominal} nominal" + (f", up to {reachable} with borrowing" if reachable > nominal else "") + ")"
        if provisioning:
            how += f"; admission check {provisioning[0]} asks the cloud for the nodes first (ProvisioningRequest)"
        if tas:
            how += "; topology-aware"
        return Step("queue", True, how), _flavor_pods(pod, flavor), name
    if not refused:
        return Step("queue", False, f"no flavor of ClusterQueue {cq['metadata']['name']} selects the nodes the Job's node selector names"), pod, None
    return Step("queue", False, f"ClusterQueue {cq['metadata']['name']} admits it on no flavor: " + "; ".join(refused)), pod, None


def job_fraction(job: dict) -> float | None:
    """The Job's pods' KAI fraction annotation as a number; None without one, NaN for a value KAI would refuse."""
    annotations = (job["spec"]["template"].get("metadata") or {}).get("annotations") or {}
    text = annotations.get(kai.FRACTION_ANNOTATION)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return math.nan
    return value if 0 < value < 1 else math.nan


def kai_admission(cluster: Cluster, team: TeamPlan, plan: PoolPlan, job: dict, multi_node: bool = False) -> Step:
    """KAI Scheduler's side: the Job names KAI's scheduler and a leaf Queue (only leaves take workloads, docs/queues/
    README.md), and what it asks for fits the queue's limit and every ancestor's (the proportion plugin refuses a job
    that would take a queue past its limit: pkg/scheduler/plugins/proportion/capacity_policy/max_allowed_check.go lines
    51-66). Within its quota the job is safe from reclaim; beyond it, it runs on GPUs others leave idle and preemptible
    work there is reclaimed when their owners need them. `multi_node`: its pods span nodes, and must be one gang."""
    pod = job["spec"]["template"]["spec"]
    count = int(job["spec"].get("parallelism", 1))
    if pod.get("schedulerName") != kai.SCHEDULER_NAME:
        return Step("queue", False, f"the pod does not name scheduler {kai.SCHEDULER_NAME}: team {team.team.name}'s admission policy refuses GPU "
                                    f"workloads KAI would not schedule")
    name = (job["metadata"].get("labels") or {}).get(kai.QUEUE_LABEL)
    if name is None:
        return Step("queue", False, f"the Job carries no label {kai.QUEUE_LABEL}: team {team.team.name}'s admission policy refuses it")
    queues = cluster.of_kind("Queue")
    if name not in queues:
        return Step("queue", False, f"no Queue {name}: KAI keeps the Job's pods pending")
    if name in cluster.parent_queues():
        return Step("queue", False, f"Queue {name} is a department (a parent queue); only its teams' queues take workloads")
    fraction = job_fraction(job)
    if fraction is not None and math.isnan(fraction):
        return Step("queue", False, f"{kai.FRACTION_ANNOTATION} must be a number above 0 and below 1: KAI's binder refuses the pod")
    if fraction is not None and plan.sharing.fraction is None:
        return Step("queue", False, f"pool {plan.name} takes no fractions (its sharing sets no fraction)")
    requests = requested_extended(pod)
    per_pod = fraction if fraction is not None else requests.get(requested_resource(plan, requests), 0)
    wanted = per_pod * count
    chain, queue = [], queues[name]
    while queue is not None:
        chain.append(queue)
        queue = queues.get(queue["spec"].get("parentQueue") or "")
    limits = [(q["metadata"]["name"], q["spec"]["resources"]["gpu"]["limit"]) for q in chain]
    capped = [(n, lim) for n, lim in limits if lim != kai.UNLIMITED]
    tightest = min(capped, key=lambda c: c[1]) if capped else None
    if tightest is not None and wanted > tightest[1]:
        return Step("queue", False, f"the Job asks for {wanted:g} GPUs, and Queue {tightest[0]} may hold at most {tightest[1]:g} (its limit)")
    quota = chain[0]["spec"]["resources"]["gpu"]["quota"]
    gang, why = kai_gang(job, count, multi_node)
    if why is not None:
        return Step("queue", False, why)
    how = f"queue {name}: {wanted:g} of its {quota:g} guaranteed GPUs" if wanted <= quota else (
        f"queue {name}: {wanted:g} GPUs, beyond its {quota:g} guaranteed: runs on GPUs other queues leave idle, reclaimable while preemptible")
    return Step("queue", True, how + (f", under limit {tightest[1]:g} of {tightest[0]}" if tightest else ", no limit")
                + (f"; its {count} pods as one gang ({kai.MIN_MEMBER_ANNOTATION}: \"{gang}\")" if gang > 1 else ""))


def kai_gang(job: dict, count: int, multi_node: bool) -> tuple[int, str | None]:
    """How many of the Job's pods KAI schedules together, and why that cannot work, or None. KAI's pod grouper makes one
    PodGroup of a Job whose minMember is its kai.scheduler/batch-min-member, 1 without it (v0.17.0 pkg/podgrouper/
    podgrouper/plugins/job/job_grouper.go, calcMinMember): a multi-node Job needs all its pods in it, or KAI binds its
    pods one by one and the first hold their nodes while the rest wait; and a gang larger than the Job never starts."""
    text = ((job.get("metadata") or {}).get("annotations") or {}).get(kai.MIN_MEMBER_ANNOTATION)
    try:
        gang = int(text) if text is not None else 1
    except ValueError:
        return 0, f"{kai.MIN_MEMBER_ANNOTATION}: {text!r} is not a number: KAI's pod grouper fails on it and the pods stay pending"
    if gang > count:
        return gang, (f"{kai.MIN_MEMBER_ANNOTATION} asks for {gang} pods together and the Job has {count}: KAI never starts the gang")
    if multi_node and gang < count:
        return gang, (f"KAI schedules the Job's {count} pods as a gang of {gang}: without {kai.MIN_MEMBER_ANNOTATION}: \"{count}\" on "
                      f"the Job its first pods may hold their nodes' GPUs while the others wait")
    return gang, None


def resourcequota_admission(cluster: Cluster, team: TeamPlan, plan: PoolPlan, job: dict) -> Step:
    """The namespace's ResourceQuota: `requests.<resource>` must leave room for every pod of the Job (extended
    resources can only be quota'd by requests: kubernetes docs, resource quotas, "Resource quota for extended resources")."""
    pod = job["spec"]["template"]["spec"]
    count = int(job["spec"].get("parallelism", 1))
    namespace = job["metadata"].get("namespace")
    quota = next((o for o in cluster.objects if o.get("kind") == "ResourceQuota" and o["metadata"].get("namespace") == namespace), None)
    if quota is None:
        return Step("queue", True, f"no ResourceQuota in namespace {namespace}")
    for name, wanted in requested_extended(pod).items():
        hard = quota["spec"]["hard"].get(f"requests.{name}")
        if hard is not None and wanted * count > int(hard):
            return Step("queue", False, f"ResourceQuota {quota['metadata']['name']} allows {hard} x {name} in namespace {namespace}, "
                                        f"the Job asks for {wanted * count}")
    return Step("queue", True, f"within ResourceQuota {quota['metadata']['name']}")
