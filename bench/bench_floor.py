"""Spark's floor on the raw history: the one pass every report from the history needs, step by step, beside DuckDB.

    .venv/bin/python -m bench.bench_floor [--dir DIR] [--week 2026-W40] [--runs 5] [--cores 2]

Issue 17 asks for the report's headline from the raw history within 5x of DuckDB's. Whatever else the report
does, it reads every ``group_lag`` poll once and groups them into the consumer cells (`consumers.lag_cells`: per
group-topic and pair of histogram buckets; 78 % of the bench week's rows). This bench times that pass built up
one step at a time, in both engines, over the same live files (the bench week: `bench.bench_spark` generates it):

1. read the numbers (``sum(lag_max)``, ``max(time)``);
2. read the three names as well (``cluster``, ``group_id``, ``topic``: the sum of their lengths);
3. group the polls by the names (the group-topics);
4. group them by the names and the two histogram buckets (the cells' keys, nothing aggregated);
5. the consumer cells, every column: in Spark `consumers.lag_cells` itself, as the report runs it (written to
   Spark's ``noop`` sink, so every aggregate is computed and nothing is collected); in DuckDB the same SQL.

Each step is timed ``--runs`` times after one untimed warm-up (warm medians: the floor, not a cold JVM's start).
A Spark step is built as a new DataFrame for every run: the same DataFrame run twice reuses its shuffle output and
times ~0.05 s. Beside the steps, DuckDB's whole headline (`bench_spark.duckdb_headline`, every figure the bench
cross-checks): the yardstick the issue's ratios divide by. The group counts of steps 3-5 must agree between the
engines (the steps compute the same thing), else the bench exits 1. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.bench_spark import duckdb_files, duckdb_headline, duckdb_reference
from spark_analytics import aggregations as A
from spark_analytics import io
from spark_analytics.aggregations import histogram as hist

STEPS = ("read the numbers", "read the three names too", "group by the names",
         "group by the names and the two buckets", "the consumer cells, every column")
COUNTED = STEPS[2:]
"""The steps whose group counts both engines print and must agree on."""


def duck_bucket(col: str) -> str:
    """`histogram.bucket` in DuckDB SQL (null stays null; values <= 0 in `histogram.ZERO_BUCKET`)."""
    return (f"CASE WHEN {col} IS NULL THEN NULL WHEN {col} <= 0 THEN {hist.ZERO_BUCKET} "
            f"ELSE ceil(ln({col}::DOUBLE) / {hist.LOG_GAMMA!r})::INTEGER END")


def duckdb_source(root: Path, period: A.Period) -> str:
    """The week's live ``group_lag`` polls with a topic, as a DuckDB subquery (times as epoch seconds)."""
    files = io.list_live_files(None, str(root), "group_lag", period.start, period.end)
    return (f"(SELECT * FROM ({duckdb_files('group_lag', files)}) "
            f"WHERE time >= {period.start} AND time < {period.end} AND topic IS NOT NULL)")


CELL_KEYS = f"cluster, group_id, topic, {duck_bucket('lag_max')} AS b1, {duck_bucket('lag_seconds_max')} AS b2"


def duckdb_cells(root: Path, period: A.Period, slo_s: float) -> str:
    """`consumers.lag_cells` in DuckDB SQL: a row per group-topic and pair of buckets (``b1``, ``b2``)."""
    return f"""SELECT {CELL_KEYS}, count(*) AS polls, count_if(lag_seconds_max <= {slo_s}) AS within,
                      count_if(status = 'WARN') AS warn, count_if(status = 'ERR') AS err,
                      count_if(below_log_start > 0) AS below, max(lag_max::DOUBLE) AS lag_max,
                      max(lag_seconds_max) AS lag_seconds_max, max(time) AS last_time,
                      arg_max(state, time) AS last_state, arg_max(members, time) AS last_members
               FROM {duckdb_source(root, period)} GROUP BY ALL"""


def duckdb_steps(root: Path, period: A.Period, slo_s: float) -> dict[str, str]:
    """Each step as one DuckDB query; steps 3-5 return their group count first."""
    src = duckdb_source(root, period)
    return {
        STEPS[0]: f"SELECT sum(lag_max), max(time) FROM {src}",
        STEPS[1]: f"SELECT sum(length(cluster) + length(group_id) + length(topic)) FROM {src}",
        STEPS[2]: f"SELECT count(*) FROM (SELECT cluster, group_id, topic, count(*) FROM {src} GROUP BY ALL)",
        STEPS[3]: f"SELECT count(*) FROM (SELECT {CELL_KEYS}, count(*) FROM {src} GROUP BY ALL)",
        # every column summed, so that no aggregate can be left out of the plan
        STEPS[4]: f"""SELECT count(*), sum(polls + within + warn + err + below), max(lag_max), max(lag_seconds_max),
                             max(last_time), max(last_state), max(last_members)
                      FROM ({duckdb_cells(root, period, slo_s)})""",
    }


def _polls(spark: Any, root: Path, period: A.Period) -> Any:
    """The week's ``group_lag`` polls, a new plan each call (the same DataFrame run twice reuses its shuffle)."""
    return io.read_history(spark, str(root), period.start, period.end, tables=["group_lag"])["group_lag"].df


def spark_steps(spark: Any, root: Path, period: A.Period, slo_s: float) -> dict[str, Callable[[], Any]]:
    """Each step as a function that builds a new plan and runs it; steps 3 and 4 return their group count."""
    from pyspark.sql import functions as F

    from spark_analytics.aggregations.common import between

    def polls() -> Any:
        return _polls(spark, root, period).filter(between(period.start, period.end) & F.col("topic").isNotNull())

    def groups(*cols: Any) -> int:
        return polls().groupBy(*cols).count().select(F.count(F.lit(1))).collect()[0][0]

    def cells() -> None:  # every column computed (the noop sink), nothing collected
        spark_cells(spark, root, period, slo_s).write.format("noop").mode("overwrite").save()

    buckets = (hist.bucket("lag_max"), hist.bucket("lag_seconds_max"))
    return {
        STEPS[0]: lambda: polls().select(F.sum("lag_max"), F.max("time")).collect(),
        STEPS[1]: lambda: polls().select(
            F.sum(F.length("cluster") + F.length("group_id") + F.length("topic"))).collect(),
        STEPS[2]: lambda: groups("cluster", "group_id", "topic"),
        STEPS[3]: lambda: groups("cluster", "group_id", "topic", *buckets),
        STEPS[4]: cells,
    }


def spark_cells(spark: Any, root: Path, period: A.Period, slo_s: float) -> Any:
    """Step 5 in Spark: `consumers.lag_cells` over the week's polls as the report runs it (one cell set), a new
    plan each call."""
    from spark_analytics.aggregations import consumers as C

    return C.lag_cells(_polls(spark, root, period), period.start, period.end, slo_s, day=0)


def timed(fn: Callable[[], Any], runs: int) -> tuple[float, list[float], Any]:
    """Median of `runs` timed calls after one untimed warm-up, the times, and the last result."""
    result = fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/kmon-bench-week"), help="the bench week (bench_spark)")
    ap.add_argument("--week", default="2026-W40")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cores", type=int, default=2)
    a = ap.parse_args(argv)
    if not (a.dir / "group_lag").is_dir():
        ap.error(f"{a.dir} has no group_lag history: generate the bench week first (python -m bench.bench_spark "
                 f"--dir {a.dir})")
    period = A.Period.iso_week(a.week)
    slo_s = A.DEFAULT_LAG_SLO_S

    duck: dict[str, tuple[float, list[float], Any]] = {}
    with duckdb_reference(a.cores) as con:
        for step, sql in duckdb_steps(a.dir, period, slo_s).items():
            duck[step] = timed(lambda sql=sql: con.execute(sql).fetchall(), a.runs)
        head = timed(lambda: duckdb_headline(con, a.dir, period), a.runs)
        rows = con.execute(f"SELECT count(*) FROM {duckdb_source(a.dir, period)}").fetchone()[0]

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from spark_analytics.session import build_session

    spark = build_session(f"local[{a.cores}]", app_name="kmon-bench-floor")
    sp: dict[str, tuple[float, list[float], Any]] = {}
    for step, fn in spark_steps(spark, a.dir, period, slo_s).items():
        sp[step] = timed(fn, a.runs)
    sp[STEPS[4]] = (*sp[STEPS[4]][:2], spark_cells(spark, a.dir, period, slo_s).count())  # counted untimed
    spark.stop()

    print(f"{a.dir}, {a.week}: {rows:,} group_lag polls with a topic; {a.cores} cores; median of "
          f"{a.runs} warm runs")
    print(f"DuckDB's whole headline (every cross-checked figure): {head[0]:.2f} s "
          f"(runs {', '.join(f'{x:.2f}' for x in head[1])})")
    print("| step | Spark | DuckDB | Spark / DuckDB | Spark / DuckDB's whole headline |")
    print("| --- | --- | --- | --- | --- |")
    for step in STEPS:
        s, d = sp[step][0], duck[step][0]
        print(f"| {step} | {s:.2f} s | {d:.2f} s | {s / d:.1f}x | {s / head[0]:.1f}x |")
    agree = True
    for step in COUNTED:
        s_n, d_n = sp[step][2], duck[step][2][0][0]
        agree &= s_n == d_n
        print(f"groups, {step}: Spark {s_n:,}, DuckDB {d_n:,}{'' if s_n == d_n else '  DIFFER'}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
