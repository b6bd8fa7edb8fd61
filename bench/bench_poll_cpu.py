"""CPU of one whole poll in the collector's process, against a big sandbox in a process of its own.

    .venv/bin/python -m bench.bench_poll_cpu [--topics 10000] [--per-topic 10] [--groups 10000] [--runs 5]
        [--profile]

The sandbox (`python -m sandbox --topics 10000x10 --groups 10000 --mode kraft --no-incidents`, 100,000
partitions, 10,000 groups each reading one topic of 10 partitions) runs in its own process, so the figure is
the collector's own CPU: protocol encode and decode in both Kafka clients, the snapshot, the rules, the alert
and incident tracking -- everything a poll of the running loop does, imports and the first poll (connections,
ApiVersions) excluded. User + system CPU of this process (all its threads), median of the runs; `--profile`
adds cProfile's top functions of one more poll.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from collectors.config import MonitorConfig
from collectors.runtime.loop import PollGc
from collectors.runtime.poller import ClusterPoller, PollResult


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def poll(poller: ClusterPoller, collector_gc: PollGc | None) -> PollResult:
    """One poll, inside the loop's garbage-collector handling when given (its collection after the poll counts)."""
    with collector_gc.poll() if collector_gc is not None else contextlib.nullcontext():
        return poller.poll()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--per-topic", type=int, default=10)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--brokers", type=int, default=6)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--gc", choices=("loop", "default"), default="loop",
                    help="loop: the cyclic garbage collector as the running loop handles it (`PollGc`, counted); "
                         "default: Python's own, as before")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        info = Path(tmp) / "info.json"
        cmd = [sys.executable, "-m", "sandbox", "--topics", f"{a.topics}x{a.per_topic}", "--groups", str(a.groups),
               "--brokers", str(a.brokers), "--mode", "kraft", "--no-incidents", "--info-file", str(info)]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not info.exists():
                if proc.poll() is not None or time.monotonic() - t0 > 600:
                    raise SystemExit(f"sandbox did not start (exit {proc.returncode})")
                time.sleep(0.5)
            bootstrap = json.loads(info.read_text())["bootstrap_servers"]
            print(f"sandbox up in {time.monotonic() - t0:.0f}s: {a.topics * a.per_topic:,} partitions, "
                  f"{a.groups:,} groups, {a.brokers} brokers (pid {proc.pid})")
            cfg = MonitorConfig.model_validate({
                "clusters": [{"name": "big", "bootstrap_servers": bootstrap}],
                "poll_interval_s": 30, "request_timeout_s": 60})
            poller = ClusterPoller(cfg.clusters[0], cfg)
            try:
                collector_gc = PollGc() if a.gc == "loop" else None
                c0, w0 = cpu_s(), time.monotonic()
                first = poll(poller, collector_gc)
                print(f"first poll: CPU {cpu_s() - c0:.2f}s, wall {time.monotonic() - w0:.2f}s, "
                      f"{len(first.snapshot.partitions):,} partitions, {len(first.snapshot.group_partitions):,} "
                      f"group-partitions, errors {first.snapshot.errors[:2]}")
                cpus, walls = [], []
                for _ in range(a.runs):
                    c0, w0 = cpu_s(), time.monotonic()
                    r = poll(poller, collector_gc)
                    cpus.append(cpu_s() - c0)
                    walls.append(time.monotonic() - w0)
                s = r.snapshot
                print(f"poll CPU median {statistics.median(cpus):.2f}s (runs {', '.join(f'{x:.2f}' for x in cpus)});"
                      f" wall median {statistics.median(walls):.2f}s; {s.requests} requests; "
                      f"{len(s.alerts)} alerts; errors {s.errors[:2]}")
                if a.profile:
                    import cProfile
                    import pstats

                    prof = cProfile.Profile()
                    prof.enable()
                    poller.poll()
                    prof.disable()
                    pstats.Stats(prof).sort_stats("tottime").print_stats(30)
            finally:
                poller.close()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
