"""The loss ledger on /metrics (`collectors.outputs.exporter` holds one `LossMetrics` under its lock).

Two kinds of series come from the ledger's rows (`ClusterSnapshot.losses`, `collectors.model.loss`):

* counters of what it recorded since the monitor started: ``kafka_monitor_messages_lost`` (messages, by topic and
  kind) and ``kafka_monitor_loss_events`` (rows, by kind; every kind at 0 before its first, so that ``increase()``
  counts the first);
* ``kafka_consumergroup_retention_loss_partitions``, what the Prometheus alert `KafkaConsumerGroupRetentionDataLoss`
  reads: per group, the partitions retention was seen deleting unread messages on (``retention_skipped`` rows),
  exported while the collector's `RETENTION_LOSS_RULE` alert on the group is open, i.e. ``loss_alert_hold_s``
  after the last such loss, on unreachable polls too (loss seen happen is memory, not this poll's data). The two
  paths open and close together. A commit found below the log start (a monitor started late, a group retention
  passed while nobody ran it) makes no row, so no alert and no series: that state is in the group-partition
  records (``below_log_start``). A collector restarted from its checkpoint keeps the alert open without knowing
  the partitions: the series is 1 then, at least.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from collectors.model.records import ClusterSnapshot
from collectors.model.vocabulary import LOSS_KINDS, RETENTION_SKIPPED
from collectors.outputs.families import Family

RETENTION_LOSS_RULE = "retention_data_loss"
"""The collector rule ``kafka_consumergroup_retention_loss_partitions`` follows (`collectors.alerting.rules.losses`;
outputs do not import the alerting room)."""


def retention_alerted(s: ClusterSnapshot) -> set[str]:
    """The groups of `s` whose `RETENTION_LOSS_RULE` alert is open."""
    return {a.subject for a in s.alerts if a.rule == RETENTION_LOSS_RULE and a.resolved_at is None}


class LossMetrics:
    def __init__(self) -> None:
        self.lost: dict[tuple[str, str, str], int] = defaultdict(int)  # (cluster, topic, kind) -> messages
        self.events: dict[tuple[str, str], int] = defaultdict(int)  # (cluster, kind) -> rows
        self.retention: dict[tuple[str, str], set[str]] = {}
        """(cluster, group) -> the partitions of its retention_skipped rows since its alert opened."""

    def update(self, s: ClusterSnapshot) -> None:
        """Count `s`'s rows; forget the retention loss of the cluster's groups whose alert is no longer open."""
        for x in s.losses:
            self.events[(s.cluster, x.kind)] += 1
            if x.messages is not None and x.topic is not None:
                self.lost[(s.cluster, x.topic, x.kind)] += x.messages
            if x.kind == RETENTION_SKIPPED and x.group_id is not None:
                self.retention.setdefault((s.cluster, x.group_id), set()).add(x.subject)
        if self.retention:
            alerted = retention_alerted(s)
            self.retention = {k: v for k, v in self.retention.items() if k[0] != s.cluster or k[1] in alerted}

    def copy(self) -> LossMetrics:
        out = LossMetrics()
        out.lost.update(self.lost)
        out.events.update(self.events)
        out.retention = {k: set(v) for k, v in self.retention.items()}
        return out

    def fill(self, g: Family, snaps: Iterable[ClusterSnapshot]) -> None:
        """The series above, for the clusters of `snaps` (the exporter's latest snapshot of each)."""
        snaps = list(snaps)
        for s in snaps:
            for gid in sorted(retention_alerted(s)):
                g("kafka_consumergroup_retention_loss_partitions").add_metric(
                    (s.cluster, gid), float(max(1, len(self.retention.get((s.cluster, gid), ())))))
        for (c, topic, kind), n in sorted(self.lost.items()):
            g("kafka_monitor_messages_lost").add_metric((c, topic, kind), float(n))
        for c, kind in sorted({(s.cluster, k) for s in snaps for k in LOSS_KINDS} | set(self.events)):
            g("kafka_monitor_loss_events").add_metric((c, kind), float(self.events.get((c, kind), 0)))
