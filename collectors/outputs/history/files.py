"""The files of a history root: names, atomic publishing, and which files are live (the superseding rule).

See the package docstring (`collectors.outputs.history`) for the layout and the guarantees.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from collectors.outputs.atomic import fsync_dir, publish
from collectors.outputs.history.schema import (
    DATE_PREFIX,
    HISTORY_SCHEMA_VERSION,
    INPUTS_KEY,
    REPLACES_KEY,
    TEMP_PREFIX,
    TIMESTAMPS_SINCE,
)

log = logging.getLogger(__name__)

_VERSION_SUFFIX = re.compile(r"\.v(\d+)\.parquet$")


def ensure_dir(path: Path) -> None:
    if path.is_dir():
        return
    path.mkdir(parents=True, exist_ok=True)
    fsync_dir(path.parent)
    fsync_dir(path.parent.parent)


def new_name(prefix: str) -> str:
    """``<prefix>-<time_ns>-<uuid8>.v<version>.parquet``: the schema version in the name lets a reader group files
    by encoding without opening them (files before version 4 end in plain ``.parquet``)."""
    return f"{prefix}-{time.time_ns()}-{uuid.uuid4().hex[:8]}.v{HISTORY_SCHEMA_VERSION}.parquet"


def file_schema_version(path: str | os.PathLike[str]) -> int | None:
    """The schema version a file's name carries (``....v4.parquet`` -> 4); None for names from before version 4."""
    m = _VERSION_SUFFIX.search(str(path).rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def stores_timestamps(path: str | os.PathLike[str]) -> bool:
    """True when the file (by its name) stores times as TIMESTAMP; False for float64 epoch seconds (before v4)."""
    v = file_schema_version(path)
    return v is not None and v >= TIMESTAMPS_SINCE


def unlink_quietly(path: Path) -> None:
    """Delete one file (a seam for tests that simulate a kill in the middle of a compaction)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def publish_file(directory: Path, name: str, write: Callable[[Any], None]) -> int:
    """Publish `name` in `directory` whole or not at all (a hidden temp file that readers skip until renamed)."""
    return publish(directory / name, write, directory / f"{TEMP_PREFIX}{uuid.uuid4().hex}.parquet")


class _Recent(OrderedDict[tuple[Any, ...], Any]):
    """A cache of what files hold, keyed by path, inode, size and mtime (published files never change), that drops
    its least recently used entries past `size`. Cleared whole instead, a reader over more files than that (a week
    of uncompacted days: ~66,000) read every one of them again at every listing.

    `weight` counts what an entry takes of `size` (1 by default: `size` is a number of entries). The dashboard's
    cache of file contents weighs them in bytes, since one file holds a few rows and another a compacted day; an
    entry heavier than `size` on its own is not kept (it would push out everything else, then itself)."""

    def __init__(self, size: int, weight: Callable[[Any], int] | None = None) -> None:
        super().__init__()
        self.size = size
        self.weight = weight
        self.held = 0  # the sum of the entries' weights
        self._weights: dict[tuple[Any, ...], int] = {}
        self._lock = threading.Lock()  # the collector's maintenance thread lists days beside the poll loop

    def get(self, key: tuple[Any, ...], default: Any = None) -> Any:
        with self._lock:
            if key not in self:
                return default
            self.move_to_end(key)
            return self[key]

    def put(self, key: tuple[Any, ...], value: Any) -> None:
        w = 1 if self.weight is None else self.weight(value)
        with self._lock:
            self.held -= self._weights.pop(key, 0)
            self.pop(key, None)
            if w > self.size:
                return
            self[key] = value
            self._weights[key] = w
            self.held += w
            while self.held > self.size:
                old, _ = self.popitem(last=False)
                self.held -= self._weights.pop(old)

    def clear(self) -> None:
        with self._lock:
            super().clear()
            self._weights.clear()
            self.held = 0


_FOOTER_NAMES_CACHE = _Recent(16_384)
_MISSING = object()


def _footer_names(path: Path) -> tuple[frozenset[str], frozenset[str] | None]:
    """A compact file's `REPLACES_KEY` and `INPUTS_KEY` names (None: a file compacted before the latter was
    written), cached by inode/size/mtime: the file never changes once published. Nothing for a file gone or whose
    footer does not read."""
    try:
        st = path.stat()
        key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
        cached = _FOOTER_NAMES_CACHE.get(key)
        if cached is not None:
            return cached
        meta = pq.read_schema(path).metadata or {}
        names = (frozenset(json.loads(meta.get(REPLACES_KEY, b"[]"))),
                 frozenset(json.loads(meta[INPUTS_KEY])) if INPUTS_KEY in meta else None)
    except FileNotFoundError:
        return frozenset(), frozenset()
    except (OSError, ValueError, pa.ArrowException) as e:
        log.warning("history: cannot read the footer of %s: %s", path, e)
        return frozenset(), frozenset()
    _FOOTER_NAMES_CACHE.put(key, names)
    return names


def replaced_names(path: Path) -> frozenset[str]:
    """Names a compact file supersedes: readers skip them (`REPLACES_KEY`)."""
    return _footer_names(path)[0]


def merged_names(path: Path) -> frozenset[str]:
    """Names of the files a compact file's merge read, whose rows it holds and nothing else (`INPUTS_KEY`); for a
    file compacted before that key was written, the names it supersedes (`replaced_names`), which also name what
    its inputs had replaced and the repeats deleted with them. What a derived file made from the history before a
    compaction compares with the files gone since (`spark_analytics.input_files.compacted_since`)."""
    replaces, inputs = _footer_names(path)
    return replaces if inputs is None else inputs


K = TypeVar("K")

_TRAILER = 8  # a Parquet file ends with the footer's length (uint32, little-endian) and b"PAR1"
_COMPARE_CHUNK = 4 << 20
_KEY_CACHE = _Recent(262_144)  # ~0.5 KB an entry (the column lists are shared: `_COLUMNS`)
_COLUMNS: dict[tuple[Any, ...], tuple[Any, ...]] = {}
REPEAT_WARNING = "history: %s repeats %s byte for byte (a copied or restored file?); its rows are read once"


def rows_key(path: Path) -> Hashable | None:
    """What two Parquet files holding the same rows byte for byte share, as one value: the size, footer length,
    schema and row count, and a digest of every byte from the start of the file to the footer (every column chunk
    and page). Only the footer's key-value metadata may differ. That is what a file copied or restored under a new
    name looks like, or the same data written twice by a deterministic writer; two flushes of a collector never
    match (their poll times differ). None for a file that cannot be read so far (it is not a repeat: it is read, and
    a failed read names it). Cached by the file's inode, size and mtime: published files never change.

    A key per file, not a comparison per pair: a day of a minute's flushes is 1,440 files a table, often of one
    size (a table of a few rows a poll compresses alike), and comparing each with every kept one took minutes.
    """
    try:
        st = path.stat()
        ck = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
        cached = _KEY_CACHE.get(ck, _MISSING)
        if cached is not _MISSING:
            return cached
        key = _rows_key(path, st.st_size)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, pa.ArrowException) as e:
        log.warning("history: cannot read %s to compare it with the other files of its day: %s", path, e)
        return None
    _KEY_CACHE.put(ck, key)
    return key


def _footer_length(f: Any) -> int | None:
    f.seek(-_TRAILER, os.SEEK_END)
    tail = f.read(_TRAILER)
    return int.from_bytes(tail[:4], "little") if len(tail) == _TRAILER and tail[4:] == b"PAR1" else None


def _rows_key(path: Path, size: int) -> Hashable | None:
    with open(path, "rb") as f:
        footer = _footer_length(f)
        if footer is None:
            return None
        md = pq.read_metadata(path)
        digest = hashlib.blake2b(digest_size=20)
        left = size - _TRAILER - footer
        f.seek(0)
        while left > 0:
            chunk = f.read(min(left, _COMPARE_CHUNK))
            if not chunk:
                return None
            digest.update(chunk)
            left -= len(chunk)
    schema = md.schema
    columns = tuple((c.path, c.physical_type, str(c.logical_type), c.max_definition_level, c.max_repetition_level)
                    for c in (schema.column(i) for i in range(len(schema))))
    columns = _COLUMNS.setdefault(columns, columns)  # one copy per schema, not per file
    return size, footer, md.num_rows, md.num_row_groups, columns, digest.digest()


@functools.cache
def warn_repeat(repeat: str, first: str) -> None:
    """`REPEAT_WARNING`, once per file and process: every listing of a day finds the repeat again."""
    log.warning(REPEAT_WARNING, repeat, first)


def repeats_among(files: Iterable[tuple[K, int]], key: Callable[[K], Hashable | None]) -> dict[K, K]:
    """Of `files` ((file, size) in name order), those whose rows repeat an earlier file's, by `key` (`rows_key`,
    or the Hadoop lister's own): {repeat: the first file of its rows}. Only files of a size shared with another are
    keyed, so a directory without copies costs nothing more than its sizes. Shared by the local reader and the
    Spark job's Hadoop lister."""
    by_size: dict[int, list[K]] = {}
    for f, size in files:
        by_size.setdefault(size, []).append(f)
    out: dict[K, K] = {}
    for group in (g for g in by_size.values() if len(g) > 1):
        first: dict[Hashable, K] = {}
        for f in group:
            k = key(f)
            if k is None:
                continue
            if k in first:
                out[f] = first[k]
            else:
                first[k] = f
    return out


def _sizes(directory: Path, names: Iterable[str]) -> Iterator[tuple[str, int]]:
    for n in names:
        with contextlib.suppress(FileNotFoundError):
            yield n, os.stat(directory / n).st_size


EMPTY_WARNING = "history: %s is empty (0 bytes): it holds no rows and is not read"


@functools.cache
def warn_empty(path: str) -> None:
    """`EMPTY_WARNING`, once per file and process: every listing of a day finds the file again."""
    log.warning(EMPTY_WARNING, path)


def damage(path: Path) -> str | None:
    """Why `path` cannot be read whole (every row group and column, with its own schema); None if it can.

    Reading the footer finds a file emptied or cut short. A file damaged past an intact footer (a page
    overwritten, a bad block in a restore) shows only when its pages are decoded, which this does for all of
    them: for after a read of several files failed, to name the one at fault, not for every listing."""
    try:
        with pq.ParquetFile(path) as f:
            for _ in f.iter_batches(batch_size=65_536):
                pass
    except FileNotFoundError:
        return None  # gone, not broken: the next listing will not have it
    except (OSError, pa.ArrowException) as e:
        return problem_of(e)
    return None


def problem_of(e: BaseException) -> str:
    """``Type: first line`` of a read's error: one line, for warnings and the report's notes."""
    first = str(e).strip().splitlines()
    return f"{type(e).__name__}: {first[0] if first else ''}"


_DAMAGED: dict[str, tuple[int, int, str]] = {}


def mark_damaged(path: Path, problem: str) -> bool:
    """Remember for this process that `path`, as it is now (size and mtime), does not read, and why (`damage`):
    `day_files` leaves it out from then on. True the first time (to warn once)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    key, seen = str(path), _DAMAGED.get(str(path))
    _DAMAGED[key] = (st.st_size, st.st_mtime_ns, problem)
    return seen is None or seen[:2] != _DAMAGED[key][:2]


def known_damaged(path: Path) -> str | None:
    """Why `path` does not read, if `mark_damaged` saw it as it still is (a whole file put back under the same name
    reads again). A dict lookup for every other file (no `stat`)."""
    seen = _DAMAGED.get(str(path))
    if seen is None:
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return seen[2] if seen[:2] == (st.st_size, st.st_mtime_ns) else None


@dataclass(frozen=True)
class DayFiles:
    """The files of one ``date=`` directory as readers and the compaction see them."""

    live: list[str]  # to read, sorted; repeats, empty and damaged files excluded
    superseded: set[str]  # present, but named by a compact file's `kmon.replaces`
    repeats: dict[str, str]  # present, live by the superseding rule, but the same rows as another live file
    empty: list[str] = field(default_factory=list)  # present, live by the superseding rule, but 0 bytes: no rows
    damaged: dict[str, str] = field(default_factory=dict)  # present and live, but found not to read: why


def superseded_by(directory: Path, names: Iterable[str]) -> set[str]:
    """The names the compact files among `names` (of `directory`) supersede: what a day's listing leaves out, and
    what a new compaction merging them supersedes too."""
    out: set[str] = set()
    for n in names:
        if n.startswith("compact-"):
            out |= replaced_names(directory / n)
    return out


def day_files(directory: Path) -> DayFiles:
    """The live, superseded, repeated, empty and damaged files of one ``date=`` directory (see the package doc).

    An empty (0-byte) file cannot be Parquet and holds no rows. The writer never publishes one (it writes, fsyncs,
    then renames), so it comes from a copy or restore cut short: left out of `live` (and out of the comparison for
    repeats) with a warning, instead of failing a read or the day's compaction, or being skipped by Spark without
    a word. A damaged file (cut short, or pages that do not decode) is left out once a read in this process found
    it (`mark_damaged`): finding it costs a failed read, so it is not looked for here."""
    try:
        names = [n for n in os.listdir(directory) if n.endswith(".parquet") and not n.startswith((".", "_"))]
    except FileNotFoundError:
        return DayFiles([], set(), {})
    superseded = superseded_by(directory, names)
    live = sorted(n for n in names if n not in superseded)
    sizes = list(_sizes(directory, live))
    empty = [n for n, size in sizes if size == 0]
    for n in empty:
        warn_empty(str(directory / n))
    repeats = repeats_among([(n, size) for n, size in sizes if size > 0], lambda n: rows_key(directory / n))
    for n, first in repeats.items():
        warn_repeat(str(directory / n), str(directory / first))
    damaged = {n: problem for n, size in sizes if size > 0 and n not in repeats
               and (problem := known_damaged(directory / n)) is not None}
    left_out = set(repeats) | set(empty) | set(damaged)
    return DayFiles([n for n in live if n not in left_out], superseded & set(names), repeats, empty, damaged)


def scan_date_dir(directory: Path) -> tuple[list[str], set[str]]:
    """(live file names, superseded names present) of one ``date=`` directory; files repeating another are not
    live (`day_files`)."""
    d = day_files(directory)
    return d.live, d.superseded


def _parse_date(name: str) -> date | None:
    if not name.startswith(DATE_PREFIX):
        return None
    try:
        return date.fromisoformat(name[len(DATE_PREFIX):])
    except ValueError:
        return None


def date_dirs(table_dir: Path) -> list[tuple[date, Path]]:
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


def utc_date(t: float) -> date:
    return datetime.fromtimestamp(t, UTC).date()


def list_tables(root: Path) -> list[str]:
    """Tables present under `root` (directories holding at least one ``date=`` directory)."""
    try:
        entries = [e for e in os.scandir(root) if e.is_dir() and not e.name.startswith((".", "_"))]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(e.name for e in entries if date_dirs(Path(e.path)))


def available_dates(root: Path, table: str) -> list[str]:
    """``YYYY-MM-DD`` days of `table` that hold at least one live file, oldest first."""
    return [d.isoformat() for d, p in date_dirs(Path(root) / table) if scan_date_dir(p)[0]]


def _dirs_in(table_dir: Path, start: float | None, end: float | None) -> Iterator[Path]:
    """The ``date=`` directories of `table_dir` that can hold rows of ``[start, end]`` (partition pruning: no file
    of another day is opened)."""
    lo = utc_date(start) if start is not None else None
    hi = utc_date(end) if end is not None else None
    for day, d in date_dirs(table_dir):
        if (lo is None or day >= lo) and (hi is None or day <= hi):
            yield d


@dataclass(frozen=True)
class Listing:
    """The files of a table over a range of days, as `day_files` sorts them, from one agreed listing."""

    live: list[Path]
    repeats: dict[Path, Path]  # {repeat left out: the file read instead}
    empty: list[Path]
    damaged: dict[Path, str]  # {file left out: why it does not read} (`mark_damaged`)


def _listing(table_dir: Path, start: float | None, end: float | None) -> Listing:
    live: list[Path] = []
    repeats: dict[Path, Path] = {}
    empty: list[Path] = []
    damaged: dict[Path, str] = {}
    for d in _dirs_in(table_dir, start, end):
        files = day_files(d)
        live += [d / n for n in files.live]
        repeats.update((d / r, d / k) for r, k in files.repeats.items())
        empty += [d / n for n in files.empty]
        damaged.update((d / n, why) for n, why in files.damaged.items())
    return Listing(live, repeats, empty, damaged)


def list_files(root: Path, table: str, start: float | None = None, end: float | None = None) -> Listing:
    """The live files a reader should read for rows with `start` <= time < `end` (days outside are pruned), and
    those left out as repeats, empty or damaged, for readers that say so (the weekly report's notes): one walk.

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


def live_files(root: Path, table: str, start: float | None = None, end: float | None = None) -> list[Path]:
    """The files a reader should read for rows with `start` <= time < `end` (`list_files`)."""
    return list_files(root, table, start, end).live


def repeated_files(root: Path, table: str, start: float | None = None, end: float | None = None) -> dict[Path, Path]:
    """Files that `live_files` leaves out because they repeat another live file of their day (`rows_key`):
    {repeat: the file read instead}. For readers that say so (the weekly report's notes)."""
    return list_files(root, table, start, end).repeats


def empty_files(root: Path, table: str, start: float | None = None, end: float | None = None) -> list[Path]:
    """Files that `live_files` leaves out because they are empty (0 bytes: no Parquet, no rows; `day_files`). For
    readers that say so (the weekly report's notes)."""
    return list_files(root, table, start, end).empty
