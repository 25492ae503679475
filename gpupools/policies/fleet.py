"""A gpupools fleet (gpupools.fleet): what the FleetManager component records about its workers, judged.

- fleet-manager-quota (mandatory): a team's quota on the manager is not above the sum of its workers' quotas, unless
  the fleet says so on purpose (`aboveWorkers`): the manager would admit jobs no worker can take, and each would hold
  manager quota while it waits (Kueue's docs: the manager's quota "ideally" the workers' sum).
- fleet-origin-unique (mandatory): the fleet names its own MultiKueue origin, not Kueue's default `multikueue`: the
  garbage collector of every manager sharing a worker deletes the remote jobs of its origin it does not know.
- fleet-token-kubeconfig (mandatory): every worker exports a service-account token kubeconfig; Kueue refuses the
  clouds' exec-plugin kubeconfigs (kueue v0.19.2 multikueuecluster.go: "exec plugins are not allowed").
- fleet-workers-reachable (mandatory): the manager's egress CIDRs are in each worker's authorized CIDRs, its endpoint
  is public, or the fleet names the private connectivity it relies on.
- fleet-teams-on-workers (mandatory): every team of the fleet has its namespace and LocalQueue on every worker.
- fleet-queue-checks (mandatory): no manager ClusterQueue Kueue would leave inactive (a ProvisioningRequest check beside
  the MultiKueue check, several MultiKueue checks, one per flavor).
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from gpupools.policies._props import get, items, text

MANAGER = "gpupools:index:FleetManager"


def _fleet(args: ResourceValidationArgs):
    return get(args.props, "fleet") if args.resource_type == MANAGER else None


def validate_quota(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for row in items(get(_fleet(args), "quotas")):
        manager, workers = get(row, "manager"), get(row, "workers")
        if isinstance(manager, (int, float)) and isinstance(workers, (int, float)) and manager > workers and get(row, "onPurpose") is not True:
            report(f"team {text(get(row, 'team'))}'s manager quota of {text(get(row, 'resource'))} ({manager:g}) is above its workers' sum "
                   f"({workers:g}); set aboveWorkers: true in fleet.teams if that is meant", None)


def validate_origin(args: ResourceValidationArgs, report: ReportViolation) -> None:
    fleet = _fleet(args)
    if fleet is None:
        return
    origin = get(fleet, "origin")
    if not isinstance(origin, str) or origin in ("", "multikueue"):
        report("the fleet leaves Kueue's default MultiKueue origin `multikueue`, which every manager that sets none shares: their garbage "
               "collectors delete each other's jobs on a shared worker; set fleet.origin", None)


def validate_token(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for worker in items(get(_fleet(args), "workers")):
        if get(worker, "tokenKubeconfig") is not True:
            report(f"worker {text(get(worker, 'name'))} exports no service-account kubeconfig, and Kueue refuses its exec-plugin kubeconfig "
                   f"(\"exec plugins are not allowed\"); set gpupools:fleetWorker in its stack", None)


def validate_reachable(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for worker in items(get(_fleet(args), "workers")):
        if get(worker, "reachable") is not True:
            report(f"the manager cannot reach worker {text(get(worker, 'name'))}: {text(get(worker, 'reach'))}", None)


def validate_teams(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for worker in items(get(_fleet(args), "workers")):
        missing = [text(t) for t in items(get(worker, "missingTeams"))]
        if missing:
            report(f"worker {text(get(worker, 'name'))} lacks the namespace and LocalQueue of team(s) {', '.join(missing)}: MultiKueue "
                   f"creates each job in the same namespace and LocalQueue on the worker", None)


def validate_queue_checks(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for problem in items(get(_fleet(args), "queueProblems")):
        report(text(problem), None)


def _policy(name: str, description: str, validate) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(name=name, description=description, enforcement_level=EnforcementLevel.MANDATORY, validate=validate)


POLICIES = [
    _policy("fleet-manager-quota", "A fleet manager's quota per team is not above its workers' sum, unless set so on purpose.", validate_quota),
    _policy("fleet-origin-unique", "A fleet's MultiKueue manager names its own origin, not Kueue's shared default.", validate_origin),
    _policy("fleet-token-kubeconfig", "Every fleet worker gives the manager a service-account token kubeconfig (Kueue refuses exec plugins).",
            validate_token),
    _policy("fleet-workers-reachable", "The fleet manager can reach every worker's API endpoint.", validate_reachable),
    _policy("fleet-teams-on-workers", "Every fleet team has its namespace and LocalQueue on every worker.", validate_teams),
    _policy("fleet-queue-checks", "No fleet manager ClusterQueue that Kueue would leave inactive (MultiKueue beside ProvisioningRequest).",
            validate_queue_checks),
]
