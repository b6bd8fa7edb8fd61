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
    ep = MetricsEndpoint()
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
    assert all(lab.get("cluster") == "prod" for series in s.values() for lab, _ in series)


def test_unknown_values_are_omitted_never_nan() -> None:
    ep = MetricsEndpoint()
    ep.update([snapshot()])
    s = samples(ep.render())
    assert all(not math.isnan(v) for series in s.values() for _, v in series)
    assert "kafka_consumergroup_lag_seconds" not in s  # lag seconds unknown everywhere
    assert {lab["partition"] for lab, _ in s["kafka_topic_partition_current_offset"]} == {"0"}


def test_partition_series_can_be_rolled_up() -> None:
    ep = MetricsEndpoint(partition_series=False)
    ep.update([snapshot()])
    s = samples(ep.render())
    assert not [n for n in s if n.startswith("kafka_topic_partition_")]
    assert "kafka_consumergroup_lag" not in s
    assert s["kafka_consumergroup_topic_lag"] == [
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
    assert r.returncode == 0, r.stdout + r.stderr


def test_docs_table_matches_the_code() -> None:
    doc = (ROOT / "docs" / "metrics.md").read_text()
    assert metrics_table_markdown() in doc
    assert len(METRICS) >= 60


def test_fast_text_rendering_equals_prometheus_client_rendering() -> None:
    ep = MetricsEndpoint()
    weird = snapshot('we"ird\\cluster\nname')
    ep.update([snapshot(), weird])
    fast, ref = samples(ep.render()), samples(ep.render_via_client())
    assert fast == ref
    assert any(lab["cluster"] == 'we"ird\\cluster\nname' for lab, _ in fast["kafka_brokers"])


def test_snapshot_schema_doc_matches_records() -> None:
    from collectors.model.records import schema_markdown

    assert schema_markdown() in (ROOT / "docs" / "snapshot-schema.md").read_text()
