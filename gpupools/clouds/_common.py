"""Lookups every cloud module needs in the same way."""

from __future__ import annotations

from ..catalog import Catalog, Hardware, InstanceType
from ..config import Pool
from ..errors import Problem

KIND = {"aws": "instance type", "azure": "VM size", "gcp": "machine type"}


def _a(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def lookup_instance(cloud: str, pool: Pool, catalog: Catalog, path: str) -> tuple[InstanceType | None, list[Problem]]:
    found = catalog.instance(cloud, pool.instance_type)
    if found is not None:
        return found, []
    where = f"{path}.instanceType"
    other = catalog.cloud_of(pool.instance_type)
    if other is not None:
        return None, [Problem(where, f"{pool.instance_type!r} is {_a(other)} {other} {KIND[other]}, but this stack's cloud is {cloud}; pick {_a(cloud)} {cloud} {KIND[cloud]} (gpupools catalog --cloud {cloud})")]
    closest = catalog.closest(cloud, pool.instance_type)
    hint = f"closest known: {', '.join(closest)}" if closest else f"see `gpupools catalog --cloud {cloud}`"
    return None, [Problem(where, f"unknown {cloud} GPU {KIND[cloud]} {pool.instance_type!r}; {hint}")]


def hardware_of(instance: InstanceType) -> Hardware:
    assert instance.gpu is not None
    return Hardware(instance.name, instance.gpu, instance.gpus, instance.price, instance.price_read, instance.accelerator)


def resolve_listed(cloud: str, pool: Pool, catalog: Catalog, path: str) -> tuple[Hardware | None, list[Problem]]:
    """Clouds whose instance types carry their GPUs: the catalog line is the whole answer."""
    instance, problems = lookup_instance(cloud, pool, catalog, path)
    return (hardware_of(instance) if instance else None), problems


def reject_fields(obj, path: str, cloud: str, fields: dict[str, tuple[str, str]]) -> list[Problem]:
    """Fields that only another cloud understands are mistakes, not silently ignored settings."""
    problems = []
    for attr, (alias, owner) in fields.items():
        value = getattr(obj, attr)
        if value is not None:
            problems.append(Problem(f"{path}.{alias}", f"{value!r} is not used on {cloud}; {alias} applies to {owner} only"))
    return problems


# Cluster fields that belong to one cloud each.
CLUSTER_FIELDS = {"resource_group": ("resourceGroup", "azure"), "location": ("location", "gcp"), "subnet_ids": ("subnetIds", "aws")}


def foreign_cluster_fields(cluster, cloud: str) -> list[Problem]:
    return reject_fields(cluster, "cluster", cloud, {k: v for k, v in CLUSTER_FIELDS.items() if v[1] != cloud})
