"""One collector writes a history root at a time (`collectors.outputs.history.lease`).

Before the lease, two collectors on one root (an HA pair on a shared volume, a rolling deploy's overlap) each
wrote every poll, so every event the weekly report counts was there twice, and a collector starting deleted the
live one's temp files. Real files, real ``flock`` and a real second process killed with SIGKILL; the one mock is the
filesystem without ``flock`` support, which this machine cannot mount.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from collectors.config import HistoryConfig
from collectors.model.records import ClusterSnapshot, LossRecord
from collectors.model.vocabulary import BEYOND_LOG_END, RETENTION_SKIPPED, TRUNCATION, UNCLEAN_ELECTION
from collectors.outputs.history import HistoryWriter, read_table
from collectors.outputs.history import writer as history_writer
from collectors.outputs.history.files import utc_date
from collectors.outputs.history.lease import LEASE_FILE, Holder, WriterLease, read_holder
from collectors.runtime.poller import Monitor
from collectors.runtime.sinks import HistorySink
from tests.unit.test_history import DAY, T0, small_snapshot
from tests.unit.test_history_sink import monitor_config

ROOT = Path(__file__).resolve().parents[2]


def poll(writers: list[HistoryWriter], t: float, cluster: str = "c1") -> None:
    """What each collector does after a poll of `cluster` at `t`: buffer its rows, flush."""
    for w in writers:
        w.add_snapshot(small_snapshot(t, cluster=cluster, topics=2))
        w.flush()


def test_a_second_collector_on_the_root_stands_by_and_takes_over(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="collectors.outputs.history")
    first = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    second = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    assert first.standby_of is None
    holder = second.standby_of
    assert holder is not None and holder.pid == os.getpid() and holder.clusters == ("c1",)
    for i in range(3):
        poll([first, second], T0 + 30 * i)
    assert second.last_error is None and second.buffered_rows == 0  # standing by is no fault
    assert caplog.text.count("this one stands by") == 1  # said once, though the holder's account moved on
    cluster = read_table(tmp_path, "cluster")
    assert sorted(cluster.time) == [T0, T0 + 30, T0 + 60]  # each poll once; without the lease, twice

    for w in (first, second):  # both poll again; the standby's rows wait for its next flush
        w.add_snapshot(small_snapshot(T0 + 90, topics=2))
    first.close()  # the holder writes that poll and stops (a deploy's old pod)
    assert read_holder(tmp_path).flushed_until == T0 + 90
    poll([second], T0 + 120)  # takes over: its own rows of T0 + 90 are already written, not again
    assert second.standby_of is None
    assert sorted(read_table(tmp_path, "cluster").time) == [T0, T0 + 30, T0 + 60, T0 + 90, T0 + 120]
    assert len(read_table(tmp_path, "topic_health")) == 10
    assert read_holder(tmp_path).flushed_until == T0 + 120
    second.close()
    assert WriterLease(tmp_path).acquire()  # released on close


def test_a_standby_whose_clusters_the_holder_does_not_write_says_so(tmp_path: Path) -> None:
    """Two collectors of different clusters on one root: the second's rows would be written by nobody."""
    m = Monitor(monitor_config(tmp_path / "state"))
    holder = HistoryWriter(tmp_path / "h", exclusive=True, clusters=["billing"])
    try:
        sink = HistorySink(HistoryConfig(root=str(tmp_path / "h")), exporter=None, monitor=m,
                           clusters=["prod", "billing"])
        sink.writer.flush_interval_s = 0  # every poll flushes
        sink([], T0)
        cond = m.conditions.get("history_write_failed")
        assert cond is not None and "written by another collector" in cond.summary
        assert "(billing) do not include prod" in cond.summary and f"pid {os.getpid()}" in cond.summary
        holder.close()
        sink([], T0 + 30)  # the other collector stopped: this one writes now
        assert "history_write_failed" not in m.conditions and sink.writer.standby_of is None
        assert read_holder(tmp_path / "h").clusters == ("prod", "billing")
        sink.close()
    finally:
        m.close()


CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from collectors.outputs.history import HistoryWriter
    root = Path(sys.argv[1])
    w = HistoryWriter(root, exclusive=True, clusters=["c1"])
    day = root / "cluster" / "date=2023-11-15"
    day.mkdir(parents=True, exist_ok=True)
    (day / ".tmp-0123456789abcdef.parquet").write_bytes(b"PAR1 half written")  # a flush in progress
    print("holding", flush=True)
    time.sleep(600)
""")


def test_a_killed_holder_frees_the_root_and_its_temp_file_is_cleaned_only_then(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding"
        temp = tmp_path / "cluster" / "date=2023-11-15" / ".tmp-0123456789abcdef.parquet"
        w = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
        assert w.standby_of is not None and w.standby_of.pid == child.pid
        assert temp.exists()  # the live holder's write in progress is not a leftover: before, it was deleted
        poll([w], T0)
        assert not list((tmp_path / "cluster" / "date=2023-11-15").glob("part-*"))
        os.kill(child.pid, signal.SIGKILL)  # no close, no release: the kernel drops the lock with the process
        child.wait(timeout=10)
        w.add_snapshot(small_snapshot(T0 + 30, topics=2))  # polled after the holder's last flush (it wrote none)
        poll([w], T0 + 60)
        assert w.standby_of is None and not temp.exists()  # now a leftover, and cleaned by the new holder
        assert sorted(read_table(tmp_path, "cluster").time) == [T0 + 30, T0 + 60]  # the gap it left, filled
        assert read_holder(tmp_path).pid == os.getpid()
        w.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)


def test_without_flock_support_the_writer_goes_on_without_a_lease(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    w = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    poll([w], T0)
    assert w.standby_of is None and w.last_error is None
    assert len(read_table(tmp_path, "cluster")) == 1
    assert caplog.text.count("writing without a lease") == 1


def test_a_lease_file_that_cannot_be_opened_keeps_the_rows(tmp_path: Path) -> None:
    """A root that is a file (writes fail even as root): no standby, the rows wait as for a failed flush."""
    blocked = tmp_path / "history"
    blocked.write_text("a file where the history directory should be")
    w = HistoryWriter(blocked, exclusive=True, clusters=["c1"], clock=lambda: T0)
    poll([w], T0)
    assert w.standby_of is None and w.buffered_rows > 0
    assert w.last_error is not None and "cannot take the writer lease" in w.last_error
    blocked.unlink()
    poll([w], T0 + 30)
    assert w.last_error is None and sorted(read_table(blocked, "cluster").time) == [T0, T0 + 30]
    assert (blocked / LEASE_FILE).is_file()
    w.close()


def test_a_writer_that_could_not_open_the_lease_and_then_stands_by_drops_as_a_standby(tmp_path: Path,
                                                                                      caplog: pytest.LogCaptureFixture,
                                                                                      ) -> None:
    """A writer that could not open the lease file counts as failing (past the memory bound, its rows are dropped
    as after failed flushes). Standing by once the file opens, another collector holding it, it is no longer: past
    the bound it flushes, which drops all but its ledger rows of losses as a standby does, not "after failed
    flushes" with every row counted as dropped."""
    blocked = tmp_path / "history"
    blocked.write_text("a file where the history directory should be")
    w = HistoryWriter(blocked, exclusive=True, clusters=["c1"], clock=lambda: T0)
    poll([w], T0)
    assert w.last_error is not None and "cannot take the writer lease" in w.last_error
    blocked.unlink()
    holder = HistoryWriter(blocked, exclusive=True, clusters=["c1"], clock=lambda: T0)
    poll([holder, w], T0 + 30)
    assert w.standby_of is not None and w.buffered_rows == 0
    caplog.set_level(logging.WARNING, logger="collectors.outputs.history")
    w.max_buffer_rows = 1
    w.add_snapshot(small_snapshot(T0 + 60, topics=2))
    assert w.buffered_rows == 0 and w.dropped_rows == 0 and "after failed flushes" not in caplog.text
    holder.close()
    w.close()


def test_a_ledger_written_alone_after_another_error_ends_the_failing(tmp_path: Path) -> None:
    """A record the history's schema cannot hold (a bug; said as `cannot convert`) after a failed flush: once the
    ledger's rows are written alone and nothing whose write failed waits, the writer is no longer failing (past
    the memory bound it flushes rather than drops), though that error stands until a flush writes the buffer."""
    w = HistoryWriter(tmp_path, clock=lambda: T0)
    day = tmp_path / "loss_events" / "date=2023-11-15"
    day.parent.mkdir()
    day.write_text("not a directory")
    w.add_snapshot(truncated(T0))
    assert not w.flush()
    bad = small_snapshot(T0 + 30)
    bad.losses = [LossRecord("c1", T0 + 30, RETENTION_SKIPPED, "t1", 0, "many", "log start 1,007")]  # type: ignore[arg-type]
    w.add_snapshot(bad)
    assert w.last_error is not None and w.last_error.startswith("cannot convert")
    day.unlink()
    w.add_snapshot(small_snapshot(T0 + 60, topics=2))  # rows that wait, not failed
    assert w.flush_losses() and w.last_error.startswith("cannot convert")
    w.max_buffer_rows = 1
    w.add_snapshot(small_snapshot(T0 + 90, topics=2))
    assert w.dropped_rows == 0 and w.buffered_rows == 0  # flushed, not dropped
    assert w.last_error is None
    w.close()


def test_a_takeover_carries_on_the_open_incidents_of_the_history(tmp_path: Path) -> None:
    """`open_incidents` reads the incidents a history leaves open; `IncidentTracker.adopt` gives our incident of the
    same cause the recorded id and opening, carries the others, and the next poll resolves those whose cause is
    gone. The history then holds one incident per cause across the takeover."""
    from collectors.alerting.correlation import correlate
    from collectors.alerting.incidents import IncidentTracker
    from collectors.model.poll import IncidentEvent, PollResult
    from collectors.model.records import IncidentRecord
    from collectors.outputs.history.left_open import open_incidents
    from tests.unit.test_incidents import NOW, alerts_of, cluster

    def rec(iid: str, kind: str, subject: str, opened: float) -> IncidentRecord:
        return IncidentRecord("c", iid, kind, subject, "critical", f"{kind} {subject}", opened, opened, alerts=2,
                              members={"broker_down": 1}, brokers=[3] if kind == "broker" else [])

    w = HistoryWriter(tmp_path, clock=lambda: NOW)
    events = [IncidentEvent(NOW - 600, "opened", rec("broker-old", "broker", "broker 3", NOW - 600)),
              IncidentEvent(NOW - 500, "opened", rec("group-gone", "group", "billing", NOW - 500)),
              IncidentEvent(NOW - 400, "opened", rec("topic-done", "topic", "orders", NOW - 400)),
              IncidentEvent(NOW - 300, "resolved", rec("topic-done", "topic", "orders", NOW - 400)),
              IncidentEvent(NOW - 3 * 86_400, "opened", rec("topic-ancient", "topic", "audit", NOW - 3 * 86_400))]
    for e in events:
        w.add(PollResult(small_snapshot(e.time, cluster="c"), incident_events=[e]))
    assert w.flush()
    found = open_incidents(tmp_path, ["c"], NOW)
    assert [(i.id, i.opened, i.members, i.brokers) for i in found] == [
        ("broker-old", NOW - 600, {"broker_down": 1}, [3]), ("group-gone", NOW - 500, {"broker_down": 1}, [])]
    assert open_incidents(tmp_path, ["other"], NOW) == []

    tracker = IncidentTracker()  # the standby's own view: broker 3 down since it started
    s = cluster(down=(3,))
    tracker.update("c", correlate(s, alerts_of(s)), NOW - 200)
    ours = tracker.open_for("c")[0].id
    assert tracker.adopt(found) == {"broker-old": ours, "group-gone": None}  # ours gave its id up for the recorded
    current, ev = tracker.update("c", correlate(s, alerts_of(s)), NOW)
    assert [(i.id, i.opened) for i in current] == [("broker-old", NOW - 600)]  # ours, under the recorded id
    assert [(e.event, e.incident.id) for e in ev] == [("resolved", "group-gone")]  # its cause is gone
    current[0].opened = exact = NOW - 599.9999996  # as a resumed checkpoint holds it, unrounded
    assert tracker.adopt(found[:1]) == {"broker-old": None}  # the same incident: nothing to give up
    assert current[0].opened == exact


def _history_left_by_a_stopped_collector(root: Path, last_poll: float) -> None:
    """A collector of `prod` found the cluster unreachable (an alert and its incident), had an alert open for
    three weeks (recorded again daily: `restate`) and one opened and resolved, wrote its polls up to `last_poll` and
    stopped cleanly."""
    from collectors.alerting.lifecycle import RESTATE_S
    from collectors.model.poll import IncidentEvent, PollResult
    from collectors.model.records import AlertRecord, IncidentRecord

    opened = last_poll - 600
    rec = IncidentRecord("prod", "cluster-recorded", "cluster", "prod", "critical", "cluster prod unreachable",
                         opened, opened, alerts=1, members={"cluster_unreachable": 1})
    unreachable = AlertRecord("cluster_unreachable", "critical", "prod", "prod", "unreachable", opened, opened)
    old_one = AlertRecord("history_maintenance_failed", "warning", "prod", "history", "", last_poll - 21 * RESTATE_S,
                          opened)
    done = AlertRecord("consumer_lag_status", "warning", "prod", "billing", "", opened, opened,
                       resolved_at=last_poll)
    old = HistoryWriter(root, exclusive=True, clusters=["prod"])
    old.add(PollResult(small_snapshot(opened, cluster="prod"), opened=[unreachable, done],
                       incident_events=[IncidentEvent(opened, "opened", rec)], restated=[old_one]))
    old.add(PollResult(small_snapshot(last_poll, cluster="prod"), resolved=[done]))
    old.close()
    assert read_holder(root).flushed_until == last_poll


def test_open_alerts_are_the_episodes_a_history_leaves_open(tmp_path: Path) -> None:
    from collectors.outputs.history.left_open import open_alerts

    now = time.time()
    _history_left_by_a_stopped_collector(tmp_path, now - 120)
    found = open_alerts(tmp_path, ["prod"], now)
    assert [(a.rule, a.subject, round(now - a.first_seen)) for a in found] == [
        ("history_maintenance_failed", "history", 21 * 86_400 + 120),  # three weeks old: found by its restate
        ("cluster_unreachable", "prod", 720)]  # not the resolved one
    assert open_alerts(tmp_path, ["other"], now) == []


def test_a_collector_started_after_the_last_one_stopped_carries_on_its_open_incidents(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A restart that lost its checkpoint (a new pod, an emptied state_dir) on the same history: before, the new
    collector opened the cause again under a new id, so the report held two incidents for one cause and paged
    "opened" twice. Now it carries the recorded one on from its first poll, as the standby of an HA pair does."""
    caplog.set_level(logging.INFO, logger="collectors.runtime.sinks")
    root = tmp_path / "history"
    now = time.time()
    _history_left_by_a_stopped_collector(root, now - 120)
    cfg = monitor_config(tmp_path / "state", history={"root": str(root)})
    m = Monitor(cfg)
    try:
        assert m.resume(Path(cfg.state_dir)) == ["prod: starting fresh (no checkpoint)"]
        sink = HistorySink(cfg.history, exporter=None, monitor=m, clusters=["prod"])
        assert [i.id for i in m.pollers[0].incidents.open_for("prod")] == ["cluster-recorded"]
        assert "carrying on 1 open incident and 2 open alerts" in caplog.text
        (r,) = m.poll_once()  # still unreachable: the same cause
        (inc,) = r.snapshot.incidents
        assert inc.id == "cluster-recorded"
        assert inc.opened == pytest.approx(now - 720, abs=1e-3)  # as recorded (the history keeps microseconds)
        assert r.incident_events == []  # not opened again
        (alert,) = r.snapshot.alerts  # the alert too: one episode in the history, not a superseded one and a new
        assert alert.rule == "cluster_unreachable" and alert.first_seen == pytest.approx(now - 720, abs=1e-3)
        assert r.opened == []
        assert [(a.rule, a.subject) for a in r.resolved] == [("history_maintenance_failed", "history")]  # gone now
        sink([r], r.snapshot.time)
        sink.close()
    finally:
        m.close()
    events = read_table(root, "incident_events")
    assert list(events.event) == ["opened"] and set(events.id) == {"cluster-recorded"}
    alerts = read_table(root, "alert_events")
    unreachable = alerts[alerts.rule == "cluster_unreachable"]
    assert list(unreachable.event) == ["open"]  # ours was never opened
    assert list(alerts[alerts.rule == "history_maintenance_failed"].event) == ["restate", "resolve"]


def test_a_collector_started_long_after_the_last_one_stopped_records_what_it_left_open_as_lost(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Past `carry_max_age_s` (the collector's `checkpoint_max_age_s`) the recorded incident is not carried on: our
    first poll would resolve or continue it across the hours nobody watched. Before, it stayed open in the history
    for good: every weekly report read it as open at the week's end. Now it ends with a ``lost`` event at the last
    poll that saw it open, as do the alerts left open (not the resolved one), and nothing is left to carry on."""
    from collectors.outputs.history.left_open import open_alerts, open_incidents

    caplog.set_level(logging.INFO, logger="collectors.runtime.sinks")
    root = tmp_path / "history"
    last_poll = time.time() - 7200
    _history_left_by_a_stopped_collector(root, last_poll)
    m = Monitor(monitor_config(tmp_path / "state"))
    try:
        sink = HistorySink(HistoryConfig(root=str(root)), exporter=None, monitor=m, clusters=["prod"])
        assert m.pollers[0].incidents.open_for("prod") == []
        assert "left open of prod is not carried on: last polled 7200s ago (carry_max_age_s 3600s)" in caplog.text
        assert "3 incidents and alerts left open" in caplog.text and "are recorded as lost" in caplog.text
        (r,) = m.poll_once()
        assert (r.incident_events[0].event, r.incident_events[0].incident.id) == ("lost", "cluster-recorded")
        assert [(e.event, e.incident.id != "cluster-recorded") for e in r.incident_events[1:]] == [("opened", True)]
        assert r.incident_events[0].time == pytest.approx(last_poll, abs=1e-3)
        sink([r], r.snapshot.time)
        (r2,) = m.poll_once()  # recorded once
        assert [e.event for e in r2.incident_events] == [] and r2.lost == []
        sink.close()
    finally:
        m.close()
    events = read_table(root, "incident_events")
    recorded = events[events.id == "cluster-recorded"].sort_values("time")
    assert list(recorded.event) == ["opened", "lost"]
    assert recorded.time.iloc[-1] == pytest.approx(last_poll, abs=1e-3)  # the last poll that saw it open
    alerts = read_table(root, "alert_events")
    lost = alerts[alerts.event == "lost"].sort_values("rule")
    assert list(zip(lost.rule, lost.subject, strict=True)) == [("cluster_unreachable", "prod"),
                                                               ("history_maintenance_failed", "history")]
    assert list(lost.time) == pytest.approx([last_poll] * 2, abs=1e-3)
    assert list(lost.first_seen) == pytest.approx([last_poll - 600, last_poll - 21 * 86_400], abs=1e-3)
    assert "cluster-recorded" not in {i.id for i in open_incidents(root, ["prod"], time.time())}
    assert {(a.rule, a.first_seen > last_poll) for a in open_alerts(root, ["prod"], time.time())} == {
        ("cluster_unreachable", True)}  # ours, opened at our first poll: the recorded one is lost


def test_a_history_written_ahead_of_our_clock_is_not_carried_on(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Its last poll 600 s ahead of the clock we poll with: a clock stepped back, or the sandbox demo run again on
    its data dir (its clock runs ten times fast, so the last run wrote "the future"). Carried, the incidents would be
    resolved before they opened; as a checkpoint saved in the future, it is not used."""
    caplog.set_level(logging.INFO, logger="collectors.runtime.sinks")
    root = tmp_path / "history"
    _history_left_by_a_stopped_collector(root, time.time() + 600)
    m = Monitor(monitor_config(tmp_path / "state"))
    try:
        HistorySink(HistoryConfig(root=str(root)), exporter=None, monitor=m, clusters=["prod"]).close()
        assert m.pollers[0].incidents.open_for("prod") == [] and m.pollers[0].alerts.open_for("prod") == []
        assert "ahead of this collector's clock (stepped back?)" in caplog.text
        (r,) = m.poll_once()  # ended where that history says it was last seen open
        assert [(e.event, e.incident.id) for e in r.incident_events[:1]] == [("lost", "cluster-recorded")]
        assert r.incident_events[0].time > time.time() + 500 and len(r.lost) == 2
    finally:
        m.close()


def test_a_takeover_drops_only_the_events_of_the_incidents_given_up(tmp_path: Path) -> None:
    """At a takeover our buffered events of an incident now under the recorded id go; the others are ours alone
    (a cause that began after the holder's last poll) and stay. Before, every buffered incident event was dropped,
    and such an incident was in the history without its opening."""
    from collectors.model.poll import IncidentEvent, PollResult
    from collectors.model.records import IncidentRecord

    w = HistoryWriter(tmp_path, clock=lambda: T0)
    for iid in ("broker-given-up", "topic-ours", "broker-given-up"):
        rec = IncidentRecord("c1", iid, iid.split("-")[0], "s", "warning", "", T0, T0)
        w.add(PollResult(small_snapshot(T0, topics=2), incident_events=[IncidentEvent(T0, "opened", rec)]))
    before = w.buffered_rows
    assert w.drop_buffered("incident_events", lambda r: r["id"] == "broker-given-up") == 2
    assert w.buffered_rows == before - 2
    assert w.flush()
    assert list(read_table(tmp_path, "incident_events").id) == ["topic-ours"]
    assert len(read_table(tmp_path, "cluster")) == 3  # other tables untouched


def test_a_takeover_from_a_holder_of_other_clusters_keeps_our_rows(tmp_path: Path) -> None:
    """The rows a holder's `flushed_until` covers are dropped at the takeover only if it wrote our clusters: a
    holder of `billing` wrote none of `prod`'s polls. Before, our buffered polls up to its last one were lost."""
    holder = HistoryWriter(tmp_path, exclusive=True, clusters=["billing"], clock=lambda: T0)
    ours = HistoryWriter(tmp_path, exclusive=True, clusters=["prod"], clock=lambda: T0)
    assert ours.standby_of is not None and ours.last_error is not None  # nobody writes prod: said
    ours.add_snapshot(small_snapshot(T0 + 30, cluster="prod", topics=2))
    poll([holder], T0 + 60, cluster="billing")
    holder.close()
    assert read_holder(tmp_path).flushed_until == T0 + 60
    assert ours.flush() and ours.standby_of is None
    cluster = read_table(tmp_path, "cluster")
    assert sorted(zip(cluster.cluster, cluster.time, strict=True)) == [("billing", T0 + 60), ("prod", T0 + 30)]
    ours.close()


def test_the_lease_records_only_polls_written_in_every_table(tmp_path: Path) -> None:
    """A flush that wrote some tables of a poll and not another (a file where its day's directory should be: a
    real `FileExistsError`) does not record that poll in the lease file: a standby taking over skips its own rows of
    the polls recorded, and its rows of that table were then written by nobody. Before, the newest poll written in
    any table was recorded."""
    holder = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    standby = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    poll([holder, standby], T0)
    assert read_holder(tmp_path).flushed_until == T0
    day = tmp_path / "topic_health" / f"date={utc_date(T0).isoformat()}"
    day.rename(tmp_path / "aside")
    day.write_text("not a directory")  # topic_health cannot be written; every other table can
    standby.add_snapshot(small_snapshot(T0 + 29, topics=2))  # the standby's poll, just before the holder's
    holder.add_snapshot(small_snapshot(T0 + 30, topics=2))
    assert not holder.flush() and T0 + 30 in set(read_table(tmp_path, "cluster").time)
    assert read_holder(tmp_path).flushed_until == T0  # T0 + 30's topic_health rows are not written
    holder.close()  # stops with them unwritten
    day.unlink()
    (tmp_path / "aside").rename(day)
    assert standby.flush() and standby.standby_of is None  # takes over: its T0 + 29 rows are not skipped
    assert sorted(set(read_table(tmp_path, "topic_health").time)) == [T0, T0 + 29]
    standby.close()


def truncated(t: float, cluster: str = "c1", before: int = 3, end: int = 960) -> ClusterSnapshot:
    """A poll at `t` that proves partition t0-0 truncated: epoch `before`'s log cut at offset `end` by the leader
    of epoch 5, 1,000 - `end` messages gone."""
    snap = small_snapshot(t, cluster=cluster, topics=2)
    snap.losses = [LossRecord(cluster, t, TRUNCATION, "t0", 0, 1000 - end, f"high watermark 1,000 under epoch "
                              f"{before}; epoch 5 ends it at {end}", 1, 2, before, 5, False, offset=end)]
    return snap


def test_a_standby_keeps_its_record_of_a_loss_until_the_history_holds_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both collectors of an HA pair see a truncation. The holder cannot write its ledger row (``loss_events`` is
    a file) and stops: the standby, which kept its own row (only that row of its polls: not its retention skip),
    writes it when it takes over. Before, a standby dropped every row at its flushes and the loss was recorded by
    nobody."""
    holder = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    standby = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    poll([holder, standby], T0)
    blocked = tmp_path / "loss_events"
    blocked.write_text("not a directory")
    holder.add_snapshot(truncated(T0 + 30))
    mine = truncated(T0 + 31)
    mine.losses.append(LossRecord("c1", T0 + 31, RETENTION_SKIPPED, "t1", 0, 7, "log start 1,007"))
    standby.add_snapshot(mine)
    assert not holder.flush() and holder.unwritten_loss_clusters() == {"c1"}
    assert standby.flush() and standby.standby_of is not None
    assert standby.unwritten_loss_clusters() == {"c1"} and standby.buffered_rows == 1  # the truncation alone
    poll([holder, standby], T0 + 60)  # the holder wrote the rest of T0 + 30 and all of T0 + 60, not the loss
    assert read_holder(tmp_path).flushed_until == T0 and standby.buffered_rows == 1
    holder.close()
    blocked.unlink()
    assert standby.flush() and standby.standby_of is None
    [row] = read_table(tmp_path, "loss_events").itertuples()
    assert (row.kind, row.messages, row.time) == (TRUNCATION, 40, T0 + 31)
    assert not standby.buffered_never_dropped()
    standby.close()

    # The holder writes the loss: the standby's next flush finds it in the history and drops its own row.
    other = tmp_path / "other"
    holder = HistoryWriter(other, exclusive=True, clusters=["c1"], clock=lambda: T0)
    standby = HistoryWriter(other, exclusive=True, clusters=["c1"], clock=lambda: T0)
    holder.add_snapshot(truncated(T0 + 30))
    standby.add_snapshot(truncated(T0 + 31))
    poll([holder, standby], T0 + 30)
    assert not standby.buffered_never_dropped() and standby.buffered_rows == 0
    holder.close()
    standby.close()
    assert len(read_table(other, "loss_events")) == 1

    # The holder never records it (it began watching the partition after the leader change): its written polls
    # passing ours do not drop the row. It warns once, and the takeover writes it. Before this session's second
    # change, a row the lease file's `flushed_until` passed was dropped, and the loss recorded by nobody.
    caplog.set_level(logging.WARNING, logger="collectors.outputs.history")
    third = tmp_path / "third"
    holder = HistoryWriter(third, exclusive=True, clusters=["c1"], clock=lambda: T0)
    standby = HistoryWriter(third, exclusive=True, clusters=["c1"], clock=lambda: T0)
    standby.add_snapshot(truncated(T0 + 31))
    for t in range(0, 1300, 60):
        poll([holder, standby], T0 + 60 + t)
        if t == 540:  # the holder has written 569 s of polls past ours: not yet said
            assert "has not recorded" not in caplog.text and standby.last_error is None
    assert read_holder(third).flushed_until == T0 + 1320 and standby.unwritten_loss_clusters() == {"c1"}
    assert caplog.text.count("has not recorded the loss this one saw") == 1
    assert standby.last_error is not None and "has not recorded 1 loss this one saw in c1" in standby.last_error
    with monkeypatch.context() as broken:  # a look that fails leaves the verdict standing
        broken.setattr(history_writer, "read_recorded", lambda *a: (_ for _ in ()).throw(OSError("damaged")))
        poll([standby], T0 + 1400)
    assert standby.last_error is not None and "has not recorded 1 loss" in standby.last_error
    holder.close()
    assert standby.flush() and standby.standby_of is None and standby.last_error is None
    assert read_table(third, "loss_events").time.tolist() == [T0 + 31]
    standby.close()


def test_a_ledger_written_alone_leaves_the_error_of_what_still_fails(tmp_path: Path) -> None:
    """`flush_losses` writes the ledger's rows alone, every poll while a checkpoint waits for them. The error it
    leaves names what still fails, or is gone when nothing does: before, the failed flush's text stood until the
    next due flush wrote the rest (a flush interval, up to a day), naming the ledger written since."""
    w = HistoryWriter(tmp_path, clock=lambda: T0)
    ledger, cluster = tmp_path / "loss_events", tmp_path / "cluster"
    ledger.write_text("not a directory")
    cluster.write_text("not a directory")
    w.add_snapshot(truncated(T0))
    assert not w.flush() and w.last_error is not None
    assert w.last_error.startswith("history flush failed: ") and w.last_error.endswith(" (and 1 more)")
    assert not w.flush_losses() and w.last_error.endswith(" (and 1 more)")  # the ledger's retry: both still fail
    ledger.unlink()
    w.add_snapshot(small_snapshot(T0 + 30, topics=2))  # rows of a poll since: waiting, not failing
    assert w.flush_losses() and not w.buffered_never_dropped()
    assert w.last_error is not None and w.last_error.startswith("history flush failed: cluster/date=2023-11-15: ")
    assert "loss_events" not in w.last_error and "more" not in w.last_error
    cluster.unlink()
    assert w.flush() and w.last_error is None

    # Both fail, then the cluster rows are written and the ledger fails again: written alone at last, nothing
    # fails any more, though the day's cluster rows of a poll since wait.
    days = [tmp_path / table / "date=2023-11-16" for table in ("loss_events", "cluster")]
    for d in days:
        d.write_text("not a directory")
    w.add_snapshot(truncated(T0 + DAY))
    assert not w.flush() and w.last_error is not None and w.last_error.endswith(" (and 1 more)")
    days[1].unlink()
    assert not w.flush() and w.last_error is not None and "loss_events/date=2023-11-16" in w.last_error
    assert "more" not in w.last_error
    days[0].unlink()
    w.add_snapshot(small_snapshot(T0 + DAY + 30, topics=2))
    assert w.flush_losses() and w.last_error is None and w.buffered_rows > 0
    assert len(read_table(tmp_path, "loss_events")) == 2

    # The ledger's rows of a loss written without the day's other loss rows (a retention skip of an earlier poll,
    # not held for): that table and day still wait after a failed write, and the error stays on it until the due
    # flush writes them.
    day = tmp_path / "loss_events" / "date=2023-11-17"
    day.write_text("not a directory")
    skipped = small_snapshot(T0 + 2 * DAY, topics=2)
    skipped.losses = [LossRecord("c1", T0 + 2 * DAY, RETENTION_SKIPPED, "t1", 0, 7, "log start 1,007")]
    w.add_snapshot(skipped)
    w.add_snapshot(truncated(T0 + 2 * DAY + 30))
    assert not w.flush() and w.last_error is not None and "loss_events/date=2023-11-17" in w.last_error
    day.unlink()
    assert w.flush_losses() and not w.buffered_never_dropped()
    assert w.last_error is not None and "loss_events/date=2023-11-17" in w.last_error
    assert w.flush() and w.last_error is None and len(read_table(tmp_path, "loss_events")) == 4
    w.close()


def test_a_flush_error_reads_the_same_at_every_retry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """A write that fails opening its temp file (a filesystem remounted read-only, say) names that file, new at
    every attempt. The error the alert shows and the collector logs once a change leaves it out, so it reads the
    same at every retry, whichever of the full flush and the ledger's retry failed last; the writer's own log of
    each failed flush keeps the names. Before, a retry a poll logged it every poll. And a poll whose rows the memory
    bound drops whole after a failed write still says so. (The one mock: a read-only remount needs root mounts this
    machine cannot make.)"""
    import uuid

    def read_only(directory: Path, name: str, write: Callable[..., object]) -> int:
        temp = directory / f".tmp-{uuid.uuid4().hex}.parquet"
        raise OSError(errno.EROFS, "Read-only file system", str(temp))

    monkeypatch.setattr(history_writer, "publish_file", read_only)
    caplog.set_level(logging.ERROR, logger="collectors.outputs.history")
    w = HistoryWriter(tmp_path, clock=lambda: T0)
    w.add_snapshot(truncated(T0))
    assert not w.flush()
    first = w.last_error
    assert first is not None and ".tmp-" not in first and first.endswith(" (and 2 more)")
    assert "OSError: Read-only file system" in first
    for retry in (w.flush_losses, w.flush_losses, w.flush, w.flush_losses):  # the ledger's first, then all
        assert not retry() and w.last_error == first
    assert caplog.text.count(".tmp-") >= 5  # the writer's log names the file each time
    monkeypatch.undo()
    assert w.flush() and w.last_error is None

    # A single poll's rows of a table past the memory bound, and the write fails: dropped, and the error said (not
    # raised from `add`, which the collector's poll loop calls).
    monkeypatch.setattr(history_writer, "publish_file", read_only)
    w.max_buffer_rows = 1
    w.add_snapshot(small_snapshot(T0 + 30, topics=2))
    assert w.last_error is not None and w.last_error.startswith("history flush failed: ") and w.dropped_rows > 0
    monkeypatch.undo()
    w.add_snapshot(small_snapshot(T0 + 60, topics=1))
    w.close()


def test_a_standby_taking_over_does_not_record_again_a_loss_the_holder_wrote(tmp_path: Path) -> None:
    """The holder wrote the loss after the standby's last look and stopped: the takeover finds it in the history
    and does not write it again, or the report counted its messages twice. The standby's polls straddled two leader
    changes (epoch 3 -> 5) and the holder's saw the second (4 -> 5) within them, both finding the log cut at 950:
    one loss (`loss_rows.covers`). The unclean election is one too. Losses the history does not hold are written:
    partition 1's, the standby's alone; partition 2's, where the holder straddled the changes (3 -> 5) and the
    standby counted epoch 4's messages, which the holder's row does not; partition 3's, where the holder (watching
    from epoch 4) cut epoch 4 at 960, past the cut of epoch 3 at 950 that only the standby saw."""
    holder = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    standby = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    theirs = truncated(T0 + 30, before=4, end=950)
    theirs.losses += [replace(theirs.losses[0], kind=UNCLEAN_ELECTION, messages=None, offset=None),
                      replace(theirs.losses[0], partition=2, messages=9, epoch_before=3, offset=991),
                      replace(theirs.losses[0], partition=3, messages=40, offset=960)]
    holder.add_snapshot(theirs)
    mine = truncated(T0 + 31, before=3, end=950)
    mine.losses += [replace(mine.losses[0], kind=UNCLEAN_ELECTION, messages=None, offset=None),
                    replace(mine.losses[0], partition=1, messages=5, offset=995),
                    replace(mine.losses[0], partition=2, messages=12, epoch_before=4, offset=988),
                    replace(mine.losses[0], partition=3)]
    standby.add_snapshot(mine)
    assert standby.flush() and standby.buffered_rows == 5  # the history holds none of them yet
    assert holder.flush()
    holder.close()
    assert standby.flush() and standby.standby_of is None
    ledger = read_table(tmp_path, "loss_events").sort_values(["partition", "kind"])
    assert list(zip(ledger.partition, ledger.kind, ledger.messages.fillna(-1), ledger.time, strict=True)) == [
        (0, TRUNCATION, 50, T0 + 30), (0, UNCLEAN_ELECTION, -1, T0 + 30), (1, TRUNCATION, 5, T0 + 31),
        (2, TRUNCATION, 9, T0 + 30), (2, TRUNCATION, 12, T0 + 31), (3, TRUNCATION, 40, T0 + 30),
        (3, TRUNCATION, 50, T0 + 31)]
    standby.close()


def read_past(snap: ClusterSnapshot, group: str, committed: int) -> LossRecord:
    """`group`'s reading past the truncation `snap` proves, from its commit at `committed` before the change (as
    `collectors.model.loss.truncated_readers` records it: the truncation's time, epochs and cut)."""
    cut = snap.losses[0]
    assert cut.offset is not None
    return LossRecord(cut.cluster, cut.time, BEYOND_LOG_END, cut.topic, cut.partition, committed - cut.offset,
                      f"group {group} had committed {committed}", group_id=group, epoch_before=cut.epoch_before,
                      epoch_after=cut.epoch_after, offset=cut.offset)


def test_a_standby_keeps_a_groups_reading_past_the_truncation_until_the_history_holds_it(tmp_path: Path) -> None:
    """A group that had read past the truncation is recorded at the poll that proves the truncation, from the
    commit seen before the leader change, and never again: the standby keeps its row of it like the truncation's.
    Here the holder records the truncation and group billing, but not group audit (its poll came before audit
    committed past the cut): the standby drops its truncation and billing rows, keeps audit's (a row of its own
    poll's chunk, kept though the chunk holds no truncation any more), and writes it when it takes over. Before,
    a standby dropped every group's row: when the holder's rows were not written, nobody's were."""
    holder = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    standby = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    theirs = truncated(T0 + 30, before=4, end=950)
    theirs.losses += [read_past(theirs, "billing", 990)]
    mine = truncated(T0 + 31, before=3, end=950)
    mine.losses += [read_past(mine, "billing", 990), read_past(mine, "audit", 960)]
    standby.add_snapshot(mine)
    assert standby.flush() and standby.buffered_rows == 3  # the history holds none of them yet
    holder.add_snapshot(theirs)
    assert holder.flush()
    assert standby.flush() and standby.buffered_rows == 1 and standby.unwritten_loss_clusters() == {"c1"}
    poll([holder, standby], T0 + 60)  # a flush more: audit's row is not dropped as the poll's other rows are
    assert standby.buffered_rows == 1
    holder.close()
    assert standby.flush() and standby.standby_of is None and not standby.buffered_never_dropped()
    ledger = read_table(tmp_path, "loss_events").sort_values(["kind", "group_id"])
    assert list(zip(ledger.kind, ledger.group_id.fillna("-"), ledger.messages, ledger.time, strict=True)) == [
        (BEYOND_LOG_END, "audit", 10, T0 + 31), (BEYOND_LOG_END, "billing", 40, T0 + 30),
        (TRUNCATION, "-", 50, T0 + 30)]
    standby.close()


def test_a_loss_the_holder_recorded_days_ago_is_found_by_a_standby_that_finds_it_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A standby restarted on a checkpoint three days old (its loss evidence resumes up to a week) finds again a
    truncation the holder recorded when it happened: it is in the history, so the standby keeps nothing and its
    checkpoint does not wait. A standby that stops with a loss the history lacks says so."""
    holder = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    poll([holder], T0)
    holder.add_snapshot(truncated(T0 + 30))
    assert holder.flush()
    standby = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    standby.add_snapshot(truncated(T0 + 3 * 86400))
    assert standby.flush() and standby.standby_of is not None and not standby.buffered_never_dropped()
    caplog.set_level(logging.WARNING, logger="collectors.outputs.history")
    standby.add_snapshot(truncated(T0 + 3 * 86400 + 30, before=4, end=990))  # one the holder has not written
    standby.close()
    assert "stopping with the record of a loss in c1 not in" in caplog.text
    holder.close()


def test_a_standby_looks_again_through_the_history_when_another_collector_takes_it_over(tmp_path: Path) -> None:
    """Three collectors on one root; the holder never records a loss the two standbys saw. The first standby to
    take over writes its row, at its poll of an hour before; the other one, whose looks since its first one read
    only rows after the old holder's `flushed_until` (less `LOOK_SLACK_S`), reads the history through again for
    the new holder, finds the loss there and keeps nothing. Before, it kept its row until it took over itself."""
    first = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    second = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    third = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    for w in (second, third):
        w.add_snapshot(truncated(T0 + 31))
    for t in range(60, 4000, 300):
        poll([first, second, third], T0 + t)
    assert third.unwritten_loss_clusters() == {"c1"}
    time.sleep(1.1)  # one process here: the next holder is told apart by its `since` (seconds), not its pid
    old = read_holder(tmp_path)
    first.close()
    assert second.flush() and second.standby_of is None  # takes over and writes its row of T0 + 31
    assert third.flush() and third.standby_of is not None and third.standby_of.since != old.since
    assert not third.unwritten_loss_clusters()
    assert read_table(tmp_path, "loss_events").time.tolist() == [T0 + 31]
    second.close()
    third.close()


def test_a_takeover_reads_what_the_holder_recorded_as_it_stopped(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The holder's final flush lands between the standby's read of the lease file and its taking the lease: the
    takeover goes by what the file says once the lease is ours, so the standby's rows of the polls that flush
    wrote are not written again. Before, it went by the account it read first."""
    holder = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    standby = HistoryWriter(tmp_path, exclusive=True, clusters=["c1"], clock=lambda: T0)
    poll([holder, standby], T0)
    holder.add_snapshot(small_snapshot(T0 + 30, topics=2))
    standby.add_snapshot(small_snapshot(T0 + 29, topics=2))
    read = history_writer.read_holder

    def holder_stops_meanwhile(root: Path) -> Holder:
        account = read(root)
        holder.close()  # writes T0 + 30, records it, lets go
        return account

    monkeypatch.setattr(history_writer, "read_holder", holder_stops_meanwhile)
    assert standby.flush() and standby.standby_of is None
    assert sorted(read_table(tmp_path, "cluster").time) == [T0, T0 + 30]  # not T0 + 29 as well
    standby.close()


def test_a_standby_holds_back_only_the_checkpoint_of_a_loss_nobody_wrote(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    """A standby polling `prod` and `billing` beside a holder that writes `prod` alone: both see a truncation. Its
    hold of `prod` ends when the holder writes prod's; `billing`'s, which nobody writes, is kept (before, dropped
    once the holder's polls passed it) and holds back only billing's checkpoint, until the takeover writes it."""
    from collectors.model.poll import PollResult

    caplog.set_level(logging.ERROR, logger="collectors.runtime.sinks")
    root = tmp_path / "h"
    m = Monitor(monitor_config(tmp_path / "state"))
    holder = HistoryWriter(root, exclusive=True, clusters=["prod"])
    try:
        sink = HistorySink(HistoryConfig(root=str(root)), exporter=None, monitor=m, clusters=["prod", "billing"])
        sink.writer.flush_interval_s = 0  # every poll flushes
        sink([PollResult(truncated(T0 + 31, "prod")), PollResult(truncated(T0 + 31, "billing"))], T0 + 31)
        assert sink.writer.standby_of is not None and sink.unwritten_losses == {"prod", "billing"}
        poll([holder], T0 + 30, cluster="prod")  # without its loss: not yet
        sink([PollResult(small_snapshot(T0 + 61, c)) for c in ("prod", "billing")], T0 + 61)
        assert sink.unwritten_losses == {"prod", "billing"}
        holder.add_snapshot(truncated(T0 + 60, "prod"))
        poll([holder], T0 + 90, cluster="prod")
        sink([PollResult(small_snapshot(T0 + 91, c)) for c in ("prod", "billing")], T0 + 91)
        assert sink.unwritten_losses == {"billing"}
        assert caplog.text.count("history not written") == 1  # nobody writes billing: said once, not every poll
        holder.close()
        sink([PollResult(small_snapshot(T0 + 121, c)) for c in ("prod", "billing")], T0 + 121)
        assert sink.writer.standby_of is None and sink.unwritten_losses == set()
        ledger = read_table(root, "loss_events")
        assert sorted(zip(ledger.cluster, ledger.time, strict=True)) == [("billing", T0 + 31), ("prod", T0 + 60)]
        sink.close()
    finally:
        holder.close()
        m.close()


def test_what_was_left_open_is_carried_only_into_the_same_cluster(tmp_path: Path) -> None:
    """`last_polls` says when, and of which cluster, the history's last polls were; a poller that already polled
    another one of the name takes nothing (a standby's view), one that has not yet drops it at its first poll if
    the ids differ (`ClusterPoller._check_identity`, tested against the sandbox in test_faults.py)."""
    from collectors.outputs.history.left_open import LastPoll, last_polls

    w = HistoryWriter(tmp_path, clock=lambda: T0)
    for t, cid in ((T0, "old-id"), (T0 + 30, "prod-id"), (T0 + 60, None)):
        snap = small_snapshot(t, cluster="prod")
        snap.cluster_id = cid
        w.add_snapshot(snap)
    w.add_snapshot(small_snapshot(T0 + 90, cluster="other"))
    assert w.flush()
    polls = last_polls(tmp_path, ["prod", "other"], T0 + 100)
    assert polls == {"prod": LastPoll(T0 + 60, "prod-id"),  # the last poll, and the last id known
                     "other": LastPoll(T0 + 90, small_snapshot(T0, cluster="other").cluster_id)}

    m = Monitor(monitor_config(tmp_path / "state"))
    try:
        (p,) = m.pollers
        assert m.expect_cluster_ids({}) == {"prod"} and p._resumed_cluster_id is None  # nothing known: carry
        assert m.expect_cluster_ids({"prod": polls["prod"]}) == {"prod"} and p._resumed_cluster_id == "prod-id"
        assert p._resumed_until == T0 + 60  # what is dropped at the first poll is lost after then
        p.cluster_id = "rebuilt-id"  # polled already: another cluster of the name
        assert m.expect_cluster_ids({"prod": polls["prod"]}) == set()
    finally:
        m.close()


def test_the_demo_starts_its_clock_after_an_earlier_run_on_its_data_dir(tmp_path: Path) -> None:
    """The demo's sandbox clock runs ten times fast: a run on a reused data dir wrote polls "in the future". Before,
    the next run's clock started at now and its polls interleaved with those in the history."""
    from sandbox.demo import clock_start

    root, now = tmp_path / "history", time.time()
    assert clock_start(root, now) == now  # a new data dir
    _history_left_by_a_stopped_collector(root, now + 900)
    assert clock_start(root, now) == now + 960  # after the last run's last poll
    assert clock_start(root, now + 1000) == now + 1000  # a run behind us: now, as ever


def _clusters_left_unreachable(root: Path, clusters: list[str], last_poll: float) -> None:
    """A collector of `clusters` found each unreachable ten minutes before `last_poll` (an alert and its incident,
    ``<cluster>-recorded``), polled them all up to `last_poll` and stopped cleanly."""
    from collectors.model.poll import IncidentEvent, PollResult
    from collectors.model.records import AlertRecord, IncidentRecord

    old = HistoryWriter(root, exclusive=True, clusters=clusters)
    opened = last_poll - 600
    for c in clusters:
        rec = IncidentRecord(c, f"{c}-recorded", "cluster", c, "critical", f"cluster {c} unreachable", opened, opened,
                             alerts=1, members={"cluster_unreachable": 1})
        alert = AlertRecord("cluster_unreachable", "critical", c, c, "unreachable", opened, opened)
        old.add(PollResult(small_snapshot(opened, cluster=c), opened=[alert],
                           incident_events=[IncidentEvent(opened, "opened", rec)]))
        old.add(PollResult(small_snapshot(last_poll, cluster=c)))
    old.close()


def _monitor_of(tmp_path: Path, name: str, clusters: list[str]) -> Monitor:
    from collectors.config import MonitorConfig

    return Monitor(MonitorConfig.model_validate({
        "clusters": [{"name": c, "bootstrap_servers": "127.0.0.1:1"} for c in clusters],
        "state_dir": str(tmp_path / f"state-{name}"), "request_timeout_s": 1}))


def test_whether_what_was_left_open_is_carried_on_is_decided_per_cluster() -> None:
    """`carry_verdicts`: by each cluster's own last poll, whoever wrote it; a watched holder's clusters always."""
    from collectors.outputs.history.lease import Holder
    from collectors.outputs.history.left_open import LastPoll, carry_verdicts

    now = 100_000.0
    holder = Holder(1, "h", None, ("prod",), flushed_until=now - 10)
    polls = {"prod": LastPoll(now - 10, "p"), "billing": LastPoll(now - 300, "b"), "old": LastPoll(now - 7200, "o"),
             "future": LastPoll(now + 600, "f")}
    every = ["prod", "billing", "old", "future", "never-polled"]
    assert carry_verdicts(every, polls, holder, False, now, 3600) == {
        "prod": None,
        "billing": None,  # the holder did not poll it; its own last poll is five minutes old
        "old": "last polled 7200s ago (carry_max_age_s 3600s)",
        "future": "polled 600s ahead of this collector's clock (stepped back?)",
        "never-polled": "no poll of it recorded"}
    assert carry_verdicts(every, polls, holder, False, now, 0)["prod"] == "last polled 10s ago (carry_max_age_s 0s)"
    watched = carry_verdicts(every, {}, holder, True, now, 0)  # polled until the holder stopped, a moment ago
    assert watched["prod"] is None and watched["billing"] == "no poll of it recorded"
    assert carry_verdicts(["prod"], {}, holder, False, now, 3600) == {"prod": None}  # its last write stands in
    assert carry_verdicts(["prod"], {}, Holder(1, "h", None, None, flushed_until=now - 7200), False, now, 3600) == {
        "prod": "last polled 7200s ago (carry_max_age_s 3600s)"}  # clusters unknown: any of ours


def test_a_cluster_the_last_holder_did_not_poll_is_carried_on_by_its_own_last_poll(tmp_path: Path) -> None:
    """A polls prod and billing; B takes the root over with prod only and stops a minute later; A comes back
    without its checkpoint. Before, A carried on only what B polled: billing's incident, polled five minutes
    earlier, ended ``lost`` and A opened it again (two incidents for one cause). Now billing is judged by its own
    last poll, and B, which does not poll billing, leaves it open for whoever comes within carry_max_age_s."""
    from collectors.outputs.history.left_open import open_incidents

    root = tmp_path / "history"
    now = time.time()
    _clusters_left_unreachable(root, ["prod", "billing"], now - 300)
    b = _monitor_of(tmp_path, "b", ["prod"])
    try:
        sink = HistorySink(HistoryConfig(root=str(root)), exporter=None, monitor=b, clusters=["prod"])
        assert [i.id for i in b.pollers[0].incidents.open_for("prod")] == ["prod-recorded"]
        (r,) = b.poll_once()
        sink([r], r.snapshot.time)
        sink.close()
    finally:
        b.close()
    assert {i.id for i in open_incidents(root, ["billing"], time.time())} == {"billing-recorded"}  # B left it
    a = _monitor_of(tmp_path, "a", ["prod", "billing"])
    try:
        sink = HistorySink(HistoryConfig(root=str(root)), exporter=None, monitor=a, clusters=["prod", "billing"])
        assert {p.name: [i.id for i in p.incidents.open_for(p.name)] for p in a.pollers} == {
            "prod": ["prod-recorded"], "billing": ["billing-recorded"]}
        results = a.poll_once()
        assert [e.event for r in results for e in r.incident_events] == []  # neither lost nor opened again
        sink(results, time.time())
        sink.close()
    finally:
        a.close()
    events = read_table(root, "incident_events")
    assert sorted(zip(events.id, events.event, strict=True)) == [("billing-recorded", "opened"),
                                                                 ("prod-recorded", "opened")]


@pytest.mark.parametrize("locks", [True, False])
def test_what_a_cluster_nobody_polls_any_more_left_open_ends_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  locks: bool) -> None:
    """A polled prod and retired; B takes the root over with prod only (retired taken out of the configuration).
    Before, retired's incident and alert stayed open in the history for good: every weekly report counted them open
    at the week's end. Now B ends them ``lost`` at retired's last poll once that poll is carry_max_age_s old
    (a collector of retired coming back before then carries them on), and only while its lease's lock says nobody
    else writes the root: without the lock (some network mounts) a collector of retired may be writing beside it."""
    from collectors.outputs.history.left_open import open_alerts, open_incidents

    root = tmp_path / "history"
    now = time.time()
    last_poll = now - 60
    _clusters_left_unreachable(root, ["prod", "retired"], last_poll)
    if not locks:
        def no_locks(fd: int, op: int) -> None:
            raise OSError(errno.ENOLCK, "No locks available")

        monkeypatch.setattr(fcntl, "flock", no_locks)
    clock = [now]
    b = _monitor_of(tmp_path, "b", ["prod"])
    try:
        sink = HistorySink(HistoryConfig(root=str(root)), exporter=None, monitor=b, clusters=["prod"],
                           carry_max_age_s=3600, clock=lambda: clock[0])
        sink([], now + 3000)  # 51 minutes after retired's last poll: it may still come back
        assert sink.writer.flush()
        assert {i.id for i in open_incidents(root, ["retired"], now)} == {"retired-recorded"}
        sink([], now + 3600)  # an hour after it
        sink.close()
    finally:
        b.close()
    events = read_table(root, "incident_events")
    retired = events[events.id == "retired-recorded"].sort_values("time")
    alerts = read_table(root, "alert_events")
    if not locks:
        assert list(retired.event) == ["opened"] and set(alerts.event) == {"open"}
        return
    assert list(retired.event) == ["opened", "lost"]
    assert retired.time.iloc[-1] == pytest.approx(last_poll, abs=1e-3)
    assert list(events[events.id == "prod-recorded"].event) == ["opened"]  # carried on by B
    lost = alerts[alerts.event == "lost"]
    assert list(zip(lost.cluster, lost.rule, strict=True)) == [("retired", "cluster_unreachable")]
    assert list(lost.time) == pytest.approx([last_poll], abs=1e-3)
    assert open_incidents(root, ["retired"], now + 3600) == [] and open_alerts(root, ["retired"], now + 3600) == []


def test_a_cluster_nobody_polls_that_was_last_polled_long_ago_is_ended_at_the_takeover(tmp_path: Path) -> None:
    """Retired's last poll is already two hours old when B takes the root over: ended at once."""
    root = tmp_path / "history"
    last_poll = time.time() - 7200
    _clusters_left_unreachable(root, ["prod", "retired"], last_poll)
    b = _monitor_of(tmp_path, "b", ["prod"])
    try:
        sink = HistorySink(HistoryConfig(root=str(root)), exporter=None, monitor=b, clusters=["prod"])
        assert sink.writer.flush()  # no poll yet: prod's own lost event comes with B's first poll
    finally:
        sink.close()
        b.close()
    events = read_table(root, "incident_events").sort_values(["time", "id"])
    assert list(zip(events.id, events.event, strict=True)) == [
        ("prod-recorded", "opened"), ("retired-recorded", "opened"), ("retired-recorded", "lost")]


def test_a_sink_given_no_cluster_list_takes_the_monitors_clusters_as_polled(tmp_path: Path) -> None:
    """`HistorySink` without `clusters` (its lease then names none): the clusters its monitor polls are not
    "nobody's" and their incidents are not ended as such."""
    root = tmp_path / "history"
    _clusters_left_unreachable(root, ["prod"], time.time() - 7200)
    m = _monitor_of(tmp_path, "b", ["prod"])
    try:
        sink = HistorySink(HistoryConfig(root=str(root)), exporter=None, monitor=m)
        assert sink.writer.flush()
        sink.close()
    finally:
        m.close()
    assert list(read_table(root, "incident_events").event) == ["opened"]


def _removed_clusters_left_open(root: Path, lasts: dict[str, float], ancient: float) -> None:
    """A collector of `lasts`' clusters found each unreachable ten minutes before its own last poll (an alert and its
    incident, ``<cluster>-recorded``) and stopped; the first cluster also had an incident and an alert opened at
    `ancient` and never recorded again (``<cluster>-ancient``)."""
    from collectors.model.poll import IncidentEvent, PollResult
    from collectors.model.records import AlertRecord, IncidentRecord

    def left_open(c: str, iid: str, rule: str, t: float) -> PollResult:
        rec = IncidentRecord(c, iid, "cluster", c, "critical", f"{iid} unreachable", t, t, alerts=1,
                             members={rule: 1})
        return PollResult(small_snapshot(t, cluster=c), opened=[AlertRecord(rule, "critical", c, c, "", t, t)],
                          incident_events=[IncidentEvent(t, "opened", rec)])

    old = HistoryWriter(root, exclusive=True, clusters=list(lasts))
    first = next(iter(lasts))
    old.add(left_open(first, f"{first}-ancient", "broker_down", ancient))
    for c, last in sorted(lasts.items(), key=lambda kv: kv[1]):
        old.add(left_open(c, f"{c}-recorded", "cluster_unreachable", last - 600))
        old.add(PollResult(small_snapshot(last, cluster=c)))
    old.close()


def test_the_clusters_nobody_polls_are_ended_in_one_read_each_as_of_its_own_last_poll(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three clusters taken out of the configuration come due in one poll, each last polled at another time.

    Before, the sink read the event tables (two days of them) once per cluster: 1.1 s for 8 clusters and 6.2 s for
    32 at 1,440 files a table a day. Now one read for them all, from the earliest window, each cluster's rows then
    kept from its own (`left_open.open_incidents` given a time per cluster): what each ends ``lost`` is what a
    read of its own gave. r1's ancient incident and alert are older than r1's two days but within r3's: seen by the
    read, not by r1's window, and left alone as before."""
    from collectors.outputs.history import left_open

    root = tmp_path / "history"
    now = time.time()
    lasts = {"r1": now - 60, "r2": now - 7200, "r3": now - 1.5 * 86_400, "prod": now - 60}
    _removed_clusters_left_open(root, lasts, ancient=now - 2.5 * 86_400)
    b = _monitor_of(tmp_path, "b", ["prod"])
    try:
        sink = HistorySink(HistoryConfig(root=str(root)), exporter=None, monitor=b, clusters=["prod"],
                           carry_max_age_s=2 * 86_400, clock=lambda: now)  # none due at the takeover
        lasts = dict(sink._unpolled)  # each one's last poll as the history holds it (to the microsecond)
        assert sorted(lasts) == ["r1", "r2", "r3"]
        expected = {c: left_open.lost_ends(left_open.open_incidents(root, [c], t), left_open.open_alerts(root, [c], t),
                                           t) for c, t in lasts.items()}  # each its own read, as before
        assert {c: ([e.incident.id for e in ev], [a.rule for a in ended]) for c, (ev, ended) in expected.items()} == {
            c: ([f"{c}-recorded"], ["cluster_unreachable"]) for c in lasts}
        reads = {"open_incidents": 0, "open_alerts": 0}

        def counting(name: str) -> Callable[..., object]:
            """The real read, counted."""
            real = getattr(left_open, name)

            def counted(*args: object, **kw: object) -> object:
                reads[name] += 1
                return real(*args, **kw)

            return counted

        for name in reads:
            monkeypatch.setattr(left_open, name, counting(name))
        added: dict[str, tuple[list, list]] = {}  # type: ignore[type-arg]
        add_events = sink.writer.add_events
        monkeypatch.setattr(sink.writer, "add_events",
                            lambda c, ev=(), lost=(): (added.__setitem__(c, (list(ev), list(lost))),
                                                       add_events(c, ev, lost))[1])
        sink([], now + 2 * 86_400 + 60)  # all three past carry_max_age_s
        assert added == expected
        assert reads == {"open_incidents": 1, "open_alerts": 1}
        assert sink._unpolled == {}
        sink.close()
    finally:
        b.close()
    events = read_table(root, "incident_events")
    assert sorted(events[events.event == "lost"].id) == ["r1-recorded", "r2-recorded", "r3-recorded"]


def test_a_failed_read_of_what_clusters_nobody_polls_left_open_marks_nothing_and_is_tried_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The read fails (the disk, mocked: an I/O error on the alert events): nothing is marked, not even the
    incidents already read, and the clusters are tried again `UNPOLLED_RETRY_S` later. Before, each was dropped
    before its read: what it left open stayed open until the next takeover."""
    from collectors.outputs.history import left_open

    root = tmp_path / "history"
    now = time.time()
    _removed_clusters_left_open(root, {"prod": now - 60, "r1": now - 60, "r2": now - 7200}, ancient=now - 86_400)
    real, failures = left_open.read_arrow, [OSError(errno.EIO, "Input/output error")]

    def failing_once(root: Path, table: str, *args: object, **kw: object) -> object:
        if table == "alert_events" and failures:
            raise failures.pop()
        return real(root, table, *args, **kw)

    b = _monitor_of(tmp_path, "b", ["prod"])
    try:
        sink = HistorySink(HistoryConfig(root=str(root)), exporter=None, monitor=b, clusters=["prod"],
                           carry_max_age_s=3 * 3600, clock=lambda: now)
        monkeypatch.setattr(left_open, "read_arrow", failing_once)  # the takeover's read went well
        t = now + 4 * 3600  # both due
        with caplog.at_level(logging.WARNING, "collectors.runtime.sinks"):
            sink([], t)
        assert f"of r1, r2 (not polled any more) could not be read: [Errno {errno.EIO}] Input/output error (tried " \
               "again in 600s)" in caplog.text
        sink([], t + 599)
        assert sorted(sink._unpolled) == ["r1", "r2"] and sink.writer.flush()
        assert "lost" not in set(read_table(root, "incident_events").event)
        sink([], t + 600)
        assert sink._unpolled == {}
        sink.close()
    finally:
        b.close()
    events = read_table(root, "incident_events")
    assert sorted(events[events.event == "lost"].id) == ["r1-recorded", "r2-recorded"]
