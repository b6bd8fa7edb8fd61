"""A KRaft broker whose metadata fetch stops, as the sandbox does it and the collector sees it over TCP.

The sandbox's `metadata_lag` incident stops broker 4's fetch of the metadata log (an observer: voters are 1, 2, 3)
while it stays registered and answering. DescribeQuorum then shows its last catch-up falling behind the leader's
time: the collector must say `kraft_observer_lagging` for broker 4, as far behind as the sandbox says it fell, and
resolve it when the fetch resumes.
"""

from __future__ import annotations

import re

import pytest

from sandbox import incidents
from sandbox.spec import IncidentSpec
from tests.support.monitor import alert, make_poller, poll_until
from tests.support.sandbox import running_sandbox, scenario

pytestmark = pytest.mark.integration


def test_a_brokers_stopped_metadata_fetch_is_named_with_how_far_behind_it_is() -> None:
    with running_sandbox(scenario(mode="kraft", brokers=4), speed=10.0) as s:
        p = make_poller(s)
        try:
            r = poll_until(p, s, lambda r: any(v.role == "observer" for v in r.snapshot.kraft_voters), timeout=10)
            assert alert(r, "kraft_observer_lagging") is None
            lag = IncidentSpec(type="metadata_lag", at=0, broker=4)
            s.call(lambda c: incidents.apply(s, lag, True))
            said = s.call(lambda c: [what for _, _, what in c.events if what.startswith("broker 4: metadata")])
            print("sandbox:", said[-1])
            stopped = int(re.search(r"at offset (\d+)", said[-1]).group(1))  # type: ignore[union-attr]

            r = poll_until(p, s, lambda r: alert(r, "kraft_observer_lagging", "broker-4") is not None, timeout=15)
            a = alert(r, "kraft_observer_lagging", "broker-4")
            truth = s.call(lambda c: (c.now - c.brokers[4].metadata_stopped[1], c.metadata_hwm - stopped))
            print("collector:", a.summary, "| sandbox: stopped", f"{truth[0]:.1f}s ago, {truth[1]:.0f} records")
            assert a.severity == "warning" and 30 < a.value <= truth[0] + 0.5  # its age, on the leader's clock
            behind = int(re.search(r", (\d+) records behind", a.summary).group(1))  # type: ignore[union-attr]
            assert 0 < behind <= truth[1]
            assert not {x.rule for x in r.snapshot.alerts} & {"broker_down", "broker_unreachable",
                                                              "kraft_voter_lagging"}
            incident = next(i for i in r.snapshot.incidents if i.kind == "consensus")
            assert incident.members == {"kraft_observer_lagging": 1}

            s.call(lambda c: incidents.apply(s, lag, False))
            said = s.call(lambda c: [what for _, _, what in c.events if what.startswith("broker 4: metadata")])
            print("sandbox:", said[-1])
            assert re.fullmatch(r"broker 4: metadata cache caught up after \d+s, \d+ records behind", said[-1])
            r = poll_until(p, s, lambda r: alert(r, "kraft_observer_lagging") is None, timeout=8)
            assert any(x.rule == "kraft_observer_lagging" for x in r.resolved)
        finally:
            p.close()
