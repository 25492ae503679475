"""Day two: when and how upgrades, node image updates and GPU driver upgrades may take a pool's nodes away."""
