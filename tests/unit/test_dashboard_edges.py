"""The dashboard's edge cases an on-call audit found: what a view says when the data is old, partial, idle or cut.

Each test names what the page showed before: an alert open all along missing from the timeline, a verdict of OK
on data hours old, lines falling to 0 while nothing was measured, groups nobody runs on the lag charts.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dashboard.views import alerts as av
from dashboard.views import common
from dashboard.views import consensus as csv
from dashboard.views import consumers as cv
from dashboard.views import losses as lv
from dashboard.views import overview as ov
from dashboard.views import reports as rpv
from tests.unit.test_dashboard_views import NOW, SPARK_SUMMARY, alert, consumer_doc, snapshot

# ----- History: the alert timeline


def _event(t: float, event: str, rule: str, subject: str, severity: str, first_seen: float,
           resolved_at: float | None = None) -> dict[str, Any]:
    return {"time": t, "cluster": "c1", "event": event, "rule": rule, "severity": severity, "subject": subject,
            "summary": f"{rule} {subject}", "first_seen": first_seen, "resolved_at": resolved_at}


def test_an_alert_open_across_the_whole_window_is_on_the_timeline() -> None:
    """Broker 3 down for 8 h, a 6 h window: ``alert_events`` has no row of it in the window (open 8 h ago, next
    restate in 16 h), so the timeline lacked the worst alert of all. The latest snapshot holds it open."""
    events = pd.DataFrame([_event(NOW - 1800, "open", "isr_flapping", "orders-0", "warning", NOW - 1800),
                           _event(NOW - 1700, "resolve", "isr_flapping", "orders-0", "warning", NOW - 1800,
                                  NOW - 1700)])
    down = alert("broker_down", "broker-3", "critical", NOW - 8 * 3600)
    docs = {"c1": snapshot(alerts=[down])}
    iv = av.alert_intervals(events, {"c1": NOW}, docs)
    assert iv[["rule", "start", "end", "open"]].values.tolist() == [
        ["broker_down", NOW - 8 * 3600, NOW, True], ["isr_flapping", NOW - 1800, NOW - 1700, False]]
    # nothing happened in the window at all: the open alert still shows
    only = av.alert_intervals(pd.DataFrame(), {"c1": NOW}, docs)
    assert only[["rule", "open", "lost"]].values.tolist() == [["broker_down", True, False]]
    # an alert both in the events and in the snapshot is one occurrence (history rounds first_seen to the µs)
    again = pd.DataFrame([_event(NOW - 60, "open", "broker_down", "broker-3", "critical", NOW - 60 + 4e-7)])
    both = av.alert_intervals(again, {"c1": NOW}, {"c1": snapshot(alerts=[alert("broker_down", "broker-3",
                                                                                "critical", NOW - 60)])})
    assert len(both) == 1 and bool(both.loc[0, "open"])
    # the axis starts at the window, not 8 h back, and the bar starts at the window's left edge
    fig = av.alert_timeline_figure(iv, "UTC", by_topic=False, start=NOW - 6 * 3600)
    assert pd.Timestamp(fig.layout.xaxis.range[0]) == common.epoch_to_axis([NOW - 6 * 3600], "UTC")[0]


def test_the_timeline_row_cap_keeps_open_and_severe_alerts_first() -> None:
    """60 flapping warnings in the last hour and broker 3 down (critical, open) since yesterday: the cap kept the
    60 most recently opened rows, so the one alert still open was not drawn."""
    rows = [_event(NOW - 86400, "open", "broker_down", "broker-3", "critical", NOW - 86400),
            _event(NOW - 7200, "open", "under_min_isr", "pay-0", "critical", NOW - 7200),
            _event(NOW - 7100, "resolve", "under_min_isr", "pay-0", "critical", NOW - 7200, NOW - 7100)]
    for i in range(60):
        t = NOW - 3600 + i * 30
        rows += [_event(t, "open", "isr_flapping", f"t{i}-0", "warning", t),
                 _event(t + 20, "resolve", "isr_flapping", f"t{i}-0", "warning", t, t + 20)]
    iv = av.alert_intervals(pd.DataFrame(rows), {"c1": NOW})
    fig = av.alert_timeline_figure(iv, "UTC", by_topic=False)
    drawn = {y for d in fig.data for y in d.y}
    assert "broker_down: broker-3" in drawn and "under_min_isr: pay-0" in drawn  # open, then critical
    assert len(drawn) == 60 and "isr_flapping: t0-0" not in drawn and "isr_flapping: t59-0" in drawn  # then recent
    assert "60 of 62 rows" in fig.layout.title.text
    assert not av.alert_timeline_figure(iv, "UTC", by_topic=False, max_rows=100).layout.title.text


# ----- Overview


def test_sparklines_leave_a_gap_where_the_cluster_was_unreachable() -> None:
    """An unreachable poll writes 0 under-replicated, 0 offline and no broker rows: the lines fell to 0 (all
    healthy) in the middle of an outage, and brokers up joined its two sides as if nothing happened."""
    t = [NOW - 60, NOW, NOW + 60]
    ch = pd.DataFrame({"time": t, "reachable": [True, False, True], "under_replicated": [4, 0, 4],
                       "under_min_isr": [2, 0, 2], "offline": [1, 0, 1], "alerts_open": [5, 1, 5]})
    bh = pd.DataFrame({"time": [NOW - 60] * 3 + [NOW + 60] * 3, "alive": [True, True, False] * 2,
                       "reachable": [True, True, None] * 2})
    fig = ov.sparklines_figure(ch, "UTC", bh)
    lines = {d.name: [float(v) for v in d.y] for d in fig.data if d.mode == "lines"}
    for name in ("under-replicated", "under min ISR", "offline partitions", "open alerts", "brokers up"):
        assert math.isnan(lines[name][1]) and not math.isnan(lines[name][0]), name
    assert lines["brokers up"][::2] == [2.0, 2.0]
    marks = [d for d in fig.data if d.name == "cluster unreachable"]
    assert len(marks) == 5 and list(marks[0].y) == [0.0]  # one x per small chart, on its baseline
    # reachable unknown (null, older history) is not unreachable
    unknown = ov.sparklines_figure(ch.assign(reachable=[None, None, None]), "UTC")
    assert not [d for d in unknown.data if d.name == "cluster unreachable"]
    assert [float(v) for v in unknown.data[0].y] == [4.0, 0.0, 4.0]


def test_stale_cluster_verdict_is_stale_not_ok() -> None:
    """The collector stopped 3 h ago with nothing open then: the badge said OK, and "No open alerts" was green."""
    doc = snapshot(time=NOW - 3 * 3600, written_at=NOW - 3 * 3600)
    fresh = common.freshness(doc, NOW, 90, "UTC")
    h = ov.health_line(doc, fresh)
    assert h["verdict"] == "STALE" and ov.VERDICT_COLORS["STALE"] and h["data"].startswith("STALE")
    assert ov.health_line(snapshot(), common.freshness(snapshot(), NOW, 90))["verdict"] == "OK"
    level, text = ov.no_alerts_message({"c1": fresh, "c2": common.freshness(snapshot(cluster="c2"), NOW, 90)})
    assert level == "warning" and "c1 (STALE, 3h 00m old)" in text and "c2" not in text
    assert ov.no_alerts_message({"c2": common.freshness(snapshot(cluster="c2"), NOW, 90)})[0] == "success"


def test_unreachable_cluster_whose_collector_stopped_is_stale() -> None:
    """Unreachable at its last poll, 6 h ago: the banner said "UNREACHABLE since …" for ever, never that the
    collector had stopped writing (the cluster may well be back)."""
    doc = snapshot(time=NOW - 6 * 3600, written_at=NOW - 6 * 3600, reachable=False, errors=["no broker answered"],
                   alerts=[alert("cluster_unreachable", "c1", "critical", NOW - 6 * 3600 - 300)])
    f = common.freshness(doc, NOW, 90, "UTC")
    assert f.level == "stale" and f.since == NOW - 6 * 3600
    assert "no new data from the collector for 6h 00m" in f.message and "Is the collector running?" in f.message
    assert "UNREACHABLE (since " + common.fmt_ts(NOW - 6 * 3600 - 300, "UTC") in f.message
    assert ov.health_line(doc, f)["verdict"] == "STALE"
    live = common.freshness(dict(doc, time=NOW - 5, written_at=NOW - 5), NOW, 90, "UTC")
    assert live.level == "unreachable"  # the collector still writes: unreachable it is


def test_no_data_lost_is_green_only_when_the_week_was_watched() -> None:
    """An empty ledger after a week with no poll at all was a green "No data lost"."""
    week = NOW - lv.WEEK_S
    nothing = lv.coverage([], week, NOW, 30.0)
    level, text = lv.no_loss_banner({"c1": (nothing, 30.0)})
    assert level == "warning" and "No loss recorded" in text and "polled c1 for less than 90%" in text
    full = lv.coverage([week + 30.0 * k for k in range(int(lv.WEEK_S // 30))], week, NOW, 30.0)
    assert lv.no_loss_banner({"c1": (full, 30.0)})[0] == "success"
    gap = lv.coverage([week + 30.0 * k for k in range(int(lv.WEEK_S // 30)) if not 100 <= k < 300], week, NOW, 30.0)
    assert gap.share >= lv.WATCHED_ENOUGH and gap.gaps
    assert lv.no_loss_banner({"c1": (gap, 30.0)})[0] == "info"
    assert lv.no_loss_banner({"c1": (full, 30.0), "c2": (nothing, 30.0)})[0] == "warning"


# ----- Consumers


def _idle_lag_history() -> pd.DataFrame:
    t = [NOW - 60, NOW]
    return pd.DataFrame({"time": t * 2, "group_id": ["billing"] * 2 + ["gone"] * 2, "topic": ["orders"] * 4,
                         "status": ["OK", "OK", "ABANDONED", "ABANDONED"], "lag_sum": [10, 12, 99_000, 99_500]})


def test_lag_charts_leave_out_groups_nobody_runs() -> None:
    """An ABANDONED group's 99,000 messages were the Overview's "total consumer lag" and the Consumers chart's
    largest series, while the Consumers table hides that group."""
    gl = _idle_lag_history()
    ch = pd.DataFrame({"time": [NOW - 60, NOW], "under_replicated": [0, 0], "under_min_isr": [0, 0],
                       "offline": [0, 0], "alerts_open": [0, 0]})
    fig = ov.sparklines_figure(ch, "UTC", None, gl[["time", "status", "lag_sum"]])
    total = next(d for d in fig.data if d.name == "total consumer lag")
    assert list(total.y) == [10.0, 12.0]
    assert [d.name for d in cv.lag_figure(gl, "UTC", "lag_sum", top_n=1).data] == ["billing / orders"]
    assert [d.name for d in cv.lag_figure(gl, "UTC", "lag_sum", groups=["gone"]).data] == ["gone / orders"]
    # a group that stopped being idle is judged as running again
    back = pd.concat([gl, pd.DataFrame({"time": [NOW + 60], "group_id": ["gone"], "topic": ["orders"],
                                        "status": ["ERR"], "lag_sum": [99_600]})], ignore_index=True)
    assert [d.name for d in cv.lag_figure(back, "UTC", "lag_sum", top_n=1).data] == ["gone / orders"]


def test_retention_risk_leaves_out_groups_nobody_runs() -> None:
    """An ABANDONED group's partition led the retention-risk table as DATA LOST."""
    doc = consumer_doc()
    doc["groups"].append({"group_id": "gone", "state": "Empty", "members": 0, "status": "ABANDONED",
                          "activity": "abandoned", "lag_sum": 99_000, "partitions": 1, "topics": ["orders"]})
    doc["group_partitions"] = [gp for gp in doc["group_partitions"] if gp["partition"] == 0] + [
        {"group_id": "gone", "topic": "orders", "partition": 2, "lag": 99_000, "below_log_start": True,
         "seconds_to_retention": 0.0, "status": "ABANDONED"}]
    r = cv.retention_risk_frame(doc)
    assert list(r["group"]) == ["billing"] and r.loc[0, "time to data loss"] == "1h 00m"
    picked = cv.retention_risk_frame(doc, groups=["gone"])
    assert list(picked["group"]) == ["gone"] and picked.loc[0, "time to data loss"] == "DATA LOST"


def test_largest_lag_is_the_largest_not_the_first_row() -> None:
    """The metric showed row 0 of the table, which is sorted by status: billing (ERR, 5 min) over ok-group (OK
    but 2 h behind)."""
    doc = consumer_doc()
    doc["groups"][0]["lag_seconds_max"] = 7200.0
    g = cv.groups_frame(doc, "UTC")
    assert g["lag"].iloc[0] == "5m 00s"  # what the metric said
    assert cv.largest_lag(g) == ("2h 00m", "ok-group")
    assert cv.largest_lag(g[g["group"] == "no-commits"]) == ("—", None)
    assert cv.largest_lag(g.iloc[0:0]) == ("—", None)


# ----- Consensus


def test_standalone_zookeeper_is_the_leader() -> None:
    """A one-server ensemble reports mode ``standalone``: the Consensus page said Leader: NONE (the Overview,
    counting standalone, said it had a leader)."""
    zk = csv.zookeeper_frame(snapshot(zookeeper=[{"server": "zk:2181", "serving": True, "mode": "standalone",
                                                  "zxid_epoch": 1, "zxid_counter": 5}]))
    assert zk[zk["mode"] == "leader"].empty  # the page's old test
    assert list(csv.zk_leaders(zk)["server"]) == ["zk:2181"]
    ensemble = csv.zookeeper_frame(snapshot(zookeeper=[
        {"server": "z1", "serving": False, "mode": "leader"}, {"server": "z2", "serving": True, "mode": "leader"},
        {"server": "z3", "serving": True, "mode": "follower"}]))
    assert list(csv.zk_leaders(ensemble)["server"]) == ["z2"]  # a server not serving leads nothing


# ----- History: the weekly report viewer


def test_weekly_summary_shows_the_data_lost_first() -> None:
    """The report's first section (the loss ledger) was on no card, table or note of the History page."""
    lost = [{"kind": "truncation", "subject": "orders-1", "topic": "orders", "events": 1, "messages": 1240,
             "first": NOW - 600, "last": NOW, "evidence": "hw 5000, epoch end 3760"}]
    figures, tables, notes = rpv.weekly_summary(dict(SPARK_SUMMARY, messages_lost=1240, data_lost=lost))
    assert figures[0] == rpv.Figure("Messages lost", "1,240")
    assert next(iter(tables)) == "Data lost"
    row = tables["Data lost"].iloc[0]
    assert row["first"] == pd.Timestamp(NOW - 600, unit="s", tz="UTC") and row["messages"] == 1240
    assert notes[0] == ("Data lost this week: 1,240 committed or unread messages (truncations and retention), "
                        "1 ledger line.")
    figures, tables, notes = rpv.weekly_summary(dict(SPARK_SUMMARY, messages_lost=0, data_lost=[]))
    assert figures[0] == rpv.Figure("Messages lost", "0") and "Data lost" not in tables
    assert notes[0].startswith("No data lost this week")
    figures, tables, _ = rpv.weekly_summary(SPARK_SUMMARY)  # a summary from before the ledger: nothing claimed
    assert figures[0].label != "Messages lost" and "Data lost" not in tables


def test_history_is_read_once_for_every_cluster_a_page_asks_for(tmp_path: Any, monkeypatch: Any) -> None:
    """The pages read history cluster by cluster; each read opened every file of the window's days again (16
    clusters over a day of minute flushes: 10-20 s a page). One read of all clusters now serves each of them."""
    from pathlib import Path

    from collectors.model.poll import PollResult
    from collectors.model.records import ClusterSnapshot
    from collectors.outputs.history import HistoryWriter
    from dashboard import data

    root = Path(tmp_path) / "history"
    w = HistoryWriter(root, flush_interval_s=0, retention_days=None)
    for k in range(4):
        for c in ("prod", "staging", "dev"):
            w.add(PollResult(ClusterSnapshot(cluster=c, time=NOW - 600 + 60 * k)))
        w.flush()
    reads: list[Any] = []
    real = data._read_window
    monkeypatch.setattr(data, "_read_window", lambda *a, **k: reads.append(a) or real(*a, **k))
    data._history_cached.clear()
    got = {c: data.read_history(root, "cluster", NOW - 900, None, [c], ["time"]) for c in ("prod", "staging", "dev")}
    assert len(reads) == 1 and reads[0][4] is None  # one read, of every cluster
    assert {c: (list(df.columns), len(df)) for c, df in got.items()} == {c: (["time"], 4) for c in got}
    both = data.read_history(root, "cluster", NOW - 900, None, ["prod", "dev"], ["cluster", "time"])
    assert len(reads) == 1 and sorted(set(both["cluster"])) == ["dev", "prod"] and len(both) == 8


def test_a_listing_answers_again_until_a_day_of_the_window_changes(tmp_path: Any, monkeypatch: Any) -> None:
    """A rerun reads one table several times (each cluster, the sidebar, the Overview's blocks): one listing of the
    window serves them while none of its ``date=`` directories changed; a file flushed into one is seen at once."""
    from pathlib import Path

    from collectors.model.poll import PollResult
    from collectors.model.records import ClusterSnapshot
    from collectors.outputs import history as hist
    from collectors.outputs.history import HistoryWriter
    from dashboard import data

    root = Path(tmp_path) / "history"
    w = HistoryWriter(root, flush_interval_s=0, retention_days=None)
    w.add(PollResult(ClusterSnapshot(cluster="prod", time=NOW - 120)))
    w.flush()
    listed: list[str] = []
    real = hist.live_files
    monkeypatch.setattr(hist, "live_files", lambda *a, **k: listed.append(a[1]) or real(*a, **k))
    first = data.history_signature(root, "cluster", NOW - 900, None)
    assert data.history_signature(root, "cluster", NOW - 900, None) == first and listed == ["cluster"]
    w.add(PollResult(ClusterSnapshot(cluster="prod", time=NOW - 60)))
    w.flush()  # a new file in the day: its directory changed
    assert data.history_signature(root, "cluster", NOW - 900, None) != first and listed == ["cluster", "cluster"]


# ----- History: a rerun after a flush reads what is new


DAY = 86_400.0
TODAY = NOW - NOW % DAY  # midnight (UTC) of NOW's day
YESTERDAY = TODAY - DAY
WINDOWS = [(None, None), (YESTERDAY + 5_000, None), (TODAY + 210, None), (YESTERDAY + 3_600, TODAY + 200)]
COLUMNS: list[list[str] | None] = [None, ["time"], ["schema_version", "cluster"]]  # the last without time: no sort
TABLES_READ = ("cluster", "group_lag", "partition_changes")


def _history(root: Any) -> Any:
    """Yesterday as a collector upgraded mid-day left it (files of both encodings), then today's flushes of two
    clusters by the real writer, one a poll. Returns that writer, for more flushes."""
    from collectors.model.poll import PollResult
    from collectors.outputs.history import HistoryWriter
    from tests.support.mixed_history import write_upgraded_mid_day
    from tests.unit.test_history import full_snapshot, polls_at

    write_upgraded_mid_day(root, polls_at(YESTERDAY + 3_600) + polls_at(YESTERDAY + 7_200), polls_at(YESTERDAY + 9_000))
    w = HistoryWriter(root, flush_interval_s=0, retention_days=None, compact_min_files=10**6)
    for k in range(6):
        for c in ("c1", "c2"):
            w.add(PollResult(full_snapshot(TODAY + 60 * k, c)))
        w.flush()
    return w


def _parquet(root: Any) -> set[str]:
    return {str(f) for f in root.rglob("*.parquet")}


def _rerun(root: Any, opened: list[str], tables: tuple[str, ...] = TABLES_READ) -> set[str]:
    """Every table, window and columns read as the pages read them, each checked against a full read of the files
    as they are (`read_table`: same rows, order, dtypes and columns); returns the files the reads opened."""
    from collectors.outputs import history as hist
    from dashboard import data

    opened.clear()
    cases = [(t, w, c) for t in tables for w in WINDOWS for c in COLUMNS]
    got = {(t, w, None if c is None else tuple(c)): data.read_history(root, t, *w, None, c) for t, w, c in cases}
    files = set(opened)
    for (table, (start, end), columns), df in got.items():
        want = hist.read_table(root, table, float(int(start // 60) * 60) if start is not None else None, end, None,
                               None if columns is None else list(columns))
        pd.testing.assert_frame_equal(df, want, obj=f"{table} {start} {end} {columns}")
    return files


def _fresh(monkeypatch: Any) -> list[str]:
    """Empty dashboard caches, and a list of the files every Parquet dataset made from then on is over."""
    import pyarrow.dataset as ds

    from dashboard import data

    for cache in (data._history_cached, data._listings, data._pieces, data._bounds):
        cache.clear()
    opened: list[str] = []
    real = ds.dataset

    def dataset(source: Any, *a: Any, **k: Any) -> Any:
        opened.extend(map(str, source if isinstance(source, list) else [source]))
        return real(source, *a, **k)

    monkeypatch.setattr(ds, "dataset", dataset)
    return opened


def test_a_rerun_after_a_flush_opens_only_the_new_files_for_the_same_rows(tmp_path: Any, monkeypatch: Any) -> None:
    """Each flush (a minute) changes the listing, and the next rerun read every file of the window's days again:
    3.6-3.7 s over a day of minute flushes. What a file held is now kept (published files never change), so a rerun
    opens only the new files; the frames are what a full read of the files gives, also across a compaction (which
    replaces files) and with files of both encodings in a day."""
    from collectors.model.poll import PollResult
    from tests.unit.test_history import full_snapshot

    root = tmp_path / "history"
    w = _history(root)
    opened = _fresh(monkeypatch)
    assert _rerun(root, opened)  # cold: the files of the windows
    assert _rerun(root, opened) == set()  # nothing new: the frames from the cache
    before = _parquet(root)
    w.add(PollResult(full_snapshot(TODAY + 400, "c1")))
    w.flush()
    new = _parquet(root) - before
    assert new and _rerun(root, opened) == {f for f in new if f.split("/")[-3] in TABLES_READ}
    before = _parquet(root)
    for table in TABLES_READ:
        assert w.compact(table, _day(YESTERDAY))
    compacts = _parquet(root) - before
    assert compacts and _rerun(root, opened) == compacts


def _day(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).date().isoformat()


def test_what_files_held_is_kept_within_its_budget(tmp_path: Any, monkeypatch: Any) -> None:
    """What files held is kept up to a budget of bytes, the least recently used dropped first; a rerun then opens
    again what was dropped, and reads the same rows."""
    from collectors.outputs.history import files as hist_files
    from dashboard import data

    root = tmp_path / "history"
    _history(root)
    opened = _fresh(monkeypatch)
    monkeypatch.setattr(data, "_pieces", hist_files._Recent(64 << 10, data._piece_weight))
    assert _rerun(root, opened, ("group_lag",))
    assert 0 < data._pieces.held <= 64 << 10 and len(data._pieces) < len(COLUMNS) * len(_parquet(root / "group_lag"))
    data._history_cached.clear()
    assert _rerun(root, opened, ("group_lag",))  # what fell out is read again, checked against a full read


def test_a_file_gone_or_damaged_since_the_listing_is_read_as_listed_now(tmp_path: Any, monkeypatch: Any) -> None:
    """A compaction or retention run deletes files between a listing and the read, and a damaged file shows only
    when read: the read is then `read_table`'s, which lists again and leaves damaged files out, not an error."""
    from pathlib import Path

    from collectors.outputs import history as hist
    from dashboard import data
    from tests.support.damage import damage_pages

    root = tmp_path / "history"
    _history(root)
    _fresh(monkeypatch)
    files = data.history_signature(root, "group_lag", None, None)
    Path(files[-1][0]).unlink()
    damage_pages(Path(files[-2][0]))
    got = data._read_window(root, "group_lag", None, None, None, None, files)
    want = hist.read_table(root, "group_lag")
    assert len(want) and len(set(want["time"])) == len({k[0] for k in files}) - 2
    pd.testing.assert_frame_equal(got, want)


def test_the_listing_memo_drops_the_least_recently_used_day_not_all_of_them(tmp_path: Any, monkeypatch: Any) -> None:
    """The memo of listings was cleared whole past 4,096 windows, so a busy dashboard listed every table's days
    again at once (a day of minute flushes: ~0.1 s a table and day). It keeps days now, least recently used out."""
    from collectors.outputs import history as hist
    from collectors.outputs.history import files as hist_files
    from dashboard import data

    root = tmp_path / "history"
    _history(root)
    _fresh(monkeypatch)
    monkeypatch.setattr(data, "_listings", hist_files._Recent(2))
    listed: list[tuple[str, float]] = []
    real = hist.live_files
    monkeypatch.setattr(hist, "live_files", lambda *a, **k: listed.append((a[1], a[2])) or real(*a, **k))
    data.history_signature(root, "cluster", None, None)  # yesterday and today
    data.history_signature(root, "group_lag", TODAY + 60, None)  # today: cluster's yesterday was the least used
    assert listed == [("cluster", YESTERDAY), ("cluster", TODAY), ("group_lag", TODAY)]
    listed.clear()
    data.history_signature(root, "cluster", TODAY + 120, None)  # another window, the same day: not listed again
    data.history_signature(root, "cluster", None, None)
    assert listed == [("cluster", YESTERDAY)]


def test_reruns_at_the_same_time_read_the_same_rows(tmp_path: Any, monkeypatch: Any) -> None:
    """Streamlit reruns each session on a thread of its own: reads at once share the caches of files and listings."""
    from concurrent.futures import ThreadPoolExecutor

    from collectors.outputs import history as hist
    from dashboard import data

    root = tmp_path / "history"
    _history(root)
    _fresh(monkeypatch)
    cases = [(t, w, c) for t in TABLES_READ for w in WINDOWS for c in COLUMNS] * 2
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda case: data.read_history(root, case[0], *case[1], None, case[2]), cases))
    for (table, (start, end), columns), df in zip(cases, got, strict=True):
        want = hist.read_table(root, table, float(int(start // 60) * 60) if start is not None else None, end, None,
                               columns)
        pd.testing.assert_frame_equal(df, want)


def test_a_window_shorter_than_its_days_opens_only_the_files_that_may_hold_its_rows(tmp_path: Any,
                                                                                    monkeypatch: Any) -> None:
    """A window of the last minutes opened every file of today (1,440 at a flush a minute); the files' footers say
    which times each holds (older float-second files too), and the others are left out."""
    from dashboard import data

    root = tmp_path / "history"
    _history(root)
    opened = _fresh(monkeypatch)

    def polls_in(files: list[str]) -> list[float]:
        import pyarrow.parquet as pq

        from collectors.outputs.history.schema import to_seconds

        times = (to_seconds(pq.read_table(f, columns=["time"]))["time"].to_pylist() for f in set(files))
        return sorted({t for each in times for t in each})

    late = data.read_history(root, "cluster", TODAY + 240, None, None, ["time"])
    assert late["time"].tolist() == [TODAY + 240] * 2 + [TODAY + 300] * 2
    assert polls_in(list(opened)) == [TODAY + 240, TODAY + 300]
    opened.clear()
    mid = data.read_history(root, "cluster", YESTERDAY + 5_000, YESTERDAY + 8_000, None, ["time"])
    assert mid["time"].tolist() == [YESTERDAY + 7_200] and polls_in(list(opened)) == [YESTERDAY + 7_200]
