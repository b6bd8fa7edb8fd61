"""The weekly report's pure aggregations on small hand-made DataFrames, with exact expected numbers.

Real PySpark in local mode; one SparkSession for the whole test process (tests.support.spark_history).
Times are seconds after the start of ISO week 2026-W47 (Monday 2026-11-16 00:00 UTC) unless noted.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import shutil
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from collectors.outputs.history import REPLACES_KEY, TABLES
from collectors.outputs.history.schema import SECONDS_TABLES
from spark_analytics import aggregations as A
from spark_analytics import io, rollup, rollup_job, weekly_report
from spark_analytics.session import CLASS_ARCHIVE_ENV
from spark_analytics.weekly_report import compute, main
from tests.support.damage import cut_short, damage_pages
from tests.support.spark_history import empty_tables, frame, headline_rows, spark_session

W = A.Period.iso_week("2026-W47")
T0 = W.start
PREV = W.previous()


@pytest.fixture(scope="session")
def spark() -> Any:
    return spark_session()


def rows(df: Any, *order: str) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in (df.orderBy(*order) if order else df).collect()]


def polls_df(spark: Any, times: list[float], cluster: str = "c1") -> Any:
    return frame(spark, "cluster", [{"time": T0 + t, "controller_id": 1, "reachable": True} for t in times],
                 cluster=cluster)


def every(n: int, step: float = 30.0, start: float = 0.0) -> list[float]:
    return [start + i * step for i in range(n)]


# ----------------------------------------------------------------------------------------------- periods


def test_iso_week_bounds_previous_and_bad_labels() -> None:
    assert W.start == 1_794_787_200.0  # 2026-11-16T00:00:00Z
    assert W.seconds == 7 * 86400 and PREV.label == "2026-W46" and PREV.end == W.start
    assert A.Period.iso_week("2026-W01").previous().label == "2025-W52"
    assert A.Period.iso_week("2021-W01").previous().label == "2020-W53"  # a 53-week year
    assert A.Period.containing(W.start + 3 * 86400).label == "2026-W47"
    assert A.Period.last_complete_week(W.end + 10).label == "2026-W47"
    assert W.days()[0] == "2026-11-16" and W.days()[-1] == "2026-11-22"
    for bad in ("2026-47", "2026-W5", "26-W47", "2026-W54", "2026-W00", "week"):
        with pytest.raises(ValueError):
            A.Period.iso_week(bad)


# ----------------------------------------------------------------------------------------------- polls


def test_poll_interval_is_the_median_gap_and_coverage(spark: Any) -> None:
    times = [0, 30, 60, 90, 150, 180, 2 * 86400]  # gaps 30 30 30 60 30 <big>: median 30
    cl = polls_df(spark, times).unionByName(polls_df(spark, [-30.0]))  # the previous week is not counted
    [r] = rows(A.poll_intervals(cl, W))
    assert r["polls"] == 7 and r["poll_interval_s"] == 30.0 and r["median_gap_s"] == 30.0
    assert r["observed_minutes"] == pytest.approx(3.5)
    assert r["coverage"] == pytest.approx(7 * 30 / W.seconds)
    assert r["days_with_polls"] == [0, 2]
    [o] = rows(A.poll_intervals(cl, W, override_s=60))
    assert o["poll_interval_s"] == 60.0


def test_data_lost_sums_the_ledger_per_kind_and_subject_and_gaps_are_listed(spark: Any) -> None:
    ev = frame(spark, "loss_events", [
        {"time": T0 + 100, "kind": "truncation", "topic": "orders", "partition": 3, "messages": 1_200,
         "evidence": "a"},
        {"time": T0 + 100, "kind": "unclean_election", "topic": "orders", "partition": 3, "evidence": "b"},
        {"time": T0 + 200, "kind": "retention_skipped", "topic": "clicks", "partition": 0, "group_id": "analytics",
         "messages": 30, "evidence": "c"},
        {"time": T0 + 900, "kind": "retention_skipped", "topic": "clicks", "partition": 1, "group_id": "analytics",
         "messages": 20, "evidence": "d"},
        {"time": T0 + 300, "kind": "zk_zxid_regressed", "server": "zk1:2181", "messages": 50, "evidence": "e"},
        {"time": T0 - 10, "kind": "truncation", "topic": "old", "partition": 0, "messages": 9, "evidence": "f"}])
    got = {(r["kind"], r["subject"]): r for r in rows(A.data_lost(ev, W))}
    assert set(got) == {("truncation", "orders-3"), ("unclean_election", "orders-3"),
                        ("retention_skipped", "analytics"), ("zk_zxid_regressed", "zk1:2181")}  # last week's: out
    assert got[("retention_skipped", "analytics")]["messages"] == 50 and got[("retention_skipped", "analytics")][
        "events"] == 2
    assert got[("truncation", "orders-3")]["messages"] == 1_200 and got[("unclean_election", "orders-3")][
        "messages"] is None
    cl = polls_df(spark, [*every(10), 3 * 86400 + 60.0])  # 5 min of polls, then one three days later
    gaps = rows(A.poll_gaps(cl, A.poll_intervals(cl, W), W), "from")
    assert [(g["from"] - T0, g["to"] - T0) for g in gaps] == [(270.0, 3 * 86400 + 60.0),
                                                              (3 * 86400 + 60.0, W.seconds)]
    full = polls_df(spark, every(int(W.seconds // 30)))
    assert rows(A.poll_gaps(full, A.poll_intervals(full, W), W)) == []


def test_data_lost_counts_a_leader_changes_loss_once_however_often_it_was_recorded(spark: Any) -> None:
    """A collector killed between its ledger write and its checkpoint records the same truncation (same partition,
    old epoch and cut, a later new epoch perhaps) and the groups that read past it again after its restart: the
    report counts each loss once, from its first record, the one before the period too. Different cuts, epochs or
    groups are different losses; a retention skip recorded twice is two (each is the messages deleted since)."""
    def loss(t: float, kind: str, before: int | None, after: int | None, cut: int | None, n: int | None,
             group: str | None = None, partition: int = 3, evidence: str = "x") -> dict[str, Any]:
        return {"time": T0 + t, "kind": kind, "topic": "orders", "partition": partition, "group_id": group,
                "epoch_before": before, "epoch_after": after, "offset": cut, "messages": n, "evidence": evidence}

    ev = frame(spark, "loss_events", [
        loss(100, "truncation", 5, 7, 48_800, 1_200, evidence="first"),
        loss(100, "unclean_election", 5, 7, None, None),
        loss(100, "offset_beyond_log_end", 5, 7, 48_800, 90, group="billing"),
        loss(160, "truncation", 5, 7, 48_800, 1_200, evidence="again"),  # the restart's record of it
        loss(160, "unclean_election", 5, 7, None, None),
        loss(160, "offset_beyond_log_end", 5, 7, 48_800, 90, group="billing"),
        loss(170, "truncation", 5, 8, 48_800, 1_200),  # ... having found a later leader
        loss(170, "offset_beyond_log_end", 5, 7, 48_800, 40, group="audit"),  # another group's: its own
        loss(900, "truncation", 7, 9, 49_500, 300, evidence="later"),  # a later cut of the next epoch: a loss
        loss(900, "truncation", 7, 9, 49_600, 200, partition=4),
        loss(-50, "truncation", 2, 3, 10_000, 70, partition=5),  # last week's, recorded again this week
        loss(200, "truncation", 2, 3, 10_000, 70, partition=5),
        loss(300, "retention_skipped", None, None, None, 30, group="analytics"),
        loss(360, "retention_skipped", None, None, None, 30, group="analytics")])
    got = {(r["kind"], r["subject"]): (r["events"], r["messages"]) for r in rows(A.data_lost(ev, W))}
    assert got == {("truncation", "orders-3"): (2, 1_500), ("unclean_election", "orders-3"): (1, None),
                   ("offset_beyond_log_end", "billing"): (1, 90), ("offset_beyond_log_end", "audit"): (1, 40),
                   ("truncation", "orders-4"): (1, 200), ("retention_skipped", "analytics"): (2, 60)}
    [cut] = [r for r in rows(A.data_lost(ev, W)) if r["subject"] == "orders-3" and r["kind"] == "truncation"]
    assert (cut["first"], cut["last"], cut["evidence"]) == (T0 + 100, T0 + 900, "later")


def test_single_poll_has_no_interval_and_minutes_are_null(spark: Any) -> None:
    cl = polls_df(spark, [100.0])
    th = frame(spark, "topic_health", [{"time": T0 + 100, "topic": "t", "under_min_isr": 1}])
    polls = A.poll_intervals(cl, W)
    [r] = rows(A.topic_replication(th, polls, W))
    assert r["under_min_isr_polls"] == 1 and r["under_min_isr_minutes"] is None


# ----------------------------------------------------------------------------------------------- replication


def test_minutes_under_min_isr_per_topic_and_cluster(spark: Any) -> None:
    times = every(6)
    cl = polls_df(spark, times)
    umi = {"a": [0, 1, 2, 1, 0, 0], "b": [0, 0, 0, 1, 0, 0]}
    offline = {"a": [0, 0, 0, 0, 0, 0], "b": [0, 0, 0, 1, 1, 0]}
    th = frame(spark, "topic_health", [
        {"time": T0 + t, "topic": topic, "partitions": 3, "replication_factor": 3, "min_insync_replicas": 2,
         "under_replicated": umi[topic][i] + offline[topic][i], "under_min_isr": umi[topic][i],
         "offline": offline[topic][i]}
        for i, t in enumerate(times) for topic in ("a", "b")])
    polls = A.poll_intervals(cl, W)
    got = {r["topic"]: r for r in rows(A.topic_replication(th, polls, W))}
    assert got["a"]["under_min_isr_polls"] == 3 and got["a"]["under_min_isr_minutes"] == pytest.approx(1.5)
    assert got["a"]["under_min_isr_partition_minutes"] == pytest.approx(2.0)  # (1 + 2 + 1) x 0.5 min
    assert got["a"]["under_min_isr_max_partitions"] == 2
    assert got["b"]["under_min_isr_minutes"] == pytest.approx(0.5)
    assert got["b"]["offline_minutes"] == pytest.approx(1.0)
    assert got["b"]["under_replicated_minutes"] == pytest.approx(1.0)
    [c] = rows(A.cluster_replication(th, polls, W))
    assert c["under_min_isr_minutes"] == pytest.approx(1.5)  # polls 1-3 (b's poll 3 overlaps a's)
    assert c["offline_minutes"] == pytest.approx(1.0)
    assert c["topics_under_min_isr"] == 2 and c["topics_offline"] == 1


def test_isr_shrinks_count_per_removed_broker(spark: Any) -> None:
    pc = frame(spark, "partition_changes", [
        {"time": T0 + 10, "topic": "t", "partition": 0, "kind": "isr_shrink", "leader_before": 1, "leader_after": 1,
         "isr_before": [1, 2, 3], "isr_after": [1]},
        {"time": T0 + 20, "topic": "t", "partition": 0, "kind": "isr_expand", "leader_before": 1, "leader_after": 1,
         "isr_before": [1], "isr_after": [1, 2]},
        {"time": T0 + 30, "topic": "u", "partition": 1, "kind": "isr_shrink", "leader_before": 2, "leader_after": 1,
         "isr_before": [2, 1, 3], "isr_after": [1, 3]},
        {"time": T0 + 40, "topic": "u", "partition": 2, "kind": "isr_change", "leader_before": 1, "leader_after": 1,
         "isr_before": [1, 2], "isr_after": [1, 3]},
        {"time": T0 + 50, "topic": "u", "partition": 2, "kind": "leader_change", "leader_before": 1,
         "leader_after": 3, "isr_before": [1, 3], "isr_after": [1, 3]},
        {"time": T0 - 50, "topic": "u", "partition": 2, "kind": "isr_shrink", "leader_before": 1,  # last week
         "leader_after": 1, "isr_before": [1, 2, 3], "isr_after": [1]},
        {"time": T0 + 60, "topic": "v", "partition": 0, "kind": "isr_shrink", "leader_before": 1,  # older file: null
         "leader_after": 1, "isr_before": None, "isr_after": [1]},
    ])
    by_broker = {r["broker"]: (r["isr_shrinks"], r["isr_expands"]) for r in rows(A.isr_changes_by_broker(pc, W))}
    assert by_broker == {1: (0, 1), 2: (3, 1), 3: (1, 1)}
    by_topic = {r["topic"]: r for r in rows(A.isr_changes_by_topic(pc, W))}
    assert (by_topic["t"]["isr_shrinks"], by_topic["t"]["isr_expands"]) == (2, 1)
    assert (by_topic["u"]["isr_shrinks"], by_topic["u"]["isr_expands"]) == (2, 1)
    assert by_topic["u"]["partitions_shrunk"] == 2 and by_topic["u"]["leader_changes"] == 2


# ----------------------------------------------------------------------------------------------- incidents


def _inc(t: float, event: str, iid: str, kind: str, opened: float, severity: str = "critical",
         brokers: list[int] | None = None, alerts: int = 1) -> dict[str, Any]:
    return {"time": T0 + t, "event": event, "id": iid, "kind": kind, "subject": f"{kind} {iid}",
            "severity": severity, "summary": f"{kind} {iid} {event}", "opened": T0 + opened,
            "resolved_at": T0 + t if event == "resolved" else None, "alerts": alerts, "brokers": brokers,
            "members": json.dumps({"x": alerts})}


# One incident per id, whatever its events (seconds after the week start; the last poll is at 9030):
#   A broker       opened -600 (last week), resolved 300           duration 900, resolved this week
#   B broker       opened 1000 warning, updated 1100 critical, resolved 1600: duration 600, critical
#   C topic        opened 2000 warning, resolved 2300, reopened 2400, resolved 3000: duration 1000 (one incident)
#   D group        opened 5000, never resolved                     open at the end, for 4030 s
#   E consensus    opened week end - 100 (info), resolved after the week: open at the end (for 0 s: no poll after)
#   F topic        opened -900, resolved -300                      last week only: not in the week
#   G transaction  opened 100, resolved 400, reopened 500          open at the end, for 8930 s: the longest
INCIDENT_EVENTS = [
    _inc(-600, "opened", "A", "broker", -600, brokers=[1], alerts=12), _inc(300, "resolved", "A", "broker", -600,
                                                                            brokers=[1], alerts=12),
    _inc(1000, "opened", "B", "broker", 1000, "warning", [2, 3], 30), _inc(1100, "updated", "B", "broker", 1000,
                                                                           brokers=[2, 3], alerts=40),
    _inc(1600, "resolved", "B", "broker", 1000, brokers=[2], alerts=40),
    _inc(2000, "opened", "C", "topic", 2000, "warning"), _inc(2300, "resolved", "C", "topic", 2000, "warning"),
    _inc(2400, "reopened", "C", "topic", 2000, "warning"), _inc(3000, "resolved", "C", "topic", 2000, "warning"),
    _inc(5000, "opened", "D", "group", 5000),
    _inc(7 * 86400 - 100, "opened", "E", "consensus", 7 * 86400 - 100, "info"),
    _inc(7 * 86400 + 100, "resolved", "E", "consensus", 7 * 86400 - 100, "info"),
    _inc(-900, "opened", "F", "topic", -900), _inc(-300, "resolved", "F", "topic", -900),
    _inc(100, "opened", "G", "transaction", 100), _inc(400, "resolved", "G", "transaction", 100),
    _inc(500, "reopened", "G", "transaction", 100),
]
INCIDENT_FIGURES = {"incidents_opened": 5, "critical_incidents": 3, "incidents_open_at_end": 3,
                    "mttr_minutes": (900 + 600 + 1000) / 3 / 60, "longest_incident_minutes": 8930 / 60}


def test_an_incident_its_collector_lost_is_superseded_not_open(spark: Any) -> None:
    """A collector restarted without its checkpoint, or a standby taking the history over, opens its own incident
    for a cause it finds open: the old one is never resolved. Before, the report kept it open for good (open at
    the end, the longest incident). Now a never-resolved incident followed by a later one of the same cause is
    ``superseded`` and counts up to the later one's start, as superseded alert episodes do; Spark and the DuckDB
    reference agree.

    H broker opened 1000, lost;  I broker opened 2000 (the restarted collector), resolved 2600
    J topic "topic J" opened 3000, lost;  K "topic J" opened 3500, open;  L "topic L" opened 4000, open
    """
    import duckdb
    import pyarrow as pa

    from bench.bench_spark import duckdb_incidents

    events = [_inc(1000, "opened", "H", "broker", 1000, brokers=[2]),
              _inc(2000, "opened", "I", "broker", 2000, brokers=[2]),
              _inc(2600, "resolved", "I", "broker", 2000, brokers=[2]),
              _inc(3000, "opened", "J", "topic", 3000),
              _inc(3500, "opened", "K", "topic", 3500) | {"subject": "topic J"},
              _inc(4000, "opened", "L", "topic", 4000)]
    times = every(2, start=9000)
    polls = A.poll_intervals(polls_df(spark, times), W)
    inc = {r["id"]: r for r in rows(A.incidents(frame(spark, "incident_events", events), polls, W))}
    assert {i: r["status"] for i, r in inc.items()} == {"H": "superseded", "I": "resolved", "J": "superseded",
                                                        "K": "open", "L": "open"}
    assert (inc["H"]["open_for_s"], inc["H"]["duration_s"], inc["H"]["end"]) == (None, None, None)
    assert inc["H"]["minutes_in_period"] == pytest.approx(1000 / 60)  # up to the restarted collector's incident
    assert inc["J"]["minutes_in_period"] == pytest.approx(500 / 60)
    kinds = {r["kind"]: (r["opened"], r["open_at_end"]) for r in rows(A.incident_kinds(
        A.incidents(frame(spark, "incident_events", events), polls, W)))}
    assert kinds == {"broker": (2, 0), "topic": (3, 2)}

    con = duckdb.connect()
    con.register("ev", pa.Table.from_pylist([{"cluster": "c1", **e} for e in events]))
    con.register("cl", pa.Table.from_pylist([{"cluster": "c1", "time": T0 + t} for t in times]))
    duck, duck_kinds = duckdb_incidents(con, "ev", "cl", W.start, W.end)
    want = {"incidents_opened": 5, "incidents_open_at_end": 2, "mttr_minutes": 600 / 60,
            "longest_incident_minutes": (9030 - 3500) / 60}  # K, open up to the last poll; before: H's 8030 s
    for name, value in want.items():
        assert duck[name] == pytest.approx(value), name
    assert duck_kinds == {"broker": 2, "topic": 3}
    open_for = {i: r["open_for_s"] for i, r in inc.items() if r["status"] == "open"}
    assert max(open_for.values()) / 60 == pytest.approx(want["longest_incident_minutes"])


def test_an_incident_recorded_lost_ends_where_it_was_last_seen_and_is_not_open(spark: Any) -> None:
    """A collector that starts too long after the last one stopped (or polls another cluster of the name) does not
    carry on what it left open; it records each such incident ``lost`` at the last poll that saw it open. Before,
    an incident whose cause had gone by then stayed open for good: open at the end and the longest of every
    report that read it. Now it is ``lost``: up to that poll, no end, neither open nor resolved; Spark and the
    DuckDB reference agree. A later incident of the same cause does not make it superseded.

    M broker opened 1000, lost 1800;  N broker opened 2500 (the next collector), resolved 3100
    P topic opened 4000, open;  Q group opened -1000 (last week), lost 200
    """
    import duckdb
    import pyarrow as pa

    from bench.bench_spark import duckdb_incidents

    events = [_inc(1000, "opened", "M", "broker", 1000, brokers=[2]),
              _inc(1800, "lost", "M", "broker", 1000, brokers=[2]),
              _inc(2500, "opened", "N", "broker", 2500, brokers=[2]),
              _inc(3100, "resolved", "N", "broker", 2500, brokers=[2]),
              _inc(4000, "opened", "P", "topic", 4000),
              _inc(-1000, "opened", "Q", "group", -1000), _inc(200, "lost", "Q", "group", -1000)]
    times = every(2, start=9000)  # the last poll at 9030
    polls = A.poll_intervals(polls_df(spark, times), W)
    inc = {r["id"]: r for r in rows(A.incidents(frame(spark, "incident_events", events), polls, W))}
    assert {i: r["status"] for i, r in inc.items()} == {"M": "lost", "N": "resolved", "P": "open", "Q": "lost"}
    assert (inc["M"]["open_for_s"], inc["M"]["duration_s"], inc["M"]["end"]) == (None, None, None)
    assert inc["M"]["minutes_in_period"] == pytest.approx(800 / 60)
    assert inc["Q"]["minutes_in_period"] == pytest.approx(200 / 60) and not inc["Q"]["opened_in_period"]
    kinds = {r["kind"]: (r["opened"], r["resolved"], r["open_at_end"], r["lost"], r["longest_s"]) for r in rows(
        A.incident_kinds(A.incidents(frame(spark, "incident_events", events), polls, W)))}
    assert kinds == {"broker": (2, 1, 0, 1, 600.0), "topic": (1, 0, 1, 0, 5030.0), "group": (0, 0, 0, 1, None)}

    con = duckdb.connect()
    con.register("ev", pa.Table.from_pylist([{"cluster": "c1", **e} for e in events]))
    con.register("cl", pa.Table.from_pylist([{"cluster": "c1", "time": T0 + t} for t in times]))
    duck, duck_kinds = duckdb_incidents(con, "ev", "cl", W.start, W.end)
    want = {"incidents_opened": 3, "incidents_open_at_end": 1, "mttr_minutes": 600 / 60,
            "longest_incident_minutes": 5030 / 60}  # P, open up to the last poll; before: M's 8030 s
    for name, value in want.items():
        assert duck[name] == pytest.approx(value), name
    assert duck_kinds == {"broker": 2, "topic": 1, "group": 0}


def test_an_alert_recorded_lost_ends_where_it_was_last_seen(spark: Any) -> None:
    """An alert episode left open by a collector and not carried on by the next ends at its ``lost`` event (its
    last poll seen open): not open at the end, not superseded by the next collector's episode of it."""
    ev = frame(spark, "alert_events", [
        _alert("open", "broker_down", "broker-2", 1000), {**_alert("lost", "broker_down", "broker-2", 1000),
                                                          "time": T0 + 1800, "last_seen": T0 + 1800},
        _alert("open", "broker_down", "broker-2", 2500), _alert("resolve", "broker_down", "broker-2", 2500, 3100)])
    polls = A.poll_intervals(polls_df(spark, every(2, start=9000)), W)
    eps = {r["start"] - T0: r for r in rows(A.alert_episodes(ev, polls, W))}
    assert {t: e["status"] for t, e in eps.items()} == {1000: "lost", 2500: "resolved"}
    assert (eps[1000]["end"], eps[1000]["open_for_s"]) == (None, None)
    assert eps[1000]["minutes_in_period"] == pytest.approx(800 / 60)
    (s,) = rows(A.alert_summary(A.alert_episodes(ev, polls, W)))
    assert (s["episodes"], s["opened"], s["resolved"], s["open_at_end"], s["lost"]) == (2, 2, 1, 0, 1)


def _v2_polls(times: list[float], recorded: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Cluster rows of a version-2 collector: open incidents and the thresholds recorded at every poll."""
    return [{"time": T0 + t, "controller_id": 1, "reachable": True, "schema_version": 2, "incidents_open": 0,
             "thresholds": None if recorded is None else json.dumps(recorded)} for t in times]


def test_incidents_count_distinct_ids_by_kind_with_mttr_and_longest(spark: Any) -> None:
    ev = frame(spark, "incident_events", INCIDENT_EVENTS)
    polls = A.poll_intervals(polls_df(spark, every(2, start=9000)), W)
    inc = {r["id"]: r for r in rows(A.incidents(ev, polls, W))}
    assert sorted(inc) == ["A", "B", "C", "D", "E", "G"]  # F is wholly last week
    assert (inc["A"]["status"], inc["A"]["duration_s"], inc["A"]["opened_in_period"]) == ("resolved", 900.0, False)
    assert inc["A"]["minutes_in_period"] == pytest.approx(5.0)
    b = inc["B"]
    assert (b["severity"], b["duration_s"], b["brokers"], b["alerts"]) == ("critical", 600.0, [2, 3], 40)
    c = inc["C"]
    assert (c["status"], c["start"] - T0, c["end"] - T0, c["duration_s"], c["reopens"]) == (
        "resolved", 2000, 3000, 1000.0, 1)
    assert (inc["D"]["status"], inc["D"]["open_for_s"], inc["D"]["end"]) == ("open", 4030.0, None)
    assert (inc["E"]["status"], inc["E"]["severity"]) == ("open", "info")
    g = inc["G"]
    assert (g["status"], g["open_for_s"], g["resolved_in_period"], g["reopens"]) == ("open", 8930.0, False, 1)
    kinds = {r["kind"]: r for r in rows(A.incident_kinds(A.incidents(ev, polls, W)))}
    assert {k: (r["opened"], r["resolved"], r["open_at_end"], r["critical"]) for k, r in kinds.items()} == {
        "broker": (1, 2, 0, 1), "topic": (1, 1, 0, 0), "group": (1, 0, 1, 1), "consensus": (1, 0, 1, 0),
        "transaction": (1, 0, 1, 1)}
    assert kinds["broker"]["mttr_s"] == 750.0 and kinds["broker"]["longest_s"] == 900.0
    assert kinds["transaction"]["mttr_s"] is None and kinds["transaction"]["longest_s"] == 8930.0

    # The headline: c1 recorded incidents (version 2), c2 did not (version 1: its alert episodes count instead).
    t = empty_tables(spark)
    t["incident_events"] = ev
    t["cluster"] = (frame(spark, "cluster", _v2_polls(every(2, start=9000)))
                    .unionByName(polls_df(spark, every(2, start=9000), cluster="c2")))
    t["alert_events"] = frame(spark, "alert_events", [
        _alert("open", "under_min_isr", f"t-{p}", 1000) for p in range(40)]).unionByName(frame(
            spark, "alert_events", [_alert("open", "broker_down", "broker-9", 50),
                                    _alert("resolve", "broker_down", "broker-9", 50, 350)], cluster="c2"))
    head = {r["cluster"]: r for r in headline_rows(spark, t, W)}
    for name, want in INCIDENT_FIGURES.items():
        assert head["c1"][name] == pytest.approx(want), name
    assert head["c1"]["alert_episodes_opened"] == 40  # the symptoms behind them, no longer called incidents
    assert (head["c2"]["incidents_opened"], head["c2"]["incidents_open_at_end"], head["c2"]["mttr_minutes"]) == (
        1, 0, 5.0)
    source = {r["cluster"]: r["source"] for r in rows(A.incident_source(t["cluster"], ev, W))}
    assert source == {"c1": A.FROM_INCIDENTS, "c2": A.FROM_ALERT_EPISODES}


def test_thresholds_are_the_collectors_as_recorded_else_its_defaults(spark: Any) -> None:
    from collectors.alerting.thresholds import Thresholds

    old = {**Thresholds().model_dump(), "lag_seconds_slo": 60.0, "txn_timeout_grace_s": 20.0}
    new = {**old, "lag_seconds_slo": 45.0}
    cl = (frame(spark, "cluster", _v2_polls([0, 30], old) + _v2_polls([60], new) + _v2_polls([90]))
          .unionByName(polls_df(spark, [0, 30], cluster="c2"))  # version 1: nothing recorded
          .unionByName(frame(spark, "cluster", _v2_polls([-30], {"lag_seconds_slo": 1.0}), cluster="c2")))
    got = {r["cluster"]: r for r in rows(A.thresholds(cl, W))}
    assert (got["c1"]["lag_slo_s"], got["c1"]["lag_slo_s_from"]) == (45.0, "history")  # the latest in the week
    assert (got["c1"]["txn_grace_s"], got["c1"]["txn_grace_s_from"]) == (20.0, "history")
    assert json.loads(got["c1"]["thresholds"]) == new
    defaults = Thresholds()  # not numbers of the report's own: the collector's defaults
    assert (got["c2"]["lag_slo_s"], got["c2"]["txn_grace_s"]) == (defaults.lag_seconds_slo,
                                                                  defaults.txn_timeout_grace_s)
    assert got["c2"]["lag_slo_s_from"] == "collector defaults" and got["c2"]["thresholds"] is None
    assert (defaults.lag_seconds_slo, defaults.txn_timeout_grace_s) == (A.DEFAULT_LAG_SLO_S, A.DEFAULT_TXN_GRACE_S)
    over = {r["cluster"]: r for r in rows(A.thresholds(cl, W, lag_slo_s=5.0))}
    assert (over["c1"]["lag_slo_s"], over["c1"]["lag_slo_s_from"], over["c1"]["txn_grace_s"]) == (
        5.0, "command line", 20.0)
    # the figures use each cluster's own: c1's SLO 45 s, c2's default 300 s; c1's grace 20 s, c2's 30 s
    lag = [{"time": T0 + i * 30, "group_id": "g", "topic": "t", "lag_seconds_max": s} for i, s in
           enumerate([10.0, 50.0, 100.0, 400.0])]
    gl = frame(spark, "group_lag", lag).unionByName(frame(spark, "group_lag", lag, cluster="c2"))
    limits = A.thresholds(cl, W)
    share = {r["cluster"]: (r["slo_share"], r["slo_s"])
             for r in rows(A.consumer_lag(gl, A.poll_intervals(cl, W), W, limits))}
    assert share == {"c1": (0.25, 45.0), "c2": (0.75, 300.0)}
    tx = [{"time": T0, "transactional_id": "x", "start_time": T0 - 85, "age_seconds": 85.0, "timeout_ms": 60_000}]
    tr = frame(spark, "transactions", tx).unionByName(frame(spark, "transactions", tx, cluster="c2"))
    stuck = {r["cluster"]: (r["stuck"], r["grace_s"]) for r in rows(A.transaction_detail(tr, W, limits))}
    assert stuck == {"c1": (True, 20.0), "c2": (False, 30.0)}  # open 85 s with a 60 s timeout


def test_headline_equals_the_duckdb_reference_with_incidents_and_recorded_thresholds(spark: Any,
                                                                                       tmp_path: Path) -> None:
    """The figures bench/bench_spark.py cross-checks at scale, on a small history: Spark and DuckDB agree. The
    monitor's own incident (its history could not be written) is listed by kind, but the headline's incident
    figures are the cluster's: before, it counted as one more incident opened, and its 300 s moved the MTTR."""
    from bench.bench_spark import CROSS_CHECKED, HISTOGRAM_ALPHA, HISTOGRAM_FIGURES, duckdb_headline

    duckdb = pytest.importorskip("duckdb")
    recorded = {"lag_seconds_slo": 45.0, "txn_timeout_grace_s": 20.0}
    times = every(10, start=9000)

    def put(table: str, rs: list[dict[str, Any]]) -> None:
        _write_by_day(tmp_path, table, rs)

    put("cluster", _v2_polls(times, recorded))
    put("topic_health", [{"time": T0 + t, "topic": "t", "under_replicated": 0, "under_min_isr": 0, "offline": 0}
                         for t in times])
    put("brokers", [{"time": T0 + t, "broker_id": 1, "alive": i != 3} for i, t in enumerate(times)])
    put("incident_events", [*INCIDENT_EVENTS, _inc(6000, "opened", "H", "monitor", 6000),
                            _inc(6300, "resolved", "H", "monitor", 6000)])
    put("alert_events", [_alert("open", "under_min_isr", f"t-{p}", 9010) for p in range(3)])
    put("group_lag", [{"time": T0 + t, "group_id": "g", "topic": "t", "lag_max": 5, "lag_seconds_max": 10.0 * i,
                       "status": "OK", "below_log_start": 0} for i, t in enumerate(times)])
    put("transactions", [{"time": T0 + 9000, "transactional_id": "x", "start_time": T0 + 9000 - 85,
                          "age_seconds": 85.0, "timeout_ms": 60_000},
                         *[{"time": T0 + t, "transactional_id": "y", "start_time": T0 + t - 5, "age_seconds": 5.0,
                            "timeout_ms": 60_000, "producer_id": 7 if i < 4 else 8, "producer_epoch": ep}
                           for i, (t, ep) in enumerate(zip(times[:5], (0, 1, 3, 3, 5), strict=True))]])
    put("loss_events", [  # a truncation and the group that read past it, both recorded again after a restart
        *[{"time": T0 + t, "kind": kind, "topic": "t", "partition": 0, "group_id": group, "epoch_before": 5,
           "epoch_after": 7, "offset": 900, "messages": n, "evidence": f"at {t}"}
          for t in (9100, 9160) for kind, group, n in (("truncation", None, 40), ("offset_beyond_log_end", "g", 25))],
        *[{"time": T0 + t, "kind": "retention_skipped", "topic": "t", "partition": 1, "group_id": "g",
           "messages": 7, "evidence": f"at {t}"} for t in (9200, 9260)]])
    frames = {k: v.df for k, v in io.read_history(spark, str(tmp_path), PREV.start, W.end).items()}
    tables = weekly_report.collect_week(spark, frames, W, A.Options())
    [h] = weekly_report.headline_table(tables).to_pylist()
    duck = duckdb_headline(duckdb.connect(), tmp_path, W)
    from bench.bench_spark import ledger_by_kind

    ledger = {"truncation": (1, 40), "offset_beyond_log_end": (1, 25), "retention_skipped": (2, 14)}
    assert ledger_by_kind(tables["data_lost"].to_pylist()) == duck["losses_by_kind"] == ledger
    assert duck["messages_lost"] == 54
    figures = dict(INCIDENT_FIGURES, longest_incident_minutes=(9270 - 100) / 60)  # G open up to the last poll
    for name, want in figures.items():
        assert h[name] == pytest.approx(want) and duck[name] == pytest.approx(want), name
    assert h["alert_episodes_opened"] == duck["alert_episodes_opened"] == 3
    assert h["lag_slo_share"] == pytest.approx(5 / 10) and h["stuck_transactions"] == 1  # SLO 45 s, grace 20 s
    # the report keeps the stuck transaction itself; the counts come from the summary (6 seen, the longest 85 s)
    assert [r["transactional_id"] for r in tables["transactions"].to_pylist()] == ["x"]
    assert tables["transaction_summary"].to_pylist() == [
        {"cluster": "c1", "transactions_seen": 6, "stuck_transactions": 1, "longest_open_s": 85.0}]
    assert (h["transactions_seen"], h["longest_open_txn_s"]) == (duck["transactions_seen"],
                                                                 duck["longest_open_txn_s"]) == (6, 85.0)
    by_id = {r["transactional_id"]: (r["transactions_seen"], r["stuck"]) for r in
             tables["transactions_by_id"].to_pylist()}
    assert by_id == {"x": (1, 1), "y": (5, 0)}
    assert h["epoch_bumps"] == duck["epoch_bumps"] == 3  # 0 -> 1 -> 3 by producer 7; producer 8 starts anew
    [limits] = tables["thresholds"].to_pylist()
    assert (limits["lag_slo_s"], limits["txn_grace_s"]) == (duck["lag_slo_s"], duck["txn_grace_s"]) == (45.0, 20.0)
    [exact] = weekly_report.headline_table(weekly_report.collect_week(
        spark, frames, W, A.Options(percentiles=A.EXACT))).to_pylist()
    for name in CROSS_CHECKED:
        if name in duck and name not in ("min_broker_availability", "zk_elections"):
            assert (exact[name] is None and duck[name] is None) or exact[name] == pytest.approx(duck[name]), name
            # by default the lag percentiles come from the histograms: within 1 %, relative; the rest is the same
            rel = HISTOGRAM_ALPHA if name in HISTOGRAM_FIGURES else 1e-6
            assert (h[name] is None and duck[name] is None) or h[name] == pytest.approx(duck[name], rel=rel), name
    assert h["worst_lag_seconds_p99"] != duck["worst_lag_seconds_p99"]  # really the histogram's (88.37 vs 89.1)
    assert {r["kind"]: r["opened"] for r in tables["incident_kinds"].to_pylist()} == duck["incidents_by_kind"]
    assert duck["incidents_by_kind"]["monitor"] == 1
    # the polls stop 2.6 hours into the week, with incidents open: the report counts them open at the end, as of the
    # last poll, and says so (before, only "open at the end", as if they had been seen open all week)
    c = weekly_report.Computed(W, PREV, tables, *[pa.table({})] * 3, {}, {})
    [polls] = tables["polls"].to_pylist()
    notes = weekly_report.incidents_doc("c1", c, polls, now=W.end + 3600)["incident_notes"]
    assert notes == [f"The polls of this cluster stop at {datetime.fromtimestamp(T0 + 9270, UTC):%Y-%m-%dT%H:%M:%SZ}, "
                     "6 d 21 h before the week's end: the 3 incidents open then are listed open, each up "
                     "to that poll. No collector polled the cluster after it, so whether and when they ended was not "
                     "recorded."]
    assert h["incidents_open_at_end"] == 3


DAY_AFTER = W.end + 86400  # a weekly run's time: every poll of the week is in the history by then


@pytest.mark.parametrize(("open_now", "last", "interval", "now", "said"), [
    (2, W.end - 90, 30.0, DAY_AFTER, None),  # three polls before the end: fine
    (2, W.end - 91, 30.0, DAY_AFTER, "1 min 31 s before the week's end: the 2 incidents"),
    (0, W.start, 30.0, DAY_AFTER, None),  # nothing open: nothing to say
    (1, None, None, DAY_AFTER, None),  # no polls this week: the missing days' note says it
    (1, W.start, None, DAY_AFTER, None),  # one poll: no interval to judge by
    # made during the week: a running collector's newest polls may not be flushed yet (HISTORY_LAG_S)
    (1, W.start + 7200, 30.0, W.start + 7200 + 600, None),
    (1, W.start + 7200, 30.0, W.start + 7200 + 3601, "1 h 00 min before this report"),
    (1, W.start + 7200, 30.0, W.start + 3600, None),  # a last poll ahead of the report's clock
    # made just after the week: the same allowance; two hours without a poll is a stop
    (1, W.end - 600, 30.0, W.end + 300, None),
    (1, W.end - 7200, 30.0, W.end + 300, "2 h 00 min before the week's end"),
])
def test_incidents_open_when_the_polls_stop_are_said_to_be_as_of_the_last_poll(
        open_now: int, last: float | None, interval: float | None, now: float, said: str | None) -> None:
    """A collector that stops with incidents open and is followed by none leaves them open: counted open at the
    end, each up to its last poll (nothing recorded whether they ended). The report says so when that poll is more
    than `STALE_POLLS` intervals before the week's end, and more than `HISTORY_LAG_S` before the report."""
    polls = None if last is None else {"last_poll": last, "poll_interval_s": interval}
    note = weekly_report.stopped_polls_note(open_now, polls, W.end, now)
    assert (note is None) == (said is None) and (said is None or said in note), note


# ----------------------------------------------------------------------------------------------- alert episodes


def _alert(event: str, rule: str, subject: str, first: float, resolved: float | None = None,
           severity: str = "critical") -> dict[str, Any]:
    return {"time": T0 + (resolved if event == "resolve" else first), "event": event, "rule": rule,
            "severity": severity, "subject": subject, "summary": f"{rule} {subject}", "first_seen": T0 + first,
            "last_seen": T0 + (resolved or first), "resolved_at": None if resolved is None else T0 + resolved}


def test_an_alert_open_for_weeks_is_in_the_week_by_its_daily_restate(spark: Any) -> None:
    """The collector records an open alert again daily (``restate``); the report loads two weeks of events, so an
    alert opened three weeks ago is one episode open through the week, not absent (its opening is not loaded)."""
    day = 86_400.0
    ev = frame(spark, "alert_events", [
        {**_alert("restate", "under_min_isr", "t-0", -21 * day), "time": T0 + d * day} for d in range(-6, 7)])
    polls = A.poll_intervals(polls_df(spark, every(2, start=7 * day - 60)), W)  # last poll 30 s before the end
    (e,) = rows(A.alert_episodes(ev, polls, W))
    assert (e["status"], e["start"], e["end"], e["opened_in_period"]) == ("open", T0 - 21 * day, None, False)
    assert e["open_for_s"] == 28 * day - 30 and e["minutes_in_period"] == pytest.approx((7 * day - 30) / 60)
    (s,) = rows(A.alert_summary(A.alert_episodes(ev, polls, W)))
    assert (s["episodes"], s["opened"], s["open_at_end"]) == (1, 0, 1)


def test_alert_episodes_durations_mttr_and_open_at_week_end(spark: Any) -> None:
    ev = frame(spark, "alert_events", [
        _alert("open", "under_min_isr", "t-0", 100), _alert("resolve", "under_min_isr", "t-0", 100, 400),
        _alert("open", "under_min_isr", "t-1", 1000), _alert("resolve", "under_min_isr", "t-1", 1000, 1120),
        _alert("open", "broker_down", "broker-2", 5000),  # never resolved: open at the end
        _alert("resolve", "zk_quorum_lost", "c1", -600, 60),  # opened last week, resolved this week
        _alert("open", "lso_gap", "t-2", 200, severity="warning"),  # collector restart: re-opened at 900
        _alert("open", "lso_gap", "t-2", 900, severity="warning"),
        _alert("resolve", "lso_gap", "t-2", 900, 960, severity="warning"),
        _alert("open", "hanging_transaction", "t-3", 7 * 86400 - 100),  # resolved after the week: open in it
        _alert("resolve", "hanging_transaction", "t-3", 7 * 86400 - 100, 7 * 86400 + 100),
        _alert("open", "offline_partition", "t-4", -900), _alert("resolve", "offline_partition", "t-4", -900, -300),
    ])
    polls = A.poll_intervals(polls_df(spark, every(2, start=9000)), W)  # last poll at 9030
    inc = {(r["rule"], r["start"] - T0): r for r in rows(A.alert_episodes(ev, polls, W))}
    assert ("offline_partition", -900) not in inc  # wholly in the previous week
    a = inc[("under_min_isr", 100)]
    assert (a["status"], a["duration_s"], a["end"] - T0) == ("resolved", 300.0, 400.0)
    assert inc[("under_min_isr", 1000)]["duration_s"] == 120.0
    b = inc[("broker_down", 5000)]
    assert b["status"] == "open" and b["end"] is None and b["open_for_s"] == 4030.0  # up to the last poll
    z = inc[("zk_quorum_lost", -600)]
    assert z["status"] == "resolved" and z["duration_s"] == 660.0 and not z["opened_in_period"]
    assert z["minutes_in_period"] == pytest.approx(1.0)
    assert inc[("lso_gap", 200)]["status"] == "superseded" and inc[("lso_gap", 200)]["duration_s"] is None
    assert inc[("hanging_transaction", 7 * 86400 - 100)]["status"] == "open"
    summary = {r["rule"]: r for r in rows(A.alert_summary(A.alert_episodes(ev, polls, W)))}
    assert summary["under_min_isr"]["mttr_s"] == 210.0 and summary["under_min_isr"]["resolved"] == 2
    assert summary["broker_down"]["open_at_end"] == 1 and summary["broker_down"]["mttr_s"] is None
    t = empty_tables(spark)
    t["alert_events"], t["cluster"] = ev, polls_df(spark, every(2, start=9000))
    [h] = headline_rows(spark, t, W)
    # Version-1 history (no incident records): the incident figures fall back to the alert episodes.
    # opened this week: 100, 1000, 5000, 200, 900, week end - 100; resolved this week: 300, 120, 660, 60 s
    assert h["incidents_opened"] == h["alert_episodes_opened"] == 6
    assert h["incidents_open_at_end"] == 2 and h["critical_incidents"] == 4
    assert h["mttr_minutes"] == pytest.approx((300 + 120 + 660 + 60) / 4 / 60)
    assert h["longest_incident_minutes"] == pytest.approx(4030 / 60)  # broker_down, open up to the last poll


# ----------------------------------------------------------------------------------------------- brokers


def test_broker_availability_and_controller_changes(spark: Any) -> None:
    times = every(4)
    br = frame(spark, "brokers", [
        {"time": T0 + t, "broker_id": b, "host": None if (b == 2 and i == 1) else "h", "alive": not (b == 2 and i == 1),
         "is_controller": b == 1,
         # the collector writes a down broker as unreachable too; broker 3 is registered and silent at poll 2
         "reachable": not ((b == 2 and i == 1) or (b == 3 and i == 2))}
        for i, t in enumerate(times) for b in (1, 2, 3) if not (b == 3 and i == 3)])  # 3 missing from a poll
    polls = A.poll_intervals(polls_df(spark, times), W)
    got = {r["broker_id"]: r for r in rows(A.broker_availability(br, polls, W))}
    assert got[1]["availability"] == 1.0 and got[1]["controller_polls"] == 4
    assert got[2]["availability"] == 0.75 and got[2]["down_minutes"] == pytest.approx(0.5) and got[2]["host"] == "h"
    assert got[3]["availability"] == 0.75
    # "registered but unreachable": broker 3's silent poll, not broker 2's poll while down
    assert [got[b]["unreachable_polls"] for b in (1, 2, 3)] == [0, 0, 1]
    ctl = [1, 1, None, 2, 2, 1]
    cl = frame(spark, "cluster", [{"time": T0 + i * 30, "controller_id": c, "reachable": True}
                                  for i, c in enumerate(ctl)]
               + [{"time": T0 - 30, "controller_id": 3, "reachable": True}])  # last week: 3 -> 1 at the first poll
    changes = rows(A.controller_changes(cl, W), "time")
    assert [(r["controller_before"], r["controller_after"]) for r in changes] == [(3, 1), (1, 2), (2, 1)]
    [h] = rows(A.cluster_health(cl, A.poll_intervals(cl, W), W))
    assert h["no_controller_polls"] == 1 and h["no_controller_minutes"] == pytest.approx(0.5)


# ----------------------------------------------------------------------------------------------- consumers


def _lag_rows(n: int, group: str = "g", topic: str = "t") -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        status = "ERR" if i < 4 else ("WARN" if i < 10 else "OK")
        out.append({"time": T0 + i * 30, "group_id": group, "topic": topic, "state": "Stable", "members": 1,
                    "status": status, "lag_max": i + 1, "lag_sum": i + 1, "lag_seconds_max": float(i + 1),
                    "partitions": 1, "below_log_start": 0})
    return out


def test_lag_percentiles_slo_share_and_status_minutes(spark: Any) -> None:
    gl = frame(spark, "group_lag", [*_lag_rows(100), {"time": T0 + 5, "group_id": "idle", "topic": None,
                                                     "state": "Empty", "lag_max": None, "below_log_start": 0}])
    polls = A.poll_intervals(polls_df(spark, every(100)), W)
    [r] = rows(A.consumer_lag(gl, polls, W, slo_s=90.0, exact=False))  # the topic-less row is left out
    assert (r["lag_p50"], r["lag_p95"], r["lag_p99"], r["lag_max"]) == (50.0, 95.0, 99.0, 100.0)  # nearest rank
    assert (r["lag_seconds_p50"], r["lag_seconds_p99"], r["lag_seconds_max"]) == (50.0, 99.0, 100.0)
    assert r["polls"] == 100 and r["slo_share"] == pytest.approx(0.9)
    assert r["err_minutes"] == pytest.approx(2.0) and r["warn_minutes"] == pytest.approx(3.0)
    [e] = rows(A.consumer_lag(gl, polls, W, slo_s=90.0, exact=True))
    assert (e["lag_p50"], e["lag_p95"], e["lag_p99"]) == pytest.approx((50.5, 95.05, 99.01))  # interpolated


def test_slo_share_ignores_unknown_lag_seconds(spark: Any) -> None:
    gl = frame(spark, "group_lag", [
        {"time": T0 + i * 30, "group_id": "g", "topic": "t", "lag_max": 5, "lag_seconds_max": s, "status": "OK"}
        for i, s in enumerate([None, None, 10.0, 400.0])])
    polls = A.poll_intervals(polls_df(spark, every(4)), W)
    [r] = rows(A.consumer_lag(gl, polls, W))
    assert r["polls_with_lag_seconds"] == 2 and r["slo_share"] == 0.5
    never = frame(spark, "group_lag", [{"time": T0, "group_id": "g", "topic": "t", "lag_seconds_max": None}])
    assert rows(A.consumer_lag(never, polls, W))[0]["slo_share"] is None


def test_retention_loss_episodes_follow_consecutive_polls(spark: Any) -> None:
    # irregular polls: gaps of 30, 45, 20 ... seconds; the condition holds at polls 0-2, 4, 6-7 (poll 3 and 5 clean)
    times = [0, 30, 75, 95, 140, 200, 230, 300]
    flags = [2, 1, 1, 0, 1, 0, 3, 3]
    gl = frame(spark, "group_lag", [
        {"time": T0 + t, "group_id": "g", "topic": "t", "below_log_start": f, "lag_max": 1}
        for t, f in zip(times, flags, strict=True)])
    idx = A.poll_index(polls_df(spark, times), A.poll_intervals(polls_df(spark, times), W), W)
    eps = rows(A.retention_loss_episodes(gl, idx, W), "start")
    assert [(e["start"] - T0, e["end"] - T0, e["polls"], e["max_partitions"]) for e in eps] == [
        (0, 75, 3, 2), (140, 140, 1, 1), (230, 300, 2, 3)]
    median_gap = sorted(b - a for a, b in itertools.pairwise(times))[3]
    assert eps[0]["duration_s"] == 75 + median_gap


# ----------------------------------------------------------------------------------------------- transactions


def test_transactions_seen_stuck_longest_and_epoch_bumps(spark: Any) -> None:
    def tx(t: float, tid: str, start: float, age: float, epoch: int, pid: int = 7, state: str = "Ongoing",
           timeout: int = 60_000) -> dict[str, Any]:
        return {"time": T0 + t, "transactional_id": tid, "state": state, "producer_id": pid, "producer_epoch": epoch,
                "timeout_ms": timeout, "start_time": T0 + start, "age_seconds": age, "partitions": ["t-0"]}

    tr = frame(spark, "transactions", [
        tx(-30, "a", -40, 10, 0),  # last week: context for the epoch comparison only
        tx(0, "a", -40, 40, 0), tx(30, "a", -40, 69, 0),  # 69 s < 60 + 30 s grace: not stuck
        tx(60, "a", 55, 5, 1), tx(90, "a", 85, 5, 1),
        tx(120, "a", 115, 5, 3),  # two bumps between polls (restarts while no transaction was open)
        tx(150, "a", 145, 5, 0, pid=8),  # a new producer id starts again at 0: no bump
        tx(0, "b", -200, 200, 4, pid=9, state="PrepareAbort"), tx(30, "b", -200, 230, 4, pid=9, state="PrepareAbort"),
        tx(0, "c", -100, 100, 2, pid=11), tx(30, "c", -100, 130, 3, pid=12, state="PrepareCommit"),
    ])
    detail = rows(A.transaction_detail(tr, W), "transactional_id", "start_time")
    assert len(detail) == 7  # a: -40, 55, 85, 115, 145; b: -200; c: -100
    stuck = [(d["transactional_id"], d["max_age_s"]) for d in detail if d["stuck"]]
    assert stuck == [("b", 230.0), ("c", 130.0)]
    assert sum(d["stuck"] for d in rows(A.transaction_detail(tr, W, grace_s=0.0))) == 3  # 69 s > 60 s
    # the stuck ones with what on-call needs to find them: the last state and producer, every state seen
    found = rows(A.stuck_transactions(tr, A.transaction_detail(tr, W), W), "transactional_id")
    assert [tuple(f) for f in found] == [A.STUCK_COLUMNS] * 2
    assert [(f["transactional_id"], f["last_state"], f["states"], f["producer_id"], f["producer_epoch"],
             f["partitions"], f["polls"], f["max_age_s"], f["first_seen"] - T0) for f in found] == [
        ("b", "PrepareAbort", ["PrepareAbort"], 9, 4, ["t-0"], 2, 230.0, 0.0),
        ("c", "PrepareCommit", ["Ongoing", "PrepareCommit"], 12, 3, ["t-0"], 2, 130.0, 0.0)]
    bumps = {r["transactional_id"]: r for r in rows(A.producer_epoch_bumps(tr, W))}
    assert (bumps["a"]["epoch_bumps"], bumps["a"]["epoch_increases"]) == (3, 2)
    assert bumps["b"]["epoch_bumps"] == 0
    by_id = {r["transactional_id"]: r for r in rows(A.transactions_by_id(A.transaction_detail(tr, W),
                                                                         A.producer_epoch_bumps(tr, W)))}
    assert by_id["a"]["transactions_seen"] == 5 and by_id["a"]["longest_open_s"] == 69.0 and by_id["a"]["stuck"] == 0
    assert by_id["b"]["stuck"] == 1 and by_id["c"]["stuck"] == 1


def test_epoch_rises_at_transaction_v2_polls_are_no_bumps_from_rows_or_days(spark: Any) -> None:
    """Where the cluster ran Transaction V2 (its ``cluster`` row says ``transaction_version`` 2), every
    transaction end bumps the epoch: an increase into or out of such a poll is not counted (unless the producer had
    proved it keeps V1's rules: the next test), from the rows as from the daily roll-up (`epoch_days`, whose first
    and last observation say whether they ran V2, so no bridge across midnight is counted either). Polls at level 0
    or unknown count as before."""
    from spark_analytics.aggregations.transactions import epoch_days

    day = 86_400.0
    times = [-30.0, 0.0, 30.0, 60.0, 90.0, 120.0, day - 30, day + 30, day + 60, 2 * day + 30, 2 * day + 60]
    levels = [None, 0, 0, 2, 2, 2, 2, 2, 0, 0, 0]  # upgraded to V2 at 60 s, back to 0 on the second day
    tr = frame(spark, "transactions", [
        {"time": T0 + t, "transactional_id": "a", "state": "Ongoing", "producer_id": 7, "producer_epoch": i,
         "timeout_ms": 60_000, "start_time": T0 + t - 1, "age_seconds": 1.0, "partitions": ["t-0"]}
        for i, t in enumerate(times)])
    clusters = frame(spark, "cluster", [{"time": T0 + t, "transaction_version": v} for t, v in zip(times, levels,
                                                                                                 strict=True)])
    # counted: -30 s -> 0 (the week before as context, level unknown), 0 -> 30 s, then day+60 -> 2d+30 -> 2d+60;
    # not: every rise into a V2 poll (60 s to day+30) and the one out of it (day+30 -> day+60)
    want = 4
    old = rows(A.producer_epoch_bumps(tr, W))[0]["epoch_bumps"]
    assert old == len(times) - 1  # without the cluster table: every rise into the week counted, as before
    raw = rows(A.producer_epoch_bumps(tr, W, clusters))[0]
    assert (raw["epoch_bumps"], raw["epoch_increases"]) == (want, want)
    days = epoch_days(tr, PREV.start, W.end, clusters)
    from_days = rows(A.producer_epoch_bumps_from_days(days, W))[0]
    assert (from_days["epoch_bumps"], from_days["epoch_increases"]) == (want, want)
    assert (from_days["first_epoch"], from_days["last_epoch"]) == (raw["first_epoch"], raw["last_epoch"])


def test_an_older_clients_restarts_on_a_v2_cluster_count_as_the_collector_counted_them(spark: Any,
                                                                                       tmp_path: Path) -> None:
    """The collector's Transaction V1 proof kept in the history (``transactions.keeps_v1``): from the rows the
    collector itself wrote (`snapshot_columns`) for an older client restarting on a V2 cluster, each instance
    beginning two transactions, then upgraded to a Kafka 4 client (30 V2 ends before the next poll), the report
    counts the rises the collector counted (`collectors.model.txn_clients`), each rise out of a proved epoch as one,
    from the rows, from the daily roll-ups across midnight and in the DuckDB reference; the same rows without the
    proof (files written before it was kept) count none, as before."""
    import duckdb

    from bench.bench_spark import duckdb_headline
    from collectors.model.snapshot import build_snapshot
    from collectors.model.state import ClusterState
    from collectors.outputs.history.rows import snapshot_columns
    from spark_analytics.aggregations.transactions import epoch_days
    from tests.unit.test_txn_clients import TH, observation

    st = ClusterState()
    t0 = T0 + 86_400 - 4 * 30  # nine polls 30 s apart: the fifth at the week's first midnight
    tables: dict[str, list[dict[str, Any]]] = {"transactions": [], "cluster": []}
    for i, epoch in enumerate((10, 10, 11, 11, 12, 12, 13, 13, 43)):
        now = t0 + 30 * i
        snap = build_snapshot("c1", observation(now, epoch, "Ongoing", now - 1.0), None, st, TH, now)
        for name, cols in snapshot_columns(snap).items():
            if name in tables:
                tables[name] += [dict(zip(cols, values, strict=True), time=now)
                                 for values in zip(*cols.values(), strict=True)]
    collector = len(st.producer_epochs["tx"]) - 1  # the rules count every entry but the first
    assert collector == 4 and [r["keeps_v1"] for r in tables["transactions"]] == [False, True] * 4 + [False]
    clusters = frame(spark, "cluster", tables["cluster"])
    for keeps, want in ((True, collector), (False, 0)):
        txns = [dict(r, keeps_v1=r["keeps_v1"] if keeps else None) for r in tables["transactions"]]
        tr = frame(spark, "transactions", txns)
        raw = rows(A.producer_epoch_bumps(tr, W, clusters))[0]
        days = rows(A.producer_epoch_bumps_from_days(epoch_days(tr, PREV.start, W.end, clusters), W))[0]
        assert (raw["epoch_bumps"], raw["epoch_increases"]) == (want, want) == (
            days["epoch_bumps"], days["epoch_increases"]), keeps
        root = tmp_path / str(keeps)
        _write_by_day(root, "transactions", txns)
        _write_by_day(root, "cluster", tables["cluster"])
        assert duckdb_headline(duckdb.connect(), root, W)["epoch_bumps"] == want, keeps


def test_first_jobs_are_both_weeks_thresholds_and_this_weeks_polls_while_the_caller_reads_on(spark: Any) -> None:
    """The report's first three jobs run together while the caller goes on (reading the other tables): the same
    tables as run one at a time, and the caller's work done on its own thread, its result handed back."""
    import threading

    from collectors.alerting.thresholds import Thresholds

    recorded = {**Thresholds().model_dump(), "lag_seconds_slo": 45.0}
    cl = (frame(spark, "cluster", _v2_polls([0, 30, 60, 120], recorded))
          .unionByName(polls_df(spark, [-7 * 86400 + 30 * i for i in range(5)])))  # last week: no record
    caller = threading.current_thread()
    started: list[int] = []

    def meanwhile() -> str:
        assert threading.current_thread() is caller
        started.append(threading.active_count())
        return "read"

    limits, polls, got = weekly_report.first_jobs(cl, W, A.Options(), meanwhile)
    assert got == "read" and started
    assert set(limits) == {W, PREV}
    for period in (W, PREV):
        assert limits[period].to_pylist() == A.thresholds(cl, period).toArrow().to_pylist()
    assert [r["lag_slo_s"] for r in limits[W].to_pylist()] == [45.0]
    assert [r["lag_slo_s"] for r in limits[PREV].to_pylist()] == [A.DEFAULT_LAG_SLO_S]
    assert polls.to_pylist() == A.poll_intervals(cl, W).toArrow().to_pylist()
    assert [(r["polls"], r["poll_interval_s"]) for r in polls.to_pylist()] == [(4, 30.0)]


def test_compute_tables_shares_the_frames_that_more_than_one_built_table_is_made_from(spark: Any) -> None:
    """`shared` is what the built tables use more than once (the caller caches those): the transactions' detail,
    the epoch bumps, the poll index — counted from the tables asked for, never a frame only one of them reads."""
    t = empty_tables(spark)
    t["cluster"] = polls_df(spark, every(4))

    def shared_for(only: set[str] | None) -> list[Any]:
        got: list[Any] = []
        A.compute_tables(t, W, A.Options(), only=None if only is None else frozenset(only), shared=got)
        return got

    assert len(shared_for(None)) == 3
    assert shared_for({"transaction_summary", "epoch_bumps", "hanging_transactions"}) == []  # each read once
    [detail] = shared_for({"transactions", "transaction_summary"})
    assert "stuck" in detail.columns and "epoch_bumps" not in detail.columns
    [bumps] = shared_for({"epoch_bumps", "transactions_by_id"})  # the detail only once, by transactions_by_id
    assert "epoch_bumps" in bumps.columns
    [idx] = shared_for({"retention_loss", "zk_follower_behind"})
    assert "idx" in idx.columns


def test_compute_tables_hands_over_early_only_the_tables_that_read_nothing_shared(spark: Any) -> None:
    """`ready` gets each table as soon as it is built (the report starts running it while the rest are planned),
    but never one made from an intermediate frame (the caller caches those first, or they are computed twice); the
    returned tables are the same set either way."""
    t = empty_tables(spark)
    t["cluster"] = polls_df(spark, every(4))
    early: list[str] = []
    planned = A.compute_tables(t, W, A.Options(), ready=lambda name, df: early.append(name) or None)
    assert planned.keys() == A.compute_tables(t, W, A.Options()).keys()
    readers = {"retention_loss", "transactions", "transaction_summary", "epoch_bumps", "transactions_by_id",
               "hanging_transactions", "zk_follower_behind"}  # of the poll index, the detail, the bumps
    assert set(early) == set(planned) - readers
    assert early == [name for name in planned if name in early]  # in the order they are built
    alone: list[str] = []  # asked for alone, the bumps are read once and not shared, but still wait
    A.compute_tables(t, W, A.Options(), only=frozenset({"epoch_bumps", "cluster_health"}),
                     ready=lambda name, df: alone.append(name) or None)
    assert alone == ["cluster_health"]


def test_hanging_transactions_and_lso_gap_percentiles(spark: Any) -> None:
    times = every(5)
    pr = frame(spark, "producers", [
        {"time": T0 + t, "topic": "t", "partition": 1, "producer_id": 99, "producer_epoch": 0, "txn_start_offset": 10,
         "hanging": i != 2} for i, t in enumerate(times)])
    idx = A.poll_index(polls_df(spark, times), A.poll_intervals(polls_df(spark, times), W), W)
    eps = rows(A.hanging_transactions(pr, idx, W), "start")
    assert [(e["polls"], e["start"] - T0) for e in eps] == [(2, 0), (2, 90)]  # one transaction, two episodes
    lso = frame(spark, "lso_gap", [{"time": T0 + i, "topic": "t", "partition": i % 2, "lso_gap": i + 1}
                                   for i in range(100)])
    [g] = rows(A.lso_gaps(lso, W))  # exact, interpolated (the default)
    assert (g["lso_gap_p50"], g["lso_gap_p95"], g["lso_gap_p99"]) == pytest.approx((50.5, 95.05, 99.01))
    assert g["lso_gap_max"] == 100
    [a] = rows(A.lso_gaps(lso, W, exact=False))
    assert (a["lso_gap_p50"], a["lso_gap_p95"], a["lso_gap_p99"]) == (50, 95, 99)
    assert g["partitions"] == 2 and g["partition_polls"] == 100


# ----------------------------------------------------------------------------------------------- consensus


def _zk(t: float, server: str, mode: str | None, epoch: int | None, counter: int = 0, serving: bool = True,
        lag: int | None = None) -> dict[str, Any]:
    zxid = None if epoch is None else (epoch << 32) | counter
    return {"time": T0 + t, "kind": "zookeeper", "server": server, "serving": serving, "mode": mode, "zxid": zxid,
            "zxid_epoch": epoch, "zxid_counter": None if epoch is None else counter, "lag_behind_leader": lag}


def test_zookeeper_elections_with_zxid_zero_followers(spark: Any) -> None:
    cs = frame(spark, "consensus", [
        _zk(-30, "s1", "leader", 1, 90), _zk(-30, "s2", "follower", 1, 90), _zk(-30, "s3", "follower", 1, 90),
        _zk(0, "s1", "leader", 1, 100), _zk(0, "s2", "follower", 1, 100), _zk(0, "s3", "follower", 1, 100),
        # s1 killed; s2 elected with epoch 2; s3 reports zxid 0 right after the election
        _zk(30, "s1", None, None, serving=False), _zk(30, "s2", "leader", 2, 0), _zk(30, "s3", "follower", 0, 0),
        # s1 back, still on the previous epoch
        _zk(60, "s1", "follower", 1, 100), _zk(60, "s2", "leader", 2, 30), _zk(60, "s3", "follower", 2, 30),
        # a poll where only a lagging follower answered: the max dips to epoch 1 and comes back, no election
        _zk(90, "s1", "follower", 1, 100), _zk(90, "s2", None, None, serving=False),
        _zk(90, "s3", None, None, serving=False),
        _zk(120, "s1", "follower", 2, 90), _zk(120, "s2", "leader", 2, 90), _zk(120, "s3", "follower", 2, 89, lag=1),
        # second real election
        _zk(150, "s1", "leader", 3, 0), _zk(150, "s2", None, None, serving=False), _zk(150, "s3", "follower", 0, 0),
        _zk(180, "s1", "leader", 3, 60), _zk(180, "s2", "follower", 3, 60), _zk(180, "s3", "follower", 3, 58, lag=2),
        _zk(210, "s1", "leader", 3, 120), _zk(210, "s2", "follower", 3, 120), _zk(210, "s3", "follower", 3, 119, lag=1),
    ])
    el = rows(A.zk_elections(cs, W), "time")
    assert [(e["time"] - T0, e["epoch_before"], e["epoch_after"], e["leader"]) for e in el] == [
        (30, 1, 2, "s2"), (150, 2, 3, "s1")]
    # a naive per-server count would see s1 1->2 at 120, s3 0->2 at 60 ... : many more
    times = every(8)
    polls = A.poll_intervals(polls_df(spark, times), W)
    [q] = rows(A.zk_quorum(cs, polls, W))
    assert q["zk_polls"] == 8 and q["no_quorum_polls"] == 1 and q["minutes_without_quorum"] == pytest.approx(0.5)
    idx = A.poll_index(polls_df(spark, times), polls, W)
    fb = rows(A.zk_follower_behind(cs, idx, W), "start")
    assert [(f["server"], f["start"] - T0, f["polls"], f["max_lag"]) for f in fb] == [("s3", 120, 1, 1),
                                                                                       ("s3", 180, 2, 2)]
    rate = {r["epoch"]: r for r in rows(A.zk_write_rate(cs, W))}
    assert rate[1]["writes"] == 0 and rate[2]["writes"] == 90 and rate[2]["writes_per_s"] == pytest.approx(1.0)
    assert rate[3]["writes"] == 120 and rate[3]["writes_per_s"] == pytest.approx(2.0)


def test_kraft_leader_changes_and_voter_lag(spark: Any) -> None:
    def v(t: float, node: int, role: str, leader: int, epoch: int, lag: int | None) -> dict[str, Any]:
        return {"time": T0 + t, "kind": "kraft", "server": f"voter-{node}", "node_id": node, "mode": role,
                "leader_id": leader, "leader_epoch": epoch, "lag": lag, "high_watermark": 100}

    cs = frame(spark, "consensus", [
        v(i * 30, n, "leader" if n == ldr else "voter", ldr, ep, (0 if n == ldr else i + n))
        for i, (ldr, ep) in enumerate([(1, 5), (1, 5), (2, 6), (2, 6), (3, 8)]) for n in (1, 2, 3)])
    ch = rows(A.kraft_leader_changes(cs, W), "time")
    assert [(c["epoch_before"], c["epoch_after"], c["leader_before"], c["leader_after"]) for c in ch] == [
        (5, 6, 1, 2), (6, 8, 2, 3)]
    polls = A.poll_intervals(polls_df(spark, every(5)), W)
    lag = {r["node_id"]: r for r in rows(A.kraft_voter_lag(cs, polls, W))}
    # node 1 lags 0 0 3 4 5, node 2: 2 3 0 0 6 (nearest-rank p50 = 2), node 3 leads at the end
    assert lag[3]["role"] == "leader" and lag[1]["lag_max"] == 5.0 and lag[1]["lag_p50"] == 3.0
    assert lag[2]["lag_max"] == 6.0 and lag[2]["lag_p50"] == 2.0 and lag[2]["polls"] == 5


# ----------------------------------------------------------------------------------------- headline, week over week


def _headline(spark: Any, values: dict[str, dict[str, float | None]]) -> Any:
    """Hand-made headline rows: {cluster: {metric: value}}; unnamed metrics are null."""
    from spark_analytics.aggregations.headline import HEADLINE_SCHEMA

    return pa.Table.from_pylist([{"cluster": c, **{n: v.get(n) for n in A.HEADLINE_NAMES}} for c, v in values.items()],
                                schema=HEADLINE_SCHEMA)


def test_week_over_week_with_and_without_a_previous_week(spark: Any) -> None:
    cur = _headline(spark, {"c1": {"under_min_isr_minutes": 1.0, "isr_shrinks": 0.0, "lag_slo_share": 0.95,
                                   "min_broker_availability": 1.0, "zk_elections": None, "polls": 20160.0},
                            "c2": {"under_min_isr_minutes": 0.5}})
    prev = _headline(spark, {"c1": {"under_min_isr_minutes": 0.5, "isr_shrinks": 0.0, "lag_slo_share": 0.99,
                                    "min_broker_availability": 0.9, "zk_elections": 2.0, "polls": 20000.0}})
    wow = {(r["cluster"], r["metric"]): r for r in A.week_over_week(cur, prev).to_pylist()}
    assert len(wow) == 2 * len(A.HEADLINE)

    def get(cluster: str, metric: str) -> tuple[Any, ...]:
        r = wow[(cluster, metric)]
        return r["this_week"], r["last_week"], r["change"], r["change_pct"], r["worse"]

    assert get("c1", "under_min_isr_minutes") == (1.0, 0.5, 0.5, 1.0, True)
    assert get("c1", "isr_shrinks") == (0.0, 0.0, 0.0, None, False)  # no change: not worse; no % of 0
    assert get("c1", "lag_slo_share")[4] is True  # a lower share is worse
    assert get("c1", "lag_slo_share")[2] == pytest.approx(-0.04)
    assert get("c1", "min_broker_availability")[4] is False  # higher availability is better
    assert get("c1", "zk_elections") == (None, 2.0, None, None, None)
    assert get("c1", "polls")[4] is None  # neutral figure
    # c2 has no previous week at all: every comparison is null, nothing is "worse"
    assert get("c2", "under_min_isr_minutes") == (0.5, None, None, None, None)
    assert not any(r["worse"] for (c, _), r in wow.items() if c == "c2")
    metrics = [r["metric"] for r in A.week_over_week(cur, prev).to_pylist() if r["cluster"] == "c1"]
    assert metrics == list(A.HEADLINE_NAMES)


def test_empty_inputs_give_empty_tables_not_errors(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    planned = A.compute_tables(empty_tables(spark), W)
    # without summaries: those whose inputs are planned are left to the caller (the report summarises the collected
    # inputs), one asked for alone is still planned
    assert set(planned) - set(A.compute_tables(empty_tables(spark), W, summaries=False)) == set(A.SUMMARIES)
    assert set(A.compute_tables(empty_tables(spark), W, only=frozenset({"incident_kinds"}), summaries=False)) == {
        "incident_kinds"}
    c = compute(spark, str(tmp_path), W)  # an empty history directory: every table empty
    assert set(c.tables) == set(planned) | {"trend"}
    for name, table in c.tables.items():
        assert table.num_rows == 0 and table.schema.names == (
            A.trend([W], pa.table({}), pa.table({})).schema.names if name == "trend" else planned[name].columns), name
    assert c.headline.num_rows == 0 and c.previous_headline.num_rows == 0 and c.week_over_week.num_rows == 0
    assert all(t.num_rows == 0 for t in c.series.values())
    monkeypatch.setattr(weekly_report, "compute_with_retry", lambda *a, **k: c)
    assert main(["--history", str(tmp_path), "--week", "2026-W47", "--out", str(tmp_path / "o")], spark=spark) == 1
    err = capsys.readouterr().err
    assert "no polls in 2026-W47" in err and "Traceback" not in err and "rolled up" not in err
    assert not (tmp_path / "o").exists()
    # a week whose raw history retention removed, its roll-ups kept: said so, still nothing written
    c.rollup_days = [*W.days()[:2], "2026-11-01"]
    assert main(["--history", str(tmp_path), "--week", "2026-W47", "--out", str(tmp_path / "o")], spark=spark) == 1
    err = capsys.readouterr().err
    assert "2 days of 2026-W47 are rolled up, but roll-ups alone do not make a report" in err
    assert "four-week trend of the weeks after it" in err and not (tmp_path / "o").exists()


def test_a_week_without_polls_is_not_run_and_gives_what_running_it_would(spark: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A week nobody polled (last week of a new history) is not computed: its tables are empty with the schemas the
    computation would give, so the headline, the week over week and the written tables read them the same way."""

    t = empty_tables(spark)
    t["cluster"] = polls_df(spark, every(4))  # polls this week only
    t["group_lag"] = frame(spark, "group_lag", [{"time": T0 + s, "group_id": "g", "topic": "t", "lag_max": 5,
                                                 "lag_seconds_max": 2.0} for s in every(4)])
    t["brokers"] = frame(spark, "brokers", [{"time": T0 + s, "broker_id": 1, "alive": True} for s in every(4)])
    ran: list[str] = []
    skipped = weekly_report.collect_week(spark, t, PREV, A.Options())

    def run(df: Any) -> pa.Table:
        ran.append("x")
        return df.toArrow()

    monkeypatch.setattr(rollup, "empty_like", run)  # the same frames, run
    computed = weekly_report.collect_week(spark, t, PREV, A.Options())
    assert ran and set(skipped) == set(computed) and "consumer_lag" in skipped
    for name, table in skipped.items():
        assert table.num_rows == computed[name].num_rows == 0, name
        assert table.schema == computed[name].schema, name
    assert weekly_report.headline_table(skipped).num_rows == 0
    this_week = weekly_report.collect_week(spark, t, W, A.Options())
    assert this_week["consumer_lag"].num_rows == 1  # this week runs

    def no_plans(*a: Any, **k: Any) -> None:
        raise AssertionError("plans built for a week without polls")

    # the week before, given this week's tables (as the report does): their schemas, no plan built at all
    monkeypatch.setattr(A, "compute_tables", no_plans)
    alike = weekly_report.collect_week(spark, t, PREV, A.Options(), A.HEADLINE_INPUTS, like=this_week)
    assert set(alike) == set(A.HEADLINE_INPUTS)
    for name, table in alike.items():
        assert table.num_rows == 0 and table.schema == computed[name].schema, name
    with pytest.raises(AssertionError, match="plans built"):  # a week with polls is computed, like or not
        weekly_report.collect_week(spark, t, W, A.Options(), A.HEADLINE_INPUTS, like=this_week)


def test_headline_beside_last_week_and_clusters_without_zookeeper_or_transactions(spark: Any) -> None:
    t = empty_tables(spark)
    t["cluster"] = (polls_df(spark, every(4)).unionByName(polls_df(spark, every(4, start=-7 * 86400)))
                    .unionByName(polls_df(spark, every(3), cluster="c2")))
    t["topic_health"] = frame(spark, "topic_health", [
        {"time": T0 + s, "topic": "t", "under_min_isr": 1 if i < 2 else 0} for i, s in enumerate(every(4))]
        + [{"time": T0 - 7 * 86400 + s, "topic": "t", "under_min_isr": 1 if i < 1 else 0}
           for i, s in enumerate(every(4))])
    t["consensus"] = frame(spark, "consensus", [_zk(s, "z1", "standalone", 1, i) for i, s in enumerate(every(3))],
                           cluster="c2")
    head = {r["cluster"]: r for r in headline_rows(spark, t, W)}
    [prev] = headline_rows(spark, t, PREV)  # the previous week, computed the same way from the same frames
    assert (head["c1"]["under_min_isr_minutes"], prev["under_min_isr_minutes"]) == (1.0, 0.5)
    assert head["c1"]["polls"] == prev["polls"] == 4 and head["c1"]["isr_shrinks"] == 0
    assert head["c1"]["zk_elections"] is None and head["c1"]["zk_minutes_without_quorum"] is None  # unknown, not 0
    assert head["c2"]["zk_elections"] == 0 and head["c2"]["zk_minutes_without_quorum"] == 0
    assert head["c1"]["transactions_seen"] == 0 and head["c1"]["hanging_transactions"] == 0
    assert head["c1"]["lag_slo_share"] is None and head["c1"]["lso_gap_p99"] is None
    assert head["c1"]["kraft_leader_changes"] is None
    assert not any(isinstance(v, float) and math.isnan(v) for v in head["c1"].values())


# ----------------------------------------------------------------------------------------------- I/O


def _write(root: Path, table: str, day: str, name: str, cols: dict[str, list[Any]],
           meta: dict[bytes, bytes] | None = None, drop: tuple[str, ...] = ()) -> Path:
    """A file as written before schema version 4 (times as float64 epoch seconds, a name without a version)."""
    schema = SECONDS_TABLES[table]
    fields = [f for f in schema if f.name not in drop]
    n = len(next(iter(cols.values())))
    arrays = [pa.array(cols.get(f.name, [None] * n), type=f.type) for f in fields]
    t = pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=meta))
    d = root / table / f"date={day}"
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(t, d / name)
    return d / name


def _write_by_day(root: Path, table: str, rows: list[dict[str, Any]]) -> None:
    """`rows` (of cluster c1 unless they say) as `_write`'s files, one per UTC day of their times."""
    by_day: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_day.setdefault(datetime.fromtimestamp(r["time"], UTC).date().isoformat(), []).append(r)
    for day, part in by_day.items():
        _write(root, table, day, f"part-{table}-{day}.parquet",
               {f.name: [({"cluster": "c1", "schema_version": 2} | r).get(f.name) for r in part]
                for f in SECONDS_TABLES[table]})


def test_older_schema_files_read_with_nulls_and_a_note(spark: Any, tmp_path: Path) -> None:
    day = "2026-11-17"
    base = {"cluster": ["c1"], "time": [T0 + 86400 + 10], "schema_version": [1], "group_id": ["g"], "topic": ["t"],
            "lag_max": [5], "lag_seconds_max": [12.0], "status": ["OK"]}
    _write(tmp_path, "group_lag", day, "part-1-a.parquet", base)
    old = dict(base, time=[T0 + 86400 + 40], lag_max=[7])
    _write(tmp_path, "group_lag", day, "part-2-b.parquet", old, drop=("lag_seconds_max", "min_seconds_to_retention"))
    td = io.read_table(spark, str(tmp_path), "group_lag", W.start, W.end)
    got = rows(td.df, "time")
    assert [(r["lag_max"], r["lag_seconds_max"]) for r in got] == [(5, 12.0), (7, None)]
    assert td.df.columns == TABLES["group_lag"].names
    assert td.missing_columns == {"lag_seconds_max": 1, "min_seconds_to_retention": 1}
    notes = io.table_notes({"group_lag": td}, W.days())
    assert any("older schema" in n and "lag_seconds_max" in n for n in notes)


def test_a_missing_transaction_version_column_is_worth_no_note() -> None:
    """Older `cluster` files lack ``transaction_version`` and older `transactions` files ``keeps_v1``; null there
    counts epoch bumps as always, so saying so in every report over older history would be noise. Other missing
    columns still get their note."""
    td = io.TableData("cluster", None, ["f"] * 3, W.days()[:1], {"transaction_version": 3, "thresholds": 1}, 3)
    tx = io.TableData("transactions", None, ["f"] * 2, W.days()[:1], {"keeps_v1": 2, "partitions": 1}, 2)
    notes = io.table_notes({"cluster": td, "transactions": tx}, W.days()[:1])
    assert any("`thresholds`" in n for n in notes) and not any("transaction_version" in n for n in notes)
    assert any("`partitions`" in n for n in notes) and not any("keeps_v1" in n for n in notes)  # nor the V1 proof


def test_files_before_and_after_schema_version_4_side_by_side(spark: Any, tmp_path: Path) -> None:
    """A collector upgraded mid-day: float-second files (version 3) next to TIMESTAMP files in one day. Spark reads
    both, with the time columns as epoch seconds equal to the collector's reader's, and filters both on time."""
    from collectors.model.poll import PollResult
    from collectors.outputs.history import read_table
    from tests.support.history_fixture import broker_incident_snapshot
    from tests.support.mixed_history import write_upgraded_mid_day

    def polls(t: float) -> list[PollResult]:
        snap = broker_incident_snapshot(t, cluster="c1")
        return [PollResult(snap, opened=list(snap.alerts))]

    t_old, t_new = T0 + 86400 + 10.123456, T0 + 86400 + 70.654321
    write_upgraded_mid_day(tmp_path, polls(t_old), polls(t_new))
    for table, order in (("cluster", ("time",)), ("alert_events", ("time", "rule", "subject"))):
        td = io.read_table(spark, str(tmp_path), table, W.start, W.end)
        assert td.df.schema == io.spark_schema(table) and len(td.files) == 2
        got = rows(td.df, *order)
        want = read_table(tmp_path, table).sort_values(list(order), kind="stable")
        assert [r["time"] for r in got] == want["time"].tolist()
        assert sorted({r["schema_version"] for r in got}) == [3, 4]
        if table == "alert_events":
            assert [r["first_seen"] for r in got] == want["first_seen"].tolist()
    late = io.read_table(spark, str(tmp_path), "cluster", t_old + 1e-3, W.end)
    assert [r["time"] for r in rows(late.df)] == read_table(tmp_path, "cluster", start=t_new)["time"].tolist()
    assert len(rows(late.df)) == 1


def test_missing_table_is_an_empty_frame_with_the_schema(spark: Any, tmp_path: Path) -> None:
    td = io.read_table(spark, str(tmp_path), "consensus", W.start, W.end)
    assert td.df.count() == 0 and td.df.columns == TABLES["consensus"].names and not td.files
    assert any("consensus: no data" in n for n in io.table_notes({"consensus": td}, W.days()))


@pytest.mark.parametrize("hadoop", [False, True], ids=["local-lister", "hadoop-lister"])
def test_only_live_files_are_read(spark: Any, tmp_path: Path, hadoop: bool) -> None:
    day = "2026-11-18"
    row = {"cluster": ["c1"], "schema_version": [1], "topic": ["t"], "partition": [0], "lso_gap": [1]}
    a = _write(tmp_path, "lso_gap", day, "part-1-a.parquet", dict(row, time=[T0 + 2 * 86400 + 1]))
    b = _write(tmp_path, "lso_gap", day, "part-2-b.parquet", dict(row, time=[T0 + 2 * 86400 + 2]))
    # a compaction published (rows of a and b) but was killed before deleting its inputs
    _write(tmp_path, "lso_gap", day, "compact-3-c.parquet", dict(row, time=[T0 + 2 * 86400 + 1, T0 + 2 * 86400 + 2],
                                                                 cluster=["c1"] * 2, schema_version=[1] * 2,
                                                                 topic=["t"] * 2, partition=[0] * 2, lso_gap=[1, 1]),
           meta={REPLACES_KEY: json.dumps([a.name, b.name]).encode()})
    _write(tmp_path, "lso_gap", day, "part-4-d.parquet", dict(row, time=[T0 + 2 * 86400 + 3]))
    _write(tmp_path, "lso_gap", day, ".tmp-0123.parquet", dict(row, time=[T0 + 2 * 86400 + 4]))
    _write(tmp_path, "lso_gap", "2026-11-09", "part-0-z.parquet", dict(row, time=[T0 - 7 * 86400 + 5]))  # W46
    root = f"file://{tmp_path}" if hadoop else str(tmp_path)
    files = io.list_live_files(spark, root, "lso_gap", W.start, W.end, use_hadoop=hadoop)
    assert sorted(Path(f.removeprefix("file:")).name for f in files) == ["compact-3-c.parquet", "part-4-d.parquet"]
    td = io.read_table(spark, root, "lso_gap", W.start, W.end, use_hadoop=hadoop)
    assert [r["time"] - T0 - 2 * 86400 for r in rows(td.df, "time")] == [1, 2, 3]
    two_weeks = io.read_table(spark, root, "lso_gap", PREV.start, W.end, use_hadoop=hadoop)
    assert two_weeks.df.count() == 4
    assert not td.repeats and not any("byte for byte" in n for n in io.table_notes({"lso_gap": td}, W.days()))


@pytest.mark.parametrize("hadoop", [False, True], ids=["local-lister", "hadoop-lister"])
def test_a_copied_file_is_read_once_and_named_in_the_notes(spark: Any, tmp_path: Path, hadoop: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A history file copied under a new name (a restored backup beside the live files) is read once, and the
    report's notes say so; a file of the same size with another row is read as ever."""
    day = "2026-11-18"
    row = {"cluster": ["c1"], "schema_version": [1], "topic": ["t"], "partition": [0], "lso_gap": [1]}
    a = _write(tmp_path, "lso_gap", day, "part-1-a.parquet", dict(row, time=[T0 + 2 * 86400 + 1]))
    b = _write(tmp_path, "lso_gap", day, "part-2-b.parquet", dict(row, time=[T0 + 2 * 86400 + 2]))
    assert a.stat().st_size == b.stat().st_size
    shutil.copyfile(a, a.with_name("restored-a.parquet"))
    root = f"file://{tmp_path}" if hadoop else str(tmp_path)
    files = io.list_live_files(spark, root, "lso_gap", W.start, W.end, use_hadoop=hadoop)
    assert sorted(Path(f.removeprefix("file:")).name for f in files) == ["part-1-a.parquet", "part-2-b.parquet"]
    td = io.read_table(spark, root, "lso_gap", W.start, W.end, use_hadoop=hadoop)
    assert [r["time"] - T0 - 2 * 86400 for r in rows(td.df, "time")] == [1, 2]
    assert [(Path(k.removeprefix("file:")).name, Path(v.removeprefix("file:")).name)
            for k, v in td.repeats.items()] == [("restored-a.parquet", "part-1-a.parquet")]
    notes = [n for n in io.table_notes({"lso_gap": td}, W.days()) if "byte for byte" in n]
    assert notes == ["1 history file repeats another file of its day byte for byte (a copied or restored "
                     f"history?) and was read once (lso_gap 1), e.g. lso_gap/date={day}/restored-a.parquet repeats "
                     f"lso_gap/date={day}/part-1-a.parquet."]
    if hadoop:  # the session keeps its lister: a day listed again reads none of its files again
        from spark_analytics import hadoop_listing

        read: list[str] = []
        real = hadoop_listing.HadoopLister._rows_key
        monkeypatch.setattr(hadoop_listing.HadoopLister, "_rows_key",
                            lambda self, fs, path, size: read.append(path) or real(self, fs, path, size))
        io.list_live_files(spark, root, "lso_gap", W.start, W.end, use_hadoop=True)
        assert read == [] and hadoop_listing.lister_for(spark) is hadoop_listing.lister_for(spark)


@pytest.mark.parametrize("hadoop", [False, True], ids=["local-lister", "hadoop-lister"])
def test_an_empty_file_is_left_out_and_named_in_the_notes(spark: Any, tmp_path: Path, hadoop: bool) -> None:
    """A 0-byte history file (a copy or restore cut short: the collectors never publish one) is skipped by Spark
    without a word; listed apart, the notes name it, and a day whose only file it is reads as without data."""
    day, other = "2026-11-18", "2026-11-19"
    row = {"cluster": ["c1"], "schema_version": [1], "topic": ["t"], "partition": [0], "lso_gap": [1]}
    _write(tmp_path, "lso_gap", day, "part-1-a.parquet", dict(row, time=[T0 + 2 * 86400 + 1]))
    _write(tmp_path, "lso_gap", other, "part-2-b.parquet", dict(row, time=[T0 + 3 * 86400 + 1])).write_bytes(b"")
    root = f"file://{tmp_path}" if hadoop else str(tmp_path)
    td = io.read_table(spark, root, "lso_gap", W.start, W.end, use_hadoop=hadoop)
    assert [Path(f.removeprefix("file:")).name for f in td.files] == ["part-1-a.parquet"] and td.days == [day]
    assert [Path(f.removeprefix("file:")).name for f in td.empty] == ["part-2-b.parquet"]
    assert [r["time"] - T0 - 2 * 86400 for r in rows(td.df, "time")] == [1]
    assert [n for n in io.table_notes({"lso_gap": td}, W.days()) if "empty" in n] == [
        "1 history file is empty (0 bytes: a copy or restore cut short?) and was left out (lso_gap 1), e.g. "
        f"lso_gap/date={other}/part-2-b.parquet: the figures lack whatever rows they held."]
    alone = io.read_table(spark, root, "lso_gap", T0 + 3 * 86400, T0 + 4 * 86400, use_hadoop=hadoop)
    assert alone.files == [] and len(alone.empty) == 1 and alone.df.count() == 0
    assert io.list_live_files(spark, root, "lso_gap", W.start, W.end, use_hadoop=hadoop) == td.files


def test_a_damaged_history_file_is_left_out_of_the_report_and_named_in_its_notes(
        spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A file cut short or damaged past its footer fails the read that reaches it; Spark's error names it, the file
    is checked to be damaged, left out as the dashboard and the compaction leave it out, and the report is run again
    and says so in its notes, instead of failing until someone moves the file."""
    from collectors.outputs.history.files import known_damaged

    def polls(day: int) -> dict[str, list[Any]]:
        times = [T0 + day * 86400 + i * 600 for i in range(144)]
        return {"cluster": ["c1"] * 144, "schema_version": [1] * 144, "time": times, "reachable": [True] * 144,
                "controller_id": [1] * 144}

    good = _write(tmp_path, "cluster", "2026-11-18", "part-1-a.parquet", polls(2))
    bad = _write(tmp_path, "cluster", "2026-11-19", "part-2-b.parquet", polls(3))
    damage_pages(bad)
    with caplog.at_level(logging.WARNING, logger="spark_analytics.weekly_report"):
        c = weekly_report.compute_with_retry(spark, str(tmp_path), W, A.Options(), None)
    assert f"{bad} does not read (" in caplog.text
    assert "the report of 2026-W47 is computed again without it" in caplog.text
    td = c.data["cluster"]
    assert td.files == [str(good)] and list(td.damaged) == [str(bad)] and known_damaged(bad)
    assert c.tables["polls"].to_pylist()[0]["polls"] == 144  # the good day's
    notes = [n for n in io.table_notes(c.data, W.days()) if "not read (cut short" in n]
    assert len(notes) == 1 and notes[0].startswith(
        "1 history file does not read (cut short or damaged: a copy or restore?) and was left out (cluster 1), "
        "e.g. cluster/date=2026-11-19/part-2-b.parquet (")


def test_a_damaged_file_of_a_remote_history_is_left_out_and_named_too(
        spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A remote history (HDFS, S3: listed and read through Hadoop's FileSystem API) with a file damaged past its
    footer. Before, the report stopped there, every week, until someone moved the file: the local check
    (`collectors.outputs.history.files.damage`) cannot open a remote file. Now Spark reads the file it named on its
    own, and if that fails too the file is left out and named in the notes, as for a local history. The history is
    on local disk under a ``file://`` URI taken as remote: the one boundary moved (no HDFS or object store here);
    the listing and the reads go through the real Hadoop API."""
    real = io.is_remote
    monkeypatch.setattr(io, "is_remote", lambda p: str(p).startswith("file://") or real(p))

    def polls(day: int) -> dict[str, list[Any]]:
        times = [T0 + day * 86400 + i * 600 for i in range(144)]
        return {"cluster": ["c1"] * 144, "schema_version": [1] * 144, "time": times, "reachable": [True] * 144,
                "controller_id": [1] * 144}

    _write(tmp_path, "cluster", "2026-11-18", "part-1-a.parquet", polls(2))
    bad = _write(tmp_path, "cluster", "2026-11-19", "part-2-b.parquet", polls(3))
    damage_pages(bad)
    root = f"file://{tmp_path}"
    with caplog.at_level(logging.WARNING, logger="spark_analytics.weekly_report"):
        c = weekly_report.compute_with_retry(spark, root, W, A.Options(), None)
    assert "cluster/date=2026-11-19/part-2-b.parquet does not read (" in caplog.text
    assert str(tmp_path) not in caplog.text  # the file, not the root: a remote root may carry credentials
    td = c.data["cluster"]
    assert [Path(urlparse(f).path) for f in td.files] == [tmp_path / "cluster/date=2026-11-18/part-1-a.parquet"]
    assert [Path(urlparse(f).path) for f in td.damaged] == [bad]
    assert c.tables["polls"].to_pylist()[0]["polls"] == 144  # the good day's
    notes = [n for n in io.table_notes(c.data, W.days()) if "not read (cut short" in n]
    assert len(notes) == 1 and "e.g. cluster/date=2026-11-19/part-2-b.parquet (" in notes[0]
    # judged the same from a thread without an active session of its own (a caller's thread or pool): the default
    # session reads the file again; before, nothing was found there and the report stopped on the first error
    named = Exception(f"Encountered error while reading file file://{bad}")  # as Spark spells it: '=' unquoted
    with ThreadPoolExecutor(1) as pool:
        assert [Path(urlparse(f).path) for f in pool.submit(io.damaged_files, named, root).result()] == [bad]
    # a failure that names a file which reads (a passing network error) leaves it in, and is raised
    good_error = Exception("Encountered error while reading file " + (tmp_path / "cluster/date=2026-11-18/"
                                                                      "part-1-a.parquet").as_uri())
    assert io.damaged_files(good_error, root) == {}


def test_damaged_files_are_those_spark_names_under_the_root_that_do_not_read(tmp_path: Path) -> None:
    row = {"cluster": ["c1"], "schema_version": [1], "topic": ["t"], "partition": [0], "lso_gap": [7],
           "time": [T0 + 1]}
    fine = _write(tmp_path / "h", "lso_gap", "2026-11-16", "part-1.parquet", row)
    cut = _write(tmp_path / "h", "lso_gap", "2026-11-16", "part-2 x.parquet", row)
    cut_short(cut)
    outside = _write(tmp_path / "other", "lso_gap", "2026-11-16", "part-3.parquet", row)
    cut_short(outside)

    def error(*paths: Path) -> Exception:  # the line Spark's FAILED_READ_FILE errors carry, as URIs
        return Exception("\n".join(f"[FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
                                   f"{p.as_uri()}.  SQLSTATE: KD001" for p in paths))

    got = io.damaged_files(error(fine, cut, outside), str(tmp_path / "h"))
    assert list(got) == [cut] and "magic bytes" in got[cut]  # a space in the name: percent-encoded in the URI
    assert io.damaged_files(error(cut), f"file://{tmp_path / 'h'}") == got
    assert io.damaged_files(error(fine), str(tmp_path / "h")) == {}
    assert io.damaged_files(Exception("Connection refused"), str(tmp_path / "h")) == {}
    assert io.damaged_files(error(cut), "hdfs://nn/history") == {}  # not a file under that (remote) root


def test_cli_rejects_bad_arguments_with_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["--history", str(tmp_path), "--week", "2026-47", "--out", str(tmp_path / "o")]) == 2
    assert "--week" in capsys.readouterr().err
    assert main(["--history", str(tmp_path / "nope"), "--week", "2026-W47"]) == 2
    assert "--history" in capsys.readouterr().err
    assert main(["--history", str(tmp_path), "--lag-slo-seconds", "x"]) == 2
    assert "--lag-slo-seconds" in capsys.readouterr().err
    # the report is written with local file I/O: a remote --out is refused instead of becoming ./hdfs:/...
    for uri in ("hdfs:///kmon/reports", "s3a://bucket/reports"):
        assert main(["--history", str(tmp_path), "--out", uri]) == 2
        assert "--out" in capsys.readouterr().err
    assert not (Path.cwd() / "hdfs:").exists()
    args = weekly_report.parse_args(["--history", f"file://{tmp_path}", "--out", f"file://{tmp_path}/o"])
    assert args.out == tmp_path / "o" and args.opts.percentiles == A.HISTOGRAM and args.opts.rollups is None
    assert main(["--history", str(tmp_path), "--rollups", str(tmp_path / "none")]) == 2
    assert "--rollups" in capsys.readouterr().err
    assert main(["--history", str(tmp_path), "--exact-percentiles", "--approx-percentiles"]) == 2
    assert "not allowed with" in capsys.readouterr().err
    exact = weekly_report.parse_args(["--history", str(tmp_path), "--exact-percentiles", "--rollups", str(tmp_path)])
    assert exact.opts.percentiles == A.EXACT and exact.opts.rollups == str(tmp_path)
    assert main(["--history", str(tmp_path), "--class-archive", str(tmp_path)]) == 2
    assert "--class-archive" in capsys.readouterr().err
    assert rollup_job.main(["--history", str(tmp_path), "--class-archive", "hdfs:///x.jsa"]) == 2
    assert "--class-archive" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("")  # --rollups in the way of a file: named, not a traceback
    for where in ("a-file", "a-file/sub"):
        assert rollup_job.main(["--history", str(tmp_path), "--rollups", str(tmp_path / where)]) == 2
        assert "argument --rollups" in capsys.readouterr().err
    assert weekly_report.parse_args(["--history", str(tmp_path)]).class_archive is None
    monkeypatch.setenv(CLASS_ARCHIVE_ENV, str(tmp_path / "c.jsa"))  # the default (an image sets it)
    assert weekly_report.parse_args(["--history", str(tmp_path)]).class_archive == tmp_path / "c.jsa"
    assert rollup_job.parser().parse_args([]).class_archive == str(tmp_path / "c.jsa")
    # weeks at the ends of the calendar: named, exit 2, not an OverflowError from the weeks before it
    for far in ("0001-W01", "9999-W52"):
        assert main(["--history", str(tmp_path), "--week", far]) == 2
        assert f"argument --week: '{far}' is too near the ends of the calendar" in capsys.readouterr().err


def test_each_cluster_is_written_where_the_dashboard_looks(tmp_path: Path) -> None:
    """The job's output directory and the dashboard's lookup agree (both `spark_analytics.layout`); no Spark."""
    from collectors.outputs.paths import safe_name
    from dashboard.data import find_reports

    empty = pa.table({"cluster": pa.array([], pa.string())})
    needed = ("polls", "topic_replication", "consumer_lag", "incidents", "zk_elections", "transactions", "data_lost",
              "poll_gaps")
    c = weekly_report.Computed(W, PREV, {n: empty for n in needed}, empty, empty, empty, {}, {})
    names = ("prod eu/1", "a b", "a_b", "zürich 東京")
    written = {n: weekly_report.write_cluster(n, c, tmp_path, A.Options(), []) for n in names}
    assert len({d.parent for d in written.values()}) == len(names)  # a b and a_b no longer share a directory
    for name, directory in written.items():
        [found] = find_reports(tmp_path, name)
        assert (found.directory, found.week, found.summary["cluster"]) == (directory, W.label, name)
        assert found.html is not None and directory.relative_to(tmp_path).parts == (safe_name(name), W.label)


def test_the_reports_epoch_rule_is_the_dashboards_in_every_case(spark: Any) -> None:
    """`transactions._increase` (over columns, the report's) and `txn_clients.counted_increase` (the dashboard's
    table) are one rule written twice: they agree on every combination of producer id, epochs, V1 proof and
    Transaction V2 at either poll, nulls included but for the epochs: the report reads only observations with one
    (`_epoch_polls`), and over columns a null rise counts 1 out of an epoch proved V1 (`least` skips nulls)."""
    import itertools

    from pyspark.sql import functions as F

    from collectors.model.txn_clients import counted_increase
    from spark_analytics.aggregations.transactions import _increase

    flags = (None, False, True)
    cases = list(itertools.product((7, 8, None), (5,), (7, None), (3, 5, 6, 9), flags, flags, flags))
    schema = "prev_pid long, prev_epoch int, pid long, epoch int, prev_keeps boolean, prev_v2 boolean, v2 boolean"
    df = spark.createDataFrame(cases, schema)
    got = df.select(_increase(*[F.col(c) for c in df.columns]).alias("n")).collect()
    assert [r.n for r in got] == [counted_increase(*c) for c in cases]
    assert {counted_increase(*c) for c in cases} == {0, 1, 4}  # the rule's outcomes all occur (9 - 5: 4)
