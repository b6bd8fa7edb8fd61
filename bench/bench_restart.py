"""Restart cost: saving and loading the poller checkpoint at scale, and starting next to a day of history.

    .venv/bin/python -m bench.bench_restart [--partitions 100000] [--groups 10000] [--runs 5]

The checkpoint holds what 3 polls of the synthetic cluster leave in the poller (log-end histories, commit
windows, ISR views, open alerts). Startup is measured up to the first poll: `Monitor(config)`, `resume`
(the checkpoint), and the history writer's start over a day of uncompacted part files (one per minute and
table, as a 60 s flush interval leaves them) -- once with the checkpoint (resumed) and once without (cold,
the baseline), in this process. Medians of --runs runs.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import CLUSTER, median_of, rss_mb, size_of, size_parser, timed, warmed
from collectors.config import MonitorConfig
from collectors.outputs.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from collectors.outputs.history import TABLES, HistoryWriter
from collectors.runtime.poller import Monitor


def _day_of_part_files(root: Path, day: str, files_per_table: int) -> int:
    """One small file per flush and table for a whole day (rows do not matter to a start, names do)."""
    n = 0
    for table in ("cluster", "topic_health", "group_lag", "brokers", "alert_events"):
        d = root / table / f"date={day}"
        d.mkdir(parents=True, exist_ok=True)
        schema = TABLES[table]
        empty = pa.table({f.name: pa.nulls(1, f.type) for f in schema}, schema=schema)
        for i in range(files_per_table):
            # each file its own poll time, as real flushes have: identical ones are read once, with a warning each
            at = pa.array([i * 60_000_000], pa.int64()).cast(schema.field("time").type)
            pq.write_table(empty.set_column(schema.get_field_index("time"), "time", at),
                           d / f"part-{1_800_000_000_000_000_000 + i}-{i:08x}.parquet")
            n += 1
    return n


def main() -> None:
    ap = size_parser(__doc__, partitions=100_000, groups=10_000)
    ap.add_argument("--files-per-table", type=int, default=1440, help="a day of 60 s flushes")
    a = ap.parse_args()
    now = time.time()
    t0 = time.perf_counter()
    poller, _, current = warmed(size_of(a), now - 60, polls=3, track=True, flap_isr=True)
    state = poller.state
    print(f"state: {len(state.hw_history)} log-end histories, {len(state.commit_windows)} commit windows, "
          f"{len(current)} open alerts; built in {time.perf_counter() - t0:.1f}s; RSS {rss_mb():.0f} MB")
    work = Path(tempfile.mkdtemp(prefix="bench-restart-"))
    try:
        state_dir = work / "state"
        cp = Checkpoint(CLUSTER, "bench", now, state, current)
        saves: list[float] = []
        loads: list[float] = []
        size = 0
        for _ in range(a.runs):
            with timed(saves):
                _, size = save_checkpoint(state_dir, cp)
            with timed(loads):
                loaded = load_checkpoint(state_dir, CLUSTER, lag_points=60, window_size=poller.th.lag_window_points,
                                         now=now, max_age_s=3600)
            assert loaded is not None and len(loaded.state.commit_windows) == len(state.commit_windows)
        print(f"checkpoint: {size / 1e6:.1f} MB; save median {median_of(saves, 3)}; load median {median_of(loads, 3)}")

        history = work / "history"
        day = time.strftime("%Y-%m-%d", time.gmtime(now))
        s0 = time.perf_counter()
        files = _day_of_part_files(history, day, a.files_per_table)
        print(f"history: {files} part files for {day} written in {time.perf_counter() - s0:.1f}s")
        cfg = MonitorConfig.model_validate({
            "clusters": [{"name": CLUSTER, "bootstrap_servers": "127.0.0.1:1"}], "state_dir": str(state_dir)})
        timings: dict[str, list[float]] = {"cold": [], "resumed": []}
        for _ in range(a.runs):
            for mode in ("cold", "resumed"):
                with timed(timings[mode]):
                    m = Monitor(cfg)
                    if mode == "resumed":
                        line = m.resume(state_dir, now)[0]
                        assert "resumed" in line, line
                    writer = HistoryWriter(history)
                writer.close()
                m.close()
        cold, resumed = statistics.median(timings["cold"]), statistics.median(timings["resumed"])
        print(f"start to first poll, cold (baseline): median {median_of(timings['cold'], 3)}")
        print(f"start to first poll, resumed:        median {median_of(timings['resumed'], 3)}  "
              f"ratio resumed/cold {resumed / cold:.1f}x (+{resumed - cold:.2f}s)")
        print(f"peak RSS {rss_mb():.0f} MB")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
