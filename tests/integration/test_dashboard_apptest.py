"""Every dashboard page, run by Streamlit's AppTest on data a real collector wrote while the sandbox went
through incidents (tests/support/history_fixture.py): what on-call would see is asserted, not just "no crash"."""

from __future__ import annotations

import base64
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from collectors.model.records import BrokerRecord, ClusterSnapshot, PartitionRecord, TopicRecord, snapshot_to_dict
from collectors.outputs.latest_state import retire, write_latest
from dashboard.views.replication import STATE_CODE, partition_state

pytestmark = pytest.mark.integration

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboard"
APP = DASHBOARD / "app.py"
PAGES = ["overview", "replication", "consumers", "transactions", "consensus", "history"]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, dashboard_data: Any) -> Any:
    """Point the dashboard at the fixture's data; auto-refresh off; a poll interval that keeps it fresh."""
    monkeypatch.setenv("KMON_STATE_DIR", str(dashboard_data.state_dir))
    monkeypatch.setenv("KMON_HISTORY", str(dashboard_data.history_dir))
    monkeypatch.setenv("KMON_REPORTS", str(dashboard_data.reports_dir))
    monkeypatch.setenv("KMON_REFRESH", "0")
    monkeypatch.setenv("KMON_POLL_INTERVAL", "3600")
    return dashboard_data


def run_page(page: str, query: dict[str, str] | None = None, alone: bool = False) -> AppTest:
    """Run one page, through the app's navigation (default) or as a script of its own."""
    at = AppTest.from_file(str(DASHBOARD / "app_pages" / f"{page}.py" if alone else APP), default_timeout=60)
    at.context = {"timezone": "Europe/Berlin"}
    if alone or page == "overview":
        at.query_params.update(query or {})
        at.run()
    else:
        at.run()
        at.switch_page(f"app_pages/{page}.py")
        at.query_params.update(query or {})
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    parts = []
    for kind in ("title", "subheader", "markdown", "caption", "error", "warning", "info", "success"):
        parts += [str(e.value) for e in getattr(at, kind)]
    return "\n".join(parts)


def figures(at: AppTest) -> list[dict[str, Any]]:
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


def decode(v: Any) -> np.ndarray:
    """Plotly 7 ships arrays as base64 typed arrays; plain lists stay lists."""
    if isinstance(v, dict) and "bdata" in v:
        arr = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        shape = [int(x) for x in str(v.get("shape", len(arr))).split(",")]
        return arr.reshape(shape)
    return np.asarray(v, dtype=float)


def frame_with(at: AppTest, column: str) -> Any:
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no table with a {column!r} column")


# ----- pages on the incident data


def test_overview_lists_the_incident_alerts(env: Any) -> None:
    at = run_page("overview")
    open_rules = set(env.final_alerts)
    assert ("consumer_lag_status", "billing") in open_rules  # the fixture did what it should
    incidents = frame_with(at, "blast radius")  # incidents lead; the per-alert list is one click down
    assert "broker 2" in set(incidents["subject"]) and incidents["severity"].iloc[0] == "critical"
    assert not any("rule" in df.value.columns and "link" in df.value.columns for df in at.dataframe)
    at.toggle(key="ov_all_alerts").set_value(True).run()
    alerts = frame_with(at, "link")
    shown = set(zip(alerts["rule"], alerts["subject"], strict=False))
    for expected in [("consumer_lag_status", "billing"), ("broker_down", "broker-2"),
                     ("hanging_transaction", "orders-1")]:
        assert expected in shown
    assert shown == {(r, s) for r, s in open_rules}
    assert alerts["severity"].iloc[0] == "critical"  # critical first
    assert alerts[alerts["rule"] == "consumer_lag_status"]["link"].iloc[0] == \
        "./consumers?cluster=sandbox&group=billing"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Brokers up"] == "2/3" and int(metrics["Offline"]) >= 1 and metrics["Hanging txns"] == "1"
    assert "critical" in texts(at) and "CRITICAL" in texts(at)
    spark = figures(at)
    assert spark and {"under-replicated", "offline partitions"} <= {t["name"] for t in spark[0]["data"]}
    links = [pl.proto.page for pl in at.get("page_link")]
    assert links, "incidents link to the page that shows them"


@pytest.fixture
def incident_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A snapshot with a broker incident, a topic and a group incident and a risk (no sandbox, no history)."""
    from tests.support.history_fixture import broker_incident_snapshot

    doc = snapshot_to_dict(broker_incident_snapshot())
    write_latest(tmp_path / "state", doc)
    for var, sub in (("KMON_STATE_DIR", "state"), ("KMON_HISTORY", "history"), ("KMON_REPORTS", "reports")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("KMON_REFRESH", "0")
    monkeypatch.setenv("KMON_POLL_INTERVAL", "3600")
    return doc


def test_overview_leads_with_incidents_and_keeps_risks_apart(incident_env: dict[str, Any]) -> None:
    at = run_page("overview")
    broker = next(i for i in incident_env["incidents"] if i["kind"] == "broker")
    assert broker["summary"].startswith("broker 3 is down")
    rows = frame_with(at, "blast radius")
    assert list(rows["kind"]) == ["broker", "topic", "group"] and rows["summary"].iloc[0] == broker["summary"]
    assert rows["blast radius"].iloc[0] == "4 partitions on 2 topics · 1 offline · 3 at min ISR"
    card = [str(m.value) for m in at.markdown]
    assert f"- {broker['summary']}" in card  # the health card says the sentence, not a count
    assert "Under-replicated" not in {m.label for m in at.metric}
    members = [df.value for df in at.dataframe if list(df.value.columns) == ["severity", "rule", "subject",
                                                                             "open_for", "summary", "opened_utc"]]
    assert set(members[0]["subject"]) == {"broker-3", "orders-0", "orders-1", "orders-2", "single-0", "billing"}
    risks = next(e for e in at.expander if e.label.startswith("Risks: configuration and placement"))
    assert risks.label.endswith("1 open") and not risks.proto.expanded  # collapsed by default
    assert frame_with(at, "first step")[["rule", "subject"]].values.tolist() == [["unsafe_durability", "single"]]
    for df in members:  # a risk is never an incident's member
        assert "unsafe_durability" not in set(df["rule"])
    assert "unsafe_durability" not in set(rows["summary"])


def test_overview_is_served_at_slash_overview_too(incident_env: dict[str, Any]) -> None:
    """``/overview`` resolves to the page registered with that url_path (the hash a browser at /overview asks
    for), which sends the viewer to the Overview at "/" with the query parameters kept."""
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    at.switch_page("app_pages/overview.py")  # the page whose url_pathname is "overview"
    assert at._page_hash == calc_hash("overview")
    at.query_params["cluster"] = "inc"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Overview" and frame_with(at, "blast radius")["kind"].iloc[0] == "broker"
    assert at._finished_page_script_hash == calc_hash("home")  # the default page, served at "/"


def test_replication_heatmap_marks_the_crashed_brokers_partitions(env: Any) -> None:
    at = run_page("replication")
    heat = next(t for f in figures(at) for t in f["data"] if t["type"] == "heatmap")
    z = decode(heat["z"])
    rows = {topic: z[i] for i, topic in enumerate(heat["y"])}
    snap_parts = [p for p in env.last_snapshot["partitions"] if p["topic"] in ("single", "orders")]
    for p in snap_parts:  # every cell says what the snapshot says
        expected = partition_state(p["leader"], p["replicas"], p["isr"], p["min_insync_replicas"])
        assert rows[p["topic"]][p["partition"]] == STATE_CODE[expected], p
    # and what the incident did: broker 2 is down, so the RF 1 partition it held is offline and every orders
    # partition (RF 3, min ISR 2) has lost a replica
    on_broker_2 = [p["partition"] for p in snap_parts if p["topic"] == "single" and p["replicas"] == [2]]
    assert on_broker_2 and all(rows["single"][i] == STATE_CODE["offline"] for i in on_broker_2)
    assert all(rows["orders"][i] == STATE_CODE["under-replicated"] for i in range(3))
    assert heat["y"][0] == "single"  # worst topic first
    brokers = frame_with(at, "out of ISR now").set_index("broker")
    assert brokers.loc[2, "status"] == "DOWN" and brokers.loc[2, "leaders"] == 0
    assert brokers.loc[3, "ISR shrinks (range)"] >= 1  # broker 3's earlier crash, from history
    posture = frame_with(at, "failures before writes stop")
    assert set(posture["topic"]) >= {"orders", "single"}


def test_replication_honours_a_topic_link(env: Any) -> None:
    at = run_page("replication", {"topic": "single"})
    assert at.multiselect[0].value == ["single"]
    heat = next(t for f in figures(at) for t in f["data"] if t["type"] == "heatmap")
    assert heat["y"] == ["single"]


def test_consumers_page_shows_the_stalled_group(env: Any) -> None:
    at = run_page("consumers", {"group": "billing"})
    assert at.multiselect[0].value == ["billing"]
    groups = frame_with(at, "worst partition")
    billing = groups[groups["group"] == "billing"].iloc[0]
    assert billing["status"] == "ERR" and billing["worst partition"] in ("STALL", "STOP")
    assert billing["lag (messages)"] > 0
    parts = frame_with(at, "committed")
    assert set(parts["status"]) <= {"STALL", "STOP", "WARN"} and len(parts) == 3
    lag = figures(at)[0]
    assert [t["name"] for t in lag["data"]] == ["billing / orders"]
    assert decode(lag["data"][0]["y"])[-1] > decode(lag["data"][0]["y"])[0]  # lag grew during the stall


def test_transactions_page_highlights_the_hanging_transaction(env: Any) -> None:
    at = run_page("transactions")
    assert any("1 hanging transaction: " in str(e.value) and "It holds the LSO back" in str(e.value) for e in at.error)
    hanging = frame_with(at, "open since offset")
    assert hanging[["topic", "partition"]].values.tolist() == [["orders", 1]]
    gaps = frame_with(at, "LSO gap (messages)")
    assert gaps.iloc[0]["partition"] == "orders-1" and "HANGING" in gaps.iloc[0]["held by"]
    names = [t.get("name") for f in figures(at) for t in f["data"]]
    assert "orders-1" in names and "tx" in names  # LSO gap history and producer epochs


def test_consensus_page_shows_members_and_the_election(env: Any) -> None:
    at = run_page("consensus")
    zk = frame_with(at, "zxid (epoch:counter)")
    snap = {z["server"]: z for z in env.last_snapshot["zookeeper"]}
    assert set(zk["server"]) == set(snap) and zk.iloc[0]["mode"] == "leader"
    for row in zk.itertuples(index=False):
        z = snap[row.server]
        if z["serving"]:
            assert row[3] == f"{z['zxid_epoch']}:{z['zxid_counter']}"
    elections = frame_with(at, "epoch")
    assert len(elections) >= 1 and "→" in elections.iloc[0]["epoch"]
    timeline = figures(at)[0]
    assert any("election" in a.get("text", "") for a in timeline["layout"].get("annotations", []))


def test_history_page_timeline_and_weekly_report(env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    week = tmp_path / "reports" / "sandbox" / "2026-W47"
    week.mkdir(parents=True)
    (week / "summary.json").write_text(json.dumps({  # the shape spark_analytics/weekly_report.py writes
        "cluster": "sandbox", "week": "2026-W47", "previous_week": "2026-W46",
        "week_over_week": [{"metric": "offline_minutes", "label": "Offline partitions", "unit": "min", "polarity": 1,
                            "this_week": 12.5, "last_week": 2.5, "change": 10.0, "worse": True},
                           {"metric": "incidents_opened", "label": "Incidents opened", "unit": "", "polarity": 1,
                            "this_week": 4, "last_week": None, "change": None, "worse": None}],
        "worse_than_last_week": ["offline_minutes"], "notes": ["No polls on 2026-11-16."],
        "worst_topics": [{"topic": "single", "offline_minutes": 12.5}]}))
    (week / "report.html").write_text("<html><body><h1>Weekly reliability report</h1></body></html>")
    monkeypatch.setenv("KMON_REPORTS", str(tmp_path / "reports"))
    at = run_page("history")
    bars = [t for f in figures(at) for t in f["data"] if t["type"] == "bar"]
    labels = {y for t in bars for y in t["y"]}
    assert "broker_down: broker-3" in labels and "broker_down: broker-2" in labels
    assert {t["name"] for t in bars} >= {"critical", "critical (open)"}  # broker 3 resolved, broker 2 still open
    metrics = {m.label: m for m in at.metric}
    assert metrics["Offline partitions"].value == "12.5 min" and metrics["Incidents opened"].value == "4"
    assert "+10.0 min vs last week" in str(metrics["Offline partitions"].proto.delta)
    assert "No polls on 2026-11-16." in texts(at)
    assert frame_with(at, "worse")["worse"].tolist() == ["WORSE", ""]
    assert at.get("iframe"), "report.html is embedded"
    assert at.get("download_button")


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_alone(env: Any, page: str) -> None:
    at = run_page(page, alone=True)
    assert at.title and at.title[0].value
    assert "No latest state" not in texts(at)


# ----- staleness and empty states


@pytest.fixture
def copied_state(env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    state = tmp_path / "state"
    shutil.copytree(env.state_dir, state)
    monkeypatch.setenv("KMON_STATE_DIR", str(state))
    monkeypatch.delenv("KMON_POLL_INTERVAL")  # inferred from the history: the fixture polled every ~5 s
    yield state


def test_stale_data_is_flagged_with_since_when(env: Any, copied_state: Path) -> None:
    doc = dict(env.last_snapshot)
    old = time.time() - 3600
    doc["time"] = old
    write_latest(copied_state, doc, now=old)
    for page in ("overview", "replication"):
        at = run_page(page)
        warnings = [str(w.value) for w in at.warning]
        assert any("STALE" in w and "1h 00m" in w for w in warnings), warnings


def test_unreachable_cluster_is_a_big_warning(env: Any, copied_state: Path) -> None:
    doc = dict(env.last_snapshot)
    doc.update(reachable=False, stale=True, errors=["no broker answered within 3s"])
    write_latest(copied_state, doc)
    at = run_page("overview")
    errors = [str(e.value) for e in at.error]
    assert any("UNREACHABLE" in e and "no broker answered" in e for e in errors), errors
    assert {m.label: m.value for m in at.metric}


def quiet_cluster(state_dir: Path) -> None:
    """A snapshot with brokers, a topic and partitions but no groups, transactions or consensus; no history."""
    t = time.time()
    snap = ClusterSnapshot(
        cluster="quiet", time=t, mode="kraft", controller_id=1,
        brokers=[BrokerRecord("quiet", i, "127.0.0.1", 9090 + i, reachable=True, is_controller=i == 1)
                 for i in (1, 2, 3)],
        topics=[TopicRecord("quiet", "events", False, 2, 3, 2, False, 86_400_000, "delete",
                            failures_before_write_stop=1, failures_before_data_loss=2)],
        partitions=[PartitionRecord("quiet", "events", p, 1, 0, [1, 2, 3], [1, 2, 3], [], 2, 0, 10, 10)
                    for p in (0, 1)])
    write_latest(state_dir, snapshot_to_dict(snap))


@pytest.fixture
def quiet_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    quiet_cluster(tmp_path / "state")
    for var, sub in (("KMON_STATE_DIR", "state"), ("KMON_HISTORY", "history"), ("KMON_REPORTS", "reports")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("KMON_REFRESH", "0")
    return tmp_path


@pytest.mark.parametrize(("page", "explained"), [
    ("overview", "No history yet"),
    ("overview", "No open alerts"),
    ("transactions", "No transactions seen"),
    ("consumers", "No consumer groups seen"),
    ("consensus", "neither ZooKeeper servers nor a KRaft quorum"),
    ("history", "No history yet"),
    ("history", "No weekly report for quiet yet"),
    ("replication", "Every partition has its full ISR"),
])
def test_empty_states_are_explained(quiet_env: Path, page: str, explained: str) -> None:
    at = run_page(page)
    assert explained in texts(at)


def test_no_state_at_all_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMON_STATE_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("KMON_HISTORY", str(tmp_path / "none"))
    monkeypatch.setenv("KMON_REFRESH", "0")
    for page in PAGES:
        at = run_page(page)
        assert "No latest state found" in texts(at)


def test_a_retired_cluster_is_named_not_shown(env: Any, copied_state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster taken out of the collector's configuration leaves the cluster list, and the sidebar says so."""
    monkeypatch.setenv("KMON_POLL_INTERVAL", "3600")
    quiet_cluster(copied_state)
    last = time.time() - 7_200
    os.utime(copied_state / "quiet.json", (last, last))
    assert retire(copied_state, ["quiet"]) == ["quiet"]
    at = run_page("overview")
    assert not at.selectbox or at.selectbox[0].label != "Cluster"  # one cluster left: no choice to make
    note = next(str(c.value) for c in at.sidebar.caption if "No longer polled" in str(c.value))
    assert "**quiet** (last polled" in note and str(copied_state / "retired") in note
    assert "quiet" not in {str(m.label) for m in at.metric} and "Brokers up" in {m.label for m in at.metric}
    shutil.move(copied_state / "sandbox.json", copied_state / "retired" / "sandbox.json")  # every cluster retired
    at = run_page("overview")
    warning = next(str(w.value) for w in at.warning if "No latest state found" in str(w.value))
    assert "**sandbox**" in warning and "**quiet**" in warning


def test_two_clusters_and_a_cluster_link(env: Any, copied_state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMON_POLL_INTERVAL", "3600")
    quiet_cluster(copied_state)
    at = run_page("overview")
    cards = {m.label for m in at.metric}
    assert "Brokers up" in cards and len([m for m in at.metric if m.label == "Brokers up"]) == 2
    assert at.selectbox[0].label == "Cluster" and at.selectbox[0].value == "sandbox"  # the worse one first
    at = run_page("replication", {"cluster": "quiet"})
    assert at.selectbox[0].value == "quiet" and not at.warning
    heat = next(t for f in figures(at) for t in f["data"] if t["type"] == "heatmap")
    assert heat["y"] == ["events"]


def test_kraft_quorum_is_shown(quiet_env: Path) -> None:
    from collectors.outputs.latest_state import read_latest

    doc = read_latest(quiet_env / "state")["quiet"]
    doc["kraft_voters"] = [
        {"cluster": "quiet", "node_id": n, "role": "leader" if n == 1 else "voter", "log_end_offset": 500 - 10 * n,
         "lag": 10 * n - 10, "last_fetch_time": time.time(), "last_caught_up_time": time.time(), "leader_id": 1,
         "leader_epoch": 7, "high_watermark": 490} for n in (1, 2, 3)]
    write_latest(quiet_env / "state", doc)
    at = run_page("consensus")
    voters = frame_with(at, "lag (records)")
    assert list(voters["node"]) == [1, 2, 3] and list(voters["lag (records)"]) == [0, 10, 20]
    assert "KRaft quorum" in texts(at)
    at = run_page("overview")
    assert "KRaft leader 1 (epoch 7), 3 voters" in texts(at)


def test_auto_refresh_is_wired(env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMON_REFRESH", "5")
    at = run_page("overview")
    toggle = at.toggle(key="kmon_autorefresh")
    assert toggle.label == "Auto-refresh" and toggle.value is True
    assert any("Checked for new data" in str(c.value) for c in at.caption)


def test_overview_says_data_lost_this_week_with_the_evidence(incident_env: dict[str, Any], tmp_path: Path) -> None:
    """The ledger in the history: red with the count and the evidence one click down; without entries, green
    with the coverage that makes the zero believable (a zero with gaps says so)."""
    from collectors.model.records import ClusterSnapshot, LossRecord
    from collectors.outputs.history import HistoryWriter
    from collectors.runtime.poller import PollResult

    now = float(incident_env["time"])
    w = HistoryWriter(tmp_path / "history", flush_interval_s=0, retention_days=None)
    for k in range(5):  # five polls an hour apart, then a gap of more than a day
        w.add(PollResult(ClusterSnapshot(cluster=incident_env["cluster"], time=now - 30 * 3600 - k * 3600)))
    w.add(PollResult(ClusterSnapshot(cluster=incident_env["cluster"], time=now - 60)))
    w.flush()
    at = run_page("overview")
    ok = next(s for s in at.warning if "No loss recorded" in str(s.value))  # 4 % of the week watched: no green
    assert "polls: 6 of 168 expected every 1h 00m (4%)" in str(ok.value) and "gaps" in str(ok.value)
    assert not [s for s in at.success if "No data lost" in str(s.value)]

    snap = ClusterSnapshot(cluster=incident_env["cluster"], time=now - 120)
    snap.losses = [LossRecord(snap.cluster, now - 120, "truncation", "orders", 3, 1_240,
                              "high watermark 50,000 under epoch 5 (leader 1); the new leader 2 (epoch 7) ends that "
                              "epoch at offset 48,760", 1, 2, 5, 7, True, offset=48_760),
                   LossRecord(snap.cluster, now - 120, "unclean_election", "orders", 3, None, "leader 1 -> 2", 1, 2,
                              5, 7, True)]
    w.add(PollResult(snap))
    w.flush()
    at = run_page("overview")
    lost = next(e for e in at.error if "Data lost" in str(e.value))
    assert "1,240 messages truncated after a leader change (orders)" in str(lost.value)
    assert "1 unclean election" in str(lost.value)
    ledger = frame_with(at, "evidence")
    assert sorted(ledger["kind"]) == ["truncated after a leader change", "unclean election"]
    assert ["orders-3", 1240] in ledger[["subject", "messages"]].values.tolist()
