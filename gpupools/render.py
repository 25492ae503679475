"""`gpupools render`: the stack's Kubernetes side as files, for review or for `helm`/`kubectl` without Pulumi.

Everything comes from the recorded plan, i.e. from the very inputs `pulumi up` would send.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from .config import StackConfig
from .plan import Plan, PlannedResource

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


def rendered_files(stack: StackConfig, plan: Plan) -> dict[str, str]:
    """Relative path -> YAML text."""
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
        if obj is not None:
            files[f"manifests/{manifest_filename(obj)}"] = yaml.safe_dump(obj, sort_keys=True)
    # Monitoring: the GPU rules as a plain rules file and the dashboards as JSON, for your own Prometheus/Grafana.
    from .monitoring import rendered_files as monitoring_files

    files.update(monitoring_files(stack))
    return files


def write_rendered(stack: StackConfig, plan: Plan, out: Path) -> list[Path]:
    written = []
    for rel, text in sorted(rendered_files(stack, plan).items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
