"""The bench's synthetic history (`bench.synthetic_history`): a day written a slice of polls at a time is the day
written whole, row for row and row group for row group (the slices only bound the generator's memory)."""

from __future__ import annotations

import itertools
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


def test_weeks_generated_one_by_one_read_as_one_history(tmp_path: Path) -> None:
    """The bench's `--last-week` and `--month` generate a week at a time into one history. Each week used to
    start again (ZooKeeper at epoch 5, incidents named ``broker-000``...), so the second week's report saw its
    elections as old epochs and its incidents as last week's, reopened: 0 elections and 0 incidents opened, in the
    Spark report and in the DuckDB reference alike. The reference now counts the second week as it counts a week
    alone."""
    import duckdb

    from bench import bench_spark
    from spark_analytics.period import Period

    shape = S.Shape(interval_s=900.0)
    alone, both = tmp_path / "alone", tmp_path / "both"
    S.generate(alone, "2026-W40", shape)
    S.generate(both, "2026-W39", shape)
    S.generate(both, "2026-W40", shape)
    week = Period.iso_week("2026-W40")
    one = bench_spark.duckdb_headline(duckdb.connect(), alone, week)
    two = bench_spark.duckdb_headline(duckdb.connect(), both, week)
    assert one["zk_elections"] == two["zk_elections"] == 2
    assert one["incidents_opened"] == two["incidents_opened"] == 13
    assert one["critical_incidents"] == two["critical_incidents"] == 9
    assert one["epoch_bumps"] == two["epoch_bumps"] == 10
    assert one["mttr_minutes"] == pytest.approx(two["mttr_minutes"])
    # W39's topic-199 incident, never resolved, is superseded by W40's of the same cause: one open at the end
    assert one["incidents_open_at_end"] == two["incidents_open_at_end"] == 1

    con = duckdb.connect()
    ids = con.sql(f"SELECT DISTINCT id FROM '{both}/incident_events/*/*.parquet'").fetchall()
    per_week = len(S.Week(S.week_start("2026-W40"), shape).incidents())  # 13 the headline counts, the monitor's
    assert per_week == 14 and len(ids) == 2 * per_week  # each week's incidents its own
    zk = con.sql(f"""SELECT server, zxid_epoch, zxid_counter FROM '{both}/consensus/*/*.parquet'
                     WHERE zxid > 0 ORDER BY server, time""").fetchall()
    for (s1, e1, c1), (s2, e2, c2) in itertools.pairwise(zk):
        if s1 == s2:
            assert (e2, c2) >= (e1, c1)  # never back: within an epoch the counter only grows
    assert len(zk) > 2 * 7 * 96 * 3 // 2 and zk[-1][1] == zk[0][1] + 4  # two elections a week, both weeks
