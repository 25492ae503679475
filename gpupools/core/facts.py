"""Cloud facts the plan relies on, per region and zone, read from the generated facts_<cloud>.yaml files.

Each file names its upstream source and when it was taken; tools/refresh_cloud_facts.py regenerates them and
docs/cloud-facts.md says how. A region the source does not cover is not judged (None), so a stale file never refuses
a place it simply does not know.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources

from gpupools.core import packaged


def _read(cloud: str) -> dict:
    return packaged.read(f"facts_{cloud}.yaml")


def _shipped(cloud: str) -> bool:
    return resources.files("gpupools.core").joinpath(f"facts_{cloud}.yaml").is_file()


@dataclass(frozen=True)
class GcoreRegion:
    """A region as Gcore's API lists it (GET /cloud/v1/regions, gcore 0.59.0 types/cloud/region.py Region): `id`,
    `display_name`, `state`, `has_k8s` (managed Kubernetes), `has_ai_gpu` (GPU)."""

    id: int
    name: str
    state: str
    kubernetes: bool | None  # None: the listing does not say
    gpu: bool | None


@dataclass(frozen=True)
class GcoreRegions:
    """The regions one listing returned, and where and when it was read (the file's `source`, in words)."""

    regions: dict[int, GcoreRegion]
    source: str


@dataclass(frozen=True)
class N1Shape:
    """The largest N1 machine (vCPUs, memory) Compute Engine attaches a given number of GPUs to."""

    vcpus: int
    memory_gb: float


class CloudFacts:
    """The facts of each cloud, each file read the first time a check asks for it (a stack needs only its cloud's)."""

    @cached_property
    def _aws(self) -> dict:
        return _read("aws")

    @cached_property
    def _azure(self) -> dict:
        return _read("azure")

    @cached_property
    def _gcp(self) -> dict:
        return _read("gcp")

    @cached_property
    def gcore_regions(self) -> GcoreRegions | None:
        """Gcore's regions from facts_gcore.yaml, or None where no such file is installed: the list comes only from
        Gcore's authenticated API (tools/refresh_cloud_facts.py gcore), so gpupools ships none of its own."""
        if not _shipped("gcore"):
            return None
        section = _read("gcore")["regions"]
        return gcore_regions(section)

    @cached_property
    def aws_regions(self) -> tuple[str, ...]:
        return tuple(self._aws["regions"]["names"])

    @cached_property
    def aws_offerings(self) -> dict[str, dict[str, tuple[str, ...]]]:
        """Instance type -> region -> availability-zone IDs."""
        return {t: {r: tuple(z) for r, z in regions.items()} for t, regions in self._aws["offerings"]["types"].items()}

    @cached_property
    def aws_covered_regions(self) -> frozenset[str]:
        return frozenset(r for regions in self.aws_offerings.values() for r in regions)

    @cached_property
    def azure_regions(self) -> tuple[str, ...]:
        return tuple(self._azure["regions"]["names"])

    @cached_property
    def azure_offerings(self) -> dict[str, tuple[str, ...]]:
        """VM size -> regions."""
        return {t: tuple(r) for t, r in self._azure["offerings"].items()}

    @cached_property
    def azure_zones(self) -> dict[str, dict[str, tuple[str, ...]]]:
        """VM size -> region -> zones, only where a Resource SKUs snapshot lists them."""
        return {t: {r: tuple(z) for r, z in regions.items()} for t, regions in self._azure["zones"]["types"].items()}

    @cached_property
    def gke_partitions(self) -> dict[str, dict[str, int]]:
        """Accelerator -> partition size -> partitions per GPU."""
        return {a: dict(sizes) for a, sizes in self._gcp["gkePartitionSizes"]["accelerators"].items()}

    @cached_property
    def n1_machines(self) -> dict[str, N1Shape]:
        return {t: _shape(s) for t, s in self._gcp["n1Machines"]["types"].items()}

    @cached_property
    def n1_limits(self) -> dict[str, dict[int, N1Shape]]:
        """Accelerator -> GPU count -> the largest N1 machine allowed."""
        return {a: {int(n): _shape(s) for n, s in counts.items()} for a, counts in self._gcp["n1GpuLimits"]["accelerators"].items()}

    def aws_regions_offering(self, instance_type: str, region: str) -> tuple[str, ...] | None:
        """Zone IDs of `region` that offer the type: () if none, None if the source does not cover the region."""
        if region not in self.aws_covered_regions:
            return None
        return self.aws_offerings.get(instance_type, {}).get(region, ())

    def azure_offered_in(self, size: str, region: str) -> bool | None:
        if region not in self.azure_regions:
            return None
        return region in self.azure_offerings.get(size, ())


def gcore_regions(section: dict) -> GcoreRegions:
    """facts_gcore.yaml's `regions` section, as tools/refresh_cloud_facts.py gcore writes it."""
    source = section["source"]
    words = f"facts_gcore.yaml, Gcore's {source['api']} of {source['read']}"
    regions = {int(i): GcoreRegion(int(i), str(r["name"]), str(r["state"]), r.get("managedKubernetes"), r.get("gpu"))
               for i, r in (section.get("ids") or {}).items()}
    return GcoreRegions(regions, words)


def _shape(d: dict) -> N1Shape:
    return N1Shape(int(d["vcpus"]), float(d["memoryGb"]))


@lru_cache(maxsize=1)
def load_facts() -> CloudFacts:
    return CloudFacts()
