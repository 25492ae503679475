"""gpupools: shared, monitored, policy-checked GPU node pools on EKS, AKS and GKE.

The pure core (config, catalog, per-cloud decisions) lives in this package and never imports
Pulumi; the Pulumi components that turn decisions into resources live in `gpupools.components`.
"""

__version__ = "0.1.0"
