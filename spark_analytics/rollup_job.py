"""The roll-up job: which days to roll up, under the store's lease, a day at a time.

    python -m spark_analytics.rollup --history PATH --rollups DIR [--day YYYY-MM-DD ...] [--force]
    kafka-monitor-rollup ...

Two callers share it: the daily job's command line (`main`), and the weekly report's ``--update-rollups``
(`update_for_report`), which rolls up in the report's own Spark session the days the report reads that the daily job
left: a weekly job then starts one JVM instead of two, and its report runs on a JVM the roll-ups have warmed
(docs/performance-log.md, "Step 23"). What a day's roll-up is lives in `rollup`; this module decides which days, and
holds the store's lease while it writes them.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from collectors.model.wording import plural
from collectors.outputs.history.lease import ReaderLease, WriterLease, held_by_readers, read_holder
from spark_analytics import io, rollup
from spark_analytics.rollup import TABLES, Store
from spark_analytics.session import CLASS_ARCHIVE_ENV, build_session, class_archive_arg, describe_failure, stop

WAIT_S = 3600.0
"""How long a run waits for another run writing the same store (``--wait``): a first run over a month of a big
fleet's history takes tens of minutes."""
READ_WAIT_S = 900.0
"""How long a report waits for a roll-up run writing the store it reads (``weekly_report --rollups-wait``): the daily
job rolls up a day or two, a few minutes for a big fleet."""


@dataclass
class Plan:
    """Which of the days asked about to roll up now (`todo`), and which to keep as they are although stale or asked
    for (`kept`, each with the tables whose history files are gone: the roll-up is their only record of the day)."""

    todo: list[str]
    kept: dict[str, list[str]]


@dataclass
class Outcome:
    """What `roll` did: the days written, those that failed (each named on stderr), the rows written per table."""

    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    written: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    seconds: float = 0.0

    def summary(self, store: Store) -> str:
        return (f"rolled up {plural(len(self.done), 'day')} ({self.done[0]}..{self.done[-1]}) into {store.root} in "
                f"{self.seconds:.1f}s: " + ", ".join(f"{k} {v:,}" for k, v in self.written.items()))


def plan(store: Store, history: str, days: Sequence[str], force: bool = False) -> Plan:
    """The days of `days` to roll up: all of them with `force`, else those not fresh in `store` (missing, or made
    from other history files than the day has now: `rollup.fresh_days`). Run under the store's lease: another run
    may have just written some. A day whose history files are all gone keeps its roll-up: rolling up no rows over
    the only record of the day would lose it (`rollup.made_from`). So does one where some table's files are gone
    and others remain, whatever `force` says: rolled up again, the day lost that table's figures for good (before,
    a day was kept only when every table's files were gone). Such a day, stale since another table changed, is
    computed from the history by the reports meanwhile; removing its roll-up lets a run write it again."""
    rollup.recall_left_out(store, history, days)  # files a roll-up was made without: not a reason to redo the day
    listed = {d: rollup.history_files(history, d) for d in days}  # once a day: freshness and what is gone
    fresh = set() if force else set(rollup.fresh_days(store, history, days, listed))
    todo = [d for d in days if d not in fresh]
    kept: dict[str, list[str]] = {}
    for d in todo:
        m = store.manifest(d)
        if m is not None and (gone := rollup.tables_gone(m["history_files"], listed[d])):
            kept[d] = gone
    return Plan([d for d in todo if d not in kept], kept)


def roll(spark: Any, history: str, store: Store, days: Sequence[str], prog: str, verbose: bool = False) -> Outcome:
    """Roll up `days` one after the other (`rollup.rollup_day`). A day that fails — a file Spark cannot read — is
    named on stderr and does not hold back the days after it."""
    out = Outcome()
    started = time.monotonic()
    for d in days:
        try:
            got = rollup.rollup_day(spark, history, store, d)
        except Exception as e:
            if verbose:
                traceback.print_exc()
            print(f"{prog}: {d} failed: {describe_failure(e)}", file=sys.stderr)
            out.failed.append(d)
            continue
        out.done.append(d)
        out.written = {k: out.written[k] + got[k] for k in TABLES}
    out.seconds = time.monotonic() - started
    return out


def take_store(store: Store, wait_s: float) -> WriterLease | None:
    """The store's lease (`WriterLease`: an exclusive ``flock`` on ``DIR/_writer.lock``, released by the kernel
    however the process ends), waiting up to `wait_s` for another run that holds it; None when it still does.

    Two runs at once — the daily cron job and a weekly report's ``--update-rollups``, or a cron job slower than its
    interval — would each find the same days missing and roll them up twice, and each day's files would be
    written by whichever run renamed last. After the wait, the days that are still to do are judged again, so
    the run that waited does only what the other left. Raises OSError when the lock file cannot be created
    (a read-only store)."""
    lease = WriterLease(store.root, writer="roll-up run")
    taken = _wait_to_take(lease.acquire, wait_s,
                          lambda: f"rollup: {holders(store.root)} {store.root}; waiting for it (up to {wait_s:g} s)")
    if taken:
        store.sweep_temps()  # what runs killed before this one left
    return lease if taken else None


def _wait_to_take(acquire: Callable[[], bool], wait_s: float, waiting: Callable[[], str]) -> bool:
    """Try `acquire` every second for up to `wait_s`, saying `waiting()` once on stderr if it has to wait; whether it
    was taken."""
    deadline = time.monotonic() + wait_s
    told = False
    while not acquire():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if not told:
            print(waiting(), file=sys.stderr, flush=True)
            told = True
        time.sleep(min(1.0, left))
    return True


def holders(root: Path, still: bool = False) -> str:
    """Who keeps the store's lease from a run that wants to write, in words: a report reading it, or a roll-up run."""
    if held_by_readers(root):
        return f"a weekly report is {'still ' if still else ''}reading"
    return f"another roll-up run ({read_holder(root).describe()}) is {'still ' if still else ''}writing"


@contextmanager
def reading_store(rollups: str | None, wait_s: float | None, updated: bool = False,
                  prog: str = "weekly_report") -> Iterator[None]:
    """Hold the store's lease shared (`ReaderLease`) while a report reads it, waiting up to `wait_s` for a roll-up run
    writing it: between the report's check of which days are fresh and its reads, a run replacing a day's files
    gave it rows of other history files than its ``inputs.json`` lists. A run still writing after the wait is
    named, and the report reads the store as it stands (as before the lease: the days being written have no
    manifest and are computed from the history). No store, nothing held. `wait_s` None: `READ_WAIT_S`, or 0 after
    ``--update-rollups`` (`updated`), which never waits for another roll-up run, before its reads either."""
    if not rollups:
        yield
        return
    if wait_s is None:
        wait_s = 0.0 if updated else READ_WAIT_S
    root = Store.at(rollups).root
    lease = ReaderLease(root)
    try:
        if not _wait_to_take(lease.acquire, wait_s, lambda: f"{prog}: a roll-up run ({read_holder(root).describe()}) "
                             f"is writing {root}; waiting for it (up to {wait_s:g} s)"):
            print(f"{prog}: a roll-up run ({read_holder(root).describe()}) is still writing {root} after "
                  f"{wait_s:g} s; reading the store as it stands (the days it is writing are computed from the "
                  "history)", file=sys.stderr, flush=True)
    except OSError as e:  # the lease file could not be opened or locked: read as before the lease
        print(f"{prog}: {root}: the store's lease cannot be taken ({e.strerror or e}); reading it without",
              file=sys.stderr)
    try:
        yield
    finally:
        lease.release()


def update_for_report(spark: Any, history: str, rollups: str, days: Sequence[str], today: str,
                      verbose: bool = False) -> Outcome | None:
    """``weekly_report --update-rollups``: roll up, in the report's session, the complete days of `days` (before
    `today`) that the history has and that are not fresh in the store, as `kafka-monitor-rollup` would, and say so
    on stdout. Never waits and never fails the report: when another run holds the store, or the store cannot be
    written, it says so and returns None, and the report computes those days from the history as it would without
    the flag (the same figures); a day that fails is named and left to the history likewise."""
    prog = "weekly_report"
    store = Store.at(rollups)
    try:
        store.root.mkdir(parents=True, exist_ok=True)
        lease = take_store(store, 0.0)
    except OSError as e:
        print(f"{prog}: --update-rollups: {store.root} cannot be written ({e.strerror or e}); the days not rolled "
              "up are computed from the history", file=sys.stderr)
        return None
    if lease is None:
        print(f"{prog}: --update-rollups: {holders(store.root)} {store.root}; not waiting: the days not rolled up are "
              "computed from the history", file=sys.stderr)
        return None
    try:
        present = set(rollup.history_days(history))  # as the daily job: only days the history has
        todo = plan(store, history, [d for d in days if d < today and d in present]).todo
        if not todo:
            print(f"{prog}: the roll-ups of the report's days are up to date under {store.root}")
            return Outcome()
        out = roll(spark, history, store, todo, prog, verbose)
    except Exception as e:  # the listing failed (a remote history that did not answer): the report may still run
        if verbose:
            traceback.print_exc()
        print(f"{prog}: --update-rollups failed: {describe_failure(e)}; the days not rolled up are computed from the "
              "history", file=sys.stderr)
        return None
    finally:
        lease.release()
    if out.done:
        print(f"{prog}: {out.summary(store)}")
    if out.failed:
        print(f"{prog}: --update-rollups: {plural(len(out.failed), 'day')} not rolled up ({', '.join(out.failed)}); "
              "computed from the history instead", file=sys.stderr)
    return out


# ----------------------------------------------------------------------------------------------- command line


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rollup", description="Daily roll-ups of the monitor's history (PySpark).")
    p.add_argument("--history", default="data/history",
                   help="history root: a directory, or a URI Spark's Hadoop filesystems read (hdfs://, s3a://...); "
                        "default data/history")
    p.add_argument("--rollups", default="data/rollups", help="roll-up directory (local); default data/rollups")
    p.add_argument("--day", action="append", default=None,
                   help="a UTC day YYYY-MM-DD (repeatable); default: every complete day not rolled up or stale")
    p.add_argument("--force", action="store_true", help="roll up the days even when their roll-up is fresh")
    p.add_argument("--wait", type=_seconds, default=WAIT_S, metavar="SECONDS",
                   help="how long to wait for another roll-up run writing the same --rollups directory (it holds "
                        f"DIR/_writer.lock); then exit 1; default {WAIT_S:g}")
    p.add_argument("--master", default=None, help="Spark master; default local[*]")
    p.add_argument("--class-archive", default=os.environ.get(CLASS_ARCHIVE_ENV) or None, metavar="PATH",
                   help="the driver JVM's class-data sharing archive, as weekly_report's (one file serves both: the "
                        f"job that runs first makes it); default ${CLASS_ARCHIVE_ENV}, else none")
    p.add_argument("--verbose", action="store_true")
    return p


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return v


def main(argv: Sequence[str] | None = None, spark: Any = None, now: float | None = None) -> int:
    """The daily job; pass `spark` to reuse a session (tests). Returns the exit code: 0, 1 (a day failed, or
    another run still held the store after ``--wait``), 2 (a bad argument, named)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    a = parser().parse_args(argv)
    try:
        archive = class_archive_arg(a.class_archive, ValueError)
    except ValueError as e:
        print(f"rollup: error: {e}", file=sys.stderr)
        return 2
    remote = io.is_remote(a.history)  # listed through Spark's Hadoop FileSystem API: the session comes first
    if not remote and not Path(a.history.removeprefix("file://")).is_dir():
        print(f"rollup: error: argument --history: {a.history!r} is not a directory", file=sys.stderr)
        return 2
    if io.is_remote(a.rollups):
        print(f"rollup: error: argument --rollups: {a.rollups!r}: a local (or mounted) directory", file=sys.stderr)
        return 2
    today = datetime.fromtimestamp(time.time() if now is None else now, UTC).date().isoformat()
    if a.day:
        days_asked = []
        for d in a.day:
            try:
                # the store keys a day by its ISO spelling: 20261123 or 2026-W48-1 (Python 3.11 reads both)
                # would be rolled up under a name no report looks for
                days_asked.append(date.fromisoformat(d).isoformat())
            except ValueError:
                print(f"rollup: error: argument --day: {d!r} is not a date like 2026-11-23", file=sys.stderr)
                return 2
        a.day = days_asked
    store = Store.at(a.rollups)
    try:
        store.root.mkdir(parents=True, exist_ok=True)  # so a report can name it from the first day on
    except OSError as e:  # a file in the way, no permission, a read-only mount
        print(f"rollup: error: argument --rollups: {a.rollups!r}: cannot be a directory here "
              f"({e.strerror or e})", file=sys.stderr)
        return 2
    try:
        lease = take_store(store, a.wait)
    except OSError as e:
        print(f"rollup: error: argument --rollups: {a.rollups!r}: cannot be written ({e.strerror or e})",
              file=sys.stderr)
        return 2
    if lease is None:
        print(f"rollup: failed: {holders(store.root, still=True)} {store.root} after {a.wait:g} s; the next run does "
              "what is still missing", file=sys.stderr)
        return 1
    own = spark is None
    out = Outcome()
    try:
        if own and remote:
            spark = build_session(a.master, app_name="kmon-rollup", verbose=a.verbose, class_archive=archive)
        if remote and not io.history_exists(spark, a.history):
            print(f"rollup: error: argument --history: {a.history!r} does not exist", file=sys.stderr)
            return 2
        days = sorted(set(a.day)) if a.day else [d for d in rollup.history_days(a.history) if d < today]
        chosen = plan(store, a.history, days, force=a.force or bool(a.day))
        for d, gone in chosen.kept.items():
            left = f" of {', '.join(gone)}" if any(rollup.history_files(a.history, d).values()) else ""
            print(f"rollup: {d}: no history files left{left} (removed by retention?); its roll-up is kept",
                  file=sys.stderr)
        if not chosen.todo:
            print(f"rollup: nothing to do ({plural(len(days) - len(chosen.kept), 'day')} up to date"
                  + (f", {len(chosen.kept)} kept from their roll-ups alone" if chosen.kept else "")
                  + f" under {store.root})")
            return 0
        started = time.monotonic()  # what the run prints: its session's start too, as it always has
        if own and spark is None:
            spark = build_session(a.master, app_name="kmon-rollup", verbose=a.verbose,
                                  small_job=rollup.reads_little(a.history, chosen.todo),  # a small fleet's night
                                  class_archive=archive)
        out = roll(spark, a.history, store, chosen.todo, "rollup", a.verbose)
        out.seconds = time.monotonic() - started
    except Exception as e:
        if a.verbose:
            traceback.print_exc()
        print(f"rollup: failed: {describe_failure(e)}", file=sys.stderr)
        return 1
    finally:
        if own and spark is not None:
            stop(spark, succeeded=bool(out.done) and not out.failed)
        lease.release()
    if out.done:
        print(out.summary(store))
    if out.failed:
        print(f"rollup: failed: {len(out.failed)} of {plural(len(out.done) + len(out.failed), 'day')} "
              f"({', '.join(out.failed)}); the next run tries them again", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
