"""Alerts: the open list (sorted by severity, then longest open), where each one leads, and the timeline.

An alert's subject says what it is about (``topic-partition``, group id, transactional id, ``broker-N``,
ZooKeeper server, cluster); `alert_target` turns it into the page and query parameters that show it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pandas as pd
import plotly.graph_objects as go

from collectors.alerting.catalogue import RULES
from collectors.model.vocabulary import LOST, broker_of, topic_of
from dashboard.views.common import (
    SEVERITY_COLORS,
    SEVERITY_ORDER,
    epoch_to_axis,
    epoch_to_local,
    fmt_duration,
    fmt_utc,
    is_missing,
)
from dashboard.views.plotting import base_layout, empty_figure

ALERT_COLUMNS = ["severity", "rule", "subject", "open_for", "summary", "opened", "opened_utc", "cluster", "link",
                 "open_for_s"]


def alert_target(rule: str, subject: str, cluster: str | None = None) -> tuple[str, dict[str, str]]:
    """(page slug, query parameters) of the page that shows what the alert is about: the rule catalogue says
    which page and what the subject names."""
    params: dict[str, str] = {"cluster": cluster} if cluster else {}
    spec = RULES.get(rule)
    if spec is None:  # a rule newer than this dashboard
        return "history", params
    if spec.subject == "partition":
        params["topic"] = topic_of(subject)
    elif spec.subject == "topic":
        params["topic"] = subject
    elif spec.subject == "broker":
        broker = broker_of(subject)
        if broker is not None:
            params["broker"] = str(broker)
    elif spec.subject == "group":
        params["group"] = subject
    elif spec.subject == "transactional_id":
        params["txn"] = subject
    return spec.page, params


def target_url(page: str, params: dict[str, str]) -> str:
    """A relative URL (works behind a path prefix) of a page with its query parameters."""
    return f"./{page}" + (f"?{urlencode(params)}" if params else "")


def open_alerts_frame(docs: dict[str, dict[str, Any]], tz: str | None = None,
                      clusters: list[str] | None = None, rules: list[str] | None = None, query: str = "",
                      limit: int | None = None) -> pd.DataFrame:
    """Open alerts of the latest snapshots: critical first, then the longest open first.

    "Open for" is measured on the collector's clock (snapshot ``time`` - ``first_seen``), so it is right even
    when the dashboard's clock differs from the collector's. `rules` keeps those rules, `query` the alerts
    whose subject or summary contains it (case-insensitive), `limit` the first rows: filtering and cutting
    happen before the per-row formatting, so 100,000 open alerts cost one pass, not 100,000 formatted rows.
    ``frame.attrs["matched"]`` is the number of alerts that matched before the cut.
    """
    rows = []
    q = query.strip().lower()
    wanted = set(rules) if rules else None
    for cluster, doc in docs.items():
        if clusters is not None and cluster not in clusters:
            continue
        ref = doc.get("time")
        for a in doc.get("alerts") or []:
            if not is_missing(a.get("resolved_at")) or (wanted is not None and a.get("rule") not in wanted):
                continue
            if q and q not in str(a.get("subject", "")).lower() and q not in str(a.get("summary", "")).lower():
                continue
            first = a.get("first_seen")
            age = (float(ref) - float(first)) if not (is_missing(ref) or is_missing(first)) else None
            rows.append({"severity": a.get("severity", "info"), "cluster": cluster, "rule": a.get("rule"),
                         "subject": a.get("subject"), "summary": a.get("summary"), "open_for_s": age,
                         "first_seen": first})
    if not rows:
        out = pd.DataFrame({c: pd.Series(dtype="object") for c in ALERT_COLUMNS})
        out.attrs["matched"] = 0
        return out
    df = pd.DataFrame(rows)
    df["_sev"] = df["severity"].map(SEVERITY_ORDER).fillna(9)
    df["_age"] = df["open_for_s"].astype("float64").fillna(-1.0)
    df = df.sort_values(["_sev", "_age", "cluster", "rule", "subject"], ascending=[True, False, True, True, True])
    matched = len(df)
    if limit is not None:
        df = df.head(limit).copy()
    df["link"] = [target_url(*alert_target(str(r), str(s), c))
                  for r, s, c in zip(df["rule"], df["subject"], df["cluster"], strict=True)]
    df["open_for"] = [fmt_duration(v) for v in df["open_for_s"]]
    df["opened"] = epoch_to_local(df["first_seen"], tz)
    df["opened_utc"] = [fmt_utc(v) for v in df["first_seen"]]
    out = df[ALERT_COLUMNS].reset_index(drop=True)
    out.attrs["matched"] = matched
    return out


def alert_counts(docs: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Open alerts per severity over all clusters."""
    out = {s: 0 for s in SEVERITY_ORDER}
    for doc in docs.values():
        for a in doc.get("alerts") or []:
            if is_missing(a.get("resolved_at")):
                sev = a.get("severity", "info")
                out[sev] = out.get(sev, 0) + 1
    return out


# ----- timeline (history alert_events)


INTERVAL_COLUMNS = ["cluster", "rule", "subject", "severity", "start", "end", "open", "lost", "summary"]


def alert_intervals(events: pd.DataFrame, ref_time: float | dict[str, float],
                    docs: dict[str, dict[str, Any]] | None = None) -> pd.DataFrame:
    """One row per alert occurrence: (cluster, rule, subject, severity, start, end, open, lost, summary).

    An occurrence is keyed by (cluster, rule, subject, first_seen); its end is the ``resolve`` event's
    ``resolved_at``, or a ``lost`` event's time (its collector stopped and the next did not carry it on: the last
    poll that saw it open; not open), or, while still open, `ref_time` (per cluster when a dict: the latest
    snapshot's time, the last moment the alert is known to be open).

    `events` only has rows where something happened (open, resolve, a daily restate), so an alert open across
    the whole window has none in it: `docs` (latest snapshots) adds each alert they hold open that the events
    lack, open from its ``first_seen`` to its snapshot's time.
    """
    cols = INTERVAL_COLUMNS
    current = _open_in_docs(docs)
    if events is None or events.empty:
        return _sorted_intervals(current) if not current.empty else pd.DataFrame(
            {c: pd.Series(dtype="object") for c in cols})
    ev = pd.DataFrame({"cluster": events["cluster"].astype(object), "rule": events["rule"].astype(object),
                       "subject": events["subject"].astype(object),
                       "first_seen": events["first_seen"].astype("float64"),
                       "resolved_at": events["resolved_at"].astype("float64"),
                       "severity": events["severity"].astype(object), "summary": events["summary"].astype(object),
                       "time": events["time"].astype("float64"),
                       "lost": events["time"].astype("float64").where(events["event"] == LOST),
                       }).sort_values("time", kind="stable")
    ev = ev.dropna(subset=["first_seen"])
    g = ev.groupby(["cluster", "rule", "subject", "first_seen"], sort=False).agg(
        severity=("severity", "last"), summary=("summary", "last"), resolved=("resolved_at", "max"),
        lost=("lost", "max")).reset_index()
    if isinstance(ref_time, dict):
        default = max(ref_time.values(), default=float(g["first_seen"].max()))
        ref = g["cluster"].map(ref_time).astype("float64").fillna(default)
    else:
        ref = pd.Series(float(ref_time), index=g.index)
    out = pd.DataFrame({"cluster": g["cluster"], "rule": g["rule"], "subject": g["subject"],
                        "severity": g["severity"], "start": g["first_seen"],
                        "end": g["resolved"].fillna(g["lost"]).fillna(ref.combine(g["first_seen"], max)),
                        "open": g["resolved"].isna() & g["lost"].isna(),
                        "lost": g["resolved"].isna() & g["lost"].notna(), "summary": g["summary"]}, columns=cols)
    if not current.empty:
        # the same occurrence in both: the events have it (first_seen is rounded to the microsecond there)
        both = current.reset_index().merge(out[["cluster", "rule", "subject", "start"]], how="inner",
                                           on=["cluster", "rule", "subject"], suffixes=("", "_ev"))
        known = set(both.loc[(both["start"] - both["start_ev"]).abs() < 1e-3, "index"])
        current = current.drop(index=list(known))
        if not current.empty:
            out = pd.concat([out, current], ignore_index=True) if not out.empty else current
    return _sorted_intervals(out)


def _sorted_intervals(out: pd.DataFrame) -> pd.DataFrame:
    out = out.assign(_sev=out["severity"].map(SEVERITY_ORDER).fillna(9))
    out = out.sort_values(["start", "_sev"], ascending=[True, True]).drop(columns="_sev")
    return out.reset_index(drop=True)


def _open_in_docs(docs: dict[str, dict[str, Any]] | None) -> pd.DataFrame:
    """The alerts the latest snapshots hold open, as open intervals up to their snapshot's time."""
    rows = []
    for cluster, doc in (docs or {}).items():
        ref = doc.get("time")
        for a in doc.get("alerts") or []:
            first = a.get("first_seen")
            if not is_missing(a.get("resolved_at")) or is_missing(first):
                continue
            end = float(first) if is_missing(ref) else max(float(ref), float(first))
            rows.append({"cluster": cluster, "rule": a.get("rule"), "subject": a.get("subject"),
                         "severity": a.get("severity", "info"), "start": float(first), "end": end, "open": True,
                         "lost": False, "summary": a.get("summary")})
    return pd.DataFrame(rows, columns=INTERVAL_COLUMNS)


def timeline_label(rule: str, subject: str, by_topic: bool) -> str:
    spec = RULES.get(rule)
    if by_topic and spec is not None and spec.subject == "partition":
        return f"{rule}: {topic_of(subject)}"
    return f"{rule}: {subject}"


def alert_timeline_figure(intervals: pd.DataFrame, tz: str | None, max_rows: int = 60,
                          by_topic: bool = True, start: float | None = None) -> go.Figure:
    """Gantt-like bars from open to resolve (or to the latest snapshot, hatched, while still open).

    One row per rule and subject; with `by_topic`, partition alerts share one row per rule and topic (labelled
    with the number of partitions), so a broker failure does not take a hundred rows. Past `max_rows` rows, the
    rows with an open alert come first, then the most severe, then the most recent (the title says so). `start`
    (the window's start) bounds the axis when an alert opened before it.
    """
    if intervals is None or intervals.empty:
        return empty_figure("No alert opened or resolved in this time range.")
    iv = intervals.copy()
    iv["label"] = [timeline_label(str(r), str(s), by_topic) for r, s in zip(iv["rule"], iv["subject"], strict=False)]
    n_subjects = iv.groupby("label")["subject"].nunique()
    iv["label"] = [lb + (f" ({n_subjects[lb]} partitions)" if n_subjects[lb] > 1 else "") for lb in iv["label"]]
    if iv["cluster"].nunique() > 1:
        iv["label"] = iv["cluster"].astype(str) + " · " + iv["label"]
    # keep the rows on-call needs first: still open, then the most severe, then the most recent
    rank = iv.assign(_open=iv["open"].astype(bool), _sev=iv["severity"].map(SEVERITY_ORDER).fillna(9)).groupby(
        "label").agg(open=("_open", "max"), sev=("_sev", "min"), latest=("start", "max"))
    rank = rank.reset_index().sort_values(["open", "sev", "latest", "label"], ascending=[False, True, False, True])
    keep = list(rank["label"][:max_rows])
    n_rows = len(rank)
    iv = iv[iv["label"].isin(keep)]
    order = sorted(keep, key=lambda lb: (iv.loc[iv["label"] == lb, "start"].min(), lb))
    fig = go.Figure()
    for sev in ("critical", "warning", "info"):
        for is_open in (False, True):
            part = iv[(iv["severity"] == sev) & (iv["open"] == is_open)]
            if part.empty:
                continue
            t0 = epoch_to_axis(part["start"], tz)
            t1 = epoch_to_axis(part["end"], tz)
            dur_ms = (t1 - t0).dt.total_seconds().clip(lower=1.0) * 1000.0
            custom = list(zip([fmt_utc(v) for v in part["start"]],
                              [("still open" if o else fmt_utc(v)) for v, o in zip(part["end"], part["open"],
                                                                                  strict=False)],
                              [fmt_duration(e - s) for s, e in zip(part["start"], part["end"], strict=False)],
                              part["summary"].astype(str), strict=False))
            fig.add_trace(go.Bar(
                base=t0, x=dur_ms, y=part["label"], orientation="h", name=f"{sev}{' (open)' if is_open else ''}",
                marker={"color": SEVERITY_COLORS.get(sev, "#999"),
                        "pattern": {"shape": "/" if is_open else "", "fgcolor": "#ffffff", "solidity": 0.3},
                        "line": {"color": "#333", "width": 0.5}},
                customdata=custom, legendgroup=sev,
                opacity=0.85,
                hovertemplate=("%{y}<br>opened %{base|%Y-%m-%d %H:%M:%S} (local) = %{customdata[0]}<br>"
                               "resolved %{customdata[1]}<br>open %{customdata[2]}<br>%{customdata[3]}<extra></extra>"),
            ))
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(order)), automargin=True)
    fig.update_xaxes(type="date", title=None)
    if start is not None and float(iv["start"].min()) < start:  # an alert open since before the window
        fig.update_xaxes(range=list(epoch_to_axis([start, max(float(iv["end"].max()), start)], tz)))
    cut = (f"{max_rows} of {n_rows} rows: the open ones first, then the most severe, then the most recent"
           if n_rows > max_rows else None)
    base_layout(fig, height=max(220, 26 * len(order) + 90), title=cut)
    fig.update_layout(barmode="overlay", bargap=0.3)
    return fig


def intervals_display(intervals: pd.DataFrame, tz: str | None) -> pd.DataFrame:
    """Alert occurrences as a table: newest first, local times, duration; resolved empty while open, and for one
    lost (its end unseen: the duration is up to the last poll that saw it open)."""
    cols = ["severity", "cluster", "rule", "subject", "opened", "resolved", "duration", "summary"]
    if intervals is None or intervals.empty:
        return pd.DataFrame(columns=cols)
    iv = intervals.sort_values("start", ascending=False)
    lost = iv["lost"]
    return pd.DataFrame({
        "severity": iv["severity"], "cluster": iv["cluster"], "rule": iv["rule"], "subject": iv["subject"],
        "opened": epoch_to_local(iv["start"], tz),
        "resolved": epoch_to_local([None if o or x else e for e, o, x in zip(iv["end"], iv["open"], lost,
                                                                            strict=False)], tz),
        "duration": [fmt_duration(e - s) + (" (open)" if o else " (lost: end unseen)" if x else "")
                     for s, e, o, x in zip(iv["start"], iv["end"], iv["open"], lost, strict=False)],
        "summary": iv["summary"]}, columns=cols).reset_index(drop=True)
