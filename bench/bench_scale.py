"""The weekly report's bench at several fleet sizes, side by side.

    .venv/bin/python -m bench.bench_scale [--root data/bench-scale] [--partitions 5000,25000] [--week 2026-W40]
        [--runs 3] [--no-cli]

Issue 17 asks the bench to run the week at 5,000 and at 25,000 partitions and print, for each, the time per stage,
rows per second and the ratio to DuckDB. `bench.bench_spark` does one size a run; this runs it once a size, each in
a process of its own (a JVM of its own, its output shown as it goes), on ``ROOT/partitions-N`` (generated there when
missing: about a minute each on 2 cores; 0.1 and 0.5 GB on disk), with ``--json``. Then it prints one table: each
stage's median, rows per second and ratio to DuckDB at each size, and how the stage's time grew from the first size
to the last against how the rows grew (1.0x: time in step with the rows; less: a fixed cost dominates).

Exit 1 if a size's bench failed, its figures differ from DuckDB's, or its directory holds another fleet size.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.synthetic_history import Shape


def sizes(text: str) -> list[int]:
    """``5000,25000`` -> ``[5000, 25000]``: fleet sizes `Shape.scaled` accepts, ascending, each once."""
    try:
        out = sorted({int(x.replace("_", "")) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of partition counts: {text!r}") from None
    if not out:
        raise argparse.ArgumentTypeError("no partition count given")
    for n in out:
        try:
            Shape.scaled(n)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return out


def check_fleet(where: Path, week: str, partitions: int) -> None:
    """Raise ValueError when `where` holds a week of history that is not the fleet of `partitions` (counted from
    its files' footers: ``topic_health`` rows a poll are topics): a directory another size left would be benched
    under the wrong label. Nothing to check where there is no history yet (the bench generates it)."""
    if not (where / "group_lag").is_dir():
        return
    from bench.bench_spark import fleet, week_rows
    from spark_analytics.period import Period

    topics, want = fleet(week_rows(where, Period.iso_week(week)))[0], Shape.scaled(partitions).topics
    if topics != want:
        raise ValueError(f"{where} holds a fleet of {topics:,} topics, not the {want:,} of {partitions:,} partitions: "
                         "remove it or give another --root")


def _cell(st: dict[str, Any] | None) -> str:
    if st is None:
        return "—"
    parts = [f"{st['median_s']:.1f} s"]
    if st.get("rows_per_s"):
        parts.append(f"{st['rows_per_s'] / 1e6:.2f} M rows/s")
    if st.get("vs_duckdb") is not None:
        parts.append(f"{st['vs_duckdb']:.1f}x DuckDB")
    return ", ".join(parts)


def table(results: dict[int, dict[str, Any]]) -> list[str]:
    """The side-by-side table of `results` (partitions -> `bench_spark --json`'s summary), as Markdown lines: a
    stage a row, in the order the benches ran them (a stage only some sizes ran shows "—" for the others); the last
    column, with two sizes or more, is the time's growth from the smallest to the largest divided by the rows'."""
    order = sorted(results)
    stages: list[str] = []
    for n in order:
        stages += [s for s in results[n]["stages"] if s not in stages]
    grow = len(order) > 1
    first, last = results[order[0]], results[order[-1]]
    head = ["stage", *(f"{n:,} partitions ({results[n]['rows'] / 1e6:.1f} M rows)" for n in order)]
    if grow:
        head.append(f"time's growth / rows' growth ({last['rows'] / first['rows']:.1f}x rows)")
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for s in stages:
        row = [s, *(_cell(results[n]["stages"].get(s)) for n in order)]
        if grow:
            a, b = first["stages"].get(s), last["stages"].get(s)
            row.append("—" if a is None or b is None or not a["median_s"] else
                       f"{b['median_s'] / a['median_s'] / (last['rows'] / first['rows']):.2f}x")
        lines.append("| " + " | ".join(row) + " |")
    for n in order:
        r = results[n]
        bad = [k for k, same in r["headlines_equal"].items() if not same]
        lines.append(f"{n:,} partitions: {r['topics']:,} topics, {r['group_topics']:,} group-topics; figures "
                     f"differing from DuckDB's: {r['figures_differing']}"
                     + (f"; headline DIFFERS: {', '.join(bad)}" if bad else "")
                     + f"; JVM peak {r['jvm_peak_rss_mb']:,} MB")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path("data/bench-scale"),
                    help="where each size's history lives (ROOT/partitions-N), generated when missing")
    ap.add_argument("--partitions", type=sizes, default=[5000, 25000],
                    help="the fleet sizes, comma-separated multiples of 25, >= 5,000; default 5000,25000")
    ap.add_argument("--week", default="2026-W40")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--no-cli", dest="cli", action="store_false", help="bench_spark --no-cli: no cold CLI runs")
    a = ap.parse_args(argv)
    results: dict[int, dict[str, Any]] = {}
    failed = []
    with tempfile.TemporaryDirectory(prefix="kmon-bench-scale-") as tmp:
        for n in a.partitions:
            where, out = a.root / f"partitions-{n}", Path(tmp) / f"{n}.json"
            print(f"==== {n:,} partitions: {where}", flush=True)
            try:
                check_fleet(where, a.week, n)
            except ValueError as e:
                print(f"bench_scale: {e}", file=sys.stderr)
                failed.append(n)
                continue
            rc = subprocess.run([sys.executable, "-m", "bench.bench_spark", "--dir", str(where), "--partitions",
                                 str(n), "--week", a.week, "--runs", str(a.runs), "--cores", str(a.cores), "--json",
                                 str(out), *([] if a.cli else ["--no-cli"])], check=False).returncode
            if not out.is_file():
                print(f"bench_scale: the bench at {n:,} partitions exited {rc} without a summary", file=sys.stderr)
                failed.append(n)
                continue
            results[n] = json.loads(out.read_text())
            if rc:
                failed.append(n)
    if results:
        print()
        print(f"the weekly report's bench by fleet size ({a.week}, {a.cores} cores, medians of {a.runs}):")
        print("\n".join(table(results)))
    if failed:
        print(f"bench_scale: failed or differing at {', '.join(f'{n:,}' for n in failed)} partitions", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
