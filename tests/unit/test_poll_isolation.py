"""`Monitor.poll_once`: a cluster whose poll raises gets a result of its own (unreachable, alerted); the others' go on.

The clusters here answer nothing (a closed port): each poll is the real one, and what raises is one poller's
`poll`, replaced. tests/integration/test_runtime_isolation.py has the failure for real, against the sandbox.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from collectors.alerting.rules import Candidate
from collectors.config import MonitorConfig
from collectors.model.poll import PollResult
from collectors.runtime.poller import Monitor

T0 = 1_800_000_000.0


@pytest.fixture
def monitor() -> Any:
    m = Monitor(MonitorConfig.model_validate({
        "clusters": [{"name": "good", "bootstrap_servers": "127.0.0.1:1"},
                     {"name": "bad", "bootstrap_servers": "127.0.0.1:1"}],
        "request_timeout_s": 1}))
    yield m
    m.close()


def breaks(m: Monitor, name: str, error: Exception) -> list[Exception]:
    """Make the poll of cluster `name` raise `error` while the returned list is not emptied."""
    p = next(p for p in m.pollers if p.name == name)
    real = p.poll
    failing = [error]

    def poll(now: float | None = None, extra: list[Candidate] | None = None) -> PollResult:
        if failing:
            raise failing[0]
        return real(now, extra)

    p.poll = poll  # type: ignore[method-assign]
    return failing


def by_cluster(results: list[PollResult]) -> dict[str, PollResult]:
    return {r.snapshot.cluster: r for r in results}


def test_a_poll_that_raises_is_that_clusters_unreachable_alert_only(
        monitor: Monitor, caplog: pytest.LogCaptureFixture) -> None:
    failing = breaks(monitor, "bad", TypeError("'>' not supported between instances of 'int' and 'str'"))
    monitor.conditions["history_write_failed"] = Candidate("history_write_failed", "warning", "history", "disk full")
    with caplog.at_level(logging.INFO, "collectors.runtime.poller"):
        first = monitor.poll_once(T0)
        assert [r.snapshot.cluster for r in first] == ["good", "bad"]  # configuration order
        good, bad = first
        assert {a.rule for a in good.opened} == {"cluster_unreachable", "history_write_failed"}  # its own poll's
        assert all("poll failed" not in a.summary for a in good.opened)
        s = bad.snapshot
        assert (s.reachable, s.stale, s.stale_sections, s.time) == (False, True, ["cluster"], T0)
        assert s.errors == ["poll failed: TypeError: '>' not supported between instances of 'int' and 'str'"]
        assert {a.rule for a in bad.opened} == {"cluster_unreachable", "history_write_failed"}  # the monitor's too
        (alert,) = [a for a in s.alerts if a.rule == "cluster_unreachable"]
        assert alert.summary == f"cluster bad unreachable: {s.errors[0]}" and alert.severity == "critical"
        assert bad.node_unreachable  # `--once` exits 1

        second = by_cluster(monitor.poll_once(T0 + 30))  # the same error: one line, no traceback
        assert not second["bad"].opened and [a.first_seen for a in second["bad"].snapshot.alerts] == [T0, T0]
        failing[0] = KeyError("another")  # another error: its traceback
        monitor.poll_once(T0 + 60)
        failing.clear()
        fourth = by_cluster(monitor.poll_once(T0 + 90))
        assert not fourth["bad"].opened  # the real poll, unreachable too: the same alert goes on
        assert "poll failed" not in fourth["bad"].snapshot.errors[0]

    failures = [r for r in caplog.records if r.getMessage().startswith("cluster bad: poll failed:")]
    assert [(r.getMessage().split(":")[2], r.exc_info is not None) for r in failures] == [
        (" TypeError", True), (" TypeError", False), (" KeyError", True)]
    assert any(r.getMessage().startswith("cluster bad: polled again") for r in caplog.records)


def test_when_the_alerts_cannot_be_tracked_either_the_alert_is_still_shown(
        monitor: Monitor, monkeypatch: pytest.MonkeyPatch) -> None:
    breaks(monitor, "bad", RuntimeError("state"))
    bad = monitor.pollers[1]

    def update(*args: Any, **kw: Any) -> Any:
        raise ValueError("tracker")

    monkeypatch.setattr(bad.alerts, "update", update)
    results = by_cluster(monitor.poll_once(T0))
    assert results["good"].snapshot.alerts
    s = results["bad"].snapshot
    assert not s.reachable and [(a.rule, a.cluster, a.first_seen) for a in s.alerts] == [
        ("cluster_unreachable", "bad", T0)]
    assert "poll failed: RuntimeError: state" in s.alerts[0].summary


def test_alerts_tracked_before_a_poll_raised_are_told_with_the_result_that_follows(
        monitor: Monitor, monkeypatch: pytest.MonkeyPatch) -> None:
    """A poll that raises after its alerts were tracked (correlation, here) has opened and resolved them in the
    tracker's memory: the failed poll's result tells them, or nothing ever records the page or its end."""
    bad = monitor.pollers[1]
    real = bad.incidents.update
    raising = [RuntimeError("correlation")]

    def update(*args: Any, **kw: Any) -> Any:
        if raising:
            raise raising[0]
        return real(*args, **kw)

    monkeypatch.setattr(bad.incidents, "update", update)
    first = by_cluster(monitor.poll_once(T0))["bad"]
    assert "poll failed: RuntimeError: correlation" in first.snapshot.errors[0]
    (opened,) = first.opened  # opened by the real poll, before correlation raised
    assert (opened.rule, opened.first_seen) == ("cluster_unreachable", T0)
    assert [a.rule for a in first.snapshot.alerts] == ["cluster_unreachable"]

    # the monitor's own condition opens in a poll that raises, and ends in one that raises too
    monitor.conditions["history_write_failed"] = Candidate("history_write_failed", "warning", "history", "disk full")
    second = by_cluster(monitor.poll_once(T0 + 30))["bad"]
    assert [a.rule for a in second.opened] == ["history_write_failed"] and not second.resolved
    del monitor.conditions["history_write_failed"]
    third = by_cluster(monitor.poll_once(T0 + 60))["bad"]
    assert not third.opened and [a.rule for a in third.resolved] == ["history_write_failed"]
    raising.clear()
    fourth = by_cluster(monitor.poll_once(T0 + 90))["bad"]
    assert not fourth.opened and not fourth.resolved  # each told once
    assert [a.rule for a in fourth.snapshot.alerts] == ["cluster_unreachable"]
