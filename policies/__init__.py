"""The gpupools CrossGuard policy pack (`gpupools.policies`); `pack.POLICIES` lists every policy."""
