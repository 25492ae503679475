"""Pools and GPU software: every pool planned with its cloud's decisions, and the software that runs its GPUs."""
