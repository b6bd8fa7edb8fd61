"""The history tables: their Arrow schemas and the names and constants every reader and writer shares.

See the package docstring (`collectors.outputs.history`) for the layout and the guarantees.
"""

from __future__ import annotations

import pyarrow as pa

HISTORY_SCHEMA_VERSION = 4
"""Version of the history tables' schema (``schema_version`` column and ``kmon.history_schema_version``)."""

TIMESTAMPS_SINCE = 4
"""First schema version whose files store times as Parquet TIMESTAMP (UTC, microseconds); older files store
them as float64 epoch seconds. Files of version 4 and later say their version in their name (`files.new_name`)."""

TIME_TYPE = pa.timestamp("us", tz="UTC")
"""Arrow type of every point-in-time column in the files (``time``, ``last_commit_time``, ``opened``...)."""

DEFAULT_MAX_BUFFER_ROWS = 1_000_000
COMPRESSION = "zstd"
COMPACT_ROW_GROUP = 128 * 1024
REPLACES_KEY = b"kmon.replaces"
INPUTS_KEY = b"kmon.inputs"
"""A compact file's footer key (since the fifty-second session): the files its merge read, exactly (`REPLACES_KEY`
also names what those had replaced, and the repeats deleted with them)."""
TEMP_PREFIX = ".tmp-"
DELETING_PREFIX = ".deleting-"
DATE_PREFIX = "date="

_S, _F64, _I32, _I64, _B = pa.string(), pa.float64(), pa.int32(), pa.int64(), pa.bool_()
_LI32, _LS = pa.list_(pa.int32()), pa.list_(pa.string())
_T = TIME_TYPE  # version 4; float64 epoch seconds before


def _schema(*cols: tuple[str, pa.DataType]) -> pa.Schema:
    base = [("cluster", _S), ("time", _T), ("schema_version", _I32)]
    return pa.schema([pa.field(n, t) for n, t in (*base, *cols)])


# Every field is nullable in Arrow terms (so files of any schema version merge and cast cleanly); which
# columns are always set is documented in docs/history-schema.md.
TABLES: dict[str, pa.Schema] = {
    "cluster": _schema(
        ("cluster_id", _S), ("reachable", _B), ("stale", _B), ("stale_sections", _S), ("mode", _S),
        ("controller_id", _I32), ("poll_duration_s", _F64), ("requests", _I64), ("errors", _I32),
        ("brokers", _I32), ("topics", _I32), ("partitions", _I32), ("under_replicated", _I32),
        ("under_min_isr", _I32), ("at_min_isr", _I32), ("offline", _I32), ("groups", _I32),
        ("alerts_open", _I32), ("alerts_critical", _I32),
        # version 2
        ("incidents_open", _I32), ("thresholds", _S),
        # since version 4 (null in files written before): the finalized transaction.version feature level
        ("transaction_version", _I32)),
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
        ("last_commit_time", _T)),
    "group_partition_lag": _schema(
        ("group_id", _S), ("topic", _S), ("partition", _I32), ("committed_offset", _I64),
        ("log_start_offset", _I64), ("high_watermark", _I64), ("last_stable_offset", _I64), ("lag", _I64),
        ("lag_seconds", _F64), ("status", _S), ("last_commit_time", _T), ("below_log_start", _B),
        ("seconds_to_retention", _F64)),
    "transactions": _schema(
        ("transactional_id", _S), ("coordinator", _I32), ("state", _S), ("producer_id", _I64),
        ("producer_epoch", _I32), ("timeout_ms", _I64), ("start_time", _T), ("age_seconds", _F64),
        ("partitions", _LS),
        # since the forty-sixth session (null in files written before): the collector's Transaction V1 proof
        ("keeps_v1", _B)),
    "producers": _schema(
        ("topic", _S), ("partition", _I32), ("producer_id", _I64), ("producer_epoch", _I32),
        ("txn_start_offset", _I64), ("last_timestamp", _T), ("transactional_id", _S), ("hanging", _B)),
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
        ("log_end_offset", _I64), ("lag", _I64), ("last_fetch_time", _T), ("last_caught_up_time", _T),
        ("leader_id", _I32), ("leader_epoch", _I32), ("high_watermark", _I64)),
    "incident_events": _schema(  # version 2
        ("event", _S), ("id", _S), ("kind", _S), ("subject", _S), ("severity", _S), ("summary", _S), ("opened", _T),
        ("resolved_at", _T), ("alerts", _I32), ("members", _S), ("brokers", _LI32), ("partitions", _I32),
        ("topics", _I32), ("offline", _I32), ("under_min_isr", _I32), ("at_min_isr", _I32),
        ("unclean_topics", _I32), ("consequences", _LS)),
    "loss_events": _schema(  # version 3: evidence of lost data (collectors.model.loss), the ledger
        ("kind", _S), ("topic", _S), ("partition", _I32), ("group_id", _S), ("transactional_id", _S),
        ("messages", _I64), ("evidence", _S), ("leader_before", _I32), ("leader_after", _I32),
        ("epoch_before", _I32), ("epoch_after", _I32), ("unclean_enabled", _B), ("offset", _I64),
        ("server", _S)),
    "alert_events": _schema(
        ("event", _S), ("rule", _S), ("severity", _S), ("subject", _S), ("summary", _S), ("first_seen", _T),
        ("last_seen", _T), ("resolved_at", _T), ("value", _F64)),
}
TIME_COLUMNS: dict[str, tuple[str, ...]] = {
    name: tuple(f.name for f in schema if f.type == TIME_TYPE) for name, schema in TABLES.items()}
"""Per table, the columns holding a point in time (`TIME_TYPE` in the files since version 4). Durations
(``age_seconds``, ``lag_seconds``, ``poll_duration_s``...) stay float64 seconds."""

DETAIL_TABLES = frozenset({"group_partition_lag"})
"""Tables written only with ``partition_detail`` on."""

ROW_GROUP_ORDER: dict[str, tuple[str, ...]] = {"group_lag": ("cluster", "group_id", "topic", "time")}
"""Tables whose compacted row groups are ordered by these columns instead of poll order (`in_row_group_order`).
A poll writes one row per group-topic, so in poll order consecutive rows belong to different keys; the weekly
report's one pass over ``group_lag`` keeps ~150 k keys a task in a hash map, and in key order each key's rows
come together and stay in the CPU's caches (docs/performance-log.md, "Step 9"). Readers never depend on the order
inside a file (`reader.read_arrow` sorts by time)."""

ZK_FIELDS = ("server", "serving", "mode", "zxid", "zxid_epoch", "zxid_counter", "lag_behind_leader",
              "latency_avg_ms", "latency_max_ms", "outstanding_requests", "connections", "znode_count", "learners",
              "synced_followers", "error")
KRAFT_FIELDS = ("node_id", "log_end_offset", "lag", "last_fetch_time", "last_caught_up_time", "leader_id",
                 "leader_epoch", "high_watermark")
ALERT_FIELDS = ("rule", "severity", "subject", "summary", "first_seen", "last_seen", "resolved_at", "value")


# ----- times: the files' TIMESTAMP columns and the readers' epoch seconds


def seconds_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` with every timestamp field as float64 epoch seconds: the schema of files written before version
    4, and what every reader of this package returns (`read_arrow`, `read_table`; the Spark job likewise)."""
    fields = [pa.field(f.name, pa.float64(), f.nullable, f.metadata) if pa.types.is_timestamp(f.type) else f
              for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


SECONDS_TABLES: dict[str, pa.Schema] = {name: seconds_schema(schema) for name, schema in TABLES.items()}
"""`TABLES` with the time columns as float64 epoch seconds (files before version 4; what readers return)."""


def seconds_to_timestamps(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Epoch seconds (any number type) -> `TIME_TYPE`, rounded to the nearest microsecond; NaN becomes null."""
    import pyarrow.compute as pc

    f = values.cast(pa.float64())
    f = pc.if_else(pc.is_nan(f), pa.scalar(None, pa.float64()), f)
    return pc.round(pc.multiply(f, 1e6)).cast(pa.int64()).cast(TIME_TYPE)


def timestamps_to_seconds(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A timestamp column -> float64 epoch seconds (microseconds / 1e6, as Spark's and DuckDB's casts compute it)."""
    import pyarrow.compute as pc

    micros = values.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).cast(pa.float64(), safe=False)
    return pc.divide(micros, 1e6)


def to_seconds(table: pa.Table) -> pa.Table:
    """Every timestamp column of `table` as float64 epoch seconds (other columns untouched)."""
    for i, f in enumerate(table.schema):
        if pa.types.is_timestamp(f.type):
            table = table.set_column(i, pa.field(f.name, pa.float64(), f.nullable, f.metadata),
                                     timestamps_to_seconds(table.column(i)))
    return table


def _cast(col: pa.ChunkedArray, to: pa.DataType) -> pa.ChunkedArray:
    if pa.types.is_timestamp(to) and (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
        return seconds_to_timestamps(col).cast(to)  # a file from before version 4: epoch seconds
    if pa.types.is_timestamp(col.type) and pa.types.is_floating(to):
        return timestamps_to_seconds(col).cast(to)
    return col.cast(to)


def conform(batch: pa.RecordBatch | pa.Table, schema: pa.Schema) -> pa.Table:
    """Columns of `schema` in its order: missing ones null, others cast (older files may use other types; epoch
    seconds and timestamps convert into each other)."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    arrays = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            arrays.append(col if col.type == f.type else _cast(col, f.type))
        else:
            arrays.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def in_row_group_order(table: str, rows: pa.Table) -> pa.Table:
    """`rows` (one row group's worth) in `ROW_GROUP_ORDER` for `table` (by the columns it has), else unchanged.
    Sorting a row group at a time keeps the work and memory of a compaction bounded."""
    keys = [c for c in ROW_GROUP_ORDER.get(table, ()) if c in rows.column_names]
    return rows.sort_by([(c, "ascending") for c in keys]) if keys and rows.num_rows > 1 else rows


# ----- writer


