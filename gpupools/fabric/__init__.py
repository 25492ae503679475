"""The fabric between nodes for jobs that span them: EFA, GPUDirect and InfiniBand, placement, local NVMe, topology."""
