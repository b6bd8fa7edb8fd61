"""A broker whose metadata cache lags the controller, proved by its own answers (ZooKeeper mode).

In ZooKeeper mode the controller pushes each change of leadership to every broker (UpdateMetadata), and a broker
answers clients' Metadata from the cache those pushes fill. A broker that stops applying them (its request queue
stuck, the controller's channel to it wedged) stays registered and answers, with leaders that moved long ago:
the clients it answers go to old leaders, get NOT_LEADER_OR_FOLLOWER and ask again, and nothing in the cluster's
own figures says which broker. A KRaft broker says how far behind it is (DescribeQuorum, `kraft_observer_lagging`);
a ZooKeeper broker says it only by what it answers.

Evidence, not risk: a partition's leader epoch never goes back for the same topic (KIP-320), so a broker that
answers an epoch older than one some answer showed by time t has a cache older than t: at any later moment its lag
is at least that moment less t, and stays so for as long as it answers that same epoch, however often the partition
moves meanwhile. "The same topic" needs topic ids (Metadata v10+, Kafka 2.8+ with an inter.broker.protocol.version
of 2.8 or later): without them a topic deleted and created again starts its epochs over, and a current broker's
answer would read as behind the old topic's. So an answer without ids is no evidence.

A lag shorter than a poll reads as small, and a cache that caught up as nothing behind; a cache behind only on what
did not move is harmless and not seen. A broker stops applying the controller's updates as a whole, not topic by
topic, so a few topics that moved show it. Each poll every broker is asked about a few (`probe_topics`): those
where a broker is behind, the least recently asked first; those whose epochs moved in the last ten minutes; then the
next ones by name in a round over them all, within a budget of partitions (a Metadata answer carries every
partition of a topic asked; a topic bigger than the whole budget is never asked). What a broker is behind on, and
since when, is kept while it does not answer about it, and in the checkpoint (`saved` / `restore`).

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
(B small requests, as ListGroups already is), so the answers stay small to build and decode on a 100-broker
cluster. A topic of more partitions than the budget is never asked."""
MOVED_FOR_S = 600.0
"""How long a topic whose leader epochs moved is asked every poll (then the round asks it in its turn)."""
EARLIER_EPOCHS = 7
"""Earlier epochs remembered per partition with when each was seen (`replaced_at`), beside the highest."""

Saved = list[tuple[str, int, int, str, float, int, int, float]]
"""The checkpointed part, a row per broker behind on a partition: (topic, partition, epoch seen, topic id, when seen,
broker, the epoch it answered, since when that epoch is known replaced)."""


class Believed(Protocol):
    """A partition of the Metadata believed (`collectors.model.observations.PartitionMeta`)."""

    topic: str
    partition: int
    leader_epoch: int | None
    topic_id: str | None


@dataclass(frozen=True, slots=True)
class Seen:
    """The highest leader epoch any answer showed for a partition, its topic id, by when (an upper bound: the time
    every answer of that poll was in, so the epoch existed then), and the epochs seen before it, with their times."""

    epoch: int
    topic_id: str | None
    at: float
    earlier: tuple[tuple[int, float], ...] = ()

    def replaced_at(self, epoch: int) -> float:
        """The earliest time an epoch above `epoch` is known to have existed."""
        return min([t for e, t in self.earlier if e > epoch] + [self.at])


@dataclass(frozen=True, slots=True)
class Behind:
    """One broker's answer this poll at older leader epochs than seen: how many of the partitions asked, and the
    lower bound of its lag (the longest any of them has been known replaced)."""

    partitions: int
    at_least_s: float


@dataclass(slots=True)
class EpochMemory:
    """What the brokers' answers showed: per partition `Seen`; per topic when one of its epochs last rose; per broker
    the partitions it is behind on, each with the epoch it answered, since when that epoch is known replaced, and
    the topic id (a topic created again under the name is another partition)."""

    seen: dict[Key, Seen] = field(default_factory=dict)
    moved: dict[str, float] = field(default_factory=dict)
    behind_by: dict[int, dict[Key, tuple[int, float, str]]] = field(default_factory=dict)
    up: set[int] | None = None  # the brokers up at the last poll (None: not known): whose lag is worth asking about
    sizes: dict[str, int] = field(default_factory=dict)  # partitions per topic, as last read (`probe_topics`)
    asked: dict[str, int] = field(default_factory=dict)  # topic -> the `probe_topics` call that last took it
    calls: int = 0
    cursor: str = ""  # the last topic the round by name took

    def behind_topics(self) -> set[str]:
        """The topics some broker up is behind on (a broker down answers nothing: its topics would only take
        places)."""
        return {t for node, keys in self.behind_by.items() if self.up is None or node in self.up for t, _ in keys}

    def witness(self, believed: Iterable[Believed], probes: Mapping[int, ProbeView], at: float) -> int:
        """Learn this poll's epochs: those of the Metadata believed (`collectors.sources.metadata_epochs`), then any
        higher one a broker asked showed for the same topic id. Returns how many partitions the believed answer had.

        Only an epoch that rises for the same topic id is a move (`moved`). A first sight, or a topic of another id
        or of none, starts a partition's memory over. A believed epoch lower than the one seen for the same id is
        an answer of a lagging broker the adapter could not do better than (every other broker asked failed): it
        is not taken, epochs never go back."""
        seen, moved = self.seen, self.moved
        n = 0
        for p in believed:
            epoch = p.leader_epoch
            if epoch is None:
                continue
            n += 1
            key = (p.topic, p.partition)
            s = seen.get(key)
            if s is None or s.topic_id is None or s.topic_id != p.topic_id:
                if s is None or s.epoch != epoch or s.topic_id != p.topic_id:
                    seen[key] = Seen(epoch, p.topic_id, at)
            elif epoch > s.epoch:
                seen[key] = _risen(s, epoch, at)
                moved[key[0]] = at
        for view in probes.values():
            for key, (epoch, tid) in view.items():
                s = seen.get(key)
                if s is not None and epoch > s.epoch and tid is not None and tid == s.topic_id:
                    seen[key] = _risen(s, epoch, at)
                    moved[key[0]] = at
        return n

    def lagging(self, probes: Mapping[int, ProbeView], now: float) -> dict[int, Behind | None]:
        """Each broker answered: behind on which partitions of its answer, and since when. A partition it answers at
        the same epoch as before keeps its `since` (the partition may have moved again meanwhile: the bound does
        not start over); at another older epoch, the time an epoch above it was first seen. What it is behind on in
        topics its answer did not carry (not asked this poll, or answered with an error) is kept, unjudged.

        Returns per broker answered its `Behind` this poll, or None where its answer does not settle it: it proved
        nothing either way, or a smaller lag than what it is still remembered behind on elsewhere (a cache stops as
        a whole: nothing says it caught up there, and judging it by the younger partition would resolve the alert
        while the lag grows)."""
        out: dict[int, Behind | None] = {}
        seen = self.seen
        for node, view in probes.items():
            before = self.behind_by.get(node, {})
            answered = {t for t, _ in view}
            kept = {k: v for k, v in before.items() if k[0] not in answered
                    and (s := seen.get(k)) is not None and s.topic_id == v[2]}  # not a topic created again since
            fresh: dict[Key, tuple[int, float, str]] = {}
            for key, (epoch, tid) in view.items():
                s = seen.get(key)
                if s is not None and epoch < s.epoch and tid is not None and tid == s.topic_id:
                    was = before.get(key)
                    same = was is not None and was[0] == epoch and was[2] == tid
                    fresh[key] = (epoch, was[1] if same and was is not None else s.replaced_at(epoch), tid)
            if fresh or kept:
                self.behind_by[node] = {**kept, **fresh}
            else:
                self.behind_by.pop(node, None)
            bound = max([now - v[1] for v in fresh.values()], default=None)
            older = max([now - v[1] for v in kept.values()], default=None)
            if older is not None and (bound is None or older > bound):
                out[node] = None
            else:
                out[node] = Behind(len(fresh), max(0.0, bound or 0.0))
        return out

    def probe_topics(self, limit: int = PROBE_TOPICS, budget: int = PROBE_PARTITIONS, now: float | None = None
                     ) -> list[str]:
        """The topics to ask every broker about this poll: at most `limit` topics and `budget` partitions (a
        topic's size from `sizes`; bigger than `budget` is never asked; of unknown size, as after a restart, one a
        poll). First the topics some broker up is behind on, the least recently asked first, up to half the topics;
        then those whose epochs moved in the last `MOVED_FOR_S` before `now` (the latest move, by default), the least
        recently asked first, then the latest moved; then the next ones by name after the last poll's, round and
        round, which always gets a place: a topic that does not fit what is left is passed over until its next
        turn. Called once a poll: it moves the round on."""
        self.calls += 1
        out: list[str] = []
        used, unknown = 0, False

        def take(topic: str) -> bool:
            nonlocal used, unknown
            n = self.sizes.get(topic)
            if len(out) >= limit or topic in out or (n is None and unknown) or used + (n or 1) > budget:
                return False
            out.append(topic)
            used += n or 1
            unknown = unknown or n is None
            return True

        for topic in sorted(self.behind_topics(), key=lambda t: (self.asked.get(t, 0), t)):
            if len(out) >= max(1, limit // 2):
                break
            take(topic)
        if self.moved:
            horizon = (max(self.moved.values()) if now is None else now) - MOVED_FOR_S
            recent = heapq.nsmallest(4 * limit, ((t, at) for t, at in self.moved.items() if at >= horizon),
                                     key=lambda kv: (self.asked.get(kv[0], 0), -kv[1], kv[0]))
            for topic, _ in recent:
                if len(out) >= limit - 1:  # the round always gets a place
                    break
                take(topic)
        names = sorted(t for t, n in self.sizes.items() if n <= budget)
        start = bisect.bisect_right(names, self.cursor)
        for topic in names[start:] + names[:start]:
            if len(out) >= limit or used >= budget:
                break
            take(topic)  # already taken, or too big for what is left: passed over until its next turn
            self.cursor = topic
        for topic in out:
            self.asked[topic] = self.calls
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
            for d in (self.moved, self.asked):
                for t in [t for t in d if t not in topics]:
                    del d[t]
        def current(k: Key, v: tuple[int, float, str]) -> bool:
            s = self.seen.get(k)  # a topic deleted, created again, or grown past what can be asked: never judged
            return s is not None and s.topic_id == v[2] and self.sizes.get(k[0], 0) <= PROBE_PARTITIONS

        for node in list(self.behind_by):
            keys = self.behind_by[node]
            if node not in brokers:
                del self.behind_by[node]
            elif not all(current(k, v) for k, v in keys.items()):
                kept = {k: v for k, v in keys.items() if current(k, v)}
                if kept:
                    self.behind_by[node] = kept
                else:
                    del self.behind_by[node]

    def clear(self) -> None:
        """Forget everything (a KRaft cluster, where DescribeQuorum says how far each broker is)."""
        self.seen.clear()
        self.moved.clear()
        self.behind_by.clear()
        self.sizes.clear()
        self.asked.clear()
        self.calls, self.cursor, self.up = 0, "", None

    def saved(self) -> Saved:
        """What a checkpoint keeps: each partition a broker is behind on, with the epoch seen and when, the epoch the
        broker answered and since when it is known replaced."""
        out: Saved = []
        for node, keys in sorted(self.behind_by.items()):
            for (topic, part), (answered, since, tid) in sorted(keys.items()):
                s = self.seen.get((topic, part))
                if s is not None and s.topic_id == tid:
                    out.append((topic, part, s.epoch, tid, s.at, node, answered, since))
        return out

    @classmethod
    def restore(cls, rows: Saved) -> EpochMemory:
        m = cls()
        for topic, part, epoch, tid, at, node, answered, since in rows:
            m.seen[(topic, part)] = Seen(epoch, tid, at)
            m.behind_by.setdefault(node, {})[(topic, part)] = (answered, since, tid)
        return m


def _risen(s: Seen, epoch: int, at: float) -> Seen:
    return Seen(epoch, s.topic_id, at, ((*s.earlier, (s.epoch, s.at)))[-EARLIER_EPOCHS:])
