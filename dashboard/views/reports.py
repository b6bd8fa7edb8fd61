"""Weekly Spark reports: a ``summary.json`` into headline figures (with week-over-week deltas) and tables.

The Spark job's format (`spark_analytics/weekly_report.py`: ``headline``, ``week_over_week``, ``worst_topics``,
``open_incidents``, ``notes`` ...) is shown as designed; any other JSON is shown generically. The figures are
picked (`spark_analytics.figures.KEY_FIGURES`) and formatted (`spark_analytics.formatting`) by the same code as
the report page the History page embeds, so a figure reads the same on the card and on the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from collectors.model.wording import plural
from spark_analytics.figures import KEY_FIGURES
from spark_analytics.formatting import (
    SHARE,
    fmt_change,
    fmt_counted,
    fmt_duration,
    fmt_num,
    fmt_value,
    is_missing,
)

SECRET_WORDS = ("password", "secret", "token", "credential", "sasl", "jaas", "keystore", "truststore", "api_key")


def _label(key: str) -> str:
    return key.replace("_", " ").strip()


def _safe_key(key: str) -> bool:
    k = key.lower()
    return not any(w in k for w in SECRET_WORDS)


def summary_figures(summary: dict[str, Any], max_metrics: int = 16) -> tuple[list[tuple[str, str]],
                                                                                dict[str, pd.DataFrame]]:
    """(headline (label, value) pairs, named tables) from a report summary.

    Scalars become headline figures (nested dicts of scalars are flattened as ``parent · child``); lists of
    dicts and dicts of dicts become tables. Keys that look like secrets are never shown.
    """
    metrics: list[tuple[str, str]] = []
    tables: dict[str, pd.DataFrame] = {}

    def scalar(v: Any) -> bool:
        return v is None or isinstance(v, str | int | float | bool)

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
        if isinstance(v, int) and not isinstance(v, bool):
            return f"{v:,}"
        return "—" if v is None else str(v)

    def walk(prefix: str, obj: dict[str, Any]) -> None:
        for k, v in obj.items():
            if not _safe_key(str(k)):
                continue
            name = f"{prefix} · {_label(str(k))}" if prefix else _label(str(k))
            if scalar(v):
                metrics.append((name, fmt(v)))
            elif isinstance(v, dict) and all(scalar(x) for x in v.values()):
                if len(v) > 6:
                    tables[name] = pd.DataFrame({"key": [str(x) for x in v], "value": [fmt(x) for x in v.values()]})
                else:
                    walk(name, v)
            elif isinstance(v, dict):
                if all(isinstance(x, dict) for x in v.values()):
                    tables[name] = pd.DataFrame([{"": key, **{c: y for c, y in val.items() if _safe_key(str(c))}}
                                                 for key, val in v.items()])
                else:
                    walk(name, v)
            elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                tables[name] = pd.DataFrame([{c: y for c, y in x.items() if _safe_key(str(c))} for x in v])
            elif isinstance(v, list):
                metrics.append((name, ", ".join(fmt(x) for x in v[:10]) + (" …" if len(v) > 10 else "")))

    walk("", summary if isinstance(summary, dict) else {"value": summary})
    return metrics[:max_metrics], tables


# ----- the weekly Spark job's summary.json (spark_analytics/weekly_report.py)


@dataclass(frozen=True)
class Figure:
    label: str
    value: str
    delta: str | None = None
    delta_color: str = "off"  # st.metric: "inverse" when higher is worse, "normal" when higher is better


def is_spark_summary(summary: Any) -> bool:
    return isinstance(summary, dict) and isinstance(summary.get("week_over_week"), list)


def _delta(row: dict[str, Any]) -> tuple[str | None, str]:
    """st.metric's (delta, delta_color): no delta without last week; "0" (grey, no arrow) when unchanged."""
    change, pol = row.get("change"), row.get("polarity") or 0
    if is_missing(change) or is_missing(row.get("last_week")):
        return None, "off"
    text = fmt_change(change, row.get("unit") or "")
    if text == "0":
        return text, "off"
    return f"{text} vs last week", "inverse" if pol > 0 else ("normal" if pol < 0 else "off")


def _coverage_note(summary: dict[str, Any]) -> list[str]:
    """How much of the week the figures speak for, as the report page's subtitle says it."""
    head = summary.get("headline") if isinstance(summary.get("headline"), dict) else {}
    if is_missing(head.get("coverage")):
        return []
    return [f"The data covers {fmt_value(head['coverage'], SHARE)} of the week ({fmt_num(head.get('polls'))} "
            f"polls every {fmt_duration(head.get('poll_interval_s'))})."]


def _lost_note(summary: dict[str, Any], lost: list[dict[str, Any]] | None) -> list[str]:
    """The report page's first line: what the loss ledger holds for the week (nothing without a ledger)."""
    if lost:
        return [f"Data lost this week: {fmt_counted(summary.get('messages_lost'), 'committed or unread message')} "
                f"(truncations and retention), {plural(len(lost), 'ledger line')}."]
    if "messages_lost" in summary:
        return ["No data lost this week, as far as the monitor saw (see the coverage)."]
    return []


TIME_COLUMNS = frozenset({"start", "end", "time", "start_time", "end_time", "first", "last"})


def _readable(df: pd.DataFrame) -> pd.DataFrame:
    """Epoch columns as (UTC, tz-aware) datetimes, ``*_s`` durations as text, ISO duplicates labelled UTC."""
    out = df.copy()
    names = {"at": "at (UTC)"}
    for c in out.columns:
        if c in TIME_COLUMNS and pd.api.types.is_numeric_dtype(out[c]):
            out[c] = pd.to_datetime(out[c].astype("float64"), unit="s", utc=True)
        elif c.endswith("_s") and pd.api.types.is_numeric_dtype(out[c]):
            out[c] = [fmt_duration(v) for v in out[c]]
            names[c] = c.removesuffix("_s").replace("_", " ")
    return out.rename(columns=names)


def weekly_summary(summary: dict[str, Any]) -> tuple[list[Figure], dict[str, pd.DataFrame], list[str]]:
    """(headline figures with week-over-week deltas, tables, notes) of a weekly report summary.

    Understands the Spark job's format (``headline``, ``week_over_week``, ``worst_topics``, ...); any other
    JSON falls back to `summary_figures`.
    """
    if not is_spark_summary(summary):
        metrics, tables = summary_figures(summary)
        return [Figure(label, value) for label, value in metrics], tables, []
    rows = {r.get("metric"): r for r in summary["week_over_week"] if isinstance(r, dict)}
    figures = []
    lost = summary.get("data_lost")
    lost = [x for x in lost if isinstance(x, dict)] if isinstance(lost, list) else None
    if "messages_lost" in summary or lost:  # first, as on the report page (no ledger before schema version 3)
        figures.append(Figure("Messages lost", fmt_num(summary.get("messages_lost"))))
    for name in KEY_FIGURES:
        r = rows.get(name)
        if r is None:
            continue
        delta, color = _delta(r)
        figures.append(Figure(str(r.get("label", name)), fmt_value(r.get("this_week"), r.get("unit") or ""),
                              delta, color))
    tables: dict[str, pd.DataFrame] = {}
    if lost:
        tables["Data lost"] = _readable(pd.DataFrame([{c: v for c, v in x.items() if _safe_key(str(c))}
                                                      for x in lost]))
    worse = set(summary.get("worse_than_last_week") or [])
    wow = pd.DataFrame([{
        "figure": r.get("label"), "this week": fmt_value(r.get("this_week"), r.get("unit") or ""),
        "last week": fmt_value(r.get("last_week"), r.get("unit") or ""),
        "worse": "WORSE" if r.get("metric") in worse else ""} for r in summary["week_over_week"]
        if isinstance(r, dict)])
    tables["Week over week"] = wow
    for key, title in (("open_incidents", "Incidents still open at the end of the week"),
                       ("worst_topics", "Worst topics"), ("worst_groups", "Worst consumer groups"),
                       ("stuck_transactions", "Stuck transactions"), ("zk_elections", "ZooKeeper elections")):
        items = summary.get(key)
        if isinstance(items, list) and items and all(isinstance(x, dict) for x in items):
            tables[title] = _readable(pd.DataFrame([{c: v for c, v in x.items() if _safe_key(str(c))}
                                                    for x in items]))
    notes = _lost_note(summary, lost) + _coverage_note(summary) + [str(n) for n in summary.get("notes") or []]
    return figures, tables, notes
