"""The weekly report's aggregations at scale: PySpark local[2] against DuckDB on the same Parquet files.

    .venv/bin/python -m bench.bench_spark [--dir DIR] [--week 2026-W40] [--runs 3] [--cores 2]
        [--partitions 25000] [--interval 30] [--exact] [--last-week] [--month] [--no-cli] [--json FILE]

A synthetic week (bench/synthetic_history.py: 5,000 partitions in 200 topics, 1,000 group-topics, polled
every 30 s, with incidents; ~26 M rows) is generated into DIR unless it is already there. Then, median of
`--runs`:

* **Spark**: `spark_analytics.weekly_report.compute` — everything the report computes and collects for the
  week and the week before (all tables, the headline, week over week, chart series), `local[2]`, from the
  history; for a like-for-like ratio, only the tables the headline needs, for this week; with ``--exact`` the
  whole report with exact percentiles too; then the daily roll-ups (`spark_analytics.rollup`: one day timed,
  the other days rolled up untimed) and the whole report from them (its headline compared with the one from the
  history). ``--partitions N`` generates a bigger fleet (`Shape.scaled`: 25,000 gives ~122 M rows);
  ``--interval S`` polls it every S seconds (100,000 partitions at 120 s: ~122 M rows, the size issue 17 names).
  ``--last-week`` is a weekly run's steady state: the history holds the week before too (every stage then reads
  it), and the whole report is timed again, from the history and from the roll-ups, with last week's report
  present (`weekly_report.stored_previous`: its headline read instead of computed); ``--month`` (implies
  ``--last-week``) generates and rolls up the two weeks before those too and times the report from the roll-ups
  again with a month of them present (its four-week trend reads all 28 days), beside one day's roll-up (issue 17:
  "a month of the bench fleet reports in about the time one day takes to roll up"); last (``--no-cli`` skips it)
  the report from the roll-ups as a weekly job runs it: ``python -m spark_analytics.weekly_report --rollups`` in
  a new process each run, its JVM cold, started as the CLI chooses (`weekly_report.small_job`), the same with a
  class archive and, alternating, with the JVM's defaults (with ``--last-week``, into an ``--out`` holding last
  week's report: a weekly job's steady state); beside them the daily job as cron runs it
  (``python -m spark_analytics.rollup --day``, the week's first day again, with the class archive);
* **DuckDB** (reference, same process, 2 threads): the headline aggregations in SQL over the same live files
  (poll interval, minutes under-replicated / under min ISR / offline, ISR shrinks per broker, broker
  availability, lag percentiles + SLO share + WARN/ERR minutes per group-topic, retention-loss episodes,
  transactions seen / stuck, LSO gap p99, ZooKeeper elections, incidents (distinct ids of ``incident_events``:
  opened, critical, open at the end, MTTR, longest, per kind; alert episodes where the history has no incident
  records) and the thresholds applied (the collector's, from ``cluster.thresholds``, else its defaults). The
  exact lag percentiles hold every value of a group-topic: above `LAG_SLICE_ROWS` rows of ``group_lag`` they are
  computed a slice of the group-topics at a time (the same figures; each slice a scan).

It prints both times, their ratio, the rows in the week's files, peak memory (driver Python RSS, JVM RSS
sampled every 0.2 s, the JVM's own peak from getrusage(RUSAGE_CHILDREN) once it has exited, DuckDB's RSS
increase) and a cross-check of headline figures between the two engines; it exits 1 when a figure differs
(or a headline computed two ways does). ``--json FILE`` writes the stages' figures for `bench.bench_scale`, which
runs this at several fleet sizes and prints them side by side. Timings are printed, never asserted.
`bench/check_report.py` runs the DuckDB reference and the cross-check alone, against a report the CLI wrote: for
weeks too big to compute the report here several times over.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bench.memory import Sampler
from bench.synthetic_history import Shape, generate
from collectors.model.vocabulary import (
    CLUSTER_WIDE_INCIDENT_KINDS,
    CRITICAL,
    LEADER_CHANGE_LOSSES,
    MESSAGES_GONE_KINDS,
    MONITOR_INCIDENT,
    SAME_LOSS,
    SEVERITY_RANK,
    TRANSACTION_V2,
)
from collectors.outputs.history.files import stores_timestamps
from collectors.outputs.history.schema import SECONDS_TABLES, TIME_COLUMNS
from spark_analytics import aggregations as A
from spark_analytics import io, rollup
from spark_analytics.session import CLASS_ARCHIVE_ENV, JAVA_ENV, end_jvm

CROSS_CHECKED = (
    "polls", "poll_interval_s", "under_replicated_minutes", "under_min_isr_minutes", "offline_minutes",
    "topics_under_min_isr", "isr_shrinks", "isr_expands", "min_broker_availability", "lag_slo_share",
    "worst_lag_seconds_p99", "worst_lag_messages_p99", "groups_breaching_slo", "warn_minutes", "err_minutes",
    "retention_loss_episodes", "transactions_seen", "stuck_transactions", "longest_open_txn_s",
    "hanging_transactions", "lso_gap_p99", "epoch_bumps", "zk_elections", "incidents_opened", "critical_incidents",
    "incidents_open_at_end", "mttr_minutes", "longest_incident_minutes", "alert_episodes_opened")


HISTOGRAM_FIGURES = frozenset({"worst_lag_seconds_p99", "worst_lag_messages_p99"})
"""Figures the report takes from the fixed log-scale histograms by default (DuckDB's are exact)."""
HISTOGRAM_ALPHA = 0.01


def timed(fn: Callable[[], Any], runs: int, label: str) -> tuple[list[float], Any]:
    times, result = [], None
    for i in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        print(f"  {label} run {i + 1}: {times[-1]:.1f}s", flush=True)
    return times, result


def table_rows(root: Path, period: A.Period, table: str) -> int:
    """The rows of `table`'s live files for `period`, from their footers (all their rows: the week's files may hold
    a few outside it)."""
    return sum(pq.read_metadata(f).num_rows for f in io.list_live_files(None, str(root), table, period.start,
                                                                        period.end))


def week_rows(root: Path, period: A.Period) -> dict[str, int]:
    return {t: table_rows(root, period, t) for t in io.REPORT_TABLES}


def fleet(rows: dict[str, int]) -> tuple[int, int]:
    """The synthetic fleet's (topics, group-topics), from `week_rows`: one cluster, so ``cluster`` has a row a poll,
    and ``topic_health`` a row a topic and ``group_lag`` one a group-topic at each poll."""
    polls = max(rows["cluster"], 1)
    return rows["topic_health"] // polls, rows["group_lag"] // polls


# ----------------------------------------------------------------------------------------------- DuckDB


@contextlib.contextmanager
def duckdb_reference(cores: int) -> Iterator[Any]:
    """A DuckDB connection for the reference, `cores` threads, spilling to a temporary directory of its own of at
    most half its disk's free space. DuckDB's default is `.tmp` under the working directory (the repository) and
    up to 90 % of the free space: at 485 M rows (100,000 partitions polled every 30 s) the reference filled the
    disk that way. Capped, a reference too big for the machine fails with DuckDB's own error naming the setting
    and leaves the disk usable."""
    import duckdb

    with tempfile.TemporaryDirectory(prefix="kmon-bench-duckdb-") as spill:
        con = duckdb.connect()
        try:
            con.execute(f"SET threads = {cores}")
            con.execute(f"SET temp_directory = '{spill}'")
            con.execute(f"SET max_temp_directory_size = '{shutil.disk_usage(spill).free // 2 // 2**20}MiB'")
            yield con
        finally:
            con.close()


LAG_SLICE_ROWS = 200_000_000
"""The most ``group_lag`` rows DuckDB's exact lag percentiles take in one query. Its `quantile_cont` per
group-topic keeps every value of the group. On 2 threads, the 403 M rows of 100,000 partitions polled every 30 s
in one query had spilled 15 GB to disk after 73 s with 8 GB resident, and was stopped (43 GB in an earlier run);
in three slices of ~134 M rows, each took 14-15 s and 3.0 GB, and nothing spilled. Below it (every bench week up
to 100,000 partitions at 120 s, ~101 M rows) the query runs as one, as before; above it, in slices of the
group-topics, each a scan of the week's ``group_lag``."""


def lag_slices(rows: int, slice_rows: int = LAG_SLICE_ROWS) -> int:
    """How many slices of the group-topics keep each within `slice_rows` of the week's `rows` of ``group_lag``
    (`table_rows`), at least 1."""
    return max(1, -(-rows // slice_rows))


def duckdb_headline(con: Any, root: Path, period: A.Period, slice_rows: int = LAG_SLICE_ROWS) -> dict[str, Any]:
    """The headline figures in DuckDB SQL over the same live files (one cluster per row, first cluster kept).

    Times are epoch seconds (DOUBLE) as in the Spark job: files of schema version 4 and later (TIMESTAMP WITH
    TIME ZONE columns) are read apart from older ones (DOUBLE) and their time columns converted. The lag
    percentiles are computed a slice of the group-topics at a time above `slice_rows` rows (`LAG_SLICE_ROWS`)."""
    s, e = period.start, period.end

    def src(table: str, since: float = s) -> str:
        files = io.list_live_files(None, str(root), table, since, e)
        if not files:
            cols = ", ".join(f"NULL::{_duck_type(f.type)} AS {f.name}" for f in SECONDS_TABLES[table])
            return f"(SELECT {cols} WHERE false)"
        return f"(SELECT * FROM ({duckdb_files(table, files)}) WHERE time >= {since} AND time < {e})"

    def one(sql: str) -> dict[str, Any]:
        cur = con.execute(sql)
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        return dict(zip(names, rows[0], strict=True)) if rows else {}

    out: dict[str, Any] = {}
    out.update(one(f"""
        WITH t AS (SELECT DISTINCT cluster, time FROM {src('cluster')}),
             g AS (SELECT cluster, time - lag(time) OVER (PARTITION BY cluster ORDER BY time) AS gap FROM t)
        SELECT cluster, count(*) AS polls, quantile_cont(gap, 0.5) AS poll_interval_s FROM g GROUP BY cluster"""))
    iv = out["poll_interval_s"]
    # the thresholds the collector recorded (latest in the period), else its defaults
    rec = one(f"""SELECT arg_max(thresholds, time) AS t, count(incidents_open) AS incident_polls
                 FROM {src('cluster')}""")
    recorded = json.loads(rec["t"]) if rec.get("t") else {}
    slo_s = float(recorded.get("lag_seconds_slo", A.DEFAULT_LAG_SLO_S))
    grace_s = float(recorded.get("txn_timeout_grace_s", A.DEFAULT_TXN_GRACE_S))
    out.update(lag_slo_s=slo_s, txn_grace_s=grace_s)
    out.update(one(f"""
        WITH p AS (SELECT cluster, time, sum(under_replicated) ur, sum(under_min_isr) umi, sum(offline) off
                   FROM {src('topic_health')} GROUP BY ALL)
        SELECT count_if(ur > 0) * {iv} / 60 AS under_replicated_minutes,
               count_if(umi > 0) * {iv} / 60 AS under_min_isr_minutes,
               count_if(off > 0) * {iv} / 60 AS offline_minutes FROM p"""))
    out.update(one(f"""
        SELECT count(DISTINCT topic) FILTER (WHERE under_min_isr > 0) AS topics_under_min_isr
        FROM {src('topic_health')}"""))
    out.update(one(f"""
        WITH pc AS (SELECT coalesce(isr_before, []) b, coalesce(isr_after, []) a FROM {src('partition_changes')})
        SELECT coalesce(sum(len(list_filter(b, lambda x: NOT list_contains(a, x)))), 0) AS isr_shrinks,
               coalesce(sum(len(list_filter(a, lambda x: NOT list_contains(b, x)))), 0) AS isr_expands FROM pc"""))
    out.update(one(f"""
        WITH b AS (SELECT * FROM {src('brokers')}), n AS (SELECT count(DISTINCT time) n FROM b)
        SELECT min(alive_polls / n) AS min_broker_availability FROM
            (SELECT broker_id, count_if(alive) alive_polls FROM b GROUP BY ALL), n"""))
    # per group-topic, in slices of the group-topics small enough for memory (`lag_slices`), then over them all
    n = lag_slices(table_rows(root, period, "group_lag"), slice_rows)
    for k in range(n):
        con.execute(f"""
            {'CREATE OR REPLACE TEMP TABLE kmon_lag_groups AS' if k == 0 else 'INSERT INTO kmon_lag_groups'}
            SELECT group_id, topic,
                   quantile_cont(lag_seconds_max, 0.99) p99s, quantile_cont(lag_max, 0.99) p99m,
                   count_if(lag_seconds_max <= {slo_s}) ok, count(lag_seconds_max) known,
                   count_if(status = 'WARN') warn, count_if(status = 'ERR') err
            FROM {src('group_lag')} WHERE topic IS NOT NULL {f'AND hash(group_id, topic) % {n} = {k}' if n > 1 else ''}
            GROUP BY ALL""")
    out.update(one(f"""
        SELECT sum(ok) / sum(known) AS lag_slo_share, max(p99s) AS worst_lag_seconds_p99,
               max(p99m) AS worst_lag_messages_p99, count_if(ok < known) AS groups_breaching_slo,
               sum(warn) * {iv} / 60 AS warn_minutes, sum(err) * {iv} / 60 AS err_minutes FROM kmon_lag_groups"""))
    con.execute("DROP TABLE kmon_lag_groups")
    out.update(one(f"""
        WITH f AS (SELECT group_id, topic, time FROM {src('group_lag')} WHERE below_log_start > 0),
             p AS (SELECT time, row_number() OVER (ORDER BY time) idx
                   FROM (SELECT DISTINCT time FROM {src('cluster')})),
             x AS (SELECT group_id, topic, idx - row_number() OVER (PARTITION BY group_id, topic ORDER BY idx) isl
                   FROM f JOIN p USING (time))
        SELECT count(DISTINCT (group_id, topic, isl)) AS retention_loss_episodes FROM x"""))
    out.update(one(f"""
        WITH t AS (SELECT transactional_id, start_time, max(age_seconds) age, max(timeout_ms) tmo
                   FROM {src('transactions')} WHERE start_time IS NOT NULL GROUP BY ALL)
        SELECT count(*) AS transactions_seen, count_if(age > tmo / 1000 + {grace_s}) AS stuck_transactions,
               max(age) AS longest_open_txn_s FROM t"""))
    out.update(one(f"""
        SELECT count(DISTINCT (topic, partition, producer_id)) AS hanging_transactions
        FROM {src('producers')} WHERE hanging"""))
    out.update(one(f"SELECT quantile_cont(lso_gap, 0.99) AS lso_gap_p99 FROM {src('lso_gap')}"))
    # epoch increases between a transactional id's consecutive polls (same producer id), the week before as context;
    # into or out of a poll where the cluster ran Transaction V2 (every end bumps the epoch there) only out of an
    # epoch the producer had proved to keep V1's rules at (the collector's `keeps_v1`), and as one
    clusters, txns = src("cluster", s - 7 * 86400), src("transactions", s - 7 * 86400)
    has_tv = "transaction_version" in {d[0] for d in con.execute(f"SELECT * FROM {clusters} LIMIT 0").description}
    has_kv = "keeps_v1" in {d[0] for d in con.execute(f"SELECT * FROM {txns} LIMIT 0").description}
    out.update(one(f"""
        WITH v2 AS (SELECT DISTINCT cluster, time FROM {clusters}
                    WHERE {'transaction_version' if has_tv else 'NULL::INTEGER'} >= {TRANSACTION_V2}),
             p AS (SELECT cluster, transactional_id, time, arg_max(producer_id, producer_epoch) pid,
                          max(producer_epoch) ep,
                          arg_max(coalesce({'keeps_v1' if has_kv else 'NULL::BOOLEAN'}, false), producer_epoch) kv
                   FROM {txns} WHERE producer_epoch IS NOT NULL GROUP BY ALL),
             q AS (SELECT p.*, v2.time IS NOT NULL AS every_end FROM p LEFT JOIN v2 USING (cluster, time)),
             d AS (SELECT time, CASE WHEN NOT coalesce(lag(pid) OVER w = pid, false) THEN 0
                                     WHEN NOT every_end AND NOT coalesce(lag(every_end) OVER w, false)
                                     THEN greatest(0, ep - lag(ep) OVER w)
                                     WHEN coalesce(lag(kv) OVER w, false)
                                     THEN greatest(0, least(1, ep - lag(ep) OVER w))
                                     ELSE 0 END dt
                   FROM q WINDOW w AS (PARTITION BY cluster, transactional_id ORDER BY time))
        SELECT coalesce(sum(dt) FILTER (WHERE time >= {s}), 0) AS epoch_bumps FROM d"""))
    # an election: the epoch rose above every earlier poll's, the week before read as context (as the report does)
    out.update(one(f"""
        WITH p AS (SELECT time, max(zxid_epoch) FILTER (WHERE serving AND zxid > 0) ep
                   FROM {src('consensus', s - 7 * 86400)} WHERE kind = 'zookeeper' GROUP BY time),
             c AS (SELECT time, ep, max(ep) OVER (ORDER BY time ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) prev
                   FROM p WHERE ep IS NOT NULL)
        SELECT count_if(ep > prev AND time >= {s}) AS zk_elections FROM c"""))
    episodes = one(f"""
        WITH a AS (SELECT rule, subject, first_seen, min(resolved_at) FILTER (WHERE event = 'resolve') res,
                          arg_max(severity, time) sev
                   FROM {src('alert_events')} GROUP BY ALL)
        SELECT count_if(first_seen >= {s}) AS incidents_opened,
               count_if(first_seen >= {s} AND sev = '{CRITICAL}') AS critical_incidents,
               avg(res - first_seen) FILTER (WHERE res >= {s}) / 60 AS mttr_minutes FROM a""")
    out["alert_episodes_opened"] = episodes["incidents_opened"]
    out["losses_by_kind"] = duckdb_losses(con, src("loss_events", s - 7 * 86400), s)
    out["messages_lost"] = sum(m or 0 for k, (_, m) in out["losses_by_kind"].items() if k in MESSAGES_GONE_KINDS)
    incidents, kinds = duckdb_incidents(con, src('incident_events', s - 7 * 86400), src('cluster'), s, e)
    if rec.get("incident_polls") or incidents["events"]:
        out.update({k: v for k, v in incidents.items() if k != "events"})
        out["incidents_by_kind"] = kinds
    else:  # version 1 history: the incident figures are the alert episodes'
        out.update(episodes)
        out["incidents_by_kind"] = {}
    return out


def duckdb_incidents(con: Any, events: str, cluster: str, s: float, e: float) -> tuple[dict[str, Any], dict[str, int]]:
    """Incidents by distinct id from the incident events up to the period end (the week before as context)."""
    rank = " ".join(f"WHEN '{sev}' THEN {r}" for sev, r in SEVERITY_RANK.items())
    wide = ", ".join(f"'{k}'" for k in CLUSTER_WIDE_INCIDENT_KINDS)  # superseded incidents: as the report
    sql = f"""
        WITH ev AS (SELECT *, CASE event WHEN 'opened' THEN 0 WHEN 'reopened' THEN 1 WHEN 'resolved' THEN 3
                                         WHEN 'lost' THEN 4 ELSE 2 END ord FROM {events}),
             last AS (SELECT cluster, id, event AS last_event, coalesce(resolved_at, time) AS res FROM
                      (SELECT *, row_number() OVER (PARTITION BY cluster, id ORDER BY time DESC, ord DESC) rn FROM ev)
                      WHERE rn = 1),
             agg AS (SELECT cluster, id, coalesce(min(opened), min(time)) AS start, arg_max(kind, time) AS kind,
                            CASE WHEN arg_max(kind, time) IN ({wide}) THEN arg_max(kind, time)
                                 ELSE arg_max(subject, time) END AS cause,
                            min(CASE severity {rank} ELSE 99 END) AS worst FROM ev GROUP BY ALL),
             lp AS (SELECT least({e}, max(time)) AS as_of FROM {cluster}),
             x AS (SELECT agg.*, CASE WHEN last_event = 'resolved' THEN res END AS fin,
                          CASE WHEN last_event = 'lost' THEN res END AS lost, as_of,
                          lead(start) OVER (PARTITION BY cluster, kind, cause ORDER BY start, id) AS nxt
                   FROM agg JOIN last USING (cluster, id), lp),
             y AS (SELECT *, fin - start AS dur,
                          CASE WHEN fin IS NULL AND lost IS NULL AND nxt IS NULL THEN greatest(0, as_of - start)
                          END AS open_for
                   FROM x WHERE start < {e} AND coalesce(fin, lost, nxt, as_of) >= {s})"""
    head = con.execute(sql + f"""
        , h AS (SELECT * FROM y WHERE kind <> '{MONITOR_INCIDENT}')  -- the monitor's own: by kind only
        SELECT count_if(start >= {s}) AS incidents_opened,
               count_if(start >= {s} AND worst = {SEVERITY_RANK[CRITICAL]}) AS critical_incidents,
               count_if(fin IS NULL AND lost IS NULL AND nxt IS NULL) AS incidents_open_at_end,
               avg(dur) FILTER (WHERE fin >= {s}) / 60 AS mttr_minutes,
               max(coalesce(dur, open_for)) / 60 AS longest_incident_minutes,
               (SELECT count(*) FROM {events} WHERE time >= {s}) AS events FROM h""")
    names = [d[0] for d in head.description]
    figures = dict(zip(names, head.fetchone(), strict=True))
    kinds = dict(con.execute(sql + f" SELECT kind, count_if(start >= {s}) FROM y GROUP BY kind").fetchall())
    return figures, kinds


def duckdb_losses(con: Any, events: str, s: float) -> dict[str, tuple[int, int | None]]:
    """The loss ledger of the period per kind: (entries, messages; None where no entry has a count), a leader
    change's loss counted once, at its first record (the week before as context). The report's `data_lost`."""
    once = ", ".join(f"'{k}'" for k in sorted(LEADER_CHANGE_LOSSES))
    same = ", ".join(f'"{c}"' for c in SAME_LOSS)
    rows = con.execute(f"""
        WITH l AS (SELECT *, CASE WHEN kind IN ({once}) THEN
                                  row_number() OVER (PARTITION BY {same} ORDER BY time, evidence) ELSE 1 END AS nth
                   FROM {events})
        SELECT kind, count(*), sum(messages) FROM l WHERE nth = 1 AND time >= {s} GROUP BY kind""").fetchall()
    return {k: (int(n), None if m is None else int(m)) for k, n, m in rows}


def ledger_by_kind(lost: Sequence[dict[str, Any]]) -> dict[str, tuple[int, int | None]]:
    """A report's ``data_lost`` rows (per cluster, kind and subject) per kind: (entries, messages; None where no
    entry has a count), as `duckdb_losses` gives them."""
    out: dict[str, tuple[int, int | None]] = {}
    for r in lost:
        n, m = out.get(r["kind"], (0, None))
        out[r["kind"]] = (n + r["events"], m if r["messages"] is None else (m or 0) + r["messages"])
    return out


def duckdb_files(table: str, files: list[str]) -> str:
    """A DuckDB query over history files of any schema version, time columns as DOUBLE epoch seconds."""
    parts = []
    for stamped in (False, True):
        group = ", ".join(f"'{f}'" for f in files if stores_timestamps(f) == stamped)
        if not group:
            continue
        seconds = ", ".join(f"epoch_us({c})::DOUBLE / 1e6 AS {c}" for c in TIME_COLUMNS[table])
        parts.append(f"SELECT * {f'REPLACE ({seconds}) ' if stamped else ''}"
                     f"FROM read_parquet([{group}], union_by_name=true)")
    return " UNION ALL BY NAME ".join(parts)


def _duck_type(t: Any) -> str:
    s = str(t)
    return {"string": "VARCHAR", "double": "DOUBLE", "int32": "INTEGER", "int64": "BIGINT", "bool": "BOOLEAN",
            "list<item: int32>": "INTEGER[]", "list<item: string>": "VARCHAR[]"}.get(s, "VARCHAR")


# ----------------------------------------------------------------------------------------------- main


def stage(times: Sequence[float], rows: float | None = None, duck: float | None = None) -> dict[str, Any]:
    """One stage of the summary `--json` writes: the median of `times`, the runs, and where given the rows per
    second over `rows` and the ratio to DuckDB's median `duck`."""
    median = statistics.median(times)
    return {"median_s": round(median, 3), "runs_s": [round(x, 3) for x in times],
            "rows_per_s": None if rows is None else round(rows / median), "vs_duckdb": None if duck is None
            else round(median / duck, 2)}


def main() -> int:
    """Run the bench; 1 when a cross-checked figure or a headline compared between two ways DIFFERS, else 0."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path("data/bench-history"))
    ap.add_argument("--week", default="2026-W40")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--driver-memory", default="1g",
                    help="JVM heap of the Spark driver (local mode runs in it); default 1g, Spark's and the CLI's")
    ap.add_argument("--no-headline-only", dest="headline_only", action="store_false",
                    help="skip the second Spark timing (only the headline inputs of this week, like DuckDB's)")
    ap.add_argument("--partitions", type=int, default=5000,
                    help="partitions of the synthetic fleet when DIR has to be generated (a multiple of 25, "
                         ">= 5,000; group-topics scale with them); default 5,000")
    ap.add_argument("--interval", type=float, default=30.0,
                    help="seconds between the synthetic fleet's polls when DIR has to be generated; default 30 "
                         "(--partitions 100000 --interval 120: a 100,000-partition week of ~122 M rows)")
    ap.add_argument("--exact", action="store_true", help="also time the whole report with --exact-percentiles")
    ap.add_argument("--no-cli", dest="cli", action="store_false",
                    help="skip the last Spark timing (the report from the roll-ups by the CLI, a new process each "
                         "run, as a weekly job runs it)")
    ap.add_argument("--last-week", action="store_true",
                    help="the weekly run's steady state: DIR holds the week before too (generated with it when DIR "
                         "has to be; give a DIR of its own), rolled up as well, and two more stages time the report "
                         "with last week's report present (its headline read, not computed again)")
    ap.add_argument("--json", type=Path, metavar="FILE",
                    help="also write the stages' medians, runs, rows per second and ratios to DuckDB, the week's "
                         "rows and the cross-check's result to FILE (what bench.bench_scale reads)")
    ap.add_argument("--month", action="store_true",
                    help="--last-week, and the two weeks before it as well (generated with the others when DIR has "
                         "to be): after the other roll-up stages, those weeks are rolled up too and the report from "
                         "the roll-ups is timed again with its four-week trend reading all 28 days")
    a = ap.parse_args()
    a.last_week = a.last_week or a.month
    period = A.Period.iso_week(a.week)
    earlier = [period.previous().previous().previous(), period.previous().previous()] if a.month else []
    if not (a.dir / "group_lag").is_dir():
        for week in [w.label for w in earlier] + ([period.previous().label] if a.last_week else []) + [a.week]:
            print(f"generating a synthetic week ({week}) of {a.partitions:,} partitions polled every "
                  f"{a.interval:g} s into {a.dir} ...", flush=True)
            w = generate(a.dir, week, Shape.scaled(a.partitions, interval_s=a.interval))
            print(f"generated {sum(w.rows.values()):,} rows in {w.files} files, {w.bytes / 1e6:.0f} MB, "
                  f"{w.seconds:.0f}s")
    elif a.last_week and not any((a.dir / "cluster").glob(f"date={period.previous().days()[0]}")):
        ap.error(f"--last-week: {a.dir} has no history for {period.previous().label}: give a new --dir")
    elif earlier and not any((a.dir / "cluster").glob(f"date={earlier[0].days()[0]}")):
        ap.error(f"--month: {a.dir} has no history for {earlier[0].label}: give a new --dir")
    rows = week_rows(a.dir, period)
    total = sum(rows.values())
    size = sum(f.stat().st_size for f in a.dir.rglob("*.parquet"))
    print(f"history {a.dir}: {total:,} rows in the week ({size / 1e6:.0f} MB on disk): "
          + ", ".join(f"{k} {v:,}" for k, v in rows.items() if v))

    with (Sampler() as sampler, tempfile.TemporaryDirectory(prefix="kmon-bench-rollups-") as up,
          tempfile.TemporaryDirectory(prefix="kmon-bench-cli-out-") as cli_out):
        # ---- Spark
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from spark_analytics.session import build_session
        from spark_analytics.weekly_report import collect_week, compute, headline_table, write_cluster

        t0 = time.perf_counter()
        spark = build_session(f"local[{a.cores}]", app_name="kmon-bench",
                              conf={"spark.driver.memory": a.driver_memory})
        startup = time.perf_counter() - t0
        jvm = spark.sparkContext._jvm.java.lang.System
        print(f"Spark session started in {startup:.1f}s (local[{a.cores}], driver memory {a.driver_memory}; Spark "
              f"{spark.version}, Java {jvm.getProperty('java.version')} {jvm.getProperty('java.vm.name')})")
        sampler.reset()
        spark_times, c = timed(lambda: compute(spark, str(a.dir), period), a.runs, "spark (whole report)")

        def headline_only() -> Any:
            frames = {k: v.df for k, v in io.read_history(spark, str(a.dir), period.start, period.end).items()}
            return headline_table(collect_week(spark, frames, period, A.Options(), A.HEADLINE_INPUTS))

        head_times: list[float] = []
        if a.headline_only:
            head_times, _ = timed(headline_only, a.runs, "spark (headline inputs, this week only)")
        exact_times: list[float] = []
        if a.exact:
            exact_times, _ = timed(lambda: compute(spark, str(a.dir), period, A.Options(percentiles=A.EXACT)),
                                   a.runs, "spark (whole report, exact percentiles)")
        # ---- daily roll-ups: one day, then the rest; the report from them
        reuse_times: dict[str, list[float]] = {}
        reuse_same: dict[str, bool] = {}
        with tempfile.TemporaryDirectory(prefix="kmon-bench-reports-") as reports:
            store = rollup.Store(Path(up))
            day_times, _ = timed(lambda: rollup.rollup(spark, str(a.dir), store, period.days()[:1]), a.runs,
                                 "spark (roll up one day)")
            rollup.rollup(spark, str(a.dir), store, period.days()[1:] + (period.previous().days() if a.last_week
                                                                         else []))
            up_times, c_up = timed(lambda: compute(spark, str(a.dir), period, A.Options(rollups=up)), a.runs,
                                   "spark (whole report from roll-ups)")
            up_head = (c_up.headline.to_pylist() or [{}])[0]
            if a.last_week:  # last week's report written (untimed), as last week's run left it
                last = compute(spark, str(a.dir), period.previous(), A.Options(rollups=up))
                for cluster in last.headline["cluster"].to_pylist():
                    write_cluster(cluster, last, Path(reports), A.Options(rollups=up), [])
                shutil.copytree(reports, cli_out, dirs_exist_ok=True)  # the CLI's --out, as a weekly job finds it
                for label, opts in (("from the history", A.Options()), ("from the roll-ups", A.Options(rollups=up))):
                    reuse_times[label], c_re = timed(
                        lambda opts=opts: compute(spark, str(a.dir), period, opts, reports=Path(reports)), a.runs,
                        f"spark (whole report {label}, last week's report present)")
                    reuse_same[label] = (c_re.previous_from_report
                                         and c_re.headline.to_pylist() == c.headline.to_pylist()
                                         and c_re.previous_headline.to_pylist() == last.headline.to_pylist())
            month_times: dict[str, list[float]] = {}
            month_same: dict[str, bool] = {}
            if earlier:  # a month of roll-ups: the trend's two older weeks come from the store
                rollup.rollup(spark, str(a.dir), store, [d for w in earlier for d in w.days()])
                for label, at in (("last week computed too", None), ("last week's report present", Path(reports))):
                    month_times[label], c_month = timed(
                        lambda at=at: compute(spark, str(a.dir), period, A.Options(rollups=up), reports=at), a.runs,
                        f"spark (whole report from roll-ups, a month of them, {label})")
                    month_trend = c_month.tables["trend"].to_pylist()
                    month_same[label] = (c_month.headline.to_pylist() == c_up.headline.to_pylist()
                                         and c_month.previous_from_report == (at is not None))
        jvm_rss, under_rss, under_parts = sampler.peak_child, sampler.peak_children, sampler.parts()
        driver_rss = sampler.peak_self
        rt = spark._jvm.java.lang.Runtime.getRuntime()  # type: ignore[attr-defined]
        heap_used, heap_max = rt.totalMemory() - rt.freeMemory(), rt.maxMemory()
        spark_head = (c.headline.to_pylist() or [{}])[0]
        spark.stop()
        end_jvm()  # spark.stop() keeps the JVM: ended and reaped, so getrusage sees its peak RSS
        jvm_rusage = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KB on Linux
        # ---- the report from the roll-ups as a weekly job runs it: the CLI, a new process (a cold JVM) each run
        cli_times: dict[str, list[tuple[float, float]]] = {mode: [] for mode in CLI_JVM} if a.cli else {}
        day_cli: list[tuple[float, float]] = []  # the daily job as cron runs it, beside the weekly one
        monday: list[tuple[float, float]] = []  # the weekly job that rolls up the week's last day first, both ways
        sampler.reset()
        archive = Path(up).parent / f"kmon-bench-classes-{os.getpid()}.jsa"
        if a.cli:  # the first run with an archive writes it: not timed with the others
            trained = cli_report(a.dir, up, a.week, a.cores, archive=archive)
            made = (f"training its class archive ({archive.stat().st_size / 2**20:.0f} MiB)" if archive.is_file()
                    else "no class archive trained (not a small job: the runs 'with a class archive' have none)")
            print(f"  CLI from roll-ups, {made}: computed in {trained[0]:.1f}s, process {trained[1]:.1f}s", flush=True)
        for i in range(a.runs if a.cli else 0):
            for mode, (java, cds) in CLI_JVM.items():  # alternating, so that a slower minute of the machine hits all
                cli_times[mode].append(cli_report(a.dir, up, a.week, a.cores, java, archive if cds else None,
                                                  Path(cli_out) if a.last_week else None))
                print(f"  CLI from roll-ups ({mode}) run {i + 1}: computed in {cli_times[mode][-1][0]:.1f}s, "
                      f"process {cli_times[mode][-1][1]:.1f}s", flush=True)
            day_cli.append(cli_rollup(a.dir, up, period.days()[0], a.cores, archive))  # idempotent: the same day
            print(f"  CLI rolling up one day (with the class archive) run {i + 1}: {day_cli[-1][0]:.1f}s, process "
                  f"{day_cli[-1][1]:.1f}s", flush=True)
            monday.append(cli_monday(a.dir, up, a.week, period.days()[-1], a.cores, archive))
            print(f"  CLI the weekly job with its last day to roll up, run {i + 1}: two processes "
                  f"{monday[-1][0]:.1f}s, one (--update-rollups) {monday[-1][1]:.1f}s", flush=True)
        cli_rss, cli_parts = sampler.peak_children, sampler.parts()
        for f in (archive, archive.with_name(archive.name + ".json")):
            f.unlink(missing_ok=True)
        # ---- DuckDB
        with duckdb_reference(a.cores) as con:
            sampler.reset()
            base = sampler.me.memory_info().rss
            duck_times, duck_head = timed(lambda: duckdb_headline(con, a.dir, period), a.runs, "duckdb")
            duck_rss = sampler.peak_self - base

    slices = lag_slices(rows["group_lag"])
    sm, dm = statistics.median(spark_times), statistics.median(duck_times)
    stages = {"duckdb headline": stage(duck_times, total), "whole report": stage(spark_times, total, dm)}
    same_ways = {"from the roll-ups": up_head == spark_head}
    mb = 1e6
    print()
    print(f"rows processed (the week's files): {total:,}  (+ the previous week: "
          f"{'as many' if a.last_week else 'none in the synthetic history'})")
    print(f"Spark  local[{a.cores}] report aggregations: median {sm:.1f}s  "
          f"(runs {', '.join(f'{x:.1f}' for x in spark_times)}, best {min(spark_times):.1f}s; session start "
          f"{startup:.1f}s not included)"
          f" -> {total / sm / 1e6:.2f} M rows/s")
    print(f"DuckDB {a.cores} threads headline aggregations: median {dm:.1f}s  "
          f"(runs {', '.join(f'{x:.1f}' for x in duck_times)}) -> {total / dm / 1e6:.2f} M rows/s"
          + (f"; its lag percentiles in {slices} slices of the group-topics (LAG_SLICE_ROWS)" if slices > 1 else ""))
    print(f"ratio Spark / DuckDB: {sm / dm:.1f}x (whole report: both weeks, every table, chart series)")
    if head_times:
        hm = statistics.median(head_times)
        stages["headline only"] = stage(head_times, total, dm)
        print(f"Spark  local[{a.cores}] headline inputs only (this week, the same figures as DuckDB): median "
              f"{hm:.1f}s (runs {', '.join(f'{x:.1f}' for x in head_times)}) -> {total / hm / 1e6:.2f} M rows/s, "
              f"ratio {hm / dm:.1f}x")
    if exact_times:
        em = statistics.median(exact_times)
        stages["whole report, exact percentiles"] = stage(exact_times, total, dm)
        print(f"Spark  local[{a.cores}] whole report, --exact-percentiles: median {em:.1f}s "
              f"(runs {', '.join(f'{x:.1f}' for x in exact_times)}) -> {total / em / 1e6:.2f} M rows/s, "
              f"ratio {em / dm:.1f}x")
    dy, um = statistics.median(day_times), statistics.median(up_times)
    stages["roll up one day"] = stage(day_times, total / 7)
    stages["whole report from the roll-ups"] = stage(up_times, None, dm)
    print(f"Spark  local[{a.cores}] roll up one day: median {dy:.1f}s (runs {', '.join(f'{x:.1f}' for x in day_times)})"
          f" -> {total / 7 / dy / 1e6:.2f} M rows/s")
    print(f"Spark  local[{a.cores}] whole report from the daily roll-ups: median {um:.1f}s "
          f"(runs {', '.join(f'{x:.1f}' for x in up_times)}) -> ratio {um / dm:.1f}x; headline "
          f"{'equal to' if up_head == spark_head else 'DIFFERS from'} the one from the history")
    for label, times in month_times.items():
        mm = statistics.median(times)
        stages[f"a month of roll-ups, {label}"] = dict(stage(times), vs_day_rollup=round(mm / dy, 2))
        same_ways[f"a month of roll-ups, {label}"] = month_same[label]
        weeks = ", ".join(f"{r['week']} {r['days']} days" for r in month_trend)
        print(f"Spark  local[{a.cores}] whole report from a month of daily roll-ups (the trend over {weeks}), "
              f"{label}: median {mm:.1f}s (runs {', '.join(f'{x:.1f}' for x in times)}) -> {mm / dy:.1f}x one "
              f"day's roll-up ({dy:.1f}s); headline {'equal to' if month_same[label] else 'DIFFERS from'} the one from "
              "two weeks of roll-ups")
    for label, times in reuse_times.items():
        stages[f"whole report {label}, last week's report present"] = stage(times, None, dm)
        same_ways[f"{label}, last week's report present"] = reuse_same[label]
        print(f"Spark  local[{a.cores}] whole report {label}, last week's report present: median "
              f"{statistics.median(times):.1f}s (runs {', '.join(f'{x:.1f}' for x in times)}) -> ratio "
              f"{statistics.median(times) / dm:.1f}x; last week's headline "
              f"{'read from its report, both headlines equal' if reuse_same[label] else 'NOT reused or DIFFERS'}")
    for mode, runs in cli_times.items():
        cm, pm = (statistics.median(x) for x in zip(*runs, strict=True))
        stages[f"CLI from the roll-ups, {mode}"] = dict(stage([x for x, _ in runs], None, dm),
                                                         process_s=stage([x for _, x in runs])["median_s"])
        print(f"Spark  local[{a.cores}] whole report from the daily roll-ups by the CLI, a new process each run (a "
              f"cold JVM, as a weekly job runs it{'; last week from its report in --out' if a.last_week else ''}), "
              f"{mode}: median computed in {cm:.1f}s (runs "
              f"{', '.join(f'{x:.1f}' for x, _ in runs)}) -> ratio {cm / dm:.1f}x; the process {pm:.1f}s "
              f"(runs {', '.join(f'{x:.1f}' for _, x in runs)})")
    if day_cli:
        dc, dp = (statistics.median(x) for x in zip(*day_cli, strict=True))
        stages["CLI rolling up one day"] = dict(stage([x for x, _ in day_cli]), process_s=round(dp, 3))
        rp = statistics.median(x for _, x in cli_times[next(m for m, (_, cds) in CLI_JVM.items() if cds)])
        print(f"Spark  local[{a.cores}] roll up one day by the CLI, a new process each run, with the class archive: "
              f"median {dc:.1f}s as it prints it (runs {', '.join(f'{x:.1f}' for x, _ in day_cli)}; session start "
              f"and stop included); the process {dp:.1f}s (runs {', '.join(f'{x:.1f}' for _, x in day_cli)}) -> the "
              f"weekly report's process from the {'month of ' if earlier else ''}roll-ups with the archive "
              f"({rp:.1f}s) is {rp / dp:.1f}x the daily job's")
    if monday:
        two, one = (statistics.median(x) for x in zip(*monday, strict=True))
        stages["CLI weekly job, roll-up then report (processes)"] = stage([x for x, _ in monday])
        stages["CLI weekly job, --update-rollups (process)"] = stage([x for _, x in monday])
        print(f"Spark  local[{a.cores}] the weekly job when the week's last day is not rolled up yet, with the class "
              f"archive, the processes: roll-up then report {two:.1f}s (runs "
              f"{', '.join(f'{x:.1f}' for x, _ in monday)}), the report with --update-rollups {one:.1f}s (runs "
              f"{', '.join(f'{x:.1f}' for _, x in monday)}) -> {one / two:.2f}x")
    if cli_times:
        print(f"  (peak RSS of a CLI process and its JVM: {cli_rss / 1e6:.0f} MB: {cli_parts})")
    print(f"peak memory: Spark driver (Python) RSS {driver_rss / mb:.0f} MB, JVM RSS {jvm_rss / mb:.0f} MB sampled "
          f"({jvm_rusage / mb:.0f} MB getrusage children; every process under the bench together "
          f"{under_rss / mb:.0f} MB: {under_parts}), JVM heap used {heap_used / mb:.0f} of "
          f"{heap_max / mb:.0f} MB at the end; DuckDB RSS increase {duck_rss / mb:.0f} MB")
    print()
    print("cross-check of headline figures (Spark report vs DuckDB SQL):")
    differing = cross_check(spark_head, c.tables["thresholds"].to_pylist(), c.tables["incident_kinds"].to_pylist(),
                            duck_head, c.tables["data_lost"].to_pylist())
    if a.json:
        topics, group_topics = fleet(rows)
        summary = {"week": a.week, "rows": total, "tables": rows, "topics": topics, "group_topics": group_topics,
                   "cores": a.cores,
                   "stages": stages, "figures_differing": differing, "headlines_equal": same_ways,
                   "jvm_peak_rss_mb": round(jvm_rss / mb)}
        tmp = a.json.with_name(f".{a.json.name}.tmp")
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
        os.replace(tmp, a.json)  # whole or absent, never half a file
    return 1 if differing or not all(same_ways.values()) else 0


def cross_check(headline: dict[str, Any], thresholds: list[dict[str, Any]], kinds: list[dict[str, Any]],
                duck_head: dict[str, Any], lost: Sequence[dict[str, Any]] = (),
                messages_lost: int | None = None) -> int:
    """Print the report's figures beside DuckDB's, each "ok" or "DIFFERS", from the report's `headline` row and its
    ``thresholds``, ``incident_kinds`` and ``data_lost`` tables' rows (`lost`) and its summary's `messages_lost`
    (None: not compared); returns how many differ."""
    limits = (thresholds or [{}])[0]
    by_kind = {r["kind"]: r["opened"] for r in kinds}
    spark_all = {**headline, "lag_slo_s": limits.get("lag_slo_s"), "txn_grace_s": limits.get("txn_grace_s")}
    differing = 0
    for k in (*CROSS_CHECKED, "lag_slo_s", "txn_grace_s"):
        if k not in duck_head:
            continue
        sv, dv = spark_all.get(k), duck_head.get(k)
        ok = same(sv, dv, HISTOGRAM_ALPHA if k in HISTOGRAM_FIGURES else 1e-6)
        differing += not ok
        note = " (histogram: within 1 %)" if k in HISTOGRAM_FIGURES else ""
        print(f"  {k:28s} spark {_fmt(sv):>16s}  duckdb {_fmt(dv):>16s}  {'ok' if ok else 'DIFFERS'}{note}")
    for kind in sorted(set(by_kind) | set(duck_head["incidents_by_kind"])):
        sv, dv = by_kind.get(kind), duck_head["incidents_by_kind"].get(kind)
        differing += not same(sv, dv)
        print(f"  {'incidents opened: ' + kind:28s} spark {_fmt(sv):>16s}  duckdb {_fmt(dv):>16s}  "
              f"{'ok' if same(sv, dv) else 'DIFFERS'}")
    mine, theirs = ledger_by_kind(lost), duck_head["losses_by_kind"]
    for kind in sorted(set(mine) | set(theirs)):
        for i, what in enumerate(("entries", "messages")):
            sv, dv = (mine.get(kind, (0, None))[i], theirs.get(kind, (0, None))[i])
            differing += sv != dv
            print(f"  {'ledger ' + what + ': ' + kind:28s} spark {_fmt(sv):>16s}  duckdb {_fmt(dv):>16s}  "
                  f"{'ok' if sv == dv else 'DIFFERS'}")
    if messages_lost is not None:
        dv = duck_head["messages_lost"]
        differing += messages_lost != dv
        print(f"  {'messages_lost':28s} spark {_fmt(messages_lost):>16s}  duckdb {_fmt(dv):>16s}  "
              f"{'ok' if messages_lost == dv else 'DIFFERS'}")
    return differing


CLI_JVM: dict[str, tuple[str | None, bool]] = {
    "its JVM as the CLI chooses": (None, False),
    "the same with a class archive": (None, True),
    "the JVM's defaults": ("-XX:+UseG1GC -XX:TieredStopAtLevel=4", False)}
"""The CLI's JVM: as `weekly_report.small_job` chooses it, the same mapping Spark's classes from a class-data
sharing archive (``--class-archive``, trained by a first run), and with the JVM's own defaults on a 2-core machine
(the old mode: G1 and both compilers, named in ``JAVA_TOOL_OPTIONS``, which the CLI leaves alone)."""


def cli_report(history: Path, rollups: str, week: str, cores: int, java: str | None = None,
               archive: Path | None = None, out: Path | None = None, more: Sequence[str] = ()) -> tuple[float, float]:
    """`python -m spark_analytics.weekly_report --rollups` in a new process (with `java` as ``JAVA_TOOL_OPTIONS``,
    `archive` as ``--class-archive``): its "computed in" seconds (what the in-process stages time, from a cold JVM)
    and the whole process's (imports and session start too). With `out` (holding last week's report, as a weekly
    job's ``--out`` does) the run must have read last week's headline from there; else into a new directory."""
    with tempfile.TemporaryDirectory(prefix="kmon-bench-cli-") as fresh:
        got = _run_cli("spark_analytics.weekly_report", [
            "--history", str(history), "--rollups", rollups, "--week", week, "--out", str(out or fresh), "--master",
            f"local[{cores}]", *(["--class-archive", str(archive)] if archive else []), *more],
            r"^computed in ([0-9.]+)s$", java)
    if out is not None:
        summaries = [json.loads(f.read_text()) for f in out.glob(f"*/{week}/summary.json")]
        if not summaries or any(d.get("previous_from") != "last week's report" for d in summaries):
            raise RuntimeError(f"weekly_report CLI did not read last week's headline from its report in {out}")
    return got


def cli_rollup(history: Path, rollups: str, day: str, cores: int, archive: Path) -> tuple[float, float]:
    """``python -m spark_analytics.rollup --day`` in a new process, with `archive` as ``--class-archive``: the
    seconds it prints (session start and stop included) and the whole process's."""
    return _run_cli("spark_analytics.rollup", [
        "--history", str(history), "--rollups", rollups, "--day", day, "--master", f"local[{cores}]",
        "--class-archive", str(archive)], r"^rolled up 1 day .* in ([0-9.]+)s:")


def cli_monday(history: Path, rollups: str, week: str, day: str, cores: int, archive: Path) -> tuple[float, float]:
    """The weekly job when the daily one has not rolled up the week's last `day` yet, both ways, a new process each
    (as cron runs them): the roll-up job then the report, against the report alone with ``--update-rollups``
    (docs/performance-log.md, "Step 23"). The whole processes' wall times: (two processes, one)."""
    manifest = rollup.Store.at(rollups).manifest_path(day)
    manifest.unlink()  # the day reads as not rolled up; both ways roll it up again
    two = cli_rollup(history, rollups, day, cores, archive)[1] + cli_report(history, rollups, week, cores,
                                                                            archive=archive)[1]
    manifest.unlink()
    one = cli_report(history, rollups, week, cores, archive=archive, more=["--update-rollups"])[1]
    if not manifest.is_file():
        raise RuntimeError(f"weekly_report --update-rollups did not roll up {day}")
    return two, one


def _run_cli(module: str, args: list[str], seconds: str, java: str | None = None) -> tuple[float, float]:
    """`module`'s CLI in a new process, the caller's JVM options and class archive out of its environment (`java`
    as ``JAVA_TOOL_OPTIONS`` instead, if given): the seconds its output reports (`seconds`, a pattern whose group
    is them) and the whole process's wall time; a failed run raises with the end of its output."""
    env = {k: v for k, v in os.environ.items() if k not in (*JAVA_ENV, CLASS_ARCHIVE_ENV)}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, check=False,
                       env=dict(env, JAVA_TOOL_OPTIONS=java) if java else env)
    wall = time.perf_counter() - t0
    m = re.search(seconds, r.stdout, re.MULTILINE)
    if r.returncode != 0 or m is None:
        raise RuntimeError(f"{module} CLI exited {r.returncode}: {(r.stderr or r.stdout).strip()[-2000:]}")
    return float(m.group(1)), wall


def same(sv: Any, dv: Any, rel: float = 1e-6) -> bool:
    """Equal within `rel` (float noise by default), or both null."""
    return (sv is None and dv is None) or (sv is not None and dv is not None
                                           and abs(float(sv) - float(dv)) <= rel * max(1.0, abs(float(dv))) + 1e-9)


def _fmt(v: Any) -> str:
    if v is None:
        return "null"
    f = float(v)
    return f"{int(f):,}" if f.is_integer() else f"{f:,.4f}"


if __name__ == "__main__":
    sys.exit(main())
