"""Whole-or-nothing files: what a reader (or the next start after a kill) sees is the old file or the new one.

History flushes, latest-state files and poller checkpoints all publish the same way: write a temp file in
the target's directory, fsync it, ``os.replace`` it onto the target (atomic on POSIX within one file
system), fsync the directory so the rename itself survives a power loss.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def fsync_dir(path: Path) -> None:
    """Make a rename or create in `path` durable; failure is logged, not raised (the rename already happened)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        log.warning("fsync of directory %s failed: %s", path, e)


def publish(target: Path, write: Callable[[Any], None], tmp: Path) -> int:
    """Write via `write(file)` to `tmp` (same directory as `target`), fsync, rename onto `target`, fsync the dir.

    Returns the file size. On any failure the temp file is removed and the error re-raised; `target` is
    then untouched (the previous version, or nothing).
    """
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        size = tmp.stat().st_size
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(target.parent)
    return size


def remove_stale_temps(directory: Path, prefix: str, suffix: str, older_than_s: float, *,
                       directories: bool = False) -> None:
    """Temp files ``prefix*suffix`` a killed writer left in `directory` (with `directories`, temp directories
    instead, removed with what they hold: the work directories Spark's tasks write into); only old ones, which
    no live writer can still be filling. Failures are ignored: a leftover temp is harmless, readers skip it."""
    cutoff = time.time() - older_than_s
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            if entry.name.startswith(prefix) and entry.name.endswith(suffix):
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False) == directories and entry.stat().st_mtime < cutoff:
                        if directories:
                            shutil.rmtree(entry.path, ignore_errors=True)
                        else:
                            os.unlink(entry.path)
