"""History write throughput: one large poll into Parquet, median of 5.

    .venv/bin/python -m bench.bench_history [--partitions 100000] [--groups 10000] [--per-group 10] [--runs 5]

The snapshot is built the way the poller builds it (two consecutive synthetic polls, the second one kept,
so lag seconds and windows are populated): 100,000 partitions in 2,000 topics and 100,000 group-partitions.
`partition_detail` is on, so every group-partition is a row. Each run is a fresh writer on a fresh directory:
`add` (records -> Arrow batches) then `flush` (one zstd Parquet file per table, fsync, rename, fsync dir).
A read-back of the largest table is timed too, for scale.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import median_of, size_of, size_parser, timed, warmed
from collectors.outputs.history import HistoryWriter, read_table


def main() -> None:
    ap = size_parser(__doc__, partitions=100_000, groups=10_000)
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir, removed after)")
    a = ap.parse_args()
    t0 = time.time()
    _, snap, _ = warmed(size_of(a), t0)
    print(f"snapshot: {len(snap.partitions)} partitions in {len(snap.topics)} topics, "
          f"{len(snap.group_partitions)} group-partitions in {len(snap.groups)} groups, "
          f"{len(snap.transactions)} transactions; built in {time.time() - t0:.1f}s")
    base = Path(tempfile.mkdtemp(prefix="bench-history-", dir=a.dir))
    adds: list[float] = []
    flushes: list[float] = []
    totals: list[float] = []
    reads: list[float] = []
    rows = files = size = 0
    per_table: dict[str, int] = {}
    try:
        for run in range(a.runs):
            root = base / f"run-{run}"
            w = HistoryWriter(root, partition_detail=True, retention_days=None)
            c0 = time.perf_counter()
            w.add_snapshot(snap)
            c1 = time.perf_counter()
            ok = w.flush()
            c2 = time.perf_counter()
            if not ok:
                raise SystemExit(f"flush failed: {w.last_error}")
            adds.append(c1 - c0)
            flushes.append(c2 - c1)
            totals.append(c2 - c0)
            rows, files, size = w.rows_written, w.files_written, w.bytes_written
            per_table = {p.name: sum(f.stat().st_size for f in p.rglob("*.parquet")) for p in sorted(root.iterdir())}
            with timed(reads):
                n = len(read_table(root, "group_partition_lag"))
            assert n == len(snap.group_partitions)
            shutil.rmtree(root)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    med = statistics.median(totals)
    print(f"rows {rows} in {files} files, {size / 1e6:.2f} MB written ({size / max(rows, 1):.1f} bytes/row)")
    print(f"write (add + flush): median {median_of(totals, 3)} -> {rows / med:,.0f} rows/s")
    print(f"  add (records -> Arrow) median {statistics.median(adds):.3f}s, "
          f"flush (Parquet + fsync + rename) median {statistics.median(flushes):.3f}s")
    print(f"read back group_partition_lag ({len(snap.group_partitions)} rows) median {statistics.median(reads):.3f}s")
    print("bytes per table: " + ", ".join(f"{k} {v / 1e3:.0f} kB" for k, v in per_table.items()))


if __name__ == "__main__":
    main()
