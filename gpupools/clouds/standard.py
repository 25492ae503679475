"""What a cluster whose GPU pools are gpupools' own (standard mode) answers to the managed-mode questions of the Cloud
protocol (gpupools.core.cloud.Cloud), in one place: each cloud module imports these by name, and a managed mode's
module (aws.auto_mode, azure.node_auto_provisioning, gcp.autopilot) replaces the answers its mode changes.
"""

from __future__ import annotations

from gpupools.clouds.common import (no_managed_pool_problems as managed_pool_problems, no_pod_node_selector as pod_node_selector,
                                    same_plan as managed_plan)

__all__ = ["ADMITS_HOST_AGENTS", "BOUNDS_POOL_NODES", "MANAGED_GPU_METRICS", "REFUSED_QUOTAS", "managed_plan", "managed_pool_problems",
           "pod_node_selector"]

# GPU metrics come from the exporter gpupools installs (or the GPU Operator's), never from the service.
MANAGED_GPU_METRICS: str | None = None
# Node agents in the host's namespaces (Prometheus's node exporter) run on every node.
ADMITS_HOST_AGENTS = True
# A pool's node limit (node group, agent pool or NodePool maximum) is the service's to keep.
BOUNDS_POOL_NODES = True
# Every team-quota engine serves the pools.
REFUSED_QUOTAS: dict[str, str] = {}
