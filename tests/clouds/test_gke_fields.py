"""The GKE resources' own fields, read from the plan (the mock engine's registered resources), for every GKE example
stack (stacks/Pulumi.dev-gcp*.yaml) and a stack of the pool kinds the examples leave out. Each expectation names what it
protects, so that a flipped comparison, a negated condition, a dropped line or a misspelled key in
gpupools/clouds/gcp.py fails here:

- management: auto-repair on unless the pool turns it off or runs flex-start or queued (GKE's recipes run those with
  --no-enable-autorepair); a wrong test there takes auto-repair from every pool.
- network config: a GPUDirect pool's extra NICs (NodeNetworkConfig.additionalNodeNetworkConfigs); a misspelled key
  leaves the pool without them.
- upgrade settings: none for flex-start and queued pools (GKE's short-lived upgrades), surge for inference, reserved
  and compact fabric pools, autoscaled blue-green for other training pools.
- placement: COMPACT only where GKE takes it (not beside a reservation or queued provisioning, with flex-start only on
  A3 Ultra, A4 and H4D).
- reservation affinity, flex-start and queued provisioning, Spot, taints and labels.

Each plan is computed once per session (`plans`)."""

from __future__ import annotations

from functools import cache

import pytest
import yaml
from conftest import ROOT, plan_of, stack_config

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
MISSING = object()

GPU_TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
ON = {"autoRepair": True, "autoUpgrade": True}
REPAIR_OFF = {"autoRepair": False, "autoUpgrade": True}
BLUE_GREEN = {"strategy": "BLUE_GREEN", "blueGreenSettings": {"autoscaledRolloutPolicy": {"waitForDrainDuration": "86400s"}}}
SURGE_FIRST = {"strategy": "SURGE", "maxSurge": 1, "maxUnavailable": 0}  # inference: a new node, then the old one drained
ONE_AT_A_TIME = {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}
ALL_ZONES = ["us-central1-a", "us-central1-b", "us-central1-c"]

# The pool kinds the example stacks leave out, on one cluster that takes flex-start (GKE 1.33 or later).
KINDS = [
    {"name": "mega", "instanceType": "a3-megagpu-8g", "zones": ["us-central1-a"], "maxNodes": 2},
    {"name": "ultra", "instanceType": "a3-ultragpu-8g", "zones": ["us-central1-b"], "maxNodes": 2,
     "capacity": [{"flexStart": {"maxRunDuration": "12h"}}]},
    {"name": "highflex", "instanceType": "a3-highgpu-8g", "zones": ["us-central1-a"], "maxNodes": 2, "capacity": ["flex-start"]},
    {"name": "anyres", "instanceType": "g2-standard-8", "maxNodes": 2, "capacity": ["any-reservation", "on-demand"]},
    {"name": "norepair", "instanceType": "g2-standard-8", "maxNodes": 2, "autoRepair": False},
    {"name": "spotty", "instanceType": "g2-standard-8", "maxNodes": 2, "capacity": ["spot"]},
    {"name": "fixed", "instanceType": "g2-standard-8", "minNodes": 1, "maxNodes": 4, "autoRepair": True, "diskSizeGb": 200},
]
OPERATOR = [{"name": "infer", "instanceType": "g2-standard-8", "maxNodes": 3, "autoRepair": False}]


@cache
def _plan(name: str):
    if name == "kinds":
        config = stack_config("gcp", pools=KINDS, cluster={"name": "ml-test", "location": "us-central1", "kubernetesVersion": "1.35"})
    elif name == "operator":
        config = stack_config("gcp", pools=OPERATOR, gpuSoftware={"installer": "gpu-operator"})
    else:
        config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"]
    return plan_of(config)


@pytest.fixture(scope="session")
def plans():
    """The plans by stack, each computed the first time a test asks for it."""
    return _plan


def field(inputs: dict, path: str):
    node = inputs
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return MISSING
        node = node[key]
    return node


def pools_of(plan) -> dict[str, dict]:
    return {r.inputs["name"]: r.inputs for r in plan.of_type(NODE_POOL)}


def test_every_gke_example_stack_is_covered_here():
    examples = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.dev-gcp*.yaml"))
    assert examples == ["dev-gcp", "dev-gcp-a4x", "dev-gcp-autopilot", "dev-gcp-dws", "dev-gcp-fallback"]


# (stack, pool) -> the fields that pool's kind decides; MISSING: the field must not be set.
EXPECTED = {
    # inference, GKE's time-sharing: surge first, auto-repair on by default, no reservation, no extra NICs
    ("dev-gcp", "infer"): {
        "management": ON, "upgradeSettings": SURGE_FIRST, "networkConfig": MISSING, "placementPolicy": MISSING,
        "nodeConfig.reservationAffinity": MISSING, "nodeConfig.spot": False, "nodeConfig.flexStart": MISSING,
        "autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 5, "locationPolicy": "BALANCED"}, "initialNodeCount": 0,
        "nodeConfig.taints": GPU_TAINT, "nodeConfig.labels": {"gpupools.io/gpu": "L4", "gpupools.io/pool": "infer"},
        "nodeConfig.resourceLabels": {"gpupools-upgrades": "inference"}, "nodeLocations": ALL_ZONES,
        "nodeConfig.guestAccelerators": [{"type": "nvidia-l4", "count": 1, "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
                                          "gpuSharingConfig": {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": 3}}],
        "nodeConfig.imageType": "COS_CONTAINERD", "nodeConfig.shieldedInstanceConfig": {"enableSecureBoot": True, "enableIntegrityMonitoring": True},
    },
    # N1 with two T4s on Spot: location policy ANY, blue-green (a training pool with room to grow)
    ("dev-gcp", "dev"): {
        "management": ON, "upgradeSettings": BLUE_GREEN, "nodeConfig.spot": True, "networkConfig": MISSING, "placementPolicy": MISSING,
        "autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"},
        "nodeConfig.reservationAffinity": MISSING, "nodeConfig.taints": GPU_TAINT,
        "nodeConfig.labels": {"gpupools.io/gpu": "T4", "gpupools.io/pool": "dev"},
        "nodeConfig.guestAccelerators": [{"type": "nvidia-tesla-t4", "count": 2, "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}],
    },
    # GKE's MIG partitions
    ("dev-gcp", "train"): {
        "management": ON, "upgradeSettings": BLUE_GREEN, "networkConfig": MISSING, "nodeConfig.spot": False,
        "nodeConfig.guestAccelerators": [{"type": "nvidia-tesla-a100", "count": 1, "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
                                          "gpuPartitionSize": "2g.10gb"}],
        "nodeConfig.labels": {"gpupools.io/gpu": "A100-40GB", "gpupools.io/pool": "train"},
    },
    # GPUDirect-TCPXO on a specific reservation: 8 extra NICs, gVNIC, the reservation's own placement (no COMPACT), surge
    # one node at a time (no spare reserved node), local SSDs as ephemeral storage
    ("dev-gcp", "pretrain"): {
        "management": ON, "upgradeSettings": ONE_AT_A_TIME, "placementPolicy": MISSING,
        "networkConfig": {"additionalNodeNetworkConfigs": [{"network": f"ml-dev-pretrain-net-{i}", "subnetwork": f"ml-dev-pretrain-net-{i}"}
                                                           for i in range(1, 9)]},
        "nodeConfig.gvnic": {"enabled": True},
        "nodeConfig.reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
                                           "values": ["a3mega-us-central1-a"]},
        "nodeConfig.resourceLabels": {"gpupools-upgrades": "training", "gpupools-reserved-nodes": "2"},
        "nodeConfig.ephemeralStorageLocalSsdConfig": {"localSsdCount": 16}, "nodeLocations": ["us-central1-a"],
        "autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "BALANCED"},
        "nodeConfig.taints": GPU_TAINT, "nodeConfig.spot": False,
    },
    # queued provisioning: flex-start VMs through ProvisioningRequests, from zero, no reservation, auto-repair off, no
    # upgrade settings (short-lived upgrades), no compact placement
    ("dev-gcp-dws", "h100"): {
        "management": REPAIR_OFF, "upgradeSettings": MISSING, "placementPolicy": MISSING, "queuedProvisioning": {"enabled": True},
        "nodeConfig.flexStart": True, "nodeConfig.maxRunDuration": "86400s",
        "nodeConfig.reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
        "autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 1, "locationPolicy": "ANY"}, "initialNodeCount": 0,
        "nodeConfig.taints": GPU_TAINT, "nodeConfig.labels": {"gpupools.io/gpu": "H100-80GB", "gpupools.io/pool": "h100"},
        "version": "1.35",
    },
    ("dev-gcp-dws", "infer"): {
        "management": ON, "upgradeSettings": SURGE_FIRST, "queuedProvisioning": MISSING, "nodeConfig.flexStart": MISSING,
        "nodeConfig.reservationAffinity": MISSING, "version": "1.35",
    },
    # an A4X rack: its reservation, the compact placement of its 1x72 resource policy, GKE's managed DRA networking (no
    # additional node networks), a fixed node count, GKE's driver on COS, one node at a time within the reservation
    ("dev-gcp-a4x", "a4x"): {
        "management": ON, "placementPolicy": {"type": "COMPACT", "policyName": "gpupools-a4x"}, "upgradeSettings": ONE_AT_A_TIME,
        "networkConfig": {"acceleratorNetworkProfile": "auto"}, "nodeCount": 18, "autoscaling": MISSING, "initialNodeCount": MISSING,
        "nodeConfig.reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
                                           "values": ["a4x-reservation"]},
        "nodeConfig.imageType": "COS_CONTAINERD", "nodeConfig.machineType": "a4x-highgpu-4g", "nodeConfig.spot": False,
        "nodeConfig.labels": {"gpupools.io/gpu": "GB200-186GB", "gpupools.io/pool": "a4x", "cloud.google.com/gke-networking-dra-driver": "true"},
        "nodeConfig.ephemeralStorageLocalSsdConfig": MISSING, "nodeLocations": ["us-central1-b"],
    },
    # a compact GPUDirect-TCPXO pool on demand: COMPACT, and therefore surge rather than blue-green
    ("kinds", "mega"): {
        "management": ON, "placementPolicy": {"type": "COMPACT"}, "upgradeSettings": ONE_AT_A_TIME,
        "networkConfig": {"additionalNodeNetworkConfigs": [{"network": f"ml-test-mega-net-{i}", "subnetwork": f"ml-test-mega-net-{i}"}
                                                           for i in range(1, 9)]},
        "nodeConfig.reservationAffinity": MISSING, "nodeConfig.gvnic": {"enabled": True}, "nodeLocations": ["us-central1-a"],
    },
    # flex-start on A3 Ultra: RDMA networks (one gVNIC network, eight RoCE subnets of one network), COMPACT (GKE takes it
    # with flex-start there), no upgrade settings, auto-repair off, its run bounded
    ("kinds", "ultra"): {
        "management": REPAIR_OFF, "placementPolicy": {"type": "COMPACT"}, "upgradeSettings": MISSING, "queuedProvisioning": MISSING,
        "networkConfig": {"additionalNodeNetworkConfigs": [{"network": "ml-test-ultra-gvnic", "subnetwork": "ml-test-ultra-gvnic"}]
                          + [{"network": "ml-test-ultra-rdma", "subnetwork": f"ml-test-ultra-rdma-{i}"} for i in range(8)]},
        "nodeConfig.flexStart": True, "nodeConfig.maxRunDuration": "43200s",
        "nodeConfig.reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
        "autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"},
    },
    # flex-start on A3 High: GPUDirect-TCPX's 4 NICs, but no COMPACT (not offered with flex-start there); GKE's own run limit
    ("kinds", "highflex"): {
        "management": REPAIR_OFF, "placementPolicy": MISSING, "upgradeSettings": MISSING, "nodeConfig.maxRunDuration": MISSING,
        "networkConfig": {"additionalNodeNetworkConfigs": [{"network": f"ml-test-highflex-net-{i}", "subnetwork": f"ml-test-highflex-net-{i}"}
                                                           for i in range(1, 5)]},
        "nodeConfig.flexStart": True, "nodeConfig.reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
    },
    ("kinds", "anyres"): {
        "management": ON, "upgradeSettings": BLUE_GREEN, "nodeConfig.reservationAffinity": {"consumeReservationType": "ANY_RESERVATION"},
        "nodeConfig.spot": False, "nodeConfig.flexStart": MISSING, "placementPolicy": MISSING, "networkConfig": MISSING,
        "autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "BALANCED"},
    },
    ("kinds", "norepair"): {"management": REPAIR_OFF, "upgradeSettings": BLUE_GREEN, "nodeConfig.reservationAffinity": MISSING},
    ("kinds", "spotty"): {
        "management": ON, "nodeConfig.spot": True, "upgradeSettings": BLUE_GREEN,
        "autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"},
    },
    ("kinds", "fixed"): {
        "management": ON, "initialNodeCount": 1, "nodeConfig.diskSizeGb": 200,
        "autoscaling": {"totalMinNodeCount": 1, "totalMaxNodeCount": 4, "locationPolicy": "BALANCED"},
    },
    # the GPU Operator's pools: Ubuntu, GKE's driver and device plugin off, secure boot off (NVIDIA's driver is unsigned)
    ("operator", "infer"): {
        "management": REPAIR_OFF, "nodeConfig.imageType": "UBUNTU_CONTAINERD",
        "nodeConfig.guestAccelerators": [{"type": "nvidia-l4", "count": 1, "gpuDriverInstallationConfig": {"gpuDriverVersion": "INSTALLATION_DISABLED"}}],
        "nodeConfig.shieldedInstanceConfig": {"enableSecureBoot": False, "enableIntegrityMonitoring": True},
        "nodeConfig.labels": {"gpupools.io/gpu": "L4", "gpupools.io/pool": "infer", "gke-no-default-nvidia-gpu-device-plugin": "true",
                              "nvidia.com/device-plugin.config": "no-sharing"},
    },
}


@pytest.mark.parametrize("stack, pool", list(EXPECTED), ids=[f"{s}-{p}" for s, p in EXPECTED])
def test_a_gke_node_pools_fields_follow_its_kind(plans, stack, pool):
    pools = pools_of(plans(stack))
    inputs = pools[pool]
    wrong = {path: field(inputs, path) for path, want in EXPECTED[(stack, pool)].items() if field(inputs, path) != want}
    assert not wrong, {path: (got if got is not MISSING else "<missing>", EXPECTED[(stack, pool)][path]) for path, got in wrong.items()}


@pytest.mark.parametrize("stack", ["dev-gcp", "dev-gcp-dws", "kinds", "operator"])
def test_every_node_pool_of_a_standard_stack_is_checked_above_and_its_system_pool_is_gkes_default(plans, stack):
    pools = pools_of(plans(stack))
    assert set(pools) - {"system"} == {p for s, p in EXPECTED if s == stack}
    system = pools["system"]
    assert system["management"] == ON and system["autoscaling"] == {"totalMinNodeCount": 1, "totalMaxNodeCount": 3}
    assert field(system, "upgradeSettings") is MISSING and field(system, "nodeConfig.taints") is MISSING
    assert system["nodeConfig"]["labels"] == {"gpupools.io/pool": "system"} and system["nodeConfig"]["machineType"] == "e2-standard-4"


@pytest.mark.parametrize("stack, private_endpoint", [("dev-gcp", False), ("dev-gcp-dws", False), ("dev-gcp-fallback", False),
                                                      ("kinds", True)])  # the examples list authorized ranges; kinds none
def test_a_standard_cluster_drops_gkes_default_pool_and_keeps_its_controls(plans, stack, private_endpoint):
    (cluster,) = plans(stack).of_type(CLUSTER)
    inputs = cluster.inputs
    assert inputs["removeDefaultNodePool"] is True and inputs["initialNodeCount"] == 1
    assert field(inputs, "enableAutopilot") is MISSING
    assert inputs["enableShieldedNodes"] is True and inputs["datapathProvider"] == "ADVANCED_DATAPATH"
    assert inputs["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": private_endpoint}
    # Only a stack with a GPUDirect pool turns on multi-networking.
    fabric = any(field(p, "networkConfig") is not MISSING for p in pools_of(plans(stack)).values())
    assert field(inputs, "enableMultiNetworking") == (True if fabric else MISSING)


def test_the_dev_gcp_cluster_keeps_its_maintenance_window_and_exclusion(plans):
    (cluster,) = plans("dev-gcp").of_type(CLUSTER)
    assert cluster.inputs["maintenancePolicy"] == {
        "recurringWindow": {"startTime": "2026-01-10T02:00:00Z", "endTime": "2026-01-10T08:00:00Z", "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU"},
        "maintenanceExclusions": [{"exclusionName": "year-end-run", "startTime": "2026-12-15T00:00:00Z", "endTime": "2027-01-11T00:00:00Z",
                                   "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES"}}]}


# --------------------------------------------------------------------------------------------------------------------
# The managed modes: ComputeClass pools (dev-gcp-fallback) and Autopilot (dev-gcp-autopilot)


def test_computeclass_pools_make_no_node_pool_and_the_cluster_provisions_their_gpus(plans):
    plan = plans("dev-gcp-fallback")
    assert set(pools_of(plan)) == {"system"}
    (cluster,) = plan.of_type(CLUSTER)
    scaling = cluster.inputs["clusterAutoscaling"]
    assert scaling["enabled"] is True
    defaults = scaling["autoProvisioningDefaults"]
    # Every node pool GKE creates for a class: auto-repair on, surge one node at a time, the node account, shielded.
    assert defaults["management"] == ON and defaults["upgradeSettings"] == ONE_AT_A_TIME
    assert defaults["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
    assert defaults["serviceAccount"] == "ml-fallback-nodes@ml-platform-dev.iam.gserviceaccount.com"
    limits = {r["resourceType"]: (r["minimum"], r["maximum"]) for r in scaling["resourceLimits"]}
    # h100: 1 node x 8 GPUs; infer: 6 nodes x 1 L4
    assert limits["nvidia-h100-80gb"] == (0, 8) and limits["nvidia-l4"] == (0, 6)
    assert set(limits) == {"cpu", "memory", "nvidia-h100-80gb", "nvidia-l4"} and limits["cpu"][1] > 0 and limits["memory"][1] > 0


def test_a_computeclass_lists_the_pools_capacity_in_order(plans):
    classes = {r.inputs["metadata"]["name"]: r.inputs for r in plans("dev-gcp-fallback").of_type(COMPUTE_CLASS)}
    assert set(classes) == {"gpupools-h100", "gpupools-infer"}
    spec = classes["gpupools-h100"]["spec"]
    gpu = {"type": "nvidia-h100-80gb", "count": 8, "driverVersion": "latest"}
    assert spec["priorities"] == [
        {"machineType": "a3-highgpu-8g", "gpu": gpu, "reservations": {"affinity": "Specific", "specific": [{"name": "h100-reserved"}]},
         "spot": False, "location": {"zones": ["us-central1-a"]}},
        {"machineType": "a3-highgpu-8g", "gpu": gpu, "flexStart": {"enabled": True}, "maxRunDurationSeconds": 86400, "location": {"zones": ALL_ZONES}},
        {"machineType": "a3-highgpu-8g", "gpu": gpu, "spot": True, "location": {"zones": ALL_ZONES}},
        {"machineType": "a3-highgpu-8g", "gpu": gpu, "spot": False, "location": {"zones": ALL_ZONES}},
    ]
    assert spec["whenUnsatisfiable"] == "DoNotScaleUp" and spec["nodePoolAutoCreation"] == {"enabled": True}
    assert spec["nodePoolConfig"] == {
        "imageType": "cos_containerd", "nodeLabels": {"gpupools.io/gpu": "H100-80GB", "gpupools.io/pool": "h100"},
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}], "autoRepair": True, "autoUpgrade": True,
        "serviceAccount": "ml-fallback-nodes@ml-platform-dev.iam.gserviceaccount.com"}
    infer = classes["gpupools-infer"]["spec"]["priorities"]
    assert [p["spot"] for p in infer] == [True, False]
    assert all(p["gpu"]["gpuSharing"] == {"sharingStrategy": "TIME_SHARING", "maxSharedClientsPerGPU": 4} for p in infer)


def test_an_autopilot_cluster_has_no_node_pool_of_gpupools(plans):
    plan = plans("dev-gcp-autopilot")
    assert pools_of(plan) == {} and plan.of_type(COMPUTE_CLASS) == []
    (cluster,) = plan.of_type(CLUSTER)
    inputs = cluster.inputs
    assert inputs["enableAutopilot"] is True
    for key in ("removeDefaultNodePool", "initialNodeCount", "enableShieldedNodes"):
        assert field(inputs, key) is MISSING, key
    assert inputs["monitoringConfig"] == {"enableComponents": ["SYSTEM_COMPONENTS", "DCGM"], "managedPrometheus": {"enabled": True}}
    assert inputs["clusterAutoscaling"] == {"autoProvisioningDefaults": {
        "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
        "serviceAccount": "ml-autopilot-nodes@ml-platform-dev.iam.gserviceaccount.com"}}


# --------------------------------------------------------------------------------------------------------------------
# The plan's upgrade lines say the same as the upgrade settings above

SHORT_LIVED = ("flex-start/queued: GKE's short-lived upgrades: running nodes keep their version until their run ends, new nodes start on "
               "the new one; no node is drained for an upgrade")
PDB = "GKE respects PodDisruptionBudgets for up to an hour while draining a node, then evicts"
BLUE_GREEN_LINE = ("autoscaled blue-green (GKE Preview): the old nodes are cordoned and new Jobs start on new nodes; an old node is drained "
                   "once empty or after 24 h (waitForDrainDuration)")
CLASS_LINE = (f"ComputeClass node pools: surge strategy: drains 1 node at a time, no surge; {PDB} (the cluster's node auto-provisioning "
              f"default, autoProvisioningDefaults.upgradeSettings: GKE takes no upgrade strategy per class)")
UPGRADE_LINES = {
    ("dev-gcp", "infer"): [f"surge strategy: surges 1 new node before draining one old; {PDB}"],
    ("dev-gcp", "dev"): [BLUE_GREEN_LINE],
    ("dev-gcp", "pretrain"): [f"surge strategy: drains 1 node at a time, no surge; {PDB}", "reserved: never surges past the reservation (0 spare reserved nodes)"],
    ("dev-gcp-dws", "h100"): [SHORT_LIVED],
    ("dev-gcp-dws", "infer"): [f"surge strategy: surges 1 new node before draining one old; {PDB}"],
    ("dev-gcp-fallback", "h100"): [CLASS_LINE, "flex-start priority: GKE's short-lived upgrades: running nodes keep their version until their "
                                               "run ends, new nodes start on the new one"],
    ("dev-gcp-fallback", "infer"): [CLASS_LINE],
    ("kinds", "mega"): [f"surge strategy: drains 1 node at a time, no surge; {PDB} (no blue-green: GKE takes none beside compact placement)"],
    ("kinds", "ultra"): [SHORT_LIVED],
}


@pytest.mark.parametrize("stack, pool", list(UPGRADE_LINES), ids=[f"{s}-{p}" for s, p in UPGRADE_LINES])
def test_the_plans_upgrade_lines_follow_the_pools_kind(stack, pool):
    from gpupools.fabric.plan import plan_fabrics
    from gpupools.pools.planning import plan_pools
    from gpupools.upgrades.policy import upgrade_lines
    from gpupools.validation.stack import validate_stack

    if stack == "kinds":
        config = stack_config("gcp", pools=KINDS, cluster={"name": "ml-test", "location": "us-central1", "kubernetesVersion": "1.35"})
    else:
        config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    validated = validate_stack(config)
    (plan,) = [p for p in plan_pools(validated) if p.name == pool]
    lines = upgrade_lines(validated, plan.pool, "", fabric=pool in plan_fabrics(validated, [plan]))
    assert lines[0].startswith(f"{plan.pool.upgrades or 'training'}: GKE auto-upgrades nodes (REGULAR channel; it cannot be turned off) only ")
    assert lines[1:] == UPGRADE_LINES[(stack, pool)]


# --------------------------------------------------------------------------------------------------------------------
# The node identity, the cluster's version, the kubeconfig, and what a GKE stack may not ask


def test_the_nodes_run_as_an_account_of_their_own_with_node_roles_only(plans):
    plan = plans("dev-gcp")
    (account,) = plan.of_type("gcp:serviceaccount/account:Account")
    assert account.inputs == {"accountId": "ml-dev-nodes", "displayName": "GKE nodes of ml-dev", "project": "ml-platform-dev",
                              "description": "The identity of the cluster's nodes (logs, metrics, image pulls); created by gpupools"}
    grants = [r.inputs for r in plan.of_type("gcp:projects/iAMMember:IAMMember")]
    assert sorted(g["role"] for g in grants) == ["roles/artifactregistry.reader", "roles/container.defaultNodeServiceAccount"]
    assert all(g["project"] == "ml-platform-dev" and g["member"] == "serviceAccount:ml-dev-nodes@ml-platform-dev.iam.gserviceaccount.com"
               for g in grants)
    for pool in pools_of(plan).values():
        assert pool["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"} and pool["cluster"] == "ml-dev"
        assert pool["nodeConfig"]["serviceAccount"] == "ml-dev-nodes@ml-platform-dev.iam.gserviceaccount.com"
        assert pool["nodeConfig"]["oauthScopes"] == ["https://www.googleapis.com/auth/cloud-platform"]


@pytest.mark.parametrize("stack, version", [("dev-gcp", MISSING), ("dev-gcp-dws", "1.35"), ("dev-gcp-autopilot", "1.35")])
def test_the_clusters_minimum_version_is_the_stacks_minor(plans, stack, version):
    (cluster,) = plans(stack).of_type(CLUSTER)
    assert field(cluster.inputs, "minMasterVersion") == version
    assert all(field(p, "version") == version for name, p in pools_of(plans(stack)).items() if name != "system")


def test_the_kubeconfig_asks_gkes_auth_plugin_and_holds_no_token():
    import json

    from gpupools.clouds import gcp

    config = json.loads(gcp.kubeconfig("ml", "203.0.113.7", "Q0E="))
    assert config["current-context"] == "ml"
    assert config["clusters"] == [{"name": "ml", "cluster": {"server": "https://203.0.113.7", "certificate-authority-data": "Q0E="}}]
    assert config["contexts"] == [{"name": "ml", "context": {"cluster": "ml", "user": "ml"}}]
    (user,) = config["users"]
    assert user["name"] == "ml" and user["user"]["exec"]["command"] == "gke-gcloud-auth-plugin" and user["user"]["exec"]["provideClusterInfo"] is True
    assert "token" not in json.dumps(config)


def test_mps_pools_ask_gke_for_mps_sharing():
    plan = plan_of(stack_config("gcp", pools=[{"name": "mps", "instanceType": "g2-standard-8", "maxNodes": 2,
                                               "sharing": {"mode": "mps", "replicas": 4}}]))
    (accelerator,) = pools_of(plan)["mps"]["nodeConfig"]["guestAccelerators"]
    assert accelerator["gpuSharingConfig"] == {"gpuSharingStrategy": "MPS", "maxSharedClientsPerGpu": 4}


def gke_problems(pools, **keys) -> list[str]:
    from conftest import config_problems

    return [f"{p.path}: {p.message}" for p in config_problems(stack_config("gcp", pools=pools, **keys))]


def test_a_regional_pool_takes_1000_nodes_per_zone_that_offers_its_gpu():
    from gpupools.validation.stack import validate_stack

    validate_stack(stack_config("gcp", pools=[{"name": "big", "instanceType": "g2-standard-8", "maxNodes": 3000}]))
    assert gke_problems([{"name": "big", "instanceType": "g2-standard-8", "maxNodes": 3001}]) == [
        "pools[0].maxNodes: 3001 is above the limit of 3,000 nodes per GKE node pool in 3 zones; lower maxNodes or split the pool"]
    assert gke_problems([{"name": "big", "instanceType": "g2-standard-8", "maxNodes": 1001, "zones": ["us-central1-a"]}]) == [
        "pools[0].maxNodes: 1001 is above the limit of 1,000 nodes per GKE node pool in 1 zone; lower maxNodes or split the pool"]


def test_an_n1_machine_too_large_for_its_gpus_says_how_many_it_takes():
    found = gke_problems([{"name": "n1", "instanceType": "n1-standard-32", "gpu": "nvidia-tesla-v100", "gpuCount": 1, "maxNodes": 1}])
    assert found == ["pools[0].gpuCount: n1-standard-32 (32 vCPUs, 120 GB) is too large for 1 x nvidia-tesla-v100: Compute Engine allows at "
                     "most 12 vCPUs and 78 GB with that many; use gpuCount 4 or more, or a smaller N1 machine type"]
    from gpupools.validation.stack import validate_stack

    validate_stack(stack_config("gcp", pools=[{"name": "n1", "instanceType": "n1-standard-32", "gpu": "nvidia-tesla-v100", "gpuCount": 4,
                                               "maxNodes": 1}]))


@pytest.mark.parametrize("capacity, cluster, path, says", [
    ([{"reservation": {"id": "r1", "zones": ["us-central1-a"], "nodes": 1}}, "on-demand"], {}, "pools[0].capacity",
     "a GKE node pool consumes one named reservation and nothing else (SPECIFIC_RESERVATION fails when it is full)"),
    (["any-reservation"], {}, "pools[0].capacity", "GKE starts on-demand nodes when no reservation matches; write [any-reservation, on-demand]"),
    (["spot", "on-demand"], {}, "pools[0].capacity", "spot, on-demand: a GKE node pool takes one of [on-demand], [spot]"),
])
def test_capacity_a_gke_node_pool_cannot_take_is_one_line(capacity, cluster, path, says):
    found = gke_problems([{"name": "p", "instanceType": "a3-highgpu-8g", "maxNodes": 1, "capacity": capacity}],
                         cluster={"name": "ml-test", "location": "us-central1", **cluster})
    assert any(p.startswith(f"{path}: {says}") for p in found), found


@pytest.mark.parametrize("minor, ok", [("1.32", False), ("1.33", True), ("1.35", True)])
def test_flex_start_needs_gke_1_33_or_later(minor, ok):
    # Asked of the decision itself: which minors a stack may name moves with GKE's support calendar.
    from gpupools.clouds import gcp
    from gpupools.validation.stack import validate_stack

    stack = validate_stack(stack_config("gcp", pools=[{"name": "p", "instanceType": "a3-highgpu-8g", "maxNodes": 1, "capacity": ["flex-start"]}],
                                        cluster={"name": "ml-test", "location": "us-central1", "kubernetesVersion": "1.35"}))
    cluster = stack.cluster.model_copy(update={"kubernetes_version": minor})
    found = [f"{p.path}: {p.message}" for p in gcp.capacity_problems(stack.pools[0], "pools[0]", "", cluster, None)]
    assert found == ([] if ok else [f"cluster.kubernetesVersion: {minor}: flex-start needs GKE 1.33 or later (1.33.0-gke.1712000)"])


# --------------------------------------------------------------------------------------------------------------------
# GPUDirect: the zone a fabric pool lands in, and the NCCL settings its pods get


@pytest.mark.parametrize("location, machine, zone", [
    ("us-central1-b", "a3-ultragpu-8g", "us-central1-b"),    # a zonal cluster: its zone
    ("us-central1", "a3-ultragpu-8g", "us-central1-b"),      # H200 in one zone of the region: that zone
    ("us-central1", "a3-megagpu-8g", None),                  # H100 Mega in three: the stack must say which
    ("asia-southeast1", "a3-ultragpu-8g", None),             # in none
])
def test_a_fabric_pool_goes_to_the_only_zone_that_offers_its_gpu(location, machine, zone):
    from gpupools.clouds import gcp
    from gpupools.stack.config import Cluster, Pool

    pool = Pool(name="p", instanceType=machine, maxNodes=1)
    assert gcp.fabric_zone_of_cluster(pool, Cluster(name="ml", location=location)) == zone
    assert gcp.fabric_zone_of_cluster(pool, None) is None


def test_a_tcpx_pod_gets_googles_nccl_settings_for_a3_high():
    """Every NCCL setting of Google's TCPX test (container-engine-accelerators @ 204a57c gpudirect-tcpx/nccl-config.yaml,
    run-nccl.sh) but the debug ones, with the same value, and the NICs the pool's networks give the pod."""
    import json
    import re as regex

    from conftest import reference_dir
    from gpupools.clouds import gcp

    script = (reference_dir() / "container-engine-accelerators" / "gpudirect-tcpx-nccl-config.yaml").read_text()
    google = {k: v.strip('"') for k, v in regex.findall(r"-x (NCCL_\w+)=(\S+)", script) if not k.startswith("NCCL_DEBUG")}
    assert len(google) >= 20
    pod = gcp.fabric_pod(8, "train", "gpudirect-tcpx", 4)
    assert {k: pod["env"].get(k) for k in google} == google
    assert json.loads(pod["annotations"]["networking.gke.io/interfaces"]) == [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": f"eth{i}", "network": f"train-vpc{i}"} for i in range(1, 5)]
    assert [m["mountPath"] for m in pod["mounts"]] == ["/tmp", "/usr/local/nvidia/lib64"] and pod["capabilities"] == ["IPC_LOCK"]
    assert gcp.fabric_pod(8, "train", "gpudirect-tcpx", 0)["annotations"] == {}  # no GPU networks: nothing to attach


def test_messages_that_ask_for_a_zone_name_one_of_the_stacks_region():
    from gpupools.clouds import gcp
    from gpupools.stack.config import Cluster

    assert gcp.example_zone(Cluster(name="ml", location="europe-west4"), {}) == "europe-west4-a"
    assert gcp.example_zone(Cluster(name="ml", location="europe-west4-b"), {}) == "europe-west4-a"
    assert gcp.example_zone(None, {}) is None and gcp.example_zone(Cluster(name="ml"), {}) is None
