"""One topic whose Metadata answers an error keeps that topic's alerts and memory only.

A topic being deleted answers UNKNOWN_TOPIC_OR_PARTITION for a while, one the monitor may not describe
TOPIC_AUTHORIZATION_FAILED. Before, either made the whole ``partitions`` section stale: every partition alert of
the cluster stayed open (an under-replicated partition of another topic, back in sync, never resolved), and the
poller forgot nothing of the partitions deleted meanwhile. Now the failure names its topic
(``stale_subjects["partitions"]``): that topic's partitions keep their alerts, timers and memory, and the others are
judged and pruned as usual. Metadata failing as a whole still keeps everything.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import pytest

from collectors.alerting.catalogue import CATALOGUE, is_kept, kept_over_stale
from collectors.config import Thresholds
from collectors.model.activity import GroupLife
from collectors.model.lag import CommitWindow, OffsetHistory
from collectors.model.loss import EpochWatch
from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.model.records import ClusterSnapshot, GroupPartitionRecord
from collectors.model.snapshot import build_snapshot
from collectors.model.stale_subjects import Subjects, stale_subjects
from collectors.model.state import ClusterState
from collectors.model.vocabulary import STALE_SUBJECT_KINDS, partition_of, partition_subject
from collectors.sources.kafka_adapter import KafkaAdapter
from collectors.sources.kafka_transport import Outcome
from tests.support.observed import T0, ObservedPoller

TH = Thresholds(under_replicated_grace_s=0)
DOOMED, ORDERS = "doomed", "orders-eu"  # a dash in a topic's name is as common as not
UNKNOWN_TOPIC_OR_PARTITION = 3


def observation(now: float, isr: dict[str, list[int]], topics: Iterable[str] = (DOOMED, ORDERS)) -> KafkaObservation:
    """Partitions 0 and 1 of each of `topics` on brokers 1-3 (min.insync.replicas 2), each topic's ISR as `isr`
    says."""
    return KafkaObservation(time=now, cluster_id="c", controller_id=1,
                            brokers=[(i, "h", 9092, None) for i in (1, 2, 3)],
                            partitions=[PartitionMeta(t, p, 1, 1, [1, 2, 3], list(isr[t]), [])
                                        for t in topics for p in (0, 1)],
                            topic_configs={t: {"min.insync.replicas": "2"} for t in topics})


def under(topic: str) -> set[tuple[str, str]]:
    """The alerts of `topic`'s partitions at ISR [1, 2]."""
    return {(rule, partition_subject(topic, p)) for rule in ("under_replicated", "at_min_isr") for p in (0, 1)}


def doomed_in_error(now: float, isr: list[int]) -> KafkaObservation:
    """`orders-eu` at ISR `isr`; `doomed` answered UNKNOWN_TOPIC_OR_PARTITION (its partitions not listed)."""
    obs = observation(now, {ORDERS: isr}, topics=[ORDERS])
    obs.fail("partitions", f"metadata for topic {DOOMED}: UNKNOWN_TOPIC_OR_PARTITION", subjects=[DOOMED])
    return obs


def test_a_topic_in_error_keeps_its_partitions_alerts_and_another_topics_resolve() -> None:
    p = ObservedPoller(TH)
    current, _ = p.poll(observation(p.now, {DOOMED: [1, 2], ORDERS: [1, 2]}))
    assert under(DOOMED) | under(ORDERS) <= current
    for i in range(3):  # a lasting error: every poll the same
        current, resolved = p.poll(doomed_in_error(p.now, [1, 2, 3]))  # orders-eu is back in sync
        assert under(DOOMED) <= current and not under(DOOMED) & resolved
        assert not under(ORDERS) & current and (under(ORDERS) <= resolved) == (i == 0)
        assert ("data_stale", "c") in current
    # the kept alerts' timers are kept too (they would open anew after the grace otherwise); the others' dropped
    assert {k for k in p.state.condition_since if k[0] == "under_replicated"} == {
        k for k in under(DOOMED) if k[0] == "under_replicated"}
    current, resolved = p.poll(observation(p.now, {DOOMED: [1, 2, 3], ORDERS: [1, 2, 3]}))
    assert under(DOOMED) <= resolved and not current


def test_a_topic_in_error_keeps_its_topic_alerts() -> None:
    """unsafe_durability judges a topic's replication factor, which only its partitions tell: while its Metadata
    answers an error the topic is not measured, and its alert is kept rather than resolved and opened again."""
    p = ObservedPoller(TH)
    obs = observation(p.now, {DOOMED: [1, 2, 3], ORDERS: [1, 2, 3]})
    obs.topic_configs = {t: {"min.insync.replicas": "3"} for t in (DOOMED, ORDERS)}  # min ISR = RF: unsafe
    current, _ = p.poll(obs)
    assert {("unsafe_durability", DOOMED), ("unsafe_durability", ORDERS)} <= current
    obs = doomed_in_error(p.now, [1, 2, 3])  # orders-eu's min ISR back to 2
    current, resolved = p.poll(obs)
    assert ("unsafe_durability", DOOMED) in current and ("unsafe_durability", ORDERS) in resolved


def test_metadata_failing_as_a_whole_still_keeps_every_partition_alert() -> None:
    """A topic's error, then another topic's of no name: which topics are concerned is unknown, all are kept."""
    p = ObservedPoller(TH)
    p.poll(observation(p.now, {DOOMED: [1, 2], ORDERS: [1, 2]}))
    obs = doomed_in_error(p.now, [1, 2, 3])
    obs.fail("partitions", "metadata for topic None: TOPIC_AUTHORIZATION_FAILED")
    current, resolved = p.poll(obs)
    assert under(DOOMED) | under(ORDERS) <= current and not resolved


def test_a_stale_topic_keeps_its_partitions_read_back_from_their_subjects() -> None:
    """The snapshot has no partition of the stale topic: a subject is its partition when it is the topic, a dash and
    a number. ``doomed-2-0`` is partition 0 of ``doomed-2``, not partition 2 of ``doomed``."""
    s = ClusterSnapshot(cluster="c", time=T0, stale_sections=["partitions"], stale_subjects={"partitions": [DOOMED]})
    kept = kept_over_stale(s)
    partition_rules = {r.name for r in CATALOGUE if "partitions" in r.keep_when_stale and r.subject == "partition"}
    topic_rules = {r.name for r in CATALOGUE if "partitions" in r.keep_when_stale and r.subject == "topic"}
    assert set(kept) == partition_rules | topic_rules and all(kept[r] == Subjects(partitions_of=frozenset({DOOMED}))
                                                              for r in partition_rules)
    assert topic_rules == {"unsafe_durability"} and kept["unsafe_durability"] == frozenset({DOOMED})
    for subject, ours in (("doomed-0", True), ("doomed-12", True), ("doomed-2-0", False), ("doomed", False),
                          ("doomed-x", False), ("doomed-", False), ("doomed-²", False), ("orders-eu-0", False)):
        assert is_kept(kept, "under_replicated", subject) == ours, subject
    assert not is_kept(kept, "isr_flapping", "doomed-0")  # kept over `cluster` only
    assert partition_of("my-topic-12") == ("my-topic", 12) and partition_of("-3") is None
    assert partition_of(partition_subject("a-1", 0)) == ("a-1", 0)


def test_a_stale_topic_in_the_other_subject_kinds() -> None:
    """The topic itself; the groups reading it; of any other kind, every subject."""
    assert STALE_SUBJECT_KINDS["partitions"] == "topic"
    s = ClusterSnapshot(cluster="c", time=T0, stale_sections=["partitions"],
                        stale_subjects={"partitions": [DOOMED]},
                        group_partitions=[GroupPartitionRecord("c", g, t, 0, 0, 0, 9, 9, 9, None)
                                          for g, t in (("a", DOOMED), ("b", ORDERS), ("b", "doomed-2"))])
    assert stale_subjects(s, "partitions", "topic") == Subjects(frozenset({DOOMED}))
    assert stale_subjects(s, "partitions", "group") == Subjects(frozenset({"a"}))
    assert stale_subjects(s, "partitions", "broker") is None
    # named partitions besides (from another section) are kept alongside a stale topic's
    both = Subjects(frozenset({"orders-eu-1"}), frozenset({DOOMED}))
    assert "orders-eu-1" in both and "doomed-0" in both and "orders-eu-0" not in both


def remembered(state: ClusterState, topics: Iterable[str], groups: Iterable[str]) -> None:
    """What the poller remembers of partition 0 of each of `topics`, and of each group's commits on it."""
    for t in topics:
        key = (t, 0)
        state.hw_history[key], state.partition_view[key] = OffsetHistory(4), (1, (1, 2, 3))
        state.isr_changes[key], state.epoch_watch[key] = deque(), EpochWatch(1, 1, (1, 2, 3), None, T0)
        for g in groups:
            state.commit_windows[(g, t, 0)] = CommitWindow(4)


def remembers(state: ClusterState, topic: str) -> bool | None:
    """Whether the poller remembers partition 0 of `topic` (None: in some of its memories only)."""
    known = [(topic, 0) in d for d in (state.hw_history, state.partition_view, state.isr_changes, state.epoch_watch)]
    return all(known) if all(known) or not any(known) else None


def test_the_memory_of_a_topic_in_error_is_kept_and_a_deleted_topics_forgotten() -> None:
    """`doomed` in error, `gone` deleted since the last poll: gone's partitions (and the commits read on them) are
    forgotten, doomed's kept. Before, nothing was forgotten while any topic was in error."""
    state = ClusterState()
    remembered(state, (DOOMED, "gone", ORDERS), ("g",))
    build_snapshot("c", doomed_in_error(T0, [1, 2, 3]), None, state, TH, T0)
    assert remembers(state, DOOMED) and remembers(state, ORDERS) and remembers(state, "gone") is False
    assert set(state.commit_windows) == {("g", DOOMED, 0)}  # g has no commit this poll: only the unread kept
    # Metadata failing as a whole: nothing of the partitions is forgotten
    obs = doomed_in_error(T0 + 30, [1, 2, 3])
    obs.fail("partitions", "metadata for topic None: TOPIC_AUTHORIZATION_FAILED")
    remembered(state, ("gone",), ())
    build_snapshot("c", obs, None, state, TH, T0 + 30)
    assert remembers(state, "gone")


def test_prune_keeps_the_unread_subjects_of_each_section_only() -> None:
    state = ClusterState()
    remembered(state, ("t", "u"), ("a", "b", "gone"))
    state.group_life = {g: GroupLife(T0) for g in ("a", "b", "gone")}
    parts = {("t", 0), ("u", 0)}
    # group `a` unread (its OffsetFetch refused: no commits), `gone` deleted, partition u-0's offsets unread
    state.prune(parts, {("b", "t", 0), ("b", "u", 0)}, {"b"}, unread_groups=["a"], unread_partitions=[("u", 0)])
    assert set(state.group_life) == {"a", "b"}
    assert set(state.commit_windows) == {("a", "t", 0), ("a", "u", 0), ("b", "t", 0), ("b", "u", 0), ("gone", "u", 0)}
    # a section stale as a whole (None) forgets nothing of it, whatever is unread
    state.prune(None, None, None, unread_topics=["t"])
    assert len(state.commit_windows) == 5 and remembers(state, "t") and remembers(state, "u")
    state.prune(set(), set(), set())
    assert not (state.commit_windows or state.group_life) and remembers(state, "t") is False


def metadata(topics: list[tuple[str | None, int]]) -> Any:
    """A Metadata answer of kafka-python's v12 class: each topic (name, error code) with one partition on 1-3."""
    from kafka.protocol.metadata import MetadataResponse

    cls = MetadataResponse[12]
    return cls(throttle_time_ms=0, cluster_id="c", controller_id=1,
               brokers=[cls.MetadataResponseBroker(node_id=i, host=f"b{i}", port=9092, rack=None) for i in (1, 2, 3)],
               topics=[cls.MetadataResponseTopic(
                   error_code=code, name=name, topic_id=None, is_internal=False,
                   partitions=[] if code else [cls.MetadataResponseTopic.MetadataResponsePartition(
                       error_code=0, partition_index=0, leader_id=1, leader_epoch=1, replica_nodes=[1, 2, 3],
                       isr_nodes=[1, 2, 3], offline_replicas=[])]) for name, code in topics])


@pytest.mark.parametrize(("topics", "named"), [
    ([(DOOMED, UNKNOWN_TOPIC_OR_PARTITION), (ORDERS, 0)], {"partitions": {DOOMED}}),
    ([(DOOMED, UNKNOWN_TOPIC_OR_PARTITION), (None, 29), (ORDERS, 0)], {}),  # one of no name: every topic
], ids=["named", "nameless"])
def test_the_adapter_names_the_topic_whose_metadata_failed(topics: list[tuple[str | None, int]],
                                                            named: dict[str, set[str]]) -> None:
    answer = metadata(topics)
    kp = SimpleNamespace(send_one=lambda node, req: Outcome(node, req, answer, None), broker_ids=lambda: [1, 2, 3],
                         refresh_brokers=lambda md: None)
    obs = KafkaObservation(time=T0)
    assert KafkaAdapter("c", {}, {}, 1.0)._metadata(kp, obs)
    assert obs.reachable and obs.stale_sections == {"partitions"} and obs.stale_subjects == named
    assert [(p.topic, p.partition) for p in obs.partitions] == [(ORDERS, 0)]
    assert obs.replica_brokers is None  # the topic's replicas are unknown: no broker is taken for decommissioned


def test_a_topic_the_filters_leave_out_makes_nothing_stale_even_in_error() -> None:
    """The cluster's filters leave `doomed` out: its Metadata error is nobody's concern here (before, it still made
    `partitions` stale and raised data_stale). Its replicas stay unknown."""
    answer = metadata([(DOOMED, UNKNOWN_TOPIC_OR_PARTITION), (ORDERS, 0)])
    kp = SimpleNamespace(send_one=lambda node, req: Outcome(node, req, answer, None), broker_ids=lambda: [1, 2, 3],
                         refresh_brokers=lambda md: None)
    obs = KafkaObservation(time=T0)
    adapter = KafkaAdapter("c", {}, {}, 1.0, topic_filter=lambda name, internal: name != DOOMED)
    assert adapter._metadata(kp, obs)
    assert not obs.stale_sections and not obs.errors and obs.filtered_topics == 1
    assert [(p.topic, p.partition) for p in obs.partitions] == [(ORDERS, 0)]
    assert obs.replica_brokers is None


def test_data_stale_names_the_subjects_a_section_is_stale_for() -> None:
    """Which topic, group or partitions to look at, a few by name and the rest counted; a whole section by itself."""
    from collectors.alerting.rules import cluster_health

    snap = ClusterSnapshot(cluster="c", time=T0, stale=True,
                           stale_sections=["offsets", "partitions", "transactions", "zookeeper"],
                           stale_subjects={"partitions": [DOOMED],
                                           "offsets": ["orders-eu-1", "orders-eu-0", "b-1", "a-0", "a-10"],
                                           "transactions": ["tx-1", "tx-2"]})
    (c,) = cluster_health(snap, ClusterState(), {}, TH, T0)
    assert (c.rule, c.value) == ("data_stale", 4.0)
    assert c.summary == ("stale sections: offsets (5 partitions: a-0, a-10, b-1 and 2 more), partitions (topic "
                         "doomed), transactions (2 transactional ids: tx-1, tx-2), zookeeper")
