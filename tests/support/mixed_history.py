"""A history as a collector upgraded mid-day leaves it: files written before schema version 4 (times as float64
epoch seconds, names without a version) next to files of the current writer (times as TIMESTAMP) in the same
``date=`` directories. Every reader (the collector's, the dashboard's, the Spark job's) must read both alike.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from collectors.model.poll import PollResult
from collectors.outputs.history import HistoryWriter
from collectors.outputs.history.files import stores_timestamps
from collectors.outputs.history.schema import to_seconds

OLD_VERSION = 3


def as_written_before_v4(root: Path) -> list[Path]:
    """Rewrite every current-version file under `root` as a version 3 collector wrote it: time columns as float64
    epoch seconds, ``schema_version`` 3 (column and footer), a name without a version. Returns the new paths."""
    out = []
    for path in sorted(Path(root).rglob("*.parquet")):
        if path.name.startswith((".", "_")) or not stores_timestamps(path):
            continue
        t = pq.read_table(path, partitioning=None)
        t = to_seconds(t).set_column(t.schema.get_field_index("schema_version"), "schema_version",
                                     pa.array([OLD_VERSION] * t.num_rows, pa.int32()))
        meta = dict(t.schema.metadata or {})
        meta[b"kmon.history_schema_version"] = str(OLD_VERSION).encode()
        old = path.with_name(path.name.removesuffix(".parquet").rsplit(".v", 1)[0] + ".parquet")
        pq.write_table(t.replace_schema_metadata(meta), old, compression="zstd")
        os.unlink(path)
        out.append(old)
    return out


def write_upgraded_mid_day(root: Path, before: Sequence[PollResult], after: Sequence[PollResult]) -> None:
    """`before` written by a collector before version 4, then `after` by the current one (one flush each)."""
    for polls, downgrade in ((before, True), (after, False)):
        for p in polls:
            w = HistoryWriter(root, clock=lambda t=p.snapshot.time: t, retention_days=None, compact_min_files=10**6)
            w.add(p)
            assert w.flush(), w.last_error
        if downgrade:
            as_written_before_v4(root)
