"""The fabric test a platform team runs after `pulumi up`: nccl-tests' all_reduce_perf across the nodes of a fabric pool,
and the bus bandwidth the cloud published for the instance type, to compare with.

It runs in the multi-node Job (or JobSet) `multinode_job` prints for the pool, the same pods on the same nodes with the
same fabric devices and NCCL settings, with the trainer container swapped for one running the test from the catalog's
pinned image for the fabric (catalog.yaml `ncclTests.images`). all_reduce_perf spans processes only through MPI
(NVIDIA/nccl-tests README: "NCCL tests rely on MPI to work on multiple processes, hence multiple nodes"), and the
clouds' own runs start it with mpirun over ssh between the pods (aws-samples/awsome-distributed-training
micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml and Azure/aks-rdma-infiniband tests/scenarios/k8s/templates/
mpi-job.yaml, both through the MPI Operator; NVIDIA/cloudai kubernetes_json_gen_strategy.py likewise, sshd on port 2222).
gpupools installs no MPI Operator, so the pods arrange ssh themselves, with nothing but OpenSSH:

- pod 0 (the launcher) makes its host keys and starts sshd; its ed25519 host key doubles as its ssh identity;
- every other pod reads that public key from pod 0 with ssh-keyscan, authorizes only it, starts sshd, and waits;
- pod 0 waits until it can reach every other pod, runs mpirun over ssh with one rank per GPU, tells the others it is
  done, and exits with mpirun's status, so the Job (or JobSet) succeeds or fails with the test.

No key leaves the pods and no Secret is needed; sshd listens only on the pods' own addresses, and only pod 0's key gets
in. Job-level `activeDeadlineSeconds` ends a test whose pod 0 never comes.
"""

from __future__ import annotations

import shlex

import yaml

from gpupools.core.catalog import NcclResult, NcclTestImage, load_catalog
from gpupools.core.pools import PoolPlan
from gpupools.fabric.computedomain import rack_scale
from gpupools.queues.teams import TeamPlan
from gpupools.stack.config import StackConfig
from gpupools.stack.errors import ConfigError, Problem

SSH_PORT = 2222  # as Azure's nccl-tests image (tests/containers/nccl-tests/Dockerfile) and NVIDIA CloudAI configure sshd
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"
DONE_FILE = "/tmp/nccl-test-done"
DEADLINE_SECONDS = 3600
DEFAULT_NODES = 2
DEFAULT_MAX_BYTES = 8 * 1024 ** 3
CONTAINER = "nccl-tests"
NVLINK_IMAGE = "nvlink"  # catalog.yaml ncclTests.images key for rack-scale pools
# NVLink SHARP on: NVIDIA's GB300 NVL72 check forces it (NVIDIA/aicr @ 44108df validators/performance/testdata/gb300/
# generic/runtime-nvls.yaml, mpirun -x NCCL_NVLS_ENABLE=1); the launcher forwards it to every rank.
NVLINK_ENV = [{"name": "NCCL_NVLS_ENABLE", "value": "1"}]


def test_image(stack: StackConfig, plan: PoolPlan) -> tuple[NcclTestImage | None, list[Problem]]:
    """The catalog's image for the pool's fabric, or why there is no test for the pool (one line naming --nccl-test)."""
    from gpupools.fabric.plan import job_fabric

    fabric = job_fabric(stack, plan)
    if fabric is None:
        return None, [Problem("--nccl-test", f"pool {plan.name!r} has no fabric between nodes (fabric: {plan.pool.fabric}, "
                                             f"{plan.pool.instance_type}); the NCCL test measures one: run it on a pool with EFA, "
                                             f"GPUDirect or InfiniBand")]
    images = load_catalog().nccl_images
    # A rack-scale pool's all-reduce runs over NVLink across the rack (the job's ComputeDomain channel), on arm64 hosts.
    image = images.get(NVLINK_IMAGE if rack_scale(plan) else fabric.kind)
    if image is None:
        return None, [Problem("--nccl-test", f"pool {plan.name!r}'s {fabric.name} ({fabric.kind}) has no NCCL test image in gpupools' "
                                             f"catalog (it has images for {', '.join(sorted(images))}); run the cloud's own NCCL test for it")]
    return image, []


def published(stack: StackConfig, plan: PoolPlan) -> NcclResult | None:
    return load_catalog().nccl_results.get(stack.cloud, {}).get(plan.pool.instance_type)


def _size(nbytes: int) -> str:
    """all_reduce_perf's own size suffixes (K, M, G)."""
    for suffix, factor in (("G", 1024 ** 3), ("M", 1024 ** 2), ("K", 1024)):
        if nbytes % factor == 0:
            return f"{nbytes // factor}{suffix}"
    return str(nbytes)


def launcher_script(hosts: list[str], gpus: int, image: NcclTestImage, forward: list[str], max_bytes: int) -> str:
    """The container's bash script (see the module docstring). It holds no `$(`: Kubernetes expands `$(NAME)` in a
    container's command from its environment, so the script sticks to `$NAME`, `${...}` and backticks."""
    launcher, workers = hosts[0], hosts[1:]
    ssh_opts = f"-p {SSH_PORT} -i {HOST_KEY} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes"
    exports = " ".join(f"-x {name}" for name in forward)
    install = ("if [ ! -x /usr/sbin/sshd ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
               "--no-install-recommends openssh-server > /dev/null; fi\n") if image.install_sshd else ""
    script = f"""set -eu
{install}mkdir -p /run/sshd /var/run/sshd /root/.ssh
ssh-keygen -A > /dev/null
SSH_OPTS={shlex.quote(ssh_opts)}
wait_dns() {{ until getent hosts "$1" > /dev/null; do sleep 2; done; }}
if [ "$JOB_COMPLETION_INDEX" != 0 ]; then
  wait_dns {launcher}
  until ssh-keyscan -p {SSH_PORT} -t ed25519 {launcher} 2> /dev/null | cut -d' ' -f2- > /root/.ssh/authorized_keys && [ -s /root/.ssh/authorized_keys ]; do sleep 2; done
  chmod 600 /root/.ssh/authorized_keys
  /usr/sbin/sshd -p {SSH_PORT}
  until [ -f {DONE_FILE} ]; do sleep 5; done
  exit 0
fi
/usr/sbin/sshd -p {SSH_PORT}
for h in {' '.join(workers)}; do wait_dns "$h"; until ssh $SSH_OPTS "$h" true; do sleep 2; done; done
MPIRUN=`command -v mpirun`
set +e
"$MPIRUN" --allow-run-as-root --prefix "${{MPIRUN%/bin/mpirun}}" -np {len(hosts) * gpus} -H {','.join(f'{h}:{gpus}' for h in hosts)} \\
  --bind-to none --mca plm_rsh_args "$SSH_OPTS" {exports} \\
  {image.binary} -b 8 -e {_size(max_bytes)} -f 2 -g 1
status=$?
for h in {' '.join(workers)}; do ssh $SSH_OPTS "$h" touch {DONE_FILE}; done
exit $status
"""
    assert "$(" not in script
    return script


def nccl_test(stack: StackConfig, plan: PoolPlan, nodes: int = DEFAULT_NODES, image: str | None = None, team: str | None = None,
              priority: str | None = None, team_plans: list[TeamPlan] | None = None, jobset: bool = False) -> list[dict]:
    """[Service, Job] (or [JobSet]) running the test on `nodes` nodes of the pool; ConfigError naming the option that cannot
    work. `image` replaces the catalog's (it must carry sshd, mpirun and the catalog's binary)."""
    from gpupools.landing.jobs import multinode_job
    from gpupools.landing.jobset import as_jobset, hostname

    pinned, problems = test_image(stack, plan)
    if problems:
        raise ConfigError(problems)
    assert pinned is not None
    service, job = multinode_job(stack, plan, nodes, image or pinned.image, team, priority, team_plans, base="nccl-test", jobset=jobset)
    name = job["metadata"]["name"]  # nccl-test-<pool>, shortened where a name built from it would go over its limit
    service["spec"]["ports"] = [{"name": "ssh", "port": SSH_PORT}]
    job["spec"]["activeDeadlineSeconds"] = DEADLINE_SECONDS
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    hosts = [hostname(name, i) for i in range(nodes)] if jobset else [f"{name}-{i}.{name}" for i in range(nodes)]
    env = [e for e in container.get("env") or [] if e["name"] != "NCCL_DEBUG"]  # the INFO lines would bury the table
    if rack_scale(plan):
        env += [e for e in NVLINK_ENV if e not in env]
    forward = list(dict.fromkeys([*pinned.forward_env, *(e["name"] for e in env if "value" in e)]))
    result = published(stack, plan)
    script = launcher_script(hosts, plan.hardware.gpus_per_node, pinned, forward, result.bytes if result else DEFAULT_MAX_BYTES)
    container.update({"name": CONTAINER, "image": image or pinned.image, "command": ["bash", "-c", script], "env": env,
                      "ports": [{"containerPort": SSH_PORT, "name": "ssh"}]})
    if jobset:
        return [as_jobset([service, job])]
    return [service, job]


def pod_template(workload: dict) -> dict:
    """The pod template of a Job, or of a JobSet's first replicated job."""
    spec = workload["spec"]
    return spec["replicatedJobs"][0]["template"]["spec"]["template"] if workload["kind"] == "JobSet" else spec["template"]


def expected_lines(stack: StackConfig, plan: PoolPlan, docs: list[dict]) -> list[str]:
    """The YAML comment the CLI prints above the test (`nccl_test`'s docs): what runs, where to read the result, what to
    compare it with."""
    pinned, _ = test_image(stack, plan)
    workload = docs[-1]
    jobset = workload["kind"] == "JobSet"
    namespace = workload["metadata"].get("namespace")
    template = pod_template(workload)
    image = template["spec"]["containers"][0]["image"]
    nodes = int((workload["spec"]["replicatedJobs"][0]["template"]["spec"] if jobset else workload["spec"])["parallelism"])
    name = workload["metadata"]["name"]
    where = f" -n {namespace}" if namespace else ""
    selector = (f"jobset.sigs.k8s.io/jobset-name={name},batch.kubernetes.io/job-completion-index=0" if jobset
                else f"batch.kubernetes.io/job-name={name},batch.kubernetes.io/job-completion-index=0")
    lines = [f"# NCCL all-reduce test on pool {plan.name}: {nodes} nodes x {plan.hardware.gpus_per_node} GPUs ({plan.pool.instance_type}), "
             f"nccl-tests all_reduce_perf from {image}" + (f" ({pinned.source})" if pinned and image == pinned.image else ""),
             f"# result: the busbw column of the last lines, in GB/s: kubectl logs{where} -l {selector} -c {CONTAINER}"]
    result = published(stack, plan)
    if result is None:
        known = sorted(load_catalog().nccl_results.get(stack.cloud, {}))
        lines.append(f"# expected: no published all_reduce_perf result for {plan.pool.instance_type} in gpupools' catalog"
                     + (f" (it has {', '.join(known)})" if known else ""))
    else:
        floor = f"; below {result.floor:g} GB/s the source calls it a problem with the setup" if result.floor else ""
        other = "" if nodes == result.nodes else f" (this test runs {nodes}: more nodes may read lower)"
        lines.append(f"# expected: about {result.busbw:g} GB/s bus bandwidth at {_size(result.bytes)}iB on {result.nodes} x "
                     f"{result.instance_type}{other}{floor} ({result.source})")
    return lines


class _ScriptDumper(yaml.SafeDumper):
    """YAML with multi-line strings (the test's script) as literal blocks, readable as the shell script they are."""


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ScriptDumper.add_representer(str, _str)


def dump(docs: list[dict]) -> str:
    return yaml.dump_all(docs, Dumper=_ScriptDumper, sort_keys=False)
