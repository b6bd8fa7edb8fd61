"""A partition's alert takes its own topic's owner and severity cap, not those of a topic named like its subject
(`orders` partition 1 vs the topic `orders-1`)."""

from __future__ import annotations

from collectors.alerting.catalogue import RULES
from collectors.alerting.evaluation import judge
from collectors.alerting.rules import Candidate, apply_policy
from collectors.config import Thresholds
from collectors.model.records import BrokerRecord, ClusterSnapshot, LossRecord, PartitionRecord, TopicRecord
from collectors.model.state import ClusterState
from collectors.model.vocabulary import TRUNCATION

NOW = 1_800_000_000.0


def topic(name: str, team: str | None, cap: str | None, min_isr: int = 2) -> TopicRecord:
    return TopicRecord("c", name, False, 3, 3, min_isr, False, 604_800_000, "delete", team=team, max_severity=cap)


def snapshot(*partitions: PartitionRecord, cluster: str = "c") -> ClusterSnapshot:
    s = ClusterSnapshot(cluster=cluster, time=NOW, controller_id=1)
    s.brokers = [BrokerRecord(cluster, i, "h", 9092, is_controller=i == 1, reachable=True) for i in (1, 2, 3)]
    s.topics = [topic("orders", "payments", None), topic("orders-1", "sandbox", "info", min_isr=1)]
    s.partitions = list(partitions)
    return s


def test_offline_partition_of_orders_1_goes_to_orders_team_at_full_severity() -> None:
    s = snapshot(PartitionRecord("c", "orders", 1, -1, 1, [1, 2, 3], [1], [], 2),
                 PartitionRecord("c", "orders-1", 0, -1, 1, [1, 2, 3], [1], [], 1))
    fired = {(c.rule, c.subject): c for c in judge(s, ClusterState(), Thresholds(), NOW)}
    mine = fired[("offline_partition", "orders-1")]
    assert (mine.team, mine.severity, mine.topic) == ("payments", "critical", "orders")
    theirs = fired[("offline_partition", "orders-1-0")]
    assert (theirs.team, theirs.severity, theirs.topic) == ("sandbox", "info", "orders-1")
    durability = fired[("unsafe_durability", "orders-1")]  # a topic alert: the topic orders-1's
    assert (durability.team, durability.severity) == ("sandbox", "info")


def test_loss_on_a_partition_goes_to_its_topics_team() -> None:
    s = snapshot()
    st = ClusterState()
    st.recent_losses.append(LossRecord("c", NOW - 10, TRUNCATION, "orders", 1, 5, "hw 10 -> 5"))
    fired = {(c.rule, c.subject): c for c in judge(s, st, Thresholds(), NOW)}
    lost = fired[("data_truncated", "orders-1")]
    assert (lost.team, lost.severity) == ("payments", "critical")


def test_candidates_carrying_their_topic_are_routed_by_it_and_cluster_wide_ones_by_nobody() -> None:
    s = snapshot(cluster="orders-1")
    out = apply_policy([Candidate("offline_partition", "critical", "orders-1", "down", topic="orders"),
                        Candidate("preferred_leader_imbalance", "info", "orders-1", "imbalance")], s)
    assert (out[0].team, out[0].severity) == ("payments", "critical")
    assert out[1].team is None  # about the cluster (named like the topic here), not the topic
    assert RULES["preferred_leader_imbalance"].family == "partitions"
