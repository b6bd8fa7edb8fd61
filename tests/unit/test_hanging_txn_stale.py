"""A hanging transaction's "seen twice" count outlives a poll that could not read it.

A producer with a transaction open that no coordinator knows is hanging once two polls have seen it so
(`ClusterState.unknown_open_txns`). A poll whose `transactions` section was stale (ListTransactions or
DescribeTransactions failed), or whose `producers` could not be read for the partition, judges nothing about it: the
open alert is kept over that poll (`kept_over_stale`), and so must the count be. Before, such a poll replaced the
counts with only what it could judge (nothing), so the next good poll counted 1 and said "not hanging": the critical
alert resolved, opened again a poll later, and its incident resolved and reopened with it (a re-page).

A count is still dropped by a poll that could read it and shows the transaction gone or known to its coordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from collectors.alerting.catalogue import kept_over_stale
from collectors.alerting.correlation import correlate
from collectors.alerting.evaluation import judge
from collectors.alerting.incidents import IncidentTracker
from collectors.config import Thresholds
from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.model.snapshot import build_snapshot
from tests.support.observed import ObservedPoller

TH = Thresholds()
HANG = ("hanging_transaction", "t-0")
PIDS = {0: 7, 1: 8}  # the producer with a transaction open on each partition


def observation(now: float, open_on: Iterable[int] = (0,), *, coordinator_knows: Iterable[int] = ()
                ) -> KafkaObservation:
    """Partitions t-0 and t-1; on those in `open_on`, producer `PIDS[p]` has a transaction open since offset 100
    (the LSO held there). The coordinator knows (Ongoing) the producers of the partitions in `coordinator_knows`."""
    o = KafkaObservation(time=now, cluster_id="c", controller_id=1, brokers=[(i, "h", 9092, None) for i in (1, 2, 3)],
                         partitions=[PartitionMeta("t", p, 1, 1, [1, 2, 3], [1, 2, 3], []) for p in PIDS],
                         topic_configs={"t": {"min.insync.replicas": "2"}})
    for p, pid in PIDS.items():
        held = p in open_on
        o.high_watermark[("t", p)], o.log_start[("t", p)], o.last_stable[("t", p)] = 500, 0, 100 if held else 500
        if held:
            o.producers[("t", p)] = [{"producer_id": pid, "producer_epoch": 0, "last_timestamp": int((now - 60) * 1000),
                                      "txn_start_offset": 100}]
    for p in coordinator_knows:
        o.listed_transactions[f"app-{p}"] = PIDS[p]
        o.transactions.append({"transactional_id": f"app-{p}", "coordinator": 1, "transaction_state": "Ongoing",
                               "producer_id": PIDS[p], "producer_epoch": 0, "transaction_timeout_ms": 60_000,
                               "transaction_start_time_ms": int((now - 10) * 1000), "partitions": [("t", p)]})
    return o


def transactions_whole(o: KafkaObservation) -> None:
    o.fail("transactions", "ListTransactions to broker 2 failed: KafkaTimeoutError")


def transactions_named(o: KafkaObservation) -> None:
    o.listed_transactions["other-app"] = 99
    o.fail("transactions", "DescribeTransactions other-app: COORDINATOR_LOAD_IN_PROGRESS", ["other-app"])


def producers_whole(o: KafkaObservation) -> None:
    o.producers.clear()
    o.fail("producers", "DescribeProducers failed")


def producers_named(o: KafkaObservation) -> None:
    del o.producers[("t", 0)]
    o.fail("producers", "DescribeProducers to broker 1 failed: KafkaTimeoutError", ["t-0"])


def offsets_named(o: KafkaObservation) -> None:
    """The leader's ListOffsets timed out: t-0's LSO unread, so its producers were not asked either."""
    del o.producers[("t", 0)], o.high_watermark[("t", 0)], o.last_stable[("t", 0)]
    o.fail("offsets", "ListOffsets to broker 1 failed: KafkaTimeoutError", ["t-0"])


def topic_in_error(o: KafkaObservation) -> None:
    """The topic's Metadata answered an error: its partitions not listed, nothing read of them."""
    o.partitions = [m for m in o.partitions if m.topic != "t"]
    o.producers.clear()
    o.high_watermark.clear(), o.last_stable.clear(), o.log_start.clear()
    o.fail("partitions", "metadata for topic t: LEADER_NOT_AVAILABLE", ["t"])


class IncidentPoller(ObservedPoller):
    """`ObservedPoller` with the incidents the poller correlates from each poll's alerts (`ClusterPoller._judge`)."""

    def __init__(self) -> None:
        super().__init__(TH)
        self.incidents = IncidentTracker(TH.incident_hold_down_s)
        # (poll, event, incident kind) of the incidents holding a hanging_transaction: opened, resolved, reopened
        self.events: list[tuple[int, str, str]] = []
        self.opened: list[tuple[int, tuple[str, str]]] = []  # (poll, alert): hanging_transaction alerts only
        self.resolved: list[tuple[int, tuple[str, str]]] = []
        self.polls = 0

    def poll(self, obs: KafkaObservation) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
        self.polls += 1
        obs.time = self.now
        snap = build_snapshot("c", obs, None, self.state, self.thresholds, self.now)
        kept = kept_over_stale(snap)
        current, opened, resolved = self.tracker.update(
            "c", judge(snap, self.state, self.thresholds, self.now, kept), self.now, kept)
        self.opened += [(self.polls, (a.rule, a.subject)) for a in opened if a.rule == HANG[0]]
        self.resolved += [(self.polls, (a.rule, a.subject)) for a in resolved if a.rule == HANG[0]]
        for a in current:
            a.incident = None
        _, events = self.incidents.update("c", correlate(snap, current), self.now)
        self.events += [(self.polls, e.event, e.incident.kind) for e in events
                        if e.event != "updated" and HANG[0] in e.incident.members]
        self.now += 30
        return {(a.rule, a.subject) for a in current}, {(a.rule, a.subject) for a in resolved}


def hanging_open() -> IncidentPoller:
    p = IncidentPoller()
    assert HANG not in p.poll(observation(p.now))[0]  # seen once: could be a transaction just starting
    assert HANG in p.poll(observation(p.now))[0]
    assert HANG in p.poll(observation(p.now))[0]
    assert p.opened == [(2, HANG)]
    assert [(n, kind) for n, kind, _ in p.events] == [(2, "opened")]
    return p


@pytest.mark.parametrize("stale", [transactions_whole, transactions_named, producers_whole, producers_named,
                                   offsets_named, topic_in_error])
def test_one_stale_poll_neither_resolves_nor_reopens_the_hanging_transaction(
        stale: Callable[[KafkaObservation], None]) -> None:
    p = hanging_open()
    o = observation(p.now)
    stale(o)
    assert HANG in p.poll(o)[0]  # kept over the stale poll
    over_stale = dict(p.state.unknown_open_txns)
    for _ in range(3):
        p.poll(observation(p.now))
    # no resolve, no second open; the incident stays open: no resolve, no reopen
    assert {"opened": p.opened, "resolved": p.resolved, "incident": [(n, event) for n, event, _ in p.events]} == {
        "opened": [(2, HANG)], "resolved": [], "incident": [(2, "opened")]}
    assert over_stale == {("t", 0, 7): 3}  # nothing judged over the stale poll: the count neither lost nor advanced


def test_a_partition_named_stale_keeps_its_own_count_only() -> None:
    """t-1's producers went unread and t-0's transaction is gone: t-0's count goes, t-1's stays."""
    p = IncidentPoller()
    p.poll(observation(p.now, (0, 1)))
    assert p.state.unknown_open_txns == {("t", 0, 7): 1, ("t", 1, 8): 1}
    o = observation(p.now, (1,))
    del o.producers[("t", 1)]
    o.fail("producers", "DescribeProducers t-1: NOT_LEADER_OR_FOLLOWER", ["t-1"])
    p.poll(o)
    assert p.state.unknown_open_txns == {("t", 1, 8): 1}
    assert ("hanging_transaction", "t-1") in p.poll(observation(p.now, (0, 1)))[0]
    assert p.state.unknown_open_txns == {("t", 0, 7): 1, ("t", 1, 8): 2}


def test_a_partition_whose_offsets_went_unread_keeps_its_count() -> None:
    """DescribeProducers is asked only where ListOffsets showed the LSO held back: a partition whose offsets were
    not read had its producers not read either."""
    p = IncidentPoller()
    p.poll(observation(p.now, (0, 1)))
    o = observation(p.now, (0, 1))
    del o.producers[("t", 0)], o.high_watermark[("t", 0)], o.last_stable[("t", 0)]
    o.fail("offsets", "ListOffsets to broker 1 failed: KafkaTimeoutError", ["t-0"])
    p.poll(o)
    assert p.state.unknown_open_txns == {("t", 0, 7): 1, ("t", 1, 8): 2}


def test_a_readable_poll_showing_the_transaction_gone_drops_the_count() -> None:
    p = hanging_open()
    assert HANG not in p.poll(observation(p.now, ()))[0]  # committed or aborted at last: the LSO moved on
    assert p.state.unknown_open_txns == {}
    assert p.resolved == [(4, HANG)]
    assert HANG not in p.poll(observation(p.now))[0]  # a new transaction, seen once: not hanging yet
    assert p.state.unknown_open_txns == {("t", 0, 7): 1}
    assert HANG in p.poll(observation(p.now))[0]


def test_a_poll_whose_coordinator_knows_the_transaction_drops_the_count_even_with_producers_stale() -> None:
    p = hanging_open()
    o = observation(p.now, coordinator_knows=(0,))
    producers_named(o)
    p.poll(o)
    assert p.state.unknown_open_txns == {}
    assert HANG not in p.poll(observation(p.now))[0]  # counted afresh: once


def test_a_producer_gone_from_a_readable_partition_drops_its_count_over_stale_transactions() -> None:
    """The transactions stale, the partition's producers read: the producer no longer has a transaction open."""
    p = hanging_open()
    o = observation(p.now)
    o.producers[("t", 0)][0]["txn_start_offset"] = -1
    transactions_whole(o)
    p.poll(o)
    assert p.state.unknown_open_txns == {}
