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

import json
import logging
import threading
from dataclasses import dataclass, field

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.interfaces import IAsyncResult
from kazoo.retry import KazooRetry

from sandbox.model import Cluster
from sandbox.topology import ChangeLog, Partition

log = logging.getLogger(__name__)
TXN_MAX_OPS = 1000  # operations per multi-op transaction
TXN_MAX_BYTES = 512 * 1024  # and bytes, well under ZooKeeper's 1 MB jute.maxbuffer


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
        # Persistent znodes this mirror wrote, so they exist (if one was deleted behind our back, setting it fails
        # its transaction and it is written again one by one).
        self._present: set[str] = set()

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
        for topic in changes.topics:
            snap.data[f"/brokers/topics/{topic}"] = topic_assignment(c, topic)
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
                self._write(snap)
            except KazooException as e:
                log.warning("znode mirror: ZooKeeper write failed (%s); will resync", type(e).__name__)
                self.needs_full = True
            except Exception:
                log.exception("znode mirror: unexpected failure; will resync")
                self.needs_full = True

    def _write(self, snap: ZnodeSnapshot) -> None:
        """The few ephemeral znodes first, one by one; then persistent znodes in multi-op transactions, and
        deletions one by one.

        Ephemeral first because that is Kafka's order: a crashed broker's registration vanishes when its
        session expires, and only then does the controller, watching ``/brokers/ids``, rewrite the partition
        states it led; a restarted broker registers before the controller adds it back to an ISR; a new
        controller's znode comes before its first state change. A reader of ZooKeeper never sees a shrunk
        ISR beside the registration of the broker it lost.

        A 20,000-partition cluster has 60,000 znodes and a broker outage rewrites thousands of partition
        states; one request each would take minutes (kazoo spends ~0.3 ms of Python per request), a
        transaction of a thousand costs about as much as ten. Znodes this mirror wrote before are set;
        the others are created, parents first. A transaction that fails (someone else created or deleted
        a znode) is redone one znode at a time, which tolerates both.
        """
        ephemeral = {path: v for path, v in snap.data.items() if path in snap.ephemeral}
        if ephemeral:
            self._one_by_one(ephemeral, snap.ephemeral)  # parents included (/brokers/ids): present from now on
            self._present.update(a for path, v in ephemeral.items() if v is not None for a in _ancestors(path))
        puts = {path: v for path, v in snap.data.items() if v is not None}
        bulk = {path: v for path, v in puts.items() if path not in snap.ephemeral}
        redo = self._transactions([("set", path, bulk[path]) for path in bulk if path in self._present])
        levels: dict[int, dict[str, bytes]] = {}
        for path in bulk:
            if path in self._present:
                continue
            parts = path.split("/")
            for depth in range(2, len(parts) + 1):
                node = "/".join(parts[:depth])
                if node not in self._present:
                    levels.setdefault(depth, {})[node] = bulk.get(node, b"")
        for depth in sorted(levels):
            redo += self._transactions([("create", node, v) for node, v in sorted(levels[depth].items())])
        single = {path: v for path, v in snap.data.items() if path not in snap.ephemeral and v is None}
        single.update((path, bulk[path]) for path in redo if path in bulk)  # a parent: made with its children
        self._one_by_one(single, snap.ephemeral)
        self._present.update(bulk)
        self._present.update(node for nodes in levels.values() for node in nodes)

    def _transactions(self, ops: list[tuple[str, str, bytes]]) -> list[str]:
        """Commit ("set" | "create", path, value) operations in transactions; the paths of failed ones."""
        failed: list[str] = []
        start = 0
        while start < len(ops):
            end, size = start, 0
            while end < len(ops) and end - start < TXN_MAX_OPS and (end == start or size < TXN_MAX_BYTES):
                size += len(ops[end][2]) + len(ops[end][1]) + 32
                end += 1
            txn = self.client.transaction()
            for kind, path, value in ops[start:end]:
                (txn.set_data if kind == "set" else txn.create)(path, value)
            results = txn.commit()
            if any(isinstance(r, Exception) for r in results):
                failed.extend(path for _, path, _ in ops[start:end])
            start = end
        return failed

    def _one_by_one(self, data: dict[str, bytes | None], ephemeral: set[str]) -> None:
        """Create-or-set (None: delete) each znode, all requests in flight at once: set first, then create
        what was missing, level by level (makepath in bulk)."""
        zk = self.client
        puts = {path: v for path, v in data.items() if v is not None}
        sets = [(path, zk.set_async(path, v)) for path, v in puts.items()]
        deletes = [zk.delete_async(path) for path, v in data.items() if v is None]
        missing = [path for path, r in sets if _outcome(r, NoNodeError)]
        for r in deletes:
            _outcome(r, NoNodeError)
        levels: dict[int, set[str]] = {}
        for path in missing:
            parts = path.split("/")
            for depth in range(2, len(parts) + 1):
                levels.setdefault(depth, set()).add("/".join(parts[:depth]))
        for depth in sorted(levels):
            creates = [(path, zk.create_async(path, puts.get(path, b""), ephemeral=path in ephemeral))
                       for path in sorted(levels[depth])]
            raced = [path for path, r in creates if _outcome(r, NodeExistsError) and path in puts]
            for r in [zk.set_async(path, puts[path]) for path in raced]:
                r.get()


def _ancestors(path: str) -> list[str]:
    """"/a/b/c" -> ["/a", "/a/b"]."""
    parts = path.split("/")
    return ["/".join(parts[:depth]) for depth in range(2, len(parts))]


def _outcome(result: IAsyncResult, tolerated: type[Exception]) -> bool:
    """Wait for one async call; True if it failed with `tolerated` (other failures raise)."""
    try:
        result.get()
    except tolerated:
        return True
    return False
