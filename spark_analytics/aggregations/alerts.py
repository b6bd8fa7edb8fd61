"""Alert episodes (``alert_events``): one row per alert the collector opened (open -> resolve), and per rule:
MTTR, longest, still open.

These are symptoms, not incidents: one broker crash opens an alert on every partition it held. Incidents (one per
cause) are in `aggregations.incidents`; alert episodes are the detail below them, and the headline's incident
figures fall back to them only for history written before incidents were recorded (version 1).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from collectors.model.vocabulary import LOST
from spark_analytics.aggregations.common import before_end
from spark_analytics.period import Period


def alert_episodes(alert_events: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """One row per alert episode (open/resolve pair, keyed by cluster, rule, subject, first_seen) in the period.

    ``status``: ``resolved`` (resolved before the period end; ``end`` and ``duration_s`` set), ``open`` (still
    open at the period end, or at the last poll when the data stops earlier: ``open_for_s`` is how long so
    far), ``lost`` (a ``lost`` event: its collector stopped and the next one did not carry it on; it counts up to
    that event, the last poll that saw it open, and has no end), or ``superseded`` (never resolved, but the same
    rule and subject opened again later: the collector restarted and lost its alert state, in history written
    before ``lost`` events; the true end is unknown). ``minutes_in_period`` is the part inside
    the period. A resolve event alone (the open was before the loaded range) still makes an episode.
    """
    ev = alert_events.filter(before_end(period))
    key = ["cluster", "rule", "subject", "first_seen"]
    g = ev.groupBy(*key).agg(
        F.max_by("severity", "time").alias("severity"), F.max_by("summary", "time").alias("summary"),
        F.min(F.when(F.col("event") == "resolve", F.col("resolved_at"))).alias("_resolved"),
        F.min(F.when(F.col("event") == LOST, F.col("time"))).alias("_lost"),
        F.max_by("value", "time").alias("value"))
    w = Window.partitionBy("cluster", "rule", "subject").orderBy("first_seen")
    g = g.withColumn("_next_open", F.lead("first_seen").over(w))
    g = g.join(F.broadcast(polls.select("cluster", "last_poll")), "cluster", "left")
    as_of = F.least(F.lit(period.end), F.coalesce(F.col("last_poll"), F.lit(period.end)))
    resolved = F.col("_resolved").isNotNull()
    lost = ~resolved & F.col("_lost").isNotNull()
    superseded = ~resolved & ~lost & F.col("_next_open").isNotNull()
    g = (g.withColumn("status", F.when(resolved, "resolved").when(lost, LOST).when(superseded, "superseded")
                      .otherwise("open"))
         .withColumn("start", F.col("first_seen"))
         .withColumn("end", F.col("_resolved"))
         .withColumn("duration_s", (F.col("_resolved") - F.col("first_seen")).cast("double"))
         .withColumn("open_for_s", F.when(F.col("status") == "open",
                                          F.greatest(F.lit(0.0), as_of - F.col("first_seen")))))
    until = (F.when(resolved, F.col("_resolved")).when(lost, F.col("_lost")).when(superseded, F.col("_next_open"))
             .otherwise(as_of))
    g = g.withColumn("_until", until).filter((F.col("start") < F.lit(period.end))
                                             & (F.col("_until") >= F.lit(period.start)))
    inside = F.least(F.col("_until"), F.lit(period.end)) - F.greatest(F.col("start"), F.lit(period.start))
    return (g.withColumn("minutes_in_period", (F.greatest(F.lit(0.0), inside) / 60.0).cast("double"))
            .withColumn("opened_in_period", (F.col("start") >= F.lit(period.start)))
            .withColumn("resolved_in_period", resolved & (F.col("_resolved") >= F.lit(period.start)))
            .select("cluster", "rule", "severity", "subject", "start", "end", "status", "duration_s", "open_for_s",
                    "minutes_in_period", "opened_in_period", "resolved_in_period", "summary", "value"))


def alert_summary(episode_rows: DataFrame) -> DataFrame:
    """Per cluster and rule: alert episodes opened, resolved, open at the end, lost (by their collector: end
    unseen), MTTR and longest (`alert_episodes`)."""
    return episode_rows.groupBy("cluster", "rule").agg(
        F.count(F.lit(1)).alias("episodes"), F.count_if("opened_in_period").alias("opened"),
        F.count_if("resolved_in_period").alias("resolved"), F.count_if(F.col("status") == "open").alias("open_at_end"),
        F.count_if(F.col("status") == LOST).alias("lost"),
        F.avg(F.when(F.col("resolved_in_period"), F.col("duration_s"))).alias("mttr_s"),
        F.max(F.coalesce(F.col("duration_s"), F.col("open_for_s"))).alias("longest_s"),
        F.sum("minutes_in_period").alias("minutes_in_period"), F.max_by("severity", "start").alias("severity"))
