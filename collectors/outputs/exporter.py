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
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from collectors.model.records import ClusterSnapshot
from collectors.model.vocabulary import (
    ACTIVE_GROUP,
    GROUP_STATUS_RANK,
    GROUP_STATUSES,
    IDLE_GROUP_STATUSES,
    PARTITION_STATUS_RANK,
    SEVERITIES,
)
from collectors.outputs.api import API_PREFIX, JsonApi

log = logging.getLogger(__name__)


METRICS_FILE = Path(__file__).with_name("metrics.yaml")


def load_metrics(path: Path = METRICS_FILE) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """The metric catalogue (metrics.yaml): name → (type, help, label names beyond "cluster")."""
    out: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    for name, spec in yaml.safe_load(path.read_text(encoding="utf-8")).items():
        if spec.get("kind") not in ("gauge", "counter") or not spec.get("help") or set(spec) - {"kind", "labels",
                                                                                                 "help"}:
            raise ValueError(f"{path}: {name}: needs kind (gauge|counter), help and optional labels, nothing else")
        out[name] = (spec["kind"], spec["help"], tuple(spec.get("labels") or ()))
    return out


METRICS = load_metrics()
"""Every family the exporter serves; the docs table (`metrics_table_markdown`) is generated from it."""


class _Samples(Protocol):
    def add_metric(self, labels: Sequence[str], value: float) -> None: ...


Family = Callable[[str], _Samples]
"""The metric family of a name, created on first use: prometheus-client's for `collect`, our text writer's for
`render_text`. Both take `add_metric(labels, value)`, so one fill serves both."""


class SnapshotCollector(Collector):
    """prometheus-client collector over the latest snapshot per cluster (no cluster requests)."""

    def __init__(self, partition_series: bool = True, clock: Callable[[], float] = time.time,
                 owner_labels: bool = False) -> None:
        self.partition_series = partition_series
        self.owner_labels = owner_labels  # kafka_consumergroup_partition_owner: one series per owned partition
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshots: dict[str, ClusterSnapshot] = {}
        self._polls: dict[str, int] = defaultdict(int)
        # loss evidence since start: (cluster, topic, kind) -> messages, (cluster, kind) -> events
        self._lost: dict[tuple[str, str, str], int] = defaultdict(int)
        self._loss_events: dict[tuple[str, str], int] = defaultdict(int)
        self.history_error: bool = False

    def update(self, snapshots: Iterable[ClusterSnapshot]) -> None:
        with self._lock:
            for s in snapshots:
                self._snapshots[s.cluster] = s  # a cluster's new snapshot replaces everything about it
                self._polls[s.cluster] += 1
                for x in s.losses:
                    self._loss_events[(s.cluster, x.kind)] += 1
                    if x.messages is not None and x.topic is not None:
                        self._lost[(s.cluster, x.topic, x.kind)] += x.messages

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
            lost, loss_events = dict(self._lost), dict(self._loss_events)
        now = self._clock()
        for s in snaps:
            self._cluster(s, g, polls.get(s.cluster, 0), now)
        for (c, topic, kind), n in sorted(lost.items()):
            g("kafka_monitor_messages_lost").add_metric((c, topic, kind), float(n))
        for (c, kind), n in sorted(loss_events.items()):
            g("kafka_monitor_loss_events").add_metric((c, kind), float(n))

    def _cluster(self, s: ClusterSnapshot, g: Family, polls: int, now: float) -> None:
        c = s.cluster
        g("kafka_monitor_cluster_reachable").add_metric((c,), 1.0 if s.reachable else 0.0)
        g("kafka_monitor_poll_duration_seconds").add_metric((c,), s.poll_duration_s)
        g("kafka_monitor_poll_requests").add_metric((c,), float(s.requests))
        g("kafka_monitor_poll_errors").add_metric((c,), float(len(s.errors)))
        g("kafka_monitor_data_age_seconds").add_metric((c,), max(0.0, now - s.time))
        g("kafka_monitor_polls").add_metric((c,), float(polls))
        g("kafka_monitor_history_write_errors").add_metric((c,), 1.0 if self.history_error else 0.0)
        for section in s.stale_sections:
            g("kafka_monitor_stale").add_metric((c, section), 1.0)
        for a in s.alerts:
            g("kafka_monitor_alert").add_metric((c, a.rule, a.severity, a.subject, a.team or ""), 1.0)
        for i in s.incidents:
            g("kafka_monitor_incident").add_metric((c, i.kind, i.subject, i.severity, i.team or ""), 1.0)
        for family, items in (("kafka_monitor_alerts_open", s.alerts), ("kafka_monitor_incidents_open", s.incidents)):
            counts = Counter({sev: 0 for sev in SEVERITIES}) + Counter(x.severity for x in items)
            for sev in (*SEVERITIES, *sorted(set(counts) - set(SEVERITIES))):
                g(family).add_metric((c, sev), float(counts[sev]))
        if not s.reachable:
            self._zookeeper(s, g)
            return  # nothing else is known; absent series beat stale ones presented as current
        g("kafka_brokers").add_metric((c,), float(sum(1 for b in s.brokers if b.alive)))
        for b in s.brokers:
            bid = str(b.broker_id)
            g("kafka_broker_up").add_metric((c, bid), 1.0 if b.alive and b.reachable is not False else 0.0)
            g("kafka_broker_is_controller").add_metric((c, bid), 1.0 if b.is_controller else 0.0)
            if b.in_zookeeper is not None:
                g("kafka_broker_registered_in_zookeeper").add_metric((c, bid), 1.0 if b.in_zookeeper else 0.0)
        self._topics(s, g)
        if self.partition_series:
            self._partitions(s, g)
        self._groups(s, g)
        self._transactions(s, g, now)
        self._zookeeper(s, g)
        self._kraft(s, g, now)

    def _topics(self, s: ClusterSnapshot, g: Family) -> None:
        c = s.cluster
        totals = dict.fromkeys(("offline", "under_replicated", "under_min_isr", "at_min_isr"), 0)
        for t in s.topics:
            lab = (c, t.topic)
            for name, value in (("partitions", t.partitions), ("replication_factor", t.replication_factor),
                                ("min_insync_replicas", t.min_insync_replicas),
                                ("unclean_leader_election_enabled", int(t.unclean_leader_election)),
                                ("under_replicated_partitions", t.under_replicated),
                                ("under_min_isr_partitions", t.under_min_isr), ("at_min_isr_partitions", t.at_min_isr),
                                ("offline_partitions", t.offline),
                                ("non_preferred_leader_partitions", t.preferred_leader_imbalance),
                                ("failures_before_write_stop", t.failures_before_write_stop),
                                ("failures_before_data_loss", t.failures_before_data_loss)):
                g(f"kafka_topic_{name}").add_metric(lab, float(value))
            if t.retention_ms is not None:
                g("kafka_topic_retention_seconds").add_metric(lab, t.retention_ms / 1000.0)
            for key in totals:
                totals[key] += getattr(t, key)
        for key, value in totals.items():
            g(f"kafka_cluster_{key}_partitions").add_metric((c,), float(value))

    def _partitions(self, s: ClusterSnapshot, g: Family) -> None:
        c = s.cluster
        hanging = {(p.topic, p.partition) for p in s.producers if p.hanging}
        def part(name: str) -> _Samples:
            return g(f"kafka_topic_partition_{name}")

        m_rep, m_isr, m_urp = part("replicas"), part("in_sync_replica"), part("under_replicated_partition")
        m_lead, m_pref = part("leader"), part("leader_is_preferred")
        m_cur, m_old, m_lso = part("current_offset"), part("oldest_offset"), part("last_stable_offset")
        m_gap, m_umi, m_ami = part("lso_gap"), part("under_min_isr"), part("at_min_isr")
        m_off, m_hang = part("offline"), part("hanging_transaction")
        m_zk = part("zookeeper_isr_mismatch") if s.zookeeper else None
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
            if self.owner_labels and gp.owner_client_id is not None:
                g("kafka_consumergroup_partition_owner").add_metric(
                    (*lab, gp.owner_client_id, gp.owner_host or "", gp.owner_member_id or ""), 1.0)
        for (gid, topic), total in lag_sum.items():
            g("kafka_consumergroup_topic_lag").add_metric((c, gid, topic), float(total))
        for grp in s.groups:
            if grp.group_id in idle:
                continue
            lab = (c, grp.group_id)
            g("kafka_consumergroup_info").add_metric((c, grp.group_id, grp.team or "", grp.policy or ""), 1.0)
            if grp.lag_seconds_slo is not None:
                g("kafka_consumergroup_lag_seconds_slo").add_metric(lab, grp.lag_seconds_slo)
            g("kafka_consumergroup_members").add_metric(lab, float(grp.members))
            g("kafka_consumergroup_status_code").add_metric(lab, float(GROUP_STATUS_RANK.get(grp.status, 0)))
            g("kafka_consumergroup_state").add_metric((c, grp.group_id, grp.state), 1.0)
            if grp.lag_max is not None:
                g("kafka_consumergroup_group_max_lag").add_metric(lab, float(grp.lag_max))
            if grp.lag_seconds_max is not None:
                g("kafka_consumergroup_group_max_lag_seconds").add_metric(lab, grp.lag_seconds_max)
            g("kafka_consumergroup_retention_loss_partitions").add_metric(lab, float(lost.get(grp.group_id, 0)))
            if grp.group_id in to_ret:
                g("kafka_consumergroup_seconds_to_retention").add_metric(lab, to_ret[grp.group_id])

    def _transactions(self, s: ClusterSnapshot, g: Family, now: float) -> None:
        c = s.cluster
        for t in s.transactions:
            lab = (c, t.transactional_id)
            g("kafka_transaction_state").add_metric((c, t.transactional_id, t.state), 1.0)
            g("kafka_transaction_timeout_seconds").add_metric(lab, t.timeout_ms / 1000.0)
            g("kafka_transaction_producer_epoch").add_metric(lab, float(t.producer_epoch))
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
        for v in s.kraft_voters:
            lab = (c, str(v.node_id), v.role)
            if v.lag is not None:
                g("kafka_kraft_voter_lag").add_metric(lab, float(v.lag))
            if v.last_caught_up_time is not None:
                g("kafka_kraft_voter_caught_up_age_seconds").add_metric(lab, max(0.0, s.time - v.last_caught_up_time))


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


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

    def __init__(self, partition_series: bool = True, owner_labels: bool = False) -> None:
        self.collector = SnapshotCollector(partition_series, owner_labels=owner_labels)
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
    """A small HTTP server for /metrics, /healthz and the read-only JSON API (/api/v1/…, `collectors.outputs.api`);
    binds 127.0.0.1 unless configured otherwise."""

    def __init__(self, endpoint: MetricsEndpoint, host: str = "127.0.0.1", port: int = 9308,
                 api: JsonApi | None = None) -> None:
        self.endpoint = endpoint
        self.api = api
        handler = _make_handler(endpoint, api)
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.host = host
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="metrics-http", daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        log.info("serving /metrics on http://%s:%s/metrics%s", self.host, self.port,
                 f" and the JSON API on http://{self.host}:{self.port}{API_PREFIX}" if self.api is not None else "")
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _make_handler(endpoint: MetricsEndpoint, api: JsonApi | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, status: int, content_type: str, body: bytes, headers: Iterable[tuple[str, str]] = (),
                   head: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _serve(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            head = method == "HEAD"
            if api is not None and (path == "/api" or path.startswith("/api/")):
                ans = api.handle(method, self.path)
                pretty = "pretty" in self.path.partition("?")[2]
                self._reply(ans.status, "application/json", ans.encode(pretty), ans.headers, head)
            elif method not in ("GET", "HEAD"):
                self._reply(405, "text/plain", b"read-only\n", (("Allow", "GET, HEAD"),), head)
            elif path == "/metrics":
                gz = "gzip" in self.headers.get("Accept-Encoding", "")
                self._reply(200, "text/plain; version=0.0.4; charset=utf-8", endpoint.render(gzipped=gz),
                            (("Content-Encoding", "gzip"),) if gz else (), head)
            elif path in ("/healthz", "/-/healthy"):
                self._reply(200, "text/plain", b"ok\n", (), head)
            else:
                hint = b"see /metrics" + (f" or {API_PREFIX}".encode() if api is not None else b"") + b"\n"
                self._reply(404, "text/plain", hint, (), head)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_HEAD(self) -> None:
            self._serve("HEAD")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("http %s", format % args)

    return Handler


def metrics_table_markdown() -> str:
    """The metric table for docs/metrics.md, generated so it cannot drift from the code."""
    lines = ["| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for name, (kind, help_text, labels) in METRICS.items():
        lines.append(f"| `{name}` | {kind} | {', '.join(('cluster', *labels))} | {help_text} |")
    return "\n".join(lines) + "\n"
