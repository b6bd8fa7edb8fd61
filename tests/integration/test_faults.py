"""Faults the monitor must survive: it keeps polling, marks what it could not see stale, alerts, recovers."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from collectors.poller import ClusterPoller
from sandbox.runner import Sandbox
from tests.support.monitor import alert, make_poller, poll, poll_until, rules_of
from tests.support.sandbox import running_sandbox, scenario

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with running_sandbox(scenario(), speed=10.0) as s:
        s.advance_to(s.cluster.start + 20)
        yield s


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
        assert r.snapshot.poll_duration_s < 3 * 3 + 2  # bounded by the request timeout, not the broker
        # partitions led by the healthy brokers still have fresh offsets
        fresh = [p for p in r.snapshot.partitions if p.leader in (1, 3) and p.high_watermark is not None]
        assert fresh
    finally:
        sb.call(lambda c: c.set_broker_delay(2, 0.0))
    poll_until(poller, sb, lambda r: not ({"broker_unreachable", "data_stale"} & rules_of(r)), timeout=40)


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
