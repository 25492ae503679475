"""The names of the objects `gpupools workload` prints, and the limits Kubernetes and JobSet hold them to.

A name is rarely used alone: Kubernetes and the JobSet controller build labels, hostnames and further names from it, and
each of those has its own limit. Every limit below is the upstream one, cited:

- a label value has at most 63 characters (k8s.io/apimachinery pkg/util/validation/validation.go, IsValidLabelValue,
  LabelValueMaxLength); the API server labels a Job's pod template `batch.kubernetes.io/job-name` and `job-name` with
  the Job's name and validates the template with it (kubernetes/kubernetes pkg/registry/batch/job/strategy.go,
  generateSelector, then ValidateJob), so a Job's name is a label value;
- the Job controller gives pod i of an Indexed Job the hostname `<job>-<i>` (pkg/controller/job/job_controller.go,
  manageJob), and a pod's hostname and subdomain are DNS-1123 labels of at most 63 (pkg/apis/core/validation,
  ValidatePodSpec); a Service's name is a DNS-1035 label of at most 63 (ValidateServiceName);
- JobSet v0.12.0's create webhook (kubernetes-sigs/jobset pkg/webhooks/jobset_webhook.go, ValidateCreate) refuses a
  JobSet whose Service name (spec.network.subdomain, else the JobSet's name) is no DNS-1035 label, whose last Job name
  `<jobset>-<replicatedJob>-<replicas-1>` is over 63, whose last pod name `<jobset>-<replicatedJob>-<job>-<pod>` plus the
  5 random characters Kubernetes appends (with its dash) is over 63, and whose coordinator label
  `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>` is no label value (validateCoordinatorLabelValue,
  controllers.CoordinatorEndpoint): the tightest, as it holds the JobSet's name twice.

`fit` shortens a name deterministically (kept whole while it fits, else cut and given a short hash of the whole name, so
two long names that share a start stay apart) until every name built from it fits.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Callable

MAX_LABEL_VALUE = 63
MAX_DNS_LABEL = 63
MAX_DNS_SUBDOMAIN = 253
# JobSet's webhook checks a pod name with "-abcde" appended: the dash and the 5 random characters of generateName.
GENERATED_SUFFIX = "-abcde"
HASH_CHARS = 6

DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Name:
    """One name Kubernetes or a controller makes or checks, what it is, its form and its limit."""

    what: str
    value: str
    limit: int
    form: re.Pattern
    form_words: str

    def problem(self) -> str | None:
        if len(self.value) > self.limit:
            return f"{self.what} {self.value!r} has {len(self.value)} characters, over the limit of {self.limit}"
        if not self.form.match(self.value):
            return f"{self.what} {self.value!r} is not {self.form_words}"
        return None


def label_value(what: str, value: str) -> Name:
    return Name(what, value, MAX_LABEL_VALUE, LABEL_VALUE, "a label value")


def dns_label(what: str, value: str, rfc1035: bool = False) -> Name:
    return Name(what, value, MAX_DNS_LABEL, DNS_1035_LABEL if rfc1035 else DNS_1123_LABEL,
                "a DNS-1035 label" if rfc1035 else "a DNS-1123 label")


def object_name(what: str, value: str) -> Name:
    return Name(what, value, MAX_DNS_SUBDOMAIN, DNS_1123_SUBDOMAIN, "a DNS-1123 subdomain")


# --------------------------------------------------------------------------------------------------------------------
# The names built from each kind's name


def job_names(name: str, indexed_pods: int | None = None, subdomain: str | None = None) -> list[Name]:
    """A Job's name (a label value on its pods), its last pod's hostname when Indexed, and the Service its subdomain names."""
    out = [object_name("Job name", name), label_value("Job name, as its pods' label batch.kubernetes.io/job-name", name)]
    if indexed_pods:
        out.append(dns_label("hostname of the Indexed Job's last pod", f"{name}-{indexed_pods - 1}"))
    if subdomain is not None:
        out.append(dns_label("pod subdomain (the headless Service's name)", subdomain, rfc1035=True))
    return out


def jobset_names(name: str, replicated: list[tuple[str, int, int | None]], coordinator: tuple[str, int, int] | None = None,
                 subdomain: str | None = None) -> list[Name]:
    """A JobSet's names as JobSet v0.12.0's create webhook checks them. `replicated`: (name, replicas, completions of an
    Indexed Job or None) per replicated job; `coordinator`: (replicated job, job index, pod index)."""
    service = subdomain or name
    out = [object_name("JobSet name", name), label_value("JobSet name, as its pods' label jobset.sigs.k8s.io/jobset-name", name),
           dns_label("JobSet Service name (spec.network.subdomain, else the JobSet's name)", service, rfc1035=True)]
    for rjob, replicas, completions in replicated:
        job = f"{name}-{rjob}-{replicas - 1}"
        out.append(dns_label(f"name of replicated job {rjob}'s last Job", job, rfc1035=True))
        if completions:
            out.append(dns_label(f"name of replicated job {rjob}'s last pod (with Kubernetes' 5 random characters)",
                                 f"{job}-{completions - 1}{GENERATED_SUFFIX}", rfc1035=True))
    if coordinator is not None:
        rjob, job_index, pod_index = coordinator
        out.append(label_value("coordinator label jobset.sigs.k8s.io/coordinator", f"{name}-{rjob}-{job_index}-{pod_index}.{service}"))
    return out


def doc_names(doc: dict) -> list[Name]:
    """Every name of one printed object that Kubernetes or a controller holds to a limit."""
    kind = doc.get("kind")
    metadata = doc.get("metadata") or {}
    name = metadata.get("name", "")
    labels = dict(metadata.get("labels") or {})
    out: list[Name] = []
    if kind == "Job":
        spec = doc.get("spec") or {}
        indexed = spec.get("completionMode") == "Indexed"
        pod = (spec.get("template") or {}).get("spec") or {}
        out += job_names(name, int(spec.get("completions") or 1) if indexed else None, pod.get("subdomain"))
        labels.update(((spec.get("template") or {}).get("metadata") or {}).get("labels") or {})
    elif kind == "JobSet":
        spec = doc.get("spec") or {}
        replicated = []
        for rjob in spec.get("replicatedJobs") or []:
            job_spec = (rjob.get("template") or {}).get("spec") or {}
            indexed = job_spec.get("completionMode") == "Indexed"
            replicated.append((rjob["name"], int(rjob.get("replicas", 1)), int(job_spec.get("completions") or 1) if indexed else None))
            labels.update(((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {})
        coordinator = spec.get("coordinator")
        out += jobset_names(name, replicated,
                            (coordinator["replicatedJob"], int(coordinator.get("jobIndex", 0)), int(coordinator.get("podIndex", 0)))
                            if coordinator else None, (spec.get("network") or {}).get("subdomain"))
    elif kind == "Service":
        out.append(dns_label("Service name", name, rfc1035=True))
        out += [label_value(f"Service selector {k}", str(v)) for k, v in ((doc.get("spec") or {}).get("selector") or {}).items()]
    elif kind == "PodDisruptionBudget":
        out.append(object_name("PodDisruptionBudget name", name))
        selector = ((doc.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        out += [label_value(f"PodDisruptionBudget selector {k}", str(v)) for k, v in selector.items()]
    elif name:
        out.append(object_name(f"{kind} name", name))
    if metadata.get("namespace"):
        out.append(dns_label("namespace", metadata["namespace"]))
    out += [label_value(f"label {k}", str(v)) for k, v in labels.items()]
    return out


def name_problems(doc: dict) -> list[str]:
    """Why Kubernetes or a controller's webhook would refuse one of the object's names, or the names built from them."""
    return [p for p in (n.problem() for n in doc_names(doc)) if p]


# --------------------------------------------------------------------------------------------------------------------
# Fitting a name


def shorten(name: str, length: int) -> str:
    """`name` itself when it has at most `length` characters; else its start and a dash and 6 hex characters of its hash,
    `length` long at most. The start keeps the name's first character, so a DNS-1035 name stays one."""
    if len(name) <= length:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:HASH_CHARS]
    return name[: max(1, length - HASH_CHARS - 1)].rstrip("-") + "-" + digest


def fit(name: str, names: Callable[[str], list[Name]]) -> str:
    """The longest `shorten(name, n)` whose names (`names` builds them from it) all fit their limits."""
    for length in range(len(name), HASH_CHARS + 1, -1):
        candidate = shorten(name, length)
        if not any(n.problem() for n in names(candidate)):
            return candidate
    raise ValueError(f"no name built from {name!r} fits")


def fit_job(name: str, indexed_pods: int | None = None) -> str:
    """A Job's name (and its headless Service's, which an Indexed Job's pods name as their subdomain)."""
    return fit(name, lambda n: job_names(n, indexed_pods, n if indexed_pods else None))


def fit_jobset(name: str, replicated_job: str, pods: int, replicas: int = 1) -> str:
    """A JobSet of one replicated job of `replicas` Indexed Jobs of `pods` pods, with the coordinator on pod 0 of Job 0."""
    return fit(name, lambda n: jobset_names(n, [(replicated_job, replicas, pods)], (replicated_job, 0, 0)))
