"""Register provider resources and invokes by type token with the inputs exactly as the provider receives them.

The generated pulumi_aws classes cost a second of every `gpupools plan`: touching `aws.ec2` alone loads every EC2
type the SDK knows (about half a second). What goes over the wire is only a type token, a name, camelCase inputs
and the provider version; `CloudResource` sends just that, and a test registers every such resource both ways
under the mock engine and compares the requests.
"""

from __future__ import annotations

from typing import Any

import pulumi


def package_version(package: str) -> str:
    """The provider plugin version the package's own classes ask for."""
    if package == "aws":
        from pulumi_aws import _utilities

        return _utilities.get_version()
    if package == "gcp":
        from pulumi_gcp import _utilities as gcp_utilities

        return gcp_utilities.get_version()
    raise KeyError(package)


class CloudResource(pulumi.CustomResource):
    """One provider resource; its outputs are attributes named as the provider names them (camelCase)."""

    def __init__(self, type_token: str, name: str, inputs: dict[str, Any], outputs: tuple[str, ...] = (),
                 opts: pulumi.ResourceOptions | None = None):
        props: dict[str, Any] = {k: v for k, v in inputs.items() if v is not None}
        for key in outputs:
            props.setdefault(key, None)
        package = type_token.split(":", 1)[0]
        opts = pulumi.ResourceOptions.merge(pulumi.ResourceOptions(version=package_version(package)), opts)
        super().__init__(type_token, name, props, opts)


def invoke(token: str, args: dict[str, Any], parent: pulumi.Resource) -> pulumi.Output[Any]:
    """A provider function (data source), answered as a plain dict with the provider's camelCase keys."""
    package = token.split(":", 1)[0]
    return pulumi.runtime.invoke_output(token, args, pulumi.InvokeOutputOptions(parent=parent, version=package_version(package)))
