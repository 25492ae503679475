"""An install carries only the clouds it needs: each cloud's Pulumi provider comes with the extra named after it, and
a stack whose provider is missing ends with one line naming that extra, from every command."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib

import pytest

from gpupools.stack.errors import ConfigError
from gpupools.clouds.registry import MODULES
from gpupools.validation.stack import validate_stack

from conftest import ROOT, stack_config

# Runs the CLI as if pip had never installed the packages named in argv[1]: the finder first on sys.meta_path
# answers for them (and their submodules) the way a missing package does.
ABSENT = """
import sys

absent = set(sys.argv[1].split(","))


class Absent:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in absent:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Absent())
sys.argv = ["gpupools", *sys.argv[2:]]
from gpupools.cli.main import main

main()
"""

AWS_ONLY = "pulumi_azure_native,pulumi_gcp"
GCP_LINE = "error: cloud: gcp needs the Google Cloud provider (pulumi-gcp), which this installation leaves out: pip install 'gpupools[gcp]'"


def run_without(absent: str, *args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", ABSENT, absent, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": tempfile.gettempdir()})


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_each_cloud_provider_comes_with_its_extra_only():
    project = pyproject()
    names = lambda reqs: {r.split(";")[0].split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower() for r in reqs}
    core = names(project["dependencies"])
    extras = project["optional-dependencies"]
    for cloud, module in MODULES.items():
        distribution = module.PROVIDER.sdk_distribution
        assert distribution not in core
        assert distribution in names(extras[cloud])
        assert module.PROVIDER.sdk_package == distribution.replace("-", "_")
    assert extras["all"] == [f"gpupools[{','.join(MODULES)}]"]
    assert any(r.startswith("gpupools[all") for r in extras["test"])
    # What every stack needs, whatever its cloud: the engine, the Kubernetes objects, the Grafana password, `check`.
    assert {"pulumi", "pulumi-kubernetes", "pulumi-random", "pulumi-policy", "pydantic", "pyyaml"} <= core


def test_every_package_folder_is_installed():
    """A wheel or a plain `pip install .` (the policy pack installs gpupools so) carries only the listed packages;
    an editable install hides a forgotten one."""
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "gpupools").rglob("__init__.py")}
    assert folders == set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])


def test_a_stack_whose_provider_is_missing_gets_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pulumi_gcp", None)  # what `import pulumi_gcp` then does: ImportError
    broken = {**stack_config("gcp"), "gcp:regoin": "x", "gpupools:pools": [{"name": "BAD"}]}
    for config in (stack_config("gcp"), broken):
        with pytest.raises(ConfigError) as exc:
            validate_stack(config, {})
        assert [str(p) for p in exc.value.problems] == [GCP_LINE]
    validate_stack(stack_config("aws"), {})  # the other clouds are not asked for


@pytest.mark.parametrize("args", [
    ("plan", "--stack", "dev-gcp"),
    ("plan", "--stack", "dev-gcp", "--json"),
    ("check", "--stack", "dev-gcp"),
    ("render", "--stack", "dev-gcp", "--out", "/nonexistent/rendered"),
    ("workload", "--stack", "dev-gcp", "--pool", "infer"),
    ("idle", "--prometheus", "http://127.0.0.1:9", "--stack", "dev-gcp", "--by", "team"),
], ids=lambda a: a[0] + ("-json" if "--json" in a else ""))
def test_every_command_names_the_extra_in_an_aws_only_install(args):
    result = run_without(AWS_ONLY, *args)
    assert (result.returncode, result.stderr, result.stdout) == (2, GCP_LINE + "\n", "")


def test_an_aws_only_install_plans_and_checks_aws_stacks(tmp_path):
    for args in (("plan", "--stack", "dev-aws"), ("check", "--stack", "dev-aws-existing"),
                 ("render", "--stack", "dev-aws", "--out", str(tmp_path / "out"))):
        result = run_without(AWS_ONLY, *args)
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    azure = run_without("pulumi_aws,pulumi_gcp", "plan", "--stack", "dev-azure")
    assert azure.returncode == 0, azure.stderr
    assert run_without("pulumi_aws", "plan", "--stack", "dev-aws").stderr.endswith("pip install 'gpupools[aws]'\n")

