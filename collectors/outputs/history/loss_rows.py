"""Whether the history holds a loss a collector recorded too: the standby of an HA pair and its holder.

Both collectors of a pair on one history root see a truncation or an unclean election (`EPOCH_LOSSES`) at their
own polls. Only the lease's holder writes the root; the standby keeps its own ledger rows of such a loss until the
history holds the same loss, and writes them if it takes the root over first (`writer.HistoryWriter._stand_by`).
"The same loss" cannot be the same row: the two record it at different times, and a collector whose polls straddle
two leader changes records one loss over both (from the epoch it watched to the one it found), where the other,
polling between them, recorded one at the second. So two records are one loss when they are of the same cluster,
kind and partition and their leader changes overlap: epochs ``(epoch_before, epoch_after]``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from collectors.model.vocabulary import EPOCH_LOSSES

LOSS_TABLE = "loss_events"
SUBJECT = ("cluster", "kind", "topic", "partition")
COLUMNS = (*SUBJECT, "epoch_before", "epoch_after")

RECORDED_LOSS_WINDOW_S = 86400.0
"""How far before a collector's own record of a loss the other's record of it is looked for: the two see a leader
change at their next polls, a day apart only if one of them could not reach the cluster all day."""

Row = dict[str, Any]


def same_loss(a: Row, b: Row) -> bool:
    """Two ledger rows of `EPOCH_LOSSES` record one loss (see the module docstring). Rows without both epochs (none
    the collector writes) are one loss only when their epochs are equal."""
    if any(a[k] != b[k] for k in SUBJECT):
        return False
    spans = (a["epoch_before"], a["epoch_after"], b["epoch_before"], b["epoch_after"])
    if None in spans:
        return spans[:2] == spans[2:]
    a0, a1, b0, b1 = spans
    return a0 < b1 and b0 < a1


def recorded_in(rows: Sequence[Row]) -> Callable[[Row], bool]:
    """A test of a ledger row: whether `rows` (the history's) hold its loss. Rows of other kinds: never."""
    by_subject: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for r in rows:
        if r["kind"] in EPOCH_LOSSES:
            by_subject[tuple(r[k] for k in SUBJECT)].append(r)

    def recorded(row: Row) -> bool:
        return row["kind"] in EPOCH_LOSSES and any(
            same_loss(row, r) for r in by_subject.get(tuple(row[k] for k in SUBJECT), ()))

    return recorded


def read_recorded(root: Path, clusters: Sequence[str], since: float) -> Callable[[Row], bool]:
    """`recorded_in` the history's ledger rows of `clusters` from `RECORDED_LOSS_WINDOW_S` before `since` on.
    Raises what the read raises (a damaged file): the caller keeps its rows, a loss twice rather than none."""
    from collectors.outputs.history.reader import read_arrow

    held = read_arrow(root, LOSS_TABLE, start=since - RECORDED_LOSS_WINDOW_S, clusters=sorted(set(clusters)),
                      columns=list(COLUMNS))
    return recorded_in(held.to_pylist())
