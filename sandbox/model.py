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

from sandbox.groups import ConsumerGroups
from sandbox.logs import PartitionLogs
from sandbox.replication import Replication
from sandbox.spec import ClusterSpec
from sandbox.transactions import Transactions


class Cluster(Replication, PartitionLogs, ConsumerGroups, Transactions):
    """The simulated cluster. All mutation goes through `advance` and the incident methods."""

    def __init__(self, spec: ClusterSpec, now: float, host: str = "127.0.0.1") -> None:
        super().__init__(spec, now, host)
        self._init_controller(now)
        self._init_groups(spec.groups)
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
                    g.position[(topic, len(t.partitions) - 1)] = 0.0
