"""``?all=1`` on the incident paths lists the incidents resolved within the hold-down (docs/api.md), through the
real path: `Monitor.poll_once` (the poller's `IncidentTracker`) and the sinks `build_sinks` makes. The poll's
snapshot holds the open incidents only (the history counts them open), and a resolved incident never reaches
/metrics' paging series."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.alerting.rules import Candidate
from collectors.config import MonitorConfig
from collectors.model.observations import KafkaObservation
from collectors.model.poll import PollResult
from collectors.model.records import ClusterSnapshot, IncidentRecord
from collectors.outputs.api import API_PREFIX
from collectors.outputs.exporter import MetricsEndpoint
from collectors.runtime.poller import Monitor
from collectors.runtime.sinks import ExporterSink, build_sinks

T = 1_800_000_000.0
HOLD_DOWN_S = 300.0  # thresholds.incident_hold_down_s's default
WRITE_FAILED = Candidate("history_write_failed", "warning", "history", "history not written: disk full")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[tuple[Monitor, list]]:  # type: ignore[type-arg]
    """A collector as `python -m collectors` builds one (Monitor and sinks), its cluster answering every poll."""
    cfg = MonitorConfig.model_validate({
        "clusters": [{"name": "prod", "bootstrap_servers": "127.0.0.1:1"}], "request_timeout_s": 1,
        "exporter": {"host": "127.0.0.1", "port": free_port()}, "history": {"enabled": False},
        "state_dir": str(tmp_path / "state")})
    monitor = Monitor(cfg)
    for p in monitor.pollers:  # a healthy one-broker cluster, without a network
        p.kafka.observe = lambda now, watch, **_: KafkaObservation(time=now, controller_id=1,
                                                              brokers=[(1, "k1", 9092, None)])
    sinks = build_sinks(cfg, monitor)
    try:
        yield monitor, sinks
    finally:
        for s in sinks:
            getattr(s, "close", lambda: None)()
        monitor.close()


def cycle(monitor: Monitor, sinks: list, now: float, failing: bool) -> PollResult:  # type: ignore[type-arg]
    """One poll and its sinks; `failing`: the history cannot be written meanwhile (an incident's cause)."""
    if failing:
        monitor.conditions["history_write_failed"] = WRITE_FAILED
    else:
        monitor.conditions.pop("history_write_failed", None)
    (result,) = monitor.poll_once(now)
    for s in sinks:
        s([result], now)
    return result


def incidents(sink: ExporterSink, path: str) -> list[tuple[str, float | None]]:
    ans = sink.api.handle("GET", f"{API_PREFIX}/{path}")
    assert ans.status == 200
    return [(i["id"], i["resolved_at"]) for i in json.loads(ans.encode())["incidents"]]


def paging(sink: ExporterSink) -> tuple[int, float]:
    """/metrics: how many kafka_monitor_incident series, and kafka_monitor_incidents_open summed over severities."""
    fams = {f.name: f.samples for f in text_string_to_metric_families(sink.endpoint.render().decode())}
    return len(fams.get("kafka_monitor_incident", [])), sum(s.value for s in fams["kafka_monitor_incidents_open"])


def test_all_lists_the_incidents_resolved_within_the_hold_down(collector: tuple[Monitor, list]) -> None:  # type: ignore[type-arg]
    monitor, sinks = collector
    exporter = next(s for s in sinks if isinstance(s, ExporterSink))
    r = cycle(monitor, sinks, T, failing=True)
    (iid,) = [i.id for i in r.snapshot.incidents]
    assert incidents(exporter, "clusters/prod/incidents?all=1") == [(iid, None)]
    assert paging(exporter) == (1, 1.0)

    r = cycle(monitor, sinks, T + 30, failing=False)  # resolved
    assert r.snapshot.incidents == []  # the snapshot (history, latest state) holds the open ones only
    assert incidents(exporter, "clusters/prod/incidents") == []
    assert incidents(exporter, "clusters/prod/incidents?all=1") == [(iid, T + 30)]  # was []
    assert incidents(exporter, "incidents?all=1") == [(iid, T + 30)]
    assert incidents(exporter, "incidents") == []
    assert paging(exporter) == (0, 0.0)  # never paged for

    # the cause comes back within the hold-down: the same incident reopens; until the sinks have the new poll the
    # API still answers the last one (its own copy: the tracker reopened the record)
    monitor.conditions["history_write_failed"] = WRITE_FAILED
    (result,) = monitor.poll_once(T + 60)
    assert [i.id for i in result.snapshot.incidents] == [iid]
    assert incidents(exporter, "clusters/prod/incidents?all=1") == [(iid, T + 30)]
    for s in sinks:
        s([result], T + 60)
    assert incidents(exporter, "clusters/prod/incidents?all=1") == [(iid, None)]  # once, open

    cycle(monitor, sinks, T + 90, failing=False)
    assert incidents(exporter, "clusters/prod/incidents?all=1") == [(iid, T + 90)]
    cycle(monitor, sinks, T + 90 + HOLD_DOWN_S + 1, failing=False)  # past the hold-down: forgotten here
    assert incidents(exporter, "clusters/prod/incidents?all=1") == []


def test_a_resolved_incident_in_a_snapshot_never_pages() -> None:
    """What /metrics counts is open incidents, whatever a snapshot holds (the API's hand-made ones hold both)."""
    def incident(iid: str, resolved_at: float | None) -> IncidentRecord:
        return IncidentRecord("prod", iid, "topic", "orders", "critical", "orders", T - 600, T, resolved_at=resolved_at)

    ep = MetricsEndpoint()
    ep.update([ClusterSnapshot("prod", T, incidents=[incident("open", None), incident("over", T - 60)])])
    fams = {f.name: f.samples for f in text_string_to_metric_families(ep.render().decode())}
    assert len(fams["kafka_monitor_incident"]) == 1
    assert {s.labels["severity"]: s.value for s in fams["kafka_monitor_incidents_open"]}["critical"] == 1.0
