"""``weekly_report --update-rollups``: the weekly job rolls up, in its own Spark session, the days of its four weeks
the daily job left (`rollup_job.update_for_report`), with the same figures as two jobs one after the other, and never
waits for or fails on the store."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from collectors.outputs.history.lease import WriterLease
from spark_analytics import aggregations as A
from spark_analytics import rollup, rollup_job, weekly_report
from spark_analytics.report_args import ArgumentError, parse_args
from tests.support.spark_history import spark_session
from tests.unit.test_rollup import W, _history, _history_again

EARLY = A.Period.iso_week("2026-W45")  # a week of the four-week trend before last week


@pytest.fixture(scope="session")
def spark() -> Any:
    return spark_session()


def _week(root: Path) -> list[str]:
    """`_history`'s three days in W, and the first of them in EARLY; returns the four days, oldest first."""
    _history(root)
    _history_again(root, EARLY)
    for table in root.iterdir():  # one day of EARLY is enough to be in the trend, and each day rolled up costs
        for i in (1, 3):
            shutil.rmtree(table / f"date={EARLY.days()[i]}")
    return [EARLY.days()[0]] + [W.days()[i] for i in (0, 1, 3)]


def _summary(out: Path) -> dict[str, Any]:
    doc = json.loads((out / "c1" / W.label / "summary.json").read_text())
    return {k: v for k, v in doc.items() if k not in ("generated_at", "as_of_epoch", "rollup_days")}


def _report(spark: Any, hist: Path, out: Path, *more: str) -> int:
    return weekly_report.main(["--history", str(hist), "--week", W.label, "--out", str(out), *more], spark=spark)


def test_the_weekly_job_rolls_up_the_days_it_reads_in_its_own_session(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hist, store = tmp_path / "history", tmp_path / "rollups"  # the store does not exist yet: the first weekly run
    days = _week(hist)
    assert _report(spark, hist, tmp_path / "one", "--rollups", str(store), "--update-rollups") == 0
    out = capsys.readouterr().out
    assert f"weekly_report: rolled up 4 days ({days[0]}..{days[-1]}) into {store} in " in out, out
    assert f"{W.label}: 3 of 3 days with rows read from the roll-ups under {store}" in out, out
    # the days the history has, of the four weeks the report reads (the trend's older weeks too), and no others
    assert sorted(p.stem for p in (store / "_days").iterdir()) == days
    assert rollup.fresh_days(rollup.Store(store), str(hist), days) == days
    trend = pq.read_table(tmp_path / "one" / "c1" / W.label / "tables" / "trend.parquet").to_pylist()
    assert {r["week"] for r in trend} == {EARLY.label, W.label}
    # the figures of the report from the history alone (roll-ups made apart from a report: test_rollup.py)
    assert _report(spark, hist, tmp_path / "raw") == 0
    assert _summary(tmp_path / "one")["headline"] == _summary(tmp_path / "raw")["headline"]
    # the next week's run finds nothing to do
    capsys.readouterr()
    assert rollup_job.update_for_report(spark, str(hist), str(store), days, "2100-01-01").done == []
    assert f"the roll-ups of the report's days are up to date under {store}" in capsys.readouterr().out


def test_a_store_another_run_holds_is_not_waited_for(spark: Any, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    hist, store = tmp_path / "history", tmp_path / "rollups"
    _week(hist)
    store.mkdir()
    other = WriterLease(store, writer="roll-up run")  # the daily job, still at work
    assert other.acquire()
    try:
        assert _report(spark, hist, tmp_path / "out", "--rollups", str(store), "--update-rollups") == 0
    finally:
        other.release()
    said = capsys.readouterr()
    assert f"another roll-up run (pid {os.getpid()} on " in said.err and "not waiting" in said.err, said.err
    # nor before its reads: the store is read as it stands (its days being written have no manifest yet)
    assert f"is still writing {store} after 0 s; reading the store as it stands" in said.err, said.err
    assert "rolled up" not in said.out and not (store / "_days").exists()
    assert f"{W.label}: 0 of 3 days with rows read from the roll-ups" in said.err  # the usual warning
    assert _summary(tmp_path / "out")["headline"]["under_min_isr_minutes"] == 3 * 10 * 10.0


def test_a_store_that_cannot_be_written_leaves_the_days_to_the_history(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hist = tmp_path / "history"
    _week(hist)
    in_the_way = tmp_path / "file"
    in_the_way.write_text("not a directory")
    assert rollup_job.update_for_report(spark, str(hist), str(in_the_way / "rollups"), W.days(), "2100-01-01") is None
    assert "cannot be written" in capsys.readouterr().err


def test_a_history_that_cannot_be_listed_fails_the_update_not_the_report(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def unreachable(history: str) -> list[str]:
        raise OSError("namenode did not answer")

    store = tmp_path / "rollups"
    monkeypatch.setattr(rollup, "history_days", unreachable)  # a remote history's listing, failing
    assert rollup_job.update_for_report(spark, str(tmp_path), str(store), W.days(), "2100-01-01") is None
    assert "--update-rollups failed: OSError: namenode did not answer" in capsys.readouterr().err
    lease = WriterLease(store, writer="roll-up run")  # released: the next run is not kept out
    assert lease.acquire()
    lease.release()


def test_update_rollups_needs_a_store(tmp_path: Path) -> None:
    base = ["--history", str(tmp_path), "--week", W.label]
    with pytest.raises(ArgumentError, match="--update-rollups: needs --rollups"):
        parse_args([*base, "--update-rollups"])
    missing = str(tmp_path / "not-yet")
    with pytest.raises(ArgumentError, match=r"--rollups: .* is not a local directory"):
        parse_args([*base, "--rollups", missing])
    assert parse_args([*base, "--rollups", missing, "--update-rollups"]).update_rollups  # the update makes it
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ArgumentError, match=r"--rollups: .* is not a local directory"):
        parse_args([*base, "--rollups", str(tmp_path / "a-file"), "--update-rollups"])
    assert not parse_args(base).update_rollups
