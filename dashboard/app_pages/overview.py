"""Overview: what is wrong, as incidents (one cause each, worst first), then the risks, then every alert on demand.

A health card per cluster says in words what on-call needs (the open incidents' summaries); the incident table
leads; each incident opens onto its member alerts, searched and cut server-side (a broker down on a big
cluster is one incident of 100,000 alerts: never 100,000 rows in the browser). Configuration and placement
risks are apart and collapsed; the flat per-alert list is one click down.
"""

import streamlit as st

from collectors.model.wording import plural
from dashboard import data, ui
from dashboard.views import alerts as av
from dashboard.views import incidents as iv
from dashboard.views import losses as lv
from dashboard.views import overview as ov
from dashboard.views.alerts import target_url
from dashboard.views.common import SEVERITY_STYLE, fmt_count

EXPANDED_INCIDENTS = 25  # incidents with their own expander; the others are reached through a picker
SEVERITY_ICON = {"critical": ":material/error:", "warning": ":material/warning:", "info": ":material/info:"}

ctx = ui.page("Overview", "Is any acknowledged data at risk, is anyone stuck, and since when?", all_clusters=True)


def members_table(cluster: str, inc: dict, key: str) -> None:
    """An incident's member alerts: a search box (filters on the server) and at most `MEMBER_LIMIT` rows."""
    doc = ctx.docs.get(cluster, {})
    members = data.incident_members(cluster, doc).get(str(inc.get("id")), [])
    if not members:
        st.caption("No open alert of this incident in the snapshot.")
        return
    query = st.text_input("Search member alerts", key=f"{key}_q", placeholder="rule, subject or summary",
                          label_visibility="collapsed") if len(members) > 10 else ""
    frame, total = iv.member_frame(members, doc.get("time"), query or "")
    ui.table(ctx, frame, key=f"{key}_t", height=min(36 * (len(frame) + 1) + 4, 400),
             styles={"severity": SEVERITY_STYLE},
             config={"open_for": st.column_config.TextColumn("open for", help="on the collector's clock"),
                     "opened_utc": st.column_config.TextColumn("opened (UTC)"),
                     "summary": st.column_config.TextColumn("summary", width="large")})
    shown = f"first {fmt_count(len(frame))} of " if total > len(frame) else ""
    st.caption(f"{shown}{plural(total, 'member alert')}"
               + (f" matching “{query}”" if query else "") + (" — search to narrow" if shown else ""))


def incident_box(i: int, inc: dict) -> None:
    radius = iv.blast_radius(inc)
    cluster = str(inc.get("cluster"))
    n = int(inc.get("alerts") or 0)
    label = f"{inc.get('severity', 'info').upper()} · {inc.get('kind')} {inc.get('subject')} · " \
            f"{plural(n, 'alert')}"
    with st.expander(label, icon=SEVERITY_ICON.get(inc.get("severity"))):
        st.markdown(f"**{inc.get('summary')}**")
        facts = [f"open for {inc['open_for']}", f"opened {inc['opened_utc']}"]
        if radius:
            facts.append(radius)
        if inc.get("consequences"):
            facts.append(f"also explains: {inc['consequences']}")
        st.caption(" · ".join(facts))
        raw = incidents_by_id.get((cluster, str(inc.get("id"))), {})
        page, params = iv.incident_target({**inc, **raw})
        ui.link(ctx, page, f"Open what {inc.get('subject')} is about", params, icon=":material/arrow_forward:")
        members_table(cluster, raw or inc, key=f"ov_inc_{i}")


if ctx.docs:
    health = ov.health_frame(ctx.docs, ctx.fresh)
    for h in health.to_dict("records"):
        doc = ctx.docs.get(h["cluster"], {})
        with st.container(border=True, key=f"ov_cluster_{h['cluster']}"):
            color = ov.VERDICT_COLORS.get(h["verdict"], "gray")
            st.markdown(f"#### {h['cluster']} &nbsp; :{color}-badge[{h['verdict']}]")
            sentences = iv.health_sentence(doc)
            for s in sentences:
                st.markdown(f"- {s}")
            if not sentences:
                st.markdown("No open incident." + (" Only risks are open (below)."
                                                   if iv.split_risks(doc.get("alerts"))[1] else ""))
            cols = st.columns(6)
            cols[0].metric("Brokers up", h["brokers up"])
            cols[1].metric("Offline", h["offline"], help="partitions without a leader: reads and writes fail")
            cols[2].metric("Under min ISR", h["under min ISR"], help="partitions where acks=all writes fail")
            cols[3].metric("Groups in ERR", h["groups ERR"], help=f"{h['groups WARN']} more in WARN")
            cols[4].metric("Stuck txns", h["stuck txns"])
            cols[5].metric("Hanging txns", h["hanging txns"])
            st.caption(f"Controller: **{h['controller']}** · Worst group: **{h['worst group']}** · "
                       f"Quorum: **{h['quorum']}** · Under-replicated: {h['under-replicated']:,} · "
                       f"Open alerts: {h['open alerts']} · Data: {h['data']}, as of "
                       f"{ctx.ts_html(doc.get('time'))} ({iv.data_age_text(doc.get('time'), ctx.newest)})",
                       unsafe_allow_html=True)

    # ----- the loss ledger: evidence, not risk
    week_start = ctx.ref - lv.WEEK_S
    losses = lv.first_records(ctx.history("loss_events", all_clusters=True, start=week_start - lv.WEEK_S),
                              since=week_start)  # the week before: context for a loss recorded again
    coverages = {}
    for name in ctx.docs:
        polls = data.read_history(ctx.settings.history_dir, "cluster", week_start, None, [name], ["time"])
        interval = data.poll_interval(ctx.settings, name, ctx.ref)
        coverages[name] = (lv.coverage(polls["time"].tolist(), week_start, ctx.ref, interval), interval)
    covered = [f"{name}: {lv.coverage_text(c, interval)}" for name, (c, interval) in coverages.items()]
    with st.container(border=True, key="ov_data_lost"):
        if losses.empty:
            level, text = lv.no_loss_banner(coverages)
            {"success": st.success, "info": st.info, "warning": st.warning}[level](
                text, icon=":material/verified:" if level == "success" else ":material/visibility_off:")
        else:
            st.error(f"**Data lost in the last 7 days:** {lv.headline(losses)}", icon=":material/error:")
            with st.expander(f"The evidence: {plural(len(losses), 'ledger entry', 'ledger entries')}"):
                ui.table(ctx, lv.ledger_frame(losses), key="ov_ledger", height=min(36 * (len(losses) + 1) + 4, 400),
                         config={"evidence": st.column_config.TextColumn("evidence", width="large"),
                                 "messages": st.column_config.NumberColumn("messages", format="%d")})
                st.caption("Coverage — " + " · ".join(covered))

    # ----- incidents
    incidents = iv.incident_rows(ctx.docs)
    incidents_by_id = {(c, str(i.get("id"))): i for c, d in ctx.docs.items() for i in iv.open_incidents(d)}
    n_sev = incidents["severity"].value_counts().to_dict() if not incidents.empty else {}
    st.subheader(f"Incidents · {len(incidents)} open" + "".join(
        f" · {n_sev[s]} {s}" for s in ("critical", "warning", "info") if n_sev.get(s)))
    counts = av.alert_counts(ctx.docs)
    n_alerts = sum(counts.values())
    if incidents.empty:
        if n_alerts:
            st.info("No open incident: the open alerts are all configuration or placement risks (below).",
                    icon=":material/info:")
        else:
            level, text = ov.no_alerts_message(ctx.fresh)
            if level == "success":
                st.success(text, icon=":material/check_circle:")
            else:
                st.warning(text, icon=":material/schedule:")
    else:
        shown_cols = [c for c in incidents.columns if c not in ("open_for_s", "id", "opened_utc")
                      and not (c == "cluster" and len(ctx.docs) == 1)
                      and not (c == "consequences" and not incidents["consequences"].any())]
        ui.table(ctx, incidents[shown_cols], key="ov_incidents", height=min(36 * (len(incidents) + 1) + 4, 420),
                 styles={"severity": SEVERITY_STYLE},
                 config={"severity": st.column_config.TextColumn("severity", width="small"),
                         "summary": st.column_config.TextColumn("summary", width="large"),
                         "open_for": st.column_config.TextColumn("open for", help="on the collector's clock"),
                         "alerts": st.column_config.NumberColumn("alerts", help="member alerts", format="%d"),
                         "blast radius": st.column_config.TextColumn("blast radius", width="medium")})
        st.caption("One row per cause, worst first (severity, then causes before symptoms, then the longest open). "
                   "Open one below for its member alerts.")
        records = incidents.to_dict("records")
        for i, inc in enumerate(records[:EXPANDED_INCIDENTS]):
            incident_box(i, inc)
        if len(records) > EXPANDED_INCIDENTS:
            rest = records[EXPANDED_INCIDENTS:]
            pick = st.selectbox(f"{len(rest)} more incidents", range(len(rest)), index=None, key="ov_more",
                                format_func=lambda k: f"{rest[k]['severity']} · {rest[k]['kind']} "
                                                      f"{rest[k]['subject']}: {rest[k]['summary']}",
                                placeholder="pick an incident to see its alerts")
            if pick is not None:
                incident_box(EXPANDED_INCIDENTS + pick, rest[pick])

    # ----- risks, apart
    risks = iv.risk_frame(ctx.docs)
    with st.expander(f"Risks: configuration and placement · {len(risks)} open", expanded=False,
                     icon=":material/policy:"):
        st.caption("Standing risks, not incidents: nothing is broken yet, but a failure would cost more than it "
                   "should. They never page and are not counted in the incidents above.")
        if risks.empty:
            st.success("No configuration or placement risk.", icon=":material/check_circle:")
        else:
            ui.table(ctx, risks.drop(columns=["cluster"] if len(ctx.docs) == 1 else []), key="ov_risks",
                     height=min(36 * (len(risks) + 1) + 4, 400), styles={"severity": SEVERITY_STYLE},
                     config={"summary": st.column_config.TextColumn("summary", width="large")})

    # ----- every alert, one click down
    if n_alerts and st.toggle(f"Every open alert, one row each ({fmt_count(n_alerts)}: {counts['critical']} "
                              f"critical · {counts['warning']} warning · {counts['info']} info)",
                              key="ov_all_alerts"):
        c1, c2 = st.columns([2, 3])
        rules = sorted({str(a.get("rule")) for d in ctx.docs.values() for a in d.get("alerts") or []
                        if iv.is_open(a)})
        chosen = c1.multiselect("Rules", rules, key="ov_rules", placeholder="all rules")
        query = c2.text_input("Search", key="ov_alerts_q", placeholder="subject or summary contains…")
        shown = av.open_alerts_frame(ctx.docs, ctx.tz, rules=chosen or None, query=query or "",
                                     limit=iv.MEMBER_LIMIT)
        matched = int(shown.attrs.get("matched", len(shown)))
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
        st.caption(("" if matched <= len(shown) else f"First {fmt_count(len(shown))} of {fmt_count(matched)}. ")
                   + "Critical first, then the longest open. Select a row to open the page that shows what the "
                   "alert is about.")
        rows = event.selection.rows if event is not None and hasattr(event, "selection") else []
        if rows:
            alert = shown.iloc[rows[0]]
            page, params = av.alert_target(str(alert["rule"]), str(alert["subject"]), str(alert["cluster"]))
            if ctx.pages and page in ctx.pages:
                st.switch_page(ctx.pages[page], query_params=params)
            else:
                st.markdown(f"[Open {alert['rule']} {alert['subject']}]({target_url(page, params)})")

    if ctx.cluster:
        st.subheader(f"Last {ctx.range_label} · {ctx.cluster}")
        cluster_hist = ctx.history("cluster", ["time", "reachable", "under_replicated", "under_min_isr", "offline",
                                               "alerts_open"])
        if cluster_hist.empty:
            st.info(ctx.empty_history_note("cluster history"), icon=":material/hourglass_empty:")
        else:
            brokers = ctx.history("brokers", ["time", "alive", "reachable"])
            groups = ctx.history("group_lag", ["time", "status", "lag_sum"])  # status: leave out groups nobody runs
            ui.chart(ov.sparklines_figure(cluster_hist, ctx.tz, brokers, groups), key="ov_spark", toolbar=False)
