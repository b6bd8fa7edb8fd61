"""Which transactional producers keep Transaction V1's rules on a Transaction V2 cluster, proved by what they do.

A cluster that finalized Transaction V2 (`vocabulary.TRANSACTION_V2`, Kafka 4's default) bumps a producer's epoch
at every transaction end, but only for a client that speaks it. An older client (before Kafka 4, most of a fleet
for years) keeps V1's rules there: one epoch for all its transactions, a rise only when a new instance starts
(InitProducerId) or the coordinator fences it. DescribeTransactions does not say which rules a producer follows,
so such a cluster used to be judged as a whole and no rise was counted on it: an old client's crash loop went
unseen on every Kafka 4 cluster, and so did the coordinator's timeout aborts of its transactions.

The evidence: under V2 an epoch lasts one transaction, so two transactions begun at the same producer id and epoch
(two start times) prove that the producer keeps V1 at that epoch. A rise out of an epoch so proven is a new
instance or a fence, as on a V1 cluster, and is counted; a rise out of an epoch seen with one transaction or none
proves nothing (a V2 end looks the same) and is not. An instance is therefore counted only once the polls have
seen it begin two transactions: a crash loop whose instances die sooner is not counted (evidence, not risk), and
a client upgraded to V2 stops being counted at its first end. Pure; `ClusterState.txn_epochs` holds the memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

PROOF_STARTS = 2  # transactions begun at one epoch that prove V1's rules (V2 gives each epoch one)


@dataclass
class EpochSeen:
    """A transactional producer's epoch as last seen, and the start times of the transactions seen begun at it."""

    producer_id: int
    epoch: int
    starts: list[float] = field(default_factory=list)  # distinct, at most `PROOF_STARTS`
    # the last (producer id, epoch) proven to follow V1, kept past the rise out of it: the loss ledger judges a
    # timeout abort by the epoch its watch saw open, which a poll that could not judge it may have left behind
    proven: tuple[int, int] | None = None

    @property
    def keeps_v1(self) -> bool:
        return len(self.starts) >= PROOF_STARTS


def proved_v1(seen: dict[str, EpochSeen], transactional_id: str, producer_id: int, epoch: int) -> bool:
    """Whether the producer was proven to follow V1 at that producer id and epoch (its current or last proven)."""
    s = seen.get(transactional_id)
    return s is not None and ((s.keeps_v1 and (s.producer_id, s.epoch) == (producer_id, epoch))
                              or s.proven == (producer_id, epoch))


def rise_counts(seen: dict[str, EpochSeen], transactional_id: str, producer_id: int, epoch: int,
                start: float | None) -> bool:
    """Record one poll's sighting of a producer on a Transaction V2 cluster (`start`: its transaction's start time
    when seen Ongoing, else None: a Prepare* is already at the epoch after the one it began at) and say whether its
    epoch rose out of an epoch proven to follow V1: a rise to count as on a V1 cluster. A new producer id (a new
    producer, or an exhausted epoch) or an epoch that went back starts over, counting nothing."""
    s = seen.get(transactional_id)
    if s is not None and s.producer_id == producer_id and s.epoch == epoch:
        if start is not None and start not in s.starts and len(s.starts) < PROOF_STARTS:
            s.starts.append(start)
        return False
    counts = s is not None and s.keeps_v1 and s.producer_id == producer_id and epoch > s.epoch
    proven = None if s is None else (s.producer_id, s.epoch) if s.keeps_v1 else s.proven
    seen[transactional_id] = EpochSeen(producer_id, epoch, [start] if start is not None else [], proven)
    return counts


def counted_rise_time(seen: dict[str, EpochSeen], transactional_id: str,
                      rises: Sequence[tuple[float, int]] | None) -> float | None:
    """When the producer's epoch last rose in a way counted on a V2 cluster (`rises`: its entries kept for
    producer_epoch_bumps, `ClusterState.producer_epochs`, which there hold counted rises only), 0.0 for a producer
    proven at its epoch with none counted yet, None for any other: the value the Prometheus twin reads, so that each
    counted rise is one rise of a series that was already there (the first rise included) and a client that
    speaks V2 exports nothing."""
    if rises:
        return rises[-1][0]
    s = seen.get(transactional_id)
    return 0.0 if s is not None and s.keeps_v1 else None


def counted_increase(prev_producer_id: int | None, prev_epoch: int | None, producer_id: int | None,
                     epoch: int | None, prev_keeps_v1: bool | None, prev_v2: bool | None, v2: bool | None) -> int:
    """The rise from one observation of a transactional producer to the next that restarts, fences and timeout
    aborts made, as the weekly report counts it from the history (`spark_analytics.aggregations.transactions.
    _increase`, the same rule over columns) and the dashboard lists it: all of it between two polls before
    Transaction V2 (each InitProducerId or fence adds one); into or out of a poll at V2 (`v2`), one if it rose out
    of an epoch proved to keep V1's rules (`prev_keeps_v1`: counted once, as `rise_counts` counts it live), else
    none (a V2 transaction end looks the same). A new producer id, an epoch that went back, or anything unknown
    (None: a flag a day rolled up before it was kept reads as false) counts nothing. The arguments are in the
    column rule's order."""
    if None in (prev_producer_id, prev_epoch, producer_id, epoch) or prev_producer_id != producer_id:
        return 0
    assert prev_epoch is not None and epoch is not None
    rise = epoch - prev_epoch
    if not prev_v2 and not v2:
        return max(rise, 0)
    return max(min(rise, 1), 0) if prev_keeps_v1 else 0

