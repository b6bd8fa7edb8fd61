"""`DayMaintenance`: what the writer of a history root does besides writing polls — clear what a killed process
left, delete days past the retention, merge a finished day's files into one (`compact`).

A part of `HistoryWriter` (which it is mixed into), kept apart because it works on days already written, never on
the buffer: it reads only the root, the clock and the two settings below. The writer runs it hourly, on a thread of
its own as the collector does (`HistoryWriter.maintain`), and `recover` when it starts writing a root. See the
package docstring (`collectors.outputs.history`) for the layout and the guarantees a kill at any point keeps.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from collectors.model.wording import plural
from collectors.outputs.atomic import fsync_dir
from collectors.outputs.history.compaction import Footer, merged_schema, read_footer, row_groups
from collectors.outputs.history.files import (
    DayFiles,
    damage,
    date_dirs,
    day_files,
    mark_damaged,
    new_name,
    problem_of,
    publish_file,
    scan_date_dir,
    superseded_by,
    unlink_quietly,
    utc_date,
)
from collectors.outputs.history.schema import (
    COMPACT_ROW_GROUP,
    COMPRESSION,
    DATE_PREFIX,
    DELETING_PREFIX,
    TEMP_PREFIX,
    in_row_group_order,
)

log = logging.getLogger(__name__)

T = TypeVar("T")


class CompactionError(RuntimeError):
    """Some days could not be compacted (named); every other day was. `HistoryWriter.maintain` records it."""


class DayMaintenance:
    """Recovery, retention and compaction of the days under `root` (see the module docstring)."""

    root: Path
    clock: Callable[[], float]
    retention_days: int | None
    compact_min_files: int

    def recover(self) -> dict[str, int]:
        """Remove what a killed process can leave behind and finish interrupted compactions."""
        counts = {"temp_files": 0, "superseded_files": 0, "deleting_dirs": 0}
        for table_dir in self._table_dirs():
            for entry in list(os.scandir(table_dir)):
                if entry.name.startswith(DELETING_PREFIX) and entry.is_dir():
                    shutil.rmtree(entry.path, ignore_errors=True)
                    counts["deleting_dirs"] += 1
            for _, d in date_dirs(table_dir):
                for name in os.listdir(d):
                    if name.startswith(TEMP_PREFIX) or name.endswith(".tmp"):
                        unlink_quietly(d / name)
                        counts["temp_files"] += 1
                counts["superseded_files"] += self._delete_superseded(d)
        if any(counts.values()):
            log.info("history: removed %s, %s superseded by a compaction and %s left by an earlier run under %s",
                     plural(counts["temp_files"], "temp file"), plural(counts["superseded_files"], "file"),
                     plural(counts["deleting_dirs"], "half-deleted day"), self.root)
        return counts

    def _table_dirs(self) -> list[Path]:
        try:
            entries = list(os.scandir(self.root))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(Path(e.path) for e in entries if e.is_dir() and not e.name.startswith((".", "_")))

    @staticmethod
    def _delete_superseded(directory: Path) -> int:
        _, superseded = scan_date_dir(directory)
        # Plain part files first, compact files last: whatever survives a kill here is still superseded
        # by a compact file that is itself still present.
        for name in sorted(superseded, key=lambda n: n.startswith("compact-")):
            unlink_quietly(directory / name)
        if superseded:
            fsync_dir(directory)
        return len(superseded)

    def apply_retention(self, now: float | None = None) -> int:
        """Delete ``date=`` directories older than `retention_days` (today, UTC, counts as day 0)."""
        if self.retention_days is None:
            return 0
        cutoff = utc_date(self.clock() if now is None else now) - timedelta(days=self.retention_days)
        removed = 0
        for table_dir in self._table_dirs():
            for day, d in date_dirs(table_dir):
                if day >= cutoff:
                    continue
                # Rename first so readers see the day vanish at once, then delete at leisure.
                doomed = table_dir / f"{DELETING_PREFIX}{d.name}-{uuid.uuid4().hex[:8]}"
                os.replace(d, doomed)
                shutil.rmtree(doomed, ignore_errors=True)
                removed += 1
        if removed:
            log.info("history: retention removed %s older than %s", plural(removed, "day"), cutoff)
        return removed

    def maybe_compact(self, now: float | None = None) -> int:
        """Compact every finished (before today, UTC) day of every table with >= compact_min_files files."""
        today = utc_date(self.clock() if now is None else now)
        done = 0
        failed: list[str] = []
        for table_dir in self._table_dirs():
            for day, d in date_dirs(table_dir):
                if day >= today:
                    continue
                files = day_files(d)
                try:
                    if len(files.live) >= self.compact_min_files and self.compact(table_dir.name, day.isoformat(),
                                                                                  files):
                        done += 1
                except Exception as e:  # one day that cannot be merged must not hold back every day after it
                    log.warning("history: cannot compact %s/%s: %s: %s", table_dir.name, d.name, type(e).__name__, e)
                    failed.append(f"{table_dir.name}/{d.name}")
        if failed:
            raise CompactionError(f"{plural(len(failed), 'day')} not compacted ({', '.join(failed[:5])}"
                                  f"{', …' if len(failed) > 5 else ''}); the others were")
        return done

    @staticmethod
    def _left_out(path: Path, problem: str) -> None:
        """Mark `path` damaged (`day_files` leaves it out from then on) and warn, once per file and process: not at
        every hourly maintenance."""
        if mark_damaged(path, problem):
            log.warning("history: %s is not readable Parquet (%s); left out of its day's compaction and "
                        "skipped by readers", path, problem)

    def compact(self, table: str, day: str, files: DayFiles | None = None) -> bool:
        """Merge the live files of one table and day into one (the scheme: the package docstring's "Compaction").
        `files`: the day's `day_files`, when the caller has just listed it (a listing of 1,440 files is not free).

        A file that does not read stays where it is, outside the merge (deleting it could lose rows; readers skip
        it too): a footer that does not read is found before merging; pages that do not decode (a file damaged past
        an intact footer) only when the merge fails, then looked for file by file, and the merge is redone without
        them. A failure that no single file explains is raised."""
        directory = self.root / table / f"{DATE_PREFIX}{day}"
        files = day_files(directory) if files is None else files
        if files.superseded:  # finish an interrupted compaction first (what is live stays so)
            self._delete_superseded(directory)
        footers: dict[str, Footer] = {}
        for name in files.live:  # those found damaged before are not live any more (`day_files`)
            try:
                footers[name] = read_footer(directory / name)
            except (OSError, pa.ArrowException) as e:  # cut short by hand (we never publish one)
                self._left_out(directory / name, problem_of(e))
        return self._merge_without_damaged(directory, footers,
                                           lambda inputs: self._merge(table, day, directory, inputs, files.repeats))

    def _merge_without_damaged(self, directory: Path, inputs: dict[str, T], merge: Callable[[dict[str, T]], bool],
                               ) -> bool:
        """`merge(inputs)` (the files of `directory` by name, with what was read of each); when it fails, once more
        without the files found damaged (left out from then on, `_left_out`). A failure no file explains is raised."""
        try:
            return merge(inputs)
        except (OSError, pa.ArrowException):
            damaged = {name: problem for name in inputs if (problem := damage(directory / name)) is not None}
            if not damaged:
                raise
            for name, problem in damaged.items():
                self._left_out(directory / name, problem)
            return merge({n: v for n, v in inputs.items() if n not in damaged})

    def _merge(self, table: str, day: str, directory: Path, footers: dict[str, Footer],
               repeats: dict[str, str]) -> bool:
        """Publish one compact file holding the rows of the files `footers` names (in that order), superseding
        them and `repeats`; False (nothing written) for fewer than two files."""
        live = list(footers)
        if len(live) < 2:
            return False
        # a repeat's rows are in the file it repeats: superseded with the inputs, its rows not read twice
        replaces = set(live) | set(repeats) | superseded_by(directory, live)
        # and the files read (`kmon.inputs`): what a roll-up made before this merge recorded of the day, if no more
        target = merged_schema(table, (f.schema for f in footers.values()), replaces, live)
        rows = 0

        def write(f: Any) -> None:
            nonlocal rows
            with pq.ParquetWriter(f, target, compression=COMPRESSION) as w:
                for group in row_groups(footers, target, COMPACT_ROW_GROUP):
                    w.write_table(in_row_group_order(table, group))
                    rows += group.num_rows

        name = new_name("compact")
        publish_file(directory, name, write)
        deleted = self._delete_superseded(directory)
        log.info("history: compacted %d files (%d rows) of %s/%s into %s; deleted %d", len(live), rows, table, day,
                 name, deleted)
        return True
