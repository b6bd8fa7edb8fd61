"""The words every part of the monitor shares, declared once: statuses and their order, severities,
transaction and group states, partition classes.

The collector's rules, the exporter, history, the dashboard and the Spark job all import from here, so a
status added or re-ordered is added or re-ordered everywhere at once (they used to carry five copies of the
lag-status order). Only plain tuples, dicts and one pure function: no I/O, no dependencies.
"""

from __future__ import annotations

from typing import Final

# ----------------------------------------------------------------------------- severities

CRITICAL, WARNING, INFO = "critical", "warning", "info"
SEVERITIES: Final = (CRITICAL, WARNING, INFO)
"""Most to least severe. `critical` pages; `warning` goes to a ticket or channel; `info` is context."""
SEVERITY_RANK: Final = {s: i for i, s in enumerate(SEVERITIES)}
"""0 for the most severe: sort alerts by it."""

# ----------------------------------------------------------------------------- incidents

LOST: Final = "lost"
"""The event that ends an incident or alert episode no collector carried on (``incident_events`` and
``alert_events``): the collector that tracked it stopped, and the next one could not take it over (started too
long after, another cluster of the name, a clock that stepped back, or it does not poll that cluster at all). Its
time is the last poll that saw it open; how it ended is unknown, so it is neither resolved nor open in the weekly
report."""
INCIDENT_EVENT_ORDER: Final = {"opened": 0, "reopened": 1, "updated": 2, "resolved": 3, LOST: 4}
"""An incident's events in the order they apply within one poll (a resolution last); an unknown event counts as an
update (2). Readers that want an incident's last state sort its events by (time, this)."""
ALERT_EVENT_ORDER: Final = {"open": 0, "restate": 1, "resolve": 2, LOST: 3}
"""An alert episode's events (``alert_events``) in the order they apply within one poll."""
INCIDENT_KINDS: Final = ("broker", "consensus", "topic", "group", "transaction", "cluster", "monitor")
"""Incident kinds (`collectors.alerting.correlation`), in the order on-call should read them when severities tie
(causes before symptoms)."""
MONITOR_INCIDENT: Final = INCIDENT_KINDS[-1]
"""The monitor's own incidents (its history or checkpoint not written): not the cluster's, so not in the weekly
report's headline incident figures (listed by kind all the same)."""
CLUSTER_WIDE_INCIDENT_KINDS: Final = ("broker", "consensus", "cluster", "monitor")
"""Incident kinds of which a cluster has at most one open at a time (every broker down is one ``broker``
incident): their cause is the kind itself. Every other kind (topic, group, transaction) has one per subject."""

# ----------------------------------------------------------------------------- consumer lag statuses

OK, WARN, REWIND, STALL, STOP, ERR = "OK", "WARN", "REWIND", "STALL", "STOP", "ERR"

PARTITION_STATUSES: Final = (OK, WARN, REWIND, STALL, STOP)
"""Burrow's per-partition lag statuses, least to most severe:

* WARN: the consumer moves but falls behind; it may still catch up.
* REWIND: the committed offset went back. Messages are re-read, none are lost, and it is often deliberate
  (an offset reset), but it must be seen because it can also be a bug re-delivering side effects.
* STALL: members hold the partition and do not progress. Worse than a rewind: the backlog grows and no
  other consumer can take the partition over while the stuck member owns it.
* STOP: nobody consumes at all. The backlog grows until retention deletes unread messages: the only
  status that ends in loss.

The index is the status code exported as ``kafka_consumergroup_partition_status_code``.
"""
PARTITION_STATUS_RANK: Final = {s: i for i, s in enumerate(PARTITION_STATUSES)}

GROUP_STATUSES: Final = (OK, WARN, ERR)
"""A group's roll-up, least to most severe (its worst partition decides); index = exported status code."""
GROUP_STATUS_RANK: Final = {s: i for i, s in enumerate(GROUP_STATUSES)}
GROUP_STATUS_OF: Final = {OK: OK, WARN: WARN, REWIND: ERR, STALL: ERR, STOP: ERR}
"""Partition status → the group status it makes."""

INACTIVE, ABANDONED = "INACTIVE", "ABANDONED"
IDLE_GROUP_STATUSES: Final = (INACTIVE, ABANDONED)
"""Statuses of a group nobody runs, for the group and each of its partitions (`collectors.model.activity`):

* INACTIVE: first seen without members and never seen since with members or a moving commit (a group left
  behind long ago, a console consumer): what it lags is not news, so it never pages.
* ABANDONED: no members and no commit for `groups.abandoned_after_s` (default 7 days), whatever it was before:
  hidden from the default dashboard views, never paging.

Both are info. They are not in `PARTITION_STATUSES` / `GROUP_STATUSES` (whose index is the exported status
code of running groups); a group that comes back (members, or a commit that moves) is judged as usual again.
"""
ACTIVE_GROUP, INACTIVE_GROUP, ABANDONED_GROUP = "active", "inactive", "abandoned"
GROUP_ACTIVITIES: Final = (ACTIVE_GROUP, INACTIVE_GROUP, ABANDONED_GROUP)
"""`GroupRecord.activity`; the status of an inactive / abandoned group is INACTIVE / ABANDONED."""

GROUP_STATES: Final = ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead")
"""Consumer group states Kafka reports (DescribeGroups); others are reported as they come."""

# ----------------------------------------------------------------------------- transactions

TXN_STATES: Final = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
                     "Dead", "PrepareEpochFence")
"""Transaction states of Kafka's coordinator (DescribeTransactions)."""
PREPARE_TXN_STATES: Final = frozenset({"PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
"""The coordinator decided; markers are being written. Lingering here means a partition leader is missing."""
OPEN_TXN_STATES: Final = frozenset({"Ongoing"}) | PREPARE_TXN_STATES
"""A transaction is open: it holds the LSO back for read_committed readers of its partitions."""
CLOSED_TXN_STATES: Final = frozenset({"Empty", "CompleteCommit", "CompleteAbort", "Dead"})
"""No transaction open for the producer. Any other string, including a state only a newer Kafka knows, is
reported as-is: it gets no age (we cannot tell it is open, so it cannot be "stuck"), and its producer counts
as known to its coordinator (we cannot tell it is closed either, so what it has open is not "hanging")."""
TRANSACTION_V2: Final = 2
"""The ``transaction.version`` feature level of Transaction V2 (KIP-890 part 2; finalized by default on a new Kafka
4 cluster). From it on, the coordinator bumps the producer's epoch at every transaction end, commit or abort, and
a client that speaks it takes the new epoch: an epoch rise is a transaction end, no sign of a producer restarting
or of the coordinator fencing it. A client older than Kafka 4 keeps the old rules on such a cluster; which rules a
transaction follows is not in DescribeTransactions, so the cluster is judged by the feature, and a producer by
its own transactions only once they prove it keeps the old rules (`collectors.model.txn_clients`)."""


def epochs_bump_at_every_end(transaction_version: int | None) -> bool:
    """Whether a producer epoch rise may be nothing but a transaction's end (`TRANSACTION_V2`); unknown: no."""
    return transaction_version is not None and transaction_version >= TRANSACTION_V2


# ----------------------------------------------------------------------------- loss ledger

TRUNCATION: Final = "truncation"
UNCLEAN_ELECTION: Final = "unclean_election"
RETENTION_SKIPPED: Final = "retention_skipped"
BEYOND_LOG_END: Final = "offset_beyond_log_end"
ZXID_REGRESSED: Final = "zk_zxid_regressed"
TXN_TIMEOUT_ABORT: Final = "txn_timeout_abort"
TXN_PRODUCER_RETURNED: Final = "txn_producer_returned"
LOSS_KINDS: Final = (TRUNCATION, UNCLEAN_ELECTION, RETENTION_SKIPPED, BEYOND_LOG_END, ZXID_REGRESSED,
                     TXN_TIMEOUT_ABORT, TXN_PRODUCER_RETURNED)
"""Kinds of `LossRecord` (the ledger, `collectors.model.loss`)."""
EPOCH_LOSSES: Final = frozenset({TRUNCATION, UNCLEAN_ELECTION})
"""Loss the poller proves from its checkpointed epoch watches (`collectors.model.loss.settle`): once a checkpoint
has moved past it, nothing finds it again, so its ledger rows come before that checkpoint
(`collectors.runtime.sinks`) and the history's memory bound never drops them (`history.writer.NEVER_DROPPED`)."""
LEADER_CHANGE_LOSSES: Final = EPOCH_LOSSES | {BEYOND_LOG_END}
"""A leader change's loss: its truncation, its unclean election, and each group that had read past the truncation
(`collectors.model.loss.truncated_readers`, recorded at the same poll from the commits seen before the change).
Each is recorded at the one poll that proves it; a record of it again has the same `SAME_LOSS` columns."""
SAME_LOSS: Final = ("cluster", "kind", "topic", "partition", "group_id", "epoch_before", "offset")
"""The ledger columns that tell one loss of `LEADER_CHANGE_LOSSES` from another; the report and the dashboard
count the first record of each. A collector watches an epoch until a leader change proves where the new leader
cut it, once: a second record of the cut comes from the same watch seen again, by a collector killed between
writing the ledger and saving its checkpoint (`collectors.runtime.sinks`), with the same count, or by the standby
of an HA pair that could not read the history at its takeover and had watched the same epoch as the holder (one
that watched another epoch across the same leader changes records a cut of its own: `history.loss_rows.covers`
tells those apart, not these columns). The new epoch is not among them: the one seen again may be a later
leader's. `offset` (the cut) tells apart an older
collector's records of a group, written without the truncation's epochs."""
MESSAGES_GONE_KINDS: Final = frozenset({TRUNCATION, RETENTION_SKIPPED})
"""Kinds whose count is messages gone for good; "messages lost" in the dashboard and the report sums these (the
other kinds' counts explain them: a group's reads past a truncation, a ZooKeeper server's transactions)."""

# ----------------------------------------------------------------------------- stale sections

STALE_SECTIONS: Final = ("cluster", "partitions", "offsets", "groups", "transactions", "producers", "configs",
                         "znodes", "zookeeper", "quorum")
"""Parts of a poll that can fail on their own; a failed one is listed in the snapshot's ``stale_sections``
(``cluster``: nothing answered at all)."""
STALE_SUBJECT_KINDS: Final = {"partitions": "topic", "groups": "group", "offsets": "partition",
                              "transactions": "transactional_id", "producers": "partition", "configs": "topic"}
"""The sections a failure can leave stale for some subjects only (one topic's Metadata answered an error, one
group's OffsetFetch refused, one leader's ListOffsets timed out), and what those subjects are: a topic, a group id, a
partition as ``topic-partition``, a transactional id: the alert subjects of the same names. A failure that names
them keeps the open alerts of those subjects only (the snapshot's ``stale_subjects``; a stale topic keeps its
partitions' alerts, `catalogue.kept_over_stale`); one that does not, the whole section's."""


def partition_subject(topic: str, partition: int) -> str:
    """A partition as an alert subject (and a stale subject, `STALE_SUBJECT_KINDS`): ``orders-3``, as Kafka's tools
    name it. One spelling, so that what a failure names matches the alerts it keeps."""
    return f"{topic}-{partition}"


def partition_of(subject: str) -> tuple[str, int] | None:
    """The topic and partition a partition subject names (`partition_subject` read back); None for a subject that
    is no partition's (no ``-`` followed by digits at its end). Unambiguous although topics have dashes of their own:
    the partition number is always the last part, so ``my-topic-12`` is (``my-topic``, 12). Lets a stale topic whose
    partitions this poll could not list (`STALE_SUBJECT_KINDS`) still say which open alerts are its partitions'."""
    topic, dash, number = subject.rpartition("-")
    if not (dash and topic and number.isascii() and number.isdigit()):
        return None
    return topic, int(number)


def topic_of(subject: str) -> str:
    """The topic a partition subject names (`partition_of`); any other subject (a topic's own) is its topic."""
    partition = partition_of(subject)
    return partition[0] if partition is not None else subject


BROKER_PREFIX, VOTER_PREFIX = "broker-", "voter-"


def broker_subject(broker_id: int) -> str:
    """A broker as an alert subject: ``broker-3``."""
    return f"{BROKER_PREFIX}{broker_id}"


def voter_subject(node_id: int) -> str:
    """A KRaft controller voter as an alert subject, by its node id: ``voter-3`` (in combined mode broker 3's node)."""
    return f"{VOTER_PREFIX}{node_id}"


def broker_of(subject: str) -> int | None:
    """The broker id a broker subject names (`broker_subject` read back); None for any other subject."""
    return _node_of(subject, BROKER_PREFIX)


def voter_of(subject: str) -> int | None:
    """The node id a voter subject names (`voter_subject` read back); None for any other subject."""
    return _node_of(subject, VOTER_PREFIX)


def _node_of(subject: str, prefix: str) -> int | None:
    number = subject.removeprefix(prefix)
    return int(number) if number != subject and number.isdigit() else None


STALE_POLLS: Final = 3
"""Poll intervals without a new poll after which a cluster's data is stale: the dashboard marks it STALE, and the
weekly report says its polls stopped (`spark_analytics.weekly_report.stopped_polls_note`)."""

# ----------------------------------------------------------------------------- ZooKeeper probes

ZK_NOT_SERVING: Final = "not serving"
ZK_TIMEOUT: Final = "timeout"
ZK_REFUSED: Final = "refused"
ZK_UNREACHABLE: Final = "unreachable"
ZK_IO_ERROR: Final = "i/o error"
ZK_PROBE_FAILURES: Final = (ZK_NOT_SERVING, ZK_TIMEOUT, ZK_REFUSED, ZK_UNREACHABLE, ZK_IO_ERROR)
"""Why a ZooKeeper server's ``srvr`` probe found it not serving: the ``error`` of its `ZkServerRecord`, short and
stable (the dashboard's tables and the history show it verbatim); `collectors.sources.zk_servers` sets it, the
``zk_node_not_serving`` alert says it in words. Other errors name the four-letter word
(``4lw not whitelisted: srvr, mntr``, ``unparseable srvr answer``)."""
ZK_TLS_FAILED: Final = "TLS failed"
"""A probe's TLS failed, followed by the four-letter word: ``TLS failed: srvr``."""

# ----------------------------------------------------------------------------- partition classes

OFFLINE, UNDER_MIN_ISR, AT_MIN_ISR = "offline", "under_min_isr", "at_min_isr"
UNDER_REPLICATED, HEALTHY = "under_replicated", "healthy"
PARTITION_CLASSES: Final = (OFFLINE, UNDER_MIN_ISR, AT_MIN_ISR, UNDER_REPLICATED, HEALTHY)
"""Worst first. `kafka-topics --unavailable-partitions / --under-min-isr-partitions / --at-min-isr-partitions /
--under-replicated-partitions` in one word per partition."""


def is_offline(leader: int) -> bool:
    """No leader: reads and writes fail."""
    return leader < 0


def is_under_replicated(isr_size: int, replicas: int) -> bool:
    return isr_size < replicas


def is_under_min_isr(isr_size: int, min_isr: int) -> bool:
    """acks=all producers get NOT_ENOUGH_REPLICAS."""
    return isr_size < min_isr


def is_at_min_isr(isr_size: int, min_isr: int) -> bool:
    """One more failure stops acks=all writes."""
    return isr_size == min_isr


def partition_class(leader: int, isr_size: int, replicas: int, min_isr: int) -> str:
    """The worst class a partition is in (a partition under min ISR is also under-replicated; this says the
    former). At min ISR counts only where it differs from fully replicated (RF > min ISR): a topic with
    min ISR = RF is at min ISR whenever it is healthy, which is a configuration risk, not a state."""
    if is_offline(leader):
        return OFFLINE
    if is_under_min_isr(isr_size, min_isr):
        return UNDER_MIN_ISR
    if is_at_min_isr(isr_size, min_isr) and replicas > min_isr:
        return AT_MIN_ISR
    if is_under_replicated(isr_size, replicas):
        return UNDER_REPLICATED
    return HEALTHY
