"""Durability posture: how many more broker failures a partition can take.

Two thresholds matter to on-call. Writes with acks=all stop once the ISR
shrinks below `min.insync.replicas`; acknowledged data is lost once every
replica that holds it is gone. Acknowledged messages live on every ISR member,
so losing all of the current ISR loses them; with unclean leader election
enabled that takes only crashes (an out-of-sync replica is elected and the
tail is truncated), without it the partition goes offline instead until an
ISR member returns, and only lost disks lose data. Both counts are the
failures still tolerated, 0 meaning the next failure crosses the line (or it
already has: see the under-min-ISR / offline flags beside them).
"""

from __future__ import annotations

from collections.abc import Iterable

from collectors.model.records import PartitionRecord


def failures_before_write_stop(isr_size: int, min_isr: int, online: bool) -> int:
    if not online:
        return 0
    return max(0, isr_size - min_isr)


def failures_before_data_loss(isr_size: int, online: bool) -> int:
    if not online:
        return 0
    return max(0, isr_size - 1)


def topic_posture(partitions: Iterable[PartitionRecord]) -> tuple[int, int]:
    """The worst partition decides: (failures before writes stop, failures before data loss)."""
    write, loss = None, None
    for p in partitions:
        w = failures_before_write_stop(len(p.isr), p.min_insync_replicas, not p.offline)
        d = failures_before_data_loss(len(p.isr), not p.offline)
        write = w if write is None else min(write, w)
        loss = d if loss is None else min(loss, d)
    return (write or 0, loss or 0)
