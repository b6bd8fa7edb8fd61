"""One cause, one incident, in a KRaft cluster: a node that is both a broker and a controller voter (combined mode)
going down is one broker incident holding the KRaft symptoms it explains (its voter lost, the leader election),
not a broker incident plus a consensus one paging on its own. What a down broker does not explain — a voter of
another node lagging, a dedicated controller lost — still makes the consensus incident.

Each test polls hand-built observations through the whole path: build_snapshot → judge → AlertTracker →
correlate → IncidentTracker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collectors.alerting.catalogue import kept_over_stale
from collectors.alerting.correlation import correlate
from collectors.alerting.evaluation import judge
from collectors.alerting.incidents import IncidentTracker
from collectors.alerting.lifecycle import AlertTracker
from collectors.config import Thresholds
from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.model.records import AlertRecord, IncidentRecord
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState

T0 = 1_800_000_000.0
TH = Thresholds()
Part = tuple[str, int, int, list[int], list[int]]  # topic, partition, leader, replicas, isr

# Combined mode: nodes 1-3 are brokers and voters. Before: all in sync; after node 1 is lost: ISR without 1.
PARTS: list[Part] = [("orders", 0, 1, [1, 2, 3], [1, 2, 3]), ("orders", 1, 2, [2, 3, 1], [2, 3, 1])]
PARTS_WITHOUT_1: list[Part] = [("orders", 0, 2, [1, 2, 3], [2, 3]), ("orders", 1, 2, [2, 3, 1], [2, 3])]
KRAFT_RULES = {"kraft_voter_lagging", "kraft_leader_election", "kraft_no_leader"}


def _rep(node: int, leo: int, at_ms: float | None = None) -> dict[str, int]:
    ms = -1 if at_ms is None else int(at_ms)
    return {"replica_id": node, "log_end_offset": leo, "last_fetch_timestamp": ms, "last_caught_up_timestamp": ms}


def _quorum(leader: int, epoch: int, hw: int, voters: Sequence[dict[str, int]]) -> dict[str, Any]:
    return {"leader_id": leader, "leader_epoch": epoch, "high_watermark": hw, "voters": list(voters), "observers": []}


def _obs(brokers: list[int], parts: list[Part], quorum: dict[str, Any]) -> KafkaObservation:
    o = KafkaObservation(time=0, cluster_id="c", controller_id=brokers[0],
                         brokers=[(b, f"h{b}", 9092, None) for b in brokers], kraft=True)
    for topic, p, leader, replicas, isr in parts:
        o.partitions.append(PartitionMeta(topic, p, leader, 1, list(replicas), list(isr), [], "tid-" + topic))
        o.high_watermark[(topic, p)] = 100
        o.log_start[(topic, p)] = 0
        o.last_stable[(topic, p)] = 100
    o.replica_brokers = {r for *_, replicas, _ in parts for r in replicas}
    o.topic_configs = {topic: {"min.insync.replicas": "2"} for topic, *_ in parts}
    o.quorum = quorum
    return o


class _Monitor:
    """One cluster "c" polled every 30 s through the alerting path."""

    def __init__(self) -> None:
        self.state, self.alerts, self.incidents, self.now = ClusterState(), AlertTracker(), IncidentTracker(300.0), T0

    @property
    def ms(self) -> float:
        return self.now * 1000

    def poll(self, obs: KafkaObservation) -> tuple[list[AlertRecord], list[IncidentRecord]]:
        obs.time = self.now
        snap = build_snapshot("c", obs, None, self.state, TH, self.now)
        kept = kept_over_stale(snap)
        current, _, _ = self.alerts.update("c", judge(snap, self.state, TH, self.now, kept), self.now, kept)
        for a in current:
            a.incident = None
        incidents, _ = self.incidents.update("c", correlate(snap, current), self.now)
        self.now += 30
        return current, incidents


def _members(incident: IncidentRecord, alerts: list[AlertRecord]) -> set[tuple[str, str]]:
    return {(a.rule, a.subject) for a in alerts if a.incident == incident.id}


def _by_kind(incidents: list[IncidentRecord]) -> dict[str, IncidentRecord]:
    kinds = [i.kind for i in incidents]
    assert len(kinds) == len(set(kinds)), kinds
    return {i.kind: i for i in incidents}


def _combined_healthy(m: _Monitor, hw: int) -> None:
    _, incidents = m.poll(_obs([1, 2, 3], PARTS, _quorum(1, 7, hw, [_rep(n, hw, m.ms) for n in (1, 2, 3)])))
    assert incidents == []


def test_combined_mode_leader_node_crash_is_one_broker_incident() -> None:
    """Node 1 — broker 1 and the Raft leader — crashes: broker 1 is fenced, voter 2 leads epoch 8, and the new
    leader reports voter 1's log end offset as -1 (it never had a fetch from it). One incident, broker 1's, holds
    the election and voter 1; nothing pages as a consensus incident."""
    m, hw = _Monitor(), 5000
    _combined_healthy(m, hw)
    for _ in range(3):  # the partitions go under-replicated on the third poll: still the same one incident
        hw += 60
        alerts, incidents = m.poll(_obs([2, 3], PARTS_WITHOUT_1, _quorum(2, 8, hw, [
            _rep(1, -1), _rep(2, hw, m.ms), _rep(3, hw, m.ms)])))
        rules = {(a.rule, a.subject) for a in alerts}
        assert {("broker_down", "broker-1"), ("kraft_voter_lagging", "voter-1"),
                ("kraft_leader_election", "c")} <= rules
        assert [i.kind for i in incidents] == ["broker"], [(i.kind, i.subject, i.summary) for i in incidents]
        broker = incidents[0]
        assert broker.brokers == [1] and broker.severity == "critical"
        held = _members(broker, alerts)
        assert {("kraft_voter_lagging", "voter-1"), ("kraft_leader_election", "c")} <= held
        assert held == rules - {(a.rule, a.subject) for a in alerts if a.incident is None}  # every cause's alert
        assert broker.members["kraft_voter_lagging"] == 1 and broker.members["kraft_leader_election"] == 1
        assert "controller voter 1 lost" in broker.consequences
        assert "KRaft leader moved to 2" in broker.consequences


def test_dedicated_controller_lost_is_still_a_consensus_incident() -> None:
    """Dedicated controllers (voters 101-103, brokers 1-3): controller 101, the leader, is lost while broker 1 is
    down too. Broker 1's outage does not explain controller 101: the broker incident holds none of the KRaft
    alerts, the consensus incident holds them all."""
    m, hw = _Monitor(), 5000
    _, incidents = m.poll(_obs([1, 2, 3], PARTS, _quorum(101, 7, hw, [_rep(n, hw, m.ms) for n in (101, 102, 103)])))
    assert incidents == []
    for _ in range(2):
        hw += 60
        alerts, incidents = m.poll(_obs([2, 3], PARTS_WITHOUT_1, _quorum(102, 8, hw, [
            _rep(101, -1), _rep(102, hw, m.ms), _rep(103, hw, m.ms)])))
        by_kind = _by_kind(incidents)
        assert set(by_kind) == {"broker", "consensus"}
        assert not any(rule in KRAFT_RULES for rule, _ in _members(by_kind["broker"], alerts))
        assert _members(by_kind["consensus"], alerts) == {("kraft_voter_lagging", "voter-101"),
                                                           ("kraft_leader_election", "c")}
        assert not any("voter" in c or "KRaft" in c for c in by_kind["broker"].consequences)


def test_combined_mode_voter_lagging_with_its_broker_up_is_a_consensus_incident() -> None:
    """Combined mode, every broker registered, voter 3 far behind the high watermark: a consensus incident as
    before, and no broker incident."""
    m, hw = _Monitor(), 5000
    _combined_healthy(m, hw)
    for _ in range(2):
        hw += 60
        alerts, incidents = m.poll(_obs([1, 2, 3], PARTS, _quorum(1, 7, hw, [
            _rep(1, hw, m.ms), _rep(2, hw, m.ms), _rep(3, hw - TH.kraft_voter_lag_records - 500, m.ms - 60_000)])))
        assert [i.kind for i in incidents] == ["consensus"]
        assert incidents[0].subject == "kraft" and incidents[0].severity == "warning"
        assert _members(incidents[0], alerts) == {("kraft_voter_lagging", "voter-3")}


def test_combined_mode_down_node_and_a_lagging_voter_of_an_up_node_are_two_causes() -> None:
    """Combined mode: node 1 (the leader) crashes and voter 3, whose broker is up, lags too. Broker 1's incident
    holds voter 1 and the election; voter 3 is a cause of its own: the consensus incident, holding it alone."""
    m, hw = _Monitor(), 5000
    _combined_healthy(m, hw)
    for _ in range(2):
        hw += 60
        alerts, incidents = m.poll(_obs([2, 3], PARTS_WITHOUT_1, _quorum(2, 8, hw, [
            _rep(1, -1), _rep(2, hw, m.ms), _rep(3, hw - TH.kraft_voter_lag_records - 500, m.ms - 60_000)])))
        by_kind = _by_kind(incidents)
        assert set(by_kind) == {"broker", "consensus"}
        broker, consensus = by_kind["broker"], by_kind["consensus"]
        assert broker.brokers == [1]
        held = _members(broker, alerts)
        assert {("kraft_voter_lagging", "voter-1"), ("kraft_leader_election", "c")} <= held
        assert ("kraft_voter_lagging", "voter-3") not in held
        assert _members(consensus, alerts) == {("kraft_voter_lagging", "voter-3")}
        assert "voter 3" in consensus.summary and "(+" not in consensus.summary
        assert "controller voter 1 lost" in broker.consequences
        assert not any("voter 3" in c for c in broker.consequences)
