"""What no message of a refused stack may quote (`_hidden_values`), found in one walk that follows a value's field
only while a secret field may lie below it: the same values, with the same descriptions, in the same order as the
rule says field by field (`_secret_field` of the value's whole path, or a value not of a safe form)."""

from __future__ import annotations

from gpupools.core.catalog import load_catalog, zone_region
from gpupools.stack.errors import SECRET_FIELDS, Problem, _Hider, _hidden_values, _safe_form, _secret_field, describe, kind, redact

TOKEN = "PLANTEDz8Kq3Vw7Lm2Xr9Tb4Nc"  # not name-like: hidden wherever it is


def by_the_rule(config) -> list[tuple[str, str]]:
    """The rule, path by path: every key that is not name-like, every value in a secret field or not of a safe form;
    depth first, a mapping's keys before its values, the last child first."""
    out, stack = [], [(config, ())]
    while stack:
        node, loc = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                if isinstance(key, str) and len(key) >= 6 and not _safe_form(key):
                    out.append((key, f"<{kind(key)}>"))
                step = key.partition(":")[2] if not loc and key.startswith("gpupools:") else key
                stack.append((child, (*loc, step)))
        elif isinstance(node, list):
            stack.extend((child, (*loc, i)) for i, child in enumerate(node))
        elif isinstance(node, str) and len(node) >= 6 and (_secret_field(loc) or not _safe_form(node)):
            out.append((node, f"<{kind(node)}, not shown>"))
        elif isinstance(node, (int, float)) and not isinstance(node, bool) and (_secret_field(loc) or not _safe_form(node)):
            text = f"{node!r}" if isinstance(node, float) else describe(node)
            if len(text) >= 6:
                out.append((text, f"<{kind(node)}, not shown>"))
    return out


# Name-like values (quotable by their form) in every secret field, at the field and below it, and beside them.
CONFIG = {
    "gpupools:teams": [{"name": "research", "gpus": 8, "alerts": {"slack": {"webhook": "hooks-name", "channel": "gpu-alerts"}}},
                       {"name": "training", "alerts": ["second-team-hook"]}],
    "gpupools:health": {"readinessGate": "gate-name", "alerts": {"slack": {"webhook": "health-hook"}, "port": 123456789}},
    "gpupools:monitoring": {"releaseLabel": "release-name", "smtp": {"username": "mail-user", "password": "password1"}},
    "gpupools:pools": [{"name": "trainers", "labels": {"example.com/team": "research-team", TOKEN: TOKEN}, "maxNodes": 12345678901},
                       {"name": "alerts", "capacity": [{"reservation": {"id": TOKEN}}]}],
    "aws:secretKey": "secret-key-name", "aws:region": "eu-central-1", "aws:accessKey": ["access-key-name"],
    "gcp:credentials": {"nested": {"deeper": "credential-name"}}, "azure-native:clientId": 1234567,
}


def test_every_secret_field_hides_name_like_values_and_nothing_beside_them():
    found = _hidden_values(CONFIG)
    assert found == by_the_rule(CONFIG)
    hidden = {text for text, _ in found}
    assert {"hooks-name", "gpu-alerts", "second-team-hook", "health-hook", "123456789", "mail-user", "password1", "secret-key-name",
            "access-key-name", "credential-name", "1234567", TOKEN, "12345678901"} == hidden
    # The marker as a key and as values: which description `_Hider` keeps for it depends on the order, checked above.
    assert {(TOKEN, f"<{kind(TOKEN)}>"), (TOKEN, f"<{kind(TOKEN)}, not shown>")} <= set(found)


def test_a_field_named_as_a_secret_one_elsewhere_is_not_secret():
    # `alerts` is secret under teams[*] and health only; a pool named alerts, or an alerts key under pools, is not.
    config = {"gpupools:pools": [{"alerts": {"slack": {"webhook": "pool-hook"}}}], "gpupools:monitoring": {"alerts": "monitor-name"},
              "gpupools:teams": {"alerts": "not-a-list"}, "gcp:region": "us-central1"}
    assert _hidden_values(config) == by_the_rule(config) == []


def test_every_secret_field_pattern_is_found_at_its_own_path():
    for pattern in SECRET_FIELDS:
        steps = pattern.split(".")
        value: object = "plain-value"
        for step in reversed(steps[1:]):
            value = [value] if step == "*" else {step: value}
        top = steps[0] if ":" in steps[0] else f"gpupools:{steps[0]}"
        config = {top: value, "gpupools:cloud": "aws"}
        assert _hidden_values(config) == [("plain-value", "<a string of 11 characters, not shown>")], pattern


def test_a_message_without_a_hidden_value_is_kept_and_an_escaped_one_is_found():
    hide = _Hider([("line-one\nline-two-of-a-token", "<hidden>")])
    assert hide("pools[0].name: 'trainers' is used twice") == "pools[0].name: 'trainers' is used twice"
    assert hide("got 'line-one\\nline-two-of-a-token'") == "got <hidden>"  # the repr spelling starts with 'line-o' too
    two = _Hider([("first-token-value", "<first>"), ("second", "<second>")])  # a long and a short one: each found alone
    assert two("got 'first-token-value'") == "got <first>" and two("got 'second'") == "got <second>"
    problems = [Problem("teams[0].alerts", f"expected a mapping, got {TOKEN!r}"), Problem("cloud", "unknown cloud 'aws2'")]
    assert [str(p) for p in redact(problems, {"gpupools:teams": [{"alerts": TOKEN}]})] == [
        "error: teams[0].alerts: expected a mapping, got <a string of 26 characters, not shown>", "error: cloud: unknown cloud 'aws2'"]


def test_a_regions_zones_are_the_catalogs_zones_of_that_region_in_order():
    catalog = load_catalog()
    regions = {zone_region(z) for zones in catalog.gcp_zones.values() for z in zones}
    assert len(regions) > 5
    for region in regions:
        for accelerator, zones in catalog.gcp_zones.items():
            assert catalog.gcp_zones_in(accelerator, region) == [z for z in zones if zone_region(z) == region]
        assert catalog.gcp_zones_in("no-such-accelerator", region) == []  # a known region without it: none, not unknown
    assert catalog.gcp_zones_in(next(iter(catalog.gcp_zones)), "mars-north1") is None
