"""Prometheus exposition of the latest snapshots: a custom prometheus-client collector, rendered once per poll.

A scrape never reaches the cluster: `SnapshotCollector` turns the snapshots the
poll loop last produced into metric families, and `MetricsServer` serves the
text rendered once after each poll (so a 1M-sample cluster costs one render
per poll, not one per scrape, and concurrent scrapers share it). Names follow
kafka_exporter and kafka-lag-exporter where those exist; everything else is
ours and documented in docs/metrics.md. Every series has a `cluster` label;
unknown values are omitted (never NaN) and lag is never negative. With
`partition_series: false` the per-partition families are left out and only
topic and group roll-ups remain, for clusters where per-partition cardinality
is too much.
"""

from __future__ import annotations

import gzip
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from collectors.model.records import ClusterSnapshot
from collectors.model.vocabulary import GROUP_STATUS_RANK, PARTITION_STATUS_RANK, SEVERITIES

log = logging.getLogger(__name__)


# name → (type, help, label names beyond "cluster"). The docs table is generated from this.
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {}


def _m(name: str, kind: str, help_text: str, *labels: str) -> str:
    METRICS[name] = (kind, help_text, labels)
    return name


# cluster and brokers
BROKERS = _m("kafka_brokers", "gauge", "Brokers registered (alive) in the cluster metadata")
BROKER_UP = _m("kafka_broker_up", "gauge", "1 if the broker is registered and answered this poll", "broker")
BROKER_CONTROLLER = _m("kafka_broker_is_controller", "gauge", "1 for the active controller", "broker")
BROKER_IN_ZK = _m("kafka_broker_registered_in_zookeeper", "gauge", "1 if /brokers/ids/<id> exists", "broker")
CLUSTER_REACHABLE = _m("kafka_monitor_cluster_reachable", "gauge", "1 if the last poll reached the cluster")
CL_OFFLINE = _m("kafka_cluster_offline_partitions", "gauge", "Partitions without a leader")
CL_URP = _m("kafka_cluster_under_replicated_partitions", "gauge", "Partitions with ISR smaller than replicas")
CL_UMI = _m("kafka_cluster_under_min_isr_partitions", "gauge", "Partitions with ISR below min.insync.replicas")
CL_AMI = _m("kafka_cluster_at_min_isr_partitions", "gauge", "Partitions with ISR equal to min.insync.replicas")
# topics
T_PARTS = _m("kafka_topic_partitions", "gauge", "Number of partitions of the topic", "topic")
T_RF = _m("kafka_topic_replication_factor", "gauge", "Replication factor of the topic", "topic")
T_MINISR = _m("kafka_topic_min_insync_replicas", "gauge", "Effective min.insync.replicas", "topic")
T_UNCLEAN = _m("kafka_topic_unclean_leader_election_enabled", "gauge", "1 if unclean election is allowed", "topic")
T_URP = _m("kafka_topic_under_replicated_partitions", "gauge", "Under-replicated partitions of the topic", "topic")
T_UMI = _m("kafka_topic_under_min_isr_partitions", "gauge", "Partitions under min ISR (acks=all fails)", "topic")
T_AMI = _m("kafka_topic_at_min_isr_partitions", "gauge", "Partitions at min ISR (one failure from write stop)",
           "topic")
T_OFFLINE = _m("kafka_topic_offline_partitions", "gauge", "Partitions of the topic without a leader", "topic")
T_IMBAL = _m("kafka_topic_non_preferred_leader_partitions", "gauge", "Partitions led by a non-preferred replica",
             "topic")
T_WRITE = _m("kafka_topic_failures_before_write_stop", "gauge",
             "Broker failures the worst partition can take before acks=all writes stop", "topic")
T_LOSS = _m("kafka_topic_failures_before_data_loss", "gauge",
            "Broker failures the worst partition can take before acknowledged data can be lost", "topic")
T_RET = _m("kafka_topic_retention_seconds", "gauge", "Effective retention.ms in seconds (absent if infinite)",
           "topic")
# partitions (kafka_exporter names first)
P_REPLICAS = _m("kafka_topic_partition_replicas", "gauge", "Replicas of the partition", "topic", "partition")
P_ISR = _m("kafka_topic_partition_in_sync_replica", "gauge", "In-sync replicas of the partition", "topic", "partition")
P_URP = _m("kafka_topic_partition_under_replicated_partition", "gauge", "1 if under-replicated", "topic", "partition")
P_LEADER = _m("kafka_topic_partition_leader", "gauge", "Leader broker id (-1 when offline)", "topic", "partition")
P_PREF = _m("kafka_topic_partition_leader_is_preferred", "gauge", "1 if led by the preferred replica", "topic",
            "partition")
P_CUR = _m("kafka_topic_partition_current_offset", "gauge", "High watermark", "topic", "partition")
P_OLD = _m("kafka_topic_partition_oldest_offset", "gauge", "Log start offset", "topic", "partition")
P_LSO = _m("kafka_topic_partition_last_stable_offset", "gauge", "Last stable offset (read_committed limit)", "topic",
           "partition")
P_LSOGAP = _m("kafka_topic_partition_lso_gap", "gauge", "High watermark minus last stable offset", "topic",
              "partition")
P_UMI = _m("kafka_topic_partition_under_min_isr", "gauge", "1 if ISR below min.insync.replicas", "topic", "partition")
P_AMI = _m("kafka_topic_partition_at_min_isr", "gauge", "1 if ISR equals min.insync.replicas", "topic", "partition")
P_OFF = _m("kafka_topic_partition_offline", "gauge", "1 if the partition has no leader", "topic", "partition")
P_HANG = _m("kafka_topic_partition_hanging_transaction", "gauge",
            "1 if a transaction is open on the partition that no coordinator knows", "topic", "partition")
P_ZKMIS = _m("kafka_topic_partition_zookeeper_isr_mismatch", "gauge", "1 if ZooKeeper's ISR differs from metadata",
             "topic", "partition")
# consumer groups
G_LAG = _m("kafka_consumergroup_lag", "gauge", "High watermark minus committed offset", "consumergroup", "topic",
           "partition")
G_LAGS = _m("kafka_consumergroup_lag_seconds", "gauge", "Age of the oldest unread message (omitted when unknown)",
            "consumergroup", "topic", "partition")
G_CUR = _m("kafka_consumergroup_current_offset", "gauge", "Committed offset", "consumergroup", "topic", "partition")
G_PSTATUS = _m("kafka_consumergroup_partition_status_code", "gauge",
               "Lag status per partition: 0 OK, 1 WARN, 2 REWIND, 3 STALL, 4 STOP", "consumergroup", "topic",
               "partition")
G_LAGSUM = _m("kafka_consumergroup_topic_lag", "gauge",
               "Lag summed over the group's partitions of a topic (kafka_exporter's kafka_consumergroup_lag_sum)",
              "consumergroup", "topic")
G_MAXLAG = _m("kafka_consumergroup_group_max_lag", "gauge", "Largest partition lag of the group", "consumergroup")
G_MAXLAGS = _m("kafka_consumergroup_group_max_lag_seconds", "gauge", "Largest lag in seconds of the group",
               "consumergroup")
G_MEMBERS = _m("kafka_consumergroup_members", "gauge", "Members of the group", "consumergroup")
G_STATUS = _m("kafka_consumergroup_status_code", "gauge", "Group lag status: 0 OK, 1 WARN, 2 ERR", "consumergroup")
G_STATE = _m("kafka_consumergroup_state", "gauge", "1 for the group's current state", "consumergroup", "state")
G_LOST = _m("kafka_consumergroup_retention_loss_partitions", "gauge",
            "Partitions whose committed offset is below the log start (unread data deleted)", "consumergroup")
G_TORET = _m("kafka_consumergroup_seconds_to_retention", "gauge",
             "Estimated seconds until retention deletes unread messages (smallest over partitions)", "consumergroup")
# transactions
X_STATE = _m("kafka_transaction_state", "gauge", "1 for the transactional id's current state", "transactional_id",
             "state")
X_AGE = _m("kafka_transaction_open_age_seconds", "gauge", "Age of the open transaction", "transactional_id")
X_TIMEOUT = _m("kafka_transaction_timeout_seconds", "gauge", "transaction.timeout.ms in seconds", "transactional_id")
X_EPOCH = _m("kafka_transaction_producer_epoch", "gauge", "Producer epoch (rises on fencing and restarts)",
             "transactional_id")
X_HANGING = _m("kafka_transaction_hanging_partitions", "gauge", "Partitions with a hanging transaction")
# ZooKeeper
Z_UP = _m("zookeeper_up", "gauge", "1 if the server answered and serves requests", "server")
Z_LEADER = _m("zookeeper_is_leader", "gauge", "1 if the server is the leader", "server")
Z_MODE = _m("zookeeper_mode", "gauge", "1 for the server's mode", "server", "mode")
Z_EPOCH = _m("zookeeper_zxid_epoch", "gauge", "zxid epoch (high 32 bits); rises with each election", "server")
Z_COUNTER = _m("zookeeper_zxid_sequence", "gauge", "zxid counter (low 32 bits): transactions in this epoch", "server")
Z_LAG = _m("zookeeper_follower_lag", "gauge", "Transactions the follower is behind the leader", "server")
Z_AVG = _m("zookeeper_request_latency_avg_seconds", "gauge", "Average request latency", "server")
Z_MAX = _m("zookeeper_request_latency_max_seconds", "gauge", "Maximum request latency", "server")
Z_OUT = _m("zookeeper_outstanding_requests", "gauge", "Queued requests", "server")
Z_CONN = _m("zookeeper_connections", "gauge", "Client connections", "server")
Z_NODES = _m("zookeeper_znodes", "gauge", "Znodes in the data tree", "server")
Z_LEARN = _m("zookeeper_learners", "gauge", "Learners connected to the leader", "server")
Z_SYNCED = _m("zookeeper_synced_followers", "gauge", "Followers in sync with the leader", "server")
# KRaft
K_LEADER = _m("kafka_kraft_leader_id", "gauge", "Quorum leader id (-1 when none)")
K_EPOCH = _m("kafka_kraft_leader_epoch", "gauge", "Quorum leader epoch")
K_HW = _m("kafka_kraft_high_watermark", "gauge", "Metadata log high watermark")
K_LAG = _m("kafka_kraft_voter_lag", "gauge", "Records a voter or observer is behind the high watermark", "node",
           "role")
K_CAUGHT = _m("kafka_kraft_voter_caught_up_age_seconds", "gauge", "Seconds since the replica was last caught up",
              "node", "role")
# alerts and the monitor itself
A_ALERT = _m("kafka_monitor_alert", "gauge", "1 for every open alert", "rule", "severity", "subject")
A_OPEN = _m("kafka_monitor_alerts_open", "gauge", "Open alerts by severity", "severity")
M_DUR = _m("kafka_monitor_poll_duration_seconds", "gauge", "Duration of the last poll")
M_REQ = _m("kafka_monitor_poll_requests", "gauge", "Requests the last poll sent to the cluster")
M_ERR = _m("kafka_monitor_poll_errors", "gauge", "Errors met by the last poll")
M_STALE = _m("kafka_monitor_stale", "gauge", "1 for each section the last poll could not refresh", "section")
M_AGE = _m("kafka_monitor_data_age_seconds", "gauge", "Seconds since the snapshot was taken (computed at scrape)")
M_POLLS = _m("kafka_monitor_polls", "counter", "Polls completed")
M_HIST = _m("kafka_monitor_history_write_errors", "gauge", "1 if the last history flush failed")


class _Samples(Protocol):
    def add_metric(self, labels: Sequence[str], value: float) -> None: ...


Family = Callable[[str], _Samples]
"""The metric family of a name, created on first use: prometheus-client's for `collect`, our text writer's for
`render_text`. Both take `add_metric(labels, value)`, so one fill serves both."""


class SnapshotCollector(Collector):
    """prometheus-client collector over the latest snapshot per cluster (no cluster requests)."""

    def __init__(self, partition_series: bool = True, clock: Callable[[], float] = time.time) -> None:
        self.partition_series = partition_series
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshots: dict[str, ClusterSnapshot] = {}
        self._polls: dict[str, int] = defaultdict(int)
        self.history_error: bool = False

    def update(self, snapshots: Iterable[ClusterSnapshot]) -> None:
        with self._lock:
            for s in snapshots:
                self._snapshots[s.cluster] = s  # a cluster's new snapshot replaces everything about it
                self._polls[s.cluster] += 1

    def describe(self) -> list[Metric]:
        return []  # dynamic: do not let the registry call collect() at registration

    def collect(self) -> Iterator[Metric]:
        fam: dict[str, Metric] = {}

        def g(name: str) -> Metric:
            m = fam.get(name)
            if m is None:
                kind, help_text, labels = METRICS[name]
                cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                m = fam[name] = cls(name, help_text, labels=("cluster", *labels))
            return m

        self._fill(g)
        return iter(fam.values())

    def render_text(self) -> bytes:
        """The same samples as `collect`, formatted straight to the text exposition format.

        prometheus-client builds a Sample object per series; at a million series
        that is most of a poll interval of CPU. This writes the lines directly
        (about an order of magnitude faster); tests check both paths agree.
        """
        fam: dict[str, _TextFamily] = {}

        def g(name: str) -> _TextFamily:
            m = fam.get(name)
            if m is None:
                m = fam[name] = _TextFamily(name)
            return m

        self._fill(g)
        parts: list[str] = []
        for m in fam.values():
            parts.append(m.header)
            parts.extend(m.lines)
        parts.append("")
        return "\n".join(parts).encode()

    def _fill(self, g: Family) -> None:
        with self._lock:
            snaps = list(self._snapshots.values())
            polls = dict(self._polls)
        now = self._clock()
        for s in snaps:
            self._cluster(s, g, polls.get(s.cluster, 0), now)

    def _cluster(self, s: ClusterSnapshot, g: Family, polls: int, now: float) -> None:
        c = s.cluster
        g(CLUSTER_REACHABLE).add_metric((c,), 1.0 if s.reachable else 0.0)
        g(M_DUR).add_metric((c,), s.poll_duration_s)
        g(M_REQ).add_metric((c,), float(s.requests))
        g(M_ERR).add_metric((c,), float(len(s.errors)))
        g(M_AGE).add_metric((c,), max(0.0, now - s.time))
        g(M_POLLS).add_metric((c,), float(polls))
        g(M_HIST).add_metric((c,), 1.0 if self.history_error else 0.0)
        for section in s.stale_sections:
            g(M_STALE).add_metric((c, section), 1.0)
        sev_counts = dict.fromkeys(SEVERITIES, 0)
        for a in s.alerts:
            g(A_ALERT).add_metric((c, a.rule, a.severity, a.subject), 1.0)
            sev_counts[a.severity] = sev_counts.get(a.severity, 0) + 1
        for sev, n in sev_counts.items():
            g(A_OPEN).add_metric((c, sev), float(n))
        if not s.reachable:
            self._zookeeper(s, g)
            return  # nothing else is known; absent series beat stale ones presented as current
        g(BROKERS).add_metric((c,), float(sum(1 for b in s.brokers if b.alive)))
        for b in s.brokers:
            bid = str(b.broker_id)
            g(BROKER_UP).add_metric((c, bid), 1.0 if b.alive and b.reachable is not False else 0.0)
            g(BROKER_CONTROLLER).add_metric((c, bid), 1.0 if b.is_controller else 0.0)
            if b.in_zookeeper is not None:
                g(BROKER_IN_ZK).add_metric((c, bid), 1.0 if b.in_zookeeper else 0.0)
        self._topics(s, g)
        if self.partition_series:
            self._partitions(s, g)
        self._groups(s, g)
        self._transactions(s, g, now)
        self._zookeeper(s, g)
        self._kraft(s, g, now)

    def _topics(self, s: ClusterSnapshot, g: Family) -> None:
        c = s.cluster
        tot = {CL_OFFLINE: 0, CL_URP: 0, CL_UMI: 0, CL_AMI: 0}
        for t in s.topics:
            lab = (c, t.topic)
            for name, value in ((T_PARTS, t.partitions), (T_RF, t.replication_factor),
                                (T_MINISR, t.min_insync_replicas), (T_UNCLEAN, int(t.unclean_leader_election)),
                                (T_URP, t.under_replicated), (T_UMI, t.under_min_isr), (T_AMI, t.at_min_isr),
                                (T_OFFLINE, t.offline), (T_IMBAL, t.preferred_leader_imbalance),
                                (T_WRITE, t.failures_before_write_stop), (T_LOSS, t.failures_before_data_loss)):
                g(name).add_metric(lab, float(value))
            if t.retention_ms is not None:
                g(T_RET).add_metric(lab, t.retention_ms / 1000.0)
            tot[CL_OFFLINE] += t.offline
            tot[CL_URP] += t.under_replicated
            tot[CL_UMI] += t.under_min_isr
            tot[CL_AMI] += t.at_min_isr
        for name, value in tot.items():
            g(name).add_metric((c,), float(value))

    def _partitions(self, s: ClusterSnapshot, g: Family) -> None:
        c = s.cluster
        hanging = {(p.topic, p.partition) for p in s.producers if p.hanging}
        m_rep, m_isr, m_urp, m_lead, m_pref = g(P_REPLICAS), g(P_ISR), g(P_URP), g(P_LEADER), g(P_PREF)
        m_cur, m_old, m_lso, m_gap = g(P_CUR), g(P_OLD), g(P_LSO), g(P_LSOGAP)
        m_umi, m_ami, m_off, m_hang = g(P_UMI), g(P_AMI), g(P_OFF), g(P_HANG)
        m_zk = g(P_ZKMIS) if s.zookeeper else None
        for p in s.partitions:
            lab = (c, p.topic, str(p.partition))
            isr, rf, offline = len(p.isr), len(p.replicas), p.leader < 0
            m_rep.add_metric(lab, float(rf))
            m_isr.add_metric(lab, float(isr))
            m_urp.add_metric(lab, 1.0 if isr < rf else 0.0)
            m_lead.add_metric(lab, float(p.leader))
            m_pref.add_metric(lab, 1.0 if p.replicas and p.leader == p.replicas[0] else 0.0)
            m_umi.add_metric(lab, 1.0 if isr < p.min_insync_replicas and not offline else 0.0)
            m_ami.add_metric(lab, 1.0 if isr == p.min_insync_replicas and not offline else 0.0)
            m_off.add_metric(lab, 1.0 if offline else 0.0)
            if p.high_watermark is not None:
                m_cur.add_metric(lab, float(p.high_watermark))
            if p.log_start_offset is not None:
                m_old.add_metric(lab, float(p.log_start_offset))
            if p.last_stable_offset is not None:
                m_lso.add_metric(lab, float(p.last_stable_offset))
                if p.high_watermark is not None:
                    m_gap.add_metric(lab, float(max(0, p.high_watermark - p.last_stable_offset)))
            if (p.topic, p.partition) in hanging:
                m_hang.add_metric(lab, 1.0)
            if m_zk is not None and p.zk_isr is not None:
                m_zk.add_metric(lab, 1.0 if sorted(p.zk_isr) != sorted(p.isr) else 0.0)

    def _groups(self, s: ClusterSnapshot, g: Family) -> None:
        c = s.cluster
        lag_sum: dict[tuple[str, str], int] = defaultdict(int)
        lost: dict[str, int] = defaultdict(int)
        to_ret: dict[str, float] = {}
        per_partition = self.partition_series
        m_lag, m_lags, m_cur, m_st = g(G_LAG), g(G_LAGS), g(G_CUR), g(G_PSTATUS)
        for gp in s.group_partitions:
            if gp.lag is not None:
                lag_sum[(gp.group_id, gp.topic)] += gp.lag
            if gp.below_log_start:
                lost[gp.group_id] += 1
            if gp.seconds_to_retention is not None and gp.lag:
                prev = to_ret.get(gp.group_id)
                to_ret[gp.group_id] = gp.seconds_to_retention if prev is None else min(prev, gp.seconds_to_retention)
            if not per_partition:
                continue
            lab = (c, gp.group_id, gp.topic, str(gp.partition))
            if gp.lag is not None:
                m_lag.add_metric(lab, float(gp.lag))
            if gp.lag_seconds is not None:
                m_lags.add_metric(lab, gp.lag_seconds)
            if gp.committed_offset is not None:
                m_cur.add_metric(lab, float(gp.committed_offset))
            m_st.add_metric(lab, float(PARTITION_STATUS_RANK.get(gp.status, 0)))
        for (gid, topic), total in lag_sum.items():
            g(G_LAGSUM).add_metric((c, gid, topic), float(total))
        for grp in s.groups:
            lab = (c, grp.group_id)
            g(G_MEMBERS).add_metric(lab, float(grp.members))
            g(G_STATUS).add_metric(lab, float(GROUP_STATUS_RANK.get(grp.status, 0)))
            g(G_STATE).add_metric((c, grp.group_id, grp.state), 1.0)
            if grp.lag_max is not None:
                g(G_MAXLAG).add_metric(lab, float(grp.lag_max))
            if grp.lag_seconds_max is not None:
                g(G_MAXLAGS).add_metric(lab, grp.lag_seconds_max)
            g(G_LOST).add_metric(lab, float(lost.get(grp.group_id, 0)))
            if grp.group_id in to_ret:
                g(G_TORET).add_metric(lab, to_ret[grp.group_id])

    def _transactions(self, s: ClusterSnapshot, g: Family, now: float) -> None:
        c = s.cluster
        for t in s.transactions:
            lab = (c, t.transactional_id)
            g(X_STATE).add_metric((c, t.transactional_id, t.state), 1.0)
            g(X_TIMEOUT).add_metric(lab, t.timeout_ms / 1000.0)
            g(X_EPOCH).add_metric(lab, float(t.producer_epoch))
            if t.age_seconds is not None:
                g(X_AGE).add_metric(lab, t.age_seconds)
        g(X_HANGING).add_metric((c,), float(sum(1 for p in s.producers if p.hanging)))

    def _zookeeper(self, s: ClusterSnapshot, g: Family) -> None:
        c = s.cluster
        for z in s.zookeeper:
            lab = (c, z.server)
            g(Z_UP).add_metric(lab, 1.0 if z.serving else 0.0)
            g(Z_LEADER).add_metric(lab, 1.0 if z.mode == "leader" else 0.0)
            if z.mode:
                g(Z_MODE).add_metric((c, z.server, z.mode), 1.0)
            for name, value in ((Z_EPOCH, z.zxid_epoch), (Z_COUNTER, z.zxid_counter), (Z_LAG, z.lag_behind_leader),
                                (Z_AVG, None if z.latency_avg_ms is None else z.latency_avg_ms / 1000.0),
                                (Z_MAX, None if z.latency_max_ms is None else z.latency_max_ms / 1000.0),
                                (Z_OUT, z.outstanding_requests), (Z_CONN, z.connections), (Z_NODES, z.znode_count),
                                (Z_LEARN, z.learners), (Z_SYNCED, z.synced_followers)):
                if value is not None:
                    g(name).add_metric(lab, float(value))

    def _kraft(self, s: ClusterSnapshot, g: Family, now: float) -> None:
        if not s.kraft_voters:
            return
        c = s.cluster
        first = s.kraft_voters[0]
        g(K_LEADER).add_metric((c,), float(first.leader_id))
        g(K_EPOCH).add_metric((c,), float(first.leader_epoch))
        g(K_HW).add_metric((c,), float(first.high_watermark))
        for v in s.kraft_voters:
            lab = (c, str(v.node_id), v.role)
            if v.lag is not None:
                g(K_LAG).add_metric(lab, float(v.lag))
            if v.last_caught_up_time is not None:
                g(K_CAUGHT).add_metric(lab, max(0.0, s.time - v.last_caught_up_time))


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _fmt(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


class _TextFamily:
    """Collects one metric family's exposition lines; `add_metric` mirrors prometheus-client's."""

    __slots__ = ("header", "lines", "name", "prefixes")

    def __init__(self, name: str) -> None:
        kind, help_text, labels = METRICS[name]
        self.name = name + "_total" if kind == "counter" else name
        self.header = f"# HELP {self.name} {help_text}\n# TYPE {self.name} {kind}"
        self.prefixes = [f'{n}="' for n in ("cluster", *labels)]
        self.lines: list[str] = []

    def add_metric(self, labels: Sequence[str], value: float) -> None:
        inner = '",'.join(p + _escape(v) for p, v in zip(self.prefixes, labels, strict=True))
        self.lines.append(f'{self.name}{{{inner}"}} {_fmt(value)}')


class MetricsEndpoint:
    """Registry + a cached rendering; `refresh()` after each poll, `render()` per scrape."""

    def __init__(self, partition_series: bool = True) -> None:
        self.collector = SnapshotCollector(partition_series)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self._body = b""
        self._gzip: bytes | None = None
        self._rendered_at = 0.0
        self._lock = threading.Lock()

    def update(self, snapshots: Sequence[ClusterSnapshot]) -> None:
        self.collector.update(snapshots)
        self.refresh()

    def refresh(self) -> None:
        body = self.collector.render_text()
        with self._lock:
            self._body, self._gzip, self._rendered_at = body, None, time.time()

    def render_via_client(self) -> bytes:
        """prometheus-client's own rendering of the registry (the reference the fast path is checked against)."""
        return generate_latest(self.registry)

    def render(self, gzipped: bool = False) -> bytes:
        # data age must be current at scrape time; re-render when the cached text is older than a few seconds
        if time.time() - self._rendered_at > 5.0:
            self.refresh()
        with self._lock:
            if not gzipped:
                return self._body
            if self._gzip is None:
                self._gzip = gzip.compress(self._body, compresslevel=5)
            return self._gzip


class MetricsServer:
    """A small HTTP server for /metrics and /healthz; binds 127.0.0.1 unless configured otherwise."""

    def __init__(self, endpoint: MetricsEndpoint, host: str = "127.0.0.1", port: int = 9308) -> None:
        self.endpoint = endpoint
        handler = _make_handler(endpoint)
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.host = host
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="metrics-http", daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        log.info("serving /metrics on http://%s:%s/metrics", self.host, self.port)
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _make_handler(endpoint: MetricsEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                gz = "gzip" in self.headers.get("Accept-Encoding", "")
                body = endpoint.render(gzipped=gz)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                if gz:
                    self.send_header("Content-Encoding", "gzip")
            elif path in ("/healthz", "/-/healthy"):
                body = b"ok\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
            else:
                body = b"see /metrics\n"
                self.send_response(404)
                self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("http %s", format % args)

    return Handler


def metrics_table_markdown() -> str:
    """The metric table for docs/metrics.md, generated so it cannot drift from the code."""
    lines = ["| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for name, (kind, help_text, labels) in METRICS.items():
        lines.append(f"| `{name}` | {kind} | {', '.join(('cluster', *labels))} | {help_text} |")
    return "\n".join(lines) + "\n"
