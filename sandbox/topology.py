"""What the simulated cluster is made of: brokers, topics, partitions, and how settings resolve.

Every other part of the model (replication, partition logs, consumer groups,
transactions, the controller) reads and moves these same records, so they and
the questions all parts ask of them (is this leader up? who coordinates this
group? what is this topic's retention?) live here, below all of them. The
parts are combined into one `sandbox.model.Cluster`; `Topology` is its base.

Offsets are kept as floats internally so fractional rates accumulate; every
value leaving the model is an int.

Big clusters (tens of thousands of partitions) are mostly idle, so the parts
keep idle partitions off their per-step paths: a partition whose state can
only change through an event is *settled* until one of those events wakes it
(`Topology._wake`), and a topic whose readable range did not move is not
re-read by retention or the groups (`Topology._touch`). Both are exact: a
step that skips something leaves it as the full step would have.
"""

from __future__ import annotations

import math
import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sandbox import kafka_defaults as kd
from sandbox.spec import ClusterSpec, GeneratedTopicsSpec, TopicSpec

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
    # While its metadata cache lags (`lag_metadata`): the Metadata answer it keeps giving, the cluster as it was
    metadata_view: dict[str, Any] | None = None
    metadata_view_since: float | None = None  # when it began
    # and in KRaft where its fetch of the metadata log stopped: (log end offset, time), as DescribeQuorum answers it
    metadata_stopped: tuple[float, float] | None = None


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
    stalled: bool = False  # its followers stop fetching it (the acks1_leader_loss / unclean_election incidents)
    # After a clean leader change, the new leader's high watermark lags until its followers fetch again
    # (KIP-207): (until, what it reads meanwhile); None when it reads the true high watermark.
    hw_dip: tuple[float, int] | None = None
    # Settled (see Replication._replicate): replicas whose caught_up_at stands for "the last replication step";
    # None while replication looks at the partition every step.
    quiet: tuple[int, ...] | None = None
    # The leader epoch cache (KIP-101): (epoch, first offset the leader of that epoch wrote), oldest first. A
    # new leader's entry starts at its own log end, so an old epoch ends where the new leader's copy of it ends
    # (OffsetForLeaderEpoch answers from this).
    epoch_starts: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])

    def bump_epoch(self) -> None:
        """A new leader epoch (call after setting `leader`): recorded in the epoch cache when there is a leader."""
        self.leader_epoch += 1
        if self.leader >= 0:
            start = int(self.leo.get(self.leader, 0))
            # the new leader's log holds no epoch that started beyond its end (Kafka truncates its cache so)
            self.epoch_starts = [(e, o) for e, o in self.epoch_starts if o <= start]
            self.epoch_starts.append((self.leader_epoch, start))

    def epoch_end(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's LeaderEpochFileCache.endOffsetFor answers it: the largest epoch <= the
        one asked, ending where the next epoch starts (or at the log end for the latest); (-1, -1) when the
        epoch is older than the cache."""
        floor = [(e, o) for e, o in self.epoch_starts if e <= epoch]
        if not floor:
            return -1, -1
        later = [o for e, o in self.epoch_starts if e > epoch]
        end = later[0] if later else int(self.leo.get(self.leader, self.hwm)) if self.leader >= 0 else self.hwm
        return floor[-1][0], end

    def visible_hwm(self, now: float) -> int:
        """The high watermark the leader answers with (ListOffsets): the true one, except during a dip."""
        if self.hw_dip is not None and now < self.hw_dip[0]:
            return min(self.hwm, self.hw_dip[1])
        return self.hwm

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
    produce_rate: float  # fixed at creation: the steps keep a list of the producing topics
    internal: bool = False


@dataclass
class ChangeLog:
    """What changed since the last drain: drives ZooKeeper znode updates and listener state."""

    partitions: set[tuple[str, int]] = field(default_factory=set)
    brokers: set[int] = field(default_factory=set)
    controller: bool = False
    topics: set[str] = field(default_factory=set)  # topics whose assignment znode changes (a new topic id)

    def drain(self) -> ChangeLog:
        out = ChangeLog(set(self.partitions), set(self.brokers), self.controller, set(self.topics))
        self.partitions.clear()
        self.brokers.clear()
        self.controller = False
        self.topics.clear()
        return out


def assign_replicas(brokers: list[int], partitions: int, replication_factor: int, start: int,
                    shift: int) -> list[list[int]]:
    """Kafka's rack-unaware `assignReplicasToBrokers`: leaders round-robin from `start`, each follower set off
    from its leader by a shift that grows by one every time the leaders wrap around the brokers."""
    n = len(brokers)
    out = []
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out.append(replicas)
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
        self.topic_ids: dict[uuid.UUID, str] = {}
        self._rank: dict[str, int] = {}  # topic → creation order, the order every step goes through topics in
        self._producing: list[Topic] = []  # topics with a produce rate, in creation order
        self._replicas_on: dict[int, list[Partition]] = {i: [] for i in self.brokers}
        self._config_cache: dict[tuple[str, str], tuple[str, int]] = {}
        self._awake: dict[str, set[int]] = {}  # topic → partitions replication must look at (see _wake)
        self._replicated_at = now  # time of the last replication step
        self._alarms: list[tuple[float, int, str, int]] = []  # (when, seq, topic, index): settled partitions to wake
        self._alarm_at: dict[tuple[str, int], float] = {}  # the alarm that counts, per settled partition
        self._touched_for_retention: set[str] = set()  # see _touch
        # topic → earliest time a segment roll or deletion can be due; one not in it is looked at next step
        self._retain_due: dict[str, float] = {}
        self._retain_next = -math.inf  # the earliest of those; -inf: some topic has none yet
        self._touched_for_groups: set[str] = set()
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
        if spec.generated_topics is not None:
            self._add_generated_topics(spec.generated_topics)
        self.coordinator_errors: dict[int, int] = {}  # broker → error code answered by its coordinators
        # __consumer_offsets partitions their coordinator is still loading (after it took them over): the groups
        # they hold answer COORDINATOR_LOAD_IN_PROGRESS, the coordinator's other groups answer as usual
        self.loading_offsets: set[int] = set()
        # topic → the error code its Metadata answer carries instead of its partitions (UNKNOWN_TOPIC_OR_PARTITION
        # while it is being deleted, TOPIC_AUTHORIZATION_FAILED); the topic itself goes on as before
        self.topic_errors: dict[str, int] = {}
        self.events: deque[tuple[int, float, str]] = deque(maxlen=1000)  # (sequence, time, what)
        self.event_seq = 0

    # ----------------------------------------------------------------- set-up helpers
    def _add_topic(self, t: TopicSpec, internal: bool = False) -> None:
        parts = [self._new_partition(t.name, p, t.replication_factor) for p in range(t.partitions)]
        self._register_topic(Topic(t.name, uuid.uuid5(uuid.NAMESPACE_URL, f"{self.cluster_id}/{t.name}"),
                                   parts, dict(t.configs), t.produce_rate, internal))

    def _register_topic(self, t: Topic) -> None:
        self._rank[t.name] = len(self.topics)
        self.topics[t.name] = t
        self.topic_ids[t.topic_id] = t.name
        if t.produce_rate > 0:
            self._producing.append(t)

    def _add_generated_topics(self, gen: GeneratedTopicsSpec) -> None:
        """`generated_topics`: placed as Kafka places a new topic's replicas, topic i starting where i-1 ended."""
        ids = sorted(self.brokers)
        n = len(ids)
        configs = gen.topic_configs()
        for i, name in enumerate(gen.names()):
            placement = assign_replicas(ids, gen.partitions, gen.replication_factor,
                                        start=i * gen.partitions % n, shift=i // n % max(n - 1, 1))
            parts = [self._new_partition(name, p, gen.replication_factor, replicas)
                     for p, replicas in enumerate(placement)]
            self._register_topic(Topic(name, uuid.uuid5(uuid.NAMESPACE_URL, f"{self.cluster_id}/{name}"), parts,
                                       dict(configs), gen.produce_rate))

    def _new_partition(self, topic: str, p: int, replication_factor: int,
                       replicas: list[int] | None = None) -> Partition:
        if replicas is None:
            ids = sorted(self.brokers)
            replicas = [ids[(p + k) % len(ids)] for k in range(replication_factor)]
        part = Partition(topic, p, replicas, replicas[0], isr=list(replicas))
        part.leo = dict.fromkeys(replicas, 0.0)
        part.caught_up_at = dict.fromkeys(replicas, self.now)
        part.segments.append((self.now, 0))
        part.last_roll = self.now
        self.changes.partitions.add((topic, p))
        for r in replicas:
            self._replicas_on[r].append(part)
        self._awake.setdefault(topic, set()).add(p)
        return part

    def _index_replicas(self) -> None:
        """Rebuild the broker → partitions index in topic order (after partitions were added to old topics)."""
        self._replicas_on = {i: [] for i in self.brokers}
        for part in self.all_partitions():
            for r in part.replicas:
                self._replicas_on[r].append(part)

    # ----------------------------------------------------------------- configuration
    def broker_setting(self, key: str) -> str:
        if key in self.broker_config:
            return self.broker_config[key]
        return kd.BROKER_DEFAULTS.get(key, ("", kd.TYPE_STRING))[0]

    def topic_config(self, topic: str, key: str) -> tuple[str, int]:
        """Effective value and ConfigSource, resolved as a broker does.

        Remembered until `set_topic_config` changes the topic: the steps ask for the settings of every
        producing topic every step. Broker settings are static (as `broker_config` in a real server.properties).
        """
        hit = self._config_cache.get((topic, key))
        if hit is not None:
            return hit
        overrides = self.topics[topic].configs
        if key in overrides:
            out = overrides[key], kd.SOURCE_DYNAMIC_TOPIC
        else:
            synonym, default, _ = kd.TOPIC_CONFIGS.get(key, (key, "", kd.TYPE_STRING))
            if synonym in self.broker_config:
                out = self.broker_config[synonym], kd.SOURCE_STATIC_BROKER
            else:
                out = default, kd.SOURCE_DEFAULT
        self._config_cache[(topic, key)] = out
        return out

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

    def partitions_with_replica(self, broker_id: int) -> list[Partition]:
        """The partitions that have `broker_id` among their replicas (internal topics included), in topic order."""
        return list(self._replicas_on.get(broker_id, ()))

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

    # ----------------------------------------------------------------- idle partitions
    def _wake(self, p: Partition) -> None:
        """Replication must look at `p` again: its log end, leader or ISR, or a replica's broker, changes now.

        While settled, replication skipped `p` because all a step would have done is mark the replicas in
        `p.quiet` caught up at that step; that is written down here, as of the last replication step, so
        the partition resumes exactly where the full steps would have left it.
        """
        if p.quiet is not None:
            at = self._replicated_at
            for r in p.quiet:
                p.caught_up_at[r] = at
            p.quiet = None
            if self._alarm_at:
                self._alarm_at.pop((p.topic, p.index), None)  # its alarm, if any, is moot: it settles anew
        self._awake.setdefault(p.topic, set()).add(p.index)

    def _touch(self, topic: str) -> None:
        """A partition of `topic` moved its log start, high watermark or LSO: retention and groups look again."""
        self._touched_for_retention.add(topic)
        self._touched_for_groups.add(topic)

    def log(self, what: str) -> None:
        self.event_seq += 1
        self.events.append((self.event_seq, self.now, what))
