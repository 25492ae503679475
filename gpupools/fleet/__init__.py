"""One queue across clusters and clouds: a fleet of gpupools stacks behind one Kueue MultiKueue manager."""
