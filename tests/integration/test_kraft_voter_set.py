"""A KRaft voter removed and added back (KIP-853), as the sandbox does it and the collector sees it over TCP.

The sandbox's `kraft_remove_voter` incident takes a follower voter out of the voter set, which DescribeQuorum then
answers: the collector must say which voter left (`kraft_voters_changed`) and that the 2 voters left survive no
voter's loss (`kraft_quorum_fragile`); `kraft_add_voter` brings it back, and the quorum is no longer fragile.
"""

from __future__ import annotations

import pytest

from sandbox import incidents
from sandbox.spec import IncidentSpec
from tests.support.monitor import alert, make_poller, poll_until
from tests.support.sandbox import running_sandbox, scenario

pytestmark = pytest.mark.integration


def test_a_follower_voter_removed_then_added_back_is_named_and_fragile_meanwhile() -> None:
    with running_sandbox(scenario(mode="kraft"), speed=10.0) as s:
        p = make_poller(s)
        try:
            r = poll_until(p, s, lambda r: len([v for v in r.snapshot.kraft_voters if v.role != "observer"]) == 3,
                           timeout=10)
            assert alert(r, "kraft_quorum_fragile") is None and alert(r, "kraft_voters_changed") is None
            leader = s.call(lambda c: c.quorum_leader)
            node = max(i for i in (1, 2, 3) if i != leader)
            remove = IncidentSpec(type="kraft_remove_voter", at=0, node=node)
            s.call(lambda c: incidents.apply(s, remove, True))
            said = s.call(lambda c: [what for _, _, what in c.events if "KRaft quorum" in what])
            print("sandbox:", said[-1])
            left = [i for i in (1, 2, 3) if i != node]
            assert said[-1] == f"voter {node} removed from the KRaft quorum: voters {left[0]}, {left[1]}"

            r = poll_until(p, s, lambda r: alert(r, "kraft_voters_changed") is not None, timeout=8)
            changed, fragile = alert(r, "kraft_voters_changed", "sandbox"), alert(r, "kraft_quorum_fragile", "sandbox")
            print("collector:", changed.summary, "|", fragile.summary if fragile else None)
            assert changed.severity == "info"
            # the collector's words name what the sandbox did: the voter removed, the voters left
            assert f": voter {node} removed (voters now {left[0]}, {left[1]})" in changed.summary
            assert fragile is not None and fragile.severity == "warning" and fragile.value == 2.0
            assert f"2 voters ({left[0]}, {left[1]})" in fragile.summary
            assert s.call(lambda c: c.quorum_leader) == leader  # a follower left: no election
            assert alert(r, "kraft_leader_election") is None

            add = IncidentSpec(type="kraft_add_voter", at=0, node=node)
            s.call(lambda c: incidents.apply(s, add, True))
            said = s.call(lambda c: [what for _, _, what in c.events if "KRaft quorum" in what])
            print("sandbox:", said[-1])
            assert said[-1] == f"voter {node} added to the KRaft quorum: voters 1, 2, 3"
            r = poll_until(p, s, lambda r: alert(r, "kraft_quorum_fragile") is None, timeout=8)
            assert any(a.rule == "kraft_quorum_fragile" for a in r.resolved)
            changed = alert(r, "kraft_voters_changed", "sandbox")
            assert changed is not None and f": voter {node} added (voters now 1, 2, 3)" in changed.summary
        finally:
            p.close()
