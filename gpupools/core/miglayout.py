"""Mixed MIG layouts: different MIG profiles on different GPUs of one node, applied by the GPU Operator's MIG manager.

A pool's `sharing.migLayout` lists groups of its nodes' GPUs in index order, each with the MIG instances every GPU of
the group is split into (no profiles: MIG off, whole GPUs). The layout becomes one named mig-parted config, which the
node label `nvidia.com/mig.config` selects; the MIG manager applies it on each node of the pool.

Pure decisions only: the slice budget of a GPU, the one-line problems of a layout, its mig-parted entries and name,
and the extended resources a node then advertises.
"""

from __future__ import annotations

import hashlib
import json
import re

from gpupools.core.catalog import GpuModel, mig_resource_name
from gpupools.stack.config import MigGroup
from gpupools.stack.errors import Problem

GPU_RESOURCE = "nvidia.com/gpu"
_PROFILE = re.compile(r"^([0-9]+)g\.([0-9]+)gb")


def profile_size(profile: str) -> tuple[int, int]:
    """(compute slices, memory in GB) as the profile's name spells them: 3g.90gb is (3, 90)."""
    match = _PROFILE.match(profile)
    assert match is not None, profile
    return int(match.group(1)), int(match.group(2))


def slice_budget(gpu: GpuModel) -> tuple[int, int]:
    """(compute slices, memory slices) of one GPU: the whole-GPU profile's compute slices (7g, or 4g on RTX PRO
    6000), and its memory over the smallest profile's memory, one memory slice (8 on A100, H100, H200, B200, B300;
    4 on RTX PRO 6000). NVIDIA MIG User Guide, "Terminology" (GPU slice: one SM slice and one memory slice)."""
    sizes = [profile_size(p) for p in gpu.mig_profiles]
    compute = max(c for c, _ in sizes)
    whole = max(m for c, m in sizes if c == compute)
    return compute, round(whole / min(m for _, m in sizes))


def profile_slices(gpu: GpuModel, profile: str) -> tuple[int, int]:
    """(compute slices, memory slices) one instance of the profile takes: 3g.90gb on B200 is (3, 4)."""
    compute, memory = profile_size(profile)
    return compute, round(memory / min(m for _, m in (profile_size(p) for p in gpu.mig_profiles)))


def media_extensions(profile: str) -> bool:
    """`+me` profiles (and RTX PRO 6000's `+me.all`) hold the GPU's one set of media engines; `-me` ones hold none."""
    return "+me" in profile


def _spelled(profiles: dict[str, int]) -> str:
    return " + ".join(f"{p} x {n}" for p, n in profiles.items())


def group_problems(gpu: GpuModel, profiles: dict[str, int], path: str) -> list[Problem]:
    """Why one GPU cannot hold these MIG instances at once, or nothing. mig-parted still applies the layout on the
    node through NVML, which places each instance; a layout within the budget that no placement fits fails there."""
    unknown = [p for p in profiles if p not in gpu.mig_profiles]
    if unknown:
        return [Problem(path, f"{unknown[0]!r} is not a MIG profile of {gpu.name}; it has {', '.join(gpu.mig_profiles)}")]
    for profile, count in profiles.items():
        if count > gpu.mig_profiles[profile]:
            return [Problem(path, f"{profile} x {count}: at most {gpu.mig_profiles[profile]} fit on one {gpu.name} GPU")]
    compute_budget, memory_budget = slice_budget(gpu)
    compute = sum(profile_slices(gpu, p)[0] * n for p, n in profiles.items())
    memory = sum(profile_slices(gpu, p)[1] * n for p, n in profiles.items())
    if compute > compute_budget:
        return [Problem(path, f"{_spelled(profiles)} take {compute} compute slices; one {gpu.name} GPU has {compute_budget}")]
    if memory > memory_budget:
        return [Problem(path, f"{_spelled(profiles)} take {memory} memory slices; one {gpu.name} GPU has {memory_budget}")]
    if sum(n for p, n in profiles.items() if media_extensions(p)) > 1:
        return [Problem(path, f"{_spelled(profiles)}: one GPU has one set of media engines, so at most one +me instance")]
    return []


def layout_problems(gpu: GpuModel | None, instance_type: str, gpus_per_node: int, layout: list[MigGroup], strategy: str,
                    path: str) -> list[Problem]:
    """Whether the layout fits the pool's GPU and node, and the device plugin's MIG strategy can serve it.

    The single strategy advertises one resource per node and marks a node invalid when some GPUs have MIG off or the
    MIG devices are of more than one profile (NVIDIA/k8s-device-plugin v0.20.0 internal/lm/mig-strategy.go,
    newMigStrategySingleLabeler, lines 182-238)."""
    if gpu is None:
        return []
    problems = []
    for i, group in enumerate(layout):
        problems += group_problems(gpu, dict(group.profiles), f"{path}[{i}].profiles")
    given = sum(g.gpus for g in layout)
    if given != gpus_per_node:
        problems.append(Problem(path, f"the groups hold {given} GPUs; {instance_type} has {gpus_per_node} per node: give every GPU one group"))
    if not any(g.profiles for g in layout):
        problems.append(Problem(path, "no group has MIG profiles; for whole GPUs use mode 'none'"))
    kinds = {p for g in layout for p in g.profiles}
    if strategy == "single" and (len(kinds) > 1 or any(not g.profiles for g in layout)):
        problems.append(Problem(path, "MIG off on some GPUs or more than one profile on a node needs gpuSoftware.migStrategy: mixed; "
                                      "the single strategy marks such nodes invalid"))
    return problems


def placement_problems(installer: str, image_device_plugin: bool, service: str, path: str) -> list[Problem]:
    """Only the GPU Operator's MIG manager applies a mig-parted config of several layouts: not Bottlerocket's own MIG
    settings, nor a service's own GPU software (GKE's partitioner makes one size per node)."""
    if image_device_plugin:
        return [Problem(path, "os: bottlerocket splits every GPU of a node into one profile (its MIG settings take one per GPU model); "
                              "use os: al2023 for a layout")]
    if installer == "cloud":
        return [Problem(path, f"{service}'s own GPU software (installer 'cloud') splits every GPU of a node alike; a layout needs "
                              f"the GPU Operator's MIG manager (gpuSoftware.installer: gpu-operator)")]
    return []  # the standalone device plugin makes no MIG at all: refused on the pool's mode


def mig_parted_entries(layout: list[MigGroup]) -> list[dict]:
    """The layout as mig-parted v1 entries (NVIDIA/mig-parted v0.15.0 api/spec/v1/spec.go, MigConfigSpec): GPU
    indices in group order; `mig-devices` only where MIG is on (UnmarshalJSON refuses devices with MIG off)."""
    entries, first = [], 0
    for group in layout:
        entry: dict = {"devices": list(range(first, first + group.gpus)), "mig-enabled": bool(group.profiles)}
        if group.profiles:
            entry["mig-devices"] = dict(group.profiles)
        entries.append(entry)
        first += group.gpus
    return entries


def layout_config_name(layout: list[MigGroup]) -> str:
    """The config's name, the node label's value: named by its content, so pools with one layout share it and an edit
    picks another name, which the MIG manager sees as a label change and applies."""
    digest = hashlib.sha256(json.dumps(mig_parted_entries(layout), sort_keys=True).encode()).hexdigest()[:12]
    return f"layout-{digest}"


def layout_resources(layout: list[MigGroup], strategy: str) -> dict[str, int]:
    """Extended resources one node advertises, in layout order (`entries_resources`)."""
    return entries_resources(mig_parted_entries(layout), sum(g.gpus for g in layout), strategy)


def entries_resources(entries: list[dict], gpus_per_node: int, strategy: str) -> dict[str, int]:
    """What a node advertises under a mig-parted config's entries: a MIG resource per profile in the mixed strategy
    (nvidia.com/gpu for GPUs with MIG off), every MIG device as nvidia.com/gpu in the single strategy."""
    out: dict[str, int] = {}
    for entry in entries:
        devices = entry.get("devices")
        gpus = gpus_per_node if devices == "all" else len(devices) if isinstance(devices, list) else 0
        profiles = entry.get("mig-devices") or {} if entry.get("mig-enabled") else {}
        if not profiles:
            out[GPU_RESOURCE] = out.get(GPU_RESOURCE, 0) + gpus
        for profile, count in profiles.items():
            name = mig_resource_name(str(profile)) if strategy == "mixed" else GPU_RESOURCE
            out[name] = out.get(name, 0) + gpus * int(count)
    return out


def entries_problems(gpu: GpuModel, gpus_per_node: int, entries: list[dict], where: str) -> list[str]:
    """What a mig-parted config's entries ask of one node that its GPUs cannot give (the policy pack's reading of a
    config some other program wrote)."""
    found = []
    for i, entry in enumerate(entries):
        devices = entry.get("devices")
        if isinstance(devices, list) and any(not isinstance(d, int) or not 0 <= d < gpus_per_node for d in devices):
            found.append(f"{where}[{i}] names GPUs {devices}; the node has GPUs 0 to {gpus_per_node - 1}")
        if entry.get("mig-enabled"):
            found += [f"{where}[{i}]: {p.message}" for p in group_problems(gpu, dict(entry.get("mig-devices") or {}), where)]
    return found


def layout_words(layout: list[MigGroup]) -> str:
    """`4 GPUs 1g.23gb x 7, 4 GPUs MIG off`: the plan's description of a layout."""
    return ", ".join(f"{g.gpus} GPU{'s' if g.gpus > 1 else ''} " + (_spelled(dict(g.profiles)) if g.profiles else "MIG off") for g in layout)
