"""Last week's figures from last week's report: a weekly run computes one week, not two.

Each report writes `layout.INPUTS_FILE` (`inputs_of`: the history files and options its figures were made from);
the next week's run reads last week's headline from that report while it still holds (`stored_previous`), and
computes last week again otherwise (docs/weekly-report.md, *Week over week*).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark_analytics import aggregations as A
from spark_analytics import io, layout
from spark_analytics.aggregations.headline import HEADLINE_SCHEMA
from spark_analytics.input_files import compacted_since, footers

FIGURES_VERSION = 2
"""Bumped when a headline figure is defined anew: last week's reports, made before, are then not reused. 2 (the
twenty-third session): the incident figures leave out the monitor's own incidents, and an incident recorded
``lost`` is neither open at the end nor the longest."""


def inputs_of(history: str, period: A.Period, opts: A.Options) -> dict[str, Any]:
    """What a week's figures are made from: the live history files read for it (that week and the one before, the
    context of episodes and changes; path and size) and the options that change figures. A remote history is
    listed through the active Spark session (before the twenty-fourth session it was not, and its reports were
    never reused)."""
    files = {t: [list(f) for f in io.live_file_sizes(history, t, period.previous().start, period.end)]
             for t in io.REPORT_TABLES}
    return {"version": FIGURES_VERSION, "week": period.label,
            "options": {"lag_slo_s": opts.lag_slo_s, "txn_grace_s": opts.txn_grace_s,
                        "poll_interval_s": opts.poll_interval_s, "percentiles": opts.percentiles,
                        "accuracy": opts.accuracy},
            "history_files": files}


def still_holds(stored: dict[str, Any], now: dict[str, Any], history: str) -> bool:
    """Whether a report made from `stored` (its `layout.INPUTS_FILE`) still stands for the inputs `now` gives: the
    same, or the same but for files the collectors compacted since, on a local history (`input_files`). Before,
    a report made before its week's last day was compacted (the collectors' maintenance compacts a finished day
    within the hour after midnight) was never reused, and the next week's run computed two weeks."""
    if stored == now:
        return True
    if io.is_remote(history) or {k: v for k, v in stored.items() if k != "history_files"} != {
            k: v for k, v in now.items() if k != "history_files"}:
        return False
    before, after = by_day(stored.get("history_files") or {}), by_day(now.get("history_files") or {})
    if any(files and not after.get(group) for group, files in before.items()):
        return False  # a day's files removed since: computed again from what is left, as before
    return compacted_since(before, after, footers(io.local_path(history), lambda group: group))


def by_day(files: dict[str, list[list[Any]]]) -> dict[str, list[list[Any]]]:
    """`inputs_of`'s files (per table, ``table/date=D/name`` and size) per day directory (``table/date=D``), as
    `input_files.compacted_since` takes them."""
    out: dict[str, list[list[Any]]] = {}
    for listed in files.values():
        for path, size in listed:
            group, _, name = str(path).rpartition("/")
            out.setdefault(group, []).append([name, size])
    return {group: sorted(listed) for group, listed in out.items()}


def stored_previous(reports: Path, history: str, previous: A.Period, opts: A.Options, clusters: Sequence[str]
                    ) -> tuple[pa.Table, dict[str, pa.Table]] | None:
    """Last week's headline (and incident source) as last week's own reports under `reports` have them, when every
    one of `clusters` (this week's) has one made from the history files there now with the same options (its
    `layout.INPUTS_FILE` equal to `inputs_of` now); else None, and last week is computed again.

    A weekly run thus computes one week, not two; and "last week" in the week over week is what last week's report
    said (computed then with the week before it as context, which a computation now would not read)."""
    if not clusters:
        return None
    want = inputs_of(history, previous, opts)
    heads, sources = [], []
    for cluster in clusters:
        d = layout.report_dir(reports, cluster, previous.label)
        try:
            if not still_holds(json.loads((d / layout.INPUTS_FILE).read_text()), want, history):
                return None
            head = pq.read_table(d / layout.TABLES_DIR / "headline.parquet")
            source = pq.read_table(d / layout.TABLES_DIR / "incident_source.parquet")
        except (OSError, ValueError, pa.ArrowException):
            return None
        if head.schema != HEADLINE_SCHEMA or head["cluster"].to_pylist() != [cluster]:
            return None
        heads.append(head)
        sources.append(source)
    try:
        return pa.concat_tables(heads), {"incident_source": pa.concat_tables(sources)}
    except pa.ArrowException:  # reports of different layouts: compute instead
        return None
