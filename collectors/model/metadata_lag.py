"""A broker whose metadata cache lags the controller, proved by its own answers (ZooKeeper mode).

In ZooKeeper mode the controller pushes each change of leadership to every broker (UpdateMetadata), and a broker
answers clients' Metadata from the cache those pushes fill. A broker that stops applying them (its request queue
stuck, the controller's channel to it wedged) stays registered and answers, with leaders that moved long ago:
the clients it answers go to old leaders, get NOT_LEADER_OR_FOLLOWER and ask again, and nothing in the cluster's
own figures says which broker. A KRaft broker says how far behind it is (DescribeQuorum, `kraft_observer_lagging`);
a ZooKeeper broker says it only by what it answers.

Evidence, not risk: a partition's leader epoch never goes back for the same topic (KIP-320), so a broker that
answers an epoch older than one some answer showed by time t has a cache older than t: at any later moment its lag
is at least that moment less t. "The same topic" needs topic ids (Metadata v10+, Kafka 2.8+ with an
inter.broker.protocol.version of 2.8 or later): without them a topic deleted and created again starts its epochs
over, and a current broker's answer would read as behind the old topic's. So an answer without ids is no evidence.

A lag shorter than a poll reads as small, and a cache that caught up as nothing behind; a cache behind only on what
did not move is harmless and not seen. Each poll every broker is asked about a few topics (`probe_topics`): those
where a broker was behind, then those whose epochs moved last, then the next few by name in a round over them all,
within a budget of partitions (a Metadata answer carries every partition of a topic asked). A broker behind stays
remembered until it answers again, so the bound grows rather than starting over when it misses a poll or other
topics move; that part is checkpointed (`saved` / `restore`), so a restart keeps it too.

Pure: the adapter asks (`collectors.sources.kafka_adapter`), the snapshot keeps the memory (`EpochMemory`, in the
cluster state).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

Key = tuple[str, int]
ProbeView = Mapping[Key, tuple[int, str | None]]
"""What one broker answered for the topics asked: partition -> (leader epoch, topic id or None)."""

PROBE_TOPICS = 8
PROBE_PARTITIONS = 500
"""At most this many topics, and partitions in all, asked of each broker per poll: every broker is asked every poll
(B small requests, as ListGroups already is), so the answers stay small to build and decode on a 100-broker cluster.
A topic of more partitions than the budget is asked only where a broker was behind on it."""

Saved = list[tuple[str, int, int, str, float, tuple[int, ...]]]
"""The checkpointed part: (topic, partition, epoch seen, topic id, when seen, the brokers behind on it)."""


class Believed(Protocol):
    """A partition of the Metadata believed (`collectors.model.observations.PartitionMeta`)."""

    topic: str
    partition: int
    leader_epoch: int | None
    topic_id: str | None


@dataclass(frozen=True, slots=True)
class Behind:
    """One broker's answer at older leader epochs than seen: how many of the partitions asked, and how long ago,
    at least, the newest epoch it did not know was seen elsewhere (the lower bound of its lag)."""

    partitions: int
    at_least_s: float


@dataclass(slots=True)
class EpochMemory:
    """Per partition the highest leader epoch seen, its topic id and by when (an upper bound: the time every answer
    of that poll was in, so the epoch existed then); per topic when one of its epochs last moved; per broker the
    partitions it was last found behind on."""

    seen: dict[Key, tuple[int, str | None, float]] = field(default_factory=dict)
    moved: dict[str, float] = field(default_factory=dict)
    behind_by: dict[int, frozenset[Key]] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)  # partitions per topic, as last read (`probe_topics`)
    cursor: str = ""  # the last topic `probe_topics` took in its round by name

    @property
    def behind(self) -> set[Key]:
        return set().union(*self.behind_by.values()) if self.behind_by else set()

    def witness(self, believed: Iterable[Believed], probes: Mapping[int, ProbeView], at: float) -> int:
        """Learn this poll's epochs: those of the Metadata believed (`collectors.sources.metadata_epochs`), then any
        higher one a broker asked showed for the same topic id. Returns how many partitions the believed answer had.

        Only an epoch that rises for the same topic is a move (`probe_topics`): a first sight, or a topic of another
        id (deleted and created again), starts a partition's memory over, and nothing is behind it yet. A believed
        epoch lower than the one seen for the same id cannot happen (the adapter asks other brokers then); it is
        taken as the truth rather than making every broker look behind for ever."""
        seen, moved = self.seen, self.moved
        n = 0
        for p in believed:
            epoch = p.leader_epoch
            if epoch is None:
                continue
            n += 1
            key = (p.topic, p.partition)
            s = seen.get(key)
            if s is None or s[0] != epoch or s[1] != p.topic_id:
                seen[key] = (epoch, p.topic_id, at)
                if s is not None and epoch > s[0] and s[1] is not None and s[1] == p.topic_id:
                    moved[key[0]] = at
        for view in probes.values():
            for key, (epoch, tid) in view.items():
                s = seen.get(key)
                if s is not None and epoch > s[0] and tid is not None and tid == s[1]:
                    seen[key] = (epoch, tid, at)
                    moved[key[0]] = at
        return n

    def lagging(self, probes: Mapping[int, ProbeView], now: float) -> dict[int, Behind]:
        """The brokers whose answer shows partitions at an older epoch than seen for the same topic id, with the
        lower bound of their lag at `now` (a time no later than their answer; 0 for epochs seen this poll). Each
        broker answered is remembered behind on those partitions, or on none; one not answered keeps what it was."""
        out: dict[int, Behind] = {}
        seen = self.seen
        for node, view in probes.items():
            keys, bound = [], 0.0
            for key, (epoch, tid) in view.items():
                s = seen.get(key)
                if s is not None and epoch < s[0] and tid is not None and tid == s[1]:
                    keys.append(key)
                    bound = max(bound, now - s[2])
            if keys:
                out[node] = Behind(len(keys), bound)
                self.behind_by[node] = frozenset(keys)
            else:
                self.behind_by.pop(node, None)
        return out

    def probe_topics(self, limit: int = PROBE_TOPICS, budget: int = PROBE_PARTITIONS) -> list[str]:
        """The topics to ask every broker about this poll, at most `limit` topics and `budget` partitions (a topic's
        size from `sizes`; unknown counts as one): those some broker was behind on; then those whose epochs moved
        last (ties by name), up to three quarters of the topics; then the next topics by name after those asked by
        the last poll, round and round, so that every topic is asked of every broker in time and a move another
        broker has not applied is seen even where the believed answer came from it. Called once a poll: it moves
        that round on."""
        out: list[str] = []
        used = 0

        def take(topic: str, anyway: bool = False) -> None:
            nonlocal used
            n = self.sizes.get(topic, 1)
            if len(out) < limit and topic not in out and (used + n <= budget or anyway):
                out.append(topic)
                used += n

        behind = sorted({t for t, _ in self.behind})
        for i, topic in enumerate(behind):
            take(topic, anyway=i == 0)  # the first topic behind, whatever its size
        # candidates enough that topics too big for what is left of the budget can be passed over
        pool = heapq.nsmallest(4 * limit, self.moved.items(), key=lambda kv: (-kv[1], kv[0]))
        moved_limit = max(len(out), limit - limit // 4)
        for topic, _ in pool:
            if len(out) >= moved_limit:
                break
            take(topic)
        names = sorted(self.sizes)
        start = bisect.bisect_right(names, self.cursor)
        last = None
        for topic in names[start:] + names[:start]:
            if len(out) >= limit or used >= budget:
                break
            if topic not in out:
                take(topic)
                last = topic if topic in out else last
        if last is not None:
            self.cursor = last
        return out

    def prune(self, witnessed: int, present: Callable[[], Collection[Key]], brokers: Collection[int],
              unread_topics: Collection[str] = ()) -> None:
        """Forget partitions no longer in the cluster, save those of topics this poll could not read, and brokers
        gone from it. `witnessed`: how many partitions the believed answer had (`witness`); the memory holds at
        least those, so only a bigger one has anything to forget, and `present` is built only then."""
        if len(self.seen) > witnessed:
            keep = set(present())
            unread = set(unread_topics)
            for k in [k for k in self.seen if k not in keep and k[0] not in unread]:
                del self.seen[k]
            topics = {t for t, _ in self.seen}
            for t in [t for t in self.moved if t not in topics]:
                del self.moved[t]
        for node in [b for b in self.behind_by if b not in brokers]:
            del self.behind_by[node]
        for node, keys in list(self.behind_by.items()):
            if any(k not in self.seen for k in keys):
                kept = frozenset(k for k in keys if k in self.seen)
                if kept:
                    self.behind_by[node] = kept
                else:
                    del self.behind_by[node]

    def clear(self) -> None:
        self.seen.clear()
        self.moved.clear()
        self.behind_by.clear()
        self.sizes.clear()
        self.cursor = ""

    def saved(self) -> Saved:
        """What a checkpoint keeps: the partitions some broker is behind on, with their epoch seen and when."""
        by_key: dict[Key, list[int]] = {}
        for node, keys in self.behind_by.items():
            for k in keys:
                by_key.setdefault(k, []).append(node)
        out: Saved = []
        for (topic, part), nodes in sorted(by_key.items()):
            s = self.seen.get((topic, part))
            if s is not None and s[1] is not None:
                out.append((topic, part, s[0], s[1], s[2], tuple(sorted(nodes))))
        return out

    @classmethod
    def restore(cls, rows: Saved) -> EpochMemory:
        m = cls()
        by_node: dict[int, set[Key]] = {}
        for topic, part, epoch, tid, at, nodes in rows:
            m.seen[(topic, part)] = (epoch, tid, at)
            m.moved[topic] = max(m.moved.get(topic, at), at)
            for node in nodes:
                by_node.setdefault(node, set()).add((topic, part))
        m.behind_by = {node: frozenset(keys) for node, keys in by_node.items()}
        return m
