"""The exporter over hand-made snapshots: names, labels, no NaN, roll-ups, vanished series, docs in sync."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.model.records import (
    AlertRecord,
    BrokerRecord,
    ClusterSnapshot,
    GroupPartitionRecord,
    GroupRecord,
    PartitionRecord,
    TopicRecord,
    ZkServerRecord,
)
from collectors.outputs.exporter import METRICS, MetricsEndpoint, metrics_table_markdown

ROOT = Path(__file__).resolve().parents[2]
KAFKA_EXPORTER_SUM_GAUGES = ("kafka_consumergroup_lag_sum", "kafka_consumergroup_current_offset_sum")
NOW = 1_800_000_000.0


def snapshot(cluster: str = "prod", groups: bool = True) -> ClusterSnapshot:
    s = ClusterSnapshot(cluster=cluster, time=NOW, controller_id=1)
    s.brokers = [BrokerRecord(cluster, 1, "h", 9092, is_controller=True, reachable=True)]
    s.topics = [TopicRecord(cluster, "orders", False, 2, 3, 2, False, 604_800_000, "delete", under_replicated=1,
                            failures_before_write_stop=0, failures_before_data_loss=1)]
    s.partitions = [
        PartitionRecord(cluster, "orders", 0, 1, 3, [1, 2, 3], [1, 2], [], 2, 0, 100, 90),
        PartitionRecord(cluster, "orders", 1, 2, 3, [1, 2, 3], [1, 2, 3], [], 2, None, None, None),
    ]
    if groups:
        s.groups = [GroupRecord(cluster, "billing", "Stable", 2, 1, status="WARN", lag_sum=10, lag_max=10,
                                lag_seconds_max=None)]
        s.group_partitions = [
            GroupPartitionRecord(cluster, "billing", "orders", 0, 90, 0, 100, 90, 10, None, "WARN"),
            GroupPartitionRecord(cluster, "billing", "orders", 1, None, None, None, None, None, None, "OK"),
        ]
    s.zookeeper = [ZkServerRecord(cluster, "127.0.0.1:2181", True, "leader", 0x500000003, 5, 3,
                                  latency_avg_ms=1.5)]
    s.alerts = [AlertRecord("under_replicated", "warning", cluster, "orders-0", "x", NOW - 60, NOW)]
    return s


def samples(body: bytes) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(body.decode()):
        for smp in fam.samples:
            out.setdefault(smp.name, []).append((smp.labels, smp.value))
    return out


def test_names_labels_and_values() -> None:
    ep = MetricsEndpoint(granularity="partition")
    ep.update([snapshot()])
    s = samples(ep.render())
    isr = {lab["partition"]: v for lab, v in s["kafka_topic_partition_in_sync_replica"]}
    assert isr == {"0": 2.0, "1": 3.0}
    assert ({"cluster": "prod", "topic": "orders", "partition": "0"}, 1.0) in s[
        "kafka_topic_partition_under_replicated_partition"]
    assert s["kafka_topic_partition_lso_gap"] == [({"cluster": "prod", "topic": "orders", "partition": "0"}, 10.0)]
    assert s["kafka_consumergroup_lag"] == [
        ({"cluster": "prod", "consumergroup": "billing", "topic": "orders", "partition": "0"}, 10.0)]
    assert s["kafka_consumergroup_status_code"][0][1] == 1.0
    assert s["zookeeper_zxid_epoch"][0][1] == 5.0 and s["zookeeper_zxid_sequence"][0][1] == 3.0
    assert s["zookeeper_request_latency_avg_seconds"][0][1] == pytest.approx(0.0015)
    assert s["kafka_monitor_alert"][0][0]["rule"] == "under_replicated"
    assert all(lab.get("cluster") == "prod" for name, series in s.items() for lab, _ in series
               if name.startswith(("kafka_", "zookeeper_")) and name != "kafka_monitor_build_info")


def test_unknown_values_are_omitted_never_nan() -> None:
    ep = MetricsEndpoint()
    ep.update([snapshot()])
    s = samples(ep.render())
    assert all(not math.isnan(v) for series in s.values() for _, v in series)
    assert "kafka_consumergroup_lag_seconds" not in s  # lag seconds unknown everywhere
    assert {lab["partition"] for lab, _ in s["kafka_topic_partition_current_offset"]} == {"0"}


def test_partition_series_can_be_rolled_up() -> None:
    ep = MetricsEndpoint(granularity="topic")
    ep.update([snapshot()])
    s = samples(ep.render())
    assert not [n for n in s if n.startswith("kafka_topic_partition_")]
    assert "kafka_consumergroup_lag" not in s
    assert s["kafka_consumergroup_lag_sum"] == [
        ({"cluster": "prod", "consumergroup": "billing", "topic": "orders"}, 10.0)]
    assert s["kafka_topic_under_replicated_partitions"][0][1] == 1.0


def test_deleted_group_disappears_with_the_next_snapshot() -> None:
    ep = MetricsEndpoint()
    ep.update([snapshot()])
    assert "billing" in ep.render().decode()
    ep.update([snapshot(groups=False)])
    assert "billing" not in ep.render().decode()


def test_unreachable_cluster_exports_only_what_is_known() -> None:
    s = ClusterSnapshot(cluster="gone", time=NOW, reachable=False, stale=True, stale_sections=["cluster"])
    ep = MetricsEndpoint()
    ep.update([s])
    got = samples(ep.render())
    assert got["kafka_monitor_cluster_reachable"][0][1] == 0.0
    assert "kafka_brokers" not in got


def test_promtool_accepts_the_exposition() -> None:
    assert shutil.which("promtool"), "promtool missing: ./run.sh setup installs Debian's prometheus package"
    ep = MetricsEndpoint()
    ep.update([snapshot(), snapshot("other")])
    r = subprocess.run(["promtool", "check", "metrics"], input=ep.render(), capture_output=True, timeout=30)
    # promtool's lint reserves "_sum" for summaries; kafka_exporter's two "_sum" gauges keep their names on purpose
    # (dashboards and alert rules query them). Anything else it says is a failure; exit 1 is a parse error.
    kept = {f'{n} non-histogram and non-summary metrics should not have "_sum" suffix'
            for n in KAFKA_EXPORTER_SUM_GAUGES}
    problems = [ln for ln in (r.stdout + r.stderr).decode().splitlines() if ln.strip() and ln.strip() not in kept]
    assert r.returncode in (0, 3) and not problems, problems


def test_docs_table_matches_the_code() -> None:
    doc = (ROOT / "docs" / "metrics.md").read_text()
    assert metrics_table_markdown() in doc
    assert len(METRICS) >= 60


@pytest.mark.parametrize("granularity", ["exceptions", "partition", "topic"])
def test_fast_text_rendering_equals_prometheus_client_rendering(granularity: str) -> None:
    ep = MetricsEndpoint(granularity=granularity)
    ep.collector._clock = lambda: NOW + 5  # the data age is computed at each render: one clock for both
    weird = snapshot('we"ird\\cluster\nname')
    ep.update([snapshot(), weird])
    fast, ref = samples(ep.render()), samples(ep.render_via_client())
    process = {n for n in fast if n.startswith(("process_", "python_"))}  # the tail's own process metrics
    assert process and {n: v for n, v in fast.items() if n not in process} == ref
    assert any(lab["cluster"] == 'we"ird\\cluster\nname' for lab, _ in fast["kafka_brokers"])


def test_snapshot_schema_doc_matches_records() -> None:
    from collectors.model.records import schema_markdown

    assert schema_markdown() in (ROOT / "docs" / "snapshot-schema.md").read_text()


# ----------------------------------------------------------------------------- granularity, render once per poll


def healthy_and_broken(cluster: str = "prod") -> ClusterSnapshot:
    """Two topics: `orders` healthy (3 partitions, ISR full), `pay` with partition 1 under-replicated; groups
    `fine` (OK) and `slow` (WARN) reading orders."""
    s = ClusterSnapshot(cluster=cluster, time=NOW, controller_id=1)
    s.brokers = [BrokerRecord(cluster, b, "h", 9092, reachable=True) for b in (1, 2, 3)]
    s.topics = [TopicRecord(cluster, "orders", False, 3, 3, 2, False, 604_800_000, "delete",
                            failures_before_write_stop=1, failures_before_data_loss=2),
                TopicRecord(cluster, "pay", False, 2, 3, 2, False, 604_800_000, "delete", under_replicated=1,
                            failures_before_write_stop=0, failures_before_data_loss=1)]
    s.partitions = [PartitionRecord(cluster, "orders", p, 1, 3, [1, 2, 3], [1, 2, 3], [], 2, 0, 100, 100)
                    for p in range(3)]
    s.partitions += [PartitionRecord(cluster, "pay", 0, 1, 3, [1, 2, 3], [1, 2, 3], [], 2, 0, 50, 50),
                     PartitionRecord(cluster, "pay", 1, 1, 3, [1, 2, 3], [1, 2], [], 2, 0, 50, 50)]
    s.groups = [GroupRecord(cluster, "fine", "Stable", 1, 1, lag_sum=3, lag_max=1, lag_seconds_max=1.0,
                            lag_seconds_slo=300.0),
                GroupRecord(cluster, "slow", "Stable", 1, 1, status="WARN", worst_partition_status="WARN",
                            lag_sum=90, lag_max=30, lag_seconds_max=400.0, lag_seconds_slo=300.0)]
    s.group_partitions = [GroupPartitionRecord(cluster, g, "orders", p, 99 - lag, 0, 100, 100, lag + 1, 1.0, st,
                                               owner_member_id=f"{g}-m1", owner_client_id=f"{g}-c",
                                               owner_host="/10.0.0.1")
                          for g, lag, st in (("fine", 0, "OK"), ("slow", 29, "WARN")) for p in range(3)]
    return s


def series(body: bytes, name: str) -> list[dict[str, str]]:
    return [lab for lab, _ in samples(body).get(name, [])]


def test_exceptions_by_default_detail_only_where_something_is_wrong() -> None:
    ep = MetricsEndpoint()  # the default: exceptions
    assert ep.collector.granularity == "exceptions"
    ep.update([healthy_and_broken()])
    body = ep.render()
    # per partition: only pay-1 (under-replicated), nothing of the healthy ones
    for fam in ("kafka_topic_partition_in_sync_replica", "kafka_topic_partition_current_offset",
                "kafka_topic_partition_leader"):
        assert [(x["topic"], x["partition"]) for x in series(body, fam)] == [("pay", "1")], fam
    # per group partition: only the WARN group's, every partition of it
    assert {(x["consumergroup"], x["partition"]) for x in series(body, "kafka_consumergroup_lag")} == {
        ("slow", "0"), ("slow", "1"), ("slow", "2")}
    assert {x["consumergroup"] for x in series(body, "kafka_consumergroup_status_code")} == {"slow"}
    # roll-ups for everyone: lag per topic, members, the worst lag in seconds; zero problem counts left out
    assert {x["consumergroup"] for x in series(body, "kafka_consumergroup_lag_sum")} == {"fine", "slow"}
    assert {x["consumergroup"] for x in series(body, "kafka_consumergroup_group_max_lag_seconds")} == {"fine", "slow"}
    assert {x["topic"] for x in series(body, "kafka_topic_partitions")} == {"orders", "pay"}
    assert {x["topic"] for x in series(body, "kafka_topic_under_replicated_partitions")} == {"pay"}
    assert {x["topic"] for x in series(body, "kafka_topic_failures_before_write_stop")} == {"pay"}
    assert "kafka_topic_unclean_leader_election_enabled" not in samples(body)
    # the SLO where the group is near or past it; cluster totals always, with their zeros
    assert {x["consumergroup"] for x in series(body, "kafka_consumergroup_lag_seconds_slo")} == {"slow"}
    s = samples(body)
    assert s["kafka_cluster_offline_partitions"] == [({"cluster": "prod"}, 0.0)]
    assert s["kafka_cluster_under_replicated_partitions"] == [({"cluster": "prod"}, 1.0)]
    assert s["kafka_monitor_exported_partitions"] == [({"cluster": "prod", "granularity": "exceptions"}, 4.0)]


def test_partition_granularity_exports_every_partition_and_topic_none() -> None:
    full, rolled = MetricsEndpoint(granularity="partition"), MetricsEndpoint(granularity="topic")
    for ep in (full, rolled):
        ep.update([healthy_and_broken()])
    assert len(series(full.render(), "kafka_topic_partition_in_sync_replica")) == 5
    assert len(series(full.render(), "kafka_consumergroup_lag")) == 6
    assert {x["topic"] for x in series(full.render(), "kafka_topic_under_replicated_partitions")} == {"orders", "pay"}
    assert not [n for n in samples(rolled.render()) if n.startswith("kafka_topic_partition_")]
    assert "kafka_consumergroup_lag" not in samples(rolled.render())


def test_an_alert_or_a_recent_isr_change_keeps_a_partition_in_detail() -> None:
    from collectors.model.records import PartitionChangeRecord

    ep = MetricsEndpoint()
    s = healthy_and_broken()
    s.alerts = [AlertRecord("lso_gap", "warning", "prod", "orders-2", "x", NOW - 60, NOW)]
    s.partition_changes = [PartitionChangeRecord("prod", NOW, "orders", 0, "isr_expand", 1, 1, [1, 2], [1, 2, 3])]
    ep.update([s])
    got = {(x["topic"], x["partition"]) for x in series(ep.render(), "kafka_topic_partition_in_sync_replica")}
    assert got == {("pay", "1"), ("orders", "2"), ("orders", "0")}
    later = healthy_and_broken()
    later.time = NOW + 590  # the ISR changed 590 s ago: an ISR that flaps is still followed
    ep.update([later])
    assert ("orders", "0") in {(x["topic"], x["partition"])
                               for x in series(ep.render(), "kafka_topic_partition_in_sync_replica")}
    last = healthy_and_broken()
    last.time = NOW + 601
    ep.update([last])
    assert ("orders", "0") not in {(x["topic"], x["partition"])
                                   for x in series(ep.render(), "kafka_topic_partition_in_sync_replica")}


def test_rendered_once_per_poll_whatever_the_scrapes_and_gzip_is_the_same_text() -> None:
    import gzip

    ep = MetricsEndpoint()
    ep.update([healthy_and_broken()])
    assert ep.renders == 1
    for _ in range(5):
        plain_body, _ = ep.render_parts()
        zipped_body, zipped_tail = ep.render_parts(gzipped=True)
    assert ep.renders == 1
    assert gzip.decompress(zipped_body) == plain_body
    # body and tail are two members of one gzip stream: decompressed together they are body + tail
    whole = gzip.decompress(zipped_body + zipped_tail)
    assert whole.startswith(plain_body) and b"kafka_monitor_data_age_seconds" in whole[len(plain_body):]
    ep.update([healthy_and_broken()])
    assert ep.renders == 2


def test_scrape_time_lines_data_age_build_info_and_last_successful_poll() -> None:
    ep = MetricsEndpoint()
    ep.collector._clock = lambda: NOW + 42
    ep.update([healthy_and_broken()])
    s = samples(ep.render())
    assert s["kafka_monitor_data_age_seconds"] == [({"cluster": "prod"}, 42.0)]
    ((labels, value),) = s["kafka_monitor_build_info"]
    assert set(labels) == {"version", "python"} and value == 1.0  # process-wide: no cluster label
    assert s["kafka_monitor_last_successful_poll_timestamp_seconds"] == [({"cluster": "prod"}, NOW)]
    assert "process_resident_memory_bytes" in s and s["kafka_monitor_polls_total"] == [({"cluster": "prod"}, 1.0)]
    ep.update([ClusterSnapshot(cluster="prod", time=NOW + 30, reachable=False)])
    s = samples(ep.render())
    assert s["kafka_monitor_last_successful_poll_timestamp_seconds"] == [({"cluster": "prod"}, NOW)]  # not moved
    assert s["kafka_monitor_cluster_reachable"] == [({"cluster": "prod"}, 0.0)]


def test_owner_series_follow_the_members_no_stale_series_after_a_rebalance() -> None:
    ep = MetricsEndpoint(granularity="partition", owner_labels=True)
    ep.update([healthy_and_broken()])
    assert {x["member_id"] for x in series(ep.render(), "kafka_consumergroup_partition_owner")} == {
        "fine-m1", "slow-m1"}
    after = healthy_and_broken()
    for gp in after.group_partitions:
        gp.owner_member_id = gp.owner_member_id.replace("m1", "m2")  # a rebalance: new member ids
    ep.update([after])
    assert {x["member_id"] for x in series(ep.render(), "kafka_consumergroup_partition_owner")} == {
        "fine-m2", "slow-m2"}


# What dashboard 7589 ("Kafka Exporter Overview") and kafka_exporter's users query: name → labels besides cluster.
KAFKA_EXPORTER_QUERIED = {
    "kafka_topic_partition_current_offset": {"topic", "partition"},
    "kafka_consumergroup_current_offset": {"consumergroup", "topic", "partition"},
    "kafka_consumergroup_lag": {"consumergroup", "topic", "partition"},
    "kafka_topic_partitions": {"topic"},
    "kafka_consumergroup_lag_sum": {"consumergroup", "topic"},
    "kafka_consumergroup_current_offset_sum": {"consumergroup", "topic"},
    "kafka_brokers": set(),
    "kafka_consumergroup_members": {"consumergroup"},
    "kafka_topic_partition_in_sync_replica": {"topic", "partition"},
    "kafka_topic_partition_replicas": {"topic", "partition"},
    "kafka_topic_partition_leader": {"topic", "partition"},
    "kafka_topic_partition_leader_is_preferred": {"topic", "partition"},
    "kafka_topic_partition_under_replicated_partition": {"topic", "partition"},
    "kafka_topic_partition_oldest_offset": {"topic", "partition"},
}


def test_every_name_kafka_exporter_users_query_is_served_with_its_labels() -> None:
    full = MetricsEndpoint(granularity="partition")
    full.update([healthy_and_broken()])
    s = samples(full.render())
    for name, labels in KAFKA_EXPORTER_QUERIED.items():
        assert name in s, name
        assert all(set(lab) == {"cluster", *labels} for lab, _ in s[name]), name
    # the default mode serves every one of them too, where it has something to say
    default = MetricsEndpoint()
    default.update([healthy_and_broken()])
    assert set(KAFKA_EXPORTER_QUERIED) <= set(samples(default.render()))
    # and the docs list them
    doc = (ROOT / "docs" / "metrics.md").read_text()
    assert all(f"`{name}" in doc for name in KAFKA_EXPORTER_QUERIED)
