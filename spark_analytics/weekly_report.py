"""Weekly Kafka reliability report from the Parquet history.

    spark-submit spark_analytics/weekly_report.py --history PATH --week 2026-W47 --out DIR
    python -m spark_analytics.weekly_report --history PATH [--week YYYY-Www] [--out DIR] [--master local[*]]

For every cluster with polls in the week it writes ``DIR/<cluster>/<week>/`` (the cluster name encoded by
`collectors.outputs.paths.safe_name`, like every file named after a cluster; see `spark_analytics.layout`):

* ``report.html``: a self-contained page (plotly.js inlined once, works offline),
* ``summary.json``: the headline figures beside last week's (numbers or null, never NaN),
* ``tables/<name>.parquet``: every aggregate table behind the page.

``--week`` defaults to the last complete ISO week (UTC). The previous ISO week is computed the same way for
the week-over-week comparison. Exit codes: 0 report written, 1 nothing to report (no polls in the week) or
the job failed, 2 bad arguments (named in the message). docs/weekly-report.md explains every figure.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from collectors.model.vocabulary import MESSAGES_GONE_KINDS, SEVERITY_RANK, STALE_POLLS
from collectors.model.wording import count_of, plural
from spark_analytics import aggregations as A
from spark_analytics import io, layout, render, rollup, rollup_job, table_files
from spark_analytics.aggregations.thresholds import USED as A_THRESHOLDS
from spark_analytics.figures import HEADLINE_NAMES, UNITS
from spark_analytics.formatting import PER_SECOND, SHARE, fmt_duration, fmt_value
from spark_analytics.last_week import inputs_of, stored_previous
from spark_analytics.report_args import Args, ArgumentError, parse_args, parser
from spark_analytics.session import build_session, describe_failure, stop

log = logging.getLogger("spark_analytics.weekly_report")
T = TypeVar("T")

PERCENTILE_TEXT = {
    A.HISTOGRAM: "consumer lag: fixed log-scale histograms, within 1 % of the exact value (relative); others exact",
    A.EXACT: "exact (interpolated)",
    A.APPROX: "percentile_approx, accuracy {accuracy}",
}
WORST_N = 5
LAG_SERIES_N = 6


# ----------------------------------------------------------------------------------------------- compute


@dataclass
class Computed:
    period: A.Period
    previous: A.Period
    tables: dict[str, pa.Table]  # this week, all clusters
    headline: pa.Table
    previous_headline: pa.Table
    week_over_week: pa.Table
    series: dict[str, pa.Table]
    data: dict[str, io.TableData]
    seconds: float = 0.0
    previous_tables: dict[str, pa.Table] | None = None  # last week: the headline's inputs
    rollup_days: list[str] = field(default_factory=list)  # days read from stored roll-ups
    inputs: dict[str, Any] | None = None  # what this week's figures were made from (`inputs_of`)
    previous_from_report: bool = False  # last week's headline read from last week's reports (`stored_previous`)


UNCACHED: frozenset[str] = frozenset({*io.BIG_TABLES, "brokers", "producers", "transactions", "lso_gap"})
"""History tables the report scans instead of caching: a cache materialises every column of every row before the
first plan reads it, which pays back only for tables many plans read (``cluster``, ``consensus``, the event tables).
These are read by one or two plans a week each (``transactions`` through the transactions' detail and epoch
bumps, themselves cached while used), so a scan that reads only their needed columns is cheaper: -4 s of a ~20 s
report from the roll-ups on the bench week (docs/performance-log.md, "Step 5")."""


def _small(spark: Any, tables: dict[str, pa.Table]) -> dict[str, Any]:
    return {name: spark.createDataFrame(t) for name, t in tables.items()}


def compute(spark: Any, history: str, period: A.Period, opts: A.Options | None = None,
            clusters: Sequence[str] | None = None, use_hadoop: bool | None = None, charts: bool = True,
            reports: Path | None = None) -> Computed:
    """Read the history for the week and the week before, compute and collect every table (small). With `reports`
    (the output directory), last week's headline comes from last week's reports there where they still hold
    (`stored_previous`)."""
    started = time.monotonic()
    opts = opts or A.Options()
    previous = period.previous()
    if opts.rollups:  # files a roll-up was made without, left out of this run's listings too (and named in notes)
        rollup.recall_left_out(rollup.Store.at(opts.rollups), history,
                               [d for w in trend_weeks(period) for d in w.days()])
    inputs = inputs_of(history, period, opts)  # listed before reading: a file added meanwhile makes it stale, safely
    # The per-poll and event tables that many report tables read, for both weeks: cached once, instead of one
    # Parquet scan per report table (docs/performance-log.md, "Step 1"); the others are scanned.
    frames: dict[str, Any] = {}

    def read(tables: Sequence[str]) -> dict[str, io.TableData]:
        got = io.read_history(spark, history, previous.start, period.end, clusters, tables, use_hadoop=use_hadoop)
        frames.update({name: td.df if name in UNCACHED else td.df.cache() for name, td in got.items()})
        return got

    try:
        # the polls first: the first jobs read them while the other tables are listed and read
        first = read(("cluster",))
        limits, polls, rest = first_jobs(frames["cluster"], period, opts,
                                         meanwhile=lambda: read([t for t in io.REPORT_TABLES if t != "cluster"]))
        read_now = first | rest
        data = {name: read_now[name] for name in io.REPORT_TABLES}  # in the tables' order, as notes list them
        with contextlib.ExitStack() as held:
            parts, stored = None, []
            if opts.percentiles == A.HISTOGRAM and opts.rollups:
                scratch = held.enter_context(table_files.scratch(rollup.Store.at(opts.rollups).root))
                parts, stored = load_partials(spark, history, data, (previous, period), frames["cluster"], opts,
                                              clusters, scratch)
            c = _compute(spark, history, frames, data, period, opts, clusters, use_hadoop, charts, limits, polls,
                         parts, reports)
            # the four-week trend reads roll-ups: empty without --rollups
            c.tables["trend"] = (trend_table(spark, history, period, parts, opts, clusters) if parts is not None
                                 else A.trend([period], pa.table({}), pa.table({})))
    finally:
        rollup.release(df for name, df in frames.items() if name not in UNCACHED)
    c.rollup_days = stored
    c.inputs = inputs
    c.seconds = time.monotonic() - started
    return c


def first_jobs(cluster: Any, period: A.Period, opts: A.Options,
               meanwhile: Callable[[], T]) -> tuple[dict[A.Period, pa.Table], pa.Table, T]:
    """Both weeks' thresholds and this week's poll intervals, the report's first Spark jobs, run at once, and
    `meanwhile` on the calling thread while they run. Each is a small plan over the cached ``cluster`` frame, and in a
    new JVM the first plans are the slowest of a report (classes loaded, code compiled, the cache filled), each
    mostly on one core: run one after the other, after the reads, they took the first ~9 s of a cold report's ~40
    (docs/performance-log.md, "Step 14")."""
    previous = period.previous()
    with ThreadPoolExecutor(3, thread_name_prefix="first") as pool:
        limits = {p: pool.submit(lambda p=p: A.thresholds(cluster, p, opts.lag_slo_s, opts.txn_grace_s).toArrow())
                  for p in (period, previous)}
        polls = pool.submit(lambda: A.poll_intervals(cluster, period, opts.poll_interval_s).toArrow())
        other = meanwhile()
        return {p: f.result() for p, f in limits.items()}, polls.result(), other


def days_with_rollup_input(data: dict[str, io.TableData]) -> set[str]:
    """The days with history files of the tables the roll-ups replace (`rollup.INPUTS`): the days a roll-up or the
    history has rows of for the consumer and replication figures (`load_partials`, and the run's line on them)."""
    return {d for name in rollup.INPUTS for d in data[name].days}


def load_partials(spark: Any, history: str, data: dict[str, io.TableData], periods: Sequence[A.Period],
                  cluster: Any, opts: A.Options, clusters: Sequence[str] | None,
                  scratch: Path) -> tuple[dict[str, Any], list[str]]:
    """The daily roll-up tables for every day of `periods`, and the days read from the store: stored ones where
    fresh (`opts.rollups`), the others computed from the history now and kept in `scratch`, each counted against
    the lag SLO its day recorded as the roll-up job counts it (`rollup.recorded_slo`, from `cluster`, the polls):
    the same rows either way, so neither the headline (which recounts days judged against another SLO) nor the
    trend depends on which days were rolled up."""
    days = [d for p in periods for d in p.days()]
    store = rollup.Store.at(opts.rollups) if opts.rollups else None
    fresh = rollup.fresh_days(store, history, days) if store else []
    with_files = days_with_rollup_input(data)
    missing = [d for d in days if d not in fresh and d in with_files]  # a day without files has no rows to add
    frames_of: dict[str, Any] = {}
    if missing:
        recorded = rollup.recorded_slo(cluster, missing)
        tmp = rollup.Store(scratch)
        for d in missing:  # a day at a time, like the roll-up job (bounded driver memory)
            slo = rollup.slo_frame(spark, {d: recorded[d]})
            rollup.write_partials(rollup.day_frames(spark, history, d, rollup.SOURCES, clusters), tmp, d, slo)
        frames_of = rollup.read(spark, tmp, missing)
    if fresh:
        assert store is not None
        have = rollup.read(spark, store, fresh, clusters)
        frames_of = {k: v.unionByName(frames_of[k]) if missing else v for k, v in have.items()}
    if not frames_of:  # nothing stored and nothing to compute: the tables' schemas, no rows
        frames_of = rollup.lazy_partials({name: io.empty_frame(spark, name) for name in rollup.INPUTS}, 0.0, 0.0, None)
    return frames_of, fresh


TREND_WEEKS = 4


def trend_weeks(period: A.Period) -> list[A.Period]:
    """The `TREND_WEEKS` weeks ending with `period`, oldest first."""
    weeks = [period]
    while len(weeks) < TREND_WEEKS:
        weeks.insert(0, weeks[0].previous())
    return weeks


def trend_table(spark: Any, history: str, period: A.Period, parts: dict[str, Any], opts: A.Options,
                clusters: Sequence[str] | None) -> pa.Table:
    """`aggregations.trend` over the last `TREND_WEEKS` weeks: this week and last from `parts`, the weeks before
    from the stored roll-ups only (never the history: a week not rolled up is absent)."""
    weeks = trend_weeks(period)
    inputs = {name: parts[name] for name in ("topic_health_polls", "group_lag_days")}
    if opts.rollups:
        store = rollup.Store.at(opts.rollups)
        older = rollup.fresh_days(store, history, [d for w in weeks[:-2] for d in w.days()])
        if older:
            stored = rollup.read(spark, store, older, clusters, tables=tuple(inputs))
            inputs = {k: v.unionByName(stored[k]) for k, v in inputs.items()}
    got = rollup.collect(inputs)
    return A.trend(weeks, got["topic_health_polls"], got["group_lag_days"])


def _compute(spark: Any, history: str, frames: dict[str, Any], data: dict[str, io.TableData], period: A.Period,
             opts: A.Options, clusters: Sequence[str] | None, use_hadoop: bool | None, charts: bool,
             limits: dict[A.Period, pa.Table], polls: pa.Table, parts: dict[str, Any] | None,
             reports: Path | None) -> Computed:
    previous = period.previous()
    current = collect_week(spark, frames, period, opts, limits=limits[period], parts=parts, polls=polls)
    cur_head = headline_table(current)
    stored = (stored_previous(reports, history, previous, opts, cur_head["cluster"].to_pylist())
              if reports is not None else None)
    if stored is not None:
        prev_head, prev_tables = stored
    else:
        # Last week: the same figures from the same frames (rows at or after a period's end are never used); the big
        # tables, when read at all (not from roll-ups), from last week's own files, not this week's again.
        prev_frames = dict(frames)
        if parts is None:
            prev_frames.update({name: td.df for name, td in io.read_history(
                spark, history, previous.start, previous.end, clusters, tables=io.BIG_TABLES, use_hadoop=use_hadoop,
                check_schema=False).items()})
        prev_tables = collect_week(spark, prev_frames, previous, opts, A.HEADLINE_INPUTS, limits=limits[previous],
                                   parts=parts, like=current)
        prev_head = headline_table(prev_tables)
    wow = A.week_over_week(cur_head, prev_head)
    series: dict[str, pa.Table] = {}
    if charts:
        worst = _worst_lag_keys(current["consumer_lag"])
        keys = spark.createDataFrame(worst)
        if opts.bucket_s is None:
            opts = replace(opts, bucket_s=auto_bucket(current["polls"]))
        series = {name: rollup.in_key_order(t)
                  for name, t in rollup.collect(A.chart_series(frames, period, keys, opts, parts)).items()}
    return Computed(period, previous, current, cur_head, prev_head, wow, series, data, previous_tables=prev_tables,
                    previous_from_report=stored is not None)


def auto_bucket(polls: pa.Table) -> int:
    rows = polls.to_pylist()
    if not rows:
        return 900
    span = max(r["last_poll"] for r in rows) - min(r["first_poll"] for r in rows)
    interval = max((r["poll_interval_s"] or 0.0) for r in rows)
    return A.nice_bucket(span, interval)


def collect_week(spark: Any, frames: dict[str, Any], period: A.Period, opts: A.Options,
                 only: frozenset[str] | None = None, limits: pa.Table | None = None,
                 parts: dict[str, Any] | None = None, like: dict[str, pa.Table] | None = None,
                 polls: pa.Table | None = None) -> dict[str, pa.Table]:
    """`aggregations.compute_tables` for one period, collected (the poll and threshold tables first, reused as
    literals; `polls` and `limits` where the caller collected them already). `like`: tables another week of the
    same report collected (same frames, options and partials); a week without polls takes their schemas, without
    building its own plans."""
    if polls is None:
        polls = A.poll_intervals(frames["cluster"], period, opts.poll_interval_s).toArrow()
    if limits is None:
        limits = A.thresholds(frames["cluster"], period, opts.lag_slo_s, opts.txn_grace_s).toArrow()
    if polls.num_rows == 0 and like is not None and only is not None and only <= like.keys():
        # nobody polled (the week before a new history): ~25 plans analysed only for their schemas cost ~2 s of
        # driver time; this week's tables have the same ones
        got = {name: like[name].schema.empty_table() for name in only}
        got["polls"], got["thresholds"] = polls, limits
        return got
    cells = None
    if parts is None and opts.percentiles == A.HISTOGRAM and (only is None or "consumer_lag" in only):
        # from the history alone: the lag partials of the whole period from one pass over its polls
        parts, cells = rollup.lag_partials(frames, period.days(), lag_slo(spark, limits))
    plan = partial(A.compute_tables, frames, period, opts, polls=spark.createDataFrame(polls), only=only,
                   limits=spark.createDataFrame(limits), parts=parts)
    if polls.num_rows == 0:
        # no cluster was polled in the period (the first week of a history, collectors down all week): the report
        # speaks only of clusters polled in it (the headline's rows, the clusters written), so no row of any table
        # would be read: empty tables of the right schemas, an analysis each instead of ~25 Spark jobs
        got = {name: rollup.empty_like(df) for name, df in plan().items()}
    else:
        got = _summarised(spark, _plan_and_collect(plan, cells), only)
    got["polls"], got["thresholds"] = polls, limits
    return {name: rollup.in_key_order(t) for name, t in got.items()}


def lag_slo(spark: Any, limits: pa.Table) -> float | Any:
    """The lag SLO the consumer cells count against, from the period's `thresholds` (a row per cluster polled): one
    number where every cluster has the same (the usual fleet), else a frame joined by cluster. The join costs
    ~0.7 s of the ~8 s pass over the bench week's 20 M polls (docs/performance-log.md, "Step 10"); the two differ
    only for clusters with lag rows and no polls, which no report table shows."""
    values = set(limits.column("lag_slo_s").to_pylist())
    if len(values) == 1 and None not in values:
        return float(values.pop())
    return spark.createDataFrame(limits.select(["cluster", "lag_slo_s"]))


def _plan_and_collect(plan: Callable[..., dict[str, Any]], cells: Any) -> dict[str, pa.Table]:
    """Plan the tables (`plan`: `compute_tables` with its frames bound) and collect them, the planning overlapped
    with the running: a table that reads no intermediate frame of another starts as soon as it is planned, while
    the rest are planned (the driver's planning, ~45,000 Py4J calls, keeps one core busy for seconds of a report
    that its Spark jobs leave partly idle: docs/performance-log.md, "Step 13"). The frames several tables share
    (`cells`, the consumer cells from the history, and what `compute_tables` puts in `shared`) are computed once
    and cached before any table reading them starts, and dropped after; the summary tables are left to
    `_summarised`."""
    shared: list[Any] = []
    with rollup.cached_all([cells]), ThreadPoolExecutor(rollup.COLLECT_THREADS, thread_name_prefix="collect") as pool:
        running: dict[str, Future[pa.Table]] = {}
        lazy = plan(shared=shared, summaries=False,
                    ready=lambda name, df: running.__setitem__(name, pool.submit(df.toArrow)))
        with rollup.cached_all(shared):
            running.update({name: pool.submit(df.toArrow) for name, df in lazy.items() if name not in running})
            return {name: running[name].result() for name in lazy}


def _summarised(spark: Any, got: dict[str, pa.Table], only: frozenset[str] | None = None) -> dict[str, pa.Table]:
    """`got` with the summary tables (`aggregations.SUMMARIES`, of `only`) that `compute_tables(summaries=False)`
    left out, computed from the collected tables they summarise: a small plan over literals each, not a second
    pass over the history."""
    later = {name: getattr(A, name)(*_small(spark, {i: got[i] for i in inputs}).values())
             for name, inputs in A.SUMMARIES.items()
             if (only is None or name in only) and name not in got and all(i in got for i in inputs)}
    return got | rollup.collect(later)


def headline_table(tables: dict[str, pa.Table]) -> pa.Table:
    """`aggregations.headline` over the collected tables (the headline's inputs among them)."""
    return A.headline({k: v for k, v in tables.items() if k in A.HEADLINE_INPUTS})


def _worst_lag_keys(lag: pa.Table, n: int = LAG_SERIES_N) -> pa.Table:
    """Per cluster, the `n` group/topics with the highest p99 lag in seconds (for the lag-over-time chart)."""
    cols = ["cluster", "group_id", "topic"]
    if lag.num_rows == 0:
        return lag.select(cols)
    df = lag.select([*cols, "lag_seconds_p99"]).to_pandas()
    df = df[df["lag_seconds_p99"].notna() & (df["lag_seconds_p99"] > 0)]
    df = df.sort_values("lag_seconds_p99", ascending=False).groupby("cluster", sort=False).head(n)
    return pa.Table.from_pandas(df[cols], schema=lag.select(cols).schema, preserve_index=False)


def compute_with_retry(spark: Any, history: str, period: A.Period, opts: A.Options,
                       clusters: Sequence[str] | None, reports: Path | None = None) -> Computed:
    """`compute`, run again where listing again mends a failed read (`io.relisting`): a file the collectors'
    compaction deleted after it was listed; a file of a local history cut short or damaged inside, left out and
    named in the report's notes; a roll-up file damaged past its intact footer, whose day is then computed from the
    history (`rollup.file_problem`). Before, the run stopped at either until someone moved the file."""
    roots = [history, *([opts.rollups] if opts.rollups else [])]
    return io.relisting(lambda: compute(spark, history, period, opts, clusters, reports=reports), roots, log,
                        f"the report of {period.label}")


# ----------------------------------------------------------------------------------------------- per cluster


def _of(t: pa.Table, cluster: str) -> pa.Table:
    if "cluster" not in t.column_names or t.num_rows == 0:
        return t
    return t.filter(pc.equal(t["cluster"], cluster))


def _pd(t: pa.Table) -> Any:
    return t.to_pandas()


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _row(t: pa.Table) -> dict[str, Any] | None:
    rows = t.to_pylist()
    return rows[0] if rows else None


def _as_number(v: Any, unit: str) -> Any:
    if v is None or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, float) and v.is_integer() and unit not in (SHARE, PER_SECOND):
        return int(v)
    return v


def _get(c: Computed, name: str, cluster: str) -> pa.Table | None:
    t = c.tables.get(name)
    return None if t is None else _of(t, cluster)


def _rows(t: pa.Table | None) -> list[dict[str, Any]]:
    return [] if t is None else t.to_pylist()


def thresholds_doc(cluster: str, c: Computed, opts: A.Options) -> dict[str, Any]:
    """The thresholds the figures used (value and where it came from) and the collector's recorded set."""
    t = _get(c, "thresholds", cluster)
    row = _row(t) if t is not None else None
    out: dict[str, Any] = {}
    for col, (setting, default) in A_THRESHOLDS.items():
        given = getattr(opts, col)
        if row is not None:
            out[col] = {"value": row[col], "from": row[f"{col}_from"], "collector_setting": setting}
        else:
            out[col] = {"value": default if given is None else given, "collector_setting": setting,
                        "from": "collector defaults" if given is None else "command line"}
    recorded = None
    if row is not None and row.get("thresholds"):
        try:
            recorded = json.loads(row["thresholds"])
        except ValueError:
            recorded = None
    out["recorded"] = recorded
    out["recorded_at"] = row.get("thresholds_time") if row else None
    return out


HISTORY_LAG_S = 3600.0
"""How far behind the report's own clock a live collector's history may be: it flushes its polls every
``history.flush_interval_s`` (60 s by default). Polls newer than this before the report are not expected to be
there yet, so a report made during the week, or just after it, does not take a running collector for a stopped
one."""


def stopped_polls_note(open_now: int, polls: dict[str, Any] | None, period_end: float, now: float) -> str | None:
    """The note for incidents counted open at the end of a week whose polls of the cluster stopped before it: their
    collector stopped with them open and none followed it on the history (a collector that follows records them
    ``lost`` or carries them on). Nothing says whether or when they ended, so they stay open, counted up to the last
    poll; the note says the count is as of that poll. None when nothing is open, or the polls reach to within
    `STALE_POLLS` intervals of the week's end or to within `HISTORY_LAG_S` of the report."""
    last, interval = (polls or {}).get("last_poll"), (polls or {}).get("poll_interval_s")
    if not open_now or last is None or not interval:
        return None
    if last >= min(period_end - STALE_POLLS * interval, now - HISTORY_LAG_S):
        return None
    over = now >= period_end
    ago, end = (period_end - last, "the week's end") if over else (now - last, "this report")
    return (f"The polls of this cluster stop at {_iso(last)}, {fmt_duration(ago)} before {end}: the "
            f"{plural(open_now, 'incident')} open then {count_of(open_now, 'is', 'are')} listed open, each up to that "
            f"poll. No collector polled the cluster after it, so whether and when {count_of(open_now, 'it', 'they')} "
            "ended was not recorded.")


def incidents_doc(cluster: str, c: Computed, polls: dict[str, Any] | None = None,
                  now: float | None = None) -> dict[str, Any]:
    """Where the incident figures came from, the incidents still open, the worst ones and the count per kind."""
    src = next(iter(_rows(_get(c, "incident_source", cluster))), None)
    source = src["source"] if src else A.FROM_ALERT_EPISODES
    notes: list[str] = []
    if source == A.FROM_INCIDENTS:
        rows = _rows(_get(c, "incidents", cluster))
        keys = ("id", "kind", "severity", "subject", "start", "end", "status", "duration_s", "open_for_s", "alerts",
                "reopens", "summary")
        if src and src["incident_polls"] < src["polls"]:
            notes.append(f"Incidents were recorded at {src['incident_polls']} of {src['polls']} polls (the collector "
                         "was upgraded during the week): incidents before that are not counted.")
    else:
        rows = _rows(_get(c, "alert_episodes", cluster))
        keys = ("rule", "severity", "subject", "start", "end", "status", "duration_s", "open_for_s", "summary")
        notes.append("This history has no incident records (written before history schema version 2): the "
                     "incident figures count alert episodes (one per alert: one per partition in a broker outage) "
                     "instead, as reports did before.")
    last_week = (c.previous_tables or {}).get("incident_source")
    prev = next(iter(_rows(None if last_week is None else _of(last_week, cluster))), None)
    if prev and prev["source"] != source:
        notes.append(f"Last week's incident figures count {prev['source']}, this week's {source}: "
                     "the week-over-week change of those figures compares different things.")

    stopped = stopped_polls_note(sum(r["status"] == "open" for r in rows), polls, c.period.end,
                                 time.time() if now is None else now)
    if stopped is not None:
        notes.append(stopped)

    def order(r: dict[str, Any]) -> tuple[Any, ...]:
        return (SEVERITY_RANK.get(r["severity"], 9), -(r["duration_s"] or r["open_for_s"] or 0.0), r["start"])

    return {
        "incidents_from": source,
        "open_incidents": [{k: r[k] for k in keys if k not in ("end", "status", "duration_s")}
                           for r in sorted(rows, key=order) if r["status"] == "open"],
        "worst_incidents": [{k: r[k] for k in keys} for r in sorted(rows, key=order)[:WORST_N]],
        "incidents_by_kind": ([] if source != A.FROM_INCIDENTS else sorted(
            _rows(_get(c, "incident_kinds", cluster)), key=lambda r: (-r["opened"], r["kind"]))),
        "incident_notes": notes,
    }


def cluster_notes(cluster: str, c: Computed, polls: dict[str, Any] | None) -> list[str]:
    notes: list[str] = []
    days = c.period.days()
    if polls is None:
        return [f"{cluster}: no polls in {c.period.label}."]
    present = set(polls.get("days_with_polls") or [])
    missing = [days[i] for i in range(len(days)) if i not in present]
    if missing:
        notes.append(f"No polls on {', '.join(missing)} (collector down, or history removed): minutes count only "
                     "the polls that exist; coverage shows the share of the week the data speaks for.")
    if polls.get("poll_interval_s") is None:
        notes.append("Only one poll this week: the poll interval is unknown, so figures in minutes are n/a "
                     "(use --poll-interval-seconds to set it).")
    elif (polls.get("coverage") or 0) < 0.9 and not missing:
        notes.append(f"Polls cover {polls['coverage'] * 100:.1f} % of the week (gaps in the data).")
    return notes


def cluster_doc(cluster: str, c: Computed, opts: A.Options, global_notes: list[str]) -> dict[str, Any]:
    head = _row(_of(c.headline, cluster)) or {}
    prev = _row(_of(c.previous_headline, cluster))
    polls = _row(_of(c.tables["polls"], cluster))
    wow_rows = []
    for r in _of(c.week_over_week, cluster).to_pylist():
        r = dict(r)
        for k in ("this_week", "last_week", "change"):
            r[k] = _as_number(r[k], r["unit"])
        wow_rows.append(r)
    topics = _pd(_of(c.tables["topic_replication"], cluster))
    worst_topics: list[dict[str, Any]] = []
    if not topics.empty:
        m = topics[["under_replicated_minutes", "under_min_isr_minutes", "offline_minutes"]].fillna(0).sum(axis=1) > 0
        worst_topics = (topics[m].sort_values(["under_min_isr_minutes", "offline_minutes", "under_replicated_minutes"],
                                              ascending=False).head(WORST_N)
                        [["topic", "under_min_isr_minutes", "offline_minutes", "under_replicated_minutes"]]
                        .to_dict("records"))
    lag = _pd(_of(c.tables["consumer_lag"], cluster))
    worst_groups: list[dict[str, Any]] = []
    if not lag.empty:
        bad = ((lag["slo_share"].fillna(1) < 1) | (lag["err_minutes"].fillna(0) > 0)
               | (lag["warn_minutes"].fillna(0) > 0))
        worst_groups = (lag[bad].sort_values(["slo_share", "lag_seconds_p99"], ascending=[True, False],
                                             na_position="last").head(WORST_N)
                        [["group_id", "topic", "lag_seconds_p99", "lag_p99", "slo_share", "warn_minutes",
                          "err_minutes"]].to_dict("records"))
    inc = incidents_doc(cluster, c, polls)
    limits = thresholds_doc(cluster, c, opts)
    lost = sorted(_of(c.tables["data_lost"], cluster).to_pylist(), key=lambda r: (-(r["messages"] or 0), r["kind"]))
    gaps = _of(c.tables["poll_gaps"], cluster).to_pylist()
    elections = _of(c.tables["zk_elections"], cluster).to_pylist()
    stuck = [r for r in _of(c.tables["transactions"], cluster).to_pylist() if r["stuck"]]
    return {
        "cluster": cluster,
        "week": c.period.label,
        "previous_week": c.previous.label,
        "period": {"start": _iso(c.period.start), "end": _iso(c.period.end), "start_epoch": c.period.start,
                   "end_epoch": c.period.end},
        "generated_at": _iso(time.time()),
        "as_of_epoch": min(c.period.end, polls["last_poll"]) if polls else None,
        "poll_interval_s": polls.get("poll_interval_s") if polls else None,
        "poll_interval_rule": "median gap between consecutive polls of the cluster table in the week"
                              if opts.poll_interval_s is None else "set with --poll-interval-seconds",
        "lag_slo_s": limits["lag_slo_s"]["value"],
        "txn_grace_s": limits["txn_grace_s"]["value"],
        "thresholds": limits,
        "percentiles": PERCENTILE_TEXT[opts.percentiles].format(accuracy=opts.accuracy),
        "rollup_days": [d for d in c.rollup_days if d in c.period.days()],
        "previous_available": prev is not None,
        "previous_from": "last week's report" if c.previous_from_report else "the history",
        "headline": {n: _as_number(head.get(n), UNITS[n]) for n in HEADLINE_NAMES},
        "previous": {n: _as_number(prev.get(n), UNITS[n]) if prev else None for n in HEADLINE_NAMES},
        "week_over_week": wow_rows,
        "worse_than_last_week": [r["metric"] for r in wow_rows if r["worse"]],
        "data_lost": [{k: r[k] for k in ("kind", "subject", "topic", "events", "messages", "first", "last",
                                          "evidence")} for r in lost],
        "messages_lost": sum(r["messages"] or 0 for r in lost if r["kind"] in MESSAGES_GONE_KINDS),
        "coverage": {"polls": polls.get("polls") if polls else 0, "coverage": polls.get("coverage") if polls else 0.0,
                     "gaps": [{"from": _iso(g["from"]), "to": _iso(g["to"]), "seconds": g["seconds"]}
                              for g in sorted(gaps, key=lambda g: g["from"])]},
        "worst_topics": worst_topics,
        "worst_groups": worst_groups,
        **{k: v for k, v in inc.items() if k != "incident_notes"},
        "zk_elections": [{"time": r["time"], "at": _iso(r["time"]), "epoch_before": r["epoch_before"],
                          "epoch_after": r["epoch_after"], "leader": r["leader"]} for r in elections],
        "stuck_transactions": [{"transactional_id": r["transactional_id"], "start_time": r["start_time"],
                                "max_age_s": r["max_age_s"], "timeout_ms": r["timeout_ms"],
                                "last_state": r["last_state"]} for r in stuck],
        "notes": cluster_notes(cluster, c, polls) + inc["incident_notes"] + global_notes,
        "tables": sorted([*c.tables, *c.series, "headline", "previous_headline", "week_over_week"]),
    }


def write_cluster(cluster: str, c: Computed, out: Path, opts: A.Options, global_notes: list[str]) -> Path:
    """One cluster's report directory (`layout.report_dir`: where the dashboard looks for it); returns it."""
    target = layout.report_dir(out, cluster, c.period.label)
    # removed first and written last (like a roll-up's manifest): a report left half-written by a killed run is
    # never what next week's report reuses
    (target / layout.INPUTS_FILE).unlink(missing_ok=True)
    per = {name: _of(t, cluster) for name, t in c.tables.items()}
    per.update({name: _of(t, cluster) for name, t in c.series.items()})
    per["headline"] = _of(c.headline, cluster)
    per["previous_headline"] = _of(c.previous_headline, cluster)
    per["week_over_week"] = _of(c.week_over_week, cluster)
    for name, t in per.items():
        io.write_parquet(target / layout.TABLES_DIR / f"{name}.parquet", t)
    doc = cluster_doc(cluster, c, opts, global_notes)
    io.write_json(target / layout.SUMMARY_FILE, doc)
    page = render.render_report(doc, {name: _pd(t) for name, t in per.items()})
    io.write_text(target / layout.PAGE_FILE, page)
    if c.inputs is not None:
        io.write_json(target / layout.INPUTS_FILE, c.inputs)
    return target


# ----------------------------------------------------------------------------------------------- main


def run(args: Args, spark: Any) -> int:
    c = compute_with_retry(spark, args.history, args.period, args.opts, args.clusters, reports=args.out)
    clusters = sorted(c.tables["polls"].column("cluster").to_pylist())
    global_notes = io.table_notes(c.data, args.period.days())
    if not clusters:
        present = [n for n, td in c.data.items() if td.files]
        print(f"weekly_report: no polls in {args.period.label} under {args.history}"
              + (f" for {count_of(len(args.clusters), 'cluster')} {', '.join(args.clusters)}" if args.clusters else "")
              + (f" (tables with files in {c.previous.label}..{args.period.label}: {', '.join(present)})"
                 if present else " (no history files for these two weeks)")
              + "; nothing to report.", file=sys.stderr)
        rolled = [d for d in c.rollup_days if d in args.period.days()]
        if rolled:  # its raw history removed (retention), its roll-ups kept
            print(f"weekly_report: {plural(len(rolled), 'day')} of {args.period.label} "
                  f"{count_of(len(rolled), 'is', 'are')} rolled up, but roll-ups alone do "
                  "not make a report: broker availability, incidents, consensus and data lost are read from the "
                  "history, which no longer holds the week (removed by retention?). The roll-ups still feed the "
                  "four-week trend of the weeks after it; the week's own report is the one made when it ended.",
                  file=sys.stderr)
        return 1
    for cluster in clusters:
        target = write_cluster(cluster, c, args.out, args.opts, global_notes)
        head = _row(_of(c.headline, cluster)) or {}
        brief = ", ".join(f"{label} {fmt_value(head.get(name), UNITS[name])}" for name, label in (
            ("under_min_isr_minutes", "under min ISR"), ("incidents_opened", "incidents"),
            ("min_broker_availability", "worst broker availability"), ("lag_slo_share", "lag SLO"),
            ("zk_elections", "ZooKeeper elections")))
        print(f"{cluster} {args.period.label}: {target / layout.PAGE_FILE} — {brief}")
    if args.opts.rollups:
        line, warn = rollup.coverage(args.period.label, args.period.days(), c.rollup_days,
                                     days_with_rollup_input(c.data),
                                     rollup.Store.at(args.opts.rollups).root,
                                     datetime.now(UTC).date().isoformat())
        print(f"weekly_report: {line}", file=sys.stderr if warn else sys.stdout)
    print(f"computed in {c.seconds:.1f}s")
    return 0


def small_job(args: Args) -> bool:
    """Whether the run reads little to aggregate (`rollup.SMALL_JOB_BYTES`) — a small fleet's daily roll-ups, a small
    history —, so that its JVM starts as a small job's (`session.SMALL_JOB_JAVA_OPTIONS`). Counts both weeks' days
    as `load_partials` reads them: from the roll-ups where fresh, else from the history (all of it without the
    histograms)."""
    days = [d for p in (args.period.previous(), args.period) for d in p.days()]
    store = rollup.Store.at(args.opts.rollups) if args.opts.rollups and args.opts.percentiles == A.HISTOGRAM else None
    return rollup.reads_little(args.history, days, store)


def main(argv: Sequence[str] | None = None, spark: Any = None) -> int:
    """Entry point; pass `spark` to reuse a session (tests). Returns the exit code."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        args = parse_args(argv)
    except ArgumentError as e:
        print(f"weekly_report: error: {e}", file=sys.stderr)
        parser().print_usage(sys.stderr)
        return 2
    own = spark is None
    code = 1
    try:
        if own:
            spark = build_session(args.master, verbose=args.verbose, small_job=small_job(args),
                                  class_archive=args.class_archive)
        if io.is_remote(args.history) and not io.history_exists(spark, args.history):
            print(f"weekly_report: error: argument --history: {args.history!r} does not exist", file=sys.stderr)
            return 2
        if args.update_rollups:  # the report's days the daily job left, in this session: one JVM for the two jobs
            rollup_job.update_for_report(spark, args.history, args.opts.rollups or "", [
                d for w in trend_weeks(args.period) for d in w.days()], datetime.now(UTC).date().isoformat(),
                args.verbose)
        with rollup_job.reading_store(args.opts.rollups, args.rollups_wait_s, args.update_rollups):
            code = run(args, spark)
        return code
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if args.verbose:
            traceback.print_exc()
        print(f"weekly_report: failed: {describe_failure(e)} (--verbose for the traceback)", file=sys.stderr)
        return 1
    finally:
        if own and spark is not None:
            stop(spark, succeeded=code == 0)


if __name__ == "__main__":
    sys.exit(main())
