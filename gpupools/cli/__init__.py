"""The gpupools command and its commands: plan runner, plan report, render, replacement, policy check, workload."""
