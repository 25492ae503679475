"""One stack per cloud that sets every key a stack file takes (and every credential, encrypted), so a test that
plants a value at every position of a stack reaches every field, the alert receivers and provider credentials
included. `test_no_echo.py` checks that together they cover every field of the models."""

from __future__ import annotations


def secure(text: str) -> dict:
    """How `pulumi config set --secret` stores a value: ciphertext gpupools cannot read offline."""
    return {"secure": "v1:" + text}


def _alerts(channel: str) -> dict:
    return {"slack": {"webhook": secure("hooks"), "channel": channel}, "email": ["ml-team@example.com"]}


_MONITORING = {"enabled": True, "prometheus": "install", "releaseLabel": "kube-prometheus-stack", "grafana": True,
               "idle": {"utilizationBelowPercent": 5, "forHours": 4},
               "smtp": {"smarthost": "smtp.example.com:587", "from": "gpus@example.com", "username": "gpu-alerts", "password": secure("pw")}}
_HEALTH = {"readinessGate": True, "alerts": _alerts("#gpu-platform")}


def _teams(pools: dict, pool_list: list[str]) -> list[dict]:
    return [{"name": "research", "namespace": "research-ns", "gpus": pools, "borrow": "all", "lend": 2, "priority": "high",
             "alerts": _alerts("#research"), "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "research", "effect": "NoSchedule"}]},
            {"name": "search", "gpus": 2, "pools": pool_list, "borrow": "none", "lend": "all", "priority": "low"}]


WIDE = {
    "aws": {
        "aws:region": "eu-central-1",
        "aws:profile": "ml-deployer",
        "aws:accessKey": "AKIAIOSFODNN7EXAMPLE",
        "aws:secretKey": secure("secret-key"),
        "aws:token": secure("session-token"),
        "gpupools:cloud": "aws",
        "gpupools:cluster": {"name": "ml-wide", "create": True, "kubernetesVersion": "1.36", "endpointAccess": "restricted",
                             "authorizedCidrs": ["203.0.113.0/24"], "secretsEncryption": True,
                             "controlPlaneLogs": ["api", "audit", "authenticator"], "logRetentionDays": 90, "authenticationMode": "API",
                             "managedAddons": True, "systemPool": {"machineType": "m6i.large", "minNodes": 2, "maxNodes": 4}},
        "gpupools:sharing": {"mode": "none"},
        "gpupools:gpuSoftware": {"installer": "gpu-operator", "migStrategy": "mixed", "version": "v26.7.0"},
        "gpupools:pools": [
            {"name": "infer", "instanceType": "g5.2xlarge", "minNodes": 0, "maxNodes": 3, "spot": False,
             "diskSizeGb": 200, "os": "al2023", "labels": {"team": "search"}, "sharing": {"mode": "time-slicing", "replicas": 4},
             "zones": ["eu-central-1a"], "fabric": "none", "autoRepair": True,
             "capacity": [{"reservation": {"id": "cr-0123456789abcdef0", "kind": "odcr", "zones": ["eu-central-1a"], "nodes": 1}},
                          "on-demand"]},
            {"name": "tagged", "instanceType": "g6.xlarge", "maxNodes": 2, "taints": [{"key": "dedicated", "value": "research", "effect": "NoSchedule"}],
             "capacity": [{"reservation": {"tags": {"purpose": "ml"}, "ownerId": "123456789012", "nodes": 1}}, "spot"]},
            {"name": "pretrain", "instanceType": "p4d.24xlarge", "maxNodes": 2, "zones": ["eu-central-1a"], "fabric": "auto",
             "topologyLevel": "layer-2"},
            {"name": "l4", "instanceTypes": ["g6.xlarge", "g6.2xlarge"], "maxNodes": 2},
        ],
        "gpupools:monitoring": _MONITORING,
        "gpupools:teams": _teams({"infer": 4, "tagged": 1}, ["infer"]),
        "gpupools:quotas": "kueue",
        "gpupools:autoscaler": "karpenter",
        "gpupools:health": _HEALTH,
    },
    "azure": {
        "azure-native:location": "westeurope",
        "azure-native:subscriptionId": "0b1f6471-1bf0-4dda-aec3-111122223333",
        "azure-native:tenantId": "72f988bf-86f1-41af-91ab-2d7cd011db47",
        "azure-native:clientId": "04b07795-8ddb-461a-bbee-02f9e1bf7b46",
        "azure-native:clientSecret": secure("client-secret"),
        "gpupools:cloud": "azure",
        "gpupools:cluster": {"name": "ml-wide", "resourceGroup": "rg-ml", "kubernetesVersion": "1.34", "authorizedCidrs": ["203.0.113.0/24"],
                             "localAccounts": False, "azurePolicy": True, "networkPolicy": True,
                             "defenderWorkspaceId": "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/rg-ml/providers/"
                                                    "Microsoft.OperationalInsights/workspaces/law-gpu",
                             "systemPool": {"node": {"osDiskType": "Ephemeral"}}},
        "gpupools:sharing": {"mode": "vgpu", "replicas": 4, "memoryScaling": 1, "memoryPerPod": "4Gi"},
        "gpupools:gpuSoftware": {"installer": "gpu-operator", "migStrategy": "single", "driverVersion": "580.95.05", "draGpuAllocation": False},
        "gpupools:upgrades": {"window": {"days": ["sun"], "start": "01:00", "hours": 8},
                              "exclusions": [{"name": "year-end", "start": "2026-12-20", "end": "2027-01-03", "scope": "no-upgrades"}]},
        "gpupools:pools": [
            {"name": "notebooks", "instanceType": "Standard_NC8as_T4_v3", "minNodes": 1, "maxNodes": 3, "zones": ["1"],
             "upgrades": {"kind": "inference", "maxUnavailable": 1, "maxSurge": 1, "waitForJobs": "45m"},
             "capacity": [{"reservation": {"id": "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/rg-ml/providers/"
                                                 "Microsoft.Compute/capacityReservationGroups/crg-gpu", "zones": ["1"], "nodes": 1}}, "on-demand"]},
            {"name": "finetune", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 2, "spot": True,
             "sharing": {"mode": "mig", "migProfile": "1g.10gb"}, "node": {"maxPods": 60, "scaleSetEvictionPolicy": "Deallocate"}},
        ],
        "gpupools:monitoring": _MONITORING,
        "gpupools:teams": _teams({"notebooks": 4, "finetune": 2}, ["notebooks"]),
        "gpupools:health": _HEALTH,
        "gpupools:budget": {"maxGpus": 64, "maxMonthlyUsd": 25000.5},
        "gpupools:fleetWorker": {"fleets": ["gpupools-fleet-eu"]},
    },
    "gcp": {
        "gcp:project": "ml-platform-dev",
        "gcp:region": "us-central1",
        "gcp:zone": "us-central1-a",
        "gcp:credentials": secure("key-file"),
        "gcp:accessToken": secure("token"),
        "gpupools:cloud": "gcp",
        "gpupools:cluster": {"name": "ml-wide", "location": "us-central1", "kubernetesVersion": "1.35", "authorizedCidrs": ["203.0.113.0/24"],
                             "networkPolicy": True, "privateNodes": True, "releaseChannel": "REGULAR", "production": True,
                             "binaryAuthorization": True, "mode": "standard",
                             "nodeServiceAccount": "gke-nodes@ml-platform-dev.iam.gserviceaccount.com"},
        "gpupools:gpuSoftware": {"installer": "cloud"},
        "gpupools:pools": [
            {"name": "dev", "instanceType": "n1-standard-8", "gpu": "nvidia-tesla-t4", "gpuCount": 2, "maxNodes": 2, "spot": True,
             "upgrades": "inference"},
            {"name": "flex", "instanceType": "a3-highgpu-8g", "maxNodes": 1, "capacity": [{"flexStart": {"maxRunDuration": "24h"}}]},
            {"name": "fallback", "instanceType": "g2-standard-8", "maxNodes": 2, "provisioning": "compute-class", "capacity": ["spot", "on-demand"]},
            {"name": "queued", "instanceType": "a3-highgpu-8g", "maxNodes": 1, "capacity": [{"queued": {"maxRunDuration": "24h"}}]},
            {"name": "pretrain", "instanceType": "a3-megagpu-8g", "maxNodes": 2, "zones": ["us-central1-a"], "topologyLevel": "block"},
        ],
        "gpupools:monitoring": _MONITORING,
        "gpupools:teams": _teams({"dev": 2, "flex": 8, "queued": 8}, ["dev"]),
        "gpupools:health": _HEALTH,
    },
    "gcore": {
        "gcore:projectId": "1234567",
        "gcore:regionId": "76",
        "gpupools:cloud": "gcore",
        "gpupools:cluster": {"name": "ml-wide", "keypair": "ml-admins", "kubernetesVersion": "1.35"},
        "gpupools:pools": [
            {"name": "infer", "instanceType": "g3-ai-64-384-3000-l40s-48-2", "minNodes": 1, "maxNodes": 4, "diskSizeGb": 100,
             "placement": "anti-affinity", "autoRepair": True, "labels": {"team": "search"},
             "sharing": {"mode": "time-slicing", "replicas": 2}},
            {"name": "train", "instanceType": "bm3-ai-1xlarge-a100-80-8", "minNodes": 1, "maxNodes": 2, "autoRepair": False,
             "sharing": {"mode": "mig", "migProfile": "3g.40gb"}},
        ],
        "gpupools:monitoring": _MONITORING,
        "gpupools:teams": _teams({"infer": 4, "train": 4}, ["infer"]),
        "gpupools:health": _HEALTH,
    },
    # KAI Scheduler's queues, for the keys only such a stack takes: departments, over-quota weights, GPU fractions.
    "aws-kai": {
        "aws:region": "eu-central-1",
        "gpupools:cloud": "aws",
        "gpupools:cluster": {"name": "ml-kai"},
        "gpupools:sharing": {"mode": "none", "fraction": 0.25},
        "gpupools:pools": [{"name": "share", "instanceType": "g6.xlarge", "maxNodes": 2, "sharing": {"mode": "none", "fraction": 0.5}},
                           {"name": "train", "instanceType": "g5.12xlarge", "maxNodes": 2, "sharing": {"mode": "none"}}],
        "gpupools:quotas": "kai",
        "gpupools:departments": [{"name": "research", "teams": ["vision"], "gpus": 4, "borrow": 2, "priority": "high", "overQuotaWeight": 2}],
        "gpupools:teams": [{"name": "vision", "gpus": {"share": 1, "train": 3}, "borrow": "all", "priority": "normal", "overQuotaWeight": 3}],
    },
    # A mixed MIG layout as the stack's default sharing, and one pool's own.
    "aws-mig-layout": {
        "aws:region": "us-east-1",
        "gpupools:cloud": "aws",
        "gpupools:cluster": {"name": "ml-layout"},
        "gpupools:sharing": {"mode": "mig", "migLayout": [{"gpus": 6, "profiles": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}, {"gpus": 2}]},
        "gpupools:pools": [{"name": "p4d", "instanceType": "p4d.24xlarge", "maxNodes": 2},
                           {"name": "b200", "instanceType": "p6-b200.48xlarge", "maxNodes": 1, "sharing": {"mode": "mig", "migLayout": [
                               {"gpus": 4, "profiles": {"1g.23gb": 7}}, {"gpus": 4, "profiles": {"3g.90gb": 1, "4g.90gb": 1}}]}}],
    },
    # GPUs from NVIDIA's DRA driver (the preview sharing mode), as the stack's default and one pool's own.
    "aws-dra": {
        "aws:region": "us-east-1",
        "gpupools:cloud": "aws",
        "gpupools:cluster": {"name": "ml-dra"},
        "gpupools:gpuSoftware": {"installer": "gpu-operator", "draDriver": "chart"},
        "gpupools:autoscaler": "cluster-autoscaler",
        "gpupools:sharing": {"mode": "dra", "preview": True, "draFeatures": ["mps"]},
        "gpupools:pools": [{"name": "whole", "instanceType": "p4d.24xlarge", "maxNodes": 2},
                           {"name": "slices", "instanceType": "p4de.24xlarge", "maxNodes": 2,
                            "sharing": {"mode": "dra", "migProfile": "3g.40gb", "preview": True, "draFeatures": ["time-slicing"]}}],
    },
    # An existing EKS cluster, for the keys only such a stack takes.
    "aws-existing": {
        "aws:region": "eu-central-1",
        "gpupools:cloud": "aws",
        "gpupools:cluster": {"name": "ml-shared", "create": False, "subnetIds": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"]},
        "gpupools:sharing": {"mode": "mig", "migProfile": "1g.5gb"},
        "gpupools:autoscaler": "cluster-autoscaler",
        "gpupools:pools": [{"name": "infer", "instanceType": "p4d.24xlarge", "maxNodes": 2},
                           {"name": "vgpu", "instanceType": "g6.xlarge", "minNodes": 1, "maxNodes": 2,
                            "sharing": {"mode": "vgpu", "replicas": 4, "memoryScaling": 1, "memoryPerPod": "8Gi"}}],
    },
}
