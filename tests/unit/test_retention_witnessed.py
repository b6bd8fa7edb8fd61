"""`retention_data_loss` pages on retention seen deleting unread messages, not on a commit found below the log start.

"Page on what you saw happen, not on the state you found": the loss ledger (`collectors.model.loss.group_evidence`)
records what retention deletes under a running group while the monitor watches it; a first sight only sets the
mark, and what it deletes under a group nobody runs is not counted when the group comes back. The alert follows
the ledger as the other loss alerts do (open `loss_alert_hold_s` after the last loss), and so does the gauge its
Prometheus twin reads (`kafka_consumergroup_retention_loss_partitions`). The group's state (`below_log_start` on
its partitions) is still shown as it is.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from collectors.alerting.catalogue import RULES, kept_over_stale
from collectors.alerting.correlation import correlate
from collectors.alerting.evaluation import judge
from collectors.alerting.incidents import IncidentTracker
from collectors.alerting.lifecycle import AlertTracker
from collectors.config import Thresholds
from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.model.records import AlertRecord, ClusterSnapshot
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.outputs.exporter import MetricsEndpoint

T0 = 1_800_000_000.0
GAUGE = "kafka_consumergroup_retention_loss_partitions"


class Monitor:
    """What `ClusterPoller._judge` does after the adapters, polls 30 s apart: alerts, then incidents, in the
    snapshot (what the exporter reads)."""

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.thresholds = thresholds or Thresholds()
        self.state, self.alerts, self.incidents, self.now = ClusterState(), AlertTracker(), IncidentTracker(), T0
        self.exporter = MetricsEndpoint()

    def poll(self, obs: KafkaObservation) -> ClusterSnapshot:
        obs.time = self.now
        snap = build_snapshot("c", obs, None, self.state, self.thresholds, self.now)
        kept = kept_over_stale(snap)
        current, _, _ = self.alerts.update("c", judge(snap, self.state, self.thresholds, self.now, kept), self.now,
                                           kept)
        snap.alerts = current
        snap.incidents, _ = self.incidents.update("c", correlate(snap, current), self.now)
        self.exporter.update([snap])
        self.now += 30
        return snap

    def gauge(self) -> dict[str, float]:
        """kafka_consumergroup_retention_loss_partitions by group, as exported after the last poll."""
        out: dict[str, float] = {}
        for fam in text_string_to_metric_families(self.exporter.render().decode()):
            for s in fam.samples:
                if s.name == GAUGE:
                    out[s.labels["consumergroup"]] = s.value
        return out


def obs(commit: int | None = 500, start: int = 0, hw: int = 1000, members: int = 1, partitions: int = 1,
        reachable: bool = True) -> KafkaObservation:
    """Topic t (`partitions` partitions, each with the same offsets), group g committed at `commit` on each."""
    if not reachable:
        return KafkaObservation(time=0.0, reachable=False, stale_sections={"cluster"})
    o = KafkaObservation(time=0.0, cluster_id="c", controller_id=1, brokers=[(i, "h", 9092, None) for i in (1, 2, 3)],
                         partitions=[PartitionMeta("t", p, 1, 1, [1, 2, 3], [1, 2, 3], []) for p in range(partitions)],
                         topic_configs={"t": {"min.insync.replicas": "2"}})
    for p in range(partitions):
        o.high_watermark[("t", p)], o.log_start[("t", p)], o.last_stable[("t", p)] = hw, start, hw
    if commit is not None:
        o.groups = {"g": {"state": "Stable" if members else "Empty", "members": members, "coordinator": 1,
                          "protocol_type": "consumer"}}
        o.commits = {"g": {("t", p): commit for p in range(partitions)}}
    return o


def lost(snap: ClusterSnapshot) -> AlertRecord | None:
    return next((a for a in snap.alerts if a.rule == "retention_data_loss" and a.subject == "g"), None)


def group_incidents(snap: ClusterSnapshot) -> list[str]:
    return [i.severity for i in snap.incidents if i.kind == "group" and i.resolved_at is None]


def test_a_commit_found_below_the_log_start_pages_nobody() -> None:
    """A fresh monitor on a running group retention passed long ago: the state is shown, nothing opens."""
    m = Monitor()
    for _ in range(3):
        snap = m.poll(obs(commit=1_000, start=4_000_000, hw=5_000_000))
        assert lost(snap) is None
        assert group_incidents(snap) == []
        assert not m.gauge().get("g")
    assert [gp.below_log_start for gp in snap.group_partitions] == [True]  # the state, as it is
    assert snap.losses == [] and m.state.recent_losses == []


def test_retention_seen_deleting_more_pages_with_what_it_deleted_and_holds_after_a_reset() -> None:
    """Found below the log start (no page); the log start then moves past more unread messages while watched: the
    alert opens with those (not what was gone before), sums what follows, and stays open for the hold after the
    consumer resets past the log start, then resolves."""
    hold = 300.0
    m = Monitor(Thresholds(loss_alert_hold_s=hold))
    assert lost(m.poll(obs(commit=500, start=700, partitions=2))) is None  # 200 each already gone: found
    snap = m.poll(obs(commit=500, start=900, partitions=2))  # 200 more on each partition, seen deleted
    a = lost(snap)
    assert a is not None and a.severity == "critical" and a.value == 400
    assert "400 unread messages" in a.summary and "t-0" in a.summary and "t-1" in a.summary
    assert group_incidents(snap) == ["critical"]
    assert m.gauge()["g"] == 2
    opened = m.now - 30
    snap = m.poll(obs(commit=500, start=950, partitions=2))  # 50 more each: the hold window's sum
    assert lost(snap) is not None and lost(snap).value == 500  # type: ignore[union-attr]
    last_loss = m.now - 30
    snap = m.poll(obs(commit=960, start=950, partitions=2))  # the consumer reset past the log start
    assert not any(gp.below_log_start for gp in snap.group_partitions)
    while m.now - last_loss < hold:
        at = m.now
        snap = m.poll(obs(commit=960, start=950, partitions=2))
        a = lost(snap)
        assert a is not None and a.first_seen == opened
        assert a.value == (500 if at - opened < hold else 100)  # what was deleted within the hold, as it ages
        assert m.gauge()["g"] == 2
    snap = m.poll(obs(commit=960, start=950, partitions=2))
    assert lost(snap) is None
    assert not m.gauge().get("g")


def test_an_inactive_group_passed_by_retention_pages_nobody_when_its_consumer_rejoins() -> None:
    m = Monitor()
    m.poll(obs(commit=500, start=0, members=0))
    m.poll(obs(commit=500, start=700, members=0))  # retention passes it while nobody runs it
    for _ in range(3):  # its consumer comes back (joined, not yet committed)
        snap = m.poll(obs(commit=500, start=700, members=1))
        assert lost(snap) is None
        assert group_incidents(snap) == []
        assert not m.gauge().get("g")
    assert m.state.recent_losses == []


def test_a_witnessed_loss_stays_open_while_the_cluster_cannot_be_read() -> None:
    """Memory, not this poll's data: the alert and the gauge outlast an unreachable poll (the `loss` family)."""
    assert RULES["retention_data_loss"].family == "loss"
    m = Monitor()
    m.poll(obs(commit=500, start=0))
    assert lost(m.poll(obs(commit=500, start=700))) is not None
    snap = m.poll(obs(reachable=False))
    a = lost(snap)
    assert a is not None and a.value == 200
    assert m.gauge()["g"] == 1
    assert lost(m.poll(obs(commit=500, start=700))) is not None  # and after it


def test_the_gauge_counts_the_partitions_seen_losing_not_those_found_below() -> None:
    """t-0 was found below the log start; only t-1 is then seen losing messages: one partition, 100 messages."""
    m = Monitor()
    first = obs(commit=500, start=0, partitions=2)
    first.log_start[("t", 0)] = 700
    m.poll(first)
    later = obs(commit=500, start=600, partitions=2)
    later.log_start[("t", 0)] = 700
    snap = m.poll(later)
    a = lost(snap)
    assert a is not None and a.value == 100 and "t-1" in a.summary and "t-0" not in a.summary
    assert m.gauge()["g"] == 1
