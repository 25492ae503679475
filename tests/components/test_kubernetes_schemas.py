"""Everything gpupools hands to Kubernetes validates against the Kubernetes schemas (offline)."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from gpupools.cli.main import app

kubernetes_validate = pytest.importorskip("kubernetes_validate")
K8S_VERSION = "1.33"


def validate(obj: dict) -> None:
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


@pytest.mark.parametrize("stack", ["dev-aws", "dev-aws-existing", "dev-azure", "dev-gcp"])
def test_rendered_manifests_are_valid(tmp_path, stack):
    result = CliRunner().invoke(app, ["render", "--stack", stack, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    manifests = sorted((tmp_path / "manifests").glob("*.yaml")) if (tmp_path / "manifests").exists() else []
    for path in manifests:
        obj = yaml.safe_load(path.read_text())
        if obj["apiVersion"].startswith(("monitoring.coreos.com", "karpenter.", "kueue.x-k8s.io", "networking.gke.io",
                                          "mellanox.com")):
            continue  # custom resources: checked against their CRDs' schemas (test_autoscaling, test_teams, test_gke_gpudirect, test_fabric) and by promtool
        validate(obj)
    if stack != "dev-gcp":
        assert manifests, "the GPU Operator stacks render a namespace and a device-plugin ConfigMap"


@pytest.mark.parametrize("stack, pool", [("dev-aws", "infer"), ("dev-aws", "train"), ("dev-azure", "finetune"), ("dev-gcp", "dev")])
def test_workload_jobs_are_valid(stack, pool):
    result = CliRunner().invoke(app, ["workload", "--stack", stack, "--pool", pool])
    validate(yaml.safe_load(result.stdout))


@pytest.mark.parametrize("args", [["--team", "research", "--pool", "train"], ["--team", "search"], ["--team", "search", "--priority", "low"]])
def test_team_jobs_are_valid(args):
    result = CliRunner().invoke(app, ["workload", "--stack", "dev-aws", *args])
    assert result.exit_code == 0, result.stderr
    job = yaml.safe_load(result.stdout)
    validate(job)
    assert job["spec"]["suspend"] is True and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == args[1]


def test_invalid_object_is_caught():
    with pytest.raises(kubernetes_validate.ValidationError):
        validate({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": 1}})
