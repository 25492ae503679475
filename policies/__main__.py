"""Entry point of the policy pack for `pulumi preview --policy-pack policies`.

Only builds the pack: `PolicyPack(...)` starts the analyzer server and blocks, so nothing may import this
file. The policies live in importable modules (see pack.py).
"""

from pulumi_policy import PolicyPack

from gpupools.policies.pack import PACK_DESCRIPTION, PACK_NAME, POLICIES

PolicyPack(name=PACK_NAME, policies=POLICIES, description=PACK_DESCRIPTION)
