"""Damage a Parquet file the way a bad copy or restore does, or fail its writing as a full disk does, for the tests
of what readers and the writer do then."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq


def damage_pages(path: Path) -> None:
    """Overwrite the first column chunk's pages of `path`, not its footer: it still opens, its rows do not read."""
    chunk = pq.read_metadata(path).row_group(0).column(0)
    start = min(chunk.data_page_offset, chunk.dictionary_page_offset or chunk.data_page_offset)
    data = bytearray(path.read_bytes())
    data[start:start + chunk.total_compressed_size] = b"\xab" * chunk.total_compressed_size
    path.write_bytes(bytes(data))
    pq.read_metadata(path)  # still opens


def cut_short(path: Path) -> None:
    """Keep the first half of `path`: its footer is gone."""
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def disk_full_on(monkeypatch: Any, table: str, day: str) -> None:
    """Make the history writer's publishing of files into `table`'s `day` fail as on a full disk (ENOSPC).

    The one boundary mocked: a full disk cannot be had on this machine without root mounts. Every other day and
    table writes for real. Both of the writer's publishers fail: its flushes' and its compaction's."""
    from collectors.outputs.history import maintenance as history_maintenance
    from collectors.outputs.history import writer as history_writer

    for module in (history_writer, history_maintenance):
        real = module.publish_file

        def publish(directory: Path, name: str, write: Any, real: Any = real) -> int:
            if directory.name == f"date={day}" and directory.parent.name == table:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(directory, name, write)

        monkeypatch.setattr(module, "publish_file", publish)
