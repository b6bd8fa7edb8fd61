"""Consumers (``group_lag``): lag percentiles and SLO share per group and topic, retention-loss episodes, and the
lag chart's time series."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from collectors.model.vocabulary import ERR, GROUP_STATES, WARN
from spark_analytics.aggregations import histogram as hist
from spark_analytics.aggregations.common import (
    PCT_NAMES,
    PCTS,
    before_end,
    between,
    bucket,
    day_of,
    episodes,
    in_days,
    in_period,
    interval,
    minutes,
    percentiles,
)
from spark_analytics.aggregations.defaults import DEFAULT_ACCURACY, DEFAULT_LAG_SLO_S
from spark_analytics.aggregations.thresholds import per_cluster
from spark_analytics.period import Period


def consumer_lag(group_lag: DataFrame, polls: DataFrame, period: Period, slo_s: float | DataFrame | None = None,
                 exact: bool = True, accuracy: int = DEFAULT_ACCURACY) -> DataFrame:
    """Per cluster, group and topic: lag percentiles in messages and seconds, SLO share, WARN/ERR minutes.

    Each poll's ``lag_max`` / ``lag_seconds_max`` (the worst partition of the topic) is one observation.
    ``slo_share`` = polls with ``lag_seconds_max <= slo_s`` / polls with a known ``lag_seconds_max`` (null
    when never known). `slo_s`: one number, or the `thresholds` frame (each cluster's ``lag_slo_s``: what its
    collector recorded), or None for the collector's default; the SLO applied is the ``slo_s`` column.
    ``warn_minutes`` / ``err_minutes`` count polls with that group status. Rows without a topic (a group that
    has committed nothing) are left out.
    """
    g, slo = per_cluster(group_lag.filter(in_period(period) & F.col("topic").isNotNull()), slo_s, "lag_slo_s",
                         DEFAULT_LAG_SLO_S)
    g = g.withColumn("slo_s", slo)
    agg = percentiles(
        g.groupBy("cluster", "group_id", "topic"), {"lag_max": "lag", "lag_seconds_max": "lag_seconds"}, exact,
        accuracy, F.count(F.lit(1)).alias("polls"), F.count("lag_seconds_max").alias("polls_with_lag_seconds"),
        F.count_if(F.col("lag_seconds_max") <= F.col("slo_s")).alias("polls_within_slo"),
        F.max("slo_s").alias("slo_s"),
        F.count_if(F.col("status") == WARN).alias("warn_polls"),
        F.count_if(F.col("status") == ERR).alias("err_polls"),
        F.count_if(F.col("below_log_start") > 0).alias("below_log_start_polls"),
        F.max_by("state", "time").alias("last_state"), F.max_by("members", "time").alias("last_members"))
    agg = agg.join(F.broadcast(interval(polls)), "cluster", "left")
    return (agg.withColumn("slo_share", F.when(F.col("polls_with_lag_seconds") > 0,
                                                (F.col("polls_within_slo") / F.col("polls_with_lag_seconds"))
                                                .cast("double")))
            .withColumn("warn_minutes", minutes("warn_polls")).withColumn("err_minutes", minutes("err_polls"))
            .drop("poll_interval_s"))


def retention_loss_episodes(group_lag: DataFrame, poll_idx: DataFrame, period: Period) -> DataFrame:
    """Episodes of consecutive polls in which a group had committed offsets below the log start (data lost)."""
    flagged = group_lag.filter(before_end(period) & F.col("topic").isNotNull() & (F.col("below_log_start") > 0))
    return episodes(flagged.select("cluster", "group_id", "topic", "time", "below_log_start"),
                    ["cluster", "group_id", "topic"], poll_idx, period,
                    [F.max("below_log_start").alias("max_partitions")])


def lag_timeseries(group_lag: DataFrame, keys: DataFrame, period: Period, bucket_s: int = 900) -> DataFrame:
    """Worst ``lag_seconds_max`` / ``lag_max`` per time bucket for the (cluster, group_id, topic) in `keys`."""
    g = group_lag.filter(in_period(period)).join(F.broadcast(keys.select("cluster", "group_id", "topic")),
                                                 ["cluster", "group_id", "topic"])
    g = g.withColumn("bucket", bucket(period, bucket_s))
    return g.groupBy("cluster", "group_id", "topic", "bucket").agg(
        F.max("lag_seconds_max").alias("lag_seconds_max"), F.max("lag_max").alias("lag_max"))


# ----------------------------------------------------------------------------------------------- day partials
# The consumer figures from compact per-day partials instead of the polls: `lag_cells` turns the polls, in one pass,
# into one row per group-topic, day and (lag bucket, lag-seconds bucket) pair — everything `consumer_lag` needs,
# mergeable —; `days_of_cells` and `histograms_of_cells` (the two stored roll-up tables) are small aggregates of them;
# and `consumer_lag_from_days` merges any set of days into the same table `consumer_lag` makes, with the lag
# percentiles from the fixed log-scale histograms (`histogram`: within 1 % of the exact ones). The daily roll-up
# job stores these partials; the weekly report computes them from the polls for days without a roll-up.

KEYS = ("cluster", "group_id", "topic")
STATES: tuple[str, ...] = (*GROUP_STATES, "Assigning", "Reconciling", "Unknown")
"""Group states coded as integers in the partials (1-based; anything else reads back as ``Unknown``): a string
in an aggregation buffer would push Spark off its fast fixed-width hash aggregate."""

LAG_DAYS_COLUMNS = (*KEYS, "day", "polls", "polls_with_lag_seconds", "polls_within_slo", "slo_s", "warn_polls",
                    "err_polls", "below_log_start_polls", "lag_max", "lag_seconds_max", "last_time",
                    "last_state_code", "last_members")
"""A `days_of_cells` partial (the roll-up table ``group_lag_days``): one row per group-topic and epoch ``day``."""
LAG_HIST_COLUMNS = (*KEYS, "day", "metric", "bucket", "polls")
"""A `histograms_of_cells` partial (the roll-up table ``group_lag_hist``): polls per group-topic, day, metric (0 =
``lag_max``, 1 = ``lag_seconds_max``) and `histogram` bucket."""
HIST_METRICS = {"lag_max": "lag_bucket", "lag_seconds_max": "lag_seconds_bucket"}
"""The histogram's metrics in ``metric`` order (0, 1), each with its bucket column in `lag_cells`."""

CONSUMER_LAG_COLUMNS = (*KEYS, "polls", "polls_with_lag_seconds", "polls_within_slo", "slo_s", "warn_polls",
                        "err_polls", "below_log_start_polls", "last_state", "last_members", "lag_p50", "lag_p95",
                        "lag_p99", "lag_max", "lag_seconds_p50", "lag_seconds_p95", "lag_seconds_p99",
                        "lag_seconds_max", "slo_share", "warn_minutes", "err_minutes")


def _between(group_lag: DataFrame, start: float, end: float) -> DataFrame:
    return group_lag.filter(between(start, end) & F.col("topic").isNotNull())


CELL_COLUMNS = (*KEYS, "day", "lag_bucket", "lag_seconds_bucket", "polls", "polls_within_slo", "slo_s",
                "warn_polls", "err_polls", "below_log_start_polls", "lag_max", "lag_seconds_max", "last_time",
                "last_state_code", "last_members")
"""A `lag_cells` row: one per group-topic, day and pair of `histogram` buckets (``lag_max``'s, ``lag_seconds_max``'s;
null where the value is null)."""


def lag_cells(group_lag: DataFrame, start: float, end: float, slo_s: float | DataFrame | None = None,
              day: int | None = None) -> DataFrame:
    """**The one pass over the polls** that every consumer partial comes from: per group-topic, epoch day and pair of
    histogram buckets (lag, lag seconds), the counts, maxima and last values of the day partials. Every column merges
    (sums, maxima, the value at the latest ``last_time``), so `days_of_cells` and `histograms_of_cells` are small
    aggregates over these rows instead of two more passes over the polls (docs/weekly-report.md, "Where the time
    goes", step 3). On the bench week a group-topic has ~150 bucket pairs a day against 2,880 polls.

    ``polls_within_slo`` is counted against `slo_s` (a number, None for the default, a frame of ``cluster,
    lag_slo_s``, with a ``day`` column per cluster and epoch day). `day`, when given, is the day key of every row:
    one cell set for the whole range (a report from the history, which never needs the days apart)."""
    g = _between(group_lag, start, end).withColumn("day", day_of() if day is None else F.lit(day))
    if isinstance(slo_s, DataFrame) and "day" in slo_s.columns:  # per cluster and day
        g = g.join(
            F.broadcast(slo_s.select("cluster", "day", F.col("lag_slo_s").alias("_slo"))), ["cluster", "day"], "left")
        slo = F.coalesce(F.col("_slo"), F.lit(DEFAULT_LAG_SLO_S))
    else:
        g, slo = per_cluster(g, slo_s, "lag_slo_s", DEFAULT_LAG_SLO_S)
    code = F.lit(0)
    for i, s in reversed(list(enumerate(STATES, 1))):
        code = F.when(F.col("state") == s, F.lit(i)).otherwise(code)
    return g.groupBy(*KEYS, "day", *[hist.bucket(m).alias(b) for m, b in HIST_METRICS.items()]).agg(
        F.count(F.lit(1)).alias("polls"),
        F.count_if(F.col("lag_seconds_max") <= slo).alias("polls_within_slo"),
        F.max(slo).alias("slo_s"),
        F.count_if(F.col("status") == WARN).alias("warn_polls"),
        F.count_if(F.col("status") == ERR).alias("err_polls"),
        F.count_if(F.col("below_log_start") > 0).alias("below_log_start_polls"),
        F.max(F.col("lag_max").cast("double")).alias("lag_max"),
        F.max(F.col("lag_seconds_max").cast("double")).alias("lag_seconds_max"),
        F.max("time").alias("last_time"), F.max_by(code, "time").alias("last_state_code"),
        F.max_by("members", "time").alias("last_members")).select(*CELL_COLUMNS)


def days_of_cells(cells: DataFrame) -> DataFrame:
    """Per group-topic and day: the counts and maxima `consumer_lag` sums up (``LAG_DAYS_COLUMNS``), from `lag_cells`
    rows. ``polls_within_slo`` was counted against the SLO kept in ``slo_s``, so a merge can tell whether it still
    applies; the group state is kept as a code (`STATES`)."""
    return cells.groupBy(*KEYS, "day").agg(
        F.sum("polls").alias("polls"),
        F.sum(F.when(F.col("lag_seconds_bucket").isNotNull(), F.col("polls")).otherwise(F.lit(0)))
        .alias("polls_with_lag_seconds"),
        F.sum("polls_within_slo").alias("polls_within_slo"), F.max("slo_s").alias("slo_s"),
        F.sum("warn_polls").alias("warn_polls"), F.sum("err_polls").alias("err_polls"),
        F.sum("below_log_start_polls").alias("below_log_start_polls"),
        F.max("lag_max").alias("lag_max"), F.max("lag_seconds_max").alias("lag_seconds_max"),
        F.max("last_time").alias("last_time"), F.max_by("last_state_code", "last_time").alias("last_state_code"),
        F.max_by("last_members", "last_time").alias("last_members")).select(*LAG_DAYS_COLUMNS)


def histograms_of_cells(cells: DataFrame) -> DataFrame:
    """Per group-topic, day, metric and `histogram` bucket: the polls (``LAG_HIST_COLUMNS``; null values left out),
    from `lag_cells` rows: each metric's buckets summed over the other's."""
    parts = [cells.filter(F.col(b).isNotNull()).groupBy(*KEYS, "day", F.col(b).alias("bucket"))
             .agg(F.sum("polls").alias("polls")).withColumn("metric", F.lit(i))
             for i, b in enumerate(HIST_METRICS.values())]
    return parts[0].unionByName(parts[1]).select(*LAG_HIST_COLUMNS)


def consumer_lag_from_days(days: DataFrame, hists: DataFrame, polls: DataFrame, period: Period,
                           slo_s: float | DataFrame | None = None) -> DataFrame:
    """`consumer_lag` from `days_of_cells` and `histograms_of_cells` partials (the days inside `period`): the same
    columns and figures, the lag percentiles from the merged histograms (within `histogram.ALPHA` of the exact ones).

    ``polls_within_slo`` is exact where a day's partial was counted against the SLO applied now (the normal case:
    the same recorded threshold); where not (the threshold changed, or ``--lag-slo-seconds``), that day's count
    comes from its histogram: a poll is within the SLO when its bucket's representative is.
    """
    d, week_h = in_days(days, period), in_days(hists, period)
    d, slo = per_cluster(d, slo_s, "lag_slo_s", DEFAULT_LAG_SLO_S)
    d = d.withColumn("_slo", slo)
    h, hslo = per_cluster(week_h, slo_s, "lag_slo_s", DEFAULT_LAG_SLO_S)
    redo = d.filter(F.col("slo_s") != F.col("_slo")).select(*KEYS, "day")  # days counted against another SLO
    estimated = (h.filter((F.col("metric") == 1) & (hist.rep("bucket") <= hslo)).join(redo, [*KEYS, "day"])
                 .groupBy(*KEYS, "day").agg(F.sum("polls").alias("_est")))
    d = d.join(estimated, [*KEYS, "day"], "left")
    within = F.when(F.col("slo_s") == F.col("_slo"), F.col("polls_within_slo")).otherwise(
        F.coalesce(F.col("_est"), F.lit(0)))
    stats = d.groupBy(*KEYS).agg(
        F.sum("polls").alias("polls"), F.sum("polls_with_lag_seconds").alias("polls_with_lag_seconds"),
        F.sum(within).cast("long").alias("polls_within_slo"), F.max("_slo").alias("slo_s"),
        F.sum("warn_polls").alias("warn_polls"), F.sum("err_polls").alias("err_polls"),
        F.sum("below_log_start_polls").alias("below_log_start_polls"),
        F.max_by("last_state_code", "last_time").alias("_state"),
        F.max_by("last_members", "last_time").alias("last_members"),
        F.max("lag_max").alias("lag_max"), F.max("lag_seconds_max").alias("lag_seconds_max"))
    state = F.lit(None).cast("string")
    for i, s in enumerate(STATES, 1):
        state = F.when(F.col("_state") == i, F.lit(s)).otherwise(state)
    stats = stats.withColumn("last_state", F.when(F.col("_state").isNotNull(), F.coalesce(state, F.lit("Unknown"))))
    # both metrics' percentiles in one aggregate over the days' buckets as stored: the percentile sums the counts
    # of equal values itself, so merging the days' buckets first (another hash aggregate over ~1 M rows on the
    # bench week) is not needed; the other metric's rows are null to it
    pct = week_h.groupBy(*KEYS).agg(*[
        hist.percentiles(F.when(F.col("metric") == i, F.col("bucket")), "polls", PCTS).alias(f"_p{i}")
        for i in range(len(HIST_METRICS))])
    pct = pct.select(*KEYS, *[F.round(F.col(f"_p{i}").getItem(j), 6).alias(f"{metric.removesuffix('_max')}_{name}")
                              for i, metric in enumerate(HIST_METRICS) for j, name in enumerate(PCT_NAMES)])
    stats = stats.join(pct, list(KEYS), "left")
    out = stats.join(F.broadcast(interval(polls)), "cluster", "left")
    out = (out.withColumn("slo_share", F.when(F.col("polls_with_lag_seconds") > 0, (
               F.col("polls_within_slo") / F.col("polls_with_lag_seconds")).cast("double")))
           .withColumn("warn_minutes", minutes("warn_polls")).withColumn("err_minutes", minutes("err_polls")))
    return out.select(*CONSUMER_LAG_COLUMNS)


def retention_flags(group_lag: DataFrame, start: float, end: float) -> DataFrame:
    """The polls in which a group had committed offsets below the log start: all `retention_loss_episodes` reads
    (the roll-up table ``group_lag_flags``; rare rows)."""
    return _between(group_lag, start, end).filter(F.col("below_log_start") > 0).select(
        *KEYS, "time", "below_log_start")


SERIES_BUCKET_S = 900
"""The time bucket of the lag chart's roll-up (the chart of a week uses 30 min; any multiple of this merges)."""


def lag_series_days(group_lag: DataFrame, start: float, end: float) -> DataFrame:
    """Worst lag per group-topic and 15 minutes (the roll-up table ``group_lag_series``), for the lag chart."""
    slot = (F.floor(F.col("time") / SERIES_BUCKET_S) * SERIES_BUCKET_S).cast("double").alias("time")
    return _between(group_lag, start, end).groupBy(*KEYS, slot).agg(
        F.max(F.col("lag_seconds_max").cast("double")).alias("lag_seconds_max"),
        F.max(F.col("lag_max").cast("long")).alias("lag_max"))


def lag_timeseries_from_days(series: DataFrame, keys: DataFrame, period: Period, bucket_s: int = 1800) -> DataFrame:
    """`lag_timeseries` from `lag_series_days` rows: the chart bucket is rounded up to a multiple of 15 minutes."""
    b = max(SERIES_BUCKET_S, -(-bucket_s // SERIES_BUCKET_S) * SERIES_BUCKET_S)
    return lag_timeseries(series, keys, period, b)
