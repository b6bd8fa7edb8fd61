"""Rendering /metrics for a large snapshot: wall time and bytes, median of 5.

    .venv/bin/python -m bench.bench_exporter [--partitions 100000] [--groups 10000] [--per-group 10]

The snapshot is built from a synthetic observation (bench/synthetic.py), then
rendered through the same path a scrape takes (MetricsEndpoint.refresh), with
per-partition series on and off.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import time

from bench.bench_snapshot import Th
from bench.synthetic import observation
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.outputs.exporter import MetricsEndpoint


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--per-group", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    th = Th()
    t0 = time.time()
    state = ClusterState()
    build_snapshot("bench", observation(a.partitions, a.groups, a.per_group, now=t0), None, state, th, t0)
    snap = build_snapshot("bench", observation(a.partitions, a.groups, a.per_group, now=t0 + 30, step=1), None,
                          state, th, t0 + 30)
    print(f"snapshot: {len(snap.partitions)} partitions, {len(snap.group_partitions)} group-partitions")
    for partition_series in (True, False):
        ep = MetricsEndpoint(partition_series)
        ep.collector.update([snap])
        times = []
        for _ in range(a.runs):
            w = time.perf_counter()
            ep.refresh()
            times.append(time.perf_counter() - w)
        body = ep.render()
        gz = len(gzip.compress(body, 5))
        lines = body.count(b"\n")
        print(f"partition_series={partition_series}: render median {statistics.median(times):.2f}s "
              f"(runs {', '.join(f'{x:.2f}' for x in times)}); {len(body) / 1e6:.1f} MB, {lines} lines, "
              f"{gz / 1e6:.1f} MB gzipped; a scrape serves the cached bytes")


if __name__ == "__main__":
    main()
