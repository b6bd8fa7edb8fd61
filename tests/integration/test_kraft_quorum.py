"""A KRaft cluster's quorum and controller as real Kafka shows them, seen through the real clients over TCP.

Only the Raft leader answers DescribeQuorum (brokers forward it), so a quorum that lost its leader answers
NOT_LEADER_OR_FOLLOWER, never "leader -1"; and a KRaft broker's Metadata names a random broker as controller
(KIP-590). The collector must still see the quorum loss (`kraft_no_leader`) and a stable controller.
"""

from __future__ import annotations

from typing import Any

import pytest

from collectors.config import MonitorConfig
from collectors.model.observations import KafkaObservation
from collectors.model.poll import PollResult
from collectors.runtime.poller import ClusterPoller
from sandbox.runner import Sandbox
from tests.support.monitor import FAST_THRESHOLDS, alert, make_poller, poll, poll_until
from tests.support.sandbox import running_sandbox, scenario

pytestmark = pytest.mark.integration


def quick_poller(sb: Sandbox) -> ClusterPoller:
    """`make_poller` with a 1 s request timeout: the crashed voters stay registered while the quorum has no leader
    (nobody fences them), and every request to them costs a timeout."""
    cfg = MonitorConfig.model_validate({
        "clusters": [{"name": "sandbox", "bootstrap_servers": sb.bootstrap_servers}], "poll_interval_s": 5,
        "request_timeout_s": 1, "thresholds": FAST_THRESHOLDS})
    return ClusterPoller(cfg.clusters[0], cfg, clock=sb.clock.now)


def test_a_quorum_without_a_majority_has_no_leader_and_the_collector_says_so() -> None:
    with running_sandbox(scenario(mode="kraft"), speed=10.0) as s:
        p = quick_poller(s)
        try:
            r = poll_until(p, s, lambda r: len(r.snapshot.kraft_voters) == 3, timeout=10)
            leader = r.snapshot.controller_id
            assert leader == s.call(lambda c: c.quorum_leader) and leader is not None and leader >= 0
            others = [v.node_id for v in r.snapshot.kraft_voters if v.role == "voter"]
            s.call(lambda c: [c.crash_broker(i) for i in others])  # the leader alone is no majority
            first_leaderless: list[PollResult] = []

            def leaderless(r: PollResult) -> bool:
                voters = r.snapshot.kraft_voters
                if voters and all(v.leader_id == -1 for v in voters) and not first_leaderless:
                    first_leaderless.append(r)
                return alert(r, "kraft_no_leader", "sandbox") is not None

            r = poll_until(p, s, leaderless, timeout=20)
            # the first poll that found no leader waited (an election takes seconds); none was invented
            assert alert(first_leaderless[0], "kraft_no_leader") is None
            assert s.call(lambda c: c.quorum_leader) == -1
            assert [v.leader_id for v in r.snapshot.kraft_voters] == [-1, -1, -1]
            assert "DescribeQuorum: NOT_LEADER_OR_FOLLOWER" in r.snapshot.errors
            # the controller last named stays the snapshot's: no_controller is not the quorum alert's double
            assert r.snapshot.controller_id == leader and alert(r, "no_controller") is None
            assert not any(a.rule == "kraft_voter_lagging" for a in r.opened)

            s.call(lambda c: [c.restart_broker(i) for i in others])
            r = poll_until(p, s, lambda r: alert(r, "kraft_no_leader") is None, timeout=15)
            assert any(a.rule == "kraft_no_leader" for a in r.resolved)
            assert [v.leader_id for v in r.snapshot.kraft_voters] == [s.call(lambda c: c.quorum_leader)] * 3
        finally:
            p.close()


def test_the_controller_is_the_quorum_leader_not_metadata_s_random_broker() -> None:
    with running_sandbox(scenario(mode="kraft"), speed=10.0) as s:
        p = make_poller(s)
        told: list[int | None] = []  # Metadata's controller id, as each poll received it
        observe = p.kafka.observe

        def spy(*args: Any, **kwargs: Any) -> KafkaObservation:
            obs = observe(*args, **kwargs)
            told.append(obs.controller_id)
            return obs

        p.kafka.observe = spy  # type: ignore[method-assign]
        try:
            leader = s.call(lambda c: c.quorum_leader)
            snaps = [poll(p, s).snapshot for _ in range(8)]
            assert len(set(told)) > 1  # as a real KRaft broker answers: a random broker each time
            assert [x.controller_id for x in snaps] == [leader] * 8
            assert all([b.broker_id for b in x.brokers if b.is_controller] == [leader] for x in snaps)
            assert all(not x.alerts for x in snaps[1:])  # no_controller least of all
        finally:
            p.close()
