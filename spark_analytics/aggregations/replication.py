"""Replication (``topic_health``, ``partition_changes``): minutes under-replicated / under min ISR / offline per
topic and cluster, ISR shrinks and expands per broker and topic."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_analytics.aggregations.common import between, day_of, in_days, in_period, interval, minutes
from spark_analytics.period import Period


def topic_replication(topic_health: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Per cluster and topic: minutes with at least one partition under-replicated / under min ISR / offline.

    Also ``*_partition_minutes`` (partitions x minutes: two partitions for 5 minutes = 10) and the worst
    number of partitions at once.
    """
    th = topic_health.filter(in_period(period))
    aggs = [F.count(F.lit(1)).alias("polls"), F.max("internal").alias("internal"),
            F.max("partitions").alias("partitions"), F.max("replication_factor").alias("replication_factor"),
            F.max_by("min_insync_replicas", "time").alias("min_insync_replicas")]
    for name in ("under_replicated", "under_min_isr", "offline"):
        aggs += [F.count_if(F.col(name) > 0).alias(f"{name}_polls"),
                 F.sum(F.coalesce(F.col(name), F.lit(0))).alias(f"{name}_partition_polls"),
                 F.max(F.col(name)).alias(f"{name}_max_partitions")]
    out = th.groupBy("cluster", "topic").agg(*aggs).join(F.broadcast(interval(polls)), "cluster", "left")
    for name in ("under_replicated", "under_min_isr", "offline"):
        out = (out.withColumn(f"{name}_minutes", minutes(f"{name}_polls"))
               .withColumn(f"{name}_partition_minutes", minutes(f"{name}_partition_polls")))
    return out.drop("poll_interval_s")


def cluster_replication(topic_health: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Per cluster: minutes in which any topic had a partition under-replicated / under min ISR / offline."""
    th = topic_health.filter(in_period(period))
    per_poll = th.groupBy("cluster", "time").agg(
        *[F.sum(F.coalesce(F.col(n), F.lit(0))).alias(n) for n in ("under_replicated", "under_min_isr", "offline")])
    agg = per_poll.groupBy("cluster").agg(
        *[F.count_if(F.col(n) > 0).alias(f"{n}_polls") for n in ("under_replicated", "under_min_isr", "offline")])
    agg = agg.join(interval(polls), "cluster", "left")
    for n in ("under_replicated", "under_min_isr", "offline"):
        agg = agg.withColumn(f"{n}_minutes", minutes(f"{n}_polls"))
    topics = th.groupBy("cluster").agg(
        F.countDistinct(F.when(F.col("under_min_isr") > 0, F.col("topic"))).alias("topics_under_min_isr"),
        F.countDistinct(F.when(F.col("offline") > 0, F.col("topic"))).alias("topics_offline"))
    return agg.join(topics, "cluster", "left").drop("poll_interval_s")


# ----------------------------------------------------------------------------------------------- day partials
# `topic_replication` and `cluster_replication` from compact partials (the daily roll-up's ``topic_health_days``
# and ``topic_health_polls``): counts per topic and day, and the problem sums per poll — exact, no estimate.

PROBLEMS = ("under_replicated", "under_min_isr", "offline")
TOPIC_DAYS_COLUMNS = ("cluster", "topic", "day", "polls", "internal", "partitions", "replication_factor",
                      "min_insync_replicas", "last_time",
                      *[f"{n}_{x}" for n in PROBLEMS for x in ("polls", "partition_polls", "max_partitions")])


def topic_days(topic_health: DataFrame, start: float, end: float) -> DataFrame:
    """Per cluster, topic and epoch day of ``[start, end)``: what `topic_replication` sums up."""
    th = topic_health.filter(between(start, end))
    aggs = [F.count(F.lit(1)).alias("polls"), F.max(F.col("internal").cast("int")).alias("internal"),
            F.max("partitions").alias("partitions"), F.max("replication_factor").alias("replication_factor"),
            F.max_by("min_insync_replicas", "time").alias("min_insync_replicas"), F.max("time").alias("last_time")]
    for name in PROBLEMS:
        aggs += [F.count_if(F.col(name) > 0).alias(f"{name}_polls"),
                 F.sum(F.coalesce(F.col(name), F.lit(0))).alias(f"{name}_partition_polls"),
                 F.max(F.col(name)).alias(f"{name}_max_partitions")]
    return th.groupBy("cluster", "topic", day_of().alias("day")).agg(*aggs).select(*TOPIC_DAYS_COLUMNS)


def replication_polls(topic_health: DataFrame, start: float, end: float) -> DataFrame:
    """Per cluster and poll of ``[start, end)``: partitions under-replicated / under min ISR / offline in all
    topics (what `cluster_replication` counts polls of)."""
    return topic_health.filter(between(start, end)).groupBy("cluster", "time").agg(
        *[F.sum(F.coalesce(F.col(n), F.lit(0))).alias(n) for n in PROBLEMS])


def topic_replication_from_days(days: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """`topic_replication` from `topic_days` partials (same columns, same figures)."""
    d = in_days(days, period)
    aggs = [F.sum("polls").alias("polls"), (F.max("internal") > 0).alias("internal"),
            F.max("partitions").alias("partitions"), F.max("replication_factor").alias("replication_factor"),
            F.max_by("min_insync_replicas", "last_time").alias("min_insync_replicas")]
    for name in PROBLEMS:
        aggs += [F.sum(f"{name}_polls").alias(f"{name}_polls"),
                 F.sum(f"{name}_partition_polls").alias(f"{name}_partition_polls"),
                 F.max(f"{name}_max_partitions").alias(f"{name}_max_partitions")]
    out = d.groupBy("cluster", "topic").agg(*aggs).join(F.broadcast(interval(polls)), "cluster", "left")
    for name in PROBLEMS:
        out = (out.withColumn(f"{name}_minutes", minutes(f"{name}_polls"))
               .withColumn(f"{name}_partition_minutes", minutes(f"{name}_partition_polls")))
    return out.drop("poll_interval_s")


def cluster_replication_from_days(days: DataFrame, per_poll: DataFrame, polls: DataFrame,
                                  period: Period) -> DataFrame:
    """`cluster_replication` from `topic_days` and `replication_polls` partials (same columns, same figures)."""
    agg = per_poll.filter(in_period(period)).groupBy("cluster").agg(
        *[F.count_if(F.col(n) > 0).alias(f"{n}_polls") for n in PROBLEMS])
    agg = agg.join(interval(polls), "cluster", "left")
    for n in PROBLEMS:
        agg = agg.withColumn(f"{n}_minutes", minutes(f"{n}_polls"))
    topics = in_days(days, period).groupBy("cluster").agg(
        F.countDistinct(F.when(F.col("under_min_isr_polls") > 0, F.col("topic"))).alias("topics_under_min_isr"),
        F.countDistinct(F.when(F.col("offline_polls") > 0, F.col("topic"))).alias("topics_offline"))
    return agg.join(topics, "cluster", "left").drop("poll_interval_s")


def _isr_moves(partition_changes: DataFrame, period: Period) -> DataFrame:
    empty = F.array().cast("array<int>")
    before = F.coalesce(F.col("isr_before"), empty)
    after = F.coalesce(F.col("isr_after"), empty)
    return partition_changes.filter(in_period(period)).select(
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
