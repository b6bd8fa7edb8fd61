"""Partition logs growing at the front and shrinking at the back.

* Producers use acks=all: while |ISR| < `min.insync.replicas` their appends are
  rejected (NOT_ENOUGH_REPLICAS), so the log stops growing.
* Retention deletes whole segments: the log is rolled every segment interval
  and a segment is deleted once its newest record is older than `retention.ms`.

Both move only the log ends; copying to followers is replication's job, reading
is the groups'. Transactional appends are in `sandbox.transactions`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from sandbox.topology import Topic, Topology

DUE_MARGIN_S = 1e-3  # look at a topic this much before its next roll or deletion is due


class PartitionLogs(Topology):
    """Plain (non-transactional) producers, segment rolling and retention, and the topic configs they read."""

    def _produce(self, dt: float) -> None:
        brokers = self.brokers
        for t in self._producing:
            if not t.partitions:
                continue
            per_partition = t.produce_rate / len(t.partitions) * dt
            min_isr = self.min_isr(t.name)
            for p in t.partitions:
                leader = p.leader  # _accepts_acks_all, inlined: this runs for every producing partition
                if leader >= 0 and brokers[leader].process_up and len(p.isr) >= min_isr:
                    p.leo[leader] += per_partition

    def _retain(self) -> None:
        """Roll and delete segments; log starts follow the first segment (never past the high watermark).

        A topic is looked at only when a roll or a deletion may be due (`_retain_due`, kept a little early so
        float rounding never makes it late) or its high watermark moved: otherwise a step would change none of
        its partitions.
        """
        now = self.now
        touched, self._touched_for_retention = self._touched_for_retention, set()
        due = self._retain_due
        if now >= self._retain_next:
            candidates: Iterable[Topic] = self.topics.values()
        elif touched:
            candidates = sorted((self.topics[x] for x in touched), key=lambda t: self._rank[t.name])
        else:
            return
        for t in candidates:
            if t.internal or (now < due.get(t.name, now) and t.name not in touched):
                continue
            retention = self.retention_ms(t.name) / 1000.0
            roll_every = max(1.0, min(int(self.topic_config(t.name, "segment.ms")[0]) / 1000.0,
                                      retention / 10.0))
            first_roll = first_expiry = math.inf
            moved = False
            for p in t.partitions:
                if now - p.last_roll >= roll_every:
                    p.segments.append((now, p.leader_leo))
                    p.last_roll = now
                # A segment (base, next base) may go once its newest record (the next roll) is old.
                while len(p.segments) >= 2 and p.segments[1][0] <= now - retention:
                    p.segments.popleft()
                new_start = min(p.segments[0][1], p.hwm)
                if new_start > p.log_start:
                    p.log_start = new_start
                    moved = True
                first_roll = min(first_roll, p.last_roll)
                if len(p.segments) >= 2:
                    first_expiry = min(first_expiry, p.segments[1][0])
            due[t.name] = min(first_roll + roll_every, first_expiry + retention) - DUE_MARGIN_S
            if moved:
                self._touched_for_groups.add(t.name)
        # Every user topic has a due time now: a full pass gave one to each, and whatever drops one (a config
        # change, new partitions) sets _retain_next to -inf, so the next step is a full pass again.
        self._retain_next = min(due.values(), default=math.inf)

    def set_topic_config(self, topic: str, key: str, value: str | None) -> None:
        """A dynamic topic override (kafka-configs --alter); None deletes it so the broker default applies."""
        if value is None:
            self.topics[topic].configs.pop(key, None)
        else:
            self.topics[topic].configs[key] = value
        self._config_cache.clear()
        self._retain_due.pop(topic, None)  # retention or segment.ms may have changed: look at it next step
        self._retain_next = -math.inf
