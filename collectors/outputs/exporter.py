"""Prometheus exposition of the latest snapshots: a custom prometheus-client collector, rendered once per poll.

A scrape never reaches the cluster: `SnapshotCollector` turns the snapshots the
poll loop last produced into metric families, and `MetricsServer` serves the
text rendered once after each poll (so a big cluster costs one render per
poll, not one per scrape, and concurrent scrapers share it). Names follow
kafka_exporter and kafka-lag-exporter where those exist; everything else is
ours and documented in docs/metrics.md. Every series of a cluster has a
`cluster` label; unknown values are omitted (never NaN) and lag is never
negative. How much per-partition detail a body carries is `GRANULARITIES`:
by default only where something is not healthy.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import logging
import platform
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from collectors.model.records import ClusterSnapshot, leader_clock
from collectors.model.vocabulary import (
    ACTIVE_GROUP,
    GROUP_STATUS_RANK,
    GROUP_STATUSES,
    IDLE_GROUP_STATUSES,
    PARTITION_STATUS_RANK,
    SEVERITIES,
)
from collectors.outputs.exceptions import (
    DEFAULT_LIMIT,
    first,
    group_ranks,
    group_sizes,
    partition_ranks,
    pick_alerts,
    pick_groups,
)
from collectors.outputs.families import Family, Samples
from collectors.outputs.http_server import MetricsServer, address_family  # noqa: F401 (its home before the split)
from collectors.outputs.loss_metrics import LossMetrics, retention_alerted
from collectors.outputs.stale_metrics import StaleKinds, fill_stale

log = logging.getLogger(__name__)

try:
    _VERSION = importlib.metadata.version("kafka-reliability-monitor")
except importlib.metadata.PackageNotFoundError:  # run from a checkout without `pip install`
    _VERSION = "0+checkout"


METRICS_FILE = Path(__file__).with_name("metrics.yaml")


def _catalogue(path: Path) -> dict[str, dict[str, Any]]:
    """metrics.yaml, each family checked: kind (gauge|counter), help, optional labels and ``cluster: false``."""
    specs: dict[str, dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))
    for name, spec in specs.items():
        if spec.get("kind") not in ("gauge", "counter") or not spec.get("help") or set(spec) - {"kind", "labels",
                                                                                                 "help", "cluster"}:
            raise ValueError(f"{path}: {name}: needs kind (gauge|counter), help and optional labels / cluster: false,"
                             " nothing else")
    return specs


_SPECS = _catalogue(METRICS_FILE)  # read once: the table below and the process-wide names
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    name: (spec["kind"], spec["help"], tuple(spec.get("labels") or ())) for name, spec in _SPECS.items()}
"""The metric catalogue (metrics.yaml): name → (type, help, label names beyond "cluster"). Every family the
exporter serves; the docs table (`metrics_table_markdown`) is generated from it."""
PROCESS_WIDE: frozenset[str] = frozenset(name for name, spec in _SPECS.items() if spec.get("cluster") is False)
"""Families about the monitor process itself (``cluster: false``): no cluster label."""


def wire_name(name: str) -> str:
    """The name on the wire: counters carry ``_total`` (the exposition format's rule), gauges their own name."""
    return name + "_total" if METRICS[name][0] == "counter" else name


GRANULARITIES = ("exceptions", "partition", "topic")
"""How much per-partition detail /metrics carries (`ExporterConfig.granularity`):

* ``exceptions`` (default): per-topic and per-group roll-ups always (zero problem counts left out), and the
  per-partition families only for partitions that are not healthy (under-replicated, at or under
  min ISR, offline, a hanging transaction, ZooKeeper's ISR disagreeing, an open alert, or an ISR change in the
  last `ISR_RECENT_S`), and per group partition only in groups that are not OK (WARN / ERR, past their
  lag-seconds SLO, with unread data deleted, or with an open alert). A healthy cluster exports about one
  series per partition; a broken one what is broken, the worst first up to a limit (`exceptions`).
* ``partition``: every per-partition series for every partition (kminion's ``granularity: partition``).
* ``topic``: roll-ups only, no per-partition series at all."""

RETENTION_SOON_S = 86_400.0
"""In ``exceptions`` mode a running group's estimate of the time left before retention deletes what it has not
read is exported when under a day (the shipped alert fires under an hour), or when the group is not OK."""

ISR_RECENT_S = 600.0
"""A partition whose ISR changed this recently keeps its per-partition series in ``exceptions`` mode, so that a
flapping ISR (KafkaIsrFlapping counts changes of ``kafka_topic_partition_in_sync_replica`` over 10 minutes) is
seen through its healthy moments too (the default ``thresholds.isr_flap_window_s``)."""


class SnapshotCollector(Collector):
    """prometheus-client collector over the latest snapshot per cluster (no cluster requests)."""

    def __init__(self, clock: Callable[[], float] = time.time, owner_labels: bool = False,
                 granularity: str = "exceptions", exceptions_limit: int = DEFAULT_LIMIT,
                 stale_kinds: StaleKinds | None = None) -> None:
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity must be one of {', '.join(GRANULARITIES)}, not {granularity!r}")
        self.granularity = granularity
        self.exceptions_limit = exceptions_limit  # per cluster, each of partitions, group partitions, alerts; 0: all
        self.owner_labels = owner_labels  # kafka_consumergroup_partition_owner: one series per owned partition
        self.stale_kinds = stale_kinds  # kafka_monitor_stale_subject's kinds by section (None: every twin kind)
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshots: dict[str, ClusterSnapshot] = {}
        self._polls: dict[str, int] = defaultdict(int)
        self._last_ok: dict[str, float] = {}  # cluster -> time of its last poll that reached it
        self._isr_changed: dict[tuple[str, str, int], float] = {}  # (cluster, topic, partition) -> last ISR change
        self._losses = LossMetrics()  # the loss ledger's series: counters since start, retention loss alerted
        # Set by the history sink after each flush, read at each scrape (`fill_scrape_time`).
        self.history_error: bool = False
        self.history_standby: bool = False  # another collector holds the history root's lease

    def update(self, snapshots: Iterable[ClusterSnapshot]) -> None:
        with self._lock:
            for s in snapshots:
                self._snapshots[s.cluster] = s  # a cluster's new snapshot replaces everything about it
                self._polls[s.cluster] += 1
                if s.reachable:
                    self._last_ok[s.cluster] = s.time
                for ch in s.partition_changes:
                    if ch.kind != "leader_change":
                        self._isr_changed[(s.cluster, ch.topic, ch.partition)] = ch.time
                if self._isr_changed:
                    horizon = s.time - ISR_RECENT_S
                    for key in [k for k, t in self._isr_changed.items() if k[0] == s.cluster and t < horizon]:
                        del self._isr_changed[key]
                self._losses.update(s)

    def describe(self) -> list[Metric]:
        return []  # dynamic: do not let the registry call collect() at registration

    def collect(self) -> Iterator[Metric]:
        fam: dict[str, Metric] = {}

        def g(name: str) -> Metric:
            m = fam.get(name)
            if m is None:
                kind, help_text, labels = METRICS[name]
                cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                scope = () if name in PROCESS_WIDE else ("cluster",)
                m = fam[name] = cls(name, help_text, labels=(*scope, *labels))
            return m

        self._fill(g)
        self.fill_scrape_time(g)
        return iter(fam.values())

    def render_text(self) -> bytes:
        """The same samples as `collect`, formatted straight to the text exposition format.

        prometheus-client builds a Sample object per series; at a million series
        that is most of a poll interval of CPU. This writes the lines directly
        (about an order of magnitude faster); tests check both paths agree.
        """
        return _render(self._fill)

    def render_scrape_time(self) -> bytes:
        """The few lines that must be current at each scrape (the data's age per cluster, the history's flags, build
        info), rendered apart from the body so the body can be built once per poll."""
        return _render(self.fill_scrape_time)

    def fill_scrape_time(self, g: Family) -> None:
        with self._lock:
            times = {c: s.time for c, s in self._snapshots.items()}
        now = self._clock()
        for c, t in times.items():
            g("kafka_monitor_data_age_seconds").add_metric((c,), max(0.0, now - t))
        # The history sink sets these after its flush, which runs after the body of the poll is built: in the body,
        # a failed flush showed from the next poll on (and a good one cleared it a poll late).
        for c in times:
            g("kafka_monitor_history_write_errors").add_metric((c,), 1.0 if self.history_error else 0.0)
            g("kafka_monitor_history_standby").add_metric((c,), 1.0 if self.history_standby else 0.0)
        g("kafka_monitor_build_info").add_metric((_VERSION, platform.python_version()), 1.0)

    def _fill(self, g: Family) -> None:
        with self._lock:
            snaps = list(self._snapshots.values())
            polls = dict(self._polls)
            last_ok = dict(self._last_ok)
            isr_recent = set(self._isr_changed)
            losses = self._losses.copy()
        now = self._clock()
        for s in snaps:
            self._cluster(s, g, polls.get(s.cluster, 0), now, last_ok.get(s.cluster), isr_recent)
        losses.fill(g, snaps)

    def _cluster(self, s: ClusterSnapshot, g: Family, polls: int, now: float, last_ok: float | None,
                 isr_recent: set[tuple[str, str, int]]) -> None:
        c = s.cluster
        g("kafka_monitor_cluster_reachable").add_metric((c,), 1.0 if s.reachable else 0.0)
        g("kafka_monitor_poll_duration_seconds").add_metric((c,), s.poll_duration_s)
        g("kafka_monitor_poll_requests").add_metric((c,), float(s.requests))
        g("kafka_monitor_poll_errors").add_metric((c,), float(len(s.errors)))
        if last_ok is not None:
            g("kafka_monitor_last_successful_poll_timestamp_seconds").add_metric((c,), last_ok)
        g("kafka_monitor_polls").add_metric((c,), float(polls))
        if s.transaction_version is not None:
            g("kafka_cluster_transaction_version").add_metric((c,), float(s.transaction_version))
        fill_stale(s, g, None if self.granularity == "partition" else self.exceptions_limit, self.stale_kinds)
        alerted = {a.subject for a in s.alerts if a.resolved_at is None}
        shown = s.alerts
        if self.granularity != "partition":  # one alert per partition of a dead broker is per-partition detail
            shown, omitted = pick_alerts(s.alerts, self.exceptions_limit)
            g("kafka_monitor_detail_omitted").add_metric((c, "alerts"), float(omitted))
        for a in shown:
            g("kafka_monitor_alert").add_metric((c, a.rule, a.severity, a.subject, a.team or ""), 1.0)
        opened = [i for i in s.incidents if i.resolved_at is None]  # a resolved incident never pages
        for i in opened:
            g("kafka_monitor_incident").add_metric((c, i.kind, i.subject, i.severity, i.team or ""), 1.0)
        for family, items in (("kafka_monitor_alerts_open", s.alerts), ("kafka_monitor_incidents_open", opened)):
            counts = Counter({sev: 0 for sev in SEVERITIES}) + Counter(x.severity for x in items)
            for sev in (*SEVERITIES, *sorted(set(counts) - set(SEVERITIES))):
                g(family).add_metric((c, sev), float(counts[sev]))
        if not s.reachable:
            self._zookeeper(s, g)
            return  # nothing else is known; absent series beat stale ones presented as current
        g("kafka_brokers").add_metric((c,), float(sum(1 for b in s.brokers if b.alive)))
        for b in s.brokers:
            bid = str(b.broker_id)
            g("kafka_broker_up").add_metric((c, bid), 1.0 if b.up else 0.0)
            g("kafka_broker_is_controller").add_metric((c, bid), 1.0 if b.is_controller else 0.0)
            if b.in_zookeeper is not None:
                g("kafka_broker_registered_in_zookeeper").add_metric((c, bid), 1.0 if b.in_zookeeper else 0.0)
            if b.metadata_behind_s:  # an exception: only a broker seen behind
                g("kafka_broker_metadata_behind_seconds").add_metric((c, bid), b.metadata_behind_s)
        self._topics(s, g)
        hanging = {(p.topic, p.partition) for p in s.producers if p.hanging}
        detail = self.granularity
        only: set[tuple[str, int]] | None = None
        detail_groups: set[str] | None = None if detail == "partition" else set()
        partition_groups = detail_groups
        if detail == "exceptions":  # the most serious first, up to the limit (collectors.outputs.exceptions)
            limit = self.exceptions_limit
            only, parts_omitted = first(partition_ranks(s, alerted, hanging, isr_recent), limit)
            ranked = group_ranks(s, alerted)
            pick = pick_groups(ranked, group_sizes(s, ranked), limit)
            detail_groups, partition_groups = pick.groups, pick.partitions
            for what, n in (("partitions", parts_omitted), ("group_partitions", pick.omitted)):
                g("kafka_monitor_detail_omitted").add_metric((c, what), float(n))
        if detail != "topic":
            self._partitions(s, g, only, hanging)
        self._groups(s, g, detail_groups, partition_groups)
        if detail != "topic":
            parts = len(s.partitions) if only is None else len(only)
            gps = sum(1 for gp in s.group_partitions if partition_groups is None or gp.group_id in partition_groups)
            g("kafka_monitor_exported_partitions").add_metric((c, detail), float(parts + gps))
        self._transactions(s, g, now)
        self._zookeeper(s, g)
        self._kraft(s, g, now)

    def _topics(self, s: ClusterSnapshot, g: Family) -> None:
        """Per-topic roll-ups. What a topic is (partitions, replication factor, min ISR, retention) always; in
        ``exceptions`` mode its problem counts only where not zero, unclean election only where enabled, and the
        durability posture only where something is wrong or it cannot take one failure (every Prometheus rule
        on them compares with zero or one, so an absent series reads as healthy)."""
        c = s.cluster
        only_exceptions = self.granularity == "exceptions"
        totals = dict.fromkeys(("offline", "under_replicated", "under_min_isr", "at_min_isr"), 0)
        for t in s.topics:
            lab = (c, t.topic)
            g("kafka_topic_partitions").add_metric(lab, float(t.partitions))
            g("kafka_topic_replication_factor").add_metric(lab, float(t.replication_factor))
            g("kafka_topic_min_insync_replicas").add_metric(lab, float(t.min_insync_replicas))
            if t.retention_ms is not None:
                g("kafka_topic_retention_seconds").add_metric(lab, t.retention_ms / 1000.0)
            troubled = bool(t.under_replicated or t.under_min_isr or t.at_min_isr or t.offline)
            posture = (not only_exceptions or troubled or t.failures_before_write_stop <= 0
                       or t.failures_before_data_loss <= 0)
            for name, value in (("unclean_leader_election_enabled", int(t.unclean_leader_election)),
                                ("under_replicated_partitions", t.under_replicated),
                                ("under_min_isr_partitions", t.under_min_isr), ("at_min_isr_partitions", t.at_min_isr),
                                ("offline_partitions", t.offline),
                                ("non_preferred_leader_partitions", t.preferred_leader_imbalance),
                                ("failures_before_write_stop", t.failures_before_write_stop if posture else None),
                                ("failures_before_data_loss", t.failures_before_data_loss if posture else None)):
                if value is None or (only_exceptions and value == 0 and not name.startswith("failures")):
                    continue  # a zero count, unclean election disabled: nothing to see
                g(f"kafka_topic_{name}").add_metric(lab, float(value))
            for key in totals:
                totals[key] += getattr(t, key)
        for key, value in totals.items():
            g(f"kafka_cluster_{key}_partitions").add_metric((c,), float(value))

    def _partitions(self, s: ClusterSnapshot, g: Family, only: set[tuple[str, int]] | None,
                    hanging: set[tuple[str, int]]) -> None:
        """Per-partition series of every partition (``only`` None), or of the partitions in ``only``."""
        c = s.cluster
        def part(name: str) -> Samples:
            return g(f"kafka_topic_partition_{name}")

        m_rep, m_isr, m_urp = part("replicas"), part("in_sync_replica"), part("under_replicated_partition")
        m_lead, m_pref = part("leader"), part("leader_is_preferred")
        m_cur, m_old, m_lso = part("current_offset"), part("oldest_offset"), part("last_stable_offset")
        m_gap, m_umi, m_ami = part("lso_gap"), part("under_min_isr"), part("at_min_isr")
        m_off, m_hang = part("offline"), part("hanging_transaction")
        m_zk = part("zookeeper_isr_mismatch") if s.zookeeper else None
        for p in s.partitions:
            lab = (c, p.topic, str(p.partition))
            if only is not None and (p.topic, p.partition) not in only:
                continue
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

    def _groups(self, s: ClusterSnapshot, g: Family, detail: set[str] | None,
                partition_detail: set[str] | None) -> None:
        """Group roll-ups; all per-group series of ``detail``, per-partition of ``partition_detail`` (None: all)."""
        c = s.cluster
        lag_sum: dict[tuple[str, str], int] = defaultdict(int)
        offset_sum: dict[tuple[str, str], int] = defaultdict(int)
        alerted = retention_alerted(s)  # their kafka_consumergroup_retention_loss_partitions: `LossMetrics.fill`
        to_ret: dict[str, float] = {}
        m_lag, m_lags = g("kafka_consumergroup_lag"), g("kafka_consumergroup_lag_seconds")
        m_cur, m_st = g("kafka_consumergroup_current_offset"), g("kafka_consumergroup_partition_status_code")
        # Groups nobody runs (INACTIVE, ABANDONED) are counted, not exported one by one: their lag is not news,
        # and series for them would only feed alert rules and dashboards with what nobody should act on.
        idle = {grp.group_id for grp in s.groups if grp.activity != ACTIVE_GROUP}
        statuses = Counter(grp.status for grp in s.groups)
        for status in (*GROUP_STATUSES, *IDLE_GROUP_STATUSES, *sorted(set(statuses) - set(GROUP_STATUSES)
                                                                     - set(IDLE_GROUP_STATUSES))):
            g("kafka_consumergroups").add_metric((c, status), float(statuses[status]))
        for gp in s.group_partitions:
            if idle and gp.group_id in idle:
                continue
            if gp.lag is not None:
                lag_sum[(gp.group_id, gp.topic)] += gp.lag
            if gp.committed_offset is not None:
                offset_sum[(gp.group_id, gp.topic)] += gp.committed_offset
            if gp.seconds_to_retention is not None and gp.lag:
                prev = to_ret.get(gp.group_id)
                to_ret[gp.group_id] = gp.seconds_to_retention if prev is None else min(prev, gp.seconds_to_retention)
            if partition_detail is not None and gp.group_id not in partition_detail:
                continue
            lab = (c, gp.group_id, gp.topic, str(gp.partition))
            if gp.lag is not None:
                m_lag.add_metric(lab, float(gp.lag))
            if gp.lag_seconds is not None:
                m_lags.add_metric(lab, gp.lag_seconds)
            if gp.committed_offset is not None:
                m_cur.add_metric(lab, float(gp.committed_offset))
            m_st.add_metric(lab, float(PARTITION_STATUS_RANK.get(gp.status, 0)))
            if self.owner_labels and gp.owner_client_id is not None:
                g("kafka_consumergroup_partition_owner").add_metric(
                    (*lab, gp.owner_client_id, gp.owner_host or "", gp.owner_member_id or ""), 1.0)
        for (gid, topic), total in lag_sum.items():
            g("kafka_consumergroup_lag_sum").add_metric((c, gid, topic), float(total))
        # exceptions mode keeps what every running group has (members, lag per topic, the worst lag in seconds),
        # and the rest where the group is not OK (its detail set) or near its limits; other modes keep all of it
        only_exceptions = self.granularity == "exceptions"

        def full(gid: str) -> bool:
            return not only_exceptions or gid in (detail or ())

        # the committed offsets' sum per topic: its rate is the group's consumption rate
        for (gid, topic), total in offset_sum.items():
            if full(gid):
                g("kafka_consumergroup_current_offset_sum").add_metric((c, gid, topic), float(total))
        for grp in s.groups:
            if grp.group_id in idle:
                continue
            lab = (c, grp.group_id)
            everything = full(grp.group_id)
            if grp.team or grp.policy or not only_exceptions:
                g("kafka_consumergroup_info").add_metric((c, grp.group_id, grp.team or "", grp.policy or ""), 1.0)
            # no lag SLO in an idle window of its policy: KafkaConsumerGroupLagSecondsHigh stays silent, as our rule
            slo = None if grp.idle else grp.lag_seconds_slo
            near_slo = slo is not None and (grp.lag_seconds_max or 0.0) >= slo / 2
            if slo is not None and (everything or near_slo):
                g("kafka_consumergroup_lag_seconds_slo").add_metric(lab, slo)
            g("kafka_consumergroup_members").add_metric(lab, float(grp.members))
            if everything:
                g("kafka_consumergroup_status_code").add_metric(lab, float(GROUP_STATUS_RANK.get(grp.status, 0)))
            if everything or grp.state != "Stable":
                g("kafka_consumergroup_state").add_metric((c, grp.group_id, grp.state), 1.0)
            if grp.lag_max is not None and everything:
                g("kafka_consumergroup_group_max_lag").add_metric(lab, float(grp.lag_max))
            if grp.lag_seconds_max is not None:
                g("kafka_consumergroup_group_max_lag_seconds").add_metric(lab, grp.lag_seconds_max)
            if everything and grp.group_id not in alerted:
                g("kafka_consumergroup_retention_loss_partitions").add_metric(lab, 0.0)
            if grp.group_id in to_ret and (everything or to_ret[grp.group_id] < RETENTION_SOON_S):
                g("kafka_consumergroup_seconds_to_retention").add_metric(lab, to_ret[grp.group_id])

    def _transactions(self, s: ClusterSnapshot, g: Family, now: float) -> None:
        c = s.cluster
        for t in s.transactions:
            lab = (c, t.transactional_id)
            g("kafka_transaction_state").add_metric((c, t.transactional_id, t.state), 1.0)
            g("kafka_transaction_timeout_seconds").add_metric(lab, t.timeout_ms / 1000.0)
            g("kafka_transaction_producer_epoch").add_metric(lab, float(t.producer_epoch))
            if t.epoch_rise_time is not None:  # an older client on a V2 cluster only (`TransactionRecord`)
                g("kafka_transaction_producer_epoch_rise_timestamp_seconds").add_metric(lab, t.epoch_rise_time)
            if t.age_seconds is not None:
                g("kafka_transaction_open_age_seconds").add_metric(lab, t.age_seconds)
        g("kafka_transaction_hanging_partitions").add_metric((c,), float(sum(1 for p in s.producers if p.hanging)))

    def _zookeeper(self, s: ClusterSnapshot, g: Family) -> None:
        c = s.cluster
        for z in s.zookeeper:
            lab = (c, z.server)
            g("zookeeper_up").add_metric(lab, 1.0 if z.serving else 0.0)
            g("zookeeper_is_leader").add_metric(lab, 1.0 if z.mode == "leader" else 0.0)
            if z.mode:
                g("zookeeper_mode").add_metric((c, z.server, z.mode), 1.0)
            for name, value in (("zxid_epoch", z.zxid_epoch), ("zxid_sequence", z.zxid_counter),
                                ("follower_lag", z.lag_behind_leader),
                                ("request_latency_avg_seconds", _seconds(z.latency_avg_ms)),
                                ("request_latency_max_seconds", _seconds(z.latency_max_ms)),
                                ("outstanding_requests", z.outstanding_requests), ("connections", z.connections),
                                ("znodes", z.znode_count), ("learners", z.learners),
                                ("synced_followers", z.synced_followers)):
                if value is not None:
                    g(f"zookeeper_{name}").add_metric(lab, float(value))

    def _kraft(self, s: ClusterSnapshot, g: Family, now: float) -> None:
        if not s.kraft_voters:
            return
        c = s.cluster
        first = s.kraft_voters[0]
        g("kafka_kraft_leader_id").add_metric((c,), float(first.leader_id))
        g("kafka_kraft_leader_epoch").add_metric((c,), float(first.leader_epoch))
        g("kafka_kraft_high_watermark").add_metric((c,), float(first.high_watermark))
        g("kafka_kraft_voters").add_metric((c,), float(sum(v.role != "observer" for v in s.kraft_voters)))
        clock = leader_clock(s.kraft_voters)  # the leader's: never the poll's time (skewed, and answered earlier)
        for v in s.kraft_voters:
            lab = (c, str(v.node_id), v.role)
            if v.lag is not None:
                g("kafka_kraft_voter_lag").add_metric(lab, float(v.lag))
            if v.last_caught_up_time is not None and clock is not None:
                g("kafka_kraft_voter_caught_up_age_seconds").add_metric(lab, max(0.0, clock - v.last_caught_up_time))


def _render(fill: Callable[[Family], None]) -> bytes:
    """The exposition text of what `fill` adds, family by family."""
    fam: dict[str, _TextFamily] = {}

    def g(name: str) -> _TextFamily:
        m = fam.get(name)
        if m is None:
            m = fam[name] = _TextFamily(name)
        return m

    fill(g)
    parts: list[str] = []
    for m in fam.values():
        parts.append(m.header)
        parts.extend(m.lines)
    parts.append("")
    return "\n".join(parts).encode()


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _fmt(value: float) -> str:
    """A sample value as prometheus-client writes it (`floatToGoString`), NaN, +Inf and -Inf included."""
    try:
        return str(int(value)) if value == int(value) and abs(value) < 1e15 else repr(float(value))
    except (ValueError, OverflowError):  # NaN, ±inf
        return "NaN" if value != value else ("+Inf" if value > 0 else "-Inf")


class _TextFamily:
    """Collects one metric family's exposition lines; `add_metric` mirrors prometheus-client's."""

    __slots__ = ("header", "lines", "name", "prefixes")

    def __init__(self, name: str) -> None:
        kind, help_text, labels = METRICS[name]
        self.name = name + "_total" if kind == "counter" else name
        self.header = f"# HELP {self.name} {help_text}\n# TYPE {self.name} {kind}"
        scope = () if name in PROCESS_WIDE else ("cluster",)
        self.prefixes = [f'{n}="' for n in (*scope, *labels)]
        self.lines: list[str] = []

    def add_metric(self, labels: Sequence[str], value: float) -> None:
        inner = '",'.join(p + _escape(v) for p, v in zip(self.prefixes, labels, strict=True))
        self.lines.append(f'{self.name}{{{inner}"}} {_fmt(value)}')


class MetricsEndpoint:
    """The /metrics body, built once per poll (`update`) and served as bytes to every scrape.

    A scrape costs no rendering: the body is the text of the last poll (gzip-compressed once, on the first
    scrape that asks for it), followed by a few lines rendered per scrape — the data's age, build info and the
    process's own metrics. Compressed, those are a second gzip member: a gzip stream may hold several, and
    Prometheus (Go's gzip reader), curl and Python all read them as one."""

    def __init__(self, owner_labels: bool = False, granularity: str = "exceptions",
                 exceptions_limit: int = DEFAULT_LIMIT, stale_kinds: StaleKinds | None = None) -> None:
        self.collector = SnapshotCollector(owner_labels=owner_labels, granularity=granularity,
                                           exceptions_limit=exceptions_limit, stale_kinds=stale_kinds)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self.process = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.process)
        PlatformCollector(registry=self.process)
        GCCollector(registry=self.process)
        self._body = b""
        self._gzip: bytes | None = None
        self._lock = threading.Lock()
        self.renders = 0  # bodies built (once per poll): a scrape never adds one

    def update(self, snapshots: Sequence[ClusterSnapshot]) -> None:
        self.collector.update(snapshots)
        self.refresh()

    def refresh(self) -> None:
        body = self.collector.render_text()
        with self._lock:
            self._body, self._gzip = body, None
            self.renders += 1

    def render_via_client(self) -> bytes:
        """prometheus-client's own rendering of the registry (the reference the fast path is checked against)."""
        return generate_latest(self.registry)

    def render_parts(self, gzipped: bool = False) -> tuple[bytes, bytes]:
        """The body of the last poll and the scrape-time tail, each compressed when asked: written one after the
        other they are the response (no copy of a body that can be tens of megabytes)."""
        tail = self.collector.render_scrape_time() + generate_latest(self.process)
        with self._lock:
            if not gzipped:
                return self._body, tail
            if self._gzip is None:
                self._gzip = gzip.compress(self._body, compresslevel=5)
            body = self._gzip
        return body, gzip.compress(tail, compresslevel=5)

    def render(self, gzipped: bool = False) -> bytes:
        return b"".join(self.render_parts(gzipped))


def metrics_table_markdown() -> str:
    """The metric table for docs/metrics.md, generated so it cannot drift from the code."""
    lines = ["| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for name, (kind, help_text, labels) in METRICS.items():
        scope = () if name in PROCESS_WIDE else ("cluster",)
        lines.append(f"| `{wire_name(name)}` | {kind} | {', '.join((*scope, *labels)) or '—'} | {help_text} |")
    return "\n".join(lines) + "\n"
