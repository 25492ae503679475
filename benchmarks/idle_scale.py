"""How `gpupools idle` scales with the fleet, against a floor measured in the same run on the same Prometheus.

A synthetic fleet (8 H100s per node, every GPU held by a pod, a third of them idle, one sample per GPU every
5 minutes over 25 hours) is backfilled with `promtool tsdb create-blocks-from openmetrics` into a Prometheus
started on 127.0.0.1. The floor is the single instant query that reads every sample of the window once,
`max_over_time(DCGM_FI_DEV_GPU_UTIL[24h])` grouped by holder; the report is `idle_report` over the same 24 hours
(every query it sends: the per-step maxima, node pools, vGPU shares). Both are timed three times; medians are
compared. Run:

    python benchmarks/idle_scale.py                 # 1,024 GPUs
    python benchmarks/idle_scale.py --gpus 1024 8192
    python benchmarks/idle_scale.py --scrape 300 30  # also a fleet scraped every 30 s
    python benchmarks/idle_scale.py --json

Needs `prometheus` and `promtool` (Debian/Ubuntu: apt-get install prometheus). Targets: at most 3x the floor and
under 2 s at 1,024 GPUs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpupools.idle import idle_report  # noqa: E402

MODEL = "NVIDIA H100 80GB HBM3"
SCRAPE = 300
HOURS = 25
FLOOR = "max by (Hostname, UUID, namespace, pod) (max_over_time(DCGM_FI_DEV_GPU_UTIL[24h]))"


def write_fleet(path: Path, gpus: int, end: int, scrape: int = SCRAPE) -> None:
    times = [end - i * scrape for i in range(HOURS * 3600 // scrape, -1, -1)]
    with path.open("w") as out:
        out.write("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n")
        for g in range(gpus):
            node, index = f"node-{g // 8:05d}", g % 8
            labels = (f'gpu="{index}",UUID="GPU-{g:08x}-{g % 65536:04x}-4{g % 4096:03x}-8{g % 4096:03x}-{g * 2654435761 % 2**48:012x}",modelName="{MODEL}",Hostname="{node}",namespace="team-{g % 16}",'
                      f'pod="job-{g}",container="main",instance="10.0.{g // 2048}.{g // 8 % 256}:9400",job="nvidia-dcgm-exporter"')
            for k, t in enumerate(times):
                value = 1 if g % 3 == 0 else 20 + (g * 7 + k * 13) % 70
                out.write(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {value} {t}\n")
        out.write("# TYPE kube_node_labels gauge\n")
        for n in range((gpus + 7) // 8):
            for t in times[::max(1, 300 // scrape)]:
                out.write(f'kube_node_labels{{node="node-{n:05d}",label_gpupools_io_pool="h100",label_gpupools_io_gpu="H100",'
                          f'job="kube-state-metrics"}} 1 {t}\n')
        out.write("# EOF\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def instant(url: str, query: str, at: float) -> int:
    body = urlencode({"query": query, "time": f"{at:.3f}"}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{url}/api/v1/query", data=body), timeout=600) as r:
        doc = json.loads(r.read())
    assert doc["status"] == "success", doc
    return len(doc["data"]["result"])


def median_seconds(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(gpus: int, prometheus: str, promtool: str, scrape: int = SCRAPE) -> dict:
    with tempfile.TemporaryDirectory(prefix="gpupools-bench-") as tmp:
        work = Path(tmp)
        end = int(time.time()) // 60 * 60 - 60
        write_fleet(work / "fleet.om", gpus, end, scrape)
        subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(work / "fleet.om"), str(work / "data")],
                       check=True, capture_output=True)
        (work / "fleet.om").unlink()
        (work / "p.yml").write_text("global: {}\n")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen([prometheus, f"--config.file={work / 'p.yml'}", f"--storage.tsdb.path={work / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(600):
                try:
                    urllib.request.urlopen(f"{url}/-/ready", timeout=2)
                    break
                except OSError:
                    time.sleep(0.2)
            at = end + 30
            holders = instant(url, FLOOR, at)  # also warms the head and caches, for both
            report = idle_report(url, 24 * 3600, 5.0, now=at, min_idle=3600)
            assert holders == gpus and report.gpus_seen == gpus, (holders, report.gpus_seen)
            floor = median_seconds(lambda: instant(url, FLOOR, at))
            full = median_seconds(lambda: idle_report(url, 24 * 3600, 5.0, now=at, min_idle=3600))
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return {"gpus": gpus, "scrape_s": scrape, "idle_rows": len(report.idle), "floor_s": round(floor, 3), "report_s": round(full, 3),
            "ratio": round(full / floor, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="+", default=[1024])
    parser.add_argument("--scrape", type=int, nargs="+", default=[SCRAPE], help="scrape intervals in seconds (default 300)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not (prometheus and promtool):
        sys.exit("prometheus and promtool are needed (Debian/Ubuntu: apt-get install prometheus)")
    rows = [measure(n, prometheus, promtool, scrape) for n in args.gpus for scrape in args.scrape]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'GPUS':>6}  {'SCRAPE':>6}  {'IDLE ROWS':>9}  {'FLOOR (s)':>9}  {'REPORT (s)':>10}  {'RATIO':>6}")
    for r in rows:
        print(f"{r['gpus']:>6}  {r['scrape_s']:>5}s  {r['idle_rows']:>9}  {r['floor_s']:>9.3f}  {r['report_s']:>10.3f}  {r['ratio']:>5.1f}x")


if __name__ == "__main__":
    main()
