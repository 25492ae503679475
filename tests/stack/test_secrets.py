"""Credentials never reach an output: a marker planted in every credential key, in every form a stack file can give
it (encrypted, in plaintext, with the wrong type), is absent from everything plan, check, render, workload and idle
print or write. Plaintext provider credentials are refused like a plaintext Slack webhook, and a service-account
key given to `pulumi up` as the JSON string it is goes through."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.stack.config import SecretText
from gpupools.stack.values import from_pulumi_values, mark_secrets, to_pulumi_values
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

from conftest import stack_config

runner = CliRunner()
MARK = "PLANTEDc0ffee5ecret"
PRIVATE_KEY = f"-----BEGIN PRIVATE KEY-----\\nMIIEv{MARK}QIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n"
SERVICE_ACCOUNT = json.dumps({"type": "service_account", "project_id": "proj-test", "private_key_id": f"a1{MARK}",
                              "private_key": PRIVATE_KEY, "client_email": "deployer@proj-test.iam.gserviceaccount.com"})
CREDENTIALS = {
    "aws": ["aws:accessKey", "aws:secretKey", "aws:token"],
    "azure": ["azure-native:clientSecret"],
    "gcp": ["gcp:credentials", "gcp:accessToken"],
}
TEAM = {"name": "research", "gpus": 2, "alerts": {"slack": {"webhook": f"https://hooks.slack.com/services/T0/B0/{MARK}"},
                                                  "email": ["ml@example.com"]}}
SMTP = {"smarthost": "smtp.example.com:587", "from": "gpus@example.com", "username": "gpus", "password": f"pw-{MARK}"}


def secure(value):
    """How `pulumi config set --secret` stores a value: ciphertext gpupools cannot read offline."""
    return {"secure": "v1:" + value}


def planted(cloud: str, form: str) -> dict:
    config = stack_config(cloud, teams=[copy.deepcopy(TEAM)], monitoring={"smtp": dict(SMTP)})
    for i, key in enumerate(CREDENTIALS[cloud]):
        value = SERVICE_ACCOUNT if key == "gcp:credentials" else f"{key}-{MARK}"
        config[key] = {"encrypted": secure(value), "plaintext": value, "mapping": {"value": value}, "list": [value],
                       "number": int("1" * 12) if i == 0 else [{"nested": value}]}[form]
    if form == "encrypted":
        config["gpupools:teams"][0]["alerts"]["slack"]["webhook"] = secure(TEAM["alerts"]["slack"]["webhook"])
        config["gpupools:monitoring"]["smtp"]["password"] = secure(SMTP["password"])
    return config


def outputs(tmp_path, config: dict, with_plan: bool) -> list[tuple[str, object]]:
    path = tmp_path / "Pulumi.planted.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    out = tmp_path / "rendered"
    runs = [("plan", ["plan", "--config", str(path)]), ("plan --json", ["plan", "--config", str(path), "--json"]),
            ("check", ["check", "--config", str(path), "--json"]), ("render", ["render", "--config", str(path), "--out", str(out)]),
            ("workload", ["workload", "--config", str(path), "--pool", "infer"]),
            ("workload --team", ["workload", "--config", str(path), "--team", "research"]),
            ("idle", ["idle", "--config", str(path), "--by", "team", "--timeout", "1s",
                      "--prometheus", f"http://planner:{MARK}@127.0.0.1:9"])]
    results = []
    for name, args in runs if with_plan else runs[:1] + runs[-1:]:
        results.append((name, runner.invoke(app, args)))
    written = "".join(p.read_text() for p in out.rglob("*") if p.is_file()) if out.exists() else ""
    results.append(("render files", written))
    return results


@pytest.mark.parametrize("cloud", sorted(CREDENTIALS))
@pytest.mark.parametrize("form", ["encrypted", "plaintext", "mapping", "list", "number"])
def test_no_output_contains_a_planted_credential(tmp_path, cloud, form):
    results = outputs(tmp_path, planted(cloud, form), with_plan=form == "encrypted")
    for name, result in results:
        text = result if isinstance(result, str) else result.stdout + result.stderr + repr(result.exception or "")
        assert MARK not in text, (name, text[text.find(MARK) - 200:text.find(MARK) + 50])
        assert "BEGIN PRIVATE KEY" not in text and "Traceback" not in text, name
    plan = dict(results)["plan"]
    if form == "encrypted":
        assert plan.exit_code == 0, plan.stderr
    else:
        assert plan.exit_code == 2 and all(line.startswith("error: ") for line in plan.stderr.strip().splitlines()), plan.stderr


@pytest.mark.parametrize("key, value, expected", [
    ("aws:secretKey", {"value": MARK}, "aws:secretKey: expected a secret access key as a string, got a mapping (the value is not shown)"),
    ("aws:accessKey", [MARK], "aws:accessKey: expected an access key ID as a string, got a list (the value is not shown)"),
    ("aws:secretKey", MARK, "aws:secretKey: is in plaintext; keep a secret access key encrypted: pulumi config set --secret aws:secretKey ..."),
    ("aws:token", MARK, "aws:token: is in plaintext; keep a session token encrypted"),
])
def test_aws_credential_shapes_and_plaintext(key, value, expected):
    with pytest.raises(ConfigError) as info:
        validate_stack({**stack_config("aws"), key: value}, {})
    (line,) = [str(p) for p in info.value.problems]
    assert expected in line and MARK not in line


def test_azure_and_gcp_plaintext_credentials_are_refused():
    for cloud, key, value in (("azure", "azure-native:clientSecret", 12345678), ("azure", "azure-native:clientSecret", MARK),
                              ("gcp", "gcp:accessToken", f"ya29.{MARK}"), ("gcp", "gcp:credentials", SERVICE_ACCOUNT)):
        with pytest.raises(ConfigError) as info:
            validate_stack({**stack_config(cloud), key: value}, {})
        (line,) = [str(p) for p in info.value.problems]
        assert line.startswith(f"error: {key}: ") and MARK not in line and "12345678" not in line, line
    # A key file's path is no secret.
    assert validate_stack({**stack_config("gcp"), "gcp:credentials": "/secrets/deployer.json"}, {})


def test_a_service_account_key_reaches_the_program_as_the_string_it_is():
    """`pulumi up` hands the program every value as a string and marks which keys are secrets; the JSON of a key
    file is gcp:credentials' value, not a structure to decode (which failed with the key's first characters)."""
    config = {**stack_config("gcp"), "gcp:credentials": SERVICE_ACCOUNT}
    values = mark_secrets(from_pulumi_values(to_pulumi_values(config)), {"gcp:credentials"})
    assert values["gcp:credentials"] == SERVICE_ACCOUNT and isinstance(values["gcp:credentials"], SecretText)
    assert repr(values["gcp:credentials"]) == "SecretText('[secret]')"
    stack = validate_stack(values, {})
    assert stack.providers["gcp:credentials"] == SERVICE_ACCOUNT
    # The same key given in plaintext: refused, in one line that shows none of it.
    with pytest.raises(ConfigError) as info:
        validate_stack(from_pulumi_values(to_pulumi_values(config)), {})
    assert [str(p) for p in info.value.problems] == [
        "error: gcp:credentials: is in plaintext; keep a service account key (its JSON, or the path of its file) encrypted: "
        "pulumi config set --secret gcp:credentials ... (or give the path of the key file)"]
