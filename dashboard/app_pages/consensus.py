"""Consensus: ZooKeeper members and elections, the KRaft quorum, ZooKeeper-vs-metadata disagreements."""

import streamlit as st

from collectors.model.wording import plural
from dashboard import ui
from dashboard.views import consensus as csv
from dashboard.views.common import SEVERITY_STYLE

ctx = ui.page("Consensus", "The ZooKeeper ensemble or KRaft quorum under the cluster. A zxid is epoch:counter — "
                           "a new epoch means a leader election.")
doc = ctx.doc

if doc:
    zk = csv.zookeeper_frame(doc)
    kraft = csv.kraft_frame(doc, ctx.tz)
    hist = ctx.history("consensus", ["time", "kind", "server", "serving", "mode", "zxid_epoch", "zxid_counter",
                                     "lag_behind_leader", "node_id", "leader_id", "leader_epoch"])
    if zk.empty and kraft.empty:
        st.info("This cluster reports neither ZooKeeper servers nor a KRaft quorum. For a ZooKeeper-based cluster, "
                "give the collector the ensemble (`zookeeper.connect` of the cluster in its config); for KRaft, the "
                "collector needs DescribeQuorum (Kafka 3.3+) to be allowed.", icon=":material/info:")
    if not zk.empty:
        st.subheader("ZooKeeper ensemble")
        serving = int(zk["serving"].sum())
        leaders = csv.zk_leaders(zk)
        c = st.columns([1, 2, 1, 1])
        c[0].metric("Serving", f"{serving}/{len(zk)}", help="a majority must serve for the ensemble to work")
        c[1].metric("Leader", leaders["server"].iloc[0] if len(leaders) == 1 else
                    ("NONE" if leaders.empty else f"{len(leaders)} leaders!"))
        c[2].metric("Leader zxid", leaders["zxid (epoch:counter)"].iloc[0] if len(leaders) == 1 else "—")
        behind = zk["behind leader (txns)"].dropna()
        c[3].metric("Max follower lag", f"{int(behind.max())} txns" if len(behind) else "—")
        ui.table(ctx, zk, key="cons_zk", styles={"mode": {"not serving": SEVERITY_STYLE["critical"]}})
        st.subheader("Elections")
        if hist.empty:
            st.info(ctx.empty_history_note("ZooKeeper history"), icon=":material/hourglass_empty:")
        else:
            ui.chart(csv.zk_timeline_figure(hist, ctx.tz), key="cons_zk_timeline")
            elections = csv.elections_display(csv.zk_elections(hist), ctx.tz)
            if elections.empty:
                st.caption(f"No election in the last {ctx.range_label} (the zxid epoch did not change).")
            else:
                ui.table(ctx, elections, key="cons_elections")
    if not kraft.empty:
        st.subheader("KRaft quorum")
        ui.table(ctx, kraft, key="cons_kraft")
        el = csv.elections_display(csv.kraft_elections(hist), ctx.tz)
        if el.empty:
            st.caption(f"No KRaft leader change in the last {ctx.range_label}.")
        else:
            st.caption("Leader changes")
            ui.table(ctx, el, key="cons_kraft_elections")

    st.subheader("ZooKeeper vs metadata")
    if not csv.has_zk_partition_state(doc):
        st.caption("No partition state read from ZooKeeper (KRaft cluster, or the collector has no ZooKeeper access).")
    else:
        mismatch = csv.isr_mismatch_frame(doc)
        ctrl = [a for a in doc.get("alerts") or [] if a.get("rule") == "controller_mismatch"]
        for a in ctrl:
            st.error(a.get("summary"), icon=":material/compare_arrows:")
        if mismatch.empty:
            st.success("ZooKeeper's partition state agrees with the metadata for every partition.",
                       icon=":material/check_circle:")
        else:
            st.warning(f"{plural(len(mismatch), 'partition')} where ZooKeeper and the metadata disagree on leader or "
                       "ISR (brief disagreement during a change is normal; lasting disagreement is not).")
            ui.table(ctx, mismatch, key="cons_mismatch")
