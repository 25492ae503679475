"""The pinned charts, rendered by the real helm: what `pulumi up` would have Helm apply for a stack.

    from charts.chartrender import render, stack_releases

    for release in stack_releases("dev-aws"):
        objects = render(chart_dir(release.chart), release.values, release.release, release.namespace)

The charts are the upstream sources at the pinned tags (tests/charts/<chart>/, see SOURCES.md). helm is
`$GPUPOOLS_HELM` or the one `./dev test` puts in .venv/bin; without it the tests that need it are skipped, unless
`GPUPOOLS_REQUIRE_HELM` is set (CI), where they fail. Renders and plans are cached for the session: each
(chart, values) pair costs one helm run however many tests look at it.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import pickle
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

CHARTS = Path(__file__).resolve().parent
ROOT = CHARTS.parents[1]
STACKS = ROOT / "stacks"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
EKS_ADDON = "aws:eks/addon:Addon"
# The Kubernetes minor the renders assume (`.Capabilities.KubeVersion`): the newest the example stacks run.
KUBE_VERSION = "1.36"
# CRD-backed APIs a cluster with gpupools' monitoring serves; charts gate their ServiceMonitors on it.
DEFAULT_API_VERSIONS = ("monitoring.coreos.com/v1",)
# EKS add-ons whose Kubernetes objects come from a chart kept here, and the namespace EKS installs them into.
ADDON_CHARTS = {"eks-node-monitoring-agent": "kube-system"}
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def helm_path() -> Path | None:
    candidates = [os.environ.get("GPUPOOLS_HELM"), ROOT / ".venv" / "bin" / "helm", Path(sys.executable).with_name("helm")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def need_helm() -> Path:
    """helm, or skip (fail where GPUPOOLS_REQUIRE_HELM is set)."""
    helm = helm_path()
    if helm is None:
        message = "helm is not installed (./dev test fetches it into .venv/bin; or set GPUPOOLS_HELM)"
        if os.environ.get("GPUPOOLS_REQUIRE_HELM"):
            pytest.fail(f"GPUPOOLS_REQUIRE_HELM is set, but {message}", pytrace=False)
        pytest.skip(message)
    return helm


def chart_name(ref: str) -> str:
    """`gpu-operator`, `oci://registry.k8s.io/kueue/charts/kueue` -> the chart's name, which is its folder here."""
    return ref.rstrip("/").rsplit("/", 1)[-1]


def chart_dir(chart: str) -> Path:
    path = CHARTS / chart_name(chart)
    if not (path / "Chart.yaml").is_file():
        raise LookupError(f"no vendored chart {chart_name(chart)!r} in {CHARTS} (see SOURCES.md)")
    return path


def chart_version(chart: str | Path) -> str:
    path = chart if isinstance(chart, Path) else chart_dir(chart)
    return str(yaml.safe_load((path / "Chart.yaml").read_text())["version"])


def render(chart: str | Path, values: dict, release: str, namespace: str,
           api_versions: tuple[str, ...] = DEFAULT_API_VERSIONS) -> list[dict]:
    """`helm template` of a vendored chart: every object it renders (CRDs of `crds/` left out, as Helm applies those
    apart from the release). A failing render raises RenderError with helm's message."""
    path = chart if isinstance(chart, Path) else chart_dir(chart)
    return pickle.loads(_rendered(str(path), json.dumps(values, sort_keys=True), release, namespace, tuple(api_versions)))


class RenderError(AssertionError):
    pass


@functools.lru_cache(maxsize=None)
def _render(path: str, values_json: str, release: str, namespace: str, api_versions: tuple[str, ...]) -> tuple[dict, ...]:
    helm = need_helm()
    with tempfile.TemporaryDirectory(prefix="gpupools-helm-") as tmp:
        values_file = Path(tmp) / "values.json"  # JSON is YAML: helm reads it as a values file
        values_file.write_text(values_json)
        # helm's own config, cache and data stay out of the user's home: a render reads nothing but the chart.
        env = {**os.environ, "HELM_CONFIG_HOME": f"{tmp}/config", "HELM_CACHE_HOME": f"{tmp}/cache", "HELM_DATA_HOME": f"{tmp}/data"}
        args = [str(helm), "template", release, path, "--namespace", namespace, "--kube-version", KUBE_VERSION, "-f", str(values_file)]
        for api in api_versions:
            args += ["--api-versions", api]
        result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    if result.returncode != 0:
        raise RenderError(f"helm template {Path(path).name} (release {release}, namespace {namespace}) failed:\n{result.stderr.strip()}")
    return tuple(doc for doc in yaml.load_all(result.stdout, Loader=_Loader) if doc)


# Each caller gets its own copy of a render or of a stack's releases, to change as it likes. Copies are unpickled from
# the bytes kept here: copy.deepcopy of the rendered objects was a third of the chart tests' time, unpickling is
# several times faster and makes the same objects. A render or plan that fails raises every time (lru_cache keeps
# no exception).
@functools.lru_cache(maxsize=None)
def _rendered(path: str, values_json: str, release: str, namespace: str, api_versions: tuple[str, ...]) -> bytes:
    return pickle.dumps(list(_render(path, values_json, release, namespace, api_versions)), protocol=pickle.HIGHEST_PROTOCOL)


@dataclass(frozen=True)
class StackRelease:
    """A chart the stack installs, as the plan records it. `version` None: an EKS add-on, whose version EKS picks."""

    chart: str  # the chart's name (its folder here)
    version: str | None
    namespace: str
    values: dict
    release: str
    source: str = "helm"  # helm | eks-addon

    def __iter__(self):  # unpacks as (chart_name, version, namespace, values)
        return iter((self.chart, self.version, self.namespace, self.values))

    def render(self, api_versions: tuple[str, ...] = DEFAULT_API_VERSIONS) -> list[dict]:
        return render(self.chart, self.values, self.release, self.namespace, api_versions)


def example_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in STACKS.glob("Pulumi.dev-*.yaml"))


def stack_config(stack: str, config: dict | None = None):
    """(raw config, validated StackConfig) of stacks/Pulumi.<stack>.yaml, or of `config` when given."""
    raw = config if config is not None else _read_stack(stack)
    return raw, _validated(json.dumps(raw, sort_keys=True))


@functools.lru_cache(maxsize=None)
def _read_stack(stack: str) -> dict:
    from gpupools.stack.values import read_stack_file

    return read_stack_file(STACKS / f"Pulumi.{stack}.yaml")


@functools.lru_cache(maxsize=None)
def _validated(config_json: str):
    from gpupools.validation.stack import validate_stack

    return validate_stack(json.loads(config_json))


def stack_plan(stack: str, config: dict | None = None):
    """The recorded plan of an example stack, or of `config` under the name `stack`: the real program under the mock
    engine, as `gpupools plan` and `gpupools render` run it."""
    raw, _ = stack_config(stack, config)
    return _plan(stack, json.dumps(raw, sort_keys=True))


@functools.lru_cache(maxsize=None)
def _plan(stack: str, config_json: str):
    from gpupools.cli.planrun import run_program

    return run_program(json.loads(config_json), stack)


def plan_releases(plan, include_addons: bool = False) -> list[StackRelease]:
    """The Helm releases of a recorded plan, with the values `gpupools render` writes for them; with
    `include_addons`, also the EKS add-ons rendered from a chart here, with their configurationValues."""
    out = []
    for r in sorted(plan.of_type(HELM_RELEASE), key=lambda r: r.inputs["name"]):
        i = r.inputs
        out.append(StackRelease(chart_name(i["chart"]), i["version"], i["namespace"], copy.deepcopy(i.get("values") or {}), i["name"]))
    if include_addons:
        for r in plan.of_type(EKS_ADDON):
            name = r.inputs["addonName"]
            if name in ADDON_CHARTS:
                values = json.loads(r.inputs.get("configurationValues") or "{}")
                out.append(StackRelease(name, None, ADDON_CHARTS[name], values, name, "eks-addon"))
    return out


def stack_releases(stack: str, include_addons: bool = False, config: dict | None = None) -> list[StackRelease]:
    """The charts an example stack (or `config`) installs; each unpacks as (chart_name, version, namespace, values)."""
    raw, _ = stack_config(stack, config)
    return pickle.loads(_releases(stack, json.dumps(raw, sort_keys=True), include_addons))


@functools.lru_cache(maxsize=None)
def _releases(stack: str, config_json: str, include_addons: bool) -> bytes:
    return pickle.dumps(plan_releases(_plan(stack, config_json), include_addons), protocol=pickle.HIGHEST_PROTOCOL)


def kind_of(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o.get("kind") == kind]
