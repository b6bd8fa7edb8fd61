"""`spark_analytics.table_files`: the part files Spark's tasks wrote, streamed into one published Parquet file.

No Spark here: the part files are written with pyarrow as Spark's Parquet writer lays them out (its column order,
its required columns), and a cluster whose executors write where the driver does not see is the one stand-in
(`_WrittenElsewhere`): no real thing here can be such a cluster. tests/unit/test_rollup.py runs the whole path
with Spark and compares it with the tables collected."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_analytics import table_files

SCHEMA = pa.schema([pa.field("cluster", pa.string()), pa.field("day", pa.int32()),
                    pa.field("polls", pa.int64(), nullable=False)])


def _part(path: Path, rows: list[dict[str, Any]]) -> Path:
    # Spark's order of the columns need not be the published one: `merge_parts` takes them by name
    spark_schema = pa.schema([SCHEMA.field("polls"), SCHEMA.field("cluster"), SCHEMA.field("day")])
    pq.write_table(pa.Table.from_pylist(rows, schema=spark_schema), path, compression="snappy")
    return path


def test_parts_are_streamed_into_one_file_of_the_schema_in_batches(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"cluster": f"c{i % 3}", "day": 20000 + i % 2, "polls": i} for i in range(25)]
    parts = [_part(tmp_path / "part-00000.parquet", rows[:10]), _part(tmp_path / "part-00001.parquet", []),
             _part(tmp_path / "part-00002.parquet", rows[10:])]
    monkeypatch.setattr(table_files, "BATCH_ROWS", 4)
    target = tmp_path / "store" / "t" / "date=2026-11-16" / "rollup.parquet"
    assert table_files.merge_parts(parts, target, SCHEMA) == 25
    got = pq.read_table(target)
    assert got.schema == SCHEMA and got.to_pylist() == rows
    meta = pq.read_metadata(target)
    assert meta.num_row_groups == 3 + 4  # 10 rows in batches of 4, then 15: a row group per batch
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert sorted(p.name for p in target.parent.iterdir()) == ["rollup.parquet"]  # no temp file left
    # only empty parts (Spark writes one for a table without rows): an empty file of the schema
    empty = tmp_path / "empty.parquet"
    assert table_files.merge_parts(parts[1:2], empty, SCHEMA) == 0
    assert pq.read_table(empty).schema == SCHEMA and pq.read_metadata(empty).num_rows == 0


def test_a_failed_merge_keeps_the_file_that_was_there(tmp_path: Path) -> None:
    target = tmp_path / "rollup.parquet"
    pq.write_table(pa.table({"cluster": ["before"]}), target)
    bad = tmp_path / "part-00000.parquet"
    bad.write_bytes(b"PAR1 not parquet")
    with pytest.raises(pa.ArrowInvalid):
        table_files.merge_parts([bad], target, SCHEMA)
    assert pq.read_table(target).to_pylist() == [{"cluster": "before"}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-00000.parquet", "rollup.parquet"]


class _WrittenElsewhere:
    """A DataFrame whose tasks write on other hosts: Spark's job succeeds, and nothing lands where the driver
    looks (a cluster with the store on a path the executors do not share)."""

    schema: Any = None

    @property
    def write(self) -> Any:
        return self

    def mode(self, _: str) -> Any:
        return self

    def parquet(self, path: str) -> None:
        Path(path).mkdir(parents=True)
        (Path(path) / "_SUCCESS").touch()  # the driver's job commit writes it there all the same


def test_a_table_written_where_the_driver_does_not_see_it_is_an_error_not_an_empty_table(tmp_path: Path) -> None:
    target = tmp_path / "rollup.parquet"
    with pytest.raises(OSError, match=r"wrote .*work/t where this driver does not see it \(no part file\)"):
        table_files.write_table(_WrittenElsewhere(), target, tmp_path / "work" / "t")
    assert not target.exists()


def test_work_directories_are_removed_after_and_those_of_killed_runs_once_a_day_old(tmp_path: Path) -> None:
    killed, young = (tmp_path / f"{table_files.WORK_PREFIX}{n}" for n in ("killed", "young"))
    other = tmp_path / ".tmp-rollup.parquet.abc"
    for d in (killed, young, other):
        d.mkdir()
    os.utime(killed, (time.time() - table_files.STALE_S - 60,) * 2)
    os.utime(other, (time.time() - table_files.STALE_S - 60,) * 2)  # not a work directory: not ours to remove
    with table_files.work_dir(tmp_path) as work:
        assert work.is_dir() and work.parent == tmp_path and work.name.startswith(table_files.WORK_PREFIX)
        (work / "t").mkdir()
    assert not work.exists() and not killed.exists() and young.is_dir() and other.is_dir()


def test_a_report_keeps_its_days_in_the_store_or_where_it_cannot_write_there_in_a_local_directory(
        tmp_path: Path) -> None:
    store = tmp_path / "rollups"
    store.mkdir()
    with table_files.scratch(store) as inside:
        assert inside.parent == store and inside.is_dir()
    assert not inside.exists()
    (tmp_path / "a-file").write_text("")  # a store that cannot be written under (as a read-only mount)
    with table_files.scratch(tmp_path / "a-file" / "rollups") as local:
        assert local.is_dir() and tmp_path not in local.parents
    assert not local.exists()
