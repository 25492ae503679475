"""Cloud-neutral facts about a GPU pool: its taint, its labels, its hardware and its schedulable capacity."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from gpupools.core.catalog import Hardware
from gpupools.stack.config import Pool, Sharing
from gpupools.core.sharing import (
    GPU_RESOURCE,
    VGPU_CORES_RESOURCE,
    VGPU_MEMORY_PERCENT_RESOURCE,
    VGPU_MEMORY_RESOURCE,
    Mechanism,
    gpu_memory_mib,
)

POOL_LABEL = "gpupools.io/pool"
GPU_LABEL = "gpupools.io/gpu"


@dataclass(frozen=True)
class Taint:
    """A Kubernetes node taint."""

    key: str
    value: str
    effect: str  # Kubernetes spelling: NoSchedule | PreferNoSchedule | NoExecute


# Every GPU pool carries this taint, so only pods that tolerate it (GPU workloads, GPU DaemonSets) land there.
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")

_EFFECT_ENUM = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}


def spell_taint(taint: Taint, style: str) -> dict | str:
    """EKS and GKE want an object with an upper-case effect enum; AKS wants `key=value:Effect`."""
    if style == "enum":
        return {"key": taint.key, "value": taint.value, "effect": _EFFECT_ENUM[taint.effect]}
    if style == "string":
        return f"{taint.key}={taint.value}:{taint.effect}"
    raise ValueError(f"unknown taint style {style!r}")


@dataclass(frozen=True)
class NodeTemplate:
    """A new node of one pool as its autoscaler pictures it before starting it."""

    autoscaler: str  # human name: "Karpenter", "cluster-autoscaler", "the AKS cluster autoscaler", ...
    source: str  # what the picture is built from: "NodePool gpupools-infer + NodeOverlay gpupools-infer", ...
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Mapping[str, int]  # extended resources (name -> count) the autoscaler expects per node
    # Taints the new node starts with but the autoscaler leaves out of its simulation (Karpenter `startupTaints`,
    # cluster-autoscaler startup taints): pending pods need not tolerate them.
    startup_taints: tuple[Taint, ...] = ()
    # Labels a pending pod must select for the autoscaler to start a node for it at all (GKE node auto-provisioning
    # acts for a ComputeClass only on pods that name it); empty: any pod that fits the picture.
    requires: Mapping[str, str] = dataclasses.field(default_factory=dict)


def pool_taints(pool: Pool) -> tuple[Taint, ...]:
    return tuple(Taint(t.key, t.value, t.effect) for t in pool.taints)


def toleration(taint: Taint) -> dict:
    return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}


@dataclass(frozen=True)
class PoolPlan:
    """One pool with every decision made: what `pulumi up` creates for it and what it offers to pods."""

    pool: Pool
    sharing: Sharing
    hardware: Hardware
    mechanism: Mechanism
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    # Taints a new node carries until its GPU stack is validated (gpupools.health.readiness): registered with where
    # the pool config can carry them, put on at join by the Node Readiness Controller elsewhere;
    # workload pods never tolerate them, autoscalers treat them as startup taints.
    startup_taints: tuple[Taint, ...] = ()
    # What a pod of the pool selects beside the pool label, where the cloud provisions nodes for the selector itself
    # (a GKE ComputeClass); these labels are among `labels` too.
    selector: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.pool.name

    @property
    def pool_taints(self) -> tuple[Taint, ...]:
        """The stack's own taints of the pool (`pools[].taints`): on its nodes beside the GPU taint (among `taints`), but
        tolerated by a team's workloads only where the team says so (`Team.tolerations`), and by gpupools' GPU software."""
        return pool_taints(self.pool)

    @property
    def node_selector(self) -> dict[str, str]:
        """What the pool's pods and Kueue flavors select: its pool label, and the cloud's selector (`selector`)."""
        return {POOL_LABEL: self.pool.name, **self.selector}

    @property
    def units_per_node(self) -> int:
        """Units of the pool's resource (`mechanism.resource`) one node offers."""
        return self.node_resources[self.mechanism.resource]

    @property
    def node_resources(self) -> dict[str, int]:
        """Units of each GPU resource one node offers: one resource, or several on a mixed MIG layout."""
        return dict(self.mechanism.node_resources) or {self.mechanism.resource: self.hardware.gpus_per_node * self.mechanism.units_per_gpu}

    @property
    def advertised_resources(self) -> dict[str, int]:
        """Extended resources a running node of the pool advertises, as its GPU software will report them.

        With MIG in the mixed strategy every GPU is partitioned, so the node offers no whole `nvidia.com/gpu`.
        """
        resources = self.node_resources
        resources.setdefault(GPU_RESOURCE, 0)
        return resources

    @property
    def autoscaler_resources(self) -> dict[str, int]:
        """What an autoscaler must believe a new node offers for the pool's pods to fit it.

        On vgpu pools that includes HAMi's memory and compute resources: no node advertises them (HAMi's scheduler
        accounts for them and the kubelet ignores extended resources it does not know), but a pod that names them
        fits a simulated node only if the node seems to have them: every GPU's memory in MiB, and 100 % of its
        memory and compute.
        """
        resources = dict(self.advertised_resources)
        if self.mechanism.mode == "vgpu":
            gpus = self.hardware.gpus_per_node
            resources.update({VGPU_MEMORY_RESOURCE: gpus * gpu_memory_mib(self.hardware, self.sharing.memory_scaling),
                              VGPU_MEMORY_PERCENT_RESOURCE: gpus * 100, VGPU_CORES_RESOURCE: gpus * 100})
        return resources

    @property
    def max_units(self) -> int:
        """Units of all the pool's GPU resources at maxNodes."""
        return sum(self.node_resources.values()) * self.pool.max_nodes

    @property
    def max_gpus(self) -> int:
        return self.hardware.gpus_per_node * self.pool.max_nodes

    @property
    def price_per_unit(self) -> float | None:
        """None where the catalog has no list price for the instance type."""
        price = self.hardware.price_per_node
        return None if price is None else price / sum(self.node_resources.values())

    def hourly_cost(self, nodes: int) -> float | None:
        price = self.hardware.price_per_node
        return None if price is None else price * nodes
