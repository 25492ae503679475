"""Grouping by team (`gpupools idle --by team`): the stack's teams chosen, the report's holders added up per team by
the namespace each team owns, and the table of those totals.

Apart from the report, which knows nothing of the stack: only this grouping reads the stack's teams.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpupools.idle.promapi import ReportError
from gpupools.idle.rows import UNALLOCATED, IdleGpu, Report
from gpupools.idle.text import reserved_lines, total_line
from gpupools.stack.errors import Problem


NO_TEAM = "(no team)"


def parse_by(text: str, teams: dict[str, str] | None) -> list[str] | None:
    """`--by team` (every team) or `--by team=a,b` (those teams), against the stack's teams (name -> namespace).

    Returns the teams to show, every one for plain `team`.
    """
    kind, _, names = text.partition("=")
    if kind != "team":
        raise ReportError(Problem("--by", f"{text!r}: group by `team` or `team=NAME[,NAME]`"), 2)
    if teams is None:
        raise ReportError(Problem("--by", "grouping by team needs the stack's teams: add --stack NAME or --config FILE"), 2)
    if not teams:
        raise ReportError(Problem("--by", "the stack defines no gpupools:teams"), 2)
    chosen = [n for n in names.split(",") if n] if names else list(teams)
    unknown = [n for n in chosen if n not in teams]
    if unknown:
        raise ReportError(Problem("--by", f"unknown team {unknown[0]!r}; the stack's teams: {', '.join(sorted(teams))}"), 2)
    return chosen


@dataclass
class TeamTotal:
    team: str
    namespace: str | None
    holders: int
    gpus_idle: float
    gpu_hours_idle: float
    wasted_usd: float


def by_team(report: Report, teams: dict[str, str], chosen: list[str]) -> list[TeamTotal]:
    """Idle GPUs, GPU-hours and waste per team (by the namespace each team owns), most wasteful first; holders in no
    team's namespace and unallocated GPUs get a line of their own when every team is shown."""
    owner = {ns: team for team, ns in teams.items()}
    rows: dict[str, list[IdleGpu]] = {}
    for g in report.idle:
        team = UNALLOCATED if g.namespace is None else owner.get(g.namespace, NO_TEAM)
        rows.setdefault(team, []).append(g)
    names = chosen + ([NO_TEAM, UNALLOCATED] if chosen == list(teams) else [])
    totals = [TeamTotal(team=name, namespace=teams.get(name), holders=len(rows.get(name, [])),
                        gpus_idle=round(sum(g.share or 0 for g in rows.get(name, [])), 2),
                        gpu_hours_idle=round(sum(g.gpu_hours_idle or 0 for g in rows.get(name, [])), 2),
                        wasted_usd=round(sum(g.exact_usd or 0 for g in rows.get(name, [])), 2))
              for name in names if name in teams or rows.get(name)]
    return sorted(totals, key=lambda t: (-t.wasted_usd, -t.gpu_hours_idle, t.team))


def format_teams(report: Report, totals: list[TeamTotal]) -> str:
    header = ("TEAM", "NAMESPACE", "HOLDERS", "GPUS IDLE", "GPU-HOURS", "WASTE (USD)")
    rows = [(t.team, t.namespace or "-", str(t.holders), f"{t.gpus_idle:g}", f"{t.gpu_hours_idle:.1f}", f"{t.wasted_usd:,.2f}") for t in totals]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) if i >= 2 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip() for row in [header, *rows]]
    lines.append(total_line(report))
    lines += reserved_lines(report)
    return "\n".join(lines)
