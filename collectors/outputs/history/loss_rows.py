"""Whether the history holds a loss a collector recorded too: the standby of an HA pair and its holder.

Both collectors of a pair on one history root see a truncation or an unclean election (`EPOCH_LOSSES`) at their
own polls, and the groups that had read past the truncation (``offset_beyond_log_end``, from the commits seen
before the leader change): `KEPT_KINDS`, each recorded once, at the poll that proved it. Only the lease's holder
writes the root; the standby keeps its own ledger rows of such a loss until the history holds the same loss, and
writes them if it takes the root over first (`writer.HistoryWriter._stand_by`).

"The same loss" cannot be the same row: the two record it at different times, and from the epoch each watched. A
collector asks the new leader where the epoch it watched ends (KIP-320's OffsetForLeaderEpoch) and counts that
epoch's committed messages past it; one whose polls straddled two leader changes (3 -> 4 -> 5) asks about epoch 3,
one that polled between them about epoch 4 at the second change. So a row of the history covers ours when it is of
the same cluster, kind, topic and partition and watched an epoch within our leader change: ``ours.epoch_before
<= theirs.epoch_before < ours.epoch_after`` (`covers`; ours straddled the changes), and, for a truncation, cut the
log at or before ours (``theirs.offset <= ours.offset``): a holder that began watching at epoch 4 never saw epoch
3's messages cut at 3 -> 4, which ours counts, and its cut of epoch 4 lies past ours. Not the other way round: if
the history's row straddled the changes ours saw one at a time, ours counted epoch 4's messages, which it did not.
A group's reading past a truncation carries that truncation's epochs and cut, and is the same loss by the same rule
for the same group (`SUBJECT`). Its existence depends on the group's commit each collector saw before the change:
a holder that polled before the group committed past the cut did not record it, and the standby keeps its own.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from collectors.model.vocabulary import BEYOND_LOG_END, LEADER_CHANGE_LOSSES
from collectors.model.wording import plural
from collectors.outputs.checkpoint import EVIDENCE_MAX_AGE_S
from collectors.outputs.history.lease import Holder

log = logging.getLogger(__name__)

LOSS_TABLE = "loss_events"
KEPT_KINDS = LEADER_CHANGE_LOSSES
"""The ledger rows a standby keeps until the history holds the same loss, and the memory bound never drops
(`writer.NEVER_DROPPED`): a leader change's loss, proved from epochs, is recorded at one poll only."""
SUBJECT = ("cluster", "kind", "topic", "partition", "group_id")
COLUMNS = (*SUBJECT, "epoch_before", "epoch_after", "offset")

RECORDED_LOSS_WINDOW_S = EVIDENCE_MAX_AGE_S
"""How far before a collector's own record of a loss the history's record of it is looked for. The two see a leader
change at their next polls, but a standby restarted on a checkpoint up to a week old (its loss evidence resumes that
far: `checkpoint.EVIDENCE_MAX_AGE_S`) finds again a loss the holder recorded when it happened."""

UNRECORDED_WARN_S = 600.0
"""A standby warns (once a loss) when the holder has written this long of polls past one it recorded a loss at
and the history still lacks that loss (`Looks.to_warn`)."""

LOOK_SLACK_S = 3600.0
"""How far before the holder's `flushed_until` at the last look the next look starts: a row it writes later is of a
later poll, but its clock may step back, a flush forced mid-poll by the memory bound records a poll whose other
clusters' rows come after, and times come back from Parquet to the microsecond."""

Row = dict[str, Any]
Kept = tuple[str, float]
"""A kept loss chunk of a writer's buffer: its cluster and poll time."""


def covers(theirs: Row, ours: Row) -> bool:
    """The history's ledger row `theirs` records the loss our row `ours` records (see the module docstring). Rows
    without both epochs (none this collector writes) cover only rows of the same epochs, except an older
    collector's of a group reading past a truncation (written without the truncation's epochs): it covers ours of
    the same group cut at the same offset, so a pair of mixed versions records the group's loss once."""
    if any(theirs[k] != ours[k] for k in SUBJECT):
        return False
    before, after, watched = ours["epoch_before"], ours["epoch_after"], theirs["epoch_before"]
    cut, theirs_cut = ours["offset"], theirs["offset"]
    if watched is None and theirs["epoch_after"] is None and ours["kind"] == BEYOND_LOG_END:
        return cut is not None and theirs_cut == cut  # an older holder's: no epochs, but the truncation's cut
    if None in (before, after, watched):
        return (watched, theirs["epoch_after"]) == (before, after)
    return bool(before <= watched < after) and (cut is None or theirs_cut is None or theirs_cut <= cut)


def recorded_in(rows: Sequence[Row]) -> Callable[[Row], bool]:
    """A test of one of our ledger rows: whether `rows` (the history's) hold its loss. Rows of kinds other than
    `KEPT_KINDS`, ours or theirs: never."""
    by_subject: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for r in rows:
        if r["kind"] in KEPT_KINDS:
            by_subject[tuple(r[k] for k in SUBJECT)].append(r)

    def recorded(row: Row) -> bool:
        return any(covers(r, row) for r in by_subject.get(tuple(row[k] for k in SUBJECT), ()))

    return recorded


def read_recorded(root: Path, clusters: Sequence[str], since: float) -> Callable[[Row], bool]:
    """`recorded_in` the history's ledger rows of `clusters` from `since` on. Raises what the read raises (a damaged
    file): the caller keeps its rows, a loss twice rather than none."""
    from collectors.outputs.history.reader import read_arrow

    held = read_arrow(root, LOSS_TABLE, start=since, clusters=sorted(set(clusters)), columns=list(COLUMNS))
    return recorded_in(held.to_pylist())


class Looks:
    """What a standby remembers of its looks at the history for the losses it keeps: each is looked for
    `RECORDED_LOSS_WINDOW_S` back once, then only among the rows written since (`start`), and warned of once
    (`to_warn`). A week of a big fleet's ledger (retention skips among it) at every flush would cost more as the
    loss waits longer."""

    def __init__(self) -> None:
        self.looked: set[Kept] = set()
        self.until: float | None = None
        """The holder's `flushed_until` at the last look: it had written every row of polls up to it, so the rows
        it adds to the history after that are of later polls."""
        self.warned: set[Kept] = set()

    def start(self, kept: Sequence[Kept]) -> float:
        """Where the next look at the history for `kept` starts."""
        starts = [t - RECORDED_LOSS_WINDOW_S for c, t in kept if (c, t) not in self.looked]
        if len(starts) < len(kept):  # some looked for before: the rows written since will do for them
            starts.append(self.until - LOOK_SLACK_S if self.until is not None
                          else min(t for _, t in kept) - RECORDED_LOSS_WINDOW_S)
        return min(starts)

    def done(self, kept: Sequence[Kept], until: float | None) -> None:
        """A look for `kept` read the history up to now; the holder's `flushed_until` was `until` before it."""
        self.looked, self.until = set(kept), until
        self.warned &= self.looked

    def forget(self) -> None:
        """The next look reads `RECORDED_LOSS_WINDOW_S` back for every row: at a takeover, and when another
        collector holds the lease (what it wrote at its own takeover is of polls before its `flushed_until`)."""
        self.looked, self.until = set(), None

    @staticmethod
    def overdue(kept: Sequence[Kept], until: float | None, after_s: float) -> list[Kept]:
        """The kept losses the holder has written `after_s` of polls past (`until`: its `flushed_until`) without the
        history holding them."""
        return [] if until is None else [k for k in kept if k[1] < until - after_s]

    def to_warn(self, overdue: Sequence[Kept]) -> list[Kept]:
        """Those of `overdue` not warned of before."""
        new = [k for k in overdue if k not in self.warned]
        self.warned.update(new)
        return new


def unrecorded_error(root: Path, holder: Holder, overdue: Sequence[Kept]) -> str:
    """What a standby's `history_write_failed` says while the history lacks losses only it recorded."""
    clusters = ", ".join(sorted({c for c, _ in overdue}))
    return (f"history root {root}: the collector writing it ({holder.describe()}) has not recorded "
            f"{plural(len(overdue), 'loss', 'losses')} this one saw in {clusters}; kept here and written if this one "
            "takes the root over, and this one's checkpoint of those clusters waits meanwhile")


def warn_unrecorded(root: Path, holder: Holder, looks: Looks, kept: dict[Kept, list[str]]) -> list[Kept]:
    """Those of a standby's `kept` losses (each with its rows' evidence) the holder has written `UNRECORDED_WARN_S`
    of polls past while the history still lacks them, with a warning once each: the standby's checkpoint of their
    cluster waits until it takes over."""
    overdue = looks.overdue(list(kept), holder.flushed_until, UNRECORDED_WARN_S)
    for cluster, polled in looks.to_warn(overdue):
        log.warning("history: the collector writing %s (%s) has not recorded the loss this one saw in %s at %s (%s). "
                    "Kept, and written if this one takes the root over; its checkpoint of %s waits meanwhile", root,
                    holder.describe(), cluster, datetime.fromtimestamp(polled, UTC).isoformat(timespec="seconds"),
                    "; ".join(str(e) for e in kept[cluster, polled]), cluster)
    return overdue
