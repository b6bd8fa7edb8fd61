"""Transactions: open transactions against their timeout, stuck and hanging ones, LSO gaps, producer epochs."""

import streamlit as st

from collectors.model.wording import count_of, plural
from dashboard import ui
from dashboard.views import transactions as tv
from dashboard.views.common import SEVERITY_STYLE

ctx = ui.page("Transactions", "An open transaction holds back the last stable offset (LSO): read_committed "
                              "consumers cannot read past it until it commits or aborts.")
doc = ctx.doc

if doc:
    txn_q = ui.query_param("txn")
    all_topics = sorted({p.get("topic") for p in doc.get("partitions") or []})
    topics = ui.linked_multiselect("Topics", all_topics, "topic", key="txn_topics", placeholder="all topics")
    if txn_q:
        st.caption(f"Showing transactional id **{txn_q}** (from the link).")
    txns = doc.get("transactions") or []
    producers = doc.get("producers") or []
    hanging = tv.hanging_frame(doc, topics or None, ctx.tz)
    open_txns = tv.transactions_frame(doc, open_only=True, txn=txn_q, topics=topics or None)

    if not hanging.empty:
        st.error(f"#### {plural(len(hanging), 'hanging transaction')}: open on a partition but unknown to every "
                 f"coordinator. {count_of(len(hanging), 'It holds', 'They hold')} the LSO back until aborted "
                 "(`kafka-transactions abort`).", icon=":material/block:")
        ui.table(ctx, hanging, key="txn_hanging")
    stuck = open_txns[open_txns["flag"] == "STUCK"] if not open_txns.empty else open_txns
    if not stuck.empty:
        st.error(f"#### {plural(len(stuck), 'stuck transaction')}: open past their timeout or lingering in Prepare*.",
                 icon=":material/timer_off:")

    st.subheader("Open transactions")
    if not txns and not producers:
        st.info("No transactions seen: no transactional producer has used this cluster's coordinators "
                "(ListTransactions returned nothing) and no partition has an open transaction.",
                icon=":material/inbox:")
    elif open_txns.empty:
        st.success("No transaction is open right now.", icon=":material/check_circle:")
    else:
        ui.table(ctx, open_txns.drop(columns=["age (s)"]), key="txn_open",
                 styles={"flag": {"STUCK": SEVERITY_STYLE["critical"]}}, config={
            "age / timeout": st.column_config.ProgressColumn(
                "age / timeout", min_value=0.0, max_value=1.0, format="percent",
                help="age of the open transaction as a share of transaction.timeout.ms; the coordinator aborts "
                     "an Ongoing transaction at 100%"),
            "flag": st.column_config.TextColumn("", width="small")})
    if txns:
        with st.expander(f"All {len(txns)} transactional ids"):
            ui.table(ctx, tv.transactions_frame(doc, open_only=False, txn=txn_q, topics=topics or None).drop(
                columns=["age / timeout", "age (s)"]), key="txn_all")

    st.subheader("LSO gap per partition")
    gaps = tv.lso_gap_frame(doc, topics or None)
    if gaps.empty:
        st.success("No partition has its LSO behind the high watermark.", icon=":material/check_circle:")
    else:
        ui.table(ctx, gaps, key="txn_gaps", height=min(36 * (len(gaps) + 1) + 4, 360))
    gap_hist = ctx.history("lso_gap", ["time", "topic", "partition", "lso_gap"])
    if gap_hist.empty:
        st.info(ctx.empty_history_note("LSO gap"), icon=":material/hourglass_empty:")
    else:
        ui.chart(tv.lso_gap_figure(gap_hist, ctx.tz, topics or None), key="txn_gap_chart")

    st.subheader("Producer epochs")
    th = ctx.history("transactions", ["time", "cluster", "transactional_id", "producer_id", "producer_epoch",
                                      "keeps_v1", "state"])
    if th.empty:
        st.info(ctx.empty_history_note("open transaction (so no producer epoch)"), icon=":material/inbox:")
    else:
        levels = ctx.history("cluster", ["time", "cluster", "transaction_version"])
        ui.chart(tv.producer_epoch_figure(th, ctx.tz, [txn_q] if txn_q else None, clusters=levels), key="txn_epochs")
        bumps, other = tv.epoch_changes_display(th if not txn_q else th[th["transactional_id"] == txn_q], ctx.tz,
                                                levels)
        # at Transaction V2 every transaction end moves the epoch: those changes are no restart, fence or abort
        left = (f" {plural(other, 'other epoch change')} (transaction ends at Transaction V2, new producer ids) "
                f"{count_of(other, 'is', 'are')} not listed.") if other else ""
        if bumps.empty:
            st.caption("No epoch bump in the time range (a bump means a restart, a fence or a timeout abort)."
                       + left)
        else:
            st.caption("Epoch bumps (a restart, a fence by a newer instance, or an abort on timeout):" + left)
            ui.table(ctx, bumps, key="txn_bumps")
