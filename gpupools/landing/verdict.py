"""What the landing check answers: each step of a job's way to a GPU (`Step`), and whether a team's job of one shape
lands on a pool (`Landing`), with the JSON the plan, `gpupools check` and the stack output show of it.

Apart from the steps so that every step, and every reader of verdicts, shares these two shapes and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One step of a job's way to a GPU, whether it holds, and why."""

    name: str  # queue | schedule | node | ready | device
    ok: bool
    detail: str

    def as_json(self) -> dict:
        return {"step": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True)
class Landing:
    """Whether a team's job of one shape lands on a pool, step by step."""

    team: str | None
    pool: str
    shape: str
    job: str  # what the Job asks for, in words
    steps: tuple[Step, ...]
    flavor: str | None = None

    @property
    def lands(self) -> bool:
        return all(s.ok for s in self.steps)

    @property
    def failing(self) -> Step | None:
        return next((s for s in self.steps if not s.ok), None)

    def as_json(self, chain: bool = True) -> dict:
        """Every key always present (a stack output drops nulls): "" for no team, no flavor, and no failing step.
        `chain`: with every step; the stack output leaves it out (each value costs the engine a round of serialization)."""
        failing = self.failing
        row = {"team": self.team or "", "pool": self.pool, "shape": self.shape, "job": self.job, "lands": self.lands, "flavor": self.flavor or "",
               "step": failing.name if failing else "", "reason": failing.detail if failing else "",
               # How the node comes: kept running by the pool's floor (and whether one more such Job grows the pool), or started.
               "node": next((s.detail for s in self.steps if s.name == "node"), "")}
        if chain:
            row["chain"] = [s.as_json() for s in self.steps]
        return row
