"""bench/bench_floor.py compares Spark and DuckDB step by step; its ratios mean something only if both engines
compute the same thing at each step. On a small history with the cases that could part them (lag 0 in the zero
bucket, null lag seconds, a poll without a topic, polls outside the week, values on either side of a bucket edge),
both engines' group counts equal the count computed here in Python with `histogram.bucket_of`, and their cells are
the same cells, bucket for bucket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from bench import bench_floor
from collectors.outputs.history.schema import SECONDS_TABLES
from spark_analytics import aggregations as A
from spark_analytics.aggregations import histogram as hist
from tests.support.spark_history import spark_session

W = A.Period.iso_week("2026-W47")


def _put(root: Path, rows: list[dict[str, Any]]) -> None:
    """`rows` as one ``group_lag`` file of the week's first day (times as epoch seconds, schema version 3)."""
    schema = SECONDS_TABLES["group_lag"]
    base = {"cluster": "c1", "schema_version": 3, "status": "OK", "state": "Stable", "members": 1}
    cols = {f.name: pa.array([(base | r).get(f.name) for r in rows], type=f.type) for f in schema}
    d = root / "group_lag" / "date=2026-11-16"
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols, schema=schema), d / "part-1-a.parquet")


def test_both_engines_count_the_same_groups_at_every_step(tmp_path: Path) -> None:
    edge = hist.GAMMA ** 40  # a bucket's upper edge: a value just above it falls in the next bucket
    lags = [0, 1, 5, 5, 6, 1000, int(edge), int(edge) + 1, None]
    secs = [0.0, None, 2.5, 2.5, 2.6, edge, edge * (1 + 1e-9), 700.0, 3.0]
    rows = [{"time": W.start + 30.0 * i, "group_id": f"g{i % 3}", "topic": "t", "lag_max": lag, "lag_seconds_max": s,
             "status": "WARN" if i % 2 else "OK"} for i, (lag, s) in enumerate(zip(lags, secs, strict=True))]
    rows += [{"time": W.start + 500.0, "group_id": "g0", "topic": None, "lag_max": 9, "lag_seconds_max": 9.0},
             {"time": W.start - 30.0, "group_id": "g9", "topic": "t", "lag_max": 9, "lag_seconds_max": 9.0},
             {"time": W.end, "group_id": "g9", "topic": "t", "lag_max": 9, "lag_seconds_max": 9.0}]
    _put(tmp_path, rows)

    def b(v: float | None) -> int | None:
        return None if v is None else hist.bucket_of(v)

    inside = [r for r in rows if r["topic"] is not None and W.start <= r["time"] < W.end]
    by_names = {(r["group_id"], r["topic"]) for r in inside}
    by_cells = {(r["group_id"], r["topic"], b(r["lag_max"]), b(r["lag_seconds_max"])) for r in inside}
    assert len(by_names) == 3 and len(by_cells) == 9  # every bucket edge case its own cell
    assert b(edge) != b(edge * (1 + 1e-9))
    want = {bench_floor.STEPS[2]: len(by_names), bench_floor.STEPS[3]: len(by_cells),
            bench_floor.STEPS[4]: len(by_cells)}

    con = duckdb.connect()
    duck = {step: con.execute(sql).fetchall()[0][0]
            for step, sql in bench_floor.duckdb_steps(tmp_path, W, 600.0).items() if step in bench_floor.COUNTED}
    spark = spark_session()
    steps = bench_floor.spark_steps(spark, tmp_path, W, 600.0)
    ours = {step: steps[step]() for step in bench_floor.COUNTED[:2]}
    ours[bench_floor.STEPS[4]] = bench_floor.spark_cells(spark, tmp_path, W, 600.0).count()
    assert duck == want and ours == want
    cells = bench_floor.duckdb_cells(tmp_path, W, 600.0)
    assert set(con.execute(f"SELECT group_id, topic, b1, b2 FROM ({cells})").fetchall()) == by_cells
    assert {(r.group_id, r.topic, r.lag_bucket, r.lag_seconds_bucket)
            for r in bench_floor.spark_cells(spark, tmp_path, W, 600.0).collect()} == by_cells
    steps[bench_floor.STEPS[4]]()  # the timed cells step runs to the end (every column, the noop sink)
