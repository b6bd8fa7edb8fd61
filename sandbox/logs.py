"""Partition logs growing at the front and shrinking at the back.

* Producers use acks=all: while |ISR| < `min.insync.replicas` their appends are
  rejected (NOT_ENOUGH_REPLICAS), so the log stops growing.
* Retention deletes whole segments: the log is rolled every segment interval
  and a segment is deleted once its newest record is older than `retention.ms`.

Both move only the log ends; copying to followers is replication's job, reading
is the groups'. Transactional appends are in `sandbox.transactions`.
"""

from __future__ import annotations

from sandbox.topology import Topology


class PartitionLogs(Topology):
    """Plain (non-transactional) producers, segment rolling and retention, and the topic configs they read."""

    def _produce(self, dt: float) -> None:
        for t in self.topics.values():
            if t.produce_rate <= 0 or not t.partitions:
                continue
            per_partition = t.produce_rate / len(t.partitions) * dt
            min_isr = self.min_isr(t.name)
            for p in t.partitions:
                if self._accepts_acks_all(p, min_isr):
                    p.leo[p.leader] += per_partition

    def _retain(self) -> None:
        for t in self.topics.values():
            if t.internal:
                continue
            retention = self.retention_ms(t.name) / 1000.0
            roll_every = max(1.0, min(int(self.topic_config(t.name, "segment.ms")[0]) / 1000.0,
                                      retention / 10.0))
            for p in t.partitions:
                if self.now - p.last_roll >= roll_every:
                    p.segments.append((self.now, p.leader_leo))
                    p.last_roll = self.now
                # A segment (base, next base) may go once its newest record (the next roll) is old.
                while len(p.segments) >= 2 and p.segments[1][0] <= self.now - retention:
                    p.segments.popleft()
                new_start = min(p.segments[0][1], p.hwm)
                if new_start > p.log_start:
                    p.log_start = new_start

    def set_topic_config(self, topic: str, key: str, value: str | None) -> None:
        """A dynamic topic override (kafka-configs --alter); None deletes it so the broker default applies."""
        if value is None:
            self.topics[topic].configs.pop(key, None)
        else:
            self.topics[topic].configs[key] = value
