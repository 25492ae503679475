"""What GKE's GPUDirect pools need in the cluster before a pod can use their NICs, as Google's blueprints install it.

A node pool with additional node networks has the NICs; a pod reaches them only through GKE multi-networking, i.e. a
`GKENetworkParamSet` and a `Network` (networking.gke.io/v1) per network, which the pod names in its
`networking.gke.io/interfaces` annotation, and NCCL uses them only through Google's NCCL plugin, which a DaemonSet
copies onto each node (TCPX on A3 High, TCPXO on A3 Mega, gIB for RDMA on A3 Ultra). TCPX and TCPXO pods also run a
receive-datapath daemon beside the trainer, which gets the GPU devices from the NRI device injector. Sources:
GoogleCloudPlatform/cluster-toolkit v1.95.0 (modules/scheduler/gke-cluster/templates, modules/compute/gke-node-pool/
gpu_direct.tf, examples/gke-a3-*) and GoogleCloudPlatform/container-engine-accelerators at the commits those pin.

Pure: the GKE component applies these objects, the landing check reads the same ones.
"""

from __future__ import annotations

import json
from typing import Mapping

from gpupools.clouds import gcp
from gpupools.core.catalog import load_catalog, zone_region
from gpupools.core.pools import POOL_LABEL
from gpupools.fabric.nccl import INSTALLER, NEEDS_NRI, NRI_INJECTOR, flavour, node_software  # noqa: F401 (asked here too)
from gpupools.fabric.plan import FabricPlan
from gpupools.stack.config import StackConfig

NETWORK_API = "networking.gke.io/v1"
INTERFACES_ANNOTATION = "networking.gke.io/interfaces"
# What GKE's node IPAM registers on a node for every Network whose GKENetworkParamSet names a VPC and subnet one of the
# node's NICs sits on: `networking.gke.io.networks/<network>.IP`, 1 for a Device network's /32 (kubernetes/
# cloud-provider-gcp @ 4e24531 pkg/controller/nodeipam/ipam/multinetwork_cloud_cidr_allocator.go lines 72-105 match a
# NIC to a Network by VPC and subnet; lines 216-257 allocateIPCapacity and getNodeCapacity).
NETWORK_RESOURCE = "networking.gke.io.networks/{}.IP"
MANAGED = {"app.kubernetes.io/managed-by": "gpupools"}
NAMESPACE = "kube-system"  # where Google's manifests run them, as system-node-critical
PAUSE = "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
# The NRI device injector, at the commit cluster-toolkit v1.95.0 pins for A3 High (modules/compute/gke-node-pool/
# gpu_direct.tf line 31; examples/gke-a3-megagpu/nri-device-injector.yaml line 52 has the same digest).
NRI_IMAGE = "gcr.io/gke-release/nri-device-injector@sha256:6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970"
# The NCCL plugin installers, one per GPUDirect flavour, and the image and version each blueprint pins:
# TCPX: container-engine-accelerators @ 204a57c gpudirect-tcpx/nccl-tcpx-installer.yaml (gpu_direct.tf line 29,
#   "nccl_plugin v3.1.9 for tcpx"; examples/gke-a3-highgpu/gke-a3-highgpu.yaml line 57);
# TCPXO: @ a32cd51 gpudirect-tcpxo/nccl-tcpxo-installer.yaml (gpu_direct.tf line 45; v1.0.15, as
#   examples/gke-a3-megagpu/gke-a3-megagpu.yaml line 55 pins it);
# RDMA: cluster-toolkit v1.95.0 examples/gke-a3-ultragpu/nccl-installer.yaml.tftpl with the blueprint's template
#   variables (gke-a3-ultragpu.yaml lines 264-269: version v1.1.0, 8 accelerators; the image and maxUnavailable are
#   modules/management/kubectl-apply/variables.tf lines 227 and 241).
TCPX_PLUGIN = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9"
TCPXO_PLUGIN = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15"
GIB_PLUGIN = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.0"


def installer_for(cloud: str, instance_type: str | None) -> str | None:
    """The NCCL plugin installer an instance type's GPUDirect NICs need (the catalog's gpudirect); None without."""
    name = load_catalog().fabric_of(cloud, instance_type or "").gpudirect
    return INSTALLER.get(name or "")


def gpu_networks(stack: StackConfig, fabrics: Mapping[str, FabricPlan]) -> dict[str, list[dict]]:
    """Each GPUDirect pool's VPC networks and subnets (`gcp.fabric_networks`), by pool, numbered in the stack's fabric
    order as the component creates them (the number picks the pool's address block)."""
    out: dict[str, list[dict]] = {}
    region = zone_region(stack.cluster.location or "")
    for index, (pool, fabric) in enumerate(fabrics.items()):
        name = flavour(fabric.kind)
        if name is not None:
            out[pool] = gcp.fabric_networks(stack.cluster.name, pool, index, name, fabric.devices, region)
    return out


def node_nics(networks: Mapping[str, list[dict]]) -> dict[str, frozenset[tuple[str, str]]]:
    """(VPC, subnet) of every extra NIC of each pool's nodes."""
    return {pool: frozenset((net["name"], sub["name"]) for net in nets for sub in net["subnets"]) for pool, nets in networks.items()}


def network_objects(networks: Mapping[str, list[dict]]) -> list[dict]:
    """A GKENetworkParamSet and a Device Network per GPU subnet, as cluster-toolkit's cluster module writes them
    (v1.95.0 modules/scheduler/gke-cluster/templates/gke-network-paramset.yaml.tftpl and network-object.yaml.tftpl,
    applied for every additional network in main.tf lines 655-671): the param set names the VPC and subnet by name,
    which is how GKE matches it to a node's NIC (NETWORK_RESOURCE)."""
    out = []
    for nets in networks.values():
        for net in nets:
            for sub in net["subnets"]:
                name = sub["k8s"]
                out.append({"apiVersion": NETWORK_API, "kind": "GKENetworkParamSet", "metadata": {"name": name, "labels": dict(MANAGED)},
                            "spec": {"vpc": net["name"], "vpcSubnet": sub["name"], "deviceMode": sub["device_mode"]}})
                out.append({"apiVersion": NETWORK_API, "kind": "Network", "metadata": {"name": name, "labels": dict(MANAGED)},
                            "spec": {"parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name},
                                     "type": "Device"}})
    return out


def network_resources(annotations: Mapping[str, str]) -> list[str]:
    """What a node must register for a pod whose `networking.gke.io/interfaces` names networks beside `default`."""
    text = annotations.get(INTERFACES_ANNOTATION)
    if not text:
        return []
    return [NETWORK_RESOURCE.format(i["network"]) for i in json.loads(text) if i.get("network") not in (None, "default")]


def _host(name: str, path: str, kind: str | None = None) -> dict:
    return {"name": name, "hostPath": {"path": path, **({"type": kind} if kind else {})}}


def _daemonset(name: str, pools: list[str], spec: dict, max_unavailable: str | None = None) -> dict:
    """Google's DaemonSet shape: kube-system, system-node-critical, every taint tolerated (`operator: Exists`), host
    network and PID. Where Google selects every node of an accelerator type, this selects the fabric pools' nodes by
    their pool label: other pools of that GPU have no GPUDirect NICs to serve."""
    labels = {"k8s-app": name}
    strategy: dict = {"type": "RollingUpdate"}
    if max_unavailable:
        strategy["rollingUpdate"] = {"maxUnavailable": max_unavailable}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": sorted(pools)}]}]}}}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {**labels, **MANAGED}},
            "spec": {"selector": {"matchLabels": dict(labels)}, "updateStrategy": strategy,
                     "template": {"metadata": {"labels": {"name": name, **labels}},
                                  "spec": {"priorityClassName": "system-node-critical", "affinity": affinity,
                                           "tolerations": [{"operator": "Exists"}], "hostNetwork": True, "hostPID": True, **spec}}}}


def _installer_spec(name: str) -> tuple[dict, str | None]:
    """The pod spec of one flavour's NCCL plugin installer (see INSTALLER), and its rollout's maxUnavailable."""
    privileged = {"privileged": True}
    if name == "tcpx":
        return {"volumes": [_host("var-lib", "/var/lib"), _host("tcpx", "/var/lib/tcpx"), _host("library-dir-host", "/home/kubernetes/bin")],
                "initContainers": [{
                    "image": TCPX_PLUGIN, "name": INSTALLER[name], "resources": {"requests": {"cpu": "150m"}}, "securityContext": privileged,
                    "volumeMounts": [{"name": "var-lib", "mountPath": "/var/lib"}, {"name": "library-dir-host", "mountPath": "/usr/local"}],
                    "command": ["/bin/sh", "-c"],
                    "args": ["set -ex\n/scripts/container_entry.sh install --install-nccl\nmkdir -p /usr/local/nvidia/lib64\n"
                             "cp -r /var/lib/tcpx/lib64/. /usr/local/nvidia/lib64\necho \"installation finishes\"\n"]}],
                "containers": [{"image": PAUSE, "name": "pause"}]}, None
    if name == "tcpxo":
        # The pre-installation step exposes the A3 Mega NICs' aperture devices under /dev/aperture_devices, which the
        # jobs mount, and loads the import-helper module the receive-datapath daemon needs (the installer's first
        # init container, verbatim).
        aperture = ("/sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT && modprobe import-helper\n"
                    "sudo mkdir -p /dev/aperture_devices\n"
                    "while IFS= read -r line; do\n"
                    "  BDF=$( echo \"$line\" | awk '{print $1}' );\n"
                    "  target_aperture_path=\"/dev/aperture_devices/$BDF\"\n"
                    "  host_aperture_device=$(readlink -f \"/sys/bus/pci/devices/$BDF\");\n"
                    "  sudo mkdir -p $target_aperture_path;\n"
                    "  sudo umount -R $target_aperture_path;\n"
                    "  sudo mount --bind $host_aperture_device $target_aperture_path;\n"
                    "done < <(lspci -nn -D | grep '1ae0:0084')\n"
                    "if [ -d /dev/aperture_devices ]; then\n"
                    "    chmod -R a+r /dev/aperture_devices/\n"
                    "    chmod a+rw /dev/aperture_devices/*/resource*\n"
                    "fi\n")
        return {"volumes": [_host("var-lib", "/var/lib"), _host("tcpxo", "/var/lib/tcpxo"), _host("library-dir-host", "/home/kubernetes/bin")],
                "initContainers": [
                    {"image": "ubuntu", "name": "pre-installation", "securityContext": privileged,
                     "command": ["nsenter", "-at", "1", "--", "sh", "-c", aperture]},
                    {"name": INSTALLER[name], "image": TCPXO_PLUGIN, "resources": {"requests": {"cpu": "150m"}}, "securityContext": privileged,
                     "volumeMounts": [{"name": "var-lib", "mountPath": "/var/lib"}, {"name": "library-dir-host", "mountPath": "/usr/local"}],
                     "command": ["/bin/sh", "-c"],
                     "args": ["set -ex\nchmod 755 /scripts/container_entry.sh\n/scripts/container_entry.sh install --install-nccl\n"
                              "mkdir -p /usr/local/nvidia/lib64\ncp -r /var/lib/tcpxo/lib64/. /usr/local/nvidia/lib64\n"
                              "echo \"installation finishes\"\n"]}],
                "containers": [{"image": PAUSE, "name": "pause"}]}, None
    # A3 Ultra's RDMA NICs log every packet from a source they do not route back to as martian; the template turns that
    # off per GPU NIC (gpu<i>rdma0) before installing gIB and its NCCL into the host's driver directory.
    martians = "".join(f"sysctl -w net.ipv4.conf.gpu{i}rdma0.log_martians=0\n" for i in range(8))
    return {"volumes": [_host("library-dir-host", "/home/kubernetes/bin/nvidia/lib64", "DirectoryOrCreate"), _host("gib", "/home/kubernetes/bin/gib")],
            "initContainers": [
                {"name": "disable-log-martian", "image": "alpine:latest", "command": ["/bin/sh"], "securityContext": privileged,
                 "args": ["-c", martians]},
                {"image": GIB_PLUGIN, "name": INSTALLER[name], "resources": {"requests": {"cpu": "150m"}}, "securityContext": privileged,
                 "volumeMounts": [{"name": "library-dir-host", "mountPath": "/usr/local/home/kubernetes/bin/nvidia/lib64"},
                                  {"name": "gib", "mountPath": "/usr/local/home/kubernetes/bin/gib"}],
                 "command": ["/bin/sh", "-c"],
                 "args": ["set -ex\n/scripts/container_entry.sh install --install-nccl\n"
                          "cp -r /var/lib/gib/lib64/. /usr/local/home/kubernetes/bin/nvidia/lib64\n"
                          "cp -r /var/lib/gib/. /usr/local/home/kubernetes/bin/gib\necho \"installation finishes\"\n"]}],
            "containers": [{"image": PAUSE, "name": "pause"}]}, "50%"


def daemonsets(fabrics: list[FabricPlan]) -> list[dict]:
    """The NCCL plugin installer of every GPUDirect flavour among the pools, on those pools, and the NRI device
    injector on the pools whose pods run a receive-datapath daemon (container-engine-accelerators @ 204a57c
    nri_device_injector/nri-device-injector.yaml)."""
    by_flavour: dict[str, list[str]] = {}
    for f in fabrics:
        name = flavour(f.kind)
        if name is not None:
            by_flavour.setdefault(name, []).append(f.pool)
    out = []
    for name in INSTALLER:
        if name in by_flavour:
            spec, max_unavailable = _installer_spec(name)
            out.append(_daemonset(INSTALLER[name], by_flavour[name], spec, max_unavailable))
    nri = sorted(p for name in NEEDS_NRI for p in by_flavour.get(name, []))
    if nri:
        out.append(_daemonset(NRI_INJECTOR, nri, {
            "containers": [{"image": NRI_IMAGE, "name": NRI_INJECTOR, "resources": {"requests": {"cpu": "150m"}},
                            "securityContext": {"privileged": True},
                            "volumeMounts": [{"name": "dev", "mountPath": "/dev"}, {"name": "nri", "mountPath": "/var/run/nri"}]}],
            "volumes": [_host("root", "/"), _host("nri", "/var/run/nri"), _host("dev", "/dev")]}))
    return out


def gpudirect_objects(stack: StackConfig, fabrics: Mapping[str, FabricPlan]) -> tuple[list[dict], list[dict]]:
    """(the Network and GKENetworkParamSet objects, the DaemonSets) a stack's GPUDirect pools need; both empty without."""
    networks = gpu_networks(stack, fabrics)
    return network_objects(networks), daemonsets(list(fabrics.values()))
