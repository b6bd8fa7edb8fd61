"""Tables too big for the driver, written by Spark's executors and published as one Parquet file each.

A day's roll-up was collected to the driver (``toArrow``) and written from there. At 100,000 partitions (the
fleet size the report is meant to scale to; 20,000 group-topics) one day's roll-up is ~5 M rows, and fetching
them killed the default 1 GB driver (``OutOfMemoryError: Java heap space`` in the block fetch of the task results;
docs/performance-log.md, "Step 18"). Here each table is written by the tasks that compute it (Spark's Parquet
writer, under a work directory), then streamed into the store's single file a batch at a time: the JVM's heap
holds no table, the Python driver one batch. The file has the schema, format and compression the collected table
had (the schema ``toArrow`` gives, written by pyarrow), so days written before and after read together
(`rollup.read` takes one day's footer for all, or the union of the days' columns where one was added since).

The work directory must be where the executors write and the driver reads: the same path on every node, as the
store itself (docs/weekly-report.md, "On a Spark cluster"). Spark writes at least one part file for every table,
an empty one too, so a table with none in sight was written where this driver cannot see it: that is an error
naming the directory, never an empty table. Its temp name (`TEMP_PREFIX`) keeps readers away, and one a killed
run left is removed by a later run once a day old.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from collectors.outputs.atomic import remove_stale_temps
from collectors.outputs.history.schema import TEMP_PREFIX
from spark_analytics import io

BATCH_ROWS = 1 << 20
"""Rows per batch streamed into the published file, and so per row group (pyarrow's ``write_table`` default)."""
WRITE_THREADS = 4
"""Tables written at once (small jobs mostly waiting on scheduling, as `rollup.collect`'s)."""
WORK_PREFIX = f"{TEMP_PREFIX}spark-"
STALE_S = 86400.0
"""A work directory this old was left by a killed run. A day, not `io.STALE_TEMP_S`'s hour: a report keeps the days
it computed in one (`scratch`) and reads them until it ends, and a big fleet's report may run for more than an
hour."""


def arrow_schema(df: Any) -> pa.Schema:
    """The schema `df.toArrow()` gives, from `df`'s analysed schema (no job)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC")


def work_dir(parent: Path) -> contextlib.AbstractContextManager[Path]:
    """A directory of this run's own under `parent`, for Spark's part files; removed after, and with it the work
    directories of runs killed more than `STALE_S` ago."""
    return _removed_after(_new_work_dir(parent))


def scratch(parent: Path) -> contextlib.AbstractContextManager[Path]:
    """A `work_dir` under `parent` (a roll-up store: a path every executor shares), or a local temporary directory
    where `parent` cannot be written (a read-only mount; enough for a local master): where a report keeps the
    days it computes from the history (`weekly_report.load_partials`). Before, it was always a local temporary
    directory, which the executors of a cluster could not read."""
    try:
        return work_dir(parent)
    except OSError:
        return _removed_after(Path(tempfile.mkdtemp(prefix="kmon-partials-")))


@contextmanager
def _removed_after(path: Path) -> Iterator[Path]:
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _new_work_dir(parent: Path) -> Path:
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(parent, WORK_PREFIX, "", STALE_S, directories=True)
    work = parent / f"{WORK_PREFIX}{uuid.uuid4().hex}"
    work.mkdir()  # here, not in Spark's first write: a directory that cannot be written fails before any job
    return work


def write_tables(frames: dict[str, Any], targets: dict[str, Path], work: Path) -> dict[str, int]:
    """Each of `frames` written to its file in `targets` (`write_table`), a few at a time; the rows of each."""
    with ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="write") as pool:
        futures = {name: pool.submit(write_table, df, targets[name], work / name) for name, df in frames.items()}
        return {name: f.result() for name, f in futures.items()}


def write_table(df: Any, target: Path, work: Path) -> int:
    """`df` written by Spark under `work`, then published whole at `target` as one Parquet file; its rows."""
    df.write.mode("overwrite").parquet(str(work))
    parts = sorted(work.glob("part-*"))
    if not parts:
        raise OSError(f"Spark's tasks wrote {work} where this driver does not see it (no part file): the directory "
                      "must be the same shared path on the driver and every executor")
    return merge_parts(parts, target, arrow_schema(df))


def merge_parts(parts: list[Path], target: Path, schema: pa.Schema) -> int:
    """The rows of the Parquet files `parts`, cast to `schema`, streamed into `target` (zstd, as `io.write_parquet`
    writes; published atomically: whole or not at all); the rows written."""
    rows = 0

    def write(f: Any) -> None:
        nonlocal rows
        with pq.ParquetWriter(f, schema, compression="zstd") as out:
            for part in parts:
                for batch in pq.ParquetFile(part).iter_batches(batch_size=BATCH_ROWS):
                    out.write_batch(_cast(batch, schema))
                    rows += batch.num_rows

    io.atomic_write(target, write)
    return rows


def _cast(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` (as Spark's Parquet writer stored it) with `schema`'s types and field order."""
    return pa.RecordBatch.from_arrays([batch.column(f.name).cast(f.type) for f in schema], schema=schema)
