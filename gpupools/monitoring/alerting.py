"""Owners told: Alertmanager routes each team's idle-GPU and queue alerts to the channel the stack names for the team.

Pure, like `monitoring.py`: the result is the Alertmanager configuration as data, and the receivers' credentials
as a separate mapping. The configuration never holds a credential: Slack webhooks and the SMTP password are read
from files (`api_url_file`, `auth_password_file`) that kube-prometheus-stack mounts from one Secret
(`alertmanager.alertmanagerSpec.secrets`), which the `GpuMonitoring` component fills from Pulumi secrets. So plan,
render and state outputs can show the whole routing tree without a webhook URL in it.
"""

from __future__ import annotations

from gpupools.health.signals import ALERTS as NODE_HEALTH_ALERTS
from gpupools.stack.config import StackConfig, Team, TeamAlerts
from gpupools.stack.errors import Problem

RECEIVERS_SECRET = "gpupools-alertmanager-receivers"
SECRETS_DIR = "/etc/alertmanager/secrets"  # where the chart's Alertmanager mounts `alertmanagerSpec.secrets`
IDLE_ALERT = "GpuAllocatedButIdle"
QUEUE_BLOCKED_ALERT = "GpuTeamQueueBlocked"
QUEUE_WAITING_ALERT = "GpuTeamQueueWaiting"
# KAI Scheduler: a team queue that holds less than its quota while its pods wait, and a team's work reclaimed.
QUEUE_STARVED_ALERT = "GpuTeamQueueStarved"
WORK_RECLAIMED_ALERT = "GpuTeamWorkReclaimed"
NULL_RECEIVER = "null"  # kube-prometheus-stack's default route ends here; alerts nobody claims stay silent
SMTP_PASSWORD_KEY = "smtp-password"
PLATFORM_RECEIVER = "platform"
PLATFORM_SLACK_KEY = "platform.slack-webhook"  # the dot keeps it apart from every team key (team names are DNS labels)
# What the platform team fixes: faulty GPUs (DCGM), GPU nodes the health agents call unhealthy or that never get ready.
PLATFORM_ALERTS = ("GpuXidError", "GpuRowRemapFailure", "GpuRowRemapPending", "GpuTemperatureHigh", "GpuNodeWithoutDcgmMetrics",
                   *NODE_HEALTH_ALERTS)


def receiver_name(team: Team) -> str:
    return f"team-{team.name}"


def slack_key(team: Team) -> str:
    return f"{team.name}-slack-webhook"


def _file(key: str) -> str:
    return f"{SECRETS_DIR}/{RECEIVERS_SECRET}/{key}"


def alerting_teams(stack: StackConfig) -> list[Team]:
    return [t for t in stack.teams if t.alerts is not None]


def team_alert_names(stack: StackConfig) -> list[str]:
    """The alerts a team can act on itself: its idle GPUs and, on Kueue or KAI, its queue."""
    queue = {"kueue": [QUEUE_BLOCKED_ALERT, QUEUE_WAITING_ALERT], "kai": [QUEUE_STARVED_ALERT, WORK_RECLAIMED_ALERT]}
    return [IDLE_ALERT] + queue.get(stack.quotas, [])


def _receiver(name: str, alerts: TeamAlerts, slack_file_key: str, title: str) -> dict:
    receiver: dict = {"name": name}
    if alerts.slack is not None:
        slack = {"api_url_file": _file(slack_file_key), "send_resolved": True, "title": title,
                 "text": '{{ range .Alerts }}{{ .Annotations.description }}\n{{ end }}'}
        if alerts.slack.channel:
            slack["channel"] = alerts.slack.channel
        receiver["slack_configs"] = [slack]
    if alerts.email:
        receiver["email_configs"] = [{"to": ", ".join(alerts.email), "send_resolved": True}]
    return receiver


def alertmanager_config(stack: StackConfig) -> dict | None:
    """Routes and receivers: the idle alert of a team's namespace, and with Kueue quotas the alerts on its queue, go
    to that team; GPU faults and GPU nodes that never become ready go to the platform team (`health.alerts`), whatever
    pod ran there; everything else to the chart's default. None when nobody names a channel."""
    teams = alerting_teams(stack)
    platform = stack.health.alerts
    if not teams and platform is None:
        return None
    names = team_alert_names(stack)
    receivers: list[dict] = [{"name": NULL_RECEIVER}]
    routes = []
    if platform is not None:
        receivers.append(_receiver(PLATFORM_RECEIVER, platform, PLATFORM_SLACK_KEY, '{{ .CommonLabels.alertname }} on pool {{ .CommonLabels.pool }}'))
        # First, and final: a fault on a GPU held by a team's pod is the platform's to fix.
        routes.append({"receiver": PLATFORM_RECEIVER, "matchers": [f'alertname=~"{"|".join(PLATFORM_ALERTS)}"'],
                       "group_by": ["alertname", "pool"], "repeat_interval": "4h"})
    for team in teams:
        receivers.append(_receiver(receiver_name(team), team.alerts, slack_key(team), '{{ .CommonLabels.alertname }} in {{ .CommonLabels.namespace }}'))
        routes.append({"receiver": receiver_name(team),
                       "matchers": [f'alertname=~"{"|".join(names)}"', f'namespace="{team.namespace_name}"'],
                       "group_by": ["alertname", "namespace"], "repeat_interval": "12h"})
    config: dict = {"route": {"receiver": NULL_RECEIVER, "group_by": ["alertname", "namespace"], "routes": routes},
                    "receivers": receivers}
    smtp = stack.monitoring.smtp
    if smtp is not None:
        config["global"] = {"smtp_smarthost": smtp.smarthost, "smtp_from": smtp.from_, "smtp_require_tls": True}
        if smtp.username:
            config["global"]["smtp_auth_username"] = smtp.username
        if smtp.password is not None:
            config["global"]["smtp_auth_password_file"] = _file(SMTP_PASSWORD_KEY)
    return config


def receiver_secrets(stack: StackConfig) -> dict[str, tuple[str, str]]:
    """Secret key -> (credential, the stack config path it comes from). The credential is the stack's secret value
    when the engine runs the program, `[secret]` offline."""
    out = {slack_key(t): (t.alerts.slack.webhook, f"gpupools:teams[{i}].alerts.slack.webhook")
           for i, t in enumerate(stack.teams) if t.alerts is not None and t.alerts.slack is not None}
    platform = stack.health.alerts
    if platform is not None and platform.slack is not None:
        out[PLATFORM_SLACK_KEY] = (platform.slack.webhook, "gpupools:health.alerts.slack.webhook")
    if stack.monitoring.smtp is not None and stack.monitoring.smtp.password is not None:
        out[SMTP_PASSWORD_KEY] = (stack.monitoring.smtp.password, "gpupools:monitoring.smtp.password")
    return out


FROM_CONFIG = "gpupools.io/from-config"  # annotation: which stack config path fills each key of the Secret


def receivers_secret(stack: StackConfig) -> dict | None:
    """The Secret Alertmanager reads the credentials from; its values are the stack's secrets (placeholders offline,
    so `gpupools render` leaves it out and says how to create it)."""
    secrets = receiver_secrets(stack)
    if not secrets:
        return None
    import json

    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": RECEIVERS_SECRET, "labels": {"app.kubernetes.io/managed-by": "gpupools"},
                         "annotations": {FROM_CONFIG: json.dumps({k: path for k, (_, path) in secrets.items()}, sort_keys=True)}},
            "stringData": {k: value for k, (value, _) in secrets.items()}}


def alerting_problems(stack: StackConfig) -> list:
    """What only the whole stack can judge: e-mail needs a mail server, and alerts need monitoring."""
    problems = []
    teams = alerting_teams(stack)
    email = [i for i, t in enumerate(stack.teams) if t.alerts is not None and t.alerts.email]
    if email and stack.monitoring.smtp is None:
        problems.append(Problem("monitoring.smtp", f"required for e-mail alerts (teams[{email[0]}].alerts.email): "
                                                   "smarthost (host:port) and from"))
    platform = stack.health.alerts
    if platform is not None and platform.email and stack.monitoring.smtp is None and not email:
        problems.append(Problem("monitoring.smtp", "required for e-mail alerts (health.alerts.email): smarthost (host:port) and from"))
    if platform is not None and not stack.monitoring.enabled:
        problems.append(Problem("health.alerts", "needs monitoring.enabled: true (the alerts come from its rules)"))
    if teams and not stack.monitoring.enabled:
        problems.append(Problem(f"teams[{stack.teams.index(teams[0])}].alerts", "needs monitoring.enabled: true (the alerts come from its rules)"))
    return problems
