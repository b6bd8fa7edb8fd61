"""The ZooKeeper zxids last seen and the transactions' aborts are checkpointed: a restart still claims what it can.

Before, `ClusterState.zk_zxids` was not saved: the first poll after a restart only recorded what it found, so a
zxid that went back while the monitor was down (same epoch, counter 0x100 -> 0x50: committed transactions gone)
never opened `zk_zxid_regressed`. That is proof across any gap: within an epoch a server's zxid only grows.

A transaction seen open and then seen aborted with its producer's epoch bumped is proof of a timeout abort across
one poll interval only: across a downtime the epoch also moves when the transaction commits and the producer
restarts, or with every transaction end (Transaction V2), and a later transaction may be the one aborted. So only
the watches of an abort already recorded are saved, for the producer's return (`txn_producer_returned`).
Both are later, optional fields of meta.json: absent from older checkpoints means not known (empty), and a
damaged value is refused naming the field.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import pytest

from collectors.config import MonitorConfig
from collectors.model.loss import TxnWatch
from collectors.model.observations import KafkaObservation, PartitionMeta, ZkObservation
from collectors.model.poll import PollResult
from collectors.model.records import ZkServerRecord
from collectors.model.state import ClusterState
from collectors.model.vocabulary import TXN_PRODUCER_RETURNED, TXN_TIMEOUT_ABORT, ZXID_REGRESSED
from collectors.outputs.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from collectors.runtime.poller import Monitor
from tests.unit.test_checkpoint import edit_meta

T0 = 1_800_000_000.0
NAN = float("nan")


def zk_state() -> ClusterState:
    st = ClusterState()
    st.zk_zxids = {"zk1:2181": (5, (5 << 32) | 0x100), "zk2:2181": (4, (4 << 32) | 0x7)}
    st.txn_watch = {
        "tx-a": TxnWatch("Ongoing", 1003, 3, T0 - 50, 60_000, ["payments-0", "payments-1"]),
        "tx-b": TxnWatch("CompleteAbort", 1004, 8, None, 30_000, [], aborted_at=T0 - 5, aborted_epoch=8),
    }
    return st


def save(tmp_path: Path, st: ClusterState) -> Path:
    return save_checkpoint(tmp_path, Checkpoint("prod", "cid-1", T0, st))[0]


def load(tmp_path: Path) -> Checkpoint | None:
    return load_checkpoint(tmp_path, "prod", lag_points=60, window_size=10, now=T0 + 30, max_age_s=3600)


def test_zxids_and_transaction_watches_survive_a_round_trip(tmp_path: Path) -> None:
    save(tmp_path, zk_state())
    cp = load(tmp_path)
    assert cp is not None
    want = zk_state()
    assert cp.state.zk_zxids == want.zk_zxids
    assert cp.state.txn_watch == {"tx-b": want.txn_watch["tx-b"]}  # the open one is not proof across a restart


@pytest.mark.parametrize("name", ["zk_zxids", "txn_watch"])
def test_an_older_checkpoint_without_them_loads_with_none_known(tmp_path: Path, name: str) -> None:
    path = save(tmp_path, zk_state())
    def drop(meta: dict[str, Any]) -> None:
        assert name in meta  # what this collector writes
        del meta[name]

    edit_meta(path, drop)
    cp = load(tmp_path)
    assert cp is not None and getattr(cp.state, name) == {}


DAMAGED = {
    "zxid epoch as text": ("zk_zxids", lambda m: m["zk_zxids"]["zk1:2181"].__setitem__(0, "5"), "zk_zxids"),
    "zxid negative": ("zk_zxids", lambda m: m["zk_zxids"]["zk1:2181"].__setitem__(1, -1), "zk_zxids"),
    "zxid 1.5": ("zk_zxids", lambda m: m["zk_zxids"]["zk1:2181"].__setitem__(1, 1.5), "zk_zxids"),
    "zxid row too short": ("zk_zxids", lambda m: m["zk_zxids"].__setitem__("zk1:2181", [5]), "zk_zxids"),
    "zxids not a mapping": ("zk_zxids", lambda m: m.__setitem__("zk_zxids", [["zk1:2181", 5, 1]]), "zk_zxids"),
    "txn start time NaN": ("txn_watch", lambda m: m["txn_watch"]["tx-b"].__setitem__("start_time", NAN),
                           "txn_watch['tx-b'].start_time"),
    "txn epoch 3.5": ("txn_watch", lambda m: m["txn_watch"]["tx-b"].__setitem__("epoch", 3.5),
                      "txn_watch['tx-b'].epoch"),
    "txn partition not text": ("txn_watch", lambda m: m["txn_watch"]["tx-b"].__setitem__("partitions", [0]),
                               "txn_watch['tx-b'].partitions[0]"),
    "txn unknown field": ("txn_watch", lambda m: m["txn_watch"]["tx-b"].__setitem__("colour", "red"),
                          "txn_watch['tx-b'] has unknown fields"),
    "txn field missing": ("txn_watch", lambda m: m["txn_watch"]["tx-b"].pop("timeout_ms"), "txn_watch['tx-b']"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_value_is_refused_naming_the_field(tmp_path: Path, case: str) -> None:
    _, edit, name = DAMAGED[case]
    path = save(tmp_path, zk_state())
    edit_meta(path, edit)
    with pytest.raises(CheckpointError, match=re.escape(name)) as e:
        load(tmp_path)
    assert str(path) in str(e.value)


class _World:
    """What the fake cluster answers: a ZooKeeper server's zxid counter (epoch 5) and a transaction's state."""

    def __init__(self) -> None:
        self.counter, self.txn, self.epoch = 0x100, "Ongoing", 3

    def kafka(self, now: float, _watch: object = None, probe: object = ()) -> KafkaObservation:
        o = KafkaObservation(time=now, cluster_id="cid-1", controller_id=1, brokers=[(1, "h", 9092, None)],
                             partitions=[PartitionMeta("payments", 0, 1, 1, [1], [1], [])])
        o.high_watermark[("payments", 0)], o.log_start[("payments", 0)] = 500, 0
        o.last_stable[("payments", 0)] = 500
        ongoing = self.txn == "Ongoing"
        o.transactions = [{"transactional_id": "payments-tx", "transaction_state": self.txn, "producer_id": 1003,
                           "producer_epoch": self.epoch if ongoing else self.epoch + 1,
                           "transaction_timeout_ms": 60_000,
                           "transaction_start_time_ms": int((T0 - 10) * 1000) if ongoing else -1,
                           "partitions": [("payments", 0)] if ongoing else [], "coordinator": 1}]
        o.listed_transactions = {"payments-tx": 1003}
        return o

    def zk(self) -> ZkObservation:
        return ZkObservation(servers=[ZkServerRecord("prod", "zk1:2181", True, "standalone",
                                                     (5 << 32) | self.counter, 5, self.counter)])


class _FakeZk:
    def __init__(self, world: _World) -> None:
        self.observe = world.zk

    def close(self) -> None:
        pass


def _monitor(tmp_path: Path, world: _World) -> Monitor:
    with socket.socket() as s:  # a port nobody listens on: the fake observations stand in for the cluster
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = MonitorConfig.model_validate({"clusters": [{"name": "prod", "bootstrap_servers": f"127.0.0.1:{port}"}],
                                        "state_dir": str(tmp_path), "request_timeout_s": 1})
    m = Monitor(cfg)
    p = m.pollers[0]
    p.kafka.observe = world.kafka  # type: ignore[method-assign]
    p.zk = _FakeZk(world)  # type: ignore[assignment]
    return m


def _restarted_poll(tmp_path: Path, world: _World, now: float) -> PollResult:
    """A new monitor resumed from the checkpoint under `tmp_path`, and its first poll at `now`."""
    m = _monitor(tmp_path, world)
    try:
        assert m.resume(tmp_path, now)[0].startswith("prod: resumed from checkpoint")
        return m.pollers[0].poll(now)
    finally:
        m.close()


def test_a_zxid_gone_back_while_down_is_claimed_after_the_restart_and_an_abort_is_not(tmp_path: Path) -> None:
    world = _World()
    m = _monitor(tmp_path, world)
    try:
        for k in range(2):
            r = m.pollers[0].poll(T0 + 30 * k)
            assert not [a for a in r.opened if a.rule == "zk_zxid_regressed"]
        assert m.pollers[0].state.zk_zxids == {"zk1:2181": (5, (5 << 32) | 0x100)}
        m.save_checkpoints(tmp_path, T0 + 30)
    finally:
        m.close()
    # while the monitor was down: ZooKeeper restored from an older copy (the same epoch, counter 0x100 -> 0x50),
    # and the transaction ended aborted with the producer's epoch bumped: a timeout abort, or a commit, a restart
    # and a later transaction aborted by the application; across the gap nothing tells them apart
    world.counter, world.txn = 0x50, "CompleteAbort"
    r = _restarted_poll(tmp_path, world, T0 + 120)
    losses = [(x.kind, x.server or x.transactional_id, x.messages) for x in r.snapshot.losses]
    assert (ZXID_REGRESSED, "zk1:2181", 0xB0) in losses
    assert TXN_TIMEOUT_ABORT not in {x.kind for x in r.snapshot.losses}
    assert ("zk_zxid_regressed", "zk1:2181") in {(a.rule, a.subject) for a in r.opened}
    assert ("opened", "consensus", "zookeeper") in {(e.event, e.incident.kind, e.incident.subject)
                                                   for e in r.incident_events}


def test_a_producer_fenced_before_the_restart_is_seen_coming_back_after_it(tmp_path: Path) -> None:
    world = _World()
    m = _monitor(tmp_path, world)
    try:
        m.pollers[0].poll(T0)
        world.txn = "CompleteAbort"  # seen within one poll interval: the coordinator's timeout abort, recorded
        r = m.pollers[0].poll(T0 + 60)
        assert TXN_TIMEOUT_ABORT in {x.kind for x in r.snapshot.losses}
        m.save_checkpoints(tmp_path, T0 + 60)
    finally:
        m.close()
    world.txn, world.epoch = "Ongoing", 5  # a new instance of the producer (InitProducerId: epoch 5)
    r = _restarted_poll(tmp_path, world, T0 + 120)
    assert [(x.kind, x.transactional_id, x.epoch_before, x.epoch_after) for x in r.snapshot.losses] == [
        (TXN_PRODUCER_RETURNED, "payments-tx", 4, 5)]
