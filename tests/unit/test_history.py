"""Parquet history (collectors.outputs.history) and the latest-state files (collectors.outputs.latest_state)."""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from collectors.model.poll import IncidentEvent, PollResult
from collectors.model.records import (
    AlertRecord,
    BrokerRecord,
    ClusterSnapshot,
    GroupPartitionRecord,
    GroupRecord,
    IncidentRecord,
    KRaftVoterRecord,
    LossRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerRecord,
    TopicRecord,
    TransactionRecord,
    ZkServerRecord,
)
from collectors.outputs import latest_state, paths
from collectors.outputs.history import (
    HISTORY_SCHEMA_VERSION,
    ROW_GROUP_ORDER,
    TABLES,
    HistoryWriter,
    available_dates,
    list_tables,
    live_files,
    read_table,
    repeated_files,
    snapshot_columns,
)
from collectors.outputs.history import maintenance as history_maintenance
from collectors.outputs.history.files import stores_timestamps
from collectors.outputs.history.schema import TIME_COLUMNS
from tests.support.damage import cut_short, damage_pages, disk_full_on
from tests.support.mixed_history import write_upgraded_mid_day

DAY = 86_400.0
T0 = 1_700_006_400.0  # 2023-11-15 00:00:00 UTC
LATER = T0 + 30 * DAY  # a clock for which T0's days are finished


def files_in(root: Path, table: str, pattern: str = "*.parquet") -> list[Path]:
    return sorted((root / table).glob(f"date=*/{pattern}"))


def gp(group: str, topic: str, p: int, lag: int | None, status: str = "OK", **kw: Any) -> GroupPartitionRecord:
    return GroupPartitionRecord("c1", group, topic, p, 100 if lag is not None else None, 0, 200, 200, lag,
                                kw.pop("lag_seconds", None), status, **kw)


def full_snapshot(t: float = T0, cluster: str = "c1") -> ClusterSnapshot:
    s = ClusterSnapshot(cluster=cluster, time=t, mode="zookeeper", cluster_id="abc", controller_id=1,
                        stale=True, stale_sections=["offsets", "producers"], errors=["x"], poll_duration_s=0.5,
                        requests=12)
    s.brokers = [BrokerRecord(cluster, 1, "b1", 9092, rack="r1", in_zookeeper=True, is_controller=True, reachable=True),
                 BrokerRecord(cluster, 2, "b2", 9092)]
    s.topics = [TopicRecord(cluster, "orders", False, 3, 3, 2, False, 604_800_000, "delete", under_replicated=1,
                            at_min_isr=1, failures_before_write_stop=0, failures_before_data_loss=1),
                TopicRecord(cluster, "__consumer_offsets", True, 1, 3, 2, True, None, "compact", offline=1)]
    s.partitions = [
        PartitionRecord(cluster, "orders", 0, 1, 3, [1, 2, 3], [1, 2, 3], [], 2, 0, 500, 450),
        PartitionRecord(cluster, "orders", 1, 2, 3, [2, 3, 1], [2, 3], [], 2, 0, 500, 500),
        PartitionRecord(cluster, "orders", 2, 3, 3, [3, 1, 2], [3, 1, 2], [], 2, None, None, None),
    ]
    s.partition_changes = [PartitionChangeRecord(cluster, t, "orders", 1, "isr_shrink", 2, 2, [1, 2, 3], [2, 3])]
    s.groups = [GroupRecord(cluster, "g1", "Stable", 2, 1, status="ERR", worst_partition_status="STALL"),
                GroupRecord(cluster, "g-empty", "Empty", 0, 2)]
    s.group_partitions = [
        gp("g1", "orders", 0, 10, "WARN", lag_seconds=5.0, seconds_to_retention=100.0, last_commit_time=t - 60),
        gp("g1", "orders", 1, 30, "STALL", lag_seconds=float("nan"), below_log_start=True, seconds_to_retention=0.0),
        gp("g1", "audit", 0, None),
    ]
    s.transactions = [
        TransactionRecord(cluster, "tx-open", 1, "Ongoing", 7, 2, 60_000, t - 90, 90.0, ["orders-0", "orders-1"]),
        TransactionRecord(cluster, "tx-done", 1, "CompleteCommit", 8, 1, 60_000, None, None, []),
    ]
    s.producers = [ProducerRecord(cluster, "orders", 0, 9, 0, 450, None, None, hanging=True)]
    s.zookeeper = [ZkServerRecord(cluster, "zk1:2181", True, "leader", zxid=(3 << 32) + 5, zxid_epoch=3,
                                  zxid_counter=5, latency_avg_ms=0.5, connections=4),
                   ZkServerRecord(cluster, "zk2:2181", False, error="connection refused")]
    s.kraft_voters = [KRaftVoterRecord(cluster, 1, "leader", 100, 0, t, t, 1, 4, 100),
                      KRaftVoterRecord(cluster, 9, "observer", None, None, None, None, 1, 4, 100)]
    s.alerts = [AlertRecord("under_replicated", "warning", cluster, "orders-1", "URP", t, t),
                AlertRecord("offline_partition", "critical", cluster, "__consumer_offsets-0", "off", t, t)]
    return s


def incident_events(t: float = T0) -> list[IncidentEvent]:
    inc = IncidentRecord("c1", "broker-0123456789", "broker", "broker 2", "critical", "broker 2 is down; …", t,
                         t, alerts=3, members={"broker_down": 1, "at_min_isr": 2}, brokers=[2], partitions=2,
                         topics=1, offline=0, under_min_isr=0, at_min_isr=2, unclean_topics=0,
                         consequences=["group g1"])
    return [IncidentEvent(t, "opened", inc), IncidentEvent(t + 30, "updated", inc)]


def test_incident_events_are_history_rows_with_their_own_time(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path, clock=lambda: T0)
    w.add(PollResult(full_snapshot(T0), incident_events=incident_events(T0)))
    assert w.flush()
    rows = read_table(tmp_path, "incident_events").to_dict("records")
    assert [(r["event"], r["time"], r["id"]) for r in rows] == [("opened", T0, "broker-0123456789"),
                                                                ("updated", T0 + 30, "broker-0123456789")]
    assert json.loads(rows[0]["members"]) == {"at_min_isr": 2, "broker_down": 1}
    assert list(rows[0]["brokers"]) == [2] and list(rows[0]["consequences"]) == ["group g1"]
    cluster = read_table(tmp_path, "cluster").to_dict("records")[0]
    assert cluster["incidents_open"] == 0


def opened_resolved(t: float = T0) -> tuple[list[AlertRecord], list[AlertRecord]]:
    return ([AlertRecord("under_replicated", "warning", "c1", "orders-1", "URP", t, t, value=1.0)],
            [AlertRecord("consumer_lag_status", "critical", "c1", "g1", "lag", t - 600, t - 30, None, t)])


def small_snapshot(t: float, cluster: str = "c1", topics: int = 1) -> ClusterSnapshot:
    return ClusterSnapshot(cluster=cluster, time=t, topics=[
        TopicRecord(cluster, f"t{i}", False, 1, 3, 2, False, 1000, "delete") for i in range(topics)])


# ----- times as Parquet TIMESTAMP (schema version 4), older float-second files side by side


def polls_at(t: float) -> list[PollResult]:
    opened, resolved = opened_resolved(t)
    return [PollResult(full_snapshot(t), opened, resolved, incident_events(t))]


def test_version_4_files_store_times_as_utc_timestamps(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    w = HistoryWriter(tmp_path, clock=lambda: T0, partition_detail=True)
    w.add(polls_at(T0 + 0.123456)[0])
    assert w.flush()
    assert HISTORY_SCHEMA_VERSION == 4
    stamp = pa.timestamp("us", tz="UTC")
    assert set(list_tables(tmp_path)) == set(TABLES) - {"loss_events"}  # no loss in this poll
    for table in list_tables(tmp_path):
        cols = TIME_COLUMNS[table]
        [f] = files_in(tmp_path, table)
        assert f.name.endswith(".v4.parquet") and stores_timestamps(f), f
        schema = pq.read_schema(f)
        assert schema.metadata[b"kmon.history_schema_version"] == b"4"
        assert {c: schema.field(c).type for c in cols} == dict.fromkeys(cols, stamp), table
        assert "time" in cols
    durations = pq.read_schema(files_in(tmp_path, "transactions")[0])
    assert durations.field("age_seconds").type == pa.float64()  # durations stay seconds
    [f] = files_in(tmp_path, "cluster")
    assert pq.read_table(f).column("time").to_pylist()[0].microsecond == 123456
    assert str(pd.read_parquet(f)["time"].dtype) == "datetime64[us, UTC]"
    con = duckdb.connect()
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))",
                             [str(f)]).fetchall())
    assert types["time"] == "TIMESTAMP WITH TIME ZONE" and types["poll_duration_s"] == "DOUBLE"
    [(micros,)] = con.execute("SELECT epoch_us(time) FROM read_parquet(?)", [str(f)]).fetchall()
    assert micros == round((T0 + 0.123456) * 1e6)
    [alerts] = files_in(tmp_path, "alert_events")
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))",
                             [str(alerts)]).fetchall())
    assert {types[c] for c in ("first_seen", "last_seen", "resolved_at")} == {"TIMESTAMP WITH TIME ZONE"}
    # Readers of this package still hand out epoch seconds.
    df = read_table(tmp_path, "cluster")
    assert str(df["time"].dtype) == "Float64" and df["time"].tolist() == [T0 + 0.123456]


def test_files_before_and_after_version_4_side_by_side_read_alike(tmp_path: Path) -> None:
    """A collector upgraded mid-day: the day holds float-second files (version 3) and TIMESTAMP files."""
    t_old, t_new = T0 + 3600.123456, T0 + 7200.654321
    mixed, old_only = tmp_path / "mixed", tmp_path / "old"
    write_upgraded_mid_day(mixed, polls_at(t_old), polls_at(t_new))
    write_upgraded_mid_day(old_only, polls_at(t_old) + polls_at(t_new), [])
    tables = list_tables(mixed)
    assert set(tables) == set(TABLES) - {"group_partition_lag", "loss_events"}
    for table in tables:
        files = files_in(mixed, table)
        assert sorted(stores_timestamps(f) for f in files) == [False, True], table
        old = next(f for f in files if not stores_timestamps(f))
        assert pq.read_schema(old).field("time").type == pa.float64()
        got, want = read_table(mixed, table), read_table(old_only, table)
        assert sorted(set(got["schema_version"])) == [3, 4], table
        pd.testing.assert_frame_equal(got.drop(columns="schema_version"), want.drop(columns="schema_version"))
    polls = read_table(mixed, "cluster")
    assert polls["time"].tolist() == pytest.approx([t_old, t_new], abs=1e-6)
    alerts = read_table(mixed, "alert_events")
    assert alerts["first_seen"].tolist() == pytest.approx([t_old, t_old - 600, t_new, t_new - 600], abs=1e-6)
    txn = read_table(mixed, "transactions")
    assert (txn["time"] - txn["start_time"]).tolist() == pytest.approx([90.0, 90.0], abs=1e-5)
    # time filters apply alike to both kinds of file
    assert read_table(mixed, "cluster", start=polls["time"][1])["time"].tolist() == [polls["time"][1]]
    assert read_table(mixed, "cluster", end=polls["time"][1])["time"].tolist() == [polls["time"][0]]
    assert read_table(mixed, "cluster", start=t_old + 1, end=t_new - 1).empty
    # compacting the day turns both into one TIMESTAMP file with the same rows
    w = HistoryWriter(mixed, clock=lambda: LATER, retention_days=None)
    before = {t: read_table(mixed, t) for t in tables}
    for table in tables:
        assert w.compact(table, "2023-11-15")
        [f] = files_in(mixed, table)
        assert f.name.startswith("compact-") and stores_timestamps(f)
        assert pq.read_schema(f).field("time").type == pa.timestamp("us", tz="UTC")
        # (rows of one time come in the compaction's row-group order, e.g. group_lag's by key: `ROW_GROUP_ORDER`)
        key = list(ROW_GROUP_ORDER.get(table, ("time",)))
        pd.testing.assert_frame_equal(read_table(mixed, table).sort_values(key, kind="stable").reset_index(drop=True),
                                      before[table].sort_values(key, kind="stable").reset_index(drop=True))


# ----- rows per table


def test_rows_per_table_from_a_snapshot() -> None:
    opened, resolved = opened_resolved()
    cols = snapshot_columns(full_snapshot(), opened, resolved, partition_detail=True)
    counts = {t: len(next(iter(c.values()))) for t, c in cols.items()}
    assert counts == {"cluster": 1, "brokers": 2, "topic_health": 2, "partition_changes": 1, "group_lag": 3,
                      "group_partition_lag": 3, "transactions": 1, "producers": 1, "lso_gap": 1, "consensus": 4,
                      "alert_events": 2}
    assert "group_partition_lag" not in snapshot_columns(full_snapshot(), partition_detail=False)
    for table, c in cols.items():  # the vocabulary: every column is a schema column
        assert set(c) <= set(TABLES[table].names), table


def test_flush_writes_one_file_per_table_and_date(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path, partition_detail=True, clock=lambda: T0)
    opened, resolved = opened_resolved()
    first = full_snapshot(T0)
    first.losses = [LossRecord("c1", T0, "truncation", "orders", 3, 1_240, "high watermark 50,000 ...", 1, 2, 5, 7,
                               True)]
    w.add(PollResult(first, opened, resolved, incident_events(T0)))
    w.add(PollResult(full_snapshot(T0 + 60)))
    w.add(PollResult(full_snapshot(T0 + DAY)))
    assert w.buffered_rows > 0 and not list(tmp_path.rglob("*.parquet"))
    assert w.flush() and w.last_error is None and w.buffered_rows == 0
    assert set(list_tables(tmp_path)) == set(TABLES)
    for table in TABLES:
        days = {p.parent.name for p in files_in(tmp_path, table)}
        events = table in ("alert_events", "incident_events", "loss_events")
        expected = {"date=2023-11-15"} if events else {"date=2023-11-15", "date=2023-11-16"}
        assert days == expected, table
        assert len(files_in(tmp_path, table)) == len(expected), table
    assert all(p.name.startswith("part-") for p in tmp_path.rglob("*.parquet"))
    assert not list(tmp_path.rglob(".*"))
    assert available_dates(tmp_path, "cluster") == ["2023-11-15", "2023-11-16"]
    assert w.rows_written == sum(len(read_table(tmp_path, t)) for t in TABLES)
    meta = pq.read_schema(files_in(tmp_path, "cluster")[0]).metadata
    assert meta[b"kmon.history_schema_version"] == str(HISTORY_SCHEMA_VERSION).encode()
    assert w.flush()  # nothing buffered: no new files
    assert len(list(tmp_path.rglob("*.parquet"))) == 2 * len(TABLES) - 3  # the three event tables: one day each
    loss = read_table(tmp_path, "loss_events").to_dict("records")
    assert [(x["kind"], x["topic"], x["partition"], x["messages"], x["epoch_after"], x["unclean_enabled"])
            for x in loss] == [("truncation", "orders", 3, 1_240, 7, True)]


def test_read_table_round_trips_values(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path, partition_detail=True, clock=lambda: T0)
    opened, resolved = opened_resolved()
    w.add_snapshot(full_snapshot(), opened, resolved)
    w.close()

    c = read_table(tmp_path, "cluster").iloc[0]
    assert (c.cluster, c.time, c.schema_version) == ("c1", T0, HISTORY_SCHEMA_VERSION)
    assert c.stale_sections == "offsets,producers" and c.errors == 1 and c.partitions == 4
    assert (c.under_replicated, c.offline, c.alerts_open, c.alerts_critical, c.groups) == (1, 1, 2, 1, 2)

    th = read_table(tmp_path, "topic_health").set_index("topic")
    assert pd.isna(th.loc["__consumer_offsets", "retention_ms"])  # infinite retention stays null
    assert th.loc["orders", "retention_ms"] == 604_800_000 and bool(th.loc["__consumer_offsets", "internal"])

    changes = read_table(tmp_path, "partition_changes")
    assert changes.loc[0, "isr_before"] == [1, 2, 3] and changes.loc[0, "isr_after"] == [2, 3]

    gl = read_table(tmp_path, "group_lag").set_index(["group_id", "topic"], drop=False)
    orders = gl.loc[("g1", "orders")]
    assert (orders.lag_sum, orders.lag_max, orders.partitions, orders.below_log_start) == (40, 30, 2, 1)
    assert orders.worst_partition_status == "STALL" and orders.status == "ERR" and orders.state == "Stable"
    assert orders.lag_seconds_max == 5.0  # the NaN of partition 1 was not taken as a value
    assert orders.min_seconds_to_retention == 0.0 and orders.last_commit_time == T0 - 60
    audit = gl.loc[("g1", "audit")]
    assert pd.isna(audit.lag_sum) and pd.isna(audit.lag_max) and audit.worst_partition_status == "OK"
    empty = gl[gl.group_id == "g-empty"].iloc[0]
    assert pd.isna(empty.topic) and empty.partitions == 0 and empty.state == "Empty"

    gpl = read_table(tmp_path, "group_partition_lag").set_index(["topic", "partition"])
    assert pd.isna(gpl.loc[("orders", 1), "lag_seconds"])  # NaN became null
    assert pd.isna(gpl.loc[("audit", 0), "lag"]) and pd.isna(gpl.loc[("audit", 0), "committed_offset"])
    assert str(gpl["lag"].dtype) == "Int64" and str(gpl["lag_seconds"].dtype) == "Float64"
    assert not any(isinstance(v, float) and math.isnan(v) for v in gpl["lag_seconds"].tolist())

    tx = read_table(tmp_path, "transactions")
    assert tx.transactional_id.tolist() == ["tx-open"] and tx.loc[0, "partitions"] == ["orders-0", "orders-1"]
    pr = read_table(tmp_path, "producers").iloc[0]
    assert pd.isna(pr.transactional_id) and pd.isna(pr.last_timestamp) and bool(pr.hanging)
    gap = read_table(tmp_path, "lso_gap").iloc[0]
    assert (gap.topic, gap.partition, gap.lso_gap, gap.high_watermark, gap.last_stable_offset) == ("orders", 0, 50,
                                                                                                  500, 450)
    cons = read_table(tmp_path, "consensus").set_index("server")
    assert cons.loc["zk1:2181", "zxid"] == (3 << 32) + 5 and cons.loc["zk1:2181", "kind"] == "zookeeper"
    assert cons.loc["zk2:2181", "error"] == "connection refused" and pd.isna(cons.loc["zk2:2181", "zxid"])
    assert cons.loc["voter-1", "mode"] == "leader" and cons.loc["voter-1", "kind"] == "kraft"
    assert pd.isna(cons.loc["voter-1", "zxid"]) and pd.isna(cons.loc["zk1:2181", "leader_epoch"])
    assert pd.isna(cons.loc["observer-9", "lag"]) and cons.loc["observer-9", "mode"] == "observer"

    br = read_table(tmp_path, "brokers").set_index("broker_id")
    assert bool(br.loc[1, "is_controller"]) and pd.isna(br.loc[2, "in_zookeeper"]) and pd.isna(br.loc[2, "rack"])

    ev = read_table(tmp_path, "alert_events").set_index("event")
    assert ev.loc["open", "rule"] == "under_replicated" and pd.isna(ev.loc["open", "resolved_at"])
    assert ev.loc["resolve", "resolved_at"] == T0 and pd.isna(ev.loc["resolve", "value"])
    assert ev.loc["resolve", "first_seen"] == T0 - 600


def test_read_table_filters_and_empty_tables(tmp_path: Path) -> None:
    assert read_table(tmp_path / "missing", "group_lag").columns.tolist() == TABLES["group_lag"].names
    w = HistoryWriter(tmp_path, clock=lambda: T0)
    for i in range(4):
        w.add_snapshot(small_snapshot(T0 + i * 10, cluster="a" if i % 2 else "b"))
    w.flush()
    df = read_table(tmp_path, "topic_health")
    assert df.time.tolist() == [T0, T0 + 10, T0 + 20, T0 + 30]  # sorted by time
    assert read_table(tmp_path, "topic_health", clusters=["a"]).time.tolist() == [T0 + 10, T0 + 30]
    assert read_table(tmp_path, "topic_health", start=T0 + 10, end=T0 + 30).time.tolist() == [T0 + 10, T0 + 20]
    sel = read_table(tmp_path, "cluster", columns=["time", "date"])
    assert sel.columns.tolist() == ["time", "date"] and set(sel.date) == {"2023-11-15"}
    empty = read_table(tmp_path, "consensus")  # a table nothing was written to
    assert empty.empty and empty.columns.tolist() == TABLES["consensus"].names
    assert read_table(tmp_path, "topic_health", start=T0 + 5 * DAY).empty
    with pytest.raises(ValueError, match="unknown column"):
        read_table(tmp_path, "cluster", columns=["nope"])
    with pytest.raises(ValueError, match="unknown history table"):
        read_table(tmp_path, "nope")


def test_partition_pruning_by_time_range(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path, clock=lambda: T0)
    for d in range(3):
        w.add_snapshot(small_snapshot(T0 + d * DAY + 3600))
    w.flush()
    # A broken file on the first and last day: a read of the middle day must never open them.
    for d in ("2023-11-15", "2023-11-17"):
        (tmp_path / "topic_health" / f"date={d}" / "part-0-broken.parquet").write_bytes(b"not parquet")
    start, end = T0 + DAY, T0 + 2 * DAY - 1
    files = live_files(tmp_path, "topic_health", start, end)
    assert {f.parent.name for f in files} == {"date=2023-11-16"}
    df = read_table(tmp_path, "topic_health", start=start, end=end)
    assert df.time.tolist() == [T0 + DAY + 3600]


def test_unreadable_file_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    w = HistoryWriter(tmp_path, clock=lambda: T0)
    w.add_snapshot(small_snapshot(T0))
    w.flush()
    (tmp_path / "topic_health" / "date=2023-11-15" / "part-0-broken.parquet").write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING, logger="collectors.outputs.history"):
        assert read_table(tmp_path, "topic_health").time.tolist() == [T0]
    assert "part-0-broken.parquet" in caplog.text


def test_a_file_damaged_past_its_footer_is_skipped_once_named(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """The footer reads, the pages do not: the read of the range fails, each file is then read on its own, the one
    that does not decode is named and left out, and later reads skip it before reading (one warning, not one per
    dashboard refresh) until a whole file is put back under its name."""
    w = HistoryWriter(tmp_path, clock=lambda: T0)
    times = write_day(w, 3)
    victim = files_in(tmp_path, "topic_health")[1]
    good = victim.read_bytes()
    damage_pages(victim)
    with caplog.at_level(logging.WARNING, logger="collectors.outputs.history"):
        assert sorted(set(read_table(tmp_path, "topic_health").time)) == [times[0], times[2]]
        assert sorted(set(read_table(tmp_path, "topic_health").time)) == [times[0], times[2]]
    assert caplog.text.count(f"skipping damaged file {victim}") == 1
    assert "its footer reads but its pages do not" in caplog.text
    victim.write_bytes(good)  # restored
    assert sorted(set(read_table(tmp_path, "topic_health").time)) == times


def test_schema_evolution_missing_columns_read_as_null(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path, clock=lambda: LATER)
    w.add_snapshot(small_snapshot(T0 + 100))
    w.flush()
    # A file from an "older writer": no failures_before_* columns, no schema_version, int64 partitions.
    old = pa.table({"cluster": ["c1"], "time": [T0], "topic": ["legacy"],
                    "partitions": pa.array([5], pa.int64())})
    pq.write_table(old, tmp_path / "topic_health" / "date=2023-11-15" / "part-1-old.parquet")
    df = read_table(tmp_path, "topic_health")
    assert df.topic.tolist() == ["legacy", "t0"] and df.partitions.tolist() == [5, 1]
    assert df.columns.tolist() == TABLES["topic_health"].names
    legacy = df.iloc[0]
    assert pd.isna(legacy.failures_before_data_loss) and pd.isna(legacy.schema_version)
    assert df.iloc[1].failures_before_data_loss == 0
    # Compaction merges both schemas into the current one without losing a row.
    assert w.compact("topic_health", "2023-11-15")
    assert [p.name.split("-")[0] for p in files_in(tmp_path, "topic_health")] == ["compact"]
    again = read_table(tmp_path, "topic_health")
    assert again.topic.tolist() == ["legacy", "t0"] and pd.isna(again.iloc[0].failures_before_data_loss)


def test_temp_leftovers_ignored_by_readers_and_removed_on_start(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path, clock=lambda: T0)
    w.add_snapshot(small_snapshot(T0))
    w.flush()
    day = tmp_path / "topic_health" / "date=2023-11-15"
    (day / ".tmp-0123abcd.parquet").write_bytes(b"PAR1 half a file")
    (day / "part-1-x.parquet.tmp").write_bytes(b"half")
    pq.write_table(pa.table({"cluster": ["c1"], "time": [T0], "topic": ["ghost"]}), day / ".tmp-whole.parquet")
    assert read_table(tmp_path, "topic_health").topic.tolist() == ["t0"]
    counts = HistoryWriter(tmp_path, clock=lambda: T0).recover()  # the constructor already ran it
    assert counts["temp_files"] == 0
    assert sorted(p.name for p in day.iterdir()) == [p.name for p in files_in(tmp_path, "topic_health")]


def test_recover_logs_the_number_removed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    day = tmp_path / "cluster" / "date=2023-11-15"
    day.mkdir(parents=True)
    for i in range(3):
        (day / f".tmp-{i}.parquet").write_bytes(b"x")
    with caplog.at_level(logging.INFO, logger="collectors.outputs.history"):
        HistoryWriter(tmp_path)
    assert "removed 3 temp files" in caplog.text and not list(day.iterdir())


def test_retention_deletes_old_dates(tmp_path: Path) -> None:
    now = T0 + 40 * DAY
    w = HistoryWriter(tmp_path, retention_days=30, clock=lambda: now)
    for d in (0, 9, 10, 11, 40):
        w.add_snapshot(small_snapshot(T0 + d * DAY))
    w.flush()
    assert w.apply_retention() == 2 * 2  # two days too old, in two tables
    assert available_dates(tmp_path, "cluster") == ["2023-11-25", "2023-11-26", "2023-12-25"]
    assert not [p for p in (tmp_path / "cluster").iterdir() if p.name.startswith(".")]
    assert HistoryWriter(tmp_path, retention_days=None).apply_retention(now + 1000 * DAY) == 0
    # A day whose deletion was interrupted is hidden from readers and removed on start.
    half = tmp_path / "cluster" / ".deleting-date=2023-11-01-abcd1234"
    half.mkdir()
    pq.write_table(pa.table({"cluster": ["c1"], "time": [T0 - 14 * DAY]}), half / "part-1-x.parquet")
    assert len(read_table(tmp_path, "cluster")) == 3
    HistoryWriter(tmp_path, clock=lambda: now)
    assert not half.exists()


def test_maybe_flush_follows_the_interval_and_runs_maintenance(tmp_path: Path) -> None:
    clock = [T0]
    w = HistoryWriter(tmp_path, flush_interval_s=60, retention_days=3, compact_min_files=2, clock=lambda: clock[0])
    w.add_snapshot(small_snapshot(T0 - 5 * DAY))
    w.add_snapshot(small_snapshot(T0))
    assert w.maybe_flush(T0 + 30) and not list(tmp_path.rglob("*.parquet"))  # too early; retention ran
    assert w.maybe_flush(T0 + 61)
    assert available_dates(tmp_path, "cluster") == ["2023-11-10", "2023-11-15"]
    clock[0] = T0 + 2 * DAY
    w.maybe_flush(T0 + 2 * DAY)  # maintenance is due again (hourly): the old day goes
    assert available_dates(tmp_path, "cluster") == ["2023-11-15"]


# ----- compaction


def write_day(w: HistoryWriter, n: int, base: float = T0, topics: int = 2) -> list[float]:
    times = []
    for i in range(n):
        t = base + 60 * i
        w.add_snapshot(small_snapshot(t, topics=topics))
        w.flush()
        times.append(t)
    return times


def test_compaction_merges_a_finished_day(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path, compact_min_files=5, clock=lambda: LATER)
    times = write_day(w, 12)
    assert len(files_in(tmp_path, "topic_health")) == 12
    assert w.maybe_compact() == 2  # topic_health and cluster
    files = files_in(tmp_path, "topic_health")
    assert len(files) == 1 and files[0].name.startswith("compact-")
    df = read_table(tmp_path, "topic_health")
    assert len(df) == 24 and sorted(set(df.time)) == times
    assert df.groupby(["time", "topic"]).size().max() == 1
    replaced = json.loads(pq.read_schema(files[0]).metadata[b"kmon.replaces"])
    assert len(replaced) == 12 and all(n.startswith("part-") for n in replaced)
    assert pq.ParquetFile(files[0]).metadata.num_row_groups == 1
    # More files for the same day later: the next compaction merges the compact file too.
    write_day(w, 5, base=T0 + 3600)
    assert w.maybe_compact() == 2 and len(files_in(tmp_path, "topic_health")) == 1
    assert len(read_table(tmp_path, "topic_health")) == 34


def _same_rows_new_footer(source: Path, target: Path) -> None:
    """`source` written again with the same data and a footer that differs in its metadata only (what a
    deterministic writer run twice produces): one byte of ``created_by`` changed, the length kept."""
    data = bytearray(source.read_bytes())
    at = data.rindex(b"parquet-cpp-arrow version ") + len(b"parquet-cpp-arrow version ")
    data[at] = ord("9") if data[at] != ord("9") else ord("8")
    target.write_bytes(bytes(data))


def test_a_copied_file_is_read_once_and_compacted_away(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A file copied or restored under a new name holds the same rows: readers read it once (before this, a
    restored backup doubled every count of the weekly report), the next compaction supersedes it, and files of
    the same size with other rows (every flush of this day has the same size) are read as ever."""
    w = HistoryWriter(tmp_path, compact_min_files=5, clock=lambda: LATER)
    times = write_day(w, 6)
    expected = read_table(tmp_path, "topic_health")
    files = files_in(tmp_path, "topic_health")
    assert len({f.stat().st_size for f in files}) == 1  # so the rule must compare their bytes, not their sizes
    copy = files[2].with_name("part-9999-copy.v4.parquet")
    shutil.copyfile(files[2], copy)
    rewritten = files[4].with_name("part-9999-rewritten.v4.parquet")
    _same_rows_new_footer(files[4], rewritten)
    assert pq.read_metadata(rewritten).created_by != pq.read_metadata(files[4]).created_by
    with caplog.at_level(logging.WARNING):
        assert live_files(tmp_path, "topic_health") == files
    assert f"{copy} repeats {files[2]} byte for byte" in caplog.text
    assert repeated_files(tmp_path, "topic_health") == {copy: files[2], rewritten: files[4]}
    assert repeated_files(tmp_path, "topic_health", start=T0 + DAY) == {}  # another day: not listed
    pd.testing.assert_frame_equal(read_table(tmp_path, "topic_health"), expected)
    assert w.maybe_compact() == 2  # topic_health and cluster, the repeats not counted as files to merge
    merged = files_in(tmp_path, "topic_health")
    assert len(merged) == 1 and merged[0].name.startswith("compact-")
    replaced = set(json.loads(pq.read_schema(merged[0]).metadata[b"kmon.replaces"]))
    assert {copy.name, rewritten.name} <= replaced and len(replaced) == 8
    df = read_table(tmp_path, "topic_health")
    assert len(df) == len(expected) == 12 and sorted(set(df.time)) == times
    assert df.groupby(["time", "topic"]).size().max() == 1


def test_an_unreadable_file_is_left_out_of_compaction_and_holds_back_no_other_day(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A file emptied, cut short or damaged past its intact footer by hand (the writer never publishes one) used to
    stop every hourly compaction at its day, so no later day of any table was compacted again. Each is now left in
    place outside the merge and named once (an empty file is not even live: `day_files`; a damaged one is found
    when the merge fails, and the merge is redone without it), and every day is compacted."""
    w = HistoryWriter(tmp_path, compact_min_files=5, clock=lambda: LATER)
    for day in range(3):
        write_day(w, 6, base=T0 + day * DAY)
    expected = read_table(tmp_path, "topic_health")
    emptied = files_in(tmp_path, "cluster")[1]  # day 1
    emptied.write_bytes(b"")
    cut = files_in(tmp_path, "cluster")[8]  # day 2
    cut_short(cut)
    damaged = [f for f in files_in(tmp_path, "topic_health") if "2023-11-16" in str(f)][2]  # day 2
    damage_pages(damaged)
    with caplog.at_level(logging.WARNING):
        w.maintain()
        w.maintain()  # the next hour: nothing to do, and no file named again
    assert w.last_maintenance_error is None
    assert caplog.text.count(f"{emptied} is empty (0 bytes)") == 1
    assert caplog.text.count(f"{cut} is not readable Parquet") == 1
    assert caplog.text.count(f"{damaged} is not readable Parquet") == 1
    assert "cannot compact" not in caplog.text
    names = {t: [(f.parent.name, f.name.split("-")[0]) for f in files_in(tmp_path, t)] for t in ("cluster",
                                                                                                "topic_health")}
    assert names["cluster"] == [("date=2023-11-15", "compact"), ("date=2023-11-15", "part"),  # the emptied file
                                ("date=2023-11-16", "compact"), ("date=2023-11-16", "part"),  # the one cut short
                                ("date=2023-11-17", "compact")]
    assert names["topic_health"] == [("date=2023-11-15", "compact"), ("date=2023-11-16", "compact"),
                                     ("date=2023-11-16", "part"),  # the damaged one, as it was
                                     ("date=2023-11-17", "compact")]
    assert damaged.exists()
    # every row but the damaged file's, once: the readers skip it as the compaction did
    lost = pq.read_metadata(damaged).num_rows
    with caplog.at_level(logging.WARNING):
        after = read_table(tmp_path, "topic_health")
    assert lost > 0 and len(after) == len(expected) - lost
    assert after.drop_duplicates().shape == after.shape


def test_a_day_that_fails_to_merge_holds_back_no_other_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """A merge that fails for a reason no single file explains (here the disk full while one day is written) is
    logged and skipped; the other days are compacted, and maintenance records which day failed."""
    w = HistoryWriter(tmp_path, compact_min_files=5, clock=lambda: LATER)
    for day in range(3):
        write_day(w, 6, base=T0 + day * DAY)
    expected = read_table(tmp_path, "topic_health")
    disk_full_on(monkeypatch, "topic_health", "2023-11-16")
    with caplog.at_level(logging.WARNING):
        w.maintain()
    assert w.last_maintenance_error is not None
    assert "1 day not compacted (topic_health/date=2023-11-16)" in w.last_maintenance_error
    assert "cannot compact topic_health/date=2023-11-16: OSError" in caplog.text
    names = [(f.parent.name, f.name.split("-")[0]) for f in files_in(tmp_path, "topic_health")]
    assert names.count(("date=2023-11-16", "part")) == 6  # as they were, nothing deleted
    assert {("date=2023-11-15", "compact"), ("date=2023-11-17", "compact")} <= set(names)
    assert all(name.startswith("compact") for f in files_in(tmp_path, "cluster") for name in [f.name])
    pd.testing.assert_frame_equal(read_table(tmp_path, "topic_health"), expected)
    monkeypatch.undo()
    w.maintain()  # room again: the day is compacted at the next hour
    assert w.last_maintenance_error is None
    assert [f.parent.name for f in files_in(tmp_path, "topic_health")] == [
        "date=2023-11-15", "date=2023-11-16", "date=2023-11-17"]


def test_compaction_orders_group_lag_row_groups_by_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each compacted row group of ``group_lag`` holds its rows by cluster, group, topic and time (the report's pass
    over them keeps a key's rows together in cache); other tables keep poll order; no row is lost or doubled."""
    monkeypatch.setattr(history_maintenance, "COMPACT_ROW_GROUP", 8)  # 6 rows a poll: row groups of 2 polls
    w = HistoryWriter(tmp_path, compact_min_files=2, clock=lambda: LATER)
    times = []
    for i in range(6):
        for cluster in ("c2", "c1"):
            w.add_snapshot(full_snapshot(T0 + 60 * i, cluster=cluster))
        w.flush()
        times.append(T0 + 60 * i)
    polled = read_table(tmp_path, "group_lag")
    assert w.compact("group_lag", "2023-11-15") and w.compact("topic_health", "2023-11-15")
    [f] = files_in(tmp_path, "group_lag")
    groups = [pq.ParquetFile(f).read_row_group(i) for i in range(pq.ParquetFile(f).metadata.num_row_groups)]
    assert [g.num_rows for g in groups] == [12, 12, 12]
    first_poll_order = [(r["cluster"], r["topic"]) for r in pq.read_table(files_in(tmp_path, "topic_health")[0])
                        .slice(0, 4).select(["cluster", "topic"]).to_pylist()]
    assert first_poll_order == [("c2", "orders"), ("c2", "__consumer_offsets"), ("c1", "orders"),
                                ("c1", "__consumer_offsets")]  # topic_health: as polled
    for g in groups:
        keys = [(r["cluster"], r["group_id"], r["topic"], r["time"]) for r in g.to_pylist()]
        assert keys == sorted(keys)
    assert [r["cluster"] for r in groups[0].to_pylist()] == ["c1"] * 6 + ["c2"] * 6  # not the poll order
    compacted = read_table(tmp_path, "group_lag")
    assert len(compacted) == len(polled) == 36 and sorted(set(compacted.time)) == times
    cols = ["cluster", "time", "group_id", "topic", "lag_max", "status"]
    assert (compacted[cols].sort_values(cols[:4]).reset_index(drop=True)
            .equals(polled[cols].sort_values(cols[:4]).reset_index(drop=True)))


def test_compaction_skips_today_and_small_days(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path, compact_min_files=5, clock=lambda: T0 + 3600)
    write_day(w, 6)  # today
    write_day(w, 4, base=T0 - DAY)  # yesterday, below the threshold
    assert w.maybe_compact() == 0
    assert len(files_in(tmp_path, "topic_health")) == 10


class Killed(BaseException):
    """Stands in for SIGKILL: nothing after it runs (BaseException: no handler in the writer catches it)."""


def kill_after(monkeypatch: pytest.MonkeyPatch, deletions: int) -> None:
    real = history_maintenance.unlink_quietly
    done = [0]

    def unlink(path: Path) -> None:
        if done[0] >= deletions:
            raise Killed
        done[0] += 1
        real(path)

    monkeypatch.setattr(history_maintenance, "unlink_quietly", unlink)


@pytest.mark.parametrize("deletions", [0, 3])
def test_kill_between_compaction_rename_and_delete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   deletions: int) -> None:
    w = HistoryWriter(tmp_path, compact_min_files=5, clock=lambda: LATER)
    times = write_day(w, 8)
    expected = read_table(tmp_path, "topic_health")
    kill_after(monkeypatch, deletions)
    with pytest.raises(Killed):
        w.compact("topic_health", "2023-11-15")
    names = [p.name for p in files_in(tmp_path, "topic_health")]
    assert sum(n.startswith("compact-") for n in names) == 1 and len(names) == 1 + 8 - deletions
    # Readers see every row exactly once while the inputs are still there.
    df = read_table(tmp_path, "topic_health")
    assert len(df) == 16 and sorted(set(df.time)) == times
    pd.testing.assert_frame_equal(df.reset_index(drop=True), expected.reset_index(drop=True))
    assert len(live_files(tmp_path, "topic_health")) == 1
    monkeypatch.undo()
    # The next start finishes the compaction.
    HistoryWriter(tmp_path, clock=lambda: LATER)
    assert [p.name.split("-")[0] for p in files_in(tmp_path, "topic_health")] == ["compact"]
    pd.testing.assert_frame_equal(read_table(tmp_path, "topic_health"), df)


def test_kill_during_a_second_compaction_keeps_rows_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = HistoryWriter(tmp_path, compact_min_files=3, clock=lambda: LATER)
    write_day(w, 4)
    kill_after(monkeypatch, 0)
    with pytest.raises(Killed):  # first compaction killed at once: compact file + its 4 inputs
        w.compact("topic_health", "2023-11-15")
    monkeypatch.undo()
    write_day(w, 3, base=T0 + 3600)
    # A second compaction that does not clean up first and dies before deleting anything: the old compact
    # file, its inputs, the new parts and the new compact file all coexist; the new one lists them all.
    monkeypatch.setattr(HistoryWriter, "_delete_superseded", staticmethod(lambda d: 0))
    assert w.compact("topic_health", "2023-11-15")
    monkeypatch.undo()
    assert len(files_in(tmp_path, "topic_health")) == 2 + 4 + 3
    df = read_table(tmp_path, "topic_health")
    assert len(df) == 14 and df.groupby(["time", "topic"]).size().max() == 1
    newest = max(files_in(tmp_path, "topic_health", "compact-*"), key=lambda p: p.name)
    assert len(json.loads(pq.read_schema(newest).metadata[b"kmon.replaces"])) == 1 + 4 + 3
    HistoryWriter(tmp_path, clock=lambda: LATER)  # a restart deletes all that the newest compact file lists
    assert len(files_in(tmp_path, "topic_health")) == 1
    # A third one killed half-way through its deletes (plain parts go first, compact files last).
    write_day(w, 3, base=T0 + 7200)
    kill_after(monkeypatch, 2)
    with pytest.raises(Killed):
        w.compact("topic_health", "2023-11-15")
    monkeypatch.undo()
    assert [p.name.split("-")[0] for p in files_in(tmp_path, "topic_health")] == ["compact", "compact", "part"]
    df = read_table(tmp_path, "topic_health")
    assert len(df) == 20 and df.groupby(["time", "topic"]).size().max() == 1
    HistoryWriter(tmp_path, clock=lambda: LATER)
    assert len(files_in(tmp_path, "topic_health")) == 1 and len(read_table(tmp_path, "topic_health")) == 20


def test_readers_racing_compactions_see_each_row_once(tmp_path: Path) -> None:
    """A reader running while a writer flushes and compacts the same day: no duplicate, no gap, no error."""
    import threading

    w = HistoryWriter(tmp_path, compact_min_files=3, clock=lambda: LATER)
    flushed, started = [0], [0]  # rows surely visible / possibly visible
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            i = 0
            while not stop.is_set():
                w.add_snapshot(small_snapshot(T0 + i, topics=1))
                i += 1
                started[0] = i
                assert w.flush()
                flushed[0] = i
                if i % 3 == 0:
                    w.maybe_compact()
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=writer)
    thread.start()
    reads = 0
    try:
        # at least 1.5 s of reads, and on a slow machine on until a compaction ran under them (at most 30 s)
        soon, deadline = time.monotonic() + 1.5, time.monotonic() + 30
        while not errors and time.monotonic() < deadline and (
                time.monotonic() < soon or reads <= 5 or not list(tmp_path.rglob("compact-*"))):
            before = flushed[0]
            times = read_table(tmp_path, "cluster", columns=["time"]).time.tolist()
            after = started[0]
            assert len(times) == len(set(times)), "a row read twice"
            assert before <= len(times) <= after, (before, len(times), after)
            assert times == [T0 + i for i in range(len(times))], "a gap"
            reads += 1
    finally:
        stop.set()
        thread.join()
    assert not errors and reads > 5 and list(tmp_path.rglob("compact-*"))


# ----- failures


def test_flush_into_a_root_that_is_a_file_keeps_rows(tmp_path: Path) -> None:
    root = tmp_path / "history"
    root.write_text("not a directory")
    w = HistoryWriter(root, clock=lambda: T0)  # must not raise
    assert w.last_error is not None
    w.add_snapshot(small_snapshot(T0))
    assert not w.flush()
    assert "history flush failed" in (w.last_error or "") and w.buffered_rows == 2 and w.dropped_rows == 0
    root.unlink()
    w.add_snapshot(small_snapshot(T0 + 60))
    assert w.flush() and w.last_error is None and w.buffered_rows == 0
    assert read_table(root, "topic_health").time.tolist() == [T0, T0 + 60]
    assert w.flush() and read_table(root, "topic_health").time.tolist() == [T0, T0 + 60]


def test_disk_full_on_rename_keeps_rows_and_leaves_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = HistoryWriter(tmp_path, clock=lambda: T0)
    w.add_snapshot(small_snapshot(T0))

    def full(src: Any, dst: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    assert not w.maybe_flush(T0 + 3600)
    assert "No space left" in (w.last_error or "") and w.buffered_rows == 2 and w.flush_failures == 1
    monkeypatch.undo()
    assert not list(tmp_path.rglob("*.parquet")) and not list(tmp_path.rglob(".tmp-*"))
    assert w.flush() and w.last_error is None
    assert read_table(tmp_path, "topic_health").time.tolist() == [T0]
    assert len(files_in(tmp_path, "topic_health")) == 1


def test_partial_flush_failure_writes_each_row_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = HistoryWriter(tmp_path, clock=lambda: T0)
    w.add_snapshot(small_snapshot(T0))
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if "topic_health" in str(dst):
            raise OSError(errno.EIO, "I/O error")
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    assert not w.flush()
    assert w.buffered_rows == 1  # the cluster row was written, the topic row kept
    monkeypatch.undo()
    w.add_snapshot(small_snapshot(T0 + 60))
    assert w.flush()
    assert read_table(tmp_path, "cluster").time.tolist() == [T0, T0 + 60]
    assert read_table(tmp_path, "topic_health").time.tolist() == [T0, T0 + 60]


def test_buffer_is_bounded_while_flushes_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = HistoryWriter(tmp_path, clock=lambda: T0, max_buffer_rows=6)

    def full(src: Any, dst: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    for i in range(5):  # 2 rows each (cluster + topic_health)
        w.add_snapshot(small_snapshot(T0 + i))
    assert w.buffered_rows <= 6 and w.dropped_rows == 10 - w.buffered_rows and w.last_error
    monkeypatch.undo()
    assert w.flush()
    kept = read_table(tmp_path, "cluster").time.tolist()
    assert kept == [T0 + 2, T0 + 3, T0 + 4]  # the oldest were dropped


def test_the_bound_never_drops_the_rows_of_a_proved_loss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A truncation's ledger row is the only record of it once the checkpoint moved past it (the checkpoint waits
    for it: `HistorySink.unwritten_losses`), so a full disk's bound drops every other row first and never it; a
    retention skip (one each time a group-partition's loss grows) is dropped oldest first like the rest."""
    from collectors.model.records import LossRecord

    w = HistoryWriter(tmp_path, clock=lambda: T0, max_buffer_rows=3)

    def full(src: Any, dst: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    first = small_snapshot(T0)
    first.losses = [LossRecord("c1", T0, "truncation", "t0", 0, 40, "epoch 3 ends at 960")]
    second = small_snapshot(T0 + 1)
    second.losses = [LossRecord("c1", T0 + 1, "retention_skipped", "t0", 0, 7, "log start 1,007")]
    for snap in (first, second, *(small_snapshot(T0 + i) for i in range(2, 6))):
        w.add_snapshot(snap)
    assert w.buffered_never_dropped() and w.dropped_rows > 0 and w.buffered_rows <= 3
    monkeypatch.undo()
    assert w.flush() and not w.buffered_never_dropped()
    assert read_table(tmp_path, "loss_events").kind.tolist() == ["truncation"]
    assert read_table(tmp_path, "cluster").time.tolist() == [T0 + 5]  # 3 rows: the truncation's and the last poll's


def test_buffer_over_the_bound_flushes_early(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path, clock=lambda: T0, max_buffer_rows=5)
    for i in range(3):
        w.add_snapshot(small_snapshot(T0 + i))
    assert w.buffered_rows == 0 and w.dropped_rows == 0  # the third add went over 5 rows and flushed
    assert read_table(tmp_path, "cluster").time.tolist() == [T0, T0 + 1, T0 + 2]


# ----- latest state


def test_latest_state_round_trip_and_atomic_replace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collectors.model.records import snapshot_to_dict

    state = tmp_path / "state"
    path = latest_state.write_latest(state, snapshot_to_dict(full_snapshot()), now=T0 + 1)
    assert path == state / "c1.json"
    got = latest_state.read_latest(state)
    assert list(got) == ["c1"] and got["c1"]["written_at"] == T0 + 1
    assert got["c1"]["partitions"][0]["lso_gap"] == 50 and got["c1"]["topics"][1]["retention_ms"] is None
    latest_state.write_latest(state, full_snapshot(T0 + 30), now=T0 + 31)  # a ClusterSnapshot works too
    assert latest_state.read_latest(state)["c1"]["time"] == T0 + 30

    def fail(src: Any, dst: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(latest_state.os, "replace", fail)
    with pytest.raises(OSError):
        latest_state.write_latest(state, snapshot_to_dict(full_snapshot(T0 + 60)))
    monkeypatch.undo()
    assert latest_state.read_latest(state)["c1"]["time"] == T0 + 30  # the previous file is intact
    assert [p.name for p in state.iterdir()] == ["c1.json"]  # and no temp file is left


def test_latest_state_skips_corrupt_and_foreign_files(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    latest_state.write_latest(tmp_path, {"cluster": "ok", "time": T0})
    (tmp_path / "broken.json").write_text('{"cluster": "broken", "time": 17')  # cut short
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "lag-windows.json").write_text('{"windows": []}')  # another component's state
    (tmp_path / ".ok.json.123.tmp").write_text("{")
    with caplog.at_level(logging.WARNING, logger="collectors.outputs.latest_state"):
        got = latest_state.read_latest(tmp_path)
    assert list(got) == ["ok"]
    assert "broken.json" in caplog.text and "binary.json" in caplog.text and "lag-windows" not in caplog.text
    assert latest_state.read_latest(tmp_path / "missing") == {}


@pytest.mark.parametrize("name", ["a/b", "../../etc/passwd", "..", ".hidden", "prod 集群 ünï", "x" * 300,
                                  "é" * 100, "a~b", "C:\\x", "\x00"])
def test_latest_state_cluster_names_stay_inside_the_directory(tmp_path: Path, name: str) -> None:
    state = tmp_path / "state"
    path = latest_state.write_latest(state, {"cluster": name, "time": T0})
    assert path.parent == state and path.resolve().parent == state.resolve()
    assert not path.name.startswith(".") and len(path.name.encode()) <= 255
    assert [p.name for p in tmp_path.iterdir()] == ["state"] and list(state.iterdir()) == [path]
    assert latest_state.read_latest(state)[name]["cluster"] == name


def test_latest_state_names_do_not_collide(tmp_path: Path) -> None:
    names = ["a/b", "a%2Fb", "a_b", "A/B", ".x", "%2Ex", "x" * 300, "x" * 301, "é" * 100, "é" * 101]
    assert len({paths.safe_name(n) for n in names}) == len(names)
    for n in names:
        latest_state.write_latest(tmp_path, {"cluster": n, "time": T0})
    assert sorted(latest_state.read_latest(tmp_path)) == sorted(names)


def test_files_of_one_size_are_each_read_once_to_find_repeats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A day of a minute's flushes is 1,440 files a table, and a table of a few rows a poll writes them all of one
    size. Finding the repeats among them compared each file with every one kept before it (1,440 files: ~1 M
    comparisons, minutes per listing, and the comparisons' cache gave up past 4,096 pairs); each file is now read
    once for a key, and a listing again reads none."""
    import collectors.outputs.history.files as files

    w = HistoryWriter(tmp_path, clock=lambda: LATER)
    write_day(w, 40)
    day = files_in(tmp_path, "topic_health")[0].parent
    assert len({f.stat().st_size for f in day.iterdir()}) == 1  # one size: every file must be looked at
    shutil.copyfile(sorted(day.iterdir())[7], day / "part-9999-copy.v4.parquet")
    read: list[Path] = []
    real = files._rows_key
    monkeypatch.setattr(files, "_rows_key", lambda p, size: read.append(p) or real(p, size))
    assert len(files.day_files(day).live) == 40 and len(read) == 41
    assert files.day_files(day).repeats == {"part-9999-copy.v4.parquet": sorted(f.name for f in day.iterdir())[7]}
    assert len(read) == 41  # the second listing: every key from the cache


def test_the_file_caches_drop_the_least_recently_used_not_everything() -> None:
    """Past its size a cache of what files hold dropped every entry, so a reader over more files than that (a week
    of uncompacted days) read each again at every listing; now only the least recently used go."""
    from collectors.outputs.history.files import _Recent

    cache = _Recent(3)
    for k in ("a", "b", "c"):
        cache.put((k,), k.upper())
    assert cache.get(("a",)) == "A"  # used: now the most recent
    cache.put(("d",), "D")
    assert list(cache) == [("c",), ("a",), ("d",)] and cache.get(("b",)) is None
    assert cache.get(("z",), "none") == "none"


def test_a_cache_weighed_in_bytes_keeps_within_its_size() -> None:
    """The dashboard keeps what files held (`dashboard.data._pieces`), from a few rows to a compacted day: its cache
    counts bytes, not entries, and an entry heavier than the whole is not kept (it would push out every other)."""
    from collectors.outputs.history.files import _Recent

    cache = _Recent(10, weight=len)
    cache.put(("a",), "aaaa")
    cache.put(("b",), "bbbb")
    cache.get(("a",))
    cache.put(("c",), "ccc")  # 11 > 10: the least recently used goes
    assert list(cache) == [("a",), ("c",)] and cache.held == 7
    cache.put(("a",), "a")  # replaced: its old weight is given back
    assert list(cache) == [("c",), ("a",)] and cache.held == 4
    cache.put(("d",), "d" * 11)
    assert list(cache) == [("c",), ("a",)] and cache.held == 4
    cache.clear()
    assert not cache and cache.held == 0


def test_background_maintenance_does_not_hold_up_the_poll_and_close_waits_for_it(tmp_path: Path) -> None:
    """Compacting yesterday takes seconds to minutes on a big fleet; the collector's writer runs it on its own
    thread, so the poll that starts it goes on (and /metrics with it). Closing waits for it: the next holder of
    the root must not compact the same day beside it."""
    import threading

    w = HistoryWriter(tmp_path, clock=lambda: LATER, background_maintenance=True)
    started, release = threading.Event(), threading.Event()
    done: list[str] = []

    def slow_maintain(now: float | None = None) -> None:
        started.set()
        release.wait(30)
        done.append("maintained")

    w.maintain = slow_maintain  # type: ignore[method-assign]
    assert w.maybe_flush() and started.wait(30)
    assert w.maintaining and done == []  # maybe_flush returned while the maintenance runs
    assert w.maybe_flush() and done == []  # and starts no second one meanwhile
    closing = threading.Thread(target=w.close)
    closing.start()
    assert not w.wait_maintenance(0.2) and closing.is_alive()  # close waits for the maintenance
    release.set()
    closing.join(30)
    assert not closing.is_alive() and done == ["maintained"] and not w.maintaining
