"""no-public-ssh judges the addresses source ranges open together, not their spelling: every way of writing "the whole
internet" (halves, quarters, IPv6 halves, IPv4 carried in IPv6) fails on security groups, their rules, VPC ingress
rules and GCP firewalls alike; private and documentation ranges, which the internet does not reach, pass. The plan's
API endpoint row reads authorized ranges the same way as cluster-endpoint-restricted."""

from __future__ import annotations

import pytest

from gpupools.policies.security import internet_share

from conftest import stack_config, write_stack
from test_policies import resource_violations

SG = "aws:ec2/securityGroup:SecurityGroup"
SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
FIREWALL = "gcp:compute/firewall:Firewall"

WHOLE_INTERNET = [
    ["0.0.0.0/0"],
    ["0.0.0.0/1", "128.0.0.0/1"],
    ["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/2"],
    ["::/0"],
    ["::/1", "8000::/1"],
    ["2000::/3"],
    ["::ffff:0.0.0.0/96"],
    ["::ffff:0.0.0.0/97", "::ffff:128.0.0.0/97"],
    ["64:ff9b::/96"],
    ["0.0.0.0/1", "::ffff:128.0.0.0/97"],
    [f"{a}.0.0.0/8" for a in range(256)],
]
NOT_THE_INTERNET = [["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"], ["203.0.113.0/24"], ["2001:db8::/32"], ["fd00::/8"],
                    ["198.51.100.7"], ["1.0.0.0/8"], ["100.64.0.0/10", "169.254.0.0/16"], ["not-a-cidr"]]


def _v4_v6(ranges: list[str]) -> tuple[list[str], list[str]]:
    return [r for r in ranges if ":" not in r], [r for r in ranges if ":" in r]


@pytest.mark.parametrize("ranges", WHOLE_INTERNET, ids=lambda r: "+".join(r[:3]))
def test_every_spelling_of_the_whole_internet_fails(ranges):
    assert internet_share(ranges).startswith("the whole internet")
    v4, v6 = _v4_v6(ranges)
    # A security group: the union over its ingress rules that reach port 22 (one range per rule here).
    sg = {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": [r]} for r in v4]
                     + [{"protocol": "-1", "fromPort": 0, "toPort": 0, "ipv6CidrBlocks": [r]} for r in v6]}
    (message,) = resource_violations("no-public-ssh", SG, sg)
    assert "allows SSH (port 22) from the whole internet" in message
    rule = {"type": "ingress", "protocol": "tcp", "fromPort": 20, "toPort": 25, "cidrBlocks": v4, "ipv6CidrBlocks": v6}
    assert resource_violations("no-public-ssh", SG_RULE, rule)
    firewall = {"direction": "INGRESS", "sourceRanges": ranges, "allows": [{"protocol": "tcp", "ports": ["22"]}]}
    (message,) = resource_violations("no-public-ssh", FIREWALL, firewall)
    assert "allows SSH (tcp:22) from the whole internet" in message


@pytest.mark.parametrize("ranges", NOT_THE_INTERNET, ids=lambda r: "+".join(r))
def test_ranges_the_internet_does_not_reach_pass(ranges):
    assert internet_share(ranges) is None
    v4, v6 = _v4_v6(ranges)
    sg = {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": v4, "ipv6CidrBlocks": v6}]}
    assert resource_violations("no-public-ssh", SG, sg) == []
    firewall = {"direction": "INGRESS", "sourceRanges": ranges, "allows": [{"protocol": "all"}]}
    assert resource_violations("no-public-ssh", FIREWALL, firewall) == []


@pytest.mark.parametrize("v4, v6", [("0.0.0.0/0", None), (None, "::/0"), (None, "::ffff:0.0.0.0/96")])
def test_one_vpc_ingress_rule(v4, v6):
    rule = {"ipProtocol": "tcp", "fromPort": 22, "toPort": 22, "cidrIpv4": v4, "cidrIpv6": v6}
    (message,) = resource_violations("no-public-ssh", INGRESS_RULE, rule)
    assert "from the whole internet" in message
    assert resource_violations("no-public-ssh", INGRESS_RULE, {**rule, "fromPort": 443, "toPort": 443}) == []


def test_a_share_of_the_internet_is_named():
    assert internet_share(["0.0.0.0/4"]) == "6% of public IPv4 addresses"
    sg = {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/2"]},
                      {"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["64.0.0.0/2"]},
                      {"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidrBlocks": ["128.0.0.0/1"]}]}
    (message,) = resource_violations("no-public-ssh", SG, sg)
    assert "from 57% of public IPv4 addresses" in message  # port 443's rule does not count


@pytest.mark.parametrize("ranges", [["0.0.0.0/1", "128.0.0.0/1"], ["::/1", "8000::/1"], ["::ffff:0.0.0.0/96"]])
def test_the_plan_does_not_call_any_spelling_of_everyone_restricted(tmp_path, ranges):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    path = write_stack(tmp_path, stack_config("aws", cluster={"name": "t", "authorizedCidrs": ranges}))
    out = " ".join(CliRunner().invoke(app, ["plan", "--config", str(path)]).stdout.split())
    assert "API endpoint: open to the whole internet" in out and "restricted to" not in out
