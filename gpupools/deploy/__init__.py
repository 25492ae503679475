"""Thin Pulumi ComponentResources (gpupools:index:<Type>) that turn the plans into resources, one module per cloud."""
