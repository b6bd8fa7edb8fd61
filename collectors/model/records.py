"""The snapshot records: the one vocabulary shared by collectors, exporter, dashboard and Spark job.

Every record is a flat dataclass of plain values (ints, floats, strings, bools,
lists of ints), so the same shape serialises to JSON for `--once --json`, to
Parquet rows for history and to Prometheus samples, without per-consumer
translation. Optional numbers are None when unknown — never -1 or NaN — so
sums and charts downstream cannot be poisoned by sentinels.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from collectors.model import vocabulary as V

SCHEMA_VERSION = 1


@dataclass(slots=True)
class BrokerRecord:
    cluster: str
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    alive: bool = True  # present in metadata (registered with the controller)
    in_zookeeper: bool | None = None  # /brokers/ids/<id> exists; None without ZooKeeper
    is_controller: bool = False
    reachable: bool | None = None  # answered our requests this poll; None when not contacted
    # How far its metadata cache lags the controller, at least (`collectors.model.metadata_lag`): it answered a
    # leader epoch that another answer had replaced this many seconds before. 0 where it answered current epochs
    # (or older ones only this poll's answers replaced); None where it was not asked (KRaft, whose brokers say it in
    # DescribeQuorum; a broker down; no answer; nothing moved since the monitor started)
    metadata_behind_s: float | None = None
    metadata_behind_partitions: int | None = None  # of the partitions asked, how many it answered at older epochs

    @property
    def up(self) -> bool:
        """In the metadata and not known to have failed to answer: `kafka_broker_up`, and the brokers a rule that
        leaves out the ones down (`broker_down`'s and `broker_unreachable`'s) judges. One definition, so a Prometheus
        twin joining on `kafka_broker_up == 1` judges the brokers its collector rule does."""
        return self.alive and self.reachable is not False


@dataclass(slots=True)
class PartitionRecord:
    cluster: str
    topic: str
    partition: int
    leader: int  # -1 when the partition has no leader
    leader_epoch: int | None
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    min_insync_replicas: int
    log_start_offset: int | None = None
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    zk_leader: int | None = None  # from /brokers/topics/<t>/partitions/<p>/state
    zk_isr: list[int] | None = None

    @property
    def replication_factor(self) -> int:
        return len(self.replicas)

    @property
    def offline(self) -> bool:
        return V.is_offline(self.leader)

    @property
    def under_replicated(self) -> bool:
        return V.is_under_replicated(len(self.isr), len(self.replicas))

    @property
    def under_min_isr(self) -> bool:
        return V.is_under_min_isr(len(self.isr), self.min_insync_replicas)

    @property
    def at_min_isr(self) -> bool:
        return V.is_at_min_isr(len(self.isr), self.min_insync_replicas)

    @property
    def partition_class(self) -> str:
        """The worst of offline / under_min_isr / at_min_isr / under_replicated / healthy."""
        return V.partition_class(self.leader, len(self.isr), len(self.replicas), self.min_insync_replicas)

    @property
    def leader_is_preferred(self) -> bool:
        return bool(self.replicas) and self.leader == self.replicas[0]

    @property
    def lso_gap(self) -> int | None:
        if self.high_watermark is None or self.last_stable_offset is None:
            return None
        return max(0, self.high_watermark - self.last_stable_offset)

    @property
    def zk_isr_mismatch(self) -> bool:
        return self.zk_isr is not None and sorted(self.zk_isr) != sorted(self.isr)


@dataclass(slots=True)
class PartitionChangeRecord:
    """A leader or ISR change seen between two polls (history keeps these as events)."""

    cluster: str
    time: float
    topic: str
    partition: int
    kind: str  # isr_shrink / isr_expand / isr_change / leader_change
    leader_before: int
    leader_after: int
    isr_before: list[int]
    isr_after: list[int]


@dataclass(slots=True)
class TopicRecord:
    """Per-topic configuration and health roll-up, including the durability posture."""

    cluster: str
    topic: str
    internal: bool
    partitions: int
    replication_factor: int
    min_insync_replicas: int
    unclean_leader_election: bool
    retention_ms: int | None  # None = infinite (-1 in Kafka)
    cleanup_policy: str
    under_replicated: int = 0
    under_min_isr: int = 0
    at_min_isr: int = 0
    offline: int = 0
    preferred_leader_imbalance: int = 0
    # Broker failures the worst partition can still take before acks=all writes stop / data can be lost.
    failures_before_write_stop: int = 0
    failures_before_data_loss: int = 0
    team: str | None = None  # the owner team of its policy (`collectors.model.policy`)
    policy: str | None = None  # the policy rule that matched it ("policies[3]"); None: the thresholds
    retention_risk_s: float | None = None  # its policy's retention-risk horizon; None: thresholds.retention_risk_s
    max_severity: str | None = None  # its policy's highest alert severity; None: no cap


@dataclass(slots=True)
class GroupPartitionRecord:
    cluster: str
    group_id: str
    topic: str
    partition: int
    committed_offset: int | None
    log_start_offset: int | None
    high_watermark: int | None
    last_stable_offset: int | None
    lag: int | None  # high watermark - committed, never negative; None without a commit
    lag_seconds: float | None  # None = unknown (not enough history yet)
    status: str = "OK"
    last_commit_time: float | None = None  # when we last saw the committed offset move (epoch s)
    below_log_start: bool = False  # retention already deleted messages this group never read
    seconds_to_retention: float | None = None  # estimate of time until unread data is deleted
    status_reason: str | None = None  # the rule that decided `status`, in words (the API and the drill-down)
    # The member that owns the partition in the group's current assignment; None when unassigned or unknown.
    owner_member_id: str | None = None
    owner_client_id: str | None = None
    owner_host: str | None = None


@dataclass(slots=True)
class GroupRecord:
    cluster: str
    group_id: str
    state: str
    members: int
    coordinator: int | None
    protocol_type: str = "consumer"
    status: str = "OK"  # OK / WARN / ERR (worst partition)
    worst_partition_status: str = "OK"
    lag_sum: int | None = None
    lag_max: int | None = None
    lag_seconds_max: float | None = None
    partitions: int = 0
    topics: list[str] = field(default_factory=list)
    last_commit_time: float | None = None
    # active: judged as above. INACTIVE / ABANDONED groups (`status` says which) are nobody's running consumer:
    # info, never paging (`collectors.model.activity`).
    activity: str = "active"
    team: str | None = None  # the owner team of its policy (`collectors.model.policy`)
    policy: str | None = None  # the policy rule that matched it ("policies[3]"); None: the thresholds
    lag_seconds_slo: float | None = None  # its lag-seconds SLO: its policy's, else thresholds.lag_seconds_slo
    retention_risk_s: float | None = None  # its policy's retention-risk horizon; None: the topic's, else thresholds
    max_severity: str | None = None  # its policy's highest alert severity; None: no cap
    idle: bool = False  # in an idle window of its policy (a batch job between runs): no STALL/STOP, no lag SLO


@dataclass(slots=True)
class TransactionRecord:
    cluster: str
    transactional_id: str
    coordinator: int | None
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time: float | None  # epoch seconds of the open transaction; None when none is open
    age_seconds: float | None
    partitions: list[str] = field(default_factory=list)  # "topic-partition"
    # On a Transaction V2 cluster: whether the producer proved it keeps V1's rules at this producer id and epoch (two
    # transactions begun at it, `collectors.model.txn_clients`), so that a rise out of it is a restart or a fence;
    # None where every rise counts (no V2). Recorded so that the history holds the proof the collector judged by.
    keeps_v1: bool | None = None
    # On a Transaction V2 cluster, for a producer proven to keep V1's rules (now, or at an epoch a counted rise left):
    # when its epoch last rose in a way the collector counts for producer_epoch_bumps (a restart or a fence), 0.0
    # before any; None otherwise (every other producer there, and every producer before V2). Each rise of it is one
    # counted rise, which the Prometheus twin counts (`kafka_transaction_producer_epoch_rise_timestamp_seconds`); a
    # fall back to 0.0 is the collector's memory of the producer starting over.
    epoch_rise_time: float | None = None


@dataclass(slots=True)
class ProducerRecord:
    """A producer with an open transaction on a partition (from DescribeProducers)."""

    cluster: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    txn_start_offset: int
    last_timestamp: float | None
    transactional_id: str | None  # None when no coordinator knows the producer
    hanging: bool = False


@dataclass(slots=True)
class ZkServerRecord:
    cluster: str
    server: str  # host:port
    serving: bool
    mode: str | None = None  # leader / follower / standalone / observer
    zxid: int | None = None
    zxid_epoch: int | None = None
    zxid_counter: int | None = None
    lag_behind_leader: int | None = None  # zxid counter distance to the leader (same epoch)
    latency_avg_ms: float | None = None
    latency_max_ms: float | None = None
    outstanding_requests: int | None = None
    connections: int | None = None
    znode_count: int | None = None
    learners: int | None = None
    synced_followers: int | None = None
    error: str | None = None


@dataclass(slots=True)
class KRaftVoterRecord:
    cluster: str
    node_id: int
    role: str  # leader / voter / observer
    log_end_offset: int | None
    lag: int | None  # the leader's log end offset (its high watermark if unknown) - this replica's log end offset
    last_fetch_time: float | None
    last_caught_up_time: float | None
    leader_id: int
    leader_epoch: int
    high_watermark: int


def leader_clock(replicas: Iterable[KRaftVoterRecord]) -> float | None:
    """The latest time a DescribeQuorum answer gives: the freshest replica's last fetch, the leader's own entry's
    (Kafka stamps it with the time it answers). Every time in the answer is on the leader's clock, so a replica is
    judged against this, never against the monitor's clock (skewed, and the answer comes late in the poll). None
    where no time is known (Kafka before 3.3, or a new leader's answer)."""
    return max((v.last_fetch_time for v in replicas if v.last_fetch_time is not None), default=None)


@dataclass(slots=True)
class AlertRecord:
    rule: str
    severity: str
    cluster: str
    subject: str  # what it is about: topic-partition, group, transactional id, server…
    summary: str
    first_seen: float
    last_seen: float
    value: float | None = None
    resolved_at: float | None = None
    # The open incident that explains it, stamped each poll by the incident tracker; None for risks (never an
    # incident's member) and in records from before incidents. Lets a reader list an incident's members
    # without redoing the correlation.
    incident: str | None = None
    team: str | None = None  # the owner team of the group or topic it is about, from policy (Alertmanager routes by it)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.cluster, self.rule, self.subject)


@dataclass(slots=True)
class IncidentRecord:
    """One cause and everything it explains: what on-call reads, what pages, what the weekly report counts.

    Alerts stay the detail (one per rule and subject); an incident groups the alerts of one cause (a broker
    down with the partition alerts of every partition it held, the consensus layer, one topic, one group, one
    transactional id) and carries its blast radius. Counts are None where they do not apply to the kind."""

    cluster: str
    id: str  # stable while the cause lasts, and across a return within the hold-down window
    kind: str  # broker / consensus / topic / group / transaction / cluster / monitor
    subject: str  # "broker 3", "brokers 2, 3", a topic, a group id, a transactional id, "zookeeper", …
    severity: str  # the worst of its alerts
    summary: str  # one sentence: the cause, then its worst consequence
    opened: float
    last_seen: float
    resolved_at: float | None = None
    alerts: int = 0  # member alerts
    members: dict[str, int] = field(default_factory=dict)  # rule → member alerts
    sample: list[str] = field(default_factory=list)  # up to 20 member subjects, worst first
    brokers: list[int] = field(default_factory=list)  # the brokers down (broker incidents)
    partitions: int | None = None  # partitions affected (a down broker among their replicas / the topic's)
    topics: int | None = None
    offline: int | None = None  # of those, partitions without a leader (unavailable)
    under_min_isr: int | None = None  # acks=all writes failing now
    at_min_isr: int | None = None  # one more broker failure stops acks=all writes
    unclean_topics: int | None = None  # affected topics with unclean.leader.election.enable=true
    consequences: list[str] = field(default_factory=list)  # "group billing", … explained by this cause
    team: str | None = None  # the owner team when every member alert has the same one; None otherwise


@dataclass(slots=True)
class LossRecord:
    """Evidence that data was lost (not a risk: something that happened), with how much where it can be told.

    Kinds: ``truncation`` (committed messages gone from a partition after a leader change: ``messages`` is
    the high watermark we saw minus where the new leader ends the old epoch, a lower bound),
    ``unclean_election`` (a leader from outside the last ISR we saw; ``messages`` None: the truncation, if
    any, is its own record), ``retention_skipped`` and ``offset_beyond_log_end`` (a group's messages) and
    ``zk_zxid_regressed`` (a ZooKeeper server's data went back; ``messages``: its transactions gone). An
    ``offset_beyond_log_end`` record carries the epochs and ``offset`` of the truncation its group read past. See
    `collectors.model.loss`."""

    cluster: str
    time: float
    kind: str
    topic: str | None
    partition: int | None
    messages: int | None  # messages lost or skipped; None where the evidence has no count
    evidence: str  # what was seen, in words, with the numbers
    leader_before: int | None = None
    leader_after: int | None = None
    epoch_before: int | None = None
    epoch_after: int | None = None
    unclean_enabled: bool | None = None  # the topic's unclean.leader.election.enable at the time
    group_id: str | None = None
    transactional_id: str | None = None
    offset: int | None = None  # truncation: where the log now ends the old epoch (the first offset lost)
    server: str | None = None  # zk_zxid_regressed: the ZooKeeper server (host:port)

    @property
    def subject(self) -> str:
        if self.topic is not None and self.partition is not None:
            return V.partition_subject(self.topic, self.partition)
        return self.group_id or self.transactional_id or self.server or self.topic or self.cluster


@dataclass(slots=True)
class ClusterSnapshot:
    cluster: str
    time: float
    mode: str | None = None  # zookeeper / kraft / None when it cannot be told
    cluster_id: str | None = None
    controller_id: int | None = None
    # KRaft: why this poll's DescribeQuorum says the quorum has no leader (`KafkaObservation.quorum_no_leader`: an
    # answer only a non-leader gives, or none in time); None when it answered, or failed in a way that says nothing
    # of the quorum. The one evidence `kraft_no_leader` has while no voter was ever seen (a monitor started then).
    quorum_no_leader: str | None = None
    # the finalized transaction.version feature level last read (0: none finalized; 2: Transaction V2, where every
    # transaction end bumps the producer epoch, so epoch rises are no evidence of restarts or fencing); None: unknown
    transaction_version: int | None = None
    reachable: bool = True
    stale: bool = False  # some section could not be refreshed this poll
    stale_sections: list[str] = field(default_factory=list)
    # of the stale sections, those a failure left stale for some subjects only: section -> those subjects, named
    # as `vocabulary.STALE_SUBJECT_KINDS` says (a stale section not in here is stale as a whole)
    stale_subjects: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    poll_duration_s: float = 0.0
    requests: int = 0
    filtered_topics: int = 0  # topics the cluster's filters leave out (not described, offsets not read)
    filtered_groups: int = 0  # groups the cluster's filters leave out (not described, offsets not fetched)
    brokers: list[BrokerRecord] = field(default_factory=list)
    topics: list[TopicRecord] = field(default_factory=list)
    partitions: list[PartitionRecord] = field(default_factory=list)
    groups: list[GroupRecord] = field(default_factory=list)
    group_partitions: list[GroupPartitionRecord] = field(default_factory=list)
    transactions: list[TransactionRecord] = field(default_factory=list)
    producers: list[ProducerRecord] = field(default_factory=list)
    zookeeper: list[ZkServerRecord] = field(default_factory=list)
    kraft_voters: list[KRaftVoterRecord] = field(default_factory=list)
    partition_changes: list[PartitionChangeRecord] = field(default_factory=list)
    alerts: list[AlertRecord] = field(default_factory=list)
    incidents: list[IncidentRecord] = field(default_factory=list)
    losses: list[LossRecord] = field(default_factory=list)  # evidence of loss found by this poll


DERIVED_PARTITION_FIELDS = ("replication_factor", "offline", "under_replicated", "under_min_isr", "at_min_isr",
                            "leader_is_preferred", "lso_gap", "zk_isr_mismatch")


def record_to_dict(rec: Any) -> dict[str, Any]:
    """A record as a plain dict, with PartitionRecord's derived flags included for readers."""
    out = {f.name: getattr(rec, f.name) for f in fields(rec)}
    if isinstance(rec, PartitionRecord):
        for name in DERIVED_PARTITION_FIELDS:
            out[name] = getattr(rec, name)
    return out


def snapshot_to_dict(snap: ClusterSnapshot) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(snap):
        value = getattr(snap, f.name)
        if isinstance(value, list) and value and hasattr(value[0], "__dataclass_fields__"):
            out[f.name] = [record_to_dict(r) for r in value]
        else:
            out[f.name] = value if not hasattr(value, "__dataclass_fields__") else asdict(value)
    return out


RECORD_TYPES: tuple[type, ...] = (
    ClusterSnapshot, BrokerRecord, TopicRecord, PartitionRecord, PartitionChangeRecord, GroupRecord,
    GroupPartitionRecord, TransactionRecord, ProducerRecord, ZkServerRecord, KRaftVoterRecord, AlertRecord,
    IncidentRecord, LossRecord)


def schema_markdown() -> str:
    """Field tables of every record (docs/snapshot-schema.md embeds this; a test keeps them in sync)."""
    out = []
    for cls in RECORD_TYPES:
        out.append(f"### {cls.__name__}\n")
        doc = (cls.__doc__ or "").strip().splitlines()
        if doc and not doc[0].startswith(cls.__name__ + "("):
            out.append(doc[0] + "\n")
        out.append("| field | type |")
        out.append("| --- | --- |")
        for f in fields(cls):
            out.append(f"| `{f.name}` | `{f.type}` |")
        if cls is PartitionRecord:
            out.append("\nDerived fields included in JSON: " + ", ".join(f"`{n}`" for n in DERIVED_PARTITION_FIELDS))
        out.append("")
    return "\n".join(out)
