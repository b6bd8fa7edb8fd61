"""The files the weekly report and the roll-up job write (`spark_analytics.io.write_parquet`, ``write_json``,
``write_text``): whole or not at all, whoever else writes the same file at the same time.

Two reports of one week into one ``--out`` (the weekly cron job and an on-call engineer's run), or a report's
``--out`` shared by two hosts, write the same names at once. Real processes and real files; nothing mocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_analytics import io

REPO = Path(__file__).resolve().parents[2]

WRITER = """
import json, sys, time
from pathlib import Path
import numpy as np, pyarrow as pa
from spark_analytics import io
target, go, me = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
table = pa.table({"writer": np.full(400_000, me), "v": np.random.default_rng(me).integers(0, 2**62, 400_000)})
doc = {"writer": me, "pad": "x" * 2_000_000}
(go.parent / f"ready-{me}").touch()
while not go.exists():
    time.sleep(0.001)
for _ in range(6):
    io.write_parquet(target.with_suffix(".parquet"), table)
    io.write_json(target.with_suffix(".json"), doc)
print("done")
"""


def test_two_writers_of_one_file_at_once_leave_one_whole_version(tmp_path: Path) -> None:
    """Both wrote one temporary file (``.tmp-<name>``) and renamed it: the bytes of both ended up in one file,
    which the first rename put in place while the second was still writing into it, and the second rename
    failed (FileNotFoundError). Each write now has a temporary file of its own."""
    target, go = tmp_path / "out" / "summary", tmp_path / "go"
    target.parent.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(go), str(me)], cwd=REPO,
                              env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for me in (1, 2)]
    for _ in range(6000):  # both imported and at their start line, so that their writes overlap
        if all((tmp_path / f"ready-{me}").exists() for me in (1, 2)) or any(p.poll() is not None for p in procs):
            break
        time.sleep(0.01)
    go.touch()
    results = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0 and out.strip() == "done", err[-2000:]
    t = pq.read_table(target.with_suffix(".parquet"))
    assert t.num_rows == 400_000 and len(set(t["writer"].to_pylist())) == 1  # one writer's version, whole
    assert json.loads(target.with_suffix(".json").read_text())["writer"] in (1, 2)
    assert sorted(p.name for p in target.parent.iterdir()) == ["summary.json", "summary.parquet"]  # no temp left


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    """A write that fails (here a column type Parquet cannot hold) keeps the version before and leaves no temp
    file. (``write_json`` makes any document JSON-safe first: it fails only on the disk.)"""
    path, doc = tmp_path / "t.parquet", tmp_path / "s.json"
    io.write_parquet(path, pa.table({"a": [1, 2]}))
    io.write_json(doc, {"x": 1})
    with pytest.raises(pa.ArrowNotImplementedError, match="month_day_nano_interval"):
        io.write_parquet(path, pa.table({"a": pa.array([pa.MonthDayNano([1, 2, 3])], pa.month_day_nano_interval())}))
    assert pq.read_table(path)["a"].to_pylist() == [1, 2] and json.loads(doc.read_text()) == {"x": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json", "t.parquet"]


def test_temporary_files_a_killed_writer_left_are_cleared_once_old(tmp_path: Path) -> None:
    """A writer killed mid-file leaves its hidden temp behind (readers skip names starting with a dot). The next
    write of the same name removes such temps once they are an hour old, not younger ones (a live writer's)."""
    path = tmp_path / "t.parquet"
    old, young = tmp_path / ".tmp-t.parquet.0a1b", tmp_path / ".tmp-t.parquet.2c3d"
    other = tmp_path / ".tmp-u.parquet.4e5f"  # another file's: left to that file's next write
    for p in (old, young, other):
        p.write_bytes(b"half a file")
    hour_ago = time.time() - 3700
    os.utime(old, (hour_ago, hour_ago))
    os.utime(other, (hour_ago, hour_ago))
    io.write_parquet(path, pa.table({"a": [1]}))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([other.name, young.name, "t.parquet"])
