"""Monitoring follows the GPUs: a stack with GPU pools also runs something that exports DCGM metrics.

Without GPU metrics nobody sees idle or saturated GPUs, which is where a shared GPU fleet wastes money.
Accepted sources: the GPU Operator's DCGM exporter with its ServiceMonitor on (so Prometheus scrapes it),
a dcgm-exporter Helm release whose ServiceMonitor is not switched off, or GKE's managed DCGM metrics
(cluster monitoringConfig.enableComponents contains DCGM).

Advisory by default: a stack may switch monitoring off on purpose (`gpupools:monitoring.enabled: false`,
e.g. a short-lived test cluster); organisations that never want that raise the level to mandatory.
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy

from gpupools.policies._readback import HELM_RELEASE, _chart_name, gpu_pool
from gpupools.policies._props import get, is_unknown, items

GKE_CLUSTER = "gcp:container/cluster:Cluster"


def dcgm_sources(resources) -> tuple[list[str], list[str]]:
    """(names of working DCGM sources, reasons why other candidates do not count)."""
    found, near_misses = [], []
    for r in resources:
        props = r.props
        if r.resource_type == HELM_RELEASE:
            chart = _chart_name(get(props, "chart"))
            if chart == "gpu-operator":
                enabled = get(props, "values", "dcgmExporter", "enabled")
                monitor = get(props, "values", "dcgmExporter", "serviceMonitor", "enabled")
                if is_unknown(enabled) or is_unknown(monitor):
                    found.append(f"release {r.name} (not known until deploy)")
                elif enabled is False:
                    near_misses.append(f"release {r.name} has dcgmExporter.enabled false")
                elif monitor is not True:
                    near_misses.append(f"release {r.name} exports DCGM metrics but dcgmExporter.serviceMonitor.enabled is not true, so Prometheus does not scrape them")
                else:
                    found.append(f"release {r.name}")
            elif chart == "dcgm-exporter":
                monitor = get(props, "values", "serviceMonitor", "enabled")
                if monitor is False:
                    near_misses.append(f"release {r.name} has serviceMonitor.enabled false, so Prometheus does not scrape it")
                else:  # the chart's default is a ServiceMonitor
                    found.append(f"release {r.name}")
        elif r.resource_type == GKE_CLUSTER:
            components = get(props, "monitoringConfig", "enableComponents")
            if any(c == "DCGM" for c in items(components)):
                found.append(f"GKE cluster {r.name} managed DCGM metrics")
    return found, near_misses


def validate_monitoring(args: StackValidationArgs, report: ReportViolation) -> None:
    pools = [r.name for r in args.resources if gpu_pool(r.resource_type, r.name, r.props) is not None]
    if not pools:
        return
    found, near_misses = dcgm_sources(args.resources)
    if found:
        return
    why = f" ({'; '.join(near_misses)})" if near_misses else ""
    report(f"the stack has GPU pools ({', '.join(sorted(pools))}) but no DCGM exporter that Prometheus scrapes{why}; "
           f"enable gpupools:monitoring or deploy dcgm-exporter", None)


gpu_monitoring_deployed = StackValidationPolicy(
    name="gpu-monitoring-deployed",
    description="Wherever there are GPU pools, a DCGM exporter is deployed and scraped, so GPU use is visible.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=validate_monitoring,
)

POLICIES = [gpu_monitoring_deployed]
