"""`gpupools idle` against a real Prometheus on 127.0.0.1, loaded with 26 hours of dcgm-exporter-shaped history.

The history is backfilled with `promtool tsdb create-blocks-from openmetrics` into the server's data directory
before it starts, ending a minute before now, so the report's range query sees it as recent data.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpupools.catalog import load_catalog
from gpupools.cli import app

from conftest import ROOT

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def needs_prometheus() -> None:
    if not (PROMETHEUS and PROMTOOL):
        pytest.skip("prometheus and promtool are not installed (Debian/Ubuntu: apt-get install prometheus)")

STEP = 60
HOURS = 26
DRIVER = "570.133.20"
A10G, A100, T4 = "NVIDIA A10G", "NVIDIA A100-SXM4-80GB", "Tesla T4"
NODES = {"ip-10-0-1-17.ec2.internal": ("infer", "A10G"), "ip-10-0-2-40.ec2.internal": ("train", "A100-80GB")}
NODE_A, NODE_B = list(NODES)
NODE_C = "gke-unlabelled-node-1"  # no gpupools labels: the report says "-" for its pool


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


# (labels, metric, utilization(t_hours_before_end) or None when absent at that time)
def history():
    busy = lambda h: 40 + (h * 7) % 20  # noqa: E731
    return [
        (gpu_series(NODE_A, 0, A10G, ("team-a", "notebook-1")), "DCGM_FI_DEV_GPU_UTIL", lambda h: round(h * 60) % 3),  # 0-2 %, idle all day
        (gpu_series(NODE_A, 1, A10G, ("team-a", "web")), "DCGM_FI_DEV_GPU_UTIL", busy),
        # time-slicing: two pods hold GPU 2, both see the GPU's utilization
        (gpu_series(NODE_A, 2, A10G, ("team-e", "shared-a")), "DCGM_FI_DEV_GPU_UTIL", lambda h: 1),
        (gpu_series(NODE_A, 2, A10G, ("team-e", "shared-b")), "DCGM_FI_DEV_GPU_UTIL", lambda h: 1),
        (gpu_series(NODE_B, 0, A100, ("team-b", "trainer")), "DCGM_FI_DEV_GPU_UTIL", lambda h: 90),
        (gpu_series(NODE_B, 1, A100, ("team-b", "stuck")), "DCGM_FI_DEV_GPU_UTIL", lambda h: 50 if 9.9 < h < 10.1 else 1),  # one burst
        (gpu_series(NODE_B, 2, A100, ("team-c", "eval")), "DCGM_FI_DEV_GPU_UTIL", lambda h: 3 if h < 6 else None),  # last 6 h only
        (gpu_series(NODE_B, 3, A100, ("team-d", "mig-pod"), mig=("3g.40gb", "1")), "DCGM_FI_PROF_GR_ENGINE_ACTIVE", lambda h: 0.01),
        (gpu_series(NODE_C, 0, T4), "DCGM_FI_DEV_GPU_UTIL", lambda h: 0.2),  # nobody holds it
    ]


def write_openmetrics(path: Path, end: int) -> None:
    families: dict[str, list[str]] = {}
    for labels, metric, util in history():
        for i in range(HOURS * 3600 // STEP, -1, -1):
            t = end - i * STEP
            value = util(i * STEP / 3600)
            if value is not None:
                body = ",".join(f'{k}="{v}"' for k, v in labels.items())
                families.setdefault(metric, []).append(f"{metric}{{{body}}} {value} {t}")
    for node, (pool, gpu) in NODES.items():
        for i in range(HOURS * 3600 // STEP, -1, -1):
            families.setdefault("kube_node_labels", []).append(
                f'kube_node_labels{{node="{node}",label_gpupools_io_pool="{pool}",label_gpupools_io_gpu="{gpu}",job="kube-state-metrics"}} 1 {end - i * STEP}')
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
def prometheus(tmp_path_factory):
    needs_prometheus()
    work = tmp_path_factory.mktemp("prometheus")
    end = int(time.time()) - 60
    write_openmetrics(work / "history.om", end)
    data = work / "data"
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(work / "history.om"), str(data)],
                   check=True, capture_output=True, timeout=300)
    (work / "prometheus.yml").write_text("global:\n  evaluation_interval: 1m\n  scrape_interval: 1m\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={data}",
                             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d"],
                            stdout=subprocess.DEVNULL, stderr=open(work / "prometheus.log", "w"))
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail("prometheus did not start: " + (work / "prometheus.log").read_text()[-2000:])
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def lowest_price_per_gpu(gpu: str) -> float:
    """Independent of the code under test: min over the catalog's instance types of node price / GPUs."""
    cat = load_catalog()
    offers = [i.price / i.gpus for types in cat.instances.values() for i in types.values() if i.gpu is not None and i.gpu.name == gpu]
    offers += [a.price_per_gpu for a in cat.gcp_accelerators.values() if a.gpu.name == gpu]
    return min(offers)


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_json_rows_and_waste(prometheus):
    result = run("idle", "--prometheus", prometheus, "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    by_holder = {(r["namespace"], r["pod"]): r for r in rows}
    assert set(by_holder) == {("team-a", "notebook-1"), ("team-e", "shared-a"), ("team-e", "shared-b"), ("team-c", "eval"),
                              ("team-d", "mig-pod"), (None, None)}  # busy, bursting and absent holders are not idle
    a10g, a100, t4 = (lowest_price_per_gpu(g) for g in ("A10G", "A100-80GB", "T4"))
    expect = {  # holder: (hours, price per hour of what it holds, node, pool)
        ("team-a", "notebook-1"): (24, a10g, NODE_A, "infer"),
        ("team-e", "shared-a"): (24, a10g / 2, NODE_A, "infer"),  # two pods share one GPU and its cost
        ("team-e", "shared-b"): (24, a10g / 2, NODE_A, "infer"),
        ("team-c", "eval"): (6, a100, NODE_B, "train"),
        ("team-d", "mig-pod"): (24, a100 / 2, NODE_B, "train"),  # 3g.40gb: two per A100 80GB
        (None, None): (24, t4, NODE_C, None),
    }
    for holder, (hours, usd, node, pool) in expect.items():
        row = by_holder[holder]
        assert row["node"] == node and row["pool"] == pool
        assert row["hours_idle"] == pytest.approx(hours, rel=0.02), holder
        assert row["wasted_usd"] == pytest.approx(hours * usd, rel=0.02), holder
        assert row["max_utilization"] < 5
    assert by_holder[("team-d", "mig-pod")]["gpu"] == "3 3g.40gb"
    assert by_holder[("team-d", "mig-pod")]["max_utilization"] == pytest.approx(1.0)
    assert [r["wasted_usd"] for r in rows] == sorted((r["wasted_usd"] for r in rows), reverse=True)


def test_table_has_total_line(prometheus):
    result = run("idle", "--prometheus", prometheus, "--window", "24h", "--below", "5")
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0].split()[:4] == ["NAMESPACE", "POD", "NODE", "POOL"]
    assert len(lines) == 1 + 6 + 1
    rows = json.loads(run("idle", "--prometheus", prometheus, "--json").stdout)
    total = sum(r["wasted_usd"] for r in rows)
    assert lines[-1].startswith("total: 6 of 8 GPUs idle (below 5% whenever seen in the last 24h)")
    assert f"${total:,.2f} wasted" in lines[-1]
    assert "(unallocated)" in result.stdout and "team-d" in result.stdout


def test_threshold_and_window_change_the_answer(prometheus):
    # Below 2%: notebook-1 (0-2%) and eval (3%) are no longer idle.
    rows = json.loads(run("idle", "--prometheus", prometheus, "--json", "--below", "2").stdout)
    assert ("team-a", "notebook-1") not in {(r["namespace"], r["pod"]) for r in rows}
    assert ("team-c", "eval") not in {(r["namespace"], r["pod"]) for r in rows}
    # Over the last 8 hours the burst 10 hours ago is out of the window: "stuck" is idle then.
    rows = json.loads(run("idle", "--prometheus", prometheus, "--json", "--window", "8h").stdout)
    stuck = [r for r in rows if r["pod"] == "stuck"]
    assert stuck and stuck[0]["hours_idle"] == pytest.approx(8, rel=0.02)


def test_empty_result_is_a_message_not_an_error(prometheus):
    # Below 0.5%: only the unallocated T4 (0.2%) is idle; the MIG slice (1%) and notebook-1 (up to 2%) are not.
    result = run("idle", "--prometheus", prometheus, "--below", "0.5")
    assert result.exit_code == 0
    assert "Tesla T4" in result.stdout and "notebook-1" not in result.stdout
    nothing = run("idle", "--prometheus", prometheus, "--below", "0.1")
    assert nothing.exit_code == 0, nothing.output
    assert nothing.stdout.startswith("no idle GPUs: none of the 8 GPUs stayed below 0.1% over the last 24h")
    assert json.loads(run("idle", "--prometheus", prometheus, "--json", "--below", "0.1").stdout) == []


def test_plot(prometheus, tmp_path):
    out = tmp_path / "idle.png"
    result = run("idle", "--prometheus", prometheus, "--plot", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    if os.environ.get("GPUPOOLS_WRITE_DOCS_PLOT"):  # regenerate docs/idle-report.png from this data
        shutil.copy(out, ROOT / "docs" / "idle-report.png")


def test_prometheus_error_is_one_line_exit_1(prometheus, monkeypatch):
    import gpupools.idle as idle

    monkeypatch.setattr(idle, "report_query", lambda step: "sum(")  # Prometheus rejects this with a parse error
    result = run("idle", "--prometheus", prometheus)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: prometheus: ") and "bad_data" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_no_dcgm_metrics_message(tmp_path):
    needs_prometheus()
    # A Prometheus with no data at all, on another free port.
    port = free_port()
    (tmp_path / "p.yml").write_text("global: {}\n")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'p.yml'}", f"--storage.tsdb.path={tmp_path / 'd'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{url}/-/ready", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        result = run("idle", "--prometheus", url)
        assert result.exit_code == 0
        assert "no DCGM GPU metrics" in result.stdout
        assert json.loads(run("idle", "--prometheus", url, "--json").stdout) == []
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.parametrize("args, field, code", [
    (["--prometheus", "localhost:9090"], "--prometheus", 2),
    (["--prometheus", "http://127.0.0.1:99999"], "--prometheus", 2),
    (["--prometheus", "http://127.0.0.1:9", "--window", "yesterday"], "--window", 2),
    (["--prometheus", "http://127.0.0.1:9", "--window", "5m"], "--window", 2),
    (["--prometheus", "http://127.0.0.1:9", "--below", "150"], "--below", 2),
    (["--prometheus", "http://127.0.0.1:9", "--plot", "out.svg"], "--plot", 2),
    (["--prometheus", f"http://127.0.0.1:{free_port()}"], "--prometheus", 1),  # nobody listens there
])
def test_bad_input_and_unreachable(args, field, code):
    result = run("idle", *args)
    assert result.exit_code == code
    assert result.stderr.startswith(f"error: {field}: ")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
