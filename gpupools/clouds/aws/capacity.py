"""EKS: where a pool's capacity comes from: on-demand, spot, capacity reservations and Capacity Blocks, as node
groups and Karpenter NodePools express them, and the plan's capacity lines.
"""

from __future__ import annotations


import re


from gpupools.stack.config import Pool
from gpupools.capacity import sources as capacity


# --------------------------------------------------------------------------------------------------------------------
# Capacity: ODCRs and Capacity Blocks, on Karpenter and on managed node groups

# Karpenter 1.14.1's EC2NodeClass capacityReservationSelectorTerms[].id pattern (karpenter.k8s.aws_ec2nodeclasses.yaml).
RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")
# EC2 starts terminating Capacity Block instances 30 minutes before the block ends; Karpenter deletes their
# NodeClaims 40 minutes before (aws/karpenter-provider-aws pkg/apis/v1/ec2nodeclass_status.go,
# capacityReservationExpirationPeriod), and EKS scales a CAPACITY_BLOCK node group to zero 40 minutes before
# (EKS user guide, capacity-blocks-mng: "Capacity Scaledown Before Reservation End").
BLOCK_DRAIN_MINUTES = 40
BLOCK_TERMINATE_MINUTES = 30
# Karpenter's NodePool capacity types: reserved (ODCRs and Capacity Blocks), spot, on-demand; with several
# allowed it tries reserved, then spot, then on-demand (Karpenter docs, NodePools, "Capacity Type").
KARPENTER_ORDER = (capacity.RESERVED, capacity.SPOT, capacity.ON_DEMAND)
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"


def _is_karpenter(autoscaler: str) -> bool:
    return autoscaler == "karpenter"


def node_group_capacity_type(pool: Pool) -> str:
    """EKS CreateNodegroup capacityType: CAPACITY_BLOCK for a block, SPOT for a spot pool, ON_DEMAND otherwise
    (an ODCR is on-demand capacity the launch template points at)."""
    if capacity.blocks(pool):
        return "CAPACITY_BLOCK"
    return "SPOT" if capacity.spot_only(pool) else "ON_DEMAND"


def launch_template_capacity(pool: Pool) -> dict:
    """What the launch template of a managed node group says about reservations (EC2 CreateLaunchTemplate
    LaunchTemplateData, as the provider names it).

    - a Capacity Block: market type `capacity-block`, the block's id and the instance type in the template (EKS
      user guide, capacity-blocks-mng: all three are required, and the node group sets capacityType CAPACITY_BLOCK);
    - an ODCR alone: the reservation as target, so nodes start in it or not at all;
    - an ODCR, then on-demand: preference `open`, so a node starts in any open reservation matching its instance
      type and zone, else as on-demand (EC2 CapacityReservationPreference).
    """
    found = capacity.reservations(pool)
    if not found:
        return {}
    reservation = found[0]
    if reservation.kind == "capacity-block":
        return {"instanceType": pool.instance_type, "instanceMarketOptions": {"marketType": "capacity-block"},
                "capacityReservationSpecification": {"capacityReservationTarget": {"capacityReservationId": reservation.id}}}
    if capacity.has(pool, capacity.ON_DEMAND):
        return {"capacityReservationSpecification": {"capacityReservationPreference": "open"}}
    return {"capacityReservationSpecification": {"capacityReservationTarget": {"capacityReservationId": reservation.id}}}


def reservation_selector_terms(pool: Pool) -> list[dict]:
    """EC2NodeClass capacityReservationSelectorTerms: an id term alone (the CRD makes id exclusive), or tags with an
    optional owner. Karpenter never matches an open ODCR by itself: every reservation must be selected."""
    terms = []
    for r in capacity.reservations(pool):
        if r.id is not None:
            terms.append({"id": r.id})
        else:
            term: dict = {"tags": dict(r.tags or {})}
            if r.owner_id:
                term["ownerID"] = r.owner_id
            terms.append(term)
    return terms


def karpenter_capacity_types(pool: Pool) -> list[str]:
    """The NodePool's karpenter.sh/capacity-type values, in the stack's order."""
    return [k for k in capacity.kinds(pool) if k in KARPENTER_ORDER]


def capacity_flavor_labels(pool: Pool, autoscaler: str) -> list[tuple[str, dict[str, str]]]:
    """Node labels that tell a pool's capacity kinds apart, for queue flavors: Karpenter labels reserved nodes
    `karpenter.sh/capacity-type=reserved`, so reserved and hourly capacity become two flavors; the hourly flavor
    names the capacity type only when there is one (Karpenter picks between spot and on-demand itself)."""
    types = karpenter_capacity_types(pool)
    if not _is_karpenter(autoscaler) or capacity.RESERVED not in types or len(types) == 1:
        return [("", {})]
    hourly = [t for t in types if t != capacity.RESERVED]
    return [(capacity.RESERVED, {CAPACITY_TYPE_LABEL: capacity.RESERVED}),
            ("hourly" if len(hourly) > 1 else hourly[0], {CAPACITY_TYPE_LABEL: hourly[0]} if len(hourly) == 1 else {})]


def provisioning_request_class(pool: Pool) -> str | None:
    """EKS offers no queued provisioning through ProvisioningRequests."""
    return None


def capacity_lines(pool: Pool, autoscaler: str) -> list[str]:
    """What the plan says of each source on EKS: how nodes get there and what happens at the end."""
    lines = []
    karpenter = _is_karpenter(autoscaler)
    for s in capacity.sources(pool):
        r = s.reservation
        if r is None:
            how = (f"Karpenter NodePool capacity type {s.kind}" if karpenter else
                   f"managed node group capacityType {node_group_capacity_type(pool)}")
            lines.append(f"{s.label}: {how}")
            continue
        if karpenter:
            how = "EC2NodeClass capacityReservationSelectorTerms, NodePool capacity type reserved"
        elif r.kind == "capacity-block":
            how = "managed node group capacityType CAPACITY_BLOCK, launch template market type capacity-block"
        elif capacity.has(pool, capacity.ON_DEMAND):
            how = "launch template preference open: the reservation is used only if it accepts open matching (instance eligibility open)"
        else:
            how = "launch template targets the reservation; no node starts once it is full"
        zones = capacity.placement_zones(pool)
        lines.append(f"{s.label}: {how}" + (f", pinned to {', '.join(zones)}" if zones else ""))
        if r.kind == "capacity-block":
            who = "Karpenter drains its nodes" if karpenter else "EKS scales the node group to zero"
            lines.append(f"when the block ends: {who} {BLOCK_DRAIN_MINUTES} minutes before its end time; EC2 terminates what is left "
                         f"{BLOCK_TERMINATE_MINUTES} minutes before it")
    return lines

# Capacity bought ahead (reservations, Capacity Blocks, DWS) is something a pool can name (docs/capacity.md).
RESERVATIONS = True
