"""History in (Parquet -> Spark DataFrames), report files out.

Reading follows the history contract of `collectors.outputs.history` (see its module doc):

* only **live files** are read: hidden temp files (``.tmp-*``, ``.deleting-*``) are never listed and files
  superseded by a compaction (named in a ``compact-*`` file's ``kmon.replaces`` footer key) are skipped, so
  every row is read exactly once even while a compaction is half done. On a local path the list comes from
  `collectors.outputs.history.live_files` itself; on HDFS / object storage (``hdfs://``, ``s3a://``, ``abfs://``...)
  the same rules are applied through the Hadoop FileSystem API of the running Spark session;
* only the ``date=YYYY-MM-DD`` directories of the requested range are listed (partition pruning by path,
  before Spark sees a file), and rows are filtered on ``time`` as well;
* every table is read with an **explicit schema** converted from `collectors.outputs.history.TABLES`: files written
  by an older schema version simply lack some columns, which Spark reads as null; no schema inference or
  merging runs over thousands of footers;
* **times are epoch seconds** (DoubleType) in every DataFrame this module returns, the one convention of the
  aggregations: files of schema version 4 and later store them as Parquet TIMESTAMP, older files as float64
  seconds, and a day may hold both (a collector upgraded mid-day). Spark cannot read one column as two physical
  types, so the files are read in (at most) two groups told apart by their names (`stores_timestamps`: no
  footer is opened), each with its own explicit schema, and the timestamp group's time columns are cast to
  double (microseconds / 1e6) in `_as_seconds` before the two are unioned;
* a table with no file in the range is an **empty DataFrame with the schema**, plus a note for the report.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import uuid
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from collectors.model.wording import count_of, plural
from collectors.outputs.atomic import publish, remove_stale_temps
from collectors.outputs.history import (
    DATE_PREFIX,
    DETAIL_TABLES,
    TABLES,
    list_files,
)
from collectors.outputs.history.files import (
    REPEAT_WARNING,
    damage,
    date_dirs,
    known_damaged,
    mark_damaged,
    stores_timestamps,
    warn_empty,
)
from collectors.outputs.history.schema import SECONDS_TABLES, TEMP_PREFIX, TIME_COLUMNS
from spark_analytics.hadoop_listing import lister_for

log = logging.getLogger(__name__)
R = TypeVar("R")

REPORT_TABLES: tuple[str, ...] = tuple(t for t in TABLES if t not in DETAIL_TABLES)
"""Tables the report reads (per-partition consumer detail is optional in the history and not needed)."""
BIG_TABLES: tuple[str, ...] = ("group_lag", "topic_health")
"""The history tables with a row per group-topic or topic and poll (~95 % of the rows): never cached whole, and
last week's read from last week's files only. Daily roll-ups condense them and the transactional tables
(`rollup.INPUTS`); the others are small (a row per poll, broker or event)."""

SCHEMA_CHECK_MAX_FILES = 400

_SCALARS: dict[pa.DataType, T.DataType] = {
    pa.string(): T.StringType(), pa.large_string(): T.StringType(), pa.float64(): T.DoubleType(),
    pa.float32(): T.FloatType(), pa.int64(): T.LongType(), pa.int32(): T.IntegerType(), pa.int16(): T.ShortType(),
    pa.int8(): T.ByteType(), pa.bool_(): T.BooleanType(),
}


def spark_type(t: pa.DataType) -> T.DataType:
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return T.ArrayType(spark_type(t.value_type), True)
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz else T.TimestampNTZType()
    try:
        return _SCALARS[t]
    except KeyError:
        raise TypeError(f"no Spark type for Arrow type {t}") from None


def spark_schema(table: str) -> T.StructType:
    """The Spark schema of a history table as this module returns it: time columns as DoubleType epoch seconds
    (`collectors.outputs.history.SECONDS_TABLES`; every field nullable)."""
    return T.StructType([T.StructField(f.name, spark_type(f.type), True) for f in SECONDS_TABLES[table]])


def file_schema(table: str, timestamps: bool = True) -> T.StructType:
    """The Spark schema to read a table's files with: TimestampType time columns (version 4 and later) or, with
    `timestamps` false, DoubleType epoch seconds (older files)."""
    schema = TABLES[table] if timestamps else SECONDS_TABLES[table]
    return T.StructType([T.StructField(f.name, spark_type(f.type), True) for f in schema])


def is_remote(path: str) -> bool:
    """True for a URI with a scheme other than ``file`` (HDFS, S3A, ABFS, GCS...)."""
    head, sep, _ = str(path).partition("://")
    return bool(sep) and head.lower() != "file" and "/" not in head


def local_path(path: str) -> Path:
    """A local history's path: `path` without its ``file://``, if any."""
    s = str(path)
    return Path(s[len("file://"):]) if s.startswith("file://") else Path(s)


def history_exists(spark: SparkSession | None, root: str) -> bool:
    if not is_remote(root):
        return local_path(root).is_dir()
    assert spark is not None
    jvm = spark._jvm  # type: ignore[attr-defined]
    p = jvm.org.apache.hadoop.fs.Path(root)
    fs = p.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    return bool(fs.exists(p)) and bool(fs.getFileStatus(p).isDirectory())


# ----------------------------------------------------------------------------------------------- listing


def table_days(root: str, table: str, spark: SparkSession | None = None) -> list[str]:
    """The UTC days (YYYY-MM-DD) with a ``date=`` directory of `table` in a history, sorted; a remote history is
    listed through `spark` (else the active session)."""
    days = lister_for(_session(spark)).days(root, table) if is_remote(root) else \
        [d for d, _ in date_dirs(local_path(root) / table)]
    return [d.isoformat() for d in days]


def _day(t: float) -> date:
    return datetime.fromtimestamp(t, UTC).date()


def list_live_files(spark: SparkSession | None, root: str, table: str, start: float, end: float,
                    use_hadoop: bool | None = None) -> list[str]:
    """Live files of `table` for rows with ``start <= time < end`` (whole UTC days), as paths Spark can read."""
    return _listed(spark, root, table, start, end, use_hadoop).files


@dataclass
class Listed:
    """What `_listed` found for a table and range: the files to read and those left out, for the report's notes."""

    files: list[str]
    repeats: dict[str, str] = field(default_factory=dict)  # {file left out as a repeat: the file read instead}
    empty: list[str] = field(default_factory=list)  # live files left out as empty (0 bytes)
    damaged: dict[str, str] = field(default_factory=dict)  # {live file left out as damaged: why it does not read}
    sizes: dict[str, int] = field(default_factory=dict)  # {remote file listed: its size} (the listing has them)


def _listed(spark: SparkSession | None, root: str, table: str, start: float, end: float,
            use_hadoop: bool | None = None) -> Listed:
    """The files of `table` for ``[start, end)`` as `collectors.outputs.history.files.day_files` sorts them.

    Empty (0-byte) files are left out; Spark would skip them without a word (a day of ``brokers`` whose only file
    was emptied read as no brokers at all): listed apart, the report's notes name them. So are files a failed read
    of this process found damaged (`damaged_files`, `relisting`), local or remote."""
    last = end - 1e-3  # the day of the last instant inside the range (end itself is excluded)
    if use_hadoop is None:
        use_hadoop = is_remote(root)
    if not use_hadoop:
        listed = list_files(local_path(root), table, start, last)  # one agreed walk for all of them
        return Listed([str(p) for p in listed.live], {str(r): str(k) for r, k in listed.repeats.items()},
                      [str(p) for p in listed.empty], {str(p): why for p, why in listed.damaged.items()})
    lister = lister_for(_session(spark))
    files, repeats, empty = lister.live_files(str(root), table, _day(start), _day(last))
    for repeat, first in repeats.items():  # once, not in each of the listings that must agree
        log.warning(REPEAT_WARNING, repeat, first)
    for f in empty:
        warn_empty(f)
    damaged = {f: why for f in files if (why := _REMOTE_DAMAGED.get(_uri_key(f))) is not None}
    return Listed([f for f in files if f not in damaged], repeats, empty, damaged, dict(lister.sizes))


def _session(spark: SparkSession | None) -> SparkSession:
    """`spark`, else the active (or default) session: listing a remote history goes through the JVM's Hadoop
    FileSystem API. Raises when there is none."""
    return spark if spark is not None else SparkSession.active()


def _relative(f: str) -> str:
    """A history file as ``table/date=YYYY-MM-DD/name``: how a derived file records it, the same for a local path and
    a URI (whose spelling may change: ``hdfs:///x`` is listed as ``hdfs://namenode:8020/x``)."""
    return "/".join(str(f).rstrip("/").split("/")[-3:])


def vanished(e: BaseException) -> bool:
    """True when `e` says a listed history file was gone when Spark opened it: a compaction or retention run of the
    collector deleted it between the listing and the read (the rows are in the file that superseded it), so
    listing again and redoing the work succeeds."""
    text = str(e)
    return any(s in text for s in ("FileNotFound", "does not exist", "PATH_NOT_FOUND", "FILE_NOT_EXIST"))


_READ_FAILED = re.compile(r"while reading file (\S+?\.parquet)")


def damaged_files(e: BaseException, root: str) -> dict[Path | str, str]:
    """The files under the local `root` (a history, a roll-up store) that Spark's error `e` says it failed to read
    and that indeed do not read ({path: why}, `collectors.outputs.history.files.damage`): a file cut short or
    damaged past its footer by a copy or restore (the collectors never publish one). Spark names such a file
    (``[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///…``) but only once it reads it;
    `relisting` then leaves it out and runs again. Empty for any failure that no file under `root` explains. A
    remote `root`'s files are checked by Spark itself (`remote_damage`), keyed by their URI (str)."""
    if is_remote(root):
        return _remote_damaged_files(e, root)
    base = local_path(root).resolve()
    out: dict[Path | str, str] = {}
    for uri in dict.fromkeys(_READ_FAILED.findall(str(e))):
        path = Path(unquote(urlparse(uri).path)) if uri.startswith("file:") else Path(uri)
        if not path.resolve().is_relative_to(base):
            continue
        problem = damage(path)
        if problem is not None:
            out[path] = problem
    return out


_REMOTE_DAMAGED: dict[tuple[str, str, str], str] = {}
"""Remote files a read of this process found damaged (`_uri_key` -> why): the Hadoop listing leaves them out. Unlike
a local file's mark (`collectors.outputs.history.files.mark_damaged`) it does not check size and mtime: a run reads
a remote history once; the next run checks again."""


def _uri_key(uri: str) -> tuple[str, str, str]:
    """A file URI as (scheme, host, path): Spark's errors and Hadoop's listings spell the same file differently
    (``file:/x`` and ``file:///x``; a namenode with and without its port; percent-encoding)."""
    u = urlparse(str(uri))
    return u.scheme.lower(), (u.hostname or "").lower(), unquote(u.path).rstrip("/")


def _under(uri: str, root: str) -> bool:
    (scheme, host, path), (r_scheme, r_host, r_path) = _uri_key(uri), _uri_key(root)
    return scheme == r_scheme and (not host or not r_host or host == r_host) and path.startswith(r_path + "/")


def _cause(e: BaseException) -> str:
    """The innermost cause a JVM error names (its last ``Caused by:`` line), else its first line; short."""
    causes = [ln.strip()[len("Caused by:"):].strip() for ln in str(e).splitlines()
              if ln.strip().startswith("Caused by:")]
    if causes:
        return causes[-1][:300]
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


def remote_damage(spark: SparkSession, uri: str) -> str | None:
    """Why the (remote) history file `uri` cannot be read whole, by Spark decoding every page of it alone; None if
    it reads (the failure was elsewhere, or passing) or is gone (`vanished`: a compaction's doing)."""
    try:
        spark.read.parquet(uri).write.format("noop").mode("overwrite").save()
    except Exception as e:
        return None if vanished(e) else _cause(e)
    return None


def _remote_damaged_files(e: BaseException, root: str) -> dict[Path | str, str]:
    """`damaged_files` of a remote `root`, read again by the session `_session` finds, as the listing found them: a
    report's thread pools (or a caller's thread) have no active session of their own, only the default one."""
    try:
        spark = _session(None)
    except PySparkRuntimeError:  # no session at all: nothing to read the files again with; the error stands
        return {}
    out: dict[Path | str, str] = {}
    for uri in dict.fromkeys(_READ_FAILED.findall(str(e))):
        if _under(uri, root) and (problem := remote_damage(spark, uri)) is not None:
            out[uri] = problem
    return out


def _mark_damaged(path: Path | str, problem: str) -> None:
    """`mark_damaged` for a local path; a remote URI is remembered for this process (`_REMOTE_DAMAGED`)."""
    if isinstance(path, str):
        _REMOTE_DAMAGED[_uri_key(path)] = problem
    else:
        mark_damaged(path, problem)


def relisting(run: Callable[[], R], roots: Sequence[str], logger: logging.Logger, what: str, attempts: int = 3,
              damaged_limit: int = 5) -> R:
    """`run()` (a job that lists files under `roots` and reads them: a history, a roll-up store), run again when
    listing again mends the read that failed.

    A listed file vanished before Spark opened it (`vanished`: the collectors' compaction or retention deleted it;
    its rows are in the file that superseded it): up to `attempts` runs. A local file under `roots` cut short or
    damaged inside (`damaged_files`: a copy or restore; the collectors never publish one), or such a file of a
    remote history (checked by Spark: `remote_damage`): marked for the process
    (`collectors.outputs.history.files.mark_damaged`: every later listing of a history leaves it out, and a report's
    notes name it; a roll-up day with it reads as not rolled up), with a warning, for up to `damaged_limit` files.
    Anything else is raised. `what` names the job's object in the warnings ("the report of 2026-W47",
    "2026-11-23")."""
    vanished_runs = damaged = 0
    while True:
        try:
            return run()
        except Exception as e:
            if vanished_runs + 1 < attempts and vanished(e):
                vanished_runs += 1
                logger.warning("a history file vanished while reading %s (compaction?); listing again", what)
                continue
            bad = {p: why for root in roots for p, why in damaged_files(e, root).items()} \
                if damaged < damaged_limit else {}
            if not bad:
                raise
            for path, problem in bad.items():
                damaged += 1
                _mark_damaged(path, problem)
                logger.warning("%s does not read (%s); %s is computed again without it",
                               _short(path) if isinstance(path, str) else path, problem, what)  # a URI: no root


def recheck_damaged(root: str, rel: str, size: int, why: str, spark: SparkSession | None = None) -> bool:
    """Mark for this process, as `relisting` does, the history file `rel` (``table/date=…/name``) that an earlier
    process found damaged (`why`), if it is still there, as big, and still does not read: decoded once more, so a
    whole file put back under its name is read again. True when marked now (False: marked already, gone, another
    size, or it reads). A remote file is checked by Spark reading it (`remote_damage`), through `spark` (else the
    active session)."""
    if not is_remote(root):
        path = local_path(root) / rel
        if known_damaged(path) is not None:
            return False
        try:
            if path.stat().st_size != size:
                return False
        except OSError:
            return False
        if damage(path) is None:
            return False
        _mark_damaged(path, why)
        return True
    spark = _session(spark)
    hp = spark._jvm.org.apache.hadoop.fs.Path(root.rstrip("/") + "/" + rel)  # type: ignore[attr-defined]
    try:
        fs = hp.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
        uri = str(fs.makeQualified(hp).toString())  # as a listing spells it (`_uri_key` then matches)
        if _uri_key(uri) in _REMOTE_DAMAGED or int(fs.getFileStatus(hp).getLen()) != size:
            return False
    except Exception:  # gone (py4j wraps the FileNotFoundException), or the store cannot be reached: not marked
        return False
    if remote_damage(spark, uri) is None:
        return False
    _mark_damaged(uri, why)
    return True


def damaged_file_sizes(root: str, table: str, start: float, end: float,
                       spark: SparkSession | None = None) -> list[tuple[str, int, str]]:
    """The files of `table` for ``[start, end)`` that a read of this process found damaged and left out
    (`relisting`), as (name, size, why): what a day's roll-up records of the files it was made without. Sorted; a
    file removed meanwhile is left out. A remote history is listed through `spark` (else the active session)."""
    listed = _listed(spark if is_remote(root) else None, root, table, start, end)
    out = []
    for f, why in listed.damaged.items():
        if f in listed.sizes:
            out.append((f.rstrip("/").rsplit("/", 1)[-1], listed.sizes[f], why))
            continue
        with contextlib.suppress(FileNotFoundError):
            out.append((os.path.basename(f), os.path.getsize(f), why))
    return sorted(out)


def live_file_sizes(root: str, table: str, start: float, end: float,
                    spark: SparkSession | None = None) -> list[tuple[str, int]]:
    """The live files of `table` for ``[start, end)``, as (``table/date=…/name``, size): what a derived file (a
    day's roll-up, a week's report) records of its inputs, to tell later whether they changed. Sorted; a file
    removed while listing is left out. A remote history is listed through `spark` (else the active session), with
    the sizes its listing gives."""
    listed = _listed(spark if is_remote(root) else None, root, table, start, end)
    if is_remote(root):
        return sorted((_relative(f), listed.sizes[f]) for f in listed.files)
    out = []
    for f in listed.files:
        with contextlib.suppress(FileNotFoundError):
            out.append((_relative(f), os.path.getsize(f)))
    return sorted(out)


# ----------------------------------------------------------------------------------------------- reading


@dataclass
class TableData:
    name: str
    df: DataFrame
    files: list[str] = field(default_factory=list)
    days: list[str] = field(default_factory=list)  # YYYY-MM-DD with at least one live file
    missing_columns: dict[str, int] = field(default_factory=dict)  # column -> files (of those checked) lacking it
    checked_files: int = 0
    repeats: dict[str, str] = field(default_factory=dict)  # file left out -> the file with the same rows, read
    empty: list[str] = field(default_factory=list)  # live files left out as empty (0 bytes: no rows)
    damaged: dict[str, str] = field(default_factory=dict)  # live files left out as damaged: why they do not read


def _date_of_path(path: str) -> str | None:
    for part in reversed(str(path).split("/")):
        if part.startswith(DATE_PREFIX):
            return part[len(DATE_PREFIX):]
    return None


def _schema_sample(files: Sequence[str]) -> list[str]:
    """Every file when few; else the first and last live file of each day (writers change version over days)."""
    if len(files) <= SCHEMA_CHECK_MAX_FILES:
        return list(files)
    by_day: dict[str | None, list[str]] = {}
    for f in files:
        by_day.setdefault(_date_of_path(f), []).append(f)
    out: list[str] = []
    for fs in by_day.values():
        out.extend({fs[0], fs[-1]})
    return out


def missing_columns(table: str, files: Iterable[str]) -> tuple[dict[str, int], int]:
    """Columns of `table`'s schema absent from local files (written by an older schema), with file counts."""
    expected = TABLES[table].names
    counts: dict[str, int] = {}
    checked = 0
    for f in files:
        try:
            names = set(pq.read_schema(f).names)
        except (OSError, pa.ArrowException):
            continue  # gone (compacted) or unreadable: Spark will say so if it matters
        checked += 1
        for c in expected:
            if c not in names:
                counts[c] = counts.get(c, 0) + 1
    return counts, checked


def empty_frame(spark: SparkSession, table: str) -> DataFrame:
    return spark.createDataFrame([], spark_schema(table))


def read_table(spark: SparkSession, root: str, table: str, start: float, end: float,
               clusters: Sequence[str] | None = None, use_hadoop: bool | None = None,
               check_schema: bool = True) -> TableData:
    """One history table for ``start <= time < end`` as a DataFrame with the table's full schema."""
    listed = _listed(spark, root, table, start, end, use_hadoop)
    files, repeats, empty, damaged = listed.files, listed.repeats, listed.empty, listed.damaged
    if not files:
        return TableData(table, empty_frame(spark, table), empty=empty, damaged=damaged)
    stamped = [f for f in files if stores_timestamps(f)]
    older = [f for f in files if not stores_timestamps(f)] if stamped else files
    frames = []
    if older:
        frames.append(spark.read.schema(file_schema(table, timestamps=False)).parquet(*older))
    if stamped:
        df = spark.read.schema(file_schema(table)).parquet(*stamped)
        # pushed down to the Parquet scan on the TIMESTAMP column (a microsecond of slack either side), then
        # filtered exactly on the seconds below like the older files
        lo, hi = math.floor(start * 1e6) - 1, math.ceil(end * 1e6) + 1
        df = df.filter((F.col("time") >= F.timestamp_micros(F.lit(lo))) &
                       (F.col("time") <= F.timestamp_micros(F.lit(hi))))
        frames.append(_as_seconds(df, table))
    names = spark_schema(table).names
    df = frames[0].select(*names)
    for other in frames[1:]:
        df = df.unionByName(other.select(*names))
    df = df.filter((F.col("time") >= F.lit(start)) & (F.col("time") < F.lit(end)))
    if clusters:
        df = df.filter(F.col("cluster").isin(list(clusters)))
    days = sorted({d for f in files if (d := _date_of_path(f))})
    missing: dict[str, int] = {}
    checked = 0
    if check_schema and not (use_hadoop if use_hadoop is not None else is_remote(root)):
        missing, checked = missing_columns(table, _schema_sample(files))
    return TableData(table, df, files, days, missing, checked, repeats, empty, damaged)


def _as_seconds(df: DataFrame, table: str) -> DataFrame:
    """The one place TIMESTAMP columns become the aggregations' epoch seconds (DoubleType: microseconds / 1e6,
    the same figure as `collectors.outputs.history.timestamps_to_seconds`)."""
    return df.withColumns({c: F.col(c).cast(T.DoubleType()) for c in TIME_COLUMNS[table]})


def read_history(spark: SparkSession, root: str, start: float, end: float, clusters: Sequence[str] | None = None,
                 tables: Sequence[str] = REPORT_TABLES, use_hadoop: bool | None = None,
                 check_schema: bool = True) -> dict[str, TableData]:
    return {t: read_table(spark, root, t, start, end, clusters, use_hadoop, check_schema) for t in tables}


QUIET_COLUMNS = frozenset({("cluster", "transaction_version"), ("transactions", "keeps_v1")})
"""Columns whose absence from older files is worth no note: null there reads as it always did (no level of
Transaction V2 recorded, no producer's V1 proof recorded: epoch bumps counted as before), so every report over older
history would say it for nothing."""


def table_notes(data: dict[str, TableData], days: Sequence[str]) -> list[str]:
    """Plain-language notes about what the history lacks for `days` (missing tables, days, old-schema columns)."""
    why = {
        "cluster": "no polls recorded: nothing can be reported",
        "brokers": "broker availability unknown",
        "topic_health": "replication minutes unknown",
        "partition_changes": "no ISR or leader change was recorded (normal for a quiet week)",
        "alert_events": "no alert opened or resolved (normal for a quiet week)",
        "incident_events": "no incident opened or resolved (normal for a quiet week; history written before "
                           "schema version 2 has none, and its incident figures count alert episodes)",
        "group_lag": "no consumer groups were seen: consumer figures are n/a",
        "transactions": "no open transaction was seen: transaction figures are 0 or n/a",
        "producers": "no producer with an open transaction was seen",
        "lso_gap": "no partition had its LSO held back by an open transaction",
        "consensus": "no ZooKeeper or KRaft records (no ZooKeeper configured, 4lw disabled, or KRaft not "
                     "reachable): consensus figures are n/a",
    }
    notes: list[str] = []
    wanted = set(days)
    polled = set(data["cluster"].days) & wanted if "cluster" in data else wanted
    for name, td in data.items():
        have = set(td.days) & wanted
        if not have:
            if name != "cluster":
                notes.append(f"{name}: no data for {days[0]}..{days[-1]} — {why.get(name, 'figures are n/a')}.")
        elif name in ("brokers", "topic_health") and polled - have:
            notes.append(f"{name}: no files for {', '.join(sorted(polled - have))} although the cluster was "
                         "polled (written by an older collector, or removed); figures from it miss those days.")
        for col, n in sorted(td.missing_columns.items()):
            if (name, col) in QUIET_COLUMNS:
                continue
            notes.append(f"{name}: {n} of {plural(td.checked_files, 'checked file')} {count_of(n, 'was', 'were')} "
                         "written by an older schema "
                         f"without column `{col}`; it reads as null there.")
    repeated = {name: td.repeats for name, td in data.items() if td.repeats}
    if repeated:
        repeat, kept = min(next(iter(repeated.values())).items())
        notes.append(_files_note(repeated, ("repeats another file of its day byte for byte (a copied or restored "
                                            "history?) and was read once",
                                            "repeat another file of their day byte for byte (a copied or restored "
                                            "history?) and were read once"),
                                 f"{_short(repeat)} repeats {_short(kept)}."))
    emptied = {name: td.empty for name, td in data.items() if td.empty}
    if emptied:
        notes.append(_files_note(emptied, ("is empty (0 bytes: a copy or restore cut short?) and was left out",
                                           "are empty (0 bytes: a copy or restore cut short?) and were left out"),
                                 f"{_short(min(next(iter(emptied.values()))))}: the figures lack whatever rows "
                                 "they held."))
    damaged = {name: td.damaged for name, td in data.items() if td.damaged}
    if damaged:
        path, why = min(next(iter(damaged.values())).items())
        notes.append(_files_note(damaged, ("does not read (cut short or damaged: a copy or restore?) and was left out",
                                           "do not read (cut short or damaged: a copy or restore?) and were left out"),
                                 f"{_short(path)} ({why[:200]}): the figures lack the rows they held. Move them out "
                                 "of the history, or put back whole copies, and run the report again."))
    return notes


def _files_note(per_table: dict[str, Sized], what: tuple[str, str], example: str) -> str:
    """``N history files <what> (<table> <n>, …), e.g. <example>``: one note for files the report left out or
    read once, counted per table; `what` said of one file and of several."""
    n = sum(map(len, per_table.values()))
    return (f"{plural(n, 'history file')} {count_of(n, *what)} ("
            + ", ".join(f"{name} {len(files)}" for name, files in per_table.items()) + f"), e.g. {example}")


def _short(path: str) -> str:
    """``<table>/date=YYYY-MM-DD/<name>`` of a history file: enough to find it, without the root (which may hold
    credentials in a URL)."""
    return "/".join(str(path).rstrip("/").split("/")[-3:])


# ----------------------------------------------------------------------------------------------- writing


def _clean(v: Any) -> Any:
    """JSON-safe: NaN/inf -> null, numpy/pandas scalars -> Python, containers recursively."""
    if v is None:
        return None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple | set):
        return [_clean(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, str | bytes):
        with contextlib.suppress(ValueError, AttributeError):
            v = v.item()
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, bool | int | str):
        return v
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return None
    except ImportError:  # pragma: no cover
        pass
    return str(v)


STALE_TEMP_S = 3600.0
"""A temp file of the same name this old was left by a killed writer (no write of ours takes an hour)."""


def write_json(path: Path, doc: dict[str, Any]) -> None:
    atomic_write(path, lambda f: f.write((json.dumps(_clean(doc), indent=2, allow_nan=False, sort_keys=False)
                                          + "\n").encode()))


def write_parquet(path: Path, table: pa.Table) -> None:
    atomic_write(path, lambda f: pq.write_table(table, f, compression="zstd"))


def write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode()))


def atomic_write(path: Path, write: Callable[[Any], None]) -> None:
    """`path` whole or not at all, through the collectors' `publish` (temp file, fsync, rename, fsync of the
    directory), with a temp file of this write's own: two writers of one name at once (two reports of a week into
    one ``--out``) each publish a whole version. With one shared temp name, their bytes ended up in one file
    and the second rename failed. Temps of the same name a killed writer left are removed once old."""
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f"{TEMP_PREFIX}{path.name}."
    publish(path, write, path.with_name(f"{prefix}{uuid.uuid4().hex}"))
    remove_stale_temps(path.parent, prefix, "", STALE_TEMP_S)
