"""What a derived file was made from, and whether the history still holds exactly those rows.

A day's roll-up (`rollup`) and a week's report (`last_week`) record the live history files they read, by name and
size, to tell later whether those changed. The collectors' hourly maintenance compacts every finished day into
one file holding the same rows (`collectors.outputs.history.maintenance`): judged by names alone, every day
rolled up or reported before its compaction was stale from then on, and computed again from the same rows.
`compacted_since` tells that case from new rows, from the compact files' footers: their ``kmon.inputs`` (the files
each merge read), or for a file compacted before the fifty-second session its ``kmon.replaces``. The latter also
names what a day's earlier compaction had merged and the repeats deleted with the inputs, so a day compacted twice
(a late file after the first) was stale once more, though the second merge held no row the derived file lacked.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from collectors.outputs.history.files import merged_names

Merged = Callable[[str, str], frozenset[str]]
"""(group, name) -> the names of the files a compact file of that group (a table's day directory) merged."""


def compacted_since(recorded: dict[str, list[list[Any]]], now: dict[str, list[list[Any]]],
                    merged: Merged) -> bool:
    """Whether the live files `now` hold the rows of those recorded, each by group (a table's day directory) as
    [[name, size]]: per group, the files are those recorded, or none (removed by retention: the derived file is
    the record of them, `rollup.made_from`), or the recorded ones with some compacted since: every file not
    recorded is a compact file whose footer (`merged(group, name)`: `merged_names`) names exactly the recorded
    files now gone as its merge's inputs, and the others are unchanged. A group not recorded must have no file.

    Exactly: a compact file that also merged files not recorded (a late file) holds rows the derived file never
    saw, and it is judged stale; so is one whose footer does not read or names nothing. A file compacted before
    ``kmon.inputs`` was written is judged by what it supersedes, which may name more (an older compaction's inputs,
    a repeat) and then makes the group stale though no row is new. Only the footers of files not recorded are
    read."""
    for group in set(recorded) | set(now):
        files, cur = recorded.get(group), now.get(group, [])
        if files is None:
            if cur:
                return False  # rows it never saw
            continue
        if cur in (files, []):
            continue
        before, after = dict(map(tuple, files)), dict(map(tuple, cur))
        new = [n for n in after if n not in before]
        if not new or any(not n.startswith("compact-") for n in new):
            return False
        if any(after[n] != before[n] for n in after if n in before):
            return False
        covered: set[str] = set()
        for n in new:
            if not (inputs := merged(group, n)):
                return False  # a footer without them (a foreign or damaged file): not known to hold those rows
            covered |= inputs
        if covered != set(before) - set(after):
            return False
    return True


def footers(history: Path, directory: Callable[[str], str]) -> Merged:
    """`Merged` of a local history (its path, without ``file://``: `io.local_path`): the footer of
    ``history/directory(group)/name``."""
    return lambda group, name: merged_names(history / directory(group) / name)
