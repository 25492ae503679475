"""What every capability uses: the GPU catalog, a pool's cloud-neutral facts and the GPU sharing mechanisms."""
