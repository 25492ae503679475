"""EKS: the Pulumi provider beside `gpupools:` (region, environment), the service's names and limits, and what a plan's
mocks answer for the region and an existing cluster.
"""

from __future__ import annotations


import difflib
import re

from datetime import date

from gpupools.core.catalog import Hardware
from gpupools.core.facts import load_facts
from gpupools.stack.config import Cluster, Pool
from gpupools.stack.errors import Problem
from gpupools.stack.targets import ProviderFacts, Setting
from gpupools.clouds.common import (KIND, STANDARD_ONLY, KubernetesRelease, newest)


NAME = "aws"
KIND_WORD = KIND[NAME]  # what a pool's machines are called here, as messages name them
# The Pulumi provider beside `gpupools:` (pulumi-aws): AWS region names are like eu-central-1, us-gov-west-1,
# ap-southeast-5, cn-north-1; the environment variables as pulumi-aws documents them (AWS_REGION, AWS_DEFAULT_REGION).
AWS_REGION = r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$"
PROVIDER = ProviderFacts(
    namespace="aws",
    settings={
        "aws:region": Setting(AWS_REGION, "an AWS region such as eu-central-1", ("AWS_REGION", "AWS_DEFAULT_REGION"), required=True),
        "aws:profile": Setting(r"^[-A-Za-z0-9_.@+=,]{1,128}$", "a profile name of ~/.aws/config"),
        "aws:accessKey": Setting(None, "an access key ID"),
        "aws:secretKey": Setting(None, "a secret access key", secret="always"),
        "aws:token": Setting(None, "a session token", secret="always"),
    },
    sdk_package="pulumi_aws", sdk_name="the AWS provider", sdk_distribution="pulumi-aws")
# The platform component's type for one pool (how `gpupools plan` finds what a pool created).
POOL_COMPONENT = "gpupools:index:EksGpuNodePool"
SERVICE = "EKS"
# Nodes per managed node group: EKS's service quota defaults to 450 and can be raised on request (EKS service
# quotas, "Nodes per managed node group"); gpupools refuses more than 1,000, the per-pool cap of AKS and GKE.
MAX_NODES_PER_POOL = 1000


def max_nodes(pool: Pool, cluster: Cluster | None, hardware: Hardware | None) -> tuple[int, str]:
    """The most nodes one pool may ask for, and what the limit counts."""
    return MAX_NODES_PER_POOL, "per EKS node pool"
TAINT_STYLE = "enum"
PROVIDER_PACKAGE = "pulumi_aws"

# Amazon EKS Kubernetes release calendar (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html, read
# 2026-09): 14 months of standard support from the EKS release, then 12 months of paid extended support, during
# which EKS still creates clusters.
KUBERNETES_RELEASES = {r.minor: r for r in (
    KubernetesRelease("1.31", date(2024, 9, 26), date(2025, 11, 26), date(2026, 11, 26)),
    KubernetesRelease("1.32", date(2025, 1, 23), date(2026, 3, 23), date(2027, 3, 23)),
    KubernetesRelease("1.33", date(2025, 5, 29), date(2026, 7, 29), date(2027, 7, 29)),
    KubernetesRelease("1.34", date(2025, 10, 2), date(2026, 12, 2), date(2027, 12, 2)),
    KubernetesRelease("1.35", date(2026, 1, 27), date(2027, 3, 27), date(2028, 3, 27)),
    KubernetesRelease("1.36", date(2026, 6, 2), date(2027, 8, 2), date(2028, 8, 2)),
)}
DEFAULT_KUBERNETES_VERSION = newest(KUBERNETES_RELEASES)


# Managed modes: EKS Auto Mode beside the standard cluster; its answers are gpupools.clouds.aws.auto_mode's, a standard
# cluster's pools need nothing of them.
AUTO_MODE = "auto-mode"
CLUSTER_MODES = (*STANDARD_ONLY, AUTO_MODE)


def region_problems(providers: dict) -> list[Problem]:
    """A region botocore's endpoint data does not know (facts_aws.yaml, refreshed from botocore)."""
    region = providers.get("aws:region")
    if not isinstance(region, str) or not re.fullmatch(AWS_REGION, region) or region in load_facts().aws_regions:
        return []
    close = difflib.get_close_matches(region, load_facts().aws_regions, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else "see `aws ec2 describe-regions`"
    return [Problem("aws:region", f"{region!r} is not an AWS region; {hint} (regions known to botocore's endpoint data)")]


# Namespaces and node-label domains EKS and its add-ons own; a team may not claim them. Namespaces: the CloudWatch
# Observability add-on (amazon-cloudwatch), the GuardDuty runtime agent (amazon-guardduty) and Fargate logging
# (aws-observability), each as its EKS user guide page names it. Labels: EKS sets eks.amazonaws.com/* on managed
# nodes (nodegroup, capacityType, ...) and k8s.amazonaws.com/accelerator on GPU nodes; Karpenter's NodePool CRD
# refuses the label domains karpenter.sh and karpenter.k8s.aws (CEL rules in the pinned
# karpenter.sh_nodepools.yaml, aws/karpenter-provider-aws pkg/apis/crds).
RESERVED_NAMESPACES = frozenset({"amazon-cloudwatch", "amazon-guardduty", "aws-observability"})
RESERVED_LABEL_DOMAINS = ("eks.amazonaws.com", "k8s.amazonaws.com", "karpenter.sh", "karpenter.k8s.aws")
EXAMPLE_ZONE = "eu-central-1a"


def example_zone(cluster, providers: dict) -> str | None:
    """A zone of the stack's own region, for messages that ask for one."""
    region = providers.get("aws:region")
    return f"{region}a" if isinstance(region, str) else None


def mock_region(config: dict) -> str | None:
    """The region a plan's mocks answer with: the stack's, or the one the AWS provider takes from the environment."""
    from gpupools.stack.providers import provider_value

    return provider_value("aws", "aws:region", config)[0]
def mock_cluster_facts(config: dict) -> dict:
    """What an existing cluster reads as in an offline plan beyond what EKS gives every cluster: Auto Mode on, with its node
    role, where the stack says the cluster runs it (a deploy reads the real cluster, and stops if Auto Mode is off there)."""
    cluster = config.get("gpupools:cluster")
    if not isinstance(cluster, dict) or cluster.get("mode") != AUTO_MODE:
        return {}
    name = cluster.get("name", "cluster")
    return {"computeConfigs": [{"enabled": True, "nodePools": ["general-purpose", "system"],
                                "nodeRoleArn": f"arn:aws:iam::123456789012:role/{name}-auto-mode-node"}]}
