"""`loss_rows`: when the history's ledger row records the loss a standby of an HA pair recorded too, and where the
standby's looks for it start."""

from __future__ import annotations

from typing import Any

import pytest

from collectors.model.vocabulary import BEYOND_LOG_END, RETENTION_SKIPPED, TRUNCATION, UNCLEAN_ELECTION
from collectors.outputs.checkpoint import EVIDENCE_MAX_AGE_S
from collectors.outputs.history.loss_rows import LOOK_SLACK_S, RECORDED_LOSS_WINDOW_S, Looks, covers, recorded_in

W = RECORDED_LOSS_WINDOW_S
S = LOOK_SLACK_S


def row(before: int | None, after: int | None, kind: str = TRUNCATION, partition: int = 0,
        cluster: str = "c1", topic: str = "t0", offset: int | None = None, group: str | None = None
        ) -> dict[str, Any]:
    return {"cluster": cluster, "kind": kind, "topic": topic, "partition": partition, "group_id": group,
            "epoch_before": before, "epoch_after": after, "offset": offset}


def read(before: int | None, after: int | None, offset: int | None, group: str = "billing",
         partition: int = 0) -> dict[str, Any]:
    """A group's reading past the truncation of `before` -> `after` cut at `offset`."""
    return row(before, after, BEYOND_LOG_END, partition, offset=offset, group=group)


@pytest.mark.parametrize(("theirs", "ours", "covered"), [
    (row(3, 4), row(3, 4), True),  # both watched the same epoch
    (row(3, 5), row(3, 4), True),  # both asked about epoch 3; ours found the leader of 4, theirs of 5
    (row(4, 5), row(3, 5), True),  # ours straddled 3 -> 4 -> 5; theirs saw the change 4 -> 5 within it
    (row(3, 4), row(3, 5), True),  # ... or the change 3 -> 4
    (row(3, 5), row(4, 5), False),  # theirs straddled; ours counted epoch 4's messages, which it did not
    (row(2, 6), row(3, 4), False),
    (row(4, 5), row(3, 4), False),  # one leader change after the other: two losses
    (row(5, 6), row(3, 4), False),
    (row(3, 4), row(3, 4, partition=1), False),
    (row(3, 4), row(3, 4, topic="t1"), False),
    (row(3, 4), row(3, 4, cluster="c2"), False),
    (row(3, 4), row(3, 4, kind=UNCLEAN_ELECTION), False),  # the election and its truncation are two records
    (row(None, 4), row(None, 4), True),  # no epoch range: equal epochs only
    (row(3, 4), row(None, 4), False),
    (row(None, 4), row(3, 4), False),
    # Where the new leader cuts the log: theirs must cut at or before ours.
    (row(4, 5, offset=950), row(3, 5, offset=950), True),  # no epoch 4 in leader 5's log: one cut, one loss
    (row(3, 4, offset=960), row(3, 4, offset=960), True),
    (row(4, 5, offset=960), row(3, 5, offset=950), False),  # epoch 3 cut at 950 (3 -> 4), unseen by theirs
    (row(4, 5, offset=940), row(3, 5, offset=950), True),
    (row(4, 5, offset=None, kind=UNCLEAN_ELECTION), row(3, 5, offset=None, kind=UNCLEAN_ELECTION), True),
    # A group's reading past a truncation: the truncation's rule, for the same group.
    (read(3, 4, 950), read(3, 4, 950), True),
    (read(4, 5, 940), read(3, 5, 950), True),  # theirs read past a cut within ours
    (read(4, 5, 960), read(3, 5, 950), False),  # ours read past epoch 3's cut, which theirs never saw
    (read(3, 5, 950), read(4, 5, 950), False),
    (read(5, 6, 990), read(3, 4, 950), False),  # a later truncation: the group read past two
    (read(3, 4, 950, group="audit"), read(3, 4, 950), False),  # another group's loss
    (read(3, 4, 950, partition=1), read(3, 4, 950), False),
    (row(3, 4, offset=950), read(3, 4, 950), False),  # the truncation is not the group's reading past it
    (read(3, 4, 950), row(3, 4, offset=950), False),
    # An older holder's row of a group's reading past a truncation has no epochs: its cut tells.
    (read(None, None, 950), read(3, 4, 950), True),
    (read(None, None, 940), read(3, 4, 950), False),
    (read(None, None, 950, group="audit"), read(3, 4, 950), False),
    (read(None, None, None), read(3, 4, 950), False),
    (read(None, None, 950), read(3, 4, None), False),
    (row(None, None, offset=950), row(3, 4, offset=950), False),  # a truncation always has epochs
])
def test_the_historys_row_covers_ours_when_it_watched_an_epoch_within_our_leader_change(
        theirs: dict[str, Any], ours: dict[str, Any], covered: bool) -> None:
    assert covers(theirs, ours) is covered


def test_recorded_in_looks_only_at_losses_proved_by_epochs() -> None:
    recorded = recorded_in([row(4, 5), row(None, None, kind=RETENTION_SKIPPED, partition=2)])
    assert recorded(row(3, 5)) and recorded(row(4, 6)) and not recorded(row(2, 3))
    assert not recorded(row(4, 5, partition=1))
    assert not recorded(row(None, None, kind=RETENTION_SKIPPED, partition=2))  # the history's skip is not looked at
    recorded = recorded_in([row(4, 5, offset=940), read(4, 5, 940)])
    assert recorded(read(3, 5, 950)) and not recorded(read(3, 5, 950, group="audit"))
    assert not recorded(read(3, 5, 930))  # ours read past a cut before theirs: the history lacks part of it


def test_the_window_is_as_long_as_a_checkpoints_loss_evidence_lives() -> None:
    """A standby restarted on a checkpoint up to a week old finds again a loss the holder recorded then."""
    assert W == EVIDENCE_MAX_AGE_S


def test_a_kept_loss_is_looked_for_a_window_back_once_then_among_the_rows_written_since() -> None:
    looks = Looks()
    first = ("c1", 1000.0)
    assert looks.start([first]) == 1000 - W  # never looked for
    looks.done([first], until=1030.0)
    assert looks.start([first]) == 1030 - S  # the holder wrote polls up to 1030 before that look (less a slack)
    second = ("c2", 1100.0)
    assert looks.start([first, second]) == 1100 - W  # a new one: a window back again
    looks.done([first, second], until=1090.0)
    assert looks.start([first, second]) == 1090 - S
    looks.done([first, second], until=None)  # a holder that records no flushed_until (an older one)
    assert looks.start([first, second]) == 1000 - W
    looks.done([second], until=1200.0)  # the first is in the history now
    assert looks.start([second]) == 1200 - S
    looks.forget()  # a takeover, or another holder: whatever the history holds, read it all
    assert looks.start([second]) == 1100 - W


def test_a_kept_loss_is_warned_of_once_after_the_holder_wrote_past_it() -> None:
    looks = Looks()
    kept = [("c1", 1000.0), ("c1", 1500.0)]
    assert looks.overdue(kept, until=None, after_s=600) == []  # the holder records nothing: nothing to say
    assert looks.overdue(kept, until=1600.0, after_s=600) == []  # 600 s of its polls past: not yet
    assert looks.to_warn(looks.overdue(kept, until=1601.0, after_s=600)) == [("c1", 1000.0)]
    assert looks.overdue(kept, until=3000.0, after_s=600) == kept  # overdue as long as kept ...
    assert looks.to_warn(looks.overdue(kept, until=3000.0, after_s=600)) == [("c1", 1500.0)]  # ... warned once
    assert looks.to_warn(looks.overdue(kept, until=9000.0, after_s=600)) == []
    looks.done([("c1", 1500.0)], until=9000.0)  # the first one left the buffer: forgotten
    assert looks.warned == {("c1", 1500.0)}
