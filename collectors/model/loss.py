"""Evidence of lost data: truncations, unclean elections, what consumers lost, timed-out transactions, ZooKeeper.

Everything else the monitor reports is risk; this module reports what the protocol lets us *prove* happened.

**Truncation.** Kafka keeps, per replica, which leader epoch wrote which offsets (the leader epoch cache,
KIP-101). When the leader changes, the new leader's log is the truth; a consumer (or a monitor) can ask it with
OffsetForLeaderEpoch (KIP-320, the consumer's own truncation check) where the epoch the *old* leader wrote in
ends in the new leader's log. If that end offset is below the highest high watermark we saw under the old
epoch, the messages between them were committed (below a high watermark: acknowledged to acks=all producers
and readable by consumers) and are gone: ``lost = high watermark we saw - end offset``. It is a lower bound —
anything committed after our last look is unknown to us — and it is exact when we looked just before.

Why not the high watermark alone: right after a normal leader change the new leader's high watermark can be
briefly lower than the old one until the followers fetch again (KIP-207), and with producers still writing it
climbs back past the old maximum within seconds even after a real truncation. The epoch's end offset in the
new leader's log does neither: it is where the old epoch's data ends, for good.

**Unclean election.** A new leader that was not in the last ISR we saw for the partition *and* whose log ends
the old epoch below the committed high watermark: it lacked committed messages, so it cannot have been in sync.
A new leader from outside the ISR seen, with the whole log, is not recorded: between two polls a restarted
broker rejoins the ISR and the preferred-leader election moves leadership back to it, cleanly (the 24-hour
soak does that after every broker restart), and nothing was lost.

**Consumers.** A committed offset below the log start: retention deleted messages the group never read
(``log start - committed`` of them; recorded as it grows, so the ledger's sum is the total skipped; what is found
at a group's first sight only sets the mark: `group_evidence`). A group that had committed past a proven
truncation point read messages that are gone and, unless it resets, silently skips as many new ones written at
those offsets (`truncated_readers`). Not evidence: a commit read above the high watermark of the same poll —
the poll reads the high watermarks before the commits, and a consumer commits in between all the time.

**Transactions.** A transaction seen open that ended aborted with its producer's epoch bumped once, when it had
been open for its whole timeout, was aborted by the coordinator (the producer died mid-transaction; Kafka fences
it with the bump): its writes are gone for read_committed readers, and whatever the application had not retried
elsewhere with them. More bumps are more ends than one (a commit, a restart; with Transaction V2 every end): the
abort seen is a later transaction's, perhaps its application's own, and is not recorded. Nor is any on a cluster
running Transaction V2 (KIP-890), where the application's own abort bumps the epoch once too: one bump there
cannot tell who aborted, and an application that aborts knows it and retries; unless the producer proved it keeps
V1's rules there (an older client: two transactions begun at the epoch, `collectors.model.txn_clients`). Recorded
with the producer id, epochs and partitions; when the transactional id next shows a newer epoch (a new instance called
InitProducerId), that return is recorded too, linked by the transactional id and the time of the abort
(`transaction_evidence`).

**ZooKeeper.** A serving server whose zxid is lower than the highest we saw from it, without a newer epoch:
its data went back in time (restored from an old snapshot, a data directory swapped) and the transactions in
between — znode writes: ISR changes, configs, ACLs — are gone from it (`zxid_regressions`; the count is the
zxid counter difference within the epoch). A newer epoch with a lower counter is an election, not a loss.

The functions are pure: `epoch_questions` says which partitions to ask about (the adapter asks their current
leaders), `settle` turns the answers into `LossRecord`s and moves each partition's `EpochWatch` forward. A
partition whose new leader could not answer keeps its old watch and is asked again next poll.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass

from collectors.model.observations import PartitionMeta
from collectors.model.records import GroupPartitionRecord, LossRecord, TransactionRecord, ZkServerRecord
from collectors.model.txn_clients import EpochSeen, proved_v1
from collectors.model.vocabulary import (
    BEYOND_LOG_END,
    RETENTION_SKIPPED,
    TRUNCATION,
    TXN_PRODUCER_RETURNED,
    TXN_TIMEOUT_ABORT,
    UNCLEAN_ELECTION,
    ZXID_REGRESSED,
)
from collectors.model.wording import count_of, plural

ABORT_STATES = frozenset({"PrepareAbort", "CompleteAbort", "Empty"})
PartitionKey = tuple[str, int]
GroupKey = tuple[str, str, int]  # (group, topic, partition)


@dataclass(slots=True)
class EpochWatch:
    """What we last knew for sure about one partition's leadership and how far its log was committed."""

    epoch: int
    leader: int
    isr: tuple[int, ...]
    hw_max: int | None  # the highest high watermark seen under `epoch`
    seen_at: float  # when `isr` was last seen
    topic_id: str | None = None  # the topic the watch is of (None: the broker gives no ids, or an old checkpoint)


@dataclass(frozen=True, slots=True)
class EpochQuestion:
    """Ask `leader` (the partition's current leader) where `epoch` ends in its log."""

    topic: str
    partition: int
    leader: int
    epoch: int
    current_epoch: int


def epoch_questions(partitions: Iterable[PartitionMeta], watches: Mapping[PartitionKey, EpochWatch]
                    ) -> list[EpochQuestion]:
    """Partitions whose leader epoch moved since the watch and that have a leader to ask."""
    out = []
    for p in partitions:
        w = watches.get((p.topic, p.partition))
        if w is not None and p.leader_epoch is not None and p.leader_epoch > w.epoch and p.leader >= 0:
            out.append(EpochQuestion(p.topic, p.partition, p.leader, w.epoch, p.leader_epoch))
    return out


def settle(cluster: str, partitions: Iterable[PartitionMeta], high_watermarks: Mapping[PartitionKey, int],
           answers: Mapping[PartitionKey, tuple[int, int]], watches: dict[PartitionKey, EpochWatch],
           unclean_topics: set[str], now: float, hw_epochs: Mapping[PartitionKey, int] | None = None
           ) -> list[LossRecord]:
    """This poll's evidence of loss, updating `watches` in place.

    `answers` maps a partition to (epoch, end offset) as its current leader answered the `EpochQuestion`
    (KIP-320's semantics: the largest epoch <= the one asked, and where it ends); a partition with a moved
    epoch and no answer (no leader yet, request failed) keeps its watch unchanged until one comes.

    `hw_epochs`: the leader epoch each high watermark was answered under, where the broker said (ListOffsets v4+).
    A high watermark counts for a watch of that epoch only: one answered after a bump the poll's Metadata had not
    seen yet holds the new epoch's writes, and taken as the old epoch's it would read as a truncation at the next
    leader change. Metadata older than the watch (a broker that has not caught up: a lower epoch) does not move
    the watch's ISR back either.
    """
    losses: list[LossRecord] = []
    epochs = hw_epochs or {}
    for p in partitions:
        key = (p.topic, p.partition)
        answered = high_watermarks.get(key)
        under = epochs.get(key)
        w = watches.get(key)
        if p.leader_epoch is None:
            continue
        if w is not None and p.topic_id is not None and w.topic_id is not None and p.topic_id != w.topic_id:
            # deleted and created again under its name: a new log from offset 0 and epoch 0, whose epochs say
            # nothing about the old one's high watermarks (it would read as everything truncated at the first
            # leader change). The old messages were deleted on purpose: not evidence of loss.
            del watches[key]
            w = None
        if w is None:
            if p.leader >= 0:
                watches[key] = EpochWatch(p.leader_epoch, p.leader, tuple(p.isr),
                                          _hw(answered, under, p.leader_epoch), now, p.topic_id)
            continue
        if p.leader_epoch <= w.epoch:  # same leadership: remember how far it committed, and its ISR
            hw = _hw(answered, under, w.epoch)
            if hw is not None and (w.hw_max is None or hw > w.hw_max):
                w.hw_max = hw
            if p.leader >= 0 and p.leader_epoch == w.epoch:
                w.isr, w.seen_at = tuple(p.isr), now
            w.topic_id = w.topic_id or p.topic_id  # a watch restored from a checkpoint without ids learns it
            continue
        if p.leader < 0 or key not in answers:
            continue  # ask again when it has a leader that answers
        unclean = p.topic in unclean_topics
        _, end = answers[key]
        truncated = w.hw_max is not None and 0 <= end < w.hw_max
        if truncated and p.leader != w.leader and p.leader not in w.isr:
            losses.append(LossRecord(
                cluster, now, UNCLEAN_ELECTION, p.topic, p.partition, None,
                f"leader {w.leader} (epoch {w.epoch}) -> {p.leader} (epoch {p.leader_epoch}), which was not in "
                f"the ISR {list(w.isr)} seen {now - w.seen_at:.0f}s earlier and lacks committed messages",
                w.leader, p.leader, w.epoch, p.leader_epoch, unclean))
        if truncated and w.hw_max is not None:
            losses.append(LossRecord(
                cluster, now, TRUNCATION, p.topic, p.partition, w.hw_max - end,
                f"high watermark {w.hw_max:,} under epoch {w.epoch} (leader {w.leader}); the new leader "
                f"{p.leader} (epoch {p.leader_epoch}) ends that epoch at offset {end:,}", w.leader, p.leader,
                w.epoch, p.leader_epoch, unclean, offset=end))
        watches[key] = EpochWatch(p.leader_epoch, p.leader, tuple(p.isr), _hw(answered, under, p.leader_epoch), now,
                                  p.topic_id or w.topic_id)
    return losses


def _hw(answered: int | None, under: int | None, epoch: int | None) -> int | None:
    """The high watermark answered, if it counts for `epoch`: answered under it, or under an epoch not said."""
    return answered if under is None or under == epoch else None


def awaiting_answers(partitions: Iterable[PartitionMeta], watches: Mapping[PartitionKey, EpochWatch]
                     ) -> set[PartitionKey]:
    """Partitions whose leader epoch moved and whose new leader has not answered yet (after `settle`): the commits
    seen before the change are still the ones `truncated_readers` must judge by, when the answer comes."""
    return {(p.topic, p.partition) for p in partitions
            if p.leader_epoch is not None and (w := watches.get((p.topic, p.partition))) is not None
            and p.leader_epoch > w.epoch}


@dataclass(slots=True)
class GroupMark:
    """Per group-partition: what the ledger already holds of the current episodes, and the last commit seen."""

    skipped: int  # messages skipped below the log start, recorded
    beyond: int  # messages read past a truncation point, recorded for the current episode (0: none)
    committed: int  # the committed offset at the last poll


def truncated_readers(truncations: Iterable[LossRecord], marks: dict[GroupKey, GroupMark]) -> list[LossRecord]:
    """Groups that had consumed past a truncation point: they read messages that are now gone, and unless they
    reset they skip as many new messages written at those offsets. Proven from the commit seen before the
    leader change (however short the window in which the offset was beyond the log end). Each record carries its
    truncation's epochs and cut (`offset`): which leader change's loss the group read past, told apart from
    another collector's record of the same (`collectors.outputs.history.loss_rows.covers`)."""
    out: list[LossRecord] = []
    cuts = [t for t in truncations if t.kind == TRUNCATION]
    if not cuts:
        return out  # the usual poll: no need to index every group-partition's mark
    by_partition: dict[PartitionKey, list[tuple[str, GroupMark]]] = {}
    for (gid, topic, part), mark in marks.items():
        by_partition.setdefault((topic, part), []).append((gid, mark))
    for t in cuts:
        if t.offset is None or t.topic is None or t.partition is None:
            continue
        for gid, mark in sorted(by_partition.get((t.topic, t.partition), [])):
            if mark.committed > t.offset and not mark.beyond:
                n = mark.committed - t.offset
                mark.beyond = n
                out.append(LossRecord(
                    t.cluster, t.time, BEYOND_LOG_END, t.topic, t.partition, n,
                    f"group {gid} had committed {mark.committed:,}; the truncation ended the log at {t.offset:,}: "
                    f"it read {plural(n, 'message')} that {count_of(n, 'is', 'are')} gone and, unless it resets, "
                    f"skips the {n:,} written in {count_of(n, 'its', 'their')} place", group_id=gid,
                    epoch_before=t.epoch_before, epoch_after=t.epoch_after, offset=t.offset))
    return out


def group_evidence(cluster: str, group_partitions: Iterable[GroupPartitionRecord],
                   marks: dict[GroupKey, GroupMark], now: float, recording: Container[str] | None = None,
                   held: Container[PartitionKey] = ()) -> list[LossRecord]:
    """Messages a group skipped, seen happen this poll, updating `marks` in place.

    A first sight sets the mark without a record. Group-partitions not in `group_partitions` are left alone
    (the caller prunes what no longer exists). Only groups in `recording` (None: all) get records; the others'
    marks follow silently, so what retention deleted while nobody ran a group is not counted when it comes back.
    What this poll cannot tell is not news either: without a log start (its leader did not answer) the recorded
    count stays, and without a high watermark so does an episode read past the log end. The partitions in
    `held` (`awaiting_answers`) keep the commit seen before their leader change.
    """
    out: list[LossRecord] = []
    for gp in group_partitions:
        key = (gp.group_id, gp.topic, gp.partition)
        c, start, hw = gp.committed_offset, gp.log_start_offset, gp.high_watermark
        if c is None:
            continue
        skipped = None if start is None else start - c if 0 <= c < start else 0  # None: this poll cannot tell
        mark = marks.get(key)
        if mark is None:
            marks[key] = GroupMark(skipped or 0, 0, c)
            continue
        if (gp.topic, gp.partition) not in held:
            mark.committed = c
        if hw is not None and c <= hw:
            mark.beyond = 0  # an episode ends when the offset is back in the log
        if skipped is None:
            continue
        recorded, mark.skipped = mark.skipped, skipped
        if skipped > recorded and (recording is None or gp.group_id in recording):
            out.append(LossRecord(
                cluster, now, RETENTION_SKIPPED, gp.topic, gp.partition, skipped - recorded,
                f"group {gp.group_id} committed {c:,}, the log now starts at {start:,}: retention deleted "
                f"{plural(skipped, 'message')} it never read"
                + (f" ({recorded:,} already counted)" if recorded else ""),
                group_id=gp.group_id))
    return out


def zxid_regressions(cluster: str, servers: Iterable[ZkServerRecord], seen: dict[str, tuple[int, int]],
                     now: float) -> list[LossRecord]:
    """ZooKeeper servers whose data went back in time, updating `seen` (server -> (epoch, zxid) last seen).

    Only serving servers count (a restarted follower syncs from the leader before it serves). The first sight
    of a server only records it."""
    out: list[LossRecord] = []
    for z in servers:
        if not z.serving or z.zxid is None or z.zxid_epoch is None:
            continue
        prev = seen.get(z.server)
        seen[z.server] = (z.zxid_epoch, z.zxid)
        if prev is None or z.zxid_epoch > prev[0] or z.zxid >= prev[1]:
            continue
        n = prev[1] - z.zxid if z.zxid_epoch == prev[0] else None
        out.append(LossRecord(
            cluster, now, ZXID_REGRESSED, None, None, n,
            f"ZooKeeper {z.server} serves zxid {z.zxid:#x} (epoch {z.zxid_epoch}) after {prev[1]:#x} (epoch "
            f"{prev[0]}): its data went back without a newer epoch"
            + (f", {plural(n, 'transaction')} of the epoch gone" if n is not None else ""),
            epoch_before=prev[0], epoch_after=z.zxid_epoch, server=z.server))
    return out


@dataclass(slots=True)
class TxnWatch:
    """Per transactional id: the transaction last seen open, and an abort not yet followed by a return."""

    state: str
    producer_id: int
    epoch: int
    start_time: float | None
    timeout_ms: int
    partitions: list[str]
    aborted_at: float | None = None  # when a coordinator timeout abort was found
    aborted_epoch: int | None = None  # the epoch the abort fenced the producer with


def transaction_evidence(cluster: str, transactions: Iterable[TransactionRecord], watches: dict[str, TxnWatch],
                         now: float, answered_by: float | None = None, every_end_bumps: bool = False,
                         v1_epochs: dict[str, EpochSeen] | None = None) -> list[LossRecord]:
    """Coordinator timeout aborts and the producers' returns, seen this poll; updates `watches` in place.

    `every_end_bumps`: the cluster runs Transaction V2 (`vocabulary.epochs_bump_at_every_end`), where the
    application's own abort bumps the epoch once as well. An abort seen after the timeout is then no proof that
    the coordinator made it, and nothing is recorded; the watches still follow the transactions. `v1_epochs`: the
    producers' epochs there and their proofs (`txn_clients`): a producer proven to follow V1 at the epoch its
    transaction was seen open at (an older client) bumps nothing at its own abort, and is judged as on a V1 cluster.

    An abort counts as the coordinator's timeout when the transaction had been open for its whole timeout by the
    time the abort was seen: by `answered_by` (`KafkaObservation.answered_by`, when the poll's answers were in),
    not `now` (when the poll began). Measured from `now`, an abort that came while the poll ran was missed for
    good, the next poll seeing nothing open any more: a poll that takes 1 s of the sandbox's 10-times-fast clock
    missed every one (tests/integration/test_loss_evidence.py)."""
    seen_by = now if answered_by is None else max(now, answered_by)
    out: list[LossRecord] = []
    for t in transactions:
        w = watches.get(t.transactional_id)
        if w is None:
            watches[t.transactional_id] = TxnWatch(t.state, t.producer_id, t.producer_epoch, t.start_time,
                                                   t.timeout_ms, list(t.partitions))
            continue
        still_open = t.state == "Ongoing" and t.start_time == w.start_time
        if w.state == "Ongoing" and w.start_time is not None and not still_open:
            open_for = seen_by - w.start_time
            # one bump: the coordinator's abort of the transaction seen open; more are several ends (a commit, a
            # restart, each end with Transaction V2), the abort seen a later transaction's, perhaps its own
            judged = not every_end_bumps or (v1_epochs is not None and proved_v1(
                v1_epochs, t.transactional_id, w.producer_id, w.epoch))
            if (judged and t.producer_id == w.producer_id and t.producer_epoch == w.epoch + 1
                    and t.state in ABORT_STATES and open_for >= w.timeout_ms / 1000.0):
                out.append(LossRecord(
                    cluster, now, TXN_TIMEOUT_ABORT, None, None, None,
                    f"transaction {t.transactional_id} (producer {w.producer_id}, epoch {w.epoch}) on "
                    f"{', '.join(w.partitions) or 'no partition yet'} was aborted by the coordinator at its "
                    f"{w.timeout_ms / 1000:.0f}s timeout (open for {open_for:.0f}s when seen aborted); the producer "
                    f"is fenced (epoch {t.producer_epoch})", epoch_before=w.epoch, epoch_after=t.producer_epoch,
                    transactional_id=t.transactional_id))
                w.aborted_at, w.aborted_epoch = now, t.producer_epoch
        elif w.aborted_at is not None and w.aborted_epoch is not None and t.producer_epoch > w.aborted_epoch:
            out.append(LossRecord(
                cluster, now, TXN_PRODUCER_RETURNED, None, None, None,
                f"producer {t.transactional_id} came back (epoch {t.producer_epoch}, producer {t.producer_id}) "
                f"{now - w.aborted_at:.0f}s after its transaction was aborted at the timeout (fenced at epoch "
                f"{w.aborted_epoch})", epoch_before=w.aborted_epoch, epoch_after=t.producer_epoch,
                transactional_id=t.transactional_id))
            w.aborted_at = w.aborted_epoch = None
        w.state, w.producer_id, w.epoch, w.start_time = t.state, t.producer_id, t.producer_epoch, t.start_time
        w.timeout_ms = t.timeout_ms
        if t.partitions or t.state != "Ongoing":
            w.partitions = list(t.partitions)
    return out
