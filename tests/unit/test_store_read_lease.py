"""The weekly report reads the roll-up store under a shared lease (`ReaderLease`), so no roll-up run replaces a
day's files between the report's check of which days are fresh and its reads of them.

Real ``flock`` locks throughout: a lock taken through another open file of this process conflicts as another
process's would."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from collectors.outputs.history.lease import ReaderLease, WriterLease, held_by_readers
from spark_analytics import rollup_job


def test_readers_share_and_a_writer_excludes_them(tmp_path: Path) -> None:
    a, b, w = ReaderLease(tmp_path), ReaderLease(tmp_path), WriterLease(tmp_path, writer="roll-up run")
    assert a.acquire() and b.acquire()  # two reports at once
    assert not w.acquire()  # a roll-up run waits for both
    a.release()
    assert not w.acquire()
    b.release()
    assert w.acquire()
    try:
        assert not ReaderLease(tmp_path).acquire()  # and a report for it
    finally:
        w.release()
    assert ReaderLease(tmp_path).acquire()


def test_what_holds_a_store_is_told_apart(tmp_path: Path) -> None:
    r = ReaderLease(tmp_path)
    assert r.acquire()
    try:
        assert held_by_readers(tmp_path)
        assert rollup_job.holders(tmp_path) == "a weekly report is reading"
    finally:
        r.release()
    w = WriterLease(tmp_path, writer="roll-up run")
    assert w.acquire()
    try:
        assert not held_by_readers(tmp_path)
        assert rollup_job.holders(tmp_path, still=True).startswith(f"another roll-up run (pid {os.getpid()} on ")
    finally:
        w.release()


def test_a_report_waits_for_the_roll_up_run_writing_its_store(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    writer = WriterLease(tmp_path, writer="roll-up run")
    assert writer.acquire()
    inside = threading.Event()
    writer_free: list[bool] = []

    def report() -> None:
        with rollup_job.reading_store(str(tmp_path), 120):
            writer_free.append(writer._fd is None)  # the writer had let go before the report read anything
            probe = WriterLease(tmp_path, writer="roll-up run")
            writer_free.append(not probe.acquire())  # and no run can write under the report while it reads
            inside.set()

    t = threading.Thread(target=report)
    t.start()
    err = ""
    for _ in range(600):
        err += capsys.readouterr().err
        if "waiting for it" in err:
            break
        threading.Event().wait(0.05)
    assert f"a roll-up run (pid {os.getpid()} on " in err and "waiting for it (up to 120 s)" in err, err
    assert not inside.is_set()
    writer.release()
    t.join(timeout=60)
    assert inside.is_set() and writer_free == [True, True]
    assert WriterLease(tmp_path, writer="roll-up run").acquire()  # released at the end of the read


def test_past_the_wait_the_report_reads_the_store_as_it_stands(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    writer = WriterLease(tmp_path, writer="roll-up run")
    assert writer.acquire()
    ran = []
    try:
        with rollup_job.reading_store(str(tmp_path), 0):
            ran.append(True)
    finally:
        writer.release()
    assert ran == [True]
    err = capsys.readouterr().err
    assert f"is still writing {tmp_path} after 0 s; reading the store as it stands" in err, err


def test_no_store_nothing_held(tmp_path: Path) -> None:
    with rollup_job.reading_store(None, 0):
        pass
    assert not (tmp_path / "_writer.lock").exists()


def test_a_store_whose_lease_file_cannot_be_made_is_read_unlocked(tmp_path: Path) -> None:
    # the store's directory gone (or, for a user who may not write it, read-only): nothing to share, read as is
    r = ReaderLease(tmp_path / "gone")
    assert r.acquire() and r.unlocked and r.held
    r.release()
    assert not r.held
