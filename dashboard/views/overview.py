"""Overview: one health line per cluster and sparklines of the last hours."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from collectors.model.vocabulary import GROUP_STATUS_RANK
from dashboard.views.common import OKABE_ITO, SERIES_COLORS, Freshness, fmt_duration, is_missing
from dashboard.views.plotting import base_layout, empty_figure, time_trace

HEALTH_COLUMNS = ["cluster", "verdict", "data", "brokers up", "controller", "offline", "under min ISR",
                  "under-replicated", "worst group", "groups ERR", "groups WARN", "stuck txns", "hanging txns",
                  "quorum", "open alerts"]
VERDICT_COLORS = {"UNREACHABLE": "red", "CRITICAL": "red", "WARNING": "orange", "OK": "blue"}  # st badge colours


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
            return f"KRaft {len(voters)} voters, NO LEADER"
        return f"KRaft leader {leader} (epoch {voters[0].get('leader_epoch')}), {len(voters)} voters"
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
    if doc.get("reachable") is False:
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


SPARK_SERIES = [("under_replicated", "under-replicated"), ("under_min_isr", "under min ISR"),
                ("offline", "offline partitions"), ("alerts_open", "open alerts"), ("brokers_up", "brokers up")]


def sparklines_figure(cluster_hist: pd.DataFrame, tz: str | None, broker_hist: pd.DataFrame | None = None,
                      group_hist: pd.DataFrame | None = None) -> go.Figure:
    """Small multiples of the history ``cluster`` table (one cluster), plus total lag from ``group_lag``."""
    if cluster_hist is None or cluster_hist.empty:
        return empty_figure("No history yet — the collector writes it every flush interval.", height=160)
    h = cluster_hist.sort_values("time")
    series: list[tuple[str, pd.Series, pd.Series]] = []
    for col, label in SPARK_SERIES[:4]:
        if col in h.columns:
            series.append((label, h["time"], h[col].astype("float64")))
    if broker_hist is not None and not broker_hist.empty:
        b = broker_hist.assign(up=broker_hist["alive"].fillna(False) & broker_hist["reachable"].fillna(True))
        up = b.groupby("time")["up"].sum().sort_index()
        series.append(("brokers up", pd.Series(up.index), pd.Series(up.to_numpy(dtype="float64"))))
    if group_hist is not None and not group_hist.empty:
        lag = group_hist.groupby("time")["lag_sum"].sum(min_count=1).astype("float64").sort_index()
        series.append(("total consumer lag", pd.Series(lag.index), pd.Series(lag.to_numpy())))
    fig = make_subplots(rows=1, cols=len(series), subplot_titles=[s[0] for s in series], horizontal_spacing=0.04)
    for i, (label, t, v) in enumerate(series, start=1):
        color = SERIES_COLORS[(i - 1) % len(SERIES_COLORS)]
        if label in ("offline partitions", "under min ISR"):
            color = OKABE_ITO["vermillion"]
        fig.add_trace(time_trace(t, v, tz, label, label, mode="lines", line={"color": color, "width": 1.5},
                                 fill="tozeroy"), row=1, col=i)
        fig.update_yaxes(rangemode="tozero", nticks=3, row=1, col=i)
        fig.update_xaxes(nticks=3, tickformat="%H:%M", row=1, col=i)
    base_layout(fig, height=170, legend=False)
    fig.update_annotations(font_size=11)
    return fig
