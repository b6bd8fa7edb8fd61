"""The dashboard's pure view functions on hand-made latest-state dicts and history frames (no Streamlit run)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dashboard import data
from dashboard.views import alerts as av
from dashboard.views import common
from dashboard.views import consensus as csv
from dashboard.views import consumers as cv
from dashboard.views import overview as ov
from dashboard.views import replication as rv
from dashboard.views import reports as rpv
from dashboard.views import transactions as tv
from spark_analytics import formatting, layout

NOW = 1_800_000_000.0


def part(topic: str, p: int, leader: int, replicas: list[int], isr: list[int], min_isr: int = 2,
         **extra: Any) -> dict[str, Any]:
    return {"cluster": "c1", "topic": topic, "partition": p, "leader": leader, "leader_epoch": 1,
            "replicas": replicas, "isr": isr, "offline_replicas": [], "min_insync_replicas": min_isr,
            "high_watermark": extra.get("hw", 100), "last_stable_offset": extra.get("lso", 100),
            "zk_leader": extra.get("zk_leader"), "zk_isr": extra.get("zk_isr")}


def alert(rule: str, subject: str, severity: str, first_seen: float, **extra: Any) -> dict[str, Any]:
    return {"rule": rule, "severity": severity, "cluster": "c1", "subject": subject, "summary": f"{rule} {subject}",
            "first_seen": first_seen, "last_seen": NOW, "value": None, "resolved_at": extra.get("resolved_at")}


def snapshot(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "cluster": "c1", "time": NOW, "written_at": NOW, "mode": "zookeeper", "controller_id": 1, "reachable": True,
        "stale": False, "stale_sections": [], "errors": [],
        "brokers": [{"broker_id": i, "host": f"b{i}", "port": 9092, "rack": None, "alive": i != 3,
                     "in_zookeeper": i != 3, "is_controller": i == 1, "reachable": True if i != 3 else None}
                    for i in (1, 2, 3)],
        "topics": [], "partitions": [], "groups": [], "group_partitions": [], "transactions": [], "producers": [],
        "zookeeper": [], "kraft_voters": [], "partition_changes": [], "alerts": []}
    doc.update(overrides)
    return doc


# ----- replication


@pytest.mark.parametrize(("leader", "replicas", "isr", "min_isr", "state"), [
    (1, [1, 2, 3], [1, 2, 3], 2, "in sync"),
    (1, [1, 2, 3], [1, 2], 2, "under-replicated"),  # at min ISR, still under-replicated
    (1, [1, 2, 3], [1], 2, "under min ISR"),
    (-1, [1, 2, 3], [1], 2, "offline"),
    (-1, [2], [2], 1, "offline"),  # RF 1 whose only broker died: Kafka keeps the last ISR
    (1, [1], [1], 1, "in sync"),
    (1, [1, 2], [1, 2], 3, "under min ISR"),  # min.insync.replicas > RF: writes always fail
])
def test_partition_state_classification(leader: int, replicas: list[int], isr: list[int], min_isr: int,
                                        state: str) -> None:
    assert rv.partition_state(leader, replicas, isr, min_isr) == state


def heatmap_doc() -> dict[str, Any]:
    return snapshot(partitions=[
        part("orders", 0, 1, [1, 2, 3], [1, 2, 3]), part("orders", 1, 2, [2, 3, 1], [2, 1]),
        part("orders", 2, 1, [3, 1, 2], [1]), part("single", 0, 1, [1], [1], 1), part("single", 1, -1, [3], [3], 1)])


def test_heatmap_cells_carry_state_codes_and_isr_text() -> None:
    parts = rv.partitions_frame(heatmap_doc())
    fig, shown, total = rv.isr_heatmap(parts)
    hm = fig.data[0]
    assert (shown, total) == (2, 2)
    assert list(hm.y) == ["single", "orders"]  # the topic with an offline partition first
    z = np.asarray(hm.z)
    code = rv.STATE_CODE
    assert z[1].tolist() == [code["in sync"], code["under-replicated"], code["under min ISR"]]
    assert z[0, 0] == code["in sync"] and z[0, 1] == code["offline"] and np.isnan(z[0, 2])  # single has 2 partitions
    assert hm.text[1][1] == "2/3" and hm.text[0][1] == "1/1"
    assert list(hm.colorbar.ticktext) == list(rv.STATES)  # the colour bar is the legend
    assert "offline" in hm.customdata[0][1]


def test_heatmap_palette_is_okabe_ito_and_distinct() -> None:
    colours = [rv.STATE_COLORS[s] for s in rv.STATES]
    assert len(set(colours)) == 4
    assert set(colours) <= set(common.OKABE_ITO.values())


def test_state_counts_and_problem_partitions_worst_first() -> None:
    parts = rv.partitions_frame(heatmap_doc())
    counts = rv.state_counts(parts)
    assert counts == {"in sync": 2, "under-replicated": 1, "under min ISR": 1, "offline": 1, "at min ISR": 2}
    problems = rv.problem_partitions(parts)
    assert list(problems["state"])[:3] == ["offline", "under min ISR", "under-replicated (at min ISR)"]


def test_heatmap_caps_topics_worst_first() -> None:
    parts = [part(f"t{i:03d}", p, 1, [1, 2, 3], [1, 2, 3]) for i in range(100) for p in range(3)]
    parts.append(part("t099", 3, -1, [1, 2, 3], []))
    fig, shown, total = rv.isr_heatmap(rv.partitions_frame(snapshot(partitions=parts)), max_topics=10)
    assert (shown, total) == (10, 100) and fig.data[0].y[0] == "t099"


def test_brokers_frame_counts_leaders_and_out_of_isr() -> None:
    doc = heatmap_doc()
    doc["brokers"][1]["metadata_behind_s"] = 45.0  # broker 2's answers proved its metadata 45 s behind
    changes = pd.DataFrame({"time": [NOW - 10], "topic": ["orders"], "partition": [1], "kind": ["isr_shrink"],
                            "leader_before": [2], "leader_after": [2], "isr_before": [[2, 3, 1]],
                            "isr_after": [[2, 1]]})
    b = rv.brokers_frame(doc, rv.partitions_frame(doc), changes, "UTC").set_index("broker")
    assert b.loc[3, "status"] == "DOWN"
    assert b.loc[3, "out of ISR now"] == 2 and "orders-1" in b.loc[3, "partitions out of ISR"]
    assert b.loc[1, "leaders"] == 3 and b.loc[1, "controller"]
    assert b.loc[3, "ISR shrinks (range)"] == 1
    assert b.loc[2, "metadata behind (s, at least)"] == 45.0 and pd.isna(b.loc[1, "metadata behind (s, at least)"])


def test_durability_posture_and_config_risks() -> None:
    doc = snapshot(topics=[
        {"topic": "safe", "internal": False, "partitions": 3, "replication_factor": 3, "min_insync_replicas": 2,
         "unclean_leader_election": False, "retention_ms": 604800000, "cleanup_policy": "delete",
         "failures_before_write_stop": 1, "failures_before_data_loss": 2},
        {"topic": "risky", "internal": False, "partitions": 1, "replication_factor": 3, "min_insync_replicas": 3,
         "unclean_leader_election": True, "retention_ms": None, "cleanup_policy": "delete",
         "failures_before_write_stop": 0, "failures_before_data_loss": 2}],
        alerts=[alert("unsafe_durability", "risky", "warning", NOW - 60)])
    posture = rv.durability_frame(doc)
    assert list(posture["topic"]) == ["risky", "safe"]
    assert "stops acks=all writes" in posture.loc[0, "risk"] and "unclean" in posture.loc[0, "risk"]
    assert posture.loc[0, "retention"] == "infinite" and posture.loc[1, "retention"] == "7d 00h"
    assert list(rv.config_risks(doc)["topic"]) == ["risky"]


# ----- freshness


def test_fresh_snapshot_is_ok() -> None:
    f = common.freshness(snapshot(time=NOW - 5, written_at=NOW - 4), NOW, 90)
    assert f.ok and f.level == "ok" and f.age_s == pytest.approx(4)


def test_old_written_at_is_stale_and_says_since_when() -> None:
    f = common.freshness(snapshot(time=NOW - 3600, written_at=NOW - 3600), NOW, 90, "UTC")
    assert f.level == "stale" and f.since == NOW - 3600
    assert "1h 00m" in f.message and common.fmt_ts(NOW - 3600, "UTC") in f.message


def test_snapshot_already_old_when_written_is_stale() -> None:
    f = common.freshness(snapshot(time=NOW - 1000, written_at=NOW - 2), NOW, 90)
    assert f.level == "stale" and "already" in f.message


def test_collector_clock_ahead_is_not_stale() -> None:
    # the demo's collector runs on the sandbox's faster clock: snapshot times are in the future
    f = common.freshness(snapshot(time=NOW + 600, written_at=NOW - 3), NOW, 90)
    assert f.ok


def test_unreachable_cluster_since_alert_opened() -> None:
    doc = snapshot(reachable=False, errors=["no broker answered"],
                   alerts=[alert("cluster_unreachable", "c1", "critical", NOW - 300)])
    f = common.freshness(doc, NOW, 90, "UTC")
    assert f.level == "unreachable" and f.since == NOW - 300
    assert "UNREACHABLE" in f.message and "no broker answered" in f.message


def test_stale_sections_are_partial() -> None:
    doc = snapshot(stale=True, stale_sections=["offsets", "groups"],
                   alerts=[alert("data_stale", "c1", "warning", NOW - 50)])
    f = common.freshness(doc, NOW, 90)
    assert f.level == "partial" and f.since == NOW - 50 and "offsets, groups" in f.message


def test_poll_interval_inferred_from_history_times() -> None:
    assert common.infer_poll_interval([NOW + 30 * i for i in range(10)]) == 30
    assert common.infer_poll_interval([NOW]) == 30.0  # default
    assert common.infer_poll_interval([NOW, NOW + 10, NOW + 20, NOW + 300], default=5) == 10


# ----- alerts


def test_open_alerts_sorted_by_severity_then_longest_open() -> None:
    doc = snapshot(alerts=[
        alert("at_min_isr", "orders-0", "warning", NOW - 1000),
        alert("broker_down", "broker-3", "critical", NOW - 60),
        alert("consumer_lag_status", "billing", "critical", NOW - 600),
        alert("zk_leader_election", "c1", "info", NOW - 5000),
        alert("under_replicated", "orders-0", "warning", NOW - 99, resolved_at=NOW - 1)])
    df = av.open_alerts_frame({"c1": doc}, "Europe/Berlin")
    assert list(df["rule"]) == ["consumer_lag_status", "broker_down", "at_min_isr", "zk_leader_election"]
    assert list(df["open_for"]) == ["10m 00s", "1m 00s", "16m 40s", "1h 23m"]
    assert str(df["opened"].dt.tz) == "Europe/Berlin"
    assert df.loc[0, "opened_utc"].endswith("UTC")
    assert df.loc[0, "link"] == "./consumers?cluster=c1&group=billing"
    assert av.alert_counts({"c1": doc}) == {"critical": 2, "warning": 1, "info": 1}


def test_alert_age_uses_the_collector_clock() -> None:
    doc = snapshot(time=NOW + 600, alerts=[alert("broker_down", "broker-3", "critical", NOW + 540)])
    assert av.open_alerts_frame({"c1": doc})["open_for_s"].iloc[0] == pytest.approx(60)


@pytest.mark.parametrize(("rule", "subject", "page", "params"), [
    ("under_min_isr", "my-topic-12", "replication", {"topic": "my-topic"}),
    ("unsafe_durability", "my-topic", "replication", {"topic": "my-topic"}),
    ("broker_down", "broker-3", "replication", {"broker": "3"}),
    ("retention_risk", "billing", "consumers", {"group": "billing"}),
    ("stuck_transaction", "tx-1", "transactions", {"txn": "tx-1"}),
    ("hanging_transaction", "orders-1", "transactions", {"topic": "orders"}),
    ("zk_follower_behind", "zk1:2181", "consensus", {}),
    ("zk_isr_mismatch", "orders-2", "consensus", {"topic": "orders"}),
    ("cluster_unreachable", "c1", "history", {}),
])
def test_alert_targets(rule: str, subject: str, page: str, params: dict[str, str]) -> None:
    assert av.alert_target(rule, subject) == (page, params)


def test_no_open_alerts_gives_an_empty_frame_with_columns() -> None:
    df = av.open_alerts_frame({"c1": snapshot()})
    assert df.empty and {"severity", "rule", "subject", "open_for"} <= set(df.columns)


def test_alert_intervals_pair_open_and_resolve() -> None:
    ev = pd.DataFrame([
        {"time": NOW - 100, "cluster": "c1", "event": "open", "rule": "broker_down", "severity": "critical",
         "subject": "broker-3", "summary": "down", "first_seen": NOW - 100, "resolved_at": None},
        {"time": NOW - 40, "cluster": "c1", "event": "resolve", "rule": "broker_down", "severity": "critical",
         "subject": "broker-3", "summary": "down", "first_seen": NOW - 100, "resolved_at": NOW - 40},
        {"time": NOW - 30, "cluster": "c1", "event": "open", "rule": "broker_down", "severity": "critical",
         "subject": "broker-3", "summary": "down again", "first_seen": NOW - 30, "resolved_at": None},
        {"time": NOW - 10, "cluster": "c1", "event": "restate", "rule": "broker_down", "severity": "critical",
         "subject": "broker-3", "summary": "down again", "first_seen": NOW - 30, "resolved_at": None}])
    iv = av.alert_intervals(ev, {"c1": NOW})  # a daily restate is part of its occurrence, not one of its own
    assert iv[["start", "end", "open"]].values.tolist() == [[NOW - 100, NOW - 40, False], [NOW - 30, NOW, True]]
    fig = av.alert_timeline_figure(iv, "UTC")
    assert {t.name for t in fig.data} == {"critical", "critical (open)"}
    table = av.intervals_display(iv, "UTC")
    assert table.loc[0, "duration"] == "30s (open)" and pd.isna(table.loc[0, "resolved"])


def test_alert_intervals_end_a_lost_alert_where_it_was_last_seen() -> None:
    """An alert left open by a collector and not carried on by the next one ends at its ``lost`` event (the last
    poll that saw it open): before, the timeline drew it open up to now and the table said "(open)"."""
    base = {"cluster": "c1", "rule": "broker_down", "severity": "critical", "subject": "broker-3", "summary": "down",
            "first_seen": NOW - 100, "resolved_at": None}
    ev = pd.DataFrame([{**base, "time": NOW - 100, "event": "open"}, {**base, "time": NOW - 60, "event": "lost"}])
    iv = av.alert_intervals(ev, {"c1": NOW})
    assert iv[["start", "end", "open", "lost"]].values.tolist() == [[NOW - 100, NOW - 60, False, True]]
    table = av.intervals_display(iv, "UTC")
    assert table.loc[0, "duration"] == "40s (lost: end unseen)" and pd.isna(table.loc[0, "resolved"])


def test_alert_timeline_groups_partitions_by_topic() -> None:
    rows = [{"cluster": "c1", "rule": "under_replicated", "subject": f"orders-{p}", "severity": "warning",
             "start": NOW - 50, "end": NOW, "open": True, "summary": ""} for p in range(3)]
    fig = av.alert_timeline_figure(pd.DataFrame(rows), "UTC", by_topic=True)
    assert set(fig.data[0].y) == {"under_replicated: orders (3 partitions)"}
    fig = av.alert_timeline_figure(pd.DataFrame(rows), "UTC", by_topic=False)
    assert len(set(fig.data[0].y)) == 3


# ----- formatting


def test_zxid_as_epoch_counter_and_hex() -> None:
    zxid = (2 << 32) | 26
    assert common.zxid_parts(zxid) == (2, 26)
    assert common.fmt_zxid(2, 26) == "2:26"
    assert common.fmt_zxid_hex(2, 26) == "0x20000001a"
    assert common.fmt_zxid(None, 5) == "—" and common.zxid_parts(None) == (None, None)


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (45.4, "45s"), (192, "3m 12s"), (7500, "2h 05m"),
                                               (273600, "3d 04h"), (-5, "0s"), (None, "—"), (float("nan"), "—")])
def test_fmt_duration(seconds: float | None, text: str) -> None:
    assert common.fmt_duration(seconds) == text


def test_timestamps_in_viewer_zone_with_utc() -> None:
    t = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
    assert common.fmt_ts(t, "Europe/Berlin") == "2023-11-14 23:13:20 CET"
    assert common.fmt_utc(t) == "2023-11-14 22:13:20 UTC"
    assert common.fmt_ts(t, "Not/AZone").endswith("UTC")
    axis = common.epoch_to_axis([t], "Europe/Berlin")
    assert axis.iloc[0] == pd.Timestamp("2023-11-14 23:13:20")


def test_an_axis_time_takes_no_nanoseconds_to_plotly() -> None:
    """A float epoch's nanoseconds made plotly warn "Discarding nonzero nanoseconds" on the Consensus page's election
    line at every rerun; the axis keeps microseconds, all a browser shows."""
    import warnings

    import plotly.graph_objects as go

    axis = common.epoch_to_axis([1_764_400_000.123456789], None)
    assert axis.iloc[0].nanosecond == 0 and axis.iloc[0].microsecond == 123457
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        go.Figure().add_vline(x=axis.iloc[0]).to_json()


# ----- overview


def test_health_line_summarises_a_cluster() -> None:
    doc = heatmap_doc()
    doc["topics"] = [{"topic": "orders", "under_replicated": 2, "under_min_isr": 1, "offline": 0},
                     {"topic": "single", "under_replicated": 0, "under_min_isr": 0, "offline": 1}]
    doc["groups"] = [{"group_id": "a", "status": "OK", "lag_sum": 5}, {"group_id": "billing", "status": "ERR",
                                                                         "lag_sum": 900}]
    doc["producers"] = [{"topic": "orders", "partition": 1, "hanging": True}]
    doc["alerts"] = [alert("broker_down", "broker-3", "critical", NOW - 9),
                     alert("stuck_transaction", "tx", "critical", NOW - 9)]
    doc["zookeeper"] = [{"server": f"z{i}", "serving": True, "mode": "leader" if i == 1 else "follower",
                         "zxid_epoch": 4} for i in (1, 2, 3)]
    h = ov.health_line(doc, common.freshness(doc, NOW, 90))
    assert h["brokers up"] == "2/3" and h["verdict"] == "CRITICAL" and h["controller"] == "1"
    assert (h["offline"], h["under min ISR"], h["under-replicated"]) == (1, 1, 2)
    assert h["worst group"] == "ERR billing" and h["groups ERR"] == 1
    assert (h["stuck txns"], h["hanging txns"]) == (1, 1)
    doc["groups"] = [{"group_id": "a", "status": "OK", "lag_sum": 5, "activity": "active"},
                     {"group_id": "old-etl", "status": "INACTIVE", "lag_sum": 24_000, "activity": "inactive"}]
    assert ov.health_line(doc, common.freshness(doc, NOW, 90))["worst group"] == "all OK (1), 1 nobody runs"
    assert h["quorum"] == "ZK 3/3 serving, leader z1 (epoch 4)"
    assert h["data"].startswith("fresh")


def test_quorum_states() -> None:
    lost = snapshot(zookeeper=[{"server": "z1", "serving": True, "mode": "leader"},
                               {"server": "z2", "serving": False}, {"server": "z3", "serving": False}])
    assert ov.quorum_state(lost).endswith("QUORUM LOST")
    kraft = snapshot(zookeeper=[], kraft_voters=[{"node_id": 1, "role": "leader", "leader_id": 1,
                                                   "leader_epoch": 3}])
    assert ov.quorum_state(kraft) == "KRaft leader 1 (epoch 3), 1 voter"  # the one-voter quorum, fragile
    assert ov.quorum_state(snapshot()) == "—"


def test_sparklines_empty_history_is_explained() -> None:
    fig = ov.sparklines_figure(pd.DataFrame(), "UTC")
    assert "No history yet" in fig.layout.annotations[0].text
    h = pd.DataFrame({"time": [NOW, NOW + 30], "under_replicated": [0, 3], "under_min_isr": [0, 1], "offline": [0, 0],
                      "alerts_open": [0, 2]})
    fig = ov.sparklines_figure(h, "UTC")
    assert [t.name for t in fig.data] == ["under-replicated", "under min ISR", "offline partitions", "open alerts"]
    assert fig.data[0].customdata[1][0].endswith("UTC")


# ----- consumers


def consumer_doc() -> dict[str, Any]:
    return snapshot(groups=[
        {"group_id": "ok-group", "state": "Stable", "members": 2, "status": "OK", "worst_partition_status": "OK",
         "lag_sum": 3, "lag_max": 2, "lag_seconds_max": 1.0, "partitions": 2, "topics": ["t"],
         "last_commit_time": NOW - 1},
        {"group_id": "billing", "state": "Stable", "members": 2, "status": "ERR", "worst_partition_status": "STALL",
         "lag_sum": 900, "lag_max": 600, "lag_seconds_max": 300.0, "partitions": 2, "topics": ["orders"],
         "last_commit_time": NOW - 300},
        {"group_id": "no-commits", "state": "Empty", "members": 0, "status": "OK", "worst_partition_status": "OK",
         "lag_sum": None, "lag_max": None, "lag_seconds_max": None, "partitions": 0, "topics": [],
         "last_commit_time": None}],
        group_partitions=[
            {"group_id": "billing", "topic": "orders", "partition": 0, "committed_offset": 10, "log_start_offset": 0,
             "high_watermark": 610, "last_stable_offset": 610, "lag": 600, "lag_seconds": 300.0, "status": "STALL",
             "last_commit_time": NOW - 300, "below_log_start": False, "seconds_to_retention": 3600.0},
            {"group_id": "billing", "topic": "orders", "partition": 1, "committed_offset": 5, "log_start_offset": 50,
             "high_watermark": 305, "last_stable_offset": 305, "lag": 300, "lag_seconds": 200.0, "status": "STALL",
             "last_commit_time": NOW - 300, "below_log_start": True, "seconds_to_retention": 0.0}])


def test_groups_worst_first_with_lag_in_seconds_and_retention() -> None:
    g = cv.groups_frame(consumer_doc(), "UTC")
    assert list(g["group"]) == ["billing", "ok-group", "no-commits"]
    row = g.iloc[0]
    assert row["lag (messages)"] == 900 and row["lag"] == "5m 00s" and row["time to data loss"] == "DATA LOST"
    assert pd.isna(g.iloc[2]["lag (messages)"])  # no commit: no lag figure, not 0 or -1


def test_group_partitions_drill_down_and_retention_risk() -> None:
    p = cv.group_partitions_frame(consumer_doc(), "billing", "UTC")
    assert list(p["status"]) == ["STALL", "STALL"]
    assert p.loc[0, "time to data loss"] == "1h 00m" and p.loc[1, "time to data loss"].startswith("DATA LOST")
    assert p.loc[0, "last commit"] == pd.Timestamp(NOW - 300, unit="s", tz="UTC")
    r = cv.retention_risk_frame(consumer_doc())
    assert list(r["partition"]) == [1, 0] and r.loc[0, "time to data loss"] == "DATA LOST"
    assert cv.group_partitions_frame(consumer_doc(), "ok-group", "UTC").empty


def test_groups_nobody_runs_come_last_and_abandoned_ones_only_when_asked() -> None:
    doc = consumer_doc()
    doc["groups"] += [
        {"group_id": "old-etl", "state": "Empty", "members": 0, "status": "INACTIVE", "activity": "inactive",
         "lag_sum": 24_000, "partitions": 1, "topics": ["orders"]},
        {"group_id": "gone", "state": "Empty", "members": 0, "status": "ABANDONED", "activity": "abandoned",
         "lag_sum": 99_000, "partitions": 1, "topics": ["orders"]}]
    billing = next(g for g in doc["groups"] if g["group_id"] == "billing")
    billing["team"], billing["policy"] = "payments", "policies[0]"
    g = cv.groups_frame(doc, "UTC")
    assert list(g["group"]) == ["billing", "ok-group", "no-commits", "old-etl"]  # INACTIVE last, ABANDONED hidden
    assert (g.iloc[0]["team"], g.iloc[0]["policy"], g.iloc[1]["policy"]) == ("payments", "policies[0]", "thresholds")
    assert cv.hidden_groups(doc) == 1
    assert list(cv.groups_frame(doc, "UTC", show_abandoned=True)["group"])[-1] == "gone"
    assert list(cv.groups_frame(doc, "UTC", groups=["gone"])["group"]) == ["gone"]  # picked by name: shown


def test_drill_down_names_each_partitions_owner_and_why_its_status() -> None:
    doc = consumer_doc()
    doc["group_partitions"][0].update(owner_client_id="billing-consumer-0", owner_host="/10.0.0.7",
                                      owner_member_id="m-0", status_reason="commit unchanged for 300s (> 60s)")
    p = cv.group_partitions_frame(doc, "billing", "UTC")
    assert (p.loc[0, "owner"], p.loc[0, "owner host"]) == ("billing-consumer-0", "/10.0.0.7")
    assert p.loc[0, "why this status"].startswith("commit unchanged")
    assert p.loc[1, "owner"] == "— (unassigned)"


def test_lag_figure_top_series_and_empty_state() -> None:
    h = pd.DataFrame({"time": [NOW, NOW + 30, NOW, NOW + 30], "group_id": ["a", "a", "b", "b"],
                      "topic": ["t", "t", "u", "u"], "lag_sum": [1, 2, 100, 200]})
    fig = cv.lag_figure(h, "UTC", "lag_sum", top_n=1)
    assert [t.name for t in fig.data] == ["b / u"] and list(fig.data[0].y) == [100, 200]
    assert "No lag history yet" in cv.lag_figure(pd.DataFrame(), "UTC").layout.annotations[0].text


# ----- transactions


def txn_doc() -> dict[str, Any]:
    return snapshot(
        transactions=[
            {"transactional_id": "slow", "coordinator": 1, "state": "Ongoing", "producer_id": 7, "producer_epoch": 2,
             "timeout_ms": 60000, "start_time": NOW - 30, "age_seconds": 30.0, "partitions": ["orders-0"]},
            {"transactional_id": "stuck", "coordinator": 1, "state": "Ongoing", "producer_id": 8,
             "producer_epoch": 1, "timeout_ms": 10000, "start_time": NOW - 90, "age_seconds": 90.0,
             "partitions": ["orders-1"]},
            {"transactional_id": "done", "coordinator": 2, "state": "CompleteCommit", "producer_id": 9,
             "producer_epoch": 0, "timeout_ms": 60000, "start_time": None, "age_seconds": None, "partitions": []}],
        producers=[{"topic": "orders", "partition": 2, "producer_id": 99, "producer_epoch": 0,
                    "txn_start_offset": 40, "last_timestamp": NOW - 100, "transactional_id": None, "hanging": True}],
        partitions=[part("orders", 2, 1, [1], [1], 1, hw=500, lso=40), part("orders", 0, 1, [1], [1], 1)],
        alerts=[alert("stuck_transaction", "stuck", "critical", NOW - 10)])


def test_open_transactions_against_timeout_stuck_first() -> None:
    df = tv.transactions_frame(txn_doc())
    assert list(df["transactional id"]) == ["stuck", "slow"]
    assert list(df["flag"]) == ["STUCK", "open"]
    assert df.loc[0, "age / timeout"] == pytest.approx(9.0) and df.loc[1, "age / timeout"] == pytest.approx(0.5)
    assert len(tv.transactions_frame(txn_doc(), open_only=False)) == 3
    assert list(tv.transactions_frame(txn_doc(), txn="slow")["transactional id"]) == ["slow"]


def test_hanging_and_lso_gap() -> None:
    h = tv.hanging_frame(txn_doc())
    assert h[["topic", "partition", "producer id"]].values.tolist() == [["orders", 2, 99]]
    gaps = tv.lso_gap_frame(txn_doc())
    assert gaps[["partition", "LSO gap (messages)"]].values.tolist() == [["orders-2", 460]]
    assert "HANGING" in gaps.loc[0, "held by"]


def test_no_transactions_empty_states() -> None:
    empty = snapshot()
    assert tv.transactions_frame(empty).empty and tv.hanging_frame(empty).empty and tv.lso_gap_frame(empty).empty
    assert "No transactions seen" in tv.producer_epoch_figure(pd.DataFrame(), "UTC").layout.annotations[0].text


def test_producer_epoch_changes() -> None:
    h = pd.DataFrame({"time": [NOW, NOW + 5, NOW + 10, NOW + 15], "transactional_id": ["tx"] * 4,
                      "producer_epoch": [0, 0, 1, 3]})
    ch = tv.epoch_changes(h)  # a history without producer ids or V2 columns: as before them
    assert ch[["from", "to", "bumps"]].values.tolist() == [[0, 1, 1], [1, 3, 2]]
    fig = tv.producer_epoch_figure(h, "UTC")
    assert fig.data[0].name == "tx" and fig.data[0].line.shape == "hv"


def test_epoch_changes_at_transaction_v2_list_restarts_not_transaction_ends() -> None:
    """On a cluster at Transaction V2 every transaction end moves the epoch. The table of bumps lists only the
    changes the weekly report counts as restarts, fences or timeout aborts (`txn_clients.counted_increase`): a rise
    out of an epoch the producer proved keeps V1's rules, once; the others are counted as left out. Before, every
    end was listed under a caption calling each a restart, a fence or an abort."""
    rows = []
    for i, (v2_epoch, old_epoch, old_keeps) in enumerate([(0, 5, True), (1, 5, True), (2, 7, False), (3, 7, False)]):
        t = NOW + 30 * i
        rows.append({"time": t, "cluster": "prod", "transactional_id": "v2-client", "producer_id": 11,
                     "producer_epoch": v2_epoch, "keeps_v1": False})
        rows.append({"time": t, "cluster": "prod", "transactional_id": "old-client", "producer_id": 12,
                     "producer_epoch": old_epoch, "keeps_v1": old_keeps})
    # an older cluster beside it, the same ids: a new producer id counts nothing, a rise of 2 counts 2
    for t, pid, epoch in ((NOW, 20, 4), (NOW + 30, 21, 0), (NOW + 60, 21, 2)):
        rows.append({"time": t, "cluster": "old", "transactional_id": "v2-client", "producer_id": pid,
                     "producer_epoch": epoch, "keeps_v1": None})
    hist = pd.DataFrame(rows)
    levels = pd.DataFrame({"time": [NOW + 30 * i for i in range(4)] * 2, "cluster": ["prod"] * 4 + ["old"] * 4,
                           "transaction_version": [2] * 4 + [None] * 4})
    ch = tv.epoch_changes(hist, levels)
    got = sorted(zip(ch["transactional_id"], ch["from"], ch["to"], ch["bumps"], strict=True))
    assert got == [("old-client", 5, 7, 1), ("v2-client", 0, 1, 0), ("v2-client", 0, 2, 2), ("v2-client", 1, 2, 0),
                   ("v2-client", 2, 3, 0), ("v2-client", 4, 0, 0)]
    shown, other = tv.epoch_changes_display(hist, "UTC", levels)
    assert shown[["transactional id", "epoch", "bumps"]].values.tolist() == [
        ["v2-client", "0 → 2", 2], ["old-client", "5 → 7", 1]]
    assert other == 4
    fig = tv.producer_epoch_figure(hist[hist["cluster"] == "prod"], "UTC", clusters=levels)
    assert [d.name for d in fig.data] == ["old-client", "v2-client"]  # the one with a restart first
    # without the cluster rows (none in the range, or none read): every change counts as on an older cluster
    prod = hist[hist["cluster"] == "prod"]
    none = pd.DataFrame({"time": [], "cluster": [], "transaction_version": []})
    for levels in (None, none, none.drop(columns="transaction_version")):
        assert tv.epoch_changes(prod, levels)["bumps"].tolist() == [2, 1, 1, 1]  # old-client, then v2-client


# ----- consensus


def zk_history() -> pd.DataFrame:
    rows = []
    for i, t in enumerate([NOW, NOW + 5, NOW + 10, NOW + 15]):
        for s in ("z1", "z2", "z3"):
            epoch = 1 if i < 2 else 2
            leader = "z1" if i < 2 else "z2"
            serving = not (i == 2 and s == "z1")
            rows.append({"time": t, "kind": "zookeeper", "server": s, "serving": serving,
                         "mode": ("leader" if s == leader else "follower") if serving else None,
                         "zxid_epoch": epoch if serving else None, "zxid_counter": 10 + i if serving else None})
    return pd.DataFrame(rows)


def test_zk_elections_from_epoch_changes() -> None:
    el = csv.zk_elections(zk_history())
    assert el[["time", "epoch before", "epoch after", "leader before", "leader after"]].values.tolist() == [
        [NOW + 10, 1, 2, "z1", "z2"]]
    fig = csv.zk_timeline_figure(zk_history(), "UTC")
    assert {t.name for t in fig.data} == {"leader", "follower", "not serving"}
    assert any("epoch 2" in a.text for a in fig.layout.annotations)


def test_zookeeper_frame_formats_zxid_and_sorts_leader_first() -> None:
    doc = snapshot(zookeeper=[
        {"server": "z2", "serving": True, "mode": "follower", "zxid": (3 << 32) | 5, "zxid_epoch": None,
         "zxid_counter": None, "lag_behind_leader": 2},
        {"server": "z1", "serving": True, "mode": "leader", "zxid": (3 << 32) | 7, "zxid_epoch": 3,
         "zxid_counter": 7, "lag_behind_leader": None},
        {"server": "z3", "serving": False, "error": "connection refused"}])
    zk = csv.zookeeper_frame(doc)
    assert list(zk["server"]) == ["z1", "z2", "z3"]
    assert list(zk["zxid (epoch:counter)"]) == ["3:7", "3:5", "—"]
    assert zk.loc[0, "zxid (hex)"] == "0x300000007" and zk.loc[2, "mode"] == "not serving"


def test_isr_mismatch_and_kraft() -> None:
    doc = snapshot(partitions=[part("a", 0, 1, [1, 2], [1, 2], zk_leader=1, zk_isr=[1]),
                               part("a", 1, 1, [1, 2], [1, 2], zk_leader=1, zk_isr=[2, 1])])
    m = csv.isr_mismatch_frame(doc)
    assert m[["partition", "metadata ISR", "ZooKeeper ISR"]].values.tolist() == [[0, "1, 2", "1"]]
    assert csv.isr_mismatch_frame(snapshot()).empty and not csv.has_zk_partition_state(snapshot())
    h = pd.DataFrame({"time": [NOW, NOW + 5], "kind": ["kraft", "kraft"], "leader_epoch": [1, 2],
                      "leader_id": [1, 2]})
    assert csv.kraft_elections(h)[["epoch before", "epoch after"]].values.tolist() == [[1, 2]]


# ----- reports and settings


def test_report_summary_figures_hide_secrets() -> None:
    summary = {"week": "2025-W47", "availability": 0.9987, "incidents": 3, "sasl_password": "hunter2",
               "per_topic": [{"topic": "orders", "urp_minutes": 12, "api_token": "x"}],
               "lag": {"p50_s": 1.5, "p99_s": 40}}
    metrics, tables = rpv.summary_figures(summary)
    labels = dict(metrics)
    assert labels["availability"] == "0.9987" and labels["incidents"] == "3" and labels["lag · p99 s"] == "40"
    assert "hunter2" not in json.dumps(metrics) and "sasl password" not in labels
    assert list(tables["per topic"].columns) == ["topic", "urp_minutes"]


SPARK_SUMMARY: dict[str, Any] = {
    "cluster": "c1", "week": "2026-W47", "previous_week": "2026-W46", "previous_available": True,
    "headline": {"offline_minutes": 1.5, "lag_slo_share": 0.97},
    "week_over_week": [
        {"metric": "offline_minutes", "label": "Offline partitions", "unit": "min", "polarity": 1, "this_week": 1.5,
         "last_week": 0.5, "change": 1.0, "worse": True},
        {"metric": "lag_slo_share", "label": "Consumer polls within lag SLO", "unit": "share", "polarity": -1,
         "this_week": 0.97, "last_week": 0.99, "change": -0.02, "worse": True},
        {"metric": "worst_lag_seconds_p99", "label": "Worst group p99 lag", "unit": "s", "polarity": 1,
         "this_week": 268.4, "last_week": None, "change": None, "worse": None},
        {"metric": "polls", "label": "Polls", "unit": "", "polarity": 0, "this_week": 59, "last_week": 40,
         "change": 19, "worse": None}],
    "worse_than_last_week": ["offline_minutes", "lag_slo_share"],
    "worst_topics": [{"topic": "single", "offline_minutes": 1.5}],
    "open_incidents": [{"rule": "broker_down", "severity": "critical", "subject": "broker-2", "start": NOW,
                        "open_for_s": 60.0}],
    "notes": ["No polls on 2026-11-16."]}


def test_weekly_spark_summary_figures_with_deltas() -> None:
    figures, tables, notes = rpv.weekly_summary(SPARK_SUMMARY)
    by_label = {f.label: f for f in figures}
    offline = by_label["Offline partitions"]
    assert (offline.value, offline.delta, offline.delta_color) == ("1.5 min", "+1.0 min vs last week", "inverse")
    slo = by_label["Consumer polls within lag SLO"]
    assert (slo.value, slo.delta, slo.delta_color) == ("97.00 %", "-2.00 pp vs last week", "normal")
    lag = by_label["Worst group p99 lag"]
    assert lag.value == "4 min 28 s" and lag.delta is None  # no last week: no delta; spelled as on the page
    assert "Polls" not in by_label  # not a key figure; it is in the week-over-week table
    wow = tables["Week over week"]
    assert list(wow["worse"]) == ["WORSE", "WORSE", "", ""]
    assert list(tables["Incidents still open at the end of the week"]["subject"]) == ["broker-2"]
    assert notes == ["No polls on 2026-11-16."]
    generic, _, _ = rpv.weekly_summary({"availability": 0.5})
    assert generic == [rpv.Figure("availability", "0.5")]
    covered = dict(SPARK_SUMMARY, headline={"coverage": 0.25, "polls": 6048, "poll_interval_s": 30.0},
                   week_over_week=[dict(SPARK_SUMMARY["week_over_week"][0], this_week=0.5, change=0.0)])
    figures, _, notes = rpv.weekly_summary(covered)
    assert notes[0] == "The data covers 25.00 % of the week (6,048 polls every 30 s)."
    assert (figures[0].delta, figures[0].delta_color) == ("0", "off")  # unchanged: grey, no arrow


# What the dashboard's cards and the report page print (spark_analytics.formatting, shared): where the two old
# formatters differed, the better of each was kept.
@pytest.mark.parametrize(("value", "unit", "text"), [
    (None, "min", "n/a"), (float("nan"), "share", "n/a"), (pd.NaT, "s", "n/a"),
    (0.975, "share", "97.50 %"), (12.5, "min", "12.5 min"), (3.254, "/s", "3.25/s"),
    (268.4, "s", "4 min 28 s"),  # the page's spelling (the cards said "4m 28s" beside "12.5 min")
    (59.6, "s", "1 min 00 s"), (7500, "s", "2 h 05 min"), (273600, "s", "3 d 04 h"),  # rounded first; two units
    (12.3, "msgs", "12 msgs"), (1234.0, "records", "1,234 records"),  # whole items (the cards said "12.30 msgs")
    (4, "", "4"), (4.0, "", "4"), (1234567, "", "1,234,567"), (2.25, "", "2.2"),  # counts stay counts
    (3.0, "bytes", "3 bytes"),  # an unknown unit is kept (the page dropped it)
    ("n/a yet", "min", "n/a yet"),  # a hand-edited summary does not break the page
])
def test_report_values_read_the_same_on_the_page_and_the_cards(value: Any, unit: str, text: str) -> None:
    assert formatting.fmt_value(value, unit) == text


@pytest.mark.parametrize(("change", "unit", "text"), [
    (10.0, "min", "+10.0 min"), (-0.02, "share", "-2.00 pp"), (-268.4, "s", "-4 min 28 s"), (3, "", "+3"),
    (0.0, "min", "0"), (None, "min", "n/a"), ("?", "min", "?"),
])
def test_week_over_week_change_text(change: Any, unit: str, text: str) -> None:
    assert formatting.fmt_change(change, unit) == text  # ASCII '-': st.metric reads the arrow from it


# ----- finding the weekly reports


def write_report(directory: Path, cluster: str | None, html: bool = True) -> Path:
    """A week's report directory as the job writes it (`cluster` None: a summary that names no cluster)."""
    directory.mkdir(parents=True)
    summary = {"week": directory.name} if cluster is None else {"cluster": cluster, "week": directory.name}
    (directory / "summary.json").write_text(json.dumps(summary))
    if html:
        (directory / "report.html").write_text(f"<h1>{cluster}</h1>")
    return directory


def owners(reports_dir: Path, cluster: str) -> list[tuple[str, Any]]:
    return [(r.week, (r.summary or {}).get("cluster")) for r in data.find_reports(reports_dir, cluster)]


def test_find_reports_newest_week_first(tmp_path: Path) -> None:
    write_report(tmp_path / "c1" / "2025-W46", "c1", html=False)
    write_report(tmp_path / "c1" / "2025-W47", "c1")
    reports = data.find_reports(tmp_path, "c1")
    assert [r.week for r in reports] == ["2025-W47", "2025-W46"]
    assert reports[0].html is not None and reports[1].html is None and reports[0].summary["week"] == "2025-W47"
    assert data.find_reports(tmp_path, "other") == []


@pytest.mark.parametrize("cluster", ["prod eu/1", "a b", "a_b", "zürich 東京", "..", ".hidden"])
def test_each_cluster_finds_its_own_report_where_the_job_writes_it(tmp_path: Path, cluster: str) -> None:
    everyone = ("prod eu/1", "a b", "a_b", "zürich 東京", "..", ".hidden")
    for c in everyone:
        write_report(layout.report_dir(tmp_path, c, "2026-W47"), c)
    assert len({p.name for p in tmp_path.iterdir()}) == len(everyone)  # one directory each, none nested or hidden
    assert owners(tmp_path, cluster) == [("2026-W47", cluster)]


def test_reports_under_the_old_directory_name_are_found_only_by_their_cluster(tmp_path: Path) -> None:
    # Before the job used safe_name, "a b" and "a_b" both wrote to a_b/, "prod eu" to prod_eu/.
    write_report(tmp_path / "prod_eu" / "2026-W40", "prod eu")
    write_report(tmp_path / "prod_eu" / "2026-W41", "prod/eu")  # the same old name, another cluster
    write_report(tmp_path / "prod_eu" / "2026-W42", None)  # cannot tell whose: not shown
    write_report(layout.report_dir(tmp_path, "prod eu", "2026-W47"), "prod eu")
    assert owners(tmp_path, "prod eu") == [("2026-W47", "prod eu"), ("2026-W40", "prod eu")]
    write_report(tmp_path / "a_b" / "2026-W40", "a b")  # old: a b's report in what is now a_b's directory
    write_report(tmp_path / "a_b" / "2026-W41", "a_b")
    write_report(tmp_path / "a_b" / "2026-W42", None)  # in a_b's own directory: a_b's
    write_report(layout.report_dir(tmp_path, "a b", "2026-W47"), "a b")
    assert owners(tmp_path, "a b") == [("2026-W47", "a b"), ("2026-W40", "a b")]
    assert owners(tmp_path, "a_b") == [("2026-W42", None), ("2026-W41", "a_b")]
    write_report(tmp_path / "z_rich" / "2026-W40", "zürich 東京")  # non-ASCII: legacy z_rich
    assert layout.legacy_cluster_dir(tmp_path, "zürich 東京").name == "z_rich"
    assert owners(tmp_path, "zürich 東京") == [("2026-W40", "zürich 東京")]


def test_a_week_in_both_directories_is_the_current_one(tmp_path: Path) -> None:
    write_report(tmp_path / "prod_eu" / "2026-W47", "prod eu", html=False)
    current = write_report(layout.report_dir(tmp_path, "prod eu", "2026-W47"), "prod eu")
    [r] = data.find_reports(tmp_path, "prod eu")
    assert r.directory == current and r.html == current / "report.html"


def test_settings_arguments_beat_environment() -> None:
    env = {"KMON_STATE_DIR": "/e/state", "KMON_HISTORY": "/e/hist", "KMON_REFRESH": "0"}
    s = data.parse_settings(["-q", "--state-dir", "/a/state", "tests/x.py"], env)
    assert s.state_dir == Path("/a/state") and s.history_dir == Path("/e/hist") and s.refresh_s == 0
    s = data.parse_settings([], {})
    assert s.state_dir == Path(data.DEFAULT_STATE_DIR) and s.refresh_s == data.DEFAULT_REFRESH_S
    assert s.poll_interval_s is None


def test_history_read_of_missing_root_is_empty(tmp_path: Path) -> None:
    df = data.read_history(tmp_path / "nothing", "group_lag", NOW - 3600, None, ["c1"], ["time", "lag_sum"])
    assert df.empty and list(df.columns) == ["time", "lag_sum"]


# ----- incidents (dashboard.views.incidents)


@pytest.fixture
def incident_doc() -> dict[str, Any]:
    from collectors.model.records import snapshot_to_dict
    from tests.support.history_fixture import broker_incident_snapshot

    return snapshot_to_dict(broker_incident_snapshot(NOW))


def incident(kind: str, subject: str, severity: str, opened: float, **extra: Any) -> dict[str, Any]:
    return {"cluster": "c1", "id": f"{kind}-{subject}", "kind": kind, "subject": subject, "severity": severity,
            "summary": f"{kind} {subject} summary", "opened": opened, "last_seen": NOW, "resolved_at": None,
            "alerts": 1, "members": {}, "sample": [], "brokers": [], "partitions": None, "topics": None,
            "offline": None, "under_min_isr": None, "at_min_isr": None, "unclean_topics": None, "consequences": [],
            **extra}


def test_incident_rows_worst_first_with_blast_radius(incident_doc: dict[str, Any]) -> None:
    from dashboard.views import incidents as iv

    rows = iv.incident_rows({"inc": incident_doc})
    assert list(rows["kind"]) == ["broker", "topic", "group"]  # critical first; then causes before symptoms
    broker = rows.iloc[0]
    assert broker["severity"] == "critical" and broker["subject"] == "broker 3" and broker["alerts"] == 9
    assert broker["summary"].startswith("broker 3 is down; 4 partitions on 2 topics lost a replica")
    assert broker["blast radius"] == "4 partitions on 2 topics · 1 offline · 3 at min ISR"
    assert broker["consequences"] == "group billing"
    assert rows.iloc[2]["blast radius"] == ""  # a group incident has no partition figures
    # figures a document carries as floats read as counts, not "24.0 partitions"
    assert iv.blast_radius({"kind": "broker", "partitions": 24.0, "topics": 1.0}) == "24 partitions on 1 topic"
    assert iv.incident_rows({}).columns.tolist() == iv.INCIDENT_COLUMNS


def test_incident_rows_ties_go_to_the_longest_open_and_resolved_are_left_out() -> None:
    from dashboard.views import incidents as iv

    doc = {"time": NOW, "incidents": [incident("group", "a", "warning", NOW - 60),
                                      incident("group", "b", "warning", NOW - 600),
                                      incident("consensus", "zookeeper", "warning", NOW - 10),
                                      incident("topic", "gone", "critical", NOW - 900, resolved_at=NOW - 5)]}
    rows = iv.incident_rows({"c1": doc})
    assert list(rows["subject"]) == ["zookeeper", "b", "a"]
    assert list(rows["open_for"]) == ["10s", "10m 00s", "1m 00s"]  # on the snapshot's clock


@pytest.mark.parametrize("stamped", [True, False], ids=["stamped", "older-state"])
def test_incident_members_match_the_collectors_correlation(incident_doc: dict[str, Any], stamped: bool) -> None:
    """Each incident's members are exactly the alerts `correlate` gave its cause: by the ids the collector
    stamped on the alerts, and (state written before alerts carried them) recovered in one pass."""
    from collectors.alerting.correlation import correlate
    from dashboard.views import incidents as iv
    from tests.support.history_fixture import broker_incident_snapshot

    snap = broker_incident_snapshot(NOW)
    causes = {(c.kind, c.subject): sorted((a.rule, a.subject) for a in c.alerts) for c in correlate(snap, snap.alerts)}
    doc = copy.deepcopy(incident_doc)
    if stamped:
        assert all(("incident" in a) for a in doc["alerts"])
        assert {a["incident"] for a in doc["alerts"] if a["rule"] != "unsafe_durability"} == {
            i["id"] for i in doc["incidents"]}
    else:
        for a in doc["alerts"]:
            del a["incident"]
    members = iv.incident_members(doc)
    by_id = {i["id"]: (i["kind"], i["subject"]) for i in incident_doc["incidents"]}
    got = {by_id[k]: sorted((a["rule"], a["subject"]) for a in v) for k, v in members.items() if k}
    assert got == causes
    assert ("consumer_lag_status", "billing") in got[("broker", "broker 3")]  # a consequence, not a cause
    assert ("under_replicated", "slow-0") in got[("topic", "slow")]  # no down broker among its replicas
    assert [(a["rule"], a["subject"]) for a in members[""]] == [("unsafe_durability", "single")]  # the risk
    for inc in incident_doc["incidents"]:
        assert len(members[inc["id"]]) == inc["alerts"]


def test_incident_members_without_incidents_leave_everything_unclaimed() -> None:
    from dashboard.views import incidents as iv

    doc = snapshot(alerts=[alert("under_replicated", "orders-0", "warning", NOW - 5)])
    doc["incidents"] = []
    assert [a["subject"] for a in iv.incident_members(doc)[""]] == ["orders-0"]


def test_risks_are_split_from_incident_alerts(incident_doc: dict[str, Any]) -> None:
    from dashboard.views import incidents as iv

    causes, risks = iv.split_risks(incident_doc["alerts"] + [
        alert("preferred_leader_imbalance", "broker-1", "info", NOW - 5),
        alert("unsafe_durability", "old", "warning", NOW - 9, resolved_at=NOW - 1)])
    assert sorted(a["rule"] for a in risks) == ["preferred_leader_imbalance", "unsafe_durability"]
    assert not {a["rule"] for a in causes} & {"preferred_leader_imbalance", "unsafe_durability"}
    frame = iv.risk_frame({"inc": incident_doc})
    assert frame[["rule", "subject"]].values.tolist() == [["unsafe_durability", "single"]]
    assert frame["first step"].iloc[0]  # from the rule catalogue


def test_member_frame_searches_and_limits_server_side() -> None:
    from dashboard.views import incidents as iv

    alerts = [alert("at_min_isr", f"t{n % 7}-{n}", "warning", NOW - n) for n in range(5000)]
    alerts.append(alert("offline_partition", "t3-9999", "critical", NOW - 1))
    frame, total = iv.member_frame(alerts, NOW, limit=100)
    assert total == 5001 and len(frame) == 100
    assert frame.iloc[0]["subject"] == "t3-9999"  # critical first
    assert frame.iloc[1]["subject"] == "t1-4999"  # then the longest open
    frame, total = iv.member_frame(alerts, NOW, query="T3-9", limit=5)  # case-insensitive, on the subject
    expected = {a["subject"] for a in alerts if "t3-9" in a["subject"]}
    assert total == len(expected) > 5 and len(frame) == 5 and set(frame["subject"]) <= expected
    assert list(frame.columns) == iv.MEMBER_COLUMNS


def test_health_sentence_is_the_incident_summaries(incident_doc: dict[str, Any]) -> None:
    from dashboard.views import incidents as iv

    lines = iv.health_sentence(incident_doc, limit=2)
    assert lines[0].startswith("broker 3 is down; 4 partitions on 2 topics lost a replica: 1 partition offline")
    assert lines[1] == "slow: 1 of 1 partitions under replicated" and lines[2] == "+1 more incident"
    assert iv.health_sentence({"incidents": []}) == []


@pytest.mark.parametrize(("snap_t", "newest", "text"), [
    (NOW, NOW, "latest poll"),
    (NOW, NOW + 0.5, "latest poll"),
    (NOW - 200, NOW, "3m 20s older than the newest snapshot"),
    (NOW + 180, NOW, "latest poll"),  # a clock ahead never reads as the future
    (None, NOW, "time unknown"),
])
def test_data_age_is_on_the_collectors_clock(snap_t: float | None, newest: float, text: str) -> None:
    from dashboard.views import incidents as iv

    assert iv.data_age_text(snap_t, newest) == text
    assert " in " not in iv.data_age_text(snap_t, newest)


@pytest.mark.parametrize(("inc", "page", "params"), [
    (incident("broker", "broker 3", "critical", NOW, brokers=[3]), "replication", {"cluster": "c1", "broker": "3"}),
    (incident("topic", "orders", "warning", NOW), "replication", {"cluster": "c1", "topic": "orders"}),
    (incident("group", "billing", "critical", NOW), "consumers", {"cluster": "c1", "group": "billing"}),
    (incident("transaction", "orders-1", "critical", NOW, sample=["hanging_transaction orders-1"]), "transactions",
     {"cluster": "c1", "topic": "orders"}),
    (incident("consensus", "zookeeper", "critical", NOW), "consensus", {"cluster": "c1"}),
])
def test_incident_targets(inc: dict[str, Any], page: str, params: dict[str, str]) -> None:
    from dashboard.views import incidents as iv

    assert iv.incident_target(inc) == (page, params)


def test_open_alerts_frame_filters_and_cuts_before_formatting() -> None:
    alerts = [alert("at_min_isr", f"orders-{n}", "warning", NOW - n) for n in range(50)]
    alerts += [alert("broker_down", "broker-3", "critical", NOW - 5), alert("under_replicated", "slow-0", "warning",
                                                                             NOW - 500)]
    docs = {"c1": snapshot(alerts=alerts)}
    df = av.open_alerts_frame(docs, "UTC", limit=3)
    assert df.attrs["matched"] == 52 and len(df) == 3
    assert list(df["subject"]) == ["broker-3", "slow-0", "orders-49"]
    assert df["link"].iloc[0] == "./replication?cluster=c1&broker=3"
    df = av.open_alerts_frame(docs, "UTC", rules=["at_min_isr"], query="ORDERS-4", limit=100)
    assert df.attrs["matched"] == 11 and set(df["rule"]) == {"at_min_isr"}


def test_history_of_files_before_and_after_schema_version_4_reads_alike(tmp_path: Path) -> None:
    """A collector upgraded mid-day (float-second files next to TIMESTAMP files): the dashboard's loader gives the
    rows of both with epoch-second times, as the collector's reader does."""
    from collectors.model.poll import PollResult
    from collectors.outputs import history as hist
    from tests.support.history_fixture import broker_incident_snapshot
    from tests.support.mixed_history import write_upgraded_mid_day

    def polls(t: float) -> list[PollResult]:
        snap = broker_incident_snapshot(t, cluster="c1")
        return [PollResult(snap, opened=list(snap.alerts))]

    t_old, t_new = NOW - 1800.123456, NOW - 600.654321
    write_upgraded_mid_day(tmp_path, polls(t_old), polls(t_new))
    cols = ["time", "rule", "first_seen", "last_seen", "schema_version"]
    df = data.read_history(tmp_path, "alert_events", NOW - 3600, None, ["c1"], cols)
    assert sorted(set(df["schema_version"])) == [3, 4] and str(df["time"].dtype) == "Float64"
    assert sorted(set(df["time"])) == pytest.approx([t_old, t_new], abs=1e-6)
    assert df.equals(hist.read_table(tmp_path, "alert_events", float(int((NOW - 3600) // 60) * 60), None, ["c1"],
                                     cols))
    polls_df = data.read_history(tmp_path, "cluster", t_old + 1, None, ["c1"], ["time"])
    assert polls_df["time"].tolist() == pytest.approx([t_new], abs=1e-6)
