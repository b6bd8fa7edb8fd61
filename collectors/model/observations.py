"""What one poll learned from each source, before any interpretation.

The source adapters (`collectors.sources`) fill these with plain values; the
snapshot builder (`collectors.model.snapshot`) turns them into records. They
live in the model so that the builder needs no client library and the
adapters and the builder meet on a type both can see.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from collectors.model.records import ZkServerRecord
from collectors.model.vocabulary import STALE_SUBJECT_KINDS


class GroupInfo(TypedDict, total=False):
    """A group as ListGroups / DescribeGroups describe it (fields arrive as the answers do)."""

    state: str
    members: int
    protocol_type: str
    coordinator: int | None


@dataclass(frozen=True, slots=True)
class Owner:
    """The group member holding a partition in the group's current assignment (DescribeGroups)."""

    member_id: str
    client_id: str
    host: str


class TransactionInfo(TypedDict):
    """DescribeTransactions' answer for one transactional id, in the protocol's own field names, plus the
    coordinator that gave it."""

    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1 when no transaction is open
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]]
    coordinator: int | None


class ProducerInfo(TypedDict):
    """DescribeProducers' answer for one producer on one partition."""

    producer_id: int
    producer_epoch: int
    last_timestamp: int  # ms; -1 when unknown
    txn_start_offset: int  # -1 when no transaction is open


class QuorumReplica(TypedDict):
    replica_id: int
    log_end_offset: int  # -1 when unknown
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


class QuorumInfo(TypedDict):
    """DescribeQuorum's answer for the metadata log (KRaft)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[QuorumReplica]
    observers: list[QuorumReplica]


class ZnodePartitionState(TypedDict):
    """/brokers/topics/<t>/partitions/<p>/state as Kafka writes it."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    version: NotRequired[int]


@dataclass
class PartitionMeta:
    topic: str
    partition: int
    leader: int
    leader_epoch: int | None
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    topic_id: str | None = None
    """The topic's id (Metadata v10+, Kafka 2.8+), None where the broker gives none: what tells a topic deleted and
    created again under its name from the one seen before (both start again at leader epoch 0)."""


@dataclass
class KafkaObservation:
    """What one poll learned, before any interpretation (records are built from this)."""

    time: float
    reachable: bool = True
    cluster_id: str | None = None
    controller_id: int | None = None
    """Metadata's controller id: the controller in ZooKeeper mode, a random broker in KRaft (KIP-590), where the
    active controller is the quorum leader (`collectors.model.snapshot` makes the snapshot's of either)."""
    answered_by: float | None = None
    """The poll clock once every answer was in (`time` is the poll's start): an upper bound on when any answer was
    given. A poll takes seconds on a big cluster, and a state can change between its start and the request that
    sees it; None where the poller does not own the clock `time` came from."""
    brokers: list[tuple[int, str, int, str | None]] = field(default_factory=list)
    partitions: list[PartitionMeta] = field(default_factory=list)
    internal_topics: set[str] = field(default_factory=set)
    topic_names: dict[Any, str] = field(default_factory=dict)  # topic id → name (OffsetFetch v10 speaks ids)
    topic_configs: dict[str, dict[str, str | None]] = field(default_factory=dict)
    broker_configs: dict[str, str | None] = field(default_factory=dict)
    log_start: dict[tuple[str, int], int] = field(default_factory=dict)
    high_watermark: dict[tuple[str, int], int] = field(default_factory=dict)
    high_watermark_epoch: dict[tuple[str, int], int] = field(default_factory=dict)
    """The leader epoch each high watermark was answered under (ListOffsets v4+): an epoch bumped between the
    poll's Metadata and its ListOffsets (a rolling restart does it to many partitions) answers for the new one."""
    # OffsetForLeaderEpoch answers for partitions whose leader epoch moved: (epoch, end offset of the epoch
    # asked about) from the current leader (collectors.model.loss)
    epoch_end_offsets: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    last_stable: dict[tuple[str, int], int] = field(default_factory=dict)
    groups: dict[str, GroupInfo] = field(default_factory=dict)
    commits: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    # group → (topic, partition) → the member that holds it, from the members' assignments (consumer groups)
    group_owners: dict[str, dict[tuple[str, int], Owner]] = field(default_factory=dict)
    transactions: list[TransactionInfo] = field(default_factory=list)
    producers: dict[tuple[str, int], list[ProducerInfo]] = field(default_factory=dict)
    quorum: QuorumInfo | None = None
    quorum_no_leader: str | None = None
    """Why DescribeQuorum says the KRaft quorum has no leader this poll, where it failed so: NOT_LEADER_OR_FOLLOWER
    (only the Raft leader answers it), or no answer in time from a broker that answered this poll's other requests
    (a broker that knows no controller holds what it forwards); None otherwise. `quorum` is None then, the quorum
    section stale. Evidence, not proof: one such poll is normal while the leader moves (`kraft_no_leader` waits)."""
    kraft: bool | None = None
    transaction_version: int | None = None
    """The cluster's finalized ``transaction.version`` feature level (ApiVersions v3+, KIP-584): 0 where none is
    finalized or the brokers predate features; None where this poll could not tell. At 2 (Transaction V2,
    KIP-890, a Kafka 4 cluster's default) the coordinator bumps a producer's epoch at every transaction end."""
    listed_transactions: dict[str, int] = field(default_factory=dict)  # transactional id → producer id
    unreachable_brokers: set[int] = field(default_factory=set)
    metadata_probes: dict[int, dict[tuple[str, int], tuple[int, str | None]]] = field(default_factory=dict)
    """Each broker asked about a few topics (`collectors.model.metadata_lag`) -> the leader epoch and topic id it
    answered for each of their partitions; a broker whose answer failed is not in it."""
    filtered_topics: int = 0  # topics left out by the cluster's filters (never described)
    replica_brokers: set[int] | None = None
    """Every broker in a replica list of the Metadata answer, filtered topics too; None where Metadata gave no
    complete answer. A broker gone from the cluster and from every replica list was decommissioned."""
    filtered_groups: int = 0  # groups left out by the cluster's filters (never described, offsets never fetched)
    errors: list[str] = field(default_factory=list)
    stale_sections: set[str] = field(default_factory=set)
    stale_subjects: dict[str, set[str]] = field(default_factory=dict)
    """The stale sections whose every failure this poll named the subjects it concerns (`fail`): section -> those
    subjects, named as `STALE_SUBJECT_KINDS` says. A stale section not in here failed as a whole."""
    requests: int = 0

    def fail(self, section: str, message: str, subjects: Iterable[str] | None = None) -> None:
        """`section` could not be refreshed this poll. `subjects`: the only ones the failure concerns (the group
        whose OffsetFetch was refused, the partitions a timed-out ListOffsets asked about), named as
        `STALE_SUBJECT_KINDS` says; None (or none named, or a section whose subjects have no such names): the whole
        section. A section that failed as a whole stays so for the poll, whatever else fails in it."""
        named = set(subjects) if subjects is not None and section in STALE_SUBJECT_KINDS else set()
        whole = section in self.stale_sections and section not in self.stale_subjects
        self.stale_sections.add(section)
        if not named:
            self.stale_subjects.pop(section, None)
        elif not whole:
            self.stale_subjects.setdefault(section, set()).update(named)
        if message not in self.errors:
            self.errors.append(message)


@dataclass
class ZkObservation:
    """What one ZooKeeper poll learned; plain values so the snapshot builder needs no kazoo types."""

    servers: list[ZkServerRecord] = field(default_factory=list)
    broker_ids: set[int] | None = None  # children of /brokers/ids; None when they could not be read
    controller_id: int | None = None  # /controller "brokerid"; None when absent or unreadable
    controller_epoch: int | None = None
    partition_states: dict[tuple[str, int], ZnodePartitionState] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    stale_sections: set[str] = field(default_factory=set)
