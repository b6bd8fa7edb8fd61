"""Snapshot building + rule evaluation at scale: CPU seconds and peak memory, median of 5.

    .venv/bin/python -m bench.bench_snapshot [--partitions 100000] [--groups 10000] [--runs 5]

Each run is a fresh process-local poller state fed two consecutive polls (the
second is the one measured, with lag history and windows populated, as in
steady state). Peak memory is the process's max RSS growth over the run.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time

from bench.synthetic import observation
from collectors.alerting.rules import evaluate
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState


class Th:
    """Default thresholds, as collectors.config.Thresholds would give them."""

    def __init__(self) -> None:
        from collectors.config import Thresholds

        self.__dict__.update(Thresholds().model_dump())


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--per-group", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    th = Th()
    t0 = time.time()
    obs1 = observation(a.partitions, a.groups, a.per_group, now=t0, step=0)
    obs2 = observation(a.partitions, a.groups, a.per_group, now=t0 + 30, step=1)
    base_rss = rss_mb()
    print(f"input: {len(obs2.partitions)} partitions, {len(obs2.groups)} groups x {a.per_group} partitions; "
          f"built in {time.time() - t0:.1f}s; RSS {base_rss:.0f} MB")
    cpu, wall, alerts = [], [], 0
    for _ in range(a.runs):
        gc.collect()
        state = ClusterState(window_size=th.lag_window_points)
        build_snapshot("bench", obs1, None, state, th, t0)
        c0, w0 = time.process_time(), time.perf_counter()
        snap = build_snapshot("bench", obs2, None, state, th, t0 + 30)
        cands = evaluate(snap, state, th, t0 + 30)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        alerts = len(cands)
    print(f"snapshot+rules: CPU median {statistics.median(cpu):.2f}s (runs {', '.join(f'{x:.2f}' for x in cpu)}), "
          f"wall median {statistics.median(wall):.2f}s; {len(snap.partitions)} partition records, "
          f"{len(snap.group_partitions)} group-partition records, {alerts} alert candidates")
    print(f"peak RSS {rss_mb():.0f} MB (input alone {base_rss:.0f} MB)")


if __name__ == "__main__":
    main()
