"""Keeps Kafka's own znodes current in the real ZooKeeper ensemble.

A ZooKeeper-mode Kafka cluster publishes its state in znodes that operators
and tools read directly; the collectors compare them with broker metadata.
The formats follow Kafka 3.x's ZkData: broker registrations are ephemeral (so
they vanish with the registering session, as a crashed broker's do once its
session expires), the controller znode is ephemeral, the rest persistent.

Snapshots are computed on the sandbox loop (a consistent model) and written
from a worker thread, because kazoo calls block; a failed write (quorum lost,
say) marks the mirror for a full resync once ZooKeeper answers again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from dataclasses import dataclass, field

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.retry import KazooRetry

from sandbox.model import Cluster
from sandbox.topology import ChangeLog, Partition

log = logging.getLogger(__name__)


@dataclass
class ZnodeSnapshot:
    """Desired content per path (None = delete) and which paths are ephemeral."""

    data: dict[str, bytes | None] = field(default_factory=dict)
    ephemeral: set[str] = field(default_factory=set)
    full: bool = False


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def broker_registration(c: Cluster, node_id: int) -> bytes:
    b = c.brokers[node_id]
    reg = {
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": [f"PLAINTEXT://{b.host}:{b.port}"],
        "jmx_port": -1, "features": {}, "host": b.host, "port": b.port,
        "timestamp": str(int(c.now * 1000)), "version": 5,
    }
    if b.rack:
        reg["rack"] = b.rack
    return _json(reg)


def partition_state(c: Cluster, p: Partition) -> bytes:
    return _json({"controller_epoch": c.controller_epoch, "leader": p.leader, "version": 1,
                  "leader_epoch": p.leader_epoch, "isr": list(p.isr), "leader_recovery_state": 0})


def topic_assignment(c: Cluster, topic: str) -> bytes:
    t = c.topics[topic]
    return _json({"partitions": {str(p.index): list(p.replicas) for p in t.partitions},
                  "topic_id": str(t.topic_id), "adding_replicas": {}, "removing_replicas": {}, "version": 3})


class ZnodeMirror:
    def __init__(self, connect: str, session_timeout_s: float = 10.0) -> None:
        self.client = KazooClient(hosts=connect, timeout=session_timeout_s,
                                  connection_retry=KazooRetry(max_tries=-1, max_delay=1.0))
        self.client.add_listener(self._on_state)
        self.client.start(timeout=15)
        self.needs_full = False
        self._lock = threading.Lock()

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self.needs_full = True  # ephemerals are gone with the session

    def close(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception:
            log.debug("closing kazoo client failed", exc_info=True)

    def full_snapshot(self, c: Cluster) -> ZnodeSnapshot:
        everything = ChangeLog(partitions={(p.topic, p.index) for p in c.all_partitions()},
                               brokers=set(c.brokers), controller=True)
        snap = self.snapshot_of(c, everything)
        snap.full = True
        snap.data["/cluster/id"] = _json({"version": "1", "id": c.cluster_id})
        for name in c.topics:
            snap.data[f"/brokers/topics/{name}"] = topic_assignment(c, name)
        return snap

    def snapshot_of(self, c: Cluster, changes: ChangeLog) -> ZnodeSnapshot:
        snap = ZnodeSnapshot()
        for node_id in changes.brokers:
            path = f"/brokers/ids/{node_id}"
            snap.data[path] = broker_registration(c, node_id) if c.brokers[node_id].registered else None
            snap.ephemeral.add(path)
        if changes.controller:
            snap.data["/controller_epoch"] = str(c.controller_epoch).encode()
            snap.data["/controller"] = (_json({"version": 2, "brokerid": c.controller_id,
                                               "timestamp": str(int(c.now * 1000))})
                                        if c.controller_id >= 0 else None)
            snap.ephemeral.add("/controller")
        for topic, idx in changes.partitions:
            p = c.topics[topic].partitions[idx]
            snap.data[f"/brokers/topics/{topic}/partitions/{idx}/state"] = partition_state(c, p)
        return snap

    def apply(self, snap: ZnodeSnapshot) -> None:
        """Write a snapshot; on any ZooKeeper failure remember to resync everything later."""
        with self._lock:
            try:
                if snap.full:
                    self.needs_full = False
                for path in sorted(snap.data, key=lambda s: (s.count("/"), s)):
                    self._put(path, snap.data[path], path in snap.ephemeral)
            except KazooException as e:
                log.warning("znode mirror: ZooKeeper write failed (%s); will resync", type(e).__name__)
                self.needs_full = True
            except Exception:
                log.exception("znode mirror: unexpected failure; will resync")
                self.needs_full = True

    def _put(self, path: str, value: bytes | None, ephemeral: bool) -> None:
        zk = self.client
        if value is None:
            with contextlib.suppress(NoNodeError):
                zk.delete(path)
            return
        if zk.exists(path):
            zk.set(path, value)
            return
        try:
            zk.create(path, value, ephemeral=ephemeral, makepath=True)
        except NodeExistsError:
            zk.set(path, value)
