"""The sandbox model against Kafka's documented semantics, stepped by hand (no sockets)."""

from __future__ import annotations

import pytest

from sandbox.kafka_defaults import coordinator_partition, java_string_hash
from sandbox.model import Cluster
from sandbox.spec import ClusterSpec

T0 = 1_700_000_000.0


def make(**overrides: object) -> Cluster:
    spec = {
        "brokers": 3,
        "broker_config": {"min.insync.replicas": "2"},
        "topics": [
            {"name": "orders", "partitions": 3, "replication_factor": 3, "produce_rate": 30},
            {"name": "single", "partitions": 3, "replication_factor": 1, "produce_rate": 3,
             "configs": {"min.insync.replicas": 1}},
        ],
        "groups": [{"group_id": "billing", "topics": ["orders"], "commit_interval_s": 1}],
        "transactional_producers": [{"transactional_id": "tx", "topics": ["orders"], "timeout_ms": 20_000,
                                     "transaction_duration_s": 2}],
    }
    spec.update(overrides)
    return Cluster(ClusterSpec.model_validate(spec), T0)


def run(c: Cluster, seconds: float) -> None:
    c.advance(c.now + seconds)


def test_java_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("ab") == 97 * 31 + 98
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE in Java
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert coordinator_partition("polygenelubricants", 50) == 0


def test_high_watermark_is_min_isr_log_end_and_producers_append() -> None:
    c = make()
    run(c, 10)
    p = c.partition("orders", 0)
    assert p.hwm > 0
    assert p.hwm <= min(p.leo[r] for r in p.isr)
    assert p.isr == [1, 2, 3]


def test_slow_follower_leaves_isr_after_replica_lag_time_max_and_rejoins() -> None:
    c = make()
    run(c, 5)
    c.set_slow_follower(2, True)
    run(c, 25)  # less than replica.lag.time.max.ms (30 s)
    p = c.partition("orders", 0)
    assert 2 in p.isr
    run(c, 10)
    assert 2 not in p.isr
    # broker 2 left every ISR where it is a follower (it still leads orders-1)
    assert all(2 not in q.isr for q in c.topics["orders"].partitions if q.leader != 2)
    assert c.partition("orders", 1).leader == 2
    c.set_slow_follower(2, False)
    run(c, 2)
    assert 2 in p.isr


def test_crashed_broker_keeps_leadership_until_session_expires_then_fails_over() -> None:
    c = make()
    run(c, 5)
    p1 = c.partition("orders", 1)  # replicas [2, 3, 1], leader 2
    single2 = c.partition("single", 1)  # only replica: broker 2
    epoch = p1.leader_epoch
    c.crash_broker(2)
    run(c, 10)  # zookeeper.session.timeout.ms = 18 s not reached
    assert c.brokers[2].registered and p1.leader == 2
    run(c, 10)
    assert not c.brokers[2].registered
    assert p1.leader == 3 and p1.leader_epoch == epoch + 1
    assert 2 not in p1.isr
    assert single2.leader == -1 and single2.isr == [2]  # offline, last ISR member kept
    c.restart_broker(2)
    assert single2.leader == 2
    run(c, 2)
    assert 2 in p1.isr  # caught up and rejoined


def test_acks_all_producers_stop_under_min_isr() -> None:
    c = make()
    run(c, 2)
    c.crash_broker(2)
    c.crash_broker(3)
    run(c, 30)
    p = c.partition("orders", 0)
    assert p.isr == [1]
    before = p.leo[1]
    run(c, 10)
    assert p.leo[1] == before  # NOT_ENOUGH_REPLICAS: nothing appended


def test_unclean_election_loses_acknowledged_messages() -> None:
    c = make(topics=[{"name": "risky", "partitions": 1, "replication_factor": 2, "produce_rate": 10,
                      "configs": {"unclean.leader.election.enable": True, "min.insync.replicas": 1}}],
             groups=[], transactional_producers=[])
    run(c, 5)
    p = c.partition("risky", 0)  # replicas [1, 2]
    c.set_slow_follower(2, True)
    run(c, 40)
    assert p.isr == [1]
    hwm_before = p.hwm
    c.crash_broker(1)
    run(c, 20)
    assert p.leader == 2
    assert p.hwm < hwm_before


def test_retention_moves_log_start_and_strands_a_stopped_group() -> None:
    c = make()
    c.set_topic_config("orders", "retention.ms", "60000")
    run(c, 10)
    c.set_group_mode("billing", "stopped")
    run(c, 3)
    g = c.groups["billing"]
    assert g.state == "Empty" and g.members == 0
    committed = g.committed[("orders", 0)]
    run(c, 180)
    p = c.partition("orders", 0)
    assert p.log_start > committed
    assert g.committed[("orders", 0)] == committed


def test_stalled_group_keeps_committing_the_same_offset() -> None:
    c = make()
    run(c, 10)
    c.set_group_mode("billing", "stalled")
    g = c.groups["billing"]
    frozen = dict(g.committed)
    run(c, 30)
    assert g.committed == frozen
    assert g.state == "Stable" and g.members == 2
    assert c.partition("orders", 0).hwm - frozen[("orders", 0)] > 50


def test_running_group_lag_is_bounded() -> None:
    c = make()
    run(c, 60)
    g = c.groups["billing"]
    for (t, i), off in g.committed.items():
        p = c.partition(t, i)
        assert 0 <= p.hwm - off <= 30  # one commit interval of production at most


def test_producer_crash_holds_lso_until_the_coordinator_aborts() -> None:
    c = make()
    c.advance(c.now + 0.5)
    tp = c.txn_producers["tx"]
    assert tp.state == "Ongoing"
    c.advance(c.now + 0.5)
    c.crash_producer("tx")
    run(c, 10)
    assert tp.state == "Ongoing"
    held = [p for p in c.topics["orders"].partitions if p.lso < p.hwm]
    assert held, "an open transaction must hold the LSO back"
    epoch = tp.epoch
    run(c, 12)  # past transaction.timeout.ms = 20 s
    assert tp.state == "CompleteAbort" and tp.epoch == epoch + 1
    assert all(p.lso == p.hwm for p in c.topics["orders"].partitions)


def test_transaction_timeout_is_capped_by_broker_max() -> None:
    c = make(broker_config={"transaction.max.timeout.ms": "5000"})
    assert c.txn_producers["tx"].timeout_ms == 5000


def test_hanging_transaction_is_unknown_to_the_coordinator() -> None:
    c = make(transactional_producers=[])
    run(c, 5)
    pid = c.inject_hanging_transaction("orders", 1)
    run(c, 30)
    p = c.partition("orders", 1)
    assert p.lso < p.hwm
    assert pid not in {t.producer_id for t in c.txn_producers.values()}
    c.abort_hanging_transactions("orders", 1)
    run(c, 1)
    assert p.lso == p.hwm


def test_controller_moves_when_its_broker_is_fenced() -> None:
    c = make()
    epoch = c.controller_epoch
    c.crash_broker(1)
    run(c, 20)
    assert c.controller_id != 1 and c.controller_epoch > epoch


def test_kraft_quorum_tracks_voters() -> None:
    c = make(mode="kraft")
    run(c, 10)
    assert c.metadata_hwm >= 19
    c.crash_broker(3)
    run(c, 10)
    assert c.voters[3].leo < c.voters[1].leo
    c.controller_failover()
    assert c.quorum_leader == c.controller_id and c.quorum_epoch == 2


@pytest.mark.parametrize("bad", [{"partitions": -1}, {"replication_factor": 4}, {"name": "bad name!"}])
def test_cluster_spec_rejects_bad_topics(bad: dict[str, object]) -> None:
    topic = {"name": "t", "partitions": 1, "replication_factor": 1, **bad}
    with pytest.raises(ValueError):
        ClusterSpec.model_validate({"brokers": 3, "topics": [topic]})


def test_transaction_lingers_in_prepare_while_a_partition_is_offline() -> None:
    c = make(transactional_producers=[{"transactional_id": "tx", "topics": ["single"], "timeout_ms": 60_000,
                                       "transaction_duration_s": 60}])
    run(c, 2)
    tp = c.txn_producers["tx"]
    assert tp.state == "Ongoing" and tp.partitions
    c.crash_broker(2)
    run(c, 30)  # single-1 (only replica on broker 2) goes offline after the session timeout
    assert tp.state == "PrepareAbort"
    run(c, 60)
    assert tp.state == "PrepareAbort"
    c.restart_broker(2)
    run(c, 1)
    assert tp.state in ("CompleteAbort", "Ongoing")


def test_crash_inside_transaction_waits_for_an_open_transaction() -> None:
    c = make()
    tp = c.txn_producers["tx"]
    run(c, 2.5)  # the first transaction (2 s) is committing or done
    c.crash_producer("tx", inside_transaction=True)
    run(c, 5)
    assert not tp.alive and tp.state == "Ongoing" and tp.partitions


# ----------------------------------------------------------------------------- odd states and flapping


def test_flapping_broker_is_down_then_fenced_then_back_every_period() -> None:
    c = make(broker_config={"min.insync.replicas": "2", "zookeeper.session.timeout.ms": "2000"})
    run(c, 5)
    start = c.now
    c.start_flapping(3, 8.0)
    b3, p0 = c.brokers[3], c.partition("orders", 0)
    for cycle in range(3):
        base = start + cycle * 8
        c.advance(base + 1)  # down, session not expired yet: still registered and in the ISR
        assert (b3.process_up, b3.registered, 3 in p0.isr) == (False, True, True), cycle
        c.advance(base + 3)  # fenced: out of every ISR, leadership moved
        assert (b3.process_up, b3.registered, 3 in p0.isr) == (False, False, False), cycle
        assert all(p.leader != 3 for p in c.all_partitions())
        c.advance(base + 6)  # up again, caught up, back in the ISR
        assert (b3.process_up, b3.registered, p0.isr) == (True, True, [1, 2, 3]), cycle
    c.advance(start + 25)  # mid-down of the fourth cycle
    c.stop_flapping(3)
    assert b3.process_up and b3.flap is None
    run(c, 30)
    assert b3.process_up and b3.registered and p0.isr == [1, 2, 3]


def test_flapping_rejects_a_down_time_outside_the_period() -> None:
    c = make()
    with pytest.raises(ValueError, match="down_s"):
        c.start_flapping(2, 4.0, down_s=4.0)


def test_failed_partition_is_offline_with_every_broker_up_and_comes_back() -> None:
    c = make()
    run(c, 5)
    p = c.partition("orders", 1)
    leader, hwm = p.leader, p.hwm
    c.fail_partition("orders", 1)
    assert p.leader == -1 and not p.online and p.isr == [leader] and p.failed_replicas == set(p.replicas)
    assert all(b.process_up and b.registered for b in c.brokers.values())
    position = c.groups["billing"].position[("orders", 1)]
    run(c, 10)
    assert p.leader == -1 and p.hwm == hwm  # nothing is written to an offline partition ...
    assert c.groups["billing"].position[("orders", 1)] == position  # ... nor read from it
    c.crash_broker(leader)
    run(c, 20)  # fenced
    c.restart_broker(leader)  # its log directory is still gone: no election
    assert p.leader == -1
    c.recover_partition("orders", 1)
    assert p.leader == leader and p.failed_replicas == set()
    run(c, 2)
    assert p.isr == p.replicas and p.hwm > hwm
    c.fail_partition("single")
    assert [q.leader for q in c.topics["single"].partitions] == [-1, -1, -1]


def test_group_that_never_commits_has_no_offsets_but_consumes() -> None:
    c = make()
    run(c, 3)
    c.set_group_committing("billing", False)
    g = c.groups["billing"]
    assert g.committed == {}
    before = dict(g.position)
    run(c, 5)
    assert g.committed == {} and any(g.position[k] > before[k] for k in before)
    c.set_group_committing("billing", True)
    run(c, 2)
    assert set(g.committed) == {("orders", 0), ("orders", 1), ("orders", 2)}


def test_topic_with_zero_partitions_then_partitions_added() -> None:
    c = make(topics=[{"name": "creating", "partitions": 0, "replication_factor": 3, "produce_rate": 30}],
             groups=[{"group_id": "early", "topics": ["creating"], "commit_interval_s": 1}],
             transactional_producers=[])
    run(c, 5)  # no partitions: nothing to produce to, nothing to consume, no division by zero
    assert c.topics["creating"].partitions == [] and c.groups["early"].committed == {}
    c.add_partitions("creating", 2, 3)
    assert [(p.index, p.replicas, p.leader) for p in c.topics["creating"].partitions] == [
        (0, [1, 2, 3], 1), (1, [2, 3, 1], 2)]
    run(c, 5)
    assert all(p.hwm > 0 for p in c.topics["creating"].partitions)
    assert set(c.groups["early"].committed) == {("creating", 0), ("creating", 1)}


def test_reported_transaction_state_overrides_only_what_the_coordinator_says() -> None:
    c = make()
    c.report_txn_state("tx", "CompleteCommitV2")
    run(c, 3)
    tp = c.txn_producers["tx"]
    assert tp.reported_state == "CompleteCommitV2" and tp.state in ("Ongoing", "PrepareCommit", "CompleteCommit")
    c.report_txn_state("tx", None)
    assert tp.reported_state is None


def _events(c: Cluster) -> list[str]:
    return [what for _, _, what in c.events]


def test_stalled_followers_leave_the_isr_on_time_and_an_unclean_election_loses_the_committed_tail() -> None:
    c = make(topics=[{"name": "orders", "partitions": 1, "replication_factor": 3, "produce_rate": 10,
                      "configs": {"unclean.leader.election.enable": "true"}}])
    run(c, 5)
    p = c.topics["orders"].partitions[0]
    leader, hw0 = p.leader, p.hwm
    c.stall_followers("orders", 0)
    run(c, 29)  # replica.lag.time.max.ms 30 s: still in the ISR, the high watermark stuck where they stopped
    assert len(p.isr) == 3 and p.hwm == hw0 and p.leader_leo > hw0
    run(c, 2)
    assert p.isr == [leader]  # alone: under min ISR 2, acks=all appends stop and the high watermark is all of it
    hw = p.hwm
    assert hw == p.leader_leo > hw0
    committed, tail = c.lose_leader("orders", 0)
    assert (committed, tail) == (hw - hw0, 0)
    assert p.leader != leader and p.isr == [p.leader] and p.hwm == hw0
    assert p.leo[leader] == hw0  # the old leader's replica came back and truncated to the new leader's log
    lost = hw - hw0
    said = f"{lost:,} message{'' if lost == 1 else 's'} lost"
    assert f"unclean election orders-0: leader {p.leader}, {said}" in _events(c)
    run(c, 2)
    assert sorted(p.isr) == [1, 2, 3]  # followers fetch again and rejoin; nobody is stalled any more


def test_leader_lost_with_followers_in_the_isr_loses_only_the_acks1_tail() -> None:
    c = make(topics=[{"name": "orders", "partitions": 1, "replication_factor": 3, "produce_rate": 10}])
    run(c, 5)
    p = c.topics["orders"].partitions[0]
    leader, hw = p.leader, p.hwm
    c.stall_followers("orders", 0)
    run(c, 5)
    tail = p.leader_leo - hw
    assert tail > 0 and p.hwm == hw and len(p.isr) == 3
    assert c.lose_leader("orders", 0) == (0, tail)
    assert p.leader != leader and p.hwm == hw and p.epoch_end(p.leader_epoch - 1)[1] == hw  # nothing committed went
    assert p.leo[leader] == hw
    assert any(f"0 committed messages lost (high watermark {hw:,} -> {hw:,}), {tail:,} acks=1-only" in e
               for e in _events(c))


def test_leader_lost_with_no_replica_to_take_over_comes_back_with_its_log() -> None:
    c = make(topics=[{"name": "orders", "partitions": 1, "replication_factor": 3, "produce_rate": 10}])
    run(c, 5)
    p = c.topics["orders"].partitions[0]
    leader = p.leader
    c.stall_followers("orders", 0)
    run(c, 31)
    hw = p.hwm
    assert c.lose_leader("orders", 0) == (0, 0)  # unclean election disabled: offline, then the old leader is back
    assert p.leader == leader and p.hwm == hw


def test_clean_leader_change_dips_the_visible_high_watermark_and_loses_nothing() -> None:
    c = make()
    run(c, 5)
    p = c.topics["orders"].partitions[1]
    leader, epoch, hw = p.leader, p.leader_epoch, p.hwm
    c.move_leader("orders", 1, 40, 10.0)
    assert p.leader != leader and p.leader_epoch == epoch + 1
    assert p.visible_hwm(c.now) == hw - 40 and p.hwm == hw
    assert p.epoch_end(epoch) == (epoch, int(p.leo[p.leader])) and int(p.leo[p.leader]) >= hw  # its log end
    run(c, 9)
    assert p.visible_hwm(c.now) == hw - 40 < p.hwm
    run(c, 2)
    assert p.visible_hwm(c.now) == p.hwm  # recovered by itself after the dip
    c.move_leader("orders", 1, 40, 10.0)
    c.end_hw_dip("orders", 1)
    assert p.visible_hwm(c.now) == p.hwm


def test_batch_group_runs_on_its_schedule_and_leaves_in_between() -> None:
    c = make(groups=[{"group_id": "hourly", "topics": ["orders"], "commit_interval_s": 1, "members": 2,
                      "batch_every_s": 100, "batch_run_s": 20}])
    g = c.groups["hourly"]
    run(c, 15)
    assert g.members == 2 and g.mode == "running"
    run(c, 10)
    committed = dict(g.committed)
    assert g.members == 0 and g.mode == "stopped"
    run(c, 60)
    assert dict(g.committed) == committed  # nothing consumed between runs
    run(c, 30)  # t = 115: the next run
    assert g.members == 2 and any(g.committed[k] > committed[k] for k in committed)


def test_a_recreated_topic_is_a_new_empty_log_and_its_readers_start_again() -> None:
    c = make(topics=[{"name": "orders", "partitions": 2, "replication_factor": 3, "produce_rate": 20}],
             groups=[{"group_id": "billing", "topics": ["orders"], "commit_interval_s": 1}])
    run(c, 20)
    p = c.topics["orders"].partitions[0]
    c.move_leader("orders", 0, 0, 0.0)  # one clean leader change on the old log: epoch 1
    run(c, 5)
    old_id, hw_before = c.topics["orders"].topic_id, p.hwm
    assert p.leader_epoch == 1 and hw_before > 100 and c.groups["billing"].committed[("orders", 0)] > 0
    c.recreate_topic("orders")
    new_id = c.topics["orders"].topic_id
    assert new_id != old_id and old_id not in c.topic_ids and c.topic_ids[new_id] == "orders"
    assert (p.leader_epoch, p.hwm, p.log_start, p.epoch_starts) == (0, 0, 0, [(0, 0)])
    assert c.groups["billing"].committed[("orders", 0)] == 0
    assert any(f"topic recreated orders: id {old_id} -> {new_id}; 2 partitions from offset 0" in e
               for e in _events(c))
    assert ("orders" in c.changes.topics) and (("orders", 0) in c.changes.partitions)  # the znodes follow
    run(c, 10)
    assert 0 < p.hwm < hw_before and 0 < c.groups["billing"].committed[("orders", 0)] <= p.hwm  # read again
    c.move_leader("orders", 0, 0, 0.0)  # the new log's first leader change: epoch 0 ends at its own end
    assert p.leader_epoch == 1 and p.epoch_end(0) == (0, p.hwm)
