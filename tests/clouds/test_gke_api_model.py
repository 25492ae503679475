"""GKE inputs against Google's own API model: the container v1 discovery document.

Every field gpupools sets on a GKE Cluster or NodePool must exist in the API's schema at the path the provider
sends it to, and every enum value must be one the API lists. Pulumi's GKE resources follow the Terraform
provider's schema, which renames a few fields and adds a few of its own; both lists are spelled out here, so a
new input that matches neither fails this test until someone looks it up.

The document ships in google-api-python-client, which cannot be installed beside pulumi-policy (protobuf
pins); `./dev` downloads the wheel and keeps only the document in `.venv/share/gpupools/`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import ROOT, plan_of, stack_config
from cli.test_new_gpu_stacks import STACKS as NEW_GPU_STACKS

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
API_SCHEMA = {CLUSTER: "Cluster", NODE_POOL: "NodePool"}

# Pulumi (Terraform) field path -> the API's, where they differ; list indices are left out of paths.
RENAMES = {
    CLUSTER: {("datapathProvider",): ("networkConfig", "datapathProvider"),
              ("enableMultiNetworking",): ("networkConfig", "enableMultiNetworking"),
              ("enableShieldedNodes",): ("shieldedNodes", "enabled"),
              # The provider's min_master_version is the API's initialClusterVersion at creation.
              ("minMasterVersion",): ("initialClusterVersion",),
              # The provider's recurring window holds its first occurrence's times itself; the API nests them.
              ("maintenancePolicy", "recurringWindow"): ("maintenancePolicy", "window", "recurringWindow"),
              ("maintenancePolicy", "recurringWindow", "startTime"): ("maintenancePolicy", "window", "recurringWindow", "window", "startTime"),
              ("maintenancePolicy", "recurringWindow", "endTime"): ("maintenancePolicy", "window", "recurringWindow", "window", "endTime"),
              # The provider lists exclusions with their names; the API maps each name (`*` here) to a TimeWindow.
              ("maintenancePolicy", "maintenanceExclusions"): ("maintenancePolicy", "window", "maintenanceExclusions", "*"),
              ("maintenancePolicy", "maintenanceExclusions", "exclusionOptions"):
                  ("maintenancePolicy", "window", "maintenanceExclusions", "*", "maintenanceExclusionOptions"),
              # Node auto-provisioning: the provider's `enabled` and defaults block are the API's own names.
              ("clusterAutoscaling", "enabled"): ("autoscaling", "enableNodeAutoprovisioning"),
              ("clusterAutoscaling", "autoProvisioningDefaults"): ("autoscaling", "autoprovisioningNodePoolDefaults"),
              ("clusterAutoscaling",): ("autoscaling",),
              # Autopilot, and GKE's monitoring components and Managed Service for Prometheus, as the API nests them.
              ("enableAutopilot",): ("autopilot", "enabled"),
              ("monitoringConfig", "enableComponents"): ("monitoringConfig", "componentConfig", "enableComponents"),
              ("monitoringConfig", "managedPrometheus"): ("monitoringConfig", "managedPrometheusConfig")},
    # The provider's node_count is the API's initialNodeCount at creation, then a resize (terraform-provider-google
    # resource_container_node_pool.go expandNodePool: InitialNodeCount from node_count).
    NODE_POOL: {("nodeLocations",): ("locations",), ("nodeCount",): ("initialNodeCount",),
                ("nodeConfig", "guestAccelerators"): ("config", "accelerators"),
                ("nodeConfig", "guestAccelerators", "count"): ("config", "accelerators", "acceleratorCount"),
                ("nodeConfig", "guestAccelerators", "type"): ("config", "accelerators", "acceleratorType"),
                ("nodeConfig",): ("config",)},
}
# Fields of the provider, not of the API: lifecycle switches, and the request's URL parameters.
PROVIDER_ONLY = {
    CLUSTER: {("deletionProtection",), ("removeDefaultNodePool",), ("project",), ("networkingMode",),
              ("maintenancePolicy", "maintenanceExclusions", "exclusionName")},
    NODE_POOL: {("project",), ("cluster",), ("location",)},
}


def discovery_document() -> dict:
    candidates = [os.environ.get("GPUPOOLS_GKE_DISCOVERY"), ROOT / ".venv" / "share" / "gpupools" / "container.v1.json"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return json.loads(Path(candidate).read_text())
    pytest.skip("the GKE discovery document is not on this machine (./dev downloads it into .venv/share/gpupools/)")


def _schema(doc: dict, node: dict) -> dict:
    return doc["schemas"][node["$ref"]] if "$ref" in node else node


def _api_path(kind: str, path: tuple[str, ...]) -> tuple[str, ...]:
    """The longest renamed prefix of `path` decides where it lives in the API."""
    for cut in range(len(path), 0, -1):
        if path[:cut] in RENAMES[kind]:
            return RENAMES[kind][path[:cut]] + path[cut:]
    return path


def api_problems(doc: dict, kind: str, inputs: dict) -> list[str]:
    problems: list[str] = []

    def walk(value, path: tuple[str, ...]) -> None:
        if path and path in PROVIDER_ONLY[kind]:
            return
        node = _schema(doc, {"$ref": API_SCHEMA[kind]})
        for part in _api_path(kind, path):
            if node.get("type") == "array":
                node = _schema(doc, node["items"])
            if "properties" in node and part in node["properties"]:
                node = _schema(doc, node["properties"][part])
            elif part == "*" and isinstance(node.get("additionalProperties"), dict):
                node = _schema(doc, node["additionalProperties"])  # a map's values, whatever their keys
            elif isinstance(node.get("additionalProperties"), dict):
                return  # a map (labels, metadata): its keys are data
            else:
                problems.append(f"{'.'.join(path)}: no field {part!r} in the API's {kind.rsplit(':', 1)[1]}")
                return
        if isinstance(value, dict):
            for key, sub in value.items():
                walk(sub, path + (key,))
        elif isinstance(value, list):
            for item in value:
                walk(item, path)
        elif "enum" in node and value not in node["enum"]:
            problems.append(f"{'.'.join(path)}: {value!r} is not one of {node['enum']}")

    walk(inputs, ())
    return problems


GKE_STACKS = {
    "dev-gcp": None,
    "mig-and-sharing": stack_config("gcp", pools=[
        {"name": "l4", "instanceType": "g2-standard-8", "maxNodes": 3, "spot": True, "sharing": {"mode": "time-slicing", "replicas": 4}},
        {"name": "a100", "instanceType": "a2-highgpu-1g", "maxNodes": 2, "sharing": {"mode": "mig", "migProfile": "2g.10gb"}},
        {"name": "mps", "instanceType": "g2-standard-8", "maxNodes": 2, "zones": ["us-central1-a"], "sharing": {"mode": "mps", "replicas": 2}},
    ]),
    "dev-gcp-dws": None,
    "dev-gcp-fallback": None,
    "dev-gcp-autopilot": None,
    "reservations-and-flex-start": stack_config("gcp", pools=[
        {"name": "res", "instanceType": "a3-highgpu-8g", "maxNodes": 2,
         "capacity": [{"reservation": {"id": "h100-res", "zones": ["us-central1-a"], "nodes": 2}}]},
        {"name": "any", "instanceType": "g2-standard-8", "maxNodes": 2, "capacity": ["any-reservation", "on-demand"]},
        {"name": "flex", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "capacity": [{"flexStart": {"maxRunDuration": "12h"}}]},
    ]),
    "fabric": stack_config("gcp", pools=[
        {"name": "a3", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "zones": ["us-central1-a"]},
        {"name": "mega", "instanceType": "a3-megagpu-8g", "maxNodes": 2, "zones": ["us-central1-b"]},
        {"name": "ultra", "instanceType": "a3-ultragpu-8g", "maxNodes": 2, "zones": ["us-central1-b"]},
    ]),
    # A3 Ultra (H200) and A4 (B200) on GPUDirect RDMA, A4 in GKE's B200 partitions (tests/cli/test_new_gpu_stacks.py)
    "newer-gpus": NEW_GPU_STACKS["gcp-h200-b200"][0],
    # GB200 and GB300 racks: a reservation, compact placement 1x72, GKE's managed DRA networking
    "dev-gcp-a4x": None,
    # G4 (RTX PRO 6000), in GKE's partitions and whole; a pool with a taint of its own
    "g4-and-taints": {**NEW_GPU_STACKS["gcp-rtx-pro-6000"][0], "gpupools:pools": [
        *NEW_GPU_STACKS["gcp-rtx-pro-6000"][0]["gpupools:pools"],
        {"name": "tainted", "instanceType": "g2-standard-8", "maxNodes": 2, "taints": [{"key": "dedicated", "value": "research", "effect": "NoSchedule"}]}]},
    "hardened-options": stack_config("gcp", cluster={"name": "prod", "location": "us-central1", "production": True,
                                                     "binaryAuthorization": True, "authorizedCidrs": ["198.51.100.0/24"]}),
}


@pytest.mark.parametrize("name", list(GKE_STACKS))
def test_gke_inputs_are_fields_and_enums_of_the_api(name):
    doc = discovery_document()
    config = GKE_STACKS[name]
    if config is None:
        from gpupools.stack.reading import read_document

        config = read_document(ROOT / "stacks" / f"Pulumi.{name}.yaml")["config"]
    plan = plan_of(config)
    checked = 0
    for kind in (CLUSTER, NODE_POOL):
        for resource in plan.of_type(kind):
            assert api_problems(doc, kind, resource.inputs) == [], resource.name
            checked += 1
    assert checked >= (1 if "autopilot" in name else 2)  # an Autopilot cluster has no node pool


def test_the_api_check_catches_a_wrong_field_and_a_wrong_enum():
    doc = discovery_document()
    plan = plan_of(GKE_STACKS["mig-and-sharing"])
    pool = plan.get(NODE_POOL, "l4").inputs
    pool["nodeConfig"]["guestAccelerators"][0]["gpuSharingConfig"]["gpuSharingStrategy"] = "TIME_SLICING"
    pool["nodeConfig"]["workloadMetadataConfig"]["modes"] = "GKE_METADATA"
    problems = api_problems(doc, NODE_POOL, pool)
    assert any("gpuSharingStrategy: 'TIME_SLICING' is not one of" in p for p in problems)
    assert any("no field 'modes'" in p for p in problems)
    cluster = plan.get(CLUSTER, plan.of_type(CLUSTER)[0].name).inputs
    cluster["datapathProvider"] = "CILIUM"
    assert any("datapathProvider: 'CILIUM' is not one of" in p for p in api_problems(doc, CLUSTER, cluster))


def test_dws_and_reservation_node_pools_carry_googles_settings():
    """Checked against the API above; here, that the settings Google's flex-start and queued recipes give are there."""
    from gpupools.stack.reading import read_document

    plan = plan_of(read_document(ROOT / "stacks" / "Pulumi.dev-gcp-dws.yaml")["config"])
    queued = plan.get(NODE_POOL, "h100").inputs
    assert queued["queuedProvisioning"] == {"enabled": True}
    assert queued["nodeConfig"]["flexStart"] is True and queued["nodeConfig"]["maxRunDuration"] == "86400s"
    assert queued["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert queued["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 1, "locationPolicy": "ANY"}
    assert queued["management"]["autoRepair"] is False and queued["initialNodeCount"] == 0
    plan = plan_of(GKE_STACKS["reservations-and-flex-start"])
    res = plan.get(NODE_POOL, "res").inputs
    assert res["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "SPECIFIC_RESERVATION",
                                                         "key": "compute.googleapis.com/reservation-name", "values": ["h100-res"]}
    assert res["nodeLocations"] == ["us-central1-a"]
    assert plan.get(NODE_POOL, "any").inputs["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "ANY_RESERVATION"}
    assert "queuedProvisioning" not in plan.get(NODE_POOL, "flex").inputs


def test_local_ssds_and_placement_of_fabric_pools_are_fields_of_the_api():
    """A3 pools' local SSDs under ephemeral storage (NodeConfig.ephemeralStorageLocalSsdConfig.localSsdCount) and
    compact placement (NodePool.placementPolicy.type COMPACT) are where the API has them; a misspelt count is not."""
    doc = discovery_document()
    plan = plan_of(GKE_STACKS["fabric"])
    pool = plan.get(NODE_POOL, "mega").inputs
    assert pool["nodeConfig"]["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 16} and pool["placementPolicy"] == {"type": "COMPACT"}
    assert api_problems(doc, NODE_POOL, pool) == []
    pool["nodeConfig"]["ephemeralStorageLocalSsdConfig"] = {"localSsdCounts": 16}
    pool["placementPolicy"] = {"type": "DENSE"}
    problems = api_problems(doc, NODE_POOL, pool)
    assert any("no field 'localSsdCounts'" in p for p in problems) and any("type: 'DENSE' is not one of" in p for p in problems)
