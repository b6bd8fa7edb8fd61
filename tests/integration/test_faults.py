"""Faults the monitor must survive: it keeps polling, marks what it could not see stale, alerts, recovers."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collectors.runtime.poller import ClusterPoller
from sandbox.runner import Sandbox
from tests.support.monitor import alert, make_poller, poll, poll_until, rules_of
from tests.support.sandbox import frozen

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def poller(sb: Sandbox) -> Iterator[ClusterPoller]:
    p = make_poller(sb)
    poll_until(p, sb, lambda r: not r.snapshot.alerts, timeout=30)
    yield p
    p.close()


def test_slow_broker_is_unreachable_not_a_hang(sb: Sandbox, poller: ClusterPoller) -> None:
    sb.call(lambda c: c.set_broker_delay(2, 8.0))  # past the 3 s request timeout
    try:
        started = time.monotonic()
        r = poll_until(poller, sb, lambda r: alert(r, "broker_unreachable", "broker-2") is not None, timeout=40)
        assert time.monotonic() - started < 40
        assert r.snapshot.stale and "offsets" in r.snapshot.stale_sections
        # partitions led by the healthy brokers still have fresh offsets
        fresh = [p for p in r.snapshot.partitions if p.leader in (1, 3) and p.high_watermark is not None]
        assert fresh
    finally:
        sb.call(lambda c: c.set_broker_delay(2, 0.0))
    poll_until(poller, sb, lambda r: not ({"broker_unreachable", "data_stale"} & rules_of(r)), timeout=40)


def test_a_broker_back_from_a_crash_answers_at_the_first_poll_after(sb: Sandbox, poller: ClusterPoller) -> None:
    """kafka-python backs a node whose connection failed off, doubling up to 30 s, and fails requests to it
    meanwhile without trying. Broker 3 down for a dozen polls, then back: before, the monitor went on saying
    "registered but did not answer" (critical) for up to 30 s after 3 listened again, on every restart. Now each
    poll tries each broker once."""
    sb.call(lambda c: c.crash_broker(3))
    try:
        poll_until(poller, sb, lambda r: alert(r, "broker_unreachable", "broker-3") is not None, timeout=40)
        for _ in range(12):  # each poll's failed connection doubles the client's backoff (while 3 is registered)
            poll(poller, sb)
    finally:
        sb.call(lambda c: c.restart_broker(3))  # returns once 3 listens
    r = poll(poller, sb)
    assert alert(r, "broker_unreachable", "broker-3") is None, r.snapshot.stale_sections
    assert not {"broker_down", "broker_unreachable"} & rules_of(r)


@pytest.mark.parametrize("code", [16, 14], ids=["NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"])
def test_coordinator_errors_make_groups_stale_and_keep_their_alerts(sb: Sandbox, poller: ClusterPoller,
                                                                    code: int) -> None:
    sb.call(lambda c: c.set_group_mode("reporting", "stopped"))
    try:
        poll_until(poller, sb, lambda r: alert(r, "consumer_lag_status", "reporting") is not None, timeout=40)
        coords = sb.call(lambda c: {c.coordinator_for(g, 0) for g in c.groups})
        sb.call(lambda c: c.coordinator_errors.update(dict.fromkeys(coords, code)))
        r = poll(poller, sb)
        r = poll(poller, sb)
        assert "groups" in r.snapshot.stale_sections
        assert alert(r, "data_stale") is not None
        # no evidence either way: the open consumer alert is kept, not resolved
        assert alert(r, "consumer_lag_status", "reporting") is not None
        assert not r.resolved or all(a.rule != "consumer_lag_status" for a in r.resolved)
    finally:
        sb.call(lambda c: (c.coordinator_errors.clear(), c.set_group_mode("reporting", "running")))
    poll_until(poller, sb, lambda r: not ({"data_stale", "consumer_lag_status"} & rules_of(r)), timeout=60)


def test_one_loading_offsets_partition_keeps_only_its_groups_alerts(sb: Sandbox, poller: ClusterPoller) -> None:
    """After a coordinator takes __consumer_offsets partitions over it loads each; the groups of one still loading
    answer COORDINATOR_LOAD_IN_PROGRESS while the others answer. Their alerts are kept; every other group's are
    judged: before, one group's error kept all the groups' alerts open (the section stale as a whole), so billing,
    caught up again, stayed paged for as long as reporting's partition loaded."""
    from sandbox import kafka_defaults as kd

    n = sb.call(lambda c: len(c.topics["__consumer_offsets"].partitions))
    held_in = {g: kd.coordinator_partition(g, n) for g in ("billing", "reporting")}
    assert held_in["billing"] != held_in["reporting"]
    sb.call(lambda c: [c.set_group_mode(g, "stopped") for g in ("billing", "reporting")])
    try:
        poll_until(poller, sb, lambda r: alert(r, "consumer_lag_status", "billing") is not None
                   and alert(r, "consumer_lag_status", "reporting") is not None, timeout=40)
        sb.call(lambda c: (c.loading_offsets.add(held_in["reporting"]),
                           [c.set_group_mode(g, "running") for g in ("billing", "reporting")]))
        r = poll_until(poller, sb, lambda r: alert(r, "consumer_lag_status", "billing") is None, timeout=40)
        assert "groups" in r.snapshot.stale_sections and r.snapshot.stale_subjects.get("groups") == ["reporting"]
        assert any("COORDINATOR_LOAD_IN_PROGRESS" in e for e in r.snapshot.errors), r.snapshot.errors
        assert alert(r, "consumer_lag_status", "reporting") is not None  # no evidence either way: kept
        assert alert(r, "data_stale") is not None
    finally:
        sb.call(lambda c: (c.loading_offsets.clear(),
                           [c.set_group_mode(g, "running") for g in ("billing", "reporting")]))
    poll_until(poller, sb, lambda r: not ({"data_stale", "consumer_lag_status"} & rules_of(r)), timeout=60)


def test_a_topic_whose_metadata_fails_keeps_only_its_partitions_alerts(sb: Sandbox) -> None:
    """While a topic is being deleted its Metadata answers UNKNOWN_TOPIC_OR_PARTITION. Its partitions' alerts are
    kept (single-0 stays offline for all we know); every other topic's are judged: before, the whole partitions
    section was stale and orders-0, back in sync, stayed under-replicated for as long as the deletion lasted."""
    p = make_poller(sb, under_replicated_grace_s=0)
    try:
        poll_until(p, sb, lambda r: not r.snapshot.alerts, timeout=30)
        sb.call(lambda c: (c.fail_partition("single", 0), c.stall_followers("orders", 0)))
        poll_until(p, sb, lambda r: alert(r, "offline_partition", "single-0") is not None
                   and alert(r, "under_replicated", "orders-0") is not None, timeout=30)
        sb.call(lambda c: (c.topic_errors.update(single=3), c.stall_followers("orders", 0, False)))
        r = poll_until(p, sb, lambda r: alert(r, "under_replicated", "orders-0") is None, timeout=30)
        assert r.snapshot.stale_subjects == {"partitions": ["single"]}, r.snapshot.stale_sections
        assert any("UNKNOWN_TOPIC_OR_PARTITION" in e for e in r.snapshot.errors), r.snapshot.errors
        assert alert(r, "offline_partition", "single-0") is not None  # no evidence either way: kept
        assert alert(r, "data_stale") is not None
    finally:
        sb.call(lambda c: (c.topic_errors.clear(), c.recover_partition("single", 0),
                           c.stall_followers("orders", 0, False)))
    try:
        poll_until(p, sb, lambda r: not ({"data_stale", "offline_partition", "under_replicated", "under_min_isr"}
                                         & rules_of(r)), timeout=30)
    finally:
        p.close()


def test_all_brokers_down_then_back(sb: Sandbox, poller: ClusterPoller) -> None:
    sb.call(lambda c: [c.crash_broker(i) for i in (1, 2, 3)])
    try:
        r = poll_until(poller, sb, lambda r: alert(r, "cluster_unreachable") is not None, timeout=30)
        assert not r.snapshot.reachable and r.node_unreachable
    finally:
        sb.call(lambda c: [c.restart_broker(i) for i in (1, 2, 3)])
    r = poll_until(poller, sb, lambda r: r.snapshot.reachable and alert(r, "cluster_unreachable") is None,
                   timeout=40)
    assert r.snapshot.partitions


def test_unwritable_history_raises_an_alert_and_metrics_keep_serving(sb: Sandbox, tmp_path: Path) -> None:
    import urllib.request

    from collectors.config import MonitorConfig
    from collectors.runtime.poller import Monitor
    from collectors.runtime.sinks import ExporterSink, build_sinks

    blocked = tmp_path / "history"
    blocked.write_text("a file where the history directory should be")  # writes fail even as root
    cfg = MonitorConfig.model_validate({
        "clusters": [{"name": "sandbox", "bootstrap_servers": sb.bootstrap_servers}], "request_timeout_s": 3,
        "exporter": {"port": free_port()}, "history": {"root": str(blocked), "flush_interval_s": 0.001},
        "state_dir": str(tmp_path / "state")})
    monitor = Monitor(cfg)
    sinks = build_sinks(cfg, monitor)
    port = next(s for s in sinks if isinstance(s, ExporterSink)).server.port

    def cycle() -> list:  # type: ignore[type-arg]
        now = sb.clock.now()
        results = monitor.poll_once(now)
        for sink in sinks:
            sink(results, now)
        return results

    try:
        cycle()
        (r,) = cycle()
        assert alert(r, "history_write_failed", "history") is not None
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert 'kafka_monitor_history_write_errors{cluster="sandbox"} 1' in body
        assert "kafka_topic_partition_in_sync_replica" in body
        blocked.unlink()  # the operator frees the path
        cycle()
        (r,) = cycle()
        assert alert(r, "history_write_failed") is None
        from collectors.outputs.history import read_table

        assert len(read_table(blocked, "cluster")) >= 3  # the rows kept in memory were written after all
    finally:
        for sink in sinks:
            getattr(sink, "close", lambda: None)()
        monitor.close()


def _collector(sb: Sandbox, tmp_path: Path, root: Path, name: str,
               **settings: Any) -> tuple[Any, list]:  # type: ignore[type-arg]
    """A collector as `python -m collectors` runs one: Monitor and sinks, its own state_dir and port, `root`;
    `settings` on top of its configuration."""
    from collectors.config import MonitorConfig
    from collectors.runtime.poller import Monitor
    from collectors.runtime.sinks import build_sinks

    cfg = MonitorConfig.model_validate({
        "clusters": [{"name": "sandbox", "bootstrap_servers": sb.bootstrap_servers}], "request_timeout_s": 3,
        "exporter": {"port": free_port()}, "history": {"root": str(root), "flush_interval_s": 0.001},
        "state_dir": str(tmp_path / f"state-{name}")} | settings)
    monitor = Monitor(cfg)
    return monitor, build_sinks(cfg, monitor, sb.clock.now)  # polled on the sandbox's clock, as the demo does


def _cycle(sb: Sandbox, monitor: Any, sinks: list) -> Any:  # type: ignore[type-arg]
    """One poll and its sinks, on the sandbox's clock: the poll's result."""
    now = sb.clock.now()
    (result,) = monitor.poll_once(now)
    for sink in sinks:
        sink([result], now)
    assert alert(result, "history_write_failed") is None  # standing by is no fault
    return result


def _close(monitor: Any, sinks: list) -> None:  # type: ignore[type-arg]
    for sink in sinks:
        getattr(sink, "close", lambda: None)()
    monitor.close()


def _close_after_crash(sb: Sandbox, *collectors: tuple[Any, list] | None) -> None:  # type: ignore[type-arg]
    """Close the collectors a broker-3 crash test started (None: not started yet) and bring 3 back (a no-op when it
    is up), so the module's other tests find the cluster whole."""
    for c in collectors:
        if c is not None:
            _close(*c)
    sb.call(lambda c: c.restart_broker(3))


def _broker_incident(r: Any) -> Any:
    return next((i for i in r.snapshot.incidents if i.kind == "broker"), None)


def _until(sb: Sandbox, c: tuple[Any, list], done: Any, polls: int = 200) -> Any:  # type: ignore[type-arg]
    """Cycle the collector `c` until `done(result)`."""
    for _ in range(polls):
        r = _cycle(sb, *c)
        if done(r):
            return r
        time.sleep(0.2)
    raise AssertionError("condition not reached")


def _one_broker_incident(root: Path, iid: str) -> None:
    """The history holds one broker incident, `iid`, opened once and resolved once; and one alert episode (one
    first_seen), opened once and resolved once, for broker 3's alert (`broker_unreachable` until the controller
    fences it, then `broker_down`)."""
    from collectors.outputs.history import read_table

    events = read_table(root, "incident_events")
    broker = events[events.kind == "broker"].sort_values("time")
    assert set(broker.id) == {iid}, broker[["time", "event", "id"]].to_string()
    seq = list(broker.event)
    assert (seq[0], seq[-1], seq.count("opened"), seq.count("resolved")) == ("opened", "resolved", 1, 1), seq
    alerts = read_table(root, "alert_events")
    three = alerts[alerts.rule.isin(["broker_down", "broker_unreachable"]) & (alerts.subject == "broker-3")]
    assert len(three), alerts[["time", "event", "rule", "subject"]].to_string()
    for _rule, rows in three.sort_values("time").groupby("rule"):
        assert rows.first_seen.nunique() == 1 and list(rows.event) == ["open", "resolve"], rows.to_string()


def test_two_collectors_on_one_history_root_write_each_poll_once(sb: Sandbox, tmp_path: Path) -> None:
    """An HA pair (or a deploy's overlap) on one history root: the second stands by, then takes over.

    Before the writer lease both wrote every poll: the brokers table held each broker twice a poll round."""
    import urllib.request

    from collectors.outputs.history import read_table
    from collectors.runtime.sinks import ExporterSink

    root = tmp_path / "history"

    def standby(sinks: list) -> str:  # type: ignore[type-arg]
        """What the collector's /metrics says of its history: the series, as Prometheus would scrape it."""
        port = next(s for s in sinks if isinstance(s, ExporterSink)).server.port
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        return next(ln for ln in body.splitlines() if ln.startswith("kafka_monitor_history_standby{"))

    first, second = _collector(sb, tmp_path, root, "a"), _collector(sb, tmp_path, root, "b")
    try:
        written = []
        for _ in range(3):
            written.append(_cycle(sb, *first).snapshot.time)
            _cycle(sb, *second)
        assert standby(first[1]) == 'kafka_monitor_history_standby{cluster="sandbox"} 0'
        assert standby(second[1]) == 'kafka_monitor_history_standby{cluster="sandbox"} 1'
        _close(*first)  # the old pod stops; its last rows are flushed
        written += [_cycle(sb, *second).snapshot.time for _ in range(2)]
        assert standby(second[1]) == 'kafka_monitor_history_standby{cluster="sandbox"} 0'
    finally:
        _close(*first)
        _close(*second)
    polls = read_table(root, "cluster")
    assert sorted(polls.time) == pytest.approx(sorted(written), abs=1e-3)  # each round once, by whoever held it
    brokers = read_table(root, "brokers")
    assert brokers.groupby(["time", "broker_id"]).size().max() == 1 and brokers.time.nunique() == 5


def test_a_takeover_carries_on_the_incident_the_first_collector_left_open(sb: Sandbox, tmp_path: Path) -> None:
    """Broker 3 crashes while two collectors share a history root; the first stops; the second takes the root
    over and resolves the incident when 3 is back. Before, the history held two incidents for the one crash: the
    first's, never resolved, and the second's, without its opening. Now one id, opened by the first collector and
    resolved by the second."""

    root = tmp_path / "history"
    first, second = _collector(sb, tmp_path, root, "a"), _collector(sb, tmp_path, root, "b")
    try:
        sb.call(lambda c: c.crash_broker(3))
        one = _broker_incident(_until(sb, first, lambda r: _broker_incident(r) is not None))
        two = _broker_incident(_until(sb, second, lambda r: _broker_incident(r) is not None))
        assert one.id != two.id  # each collector tracks the crash under an id of its own
        _cycle(sb, *first)
        _close(*first)  # the old pod stops with the incident open
        carried = _broker_incident(_cycle(sb, *second))  # takes the root over, carries the incident on
        assert carried is None or carried.id == one.id
        sb.call(lambda c: c.restart_broker(3))
        _until(sb, second, lambda r: _broker_incident(r) is None)
    finally:
        _close_after_crash(sb, first, second)
    _one_broker_incident(root, one.id)


def test_a_collector_started_after_the_last_one_stopped_carries_on_its_incident(sb: Sandbox, tmp_path: Path) -> None:
    """Broker 3 crashes; the collector that saw it stops; a new one starts on the same history with no checkpoint
    (an emptied state_dir, a new pod) and resolves the incident when 3 is back. Before, it opened the crash again
    under an id of its own: two incidents for one cause, the first superseded in the report and "opened" twice.
    Now it carries the recorded incident on from its first poll."""
    root = tmp_path / "history"
    first, second = _collector(sb, tmp_path, root, "a"), None
    try:
        sb.call(lambda c: c.crash_broker(3))
        one = _broker_incident(_until(sb, first, lambda r: _broker_incident(r) is not None))
        _close(*first)  # stops with the incident open; its checkpoint stays in its own state_dir
        second = _collector(sb, tmp_path, root, "b")  # takes the free lease at once, before its first poll
        carried = _broker_incident(_cycle(sb, *second))
        assert carried is not None and carried.id == one.id
        assert carried.opened == pytest.approx(one.opened, abs=1e-3)  # as recorded (the history keeps microseconds)
        sb.call(lambda c: c.restart_broker(3))
        _until(sb, second, lambda r: _broker_incident(r) is None)
    finally:
        _close_after_crash(sb, first, second)
    _one_broker_incident(root, one.id)


def test_a_collector_started_too_late_to_carry_on_records_the_incident_as_lost(sb: Sandbox, tmp_path: Path) -> None:
    """Broker 3 crashes; the collector that saw it stops; 3 comes back while no collector runs; a new one starts
    past `checkpoint_max_age_s` (30 s here, on the sandbox's clock) after the last poll. It must not carry the
    crash on (it would resolve it at its first poll, as if it had watched the gap), and before it left it open in
    the history for good: every weekly report read it as open at the week's end. Now the history says what
    happened as far as anyone saw: opened, then lost at the first collector's last poll (end unseen)."""
    from collectors.outputs.history import read_table

    root = tmp_path / "history"
    first, second = _collector(sb, tmp_path, root, "a"), None
    try:
        sb.call(lambda c: c.crash_broker(3))
        one = _broker_incident(_until(sb, first, lambda r: _broker_incident(r) is not None))
        last_poll = _cycle(sb, *first).snapshot.time
        _close(*first)
        sb.call(lambda c: c.restart_broker(3))
        while sb.clock.now() < last_poll + 40:  # nobody watches
            time.sleep(0.2)
        second = _collector(sb, tmp_path, root, "b", checkpoint_max_age_s=30)
        r = _cycle(sb, *second)
        assert [(e.event, e.time) for e in r.incident_events if e.incident.id == one.id] == [
            ("lost", pytest.approx(last_poll, abs=1e-3))]
        _until(sb, second, lambda r: _broker_incident(r) is None)
    finally:
        _close_after_crash(sb, first, second)
    events = read_table(root, "incident_events")
    mine = events[events.id == one.id].sort_values("time")
    assert list(mine.event) == ["opened", "lost"], mine[["time", "event"]].to_string()
    assert mine.time.iloc[-1] == pytest.approx(last_poll, abs=1e-3)
    polls = read_table(root, "cluster")
    assert polls[polls.time <= last_poll + 1].time.max() == pytest.approx(last_poll, abs=1e-3)
    alerts = read_table(root, "alert_events")
    three = alerts[alerts.subject.eq("broker-3") & (alerts.first_seen <= last_poll)].sort_values("time")
    ends = set(three.groupby(["rule", "first_seen"]).event.last())  # broker_unreachable may resolve into broker_down
    assert "lost" in ends and ends <= {"lost", "resolve"}, three[["time", "event", "rule", "first_seen"]].to_string()


def test_what_a_cluster_taken_out_of_the_configuration_left_open_ends_lost(sb: Sandbox, tmp_path: Path) -> None:
    """Broker 3 crashes while a collector polls the sandbox under two names, `sandbox` and `retired` (as a cluster
    renamed, or moved to another collector's history). It stops; the next one on the history polls `sandbox` only.
    It carries `sandbox`'s incident on and resolves it when broker 3 is back. Before, `retired`'s incident stayed
    open in the history for good (every weekly report counted it open at the week's end); now it ends ``lost`` at
    `retired`'s last poll, once that poll is `checkpoint_max_age_s` old and nobody came back for it. That is 60 s
    here, 6 s of real time at the sandbox's 10x: with 10 s (1 real second) a loaded machine took longer to close
    the first collector and start the second, and `sandbox`'s incident was too old to carry on. The handover now
    runs on a frozen clock as well."""
    from collectors.outputs.history import read_table
    from collectors.outputs.history.left_open import open_incidents

    def cycle(c: tuple[Any, list]) -> list[Any]:  # type: ignore[type-arg]
        now = sb.clock.now()
        results = c[0].poll_once(now)
        for sink in c[1]:
            sink(results, now)
        return results

    root = tmp_path / "history"
    both = [{"name": n, "bootstrap_servers": sb.bootstrap_servers} for n in ("sandbox", "retired")]
    first, second = _collector(sb, tmp_path, root, "a", clusters=both), None
    try:
        sb.call(lambda c: c.crash_broker(3))
        for _ in range(200):
            results = cycle(first)
            if all(_broker_incident(r) is not None for r in results):
                break
            time.sleep(0.2)
        seen = {r.snapshot.cluster: _broker_incident(r).id for r in results}
        last_poll = results[0].snapshot.time
        with frozen(sb):  # the handover costs no simulated time, however slow the machine
            _close(*first)
            second = _collector(sb, tmp_path, root, "b", checkpoint_max_age_s=60)
            assert _broker_incident(_cycle(sb, *second)).id == seen["sandbox"]  # carried on
            assert {i.id for i in open_incidents(root, ["retired"], sb.clock.now())} == {seen["retired"]}  # not yet
        sb.call(lambda c: c.restart_broker(3))
        # judged on the time the sinks were given (the poll's), not on the clock after the poll: a slow poll begun
        # before the window passed ended the loop with nothing due yet
        _until(sb, second, lambda r: _broker_incident(r) is None and r.snapshot.time > last_poll + 61)
    finally:
        _close_after_crash(sb, first, second)
    events = read_table(root, "incident_events")
    print(events[events.kind == "broker"].sort_values("time")[["time", "cluster", "event", "id"]].to_string())
    retired = events[events.id == seen["retired"]].sort_values("time")
    # opened, then lost at its last poll; `updated` between them when its blast radius changed while the first
    # collector still polled (a loaded machine: broker 3's partitions seen going leaderless over more than one poll),
    # at the last poll's time too, so the order of events of one time is not asserted
    opened, lost = (retired[retired.event == e] for e in ("opened", "lost"))
    assert len(opened) == 1 and len(lost) == 1 and set(retired.event) <= {"opened", "updated", "lost"} and \
        opened.time.iloc[0] <= lost.time.iloc[0] == retired.time.max(), retired[["time", "event"]].to_string()
    assert lost.time.iloc[0] == pytest.approx(last_poll, abs=1e-3)
    ours = list(events[events.id == seen["sandbox"]].sort_values("time").event)
    assert (ours[0], ours[-1], ours.count("opened"), ours.count("resolved")) == ("opened", "resolved", 1, 1), ours
    assert "lost" not in ours


def test_what_a_history_left_open_of_another_cluster_of_the_name_is_not_carried_on(sb: Sandbox,
                                                                                    tmp_path: Path) -> None:
    """The history's last collector polled another cluster named `sandbox` (rebuilt under the name while no
    collector ran). Before, the new collector carried that cluster's broker incident on and resolved it at its
    first poll: an event about a cluster that is gone, under the live one's name. Now the first poll sees another
    cluster id and drops what was carried, as it drops a checkpoint of another cluster, and records it as lost at
    that cluster's last poll (before, it stayed open in the history for good)."""
    from collectors.model.poll import IncidentEvent, PollResult
    from collectors.model.records import IncidentRecord
    from collectors.outputs.history import HistoryWriter, read_table
    from tests.unit.test_history import small_snapshot

    root, now = tmp_path / "history", sb.clock.now()
    old = HistoryWriter(root, exclusive=True, clusters=["sandbox"])
    snap = small_snapshot(now - 60, cluster="sandbox")
    snap.cluster_id = "the-cluster-before-the-rebuild"
    gone = IncidentRecord("sandbox", "broker-of-the-old-one", "broker", "broker 3", "critical", "broker 3 down",
                          now - 120, now - 120, alerts=1, members={"broker_down": 1}, brokers=[3])
    old.add(PollResult(snap, incident_events=[IncidentEvent(now - 120, "opened", gone)]))
    old.close()
    c = _collector(sb, tmp_path, root, "a")
    try:
        assert [i.id for i in c[0].pollers[0].incidents.open_for("sandbox")] == ["broker-of-the-old-one"]
        r = _cycle(sb, *c)  # the sandbox's own id: not that cluster
        assert _broker_incident(r) is None and c[0].pollers[0].incidents.open_for("sandbox") == []
        assert [(e.event, e.time) for e in r.incident_events if e.incident.id == "broker-of-the-old-one"] == [
            ("lost", pytest.approx(now - 60, abs=1e-3))]  # the old cluster's last poll
    finally:
        _close(*c)
    events = read_table(root, "incident_events")
    assert list(events[events.id == "broker-of-the-old-one"].event) == ["opened", "lost"]


def test_an_alert_open_for_a_day_is_recorded_again(sb: Sandbox, tmp_path: Path) -> None:
    """Broker 3 stays down for a day. The collector records its `broker_down` again (`restate`) a day after the
    alert's last event, so a week's report (reading two weeks of events) and a collector taking the history over
    (reading two days) still find it open when its opening is older than that. The day passes on the collector's
    clock only, jumping between two polls: a day of the sandbox's own would disturb this module's other tests; the
    broker is really down throughout."""
    from collectors.alerting.lifecycle import RESTATE_S
    from collectors.outputs.history import read_table
    from collectors.outputs.history.left_open import open_alerts

    root = tmp_path / "history"
    c = _collector(sb, tmp_path, root, "a")
    try:
        sb.call(lambda c: c.crash_broker(3))
        first = alert(_until(sb, c, lambda r: alert(r, "broker_down", "broker-3") is not None), "broker_down",
                      "broker-3")
        later = sb.clock.now() + RESTATE_S + 60
        (r,) = c[0].poll_once(later)
        for sink in c[1]:
            sink([r], later)
        assert [(a.rule, a.first_seen) for a in r.restated if a.subject == "broker-3"] == [
            ("broker_down", first.first_seen)]
        (r2,) = c[0].poll_once(later + 30)
        assert not [a for a in r2.restated if a.subject == "broker-3"]  # once a day, not every poll
    finally:
        _close_after_crash(sb, c)
    alerts = read_table(root, "alert_events")
    three = alerts[(alerts.rule == "broker_down") & (alerts.subject == "broker-3")].sort_values("time")
    assert list(three.event) == ["open", "restate"] and three.first_seen.nunique() == 1, three.to_string()
    # two days on, its opening is out of a taking-over collector's window; its restate is not
    found = open_alerts(root, ["sandbox"], later + 2 * 86_400 - 120)
    assert [(a.rule, a.first_seen) for a in found if a.subject == "broker-3"] == [
        ("broker_down", pytest.approx(first.first_seen, abs=1e-3))]
