"""Reading a day's files for its compaction (`HistoryWriter.compact`): each file's footer once, then the rows of every
file in name order, in the compacted file's row groups, each conformed to the compacted schema once.

The merge this replaced read each file's schema, then opened the file again as a `ParquetFile` and conformed it a
batch at a time. A day of minute flushes is 1,440 files of a few rows a table: of the 13 s the 8 tables of such a day
took, ~7 s were Arrow decoding them (~0.5 ms a file, most of it a zstd context made for each column chunk: a cost
per file that no way of reading them spares) and the rest per-file Python and per-batch conforming. Now the footers
read for the day's schema stay in dataset fragments, which one scan of the files of a schema decodes on Arrow's
threads without reading them again, and a row group's rows are conformed once per schema: the same day compacts in
~6 s (``bench/bench_compaction.py`` times both, side by side).

The rows, their order and the row groups are the per-batch merge's, to the row: a row group ended after the first
batch (a file read ``COMPACT_ROW_GROUP`` rows at a time, the last batch of a file the rest) that brought it to
``COMPACT_ROW_GROUP`` rows. Those cuts follow from the files' row counts alone (`cuts`), so how the scan splits what
it reads moves none of them, nor the order of a row group sorted by key (`schema.in_row_group_order`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from collectors.outputs.history.schema import HISTORY_SCHEMA_VERSION, INPUTS_KEY, REPLACES_KEY, TABLES, conform

_FORMAT = ds.ParquetFileFormat()
_LOCAL = pafs.LocalFileSystem()
_READ_AHEAD = 2
"""Batches of a file the scan reads ahead (Arrow's default: 16): a day's minute flushes are a batch each, and an
earlier compaction's file is read a row group's worth at a time, as the per-batch merge read it."""
_SCAN_THREADS = False
"""The scan's `use_threads`. Off, the files are still read and decoded beside the writing thread, on Arrow's I/O
threads (a day of minute flushes: ~1.5 s of CPU a second), and the day compacted ~8 % faster, with ~8 % less CPU,
than with Arrow's CPU threads on as well."""


@dataclass(frozen=True, slots=True)
class Footer:
    """A file's footer, read once (`read_footer`): what the merge needs of it, and the fragment that keeps it for
    the scan of the file's rows."""

    fragment: ds.ParquetFileFragment
    schema: pa.Schema
    rows: int


def read_footer(path: Path) -> Footer:
    """The footer of `path`; raises what reading it raises (a file cut short: `pa.ArrowInvalid`)."""
    fragment = _FORMAT.make_fragment(str(path), filesystem=_LOCAL)
    fragment.ensure_complete_metadata()
    return Footer(fragment, fragment.physical_schema, fragment.metadata.num_rows)


def cuts(rows: Sequence[int], size: int) -> list[int]:
    """Where the per-batch merge of files of `rows` rows each (in order) ended its row groups, as offsets into their
    rows: after each batch (a file read `size` rows at a time, its last batch the rest) that brought the row group
    to `size` rows or more, and at the end when rows are left."""
    out: list[int] = []
    at = pending = 0
    for n in rows:
        full, rest = divmod(n, size)
        for _ in range(full):  # a whole batch is a row group on its own (or ends the one under way)
            at += size
            out.append(at)
        if full:
            pending = 0
        at += rest
        pending += rest
        if pending >= size:
            out.append(at)
            pending = 0
    if pending:
        out.append(at)
    return out


def row_groups(footers: dict[str, Footer], target: pa.Schema, size: int) -> Iterator[pa.Table]:
    """The rows of the files `footers` names (in its order), in `target`'s schema, a row group at a time (`cuts`).

    Raises `pa.ArrowInvalid` when the files held other rows than their footers said (never a compact file short of
    rows, or with some twice), and what reading them raises."""
    ends = cuts([f.rows for f in footers.values()], size)
    pieces: list[pa.RecordBatch] = []
    at = 0  # rows read so far, of all files
    for piece in _batches(list(footers.values()), size):
        while ends and at + piece.num_rows >= ends[0]:  # a row group ends within this batch, or with it
            take = ends.pop(0) - at
            pieces.append(piece.slice(0, take))
            yield _conformed(pieces, target)
            pieces, piece, at = [], piece.slice(take), at + take
        if piece.num_rows:
            pieces.append(piece)
            at += piece.num_rows
    if ends or pieces:
        promised = sum(f.rows for f in footers.values())
        raise pa.ArrowInvalid(f"read {at} rows of {len(footers)} files whose footers say {promised}")


def _conformed(pieces: list[pa.RecordBatch], target: pa.Schema) -> pa.Table:
    """`pieces` as one table of `target`'s schema, conformed a run of one schema at a time: a batch at a time, the
    9,498 batches of a day of minute flushes took 1.8 s to conform."""
    runs: list[list[pa.RecordBatch]] = []
    for p in pieces:
        if runs and runs[-1][0].schema.equals(p.schema, check_metadata=True):
            runs[-1].append(p)
        else:
            runs.append([p])
    parts = [conform(pa.Table.from_batches(run), target) for run in runs]
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def _batches(files: list[Footer], size: int) -> Iterator[pa.RecordBatch]:
    """The rows of `files` in their order: one scan for each run of files of one schema (a day written by one
    collector is one run; one upgraded mid-day, two), each file read as it is, with its own schema."""
    i = 0
    while i < len(files):
        schema = files[i].schema.remove_metadata()
        j = i + 1
        while j < len(files) and files[j].schema.remove_metadata().equals(schema, check_metadata=True):
            j += 1
        run = files[i:j]
        dataset = ds.FileSystemDataset([f.fragment for f in run], schema, _FORMAT, _LOCAL)
        paths = iter(f.fragment.path for f in run)
        expected = next(paths)
        scanner = dataset.scanner(batch_size=size, batch_readahead=_READ_AHEAD, use_threads=_SCAN_THREADS)
        for tagged in scanner.scan_batches():
            while tagged.fragment.path != expected:  # the scan yields in order; never let rows move if not
                expected = next(paths, None)
                if expected is None:
                    raise pa.ArrowInvalid(f"the scan of {len(run)} files yielded rows of {tagged.fragment.path} "
                                          "out of order")
            yield tagged.record_batch
        i = j


def merged_schema(table: str, files: Iterable[pa.Schema], replaces: set[str],
                  inputs: Iterable[str] | None = None) -> pa.Schema:
    """The schema of the compact file of `table` merging the files `inputs` (by name) of the schemas `files` (one per
    file, in order) and superseding `replaces`: the table's own (`TABLES`; unknown tables: the files' unified) with
    the columns of a newer writer's files added, so that they survive the merge, and the file's metadata (`inputs`
    under `INPUTS_KEY` when given)."""
    schemas: list[pa.Schema] = []  # each once, in the order of the files (a day's 1,440 are one or two)
    for schema in files:
        if not any(schema.equals(s, check_metadata=True) for s in schemas):
            schemas.append(schema)
    target = TABLES.get(table)
    if target is None:
        target = pa.unify_schemas([s.remove_metadata() for s in schemas])
    for f in (f for s in schemas for f in s):
        if f.name not in target.names and f.name != "date":
            target = target.append(f)
    meta = {"kmon.table": table, "kmon.history_schema_version": str(HISTORY_SCHEMA_VERSION),
            REPLACES_KEY.decode(): json.dumps(sorted(replaces))}
    if inputs is not None:
        meta[INPUTS_KEY.decode()] = json.dumps(sorted(inputs))
    return target.with_metadata(meta)
