"""GKE: GPUDirect (TCPX, TCPXO, RDMA): the extra VPCs and subnets, compact placement, the pods' multi-network view and
the receive-data-path manager beside them.
"""

from __future__ import annotations


import ipaddress
import json

from gpupools.core.catalog import load_catalog
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.core.pools import PoolPlan
from gpupools.clouds.gcp.capacity import compact_placement, uses_compute_class
from gpupools.clouds.gcp.provider import AUTOPILOT
from gpupools.clouds.gcp.upgrades import upgrade_settings


# --------------------------------------------------------------------------------------------------------------------
# The fabric: GPUDirect NICs on extra VPC networks, the Kubernetes networks pods reach them through, placement

FABRIC_RESOURCE = None  # GPUDirect NICs reach pods through GKE multi-networking (pod annotations), not a device plugin resource
FABRIC_NAME = "GPUDirect"
# Coarse to fine: GKE's topology node labels, as Google's own Kueue Topology for A3 lists them
# (docs.cloud.google.com/ai-hypercomputer/docs/nccl/test-gke-custom-a3-mega-high, Topology `gke-default`).
TOPOLOGY_LEVELS = (("block", "cloud.google.com/gce-topology-block"), ("subblock", "cloud.google.com/gce-topology-subblock"),
                   ("host", "cloud.google.com/gce-topology-host"))
# Compact placement packs one zone's VMs; GKE takes it only on a node pool in a single zone.
FABRIC_ZONES = "one"


def fabric_placement(cluster_name: str, pool: Pool) -> tuple[str, str | None, bool]:
    """How a fabric pool's nodes are kept close: GKE's compact placement policy where GKE takes it (`compact_placement`)."""
    _, words, close = compact_placement(pool)
    return words, None, close


# Each GPU network's MTU: 8244 on A3 High and Mega (cluster-toolkit v1.95.0 examples/gke-a3-highgpu/gke-a3-highgpu.yaml
# line 112 and examples/gke-a3-megagpu/gke-a3-megagpu.yaml line 106, `mtu: 8244`), 8896 on A3 Ultra's gVNIC and RoCE
# networks (examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml takes the default of modules/network/vpc/variables.tf lines
# 79-83 and modules/network/gpu-rdma-vpc/variables.tf lines 38-42, 8896). The VPC default (1460) splits every GPU
# transfer into more packets.
GPU_NETWORK_MTU = {"tcpx": 8244, "tcpxo": 8244, "rdma": 8896}
# Extra NICs' subnets come from 172.16.0.0/12, a /24 each, apart from the cluster's own network: a VM's NICs must not
# share address ranges. Every node takes one address of each of its pool's GPU subnets (one NIC each; a Device network
# gives the pod the node's NIC and its one address: kubernetes/cloud-provider-gcp @ 4e24531
# pkg/controller/nodeipam/ipam/multinetwork_cloud_cidr_allocator.go lines 97-105, a /32 per node), and Compute Engine
# reserves four addresses of every subnet's primary range (VPC docs, "Reserved IP addresses in IPv4 subnets").
FABRIC_RANGE = ipaddress.ip_network("172.16.0.0/12")
SUBNETS_PER_POOL = 16
SUBNET_PREFIX = 24
SUBNET_NODES = 2 ** (32 - SUBNET_PREFIX) - 4
# Kubernetes device modes of a GKENetworkParamSet (cluster-toolkit v1.95.0 modules/scheduler/gke-cluster/main.tf line
# 663: RDMA NICs "RDMA", gVNIC ones "NetDevice").
NET_DEVICE, RDMA_DEVICE = "NetDevice", "RDMA"


def gpu_network_names(pool: str, gpudirect: str, networks: int) -> list[tuple[str, str, str | None]]:
    """(Kubernetes Network name, device mode, the pod's interface or None) per GPU subnet, in `fabric_networks` order.

    The names are the blueprints' with the pool in front (Network objects are cluster-wide, and every fabric pool has
    networks of its own): A3 High and Mega `vpc1`..`vpc8` (cluster-toolkit v1.95.0 examples/gke-a3-megagpu/
    gke-a3-megagpu.yaml lines 120-122, k8s_network_names gvnic_prefix `vpc`, start 1), A3 Ultra `gvnic-1` and
    `rdma-0`..`rdma-7` (modules/scheduler/gke-cluster/variables.tf lines 552-570, the defaults). Pods attach eth1..ethN
    to TCPX and TCPXO networks (container-engine-accelerators @ 204a57c gpudirect-tcpx/nccl-test-latest.yaml lines
    39-47), and eth2..eth9 to the RDMA networks, leaving the gVNIC network to the node (cluster-toolkit v1.95.0
    examples/gke-a3-ultragpu/nccl-jobset-example.yaml lines 39-49)."""
    if gpudirect == "rdma":
        return [(f"{pool}-gvnic-1", NET_DEVICE, None)] + [(f"{pool}-rdma-{i}", RDMA_DEVICE, f"eth{i + 2}") for i in range(networks - 1)]
    return [(f"{pool}-vpc{i + 1}", NET_DEVICE, f"eth{i + 1}") for i in range(networks)]


def fabric_networks(cluster_name: str, pool: str, pool_index: int, gpudirect: str, networks: int, region: str) -> list[dict]:
    """The VPC networks (each with its subnets) a fabric pool's extra NICs attach to, as Google's blueprints build them.

    TCPX (A3 High, 4 NICs) and TCPXO (A3 Mega, 8 NICs): one VPC with one subnet per NIC (GKE "Maximize GPU network
    bandwidth"; GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpx/nccl-test-latest.yaml names eth1..eth4
    on vpc1..vpc4). RDMA (A3 Ultra): one more gVNIC VPC, and one VPC with the zone's RoCE network profile holding 8
    subnets, one per CX-7 NIC (GoogleCloudPlatform/cluster-toolkit examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml:
    `network_profile: .../networkProfiles/<zone>-vpc-roce`, `subnetworks_template.count: 8`). `rdma_profile` marks
    the network that needs the profile; the component fills in the project. Each subnet carries the Kubernetes Network
    that names it for pods (`k8s`, `device_mode`, `interface`: `gpu_network_names`).
    """
    def cidr(k: int) -> str:
        return f"{FABRIC_RANGE.network_address + (pool_index * SUBNETS_PER_POOL + k) * 256}/{SUBNET_PREFIX}"

    base = f"{cluster_name}-{pool}"
    mtu = GPU_NETWORK_MTU[gpudirect]
    names = iter(gpu_network_names(pool, gpudirect, networks))

    def subnet(name: str, k: int) -> dict:
        k8s, mode, interface = next(names)
        return {"name": name, "cidr": cidr(k), "region": region, "k8s": k8s, "device_mode": mode, "interface": interface}

    if gpudirect == "rdma":
        gvnic = {"name": f"{base}-gvnic", "rdma_profile": False, "mtu": mtu, "subnets": [subnet(f"{base}-gvnic", 0)]}
        roce = {"name": f"{base}-rdma", "rdma_profile": True, "mtu": mtu,
                "subnets": [subnet(f"{base}-rdma-{i}", 1 + i) for i in range(networks - 1)]}
        return [gvnic, roce]
    return [{"name": f"{base}-net-{i + 1}", "rdma_profile": False, "mtu": mtu, "subnets": [subnet(f"{base}-net-{i + 1}", i)]}
            for i in range(networks)]


def fabric_pool_problems(pool: Pool, path: str) -> list[Problem]:
    """A fabric pool's nodes must fit its /24 GPU subnets (see SUBNET_NODES)."""
    if pool.max_nodes <= SUBNET_NODES:
        return []
    return [Problem(f"{path}.maxNodes", f"{pool.max_nodes}: every node of a GPUDirect pool takes an address in each of its /{SUBNET_PREFIX} "
                                        f"GPU subnets, which hold {SUBNET_NODES} (Compute Engine reserves 4 of each range); give it at "
                                        f"most {SUBNET_NODES} nodes, or split it into pools")]


def fabric_node_pool_args(plan: PoolPlan, args: dict, attachments: list[dict]) -> dict:
    """A fabric pool: a NIC on each extra network (NodeNetworkConfig.additionalNodeNetworkConfigs, "Each node network
    corresponds to an additional interface"), gVNIC, and compact placement where GKE takes it (`compact_placement`;
    PlacementPolicy type COMPACT: the pool's VMs close together in its one zone)."""
    node_config = {**args["node_config"], "gvnic": {"enabled": True}}
    out = {**args, "node_config": node_config, "network_config": {"additional_node_network_configs": list(attachments)}}
    if compact_placement(plan.pool)[0]:
        out["placement_policy"] = {"type": "COMPACT"}
        # No blue-green beside compact placement (`compact_upgrades`): the fabric pool's own upgrade settings.
        settings = upgrade_settings(plan.pool, fabric=True)
        if settings is None:
            out.pop("upgrade_settings", None)
        else:
            out["upgrade_settings"] = settings
    return out


def fabric_cluster_args(args: dict) -> dict:
    """Extra node networks need GKE multi-networking, which needs Dataplane V2 (GKE "Maximize GPU network bandwidth")."""
    return {**args, "enable_multi_networking": True, "datapath_provider": "ADVANCED_DATAPATH"}


def fabric_readiness(cluster: Cluster, plan: PoolPlan) -> tuple[bool, tuple[str, ...]]:
    """(whether pods can use the pool's GPUDirect NICs once the stack is up, what the pool still lacks).

    The NCCL plugin installers copy the plugin into /home/kubernetes/bin/nvidia/lib64 and the jobs mount it from there
    (container-engine-accelerators @ 204a57c gpudirect-tcpx/nccl-tcpx-installer.yaml, @ a32cd51
    gpudirect-tcpxo/nccl-tcpxo-installer.yaml, cluster-toolkit v1.95.0 examples/gke-a3-ultragpu/nccl-installer.yaml.tftpl):
    where GKE's own driver installer keeps the driver on Container-Optimized OS. Pools whose driver the GPU Operator
    installs run Ubuntu with the driver elsewhere."""
    gaps: tuple[str, ...] = ()
    configured = plan.mechanism.installer == "cloud"
    if not configured:
        gaps += (f"Google's NCCL plugins and their jobs use GKE's own GPU driver on COS (/home/kubernetes/bin/nvidia); the pool's driver "
                 f"comes from {plan.mechanism.installer} on Ubuntu (set gpuSoftware.installer: cloud)",)
    if not cluster.create:
        gaps += ("the existing cluster must have multi-networking and Dataplane V2, which gpupools does not change",)
    return configured, gaps


# What a multi-node pod on a GPUDirect node carries beside its GPUs, per flavour, after Google's own examples.
GKE_LIBRARIES = "/home/kubernetes/bin/nvidia/lib64"  # the driver's libraries, and the NCCL plugin the installers copy beside them
TCPX_RXDM_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12"  # cluster-toolkit v1.95.0 gpu_direct.tf line 34, for plugin v3.1.9
# The TCPXO daemon goes with the plugin version (gpudirect-tcpxo/README.md @ 992db81 lines 57-66: plugin v1.0.15 with
# tcpgpudmarxd-dev v1.0.21, as nccl-test-latest.yaml there pairs them).
TCPXO_RXDM_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"
# Google's TCPX settings for a3-highgpu-8g (container-engine-accelerators @ 204a57c gpudirect-tcpx/nccl-config.yaml,
# run-nccl.sh lines 18-63), and the receive-datapath daemon's socket directory where the trainer mounts it (/tmp).
TCPX_ENV = {
    "NCCL_SOCKET_IFNAME": "eth0", "NCCL_CROSS_NIC": "0", "NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple",
    "NCCL_NSOCKS_PERTHREAD": "4", "NCCL_SOCKET_NTHREADS": "1", "NCCL_MAX_NCHANNELS": "8", "NCCL_MIN_NCHANNELS": "8",
    "NCCL_DYNAMIC_CHUNK_SIZE": "524288", "NCCL_P2P_NET_CHUNKSIZE": "524288", "NCCL_P2P_PCI_CHUNKSIZE": "524288",
    "NCCL_P2P_NVL_CHUNKSIZE": "1048576", "NCCL_BUFFSIZE": "4194304", "NCCL_NET_GDR_LEVEL": "PIX", "NCCL_P2P_PXN_LEVEL": "0",
    "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": "eth1,eth2,eth3,eth4", "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
    "NCCL_GPUDIRECTTCPX_TX_BINDINGS": "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177",
    "NCCL_GPUDIRECTTCPX_RX_BINDINGS": "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191",
    "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "500000", "NCCL_GPUDIRECTTCPX_FORCE_ACK": "0",
    "NCCL_GPUDIRECTTCPX_TX_COMPLETION_NANOSLEEP": "1000", "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX": "/tmp",
}
GPU_DEVICES = [f"/dev/nvidia{i}" for i in range(8)] + ["/dev/nvidiactl", "/dev/nvidia-uvm"]


def _device_annotation(container: str, paths: list[str]) -> dict[str, str]:
    """The NRI device injector's annotation: these host devices go into that container, which asks for no GPU itself
    (container-engine-accelerators nri_device_injector/README.md, `devices.gke.io/container.$CONTAINER_NAME`)."""
    return {f"devices.gke.io/container.{container}": "".join(f"- path: {p}\n" for p in paths)}


def _host(name: str, path: str) -> dict:
    return {"name": name, "hostPath": {"path": path}}


def fabric_pod(count: int, pool: str = "", kind: str = "", networks: int = 0) -> dict:
    """What a pod of a multi-node job on a GPUDirect node carries beside its GPUs: its NICs through GKE
    multi-networking (`networking.gke.io/default-interface` and `networking.gke.io/interfaces`, naming the pool's
    Network objects, `gpu_network_names`), the NCCL plugin from the host, and for TCPX and TCPXO the receive-datapath
    daemon beside it. `networks`: the pool's GPU subnets (the catalog's extraNetworks).

    The daemon runs as a native sidecar (an init container with restartPolicy Always) so the Job completes when the
    trainer does (container-engine-accelerators @ 992db81 gpudirect-tcpxo/best-practice.md lines 7-59, "Automatic
    Sidecar Termination"); the NRI device injector hands it the GPU devices its annotation lists. TCPX: the
    tcpx-daemon of gpudirect-tcpx/nccl-test-latest.yaml @ 204a57c (lines 61-87; its socket directory shared with the
    trainer as cluster-toolkit v1.95.0 gpu-direct-workload/scripts/enable-tcpx-in-workload.py does), IPC_LOCK (line
    106) and the NCCL settings of TCPX_ENV. TCPXO: the tcpxo-daemon of gpudirect-tcpxo/nccl-test-latest.yaml @ 992db81
    (lines 82-161), with the startup probe of best-practice.md (lines 89-124), and the plugin's own settings sourced
    from nccl-env-profile.sh (gpudirect-tcpxo/README.md lines 24-34). RDMA: gIB from /home/kubernetes/bin/gib, its
    settings sourced from set_nccl_env.sh (gpudirect-rdma/nccl-test.yaml @ 992db81 lines 54-88; NCCL_NET=gIB as
    cluster-toolkit v1.95.0 examples/gke-a3-ultragpu/nccl-jobset-example.yaml line 183 sets it)."""
    gpudirect = kind.removeprefix("gpudirect-")
    env = {"NCCL_DEBUG": "INFO", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}
    out: dict = {"limits": {}, "env": env, "capabilities": [], "annotations": {}, "volumes": [], "mounts": [], "sidecars": [],
                 "prelude": None}
    if gpudirect not in GPU_NETWORK_MTU or not networks:
        return out
    interfaces = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": interface, "network": name} for name, _, interface in gpu_network_names(pool, gpudirect, networks) if interface]
    out["annotations"] = {"networking.gke.io/default-interface": "eth0", "networking.gke.io/interfaces": json.dumps(interfaces)}
    if gpudirect == "tcpx":
        out["annotations"].update(_device_annotation("tcpx-daemon", GPU_DEVICES))
        # The daemon's socket directory, an emptyDir of the pod's own as cluster-toolkit's enable-tcpx-in-workload.py
        # makes it (Google's test pods share the host's /run/tcpx), mounted where Google's trainers see it: /tmp.
        out["volumes"] = [_host("libraries", GKE_LIBRARIES), {"name": "tcpx-socket", "emptyDir": {}}, _host("sys", "/sys"),
                          _host("proc", "/proc/sys")]
        out["mounts"] = [{"name": "tcpx-socket", "mountPath": "/tmp"}, {"name": "libraries", "mountPath": "/usr/local/nvidia/lib64"}]
        out["sidecars"] = [{
            "name": "tcpx-daemon", "image": TCPX_RXDM_IMAGE, "imagePullPolicy": "Always", "restartPolicy": "Always",
            "command": ["/tcpgpudmarxd/build/app/tcpgpudmarxd", "--gpu_nic_preset", "a3vm", "--gpu_shmem_type", "fd", "--uds_path", "/run/tcpx",
                        "--setup_param", r'\"--verbose 128 2 0 \"'],  # as Google's manifests pass it, escaped quotes included
            "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
            "volumeMounts": [{"name": "libraries", "mountPath": "/usr/local/nvidia/lib64"}, {"name": "tcpx-socket", "mountPath": "/run/tcpx"},
                             {"name": "sys", "mountPath": "/hostsysfs"}, {"name": "proc", "mountPath": "/hostprocsysfs"}],
            "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}]}]
        out["capabilities"] = ["IPC_LOCK"]
        env.update(TCPX_ENV)
    elif gpudirect == "tcpxo":
        out["annotations"].update(_device_annotation("tcpxo-daemon", GPU_DEVICES + ["/dev/dmabuf_import_helper"]))
        out["volumes"] = [_host("nvidia", GKE_LIBRARIES), _host("sys", "/sys"), _host("proc-sys", "/proc/sys"),
                          _host("aperture-devices", "/dev/aperture_devices")]
        out["mounts"] = [{"name": "nvidia", "mountPath": "/usr/local/nvidia/lib64"}, {"name": "aperture-devices", "mountPath": "/dev/aperture_devices"}]
        out["sidecars"] = [{
            "name": "tcpxo-daemon", "image": TCPXO_RXDM_IMAGE, "imagePullPolicy": "Always", "restartPolicy": "Always",
            "command": ["/bin/sh", "-c"],
            "args": ["set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n/fts/entrypoint_rxdm_container.sh --num_hops=2\n"],
            "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}},
            "volumeMounts": [{"name": "nvidia", "mountPath": "/usr/local/nvidia/lib64"}, {"name": "sys", "mountPath": "/hostsysfs"},
                             {"name": "proc-sys", "mountPath": "/hostprocsysfs"}],
            "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"},
                    # The daemon writes this file once initialized; the startup probe fails a pod on a node where it never does.
                    {"name": "HEALTH_CHECK_LOG_FILE", "value": "/run/health-check"}],
            "startupProbe": {"initialDelaySeconds": 1, "periodSeconds": 5, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 6,
                             "exec": {"command": ["cat", "/run/health-check"]}}}]
        env.update({"NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": "/dev/aperture_devices", "NCCL_LIB_DIR": "/usr/local/nvidia/lib64"})
        out["prelude"] = "source ${NCCL_LIB_DIR}/nccl-env-profile.sh"
    else:
        out["volumes"] = [_host("library-dir-host", "/home/kubernetes/bin/nvidia"), _host("gib", "/home/kubernetes/bin/gib")]
        out["mounts"] = [{"name": "library-dir-host", "mountPath": "/usr/local/nvidia"}, {"name": "gib", "mountPath": "/usr/local/gib"}]
        env["NCCL_NET"] = "gIB"
        out["prelude"] = "source /usr/local/gib/scripts/set_nccl_env.sh"
    return out
# Fabric: GKE places fabric pools by compact placement policy; pods reach the GPUDirect NICs through GKE Network objects.
FABRIC_IN_WORDS = "GPUDirect networking"  # as policy messages name it
FABRIC_PLACEMENT_GROUP = False
FABRIC_DEVICE_SOFTWARE = "gke-networks"


def fabric_resource_count(fabric) -> int:
    """GPUDirect NICs reach pods through multi-networking annotations, not a device plugin resource."""
    return 1 if FABRIC_RESOURCE else 0


def fabric_zone_of_cluster(pool, cluster) -> str | None:
    """A zonal cluster's zone, or the only zone of a regional cluster's region that offers the pool's GPU."""
    if cluster is None or not cluster.location:
        return None
    if cluster.location.count("-") >= 2:
        return cluster.location
    instance = load_catalog().instance("gcp", pool.instance_type)
    offered = load_catalog().gcp_zones_in(instance.accelerator, cluster.location) if instance and instance.accelerator else None
    return offered[0] if offered and len(offered) == 1 else None


# The fabric is offered wherever the catalog records one (None: no reason to leave it off).
FABRIC_OFFERED: str | None = None
# What the policy pack advises for a pool built for multi-node jobs that has no fabric.
MULTI_NODE_ADVICE = "give it one zone and fabric: on"


def fabric_refusal(pool: Pool, cluster: Cluster | None) -> str | None:
    """GPUDirect needs the pool's extra NICs and networks (NodeNetworkConfig) and compact placement, which gpupools sets
    on node pools; a ComputeClass's auto-created pools get neither from it, and an Autopilot cluster has no node pool of
    gpupools' own."""
    if cluster is not None and cluster.managed_mode == AUTOPILOT:
        return ("GKE Autopilot makes its GPU nodes itself, and gpupools attaches GPUDirect networks to node pools it creates; use "
                "cluster.mode: standard for multi-node training")
    if uses_compute_class(pool):
        return "a compute-class pool gets no GPUDirect networks: gpupools attaches them to node pools only (make the pool a node-pool)"
    return None
