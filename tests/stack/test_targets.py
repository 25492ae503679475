"""The stack layer names no cloud: the clouds a stack may name, their provider settings and their SDKs are what the cloud
modules register (gpupools.stack.targets), so a cloud added under gpupools/clouds/ needs nothing of this layer."""

from __future__ import annotations

import pytest

from gpupools.clouds import registry
from gpupools.stack import targets
from gpupools.stack.config import SecretPlaceholder, SecretText, StackConfig
from gpupools.stack.values import split_namespaces
from gpupools.stack.errors import ConfigError
from gpupools.stack.providers import missing_sdk_problem, provider_notes, provider_problems, provider_value, sdk_package
from gpupools.stack.targets import ProviderFacts, Setting
from gpupools.validation.stack import validate_stack

from conftest import stack_config

OTHER = ProviderFacts(
    namespace="othercloud",
    settings={"othercloud:region": Setting(r"^[a-z]+[0-9]$", "a region such as north1", ("OTHERCLOUD_REGION",), required=True),
              "othercloud:token": Setting(None, "an API token", ("OTHERCLOUD_TOKEN",), secret="always")},
    sdk_package="othercloud_sdk_not_installed", sdk_name="Other Cloud's SDK", sdk_distribution="othercloud-sdk")


@pytest.fixture
def fifth_cloud(monkeypatch):
    monkeypatch.setitem(targets._PROVIDERS, "othercloud", OTHER)
    return "othercloud"


def test_the_registered_clouds_are_the_registrys_modules():
    assert targets.cloud_names() == registry.NAMES
    assert targets.provider_namespaces() == ("aws", "azure-native", "gcp", "gcore", "kubernetes")
    assert {n: targets.provider_of(n) for n in registry.NAMES} == {n: m.PROVIDER for n, m in registry.MODULES.items()}


def test_a_registered_cloud_is_a_cloud_a_stack_may_name(fifth_cloud):
    raw = {"cloud": "othercloud", "cluster": {"name": "ml"}, "pools": [{"name": "a", "instanceType": "x", "maxNodes": 1}]}
    assert StackConfig.model_validate(raw).cloud == "othercloud"
    ours, providers, problems = split_namespaces({"gpupools:cloud": "othercloud", "othercloud:region": "north1"})
    assert (ours, providers, problems) == ({"cloud": "othercloud"}, {"othercloud:region": "north1"}, [])


def test_an_unregistered_cloud_is_refused_naming_the_registered_ones():
    with pytest.raises(ConfigError) as raised:
        validate_stack(stack_config("aws", cloud="othercloud"))
    assert "cloud: input should be 'aws', 'azure', 'gcp' or 'gcore' (got a string of 10 characters)" in str(raised.value)
    _, _, problems = split_namespaces({"othercloud:region": "north1"})
    assert [p.path for p in problems] == ["othercloud:region"]


def test_a_registered_clouds_settings_are_judged_by_what_it_declares(fifth_cloud):
    said = {p.path: p.message for p in provider_problems("othercloud", {"othercloud:token": "plain", "othercloud:regoin": "x"}, environ={})}
    assert "pulumi config set --secret othercloud:token" in said["othercloud:token"]
    assert said["othercloud:regoin"].startswith("unknown othercloud setting")
    assert said["othercloud:region"].startswith("required on othercloud")
    assert provider_problems("othercloud", {"othercloud:region": "north1"}, environ={}) == []
    assert provider_problems("othercloud", {}, environ={"OTHERCLOUD_REGION": "north1"}) == []
    assert provider_notes("othercloud", {}, environ={"OTHERCLOUD_REGION": "north1"})[0].startswith("othercloud:region is not set in the stack")
    # A setting the stack pins needs no note, and a credential from the environment is never named with its value.
    assert provider_notes("othercloud", {"othercloud:region": "north1"}, environ={"OTHERCLOUD_REGION": "south2", "OTHERCLOUD_TOKEN": "t0ken"}) == []
    # another cloud's namespace on this cloud's stack
    assert provider_problems("aws", {"othercloud:region": "north1", "aws:region": "eu-central-1"}, environ={})[0].message == (
        "not used on aws; othercloud: settings apply to othercloud stacks only")


@pytest.mark.parametrize("secret", [SecretPlaceholder(), SecretText("north1")])
def test_a_shape_is_never_encrypted_and_a_credential_may_be(fifth_cloud, secret):
    said = provider_problems("othercloud", {"othercloud:region": secret, "othercloud:token": secret}, environ={})
    assert [(p.path, p.message) for p in said] == [("othercloud:region", "must be a plain value, not a secret: it is a region such as north1")]


def test_a_registered_clouds_missing_sdk_names_its_extra(fifth_cloud):
    assert sdk_package("othercloud") == "othercloud_sdk_not_installed" and sdk_package("kubernetes") is None
    problem = missing_sdk_problem("othercloud")
    assert problem is not None and problem.message == (
        "othercloud needs Other Cloud's SDK (othercloud-sdk), which this installation leaves out: pip install 'gpupools[othercloud]'")
    assert missing_sdk_problem("aws") is None


@pytest.mark.parametrize("setting, value, plaintext", [
    (Setting(None, "a key", secret="always"), "abc", True),
    (Setting(None, "a key (its JSON, or the path of its file)", secret="json"), ' {"type": "service_account"}', True),
    (Setting(None, "a key (its JSON, or the path of its file)", secret="json"), "/keys/sa.json", False),
    (Setting(None, "an access key ID"), "AKIA...", False),
])
def test_which_settings_must_be_encrypted(setting, value, plaintext, monkeypatch):
    monkeypatch.setitem(targets._PROVIDERS, "othercloud", ProviderFacts("othercloud", {"othercloud:key": setting}, "x", "x", "x"))
    found = provider_problems("othercloud", {"othercloud:key": value}, environ={})
    assert bool(found) is plaintext
    if plaintext:
        assert ("or give the path of the key file" in found[0].message) is (setting.secret == "json")


def test_a_settings_shape_and_type_are_judged(fifth_cloud):
    said = {p.path: p.message for p in provider_problems("othercloud", {"othercloud:region": "North-1"}, environ={})}
    assert said == {"othercloud:region": "a string of 7 characters is not a region such as north1"}  # a value is described, not quoted
    said = {p.path: p.message for p in provider_problems("othercloud", {"othercloud:region": 7}, environ={})}
    assert said["othercloud:region"].startswith("expected a region such as north1, got")
    said = {p.path: p.message for p in provider_problems("othercloud", {"othercloud:region": "north1", "othercloud:token": 7}, environ={})}
    assert said == {"othercloud:token": "expected an API token as a string, got a number (the value is not shown)"}


def test_where_a_setting_comes_from(monkeypatch):
    zone = Setting(r"^[a-z]+$", "a zone", ("OTHERCLOUD_ZONE",), default="the region's first zone")
    facts = ProviderFacts("othercloud", {**OTHER.settings, "othercloud:zone": zone}, "x", "x", "x")
    monkeypatch.setitem(targets._PROVIDERS, "othercloud", facts)
    value = lambda providers, environ: provider_value("othercloud", "othercloud:region", providers, environ)
    assert value({"othercloud:region": "north1"}, {"OTHERCLOUD_REGION": "south2"}) == ("north1", "stack")
    # An encrypted value is not read offline: the environment is where the provider would look.
    assert value({"othercloud:region": SecretPlaceholder()}, {"OTHERCLOUD_REGION": "south2"}) == ("south2", "OTHERCLOUD_REGION")
    assert value({}, {}) == (None, "unset")
    assert provider_value("othercloud", "othercloud:zone", {}, {}) == (None, "the region's first zone")
    notes = provider_notes("othercloud", {}, environ={"OTHERCLOUD_REGION": "south2"})
    assert notes == ["othercloud:region is not set in the stack: south2 comes from $OTHERCLOUD_REGION in this shell; pin it with "
                     "`pulumi config set othercloud:region south2` so every deploy uses the same one",
                     "othercloud:zone is not set in the stack: the region's first zone applies"]
    assert provider_notes("othercloud", {}, environ={}) == ["othercloud:region is not set in the stack: unset applies",
                                                            "othercloud:zone is not set in the stack: the region's first zone applies"]


def test_nothing_is_read_before_the_clouds_are_registered(monkeypatch):
    monkeypatch.setattr(targets, "_PROVIDERS", {})
    monkeypatch.setattr(targets, "_RESOLVE", None)
    with pytest.raises(RuntimeError, match="import gpupools.clouds.registry"):
        targets.cloud_names()
    with pytest.raises(RuntimeError, match="import gpupools.clouds.registry"):
        targets.resolve_cloud("aws", "standard")
