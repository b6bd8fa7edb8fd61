"""Rendering /metrics for a large snapshot: wall time and bytes, median of 5.

    .venv/bin/python -m bench.bench_exporter [--partitions 100000] [--groups 10000] [--per-group 10]

The snapshot is built from a synthetic observation (bench/synthetic.py), then
rendered through the same path a scrape takes (MetricsEndpoint.refresh), with
per-partition series on and off.
"""

from __future__ import annotations

import gzip
import time

from bench.common import median_of, size_of, size_parser, timed, warmed
from collectors.outputs.exporter import MetricsEndpoint


def main() -> None:
    a = size_parser(__doc__, partitions=100_000, groups=10_000).parse_args()
    _, snap, _ = warmed(size_of(a), time.time())
    print(f"snapshot: {len(snap.partitions)} partitions, {len(snap.group_partitions)} group-partitions")
    for partition_series in (True, False):
        ep = MetricsEndpoint(partition_series)
        ep.collector.update([snap])
        times: list[float] = []
        for _ in range(a.runs):
            with timed(times):
                ep.refresh()
        body = ep.render()
        gz = len(gzip.compress(body, 5))
        lines = body.count(b"\n")
        print(f"partition_series={partition_series}: render median {median_of(times)}; {len(body) / 1e6:.1f} MB, "
              f"{lines} lines, {gz / 1e6:.1f} MB gzipped; a scrape serves the cached bytes")


if __name__ == "__main__":
    main()
