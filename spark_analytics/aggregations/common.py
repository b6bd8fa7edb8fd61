"""What every table family shares: the period filters, percentiles, minutes from polls, episodes, time buckets.

The conventions these implement are written down once, in the package docstring (`spark_analytics.aggregations`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, GroupedData, Window
from pyspark.sql import functions as F

from spark_analytics.period import DAY_S, Period

PCTS: tuple[float, ...] = (0.5, 0.95, 0.99)
PCT_NAMES: tuple[str, ...] = ("p50", "p95", "p99")
EPISODE_GAP_FACTOR = 1.5


def in_period(period: Period, col: str = "time") -> Column:
    return (F.col(col) >= F.lit(period.start)) & (F.col(col) < F.lit(period.end))


def between(start: float, end: float, col: str = "time") -> Column:
    """``start <= col < end`` (the partials of a range of whole days)."""
    return (F.col(col) >= F.lit(start)) & (F.col(col) < F.lit(end))


def day_of(col: str = "time") -> Column:
    """The epoch day of a time column (``period.DAY_S``), the day key of the daily partials."""
    return F.floor(F.col(col) / DAY_S).cast("int")


def in_days(partials: DataFrame, period: Period) -> DataFrame:
    """The rows of day partials (a ``day`` column) that fall inside `period`."""
    first, last = period.epoch_days
    return partials.filter((F.col("day") >= F.lit(first)) & (F.col("day") < F.lit(last)))


def before_end(period: Period, col: str = "time") -> Column:
    return F.col(col) < F.lit(period.end)


def bucket(period: Period, bucket_s: int) -> Column:
    """The start of the chart time bucket a row's ``time`` falls in (buckets aligned on the period start)."""
    return F.floor((F.col("time") - F.lit(period.start)) / bucket_s) * bucket_s + F.lit(period.start)


def _pct_array(col: str, exact: bool, accuracy: int, frequency: str | None = None) -> Column:
    c = F.col(col).cast("double")
    if frequency is not None:  # each row stands for `frequency` observations of its value (exact only)
        return F.percentile(c, list(PCTS), F.col(frequency))
    if exact:
        return F.percentile(c, list(PCTS))
    return F.percentile_approx(c, list(PCTS), accuracy)


def _pct_unpack(df: DataFrame, prefix: str) -> DataFrame:
    arr = F.col(f"_{prefix}_pcts")
    # rounded to 1e-6: interpolation leaves float noise (62.00000000000001) that would only clutter the report
    df = df.withColumns({f"{prefix}_{name}": F.round(arr.getItem(i).cast("double"), 6)
                         for i, name in enumerate(PCT_NAMES)})
    cols = [c for c in df.columns if c != f"_{prefix}_pcts" and c != f"{prefix}_max"] + [f"{prefix}_max"]
    return df.select(*cols)


def percentiles(grouped: GroupedData, columns: dict[str, str], exact: bool, accuracy: int, *aggs: Column,
                frequency: str | None = None) -> DataFrame:
    """``grouped.agg(*aggs)`` followed by ``<prefix>_p50 / _p95 / _p99 / _max`` of each ``{column: prefix}``.

    The percentiles of one column come from one array aggregate (exact or approximate, see the package doc),
    unpacked into columns after the aggregation. `frequency`: a column of counts, each row standing for that many
    observations of its value (roll-ups of value counts; the percentiles are then exact, whatever `exact` says).
    """
    out = grouped.agg(*aggs, *[a for col, prefix in columns.items() for a in (
        _pct_array(col, exact, accuracy, frequency).alias(f"_{prefix}_pcts"), F.max(F.col(col).cast("double")).alias(
            f"{prefix}_max"))])
    for prefix in columns.values():
        out = _pct_unpack(out, prefix)
    return out


def minutes(polls_col: str, interval_col: str = "poll_interval_s") -> Column:
    """Polls with a condition as minutes: each poll stands for one poll interval of wall time."""
    return (F.col(polls_col) * F.col(interval_col) / 60.0).cast("double")


def interval(polls: DataFrame) -> DataFrame:
    return polls.select("cluster", "poll_interval_s")


def poll_index(cluster: DataFrame, polls: DataFrame, period: Period) -> DataFrame:
    """Every poll of each cluster up to the period end, numbered in time order (``idx``), with the interval.

    Episodes use it to tell "the next poll" from "a later poll": two flagged rows are consecutive when their
    polls' numbers differ by one, however irregular the gaps between polls are.
    """
    t = cluster.filter(before_end(period)).select("cluster", "time").distinct()
    t = t.withColumn("idx", F.row_number().over(Window.partitionBy("cluster").orderBy("time")))
    return t.join(F.broadcast(interval(polls)), "cluster", "left")


def episodes(flagged: DataFrame, keys: Sequence[str], poll_idx: DataFrame, period: Period,
             aggs: Sequence[Column] = ()) -> DataFrame:
    """Group flagged poll rows (``keys`` + ``time``) into episodes of consecutive polls (see the package doc); the
    episodes that overlap `period` (one may have started the week before).

    A flagged row whose time is not a poll of the ``cluster`` table (that table missing for the day) falls back
    to the time rule: it continues the episode when at most 1.5 poll intervals after the previous flagged row.
    """
    f = flagged.join(F.broadcast(poll_idx), ["cluster", "time"], "left")
    f = f.withColumn("poll_interval_s", F.coalesce(
        F.col("poll_interval_s"), F.first("poll_interval_s", ignorenulls=True).over(Window.partitionBy("cluster"))))
    w = Window.partitionBy(*keys).orderBy("time")
    prev_idx = F.lag("idx").over(w)
    gap = F.col("time") - F.lag("time").over(w)
    limit = F.col("poll_interval_s") * EPISODE_GAP_FACTOR
    by_index = F.col("idx").isNotNull() & prev_idx.isNotNull()
    new = (F.when(by_index, F.when(F.col("idx") - prev_idx > 1, 1).otherwise(0))
           .when(gap.isNull() | limit.isNull() | (gap > limit), 1).otherwise(0))
    f = f.withColumn("_new", new).withColumn(
        "_episode", F.sum("_new").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    out = f.groupBy(*keys, "_episode").agg(
        F.min("time").alias("start"), F.max("time").alias("end"), F.count(F.lit(1)).alias("polls"),
        F.first("poll_interval_s").alias("_iv"), *aggs)
    out = (out.withColumn("duration_s", (F.col("end") - F.col("start") + F.coalesce(F.col("_iv"), F.lit(0.0)))
                          .cast("double"))
           .drop("_episode", "_iv"))
    return out.filter((F.col("end") >= F.lit(period.start)) & (F.col("start") < F.lit(period.end)))
