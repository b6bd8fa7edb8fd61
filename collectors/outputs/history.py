"""Snapshot history as Parquet: one dataset per table under a root, Hive-partitioned by UTC date.

Layout (``docs/history-schema.md`` documents every table and column)::

    <root>/<table>/date=YYYY-MM-DD/part-<time_ns>-<uuid8>.parquet     one flush of one table and day
    <root>/<table>/date=YYYY-MM-DD/compact-<time_ns>-<uuid8>.parquet  a compaction of earlier files of that day

Writing. `HistoryWriter.add` turns a poll's records into Arrow record batches at once (the records are
mutable and shared with the alert tracker, and Arrow is far smaller than Python objects) and buffers them.
`flush` writes, per table and date, one new file: a hidden temp file ``.tmp-<uuid>.parquet`` in the same
directory, fsync, ``os.replace`` to its final name, fsync of the directory. Rows leave the buffer only once
their file has been renamed into place, so a failed flush loses nothing (up to ``max_buffer_rows``; beyond
that the oldest rows are dropped and counted) and a killed process leaves only whole files plus hidden temp
files, which every reader ignores (pyarrow and Spark skip names starting with ``.`` or ``_``) and the next
writer deletes. At most the unflushed interval is lost.

Compaction (the superseding scheme). ``compact(table, date)`` merges a past day's live files into one
``compact-*.parquet`` file whose Parquet footer metadata ``kmon.replaces`` lists the file names it contains
(the inputs, plus whatever those inputs had themselves superseded). Publishing the merged file is a single
atomic rename that publishes data and the superseding list together; the inputs are deleted afterwards. A
reader that sees a ``compact-*`` file excludes every name it lists, so between the rename and the deletes,
and after a kill in between, readers see each row exactly once; the next writer start (or compaction)
finishes the deletes. `read_table` and `live_files` apply this rule; a foreign reader (Spark) should read the
file list from `live_files`. One writer per root at a time is assumed (it deletes temp files on start).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from collectors.model.records import AlertRecord, ClusterSnapshot, GroupPartitionRecord
from collectors.model.vocabulary import PARTITION_STATUS_RANK
from collectors.outputs.atomic import fsync_dir, publish

log = logging.getLogger(__name__)

HISTORY_SCHEMA_VERSION = 1
"""Version of the history tables' schema (``schema_version`` column and ``kmon.history_schema_version``)."""

DEFAULT_MAX_BUFFER_ROWS = 1_000_000
COMPRESSION = "zstd"
COMPACT_ROW_GROUP = 128 * 1024
REPLACES_KEY = b"kmon.replaces"
TEMP_PREFIX = ".tmp-"
DELETING_PREFIX = ".deleting-"
DATE_PREFIX = "date="

_S, _F64, _I32, _I64, _B = pa.string(), pa.float64(), pa.int32(), pa.int64(), pa.bool_()
_LI32, _LS = pa.list_(pa.int32()), pa.list_(pa.string())


def _schema(*cols: tuple[str, pa.DataType]) -> pa.Schema:
    base = [("cluster", _S), ("time", _F64), ("schema_version", _I32)]
    return pa.schema([pa.field(n, t) for n, t in (*base, *cols)])


# Every field is nullable in Arrow terms (so files of any schema version merge and cast cleanly); which
# columns are always set is documented in docs/history-schema.md.
TABLES: dict[str, pa.Schema] = {
    "cluster": _schema(
        ("cluster_id", _S), ("reachable", _B), ("stale", _B), ("stale_sections", _S), ("mode", _S),
        ("controller_id", _I32), ("poll_duration_s", _F64), ("requests", _I64), ("errors", _I32),
        ("brokers", _I32), ("topics", _I32), ("partitions", _I32), ("under_replicated", _I32),
        ("under_min_isr", _I32), ("at_min_isr", _I32), ("offline", _I32), ("groups", _I32),
        ("alerts_open", _I32), ("alerts_critical", _I32)),
    "brokers": _schema(
        ("broker_id", _I32), ("host", _S), ("port", _I32), ("rack", _S), ("alive", _B), ("in_zookeeper", _B),
        ("is_controller", _B), ("reachable", _B)),
    "topic_health": _schema(
        ("topic", _S), ("internal", _B), ("partitions", _I32), ("replication_factor", _I32),
        ("min_insync_replicas", _I32), ("unclean_leader_election", _B), ("retention_ms", _I64),
        ("cleanup_policy", _S), ("under_replicated", _I32), ("under_min_isr", _I32), ("at_min_isr", _I32),
        ("offline", _I32), ("preferred_leader_imbalance", _I32), ("failures_before_write_stop", _I32),
        ("failures_before_data_loss", _I32)),
    "partition_changes": _schema(
        ("topic", _S), ("partition", _I32), ("kind", _S), ("leader_before", _I32), ("leader_after", _I32),
        ("isr_before", _LI32), ("isr_after", _LI32)),
    "group_lag": _schema(
        ("group_id", _S), ("topic", _S), ("state", _S), ("members", _I32), ("status", _S),
        ("worst_partition_status", _S), ("lag_sum", _I64), ("lag_max", _I64), ("lag_seconds_max", _F64),
        ("partitions", _I32), ("below_log_start", _I32), ("min_seconds_to_retention", _F64),
        ("last_commit_time", _F64)),
    "group_partition_lag": _schema(
        ("group_id", _S), ("topic", _S), ("partition", _I32), ("committed_offset", _I64),
        ("log_start_offset", _I64), ("high_watermark", _I64), ("last_stable_offset", _I64), ("lag", _I64),
        ("lag_seconds", _F64), ("status", _S), ("last_commit_time", _F64), ("below_log_start", _B),
        ("seconds_to_retention", _F64)),
    "transactions": _schema(
        ("transactional_id", _S), ("coordinator", _I32), ("state", _S), ("producer_id", _I64),
        ("producer_epoch", _I32), ("timeout_ms", _I64), ("start_time", _F64), ("age_seconds", _F64),
        ("partitions", _LS)),
    "producers": _schema(
        ("topic", _S), ("partition", _I32), ("producer_id", _I64), ("producer_epoch", _I32),
        ("txn_start_offset", _I64), ("last_timestamp", _F64), ("transactional_id", _S), ("hanging", _B)),
    "lso_gap": _schema(
        ("topic", _S), ("partition", _I32), ("lso_gap", _I64), ("high_watermark", _I64),
        ("last_stable_offset", _I64)),
    "consensus": _schema(
        ("kind", _S), ("server", _S), ("node_id", _I32), ("serving", _B), ("mode", _S),
        # ZooKeeper (ZkServerRecord)
        ("zxid", _I64), ("zxid_epoch", _I64), ("zxid_counter", _I64), ("lag_behind_leader", _I64),
        ("latency_avg_ms", _F64), ("latency_max_ms", _F64), ("outstanding_requests", _I64), ("connections", _I64),
        ("znode_count", _I64), ("learners", _I32), ("synced_followers", _I32), ("error", _S),
        # KRaft (KRaftVoterRecord)
        ("log_end_offset", _I64), ("lag", _I64), ("last_fetch_time", _F64), ("last_caught_up_time", _F64),
        ("leader_id", _I32), ("leader_epoch", _I32), ("high_watermark", _I64)),
    "alert_events": _schema(
        ("event", _S), ("rule", _S), ("severity", _S), ("subject", _S), ("summary", _S), ("first_seen", _F64),
        ("last_seen", _F64), ("resolved_at", _F64), ("value", _F64)),
}
DETAIL_TABLES = frozenset({"group_partition_lag"})
"""Tables written only with ``partition_detail`` on."""

_ZK_FIELDS = ("server", "serving", "mode", "zxid", "zxid_epoch", "zxid_counter", "lag_behind_leader",
              "latency_avg_ms", "latency_max_ms", "outstanding_requests", "connections", "znode_count", "learners",
              "synced_followers", "error")
_KRAFT_FIELDS = ("node_id", "log_end_offset", "lag", "last_fetch_time", "last_caught_up_time", "leader_id",
                 "leader_epoch", "high_watermark")
_ALERT_FIELDS = ("rule", "severity", "subject", "summary", "first_seen", "last_seen", "resolved_at", "value")


# ----- records -> columns


Columns = dict[str, list[Any]]


def _fields(records: Sequence[Any], names: Iterable[str]) -> Columns:
    return {n: [getattr(r, n) for r in records] for n in names}


def _schema_fields(table: str) -> list[str]:
    return [n for n in TABLES[table].names if n not in ("cluster", "time", "schema_version")]


def snapshot_columns(snap: ClusterSnapshot, opened: Sequence[AlertRecord] = (),
                     resolved: Sequence[AlertRecord] = (), partition_detail: bool = False) -> dict[str, Columns]:
    """One poll as columns per table (``cluster``/``time``/``schema_version`` are added by the writer).

    Tables without rows are left out. Exposed for tests and for the row-count documentation.
    """
    out: dict[str, Columns] = {}
    topics = snap.topics
    out["cluster"] = {
        "cluster_id": [snap.cluster_id], "reachable": [snap.reachable], "stale": [snap.stale],
        "stale_sections": [",".join(snap.stale_sections)], "mode": [snap.mode],
        "controller_id": [snap.controller_id], "poll_duration_s": [snap.poll_duration_s],
        "requests": [snap.requests], "errors": [len(snap.errors)], "brokers": [len(snap.brokers)],
        "topics": [len(topics)], "partitions": [sum(t.partitions for t in topics)],
        "under_replicated": [sum(t.under_replicated for t in topics)],
        "under_min_isr": [sum(t.under_min_isr for t in topics)], "at_min_isr": [sum(t.at_min_isr for t in topics)],
        "offline": [sum(t.offline for t in topics)], "groups": [len(snap.groups)],
        "alerts_open": [len(snap.alerts)], "alerts_critical": [sum(a.severity == "critical" for a in snap.alerts)]}
    if snap.brokers:
        out["brokers"] = _fields(snap.brokers, _schema_fields("brokers"))
    if topics:
        out["topic_health"] = _fields(topics, _schema_fields("topic_health"))
    if snap.partition_changes:
        cols = _fields(snap.partition_changes, ("time", *_schema_fields("partition_changes")))
        cols["cluster"] = [c.cluster for c in snap.partition_changes]  # events carry their own time
        out["partition_changes"] = cols
    if snap.groups or snap.group_partitions:
        out["group_lag"] = _group_lag(snap)
    if partition_detail and snap.group_partitions:
        out["group_partition_lag"] = _fields(snap.group_partitions, _schema_fields("group_partition_lag"))
    open_txns = [t for t in snap.transactions if t.start_time is not None]
    if open_txns:
        out["transactions"] = _fields(open_txns, _schema_fields("transactions"))
    if snap.producers:
        out["producers"] = _fields(snap.producers, _schema_fields("producers"))
    gaps = [(p, g) for p in snap.partitions if (g := p.lso_gap)]
    if gaps:
        out["lso_gap"] = {"topic": [p.topic for p, _ in gaps], "partition": [p.partition for p, _ in gaps],
                          "lso_gap": [g for _, g in gaps], "high_watermark": [p.high_watermark for p, _ in gaps],
                          "last_stable_offset": [p.last_stable_offset for p, _ in gaps]}
    if snap.zookeeper or snap.kraft_voters:
        out["consensus"] = _consensus(snap)
    if opened or resolved:
        events = [("open", a) for a in opened] + [("resolve", a) for a in resolved]
        cols = {"event": [e for e, _ in events]}
        cols.update({n: [getattr(a, n) for _, a in events] for n in _ALERT_FIELDS})
        out["alert_events"] = cols
    return out


def _group_lag(snap: ClusterSnapshot) -> Columns:
    """Per group and topic; a group without committed partitions gets one row with topic null."""
    by_group: dict[str, dict[str, list[GroupPartitionRecord]]] = defaultdict(lambda: defaultdict(list))
    for gp in snap.group_partitions:
        by_group[gp.group_id][gp.topic].append(gp)
    cols: Columns = {n: [] for n in _schema_fields("group_lag")}
    groups = {g.group_id: g for g in snap.groups}
    for gid in list(groups) + [g for g in by_group if g not in groups]:
        g = groups.get(gid)
        per_topic = by_group.get(gid) or {None: []}
        for topic, parts in per_topic.items():
            lags = [p.lag for p in parts if p.lag is not None]
            secs = [p.lag_seconds for p in parts if p.lag_seconds is not None]
            to_ret = [p.seconds_to_retention for p in parts if p.seconds_to_retention is not None]
            commits = [p.last_commit_time for p in parts if p.last_commit_time is not None]
            worst = max((p.status for p in parts), key=lambda s: PARTITION_STATUS_RANK.get(s, -1), default="OK")
            row = {"group_id": gid, "topic": topic, "state": g.state if g else None,
                   "members": g.members if g else None, "status": g.status if g else None,
                   "worst_partition_status": worst,
                   "lag_sum": sum(lags) if lags else None, "lag_max": max(lags) if lags else None,
                   "lag_seconds_max": max(secs) if secs else None, "partitions": len(parts),
                   "below_log_start": sum(p.below_log_start for p in parts),
                   "min_seconds_to_retention": min(to_ret) if to_ret else None,
                   "last_commit_time": max(commits) if commits else None}
            for k, v in row.items():
                cols[k].append(v)
    return cols


def _consensus(snap: ClusterSnapshot) -> Columns:
    cols: Columns = {n: [] for n in _schema_fields("consensus")}
    for z in snap.zookeeper:
        row = {n: getattr(z, n) for n in _ZK_FIELDS}
        row["kind"] = "zookeeper"
        for k in cols:
            cols[k].append(row.get(k))
    for v in snap.kraft_voters:
        row = {n: getattr(v, n) for n in _KRAFT_FIELDS}
        row.update(kind="kraft", server=f"{'observer' if v.role == 'observer' else 'voter'}-{v.node_id}", mode=v.role)
        for k in cols:
            cols[k].append(row.get(k))
    return cols


def _clean_floats(values: list[Any]) -> list[Any]:
    """NaN never reaches a file: it becomes null (sums and charts downstream must not be poisoned)."""
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]


def _to_batch(table: str, cols: Columns, cluster: str, t: float) -> pa.RecordBatch:
    schema = TABLES[table]
    n = len(next(iter(cols.values())))
    arrays = []
    for f in schema:
        if f.name == "schema_version":
            values: list[Any] = [HISTORY_SCHEMA_VERSION] * n
        elif f.name in cols:
            values = cols[f.name]
        elif f.name == "cluster":
            values = [cluster] * n
        elif f.name == "time":
            values = [t] * n
        else:
            values = [None] * n
        if pa.types.is_floating(f.type):
            values = _clean_floats(values)
        arrays.append(pa.array(values, type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _date_of(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(t))


def _split_by_date(batch: pa.RecordBatch) -> list[tuple[str, pa.RecordBatch]]:
    times = batch.column("time").to_pylist()
    dates = {t: _date_of(t) for t in set(times)}
    if len(set(dates.values())) == 1:
        return [(next(iter(dates.values())), batch)]
    idx: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(times):
        idx[dates[t]].append(i)
    return [(d, batch.take(pa.array(rows, pa.int64()))) for d, rows in sorted(idx.items())]


# ----- files


def _ensure_dir(path: Path) -> None:
    if path.is_dir():
        return
    path.mkdir(parents=True, exist_ok=True)
    fsync_dir(path.parent)
    fsync_dir(path.parent.parent)


def _new_name(prefix: str) -> str:
    return f"{prefix}-{time.time_ns()}-{uuid.uuid4().hex[:8]}.parquet"


def _unlink(path: Path) -> None:
    """Delete one file (a seam for tests that simulate a kill in the middle of a compaction)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _publish(directory: Path, name: str, write: Callable[[Any], None]) -> int:
    """Publish `name` in `directory` whole or not at all (a hidden temp file that readers skip until renamed)."""
    return publish(directory / name, write, directory / f"{TEMP_PREFIX}{uuid.uuid4().hex}.parquet")


_REPLACES_CACHE: dict[tuple[str, int, int, int], frozenset[str]] = {}


def _replaces(path: Path) -> frozenset[str]:
    """Names a compact file supersedes (cached by inode/size/mtime: the file never changes once published)."""
    try:
        st = path.stat()
        key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
        cached = _REPLACES_CACHE.get(key)
        if cached is not None:
            return cached
        meta = pq.read_schema(path).metadata or {}
        names = frozenset(json.loads(meta.get(REPLACES_KEY, b"[]")))
    except FileNotFoundError:
        return frozenset()
    except (OSError, ValueError, pa.ArrowException) as e:
        log.warning("history: cannot read the footer of %s: %s", path, e)
        return frozenset()
    if len(_REPLACES_CACHE) > 4096:
        _REPLACES_CACHE.clear()
    _REPLACES_CACHE[key] = names
    return names


def _scan_date_dir(directory: Path) -> tuple[list[str], set[str]]:
    """(live file names, superseded names present) of one ``date=`` directory."""
    try:
        names = [n for n in os.listdir(directory) if n.endswith(".parquet") and not n.startswith((".", "_"))]
    except FileNotFoundError:
        return [], set()
    superseded: set[str] = set()
    for n in names:
        if n.startswith("compact-"):
            superseded |= _replaces(directory / n)
    return sorted(n for n in names if n not in superseded), superseded & set(names)


def _parse_date(name: str) -> date | None:
    if not name.startswith(DATE_PREFIX):
        return None
    try:
        return date.fromisoformat(name[len(DATE_PREFIX):])
    except ValueError:
        return None


def _date_dirs(table_dir: Path) -> list[tuple[date, Path]]:
    try:
        entries = list(os.scandir(table_dir))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for e in entries:
        d = _parse_date(e.name)
        if d is not None and e.is_dir():
            out.append((d, Path(e.path)))
    return sorted(out)


def _utc_date(t: float) -> date:
    return datetime.fromtimestamp(t, UTC).date()


def _conform(batch: pa.RecordBatch | pa.Table, schema: pa.Schema) -> pa.Table:
    """Columns of `schema` in its order: missing ones null, others cast (older files may use other types)."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    arrays = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            arrays.append(col if col.type == f.type else col.cast(f.type))
        else:
            arrays.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


# ----- writer


@dataclass(slots=True)
class _Chunk:
    table: str
    date: str
    batch: pa.RecordBatch


class HistoryWriter:
    """Buffers poll results as Arrow batches and writes them as Parquet files atomically (see module doc).

    Never raises from `add`, `flush`, `maybe_flush` or `close` on I/O trouble: the error is kept in
    `last_error` (None again after the next fully successful flush) for the caller to turn into an alert.
    """

    def __init__(self, root: Path, flush_interval_s: float = 60, partition_detail: bool = False,
                 retention_days: int | None = 30, compact_min_files: int = 10,
                 clock: Callable[[], float] = time.time, max_buffer_rows: int = DEFAULT_MAX_BUFFER_ROWS,
                 maintenance_interval_s: float = 3600) -> None:
        self.root = Path(root)
        self.flush_interval_s = float(flush_interval_s)
        self.partition_detail = partition_detail
        self.retention_days = retention_days
        self.compact_min_files = max(2, int(compact_min_files))
        self.clock = clock
        self.max_buffer_rows = max(1, int(max_buffer_rows))
        self.maintenance_interval_s = maintenance_interval_s
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self.last_maintenance_error: str | None = None
        self.dropped_rows = 0
        self.flush_failures = 0
        self.rows_written = 0
        self.files_written = 0
        self.bytes_written = 0
        self._chunks: list[_Chunk] = []
        self._buffered = 0
        self._failing = False
        self._lock = threading.RLock()
        self._last_flush = clock()
        self._last_maintenance = -math.inf
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.recover()
        except OSError as e:
            self._record_error(f"history root {self.root}: {e}")

    # ----- buffering

    @property
    def buffered_rows(self) -> int:
        return self._buffered

    def add(self, result: Any) -> None:
        """Buffer one `PollResult` (snapshot + newly opened + newly resolved alerts)."""
        self.add_snapshot(result.snapshot, result.opened, result.resolved)

    def add_snapshot(self, snapshot: ClusterSnapshot, opened: Sequence[AlertRecord] = (),
                     resolved: Sequence[AlertRecord] = ()) -> None:
        try:
            tables = snapshot_columns(snapshot, opened, resolved, self.partition_detail)
            chunks = []
            for table, cols in tables.items():
                batch = _to_batch(table, cols, snapshot.cluster, snapshot.time)
                chunks.extend(_Chunk(table, d, b) for d, b in _split_by_date(batch))
        except Exception as e:  # a record the schema cannot hold is a bug; it must not stop the poll loop
            log.exception("history: cannot convert the snapshot of %s", getattr(snapshot, "cluster", "?"))
            self._record_error(f"cannot convert snapshot: {type(e).__name__}: {e}")
            return
        with self._lock:
            self._chunks.extend(chunks)
            self._buffered += sum(c.batch.num_rows for c in chunks)
            if self._buffered > self.max_buffer_rows:
                if not self._failing:
                    self.flush()
                self._enforce_bound()

    def _enforce_bound(self) -> None:
        while self._buffered > self.max_buffer_rows and self._chunks:
            oldest = self._chunks.pop(0)
            self._buffered -= oldest.batch.num_rows
            self.dropped_rows += oldest.batch.num_rows
            log.warning("history: buffer full after failed flushes; dropped %d %s rows of %s",
                        oldest.batch.num_rows, oldest.table, oldest.date)

    def _record_error(self, message: str) -> None:
        self.last_error = message
        self.last_error_at = self.clock()

    # ----- flushing

    def maybe_flush(self, now: float | None = None) -> bool:
        """Flush when `flush_interval_s` has passed since the last flush; also runs maintenance hourly.

        Returns False only when a flush was due and failed.
        """
        now = self.clock() if now is None else now
        ok = True
        if now - self._last_flush >= self.flush_interval_s:
            ok = self.flush()
        if now - self._last_maintenance >= self.maintenance_interval_s:
            self._last_maintenance = now
            self.maintain(now)
        return ok

    def flush(self) -> bool:
        """Write every buffered row: one new file per table and date. True when all were written."""
        with self._lock:
            self._last_flush = self.clock()
            groups: dict[tuple[str, str], list[_Chunk]] = defaultdict(list)
            for c in self._chunks:
                groups[(c.table, c.date)].append(c)
            errors: list[str] = []
            written: set[int] = set()
            for (table, day), chunks in groups.items():
                try:
                    self._write(table, day, [c.batch for c in chunks])
                except Exception as e:  # OSError above all (disk full, read-only); never crash the poll loop
                    if not isinstance(e, OSError):
                        log.exception("history: unexpected error writing %s/%s", table, day)
                    errors.append(f"{table}/{DATE_PREFIX}{day}: {type(e).__name__}: {e}")
                    continue
                written.update(id(c) for c in chunks)
            if written:
                self._chunks = [c for c in self._chunks if id(c) not in written]
                self._buffered = sum(c.batch.num_rows for c in self._chunks)
            if errors:
                self.flush_failures += 1
                self._failing = True
                more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
                self._record_error(f"history flush failed: {errors[0]}{more}")
                log.error("history: flush failed for %d of %d files; %d rows kept: %s", len(errors), len(groups),
                          self._buffered, "; ".join(errors[:3]))
                self._enforce_bound()
                return False
            self._failing = False
            self.last_error = None
            return True

    def _write(self, table: str, day: str, batches: list[pa.RecordBatch]) -> None:
        directory = self.root / table / f"{DATE_PREFIX}{day}"
        _ensure_dir(directory)
        data = pa.Table.from_batches(batches, schema=TABLES[table]).replace_schema_metadata(
            {"kmon.table": table, "kmon.history_schema_version": str(HISTORY_SCHEMA_VERSION)})
        size = _publish(directory, _new_name("part"),
                        lambda f: pq.write_table(data, f, compression=COMPRESSION))
        self.rows_written += data.num_rows
        self.files_written += 1
        self.bytes_written += size

    def close(self) -> bool:
        return self.flush()

    # ----- recovery, retention, compaction

    def recover(self) -> dict[str, int]:
        """Remove what a killed process can leave behind and finish interrupted compactions."""
        counts = {"temp_files": 0, "superseded_files": 0, "deleting_dirs": 0}
        for table_dir in self._table_dirs():
            for entry in list(os.scandir(table_dir)):
                if entry.name.startswith(DELETING_PREFIX) and entry.is_dir():
                    shutil.rmtree(entry.path, ignore_errors=True)
                    counts["deleting_dirs"] += 1
            for _, d in _date_dirs(table_dir):
                for name in os.listdir(d):
                    if name.startswith(TEMP_PREFIX) or name.endswith(".tmp"):
                        _unlink(d / name)
                        counts["temp_files"] += 1
                counts["superseded_files"] += self._delete_superseded(d)
        if any(counts.values()):
            log.info("history: removed %d temp file(s), %d file(s) superseded by a compaction and %d "
                     "half-deleted day(s) left by an earlier run under %s", counts["temp_files"],
                     counts["superseded_files"], counts["deleting_dirs"], self.root)
        return counts

    def _table_dirs(self) -> list[Path]:
        try:
            entries = list(os.scandir(self.root))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(Path(e.path) for e in entries if e.is_dir() and not e.name.startswith((".", "_")))

    @staticmethod
    def _delete_superseded(directory: Path) -> int:
        _, superseded = _scan_date_dir(directory)
        # Plain part files first, compact files last: whatever survives a kill here is still superseded
        # by a compact file that is itself still present.
        for name in sorted(superseded, key=lambda n: n.startswith("compact-")):
            _unlink(directory / name)
        if superseded:
            fsync_dir(directory)
        return len(superseded)

    def maintain(self, now: float | None = None) -> None:
        """Retention, then compaction of finished days; errors are logged and kept in last_maintenance_error."""
        try:
            self.apply_retention(now)
            self.maybe_compact(now)
            self.last_maintenance_error = None
        except Exception as e:
            log.exception("history: maintenance failed")
            self.last_maintenance_error = f"{type(e).__name__}: {e}"

    def apply_retention(self, now: float | None = None) -> int:
        """Delete ``date=`` directories older than `retention_days` (today, UTC, counts as day 0)."""
        if self.retention_days is None:
            return 0
        cutoff = _utc_date(self.clock() if now is None else now) - timedelta(days=self.retention_days)
        removed = 0
        for table_dir in self._table_dirs():
            for day, d in _date_dirs(table_dir):
                if day >= cutoff:
                    continue
                # Rename first so readers see the day vanish at once, then delete at leisure.
                doomed = table_dir / f"{DELETING_PREFIX}{d.name}-{uuid.uuid4().hex[:8]}"
                os.replace(d, doomed)
                shutil.rmtree(doomed, ignore_errors=True)
                removed += 1
        if removed:
            log.info("history: retention removed %d day(s) older than %s", removed, cutoff)
        return removed

    def maybe_compact(self, now: float | None = None) -> int:
        """Compact every finished (before today, UTC) day of every table with >= compact_min_files files."""
        today = _utc_date(self.clock() if now is None else now)
        done = 0
        for table_dir in self._table_dirs():
            for day, d in _date_dirs(table_dir):
                if day >= today:
                    continue
                live, _ = _scan_date_dir(d)
                if len(live) >= self.compact_min_files and self.compact(table_dir.name, day.isoformat()):
                    done += 1
        return done

    def compact(self, table: str, day: str) -> bool:
        """Merge the live files of one table and day into one (see the module doc for the scheme)."""
        directory = self.root / table / f"{DATE_PREFIX}{day}"
        self._delete_superseded(directory)  # finish any interrupted compaction first
        live, _ = _scan_date_dir(directory)
        if len(live) < 2:
            return False
        replaces: set[str] = set(live)
        schemas = []
        for name in live:
            if name.startswith("compact-"):
                replaces |= _replaces(directory / name)
            schemas.append(pq.read_schema(directory / name))
        target = TABLES.get(table)
        if target is None:
            target = pa.unify_schemas([s.remove_metadata() for s in schemas])
        for f in (f for s in schemas for f in s):  # columns from a newer writer survive the merge
            if f.name not in target.names and f.name != "date":
                target = target.append(f)
        target = target.with_metadata({"kmon.table": table, "kmon.history_schema_version": str(HISTORY_SCHEMA_VERSION),
                                       REPLACES_KEY.decode(): json.dumps(sorted(replaces))})
        rows = 0

        def write(f: Any) -> None:
            nonlocal rows
            with pq.ParquetWriter(f, target, compression=COMPRESSION) as w:
                pending: list[pa.Table] = []
                size = 0
                for name in live:
                    with pq.ParquetFile(directory / name) as source:
                        for batch in source.iter_batches(batch_size=COMPACT_ROW_GROUP):
                            pending.append(_conform(batch, target))
                            size += batch.num_rows
                            rows += batch.num_rows
                            if size >= COMPACT_ROW_GROUP:
                                w.write_table(pa.concat_tables(pending))
                                pending, size = [], 0
                if pending:
                    w.write_table(pa.concat_tables(pending))

        name = _new_name("compact")
        _publish(directory, name, write)
        deleted = self._delete_superseded(directory)
        log.info("history: compacted %d files (%d rows) of %s/%s into %s; deleted %d", len(live), rows, table, day,
                 name, deleted)
        return True


# ----- reading


def list_tables(root: Path) -> list[str]:
    """Tables present under `root` (directories holding at least one ``date=`` directory)."""
    try:
        entries = [e for e in os.scandir(root) if e.is_dir() and not e.name.startswith((".", "_"))]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(e.name for e in entries if _date_dirs(Path(e.path)))


def available_dates(root: Path, table: str) -> list[str]:
    """``YYYY-MM-DD`` days of `table` that hold at least one live file, oldest first."""
    return [d.isoformat() for d, p in _date_dirs(Path(root) / table) if _scan_date_dir(p)[0]]


def _listing(table_dir: Path, start: float | None, end: float | None) -> list[Path]:
    lo = _utc_date(start) if start is not None else None
    hi = _utc_date(end) if end is not None else None
    files: list[Path] = []
    for day, d in _date_dirs(table_dir):
        if (lo is not None and day < lo) or (hi is not None and day > hi):
            continue  # partition pruning: no file of that day is opened
        files.extend(d / n for n in _scan_date_dir(d)[0])
    return files


def live_files(root: Path, table: str, start: float | None = None, end: float | None = None) -> list[Path]:
    """The files a reader should read for rows with `start` <= time < `end` (days outside are pruned).

    Excludes temp files and files superseded by a compaction. The directory is listed until two
    listings agree, so a compaction finishing during the listing cannot yield a gap or a duplicate.
    """
    table_dir = Path(root) / table
    previous = _listing(table_dir, start, end)
    for _ in range(10):
        current = _listing(table_dir, start, end)
        if current == previous:
            return current
        previous = current
    return previous


_PANDAS_TYPES: dict[pa.DataType, Any] = {}


def _pandas_type(t: pa.DataType) -> Any:
    import pandas as pd

    if not _PANDAS_TYPES:
        _PANDAS_TYPES.update({
            pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
            pa.int64(): pd.Int64Dtype(), pa.float32(): pd.Float32Dtype(), pa.float64(): pd.Float64Dtype(),
            pa.bool_(): pd.BooleanDtype(), pa.string(): pd.StringDtype("pyarrow"),
            pa.large_string(): pd.StringDtype("pyarrow")})
    return _PANDAS_TYPES.get(t)


def to_pandas(table: pa.Table) -> Any:
    """Arrow -> pandas with nullable dtypes: a null stays <NA> (never NaN, never a sentinel); lists as lists."""
    df = table.to_pandas(types_mapper=_pandas_type)
    for f in table.schema:
        if (pa.types.is_list(f.type) or pa.types.is_large_list(f.type)) and table.num_rows:
            df[f.name] = table.column(f.name).to_pylist()
    return df


def read_arrow(root: Path, table: str, start: float | None = None, end: float | None = None,
               clusters: Sequence[str] | None = None, columns: Sequence[str] | None = None) -> pa.Table:
    """Like `read_table`, as an Arrow table."""
    table_dir = Path(root) / table
    schema = TABLES.get(table)
    if schema is None:
        files = live_files(root, table)
        if not files:
            raise ValueError(f"unknown history table {table!r}; known: {', '.join(TABLES)}")
        schema = pa.unify_schemas([pq.read_schema(f).remove_metadata() for f in files])
    full = schema.remove_metadata()
    if "date" not in full.names:
        full = full.append(pa.field("date", pa.string()))
    wanted = list(columns) if columns is not None else [n for n in full.names if n != "date"]
    unknown = [c for c in wanted if c not in full.names]
    if unknown:
        raise ValueError(f"unknown column(s) {', '.join(unknown)} in history table {table!r}; "
                         f"known: {', '.join(full.names)}")
    expr = None
    for cond in ((ds.field("time") >= start) if start is not None else None,
                 (ds.field("time") < end) if end is not None else None,
                 ds.field("cluster").isin(list(clusters)) if clusters is not None else None):
        if cond is not None:
            expr = cond if expr is None else expr & cond
    partitioning = ds.partitioning(pa.schema([pa.field("date", pa.string())]), flavor="hive")
    skip: set[Path] = set()
    for attempt in range(5):
        files = [f for f in live_files(root, table, start, end) if f not in skip]
        if not files:
            return full.empty_table().select(wanted)
        try:
            dataset = ds.dataset([str(f) for f in files], schema=full, format="parquet", partitioning=partitioning,
                                 partition_base_dir=str(table_dir))
            result = dataset.to_table(columns=wanted, filter=expr)
            break
        except FileNotFoundError:
            if attempt == 4:
                raise
            continue  # a compaction or retention run deleted a file after we listed it: list again
        except (pa.ArrowInvalid, OSError):
            bad = {f for f in files if not _readable(f)}
            if not bad or attempt == 4:
                raise
            skip |= bad
    if "time" in wanted and result.num_rows:
        result = result.sort_by("time")
    return result


def _readable(path: Path) -> bool:
    try:
        pq.read_metadata(path)
        return True
    except FileNotFoundError:
        return True  # gone, not broken: the next listing will not have it
    except (OSError, pa.ArrowException) as e:
        log.warning("history: skipping unreadable file %s: %s", path, e)
        return False


def read_table(root: Path, table: str, start: float | None = None, end: float | None = None,
               clusters: Sequence[str] | None = None, columns: Sequence[str] | None = None) -> Any:
    """Rows of one history table as a pandas DataFrame, sorted by time.

    `start` <= time < `end` (epoch seconds; days outside the range are never opened), `clusters` keeps
    those clusters only, `columns` selects columns (``date`` is available too). Files written with an older
    schema read with the missing columns null; a missing or empty table gives an empty frame with the
    table's columns. Nullable pandas dtypes throughout: a null stays <NA>, never NaN or -1.
    """
    return to_pandas(read_arrow(root, table, start, end, clusters, columns))
