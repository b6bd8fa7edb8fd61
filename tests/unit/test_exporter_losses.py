"""The loss ledger on /metrics: counters since start, every loss kind present at 0 before its first event."""

from __future__ import annotations

from collectors.model.records import ClusterSnapshot, LossRecord
from collectors.model.vocabulary import LOSS_KINDS
from collectors.outputs.exporter import MetricsEndpoint
from tests.unit.test_exporter import NOW, samples


def counters(ep: MetricsEndpoint, name: str) -> dict[tuple[str, ...], float]:
    return {tuple(v for k, v in sorted(lab.items())): value for lab, value in samples(ep.render()).get(name, [])}


def test_every_kind_is_at_zero_before_its_first_event_so_increase_counts_the_first() -> None:
    ep = MetricsEndpoint()
    ep.update([ClusterSnapshot(cluster="a", time=NOW), ClusterSnapshot(cluster="b", time=NOW)])
    events = counters(ep, "kafka_monitor_loss_events_total")
    assert events == {(c, k): 0.0 for c in ("a", "b") for k in LOSS_KINDS}
    assert counters(ep, "kafka_monitor_messages_lost_total") == {}  # per topic: born at a topic's first loss
    later = ClusterSnapshot(cluster="a", time=NOW + 30)
    later.losses = [LossRecord("a", NOW + 30, "truncation", "orders", 0, 1200, "hw 5200, new leader ends at 4000"),
                    LossRecord("a", NOW + 30, "unclean_election", "orders", 0, None, "leader 3 not in ISR [1, 2]")]
    ep.update([later])
    events = counters(ep, "kafka_monitor_loss_events_total")
    assert events[("a", "truncation")] == 1.0 and events[("a", "unclean_election")] == 1.0
    assert sum(events.values()) == 2.0 and len(events) == 2 * len(LOSS_KINDS)
    assert counters(ep, "kafka_monitor_messages_lost_total") == {("a", "truncation", "orders"): 1200.0}
