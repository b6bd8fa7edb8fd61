"""Correlation and the incident lifecycle: one cause, one incident, with its blast radius."""

from __future__ import annotations

from pathlib import Path

from collectors.alerting.correlation import Cause, correlate
from collectors.alerting.evaluation import judge
from collectors.alerting.incidents import RESTATE_S, IncidentTracker
from collectors.alerting.lifecycle import AlertTracker
from collectors.config import Thresholds
from collectors.model.records import (
    AlertRecord,
    BrokerRecord,
    ClusterSnapshot,
    GroupPartitionRecord,
    GroupRecord,
    PartitionRecord,
    TopicRecord,
)
from collectors.model.state import ClusterState

NOW = 1_800_000_000.0
TH = Thresholds()


def cluster(down: tuple[int, ...] = (), topics: int = 4, parts: int = 6, min_isr: int = 2,
            unclean: tuple[str, ...] = (), brokers: int = 4) -> ClusterSnapshot:
    """`topics` topics of `parts` partitions, RF 3 spread round-robin over `brokers`; the down brokers are out
    of every ISR and no longer lead (a partition whose replicas are all down is offline)."""
    s = ClusterSnapshot(cluster="c", time=NOW, controller_id=1)
    s.brokers = [BrokerRecord("c", b, "h", 9092, alive=b not in down, is_controller=b == 1,
                              reachable=b not in down) for b in range(1, brokers + 1)]
    for ti in range(topics):
        name = f"t{ti}"
        s.topics.append(TopicRecord("c", name, False, parts, 3, min_isr, name in unclean, 604_800_000, "delete"))
        for p in range(parts):
            replicas = [(ti + p + k) % brokers + 1 for k in range(3)]
            isr = [b for b in replicas if b not in down]
            s.partitions.append(PartitionRecord("c", name, p, isr[0] if isr else -1, 1, replicas, isr, [], min_isr))
    return s


def alerts_of(s: ClusterSnapshot, st: ClusterState | None = None, now: float = NOW) -> list[AlertRecord]:
    current, _, _ = AlertTracker().update("c", judge(s, st or ClusterState(), TH, now), now)
    return current


def truth(s: ClusterSnapshot, down: set[int]) -> list[PartitionRecord]:
    return [p for p in s.partitions if down & set(p.replicas)]


def test_one_broker_down_is_one_incident_with_its_exact_blast_radius() -> None:
    s = cluster(down=(3,), unclean=("t1",))
    causes = correlate(s, alerts_of(s))
    assert [c.kind for c in causes] == ["broker"]
    b = causes[0]
    hit = truth(s, {3})
    assert b.subject == "broker 3" and b.brokers == [3] and b.severity == "critical"
    assert b.partitions == len(hit) and b.topics == len({p.topic for p in hit})
    assert b.at_min_isr == sum(p.partition_class == "at_min_isr" for p in hit) == len(hit)
    assert b.offline == 0 and b.under_min_isr == 0 and b.unclean_topics == 1
    assert b.members == {"at_min_isr": len(hit), "broker_down": 1}
    assert b.summary.startswith(f"broker 3 is down; {len(hit)} partitions on 4 topics lost a replica: ")
    assert "at min ISR (one more broker failure stops acks=all writes)" in b.summary
    assert "unclean election enabled on 1 affected topic" in b.summary
    assert b.sample()[0] == "broker_down broker-3" and len(b.sample()) == len(hit) + 1  # critical first


def test_two_brokers_down_is_one_incident_worst_consequence_first() -> None:
    s = cluster(down=(2, 3))
    causes = correlate(s, alerts_of(s))
    assert [c.kind for c in causes] == ["broker"]
    b = causes[0]
    assert b.subject == "brokers 2, 3" and b.brokers == [2, 3]
    hit = truth(s, {2, 3})
    assert b.partitions == len(hit)
    assert b.under_min_isr == sum(p.partition_class == "under_min_isr" for p in hit) > 0
    assert b.summary.index("under min ISR") < b.summary.index("at min ISR")


def test_partition_symptoms_without_a_broker_cause_group_per_topic() -> None:
    s = cluster()
    for p in s.partitions:
        if p.topic == "t2" and p.partition < 2:
            p.isr = p.isr[:2]  # a slow follower, no broker down
    causes = correlate(s, alerts_of(s))
    assert [(c.kind, c.subject) for c in causes] == [("topic", "t2")]
    assert causes[0].summary == "t2: 2 of 6 partitions at min isr"
    assert causes[0].partitions == 2 and causes[0].at_min_isr == 2


def _group(s: ClusterSnapshot, gid: str, on: list[PartitionRecord]) -> None:
    s.groups.append(GroupRecord("c", gid, "Stable", 1, 1, status="ERR", worst_partition_status="STALL",
                                lag_sum=100, partitions=len(on)))
    for p in on:
        s.group_partitions.append(GroupPartitionRecord("c", gid, p.topic, p.partition, 5, 0, 105, 105, 100, None,
                                                       status="STALL"))


def test_a_group_stuck_on_offline_partitions_is_a_consequence_not_a_second_cause() -> None:
    s = cluster(down=(1, 2, 3), brokers=4)
    offline = [p for p in s.partitions if p.offline]
    healthy = [p for p in s.partitions if not (set(p.replicas) & {1, 2, 3})]
    assert offline
    _group(s, "stuck-by-outage", offline[:2])
    _group(s, "stuck-on-its-own", healthy[:1] or [p for p in s.partitions if p.leader == 4][:1])
    causes = correlate(s, alerts_of(s))
    kinds = [(c.kind, c.subject) for c in causes]
    assert ("group", "stuck-by-outage") not in kinds and ("group", "stuck-on-its-own") in kinds
    b = next(c for c in causes if c.kind == "broker")
    assert b.consequences == ["group stuck-by-outage"] and "consumer_lag_status" in b.members
    assert b.offline == len(offline)


def test_risks_are_not_incidents_and_consensus_is_one() -> None:
    s = cluster(min_isr=1)  # RF 3 with min ISR 1: unsafe_durability on every topic
    a = alerts_of(s)
    assert {x.rule for x in a} == {"unsafe_durability"}
    assert correlate(s, a) == []
    zk = [AlertRecord(r, sev, "c", subj, f"{r} here", NOW, NOW) for r, sev, subj in (
        ("zk_node_not_serving", "warning", "zk2:2181"), ("zk_quorum_lost", "critical", "c"),
        ("controller_mismatch", "critical", "c"))]
    causes = correlate(s, a + zk)
    assert [(c.kind, c.severity, len(c.alerts)) for c in causes] == [("consensus", "critical", 3)]


def test_incident_identity_severity_events_and_hold_down() -> None:
    tr = IncidentTracker(hold_down_s=300)
    s = cluster(down=(3,))
    inc, ev = tr.update("c", correlate(s, alerts_of(s)), NOW)
    assert [e.event for e in ev] == ["opened"] and len(inc) == 1
    first = inc[0].id
    s2 = cluster(down=(2, 3))  # a second broker: the same incident, worse
    inc, ev = tr.update("c", correlate(s2, alerts_of(s2)), NOW + 30)
    assert [i.id for i in inc] == [first] and inc[0].subject == "brokers 2, 3" and inc[0].opened == NOW
    # still critical, but a broker the events never named: recorded, or the report would miss broker 2
    assert [(e.event, e.incident.brokers) for e in ev] == [("updated", [2, 3])]
    _, ev = tr.update("c", correlate(s2, alerts_of(s2)), NOW + 45)
    assert ev == []  # nothing new
    inc, ev = tr.update("c", [], NOW + 60)
    assert inc == [] and [(e.event, e.incident.id, e.incident.resolved_at) for e in ev] == [
        ("resolved", first, NOW + 60)]
    inc, ev = tr.update("c", correlate(s, alerts_of(s)), NOW + 200)  # back within the hold-down
    assert [i.id for i in inc] == [first] and [e.event for e in ev] == ["reopened"]
    assert inc[0].resolved_at is None and inc[0].opened == NOW
    tr.update("c", [], NOW + 230)
    inc, ev = tr.update("c", correlate(s, alerts_of(s)), NOW + 600)  # back after the hold-down: a new one
    assert [e.event for e in ev] == ["opened"] and inc[0].id != first


def test_severity_change_is_an_update_event() -> None:
    tr = IncidentTracker()
    s = cluster()
    s.partitions[0].isr = s.partitions[0].isr[:2]
    tr.update("c", correlate(s, alerts_of(s)), NOW)
    s.partitions[0].isr = s.partitions[0].isr[:1]  # now under min ISR: critical
    _, ev = tr.update("c", correlate(s, alerts_of(s)), NOW + 30)
    assert [(e.event, e.incident.severity) for e in ev] == [("updated", "critical")]


def test_an_open_incident_is_recorded_again_when_it_outgrows_its_events_or_a_day_passes() -> None:
    """The weekly report reads an incident from its events alone (the most of each count, every broker): the
    tracker records an open incident again when its blast radius grows 10 % past what its events said, or a day
    after its last event, and not otherwise."""
    tr = IncidentTracker()
    s = cluster()

    def radius(partitions: int, under_min_isr: int = 0) -> list[Cause]:
        (c,) = correlate(s, [AlertRecord("under_replicated", "warning", "c", "orders", "URP", NOW, NOW)])
        c.incident.partitions, c.incident.under_min_isr = partitions, under_min_isr
        return [c]

    _, ev = tr.update("c", radius(100), NOW)
    assert [e.event for e in ev] == ["opened"]
    steps = [(109, []), (110, [110]), (111, []), (105, []), (120, []), (121, [121]), (121, [])]
    for i, (n, expect) in enumerate(steps, 1):
        _, ev = tr.update("c", radius(n), NOW + 30 * i)
        assert [e.incident.partitions for e in ev] == expect, (n, ev)
    _, ev = tr.update("c", radius(121, under_min_isr=1), NOW + 300)  # a count that was 0: any growth
    assert [(e.event, e.incident.under_min_isr) for e in ev] == [("updated", 1)]
    _, ev = tr.update("c", radius(90), NOW + 300 + RESTATE_S - 1)
    assert ev == []
    _, ev = tr.update("c", radius(90), NOW + 300 + RESTATE_S)  # a day without an event: recorded again
    assert [(e.event, e.incident.partitions) for e in ev] == [("updated", 90)]
    _, ev = tr.update("c", radius(121), NOW + 330 + RESTATE_S)  # back to the recorded peak: nothing new
    assert ev == []
    _, ev = tr.update("c", [], NOW + 360 + RESTATE_S)
    assert [e.event for e in ev] == ["resolved"]


def test_a_restored_incident_is_not_recorded_again_at_the_restart() -> None:
    tr = IncidentTracker()
    s = cluster(down=(3,))
    inc, _ = tr.update("c", correlate(s, alerts_of(s)), NOW)
    again = IncidentTracker()
    again.restore(inc)
    _, ev = again.update("c", correlate(s, alerts_of(s)), NOW + RESTATE_S + 30)
    assert ev == []  # what its events said is unknown after a restart: its present is the baseline
    s2 = cluster(down=(2, 3))
    _, ev = again.update("c", correlate(s2, alerts_of(s2)), NOW + RESTATE_S + 60)
    assert [e.event for e in ev] == ["updated"]


def test_incidents_survive_a_checkpoint(tmp_path: Path) -> None:
    from collectors.outputs.checkpoint import Checkpoint, load_checkpoint, save_checkpoint

    tr = IncidentTracker()
    s = cluster(down=(3,))
    inc, _ = tr.update("c", correlate(s, alerts_of(s)), NOW)
    save_checkpoint(tmp_path, Checkpoint(cluster="c", cluster_id="x", saved_at=NOW, state=ClusterState(),
                                         incidents=inc))
    cp = load_checkpoint(tmp_path, "c", lag_points=60, window_size=10, now=NOW + 10, max_age_s=3600)
    assert cp is not None and [i.id for i in cp.incidents] == [inc[0].id]
    again = IncidentTracker()
    again.restore(cp.incidents)
    after, ev = again.update("c", correlate(s, alerts_of(s)), NOW + 30)
    assert [i.id for i in after] == [inc[0].id] and ev == []


def test_a_big_outage_stays_one_incident_with_a_capped_sample() -> None:
    s = cluster(down=(3,), topics=200, parts=50, brokers=6)
    causes = correlate(s, alerts_of(s))
    assert len(causes) == 1 and causes[0].partitions == len(truth(s, {3})) > 1000
    assert len(causes[0].sample()) == 20


def test_consensus_only_staleness_is_the_consensus_incident_not_a_cluster_one() -> None:
    """A ZooKeeper election: the poll that cannot read ZooKeeper (stale section ``zookeeper``) and the next one
    that sees the new epoch are one consensus incident; stale Kafka sections stay a cluster incident."""
    s = cluster()
    stale = AlertRecord("data_stale", "warning", "c", "c", "stale sections: zookeeper", NOW, NOW)
    s.stale_sections = ["zookeeper"]
    tracker = IncidentTracker()
    first, _ = tracker.update("c", correlate(s, [stale]), NOW)
    assert [(i.kind, i.subject, i.alerts) for i in first] == [("consensus", "zookeeper", 1)]
    s2 = cluster()
    s2.time = NOW + 10
    election = AlertRecord("zk_leader_election", "warning", "c", "c", "new leader", NOW + 10, NOW + 10)
    second, _ = tracker.update("c", correlate(s2, [election]), NOW + 10)
    assert [i.id for i in second] == [first[0].id]  # the same incident continues
    s3 = cluster()
    s3.stale_sections = ["zookeeper", "groups"]
    assert [c.kind for c in correlate(s3, [stale])] == ["cluster"]  # Kafka could not be read either


def test_sections_a_down_broker_could_not_answer_are_its_incidents_symptom() -> None:
    """Broker 3 down: its coordinators do not answer, so groups / offsets / transactions are stale — one
    incident (the broker's), not a second "cluster" one. Nothing answering at all stays a cluster incident."""
    s = cluster(down=(3,))
    a = alerts_of(s)
    stale = AlertRecord("data_stale", "warning", "c", "c", "stale sections: groups, offsets", NOW, NOW)
    s.stale_sections = ["groups", "offsets"]
    causes = correlate(s, [*a, stale])
    assert [c.kind for c in causes] == ["broker"]
    assert stale in causes[0].alerts and "stale: groups, offsets" in causes[0].consequences
    s.stale_sections = ["cluster"]
    assert sorted(c.kind for c in correlate(s, [*a, stale])) == ["broker", "cluster"]
    healthy = cluster()
    healthy.stale_sections = ["groups"]
    assert [c.kind for c in correlate(healthy, [stale])] == ["cluster"]  # no broker down: its own incident
