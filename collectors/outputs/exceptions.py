"""What ``exceptions`` granularity exports one by one, most serious first, and where it stops.

``exceptions`` exports per-partition detail only where something is wrong (`exporter.GRANULARITIES`). On a
healthy cluster that is almost nothing; in a big outage it is the world again: one broker down out of twelve on
100,000 partitions leaves about 25,000 of them under-replicated, each with a dozen per-partition series, and
every one of them has an open alert. That is when Prometheus can least afford a jump of several hundred thousand
series, and when nobody reads them one by one: the per-topic roll-ups and the incidents already say what is
wrong and how far it reaches.

So the detail is ranked and cut at a limit per cluster (`ExporterConfig.exceptions_limit`): the partitions, the
group partitions and the alerts each up to the limit, the most serious first; what is left out is counted
(``kafka_monitor_detail_omitted``). Roll-ups, per-group series and incidents are never cut: every shipped
Prometheus rule that pages reads them. The order is stable (ties by name), so that a cluster in the same state
exports the same series from one poll to the next rather than a different sample of them.

Pure functions over the snapshot: the exporter (`collectors.outputs.exporter`) renders what they choose.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from collectors.model.records import AlertRecord, ClusterSnapshot, GroupRecord, PartitionRecord
from collectors.model.vocabulary import (
    ACTIVE_GROUP,
    AT_MIN_ISR,
    ERR,
    HEALTHY,
    OFFLINE,
    OK,
    SEVERITIES,
    UNDER_MIN_ISR,
    UNDER_REPLICATED,
    WARN,
    partition_subject,
)

K = TypeVar("K", bound=Hashable)

DEFAULT_LIMIT = 2_000
"""Partitions (and, apart, group partitions and alerts) per cluster exported one by one in ``exceptions`` mode.
At about a dozen series a partition, a cluster in a bad outage adds some 30,000 series at most, not several
hundred thousand; a cluster with fewer problems than that exports all of them, as before the limit."""

PARTITION_REASONS = (OFFLINE, UNDER_MIN_ISR, "stuck", "alerted", AT_MIN_ISR, UNDER_REPLICATED, "isr_recent",
                     "min_isr_is_rf")
"""Why a partition is exported one by one, most serious first (its rank is the index): no leader (nothing can be
read or written), writes refused, a hanging transaction (a critical page, and few) or ZooKeeper disagreeing, an
open alert on it (loss evidence among them, but also one under_replicated alert a partition of a dead broker), one
failure from refusing writes, short of replicas, an ISR that changed lately (kept to see it flap), and last a full
ISR that is also the min ISR (replication factor = min ISR: a configuration risk, not a state; exported as
``kafka_topic_partition_at_min_isr`` counts it)."""
_RANK = {reason: i for i, reason in enumerate(PARTITION_REASONS)}

GROUP_REASONS = (ERR, "data_deleted", "alerted", WARN, "past_slo")
"""Why a group's partitions are exported one by one, most serious first: ERR, unread data deleted by retention,
an open alert, WARN, past its lag-seconds SLO outside an idle window of its policy."""
_GROUP_RANK = {reason: i for i, reason in enumerate(GROUP_REASONS)}


def partition_reason(p: PartitionRecord, alerted: set[str], stuck: bool, isr_recent: bool) -> str | None:
    """Why partition `p` is exported one by one (`PARTITION_REASONS`); None: it is healthy."""
    kind = p.partition_class
    if kind in (OFFLINE, UNDER_MIN_ISR):
        return kind
    if stuck or p.zk_isr_mismatch:
        return "stuck"
    if alerted and partition_subject(p.topic, p.partition) in alerted:
        return "alerted"
    if kind != HEALTHY:
        return kind
    if isr_recent:
        return "isr_recent"
    return "min_isr_is_rf" if p.at_min_isr else None


def partition_ranks(s: ClusterSnapshot, alerted: set[str], hanging: set[tuple[str, int]],
                    isr_recent: set[tuple[str, str, int]]) -> dict[tuple[str, int], int]:
    """The partitions that are not healthy, each with its rank in `PARTITION_REASONS` (lower: more serious)."""
    c = s.cluster
    out: dict[tuple[str, int], int] = {}
    for p in s.partitions:
        key = (p.topic, p.partition)
        reason = partition_reason(p, alerted, key in hanging, (c, p.topic, p.partition) in isr_recent)
        if reason is not None:
            out[key] = _RANK[reason]
    return out


def group_reason(g: GroupRecord, alerted: set[str], deleted: set[str]) -> str | None:
    """Why group `g`'s partitions are exported one by one (`GROUP_REASONS`); None: it is OK, or nobody runs it and
    retention deleted nothing it had not read."""
    active = g.activity == ACTIVE_GROUP
    if active and g.status == ERR:
        return ERR
    if g.group_id in deleted:
        return "data_deleted"
    if not active:
        return None
    if g.group_id in alerted:
        return "alerted"
    if g.status == WARN:
        return WARN
    if g.status != OK or (g.lag_seconds_slo is not None and g.lag_seconds_max is not None
                          and g.lag_seconds_max > g.lag_seconds_slo and not g.idle):
        return "past_slo"
    return None


def group_ranks(s: ClusterSnapshot, alerted: set[str]) -> dict[str, int]:
    """The groups that are not OK, each with its rank in `GROUP_REASONS`. All of them keep their per-group series;
    their partitions are exported up to the limit (`pick_groups`)."""
    deleted = {gp.group_id for gp in s.group_partitions if gp.below_log_start}
    out: dict[str, int] = {}
    for g in s.groups:
        reason = group_reason(g, alerted, deleted)
        if reason is not None:
            out[g.group_id] = _GROUP_RANK[reason]
    return out


def first(ranked: Mapping[K, int], limit: int) -> tuple[set[K], int]:
    """The `limit` most serious keys of `ranked` (ties by key, so the cut is the same from poll to poll), and how
    many were left out. `limit` 0: all of them."""
    if not limit or len(ranked) <= limit:
        return set(ranked), 0
    order = sorted(ranked, key=lambda k: (ranked[k], k))
    return set(order[:limit]), len(ranked) - limit


@dataclass(frozen=True)
class GroupPick:
    """The groups of `group_ranks` (`groups`: their per-group series) and those whose partitions are exported
    (`partitions`), whole groups only, at most the limit's worth of group partitions; `omitted` group partitions
    of the others."""

    groups: set[str]
    partitions: set[str]
    omitted: int


def pick_groups(ranked: Mapping[str, int], sizes: Mapping[str, int], limit: int) -> GroupPick:
    """Whole groups, most serious first, while their partitions fit in `limit` (0: no limit): a group shown in part
    would show a lag sum its partitions do not add up to. A group that does not fit is passed over for smaller
    ones after it, so that one huge group does not hide every other."""
    total = sum(sizes.get(g, 0) for g in ranked)
    if not limit or total <= limit:
        return GroupPick(set(ranked), set(ranked), 0)
    taken: set[str] = set()
    room = limit
    for gid in sorted(ranked, key=lambda k: (ranked[k], k)):
        n = sizes.get(gid, 0)
        if n <= room:
            taken.add(gid)
            room -= n
    return GroupPick(set(ranked), taken, total - (limit - room))


def group_sizes(s: ClusterSnapshot, groups: Iterable[str]) -> dict[str, int]:
    """Group partitions per group, for those of `groups`."""
    wanted = set(groups)
    return dict(Counter(gp.group_id for gp in s.group_partitions if gp.group_id in wanted))


_SEVERITY_RANK = {sev: i for i, sev in enumerate(SEVERITIES)}


def pick_alerts(alerts: list[AlertRecord], limit: int) -> tuple[list[AlertRecord], int]:
    """The open alerts exported one by one, and how many were left out. The rules with the fewest open alerts come
    first, then by severity, rule and subject: a flood of one rule's alerts (every partition of a dead broker) is
    what gets cut, never the one alert of a rarer rule, the monitor's own among them (the shipped Prometheus rules
    read those series). The incidents, which page, and the per-severity counts are exported whole."""
    if not limit or len(alerts) <= limit:
        return alerts, 0
    per_rule = Counter(a.rule for a in alerts)

    def rank(a: AlertRecord) -> tuple[int, int, str, str]:
        return per_rule[a.rule], _SEVERITY_RANK.get(a.severity, len(_SEVERITY_RANK)), a.rule, a.subject

    return sorted(alerts, key=rank)[:limit], len(alerts) - limit
