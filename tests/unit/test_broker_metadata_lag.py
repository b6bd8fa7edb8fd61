"""A broker whose metadata cache lags the controller, outside KRaft (`broker_metadata_lagging`).

Each poll asks every broker about the topics whose leader epochs moved last (`collectors.model.metadata_lag`). A
broker that answers an epoch another answer had replaced by time t lags by at least now - t: evidence, a lower
bound, never more than what happened. The sandbox's `metadata_lag` incident freezes a ZooKeeper broker's answers
and prints, when it catches up, how long and on which partitions; the integration test
(`tests/integration/test_faults_topology.py`) compares the collector's words with that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from collectors.alerting.catalogue import CONSENSUS_RULES, RULES, TIMED_RULES
from collectors.alerting.correlation import correlate
from collectors.alerting.evaluation import judge
from collectors.alerting.lifecycle import AlertTracker
from collectors.alerting.rules import Candidate
from collectors.alerting.thresholds import Thresholds
from collectors.model.metadata_lag import Behind, EpochMemory
from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.outputs.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from collectors.outputs.exporter import MetricsEndpoint
from tests.unit.test_checkpoint import edit_meta
from tests.unit.test_sandbox_model import make, run

T0 = 1_800_000_000.0
TH = Thresholds()
TID = "6a1f0c4e-0000-4000-8000-000000000001"


# ----------------------------------------------------------------------------- the pure memory

def parts(epochs: dict[tuple[str, int], int], tid: str | None = TID) -> list[PartitionMeta]:
    return [PartitionMeta(t, p, 1, e, [1, 2, 3], [1, 2, 3], [], tid) for (t, p), e in epochs.items()]


def test_a_broker_answering_an_epoch_replaced_earlier_lags_by_at_least_that_long() -> None:
    m = EpochMemory()
    m.witness(parts({("orders", 0): 5, ("orders", 1): 2}), {}, at=T0)
    assert m.lagging({3: {("orders", 0): (5, TID)}}, T0 + 60) == {3: Behind(0, 0.0)}  # current
    m.witness(parts({("orders", 0): 6, ("orders", 1): 2}), {}, at=T0 + 10)  # leadership moved
    assert m.lagging({3: {("orders", 0): (5, TID), ("orders", 1): (2, TID)}}, T0 + 70) == {3: Behind(1, 60.0)}
    assert m.behind_by == {3: {("orders", 0): (5, T0 + 10, TID)}}


def test_the_bound_is_never_negative() -> None:
    m = EpochMemory()
    m.witness(parts({("orders", 0): 5}), {}, at=T0 + 2)  # the answers of a poll that began at T0 came by T0 + 2
    assert m.lagging({3: {("orders", 0): (4, TID)}}, T0) == {3: Behind(1, 0.0)}  # behind, in the same poll


def test_the_bound_does_not_start_over_when_the_partition_moves_again() -> None:
    """A broker stuck at epoch 5 while the partition goes to 6, then 7: its lag counts from 6's time."""
    m = EpochMemory()
    m.witness(parts({("orders", 0): 5}), {}, at=T0)
    m.witness(parts({("orders", 0): 6}), {}, at=T0 + 10)
    m.lagging({3: {("orders", 0): (5, TID)}}, T0 + 40)
    m.witness(parts({("orders", 0): 7}), {}, at=T0 + 50)
    assert m.lagging({3: {("orders", 0): (5, TID)}}, T0 + 70) == {3: Behind(1, 60.0)}
    # first found behind after two moves: the earliest epoch above its own counts, not the latest
    assert m.lagging({4: {("orders", 0): (5, TID)}, 5: {("orders", 0): (6, TID)}}, T0 + 70) == {
        4: Behind(1, 60.0), 5: Behind(1, 20.0)}


def test_a_higher_epoch_a_probe_showed_is_learned_and_dated_by_that_poll() -> None:
    """The believed answer came from a broker a change had not reached yet; another broker showed the new epoch."""
    m = EpochMemory()
    m.witness(parts({("orders", 0): 5}), {}, at=T0)
    m.witness(parts({("orders", 0): 5}), {1: {("orders", 0): (6, TID)}, 3: {("orders", 0): (5, TID)}}, at=T0 + 30)
    assert (m.seen[("orders", 0)].epoch, m.seen[("orders", 0)].at, m.moved) == (6, T0 + 30, {"orders": T0 + 30})
    assert m.lagging({3: {("orders", 0): (5, TID)}}, T0 + 100) == {3: Behind(1, 70.0)}
    # the lagging broker's answer believed again (every other one failed): epochs never go back
    m.witness(parts({("orders", 0): 5}), {}, at=T0 + 110)
    assert m.seen[("orders", 0)].epoch == 6 and m.lagging({3: {("orders", 0): (5, TID)}}, T0 + 130) == {
        3: Behind(1, 100.0)}


def test_without_the_same_topic_id_an_older_epoch_is_no_evidence() -> None:
    """Deleted and created again, a topic's epochs start over: with another id that is plain; without ids (Kafka
    before 2.8, or an older inter.broker.protocol.version) it cannot be told from a lag, so nothing is claimed."""
    m = EpochMemory()
    m.witness(parts({("orders", 0): 9}), {}, at=T0 - 86_400)
    other = "6a1f0c4e-0000-4000-8000-000000000002"
    assert m.lagging({3: {("orders", 0): (0, other)}}, T0) == {3: Behind(0, 0.0)}
    m.witness(parts({("orders", 0): 9}, tid=None), {}, at=T0 - 86_400)
    m.witness(parts({("orders", 0): 9}, tid=None), {1: {("orders", 0): (10, None)}}, at=T0 - 60)  # not learned
    assert m.seen[("orders", 0)].epoch == 9 and not m.moved
    assert m.lagging({b: {("orders", 0): (0, None)} for b in (1, 2, 3)}, T0) == dict.fromkeys((1, 2, 3), Behind(0, 0.0))


def test_what_a_broker_is_behind_on_outside_its_answer_is_kept_unjudged() -> None:
    """Its answer this poll lacks the topic it is behind on (not asked, or answered with an error): nothing says it
    caught up there. Not answered at all: kept as well."""
    m = EpochMemory()
    m.witness(parts({("a", 0): 5, ("b", 0): 1}), {}, at=T0)
    m.witness(parts({("a", 0): 6, ("b", 0): 1}), {}, at=T0 + 10)
    m.lagging({3: {("a", 0): (5, TID)}}, T0 + 40)
    assert m.lagging({3: {("b", 0): (1, TID)}}, T0 + 55) == {3: None}
    assert m.lagging({1: {("a", 0): (6, TID)}}, T0 + 70) == {1: Behind(0, 0.0)}
    assert m.behind_by == {3: {("a", 0): (5, T0 + 10, TID)}}
    assert m.lagging({3: {("a", 0): (5, TID)}}, T0 + 85) == {3: Behind(1, 75.0)}
    assert m.lagging({3: {("a", 0): (6, TID)}}, T0 + 100) == {3: Behind(0, 0.0)} and m.behind_by == {}  # caught up


def test_a_younger_lag_found_elsewhere_does_not_settle_an_older_one() -> None:
    """Its answer this poll shows it behind on b since a moment ago, but lacks a, where it has been behind for a
    minute: judged by b, its alert would resolve while the lag grows."""
    m = EpochMemory()
    m.witness(parts({("a", 0): 5, ("b", 0): 1}), {}, at=T0)
    m.witness(parts({("a", 0): 6, ("b", 0): 1}), {}, at=T0 + 10)
    m.lagging({3: {("a", 0): (5, TID), ("b", 0): (1, TID)}}, T0 + 40)
    m.witness(parts({("a", 0): 6, ("b", 0): 2}), {}, at=T0 + 65)
    assert m.lagging({3: {("b", 0): (1, TID)}}, T0 + 70) == {3: None}
    assert m.lagging({3: {("a", 0): (5, TID), ("b", 0): (1, TID)}}, T0 + 85) == {3: Behind(2, 75.0)}


def test_a_topic_created_again_does_not_inherit_the_old_ones_lag() -> None:
    m = EpochMemory()
    m.witness(parts({("o", 0): 0}), {}, at=T0)
    m.witness(parts({("o", 0): 1}), {}, at=T0 + 10)
    m.lagging({3: {("o", 0): (0, TID)}}, T0 + 40)
    other = "6a1f0c4e-0000-4000-8000-000000000002"
    m.witness(parts({("o", 0): 0}, tid=other), {}, at=T0 + 7200)  # deleted and created again
    m.witness(parts({("o", 0): 1}, tid=other), {}, at=T0 + 7210)  # and moved
    assert m.lagging({3: {("o", 0): (0, other)}}, T0 + 7215) == {3: Behind(1, 5.0)}


def test_what_can_no_longer_be_asked_is_forgotten_and_a_down_brokers_topics_take_no_place() -> None:
    m = EpochMemory()
    m.witness(parts({("big", 0): 5, ("x", 0): 1}), {}, at=T0)
    m.witness(parts({("big", 0): 6, ("x", 0): 1}), {}, at=T0 + 10)
    m.lagging({3: {("big", 0): (5, TID)}, 4: {("x", 0): (0, TID)}}, T0 + 40)
    m.up = {1, 2, 3}  # broker 4 down
    assert "x" not in m.behind_topics()
    m.sizes = {"big": 600, "x": 1}  # grown past the budget: never asked again, so never judged
    n = m.witness(parts({("big", 0): 6, ("x", 0): 1}), {}, at=T0 + 55)
    m.prune(n, lambda: {("big", 0), ("x", 0)}, brokers={1, 2, 3, 4})
    assert set(m.behind_by) == {4}


def test_the_topics_asked_are_those_behind_then_the_latest_moved_then_a_round_within_a_budget() -> None:
    m = EpochMemory()
    m.witness(parts({(t, 0): 1 for t in "abcdefgh"}), {}, at=T0)
    m.sizes = dict.fromkeys("abcdefgh", 1)
    # nothing moved yet: a round over every topic by name, `limit` a poll
    assert [m.probe_topics(limit=3) for _ in range(3)] == [["a", "b", "c"], ["d", "e", "f"], ["g", "h", "a"]]
    m.witness(parts({("c", 0): 2}), {}, at=T0 + 10)
    m.witness(parts({("f", 0): 2, ("e", 0): 2}), {}, at=T0 + 20)
    # the moved, least recently asked first, then the latest (ties by name), all but one place; the round goes on
    assert m.probe_topics(limit=4, now=T0 + 30) == ["c", "e", "f", "b"]
    # moved more than ten minutes ago: asked only in the round's turn
    assert m.probe_topics(limit=4, now=T0 + 20 + 601) == ["c", "d", "e", "f"]
    m.lagging({4: {("g", 0): (0, TID)}, 5: {("h", 0): (0, TID)}}, T0 + 30)  # behind: asked first
    assert m.probe_topics(limit=4, now=T0 + 30) == ["g", "h", "e", "a"]
    assert m.probe_topics(limit=2, now=T0 + 30) == ["g", "b"]  # half the places at most, least recently asked first
    assert m.probe_topics(limit=2, now=T0 + 30) == ["h", "c"]
    # a budget of partitions: a topic bigger than the budget is never asked; one that does not fit what is left
    # ends the round and starts it next poll
    m.behind_by.clear()
    m.sizes = {"a": 300, "b": 300, "c": 900, "d": 100, "e": 300, "f": 300, "g": 100, "h": 100}
    m.cursor = "b"
    assert m.probe_topics(limit=4, budget=500, now=T0 + 30) == ["f", "d", "g"]  # e passed over, c never asked
    assert m.probe_topics(limit=4, budget=500, now=T0 + 30) == ["e", "h", "d"]  # a, b passed over
    assert m.probe_topics(limit=4, budget=500, now=T0 + 20 + 601) == ["e", "g", "h"]
    # after a restart sizes are unknown: one topic of unknown size a poll
    back = EpochMemory(sizes={})
    back.behind_by = {3: {(t, 0): (0, T0, TID) for t in "abc"}}
    assert [back.probe_topics() for _ in range(3)] == [["a"], ["b"], ["c"]]


def test_prune_keeps_unread_topics_and_forgets_the_rest() -> None:
    m = EpochMemory()
    m.witness(parts({("a", 0): 1, ("b", 0): 1, ("gone", 0): 1}), {}, at=T0)
    m.witness(parts({("a", 0): 2, ("gone", 0): 2}), {}, at=T0 + 10)
    m.lagging({3: {("a", 0): (1, TID), ("gone", 0): (1, TID)}, 4: {("gone", 0): (1, TID)}}, T0 + 20)
    n = m.witness(parts({("a", 0): 2}), {}, at=T0 + 20)  # "b" unread this poll (its Metadata in error)
    m.prune(n, lambda: {("a", 0)}, brokers={1, 2, 3}, unread_topics={"b"})
    assert set(m.seen) == {("a", 0), ("b", 0)} and set(m.moved) == {"a"}
    assert m.behind_by == {3: {("a", 0): (1, T0 + 10, TID)}}  # broker 4 left the cluster; "gone" was deleted


def test_what_a_checkpoint_keeps_restores_the_bound() -> None:
    m = EpochMemory()
    m.witness(parts({("orders", 0): 5, ("orders", 1): 1}), {}, at=T0)
    m.witness(parts({("orders", 0): 6, ("orders", 1): 1}), {}, at=T0 + 10)
    m.lagging({3: {("orders", 0): (5, TID)}}, T0 + 40)
    saved = m.saved()
    assert saved == [("orders", 0, 6, TID, T0 + 10, 3, 5, T0 + 10)]
    back = EpochMemory.restore(saved)
    assert back.probe_topics() == ["orders"]
    back.witness(parts({("orders", 0): 7, ("orders", 1): 1}), {}, at=T0 + 100)  # moved again meanwhile
    assert back.lagging({3: {("orders", 0): (5, TID)}}, T0 + 100) == {3: Behind(1, 90.0)}


# ----------------------------------------------------------------------------- snapshot, rule, metric, incident

def observed(t: float, epochs: dict[int, int], probes: dict[int, dict[int, int]],
             brokers: tuple[int, ...] = (1, 2, 3), unreachable: frozenset[int] = frozenset()) -> KafkaObservation:
    """A poll at `t` whose answers were all in by `t`: partitions of ``orders`` at leader epochs `epochs`, and
    what each broker asked answered (broker -> partition -> epoch)."""
    obs = KafkaObservation(time=t, cluster_id="c", controller_id=1, answered_by=t,
                           brokers=[(i, f"h{i}", 9092, None) for i in brokers])
    obs.partitions = [PartitionMeta("orders", p, 1, e, [1, 2, 3], [1, 2, 3], [], TID) for p, e in epochs.items()]
    obs.metadata_probes = {b: {("orders", p): (e, TID) for p, e in view.items()} for b, view in probes.items()}
    obs.unreachable_brokers |= set(unreachable)
    return obs


def judged(obs: KafkaObservation, st: ClusterState, th: Thresholds = TH, kraft: bool | None = None
           ) -> list[Candidate]:
    snap = build_snapshot("c", obs, None, st, th, obs.time, kraft=kraft)
    return [a for a in judge(snap, st, th, obs.time) if a.rule == "broker_metadata_lagging"]


def lag_story(st: ClusterState, th: Thresholds = TH) -> list[list[Candidate]]:
    """Broker 3's cache stops at epoch 5 of orders-0; leadership moves at T0 + 10; polls every 15 s after."""
    out = [judged(observed(T0, {0: 5, 1: 1}, {}), st, th)]
    for t in (T0 + 10, T0 + 25, T0 + 40, T0 + 55):
        out.append(judged(observed(t, {0: 6, 1: 1}, {1: {0: 6, 1: 1}, 2: {0: 6, 1: 1}, 3: {0: 5, 1: 1}}), st, th))
    return out


def test_a_lag_over_30s_proved_by_the_answer_is_an_alert_that_says_by_how_much() -> None:
    st = ClusterState()
    first, same_poll, after_15, after_30, after_45 = lag_story(st)
    assert first == same_poll == after_15 == after_30 == []  # 0, 15, 30 s: not more than 30 s yet
    (a,) = after_45
    assert (a.severity, a.subject, a.value) == ("warning", "broker-3", 45.0)
    assert a.summary == ("broker 3's metadata cache lags the controller by 45s at least: it answered 1 partition at "
                         "a leader epoch replaced that long ago, so the clients it answers go to old leaders")
    assert {b.broker_id: b.metadata_behind_s for b in build_snapshot(
        "c", observed(T0 + 70, {0: 6, 1: 1}, {1: {0: 6}, 3: {0: 5}}), None, st, TH, T0 + 70).brokers} == \
        {1: 0.0, 2: None, 3: 60.0}


def test_the_alert_stays_and_its_bound_grows_while_the_partition_keeps_moving() -> None:
    st = ClusterState()
    assert [a.value for a in lag_story(st)[-1]] == [45.0]
    probes = {1: {0: 7, 1: 1}, 2: {0: 7, 1: 1}, 3: {0: 5, 1: 1}}
    assert [a.value for a in judged(observed(T0 + 70, {0: 7, 1: 1}, probes), st)] == [60.0]  # moved to 7
    assert [a.value for a in judged(observed(T0 + 85, {0: 8, 1: 1}, probes), st)] == [75.0]  # and to 8


def test_the_threshold_is_configurable() -> None:
    assert lag_story(ClusterState(), Thresholds(broker_metadata_lag_s=50))[-1] == []


def test_a_broker_that_caught_up_resolves_and_one_not_asked_while_up_stays_lagging() -> None:
    st = ClusterState()
    assert lag_story(st)[-1]
    (kept,) = judged(observed(T0 + 70, {0: 6, 1: 1}, {1: {0: 6, 1: 1}}), st)  # 3 up, its answer failed
    assert kept.subject == "broker-3" and "this poll has no answer of it to judge" in kept.summary
    assert judged(observed(T0 + 85, {0: 6, 1: 1}, {1: {0: 6}, 3: {0: 6, 1: 1}}), st) == []  # caught up


def test_a_broker_down_or_not_answering_is_not_also_lagging() -> None:
    st = ClusterState()
    assert lag_story(st)[-1]
    assert judged(observed(T0 + 70, {0: 6, 1: 1}, {1: {0: 6}}, brokers=(1, 2)), st) == []  # 3 down
    st = ClusterState()
    assert lag_story(st)[-1]
    assert judged(observed(T0 + 70, {0: 6, 1: 1}, {1: {0: 6}, 3: {0: 5}}, unreachable=frozenset({3})), st) == []


def test_not_judged_in_kraft_where_describe_quorum_says_it() -> None:
    st = ClusterState()
    judged(observed(T0, {0: 5}, {}), st, kraft=True)
    assert judged(observed(T0 + 60, {0: 6}, {3: {0: 5}}), st, kraft=True) == []
    assert not st.metadata_lag.seen and st.metadata_lag.probe_topics() == []  # nothing asked of brokers


def test_it_is_a_timed_consensus_rule_with_its_twin_and_a_down_broker_takes_its_alert() -> None:
    spec = RULES["broker_metadata_lagging"]
    assert (spec.family, spec.subject, spec.prometheus) == ("brokers", "broker", ("KafkaBrokerMetadataLagging",))
    assert "broker_metadata_lagging" in CONSENSUS_RULES and "broker_metadata_lagging" in TIMED_RULES
    st, tracker = ClusterState(), AlertTracker()
    for obs in (observed(T0, {0: 5}, {}), observed(T0 + 10, {0: 6}, {3: {0: 5}}),
                observed(T0 + 60, {0: 6}, {3: {0: 5}})):
        snap = build_snapshot("c", obs, None, st, TH, obs.time)
        current, _, _ = tracker.update("c", judge(snap, st, TH, obs.time), obs.time)
    snap.alerts = current
    (cause,) = correlate(snap, current)
    assert (cause.kind, cause.members) == ("consensus", {"broker_metadata_lagging": 1})


def test_only_a_broker_seen_behind_is_exported() -> None:
    st = ClusterState()
    lag_story(st)
    snap = build_snapshot("c", observed(T0 + 70, {0: 6, 1: 1}, {1: {0: 6}, 3: {0: 5}}), None, st, TH, T0 + 70)
    ep = MetricsEndpoint()
    ep.update([snap])
    found = {x.labels["broker"]: x.value for fam in text_string_to_metric_families(ep.render().decode())
             for x in fam.samples if x.name == "kafka_broker_metadata_behind_seconds"}
    assert found == {"3": 60.0}


# ----------------------------------------------------------------------------- the sandbox's ground truth

def test_the_sandbox_says_how_long_a_zookeeper_brokers_cache_lagged_and_on_which_partitions() -> None:
    from sandbox.handlers import metadata_answer

    c = make(brokers=3)
    run(c, 5)
    c.lag_metadata(3, metadata_answer(c))
    before = {(t.name, p.index): p.leader_epoch for t in c.topics.values() for p in t.partitions}
    c.crash_broker(1)
    run(c, 40)
    c.lag_metadata(3, None)
    moved = sorted(f"{t.name}-{p.index}" for t in c.topics.values() for p in t.partitions
                   if p.leader_epoch > before[(t.name, p.index)])
    assert moved  # broker 1 led some partitions: their leadership moved while 3's cache was frozen
    assert c.events[-1][2] == (f"broker 3: metadata cache caught up after 40s; it had answered {len(moved)} "
                               f"partition(s) at an older leader epoch: {', '.join(moved[:5])}")


# ----------------------------------------------------------------------------- a restart, a clock not owned

def test_a_restart_keeps_asking_where_a_broker_was_behind_and_its_bound_keeps_growing(tmp_path: Path) -> None:
    """After a restart the memory of what moved when is gone but for what the checkpoint keeps: without it, the
    topics asked were any, the lagging broker current on them, and its alert resolved while it still lagged."""
    st = ClusterState()
    assert lag_story(st)[-1]
    save_checkpoint(tmp_path, Checkpoint("c", "c", T0 + 55, st))
    cp = load_checkpoint(tmp_path, "c", lag_points=60, window_size=10, now=T0 + 60, max_age_s=3600)
    assert cp is not None
    back = cp.state
    assert back.metadata_lag.probe_topics() == ["orders"]
    (a,) = judged(observed(T0 + 85, {0: 6, 1: 1}, {1: {0: 6, 1: 1}, 3: {0: 5, 1: 1}}), back)
    assert (a.subject, a.value) == ("broker-3", 75.0)


def test_an_older_checkpoint_without_it_loads_with_nothing_behind(tmp_path: Path) -> None:
    st = ClusterState()
    lag_story(st)
    path = save_checkpoint(tmp_path, Checkpoint("c", "c", T0 + 55, st))[0]

    def drop(meta: dict[str, Any]) -> None:
        assert meta["metadata_lag"] == [["orders", 0, 6, TID, T0 + 10, 3, 5, T0 + 10]]
        del meta["metadata_lag"]

    edit_meta(path, drop)
    cp = load_checkpoint(tmp_path, "c", lag_points=60, window_size=10, now=T0 + 60, max_age_s=3600)
    assert cp is not None and cp.state.metadata_lag == EpochMemory()


def test_a_poll_that_does_not_know_when_its_answers_came_judges_nothing() -> None:
    """A `now` from another clock, the poller owning none: dating the epochs by the poll's start would overstate
    the bound by the poll's length, so nothing is dated, judged or asked."""
    st = ClusterState()
    for t, epoch in ((T0, 5), (T0 + 10, 6), (T0 + 100, 6)):
        obs = observed(t, {0: epoch}, {3: {0: 5}} if t > T0 else {})
        obs.answered_by = None
        assert judged(obs, st) == []
    assert st.metadata_lag == EpochMemory()
