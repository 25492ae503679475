"""gpupools: shared, monitored, policy-checked GPU node pools on EKS, AKS and GKE, as Pulumi components."""
