"""Streamlit glue shared by the pages: navigation, the sidebar filters, freshness banners, tables and links.

`run_app` (called by ``app.py``) declares the pages with ``st.navigation``, renders the shared sidebar once
(cluster, time range, auto-refresh) and hands the resulting `Ctx` to the page through a thread-local, since
a page script runs in the same thread right after. A page started on its own (``AppTest.from_file`` on a
page file, or ``streamlit run dashboard/app_pages/x.py``) finds no handed-over context and builds its own,
sidebar included, so every page works alone.

The page scripts live in ``app_pages/``, not ``pages/``: Streamlit still auto-discovers a ``pages/`` directory
next to the entry point (its v1 multipage mode), and on a freshly started server a deep link such as
``/replication`` would then run that file directly with the v1 navigation, never calling ``st.navigation``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from collectors.model.vocabulary import STALE_POLLS
from dashboard import data
from dashboard.access import require_access
from dashboard.views.alerts import target_url
from dashboard.views.common import Freshness, fmt_duration, fmt_ts, fmt_utc, freshness
from dashboard.views.common import epoch_to_local as epoch_local
from dashboard.views.incidents import data_age_text

PAGES: list[tuple[str, str, str]] = [  # slug, title, icon
    ("overview", "Overview", ":material/monitor_heart:"),
    ("replication", "Replication", ":material/lan:"),
    ("consumers", "Consumers", ":material/speed:"),
    ("transactions", "Transactions", ":material/sync_alt:"),
    ("consensus", "Consensus", ":material/how_to_vote:"),
    ("history", "History / Reports", ":material/history:"),
]
PAGES_DIR = Path(__file__).resolve().parent / "app_pages"
DEFAULT_PAGE = "overview"  # served at "/"; "/overview" reaches it too (see `run_app`)
DEFAULT_URL_PATH = "home"  # the default page's own url_path: reserved by Streamlit, never shown
RANGES: dict[str, float | None] = {"15 minutes": 900, "1 hour": 3600, "6 hours": 6 * 3600, "24 hours": 86400,
                                   "7 days": 7 * 86400, "30 days": 30 * 86400, "all history": None}
DEFAULT_RANGE = "6 hours"
NO_HISTORY = "No history yet — the collector writes it every flush interval (`history.flush_interval_s`, 60 s " \
             "by default) under the history directory."

_handover = threading.local()
__all__ = ["NO_HISTORY", "Ctx", "epoch_local", "page", "page_context", "run_app"]


@dataclass
class Ctx:
    settings: data.Settings
    docs: dict[str, dict[str, Any]]
    cluster: str | None
    tz: str
    now: float  # wall clock of this run
    ref: float  # "now" for history windows: the newest of the wall clock and the snapshots' times
    range_label: str
    start: float | None
    fresh: dict[str, Freshness] = field(default_factory=dict)
    pages: dict[str, Any] | None = None
    retired: list[tuple[str, float]] = field(default_factory=list)  # (cluster, last written): `data.retired_clusters`

    @property
    def doc(self) -> dict[str, Any]:
        return self.docs.get(self.cluster or "", {})

    def history(self, table: str, columns: list[str] | None = None, all_clusters: bool = False,
                start: float | None = None) -> pd.DataFrame:
        clusters = None if all_clusters or self.cluster is None else [self.cluster]
        return data.read_history(self.settings.history_dir, table, start if start is not None else self.start, None,
                                 clusters, columns)

    def has_history(self) -> bool:
        return bool(data.history_tables(self.settings.history_dir))

    def empty_history_note(self, what: str) -> str:
        """Why a history view is empty: no history at all, or nothing in the chosen window."""
        return NO_HISTORY if not self.has_history() else f"No {what} in the last {self.range_label}."

    @property
    def newest(self) -> float | None:
        """The newest snapshot time over all clusters: "now" on the collector's clock (`data_age_text`)."""
        return max((float(d["time"]) for d in self.docs.values() if isinstance(d.get("time"), int | float)),
                   default=None)

    def ts(self, t: float | None) -> str:
        return fmt_ts(t, self.tz)

    def ts_html(self, t: float | None) -> str:
        """Local time with UTC in the hover title."""
        return f'<span title="{fmt_utc(t)}">{fmt_ts(t, self.tz)}</span>'


def _page_config() -> None:
    st.set_page_config(page_title="Kafka reliability", page_icon=":material/monitor_heart:", layout="wide")


def run_app() -> None:
    """The entry point's body: navigation + shared sidebar, then the selected page."""
    _page_config()
    require_access()
    pages = {slug: st.Page(str(PAGES_DIR / f"{slug}.py"), title=title, icon=icon,
                           url_path=DEFAULT_URL_PATH if slug == DEFAULT_PAGE else slug, default=slug == DEFAULT_PAGE)
             for slug, title, icon in PAGES}
    # Streamlit serves the default page at "/" only: its own url_path never resolves (``/overview`` would say
    # "Page not found"). A hidden page with the slug as url_path takes ``/overview`` (and old links to it) and
    # sends the viewer to "/" with the same query parameters, so there is one Overview with one URL in the menu.
    alias = st.Page(str(PAGES_DIR / f"{DEFAULT_PAGE}.py"), title=dict((s, t) for s, t, _ in PAGES)[DEFAULT_PAGE],
                    url_path=DEFAULT_PAGE, visibility="hidden")
    nav = st.navigation([*pages.values(), alias])
    if nav is alias:
        st.switch_page(pages[DEFAULT_PAGE], query_params=dict(st.query_params) or None)
    _handover.ctx = build_context(pages)
    try:
        nav.run()
    finally:
        _handover.ctx = None


def page(title: str, caption: str | None = None, all_clusters: bool = False) -> Ctx:
    """How every page starts: its context (`page_context`), title and caption, and the freshness banners of the
    chosen cluster (or of all clusters) — before any figure, so stale data is never read as current."""
    ctx = page_context()
    header(ctx, title, caption)
    banners(ctx, all_clusters=all_clusters)
    return ctx


def page_context() -> Ctx:
    """The context handed over by `run_app`, or a fresh one (with sidebar) when the page runs alone."""
    ctx = getattr(_handover, "ctx", None)
    _handover.ctx = None
    if ctx is None:
        _page_config()
        require_access()
        ctx = build_context(None)
    return ctx


def query_param(name: str) -> str | None:
    v = st.query_params.get(name)
    return v if v else None


def build_context(pages: dict[str, Any] | None) -> Ctx:
    settings = data.parse_settings()
    signature = data.state_signature(settings.state_dir)  # before reading: a write in between reruns once more
    docs = data.load_latest(settings.state_dir)
    tz = _viewer_tz()
    now = time.time()
    snap_times = [float(d["time"]) for d in docs.values() if isinstance(d.get("time"), int | float)]
    ref = max([now, *snap_times])
    sb = st.sidebar
    sb.markdown("### Kafka reliability")
    clusters = list(docs)
    cluster = None
    if clusters:
        wanted = query_param("cluster")
        if len(clusters) > 1:
            if wanted in clusters and st.session_state.get("kmon_cluster_link") != wanted:
                st.session_state["kmon_cluster"] = wanted  # a link to another cluster wins over the last choice
            elif st.session_state.get("kmon_cluster") not in clusters:
                st.session_state["kmon_cluster"] = clusters[_worst_index(docs)]  # first visit: the worst cluster
            st.session_state["kmon_cluster_link"] = wanted
            cluster = sb.selectbox("Cluster", clusters, key="kmon_cluster")
        else:
            cluster = clusters[0]
            sb.caption(f"Cluster: **{cluster}**")
    range_label = sb.selectbox("Time range", list(RANGES), index=list(RANGES).index(DEFAULT_RANGE), key="kmon_range",
                               help="Window of the history charts and timelines.")
    span = RANGES[range_label]
    start = None if span is None else ref - span
    fresh = {}
    for c, d in docs.items():
        interval = data.poll_interval(settings, c, ref)
        fresh[c] = freshness(d, now, max(STALE_POLLS * interval, 15.0), tz)
    ctx = Ctx(settings, docs, cluster, tz, now, ref, range_label, start, fresh, pages,
              data.retired_clusters(settings.state_dir))
    if ctx.retired:
        sb.caption(retired_note(ctx))
    sb.caption(f"Times in **{tz}** (your browser's zone); chart hovers and the alert list also give UTC.")
    _auto_refresh(settings, signature, tz)
    return ctx


def retired_note(ctx: Ctx, shown: int = 5) -> str:
    """Which clusters left the dashboard because their collector stopped polling them (taken out of its
    configuration: `collectors.outputs.latest_state.retire`), so a cluster that vanishes is explained, not missed."""
    named = ", ".join(f"**{name}** (last polled {ctx.ts(t)})" for name, t in ctx.retired[:shown])
    more = f" and {len(ctx.retired) - shown} more" if len(ctx.retired) > shown else ""
    return (f"No longer polled (removed from the collector's configuration): {named}{more}. Their last state is "
            f"kept in `{ctx.settings.state_dir / 'retired'}`.")


def _viewer_tz() -> str:
    try:
        tz = st.context.timezone
    except Exception:  # outside a session
        tz = None
    return tz or "UTC"


def _worst_index(docs: dict[str, dict[str, Any]]) -> int:
    def badness(d: dict[str, Any]) -> tuple[int, int]:
        alerts = d.get("alerts") or []
        return (int(d.get("reachable") is False), sum(a.get("severity") == "critical" for a in alerts))

    ranked = sorted(range(len(docs)), key=lambda i: badness(list(docs.values())[i]), reverse=True)
    return ranked[0] if ranked else 0


def _auto_refresh(settings: data.Settings, signature: tuple[Any, ...], tz: str) -> None:
    """Rerun the whole page when the collector has written new state (checked every `refresh_s`)."""
    st.session_state["kmon_sig"] = signature
    if settings.refresh_s <= 0:
        return
    on = st.sidebar.toggle("Auto-refresh", value=True, key="kmon_autorefresh",
                           help=f"Checks for new collector data every {settings.refresh_s:g}s and reruns the page.")
    if not on:
        return

    @st.fragment(run_every=settings.refresh_s)
    def watch() -> None:
        current = data.state_signature(settings.state_dir)
        if current != st.session_state.get("kmon_sig"):
            st.session_state["kmon_sig"] = current
            st.rerun(scope="app")
        st.caption(f"Checked for new data at {fmt_ts(time.time(), tz)}")

    with st.sidebar:
        watch()


# ----- rendering helpers


def header(ctx: Ctx, title: str, caption: str | None = None) -> None:
    st.title(title)
    if caption:
        st.caption(caption)
    if not ctx.docs:
        st.warning(f"No latest state found in `{ctx.settings.state_dir}`. The collector writes one "
                   "`<cluster>.json` there after every poll — is it running, and with this `state_dir`? "
                   "(`streamlit run dashboard/app.py -- --state-dir DIR --history DIR`)"
                   + (f" {retired_note(ctx)}" if ctx.retired else ""), icon=":material/info:")


def banners(ctx: Ctx, all_clusters: bool = False) -> None:
    """Big warnings when a cluster is unreachable or its data is stale or partial."""
    for c, f in ctx.fresh.items():
        if not all_clusters and c != ctx.cluster:
            continue
        if f.level == "unreachable":
            st.error(f"#### {f.message}", icon=":material/cloud_off:")
        elif f.level == "stale":
            st.warning(f"#### {f.message}", icon=":material/schedule:")
        elif f.level == "partial":
            st.info(f.message, icon=":material/warning:")
    if not all_clusters and ctx.cluster:
        f = ctx.fresh.get(ctx.cluster)
        if f is not None and f.level == "ok":
            st.caption(f"Data as of {ctx.ts_html(f.snapshot_time)} ({data_age_text(f.snapshot_time, ctx.newest)}, on "
                       f"the collector's clock) · file written {fmt_duration(f.age_s)} ago",
                       unsafe_allow_html=True)


STYLE_MAX_ROWS = 3000  # beyond this, cells are not coloured (pandas Styler is slow on big frames)


def table(ctx: Ctx, df: pd.DataFrame, key: str | None = None, height: int | str = "auto",
          config: dict[str, Any] | None = None, styles: dict[str, dict[Any, str]] | None = None,
          **kwargs: Any) -> Any:
    """st.dataframe without index; tz-aware datetime columns in the viewer's zone; `styles` colour cells by value
    (column -> {value: css}) — always next to the value's text, never colour alone."""
    cfg: dict[str, Any] = {}
    for col in df.columns:
        if isinstance(df[col].dtype, pd.DatetimeTZDtype):
            cfg[col] = st.column_config.DatetimeColumn(col, format="YYYY-MM-DD HH:mm:ss", timezone=ctx.tz,
                                                       help=f"local time ({ctx.tz})")
    cfg.update(config or {})
    shown: Any = df
    if styles and 0 < len(df) <= STYLE_MAX_ROWS:
        styler = df.style.format(precision=2, na_rep="")
        for col, mapping in styles.items():
            if col in df.columns:
                styler = styler.map(lambda v, m=mapping: m.get(v, ""), subset=[col])
        shown = styler
    return st.dataframe(shown, hide_index=True, width="stretch", height=height, column_config=cfg, key=key,
                        **kwargs)


def chart(fig: Any, key: str | None = None, toolbar: bool = True) -> None:
    st.plotly_chart(fig, theme=None, key=key, config={"displaylogo": False, "displayModeBar": toolbar})


def link(ctx: Ctx, slug: str, label: str, params: dict[str, str] | None = None, icon: str | None = None) -> None:
    """A link to another page with query parameters (a page link under navigation, a plain link when alone)."""
    params = {k: v for k, v in (params or {}).items() if v}
    if ctx.pages and slug in ctx.pages:
        st.page_link(ctx.pages[slug], label=label, icon=icon, query_params=params or None)
    else:
        st.markdown(f"[{label}]({target_url(slug, params)})")


def linked_multiselect(label: str, options: list[str], param: str, key: str, placeholder: str) -> list[str]:
    """A filter that a link can preset (``?topic=orders`` from an alert) and that keeps the URL in step when one
    option is chosen, so the filtered page can be shared."""
    wanted = query_param(param)
    chosen = st.multiselect(label, options, default=[wanted] if wanted in options else [], key=key,
                            placeholder=placeholder)
    set_query(**{param: chosen[0] if len(chosen) == 1 else None})
    return chosen


def set_query(**params: str | None) -> None:
    """Keep the URL in step with a filter, so that it can be shared."""
    for k, v in params.items():
        if v:
            if st.query_params.get(k) != v:
                st.query_params[k] = v
        elif k in st.query_params:
            del st.query_params[k]
