"""gpupools' components for programs in any Pulumi language (see components/README.md)."""
