"""Checkpoints: a restart resumes exactly the memory it saved, and a bad file never stops the monitor."""

from __future__ import annotations

import json
import os
import zipfile
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.bench_snapshot import Th
from bench.synthetic import observation
from collectors.alerting.evaluation import judge
from collectors.alerting.lifecycle import AlertTracker
from collectors.config import MonitorConfig
from collectors.model.records import LossRecord
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.outputs.checkpoint import (
    Checkpoint,
    CheckpointError,
    checkpoint_path,
    load_checkpoint,
    save_checkpoint,
)
from collectors.runtime.poller import Monitor
from collectors.runtime.sinks import CheckpointSink

T0 = 1_800_000_000.0


def busy_state(polls: int = 8, partitions: int = 400, groups: int = 40) -> tuple[ClusterState, list[Any]]:
    """A poller state after a few polls of a synthetic cluster, and the alerts open at the end."""
    th = Th()
    state = ClusterState(window_size=th.lag_window_points)
    tracker = AlertTracker()
    current: list[Any] = []
    for k in range(polls):
        now = T0 + 30 * k
        obs = observation(partitions, groups, 5, now=now, step=k, seed=3 + k % 2)  # ISRs flap between two seeds
        snap = build_snapshot("prod", obs, None, state, th, now)
        current, _, _ = tracker.update("prod", judge(snap, state, th, now), now)
    # the parts synthetic observations do not fill
    state.condition_since[("under_replicated", "topic-00001-3")] = T0 + 12.5
    state.producer_epochs["tx-a"] = deque([(T0, 4), (T0 + 30, 5)], maxlen=64)
    state.txn_state_since["tx-a"] = ("Ongoing", T0 + 1.25)
    state.unknown_open_txns[("topic-00002", 1, 9001)] = 2
    state.zk_controller, state.zk_leader_epoch, state.zk_election_at = 2, 7, T0 - 5
    state.kraft_leader, state.kraft_election_at = (3, 11), T0 - 9
    state.kraft_quorum = ((3000, 3001, 3002), 41_234)
    state.recent_losses = [LossRecord("prod", T0 + 200, "truncation", "topic-00001", 3, 1_200, "epoch 5 ends at 48,800",
                                      1, 2, 5, 7, False, offset=48_800)]
    return state, current


def save(tmp_path: Path, state: ClusterState, alerts: list[Any], saved_at: float = T0 + 300,
         cluster: str = "prod") -> Path:
    return save_checkpoint(tmp_path, Checkpoint(cluster, "cid-1", saved_at, state, alerts))[0]


def load(tmp_path: Path, now: float = T0 + 330, **kw: Any) -> Checkpoint | None:
    args: dict[str, Any] = {"lag_points": 60, "window_size": 10, "now": now, "max_age_s": 3600.0} | kw
    return load_checkpoint(tmp_path, kw.pop("cluster", "prod"), **{k: v for k, v in args.items() if k != "cluster"})


def as_plain(st: ClusterState) -> dict[str, Any]:
    return {
        "hw": {k: h.points() for k, h in st.hw_history.items()},
        "windows": {k: (w.observations(), w.lags_at_commit(), w.last_change_time, w.raw()[5])
                    for k, w in st.commit_windows.items()},
        "view": dict(st.partition_view), "isr": {k: list(d) for k, d in st.isr_changes.items()},
        "since": dict(st.condition_since), "epochs": {k: list(d) for k, d in st.producer_epochs.items()},
        "txn": dict(st.txn_state_since), "unknown": dict(st.unknown_open_txns),
        "scalars": (st.zk_controller, st.zk_leader_epoch, st.zk_election_at, st.kraft_leader, st.kraft_election_at,
                    st.kraft_quorum, st.last_good, st.polls),
        "brokers": dict(st.known_brokers), "configs": (st.topic_configs, st.broker_configs),
        "leader_epochs": dict(st.epoch_watch), "losses": list(st.recent_losses),
        "marks": {k: (m.skipped, m.beyond, m.committed) for k, m in st.group_marks.items()},
    }


def test_round_trip_restores_every_piece_of_memory(tmp_path: Path) -> None:
    state, alerts = busy_state()
    assert state.hw_history and state.commit_windows and state.isr_changes and alerts  # the input is not trivial
    assert state.topic_configs and state.broker_configs and state.epoch_watch and state.group_marks
    path = save(tmp_path, state, alerts)
    assert path == checkpoint_path(tmp_path, "prod") and path.stat().st_size > 0
    cp = load(tmp_path)
    assert cp is not None and cp.cluster == "prod" and cp.cluster_id == "cid-1" and cp.saved_at == T0 + 300
    assert as_plain(cp.state) == as_plain(state)
    assert [(a.rule, a.subject, a.first_seen, a.summary, a.value) for a in cp.alerts] == \
        [(a.rule, a.subject, a.first_seen, a.summary, a.value) for a in alerts]


def test_resumed_state_keeps_judging_like_the_original(tmp_path: Path) -> None:
    """The next poll on a resumed state gives the same snapshot and alerts as on the state that never stopped."""
    th = Th()
    state, alerts = busy_state()
    save(tmp_path, state, alerts)
    cp = load(tmp_path)
    assert cp is not None
    now = T0 + 30 * 8
    obs = observation(400, 40, 5, now=now, step=8, seed=3)
    a = build_snapshot("prod", obs, None, state, th, now)
    b = build_snapshot("prod", obs, None, cp.state, th, now)
    assert [(g.group_id, g.partition, g.status, g.lag_seconds) for g in a.group_partitions] == \
        [(g.group_id, g.partition, g.status, g.lag_seconds) for g in b.group_partitions]
    alerts_a = [(c.rule, c.subject, c.summary) for c in judge(a, state, th, now)]
    assert alerts_a and alerts_a == [(c.rule, c.subject, c.summary) for c in judge(b, cp.state, th, now)]


def test_smaller_windows_keep_the_newest_points(tmp_path: Path) -> None:
    state, alerts = busy_state()
    save(tmp_path, state, alerts)
    cp = load(tmp_path, lag_points=3, window_size=2)
    assert cp is not None
    key = next(iter(state.hw_history))
    assert cp.state.hw_history[key].points() == state.hw_history[key].points()[-3:]
    wkey = next(iter(state.commit_windows))
    assert cp.state.commit_windows[wkey].observations() == state.commit_windows[wkey].observations()[-2:]
    assert cp.state.commit_windows[wkey].last_change_time == state.commit_windows[wkey].last_change_time


def test_missing_checkpoint_is_none(tmp_path: Path) -> None:
    assert load(tmp_path) is None


@pytest.mark.parametrize(("kw", "message"), [
    ({"now": T0 + 300 + 8 * 86_400}, "older than checkpoint_max_age_s .* and than a week, its loss evidence too"),
    ({"now": T0 + 300 - 3600}, "in the future"),
    ({"max_age_s": 0.0, "now": T0 + 301}, "never resumed"),
    ({"max_age_s": 0.0, "now": T0 + 300}, "never resumed"),  # 0 is never, also at age 0 ...
    ({"max_age_s": 0.0, "now": T0 + 290}, "never resumed"),  # ... and a save time a little ahead of the clock
])
def test_checkpoint_too_old_or_from_the_future_is_refused(tmp_path: Path, kw: dict[str, Any], message: str) -> None:
    state, alerts = busy_state(polls=2)
    save(tmp_path, state, alerts)
    with pytest.raises(CheckpointError, match=message):
        load(tmp_path, **kw)


def test_a_checkpoint_older_than_max_age_resumes_its_loss_evidence_only(tmp_path: Path) -> None:
    """Open alerts, timers and windows would span the time nobody watched; where an old leader epoch ends and
    whether a zxid went back are proof across any gap (`evidence_of`)."""
    from collectors.model.loss import EpochWatch
    from collectors.outputs.checkpoint import describe

    state, alerts = busy_state(polls=2)
    state.epoch_watch[("t", 0)] = EpochWatch(5, 1, (1, 2), 100, T0, "tid")
    state.zk_zxids["zk1:2181"] = (3, (3 << 32) | 9)
    state.condition_since[("under_replicated", "t-0")] = T0
    save(tmp_path, state, alerts)
    cp = load(tmp_path, now=T0 + 300 + 7200)
    assert cp is not None and cp.evidence_only and cp.alerts == [] and cp.incidents == []
    assert cp.state.epoch_watch == state.epoch_watch and cp.state.zk_zxids == state.zk_zxids
    assert (cp.state.hw_history, cp.state.commit_windows, cp.state.condition_since, cp.state.polls) == ({}, {}, {}, 0)
    assert f"its loss evidence only ({len(state.epoch_watch)} leader epochs, 1 ZooKeeper zxid)" in describe(
        cp, T0 + 300 + 7200)
    fresh = load(tmp_path, now=T0 + 300 + 60)
    assert fresh is not None and not fresh.evidence_only and fresh.alerts


def rewrite_member(path: Path, name: str, data: bytes) -> None:
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members[name] = data
    with zipfile.ZipFile(path, "w") as z:
        for n, d in members.items():
            z.writestr(n, d)


def _meta(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("meta.json"))


def edit_meta(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Apply `edit` to the parsed meta.json and write it back (NaN and Infinity as Python's json writes them)."""
    meta = _meta(path)
    edit(meta)
    rewrite_member(path, "meta.json", json.dumps(meta).encode())


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "no-meta", "bad-version", "other-cluster",
                                    "nan-time", "bad-alert", "alert-time-text", "bad-arrow", "wrong-columns",
                                    "history-not-sorted", "window-lengths", "loss-unknown-field", "loss-no-time",
                                    "marks-negative"])
def test_damaged_checkpoint_is_refused_with_a_reason(tmp_path: Path, damage: str) -> None:
    state, alerts = busy_state(polls=3)
    path = save(tmp_path, state, alerts)
    raw = path.read_bytes()
    meta = _meta(path)
    if damage == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        path.write_bytes(os.urandom(4096))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "no-meta":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("other.txt", "x")
    elif damage == "bad-version":
        rewrite_member(path, "meta.json", json.dumps(meta | {"version": 99}).encode())
    elif damage == "other-cluster":
        rewrite_member(path, "meta.json", json.dumps(meta | {"cluster": "staging"}).encode())
    elif damage == "nan-time":
        rewrite_member(path, "meta.json", json.dumps(meta | {"saved_at": float("nan")}).encode())
    elif damage == "bad-alert":
        rewrite_member(path, "meta.json", json.dumps(meta | {"alerts": [{"rule": "x"}]}).encode())
    elif damage == "alert-time-text":
        bad = [meta["alerts"][0] | {"first_seen": "yesterday"}]
        rewrite_member(path, "meta.json", json.dumps(meta | {"alerts": bad}).encode())
    elif damage == "loss-unknown-field":
        bad = [meta["recent_losses"][0] | {"colour": "red"}]
        rewrite_member(path, "meta.json", json.dumps(meta | {"recent_losses": bad}).encode())
    elif damage == "loss-no-time":
        bad = [meta["recent_losses"][0] | {"time": None}]
        rewrite_member(path, "meta.json", json.dumps(meta | {"recent_losses": bad}).encode())
    elif damage == "marks-negative":
        import pyarrow as pa
        import pyarrow.ipc as ipc

        with zipfile.ZipFile(path) as z, ipc.open_file(pa.py_buffer(z.read("marks.arrow"))) as r:
            t = r.read_all()
        t = t.set_column(t.schema.get_field_index("skipped"), "skipped", pa.array([-1] * t.num_rows, pa.int64()))
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, t.schema) as w:
            w.write_table(t)
        rewrite_member(path, "marks.arrow", sink.getvalue().to_pybytes())
    elif damage == "bad-arrow":
        rewrite_member(path, "windows.arrow", b"ARROW1\x00\x00 not really")
    elif damage == "wrong-columns":
        with zipfile.ZipFile(path) as z:
            parts = z.read("partitions.arrow")
        rewrite_member(path, "windows.arrow", parts)
    elif damage in ("history-not-sorted", "window-lengths"):
        import pyarrow as pa
        import pyarrow.ipc as ipc

        name = "partitions.arrow" if damage == "history-not-sorted" else "windows.arrow"
        with zipfile.ZipFile(path) as z, ipc.open_file(pa.py_buffer(z.read(name))) as r:
            t = r.read_all()
        col = "hw_offsets" if damage == "history-not-sorted" else "lags"
        values = t.column(col).to_pylist()
        values[0] = list(reversed(values[0])) + ([5, 4] if damage == "history-not-sorted" else [1])
        if damage == "history-not-sorted":
            times = t.column("hw_times").to_pylist()
            times[0] = times[0] + [times[0][-1] + 1, times[0][-1] + 2] * 2
            t = t.set_column(t.schema.get_field_index("hw_times"), "hw_times", pa.array(times, t.schema.field(
                "hw_times").type))
        t = t.set_column(t.schema.get_field_index(col), col, pa.array(values, t.schema.field(col).type))
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, t.schema) as w:
            w.write_table(t)
        rewrite_member(path, name, sink.getvalue().to_pybytes())
    with pytest.raises(CheckpointError) as e:
        load(tmp_path)
    assert str(path) in str(e.value)


def monitor_config(tmp_path: Path, **kw: Any) -> MonitorConfig:
    return MonitorConfig.model_validate({"clusters": [{"name": "prod", "bootstrap_servers": "127.0.0.1:1"}],
                                         "state_dir": str(tmp_path), **kw})


def test_monitor_resume_never_fails_on_a_bad_checkpoint(tmp_path: Path) -> None:
    checkpoint_path(tmp_path, "prod").parent.mkdir(parents=True)
    checkpoint_path(tmp_path, "prod").write_bytes(b"PK\x03\x04 half a zip")
    m = Monitor(monitor_config(tmp_path))
    try:
        lines = m.resume(tmp_path, now=T0)
        assert len(lines) == 1 and lines[0].startswith("prod: starting fresh, checkpoint not used:")
        assert m.pollers[0].state.polls == 0 and not m.pollers[0].alerts.open
    finally:
        m.close()


def test_monitor_resume_takes_over_state_and_open_alerts(tmp_path: Path) -> None:
    state, alerts = busy_state(polls=3)
    save(tmp_path, state, alerts)
    m = Monitor(monitor_config(tmp_path))
    try:
        lines = m.resume(tmp_path, now=T0 + 310)
        assert lines[0].startswith("prod: resumed from checkpoint saved 10s ago:")
        p = m.pollers[0]
        assert p.state.polls == 3 and len(p.state.commit_windows) == len(state.commit_windows)
        assert {k[1:] for k in p.alerts.open} == {(a.rule, a.subject) for a in alerts}
        cp = p.checkpoint(T0 + 320)  # what the next save would write: the same memory, same identity
        assert cp.cluster_id == "cid-1" and len(cp.alerts) == len(alerts)
    finally:
        m.close()


def test_checkpoint_sink_alerts_while_state_dir_is_unwritable_and_clears(tmp_path: Path) -> None:
    blocked = tmp_path / "state"
    blocked.write_text("a file where the state directory should be")
    m = Monitor(monitor_config(tmp_path))
    try:
        sink = CheckpointSink(blocked, interval_s=0.0, monitor=m)
        sink([], T0)
        cond = m.conditions.get("state_write_failed")
        assert cond is not None and cond.severity == "warning" and str(blocked) in cond.summary
        blocked.unlink()
        sink([], T0 + 1)
        assert "state_write_failed" not in m.conditions and sink.saves == 1
        assert checkpoint_path(blocked, "prod").is_file()
    finally:
        m.close()


def test_a_failed_save_leaves_the_previous_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state, alerts = busy_state(polls=2)
    path = save(tmp_path, state, alerts)
    before = path.read_bytes()

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(zipfile.ZipFile, "writestr", broken)
    with pytest.raises(OSError, match="No space"):
        save(tmp_path, state, alerts, saved_at=T0 + 400)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind
    cp = load(tmp_path)
    assert cp is not None and cp.saved_at == T0 + 300


def test_a_checkpoint_from_before_the_loss_ledger_loads_without_epoch_watches(tmp_path: Path) -> None:
    """Older checkpoints have no epochs.arrow: they load, and the partitions are watched from the first poll."""
    import zipfile

    state, alerts = busy_state(polls=2, partitions=200, groups=2)
    path = save(tmp_path, state, alerts)
    old = tmp_path / "old.zip"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(old, "w") as dst:
        for name in src.namelist():
            if name != "epochs.arrow":
                dst.writestr(name, src.read(name))
    old.replace(path)
    cp = load(tmp_path)
    assert cp is not None and cp.state.epoch_watch == {} and cp.state.hw_history


def test_epoch_watches_keep_their_topic_ids_and_older_ones_without_ids_still_load(tmp_path: Path) -> None:
    """The topic id tells a topic deleted and created again while the monitor was down from the one watched; a
    checkpoint written before ids were kept (epochs.arrow without the column) loads with none, learnt later."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    state, alerts = busy_state(polls=2, partitions=200, groups=2)
    path = save(tmp_path, state, alerts)
    cp = load(tmp_path)
    assert cp is not None and cp.state.epoch_watch == state.epoch_watch
    assert {w.topic_id for w in cp.state.epoch_watch.values()} >= {"00000000-0000-4000-8000-000000000001"}
    old = tmp_path / "old.zip"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(old, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name == "epochs.arrow":
                table = ipc.open_file(pa.py_buffer(data)).read_all().drop_columns(["topic_id"])
                sink = pa.BufferOutputStream()
                with ipc.new_file(sink, table.schema) as w:
                    w.write_table(table)
                data = sink.getvalue().to_pybytes()
            dst.writestr(name, data)
    old.replace(path)
    cp = load(tmp_path)
    assert cp is not None and len(cp.state.epoch_watch) == len(state.epoch_watch)
    assert {w.topic_id for w in cp.state.epoch_watch.values()} == {None}
    assert {k: w.hw_max for k, w in cp.state.epoch_watch.items()} == {k: w.hw_max for k, w in state.epoch_watch.items()}


def test_a_loss_alert_stays_open_across_a_restart_and_older_checkpoints_load_without_losses(tmp_path: Path) -> None:
    """`data_truncated` stays open `loss_alert_hold_s` after the loss: a restart two minutes later must not
    resolve it (on-call would read "cleared"). Checkpoints from before have no recent losses: none are restored."""
    state, alerts = busy_state(polls=2, partitions=200, groups=2)
    path = save(tmp_path, state, alerts)
    cp = load(tmp_path)
    assert cp is not None
    snap = build_snapshot("prod", observation(200, 2, 5, now=T0 + 330, step=3, seed=3), None, cp.state, Th(),
                          T0 + 330)
    assert [(c.rule, c.subject) for c in judge(snap, cp.state, Th(), T0 + 330) if c.rule == "data_truncated"] == [
        ("data_truncated", "topic-00001-3")]
    edit_meta(path, lambda meta: meta.pop("recent_losses"))
    cp = load(tmp_path)
    assert cp is not None and cp.state.recent_losses == []


def test_the_ledgers_marks_survive_a_restart_and_older_checkpoints_load_without_them(tmp_path: Path) -> None:
    """What retention deletes under a group while the collector is down is counted once after the restart (from the
    mark saved before it), not taken as a first sight; checkpoints without marks.arrow load with none."""
    from collectors.model.loss import GroupMark, group_evidence
    from collectors.model.records import GroupPartitionRecord

    state, alerts = busy_state(polls=2, partitions=200, groups=2)
    state.group_marks = {("billing", "orders", 3): GroupMark(50, 0, 100)}  # 50 recorded: log start 150, commit 100
    path = save(tmp_path, state, alerts)
    cp = load(tmp_path)
    assert cp is not None
    later = GroupPartitionRecord("prod", "billing", "orders", 3, 100, 230, 900, 900, None, None, "OK")
    assert [x.messages for x in group_evidence("prod", [later], cp.state.group_marks, T0 + 400)] == [80]
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist() if n != "marks.arrow"}
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    cp = load(tmp_path)
    assert cp is not None and cp.state.group_marks == {}


def test_group_activity_survives_a_restart_and_older_checkpoints_load_without_it(tmp_path: Path) -> None:
    """A group seen consuming stays 'seen consuming' and the abandoned clock keeps its start across a restart."""
    import zipfile

    from collectors.model.activity import GroupLife

    state, alerts = busy_state(polls=2, partitions=200, groups=4)
    assert state.group_life  # the synthetic groups were classified at each poll
    state.group_life["old-etl"] = GroupLife(T0 - 86_400, None)
    state.group_life["worker"] = GroupLife(T0 - 600, T0 - 30)
    path = save(tmp_path, state, alerts)
    cp = load(tmp_path)
    assert cp is not None and cp.state.group_life == state.group_life
    old = tmp_path / "old.zip"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(old, "w") as dst:
        for name in src.namelist():
            if name != "groups.arrow":
                dst.writestr(name, src.read(name))
    old.replace(path)
    cp = load(tmp_path)
    assert cp is not None and cp.state.group_life == {} and cp.state.commit_windows


def test_a_restart_while_the_quorum_has_no_leader_still_names_its_voters(tmp_path: Path) -> None:
    """The voters last read are checkpointed: a collector restarted while the KRaft quorum has no leader reports
    them with leader -1 (and kraft_no_leader can judge it), not only a stale quorum. Older checkpoints load
    without them."""
    from collectors.model.observations import KafkaObservation

    state, alerts = busy_state(polls=1, partitions=200, groups=1)
    state.kraft_leader, state.kraft_quorum = (3001, 7), ((3000, 3001, 3002), 500)
    path = save(tmp_path, state, alerts)
    cp = load(tmp_path)
    assert cp is not None and cp.state.kraft_quorum == ((3000, 3001, 3002), 500)
    obs = KafkaObservation(time=T0 + 330, cluster_id="cid-1", controller_id=1, brokers=[(1, "h", 9092, None)])
    obs.quorum_no_leader = "DescribeQuorum: NOT_LEADER_OR_FOLLOWER"
    obs.fail("quorum", obs.quorum_no_leader)
    snap = build_snapshot("prod", obs, None, cp.state, Th(), T0 + 330)
    assert [(v.node_id, v.leader_id, v.leader_epoch) for v in snap.kraft_voters] == [
        (3000, -1, 7), (3001, -1, 7), (3002, -1, 7)]
    old = tmp_path / "old.zip"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(old, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name == "meta.json":
                meta = json.loads(data)
                del meta["kraft_quorum"]
                data = json.dumps(meta).encode()
            dst.writestr(name, data)
    old.replace(path)
    cp = load(tmp_path)
    assert cp is not None and cp.state.kraft_quorum is None and cp.state.kraft_leader == (3001, 7)
