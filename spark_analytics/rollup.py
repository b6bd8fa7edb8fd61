"""Daily roll-ups: one UTC day of history turned into compact aggregates the weekly report merges.

    python -m spark_analytics.rollup --history PATH --rollups DIR [--day YYYY-MM-DD ...] [--force]
    spark-submit spark_analytics/rollup.py --history URI --rollups DIR

Without ``--day`` every complete UTC day of the history whose roll-up is missing or older than its files is
rolled up (run it from cron after midnight; a late file — a collector that caught up, a compaction — makes its
day stale, and the next run picks it up). A day is re-runnable: its roll-up is replaced as a whole.

The two tables that hold ~95 % of the rows, ``group_lag`` (one row per group-topic and poll) and ``topic_health``
(one per topic and poll), become (docs/weekly-report.md, "Daily roll-ups", has the columns):

* ``group_lag_days``: per group-topic and day, the counts and maxima of the consumer figures;
* ``group_lag_hist``: per group-topic, day, metric and fixed log-scale bucket, the polls (`aggregations.histogram`:
  the week's lag percentiles are within 1 % of the exact ones, and a week is the sum of its days);
* ``group_lag_flags``: the polls with committed offsets below the log start (retention-loss episodes);
* ``group_lag_series``: the worst lag per group-topic and 15 minutes (the lag chart);
* ``topic_health_days``: per topic and day, polls and partition-polls under-replicated / under min ISR / offline;
* ``topic_health_polls``: per poll, those problem counts summed over the topics.

The first two come from one pass over the polls (`consumers.lag_cells`, cached while both are collected). The
transactional tables (``transactions``: a row per open transaction and poll; ``producers``, ``lso_gap``: a row per
partition with an open transaction and poll) become:

* ``transaction_epochs``: per transactional id and day, the producer epoch increases and the first and last
  observation (the increases across midnight are counted from those);
* ``producers_hanging``: the producer rows flagged hanging (rare);
* ``lso_gap_values``: per topic, day and LSO gap value, the partition-polls (exact percentiles by weight);
* ``lso_gap_partitions``: per partition and day, the polls with a gap (distinct partitions).

Those give the same figures as the rows. The transactions' detail (seen, stuck, the stuck ones' states) still reads
``transactions``: a busy producer's transaction is seen by one poll, so a roll-up per transaction would be as long as
the rows. The other history tables are small (per poll or per event) and the report reads them as they are.

Layout: ``DIR/<table>/date=YYYY-MM-DD/rollup.parquet`` and ``DIR/_days/YYYY-MM-DD.json``, the day's manifest
(version, when, the history files it was made from, each cluster's lag SLO). The manifest is removed first and
written last, each file atomically: a killed run leaves a day without a manifest, which the report treats as not
rolled up (and computes from the history), never a half-written day. A damaged day (a file missing, unreadable or
with other rows than its manifest says) reads the same way, with a warning naming the file (`Store.manifest`).
``DIR`` is a local (or mounted) directory, which Spark's tasks write (`table_files`: no table passes through the
driver, whatever the fleet). One run writes it at a time (`rollup_job.take_store`: a second run waits, then
does what the first left). Which days a run rolls up, and its command line: `rollup_job`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from collectors.model.wording import plural
from collectors.outputs.atomic import remove_stale_temps
from collectors.outputs.history.files import known_damaged
from spark_analytics import io, table_files
from spark_analytics.aggregations import consumers as C
from spark_analytics.aggregations import replication as R
from spark_analytics.aggregations import transactions as T
from spark_analytics.aggregations.common import day_of
from spark_analytics.aggregations.thresholds import thresholds
from spark_analytics.input_files import compacted_since, footers
from spark_analytics.period import DAY_S, Period, day_start, epoch_day
from spark_analytics.session import describe_failure

VERSION = 2
"""1: the consumer and replication tables only; 2: the transactional ones too (a version-1 day reads as not rolled
up: the report computes it from the history, the next roll-up run replaces it)."""
MANIFESTS = "_days"
FILE = "rollup.parquet"
INPUTS = ("group_lag", "topic_health", "transactions", "producers", "lso_gap")
"""The history tables the roll-up tables replace in the report."""
ADDED_COLUMNS: dict[str, dict[str, str]] = {
    "transaction_epochs": {"first_v2": "boolean", "last_v2": "boolean", "last_keeps_v1": "boolean"}}
"""Columns added to a roll-up table within its `VERSION` (forty-sixth session), with their Spark types: a day rolled
up before lacks them, and `read` gives them as null (what the aggregations take for "not known")."""
SOURCES = (*INPUTS, "cluster")
"""The history tables a roll-up is made from (a change to their files makes the day stale)."""
log = logging.getLogger("spark_analytics.rollup")
COLLECT_THREADS = 4
TABLES = ("group_lag_days", "group_lag_hist", "group_lag_flags", "group_lag_series", "topic_health_days",
          "topic_health_polls", "transaction_epochs", "producers_hanging", "lso_gap_values", "lso_gap_partitions")


def lazy_partials(frames: dict[str, Any], start: float, end: float, slo: Any, cells: Any = None) -> dict[str, Any]:
    """The roll-up tables of ``[start, end)`` from history frames (`INPUTS`, and ``cluster`` where given: which
    polls ran Transaction V2, `transactions.epoch_days`), lazy.

    `slo` is what ``polls_within_slo`` is counted against: a number, None (the default), or a frame of
    ``cluster, lag_slo_s`` (with a ``day`` column: per cluster and epoch day). The two consumer partials come from
    `cells` (`consumers.lag_cells` of the same range; made here when not given): give them cached, and the polls are
    read once for both."""
    g, th, gaps = frames["group_lag"], frames["topic_health"], frames["lso_gap"]
    if cells is None:
        cells = C.lag_cells(g, start, end, slo)
    return {"group_lag_days": C.days_of_cells(cells),
            "group_lag_hist": C.histograms_of_cells(cells),
            "group_lag_flags": C.retention_flags(g, start, end),
            "group_lag_series": C.lag_series_days(g, start, end),
            "topic_health_days": R.topic_days(th, start, end),
            "topic_health_polls": R.replication_polls(th, start, end),
            "transaction_epochs": T.epoch_days(frames["transactions"], start, end, frames.get("cluster")),
            "producers_hanging": T.hanging_days(frames["producers"], start, end),
            "lso_gap_values": T.lso_gap_values(gaps, start, end),
            "lso_gap_partitions": T.lso_gap_partitions(gaps, start, end)}


def _of_days(frames: dict[str, Any], days: Sequence[str]) -> tuple[dict[str, Any], float, float]:
    wanted = [epoch_day(d) for d in days]
    only = {name: df.filter(day_of().isin(wanted)) for name, df in frames.items() if name in SOURCES}
    return only, day_start(min(days)), day_start(max(days)) + DAY_S


def partials(spark: Any, frames: dict[str, Any], days: Sequence[str], slo: Any) -> dict[str, pa.Table]:
    """The roll-up tables of `days` computed from history frames, collected: `lazy_partials` of the days, one Spark
    job per table for all of them (rows carry their day), over the consumer cells computed once and cached.
    Everything is collected to the driver: for small frames (the tests' figures); a day of a fleet is written by
    `write_partials` instead."""
    if not days:
        return {}
    with _partials_of(frames, days, slo) as lazy:
        return collect(lazy)


def write_partials(frames: dict[str, Any], store: Store, day: str, slo: Any, **manifest: Any) -> dict[str, int]:
    """`day`'s roll-up tables computed from history frames and written into `store` (`Store.write_day`: by Spark's
    tasks, never collected to the driver's JVM), over the consumer cells computed once and cached; the rows of
    each. Collected, one day of a 100,000-partition fleet (~5 M rows) killed a 1 GB driver (docs/performance-log.md,
    "Step 18"). `manifest`: `Store.write_day`'s."""
    with _partials_of(frames, [day], slo) as lazy:
        return store.write_day(day, lazy, **manifest)


@contextlib.contextmanager
def _partials_of(frames: dict[str, Any], days: Sequence[str], slo: Any) -> Iterator[dict[str, Any]]:
    """`lazy_partials` of `days`, over the consumer cells computed once and cached while the context lasts."""
    only, start, end = _of_days(frames, days)
    with cached(C.lag_cells(only["group_lag"], start, end, slo)) as cells:
        yield lazy_partials(only, start, end, slo, cells)


def lag_partials(frames: dict[str, Any], days: Sequence[str], slo: Any) -> tuple[dict[str, Any], Any]:
    """What the consumer lag percentiles need, for a report from the history alone: ``group_lag_days`` and
    ``group_lag_hist`` (lazy) from one cell set for all of `days` (keyed by the first day: the report merges the
    days anyway), and those cells: collect the tables made from them inside `cached` (Spark finds the cached cells
    in plans built before). Collected and turned back into a literal DataFrame instead, ~150 k cells on the bench
    week overflowed the driver's 1 GB heap: a local relation is copied into every task."""
    only, start, end = _of_days(frames, days)
    cells = C.lag_cells(only["group_lag"], start, end, slo, day=epoch_day(min(days)))
    return {"group_lag_days": C.days_of_cells(cells), "group_lag_hist": C.histograms_of_cells(cells)}, cells


@contextlib.contextmanager
def cached(df: Any) -> Iterator[Any]:
    """`df` cached (and computed once, before the jobs that share it start at the same time), unpersisted after;
    None: nothing to cache."""
    with cached_all([df]) as held:
        yield held[0] if held else None


@contextlib.contextmanager
def cached_all(dfs: Sequence[Any]) -> Iterator[list[Any]]:
    """`cached` for several frames (None left out): they are computed at the same time, a few at a time like
    `collect` (small jobs mostly waiting on scheduling), and unpersisted after."""
    held = [df.cache() for df in dfs if df is not None]
    try:
        with ThreadPoolExecutor(max_workers=COLLECT_THREADS, thread_name_prefix="cache") as pool:
            list(pool.map(lambda df: df.count(), held))  # computed here, once: the jobs that read them run together
        yield held
    finally:
        release(held)


def release(dfs: Iterable[Any]) -> None:
    """Unpersist each of `dfs`, waiting until its blocks are gone, so that the next plan or report starts from a
    block manager without removals in flight. A frame that cannot be dropped is logged and left to the session: no
    figure depends on dropping it, and clean-up runs in `finally` blocks, where raising would hide the error that
    got there (a report from a month of roll-ups failed on a raising ``unpersist``, which hid the cause: its JVM's
    code cache was full, `session.SMALL_JOB_JAVA_OPTIONS`)."""
    for df in dfs:
        try:
            df.unpersist(blocking=True)
        except Exception as e:  # clean-up: any failure is logged, never raised over the real one
            log.warning("could not drop a cached frame (%s); the session keeps it until it stops",
                        describe_failure(e, 300))


def collect(frames: dict[str, Any]) -> dict[str, pa.Table]:
    """Run and collect every frame; a few at a time, since most are small jobs dominated by scheduling latency."""
    with ThreadPoolExecutor(max_workers=COLLECT_THREADS, thread_name_prefix="collect") as pool:
        futures = {name: pool.submit(df.toArrow) for name, df in frames.items()}
        return {name: f.result() for name, f in futures.items()}


def in_key_order(table: pa.Table) -> pa.Table:
    """`table`'s rows sorted by every scalar column, left to right (nulls last; list and struct columns are not
    keys). Spark returns an aggregate's rows in whatever order its tasks finish, so the same figures came out in
    another order from run to run, and from the history and the roll-ups (the report's tables start with their
    keys: cluster, then group and topic, broker, time...). In this order a report's tables and page are the same
    for the same figures, and diff cleanly week to week; on the driver, since a report's tables are small."""
    keys = [(f.name, "ascending") for f in table.schema
            if not (pa.types.is_nested(f.type) or pa.types.is_null(f.type))]
    return table.sort_by(keys) if keys and table.num_rows > 1 else table


def empty_like(df: Any) -> pa.Table:
    """The table `df.toArrow()` would give if it had no rows, without running it (its schema is analysed only)."""
    return table_files.arrow_schema(df).empty_table()


def recorded_slo(cluster: Any, days: Sequence[str]) -> dict[str, pa.Table]:
    """Per day of `days`, ``cluster, lag_slo_s`` as that day's collector recorded it (its latest record that day,
    else the default; never ``--lag-slo-seconds``): what a day's ``polls_within_slo`` is counted against, whether
    the roll-up job or a report computes the day, so its figures do not depend on which of them did. (A report
    judges its week against another SLO by recounting such days from their histograms:
    `consumers.consumer_lag_from_days`.) One Spark job for all the days, over `cluster` (``cluster`` polls)."""
    if not days:
        return {}
    each = [thresholds(cluster, Period(day_start(d), day_start(d) + DAY_S, d)).select(
        "cluster", "lag_slo_s", F.lit(d).alias("day")) for d in days]
    got = functools.reduce(lambda a, b: a.unionByName(b), each).toArrow()
    return {d: got.filter(pc.equal(got["day"], d)).select(["cluster", "lag_slo_s"]) for d in days}


def slo_frame(spark: Any, by_day: dict[str, pa.Table]) -> Any:
    """``cluster, lag_slo_s, day`` from each day's `thresholds` table (``cluster, lag_slo_s``)."""
    rows = [(c, float(v), epoch_day(d)) for d, t in by_day.items()
            for c, v in zip(t["cluster"].to_pylist(), t["lag_slo_s"].to_pylist(), strict=True)]
    return spark.createDataFrame(rows, "cluster string, lag_slo_s double, day int")


def _day_rows(df: Any, day: str) -> Any:
    if "day" in df.columns:
        return df.filter(F.col("day") == epoch_day(day))
    lo = day_start(day)
    return df.filter((F.col("time") >= lo) & (F.col("time") < lo + DAY_S))


# ----------------------------------------------------------------------------------------------- the store


@dataclass
class Store:
    """A roll-up directory."""

    root: Path

    @classmethod
    def at(cls, path: str) -> Store:
        """The store at a ``--rollups`` argument (a path or ``file://`` URI)."""
        return cls(Path(path.removeprefix("file://")))

    def manifest_path(self, day: str) -> Path:
        return self.root / MANIFESTS / f"{day}.json"

    def file(self, table: str, day: str) -> Path:
        return self.root / table / f"date={day}" / FILE

    def manifest(self, day: str) -> dict[str, Any] | None:
        """The day's manifest when the day can be read as rolled up, else None: the report then computes the day
        from the history, and the next roll-up run writes it again.

        None without a word for no manifest (a run killed half-way removed it first) and for an older `VERSION`.
        None with a warning naming the file (once per file state) for what no run of ours leaves: a manifest that
        is not JSON, a table's file missing, one whose Parquet footer cannot be read (emptied, truncated — a
        copy of the store cut short —, not Parquet), or one with other rows than the manifest recorded or rows of
        another day (a file copied from another day or run: `file_problem`). Without this check such a day failed
        the whole report at its first read."""
        path = self.manifest_path(day)
        try:
            doc = json.loads(path.read_text())
        except OSError:
            return None
        except ValueError as e:
            _unreadable(str(path), f"not a manifest ({e})")
            return None
        if not isinstance(doc, dict) or doc.get("version") != VERSION:
            return None
        if not isinstance(doc.get("history_files"), dict) or not isinstance(doc.get("rows") or {}, dict):
            _unreadable(str(path), "not a manifest (no history_files or rows of their shape)")
            return None
        rows = doc.get("rows") or {}
        for t in TABLES:
            problem = file_problem(self.file(t, day), day, rows.get(t))
            if problem is not None:
                _unreadable(str(self.file(t, day)), problem)
                return None
        return doc

    def sweep_temps(self) -> None:
        """Remove every temp file (`io.atomic_write`'s, `table_files`') in the tables' day directories and the
        manifests' directory. Call holding the store's lease (`rollup_job.take_store`): only runs holding it write
        there, so each temp is a killed run's, whatever its age; `io.atomic_write` removes one only an hour old and
        only when it writes the same file again, which a day redone right after its run was killed never is. The
        work directories at the root are left to their own rule (`table_files.work_dir`)."""
        dirs = [self.root / MANIFESTS, *(d for t in TABLES for d in (self.root / t).glob("date=*"))]
        for d in dirs:
            remove_stale_temps(d, io.TEMP_PREFIX, "", 0.0)

    def write_day(self, day: str, tables: dict[str, Any], sources: dict[str, list[list[Any]]] | None = None,
                  lag_slo_s: dict[str, float] | None = None, left_out: dict[str, list[list[Any]]] | None = None
                  ) -> dict[str, int]:
        """`day`'s `tables` (lazy frames: `lazy_partials`), each written by Spark's tasks and published as one
        file (`table_files`), then the manifest; the rows of each table."""
        self.manifest_path(day).unlink(missing_ok=True)  # from here until the end the day reads as not rolled up
        with table_files.work_dir(self.root) as work:
            rows = table_files.write_tables({name: _day_rows(tables[name], day) for name in TABLES},
                                            {name: self.file(name, day) for name in TABLES}, work)
        io.write_json(self.manifest_path(day), {"version": VERSION, "day": day, "rolled_up_at": time.time(),
                                                "history_files": sources or {}, "left_out": left_out or {},
                                                "lag_slo_s": lag_slo_s or {}, "rows": rows})
        return rows


def file_problem(path: Path, day: str, rows: int | None) -> str | None:
    """Why a stored table's file cannot be read as `day`'s as the manifest says (None: it can): missing, found
    damaged by a read of this process (`io.relisting`), its footer unreadable, other `rows` than recorded (None:
    not checked), or rows of another day by the footer's statistics of its ``day`` or ``time`` column (a file
    copied from another day with as many rows)."""
    try:
        st = path.stat()
    except OSError:
        return "missing"
    why = known_damaged(path)  # a report's read found its pages damaged past an intact footer (`io.relisting`)
    if why is not None:
        return f"does not read ({why})"
    got = _footer(str(path), st.st_mtime_ns, st.st_size)
    if isinstance(got, str):
        return got
    n, column, lo, hi = got
    if rows is not None and n != rows:
        return f"{n:,} rows where the manifest recorded {rows:,}"
    first, end = (epoch_day(day), epoch_day(day) + 1) if column == "day" else (day_start(day), day_start(day) + DAY_S)
    if lo is not None and hi is not None and not first <= lo <= hi < end:
        def when(v: Any) -> str:
            return (date(1970, 1, 1) + timedelta(days=v)).isoformat() if column == "day" else \
                datetime.fromtimestamp(v, UTC).isoformat(timespec="seconds")
        return f"rows of {when(lo)} to {when(hi)} by its {column} column, not of {day}"
    return None


@functools.lru_cache(maxsize=4096)
def _footer(path: str, mtime_ns: int, size: int) -> tuple[int, str, Any, Any] | str:
    """A Parquet file's rows and the range of its ``day`` (else ``time``) column by the footer's statistics (None
    where it has none: no rows), or why the footer cannot be read. Cached by the file's state: a report asks about
    each day of four weeks up to three times (its reads, the trend, whether it is a small job)."""
    try:
        meta = pq.read_metadata(path)
    except (OSError, ValueError, pa.ArrowException) as e:
        return f"unreadable Parquet ({type(e).__name__}: {e})"
    names = meta.schema.names
    column = "day" if "day" in names else "time"
    lo = hi = None
    if column in names:
        at = names.index(column)
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(at).statistics
            if stats is None or not stats.has_min_max:
                return meta.num_rows, column, None, None
            lo = stats.min if lo is None else min(lo, stats.min)
            hi = stats.max if hi is None else max(hi, stats.max)
    return meta.num_rows, column, lo, hi


@functools.cache
def _unreadable(path: str, problem: str) -> None:
    """Warn once per file and problem (cached: the same day is asked about several times a run)."""
    log.warning("roll-up file %s: %s; its day reads as not rolled up (a report computes it from the history, or "
                "leaves it out of the four-week trend; the next roll-up run writes it again)", path, problem)


def history_files(history: str, day: str) -> dict[str, list[list[Any]]]:
    """The live history files of a day for `SOURCES`: name and size, what staleness is judged on. A remote history
    (HDFS, S3...) is listed through the active Spark session's Hadoop FileSystem API (before the twenty-fourth
    session it was not listed, and its roll-ups were judged by their manifest alone: a late file never made its
    day stale)."""
    out: dict[str, list[list[Any]]] = {}
    start = day_start(day)
    for table in SOURCES:
        out[table] = sorted([Path(f).name, size] for f, size in io.live_file_sizes(history, table, start,
                                                                                    start + DAY_S))
    return out


def left_out_files(history: str, day: str) -> dict[str, list[list[Any]]]:
    """The history files of a day for `SOURCES` that this process found damaged and left out (`io.relisting`):
    {table: [[name, size, why]]}, recorded in the day's manifest (`left_out`) beside the files it was made from."""
    start = day_start(day)
    left_out = {table: [list(f) for f in io.damaged_file_sizes(history, table, start, start + DAY_S)]
                for table in SOURCES}
    return {table: files for table, files in left_out.items() if files}


def recall_left_out(store: Store, history: str, days: Sequence[str]) -> int:
    """Mark again, for this process, the history files the roll-ups of `days` were made without because they did
    not read (their manifests' `left_out`), where such a file is still there, as big, and still does not read
    (each is decoded once more: a whole file put back under its name is read again). Without this, every run
    after the roll-up's found the day stale (its files are not those recorded) and met the damaged file again: the
    roll-up job re-rolled the day every night, the report ran twice. Returns how many files it marked. A remote
    history's file is checked by Spark reading it (`io.recheck_damaged`)."""
    marked = 0
    for d in days:
        m = store.manifest(d)
        for table, files in ((m or {}).get("left_out") or {}).items():
            for name, size, why in files:
                marked += io.recheck_damaged(history, f"{table}/date={d}/{name}", size, why)
    return marked


SMALL_JOB_BYTES = 24 * 2**20
"""What a job may read to aggregate (`input_bytes`) and still start its JVM as a small job's
(`session.SMALL_JOB_JAVA_OPTIONS`). Measured by the report's CLI, each run a new process (docs/performance-log.md,
"Step 7"): from the 5,000-partition bench week's roll-ups (8.2 MiB) ~5 s faster, a day's roll-up of it (~14 MiB)
~2.5 s, the demo's history ~4 s; from the 25,000-partition week's roll-ups (45.5 MiB) ~2 s slower, from the
5,000-partition raw week (93.7 MiB) ~1.5 s."""


def input_bytes(history: str, days: Sequence[str], store: Store | None = None) -> int | None:
    """What a job over `days` reads to aggregate: the stored roll-ups of the days fresh in `store`, the `SOURCES`
    history files of the others (the history's other tables are small). None for a remote history (not listed)."""
    if io.is_remote(history):
        return None
    listed = {d: history_files(history, d) for d in days}  # once a day: staleness and size both come from it
    fresh = set(fresh_days(store, history, days, listed)) if store is not None else set()
    rolled = sum(f.stat().st_size for d in fresh for name in TABLES if (f := store.file(name, d)).is_file())
    return rolled + sum(size for d in days if d not in fresh for files in listed[d].values() for _, size in files)


def reads_little(history: str, days: Sequence[str], store: Store | None = None) -> bool:
    """Whether a job over `days` reads at most `SMALL_JOB_BYTES` to aggregate (`input_bytes`; a remote history,
    not listed, never does): its JVM then starts as a small job's."""
    read = input_bytes(history, days, store)
    return read is not None and read <= SMALL_JOB_BYTES


def fresh_days(store: Store, history: str, days: Sequence[str],
               listed: dict[str, dict[str, list[list[Any]]]] | None = None) -> list[str]:
    """The `days` whose roll-up exists and was made from the history files there now (`listed`: their
    `history_files`, when the caller has them already), or from files since removed (`made_from`) or compacted
    (`compacted_since`: a local history's). A day rolled up
    before a column of `ADDED_COLUMNS` was added stays fresh: made from a history without what the column records,
    it gives the figures it gave (``kafka-monitor-rollup --day`` redoes a day whose history has it: a collector
    upgraded before the roll-up job)."""
    out = []
    for d in days:
        m = store.manifest(d)
        if m is None:
            continue
        now = listed[d] if listed is not None else history_files(history, d)
        if made_from(m["history_files"], now) or (not io.is_remote(history) and compacted_since(
                m["history_files"], now, footers(io.local_path(history), lambda table, d=d: f"{table}/date={d}"))):
            out.append(d)
    return out


def coverage(week: str, days: Sequence[str], stored: Iterable[str], with_rows: Iterable[str], store: Path,
             today: str) -> tuple[str, bool]:
    """The weekly report's line on where its consumer and replication figures of `days` (the week's) came from,
    given ``--rollups``, and whether it is a warning: a complete day with history rows and no fresh roll-up means
    the daily job did not run, failed, or has not yet picked up a late file. The figures are the same either way
    (the day is computed from the history), so only the run's log says so: a weekly job that has silently read
    every day from the raw history for months is slow for no reason anyone sees."""
    stored, rows = set(stored), set(with_rows)
    counted = [d for d in days if d in rows or d in stored]
    read = [d for d in counted if d in stored]
    line = f"{week}: {len(read)} of {plural(len(counted), 'day')} with rows read from the roll-ups under {store}"
    missing = [d for d in counted if d not in stored and d < today]
    running = [d for d in counted if d not in stored and d >= today]
    if missing:
        line += (f"; from the history: {', '.join(missing)} (not rolled up, or stale since a late file: "
                 "`kafka-monitor-rollup` rolls them up; same figures, read slower; one it keeps because some of its "
                 "tables' files are gone stays so until its roll-up is deleted)")
    if running:
        line += f"; not over yet, from the history: {', '.join(running)}"
    return line, bool(missing)


def made_from(recorded: dict[str, list[list[Any]]], now: dict[str, list[list[Any]]]) -> bool:
    """Whether a roll-up that recorded `recorded` (its manifest's `history_files`) still stands for the history
    files listed `now`: each table's files are those it was made from, or none at all.

    None at all is the history's retention (`history.retention_days`, default 30) having removed the day: the
    roll-up is then the only record of it, not a stale one. Judged stale, the report computed the day from no rows
    and the four-week trend dropped the weeks before the retention's horizon; a fleet's history kept a week or two
    because it is big is exactly where roll-ups are meant to outlive it. Judged per table, since retention removes
    a day table by table (`HistoryWriter.apply_retention`): a run listing the day between two tables would
    otherwise roll up what is left over the only full record (a table removed by hand keeps its rows in the
    roll-up the same way). A late file, a collector that caught up still make a day stale: the files are there
    and differ. A compaction of the recorded files does not (`compacted_since`, where the footers can be read)."""
    return all(now.get(table, []) in (files, []) for table, files in recorded.items()) and \
        all(table in recorded for table, files in now.items() if files)


def tables_gone(recorded: dict[str, list[list[Any]]], now: dict[str, list[list[Any]]]) -> list[str]:
    """The tables a roll-up was made from files of (`recorded`, its manifest's `history_files`) that have none in
    the history `now`: their day's only record is the roll-up (`made_from`), and rolling the day up again would
    write it without them."""
    return sorted(table for table, files in recorded.items() if files and not now.get(table))


def read(spark: Any, store: Store, days: Sequence[str], clusters: Sequence[str] | None = None,
         tables: Sequence[str] = TABLES) -> dict[str, Any]:
    """The stored roll-up `tables` of `days` (at least one) as DataFrames (lazy), of `clusters` only when given.

    Each table's schema is read here from its days' footers (`footer_schema`) and given to Spark, which would
    otherwise infer it from a footer with a Spark job of its own: one job per table and read, ~0.25 s of the ~0.5 s
    a read of the ten tables took (docs/performance-log.md, "Step 12"). Days of a store's `VERSION` written before a
    column was added lack it (`ADDED_COLUMNS`): for such a table every day's footer is read (a few ms each, local
    files), and the union of their columns is the schema, a column a day lacks null in its rows, and one no day has
    is added as null; one footer would have dropped the column of every later day, or failed the plans that read
    it. The other tables' days were all written from the same plans, so their first day's footer speaks for all."""
    out = {}
    for name in tables:
        files = [str(store.file(name, d)) for d in days]
        df = spark.read.schema(footer_schema(*(files if name in ADDED_COLUMNS else files[:1]))).parquet(*files)
        for column, kind in ADDED_COLUMNS.get(name, {}).items():
            if column not in df.columns:
                df = df.withColumn(column, F.lit(None).cast(kind))
        out[name] = df
    if clusters:
        out = {name: df.filter(F.col("cluster").isin(list(clusters))) for name, df in out.items()}
    return out


def footer_schema(*paths: str) -> Any:
    """The Spark schema of roll-up files (local Parquet files written by `Store.write_day`) from their footers: the
    union of their columns, those of the file with the most first (the newest layout's order)."""
    schemas = [pq.read_schema(p) for p in paths]
    fields = list(max(schemas, key=len))
    names = {f.name for f in fields}
    for f in (f for s in schemas for f in s):  # by name only: a type written otherwise (large_string) Spark reads
        if f.name not in names:
            names.add(f.name)
            fields.append(f)
    return from_arrow_schema(pa.schema(fields))


def history_days(history: str) -> list[str]:
    """Every UTC day with a ``cluster`` directory in the history (a remote one listed through the active Spark
    session)."""
    return io.table_days(history, "cluster")


def day_data(spark: Any, history: str, day: str, tables: Sequence[str],
             clusters: Sequence[str] | None = None) -> dict[str, io.TableData]:
    """The history tables of one day, with the files each is read from: only that day's files are listed and read.
    (Filtering a longer range's frames by day instead is not pushed into the Parquet scan: every day rolled up read
    the whole range's files; the bench week's seven days took 64 s that way, 56 s this way, the same roll-ups.)"""
    start = day_start(day)
    return io.read_history(spark, history, start, start + DAY_S, clusters, tables=tables, check_schema=False)


def day_frames(spark: Any, history: str, day: str, tables: Sequence[str],
               clusters: Sequence[str] | None = None) -> dict[str, Any]:
    """`day_data`'s frames."""
    return {t: td.df for t, td in day_data(spark, history, day, tables, clusters).items()}


def read_of(listed: dict[str, list[list[Any]]], data: dict[str, io.TableData]) -> dict[str, list[list[Any]]]:
    """The files of `listed` (`history_files`, listed before the day was read) that the read of `data` was made
    from: what the day's manifest records. A file listed and gone by the read (a retention run renaming the day's
    directory, a compaction deleting its inputs) is not among them: recorded, it would stand for rows the roll-up
    never had, and with the day's files gone the roll-up would be taken for the record of them
    (`made_from`)."""
    read = {t: {Path(f).name for f in td.files} for t, td in data.items()}
    return {t: [f for f in files if f[0] in read.get(t, ())] for t, files in listed.items()}


def rollup(spark: Any, history: str, store: Store, days: Sequence[str]) -> dict[str, int]:
    """Roll up `days` and write them, one day at a time; returns the rows written per table."""
    written = dict.fromkeys(TABLES, 0)
    for d in days:  # a day at a time: what the driver collects stays one day's, whatever the fleet
        # The manifest's files are listed before the day is read, as the report lists its inputs: a file
        # published meanwhile is then read but not in the manifest, and makes the day stale (rolled up again);
        # listed after, it would be in the manifest unread, and the day fresh without its rows for good. Of
        # those listed, only the files read are recorded (`read_of`).
        listed, left_out = history_files(history, d), left_out_files(history, d)
        data = day_data(spark, history, d, SOURCES)
        frames = {t: td.df for t, td in data.items()}
        limits = recorded_slo(frames["cluster"], [d])[d]
        slo = dict(zip(limits["cluster"].to_pylist(), limits["lag_slo_s"].to_pylist(), strict=True))
        got = write_partials(frames, store, d, slo_frame(spark, {d: limits}), sources=read_of(listed, data),
                             lag_slo_s=slo, left_out=left_out)
        for name in TABLES:
            written[name] += got[name]
    return written


def rollup_day(spark: Any, history: str, store: Store, day: str) -> dict[str, int]:
    """`rollup` of one day, listed again and redone where that mends a failed read (`io.relisting`).

    The job runs after midnight, when the collector compacts the day that just ended (its files merged into one,
    then deleted) at its first hourly maintenance: a cron run can meet it. A file of the day cut short or damaged
    inside is left out, and recorded in the manifest's `left_out` (`left_out_files`), which later runs recall
    (`recall_left_out`)."""
    return io.relisting(lambda: rollup(spark, history, store, [day]), [history], log, day)


if __name__ == "__main__":  # python -m spark_analytics.rollup, spark-submit spark_analytics/rollup.py
    from spark_analytics.rollup_job import main

    sys.exit(main())
