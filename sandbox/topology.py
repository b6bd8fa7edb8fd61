"""What the simulated cluster is made of: brokers, topics, partitions, and how settings resolve.

Every other part of the model (replication, partition logs, consumer groups,
transactions, the controller) reads and moves these same records, so they and
the questions all parts ask of them (is this leader up? who coordinates this
group? what is this topic's retention?) live here, below all of them. The
parts are combined into one `sandbox.model.Cluster`; `Topology` is its base.

Offsets are kept as floats internally so fractional rates accumulate; every
value leaving the model is an int.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from sandbox import kafka_defaults as kd
from sandbox.spec import ClusterSpec, TopicSpec

CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"


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


class Topology:
    """Brokers and topics of one cluster, its clock, its change and event logs, and setting resolution."""

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
        self.topics: dict[str, Topic] = {}
        self.changes = ChangeLog(brokers=set(self.brokers), controller=True)
        n_int = spec.internal_topic_partitions
        rf_int = min(3, spec.brokers)
        self._add_topic(TopicSpec(name=CONSUMER_OFFSETS, partitions=n_int, replication_factor=rf_int,
                                  configs={"cleanup.policy": "compact"}, produce_rate=0), internal=True)
        self._add_topic(TopicSpec(name=TRANSACTION_STATE, partitions=n_int, replication_factor=rf_int,
                                  configs={"cleanup.policy": "compact", "min.insync.replicas": "2"},
                                  produce_rate=0), internal=True)
        for t in spec.topics:
            self._add_topic(t)
        self.coordinator_errors: dict[int, int] = {}  # broker → error code answered by its coordinators
        self.events: deque[tuple[int, float, str]] = deque(maxlen=1000)  # (sequence, time, what)
        self.event_seq = 0

    # ----------------------------------------------------------------- set-up helpers
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

    def _leader_up(self, p: Partition) -> bool:
        """A leader is elected and its process runs: reads and transaction markers can be served."""
        return p.online and self.brokers[p.leader].process_up

    def _accepts_acks_all(self, p: Partition, min_isr: int) -> bool:
        """An acks=all write succeeds: a live leader and at least `min.insync.replicas` in sync."""
        return p.online and self.brokers[p.leader].process_up and len(p.isr) >= min_isr

    def log(self, what: str) -> None:
        self.event_seq += 1
        self.events.append((self.event_seq, self.now, what))
