"""Consensus (``consensus``): ZooKeeper elections, quorum, servers, followers behind and write rate; KRaft leader
changes and voter lag."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_analytics.aggregations.common import before_end, bucket, episodes, in_period, interval, minutes, percentiles
from spark_analytics.aggregations.defaults import DEFAULT_ACCURACY
from spark_analytics.period import Period


def zk_polls(consensus: DataFrame, period: Period) -> DataFrame:
    """Per cluster and ZooKeeper poll: servers, serving, the highest zxid among serving servers, the leader.

    The highest zxid stands for the ensemble: right after an election followers report zxid 0 or a zxid of
    the previous epoch, so any single server (or the first row) can be behind; the maximum cannot.
    """
    z = consensus.filter(before_end(period) & (F.col("kind") == "zookeeper"))
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
    return (p.filter(in_period(period) & F.col("epoch_before").isNotNull() & (F.col("epoch") > F.col("epoch_before")))
            .select("cluster", "time", "epoch_before", F.col("epoch").alias("epoch_after"), "leader"))


def zk_quorum(consensus: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Per cluster: ZooKeeper polls, polls without quorum (serving <= servers / 2) and without a leader, minutes."""
    p = zk_polls(consensus, period).filter(in_period(period))
    agg = p.groupBy("cluster").agg(
        F.count(F.lit(1)).alias("zk_polls"), F.max("servers").alias("zk_servers"),
        F.count_if(~F.col("quorum")).alias("no_quorum_polls"),
        F.count_if(F.col("quorum") & (F.col("leaders") == 0)).alias("no_leader_polls"),
        F.min("serving").alias("min_serving"))
    agg = agg.join(interval(polls), "cluster", "left")
    return (agg.withColumn("minutes_without_quorum", minutes("no_quorum_polls"))
            .withColumn("minutes_without_leader", minutes("no_leader_polls")).drop("poll_interval_s"))


def zk_servers(consensus: DataFrame, period: Period) -> DataFrame:
    """Per cluster and ZooKeeper server: share of polls serving, polls as leader, worst lag and latency."""
    z = consensus.filter(in_period(period) & (F.col("kind") == "zookeeper"))
    serving = F.coalesce(F.col("serving"), F.lit(False))
    return z.groupBy("cluster", "server").agg(
        F.count(F.lit(1)).alias("polls"),
        (F.count_if(serving) / F.count(F.lit(1))).cast("double").alias("serving_share"),
        F.count_if(serving & (F.col("mode") == "leader")).alias("leader_polls"),
        F.max("lag_behind_leader").alias("max_lag_behind_leader"), F.max("latency_max_ms").alias("latency_max_ms"),
        F.avg("latency_avg_ms").alias("latency_avg_ms"))


def zk_follower_behind(consensus: DataFrame, poll_idx: DataFrame, period: Period) -> DataFrame:
    """Episodes of a ZooKeeper follower behind the leader's zxid (``lag_behind_leader > 0``) in consecutive polls."""
    z = consensus.filter(before_end(period) & (F.col("kind") == "zookeeper") & (F.col("lag_behind_leader") > 0))
    return episodes(z.select("cluster", "server", "time", "lag_behind_leader"), ["cluster", "server"], poll_idx,
                    period, [F.max("lag_behind_leader").alias("max_lag")])


def zk_write_rate(consensus: DataFrame, period: Period) -> DataFrame:
    """Per cluster and zxid epoch: committed writes (zxid counter growth) and writes per second.

    The counter restarts at each epoch, so growth is measured inside one epoch, between the first and the
    last poll of that epoch within the period.
    """
    p = zk_polls(consensus, period).filter(in_period(period) & F.col("zxid").isNotNull())
    agg = p.groupBy("cluster", "epoch").agg(
        F.min("time").alias("first_seen"), F.max("time").alias("last_seen"), F.count(F.lit(1)).alias("polls"),
        F.min("counter").alias("counter_first"), F.max("counter").alias("counter_last"))
    return (agg.withColumn("writes", F.col("counter_last") - F.col("counter_first"))
            .withColumn("seconds", (F.col("last_seen") - F.col("first_seen")).cast("double"))
            .withColumn("writes_per_s", F.when(F.col("seconds") > 0, F.col("writes") / F.col("seconds"))))


def zk_timeseries(consensus: DataFrame, period: Period, bucket_s: int = 900) -> DataFrame:
    """Per cluster and time bucket: fewest serving servers, ensemble size and zxid, for the ZooKeeper chart."""
    p = zk_polls(consensus, period).filter(in_period(period)).withColumn("bucket", bucket(period, bucket_s))
    return p.groupBy("cluster", "bucket").agg(
        F.min("serving").alias("serving_min"), F.max("servers").alias("servers"), F.max("epoch").alias("epoch"),
        F.max("counter").alias("counter")).orderBy("cluster", "bucket")


def kraft_leader_changes(consensus: DataFrame, period: Period) -> DataFrame:
    """One row per KRaft leader change seen: the quorum's leader_epoch rose above every earlier poll's."""
    k = consensus.filter(before_end(period) & (F.col("kind") == "kraft") & F.col("leader_epoch").isNotNull())
    per = k.groupBy("cluster", "time").agg(F.max("leader_epoch").alias("epoch"),
                                           F.max_by("leader_id", "leader_epoch").alias("leader_id"))
    w = Window.partitionBy("cluster").orderBy("time")
    per = (per.withColumn("epoch_before", F.max("epoch").over(w.rowsBetween(Window.unboundedPreceding, -1)))
           .withColumn("leader_before", F.lag("leader_id").over(w)))
    return (per.filter(in_period(period) & F.col("epoch_before").isNotNull() & (F.col("epoch") > F.col("epoch_before")))
            .select("cluster", "time", "epoch_before", F.col("epoch").alias("epoch_after"), "leader_before",
                    F.col("leader_id").alias("leader_after")))


def kraft_voter_lag(consensus: DataFrame, polls: DataFrame, period: Period, exact: bool = True,
                    accuracy: int = DEFAULT_ACCURACY) -> DataFrame:
    """Per cluster and KRaft replica: lag (records behind the quorum high watermark) percentiles, polls without
    a leader seen by it."""
    k = consensus.filter(in_period(period) & (F.col("kind") == "kraft"))
    return percentiles(k.groupBy("cluster", "node_id"), {"lag": "lag"}, exact, accuracy,
                       F.max_by("mode", "time").alias("role"), F.count(F.lit(1)).alias("polls"),
                       F.count_if(F.col("lag").isNull()).alias("unknown_lag_polls"),
                       F.count_if(F.col("leader_id") < 0).alias("no_leader_polls"))
