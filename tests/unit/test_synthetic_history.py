"""The bench's synthetic history (`bench.synthetic_history`): a day written a slice of polls at a time is the day
written whole, row for row and row group for row group (the slices only bound the generator's memory)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench import synthetic_history as S

ROW_GROUP = 10_000  # rows a row group: a day's 96 polls of 1,000 group-topics fill nine and part of a tenth


def _week(root: Path, chunk_rows: int, monkeypatch: pytest.MonkeyPatch) -> S.Written:
    monkeypatch.setattr(S, "COMPACT_ROW_GROUP", ROW_GROUP)
    monkeypatch.setattr(S, "CHUNK_ROWS", chunk_rows)
    return S.generate(root, shape=S.Shape(interval_s=900.0), old_days=1)


def _files(root: Path) -> dict[str, pq.ParquetFile]:
    return {str(f.parent.relative_to(root)): pq.ParquetFile(f) for f in sorted(root.glob("*/date=*/*.parquet"))}


def test_a_day_written_in_slices_of_polls_is_the_day_written_whole(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    whole = _week(tmp_path / "whole", 1 << 40, monkeypatch)
    sliced = _week(tmp_path / "sliced", 2_500, monkeypatch)  # 2 polls of group_lag, 12 of topic_health a slice
    assert sliced.rows == whole.rows and sliced.files == whole.files
    assert whole.rows["group_lag"] == 7 * 96 * 1_000 and whole.rows["topic_health"] == 7 * 96 * 200
    a, b = _files(tmp_path / "whole"), _files(tmp_path / "sliced")
    assert a.keys() == b.keys() and len(a) == whole.files
    for where, f in a.items():
        groups = [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)]
        assert groups == [b[where].metadata.row_group(i).num_rows for i in range(b[where].num_row_groups)], where
        assert all(g == ROW_GROUP for g in groups[:-1]) and 0 < groups[-1] <= ROW_GROUP, (where, groups)
        assert f.read().equals(b[where].read()), where
        assert f.schema_arrow.metadata[b"kmon.table"] == where.split("/")[0].encode()
    day = "group_lag/date=2026-09-29"
    assert [a[day].metadata.row_group(i).num_rows for i in range(a[day].num_row_groups)] == [ROW_GROUP] * 9 + [6_000]
    # each row group in the table's row-group order (group, topic, time), as a compaction writes it
    rows = a[day].read_row_group(0, columns=["group_id", "topic", "time"]).to_pylist()
    assert rows == sorted(rows, key=lambda r: (r["group_id"], r["topic"], r["time"]))
    # the first day as a collector before schema version 4 wrote it, the others as now
    assert a["group_lag/date=2026-09-28"].schema_arrow.field("time").type == "double"
    assert str(a[day].schema_arrow.field("time").type).startswith("timestamp")
