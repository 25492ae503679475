"""A Kubernetes Job that lands on one pool, or queues for a team's GPU quota.

Without a team the Job carries what the pool demands itself: the GPU request, the pool's tolerations and node
selector (and HAMi's scheduler on vgpu pools). For a team on Kueue it names the team's LocalQueue and priority
and starts suspended, as Kueue expects; Kueue picks the pool (ResourceFlavor) the quota comes from and adds its
node selector and tolerations on admission, unless the Job names a pool itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpupools.autoscaling.choice import resolve_autoscaler
from gpupools.autoscaling.templates import eviction_guard
from gpupools.core.pools import POOL_LABEL, PoolPlan
from gpupools.core.sharing import gpu_memory_problem, units_per_pod
from gpupools.fabric.computedomain import CD_LABEL, channel_claim_template, clique_labelled, compute_domain, rack_scale, with_channel
from gpupools.landing.jobset import REPLICATED_JOB, as_jobset
from gpupools.landing.names import fit_job, fit_jobset
from gpupools.pools.pods import gpu_limits, pod_spec, pod_tolerations
from gpupools.queues.kueue import PRIORITY_LABEL, QUEUE_LABEL, allowed_priorities
from gpupools.queues.teams import TeamPlan, plan_teams
from gpupools.stack.config import GPU_MEMORY, StackConfig, Team
from gpupools.stack.errors import ConfigError, Problem
from gpupools.upgrades.policy import pool_upgrade


def workload_problems(plan: PoolPlan, units: int, gpu_memory: str | None, gpu_cores: int | None) -> list[Problem]:
    """What one pod of the pool cannot ask for. A vGPU request of N means N different physical GPUs (HAMi never
    gives one container two slices of the same GPU), so it is bounded by the node's GPUs, not its vGPUs."""
    problems = []
    vgpu = plan.mechanism.mode == "vgpu"
    limit, what = ((plan.hardware.gpus_per_node, f"{plan.hardware.gpus_per_node} physical GPUs, and each vGPU of a pod is on a different one")
                   if vgpu else (plan.units_per_node, f"{plan.units_per_node} x {plan.mechanism.resource}"))
    if units > limit:
        problems.append(Problem("--units", f"{units} exceeds what one node of pool {plan.name!r} offers ({what})"))
    elif (cap := units_per_pod(plan.mechanism, plan.hardware.gpus_per_node)) is not None and units > cap.units:
        problems.append(Problem("--units", f"{units}: a pod on pool {plan.name!r} gets at most {cap.units} x {plan.mechanism.resource}: {cap.why}"))
    for option, value in (("--gpu-memory", gpu_memory), ("--gpu-cores", gpu_cores)):
        if value is not None and not vgpu:
            problems.append(Problem(option, f"applies to vgpu pools only; pool {plan.name!r} shares its GPUs by {plan.mechanism.mode!r}"))
    if vgpu and gpu_memory is not None:
        problem = (gpu_memory_problem(gpu_memory, plan.hardware, plan.sharing.memory_scaling) if re.match(GPU_MEMORY, gpu_memory)
                   else f"{gpu_memory!r} is not a GPU memory share such as 25% or an amount such as 8Gi or 3000Mi")
        if problem:
            problems.append(Problem("--gpu-memory", problem))
    if vgpu and gpu_cores is not None and not 1 <= gpu_cores <= 100:
        problems.append(Problem("--gpu-cores", f"{gpu_cores} is not a compute share; use 1 to 100 (percent of one GPU)"))
    return problems


def job_manifest(stack: StackConfig, plan: PoolPlan, image: str, units: int = 1, gpu_memory: str | None = None,
                 gpu_cores: int | None = None) -> dict:
    """Requests are whole units of the pool's resource (a time-slice, an MPS share, a MIG slice, a vGPU or a GPU).

    The pod asks the pool's autoscaler not to take its node away while it runs (Karpenter's do-not-disrupt,
    cluster-autoscaler's safe-to-evict "false"; see autoscaling.templates.eviction_guard). On
    vgpu pools the pod names HAMi's scheduler itself, so it is placed by GPU memory and compute even where HAMi's
    admission webhook did not see it.
    """
    return _job(stack, fit_job(f"gpu-smoke-{plan.name}"), gpu_limits(plan, units, gpu_memory, gpu_cores), image, plan)


def _job(stack: StackConfig, name: str, limits: dict[str, int], image: str, plan: PoolPlan | None, team: Team | None = None) -> dict:
    labels = {POOL_LABEL: plan.name} if plan is not None else {}
    spec = pod_spec(stack, plan, limits, image, team)
    pod_metadata: dict = {"labels": dict(labels)} if labels else {}
    guard = eviction_guard(resolve_autoscaler(stack.target, stack.cluster.create, stack.autoscaler))
    if guard:
        pod_metadata["annotations"] = guard
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 3600, "template": {"metadata": pod_metadata, "spec": spec}},
    }


def team_job(stack: StackConfig, plans: list[PoolPlan], team: str, pool: str | None, priority: str | None,
             image: str, units: int = 1, gpu_memory: str | None = None, gpu_cores: int | None = None,
             team_plans: list[TeamPlan] | None = None, fraction: float | None = None) -> dict:
    """The Job a member of `team` submits; raises ConfigError naming the option that cannot work. `team_plans`: the
    stack's teams when the caller has them already (`plan_teams`); `fraction`: on KAI, part of one GPU instead of units."""
    teams = {t.team.name: t for t in (team_plans if team_plans is not None else plan_teams(stack, plans))}
    if team not in teams:
        raise ConfigError([Problem("--team", f"{team!r} is not a team of this stack; teams: {', '.join(teams) or 'none'}")])
    t = teams[team]
    target = _team_pool(stack, t, pool)
    if target is not None:
        problems = fraction_problems(target, fraction, units) if fraction is not None and stack.quotas == "kai" else []
        problems = problems or workload_problems(target, units, gpu_memory, gpu_cores)
        if problems:
            raise ConfigError(problems)
        limits = gpu_limits(target, units, gpu_memory, gpu_cores)
    else:
        resource = t.resources[0]
        per_node = max(p.units_per_node for p in t.pools if p.mechanism.resource == resource)
        if units > per_node:
            raise ConfigError([Problem("--units", f"{units} exceeds what one node offers ({per_node} x {resource})")])
        # Kueue may admit the Job on any of these pools: one whose device plugin refuses the request would fail its pod.
        for p in t.pools:
            cap = units_per_pod(p.mechanism, p.hardware.gpus_per_node) if p.mechanism.resource == resource else None
            if cap is not None and units > cap.units:
                raise ConfigError([Problem("--units", f"{units}: Kueue may place the pod on pool {p.name!r}, where a pod gets at most "
                                                      f"{cap.units} x {resource} ({cap.why}); name another pool with --pool")])
        for option, value in (("--gpu-memory", gpu_memory), ("--gpu-cores", gpu_cores)):
            if value is not None:
                raise ConfigError([Problem(option, "applies to vgpu pools only; name the pool with --pool")])
        limits = {resource: units}
    name = fit_job(f"gpu-smoke-{team}" + (f"-{target.name}" if target else ""))
    job = _job(stack, name, limits, image, target, t.team)
    job["metadata"] = {"name": name, "namespace": t.team.namespace_name, "labels": job["metadata"]["labels"]}
    if stack.quotas == "kai":
        assert target is not None  # _team_pool asks for --pool on every engine but Kueue
        return kai_job(job, t, target, priority, units, fraction)
    if fraction is not None:
        raise ConfigError([Problem("--fraction", "GPU fractions need gpupools:quotas: kai (KAI Scheduler)")])
    if stack.quotas != "kueue":
        if priority is not None:
            raise ConfigError([Problem("--priority", "priorities need gpupools:quotas: kueue")])
        return job
    queue_for(job, t, priority)
    if target is not None:
        from gpupools.fabric.plan import plan_fabric
        from gpupools.queues.kueue import podset_topology

        annotations = podset_topology(stack, target, plan_fabric(stack, target), gang=False)
        if annotations:
            job["spec"]["template"]["metadata"].setdefault("annotations", {}).update(annotations)
    return job


def fraction_problems(plan: PoolPlan, fraction: float, units: int) -> list[Problem]:
    """What a fractional request on `plan` cannot be: KAI takes 0 < gpu-fraction < 1 (its binder refuses anything else:
    gpu_request_validator.go lines 75-91), on a pool whose sharing allows fractions, for one GPU."""
    from gpupools.queues.kai import fraction_format_problem

    if not 0 < fraction < 1:
        return [Problem("--fraction", f"{fraction:g} is not a fraction KAI takes: above 0 and below 1 (a whole GPU is --units 1)")]
    if (why := fraction_format_problem(fraction)) is not None:
        return [Problem("--fraction", why)]
    if plan.sharing.fraction is None:
        return [Problem("--fraction", f"pool {plan.name!r} does not take fractions (its sharing sets no fraction); "
                                      f"give whole GPUs with --units, or choose a pool with sharing.fraction")]
    if units != 1:
        return [Problem("--units", "a fractional pod takes part of one GPU; drop --units")]
    return []


def kai_job(job: dict, team: TeamPlan, plan: PoolPlan, priority: str | None, units: int, fraction: float | None) -> dict:
    """The Job on KAI Scheduler: its queue label (the pod grouper reads it from the Job), KAI's scheduler name, and a
    fraction of one GPU as KAI's annotation in place of the GPU limit. It is not suspended: KAI holds the pods, not the Job."""
    from gpupools.queues import kai

    if priority is not None:
        raise ConfigError([Problem("--priority", f"on KAI Scheduler a workload's priority is its priority class: label "
                                                 f"{kai.PRIORITY_LABEL} with one of {', '.join(kai.PRIORITY_CLASSES)}")])
    if fraction is not None:
        problems = fraction_problems(plan, fraction, units)
        if problems:
            raise ConfigError(problems)
    labels, annotations, spec = kai.job_metadata(team.team, plan, fraction)
    job["metadata"]["labels"].update(labels)
    template = job["spec"]["template"]
    template["spec"]["schedulerName"] = spec["schedulerName"]
    if annotations:
        template.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
        for container in template["spec"]["containers"]:
            container["resources"]["limits"].pop(plan.mechanism.resource, None)
            if not container["resources"]["limits"]:
                del container["resources"]
    return job


def queue_for(job: dict, team: TeamPlan, priority: str | None) -> None:
    """Queue a Job for the team's quota on Kueue: its LocalQueue and a priority it may use (its own or lower), created
    suspended as Kueue expects; raises ConfigError naming --priority otherwise."""
    allowed = allowed_priorities(team.team.priority)
    chosen = priority or team.team.priority
    if chosen not in allowed:
        raise ConfigError([Problem("--priority", f"team {team.team.name} may use {', '.join(allowed)}; got {chosen!r}")])
    job["metadata"]["labels"].update({QUEUE_LABEL: team.team.name, PRIORITY_LABEL: chosen})
    job["spec"] = {"suspend": True, **job["spec"]}


def _team_pool(stack: StackConfig, team: TeamPlan, pool: str | None) -> PoolPlan | None:
    names = [p.name for p in team.pools]
    if not team.pools:
        raise ConfigError([Problem("--team", f"team {team.team.name} has no GPU pools")])
    if pool is not None:
        if pool not in names:
            raise ConfigError([Problem("--pool", f"{pool!r} is not a pool of team {team.team.name}; its pools: {', '.join(names)}")])
        return next(p for p in team.pools if p.name == pool)
    if stack.quotas != "kueue":
        raise ConfigError([Problem("--pool", f"required with gpupools:quotas: {stack.quotas}: a ResourceQuota does not choose a pool; "
                                             f"team {team.team.name}'s pools: {', '.join(names)}")])
    if len(team.resources) > 1:
        offers = ", ".join(f"{p.name} ({p.mechanism.resource})" for p in team.pools)
        raise ConfigError([Problem("--pool", f"team {team.team.name}'s pools offer different GPU resources: {offers}; choose one with --pool")])
    vgpu = [p.name for p in team.pools if p.mechanism.mode == "vgpu"]
    if vgpu:
        # Kueue sets the node selector, not the scheduler: a pod bound for a vgpu pool must name HAMi's scheduler itself.
        raise ConfigError([Problem("--pool", f"team {team.team.name}'s pool {vgpu[0]} shares GPUs as vGPUs, whose pods name HAMi's scheduler; "
                                             "choose the pool with --pool")])
    return None


# A PyTorch image with NCCL; on EFA the image must also carry aws-ofi-nccl (AWS Deep Learning Containers do).
MULTI_NODE_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
MASTER_PORT = 29500
# One all-reduce over every GPU of every node: proves the job's pods found each other and NCCL its fabric.
ALL_REDUCE = ("import os, torch, torch.distributed as dist; dist.init_process_group('nccl'); "
              "torch.cuda.set_device(int(os.environ['LOCAL_RANK'])); t = torch.ones(1 << 24, device='cuda'); dist.all_reduce(t); "
              "print(f\"rank {dist.get_rank()} of {dist.get_world_size()}: {t[0].item():.0f}\"); dist.destroy_process_group()")


def registered_hugepages_only(limits: dict, plan: PoolPlan) -> dict:
    """A pod's fabric limits with no more huge pages than a new node of the pool registers (`hugepages_on_node`), and
    none where it registers none: a Karpenter NodeClaim whose pods ask for a resource its node never registers is never
    initialized (kubernetes-sigs/karpenter v1.14.1 pkg/controllers/nodeclaim/lifecycle/initialization.go,
    RequestedResourcesRegistered), and on any autoscaler the pod would never schedule."""
    from gpupools.autoscaling.karpenter import hugepages_on_node

    asked = {k: v for k, v in limits.items() if k.startswith("hugepages-")}
    if not asked:
        return dict(limits)
    out = {k: v for k, v in limits.items() if k not in asked}
    registered = hugepages_on_node(plan)
    if "hugepages-2Mi" in asked and registered is not None:
        out["hugepages-2Mi"] = min(asked["hugepages-2Mi"], registered, key=_mebibytes)
    return out


def _mebibytes(quantity: str) -> int:
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()
    return int(number) * (1024 if unit == "Gi" else 1)


def multinode_problems(stack: StackConfig, plan: PoolPlan, nodes: int) -> list[Problem]:
    from gpupools.fabric.plan import job_fabric

    fabric = job_fabric(stack, plan)
    if nodes < 2:
        return [Problem("--nodes", f"{nodes}: a multi-node job has 2 nodes or more; leave --nodes out for one node")]
    if fabric is None:
        return [Problem("--nodes", f"pool {plan.name!r} has no fabric between nodes (fabric: {plan.pool.fabric}, {plan.pool.instance_type}); "
                                   f"multi-node jobs go to a pool with one")]
    if not fabric.configured:
        return [Problem("--nodes", f"pool {plan.name!r}'s {fabric.name} is not reachable by pods: {fabric.gaps[0]}")]
    if nodes > plan.pool.max_nodes:
        return [Problem("--nodes", f"{nodes} exceeds pool {plan.name!r}'s maxNodes ({plan.pool.max_nodes})")]
    if rack_scale(plan) and nodes * plan.hardware.gpus_per_node > plan.hardware.gpu.nvlink_domain:
        # The job's pods stay in one NVLink clique (`computedomain.with_channel`): more nodes than one holds never schedule.
        return [Problem("--nodes", f"{nodes} nodes of {plan.hardware.gpus_per_node} GPUs exceed one NVLink domain of pool {plan.name!r} "
                                   f"({plan.hardware.gpu.nvlink_domain} GPUs, {plan.hardware.gpu.nvlink_domain // plan.hardware.gpus_per_node} nodes)")]
    return []


def multinode_job(stack: StackConfig, plan: PoolPlan, nodes: int, image: str | None = None, team: str | None = None,
                  priority: str | None = None, team_plans: list[TeamPlan] | None = None, base: str = "multinode",
                  jobset: bool = False) -> list[dict]:
    """An Indexed Job of `nodes` pods, one per node, each with all the node's GPUs and fabric devices, and the headless
    Service that gives pod i the name <job>-i.<job> (Kubernetes: an Indexed Job's pods get hostname <job>-<index>
    and, with `subdomain`, a DNS record under that Service). torchrun's rank comes from JOB_COMPLETION_INDEX, which
    Kubernetes sets in every pod of an Indexed Job. For a team on Kueue the Job queues and carries the topology
    annotation that keeps its pods close; on KAI it is one gang.

    The name is `<base>-<pool>`, shortened where a name built from it would go over its limit (`landing.names`); `jobset`:
    to the JobSet's limits, which are tighter, as `landing.jobset.as_jobset` turns the Job into a JobSet of that name."""
    from gpupools.fabric.plan import fabric_pod, job_fabric, with_fabric_pod
    from gpupools.queues.kueue import podset_topology

    problems = multinode_problems(stack, plan, nodes)
    if problems:
        raise ConfigError(problems)
    fabric = job_fabric(stack, plan)
    assert fabric is not None
    pod = fabric_pod(fabric)
    name = fit_jobset(f"{base}-{plan.name}", REPLICATED_JOB, nodes) if jobset else fit_job(f"{base}-{plan.name}", nodes)
    gpus = plan.hardware.gpus_per_node
    limits = {plan.mechanism.resource: gpus, **registered_hugepages_only(pod["limits"], plan)}
    spec = pod_spec(stack, plan, limits, image or MULTI_NODE_IMAGE)
    container = spec["containers"][0]
    container["name"] = "trainer"
    container["command"] = ["torchrun", f"--nnodes={nodes}", f"--nproc-per-node={gpus}", "--node-rank=$(JOB_COMPLETION_INDEX)",
                            f"--master-addr={name}-0.{name}", f"--master-port={MASTER_PORT}", "--no-python", "python", "-c", ALL_REDUCE]
    container["env"] = [{"name": k, "value": v} for k, v in pod["env"].items()]
    if plan.mechanism.mode == "mig":
        # NCCL is not supported with MIG; GPUDirect RDMA from a MIG GPU instance is (NVIDIA MIG user guide, Deployment
        # Considerations, "Application Considerations"). Each pod lists the fabric provider libfabric reaches (fi_info,
        # in EFA-enabled images); put an MPI or NIXL program in its place.
        container["command"] = ["fi_info", "-p", pod["env"].get("FI_PROVIDER", "efa"), "-t", "FI_EP_RDM"]
    container["ports"] = [{"containerPort": MASTER_PORT, "name": "rendezvous"}]
    container["volumeMounts"] = [{"name": "shm", "mountPath": "/dev/shm"}]
    if pod["capabilities"]:
        container["securityContext"] = {"capabilities": {"add": list(pod["capabilities"])}}
    spec["subdomain"] = name
    spec["volumes"] = [{"name": "shm", "emptyDir": {"medium": "Memory"}}]  # NCCL's shared memory between the node's GPUs
    job = _job(stack, name, limits, image or MULTI_NODE_IMAGE, plan)
    job["spec"]["template"]["spec"] = spec
    with_fabric_pod(job["spec"]["template"], pod)  # GKE: interfaces, host libraries, the receive-datapath sidecar
    job["spec"].update({"completionMode": "Indexed", "completions": nodes, "parallelism": nodes})
    namespace = None
    if team is not None:
        teams = {t.team.name: t for t in (team_plans if team_plans is not None else plan_teams(stack, [plan])) if plan in t.pools}
        if team not in teams:
            raise ConfigError([Problem("--team", f"{team!r} is not a team of pool {plan.name!r}; its teams: {', '.join(teams) or 'none'}")])
        t = teams[team]
        namespace = t.team.namespace_name
        job["metadata"]["namespace"] = namespace
        job["spec"]["template"]["spec"]["tolerations"] = pod_tolerations(stack, plan, t.team)
        if stack.quotas == "kueue":
            queue_for(job, t, priority)
            annotations = podset_topology(stack, plan, fabric, gang=True)
            if annotations:
                job["spec"]["template"]["metadata"].setdefault("annotations", {}).update(annotations)
        elif stack.quotas == "kai":
            from gpupools.queues import kai

            kai_job(job, t, plan, priority, 1, None)
            # KAI's pod grouper gives a Job one PodGroup whose minMember is 1 unless the Job says otherwise (KAI v0.17.0
            # pkg/podgrouper/podgrouper/plugins/job/job_grouper.go, calcMinMember; docs/batch/README.md): without this
            # KAI would start the pods one by one, and the first would hold their nodes' GPUs waiting for the rest.
            job["metadata"]["annotations"] = {kai.MIN_MEMBER_ANNOTATION: str(nodes)}
        elif priority is not None:
            raise ConfigError([Problem("--priority", "priorities need gpupools:quotas: kueue")])
    elif priority is not None:
        raise ConfigError([Problem("--priority", "only with --team")])
    if rack_scale(plan):
        # NVLink across the rack's nodes: every pod claims the channel of the job's ComputeDomain (`rack_docs` prints it).
        with_channel(job["spec"]["template"], compute_domain(name, namespace), (CD_LABEL, name), clique_labelled(plan))
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": {POOL_LABEL: plan.name}},
               # Ready or not: rank 0 must be found by name while the others start.
               "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"batch.kubernetes.io/job-name": name},
                        "ports": [{"name": "rendezvous", "port": MASTER_PORT}]}}
    if namespace:
        service["metadata"]["namespace"] = namespace
    return [service, job]


def disruption_budget(plan: PoolPlan, job: dict) -> dict | None:
    """On a training pool, a PodDisruptionBudget that forbids evicting the job's pods (maxUnavailable 0): the drains of
    EKS node group updates, AKS and GKE node upgrades honour it (EKS for 15 minutes, then the update fails; AKS until its
    drain timeout, then the node stays cordoned; GKE for up to an hour), so an upgrade waits for the job instead of
    restarting it (docs/upgrades.md). None on inference pools, whose pods are meant to move."""
    if not pool_upgrade(plan.pool).training:
        return None
    name = job["metadata"]["name"]
    key = JOBSET_NAME_LABEL if job["kind"] == "JobSet" else JOB_NAME_LABEL
    metadata: dict = {"name": name, "labels": {POOL_LABEL: plan.name}}
    if job["metadata"].get("namespace"):
        metadata["namespace"] = job["metadata"]["namespace"]
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": metadata,
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {key: name}}}}


# The labels Kubernetes' Job controller and the JobSet controller put on their pods.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


def multinode_jobset(stack: StackConfig, plan: PoolPlan, nodes: int, image: str | None = None, team: str | None = None,
                     priority: str | None = None, team_plans: list[TeamPlan] | None = None) -> dict:
    """`multinode_job`'s job as a JobSet; the same refusals (ConfigError naming the option)."""
    return as_jobset(multinode_job(stack, plan, nodes, image, team, priority, team_plans, jobset=True))


def rack_docs(plan: PoolPlan, docs: list[dict]) -> list[dict]:
    """A multi-node workload's documents, on a rack-scale pool led by its ComputeDomain (same name and namespace as the
    workload, whose pods claim its channel); unchanged elsewhere."""
    if not rack_scale(plan):
        return docs
    workload = docs[-1]
    return [compute_domain(workload["metadata"]["name"], workload["metadata"].get("namespace"))] + docs


def channel_comment(docs: list[dict]) -> str:
    """The ResourceClaimTemplate the ComputeDomain controller writes for the documents' ComputeDomain, as YAML comments:
    the controller creates it itself (and fails to where one of that name exists), so it is shown, not applied."""
    import yaml

    domains = [d for d in docs if d.get("kind") == "ComputeDomain"]
    if not domains:
        return ""
    lines = ["# The ComputeDomain controller creates this ResourceClaimTemplate (do not apply it); the pods claim its channel:"]
    for domain in domains:
        lines += [f"#   {line}" for line in yaml.safe_dump(channel_claim_template(domain), sort_keys=False).splitlines()]
    return "\n".join(lines) + "\n"


def read_claim_template(path) -> dict:
    """A ResourceClaimTemplate from a YAML file, as `--claim-template` takes it; ConfigError (one line naming the option) for
    a file that is not one, or a claim Kueue would refuse (`computedomain.claim_problems`)."""
    import yaml

    from gpupools.fabric.computedomain import RESOURCE_API, claim_problems

    try:
        template = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError([Problem("--claim-template", f"cannot read {path}: {type(exc).__name__}")]) from None
    if not isinstance(template, dict) or template.get("kind") != "ResourceClaimTemplate" or template.get("apiVersion") != RESOURCE_API:
        raise ConfigError([Problem("--claim-template", f"{path} is not a {RESOURCE_API} ResourceClaimTemplate")])
    name = (template.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", name):
        raise ConfigError([Problem("--claim-template", f"{path}: metadata.name must be a DNS subdomain name")])
    problems = claim_problems(template, "--claim-template")
    if problems:
        raise ConfigError(problems)
    return template


def with_claim_template(docs: list[dict], template: dict | None) -> list[dict]:
    """The workload's pods also claiming from `template`, printed before it in the workload's namespace."""
    if template is None:
        return docs
    import copy

    template = copy.deepcopy(template)
    workload = docs[-1]
    name = template["metadata"]["name"]
    if workload["metadata"].get("namespace"):
        template["metadata"]["namespace"] = workload["metadata"]["namespace"]
    job_spec = workload["spec"]["replicatedJobs"][0]["template"]["spec"] if workload["kind"] == "JobSet" else workload["spec"]
    spec = job_spec["template"]["spec"]
    claim = "claim-" + name.replace(".", "-")[:57]
    spec["resourceClaims"] = list(spec.get("resourceClaims") or []) + [{"name": claim, "resourceClaimTemplateName": name}]
    for container in spec["containers"]:
        resources = container.setdefault("resources", {})
        resources["claims"] = list(resources.get("claims") or []) + [{"name": claim}]
    return [template] + docs
