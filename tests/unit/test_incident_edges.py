"""Incidents at the edges of what a poll knows: an unreachable cluster during a broker outage, a timed alert kept over
stale data, loss proven during an outage, an outage's partitions catching up, a restart.

`Pipe.poll` runs what `ClusterPoller.poll` runs after `build_snapshot` (rules, timers, alert and incident trackers),
on the synthetic clusters of test_incidents.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from collectors.alerting.catalogue import TIMED_RULES, kept_when_stale
from collectors.alerting.correlation import correlate
from collectors.alerting.evaluation import GRACE_S, judge
from collectors.alerting.incidents import IncidentTracker
from collectors.alerting.lifecycle import AlertTracker
from collectors.config import MonitorConfig
from collectors.model.poll import IncidentEvent
from collectors.model.records import AlertRecord, ClusterSnapshot, IncidentRecord, LossRecord, ZkServerRecord
from collectors.model.state import ClusterState
from collectors.runtime.poller import Monitor
from tests.unit.test_incidents import NOW, TH, _group, alerts_of, cluster


class Pipe:
    def __init__(self, state: ClusterState | None = None, alerts: AlertTracker | None = None,
                 incidents: IncidentTracker | None = None) -> None:
        self.state = state or ClusterState()
        self.alerts = alerts or AlertTracker()
        self.incidents = incidents or IncidentTracker(TH.incident_hold_down_s)

    def poll(self, snap: ClusterSnapshot, now: float
             ) -> tuple[list[AlertRecord], list[IncidentRecord], list[IncidentEvent]]:
        snap.time = now
        current, _, _ = self.alerts.update("c", judge(snap, self.state, TH, now), now,
                                           kept_when_stale(snap.stale_sections))
        for a in current:
            a.incident = None
        incidents, events = self.incidents.update("c", correlate(snap, current), now)
        return current, incidents, events


def unreachable() -> ClusterSnapshot:
    """A poll no broker answered (`build_snapshot` of a failed observation): nothing but the stale mark."""
    s = ClusterSnapshot(cluster="c", time=NOW, reachable=False, errors=["timed out"])
    s.stale_sections, s.stale = ["cluster"], True
    return s


def opened(events: list[IncidentEvent]) -> list[tuple[str, str]]:
    return [(e.incident.kind, e.incident.subject) for e in events if e.event == "opened"]


RADIUS = ("partitions", "topics", "offline", "under_min_isr", "at_min_isr", "unclean_topics")


# --------------------------------------------------------------------------- partitions not read


def test_an_unreachable_poll_during_a_broker_outage_is_the_broker_incident_and_a_cluster_one() -> None:
    """Unreachable: the kept partition alerts cannot be placed (no partitions) and stay in the broker incident,
    which keeps its last known blast radius; the cluster incident is the only new one. Before, every topic became
    a critical incident and the broker incident's radius fell to 0."""
    p = Pipe()
    _, (broker,), _ = p.poll(cluster(down=(2, 3)), NOW)
    radius = {f: getattr(broker, f) for f in RADIUS}
    summary, members = broker.summary, dict(broker.members)
    assert broker.under_min_isr and broker.partitions
    _, incs, ev = p.poll(unreachable(), NOW + 30)
    assert sorted((i.kind, i.id) for i in incs) == sorted([("broker", broker.id), ("cluster", incs[-1].id)])
    assert opened(ev) == [("cluster", "c")]
    after = next(i for i in incs if i.kind == "broker")
    assert {f: getattr(after, f) for f in RADIUS} == radius and after.summary == summary
    assert after.members == members and after.severity == "critical"
    _, incs, ev = p.poll(cluster(down=(2, 3)), NOW + 45)  # answering again: the same broker incident
    assert [i.id for i in incs] == [broker.id] and opened(ev) == []
    assert [(e.event, e.incident.kind) for e in ev] == [("resolved", "cluster")]


def test_a_group_the_outage_explains_stays_its_consequence_while_unreachable() -> None:
    p = Pipe()
    s = cluster(down=(1, 2, 3), brokers=4)
    _group(s, "billing", [x for x in s.partitions if x.offline][:2])
    _, (broker,), _ = p.poll(s, NOW)
    assert broker.consequences == ["group billing"]
    _, incs, ev = p.poll(unreachable(), NOW + 30)
    assert opened(ev) == [("cluster", "c")]
    after = next(i for i in incs if i.kind == "broker")
    assert after.consequences == ["group billing"] and "consumer_lag_status" in after.members


def test_what_was_its_own_incident_stays_its_own_while_unreachable() -> None:
    """Kept alerts keep the incident they were in, not the broker's: a slow follower's topic incident and a group
    lagging on its own continue as they were, and are not folded into the outage."""
    p = Pipe()
    s = cluster(down=(4,), brokers=5)
    slow = next(x for x in s.partitions if 4 not in x.replicas)
    slow.isr = slow.isr[:2]  # at min ISR, no down broker among its replicas
    _group(s, "own", [slow])
    s.group_partitions[-1].status = "STALL"
    _, incs, _ = p.poll(s, NOW)
    before = {(i.kind, i.subject): i.id for i in incs}
    assert set(before) == {("broker", "broker 4"), ("topic", slow.topic), ("group", "own")}
    _, incs, ev = p.poll(unreachable(), NOW + 30)
    assert opened(ev) == [("cluster", "c")] and not [e for e in ev if e.event == "resolved"]
    assert {(i.kind, i.subject): i.id for i in incs if i.kind != "cluster"} == before
    topic = next(i for i in incs if i.kind == "topic")
    assert topic.members == {"at_min_isr": 1} and topic.at_min_isr == 1  # last known, not 0


def test_stale_partitions_alone_keep_the_alerts_in_the_broker_incident() -> None:
    """The metadata request failed but the rest answered (stale ``partitions``): the same, and the sections stale
    now are named among the broker incident's consequences."""
    p = Pipe()
    _, (broker,), _ = p.poll(cluster(down=(3,)), NOW)
    s = cluster(down=(3,))
    s.partitions, s.stale_sections, s.stale = [], ["partitions"], True
    _, incs, ev = p.poll(s, NOW + 30)
    assert opened(ev) == [] and [i.id for i in incs] == [broker.id]
    assert incs[0].partitions == broker.partitions and "stale: partitions" in incs[0].consequences


def test_one_topic_in_error_does_not_freeze_the_broker_incident() -> None:
    """One topic's Metadata in error (being deleted) leaves the rest measured: when a second broker fails meanwhile
    the broker incident says so, with its blast radius over the partitions read. Before, any stale ``partitions``
    froze every incident at its last radius and summary while the topic stayed in error."""
    p = Pipe()
    _, (broker,), _ = p.poll(cluster(down=(3,)), NOW)
    before = (broker.id, broker.brokers, broker.topics, broker.under_min_isr)
    assert before[1:] == ([3], 4, 0)
    s = cluster(down=(2, 3))
    s.partitions = [x for x in s.partitions if x.topic != "t0"]
    s.topics = [t for t in s.topics if t.topic != "t0"]
    s.stale_sections, s.stale_subjects, s.stale = ["partitions"], {"partitions": ["t0"]}, True
    _, incs, _ = p.poll(s, NOW + 30)
    (after,) = [i for i in incs if i.kind == "broker"]
    assert after.id == before[0] and after.brokers == [2, 3] and "partitions not read" not in after.summary
    assert after.partitions == sum(1 for x in s.partitions if {2, 3} & set(x.replicas))
    assert after.topics == 3 and after.under_min_isr == sum(1 for x in s.partitions if len(x.isr) < 2) > 0
    # t0's kept alerts (no partitions to place them by) stay in the incident they were in
    assert not [i for i in incs if i.kind == "topic"]


# --------------------------------------------------------------------------- timers


def zk_cluster(p: Pipe, znodes_stale: bool) -> ClusterSnapshot:
    """ZooKeeper's /controller says broker 2, the metadata broker 1: controller_mismatch (timed: 30 s); a poll
    that cannot read the znodes knows nothing of /controller (`build_snapshot` leaves zk_controller None)."""
    s = cluster()
    s.mode = "zookeeper"
    s.zookeeper = [ZkServerRecord("c", f"zk{i}:2181", True, "leader" if i == 1 else "follower") for i in (1, 2, 3)]
    if znodes_stale:
        s.stale_sections, s.stale = ["znodes"], True
    p.state.zk_controller = None if znodes_stale else 2
    return s


def test_a_timed_alert_kept_over_a_stale_poll_does_not_resolve_at_the_next_good_one() -> None:
    p = Pipe()
    log = []
    for i, stale in enumerate([False, False, False, True, False, False]):
        cur, _, ev = p.poll(zk_cluster(p, stale), NOW + 30 * i)
        log.append(([a.rule for a in cur], [(e.event, e.incident.kind) for e in ev]))
    assert log[1] == (["controller_mismatch"], [("opened", "consensus")])
    assert all("controller_mismatch" in rules for rules, _ in log[1:]), log
    assert [e for _, events in log[2:] for e in events if e[0] != "updated"] == [], log  # no resolve, no reopen


def test_under_replicated_kept_over_stale_partitions_keeps_its_timer() -> None:
    p = Pipe()
    s = cluster()
    s.partitions[0].isr = s.partitions[0].isr[:2]
    subject = f"{s.partitions[0].topic}-{s.partitions[0].partition}"
    for i in range(4):
        cur, _, _ = p.poll(s, NOW + 30 * i)
    first = next(a for a in cur if a.rule == "under_replicated")
    stale = cluster()
    stale.partitions, stale.stale_sections, stale.stale = [], ["partitions"], True
    p.poll(stale, NOW + 120)
    cur, _, _ = p.poll(s, NOW + 150)
    assert [a for a in cur if a.rule == "under_replicated"] == [first]  # not resolved: the same episode
    assert p.state.condition_since[("under_replicated", subject)] == NOW


def test_every_timed_rule_has_its_grace() -> None:
    assert set(GRACE_S) == TIMED_RULES


def test_alerts_carried_on_from_a_history_keep_their_timers(tmp_path: Path) -> None:
    """A restart without a usable checkpoint carries the history's open alerts on (`Monitor.adopt_alerts`); a timed
    one gets the timer its firing implies, so it is not "pending" at the next poll — resolved, then opened again
    after the grace — even when the restart comes within the grace of its firing, or the collector polled (and
    started its own timer) before it took the history over."""
    old = Pipe()
    s = cluster()
    s.partitions[0].isr = s.partitions[0].isr[:2]
    for i in range(3):  # under_replicated fires at the poll 60 s (the grace) after the ISR shrank
        cur, _, _ = old.poll(s, NOW + 30 * i)
    carried = [a for a in cur if a.rule == "under_replicated"]
    assert [a.first_seen for a in carried] == [NOW + 60]
    cfg = MonitorConfig.model_validate({"clusters": [{"name": "c", "bootstrap_servers": "127.0.0.1:1"}],
                                        "state_dir": str(tmp_path), "request_timeout_s": 1})
    m = Monitor(cfg)
    try:
        poller = m.pollers[0]
        new = Pipe(poller.state, poller.alerts, poller.incidents)
        first, _, _ = new.poll(s, NOW + 90)  # polled before taking the history over: its own timer, pending
        assert [a.rule for a in first] == ["at_min_isr"]
        m.adopt_alerts(cur)
        for t in (NOW + 120, NOW + 150):
            now_open, _, _ = new.poll(s, t)
            assert [a.first_seen for a in now_open if a.rule == "under_replicated"] == [NOW + 60]
        assert poller.state.condition_since[("under_replicated", carried[0].subject)] == NOW
    finally:
        m.close()


# --------------------------------------------------------------------------- loss and recovery


def test_loss_proven_during_an_outage_stays_in_the_broker_incident_after_the_broker_returns() -> None:
    """A truncation proven while broker 3 is down happened under the outage. When broker 3 returns, its alert
    (held an hour, `loss_alert_hold_s`) keeps the broker incident open, saying so, rather than opening a second
    critical incident — a second page — for its topic; the incident resolves with the alert."""
    p = Pipe()
    s = cluster(down=(3,))
    victim = next(x for x in s.partitions if 3 in x.replicas)
    subject = f"{victim.topic}-{victim.partition}"
    p.state.recent_losses = [LossRecord("c", NOW, "truncation", victim.topic, victim.partition, 42,
                                        "epoch 5 ends at 100, hw 142")]
    _, (broker,), _ = p.poll(s, NOW)
    assert broker.members.get("data_truncated") == 1
    _, incs, ev = p.poll(cluster(), NOW + 120)
    assert opened(ev) == [] and [(i.id, i.kind, i.severity) for i in incs] == [(broker.id, "broker", "critical")]
    assert incs[0].members == {"data_truncated": 1}
    assert incs[0].summary.startswith(f"broker 3 is back; still open: {subject}: at least 42 committed messages lost")
    _, incs, ev = p.poll(cluster(), NOW + TH.loss_alert_hold_s)
    assert incs == [] and [(e.event, e.incident.id) for e in ev] == [("resolved", broker.id)]


def test_a_loss_of_its_own_is_still_its_topics_incident() -> None:
    p = Pipe()
    s = cluster()
    p.state.recent_losses = [LossRecord("c", NOW, "truncation", "t1", 0, 5, "ev")]
    _, incs, _ = p.poll(s, NOW)
    assert [(i.kind, i.subject) for i in incs] == [("topic", "t1")]


def test_partitions_catching_up_after_one_of_two_brokers_returns_stay_in_the_broker_incident() -> None:
    """Brokers 2 and 3 down; 2 returns, and the partitions it holds (not 3) take a poll or two to take it back into
    their ISR. Their alerts are the outage's, and the outage goes on (broker 3): they stay in its incident rather
    than each topic opening one."""
    p = Pipe()
    _, (broker,), _ = p.poll(cluster(down=(2, 3)), NOW)
    s = cluster(down=(3,))
    lagging = [x for x in s.partitions if 2 in x.replicas and 3 not in x.replicas]
    assert lagging
    for x in lagging:
        x.isr = [b for b in x.isr if b != 2]  # broker 2 is up, not yet back in these ISRs
    _, incs, ev = p.poll(s, NOW + 30)
    assert opened(ev) == [] and [(i.id, i.subject) for i in incs] == [(broker.id, "broker 3")]
    held = {a.subject for a in p.alerts.open_for("c") if a.incident == broker.id}
    assert {f"{x.topic}-{x.partition}" for x in lagging} <= held


# --------------------------------------------------------------------------- restart


def test_a_severity_change_at_the_first_poll_after_a_restart_is_recorded() -> None:
    tr = IncidentTracker()
    s = cluster()
    s.partitions[0].isr = s.partitions[0].isr[:2]  # at min ISR: a warning topic incident
    inc, ev = tr.update("c", correlate(s, alerts_of(s)), NOW)
    assert [(e.event, e.incident.severity) for e in ev] == [("opened", "warning")]
    again = IncidentTracker()
    again.restore(inc)  # a restart (checkpoint)
    s.partitions[0].isr = s.partitions[0].isr[:1]  # meanwhile under min ISR: critical
    _, ev = again.update("c", correlate(s, alerts_of(s)), NOW + 60)
    assert [(e.event, e.incident.severity) for e in ev] == [("updated", "critical")]


def test_a_broker_going_down_at_the_first_poll_after_a_restart_is_recorded() -> None:
    tr = IncidentTracker()
    s = cluster(down=(3,))
    inc, _ = tr.update("c", correlate(s, alerts_of(s)), NOW)
    again = IncidentTracker()
    again.restore(inc)
    s2 = cluster(down=(2, 3))
    _, ev = again.update("c", correlate(s2, alerts_of(s2)), NOW + 60)
    assert [(e.event, e.incident.brokers) for e in ev] == [("updated", [2, 3])]
    _, ev = again.update("c", correlate(s2, alerts_of(s2)), NOW + 90)
    assert ev == []  # recorded once


def test_a_restart_during_an_outage_keeps_each_alert_in_its_incident_at_an_unreachable_first_poll() -> None:
    """Where each alert was comes back with the checkpoint (its alerts' incident ids), so the first poll after a
    restart, unreachable, does not open an incident per topic either."""
    p = Pipe()
    current, (broker,), _ = p.poll(cluster(down=(2, 3)), NOW)
    saved_alerts = [dataclasses.replace(a) for a in current]  # as the checkpoint gives them back
    assert {a.incident for a in saved_alerts} == {broker.id}
    after = Pipe(state=p.state)
    for a in saved_alerts:
        after.alerts.open[a.key] = a
    after.incidents.restore([broker], saved_alerts)
    _, incs, ev = after.poll(unreachable(), NOW + 30)
    assert opened(ev) == [("cluster", "c")]
    assert sorted(i.kind for i in incs) == ["broker", "cluster"]
