"""The sandbox in ZooKeeper mode: Kafka's znodes in a real ensemble follow the model."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from collectors.sources.zk_fourletter import split_zxid
from sandbox.runner import Sandbox
from tests.support.sandbox import running_sandbox, scenario

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sbz() -> Iterator[Sandbox]:
    incidents = [{"type": "zk_leader_kill", "at": 100_000, "duration": 10}]  # triggered by hand below
    with running_sandbox(scenario(incidents=incidents), speed=10.0, zookeeper=True) as s:
        yield s


@pytest.fixture(scope="module")
def zk(sbz: Sandbox) -> Iterator[KazooClient]:
    client = KazooClient(hosts=sbz.zk_connect, timeout=10)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def wait(pred, timeout: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return True
        except Exception:
            pass
        time.sleep(0.1)
    return False


def state_of(zk: KazooClient, topic: str, p: int) -> dict:  # type: ignore[type-arg]
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])


def test_kafka_znodes_are_published(sbz: Sandbox, zk: KazooClient) -> None:
    assert wait(lambda: sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"])
    reg = json.loads(zk.get("/brokers/ids/2")[0])
    assert reg["port"] == sbz.listeners[2].port and reg["endpoints"][0].startswith("PLAINTEXT://127.0.0.1:")
    assert zk.exists("/brokers/ids/2").ephemeralOwner != 0
    assert json.loads(zk.get("/controller")[0])["brokerid"] == 1
    assert int(zk.get("/controller_epoch")[0]) == 1
    assert sorted(json.loads(zk.get("/brokers/topics/orders")[0])["partitions"]) == ["0", "1", "2"]
    st = state_of(zk, "orders", 1)
    assert st["leader"] == 2 and st["isr"] == [2, 3, 1] and st["controller_epoch"] == 1


def test_znodes_follow_broker_crash_and_isr_changes(sbz: Sandbox, zk: KazooClient) -> None:
    state = "/brokers/topics/orders/partitions/1/state"
    sbz.call(lambda c: c.crash_broker(2))
    assert wait(lambda: "2" not in zk.get_children("/brokers/ids"))
    # the partition states are written right after the registration (one write batch, not one transaction)
    assert wait(lambda: state_of(zk, "orders", 1)["leader"] == 3)
    st = state_of(zk, "orders", 1)
    assert 2 not in st["isr"] and st["leader_epoch"] >= 1
    # in Kafka's order, by ZooKeeper's own clock: the registration went (the last change of /brokers/ids's
    # children) before the controller rewrote the state, so no reader saw the shrunk ISR beside broker 2's znode
    deregistered, shrunk = zk.exists("/brokers/ids").pzxid, zk.exists(state).mzxid
    assert deregistered < shrunk
    assert wait(lambda: state_of(zk, "single", 1)["leader"] == -1)
    sbz.call(lambda c: c.restart_broker(2))
    assert wait(lambda: "2" in zk.get_children("/brokers/ids"))
    assert wait(lambda: 2 in state_of(zk, "orders", 1)["isr"])
    assert zk.exists("/brokers/ids").pzxid < zk.exists(state).mzxid  # registered before it rejoined the ISR


def test_zookeeper_leader_kill_incident_elects_new_leader_with_higher_epoch(sbz: Sandbox) -> None:
    from sandbox import incidents

    ens = sbz.ensemble
    old_leader = ens.leader_sid()
    old_epoch = split_zxid(ens.srvr(old_leader)["zxid"])[0]
    spec = sbz.scenario.incidents[0]
    incidents.apply(sbz, spec, True)()
    new_leader = ens.leader_sid(timeout=15)
    assert new_leader != old_leader
    # a new leader answers as leader a moment before it sets its epoch's zxid (test_zookeeper_ensemble.py)
    assert wait(lambda: split_zxid(ens.srvr(new_leader)["zxid"])[0] > old_epoch)
    incidents.apply(sbz, spec, False)()
    ens.wait_serving(old_leader, timeout=30)
    # the mirror keeps writing through the election
    sbz.call(lambda c: c.controller_failover())
    client = KazooClient(hosts=sbz.zk_connect, timeout=10)
    client.start(timeout=15)
    try:
        assert wait(lambda: json.loads(client.get("/controller")[0])["brokerid"] != 1)
    finally:
        client.stop()
        client.close()
