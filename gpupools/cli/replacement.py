"""Which planned changes replace a GPU pool: the node group or node pool is deleted and created again, so every
GPU node in it is drained at once.

The fields are the ones each provider marks as forcing replacement:
- EKS `aws:eks/nodeGroup:NodeGroup` (pulumi-aws is bridged from the Terraform AWS provider; ForceNew in
  `internal/service/eks/node_group.go`): amiType, capacityType, clusterName, diskSize, instanceTypes,
  launchTemplate id or name (not its version), nodeGroupName(Prefix), nodeRoleArn, remoteAccess, subnetIds.
- AKS `azure-native:containerservice:AgentPool` (pulumi-azure-native `forceNewMap` plus the resource path):
  vmSize, gpuInstanceProfile, agentPoolName, resourceGroupName, resourceName.
- GKE `gcp:container/nodePool:NodePool` (bridged from the Terraform Google provider; ForceNew in
  `resource_container_node_pool.go` and `node_config.go`): name, cluster, location, project, initialNodeCount,
  maxPodsPerNode, queuedProvisioning, and in nodeConfig: guestAccelerators (every field, GKE's sharing and MIG partitions
  included), metadata, spot, preemptible, serviceAccount, oauthScopes, shieldedInstanceConfig, localSsdCount,
  minCpuPlatform, reservationAffinity, gvnic, flexStart, maxRunDuration.
Everything else (labels, taints, scaling limits, launch template versions, node locations) changes in place; of those, a
new version, node image or launch template version still drains every node, at the pace of the pool's upgrade settings
(`ROLLING`, `pace`), which `plan --against` says per pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpupools.cli.planrun import Plan
from gpupools.stack.errors import describe

REPLACING: dict[str, tuple[str, ...]] = {
    "aws:eks/nodeGroup:NodeGroup": ("amiType", "capacityType", "clusterName", "diskSize", "instanceTypes", "launchTemplate.id",
                                    "launchTemplate.name", "nodeGroupName", "nodeGroupNamePrefix", "nodeRoleArn", "remoteAccess", "subnetIds"),
    "azure-native:containerservice:AgentPool": ("vmSize", "gpuInstanceProfile", "agentPoolName", "resourceGroupName", "resourceName"),
    "gcp:container/nodePool:NodePool": ("name", "namePrefix", "cluster", "location", "project", "initialNodeCount", "maxPodsPerNode",
                                        "nodeConfig.guestAccelerators", "nodeConfig.metadata", "nodeConfig.spot", "nodeConfig.preemptible",
                                        "nodeConfig.serviceAccount", "nodeConfig.oauthScopes", "nodeConfig.shieldedInstanceConfig",
                                        "nodeConfig.localSsdCount", "nodeConfig.minCpuPlatform", "nodeConfig.reservationAffinity",
                                        "nodeConfig.gvnic", "queuedProvisioning", "nodeConfig.flexStart", "nodeConfig.maxRunDuration"),
}

_MISSING = object()

KARPENTER_NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
# In-place changes that still replace every node of the pool, at the pace its upgrade settings allow: a new version or
# node image (EKS UpdateNodegroupVersion, AKS orchestrator or node image upgrade, a GKE node pool upgrade), a new launch
# template version (EKS rolls the group), and for Karpenter any change to the NodePool's node template (drift).
ROLLING: dict[str, tuple[str, ...]] = {
    "aws:eks/nodeGroup:NodeGroup": ("version", "releaseVersion", "launchTemplate.version"),
    "azure-native:containerservice:AgentPool": ("orchestratorVersion", "nodeImageVersion", "osDiskSizeGB", "osSKU"),
    "gcp:container/nodePool:NodePool": ("version", "nodeConfig.imageType", "nodeConfig.diskSizeGb", "nodeConfig.diskType"),
    KARPENTER_NODE_POOL: ("spec.template",),
}


def _budget_nodes(budget: Any) -> str:
    return str(budget.get("nodes")) if isinstance(budget, dict) else "?"


def pace(type_: str, inputs: Any) -> str:
    """How many of the pool's nodes a rolling change takes at once, from the resource's own upgrade settings."""
    inputs = inputs if isinstance(inputs, dict) else {}
    if type_ == "aws:eks/nodeGroup:NodeGroup":
        config = _at(inputs, "updateConfig")
        config = config if isinstance(config, dict) else {}
        first = "new nodes launched first" if config.get("updateStrategy", "DEFAULT") == "DEFAULT" else "drained before new ones launch"
        return f"{config.get('maxUnavailable', 1)} node at a time, {first}"
    if type_ == "gcp:container/nodePool:NodePool":
        settings = _at(inputs, "upgradeSettings")
        settings = settings if isinstance(settings, dict) else {}
        if settings.get("strategy") == "BLUE_GREEN":
            wait = _at(settings, "blueGreenSettings.autoscaledRolloutPolicy.waitForDrainDuration")
            return f"blue-green: old nodes cordoned, each drained once empty or after {wait if wait is not _MISSING else '3 days'}"
        if not settings:
            return "GKE's own pace (flex-start and queued nodes keep their version until their run ends)"
        return f"{settings.get('maxSurge', 1)} surge node, {settings.get('maxUnavailable', 0)} drained at a time"
    if type_ == "azure-native:containerservice:AgentPool":
        settings = _at(inputs, "upgradeSettings")
        settings = settings if isinstance(settings, dict) else {}
        return (f"{settings.get('maxSurge', '10%')} surge, {settings.get('maxUnavailable', '0')} drained at a time, "
                f"{settings.get('drainTimeoutInMinutes', 30)} min drain timeout")
    budgets = _at(inputs, "spec.disruption.budgets")
    budgets = budgets if isinstance(budgets, list) else []
    window = [b for b in budgets if isinstance(b, dict) and b.get("schedule") and _budget_nodes(b) == "0"]
    open_ = [_budget_nodes(b) for b in budgets if isinstance(b, dict) and not b.get("schedule")]
    at_once = open_[0] if open_ else "10%"
    return f"Karpenter drift, {at_once} node at a time" + (", only inside the maintenance window" if window else ", at any time")


def _at(inputs: Any, path: str) -> Any:
    current = inputs
    for step in path.split("."):
        if not isinstance(current, dict) or step not in current:
            return _MISSING
        current = current[step]
    return current


@dataclass(frozen=True)
class PoolChange:
    """What the next `pulumi up` does to one pool's resource against a previous plan."""

    type: str
    name: str
    action: str  # "create", "replace", "update", "same", "delete"
    fields: tuple[str, ...] = ()
    # An update that replaces every node in place (`ROLLING`): what changed, and how many nodes it takes at once.
    rolls: tuple[str, ...] = ()
    pace: str = ""

    @property
    def summary(self) -> str:
        if self.action == "replace":
            return f"REPLACES {self.type} {self.name} (deleted and created again, every node drained): {', '.join(self.fields)} changed"
        if self.rolls:
            return f"updates {self.type} {self.name} in place and DRAINS its nodes ({', '.join(self.rolls)} changed): {self.pace}"
        return {"create": f"creates {self.type} {self.name}", "update": f"updates {self.type} {self.name} in place",
                "same": f"no change to {self.type} {self.name}", "delete": f"deletes {self.type} {self.name}"}[self.action]


def pool_changes(previous: dict, plan: Plan) -> list[PoolChange]:
    """Every pool resource of `plan` compared with the same resource (type and name) in a previous `plan --json`."""
    before = {(r.get("type"), r.get("name")): r.get("inputs") or {} for r in previous.get("resources") or [] if isinstance(r, dict)}
    changes, seen = [], set()
    for resource in plan.resources:
        fields = REPLACING.get(resource.type, () if resource.type in ROLLING else None)
        if fields is None:
            continue
        key = (resource.type, resource.name)
        seen.add(key)
        if key not in before:
            changes.append(PoolChange(resource.type, resource.name, "create"))
            continue
        old, new = before[key], resource.inputs
        replacing = tuple(f for f in fields if _at(old, f) != _at(new, f))
        action = "replace" if replacing else ("same" if old == new else "update")
        rolls = tuple(f for f in ROLLING.get(resource.type, ()) if _at(old, f) != _at(new, f)) if action == "update" else ()
        changes.append(PoolChange(resource.type, resource.name, action, replacing, rolls, pace(resource.type, new) if rolls else ""))
    changes += [PoolChange(t, n, "delete") for (t, n) in before if (t in REPLACING or t in ROLLING) and (t, n) not in seen]
    return changes


def previous_plan_problems(doc: Any, stack: str) -> list[str]:
    """Why a file cannot serve as the previous plan, if it cannot."""
    if not isinstance(doc, dict) or not isinstance(doc.get("resources"), list):
        return ["expected the JSON of `gpupools plan --json` (an object with a resources list)"]
    if doc.get("stack") not in (None, stack):
        return [f"is the plan of stack {describe(doc.get('stack'))}, not {stack!r}"]
    for i, resource in enumerate(doc["resources"]):
        if not isinstance(resource, dict):
            return [f"resources[{i}]: expected a resource object, got {describe(resource)}"]
        for key in ("type", "name"):
            if not isinstance(resource.get(key), str):
                return [f"resources[{i}].{key}: expected a string, got {describe(resource.get(key))}"]
        if resource.get("inputs") is not None and not isinstance(resource["inputs"], dict):
            return [f"resources[{i}].inputs: expected an object, got {describe(resource['inputs'])}"]
    return []


def sharing_change_note(cloud, installer: str, os: str | None, karpenter: bool = False, compute_class: bool = False) -> str:
    """What a change of this pool's sharing (mode, replicas, MIG profile) does on its cloud (`cloud`: the stack's Cloud
    object). A ComputeClass applies to the nodes GKE creates after a change, never to running ones (GKE "About custom
    compute classes": "GKE doesn't retroactively change the configuration of existing nodes")."""
    if compute_class:
        return ("a sharing change updates the ComputeClass in place: nodes GKE creates afterwards share as it says, running nodes keep "
                "their setting until they are removed")
    if cloud.OWN_GPU_SOFTWARE and installer == "cloud":
        return cloud.own_sharing_change()
    if karpenter and os == "bottlerocket":
        # Bottlerocket's device plugin reads its settings from user data, which the pool's EC2NodeClass carries.
        return ("a sharing change updates the EC2NodeClass user data (Bottlerocket settings); Karpenter replaces the nodes gracefully "
                "(drift), the pool stays")
    if karpenter:
        return ("a sharing change updates a ConfigMap and the NodePool's node labels; Karpenter replaces the nodes gracefully "
                "(drift), the pool stays")
    if os == "bottlerocket":
        return "a sharing change makes a new launch template version; EKS rolls the nodes, the node group stays"
    return "a sharing change updates a ConfigMap and node labels in place; the pool is not replaced"
