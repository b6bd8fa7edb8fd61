"""`collectors.outputs.atomic.remove_stale_temps`: the one clean-up of what killed writers leave, for the
collectors' temp files and the Spark jobs' work directories alike."""

from __future__ import annotations

import os
import time
from pathlib import Path

from collectors.outputs.atomic import remove_stale_temps

HOUR = 3600.0


def _aged(path: Path, seconds: float) -> Path:
    os.utime(path, (time.time() - seconds,) * 2)
    return path


def test_only_old_temp_files_of_the_name_go_and_directories_stay(tmp_path: Path) -> None:
    old, young = tmp_path / ".tmp-a.parquet.1", tmp_path / ".tmp-a.parquet.2"
    other = tmp_path / ".tmp-b.parquet.1"  # another name's temp: its own writer's to clean
    target = tmp_path / "a.parquet"
    for f in (old, young, other, target):
        f.write_bytes(b"x")
    for f in (old, other, target):
        _aged(f, 2 * HOUR)
    a_dir = tmp_path / ".tmp-a.parquet.dir"
    a_dir.mkdir()
    _aged(a_dir, 2 * HOUR)
    remove_stale_temps(tmp_path, ".tmp-a.parquet.", "", HOUR)
    assert not old.exists()
    assert young.exists() and other.exists() and target.exists() and a_dir.is_dir()


def test_with_directories_only_old_directories_go_with_their_files(tmp_path: Path) -> None:
    killed, young = tmp_path / ".tmp-spark-killed", tmp_path / ".tmp-spark-young"
    for d in (killed, young):
        (d / "t").mkdir(parents=True)
        (d / "t" / "part-0.parquet").write_bytes(b"x")
    _aged(killed, 2 * HOUR)
    a_file = tmp_path / ".tmp-spark-file"
    a_file.write_bytes(b"x")
    _aged(a_file, 2 * HOUR)
    remove_stale_temps(tmp_path, ".tmp-spark-", "", HOUR, directories=True)
    assert not killed.exists() and (young / "t" / "part-0.parquet").exists() and a_file.exists()


def test_a_suffix_narrows_the_match_and_a_missing_directory_is_no_error(tmp_path: Path) -> None:
    tmp, kept = tmp_path / ".state.json.1.tmp", tmp_path / ".state.json.1.bak"
    for f in (tmp, kept):
        f.write_bytes(b"x")
        _aged(f, 2 * HOUR)
    remove_stale_temps(tmp_path, ".state.json.", ".tmp", HOUR)
    assert not tmp.exists() and kept.exists()
    remove_stale_temps(tmp_path / "gone", ".x", "", HOUR)
    remove_stale_temps(tmp_path / "gone", ".x", "", HOUR, directories=True)
