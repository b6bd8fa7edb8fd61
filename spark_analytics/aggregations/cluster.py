"""The cluster as a whole (``cluster`` and ``brokers`` tables): polls and the poll interval, reachability,
broker availability, controller changes, and the overview chart's time series."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_analytics.aggregations.common import before_end, bucket, in_period, interval, minutes
from spark_analytics.period import Period


def poll_intervals(cluster: DataFrame, period: Period, override_s: float | None = None) -> DataFrame:
    """Per cluster: polls, first/last poll, ``poll_interval_s`` (median gap; `override_s` wins), coverage.

    ``coverage`` = polls x interval / period length (capped at 1): the share of the week the data speaks
    for. ``days_with_polls`` lists the UTC day indexes (0 = Monday) that have at least one poll.
    """
    times = cluster.filter(in_period(period)).select("cluster", "time").distinct()
    w = Window.partitionBy("cluster").orderBy("time")
    gaps = times.withColumn("_gap", F.col("time") - F.lag("time").over(w)).withColumn(
        "_day", F.floor((F.col("time") - F.lit(period.start)) / 86400).cast("int"))
    agg = gaps.groupBy("cluster").agg(
        F.count(F.lit(1)).alias("polls"), F.min("time").alias("first_poll"), F.max("time").alias("last_poll"),
        F.percentile(F.col("_gap"), 0.5).alias("median_gap_s"),
        F.array_sort(F.collect_set("_day")).alias("days_with_polls"))
    poll_interval = F.lit(float(override_s)) if override_s else F.col("median_gap_s")
    return (agg.withColumn("poll_interval_s", poll_interval.cast("double"))
            .withColumn("observed_minutes", minutes("polls"))
            .withColumn("coverage", F.least(F.lit(1.0), F.col("polls") * F.col("poll_interval_s")
                                            / F.lit(period.seconds)))
            .select("cluster", "polls", "first_poll", "last_poll", "median_gap_s", "poll_interval_s",
                    "observed_minutes", "coverage", "days_with_polls"))


def cluster_health(cluster: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Per cluster: polls unreachable, with stale sections, and reachable without a controller (and minutes)."""
    c = cluster.filter(in_period(period))
    reachable = F.coalesce(F.col("reachable"), F.lit(True))
    agg = c.groupBy("cluster").agg(
        F.count_if(~reachable).alias("unreachable_polls"),
        F.count_if(F.coalesce(F.col("stale"), F.lit(False)) & reachable).alias("stale_polls"),
        F.count_if(reachable & F.col("controller_id").isNull()).alias("no_controller_polls"),
        F.max("brokers").alias("brokers"), F.max("topics").alias("topics"), F.max("partitions").alias("partitions"),
        F.max("groups").alias("groups"), F.max_by("mode", "time").alias("mode"))
    agg = agg.join(interval(polls), "cluster", "left")
    for name in ("unreachable", "stale", "no_controller"):
        agg = agg.withColumn(f"{name}_minutes", minutes(f"{name}_polls"))
    return agg.drop("poll_interval_s")


def cluster_timeseries(cluster: DataFrame, period: Period, bucket_s: int = 900) -> DataFrame:
    """Per cluster and time bucket: worst (max) partition counts and open alerts, for the overview chart."""
    c = cluster.filter(in_period(period)).withColumn("bucket", bucket(period, bucket_s))
    return c.groupBy("cluster", "bucket").agg(
        F.max("under_replicated").alias("under_replicated"), F.max("under_min_isr").alias("under_min_isr"),
        F.max("offline").alias("offline"), F.max("alerts_open").alias("alerts_open"),
        F.max("alerts_critical").alias("alerts_critical"), F.min("brokers").alias("brokers_min"),
        F.count_if(~F.coalesce(F.col("reachable"), F.lit(True))).alias("unreachable_polls"),
    ).orderBy("cluster", "bucket")


def broker_availability(brokers: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Per cluster and broker: share of the cluster's broker polls in which the broker was ``alive``.

    The denominator is the number of polls that reported any broker for the cluster, so a broker missing
    from a poll counts as unavailable for it; ``down_minutes`` = polls not alive x poll interval.
    ``unreachable_polls`` counts the polls in which the broker was registered (alive) and did not answer:
    the zombie broker, which on-call cannot see from availability. A broker that is down is also written
    with ``reachable`` false; those polls are in ``down_minutes`` already, and counted there only.
    """
    b = brokers.filter(in_period(period))
    total = b.groupBy("cluster").agg(F.countDistinct("time").alias("broker_polls"))
    per = b.groupBy("cluster", "broker_id").agg(
        F.count_if(F.coalesce(F.col("alive"), F.lit(False))).alias("alive_polls"),
        F.count_if(F.coalesce(F.col("alive"), F.lit(False)) & (F.col("reachable") == F.lit(False)))
        .alias("unreachable_polls"),
        F.max_by("host", F.when(F.col("host").isNotNull(), F.col("time"))).alias("host"),
        F.max_by("rack", F.when(F.col("rack").isNotNull(), F.col("time"))).alias("rack"),
        F.count_if(F.coalesce(F.col("is_controller"), F.lit(False))).alias("controller_polls"))
    out = per.join(total, "cluster").join(F.broadcast(interval(polls)), "cluster", "left")
    return (out.withColumn("availability", (F.col("alive_polls") / F.col("broker_polls")).cast("double"))
            .withColumn("_down", F.col("broker_polls") - F.col("alive_polls"))
            .withColumn("down_minutes", minutes("_down"))
            .drop("_down", "poll_interval_s"))


def controller_changes(cluster: DataFrame, period: Period) -> DataFrame:
    """One row per change of ``controller_id`` between consecutive polls that reported one (nulls skipped)."""
    c = cluster.filter(before_end(period) & F.col("controller_id").isNotNull())
    w = Window.partitionBy("cluster").orderBy("time")
    c = c.withColumn("controller_before", F.lag("controller_id").over(w))
    return (c.filter(in_period(period) & F.col("controller_before").isNotNull()
                     & (F.col("controller_before") != F.col("controller_id")))
            .select("cluster", "time", "controller_before", F.col("controller_id").alias("controller_after")))
