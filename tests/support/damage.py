"""Damage a Parquet file the way a bad copy or restore does, for the tests of what readers do with it."""

from __future__ import annotations

from pathlib import Path

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
