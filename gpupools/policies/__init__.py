"""The gpupools CrossGuard policy pack, one module per domain; pack.POLICIES lists every policy."""
