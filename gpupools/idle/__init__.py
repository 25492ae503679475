"""The idle report: who holds idle GPUs and what it costs, read from Prometheus with its authentication."""
