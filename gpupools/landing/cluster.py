"""What the landing check reads: the objects, node agents, fabrics and schedulers the plan puts in the cluster, with
the indexes every verdict looks things up in, built once per stack.

Apart from `landing.check`, which fills it from the stack's plan, so that the steps read it without depending on
how it is filled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpupools.core.pools import PoolPlan
from gpupools.fabric.plan import FabricPlan
from gpupools.landing.agents import Agent
from gpupools.queues import kueue
from gpupools.queues.teams import TeamPlan
from gpupools.stack.config import StackConfig


@dataclass
class Cluster:
    """What the plan puts in the cluster, indexed once per stack: Kueue objects, quotas, agents, node pictures."""

    stack: StackConfig
    plans: list[PoolPlan]
    teams: list[TeamPlan]
    autoscaler: str
    objects: list[dict]
    agents: list[Agent]
    fabrics: dict[str, FabricPlan]
    schedulers: set[str] = field(default_factory=set)
    kai_values: dict = field(default_factory=dict)  # the KAI Scheduler release's values, where the stack installs it
    # DeviceClasses the stack's DRA drivers register: name -> (driver, pools its kubelet plugin runs on, its tolerations).
    device_classes: dict = field(default_factory=dict)
    class_mappings: list = field(default_factory=list)  # Kueue's deviceClassMappings, as its release's configuration holds them

    def of_kind(self, kind: str) -> dict[str, dict]:
        """Objects of one kind by name, indexed once: every verdict looks them up."""
        index = self.__dict__.setdefault("_kinds", {})
        if index.get("_of") is not self.objects:  # rebuilt when a caller swaps the object list
            index.clear()
            index["_of"] = self.objects
        if kind not in index:
            index[kind] = {o["metadata"]["name"]: o for o in self.objects if o.get("kind") == kind}
        return index[kind]

    def parent_queues(self) -> set[str]:
        """KAI Queues that other Queues name as their parent, indexed once."""
        index = self.__dict__.setdefault("_parents", {})
        if index.get("_of") is not self.objects:
            index.clear()
            index["_of"] = self.objects
            index["names"] = {q["spec"]["parentQueue"] for q in self.of_kind("Queue").values() if q["spec"].get("parentQueue")}
        return index["names"]

    def lendable(self, flavor: str, resource: str) -> dict[str, int]:
        """Each queue's lendable quota on a flavor (its lendingLimit, else its nominal quota), indexed once."""
        index = self.__dict__.setdefault("_lendable", {})
        if index.get("_of") is not self.objects:
            index.clear()
            index["_of"] = self.objects
            for name, cq in self.of_kind("ClusterQueue").items():
                if cq["spec"].get("cohortName") != kueue.COHORT:
                    continue
                for group in cq["spec"]["resourceGroups"]:
                    for f in group["flavors"]:
                        for r in f["resources"]:
                            index.setdefault((f["name"], r["name"]), {})[name] = int(r.get("lendingLimit", r["nominalQuota"]))
        return index.get((flavor, resource), {})
