"""The headline (one row of `spark_analytics.figures.HEADLINE` per cluster) and its week-over-week comparison.

Both combine the report tables once they are collected (small: a row per cluster, broker, group-topic or
transaction), so they are plain pyarrow on the driver: the same figures through Spark cost a plan of ~25 joins
over literals, about 4 s a week on 2 cores for a few thousand rows (docs/performance-log.md, "Step 1").
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from collectors.model.vocabulary import CRITICAL, MONITOR_INCIDENT
from spark_analytics.aggregations.incidents import FROM_INCIDENTS
from spark_analytics.figures import HEADLINE, HEADLINE_NAMES

INCIDENT_COUNTS = ("incidents_opened", "critical_incidents", "incidents_open_at_end")
INCIDENT_TIMES = ("mttr_minutes", "longest_incident_minutes")
Rows = dict[str, dict[str, Any]]
"""Figures by cluster."""


def _per_cluster(t: pa.Table, aggs: dict[str, tuple[str, str]], where: Any = None) -> Rows:
    """``{cluster: {name: value}}`` of ``{name: (column, pyarrow aggregate)}`` (nulls skipped, all-null -> null,
    like Spark's); a column ``""`` with ``count_all`` counts rows."""
    if where is not None and t.num_rows:
        t = t.filter(where)
    if t.num_rows == 0:
        return {}
    specs = [([], "count_all") if fn == "count_all" else (col, fn) for col, fn in aggs.values()]
    g = t.group_by("cluster").aggregate(specs).to_pylist()
    out_names = ["count_all" if fn == "count_all" else f"{col}_{fn}" for col, fn in aggs.values()]
    return {r["cluster"]: {name: r[o] for name, o in zip(aggs, out_names, strict=True)} for r in g}


def _one(t: pa.Table, col: str, fn: str, where: Any = None) -> dict[str, Any]:
    """``{cluster: value}`` of one aggregate (`_per_cluster` with a single figure)."""
    return {c: r["v"] for c, r in _per_cluster(t, {"v": (col, fn)}, where).items()}


def _div(a: Any, b: Any) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _incident_figures(rows: pa.Table) -> Rows:
    """The incident figures over `incidents` or `alert_episodes` rows (the same columns)."""
    out: Rows = {}
    for r in rows.select(["cluster", "opened_in_period", "severity", "status", "resolved_in_period", "duration_s",
                          "open_for_s"]).to_pylist():
        f = out.setdefault(r["cluster"], {"incidents_opened": 0, "critical_incidents": 0, "incidents_open_at_end": 0,
                                          "_mttr": [], "_longest": None})
        f["incidents_opened"] += bool(r["opened_in_period"])
        f["critical_incidents"] += bool(r["opened_in_period"] and r["severity"] == CRITICAL)
        f["incidents_open_at_end"] += r["status"] == "open"
        if r["resolved_in_period"] and r["duration_s"] is not None:
            f["_mttr"].append(r["duration_s"])
        span = r["duration_s"] if r["duration_s"] is not None else r["open_for_s"]
        if span is not None:
            f["_longest"] = span if f["_longest"] is None else max(f["_longest"], span)
    for f in out.values():
        mttr, longest = f.pop("_mttr"), f.pop("_longest")
        f["mttr_minutes"] = sum(mttr) / len(mttr) / 60.0 if mttr else None
        f["longest_incident_minutes"] = None if longest is None else longest / 60.0
    return out


def headline(t: dict[str, pa.Table]) -> pa.Table:
    """One row per polled cluster with every `HEADLINE` figure, from the collected report tables.

    Families whose source has no row for the cluster stay null (no ZooKeeper -> ZooKeeper figures null);
    counts over event tables are 0 for a polled cluster. Incident figures count incidents (one per cause) where
    the history recorded them, but not the monitor's own (`MONITOR_INCIDENT`), alert episodes where it did not
    (version 1: `aggregations.incidents`).
    """
    first = {name: {r["cluster"]: r for r in t[name].to_pylist()}
             for name in ("cluster_health", "cluster_replication", "lso_gap_cluster", "zk_quorum", "incident_source")}
    lag = _per_cluster(t["consumer_lag"], {
        "within": ("polls_within_slo", "sum"), "known": ("polls_with_lag_seconds", "sum"),
        "worst_lag_seconds_p99": ("lag_seconds_p99", "max"), "worst_lag_messages_p99": ("lag_p99", "max"),
        # minutes from the summed polls (integers), not a sum of per-group minutes: a float sum depends on the row
        # order, which differs between a report from the history and one from the roll-ups
        "warn_polls": ("warn_polls", "sum"), "err_polls": ("err_polls", "sum")})
    breaching = _one(t["consumer_lag"], "", "count_all",
                     pc.field("polls_within_slo") < pc.field("polls_with_lag_seconds"))
    hanging = t["hanging_transactions"].select(["cluster", "topic", "partition", "producer_id"]).drop_null()
    hanging = hanging.group_by(["cluster", "topic", "partition", "producer_id"]).aggregate([])
    counts: dict[str, dict[str, Any]] = {  # figure by cluster; 0 for a polled cluster without a row
        "isr_shrinks": _one(t["isr_by_broker"], "isr_shrinks", "sum"),
        "isr_expands": _one(t["isr_by_broker"], "isr_expands", "sum"),
        "controller_changes": _one(t["controller_changes"], "", "count_all"),
        "transactions_seen": _one(t["transaction_summary"], "transactions_seen", "sum"),
        "stuck_transactions": _one(t["transaction_summary"], "stuck_transactions", "sum"),
        "hanging_transactions": _one(hanging, "", "count_all"),
        "epoch_bumps": _one(t["epoch_bumps"], "epoch_bumps", "sum"),
    }
    brokers = _per_cluster(t["broker_availability"], {"min_broker_availability": ("availability", "min"),
                                                      "broker_down_minutes": ("down_minutes", "sum")})
    txn_age = _one(t["transaction_summary"], "longest_open_s", "max")
    zk_rate = _per_cluster(t["zk_write_rate"], {"w": ("writes", "sum"), "s": ("seconds", "sum")})
    retention = _one(t["retention_loss"], "", "count_all")
    elections = _one(t["zk_elections"], "", "count_all")
    behind = _one(t["zk_follower_behind"], "", "count_all", pc.field("polls") >= 2)
    voter = _one(t["kraft_voter_lag"], "lag_p99", "max")
    kraft_changes = _one(t["kraft_leader_changes"], "", "count_all")
    inc = _incident_figures(t["incidents"].filter(pc.field("kind") != MONITOR_INCIDENT) if t["incidents"].num_rows
                            else t["incidents"])
    eps = _incident_figures(t["alert_episodes"])
    out = []
    for p in sorted(t["polls"].to_pylist(), key=lambda r: r["cluster"]):
        c = p["cluster"]
        polled = (p["polls"] or 0) > 0
        row: dict[str, Any] = {"cluster": c, "polls": p["polls"], "poll_interval_s": p["poll_interval_s"],
                               "coverage": p["coverage"]}
        src = first["incident_source"].get(c)
        from_incidents = bool(src and src["source"] == FROM_INCIDENTS)
        figures = (inc if from_incidents else eps).get(c, {})
        for name in INCIDENT_COUNTS + INCIDENT_TIMES:
            row[name] = figures.get(name, 0 if name in INCIDENT_COUNTS else None) if polled else None
        row["alert_episodes_opened"] = eps.get(c, {}).get("incidents_opened", 0) if polled else None
        row["unreachable_minutes"] = (first["cluster_health"].get(c) or {}).get("unreachable_minutes")
        rep = first["cluster_replication"].get(c) or {}
        for name in ("under_replicated_minutes", "under_min_isr_minutes", "offline_minutes", "topics_under_min_isr"):
            row[name] = rep.get(name)
        for name, by_cluster in counts.items():
            row[name] = (by_cluster.get(c) or 0) if polled else None
        row.update(brokers.get(c, {}))
        row["longest_open_txn_s"] = txn_age.get(c)
        row["lso_gap_p99"] = (first["lso_gap_cluster"].get(c) or {}).get("lso_gap_p99")
        rate = zk_rate.get(c)
        row["zk_writes_per_s"] = _div(rate["w"], rate["s"]) if rate else None
        g = lag.get(c)
        if g is not None:
            row.update({k: v for k, v in g.items() if k not in ("within", "known", "warn_polls", "err_polls")})
            iv = p["poll_interval_s"]
            for name in ("warn", "err"):
                n = g[f"{name}_polls"]
                row[f"{name}_minutes"] = None if n is None or iv is None else n * iv / 60.0
            row["lag_slo_share"] = _div(g["within"], g["known"])
            row["groups_breaching_slo"] = breaching.get(c, 0)
        # retention-loss episodes are 0 only where the cluster has consumer groups at all; ZooKeeper / KRaft
        # counts only where it has consensus rows at all
        row["retention_loss_episodes"] = retention.get(c, 0) if g is not None else None
        zk = first["zk_quorum"].get(c)
        row["zk_minutes_without_quorum"] = zk["minutes_without_quorum"] if zk else None
        row["zk_elections"] = elections.get(c, 0) if zk else None
        row["zk_follower_behind_episodes"] = behind.get(c, 0) if zk else None
        kraft = c in voter  # KRaft counts are 0 only where the cluster has voter rows at all
        row["kraft_voter_lag_p99"] = voter.get(c)
        row["kraft_leader_changes"] = kraft_changes.get(c, 0) if kraft else None
        out.append({"cluster": c, **{n: None if row.get(n) is None else float(row[n]) for n in HEADLINE_NAMES}})
    return pa.Table.from_pylist(out, schema=HEADLINE_SCHEMA)


HEADLINE_SCHEMA = pa.schema([("cluster", pa.string()), *[(n, pa.float64()) for n in HEADLINE_NAMES]])
WOW_SCHEMA = pa.schema([("cluster", pa.string()), ("metric", pa.string()), ("label", pa.string()),
                        ("unit", pa.string()), ("polarity", pa.int32()), ("this_week", pa.float64()),
                        ("last_week", pa.float64()), ("change", pa.float64()), ("change_pct", pa.float64()),
                        ("worse", pa.bool_())])


def week_over_week(current: pa.Table, previous: pa.Table) -> pa.Table:
    """Long format: one row per cluster and headline figure with this week, last week and the change.

    ``change`` = this - last; ``change_pct`` relative to last (null when last is 0 or null); ``worse`` is true
    when the change goes the wrong way for that figure (null when either side is missing or neutral).
    """
    last = {r["cluster"]: r for r in previous.to_pylist()}
    out = []
    for r in sorted(current.to_pylist(), key=lambda r: r["cluster"]):
        before = last.get(r["cluster"], {})
        for f in HEADLINE:
            this, prev = r.get(f.name), before.get(f.name)
            change = None if this is None or prev is None else this - prev
            out.append({"cluster": r["cluster"], "metric": f.name, "label": f.label, "unit": f.unit,
                        "polarity": f.polarity, "this_week": this, "last_week": prev, "change": change,
                        "change_pct": None if change is None or not prev else change / abs(prev),
                        "worse": None if f.polarity == 0 or change is None else change * f.polarity > 0})
    return pa.Table.from_pylist(out, schema=WOW_SCHEMA)
