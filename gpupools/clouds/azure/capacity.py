"""AKS: where a pool's capacity comes from (on-demand, spot, reservations and what the cloud offers beside them) and
the plan's capacity lines.
"""

from __future__ import annotations


import re

from gpupools.core.catalog import Hardware
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.capacity import sources as capacity
from gpupools.clouds.azure.provider import ZONES


# --------------------------------------------------------------------------------------------------------------------
# Capacity: capacity reservation groups

# A capacity reservation group's resource ID, as AgentPool.capacityReservationGroupID takes it (its docstring in
# azure-mgmt-containerservice gives /subscriptions/{id}/resourcegroups/{group}/providers/Microsoft.Compute/
# capacityreservationgroups/{name}; Azure resource IDs are case-insensitive).
RESERVATION_GROUP_ID = re.compile(r"^/subscriptions/[0-9a-f-]{36}/resourcegroups/([-\w.()]{1,90})/providers/microsoft\.compute/"
                                  r"capacityreservationgroups/[-\w.]{1,80}$", re.IGNORECASE)
# VM series capacity reservations do not support: MicrosoftDocs/azure-compute-docs @05a44856 (ms.date 02/17/2026)
# articles/virtual-machines/capacity-reservation-overview.md, "Limitations and restrictions": "Support for other VM series
# isn't currently available", GPU-accelerated compute: "ND-series", "NCads H100 v5-series" (the NCads and NCadis sizes
# below), Hb- and Hc-series. ND H200 v5 and ND GB200 v6 are ND-series too.
UNRESERVABLE_SIZES = re.compile(r"^Standard_(ND|NC[0-9]+adi?s_H100_v5$)", re.IGNORECASE)
# Built-in role "Contributor": AKS needs the cluster's user-assigned identity to hold it on the resource group of
# the capacity reservation group (AKS docs, use-capacity-reservation-groups).
CONTRIBUTOR_ROLE = "b24988ac-6180-42a0-ab88-20f7382dd24c"


def reservation_group(pool: Pool) -> str | None:
    found = capacity.reservations(pool)
    return found[0].id if found else None


def reservation_group_scopes(pools: list[Pool]) -> list[str]:
    """The resource groups holding the pools' capacity reservation groups, as role assignment scopes."""
    scopes = []
    for pool in pools:
        group = reservation_group(pool)
        if group is not None:
            scopes.append(group.split("/providers/", 1)[0])
    return list(dict.fromkeys(scopes))


def uses_reservation_groups(pools: list[Pool]) -> bool:
    return bool(reservation_group_scopes(pools))


def contributor_role(subscription_id: str) -> str:
    return f"/subscriptions/{subscription_id}/providers/Microsoft.Authorization/roleDefinitions/{CONTRIBUTOR_ROLE}"


def provisioning_request_class(pool: Pool) -> str | None:
    return None


def capacity_flavor_labels(pool: Pool, autoscaler: str) -> list[tuple[str, dict[str, str]]]:
    return [("", {})]


def capacity_problems(pool: Pool, path: str, autoscaler: str, cluster: Cluster | None, hardware: Hardware | None) -> list[Problem]:
    """A pool in a capacity reservation group: the group by resource ID, no Spot, a VM size reservations support,
    the group's zones; Azure runs VMs beyond the reserved count as ordinary ones (overallocation), so the list
    is the group, then on-demand."""
    if pool.capacity is None:
        return []
    problems: list[Problem] = []
    listed = capacity.sources(pool)
    shape = tuple(s.kind for s in listed)
    for s in listed:
        if s.kind in (capacity.FLEX_START, capacity.QUEUED, capacity.ANY_RESERVATION):
            problems.append(Problem(s.path(path), f"{s.kind} is a GKE capacity kind; on AKS use a capacity reservation group, on-demand or spot"))
        r = s.reservation
        if r is None:
            continue
        where = f"{s.path(path)}.reservation"
        for attr, alias in (("tags", "tags"), ("owner_id", "ownerId"), ("kind", "kind")):
            if getattr(r, attr) is not None:
                problems.append(Problem(f"{where}.{alias}", f"not used on azure; {alias} applies to EKS reservations only"))
        if r.id is None or not RESERVATION_GROUP_ID.match(r.id):
            problems.append(Problem(f"{where}.id", f"{r.id!r} is not a capacity reservation group resource ID (/subscriptions/<id>/"
                                                   f"resourceGroups/<group>/providers/Microsoft.Compute/capacityReservationGroups/<name>)"))
        for j, zone in enumerate(r.zones or []):
            if zone not in ZONES:
                problems.append(Problem(f"{where}.zones[{j}]", f"{zone!r} is not an Azure availability zone; use {', '.join(ZONES)}"))
        if pool.zones and not r.zones:
            problems.append(Problem(f"{path}.zones", "given, but the reservation group lists no zones: VMs of a regional group are deployed "
                                                     "without zones; drop zones, or list the group's zones under reservation.zones"))
    if capacity.RESERVED in shape:
        if capacity.SPOT in shape:
            problems.append(Problem(f"{path}.capacity", "spot with a capacity reservation group: Azure capacity reservations do not take "
                                                        "Spot VMs; put spot capacity in another pool"))
        elif shape != (capacity.RESERVED, capacity.ON_DEMAND):
            problems.append(Problem(f"{path}.capacity", f"{', '.join(shape)}: an AKS pool takes one reservation group, then on-demand (Azure "
                                                        f"runs VMs beyond the reserved count as ordinary on-demand VMs); write "
                                                        f"[{{reservation: ...}}, on-demand]"))
        if UNRESERVABLE_SIZES.match(pool.instance_type):
            problems.append(Problem(f"{path}.instanceType", f"{pool.instance_type}: Azure capacity reservations do not support ND-series "
                                                            f"or NCads H100 v5 VMs; reserve another size or drop the reservation"))
    elif len(shape) > 1:
        problems.append(Problem(f"{path}.capacity", f"{', '.join(shape)}: an AKS agent pool has one priority (Regular or Spot); "
                                                    f"put each kind in its own pool"))
    return problems


def capacity_lines(pool: Pool, autoscaler: str) -> list[str]:
    lines = []
    for s in capacity.sources(pool):
        if s.reservation is not None:
            zones = capacity.placement_zones(pool)
            lines.append(f"{s.label}: agent pool capacityReservationGroupID" + (f", zones {', '.join(zones)}" if zones else ", no zones")
                         + "; the cluster's user-assigned identity holds Contributor on the group's resource group")
        elif s.kind == capacity.ON_DEMAND and capacity.has(pool, capacity.RESERVED):
            lines.append("on-demand: VMs beyond the reserved count (Azure overallocation, without the reservation's capacity SLA)")
        else:
            lines.append(f"{s.kind}: agent pool priority " + ("Spot" if s.kind == capacity.SPOT else "Regular"))
    return lines


def reservation_identity_findings(name: str, identity: dict | None, scopes: list[str]) -> list[str]:
    """An existing cluster gpupools does not change: say what its identity lacks for pools in a reservation group."""
    kind = (identity or {}).get("type")
    if kind == "UserAssigned":
        return [f"existing AKS cluster {name!r}: its user-assigned identity needs Contributor on {', '.join(scopes)} for the pools "
                f"in a capacity reservation group (gpupools does not assign roles on a cluster it did not create)"]
    return [f"existing AKS cluster {name!r} has a {kind or 'missing'} identity; pools in a capacity reservation group need a user-assigned "
            f"identity with Contributor on {', '.join(scopes)} (az aks update --assign-identity)"]

# Capacity bought ahead (reservations, Capacity Blocks, DWS) is something a pool can name (docs/capacity.md).
RESERVATIONS = True
