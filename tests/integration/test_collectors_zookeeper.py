"""Collectors against the sandbox in ZooKeeper mode with a real ensemble."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from collectors.runtime.poller import ClusterPoller
from collectors.sources.zk_fourletter import split_zxid
from sandbox.runner import Sandbox
from tests.support.monitor import alert, make_poller, poll, poll_until

pytestmark = pytest.mark.integration


@pytest.fixture()
def poller(sbz: Sandbox) -> Iterator[ClusterPoller]:
    p = make_poller(sbz)
    poll_until(p, sbz, lambda r: not r.snapshot.alerts and len(r.snapshot.zookeeper) == 3, timeout=30)
    yield p
    p.close()


def test_healthy_ensemble_and_znodes_agree_with_metadata(sbz: Sandbox, poller: ClusterPoller) -> None:
    r = poll(poller, sbz)
    s = r.snapshot
    assert s.mode == "zookeeper"
    assert sorted(z.mode for z in s.zookeeper) == ["follower", "follower", "leader"]
    assert all(b.in_zookeeper for b in s.brokers)
    assert all(p.zk_isr is not None and not p.zk_isr_mismatch for p in s.partitions)
    assert not r.node_unreachable


def test_crashed_broker_shows_in_metadata_and_zookeeper(sbz: Sandbox, poller: ClusterPoller) -> None:
    sbz.call(lambda c: c.crash_broker(2))
    try:
        def orders1(r: object) -> object:
            return next(p for p in r.snapshot.partitions if (p.topic, p.partition) == ("orders", 1))

        def b2_of(r: object) -> object:
            return next(b for b in r.snapshot.brokers if b.broker_id == 2)

        # the znode mirror writes a moment after the model changes, as ZooKeeper and metadata do not
        # change in the same instant in a real cluster either, and it writes the partition states before it
        # deletes the broker's registration (a poll in between saw the new ISR with broker 2 still registered):
        # wait for every view to show it
        r = poll_until(poller, sbz, lambda r: alert(r, "broker_down", "broker-2") is not None
                       and orders1(r).zk_isr is not None and 2 not in orders1(r).zk_isr
                       and b2_of(r).in_zookeeper is False, timeout=30)
        b2 = b2_of(r)
        assert not b2.alive and b2.in_zookeeper is False
        p = orders1(r)
        assert 2 not in p.isr and p.zk_leader == p.leader == 3
    finally:
        sbz.call(lambda c: c.restart_broker(2))
    poll_until(poller, sbz, lambda r: "broker_down" not in {a.rule for a in r.snapshot.alerts}, timeout=30)


def test_paused_follower_is_not_serving(sbz: Sandbox, poller: ClusterPoller) -> None:
    ens = sbz.ensemble
    leader = ens.leader_sid()
    follower = next(n for n in ens.nodes if n.sid != leader)
    ens.pause(follower.sid)
    try:
        server = f"127.0.0.1:{follower.client_port}"
        r = poll_until(poller, sbz, lambda r: alert(r, "zk_node_not_serving", server) is not None, timeout=20)
        z = next(z for z in r.snapshot.zookeeper if z.server == server)
        assert not z.serving and "timeout" in (z.error or "")
        assert r.node_unreachable
        assert alert(r, "zk_quorum_lost") is None
    finally:
        ens.resume(follower.sid)
    poll_until(poller, sbz, lambda r: alert(r, "zk_node_not_serving") is None, timeout=20)


def test_killed_leader_shows_as_election_with_new_epoch(sbz: Sandbox, poller: ClusterPoller) -> None:
    ens = sbz.ensemble
    first = poll(poller, sbz).snapshot
    old_epoch = max(z.zxid_epoch or 0 for z in first.zookeeper if z.mode == "leader")
    old = ens.kill_leader()
    try:
        r = poll_until(poller, sbz, lambda r: alert(r, "zk_leader_election") is not None, timeout=30)
        leader = next(z for z in r.snapshot.zookeeper if z.mode == "leader")
        assert leader.zxid_epoch > old_epoch
        assert split_zxid(leader.zxid)[0] == leader.zxid_epoch
        assert str(leader.zxid_epoch) in alert(r, "zk_leader_election").summary
        assert alert(r, "zk_node_not_serving") is not None  # the killed one
    finally:
        ens.start_node(old)
        ens.wait_serving(old, timeout=30)
