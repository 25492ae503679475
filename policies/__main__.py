"""Entry point of the policy pack for `pulumi preview --policy-pack policies`.

Only starts the pack: its server blocks, so nothing may import this file. The policies live in importable modules,
and the pack serves them with the same policy-config guard as `gpupools check` (see gpupools/policies/pack.py).
"""

from gpupools.policies.pack import serve

serve()
