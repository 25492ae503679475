"""Monitoring the stack deploys: PromQL names, recording and alert rules, dashboards, Alertmanager routing, prices."""
