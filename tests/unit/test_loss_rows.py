"""`loss_rows`: when two collectors' ledger rows record one loss (the standby of an HA pair and its holder)."""

from __future__ import annotations

from typing import Any

import pytest

from collectors.model.vocabulary import RETENTION_SKIPPED, TRUNCATION, UNCLEAN_ELECTION
from collectors.outputs.history.loss_rows import recorded_in, same_loss


def row(before: int | None, after: int | None, kind: str = TRUNCATION, partition: int = 0,
        cluster: str = "c1", topic: str = "t0") -> dict[str, Any]:
    return {"cluster": cluster, "kind": kind, "topic": topic, "partition": partition, "epoch_before": before,
            "epoch_after": after}


@pytest.mark.parametrize(("a", "b", "same"), [
    (row(3, 4), row(3, 4), True),  # both watched the same epoch
    (row(3, 5), row(4, 5), True),  # one straddled two leader changes, the other saw the second
    (row(3, 5), row(3, 4), True),  # ... or the first
    (row(2, 6), row(3, 4), True),  # nested
    (row(3, 4), row(4, 5), False),  # one leader change after the other: two losses
    (row(3, 4), row(5, 6), False),
    (row(3, 4), row(3, 4, partition=1), False),
    (row(3, 4), row(3, 4, topic="t1"), False),
    (row(3, 4), row(3, 4, cluster="c2"), False),
    (row(3, 4), row(3, 4, kind=UNCLEAN_ELECTION), False),  # the election and its truncation are two records
    (row(None, 4), row(None, 4), True),  # no epoch range: equal epochs only
    (row(None, 4), row(3, 4), False),
])
def test_two_records_are_one_loss_when_their_leader_changes_overlap(a: dict[str, Any], b: dict[str, Any],
                                                                     same: bool) -> None:
    assert same_loss(a, b) is same
    assert same_loss(b, a) is same  # symmetric


def test_recorded_in_looks_only_at_losses_proved_by_epochs() -> None:
    history = [row(4, 5), row(None, None, kind=RETENTION_SKIPPED, partition=2)]
    recorded = recorded_in(history)
    assert recorded(row(3, 5)) and not recorded(row(2, 3)) and not recorded(row(4, 5, partition=1))
    # a retention skip is never "recorded" here: a standby does not keep it, and none is matched
    assert not recorded(row(None, None, kind=RETENTION_SKIPPED, partition=2))
