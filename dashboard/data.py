"""The dashboard's I/O: settings, the latest state files, the Parquet history and the weekly reports.

The dashboard never talks to Kafka. It reads what the collector writes:

- ``--state-dir`` (``KMON_STATE_DIR``, default ``data/demo/state``): one JSON file per cluster, replaced
  atomically after every poll (`collectors.outputs.latest_state`);
- ``--history`` (``KMON_HISTORY``, default ``data/demo/history``): Parquet tables partitioned by date
  (`collectors.outputs.history`), read with only the needed columns, clusters and days;
- ``--reports`` (``KMON_REPORTS``, default ``data/reports``): ``<cluster>/<week>/report.html`` and
  ``summary.json`` from the weekly Spark job (the directory names as `spark_analytics.layout` makes them).

Caching: reads are cached with ``st.cache_resource`` keyed on a signature of the files involved (name, size,
mtime; for history, a digest of the listing), so a rerun that finds nothing new costs a directory listing, and new
files are picked up at once.
``cache_resource`` hands out the cached object itself (no copy): callers treat it as read-only. History
windows are floored to the minute so that successive reruns share cache entries. Below those, what each history
file held is kept too (LRU, `PIECES_BUDGET`): published files never change, so a rerun after a flush opens only the
new file and puts the window together from the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import pyarrow as pa
import streamlit as st

from collectors.outputs import history as hist
from collectors.outputs.history import files as hist_files
from collectors.outputs.history import reader as hist_reader
from collectors.outputs.latest_state import read_latest, retired
from spark_analytics import layout

log = logging.getLogger(__name__)

DEFAULT_STATE_DIR = "data/demo/state"
DEFAULT_HISTORY = "data/demo/history"
DEFAULT_REPORTS = "data/reports"
DEFAULT_REFRESH_S = 30.0


@dataclass(frozen=True)
class Settings:
    state_dir: Path
    history_dir: Path
    reports_dir: Path
    refresh_s: float  # auto-refresh check interval; 0 = off
    poll_interval_s: float | None  # None = inferred from the history's poll times


def parse_settings(argv: Sequence[str] | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Settings from the arguments after ``--`` of ``streamlit run``, then environment, then defaults.

    Unknown arguments are ignored (under AppTest, ``sys.argv`` belongs to pytest).
    """
    env = os.environ if environ is None else environ
    p = argparse.ArgumentParser(prog="dashboard/app.py", add_help=False, allow_abbrev=False)
    p.add_argument("--state-dir", default=env.get("KMON_STATE_DIR", DEFAULT_STATE_DIR))
    p.add_argument("--history", default=env.get("KMON_HISTORY", DEFAULT_HISTORY))
    p.add_argument("--reports", default=env.get("KMON_REPORTS", DEFAULT_REPORTS))
    p.add_argument("--refresh", type=float, default=_float(env.get("KMON_REFRESH"), DEFAULT_REFRESH_S))
    p.add_argument("--poll-interval", type=float, default=_float(env.get("KMON_POLL_INTERVAL"), None))
    args, _ = p.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    return Settings(Path(args.state_dir), Path(args.history), Path(args.reports), max(0.0, args.refresh),
                    args.poll_interval)


def _float(v: str | None, default: float | None) -> float | None:
    try:
        return float(v) if v not in (None, "") else default
    except ValueError:
        return default


# ----- latest state


F = TypeVar("F", bound="os.DirEntry[str] | Path")


def _stats(files: Iterable[F]) -> Iterator[tuple[F, os.stat_result]]:
    """Each file still there with its stat: one removed between the listing and the stat is simply left out."""
    for f in files:
        try:
            yield f, f.stat()
        except FileNotFoundError:
            continue


def _signature(files: Iterable[os.DirEntry[str] | Path]) -> tuple[tuple[str, int, int], ...]:
    """(name, mtime_ns, size) of each file still there: a cache key that changes whenever one is written,
    replaced or removed."""
    return tuple((f.name, stt.st_mtime_ns, stt.st_size) for f, stt in _stats(files))


def state_signature(state_dir: Path) -> tuple[tuple[str, int, int], ...]:
    """The `_signature` of every latest-state file: changes whenever the collector writes."""
    try:
        entries = [e for e in os.scandir(state_dir) if e.name.endswith(".json") and not e.name.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return ()
    return tuple(sorted(_signature(entries)))


@st.cache_resource(max_entries=2, show_spinner=False)
def _latest_cached(state_dir: str, signature: tuple[tuple[str, int, int], ...]) -> dict[str, dict[str, Any]]:
    """Two entries: the current files and the ones just replaced (a session still rerunning on them); older
    versions are of no use and a big cluster's state is hundreds of MB once parsed."""
    gc.collect()  # what is garbage now is collected before the freeze below, which would keep it for good
    with without_cyclic_gc():
        docs = read_latest(Path(state_dir))
    gc.freeze()
    return docs


@contextlib.contextmanager
def without_cyclic_gc() -> Iterator[None]:
    """Parse without the cyclic garbage collector: parsing a big cluster's state (95 MB for 100,000
    partitions) creates millions of containers, each batch of which triggers a collection that walks every
    live object (the parsed part included): 3-4 s instead of under 1 s. Parsed JSON holds no reference
    cycles, so nothing is missed.

    `_latest_cached` then freezes them (`gc.freeze`): otherwise every later collection, in any rerun of any
    page, walks those millions of objects again (~1.5 s per new snapshot at 100,000 partitions, charged to
    whatever allocates at the time). Frozen objects are still freed by reference counting when the cache
    drops them; only their cycles would not be, and parsed JSON has none."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_latest(state_dir: Path) -> dict[str, dict[str, Any]]:
    """``{cluster: snapshot dict + written_at}``, sorted by cluster name (read-only: shared by the cache)."""
    docs = _latest_cached(str(state_dir), state_signature(state_dir))
    return dict(sorted(docs.items()))


def retired_clusters(state_dir: Path) -> list[tuple[str, float]]:
    """``[(cluster, last written)]`` of the clusters the collector retired (`latest_state.retired`), newest first."""
    return retired(Path(state_dir))


# ----- history


FileKey = hist_reader.FileKey

_listings = hist_files._Recent(1024)
"""{(root, table, ``date=`` directory): (its state, file keys, digest)}: the listing memo of `_listed`, a day a
table (~300 bytes a file: ~0.5 MB for a day of minute flushes). The least recently used go, not all of them at once
(a busy dashboard listed every table again when the memo was cleared whole)."""

PIECES_BUDGET = 256 << 20
"""Bytes of Arrow data (`_piece_weight`) kept as pieces of history files (`hist_reader.read_arrow_pieces`): a day
of minute flushes is ~8 MB a table and set of columns (1,440 pieces of ~5.5 KB), a compacted day as its rows."""


def _piece_weight(piece: pa.Table) -> int:
    """A piece's memory: its buffers, and ~4 KB besides, and 256 bytes a column, for the objects and allocations
    around them (measured: 5.4 KB a piece of 2 columns, 8 KB of 25, beyond ``nbytes``; a minute's flush of a small
    table holds a few hundred bytes of data)."""
    return piece.nbytes + 4096 + 256 * piece.num_columns


_pieces = hist_files._Recent(PIECES_BUDGET, _piece_weight)
_bounds = hist_files._Recent(65_536)  # (least, greatest) time of a file by its footer: ~0.5 KB an entry


def _file_keys(files: Iterable[Path]) -> tuple[FileKey, ...]:
    """(path, inode, size, mtime_ns) of each file still there (`hist_reader.FileKey`): changes whenever one is
    written, replaced or removed, and keys what was read of it."""
    return tuple((str(f), stt.st_ino, stt.st_size, stt.st_mtime_ns) for f, stt in _stats(files))


def _listed(root: Path, table: str, start: float | None, end: float | None) -> tuple[tuple[FileKey, ...], str]:
    """The live files a history read would open (`_file_keys`), and a digest of them for cache keys.

    A page's rerun reads one table several times (each cluster, the sidebar, the Overview's blocks, windows of a day
    to a week), and each listing of a day of minute flushes stats 1,440 files (~0.1 s). So a day's listing answers
    again, for every window it is part of, while its directory has not changed (`_day_listed`). The digest, not the
    files, keys `_history_cached`: Streamlit hashes every argument at every call, ~20 ms for a day's 1,440 files,
    for each of a rerun's reads."""
    lo = None if start is None else hist_files.utc_date(start)
    hi = None if end is None else hist_files.utc_date(end)
    days = [_day_listed(root, table, day, d) for day, d in hist_files.date_dirs(Path(root) / table)
            if (lo is None or day >= lo) and (hi is None or day <= hi)]
    files = tuple(k for listed, _ in days for k in listed)
    return files, hashlib.blake2b("".join(digest for _, digest in days).encode(), digest_size=16).hexdigest()


def _day_listed(root: Path, table: str, day: date, directory: Path) -> tuple[tuple[FileKey, ...], str]:
    """The live files of one ``date=`` directory and their digest, listed again only once the directory's time or
    number of entries changed: a file published into the day (renamed in), or taken out by compaction or
    retention, changes both (the count too, since a directory's time may not move within one clock tick)."""
    try:
        state = (directory.stat().st_mtime_ns, len(os.listdir(directory)))
    except FileNotFoundError:
        return (), ""  # taken out by retention since the day was found
    key = (str(root), table, directory.name)
    got = _listings.get(key)
    if got is not None and got[0] == state:
        return got[1], got[2]
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
    files = _file_keys(hist.live_files(root, table, midnight, midnight))  # `list_files`: listings that agree
    digest = hashlib.blake2b(repr(files).encode(), digest_size=16).hexdigest()
    _listings.put(key, (state, files, digest))
    return files, digest


def history_signature(root: Path, table: str, start: float | None, end: float | None) -> tuple[FileKey, ...]:
    """The live files a history read would open, as (path, inode, size, mtime_ns): a cache key that changes whenever
    one is written, replaced or removed (`_listed`)."""
    return _listed(root, table, start, end)[0]


@st.cache_resource(max_entries=96, ttl=3600, show_spinner=False)
def _history_cached(root: str, table: str, start: float | None, end: float | None, clusters: tuple[str, ...] | None,
                    columns: tuple[str, ...] | None, digest: str, _files: tuple[FileKey, ...]) -> pd.DataFrame:
    """`digest` (`_listed`) keys the read; `_files`, the listing it is a digest of, is not hashed (the underscore)."""
    if not _files:
        return _empty(table, columns)
    try:
        return _read_window(Path(root), table, start, end, clusters, columns, _files)
    except ValueError as e:  # a column this history does not have (older writer): show what we can
        log.warning("history %s: %s", table, e)
        return _empty(table, columns)


def _read_window(root: Path, table: str, start: float | None, end: float | None, clusters: tuple[str, ...] | None,
                 columns: tuple[str, ...] | None, files: tuple[FileKey, ...]) -> pd.DataFrame:
    """`hist.read_table` of the window, from the pieces of the files read before (`hist_reader.read_arrow_pieces`).

    After a flush (a minute) the listing changes and the window is read again, which read every file of its days
    (3.6-3.7 s a rerun over a day of minute flushes): now only the new file is opened. A file gone since the
    listing (a compaction) or that does not read is left to `hist.read_table`, which lists again and leaves damaged
    files out; so is a table not in the schema, whose columns only its files say."""
    if clusters is None and table in hist.TABLES:
        try:
            return hist.to_pandas(hist_reader.read_arrow_pieces(root, table, files, start, end, columns, _pieces,
                                                                 _bounds))
        except (OSError, pa.ArrowException) as e:
            log.debug("history %s: reading the files again as listed now (%s)", table, e)
    return hist.read_table(root, table, start, end, list(clusters) if clusters is not None else None,
                           list(columns) if columns is not None else None)


def _empty(table: str, columns: Sequence[str] | None) -> pd.DataFrame:
    schema = hist.TABLES.get(table)
    names = list(columns) if columns is not None else (schema.names if schema is not None else [])
    return pd.DataFrame({n: pd.Series(dtype="object") for n in names})


def read_history(root: Path, table: str, start: float | None = None, end: float | None = None,
                 clusters: Sequence[str] | None = None, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Rows of a history table in [start, end) (epoch s), for `clusters`, with `columns`; sorted by time.

    An absent root or table gives an empty frame with the requested columns. The frame may be shared by the
    cache: do not modify it in place.

    The read is of every cluster, cached once per table, window and columns, and each caller's clusters are
    taken from it: the pages ask cluster by cluster (the sidebar's poll interval, the Overview's two reads), and a
    read per cluster opened every file of the window's days again for each (16 clusters over a day of minute
    flushes: 10-20 s a page).
    """
    if start is not None:
        start = float(int(start // 60) * 60)
    files, digest = _listed(root, table, start, end)
    wanted = None if columns is None else tuple(sorted({*columns, "cluster"}))  # one entry whatever the order
    df = _history_cached(str(root), table, start, end, None, wanted, digest, files)
    if clusters is not None and "cluster" in df.columns:
        df = df[df["cluster"].isin(list(clusters))].reset_index(drop=True)
    if columns is not None:
        df = df[[c for c in columns if c in df.columns]]
    return df


def history_tables(root: Path) -> list[str]:
    return hist.list_tables(root)


def history_days(root: Path, table: str) -> list[str]:
    return hist.available_dates(root, table)


def poll_interval(settings: Settings, cluster: str | None, ref: float | None = None) -> float:
    """The configured poll interval, else the median spacing of the cluster's recent polls, else 30 s."""
    from dashboard.views.common import infer_poll_interval

    if settings.poll_interval_s:
        return settings.poll_interval_s
    if cluster is None:
        return 30.0
    ref = time.time() if ref is None else ref
    h = read_history(settings.history_dir, "cluster", ref - 6 * 3600, None, [cluster], ["time"])
    return infer_poll_interval(h["time"].tolist() if not h.empty else [], 30.0)


# ----- weekly reports


@dataclass(frozen=True)
class Report:
    cluster: str
    week: str
    directory: Path
    html: Path | None
    summary: dict[str, Any] | None
    summary_error: str | None = None


def find_reports(reports_dir: Path, cluster: str) -> list[Report]:
    """Weekly reports of a cluster, newest week first (`spark_analytics.layout`: ``<reports>/<cluster>/<week>/``).

    The job writes under the collector's collision-free `safe_name` of the cluster. Reports from before that sit
    under the job's old name (`layout.legacy_cluster_dir`), which ``a b`` and ``a_b`` share, so a report found
    there counts only when its summary names this cluster. The same check guards the current directory, which
    can hold such an old report of another cluster (``a_b/`` written for ``a b``); there a report whose summary
    names no cluster (unreadable, or only a page) is taken as this cluster's. A week in both is the current one.
    """
    found: dict[str, Report] = {}
    current = layout.cluster_dir(reports_dir, cluster)
    for base, legacy in ((current, False), (layout.legacy_cluster_dir(reports_dir, cluster), True)):
        if (legacy and base == current) or not base.is_dir():
            continue
        for week_dir in base.iterdir():
            if week_dir.name in found or not week_dir.is_dir() or week_dir.name.startswith("."):
                continue
            report = _read_report(cluster, week_dir)
            owner = report.summary.get("cluster") if report and isinstance(report.summary, dict) else None
            if report is not None and (owner == cluster or (owner is None and not legacy)):
                found[week_dir.name] = report
    return sorted(found.values(), key=lambda r: r.week, reverse=True)


def _read_report(cluster: str, week_dir: Path) -> Report | None:
    """The page and parsed summary of one week's directory; None when it holds neither."""
    html = week_dir / layout.PAGE_FILE
    summary_path = week_dir / layout.SUMMARY_FILE
    summary, err = None, None
    if summary_path.is_file():
        try:
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            err = f"{summary_path.name}: {e}"
    if not (html.is_file() or summary is not None or err):
        return None
    return Report(cluster, week_dir.name, week_dir, html if html.is_file() else None, summary, err)


# ----- incidents


@st.cache_resource(max_entries=2, show_spinner=False)  # as `_latest_cached`: its lists hold the documents' alerts
def _members_cached(cluster: str, snapshot_time: Any, written_at: Any,
                    _doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    from dashboard.views.incidents import incident_members

    return incident_members(_doc)


def incident_members(cluster: str, doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """`dashboard.views.incidents.incident_members` of a latest-state document, computed once per written
    snapshot (keyed on its ``time`` and ``written_at``): a rerun of the Overview does not redo the pass over
    100,000 alerts. Read-only, shared by the cache."""
    return _members_cached(cluster, doc.get("time"), doc.get("written_at"), doc)
