"""What a worker stack mints so the fleet's manager can reach its Kueue: a service account, the ClusterRole Kueue
documents for MultiKueue workers, a token Secret, and a kubeconfig with that token, exported as a secret output.

Kueue refuses the kubeconfig gpupools exports for people (`kubeconfig`): every cloud's logs in through an exec plugin
(aws eks get-token, gke-gcloud-auth-plugin, kubelogin), and MultiKueue's kubeconfig validation rejects exec plugins,
auth providers, token files, basic auth, skipped TLS verification and CA file paths; a bearer token with
certificate-authority-data is allowed "due to service account tokens usage" (kubernetes-sigs/kueue v0.19.2
pkg/controller/admissionchecks/multikueue/multikueuecluster.go, validateKubeconfig and validateRestConfig). The
recipe is Kueue's own (site/static/examples/multikueue/create-multikueue-kubeconfig.sh at v0.19.2): service account
`multikueue-sa` in `kueue-system`, ClusterRole `multikueue-sa-role` bound cluster-wide (the manager watches jobs and
workloads in every namespace), and a `kubernetes.io/service-account-token` Secret whose token does not expire.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import yaml

from gpupools.queues.kueue import CHART, INTEGRATIONS
from gpupools.queues.teams import MANAGED

SERVICE_ACCOUNT = "multikueue-sa"
NAMESPACE = CHART.namespace
CLUSTER_ROLE = f"{SERVICE_ACCOUNT}-role"
BINDING = f"{SERVICE_ACCOUNT}-crb"
TOKEN_SECRET = SERVICE_ACCOUNT
# The worker stack's output the manager's StackReference reads.
OUTPUT = "multikueueKubeconfig"

_JOB_VERBS = ["create", "delete", "get", "list", "watch"]
# Per Kueue integration gpupools enables (queues.kueue.INTEGRATIONS), the rules create-multikueue-kubeconfig.sh gives
# it (lines 27-299): the object itself and its status. Deployments are dispatched through their pods.
FRAMEWORK_RULES: dict[str, list[dict]] = {
    "batch/job": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _JOB_VERBS},
                  {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]}],
    "pod": [{"apiGroups": [""], "resources": ["pods"], "verbs": _JOB_VERBS}],
    "deployment": [],
    "statefulset": [{"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": _JOB_VERBS},
                    {"apiGroups": ["apps"], "resources": ["statefulsets/status"], "verbs": ["get"]}],
    "jobset.x-k8s.io/jobset": [{"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": _JOB_VERBS},
                               {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]}],
}
# Kueue's own objects on the worker: the manager creates and follows the remote Workload and reads the queues.
KUEUE_RULES = [
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": [*_JOB_VERBS, "update", "patch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
]


def worker_rules(frameworks: list[str] | None = None) -> list[dict]:
    """The least the manager needs on a worker for the frameworks it dispatches (default: gpupools' integrations)."""
    rules = [r for f in (frameworks or INTEGRATIONS) for r in FRAMEWORK_RULES[f]]
    return [{k: list(v) for k, v in r.items()} for r in rules + KUEUE_RULES]


def worker_access_objects() -> list[dict]:
    """ServiceAccount, ClusterRole, ClusterRoleBinding and the token Secret, in the order they can be applied."""
    meta = {"namespace": NAMESPACE, "labels": dict(MANAGED)}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT, **meta}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": CLUSTER_ROLE, "labels": dict(MANAGED)},
         "rules": worker_rules()},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": BINDING, "labels": dict(MANAGED)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]},
        # A Secret made by hand for the account gets a token that does not expire, which the token controller fills in.
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
         "metadata": {"name": TOKEN_SECRET, **meta, "annotations": {"kubernetes.io/service-account.name": SERVICE_ACCOUNT}}},
    ]


class KubeconfigError(ValueError):
    """A kubeconfig gpupools cannot use; the message never quotes the kubeconfig."""


def _current_cluster(doc: dict) -> dict:
    clusters = {c.get("name"): c.get("cluster") or {} for c in doc.get("clusters") or [] if isinstance(c, dict)}
    contexts = {c.get("name"): c.get("context") or {} for c in doc.get("contexts") or [] if isinstance(c, dict)}
    context = contexts.get(doc.get("current-context")) or (next(iter(contexts.values())) if contexts else {})
    cluster = clusters.get(context.get("cluster")) if context else None
    if cluster is None:
        cluster = next(iter(clusters.values()), None)
    if not isinstance(cluster, dict):
        raise KubeconfigError("the cluster's kubeconfig names no cluster")
    return cluster


def token_kubeconfig(cluster_kubeconfig: str, token: str, name: str) -> str:
    """A kubeconfig for the manager: the cluster's API server and CA from the stack's own kubeconfig, the service
    account's token as the only credential (Kueue's recipe writes the same three fields)."""
    try:
        doc = yaml.safe_load(cluster_kubeconfig)
    except yaml.YAMLError:
        raise KubeconfigError("the cluster's kubeconfig is not YAML") from None
    if not isinstance(doc, dict):
        raise KubeconfigError("the cluster's kubeconfig is not a mapping")
    cluster = _current_cluster(doc)
    server, ca = cluster.get("server"), cluster.get("certificate-authority-data")
    if not server or not ca:
        raise KubeconfigError("the cluster's kubeconfig lacks server or certificate-authority-data")
    user = f"{name}-{SERVICE_ACCOUNT}"
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": ca}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name,
        "users": [{"name": user, "user": {"token": token}}],
    }, sort_keys=False)


_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _host_ok(server: str) -> bool:
    """Kueue's isValidHostname: the server URL's host (without port), lower-cased, is an IP or a DNS-1123 subdomain."""
    match = re.match(r"^[a-z]+://(\[[^\]]+\]|[^/:]+)(:[0-9]+)?(/.*)?$", server.lower())
    if not match:
        return False
    host = match.group(1).strip("[]")
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return len(host) <= 253 and bool(_DNS1123_SUBDOMAIN.match(host))


def kubeconfig_problems(text: Any) -> list[str]:
    """Why MultiKueue would refuse this kubeconfig (Kueue's validateKubeconfig and validateRestConfig, in their
    order), in words that quote nothing of it; [] when Kueue accepts it."""
    try:
        doc = yaml.safe_load(text) if isinstance(text, str) else None
    except yaml.YAMLError:
        doc = None
    if not isinstance(doc, dict):
        return ["not a kubeconfig (Kueue fails to parse it: BadKubeConfig)"]
    problems = []
    users = [u.get("user") or {} for u in doc.get("users") or [] if isinstance(u, dict)]
    if any(u.get("tokenFile") for u in users):
        problems.append("tokenFile is not allowed")
    for entry in doc.get("clusters") or []:
        cluster = (entry or {}).get("cluster") or {}
        if cluster.get("insecure-skip-tls-verify"):
            problems.append("insecure TLS verification is not allowed")
        if cluster.get("certificate-authority"):
            problems.append("certificate-authority file paths are not allowed, use certificate-authority-data")
        if not cluster.get("server"):
            problems.append("server URL is required")
        elif not _host_ok(str(cluster["server"])):
            problems.append("untrusted server endpoint")
    if any(u.get("username") or u.get("password") for u in users):
        problems.append("basic auth is not allowed")
    if any(u.get("exec") for u in users):
        problems.append("exec plugins are not allowed")
    if any(u.get("auth-provider") for u in users):
        problems.append("auth providers are not allowed")
    return problems
