"""Overview: one health line per cluster and sparklines of the last hours."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from collectors.model.vocabulary import GROUP_STATUS_RANK, IDLE_GROUP_STATUSES
from collectors.model.wording import plural
from dashboard.views.common import (
    OKABE_ITO,
    SERIES_COLORS,
    Freshness,
    epoch_to_axis,
    epoch_to_utc_text,
    fmt_duration,
    is_missing,
)
from dashboard.views.plotting import base_layout, empty_figure, time_trace

HEALTH_COLUMNS = ["cluster", "verdict", "data", "brokers up", "controller", "offline", "under min ISR",
                  "under-replicated", "worst group", "groups ERR", "groups WARN", "stuck txns", "hanging txns",
                  "quorum", "open alerts"]
VERDICT_COLORS = {"UNREACHABLE": "red", "CRITICAL": "red", "WARNING": "orange", "STALE": "gray",
                  "OK": "blue"}  # st badge colours; STALE: the collector stopped writing, nothing is known now


def quorum_state(doc: dict[str, Any]) -> str:
    """``ZK 3/3 serving, leader 127.0.0.1:2181 (epoch 2)`` / ``KRaft leader 1 (epoch 3), 3 voters`` / ``—``."""
    zk = doc.get("zookeeper") or []
    if zk:
        serving = [z for z in zk if z.get("serving")]
        leaders = [z for z in serving if z.get("mode") in ("leader", "standalone")]
        state = f"ZK {len(serving)}/{len(zk)} serving"
        if len(serving) <= len(zk) // 2:
            return state + ", QUORUM LOST"
        if not leaders:
            return state + ", NO LEADER"
        if len(leaders) > 1:
            return state + f", {len(leaders)} LEADERS"
        lead = leaders[0]
        epoch = lead.get("zxid_epoch")
        return state + f", leader {lead.get('server')}" + (f" (epoch {epoch})" if not is_missing(epoch) else "")
    voters = [v for v in (doc.get("kraft_voters") or []) if v.get("role") in ("leader", "voter")]
    if voters:
        leader = voters[0].get("leader_id")
        if is_missing(leader) or int(leader) < 0:
            return f"KRaft {plural(len(voters), 'voter')}, NO LEADER"
        return f"KRaft leader {leader} (epoch {voters[0].get('leader_epoch')}), {plural(len(voters), 'voter')}"
    return "—"


def health_line(doc: dict[str, Any], fresh: Freshness | None = None) -> dict[str, Any]:
    """One cluster's health as a flat row (the Overview table)."""
    brokers = doc.get("brokers") or []
    up = sum(1 for b in brokers if b.get("alive") and b.get("reachable") is not False)
    topics = doc.get("topics") or []
    alerts = [a for a in (doc.get("alerts") or []) if is_missing(a.get("resolved_at"))]
    rules = {a.get("rule") for a in alerts}
    # groups nobody runs (INACTIVE, ABANDONED: `activity` not active) are not the cluster's health
    groups = [g for g in doc.get("groups") or [] if g.get("activity") in (None, "active")]
    idle = len(doc.get("groups") or []) - len(groups)
    worst = max(groups, key=lambda g: (GROUP_STATUS_RANK.get(g.get("status"), 0), g.get("lag_sum") or 0),
                default=None)
    if worst is None:
        worst_txt = f"no running groups ({idle} nobody runs)" if idle else "no groups"
    elif worst.get("status") == "OK":
        worst_txt = f"all OK ({len(groups)})" + (f", {idle} nobody runs" if idle else "")
    else:
        n_bad = sum(1 for g in groups if g.get("status") != "OK")
        worst_txt = f"{worst.get('status')} {worst.get('group_id')}" + (f" (+{n_bad - 1})" if n_bad > 1 else "")
    stuck = sum(1 for a in alerts if a.get("rule") == "stuck_transaction")
    hanging = sum(1 for p in (doc.get("producers") or []) if p.get("hanging"))
    critical = sum(1 for a in alerts if a.get("severity") == "critical")
    warning = sum(1 for a in alerts if a.get("severity") == "warning")
    if fresh is not None and fresh.level == "stale":
        verdict = "STALE"  # old data: whatever it said then, it does not say how the cluster is now
    elif doc.get("reachable") is False:
        verdict = "UNREACHABLE"
    elif critical:
        verdict = "CRITICAL"
    elif warning:
        verdict = "WARNING"
    else:
        verdict = "OK"
    controller = doc.get("controller_id")
    ctrl_txt = "NONE" if is_missing(controller) else str(controller)
    if "controller_mismatch" in rules:
        ctrl_txt += " (ZK disagrees)"
    data_txt = "—"
    if fresh is not None:
        data_txt = {"ok": "fresh", "partial": "partial", "stale": "STALE", "unreachable": "UNREACHABLE"}[fresh.level]
        if fresh.age_s is not None:
            data_txt += f", {fmt_duration(fresh.age_s)} old"
    return {
        "cluster": doc.get("cluster"), "verdict": verdict, "data": data_txt,
        "brokers up": f"{up}/{len(brokers)}", "controller": ctrl_txt,
        "offline": sum(int(t.get("offline") or 0) for t in topics),
        "under min ISR": sum(int(t.get("under_min_isr") or 0) for t in topics),
        "under-replicated": sum(int(t.get("under_replicated") or 0) for t in topics),
        "worst group": worst_txt, "groups ERR": sum(1 for g in groups if g.get("status") == "ERR"),
        "groups WARN": sum(1 for g in groups if g.get("status") == "WARN"), "stuck txns": stuck,
        "hanging txns": hanging, "quorum": quorum_state(doc),
        "open alerts": f"{critical} critical, {warning} warning, {len(alerts) - critical - warning} info",
    }


def health_frame(docs: dict[str, dict[str, Any]], fresh: dict[str, Freshness] | None = None) -> pd.DataFrame:
    rows = [health_line(doc, (fresh or {}).get(c)) for c, doc in docs.items()]
    return pd.DataFrame(rows, columns=HEALTH_COLUMNS)


def no_alerts_message(fresh: dict[str, Freshness]) -> tuple[str, str]:
    """(level, text) of the Overview when no alert is open: ``success`` only when every cluster's data is fresh;
    a cluster whose collector stopped has no open alert because nothing looks any more."""
    old = [f for f in fresh.values() if f.level in ("stale", "unreachable")]
    if not old:
        return "success", "No open alerts, so no incidents."
    which = ", ".join(f"{f.cluster} ({f.level.upper()}" + (f", {fmt_duration(f.age_s)} old)" if f.age_s is not None
                                                          else ")") for f in old)
    return "warning", (f"No open alert in the latest data, but it is not current for {which}: what happened since "
                       "is not in it. Is the collector running?")


SPARK_SERIES = [("under_replicated", "under-replicated"), ("under_min_isr", "under min ISR"),
                ("offline", "offline partitions"), ("alerts_open", "open alerts"), ("brokers_up", "brokers up")]


def _gaps_at(t: pd.Series, v: pd.Series, down: list[float]) -> tuple[pd.Series, pd.Series]:
    """The series with NaN at the polls that reached no broker (a gap in the line, not a fall to 0)."""
    s = pd.Series(v.to_numpy(dtype="float64"), index=t.to_numpy(dtype="float64"))
    s = s.groupby(level=0).last()
    if down:
        s = s.reindex(s.index.union(pd.Index(down, dtype="float64")))
        s.loc[down] = float("nan")
    return pd.Series(s.index), pd.Series(s.to_numpy())


def sparklines_figure(cluster_hist: pd.DataFrame, tz: str | None, broker_hist: pd.DataFrame | None = None,
                      group_hist: pd.DataFrame | None = None) -> go.Figure:
    """Small multiples of the history ``cluster`` table (one cluster), plus total lag from ``group_lag``.

    A poll that reached no broker (``reachable`` false) measured nothing: every series has a gap there, not a 0
    (no under-replicated partition and no broker up would both read as facts), and a vermillion x on the
    baseline of each small chart marks it "cluster unreachable". The total lag is of the groups that run (those
    INACTIVE or ABANDONED are left out, as on the Consumers page).
    """
    if cluster_hist is None or cluster_hist.empty:
        return empty_figure("No history yet — the collector writes it every flush interval.", height=160)
    h = cluster_hist.sort_values("time")
    down: list[float] = []
    if "reachable" in h.columns:
        down = sorted({float(t) for t, r in zip(h["time"], h["reachable"], strict=False)
                       if not is_missing(r) and not bool(r)})  # null: not known, not unreachable
    series: list[tuple[str, pd.Series, pd.Series]] = []
    for col, label in SPARK_SERIES[:4]:
        if col in h.columns:
            series.append((label, *_gaps_at(h["time"], h[col].astype("float64"), down)))
    if broker_hist is not None and not broker_hist.empty:
        b = broker_hist.assign(up=broker_hist["alive"].fillna(False) & broker_hist["reachable"].fillna(True))
        up = b.groupby("time")["up"].sum().sort_index()
        series.append(("brokers up", *_gaps_at(pd.Series(up.index), pd.Series(up.to_numpy(dtype="float64")), down)))
    if group_hist is not None and not group_hist.empty:
        g = group_hist
        if "status" in g.columns:
            g = g[~g["status"].isin(IDLE_GROUP_STATUSES)]
        lag = g.groupby("time")["lag_sum"].sum(min_count=1).astype("float64").sort_index()
        series.append(("total consumer lag", *_gaps_at(pd.Series(lag.index), pd.Series(lag.to_numpy()), down)))
    fig = make_subplots(rows=1, cols=len(series), subplot_titles=[s[0] for s in series], horizontal_spacing=0.04)
    for i, (label, t, v) in enumerate(series, start=1):
        color = SERIES_COLORS[(i - 1) % len(SERIES_COLORS)]
        if label in ("offline partitions", "under min ISR"):
            color = OKABE_ITO["vermillion"]
        fig.add_trace(time_trace(t, v, tz, label, label, mode="lines", line={"color": color, "width": 1.5},
                                 fill="tozeroy"), row=1, col=i)
        if down:
            fig.add_trace(go.Scatter(x=epoch_to_axis(down, tz), y=[0.0] * len(down), mode="markers",
                                     name="cluster unreachable", showlegend=False,
                                     marker={"symbol": "x", "size": 7, "color": OKABE_ITO["vermillion"]},
                                     customdata=[[u] for u in epoch_to_utc_text(down)],
                                     hovertemplate="%{customdata[0]}<br>cluster unreachable: no data<extra></extra>"),
                          row=1, col=i)
        fig.update_yaxes(rangemode="tozero", nticks=3, row=1, col=i)
        fig.update_xaxes(nticks=3, tickformat="%H:%M", row=1, col=i)
    base_layout(fig, height=170, legend=False)
    fig.update_annotations(font_size=11)
    return fig
