"""Reading history back: Arrow tables and pandas frames over the live files of a time range.

See the package docstring (`collectors.outputs.history`) for the layout and the guarantees.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from collectors.model.wording import count_of
from collectors.outputs.history.files import (
    damage,
    live_files,
    mark_damaged,
    problem_of,
    stores_timestamps,
    utc_date,
)
from collectors.outputs.history.schema import DATE_PREFIX, TABLES, TIME_TYPE, seconds_schema, to_seconds

log = logging.getLogger(__name__)

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
    """Like `read_table`, as an Arrow table (time columns as float64 epoch seconds, whatever the file version)."""
    table_dir = Path(root) / table
    schema = TABLES.get(table)
    if schema is None:
        files = live_files(root, table)
        if not files:
            raise ValueError(f"unknown history table {table!r}; known: {', '.join(TABLES)}")
        schemas = [pq.read_schema(f).remove_metadata() for f in files]
        times = {f.name for s in schemas for f in s if pa.types.is_timestamp(f.type)}
        schema = _with_times(pa.unify_schemas([seconds_schema(s) for s in schemas]), times)
    full = _with_date(schema)
    wanted = _wanted(table, full, columns)
    skip: set[Path] = set()
    for attempt in range(5):
        files = [f for f in live_files(root, table, start, end) if f not in skip]  # known damaged left out
        if not files:
            return seconds_schema(full).empty_table().select(wanted)
        try:
            parts = [_read_group(group, full if stamped else seconds_schema(full), table_dir, wanted, start, end,
                                 clusters)
                     for stamped, group in _by_encoding(files)]
            result = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
            break
        except FileNotFoundError:
            if attempt == 4:
                raise
            continue  # a compaction or retention run deleted a file after we listed it: list again
        except (pa.ArrowInvalid, OSError):
            # a footer that does not read (cut short); failing that, pages that do not (damaged past the footer)
            bad = {f for f in files if not _readable(f)} or {f for f in files if not _decodes(f)}
            if not bad or attempt == 4:
                raise  # every file reads on its own: not a damaged file, say why
            skip |= bad
    if "time" in wanted and result.num_rows:
        result = result.sort_by("time")
    return result


def _with_date(schema: pa.Schema) -> pa.Schema:
    full = schema.remove_metadata()
    return full if "date" in full.names else full.append(pa.field("date", pa.string()))


def _wanted(table: str, full: pa.Schema, columns: Sequence[str] | None) -> list[str]:
    wanted = list(columns) if columns is not None else [n for n in full.names if n != "date"]
    unknown = [c for c in wanted if c not in full.names]
    if unknown:
        raise ValueError(f"unknown {count_of(len(unknown), 'column')} {', '.join(unknown)} in history table {table!r}; "
                         f"known: {', '.join(full.names)}")
    return wanted


def _with_times(schema: pa.Schema, names: set[str]) -> pa.Schema:
    return pa.schema([pa.field(f.name, TIME_TYPE) if f.name in names else f for f in schema])


def _by_encoding(files: Sequence[Path]) -> list[tuple[bool, list[Path]]]:
    """The files in two groups by their names: float64 epoch seconds (before version 4), then timestamps."""
    groups: dict[bool, list[Path]] = {}
    for f in files:
        groups.setdefault(stores_timestamps(f), []).append(f)
    return sorted(groups.items())


def _all_of(conds: Sequence[Any], both: Callable[[Any, Any], Any]) -> Any:
    """The conjunction of the conditions that are not None (a dataset filter or a compute mask); None if none."""
    present = [c for c in conds if c is not None]
    return functools.reduce(both, present) if present else None


_DATE = ds.partitioning(pa.schema([pa.field("date", pa.string())]), flavor="hive")


def _micros(t: float, rounding: Any, slack: int) -> pa.Scalar:
    return pa.scalar(int(rounding(t * 1e6)) + slack, TIME_TYPE)


def _read_group(files: Sequence[Path], file_schema: pa.Schema, table_dir: Path, wanted: list[str],
                start: float | None, end: float | None, clusters: Sequence[str] | None) -> pa.Table:
    """Files of one encoding, read with `file_schema`, returned with time columns as float64 epoch seconds."""
    stamped = pa.types.is_timestamp(file_schema.field("time").type)
    conds = [ds.field("cluster").isin(list(clusters)) if clusters is not None else None]
    if stamped:  # pushed down with a microsecond of slack, then exactly on the seconds below
        conds += [(ds.field("time") >= _micros(start, math.floor, -1)) if start is not None else None,
                  (ds.field("time") <= _micros(end, math.ceil, 1)) if end is not None else None]
    else:
        conds += [(ds.field("time") >= start) if start is not None else None,
                  (ds.field("time") < end) if end is not None else None]
    expr = _all_of(conds, lambda a, b: a & b)
    dataset = ds.dataset([str(f) for f in files], schema=file_schema, format="parquet", partitioning=_DATE,
                         partition_base_dir=str(table_dir))
    if not stamped:
        return dataset.to_table(columns=wanted, filter=expr)
    result = to_seconds(dataset.to_table(columns=_with_time(wanted, start, end), filter=expr))
    return _in_window(result, start, end).select(wanted)


def _with_time(wanted: Sequence[str], start: float | None, end: float | None) -> list[str]:
    """The columns to read for `wanted` in [start, end): ``time`` too when there is a window to cut on it."""
    window = start is not None or end is not None
    return [*wanted, "time"] if window and "time" not in wanted else list(wanted)


def _in_window(table: pa.Table, start: float | None, end: float | None) -> pa.Table:
    """The rows of `table` (times in float seconds) in [start, end), exactly; all of them without a window."""
    if start is None and end is None:
        return table
    t = table.column("time")
    return table.filter(_all_of([pc.greater_equal(t, start) if start is not None else None,
                                 pc.less(t, end) if end is not None else None], pc.and_))


FileKey = tuple[str, int, int, int]
"""A published file as (path, inode, size, mtime_ns): what a cache of its content is keyed by (it never changes)."""


class Cache(Protocol):
    """Where `read_arrow_pieces` keeps what it read (`files._Recent`): the caller sizes it."""

    def get(self, key: tuple[Any, ...], default: Any = None) -> Any: ...

    def put(self, key: tuple[Any, ...], value: Any) -> None: ...


_UNREAD = object()


def read_arrow_pieces(root: Path, table: str, files: Sequence[FileKey], start: float | None, end: float | None,
                      columns: Sequence[str] | None, pieces: Cache, bounds: Cache) -> pa.Table:
    """`read_arrow` of every cluster of a table of `TABLES` over `files`, the live files of a listing already made
    (`live_files`, in its order), put together from pieces of one file each kept in `pieces`: a file read before
    for these columns is not opened again. For a reader that reads a growing window again after every flush (the
    dashboard: a day of minute flushes is 1,440 files a table, 0.5-0.9 s a read, for one new file).

    A piece holds all of its file's rows (the window is applied once the pieces are put together), so it serves
    every window. A file of the window's first or last day is opened only if its footer's time statistics (kept in
    `bounds`: `time_bounds`) say it may hold rows of the window: a window of 6 hours leaves out most of today's
    files, read or kept. The result is `read_arrow`'s for the same files, row for row and in the same order: files of
    the older encoding first, the same filter on the seconds, the same stable sort on time.

    Raises what reading a file raises (FileNotFoundError: a compaction or retention run deleted it after the
    listing; ArrowInvalid or OSError: a damaged file): the caller then reads with `read_arrow`, which lists again
    and leaves damaged files out."""
    full = _with_date(TABLES[table])
    wanted = _wanted(table, full, columns)
    read = tuple(_with_time(wanted, start, end))
    edges = {f"{DATE_PREFIX}{utc_date(t).isoformat()}" for t in (start, end) if t is not None}
    order: list[FileKey] = []
    held: dict[FileKey, pa.Table] = {}
    for key in files:
        piece = pieces.get((*key, read))
        if piece is not None:
            held[key] = piece
        elif Path(key[0]).parent.name in edges and not _may_hold(key, start, end, bounds):
            continue  # a day inside the window is read whole: its footers would not leave anything out
        order.append(key)
    missing = [k for k in order if k not in held]
    for key, piece in zip(missing, _read_whole(Path(root) / table, [Path(k[0]) for k in missing], full, read),
                          strict=True):
        pieces.put((*key, read), piece)
        held[key] = piece
    order.sort(key=lambda k: stores_timestamps(k[0]))  # stable: `_by_encoding`'s order
    if not order:
        return seconds_schema(full).empty_table().select(wanted)
    result = pa.concat_tables([held[k] for k in order])
    result = _in_window(result, start, end).select(wanted)
    if "time" in wanted and result.num_rows:
        result = result.sort_by("time")
    return result


def _may_hold(key: FileKey, start: float | None, end: float | None, bounds: Cache) -> bool:
    """Whether the file may hold rows of [start, end), by its footer; a second of slack for the rounding of its
    statistics to seconds (an extra file read costs a little; a file left out would lose rows)."""
    got = bounds.get(key, _UNREAD)
    if got is _UNREAD:
        got = time_bounds(Path(key[0]))
        bounds.put(key, got)
    if got is None:
        return True
    lo, hi = got
    return (start is None or hi >= start - 1) and (end is None or lo < end + 1)


_PER_SECOND = {"milliseconds": 1e3, "microseconds": 1e6, "nanoseconds": 1e9}


def time_bounds(path: Path) -> tuple[float, float] | None:
    """The least and greatest ``time`` of `path` in epoch seconds, from its footer's statistics; None when it does
    not say (no statistics, a type not known here, a footer that does not read: the file is then read, and what
    is wrong with it found there)."""
    try:
        meta = pq.read_metadata(path)
    except (OSError, pa.ArrowException):
        return None
    i = next((j for j in range(meta.num_columns) if meta.schema.column(j).path == "time"), None)
    if i is None:
        return None
    col = meta.schema.column(i)
    if col.logical_type.type == "TIMESTAMP":
        per_second = _PER_SECOND.get(json.loads(col.logical_type.to_json()).get("timeUnit"))
    elif col.logical_type.type == "NONE" and col.physical_type in ("DOUBLE", "FLOAT", "INT64", "INT32"):
        per_second = 1.0  # epoch seconds (files before version 4)
    else:
        per_second = None
    lo = hi = None
    for g in range(meta.num_row_groups):
        if meta.row_group(g).num_rows == 0:
            continue
        stats = meta.row_group(g).column(i).statistics
        if stats is None or not stats.has_min_max:
            return None
        lo = stats.min_raw if lo is None else min(lo, stats.min_raw)
        hi = stats.max_raw if hi is None else max(hi, stats.max_raw)
    if per_second is None or lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return None  # (an old writer's statistics may be NaN, which would leave the file out of every window)
    return lo / per_second, hi / per_second


def _read_whole(table_dir: Path, files: Sequence[Path], full: pa.Schema, columns: Sequence[str]) -> list[pa.Table]:
    """`columns` of every row of each of `files`, times as float64 epoch seconds, in the order of `files`. One scan
    of a group, split by file: a dataset per file took twice as long as one over all of them."""
    out: dict[Path, pa.Table] = {}
    for stamped, group in _by_encoding(files):
        dataset = ds.dataset([str(f) for f in group], schema=full if stamped else seconds_schema(full),
                             format="parquet", partitioning=_DATE, partition_base_dir=str(table_dir))
        scanner = dataset.scanner(columns=list(columns))
        batches: dict[str, list[pa.RecordBatch]] = {name: [] for name in dataset.files}
        for tagged in scanner.scan_batches():
            batches[tagged.fragment.path].append(tagged.record_batch)
        for f, name in zip(group, dataset.files, strict=True):
            piece = pa.Table.from_batches(batches[name], schema=scanner.projected_schema)
            out[f] = to_seconds(piece) if stamped else piece
    return [out[f] for f in files]


def _readable(path: Path) -> bool:
    try:
        pq.read_metadata(path)
        return True
    except FileNotFoundError:
        return True  # gone, not broken: the next listing will not have it
    except (OSError, pa.ArrowException) as e:
        if mark_damaged(path, problem_of(e)):  # later listings leave it out: one warning, not one
            log.warning("history: skipping unreadable file %s: %s", path, e)  # per dashboard refresh
        return False


def _decodes(path: Path) -> bool:
    problem = damage(path)
    if problem is None:
        return True
    if mark_damaged(path, problem):
        log.warning("history: skipping damaged file %s (%s): its footer reads but its pages do not; the rows it "
                    "held are missing from what is shown", path, problem)
    return False


def read_table(root: Path, table: str, start: float | None = None, end: float | None = None,
               clusters: Sequence[str] | None = None, columns: Sequence[str] | None = None) -> Any:
    """Rows of one history table as a pandas DataFrame, sorted by time.

    `start` <= time < `end` (epoch seconds; days outside the range are never opened), `clusters` keeps
    those clusters only, `columns` selects columns (``date`` is available too). Files written with an older
    schema read with the missing columns null; a missing or empty table gives an empty frame with the
    table's columns. Nullable pandas dtypes throughout: a null stays <NA>, never NaN or -1. Time columns
    (``time``, ``last_commit_time``...: `TIME_COLUMNS`) come back as float64 epoch seconds, from the TIMESTAMP
    columns of version 4 files (microseconds / 1e6) and the float columns of older files alike.
    """
    return to_pandas(read_arrow(root, table, start, end, clusters, columns))
