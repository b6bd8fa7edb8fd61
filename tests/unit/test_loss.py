"""collectors.model.loss: truncation is proven by where the new leader ends the old epoch, never by a dip."""

from __future__ import annotations

from collectors.model.loss import EpochWatch, epoch_questions, settle
from collectors.model.observations import PartitionMeta

T = 1_800_000_000.0


def meta(epoch: int | None, leader: int, isr: list[int], replicas: tuple[int, ...] = (1, 2, 3)) -> PartitionMeta:
    return PartitionMeta("orders", 3, leader, epoch, list(replicas), isr, [])


def run(watches: dict, p: PartitionMeta, hw: int | None, answer: tuple[int, int] | None = None,
        unclean: bool = False, now: float = T) -> list:
    hws = {} if hw is None else {("orders", 3): hw}
    answers = {} if answer is None else {("orders", 3): answer}
    return settle("c", [p], hws, answers, watches, {"orders"} if unclean else set(), now)


def test_first_sight_only_starts_watching() -> None:
    """Page on what you saw happen: a partition first seen after an old unclean election is not a loss."""
    w: dict = {}
    assert run(w, meta(7, 2, [2]), 48_800) == []
    assert w[("orders", 3)] == EpochWatch(7, 2, (2,), 48_800, T)
    assert epoch_questions([meta(7, 2, [2])], w) == []


def test_same_epoch_tracks_the_highest_watermark_and_the_isr() -> None:
    w: dict = {}
    run(w, meta(5, 1, [1, 2, 3]), 1_000)
    run(w, meta(5, 1, [1, 2]), 1_200, now=T + 10)
    run(w, meta(5, 1, [1, 2]), 900, now=T + 20)  # a lower answer (another replica's view) never lowers the max
    assert w[("orders", 3)] == EpochWatch(5, 1, (1, 2), 1_200, T + 20)


def test_unclean_election_with_truncation_is_two_records_with_the_numbers() -> None:
    w: dict = {}
    run(w, meta(5, 1, [1, 2, 3]), 49_000)
    run(w, meta(5, 1, [1]), 50_000, now=T + 10)  # 2 and 3 fell out of the ISR
    p = meta(7, 2, [2])  # 1 died; 2 took over (epoch 6 was the offline one)
    assert epoch_questions([p], w)[0].epoch == 5 and epoch_questions([p], w)[0].leader == 2
    out = run(w, p, 48_900, answer=(5, 48_800), unclean=True, now=T + 20)
    assert [(x.kind, x.messages, x.leader_before, x.leader_after, x.epoch_before, x.epoch_after, x.unclean_enabled)
            for x in out] == [("unclean_election", None, 1, 2, 5, 7, True), ("truncation", 1_200, 1, 2, 5, 7, True)]
    assert "50,000" in out[1].evidence and "48,800" in out[1].evidence
    assert w[("orders", 3)] == EpochWatch(7, 2, (2,), 48_900, T + 20)  # watching the new epoch


def test_a_clean_leader_change_with_a_dip_is_no_loss() -> None:
    """KIP-207: the new leader's high watermark can read lower for a moment; its log has the whole old epoch."""
    w: dict = {}
    run(w, meta(5, 1, [1, 2, 3]), 50_000)
    out = run(w, meta(6, 2, [2, 3]), 49_700, answer=(5, 50_000), now=T + 10)
    assert out == []
    assert w[("orders", 3)].epoch == 6


def test_a_moved_epoch_without_an_answer_is_asked_again() -> None:
    w: dict = {}
    run(w, meta(5, 1, [1, 2, 3]), 50_000)
    assert run(w, meta(6, -1, [1]), None, now=T + 10) == []  # offline: nobody to ask
    assert w[("orders", 3)].epoch == 5
    assert epoch_questions([meta(6, -1, [1])], w) == []
    assert run(w, meta(7, 2, [2]), 49_000, now=T + 20) == []  # a leader, but its answer failed
    assert w[("orders", 3)].epoch == 5 and len(epoch_questions([meta(7, 2, [2])], w)) == 1
    out = run(w, meta(7, 2, [2]), 49_000, answer=(5, 48_000), now=T + 30)
    # 2 was in the last ISR we saw (1, 2, 3): not called unclean; the truncation is proven all the same
    assert [(x.kind, x.messages) for x in out] == [("truncation", 2_000)]


def test_the_same_leader_again_is_not_unclean() -> None:
    w: dict = {}
    run(w, meta(5, 1, [1]), 10)
    out = run(w, meta(6, 1, [1]), 10, answer=(5, 10), now=T + 5)
    assert out == []


def test_an_epoch_older_than_the_cache_or_no_watermark_proves_nothing() -> None:
    w: dict = {}
    run(w, meta(5, 1, [1, 2]), None)  # the offsets section failed: no high watermark known
    assert run(w, meta(6, 2, [2]), 100, answer=(5, 0), now=T + 5) == []
    w2: dict = {}
    run(w2, meta(5, 1, [1, 2]), 100)
    assert run(w2, meta(6, 2, [2]), 100, answer=(-1, -1), now=T + 5) == []


def test_sandbox_epoch_cache_answers_as_kafkas_leader_epoch_file_cache() -> None:
    """The sandbox's ground truth for OffsetForLeaderEpoch: end of an epoch = start of the next one in the
    leader's log; a new leader drops epochs that start beyond its log end; unknown old epochs are (-1, -1)."""
    from sandbox.topology import Partition

    p = Partition("t", 0, [1, 2], 1, isr=[1, 2])
    p.leo = {1: 500.0, 2: 500.0}
    p.epoch_starts, p.leader_epoch = [(3, 100)], 3
    assert p.epoch_end(2) == (-1, -1)
    assert p.epoch_end(3) == (3, 500)  # the latest epoch ends at the log end
    p.leader = 2
    p.bump_epoch()  # clean: 2 has everything
    assert p.epoch_starts == [(3, 100), (4, 500)] and p.epoch_end(3) == (3, 500)
    p.leo = {1: 800.0, 2: 650.0}
    p.leader = -1
    p.bump_epoch()  # offline: no leader, no entry
    p.leader = 1
    p.leo[1] = 620.0  # what 1 holds of the tail (it was behind)
    p.bump_epoch()
    assert p.epoch_starts == [(3, 100), (4, 500), (6, 620)]
    assert p.epoch_end(4) == (4, 620) and p.epoch_end(5) == (4, 620)  # 5 was never written: floor is 4
    p.leader, p.leo[2] = 2, 550.0
    p.bump_epoch()  # 2 ends below where epoch 6 started: that entry is not in its log
    assert p.epoch_starts == [(3, 100), (4, 500), (7, 550)] and p.epoch_end(6) == (4, 550)


def gp(committed: int, start: int | None, hw: int | None, group: str = "billing") -> object:
    from collectors.model.records import GroupPartitionRecord

    return GroupPartitionRecord("c", group, "orders", 3, committed, start, hw, hw, None, None, "OK")


def test_retention_skips_are_recorded_as_they_grow_and_never_at_first_sight() -> None:
    from collectors.model.loss import group_evidence

    marks: dict = {}
    assert group_evidence("c", [gp(100, 150, 900)], marks, T) == []  # found so: not seen happen
    assert group_evidence("c", [gp(100, 150, 900)], marks, T + 10) == []  # nothing new
    out = group_evidence("c", [gp(100, 180, 900)], marks, T + 20)  # retention deleted 30 more unread
    assert [(x.kind, x.group_id, x.subject, x.messages) for x in out] == [
        ("retention_skipped", "billing", "orders-3", 30)]
    assert group_evidence("c", [gp(200, 180, 900)], marks, T + 30) == []  # caught up: the episode is over
    out = group_evidence("c", [gp(200, 260, 900)], marks, T + 40)  # and falls behind again: a new episode
    assert [x.messages for x in out] == [60]
    w: dict = {}
    group_evidence("c", [gp(500, 100, 900)], w, T)
    assert [x.messages for x in group_evidence("c", [gp(500, 700, 900)], w, T + 10)] == [200]  # seen happen


def test_a_commit_read_above_the_polls_high_watermark_is_not_evidence() -> None:
    """The poll reads high watermarks before commits; a consumer that commits in between shows a commit above
    the high watermark of the same poll. Only a proven truncation says a group read past the log end."""
    from collectors.model.loss import group_evidence

    marks: dict = {}
    group_evidence("c", [gp(830, 0, 819)], marks, T)
    assert group_evidence("c", [gp(845, 0, 840)], marks, T + 10) == []
    assert marks[("billing", "orders", 3)].beyond == 0


def test_groups_that_read_past_a_truncation_point_are_recorded_from_their_last_commit() -> None:
    from collectors.model.loss import GroupMark, group_evidence, truncated_readers
    from collectors.model.records import LossRecord

    marks = {("billing", "orders", 3): GroupMark(0, 0, 49_990), ("late", "orders", 3): GroupMark(0, 0, 40_000),
             ("other", "orders", 1): GroupMark(0, 0, 60_000)}
    cut = LossRecord("c", T, "truncation", "orders", 3, 1_200, "...", 1, 2, 5, 7, True, offset=48_800)
    out = truncated_readers([cut], marks)
    assert [(x.kind, x.group_id, x.messages, x.offset) for x in out] == [
        ("offset_beyond_log_end", "billing", 1_190, 48_800)]  # "late" had not read that far; orders-1 not cut
    assert (out[0].epoch_before, out[0].epoch_after) == (5, 7)  # the truncation's: an HA pair matches on them
    # the same poll sees billing's offset beyond the log end: already in the ledger, not twice
    assert group_evidence("c", [gp(49_990, 0, 48_900)], marks, T) == []
    assert group_evidence("c", [gp(49_990, 0, 50_000)], marks, T + 10) == []  # the log grew past it: over


def zk(server: str, epoch: int, counter: int, serving: bool = True) -> object:
    from collectors.model.records import ZkServerRecord

    return ZkServerRecord("c", server, serving, "follower", zxid=(epoch << 32) | counter, zxid_epoch=epoch,
                          zxid_counter=counter)


def test_a_zookeeper_server_whose_data_went_back_without_a_newer_epoch() -> None:
    from collectors.model.loss import zxid_regressions

    seen: dict = {}
    assert zxid_regressions("c", [zk("zk1:2181", 2, 500)], seen, T) == []  # first sight
    assert zxid_regressions("c", [zk("zk1:2181", 3, 4)], seen, T + 10) == []  # an election: newer epoch
    assert zxid_regressions("c", [zk("zk1:2181", 3, 90), zk("zk2:2181", 3, 90, serving=False)], seen, T + 20) == []
    out = zxid_regressions("c", [zk("zk1:2181", 3, 40)], seen, T + 30)  # restored from an older copy
    assert [(x.kind, x.subject, x.messages, x.epoch_before, x.epoch_after) for x in out] == [
        ("zk_zxid_regressed", "zk1:2181", 50, 3, 3)]
    assert "0x30000005a" in out[0].evidence and "0x300000028" in out[0].evidence
    assert zxid_regressions("c", [zk("zk1:2181", 3, 41)], seen, T + 40) == []  # moving on from there: once
    out = zxid_regressions("c", [zk("zk1:2181", 2, 900)], seen, T + 50)  # an older epoch altogether
    assert [(x.messages, x.epoch_before, x.epoch_after) for x in out] == [(None, 3, 2)]


def txn(state: str, epoch: int, start: float | None, pid: int = 1003, parts: tuple[str, ...] = ("payments-0",)
        ) -> object:
    from collectors.model.records import TransactionRecord

    return TransactionRecord("c", "payments-tx", 2, state, pid, epoch, 60_000, start, None, list(parts))


def test_a_transaction_aborted_at_its_timeout_and_the_producer_coming_back() -> None:
    from collectors.model.loss import transaction_evidence

    w: dict = {}
    assert transaction_evidence("c", [txn("Ongoing", 3, T - 50)], w, T) == []  # first sight
    assert transaction_evidence("c", [txn("Ongoing", 3, T - 50)], w, T + 5) == []
    out = transaction_evidence("c", [txn("CompleteAbort", 4, None, parts=())], w, T + 15)  # 65 s open: timed out
    assert [(x.kind, x.transactional_id, x.epoch_before, x.epoch_after) for x in out] == [
        ("txn_timeout_abort", "payments-tx", 3, 4)]
    assert "payments-0" in out[0].evidence and "60s timeout" in out[0].evidence
    assert transaction_evidence("c", [txn("CompleteAbort", 4, None, parts=())], w, T + 25) == []
    back = transaction_evidence("c", [txn("Ongoing", 5, T + 30)], w, T + 35)  # a new instance: InitProducerId
    assert [(x.kind, x.epoch_before, x.epoch_after) for x in back] == [("txn_producer_returned", 4, 5)]
    assert "20s after" in back[0].evidence


def test_an_abort_that_came_while_the_poll_ran_is_judged_by_when_the_answers_were_in() -> None:
    """The poll began 5 s before the 60 s timeout ran out and its answers were in 2 s after: the abort it saw may be
    the coordinator's, and is recorded. Judged by the poll's start it would not be, and the next poll would see
    nothing open any more."""
    from collectors.model.loss import transaction_evidence

    for answered_by, kinds in ((None, []), (T + 12, ["txn_timeout_abort"]), (T + 9, [])):
        w: dict = {}
        transaction_evidence("c", [txn("Ongoing", 3, T - 50)], w, T)
        out = transaction_evidence("c", [txn("CompleteAbort", 4, None, parts=())], w, T + 5, answered_by)
        assert [x.kind for x in out] == kinds, answered_by
        assert all(x.time == T + 5 and "open for 62s when seen aborted" in x.evidence for x in out)


def test_ordinary_ends_of_transactions_are_not_timeouts() -> None:
    from collectors.model.loss import transaction_evidence

    w: dict = {}
    transaction_evidence("c", [txn("Ongoing", 3, T - 2)], w, T)
    assert transaction_evidence("c", [txn("CompleteCommit", 3, None)], w, T + 5) == []  # committed
    transaction_evidence("c", [txn("Ongoing", 3, T + 6)], w, T + 7)
    assert transaction_evidence("c", [txn("CompleteAbort", 3, None)], w, T + 9) == []  # the producer aborted
    transaction_evidence("c", [txn("Ongoing", 3, T + 10)], w, T + 11)
    # a restart before the timeout fences the epoch too, but the transaction was open 5 s of 60: not a timeout
    assert transaction_evidence("c", [txn("CompleteAbort", 4, None)], w, T + 15) == []


def test_an_abort_more_than_one_epoch_on_is_another_transactions() -> None:
    """The coordinator's timeout abort bumps the watched epoch once. Two bumps or more between two looks are
    several ends: the transaction seen open committed, the producer restarted (InitProducerId) or, with Transaction
    V2, every end bumps; the abort seen is a later transaction's, which its application may have aborted itself.
    Only suggested, so not recorded; a bump of exactly one, open for the whole timeout, is."""
    from collectors.model.loss import transaction_evidence

    w: dict = {}
    transaction_evidence("c", [txn("Ongoing", 3, T - 50)], w, T)
    assert transaction_evidence("c", [txn("CompleteAbort", 5, None, parts=())], w, T + 15) == []
    transaction_evidence("c", [txn("Ongoing", 6, T - 50)], w, T + 20)
    assert [x.kind for x in transaction_evidence("c", [txn("CompleteAbort", 7, None, parts=())], w, T + 25)] == [
        "txn_timeout_abort"]


def test_with_transaction_v2_one_bump_after_the_timeout_is_no_proof_of_the_coordinators_abort() -> None:
    """With Transaction V2 the application's own abort bumps the epoch once too, so the abort that is claimed
    above (open for its whole timeout, one bump) may be the application's: nothing is recorded, and the watch still
    follows the producer (a later transaction is judged against the epoch it ended with)."""
    from collectors.model.loss import transaction_evidence

    w: dict = {}
    assert transaction_evidence("c", [txn("Ongoing", 3, T - 50)], w, T, every_end_bumps=True) == []
    assert transaction_evidence("c", [txn("CompleteAbort", 4, None, parts=())], w, T + 15,
                                every_end_bumps=True) == []
    assert (w["payments-tx"].epoch, w["payments-tx"].aborted_at) == (4, None)  # followed; no abort to link
    assert transaction_evidence("c", [txn("Ongoing", 5, T + 30)], w, T + 35, every_end_bumps=True) == []
    # the same looks on a cluster without it: claimed, and the return linked
    w = {}
    transaction_evidence("c", [txn("Ongoing", 3, T - 50)], w, T)
    assert [x.kind for x in transaction_evidence("c", [txn("CompleteAbort", 4, None, parts=())], w, T + 15)] == [
        "txn_timeout_abort"]
    assert [x.kind for x in transaction_evidence("c", [txn("Ongoing", 5, T + 30)], w, T + 35)] == [
        "txn_producer_returned"]


def test_a_leader_from_outside_the_isr_seen_with_the_whole_log_is_not_unclean() -> None:
    """Between two polls broker 3 rejoined the ISR and the preferred-leader election moved leadership back to it:
    not in the ISR we saw, but it has every committed message, so nothing was lost and nothing is recorded."""
    w: dict = {}
    run(w, meta(9, 1, [1, 2]), 5_000)
    assert run(w, meta(10, 3, [1, 2, 3]), 5_030, answer=(9, 5_030), now=T + 30) == []
    assert w[("orders", 3)].epoch == 10


# ----------------------------------------------------------------------------- found by a review of the ledger
def test_a_topic_deleted_and_created_again_is_a_new_log_not_a_truncation() -> None:
    """Both incarnations start at leader epoch 0: only the topic id tells them apart. Without it the new topic's
    first leader change reads as everything the old one committed truncated."""
    old, new = "6f1c…-old", "9a2d…-new"
    w: dict = {}
    run(w, PartitionMeta("orders", 3, 1, 0, [1, 2, 3], [1, 2, 3], [], old), 1_000_000)
    run(w, PartitionMeta("orders", 3, 1, 0, [1, 2, 3], [1, 2, 3], [], new), 500, now=T + 10)
    assert w[("orders", 3)] == EpochWatch(0, 1, (1, 2, 3), 500, T + 10, new)  # watching the new log
    out = run(w, PartitionMeta("orders", 3, 2, 1, [1, 2, 3], [2, 3, 1], [], new), 600, answer=(0, 600), now=T + 20)
    assert out == []
    # the same with a real truncation on the new log: its own high watermark is the measure
    out = run(w, PartitionMeta("orders", 3, 3, 2, [1, 2, 3], [3], [], new), 550, answer=(1, 550), now=T + 30)
    assert [(x.kind, x.messages) for x in out] == [("truncation", 50)]


def test_a_watch_without_a_topic_id_learns_it_and_ids_missing_on_either_side_change_nothing() -> None:
    """A watch restored from an older checkpoint has no id; a broker before 2.8 gives none."""
    w = {("orders", 3): EpochWatch(4, 1, (1, 2, 3), 9_000, T)}
    run(w, PartitionMeta("orders", 3, 1, 4, [1, 2, 3], [1, 2, 3], [], "id-a"), 9_100, now=T + 10)
    assert w[("orders", 3)].topic_id == "id-a" and w[("orders", 3)].hw_max == 9_100
    run(w, meta(4, 1, [1, 2, 3]), 9_200, now=T + 20)  # no id this poll: the same log as far as anyone can tell
    assert w[("orders", 3)].topic_id == "id-a" and w[("orders", 3)].hw_max == 9_200


def test_a_poll_without_the_log_start_does_not_count_the_same_skip_again() -> None:
    """ListOffsets to the leader failed (or the partition was offline): the log start is unknown, which is not
    the end of the episode. The retention deletion is counted once."""
    from collectors.model.loss import group_evidence

    marks: dict = {}
    total = 0
    for i, start in enumerate([50, 150, None, 150, None, 150, 170]):
        total += sum(x.messages or 0 for x in group_evidence("c", [gp(100, start, 900)], marks, T + i))
    assert total == 70  # 50 when the log start passed the commit by 50, 20 more when it moved on to 170


def test_groups_nobody_runs_follow_silently_and_are_not_charged_on_their_return() -> None:
    """docs/fleet.md: what retention deletes under a group nobody runs is not a ledger row, then or later."""
    from collectors.model.loss import group_evidence

    marks: dict = {}
    group_evidence("c", [gp(100, 50, 900)], marks, T, recording={"billing"})
    assert group_evidence("c", [gp(100, 5_000, 9_000)], marks, T + 10, recording=set()) == []  # abandoned
    assert group_evidence("c", [gp(100, 5_000, 9_000)], marks, T + 20, recording={"billing"}) == []  # back
    out = group_evidence("c", [gp(100, 5_100, 9_000)], marks, T + 30, recording={"billing"})
    assert [x.messages for x in out] == [100]  # what it sees happen once it runs again


def test_offset_beyond_log_end_is_judged_by_the_commit_from_before_the_change_when_the_answer_is_late() -> None:
    """The new leader did not answer at the first poll after the change; meanwhile the group read new messages
    on its log. Those are not evidence: the commit before the change is."""
    from collectors.config import Thresholds
    from collectors.model.observations import KafkaObservation
    from collectors.model.snapshot import build_snapshot
    from collectors.model.state import ClusterState

    def poll(now: float, leader: int, epoch: int, hw: int, commit: int, answer: tuple[int, int] | None = None):
        o = KafkaObservation(time=now, cluster_id="c", controller_id=1,
                             brokers=[(i, "h", 9092, None) for i in (1, 2, 3)],
                             partitions=[PartitionMeta("orders", 3, leader, epoch, [1, 2, 3], [leader], [])],
                             topic_configs={"orders": {"min.insync.replicas": "2"}},
                             groups={"late": {"state": "Stable", "members": 1, "coordinator": 1,
                                              "protocol_type": "consumer"}},
                             commits={"late": {("orders", 3): commit}})
        o.high_watermark[("orders", 3)], o.log_start[("orders", 3)] = hw, 0
        if answer is not None:
            o.epoch_end_offsets[("orders", 3)] = answer
        return [(x.kind, x.group_id, x.messages) for x in build_snapshot("c", o, None, st, Thresholds(), now).losses]

    st = ClusterState()
    assert poll(T, 1, 5, 50_000, 40_000) == []
    assert poll(T + 30, 2, 6, 49_600, 49_500) == []  # the new leader's answer failed: asked again next poll
    out = poll(T + 60, 2, 6, 49_700, 49_600, answer=(5, 48_800))
    assert ("truncation", None, 1_200) in out
    assert not [k for k, _, _ in out if k == "offset_beyond_log_end"]  # it was at 40,000: below the cut


def test_a_high_watermark_answered_under_a_newer_epoch_is_not_the_old_epochs() -> None:
    """The epoch was bumped between the poll's Metadata (epoch 5) and its ListOffsets (answered under 6, with the
    new epoch's writes): taken as epoch 5's, the next poll's answer for where epoch 5 ends (where 6 began) read as
    a truncation of 300 that never happened. A rolling restart does this to many partitions at once."""
    w: dict = {}
    run(w, meta(5, 1, [1, 2, 3]), 1_000)
    out = settle("c", [meta(5, 1, [1, 2, 3])], {("orders", 3): 1_500}, {}, w, set(), T + 10, {("orders", 3): 6})
    assert out == [] and w[("orders", 3)].hw_max == 1_000  # not epoch 5's
    out = settle("c", [meta(6, 1, [1, 2, 3])], {("orders", 3): 1_600}, {("orders", 3): (5, 1_200)}, w, set(),
                 T + 20, {("orders", 3): 6})
    assert out == [] and w[("orders", 3)] == EpochWatch(6, 1, (1, 2, 3), 1_600, T + 20)
    # answered under the epoch watched, it counts as ever
    settle("c", [meta(6, 1, [1, 2, 3])], {("orders", 3): 1_700}, {}, w, set(), T + 30, {("orders", 3): 6})
    assert w[("orders", 3)].hw_max == 1_700


def test_metadata_older_than_the_watch_does_not_move_its_isr_back() -> None:
    """A broker that has not caught up answers Metadata with the epoch before: its ISR is not the current one, and
    the watch's ISR decides whether a later leader was unclean."""
    w: dict = {}
    run(w, meta(6, 2, [2]), 5_000)
    run(w, meta(5, 1, [1, 2, 3]), None, now=T + 10)  # stale: epoch 5
    assert w[("orders", 3)] == EpochWatch(6, 2, (2,), 5_000, T)
