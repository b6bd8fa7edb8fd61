"""The DuckDB reference of bench/bench_spark.py at sizes that do not fit one query, and bench/check_report.py.

Above `LAG_SLICE_ROWS` rows the reference computes its exact lag percentiles a slice of the group-topics at a
time (the whole query spilled more than 43 GB at 486 M rows). Sliced or not, every figure must be the same, and the
same as computed here in Python (numpy's linear percentile is DuckDB's `quantile_cont`): otherwise a cross-check
at scale would compare the report against a different yardstick. `check_report` reads a written report's tables
and says "DIFFERS" (exit 1) when one of its figures is not DuckDB's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench import bench_spark, check_report
from collectors.outputs.history.schema import SECONDS_TABLES
from spark_analytics import aggregations as A

W = A.Period.iso_week("2026-W47")
SLO = 300.0  # the collector's default lag SLO: no thresholds recorded


def _put(root: Path, table: str, rows: list[dict[str, Any]]) -> None:
    """`rows` as one file of the week's first day (times as epoch seconds, schema version 3)."""
    schema = SECONDS_TABLES[table]
    base = {"cluster": "c1", "schema_version": 3}
    cols = {f.name: pa.array([(base | r).get(f.name) for r in rows], type=f.type) for f in schema}
    d = root / table / "date=2026-11-16"
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols, schema=schema), d / f"part-{table}-a.parquet")


def _history(root: Path) -> list[dict[str, Any]]:
    """40 polls 30 s apart of 7 group-topics, each with lags of its own, and a row without a topic."""
    polls = [W.start + 30.0 * i for i in range(40)]
    _put(root, "cluster", [{"time": t, "reachable": True, "controller_id": 1} for t in polls])
    rng = np.random.default_rng(17)
    lag = [{"time": t, "group_id": f"g{g}", "topic": f"t{g % 2}", "lag_max": int(rng.integers(0, 10 ** (g + 1))),
            "lag_seconds_max": None if (g, i) == (1, 3) else float(rng.uniform(0, 100 * (g + 1))),
            "status": ("OK", "WARN", "ERR")[(g + i) % 3], "below_log_start": 0}
           for i, t in enumerate(polls) for g in range(7)]
    lag.append({"time": polls[0], "group_id": "g0", "topic": None, "lag_max": 10 ** 9, "lag_seconds_max": 1e9})
    _put(root, "group_lag", lag)
    return lag


class Recorded:
    """A DuckDB connection that keeps the SQL it ran."""

    def __init__(self, con: Any) -> None:
        self.con, self.sql = con, []

    def execute(self, sql: str) -> Any:
        self.sql.append(sql)
        return self.con.execute(sql)


def test_the_lag_figures_are_the_same_in_slices_and_equal_to_python(tmp_path: Path) -> None:
    lag = _history(tmp_path)
    rows = len(lag)
    assert bench_spark.table_rows(tmp_path, W, "group_lag") == rows
    assert bench_spark.lag_slices(rows) == 1 and bench_spark.lag_slices(0) == 1
    assert bench_spark.lag_slices(rows, rows) == 1 and bench_spark.lag_slices(rows, rows - 1) == 2
    assert bench_spark.lag_slices(rows, 10) == -(-rows // 10) == 29  # more slices than group-topics: some empty

    whole = Recorded(duckdb.connect())
    one = bench_spark.duckdb_headline(whole, tmp_path, W)
    sliced = Recorded(duckdb.connect())
    many = bench_spark.duckdb_headline(sliced, tmp_path, W, slice_rows=10)
    assert sum("hash(group_id, topic)" in q for q in whole.sql) == 0
    assert sum("hash(group_id, topic)" in q for q in sliced.sql) == 29
    assert many == one

    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in lag:
        if r["topic"] is not None:
            groups.setdefault((r["group_id"], r["topic"]), []).append(r)
    assert len(groups) == 7

    def p99(rs: list[dict[str, Any]], col: str) -> float:
        return float(np.percentile([r[col] for r in rs if r[col] is not None], 99))

    known = [r for rs in groups.values() for r in rs if r["lag_seconds_max"] is not None]
    want = {"worst_lag_seconds_p99": max(p99(rs, "lag_seconds_max") for rs in groups.values()),
            "worst_lag_messages_p99": max(p99(rs, "lag_max") for rs in groups.values()),
            "lag_slo_share": sum(r["lag_seconds_max"] <= SLO for r in known) / len(known),
            "groups_breaching_slo": sum(any((r["lag_seconds_max"] or 0) > SLO for r in rs) for rs in groups.values()),
            "warn_minutes": sum(r["status"] == "WARN" for rs in groups.values() for r in rs) * 30 / 60,
            "err_minutes": sum(r["status"] == "ERR" for rs in groups.values() for r in rs) * 30 / 60}
    assert 0 < want["lag_slo_share"] < 1 and 0 < want["groups_breaching_slo"] < 7
    assert {k: one[k] for k in want} == pytest.approx(want)


def _report(out: Path, headline: dict[str, Any], kinds: dict[str, int],
            lost: list[dict[str, Any]] | None = None, messages_lost: int | None = None) -> None:
    tables = out / "c1" / "2026-W47" / "tables"
    tables.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"cluster": "c1", **headline}]), tables / "headline.parquet")
    pq.write_table(pa.Table.from_pylist([{"cluster": "c1", "lag_slo_s": SLO, "txn_grace_s": A.DEFAULT_TXN_GRACE_S}]),
                   tables / "thresholds.parquet")
    pq.write_table(pa.table({"kind": pa.array(list(kinds), pa.string()),
                             "opened": pa.array(list(kinds.values()), pa.int64())}), tables / "incident_kinds.parquet")
    if lost is not None:
        pq.write_table(pa.Table.from_pylist(lost, pa.schema([("kind", pa.string()), ("subject", pa.string()),
                                                             ("events", pa.int64()), ("messages", pa.int64())])),
                       tables / "data_lost.parquet")
    if messages_lost is not None:
        (tables.parent / "summary.json").write_text(json.dumps({"messages_lost": messages_lost}))


def test_check_report_says_ok_only_when_every_figure_is_duckdbs(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    hist = tmp_path / "history"
    _history(hist)
    duck = bench_spark.duckdb_headline(duckdb.connect(), hist, W)
    figures = {k: duck[k] for k in bench_spark.CROSS_CHECKED if k in duck}
    assert figures["polls"] == 40 and figures["worst_lag_messages_p99"] > 0
    args = ["--history", str(hist), "--week", "2026-W47"]

    _report(tmp_path / "same", figures, {})
    assert check_report.main([*args, "--report", str(tmp_path / "same")]) == 0
    said = capsys.readouterr().out
    assert "every figure equal" in said and "DIFFERS" not in said and "1 slice of the group-topics" in said

    # a p99 off by 2 % (the histogram's bound is 1 %) and an incident DuckDB did not see
    off = dict(figures, worst_lag_messages_p99=figures["worst_lag_messages_p99"] * 1.02)
    _report(tmp_path / "off", off, {"broker": 1})
    assert check_report.main([*args, "--report", str(tmp_path / "off")]) == 1
    said = capsys.readouterr().out
    assert said.count("DIFFERS") == 2 and "2 figures DIFFER\n" in said
    assert [ln.split()[0] for ln in said.splitlines() if ln.endswith("DIFFERS") or "DIFFERS " in ln] == [
        "worst_lag_messages_p99", "incidents"]

    assert check_report.main([*args, "--report", str(tmp_path / "none")]) == 2
    # two clusters' reports: the reference reads one cluster's history, so it says which and checks none
    (tmp_path / "off" / "c2").symlink_to(tmp_path / "off" / "c1")
    assert check_report.main([*args, "--report", str(tmp_path / "off")]) == 2
    assert "holds 2 reports of 2026-W47" in capsys.readouterr().err


def test_check_report_compares_the_loss_ledger_each_loss_once(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The report's ledger per kind (entries and messages, from its ``data_lost`` table) and its summary's messages
    lost against DuckDB's, which counts a leader change's loss recorded again (a collector killed between its ledger
    write and its checkpoint) once. A report that counted the record again DIFFERS."""
    hist = tmp_path / "history"
    _history(hist)
    _put(hist, "loss_events", [
        *[{"time": W.start + t, "kind": kind, "topic": "t0", "partition": 0, "group_id": group, "epoch_before": 5,
           "epoch_after": 7, "offset": 900, "messages": n, "evidence": "x"}
          for t in (300, 360) for kind, group, n in (("truncation", None, 40), ("unclean_election", None, None),
                                                     ("offset_beyond_log_end", "g0", 25))],
        {"time": W.start + 400, "kind": "retention_skipped", "topic": "t1", "partition": 0, "group_id": "g1",
         "messages": 7, "evidence": "y"}])
    duck = bench_spark.duckdb_headline(duckdb.connect(), hist, W)
    assert duck["losses_by_kind"] == {"truncation": (1, 40), "unclean_election": (1, None),
                                      "offset_beyond_log_end": (1, 25), "retention_skipped": (1, 7)}
    figures = {k: duck[k] for k in bench_spark.CROSS_CHECKED if k in duck}
    args = ["--history", str(hist), "--week", "2026-W47"]
    once = [{"kind": "truncation", "subject": "t0-0", "events": 1, "messages": 40},
            {"kind": "unclean_election", "subject": "t0-0", "events": 1, "messages": None},
            {"kind": "offset_beyond_log_end", "subject": "g0", "events": 1, "messages": 25},
            {"kind": "retention_skipped", "subject": "g1", "events": 1, "messages": 7}]
    _report(tmp_path / "same", figures, {}, once, 47)
    assert check_report.main([*args, "--report", str(tmp_path / "same")]) == 0
    said = capsys.readouterr().out
    assert "ledger messages: truncation" in said and "messages_lost" in said and "DIFFERS" not in said

    twice = [dict(r, events=2, messages=80) if r["kind"] == "truncation" else r for r in once]
    _report(tmp_path / "twice", figures, {}, twice, 87)
    assert check_report.main([*args, "--report", str(tmp_path / "twice")]) == 1
    said = capsys.readouterr().out
    assert [ln.split(" spark ")[0].strip() for ln in said.splitlines() if ln.endswith("DIFFERS")] == [
        "ledger entries: truncation", "ledger messages: truncation", "messages_lost"]
    assert "3 figures DIFFER" in said


def _epochs(root: Path, levels: list[int | None] | None, keeps: list[bool | None] | None = None) -> None:
    """One producer's epoch rising at every poll of a day and a half, across the week's start; the cluster's
    transaction.version at each poll (None for `levels`: files from before the column existed); `keeps`: the
    collector's ``keeps_v1`` at each poll."""
    times = [-30.0, 0.0, 30.0, 60.0, 90.0, 120.0, 86_370.0, 86_430.0, 86_460.0]
    keeps = keeps or [None] * len(times)
    _put(root, "transactions", [
        {"time": W.start + t, "transactional_id": "a", "state": "Ongoing", "producer_id": 7, "producer_epoch": i,
         "keeps_v1": k} for i, (t, k) in enumerate(zip(times, keeps, strict=True))])
    rows = [{"time": W.start + t, "reachable": True, "controller_id": 1} for t in times]
    if levels is not None:
        _put(root, "cluster", [r | {"transaction_version": v} for r, v in zip(rows, levels, strict=True)])
        return
    schema = pa.schema([f for f in SECONDS_TABLES["cluster"] if f.name != "transaction_version"])
    d = root / "cluster" / "date=2026-11-16"
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({f.name: pa.array([({"cluster": "c1", "schema_version": 3} | r).get(f.name)
                                                for r in rows], type=f.type) for f in schema}, schema=schema),
                   d / "part-cluster-a.parquet")


def test_the_reference_counts_no_epoch_bump_into_or_out_of_a_transaction_v2_poll(tmp_path: Path) -> None:
    """As the report (`transactions._epoch_polls`): with Transaction V2 every transaction end bumps the epoch, so
    a rise into or out of a poll at level 2 is not a bump, unless out of an epoch the producer had proved to keep
    V1's rules at. Of the eight rises from the week's first poll on, the three between polls at level 0 or unknown
    count; older history, without the column, counts every rise."""
    _epochs(tmp_path / "v2", [None, 0, 0, 2, 2, 2, 2, 0, 0])
    assert bench_spark.duckdb_headline(duckdb.connect(), tmp_path / "v2", W)["epoch_bumps"] == 3
    # out of a poll where the producer had proved it keeps V1's rules (an older client), a rise counts: three more
    _epochs(tmp_path / "v1-proved", [None, 0, 0, 2, 2, 2, 2, 0, 0], [None, None, None, True, True, False, True, None,
                                                                     None])
    assert bench_spark.duckdb_headline(duckdb.connect(), tmp_path / "v1-proved", W)["epoch_bumps"] == 6
    _epochs(tmp_path / "old", None)
    assert bench_spark.duckdb_headline(duckdb.connect(), tmp_path / "old", W)["epoch_bumps"] == 8
