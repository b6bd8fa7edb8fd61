"""SIGKILL the history writer at random moments, again and again: no torn file, no duplicate, no lost flush.

A child process writes ClusterSnapshots whose time encodes a unique sequence id, flushes every few
snapshots (reporting the flushed ids on stdout only after `flush()` returned) and compacts finished days
all the time (reporting "C" after each compaction), so kills land in flushes, compactions and start-up recovery
alike. The parent kills it at a
random moment, restarts it on the same root, and finally checks every file and every id.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from collectors.outputs.history import HistoryWriter, live_files, read_table

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
T0 = 1_600_000_000.0
STEP = 600.0  # seconds between snapshots: 144 a day, so days finish and get compacted
KILLS = 15
BUDGET_S = 60.0  # the loop ends at KILLS long before, unless the machine is very slow

CHILD = r"""
import os, sys

from pathlib import Path
from collectors.outputs.history import HistoryWriter
from collectors.model.records import ClusterSnapshot, TopicRecord

root, seq = Path(sys.argv[1]), int(sys.argv[2])
T0, STEP = float(sys.argv[4]), float(sys.argv[5])
# A clock far in the future: every day written is "finished", so compaction runs on the day being written.
w = HistoryWriter(root, flush_interval_s=0.0, retention_days=None, compact_min_files=4,
                  clock=lambda: 4_000_000_000.0)
os.write(1, b"S\n")
pending = []
loops = 0
while True:
    for _ in range(3):
        snap = ClusterSnapshot(cluster="kill", time=T0 + seq * STEP, topics=[
            TopicRecord("kill", f"t{k}", False, 1, 3, 2, False, seq, "delete") for k in range(2)])
        w.add_snapshot(snap)
        pending.append(seq)
        seq += 1
    if w.flush():
        # One write() call: a kill cannot leave half a line that parses as fewer ids.
        os.write(1, ("F " + " ".join(map(str, pending)) + "\n").encode())
        pending = []
    else:
        os.write(2, f"flush failed: {w.last_error}\n".encode())
    loops += 1
    if loops % 2 == 0 and w.maybe_compact():
        os.write(1, b"C\n")
"""


def _read_until_compaction(proc: subprocess.Popen[bytes], deadline: float) -> bytes:
    """What the child wrote on stdout until its first "C" line (a compaction done) or `deadline`. The caller parses
    it together with the rest, so nothing read here is lost."""
    fd = proc.stdout.fileno()
    got = b""
    while not (got.startswith(b"C\n") or b"\nC\n" in got) and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 65536) if ready else b""
        if ready and not chunk:
            break  # the child exited
        got += chunk
    return got


def test_history_survives_repeated_sigkill(tmp_path: Path) -> None:
    root = tmp_path / "history"
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    seed = int(os.environ.get("HISTORY_KILL_SEED", time.time_ns() % 1_000_000))
    print(f"kill timings: HISTORY_KILL_SEED={seed}")  # shown by pytest on failure, to replay the kill times
    rng = random.Random(seed)
    reported: set[int] = set()
    compacted = False  # has a child reported a finished compaction?
    started = time.monotonic()
    kills = 0
    run = 0
    while kills < KILLS and time.monotonic() - started < BUDGET_S:
        run += 1
        with open(tmp_path / f"stderr-{run}.txt", "wb") as err:
            proc = subprocess.Popen([sys.executable, "-u", str(child), str(root), str(run * 100_000), str(REPO),
                                     str(T0), str(STEP)], stdout=subprocess.PIPE, stderr=err, cwd=REPO)
            # Early kills hit start-up (recovery of the previous run's leftovers), later ones the loop. On a slow
            # machine start-up alone can outlast the longest delay, so until a compaction has been seen every third
            # run lets the child compact first and kills it soon after, in its next flushes or compaction.
            head = b""
            if not compacted and run % 3 == 0:
                head = _read_until_compaction(proc, deadline=time.monotonic() + 20)
            time.sleep(rng.uniform(0.0, 0.3) if head else rng.uniform(0.05, 1.8))
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
            out = head + out
        assert proc.returncode == -signal.SIGKILL, (tmp_path / f"stderr-{run}.txt").read_text()
        kills += 1
        for line in out.decode().splitlines(keepends=True):
            compacted = compacted or line == "C\n"
            if line.startswith("F ") and line.endswith("\n"):
                ids = [int(x) for x in line.split()[1:]]
                assert not reported & set(ids)
                reported.update(ids)
        assert b"flush failed" not in (tmp_path / f"stderr-{run}.txt").read_bytes()
    assert kills >= 10, f"only {kills} kills in {BUDGET_S}s"
    assert reported, "the child never reported a flush: kills came too early"
    assert compacted, "no child reported a compaction: the kills did not exercise it"

    def check() -> list[int]:
        # Every published file is whole and readable.
        for path in sorted(root.rglob("*.parquet")):
            if not path.name.startswith("."):
                pq.read_table(path)
        cluster = read_table(root, "cluster")
        seqs = [round((t - T0) / STEP) for t in cluster.time]
        assert len(seqs) == len(set(seqs)), "a snapshot appears twice"
        assert reported <= set(seqs), f"flushed but lost: {sorted(reported - set(seqs))[:10]}"
        topics = read_table(root, "topic_health")
        assert not topics.duplicated(["time", "topic"]).any()
        topic_seqs = {round((t - T0) / STEP) for t in topics.time}
        assert reported <= topic_seqs
        return seqs

    before = check()  # readers are right even with the last run's leftovers still on disk
    HistoryWriter(root, retention_days=None, clock=lambda: 4_000_000_000.0)  # a clean start
    assert check() == before
    assert not list(root.rglob(".tmp-*")), "temp files survived a start"
    assert list(root.rglob("compact-*.parquet")), "no compaction ran: the kills did not exercise it"
    # ...and leaves no file that a compaction superseded.
    assert len(live_files(root, "cluster")) == len(list(root.glob("cluster/date=*/[!.]*.parquet")))
