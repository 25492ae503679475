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

import ipaddress
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
# Two helper steps run images Google's manifests name without a digest: TCPXO's pre-installation `image: "ubuntu"`
# (no tag at all; container-engine-accelerators @ a32cd51 and still @ 992db81, 2026-06-11) and the gIB installer's
# `alpine:latest` (cluster-toolkit v1.95.0 nccl-installer.yaml.tftpl). Each is pinned here to one build, by the digest
# Docker's official-images record lists for its tag (docker-library/repo-info repos/ubuntu/remote/noble-20260911.md @
# 592e1d7 and repos/alpine/remote/3.24.2.md @ dc96b8a, the tag's image index). The steps use only nsenter (Ubuntu's
# util-linux) and busybox's sysctl, which any build of either has.
UBUNTU = "ubuntu:noble-20260911@sha256:6896323949d7acdf78c9fa087b858849920791181bc34eb41d432005cfdcd5d7"
ALPINE = "alpine:3.24.2@sha256:3cf95fe0816180395592b8373f3ec60663f076127617bbacb4eacf9667afe2e9"
# The NCCL plugin images (TCPX_PLUGIN, TCPXO_PLUGIN, GIB_PLUGIN) are published by tag only: no manifest of Google's
# (container-engine-accelerators, cluster-toolkit) pins a digest for them, so none is verifiable here, and they keep
# the tag Google pins (SCANNER_EXCEPTIONS, CKV_K8S_43).

# What every container gets unless it needs more: no privilege, no capability, a read-only root filesystem, a user
# that is not root. The pause container holds the pod once the installer has run and needs nothing at all.
LOCKED = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True, "runAsUser": 65535,
          "capabilities": {"drop": ["ALL"]}}
# Google's Autopilot variants of the installers run each container within 50m CPU and 64Mi (container-engine-accelerators
# @ 992db81 gpudirect-tcpx/nccl-tcpx-installer-autopilot.yaml, gpudirect-tcpxo/nccl-tcpxo-installer-autopilot.yaml);
# the limits here are higher, so they only stop a runaway, and the installers keep the 150m CPU Google requests.
PAUSE_RESOURCES = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "50m", "memory": "64Mi"}}
STEP_RESOURCES = {"requests": {"cpu": "150m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}

# Checks of an independent scanner (checkov's Kubernetes checks, tests/cli/test_manifest_scan.py) a DaemonSet here
# does not meet, each with why, as checkov reads them from the object's annotations (`checkov.io/skipN`).
_PRIVILEGED_STEP = {
    "CKV_K8S_16": "privileged init containers: the installer writes Google's NCCL plugin into the host's /home/kubernetes/bin and "
                  "/var/lib as every manifest Google publishes for it runs it, privileged (container-engine-accelerators "
                  "gpudirect-*/nccl-*-installer*.yaml, Autopilot's too), and its script ships inside Google's image only, so less "
                  "cannot be verified; TCPXO's pre-installation enters the host's namespaces to load a kernel module, open the "
                  "firewall to the GPU subnets and bind-mount devices; the gIB installer's first step writes the host's "
                  "/proc/sys/net. The pause container that keeps the pod has no privilege",
    "CKV_K8S_20": "privilege escalation: the privileged init containers (CKV_K8S_16) have every privilege; the pause container has none",
    "CKV_K8S_22": "a writable root filesystem for the init containers: TCPXO's installer changes its own script (chmod 755 "
                  "/scripts/container_entry.sh) and the others run the same unpublished script; the pause container's is read-only",
    "CKV_K8S_28": "capabilities are not dropped on the privileged init containers, which have them all whatever they drop "
                  "(Kubernetes ignores capabilities for privileged containers); the pause container drops ALL",
    "CKV_K8S_37": "capabilities: the privileged init containers have every capability, whatever they add or drop; the pause "
                  "container drops ALL",
    "CKV_K8S_43": "Google publishes its NCCL plugin images by tag only (no manifest of Google's pins a digest), so the installer "
                  "keeps the tag Google pins; every other image here is pinned by digest",
    "CKV_K8S_15": "imagePullPolicy IfNotPresent: images are pinned by digest or by Google's release tag, and Always would make "
                  "every restart on a GPU node wait for the registry",
    "CKV_K8S_8": "no liveness probe: the only long-running container is pause, which has nothing to probe; the work is done by the "
                 "init containers, which Kubernetes runs to completion",
    "CKV_K8S_9": "no readiness probe: no Service sends traffic to the pod (see CKV_K8S_8)",
}
SCANNER_EXCEPTIONS = {
    "nccl-tcpx-installer": dict(_PRIVILEGED_STEP),
    "nccl-tcpxo-installer": {**_PRIVILEGED_STEP,
                             "CKV_K8S_17": "the host's PID namespace: the pre-installation step enters the host's namespaces through "
                                           "its PID 1 (nsenter -at 1) to load the import-helper module, open the GPU subnets in the "
                                           "host's firewall and expose the NICs' aperture devices, as Google's installer does"},
    "nccl-rdma-installer": {**_PRIVILEGED_STEP,
                            "CKV_K8S_19": "the host's network namespace: the first step turns off martian logging on the host's "
                                          "RDMA interfaces (gpu<i>rdma0), which only the host namespace has (cluster-toolkit "
                                          "nccl-installer.yaml.tftpl)"},
    NRI_INJECTOR: {
        "CKV_K8S_23": "root: the injector connects to containerd's NRI socket, owned by root, in /var/run/nri; it has no privilege, "
                      "no capability and a read-only root filesystem",
        "CKV_K8S_40": "a low UID: root, for the NRI socket (CKV_K8S_23)",
        "CKV_K8S_8": "no liveness probe: the injector serves no endpoint (container-engine-accelerators nri_device_injector.go); "
                     "it exits when its NRI connection fails, which restarts it",
        "CKV_K8S_9": "no readiness probe: no Service sends traffic to the pod",
    },
}


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


def _daemonset(name: str, pools: list[str], spec: dict, max_unavailable: str | None = None, host: tuple[str, ...] = ()) -> dict:
    """Google's DaemonSet shape: kube-system, system-node-critical, every taint tolerated (`operator: Exists`). Where
    Google selects every node of an accelerator type, this selects the fabric pools' nodes by their pool label: other
    pools of that GPU have no GPUDirect NICs to serve.

    Google's manifests give every one of these pods the host's network and PID namespaces; here a pod has only those
    of `host` ("hostNetwork", "hostPID") that one of its steps uses, no API token (none calls the API server), and
    the runtime's seccomp profile, which privileged steps run without (Kubernetes "Restrict a Container's Syscalls
    with seccomp": privileged containers always run as Unconfined)."""
    labels = {"k8s-app": name}
    strategy: dict = {"type": "RollingUpdate"}
    if max_unavailable:
        strategy["rollingUpdate"] = {"maxUnavailable": max_unavailable}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": sorted(pools)}]}]}}}
    skips = {f"checkov.io/skip{i}": f"{check}={why}" for i, (check, why) in enumerate(SCANNER_EXCEPTIONS[name].items(), 1)}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {**labels, **MANAGED}, "annotations": skips},
            "spec": {"selector": {"matchLabels": dict(labels)}, "updateStrategy": strategy,
                     "template": {"metadata": {"labels": {"name": name, **labels}},
                                  "spec": {"priorityClassName": "system-node-critical", "affinity": affinity,
                                           "tolerations": [{"operator": "Exists"}], **{key: True for key in host},
                                           "automountServiceAccountToken": False,
                                           "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}, **spec}}}}


def _no_ingress(name: str) -> dict:
    """Nothing connects to these pods (they listen on nothing): a NetworkPolicy admits no traffic to them. A pod on the
    host's network is outside any NetworkPolicy; for the gIB installer this one only says the same."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"k8s-app": name, **MANAGED}},
            "spec": {"podSelector": {"matchLabels": {"k8s-app": name}}, "policyTypes": ["Ingress"]}}


def _pause() -> dict:
    return {"image": PAUSE, "name": "pause", "resources": PAUSE_RESOURCES, "securityContext": dict(LOCKED)}


def _installer_spec(name: str, sources: list[str]) -> tuple[dict, str | None, tuple[str, ...]]:
    """The pod spec of one flavour's NCCL plugin installer (see INSTALLER), its rollout's maxUnavailable, and the host
    namespaces it needs (`_daemonset`). `sources`: the address ranges of the GPU NICs TCPXO's firewall rule opens."""
    privileged = {"privileged": True}
    if name == "tcpx":
        return {"volumes": [_host("var-lib", "/var/lib"), _host("tcpx", "/var/lib/tcpx"), _host("library-dir-host", "/home/kubernetes/bin")],
                "initContainers": [{
                    "image": TCPX_PLUGIN, "name": INSTALLER[name], "resources": STEP_RESOURCES, "securityContext": privileged,
                    "volumeMounts": [{"name": "var-lib", "mountPath": "/var/lib"}, {"name": "library-dir-host", "mountPath": "/usr/local"}],
                    "command": ["/bin/sh", "-c"],
                    "args": ["set -ex\n/scripts/container_entry.sh install --install-nccl\nmkdir -p /usr/local/nvidia/lib64\n"
                             "cp -r /var/lib/tcpx/lib64/. /usr/local/nvidia/lib64\necho \"installation finishes\"\n"]}],
                "containers": [_pause()]}, None, ()
    if name == "tcpxo":
        # The pre-installation step exposes the A3 Mega NICs' aperture devices under /dev/aperture_devices, which the
        # jobs mount, and loads the import-helper module the receive-datapath daemon needs (the installer's first
        # init container, verbatim but for the firewall rule). Google's rule accepts TCP from anywhere on every host
        # interface (`iptables -I INPUT -p tcp -m tcp -j ACCEPT`, container-engine-accelerators @ a32cd51
        # gpudirect-tcpxo/nccl-tcpxo-installer.yaml, unchanged @ 992db81); the traffic it is for comes from the other
        # nodes' GPU NICs, so here it accepts TCP from the GPU subnets of the TCPXO pools only (`sources`).
        aperture = (f"/sbin/iptables -I INPUT -p tcp -m tcp -s {','.join(sources)} -j ACCEPT && modprobe import-helper\n"
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
        # Privileged, in the host's PID namespace: nsenter enters PID 1's namespaces, and what runs there loads a kernel
        # module, changes the host's firewall and bind-mounts devices.
        return {"volumes": [_host("var-lib", "/var/lib"), _host("tcpxo", "/var/lib/tcpxo"), _host("library-dir-host", "/home/kubernetes/bin")],
                "initContainers": [
                    {"image": UBUNTU, "name": "pre-installation", "resources": STEP_RESOURCES, "securityContext": privileged,
                     "command": ["nsenter", "-at", "1", "--", "sh", "-c", aperture]},
                    {"name": INSTALLER[name], "image": TCPXO_PLUGIN, "resources": STEP_RESOURCES, "securityContext": privileged,
                     "volumeMounts": [{"name": "var-lib", "mountPath": "/var/lib"}, {"name": "library-dir-host", "mountPath": "/usr/local"}],
                     "command": ["/bin/sh", "-c"],
                     "args": ["set -ex\nchmod 755 /scripts/container_entry.sh\n/scripts/container_entry.sh install --install-nccl\n"
                              "mkdir -p /usr/local/nvidia/lib64\ncp -r /var/lib/tcpxo/lib64/. /usr/local/nvidia/lib64\n"
                              "echo \"installation finishes\"\n"]}],
                "containers": [_pause()]}, None, ("hostPID",)
    # A3 Ultra's RDMA NICs log every packet from a source they do not route back to as martian; the template turns that
    # off per GPU NIC (gpu<i>rdma0) before installing gIB and its NCCL into the host's driver directory. The sysctl
    # writes the host's /proc/sys/net: privileged, in the host's network namespace.
    martians = "".join(f"sysctl -w net.ipv4.conf.gpu{i}rdma0.log_martians=0\n" for i in range(8))
    return {"volumes": [_host("library-dir-host", "/home/kubernetes/bin/nvidia/lib64", "DirectoryOrCreate"), _host("gib", "/home/kubernetes/bin/gib")],
            "initContainers": [
                {"name": "disable-log-martian", "image": ALPINE, "command": ["/bin/sh"], "resources": STEP_RESOURCES, "securityContext": privileged,
                 "args": ["-c", martians]},
                {"image": GIB_PLUGIN, "name": INSTALLER[name], "resources": STEP_RESOURCES, "securityContext": privileged,
                 "volumeMounts": [{"name": "library-dir-host", "mountPath": "/usr/local/home/kubernetes/bin/nvidia/lib64"},
                                  {"name": "gib", "mountPath": "/usr/local/home/kubernetes/bin/gib"}],
                 "command": ["/bin/sh", "-c"],
                 "args": ["set -ex\n/scripts/container_entry.sh install --install-nccl\n"
                          "cp -r /var/lib/gib/lib64/. /usr/local/home/kubernetes/bin/nvidia/lib64\n"
                          "cp -r /var/lib/gib/. /usr/local/home/kubernetes/bin/gib\necho \"installation finishes\"\n"]}],
            "containers": [_pause()]}, "50%", ("hostNetwork",)


def _sources(pools: list[str], networks: Mapping[str, list[dict]] | None) -> list[str]:
    """The GPU subnets of these pools, or the whole range GPU subnets come from where the networks are not given."""
    found = sorted({sub["cidr"] for pool in pools for net in (networks or {}).get(pool, []) for sub in net["subnets"]},
                   key=lambda cidr: ipaddress.ip_network(cidr))
    return found or [str(gcp.FABRIC_RANGE)]


def daemonsets(fabrics: list[FabricPlan], networks: Mapping[str, list[dict]] | None = None) -> list[dict]:
    """The NCCL plugin installer of every GPUDirect flavour among the pools, on those pools, and the NRI device
    injector on the pools whose pods run a receive-datapath daemon (container-engine-accelerators @ 204a57c
    nri_device_injector/nri-device-injector.yaml). `networks`: the pools' GPU networks (`gpu_networks`), whose
    subnets TCPXO's firewall rule is limited to."""
    by_flavour: dict[str, list[str]] = {}
    for f in fabrics:
        name = flavour(f.kind)
        if name is not None:
            by_flavour.setdefault(name, []).append(f.pool)
    out = []
    for name in INSTALLER:
        if name in by_flavour:
            spec, max_unavailable, host = _installer_spec(name, _sources(by_flavour[name], networks))
            out.append(_daemonset(INSTALLER[name], by_flavour[name], spec, max_unavailable, host))
    nri = sorted(p for name in NEEDS_NRI for p in by_flavour.get(name, []))
    if nri:
        # The injector only reads device nodes under the host's /dev and talks to containerd over the NRI socket
        # (container-engine-accelerators @ 992db81 nri_device_injector/nri_device_injector.go: stub.New, unix.Lstat):
        # root for the socket, and nothing else. Google's manifest runs it privileged, on the host's network and PID
        # namespaces, with the host's / as an (unmounted) volume; none of that is used.
        out.append(_daemonset(NRI_INJECTOR, nri, {
            "containers": [{"image": NRI_IMAGE, "name": NRI_INJECTOR,
                            "resources": {"requests": {"cpu": "150m", "memory": "64Mi"}, "limits": {"cpu": "150m", "memory": "160Mi"}},
                            "securityContext": {**LOCKED, "runAsNonRoot": False, "runAsUser": 0},
                            "volumeMounts": [{"name": "dev", "mountPath": "/dev", "readOnly": True}, {"name": "nri", "mountPath": "/var/run/nri"}]}],
            "volumes": [_host("nri", "/var/run/nri"), _host("dev", "/dev")]}))
    return out


def gpudirect_objects(stack: StackConfig, fabrics: Mapping[str, FabricPlan]) -> tuple[list[dict], list[dict]]:
    """(the Network and GKENetworkParamSet objects and the DaemonSets' NetworkPolicies, the DaemonSets) a stack's
    GPUDirect pools need; both empty without."""
    networks = gpu_networks(stack, fabrics)
    sets = daemonsets(list(fabrics.values()), networks)
    return network_objects(networks) + [_no_ingress(d["metadata"]["name"]) for d in sets], sets
