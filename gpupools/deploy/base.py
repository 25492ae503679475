"""What every gpupools component shares: the type-token prefix and child options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

TYPE_PREFIX = "gpupools:index:"


class Component(pulumi.ComponentResource):
    """A component whose children are parented to it, so `pulumi up` shows one tree per pool or cluster."""

    TYPE = ""  # no annotation: Pulumi's schema analyzer would take an annotated class attribute for an output

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None, props: dict[str, Any] | None = None):
        """`props`: what the component records about itself, which policies read (e.g. the landing verdicts)."""
        super().__init__(TYPE_PREFIX + self.TYPE, name, props, opts)

    def child(self, **kwargs: Any) -> pulumi.ResourceOptions:
        kwargs.setdefault("parent", self)
        return pulumi.ResourceOptions(**kwargs)


@dataclass
class ClusterHandle:
    """What pools and cluster software need from a cluster, whichever cloud made it."""

    name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    kubernetes: Any  # pulumi_kubernetes.Provider
    details: dict[str, Any]  # cloud-specific outputs, e.g. node role ARN and subnets on AWS
