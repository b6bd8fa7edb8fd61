"""The headline (one row of `spark_analytics.figures.HEADLINE` per cluster) and its week-over-week comparison."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from collectors.model.vocabulary import CRITICAL
from spark_analytics.aggregations.incidents import FROM_INCIDENTS
from spark_analytics.figures import HEADLINE, HEADLINE_NAMES

INCIDENT_COUNTS = ("incidents_opened", "critical_incidents", "incidents_open_at_end")
INCIDENT_TIMES = ("mttr_minutes", "longest_incident_minutes")


def _per_cluster(df: DataFrame, *aggs: Column) -> DataFrame:
    return df.groupBy("cluster").agg(*aggs)


def _incident_figures(rows: DataFrame, prefix: str) -> DataFrame:
    """The incident figures over `incidents` or `alert_episodes` rows (the same columns), names prefixed."""
    return _per_cluster(
        rows, F.count_if("opened_in_period").alias(f"{prefix}incidents_opened"),
        F.count_if(F.col("opened_in_period") & (F.col("severity") == CRITICAL)).alias(f"{prefix}critical_incidents"),
        F.count_if(F.col("status") == "open").alias(f"{prefix}incidents_open_at_end"),
        (F.avg(F.when(F.col("resolved_in_period"), F.col("duration_s"))) / 60.0).alias(f"{prefix}mttr_minutes"),
        (F.max(F.coalesce(F.col("duration_s"), F.col("open_for_s"))) / 60.0).alias(f"{prefix}longest_incident_minutes"))


def _incidents(out: DataFrame, t: dict[str, DataFrame]) -> DataFrame:
    """Incident figures from the incidents where the history recorded them (`incident_source`), else from the
    alert episodes (history version 1); counts 0 for a polled cluster, times null when nothing qualifies."""
    src = t["incident_source"].select("cluster", (F.col("source") == FROM_INCIDENTS).alias("_inc"))
    out = (out.join(src, "cluster", "left").join(_incident_figures(t["incidents"], "_i_"), "cluster", "left")
           .join(_incident_figures(t["alert_episodes"], "_e_"), "cluster", "left")
           .join(_per_cluster(t["alert_episodes"], F.count_if("opened_in_period").alias("alert_episodes_opened")),
                 "cluster", "left"))
    polled = F.col("polls") > 0
    for name in INCIDENT_COUNTS + INCIDENT_TIMES:
        i, e = F.col(f"_i_{name}"), F.col(f"_e_{name}")
        if name in INCIDENT_COUNTS:
            i, e = F.coalesce(i, F.lit(0)), F.coalesce(e, F.lit(0))
        out = out.withColumn(name, F.when(polled, F.when(F.coalesce(F.col("_inc"), F.lit(False)), i).otherwise(e)))
    return out.withColumn("alert_episodes_opened",
                          F.when(polled, F.coalesce(F.col("alert_episodes_opened"), F.lit(0))))


def headline(t: dict[str, DataFrame]) -> DataFrame:
    """One row per polled cluster with every `HEADLINE` figure, from the frames `compute_all` builds.

    Families whose source has no row for the cluster stay null (no ZooKeeper -> ZooKeeper figures null);
    counts over event tables are 0 for a polled cluster. Incident figures count incidents (one per cause) where
    the history recorded them, alert episodes where it did not (version 1: `aggregations.incidents`).
    """
    polls = t["polls"]
    pieces: list[tuple[DataFrame, bool]] = [  # (frame, counts: fill 0 when missing for a polled cluster)
        (t["cluster_health"].select("cluster", "unreachable_minutes"), False),
        (t["cluster_replication"].select("cluster", "under_replicated_minutes", "under_min_isr_minutes",
                                         "offline_minutes", "topics_under_min_isr"), False),
        (_per_cluster(t["isr_by_broker"], F.sum("isr_shrinks").alias("isr_shrinks"),
                      F.sum("isr_expands").alias("isr_expands")), True),
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
    out = _incidents(polls.select("cluster", "polls", "poll_interval_s", "coverage"), t)
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
