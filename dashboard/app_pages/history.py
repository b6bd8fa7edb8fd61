"""History / Reports: the alert timeline (open -> resolve bars) and the weekly Spark reports."""

import streamlit as st

from dashboard import data, ui
from dashboard.views import alerts as av
from dashboard.views import reports as rpv
from dashboard.views.common import SEVERITY_STYLE

ctx = ui.page("History / Reports", "What opened, when, and for how long; and the weekly reliability reports.")

st.subheader("Alert timeline")
events = ctx.history("alert_events", ["time", "cluster", "event", "rule", "severity", "subject", "summary",
                                      "first_seen", "resolved_at"])
# the events hold rows only where something happened: the alerts open across the whole window come from the
# latest snapshot of the cluster shown
shown_docs = {c: d for c, d in ctx.docs.items() if c == ctx.cluster}
refs = {c: float(d["time"]) for c, d in ctx.docs.items() if isinstance(d.get("time"), int | float)}
intervals = av.alert_intervals(events, refs or ctx.ref, shown_docs)
if intervals.empty:
    st.info(ctx.empty_history_note("alert opened or resolved"), icon=":material/hourglass_empty:")
else:
    rules = sorted(intervals["rule"].dropna().unique())
    c1, c2 = st.columns([3, 1])
    chosen = c1.multiselect("Rules", rules, key="hist_rules", placeholder="all rules")
    by_topic = c2.toggle("One row per topic", value=True, key="hist_by_topic",
                         help="partition alerts of a topic share a row")
    if chosen:
        intervals = intervals[intervals["rule"].isin(chosen)]
    ui.chart(av.alert_timeline_figure(intervals, ctx.tz, by_topic=by_topic, start=ctx.start), key="hist_timeline")
    st.caption("Bars run from open to resolve; hatched bars are still open (an alert open since before the window "
               "runs from its left edge). Colours: vermillion critical, orange warning, sky blue info.")
    with st.expander(f"{len(intervals)} alert occurrences in the last {ctx.range_label}"):
        ui.table(ctx, av.intervals_display(intervals, ctx.tz), key="hist_events", styles={"severity": SEVERITY_STYLE})

st.subheader("Weekly reliability reports")
if not ctx.cluster:
    st.info("No cluster known yet (no latest state).")
else:
    reports = data.find_reports(ctx.settings.reports_dir, ctx.cluster)
    if not reports:
        st.info(f"No weekly report for {ctx.cluster} yet under `{ctx.settings.reports_dir}`. The Spark job "
                "(`spark-submit spark_analytics/weekly_report.py`) writes `<cluster>/<week>/report.html` and "
                "`summary.json` there once a week.", icon=":material/description:")
    else:
        weeks = [r.week for r in reports]
        week = st.selectbox("Week", weeks, index=0, key="hist_week")
        rep = reports[weeks.index(week)]
        if rep.summary_error:
            st.warning(f"Cannot read the summary: {rep.summary_error}")
        if rep.summary is not None:
            figures, tables, notes = rpv.weekly_summary(rep.summary)
            for i in range(0, len(figures), 4):
                cols = st.columns(4)
                for col, f in zip(cols, figures[i:i + 4], strict=False):
                    col.metric(f.label, f.value, delta=f.delta, delta_color=f.delta_color)
            for note in notes:
                st.caption(note)
            for name, df in tables.items():
                with st.expander(name, expanded=name != "Week over week"):
                    ui.table(ctx, df, key=f"hist_rep_{name}",
                             styles={"worse": {"WORSE": SEVERITY_STYLE["critical"]},
                                     "severity": SEVERITY_STYLE})
        if rep.html is not None:
            size = rep.html.stat().st_size
            c1, c2 = st.columns([1, 2])
            c1.download_button("Download report.html", data=rep.html.read_bytes, on_click="ignore",
                               file_name=f"{ctx.cluster}-{week}-report.html", mime="text/html", key="hist_download")
            embed = c2.toggle("Show the full report here", value=size < 2_000_000, key="hist_embed",
                              help=f"report.html is {size / 1e6:.1f} MB (plotly inlined, works offline)")
            if embed:
                st.iframe(rep.html, height=900)
        else:
            st.caption("This week has a summary but no report.html.")
