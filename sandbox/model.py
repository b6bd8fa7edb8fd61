"""A Kafka cluster as a state machine that moves with (simulated) time.

One `Cluster` is assembled from parts, each in the module named for what it
models, so a change to (say) transaction semantics is read and made in one
place:

* `sandbox.topology`: brokers, topics, partitions; setting resolution; the
  change log that drives the ZooKeeper znodes and the event log.
* `sandbox.controller`: the active controller and the KRaft metadata quorum.
* `sandbox.replication`: crashes, session expiry and fencing, leader election
  (clean and unclean), follower fetching and the ISR, flapping brokers, failed
  log directories.
* `sandbox.logs`: acks=all producers and segment retention.
* `sandbox.groups`: consumer groups' positions, commits and rebalances.
* `sandbox.transactions`: transactional producers and their coordinator.

This module keeps what spans them: the set-up order and the time step, whose
order matters (a broker's crash is seen before anything is produced, replication
copies what was produced in the same step, consumers read what it made durable).
"""

from __future__ import annotations

import contextlib
import gc
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from sandbox.groups import ConsumerGroups
from sandbox.logs import PartitionLogs
from sandbox.replication import Replication
from sandbox.spec import ClusterSpec
from sandbox.transactions import Transactions


class Cluster(Replication, PartitionLogs, ConsumerGroups, Transactions):
    """The simulated cluster. All mutation goes through `advance` and the incident methods."""

    def __init__(self, spec: ClusterSpec, now: float, host: str = "127.0.0.1") -> None:
        with _built_for_keeps(spec.partition_count() >= FREEZE_FROM_PARTITIONS):
            super().__init__(spec, now, host)
            self._init_controller(now)
            self._init_groups(spec.all_groups())
            self._init_transactions(spec.transactional_producers, now)

    def advance(self, now: float) -> None:
        """Move the cluster to time `now`. Large steps are split so rates and timeouts stay exact."""
        while now - self.now > 1.0:
            self._step(self.now + 1.0)
        if now > self.now:
            self._step(now)

    def _step(self, now: float) -> None:
        dt = now - self.now
        self.now = now
        self._flap()
        self._expire_sessions()
        self._produce(dt)
        self._run_transactions(dt)
        self._replicate(dt)
        self._retain()
        self._consume(dt)
        self._run_quorum(dt)
        self._rebalance_leaders()

    def add_partitions(self, topic: str, count: int, replication_factor: int) -> None:
        """Add `count` partitions to a topic: a creation that completes, or `kafka-topics --alter --partitions`.

        Here rather than in a part because it touches two: the topic grows and its groups start reading the
        new partitions from offset 0.
        """
        t = self.topics[topic]
        for _ in range(count):
            t.partitions.append(self._new_partition(topic, len(t.partitions), replication_factor))
            for g in self.groups.values():
                if topic in g.spec.topics:
                    key = (topic, len(t.partitions) - 1)
                    g.position[key] = 0.0
                    g.behind = None
                    if g.uncommitted is not None:
                        g.uncommitted.add(key)  # committed as 0 at the group's next commit
        self._index_replicas()  # keep partitions_with_replica in topic order
        self._retain_due.pop(topic, None)
        self._retain_next = -math.inf  # the next step looks at every topic again (see PartitionLogs._retain)

    def recreate_topic(self, topic: str) -> None:
        """`kafka-topics --delete` then `--create` of the same name, between two polls: a new topic id, every
        partition's log empty from offset 0 and leader epoch 0 on the same replicas, all in sync; the groups'
        offsets for it deleted (Kafka drops a deleted partition's offsets), so its readers start at offset 0 again
        (auto.offset.reset=earliest). Nothing committed is lost: the old messages were deleted on purpose.

        Here rather than in a part because it touches three: the topic, its replicas' logs and its readers.
        """
        t = self.topics[topic]
        old_id, old_hw = t.topic_id, sum(p.hwm for p in t.partitions)
        del self.topic_ids[old_id]
        t.topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"{self.cluster_id}/{topic}/{old_id}")
        self.topic_ids[t.topic_id] = topic
        for p in t.partitions:
            self._wake(p)
            live = [r for r in p.replicas if self.brokers[r].registered]
            p.leader, p.leader_epoch, p.isr = (live[0] if live else -1), 0, live or [p.replicas[0]]
            p.partition_epoch += 1
            p.leo = dict.fromkeys(p.replicas, 0.0)
            p.caught_up_at = dict.fromkeys(p.replicas, self.now)
            p.hwm = p.log_start = 0
            p.segments.clear()
            p.segments.append((self.now, 0))
            p.last_roll = self.now
            p.producers.clear()
            p.open_txn_start.clear()
            p.hanging_producers.clear()
            p.failed_replicas.clear()
            p.stalled, p.hw_dip = False, None
            p.epoch_starts = [(0, 0)]
            self.changes.partitions.add((topic, p.index))
        self.changes.topics.add(topic)
        for g in self.groups.values():
            if topic in g.reads:
                for p in t.partitions:
                    g.position[(topic, p.index)] = 0.0
                    g.committed[(topic, p.index)] = 0
                g.behind = None
        self._touch(topic)
        self._retain_due.pop(topic, None)
        self._retain_next = -math.inf
        self.log(f"topic recreated {topic}: id {old_id} -> {t.topic_id}; {len(t.partitions)} partitions from "
                 f"offset 0 and leader epoch 0, the old {old_hw:,} messages deleted on purpose; 0 messages lost")

    # ----------------------------------------------------------------- ground truth for tests
    def ground_truth_broker_outage(self, broker_id: int, include_internal: bool = True) -> BrokerOutage:
        """What an outage of `broker_id` does to the partitions it holds a replica of, read from the model.

        For tests that compare what a monitor reports over the wire with what is really so: the same
        partition classes as `kafka-topics --describe --unavailable-partitions / --under-min-isr-partitions /
        --at-min-isr-partitions / --under-replicated-partitions` would list, and the topics involved. Works at
        any time (before the controller noticed, a dead leader still leads and nothing is under-replicated).
        """
        hit = [p for p in self._replicas_on.get(broker_id, ()) if include_internal or not self.topics[p.topic].internal]
        offline, under_min, at_min, under_rep = set(), set(), set(), set()
        for p in hit:
            key = (p.topic, p.index)
            isr, min_isr = len(p.isr), self.min_isr(p.topic)
            if isr < len(p.replicas):
                under_rep.add(key)
            if not p.online:
                offline.add(key)
            elif isr < min_isr:
                under_min.add(key)
            elif isr == min_isr:
                at_min.add(key)
        topics = frozenset(p.topic for p in hit)
        return BrokerOutage(
            broker_id=broker_id, down=not self.brokers[broker_id].process_up,
            registered=self.brokers[broker_id].registered, partitions=frozenset((p.topic, p.index) for p in hit),
            led=frozenset((p.topic, p.index) for p in hit if p.leader == broker_id),
            offline=frozenset(offline), under_min_isr=frozenset(under_min), at_min_isr=frozenset(at_min),
            under_replicated=frozenset(under_rep), topics=topics,
            unclean_topics=frozenset(t for t in topics if self.unclean_allowed(t)))


FREEZE_FROM_PARTITIONS = 10_000


@contextlib.contextmanager
def _built_for_keeps(freeze: bool) -> Iterator[None]:
    """Keep the cyclic garbage collector off a cluster's objects: they live as long as the cluster.

    100,000 partitions are a million small containers. Collections triggered while they are created would
    take most of the build time, and each later full collection would walk all of them (0.7 s, holding the
    GIL in the middle of a poll) without ever finding garbage. So the collector pauses during the build, and
    a big cluster's objects are then frozen (`gc.freeze`, process-wide: after a collection, so that no garbage
    is frozen with them). The model holds no reference cycles, so reference counting still frees it.
    """
    was = gc.isenabled()
    if freeze:
        gc.collect()
    gc.disable()
    try:
        yield
        if freeze:
            gc.freeze()
    finally:
        if was:
            gc.enable()


@dataclass(frozen=True)
class BrokerOutage:
    """`Cluster.ground_truth_broker_outage`: (topic, partition) sets of the partitions a broker holds.

    `offline`, `under_min_isr` and `at_min_isr` exclude one another (a partition without a leader is only
    offline; the min-ISR classes count only partitions that have one); `under_replicated` is ISR smaller
    than the replica list, leader or not. `at_min_isr` includes topics whose min ISR equals their replication
    factor (always "at min ISR" when healthy), as kafka-topics lists them.
    """

    broker_id: int
    down: bool  # the broker's process is not running
    registered: bool  # the controller still counts it in (its session has not expired yet)
    partitions: frozenset[tuple[str, int]]  # every partition with a replica on the broker
    led: frozenset[tuple[str, int]]  # of those, the ones it leads now
    offline: frozenset[tuple[str, int]]
    under_min_isr: frozenset[tuple[str, int]]
    at_min_isr: frozenset[tuple[str, int]]
    under_replicated: frozenset[tuple[str, int]]
    topics: frozenset[str]
    unclean_topics: frozenset[str]  # of those, the ones with unclean.leader.election.enable=true

    @property
    def unclean_possible(self) -> bool:
        return bool(self.unclean_topics)
