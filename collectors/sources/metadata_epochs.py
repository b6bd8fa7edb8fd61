"""Which Metadata answer to believe: a partition's leader epoch never goes back.

Any broker answers Metadata from its own cache of the controller's state, and a broker slow to apply the
controller's updates (or cut off from it) answers with leaders and ISRs that have already changed. Taken as news,
one such answer between two current ones makes a partition's leader and ISR flip back and forth: false
``isr_expand`` / ``isr_shrink`` changes, ListOffsets sent to a broker that no longer leads (a stale ``offsets``
section), a dead broker listed alive. Kafka's own clients ignore a partition's metadata of a lower leader epoch
than they have seen (KIP-320); so do we, and since we want every partition current, we ask another broker.

Pure functions over the protocol's answer objects; the adapter does the asking.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Key = tuple[str, int]
KnownEpochs = Mapping[Key, tuple[int, str | None]]
"""(topic, partition) -> (the highest leader epoch believed, the topic's id or None)."""


def topic_id(topic: Any) -> str | None:
    """The topic's id as text, None where Metadata gave none: before v10, or the all-zero id of a broker that has
    no ids (a ZooKeeper cluster before 2.8)."""
    tid = getattr(topic, "topic_id", None)
    if tid is None or str(tid) == "00000000-0000-0000-0000-000000000000":
        return None
    return str(tid)


def _epoch(p: Any) -> int | None:
    e = getattr(p, "leader_epoch", -1)
    return None if e is None or e < 0 else e


def epochs_of(md: Any) -> dict[Key, tuple[int, str | None]]:
    """Each partition of an answer's topics without error, with its leader epoch and topic id (`topic_id`); a
    partition of no epoch (-1: before Metadata v7) is left out. What one broker answered when asked about a few
    topics (`collectors.model.metadata_lag`)."""
    out: dict[Key, tuple[int, str | None]] = {}
    for t in md.topics:
        if t.error_code != 0:
            continue
        tid = topic_id(t)
        for p in t.partitions:
            e = _epoch(p)
            if e is not None:
                out[(t.name, p.partition_index)] = (e, tid)
    return out


def behind(md: Any, known: KnownEpochs) -> set[Key]:
    """The partitions `md` shows at a lower leader epoch than `known` for the same topic: what a broker whose
    metadata lags tells. A topic of another id (deleted and created again: epochs start over) is not behind; nor is
    one whose id either side does not know (a broker older than 2.8, an old checkpoint)."""
    if not known:
        return set()
    out: set[Key] = set()
    for t in md.topics:
        if t.error_code not in (0, 5):
            continue
        tid = topic_id(t)
        for p in t.partitions:
            key = (t.name, p.partition_index)
            was = known.get(key)
            if was is None:
                continue
            e = _epoch(p)
            if e is not None and e < was[0] and (tid is None or was[1] is None or tid == was[1]):
                out.add(key)
    return out


def newest(answers: Iterable[tuple[Any, set[Key]]]) -> tuple[Any, dict[Key, Any]]:
    """From Metadata answers each with its `behind` set: the one to believe (the fewest partitions behind, the
    first of equals) and, for each of its partitions behind, the partition answer of the highest leader epoch any
    other answer gave. When every answer is behind for a partition the highest of them is believed: all the brokers
    asked agree, so the epoch did go back (a topic re-created on brokers that give no topic ids)."""
    answers = list(answers)
    best_md, best_behind = min(answers, key=lambda a: len(a[1]))
    patches: dict[Key, Any] = {}
    if not best_behind:
        return best_md, patches
    for md, _ in answers:
        if md is best_md:
            continue
        for t in md.topics:
            if t.error_code not in (0, 5):
                continue
            for p in t.partitions:
                key = (t.name, p.partition_index)
                if key not in best_behind:
                    continue
                have = patches.get(key)
                e = _epoch(p)
                if e is not None and (have is None or e > (_epoch(have) or -1)):
                    patches[key] = p
    base: dict[Key, Any] = {(t.name, p.partition_index): p for t in best_md.topics if t.error_code in (0, 5)
                            for p in t.partitions if (t.name, p.partition_index) in best_behind}
    return best_md, {k: p for k, p in patches.items() if (_epoch(p) or -1) > (_epoch(base[k]) or -1)}
