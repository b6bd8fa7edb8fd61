"""Consumers: groups with status and lag, lag over time, retention risk, partition drill-down."""

import streamlit as st

from dashboard import ui
from dashboard.views import consumers as cv
from dashboard.views.common import STATUS_STYLE

ctx = ui.page("Consumers", "Lag in messages and in seconds, lag status (Burrow's OK / WARN / STALL / STOP / REWIND) "
                           "and how close retention is to deleting what a group has not read.")
doc = ctx.doc

if doc:
    all_groups = sorted({g.get("group_id") for g in doc.get("groups") or []})
    chosen = ui.linked_multiselect("Groups", all_groups, "group", key="con_groups", placeholder="all groups")
    hidden = cv.hidden_groups(doc)
    show_abandoned = hidden > 0 and st.toggle(f"Show {hidden:,} abandoned groups", key="con_abandoned",
                                              help="Groups without members and without a moving commit for "
                                                   "thresholds.group_abandoned_after_s (7 days by default): info, "
                                                   "never paging, hidden by default.")
    groups = cv.groups_frame(doc, ctx.tz, chosen or None, show_abandoned=show_abandoned)
    filtered = doc.get("filtered_groups") or 0
    if filtered:
        st.caption(f"{filtered:,} groups are left out by this cluster's filters (clusters[].filters.groups): "
                   "never described, their offsets never fetched.")
    if groups.empty:
        st.info("No consumer groups seen on this cluster." if not all_groups else "No group matches the filter.")
    else:
        n_err = int((groups["status"] == "ERR").sum())
        n_warn = int((groups["status"] == "WARN").sum())
        c = st.columns(4)
        c[0].metric("Groups", f"{len(groups):,}")
        c[1].metric("ERR", n_err)
        c[2].metric("WARN", n_warn)
        lag, lag_group = cv.largest_lag(groups)
        c[3].metric("Largest lag", lag, delta=lag_group, delta_color="off", delta_arrow="off",
                    help="age of the oldest unread message over the groups listed, and its group")
        ui.table(ctx, groups.drop(columns=["lag (seconds)"]), key="con_table",
                 height=min(36 * (len(groups) + 1) + 4, 460),
                 styles={"status": STATUS_STYLE, "worst partition": STATUS_STYLE},
                 config={"lag": st.column_config.TextColumn("lag (time)", help="age of the oldest unread message"),
                         "time to data loss": st.column_config.TextColumn(
                             help="estimated time until retention deletes messages this group has not read")})

    st.subheader("Lag over time")
    metric = st.radio("Measure", ["messages", "seconds"], horizontal=True, key="con_metric")
    col = "lag_sum" if metric == "messages" else "lag_seconds_max"
    hist = ctx.history("group_lag", ["time", "group_id", "topic", "status", col])
    if hist.empty:
        st.info(ctx.empty_history_note("consumer lag history"), icon=":material/hourglass_empty:")
    else:
        ui.chart(cv.lag_figure(hist, ctx.tz, col, chosen or None), key="con_lag")
        if not chosen:
            st.caption("The 8 group / topic series with the largest lag now, of the groups that run (INACTIVE and "
                       "ABANDONED ones are left out); pick groups above to compare others.")

    st.subheader("Retention risk")
    risk = cv.retention_risk_frame(doc, groups=chosen or None)
    if risk.empty:
        st.success("No running group is within a day of losing unread messages to retention.",
                   icon=":material/check_circle:")
    else:
        ui.table(ctx, risk, key="con_risk")
    if not chosen and any(g.get("activity") not in (None, "active") for g in doc.get("groups") or []):
        st.caption("Groups nobody runs (INACTIVE, ABANDONED) are left out; pick one above to see its risk.")

    st.subheader("Partitions of a group")
    if all_groups:
        default = chosen[0] if chosen else (groups["group"].iloc[0] if not groups.empty else all_groups[0])
        group = st.selectbox("Group", all_groups, index=all_groups.index(default), key="con_drill")
        parts = cv.group_partitions_frame(doc, group, ctx.tz)
        if parts.empty:
            st.info(f"Group {group} has no committed offsets (no lag figure without a commit).")
        else:
            ui.table(ctx, parts, key="con_parts", height=min(36 * (len(parts) + 1) + 4, 420),
                     styles={"status": STATUS_STYLE})
            st.caption("Last commit: when the committed offset last moved, as the collector saw it. Owner: the "
                       "member the group's current assignment gives the partition to (client id and host). Why "
                       "this status: the rule that decided it.")
        status = cv.group_status_history(ctx.history("group_lag", ["time", "group_id", "status",
                                                                   "worst_partition_status"]), group)
        if len(status) > 1:
            st.caption("Status changes in the time range")
            status = status.assign(time=ui.epoch_local(status["time"], ctx.tz))
            ui.table(ctx, status, key="con_status")
