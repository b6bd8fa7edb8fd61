"""Daily roll-ups (`spark_analytics.rollup`) and the report figures made from them.

The day partials must give the same figures as the polls (the lag percentiles within the histogram's 1 %), the
roll-up job must be idempotent, notice late files, and never leave a half-written day that the report would read.
Real PySpark in local mode; history files written in the collector's layout.
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from collectors.outputs.history.schema import SECONDS_TABLES
from spark_analytics import aggregations as A
from spark_analytics import io, rollup, rollup_job
from spark_analytics.aggregations import consumers as C
from spark_analytics.aggregations import histogram as H
from spark_analytics.aggregations import replication as R
from spark_analytics.weekly_report import compute, compute_with_retry
from tests.support.damage import damage_pages
from tests.support.spark_history import frame, spark_session

W = A.Period.iso_week("2026-W47")
T0 = W.start
DAY = 86400


@pytest.fixture(scope="session")
def spark() -> Any:
    return spark_session()


def _lag_rows() -> list[dict[str, Any]]:
    """Two group-topics over three days at 10-minute polls: lags of every size, unknown lag seconds on day 2, a
    state change, WARN/ERR, retention loss."""
    rng = random.Random(17)
    out = []
    for day in (0, 1, 3):
        for i in range(144):
            t = T0 + day * DAY + i * 600
            for g, scale in (("g1", 50.0), ("g2", 5000.0)):
                lag = rng.choice([0, 0, int(rng.expovariate(1 / scale))])
                secs = None if (day == 1 and g == "g2") else float(lag) / 10.0
                out.append({"time": t, "group_id": g, "topic": "t", "state": "Stable" if i < 100 else "Empty",
                            "members": 3 if i < 100 else 0, "lag_max": lag, "lag_sum": lag, "lag_seconds_max": secs,
                            "status": "ERR" if lag > 3 * scale else "WARN" if lag > scale else "OK",
                            "below_log_start": 1 if (g == "g1" and day == 3 and 10 <= i < 14) else 0,
                            "partitions": 1})
    return out


def _health_rows() -> list[dict[str, Any]]:
    out = []
    for day in (0, 1, 3):
        for i in range(144):
            t = T0 + day * DAY + i * 600
            for topic in ("a", "b"):
                bad = 1 if (topic == "a" and 20 <= i < 30) else 0
                out.append({"time": t, "topic": topic, "internal": False, "partitions": 4, "replication_factor": 3,
                            "min_insync_replicas": 2 if i < 70 else 1, "under_replicated": bad * 2,
                            "under_min_isr": bad, "offline": 1 if (day == 3 and topic == "b" and i == 5) else 0})
    return out


def _partials(spark: Any, gl: Any, th: Any, slo: float) -> dict[str, Any]:
    empty = {name: io.empty_frame(spark, name) for name in ("transactions", "producers", "lso_gap")}
    got = rollup.partials(spark, {"group_lag": gl, "topic_health": th, **empty}, W.days(), slo)
    return {k: spark.createDataFrame(v) for k, v in got.items()}


def test_figures_from_day_partials_equal_the_figures_from_the_polls(spark: Any) -> None:
    gl, th = frame(spark, "group_lag", _lag_rows()), frame(spark, "topic_health", _health_rows())
    polls = spark.createDataFrame([("c1", 600.0)], "cluster string, poll_interval_s double")
    parts = _partials(spark, gl, th, 90.0)
    exact = {r["group_id"]: r for r in (r.asDict() for r in A.consumer_lag(gl, polls, W, 90.0).collect())}
    merged = {r["group_id"]: r for r in (r.asDict() for r in C.consumer_lag_from_days(
        parts["group_lag_days"], parts["group_lag_hist"], polls, W, 90.0).collect())}
    assert set(exact) == set(merged) == {"g1", "g2"}
    for g, e in exact.items():
        m = merged[g]
        assert list(m) == list(e)
        for k, v in e.items():
            if k.endswith(("_p50", "_p95", "_p99")):
                assert abs(m[k] - v) <= H.ALPHA * v + 1e-9, (g, k, m[k], v)
            else:
                assert m[k] == v, (g, k, m[k], v)
    assert merged["g1"]["last_state"] == "Empty" and merged["g2"]["polls_with_lag_seconds"] == 2 * 144
    assert exact["g1"]["lag_p99"] != merged["g1"]["lag_p99"] or exact["g1"]["lag_p99"] == 0  # really from buckets
    for name, from_days in (
            ("topic", R.topic_replication_from_days(parts["topic_health_days"], polls, W)),
            ("cluster", R.cluster_replication_from_days(parts["topic_health_days"], parts["topic_health_polls"],
                                                        polls, W))):
        raw = (A.topic_replication(th, polls, W) if name == "topic" else A.cluster_replication(th, polls, W))
        order = ["cluster", "topic"] if name == "topic" else ["cluster"]
        assert [r.asDict() for r in from_days.orderBy(*order).collect()] == [
            r.asDict() for r in raw.orderBy(*order).collect()], name
    flags = parts["group_lag_flags"]
    assert flags.count() == 4 and parts["group_lag_series"].filter("group_id = 'g1'").count() == 3 * 96


def test_the_one_pass_cells_give_each_day_and_histogram_as_the_polls_do(spark: Any) -> None:
    """`lag_cells` is the only pass over the polls: its day rows and histograms must be what the polls say, computed
    here in plain Python (counts, maxima, the state at the day's last poll, every bucket's polls)."""
    rows = _lag_rows()
    gl = frame(spark, "group_lag", rows)
    cells = C.lag_cells(gl, W.start, W.end, 90.0)
    days = {(r.group_id, r.day): r.asDict() for r in C.days_of_cells(cells).collect()}
    hists: dict[tuple[str, int, int], dict[int, int]] = {}
    for r in C.histograms_of_cells(cells).collect():
        hists.setdefault((r.group_id, r.day, r.metric), {})[r.bucket] = r.polls
    want_days: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        want_days.setdefault((r["group_id"], int(r["time"] // DAY)), []).append(r)
    assert set(days) == set(want_days) and len(days) == 6
    for key, polls in want_days.items():
        got, secs = days[key], [p["lag_seconds_max"] for p in polls if p["lag_seconds_max"] is not None]
        last = max(polls, key=lambda p: p["time"])
        assert got["polls"] == len(polls) and got["polls_with_lag_seconds"] == len(secs)
        assert got["polls_within_slo"] == sum(1 for x in secs if x <= 90.0)
        assert got["warn_polls"] == sum(1 for p in polls if p["status"] == "WARN")
        assert got["err_polls"] == sum(1 for p in polls if p["status"] == "ERR")
        assert got["below_log_start_polls"] == sum(1 for p in polls if p["below_log_start"] > 0)
        assert got["lag_max"] == max(p["lag_max"] for p in polls)
        assert got["lag_seconds_max"] == (max(secs) if secs else None)
        assert got["last_time"] == last["time"] and got["last_members"] == last["members"]
        assert C.STATES[got["last_state_code"] - 1] == last["state"]
        for metric, values in ((0, [p["lag_max"] for p in polls]), (1, secs)):
            want: dict[int, int] = {}
            for v in values:
                want[H.bucket_of(v)] = want.get(H.bucket_of(v), 0) + 1
            assert hists.get((key[0], key[1], metric), {}) == want, (key, metric)


def test_one_cell_set_for_the_week_gives_the_figures_of_the_days_merged(spark: Any) -> None:
    """A report from the history keys its cells by the week's first day (`rollup.lag_partials`): the figures must be
    those of the per-day partials merged, to the digit, so they never depend on which days were rolled up."""
    gl, th = frame(spark, "group_lag", _lag_rows()), frame(spark, "topic_health", _health_rows())
    polls = spark.createDataFrame([("c1", 600.0)], "cluster string, poll_interval_s double")
    per_day = _partials(spark, gl, th, 90.0)
    parts, cells = rollup.lag_partials({"group_lag": gl, "topic_health": th}, W.days(), 90.0)

    def figures(p: dict[str, Any]) -> list[dict[str, Any]]:
        return [r.asDict() for r in C.consumer_lag_from_days(p["group_lag_days"], p["group_lag_hist"], polls, W,
                                                             90.0).orderBy("group_id").collect()]

    with rollup.cached(cells) as held:
        assert held.storageLevel.useMemory  # cached (and computed) while the tables made from it are collected
        assert {r.day for r in parts["group_lag_days"].select("day").distinct().collect()} == {W.epoch_days[0]}
        week = figures(parts)
    assert not cells.storageLevel.useMemory  # and let go after
    assert week == figures(per_day) and len(week) == 2


def test_a_partial_counted_against_another_slo_is_estimated_from_its_histogram(spark: Any) -> None:
    gl, th = frame(spark, "group_lag", _lag_rows()), frame(spark, "topic_health", _health_rows())
    polls = spark.createDataFrame([("c1", 600.0)], "cluster string, poll_interval_s double")
    parts = _partials(spark, gl, th, 90.0)  # rolled up while the collector's SLO was 90 s; the report uses 300 s
    exact = {r.group_id: r for r in A.consumer_lag(gl, polls, W, 300.0).collect()}
    merged = {r.group_id: r for r in C.consumer_lag_from_days(parts["group_lag_days"], parts["group_lag_hist"], polls,
                                                             W, 300.0).collect()}
    secs = [r["lag_seconds_max"] for r in _lag_rows() if r["lag_seconds_max"] is not None]
    near = sum(1 for s in secs if abs(s - 300.0) <= H.ALPHA * 300.0)
    for g in ("g1", "g2"):
        assert merged[g].slo_s == 300.0
        assert abs(merged[g].polls_within_slo - exact[g].polls_within_slo) <= near
    assert merged["g2"].polls_within_slo != 0 and merged["g2"].polls_within_slo < merged["g2"].polls_with_lag_seconds


def _write(root: Path, table: str, day: str, rows: list[dict[str, Any]], name: str = "part-0.parquet") -> None:
    schema = SECONDS_TABLES[table]
    cols = {f.name: pa.array([{"cluster": "c1", "schema_version": 1, **r}.get(f.name) for r in rows], type=f.type)
            for f in schema}
    d = root / table / f"date={day}"
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pydict(cols, schema=schema), d / name)


def _history(root: Path) -> None:
    thresholds = json.dumps({"lag_seconds_slo": 90.0})
    for day in (0, 1, 3):
        name = W.days()[day]
        lo, hi = T0 + day * DAY, T0 + (day + 1) * DAY
        _write(root, "group_lag", name, [r for r in _lag_rows() if lo <= r["time"] < hi])
        _write(root, "topic_health", name, [r for r in _health_rows() if lo <= r["time"] < hi])
        _write(root, "cluster", name, [{"time": lo + i * 600, "reachable": True, "controller_id": 1,
                                        "thresholds": thresholds} for i in range(144)])


def _history_again(root: Path, week: A.Period) -> None:
    """`_history`'s three days copied into `week`, their times shifted."""
    for table in ("group_lag", "topic_health", "cluster"):
        for day in (0, 1, 3):
            t = pq.read_table(root / table / f"date={W.days()[day]}" / "part-0.parquet")
            t = t.set_column(t.schema.get_field_index("time"), "time",
                             pa.compute.add(t["time"], pa.scalar(week.start - W.start)))
            d = root / table / f"date={week.days()[day]}"
            d.mkdir(parents=True)
            pq.write_table(t, d / "part-0.parquet")


def test_rollup_job_is_idempotent_notices_late_files_and_the_report_reads_it(spark: Any, tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]
                                                                               ) -> None:
    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    now = W.end + 3600
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store)], spark=spark, now=now) == 0
    assert "rolled up 3 days" in capsys.readouterr().out
    first = {p: p.read_bytes() for p in sorted(store.glob("group_lag_*/*/*.parquet"))}
    assert len(first) == 4 * 3
    manifest = json.loads((store / "_days" / f"{W.days()[0]}.json").read_text())
    assert manifest["lag_slo_s"] == {"c1": 90.0} and manifest["rows"]["group_lag_days"] == 2
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store)], spark=spark, now=now) == 0
    assert "nothing to do (3 days up to date" in capsys.readouterr().out
    # a late file for day 1: that day only is rolled up again, and its figures change
    late = [dict(r, time=T0 + DAY + 300.0, group_id="late") for r in _lag_rows()[:1]]
    _write(hist, "group_lag", W.days()[1], late, name="part-late.parquet")
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store)], spark=spark, now=now) == 0
    assert f"rolled up 1 day ({W.days()[1]}..{W.days()[1]})" in capsys.readouterr().out
    assert pq.read_table(store / "group_lag_days" / f"date={W.days()[1]}" / "rollup.parquet").num_rows == 3
    # the collector's maintenance compacts day 1 since: the same rows, so its roll-up stays fresh (before, the
    # next report computed the day from the history and the next run rolled it up again)
    from collectors.outputs.history import HistoryWriter

    assert HistoryWriter(hist).compact("group_lag", W.days()[1])
    assert [n.name.split("-")[0] for n in (hist / "group_lag" / f"date={W.days()[1]}").glob("*.parquet")] == [
        "compact"]
    assert rollup.fresh_days(rollup.Store(store), str(hist), W.days()) == [W.days()[i] for i in (0, 1, 3)]
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store)], spark=spark, now=now) == 0
    assert "nothing to do (3 days up to date" in capsys.readouterr().out
    # the report from the roll-ups equals the report from the (compacted) history
    c_raw = compute(spark, str(hist), W, A.Options())
    c_up = compute(spark, str(hist), W, A.Options(rollups=str(store)))
    assert c_up.rollup_days == [W.days()[i] for i in (0, 1, 3)] and len(c_raw.rollup_days) == 0
    assert c_up.headline.to_pylist() == c_raw.headline.to_pylist()
    # every table and chart series row for row, in the same order (`rollup.in_key_order`), but the four-week
    # trend, which reads roll-ups only
    assert c_up.tables.keys() == c_raw.tables.keys() and c_up.series.keys() == c_raw.series.keys()
    for name in c_raw.tables.keys() - {"trend"}:
        assert c_up.tables[name].to_pylist() == c_raw.tables[name].to_pylist(), name
    for name in c_raw.series:
        assert c_up.series[name].to_pylist() == c_raw.series[name].to_pylist(), name
    assert c_raw.tables["consumer_lag"].num_rows > 1
    assert c_raw.headline.to_pylist()[0]["retention_loss_episodes"] == 1
    # judged against another SLO (--lag-slo-seconds), the figures, the four-week trend's too, do not depend on
    # which days were rolled up: a day the report computes is counted as its roll-up would be
    empty = tmp_path / "empty"
    empty.mkdir()
    c_full = compute(spark, str(hist), W, A.Options(rollups=str(store), lag_slo_s=5.0))
    c_none = compute(spark, str(hist), W, A.Options(rollups=str(empty), lag_slo_s=5.0))
    assert c_full.rollup_days and not c_none.rollup_days
    assert c_full.headline.to_pylist() == c_none.headline.to_pylist()
    assert c_full.tables["trend"].to_pylist() == c_none.tables["trend"].to_pylist()
    assert c_full.tables["consumer_lag"].to_pylist() == c_none.tables["consumer_lag"].to_pylist()
    assert c_full.headline.to_pylist()[0]["lag_slo_share"] != c_up.headline.to_pylist()[0]["lag_slo_share"]


def test_a_file_published_while_its_day_is_rolled_up_makes_the_day_stale_not_fresh_without_its_rows(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector publishes a late file of the day after the roll-up listed the day's files for reading. The
    manifest must not name a file whose rows were not read: the day is stale, and the next run rolls it up with
    them (listed after the reading, it was fresh for good without them)."""
    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    day = W.days()[1]
    real = rollup.thresholds

    def thresholds_then_a_late_file(*a: Any, **k: Any) -> Any:
        _write(hist, "group_lag", day, [dict(r, time=T0 + DAY + 300.0, group_id="late") for r in _lag_rows()[:1]],
               name="part-late.parquet")
        return real(*a, **k)

    monkeypatch.setattr(rollup, "thresholds", thresholds_then_a_late_file)
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", day], spark=spark) == 0
    monkeypatch.undo()
    manifest = json.loads((store / "_days" / f"{day}.json").read_text())
    assert [f[0] for f in manifest["history_files"]["group_lag"]] == ["part-0.parquet"]
    assert rollup.fresh_days(rollup.Store(store), str(hist), [day]) == []
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", day], spark=spark) == 0
    assert rollup.fresh_days(rollup.Store(store), str(hist), [day]) == [day]
    rows = pq.read_table(store / "group_lag_days" / f"date={day}" / "rollup.parquet")
    assert "late" in rows["group_id"].to_pylist()


def test_a_day_spelt_another_way_is_rolled_up_under_the_name_reports_look_for(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Python 3.11 reads 20261117 and 2026-W47-2 as dates too; the store keys a day by 2026-11-17."""
    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    day = W.days()[1]
    assert day == "2026-11-17"
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", "20261117"], spark=spark) == 0
    assert f"rolled up 1 day ({day}..{day})" in capsys.readouterr().out
    assert rollup.fresh_days(rollup.Store(store), str(hist), [day]) == [day]
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", "2026-W47-2"],
                           spark=spark) == 0  # the same day again: forced, as --day is, under the same name
    assert sorted(p.name for p in (store / "_days").iterdir()) == [f"{day}.json"]
    assert {p.name for p in store.glob("*/date=*")} == {f"date={day}"}


def test_stored_days_are_read_with_the_schema_spark_would_infer_without_a_job_for_it(spark: Any,
                                                                                     tmp_path: Path) -> None:
    """`rollup.read` gives Spark each table's schema from a footer: the same schema and rows as Spark's own
    inference (which runs a Spark job per table to read that footer), and no job until a plan is run."""
    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store)], spark=spark, now=W.end + 3600) == 0
    s, days = rollup.Store(store), [W.days()[i] for i in (0, 1, 3)]
    tracker = spark.sparkContext.statusTracker()

    def last_job() -> int:
        return max(tracker.getJobIdsForGroup(), default=-1)

    before = last_job()
    got = rollup.read(spark, s, days)
    assert last_job() == before and got.keys() == set(rollup.TABLES)
    for name, df in got.items():
        inferred = spark.read.parquet(*[str(s.file(name, d)) for d in days])
        assert df.schema == inferred.schema, name
        assert sorted(map(tuple, df.collect())) == sorted(map(tuple, inferred.collect())), name
    assert last_job() > before and got["group_lag_days"].count() == 6
    assert rollup.read(spark, s, days[:1], tables=("topic_health_polls",)).keys() == {"topic_health_polls"}


def test_a_days_tables_are_written_by_spark_not_collected_to_the_driver(spark: Any, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """One day of a 100,000-partition fleet (~5 M roll-up rows) collected to the driver killed its 1 GB heap
    (docs/performance-log.md, "Step 18"). Now Spark's tasks write each table and the driver streams the part files
    into the store's file a batch at a time (`table_files`): the driver collects the day's thresholds only (a row
    per cluster), and the files hold what collecting gave (same schema, same rows), in row groups of `BATCH_ROWS`.
    Work directories of killed runs go once a day old; a live run's stays."""
    import os
    import time

    from spark_analytics import table_files

    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    d0 = W.days()[0]
    expected = rollup.partials(spark, rollup.day_frames(spark, str(hist), d0, rollup.SOURCES), [d0], 90.0)
    old, live = (store / f"{table_files.WORK_PREFIX}{name}" for name in ("killed", "live"))
    for d in (old, live):
        (d / "group_lag_hist").mkdir(parents=True)
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    collected: list[int] = []

    def counting(real: Any) -> Any:
        def counted(self: Any, *a: Any, **k: Any) -> Any:
            got = real(self, *a, **k)
            collected.append(len(got))
            return got
        return counted

    frames = type(spark.range(1))  # PySpark's classic DataFrame: the methods a collect runs
    for method in ("toArrow", "collect", "toPandas"):
        monkeypatch.setattr(frames, method, counting(getattr(frames, method)))
    monkeypatch.setattr(table_files, "BATCH_ROWS", 64)
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", d0], spark=spark) == 0
    monkeypatch.undo()
    s = rollup.Store(store)
    rows = s.manifest(d0)["rows"]
    assert sum(rows.values()) > 300 and sum(collected) == 1, collected  # the one cluster's thresholds
    for name in rollup.TABLES:
        got = pq.read_table(s.file(name, d0))
        assert got.schema == expected[name].schema and rows[name] == got.num_rows, name
        assert sorted(map(str, got.to_pylist())) == sorted(map(str, expected[name].to_pylist())), name
    assert pq.read_metadata(s.file("group_lag_hist", d0)).num_row_groups == -(-rows["group_lag_hist"] // 64) > 1
    assert not old.exists() and live.is_dir()
    assert [p.name for p in store.iterdir() if p.name.startswith(".")] == [live.name]


def test_a_killed_rollup_leaves_a_day_the_report_does_not_read(spark: Any, tmp_path: Path) -> None:
    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", W.days()[0]], spark=spark) == 0
    s = rollup.Store(store)
    assert rollup.fresh_days(s, str(hist), W.days()) == [W.days()[0]]
    manifest = json.loads(s.manifest_path(W.days()[0]).read_text())
    s.manifest_path(W.days()[0]).write_text(json.dumps({**manifest, "version": 1}))  # an older roll-up's day
    assert rollup.fresh_days(s, str(hist), W.days()) == []  # computed from the history, re-rolled by the next run
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store)], spark=spark, now=T0 + DAY) == 0
    assert rollup.fresh_days(s, str(hist), W.days()) == [W.days()[0]]
    s.manifest_path(W.days()[0]).unlink()  # what a run killed after its first file leaves
    assert rollup.fresh_days(s, str(hist), W.days()) == []
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", "2026-13-01"], spark=spark) == 2
    # nothing complete to roll up yet (a fresh collector): the directory exists all the same, for --rollups
    fresh = tmp_path / "fresh"
    assert rollup_job.main(["--history", str(hist), "--rollups", str(fresh)], spark=spark, now=T0) == 0
    assert [p.name for p in fresh.iterdir()] == ["_writer.lock"]  # the lease's file only (`take_store`)


def test_a_damaged_rollup_day_is_computed_from_the_history_named_and_rolled_up_again(
        spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    """What no run of ours leaves (a manifest that is not JSON, a file from another day, a file cut short) reads as
    not rolled up, with a warning naming the file, instead of failing the report at its first read."""
    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    d0, d1 = W.days()[:2]
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", d0, "--day", d1],
                           spark=spark) == 0
    s = rollup.Store(store)
    assert rollup.fresh_days(s, str(hist), W.days()) == [d0, d1]
    manifest, days, hists = s.manifest_path(d0), s.file("group_lag_days", d0), s.file("group_lag_hist", d0)
    assert pq.read_metadata(s.file("group_lag_hist", d1)).num_rows != pq.read_metadata(hists).num_rows
    kept = {f: f.read_bytes() for f in (manifest, days, hists)}
    assert pq.read_metadata(s.file("group_lag_days", d1)).num_rows == pq.read_metadata(days).num_rows
    damages = [(manifest, lambda: manifest.write_text('{"version": 2, "day"'), "not a manifest"),
               (manifest, lambda: manifest.write_text(json.dumps({"version": rollup.VERSION, "day": d0})),
                "no history_files"),  # JSON of the version, hand-made: not a KeyError in the report
               (hists, lambda: hists.write_bytes(s.file("group_lag_hist", d1).read_bytes()),
                "rows where the manifest recorded"),
               (days, lambda: days.write_bytes(s.file("group_lag_days", d1).read_bytes()),  # as many rows
                f"rows of {d1} to {d1} by its day column, not of {d0}"),
               (days, lambda: days.write_bytes(kept[days][: len(kept[days]) // 2]), "unreadable Parquet")]
    for damaged, damage, problem in damages:
        for f, b in kept.items():
            f.write_bytes(b)
        assert rollup.fresh_days(s, str(hist), W.days()) == [d0, d1]
        damage()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="spark_analytics.rollup"):
            assert rollup.fresh_days(s, str(hist), W.days()) == [d1]
            assert rollup.fresh_days(s, str(hist), W.days()) == [d1]  # asked again: no second warning
        warned = [r.getMessage() for r in caplog.records]
        assert len(warned) == 1 and str(damaged) in warned[0] and problem in warned[0], warned
    # pages damaged past an intact footer: only Spark's read finds it; the report then marks the file, reads its
    # day as not rolled up, and computes it from the history (which gives the figures of the roll-ups: the first
    # test), instead of stopping at the file
    for f, b in kept.items():
        f.write_bytes(b)
    damage_pages(hists)
    assert rollup.fresh_days(s, str(hist), W.days()) == [d0, d1]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        c = compute_with_retry(spark, str(hist), W, A.Options(rollups=str(store)), None)
    assert c.rollup_days == [d1] and c.tables["consumer_lag"].num_rows > 1
    assert f"{hists} does not read (" in caplog.text and "the report of 2026-W47 is computed again" in caplog.text
    assert f"roll-up file {hists}: does not read (" in caplog.text
    # and the next roll-up run writes it again (the history's only complete day at `now`)
    capsys.readouterr()
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store)], spark=spark, now=T0 + DAY) == 0
    assert f"rolled up 1 day ({d0}..{d0})" in capsys.readouterr().out
    assert rollup.fresh_days(s, str(hist), W.days()) == [d0, d1]
    s.file("topic_health_polls", d1).unlink()
    assert rollup.fresh_days(s, str(hist), W.days()) == [d0]
    assert rollup.file_problem(s.file("topic_health_polls", d1), d1, None) == "missing"
    assert rollup.file_problem(s.file("topic_health_polls", d0), d0, None) is None
    assert rollup.file_problem(s.file("topic_health_polls", d0), d1, None) == (  # by its time column
        f"rows of {d0}T00:00:00+00:00 to {d0}T23:50:00+00:00 by its time column, not of {d1}")


def test_a_day_that_fails_is_named_and_does_not_hold_back_the_days_after_it(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """A day whose history Spark cannot read for a reason no damaged file explains (here a file written by another
    tool, `lag_max` as text) fails, named, and the job goes on to the days after it. A file cut short (a restore)
    is left out of its day instead, which is rolled up without it, with a warning; the manifest lacks the file, so a
    later run (another process) finds the day stale and meets the file again, until it is moved or put back."""
    from collectors.outputs.history import files as history_files

    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    d0, d1, d3 = (W.days()[i] for i in (0, 1, 3))
    foreign = hist / "group_lag" / f"date={d1}" / "part-1.parquet"
    pq.write_table(pa.table({"cluster": ["c1"], "time": [T0 + DAY + 60.0], "group_id": ["g9"], "topic": ["t"],
                             "lag_max": ["12"]}), foreign)
    damaged = hist / "topic_health" / f"date={d3}" / "part-0.parquet"  # the day's polls
    whole = damaged.read_bytes()
    kept = [r for r in _health_rows() if r["time"] >= T0 + 3 * DAY][:4]  # and two of them again, in another file
    _write(hist, "topic_health", d3, kept, name="part-9.parquet")
    damage_pages(damaged)
    with caplog.at_level(logging.WARNING, logger="spark_analytics.rollup"):
        assert rollup_job.main(["--history", str(hist), "--rollups", str(store)], spark=spark, now=W.end + 3600) == 1
    out = capsys.readouterr()
    assert f"rolled up 2 days ({d0}..{d3})" in out.out
    assert f"rollup: {d1} failed: " in out.err and f"{foreign}" in out.err, out.err
    assert f"rollup: failed: 1 of 3 days ({d1}); the next run tries them again" in out.err
    assert f"{damaged} does not read (" in caplog.text and f"{d3} is computed again" in caplog.text
    s = rollup.Store(store)
    assert rollup.fresh_days(s, str(hist), W.days()) == [d0, d3]
    polls = pq.read_table(s.file("topic_health_polls", d3))
    assert sorted(set(polls.column("time").to_pylist())) == sorted({r["time"] for r in kept})  # part-9's only
    [(name, size, why)] = s.manifest(d3)["left_out"]["topic_health"]
    assert (name, size) == ("part-0.parquet", len(whole)) and why.split(": ")[0] in ("OSError", "ArrowInvalid")
    # another process has not met the file: the manifest's `left_out` makes it known (decoded once more), so the
    # day is not stale and the next run does not roll it up again
    history_files._DAMAGED.clear()
    assert rollup.fresh_days(s, str(hist), W.days()) == [d0]
    history_files._DAMAGED.clear()
    foreign.unlink()
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", d1], spark=spark) == 0
    capsys.readouterr()
    history_files._DAMAGED.clear()
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store)], spark=spark, now=W.end + 3600) == 0
    assert "nothing to do (3 days up to date" in capsys.readouterr().out
    # put back whole (the same size): read again, so the day is stale and rolled up with it
    history_files._DAMAGED.clear()
    damaged.write_bytes(whole)
    assert rollup.recall_left_out(s, str(hist), W.days()) == 0
    assert rollup.fresh_days(s, str(hist), W.days()) == [d0, d1]


def test_a_run_that_finds_the_store_taken_waits_and_then_does_only_what_is_left(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two roll-up runs at once (the daily cron job and the weekly report's own roll-up step) each rolled up every
    missing day, and each day's files were whichever run renamed last. Now a run takes the store's lease
    (``DIR/_writer.lock``, a real ``flock``) and judges the days only once it holds it: while another run holds
    it, it waits, and then finds that run's days done. Past ``--wait`` it gives up (exit 1) and writes nothing."""
    import os
    import threading

    from collectors.outputs.history.lease import WriterLease

    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    s, days, now = rollup.Store(store), [W.days()[i] for i in (0, 1, 3)], W.end + 3600
    other = WriterLease(store, writer="roll-up run")  # the other run: this process, another open file
    assert other.acquire()
    result: list[int] = []
    waiting = threading.Thread(target=lambda: result.append(rollup_job.main(
        ["--history", str(hist), "--rollups", str(store), "--wait", "120"], spark=spark, now=now)))
    waiting.start()
    err = ""
    for _ in range(600):
        err += capsys.readouterr().err
        if "waiting for it" in err or not waiting.is_alive():
            break
        threading.Event().wait(0.05)
    assert f"another roll-up run (pid {os.getpid()} on " in err and "waiting for it (up to 120 s)" in err, err
    for d in days:  # the other run's work, done while this one waits
        rollup.rollup_day(spark, str(hist), s, d)
    when = {d: s.manifest(d)["rolled_up_at"] for d in days}
    other.release()
    waiting.join(timeout=120)
    assert result == [0]
    assert "nothing to do (3 days up to date" in capsys.readouterr().out
    assert {d: s.manifest(d)["rolled_up_at"] for d in days} == when  # not rolled up a second time
    # held past the wait: exit 1, the holder named, nothing written; then the lease is free again
    (store / "_days" / f"{days[1]}.json").unlink()
    assert other.acquire()
    try:
        assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--wait", "0"], spark=spark,
                           now=now) == 1
    finally:
        other.release()
    out = capsys.readouterr()
    assert f"is still writing {store} after 0 s" in out.err and f"pid {os.getpid()}" in out.err, out.err
    assert "rolled up" not in out.out and rollup.fresh_days(s, str(hist), days) == [days[0], days[2]]
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--wait", "0"], spark=spark, now=now) == 0
    assert f"rolled up 1 day ({days[1]}..{days[1]})" in capsys.readouterr().out
    for bad in ("-1", "soon", "nan"):
        with pytest.raises(SystemExit) as exit_:
            rollup_job.parser().parse_args(["--wait", bad])
        assert exit_.value.code == 2 and f"{bad!r} is not a number of seconds >= 0" in capsys.readouterr().err


def test_a_remote_history_is_rolled_up_and_its_files_judged_as_a_local_ones_are(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A history on HDFS or S3 could be reported on but not rolled up ("is not a local directory", exit 2), and a
    report from roll-ups judged a remote history's days by their manifests alone: a late file never made its day
    stale. Now the job lists a remote history through Spark's Hadoop FileSystem API: the manifests record the same
    files and sizes as for the same history read locally, a file left out as damaged is recalled by the next run
    (Spark reads it again), and a late file makes its day stale. The history is on local disk under a ``file://``
    URI taken as remote: the one boundary moved (no HDFS or object store here); listing and reads go through the
    real Hadoop API."""
    from collectors.outputs.history import files as history_files
    from spark_analytics.last_week import inputs_of

    real = io.is_remote
    monkeypatch.setattr(io, "is_remote", lambda p: str(p).startswith("file://") or real(p))
    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    d0, d1, d3 = (W.days()[i] for i in (0, 1, 3))
    damaged = hist / "topic_health" / f"date={d3}" / "part-0.parquet"
    _write(hist, "topic_health", d3, [r for r in _health_rows() if r["time"] >= T0 + 3 * DAY][:4],
           name="part-9.parquet")
    damage_pages(damaged)
    uri = hist.as_uri()
    assert io.table_days(uri, "cluster") == io.table_days(str(hist), "cluster") == [d0, d1, d3]
    assert io.live_file_sizes(uri, "topic_health", T0, W.end) == io.live_file_sizes(str(hist), "topic_health", T0,
                                                                                        W.end)
    assert rollup_job.main(["--history", uri, "--rollups", str(store)], spark=spark, now=W.end + 3600) == 0
    assert f"rolled up 3 days ({d0}..{d3})" in capsys.readouterr().out
    s = rollup.Store(store)
    for d in (d0, d1, d3):  # as listed locally (but the damaged file, left out)
        by_path = {t: [f for f in files if f[0] != "part-0.parquet" or t != "topic_health" or d != d3]
                   for t, files in rollup.history_files(str(hist), d).items()}
        assert s.manifest(d)["history_files"] == by_path, d
    [(name, size, why)] = s.manifest(d3)["left_out"]["topic_health"]
    assert (name, size) == ("part-0.parquet", damaged.stat().st_size) and why
    # the next run is another process: it has not met the damaged file, and finds it again by the manifest
    io._REMOTE_DAMAGED.clear()
    history_files._DAMAGED.clear()
    assert rollup_job.main(["--history", uri, "--rollups", str(store)], spark=spark, now=W.end + 3600) == 0
    assert "nothing to do (3 days up to date" in capsys.readouterr().out
    # a late file: its day only is rolled up again
    late = [dict(r, time=T0 + DAY + 300.0, group_id="late") for r in _lag_rows()[:1]]
    _write(hist, "group_lag", d1, late, name="part-late.parquet")
    assert rollup.fresh_days(s, uri, W.days()) == [d0, d3]
    assert rollup_job.main(["--history", uri, "--rollups", str(store)], spark=spark, now=W.end + 3600) == 0
    assert f"rolled up 1 day ({d1}..{d1})" in capsys.readouterr().out
    c = compute(spark, uri, W, A.Options(rollups=str(store)))
    assert c.rollup_days == [d0, d1, d3]
    # what a week's report records of its inputs (to reuse it as next week's "last week") is listed too
    remote_inputs, local_inputs = (inputs_of(h, W, A.Options())["history_files"] for h in (uri, str(hist)))
    assert remote_inputs["cluster"] == local_inputs["cluster"] and len(remote_inputs["cluster"]) == 3
    assert c.headline.to_pylist()[0]["retention_loss_episodes"] == 1
    assert rollup_job.main(["--history", (tmp_path / "nowhere").as_uri(), "--rollups", str(store)], spark=spark) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_day_compacted_while_it_is_rolled_up_is_listed_again(spark: Any, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """The collector compacts the day that just ended at its first maintenance after midnight, when a cron run of
    the roll-up meets it: the files listed are deleted before Spark opens them. The day is listed again and rolled
    up from the compact file, with the figures of the files it replaced, instead of failing until the next night."""
    from collectors.outputs.history import HistoryWriter

    hist, store, clean = tmp_path / "history", tmp_path / "rollups", tmp_path / "clean"
    _history(hist)
    d1 = W.days()[1]
    day_dir = hist / "group_lag" / f"date={d1}"
    rows = pq.read_table(day_dir / "part-0.parquet")
    half = rows.num_rows // 2
    pq.write_table(rows.slice(0, half), day_dir / "part-0.parquet")  # two flushes, as the collector writes them
    pq.write_table(rows.slice(half), day_dir / "part-1.parquet")
    assert rollup_job.main(["--history", str(hist), "--rollups", str(clean), "--day", d1], spark=spark) == 0
    listed = rollup.day_data
    compacted: list[str] = []

    def compacted_after_listing(spark: Any, history: str, day: str, *a: Any, **k: Any) -> dict[str, Any]:
        frames = listed(spark, history, day, *a, **k)
        if day == d1 and not compacted:  # the collector's maintenance, between the listing and the read
            compacted.append(day)
            assert HistoryWriter(hist).compact("group_lag", d1)
        return frames

    monkeypatch.setattr(rollup, "day_data", compacted_after_listing)
    with caplog.at_level(logging.WARNING, logger="spark_analytics.rollup"):
        assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", d1], spark=spark) == 0
    assert compacted == [d1] and not (day_dir / "part-0.parquet").exists()
    assert f"a history file vanished while reading {d1} (compaction?); listing again" in caplog.text
    def rows_of(root: Path, table: str) -> list[str]:  # row order within a file is not part of the format
        return sorted(json.dumps(r, sort_keys=True) for r in pq.read_table(rollup.Store(root).file(table, d1))
                      .to_pylist())

    for table in rollup.TABLES:
        assert rows_of(store, table) == rows_of(clean, table), table
    assert rows_of(store, "group_lag_days")
    assert rollup.fresh_days(rollup.Store(store), str(hist), [d1]) == [d1]


@pytest.mark.parametrize(("now", "stands"), [
    ({"group_lag": [["a", 1]], "cluster": [["c", 3]]}, True),  # as rolled up
    ({"group_lag": [], "cluster": []}, True),  # removed by retention: the roll-up is the record
    ({}, True),  # the tables' directories gone too
    ({"group_lag": [], "cluster": [["c", 3]]}, True),  # a table's day removed, the other unchanged
    ({"group_lag": [["a", 1], ["late", 2]], "cluster": [["c", 3]]}, False),  # a late file
    ({"group_lag": [["compact", 1]], "cluster": [["c", 3]]}, False),  # compacted since
    ({"group_lag": [], "cluster": [["c", 3], ["late", 2]]}, False),  # one gone, the other changed
    ({"group_lag": [["a", 1]], "cluster": [["c", 3]], "lso_gap": [["new", 5]]}, False),  # rows it never saw
])
def test_a_rollup_stands_for_the_files_it_was_made_from_or_for_none(now: dict[str, Any], stands: bool) -> None:
    recorded = {"group_lag": [["a", 1]], "cluster": [["c", 3]], "lso_gap": []}
    assert rollup.made_from(recorded, now) is stands


@pytest.mark.parametrize(("now", "replaces", "same"), [
    ({"group_lag": [["compact-1", 9]], "cluster": [["c", 3]]}, {"compact-1": {"a", "b"}}, True),  # compacted
    ({"group_lag": [["compact-1", 9]], "cluster": []}, {"compact-1": {"a", "b"}}, True),  # ... one table retained
    ({"group_lag": [["b", 2], ["compact-1", 9]], "cluster": [["c", 3]]}, {"compact-1": {"a"}}, True),  # in part
    ({"group_lag": [["a", 1], ["b", 2]], "cluster": [["c", 3]]}, {}, True),  # as made (`made_from` says so too)
    ({"group_lag": [["compact-1", 9]], "cluster": [["c", 3]]}, {"compact-1": {"a", "b", "late"}}, False),  # a
    # late file merged in: rows it never saw
    ({"group_lag": [["compact-1", 9]], "cluster": [["c", 3]]}, {"compact-1": {"a"}}, False),  # b gone unreplaced
    ({"group_lag": [["compact-1", 9]], "cluster": [["c", 3]]}, {}, False),  # a footer that does not read
    ({"group_lag": [["a", 1], ["b", 2], ["compact-1", 9]], "cluster": [["c", 3]]}, {}, False),  # ... beside them
    ({"group_lag": [["late", 4]], "cluster": [["c", 3]]}, {}, False),  # a late file
    ({"group_lag": [["b", 2], ["compact-1", 9]], "cluster": [["c", 4]]}, {"compact-1": {"a"}}, False),  # resized
    ({"group_lag": [["compact-1", 9]], "cluster": [["c", 3]], "lso_gap": [["n", 1]]}, {"compact-1": {"a", "b"}},
     False),  # a table it never saw
])
def test_a_rollup_stands_for_its_files_compacted_since(now: dict[str, Any], replaces: dict[str, set[str]],
                                                       same: bool) -> None:
    """`rollup.compacted_since`: the files a compaction published in place of the recorded ones hold their rows
    exactly when the compact files supersede the recorded files gone and nothing else."""
    recorded = {"group_lag": [["a", 1], ["b", 2]], "cluster": [["c", 3]]}
    asked: list[tuple[str, str]] = []

    def footer(table: str, name: str) -> frozenset[str]:
        asked.append((table, name))
        return frozenset(replaces.get(name, ()))

    assert rollup.compacted_since(recorded, now, footer) is same
    assert all(name.startswith("compact-") for _, name in asked)  # only new compact files' footers are read


def test_a_rollups_manifest_names_only_the_files_it_read(spark: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest's files are listed before the day is read. A table's day removed by the collectors' retention
    between that listing and the read left the manifest naming files the roll-up never read; with them gone, the
    roll-up stood as the only record of rows it did not hold (`made_from`), and no run made it again. A file
    published between the two is read and not recorded (the day is rolled up again), as before."""
    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    d1 = W.days()[1]
    read = rollup.day_data

    def retention_after_listing(spark: Any, history: str, day: str, *a: Any, **k: Any) -> dict[str, Any]:
        health = hist / "topic_health" / f"date={day}"
        health.rename(hist / "topic_health" / f".deleting-date={day}")  # what retention does first
        _write(hist, "group_lag", day, [dict(_lag_rows()[0], time=T0 + DAY + 60.0, group_id="late")],
               name="part-late.parquet")
        return read(spark, history, day, *a, **k)

    monkeypatch.setattr(rollup, "day_data", retention_after_listing)
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", d1], spark=spark) == 0
    recorded = rollup.Store(store).manifest(d1)["history_files"]
    assert recorded["topic_health"] == []  # listed, never read
    assert [n for n, _ in recorded["group_lag"]] == ["part-0.parquet"] and recorded["cluster"]  # late: not listed
    assert rollup.Store(store).manifest(d1)["rows"]["group_lag_days"] == 3  # ... yet read
    # the day is stale (the late file is not recorded) and is rolled up again by the next run
    assert rollup.fresh_days(rollup.Store(store), str(hist), [d1]) == []


def test_a_day_compacted_again_after_a_late_file_still_holds_what_was_rolled_up_since(tmp_path: Path) -> None:
    """A late file after a day's first compaction is merged with that compact file by the next maintenance. The
    second compact file's ``kmon.replaces`` also names the first one's inputs and the repeats deleted with them, so
    judged by it the day was stale again though it held no new row. Its ``kmon.inputs`` names the files the merge
    read: exactly what a roll-up made after the late file recorded. One made before the late file stays stale."""
    from collectors.outputs.history import HistoryWriter
    from collectors.outputs.history.compaction import merged_schema
    from collectors.outputs.history.files import merged_names, replaced_names
    from spark_analytics.input_files import compacted_since, footers

    hist, d1 = tmp_path / "history", W.days()[1]
    day_dir = hist / "group_lag" / f"date={d1}"
    rows = [r for r in _lag_rows() if T0 + DAY <= r["time"] < T0 + 2 * DAY]
    _write(hist, "group_lag", d1, rows[:50], name="part-a.parquet")
    _write(hist, "group_lag", d1, rows[50:], name="part-b.parquet")
    (day_dir / "part-z-copy.parquet").write_bytes((day_dir / "part-a.parquet").read_bytes())  # a repeat
    listed = rollup.history_files(str(hist), d1)
    assert [n for n, _ in listed["group_lag"]] == ["part-a.parquet", "part-b.parquet"]  # the repeat read once
    first_day = footers(hist, lambda table: f"{table}/date={d1}")
    assert HistoryWriter(hist).compact("group_lag", d1)
    (first,) = day_dir.glob("compact-*.parquet")
    assert merged_names(first) == {"part-a.parquet", "part-b.parquet"}
    assert replaced_names(first) == {"part-a.parquet", "part-z-copy.parquet", "part-b.parquet"}
    assert compacted_since(listed, rollup.history_files(str(hist), d1), first_day)  # once: fresh (as before)

    _write(hist, "group_lag", d1, [dict(rows[0], group_id="late")], name="part-late.parquet")
    before_late, after_late = listed, rollup.history_files(str(hist), d1)  # a roll-up re-run for the late file
    _write(hist, "group_lag", d1, [dict(rows[1], group_id="late")], name="part-later.parquet")
    after_later = rollup.history_files(str(hist), d1)
    assert HistoryWriter(hist).compact("group_lag", d1)
    (second,) = day_dir.glob("compact-*.parquet")
    assert second != first and {"part-a.parquet", first.name} <= replaced_names(second)
    assert merged_names(second) == {first.name, "part-late.parquet", "part-later.parquet"}
    now = rollup.history_files(str(hist), d1)
    assert compacted_since(after_later, now, first_day)  # compacted twice, no new row: fresh
    assert not compacted_since(after_late, now, first_day)  # the later file's rows: stale
    assert not compacted_since(before_late, now, first_day)

    # a file compacted before ``kmon.inputs`` was written is judged by what it supersedes, as before
    legacy = day_dir / "compact-legacy.parquet"
    table = pq.read_table(second)
    pq.write_table(table.replace_schema_metadata(merged_schema(
        "group_lag", [table.schema], set(replaced_names(second))).metadata), legacy)
    second.unlink()
    assert merged_names(legacy) == replaced_names(legacy) and not compacted_since(
        after_later, rollup.history_files(str(hist), d1), first_day)


def test_the_reports_line_says_which_days_the_rollups_gave_and_warns_of_complete_days_they_did_not() -> None:
    """`rollup.coverage`: a complete day with rows and no fresh roll-up is a warning (the daily job is not
    keeping up; the figures are the same, only slower); today's is not; a day without rows is not counted; a day
    whose raw files retention removed counts as read from its roll-up."""
    days, store = W.days(), Path("/r")
    d0, d1, d2, d3 = days[:4]
    everything = rollup.coverage(W.label, days, days, days, store, "2026-12-01")
    assert everything == (f"{W.label}: 7 of 7 days with rows read from the roll-ups under /r", False)
    line, warn = rollup.coverage(W.label, days, [d0, d3], [d0, d1, d3], store, "2026-12-01")
    assert warn and line.startswith(f"{W.label}: 2 of 3 days with rows read") and f"from the history: {d1} (" in line
    assert "not over yet" not in line
    line, warn = rollup.coverage(W.label, days, [d0], [d0, d1, d2], store, d2)  # a report during the week
    assert warn and f"from the history: {d1} (" in line and line.endswith(f"; not over yet, from the history: {d2}")
    line, warn = rollup.coverage(W.label, days, [d0], [d0, d1], store, d1)
    assert not warn and line.endswith(f"1 of 2 days with rows read from the roll-ups under /r; not over yet, "
                                      f"from the history: {d1}")
    assert rollup.coverage(W.label, days, [d0], [], store, "2026-12-01") == (  # d0's history removed, rolled up
        f"{W.label}: 1 of 1 day with rows read from the roll-ups under /r", False)
    assert rollup.coverage(W.label, days, [], [], store, "2026-12-01") == (
        f"{W.label}: 0 of 0 days with rows read from the roll-ups under /r", False)


def test_four_week_trend_reads_the_rollups_of_older_weeks(spark: Any, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The trend reads the weeks before last from their roll-ups only, also once the history's retention removed
    their raw days (a big fleet keeps its raw history shorter than the trend's four weeks): the roll-up is then
    the record of the day, not a stale one, and `rollup --day` of such a day keeps it rather than rolling up
    nothing over it."""
    from collectors.outputs.history import HistoryWriter

    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    # the same three days again two weeks earlier: the trend reads that week from its roll-ups only
    early = A.Period.iso_week("2026-W45")
    _history_again(hist, early)
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store)], spark=spark, now=W.end + 3600) == 0
    # retention of 10 days removes W45's raw days
    assert HistoryWriter(hist, retention_days=10).apply_retention(now=W.end + 3600) == 3 * 3
    assert not list(hist.glob(f"*/date={early.days()[0]}"))
    gone = [early.days()[i] for i in (0, 1, 3)]
    assert rollup.fresh_days(rollup.Store(store), str(hist), early.days()) == gone
    kept = rollup.Store(store).file("group_lag_days", gone[0]).read_bytes()
    capsys.readouterr()
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", gone[0]], spark=spark) == 0
    out = capsys.readouterr()
    assert f"rollup: {gone[0]}: no history files left (removed by retention?); its roll-up is kept" in out.err
    assert "rollup: nothing to do (0 days up to date, 1 kept from their roll-ups alone under" in out.out
    assert rollup.Store(store).file("group_lag_days", gone[0]).read_bytes() == kept
    # A day one of whose tables' files are gone, the others there (retention mid-pass, a hand): `--day` or
    # `--force` keeps its roll-up, the only record of that table's day; so does the daily job once another table
    # changed. Before, only a day with no file left at all was kept: rolled up again, its consumer figures were
    # gone for good.
    part = W.days()[1]
    shutil.rmtree(hist / "group_lag" / f"date={part}")
    lag = rollup.Store(store).file("group_lag_days", part).read_bytes()
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", part], spark=spark) == 0
    out = capsys.readouterr()
    assert f"rollup: {part}: no history files left of group_lag (removed by retention?); its roll-up is kept" in out.err
    assert rollup.Store(store).file("group_lag_days", part).read_bytes() == lag
    assert rollup_job.plan(rollup.Store(store), str(hist), [part], force=True) == rollup_job.Plan([], {
        part: ["group_lag"]})
    late = hist / "topic_health" / f"date={part}" / "part-late.parquet"
    pq.write_table(pq.read_table(hist / "topic_health" / f"date={part}" / "part-0.parquet").slice(0, 1), late)
    assert part not in rollup.fresh_days(rollup.Store(store), str(hist), [part])
    assert rollup_job.plan(rollup.Store(store), str(hist), [part]) == rollup_job.Plan([], {part: ["group_lag"]})
    late.unlink()
    c = compute(spark, str(hist), W, A.Options(rollups=str(store)))
    rows = {r["week"]: r for r in c.tables["trend"].to_pylist()}
    assert set(rows) == {"2026-W45", "2026-W47"}
    assert rows["2026-W45"] == {**rows["2026-W47"], "week": "2026-W45"}  # the same days, two weeks apart
    r = rows["2026-W47"]
    assert r["days"] == 3 and r["polls"] == 3 * 144 and r["poll_interval_s"] == 600.0
    assert r["under_min_isr_minutes"] == 3 * 10 * 10.0 and r["offline_minutes"] == 10.0
    head = c.headline.to_pylist()[0]
    assert r["lag_slo_share"] == pytest.approx(head["lag_slo_share"]) and r["below_log_start_polls"] == 4
    assert r["under_min_isr_minutes"] == head["under_min_isr_minutes"]


def test_next_weeks_report_takes_last_weeks_headline_from_its_report_while_that_holds(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A weekly run computes one week: last week's headline is read from last week's report when that was made from
    the history files there now, with the same options; any change to either and last week is computed again."""
    from spark_analytics import layout, weekly_report

    hist, out = tmp_path / "history", tmp_path / "reports"
    _history(hist)
    following = A.Period.iso_week("2026-W48")
    _history_again(hist, following)
    store = tmp_path / "rollups"  # one day of three rolled up: the run says which, and warns of the others
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", W.days()[0]], spark=spark) == 0
    capsys.readouterr()
    assert weekly_report.main(["--history", str(hist), "--week", W.label, "--out", str(out), "--rollups",
                               str(store)], spark=spark) == 0
    said = capsys.readouterr()
    assert (f"weekly_report: {W.label}: 1 of 3 days with rows read from the roll-ups under {store}; from the "
            f"history: {W.days()[1]}, {W.days()[3]} (not rolled up") in said.err
    assert "computed in " in said.out and "roll-ups under" not in said.out
    last = layout.report_dir(out, "c1", W.label)
    stored = pq.read_table(last / layout.TABLES_DIR / "headline.parquet").to_pylist()
    assert json.loads((last / layout.INPUTS_FILE).read_text())["history_files"]["group_lag"] == [
        [f"group_lag/date={W.days()[d]}/part-0.parquet", (hist / "group_lag" / f"date={W.days()[d]}" /
                                                          "part-0.parquet").stat().st_size] for d in (0, 1, 3)]
    weeks: list[str] = []
    collect_week = weekly_report.collect_week

    def counted(spark: Any, frames: Any, period: A.Period, *a: Any, **k: Any) -> Any:
        weeks.append(period.label)
        return collect_week(spark, frames, period, *a, **k)

    monkeypatch.setattr(weekly_report, "collect_week", counted)
    c = compute(spark, str(hist), following, A.Options(), reports=out)
    assert weeks == [following.label] and c.previous_from_report
    assert c.previous_headline.to_pylist() == stored and stored[0]["polls"] == 3 * 144
    assert c.previous_tables is not None and c.previous_tables["incident_source"].num_rows == 1
    weeks.clear()
    again = compute(spark, str(hist), following, A.Options())  # no reports: computed, the same figures
    assert weeks == [following.label, W.label] and again.previous_headline.to_pylist() == stored
    assert [r["last_week"] for r in again.week_over_week.to_pylist()] == [
        r["last_week"] for r in c.week_over_week.to_pylist()]
    # what makes last week's report not hold (checked without Spark: `stored_previous` is what `compute` asks)
    assert weekly_report.stored_previous(out, str(hist), W, A.Options(), ["c1"]) is not None
    assert weekly_report.stored_previous(out, str(hist), W, A.Options(lag_slo_s=5.0), ["c1"]) is None
    assert weekly_report.stored_previous(out, str(hist), W, A.Options(), ["c1", "new"]) is None  # no report of it
    _write(hist, "group_lag", W.days()[1], [dict(r, group_id="late") for r in _lag_rows()[:1]], name="late.parquet")
    assert weekly_report.stored_previous(out, str(hist), W, A.Options(), ["c1"]) is None  # a late file
    (hist / "group_lag" / f"date={W.days()[1]}" / "late.parquet").unlink()
    assert weekly_report.stored_previous(out, str(hist), W, A.Options(), ["c1"]) is not None
    # the collectors compacted day 1 since (a compact file superseding its files, as their maintenance publishes
    # one; here of its one file): the same rows, so last week's report still holds (before, it was computed again)
    from collectors.outputs.history.schema import REPLACES_KEY

    day1 = hist / "group_lag" / f"date={W.days()[1]}"
    rows = pq.read_table(day1 / "part-0.parquet")

    def compacted(replaces: list[str]) -> None:
        meta = {**(rows.schema.metadata or {}), REPLACES_KEY: json.dumps(replaces).encode()}
        pq.write_table(rows.replace_schema_metadata(meta), day1 / "compact-1.parquet")

    compacted(["part-0.parquet"])
    (day1 / "part-0.parquet").unlink()
    assert weekly_report.stored_previous(out, str(hist), W, A.Options(), ["c1"]) is not None
    assert weekly_report.stored_previous(out, f"file://{hist}", W, A.Options(), ["c1"]) is not None  # its footer
    compacted(["part-0.parquet", "late.parquet"])  # a compaction that merged a file the report never read
    assert weekly_report.stored_previous(out, str(hist), W, A.Options(), ["c1"]) is None
    compacted(["part-0.parquet"])
    assert weekly_report.stored_previous(out, str(hist), W, A.Options(), ["c1"]) is not None
    (last / layout.INPUTS_FILE).unlink()  # what a run killed while writing last week's report leaves
    assert weekly_report.stored_previous(out, str(hist), W, A.Options(), ["c1"]) is None


def test_a_report_that_reads_little_starts_as_a_small_job(spark: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`rollup.input_bytes` counts what a run reads to aggregate: the roll-ups of the days rolled up, the history
    files of the others (or of the days gone stale); the report's JVM starts as a small job's when that is little
    (`weekly_report.small_job`)."""
    from spark_analytics.weekly_report import parse_args, small_job

    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    days = [W.days()[i] for i in (0, 1, 3)]
    raw = {d: sum(f.stat().st_size for t in rollup.SOURCES for f in (hist / t / f"date={d}").glob("*.parquet"))
           for d in days}
    assert all(raw.values())
    assert rollup.input_bytes(str(hist), W.days()) == sum(raw.values())
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store), "--day", days[0]], spark=spark) == 0
    s = rollup.Store(store)
    rolled = sum(s.file(t, days[0]).stat().st_size for t in rollup.TABLES)
    assert rollup.input_bytes(str(hist), W.days(), s) == rolled + raw[days[1]] + raw[days[2]]
    assert rollup.input_bytes("s3a://bucket/history", W.days(), s) is None  # not listed: not a small job

    def args(*more: str) -> Any:
        return parse_args(["--history", str(hist), "--week", W.label, "--out", str(tmp_path / "out"), *more])

    assert small_job(args()) and small_job(args("--rollups", str(store)))  # a few KB
    part = rolled + raw[days[1]] + raw[days[2]]
    for limit in (part, part - 1, sum(raw.values()), sum(raw.values()) - 1):  # each side of each total
        monkeypatch.setattr(rollup, "SMALL_JOB_BYTES", limit)
        from_history = sum(raw.values()) <= limit
        assert small_job(args()) is from_history and small_job(args("--rollups", str(store))) is (part <= limit)
        # exact percentiles read every poll: the history's size decides
        assert small_job(args("--rollups", str(store), "--exact-percentiles")) is from_history
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store)], spark=spark, now=W.end + 3600) == 0
    every = sum(s.file(t, d).stat().st_size for t in rollup.TABLES for d in days)
    assert rollup.input_bytes(str(hist), W.days(), s) == every
    monkeypatch.setattr(rollup, "SMALL_JOB_BYTES", every - 1)
    assert not small_job(args("--rollups", str(store)))  # big roll-ups: a big job all the same
    # a late file makes its day's history the input again
    _write(hist, "group_lag", days[2], [dict(r, group_id="late") for r in _lag_rows()[:1]], name="late.parquet")
    assert rollup.input_bytes(str(hist), W.days(), s) > every - sum(s.file(t, days[2]).stat().st_size
                                                                    for t in rollup.TABLES) + raw[days[2]]
    listed: list[str] = []  # each day's files listed once, the stale day's too (it was twice)
    history_files = rollup.history_files
    monkeypatch.setattr(rollup, "history_files", lambda h, d: listed.append(d) or history_files(h, d))
    rollup.input_bytes(str(hist), W.days(), s)
    assert sorted(listed) == sorted(W.days())


def _transactional(root: Path) -> dict[str, int]:
    """Open transactions, producers and LSO gaps at the `_history` polls (days 0, 1, 3) and one row on the last day
    of the week before; returns the epoch figures of ``tx-a`` the rows make, counted by hand."""
    rng = random.Random(5)
    txns: dict[int, list[dict[str, Any]]] = {}
    prods: dict[int, list[dict[str, Any]]] = {}
    gaps: dict[int, list[dict[str, Any]]] = {}

    def epoch_a(day: int, i: int) -> tuple[int, int]:  # tx-a's producer id and epoch at a poll
        if day == -1:
            return 100, 0
        if day == 0:
            return 100, 1 if i < 50 else 2  # +1 from last week's row (across midnight), +1 inside the day
        if day == 1:
            return (100, 4) if i < 70 else (200, 0)  # +2 across midnight; a new producer id: no bump
        return 200, 3  # +3 across the missing day 2

    for day in (-1, 0, 1, 3):
        for i in (143,) if day == -1 else range(144):
            t = T0 + day * DAY + i * 600
            pid, ep = epoch_a(day, i)
            txns.setdefault(day, []).append({
                "time": t, "transactional_id": "tx-a", "coordinator": 1, "state": "Ongoing", "producer_id": pid,
                "producer_epoch": ep, "timeout_ms": 60_000, "start_time": t - 5.0, "age_seconds": 5.0,
                "partitions": ["t-0"]})
            if (day, i) >= (0, 130) and (day, i) <= (1, 20):  # stuck across midnight
                start = T0 + 130 * 600 - 30.0
                txns[day].append({
                    "time": t, "transactional_id": "tx-b", "coordinator": 2,
                    "state": "Ongoing" if day == 0 else "PrepareAbort", "producer_id": 300, "producer_epoch": 7,
                    "timeout_ms": 60_000, "start_time": start, "age_seconds": t - start, "partitions": ["t-1"]})
            for part in range(3):
                hanging = part == 0 and ((day == 0 and i >= 140) or (day == 1 and i < 4))  # across midnight
                prods.setdefault(day, []).append({
                    "time": t, "topic": "t", "partition": part, "producer_id": 300 + part, "producer_epoch": 7,
                    "txn_start_offset": 1000 + part, "last_timestamp": t, "transactional_id": None if hanging else
                    "tx-b", "hanging": hanging})
                gap = rng.choice([1, 1, 2, 5, 40, rng.randint(1, 5000)])
                gaps.setdefault(day, []).append({"time": t, "topic": "t" if part else "u", "partition": part,
                                                 "lso_gap": gap, "high_watermark": 10_000 + gap,
                                                 "last_stable_offset": 10_000})
    for table, rows in (("transactions", txns), ("producers", prods), ("lso_gap", gaps)):
        for day, day_rows in rows.items():
            _write(root, table, A.Period(T0 + day * DAY, T0 + (day + 1) * DAY, "d").days()[0], day_rows)
    return {"epoch_bumps": 1 + 1 + 2 + 3, "epoch_increases": 4, "first_epoch": 1, "last_epoch": 3}


def test_the_transactional_rollups_give_the_figures_of_the_rows(spark: Any, tmp_path: Path) -> None:
    """Epoch bumps (inside a day, across midnight, across a day without rows, from the week before, a new producer
    id), a hanging transaction across midnight and exact LSO gap percentiles: the same from the roll-ups as from
    the rows, this week and last; a day of last week with rows but no roll-up is computed from the history."""
    hist, store = tmp_path / "history", tmp_path / "rollups"
    _history(hist)
    want = _transactional(hist)
    assert rollup_job.main(["--history", str(hist), "--rollups", str(store)], spark=spark, now=W.end + 3600) == 0
    s = rollup.Store(store)
    assert rollup.fresh_days(s, str(hist), W.days()) == [W.days()[i] for i in (0, 1, 3)]
    day0 = pq.read_table(s.file("transaction_epochs", W.days()[0])).to_pylist()
    assert [(r["transactional_id"], r["epoch_bumps"], r["first_epoch"], r["last_epoch"]) for r in
            sorted(day0, key=lambda r: r["transactional_id"])] == [("tx-a", 1, 1, 2), ("tx-b", 0, 7, 7)]
    assert pq.read_table(s.file("producers_hanging", W.days()[1])).num_rows == 4
    values = pq.read_table(s.file("lso_gap_values", W.days()[0]))
    assert sum(values["polls"].to_pylist()) == 3 * 144 and values.num_rows < 3 * 144
    c_raw = compute(spark, str(hist), W, A.Options())
    c_up = compute(spark, str(hist), W, A.Options(rollups=str(store)))
    assert c_up.rollup_days == [W.days()[i] for i in (0, 1, 3)]
    for t in ("epoch_bumps", "transactions_by_id", "hanging_transactions", "lso_gap", "lso_gap_cluster",
              "transactions", "transaction_summary"):
        raw, up = (sorted(c.tables[t].to_pylist(), key=repr) for c in (c_raw, c_up))
        assert up == raw and raw, t
        assert [(f.name, f.type) for f in c_up.tables[t].schema] == [(f.name, f.type) for f in c_raw.tables[t].schema]
    assert c_up.headline.to_pylist() == c_raw.headline.to_pylist()
    assert c_up.previous_headline.to_pylist() == c_raw.previous_headline.to_pylist()
    bumps = {r["transactional_id"]: r for r in c_up.tables["epoch_bumps"].to_pylist()}
    assert {k: bumps["tx-a"][k] for k in want} == want and bumps["tx-b"]["epoch_bumps"] == 0
    hanging = c_up.tables["hanging_transactions"].to_pylist()
    assert [(h["producer_id"], h["polls"]) for h in hanging] == [(300, 8)]
    stuck = c_up.tables["transactions"].to_pylist()
    assert [(r["transactional_id"], r["states"], r["last_state"]) for r in stuck] == [
        ("tx-b", ["Ongoing", "PrepareAbort"], "PrepareAbort")]
    p99 = {r["topic"]: r for r in c_up.tables["lso_gap"].to_pylist()}
    assert p99["t"]["partitions"] == 2 and p99["u"]["partitions"] == 1
    assert p99["t"]["partition_polls"] == 2 * 3 * 144


def test_a_day_rolled_up_before_a_column_was_added_reads_it_as_null(spark: Any, tmp_path: Path) -> None:
    """A store holds days rolled up before ``transaction_epochs`` kept ``first_v2``, ``last_v2`` and
    ``last_keeps_v1``, kept while their history lasts and for good after it (`made_from`). `rollup.read` takes the
    union of the days' footers, whichever day comes first, and adds a column no day has: the older day's rows read
    those columns as null (no Transaction V2 proof: counted as before), instead of the newer days losing them or the
    report failing."""
    from spark_analytics.aggregations.transactions import EPOCH_DAYS_COLUMNS, epoch_days

    hist = tmp_path / "history"
    _transactional(hist)
    tr = io.read_history(spark, str(hist), W.start - DAY, W.end, tables=("transactions",))["transactions"].df
    days = [W.days()[i] for i in (0, 1)]
    s = rollup.Store(tmp_path / "rollups")
    full = epoch_days(tr, W.start, W.start + 2 * DAY).toArrow()
    added = ("first_v2", "last_v2", "last_keeps_v1")
    assert tuple(rollup.ADDED_COLUMNS["transaction_epochs"]) == added
    assert all(full.schema.field(c).type == pa.bool_() for c in added)  # as `ADDED_COLUMNS` casts them
    for i, (d, table) in enumerate(zip(days, (full.drop_columns(list(added)), full), strict=True)):  # older first
        rows = table.filter(pa.compute.equal(table["day"], W.epoch_days[0] + i))
        s.file("transaction_epochs", d).parent.mkdir(parents=True)
        pq.write_table(rows, s.file("transaction_epochs", d))
    older = rollup.read(spark, s, days[:1], tables=("transaction_epochs",))["transaction_epochs"]
    assert tuple(older.columns) == EPOCH_DAYS_COLUMNS and older.filter(F.col("last_keeps_v1").isNull()).count() == 2
    for order in (days, days[::-1]):
        got = rollup.read(spark, s, order, tables=("transaction_epochs",))["transaction_epochs"]
        assert tuple(got.columns) == EPOCH_DAYS_COLUMNS
        by_day = {r["day"]: r for r in got.filter(F.col("transactional_id") == "tx-a").collect()}
        old, new = (by_day[W.epoch_days[0] + i] for i in (0, 1))
        assert all(old[c] is None for c in added) and new["first_v2"] is False and new["last_keeps_v1"] is False
        assert old["last_epoch"] == 2 and new["first_epoch"] == 4


def test_a_report_with_rollups_and_no_rows_to_roll_up_has_empty_tables(spark: Any, tmp_path: Path) -> None:
    """Polls but no table a roll-up is made from (nothing stored, nothing to compute): the report still runs, its
    roll-up-made tables empty with their schemas."""
    hist, store = tmp_path / "history", tmp_path / "rollups"
    store.mkdir()
    _write(hist, "cluster", W.days()[0], [{"time": T0 + i * 600, "reachable": True, "controller_id": 1,
                                          "thresholds": json.dumps({"lag_seconds_slo": 90.0})} for i in range(144)])
    c = compute(spark, str(hist), W, A.Options(rollups=str(store)))
    assert c.rollup_days == [] and c.headline.to_pylist()[0]["polls"] == 144
    for t in ("consumer_lag", "topic_replication", "lso_gap", "epoch_bumps", "hanging_transactions", "trend"):
        assert c.tables[t].num_rows == 0, t
    assert "lag_seconds_p99" in c.tables["consumer_lag"].column_names


def test_report_tables_come_in_the_order_of_their_columns_whatever_order_spark_returned() -> None:
    """`rollup.in_key_order`: every permutation of the same rows gives the same table, sorted by the scalar columns
    left to right with nulls last; list columns ride along."""
    rows = [{"cluster": "c2", "group_id": "a", "lag": 1.0, "states": ["Stable"]},
            {"cluster": "c1", "group_id": None, "lag": 2.0, "states": []},
            {"cluster": "c1", "group_id": "b", "lag": None, "states": ["Empty"]},
            {"cluster": "c1", "group_id": "b", "lag": 0.5, "states": None},
            {"cluster": "c1", "group_id": "a", "lag": 3.0, "states": ["Dead", "Empty"]}]
    want = [rows[4], rows[3], rows[2], rows[1], rows[0]]
    for order in itertools.permutations(rows):
        assert rollup.in_key_order(pa.Table.from_pylist(list(order))).to_pylist() == want
    one = pa.Table.from_pylist(rows[:1])
    assert rollup.in_key_order(one).equals(one) and rollup.in_key_order(one.slice(0, 0)).num_rows == 0


def test_one_lag_slo_for_every_cluster_counts_as_the_per_cluster_join_does(spark: Any, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A report from the history counts the consumer cells against one number where every polled cluster has the
    same lag SLO (`weekly_report.lag_slo`: no join over the 20 M polls of the bench week), and against a frame
    joined by cluster otherwise; both give the same tables."""
    from spark_analytics import weekly_report

    hist = tmp_path / "history"
    _history(hist)
    thresholds = json.dumps({"lag_seconds_slo": 90.0})
    for day in (0, 1, 3):  # a second cluster with the same recorded SLO and lags a day later
        lo, hi = T0 + day * DAY, T0 + (day + 1) * DAY
        _write(hist, "group_lag", W.days()[day], [dict(r, cluster="c2", time=r["time"] + 60) for r in _lag_rows()
                                                  if lo <= r["time"] + 60 < hi], name="part-c2.parquet")
        _write(hist, "cluster", W.days()[day], [{"cluster": "c2", "time": lo + i * 600 + 60, "reachable": True,
                                                 "controller_id": 1, "thresholds": thresholds} for i in range(143)],
               name="part-c2.parquet")
    number = compute(spark, str(hist), W, A.Options())
    assert weekly_report.lag_slo(spark, number.tables["thresholds"]) == 90.0
    monkeypatch.setattr(weekly_report, "lag_slo", lambda s, limits: s.createDataFrame(
        limits.select(["cluster", "lag_slo_s"])))
    joined = compute(spark, str(hist), W, A.Options())
    lag = number.tables["consumer_lag"].to_pylist()
    assert {r["cluster"] for r in lag} == {"c1", "c2"} and any(r["polls_within_slo"] < r["polls"] for r in lag)
    assert lag == joined.tables["consumer_lag"].to_pylist()
    assert number.headline.to_pylist() == joined.headline.to_pylist()
    monkeypatch.undo()
    per_cluster = pa.table({"cluster": ["c1", "c2"], "lag_slo_s": [90.0, 30.0]})
    assert weekly_report.lag_slo(spark, per_cluster).collect()[1]["lag_slo_s"] == 30.0  # a frame, by cluster


def test_cached_frames_are_dropped_and_a_failed_drop_neither_fails_nor_hides_the_real_error(
        spark: Any, caplog: pytest.LogCaptureFixture) -> None:
    """`rollup.release` (the clean-up behind `cached_all` and `compute`): real cached frames are unpersisted before
    it returns; a frame whose unpersist raises (a stand-in: the real failure, seen once in ~20 bench runs, cannot be
    caused on purpose) is logged, the frames after it are still dropped, and an error raised inside `cached_all`
    reaches the caller as itself, not as the clean-up's."""
    class Stuck:
        def unpersist(self, blocking: bool = False) -> None:
            raise RuntimeError("An error occurred while calling o120.unpersist.\n: org.apache.spark.SparkException: "
                               "Block rdd_465_0 does not exist.\n\tat org.apache.spark.storage.BlockInfoManager")

    a, b = spark.range(100).selectExpr("id % 7 AS k").cache(), spark.range(50).cache()
    assert a.count() == 100 and b.count() == 50 and a.is_cached and b.is_cached
    with caplog.at_level("WARNING", logger="spark_analytics.rollup"):
        rollup.release([a, Stuck(), b])
    assert not a.is_cached and not b.is_cached
    assert a.storageLevel.useMemory is False and b.storageLevel.useMemory is False
    assert ("could not drop a cached frame (RuntimeError: An error occurred while calling o120.unpersist. "
            "org.apache.spark.SparkException: Block rdd_465_0 does not exist.); the session keeps it") in caplog.text
    c = spark.range(10)
    with pytest.raises(ValueError, match="the real failure"), rollup.cached_all([c]) as held:
        assert held[0].is_cached
        held.append(Stuck())  # its clean-up fails too, after the error below
        raise ValueError("the real failure")
    assert not held[0].is_cached


def test_a_run_that_takes_the_store_removes_every_temp_a_killed_run_left(tmp_path: Path) -> None:
    """Only runs holding the store's lease write in its tables' day directories and ``_days/``, so once it is taken
    every temp there is a killed run's, whatever its age. Before, a temp was removed only by a later write of the
    same file an hour on: a day killed mid-write and redone by the next run (a cron retry, a report's
    ``--update-rollups``) kept its partial file for good. The work directories at the root (``.tmp-spark-*``) keep
    their day-old rule: a report's may still be in use."""
    s = rollup.Store(tmp_path / "rollups")
    day_dir = s.file("group_lag_hist", "2026-11-17").parent
    day_dir.mkdir(parents=True)
    s.manifest_path("2026-11-19").parent.mkdir(parents=True)
    leftovers = [day_dir / ".tmp-rollup.parquet.0123456789abcdef", s.manifest_path("2026-11-19").with_name(
        ".tmp-2026-11-19.json.cafe")]
    kept = [day_dir / rollup.FILE, s.manifest_path("2026-11-18"), s.root / ".tmp-spark-work1" / "part-0"]
    for p in leftovers + kept:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x" * 100)
    lease = rollup_job.take_store(s, 0.0)
    assert lease is not None
    try:
        assert [p for p in leftovers if p.exists()] == []
        assert all(p.exists() for p in kept)
    finally:
        lease.release()
