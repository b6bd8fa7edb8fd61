"""Consumers: groups with status and lag (messages and seconds), lag over time, retention risk, partitions."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from collectors.model.vocabulary import (
    ABANDONED,
    ABANDONED_GROUP,
    ACTIVE_GROUP,
    GROUP_STATUS_RANK,
    IDLE_GROUP_STATUSES,
    INACTIVE,
)
from dashboard.views.common import OKABE_ITO, SERIES_COLORS, epoch_to_local, fmt_duration, is_missing, records_frame
from dashboard.views.plotting import base_layout, empty_figure, time_trace

GROUP_COLUMNS = ["group_id", "state", "members", "status", "worst_partition_status", "lag_sum", "lag_max",
                 "lag_seconds_max", "partitions", "topics", "last_commit_time", "activity", "team", "policy"]
GP_COLUMNS = ["group_id", "topic", "partition", "committed_offset", "log_start_offset", "high_watermark",
              "last_stable_offset", "lag", "lag_seconds", "status", "last_commit_time", "below_log_start",
              "seconds_to_retention", "status_reason", "owner_client_id", "owner_host", "owner_member_id"]
RETENTION_HORIZON_S = 24 * 3600.0


def _retention_by_group(doc: dict[str, Any]) -> dict[str, tuple[float | None, int]]:
    """group -> (smallest seconds to retention over partitions with lag, partitions already below log start)."""
    out: dict[str, tuple[float | None, int]] = {}
    for gp in doc.get("group_partitions") or []:
        gid = gp.get("group_id")
        best, lost = out.get(gid, (None, 0))
        if gp.get("below_log_start"):
            lost += 1
        s = gp.get("seconds_to_retention")
        if not is_missing(s) and gp.get("lag") and (best is None or s < best):
            best = float(s)
        out[gid] = (best, lost)
    return out


def hidden_groups(doc: dict[str, Any]) -> int:
    """Groups the default view leaves out: ABANDONED ones (nobody has run them for `group_abandoned_after_s`)."""
    return sum(1 for g in doc.get("groups") or [] if g.get("activity") == ABANDONED_GROUP)


def groups_frame(doc: dict[str, Any], tz: str | None, groups: list[str] | None = None,
                 show_abandoned: bool = False) -> pd.DataFrame:
    """Groups worst first: status, state, lag in messages and seconds, last commit, retention risk, owner team.

    Groups nobody runs come last (INACTIVE, then ABANDONED); ABANDONED ones only when asked (or picked by name).
    """
    g = records_frame(doc.get("groups"), GROUP_COLUMNS)
    if groups:
        g = g[g["group_id"].isin(groups)]
    elif not show_abandoned:
        g = g[g["activity"].fillna(ACTIVE_GROUP) != ABANDONED_GROUP]
    cols = ["group", "status", "worst partition", "state", "members", "lag (messages)", "max partition lag",
            "lag (seconds)", "lag", "partitions", "topics", "last commit", "time to data loss", "partitions lost",
            "team", "policy"]
    if g.empty:
        return pd.DataFrame(columns=cols)
    ret = _retention_by_group(doc)
    idle = {INACTIVE: -1, ABANDONED: -2}  # below OK: nobody runs them
    g = g.assign(_rank=g["status"].map(lambda x: idle.get(x, GROUP_STATUS_RANK.get(x, 0))),
                 _lag=pd.to_numeric(g["lag_seconds_max"], errors="coerce").fillna(-1))
    g = g.sort_values(["_rank", "_lag", "group_id"], ascending=[False, False, True])
    to_loss, lost = [], []
    for gid in g["group_id"]:
        s, n = ret.get(gid, (None, 0))
        to_loss.append("DATA LOST" if n else (fmt_duration(s) if s is not None else "—"))
        lost.append(n)
    out = pd.DataFrame({
        "group": g["group_id"], "status": g["status"], "worst partition": g["worst_partition_status"],
        "state": g["state"], "members": g["members"],
        "lag (messages)": pd.array(g["lag_sum"], dtype="Int64"), "max partition lag": pd.array(g["lag_max"],
                                                                                                 dtype="Int64"),
        "lag (seconds)": pd.array(pd.to_numeric(g["lag_seconds_max"], errors="coerce"), dtype="Float64").round(1),
        "lag": [fmt_duration(v) for v in g["lag_seconds_max"]], "partitions": g["partitions"],
        "topics": [", ".join(t or []) for t in g["topics"]], "last commit": epoch_to_local(g["last_commit_time"], tz),
        "time to data loss": to_loss, "partitions lost": lost,
        "team": g["team"].fillna("—"), "policy": g["policy"].fillna("thresholds"),
    }, columns=cols)
    return out.reset_index(drop=True)


def group_partitions_frame(doc: dict[str, Any], group: str, tz: str | None) -> pd.DataFrame:
    """Drill-down: one group's partitions with offsets, lag, status, last commit time and time to data loss."""
    gp = records_frame(doc.get("group_partitions"), GP_COLUMNS)
    gp = gp[gp["group_id"] == group]
    cols = ["topic", "partition", "status", "lag", "lag (seconds)", "committed", "log start", "high watermark",
            "LSO", "last commit", "time to data loss", "owner", "owner host", "why this status"]
    if gp.empty:
        return pd.DataFrame(columns=cols)
    gp = gp.sort_values(["topic", "partition"])
    return pd.DataFrame({
        "topic": gp["topic"], "partition": gp["partition"], "status": gp["status"],
        "lag": pd.array(gp["lag"], dtype="Int64"),
        "lag (seconds)": pd.array(pd.to_numeric(gp["lag_seconds"], errors="coerce"), dtype="Float64").round(1),
        "committed": pd.array(gp["committed_offset"], dtype="Int64"),
        "log start": pd.array(gp["log_start_offset"], dtype="Int64"),
        "high watermark": pd.array(gp["high_watermark"], dtype="Int64"),
        "LSO": pd.array(gp["last_stable_offset"], dtype="Int64"),
        "last commit": epoch_to_local(gp["last_commit_time"], tz),
        "time to data loss": ["DATA LOST (committed offset below log start)" if b else
                              (fmt_duration(s) if not is_missing(s) and lag else "—")
                              for b, s, lag in zip(gp["below_log_start"], gp["seconds_to_retention"], gp["lag"],
                                                   strict=False)],
        "owner": [c if isinstance(c, str) else "— (unassigned)" for c in gp["owner_client_id"]],
        "owner host": gp["owner_host"].fillna(""),
        "why this status": gp["status_reason"].fillna(""),
    }, columns=cols).reset_index(drop=True)


def largest_lag(groups: pd.DataFrame) -> tuple[str, str | None]:
    """(lag as text, group) of the group whose oldest unread message is the oldest, over the rows of
    `groups_frame` (which are sorted by status, not by lag); ``("—", None)`` when no group has a lag figure."""
    if groups is None or groups.empty:
        return "—", None
    secs = pd.to_numeric(groups["lag (seconds)"], errors="coerce").astype("float64")
    if secs.isna().all():
        return "—", None
    i = secs.idxmax()
    return str(groups.loc[i, "lag"]), str(groups.loc[i, "group"])


def retention_risk_frame(doc: dict[str, Any], horizon_s: float = RETENTION_HORIZON_S,
                         groups: list[str] | None = None) -> pd.DataFrame:
    """Partitions whose unread messages retention has deleted, or will delete within `horizon_s`, soonest first.

    Only the groups that run: those nobody runs (INACTIVE, ABANDONED) lose nothing anyone waits for, so they are
    left out unless picked by name in `groups`.
    """
    idle = {g.get("group_id") for g in doc.get("groups") or [] if g.get("activity") not in (None, ACTIVE_GROUP)
            or g.get("status") in IDLE_GROUP_STATUSES}
    rows = []
    for gp in doc.get("group_partitions") or []:
        if groups and gp.get("group_id") not in groups:
            continue
        if not groups and (gp.get("group_id") in idle or gp.get("status") in IDLE_GROUP_STATUSES):
            continue
        s, lost = gp.get("seconds_to_retention"), bool(gp.get("below_log_start"))
        if lost or (not is_missing(s) and gp.get("lag") and float(s) < horizon_s):
            rows.append({"group": gp.get("group_id"), "topic": gp.get("topic"), "partition": gp.get("partition"),
                         "lag": gp.get("lag"), "_s": -1.0 if lost else float(s),
                         "time to data loss": "DATA LOST" if lost else fmt_duration(s)})
    cols = ["group", "topic", "partition", "lag", "time to data loss"]
    if not rows:
        return pd.DataFrame(columns=cols)
    return pd.DataFrame(rows).sort_values(["_s", "group"])[cols].reset_index(drop=True)


def lag_figure(hist: pd.DataFrame, tz: str | None, metric: str = "lag_sum", groups: list[str] | None = None,
               top_n: int = 8) -> go.Figure:
    """Lag over time per group / topic from history ``group_lag`` (the `top_n` largest now, or `groups`).

    Without `groups`, the groups nobody runs (their latest ``status`` INACTIVE or ABANDONED) are left out: the
    Consumers table puts them last or hides them, and their lag grows by design.
    """
    label = "lag (messages)" if metric == "lag_sum" else "lag (seconds)"
    if hist is None or hist.empty:
        return empty_figure("No lag history yet — the collector writes it every flush interval.")
    h = hist.dropna(subset=["topic"]) if "topic" in hist.columns else hist
    if groups:
        h = h[h["group_id"].isin(groups)]
    elif "status" in h.columns:
        last = h.sort_values("time", kind="stable").groupby("group_id")["status"].last()
        h = h[~h["group_id"].isin(last.index[last.isin(IDLE_GROUP_STATUSES)])]
    h = h.dropna(subset=[metric])
    if h.empty:
        return empty_figure("No lag figures for these groups in this time range.")
    h = h.assign(series=h["group_id"].astype(str) + " / " + h["topic"].astype(str),
                 value=h[metric].astype("float64"))
    last_t = h.groupby("series")["time"].transform("max")
    latest = h[h["time"] == last_t].groupby("series")["value"].max().sort_values(ascending=False)
    keep = list(latest.index[:top_n])
    fig = go.Figure()
    for i, s in enumerate(keep):
        d = h[h["series"] == s].sort_values("time")
        fig.add_trace(time_trace(
            d["time"], d["value"], tz, s, label, "%{y:,.0f}", mode="lines",
            line={"color": SERIES_COLORS[i % len(SERIES_COLORS)], "width": 2,
                  "dash": ["solid", "dash", "dot", "dashdot"][(i // len(SERIES_COLORS)) % 4]}))
    fig.update_yaxes(title=label, rangemode="tozero")
    fig.update_xaxes(title=None)
    return base_layout(fig, height=340)


def group_status_history(hist: pd.DataFrame, group: str) -> pd.DataFrame:
    """Status changes of one group over time (time, status, worst partition status)."""
    if hist is None or hist.empty:
        return pd.DataFrame(columns=["time", "status", "worst_partition_status"])
    h = hist[hist["group_id"] == group].sort_values("time")
    h = h.groupby("time", as_index=False).agg(status=("status", "first"),
                                              worst_partition_status=("worst_partition_status", "first"))
    changed = h[["status", "worst_partition_status"]].ne(h[["status", "worst_partition_status"]].shift()).any(axis=1)
    return h[changed].reset_index(drop=True)


STATUS_COLORS = {"OK": OKABE_ITO["sky_blue"], "WARN": OKABE_ITO["orange"], "ERR": OKABE_ITO["vermillion"]}
