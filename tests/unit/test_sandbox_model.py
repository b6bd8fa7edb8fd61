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
