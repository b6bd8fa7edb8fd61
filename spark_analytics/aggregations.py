"""The weekly report's figures as pure DataFrame -> DataFrame functions (no I/O, no actions).

Every function takes history DataFrames with the columns of `collectors.outputs.history.TABLES` (extra columns are
ignored, missing data is just fewer rows) and a `Period` (``start <= time < end``, epoch seconds), and
returns a small DataFrame keyed by ``cluster`` first. The inputs may hold rows from before the period (the
CLI loads the previous ISO week too): functions that look for *changes* (controller changes, elections,
epoch bumps, episodes) use those earlier rows as context, so a change at the first poll of the week is seen;
functions that *count* only look at rows inside the period. Rows at or after ``period.end`` are never used,
so the previous week's figures are computed exactly the same way from the same frames.

Conventions, written down once:

* **Poll interval** (`poll_intervals`): per cluster, the median gap between consecutive distinct ``time``
  values of the ``cluster`` table inside the period (one row per poll). The median ignores the odd long gap
  (collector restart) and the odd short one (a manual ``--once`` run). Figures in minutes are
  ``polls with the condition x poll interval / 60``: each poll stands for one interval of wall time. With a
  single poll the interval is unknown and minute figures are null.
* **Percentiles**: exact by default — Spark's ``percentile`` (linear interpolation between the two closest
  ranks, like numpy's default and DuckDB's ``quantile_cont``). A week holds at most a few tens of thousands
  of polls per group, so the exact aggregate is cheap, and measured on 20 M group_lag rows it was faster than
  ``percentile_approx`` (13 s against 23 s on 2 cores). ``exact=False`` switches to ``percentile_approx``
  with accuracy 10,000 (nearest-rank: the smallest observed value with at least p of the observations at or
  below it, within n/10,000 ranks) for histories with far more polls per key. Observations are polls: "p99
  lag" is the lag exceeded in 1 % of the polls.
* **Episodes** (retention loss, follower behind, hanging transactions): runs of consecutive polls (numbered
  from the ``cluster`` table, so irregular gaps between polls do not matter) in which a condition held; one
  poll without the condition ends an episode. Duration = last - first flagged poll + one poll interval.
* **Null versus zero**: a figure whose source table has no row for a cluster in the period is null
  (unknown: no ZooKeeper, no groups, no data); event tables (``partition_changes``, ``alert_events``) have
  rows only when something happened, so their counts are 0 for a cluster that was polled.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

PCTS: tuple[float, ...] = (0.5, 0.95, 0.99)
PCT_NAMES: tuple[str, ...] = ("p50", "p95", "p99")
DEFAULT_ACCURACY = 10_000
DEFAULT_LAG_SLO_S = 300.0
DEFAULT_TXN_GRACE_S = 10.0  # Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms
EPISODE_GAP_FACTOR = 1.5
WEEK_RE = re.compile(r"^(\d{4})-W(\d{2})$")


# ----------------------------------------------------------------------------------------------- periods


@dataclass(frozen=True)
class Period:
    """A half-open time range ``[start, end)`` in epoch seconds, with a label (an ISO week like 2026-W47)."""

    start: float
    end: float
    label: str

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @classmethod
    def iso_week(cls, label: str) -> Period:
        """``YYYY-Www`` -> Monday 00:00 UTC to the next Monday; ValueError on a malformed or impossible week."""
        m = WEEK_RE.match(label.strip())
        if not m:
            raise ValueError(f"{label!r} is not an ISO week like 2026-W47")
        year, week = int(m.group(1)), int(m.group(2))
        try:
            monday = date.fromisocalendar(year, week, 1)
        except ValueError as e:
            raise ValueError(f"{label!r} is not a week of {year}: {e}") from None
        start = calendar.timegm(monday.timetuple())
        return cls(float(start), float(start + 7 * 86400), f"{year}-W{week:02d}")

    @classmethod
    def containing(cls, t: float) -> Period:
        y, w, _ = datetime.fromtimestamp(t, UTC).isocalendar()
        return cls.iso_week(f"{y}-W{w:02d}")

    @classmethod
    def last_complete_week(cls, now: float) -> Period:
        return cls.containing(now).previous()

    def previous(self) -> Period:
        d = datetime.fromtimestamp(self.start, UTC).date() - timedelta(days=7)
        y, w, _ = d.isocalendar()
        return Period.iso_week(f"{y}-W{w:02d}")

    def days(self) -> list[str]:
        first = datetime.fromtimestamp(self.start, UTC).date()
        n = round(self.seconds / 86400)
        return [(first + timedelta(days=i)).isoformat() for i in range(n)]


# ----------------------------------------------------------------------------------------------- helpers


def _in(period: Period, col: str = "time") -> Column:
    return (F.col(col) >= F.lit(period.start)) & (F.col(col) < F.lit(period.end))


def _before_end(period: Period, col: str = "time") -> Column:
    return F.col(col) < F.lit(period.end)


def _pct_array(col: str, exact: bool, accuracy: int) -> Column:
    c = F.col(col).cast("double")
    if exact:
        return F.percentile(c, list(PCTS))
    return F.percentile_approx(c, list(PCTS), accuracy)


def _pct_aggs(col: str, prefix: str, exact: bool, accuracy: int) -> list[Column]:
    """Aggregations producing ``_<prefix>_pcts`` (array) and ``<prefix>_max``; `_pct_cols` unpacks them."""
    return [_pct_array(col, exact, accuracy).alias(f"_{prefix}_pcts"), F.max(F.col(col).cast("double")).alias(
        f"{prefix}_max")]


def _pct_unpack(df: DataFrame, prefix: str) -> DataFrame:
    arr = F.col(f"_{prefix}_pcts")
    # rounded to 1e-6: interpolation leaves float noise (62.00000000000001) that would only clutter the report
    df = df.withColumns({f"{prefix}_{name}": F.round(arr.getItem(i).cast("double"), 6)
                         for i, name in enumerate(PCT_NAMES)})
    cols = [c for c in df.columns if c != f"_{prefix}_pcts" and c != f"{prefix}_max"] + [f"{prefix}_max"]
    return df.select(*cols)


def _minutes(polls_col: str, interval_col: str = "poll_interval_s") -> Column:
    return (F.col(polls_col) * F.col(interval_col) / 60.0).cast("double")


def _interval(polls: DataFrame) -> DataFrame:
    return polls.select("cluster", "poll_interval_s")


def poll_index(cluster: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Every poll of each cluster up to the period end, numbered in time order (``idx``), with the interval.

    Episodes use it to tell "the next poll" from "a later poll": two flagged rows are consecutive when their
    polls' numbers differ by one, however irregular the gaps between polls are.
    """
    t = cluster.filter(_before_end(period)).select("cluster", "time").distinct()
    t = t.withColumn("idx", F.row_number().over(Window.partitionBy("cluster").orderBy("time")))
    return t.join(F.broadcast(_interval(polls)), "cluster", "left")


def _episodes(flagged: DataFrame, keys: Sequence[str], poll_idx: DataFrame, aggs: Sequence[Column] = ()) -> DataFrame:
    """Group flagged poll rows (``keys`` + ``time``) into episodes of consecutive polls (see the module doc).

    A flagged row whose time is not a poll of the ``cluster`` table (that table missing for the day) falls back
    to the time rule: it continues the episode when at most 1.5 poll intervals after the previous flagged row.
    """
    f = flagged.join(F.broadcast(poll_idx), ["cluster", "time"], "left")
    f = f.withColumn("poll_interval_s", F.coalesce(
        F.col("poll_interval_s"), F.first("poll_interval_s", ignorenulls=True).over(Window.partitionBy("cluster"))))
    w = Window.partitionBy(*keys).orderBy("time")
    prev_idx = F.lag("idx").over(w)
    gap = F.col("time") - F.lag("time").over(w)
    limit = F.col("poll_interval_s") * EPISODE_GAP_FACTOR
    by_index = F.col("idx").isNotNull() & prev_idx.isNotNull()
    new = (F.when(by_index, F.when(F.col("idx") - prev_idx > 1, 1).otherwise(0))
           .when(gap.isNull() | limit.isNull() | (gap > limit), 1).otherwise(0))
    f = f.withColumn("_new", new).withColumn(
        "_episode", F.sum("_new").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    out = f.groupBy(*keys, "_episode").agg(
        F.min("time").alias("start"), F.max("time").alias("end"), F.count(F.lit(1)).alias("polls"),
        F.first("poll_interval_s").alias("_iv"), *aggs)
    return (out.withColumn("duration_s", (F.col("end") - F.col("start") + F.coalesce(F.col("_iv"), F.lit(0.0)))
                           .cast("double"))
            .drop("_episode", "_iv"))


def _overlapping(episodes: DataFrame, period: Period) -> DataFrame:
    return episodes.filter((F.col("end") >= F.lit(period.start)) & (F.col("start") < F.lit(period.end)))


# ----------------------------------------------------------------------------------------------- polls


def poll_intervals(cluster: DataFrame, period: Period, override_s: float | None = None) -> DataFrame:
    """Per cluster: polls, first/last poll, ``poll_interval_s`` (median gap; `override_s` wins), coverage.

    ``coverage`` = polls x interval / period length (capped at 1): the share of the week the data speaks
    for. ``days_with_polls`` lists the UTC day indexes (0 = Monday) that have at least one poll.
    """
    times = cluster.filter(_in(period)).select("cluster", "time").distinct()
    w = Window.partitionBy("cluster").orderBy("time")
    gaps = times.withColumn("_gap", F.col("time") - F.lag("time").over(w)).withColumn(
        "_day", F.floor((F.col("time") - F.lit(period.start)) / 86400).cast("int"))
    agg = gaps.groupBy("cluster").agg(
        F.count(F.lit(1)).alias("polls"), F.min("time").alias("first_poll"), F.max("time").alias("last_poll"),
        F.percentile(F.col("_gap"), 0.5).alias("median_gap_s"),
        F.array_sort(F.collect_set("_day")).alias("days_with_polls"))
    interval = F.lit(float(override_s)) if override_s else F.col("median_gap_s")
    return (agg.withColumn("poll_interval_s", interval.cast("double"))
            .withColumn("observed_minutes", _minutes("polls"))
            .withColumn("coverage", F.least(F.lit(1.0), F.col("polls") * F.col("poll_interval_s")
                                            / F.lit(period.seconds)))
            .select("cluster", "polls", "first_poll", "last_poll", "median_gap_s", "poll_interval_s",
                    "observed_minutes", "coverage", "days_with_polls"))


def cluster_health(cluster: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Per cluster: polls unreachable, with stale sections, and reachable without a controller (and minutes)."""
    c = cluster.filter(_in(period))
    reachable = F.coalesce(F.col("reachable"), F.lit(True))
    agg = c.groupBy("cluster").agg(
        F.count_if(~reachable).alias("unreachable_polls"),
        F.count_if(F.coalesce(F.col("stale"), F.lit(False)) & reachable).alias("stale_polls"),
        F.count_if(reachable & F.col("controller_id").isNull()).alias("no_controller_polls"),
        F.max("brokers").alias("brokers"), F.max("topics").alias("topics"), F.max("partitions").alias("partitions"),
        F.max("groups").alias("groups"), F.max_by("mode", "time").alias("mode"))
    agg = agg.join(_interval(polls), "cluster", "left")
    for name in ("unreachable", "stale", "no_controller"):
        agg = agg.withColumn(f"{name}_minutes", _minutes(f"{name}_polls"))
    return agg.drop("poll_interval_s")


def cluster_timeseries(cluster: DataFrame, period: Period, bucket_s: int = 900) -> DataFrame:
    """Per cluster and time bucket: worst (max) partition counts and open alerts, for the overview chart."""
    c = cluster.filter(_in(period)).withColumn(
        "bucket", (F.floor((F.col("time") - F.lit(period.start)) / bucket_s) * bucket_s + F.lit(period.start)))
    return c.groupBy("cluster", "bucket").agg(
        F.max("under_replicated").alias("under_replicated"), F.max("under_min_isr").alias("under_min_isr"),
        F.max("offline").alias("offline"), F.max("alerts_open").alias("alerts_open"),
        F.max("alerts_critical").alias("alerts_critical"), F.min("brokers").alias("brokers_min"),
        F.count_if(~F.coalesce(F.col("reachable"), F.lit(True))).alias("unreachable_polls"),
    ).orderBy("cluster", "bucket")


# ----------------------------------------------------------------------------------------------- replication


def topic_replication(topic_health: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Per cluster and topic: minutes with at least one partition under-replicated / under min ISR / offline.

    Also ``*_partition_minutes`` (partitions x minutes: two partitions for 5 minutes = 10) and the worst
    number of partitions at once.
    """
    th = topic_health.filter(_in(period))
    aggs = [F.count(F.lit(1)).alias("polls"), F.max("internal").alias("internal"),
            F.max("partitions").alias("partitions"), F.max("replication_factor").alias("replication_factor"),
            F.max_by("min_insync_replicas", "time").alias("min_insync_replicas")]
    for name in ("under_replicated", "under_min_isr", "offline"):
        aggs += [F.count_if(F.col(name) > 0).alias(f"{name}_polls"),
                 F.sum(F.coalesce(F.col(name), F.lit(0))).alias(f"{name}_partition_polls"),
                 F.max(F.col(name)).alias(f"{name}_max_partitions")]
    out = th.groupBy("cluster", "topic").agg(*aggs).join(F.broadcast(_interval(polls)), "cluster", "left")
    for name in ("under_replicated", "under_min_isr", "offline"):
        out = (out.withColumn(f"{name}_minutes", _minutes(f"{name}_polls"))
               .withColumn(f"{name}_partition_minutes", _minutes(f"{name}_partition_polls")))
    return out.drop("poll_interval_s")


def cluster_replication(topic_health: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Per cluster: minutes in which any topic had a partition under-replicated / under min ISR / offline."""
    th = topic_health.filter(_in(period))
    per_poll = th.groupBy("cluster", "time").agg(
        *[F.sum(F.coalesce(F.col(n), F.lit(0))).alias(n) for n in ("under_replicated", "under_min_isr", "offline")])
    agg = per_poll.groupBy("cluster").agg(
        *[F.count_if(F.col(n) > 0).alias(f"{n}_polls") for n in ("under_replicated", "under_min_isr", "offline")])
    agg = agg.join(_interval(polls), "cluster", "left")
    for n in ("under_replicated", "under_min_isr", "offline"):
        agg = agg.withColumn(f"{n}_minutes", _minutes(f"{n}_polls"))
    topics = th.groupBy("cluster").agg(
        F.countDistinct(F.when(F.col("under_min_isr") > 0, F.col("topic"))).alias("topics_under_min_isr"),
        F.countDistinct(F.when(F.col("offline") > 0, F.col("topic"))).alias("topics_offline"))
    return agg.join(topics, "cluster", "left").drop("poll_interval_s")


def _isr_moves(partition_changes: DataFrame, period: Period) -> DataFrame:
    empty = F.array().cast("array<int>")
    before = F.coalesce(F.col("isr_before"), empty)
    after = F.coalesce(F.col("isr_after"), empty)
    return partition_changes.filter(_in(period)).select(
        "cluster", "time", "topic", "partition", "kind", "leader_before", "leader_after",
        F.array_except(before, after).alias("removed"), F.array_except(after, before).alias("added"))


def isr_changes_by_broker(partition_changes: DataFrame, period: Period) -> DataFrame:
    """Per cluster and broker: ISR shrinks (the broker left a partition's ISR) and expands (it rejoined).

    One partition change that removes two brokers counts one shrink for each of them (Kafka's own
    IsrShrinksPerSec counts per partition on the leader; this attributes the shrink to the replica that fell out).
    """
    m = _isr_moves(partition_changes, period)
    shrinks = m.select("cluster", F.explode("removed").alias("broker"), F.lit(1).alias("s"), F.lit(0).alias("e"))
    expands = m.select("cluster", F.explode("added").alias("broker"), F.lit(0).alias("s"), F.lit(1).alias("e"))
    return (shrinks.unionByName(expands).groupBy("cluster", "broker")
            .agg(F.sum("s").alias("isr_shrinks"), F.sum("e").alias("isr_expands")))


def isr_changes_by_topic(partition_changes: DataFrame, period: Period) -> DataFrame:
    """Per cluster and topic: ISR shrinks / expands (per removed / added broker), partitions hit, leader changes."""
    m = _isr_moves(partition_changes, period)
    return m.groupBy("cluster", "topic").agg(
        F.sum(F.size("removed")).alias("isr_shrinks"), F.sum(F.size("added")).alias("isr_expands"),
        F.countDistinct(F.when(F.size("removed") > 0, F.col("partition"))).alias("partitions_shrunk"),
        F.count_if(F.col("leader_before") != F.col("leader_after")).alias("leader_changes"))


# ----------------------------------------------------------------------------------------------- incidents


def incidents(alert_events: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """One row per alert (open/resolve pair, keyed by cluster, rule, subject, first_seen) overlapping the period.

    ``status``: ``resolved`` (resolved before the period end; ``end`` and ``duration_s`` set), ``open`` (still
    open at the period end, or at the last poll when the data stops earlier: ``open_for_s`` is how long so
    far), or ``superseded`` (never resolved, but the same rule and subject opened again later: the collector
    restarted and lost its alert state; the true end is unknown). ``minutes_in_period`` is the part inside
    the period. A resolve event alone (the open was before the loaded range) still makes an incident.
    """
    ev = alert_events.filter(_before_end(period))
    key = ["cluster", "rule", "subject", "first_seen"]
    g = ev.groupBy(*key).agg(
        F.max_by("severity", "time").alias("severity"), F.max_by("summary", "time").alias("summary"),
        F.min(F.when(F.col("event") == "resolve", F.col("resolved_at"))).alias("_resolved"),
        F.max_by("value", "time").alias("value"))
    w = Window.partitionBy("cluster", "rule", "subject").orderBy("first_seen")
    g = g.withColumn("_next_open", F.lead("first_seen").over(w))
    g = g.join(F.broadcast(polls.select("cluster", "last_poll")), "cluster", "left")
    as_of = F.least(F.lit(period.end), F.coalesce(F.col("last_poll"), F.lit(period.end)))
    resolved = F.col("_resolved").isNotNull()
    superseded = ~resolved & F.col("_next_open").isNotNull()
    g = (g.withColumn("status", F.when(resolved, "resolved").when(superseded, "superseded").otherwise("open"))
         .withColumn("start", F.col("first_seen"))
         .withColumn("end", F.col("_resolved"))
         .withColumn("duration_s", (F.col("_resolved") - F.col("first_seen")).cast("double"))
         .withColumn("open_for_s", F.when(F.col("status") == "open",
                                          F.greatest(F.lit(0.0), as_of - F.col("first_seen")))))
    until = F.when(resolved, F.col("_resolved")).when(superseded, F.col("_next_open")).otherwise(as_of)
    g = g.withColumn("_until", until).filter((F.col("start") < F.lit(period.end))
                                             & (F.col("_until") >= F.lit(period.start)))
    inside = F.least(F.col("_until"), F.lit(period.end)) - F.greatest(F.col("start"), F.lit(period.start))
    return (g.withColumn("minutes_in_period", (F.greatest(F.lit(0.0), inside) / 60.0).cast("double"))
            .withColumn("opened_in_period", (F.col("start") >= F.lit(period.start)))
            .withColumn("resolved_in_period", resolved & (F.col("_resolved") >= F.lit(period.start)))
            .select("cluster", "rule", "severity", "subject", "start", "end", "status", "duration_s", "open_for_s",
                    "minutes_in_period", "opened_in_period", "resolved_in_period", "summary", "value"))


def incident_summary(incident_rows: DataFrame) -> DataFrame:
    """Per cluster and rule: incidents opened, resolved, open at the end, MTTR and longest, from `incidents`."""
    return incident_rows.groupBy("cluster", "rule").agg(
        F.count(F.lit(1)).alias("incidents"), F.count_if("opened_in_period").alias("opened"),
        F.count_if("resolved_in_period").alias("resolved"), F.count_if(F.col("status") == "open").alias("open_at_end"),
        F.avg(F.when(F.col("resolved_in_period"), F.col("duration_s"))).alias("mttr_s"),
        F.max(F.coalesce(F.col("duration_s"), F.col("open_for_s"))).alias("longest_s"),
        F.sum("minutes_in_period").alias("minutes_in_period"), F.max_by("severity", "start").alias("severity"))


# ----------------------------------------------------------------------------------------------- brokers


def broker_availability(brokers: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Per cluster and broker: share of the cluster's broker polls in which the broker was ``alive``.

    The denominator is the number of polls that reported any broker for the cluster, so a broker missing
    from a poll counts as unavailable for it; ``down_minutes`` = polls not alive x poll interval.
    """
    b = brokers.filter(_in(period))
    total = b.groupBy("cluster").agg(F.countDistinct("time").alias("broker_polls"))
    per = b.groupBy("cluster", "broker_id").agg(
        F.count_if(F.coalesce(F.col("alive"), F.lit(False))).alias("alive_polls"),
        F.count_if(F.col("reachable") == F.lit(False)).alias("unreachable_polls"),
        F.max_by("host", F.when(F.col("host").isNotNull(), F.col("time"))).alias("host"),
        F.max_by("rack", F.when(F.col("rack").isNotNull(), F.col("time"))).alias("rack"),
        F.count_if(F.coalesce(F.col("is_controller"), F.lit(False))).alias("controller_polls"))
    out = per.join(total, "cluster").join(F.broadcast(_interval(polls)), "cluster", "left")
    return (out.withColumn("availability", (F.col("alive_polls") / F.col("broker_polls")).cast("double"))
            .withColumn("_down", F.col("broker_polls") - F.col("alive_polls"))
            .withColumn("down_minutes", _minutes("_down"))
            .drop("_down", "poll_interval_s"))


def controller_changes(cluster: DataFrame, period: Period) -> DataFrame:
    """One row per change of ``controller_id`` between consecutive polls that reported one (nulls skipped)."""
    c = cluster.filter(_before_end(period) & F.col("controller_id").isNotNull())
    w = Window.partitionBy("cluster").orderBy("time")
    c = c.withColumn("controller_before", F.lag("controller_id").over(w))
    return (c.filter(_in(period) & F.col("controller_before").isNotNull()
                     & (F.col("controller_before") != F.col("controller_id")))
            .select("cluster", "time", "controller_before", F.col("controller_id").alias("controller_after")))


# ----------------------------------------------------------------------------------------------- consumers


def consumer_lag(group_lag: DataFrame, polls: DataFrame, period: Period, slo_s: float = DEFAULT_LAG_SLO_S,
                 exact: bool = True, accuracy: int = DEFAULT_ACCURACY) -> DataFrame:
    """Per cluster, group and topic: lag percentiles in messages and seconds, SLO share, WARN/ERR minutes.

    Each poll's ``lag_max`` / ``lag_seconds_max`` (the worst partition of the topic) is one observation.
    ``slo_share`` = polls with ``lag_seconds_max <= slo_s`` / polls with a known ``lag_seconds_max`` (null
    when never known). ``warn_minutes`` / ``err_minutes`` count polls with that group status. Rows without a
    topic (a group that has committed nothing) are left out.
    """
    g = group_lag.filter(_in(period) & F.col("topic").isNotNull())
    agg = g.groupBy("cluster", "group_id", "topic").agg(
        F.count(F.lit(1)).alias("polls"),
        *_pct_aggs("lag_max", "lag", exact, accuracy),
        *_pct_aggs("lag_seconds_max", "lag_seconds", exact, accuracy),
        F.count("lag_seconds_max").alias("polls_with_lag_seconds"),
        F.count_if(F.col("lag_seconds_max") <= F.lit(float(slo_s))).alias("polls_within_slo"),
        F.count_if(F.col("status") == "WARN").alias("warn_polls"),
        F.count_if(F.col("status") == "ERR").alias("err_polls"),
        F.count_if(F.col("below_log_start") > 0).alias("below_log_start_polls"),
        F.max_by("state", "time").alias("last_state"), F.max_by("members", "time").alias("last_members"))
    agg = _pct_unpack(_pct_unpack(agg, "lag"), "lag_seconds")
    agg = agg.join(F.broadcast(_interval(polls)), "cluster", "left")
    return (agg.withColumn("slo_share", F.when(F.col("polls_with_lag_seconds") > 0,
                                                (F.col("polls_within_slo") / F.col("polls_with_lag_seconds"))
                                                .cast("double")))
            .withColumn("warn_minutes", _minutes("warn_polls")).withColumn("err_minutes", _minutes("err_polls"))
            .withColumn("slo_s", F.lit(float(slo_s)))
            .drop("poll_interval_s"))


def retention_loss_episodes(group_lag: DataFrame, poll_idx: DataFrame, period: Period) -> DataFrame:
    """Episodes of consecutive polls in which a group had committed offsets below the log start (data lost)."""
    flagged = group_lag.filter(_before_end(period) & F.col("topic").isNotNull() & (F.col("below_log_start") > 0))
    eps = _episodes(flagged.select("cluster", "group_id", "topic", "time", "below_log_start"),
                    ["cluster", "group_id", "topic"], poll_idx,
                    [F.max("below_log_start").alias("max_partitions")])
    return _overlapping(eps, period)


def lag_timeseries(group_lag: DataFrame, keys: DataFrame, period: Period, bucket_s: int = 900) -> DataFrame:
    """Worst ``lag_seconds_max`` / ``lag_max`` per time bucket for the (cluster, group_id, topic) in `keys`."""
    g = group_lag.filter(_in(period)).join(F.broadcast(keys.select("cluster", "group_id", "topic")),
                                           ["cluster", "group_id", "topic"])
    g = g.withColumn("bucket", F.floor((F.col("time") - F.lit(period.start)) / bucket_s) * bucket_s
                     + F.lit(period.start))
    return g.groupBy("cluster", "group_id", "topic", "bucket").agg(
        F.max("lag_seconds_max").alias("lag_seconds_max"), F.max("lag_max").alias("lag_max"))


# ----------------------------------------------------------------------------------------------- transactions


def transaction_detail(transactions: DataFrame, period: Period, grace_s: float = DEFAULT_TXN_GRACE_S) -> DataFrame:
    """One row per transaction seen in the period: distinct (cluster, transactional_id, start_time).

    ``stuck`` when its largest observed open age exceeds ``timeout_ms`` + `grace_s` (the coordinator
    aborts expired transactions on a timer, every 10 s by default, so a few seconds past the timeout is normal).
    """
    t = transactions.filter(_in(period) & F.col("start_time").isNotNull())
    agg = t.groupBy("cluster", "transactional_id", "start_time").agg(
        F.min("time").alias("first_seen"), F.max("time").alias("last_seen"), F.count(F.lit(1)).alias("polls"),
        F.max("age_seconds").alias("max_age_s"), F.max("timeout_ms").alias("timeout_ms"),
        F.max_by("state", "time").alias("last_state"), F.array_sort(F.collect_set("state")).alias("states"),
        F.max_by("producer_id", "time").alias("producer_id"),
        F.max_by("producer_epoch", "time").alias("producer_epoch"),
        F.max_by("partitions", "time").alias("partitions"))
    return agg.withColumn("stuck", F.coalesce(F.col("max_age_s") > F.col("timeout_ms") / 1000.0 + F.lit(grace_s),
                                              F.lit(False)))


def producer_epoch_bumps(transactions: DataFrame, period: Period) -> DataFrame:
    """Per cluster and transactional id: producer epoch increases between consecutive observations.

    ``epoch_bumps`` sums the increases (each InitProducerId or coordinator fence adds one), ``epoch_increases``
    counts the polls where the epoch was seen higher than before. Only observations of the same producer id are
    compared (a new producer id starts again at epoch 0). The transactions table only has rows while a
    transaction is open, so bumps while none is open show up at the next open transaction.
    """
    t = transactions.filter(_before_end(period) & F.col("producer_epoch").isNotNull())
    per_poll = t.groupBy("cluster", "transactional_id", "time").agg(
        F.max_by("producer_id", "producer_epoch").alias("producer_id"), F.max("producer_epoch").alias("epoch"))
    w = Window.partitionBy("cluster", "transactional_id").orderBy("time")
    per_poll = (per_poll.withColumn("_prev", F.lag("epoch").over(w))
                .withColumn("_prev_pid", F.lag("producer_id").over(w)))
    delta = F.when(F.col("_prev_pid") == F.col("producer_id"), F.col("epoch") - F.col("_prev"))
    per_poll = per_poll.withColumn("_delta", F.greatest(F.lit(0), F.coalesce(delta, F.lit(0))))
    inside = per_poll.filter(_in(period))
    return inside.groupBy("cluster", "transactional_id").agg(
        F.sum("_delta").cast("long").alias("epoch_bumps"), F.count_if(F.col("_delta") > 0).alias("epoch_increases"),
        F.min_by("epoch", "time").alias("first_epoch"), F.max_by("epoch", "time").alias("last_epoch"))


def transactions_by_id(detail: DataFrame, bumps: DataFrame) -> DataFrame:
    """Per cluster and transactional id: transactions seen, stuck, longest open, epoch bumps (from the two above)."""
    per = detail.groupBy("cluster", "transactional_id").agg(
        F.count(F.lit(1)).alias("transactions_seen"), F.count_if("stuck").alias("stuck"),
        F.max("max_age_s").alias("longest_open_s"), F.max("timeout_ms").alias("timeout_ms"))
    return (per.join(bumps, ["cluster", "transactional_id"], "full")
            .select("cluster", "transactional_id", F.coalesce("transactions_seen", F.lit(0)).alias("transactions_seen"),
                    F.coalesce("stuck", F.lit(0)).alias("stuck"), "longest_open_s", "timeout_ms",
                    F.coalesce("epoch_bumps", F.lit(0)).alias("epoch_bumps"),
                    F.coalesce("epoch_increases", F.lit(0)).alias("epoch_increases"), "first_epoch", "last_epoch"))


def hanging_transactions(producers: DataFrame, poll_idx: DataFrame, period: Period) -> DataFrame:
    """Episodes of a producer with an open transaction on a partition that no coordinator knows (``hanging``).

    One hanging transaction (topic, partition, producer id) can give several episodes when some polls could not
    tell (the transactions section stale); the headline counts distinct (topic, partition, producer id).
    """
    h = producers.filter(_before_end(period) & F.coalesce(F.col("hanging"), F.lit(False)))
    eps = _episodes(h.select("cluster", "topic", "partition", "producer_id", "time", "txn_start_offset",
                             "transactional_id"),
                    ["cluster", "topic", "partition", "producer_id"], poll_idx,
                    [F.max("txn_start_offset").alias("txn_start_offset"),
                     F.max("transactional_id").alias("transactional_id")])
    return _overlapping(eps, period)


def lso_gaps(lso_gap: DataFrame, period: Period, exact: bool = True, accuracy: int = DEFAULT_ACCURACY,
             by: Sequence[str] = ("cluster", "topic")) -> DataFrame:
    """LSO gap percentiles (messages between the high watermark and the last stable offset).

    The history has a row only for partitions whose gap is > 0 at the poll, so these are percentiles over
    partition-polls *with an open transaction holding the LSO back*; ``partition_polls`` says how many.
    """
    g = lso_gap.filter(_in(period))
    agg = g.groupBy(*by).agg(F.count(F.lit(1)).alias("partition_polls"),
                             F.countDistinct("topic", "partition").alias("partitions"),
                             *_pct_aggs("lso_gap", "lso_gap", exact, accuracy))
    return _pct_unpack(agg, "lso_gap")


# ----------------------------------------------------------------------------------------------- consensus


def zk_polls(consensus: DataFrame, period: Period) -> DataFrame:
    """Per cluster and ZooKeeper poll: servers, serving, the highest zxid among serving servers, the leader.

    The highest zxid stands for the ensemble: right after an election followers report zxid 0 or a zxid of
    the previous epoch, so any single server (or the first row) can be behind; the maximum cannot.
    """
    z = consensus.filter(_before_end(period) & (F.col("kind") == "zookeeper"))
    serving = F.coalesce(F.col("serving"), F.lit(False))
    zxid = F.coalesce(F.col("zxid"), F.col("zxid_epoch") * F.lit(1 << 32) + F.coalesce(F.col("zxid_counter"), F.lit(0)))
    z = z.withColumn("_zxid", F.when(serving & (zxid > 0), zxid))
    per = z.groupBy("cluster", "time").agg(
        F.count(F.lit(1)).alias("servers"), F.count_if(serving).alias("serving"),
        F.max("_zxid").alias("zxid"),
        F.max(F.when(serving & (F.col("mode") == "leader"), F.col("server"))).alias("leader"),
        F.count_if(serving & (F.col("mode") == "leader")).alias("leaders"))
    return (per.withColumn("epoch", F.shiftright(F.col("zxid"), 32))
            .withColumn("counter", F.col("zxid").bitwiseAND(F.lit(0xFFFFFFFF)))
            .withColumn("quorum", F.col("serving") * 2 > F.col("servers")))


def zk_elections(consensus: DataFrame, period: Period) -> DataFrame:
    """One row per ZooKeeper leader election seen: the ensemble's zxid epoch rose above every earlier poll's."""
    p = zk_polls(consensus, period).filter(F.col("epoch").isNotNull())
    w = Window.partitionBy("cluster").orderBy("time").rowsBetween(Window.unboundedPreceding, -1)
    p = p.withColumn("epoch_before", F.max("epoch").over(w))
    return (p.filter(_in(period) & F.col("epoch_before").isNotNull() & (F.col("epoch") > F.col("epoch_before")))
            .select("cluster", "time", "epoch_before", F.col("epoch").alias("epoch_after"), "leader"))


def zk_quorum(consensus: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Per cluster: ZooKeeper polls, polls without quorum (serving <= servers / 2) and without a leader, minutes."""
    p = zk_polls(consensus, period).filter(_in(period))
    agg = p.groupBy("cluster").agg(
        F.count(F.lit(1)).alias("zk_polls"), F.max("servers").alias("zk_servers"),
        F.count_if(~F.col("quorum")).alias("no_quorum_polls"),
        F.count_if(F.col("quorum") & (F.col("leaders") == 0)).alias("no_leader_polls"),
        F.min("serving").alias("min_serving"))
    agg = agg.join(_interval(polls), "cluster", "left")
    return (agg.withColumn("minutes_without_quorum", _minutes("no_quorum_polls"))
            .withColumn("minutes_without_leader", _minutes("no_leader_polls")).drop("poll_interval_s"))


def zk_servers(consensus: DataFrame, period: Period) -> DataFrame:
    """Per cluster and ZooKeeper server: share of polls serving, polls as leader, worst lag and latency."""
    z = consensus.filter(_in(period) & (F.col("kind") == "zookeeper"))
    serving = F.coalesce(F.col("serving"), F.lit(False))
    return z.groupBy("cluster", "server").agg(
        F.count(F.lit(1)).alias("polls"),
        (F.count_if(serving) / F.count(F.lit(1))).cast("double").alias("serving_share"),
        F.count_if(serving & (F.col("mode") == "leader")).alias("leader_polls"),
        F.max("lag_behind_leader").alias("max_lag_behind_leader"), F.max("latency_max_ms").alias("latency_max_ms"),
        F.avg("latency_avg_ms").alias("latency_avg_ms"))


def zk_follower_behind(consensus: DataFrame, poll_idx: DataFrame, period: Period) -> DataFrame:
    """Episodes of a ZooKeeper follower behind the leader's zxid (``lag_behind_leader > 0``) in consecutive polls."""
    z = consensus.filter(_before_end(period) & (F.col("kind") == "zookeeper") & (F.col("lag_behind_leader") > 0))
    eps = _episodes(z.select("cluster", "server", "time", "lag_behind_leader"), ["cluster", "server"], poll_idx,
                    [F.max("lag_behind_leader").alias("max_lag")])
    return _overlapping(eps, period)


def zk_write_rate(consensus: DataFrame, period: Period) -> DataFrame:
    """Per cluster and zxid epoch: committed writes (zxid counter growth) and writes per second.

    The counter restarts at each epoch, so growth is measured inside one epoch, between the first and the
    last poll of that epoch within the period.
    """
    p = zk_polls(consensus, period).filter(_in(period) & F.col("zxid").isNotNull())
    agg = p.groupBy("cluster", "epoch").agg(
        F.min("time").alias("first_seen"), F.max("time").alias("last_seen"), F.count(F.lit(1)).alias("polls"),
        F.min("counter").alias("counter_first"), F.max("counter").alias("counter_last"))
    return (agg.withColumn("writes", F.col("counter_last") - F.col("counter_first"))
            .withColumn("seconds", (F.col("last_seen") - F.col("first_seen")).cast("double"))
            .withColumn("writes_per_s", F.when(F.col("seconds") > 0, F.col("writes") / F.col("seconds"))))


def zk_timeseries(consensus: DataFrame, period: Period, bucket_s: int = 900) -> DataFrame:
    p = zk_polls(consensus, period).filter(_in(period))
    p = p.withColumn("bucket", F.floor((F.col("time") - F.lit(period.start)) / bucket_s) * bucket_s
                     + F.lit(period.start))
    return p.groupBy("cluster", "bucket").agg(
        F.min("serving").alias("serving_min"), F.max("servers").alias("servers"), F.max("epoch").alias("epoch"),
        F.max("counter").alias("counter")).orderBy("cluster", "bucket")


def kraft_leader_changes(consensus: DataFrame, period: Period) -> DataFrame:
    """One row per KRaft leader change seen: the quorum's leader_epoch rose above every earlier poll's."""
    k = consensus.filter(_before_end(period) & (F.col("kind") == "kraft") & F.col("leader_epoch").isNotNull())
    per = k.groupBy("cluster", "time").agg(F.max("leader_epoch").alias("epoch"),
                                           F.max_by("leader_id", "leader_epoch").alias("leader_id"))
    w = Window.partitionBy("cluster").orderBy("time")
    per = (per.withColumn("epoch_before", F.max("epoch").over(w.rowsBetween(Window.unboundedPreceding, -1)))
           .withColumn("leader_before", F.lag("leader_id").over(w)))
    return (per.filter(_in(period) & F.col("epoch_before").isNotNull() & (F.col("epoch") > F.col("epoch_before")))
            .select("cluster", "time", "epoch_before", F.col("epoch").alias("epoch_after"), "leader_before",
                    F.col("leader_id").alias("leader_after")))


def kraft_voter_lag(consensus: DataFrame, polls: DataFrame, period: Period, exact: bool = True,
                    accuracy: int = DEFAULT_ACCURACY) -> DataFrame:
    """Per cluster and KRaft replica: lag (records behind the quorum high watermark) percentiles, polls without
    a leader seen by it."""
    k = consensus.filter(_in(period) & (F.col("kind") == "kraft"))
    agg = k.groupBy("cluster", "node_id").agg(
        F.max_by("mode", "time").alias("role"), F.count(F.lit(1)).alias("polls"),
        F.count_if(F.col("lag").isNull()).alias("unknown_lag_polls"),
        F.count_if(F.col("leader_id") < 0).alias("no_leader_polls"),
        *_pct_aggs("lag", "lag", exact, accuracy))
    return _pct_unpack(agg, "lag")


# ----------------------------------------------------------------------------------------------- headline

# (name, label, polarity: +1 higher is worse / -1 higher is better / 0 neutral, unit)
HEADLINE: tuple[tuple[str, str, int, str], ...] = (
    ("polls", "Polls", 0, ""),
    ("poll_interval_s", "Poll interval", 0, "s"),
    ("coverage", "Data coverage", -1, "share"),
    ("unreachable_minutes", "Cluster unreachable", 1, "min"),
    ("under_replicated_minutes", "Under-replicated", 1, "min"),
    ("under_min_isr_minutes", "Under min ISR (acks=all blocked)", 1, "min"),
    ("offline_minutes", "Offline partitions", 1, "min"),
    ("topics_under_min_isr", "Topics under min ISR", 1, ""),
    ("isr_shrinks", "ISR shrinks", 1, ""),
    ("isr_expands", "ISR expands", 0, ""),
    ("incidents_opened", "Incidents opened", 1, ""),
    ("critical_incidents", "Critical incidents opened", 1, ""),
    ("incidents_open_at_end", "Incidents open at week end", 1, ""),
    ("mttr_minutes", "Mean time to recover", 1, "min"),
    ("min_broker_availability", "Worst broker availability", -1, "share"),
    ("broker_down_minutes", "Broker down (sum over brokers)", 1, "min"),
    ("controller_changes", "Controller changes", 1, ""),
    ("lag_slo_share", "Consumer polls within lag SLO", -1, "share"),
    ("worst_lag_seconds_p99", "Worst group p99 lag", 1, "s"),
    ("worst_lag_messages_p99", "Worst group p99 lag (messages)", 1, "msgs"),
    ("groups_breaching_slo", "Group-topics ever over the SLO", 1, ""),
    ("warn_minutes", "Group-topic minutes in WARN", 1, "min"),
    ("err_minutes", "Group-topic minutes in ERR", 1, "min"),
    ("retention_loss_episodes", "Retention-loss episodes", 1, ""),
    ("transactions_seen", "Transactions seen", 0, ""),
    ("stuck_transactions", "Stuck transactions", 1, ""),
    ("hanging_transactions", "Hanging transactions", 1, ""),
    ("longest_open_txn_s", "Longest open transaction", 1, "s"),
    ("lso_gap_p99", "LSO gap p99", 1, "msgs"),
    ("epoch_bumps", "Producer epoch bumps", 1, ""),
    ("zk_elections", "ZooKeeper leader elections", 1, ""),
    ("zk_minutes_without_quorum", "ZooKeeper without quorum", 1, "min"),
    ("zk_follower_behind_episodes", "ZooKeeper follower-behind episodes (>= 2 polls)", 1, ""),
    ("zk_writes_per_s", "ZooKeeper writes per second", 0, "/s"),
    ("kraft_leader_changes", "KRaft leader changes", 1, ""),
    ("kraft_voter_lag_p99", "Worst KRaft voter p99 lag", 1, "records"),
)
HEADLINE_NAMES = tuple(h[0] for h in HEADLINE)


def _per_cluster(df: DataFrame, *aggs: Column) -> DataFrame:
    return df.groupBy("cluster").agg(*aggs)


def headline(t: dict[str, DataFrame]) -> DataFrame:
    """One row per polled cluster with every `HEADLINE` figure, from the frames `compute_all` builds.

    Families whose source has no row for the cluster stay null (no ZooKeeper -> ZooKeeper figures null);
    counts over event tables are 0 for a polled cluster.
    """
    polls = t["polls"]
    pieces: list[tuple[DataFrame, bool]] = [  # (frame, counts: fill 0 when missing for a polled cluster)
        (t["cluster_health"].select("cluster", "unreachable_minutes"), False),
        (t["cluster_replication"].select("cluster", "under_replicated_minutes", "under_min_isr_minutes",
                                         "offline_minutes", "topics_under_min_isr"), False),
        (_per_cluster(t["isr_by_broker"], F.sum("isr_shrinks").alias("isr_shrinks"),
                      F.sum("isr_expands").alias("isr_expands")), True),
        (_per_cluster(t["incidents"], F.count_if("opened_in_period").alias("incidents_opened"),
                      F.count_if(F.col("opened_in_period") & (F.col("severity") == "critical"))
                      .alias("critical_incidents"),
                      F.count_if(F.col("status") == "open").alias("incidents_open_at_end")), True),
        (_per_cluster(t["incidents"], (F.avg(F.when(F.col("resolved_in_period"), F.col("duration_s"))) / 60.0)
                      .alias("mttr_minutes")), False),
        (_per_cluster(t["broker_availability"], F.min("availability").alias("min_broker_availability"),
                      F.sum("down_minutes").alias("broker_down_minutes")), False),
        (_per_cluster(t["controller_changes"], F.count(F.lit(1)).alias("controller_changes")), True),
        (_per_cluster(t["consumer_lag"],
                      (F.sum("polls_within_slo") / F.sum("polls_with_lag_seconds")).alias("lag_slo_share"),
                      F.max("lag_seconds_p99").alias("worst_lag_seconds_p99"),
                      F.max("lag_p99").alias("worst_lag_messages_p99"),
                      F.count_if(F.col("polls_within_slo") < F.col("polls_with_lag_seconds"))
                      .alias("groups_breaching_slo"),
                      F.sum("warn_minutes").alias("warn_minutes"), F.sum("err_minutes").alias("err_minutes")), False),
        (_per_cluster(t["transactions"], F.count(F.lit(1)).alias("transactions_seen"),
                      F.count_if("stuck").alias("stuck_transactions")), True),
        (_per_cluster(t["transactions"], F.max("max_age_s").alias("longest_open_txn_s")), False),
        (_per_cluster(t["hanging_transactions"], F.countDistinct("topic", "partition", "producer_id")
                      .alias("hanging_transactions")), True),
        (t["lso_gap_cluster"].select("cluster", F.col("lso_gap_p99")), False),
        (_per_cluster(t["epoch_bumps"], F.sum("epoch_bumps").alias("epoch_bumps")), True),
        (_per_cluster(t["zk_write_rate"], (F.sum("writes") / F.sum("seconds")).alias("zk_writes_per_s")), False),
    ]
    out = polls.select("cluster", "polls", "poll_interval_s", "coverage")
    for frame, counts in pieces:
        out = out.join(frame, "cluster", "left")
        if counts:
            for c in frame.columns:
                if c != "cluster":
                    out = out.withColumn(c, F.when(F.col("polls") > 0, F.coalesce(F.col(c), F.lit(0))))
    # Retention-loss episodes are 0 only where the cluster has consumer groups at all.
    groups = _per_cluster(t["consumer_lag"], F.lit(True).alias("_gl"))
    out = out.join(groups, "cluster", "left").join(
        _per_cluster(t["retention_loss"], F.count(F.lit(1)).alias("retention_loss_episodes")), "cluster", "left")
    out = out.withColumn("retention_loss_episodes",
                         F.when(F.col("_gl"), F.coalesce("retention_loss_episodes", F.lit(0))))
    # ZooKeeper / KRaft counts are 0 only where the cluster has consensus rows at all.
    zk = t["zk_quorum"].select("cluster", F.col("minutes_without_quorum").alias("zk_minutes_without_quorum"),
                               F.lit(True).alias("_zk"))
    out = out.join(zk, "cluster", "left")
    for name, frame in (("zk_elections", _per_cluster(t["zk_elections"], F.count(F.lit(1)).alias("zk_elections"))),
                        ("zk_follower_behind_episodes", _per_cluster(
                            t["zk_follower_behind"].filter(F.col("polls") >= 2),
                            F.count(F.lit(1)).alias("zk_follower_behind_episodes")))):
        out = out.join(frame, "cluster", "left").withColumn(
            name, F.when(F.col("_zk"), F.coalesce(F.col(name), F.lit(0))))
    kr = _per_cluster(t["kraft_voter_lag"], F.max("lag_p99").alias("kraft_voter_lag_p99")).withColumn(
        "_kr", F.lit(True))
    out = out.join(kr, "cluster", "left").join(
        _per_cluster(t["kraft_leader_changes"], F.count(F.lit(1)).alias("kraft_leader_changes")), "cluster", "left")
    out = out.withColumn("kraft_leader_changes", F.when(F.col("_kr"), F.coalesce("kraft_leader_changes", F.lit(0))))
    return out.select("cluster", *[F.col(n).cast("double").alias(n) for n in HEADLINE_NAMES])


def week_over_week(current: DataFrame, previous: DataFrame) -> DataFrame:
    """Long format: one row per cluster and headline figure with this week, last week and the change.

    ``change`` = this - last; ``change_pct`` relative to last (null when last is 0 or null); ``worse`` is true
    when the change goes the wrong way for that figure (null when either side is missing or neutral).
    """
    def longer(df: DataFrame, value: str) -> DataFrame:
        return df.unpivot("cluster", list(HEADLINE_NAMES), "metric", value)

    cur = longer(current, "this_week")
    prev = longer(previous, "last_week")
    meta = current.sparkSession.createDataFrame(
        [(i, n, label, pol, unit) for i, (n, label, pol, unit) in enumerate(HEADLINE)],
        "ord int, metric string, label string, polarity int, unit string")
    out = cur.join(prev, ["cluster", "metric"], "left").join(F.broadcast(meta), "metric")
    change = F.col("this_week") - F.col("last_week")
    return (out.withColumn("change", change)
            .withColumn("change_pct", F.when(F.col("last_week") != 0, change / F.abs(F.col("last_week"))))
            .withColumn("worse", F.when((F.col("polarity") != 0) & change.isNotNull(),
                                        change * F.col("polarity") > 0))
            .orderBy("cluster", "ord")
            .select("cluster", "metric", "label", "unit", "polarity", "this_week", "last_week", "change",
                    "change_pct", "worse"))


# ----------------------------------------------------------------------------------------------- everything


@dataclass(frozen=True)
class Options:
    lag_slo_s: float = DEFAULT_LAG_SLO_S
    exact_percentiles: bool = True
    accuracy: int = DEFAULT_ACCURACY
    txn_grace_s: float = DEFAULT_TXN_GRACE_S
    poll_interval_s: float | None = None
    bucket_s: int | None = None  # chart time bucket; None: `nice_bucket` of the data's span


BUCKETS = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600)


def nice_bucket(span_s: float, poll_interval_s: float | None, points: int = 400) -> int:
    """The smallest round bucket >= span / points and >= the poll interval (charts of ~400 points)."""
    want = max(span_s / points, poll_interval_s or 0.0, 1.0)
    return next((b for b in BUCKETS if b >= want), BUCKETS[-1])


HEADLINE_INPUTS: frozenset[str] = frozenset({
    "polls", "cluster_health", "cluster_replication", "isr_by_broker", "incidents", "broker_availability",
    "controller_changes", "consumer_lag", "retention_loss", "transactions", "hanging_transactions",
    "lso_gap_cluster", "epoch_bumps", "zk_write_rate", "zk_quorum", "zk_elections", "zk_follower_behind",
    "kraft_voter_lag", "kraft_leader_changes"})
"""The tables `headline` reads (all the previous week needs)."""


def compute_tables(tables: dict[str, DataFrame], period: Period, opts: Options = Options(),
                   polls: DataFrame | None = None, only: frozenset[str] | None = None) -> dict[str, DataFrame]:
    """Every report table for `period` (lazy; nothing runs until the caller collects).

    `tables` maps history table names to DataFrames (``cluster``, ``brokers``, ``topic_health``,
    ``partition_changes``, ``group_lag``, ``transactions``, ``producers``, ``lso_gap``, ``consensus``,
    ``alert_events``). `polls` may be given precomputed (e.g. collected once and turned back into a small
    DataFrame, so it is not recomputed for every table); `only` restricts the result to those names.
    """
    ex, acc = opts.exact_percentiles, opts.accuracy
    if polls is None:
        polls = poll_intervals(tables["cluster"], period, opts.poll_interval_s)
    idx = poll_index(tables["cluster"], polls, period)
    builders = {
        "polls": lambda: polls,
        "cluster_health": lambda: cluster_health(tables["cluster"], polls, period),
        "cluster_replication": lambda: cluster_replication(tables["topic_health"], polls, period),
        "topic_replication": lambda: topic_replication(tables["topic_health"], polls, period),
        "isr_by_broker": lambda: isr_changes_by_broker(tables["partition_changes"], period),
        "isr_by_topic": lambda: isr_changes_by_topic(tables["partition_changes"], period),
        "incidents": lambda: incidents(tables["alert_events"], polls, period),
        "incident_summary": lambda: incident_summary(incidents(tables["alert_events"], polls, period)),
        "broker_availability": lambda: broker_availability(tables["brokers"], polls, period),
        "controller_changes": lambda: controller_changes(tables["cluster"], period),
        "consumer_lag": lambda: consumer_lag(tables["group_lag"], polls, period, opts.lag_slo_s, ex, acc),
        "retention_loss": lambda: retention_loss_episodes(tables["group_lag"], idx, period),
        "transactions": lambda: transaction_detail(tables["transactions"], period, opts.txn_grace_s),
        "epoch_bumps": lambda: producer_epoch_bumps(tables["transactions"], period),
        "transactions_by_id": lambda: transactions_by_id(
            transaction_detail(tables["transactions"], period, opts.txn_grace_s),
            producer_epoch_bumps(tables["transactions"], period)),
        "hanging_transactions": lambda: hanging_transactions(tables["producers"], idx, period),
        "lso_gap": lambda: lso_gaps(tables["lso_gap"], period, ex, acc),
        "lso_gap_cluster": lambda: lso_gaps(tables["lso_gap"], period, ex, acc, by=("cluster",)),
        "zk_elections": lambda: zk_elections(tables["consensus"], period),
        "zk_quorum": lambda: zk_quorum(tables["consensus"], polls, period),
        "zk_servers": lambda: zk_servers(tables["consensus"], period),
        "zk_follower_behind": lambda: zk_follower_behind(tables["consensus"], idx, period),
        "zk_write_rate": lambda: zk_write_rate(tables["consensus"], period),
        "kraft_leader_changes": lambda: kraft_leader_changes(tables["consensus"], period),
        "kraft_voter_lag": lambda: kraft_voter_lag(tables["consensus"], polls, period, ex, acc),
    }
    return {name: build() for name, build in builders.items() if only is None or name in only}


def compute_all(tables: dict[str, DataFrame], period: Period, opts: Options = Options()) -> dict[str, DataFrame]:
    """`compute_tables` plus ``headline`` (all lazy)."""
    out = compute_tables(tables, period, opts)
    out["headline"] = headline(out)
    return out


def chart_series(tables: dict[str, DataFrame], period: Period, worst_groups: DataFrame,
                 opts: Options = Options()) -> dict[str, DataFrame]:
    """Bucketed time series for the report's charts (small: one row per cluster and bucket)."""
    b = opts.bucket_s or 900
    return {
        "cluster_timeseries": cluster_timeseries(tables["cluster"], period, b),
        "lag_timeseries": lag_timeseries(tables["group_lag"], worst_groups, period, b),
        "zk_timeseries": zk_timeseries(tables["consensus"], period, b),
    }

