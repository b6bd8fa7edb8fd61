"""Big sandbox clusters: generated topics and groups, Kafka's replica placement, the model's shortcuts for
idle partitions (exact, checked against the same model doing everything every step), the ground truth for
broker outages, and the encoder's fast path (the same bytes as kafka-python's message objects)."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import pytest

from sandbox import protocol
from sandbox.__main__ import build_parser, resolve_scenario
from sandbox.__main__ import main as sandbox_main
from sandbox.handlers import Handlers
from sandbox.model import Cluster
from sandbox.protocol import Request, encode_response
from sandbox.scenario import DEFAULT_SCENARIO, ScenarioError, load_scenario, parse_scenario
from sandbox.spec import ClusterSpec
from sandbox.topology import Partition, assign_replicas

T0 = 1_700_000_000.0


def make(**cluster: Any) -> Cluster:
    return Cluster(ClusterSpec.model_validate(cluster), T0)


# ----------------------------------------------------------------------------- scenarios
def test_generated_topics_and_groups_from_one_line_each() -> None:
    s = parse_scenario("""
cluster:
  brokers: 6
  generated_topics: {count: 2000, partitions: 10, replication_factor: 3, min_insync_replicas: 2, prefix: t}
  generated_groups: {count: 200, topics_per_group: 5, prefix: g}
incidents:
  - {type: consumer_stall, at: 5, group: g199}
  - {type: hanging_transaction, at: 5, topic: t1999}
""")
    c = s.cluster
    assert c.partition_count() == 20_000 and c.topic_names()[:2] == ["t0000", "t0001"]
    groups = c.all_groups()
    assert len(groups) == 200 and groups[0].topics == ["t0000", "t0001", "t0002", "t0003", "t0004"]
    assert groups[199].group_id == "g199" and groups[199].topics[-1] == "t0999"
    cluster = Cluster(c, T0)
    assert cluster.topics["t1999"].configs == {"min.insync.replicas": "2"} and cluster.min_isr("t0000") == 2
    assert cluster.groups["g001"].position[("t0005", 9)] == 0.0


def test_the_storm_scenario_is_20000_partitions_and_a_broker_outage() -> None:
    s = load_scenario(DEFAULT_SCENARIO.with_name("storm.yaml"))
    assert s.cluster.partition_count() == 20_000 and len(s.cluster.all_groups()) == 101
    assert [(i.type, i.broker) for i in s.incidents] == [("broker_crash", 4)]


@pytest.mark.parametrize(("bad", "message"), [
    ("generated_topics: {count: 2000, partitions: 1000}", "2,000,000 partitions; at most 1,000,000"),
    ("generated_topics: {count: 10, replication_factor: 7}", "replication_factor 7 > brokers 6"),
    ("generated_topics: {count: 10, min_insync_replicas: 4}", "every acks=all write would fail"),
    ("generated_topics: {count: 10, prefix: 'a b'}", "generated_topics.prefix"),
    ("generated_topics: {count: 10, colour: red}", "generated_topics.colour"),
    ("generated_topics: {count: 10}\n  topics: [{name: t3}]", "duplicate topic names (listed and generated): ['t3']"),
    ("generated_groups: {count: 3}", "no topics for them to read"),
    ("generated_topics: {count: 3}\n  generated_groups: {count: 3, topics_per_group: 4}",
     "topics_per_group 4 > the 3 topics"),
    ("generated_topics: {count: 3}\n  generated_groups: {count: 3}\n  groups: [{group_id: g1, topics: [t0]}]",
     "duplicate group ids (listed and generated): ['g1']"),
])
def test_generated_specs_are_validated_with_clear_messages(bad: str, message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(f"cluster:\n  brokers: 6\n  {bad}\n", "big.yaml")
    assert message in str(e.value)


def test_command_line_generates_topics_and_groups(capsys: pytest.CaptureFixture[str]) -> None:
    s = resolve_scenario(build_parser().parse_args(["--topics", "2000x10", "--groups", "200x5", "--brokers", "6"]))
    gen = s.cluster.generated_topics
    assert gen is not None and (gen.count, gen.partitions, gen.replication_factor) == (2000, 10, 3)
    assert s.cluster.generated_groups is not None and s.cluster.generated_groups.topics_per_group == 5
    assert sandbox_main(["--topics", "2000by10"]) == 2
    assert "expected COUNTxPARTITIONS[xRF]" in capsys.readouterr().err
    assert sandbox_main(["--topics", "10x2", "--groups", "3x11"]) == 2
    assert "topics_per_group 11 > the 10 topics" in capsys.readouterr().err


# ----------------------------------------------------------------------------- placement
def test_replica_assignment_is_kafkas() -> None:
    """Kafka's own expectation for 5 brokers, 10 partitions, RF 3, fixed start 0 (AdminRackAwareTest)."""
    assert assign_replicas([0, 1, 2, 3, 4], 10, 3, start=0, shift=0) == [
        [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0], [4, 0, 1],
        [0, 2, 3], [1, 3, 4], [2, 4, 0], [3, 0, 1], [4, 1, 2]]


@pytest.mark.parametrize(("brokers", "topics", "partitions"), [(6, 400, 10), (5, 300, 7), (7, 500, 1), (3, 50, 4)])
def test_every_broker_leads_and_follows_the_same_number_of_partitions(brokers: int, topics: int,
                                                                        partitions: int) -> None:
    c = make(brokers=brokers, generated_topics={"count": topics, "partitions": partitions})
    generated = [p for t in c.topics.values() if not t.internal for p in t.partitions]
    leaders = Counter(p.replicas[0] for p in generated)
    replicas = Counter(r for p in generated for r in p.replicas)
    assert max(leaders.values()) - min(leaders.values()) <= 1 and len(leaders) == brokers
    mean = sum(replicas.values()) / brokers
    assert max(replicas.values()) - min(replicas.values()) <= max(2, 0.02 * mean)  # shifts cycle every B(B-1) topics
    assert all(len(set(p.replicas)) == 3 for p in generated)
    # a broker's partitions have their other replicas on every other broker
    for b in c.brokers:
        peers = Counter(r for p in c.partitions_with_replica(b) for r in p.replicas if r != b)
        assert set(peers) == set(c.brokers) - {b}


# ----------------------------------------------------------------------------- ground truth
def test_ground_truth_of_a_broker_outage() -> None:
    c = make(brokers=3, broker_config={"min.insync.replicas": "2"}, topics=[
        {"name": "orders", "partitions": 3, "replication_factor": 3, "produce_rate": 30},
        {"name": "single", "partitions": 3, "replication_factor": 1, "configs": {"min.insync.replicas": 1}},
        {"name": "risky", "partitions": 2, "replication_factor": 2,
         "configs": {"unclean.leader.election.enable": True}},
    ])
    c.advance(T0 + 5)
    before = c.ground_truth_broker_outage(2)
    assert not before.down and before.under_replicated == before.offline == frozenset()
    assert before.partitions == {(p.topic, p.index) for p in c.all_partitions() if 2 in p.replicas}
    assert before.partitions == {(p.topic, p.index) for p in c.partitions_with_replica(2)}
    c.crash_broker(2)
    c.advance(T0 + 10)
    crashed = c.ground_truth_broker_outage(2)  # session not expired: the dead broker still leads
    assert crashed.down and crashed.registered and crashed.led and crashed.under_replicated == frozenset()
    c.advance(T0 + 30)
    t = c.ground_truth_broker_outage(2)
    assert not t.registered and t.led == frozenset()
    assert t.offline == {("single", 1)}  # its only replica was on broker 2
    assert ("orders", 0) in t.at_min_isr and ("risky", 1) in t.under_min_isr  # risky-1: [2, 3] → ISR [3]
    assert t.under_replicated == t.partitions - {("single", 1)}  # the offline one keeps its last ISR member
    assert not (t.offline & t.at_min_isr) and not (t.offline & t.under_min_isr)
    assert t.unclean_topics == {"risky"} and t.unclean_possible
    internal = c.ground_truth_broker_outage(2, include_internal=False)
    assert internal.partitions == {k for k in t.partitions if not k[0].startswith("__")}


# ----------------------------------------------------------------------------- the shortcuts are exact
class EveryPartitionEveryStep(Cluster):
    """The model without its shortcuts: nothing settles, every topic is re-read and every position committed."""

    def _settle(self, p: Partition, lag_max: float) -> bool:
        return False

    def _step(self, now: float) -> None:
        for t in self.topics.values():
            self._touch(t.name)
        self._retain_next = -math.inf
        for g in self.groups.values():
            g.behind = None
            g.uncommitted = None
        super()._step(now)


def _state(c: Cluster) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for p in c.all_partitions():
        caught_up_at = dict(p.caught_up_at)
        for r in p.quiet or ():
            caught_up_at[r] = c._replicated_at  # what a settled partition's replicas stand for
        out[(p.topic, p.index)] = (p.leader, p.leader_epoch, p.partition_epoch, list(p.isr), dict(p.leo),
                                   caught_up_at, p.hwm, p.log_start, list(p.segments), p.lso)
    out["groups"] = {g.group_id: (g.state, g.mode, dict(g.position), dict(g.committed), g.last_commit)
                     for g in c.groups.values()}
    out["brokers"] = {i: (b.process_up, b.registered) for i, b in c.brokers.items()}
    out["events"] = list(c.events)
    return out


SHORTCUT_SPEC: dict[str, Any] = {
    "brokers": 4, "internal_topic_partitions": 3,
    "broker_config": {"min.insync.replicas": "2", "replica.lag.time.max.ms": "10000",
                      "zookeeper.session.timeout.ms": "15000", "leader.imbalance.check.interval.seconds": "40"},
    "topics": [{"name": "busy", "partitions": 4, "replication_factor": 3, "produce_rate": 40},
               {"name": "short", "partitions": 2, "replication_factor": 2, "produce_rate": 0,
                "configs": {"retention.ms": "20000", "unclean.leader.election.enable": "true",
                            "min.insync.replicas": "1"}},
               {"name": "creating", "partitions": 0, "replication_factor": 3}],
    "generated_topics": {"count": 30, "partitions": 4, "min_insync_replicas": 2},
    "groups": [{"group_id": "reader", "topics": ["busy", "short", "t00"], "commit_interval_s": 2},
               {"group_id": "committed", "topics": ["busy", "t01"], "isolation_level": "read_committed",
                "consume_rate": 2}],
    "generated_groups": {"count": 4, "topics_per_group": 3, "commit_interval_s": 3},
    "transactional_producers": [{"transactional_id": "tx", "topics": ["t02"], "timeout_ms": 20000}],
}


def _incident(c: Cluster, rng: random.Random) -> None:
    b = rng.randint(1, 4)
    topic = rng.choice(["busy", "short", "t03", "t04"])
    choice = rng.randrange(14)
    actions = [
        lambda: c.crash_broker(b), lambda: c.restart_broker(b), lambda: c.set_slow_follower(b, rng.random() < 0.5),
        lambda: c.elect_preferred_leaders(), lambda: c.fail_partition(topic, 1), lambda: c.recover_partition(topic, 1),
        lambda: c.inject_hanging_transaction(topic, 0), lambda: c.abort_hanging_transactions(topic, 0),
        lambda: c.set_group_mode(rng.choice(["reader", "g0"]), rng.choice(["running", "stalled", "stopped"])),
        lambda: c.rewind_group("reader", rng.randint(1, 40)),
        lambda: c.set_group_committing("committed", rng.random() < 0.5),
        lambda: c.set_topic_config("short", "retention.ms", rng.choice([None, "15000"])),
        lambda: c.add_partitions("creating", 1, 3), lambda: c.crash_producer("tx", inside_transaction=True),
    ]
    actions[choice]()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_skipping_idle_partitions_changes_nothing(seed: int) -> None:
    """Same incidents, same steps: the model with its shortcuts ends every step where doing it all would."""
    spec = ClusterSpec.model_validate(SHORTCUT_SPEC)
    fast, full = Cluster(spec, T0), EveryPartitionEveryStep(spec, T0)
    rng = random.Random(seed)
    settled = 0
    for step in range(250):
        if rng.random() < 0.1:
            state = rng.getstate()
            for c in (fast, full):
                rng.setstate(state)
                _incident(c, rng)
        now = fast.now + rng.choice([0.2, 0.5, 1.0, 2.5, 6.0])
        fast.advance(now)
        full.advance(now)
        assert _state(fast) == _state(full), f"seed {seed}, step {step}"
        settled += sum(p.quiet is not None for p in fast.all_partitions())
    assert settled > 10_000  # the shortcuts were taken, not merely allowed


def test_an_idle_cluster_settles_and_an_outage_wakes_only_its_partitions() -> None:
    c = make(brokers=6, broker_config={"min.insync.replicas": "2"}, generated_topics={"count": 200, "partitions": 10})
    c.advance(T0 + 1)
    assert c._awake == {} and all(p.quiet is not None for p in c.all_partitions())
    c.crash_broker(3)
    woken = {(t, i) for t, idx in c._awake.items() for i in idx}
    assert woken == {(p.topic, p.index) for p in c.partitions_with_replica(3)}
    c.advance(T0 + 2)
    # a dead follower still in the ISR waits on an alarm (its lag timer), not on every step
    assert c._awake == {} and len(c._alarms) > 0
    c.advance(T0 + 30)  # fenced at 18 s: out of every ISR, leaderships moved
    truth = c.ground_truth_broker_outage(3)
    assert c._awake == {} and truth.at_min_isr == truth.partitions and truth.led == frozenset()


# ----------------------------------------------------------------------------- encoding
def _answers(c: Cluster) -> list[tuple[int, int, dict[str, Any]]]:
    from kafka.protocol.consumer import ListOffsetsRequest, OffsetFetchRequest
    from kafka.protocol.metadata import MetadataRequest

    h = Handlers(c)
    topics = sorted(c.topics)
    lo = ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=t, partitions=[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=i, timestamp=-1, current_leader_epoch=-1) for i in range(len(c.topics[t].partitions))])
        for t in topics], version=9)
    md = MetadataRequest(topics=None, allow_auto_topic_creation=False, version=12)
    of = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id=g, member_id=None, member_epoch=-1, topics=None) for g in c.groups], require_stable=False,
        version=8)
    out = []
    for api_key, body in ((3, md), (2, lo), (9, of)):
        for node in c.brokers:
            out.append((api_key, body.version, dict(h(node, Request(api_key, body.version, 7, "t", body)))))
    return out


def test_tuple_rows_encode_to_the_same_bytes_as_message_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    c = make(brokers=3, generated_topics={"count": 5, "partitions": 3},
             generated_groups={"count": 2, "topics_per_group": 2})
    c.advance(T0 + 5)
    c.crash_broker(2)
    c.advance(T0 + 30)
    answers = _answers(c)
    fast = [encode_response(k, v, 7, fields) for k, v, fields in answers]
    typo = {"brokers": [{"node_id": 1, "host": "h", "port": 1, "colour": "red"}]}
    with pytest.raises(KeyError, match="no field 'colour'"):  # a handler's typo is caught on the fast path too
        encode_response(3, 12, 7, typo)
    monkeypatch.setattr(protocol, "_row_maker", lambda cls, version: None)  # every element a message object
    assert [encode_response(k, v, 7, fields) for k, v, fields in answers] == fast
    with pytest.raises(KeyError, match="no field 'colour'"):
        encode_response(3, 12, 7, typo)
