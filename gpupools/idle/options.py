"""What `gpupools idle`'s options mean: the window, the least idle time a holder is listed for, the threshold and the
timeout, each refused in one line naming the option.

Apart from the report so that the command checks its input before it asks Prometheus anything.
"""

from __future__ import annotations

import math
import re

from gpupools.idle.promapi import ReportError
from gpupools.idle.text import human_window
from gpupools.stack.errors import Problem

_DURATION = re.compile(r"(?:([0-9]+)w)?(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
_UNITS = (7 * 86400, 86400, 3600, 60, 1)


def _seconds(text: str, option: str) -> int:
    match = _DURATION.fullmatch(text.strip()) if text else None
    if not match or not any(match.groups()):
        raise ReportError(Problem(option, f"{text!r} is not a duration such as 24h, 7d or 90m"), 2)
    return sum(int(g) * unit for g, unit in zip(match.groups(), _UNITS) if g)


def parse_window(text: str) -> int:
    """Seconds in a Prometheus-style duration such as 24h, 7d or 1h30m."""
    seconds = _seconds(text, "--window")
    if seconds < 600:
        raise ReportError(Problem("--window", f"{text!r} is shorter than the 10 minutes an idle judgement needs"), 2)
    return seconds


def parse_min_idle(text: str, window: int) -> int:
    """Seconds a holder must have been idle within the window to be listed (0 lists every idle step)."""
    seconds = _seconds(text, "--min-idle") if text.strip() not in ("0", "") else 0
    if seconds > window:
        raise ReportError(Problem("--min-idle", f"{text!r} is longer than the window ({human_window(window)})"), 2)
    return seconds


def parse_below(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ReportError(Problem("--below", f"{text!r} is not a number"), 2) from None
    if not 0 < value <= 100 or math.isnan(value):
        raise ReportError(Problem("--below", f"{text!r} must be a utilization percentage above 0 and at most 100"), 2)
    return value


def parse_timeout(text: str) -> int:
    seconds = _seconds(text, "--timeout")
    if not 1 <= seconds <= 3600:
        raise ReportError(Problem("--timeout", f"{text!r} must be between 1s and 1h"), 2)
    return seconds
