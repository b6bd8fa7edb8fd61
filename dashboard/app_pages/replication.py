"""Replication: ISR heatmap (topic x partition), brokers, durability posture, config risks, ISR changes."""

import streamlit as st

from dashboard import ui
from dashboard.views import replication as rv
from dashboard.views.common import STATUS_STYLE

ctx = ui.page("Replication", "In-sync replicas, brokers and how many failures each topic can take.")
doc = ctx.doc

if doc:
    all_topics = sorted({p.get("topic") for p in doc.get("partitions") or []})
    topics = ui.linked_multiselect("Topics", all_topics, "topic", key="rep_topics", placeholder="all topics")
    all_parts = rv.partitions_frame(doc)
    parts = all_parts[all_parts["topic"].isin(topics)].reset_index(drop=True) if topics else all_parts
    counts = rv.state_counts(parts)
    cols = st.columns(6)
    cols[0].metric("Partitions", f"{len(parts):,}")
    cols[1].metric("In sync", f"{counts['in sync']:,}")
    cols[2].metric("Under-replicated", f"{counts['under-replicated']:,}")
    cols[3].metric("At min ISR", f"{counts['at min ISR']:,}", help="one more failure stops acks=all writes")
    cols[4].metric("Under min ISR", f"{counts['under min ISR']:,}")
    cols[5].metric("Offline", f"{counts['offline']:,}")

    st.subheader("ISR by topic and partition")
    if parts.empty:
        st.info("No partitions in the latest snapshot (the partitions section may be stale).")
    else:
        max_topics = 60
        fig, shown, total = rv.isr_heatmap(parts, max_topics=max_topics)
        ui.chart(fig, key="rep_heatmap")
        legend = " · ".join(f"**{s}**: {h}" for s, h in rv.STATE_HELP.items())
        st.caption(f"Cells show ISR size / replication factor; hover for leader, replicas and ISR. {legend}.")
        if shown < total:
            st.caption(f"Showing the {shown} worst of {total} topics; pick topics above to see others.")
        show_all = st.toggle("List every partition (not only those in trouble)", key="rep_all")
        problems = rv.problem_partitions(parts, include_all=show_all)
        if problems.empty:
            st.success("Every partition has its full ISR.", icon=":material/check_circle:")
        else:
            ui.table(ctx, problems, key="rep_problems", height=min(36 * (len(problems) + 1) + 4, 420),
                     styles={"state": rv.STATE_STYLE})

    st.subheader("Brokers")
    changes = ctx.history("partition_changes", ["time", "topic", "partition", "kind", "leader_before",
                                                "leader_after", "isr_before", "isr_after"])
    brokers = rv.brokers_frame(doc, all_parts, changes, ctx.tz)
    broker_q = ui.query_param("broker")
    if broker_q and broker_q.isdigit() and not brokers.empty:
        st.caption(f"Alert target: broker {broker_q} (highlighted first).")
        brokers = brokers.assign(_f=brokers["broker"] != int(broker_q)).sort_values(["_f", "broker"]).drop(
            columns="_f")
    if brokers.empty:
        st.info("No brokers in the latest snapshot.")
    else:
        ui.table(ctx, brokers, key="rep_brokers", styles={"status": STATUS_STYLE})
        st.caption(f"Out of ISR now: partitions the broker hosts but is not in sync for. ISR shrinks: times it was "
                   f"dropped from an ISR in the last {ctx.range_label} (history `partition_changes`).")

    st.subheader("Durability posture")
    posture = rv.durability_frame(doc, topics or None)
    if posture.empty:
        st.info("No topic configuration in the latest snapshot.")
    else:
        ui.table(ctx, posture, key="rep_posture", config={
            "failures before writes stop": st.column_config.NumberColumn(
                help="broker failures the worst partition can take before acks=all writes fail"),
            "failures before data loss": st.column_config.NumberColumn(
                help="broker failures the worst partition can take before acknowledged data can be lost"),
            "risk": st.column_config.TextColumn(width="large")})

    st.subheader("Config risks")
    risks = rv.config_risks(doc, topics or None)
    if risks.empty:
        st.success("No unsafe durability settings (unclean election, min.insync.replicas vs RF).",
                   icon=":material/check_circle:")
    else:
        ui.table(ctx, risks, key="rep_risks")

    st.subheader("Leader and ISR changes")
    events = rv.isr_changes_frame(changes, ctx.tz, topics or None)
    if events.empty:
        st.info(ctx.empty_history_note("leader or ISR change"))
    else:
        ui.table(ctx, events, key="rep_changes", height=min(36 * (len(events) + 1) + 4, 360))
