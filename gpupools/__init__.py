"""gpupools: shared, monitored, policy-checked GPU node pools on EKS, AKS, GKE and Gcore Managed Kubernetes, as Pulumi components."""
