"""ZkAdapter against a real ZooKeeper ensemble: the sandbox in ZooKeeper mode, plus one ensemble to break.

The sandbox (3 JVMs, Kafka's znodes kept current by the model) is shared by
every test that leaves it whole again; quorum loss gets its own ensemble,
which also carries a chroot, broken znodes and a restricted 4lw whitelist, so
the whole file starts six JVMs in total.  Timing assertions are only the
generous "returns within 3 × timeout" bound the adapter promises.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from collectors.model.observations import ZkObservation
from collectors.sources.zk_adapter import ZkAdapter
from sandbox.runner import Sandbox
from sandbox.zookeeper import ZooKeeperEnsemble
from tests.support.sandbox import frozen, running_sandbox, scenario

pytestmark = pytest.mark.integration

TIMEOUT_S = 2.0
BOUND_S = 10 * TIMEOUT_S  # hang guard: observe() must end by its own deadline (2x timeout), not by the peer


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with running_sandbox(scenario(), speed=10.0, zookeeper=True) as s:
        yield s


@pytest.fixture(scope="module")
def adapter(sb: Sandbox) -> Iterator[ZkAdapter]:
    assert sb.zk_connect is not None
    a = ZkAdapter("sandbox", sb.zk_connect, {"timeout": 10.0}, timeout_s=TIMEOUT_S)
    yield a
    a.close()


def timed_observe(adapter: ZkAdapter, **kwargs: bool) -> ZkObservation:
    started = time.monotonic()
    obs = adapter.observe(**kwargs)
    elapsed = time.monotonic() - started
    assert elapsed < BOUND_S, f"observe() took {elapsed:.1f}s, bound {BOUND_S:g}s"
    return obs


def observe_until(adapter: ZkAdapter, pred: Callable[[ZkObservation], bool], timeout: float = 15.0) -> ZkObservation:
    deadline = time.monotonic() + timeout
    while True:
        obs = timed_observe(adapter)
        if pred(obs):
            return obs
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout:g}s; last observation: {obs}")
        time.sleep(0.2)


def server_of(ens: ZooKeeperEnsemble, sid: int) -> str:
    host, port = ens.node(sid).address
    return f"{host}:{port}"


def model_states(sb: Sandbox) -> dict[tuple[str, int], tuple[int, list[int]]]:
    return sb.call(lambda c: {(p.topic, p.index): (p.leader, list(p.isr)) for p in c.all_partitions()})


def zk_states(obs: ZkObservation) -> dict[tuple[str, int], tuple[int, list[int]]]:
    return {k: (v["leader"], v["isr"]) for k, v in obs.partition_states.items()}


def wait_quorum(ens: ZooKeeperEnsemble) -> None:
    ens.wait_for_quorum(timeout=30)


# ----------------------------------------------------------------------------- the shared sandbox


def test_healthy_ensemble_and_znodes_match_the_model(sb: Sandbox, adapter: ZkAdapter) -> None:
    with frozen(sb):
        expected = model_states(sb)
        epoch = sb.call(lambda c: c.controller_epoch)
        # the mirror writes from a worker thread: give it a moment to catch up with the frozen model
        obs = observe_until(adapter, lambda o: zk_states(o) == expected and not o.stale_sections, timeout=10)

    assert [s.server for s in obs.servers] == [server_of(sb.ensemble, n.sid) for n in sb.ensemble.nodes]
    assert all(s.serving and s.error is None for s in obs.servers), obs.servers
    modes = sorted(s.mode or "" for s in obs.servers)
    assert modes == ["follower", "follower", "leader"]
    leader = next(s for s in obs.servers if s.mode == "leader")
    assert leader.learners == 2 and leader.synced_followers == 2  # mntr is whitelisted in the sandbox
    assert leader.zxid_epoch is not None and leader.zxid_epoch >= 1 and leader.lag_behind_leader is None
    for s in obs.servers:
        assert s.cluster == "sandbox" and s.znode_count and s.znode_count > 10 and s.latency_avg_ms is not None
        if s.mode == "follower":
            assert s.lag_behind_leader is None or s.lag_behind_leader >= 0

    assert obs.broker_ids == {1, 2, 3}
    assert obs.controller_id == 1 and obs.controller_epoch == epoch
    assert set(obs.partition_states) == set(expected)  # internal topics included
    assert {(t, p) for t in ("orders", "single") for p in range(3)} <= set(obs.partition_states)
    for state in obs.partition_states.values():
        assert state["controller_epoch"] == epoch and state["leader_epoch"] >= 0
    assert obs.errors == [] and obs.stale_sections == set()


def test_options_skip_what_they_say(sb: Sandbox, adapter: ZkAdapter) -> None:
    only_4lw = timed_observe(adapter, read_znodes=False)
    assert len(only_4lw.servers) == 3 and only_4lw.broker_ids is None and only_4lw.partition_states == {}
    assert sb.zk_connect is not None
    with ZkAdapter("sandbox", sb.zk_connect, four_letter_words=False, timeout_s=TIMEOUT_S) as no_4lw:
        obs = timed_observe(no_4lw)
    assert obs.servers == [] and obs.broker_ids == {1, 2, 3} and "zookeeper" not in obs.stale_sections
    with ZkAdapter("sandbox", sb.zk_connect + "/no-such-chroot", timeout_s=TIMEOUT_S) as wrong_chroot:
        obs = timed_observe(wrong_chroot)
    assert obs.broker_ids is None and obs.stale_sections == {"znodes"}
    assert any("/no-such-chroot/brokers/ids does not exist" in e for e in obs.errors), obs.errors


def test_crashed_broker_leaves_broker_ids_and_isrs(sb: Sandbox, adapter: ZkAdapter) -> None:
    sb.call(lambda c: c.crash_broker(2))
    try:
        assert sb.wait_for(lambda c: not c.brokers[2].registered, timeout=20)
        # the new states reach ZooKeeper in more than one write (sandbox.znodes: transactions of at most 1,000 znodes)
        # and the adapter reads them znode by znode: wait for all of them, not for "orders" alone (which once caught
        # __consumer_offsets still listing broker 2), then check each
        obs = observe_until(adapter, lambda o: o.broker_ids == {1, 3}
                            and all(2 not in s["isr"] or (t == "single" and s["isr"] == [2])
                                    for (t, _), s in o.partition_states.items()))
        for (topic, index), state in obs.partition_states.items():
            if topic == "single" and state["isr"] == [2]:
                # Kafka keeps the last in-sync replica in the ISR of a partition that went offline
                assert state["leader"] == -1, (topic, index, state)
            else:
                assert 2 not in state["isr"] and state["leader"] != 2, (topic, index, state)
        with frozen(sb):
            expected = model_states(sb)
            observe_until(adapter, lambda o: zk_states(o) == expected, timeout=10)
    finally:
        sb.call(lambda c: c.restart_broker(2))
    observe_until(adapter, lambda o: o.broker_ids == {1, 2, 3})


def test_paused_follower_times_out_within_the_bound(sb: Sandbox, adapter: ZkAdapter) -> None:
    ens = sb.ensemble
    leader = ens.leader_sid()
    follower = next(n.sid for n in ens.nodes if n.sid != leader)
    ens.pause(follower)
    try:
        obs = timed_observe(adapter)
    finally:
        ens.resume(follower)
    by_server = {s.server: s for s in obs.servers}
    paused = by_server.pop(server_of(ens, follower))
    assert not paused.serving and paused.error == "timeout" and paused.lag_behind_leader is None
    assert all(s.serving for s in by_server.values()), by_server
    assert sorted(s.mode or "" for s in by_server.values()) == ["follower", "leader"]
    assert "zookeeper" in obs.stale_sections
    assert f"zookeeper {paused.server}: timeout" in obs.errors
    ens.wait_serving(follower, timeout=30)
    observe_until(adapter, lambda o: all(s.serving for s in o.servers) and not o.stale_sections)


def test_killed_leader_is_replaced_with_a_higher_epoch(sb: Sandbox, adapter: ZkAdapter) -> None:
    ens = sb.ensemble
    before = observe_until(adapter, lambda o: sum(s.mode == "leader" for s in o.servers) == 1)
    old = next(s for s in before.servers if s.mode == "leader")
    assert old.zxid_epoch is not None
    old_sid = ens.kill_leader()
    assert server_of(ens, old_sid) == old.server
    try:
        after = observe_until(adapter, lambda o: any(
            s.serving and s.mode == "leader" and s.server != old.server and (s.zxid_epoch or 0) > old.zxid_epoch
            for s in o.servers))
        dead = next(s for s in after.servers if s.server == old.server)
        assert not dead.serving and dead.error == "refused"
        for s in after.servers:  # zxid 0x0 / old-epoch followers right after the election: unknown, never huge
            assert s.lag_behind_leader is None or 0 <= s.lag_behind_leader < 1_000_000
    finally:
        ens.start_node(old_sid)
    ens.wait_serving(old_sid, timeout=30)
    wait_quorum(ens)
    # the kept-open session survives (or is transparently recreated after) the election
    observe_until(adapter, lambda o: o.broker_ids == {1, 2, 3} and not o.stale_sections)


# ----------------------------------------------------------------------------- nothing listening


def test_nothing_listening_is_refused_quickly() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with ZkAdapter("gone", f"127.0.0.1:{port}", {"timeout": 4.0}, timeout_s=TIMEOUT_S) as a:
        obs = timed_observe(a)
    assert [(s.serving, s.error) for s in obs.servers] == [(False, "refused")]
    assert obs.stale_sections == {"zookeeper", "znodes"} and obs.broker_ids is None


# ----------------------------------------------------------------------------- an ensemble to break


def test_chroot_broken_znodes_srvr_only_whitelist_and_quorum_loss(tmp_path: Path) -> None:
    ens = ZooKeeperEnsemble(size=3, base_dir=tmp_path / "zk", whitelist="srvr")
    try:
        ens.start(timeout=30)
        client = KazooClient(hosts=ens.connect_string, timeout=10)
        client.start(timeout=15)
        try:
            good = {"controller_epoch": 4, "leader": 7, "version": 1, "leader_epoch": 2, "isr": [7, 8]}
            client.create("/kafka/brokers/ids/7", b"{}", makepath=True)
            client.create("/kafka/brokers/ids/8", b"{}")
            client.create("/kafka/controller", json.dumps({"version": 2, "brokerid": 8}).encode())
            client.create("/kafka/controller_epoch", b"4")
            client.create("/kafka/brokers/topics/t/partitions/0/state", json.dumps(good).encode(), makepath=True)
            client.create("/kafka/brokers/topics/t/partitions/1/state", b'{"leader": 7,', makepath=True)
            client.create("/kafka/brokers/topics/t/partitions/2/state", b'{"leader": 7}', makepath=True)
            client.create("/kafka/brokers/topics/t/partitions/3", b"", makepath=True)  # no state child
            client.create("/kafka/brokers/topics/empty", b"{}", makepath=True)  # no partitions znode
        finally:
            client.stop()
            client.close()

        adapter = ZkAdapter("broken", ens.connect_string + "/kafka", timeout_s=TIMEOUT_S)
        try:
            obs = timed_observe(adapter)
            assert all(s.serving for s in obs.servers), obs.servers
            assert all(s.error == "4lw not whitelisted: mntr" for s in obs.servers)
            assert all(s.learners is None and s.zxid_epoch is not None for s in obs.servers)
            assert sorted(s.mode or "" for s in obs.servers) == ["follower", "follower", "leader"]
            assert obs.stale_sections == set()  # broken znodes are reported, not a stale section
            assert obs.broker_ids == {7, 8} and obs.controller_id == 8 and obs.controller_epoch == 4
            assert obs.partition_states == {("t", 0): {k: good[k] for k in
                                                        ("leader", "leader_epoch", "isr", "controller_epoch")}}
            text = "\n".join(obs.errors)
            for needle in ("malformed /brokers/topics/t/partitions/1/state",
                           "malformed /brokers/topics/t/partitions/2/state",
                           "/brokers/topics/t/partitions/3/state is missing", "topic empty has no partitions"):
                assert needle in text, obs.errors

            # quorum loss: kill two of three; the kept session cannot reconnect, nothing hangs
            leader = ens.leader_sid()
            ens.kill(leader)
            survivor = next(n.sid for n in ens.nodes if n.sid != leader)
            ens.kill(next(n.sid for n in ens.nodes if n.sid not in (leader, survivor)))
            obs = observe_until(adapter, lambda o: not any(s.serving for s in o.servers), timeout=10)
            assert "znodes" in obs.stale_sections and obs.broker_ids is None
            errors = {s.server: s.error for s in obs.servers}
            assert errors.pop(server_of(ens, survivor)) == "not serving"
            assert set(errors.values()) == {"refused"}
            # and a fresh adapter (no session to keep) is bounded the same way
            with ZkAdapter("broken", ens.connect_string + "/kafka", timeout_s=TIMEOUT_S) as fresh:
                obs = timed_observe(fresh)
            assert not any(s.serving for s in obs.servers) and "znodes" in obs.stale_sections
        finally:
            adapter.close()
    finally:
        ens.stop()
