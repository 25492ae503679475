"""The idle report's rows and totals on edge cases (gpupools/idle), without a Prometheus: partial idleness,
gaps in a holder's samples, several holders of one GPU, MIG and vGPU shares, KAI fractions, team totals, and the
option boundaries. Each test names what it protects, so that a flipped comparison, a negated condition, a dropped line
or a misspelled key there fails here.

`collect_raw` and `collect` are driven by a stand-in Prometheus that answers each question the report asks (told apart
by its PromQL) from a table of holders, and keeps only the GPUs a question names, as Prometheus would."""

from __future__ import annotations

import math
import re

import pytest

from gpupools.idle.counting import Holder, _Tally, _key, collect, collect_raw, kind_of
from gpupools.idle.kai_fractions import Sharer, attribute_fractions, gpu_groups
from gpupools.idle.options import parse_below, parse_min_idle, parse_timeout, parse_window
from gpupools.idle.plotting import namespace_series
from gpupools.idle.promapi import ReportError
from gpupools.idle.questions import Steps, below_in, gpu_regex, low_gpus
from gpupools.idle.report import grid_for, raw_peaks_cheaper, step_for, whole_steps
from gpupools.idle.reserved import ReservedIdle, reserved_idle
from gpupools.idle.rows import IdleGpu, Report, build_report, node_pools, vgpus_per_gpu
from gpupools.idle.teams import by_team, parse_by
from gpupools.idle.text import format_table, fraction, human_window, total_line
from gpupools.monitoring.prices import gpu_list_prices
from gpupools.monitoring.promql import KAI_RESERVATION_NAMESPACE as KAI_RESERVATIONS, KSM_GPU_FRACTION, KSM_GPU_GROUP

L4 = gpu_list_prices()["L4"].usd_per_hour
A100 = gpu_list_prices()["A100-40GB"].usd_per_hour


def labels(node: str, uuid: str, ns: str | None = None, pod: str | None = None, model: str = "NVIDIA L4", gpu: str = "0", **more) -> dict:
    out = {"Hostname": node, "gpu": gpu, "UUID": uuid, "modelName": model, **more}
    if ns:
        out.update(namespace=ns, pod=pod or f"{ns}-pod", container="main")
    return out


def holder(idle: int, seen: int, peak: float = 2.0, share: float | None = None, **kw) -> Holder:
    return Holder(labels(**kw), seen=seen, idle=idle, share=share, peak=peak)


GRID = Steps(end=1_000_000.0, step=60, count=60)  # one hour of one-minute steps


def rows(report: Report) -> dict[str | None, IdleGpu]:
    return {g.pod: g for g in report.idle}


# --------------------------------------------------------------------------------------------------------------------
# Rows: who is listed, and with what share of a GPU


def test_a_holder_idle_part_of_the_hour_is_listed_with_its_idle_hours_and_its_peak():
    partly = holder(idle=30, seen=60, peak=73.456, node="n1", uuid="U1", ns="a", pod="p")
    (row,) = build_report([partly], GRID, 3600, 5.0).idle
    assert (row.unit, row.share, row.hours_idle, row.hours_seen, row.gpu_hours_idle) == ("gpu", 1.0, 0.5, 1.0, 0.5)
    assert row.max_utilization == 73.46 and row.catalog_gpu == "L4" and row.pool is None
    assert row.usd_per_hour == round(L4, 4) and row.wasted_usd == round(L4 * 0.5, 2) and row.exact_usd == pytest.approx(L4 * 0.5)
    assert (row.namespace, row.pod, row.node, row.gpu, row.model) == ("a", "p", "n1", "0", "NVIDIA L4")


def test_whole_window_lists_only_holders_idle_at_every_step_they_were_seen():
    always = holder(idle=40, seen=40, node="n1", uuid="U1", ns="a", pod="always")  # a gap: seen 40 of 60 steps, idle at all 40
    partly = holder(idle=39, seen=40, node="n1", uuid="U2", ns="a", pod="partly")
    report = build_report([always, partly], GRID, 3600, 5.0, whole_window=True)
    assert list(rows(report)) == ["always"] and rows(report)["always"].hours_seen == round(40 / 60, 4)
    assert set(rows(build_report([always, partly], GRID, 3600, 5.0))) == {"always", "partly"}


@pytest.mark.parametrize("idle, listed", [(10, True), (9, False)])
def test_min_idle_is_a_floor_the_holder_may_meet_exactly(idle, listed):
    h = holder(idle=idle, seen=60, node="n1", uuid="U1", ns="a", pod="p")
    assert bool(build_report([h], GRID, 3600, 5.0, min_idle=600).idle) is listed


def test_holders_never_idle_or_never_seen_are_not_rows_but_their_gpus_are_counted():
    busy = holder(idle=0, seen=60, node="n1", uuid="U1", ns="a", pod="busy")
    unseen = holder(idle=5, seen=0, node="n1", uuid="U2", ns="a", pod="unseen")
    bare = Holder({"Hostname": "n2", "UUID": "U3"})  # a GPU with no low sample: seen, no holder
    twice = holder(idle=3, seen=60, node="n2", uuid="U4", ns="b", pod="x")
    also = holder(idle=3, seen=60, node="n2", uuid="U4", ns="c", pod="y")  # the same GPU, another holder
    report = build_report([busy, unseen, bare, twice, also], GRID, 3600, 5.0)
    assert set(rows(report)) == {"x", "y"} and report.gpus_seen == 4
    # A GPU is its node and its UUID: two nodes whose exporters report no UUID are two GPUs.
    assert build_report([Holder({"Hostname": "n1"}), Holder({"Hostname": "n2"})], GRID, 3600, 5.0).gpus_seen == 2


def test_a_time_sliced_gpu_is_split_among_its_holders_and_a_lone_holder_keeps_all_of_it():
    # Two pods on one GPU, idle at 60 and 20 steps, holding half of it at each of those steps.
    a = holder(idle=60, seen=60, share=30.0, node="n1", uuid="U1", ns="a", pod="a")
    b = holder(idle=20, seen=60, share=10.0, node="n1", uuid="U1", ns="b", pod="b")
    alone = holder(idle=60, seen=60, share=60.0 - 1e-7, node="n2", uuid="U2", ns="c", pod="c")  # rounding, not sharing
    report = build_report([a, b, alone], GRID, 3600, 5.0)
    got = rows(report)
    assert (got["a"].unit, got["a"].share, got["a"].gpu_hours_idle, got["a"].hours_idle) == ("time-slice", 0.5, 0.5, 1.0)
    assert (got["b"].unit, got["b"].share, got["b"].gpu_hours_idle) == ("time-slice", 0.5, round(10 / 60, 4))
    assert got["c"].unit == "gpu" and got["c"].share == 1.0
    assert report.gpus_idle == 2.0 and report.gpu_hours_idle == round(0.5 + 10 / 60 + 1.0, 2)
    assert report.total_wasted == round(L4 * (0.5 + 10 / 60 + (60 - 1e-7) / 60), 2)


def test_mig_slices_count_as_their_profiles_fraction_and_an_unknown_profile_as_unknown():
    slice_ = holder(idle=60, seen=60, node="n1", uuid="U1", ns="a", pod="mig", model="NVIDIA A100-SXM4-40GB", GPU_I_PROFILE="1g.5gb", GPU_I_ID="7")
    odd = holder(idle=60, seen=60, node="n1", uuid="U1", ns="a", pod="odd", model="NVIDIA A100-SXM4-40GB", GPU_I_PROFILE="9g.99gb", GPU_I_ID="8")
    report = build_report([slice_, odd], GRID, 3600, 5.0)
    got = rows(report)
    assert (got["mig"].unit, got["mig"].share, got["mig"].gpu, got["mig"].wasted_usd) == ("mig", round(1 / 7, 4), "0 1g.5gb", round(A100 / 7, 2))
    assert (got["odd"].share, got["odd"].gpu_hours_idle, got["odd"].usd_per_hour, got["odd"].wasted_usd) == (None, None, None, None)
    assert report.idle[-1].pod == "odd"  # unknown cost last
    assert total_line(report).endswith("(1 with a GPU model or MIG profile not in the catalog, not counted)")


def test_vgpus_count_as_their_pools_fraction_and_only_with_a_pod():
    vgpu = holder(idle=60, seen=60, node="n1", uuid="U1", ns="a", pod="v")
    free = holder(idle=60, seen=60, node="n1", uuid="U2")  # no pod: the whole GPU, unallocated
    report = build_report([vgpu, free], GRID, 3600, 5.0, vgpus={"share": 4}, pools={"n1": "share"})
    got = rows(report)
    assert (got["v"].unit, got["v"].share, got["v"].pool) == ("vgpu", 0.25, "share")
    assert (got[None].unit, got[None].share, got[None].pool, got[None].namespace) == ("gpu", 1.0, "share", None)
    # The pool label on the series wins over the node's pool.
    labelled = holder(idle=60, seen=60, node="n1", uuid="U1", ns="a", pod="v", pool="other")
    assert build_report([labelled], GRID, 3600, 5.0, vgpus={"share": 4}, pools={"n1": "share"}).idle[0].unit == "gpu"


def test_an_unknown_model_is_listed_without_a_price():
    odd = holder(idle=60, seen=60, node="n1", uuid="U1", ns="a", pod="p", model="Some GPU")
    (row,) = build_report([odd], GRID, 3600, 5.0).idle
    assert (row.catalog_gpu, row.share, row.usd_per_hour, row.wasted_usd) == (None, 1.0, None, None)
    assert math.isnan(build_report([Holder(labels("n1", "U1", "a", "p"), seen=60, idle=60)], GRID, 3600, 5.0).idle[0].max_utilization)


def test_rows_go_most_wasteful_first_then_longest_idle_then_by_namespace_and_pod():
    hs = [holder(idle=10, seen=60, node="n", uuid="U1", ns="b", pod="short"),
          holder(idle=60, seen=60, node="n", uuid="U2", ns="b", pod="long"),
          holder(idle=60, seen=60, node="n", uuid="U3", ns="a", pod="long2"),
          holder(idle=60, seen=60, node="n", uuid="U4", ns="a", pod="t4", model="Tesla T4")]
    assert [g.pod for g in build_report(hs, GRID, 3600, 5.0).idle] == ["long2", "long", "t4", "short"]


# --------------------------------------------------------------------------------------------------------------------
# KAI fractions and team totals


def reservation(pod: str, idle: int = 60) -> Holder:
    return holder(idle=idle, seen=60, node="n1", uuid=f"U-{pod}", ns=KAI_RESERVATIONS, pod=pod)


def test_a_kai_reservations_idle_gpu_goes_to_the_pods_sharing_it_by_their_fractions():
    report = build_report([reservation("res-1"), reservation("res-2"), reservation("res-3")], GRID, 3600, 5.0)
    groups = {"g1": [Sharer(KAI_RESERVATIONS, "res-1", None), Sharer("a", "a1", 0.25), Sharer("a", "a2", None),
                     Sharer("b", "b1", 0.5)],
              "g2": [Sharer(KAI_RESERVATIONS, "res-2", None)],  # held for nobody
              "g3": [Sharer("c", "c1", 0.75), Sharer("c", "c2", 0.75)]}  # res-3 is in no group
    attribute_fractions(report, groups)
    got = {(g.namespace, g.pod): g for g in report.idle}
    # a1 0.25 and the unknown a2 takes what is left (0.25), b1 0.5: namespace a holds half the GPU, b the other half.
    assert got[("a", "a1, a2")].share == 0.5 and got[("a", "a1, a2")].unit == "kai-fraction"
    assert got[("b", "b1")].share == 0.5 and got[("b", "b1")].wasted_usd == round(L4 * 0.5, 2)
    assert got[(KAI_RESERVATIONS, "res-2")].unit == "gpu" and got[(KAI_RESERVATIONS, "res-3")].unit == "gpu"
    assert len(report.idle) == 4 and report.total_wasted == round(L4 * 3, 2)


def test_fractions_that_add_up_past_one_are_scaled_down_to_the_one_gpu():
    report = build_report([reservation("res-1")], GRID, 3600, 5.0)
    attribute_fractions(report, {"g": [Sharer(KAI_RESERVATIONS, "res-1", None), Sharer("a", "a1", 0.75), Sharer("b", "b1", 0.75),
                                         Sharer("b", "b2", None)]})
    got = {g.namespace: g for g in report.idle}
    assert got["a"].share == 0.5 and got["b"].share == 0.5 and got["b"].pod == "b1, b2"  # b2 gets nothing left
    assert [g.namespace for g in report.idle] == ["a", "b"]


TEAMS = {"vision": "vision", "search": "search-prod"}


def test_team_totals_count_each_teams_namespace_and_the_rest_apart():
    hs = [holder(idle=60, seen=60, node="n", uuid="U1", ns="vision", pod="v1"),
          holder(idle=30, seen=60, node="n", uuid="U2", ns="vision", pod="v2"),
          holder(idle=60, seen=60, node="n", uuid="U3", ns="search-prod", pod="s1", model="Tesla T4"),
          holder(idle=60, seen=60, node="n", uuid="U4", ns="other", pod="o1"),
          holder(idle=60, seen=60, node="n", uuid="U5")]  # unallocated
    report = build_report(hs, GRID, 3600, 5.0)
    totals = {t.team: t for t in by_team(report, TEAMS, list(TEAMS))}
    assert [t.team for t in by_team(report, TEAMS, list(TEAMS))] == ["vision", "(no team)", "(unallocated)", "search"]
    assert (totals["vision"].holders, totals["vision"].gpus_idle, totals["vision"].gpu_hours_idle) == (2, 2.0, 1.5)
    assert totals["vision"].wasted_usd == round(L4 * 1.5, 2) and totals["vision"].namespace == "vision"
    assert (totals["(no team)"].holders, totals["(unallocated)"].holders, totals["(unallocated)"].namespace) == (1, 1, None)
    # Some teams only: no lines for the rest; a chosen team without idle GPUs still gets its line.
    only = by_team(report, TEAMS, ["search"])
    assert [(t.team, t.namespace, t.holders) for t in only] == [("search", "search-prod", 1)]
    assert [t.holders for t in by_team(build_report([], GRID, 3600, 5.0), TEAMS, list(TEAMS))] == [0, 0]


@pytest.mark.parametrize("text, teams, says", [
    ("team", None, "grouping by team needs the stack's teams"),
    ("team", {}, "the stack defines no gpupools:teams"),
    ("pool", TEAMS, "'pool': group by `team` or `team=NAME[,NAME]`"),
    ("team=vision,nobody", TEAMS, "unknown team 'nobody'; the stack's teams: search, vision"),
])
def test_by_refuses_what_it_cannot_group_by_naming_the_option(text, teams, says):
    with pytest.raises(ReportError) as caught:
        parse_by(text, teams)
    assert caught.value.problem.path == "--by" and caught.value.problem.message.startswith(says)


def test_by_team_takes_every_team_or_the_named_ones():
    assert parse_by("team", TEAMS) == ["vision", "search"]
    assert parse_by("team=search", TEAMS) == ["search"] and parse_by("team=search,", TEAMS) == ["search"]


# --------------------------------------------------------------------------------------------------------------------
# The table, the totals line, the reserved nodes


def test_the_total_line_says_how_long_holders_were_idle():
    h = holder(idle=60, seen=60, node="n", uuid="U1", ns="a", pod="p")
    base = build_report([h], GRID, 3600, 5.0)
    assert total_line(base) == (f"total: 1 of 1 GPUs held idle (below 5% at some point in the last 1h), 1.0 GPU-hours idle, "
                                  f"${round(L4, 2):,.2f} wasted at list price")
    assert "for at least 10m in the last 1h" in total_line(build_report([h], GRID, 3600, 5.0, min_idle=600))
    assert "for the whole window in the last 1h" in total_line(build_report([h], GRID, 3600, 5.0, min_idle=600, whole_window=True))


def test_the_table_marks_shares_unallocated_gpus_and_unknown_prices():
    hs = [holder(idle=60, seen=60, share=20.0, node="n", uuid="U1", ns="a", pod="p"),
          holder(idle=60, seen=60, node="n", uuid="U2", model="Some GPU")]
    report = build_report(hs, GRID, 3600, 5.0)
    report.reserved = [ReservedIdle("h100", 1.5, 98.32, 147.48)]
    lines = format_table(report).splitlines()
    assert lines[0].split() == ["NAMESPACE", "POD", "NODE", "POOL", "GPU", "MODEL", "SHARE", "HOURS", "IDLE", "GPU-HOURS", "MAX", "UTIL", "WASTE", "(USD)"]
    assert lines[1].split()[:7] == ["a", "p", "n", "-", "0", "NVIDIA", "L4"] and "1/3 time-slice" in lines[1]
    assert lines[2].split()[:2] == ["-", "(unallocated)"] and lines[2].split()[-1] == "?" and " 1 " in lines[2]
    assert lines[-1] == ("reserved: pool h100 left 1.5 reserved node(s) unused on average, $147.48 at list price (reservations are billed "
                         "whether used or not; one bought cheaper costs less)")
    assert report.reserved_wasted == 147.48
    assert report.as_json()["reserved_wasted_usd"] == 147.48 and report.as_json()["gpus_idle"] == round(1 / 3 + 1, 2)


@pytest.mark.parametrize("share, text", [(None, "?"), (1.0, "1"), (0.99995, "1"), (0.5, "1/2"), (1 / 7, "1/7"), (1 / 3, "1/3"),
                                         (2 / 3, "2/3"), (0.9, "9/10"), (0.9999, "1")])
def test_shares_read_as_fractions_people_say(share, text):
    assert fraction(share) == text


@pytest.mark.parametrize("seconds, text", [(3600, "1h"), (86400, "24h"), (2 * 86400, "48h"), (3 * 86400, "3d"), (5400, "90m"),
                                           (61, "61s"), (600, "10m")])
def test_windows_read_in_the_largest_whole_unit(seconds, text):
    assert human_window(seconds) == text


# --------------------------------------------------------------------------------------------------------------------
# Options: one line naming the option, exit 2


def refused(fn, *args) -> str:
    with pytest.raises(ReportError) as caught:
        fn(*args)
    assert caught.value.code == 2
    return f"{caught.value.problem.path}: {caught.value.problem.message}"


def test_option_bounds_are_inclusive_where_the_help_says_so():
    assert parse_window("10m") == 600 and parse_window("1w1d") == 8 * 86400 and parse_window("1h30m") == 5400
    assert refused(parse_window, "9m59s") == "--window: '9m59s' is shorter than the 10 minutes an idle judgement needs"
    assert refused(parse_window, "soon") == "--window: 'soon' is not a duration such as 24h, 7d or 90m"
    assert refused(parse_window, "") == "--window: '' is not a duration such as 24h, 7d or 90m"
    assert parse_min_idle("0", 3600) == 0 and parse_min_idle("1h", 3600) == 3600
    assert refused(parse_min_idle, "61m", 3600) == "--min-idle: '61m' is longer than the window (1h)"
    assert parse_below("100") == 100.0 and parse_below("0.5") == 0.5
    for text in ("0", "100.1", "-1", "nan"):
        assert refused(parse_below, text).startswith(f"--below: {text!r} must be a utilization percentage above 0 and at most 100")
    assert refused(parse_below, "five") == "--below: 'five' is not a number"
    assert parse_timeout("1s") == 1 and parse_timeout("1h") == 3600
    assert refused(parse_timeout, "61m") == "--timeout: '61m' must be between 1s and 1h"
    assert refused(parse_timeout, "0s") == "--timeout: '0s' must be between 1s and 1h"


# --------------------------------------------------------------------------------------------------------------------
# The grid: how finely steps are judged, and where gaps are filled


def test_steps_and_their_pieces_add_up_to_the_window():
    assert step_for(86400) == 60 and step_for(7 * 86400) == 420 and step_for(600) == 60
    grid = Steps(end=10_000.0, step=60, count=3000, fill=True)
    pieces = grid.chunks()
    assert [p.count for p in pieces] == [1440, 1440, 120] and [p.end for p in pieces] == [10_000.0, 10_000.0 - 1440 * 60, 10_000.0 - 2880 * 60]
    assert all(p.fill and p.step == 60 for p in pieces)
    assert [p.count for p in Steps(0.0, 60, 10).chunks(4)] == [3, 3, 3, 1] and [p.count for p in Steps(0.0, 60, 2).chunks(4)] == [1, 1]


@pytest.mark.parametrize("fastest, slowest, step, fill", [
    (None, None, 60, True),   # nothing probed: one-minute steps, gaps filled rather than lost
    (60, 60, 60, False),      # every GPU scraped each minute
    (60, 59, 60, False),      # one scrape missed is not a slower interval
    (60, 58, 60, True),       # a GPU scraped more slowly: its gaps are filled
    (120, 120, 60, False),    # scraped every 30 s: steps stay one minute
    (30, 30, 120, False),     # every 2 minutes: 2-minute steps
    (4, 4, 300, True),        # every 15 minutes: steps stop at the 5-minute lookback, and gaps are filled
])
def test_steps_are_no_shorter_than_the_scrape_interval(fastest, slowest, step, fill):
    grid = grid_for(86400, 1_000_000.0, fastest, slowest)
    assert (grid.step, grid.fill, grid.count, grid.end) == (step, fill, 86400 // step, 1_000_000.0)


def test_raw_peaks_are_cheaper_only_for_gpus_scraped_less_than_once_a_step():
    assert raw_peaks_cheaper(59.0) is True and raw_peaks_cheaper(60.0) is False and raw_peaks_cheaper(None) is False
    assert whole_steps(86400) is True and whole_steps(3660) is False and whole_steps(3600) is True


def test_low_gpus_and_the_threshold_in_each_metrics_unit():
    assert below_in(1, 5.0) == 5.0 and below_in(100, 5.0) == 0.05
    mins = [("min 1", [{"metric": {"UUID": "A"}, "value": 4.9}, {"metric": {"UUID": "B"}, "value": 5.0},
                       {"metric": {"UUID": "C"}, "value": -math.inf}, {"metric": {"UUID": "D"}, "value": math.nan}]),
            ("min 100", [{"metric": {"UUID": "E"}, "value": 0.049}, {"metric": {"UUID": "F"}, "value": 0.05}])]
    assert low_gpus(mins, 5.0) == {"A", "C", "E"}


@pytest.mark.parametrize("peak, fill, kind", [(4.0, False, "idle"), (5.0 * (1 - 1e-9), False, "judged"), (5.0, False, "judged"),
                                              (4.0, True, "judged"), (math.nan, False, "judged"), (math.inf, False, "judged")])
def test_a_holder_on_a_low_gpu_is_idle_throughout_only_with_its_peak_clearly_below(peak, fill, kind):
    h = Holder({"UUID": "A"}, peak=peak)
    assert kind_of(h, {"A"}, 5.0, fill) == kind
    assert kind_of(h, {"B"}, 5.0, fill) == "busy"


def test_answers_add_up_per_holder_capped_at_the_grid_and_non_finite_values_count_nothing():
    tally = _Tally(Steps(0.0, 60, 10))
    a, b = {"UUID": "A", "pod": "a", "namespace": ""}, {"UUID": "B"}
    tally.add([("idle", [{"metric": a, "value": 6.4}, {"metric": b, "value": math.nan}]), ("idle", [{"metric": a, "value": 6.0}]),
               ("seen", [{"metric": a, "value": 3.0}]), ("peak", [{"metric": a, "value": 7.0}]), ("peak", [{"metric": a, "value": 3.0}]),
               ("peak", [{"metric": b, "value": math.inf}]), ("share", [{"metric": a, "value": 0.5}]), ("share", [{"metric": a, "value": 0.25}])])
    ha, hb = tally.holders[_key(a)], tally.holders[_key(b)]
    assert (ha.idle, ha.seen, ha.peak, ha.share, ha.labels) == (10, 3, 7.0, 0.75, {"UUID": "A", "pod": "a"})
    assert (hb.idle, hb.seen, hb.share) == (0, 0, None) and math.isnan(hb.peak)


def test_gpu_lists_are_literal_sorted_and_bounded():
    assert gpu_regex(["GPU-b", "GPU-a.1"], 100) == "GPU-a\\\\.1|GPU-b"
    assert gpu_regex(["GPU-b", "GPU-a"], 11) == "GPU-a|GPU-b" and gpu_regex(["GPU-b", "GPU-a"], 10) is None
    assert gpu_regex([], 100) is None


# --------------------------------------------------------------------------------------------------------------------
# Collecting from raw samples and from recorded steps, against a stand-in Prometheus


class Holding:
    """One holder's numbers as a Prometheus holding its samples would answer them."""

    def __init__(self, labels: dict, low: float, peak: float, idle: int, seen: int = 60, share: float | None = None, nan: bool = False):
        self.labels, self.low, self.peak, self.idle, self.seen, self.share, self.nan = labels, low, peak, idle, seen, share, nan


class StandIn:
    """Answers the report's questions from `holdings`, keeping only the GPUs a question names (`UUID=~"a|b"`)."""

    method = "POST"

    def __init__(self, holdings: list[Holding]):
        self.holdings, self.asked = holdings, []

    def query(self, expr: str, at: float) -> list[dict]:
        self.asked.append(expr)
        named = re.search(r'UUID=~"([^"]*)"', expr)
        keep = [h for h in self.holdings if named is None or h.labels["UUID"] in named.group(1).split("|")]
        if "* 0 != 0" in expr:
            kind = "nan"
        elif expr.startswith("sum_over_time(((") or "sum_over_time(gpupools:gpu_idle_step_share" in expr:
            kind = "share"
        elif "min by (Hostname, UUID)" in expr:
            if "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in expr:
                return []
            lows: dict[tuple, float] = {}
            for h in keep:
                gpu = (h.labels["Hostname"], h.labels["UUID"])
                lows[gpu] = min(lows.get(gpu, math.inf), h.low)
            return [{"metric": {"Hostname": n, "UUID": u}, "value": v} for (n, u), v in lows.items()]
        elif "gpu_idle_step_share" in expr or ("count_over_time((" in expr and " < " in expr):
            kind = "idle"
        elif "count_over_time(" in expr:
            kind = "seen"
        elif "max_over_time(" in expr:
            kind = "peak"
        else:
            raise AssertionError(f"unexpected question: {expr}")
        out = []
        for h in keep:
            value = {"nan": 1.0 if h.nan else None, "share": h.share, "idle": h.idle or None, "seen": h.seen, "peak": h.peak}[kind]
            if value is not None:
                out.append({"metric": dict(h.labels), "value": float(value)})
        return out


def scenario() -> list[Holding]:
    return [
        Holding(labels("n1", "U1", "a", "whole"), low=2, peak=2, idle=60),                 # idle at every step
        Holding(labels("n1", "U2", "a", "busy"), low=50, peak=90, idle=0),                 # never low: nothing asked of it
        Holding(labels("n2", "U3", "b", "partly"), low=1, peak=80, idle=20),               # judged step by step
        Holding(labels("n2", "U4", "c", "quiet"), low=1, peak=3, idle=60, share=30.0),     # time-sliced with `loud`
        Holding(labels("n2", "U4", "d", "loud"), low=1, peak=90, idle=15, share=7.5),
        Holding(labels("n3", "U5", "e", "nan"), low=1, peak=2, idle=50, nan=True),         # a step with only NaN samples
    ]


def by_pod(holders: list[Holder]) -> dict:
    return {h.labels.get("pod", h.labels.get("UUID")): (h.idle, h.seen, h.share) for h in holders}


def test_raw_samples_count_idle_steps_where_a_holder_may_be_idle_and_nowhere_else():
    prom = StandIn(scenario())
    got = by_pod(collect_raw(prom, GRID, 5.0, least=1))
    assert got == {"whole": (60, 60, None), "partly": (20, 60, None), "quiet": (60, 60, 30.0), "loud": (15, 60, 7.5),
                   "nan": (50, 60, None), "U2": (0, 0, None)}
    # The busy GPU's holder is never asked about: its only appearance is the GPU seen.
    assert not any("busy" in str(a) for a in prom.asked)
    report = build_report(collect_raw(StandIn(scenario()), GRID, 5.0), GRID, 3600, 5.0)
    assert report.gpus_seen == 5 and [g.pod for g in report.idle] == ["whole", "nan", "quiet", "partly", "loud"]
    assert rows(report)["quiet"].share == 0.5 and rows(report)["loud"].unit == "time-slice" and rows(report)["whole"].unit == "gpu"


def test_raw_samples_are_not_counted_again_for_holders_below_min_idle():
    got = by_pod(collect_raw(StandIn(scenario()), GRID, 5.0, least=30))
    # partly (20 idle steps) and loud (15) are judged but not listed: their seen steps are not asked again.
    assert got["partly"] == (20, 0, None) and got["loud"][0] == 15 and got["whole"] == (60, 60, None)
    report = build_report(collect_raw(StandIn(scenario()), GRID, 5.0, least=30), GRID, 3600, 5.0, min_idle=1800)
    assert [g.pod for g in report.idle] == ["whole", "nan", "quiet"]


def test_without_a_low_sample_nothing_but_the_gpus_is_asked():
    quiet = [Holding(labels("n1", "U1", "a", "p"), low=40, peak=90, idle=0)]
    prom = StandIn(quiet)
    got = collect_raw(prom, GRID, 5.0)
    assert [h.labels for h in got] == [{"Hostname": "n1", "UUID": "U1"}] and len(prom.asked) == 2  # the two metrics' lows
    assert build_report(got, GRID, 3600, 5.0).gpus_seen == 1


def test_recorded_steps_ask_seen_steps_and_shares_only_of_listed_and_shared_gpus():
    prom = StandIn(scenario())
    got = by_pod(collect(prom, GRID, 5.0, least=1, recorded=True))
    assert got == {"whole": (60, 60, None), "partly": (20, 60, None), "quiet": (60, 60, 30.0), "loud": (15, 60, 7.5),
                   "nan": (50, 60, None), "busy": (0, 0, None)}  # busy: asked for its peak only
    shares = [a for a in prom.asked if "sum_over_time(gpupools:gpu_idle_step_share" in a]
    assert shares and all('UUID=~"U4"' in a for a in shares)  # only the GPU two holders shared
    # Nobody idle long enough: no seen steps are asked at all.
    prom = StandIn(scenario())
    got = by_pod(collect(prom, GRID, 5.0, least=61, recorded=True))
    assert all(seen == 0 for _, seen, _ in got.values()) and not any("gpupools:gpu_utilization_step_max" in a and "count_over_time" in a
                                                                     for a in prom.asked)


# --------------------------------------------------------------------------------------------------------------------
# The other questions: the plot's series, vGPU shares, node pools, reserved nodes, KAI's GPU groups


class Canned:
    """Answers each question with the first canned answer whose text the question contains."""

    method = "POST"

    def __init__(self, answers: dict[str, list[dict]], series: list[dict] | None = None):
        self.answers, self.series, self.asked = answers, series or [], []

    def query(self, expr: str, at: float) -> list[dict]:
        self.asked.append(expr)
        return next((a for text, a in self.answers.items() if text in expr), [])

    def query_range(self, expr: str, start: float, end: float, step: int) -> list[dict]:
        self.asked.append((expr, start, end, step))
        return self.series


def test_the_plot_has_one_series_per_namespace_in_name_order_with_gaps_as_nan():
    series = [{"metric": {"namespace": "b"}, "values": [(1.0, 3.0), (2.0, math.inf)]}, {"metric": {}, "values": [(1.0, 1.0)]},
              {"metric": {"namespace": "a"}, "values": [(1.0, 2.0)]}]
    prom = Canned({}, series)
    got = namespace_series(prom, Steps(end=600.0, step=60, count=10))
    assert list(got) == ["(unallocated)", "a", "b"] and got["a"] == [(1.0, 2.0)] and got["b"][0] == (1.0, 3.0) and math.isnan(got["b"][1][1])
    expr, start, end, step = prom.asked[0]
    assert (start, end, step) == (60.0, 600.0, 60) and expr.startswith("avg by (namespace) (") and "DCGM_FI_DEV_GPU_UTIL" in expr
    namespace_series(prom, Steps(end=600.0, step=60, count=10), recorded_below=5.0)
    assert prom.asked[1][0].startswith('avg by (namespace) (last_over_time(gpupools:gpu_utilization_step_max:percent{gpupools_idle_below="5"}[60s]))')


def test_vgpu_shares_node_pools_and_reserved_nodes_keep_only_what_they_can_use():
    prom = Canned({"pool_vgpus": [{"metric": {"pool": "share"}, "value": 4.0}, {"metric": {"pool": "half"}, "value": 0.5},
                                  {"metric": {}, "value": 4.0}, {"metric": {"pool": "nan"}, "value": math.nan}, {"metric": {"pool": "one"}, "value": 1.0}]})
    assert vgpus_per_gpu(prom, 0.0, 3600) == {"share": 4, "one": 1}
    prom = Canned({"kube_node_labels": [{"metric": {"Hostname": "n1", "pool": "a"}, "value": 1.0}, {"metric": {"Hostname": "n2"}, "value": 1.0},
                                        {"metric": {"pool": "b"}, "value": 1.0}]})
    assert node_pools(prom, 0.0, 3600) == {"n1": "a"}
    prices = [{"metric": {"pool": "h100"}, "value": 98.0}, {"metric": {"pool": "a100"}, "value": 40.0}, {"metric": {}, "value": 1.0}]
    unused = [{"metric": {"pool": "h100"}, "value": 0.5}, {"metric": {"pool": "a100"}, "value": 2.0}, {"metric": {"pool": "l4"}, "value": 3.0},
              {"metric": {"pool": "h200"}, "value": 0.0}]
    prom = Canned({"last_over_time(gpupools:": prices, "avg_over_time(": unused})
    got = reserved_idle(prom, 0.0, 7200)
    assert got == [ReservedIdle("a100", 2.0, 40.0, 160.0), ReservedIdle("h100", 0.5, 98.0, 98.0)]
    assert 'pool=~"a100|h100"' in prom.asked[1] or "a100|h100" in prom.asked[1]
    empty = Canned({})
    assert reserved_idle(empty, 0.0, 7200) == [] and len(empty.asked) == 1  # no recorded prices: nothing more is asked


def test_kais_gpu_groups_name_their_pods_and_read_only_fractions_kai_takes():
    group, fraction_label = KSM_GPU_GROUP, KSM_GPU_FRACTION
    labelled = [{"metric": {"namespace": "a", "pod": "a1", group: "g1"}, "value": 1.0},
                {"metric": {"namespace": "a", "pod": "a2", group: "g1"}, "value": 1.0},
                {"metric": {"namespace": KAI_RESERVATIONS, "pod": "res", group: "g1"}, "value": 1.0},
                {"metric": {"namespace": "b", "pod": "b1", group: "g2"}, "value": 1.0},
                {"metric": {"namespace": "b", group: "g2"}, "value": 1.0}]  # no pod: left out
    annotated = [{"metric": {"namespace": "a", "pod": "a1", fraction_label: "0.25"}, "value": 1.0},
                 {"metric": {"namespace": "a", "pod": "a2", fraction_label: "1.0"}, "value": 1.0},
                 {"metric": {"namespace": "b", "pod": "b1", fraction_label: "half"}, "value": 1.0}]
    prom = Canned({"kube_pod_labels": labelled, "kube_pod_annotations": annotated})
    assert gpu_groups(prom, 0.0, 30) == {"g1": [Sharer("a", "a1", 0.25), Sharer("a", "a2", None), Sharer(KAI_RESERVATIONS, "res", None)],
                                           "g2": [Sharer("b", "b1", None)]}
    assert "[60s]" in prom.asked[0]  # at least a minute
    none = Canned({})
    assert gpu_groups(none, 0.0, 3600) == {} and len(none.asked) == 1


def test_the_plot_labels_utilization_in_percent_over_utc_clock_time(tmp_path, monkeypatch):
    matplotlib = pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from gpupools.idle.plotting import plot

    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda self, path, *a, **k: drawn.append(self))
    report = build_report([holder(idle=60, seen=60, node="n", uuid="U1", ns="a", pod="p")], GRID, 3600, 5.0)
    report.by_namespace = {"a": [(1_000_000.0, 2.0), (1_000_060.0, 3.0)]}
    plot(report, str(tmp_path / "idle.png"))
    (ax,) = drawn[0].axes
    assert ax.get_ylabel() == "GPU utilization (%)" and ax.get_xlabel() == "time (UTC)" and ax.get_ylim() == (0.0, 100.0)
    formatter = ax.xaxis.get_major_formatter()
    assert isinstance(formatter, matplotlib.dates.DateFormatter) and formatter.fmt == "%H:%M"
    assert [line.get_label() for line in ax.get_lines()] == ["a", "idle threshold (5%)"]
