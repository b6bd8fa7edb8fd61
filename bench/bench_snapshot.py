"""Snapshot building + rule evaluation at scale: CPU seconds and peak memory, median of 5.

    .venv/bin/python -m bench.bench_snapshot [--partitions 100000] [--groups 10000] [--runs 5]

Each run is a fresh process-local poller state fed two consecutive polls (the
second is the one measured, with lag history and windows populated, as in
steady state). Peak memory is the process's max RSS growth over the run.
"""

from __future__ import annotations

import gc
import statistics
import time

from bench.common import SyntheticPoller, median_of, rss_mb, size_of, size_parser, synthetic_polls, thresholds
from collectors.config import Thresholds

Th = Thresholds  # tests/unit/test_checkpoint.py takes its thresholds from here (it predates bench/common.py)


def main() -> None:
    a = size_parser(__doc__, partitions=100_000, groups=10_000).parse_args()
    th = thresholds()
    t0 = time.time()
    (t1, obs1), (t2, obs2) = synthetic_polls(size_of(a), t0, 2)
    base_rss = rss_mb()
    print(f"input: {len(obs2.partitions)} partitions, {len(obs2.groups)} groups x {a.per_group} partitions; "
          f"built in {time.time() - t0:.1f}s; RSS {base_rss:.0f} MB")
    cpu, wall, alerts = [], [], 0
    for _ in range(a.runs):
        gc.collect()
        poller = SyntheticPoller(th)
        poller.snapshot(obs1, t1)
        c0, w0 = time.process_time(), time.perf_counter()
        snap = poller.snapshot(obs2, t2)
        cands = poller.judge(snap, t2)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        alerts = len(cands)
    print(f"snapshot+rules: CPU median {median_of(cpu)}, wall median {statistics.median(wall):.2f}s; "
          f"{len(snap.partitions)} partition records, {len(snap.group_partitions)} group-partition records, "
          f"{alerts} alert candidates")
    print(f"peak RSS {rss_mb():.0f} MB (input alone {base_rss:.0f} MB)")


if __name__ == "__main__":
    main()
