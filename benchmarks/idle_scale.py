"""How `gpupools idle` scales with the fleet, against a floor measured in the same run on the same Prometheus.

A synthetic fleet (8 H100s per node, every GPU held by a pod, a third of them idle, one sample per GPU every
5 minutes over 25 hours) is backfilled with `promtool tsdb create-blocks-from openmetrics` into a Prometheus
started on 127.0.0.1, together with the idle steps the stack's rule group records once a minute (the same values
the rules compute from those samples). The floor is the single instant query that reads every sample of the
window once, `max_over_time(DCGM_FI_DEV_GPU_UTIL[24h])` grouped by holder. The report is `idle_report` over the
same 24 hours, every query it sends included, counted both ways: from the recorded idle steps (what a stack with
gpupools' rules gets) and from raw samples (`--raw`, any Prometheus). The three are timed in turn, `--rounds` times;
medians are compared, and both ways must list the same rows. So is the CPU time Prometheus spent on each (Linux),
which a busy machine does not change. The report's own memory (the most Python allocated at once during one
report, from tracemalloc, in a run of its own) is printed too: it holds numbers per holder, never samples, so it
grows with the GPUs, not with the window or the scrape interval. So is the machine's one-minute load average around
the timings (the higher of before and after), which moves the wall-clock ratios.

With `--dips`, the busy GPUs also drop below the threshold for ten minutes every six hours (a checkpoint, a job
between two steps): then every GPU has a sample below it, and the raw report judges every busy GPU's steps one by
one, where without dips it needs to judge none (their lowest sample settles them). The idle rows are the same.

    python benchmarks/idle_scale.py                 # 1,024 GPUs
    python benchmarks/idle_scale.py --gpus 1024 8192
    python benchmarks/idle_scale.py --gpus 8192 --dips
    python benchmarks/idle_scale.py --scrape 300 60  # also a fleet scraped every minute
    python benchmarks/idle_scale.py --json

Needs `prometheus` and `promtool` (Debian/Ubuntu: apt-get install prometheus). Targets: at most 3x the floor on
both paths, at 8,192 GPUs too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpupools.idle.report import idle_report  # noqa: E402
from gpupools.monitoring.promql import IDLE_BELOW, IDLE_STEP, IDLE_STEPS_RAN, STEP_SECONDS, STEP_UTIL  # noqa: E402

MODEL = "NVIDIA H100 80GB HBM3"
SCRAPE = 300
HOURS = 25
FLOOR = "max by (Hostname, UUID, namespace, pod) (max_over_time(DCGM_FI_DEV_GPU_UTIL[24h]))"


DIP_EVERY, DIP_FOR = 6 * 3600, 600


def utilization(g: int, k: int, t: int = 0, dips: bool = False) -> int:
    """GPU g's k-th sample, taken at `t`: a third of the GPUs idle at 1 %, the rest busy between 20 and 89 % (with
    `dips`, at 2 % for ten minutes every six hours)."""
    if g % 3 == 0:
        return 1
    return 2 if dips and t % DIP_EVERY < DIP_FOR else 20 + (g * 7 + k * 13) % 70


def write_fleet(path: Path, gpus: int, end: int, scrape: int = SCRAPE, dips: bool = False) -> None:
    times = [end - i * scrape for i in range(HOURS * 3600 // scrape, -1, -1)]
    # The rule group runs every minute, 20 s after the scrapes: each evaluation records the highest sample since the
    # last one, or the latest sample when a slower scrape brought none; the idle series only where it is below 5 %.
    steps = [end - i * STEP_SECONDS + 20 for i in range((HOURS * 3600 - scrape) // STEP_SECONDS, -1, -1)]
    # OpenMetrics wants each family's samples together: one file per family, joined at the end.
    names = ("DCGM_FI_DEV_GPU_UTIL", STEP_UTIL, IDLE_STEP)
    parts = {name: path.with_suffix(f".{i}") for i, name in enumerate(names)}
    families: dict[str, list[str]] = {name: [] for name in names}
    files = {name: part.open("w") for name, part in parts.items()}
    with path.open("w") as out:
        for g in range(gpus):
            node, index = f"node-{g // 8:05d}", g % 8
            holder = (f'gpu="{index}",UUID="GPU-{g:08x}-{g % 65536:04x}-4{g % 4096:03x}-8{g % 4096:03x}-{g * 2654435761 % 2**48:012x}",'
                      f'modelName="{MODEL}",Hostname="{node}",namespace="team-{g % 16}",pod="job-{g}",container="main"')
            raw = f'{holder},instance="10.0.{g // 2048}.{g // 8 % 256}:9400",job="nvidia-dcgm-exporter"'
            for k, t in enumerate(times):
                families["DCGM_FI_DEV_GPU_UTIL"].append(f"DCGM_FI_DEV_GPU_UTIL{{{raw}}} {utilization(g, k, t, dips)} {t}")
            recorded = f'{holder},{IDLE_BELOW}="5"'
            for t in steps:
                k = (t - times[0]) // scrape  # the latest sample at or before t
                value = utilization(g, k, times[k], dips)
                families[STEP_UTIL].append(f"{STEP_UTIL}{{{recorded}}} {value} {t}")
                if value < 5:
                    families[IDLE_STEP].append(f"{IDLE_STEP}{{{recorded}}} 1 {t}")
            if g % 512 == 511 or g == gpus - 1:  # in batches, so memory stays flat at 8,192 GPUs
                for name, lines in families.items():
                    files[name].write("".join(line + "\n" for line in lines))
                    lines.clear()
        for name in names:
            files[name].close()
            out.write(f"# TYPE {name} gauge\n")
            with parts[name].open() as part:
                shutil.copyfileobj(part, out)
            parts[name].unlink()
        out.write(f"# TYPE {IDLE_STEPS_RAN} gauge\n" + "".join(f'{IDLE_STEPS_RAN}{{{IDLE_BELOW}="5"}} 1 {t}\n' for t in steps))
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


def cpu_seconds(pid: int) -> float | None:
    """CPU time a process has used so far (user and system; Linux), or None where /proc does not say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def medians(fns: list, rounds: int, pid: int) -> list[tuple[float, float | None]]:
    """Median seconds of each function, timed in turn so that a machine's load changes all of them alike, and the
    median CPU seconds Prometheus spent on it: on a busy machine the wall-clock times say as much about the other
    work as about the queries, the CPU time does not."""
    times: list[list[float]] = [[] for _ in fns]
    cpus: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, out, cpu in zip(fns, times, cpus):
            c0, t0 = cpu_seconds(pid), time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
            c1 = cpu_seconds(pid)
            if c0 is not None and c1 is not None:
                cpu.append(c1 - c0)
    return [(statistics.median(t), statistics.median(c) if c else None) for t, c in zip(times, cpus)]


def peak_mib(fn) -> float:
    """The most Python memory allocated at once while `fn` runs (threads included), in MiB."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def measure(gpus: int, prometheus: str, promtool: str, scrape: int = SCRAPE, dips: bool = False, rounds: int = 5) -> dict:
    with tempfile.TemporaryDirectory(prefix="gpupools-bench-") as tmp:
        work = Path(tmp)
        end = int(time.time()) // 60 * 60 - 60
        write_fleet(work / "fleet.om", gpus, end, scrape, dips)
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
            recorded = idle_report(url, 24 * 3600, 5.0, now=at, min_idle=3600)
            raw = idle_report(url, 24 * 3600, 5.0, now=at, min_idle=3600, raw=True)
            assert holders == gpus and recorded.gpus_seen == raw.gpus_seen == gpus, (holders, recorded.gpus_seen, raw.gpus_seen)
            assert recorded.counted_from == "recorded idle steps" and raw.counted_from == "raw samples"
            rows = [{(g.pod, round(g.hours_idle, 2), g.gpu_hours_idle) for g in r.idle} for r in (recorded, raw)]
            assert rows[0] == rows[1] and len(rows[0]) == len(range(0, gpus, 3)), "both ways must list the same idle GPUs"
            load_before = os.getloadavg()[0]
            (floor, floor_cpu), (from_rules, rules_cpu), (from_raw, raw_cpu) = medians(
                [lambda: instant(url, FLOOR, at), lambda: idle_report(url, 24 * 3600, 5.0, now=at, min_idle=3600),
                 lambda: idle_report(url, 24 * 3600, 5.0, now=at, min_idle=3600, raw=True)], rounds, proc.pid)
            load = max(load_before, os.getloadavg()[0])  # the machine's one-minute load average around the timings
            memory = max(peak_mib(lambda: idle_report(url, 24 * 3600, 5.0, now=at, min_idle=3600, raw=raw)) for raw in (False, True))
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return {"gpus": gpus, "scrape_s": scrape, "dips": dips, "idle_rows": len(recorded.idle), "floor_s": round(floor, 3),
            "recorded_s": round(from_rules, 3), "recorded_ratio": round(from_rules / floor, 1),
            "raw_s": round(from_raw, 3), "raw_ratio": round(from_raw / floor, 1), "report_mib": round(memory, 1),
            # Prometheus' CPU seconds against the floor's: what the queries cost, however busy the machine is
            "recorded_cpu_ratio": round(rules_cpu / floor_cpu, 1) if rules_cpu and floor_cpu else None,
            "raw_cpu_ratio": round(raw_cpu / floor_cpu, 1) if raw_cpu and floor_cpu else None, "load_average": round(load, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="+", default=[1024])
    parser.add_argument("--scrape", type=int, nargs="+", default=[SCRAPE], help="scrape intervals in seconds (default 300)")
    parser.add_argument("--dips", action="store_true", help="busy GPUs dip below the threshold now and then")
    parser.add_argument("--rounds", type=int, default=5, help="timings of each (default 5)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if any(s < STEP_SECONDS or s % STEP_SECONDS for s in args.scrape):
        parser.error("--scrape: whole minutes only (the recorded steps are written for one sample per step at most)")
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not (prometheus and promtool):
        sys.exit("prometheus and promtool are needed (Debian/Ubuntu: apt-get install prometheus)")
    rows = [measure(n, prometheus, promtool, scrape, args.dips, args.rounds) for n in args.gpus for scrape in args.scrape]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'GPUS':>6}  {'SCRAPE':>6}  {'IDLE ROWS':>9}  {'FLOOR (s)':>9}  {'RECORDED (s)':>12}  {'RATIO':>6}  {'RAW (s)':>8}  "
          f"{'RATIO':>6}  {'CPU RATIOS':>11}  {'MEMORY':>8}  {'LOAD':>5}")
    for r in rows:
        cpu = "/".join("?" if r[k] is None else f"{r[k]:.1f}x" for k in ("recorded_cpu_ratio", "raw_cpu_ratio"))
        print(f"{r['gpus']:>6}  {r['scrape_s']:>5}s  {r['idle_rows']:>9}  {r['floor_s']:>9.3f}  {r['recorded_s']:>12.3f}  "
              f"{r['recorded_ratio']:>5.1f}x  {r['raw_s']:>8.3f}  {r['raw_ratio']:>5.1f}x  {cpu:>11}  {r['report_mib']:>5.1f} MiB  {r['load_average']:>5.1f}")


if __name__ == "__main__":
    main()
