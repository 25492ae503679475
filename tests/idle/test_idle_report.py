"""`gpupools idle` against a real Prometheus on 127.0.0.1, loaded with 26 hours of dcgm-exporter-shaped history.

The history is backfilled with `promtool tsdb create-blocks-from openmetrics` into the server's data directory
before it starts, ending a minute before now, so the report's range query sees it as recent data.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpupools.core.catalog import load_catalog
from gpupools.cli.main import app
from gpupools.monitoring.promql import VGPU_SHARES

from conftest import ROOT

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def go_env() -> dict[str, str]:
    """The environment for prometheus and promtool: Go's garbage collector run at 400 % heap growth rather than
    100 % (these servers hold a few MB), and one P, so that no second core runs idle-time marking beside a query (Go
    runtime, src/runtime/proc.go, findRunnable: "run idle-time marking rather than give up the P"). Less CPU, the
    same answers."""
    return {**os.environ, "GOGC": "400", "GOMAXPROCS": "1"}


def needs_prometheus() -> None:
    if not (PROMETHEUS and PROMTOOL):
        pytest.skip("prometheus and promtool are not installed (Debian/Ubuntu: apt-get install prometheus)")

STEP = 60
HOURS = 26
DRIVER = "570.133.20"
A10G, A100, A100_40, L4, T4 = "NVIDIA A10G", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB", "NVIDIA L4", "Tesla T4"
NODES = {"ip-10-0-1-17.ec2.internal": ("infer", "A10G"), "ip-10-0-2-40.ec2.internal": ("train", "A100-80GB"),
         "ip-10-0-3-9.ec2.internal": ("mig", "A100-40GB"), "ip-10-0-4-2.ec2.internal": ("slice", "L4"),
         "ip-10-0-5-8.ec2.internal": ("vgpu", "A10G")}
NODE_A, NODE_B, NODE_D, NODE_E, NODE_F = list(NODES)
NODE_C = "gke-unlabelled-node-1"  # no gpupools labels: the report says "-" for its pool
VGPUS = {"vgpu": 4}  # vGPUs per GPU of the vgpu pool, as the stack's rules record it


def gpu_series(node, gpu, model, holder=None, mig=None):
    """Labels as dcgm-exporter emits them (plus the scrape's instance/job), with pod attribution when held."""
    labels = {"gpu": str(gpu), "UUID": f"GPU-{abs(hash((node, gpu))) % 10**8:08d}-0000-4000-8000-000000000000",
              "device": f"nvidia{gpu}", "modelName": model, "Hostname": node, "DCGM_FI_DRIVER_VERSION": DRIVER,
              "instance": "10.0.0.5:9400", "job": "nvidia-dcgm-exporter"}
    if mig:
        labels.update(GPU_I_PROFILE=mig[0], GPU_I_ID=mig[1])
    if holder:
        labels.update(namespace=holder[0], pod=holder[1], container="main")
    return labels


def burst(h):
    """70 % at :15 and :45 of every minute, 0 at :00 and :30: busy on average, idle at every whole minute."""
    return 70 if round(h * 3600) % 60 in (15, 45) else 0


# (labels, metric, utilization(t_hours_before_end) or None when absent at that time, scrape interval in seconds)
def history():
    busy = lambda h: 40 + (h * 7) % 20  # noqa: E731
    util, engine = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    rows = [
        (gpu_series(NODE_A, 0, A10G, ("team-a", "notebook-1")), util, lambda h: round(h * 60) % 3),  # 0-2 %, idle all day
        (gpu_series(NODE_A, 1, A10G, ("team-a", "web")), util, busy),
        # time-slicing: two pods hold GPU 2, both see the GPU's utilization
        (gpu_series(NODE_A, 2, A10G, ("team-e", "shared-a")), util, lambda h: 1),
        (gpu_series(NODE_A, 2, A10G, ("team-e", "shared-b")), util, lambda h: 1),
        (gpu_series(NODE_A, 3, A10G, ("team-f", "gappy")), util, lambda h: None if 5 <= h < 7 else 1),  # exporter down for 2 h
        (gpu_series(NODE_A, 4, A10G, ("team-g", "bursty")), util, burst, 15),
        (gpu_series(NODE_A, 5, A10G, ("team-h", "partial")), util, lambda h: 60 if h >= 20 else 2),  # idle for the last 20 h
        (gpu_series(NODE_A, 7, A10G, ("team-n", "no-data")), util, lambda h: "NaN" if h < 12 else 1),  # NaN proves nothing
        (gpu_series(NODE_B, 0, A100, ("team-b", "trainer")), util, lambda h: 90),
        (gpu_series(NODE_B, 1, A100, ("team-b", "stuck")), util, lambda h: 50 if 9.9 < h < 10.1 else 1),  # one burst
        (gpu_series(NODE_B, 2, A100, ("team-c", "eval")), util, lambda h: 3 if h < 6 else None),  # last 6 h only
        (gpu_series(NODE_B, 3, A100, ("team-d", "mig-pod"), mig=("3g.40gb", "1")), engine, lambda h: 0.01),
        # The other half of that A100 at exactly 5 % (0.05 of the engine): never below the threshold, never idle.
        (gpu_series(NODE_B, 3, A100, ("team-d", "mig-edge"), mig=("3g.40gb", "2")), engine, lambda h: 0.05),
        # Busy but for three hours at 1 %: its steps are judged one by one.
        (gpu_series(NODE_B, 4, A100, ("team-p", "dip")), util, lambda h: 1 if 3 <= h < 6 else 50),
        # An exporter restarted 12 hours ago: two series of one holder, one after the other; idle throughout...
        (gpu_series(NODE_B, 5, A100, ("team-q", "restarted")), util, lambda h: 1 if h >= 12 else None),
        ({**gpu_series(NODE_B, 5, A100, ("team-q", "restarted")), "instance": "10.0.0.6:9400"}, util, lambda h: 1 if h < 12 else None),
        # ...and busy for the second half.
        (gpu_series(NODE_B, 6, A100, ("team-q", "restarted-busy")), util, lambda h: 1 if h >= 12 else None),
        ({**gpu_series(NODE_B, 6, A100, ("team-q", "restarted-busy")), "instance": "10.0.0.6:9400"}, util, lambda h: 60 if h < 12 else None),
        (gpu_series(NODE_B, 7, A100, ("team-z", "all-nan")), util, lambda h: "NaN"),  # seen, never idle
        # Exactly at the threshold every other minute (not idle then), 1 % in between: its peak is no shortcut.
        (gpu_series(NODE_E, 1, L4, ("team-t", "at-threshold")), util, lambda h: 5 if round(h * 60) % 2 else 1),
        # Exactly at the threshold all day: its lowest sample is no sample below it, so nothing more is asked about it.
        (gpu_series(NODE_E, 2, L4, ("team-u", "at-five")), util, lambda h: 5),
        (gpu_series(NODE_C, 0, T4), util, lambda h: 0.2),  # nobody holds it
        # An A100 40GB in seven 1g.5gb slices: six idle, one busy.
        *[(gpu_series(NODE_D, 0, A100_40, ("team-m", f"mig-{i}"), mig=("1g.5gb", str(7 + i))), engine,
           (lambda h: 0.5) if i == 6 else (lambda h: 0.01)) for i in range(7)],
        # An A10G scraped every 5 minutes (slower than the report's 1-minute steps): idle all day, not a fifth of it.
        (gpu_series(NODE_A, 6, A10G, ("team-a", "slow-scrape")), util, lambda h: 1, 300),
        # Scraped every 5 minutes too, busy in the window but idle at its last sample before it (30 s before its start):
        # the first four steps, without a sample of their own, take that sample when gaps are filled.
        (gpu_series(NODE_E, 3, L4, ("team-w", "warm-up")), util, lambda h: 1 if h >= 24 else 50, 300),
        # One L4 time-sliced among three pods.
        *[(gpu_series(NODE_E, 0, L4, ("team-s", f"slice-{i}")), util, lambda h: 1) for i in range(3)],
        # Two of the four vGPUs HAMi cuts an A10G into.
        *[(gpu_series(NODE_F, 0, A10G, ("team-v", f"vgpu-{i}")), util, lambda h: 2) for i in range(2)],
    ]
    return [row if len(row) == 4 else (*row, STEP) for row in rows]


def write_openmetrics(path: Path, end: int) -> None:
    families: dict[str, list[str]] = {}
    for labels, metric, util, every in history():
        for i in range(HOURS * 3600 // every, -1, -1):
            t = end - i * every
            value = util(i * every / 3600)
            if value is not None:
                body = ",".join(f'{k}="{v}"' for k, v in labels.items())
                families.setdefault(metric, []).append(f"{metric}{{{body}}} {value} {t}")
    for node, (pool, gpu) in NODES.items():
        for i in range(HOURS * 3600 // STEP, -1, -1):
            families.setdefault("kube_node_labels", []).append(
                f'kube_node_labels{{node="{node}",label_gpupools_io_pool="{pool}",label_gpupools_io_gpu="{gpu}",job="kube-state-metrics"}} 1 {end - i * STEP}')
    for pool, count in VGPUS.items():
        for i in range(HOURS * 3600 // STEP, -1, -1):
            families.setdefault(VGPU_SHARES, []).append(f'{VGPU_SHARES}{{pool="{pool}"}} {count} {end - i * STEP}')
    lines = []
    for metric, samples in families.items():
        lines.append(f"# TYPE {metric} gauge")
        lines.extend(samples)
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def end() -> int:
    """The last sample's time: on a whole minute, so the 15 s bursts fall at :15 and :45."""
    return int(time.time()) // 60 * 60 - 60


@contextlib.contextmanager
def serving(data: Path, log: Path):
    """A Prometheus on 127.0.0.1 over `data`, stopped afterwards; yields its URL.

    The port is free when picked, but until Prometheus binds it another process may take it (the tests run in
    parallel, and each test process starts its own Prometheus): then this one stops with "address already in use" and
    another port is tried. Whoever answers on the port must be this server, over this `data`, not the one that took it."""
    (data.parent / "prometheus.yml").write_text("global:\n  evaluation_interval: 1m\n  scrape_interval: 1m\n")
    for _ in range(5):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen([PROMETHEUS, f"--config.file={data.parent / 'prometheus.yml'}", f"--storage.tsdb.path={data}",
                                 f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d"],
                                stdout=subprocess.DEVNULL, stderr=open(log, "w"), env=go_env())
        try:
            if _started(proc, url, data, log):
                yield url
                return
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    pytest.fail("prometheus found no free port in 5 tries: " + log.read_text()[-2000:])


def _started(proc: subprocess.Popen, url: str, data: Path, log: Path) -> bool:
    """True once this Prometheus serves on `url`; False when another process holds the port."""
    deadline = time.time() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                # Prometheus' flags (GET /api/v1/status/flags) name the data directory of the server that answered.
                if r.status == 200 and _tsdb_path(url) == str(data):
                    return True
        except OSError:
            pass
        if proc.poll() is not None:
            if "address already in use" in log.read_text():
                return False
            pytest.fail("prometheus did not start: " + log.read_text()[-2000:])
        if time.time() > deadline:
            pytest.fail("prometheus did not start: " + log.read_text()[-2000:])
        time.sleep(0.3)


def _tsdb_path(url: str) -> str | None:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/status/flags", timeout=2) as r:
            return json.load(r)["data"]["storage.tsdb.path"]
    except (OSError, ValueError, KeyError, TypeError):  # not a Prometheus, or not yet answering
        return None


def history_blocks(work: Path, end: int) -> Path:
    """The history as TSDB blocks. Blocks of up to 54 h (the hidden --max-block-duration, rounded down by promtool to
    its 2h/6h/18h/54h ranges: prometheus v2.42.0, cmd/promtool/backfill.go, getCompatibleBlockDuration) hold the 26
    hours in one or two blocks: promtool reads the whole file once per block it writes, so 2 h blocks read it 14 times.
    The samples, and so every answer, are the same."""
    write_openmetrics(work / "history.om", end)
    data = work / "data"
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=54h", str(work / "history.om"), str(data)],
                   check=True, capture_output=True, timeout=300, env=go_env())
    return data


@pytest.fixture(scope="module")
def history_data(tmp_path_factory, end) -> Path:
    """The blocks, built once; each server gets a copy of its own to serve."""
    needs_prometheus()
    return history_blocks(tmp_path_factory.mktemp("history"), end)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory, history_data):
    work = tmp_path_factory.mktemp("prometheus")
    data = shutil.copytree(history_data, work / "data")
    with serving(data, work / "prometheus.log") as url:
        yield url


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, end, history_data, prometheus):
    """The same history plus the stack's idle-step rules, as if they had run all along, evaluated over the history by
    `promtool tsdb create-blocks-from rules` through a running server's API (the module's server over the same
    history: it holds nothing else).

    promtool evaluates each rule on its own, so a rule cannot read another's output; the second rule is given the
    first's expression in place of the series it records, which is what a rule group computes when its rules run
    one after the other at the same instant (the group itself is checked by `promtool test rules` in test_rules.py).
    """
    from gpupools.stack.config import Idle
    from gpupools.monitoring.promql import IDLE_BELOW, STEP_UTIL
    from gpupools.monitoring.rules import idle_step_rules

    work = tmp_path_factory.mktemp("recorded")
    data = shutil.copytree(history_data, work / "data")
    group = idle_step_rules(Idle())
    step, idle, ran = group["rules"]
    series = f'{STEP_UTIL}{{{IDLE_BELOW}="5"}}'
    assert series in idle["expr"]
    inlined = {**idle, "expr": idle["expr"].replace(series, f"({step['expr']})"), "labels": step["labels"]}
    (work / "rules.yml").write_text(yaml.safe_dump({"groups": [{**group, "rules": [step, inlined, ran]}]}))
    # The rules file is named relative to promtool's working directory, so the group's evaluation offset is the same at
    # every run: Prometheus derives it from a hash of the group's name and file as given (v2.42.0 rules/manager.go,
    # Group.hash and EvalTimestamp), and promtool's backfill writes no step that falls in the last second before a
    # block boundary (cmd/promtool/rules.go, importRule: one range query per 2 h block, ending a second early). With
    # the file's full path in the hash, a temporary directory's name decided whether a step went missing.
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "rules", f"--url={prometheus}", f"--start={end - (HOURS - 1) * 3600}",
                    f"--end={end + 30}", f"--output-dir={work / 'blocks'}", "--quiet", "rules.yml"],
                   check=True, capture_output=True, timeout=600, env=go_env(), cwd=work)
    for block in (work / "blocks").iterdir():
        shutil.move(str(block), data / block.name)
    with serving(data, work / "prometheus.log") as url:
        yield url


def lowest_price_per_gpu(gpu: str) -> float:
    """Independent of the code under test: min over the catalog's instance types of node price / GPUs."""
    cat = load_catalog()
    offers = [i.price / i.gpus for types in cat.instances.values() for i in types.values()
              if i.gpu is not None and i.gpu.name == gpu and i.price is not None]
    offers += [a.price_per_gpu for a in cat.gcp_accelerators.values() if a.gpu.name == gpu]
    return min(offers)


def run(*args: str):
    return CliRunner().invoke(app, list(args))


PRICES = {gpu: lowest_price_per_gpu(gpu) for gpu in ("A10G", "A100-80GB", "A100-40GB", "L4", "T4")}
# holder: (hours idle, share of the physical GPU, catalog GPU, node, pool, unit) with the default --min-idle 1h
EXPECT = {
    ("team-a", "notebook-1"): (24, 1, "A10G", NODE_A, "infer", "gpu"),
    ("team-e", "shared-a"): (24, 1 / 2, "A10G", NODE_A, "infer", "time-slice"),  # two pods share one GPU and its cost
    ("team-e", "shared-b"): (24, 1 / 2, "A10G", NODE_A, "infer", "time-slice"),
    ("team-f", "gappy"): (22, 1, "A10G", NODE_A, "infer", "gpu"),  # two hours without metrics are not idle hours
    ("team-a", "slow-scrape"): (24, 1, "A10G", NODE_A, "infer", "gpu"),
    ("team-h", "partial"): (20, 1, "A10G", NODE_A, "infer", "gpu"),  # busy until 20 h ago, idle since
    ("team-n", "no-data"): (12, 1, "A10G", NODE_A, "infer", "gpu"),  # seen for 24 h, but the last 12 h said NaN
    ("team-b", "stuck"): (24 - 11 / 60, 1, "A100-80GB", NODE_B, "train", "gpu"),  # eleven busy minutes
    ("team-c", "eval"): (6, 1, "A100-80GB", NODE_B, "train", "gpu"),
    ("team-p", "dip"): (3, 1, "A100-80GB", NODE_B, "train", "gpu"),
    ("team-t", "at-threshold"): (12, 1, "L4", NODE_E, "slice", "gpu"),
    ("team-q", "restarted"): (24, 1, "A100-80GB", NODE_B, "train", "gpu"),  # two series, one holder
    ("team-q", "restarted-busy"): (12, 1, "A100-80GB", NODE_B, "train", "gpu"),
    ("team-d", "mig-pod"): (24, 1 / 2, "A100-80GB", NODE_B, "train", "mig"),  # 3g.40gb: two per A100 80GB
    (None, None): (24, 1, "T4", NODE_C, None, "gpu"),
    **{("team-m", f"mig-{i}"): (24, 1 / 7, "A100-40GB", NODE_D, "mig", "mig") for i in range(6)},  # 1g.5gb: seven per A100 40GB
    **{("team-s", f"slice-{i}"): (24, 1 / 3, "L4", NODE_E, "slice", "time-slice") for i in range(3)},
    **{("team-v", f"vgpu-{i}"): (24, 1 / 4, "A10G", NODE_F, "vgpu", "vgpu") for i in range(2)},  # a quarter each, not a half
}
# Holders busy at some steps: listed for their idle hours, never for the whole window.
BUSY_AT_TIMES = {("team-h", "partial"), ("team-b", "stuck"), ("team-p", "dip"), ("team-q", "restarted-busy"), ("team-t", "at-threshold")}
WHOLE_WINDOW = {holder for holder in EXPECT if holder not in BUSY_AT_TIMES | {("team-n", "no-data")}}
GPUS_SEEN = 8 + 8 + 1 + 1 + 4 + 1  # physical GPUs on nodes A, B, C (T4), D (MIG), E (time-sliced and three whole), F (vGPU)


def exact_report(url: str, end: int, **options):
    """The report as of half a minute after the last sample: every step holds exactly one 1-minute sample."""
    from gpupools.idle.report import idle_report

    return idle_report(url, 24 * 3600, 5.0, now=end + 30, **options)


@functools.cache
def shared_report(url: str, end: int, **options):
    """exact_report for the tests that read it with nothing patched: the same server and arguments give the same
    report, so it is asked once and shared (tests that patch the report's code call exact_report themselves)."""
    return exact_report(url, end, **options)


@pytest.mark.parametrize("whole_window", [False, True])
def test_rows_physical_totals_and_dollars_exact(prometheus, end, whole_window):
    report = shared_report(prometheus, end, min_idle=3600, whole_window=whole_window)
    expect = {h: e for h, e in EXPECT.items() if not whole_window or h in WHOLE_WINDOW}
    rows = {(g.namespace, g.pod): g for g in report.idle}
    assert set(rows) == set(expect)  # busy, bursting, partly busy (whole window) and absent holders are not listed
    for holder, (hours, share, gpu, node, pool, unit) in expect.items():
        row = rows[holder]
        assert (row.node, row.pool, row.catalog_gpu, row.unit) == (node, pool, gpu, unit), holder
        assert row.hours_idle == pytest.approx(hours, abs=0.005), holder
        assert row.share == pytest.approx(share, abs=1e-4), holder
        assert row.gpu_hours_idle == pytest.approx(hours * share, abs=0.005), holder
        assert row.wasted_usd == pytest.approx(hours * share * PRICES[gpu], abs=0.005), holder
    assert report.gpus_seen == GPUS_SEEN
    if not whole_window:  # NaN samples count as seen, not as idle
        assert rows[("team-n", "no-data")].hours_seen == pytest.approx(24, abs=0.005)
    assert report.gpus_idle == pytest.approx(sum(e[1] for e in expect.values()), abs=0.01)
    assert report.gpu_hours_idle == pytest.approx(sum(e[0] * e[1] for e in expect.values()), abs=0.01)
    assert report.total_wasted == pytest.approx(sum(e[0] * e[1] * PRICES[e[2]] for e in expect.values()), abs=0.02)
    # The slices, the time-sliced L4 and the vGPUs add up to GPUs that exist: 6/7 of an A100, one L4, half an A10G.
    assert sum(rows[("team-m", f"mig-{i}")].gpu_hours_idle for i in range(6)) == pytest.approx(24 * 6 / 7, abs=0.01)
    assert sum(rows[("team-s", f"slice-{i}")].gpu_hours_idle for i in range(3)) == pytest.approx(24, abs=0.01)
    assert sum(rows[("team-v", f"vgpu-{i}")].gpu_hours_idle for i in range(2)) == pytest.approx(12, abs=0.01)


def rows_of(report) -> dict:
    return {(g.namespace, g.pod): (g.hours_idle, g.hours_seen, g.share, g.gpu_hours_idle, g.unit, g.max_utilization) for g in report.idle}


def test_pieces_add_up_to_the_whole_window(prometheus, end, monkeypatch):
    """A window cut into pieces (as long windows are, to stay within Prometheus' limits) gives the same report."""
    import gpupools.idle.questions as idle

    whole = rows_of(shared_report(prometheus, end, min_idle=0))
    monkeypatch.setattr(idle, "CHUNK_STEPS", 97)  # 1,440 steps in 15 pieces, the last one short
    assert len(idle.Steps(end + 30, 60, 1440).chunks()) == 15
    assert rows_of(exact_report(prometheus, end, min_idle=0)) == whole


def test_recorded_pieces_add_up_to_the_whole_window(recorded, end, monkeypatch):
    """Recorded steps over a long window are read in pieces of a day; cut finer, the report is the same."""
    import gpupools.idle.questions as idle

    whole = exact_report(recorded, end, min_idle=0)
    monkeypatch.setattr(idle, "CHUNK_STEPS", 97)
    pieces = exact_report(recorded, end, min_idle=0)
    assert whole.counted_from == pieces.counted_from == "recorded idle steps"
    assert rows_of(pieces) == rows_of(whole) and len(rows_of(whole)) > 20


def test_gpu_lists_too_long_for_a_request_ask_for_every_gpu(prometheus, end, monkeypatch):
    """The second round asks only about the listed holders' GPUs; where that list would not fit the request (Google's
    API takes queries in the URL), it asks about every GPU instead and keeps the same rows."""
    import gpupools.idle.counting as idle
    from gpupools.idle import questions

    listed = rows_of(shared_report(prometheus, end, min_idle=0))
    asked: list[str] = []
    ask = idle.Prometheus.query
    monkeypatch.setattr(idle.Prometheus, "query", lambda self, expr, at: asked.append(expr) or ask(self, expr, at))
    monkeypatch.setattr(idle, "MAX_SELECTOR", {"GET": 40, "POST": 40})
    assert rows_of(exact_report(prometheus, end, min_idle=0)) == listed
    assert asked and not any("UUID=~" in expr for expr in asked)
    assert idle.gpu_regex(["GPU-1", "GPU-2"], 40) == "GPU-1|GPU-2" and idle.gpu_regex(["GPU-1"] * 10, 40) is None
    # Regex metacharacters escaped for RE2, then backslashes and quotes escaped for the PromQL string.
    assert (questions._literal("GPU-a.b"), questions._literal('x"y'), questions._literal("a\\b")) == (r"GPU-a\\.b", r'x\"y', r"a\\\\b")
    assert [questions._literal(c) for c in ".+*?()|[]{}^$-_"] == ["\\\\" + c for c in ".+*?()|[]{}^$"] + ["-", "_"]


def test_gap_filling_only_changes_gpus_scraped_slower_than_the_step(prometheus, end, monkeypatch):
    """Filling steps without a sample of their own is needed here (one GPU is scraped every 5 minutes, the step is
    one minute) and costs time, so it is used only then; without it every other holder counts the same."""
    import gpupools.idle.report as idle

    filled = rows_of(shared_report(prometheus, end, min_idle=0))
    choose = idle.grid_for
    monkeypatch.setattr(idle, "grid_for", lambda *args: dataclasses.replace(choose(*args), fill=False))
    unfilled = rows_of(exact_report(prometheus, end, min_idle=0))
    slow, warm = ("team-a", "slow-scrape"), ("team-w", "warm-up")
    assert filled[slow][0] == pytest.approx(24, abs=0.005) and unfilled[slow][0] == pytest.approx(24 / 5, abs=0.02)
    # Its only sample below the threshold lies before the window: a GPU the lowest samples in the window do not name.
    assert filled[warm][0] == pytest.approx(4 / 60, abs=1e-4) and warm not in unfilled
    assert {h: r for h, r in filled.items() if h not in (slow, warm)} == {h: r for h, r in unfilled.items() if h not in (slow, warm)}


@pytest.mark.parametrize("fill", [True, False])
def test_steps_are_judged_only_where_a_holder_may_be_idle_and_not(prometheus, end, monkeypatch, fill):
    """Judging steps one by one (a comparison in a subquery) is asked only where needed: a GPU with no sample below the
    threshold has no idle step, and a holder whose every sample is below it is idle at every step it was seen, unless
    all of a step's samples were NaN (then it is judged after all). With gaps filled, a step may take a sample from
    before the window, which the peak does not cover, so only the first shortcut applies. Judging every holder, as
    the report did before, gives the same rows; counting a judged holder as idle throughout does not."""
    import gpupools.idle.report as idle
    from gpupools.idle import counting

    choose, kind_of = idle.grid_for, counting.kind_of
    monkeypatch.setattr(idle, "grid_for", lambda *args: dataclasses.replace(choose(*args), fill=fill))
    asked: list[str] = []
    ask = idle.Prometheus.query
    monkeypatch.setattr(idle.Prometheus, "query", lambda self, expr, at: asked.append(expr) or ask(self, expr, at))
    report = exact_report(prometheus, end, min_idle=0)
    shortcut = rows_of(report)
    assert report.gpus_seen == GPUS_SEEN  # GPUs with no sample below the threshold too, about which nothing more is asked
    judged = " ".join(expr for expr in asked if "< 5)" in expr)  # the comparisons, with the GPUs they judge
    uuid = {pod: gpu_series(node, gpu, "")["UUID"] for pod, node, gpu in (
        ("notebook-1", NODE_A, 0), ("trainer", NODE_B, 0), ("stuck", NODE_B, 1), ("dip", NODE_B, 4), ("no-data", NODE_A, 7),
        ("restarted", NODE_B, 5), ("restarted-busy", NODE_B, 6), ("at-threshold", NODE_E, 1), ("at-five", NODE_E, 2))}
    assert uuid["trainer"] not in judged and uuid["at-five"] not in judged  # no sample below the threshold: never judged
    # Every holder's lowest sample comes first; peaks are asked only of GPUs with a sample below the threshold (with
    # gaps filled, of every GPU, since one may have its only low sample in the lookback before the window).
    assert any(expr.startswith("min by (") and "UUID=~" not in expr for expr in asked)
    peaks = [expr for expr in asked if expr.startswith("(max by")]
    assert peaks and all(("UUID=~" not in expr) == fill for expr in peaks)
    if not fill:
        assert uuid["notebook-1"] in peaks[0] and uuid["dip"] in peaks[0]
        assert uuid["trainer"] not in peaks[0] and uuid["at-five"] not in peaks[0]
    assert all(uuid[pod] in judged for pod in ("stuck", "dip", "restarted-busy", "at-threshold"))
    assert uuid["no-data"] in judged  # NaN steps: judged, in a second question when the peak alone would not judge it
    assert (uuid["notebook-1"] in judged) == (uuid["restarted"] in judged) == fill  # idle throughout
    assert shortcut[("team-n", "no-data")][:2] == (12, 24) and shortcut[("team-q", "restarted")][:2] == (24, 24)

    monkeypatch.setattr(counting, "kind_of", lambda *args: "judged")  # every holder's steps judged one by one
    assert rows_of(exact_report(prometheus, end, min_idle=0)) == shortcut

    monkeypatch.setattr(counting, "kind_of", lambda *args: "idle" if kind_of(*args) == "judged" else kind_of(*args))
    wrong = rows_of(exact_report(prometheus, end, min_idle=0))
    differ = {holder for holder in set(wrong) | set(shortcut) if wrong.get(holder) != shortcut.get(holder)}
    assert {("team-b", "stuck"), ("team-p", "dip"), ("team-q", "restarted-busy"), ("team-t", "at-threshold")} <= differ
    assert ("team-b", "trainer") not in differ and ("team-n", "no-data") not in differ  # busy; NaN steps still judged
    assert ("team-a", "notebook-1") not in differ and ("team-q", "restarted") not in differ  # idle throughout either way


def test_peaks_and_lows_asked_ahead_or_with_the_grid_give_the_same_rows(prometheus, end, monkeypatch):
    """Peaks over the window are asked with the first probes when every grid the report may choose covers the whole
    window (a day, a week), else once the grid is chosen; the GPUs with a low sample likewise, or by the collector
    itself when not given. Each way, the same rows."""
    import gpupools.idle.report as idle
    from gpupools.idle.promapi import Prometheus

    assert idle.whole_steps(24 * 3600) and idle.whole_steps(7 * 86400) and idle.whole_steps(8 * 3600)
    assert not idle.whole_steps(100 * 60)  # 6,000 s is no whole number of 180 s or 240 s steps
    assert not idle.whole_steps(86400 + 60)  # nor of 120 s ones
    ahead = rows_of(shared_report(prometheus, end, min_idle=0))
    asked: list[str] = []
    ask = idle.Prometheus.query
    monkeypatch.setattr(idle.Prometheus, "query", lambda self, expr, at: asked.append(expr) or ask(self, expr, at))
    monkeypatch.setattr(idle, "whole_steps", lambda window: False)
    assert rows_of(exact_report(prometheus, end, min_idle=0)) == ahead
    assert any("min_over_time(DCGM_FI_DEV_GPU_UTIL[86400s] offset" in expr for expr in asked)  # asked with the grid
    grid = idle.grid_for(24 * 3600, end + 30, 60, 12)
    prom = Prometheus(prometheus)
    report = idle.build_report(idle.collect_raw(prom, grid, 5.0), grid, 24 * 3600, 5.0, vgpus=idle.vgpus_per_gpu(prom, end + 30, 24 * 3600),
                               pools=idle.node_pools(prom, end + 30, 24 * 3600))
    assert rows_of(report) == ahead


def test_a_gpu_is_low_only_below_the_threshold_in_its_metrics_unit():
    """The lowest sample marks a GPU as one to look at when below the threshold as the step questions write it
    (`< 0.05` for the engine ratio): exactly at it is not below; -Inf is below anything and NaN below nothing."""
    from gpupools.idle.questions import below_in, low_gpus

    assert (below_in(1, 5), below_in(100, 5), below_in(100, 100 / 3)) == (5, 0.05, 0.333333)
    values = {"at": ("min 1", 5.0), "under": ("min 1", 4.999), "nan": ("min 1", math.nan), "minus": ("min 1", -math.inf),
              "ratio-at": ("min 100", 0.05), "ratio-under": ("min 100", 0.0499), "plenty": ("min 1", math.inf)}
    answers = [(name, [{"metric": {"UUID": uuid, "Hostname": "n"}, "value": value}]) for uuid, (name, value) in values.items()]
    assert low_gpus(answers, 5.0) == {"under", "minus", "ratio-under"}
    assert low_gpus(answers, 100.0) == {"at", "under", "minus", "ratio-at", "ratio-under"}  # 0.05 of the engine is 5 %


def test_grid_fills_only_for_slower_scrapes():
    from gpupools.idle.report import grid_for

    assert grid_for(86400, 0, fastest=60, slowest=60) == grid_for(86400, 0, 60, 59)  # one missed scrape is no slower interval
    assert not grid_for(86400, 0, 60, 59).fill and grid_for(86400, 0, 60, 12).fill  # a GPU scraped every 5 minutes
    assert grid_for(86400, 0, 240, 12).step == 60 and grid_for(86400, 0, 12, 12).step == 300 and not grid_for(86400, 0, 12, 12).fill
    assert grid_for(7 * 86400, 0, 240, 240).step == 420  # a week: 1,440 steps of 7 minutes
    assert grid_for(86400, 0, None, None).fill  # nothing scraped within the hour: no claim about intervals


def test_recorded_idle_steps_give_the_same_report(recorded, end):
    """Where the stack's idle-step rules ran over the whole window the report reads them (no subquery) and says so;
    rows, shares and dollars equal those counted from raw samples on the same server.

    Asked at a rule evaluation, both count the same samples; between evaluations the recorded steps lag by up to a
    step. One difference is by design: a rule sees a GPU through its latest sample for up to five minutes, which a
    live Prometheus cuts at the stale marker a failed scrape (or a rule's vanished output) leaves; backfilled
    history has no stale markers, so there the exporter gap starts a few minutes later.
    """
    from gpupools.idle.report import idle_report
    from gpupools.idle.promapi import Prometheus
    from gpupools.monitoring.promql import STEP_UTIL

    (last,) = Prometheus(recorded).query(f"max(timestamp({STEP_UTIL}))", end + 30)
    report = idle_report(recorded, 24 * 3600, 5.0, now=last["value"])
    assert report.counted_from == "recorded idle steps" and report.step_seconds == 60
    raw_report = idle_report(recorded, 24 * 3600, 5.0, now=last["value"], raw=True)  # the same server, from raw samples
    assert raw_report.counted_from == "raw samples"
    rows, raw = rows_of(report), rows_of(raw_report)
    gappy = ("team-f", "gappy")
    assert raw[gappy][0] == pytest.approx(22, abs=0.005) and 22 < rows[gappy][0] <= 22 + 10 / 60
    assert set(rows) == set(raw) and len(rows) > 20
    for holder, row in raw.items():
        if holder != gappy:
            pairs = list(zip(rows[holder], row))
            assert all(a == b if isinstance(b, str) else a == pytest.approx(b, abs=1e-3) for a, b in pairs), (holder, rows[holder], row)
    assert report.gpus_seen == raw_report.gpus_seen == GPUS_SEEN
    others = lambda r: sum(g.exact_usd or 0 for g in r.idle if g.pod != "gappy")  # noqa: E731
    assert others(report) == pytest.approx(others(raw_report), abs=0.01)
    # Peaks read from raw samples (the cheaper source when GPUs are scraped less than once a minute) are the same.
    from gpupools.idle.counting import collect
    from gpupools.idle.questions import Steps

    grid = Steps(last["value"], 60, 1440)
    peaks = [{tuple(sorted(h.labels.items())): (h.peak, h.idle, h.seen, h.share) for h in collect(Prometheus(recorded), grid, 5.0, 60, True, raw_peaks=raw_peaks)}
             for raw_peaks in (False, True)]
    assert len(peaks[0]) == 34, set(peaks[1]) - set(peaks[0])
    assert peaks[0] == peaks[1]


def test_recorded_shares_are_asked_only_of_gpus_several_holders_held(recorded, end, monkeypatch):
    """From recorded steps a holder alone on its device holds all of it at each idle step, so its share is its idle
    steps; the shares are asked only of the listed GPUs that had several holders in the window (the steps-seen
    question names every holder of the listed GPUs). Neither is the slowest scrape asked: it only cuts raw samples."""
    import gpupools.idle.report as idle
    from gpupools.monitoring.promql import IDLE_STEP, STEP_UTIL

    asked: list[str] = []
    ask = idle.Prometheus.query
    monkeypatch.setattr(idle.Prometheus, "query", lambda self, expr, at: asked.append(expr) or ask(self, expr, at))
    report = exact_report(recorded, end, min_idle=0)
    assert report.counted_from == "recorded idle steps"
    shares = [expr for expr in asked if f"sum_over_time({IDLE_STEP}" in expr]
    time_sliced = {gpu_series(NODE_A, 2, "")["UUID"], gpu_series(NODE_E, 0, "")["UUID"], gpu_series(NODE_F, 0, "")["UUID"]}
    assert len(shares) == 1 and set(shares[0].split('UUID=~"')[1].split('"')[0].split("|")) == time_sliced
    assert idle.SLOWEST not in asked and idle.FASTEST in asked
    # Scraped every minute or faster, peaks come from the recorded steps (fewer samples to read than raw ones).
    assert not any(expr.startswith("(max by") for expr in asked) and any(f"max_over_time({STEP_UTIL}" in expr for expr in asked)
    rows = rows_of(report)
    assert [rows[("team-s", f"slice-{i}")][2] for i in range(3)] == [pytest.approx(1 / 3, abs=1e-4)] * 3
    assert rows[("team-e", "shared-a")][2] == pytest.approx(0.5, abs=1e-4) and rows[("team-a", "notebook-1")][2] == 1
    asked.clear()
    assert exact_report(recorded, end, min_idle=0, raw=True).counted_from == "raw samples" and idle.SLOWEST in asked
    # GPUs scraped less than once a minute: the peaks come from raw samples over the window instead, the same.
    monkeypatch.setattr(idle, "raw_peaks_cheaper", lambda fastest: True)
    asked.clear()
    assert rows_of(exact_report(recorded, end, min_idle=0)) == rows
    assert idle.peak_question(24 * 3600) in asked and not any(f"max_over_time({STEP_UTIL}" in expr for expr in asked)


def test_recorded_steps_are_used_only_where_they_cover_the_window(recorded, end):
    from gpupools.idle.report import idle_report

    doc = json.loads(run("idle", "--prometheus", recorded, "--json").stdout)
    assert doc["counted_from"] == "recorded idle steps" and doc["step_seconds"] == 60
    assert json.loads(run("idle", "--prometheus", recorded, "--json", "--raw").stdout)["counted_from"] == "raw samples"

    assert idle_report(recorded, 48 * 3600, 5.0, now=end + 30).counted_from == "raw samples"  # recorded for 25 h only
    assert idle_report(recorded, 24 * 3600, 2.5, now=end + 30).counted_from == "raw samples"  # recorded at 5 %, not 2.5 %


def test_bursts_between_evaluation_instants_count(prometheus, end):
    """Scraped every 15 s, 70 % at :15 and :45: a subquery stepping on whole minutes sees 0 % all day, the report 70 %."""
    from gpupools.idle.promapi import Prometheus

    start, stop = end + 30 - 24 * 3600 + 60, end + 30
    subquery = Prometheus(prometheus).query_range('max_over_time((max by (pod) (DCGM_FI_DEV_GPU_UTIL{pod="bursty"}))[60s:])', start, stop, 60)
    assert subquery and max(v for _, v in subquery[0]["values"]) == 0  # what a subquery would have called idle
    report = shared_report(prometheus, end, min_idle=0)
    assert "bursty" not in {g.pod for g in report.idle}
    steps = Prometheus(prometheus).query_range('max by (pod) (max_over_time(DCGM_FI_DEV_GPU_UTIL{pod="bursty"}[60s]))', start, stop, 60)
    assert len(steps[0]["values"]) == 1440 and {v for _, v in steps[0]["values"]} == {70}


def test_json_totals_and_rows(prometheus, end):
    result = run("idle", "--prometheus", prometheus, "--json")
    lag = (time.time() - end) / 3600 + 1 / 60  # the window ends now; the history a little earlier
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["gpus_seen"] == GPUS_SEEN and doc["min_idle_seconds"] == 3600 and doc["whole_window"] is False
    by_holder = {(r["namespace"], r["pod"]): r for r in doc["idle"]}
    assert set(by_holder) == set(EXPECT)
    for holder, (hours, share, gpu, *_rest) in EXPECT.items():
        row = by_holder[holder]
        assert hours - lag - 0.001 <= row["hours_idle"] <= hours + 0.001, holder
        assert row["wasted_usd"] == pytest.approx(row["gpu_hours_idle"] * PRICES[gpu], abs=0.01), holder
        assert row["max_utilization"] < 5 or holder in BUSY_AT_TIMES
    assert by_holder[("team-d", "mig-pod")]["gpu"] == "3 3g.40gb"
    assert by_holder[("team-d", "mig-pod")]["max_utilization"] == pytest.approx(1.0)
    # The total adds unrounded dollars; each row is rounded to the cent.
    assert doc["wasted_usd"] == pytest.approx(sum(r["wasted_usd"] for r in doc["idle"]), abs=0.005 * len(doc["idle"]) + 0.005)
    assert doc["gpu_hours_idle"] == pytest.approx(sum(r["gpu_hours_idle"] for r in doc["idle"]), abs=0.02)
    assert [r["wasted_usd"] for r in doc["idle"]] == sorted((r["wasted_usd"] for r in doc["idle"]), reverse=True)


def test_table_shows_shares_and_physical_total(prometheus):
    result = run("idle", "--prometheus", prometheus, "--window", "24h", "--below", "5")
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0].split()[:4] == ["NAMESPACE", "POD", "NODE", "POOL"] and "SHARE" in lines[0] and "GPU-HOURS" in lines[0]
    assert len(lines) == 1 + len(EXPECT) + 1
    doc = json.loads(run("idle", "--prometheus", prometheus, "--json").stdout)
    import re

    # Two runs, a moment apart: the window may have moved by a step (a minute of each of the 22 holders) in between.
    total = re.fullmatch(rf"total: ([0-9.]+) of {GPUS_SEEN} GPUs held idle \(below 5% for at least 1h in the last 24h\), "
                         r"([0-9.]+) GPU-hours idle, \$([0-9,.]+) wasted at list price", lines[-1])
    assert total, lines[-1]
    assert float(total[1]) == doc["gpus_idle"]
    assert float(total[2]) == pytest.approx(doc["gpu_hours_idle"], abs=0.4)
    assert float(total[3].replace(",", "")) == pytest.approx(doc["wasted_usd"], abs=1)
    cells = {line.split()[1]: line for line in lines[1:-1]}
    assert " 1/7 mig " in cells["mig-0"] and " 1/3 time-slice " in cells["slice-0"] and " 1/4 vgpu " in cells["vgpu-0"]
    assert " 1/2 mig " in cells["mig-pod"] and "(unallocated)" in result.stdout


def test_min_idle_and_whole_window_change_the_answer(prometheus, end):
    def holders(*args):
        result = run("idle", "--prometheus", prometheus, "--json", *args)
        assert result.exit_code == 0, result.output
        return {(r["namespace"], r["pod"]) for r in json.loads(result.stdout)["idle"]}

    twenty = holders("--min-idle", "20h")
    assert ("team-h", "partial") in twenty and ("team-c", "eval") not in twenty
    assert ("team-h", "partial") not in holders("--min-idle", "21h")
    assert holders("--whole-window") == WHOLE_WINDOW
    # Below 2%: notebook-1 (0-2%) is idle only two minutes in three, eval (3%) never.
    below2 = holders("--below", "2", "--whole-window")
    assert ("team-a", "notebook-1") not in below2 and ("team-c", "eval") not in below2
    # Over the last 8 hours the burst 10 hours ago is out of the window: "stuck" is idle the whole window then.
    rows = json.loads(run("idle", "--prometheus", prometheus, "--json", "--window", "8h", "--whole-window").stdout)["idle"]
    stuck = [r for r in rows if r["pod"] == "stuck"]
    lag = (time.time() - end) / 3600 + 1 / 60  # the window ends now; the history a little earlier
    assert stuck and 8 - lag - 0.001 <= stuck[0]["hours_idle"] <= 8.001


def test_empty_result_is_a_message_not_an_error(prometheus):
    # Below 0.5%: only the unallocated T4 (0.2%) is idle; the MIG slices (1%) and notebook-1 (up to 2%) are not.
    result = run("idle", "--prometheus", prometheus, "--below", "0.5", "--whole-window")
    assert result.exit_code == 0
    assert "Tesla T4" in result.stdout and "notebook-1" not in result.stdout
    # notebook-1 is at 0% one minute in three: 8 hours a day below 0.1%.
    assert "notebook-1" in run("idle", "--prometheus", prometheus, "--below", "0.1").stdout
    nothing = run("idle", "--prometheus", prometheus, "--below", "0.1", "--min-idle", "9h")
    assert nothing.exit_code == 0, nothing.output
    assert nothing.stdout.startswith(f"no idle GPUs: none of the {GPUS_SEEN} GPUs was held below 0.1% for 9h or more in the last 24h")
    assert json.loads(run("idle", "--prometheus", prometheus, "--json", "--below", "0.1", "--whole-window").stdout)["idle"] == []


TEAMS = [{"name": "alpha", "namespace": "team-a", "gpus": 1}, {"name": "slicers", "namespace": "team-m", "gpus": 1},
         {"name": "empty", "namespace": "nobody", "gpus": 1}]


def team_stack(tmp_path):
    from conftest import stack_config, write_stack

    return str(write_stack(tmp_path, stack_config("aws", teams=TEAMS)))


def test_by_team_totals_exact(prometheus, end):
    from gpupools.idle.teams import by_team

    report = shared_report(prometheus, end, min_idle=3600, whole_window=False)
    teams = {t["name"]: t["namespace"] for t in TEAMS}
    totals = {t.team: t for t in by_team(report, teams, list(teams))}
    assert set(totals) == {"alpha", "slicers", "empty", "(no team)", "(unallocated)"}
    assert (totals["alpha"].holders, totals["alpha"].gpus_idle, totals["alpha"].gpu_hours_idle) == (2, 2, 48)  # notebook-1, slow-scrape
    assert totals["slicers"].gpus_idle == pytest.approx(6 / 7, abs=0.01) and totals["slicers"].gpu_hours_idle == pytest.approx(24 * 6 / 7, abs=0.01)
    assert totals["slicers"].wasted_usd == pytest.approx(24 * 6 / 7 * PRICES["A100-40GB"], abs=0.02)
    assert (totals["empty"].holders, totals["empty"].wasted_usd) == (0, 0)
    assert totals["(unallocated)"].gpu_hours_idle == 24
    assert sum(t.gpu_hours_idle for t in totals.values()) == pytest.approx(report.gpu_hours_idle, abs=0.02)
    assert sum(t.wasted_usd for t in totals.values()) == pytest.approx(report.total_wasted, abs=0.02)
    only = by_team(report, teams, ["slicers"])
    assert [t.team for t in only] == ["slicers"]


def test_by_team_table_and_json(prometheus, tmp_path):
    stack = team_stack(tmp_path)
    result = run("idle", "--prometheus", prometheus, "--by", "team", "--config", stack)
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0].split() == ["TEAM", "NAMESPACE", "HOLDERS", "GPUS", "IDLE", "GPU-HOURS", "WASTE", "(USD)"]
    assert {line.split()[0] for line in lines[1:-1]} == {"alpha", "slicers", "empty", "(no", "(unallocated)"}
    assert lines[-1].startswith("total: ")
    doc = json.loads(run("idle", "--prometheus", prometheus, "--by", "team=slicers", "--config", stack, "--json").stdout)
    assert [t["team"] for t in doc["by_team"]] == ["slicers"] and doc["by_team"][0]["namespace"] == "team-m"


@pytest.mark.parametrize("by, says", [
    ("team=nobody", "unknown team 'nobody'; the stack's teams: alpha, empty, slicers"),
    ("pool", "group by `team`"),
])
def test_by_bad_input(tmp_path, by, says):
    result = run("idle", "--prometheus", "http://127.0.0.1:9", "--by", by, "--config", team_stack(tmp_path))
    assert result.exit_code == 2 and result.stderr.startswith("error: --by: ") and says in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    without = run("idle", "--prometheus", "http://127.0.0.1:9", "--by", "team")
    assert without.exit_code == 2 and without.stderr.startswith("error: --by: ") and "--stack" in without.stderr


def test_plot_series_from_recorded_steps_match_raw(recorded, end):
    """Asked at a rule evaluation, the plot's points from recorded steps are those from raw samples."""
    from gpupools.idle.report import idle_report
    from gpupools.idle.promapi import Prometheus
    from gpupools.monitoring.promql import STEP_UTIL

    (last,) = Prometheus(recorded).query(f"max(timestamp({STEP_UTIL}))", end + 30)
    fast = idle_report(recorded, 24 * 3600, 5.0, now=last["value"], plot=True)
    raw = idle_report(recorded, 24 * 3600, 5.0, now=last["value"], plot=True, raw=True)
    assert fast.counted_from == "recorded idle steps" and set(fast.by_namespace) == set(raw.by_namespace)
    gappy = "team-f"  # five minutes longer in backfilled history, as in the report (no stale markers)
    for ns, points in raw.by_namespace.items():
        if ns != gappy:
            assert [t for t, _ in fast.by_namespace[ns]] == pytest.approx([t for t, _ in points], abs=0.01), ns
            assert [v for _, v in fast.by_namespace[ns]] == pytest.approx([v for _, v in points], abs=1e-6, nan_ok=True), ns


def test_plot(prometheus, tmp_path):
    out = tmp_path / "idle.png"
    result = run("idle", "--prometheus", prometheus, "--plot", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    if os.environ.get("GPUPOOLS_WRITE_DOCS_PLOT"):  # regenerate docs/idle-report.png from this data
        shutil.copy(out, ROOT / "docs" / "idle-report.png")


def test_plot_without_matplotlib_is_a_hint_exit_2(monkeypatch, tmp_path):
    """A plain install has no matplotlib: one line naming the extra, before any query (nobody listens on port 9)."""
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    result = run("idle", "--prometheus", "http://127.0.0.1:9", "--plot", str(tmp_path / "idle.png"))
    assert result.exit_code == 2
    assert result.stderr == "error: --plot: needs matplotlib, which a plain install leaves out: pip install 'gpupools[plot]'\n"
    assert not (tmp_path / "idle.png").exists()


def test_prometheus_error_is_one_line_exit_1(prometheus, monkeypatch):
    import gpupools.idle.questions as idle

    monkeypatch.setattr(idle, "step_sample", lambda metric, grid, offset: "sum(")  # Prometheus rejects this with a parse error
    result = run("idle", "--prometheus", prometheus)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: prometheus: ") and "bad_data" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_no_dcgm_metrics_message(tmp_path):
    needs_prometheus()
    with serving(tmp_path / "d", tmp_path / "prometheus.log") as url:  # a Prometheus with no data at all
        result = run("idle", "--prometheus", url)
        assert result.exit_code == 0
        assert "no DCGM GPU metrics" in result.stdout
        assert json.loads(run("idle", "--prometheus", url, "--json").stdout)["idle"] == []


def test_a_port_taken_before_prometheus_binds_it_is_not_mistaken_for_its_own(prometheus, tmp_path, monkeypatch):
    """The port picked for a server may be taken (here by the module's Prometheus, as by another test process's) before
    the new one binds it: the new one is started on another port, and the URL given is its own, over its data."""
    taken, pick = int(prometheus.rsplit(":", 1)[1]), free_port
    picks = iter([taken])
    monkeypatch.setitem(globals(), "free_port", lambda: next(picks, None) or pick())
    with serving(tmp_path / "d", tmp_path / "prometheus.log") as url:
        assert url != prometheus and _tsdb_path(url) == str(tmp_path / "d")
        assert "address already in use" not in (tmp_path / "prometheus.log").read_text()  # the log of the run that started
    assert _tsdb_path(prometheus) != str(tmp_path / "d")


@pytest.mark.parametrize("args, field, code", [
    (["--prometheus", "localhost:9090"], "--prometheus", 2),
    (["--prometheus", "http://127.0.0.1:99999"], "--prometheus", 2),
    (["--prometheus", "http://127.0.0.1:9", "--window", "yesterday"], "--window", 2),
    (["--prometheus", "http://127.0.0.1:9", "--window", "5m"], "--window", 2),
    (["--prometheus", "http://127.0.0.1:9", "--below", "150"], "--below", 2),
    (["--prometheus", "http://127.0.0.1:9", "--plot", "out.svg"], "--plot", 2),
    (["--prometheus", "http://127.0.0.1:9", "--min-idle", "soon"], "--min-idle", 2),
    (["--prometheus", "http://127.0.0.1:9", "--window", "8h", "--min-idle", "9h"], "--min-idle", 2),
    (["--prometheus", f"http://127.0.0.1:{free_port()}"], "--prometheus", 1),  # nobody listens there
])
def test_bad_input_and_unreachable(args, field, code):
    result = run("idle", *args)
    assert result.exit_code == code
    assert result.stderr.startswith(f"error: {field}: ")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


