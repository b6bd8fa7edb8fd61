"""A poll's records as the history tables' columns (pure: records in, Arrow batches out).

See the package docstring (`collectors.outputs.history`) for the layout and the guarantees.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import date, timedelta
from typing import Any

import pyarrow as pa

from collectors.model.poll import IncidentEvent
from collectors.model.records import AlertRecord, ClusterSnapshot, GroupPartitionRecord
from collectors.model.vocabulary import LOST, PARTITION_STATUS_RANK
from collectors.outputs.history.schema import (
    ALERT_FIELDS,
    HISTORY_SCHEMA_VERSION,
    KRAFT_FIELDS,
    TABLES,
    ZK_FIELDS,
    seconds_to_timestamps,
)

# ----- records -> columns


Columns = dict[str, list[Any]]


def _fields(records: Sequence[Any], names: Iterable[str]) -> Columns:
    return {n: [getattr(r, n) for r in records] for n in names}


def _schema_fields(table: str) -> list[str]:
    return [n for n in TABLES[table].names if n not in ("cluster", "time", "schema_version")]


def snapshot_columns(snap: ClusterSnapshot, opened: Sequence[AlertRecord] = (),
                     resolved: Sequence[AlertRecord] = (), partition_detail: bool = False,
                     incident_events: Sequence[IncidentEvent] = (), thresholds: str | None = None,
                     restated: Sequence[AlertRecord] = (), lost: Sequence[AlertRecord] = ()) -> dict[str, Columns]:
    """One poll as columns per table (``cluster``/``time``/``schema_version`` are added by the writer).

    Tables without rows are left out. Exposed for tests and for the row-count documentation.
    """
    out: dict[str, Columns] = {}
    topics = snap.topics
    out["cluster"] = {
        "cluster_id": [snap.cluster_id], "reachable": [snap.reachable], "stale": [snap.stale],
        "stale_sections": [",".join(snap.stale_sections)], "mode": [snap.mode],
        "controller_id": [snap.controller_id], "poll_duration_s": [snap.poll_duration_s],
        "requests": [snap.requests], "errors": [len(snap.errors)], "brokers": [len(snap.brokers)],
        "topics": [len(topics)], "partitions": [sum(t.partitions for t in topics)],
        "under_replicated": [sum(t.under_replicated for t in topics)],
        "under_min_isr": [sum(t.under_min_isr for t in topics)], "at_min_isr": [sum(t.at_min_isr for t in topics)],
        "offline": [sum(t.offline for t in topics)], "groups": [len(snap.groups)],
        "alerts_open": [len(snap.alerts)], "alerts_critical": [sum(a.severity == "critical" for a in snap.alerts)],
        "incidents_open": [len(snap.incidents)], "thresholds": [thresholds],
        "transaction_version": [snap.transaction_version]}
    if snap.brokers:
        out["brokers"] = _fields(snap.brokers, _schema_fields("brokers"))
    if topics:
        out["topic_health"] = _fields(topics, _schema_fields("topic_health"))
    if snap.partition_changes:
        cols = _fields(snap.partition_changes, ("time", *_schema_fields("partition_changes")))
        cols["cluster"] = [c.cluster for c in snap.partition_changes]  # events carry their own time
        out["partition_changes"] = cols
    if snap.groups or snap.group_partitions:
        out["group_lag"] = _group_lag(snap)
    if partition_detail and snap.group_partitions:
        out["group_partition_lag"] = _fields(snap.group_partitions, _schema_fields("group_partition_lag"))
    open_txns = [t for t in snap.transactions if t.start_time is not None]
    if open_txns:
        out["transactions"] = _fields(open_txns, _schema_fields("transactions"))
    if snap.producers:
        out["producers"] = _fields(snap.producers, _schema_fields("producers"))
    gaps = [(p, g) for p in snap.partitions if (g := p.lso_gap)]
    if gaps:
        out["lso_gap"] = {"topic": [p.topic for p, _ in gaps], "partition": [p.partition for p, _ in gaps],
                          "lso_gap": [g for _, g in gaps], "high_watermark": [p.high_watermark for p, _ in gaps],
                          "last_stable_offset": [p.last_stable_offset for p, _ in gaps]}
    if snap.zookeeper or snap.kraft_voters:
        out["consensus"] = _consensus(snap)
    out.update(event_columns(snap.time, opened, resolved, incident_events, restated, lost))
    if snap.losses:
        cols = _fields(snap.losses, ("time", *_schema_fields("loss_events")))
        cols["cluster"] = [x.cluster for x in snap.losses]  # events carry their own time
        out["loss_events"] = cols
    return out


def event_columns(t: float, opened: Sequence[AlertRecord] = (), resolved: Sequence[AlertRecord] = (),
                  incident_events: Sequence[IncidentEvent] = (), restated: Sequence[AlertRecord] = (),
                  lost: Sequence[AlertRecord] = ()) -> dict[str, Columns]:
    """The ``alert_events`` and ``incident_events`` columns of what a poll at `t` saw happen (tables without rows
    left out). Also the whole of what a collector records of a cluster it no longer polls: the ``lost`` ends of
    what the history left open of it (`collectors.runtime.sinks.HistorySink`)."""
    out: dict[str, Columns] = {}
    if opened or resolved or restated or lost:
        events = ([("open", a) for a in opened] + [("restate", a) for a in restated]
                  + [("resolve", a) for a in resolved] + [(LOST, a) for a in lost])
        cols: Columns = {"event": [e for e, _ in events]}
        cols.update({n: [getattr(a, n) for _, a in events] for n in ALERT_FIELDS})
        if lost:  # a lost alert's row is at its last poll seen open, not at this poll
            cols["time"] = [a.last_seen if e == LOST else t for e, a in events]
        out["alert_events"] = cols
    if incident_events:
        out["incident_events"] = _incident_events(incident_events)
    return out


def _incident_events(events: Sequence[IncidentEvent]) -> Columns:
    """Events carry their own time; `members` (rule → alerts) is JSON text, one object per row."""
    incs = [e.incident for e in events]
    cols: Columns = {"time": [e.time for e in events], "cluster": [i.cluster for i in incs],
                     "event": [e.event for e in events],
                     "members": [json.dumps(i.members, sort_keys=True) for i in incs]}
    for name in ("id", "kind", "subject", "severity", "summary", "opened", "resolved_at", "alerts", "brokers",
                 "partitions", "topics", "offline", "under_min_isr", "at_min_isr", "unclean_topics", "consequences"):
        cols[name] = [getattr(i, name) for i in incs]
    return cols


def _group_lag(snap: ClusterSnapshot) -> Columns:
    """Per group and topic; a group without committed partitions gets one row with topic null."""
    by_group: dict[str, dict[str, list[GroupPartitionRecord]]] = defaultdict(lambda: defaultdict(list))
    for gp in snap.group_partitions:
        by_group[gp.group_id][gp.topic].append(gp)
    cols: Columns = {n: [] for n in _schema_fields("group_lag")}
    groups = {g.group_id: g for g in snap.groups}
    for gid in list(groups) + [g for g in by_group if g not in groups]:
        g = groups.get(gid)
        per_topic = by_group.get(gid) or {None: []}
        for topic, parts in per_topic.items():
            lags = [p.lag for p in parts if p.lag is not None]
            secs = [p.lag_seconds for p in parts if p.lag_seconds is not None]
            to_ret = [p.seconds_to_retention for p in parts if p.seconds_to_retention is not None]
            commits = [p.last_commit_time for p in parts if p.last_commit_time is not None]
            worst = max((p.status for p in parts), key=lambda s: PARTITION_STATUS_RANK.get(s, -1), default="OK")
            row = {"group_id": gid, "topic": topic, "state": g.state if g else None,
                   "members": g.members if g else None, "status": g.status if g else None,
                   "worst_partition_status": worst,
                   "lag_sum": sum(lags) if lags else None, "lag_max": max(lags) if lags else None,
                   "lag_seconds_max": max(secs) if secs else None, "partitions": len(parts),
                   "below_log_start": sum(p.below_log_start for p in parts),
                   "min_seconds_to_retention": min(to_ret) if to_ret else None,
                   "last_commit_time": max(commits) if commits else None}
            for k, v in row.items():
                cols[k].append(v)
    return cols


def _consensus(snap: ClusterSnapshot) -> Columns:
    cols: Columns = {n: [] for n in _schema_fields("consensus")}
    for z in snap.zookeeper:
        row = {n: getattr(z, n) for n in ZK_FIELDS}
        row["kind"] = "zookeeper"
        for k in cols:
            cols[k].append(row.get(k))
    for v in snap.kraft_voters:
        row = {n: getattr(v, n) for n in KRAFT_FIELDS}
        row.update(kind="kraft", server=f"{'observer' if v.role == 'observer' else 'voter'}-{v.node_id}", mode=v.role)
        for k in cols:
            cols[k].append(row.get(k))
    return cols


def _clean_floats(values: list[Any]) -> list[Any]:
    """NaN never reaches a file: it becomes null (sums and charts downstream must not be poisoned)."""
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]


def to_batch(table: str, cols: Columns, cluster: str, t: float) -> pa.RecordBatch:
    schema = TABLES[table]
    n = len(next(iter(cols.values())))
    arrays = []
    for f in schema:
        if f.name == "schema_version":
            values: list[Any] = [HISTORY_SCHEMA_VERSION] * n
        elif f.name in cols:
            values = cols[f.name]
        elif f.name == "cluster":
            values = [cluster] * n
        elif f.name == "time":
            values = [t] * n
        else:
            values = [None] * n
        if pa.types.is_timestamp(f.type):  # records hold epoch seconds; files hold microseconds (version 4)
            arrays.append(seconds_to_timestamps(pa.array(_clean_floats(values), type=pa.float64())).cast(f.type))
            continue
        if pa.types.is_floating(f.type):
            values = _clean_floats(values)
        arrays.append(pa.array(values, type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


_EPOCH = date(1970, 1, 1)
_DAY_US = 86_400_000_000


def _date_of(micros: int) -> str:
    return (_EPOCH + timedelta(days=micros // _DAY_US)).isoformat()


def split_by_date(batch: pa.RecordBatch) -> list[tuple[str, pa.RecordBatch]]:
    """Rows by the UTC date of their ``time`` (as stored: whole microseconds)."""
    times = batch.column("time").cast(pa.int64()).to_pylist()
    dates = {t: _date_of(t) for t in set(times)}
    if len(set(dates.values())) == 1:
        return [(next(iter(dates.values())), batch)]
    idx: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(times):
        idx[dates[t]].append(i)
    return [(d, batch.take(pa.array(rows, pa.int64()))) for d, rows in sorted(idx.items())]


# ----- files


