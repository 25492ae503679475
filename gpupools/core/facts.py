"""Cloud facts the plan relies on, per region and zone, read from the generated facts_<cloud>.yaml files.

Each file names its upstream source and when it was taken; tools/refresh_cloud_facts.py regenerates them and
docs/cloud-facts.md says how. A region the source does not cover is not judged (None), so a stale file never refuses
a place it simply does not know.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml


def _read(cloud: str) -> dict:
    text = resources.files("gpupools.core").joinpath(f"facts_{cloud}.yaml").read_text()
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@dataclass(frozen=True)
class N1Shape:
    vcpus: int
    memory_gb: float


@dataclass(frozen=True)
class CloudFacts:
    aws_regions: tuple[str, ...]
    aws_offerings: dict[str, dict[str, tuple[str, ...]]]  # instance type -> region -> availability-zone IDs
    azure_regions: tuple[str, ...]
    azure_offerings: dict[str, tuple[str, ...]]  # VM size -> regions
    azure_zones: dict[str, dict[str, tuple[str, ...]]]  # VM size -> region -> zones (only where a source lists them)
    gke_partitions: dict[str, dict[str, int]]  # accelerator -> partition size -> partitions per GPU
    n1_machines: dict[str, N1Shape]
    n1_limits: dict[str, dict[int, N1Shape]]  # accelerator -> GPU count -> the largest machine allowed

    def aws_covered_regions(self) -> frozenset[str]:
        return frozenset(r for regions in self.aws_offerings.values() for r in regions)

    def aws_regions_offering(self, instance_type: str, region: str) -> tuple[str, ...] | None:
        """Zone IDs of `region` that offer the type: () if none, None if the source does not cover the region."""
        if region not in self.aws_covered_regions():
            return None
        return self.aws_offerings.get(instance_type, {}).get(region, ())

    def azure_offered_in(self, size: str, region: str) -> bool | None:
        if region not in self.azure_regions:
            return None
        return region in self.azure_offerings.get(size, ())


def _shape(d: dict) -> N1Shape:
    return N1Shape(int(d["vcpus"]), float(d["memoryGb"]))


@lru_cache(maxsize=1)
def load_facts() -> CloudFacts:
    aws, azure, gcp = _read("aws"), _read("azure"), _read("gcp")
    return CloudFacts(
        aws_regions=tuple(aws["regions"]["names"]),
        aws_offerings={t: {r: tuple(z) for r, z in regions.items()} for t, regions in aws["offerings"]["types"].items()},
        azure_regions=tuple(azure["regions"]["names"]),
        azure_offerings={t: tuple(r) for t, r in azure["offerings"].items()},
        azure_zones={t: {r: tuple(z) for r, z in regions.items()} for t, regions in azure["zones"]["types"].items()},
        gke_partitions={a: dict(sizes) for a, sizes in gcp["gkePartitionSizes"]["accelerators"].items()},
        n1_machines={t: _shape(s) for t, s in gcp["n1Machines"]["types"].items()},
        n1_limits={a: {int(n): _shape(s) for n, s in counts.items()} for a, counts in gcp["n1GpuLimits"]["accelerators"].items()},
    )


def aws_zone_region(zone_id: str) -> str:
    """`use1-az4` -> `use1`: the region part of an availability-zone ID."""
    return re.sub(r"-az[0-9]+$", "", zone_id)
