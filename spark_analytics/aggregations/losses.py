"""The report's first section: data lost in the period (the collector's loss ledger), and the coverage behind a zero.

`data_lost` sums the history's ``loss_events`` per cluster, kind and subject, each loss once (`first_records`);
`poll_gaps` lists the stretches of
the period without a poll (longer than `GAP_FACTOR` poll intervals, the period's edges included), so that "no
data lost" next to gaps says what it cannot vouch for.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from collectors.model.vocabulary import LEADER_CHANGE_LOSSES, SAME_LOSS
from spark_analytics.aggregations.common import in_period
from spark_analytics.period import Period

GAP_FACTOR = 3.0


def first_records(loss_events: DataFrame) -> DataFrame:
    """The ledger's rows but the records of a leader change's loss again (`LEADER_CHANGE_LOSSES`): the first row
    of each `SAME_LOSS` is kept. A collector killed between its ledger write and its checkpoint recorded the same
    truncation, with the same count, after its restart; summed twice, the week lost twice the messages. The other
    kinds' rows are each their own (a retention skip: the messages deleted since the last one)."""
    once = F.col("kind").isin(*sorted(LEADER_CHANGE_LOSSES))
    first = F.row_number().over(Window.partitionBy(*SAME_LOSS).orderBy("time", "evidence"))
    return loss_events.withColumn("_first", first).filter(~once | (F.col("_first") == 1)).drop("_first")


def data_lost(loss_events: DataFrame, period: Period) -> DataFrame:
    """Per cluster, kind and subject (partition, group, ZooKeeper server or transactional id): ledger entries,
    each loss once (`first_records`: the rows before the period count as first records of it), messages (null
    where the kind has no count), first and last seen, the topic, and the evidence of the last entry."""
    e = first_records(loss_events).filter(in_period(period))
    partition = F.when(F.col("topic").isNotNull() & F.col("partition").isNotNull(),
                       F.concat_ws("-", F.col("topic"), F.col("partition").cast("string")))
    subject = F.coalesce(F.col("group_id"), F.col("transactional_id"), F.col("server"), partition, F.col("topic"))
    return (e.withColumn("subject", subject)
            .groupBy("cluster", "kind", "subject", "topic")
            .agg(F.count(F.lit(1)).alias("events"), F.sum("messages").alias("messages"),
                 F.min("time").alias("first"), F.max("time").alias("last"),
                 F.max_by("evidence", "time").alias("evidence")))


def poll_gaps(cluster: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Per cluster, each stretch of the period longer than `GAP_FACTOR` poll intervals without a poll."""
    times = cluster.filter(in_period(period)).select("cluster", "time").distinct()
    edges = polls.select("cluster", F.lit(float(period.start)).alias("time")).unionByName(
        polls.select("cluster", F.lit(float(period.end)).alias("time")))
    w = Window.partitionBy("cluster").orderBy("time")
    spans = (times.unionByName(edges).withColumn("from", F.lag("time").over(w))
             .select("cluster", F.col("from"), F.col("time").alias("to"))
             .filter(F.col("from").isNotNull()))
    return (spans.join(polls.select("cluster", "poll_interval_s"), "cluster")
            .filter(F.col("to") - F.col("from") > F.lit(GAP_FACTOR) * F.col("poll_interval_s"))
            .select("cluster", "from", "to", (F.col("to") - F.col("from")).alias("seconds")))
