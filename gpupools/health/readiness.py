"""Ready before taking work: a new GPU node carries a startup taint until the GPU Operator has validated its stack.

The gate, per pool whose nodes run the GPU Operator's operands:

1. The node starts with the taint `readiness.k8s.io/gpupools-gpu-ready=pending:NoSchedule` (Karpenter `startupTaints`,
   EKS node-group taints). AKS and GKE get no such taint: their managed autoscalers read a pool's taints into their
   template and cannot be told to ignore one, so a Ready node still tainted would look full and they would start
   another; there the autoscaler's own GPU rule and the pods' GPU requests are the gate (see the cloud modules).
2. The GPU Operator's validator writes `/run/nvidia/validations/plugin-ready` once driver, toolkit, CUDA and the
   device plugin's resources are validated on the node (NVIDIA/gpu-operator cmd/nvidia-validator/main.go,
   `pluginStatusFile`; written after `validateGPUResource`). After a MIG reconfiguration the MIG manager restarts
   the validator, so the file only appears once the partitions are advertised.
3. A reporter DaemonSet (the Node Readiness Controller's own `node-readiness-reporter` image) polls that file through
   a file server in the same pod and writes the node condition `gpupools.io/GPUStackReady`.
4. The Node Readiness Controller (kubernetes-sigs/node-readiness-controller, official chart) removes the taint
   once the condition is True, once per node (`bootstrap-only`).

Nothing in NVIDIA's stack removes a taint (the GPU Operator, device plugin and GFD have no taint code), which is
why the controller does it. Autoscalers treat the taint as a startup taint:

- Karpenter counts `readiness.k8s.io/` taints as known ephemeral (kubernetes-sigs/karpenter pkg/scheduling/taints.go,
  `KnownEphemeralTaintKeyPrefixes`) and, listed in `startupTaints`, ignores it when simulating pods and keeps the
  NodeClaim uninitialized until it is gone (pkg/controllers/nodeclaim/lifecycle/initialization.go).
- cluster-autoscaler is told the key with `--startup-taint` (kubernetes/autoscaler cluster-autoscaler/utils/taints/
  taints.go, `NewTaintConfig`): it strips the taint from node templates and counts a tainted node as still starting,
  so it does not start a second node for the same pods. Its own prefix (`startup-taint.cluster-autoscaler.kubernetes.io/`)
  cannot be used: the controller manages `readiness.k8s.io/` keys only (the NodeReadinessRule CRD's CEL rule).

Pure: manifests and chart values as plain data.
"""

from __future__ import annotations

from gpupools.core.pools import GPU_LABEL, PoolPlan, Taint
from gpupools.core.sharing import DEPLOY_OPERANDS_LABEL, HAMI, resolve_installer
from gpupools.stack.config import StackConfig

# The startup taint every gated GPU node carries until its GPU stack is validated.
READINESS_TAINT = Taint("readiness.k8s.io/gpupools-gpu-ready", "pending", "NoSchedule")
CONDITION = "gpupools.io/GPUStackReady"
RULE_NAME = "gpupools-gpu-ready"

# kubernetes-sigs/node-readiness-controller v0.5.0: the chart is published as an OCI artifact on registry.k8s.io
# (docs/book/src/releases.md, "v0.5.0 / Helm Chart"); images carry the same tag.
CHART_NAME = "node-readiness-controller"
CHART_REF = "oci://registry.k8s.io/node-readiness-controller/charts/node-readiness-controller"
CHART_VERSION = "0.5.0"
NAMESPACE = "node-readiness"
REPORTER_IMAGE = "registry.k8s.io/node-readiness-controller/node-readiness-reporter:v0.5.0"
# Serves the validator's status directory read-only on the pod's loopback; a missing file answers 404, which the
# reporter (cmd/readiness-condition-reporter/main.go: 2xx is healthy) records as False. Pinned to the multi-platform
# index of busybox:1.37.0 that docker-library/repo-info records (repos/busybox/remote/1.37.0.md).
FILE_SERVER_IMAGE = "docker.io/library/busybox:1.37.0@sha256:9db7b59979c38555a39def84a31fb98b5296952f9e3afd4f6f11f05b07adfab0"
FILE_SERVER_PORT = 8089
VALIDATIONS_DIR = "/run/nvidia/validations"
STATUS_FILE = "plugin-ready"
# Where the GPU Operator runs no device plugin (every pool it serves takes its GPUs from the DRA driver, a preview) it
# drops the validator's plugin check (NVIDIA/gpu-operator v26.7.0 controllers/object_controls.go, TransformValidator), so
# no plugin-ready is written; the last file the validator then writes is cuda-ready (cmd/nvidia-validator/main.go,
# cudaStatusFile), after driver and toolkit.
NO_PLUGIN_STATUS_FILE = "cuda-ready"
REPORTER = "gpupools-gpu-ready-reporter"
CHECK_INTERVAL = "15s"
# Where a pod finds its API credentials (Kubernetes "Projected volumes", serviceAccountToken); only the reporter,
# which patches its node's status, gets them.
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"

# Checks of an independent scanner (checkov's Kubernetes checks, tests/health/test_manifest_scan.py) the DaemonSet
# does not meet, each with why, as checkov reads them from the object's annotations.
SCANNER_EXCEPTIONS = {
    "CKV_K8S_8": "no liveness probe: the reporter image (distroless, no shell) serves no health endpoint "
                 "(node-readiness-controller v0.5.0 cmd/readiness-condition-reporter/main.go) and exits on failure, which restarts it; "
                 "the file server answers 404 until the validator writes its file, by design",
    "CKV_K8S_9": "no readiness probe: no Service sends traffic to this pod; what it reports is the node condition itself",
    "CKV_K8S_15": "imagePullPolicy IfNotPresent: the file server is pinned by digest, and Always would make every restart on a "
                  "tainted GPU node wait for the registry",
    "CKV_K8S_43": "the reporter is referenced by the release tag the controller chart pins (v0.5.0); registry.k8s.io lists its promoted "
                  "digest in kubernetes/k8s.io registry.k8s.io/images/k8s-staging-node-readiness-controller/images.yaml for mirrors to pin",
}

# Nodes the gate covers: gpupools GPU pools whose operands the GPU Operator has not been told to leave alone.
NODE_SELECTOR = {"matchExpressions": [
    {"key": GPU_LABEL, "operator": "Exists"},
    {"key": DEPLOY_OPERANDS_LABEL, "operator": "NotIn", "values": ["false"]},
]}


def operator_validates(stack: StackConfig, plan: PoolPlan) -> bool:
    """The GPU Operator's validator runs on the pool's nodes: the operator serves the pool, or HAMi does where the
    operator brings driver, toolkit and validator. Bottlerocket pools (`nvidia.com/gpu.deploy.operands=false`), GKE's
    own installer and the standalone device plugin have no validator."""
    if resolve_installer(stack.target, stack.gpu_software.installer) != "gpu-operator":
        return False
    return plan.mechanism.installer in ("gpu-operator", HAMI)


def gate_enabled(stack: StackConfig) -> bool:
    return stack.health.readiness_gate


def gated(stack: StackConfig, plan: PoolPlan) -> bool:
    """Gated: the gate is on, the operator validates the pool's nodes, and the cloud's nodes can start tainted with
    autoscalers that know the taint (EKS; see each cloud module's STARTUP_TAINTS)."""
    return gate_enabled(stack) and stack.target.STARTUP_TAINTS and operator_validates(stack, plan)


def startup_taints(stack: StackConfig, plan: PoolPlan) -> tuple[Taint, ...]:
    """The taints a new node of the pool registers with, besides the pool's own."""
    return (READINESS_TAINT,) if gated(stack, plan) else ()


def tolerations() -> list[dict]:
    """What the GPU software that makes a node ready must tolerate (operator operands, NFD, HAMi, the reporter)."""
    return [{"key": READINESS_TAINT.key, "operator": "Exists", "effect": READINESS_TAINT.effect}]


def readiness_rule() -> dict:
    """The NodeReadinessRule, as the chart's `nodeReadinessRules[]` takes it (name plus spec)."""
    return {
        "name": RULE_NAME,
        "conditions": [{"type": CONDITION, "requiredStatus": "True"}],
        "taint": {"key": READINESS_TAINT.key, "value": READINESS_TAINT.value, "effect": READINESS_TAINT.effect},
        "enforcementMode": "bootstrap-only",
        "nodeSelector": NODE_SELECTOR,
    }


def controller_values(on_system_pool: bool) -> dict:
    """Chart values: the rule, and the controller on the system nodes where gpupools made them."""
    values: dict = {"nodeReadinessRules": [readiness_rule()]}
    if on_system_pool:
        values["nodeSelector"] = {"gpupools.io/pool": "system"}
    return values


def reporter_objects(extra_tolerations: list[dict], status_file: str = STATUS_FILE) -> list[dict]:
    """The reporter's ServiceAccount, its right to patch node status (the upstream examples' ClusterRole), and the
    DaemonSet on gated GPU nodes: the reporter beside a file server over the validator's status directory."""
    labels = {"app.kubernetes.io/name": REPORTER, "app.kubernetes.io/managed-by": "gpupools"}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [dict(e) for e in NODE_SELECTOR["matchExpressions"]]}]}}}
    node_tolerations = tolerations() + [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}] + list(extra_tolerations)
    # A token only for the reporter, through a projected volume (automountServiceAccountToken off for the pod): the file
    # server, which reads a host directory, gets no API credentials.
    token = {"name": "api-token", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}}
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": REPORTER, "namespace": NAMESPACE, "labels": labels,
                     "annotations": {f"checkov.io/skip{i}": f"{check}={why}" for i, (check, why) in enumerate(SCANNER_EXCEPTIONS.items(), 1)}},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": REPORTER}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": REPORTER,
                    "automountServiceAccountToken": False,
                    "priorityClassName": "system-node-critical",
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "affinity": affinity,
                    "tolerations": node_tolerations,
                    "containers": [
                        {"name": "reporter", "image": REPORTER_IMAGE, "imagePullPolicy": "IfNotPresent",
                         "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                                 {"name": "CHECK_ENDPOINT", "value": f"http://127.0.0.1:{FILE_SERVER_PORT}/{status_file}"},
                                 {"name": "CONDITION_TYPE", "value": CONDITION},
                                 {"name": "CHECK_INTERVAL", "value": CHECK_INTERVAL}],
                         "volumeMounts": [{"name": "api-token", "mountPath": TOKEN_PATH, "readOnly": True}],
                         "resources": {"requests": {"cpu": "5m", "memory": "16Mi"}, "limits": {"cpu": "50m", "memory": "64Mi"}},
                         "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                                             "runAsUser": 65532, "capabilities": {"drop": ["ALL"]}}},
                        {"name": "validations", "image": FILE_SERVER_IMAGE, "imagePullPolicy": "IfNotPresent",
                         "command": ["httpd", "-f", "-p", f"127.0.0.1:{FILE_SERVER_PORT}", "-h", "/validations"],
                         "volumeMounts": [{"name": "validations", "mountPath": "/validations", "readOnly": True}],
                         "resources": {"requests": {"cpu": "5m", "memory": "8Mi"}, "limits": {"cpu": "50m", "memory": "32Mi"}},
                         "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                                             "runAsUser": 65534, "capabilities": {"drop": ["ALL"]}}},
                    ],
                    "volumes": [{"name": "validations", "hostPath": {"path": VALIDATIONS_DIR, "type": "DirectoryOrCreate"}}, token],
                },
            },
        },
    }
    # Nothing connects to the pod: the file server listens on the pod's loopback, the reporter only calls out.
    no_ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                  "metadata": {"name": REPORTER, "namespace": NAMESPACE, "labels": labels},
                  "spec": {"podSelector": {"matchLabels": {"app.kubernetes.io/name": REPORTER}}, "policyTypes": ["Ingress"]}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": REPORTER, "labels": labels},
            "rules": [{"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
                      {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": REPORTER, "labels": labels},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": REPORTER},
               "subjects": [{"kind": "ServiceAccount", "name": REPORTER, "namespace": NAMESPACE}]}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": REPORTER, "namespace": NAMESPACE, "labels": labels}}
    return [account, role, binding, daemonset, no_ingress]



def readiness_summary(stack: StackConfig, plan: PoolPlan, autoscaler: str) -> str:
    """What keeps work off a new node of the pool until its GPUs are usable (`autoscaler` as resolved by autoscaling)."""
    module = stack.target
    if gated(stack, plan):
        how = {"karpenter": "Karpenter lists it in startupTaints and initializes the NodeClaim only once it is gone",
               "cluster-autoscaler": "cluster-autoscaler gets --startup-taint for it and counts the node as starting meanwhile (at most 15m)",
               }.get(autoscaler, "the autoscaler you run must treat it as a startup taint (cluster-autoscaler: --startup-taint)")
        return (f"starts with taint {READINESS_TAINT.key}={READINESS_TAINT.value}:{READINESS_TAINT.effect}, removed by the Node Readiness "
                f"Controller once the GPU Operator has validated driver, toolkit, "
                + ("and CUDA (no device plugin: the DRA driver serves the GPUs)" if plan.mechanism.mode == "dra" else "CUDA and device plugin")
                + f" ({CONDITION}=True); {how}")
    if not module.STARTUP_TAINTS:
        return module.READINESS_NOTE
    if not gate_enabled(stack):
        return "no readiness taint (health.readinessGate: false): pods that need no GPU may land before the GPU stack is up"
    if not operator_validates(stack, plan):
        return ("no readiness taint (no GPU Operator validator on these nodes): GPU pods wait for the device plugin's resource, and the "
                "autoscaler counts the node as starting until it is allocatable")
    return "no readiness taint"

