"""Reading history back: Arrow tables and pandas frames over the live files of a time range.

See the package docstring (`collectors.outputs.history`) for the layout and the guarantees.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from collectors.model.wording import count_of
from collectors.outputs.history.files import damage, live_files, mark_damaged, problem_of, stores_timestamps
from collectors.outputs.history.schema import TABLES, TIME_TYPE, seconds_schema, to_seconds

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
    full = schema.remove_metadata()
    if "date" not in full.names:
        full = full.append(pa.field("date", pa.string()))
    wanted = list(columns) if columns is not None else [n for n in full.names if n != "date"]
    unknown = [c for c in wanted if c not in full.names]
    if unknown:
        raise ValueError(f"unknown {count_of(len(unknown), 'column')} {', '.join(unknown)} in history table {table!r}; "
                         f"known: {', '.join(full.names)}")
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
    partitioning = ds.partitioning(pa.schema([pa.field("date", pa.string())]), flavor="hive")
    dataset = ds.dataset([str(f) for f in files], schema=file_schema, format="parquet", partitioning=partitioning,
                         partition_base_dir=str(table_dir))
    if not stamped:
        return dataset.to_table(columns=wanted, filter=expr)
    exact = start is not None or end is not None
    read = [*wanted, "time"] if exact and "time" not in wanted else wanted
    result = to_seconds(dataset.to_table(columns=read, filter=expr))
    if exact:
        t = result.column("time")
        keep = _all_of([pc.greater_equal(t, start) if start is not None else None,
                        pc.less(t, end) if end is not None else None], pc.and_)
        result = result.filter(keep).select(wanted)
    return result


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
