"""The GPU catalog: what each instance type carries and costs, read from the one data file."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from gpupools.core import packaged
from gpupools.stack.errors import close_matches

CLOUDS = ("aws", "azure", "gcp", "gcore")


@dataclass(frozen=True)
class GpuModel:
    """One GPU model: its memory, architecture, the names NVML reports for it and its MIG profiles."""

    name: str
    memory_gb: int
    architecture: str
    device_names: tuple[str, ...]
    mig_profiles: dict[str, int] = field(default_factory=dict)
    usable_memory: int | None = None  # MiB, where a source reports it (catalog.yaml usableMemoryMiB)
    memory_source: str | None = None
    min_driver: int | None = None  # the oldest NVIDIA driver branch that knows the GPU (catalog.yaml minDriver)
    mig_unavailable: str | None = None  # why MIG cannot be used although NVIDIA lists profiles (catalog.yaml migUnavailable)
    # GPUs that share one NVLink domain across nodes (catalog.yaml nvlinkDomain: 72 on an NVL72 rack); None: NVLink ends
    # at the node. Such GPUs talk across nodes through IMEX, which NVIDIA's DRA driver sets up per ComputeDomain.
    nvlink_domain: int | None = None

    @property
    def open_kernel_modules_only(self) -> bool:
        """Blackwell and later run on NVIDIA's open GPU kernel modules only (catalog.yaml, the comment above B200)."""
        return self.architecture.startswith("Blackwell")

    @property
    def supports_mig(self) -> bool:
        return bool(self.mig_profiles)

    @property
    def memory_mib(self) -> int:
        """What one GPU offers: the reported usable memory, else the marketing size in MiB."""
        return self.usable_memory or self.memory_gb * 1024


@dataclass(frozen=True)
class InstanceType:
    """One instance type a cloud sells with GPUs: how many of which GPU, and its on-demand list price."""

    cloud: str
    name: str
    gpu: GpuModel | None  # None: GPUs are attached separately (GCP N1)
    gpus: int
    price: float | None  # USD/hour, on-demand list price of the whole node; None where the cloud publishes none
    price_read: str
    accelerator: str | None = None  # GKE accelerator type implied by the machine type
    vcpus: int | None = None
    memory_gib: int | None = None
    price_region: str | None = None  # where the price was read, when not the cloud's catalog-wide price region
    source: str | None = None  # the key of catalog.yaml `rowSources` the row comes from
    arch: str = "x86_64"  # the host's CPU architecture (catalog.yaml arch): arm64 on Grace hosts

    @property
    def rack_scale(self) -> bool:
        """A node of a multi-node NVLink rack (GB200/GB300 NVL72): its GPUs need a ComputeDomain to talk across nodes."""
        return self.gpu is not None and self.gpu.nvlink_domain is not None

    @property
    def family(self) -> str:
        # EC2 names are family.size (p5.48xlarge); Compute Engine and Azure end in their size (a3-highgpu-8g).
        return self.name.split(".")[0] if "." in self.name else self.name.rsplit("-", 1)[0]


@dataclass(frozen=True)
class GcpAccelerator:
    """A GPU Compute Engine attaches to N1 machines: the counts it allows and its list price per GPU."""

    name: str
    gpu: GpuModel
    counts: tuple[int, ...]
    price_per_gpu: float
    price_read: str


@dataclass(frozen=True)
class Hardware:
    """What one node of a pool really has, once the instance type (and GCP N1 accelerator) is resolved."""

    instance_type: str
    gpu: GpuModel
    gpus_per_node: int
    price_per_node: float | None  # None: the cloud publishes no list price for the type
    price_read: str
    accelerator: str | None = None

    @property
    def price_per_gpu(self) -> float | None:
        return None if self.price_per_node is None else self.price_per_node / self.gpus_per_node


@dataclass(frozen=True)
class Catalog:
    """catalog.yaml, read: GPU models, instance types per cloud, GCP accelerators, fabrics and where each row comes from."""

    gpus: dict[str, GpuModel]
    instances: dict[str, dict[str, InstanceType]]
    gcp_accelerators: dict[str, GcpAccelerator]
    price_region: dict[str, str]
    gcp_zones: dict[str, tuple[str, ...]] = field(default_factory=dict)  # accelerator type -> zones offering it
    fabric: dict[str, dict[str, "Fabric"]] = field(default_factory=dict)  # cloud -> instance type -> its fabric and local NVMe
    refused: dict[str, dict[str, str]] = field(default_factory=dict)  # cloud -> instance type the cloud sells -> why gpupools refuses it
    nccl_images: dict[str, "NcclTestImage"] = field(default_factory=dict)  # fabric kind -> the NCCL test's image
    nccl_results: dict[str, dict[str, "NcclResult"]] = field(default_factory=dict)  # cloud -> instance type -> published result
    row_sources: dict[str, "RowSource"] = field(default_factory=dict)  # source key -> its citation

    def attachable(self, cloud: str) -> dict[str, "GcpAccelerator"]:
        """GPUs a cloud sells as accelerators attached to general-purpose machines (GCP's N1), by accelerator type; empty
        for clouds that sell GPUs only inside their instance types."""
        return self.attached_accelerators.get(cloud, {})

    @property
    def attached_accelerators(self) -> dict[str, dict[str, "GcpAccelerator"]]:
        return {"gcp": self.gcp_accelerators}

    def fabric_of(self, cloud: str, name: str) -> "Fabric":
        """An instance type's fabric; one the catalog says nothing of has none and no local NVMe."""
        return self.fabric.get(cloud, {}).get(name) or _NO_FABRIC

    def gcp_zones_in(self, accelerator: str, region: str) -> list[str] | None:
        """Zones of `region` that offer the accelerator; None when the catalog knows nothing of that region."""
        by_region = self._gcp_zones_by_region
        if region not in by_region:
            return None
        return list(by_region[region].get(accelerator, ()))

    @cached_property
    def _gcp_zones_by_region(self) -> dict[str, dict[str, tuple[str, ...]]]:
        """Region -> accelerator -> its zones there, in `gcp_zones`' order; every region of a zone the catalog lists is
        a key. Built once: every check of a GKE pool asks, and the catalog does not change."""
        out: dict[str, dict[str, tuple[str, ...]]] = {}
        for accelerator, zones in self.gcp_zones.items():
            for zone in zones:
                at = out.setdefault(zone_region(zone), {})
                at[accelerator] = (*at.get(accelerator, ()), zone)
        return out

    def instance(self, cloud: str, name: str) -> InstanceType | None:
        return self.instances.get(cloud, {}).get(name)

    def cloud_of(self, name: str) -> str | None:
        for table in (self.instances, self.refused):
            for cloud, types in table.items():
                if name in types:
                    return cloud
        return None

    def refusal(self, cloud: str, name: str) -> str | None:
        """Why gpupools does not build pools of an instance type the cloud sells (catalog.yaml `refused`), or None."""
        return self.refused.get(cloud, {}).get(name)

    def closest(self, cloud: str, name: str, n: int = 3) -> list[str]:
        return close_matches(name, self.instances.get(cloud, {}), n=n, cutoff=0.5)

    def gpu_by_device_name(self, device_name: str) -> GpuModel | None:
        """Map NVML's model string (dcgm-exporter's `modelName`) to a catalog GPU."""
        for model in self.gpus.values():
            if device_name in model.device_names:
                return model
        return None


def _load(text: str) -> Catalog:
    return _build(packaged.parse(text))


def _build(raw: dict) -> Catalog:
    gpus = {
        name: GpuModel(
            name=name,
            memory_gb=g["memoryGb"],
            architecture=g["architecture"],
            device_names=tuple(g["deviceNames"]),
            mig_profiles=dict(g.get("migProfiles") or {}),
            usable_memory=g.get("usableMemoryMiB"),
            memory_source=g.get("memorySource"),
            min_driver=g.get("minDriver"),
            mig_unavailable=g.get("migUnavailable"),
            nvlink_domain=g.get("nvlinkDomain"),
        )
        for name, g in raw["gpus"].items()
    }
    row_sources = {key: RowSource(key, " ".join(str(r["cite"]).split()), bool(r["generated"])) for key, r in (raw.get("rowSources") or {}).items()}
    sources = _row_source_keys(raw.get("rowSources") or {}, raw["instances"])
    instances = {
        cloud: {
            name: InstanceType(
                cloud=cloud,
                name=name,
                gpu=gpus[i["gpu"]] if "gpu" in i else None,
                gpus=i.get("gpus", 0),
                price=float(i["price"]) if i.get("price") is not None else None,
                price_read=str(i["priceRead"]),
                accelerator=i.get("accelerator"),
                vcpus=i.get("vcpus"),
                memory_gib=i.get("memoryGib"),
                price_region=i.get("priceRegion"),
                source=sources.get((cloud, name)),
                arch=i.get("arch", "x86_64"),
            )
            for name, i in types.items()
        }
        for cloud, types in raw["instances"].items()
    }
    accelerators = {
        name: GcpAccelerator(
            name=name,
            gpu=gpus[a["gpu"]],
            counts=tuple(a["counts"]),
            price_per_gpu=float(a["pricePerGpu"]),
            price_read=str(a["priceRead"]),
        )
        for name, a in raw.get("gcpAccelerators", {}).items()
    }
    zones = {name: tuple(z) for name, z in raw.get("gcpZones", {}).items()}
    fabric = {cloud: {name: _fabric(f) for name, f in types.items()} for cloud, types in raw.get("fabric", {}).items()}
    refused = {cloud: {name: " ".join(str(why).split()) for name, why in types.items()} for cloud, types in raw.get("refused", {}).items()}
    nccl = raw.get("ncclTests") or {}
    images = {kind: NcclTestImage(kind, i["image"], i["binary"], tuple(i.get("forwardEnv") or ()), i.get("sshd") == "install", i["source"])
              for kind, i in (nccl.get("images") or {}).items()}
    results = {cloud: {name: NcclResult(cloud, name, float(r["busbw"]), int(r["bytes"]), int(r["nodes"]),
                                        float(r["floor"]) if "floor" in r else None, r["source"]) for name, r in types.items()}
               for cloud, types in (nccl.get("results") or {}).items()}
    return Catalog(gpus=gpus, instances=instances, gcp_accelerators=accelerators, price_region=raw["priceRegion"], gcp_zones=zones,
                   fabric=fabric, refused=refused, nccl_images=images, nccl_results=results, row_sources=row_sources)


@dataclass(frozen=True)
class RowSource:
    """Where catalog rows come from (catalog.yaml `rowSources`): generated data the tests hold them to, or hand-typed."""

    key: str
    cite: str
    generated: bool


def _row_source_keys(raw: dict, instances: dict) -> dict[tuple[str, str], str]:
    """(cloud, instance type) -> source key: named rows first, then a cloud's `all` or `rest`."""
    keys: dict[tuple[str, str], str] = {}
    for key, r in raw.items():
        for cloud, rows in r["rows"].items():
            if isinstance(rows, list):
                keys.update({(cloud, name): key for name in rows})
    for key, r in raw.items():
        for cloud, rows in r["rows"].items():
            if rows in ("all", "rest"):
                keys.update({(cloud, name): key for name in instances.get(cloud, {}) if (cloud, name) not in keys})
    return keys


@dataclass(frozen=True)
class NcclTestImage:
    """A pinned image that runs nccl-tests' all_reduce_perf over MPI on one fabric kind (catalog.yaml ncclTests.images)."""

    fabric: str
    image: str
    binary: str
    forward_env: tuple[str, ...]
    install_sshd: bool
    source: str


@dataclass(frozen=True)
class NcclResult:
    """A cloud's published all_reduce_perf run on one instance type (catalog.yaml ncclTests.results)."""

    cloud: str
    instance_type: str
    busbw: float  # GB/s at `bytes`
    bytes: int
    nodes: int
    floor: float | None
    source: str


@dataclass(frozen=True)
class Fabric:
    """The network between nodes that jobs spanning nodes use, and the node's local NVMe (see catalog.yaml)."""

    efa: int = 0  # aws: EFA interfaces, one per network card
    infiniband: bool = False  # azure: an RDMA-capable ND size
    gpudirect: str | None = None  # gcp: tcpx | tcpxo | rdma
    extra_networks: int = 0  # gcp: VPC networks for the extra NICs
    multi_node: bool = False  # built for jobs that span nodes
    local_nvme_gb: int = 0

    @property
    def kind(self) -> str | None:
        """efa | infiniband | gpudirect-<flavour>, or None without a fabric."""
        if self.efa:
            return "efa"
        if self.infiniband:
            return "infiniband"
        return f"gpudirect-{self.gpudirect}" if self.gpudirect else None


# What `fabric_of` answers for an instance type the catalog says nothing of: one frozen value, asked for by every
# check of every pool.
_NO_FABRIC = Fabric()


def _fabric(raw: dict) -> Fabric:
    return Fabric(efa=int(raw.get("efa", 0)), infiniband=bool(raw.get("infiniband", False)), gpudirect=raw.get("gpudirect"),
                  extra_networks=int(raw.get("extraNetworks", 0)), multi_node=bool(raw.get("multiNode", False)),
                  local_nvme_gb=int(raw.get("localNvmeGb", 0)))


def zone_region(location: str) -> str:
    """GCP: `us-central1-a` is a zone of `us-central1`; a region has one dash."""
    return location.rsplit("-", 1)[0] if location.count("-") >= 2 else location


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    return _build(packaged.read("catalog.yaml"))


def mig_resource_name(profile: str) -> str:
    """The device plugin's mixed-strategy resource name: ``+`` becomes ``.`` (k8s-device-plugin rm.go)."""
    return "nvidia.com/mig-" + profile.replace("+", ".")


def mig_config_name(profile: str) -> str:
    """The mig-parted ``all-<profile>`` config name, with ``+`` spelled ``.`` as upstream does."""
    return "all-" + profile.replace("+", ".")
