"""GKE's GPUDirect flavours by name: the NCCL plugin installer each needs, and what a multi-node pod relies on running on
its node. Names only, so that the fabric plan (plan.py) and the objects that install them (gpudirect.py) both read them
from here, and neither imports the other.
"""

from __future__ import annotations

# The NCCL plugin installers, one per GPUDirect flavour (the images and the sources they are copied from: gpudirect.py).
INSTALLER = {"tcpx": "nccl-tcpx-installer", "tcpxo": "nccl-tcpxo-installer", "rdma": "nccl-rdma-installer"}

# The NRI device injector's DaemonSet (its image and source: gpudirect.py).
NRI_INJECTOR = "device-injector"
# The flavours whose pods run a receive-datapath daemon that the NRI device injector hands the GPUs: both that
# gpu_direct.tf installs it for (lines 31 and 46).
NEEDS_NRI = ("tcpx", "tcpxo")


def flavour(kind: str) -> str | None:
    """tcpx | tcpxo | rdma for a GPUDirect fabric kind; None for any other fabric."""
    name = kind.removeprefix("gpudirect-")
    return name if kind.startswith("gpudirect-") and name in INSTALLER else None


def node_software(kind: str) -> tuple[str, ...]:
    """The DaemonSets a multi-node pod of this fabric relies on running on its node (none outside GPUDirect)."""
    name = flavour(kind)
    if name is None:
        return ()
    return (INSTALLER[name],) + ((NRI_INJECTOR,) if name in NEEDS_NRI else ())
