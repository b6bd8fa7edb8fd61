"""max_concurrent_requests holds across a whole poll, measured where it matters: at the brokers.

The sandbox counts requests it has received and not yet answered across all its brokers (what the
monitor has outstanding). Every broker is made slow, so a poll's requests pile up if nothing bounds them;
with a limit of 3 the brokers never see more than 3 at once, and the same poll without the limit (the
control) shows the measurement can see far more. The limit bounds the monitor's own requests; the
clients' housekeeping at connection time (ApiVersions, their own metadata) is not counted, so a warm-up
poll opens the connections before the measured one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from collectors.runtime.poller import ClusterPoller
from sandbox.runner import Sandbox
from tests.support.monitor import monitor_config, poll
from tests.support.sandbox import TEST_CLUSTER, running_sandbox, scenario

pytestmark = pytest.mark.integration

CLUSTER: dict[str, Any] = {
    **TEST_CLUSTER,
    "brokers": 4,
    "groups": [{"group_id": f"g{i}", "topics": ["orders"], "commit_interval_s": 1} for i in range(12)],
}


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with running_sandbox(scenario(CLUSTER), speed=10.0) as s:
        s.advance_to(s.cluster.start + 10)
        s.call(lambda c: [c.set_broker_delay(b, 0.15) for b in c.brokers])
        s.advance_to(s.clock.now() + 1)  # a tick applies the delay to the listeners
        yield s


def _peak_of_one_poll(sb: Sandbox, limit: int) -> tuple[int, Any]:
    cfg = monitor_config(sb).model_copy(update={"max_concurrent_requests": limit, "request_timeout_s": 10})
    poller = ClusterPoller(cfg.clusters[0], cfg)
    try:
        poll(poller, sb)  # warm-up: connections and the clients' own housekeeping
        sb.call(lambda c: setattr(sb.in_flight, "peak", sb.in_flight.now))
        r = poll(poller, sb)
        return sb.call(lambda c: sb.in_flight.peak), r
    finally:
        poller.close()


def test_the_bound_holds_with_slow_brokers(sb: Sandbox) -> None:
    peak, r = _peak_of_one_poll(sb, 3)
    assert r.snapshot.reachable and not r.snapshot.stale_sections, r.snapshot.errors
    assert r.snapshot.requests > 20  # a real fan-out: offsets per broker, groups per coordinator, configs
    assert len({g.group_id for g in r.snapshot.groups}) == 12
    assert 2 <= peak <= 3


def test_control_without_a_tight_bound_goes_wide(sb: Sandbox) -> None:
    peak, r = _peak_of_one_poll(sb, 1024)
    assert r.snapshot.reachable and not r.snapshot.stale_sections, r.snapshot.errors
    assert peak > 6
