"""Snapshot history as Parquet: one dataset per table under a root, Hive-partitioned by UTC date.

Layout (``docs/history-schema.md`` documents every table and column)::

    <root>/<table>/date=YYYY-MM-DD/part-<time_ns>-<uuid8>.v4.parquet     one flush of one table and day
    <root>/<table>/date=YYYY-MM-DD/compact-<time_ns>-<uuid8>.v4.parquet  a compaction of earlier files of that day

Times (``time`` and the other `TIME_COLUMNS`) are Parquet TIMESTAMP (UTC, microseconds) in files of schema
version 4 and later, whose names carry the version; older files (names without a version) hold float64 epoch
seconds. Readers here read both kinds, even side by side in one day, and return epoch seconds (float64).

Writing. `HistoryWriter.add` turns a poll's records into Arrow record batches at once (the records are
mutable and shared with the alert tracker, and Arrow is far smaller than Python objects) and buffers them.
`flush` writes, per table and date, one new file: a hidden temp file ``.tmp-<uuid>.parquet`` in the same
directory, fsync, ``os.replace`` to its final name, fsync of the directory. Rows leave the buffer only once
their file has been renamed into place, so a failed flush loses nothing (up to ``max_buffer_rows``; beyond
that the oldest rows are dropped and counted, except a proved loss's: ``NEVER_DROPPED``) and a killed process
leaves only whole files plus hidden temp files, which every reader ignores (pyarrow and Spark skip names
starting with ``.`` or ``_``) and the next writer deletes. At most the unflushed interval is lost.

Compaction (the superseding scheme). ``compact(table, date)`` merges a past day's live files into one
``compact-*.parquet`` file whose Parquet footer metadata ``kmon.replaces`` lists the file names it contains
(the inputs, plus whatever those inputs had themselves superseded). Publishing the merged file is a single
atomic rename that publishes data and the superseding list together; the inputs are deleted afterwards. A
reader that sees a ``compact-*`` file excludes every name it lists, so between the rename and the deletes,
and after a kill in between, readers see each row exactly once; the next writer start (or compaction)
finishes the deletes. A compacted file's row groups may be ordered by key (`ROW_GROUP_ORDER`), not by time:
no reader may depend on the order of rows inside a file. `read_table` and `live_files` apply the superseding
rule; a foreign reader (Spark) should read the file list from `live_files`. One writer per root at a time: the
collector's writer holds the root's lease (`lease.WriterLease`, an exclusive flock) and deletes temp files only
once it holds it; a second collector on the root stands by.

Repeated files. A live file whose bytes up to the footer, size, schema and row count equal another live file's of
the same day (`files.rows_key`: a file copied or restored under a new name, a history copied into itself) holds
the same rows: readers read it once (`live_files` leaves the later name out, `repeated_files` lists what it left
out) and the next compaction of the day supersedes it with its inputs. Without this, a restored backup beside the
live files doubled every count of the weekly report (broker availability read 199 %). Files are compared only
when their sizes are equal, so a history without copies costs a stat per file.

Empty files. A live file of 0 bytes (a copy or restore cut short; the writer never publishes one) cannot be Parquet:
readers and the compaction leave it out with a warning (`empty_files` lists them), instead of failing on it.

Damaged files. A file cut short or damaged past its footer (pages that do not decode) is left out of reads and of
its day's compaction with one warning (`files.damage` names what is wrong; page damage is looked for only after a
read or merge fails), and left where it is: deleting it could lose rows.
"""


from __future__ import annotations

from collectors.outputs.history.files import (
    available_dates,
    empty_files,
    list_files,
    list_tables,
    live_files,
    repeated_files,
    stores_timestamps,
)
from collectors.outputs.history.reader import read_arrow, read_table, to_pandas
from collectors.outputs.history.rows import Columns, snapshot_columns
from collectors.outputs.history.schema import (
    COMPACT_ROW_GROUP,
    COMPRESSION,
    DATE_PREFIX,
    DEFAULT_MAX_BUFFER_ROWS,
    DELETING_PREFIX,
    DETAIL_TABLES,
    HISTORY_SCHEMA_VERSION,
    REPLACES_KEY,
    ROW_GROUP_ORDER,
    SECONDS_TABLES,
    TABLES,
    TEMP_PREFIX,
    TIME_COLUMNS,
    TIME_TYPE,
    in_row_group_order,
)
from collectors.outputs.history.writer import HistoryWriter

__all__ = [
    "COMPACT_ROW_GROUP",
    "COMPRESSION",
    "DATE_PREFIX",
    "DEFAULT_MAX_BUFFER_ROWS",
    "DELETING_PREFIX",
    "DETAIL_TABLES",
    "HISTORY_SCHEMA_VERSION",
    "REPLACES_KEY",
    "ROW_GROUP_ORDER",
    "SECONDS_TABLES",
    "TABLES",
    "TEMP_PREFIX",
    "TIME_COLUMNS",
    "TIME_TYPE",
    "Columns",
    "HistoryWriter",
    "available_dates",
    "empty_files",
    "in_row_group_order",
    "list_files",
    "list_tables",
    "live_files",
    "read_arrow",
    "read_table",
    "repeated_files",
    "snapshot_columns",
    "stores_timestamps",
    "to_pandas",
]
