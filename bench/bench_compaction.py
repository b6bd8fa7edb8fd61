"""Compacting a day of minute flushes: the merge as it is against the per-batch merge it replaced, side by side.

    .venv/bin/python -m bench.bench_compaction [--files 1440] [--clusters 1] [--partitions 600] [--runs 3]
    .venv/bin/python -m bench.bench_compaction --from DIR   # a history already written (copied, never changed)

Builds one day of `--files` flushes per table with the real `HistoryWriter` (a poll of the synthetic cluster and a
flush every minute, as the collector's defaults write it: 1,440 files a table a day), then times
`HistoryWriter.maybe_compact` of that day on a fresh copy of it, once with the writer as it is ("new") and once
with `PerBatchWriter` ("old": the merge as it was before, a `ParquetFile` and a footer read per file and every batch
conformed on its own), alternately, --runs times each. Prints the medians of the wall and CPU seconds and checks that
both wrote the same compacted files: rows, order, row groups, schema and footer metadata (the compact file's name
aside, which holds the time it was written).
"""

from __future__ import annotations

import argparse
import logging
import resource
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import CLUSTER, Size, evaluate_rules, thresholds
from bench.synthetic import observation
from collectors.alerting.lifecycle import AlertTracker
from collectors.model.poll import PollResult
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.outputs.history import HistoryWriter
from collectors.outputs.history.compaction import merged_schema
from collectors.outputs.history.files import (
    DayFiles,
    day_files,
    new_name,
    problem_of,
    publish_file,
    superseded_by,
)
from collectors.outputs.history.schema import (
    COMPACT_ROW_GROUP,
    COMPRESSION,
    DATE_PREFIX,
    conform,
    in_row_group_order,
)

DAY = 86_400.0
START = 1_800_000_000.0 - 1_800_000_000.0 % DAY  # a midnight, UTC


class PerBatchWriter(HistoryWriter):
    """The writer with the compaction as it was before `history.compaction` (the baseline): each file's schema
    read on its own, then each file opened again as a `ParquetFile` and every batch conformed on its own."""

    def compact(self, table: str, day: str, files: DayFiles | None = None) -> bool:
        directory = self.root / table / f"{DATE_PREFIX}{day}"
        self._delete_superseded(directory)
        files = day_files(directory)
        schemas: dict[str, pa.Schema] = {}
        for name in files.live:
            try:
                schemas[name] = pq.read_schema(directory / name)
            except (OSError, pa.ArrowException) as e:
                self._left_out(directory / name, problem_of(e))
        return self._merge_without_damaged(
            directory, schemas, lambda inputs: self._merge_per_batch(table, directory, inputs, files.repeats))

    def _merge_per_batch(self, table: str, directory: Path, schemas: dict[str, pa.Schema],
                         repeats: dict[str, str]) -> bool:
        live = list(schemas)
        if len(live) < 2:
            return False
        # the superseded names and the target schema as the writer has them: what the two modes differ in is the
        # reading and merging of the rows
        target = merged_schema(table, schemas.values(), set(live) | set(repeats) | superseded_by(directory, live),
                               live)

        def write(f: Any) -> None:
            with pq.ParquetWriter(f, target, compression=COMPRESSION) as w:
                pending: list[pa.Table] = []
                size = 0
                for name in live:
                    with pq.ParquetFile(directory / name) as source:
                        for batch in source.iter_batches(batch_size=COMPACT_ROW_GROUP):
                            pending.append(conform(batch, target))
                            size += batch.num_rows
                            if size >= COMPACT_ROW_GROUP:
                                w.write_table(in_row_group_order(table, pa.concat_tables(pending)))
                                pending, size = [], 0
                if pending:
                    w.write_table(in_row_group_order(table, pa.concat_tables(pending)))

        publish_file(directory, new_name("compact"), write)
        self._delete_superseded(directory)
        return True


MODES: dict[str, type[HistoryWriter]] = {"old": PerBatchWriter, "new": HistoryWriter}


def build_day(root: Path, files: int, clusters: int, size: Size) -> None:
    """`files` minute flushes of one day, each of a poll of every cluster (the synthetic cluster under other
    names), judged and tracked as the poller does, so that the event tables get their rows too."""
    clock = [START]
    w = HistoryWriter(root, clock=lambda: clock[0], retention_days=None, maintenance_interval_s=float("inf"))
    th = thresholds()
    names = [CLUSTER] + [f"{CLUSTER}-{i}" for i in range(1, clusters)]
    states = {c: (ClusterState(window_size=th.lag_window_points), AlertTracker()) for c in names}
    for k in range(files):
        now = START + 60.0 * k
        clock[0] = now
        # `step` counts polls 30 s apart; the seed alternates for some churn in ISRs and alerts
        obs = observation(size.partitions, size.groups, size.per_group, now=now, step=2 * k, seed=7 + (k // 10) % 2,
                          per_topic=size.per_topic)
        for c in names:
            state, tracker = states[c]
            snap = build_snapshot(c, obs, None, state, th, now)
            _, opened, resolved = tracker.update(c, evaluate_rules(snap, state, th, now), now)
            w.add(PollResult(snap, opened, resolved))
        if not w.flush():
            raise SystemExit(f"flush failed: {w.last_error}")


def compacted(root: Path) -> dict[str, tuple[pa.Table, list[int], dict[bytes, bytes]]]:
    """Every compact file under `root`, by table and day: its rows, row group sizes and footer metadata."""
    out = {}
    for f in sorted(root.glob(f"*/{DATE_PREFIX}*/compact-*.parquet")):
        md = pq.read_metadata(f)
        out[f"{f.parent.parent.name}/{f.parent.name}"] = (
            pq.read_table(f, partitioning=None), [md.row_group(i).num_rows for i in range(md.num_row_groups)],
            dict(md.metadata))
    return out


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1440, help="flushes (files a table) in the day")
    ap.add_argument("--clusters", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=600)
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--from", dest="source", type=Path, default=None,
                    help="compact a copy of this history instead of building one")
    ap.add_argument("--dir", type=Path, default=None, help="where to work (default: a temp dir, removed after)")
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    base = Path(tempfile.mkdtemp(prefix="bench-compaction-", dir=a.dir))
    try:
        source = a.source
        if source is None:
            source = base / "source"
            t0 = time.perf_counter()
            build_day(source, a.files, a.clusters, Size(a.partitions, a.groups, 5))
            print(f"built {a.files} flushes of {a.clusters} cluster(s) in {time.perf_counter() - t0:.1f}s")
        parts = sorted(source.glob(f"*/{DATE_PREFIX}*/*.parquet"))
        days = sorted({p.parent.name for p in parts})
        print(f"history: {len(parts)} files, {sum(p.stat().st_size for p in parts) / 1e6:.1f} MB, "
              f"{len({p.parent.parent.name for p in parts})} tables, days {', '.join(days)}")
        now = datetime.fromisoformat(days[-1][len(DATE_PREFIX):]).replace(tzinfo=UTC).timestamp() + 2 * DAY
        wall: dict[str, list[float]] = {m: [] for m in MODES}
        cpu: dict[str, list[float]] = {m: [] for m in MODES}
        outputs: dict[str, Any] = {}
        for run in range(a.runs):
            for mode, cls in (MODES.items() if run % 2 == 0 else reversed(MODES.items())):
                root = base / f"{mode}-{run}"
                shutil.copytree(source, root)
                w = cls(root, retention_days=None, compact_min_files=2)
                c0, t0 = cpu_s(), time.perf_counter()
                done = w.maybe_compact(now)
                wall[mode].append(time.perf_counter() - t0)
                cpu[mode].append(cpu_s() - c0)
                if run == 0:
                    outputs[mode] = compacted(root)
                    print(f"  {mode}: compacted {done} table-days")
                shutil.rmtree(root)
        same = outputs["old"].keys() == outputs["new"].keys() and all(
            o[0].equals(n[0], check_metadata=True) and o[1:] == n[1:]
            for o, n in ((outputs["old"][k], outputs["new"][k]) for k in outputs["old"]))
        for mode in MODES:
            print(f"{mode}: wall median {statistics.median(wall[mode]):.2f}s (runs "
                  f"{', '.join(f'{x:.2f}' for x in wall[mode])}), CPU median {statistics.median(cpu[mode]):.2f}s")
        print(f"new/old: {statistics.median(wall['new']) / statistics.median(wall['old']):.2f}x the wall time, "
              f"{statistics.median(cpu['new']) / statistics.median(cpu['old']):.2f}x the CPU; "
              f"same compacted files: {'yes' if same else 'NO'}")
        if not same:
            raise SystemExit("the two merges wrote different files")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
