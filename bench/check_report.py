"""A weekly report already written, its headline figures checked against the DuckDB reference over its history.

    .venv/bin/python -m bench.check_report --history DIR --report OUT [--week 2026-W40] [--cores 2]

`bench_spark` computes the report itself before it cross-checks it: from the raw history twice (the whole report,
then the headline's inputs alone), then every day's roll-up and the report from them. At the fleet issue 17 names
(100,000 partitions polled every 30 s: ~486 M rows) that is more than an hour of a 2-core machine. This checks a
report the CLI wrote instead (``python -m spark_analytics.weekly_report --history DIR [--rollups R] --out OUT``,
the week as a weekly job computes it): it reads the report's ``headline``, ``thresholds``, ``incident_kinds`` and
``data_lost`` tables and its summary's ``messages_lost``, and runs only DuckDB's reference over the same history
(`bench_spark.duckdb_headline`, its exact lag percentiles a slice of the group-topics at a time above
`bench_spark.LAG_SLICE_ROWS` rows). It prints each figure beside DuckDB's, "ok" or "DIFFERS"
(`bench_spark.cross_check`), DuckDB's time and peak memory; it exits 1 if a figure differs, 2 if the report is not
there.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from bench.bench_spark import cross_check, duckdb_headline, duckdb_reference, lag_slices, table_rows
from collectors.model.wording import count_of, plural
from spark_analytics import aggregations as A


def report_tables(out: Path, week: str) -> list[Path]:
    """The ``tables`` directories of the reports of `week` under `out`, one a cluster."""
    return sorted(p.parent for p in out.glob(f"*/{week}/tables/headline.parquet"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--history", type=Path, required=True, help="the history the report was computed from")
    ap.add_argument("--report", type=Path, required=True, help="the report's --out directory")
    ap.add_argument("--week", default="2026-W40")
    ap.add_argument("--cores", type=int, default=2, help="DuckDB's threads; default 2")
    a = ap.parse_args(argv)
    period = A.Period.iso_week(a.week)
    found = report_tables(a.report, a.week)
    if len(found) != 1:  # the reference reads one cluster's history: the synthetic fleet's, or a single cluster's
        print(f"check_report: {a.report} holds {len(found)} reports of {a.week} "
              f"({', '.join(str(p) for p in found) or 'none'}); one cluster's report is checked", file=sys.stderr)
        return 2
    tables = found[0]
    read = {name: pq.read_table(tables / f"{name}.parquet").to_pylist() if (tables / f"{name}.parquet").exists()
            else [] for name in ("headline", "thresholds", "incident_kinds", "data_lost")}
    summary = tables.parent / "summary.json"
    lost = json.loads(summary.read_text()).get("messages_lost") if summary.exists() else None
    slices = lag_slices(table_rows(a.history, period, "group_lag"))
    print(f"report {tables.parent}; DuckDB over {a.history}, {a.cores} threads, the lag percentiles in "
          f"{plural(slices, 'slice')} of the group-topics", flush=True)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    with duckdb_reference(a.cores) as con:
        duck = duckdb_headline(con, a.history, period)
    took = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"DuckDB headline in {took:.1f}s, peak RSS {peak / 1024:.0f} MB (+{(peak - before) / 1024:.0f} MB)")
    print("cross-check of headline figures (the report vs DuckDB SQL):")
    differing = cross_check(read["headline"][0] if read["headline"] else {}, read["thresholds"],
                            read["incident_kinds"], duck, read["data_lost"], lost)
    print("every figure equal" if not differing
          else f"{plural(differing, 'figure')} {count_of(differing, 'DIFFERS', 'DIFFER')}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
