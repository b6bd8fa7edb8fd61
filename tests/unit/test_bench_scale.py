"""bench.bench_scale: the sizes it accepts, the fleet it checks a directory holds, and the side-by-side table it
prints from bench_spark's ``--json`` summaries (built here with bench_spark's own `stage`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from bench import bench_scale
from bench import synthetic_history as S
from bench.bench_spark import stage


def test_sizes_are_fleet_sizes_the_generator_makes() -> None:
    assert bench_scale.sizes("25000,5000") == [5000, 25000]
    assert bench_scale.sizes("5_000, 5000") == [5000]
    for bad, said in (("abc", "not a list"), ("", "no partition"), ("4000", "at least 5,000"), ("5010", "multiple")):
        with pytest.raises(argparse.ArgumentTypeError, match=said):
            bench_scale.sizes(bad)


def test_a_directory_of_another_fleet_size_is_refused(tmp_path: Path) -> None:
    bench_scale.check_fleet(tmp_path / "none", "2026-W40", 25000)  # no history yet: the bench generates it
    S.generate(tmp_path, "2026-W40", S.Shape(interval_s=3600.0))  # 5,000 partitions, 200 topics, hourly polls
    bench_scale.check_fleet(tmp_path, "2026-W40", 5000)
    with pytest.raises(ValueError, match=r"200 topics, not the 1,000 of 25,000 partitions"):
        bench_scale.check_fleet(tmp_path, "2026-W40", 25000)


def _summary(rows: int, scale: float, extra: bool = False, differing: int = 0, same: bool = True) -> dict[str, Any]:
    duck = [1.0 * scale, 1.2 * scale, 1.1 * scale]
    stages = {"duckdb headline": stage(duck, rows),
              "whole report": stage([30.0 * scale, 29.0 * scale], rows, 1.1 * scale),
              "headline only": stage([19.0 * scale], rows, 1.1 * scale), "roll up one day": stage([7.0], rows / 7)}
    if extra:
        stages["CLI from the roll-ups, as it chooses"] = dict(stage([20.0], None, 1.1), process_s=25.0)
    return {"rows": rows, "topics": rows // 128_000, "group_topics": rows // 25_600, "stages": stages,
            "figures_differing": differing, "headlines_equal": {"from the roll-ups": same}, "jvm_peak_rss_mb": 1733}


def test_the_table_puts_each_stage_of_each_size_side_by_side() -> None:
    small, big = _summary(25_600_000, 1.0, extra=True), _summary(128_000_000, 5.0, differing=1, same=False)
    lines = bench_scale.table({25000: big, 5000: small})
    assert lines[0] == ("| stage | 5,000 partitions (25.6 M rows) | 25,000 partitions (128.0 M rows) | time's growth / "
                        "rows' growth (5.0x rows) |")
    rows = {ln.split(" | ")[0].lstrip("| "): ln for ln in lines[2:] if ln.startswith("|")}
    assert list(rows) == ["duckdb headline", "whole report", "headline only", "roll up one day",
                          "CLI from the roll-ups, as it chooses"]
    # median 29.5 s over 25.6 M rows: 0.87 M rows/s, 26.8x DuckDB's 1.1 s; five times the time for five times the rows
    assert rows["whole report"].endswith("| 29.5 s, 0.87 M rows/s, 26.8x DuckDB | 147.5 s, 0.87 M rows/s, 26.8x DuckDB "
                                         "| 1.00x |")
    # the same time at five times the rows: a fixed cost
    assert rows["roll up one day"].endswith("| 7.0 s, 0.52 M rows/s | 7.0 s, 2.61 M rows/s | 0.20x |")
    assert rows["CLI from the roll-ups, as it chooses"].endswith("| 20.0 s, 18.2x DuckDB | — | — |")
    notes = [ln for ln in lines if not ln.startswith("|")]
    assert notes[0] == ("5,000 partitions: 200 topics, 1,000 group-topics; figures differing from DuckDB's: 0; "
                        "JVM peak 1,733 MB")
    assert "figures differing from DuckDB's: 1; headline DIFFERS: from the roll-ups" in notes[1]


def test_one_size_has_no_growth_column() -> None:
    lines = bench_scale.table({5000: _summary(25_600_000, 1.0)})
    assert lines[0] == "| stage | 5,000 partitions (25.6 M rows) |" and lines[1] == "| --- | --- |"
