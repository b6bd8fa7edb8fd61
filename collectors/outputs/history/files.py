"""The files of a history root: names, atomic publishing, and which files are live (the superseding rule).

See the package docstring (`collectors.outputs.history`) for the layout and the guarantees.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from collectors.outputs.atomic import fsync_dir, publish
from collectors.outputs.history.schema import (
    DATE_PREFIX,
    HISTORY_SCHEMA_VERSION,
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


_REPLACES_CACHE: dict[tuple[str, int, int, int], frozenset[str]] = {}


def replaced_names(path: Path) -> frozenset[str]:
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


def scan_date_dir(directory: Path) -> tuple[list[str], set[str]]:
    """(live file names, superseded names present) of one ``date=`` directory."""
    try:
        names = [n for n in os.listdir(directory) if n.endswith(".parquet") and not n.startswith((".", "_"))]
    except FileNotFoundError:
        return [], set()
    superseded: set[str] = set()
    for n in names:
        if n.startswith("compact-"):
            superseded |= replaced_names(directory / n)
    return sorted(n for n in names if n not in superseded), superseded & set(names)


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


def _listing(table_dir: Path, start: float | None, end: float | None) -> list[Path]:
    lo = utc_date(start) if start is not None else None
    hi = utc_date(end) if end is not None else None
    files: list[Path] = []
    for day, d in date_dirs(table_dir):
        if (lo is not None and day < lo) or (hi is not None and day > hi):
            continue  # partition pruning: no file of that day is opened
        files.extend(d / n for n in scan_date_dir(d)[0])
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


