"""The alert thresholds the report applies, per cluster: what the collector recorded (``cluster.thresholds``).

Since history version 2 every ``cluster`` row carries the collector's thresholds in force as JSON (the
``thresholds:`` section of its configuration). The report judges with the same numbers the collector alerted
with: the latest recorded value in the period, per cluster. A cluster whose history has none (version 1, or a
collector run without it) gets the collector's own defaults (`defaults.COLLECTOR_DEFAULTS`). A value given on the
command line wins over both.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_analytics.aggregations.common import in_period
from spark_analytics.aggregations.defaults import DEFAULT_LAG_SLO_S, DEFAULT_TXN_GRACE_S
from spark_analytics.period import Period

FROM_HISTORY, FROM_DEFAULTS, FROM_COMMAND_LINE = "history", "collector defaults", "command line"

USED: dict[str, tuple[str, float]] = {  # report column -> (Thresholds field, collector default)
    "lag_slo_s": ("lag_seconds_slo", DEFAULT_LAG_SLO_S),
    "txn_grace_s": ("txn_timeout_grace_s", DEFAULT_TXN_GRACE_S),
}
"""The thresholds the report's figures depend on."""


def thresholds(cluster: DataFrame, period: Period, lag_slo_s: float | None = None,
               txn_grace_s: float | None = None) -> DataFrame:
    """Per polled cluster: ``lag_slo_s`` and ``txn_grace_s`` with where each came from (``*_from``), and the
    recorded JSON (``thresholds``, null when none) with its time (``thresholds_time``).

    The recorded value is the latest non-null ``thresholds`` of the cluster's polls inside the period; a field
    missing from it (an older collector) falls back to the default like a missing record does.
    """
    c = cluster.filter(in_period(period))
    recorded = c.filter(F.col("thresholds").isNotNull())
    latest = recorded.groupBy("cluster").agg(F.max_by("thresholds", "time").alias("thresholds"),
                                             F.max("time").alias("thresholds_time"))
    out = c.select("cluster").distinct().join(latest, "cluster", "left")
    overrides = {"lag_slo_s": lag_slo_s, "txn_grace_s": txn_grace_s}
    for col, (field, default) in USED.items():
        got = F.get_json_object(F.col("thresholds"), f"$.{field}").cast("double")
        if overrides[col] is not None:
            value, source = F.lit(float(overrides[col])), F.lit(FROM_COMMAND_LINE)  # type: ignore[arg-type]
        else:
            value = F.coalesce(got, F.lit(float(default)))
            source = F.when(got.isNotNull(), F.lit(FROM_HISTORY)).otherwise(F.lit(FROM_DEFAULTS))
        out = out.withColumn(col, value.cast("double")).withColumn(f"{col}_from", source)
    return out.select("cluster", *[c for col in USED for c in (col, f"{col}_from")], "thresholds", "thresholds_time")


def per_cluster(df: DataFrame, value: float | DataFrame | None, column: str,
                default: float) -> tuple[DataFrame, Column]:
    """`df` and a column holding the threshold for each row's cluster: a number for all, a `thresholds` frame
    (its `column`, joined by cluster; the default where the frame has no row), or None for the default."""
    if isinstance(value, DataFrame):
        joined = df.join(F.broadcast(value.select("cluster", F.col(column).alias(f"_{column}"))), "cluster", "left")
        return joined, F.coalesce(F.col(f"_{column}"), F.lit(float(default)))
    return df, F.lit(float(default if value is None else value))
