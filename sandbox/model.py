"""A Kafka cluster as a state machine that moves with (simulated) time.

What is modelled, and why each piece is there:

* Brokers crash uncontrolled: the process is gone at once (connection refused),
  but the controller only notices when the session expires
  (`zookeeper.session.timeout.ms`, 18 s, or `broker.session.timeout.ms`, 9 s in
  KRaft). Until then the dead broker stays registered and keeps leadership, as
  in a real cluster; then it is fenced, leaders move to an alive in-sync
  replica and it leaves every ISR. With no such replica the partition goes
  offline (leader -1) keeping the last ISR member, unless the topic allows
  unclean election, in which case an out-of-sync replica takes over and the
  high watermark falls back to its log end (acknowledged data lost).
* Followers fetch at a bounded rate; one that has not caught up to the leader's
  log end for `replica.lag.time.max.ms` leaves the ISR and rejoins once its log
  end reaches the high watermark. High watermark = min log end over the ISR.
* Producers use acks=all: while |ISR| < `min.insync.replicas` their appends are
  rejected (NOT_ENOUGH_REPLICAS), so the log stops growing.
* Retention deletes whole segments: the log is rolled every segment interval
  and a segment is deleted once its newest record is older than `retention.ms`.
* Consumer groups consume up to the high watermark (read_uncommitted) or the
  last stable offset (read_committed), commit every commit interval, and reset
  to the log start when retention overtakes their position (auto.offset.reset).
* Transactional producers go Empty → Ongoing → PrepareCommit → CompleteCommit;
  the coordinator aborts an Ongoing transaction after its timeout and bumps the
  producer epoch; an open transaction holds back the LSO of its partitions.
* KRaft mode keeps a metadata log whose high watermark grows with the no-op
  records a real controller writes every 500 ms; voters on dead brokers stop
  fetching.
* Odd but legal states on demand, for the monitor to be tried on: a broker that flaps (crash/restart on a
  period), a partition offline with every broker up (its replicas' log directories failed), a topic that
  has no partitions yet, a group that consumes but never commits, a transaction state from a newer Kafka.

Offsets are kept as floats internally so fractional rates accumulate; every
value leaving the model is an int.
"""

from __future__ import annotations

import math
import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from sandbox import kafka_defaults as kd
from sandbox.spec import ClusterSpec, GroupSpec, TopicSpec, TxnProducerSpec

CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
FOLLOWER_FETCH_RATE = 20_000.0  # messages/s a healthy follower can copy per partition
SLOW_FOLLOWER_FACTOR = 0.2  # share of the produce rate a slow follower keeps up with
KRAFT_NOOP_INTERVAL_S = 0.5  # metadata.max.idle.interval.ms
REBALANCE_S = 3.0  # time a group spends in PreparingRebalance + CompletingRebalance
TXN_PREPARE_S = 0.2  # PrepareCommit / PrepareAbort → Complete*


@dataclass
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None
    process_up: bool = True  # the JVM is running (listener open)
    registered: bool = True  # the controller sees it (ZK session / KRaft heartbeat alive)
    crashed_at: float | None = None
    response_delay_s: float = 0.0
    slow_fetch: bool = False
    flap: tuple[float, float, float] | None = None  # (since, period, down) while scripted to crash and restart


@dataclass
class ProducerEntry:
    """A partition's view of a producer (what DescribeProducers returns)."""

    producer_id: int
    epoch: int
    last_sequence: int = -1
    last_timestamp_ms: int = -1
    coordinator_epoch: int = 0
    txn_start_offset: int = -1


@dataclass
class Partition:
    topic: str
    index: int
    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0  # bumps on every leader or ISR change (ZK znode "version" analogue)
    isr: list[int] = field(default_factory=list)
    leo: dict[int, float] = field(default_factory=dict)
    caught_up_at: dict[int, float] = field(default_factory=dict)
    hwm: int = 0
    log_start: int = 0
    segments: deque[tuple[float, int]] = field(default_factory=deque)  # (roll time, base offset)
    last_roll: float = 0.0
    producers: dict[int, ProducerEntry] = field(default_factory=dict)
    open_txn_start: dict[int, int] = field(default_factory=dict)  # producer id → first offset
    hanging_producers: set[int] = field(default_factory=set)
    failed_replicas: set[int] = field(default_factory=set)  # replicas whose log directory failed (broker up)

    @property
    def online(self) -> bool:
        return self.leader >= 0

    @property
    def leader_leo(self) -> int:
        return int(self.leo.get(self.leader, self.hwm)) if self.online else self.hwm

    @property
    def lso(self) -> int:
        """Last stable offset: the first offset of the earliest open transaction, else the HW."""
        if self.open_txn_start:
            return min(self.hwm, min(self.open_txn_start.values()))
        return self.hwm


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[Partition]
    configs: dict[str, str]
    produce_rate: float
    internal: bool = False


@dataclass
class Group:
    spec: GroupSpec
    state: str = "Stable"
    members: int = 2
    generation: int = 1
    mode: str = "running"  # running | stalled | stopped
    position: dict[tuple[str, int], float] = field(default_factory=dict)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    last_commit: float = 0.0
    rebalance_until: float = 0.0
    deleted: bool = False
    committing: bool = True  # False: members consume but never commit (enable.auto.commit=false, no commitSync)

    @property
    def group_id(self) -> str:
        return self.spec.group_id


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
    commits: int = 0
    aborts: int = 0
    crash_in_txn: bool = False  # crash at the next write inside a transaction
    reported_state: str | None = None  # what the coordinator reports instead of `state` (a newer Kafka's state)

    @property
    def transactional_id(self) -> str:
        return self.spec.transactional_id


@dataclass
class Voter:
    node_id: int
    leo: float = 0.0
    last_fetch: float = 0.0
    last_caught_up: float = 0.0


@dataclass
class ChangeLog:
    """What changed since the last drain: drives ZooKeeper znode updates and listener state."""

    partitions: set[tuple[str, int]] = field(default_factory=set)
    brokers: set[int] = field(default_factory=set)
    controller: bool = False

    def drain(self) -> ChangeLog:
        out = ChangeLog(set(self.partitions), set(self.brokers), self.controller)
        self.partitions.clear()
        self.brokers.clear()
        self.controller = False
        return out


class Cluster:
    """The simulated cluster. All mutation goes through `advance` and the incident methods."""

    def __init__(self, spec: ClusterSpec, now: float, host: str = "127.0.0.1") -> None:
        self.spec = spec
        self.mode = spec.mode
        self.cluster_id = spec.cluster_id
        self.now = now
        self.start = now
        self.broker_config = dict(spec.broker_config)
        self.brokers: dict[int, Broker] = {}
        for i in range(1, spec.brokers + 1):
            rack = f"rack-{(i - 1) % spec.racks + 1}" if spec.racks else None
            self.brokers[i] = Broker(i, host, 0, rack)
        self.controller_id = 1
        self.controller_epoch = 1
        self.topics: dict[str, Topic] = {}
        self.changes = ChangeLog(brokers=set(self.brokers), controller=True)
        self._next_producer_id = 1000
        n_int = spec.internal_topic_partitions
        rf_int = min(3, spec.brokers)
        self._add_topic(TopicSpec(name=CONSUMER_OFFSETS, partitions=n_int, replication_factor=rf_int,
                                  configs={"cleanup.policy": "compact"}, produce_rate=0), internal=True)
        self._add_topic(TopicSpec(name=TRANSACTION_STATE, partitions=n_int, replication_factor=rf_int,
                                  configs={"cleanup.policy": "compact", "min.insync.replicas": "2"},
                                  produce_rate=0), internal=True)
        for t in spec.topics:
            self._add_topic(t)
        self.groups: dict[str, Group] = {}
        for g in spec.groups:
            self.groups[g.group_id] = self._new_group(g)
        self.txn_producers: dict[str, TxnProducer] = {}
        for p in spec.transactional_producers:
            tp = TxnProducer(p, self._new_producer_id(), timeout_ms=self._txn_timeout(p.timeout_ms))
            tp.next_begin = now
            self.txn_producers[p.transactional_id] = tp
        self.voters: dict[int, Voter] = {}
        self.quorum_leader = self.controller_id
        self.quorum_epoch = 1
        self.metadata_hwm = 0.0
        if self.mode == "kraft":
            for i in sorted(self.brokers)[:3] if len(self.brokers) >= 3 else sorted(self.brokers):
                self.voters[i] = Voter(i, 0.0, now, now)
        self.coordinator_errors: dict[int, int] = {}  # broker → error code answered by its coordinators
        self.events: deque[tuple[int, float, str]] = deque(maxlen=1000)  # (sequence, time, what)
        self.event_seq = 0

    # ----------------------------------------------------------------- set-up helpers
    def _new_producer_id(self) -> int:
        self._next_producer_id += 1
        return self._next_producer_id

    def _txn_timeout(self, requested_ms: int) -> int:
        cap = int(self.broker_setting("transaction.max.timeout.ms"))
        return min(requested_ms, cap)

    def _add_topic(self, t: TopicSpec, internal: bool = False) -> None:
        parts = [self._new_partition(t.name, p, t.replication_factor) for p in range(t.partitions)]
        self.topics[t.name] = Topic(t.name, uuid.uuid5(uuid.NAMESPACE_URL, f"{self.cluster_id}/{t.name}"),
                                    parts, dict(t.configs), t.produce_rate, internal)

    def _new_partition(self, topic: str, p: int, replication_factor: int) -> Partition:
        ids = sorted(self.brokers)
        replicas = [ids[(p + k) % len(ids)] for k in range(replication_factor)]
        part = Partition(topic, p, replicas, replicas[0], isr=list(replicas))
        part.leo = dict.fromkeys(replicas, 0.0)
        part.caught_up_at = dict.fromkeys(replicas, self.now)
        part.segments.append((self.now, 0))
        part.last_roll = self.now
        self.changes.partitions.add((topic, p))
        return part

    def _new_group(self, g: GroupSpec) -> Group:
        grp = Group(g, members=g.members, state="Stable" if g.members else "Empty")
        if not g.members:
            grp.mode = "stopped"
        for t in g.topics:
            for p in self.topics[t].partitions:
                grp.position[(t, p.index)] = 0.0
                grp.committed[(t, p.index)] = 0
        grp.last_commit = self.now
        return grp

    # ----------------------------------------------------------------- configuration
    def broker_setting(self, key: str) -> str:
        if key in self.broker_config:
            return self.broker_config[key]
        return kd.BROKER_DEFAULTS.get(key, ("", kd.TYPE_STRING))[0]

    def topic_config(self, topic: str, key: str) -> tuple[str, int]:
        """Effective value and ConfigSource, resolved as a broker does."""
        overrides = self.topics[topic].configs
        if key in overrides:
            return overrides[key], kd.SOURCE_DYNAMIC_TOPIC
        synonym, default, _ = kd.TOPIC_CONFIGS.get(key, (key, "", kd.TYPE_STRING))
        if synonym in self.broker_config:
            return self.broker_config[synonym], kd.SOURCE_STATIC_BROKER
        return default, kd.SOURCE_DEFAULT

    def min_isr(self, topic: str) -> int:
        return int(self.topic_config(topic, "min.insync.replicas")[0])

    def retention_ms(self, topic: str) -> int:
        return int(self.topic_config(topic, "retention.ms")[0])

    def unclean_allowed(self, topic: str) -> bool:
        return self.topic_config(topic, "unclean.leader.election.enable")[0] == "true"

    def session_timeout_s(self) -> float:
        key = "zookeeper.session.timeout.ms" if self.mode == "zookeeper" else "broker.session.timeout.ms"
        return int(self.broker_setting(key)) / 1000.0

    # ----------------------------------------------------------------- lookups
    def partition(self, topic: str, index: int) -> Partition | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def all_partitions(self) -> Iterable[Partition]:
        for t in self.topics.values():
            yield from t.partitions

    def alive_brokers(self) -> list[int]:
        return [b.node_id for b in self.brokers.values() if b.registered]

    def coordinator_for(self, key: str, key_type: int) -> int:
        """Leader of the internal partition that owns a group (0) or transactional id (1); -1 if none."""
        topic = CONSUMER_OFFSETS if key_type == 0 else TRANSACTION_STATE
        t = self.topics[topic]
        p = t.partitions[kd.coordinator_partition(key, len(t.partitions))]
        if not p.online or not self.brokers[p.leader].process_up:
            return -1
        return p.leader

    def log(self, what: str) -> None:
        self.event_seq += 1
        self.events.append((self.event_seq, self.now, what))

    # ----------------------------------------------------------------- time
    def advance(self, now: float) -> None:
        """Move the cluster to time `now`. Large steps are split so rates and timeouts stay exact."""
        while now - self.now > 1.0:
            self._step(self.now + 1.0)
        if now > self.now:
            self._step(now)

    def _step(self, now: float) -> None:
        dt = now - self.now
        self.now = now
        self._flap()
        self._expire_sessions()
        self._produce(dt)
        self._run_transactions(dt)
        self._replicate(dt)
        self._retain()
        self._consume(dt)
        self._run_quorum(dt)
        self._rebalance_leaders()

    def _flap(self) -> None:
        """Brokers scripted to flap: down for the first `down` seconds of every `period`, up for the rest."""
        for b in self.brokers.values():
            if b.flap is None:
                continue
            since, period, down = b.flap
            phase = (self.now - since) % period
            if phase < down and b.process_up:
                self.crash_broker(b.node_id)
                b.crashed_at = self.now - phase  # the crash happened at the cycle start, between two steps
            elif phase >= down and not b.process_up:
                self.restart_broker(b.node_id)

    def _expire_sessions(self) -> None:
        timeout = self.session_timeout_s()
        for b in self.brokers.values():
            if b.registered and not b.process_up and b.crashed_at is not None \
                    and self.now - b.crashed_at >= timeout:
                self._fence(b.node_id)

    def _fence(self, node_id: int) -> None:
        """The controller declares a broker dead: move leadership, shrink ISRs."""
        b = self.brokers[node_id]
        b.registered = False
        self.changes.brokers.add(node_id)
        self.log(f"broker {node_id} fenced (session expired)")
        if self.controller_id == node_id:
            self._elect_controller()
        for p in self.all_partitions():
            if node_id not in p.replicas:
                continue
            changed = False
            if node_id in p.isr and len(p.isr) > 1:
                p.isr.remove(node_id)
                changed = True
            if p.leader == node_id:
                self._elect_leader(p)
                changed = True
            if changed:
                p.partition_epoch += 1
                self.changes.partitions.add((p.topic, p.index))

    def _elect_controller(self) -> None:
        alive = [i for i in sorted(self.brokers) if self.brokers[i].registered]
        if self.mode == "kraft":
            alive = [i for i in alive if i in self.voters] or alive
        old = self.controller_id
        self.controller_id = alive[0] if alive else -1
        self.controller_epoch += 1
        if self.mode == "kraft":
            self.quorum_leader = self.controller_id
            self.quorum_epoch += 1
        self.changes.controller = True
        self.log(f"controller {old} -> {self.controller_id} (epoch {self.controller_epoch})")

    def _elect_leader(self, p: Partition) -> None:
        candidates = [r for r in p.replicas if r in p.isr and self.brokers[r].registered
                      and r not in p.failed_replicas]
        if candidates:
            p.leader = candidates[0]
            p.leader_epoch += 1
            return
        p.leader = -1
        p.leader_epoch += 1
        if self.unclean_allowed(p.topic):
            out_of_sync = [r for r in p.replicas if self.brokers[r].registered and r not in p.failed_replicas]
            if out_of_sync:
                new = out_of_sync[0]
                lost = p.hwm - int(p.leo[new])
                p.leader = new
                p.isr = [new]
                p.hwm = min(p.hwm, int(p.leo[new]))
                for r in p.replicas:
                    p.leo[r] = min(p.leo[r], p.leo[new])
                self.log(f"unclean election {p.topic}-{p.index}: leader {new}, {max(lost, 0)} messages lost")

    def _produce(self, dt: float) -> None:
        for t in self.topics.values():
            if t.produce_rate <= 0 or not t.partitions:
                continue
            per_partition = t.produce_rate / len(t.partitions) * dt
            min_isr = self.min_isr(t.name)
            for p in t.partitions:
                if self._accepts_acks_all(p, min_isr):
                    p.leo[p.leader] += per_partition

    def _leader_up(self, p: Partition) -> bool:
        return p.online and self.brokers[p.leader].process_up

    def _accepts_acks_all(self, p: Partition, min_isr: int) -> bool:
        return p.online and self.brokers[p.leader].process_up and len(p.isr) >= min_isr

    def _replicate(self, dt: float) -> None:
        lag_max = int(self.broker_setting("replica.lag.time.max.ms")) / 1000.0
        shrinks: dict[int, list[str]] = {}
        expands: dict[int, list[str]] = {}
        for t in self.topics.values():
            for p in t.partitions:
                if not p.online:
                    continue
                leader_up = self.brokers[p.leader].process_up
                target = p.leo[p.leader]
                changed = False
                for r in p.replicas:
                    if r == p.leader:
                        p.caught_up_at[r] = self.now
                        continue
                    b = self.brokers[r]
                    if b.process_up and leader_up:
                        rate = (t.produce_rate / max(len(t.partitions), 1) * SLOW_FOLLOWER_FACTOR
                                if b.slow_fetch else FOLLOWER_FETCH_RATE)
                        p.leo[r] = min(target, p.leo[r] + rate * dt)
                        if p.leo[r] >= target:
                            p.caught_up_at[r] = self.now
                    in_isr = r in p.isr
                    if in_isr and b.registered and self.now - p.caught_up_at[r] > lag_max and leader_up:
                        p.isr.remove(r)
                        changed = True
                        shrinks.setdefault(r, []).append(f"{p.topic}-{p.index}")
                    elif not in_isr and b.registered and b.process_up and leader_up \
                            and p.leo[r] >= p.hwm and p.leo[r] >= target:
                        p.isr.append(r)
                        p.isr.sort(key=p.replicas.index)
                        changed = True
                        expands.setdefault(r, []).append(f"{p.topic}-{p.index}")
                if leader_up:
                    p.hwm = max(p.hwm, int(min(p.leo[r] for r in p.isr)))
                if changed:
                    p.partition_epoch += 1
                    self.changes.partitions.add((p.topic, p.index))
        for what, per_broker in (("left", shrinks), ("rejoined", expands)):
            for broker, parts in sorted(per_broker.items()):
                sample = ", ".join(parts[:3]) + (f" and {len(parts) - 3} more" if len(parts) > 3 else "")
                self.log(f"broker {broker} {what} the ISR of {len(parts)} partitions ({sample})")

    def _retain(self) -> None:
        for t in self.topics.values():
            if t.internal:
                continue
            retention = self.retention_ms(t.name) / 1000.0
            roll_every = max(1.0, min(int(self.topic_config(t.name, "segment.ms")[0]) / 1000.0,
                                      retention / 10.0))
            for p in t.partitions:
                if self.now - p.last_roll >= roll_every:
                    p.segments.append((self.now, p.leader_leo))
                    p.last_roll = self.now
                # A segment (base, next base) may go once its newest record (the next roll) is old.
                while len(p.segments) >= 2 and p.segments[1][0] <= self.now - retention:
                    p.segments.popleft()
                new_start = min(p.segments[0][1], p.hwm)
                if new_start > p.log_start:
                    p.log_start = new_start

    def _readable(self, p: Partition, isolation: str) -> int:
        return p.lso if isolation == "read_committed" else p.hwm

    def _consume(self, dt: float) -> None:
        for g in self.groups.values():
            if g.deleted:
                continue
            if g.state in ("PreparingRebalance", "CompletingRebalance"):
                if self.now >= g.rebalance_until:
                    g.state = "Stable" if g.members else "Empty"
                elif self.now >= g.rebalance_until - REBALANCE_S / 2:
                    g.state = "CompletingRebalance"
                continue
            if g.mode != "running":
                if g.mode == "stalled" and self.now - g.last_commit >= g.spec.commit_interval_s:
                    g.last_commit = self.now  # commits keep coming, offsets do not move
                continue
            for (topic, idx), pos in g.position.items():
                p = self.topics[topic].partitions[idx]
                if not self._leader_up(p):
                    continue  # nothing can be fetched from a partition without a live leader
                t = self.topics[topic]
                rate = g.spec.consume_rate
                if rate is None:
                    rate = 3.0 * t.produce_rate / max(len(t.partitions), 1) + 1.0
                limit = self._readable(p, g.spec.isolation_level)
                if pos < p.log_start:
                    pos = float(p.log_start)  # auto.offset.reset=earliest after retention overtook us
                g.position[(topic, idx)] = min(float(limit), pos + rate * dt) if limit > pos else pos
            if g.committing and self.now - g.last_commit >= g.spec.commit_interval_s:
                for key, pos in g.position.items():
                    g.committed[key] = int(pos)
                g.last_commit = self.now

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
                tp.epoch += 1  # the coordinator fences the (possibly zombie) producer
                self._set_txn_state(tp, "PrepareAbort")
                return
            if tp.alive:
                if any(not self._leader_up(self.topics[t].partitions[i]) for t, i in tp.partitions):
                    self.log(f"transaction {tp.transactional_id}: a partition went offline; producer aborts")
                    self._set_txn_state(tp, "PrepareAbort")
                    return
                if now - tp.txn_start >= tp.spec.transaction_duration_s:
                    self._set_txn_state(tp, "PrepareCommit")
                    return
                parts = [p for p in self._txn_partitions(tp) if self._accepts_acks_all(p, self.min_isr(p.topic))]
                if parts and tp.spec.rate > 0:
                    per = tp.spec.rate * dt / len(parts)
                    for p in parts:
                        key = (p.topic, p.index)
                        if tp.producer_id not in p.open_txn_start:
                            p.open_txn_start[tp.producer_id] = p.leader_leo
                            tp.partitions.add(key)
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
                    self._set_txn_state(tp, "CompleteAbort")
                tp.next_begin = now + tp.spec.pause_between_s
            return
        if tp.alive and now >= tp.next_begin:
            tp.txn_start = now
            tp.partitions = set()
            self._set_txn_state(tp, "Ongoing")

    def _set_txn_state(self, tp: TxnProducer, state: str) -> None:
        tp.state = state
        tp.state_since = self.now

    def _write_markers(self, tp: TxnProducer) -> None:
        """Commit/abort markers take one offset each and release the LSO."""
        for topic, idx in tp.partitions:
            p = self.topics[topic].partitions[idx]
            if tp.producer_id in p.open_txn_start:
                del p.open_txn_start[tp.producer_id]
                if p.online:
                    p.leo[p.leader] += 1
                entry = p.producers.get(tp.producer_id)
                if entry:
                    entry.txn_start_offset = -1
                    entry.epoch = tp.epoch
        tp.partitions = set()

    def _run_quorum(self, dt: float) -> None:
        if self.mode != "kraft" or not self.voters:
            return
        leader = self.voters.get(self.quorum_leader)
        if leader is None or not self.brokers[leader.node_id].process_up:
            return
        leader.leo += dt / KRAFT_NOOP_INTERVAL_S
        leader.last_fetch = leader.last_caught_up = self.now
        for v in self.voters.values():
            if v is leader or not self.brokers[v.node_id].process_up:
                continue
            v.leo = leader.leo
            v.last_fetch = v.last_caught_up = self.now
        up = sorted((v.leo for v in self.voters.values()), reverse=True)
        majority = len(self.voters) // 2 + 1
        self.metadata_hwm = max(self.metadata_hwm, up[majority - 1])

    def _rebalance_leaders(self) -> None:
        """auto.leader.rebalance.enable: move leadership back to the preferred replica periodically."""
        if self.broker_setting("auto.leader.rebalance.enable") != "true":
            return
        interval = int(self.broker_setting("leader.imbalance.check.interval.seconds"))
        last = getattr(self, "_last_rebalance", self.start)
        if self.now - last < interval:
            return
        self._last_rebalance = self.now
        self.elect_preferred_leaders()

    def elect_preferred_leaders(self) -> None:
        """Move leadership back to the first replica wherever it is in sync (kafka-leader-election)."""
        for p in self.all_partitions():
            pref = p.replicas[0]
            if p.online and p.leader != pref and pref in p.isr and self.brokers[pref].registered:
                p.leader = pref
                p.leader_epoch += 1
                p.partition_epoch += 1
                self.changes.partitions.add((p.topic, p.index))

    # ----------------------------------------------------------------- incidents
    def crash_broker(self, node_id: int) -> None:
        b = self.brokers[node_id]
        if not b.process_up:
            return
        b.process_up = False
        b.crashed_at = self.now
        self.changes.brokers.add(node_id)
        self.log(f"broker {node_id} crashed")

    def restart_broker(self, node_id: int) -> None:
        b = self.brokers[node_id]
        if b.process_up:
            return
        b.process_up = True
        b.crashed_at = None
        was_registered = b.registered
        b.registered = True
        self.changes.brokers.add(node_id)
        self.log(f"broker {node_id} restarted")
        if self.controller_id < 0:
            self._elect_controller()
        for p in self.all_partitions():
            if node_id not in p.replicas:
                continue
            if not was_registered and p.leader == -1 and node_id in p.isr and node_id not in p.failed_replicas:
                p.leader = node_id  # the last in-sync replica is back: the partition comes online
                p.leader_epoch += 1
                p.partition_epoch += 1
                self.changes.partitions.add((p.topic, p.index))
            p.caught_up_at[node_id] = self.now

    def start_flapping(self, node_id: int, period_s: float, down_s: float | None = None) -> None:
        """Crash the broker now and every `period_s`; it restarts `down_s` (default half a period) after each."""
        down = period_s / 2 if down_s is None else down_s
        if not 0 < down < period_s:
            raise ValueError(f"down_s must be in (0, {period_s}), got {down}")
        self.brokers[node_id].flap = (self.now, period_s, down)
        self.log(f"broker {node_id} flapping: down {down:g}s every {period_s:g}s")
        self._flap()

    def stop_flapping(self, node_id: int) -> None:
        """End the flapping; the broker is restarted if it is down at that moment."""
        b = self.brokers[node_id]
        if b.flap is None:
            return
        b.flap = None
        self.restart_broker(node_id)
        self.log(f"broker {node_id} stopped flapping")

    def set_broker_delay(self, node_id: int, delay_s: float) -> None:
        self.brokers[node_id].response_delay_s = delay_s

    def set_slow_follower(self, node_id: int, slow: bool) -> None:
        self.brokers[node_id].slow_fetch = slow

    def controller_failover(self) -> None:
        alive = [i for i in sorted(self.brokers) if self.brokers[i].registered and i != self.controller_id]
        if self.mode == "kraft":
            alive = [i for i in alive if i in self.voters] or alive
        if not alive:
            return
        old = self.controller_id
        self.controller_id = alive[0]
        self.controller_epoch += 1
        if self.mode == "kraft":
            self.quorum_leader = self.controller_id
            self.quorum_epoch += 1
        self.changes.controller = True
        self.log(f"controller failover {old} -> {self.controller_id}")

    def set_group_mode(self, group_id: str, mode: str) -> None:
        g = self.groups[group_id]
        if g.mode == mode:
            return
        old_members = g.members
        g.mode = mode
        if mode == "stopped":
            g.members = 0
        elif old_members == 0:
            g.members = g.spec.members
        if g.members != old_members:
            g.generation += 1
            g.state = "PreparingRebalance"
            g.rebalance_until = self.now + (REBALANCE_S if g.members else 0.5)
        self.log(f"group {group_id} {mode}")

    def rewind_group(self, group_id: str, messages: int) -> None:
        g = self.groups[group_id]
        for key in g.position:
            topic, idx = key
            p = self.topics[topic].partitions[idx]
            g.position[key] = max(float(p.log_start), g.position[key] - messages)
            g.committed[key] = int(g.position[key])
        g.last_commit = self.now
        self.log(f"group {group_id} rewound by {messages}")

    def delete_group(self, group_id: str) -> None:
        self.groups[group_id].deleted = True

    def set_group_committing(self, group_id: str, committing: bool) -> None:
        """Stop a group committing and forget its offsets (it never committed), or let it commit again."""
        g = self.groups[group_id]
        g.committing = committing
        if not committing:
            g.committed.clear()

    def fail_partition(self, topic: str, index: int | None = None) -> None:
        """Every replica of the partition (None: of the topic) loses its log directory; brokers stay up.

        As Kafka's controller does, the partition keeps its last leader as sole ISR member and goes offline.
        """
        for p in self.topics[topic].partitions if index is None else [self.topics[topic].partitions[index]]:
            p.failed_replicas = set(p.replicas)
            if p.online:
                p.isr = [p.leader]
                p.leader = -1
                p.leader_epoch += 1
                p.partition_epoch += 1
                self.changes.partitions.add((p.topic, p.index))
            self.log(f"{p.topic}-{p.index} offline: every replica's log directory failed")

    def recover_partition(self, topic: str, index: int | None = None) -> None:
        """Undo `fail_partition`: the last ISR member leads again; the others rejoin once caught up."""
        for p in self.topics[topic].partitions if index is None else [self.topics[topic].partitions[index]]:
            p.failed_replicas = set()
            if not p.online:
                self._elect_leader(p)
                p.partition_epoch += 1
                self.changes.partitions.add((p.topic, p.index))
            self.log(f"{p.topic}-{p.index} log directories back")

    def add_partitions(self, topic: str, count: int, replication_factor: int) -> None:
        """Add `count` partitions to a topic: a creation that completes, or `kafka-topics --alter --partitions`."""
        t = self.topics[topic]
        for _ in range(count):
            t.partitions.append(self._new_partition(topic, len(t.partitions), replication_factor))
            for g in self.groups.values():
                if topic in g.spec.topics:
                    g.position[(topic, len(t.partitions) - 1)] = 0.0

    def report_txn_state(self, transactional_id: str, state: str | None) -> None:
        """Make the coordinator report `state` (e.g. one only a newer Kafka knows) for the id; None undoes it."""
        self.txn_producers[transactional_id].reported_state = state

    def set_topic_config(self, topic: str, key: str, value: str | None) -> None:
        if value is None:
            self.topics[topic].configs.pop(key, None)
        else:
            self.topics[topic].configs[key] = value

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
            self._set_txn_state(tp, "PrepareEpochFence")
        tp.epoch += 1
        tp.next_begin = self.now + tp.spec.pause_between_s
        self.log(f"producer {transactional_id} restarted with epoch {tp.epoch}")

    def inject_hanging_transaction(self, topic: str, index: int) -> int:
        """An open transaction on the partition that no coordinator tracks (e.g. a lost marker)."""
        p = self.topics[topic].partitions[index]
        pid = self._new_producer_id()
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
        for pid in list(p.hanging_producers):
            p.open_txn_start.pop(pid, None)
            if pid in p.producers:
                p.producers[pid].txn_start_offset = -1
            if p.online:
                p.leo[p.leader] += 1
        p.hanging_producers.clear()


def round_offset(x: float) -> int:
    return math.floor(x)
