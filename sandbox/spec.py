"""The shape of a sandbox cluster and its incident timeline, as typed models.

A scenario file (YAML or JSON) is validated against these, so a typo in an
incident or a negative rate is reported with its field and line instead of
turning into a silently different rehearsal.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from collectors.model.vocabulary import TRANSACTION_V2

INCIDENT_TYPES: dict[str, str] = {
    "broker_crash": "a broker process dies (connection refused) and returns after `duration`",
    "broker_flap": "a broker crashes and restarts over and over: down for the first half of every `period` "
                   "(default 6 s), up for the rest, until `duration` ends (then it stays up)",
    "broker_slow": "a broker answers requests late by `delay_s` (past client timeouts when large)",
    "metadata_lag": "a broker's metadata cache stops following the controller for `duration`: it answers Metadata "
                    "with the leaders and ISRs of the incident's start while the others answer with the current "
                    "ones; in KRaft its fetch of the metadata log stops too (DescribeQuorum shows it behind; a "
                    "voter's lag grows), while it stays registered (its heartbeats go on) and answers",
    "slow_follower": "a broker's replica fetching falls behind (leaves ISR after replica.lag.time.max.ms)",
    "consumer_stall": "a group keeps committing the same offset (members present, no progress)",
    "consumer_stop": "a group's members leave; the group goes Empty and stops committing",
    "consumer_rewind": "a group's committed offsets jump back by `messages`",
    "consumer_behind_retention": "a group stops while the topic's retention.ms drops to `retention_ms`",
    "producer_crash_in_txn": "a transactional producer dies with its transaction Ongoing",
    "producer_restart": "a transactional producer restarts (InitProducerId bumps its epoch, fences)",
    "hanging_transaction": "an open transaction on a partition that its coordinator does not know",
    "controller_failover": "the active controller moves to another broker (new controller epoch)",
    "kraft_remove_voter": "KRaft: voter `node` is removed from the quorum's voter set (KIP-853 RemoveRaftVoter; "
                          "its broker stays, as an observer); a leader removed resigns and the remaining voters "
                          "elect another. At the end of `duration` it is added back",
    "kraft_add_voter": "KRaft: broker `node` is added to the quorum's voter set (KIP-853 AddRaftVoter), caught up "
                       "with the leader at once; needs a leader and the broker running. At the end of `duration` it "
                       "is removed again",
    "unclean_election": "a partition's followers stop fetching and leave the ISR, the topic is set to allow "
                        "unclean election, and at the end of `duration` the leader's replica fails: an out-of-sync "
                        "follower takes over and the committed tail is lost (the sandbox prints how many)",
    "acks1_leader_loss": "a partition's followers stop fetching for `duration` (shorter than "
                         "replica.lag.time.max.ms, so they stay in the ISR), then the leader's replica fails: a "
                         "follower takes over cleanly and the tail only the leader had (acknowledged to acks=1 "
                         "producers) is lost; the high watermark never held it, so no monitor can see it",
    "leader_change_hw_dip": "a clean leader change to another in-sync replica whose high watermark reads "
                            "`messages` (default 50) lower for `duration` (default 10 s) and recovers; nothing "
                            "is lost (KIP-207)",
    "topic_recreate": "the topic is deleted and created again under its name between two polls: a new topic "
                      "id, every partition empty from offset 0 and leader epoch 0, the groups' offsets for it "
                      "deleted (they read it again from 0); nothing committed is lost",
    "zk_leader_kill": "the ZooKeeper leader is killed (SIGKILL) and restarted after `duration`",
    "zk_follower_pause": "a ZooKeeper follower is paused (SIGSTOP) and resumed (SIGCONT) after `duration`",
}

KRAFT_VOTER_INCIDENTS = frozenset({"kraft_remove_voter", "kraft_add_voter"})
"""The incidents that change the KRaft voter set, of the node their `node` names (KIP-853)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TopicSpec(_Strict):
    name: str = Field(min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    partitions: int = Field(3, ge=0, le=100_000)
    replication_factor: int = Field(3, ge=1)
    configs: dict[str, str] = Field(default_factory=dict)
    produce_rate: float = Field(10.0, ge=0, description="messages per second across the topic")

    @field_validator("configs", mode="before")
    @classmethod
    def _stringify(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (str(x).lower() if isinstance(x, bool) else str(x)) for k, x in v.items()}
        return v


class GroupSpec(_Strict):
    group_id: str = Field(min_length=1)
    topics: list[str] = Field(min_length=1)
    consume_rate: float | None = Field(None, ge=0, description="messages/s per partition; default 3x produce")
    commit_interval_s: float = Field(5.0, gt=0)
    isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted"
    members: int = Field(2, ge=0)
    batch_every_s: float | None = Field(None, gt=0, description="a batch job: runs every N simulated s ...")
    batch_run_s: float | None = Field(None, gt=0, description="... for this long (its members leave in between)")

    @model_validator(mode="after")
    def _batch(self) -> GroupSpec:
        if (self.batch_every_s is None) != (self.batch_run_s is None):
            raise ValueError("batch_every_s and batch_run_s go together")
        if self.batch_every_s is not None and self.batch_run_s is not None and self.batch_run_s >= self.batch_every_s:
            raise ValueError("batch_run_s must be shorter than batch_every_s")
        return self


class TxnProducerSpec(_Strict):
    transactional_id: str = Field(min_length=1)
    topics: list[str] = Field(min_length=1)
    rate: float = Field(5.0, ge=0, description="messages per second while a transaction is open")
    transaction_duration_s: float = Field(2.0, gt=0)
    pause_between_s: float = Field(1.0, ge=0)
    timeout_ms: int = Field(60_000, gt=0, description="transaction.timeout.ms of the producer")
    transaction_v2: bool = Field(True, description="the client speaks Transaction V2 where the cluster finalized it "
                                 "(a Kafka 4 client); false: an older client, one epoch for all its transactions "
                                 "on any cluster")



MAX_GENERATED_PARTITIONS = 1_000_000  # past this a scenario is a typo rather than a rehearsal (memory: ~3 KB each)
NAME_PREFIX = r"^[A-Za-z0-9._-]{1,200}$"


def _numbered(prefix: str, count: int) -> list[str]:
    """prefix + zero-padded number, as wide as the largest: t0000 … t1999 sort in creation order."""
    width = len(str(count - 1))
    return [f"{prefix}{i:0{width}d}" for i in range(count)]


class GeneratedTopicsSpec(_Strict):
    """Many alike topics from one line, for clusters too big to list: `count` topics of `partitions` each.

    Named prefix + zero-padded number (t0000 … t1999). Replicas are placed as Kafka's controller places
    those of a new topic (rack-unaware `assignReplicasToBrokers`: round-robin leaders, followers after a
    shift), with each topic's start and shift spread deterministically: every broker leads the same number
    of partitions give or take one and follows about as many, so a broker outage hits RF/brokers of the
    cluster (half, for RF 3 over six brokers), as in production, rather than whichever brokers come first.
    """

    count: int = Field(ge=1, le=100_000)
    partitions: int = Field(1, ge=1, le=100_000)
    replication_factor: int = Field(3, ge=1)
    min_insync_replicas: int | None = Field(None, ge=1, description="topic override; none = the broker's")
    produce_rate: float = Field(0.0, ge=0, description="messages per second per topic; 0 = idle (cheapest)")
    prefix: str = Field("t", pattern=NAME_PREFIX)
    configs: dict[str, str] = Field(default_factory=dict)

    @field_validator("configs", mode="before")
    @classmethod
    def _stringify(cls, v: Any) -> Any:
        return TopicSpec._stringify(v)

    @model_validator(mode="after")
    def _check(self) -> GeneratedTopicsSpec:
        total = self.count * self.partitions
        if total > MAX_GENERATED_PARTITIONS:
            raise ValueError(f"{self.count} topics x {self.partitions} partitions = {total:,} partitions; "
                             f"at most {MAX_GENERATED_PARTITIONS:,}")
        if self.min_insync_replicas is not None:
            if "min.insync.replicas" in self.configs:
                raise ValueError("min_insync_replicas and configs['min.insync.replicas'] both given; keep one")
            if self.min_insync_replicas > self.replication_factor:
                raise ValueError(f"min_insync_replicas {self.min_insync_replicas} > replication_factor "
                                 f"{self.replication_factor}: every acks=all write would fail")
        return self

    def names(self) -> list[str]:
        return _numbered(self.prefix, self.count)

    def topic_configs(self) -> dict[str, str]:
        """The overrides every generated topic carries (min_insync_replicas is one of them)."""
        if self.min_insync_replicas is None:
            return dict(self.configs)
        return {**self.configs, "min.insync.replicas": str(self.min_insync_replicas)}


class GeneratedGroupsSpec(_Strict):
    """Many alike consumer groups: `count` groups, each reading the next `topics_per_group` topics.

    The topics are the generated ones (the listed ones when none are generated), dealt out in order and
    wrapping around: group 0 reads topics 0-4, group 1 topics 5-9, … Names are prefix + zero-padded number.
    """

    count: int = Field(ge=1, le=100_000)
    topics_per_group: int = Field(1, ge=1)
    prefix: str = Field("g", min_length=1, max_length=200)
    members: int = Field(2, ge=0)
    commit_interval_s: float = Field(5.0, gt=0)
    consume_rate: float | None = Field(None, ge=0, description="messages/s per partition; default 3x produce")
    isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted"

    def names(self) -> list[str]:
        return _numbered(self.prefix, self.count)


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SecuritySpec(_Strict):
    """How clients must connect: Kafka's listener security protocol, with SASL users when it is SASL_*.

    OAUTHBEARER (not enabled by default) takes no users: it accepts HS256 JWTs signed with `oauth_key` (from a
    token endpoint a test runs, see `sandbox.auth.issue_jwt`), and their ``sub`` is the user.

    TLS listeners get a throwaway CA and server certificate per run (`Sandbox.ca_file` is the CA to trust).
    Passwords are test credentials in the scenario file; they are kept out of repr() all the same.
    """

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanisms: list[Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]] = Field(
        default_factory=lambda: list(SASL_MECHANISMS), min_length=1,
        description="mechanisms enabled on SASL listeners (sasl.enabled.mechanisms)")
    users: dict[str, str] = Field(default_factory=dict, repr=False, description="user name -> password")
    scram_iterations: int = Field(4096, ge=4096, le=1_000_000, description="PBKDF2 iterations of SCRAM credentials")
    oauth_key: str | None = Field(None, repr=False, description="HMAC key OAUTHBEARER tokens must be signed with")
    oauth_issuer: str | None = Field(None, description="iss claim OAUTHBEARER tokens must carry (None: any)")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @model_validator(mode="after")
    def _check(self) -> SecuritySpec:
        dup = sorted({m for m in self.sasl_mechanisms if self.sasl_mechanisms.count(m) > 1})
        if dup:
            raise ValueError(f"sasl_mechanisms lists {dup} more than once")
        with_users = [m for m in self.sasl_mechanisms if m != "OAUTHBEARER"]
        if self.sasl and with_users and not self.users:
            raise ValueError(f"protocol {self.protocol} needs at least one entry in users (name: password)")
        oauth = self.sasl and "OAUTHBEARER" in self.sasl_mechanisms
        if oauth and not self.oauth_key:
            raise ValueError("OAUTHBEARER needs oauth_key, the HMAC key its tokens are signed with")
        if not oauth and (self.oauth_key or self.oauth_issuer):
            raise ValueError("oauth_key and oauth_issuer are only used with OAUTHBEARER in sasl_mechanisms")
        if not self.sasl and self.users:
            raise ValueError(f"users are only used with SASL_PLAINTEXT or SASL_SSL, not {self.protocol}")
        for name, password in self.users.items():
            if not name or name != name.strip():
                raise ValueError(f"user name {name!r} must be non-empty without surrounding spaces")
            if not password:
                raise ValueError(f"user {name!r}: empty password")
            if "\x00" in name or "\x00" in password:
                raise ValueError(f"user {name!r}: NUL characters cannot be sent with SASL/PLAIN")
        return self


class ClusterSpec(_Strict):
    brokers: int = Field(3, ge=1, le=64)
    mode: Literal["zookeeper", "kraft"] = "zookeeper"
    cluster_id: str = "sandbox-cluster-0001"
    racks: int = Field(0, ge=0, description="spread brokers over this many racks (0 = no rack)")
    broker_config: dict[str, str] = Field(default_factory=dict)
    internal_topic_partitions: int = Field(10, ge=1, le=50)
    topics: list[TopicSpec] = Field(default_factory=list)
    groups: list[GroupSpec] = Field(default_factory=list)
    generated_topics: GeneratedTopicsSpec | None = None
    generated_groups: GeneratedGroupsSpec | None = None
    transactional_producers: list[TxnProducerSpec] = Field(default_factory=list)
    transaction_version: int = Field(
        0, ge=0, le=TRANSACTION_V2,
        description="the finalized transaction.version feature level (KIP-584): 0 = not finalized, as on a Kafka "
                    "3.x cluster; 2 = Kafka 4.0's Transaction V2 (KIP-890), where the coordinator bumps the "
                    "producer epoch at every transaction end, commit or abort. Above 0 only in KRaft mode")
    security: SecuritySpec = Field(default_factory=SecuritySpec)

    @field_validator("broker_config", mode="before")
    @classmethod
    def _stringify(cls, v: Any) -> Any:
        return TopicSpec._stringify(v)

    @model_validator(mode="after")
    def _cross_check(self) -> ClusterSpec:
        names = [t.name for t in self.topics]
        generated = self.generated_topics.names() if self.generated_topics else []
        dup = {n for n, k in Counter(names + generated).items() if k > 1}
        if dup:
            where = " (listed and generated)" if dup & set(generated) else ""
            raise ValueError(f"duplicate topic names{where}: {sorted(dup)[:10]}")
        known = set(names) | set(generated)
        for t in self.topics:
            if t.replication_factor > self.brokers:
                raise ValueError(
                    f"topic {t.name!r}: replication_factor {t.replication_factor} > brokers {self.brokers}")
        gen = self.generated_topics
        if gen is not None and gen.replication_factor > self.brokers:
            raise ValueError(f"generated_topics: replication_factor {gen.replication_factor} > brokers {self.brokers}")
        for g in self.groups:
            missing = [x for x in g.topics if x not in known]
            if missing:
                raise ValueError(f"group {g.group_id!r} reads unknown topics {missing}")
        if self.generated_groups is not None:
            dealt = len(generated or names)
            if not dealt:
                raise ValueError("generated_groups: the cluster has no topics for them to read")
            if self.generated_groups.topics_per_group > dealt:
                raise ValueError(f"generated_groups: topics_per_group {self.generated_groups.topics_per_group} > "
                                 f"the {dealt} topics there are to read")
            group_ids = [g.group_id for g in self.groups] + self.generated_groups.names()
            dup = {n for n, k in Counter(group_ids).items() if k > 1}
            if dup:
                raise ValueError(f"duplicate group ids (listed and generated): {sorted(dup)[:10]}")
        for p in self.transactional_producers:
            missing = [x for x in p.topics if x not in known]
            if missing:
                raise ValueError(f"producer {p.transactional_id!r} writes unknown topics {missing}")
        if self.transaction_version > 0 and self.mode != "kraft":
            raise ValueError(f"transaction_version {self.transaction_version} needs mode kraft: only a KRaft "
                             "cluster (Kafka 4.0+, metadata.version 4.0-IV2 or later) finalizes transaction.version "
                             "above 0, and Kafka 4 has no ZooKeeper mode")
        return self

    def partition_count(self) -> int:
        """User partitions, listed and generated (internal topics not counted)."""
        gen = self.generated_topics
        return sum(t.partitions for t in self.topics) + (gen.count * gen.partitions if gen else 0)

    def topic_names(self) -> list[str]:
        """Every user topic, listed first, then generated, in the order the cluster creates them."""
        return [t.name for t in self.topics] + (self.generated_topics.names() if self.generated_topics else [])

    def all_groups(self) -> list[GroupSpec]:
        """The listed groups, then the generated ones with the topics each is dealt."""
        gen = self.generated_groups
        if gen is None:
            return list(self.groups)
        pool = self.generated_topics.names() if self.generated_topics else [t.name for t in self.topics]
        k = gen.topics_per_group
        return [*self.groups, *(
            GroupSpec.model_construct(group_id=gid, topics=[pool[(j * k + i) % len(pool)] for i in range(k)],
                                      consume_rate=gen.consume_rate, commit_interval_s=gen.commit_interval_s,
                                      isolation_level=gen.isolation_level, members=gen.members)
            for j, gid in enumerate(gen.names()))]


class IncidentSpec(_Strict):
    type: str
    at: float = Field(ge=0, description="simulated seconds after start")
    duration: float | None = Field(None, gt=0, description="simulated seconds; none = until the end")
    broker: int | None = None
    group: str | None = None
    topic: str | None = None
    partition: int | None = None
    transactional_id: str | None = None
    delay_s: float | None = Field(None, ge=0)
    messages: int | None = Field(None, ge=1)
    retention_ms: int | None = Field(None, ge=1)
    zk_server: int | None = None
    period: float | None = Field(None, gt=0, description="broker_flap: seconds of one down-and-up cycle")
    node: int | None = Field(None, description="kraft_remove_voter / kraft_add_voter: the node (broker id)")

    @field_validator("type")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in INCIDENT_TYPES:
            raise ValueError(f"unknown incident {v!r}; valid incidents: {', '.join(sorted(INCIDENT_TYPES))}")
        return v


class Scenario(_Strict):
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    incidents: list[IncidentSpec] = Field(default_factory=list)
    repeat_every: float | None = Field(None, gt=0, description="replay the timeline every N simulated s")

    @model_validator(mode="after")
    def _targets_exist(self) -> Scenario:
        c = self.cluster
        topics = set(c.topic_names())
        groups = {g.group_id for g in c.groups} | set(c.generated_groups.names() if c.generated_groups else [])
        producers = {p.transactional_id for p in c.transactional_producers}
        for i, inc in enumerate(self.incidents):
            where = f"incidents[{i}] ({inc.type})"
            if inc.broker is not None and not 1 <= inc.broker <= c.brokers:
                raise ValueError(f"{where}: broker {inc.broker} not in 1..{c.brokers}")
            if inc.group is not None and inc.group not in groups:
                raise ValueError(f"{where}: unknown group {inc.group!r}")
            if inc.topic is not None and inc.topic not in topics:
                raise ValueError(f"{where}: unknown topic {inc.topic!r}")
            if inc.transactional_id is not None and inc.transactional_id not in producers:
                raise ValueError(f"{where}: unknown transactional_id {inc.transactional_id!r}")
            if inc.type.startswith("zk_") and c.mode != "zookeeper":
                raise ValueError(f"{where}: ZooKeeper incidents need cluster.mode zookeeper")
            if inc.type in KRAFT_VOTER_INCIDENTS:
                if c.mode != "kraft":
                    raise ValueError(f"{where}: KRaft incidents need cluster.mode kraft")
                if inc.node is None:
                    raise ValueError(f"{where}: needs node, the node whose vote is removed or added")
            elif inc.node is not None:
                raise ValueError(f"{where}: node is for {' and '.join(sorted(KRAFT_VOTER_INCIDENTS))} only")
            if inc.node is not None and not 1 <= inc.node <= c.brokers:
                raise ValueError(f"{where}: node {inc.node} not in 1..{c.brokers}")
            if inc.partition is not None and inc.topic is not None:
                n = next((t.partitions for t in c.topics if t.name == inc.topic), None)
                if n is not None and not 0 <= inc.partition < n:
                    raise ValueError(f"{where}: partition {inc.partition} not in 0..{n - 1} of {inc.topic!r}")
            lag_s = int(c.broker_config.get("replica.lag.time.max.ms", 30_000)) / 1000.0
            if inc.type == "unclean_election" and (inc.duration is None or inc.duration <= lag_s):
                raise ValueError(f"{where}: duration must be longer than replica.lag.time.max.ms ({lag_s:g} s): "
                                 "the followers have to leave the ISR before the leader is lost")
            if inc.type == "acks1_leader_loss" and (inc.duration is None or inc.duration >= lag_s):
                raise ValueError(f"{where}: duration must be shorter than replica.lag.time.max.ms ({lag_s:g} s): "
                                 "the followers have to stay in the ISR")
        return self
