"""`gpupools workload --pool P --nccl-test`: nccl-tests' all_reduce_perf over the pool's multi-node Job (or JobSet), from the
catalog's pinned image for the fabric, with the bus bandwidth the cloud published for the instance type.

Sources of the facts under test: gpupools/core/catalog.yaml `ncclTests` (aws-samples/awsome-distributed-training @ 7217859
micro-benchmarks/nccl-tests; Azure/aks-rdma-infiniband @ 700dabb tests/expected-output.md; NVIDIA CloudAI)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml
from typer.testing import CliRunner

from conftest import stack_config
from gpupools.cli.main import app
from gpupools.core.catalog import load_catalog
from gpupools.landing.nccltest import SSH_PORT, nccl_test, pod_template
from gpupools.pools.planning import plan_pool
from gpupools.validation.stack import validate_stack

P5 = {"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 4, "zones": ["us-east-1a"]}
INFER = {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2}


def run(*args: str) -> CliRunner:
    return CliRunner().invoke(app, ["workload", *args])


def script_of(workload: dict) -> str:
    command = pod_template(workload)["spec"]["containers"][0]["command"]
    assert command[:2] == ["bash", "-c"]
    return command[2]


def test_dev_azure_prints_the_test_with_azures_published_bandwidth():
    out = run("--stack", "dev-azure", "--pool", "pretrain", "--nccl-test")
    assert out.exit_code == 0, out.output
    head = [line for line in out.output.splitlines() if line.startswith("#")]
    assert "nccl-tests all_reduce_perf from nvcr.io/nvidia/pytorch:25.06-py3" in head[0]
    assert head[2].startswith("# expected: about 187.22 GB/s bus bandwidth at 8GiB on 2 x Standard_ND96asr_v4; below 180 GB/s")
    assert "Azure/aks-rdma-infiniband @ 700dabb tests/expected-output.md" in head[2]
    service, job = yaml.safe_load_all(out.output)
    assert (service["kind"], job["kind"]) == ("Service", "Job") and service["spec"]["ports"] == [{"name": "ssh", "port": SSH_PORT}]
    container = job["spec"]["template"]["spec"]["containers"][0]
    # The multi-node Job's fabric settings stay: the RDMA device, IPC_LOCK, NCCL told to use InfiniBand.
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 8, "rdma/sharedib": 1}
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    script = container["command"][2]
    assert "-np 16 -H nccl-test-pretrain-0.nccl-test-pretrain:8,nccl-test-pretrain-1.nccl-test-pretrain:8" in script
    assert "-x NCCL_IB_DISABLE -x NCCL_NET_GDR_LEVEL" in script and "all_reduce_perf_mpi -b 8 -e 8G -f 2 -g 1" in script
    assert "apt-get install" in script  # the PyTorch image has no ssh server
    assert job["spec"]["activeDeadlineSeconds"] == 3600 and job["spec"]["parallelism"] == 2


def test_efa_pools_use_awss_image_and_say_when_nothing_is_published(stack_file):
    path = stack_file(stack_config("aws", pools=[P5]) | {"aws:region": "us-east-1"})
    out = run("--config", str(path), "--pool", "h100", "--nccl-test", "--nodes", "3")
    assert out.exit_code == 0, out.output
    assert "# expected: about 487.09 GB/s bus bandwidth at 16GiB on 2 x p5.48xlarge (this test runs 3: more nodes may read lower)" in out.output
    _, job = yaml.safe_load_all(out.output)
    script = script_of(job)
    assert "/opt/nccl-tests/build/all_reduce_perf -b 8 -e 16G" in script and "-x LD_PRELOAD -x FI_PROVIDER" in script
    assert "apt-get" not in script  # AWS's image carries openssh-server
    assert pod_template(job)["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == 32
    dev_aws = run("--stack", "dev-aws", "--pool", "pretrain", "--nccl-test")
    assert dev_aws.exit_code == 0
    assert "# expected: no published all_reduce_perf result for p4d.24xlarge in gpupools' catalog (it has p4de.24xlarge, p5.48xlarge)" in dev_aws.output


def test_the_test_as_a_jobset_names_its_hosts_under_the_jobsets_service():
    out = run("--stack", "dev-aws", "--pool", "pretrain", "--nccl-test", "--jobset", "--team", "research", "--explain")
    assert out.exit_code == 0, out.output
    assert "# landing: lands on flavor pretrain" in out.output
    (jobset,) = yaml.safe_load_all(out.output)
    assert jobset["kind"] == "JobSet" and jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"
    assert "-H nccl-test-pretrain-workers-0-0.nccl-test-pretrain:8,nccl-test-pretrain-workers-0-1.nccl-test-pretrain:8" in script_of(jobset)
    assert "jobset.sigs.k8s.io/jobset-name=nccl-test-pretrain" in out.output


@pytest.mark.parametrize("args, words", [
    (["--stack", "dev-aws", "--pool", "infer", "--nccl-test"], "--nccl-test: pool 'infer' has no fabric between nodes"),
    (["--stack", "dev-aws", "--nccl-test"], "--nccl-test: the test runs on one fabric pool: name it with --pool"),
    (["--stack", "dev-aws", "--pool", "pretrain", "--nccl-test", "--units", "2"], "--units: the NCCL test takes every GPU"),
    (["--stack", "dev-aws", "--pool", "pretrain", "--nccl-test", "--nodes", "3"], "--nodes: 3 exceeds pool 'pretrain''s maxNodes (2)"),
    (["--stack", "dev-gcp", "--pool", "pretrain", "--nccl-test"], "--nccl-test: pool 'pretrain''s GPUDirect (gpudirect-tcpxo) has no NCCL test image"),
])
def test_what_has_no_test_is_one_line_naming_the_option(args, words):
    out = run(*args)
    assert out.exit_code == 2, out.output
    assert out.output.startswith(f"error: {words}") and out.output.count("\n") == 1


def test_the_script_is_bash_and_safe_from_kubernetes_variable_expansion():
    """Kubernetes expands $(NAME) in a command from the container's environment (and leaves unknown names as they are); the
    script holds none, so what bash runs is what gpupools wrote."""
    stack = validate_stack(stack_config("azure", pools=[{"name": "nd", "instanceType": "Standard_ND96asr_v4", "maxNodes": 4}]))
    _, job = nccl_test(stack, plan_pool(stack, stack.pool("nd")), 4)
    script = script_of(job)
    assert "$(" not in script
    if shutil.which("bash"):
        result = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    # Every worker waits for pod 0's key and a done file; pod 0 reaches every worker.
    assert script.count("nccl-test-nd-0.nccl-test-nd") >= 3
    assert "for h in nccl-test-nd-1.nccl-test-nd nccl-test-nd-2.nccl-test-nd nccl-test-nd-3.nccl-test-nd; do" in script


def test_the_nccl_test_job_lands_where_the_multinode_job_does():
    from gpupools.landing.check import cluster_of, land

    stack = validate_stack(stack_config("azure", pools=[{"name": "nd", "instanceType": "Standard_ND96asr_v4", "maxNodes": 2}]))
    cluster = cluster_of(stack)
    (plan,) = cluster.plans
    _, job = nccl_test(stack, plan, 2)
    verdict = land(cluster, None, plan, "gang", job)
    assert verdict.lands, verdict.failing


def test_catalog_facts_name_known_fabrics_and_instance_types_with_sources():
    catalog = load_catalog()
    kinds = {f.kind for fabrics in catalog.fabric.values() for f in fabrics.values() if f.kind}
    # Fabric kinds, and `nvlink` for rack-scale pools (gpupools.landing.nccltest.NVLINK_IMAGE).
    assert set(catalog.nccl_images) <= kinds | {"nvlink"} and {"efa", "infiniband", "nvlink"} <= set(catalog.nccl_images)
    for image in catalog.nccl_images.values():
        assert ":" in image.image.rsplit("/", 1)[-1] and not image.image.endswith(":latest"), image  # pinned
        assert image.source and image.binary
    for cloud, results in catalog.nccl_results.items():
        for name, result in results.items():
            assert catalog.fabric_of(cloud, name).kind in catalog.nccl_images, name
            assert result.busbw > 0 and result.nodes >= 2 and result.source
            assert result.floor is None or result.floor < result.busbw
