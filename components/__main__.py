"""The gpupools component package: Pulumi runs `python <this folder> <engine address>` and talks to the provider it
starts (sdk/python/cmd/pulumi-language-python RunPlugin). The schema is inferred from gpupools_components/args.py."""

import sys

from pulumi.provider import main

from gpupools_components.provider import provider

if __name__ == "__main__":
    main(provider(), sys.argv[1:])
