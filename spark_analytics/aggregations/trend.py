"""The report's 4-week trend: a few figures per cluster and ISO week, from the daily roll-ups alone.

Only what the roll-ups hold without the raw polls: minutes under-replicated / under min ISR / offline (from
``topic_health_polls``: polls with the condition x the week's median gap between polls), the lag SLO share,
group-topics that breached it, WARN / ERR minutes and polls with committed offsets below the log start (from
``group_lag_days``). No percentiles (a month of histograms would cost more than the whole trend is worth), no
incidents (those are this week's). A week with no rolled-up day is absent, not zero.

Plain pyarrow on the driver: the inputs are small (a row per poll and per group-topic and day).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from spark_analytics.period import DAY_S, Period

TREND_SCHEMA = pa.schema([
    ("cluster", pa.string()), ("week", pa.string()), ("days", pa.int32()), ("polls", pa.int64()),
    ("poll_interval_s", pa.float64()), ("under_replicated_minutes", pa.float64()),
    ("under_min_isr_minutes", pa.float64()), ("offline_minutes", pa.float64()), ("lag_slo_share", pa.float64()),
    ("groups_breaching_slo", pa.int64()), ("warn_minutes", pa.float64()), ("err_minutes", pa.float64()),
    ("below_log_start_polls", pa.int64())])
PROBLEMS = ("under_replicated", "under_min_isr", "offline")


def trend(weeks: Sequence[Period], health_polls: pa.Table, lag_days: pa.Table) -> pa.Table:
    """One row per cluster and week of `weeks` that has roll-up rows (``topic_health_polls`` rows: ``cluster,
    time, under_replicated, under_min_isr, offline``; ``group_lag_days`` rows)."""
    def week_of(t: float) -> str | None:
        return next((w.label for w in weeks if w.start <= t < w.end), None)

    acc: dict[tuple[str, str], dict[str, Any]] = {}

    def row(cluster: str, week: str) -> dict[str, Any]:
        return acc.setdefault((cluster, week), {"times": set(), "days": set(), **{p: 0 for p in PROBLEMS},
                                                "groups": {}, "warn": 0, "err": 0, "below": 0})

    for r in health_polls.to_pylist():
        w = week_of(r["time"])
        if w is None:
            continue
        a = row(r["cluster"], w)
        a["times"].add(r["time"])
        a["days"].add(int(r["time"] // DAY_S))
        for p in PROBLEMS:
            a[p] += (r[p] or 0) > 0
    for r in lag_days.to_pylist():
        w = week_of(float(r["day"] * DAY_S))
        if w is None:
            continue
        a = row(r["cluster"], w)
        a["days"].add(r["day"])
        g = a["groups"].setdefault((r["group_id"], r["topic"]), [0, 0])
        g[0] += r["polls_within_slo"]
        g[1] += r["polls_with_lag_seconds"]
        a["warn"] += r["warn_polls"]
        a["err"] += r["err_polls"]
        a["below"] += r["below_log_start_polls"]
    order = {w.label: i for i, w in enumerate(weeks)}
    out = []
    for (cluster, week), a in sorted(acc.items(), key=lambda kv: (kv[0][0], order[kv[0][1]])):
        times = sorted(a["times"])
        gaps = [b - x for x, b in itertools.pairwise(times)]
        interval = statistics.median(gaps) if gaps else None
        within = sum(g[0] for g in a["groups"].values())
        known = sum(g[1] for g in a["groups"].values())

        def minutes(polls: int, iv: float | None = interval) -> float | None:
            return None if iv is None else polls * iv / 60.0

        out.append({"cluster": cluster, "week": week, "days": len(a["days"]), "polls": len(times) or None,
                    "poll_interval_s": interval,
                    **{f"{p}_minutes": minutes(a[p]) if times else None for p in PROBLEMS},
                    "lag_slo_share": within / known if known else None,
                    "groups_breaching_slo": (sum(1 for g in a["groups"].values() if g[0] < g[1])
                                             if a["groups"] else None),
                    "warn_minutes": minutes(a["warn"]) if a["groups"] else None,
                    "err_minutes": minutes(a["err"]) if a["groups"] else None,
                    "below_log_start_polls": a["below"] if a["groups"] else None})
    return pa.Table.from_pylist(out, schema=TREND_SCHEMA)
