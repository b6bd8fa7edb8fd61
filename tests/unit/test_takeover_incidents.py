"""A history taken over without a checkpoint keeps each alert in the incident the history left it in.

Collector A polls a cluster with brokers down, writes the history root and stops; collector B, without A's
checkpoint (a new pod, an emptied state_dir), takes the root over (`HistorySink._take_over`) and polls the cluster,
still broken. The history records each incident's member count per rule, not which incident an alert was in, and
before, B's first poll placed every alert carried on afresh: where that poll's placement differed from A's (the
partitions not read, one of two brokers back and its partitions catching up), the alerts left the broker incident
carried on and each topic opened an incident of its own — a page per topic, and incidents the weekly report
counted for the same outage. A restart with the checkpoint (its alerts' incident ids, `IncidentTracker.restore`)
did not. Now the takeover records what that restart records, row for row.

The trackers, the monitor, its first poll of an unreachable cluster, the checkpoint, the writer and its lease are
real; A's polls of the broken cluster are snapshots put through a poller's own state and trackers, as
`ClusterPoller.poll` does after its observation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from collectors.alerting.catalogue import RISK_RULES, kept_over_stale
from collectors.alerting.correlation import correlate
from collectors.alerting.evaluation import judge
from collectors.config import MonitorConfig
from collectors.model.poll import PollResult
from collectors.model.records import ClusterSnapshot, LossRecord
from collectors.model.vocabulary import TRUNCATION
from collectors.outputs.checkpoint import save_checkpoint
from collectors.outputs.history import HistoryWriter, read_table
from collectors.runtime.poller import ClusterPoller, Monitor
from collectors.runtime.sinks import HistorySink
from tests.unit.test_history_sink import monitor_config
from tests.unit.test_incidents import cluster

Poll = Callable[[Monitor, float], PollResult]


def _poll(p: ClusterPoller, s: ClusterSnapshot, t: float) -> PollResult:
    """`ClusterPoller.poll` after its observation: the snapshot through the poller's own state and trackers."""
    s.time = t
    kept = kept_over_stale(s)
    current, opened, resolved = p.alerts.update(p.name, judge(s, p.state, p.thresholds, t, kept), t, kept)
    s.alerts = current
    for a in current:
        a.incident = None
    s.incidents, events = p.incidents.update(p.name, correlate(s, current), t)
    return PollResult(s, opened, resolved, events, p.alerts.restate_due(p.name, t))


def _catching_up(m: Monitor, t: float) -> PollResult:
    """Broker 2 is back and not yet in the ISRs of its partitions; broker 3 is still down."""
    s = cluster(down=(3,))
    for x in s.partitions:
        x.isr = [b for b in x.isr if b != 2]
    return _poll(m.pollers[0], s, t)


def _unreadable(m: Monitor, t: float) -> PollResult:
    """A real poll: nobody answers (127.0.0.1:1), so the partitions are not read and every alert is kept."""
    (r,) = m.poll_once(t)
    return r


def _config(tmp_path: Path, name: str) -> MonitorConfig:
    return monitor_config(tmp_path / f"state-{name}", history={"root": str(tmp_path / "history")},
                          clusters=[{"name": "c", "bootstrap_servers": "127.0.0.1:1"}])


def _a_writes(tmp_path: Path, polls: list[tuple[float, Callable[[Monitor, float], PollResult]]],
              checkpoint: bool) -> None:
    """Collector A's `polls` written to the root; A stops, its checkpoint (of its last poll) in B's state_dir or
    not."""
    a = Monitor(_config(tmp_path, "a"))
    try:
        writer = HistoryWriter(tmp_path / "history", exclusive=True, clusters=["c"])
        for t, poll in polls:
            writer.add(poll(a, t))
        writer.close()
        if checkpoint:
            save_checkpoint(tmp_path / "state-b", a.pollers[0].checkpoint(polls[-1][0]))
    finally:
        a.close()


def _b_takes_over(tmp_path: Path, now: float, polls: list[tuple[float, Callable[[Monitor, float], PollResult]]],
                  checkpoint: bool) -> tuple[Monitor, list[PollResult]]:
    """Collector B resumes from its state_dir (A's checkpoint or nothing), takes the root over, polls `polls` (each
    through the history sink); B's monitor (closed) and results."""
    cfg = _config(tmp_path, "b")
    b = Monitor(cfg)
    try:
        (line,) = b.resume(tmp_path / "state-b", now)
        assert line.startswith("c: resumed from checkpoint" if checkpoint else "c: starting fresh")
        sink = HistorySink(cfg.history, exporter=None, monitor=b, clusters=["c"])
        results = []
        for t, poll in polls:
            results.append(r := poll(b, t))
            sink([r], t)
        sink.close()
    finally:
        b.close()
    return b, results


def _takeover(tmp_path: Path, now: float, down: tuple[int, ...], first: Poll, checkpoint: bool
              ) -> tuple[list[PollResult], list[tuple[object, ...]], list[tuple[object, ...]]]:
    """A polls the cluster with `down` twice, writes the root and stops; B (A's checkpoint in its state_dir or
    not) takes the root over, polls with `first`, then the cluster read whole, broker 3 down. B's results and the
    rows of the incident and alert events (times relative to `now`)."""
    root = tmp_path / "history"

    def broken(m: Monitor, t: float) -> PollResult:
        return _poll(m.pollers[0], cluster(down=down), t)

    def broker_3_down(m: Monitor, t: float) -> PollResult:
        return _poll(m.pollers[0], cluster(down=(3,)), t)

    _a_writes(tmp_path, [(now - 300, broken), (now - 240, broken)], checkpoint)
    _, results = _b_takes_over(tmp_path, now, [(now - 120, first), (now - 60, broker_3_down)], checkpoint)
    incidents = read_table(root, "incident_events").sort_values(["time", "event", "id"])
    alerts = read_table(root, "alert_events").sort_values(["time", "event", "rule", "subject"])
    return (results,
            [(round(t - now), e, i, k, n) for t, e, i, k, n in zip(
                incidents.time, incidents.event, incidents.id, incidents.kind, incidents.alerts, strict=True)],
            [(round(t - now), e, r, s, round(f - now)) for t, e, r, s, f in zip(
                alerts.time, alerts.event, alerts.rule, alerts.subject, alerts.first_seen, strict=True)])


@pytest.mark.parametrize(("down", "first"), [((3,), _unreadable), ((2, 3), _catching_up)],
                         ids=["partitions not read", "one of two brokers back"])
def test_a_takeover_without_a_checkpoint_keeps_each_alert_in_the_incident_carried_on(
        tmp_path: Path, down: tuple[int, ...], first: Poll) -> None:
    now = time.time()
    results, incidents, alerts = _takeover(tmp_path / "fresh", now, down, first, checkpoint=False)
    (broker,) = {i for _, e, i, k, _ in incidents if (e, k) == ("opened", "broker")}  # A's, opened at -300
    for r in results:  # the outage goes on in its one incident; nothing of a topic opens
        assert [(i.id, i.kind) for i in r.snapshot.incidents if i.kind != "cluster"] == [(broker, "broker")]
        assert {a.incident for a in r.snapshot.alerts if a.rule not in RISK_RULES} <= {
            broker, *(i.id for i in r.snapshot.incidents if i.kind == "cluster")}
    assert [k for _, e, _, k, _ in incidents if e == "opened"] == ["broker"] + ["cluster"] * (first is _unreadable)
    opens = [(r, s) for _, e, r, s, _ in alerts if e == "open"]
    assert len(opens) == len(set(opens))  # no alert opened again: one episode each across the takeover
    # what a restart with A's checkpoint records, row for row
    assert _takeover(tmp_path / "resumed", now, down, first, checkpoint=True)[1:] == (incidents, alerts)


def _truncated(m: Monitor, t: float) -> PollResult:
    """A's poll in which a new leader ended the old epoch below what was committed: the ledger records the loss and
    `data_truncated` opens, held `loss_alert_hold_s` from then (as `build_snapshot` keeps it in memory)."""
    s = cluster()
    loss = LossRecord("c", t, TRUNCATION, "t1", 2, 120, "leader 1 (epoch 4) -> 2 (epoch 5): 120 committed messages "
                      "gone", leader_before=1, leader_after=2, epoch_before=4, epoch_after=5, offset=5_000)
    s.losses = [loss]
    m.pollers[0].state.recent_losses.append(loss)
    return _poll(m.pollers[0], s, t)


@pytest.mark.parametrize("checkpoint", [False, True], ids=["without a checkpoint", "with it"])
def test_a_loss_alert_stays_open_across_a_takeover(tmp_path: Path, checkpoint: bool) -> None:
    """A records a truncation, then stops; B takes the root over and polls the cluster, healthy again. The alert
    stays open `loss_alert_hold_s` after the loss, as after a restart with the checkpoint: before, B's memory of
    recent losses (the checkpoint's alone) was empty without one, and its first poll resolved the alert."""
    now = time.time()

    def healthy(m: Monitor, t: float) -> PollResult:
        return _poll(m.pollers[0], cluster(), t)

    _a_writes(tmp_path, [(now - 240, _truncated), (now - 180, healthy)], checkpoint)
    b, (r,) = _b_takes_over(tmp_path, now, [(now - 120, healthy)], checkpoint)
    assert [(x.kind, x.topic, x.partition, x.messages) for x in b.pollers[0].state.recent_losses] == [
        (TRUNCATION, "t1", 2, 120)]  # recalled once, however many times it is found
    (kept,) = [a for a in r.snapshot.alerts if a.rule == "data_truncated"]
    assert kept.subject == "t1-2" and kept.value == 120 and not r.resolved
    events = read_table(tmp_path / "history", "alert_events")
    assert list(events[events.rule == "data_truncated"].event) == ["open"]  # one episode, not resolved


def _standby_pair(tmp_path: Path, a_polls: list[tuple[float, Poll]], b_polls: list[tuple[float, Poll]]
                  ) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """An HA pair on one root: A holds the lease, B stands by. Each poll goes through its collector's history sink
    (flushed at once) in time order; A stops after its last poll, and B takes over at its first flush after that.
    The rows of the incident and alert events (times relative to the first poll)."""
    root = tmp_path / "history"
    cfgs = {n: _config(tmp_path, n) for n in ("a", "b")}
    monitors = {n: Monitor(c) for n, c in cfgs.items()}
    try:
        sinks = {n: HistorySink(cfgs[n].history, exporter=None, monitor=monitors[n], clusters=["c"]) for n in cfgs}
        assert sinks["a"].writer.standby_of is None and sinks["b"].writer.standby_of is not None
        last_a = max(t for t, _ in a_polls)
        for t, name, poll in sorted([(t, "a", p) for t, p in a_polls] + [(t, "b", p) for t, p in b_polls],
                                    key=lambda x: x[0]):
            sinks[name]([r := poll(monitors[name], t)], t)
            sinks[name].writer.flush()
            if name == "a" and t == last_a:
                sinks["a"].close()  # A stops (a deploy): B takes over at its next flush
            assert r.snapshot.cluster == "c"
        assert sinks["b"].writer.standby_of is None  # B took over
        sinks["b"].close()
    finally:
        for m in monitors.values():
            m.close()
    t0 = min(t for t, _ in a_polls + b_polls)
    incidents = read_table(root, "incident_events").sort_values(["time", "event", "id"])
    alerts = read_table(root, "alert_events").sort_values(["time", "event", "rule", "subject"])
    return ([(round(t - t0), e, i) for t, e, i in zip(incidents.time, incidents.event, incidents.id, strict=True)],
            [(round(t - t0), e, r, s, round(f - t0)) for t, e, r, s, f in zip(
                alerts.time, alerts.event, alerts.rule, alerts.subject, alerts.first_seen, strict=True)])


def _broker_3_down(m: Monitor, t: float) -> PollResult:
    return _poll(m.pollers[0], cluster(down=(3,)), t)


def _healthy(m: Monitor, t: float) -> PollResult:
    return _poll(m.pollers[0], cluster(), t)


@pytest.mark.parametrize("b_at_takeover", ["resolved", "still open"])
def test_an_ha_standby_taking_over_just_after_the_holder_resolved_keeps_one_incident(
        tmp_path: Path, b_at_takeover: str, caplog: pytest.LogCaptureFixture) -> None:
    """A and B both see broker 3 down and each track it as an incident of its own id; A writes, B stands by. A
    sees the broker back, resolves its incident and its alerts, and stops (a deploy); B takes over at its next
    flush. Before, B then wrote its own incident's resolution (its poll came after A's last write), an incident the
    history never opened: the weekly report counted two incidents and twice the alert episodes for one outage.

    ``resolved``: B had seen the broker back too. Its events are dropped: the history holds A's incident and
    episodes once each. ``still open``: B's last poll before the takeover still saw the broker down; its incident
    goes on as A's, resolved, and B's next poll, which sees it down again, reopens A's incident (one cause, one
    incident, reopened); B's alerts of A's episodes, which the history holds ended, are given up and opened anew by
    that poll, and resolved when B sees the broker back."""
    now = time.time() - 3600
    b_polls: list[tuple[float, Poll]] = [(now + 5, _broker_3_down)]
    if b_at_takeover == "resolved":
        b_polls += [(now + 65, _healthy), (now + 95, _healthy)]
    else:
        b_polls += [(now + 65, _broker_3_down), (now + 95, _broker_3_down), (now + 125, _healthy)]
    caplog.set_level(logging.INFO, logger="collectors")
    incidents, alerts = _standby_pair(tmp_path, [(now, _broker_3_down), (now + 60, _healthy)], b_polls)
    assert "carrying on 0 open incidents and 0 open alerts" in caplog.text
    assert "1 incident resolved within the hold-down" in caplog.text and "hand-over failed" not in caplog.text
    ids = {i for _, _, i in incidents}
    assert len(ids) == 1, incidents  # one cause, one incident: A's
    if b_at_takeover == "resolved":
        assert [(t, e) for t, e, _ in incidents] == [(0, "opened"), (60, "resolved")]
        assert {f for *_, f in alerts} == {0} and all(t in (0, 60) for t, *_ in alerts), alerts  # A's alone
    else:
        assert [(t, e) for t, e, _ in incidents] == [(0, "opened"), (60, "resolved"), (95, "reopened"),
                                                     (125, "resolved")]
        a_episodes = {(r, s) for t, e, r, s, _ in alerts if t == 0}
        # A's episodes end at A's resolution; B's, which the history holds ended, are given up at the takeover
        # and opened anew by its 95 s poll (carried on as A's, the report ended them at 60 s though they went on)
        assert {(t, f) for t, _, r, s, f in alerts if (r, s) in a_episodes} == {(0, 0), (60, 0), (95, 95),
                                                                                 (125, 95)}
        # B's timed rules that fired only at its 65 s poll (their `for:` run since its first poll at 5 s): new
        # episodes, which A never opened
        assert {(r, f) for _, _, r, s, f in alerts if (r, s) not in a_episodes} == {
            ("under_replicated", 65), ("preferred_leader_imbalance", 65)}
    opens = [(r, s, f) for _, e, r, s, f in alerts if e == "open"]
    assert opens and len(opens) == len(set(opens)) and 5 not in {f for *_, f in alerts}  # none of B's given up
