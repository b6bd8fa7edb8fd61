"""Helpers for tests that run a sandbox and talk to it through the real clients."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from sandbox.clock import SimClock
from sandbox.runner import Sandbox
from sandbox.spec import Scenario

TEST_CLUSTER: dict[str, Any] = {
    "brokers": 3,
    "broker_config": {"min.insync.replicas": "2"},
    "topics": [
        {"name": "orders", "partitions": 3, "replication_factor": 3, "produce_rate": 30},
        {"name": "single", "partitions": 3, "replication_factor": 1, "produce_rate": 3,
             "configs": {"min.insync.replicas": 1}},
    ],
    "groups": [
        {"group_id": "billing", "topics": ["orders"], "commit_interval_s": 1},
        {"group_id": "reporting", "topics": ["orders"], "commit_interval_s": 1, "members": 1},
    ],
    "transactional_producers": [
        {"transactional_id": "tx", "topics": ["orders"], "timeout_ms": 20_000, "transaction_duration_s": 2},
    ],
}


def scenario(cluster: dict[str, Any] | None = None, incidents: list[dict[str, Any]] | None = None,
             **cluster_overrides: Any) -> Scenario:
    c = dict(cluster or TEST_CLUSTER)
    c.update(cluster_overrides)
    return Scenario.model_validate({"cluster": c, "incidents": incidents or []})


@contextlib.contextmanager
def running_sandbox(sc: Scenario, speed: float = 10.0, zookeeper: bool = False,
                    start: float | None = None) -> Iterator[Sandbox]:
    """A started sandbox, stopped after; its simulated clock starts at `start` (None: now)."""
    clock = SimClock(speed, start) if start is not None else None
    sb = Sandbox(sc, speed=speed, zookeeper=zookeeper, tick_s=0.1, clock=clock)
    sb.start()
    try:
        yield sb
    finally:
        sb.stop()


@contextlib.contextmanager
def frozen(sb: Sandbox) -> Iterator[None]:
    """Freeze simulated time so client answers and the model can be compared exactly."""
    sb.clock.pause()
    sb.advance_to(sb.clock.now())  # let one tick run at the frozen time
    try:
        yield
    finally:
        sb.clock.resume()
