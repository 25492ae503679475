"""`gpupools render`: the stack's Kubernetes side as files, for review or for `helm`/`kubectl` without Pulumi.

Everything comes from the recorded plan, i.e. from the very inputs `pulumi up` would send.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from gpupools.monitoring.alerting import FROM_CONFIG
from gpupools.stack.config import StackConfig
from gpupools.cli.planrun import SECRET, Plan, PlannedResource
from gpupools.monitoring.plan import rendered_files as monitoring_files

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def manifest_of(resource: PlannedResource) -> dict | None:
    """A planned pulumi_kubernetes resource back as the object it creates (inputs carry apiVersion and kind)."""
    inputs = resource.inputs
    if not resource.type.startswith("kubernetes:") or resource.type == HELM_RELEASE or "kind" not in inputs:
        return None
    return {k: v for k, v in inputs.items() if k != "status"}


def manifest_filename(obj: dict) -> str:
    meta = obj.get("metadata", {})
    parts = [obj["kind"].lower(), meta.get("namespace"), meta.get("name")]
    return "-".join(p for p in parts if p) + ".yaml"


def _holds_secret(value) -> bool:
    """Whether a manifest carries a value the offline plan only knows as the secret placeholder."""
    stack = [value]
    while stack:
        current = stack.pop()
        if current == SECRET:
            return True
        if isinstance(current, dict):
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return False


def withheld_note(path: str, obj: dict) -> str:
    """What to run instead of applying a manifest gpupools will not write with a placeholder credential."""
    path_ = path
    meta = obj.get("metadata", {})
    sources = meta.get("annotations", {}).get(FROM_CONFIG)
    if obj.get("kind") == "Secret" and sources:  # values the stack holds as secrets: pulumi decrypts them on request
        literals = " ".join(f"--from-literal={k}=\"$(pulumi config get --path '{path}')\"" for k, path in json.loads(sources).items())
        return (f"{path_} not written: its values are the stack's secrets, which an offline render does not have; create it with "
                f"kubectl create secret generic {meta.get('name')} --namespace {meta.get('namespace', 'default')} {literals}")
    if obj.get("kind") == "Secret" and isinstance(obj.get("stringData"), dict):
        literals = " ".join(f'--from-literal={k}="$(openssl rand -base64 24)"' if v == SECRET else f"--from-literal={k}={v}"
                            for k, v in obj["stringData"].items())
        return (f"{path} not written: `pulumi up` generates its secret values, which an offline render does not have; create it with "
                f"kubectl create secret generic {meta.get('name')} --namespace {meta.get('namespace', 'default')} {literals}")
    return f"{path} not written: it holds a secret value that only `pulumi up` knows"


def rendered_files(stack: StackConfig, plan: Plan, withheld: list[str] | None = None) -> dict[str, str]:
    """Relative path -> YAML text. Manifests holding a secret the offline plan does not know are left out, never
    written with the placeholder (a Grafana login of admin / [secret] would be guessable); `withheld` collects
    one line per such manifest saying how to create it."""
    files: dict[str, str] = {}
    for release in sorted(plan.of_type(HELM_RELEASE), key=lambda r: r.name):
        i = release.inputs
        repo = f" --repo {i['repositoryOpts']['repo']}" if i.get("repositoryOpts") else ""
        header = (f"# Helm values for release {i['name']}: chart {i['chart']} {i['version']}\n"
                  f"# helm upgrade --install {i['name']} {i['chart']}{repo} "
                  f"--version {i['version']} --namespace {i['namespace']} -f {i['name']}.values.yaml\n")
        files[f"{release.inputs['name']}.values.yaml"] = header + yaml.safe_dump(release.inputs.get("values", {}), sort_keys=True)
    for resource in plan.resources:
        obj = manifest_of(resource)
        if obj is None:
            continue
        path = f"manifests/{manifest_filename(obj)}"
        if _holds_secret(obj):
            if withheld is not None:
                withheld.append(withheld_note(path, obj))
            continue
        files[path] = yaml.safe_dump(obj, sort_keys=True)
    # Monitoring: the GPU rules as a plain rules file and the dashboards as JSON, for your own Prometheus/Grafana.
    files.update(monitoring_files(stack))
    return files


def write_rendered(stack: StackConfig, plan: Plan, out: Path) -> tuple[list[Path], list[str]]:
    """The files written, and one line per manifest left out."""
    written: list[Path] = []
    withheld: list[str] = []
    for rel, text in sorted(rendered_files(stack, plan, withheld).items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written, withheld
