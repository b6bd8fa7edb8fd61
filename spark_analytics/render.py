"""The report page: one self-contained HTML file per cluster and week, from the summary and collected frames.

Input is plain pandas frames (already collected, one cluster's rows) and the summary document; nothing here
touches Spark, so the page can be re-rendered from the Parquet tables the job writes. Figures are formatted by
`spark_analytics.formatting` (shared with the dashboard), charts drawn by `spark_analytics.charts`.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from collectors.model.wording import plural
from spark_analytics.charts import (
    Charts,
    chart_brokers,
    chart_incidents,
    chart_isr_brokers,
    chart_kraft,
    chart_lag,
    chart_lag_series,
    chart_lso,
    chart_overview,
    chart_topic_minutes,
    chart_zk,
    incidents_by_severity,
)
from spark_analytics.figures import KEY_FIGURES
from spark_analytics.formatting import (
    MINUTES,
    SHARE,
    fmt_change,
    fmt_counted,
    fmt_duration,
    fmt_num,
    fmt_time,
    fmt_value,
    is_missing,
)

MAX_ROWS = 50

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#222;background:#f6f7f9}
main{max-width:1320px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:4px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid #dde;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}.sub{color:#666;font-size:13px}
.cards{display:grid;grid-template-columns:repeat(6,1fr);gap:8px;margin:10px 0}
.card{background:#fff;border:1px solid #e2e4e8;border-radius:6px;padding:8px 10px}
.card .k{font-size:11px;color:#666;min-height:28px}.card .v{font-size:20px;font-weight:600}
.card .d{font-size:12px}.worse{color:#c62828}.better{color:#2e7d32}.same{color:#777}
.cols{display:grid;grid-template-columns:1fr 1fr 1fr;gap:12px}
.box{background:#fff;border:1px solid #e2e4e8;border-radius:6px;padding:8px 12px}
.box h3{margin-top:4px}
table{border-collapse:collapse;font-size:12.5px;background:#fff;width:100%}
th,td{border:1px solid #e2e4e8;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#eef0f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.bad td{background:#fdecea}.note{background:#fff8e1;border:1px solid #ffe082;border-radius:6px;padding:6px 10px;
font-size:13px;margin:6px 0}.empty{color:#888;font-style:italic;font-size:13px}
.chart{background:#fff;border:1px solid #e2e4e8;border-radius:6px;margin:8px 0}
ul{margin:4px 0;padding-left:20px}li{margin:2px 0;font-size:13px}
"""


# ----------------------------------------------------------------------------------------------- tables


def esc(s: Any) -> str:
    return html.escape("" if is_missing(s) else str(s))


def _txt(v: Any) -> str:
    if isinstance(v, list | tuple) or hasattr(v, "tolist"):
        return ", ".join(str(x) for x in list(v))
    return "" if is_missing(v) else str(v)


def _id(v: Any) -> str:
    return "" if is_missing(v) else str(int(v))


def _pct(v: Any) -> str:
    return fmt_value(v, SHARE)


def _min(v: Any) -> str:
    """Minutes without the unit: the column header says "min"."""
    return "n/a" if is_missing(v) else f"{float(v):,.1f}"


Col = tuple[str, str, Callable[[Any], str]]
NUMERIC_CELLS: frozenset[Callable[[Any], str]] = frozenset({fmt_num, fmt_duration, _id, _pct, _min})
"""Formatters whose cells are right-aligned with tabular digits."""
EPISODE_COLS: tuple[Col, ...] = (("start", "first seen", fmt_time), ("end", "last seen", fmt_time),
                                 ("duration_s", "duration", fmt_duration))
"""The time columns of every episode table (retention loss, hanging transactions, followers behind): runs of
consecutive polls, seen first and last at a poll, lasting one poll interval more than between the two."""


def table(df: pd.DataFrame | None, cols: Sequence[Col], max_rows: int = MAX_ROWS, bad: Callable[[Any], bool] | None
          = None, empty: str = "nothing to show", more_hint: str = "") -> str:
    """An HTML table of `cols` (column, header, formatter); rows where `bad` holds are tinted; the first
    `max_rows` only, with a pointer to the Parquet table for the rest."""
    if df is None or df.empty:
        return f'<p class="empty">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(label)}</th>" for _, label, _ in cols)
    rows = []
    for rec in df.head(max_rows).to_dict("records"):
        cls = ' class="bad"' if bad is not None and bad(rec) else ""
        cells = "".join(f'<td{" class=n" if f in NUMERIC_CELLS else ""}>{esc(f(rec.get(name)))}</td>'
                        for name, _, f in cols)
        rows.append(f"<tr{cls}>{cells}</tr>")
    more = ""
    if len(df) > max_rows:
        more = (f'<p class="sub">{plural(len(df) - max_rows, "more row")} in '
                f'{esc(more_hint or "the Parquet table")}.</p>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"


# ----------------------------------------------------------------------------------------------- summary


def _change(row: dict[str, Any]) -> tuple[str, str]:
    """(text, css class) of a week-over-week change: the signed amount and, except for shares, the change in %."""
    if is_missing(row.get("last_week")):
        return "no data last week", "same"
    if is_missing(row.get("this_week")):
        return "n/a", "same"
    change, unit = row.get("change"), row.get("unit") or ""
    if is_missing(change) or float(change) == 0:
        return "= last week", "same"
    text = fmt_change(change, unit)
    pct = row.get("change_pct")
    if not is_missing(pct) and unit != SHARE:
        text += f" ({float(pct) * 100:+.0f} %)"
    worse = row.get("worse")
    return text, "same" if is_missing(worse) else ("worse" if worse else "better")


def _card(row: dict[str, Any]) -> str:
    text, css = _change(row)
    return (f'<div class="card"><div class="k">{esc(row["label"])}</div>'
            f'<div class="v">{esc(fmt_value(row["this_week"], row["unit"]))}</div>'
            f'<div class="d {css}">{esc(text)}</div></div>')


def summary_block(doc: dict[str, Any]) -> str:
    """The first screen: the key figures' cards, incidents still open, what got worse, worst topics and groups."""
    wow = {r["metric"]: r for r in doc["week_over_week"]}
    cards = "".join(_card(wow[m]) for m in KEY_FIGURES if m in wow)
    worse = [wow[m] for m in doc["worse_than_last_week"] if m in wow]
    worse_html = ("<ul>" + "".join(
        f'<li><b>{esc(r["label"])}</b>: {esc(fmt_value(r["this_week"], r["unit"]))} '
        f'(last week {esc(fmt_value(r["last_week"], r["unit"]))})</li>' for r in worse) + "</ul>"
        if worse else '<p class="empty">nothing got worse than last week'
        + (" (no data for last week)" if not doc.get("previous_available") else "") + "</p>")
    topics = doc["worst_topics"]
    topics_html = ("<ul>" + "".join(
        f'<li><b>{esc(t["topic"])}</b>: {esc(fmt_value(t["under_min_isr_minutes"], MINUTES))} under min ISR, '
        f'{esc(fmt_value(t["offline_minutes"], MINUTES))} offline, '
        f'{esc(fmt_value(t["under_replicated_minutes"], MINUTES))} under-replicated</li>' for t in topics)
        + "</ul>") if topics else '<p class="empty">every topic fully replicated all week</p>'
    groups = doc["worst_groups"]
    groups_html = ("<ul>" + "".join(
        f'<li><b>{esc(g["group_id"])}</b> / {esc(g["topic"])}: p99 {esc(fmt_duration(g["lag_seconds_p99"]))}, '
        f'{esc(_pct(g["slo_share"]))} within SLO, {esc(fmt_value(g["err_minutes"], MINUTES))} in ERR</li>'
        for g in groups) + "</ul>") if groups else '<p class="empty">every group within its lag SLO all week</p>'
    open_inc = doc.get("open_incidents") or []
    open_html = ""
    if open_inc:
        open_html = ('<div class="note"><b>Still open at the end of the week:</b> ' + esc(", ".join(
            f'{i.get("kind") or i.get("rule")} {i["subject"]} (since {fmt_time(i["start"])})' for i in open_inc[:8]))
            + (" …" if len(open_inc) > 8 else "") + "</div>")
    return (f'<div class="cards">{cards}</div>{open_html}<div class="cols">'
            f'<div class="box"><h3>Worse than last week</h3>{worse_html}</div>'
            f'<div class="box"><h3>Worst topics</h3>{topics_html}</div>'
            f'<div class="box"><h3>Worst consumer groups</h3>{groups_html}</div></div>')


# ----------------------------------------------------------------------------------------------- page


def _replication_section(ch: Charts, t: dict[str, pd.DataFrame], doc: dict[str, Any]) -> list[str]:
    """Topic minutes under-replicated / under min ISR / offline, ISR changes, incidents."""
    period_start, period_end = doc["period"]["start_epoch"], doc["period"]["end_epoch"]
    as_of = doc.get("as_of_epoch") or period_end
    parts: list[str] = []
    parts.append("<h2>Replication</h2>")
    parts.append(chart_topic_minutes(ch, t.get("topic_replication")))
    topics = t.get("topic_replication")
    if topics is not None and not topics.empty:
        topics = topics.sort_values(["under_min_isr_minutes", "offline_minutes", "under_replicated_minutes"],
                                    ascending=False)
    parts.append(table(topics, [
        ("topic", "topic", _txt), ("partitions", "partitions", fmt_num), ("replication_factor", "RF", fmt_num),
        ("min_insync_replicas", "min ISR", fmt_num), ("under_replicated_minutes", "under-replicated min", _min),
        ("under_min_isr_minutes", "under min ISR min", _min), ("offline_minutes", "offline min", _min),
        ("under_min_isr_partition_minutes", "under min ISR partition-min", _min),
        ("under_min_isr_max_partitions", "max partitions under min ISR", fmt_num)],
        bad=lambda r: (r.get("under_min_isr_minutes") or 0) > 0 or (r.get("offline_minutes") or 0) > 0,
        empty="no topic health records", more_hint="tables/topic_replication.parquet"))
    parts.append("<h3>ISR shrinks and expands</h3>")
    parts.append(chart_isr_brokers(ch, t.get("isr_by_broker")))
    isr_t = t.get("isr_by_topic")
    if isr_t is not None and not isr_t.empty:
        isr_t = isr_t.sort_values("isr_shrinks", ascending=False)
    parts.append(table(isr_t, [("topic", "topic", _txt), ("isr_shrinks", "shrinks", fmt_num),
                               ("isr_expands", "expands", fmt_num), ("partitions_shrunk", "partitions shrunk", fmt_num),
                               ("leader_changes", "leader changes", fmt_num)], empty="no ISR change per topic",
                       more_hint="tables/isr_by_topic.parquet"))
    parts.append("<h3>Alert episodes (symptoms: one per alert, e.g. per partition; not incidents)</h3>")
    parts.append(chart_incidents(ch, t.get("alert_episodes"), period_start, period_end, as_of))
    parts.append(table(t.get("alert_summary"), [
        ("rule", "rule", _txt), ("severity", "severity", _txt), ("episodes", "episodes", fmt_num),
        ("opened", "opened", fmt_num), ("resolved", "resolved", fmt_num), ("open_at_end", "open at end", fmt_num),
        ("lost", "lost", fmt_num), ("mttr_s", "mean duration", fmt_duration), ("longest_s", "longest", fmt_duration)],
        empty="no alerts"))
    eps = t.get("alert_episodes")
    if eps is not None and not eps.empty:
        eps = incidents_by_severity(eps)
    parts.append(table(eps, [
        ("rule", "rule", _txt), ("severity", "severity", _txt), ("subject", "subject", _txt),
        ("start", "start", fmt_time), ("end", "end", fmt_time), ("status", "status", _txt),
        ("duration_s", "duration", fmt_duration), ("open_for_s", "open for", fmt_duration),
        ("summary", "last summary", _txt)], bad=lambda r: r.get("status") == "open", empty="no alerts",
        more_hint="tables/alert_episodes.parquet", max_rows=30))
    return parts


def _data_lost_section(ch: Charts, t: dict[str, pd.DataFrame], doc: dict[str, Any]) -> list[str]:
    """First: what was lost (the collector's loss ledger), and next to a zero the coverage that makes it true."""
    cov = doc.get("coverage") or {}
    gaps = cov.get("gaps") or []
    seen = (f'{fmt_num(cov.get("polls"))} polls, coverage {esc(_pct(cov.get("coverage")))}'
            + (f'; {plural(len(gaps), "gap")} without polls, longest '
               f'{esc(fmt_duration(max(g["seconds"] for g in gaps)))}'
               f' from {esc(gaps[0]["from"])}' if gaps else "; no gaps"))
    parts = ["<h2>Data lost</h2>"]
    rows = doc.get("data_lost") or []
    if not rows:
        parts.append(f'<p class="sub">No data lost this week, as far as the monitor saw: {seen}.</p>')
        if gaps:
            parts.append('<p class="note">A zero with gaps: what happened while nothing polled is not in it.</p>')
        return parts
    lost = fmt_counted(doc.get("messages_lost"), "committed or unread message")
    parts.append(f'<p class="note">{lost} lost this week '
                 f'(truncations and retention), {plural(len(rows), "ledger line")}; {seen}.</p>')
    parts.append(table(t.get("data_lost"), [
        ("kind", "kind", _txt), ("subject", "partition / group / server / transactional id", _txt),
        ("messages", "messages", fmt_num), ("events", "entries", fmt_num), ("first", "first", fmt_time),
        ("last", "last", fmt_time), ("evidence", "evidence (last)", _txt)],
        bad=lambda r: True, empty="none", more_hint="tables/data_lost.parquet", max_rows=30))
    return parts


def _incidents_section(ch: Charts, t: dict[str, pd.DataFrame], doc: dict[str, Any]) -> list[str]:
    """Incidents (one per cause) by kind, on a time line, and the list; or a pointer to the alert episodes."""
    h = doc["headline"]
    parts = ["<h2>Incidents</h2>"]
    if doc.get("incidents_from") != "incidents":
        parts.append('<p class="note">No incident records in this history (written before schema version 2): '
                     'the incident figures count alert episodes — see "Alert episodes" under Replication.</p>')
        return parts
    period_start, period_end = doc["period"]["start_epoch"], doc["period"]["end_epoch"]
    parts.append(f'<p class="sub">{fmt_counted(h.get("incidents_opened"), "incident")} opened (one per cause: all '
                 f'brokers down at once are one), {fmt_num(h.get("incidents_open_at_end"))} open at the end, MTTR '
                 f'{esc(fmt_value(h.get("mttr_minutes"), MINUTES))}, longest '
                 f'{esc(fmt_value(h.get("longest_incident_minutes"), MINUTES))}; '
                 f'{fmt_counted(h.get("alert_episodes_opened"), "alert episode")} behind them.</p>')
    kinds = t.get("incident_kinds")
    lost = int(kinds["lost"].sum()) if kinds is not None and "lost" in kinds else 0
    if lost:
        parts.append(f'<p class="note">{plural(lost, "incident")} lost by their collector: it stopped with them '
                     'open and the next one started too late, on another cluster of the name, or without that '
                     'cluster in its configuration, to carry them on. Each counts up to the last poll that saw it '
                     'open; how it ended nobody saw.</p>')
    parts.append(table(kinds, [
        ("kind", "kind", _txt), ("opened", "opened", fmt_num), ("critical", "critical", fmt_num),
        ("resolved", "resolved", fmt_num), ("open_at_end", "open at end", fmt_num), ("lost", "lost", fmt_num),
        ("mttr_s", "MTTR", fmt_duration),
        ("longest_s", "longest", fmt_duration), ("alerts", "alerts (most at once, summed)", fmt_num)],
        empty="no incident this week"))
    inc = t.get("incidents")
    if inc is not None and not inc.empty:
        inc = incidents_by_severity(inc).assign(rule=lambda d: d["kind"])
    parts.append(chart_incidents(ch, inc, period_start, period_end, doc.get("as_of_epoch") or period_end,
                                 title="Incidents (opened → resolved)", empty="no incident was open during the week"))
    parts.append(table(inc, [
        ("kind", "kind", _txt), ("severity", "worst severity", _txt), ("subject", "subject", _txt),
        ("start", "opened", fmt_time), ("end", "resolved", fmt_time), ("status", "status", _txt),
        ("duration_s", "duration", fmt_duration), ("open_for_s", "open for", fmt_duration),
        ("alerts", "alerts", fmt_num), ("partitions", "partitions", fmt_num), ("reopens", "reopened", fmt_num),
        ("summary", "last summary", _txt)], bad=lambda r: r.get("status") == "open", empty="no incidents",
        more_hint="tables/incidents.parquet", max_rows=30))
    return parts


def _availability_section(ch: Charts, t: dict[str, pd.DataFrame], doc: dict[str, Any]) -> list[str]:
    """Broker availability, controller changes, cluster reachability."""
    h = doc["headline"]
    parts: list[str] = []
    parts.append("<h2>Availability</h2>")
    parts.append(chart_brokers(ch, t.get("broker_availability")))
    parts.append(table(t.get("broker_availability"), [
        ("broker_id", "broker", _id), ("host", "host", _txt), ("rack", "rack", _txt),
        ("availability", "availability", _pct), ("down_minutes", "down min", _min),
        ("unreachable_polls", "registered but unreachable polls", fmt_num),
        ("controller_polls", "polls as controller", fmt_num)], empty="no broker records",
        bad=lambda r: (r.get("availability") or 1) < 1))
    parts.append(f'<h3>Controller changes: {fmt_num(h.get("controller_changes"))}</h3>')
    parts.append(table(t.get("controller_changes"), [("time", "time", fmt_time), ("controller_before", "from", _id),
                                                    ("controller_after", "to", _id)],
                       empty="the controller did not move"))
    ch_health = t.get("cluster_health")
    if ch_health is not None and not ch_health.empty:
        r = ch_health.iloc[0]
        parts.append(f'<p class="sub">Cluster unreachable {_min(r["unreachable_minutes"])} min · stale sections '
                     f'{_min(r["stale_minutes"])} min · no controller {_min(r["no_controller_minutes"])} min</p>')
    return parts


def _source(doc: dict[str, Any], name: str) -> str:
    """Where a threshold came from, for the page: " (collector's lag_seconds_slo, from history)"."""
    th = (doc.get("thresholds") or {}).get(name)
    if not isinstance(th, dict):
        return ""
    return f" (collector's {th.get('collector_setting')}, from {th.get('from')})"


def _consumers_section(ch: Charts, t: dict[str, pd.DataFrame], doc: dict[str, Any]) -> list[str]:
    """Lag percentiles against the SLO, worst series over time, retention-loss episodes."""
    slo = float(doc["lag_slo_s"])
    parts: list[str] = []
    parts.append("<h2>Consumers</h2>")
    lag = t.get("consumer_lag")
    parts.append(f'<p class="sub">Lag SLO {esc(fmt_duration(slo))}{esc(_source(doc, "lag_slo_s"))}; '
                 'percentiles over polls '
                 f'({esc(doc["percentiles"])}); minutes = polls × poll interval.</p>')
    parts.append(chart_lag(ch, lag, slo))
    parts.append(chart_lag_series(ch, t.get("lag_timeseries"), slo))
    if lag is not None and not lag.empty:
        lag = lag.sort_values(["slo_share", "lag_seconds_p99"], ascending=[True, False], na_position="last")
    parts.append(table(lag, [
        ("group_id", "group", _txt), ("topic", "topic", _txt), ("lag_p50", "lag p50", fmt_num),
        ("lag_p95", "p95", fmt_num), ("lag_p99", "p99", fmt_num), ("lag_max", "max", fmt_num),
        ("lag_seconds_p50", "lag s p50", fmt_duration), ("lag_seconds_p95", "p95", fmt_duration),
        ("lag_seconds_p99", "p99", fmt_duration), ("lag_seconds_max", "max", fmt_duration),
        ("slo_share", "within SLO", _pct), ("warn_minutes", "WARN min", _min), ("err_minutes", "ERR min", _min)],
        bad=lambda r: not is_missing(r.get("slo_share")) and r["slo_share"] < 1,
        empty="no consumer groups", more_hint="tables/consumer_lag.parquet"))
    parts.append("<h3>Retention-loss episodes (committed offset below log start)</h3>")
    parts.append(table(t.get("retention_loss"), [
        ("group_id", "group", _txt), ("topic", "topic", _txt), *EPISODE_COLS,
        ("max_partitions", "partitions", fmt_num)],
        empty="no group lost unread messages to retention"))
    return parts


def _transactions_section(ch: Charts, t: dict[str, pd.DataFrame], doc: dict[str, Any]) -> list[str]:
    """Transactions per id, stuck and hanging ones, LSO gaps."""
    h = doc["headline"]
    parts: list[str] = []
    parts.append("<h2>Transactions</h2>")
    parts.append(f'<p class="sub">{fmt_num(h.get("transactions_seen"))} transactions seen, '
                 f'{fmt_num(h.get("stuck_transactions"))} stuck (open longer than their timeout + '
                 f'{esc(fmt_duration(doc["txn_grace_s"]))}{esc(_source(doc, "txn_grace_s"))}), '
                 f'{fmt_num(h.get("hanging_transactions"))} hanging, '
                 f'longest open {esc(fmt_duration(h.get("longest_open_txn_s")))}.</p>')
    parts.append(chart_lso(ch, t.get("lso_gap"), t.get("transactions_by_id")))
    parts.append(table(t.get("transactions_by_id"), [
        ("transactional_id", "transactional id", _txt), ("transactions_seen", "seen", fmt_num),
        ("stuck", "stuck", fmt_num), ("longest_open_s", "longest open", fmt_duration),
        ("timeout_ms", "timeout ms", fmt_num), ("epoch_bumps", "epoch bumps", fmt_num),
        ("first_epoch", "first epoch", fmt_num), ("last_epoch", "last epoch", fmt_num)],
        bad=lambda r: (r.get("stuck") or 0) > 0, empty="no transactions seen"))
    stuck = t.get("transactions")
    if stuck is not None and not stuck.empty:
        stuck = stuck[stuck["stuck"].fillna(False).astype(bool)]
    parts.append("<h3>Stuck transactions</h3>")
    parts.append(table(stuck, [
        ("transactional_id", "transactional id", _txt), ("start_time", "started", fmt_time),
        ("last_seen", "last seen open", fmt_time), ("max_age_s", "open for", fmt_duration),
        ("timeout_ms", "timeout ms", fmt_num), ("last_state", "last state", _txt),
        ("states", "states", _txt)],
        empty="no transaction stayed open past its timeout"))
    parts.append("<h3>Hanging transactions</h3>")
    parts.append(table(t.get("hanging_transactions"), [
        ("topic", "topic", _txt), ("partition", "partition", _id), ("producer_id", "producer id", _id), *EPISODE_COLS,
        ("txn_start_offset", "txn start offset", fmt_num)], empty="no hanging transaction"))
    parts.append("<h3>LSO gap (percentiles over partition-polls with an open transaction)</h3>")
    parts.append(table(t.get("lso_gap"), [
        ("topic", "topic", _txt), ("partitions", "partitions", fmt_num),
        ("partition_polls", "partition-polls", fmt_num),
        ("lso_gap_p50", "LSO gap p50", fmt_num), ("lso_gap_p95", "p95", fmt_num), ("lso_gap_p99", "p99", fmt_num),
        ("lso_gap_max", "max", fmt_num)], empty="no LSO held back"))
    return parts


def _consensus_section(ch: Charts, t: dict[str, pd.DataFrame], doc: dict[str, Any]) -> list[str]:
    """ZooKeeper elections, quorum, servers and followers behind; the KRaft quorum."""
    h = doc["headline"]
    parts: list[str] = []
    parts.append("<h2>Consensus</h2>")
    zq = t.get("zk_quorum")
    if zq is not None and not zq.empty:
        r = zq.iloc[0]
        parts.append(f'<p class="sub">ZooKeeper: {fmt_counted(h.get("zk_elections"), "leader election")}, '
                     f'{_min(r["minutes_without_quorum"])} min without quorum, {_min(r["minutes_without_leader"])} '
                     f'min with quorum but no leader, {fmt_counted(r["zk_servers"], "server")}.</p>')
        parts.append(chart_zk(ch, t.get("zk_timeseries"), t.get("zk_write_rate"), t.get("zk_elections")))
        parts.append(table(t.get("zk_elections"), [("time", "election seen at", fmt_time),
                                                   ("epoch_before", "epoch before", fmt_num),
                                                   ("epoch_after", "epoch after", fmt_num),
                                                   ("leader", "new leader", _txt)], empty="no leader election"))
        parts.append(table(t.get("zk_servers"), [
            ("server", "server", _txt), ("serving_share", "serving", _pct),
            ("leader_polls", "polls as leader", fmt_num),
            ("max_lag_behind_leader", "max txns behind", fmt_num), ("latency_max_ms", "max latency ms", fmt_num)]))
        parts.append("<h3>Follower-behind episodes</h3>")
        parts.append(table(t.get("zk_follower_behind"), [
            ("server", "server", _txt), *EPISODE_COLS, ("polls", "polls", fmt_num),
            ("max_lag", "max txns behind", fmt_num)],
            empty="no follower was seen behind the leader"))
    else:
        parts.append('<p class="empty">no ZooKeeper records for this cluster this week (KRaft cluster, no '
                     'ZooKeeper configured, or 4lw disabled)</p>')
    kv = t.get("kraft_voter_lag")
    if kv is not None and not kv.empty:
        parts.append(f'<h3>KRaft quorum: {fmt_counted(h.get("kraft_leader_changes"), "leader change")}</h3>')
        parts.append(chart_kraft(ch, kv))
        parts.append(table(t.get("kraft_leader_changes"), [
            ("time", "seen at", fmt_time), ("epoch_before", "epoch before", fmt_num),
            ("epoch_after", "epoch after", fmt_num),
            ("leader_before", "leader before", fmt_num), ("leader_after", "leader after", fmt_num)],
            empty="the KRaft leader did not change"))
        parts.append(table(kv, [("node_id", "node", fmt_num), ("role", "role", _txt), ("polls", "polls", fmt_num),
                                ("lag_p50", "lag p50", fmt_num), ("lag_p95", "p95", fmt_num),
                                ("lag_p99", "p99", fmt_num), ("lag_max", "max", fmt_num)]))
    return parts


def render_report(doc: dict[str, Any], t: dict[str, pd.DataFrame]) -> str:
    """The whole page for one cluster and week. `t` maps table names to that cluster's rows."""
    ch = Charts()
    notes = "".join(f'<div class="note">{esc(n)}</div>' for n in doc["notes"])
    h = doc["headline"]
    parts = [
        f'<h1>Kafka reliability — {esc(doc["cluster"])} — {esc(doc["week"])}</h1>',
        f'<p class="sub">{esc(doc["period"]["start"])} → {esc(doc["period"]["end"])} (UTC) · compared with '
        f'{esc(doc["previous_week"])} · {fmt_num(h.get("polls"))} polls every '
        f'{esc(fmt_duration(h.get("poll_interval_s")))} (median gap) · coverage {esc(_pct(h.get("coverage")))} · '
        f'generated {esc(doc["generated_at"])}</p>',
        summary_block(doc),
        notes,
        "<h2>Overview</h2>",
        chart_overview(ch, t.get("cluster_timeseries"), t.get("zk_elections")),
    ]
    for section in (_data_lost_section, _incidents_section, _replication_section, _availability_section,
                    _consumers_section, _transactions_section, _consensus_section):
        parts += section(ch, t, doc)
    parts.append("<h2>Week over week</h2>")
    parts.append(_wow_table(doc))
    parts += _trend_section(t.get("trend"))
    parts.append(f'<p class="sub">Tables: {esc(", ".join(doc["tables"]))} (Parquet, under tables/). '
                 'Figures: docs/weekly-report.md.</p>')
    body = "\n".join(p for p in parts if p)
    title = f"Kafka reliability {doc['cluster']} {doc['week']}"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{CSS}</style></head><body><main>{body}</main></body></html>")


def _trend_section(trend: pd.DataFrame | None) -> list[str]:
    """Four weeks side by side, from the daily roll-ups (weeks not rolled up are absent)."""
    if trend is None:
        return []
    return ["<h2>Four-week trend</h2>",
            '<p class="sub">From the daily roll-ups (this week and last also from the history where a day has no '
            "roll-up); weeks without roll-ups are left out.</p>",
            table(trend, [("week", "week", _txt), ("days", "days", _id),
                          ("under_min_isr_minutes", "under min ISR (min)", _min),
                          ("under_replicated_minutes", "under-replicated (min)", _min),
                          ("offline_minutes", "offline (min)", _min), ("lag_slo_share", "lag SLO", _pct),
                          ("groups_breaching_slo", "group-topics breaching", _id),
                          ("warn_minutes", "WARN (min)", _min), ("err_minutes", "ERR (min)", _min),
                          ("below_log_start_polls", "polls below log start", _id)],
                  empty="no roll-ups for these weeks (the trend needs --rollups and the daily roll-up job)")]


def _wow_table(doc: dict[str, Any]) -> str:
    rows = []
    for r in doc["week_over_week"]:
        text, css = _change(r)
        rows.append(f'<tr><td>{esc(r["label"])}</td><td class="n">{esc(fmt_value(r["this_week"], r["unit"]))}</td>'
                    f'<td class="n">{esc(fmt_value(r["last_week"], r["unit"]))}</td>'
                    f'<td class="n {css}">{esc(text)}</td></tr>')
    return (f'<table><thead><tr><th>figure</th><th>{esc(doc["week"])}</th><th>{esc(doc["previous_week"])}</th>'
            f'<th>change</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
