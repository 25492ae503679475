"""One queue across clusters and clouds: a fleet of gpupools stacks behind one Kueue MultiKueue manager.

config (the fleet stack file and its workers' stack files), credentials (what a worker stack mints for the manager),
plan (the manager's objects, quotas and Kueue configuration, every refusal across stacks, landing per worker).
"""
