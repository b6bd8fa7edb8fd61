"""The report page: one self-contained HTML file per cluster and week (plotly.js inlined once, no CDN).

Input is plain pandas frames (already collected, one cluster's rows) and the summary document; nothing here
touches Spark, so the page can be re-rendered from the Parquet tables the job writes.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from collectors.model.vocabulary import SEVERITY_RANK

COLORS = {"bad": "#d62728", "warn": "#ff7f0e", "ok": "#2ca02c", "info": "#1f77b4", "muted": "#7f7f7f",
          "purple": "#9467bd", "brown": "#8c564b", "pink": "#e377c2", "olive": "#bcbd22", "cyan": "#17becf"}
SEVERITY_COLORS = {"critical": COLORS["bad"], "warning": COLORS["warn"], "info": COLORS["info"]}
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


# ----------------------------------------------------------------------------------------------- formatting


def _isnull(v: Any) -> bool:
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    try:
        return bool(isinstance(v, float) and math.isnan(v))
    except TypeError:
        return False


def fmt_duration(s: Any) -> str:
    if _isnull(s):
        return "n/a"
    s = float(s)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        m, sec = divmod(round(s), 60)
        return f"{m} min {sec:02d} s" if sec else f"{m} min"
    h, rem = divmod(round(s), 3600)
    if h < 48:
        return f"{h} h {rem // 60:02d} min"
    return f"{s / 86400:.1f} d"


def fmt_num(v: Any, digits: int = 1) -> str:
    if _isnull(v):
        return "n/a"
    f = float(v)
    if f.is_integer() and abs(f) < 1e15:
        return f"{int(f):,}"
    return f"{f:,.{digits}f}"


def fmt_value(v: Any, unit: str) -> str:
    if _isnull(v):
        return "n/a"
    if unit == "share":
        return f"{float(v) * 100:.2f} %"
    if unit == "min":
        return f"{float(v):,.1f} min"
    if unit == "s":
        return fmt_duration(v)
    if unit == "/s":
        return f"{float(v):,.2f}/s"
    if unit in ("msgs", "records"):
        return f"{fmt_num(v, 0)} {unit}"
    return fmt_num(v)


def fmt_change(row: dict[str, Any]) -> tuple[str, str]:
    """(text, css class) of a week-over-week change."""
    if _isnull(row.get("last_week")):
        return "no data last week", "same"
    if _isnull(row.get("this_week")):
        return "n/a", "same"
    change = float(row["change"])
    if change == 0:
        return "= last week", "same"
    unit = row.get("unit", "")
    if unit == "share":
        text = f"{change * 100:+.2f} pp"
    elif unit == "s":
        text = ("+" if change > 0 else "−") + fmt_duration(abs(change))
    else:
        text = f"{change:+,.1f}" if not float(change).is_integer() else f"{int(change):+,}"
    pct = row.get("change_pct")
    if not _isnull(pct) and unit != "share":
        text += f" ({float(pct) * 100:+.0f} %)"
    worse = row.get("worse")
    css = "same" if _isnull(worse) else ("worse" if worse else "better")
    return text, css


def fmt_time(t: Any) -> str:
    if _isnull(t):
        return "—"
    return datetime.fromtimestamp(float(t), UTC).strftime("%a %Y-%m-%d %H:%M:%S")


def esc(s: Any) -> str:
    return html.escape("" if _isnull(s) else str(s))


Col = tuple[str, str, Callable[[Any], str]]


def table(df: pd.DataFrame | None, cols: Sequence[Col], max_rows: int = MAX_ROWS, bad: Callable[[Any], bool] | None
          = None, empty: str = "nothing to show", more_hint: str = "") -> str:
    if df is None or df.empty:
        return f'<p class="empty">{esc(empty)}</p>'
    numeric = {"fmt_num", "fmt_duration", "fmt_id", "_pct", "_min"}
    head = "".join(f"<th>{esc(label)}</th>" for _, label, _ in cols)
    rows = []
    for rec in df.head(max_rows).to_dict("records"):
        cls = ' class="bad"' if bad is not None and bad(rec) else ""
        cells = []
        for name, _, f in cols:
            v = rec.get(name)
            cells.append(f'<td{" class=n" if getattr(f, "__name__", "") in numeric else ""}>{esc(f(v))}</td>')
        rows.append(f"<tr{cls}>{''.join(cells)}</tr>")
    more = ""
    if len(df) > max_rows:
        more = f'<p class="sub">{len(df) - max_rows} more row(s) in {esc(more_hint or "the Parquet table")}.</p>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"


def _txt(v: Any) -> str:
    if isinstance(v, list | tuple) or hasattr(v, "tolist"):
        return ", ".join(str(x) for x in list(v))
    return "" if _isnull(v) else str(v)


def fmt_id(v: Any) -> str:
    return "" if _isnull(v) else str(int(v))


def _pct(v: Any) -> str:
    return "n/a" if _isnull(v) else f"{float(v) * 100:.2f} %"


def _min(v: Any) -> str:
    return "n/a" if _isnull(v) else f"{float(v):,.1f}"


def _ts(v: Any) -> str:
    return fmt_time(v)


# ----------------------------------------------------------------------------------------------- charts


class Charts:
    """Figures to HTML; the first one on the page carries plotly.js inline, the rest reference it."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, fig: go.Figure, height: int = 360) -> str:
        fig.update_layout(template="plotly_white", height=height, margin={"l": 60, "r": 20, "t": 40, "b": 40},
                          legend={"orientation": "h", "y": -0.18}, font={"size": 12})
        first = self.count == 0
        self.count += 1
        div = fig.to_html(full_html=False, include_plotlyjs=first,
                          config={"displaylogo": False, "responsive": True})
        return f'<div class="chart">{div}</div>'


def _dt(s: pd.Series) -> pd.Series:
    return pd.to_datetime(s.astype("float64"), unit="s", utc=True)


def chart_overview(ch: Charts, ts: pd.DataFrame | None, zk_el: pd.DataFrame | None) -> str:
    if ts is None or ts.empty:
        return '<p class="empty">no polls in this week</p>'
    x = _dt(ts["bucket"])
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=ts["under_replicated"], name="partitions under-replicated", mode="lines",
                             fill="tozeroy", fillcolor="rgba(255,127,14,0.25)",
                             line={"color": COLORS["warn"], "width": 2, "shape": "hv"}))
    for col, name, color, dash in (("under_min_isr", "partitions under min ISR", COLORS["bad"], "solid"),
                                   ("offline", "partitions offline", COLORS["purple"], "solid"),
                                   ("alerts_critical", "critical alerts open", COLORS["muted"], "dot")):
        fig.add_trace(go.Scatter(x=x, y=ts[col], name=name, mode="lines",
                                 line={"color": color, "width": 2, "shape": "hv", "dash": dash}))
    if zk_el is not None and not zk_el.empty:
        fig.add_trace(go.Scatter(x=_dt(zk_el["time"]), y=[0] * len(zk_el), mode="markers", name="ZooKeeper election",
                                 marker={"symbol": "triangle-up", "size": 12, "color": COLORS["cyan"]}))
    fig.update_layout(title="Worst value per time bucket over the week (UTC)", yaxis_title="count")
    return ch(fig, 340)


def chart_topic_minutes(ch: Charts, topics: pd.DataFrame) -> str:
    if topics is None or topics.empty:
        return ""
    t = topics.copy()
    t["_total"] = t[["under_replicated_minutes", "under_min_isr_minutes", "offline_minutes"]].fillna(0).sum(axis=1)
    t = t[t["_total"] > 0].sort_values("_total", ascending=True).tail(15)
    if t.empty:
        return '<p class="empty">no topic was under-replicated, under min ISR or offline this week</p>'
    fig = go.Figure()
    for col, name, color in (("under_replicated_minutes", "under-replicated", COLORS["warn"]),
                             ("under_min_isr_minutes", "under min ISR", COLORS["bad"]),
                             ("offline_minutes", "offline", COLORS["purple"])):
        fig.add_trace(go.Bar(y=t["topic"], x=t[col], name=name, orientation="h", marker_color=color))
    fig.update_layout(barmode="group", title="Minutes per topic (at least one partition in the condition)",
                      xaxis_title="minutes")
    return ch(fig, max(260, 60 + 38 * len(t)))


def chart_isr_brokers(ch: Charts, isr: pd.DataFrame) -> str:
    if isr is None or isr.empty:
        return '<p class="empty">no ISR shrink or expand recorded</p>'
    b = isr.sort_values("broker")
    fig = go.Figure([go.Bar(x=b["broker"].astype(str), y=b["isr_shrinks"], name="shrinks (left the ISR)",
                            marker_color=COLORS["bad"]),
                     go.Bar(x=b["broker"].astype(str), y=b["isr_expands"], name="expands (rejoined)",
                            marker_color=COLORS["ok"])])
    fig.update_layout(barmode="group", title="ISR shrinks and expands per broker", xaxis_title="broker",
                      yaxis_title="partition changes")
    return ch(fig, 300)




def _by_severity(inc: pd.DataFrame) -> pd.DataFrame:
    """Critical first, then the longest (open ones count up to the end of the data), then the earliest."""
    d = inc.copy()
    d["_rank"] = d["severity"].map(SEVERITY_RANK).fillna(9)
    d["_len"] = d["duration_s"].fillna(d["open_for_s"]).fillna(0)
    return d.sort_values(["_rank", "_len", "start"], ascending=[True, False, True]).drop(columns=["_rank", "_len"])


def chart_incidents(ch: Charts, inc: pd.DataFrame, period_start: float, period_end: float, as_of: float) -> str:
    if inc is None or inc.empty:
        return '<p class="empty">no alert was open during the week</p>'
    d = _by_severity(inc)
    d["_end"] = d["end"].where(d["end"].notna(), as_of)
    # One bar per rule and time span: a broker crash opens the same alert on dozens of partitions at once.
    d["_span"] = d["start"].round(0).astype(str) + "/" + d["_end"].round(0).astype(str)
    g = (d.groupby(["rule", "severity", "_span"], sort=False)
         .agg(start=("start", "first"), end=("end", "first"), _end=("_end", "first"), subject=("subject", "first"),
              n=("subject", "size"))
         .reset_index().head(40))
    g["_label"] = g["rule"].astype(str) + " · " + g["subject"].astype(str) + g["n"].map(
        lambda n: f" (+{n - 1} more)" if n > 1 else "")
    start = g["start"].clip(lower=period_start)
    end = g["_end"].clip(upper=period_end)
    fig = go.Figure()
    for sev, color in SEVERITY_COLORS.items():
        m = g["severity"] == sev
        if not m.any():
            continue
        fig.add_trace(go.Bar(y=g.loc[m, "_label"], base=_dt(start[m]), x=((end[m] - start[m]).clip(lower=1) * 1000),
                             orientation="h", name=sev, marker_color=color,
                             hovertext=[f"{fmt_time(a)} → {fmt_time(b) if not _isnull(b) else 'still open'}"
                                        for a, b in zip(g.loc[m, "start"], g.loc[m, "end"], strict=True)]))
    fig.update_layout(title="Incidents (alert open → resolve)", xaxis={"type": "date"}, barmode="overlay",
                      yaxis={"autorange": "reversed"})
    return ch(fig, max(260, 110 + 26 * len(g)))


def chart_brokers(ch: Charts, b: pd.DataFrame) -> str:
    if b is None or b.empty:
        return '<p class="empty">no broker records this week</p>'
    b = b.sort_values("broker_id")
    colors = [COLORS["ok"] if v >= 0.999 else (COLORS["warn"] if v >= 0.99 else COLORS["bad"])
              for v in b["availability"].fillna(0)]
    fig = go.Figure(go.Bar(x=b["broker_id"].astype(str), y=b["availability"] * 100, marker_color=colors,
                           text=[f"{v * 100:.2f} %" for v in b["availability"].fillna(0)], textposition="outside"))
    lo = max(0.0, float(b["availability"].min() * 100) - 5)
    fig.update_layout(title="Broker availability (share of polls registered)", xaxis_title="broker",
                      yaxis={"title": "%", "range": [lo, 101]})
    return ch(fig, 300)


def chart_lag(ch: Charts, lag: pd.DataFrame, slo_s: float) -> str:
    if lag is None or lag.empty:
        return ""
    d = lag.sort_values("lag_seconds_p99", ascending=False, na_position="last").head(15)
    label = d["group_id"].astype(str) + " / " + d["topic"].astype(str)
    fig = go.Figure()
    for col, name, color in (("lag_seconds_p50", "p50", COLORS["ok"]), ("lag_seconds_p95", "p95", COLORS["warn"]),
                             ("lag_seconds_p99", "p99", COLORS["bad"]), ("lag_seconds_max", "max", COLORS["muted"])):
        fig.add_trace(go.Bar(x=label, y=d[col], name=name, marker_color=color))
    fig.add_hline(y=slo_s, line_dash="dash", line_color=COLORS["bad"], annotation_text=f"SLO {fmt_duration(slo_s)}")
    fig.update_layout(barmode="group", title="Consumer lag in seconds per group / topic (worst 15 by p99)",
                      yaxis_title="seconds")
    return ch(fig, 360)


def chart_lag_series(ch: Charts, ts: pd.DataFrame | None, slo_s: float) -> str:
    if ts is None or ts.empty:
        return ""
    fig = go.Figure()
    palette = [COLORS[k] for k in ("bad", "warn", "purple", "info", "brown", "pink", "olive", "cyan")]
    for i, ((g, t), part) in enumerate(ts.sort_values("bucket").groupby(["group_id", "topic"], sort=False)):
        fig.add_trace(go.Scatter(x=_dt(part["bucket"]), y=part["lag_seconds_max"], name=f"{g} / {t}", mode="lines",
                                 line={"color": palette[i % len(palette)], "shape": "hv"}))
    fig.add_hline(y=slo_s, line_dash="dash", line_color=COLORS["bad"])
    fig.update_layout(title="Worst lag in seconds over the week, worst group / topics", yaxis_title="seconds")
    return ch(fig, 320)


def chart_lso(ch: Charts, lso: pd.DataFrame, txn: pd.DataFrame) -> str:
    out = ""
    if txn is not None and not txn.empty:
        d = txn.sort_values("transactions_seen", ascending=False).head(20)
        fig = go.Figure([go.Bar(x=d["transactional_id"], y=d["transactions_seen"], name="transactions seen",
                                marker_color=COLORS["info"]),
                         go.Bar(x=d["transactional_id"], y=d["stuck"], name="stuck", marker_color=COLORS["bad"]),
                         go.Bar(x=d["transactional_id"], y=d["epoch_bumps"], name="epoch bumps",
                                marker_color=COLORS["warn"])])
        fig.update_layout(barmode="group", title="Transactions per transactional id", yaxis_title="count")
        out += ch(fig, 300)
    if lso is not None and not lso.empty:
        d = lso.sort_values("lso_gap_p99", ascending=False).head(15)
        fig = go.Figure([go.Bar(x=d["topic"], y=d[c], name=n, marker_color=col) for c, n, col in
                         (("lso_gap_p50", "p50", COLORS["ok"]), ("lso_gap_p95", "p95", COLORS["warn"]),
                          ("lso_gap_p99", "p99", COLORS["bad"]))])
        fig.update_layout(barmode="group", title="LSO gap (messages held back by open transactions)",
                          yaxis_title="messages")
        out += ch(fig, 300)
    return out


def chart_zk(ch: Charts, ts: pd.DataFrame | None, rate: pd.DataFrame | None, elections: pd.DataFrame | None) -> str:
    out = ""
    if ts is not None and not ts.empty:
        fig = go.Figure()
        fig.add_trace(go.Scatter(x=_dt(ts["bucket"]), y=ts["serving_min"], name="serving servers (min)",
                                 mode="lines", line={"color": COLORS["ok"], "shape": "hv"}))
        fig.add_trace(go.Scatter(x=_dt(ts["bucket"]), y=ts["servers"] / 2, name="quorum line (n/2)", mode="lines",
                                 line={"color": COLORS["bad"], "dash": "dash"}))
        fig.add_trace(go.Scatter(x=_dt(ts["bucket"]), y=ts["epoch"], name="zxid epoch", mode="lines",
                                 yaxis="y2", line={"color": COLORS["purple"], "shape": "hv"}))
        if elections is not None and not elections.empty:
            fig.add_trace(go.Scatter(x=_dt(elections["time"]), y=elections["epoch_after"], name="election",
                                     mode="markers", yaxis="y2",
                                     marker={"symbol": "star", "size": 12, "color": COLORS["cyan"]}))
        fig.update_layout(title="ZooKeeper ensemble", yaxis={"title": "servers", "rangemode": "tozero", "dtick": 1},
                          yaxis2={"title": "zxid epoch", "overlaying": "y", "side": "right", "tickformat": "d",
                                  "dtick": 1, "showgrid": False})
        out += ch(fig, 320)
    if rate is not None and not rate.empty:
        d = rate.sort_values("epoch")
        fig = go.Figure(go.Bar(x=d["epoch"].astype(str), y=d["writes_per_s"], marker_color=COLORS["info"],
                               text=[fmt_num(w, 0) + " writes" for w in d["writes"]], textposition="outside"))
        fig.update_layout(title="ZooKeeper write rate per epoch (zxid counter growth)", xaxis_title="epoch",
                          yaxis_title="writes / s")
        out += ch(fig, 280)
    return out


def chart_kraft(ch: Charts, lag: pd.DataFrame | None) -> str:
    if lag is None or lag.empty:
        return ""
    d = lag.sort_values("node_id")
    fig = go.Figure([go.Bar(x=d["node_id"].astype(str), y=d[c], name=n, marker_color=col) for c, n, col in
                     (("lag_p50", "p50", COLORS["ok"]), ("lag_p95", "p95", COLORS["warn"]),
                      ("lag_p99", "p99", COLORS["bad"]), ("lag_max", "max", COLORS["muted"]))])
    fig.update_layout(barmode="group", title="KRaft replica lag (records behind the high watermark)",
                      xaxis_title="node")
    return ch(fig, 300)


# ----------------------------------------------------------------------------------------------- page


KPI_CARDS = ("under_min_isr_minutes", "offline_minutes", "under_replicated_minutes", "incidents_opened",
             "mttr_minutes", "min_broker_availability", "lag_slo_share", "worst_lag_seconds_p99",
             "stuck_transactions", "hanging_transactions", "zk_elections", "controller_changes")


def _card(row: dict[str, Any]) -> str:
    text, css = fmt_change(row)
    return (f'<div class="card"><div class="k">{esc(row["label"])}</div>'
            f'<div class="v">{esc(fmt_value(row["this_week"], row["unit"]))}</div>'
            f'<div class="d {css}">{esc(text)}</div></div>')


def summary_block(doc: dict[str, Any]) -> str:
    wow = {r["metric"]: r for r in doc["week_over_week"]}
    cards = "".join(_card(wow[m]) for m in KPI_CARDS if m in wow)
    worse = [wow[m] for m in doc["worse_than_last_week"] if m in wow]
    worse_html = ("<ul>" + "".join(
        f'<li><b>{esc(r["label"])}</b>: {esc(fmt_value(r["this_week"], r["unit"]))} '
        f'(last week {esc(fmt_value(r["last_week"], r["unit"]))})</li>' for r in worse) + "</ul>"
        if worse else '<p class="empty">nothing got worse than last week'
        + (" (no data for last week)" if not doc.get("previous_available") else "") + "</p>")
    topics = doc["worst_topics"]
    topics_html = ("<ul>" + "".join(
        f'<li><b>{esc(t["topic"])}</b>: {esc(_min(t["under_min_isr_minutes"]))} min under min ISR, '
        f'{esc(_min(t["offline_minutes"]))} min offline, {esc(_min(t["under_replicated_minutes"]))} min '
        f'under-replicated</li>' for t in topics) + "</ul>") if topics else \
        '<p class="empty">every topic fully replicated all week</p>'
    groups = doc["worst_groups"]
    groups_html = ("<ul>" + "".join(
        f'<li><b>{esc(g["group_id"])}</b> / {esc(g["topic"])}: p99 {esc(fmt_duration(g["lag_seconds_p99"]))}, '
        f'{esc(_pct(g["slo_share"]))} within SLO, {esc(_min(g["err_minutes"]))} min ERR</li>' for g in groups)
        + "</ul>") if groups else '<p class="empty">every group within its lag SLO all week</p>'
    open_inc = doc.get("open_incidents") or []
    open_html = ""
    if open_inc:
        open_html = ('<div class="note"><b>Still open at the end of the week:</b> ' + esc(", ".join(
            f'{i["rule"]} {i["subject"]} (since {fmt_time(i["start"])})' for i in open_inc[:8]))
            + (" …" if len(open_inc) > 8 else "") + "</div>")
    return (f'<div class="cards">{cards}</div>{open_html}<div class="cols">'
            f'<div class="box"><h3>Worse than last week</h3>{worse_html}</div>'
            f'<div class="box"><h3>Worst topics</h3>{topics_html}</div>'
            f'<div class="box"><h3>Worst consumer groups</h3>{groups_html}</div></div>')


def render_report(doc: dict[str, Any], t: dict[str, pd.DataFrame]) -> str:
    """The whole page for one cluster and week. `t` maps table names to that cluster's rows."""
    ch = Charts()
    period_start, period_end = doc["period"]["start_epoch"], doc["period"]["end_epoch"]
    as_of = doc.get("as_of_epoch") or period_end
    slo = float(doc["lag_slo_s"])
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
    # ---- replication
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
    parts.append("<h3>Incidents</h3>")
    parts.append(chart_incidents(ch, t.get("incidents"), period_start, period_end, as_of))
    parts.append(table(t.get("incident_summary"), [
        ("rule", "rule", _txt), ("severity", "severity", _txt), ("incidents", "incidents", fmt_num),
        ("opened", "opened", fmt_num), ("resolved", "resolved", fmt_num), ("open_at_end", "open at end", fmt_num),
        ("mttr_s", "MTTR", fmt_duration), ("longest_s", "longest", fmt_duration)], empty="no incidents"))
    inc = t.get("incidents")
    if inc is not None and not inc.empty:
        inc = _by_severity(inc)
    parts.append(table(inc, [
        ("rule", "rule", _txt), ("severity", "severity", _txt), ("subject", "subject", _txt),
        ("start", "start", _ts), ("end", "end", _ts), ("status", "status", _txt),
        ("duration_s", "duration", fmt_duration), ("open_for_s", "open for", fmt_duration),
        ("summary", "last summary", _txt)], bad=lambda r: r.get("status") == "open", empty="no incidents",
        more_hint="tables/incidents.parquet", max_rows=30))
    # ---- availability
    parts.append("<h2>Availability</h2>")
    parts.append(chart_brokers(ch, t.get("broker_availability")))
    parts.append(table(t.get("broker_availability"), [
        ("broker_id", "broker", fmt_id), ("host", "host", _txt), ("rack", "rack", _txt),
        ("availability", "availability", _pct), ("down_minutes", "down min", _min),
        ("unreachable_polls", "registered but unreachable polls", fmt_num),
        ("controller_polls", "polls as controller", fmt_num)], empty="no broker records",
        bad=lambda r: (r.get("availability") or 1) < 1))
    parts.append(f'<h3>Controller changes: {fmt_num(h.get("controller_changes"))}</h3>')
    parts.append(table(t.get("controller_changes"), [("time", "time", _ts), ("controller_before", "from", fmt_id),
                                                    ("controller_after", "to", fmt_id)],
                       empty="the controller did not move"))
    ch_health = t.get("cluster_health")
    if ch_health is not None and not ch_health.empty:
        r = ch_health.iloc[0]
        parts.append(f'<p class="sub">Cluster unreachable {_min(r["unreachable_minutes"])} min · stale sections '
                     f'{_min(r["stale_minutes"])} min · no controller {_min(r["no_controller_minutes"])} min</p>')
    # ---- consumers
    parts.append("<h2>Consumers</h2>")
    lag = t.get("consumer_lag")
    parts.append(f'<p class="sub">Lag SLO {esc(fmt_duration(slo))}; percentiles over polls '
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
        bad=lambda r: not _isnull(r.get("slo_share")) and r["slo_share"] < 1,
        empty="no consumer groups", more_hint="tables/consumer_lag.parquet"))
    parts.append("<h3>Retention-loss episodes (committed offset below log start)</h3>")
    parts.append(table(t.get("retention_loss"), [
        ("group_id", "group", _txt), ("topic", "topic", _txt), ("start", "start", _ts), ("end", "last seen", _ts),
        ("duration_s", "duration", fmt_duration), ("max_partitions", "partitions", fmt_num)],
        empty="no group lost unread messages to retention"))
    # ---- transactions
    parts.append("<h2>Transactions</h2>")
    parts.append(f'<p class="sub">{fmt_num(h.get("transactions_seen"))} transactions seen, '
                 f'{fmt_num(h.get("stuck_transactions"))} stuck (open longer than their timeout + '
                 f'{esc(fmt_duration(doc["txn_grace_s"]))}), {fmt_num(h.get("hanging_transactions"))} hanging, '
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
        ("transactional_id", "transactional id", _txt), ("start_time", "started", _ts),
        ("last_seen", "last seen open", _ts), ("max_age_s", "open for", fmt_duration),
        ("timeout_ms", "timeout ms", fmt_num), ("last_state", "last state", _txt),
        ("states", "states", _txt)],
        empty="no transaction stayed open past its timeout"))
    parts.append("<h3>Hanging transactions</h3>")
    parts.append(table(t.get("hanging_transactions"), [
        ("topic", "topic", _txt), ("partition", "partition", fmt_id), ("producer_id", "producer id", fmt_id),
        ("start", "first seen", _ts), ("end", "last seen", _ts), ("duration_s", "duration", fmt_duration),
        ("txn_start_offset", "txn start offset", fmt_num)], empty="no hanging transaction"))
    parts.append("<h3>LSO gap (percentiles over partition-polls with an open transaction)</h3>")
    parts.append(table(t.get("lso_gap"), [
        ("topic", "topic", _txt), ("partitions", "partitions", fmt_num),
        ("partition_polls", "partition-polls", fmt_num),
        ("lso_gap_p50", "LSO gap p50", fmt_num), ("lso_gap_p95", "p95", fmt_num), ("lso_gap_p99", "p99", fmt_num),
        ("lso_gap_max", "max", fmt_num)], empty="no LSO held back"))
    # ---- consensus
    parts.append("<h2>Consensus</h2>")
    zq = t.get("zk_quorum")
    if zq is not None and not zq.empty:
        r = zq.iloc[0]
        parts.append(f'<p class="sub">ZooKeeper: {fmt_num(h.get("zk_elections"))} leader election(s), '
                     f'{_min(r["minutes_without_quorum"])} min without quorum, {_min(r["minutes_without_leader"])} '
                     f'min with quorum but no leader, {fmt_num(r["zk_servers"])} servers.</p>')
        parts.append(chart_zk(ch, t.get("zk_timeseries"), t.get("zk_write_rate"), t.get("zk_elections")))
        parts.append(table(t.get("zk_elections"), [("time", "election seen at", _ts),
                                                   ("epoch_before", "epoch before", fmt_num),
                                                   ("epoch_after", "epoch after", fmt_num),
                                                   ("leader", "new leader", _txt)], empty="no leader election"))
        parts.append(table(t.get("zk_servers"), [
            ("server", "server", _txt), ("serving_share", "serving", _pct),
            ("leader_polls", "polls as leader", fmt_num),
            ("max_lag_behind_leader", "max txns behind", fmt_num), ("latency_max_ms", "max latency ms", fmt_num)]))
        parts.append("<h3>Follower-behind episodes</h3>")
        parts.append(table(t.get("zk_follower_behind"), [
            ("server", "server", _txt), ("start", "start", _ts), ("end", "last seen", _ts), ("polls", "polls", fmt_num),
            ("duration_s", "duration", fmt_duration), ("max_lag", "max txns behind", fmt_num)],
            empty="no follower was seen behind the leader"))
    else:
        parts.append('<p class="empty">no ZooKeeper records for this cluster this week (KRaft cluster, no '
                     'ZooKeeper configured, or 4lw disabled)</p>')
    kv = t.get("kraft_voter_lag")
    if kv is not None and not kv.empty:
        parts.append(f'<h3>KRaft quorum: {fmt_num(h.get("kraft_leader_changes"))} leader change(s)</h3>')
        parts.append(chart_kraft(ch, kv))
        parts.append(table(t.get("kraft_leader_changes"), [
            ("time", "seen at", _ts), ("epoch_before", "epoch before", fmt_num),
            ("epoch_after", "epoch after", fmt_num),
            ("leader_before", "leader before", fmt_num), ("leader_after", "leader after", fmt_num)],
            empty="the KRaft leader did not change"))
        parts.append(table(kv, [("node_id", "node", fmt_num), ("role", "role", _txt), ("polls", "polls", fmt_num),
                                ("lag_p50", "lag p50", fmt_num), ("lag_p95", "p95", fmt_num),
                                ("lag_p99", "p99", fmt_num), ("lag_max", "max", fmt_num)]))
    # ---- week over week
    parts.append("<h2>Week over week</h2>")
    parts.append(_wow_table(doc))
    parts.append(f'<p class="sub">Tables: {esc(", ".join(doc["tables"]))} (Parquet, under tables/). '
                 'Figures: docs/weekly-report.md.</p>')
    body = "\n".join(p for p in parts if p)
    title = f"Kafka reliability {doc['cluster']} {doc['week']}"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{CSS}</style></head><body><main>{body}</main></body></html>")


def _wow_table(doc: dict[str, Any]) -> str:
    rows = []
    for r in doc["week_over_week"]:
        text, css = fmt_change(r)
        rows.append(f'<tr><td>{esc(r["label"])}</td><td class="n">{esc(fmt_value(r["this_week"], r["unit"]))}</td>'
                    f'<td class="n">{esc(fmt_value(r["last_week"], r["unit"]))}</td>'
                    f'<td class="n {css}">{esc(text)}</td></tr>')
    return (f'<table><thead><tr><th>figure</th><th>{esc(doc["week"])}</th><th>{esc(doc["previous_week"])}</th>'
            f'<th>change</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
