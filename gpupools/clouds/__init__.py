"""Per-cloud decisions, one pure-Python module per cloud (aws, azure, gcp, gcore), chosen by name in registry."""
