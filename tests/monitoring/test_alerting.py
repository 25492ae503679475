"""Owners told: Alertmanager config from `gpupools:teams`, checked with amtool, and credentials kept secret."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml
from typer.testing import CliRunner

from gpupools.monitoring import alerting
from gpupools.monitoring import plan as monitoring
from gpupools.cli.main import app
from gpupools.stack.config import SecretText
from gpupools.stack.values import mark_secrets
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

from conftest import stack_config, write_stack

AMTOOL = shutil.which("amtool")


def needs_amtool() -> None:
    if AMTOOL is None:
        if os.environ.get("GPUPOOLS_REQUIRE_PROMETHEUS"):
            pytest.fail("amtool is required (Debian/Ubuntu: apt-get install prometheus-alertmanager)")
        pytest.skip("amtool is not installed (Debian/Ubuntu: apt-get install prometheus-alertmanager)")


WEBHOOK = "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX"
SECURE = {"secure": "v1:c2VjcmV0IHdlYmhvb2s="}  # how `pulumi config set --secret --path` stores it


def teams(webhook=SECURE, **alerts):
    return [
        {"name": "research", "gpus": 2, "alerts": {"slack": {"webhook": webhook, "channel": "#research-gpus"}, **alerts}},
        {"name": "search", "namespace": "search-prod", "gpus": 1, "alerts": {"email": ["search-oncall@example.com"]}},
        {"name": "quiet", "gpus": 1},
    ]


SMTP = {"smarthost": "smtp.example.com:587", "from": "gpupools@example.com", "username": "gpupools", "password": SECURE}


def config(**kw):
    return stack_config("aws", teams=teams(**kw), monitoring={"smtp": SMTP})


def engine_view(raw: dict) -> dict:
    """What the program sees under `pulumi up`: decrypted values, and the keys Pulumi holds as secrets."""
    plain = json.loads(json.dumps(raw).replace(json.dumps(SECURE), json.dumps(WEBHOOK)))
    return mark_secrets(plain, {"gpupools:teams", "gpupools:monitoring"})


def test_routes_and_receivers_hold_no_credential():
    stack = validate_stack(engine_view(config()))
    routes = alerting.alertmanager_config(stack)
    text = yaml.safe_dump(routes)
    assert WEBHOOK not in text and "hooks.slack.com" not in text
    receivers = {r["name"]: r for r in routes["receivers"]}
    assert set(receivers) == {"null", "team-research", "team-search"}  # the team without alerts has no receiver
    assert receivers["team-research"]["slack_configs"][0]["api_url_file"] == \
        "/etc/alertmanager/secrets/gpupools-alertmanager-receivers/research-slack-webhook"
    assert receivers["team-search"]["email_configs"][0]["to"] == "search-oncall@example.com"
    assert routes["global"]["smtp_auth_password_file"].endswith("/smtp-password")
    values = monitoring.kube_prometheus_stack_values(stack)
    assert values["alertmanager"]["alertmanagerSpec"]["secrets"] == [alerting.RECEIVERS_SECRET]
    assert WEBHOOK not in json.dumps(values)
    plan = monitoring.monitoring_plan(stack, [])
    (secret,) = [o for o in plan.objects if o["kind"] == "Secret"]
    assert secret["stringData"]["research-slack-webhook"] == WEBHOOK
    assert isinstance(secret["stringData"]["research-slack-webhook"], SecretText)  # the component wraps it as a Pulumi secret
    assert WEBHOOK not in repr(secret)


def test_kube_prometheus_stack_has_the_keys(tmp_path):
    """`alertmanager.config` and `alertmanager.alertmanagerSpec.secrets` exist in the pinned chart's values."""
    from conftest import needs_reference

    upstream = yaml.safe_load((needs_reference() / "helm-charts" / "values.yaml").read_text())
    assert isinstance(upstream["alertmanager"]["config"], dict)
    assert upstream["alertmanager"]["alertmanagerSpec"]["secrets"] == []


def rendered(tmp_path, raw) -> tuple[str, list[str]]:
    path = write_stack(tmp_path, raw)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["render", "--config", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return (out / monitoring.ALERTMANAGER_FILE).read_text(), result.output.splitlines()


def test_render_writes_routes_and_withholds_the_secret(tmp_path):
    text, lines = rendered(tmp_path, config())
    assert "[secret]" not in text and "api_url_file" in text
    note = [line for line in lines if alerting.RECEIVERS_SECRET in line]
    assert note and "pulumi config get --path 'gpupools:teams[0].alerts.slack.webhook'" in note[0]
    assert not list((tmp_path / "out").rglob(f"secret-*{alerting.RECEIVERS_SECRET}*"))


def amtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([AMTOOL, *args], capture_output=True, text=True, timeout=60)


def test_amtool_checks_and_routes(tmp_path):
    needs_amtool()
    text, _ = rendered(tmp_path, config())
    path = tmp_path / "alertmanager.yaml"
    path.write_text(text)
    check = amtool("check-config", str(path))
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS" in check.stdout

    def route(*labels: str) -> str:
        result = amtool("config", "routes", "test", f"--config.file={path}", *labels)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout.strip()

    assert route("alertname=GpuAllocatedButIdle", "namespace=research", "pod=notebook-1") == "team-research"
    assert route("alertname=GpuAllocatedButIdle", "namespace=search-prod") == "team-search"
    assert route("alertname=GpuAllocatedButIdle", "namespace=quiet") == "null"  # no channel named: the default
    assert route("alertname=GpuXidError", "namespace=research") == "null"  # only the team's own alerts go to owners
    # The queue alerts carry the team's namespace (the rules put it there from the stack's teams).
    assert route("alertname=GpuTeamQueueBlocked", "namespace=search-prod", "cluster_queue=search") == "team-search"
    assert route("alertname=GpuTeamQueueWaiting", "namespace=research", "cluster_queue=research") == "team-research"
    assert route("alertname=GpuTeamQueueWaiting", "namespace=quiet", "cluster_queue=quiet") == "null"
    assert route("alertname=GpuTeamQueueBlocked", "namespace=kueue-system", "cluster_queue=search") == "null"


def test_queue_alerts_route_to_teams_only_on_kueue():
    """Teams on ResourceQuota have no queue, so their routes name only the idle alert; on Kueue the routes name
    exactly the alerts the rules define for a team's queue."""
    from gpupools.monitoring.rules import queue_alerts

    def matchers(**keys) -> set[str]:
        routes = alerting.alertmanager_config(validate_stack(engine_view({**config(), **keys})))["route"]["routes"]
        return {m for r in routes for m in r["matchers"] if m.startswith("alertname")}

    names = [alerting.IDLE_ALERT] + [a["alert"] for a in queue_alerts()]
    assert matchers() == {'alertname=~"' + "|".join(names) + '"'}
    assert matchers(**{"gpupools:quotas": "resourcequota"}) == {f'alertname=~"{alerting.IDLE_ALERT}"'}


def first_error(tmp_path, raw) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["plan", "--config", str(write_stack(tmp_path, raw))])
    return result.exit_code, result.stderr


@pytest.mark.parametrize("raw, field, says", [
    (config(webhook=WEBHOOK), "teams[0].alerts.slack.webhook", "is in plaintext; keep it as a secret"),
    (config(webhook="not a url"), "teams[0].alerts.slack.webhook", "is not an https URL"),
    (config(webhook="http://hooks.example.com/x"), "teams[0].alerts.slack.webhook", "is not an https URL"),
    (stack_config("aws", teams=[{"name": "a", "gpus": 1, "alerts": {}}]), "teams[0].alerts", "names no channel"),
    (stack_config("aws", teams=teams()), "monitoring.smtp", "required for e-mail alerts"),
    (stack_config("aws", teams=teams(), monitoring={"smtp": {**SMTP, "password": "hunter2"}}), "monitoring.smtp.password",
     "must be kept as a secret"),
])
def test_bad_receivers_are_one_line_exit_2(tmp_path, raw, field, says):
    code, stderr = first_error(tmp_path, raw)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: ") and says in lines[0], stderr
    assert "hooks.slack.com" not in stderr and "hunter2" not in stderr and "not a url" not in stderr


@pytest.mark.parametrize("where, key", [
    ("teams", "gpupools:teams[0].alerts.slack.webhook"),
    ("health", "gpupools:health.alerts.slack.webhook"),
])
def test_the_plaintext_webhook_hint_names_the_key_that_holds_it(tmp_path, where, key):
    """The fix is a command to copy: it must set the key the webhook is in, not another one."""
    raw = stack_config("aws", teams=teams(webhook=WEBHOOK)) if where == "teams" else stack_config("aws", health={"alerts": {"slack": {"webhook": WEBHOOK}}})
    code, stderr = first_error(tmp_path, raw)
    assert code == 2
    assert stderr.strip().endswith(f"pulumi config set --secret --path '{key}' URL"), stderr


def test_a_secret_webhook_that_is_not_a_url_is_refused_under_the_engine():
    raw = config()
    plain = engine_view(raw)
    plain["gpupools:teams"][0]["alerts"]["slack"]["webhook"] = SecretText("slack please")
    with pytest.raises(ConfigError) as exc:
        validate_stack(plain)
    assert "teams[0].alerts.slack.webhook: is not an https URL" in str(exc.value) and "slack please" not in str(exc.value)


def test_plan_creates_the_receivers_secret_without_its_values():
    """Under the mock engine (what `gpupools plan` runs): the Secret is planned, the routes are in the chart's values,
    and no webhook appears anywhere in the plan."""
    from conftest import plan_of

    result = plan_of(config())
    secrets = [r for r in result.resources if r.type == "kubernetes:core/v1:Secret" and alerting.RECEIVERS_SECRET in r.name]
    assert len(secrets) == 1
    text = json.dumps(result.as_json())
    assert "api_url_file" in text and "hooks.slack.com" not in text
