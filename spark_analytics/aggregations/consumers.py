"""Consumers (``group_lag``): lag percentiles and SLO share per group and topic, retention-loss episodes, and the
lag chart's time series."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from collectors.model.vocabulary import ERR, WARN
from spark_analytics.aggregations.common import before_end, bucket, episodes, in_period, interval, minutes, percentiles
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
