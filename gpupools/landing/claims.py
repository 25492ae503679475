"""The landing check's `claims` step, for pods that claim devices through DRA (a ComputeDomain's IMEX channel, or any
ResourceClaimTemplate a job brings): each claim is followed to its ResourceClaimTemplate, each request to its
DeviceClass, the class to the DRA driver the stack installs that registers it (and whether that driver's kubelet plugin
runs on the pool's nodes), and, for a job queued on Kueue, the class to the queue resource Kueue counts it as.

Kueue v0.19.2 is the rule set (pkg/dra/claims.go): a request with `allocationMode: All` or `adminAccess`, or naming a
DeviceClass no `deviceClassMappings` entry maps, makes the workload inadmissible; a mapped resource the ClusterQueue
does not cover is skipped under gpupools' `quotaCheckStrategy: IgnoreUndeclared` (pkg/scheduler/flavorassigner/
flavorassigner.go, "Skipping resource not declared in the ClusterQueue"), so it is admitted uncounted.

Shown only for pods with `resourceClaims`: other jobs' verdicts have no such step.
"""

from __future__ import annotations

from gpupools.core.pools import PoolPlan
from gpupools.fabric.computedomain import channel_claim_template, claim_problems
from gpupools.landing.admission import _borrowable
from gpupools.landing.cluster import Cluster
from gpupools.landing.verdict import Step
from gpupools.queues.teams import TeamPlan


def claim_templates(docs: list[dict] | tuple[dict, ...]) -> dict[str, dict]:
    """The ResourceClaimTemplates a job's documents bring, by name: those it holds, and the one the ComputeDomain
    controller writes for each ComputeDomain among them (`channel_claim_template`)."""
    out = {}
    for doc in docs:
        if doc.get("kind") == "ResourceClaimTemplate":
            out[doc["metadata"]["name"]] = doc
        elif doc.get("kind") == "ComputeDomain":
            template = channel_claim_template(doc)
            out[template["metadata"]["name"]] = template
    return out


def _tolerated(taint, tolerations: list[dict]) -> bool:
    for t in tolerations:
        if t.get("key") not in (None, taint.key) or (t.get("effect") and t["effect"] != taint.effect):
            continue
        if t.get("operator") == "Exists" or t.get("value") == taint.value:
            return True
    return False


def claims_step(cluster: Cluster, team: TeamPlan | None, plan: PoolPlan, job: dict, templates: dict[str, dict],
                flavor: str | None) -> Step:
    pod = job["spec"]["template"]["spec"]
    pods = int(job["spec"].get("parallelism", 1))
    queued = team is not None and cluster.stack.quotas == "kueue"
    mappings = {c: m["name"] for m in cluster.class_mappings for c in m.get("deviceClassNames") or []}
    said = []
    for claim in pod.get("resourceClaims") or []:
        name = claim.get("resourceClaimTemplateName")
        if name is None:
            if queued:
                return Step("claims", False, f"claim {claim['name']} names a ResourceClaim directly: Kueue admits claims from templates only "
                                             f"(kueue v0.19.2 site/content/en/docs/concepts/dynamic_resource_allocation.md, Limitations)")
            said.append(f"claim {claim['name']}: ResourceClaim {claim.get('resourceClaimName')}, not followed")
            continue
        template = templates.get(name)
        if template is None:
            return Step("claims", False, f"ResourceClaimTemplate {name}: neither the job's documents nor the plan create it, so the pod's "
                                         f"claim is never made and the pod stays pending")
        if queued:
            problems = claim_problems(template, f"ResourceClaimTemplate {name}")
            if problems:
                return Step("claims", False, f"{problems[0].path}: {problems[0].message}")
        requests = (((template.get("spec") or {}).get("spec") or {}).get("devices") or {}).get("requests") or []
        for request in requests:
            exactly = request.get("exactly")
            if exactly is None:
                if queued:
                    return Step("claims", False, f"ResourceClaimTemplate {name} request {request.get('name')}: Kueue admits only `exactly` "
                                                 f"requests (kueue v0.19.2 pkg/dra/claims.go; firstAvailable is not supported)")
                continue
            klass = exactly["deviceClassName"]
            served = cluster.device_classes.get(klass)
            if served is None:
                return Step("claims", False, f"DeviceClass {klass} (ResourceClaimTemplate {name}): no DRA driver the stack installs "
                                             f"registers it, so the claim is never allocated and the pod stays pending")
            driver, pools, tolerations = served
            if plan.name not in pools:
                return Step("claims", False, f"DeviceClass {klass}: the kubelet plugin of DRA driver {driver} does not run on pool "
                                             f"{plan.name}'s nodes, so no device of that class is offered there")
            untolerated = [t.key for t in plan.taints if not _tolerated(t, tolerations)]
            if untolerated:
                return Step("claims", False, f"DeviceClass {klass}: the kubelet plugin of DRA driver {driver} does not tolerate pool "
                                             f"{plan.name}'s taint {untolerated[0]}")
            per_pod = int(exactly.get("count", 1))
            if not queued:
                said.append(f"{klass} ({driver})")
                continue
            resource = mappings.get(klass)
            if resource is None:
                return Step("claims", False, f"DeviceClass {klass} is not mapped in Kueue's deviceClassMappings: Kueue keeps the workload "
                                             f"inadmissible (kueue v0.19.2 pkg/dra/claims.go, \"DeviceClass ... is not mapped in DRA "
                                             f"configuration\")")
            cq = cluster.of_kind("ClusterQueue").get(team.team.name)
            group = next((g for g in (cq or {}).get("spec", {}).get("resourceGroups", []) if resource in g["coveredResources"]), None)
            if group is None:
                said.append(f"{klass} as {resource}, which ClusterQueue {team.team.name} does not cover: admitted uncounted "
                            f"(quotaCheckStrategy IgnoreUndeclared)")
                continue
            if flavor is None:
                said.append(f"{klass} as {resource}")
                continue
            entry = next((f for f in group["flavors"] if f["name"] == flavor), None)
            quota = next((r for r in (entry or {}).get("resources", []) if r["name"] == resource), None)
            wanted = per_pod * pods
            nominal = int(quota["nominalQuota"]) if quota else 0
            limit = quota.get("borrowingLimit") if quota else 0
            borrowable = _borrowable(cluster, team.team.name, flavor, resource)
            reachable = nominal + (borrowable if limit is None else min(int(limit), borrowable))
            if wanted > reachable:
                return Step("claims", False, f"DeviceClass {klass} counts as {resource}: the job asks for {wanted}, ClusterQueue "
                                             f"{team.team.name} can reach {reachable} on flavor {flavor}")
            said.append(f"{klass} counted as {wanted} x {resource} on flavor {flavor} ({nominal} nominal)")
    return Step("claims", True, "; ".join(said) or "no device requests")
