"""Overview: one health line per cluster, open alerts by severity and age, sparklines of the last hours."""

import streamlit as st

from dashboard import ui
from dashboard.views import alerts as av
from dashboard.views import overview as ov
from dashboard.views.alerts import target_url
from dashboard.views.common import SEVERITY_STYLE

ctx = ui.page("Overview", "Is any acknowledged data at risk, is anyone stuck, and since when?", all_clusters=True)

if ctx.docs:
    health = ov.health_frame(ctx.docs, ctx.fresh)
    for h in health.to_dict("records"):
        with st.container(border=True, key=f"ov_cluster_{h['cluster']}"):
            color = ov.VERDICT_COLORS.get(h["verdict"], "gray")
            st.markdown(f"#### {h['cluster']} &nbsp; :{color}-badge[{h['verdict']}]")
            cols = st.columns(7)
            cols[0].metric("Brokers up", h["brokers up"])
            cols[1].metric("Offline", h["offline"], help="partitions without a leader: reads and writes fail")
            cols[2].metric("Under min ISR", h["under min ISR"], help="partitions where acks=all writes fail")
            cols[3].metric("Under-replicated", h["under-replicated"])
            cols[4].metric("Groups in ERR", h["groups ERR"], help=f"{h['groups WARN']} more in WARN")
            cols[5].metric("Stuck txns", h["stuck txns"])
            cols[6].metric("Hanging txns", h["hanging txns"])
            st.caption(f"Controller: **{h['controller']}** · Worst group: **{h['worst group']}** · "
                       f"Quorum: **{h['quorum']}** · Data: {h['data']} · Open alerts: {h['open alerts']}")

    counts = av.alert_counts(ctx.docs)
    st.subheader(f"Open alerts · {counts['critical']} critical · {counts['warning']} warning · {counts['info']} info")
    open_alerts = av.open_alerts_frame(ctx.docs, ctx.tz)
    if open_alerts.empty:
        st.success("No open alerts.", icon=":material/check_circle:")
    else:
        rules = sorted(open_alerts["rule"].dropna().unique())
        chosen = st.multiselect("Rules", rules, key="ov_rules", placeholder="all rules")
        shown = open_alerts[open_alerts["rule"].isin(chosen)] if chosen else open_alerts
        display = shown.drop(columns=["open_for_s"] + (["cluster"] if len(ctx.docs) == 1 else []))
        event = ui.table(
            ctx, display, key="ov_alerts", on_select="rerun", selection_mode="single-row",
            height=min(36 * (len(shown) + 1) + 4, 460), styles={"severity": SEVERITY_STYLE},
            config={"severity": st.column_config.TextColumn("severity", width="small"),
                    "subject": st.column_config.TextColumn("subject", width="medium"),
                    "open_for": st.column_config.TextColumn("open for", help="on the collector's clock"),
                    "opened": st.column_config.DatetimeColumn("opened", format="YYYY-MM-DD HH:mm:ss",
                                                              timezone=ctx.tz, help=f"local time ({ctx.tz})"),
                    "opened_utc": st.column_config.TextColumn("opened (UTC)"),
                    "summary": st.column_config.TextColumn("summary", width="large"),
                    "link": st.column_config.LinkColumn("page", display_text="open ↗",
                                                        help="the page that shows what this alert is about")})
        st.caption("Critical first, then the longest open. Select a row to open the page that shows what the alert "
                   "is about.")
        rows = event.selection.rows if event is not None and hasattr(event, "selection") else []
        if rows:
            alert = shown.iloc[rows[0]]
            page, params = av.alert_target(str(alert["rule"]), str(alert["subject"]), str(alert["cluster"]))
            if ctx.pages and page in ctx.pages:
                st.switch_page(ctx.pages[page], query_params=params)
            else:
                st.markdown(f"[Open {alert['rule']} {alert['subject']}]({target_url(page, params)})")
        critical = shown[shown["severity"] == "critical"].drop_duplicates("link").head(6)
        if not critical.empty:
            st.caption("Jump to what the critical alerts are about:")
            cols = st.columns(min(3, len(critical)))
            for i, a in enumerate(critical.itertuples(index=False)):
                page, params = av.alert_target(str(a.rule), str(a.subject), str(a.cluster))
                with cols[i % len(cols)]:
                    ui.link(ctx, page, f"{a.rule}: {a.subject}", params, icon=":material/arrow_forward:")

    if ctx.cluster:
        st.subheader(f"Last {ctx.range_label} · {ctx.cluster}")
        cluster_hist = ctx.history("cluster", ["time", "under_replicated", "under_min_isr", "offline", "alerts_open"])
        if cluster_hist.empty:
            st.info(ctx.empty_history_note("cluster history"), icon=":material/hourglass_empty:")
        else:
            brokers = ctx.history("brokers", ["time", "alive", "reachable"])
            groups = ctx.history("group_lag", ["time", "lag_sum"])
            ui.chart(ov.sparklines_figure(cluster_hist, ctx.tz, brokers, groups), key="ov_spark", toolbar=False)
