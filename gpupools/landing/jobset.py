"""The multi-node job as a JobSet (kubernetes-sigs/jobset, API jobset.x-k8s.io/v1alpha2), and the PodSets Kueue sees in one.

The JobSet holds one replicated job, `workers`, of one replica: the very Indexed Job `multinode_job` prints (N pods, one
per node, the same container), minus what the JobSet controller does itself:

- the headless Service and each pod's DNS name: with `network.enableDNSHostnames` the controller creates a Service named
  after the JobSet and gives pod i of job j of replicated job r the hostname `<jobset>-<r>-<j>-<i>` under it
  (kubernetes-sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go, constructJob / GetSubdomain; the Service keeps
  not-ready addresses, `publishNotReadyAddresses` defaulting to true);
- the rendezvous address: with `spec.coordinator` the controller labels and annotates every Job and pod with
  `jobset.sigs.k8s.io/coordinator: <jobset>-<r>-<j>-<i>.<subdomain>` (CoordinatorEndpoint), which the container reads
  through the downward API instead of spelling the name itself (site/static/examples/simple/coordinator.yaml);
- `ttlSecondsAfterFinished` and `suspend` on the JobSet, not its Jobs: the controller sets each Job's `suspend` from the
  JobSet's (constructJob), and a Job removed by its own TTL would be recreated.

For a team on Kueue the JobSet carries the queue and priority labels (Kueue reads them from the JobSet's metadata:
kueue v0.19.2 site/content/en/docs/tasks/run/jobsets.md) and the pod template the topology annotation `podset_topology`
decides, as on the Job. Kueue makes one PodSet per replicated job, of replicas x parallelism pods
(pkg/controller/jobs/jobset/jobset_controller.go, PodSets).

For a team on KAI Scheduler the JobSet carries the queue label (KAI's pod grouper reads it from the top owner, the
JobSet), and so does the replicated job's template: the JobSet controller labels each Job it creates with that
template's labels only (jobset v0.12.0 constructJob), and gpupools' admission policy refuses a GPU Job in a KAI team's
namespace without the team's queue label. KAI gangs a JobSet by itself: one PodGroup per JobSet, a SubGroup per replica
whose minMember is the replicated job's parallelism (KAI v0.17.0 pkg/podgrouper/podgrouper/plugins/jobset/
jobset_grouper.go, buildSubGroups); the Job's `kai.scheduler/batch-min-member` moves to the replicated job's template,
where it says the same, since on the JobSet itself it would count replicated jobs, not pods (computePodGroupMinSubGroup).
"""

from __future__ import annotations

import copy

from gpupools.queues import kai

API_VERSION = "jobset.x-k8s.io/v1alpha2"
KIND = "JobSet"
REPLICATED_JOB = "workers"
COORDINATOR_KEY = "jobset.sigs.k8s.io/coordinator"
COORDINATOR_ENV = "COORDINATOR_ADDR"
# Pod template fields the JobSet controller owns on the Jobs it creates.
JOB_FIELDS_OWNED_BY_JOBSET = ("suspend", "ttlSecondsAfterFinished")


def hostname(jobset: str, index: int, replicated_job: str = REPLICATED_JOB, job_index: int = 0) -> str:
    """Pod `index` of job `job_index` of the replicated job, under the JobSet's headless Service."""
    return f"{jobset}-{replicated_job}-{job_index}-{index}.{jobset}"


def as_jobset(docs: list[dict]) -> dict:
    """The JobSet form of `multinode_job`'s [Service, Job]: the Job becomes the replicated job `workers`, its rank 0 address
    comes from the coordinator annotation."""
    service, job = docs
    job = copy.deepcopy(job)
    name = job["metadata"]["name"]
    old_address = f"{name}-0.{service['metadata']['name']}"
    job_spec = job["spec"]
    owned = {k: job_spec.pop(k) for k in JOB_FIELDS_OWNED_BY_JOBSET if k in job_spec}
    pod = job_spec["template"]["spec"]
    pod.pop("subdomain", None)  # the controller sets it to the JobSet's Service
    for container in pod["containers"]:
        if any(old_address in part for part in container.get("command") or []):
            container["command"] = [part.replace(old_address, f"$({COORDINATOR_ENV})") for part in container["command"]]
            container.setdefault("env", []).append(
                {"name": COORDINATOR_ENV, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COORDINATOR_KEY}']"}}})
    metadata = {k: v for k, v in job["metadata"].items()}
    template: dict = {"spec": job_spec}
    annotations = dict(metadata.pop("annotations", None) or {})
    if kai.MIN_MEMBER_ANNOTATION in annotations:
        template["metadata"] = {"annotations": {kai.MIN_MEMBER_ANNOTATION: annotations.pop(kai.MIN_MEMBER_ANNOTATION)}}
    if annotations:
        metadata["annotations"] = annotations
    if kai.QUEUE_LABEL in (metadata.get("labels") or {}):
        template.setdefault("metadata", {})["labels"] = {kai.QUEUE_LABEL: metadata["labels"][kai.QUEUE_LABEL]}
    spec: dict = {}
    if owned.get("suspend"):
        spec["suspend"] = True
    spec.update({
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "coordinator": {"replicatedJob": REPLICATED_JOB, "jobIndex": 0, "podIndex": 0},
        # Any pod failing fails the JobSet at once: a collective cannot go on without one of its ranks (the JobSet
        # default is the same, maxRestarts 0; written out so the plan and the manifest agree).
        "failurePolicy": {"maxRestarts": 0},
        "replicatedJobs": [{"name": REPLICATED_JOB, "replicas": 1, "template": template}],
    })
    if "ttlSecondsAfterFinished" in owned:
        spec["ttlSecondsAfterFinished"] = owned["ttlSecondsAfterFinished"]
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def podsets(workload: dict) -> list[tuple[str, dict]]:
    """(name, Job-shaped view) per PodSet Kueue makes of the workload: one for a Job, one per replicated job of a JobSet, its
    pod count replicas x parallelism. The views carry the workload's metadata (queue and priority labels, namespace) and
    the gang KAI makes of the PodSet, as a Job's kai.scheduler/batch-min-member."""
    if workload.get("kind") != KIND:
        return [("main", workload)]
    out = []
    for replicated in workload["spec"]["replicatedJobs"]:
        job_spec = replicated["template"]["spec"]
        replicas, parallelism = int(replicated.get("replicas", 1)), int(job_spec.get("parallelism", 1))
        pods = replicas * parallelism
        # What KAI gangs of it, as a Job's batch-min-member says it: every replica's SubGroup needs its minMember pods
        # (the template's annotation, else the parallelism) and the replicated job needs all its replicas.
        template_annotations = (replicated["template"].get("metadata") or {}).get("annotations") or {}
        gang = replicas * int(template_annotations.get(kai.MIN_MEMBER_ANNOTATION, parallelism))
        annotations = {k: v for k, v in (workload["metadata"].get("annotations") or {}).items() if k != kai.MIN_MEMBER_ANNOTATION}
        metadata = {**workload["metadata"], "annotations": {**annotations, kai.MIN_MEMBER_ANNOTATION: str(gang)}}
        view = {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
                "spec": {**job_spec, "parallelism": pods, "completions": pods}}
        out.append((replicated["name"], view))
    return out
