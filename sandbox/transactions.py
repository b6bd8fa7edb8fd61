"""Transactional producers and their coordinator.

Transactional producers go Empty → Ongoing → PrepareCommit → CompleteCommit;
the coordinator aborts an Ongoing transaction after its timeout and bumps the
producer epoch; an open transaction holds back the LSO of its partitions.
With Transaction V2 (`ClusterSpec.transaction_version` 2, KIP-890 part 2) the
coordinator also bumps the epoch at every other transaction end: the producer's
commit and its own abort (once each, when the transaction goes to Prepare*),
for a client that speaks it: an older one (`TxnProducerSpec.transaction_v2`
false) keeps one epoch for all its transactions there too.
Commit and abort markers are written only while every partition of the
transaction has a live leader, so an offline partition leaves it lingering.
On demand: a producer that dies inside a transaction, a hanging transaction no
coordinator tracks (a lost marker), a state only a newer Kafka reports.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from collectors.model.vocabulary import TRANSACTION_V2
from sandbox.spec import TxnProducerSpec
from sandbox.topology import Partition, ProducerEntry, Topology

TXN_PREPARE_S = 0.2  # PrepareCommit / PrepareAbort → Complete*
# A producer epoch is an int16. From Short.MaxValue - 1 on it is exhausted (TransactionMetadata's
# isProducerEpochExhausted): a Transaction V2 end then moves the producer to a new producer id at epoch 0 (KAFKA-18660).
EPOCH_EXHAUSTED = 32_766
MAX_EPOCH = 32_767


@dataclass
class TxnProducer:
    spec: TxnProducerSpec
    producer_id: int
    epoch: int = 0
    state: str = "Empty"
    alive: bool = True
    txn_start: float = 0.0
    state_since: float = 0.0
    partitions: set[tuple[str, int]] = field(default_factory=set)
    next_begin: float = 0.0
    timeout_ms: int = 60_000
    commits: int = 0  # transactions committed (markers written)
    aborts: int = 0  # transactions aborted (markers written), for any of the three reasons below
    own_aborts: int = 0  # of those, the producer's own aborts (EndTxn(abort), e.g. a partition went offline)
    timeout_aborts: int = 0  # the coordinator's, after transaction.timeout.ms
    fenced_aborts: int = 0  # the coordinator's, of what a producer left open when a new instance fenced it
    abort_reason: str = ""  # "own", "timeout" or "fenced" while an abort is under way
    next_producer_id: int = -1  # Transaction V2: the producer id the producer moves to at this end (epoch exhausted)
    crash_in_txn: bool = False  # crash at the next write inside a transaction
    reported_state: str | None = None  # what the coordinator reports instead of `state` (a newer Kafka's state)

    @property
    def transactional_id(self) -> str:
        return self.spec.transactional_id


class Transactions(Topology):
    """The transaction coordinator's view of every transactional producer, and the partitions' open transactions."""

    txn_producers: dict[str, TxnProducer]
    _next_producer_id: int

    def _init_transactions(self, specs: Iterable[TxnProducerSpec], now: float) -> None:
        self._next_producer_id = 1000
        self.txn_producers = {}
        for p in specs:
            tp = TxnProducer(p, self._new_producer_id(), timeout_ms=self._txn_timeout(p.timeout_ms))
            tp.next_begin = now
            self.txn_producers[p.transactional_id] = tp

    def _new_producer_id(self) -> int:
        self._next_producer_id += 1
        return self._next_producer_id

    def _txn_timeout(self, requested_ms: int) -> int:
        cap = int(self.broker_setting("transaction.max.timeout.ms"))
        return min(requested_ms, cap)

    # ----------------------------------------------------------------- time
    def _run_transactions(self, dt: float) -> None:
        for tp in self.txn_producers.values():
            self._txn_step(tp, dt)

    def _txn_partitions(self, tp: TxnProducer) -> list[Partition]:
        out = []
        for t in tp.spec.topics:
            out.extend(self.topics[t].partitions)
        return out

    def _txn_step(self, tp: TxnProducer, dt: float) -> None:
        now = self.now
        if tp.state == "Ongoing":
            if now - tp.txn_start >= tp.timeout_ms / 1000.0:
                self.log(f"transaction {tp.transactional_id} timed out; coordinator aborts")
                # The coordinator fences the (possibly zombie) producer: one bump, under Transaction V2 too (the
                # V2 end bump is skipped after a fence, KAFKA-19367; Kafka 4.0.0 bumped twice here).
                tp.epoch += 1
                tp.abort_reason = "timeout"
                self._set_txn_state(tp, "PrepareAbort")
                return
            if tp.alive:
                if any(not self._leader_up(self.topics[t].partitions[i]) for t, i in tp.partitions):
                    self.log(f"transaction {tp.transactional_id}: a partition went offline; producer aborts")
                    tp.abort_reason = "own"
                    self._end_transaction(tp, "PrepareAbort")
                    return
                if now - tp.txn_start >= tp.spec.transaction_duration_s:
                    self._end_transaction(tp, "PrepareCommit")
                    return
                parts = [p for p in self._txn_partitions(tp) if self._accepts_acks_all(p, self.min_isr(p.topic))]
                if parts and tp.spec.rate > 0:
                    per = tp.spec.rate * dt / len(parts)
                    for p in parts:
                        key = (p.topic, p.index)
                        if tp.producer_id not in p.open_txn_start:
                            p.open_txn_start[tp.producer_id] = p.leader_leo
                            tp.partitions.add(key)
                            self._touch(p.topic)
                        self._wake(p)
                        p.leo[p.leader] += per
                        entry = p.producers.setdefault(tp.producer_id, ProducerEntry(tp.producer_id, tp.epoch))
                        entry.epoch = tp.epoch
                        entry.last_sequence += max(1, int(per))
                        entry.last_timestamp_ms = int(now * 1000)
                        entry.txn_start_offset = p.open_txn_start[tp.producer_id]
                    if tp.crash_in_txn:
                        self.crash_producer(tp.transactional_id)
            return
        if tp.state in ("PrepareCommit", "PrepareAbort", "PrepareEpochFence"):
            # Markers go to every partition of the transaction: the coordinator retries until each
            # partition has a leader again, so an offline partition leaves the transaction lingering.
            markers_writable = all(self._leader_up(self.topics[t].partitions[i]) for t, i in tp.partitions)
            if markers_writable and now - tp.state_since >= TXN_PREPARE_S:
                self._write_markers(tp)
                if tp.state == "PrepareCommit":
                    tp.commits += 1
                    self._set_txn_state(tp, "CompleteCommit")
                else:
                    tp.aborts += 1
                    reason = tp.abort_reason or ("fenced" if tp.state == "PrepareEpochFence" else "own")
                    if reason == "timeout":
                        tp.timeout_aborts += 1
                    elif reason == "fenced":
                        tp.fenced_aborts += 1
                    else:
                        tp.own_aborts += 1
                    tp.abort_reason = ""
                    self._set_txn_state(tp, "CompleteAbort")
                if tp.next_producer_id >= 0:  # the markers went out under the old id; the producer goes on with the new
                    self.log(f"producer {tp.transactional_id}: epoch {tp.epoch} exhausted, new producer id "
                             f"{tp.next_producer_id} at epoch 0")
                    tp.producer_id, tp.epoch, tp.next_producer_id = tp.next_producer_id, 0, -1
                tp.next_begin = now + tp.spec.pause_between_s
            return
        if tp.alive and now >= tp.next_begin:
            tp.txn_start = now
            tp.partitions = set()
            self._set_txn_state(tp, "Ongoing")

    def _set_txn_state(self, tp: TxnProducer, state: str) -> None:
        tp.state = state
        tp.state_since = self.now

    @property
    def epoch_bump_per_transaction(self) -> bool:
        """Transaction V2 (KIP-890 part 2): the coordinator bumps the producer epoch at every transaction end."""
        return self.spec.transaction_version >= TRANSACTION_V2

    def _end_transaction(self, tp: TxnProducer, prepare: str) -> None:
        """The producer's EndTxn (commit or its own abort): under Transaction V2 the coordinator bumps the epoch
        once, as it writes Prepare* (the markers and the EndTxn answer carry the new epoch); before, or for a
        client older than Kafka 4 (`TxnProducerSpec.transaction_v2` false), it keeps it."""
        if self.epoch_bump_per_transaction and tp.spec.transaction_v2:
            if tp.epoch >= EPOCH_EXHAUSTED:
                tp.next_producer_id = self._new_producer_id()
            tp.epoch = min(tp.epoch + 1, MAX_EPOCH)
        self._set_txn_state(tp, prepare)

    def _write_markers(self, tp: TxnProducer) -> None:
        """Commit/abort markers take one offset each and release the LSO."""
        for topic, idx in tp.partitions:
            p = self.topics[topic].partitions[idx]
            if tp.producer_id in p.open_txn_start:
                del p.open_txn_start[tp.producer_id]
                self._wake(p)
                self._touch(topic)
                if p.online:
                    p.leo[p.leader] += 1
                entry = p.producers.get(tp.producer_id)
                if entry:
                    entry.txn_start_offset = -1
                    entry.epoch = tp.epoch
        tp.partitions = set()

    # ----------------------------------------------------------------- incidents
    def report_txn_state(self, transactional_id: str, state: str | None) -> None:
        """Make the coordinator report `state` (e.g. one only a newer Kafka knows) for the id; None undoes it."""
        self.txn_producers[transactional_id].reported_state = state

    def crash_producer(self, transactional_id: str, inside_transaction: bool = False) -> None:
        """Kill the producer process; with `inside_transaction`, at its next write inside a transaction."""
        tp = self.txn_producers[transactional_id]
        if inside_transaction and tp.state != "Ongoing":
            tp.crash_in_txn = True
            return
        tp.alive = False
        tp.crash_in_txn = False
        self.log(f"producer {transactional_id} crashed in state {tp.state}")

    def restart_producer(self, transactional_id: str) -> None:
        """InitProducerId from a new instance: fence the old epoch, abort what it left open."""
        tp = self.txn_producers[transactional_id]
        tp.alive = True
        if tp.state == "Ongoing":
            tp.abort_reason = "fenced"
            self._set_txn_state(tp, "PrepareEpochFence")
        tp.epoch += 1  # one bump, under Transaction V2 too (no second bump for the fenced abort, KAFKA-19367)
        tp.next_begin = self.now + tp.spec.pause_between_s
        self.log(f"producer {transactional_id} restarted with epoch {tp.epoch}")

    def inject_hanging_transaction(self, topic: str, index: int) -> int:
        """An open transaction on the partition that no coordinator tracks (e.g. a lost marker)."""
        p = self.topics[topic].partitions[index]
        pid = self._new_producer_id()
        self._wake(p)
        self._touch(topic)
        p.open_txn_start[pid] = p.leader_leo
        p.hanging_producers.add(pid)
        p.producers[pid] = ProducerEntry(pid, 0, 0, int(self.now * 1000), 0, p.leader_leo)
        if p.online:
            p.leo[p.leader] += 1
        self.log(f"hanging transaction injected on {topic}-{index} (producer {pid})")
        return pid

    def abort_hanging_transactions(self, topic: str, index: int) -> None:
        """What `kafka-transactions abort` does for a hanging transaction."""
        p = self.topics[topic].partitions[index]
        self._wake(p)
        self._touch(topic)
        for pid in list(p.hanging_producers):
            p.open_txn_start.pop(pid, None)
            if pid in p.producers:
                p.producers[pid].txn_start_offset = -1
            if p.online:
                p.leo[p.leader] += 1
        p.hanging_producers.clear()
