"""The history sink turns the writer's failures into the monitor's own alerts: a flush that fails
(`history_write_failed`) and the hourly maintenance that fails (`history_maintenance_failed`).

Before, a failing retention or compaction was only logged: the history grew in small files that the dashboard,
the roll-ups and the weekly report then read, and nothing told on-call. The full disk is the one boundary
mocked (as in test_history.py's merge-failure test); the writer, its files and the monitor are real.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from collectors.config import MonitorConfig
from collectors.outputs.history import HistoryWriter, read_table
from collectors.runtime.poller import Monitor
from collectors.runtime.sinks import HistorySink
from tests.support.damage import disk_full_on
from tests.unit.test_history import DAY, LATER, T0, files_in, write_day


def monitor_config(state_dir: Path, **kw: Any) -> MonitorConfig:
    """One cluster nobody answers for (127.0.0.1:1): the monitor's own conditions are what these tests watch."""
    return MonitorConfig.model_validate({"clusters": [{"name": "prod", "bootstrap_servers": "127.0.0.1:1"}],
                                         "state_dir": str(state_dir), "request_timeout_s": 1, **kw})


def test_failing_maintenance_raises_a_monitor_alert_until_a_run_succeeds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "history"
    w = HistoryWriter(root, compact_min_files=5, clock=lambda: LATER)
    for day in range(2):
        write_day(w, 6, base=T0 + day * DAY)  # two finished days, six files each: due for compaction
    cfg = monitor_config(tmp_path / "state", history={"root": str(root), "compact_min_files": 5})
    m = Monitor(cfg)
    try:
        sink = HistorySink(cfg.history, exporter=None, monitor=m)
        sink.writer.clock = lambda: LATER
        sink.writer.maintenance_interval_s = 0  # every call maintains, as every hour would
        disk_full_on(monkeypatch, "topic_health", "2023-11-15")
        sink([], LATER)  # starts the maintenance on its own thread: the poll does not wait for it
        assert sink.writer.background_maintenance and sink.writer.wait_maintenance(30)
        sink.writer.maintenance_interval_s = 3600  # the next poll reports the run that failed, starts none
        sink([], LATER)
        cond = m.conditions.get("history_maintenance_failed")
        assert cond is not None and (cond.rule, cond.severity, cond.subject) == (
            "history_maintenance_failed", "warning", "history")
        assert "1 day not compacted (topic_health/date=2023-11-15)" in cond.summary
        assert "history_write_failed" not in m.conditions  # the flushes are fine: another rule

        (r,) = m.poll_once(LATER)  # the cluster is unreachable too; the monitor's own alert rides every cluster
        alert = next(a for a in r.snapshot.alerts if a.rule == "history_maintenance_failed")
        assert alert.subject == "history" and "topic_health/date=2023-11-15" in alert.summary
        (incident,) = [i for i in r.snapshot.incidents if i.kind == "monitor"]
        assert incident.subject == "monitor" and incident.severity == "warning"

        monkeypatch.undo()  # room again: the next run compacts the day and clears the alert
        sink.writer.maintenance_interval_s = 0
        sink([], LATER)
        assert sink.writer.wait_maintenance(30)
        sink.writer.maintenance_interval_s = 3600
        sink([], LATER)
        assert "history_maintenance_failed" not in m.conditions
        assert {(f.parent.name, f.name.split("-")[0]) for f in files_in(root, "topic_health")} == {
            ("date=2023-11-15", "compact"), ("date=2023-11-16", "compact")}
    finally:
        m.close()


def test_a_proved_truncation_is_written_at_once_and_the_checkpoint_follows_it(tmp_path: Path) -> None:
    """A collector killed between writing a truncation's ledger row and its next checkpoint would resume the epoch
    watch from before the leader change and record the loss again; one killed before writing it finds it again.
    So that poll flushes its rows at once and saves the checkpoint right after; a poll with a loss the epoch
    watches do not prove (a retention skip: not in `EPOCH_LOSSES`) waits for the intervals."""
    from collectors.model.poll import PollResult
    from collectors.model.records import ClusterSnapshot, LossRecord, TransactionRecord
    from collectors.runtime.sinks import CheckpointSink, RiseCheckpointSink

    def poll(kind: str) -> PollResult:
        snap = ClusterSnapshot(cluster="prod", time=LATER)
        snap.losses = [LossRecord("prod", LATER, kind, "orders", 3, 1_200, "epoch 5 ends at 48,800")]
        return PollResult(snap)

    root = tmp_path / "history"
    cfg = monitor_config(tmp_path / "state", history={"root": str(root)}, checkpoint_interval_s=3600)
    m = Monitor(cfg)
    try:
        history = HistorySink(cfg.history, exporter=None, monitor=m)
        history.writer.clock = lambda: LATER  # a minute never passes: only the loss flushes
        checkpoints = CheckpointSink(tmp_path / "state", interval_s=3600, monitor=m)
        for sink in (history, checkpoints):
            sink([poll("retention_skipped")], LATER)
        assert files_in(root, "loss_events") == [] and checkpoints.saves == 0
        for sink in (history, checkpoints):
            sink([poll("truncation")], LATER)
        assert len(files_in(root, "loss_events")) == 1 and checkpoints.saves == 1
        # an epoch rise counted on a V2 cluster at this poll: resumed from before it, the collector would count it
        # again at a new time, which the Prometheus twin would count as a second rise (`counted_epoch_rise`); saved
        # by the sink that runs before the exporter, that cluster's checkpoint only
        saved: list[object] = []
        real_save = m.save_checkpoints
        m.save_checkpoints = lambda d, now=None, clusters=None: saved.append(clusters) or real_save(d, now, clusters)
        rises = RiseCheckpointSink(checkpoints)
        rise = PollResult(ClusterSnapshot(cluster="prod", time=LATER))
        rise.snapshot.transactions = [TransactionRecord("prod", "tx", 1, "Ongoing", 7, 3, 60_000, LATER - 1, 1.0,
                                                        epoch_rise_time=t) for t in (LATER - 30, 0.0)]
        for sink in (rises, checkpoints):
            sink([rise], LATER)
        assert checkpoints.saves == 1 and saved == []  # rises counted at earlier polls, or none yet
        rise.snapshot.transactions[1].epoch_rise_time = LATER
        for sink in (rises, checkpoints):
            sink([rise], LATER)
        assert checkpoints.saves == 2 and saved == [{"prod"}]
        # the same poll proved a truncation too: its checkpoint waits for the ledger rows (a kill in between would
        # lose them for good), so the rise sink leaves it to the full save after the history sink's flush; a poll
        # that recorded a loss of another kind, to the timed save
        other = poll("txn_timeout_abort")
        other.snapshot.transactions = rise.snapshot.transactions
        rises([other], LATER)
        assert saved == [{"prod"}]
        both = poll("truncation")
        both.snapshot.transactions = rise.snapshot.transactions
        rises([both], LATER)
        assert saved == [{"prod"}]
        for sink in (history, checkpoints):
            sink([both], LATER)
        assert len(files_in(root, "loss_events")) == 2 and saved == [{"prod"}, None]
    finally:
        history.writer.close()
        m.close()


def test_a_checkpoint_waits_for_the_history_to_write_the_loss_its_poll_proved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The checkpoint after a proved truncation moves the epoch watch past it, so it must follow the ledger row.
    When the forced flush fails (a full disk), that cluster's checkpoint is held back, by the save after the loss,
    the timed saves, a rising cluster's own save and the one at close, while the row waits in the buffer (retried
    alone at every poll; its memory bound drops other rows, never the ledger's); killed meanwhile, the collector
    resumes from before the loss and records it again. The poll whose retry writes the row releases the hold and
    the checkpoint is saved in full at once, though other tables still wait for a due flush (before `flush_losses`,
    the hold lasted until the next due flush). Other clusters are saved as before. Before, the save ran whatever the
    flush did, and the bound could drop the row. The sink logs the writer's error once a change, not every poll;
    once the ledger is written, the error names only the table that still failed."""
    from collectors.model.poll import PollResult
    from collectors.model.records import ClusterSnapshot, LossRecord
    from collectors.runtime.sinks import CheckpointSink, RiseCheckpointSink

    def poll(cluster: str, *kinds: str) -> PollResult:
        snap = ClusterSnapshot(cluster=cluster, time=LATER)
        snap.losses = [LossRecord(cluster, LATER, k, "orders", 3, 1_200, "epoch 5 ends at 48,800") for k in kinds]
        return PollResult(snap)

    root = tmp_path / "history"
    cfg = monitor_config(tmp_path / "state", history={"root": str(root)}, checkpoint_interval_s=3600,
                         clusters=[{"name": n, "bootstrap_servers": "127.0.0.1:1"} for n in ("prod", "stage")])
    m = Monitor(cfg)
    saved: list[object] = []
    real_save = m.save_checkpoints
    m.save_checkpoints = lambda d, now=None, clusters=None: saved.append(clusters) or real_save(d, now, clusters)
    history = HistorySink(cfg.history, exporter=None, monitor=m)
    caplog.set_level(logging.ERROR, logger="collectors.runtime.sinks")
    try:
        wall = [LATER]
        history.writer.clock = lambda: wall[0]  # the writer's clock: no flush is due until the test moves it
        checkpoints = CheckpointSink(tmp_path / "state", interval_s=3600, monitor=m,
                                     held=lambda: history.unwritten_losses)
        disk_full_on(monkeypatch, "loss_events", "2023-12-15")
        disk_full_on(monkeypatch, "cluster", "2023-12-15")
        history.writer.max_buffer_rows = 1
        for sink in (history, checkpoints):
            sink([poll("prod", "truncation"), poll("stage")], LATER)
        assert files_in(root, "loss_events") == [] and history.unwritten_losses == {"prod"}
        assert saved == [{"stage"}]  # prod's checkpoint on disk is the one from before the loss
        assert "state_write_failed" not in m.conditions and "history_write_failed" in m.conditions
        checkpoints.save(LATER)  # a timed save
        RiseCheckpointSink(checkpoints)([poll("prod")], LATER)  # nothing counted: no save
        checkpoints.save(LATER, {"prod"})  # as a rise on prod would
        assert saved == [{"stage"}, {"stage"}]
        wall[0] += cfg.history.flush_interval_s
        failures = history.writer.flush_failures
        for sink in (history, checkpoints):  # still full: the due flush fails too, and the bound drops rows
            sink([poll("prod"), poll("stage")], LATER)
        assert history.writer.flush_failures == failures + 1  # the due flush's: no retry of the ledger right after
        assert history.unwritten_losses == {"prod"} and saved == [{"stage"}, {"stage"}]
        assert history.writer.dropped_rows > 0 and history.writer.buffered_never_dropped()
        monkeypatch.undo()  # room again
        history.writer.max_buffer_rows = 1_000  # the cluster rows wait now, rather than being dropped
        for sink in (history, checkpoints):  # no flush due: the ledger's rows alone are retried, and written
            sink([poll("prod"), poll("stage")], LATER)
        assert len(files_in(root, "loss_events")) == 1 and history.unwritten_losses == set()
        assert saved[-1] is None and len(saved) == 3  # a full save at once, not at the next due flush or timed save
        assert "history_write_failed" in m.conditions and history.writer.buffered_rows > 0  # cluster rows wait
        error = history.writer.last_error
        assert error is not None and "cluster/date=2023-12-15" in error and "more" not in error
        said = [r.getMessage() for r in caplog.records if r.name == "collectors.runtime.sinks"]
        assert len(said) == 2 and said[0].endswith(" (and 1 more) (rows kept in memory, 2 dropped)")  # once
        assert said[1].startswith(f"history: {error} (rows kept")
        monkeypatch.undo()
        wall[0] += cfg.history.flush_interval_s
        for sink in (history, checkpoints):  # the due flush writes the rest
            sink([poll("prod"), poll("stage")], LATER)
        assert "history_write_failed" not in m.conditions and history.writer.buffered_rows == 0
        assert read_table(root, "loss_events").kind.tolist() == ["truncation"]  # once
        # the disk full again at the last poll and at close: the save at close leaves that cluster out too
        disk_full_on(monkeypatch, "loss_events", "2023-12-15")
        for sink in (history, checkpoints):
            sink([poll("prod", "unclean_election")], LATER)
        history.close()
        checkpoints.close()
        assert history.unwritten_losses == {"prod"} and saved[-2:] == [{"stage"}, {"stage"}]
    finally:
        history.writer.close()
        m.close()


def test_a_save_that_ends_a_hold_and_fails_is_tried_again_at_the_next_poll(tmp_path: Path) -> None:
    """The save that ends a cluster's hold (its loss written at last) moves its checkpoint past the loss. When it
    fails (the state directory unwritable: a file stands where it should be), that cluster's save is tried again at
    the next poll, not at the next timed save an interval later: killed meanwhile, the collector would resume from
    before the loss and record it a second time. Only that cluster's, until saved: not every cluster's a poll while
    the disk is full. Any other failed save waits for the next timed one, as before."""
    from collectors.model.poll import PollResult
    from collectors.model.records import ClusterSnapshot, LossRecord
    from collectors.runtime.sinks import CheckpointSink

    state = tmp_path / "state"
    m = Monitor(monitor_config(state, checkpoint_interval_s=3600, clusters=[
        {"name": n, "bootstrap_servers": "127.0.0.1:1"} for n in ("prod", "stage")]))
    held = {"prod"}
    saved: list[object] = []
    real_save = m.save_checkpoints
    m.save_checkpoints = lambda d, now=None, clusters=None: saved.append(clusters) or real_save(d, now, clusters)
    checkpoints = state / "checkpoints"
    try:
        sink = CheckpointSink(state, interval_s=3600, monitor=m, held=lambda: held)
        sink.save(LATER)  # prod held: stage alone
        assert saved == [{"stage"}] and len(list(checkpoints.iterdir())) == 1
        held.clear()  # the loss is written
        shutil.move(checkpoints, tmp_path / "aside")
        checkpoints.write_text("not a directory")
        sink([], LATER)  # the save that ends the hold fails
        assert saved == [{"stage"}, None] and "state_write_failed" in m.conditions
        sink([], LATER)  # still failing: prod's alone is tried
        assert saved == [{"stage"}, None, {"prod"}]
        checkpoints.unlink()
        shutil.move(tmp_path / "aside", checkpoints)
        sink([], LATER)  # and saved
        assert saved[-1] == {"prod"} and len(list(checkpoints.iterdir())) == 2
        assert "state_write_failed" in m.conditions  # a save of one cluster does not say the state is written
        sink([], LATER)
        assert len(saved) == 4 and sink.saves == 2
        # Any other failed save waits for the next timed one, as before.
        snap = ClusterSnapshot(cluster="prod", time=LATER)
        snap.losses = [LossRecord("prod", LATER, "truncation", "orders", 3, 1_200, "epoch 5 ends at 48,800")]
        shutil.move(checkpoints, tmp_path / "aside")
        checkpoints.write_text("not a directory")
        sink([PollResult(snap)], LATER)  # a proved loss's save, failing
        sink([], LATER)
        assert saved[4:] == [None] and "state_write_failed" in m.conditions
    finally:
        m.close()


def test_a_save_of_one_cluster_keeps_the_timed_save_when_it_was(tmp_path: Path) -> None:
    """A save of one cluster (a rise on a V2 cluster, a release), saved or failed, does not move the timed save of
    every cluster: the others' checkpoints would wait one interval more at each such save, and a crash loop saving
    one cluster a poll would keep them from being saved at all. (The sink times its saves on its own monotonic
    clock, `_last`; the interval's passing is made by moving it back, not by sleeping.)"""
    from collectors.runtime.sinks import CheckpointSink

    m = Monitor(monitor_config(tmp_path / "state", checkpoint_interval_s=3600))
    saved: list[object] = []
    real_save = m.save_checkpoints
    m.save_checkpoints = lambda d, now=None, clusters=None: saved.append(clusters) or real_save(d, now, clusters)
    try:
        sink = CheckpointSink(tmp_path / "state", interval_s=3600, monitor=m)
        started = sink._last
        sink.save(LATER, {"prod"})
        (tmp_path / "state" / "checkpoints").rename(tmp_path / "aside")
        (tmp_path / "state" / "checkpoints").write_text("not a directory")
        sink.save(LATER, {"prod"})  # failed
        assert sink._last == started and "state_write_failed" in m.conditions
        (tmp_path / "state" / "checkpoints").unlink()
        (tmp_path / "aside").rename(tmp_path / "state" / "checkpoints")
        sink([], LATER)
        assert saved == [{"prod"}, {"prod"}]  # not due yet
        sink._last -= 3600  # the interval since the sink started has passed
        sink([], LATER)
        assert saved == [{"prod"}, {"prod"}, None] and "state_write_failed" not in m.conditions
    finally:
        m.close()


def test_a_save_of_one_cluster_does_not_say_the_state_is_written_again(tmp_path: Path) -> None:
    """`state_write_failed` is raised by a failed save and cleared by a full one only: a rising cluster's own
    checkpoint may fit where another cluster's did not, and clearing it then would resolve the monitor's alert
    every poll while the full saves keep failing."""
    from collectors.runtime.sinks import CheckpointSink

    m = Monitor(monitor_config(tmp_path / "state", checkpoint_interval_s=3600))
    try:
        sink = CheckpointSink(tmp_path / "state", interval_s=3600, monitor=m)
        full_fails = [True]

        def save_checkpoints(d: Path, now: float | None = None, clusters: object = None) -> int:
            if clusters is None and full_fails[0]:
                raise OSError(28, "No space left on device")
            return 1

        m.save_checkpoints = save_checkpoints  # type: ignore[method-assign]
        sink.save(LATER)
        assert "state_write_failed" in m.conditions
        sink.save(LATER, {"prod"})
        assert "state_write_failed" in m.conditions and sink.saves == 1
        full_fails[0] = False
        sink.save(LATER)
        assert "state_write_failed" not in m.conditions and sink.saves == 2
    finally:
        m.close()


def test_a_scrape_after_a_poll_shows_that_polls_flush(tmp_path: Path) -> None:
    """The sinks as `build_sinks` orders them and the loop runs them: the exporter's before the history's (only the
    save of a counted epoch rise comes before both).

    Before, /metrics was rendered when the exporter sink ran, before the history sink flushed and set its flags:
    `kafka_monitor_history_write_errors` said 1 one poll after the flush that failed, and 0 one poll after the
    flush that succeeded. The flags are now read per scrape. The monitor's own alert (`history_write_failed`) is
    judged in the next poll, as every alert is judged in a poll: it is the poll's snapshot that carries it."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from collectors.runtime.sinks import CheckpointSink, ExporterSink, RiseCheckpointSink, build_sinks
    from tests.unit.test_api_resolved_incidents import free_port

    blocked = tmp_path / "history"
    blocked.write_text("a file where the history directory should be")  # writes fail even as root
    cfg = monitor_config(tmp_path / "state", exporter={"port": free_port()},
                         history={"root": str(blocked), "flush_interval_s": 0.001})
    m = Monitor(cfg)
    sinks = build_sinks(cfg, m)
    assert [type(s) for s in sinks[:2]] == [RiseCheckpointSink, ExporterSink]  # a counted rise saved before shown
    exporter = sinks[1]
    history, checkpoints = (next(s for s in sinks if isinstance(s, t)) for t in (HistorySink, CheckpointSink))
    assert sinks.index(history) < sinks.index(checkpoints) and sinks[0].checkpoints is checkpoints
    assert checkpoints.held() is history.unwritten_losses  # the checkpoint waits for the history's loss rows

    def cycle() -> set[str]:
        """One poll and its sinks, as `run_loop` runs them: the rules alerting in the poll."""
        results = m.poll_once()
        for sink in sinks:
            sink(results, results[0].snapshot.time)
        return {a.rule for r in results for a in r.snapshot.alerts}

    def flags(text: bytes) -> dict[str, float]:
        return {s.name: s.value for family in text_string_to_metric_families(text.decode()) for s in family.samples
                if s.name.startswith("kafka_monitor_history_") and s.labels == {"cluster": "prod"}}

    def scraped() -> dict[str, float]:
        """The two flags as Prometheus scrapes them; prometheus-client's own rendering of the collector agrees."""
        served = flags(urllib.request.urlopen(f"http://127.0.0.1:{exporter.server.port}/metrics", timeout=5).read())
        assert served == flags(exporter.endpoint.render_via_client())
        return served

    try:
        assert "history_write_failed" not in cycle()  # judged before the flush
        assert scraped() == {"kafka_monitor_history_write_errors": 1.0, "kafka_monitor_history_standby": 0.0}
        assert "history_write_failed" in m.conditions
        assert "history_write_failed" in cycle()  # the next poll's alert
        assert scraped()["kafka_monitor_history_write_errors"] == 1.0
        blocked.unlink()  # the operator frees the path: this poll's flush writes the rows kept
        assert "history_write_failed" in cycle()
        assert scraped()["kafka_monitor_history_write_errors"] == 0.0
        assert "history_write_failed" not in m.conditions and "history_write_failed" not in cycle()
        assert files_in(blocked, "cluster")
    finally:
        for sink in sinks:
            getattr(sink, "close", lambda: None)()
        m.close()
