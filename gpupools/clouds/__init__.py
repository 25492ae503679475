"""Per-cloud decisions, one pure-Python module per cloud (aws, azure, gcp), chosen by name in registry."""
