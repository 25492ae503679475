"""`gpupools render`: the stack's Kubernetes side as files, for review or for `helm`/`kubectl` without Pulumi.

Everything comes from the recorded plan, i.e. from the very inputs `pulumi up` would send.
"""

from __future__ import annotations

import errno
import json
import os
import stat
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


class UnsafeOutput(Exception):
    """A path inside the output folder that `render` will not write through; the message names it."""


# Opening a folder or a file with O_NOFOLLOW fails on a symbolic link instead of following it (open(2), ELOOP);
# O_DIRECTORY makes a folder that is a file fail too.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _refuse(path: Path, what: str) -> UnsafeOutput:
    return UnsafeOutput(f"{str(path)!r} {what}; gpupools render writes only inside the output folder and follows no link in it: "
                        f"remove it, or give another folder")


def _open_folder(parent_fd: int, name: str, path: Path) -> int:
    """The folder `name` inside the folder `parent_fd`, made if missing, never through a link."""
    try:
        os.mkdir(name, 0o755, dir_fd=parent_fd)
    except FileExistsError:
        pass
    try:
        return os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and stat.S_ISLNK(os.lstat(name, dir_fd=parent_fd).st_mode):
            raise _refuse(path, "is a symbolic link") from None
        if exc.errno == errno.ENOTDIR:
            raise _refuse(path, "is not a folder") from None
        raise


def _write_file(folder_fd: int, name: str, text: str, path: Path) -> None:
    """Write `name` in the folder as a new file moved into place: a link there is refused, and a file there is
    replaced rather than written into (a hard link to a file outside the folder keeps its contents)."""
    try:
        found = os.lstat(name, dir_fd=folder_fd)
    except FileNotFoundError:
        found = None
    if found is not None and stat.S_ISLNK(found.st_mode):
        raise _refuse(path, "is a symbolic link")
    if found is not None and not stat.S_ISREG(found.st_mode):
        raise _refuse(path, "is not a regular file")
    temporary = f".{name}.gpupools-{os.getpid()}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=folder_fd)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        # rename(2) replaces the name it is given; it never writes through a link that appeared there meanwhile.
        os.rename(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=folder_fd)
        except OSError:
            pass
        raise


def _check_paths(out: Path, rels: list[str]) -> None:
    """Refuse before writing anything: every folder and file `rels` name inside `out` is missing, or is a real
    folder or a regular file (the writes check again, as they go)."""
    seen: set[str] = set()
    for rel in rels:
        parts = rel.split("/")
        for depth in range(1, len(parts) + 1):
            sub = "/".join(parts[:depth])
            if sub in seen:
                continue
            seen.add(sub)
            try:
                mode = os.lstat(out / sub).st_mode
            except FileNotFoundError:
                break
            if stat.S_ISLNK(mode):
                raise _refuse(out / sub, "is a symbolic link")
            if depth < len(parts) and not stat.S_ISDIR(mode):
                raise _refuse(out / sub, "is not a folder")
            if depth == len(parts) and not stat.S_ISREG(mode):
                raise _refuse(out / sub, "is not a regular file")


def write_rendered(stack: StackConfig, plan: Plan, out: Path) -> tuple[list[Path], list[str]]:
    """The files written, and one line per manifest left out. Everything is written inside `out` (which may itself
    be a link: the caller named it) through folder descriptors, and no symbolic link inside `out` is followed: a
    link committed where a file or folder goes (`out/manifests -> /etc`, a values file linked to a file elsewhere)
    raises UnsafeOutput before anything is written through it."""
    written: list[Path] = []
    withheld: list[str] = []
    files = rendered_files(stack, plan, withheld)
    if out.exists():
        _check_paths(out, sorted(files))
    out.mkdir(parents=True, exist_ok=True)
    root = os.open(out, os.O_RDONLY | _DIRECTORY)
    try:
        for rel, text in sorted(files.items()):
            parts = rel.split("/")
            folder, opened = root, []
            try:
                for depth, name in enumerate(parts[:-1], 1):
                    folder = _open_folder(folder, name, out.joinpath(*parts[:depth]))
                    opened.append(folder)
                _write_file(folder, parts[-1], text, out / rel)
            finally:
                for fd in opened:
                    os.close(fd)
            written.append(out / rel)
    finally:
        os.close(root)
    return written, withheld
