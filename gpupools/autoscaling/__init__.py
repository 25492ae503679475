"""Autoscaling: which autoscaler adds each pool's nodes, Karpenter, cluster-autoscaler, and the scale-up check."""
