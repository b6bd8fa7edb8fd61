"""The report page's charts: plotly figures from one cluster's collected frames, as HTML fragments.

`Charts` inlines plotly.js into the first figure only, so the page is self-contained (it opens offline, no CDN)
without carrying the library once per chart. Every function takes pandas frames (possibly None or empty: a table
the week has no rows for) and returns HTML, a short note when there is nothing to draw, or "".
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from collectors.model.vocabulary import CRITICAL, INFO, SEVERITY_RANK, WARNING
from spark_analytics.formatting import fmt_duration, fmt_num, fmt_time, is_missing

COLORS = {"bad": "#d62728", "warn": "#ff7f0e", "ok": "#2ca02c", "info": "#1f77b4", "muted": "#7f7f7f",
          "purple": "#9467bd", "brown": "#8c564b", "pink": "#e377c2", "olive": "#bcbd22", "cyan": "#17becf"}
SEVERITY_COLORS = {CRITICAL: COLORS["bad"], WARNING: COLORS["warn"], INFO: COLORS["info"]}


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


def incidents_by_severity(inc: pd.DataFrame) -> pd.DataFrame:
    """Critical first, then the longest (open ones count up to the end of the data), then the earliest."""
    d = inc.copy()
    d["_rank"] = d["severity"].map(SEVERITY_RANK).fillna(9)
    d["_len"] = d["duration_s"].fillna(d["open_for_s"]).fillna(0)
    return d.sort_values(["_rank", "_len", "start"], ascending=[True, False, True]).drop(columns=["_rank", "_len"])


def _ending(end: float | None, status: str | None, drawn: float) -> str:
    """How a time line bar ends, in words: its end; or why it has none (`incidents.incidents` statuses)."""
    if not is_missing(end):
        return fmt_time(end)
    if status == "lost":
        return f"lost: last seen open {fmt_time(drawn)}, end unseen (its collector stopped)"
    if status == "superseded":
        return f"end unknown (its collector lost it; counted until {fmt_time(drawn)})"
    return "still open"


def chart_incidents(ch: Charts, inc: pd.DataFrame, period_start: float, period_end: float, as_of: float,
                    title: str = "Alert episodes (alert open → resolve)",
                    empty: str = "no alert was open during the week") -> str:
    """A time line of `inc` rows (``rule`` — or an incident's kind —, severity, subject, start, end, status,
    minutes_in_period).

    A bar runs as far as the row counts in the week (`minutes_in_period` from its start, or the week's): an open
    one to `as_of`, a resolved one to its end, one ``lost`` or ``superseded`` (its collector lost it; no end) to
    the last poll that saw it open or the next one's start. Before, those two ran to `as_of`, drawn as open."""
    if inc is None or inc.empty:
        return f'<p class="empty">{empty}</p>'
    d = incidents_by_severity(inc)
    d["_end"] = d["end"].where(d["end"].notna(), as_of)
    if "minutes_in_period" in d.columns:
        counted = d["start"].clip(lower=period_start) + d["minutes_in_period"].fillna(0.0) * 60.0
        d["_end"] = d["_end"].where(d["end"].notna() | (d["status"] == "open"), counted)
    # One bar per rule and time span: a broker crash opens the same alert on dozens of partitions at once.
    d["_span"] = d["start"].round(0).astype(str) + "/" + d["_end"].round(0).astype(str)
    g = (d.groupby(["rule", "severity", "_span"], sort=False)
         .agg(start=("start", "first"), end=("end", "first"), _end=("_end", "first"), subject=("subject", "first"),
              status=("status", "first"), n=("subject", "size"))
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
                             hovertext=[f"{fmt_time(a)} → {_ending(b, s, e)}" for a, b, s, e in zip(
                                 g.loc[m, "start"], g.loc[m, "end"], g.loc[m, "status"], g.loc[m, "_end"],
                                 strict=True)]))
    fig.update_layout(title=title, xaxis={"type": "date"}, barmode="overlay",
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
