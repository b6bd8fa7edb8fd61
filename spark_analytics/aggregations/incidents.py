"""Incidents (``incident_events``, history version 2): one row per incident — one cause with the alerts it explains —
and per kind: opened, resolved, MTTR, longest, still open.

The collector correlates alerts into incidents (all brokers down in a cluster are one ``broker`` incident holding
every partition alert of the partitions they held; one ``topic`` incident per topic for partition alerts no broker
explains; ``consensus``, ``group``, ``transaction``, ``cluster``, ``monitor``) and records one event per change:
``opened``, ``updated`` (severity changed), ``resolved``, ``reopened`` (the cause came back within the hold-down
window: same id). An incident is a distinct ``id``; ``opened`` is when it first opened (a reopen keeps it), so a
flapping cause is one incident whose duration runs from its first opening to its last resolution.

History written before version 2 has no ``incident_events``: `incident_source` says, per cluster, whether the
incidents were recorded, and the headline falls back to the alert episodes (`aggregations.alerts`) where not.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from collectors.model.vocabulary import CLUSTER_WIDE_INCIDENT_KINDS, CRITICAL, INCIDENT_EVENT_ORDER, LOST, SEVERITY_RANK
from spark_analytics.aggregations.common import before_end, in_period
from spark_analytics.period import Period

FROM_INCIDENTS, FROM_ALERT_EPISODES = "incidents", "alert episodes"


def _rank(col: str) -> Column:
    return F.coalesce(*[F.when(F.col(col) == s, F.lit(r)) for s, r in SEVERITY_RANK.items()], F.lit(99))


def _severity_of(rank: Column) -> Column:
    return F.coalesce(*[F.when(rank == r, F.lit(s)) for s, r in SEVERITY_RANK.items()])


def incidents(incident_events: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """One row per incident (cluster, id) open at some time in the period, from its events up to the period end.

    ``status`` is ``resolved`` when its last event before the period end is ``resolved`` (``end`` = that
    ``resolved_at``, ``duration_s`` = end - ``start``, the first opening); ``lost`` when its last event is ``lost``
    (its collector stopped and the next one did not carry it on: it counts up to that event, the last poll that saw
    it open, and has no end: how it ended nobody saw); ``superseded`` when it was never
    resolved but a later incident of the same cause (cluster, kind, and the subject unless the kind is cluster-wide:
    `CLUSTER_WIDE_INCIDENT_KINDS`) opened: its collector lost it (a restart without a checkpoint, a standby taking
    over the history), the true end is unknown, and it counts up to the later one's start, like a superseded alert
    episode; else ``open`` (``open_for_s`` up to the period end, or the last poll when the data stops earlier).
    ``severity`` is the worst it reached, ``summary`` / ``subject`` / ``members`` the latest, ``alerts`` /
    ``partitions`` / ``topics`` / ``offline`` / ``under_min_isr`` the most at once, ``brokers`` every broker it
    held, ``reopens`` the ``reopened`` events.
    ``opened_in_period`` / ``resolved_in_period``: its first opening / its final resolution fall in the period.
    """
    order = F.coalesce(*[F.when(F.col("event") == e, F.lit(o)) for e, o in INCIDENT_EVENT_ORDER.items()], F.lit(2))
    ev = incident_events.filter(before_end(period)).withColumn("_ord", order).withColumn("_rank", _rank("severity"))
    last = F.max(F.struct(F.col("time"), F.col("_ord"), F.col("event"), F.col("resolved_at")))
    g = ev.groupBy("cluster", "id").agg(
        F.coalesce(F.min("opened"), F.min("time")).alias("start"), last.alias("_last"),
        F.max_by("kind", "time").alias("kind"), F.max_by("subject", "time").alias("subject"),
        F.min("_rank").alias("_worst"), F.max_by("summary", "time").alias("summary"),
        F.max_by("members", "time").alias("members"), F.max("alerts").alias("alerts"),
        F.max("partitions").alias("partitions"), F.max("topics").alias("topics"), F.max("offline").alias("offline"),
        F.max("under_min_isr").alias("under_min_isr"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list(F.coalesce(
            F.col("brokers"), F.array().cast("array<int>")))))).alias("brokers"),
        F.count_if(F.col("event") == "reopened").alias("reopens"))
    g = g.join(F.broadcast(polls.select("cluster", "last_poll")), "cluster", "left")
    as_of = F.least(F.lit(period.end), F.coalesce(F.col("last_poll"), F.lit(period.end)))
    resolved, lost = F.col("_last.event") == "resolved", F.col("_last.event") == LOST
    end = F.when(resolved, F.coalesce(F.col("_last.resolved_at"), F.col("_last.time")))
    cause = F.when(F.col("kind").isin(*CLUSTER_WIDE_INCIDENT_KINDS), F.col("kind")).otherwise(F.col("subject"))
    later = F.lead("start").over(Window.partitionBy("cluster", "kind", "_cause").orderBy("start", "id"))
    g = g.withColumn("_cause", cause).withColumn("_next", later)
    superseded = ~resolved & ~lost & F.col("_next").isNotNull()
    still_open = ~resolved & ~lost & ~superseded
    g = (g.withColumn("severity", _severity_of(F.col("_worst")))
         .withColumn("status", F.when(resolved, F.lit("resolved")).when(lost, F.lit(LOST))
                     .when(superseded, F.lit("superseded")).otherwise(F.lit("open")))
         .withColumn("end", end)
         .withColumn("duration_s", (F.col("end") - F.col("start")).cast("double"))
         .withColumn("open_for_s", F.when(still_open, F.greatest(F.lit(0.0), as_of - F.col("start")))))
    until = F.coalesce(F.col("end"), F.when(lost, F.col("_last.time")), F.col("_next"), as_of)
    g = g.withColumn("_until", until).filter((F.col("start") < F.lit(period.end))
                                             & (F.col("_until") >= F.lit(period.start)))
    inside = F.least(F.col("_until"), F.lit(period.end)) - F.greatest(F.col("start"), F.lit(period.start))
    return (g.withColumn("minutes_in_period", (F.greatest(F.lit(0.0), inside) / 60.0).cast("double"))
            .withColumn("opened_in_period", F.col("start") >= F.lit(period.start))
            .withColumn("resolved_in_period", resolved & (F.col("end") >= F.lit(period.start)))
            .select("cluster", "id", "kind", "severity", "subject", "start", "end", "status", "duration_s",
                    "open_for_s", "minutes_in_period", "opened_in_period", "resolved_in_period", "reopens", "alerts",
                    "partitions", "topics", "offline", "under_min_isr", "brokers", "members", "summary"))


def incident_kinds(incident_rows: DataFrame) -> DataFrame:
    """Per cluster and kind, from `incidents`: incidents in the period, opened, critical (opened), resolved, open
    at the end, lost (by their collector: end unseen), MTTR (mean ``duration_s`` of those resolved in the period)
    and the longest (open ones so far)."""
    return incident_rows.groupBy("cluster", "kind").agg(
        F.count(F.lit(1)).alias("incidents"), F.count_if("opened_in_period").alias("opened"),
        F.count_if(F.col("opened_in_period") & (F.col("severity") == CRITICAL)).alias("critical"),
        F.count_if("resolved_in_period").alias("resolved"), F.count_if(F.col("status") == "open").alias("open_at_end"),
        F.count_if(F.col("status") == LOST).alias("lost"),
        F.avg(F.when(F.col("resolved_in_period"), F.col("duration_s"))).alias("mttr_s"),
        F.max(F.coalesce(F.col("duration_s"), F.col("open_for_s"))).alias("longest_s"),
        F.sum("minutes_in_period").alias("minutes_in_period"), F.sum("alerts").alias("alerts"))


def incident_source(cluster: DataFrame, incident_events: DataFrame, period: Period) -> DataFrame:
    """Per polled cluster: were incidents recorded in the period (a version-2 collector)?

    ``incident_polls`` counts polls whose ``cluster`` row has ``incidents_open`` (null in version 1), ``events``
    the incident events in the period. ``source`` is ``incidents`` when either is > 0 (a quiet week of a version 2
    collector records polls with 0 open incidents and no events), else ``alert episodes``: the headline's
    incident figures then come from the alert episodes, as before version 2.
    """
    polls = cluster.filter(in_period(period)).groupBy("cluster").agg(
        F.countDistinct("time").alias("polls"),
        F.countDistinct(F.when(F.col("incidents_open").isNotNull(), F.col("time"))).alias("incident_polls"))
    events = incident_events.filter(in_period(period)).groupBy("cluster").agg(F.count(F.lit(1)).alias("events"))
    out = polls.join(events, "cluster", "left").withColumn("events", F.coalesce(F.col("events"), F.lit(0)))
    recorded = (F.col("incident_polls") > 0) | (F.col("events") > 0)
    return out.withColumn("source", F.when(recorded, F.lit(FROM_INCIDENTS)).otherwise(F.lit(FROM_ALERT_EPISODES)))
