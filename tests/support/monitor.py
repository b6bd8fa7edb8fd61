"""Helpers for tests that run the collectors against a sandbox, on the sandbox's simulated clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from collectors.config import MonitorConfig
from collectors.runtime.poller import ClusterPoller, PollResult
from sandbox.runner import Sandbox

FAST_THRESHOLDS: dict[str, Any] = {
    "under_replicated_grace_s": 20,
    "consumer_stop_after_s": 60,
    "lag_seconds_slo": 120,
    "retention_risk_s": 30,
    "txn_prepare_stuck_s": 30,
    "txn_timeout_grace_s": 5,
    "zk_follower_behind_s": 10,
    "zk_quorum_lost_grace_s": 5,
    "lso_gap_messages": 100_000,
}


def monitor_config(sb: Sandbox, name: str = "sandbox", **thresholds: Any) -> MonitorConfig:
    cluster: dict[str, Any] = {"name": name, "bootstrap_servers": sb.bootstrap_servers}
    if sb.zk_connect:
        cluster["zookeeper"] = {"connect": sb.zk_connect}
    return MonitorConfig.model_validate({
        "clusters": [cluster], "poll_interval_s": 5, "request_timeout_s": 3,
        "thresholds": {**FAST_THRESHOLDS, **thresholds}})


def make_poller(sb: Sandbox, **thresholds: Any) -> ClusterPoller:
    cfg = monitor_config(sb, **thresholds)
    return ClusterPoller(cfg.clusters[0], cfg, clock=sb.clock.now)


def poll(poller: ClusterPoller, sb: Sandbox) -> PollResult:
    return poller.poll(sb.clock.now())


def poll_once(poller: ClusterPoller, sb: Sandbox) -> PollResult:
    """One poll, then the poller closed (its clients, threads and sockets) whatever the poll did."""
    try:
        return poll(poller, sb)
    finally:
        poller.close()


def assert_unreachable(r: PollResult) -> None:
    """The poll reached no broker (refused credentials, a client the listener will not talk to), and says so as
    the cluster's `cluster_unreachable` alert."""
    assert r.snapshot.reachable is False, r.snapshot
    assert "cluster_unreachable" in rules_of(r), r.snapshot.alerts


def poll_until(poller: ClusterPoller, sb: Sandbox, predicate: Callable[[PollResult], bool],
               timeout: float = 30.0, every: float = 0.3, on_poll: Callable[[PollResult], None] | None = None
               ) -> PollResult:
    """Poll (on simulated time) until predicate holds; fail with the last snapshot's alerts otherwise."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = poll(poller, sb)
        if on_poll is not None:
            on_poll(last)
        if predicate(last):
            return last
        time.sleep(every)
    rules = sorted({(a.rule, a.subject) for a in last.snapshot.alerts}) if last else None
    raise AssertionError(f"condition not reached in {timeout}s; open alerts: {rules}")


def rules_of(r: PollResult) -> set[str]:
    return {a.rule for a in r.snapshot.alerts}


def alert(r: PollResult, rule: str, subject: str | None = None) -> Any:
    for a in r.snapshot.alerts:
        if a.rule == rule and (subject is None or a.subject == subject):
            return a
    return None
