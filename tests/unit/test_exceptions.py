"""What ``exceptions`` granularity exports one by one, in which order, and where it stops (`exceptions_limit`)."""

from __future__ import annotations

import pytest

from collectors.model.records import (
    AlertRecord,
    BrokerRecord,
    ClusterSnapshot,
    GroupPartitionRecord,
    GroupRecord,
    IncidentRecord,
    PartitionRecord,
    ProducerRecord,
    TopicRecord,
)
from collectors.outputs.exceptions import (
    DEFAULT_LIMIT,
    GROUP_REASONS,
    PARTITION_REASONS,
    first,
    group_reason,
    partition_reason,
    pick_alerts,
    pick_groups,
)
from collectors.outputs.exporter import MetricsEndpoint
from tests.unit.test_exporter import samples, series

NOW = 1_800_000_000.0
C = "prod"


def part(isr: list[int], leader: int = 1, replicas: tuple[int, ...] = (1, 2, 3), min_isr: int = 2,
         zk_isr: list[int] | None = None, topic: str = "t", n: int = 0) -> PartitionRecord:
    return PartitionRecord(C, topic, n, leader, 0, list(replicas), isr, [], min_isr, 0, 10, 10, zk_isr=zk_isr)


@pytest.mark.parametrize(("p", "alerted", "stuck", "recent", "reason"), [
    (part([], leader=-1), set(), False, False, "offline"),
    (part([1]), {"t-0"}, True, True, "under_min_isr"),           # worse than its alert, its transaction
    (part([1, 2]), {"t-0"}, True, False, "stuck"),              # a hanging transaction beats its alert
    (part([1, 2]), {"t-0"}, False, True, "alerted"),            # an alert on it beats at min ISR
    (part([1, 2]), {"t-1"}, False, False, "at_min_isr"),        # another partition's alert is not its own
    (part([1, 2, 3], zk_isr=[1, 2]), set(), False, False, "stuck"),  # ZooKeeper disagrees
    (part([1, 2]), set(), False, True, "at_min_isr"),
    (part([1, 2, 3, 4][:3], replicas=(1, 2, 3, 4), min_isr=2), set(), False, False, "under_replicated"),
    (part([1, 2, 3]), set(), False, True, "isr_recent"),
    (part([1, 2], replicas=(1, 2), min_isr=2), set(), False, False, "min_isr_is_rf"),  # healthy, but RF = min ISR
    (part([1, 2, 3]), set(), False, False, None),
    (part([1, 2, 3], zk_isr=[3, 2, 1]), set(), False, False, None),  # the same ISR in another order
])
def test_partition_reason_is_the_most_serious_that_applies(p: PartitionRecord, alerted: set[str], stuck: bool,
                                                           recent: bool, reason: str | None) -> None:
    assert partition_reason(p, alerted, stuck, recent) == reason
    assert reason is None or reason in PARTITION_REASONS


def group(gid: str, status: str = "OK", activity: str = "active", slo: float | None = None,
          worst_s: float | None = None, idle: bool = False) -> GroupRecord:
    return GroupRecord(C, gid, "Stable", 1, 1, status=status, activity=activity, lag_seconds_slo=slo,
                       lag_seconds_max=worst_s, idle=idle)


@pytest.mark.parametrize(("g", "alerted", "deleted", "reason"), [
    (group("a", "ERR"), {"a"}, {"a"}, "ERR"),
    (group("a", "WARN"), {"a"}, {"a"}, "data_deleted"),
    (group("a", "ABANDONED", activity="abandoned"), set(), {"a"}, "data_deleted"),  # nobody runs it, data went
    (group("a", "ABANDONED", activity="abandoned"), {"a"}, set(), None),  # otherwise nobody's running consumer
    (group("a", "ERR", activity="inactive"), set(), set(), None),
    (group("a", "WARN"), {"a"}, set(), "alerted"),
    (group("a", "WARN"), set(), set(), "WARN"),
    (group("a", slo=60.0, worst_s=61.0), set(), set(), "past_slo"),
    (group("a", slo=60.0, worst_s=61.0, idle=True), set(), set(), None),  # no SLO between a batch job's runs
    (group("a", slo=60.0, worst_s=60.0), set(), set(), None),
    (group("a"), {"b"}, {"b"}, None),
])
def test_group_reason_is_the_most_serious_that_applies(g: GroupRecord, alerted: set[str], deleted: set[str],
                                                       reason: str | None) -> None:
    assert group_reason(g, alerted, deleted) == reason
    assert reason is None or reason in GROUP_REASONS


def test_first_keeps_the_most_serious_ties_by_name_and_counts_the_rest() -> None:
    ranked = {("b", 0): 5, ("a", 1): 5, ("z", 9): 0, ("a", 0): 5}
    assert first(ranked, 0) == (set(ranked), 0)  # 0: no limit
    assert first(ranked, 4) == (set(ranked), 0)
    assert first(ranked, 2) == ({("z", 9), ("a", 0)}, 2)
    assert first(ranked, 3) == ({("z", 9), ("a", 0), ("a", 1)}, 1)
    assert first({}, 1) == (set(), 0)


def test_pick_groups_takes_whole_groups_worst_first_and_passes_over_one_that_does_not_fit() -> None:
    ranked = {"err": 0, "huge": 1, "warn": 3, "slow": 4}
    sizes = {"err": 3, "huge": 10, "warn": 4, "slow": 2}
    pick = pick_groups(ranked, sizes, 8)
    assert pick.groups == set(ranked)  # every one keeps its per-group series
    assert pick.partitions == {"err", "warn"}  # 3 + 4; huge (10) cannot fit, slow (2) no longer does
    assert pick.omitted == 12
    assert pick_groups(ranked, sizes, 9).partitions == {"err", "warn", "slow"}
    assert pick_groups(ranked, sizes, 19).omitted == 0
    assert pick_groups(ranked, sizes, 0).partitions == set(ranked)


def alert(rule: str, subject: str, severity: str = "warning") -> AlertRecord:
    return AlertRecord(rule, severity, C, subject, "x", NOW - 60, NOW)


def test_pick_alerts_cuts_the_flood_never_the_rare_rule() -> None:
    flood = [alert("under_replicated", f"t-{i}") for i in range(10)]
    crit = [alert("under_min_isr", f"u-{i}", "critical") for i in range(3)]
    rare = [alert("history_write_failed", "history"), alert("broker_down", "broker 3", "critical")]
    shown, omitted = pick_alerts(flood + crit + rare, 6)
    assert omitted == 9
    assert [(a.rule, a.subject) for a in shown] == [
        ("broker_down", "broker 3"), ("history_write_failed", "history"),
        ("under_min_isr", "u-0"), ("under_min_isr", "u-1"), ("under_min_isr", "u-2"),
        ("under_replicated", "t-0")]
    assert pick_alerts(flood, 0) == (flood, 0)


def broker_down(partitions: int = 60, groups: int = 6) -> ClusterSnapshot:
    """Broker 3 down on a cluster of 3: every partition under-replicated, a few offline (broker 3 was their only
    ISR member), one at min ISR = 1 under it; every group WARN, one ERR; one alert per partition."""
    s = ClusterSnapshot(cluster=C, time=NOW, controller_id=1)
    s.brokers = [BrokerRecord(C, b, "h", 9092, reachable=b != 3) for b in (1, 2, 3)]
    s.topics = [TopicRecord(C, "t", False, partitions, 3, 2, False, 604_800_000, "delete",
                            under_replicated=partitions, offline=2, under_min_isr=1)]
    s.partitions = [part([1, 2], n=n) for n in range(partitions)]
    s.partitions[7] = part([], leader=-1, n=7)
    s.partitions[50] = part([], leader=-1, n=50)
    s.partitions[33] = part([1], n=33)
    s.groups = [group(f"g{i}", "ERR" if i == 4 else "WARN") for i in range(groups)]
    s.group_partitions = [GroupPartitionRecord(C, f"g{i}", "t", n, 5, 0, 10, 10, 5, 30.0, "WARN")
                          for i in range(groups) for n in range(10)]
    s.alerts = [alert("under_replicated", f"t-{n}") for n in range(partitions)]
    s.alerts.append(alert("broker_down", "broker 3", "critical"))
    s.incidents = [IncidentRecord(C, "i1", "broker", "broker 3", "critical", "broker 3 down", NOW - 60, NOW,
                                  alerts=partitions + 1)]
    return s


def test_a_big_outage_exports_the_worst_up_to_the_limit_and_everything_that_pages() -> None:
    ep = MetricsEndpoint(exceptions_limit=25)
    ep.update([broker_down()])
    body = ep.render()
    parts = {int(x["partition"]) for x in series(body, "kafka_topic_partition_in_sync_replica")}
    assert len(parts) == 25
    assert {7, 50, 33} <= parts  # offline and under min ISR first, then the alerted ones by topic and partition
    assert parts - {7, 50, 33} == set(range(23)) - {7}
    s = samples(body)
    omitted = {lab["detail"]: v for lab, v in s["kafka_monitor_detail_omitted"]}
    assert omitted == {"partitions": 35.0, "group_partitions": 40.0, "alerts": 36.0}
    # whole groups, the ERR one first, then by name: g4, g0 (20 of 25), no room for a third
    assert {x["consumergroup"] for x in series(body, "kafka_consumergroup_lag")} == {"g4", "g0"}
    # what pages is never cut: the roll-ups, every group's status, the incident, the alert counts
    assert {x["consumergroup"] for x in series(body, "kafka_consumergroup_status_code")} == {
        f"g{i}" for i in range(6)}
    assert s["kafka_topic_under_replicated_partitions"] == [({"cluster": C, "topic": "t"}, 60.0)]
    assert s["kafka_cluster_offline_partitions"] == [({"cluster": C}, 2.0)]
    assert len(series(body, "kafka_monitor_incident")) == 1
    assert ({"cluster": C, "severity": "warning"}, 60.0) in s["kafka_monitor_alerts_open"]
    shown = series(body, "kafka_monitor_alert")
    assert len(shown) == 25 and {"rule": "broker_down", "severity": "critical", "subject": "broker 3",
                                 "team": "", "cluster": C} in shown
    assert s["kafka_monitor_exported_partitions"] == [({"cluster": C, "granularity": "exceptions"}, 45.0)]
    again = MetricsEndpoint(exceptions_limit=25)
    again.update([broker_down()])
    # the same state exports the same series, not another sample of them
    assert again.render_parts()[0] == ep.render_parts()[0]


def test_a_hanging_transaction_is_not_cut_for_a_flood_of_under_replicated_alerts() -> None:
    s = broker_down()
    s.producers = [ProducerRecord(C, "t", 59, 9, 0, 3, None, None, hanging=True)]  # last by name, and alerted
    s.alerts.append(alert("hanging_transaction", "t-59", "critical"))
    ep = MetricsEndpoint(exceptions_limit=5)
    ep.update([s])
    body = ep.render()
    assert {x["partition"] for x in series(body, "kafka_topic_partition_hanging_transaction")} == {"59"}
    assert "59" in {x["partition"] for x in series(body, "kafka_topic_partition_in_sync_replica")}
    assert {"rule": "hanging_transaction", "severity": "critical", "subject": "t-59", "team": "",
            "cluster": C} in series(body, "kafka_monitor_alert")


def test_no_limit_and_a_limit_not_reached_export_every_exception() -> None:
    for limit in (0, DEFAULT_LIMIT):
        ep = MetricsEndpoint(exceptions_limit=limit)
        ep.update([broker_down()])
        body = ep.render()
        assert len(series(body, "kafka_topic_partition_in_sync_replica")) == 60
        assert len(series(body, "kafka_consumergroup_lag")) == 60
        assert len(series(body, "kafka_monitor_alert")) == 61
        assert {v for _, v in samples(body)["kafka_monitor_detail_omitted"]} == {0.0}


def test_partition_granularity_is_not_cut_and_topic_cuts_the_alerts() -> None:
    ep = MetricsEndpoint(granularity="partition", exceptions_limit=5)
    ep.update([broker_down()])
    body = ep.render()
    assert len(series(body, "kafka_topic_partition_in_sync_replica")) == 60  # asked for the world
    assert len(series(body, "kafka_monitor_alert")) == 61
    assert "kafka_monitor_detail_omitted" not in samples(body)
    ep = MetricsEndpoint(granularity="topic", exceptions_limit=5)
    ep.update([broker_down()])
    body = ep.render()
    assert len(series(body, "kafka_monitor_alert")) == 5  # roll-ups only: no alert per partition either
    assert samples(body)["kafka_monitor_detail_omitted"] == [({"cluster": C, "detail": "alerts"}, 56.0)]


def test_an_unreachable_cluster_still_cuts_its_alerts() -> None:
    s = broker_down()
    s.reachable = False
    ep = MetricsEndpoint(exceptions_limit=10)
    ep.update([s])
    body = ep.render()
    assert len(series(body, "kafka_monitor_alert")) == 10
    assert samples(body)["kafka_monitor_detail_omitted"] == [({"cluster": C, "detail": "alerts"}, 51.0)]
