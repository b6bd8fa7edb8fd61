"""The weekly report's command line: its options, and the checks that turn a bad one into exit code 2 with the
option named (`ArgumentError`). Apart from `weekly_report` so that the job's module holds the job."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_analytics import aggregations as A
from spark_analytics import io
from spark_analytics.session import CLASS_ARCHIVE_ENV, class_archive_arg


class ArgumentError(Exception):
    """A bad command-line argument; the message names it. Exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ArgumentError(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="weekly_report", description="Weekly Kafka reliability report (PySpark) from the history.")
    p.add_argument("--history", default="data/history",
                   help="history root (local path, or hdfs:// / s3a:// ... URI); default data/history")
    p.add_argument("--week", default=None, help="ISO week YYYY-Www (UTC); default: the last complete week")
    p.add_argument("--out", default="data/reports",
                   help="output directory on the driver's local filesystem (a path or file:// URI, not hdfs:// or "
                        "s3a://); default data/reports")
    p.add_argument("--master", default=None,
                   help="Spark master; default local[*], or whatever spark-submit was given")
    p.add_argument("--cluster", action="append", default=None, help="only this cluster (repeatable)")
    p.add_argument("--lag-slo-seconds", type=float, default=None,
                   help="consumer lag SLO in seconds; default: the collector's lag_seconds_slo as recorded in the "
                        f"history, else its default ({A.DEFAULT_LAG_SLO_S:g})")
    p.add_argument("--txn-grace-seconds", type=float, default=None,
                   help="a transaction is stuck when open longer than its timeout + this; default: the collector's "
                        f"txn_timeout_grace_s as recorded in the history, else its default ({A.DEFAULT_TXN_GRACE_S:g})")
    p.add_argument("--poll-interval-seconds", type=float, default=None,
                   help="override the poll interval derived from the data (median gap between polls)")
    pct = p.add_mutually_exclusive_group()
    pct.add_argument("--exact-percentiles", action="store_true",
                     help="exact interpolated lag percentiles from every poll (reads raw group_lag rows; slower) "
                          "instead of the histograms' (within 1 %%)")
    pct.add_argument("--approx-percentiles", action="store_true",
                     help="percentile_approx (accuracy 10,000) from every poll instead of the histograms")
    p.add_argument("--rollups", default=None,
                   help="daily roll-up directory (python -m spark_analytics.rollup): days rolled up from the "
                        "history files there now are read from it, the others computed from the history")
    p.add_argument("--update-rollups", action="store_true",
                   help="first roll up into --rollups (created if missing) the complete days of the four weeks the "
                        "report reads that are not rolled up or stale there, in this run's Spark session, as "
                        "kafka-monitor-rollup would: a weekly job then starts one JVM, not two. Never waits for "
                        "another roll-up run: the days it holds are computed from the history (same figures)")
    p.add_argument("--rollups-wait", type=float, default=None, metavar="SECONDS",
                   help="how long to wait for a roll-up run writing --rollups before reading it (the report holds the "
                        "store's lease shared while it reads, so no run replaces a day under it); then it reads the "
                        "store as it stands; default 900, 0 with --update-rollups (which never waits)")
    p.add_argument("--bucket-seconds", type=int, default=None,
                   help="time bucket of the charts; default: ~400 points over the data's time span")
    p.add_argument("--class-archive", default=os.environ.get(CLASS_ARCHIVE_ENV) or None, metavar="PATH",
                   help="the driver JVM's class-data sharing archive: the first run writes it (~190 MB, ~10 s more), "
                        f"later runs start ~2 s faster from it; default ${CLASS_ARCHIVE_ENV}, else none")
    p.add_argument("--verbose", action="store_true", help="Spark warnings and full tracebacks")
    return p


@dataclass
class Args:
    history: str
    period: A.Period
    out: Path
    master: str | None
    clusters: list[str] | None
    opts: A.Options
    verbose: bool
    class_archive: Path | None = None
    update_rollups: bool = False
    rollups_wait_s: float | None = None  # None: `rollup_job.READ_WAIT_S`


def parse_args(argv: Sequence[str] | None, now: float | None = None) -> Args:
    a = parser().parse_args(argv)
    if a.week is None:
        period = A.Period.last_complete_week(time.time() if now is None else now)
    else:
        try:
            period = A.Period.iso_week(a.week)
        except ValueError as e:
            raise ArgumentError(f"argument --week: {e}") from None
        try:  # the report reads the three weeks before too (last week, the trend): at the ends of the calendar
            earlier = period.previous().previous().previous()  # they are no dates
            period.days()
        except (ValueError, OverflowError):
            raise ArgumentError(f"argument --week: {a.week!r} is too near the ends of the calendar: the report "
                                "reads its days and the three weeks before it") from None
        del earlier
    if a.lag_slo_seconds is not None and a.lag_slo_seconds < 0:
        raise ArgumentError("argument --lag-slo-seconds: must be >= 0")
    if a.txn_grace_seconds is not None and a.txn_grace_seconds < 0:
        raise ArgumentError("argument --txn-grace-seconds: must be >= 0")
    if a.poll_interval_seconds is not None and a.poll_interval_seconds <= 0:
        raise ArgumentError("argument --poll-interval-seconds: must be > 0")
    if a.rollups_wait is not None and not 0 <= a.rollups_wait < float("inf"):
        raise ArgumentError("argument --rollups-wait: must be a number of seconds >= 0")
    if a.bucket_seconds is not None and a.bucket_seconds < 1:
        raise ArgumentError("argument --bucket-seconds: must be >= 1")
    if not io.is_remote(a.history) and not Path(a.history.removeprefix("file://")).is_dir():
        raise ArgumentError(f"argument --history: {a.history!r} is not a directory")
    if io.is_remote(a.out):  # Path("hdfs:///x") would quietly become a local directory named "hdfs:"
        raise ArgumentError(f"argument --out: {a.out!r}: the driver writes the report to a local directory "
                            "(history may be a remote URI, the output may not); copy it afterwards if needed")
    out = Path(a.out.removeprefix("file://"))
    if out.exists() and not out.is_dir():
        raise ArgumentError(f"argument --out: {a.out!r} exists and is not a directory")
    if a.update_rollups and a.rollups is None:
        raise ArgumentError("argument --update-rollups: needs --rollups DIR, the store to update")
    store = None if a.rollups is None else Path(a.rollups.removeprefix("file://"))
    made_later = a.update_rollups and store is not None and not store.exists()  # the update makes the directory
    if store is not None and (io.is_remote(a.rollups) or not (store.is_dir() or made_later)):
        raise ArgumentError(f"argument --rollups: {a.rollups!r} is not a local directory")
    mode = A.EXACT if a.exact_percentiles else A.APPROX if a.approx_percentiles else A.HISTOGRAM
    opts = A.Options(lag_slo_s=a.lag_slo_seconds, percentiles=mode,
                     txn_grace_s=a.txn_grace_seconds, poll_interval_s=a.poll_interval_seconds,
                     bucket_s=a.bucket_seconds, rollups=a.rollups)
    return Args(a.history, period, out, a.master, a.cluster, opts, a.verbose,
                class_archive_arg(a.class_archive, ArgumentError), a.update_rollups, a.rollups_wait)
