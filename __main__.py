"""Pulumi entry point: `pulumi up` (and `gpupools plan`) run this with the selected stack's config."""

from gpupools.program import main

main()
