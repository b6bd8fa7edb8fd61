"""What a derived file was made from, and whether the history still holds exactly those rows.

A day's roll-up (`rollup`) and a week's report (`last_week`) record the live history files they read, by name and
size, to tell later whether those changed. The collectors' hourly maintenance compacts every finished day into
one file holding the same rows (`collectors.outputs.history.maintenance`): judged by names alone, every day
rolled up or reported before its compaction was stale from then on, and computed again from the same rows.
`compacted_since` tells that case from new rows, from the compact files' ``kmon.replaces`` footers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from collectors.outputs.history.files import replaced_names

Replaces = Callable[[str, str], frozenset[str]]
"""(group, name) -> the names a compact file of that group (a table's day directory) supersedes."""


def compacted_since(recorded: dict[str, list[list[Any]]], now: dict[str, list[list[Any]]],
                    replaces: Replaces) -> bool:
    """Whether the live files `now` hold the rows of those recorded, each by group (a table's day directory) as
    [[name, size]]: per group, the files are those recorded, or none (removed by retention: the derived file is
    the record of them, `rollup.made_from`), or the recorded ones with some compacted since: every file not
    recorded is a compact file whose footer (`replaces(group, name)`: its ``kmon.replaces``) supersedes exactly
    the recorded files now gone, and the others are unchanged. A group not recorded must have no file.

    Exactly: a compact file that also supersedes names not recorded (a late file merged in, a repeat, an older
    compaction's inputs) may hold rows the derived file never saw, and it is judged stale; so is one whose footer
    does not read or names nothing. Only the footers of files not recorded are read."""
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
            if not (superseded := replaces(group, n)):
                return False  # a footer without them (a foreign or damaged file): not known to hold those rows
            covered |= superseded
        if covered != set(before) - set(after):
            return False
    return True


def footers(history: Path, directory: Callable[[str], str]) -> Replaces:
    """`Replaces` of a local history (its path, without ``file://``: `io.local_path`): the footer of
    ``history/directory(group)/name``."""
    return lambda group, name: replaced_names(history / directory(group) / name)
